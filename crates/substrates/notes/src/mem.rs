//! [`EvolvingNotes`]: the M4 substrate's state and its write, manage, read and
//! forget paths (the [`submem_core::Substrate`] impl is in `substrate.rs`).

use std::collections::BTreeSet;
use submem_core::{Event, ManageReport, Namespace, Query, Recall, Result, Services, WriteReport};
use submem_kit::batch::check_new_sources;
use submem_kit::embed::embed_checked;
use submem_kit::spaces::Spaces;
use submem_kit::stats::bump;

use crate::evolve::{edit_for, evolve_request, parse_evolve_reply};
use crate::note::{write_note, Writer};
use crate::store::{Note, PendingEvolution, Space};
use crate::{read, NotesConfig, NotesError};

submem_kit::counters! {
    /// Counters of what the LLM did, for reports and tests.
    pub struct NotesStats;
    pub(crate) struct Counters;
    {
        /// Notes written by the LLM (strict or repaired JSON).
        llm_notes,
        /// Notes written by the rule writer (no LLM, failed call, unusable reply).
        rule_notes,
        /// Evolution calls made.
        evolution_calls,
        /// Evolution calls that failed or gave unreadable replies.
        evolution_failures,
        /// Neighbour rewrites applied.
        rewrites,
        /// Notes repaired because a note they derived from was forgotten.
        forget_repairs,
    }
}

/// M4: evolving notes (A-Mem). See the crate docs.
pub struct EvolvingNotes {
    pub(crate) services: Services,
    pub(crate) config: NotesConfig,
    pub(crate) spaces: Spaces<Space>,
    /// Serialises the mutating operations (write, manage, forget, restore):
    /// they call models between short critical sections on `spaces`, and
    /// reads stay possible meanwhile.
    pub(crate) gate: tokio::sync::Mutex<()>,
    pub(crate) counters: Counters,
}

impl std::fmt::Debug for EvolvingNotes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvolvingNotes")
            .field("config", &self.config)
            .field(
                "llm",
                &self.services.llm.as_ref().map(|l| l.name().to_string()),
            )
            .finish_non_exhaustive()
    }
}

impl EvolvingNotes {
    /// A new, empty memory. Without `services.llm` notes come from the rule
    /// writer and nothing evolves.
    pub fn new(services: Services, config: NotesConfig) -> Result<Self> {
        config.validate().map_err(|e| e.during("new"))?;
        Ok(EvolvingNotes {
            services,
            config,
            spaces: Spaces::new(),
            gate: tokio::sync::Mutex::new(()),
            counters: Counters::default(),
        })
    }

    /// The settings in use.
    pub fn config(&self) -> &NotesConfig {
        &self.config
    }

    /// What the LLM did so far.
    pub fn stats(&self) -> NotesStats {
        self.counters.snapshot()
    }

