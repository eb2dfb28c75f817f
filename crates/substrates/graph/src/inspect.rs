//! Read-only views of one namespace's memory, for tests, reports and
//! debugging: counts, every stored text, and an invariant check that proves
//! forgetting left nothing stale behind.

use submem_core::Namespace;

use crate::index::digest;
use crate::memory::{relation_text, GraphMemory};

/// Sizes of one namespace's memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GraphCounts {
    /// Events stored.
    pub events: usize,
    /// Chunks.
    pub chunks: usize,
    /// Entities (graph nodes).
    pub entities: usize,
    /// Relations (graph edges).
    pub relations: usize,
    /// Vectors held, over the three indexes.
    pub vectors: usize,
    /// Items waiting for a vector.
    pub pending: usize,
}

impl GraphMemory {
    /// Sizes of `ns`'s memory (all zero when it holds nothing).
    pub async fn counts(&self, ns: &Namespace) -> GraphCounts {
        let state = self.state.lock().await;
        state
            .get(ns)
            .map_or_else(GraphCounts::default, |st| GraphCounts {
                events: st.events.len(),
                chunks: st.chunks.len(),
                entities: st.graph.entity_count(),
                relations: st.graph.relation_count(),
                vectors: st.chunk_index.vectors.len()
                    + st.entity_index.vectors.len()
                    + st.relation_index.vectors.len(),
                pending: st.chunk_index.pending.len()
                    + st.entity_index.pending.len()
                    + st.relation_index.pending.len(),
            })
    }

    /// Every text `ns`'s memory holds: chunk texts, entity names, types and
    /// every per-source and merged description, relation keywords and
    /// descriptions.
    pub async fn stored_texts(&self, ns: &Namespace) -> Vec<String> {
        let state = self.state.lock().await;
        let Some(st) = state.get(ns) else {
            return Vec::new();
        };
        let mut out: Vec<String> = st.chunks.values().map(|c| c.text.clone()).collect();
        for e in st.graph.entities() {
            out.push(e.index_text());
            for c in e.sources.values() {
                out.push(c.name.clone());
                out.extend(c.descriptions.iter().cloned());
            }
        }
        for r in st.graph.relations() {
            out.push(relation_text(r));
            for c in r.sources.values() {
                out.extend(c.keywords.iter().cloned());
                out.extend(c.descriptions.iter().cloned());
            }
        }
        out
    }

    /// Checks `ns`'s invariants: every event's chunk exists and lists it;
    /// every node and edge has a source, and every source is a live chunk;
    /// every edge's sources are sources of both its ends; every vector
    /// belongs to a live item and was computed from its current text.
    pub async fn check_consistency(&self, ns: &Namespace) -> Result<(), String> {
        let state = self.state.lock().await;
        let Some(st) = state.get(ns) else {
            return Ok(());
        };
        for (id, e) in &st.events {
            if !st
                .chunks
                .get(&e.chunk)
                .is_some_and(|c| c.events.contains(id))
            {
                return Err(format!("event {id} is not in its chunk {}", e.chunk));
            }
        }
        for (cid, c) in &st.chunks {
            if c.events.iter().any(|id| !st.events.contains_key(id)) {
                return Err(format!("chunk {cid} lists a forgotten event"));
            }
        }
        for e in st.graph.entities() {
            if e.sources.is_empty() {
                return Err(format!("entity {:?} has no source", e.key));
            }
            if let Some(c) = e.sources.keys().find(|c| !st.chunks.contains_key(c)) {
                return Err(format!("entity {:?} cites dead chunk {c}", e.key));
            }
        }
        for r in st.graph.relations() {
            if r.sources.is_empty() {
                return Err(format!("relation {:?} has no source", r.ends));
            }
            for end in [&r.ends.0, &r.ends.1] {
                let Some(e) = st.graph.entity(end) else {
                    return Err(format!("relation {:?} has a missing end", r.ends));
                };
                if r.sources.keys().any(|c| !e.sources.contains_key(c)) {
                    return Err(format!(
                        "relation {:?} cites a chunk its end does not",
                        r.ends
                    ));
                }
            }
        }
        for (k, v) in &st.chunk_index.vectors {
            match st.chunks.get(k) {
                Some(c) if digest(&c.text) == v.digest => {}
                _ => return Err(format!("stale or orphan chunk vector {k}")),
            }
        }
        for (k, v) in &st.entity_index.vectors {
            match st.graph.entity(k) {
                Some(e) if digest(&e.index_text()) == v.digest => {}
                _ => return Err(format!("stale or orphan entity vector {k:?}")),
            }
        }
        for (k, v) in &st.relation_index.vectors {
            match st.graph.relation(&k.0, &k.1) {
                Some(r) if digest(&relation_text(r)) == v.digest => {}
                _ => return Err(format!("stale or orphan relation vector {k:?}")),
            }
        }
        Ok(())
    }
}
