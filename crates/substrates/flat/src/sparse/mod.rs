//! M2, sparse BM25 over a flat store (*Harness the Memory*, §M2).
//!
//! **Write**: each event's rendered text ([`Event::render`]) becomes one
//! tantivy document, analysed by a simple tokenizer, a long-token filter,
//! lower-casing and a stop-word list ([`SparseConfig::stop_words`], by
//! default the broad English one). **Read**: the query's
//! [`Query::retrieval_text`] goes through the same analyzer; its distinct
//! terms become `SHOULD` term queries inside a `MUST` namespace filter (built
//! by hand, never by tantivy's query parser, so quotes, colons, parentheses,
//! `AND` or any unicode in user text cannot make a read fail). The BM25 top-k
//! is rendered in time order under [`Query::allowance`]
//! ([`PackPolicy::SkipUnfit`](submem_kit::PackPolicy::SkipUnfit)); ties go to the newer unit.
//!
//! **BM25**: tantivy 0.27 scores `idf · (k1 + 1) · tf / (tf + k1 · (1 − b +
//! b · dl / avgdl))` with `idf = ln(1 + (N − n + 0.5) / (n + 0.5))`, `k1 = 1.2`
//! and `b = 0.75` (constants in `tantivy/src/query/bm25.rs`; the test
//! `bm25_matches_hand_computed_scores` checks them). `N`, `n` and `avgdl`
//! are the **namespace's own** (see [`analyzer`](self)), so one tenant's
//! ranking never depends on another's writes. Document lengths go through
//! tantivy's one-byte field norms, which are exact up to 40 tokens.
//!
//! **Storage**: one RAM index serves every namespace; the text is kept in a
//! side map (not stored in tantivy). `persist` writes a fresh on-disk index;
//! `restore` opens it mmapped and read-only; the first write or forget after
//! that moves it back to RAM by re-indexing the side map. No tantivy writer
//! is kept between changes (see [`index`](self)): an idle instance holds no
//! thread, and one with 20 turns about 30 KiB resident instead of 4–5 MiB,
//! which matters where one instance serves each namespace.
//!
//! **Deviation from the paper**: none in method; every write commits, so a
//! read sees every finished write (large batches amortise the commit).
//!
//! **Parity with `rank_bm25`** (`scripts/peers/bm25_peer.py`, Recall@10 over
//! ten LoCoMo conversations, category 5 left out): a plain `BM25Okapi` over
//! the same rendered turns with a broad stop list scores 0.593 on the nine
//! conversations besides conv-26 and 0.569 on conv-26. tantivy's defaults
//! scored 0.540 / 0.527; the stop list is 0.048 / 0.042 of that gap, the IDF
//! variant (tantivy's `ln(1 + x)` against Okapi's floored `ln x`) 0.009 /
//! 0.007, and k1 (1.2 against 1.5) −0.004 / 0.000. What is indexed matters
//! more than any of them: the session date and speaker in the rendered turn
//! lift the same peer from 0.529 (turn text only) to 0.593.

mod analyzer;
mod config;
mod index;
mod persist;

pub use config::{SparseConfig, MIN_WRITER_HEAP_BYTES};

use async_trait::async_trait;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;
use submem_core::{
    Error, Event, Family, Footprint, Forget, Namespace, Query, ReadTrace, Recall, Result, Services,
    Substrate, SubstrateInfo, WriteReport,
};
use submem_kit::batch::{check_new_sources, stored_ids};
use submem_kit::RankedUnit;
use tantivy::tokenizer::TextAnalyzer;

use crate::error::FlatResult;
use crate::unit::{check_new_ids, exists_in, tokens_u32, NewUnit, StoredUnit};
use analyzer::{build_analyzer, tokens, NsStats};
use index::{Backing, TantivyIndex};
use submem_kit::spaces;

/// Method id used in errors ([`crate::M2`]).
pub(crate) const METHOD: &str = "M2";

/// One namespace's side map and BM25 statistics.
#[derive(Debug, Default)]
struct SparseNs {
    units: BTreeMap<u64, StoredUnit>,
    ids: HashMap<String, u64>,
    next_position: u64,
    stats: NsStats,
}

