//! The [`Substrate`] implementation of [`GraphMemory`]: validation, phases,
//! forgetting with description repair, persistence as one JSON document.

use async_trait::async_trait;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use submem_core::{
    Error, Event, Family, Footprint, Forget, ManageReport, Namespace, Query, Recall, Result,
    Substrate, SubstrateInfo, WriteReport,
};
use submem_kit::batch::check_new_sources;
use submem_kit::persist::{load_states, save_states, NamespaceStates};

use crate::memory::GraphMemory;
use crate::store::{plan_chunks, NamespaceState, SavedNamespace};

/// Manifest name of a persisted M5 store.
pub const STORE_NAME: &str = "M5 dual-level-graph";
/// Format version of the persisted files.
pub const FORMAT_VERSION: u32 = 1;
/// The state file inside a persisted directory.
pub const STATE_FILE: &str = "graph.json";

#[async_trait]
impl Substrate for GraphMemory {
    fn info(&self) -> SubstrateInfo {
        SubstrateInfo::new(crate::M5, Family::STRUCTURAL, "dual-level-graph")
            .with_llm(self.uses_llm())
    }

    #[tracing::instrument(level = "debug", name = "m5.write", skip_all, fields(ns = %namespace, events = events.len()))]
    async fn write(&self, namespace: &Namespace, events: &[Event]) -> Result<WriteReport> {
        if events.is_empty() {
            return Ok(WriteReport::default());
        }
        // Refuse a bad batch before waiting for the lock; check what is
        // stored once it is held.
        check_new_sources(events, |_| false)?;
        let mut state = self.state.lock().await;
        let existing = state.get(namespace);
        check_new_sources(events, |id| {
            existing.is_some_and(|st| st.events.contains_key(id))
        })?;
        let counter = self.services.tokens.clone();
        let plan = plan_chunks(events, &*counter, self.config.chunk_tokens);
        // Extract first, then store: a write either lands whole or not at all.
        let mut extracted = Vec::with_capacity(plan.len());
        for group in &plan {
            let members: Vec<&Event> = group.iter().map(|&i| &events[i]).collect();
            let text = members
                .iter()
                .map(|e| e.render())
                .collect::<Vec<_>>()
                .join("\n");
            extracted.push((members.clone(), self.extract(&members, &text).await));
        }
        let st = state.entry(namespace.clone()).or_default();
        for (members, x) in &extracted {
            let id = st.add_chunk(members, &*counter);
            let touched = st.graph.add_extraction(id, x);
            st.apply_touched(touched);
        }
        self.compute_footprint(&state);
        Ok(WriteReport {
            events: events.len(),
            units: plan.len(),
        })
    }

    #[tracing::instrument(level = "debug", name = "m5.read", skip_all, fields(ns = %query.namespace, budget = query.budget))]
    async fn read(&self, query: &Query) -> Result<Recall> {
        self.read_impl(query).await
    }

    /// Extracts chunks that lost events to forgetting, then indexes every
    /// pending chunk, entity and relation.
    #[tracing::instrument(level = "debug", name = "m5.manage", skip_all)]
    async fn manage(&self) -> Result<ManageReport> {
        let mut state = self.state.lock().await;
        let mut changed = 0;
        for st in state.values_mut() {
            changed += self.extract_pending_chunks(st).await;
            changed += self
                .index_pending(st)
                .await
                .map_err(|e| e.during("manage"))?;
        }
        self.compute_footprint(&state);
        Ok(ManageReport { changed })
    }

    fn diagnostics(&self) -> submem_core::Diagnostics {
        submem_kit::stats::diagnostics_of(&self.stats())
    }

    fn footprint(&self) -> Footprint {
        match self.state.try_lock() {
            Ok(state) => self.compute_footprint(&state),
            Err(_) => self.last_footprint.lock().map(|f| *f).unwrap_or_default(),
        }
    }

    #[tracing::instrument(level = "debug", name = "m5.persist", skip_all, fields(dir = %dir.display()))]
    async fn persist(&self, dir: &Path) -> Result<()> {
        let saved = {
            let state = self.state.lock().await;
            NamespaceStates::new(
                Some(&*self.services.embedder),
                state.iter().map(|(ns, st)| (ns.clone(), st.to_saved())),
            )
        };
        let bytes = save_states(dir, STORE_NAME, FORMAT_VERSION, STATE_FILE, &saved)?;
        self.disk_bytes.store(bytes, Ordering::Relaxed);
        Ok(())
    }

    async fn restore(&self, dir: &Path) -> Result<()> {
        let loaded = load_states::<SavedNamespace>(dir, STORE_NAME, FORMAT_VERSION, STATE_FILE)?;
        // Vectors from another embedder are dropped and re-embedded on the
        // next manage, so a changed embedder is not an error here.
        let same_embedder = loaded.states.embedder == self.services.embedder.name();
        let dimension = self.services.embedder.dimension();
        let path = loaded.path;
        let mut fresh = BTreeMap::new();
        for (ns, s) in loaded.states.validated(&path, |_, _| Ok(()))? {
            let st = NamespaceState::from_saved(s, dimension, same_embedder)
                .map_err(|reason| Error::store(&path, format!("namespace {ns}: {reason}")))?;
            fresh.insert(ns, st);
        }
        let mut state = self.state.lock().await;
        *state = fresh;
        self.disk_bytes.store(loaded.bytes, Ordering::Relaxed);
        self.compute_footprint(&state);
        Ok(())
    }

    /// Forgetting sources removes their events, removes every graph
    /// contribution of the chunks holding them (descriptions are rebuilt
    /// from the remaining chunks, entities and relations left without a
    /// source are deleted, their vectors dropped) and queues what remains
    /// of those chunks for embedding and (setting) re-extraction on `manage`.
    #[tracing::instrument(level = "debug", name = "m5.forget", skip_all, fields(ns = %target.namespace()))]
    async fn forget(&self, target: &Forget) -> Result<usize> {
        let mut state = self.state.lock().await;
        let removed = match target {
            Forget::Namespace(ns) => state.remove(ns).map_or(0, |st| st.events.len()),
            Forget::Sources {
                namespace,
                source_ids,
            } => state.get_mut(namespace).map_or(0, |st| {
                st.forget_sources(
                    source_ids,
                    self.config.reextract_on_forget,
                    &*self.services.tokens,
                )
            }),
        };
        if let Forget::Sources { namespace, .. } = target {
            if state.get(namespace).is_some_and(|st| st.events.is_empty()) {
                state.remove(namespace);
            }
        }
        self.compute_footprint(&state);
        Ok(removed)
    }
}