    /// A copy of `namespace`'s notes in time order (for inspection and tests).
    pub fn notes(&self, namespace: &Namespace) -> Vec<Note> {
        self.spaces
            .read()
            .get(namespace)
            .map(|sp| sp.notes.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Evolutions queued for the next `manage()`.
    pub fn pending_evolutions(&self) -> usize {
        self.spaces.read().values().map(|sp| sp.pending.len()).sum()
    }

    /// Embeds `texts` in batches, checking count, length and finiteness.
    pub(crate) async fn embed(
        &self,
        texts: Vec<String>,
        op: &'static str,
    ) -> Result<Vec<Vec<f32>>> {
        embed_checked(&*self.services.embedder, &texts, self.config.embed_batch)
            .await
            .map_err(|e| e.into_core(|shape| NotesError::Embedding(shape.to_string()).during(op)))
    }

    pub(crate) async fn write_events(
        &self,
        namespace: &Namespace,
        events: &[Event],
    ) -> Result<WriteReport> {
        let _gate = self.gate.lock().await;
        {
            let spaces = self.spaces.read();
            let existing = spaces.get(namespace);
            check_new_sources(events, |id| {
                existing.is_some_and(|s| s.by_source.contains_key(id))
            })?;
        }
        if events.is_empty() {
            return Ok(WriteReport::default());
        }
        // One LLM call per unit, outside any lock.
        let mut notes = Vec::with_capacity(events.len());
        for e in events {
            let (own, writer) = write_note(self.services.llm.as_deref(), e, &self.config).await;
            match writer {
                Writer::Llm => bump(&self.counters.llm_notes, 1),
                Writer::Rule => bump(&self.counters.rule_notes, 1),
            }
            let raw = e.render();
            notes.push(Note {
                id: 0,
                source_id: e.source_id().to_string(),
                raw_tokens: self.services.tokens.count(&raw),
                raw,
                own,
                writer,
                edits: Vec::new(),
                links: BTreeSet::new(),
                embedding: Vec::new(),
            });
        }
        let vectors = self
            .embed(notes.iter().map(Note::embed_text).collect(), "write")
            .await?;
        let evolve = self.services.llm.is_some();
        let mut spaces = self.spaces.write();
        let space = spaces.entry(namespace.clone()).or_default();
        for (mut note, v) in notes.into_iter().zip(vectors) {
            note.id = space.next_id;
            space.next_id += 1;
            note.embedding = v;
            let near = space.nearest(
                &note.embedding,
                self.config.links.max(self.config.evolve_neighbours),
                None,
            );
            for (other, _) in near.iter().take(self.config.links) {
                note.links.insert(*other);
                if let Some(o) = space.notes.get_mut(other) {
                    o.links.insert(note.id);
                }
            }
            let close: Vec<u64> = near
                .iter()
                .filter(|(_, c)| *c >= self.config.evolve_threshold)
                .take(self.config.evolve_neighbours)
                .map(|(id, _)| *id)
                .collect();
            if evolve && !close.is_empty() {
                space.pending.push(PendingEvolution {
                    new_note: note.id,
                    neighbours: close,
                });
            }
            space.by_source.insert(note.source_id.clone(), note.id);
            space.notes.insert(note.id, note);
        }
        Ok(WriteReport {
            events: events.len(),
            units: events.len(),
        })
    }

    pub(crate) async fn run_evolutions(&self) -> Result<ManageReport> {
        let _gate = self.gate.lock().await;
        let Some(llm) = self.services.llm.clone() else {
            return Ok(ManageReport::default());
        };
        let mut names: Vec<Namespace> = self.spaces.read().keys().cloned().collect();
        names.sort();
        let mut changed = 0usize;
        for ns in names {
            let pending = {
                let mut spaces = self.spaces.write();
                match spaces.get_mut(&ns) {
                    Some(s) => std::mem::take(&mut s.pending),
                    None => continue,
                }
            };
            let mut stale: BTreeSet<u64> = BTreeSet::new();
            for p in pending {
                let prepared = {
                    let spaces = self.spaces.read();
                    spaces.get(&ns).and_then(|s| {
                        let new = s.notes.get(&p.new_note)?;
                        let neigh: Vec<&Note> =
                            p.neighbours.iter().filter_map(|n| s.notes.get(n)).collect();
                        if neigh.is_empty() {
                            return None;
                        }
                        let mut shown = new.provenance();
                        for n in &neigh {
                            shown.extend(n.provenance());
                        }
                        let ids: Vec<u64> = neigh.iter().map(|n| n.id).collect();
                        let content = std::iter::once(new)
                            .chain(neigh.iter().copied())
                            .map(|n| n.raw.as_str())
                            .collect::<Vec<_>>()
                            .join("\n");
                        Some((
                            evolve_request(new, &neigh, &self.config),
                            ids,
                            shown,
                            content,
                        ))
                    })
                };
                let Some((request, ids, shown, content)) = prepared else {
                    continue;
                };
                bump(&self.counters.evolution_calls, 1);
                let reply = match llm.complete(&request).await {
                    Ok(c) => c.text,
                    Err(e) => {
                        tracing::warn!(error = %e, "evolution call failed; skipped");
                        bump(&self.counters.evolution_failures, 1);
                        continue;
                    }
                };
                let Some(rewrites) = parse_evolve_reply(&reply, ids.len(), &content, &self.config)
                else {
                    bump(&self.counters.evolution_failures, 1);
                    continue;
                };
                let mut spaces = self.spaces.write();
                let Some(space) = spaces.get_mut(&ns) else {
                    continue;
                };
                for r in rewrites {
                    let Some(target) = ids.get(r.neighbour).and_then(|id| space.notes.get_mut(id))
                    else {
                        continue;
                    };
                    if let Some(edit) = edit_for(target, &r, p.new_note, &shown) {
                        target.edits.push(edit);
                        stale.insert(target.id);
                        changed += 1;
                        bump(&self.counters.rewrites, 1);
                    }
                }
            }
            self.reembed(&ns, &stale, "manage").await?;
        }
        Ok(ManageReport { changed })
    }

    /// Embeds the current text of `ids` again (after evolution or repair).
    pub(crate) async fn reembed(
        &self,
        ns: &Namespace,
        ids: &BTreeSet<u64>,
        op: &'static str,
    ) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let texts: Vec<(u64, String)> = {
            let spaces = self.spaces.read();
            let Some(s) = spaces.get(ns) else {
                return Ok(());
            };
            ids.iter()
                .filter_map(|id| s.notes.get(id).map(|n| (*id, n.embed_text())))
                .collect()
        };
        let vectors = self
            .embed(texts.iter().map(|(_, t)| t.clone()).collect(), op)
            .await?;
        let mut spaces = self.spaces.write();
        if let Some(s) = spaces.get_mut(ns) {
            for ((id, _), v) in texts.iter().zip(vectors) {
                if let Some(n) = s.notes.get_mut(id) {
                    n.embedding = v;
                }
            }
        }
        Ok(())
    }

    pub(crate) async fn read_query(&self, query: &Query) -> Result<Recall> {
        query.validate()?;
        let allowance = query.allowance();
        let empty = self
            .spaces
            .read()
            .get(&query.namespace)
            .is_none_or(|s| s.notes.is_empty());
        if empty || allowance == 0 {
            return Ok(Recall::empty());
        }
        let text = query.retrieval_text();
        let v = self
            .embed(vec![text], "read")
            .await?
            .pop()
            .ok_or_else(|| NotesError::Embedding("no query vector".into()).during("read"))?;
        let spaces = self.spaces.read();
        let Some(space) = spaces.get(&query.namespace) else {
            return Ok(Recall::empty());
        };
        let k = self.config.top_k.unwrap_or(query.top_k);
        let ranked = read::rank(space, &v, k, &self.config);
        Ok(read::render(
            space,
            &ranked,
            &query.retrieval_text(),
            &*self.services.tokens,
            allowance,
            &self.config,
        ))
    }

    pub(crate) async fn forget_sources(
        &self,
        namespace: &Namespace,
        source_ids: &[String],
    ) -> Result<usize> {
        let _gate = self.gate.lock().await;
        let (n, repaired) = {
            let mut spaces = self.spaces.write();
            let Some(space) = spaces.get_mut(namespace) else {
                return Ok(0);
            };
            let (n, repaired) = space.forget(source_ids);
            if space.notes.is_empty() {
                spaces.remove(namespace);
            }
            (n, repaired)
        };
        bump(&self.counters.forget_repairs, repaired.len() as u64);
        self.reembed(namespace, &repaired.into_iter().collect(), "forget")
            .await?;
        Ok(n)
    }

    pub(crate) async fn forget_namespace(&self, namespace: &Namespace) -> Result<usize> {
        let _gate = self.gate.lock().await;
        Ok(self
            .spaces
            .write()
            .remove(namespace)
            .map_or(0, |s| s.notes.len()))
    }
}