impl SparseNs {
    fn insert(&mut self, unit: StoredUnit, analyzer: &mut TextAnalyzer) {
        self.stats.add(&tokens(analyzer, &unit.text));
        self.next_position = self.next_position.max(unit.position + 1);
        self.ids.insert(unit.source_id.clone(), unit.position);
        self.units.insert(unit.position, unit);
    }

    fn remove(&mut self, source_id: &str, analyzer: &mut TextAnalyzer) -> bool {
        let Some(pos) = self.ids.remove(source_id) else {
            return false;
        };
        if let Some(unit) = self.units.remove(&pos) {
            self.stats.remove(&tokens(analyzer, &unit.text));
        }
        true
    }

    fn memory_bytes(&self) -> u64 {
        let units: u64 = self.units.values().map(|u| u.heap_bytes() + 16).sum();
        let ids: u64 = self.ids.keys().map(|k| (k.capacity() + 40) as u64).sum();
        units + ids + self.stats.heap_bytes()
    }

    fn stored_tokens(&self) -> u64 {
        self.units.values().map(|u| u64::from(u.tokens)).sum()
    }
}

struct State {
    index: TantivyIndex,
    spaces: HashMap<Namespace, SparseNs>,
    analyzer: TextAnalyzer,
}

impl State {
    /// Moves a read-only (restored, mmapped) index to RAM before a change.
    fn ensure_writable(&mut self, cfg: &SparseConfig) -> FlatResult<()> {
        if self.index.backing() == &Backing::Ram {
            return Ok(());
        }
        tracing::debug!("moving the restored index to RAM before its first change");
        let mut ram = TantivyIndex::new_ram(cfg)?;
        ram.add(
            self.spaces
                .iter()
                .flat_map(|(ns, s)| s.units.values().map(move |u| (ns.as_str(), u))),
        )?;
        self.index = ram;
        Ok(())
    }
}

/// M2: BM25 top-k retrieval over every stored unit.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> submem_core::Result<()> {
/// use submem_core::{test_utils::test_services, Event, Namespace, Query, Substrate, Turn};
/// use submem_flat::{SparseConfig, SparseMemory};
/// let m2 = SparseMemory::new(test_services(None), SparseConfig::default())?;
/// let ns = Namespace::new("alice")?;
/// let turn = |id: &str, text: &str| Event::Turn(Turn {
///     session_id: "s1".into(), session_date: None, speaker: "Alice".into(),
///     text: text.into(), source_id: id.into(),
/// });
/// m2.write(&ns, &[turn("D1:1", "I parked on level 3."), turn("D1:2", "Lunch was great.")]).await?;
/// let recall = m2.read(&Query::question(ns, "Where (level?) did I park: \"car\"", 4096)).await?;
/// assert_eq!(recall.source_ids().next(), Some("D1:1"));
/// # Ok(()) }
/// ```
pub struct SparseMemory {
    services: Services,
    config: SparseConfig,
    state: RwLock<State>,
    disk_bytes: AtomicU64,
}

submem_kit::debug_fields!(SparseMemory { config });

impl SparseMemory {
    /// A new, empty sparse memory (RAM index); uses `services.tokens` only.
    pub fn new(services: Services, config: SparseConfig) -> Result<Self> {
        config
            .validate()
            .map_err(|e| Error::InvalidInput(e.to_string()))?;
        let index = TantivyIndex::new_ram(&config).map_err(|e| e.into_core(METHOD, "new"))?;
        let analyzer = build_analyzer(&config);
        Ok(SparseMemory {
            services,
            config,
            state: RwLock::new(State {
                index,
                spaces: HashMap::new(),
                analyzer,
            }),
            disk_bytes: AtomicU64::new(0),
        })
    }

    /// The settings in use.
    pub fn config(&self) -> &SparseConfig {
        &self.config
    }

    /// The namespace's `n` best BM25 matches for `text` (best first), each
    /// with its cached token count: the ranking a read packs.
    pub(crate) fn rank(
        &self,
        namespace: &Namespace,
        text: &str,
        n: usize,
    ) -> Result<Vec<(RankedUnit, u32)>> {
        let state = spaces::read(&self.state);
        let Some(space) = state.spaces.get(namespace) else {
            return Ok(Vec::new());
        };
        let mut analyzer = state.analyzer.clone();
        let mut terms = tokens(&mut analyzer, text);
        terms.sort_unstable();
        terms.dedup();
        terms.retain(|t| space.stats.df(t) > 0);
        let hits = state
            .index
            .search(namespace.as_str(), &terms, n, &space.stats)
            .map_err(|e| e.into_core(METHOD, "read"))?;
        Ok(hits
            .into_iter()
            .filter_map(|(score, position)| {
                let unit = space.units.get(&position);
                if unit.is_none() {
                    tracing::warn!(position, "index hit has no unit in the side map");
                }
                unit.map(|u| u.ranked(position, score))
            })
            .collect())
    }

