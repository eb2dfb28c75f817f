//! [`FlexaMem`]: the store, its write path (units, notes, links) and its read
//! path (render until nothing is missing). The [`submem_core::Substrate`]
//! implementation is in `substrate.rs`.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use submem_core::{cosine, l2_normalize, Event, Namespace, Query, Recall, Regime, Services};
use submem_kit::record::{echoes_prompt, rule_record, Writer, WrittenRecord};

use crate::log::LogFile;
use crate::record::{
    llm_merge, parse_record_reply, record_request, rule_merge, Parsed, UnitKind, RECORD_INSTRUCTION,
};
use crate::render::{newest_unit_text, render, Ctx, Done, EmbedTarget, Outcome, Rendered};
use crate::state::{LogRecord, PieceKey, State, PIECE_VECTORS_PER_RECORD};
use crate::{FlexaConfig, FlexaError};

/// Name of the log file inside a store directory.
pub const LOG_FILE: &str = "flexamem.log";
/// Name written into the directory's manifest.
pub const STORE_NAME: &str = "FlexA-Mem";
/// Format version of the log.
pub const FORMAT_VERSION: u32 = 1;

/// Counters of what the record writer and the merger did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlexaStats {
    /// Records written by the LLM (strict or repaired JSON).
    pub llm_records: u64,
    /// Of those, replies that needed JSON repair.
    pub json_repairs: u64,
    /// LLM calls of the record writer that failed.
    pub record_llm_failures: u64,
    /// Replies too broken to repair.
    pub hopeless_json: u64,
    /// Records written by the fixed-rule writer because the LLM failed or wrote hopeless JSON.
    pub rule_fallbacks: u64,
    /// Records written by rule because no LLM is configured.
    pub rule_records: u64,
    /// Merged records written by the LLM.
    pub llm_merges: u64,
    /// Merge calls that failed (the rule merge was used instead).
    pub merge_llm_failures: u64,
    /// Merged records written by rule.
    pub rule_merges: u64,
    /// Merged records reused from the cache.
    pub merge_cache_hits: u64,
    /// Renders done.
    pub renders: u64,
}

/// FlexA-Mem: a write-once store rendered per call under a token budget.
#[derive(Debug)]
pub struct FlexaMem {
    pub(crate) services: Services,
    pub(crate) config: FlexaConfig,
    pub(crate) state: RwLock<State>,
    pub(crate) log: Mutex<Option<LogFile>>,
    pub(crate) dir: Option<PathBuf>,
    pub(crate) gate: tokio::sync::Mutex<()>,
    pub(crate) stats: Mutex<FlexaStats>,
    pub(crate) needs_compaction: AtomicBool,
}

fn poisoned() -> FlexaError {
    FlexaError::Internal("a lock was poisoned by a panicking thread".into())
}

impl FlexaMem {
    /// An ephemeral store held in memory.
    pub fn new(services: Services, config: FlexaConfig) -> submem_core::Result<Self> {
        config.validate().map_err(|e| e.during("new"))?;
        Ok(FlexaMem {
            state: RwLock::new(State::new(
                services.tokens.clone(),
                config.piece_sizes(),
                services.embedder.name().to_string(),
                config.stop_words,
            )),
            services,
            config,
            log: Mutex::new(None),
            dir: None,
            gate: tokio::sync::Mutex::new(()),
            stats: Mutex::new(FlexaStats::default()),
            needs_compaction: AtomicBool::new(false),
        })
    }