    /// Stores `units` in `namespace`, whole or not at all: ids are checked
    /// again under the lock (another task may have written the same ids
    /// since the caller validated them).
    pub(crate) fn write_units(&self, namespace: &Namespace, units: Vec<NewUnit>) -> Result<()> {
        let counts: Vec<u32> = units
            .iter()
            .map(|u| tokens_u32(self.services.tokens.count(&u.text)))
            .collect();
        let mut guard = spaces::write(&self.state);
        let state = &mut *guard;
        check_new_ids(
            &units,
            exists_in(state.spaces.get(namespace).map(|s| &s.ids)),
        )?;
        state
            .ensure_writable(&self.config)
            .map_err(|e| e.into_core(METHOD, "write"))?;
        let first = state.spaces.get(namespace).map_or(0, |s| s.next_position);
        let units: Vec<StoredUnit> = units
            .into_iter()
            .zip(counts)
            .enumerate()
            .map(|(i, (u, tokens))| StoredUnit {
                source_id: u.source_id,
                text: u.text,
                position: first + i as u64,
                tokens,
            })
            .collect();
        state
            .index
            .add(units.iter().map(|u| (namespace.as_str(), u)))
            .map_err(|e| e.into_core(METHOD, "write"))?;
        let space = state.spaces.entry(namespace.clone()).or_default();
        for unit in units {
            space.insert(unit, &mut state.analyzer);
        }
        Ok(())
    }

    /// The distinct analysed terms of `text` (what a read searches for).
    pub fn analyze(&self, text: &str) -> Vec<String> {
        let mut analyzer = build_analyzer(&self.config);
        let mut terms = tokens(&mut analyzer, text);
        terms.sort_unstable();
        terms.dedup();
        terms
    }
}

#[async_trait]
impl Substrate for SparseMemory {
    fn info(&self) -> SubstrateInfo {
        SubstrateInfo::new(
            crate::M2,
            Family::FLAT,
            self.config.depth().substrate_name("sparse-bm25"),
        )
    }

    #[tracing::instrument(name = "m2.write", skip_all, fields(ns = %namespace, events = events.len()))]
    async fn write(&self, namespace: &Namespace, events: &[Event]) -> Result<WriteReport> {
        if events.is_empty() {
            return Ok(WriteReport::default());
        }
        {
            let state = spaces::read(&self.state);
            check_new_sources(
                events,
                exists_in(state.spaces.get(namespace).map(|s| &s.ids)),
            )?;
        }
        self.write_units(namespace, NewUnit::from_events(events))?;
        Ok(WriteReport {
            events: events.len(),
            units: events.len(),
        })
    }

    #[tracing::instrument(name = "m2.read", skip_all, fields(ns = %query.namespace, k = query.top_k))]
    async fn read(&self, query: &Query) -> Result<Recall> {
        query.validate()?;
        let depth = self.config.depth();
        let ranked = self.rank(
            &query.namespace,
            &query.retrieval_text(),
            depth.candidates(query.top_k),
        )?;
        Ok(depth.show(ranked, query, &*self.services.tokens))
    }

    /// The read's ranking, as deep as a fill read ranks or
    /// [`crate::fill::TRACE_DEPTH`] deep for a top-k read
    /// ([`crate::fill::ReadDepth::trace`]).
    async fn trace(&self, query: &Query, source_ids: &[String]) -> Result<Option<ReadTrace>> {
        query.validate()?;
        let depth = self.config.depth();
        let n = depth.trace_candidates(query.top_k);
        let ranked = self.rank(&query.namespace, &query.retrieval_text(), n)?;
        Ok(Some(depth.trace(
            &ranked,
            query,
            &*self.services.tokens,
            source_ids,
        )))
    }