    /// A durable store in `dir` (created if missing): every write is appended
    /// to `dir/flexamem.log` and synced; reopening replays it. A torn record at
    /// the tail (a crash mid-write) is cut off and everything before it kept.
    pub fn open(
        dir: impl AsRef<Path>,
        services: Services,
        config: FlexaConfig,
    ) -> submem_core::Result<Self> {
        let dir = dir.as_ref();
        config.validate().map_err(|e| e.during("open"))?;
        std::fs::create_dir_all(dir).map_err(|e| submem_core::Error::io(dir, e))?;
        let manifest = dir.join(submem_kit::persist::MANIFEST_FILE);
        if manifest.exists() {
            submem_kit::persist::check_manifest(dir, STORE_NAME, FORMAT_VERSION)?;
        } else if dir.join(LOG_FILE).exists() {
            return Err(submem_core::Error::store(dir, "log without a manifest"));
        } else {
            submem_kit::persist::write_manifest(dir, STORE_NAME, FORMAT_VERSION)?;
        }
        let (log, payloads) = LogFile::open(&dir.join(LOG_FILE)).map_err(|e| e.during("open"))?;
        let mut state = State::new(
            services.tokens.clone(),
            config.piece_sizes(),
            services.embedder.name().to_string(),
            config.stop_words,
        );
        for p in payloads {
            let rec: LogRecord =
                serde_json::from_slice(&p).map_err(|e| FlexaError::from(e).during("open"))?;
            state.apply(&rec);
        }
        Ok(FlexaMem {
            state: RwLock::new(state),
            services,
            config,
            log: Mutex::new(Some(log)),
            dir: Some(dir.to_path_buf()),
            gate: tokio::sync::Mutex::new(()),
            stats: Mutex::new(FlexaStats::default()),
            needs_compaction: AtomicBool::new(false),
        })
    }

    /// The settings.
    pub fn config(&self) -> &FlexaConfig {
        &self.config
    }

    /// The store directory of a durable instance.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// What the record writer and the merger have done so far.
    pub fn stats(&self) -> FlexaStats {
        self.stats.lock().map(|s| *s).unwrap_or_default()
    }

    pub(crate) fn bump(&self, f: impl FnOnce(&mut FlexaStats)) {
        if let Ok(mut s) = self.stats.lock() {
            f(&mut s);
        }
    }