    /// A fill read ranks once for both (its trace is its own ranking); a
    /// top-k read traces deeper than it reads, so it does both.
    async fn read_traced(
        &self,
        query: &Query,
        source_ids: &[String],
    ) -> Result<(Recall, Option<ReadTrace>)> {
        let depth = self.config.depth();
        if !depth.is_fill() || source_ids.is_empty() {
            return submem_core::substrate::read_then_trace(self, query, source_ids).await;
        }
        query.validate()?;
        let ranked = self.rank(
            &query.namespace,
            &query.retrieval_text(),
            depth.candidates(query.top_k),
        )?;
        Ok(depth.show_traced(ranked, query, &*self.services.tokens, source_ids))
    }

    fn footprint(&self) -> Footprint {
        let mut fp = Footprint {
            disk_bytes: self.disk_bytes.load(Ordering::Relaxed),
            ..Footprint::default()
        };
        let state = spaces::read(&self.state);
        if state.index.backing() == &Backing::Ram {
            fp.memory_bytes += state.index.index_bytes();
        }
        for space in state.spaces.values() {
            fp.memory_bytes += space.memory_bytes();
            fp.stored_tokens += space.stored_tokens();
        }
        fp.input_tokens = fp.stored_tokens;
        fp
    }

    #[tracing::instrument(name = "m2.persist", skip_all, fields(dir = %dir.display()))]
    async fn persist(&self, dir: &Path) -> Result<()> {
        let state = spaces::read(&self.state);
        let bytes = persist::save(dir, &self.config, &state.index, &state.spaces)?;
        self.disk_bytes.store(bytes, Ordering::Relaxed);
        Ok(())
    }

    #[tracing::instrument(name = "m2.restore", skip_all, fields(dir = %dir.display()))]
    async fn restore(&self, dir: &Path) -> Result<()> {
        let mut analyzer = build_analyzer(&self.config);
        let (index, saved, bytes) = persist::load(dir, &self.config)?;
        let mut spaces = HashMap::with_capacity(saved.len());
        for (ns, next_position, units) in saved {
            let mut space = SparseNs {
                next_position,
                ..SparseNs::default()
            };
            for unit in units {
                if space.ids.contains_key(&unit.source_id)
                    || space.units.contains_key(&unit.position)
                {
                    return Err(Error::store(
                        dir,
                        format!("namespace {ns} repeats source id {:?}", unit.source_id),
                    ));
                }
                space.insert(unit, &mut analyzer);
            }
            spaces.insert(ns, space);
        }
        let mut state = spaces::write(&self.state);
        state.index = index;
        state.spaces = spaces;
        self.disk_bytes.store(bytes, Ordering::Relaxed);
        Ok(())
    }

    #[tracing::instrument(name = "m2.forget", skip_all, fields(ns = %target.namespace()))]
    async fn forget(&self, target: &Forget) -> Result<usize> {
        let mut guard = spaces::write(&self.state);
        let state = &mut *guard;
        let ns = target.namespace();
        let Some(space) = state.spaces.get(ns) else {
            return Ok(0);
        };
        match target {
            Forget::Namespace(_) => {
                let n = space.units.len();
                state
                    .ensure_writable(&self.config)
                    .and_then(|()| state.index.delete_namespace(ns.as_str()))
                    .map_err(|e| e.into_core(METHOD, "forget"))?;
                state.spaces.remove(ns);
                Ok(n)
            }
            Forget::Sources { source_ids, .. } => {
                // Borrowed from `source_ids`, not the state: the index can
                // change while they are held. Sorted, so deletes run in the
                // same order every time.
                let mut present: Vec<&str> =
                    stored_ids(source_ids, |id| space.ids.contains_key(id))
                        .into_iter()
                        .collect();
                if present.is_empty() {
                    return Ok(0);
                }
                present.sort_unstable();
                state
                    .ensure_writable(&self.config)
                    .and_then(|()| state.index.delete_sources(ns.as_str(), &present))
                    .map_err(|e| e.into_core(METHOD, "forget"))?;
                let mut n = 0;
                if let Some(space) = state.spaces.get_mut(ns) {
                    for id in present {
                        if space.remove(id, &mut state.analyzer) {
                            n += 1;
                        }
                    }
                }
                Ok(n)
            }
        }
    }
}