    pub(crate) fn read_state(&self) -> Result<RwLockReadGuard<'_, State>, FlexaError> {
        self.state.read().map_err(|_| poisoned())
    }

    pub(crate) fn write_state(&self) -> Result<RwLockWriteGuard<'_, State>, FlexaError> {
        self.state.write().map_err(|_| poisoned())
    }

    /// The log file, locked. Like the state, a lock a panicking thread left
    /// is an error, not taken over: the state may then hold part of a
    /// commit the log does not, and only a restart (a replay of the log)
    /// makes them agree again.
    pub(crate) fn lock_log(&self) -> Result<MutexGuard<'_, Option<LogFile>>, FlexaError> {
        self.log.lock().map_err(|_| poisoned())
    }

    /// Appends `records` to the log (when durable) and applies them; returns
    /// the events they removed.
    pub(crate) fn commit(
        &self,
        state: &mut State,
        records: &[LogRecord],
    ) -> Result<usize, FlexaError> {
        if records.is_empty() {
            return Ok(0);
        }
        {
            let mut log = self.lock_log()?;
            if let Some(log) = log.as_mut() {
                let payloads = records
                    .iter()
                    .map(serde_json::to_vec)
                    .collect::<Result<Vec<_>, _>>()?;
                log.append(&payloads)?;
            }
        }
        Ok(records.iter().map(|r| state.apply(r)).sum())
    }

    /// Raw text of every unit of `ns` in time order (for checks and tools).
    pub fn raw_units(&self, ns: &Namespace) -> Vec<String> {
        self.read_state()
            .map(|s| {
                s.ns.get(ns)
                    .map(|st| st.units.values().map(|u| u.raw()).collect())
                    .unwrap_or_default()
            })
            .unwrap_or_default()
    }

    /// Assigns `events` to units (new units as needed) and stores them.
    /// Returns the number of units created.
    pub(crate) fn store_events(
        &self,
        ns: &Namespace,
        events: &[Event],
    ) -> Result<usize, FlexaError> {
        let mut guard = self.write_state()?;
        let state = &mut *guard;
        let counter = state.counter();
        let cfg = &self.config;
        struct Open {
            id: u64,
            kind: UnitKind,
            session: Option<String>,
            packed: usize,
        }
        let st = state.ns.get(ns);
        let mut open = st
            .and_then(|s| s.open.and_then(|id| s.units.get(&id)))
            .map(|u| Open {
                id: u.id,
                kind: u.kind,
                session: u.session.clone(),
                packed: u.packed_tokens(),
            });
        let mut opener = st.and_then(|s| s.session_opener.clone());
        let mut next_unit = st.map_or(0, |s| s.next_unit);
        let first_seq = st.map_or(0, |s| s.next_seq);
        let mut created = 0;
        let mut records = Vec::new();
        for (next_seq, e) in (first_seq..).zip(events.iter()) {
            let tokens = counter.count(&e.render());
            let (kind, session, speaker) = UnitKind::of(e);
            let session = session.map(str::to_string);
            if let (Some(s), Some(sp)) = (&session, speaker) {
                if opener.as_ref().is_none_or(|(id, _)| id != s) {
                    opener = Some((s.clone(), sp.to_string()));
                }
            }
            let close = open.as_ref().is_some_and(|o| {
                if o.kind != kind || o.session != session {
                    return true;
                }
                match kind {
                    UnitKind::Agent => o.packed > 0 && o.packed + tokens > cfg.agent_unit_tokens,
                    UnitKind::Conversation => {
                        let over = o.packed > 0 && o.packed + tokens > cfg.conversation_unit_tokens;
                        let at_opener =
                            opener.as_ref().map(|(_, sp)| Some(sp.as_str())) == Some(speaker);
                        over && (at_opener || o.packed + tokens > 2 * cfg.conversation_unit_tokens)
                    }
                }
            });
            if close {
                if let Some(o) = open.take() {
                    records.push(LogRecord::Close {
                        ns: ns.clone(),
                        unit: o.id,
                    });
                }
            }
            let o = open.get_or_insert_with(|| {
                created += 1;
                next_unit += 1;
                Open {
                    id: next_unit - 1,
                    kind,
                    session: session.clone(),
                    packed: 0,
                }
            });
            o.packed += tokens;
            records.push(LogRecord::Event {
                ns: ns.clone(),
                unit: o.id,
                seq: next_seq,
                event: e.clone(),
            });
        }
        self.commit(state, &records)?;
        Ok(created)
    }

    /// Writes the note of every closed unit of `ns` that has none: one LLM
    /// call per unit (or the rule writer), one embedding batch, links to the
    /// most similar earlier notes. Returns how many notes were written.
    pub(crate) async fn seal_pending(&self, ns: &Namespace) -> Result<usize, FlexaError> {
        let todo: Vec<(u64, u32, UnitKind, String, WrittenRecord)> = {
            let s = self.read_state()?;
            let Some(st) = s.ns.get(ns) else { return Ok(0) };
            st.pending()
                .into_iter()
                .filter_map(|id| st.units.get(&id))
                .map(|u| {
                    let raw = u.raw();
                    let rule = rule_record(&u.rule_lines(), &raw, self.config.record_words);
                    (u.id, u.version, u.kind, raw, rule)
                })
                .collect()
        };
        if todo.is_empty() {
            return Ok(0);
        }
        let mut written = Vec::with_capacity(todo.len());
        for (id, version, kind, raw, rule) in todo {
            let w = self.write_record(kind, &raw, rule).await;
            written.push((id, version, w));
        }
        let texts: Vec<String> = written
            .iter()
            .map(|(_, _, w)| format!("{}\n{}", w.record, w.fields.joined()))
            .collect();
        let vecs = self.embed(&texts).await?;
        let mut guard = self.write_state()?;
        let state = &mut *guard;
        let mut n = 0;
        for ((id, version, w), v) in written.into_iter().zip(vecs) {
            let links = {
                let Some(st) = state.ns.get(ns) else { break };
                let Some(u) = st.units.get(&id) else { continue };
                if u.version != version || u.note.is_some() {
                    continue;
                }
                // The `links` most similar earlier notes (ties to the older),
                // kept in a small sorted buffer: O(n) per note, not O(n log n).
                let k = self.config.links;
                let mut best: Vec<(f32, u64)> = Vec::with_capacity(k + 1);
                for (uid, other) in st.units.range(..id) {
                    let Some(n) = other.note.as_ref() else {
                        continue;
                    };
                    let sim = cosine(&v, &n.embedding);
                    if best.len() == k && best.last().is_some_and(|w| w.0 >= sim) {
                        continue;
                    }
                    let pos = best
                        .iter()
                        .position(|(s, u)| sim > *s || (sim == *s && *uid < *u))
                        .unwrap_or(best.len());
                    best.insert(pos, (sim, *uid));
                    best.truncate(k);
                }
                best.into_iter().map(|(_, u)| u).collect()
            };
            let rec = LogRecord::Note {
                ns: ns.clone(),
                unit: id,
                version,
                record: w.record,
                fields: w.fields,
                writer: w.writer,
                embedding: v,
                links,
            };
            self.commit(state, &[rec])?;
            n += 1;
        }
        Ok(n)
    }

    /// Embeds every piece of `ns` that has no vector yet, in one batch, and
    /// logs the vectors. This is write work: without it the first dense or
    /// hybrid read of a memory embedded every piece (5 s on a LongMemEval
    /// haystack) and was billed as read latency. A configuration that ranks
    /// by BM25 alone skips it (ties still embed the few tied pieces).
    ///
    /// A write looks only at the newest units, back to the first one whose
    /// pieces all have vectors, so it costs what it adds, not the whole
    /// store; `everything` (manage) looks at every unit, which also fills
    /// in a store restored with another embedder's vectors.
    pub(crate) async fn embed_new_pieces(
        &self,
        ns: &Namespace,
        everything: bool,
    ) -> Result<usize, FlexaError> {
        if !self.config.ranks_by_vectors() {
            return Ok(0);
        }
        let todo: Vec<(PieceKey, String)> = {
            let s = self.read_state()?;
            let Some(st) = s.ns.get(ns) else { return Ok(0) };
            let mut todo = Vec::new();
            for u in st.units.values().rev() {
                let before = todo.len();
                todo.extend(
                    u.pieces()
                        .filter(|(k, _, _)| !st.piece_vecs.contains_key(k))
                        .map(|(k, p, _)| (k, p.shown())),
                );
                if !everything && todo.len() == before {
                    break;
                }
            }
            todo
        };
        if todo.is_empty() {
            return Ok(0);
        }
        let texts: Vec<String> = todo.iter().map(|(_, t)| t.clone()).collect();
        let vecs = self.embed(&texts).await?;
        let embedder = self.services.embedder.name().to_string();
        let pieces: Vec<(u64, u32, Vec<f32>)> = todo
            .iter()
            .zip(vecs)
            .map(|((k, _), v)| (k.0, k.1, v))
            .collect();
        let records: Vec<LogRecord> = pieces
            .chunks(PIECE_VECTORS_PER_RECORD)
            .map(|chunk| LogRecord::PieceVectors {
                ns: ns.clone(),
                embedder: embedder.clone(),
                pieces: chunk.to_vec(),
            })
            .collect();
        let mut guard = self.write_state()?;
        self.commit(&mut guard, &records)?;
        Ok(todo.len())
    }

    async fn write_record(&self, kind: UnitKind, raw: &str, rule: WrittenRecord) -> WrittenRecord {
        let Some(llm) = &self.services.llm else {
            self.bump(|s| s.rule_records += 1);
            return rule;
        };
        let prompt_raw = self
            .services
            .tokens
            .truncate(raw, self.config.prompt_raw_tokens);
        let req = record_request(
            kind,
            &prompt_raw,
            self.config.record_words,
            self.config.record_max_tokens,
        );
        match llm.complete(&req).await {
            Ok(c) => match parse_record_reply(&c.text, self.config.record_words) {
                Parsed::Clean(w) | Parsed::Repaired(w)
                    if echoes_prompt(&w.record, RECORD_INSTRUCTION, raw) =>
                {
                    tracing::debug!(record = %w.record, "record echoes the prompt; using the rule writer");
                    self.bump(|s| {
                        s.hopeless_json += 1;
                        s.rule_fallbacks += 1;
                    });
                    rule
                }
                Parsed::Clean(w) => {
                    self.bump(|s| s.llm_records += 1);
                    w
                }
                Parsed::Repaired(w) => {
                    self.bump(|s| {
                        s.llm_records += 1;
                        s.json_repairs += 1;
                    });
                    w
                }
                Parsed::Hopeless => {
                    tracing::debug!(reply = %c.text, "hopeless record JSON; using the rule writer");
                    self.bump(|s| {
                        s.hopeless_json += 1;
                        s.rule_fallbacks += 1;
                    });
                    rule
                }
            },
            Err(e) => {
                tracing::warn!(error = %e, "record writer LLM failed; using the rule writer");
                self.bump(|s| {
                    s.record_llm_failures += 1;
                    s.rule_fallbacks += 1;
                });
                rule
            }
        }
    }

    pub(crate) async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, FlexaError> {
        // One call for all: FlexA-Mem embeds a sealed unit's worth at a time.
        submem_kit::embed::embed_checked(&*self.services.embedder, texts, usize::MAX)
            .await
            .map_err(|e| FlexaError::Embedding(e.to_string()))
    }

    /// Renders memory for `query` with its accounting: the recall `read`
    /// returns, tokens and shares by resolution, the mode used.
    pub async fn render_detailed(&self, query: &Query) -> submem_core::Result<Rendered> {
        query.validate()?;
        self.render_inner(query, None)
            .await
            .map_err(|e| e.during("read"))
    }

    /// [`submem_core::Substrate::trace`]: the render of `query` with a trace
    /// of `source_ids`. Piece recovery only; unit recovery and histories that
    /// still fit whole give `None`. It reuses the read's caches (a trace after
    /// the read of the same query embeds the query and calls no LLM) and
    /// commits nothing to the log.
    pub async fn trace_read(
        &self,
        query: &Query,
        source_ids: &[String],
    ) -> submem_core::Result<Option<submem_core::ReadTrace>> {
        query.validate()?;
        let rendered = self
            .render_inner(query, Some(source_ids))
            .await
            .map_err(|e| e.during("trace"))?;
        Ok(rendered.trace)
    }

    async fn render_inner(
        &self,
        query: &Query,
        trace: Option<&[String]>,
    ) -> Result<Rendered, FlexaError> {
        let ns = &query.namespace;
        let newest = {
            let s = self.read_state()?;
            match s.ns.get(ns) {
                None => return Ok(empty_rendered()),
                Some(st) if st.units.is_empty() => return Ok(empty_rendered()),
                Some(st) => match (&query.regime, &query.newest) {
                    (Regime::Agentic, Some(n)) if !n.is_empty() => Some(n.clone()),
                    (Regime::Agentic, _) => newest_unit_text(st),
                    _ => None,
                },
            }
        };
        let mut texts = vec![query.text.clone()];
        if let Some(n) = &newest {
            texts.push(n.clone());
        }
        let vecs = self.embed(&texts).await?;
        let (qvec, piece_qvec) = match vecs.as_slice() {
            [q] => (q.clone(), q.clone()),
            [task, new] => {
                let mut sum: Vec<f32> = task.iter().zip(new).map(|(a, b)| a + b).collect();
                l2_normalize(&mut sum);
                (sum, new.clone())
            }
            _ => return Err(FlexaError::Embedding("unexpected query vectors".into())),
        };
        let llm_merges = self.services.llm.is_some();
        for _ in 0..1_000_000u32 {
            let outcome = {
                let s = self.read_state()?;
                let Some(st) = s.ns.get(ns) else {
                    return Ok(empty_rendered());
                };
                render(&Ctx {
                    st,
                    cfg: &self.config,
                    counter: s.counter(),
                    query,
                    qvec: &qvec,
                    piece_qvec: &piece_qvec,
                    llm_merges,
                    trace,
                })
            };
            match outcome {
                Outcome::Done(done) if trace.is_some() => return Ok(done.rendered),
                Outcome::Done(done) => return self.finish_render(ns, *done),
                Outcome::Need(need) => {
                    if !need.embed.is_empty() {
                        let texts: Vec<String> =
                            need.embed.iter().map(|(_, t)| t.clone()).collect();
                        let vecs = self.embed(&texts).await?;
                        let mut s = self.write_state()?;
                        if let Some(st) = s.ns.get_mut(ns) {
                            for ((target, _), v) in need.embed.into_iter().zip(vecs) {
                                match target {
                                    EmbedTarget::Piece(k) => {
                                        st.piece_vecs.insert(k, &v);
                                    }
                                    EmbedTarget::Provisional(k) => {
                                        // Older provisional vectors of this unit are stale.
                                        st.provisional.retain(|o, _| o.0 != k.0);
                                        st.provisional.insert(k, v);
                                    }
                                }
                            }
                        }
                    }
                    if let Some((key, inputs)) = need.merge {
                        self.write_merge(ns, key, &inputs).await?;
                    }
                }
            }
        }
        Err(FlexaError::Internal("render did not converge".into()))
    }

    async fn write_merge(
        &self,
        ns: &Namespace,
        key: crate::state::MergeKey,
        inputs: &[String],
    ) -> Result<(), FlexaError> {
        let cfg = &self.config;
        let (text, writer) = match &self.services.llm {
            Some(llm) => match llm_merge(
                &**llm,
                inputs,
                cfg.merged_record_words,
                cfg.merged_record_cut_words,
            )
            .await
            {
                Ok(t) => {
                    self.bump(|s| s.llm_merges += 1);
                    (t, Writer::Llm)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "merge LLM failed; using the rule merge");
                    self.bump(|s| {
                        s.merge_llm_failures += 1;
                        s.rule_merges += 1;
                    });
                    (rule_merge(inputs, cfg.merged_record_words), Writer::Rule)
                }
            },
            None => {
                self.bump(|s| s.rule_merges += 1);
                (rule_merge(inputs, cfg.merged_record_words), Writer::Rule)
            }
        };
        let mut s = self.write_state()?;
        self.commit(
            &mut s,
            &[LogRecord::Merge {
                ns: ns.clone(),
                key,
                text,
                writer,
            }],
        )?;
        Ok(())
    }

    fn finish_render(&self, ns: &Namespace, done: Done) -> Result<Rendered, FlexaError> {
        let mut records: Vec<LogRecord> = Vec::new();
        let new_rule = done.new_merges.len() as u64;
        for (key, text) in done.new_merges {
            records.push(LogRecord::Merge {
                ns: ns.clone(),
                key,
                text,
                writer: Writer::Rule,
            });
        }
        for key in done.adopt {
            records.push(LogRecord::Adopt {
                ns: ns.clone(),
                key,
            });
        }
        if !records.is_empty() {
            let mut s = self.write_state()?;
            self.commit(&mut s, &records)?;
        }
        let hits = done.cache_hits as u64;
        self.bump(|s| {
            s.rule_merges += new_rule;
            s.merge_cache_hits += hits;
            s.renders += 1;
        });
        Ok(done.rendered)
    }

    pub(crate) fn mark_compaction(&self) {
        self.needs_compaction.store(true, Ordering::SeqCst);
    }

    /// Rewrites the log from the state when tombstones are pending (durable
    /// stores); returns whether it did.
    pub(crate) fn compact(&self) -> Result<bool, FlexaError> {
        if !self.needs_compaction.swap(false, Ordering::SeqCst) {
            return Ok(false);
        }
        let mut s = self.write_state()?;
        let mut log = self.lock_log()?;
        let Some(log) = log.as_mut() else {
            for st in s.ns.values_mut() {
                st.dirty = false;
            }
            return Ok(false);
        };
        let payloads = s
            .snapshot()
            .iter()
            .map(serde_json::to_vec)
            .collect::<Result<Vec<_>, _>>()?;
        log.rewrite(&payloads)?;
        for st in s.ns.values_mut() {
            st.dirty = false;
        }
        Ok(true)
    }

    /// An empty state for this store's services and settings.
    pub(crate) fn empty_state(&self) -> State {
        State::new(
            self.services.tokens.clone(),
            self.config.piece_sizes(),
            self.services.embedder.name().to_string(),
            self.config.stop_words,
        )
    }
}

fn empty_rendered() -> Rendered {
    Rendered {
        recall: Recall::empty(),
        tokens_by: Default::default(),
        shares: Default::default(),
        mode: None,
        merged_records: 0,
        hidden_entries: 0,
        trace: None,
    }
}
