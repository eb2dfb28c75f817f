//! The state of one namespace: events, chunks, the graph and the three dense
//! indexes, and the bookkeeping that keeps them consistent when events are
//! written or forgotten.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use submem_core::{Event, TokenCounter};
use submem_kit::bm25::Bm25Index;
use submem_kit::chunk::session_chunks;
use submem_kit::text::{query_terms, StopWords};

use crate::graph::{Entity, KnowledgeGraph, Relation, Touched};
use crate::index::{SavedIndex, VectorIndex};

/// One stored event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredEvent {
    /// The event as written.
    pub event: Event,
    /// Position in the namespace's history (0 = oldest).
    pub position: u64,
    /// The chunk holding it.
    pub chunk: u64,
}

/// A chunk: consecutive events of one write, cut near `chunk_tokens`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chunk {
    /// Source ids of its events, oldest first.
    pub events: Vec<String>,
    /// The events rendered ([`Event::render`]), one per line.
    pub text: String,
    /// `text`'s length in budget tokens.
    pub tokens: u32,
    /// Position of its first event.
    pub position: u64,
    /// Its graph contributions must be extracted (again) on `manage`: it
    /// lost events to forgetting.
    pub needs_extraction: bool,
}

/// Everything M5 keeps for one namespace.
#[derive(Debug, Clone, Default)]
pub struct NamespaceState {
    /// Events by source id.
    pub events: BTreeMap<String, StoredEvent>,
    /// Chunks by id (ids grow with time).
    pub chunks: BTreeMap<u64, Chunk>,
    /// The entity–relation graph.
    pub graph: KnowledgeGraph,
    /// Dense index over chunk texts.
    pub chunk_index: VectorIndex<u64>,
    /// BM25 over chunk texts (the lexical chunk list fused beside the dense one).
    pub chunk_lexicon: ChunkLexicon,
    /// Dense index over entities (name, type, description).
    pub entity_index: VectorIndex<String>,
    /// Dense index over relations (keywords, ends, description).
    pub relation_index: VectorIndex<(String, String)>,
    /// Tokens of every event ever kept (for the footprint).
    pub input_tokens: u64,
    next_position: u64,
    next_chunk: u64,
}

/// BM25 over chunk texts with the broad English stop list (names, dates and
/// numbers a dense chunk ranking misses).
#[derive(Debug, Clone)]
pub struct ChunkLexicon(pub Bm25Index<u64>);

impl Default for ChunkLexicon {
    fn default() -> Self {
        ChunkLexicon(Bm25Index::with_stop_words(StopWords::English))
    }
}

impl ChunkLexicon {
    /// The `n` best chunks for `question`, best first (ties to the older).
    pub fn top(&self, question: &str, n: usize) -> Vec<u64> {
        let mut hits = self.0.score(&query_terms(question));
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        hits.truncate(n);
        hits.into_iter().map(|(k, _)| k).collect()
    }
}

/// Groups `events` into chunks of about `chunk_tokens`: a chunk ends before
/// an event that would overflow it or that starts another session; an event
/// longer than the target is a chunk of its own.
pub fn plan_chunks(
    events: &[Event],
    counter: &dyn TokenCounter,
    chunk_tokens: usize,
) -> Vec<Vec<usize>> {
    session_chunks(events, chunk_tokens, |_, e| counter.count(&e.render()) + 1)
        .into_iter()
        .map(Iterator::collect)
        .collect()
}

impl NamespaceState {
    /// Stores one chunk of new events and returns its id; the chunk is
    /// queued for embedding.
    pub fn add_chunk(&mut self, events: &[&Event], counter: &dyn TokenCounter) -> u64 {
        let id = self.next_chunk;
        self.next_chunk += 1;
        let position = self.next_position;
        let mut ids = Vec::with_capacity(events.len());
        for e in events {
            self.input_tokens += counter.count(&e.render()) as u64;
            ids.push(e.source_id().to_string());
            self.events.insert(
                e.source_id().to_string(),
                StoredEvent {
                    event: (*e).clone(),
                    position: self.next_position,
                    chunk: id,
                },
            );
            self.next_position += 1;
        }
        let text = self.render_events(&ids);
        let tokens = u32::try_from(counter.count(&text)).unwrap_or(u32::MAX);
        self.chunk_lexicon.0.insert(id, &text);
        self.chunks.insert(
            id,
            Chunk {
                events: ids,
                text,
                tokens,
                position,
                needs_extraction: false,
            },
        );
        self.chunk_index.mark(id);
        id
    }

    fn render_events(&self, ids: &[String]) -> String {
        ids.iter()
            .filter_map(|id| self.events.get(id))
            .map(|e| e.event.render())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The events of a chunk, oldest first.
    pub fn chunk_events(&self, chunk: u64) -> Vec<&Event> {
        self.chunks.get(&chunk).map_or_else(Vec::new, |c| {
            c.events
                .iter()
                .filter_map(|id| self.events.get(id).map(|e| &e.event))
                .collect()
        })
    }

    /// Queues the entities and relations a graph change touched for
    /// re-embedding, and drops the vectors of removed ones.
    pub fn apply_touched(&mut self, t: Touched) {
        for k in t.entities_removed {
            self.entity_index.remove(&k);
        }
        for k in t.entities_changed {
            self.entity_index.mark(k);
        }
        for k in t.relations_removed {
            self.relation_index.remove(&k);
        }
        for k in t.relations_changed {
            self.relation_index.mark(k);
        }
    }

    /// Forgets the listed events: their chunks lose the events and every
    /// graph contribution (descriptions are rebuilt from the remaining
    /// chunks; entities and relations left without any are deleted); a
    /// chunk left empty is deleted, the others are re-rendered, re-embedded
    /// and, if `reextract`, queued for extraction. Returns how many events
    /// were removed.
    pub fn forget_sources(
        &mut self,
        ids: &[String],
        reextract: bool,
        counter: &dyn TokenCounter,
    ) -> usize {
        let mut affected: BTreeSet<u64> = BTreeSet::new();
        let mut removed = 0;
        for id in ids {
            if let Some(e) = self.events.remove(id) {
                affected.insert(e.chunk);
                removed += 1;
            }
        }
        if affected.is_empty() {
            return 0;
        }
        let touched = self.graph.remove_chunks(&affected);
        self.apply_touched(touched);
        for chunk_id in affected {
            let remaining: Vec<String> = self.chunks.get(&chunk_id).map_or_else(Vec::new, |c| {
                c.events
                    .iter()
                    .filter(|id| self.events.contains_key(*id))
                    .cloned()
                    .collect()
            });
            if remaining.is_empty() {
                self.chunks.remove(&chunk_id);
                self.chunk_index.remove(&chunk_id);
                self.chunk_lexicon.0.remove(chunk_id);
                continue;
            }
            let text = self.render_events(&remaining);
            self.chunk_lexicon.0.insert(chunk_id, &text);
            if let Some(c) = self.chunks.get_mut(&chunk_id) {
                c.events = remaining;
                c.tokens = u32::try_from(counter.count(&text)).unwrap_or(u32::MAX);
                c.text = text;
                c.needs_extraction = reextract;
                if let Some(first) = c.events.first().and_then(|id| self.events.get(id)) {
                    c.position = first.position;
                }
            }
            self.chunk_index.mark(chunk_id);
        }
        removed
    }

    /// Chunks waiting for extraction.
    pub fn chunks_needing_extraction(&self) -> Vec<u64> {
        self.chunks
            .iter()
            .filter(|(_, c)| c.needs_extraction)
            .map(|(&id, _)| id)
            .collect()
    }

    /// The state as saved.
    pub fn to_saved(&self) -> SavedNamespace {
        let (entities, relations) = self.graph.to_parts();
        SavedNamespace {
            events: self.events.values().cloned().collect(),
            chunks: self.chunks.iter().map(|(&k, v)| (k, v.clone())).collect(),
            entities,
            relations,
            chunk_index: self.chunk_index.to_saved(),
            entity_index: self.entity_index.to_saved(),
            relation_index: self.relation_index.to_saved(),
            input_tokens: self.input_tokens,
            next_position: self.next_position,
            next_chunk: self.next_chunk,
        }
    }

    /// Rebuilds the state; `dimension` is the embedder's, `same_embedder`
    /// whether the saved vectors came from it (if not, all are recomputed).
    pub fn from_saved(
        saved: SavedNamespace,
        dimension: usize,
        same_embedder: bool,
    ) -> Result<Self, String> {
        let graph = KnowledgeGraph::from_parts(saved.entities, saved.relations)?;
        let mut events = BTreeMap::new();
        for e in saved.events {
            let id = e.event.source_id().to_string();
            if events.insert(id.clone(), e).is_some() {
                return Err(format!("event {id:?} appears twice"));
            }
        }
        let mut chunks = BTreeMap::new();
        for (id, c) in saved.chunks {
            if c.events
                .iter()
                .any(|e| events.get(e).is_none_or(|s: &StoredEvent| s.chunk != id))
            {
                return Err(format!("chunk {id} lists an event it does not hold"));
            }
            if chunks.insert(id, c).is_some() {
                return Err(format!("chunk {id} appears twice"));
            }
        }
        if let Some(e) = events.values().find(|e| !chunks.contains_key(&e.chunk)) {
            return Err(format!("event {:?} has no chunk", e.event.source_id()));
        }
        let dim = if same_embedder { dimension } else { usize::MAX };
        let mut chunk_lexicon = ChunkLexicon::default();
        for (id, c) in &chunks {
            chunk_lexicon.0.insert(*id, &c.text);
        }
        let mut state = NamespaceState {
            events,
            chunks,
            chunk_lexicon,
            graph,
            chunk_index: VectorIndex::from_saved(saved.chunk_index, dim),
            entity_index: VectorIndex::from_saved(saved.entity_index, dim),
            relation_index: VectorIndex::from_saved(saved.relation_index, dim),
            input_tokens: saved.input_tokens,
            next_position: saved.next_position,
            next_chunk: saved.next_chunk,
        };
        // Vectors must belong to items that exist.
        let chunk_ids: BTreeSet<u64> = state.chunks.keys().copied().collect();
        state
            .chunk_index
            .vectors
            .retain(|k, _| chunk_ids.contains(k));
        state.chunk_index.pending.retain(|k| chunk_ids.contains(k));
        let g = &state.graph;
        state
            .entity_index
            .vectors
            .retain(|k, _| g.entity(k).is_some());
        state.entity_index.pending.retain(|k| g.entity(k).is_some());
        state
            .relation_index
            .vectors
            .retain(|k, _| g.relation(&k.0, &k.1).is_some());
        state
            .relation_index
            .pending
            .retain(|k| g.relation(&k.0, &k.1).is_some());
        Ok(state)
    }

    /// Approximate heap bytes.
    pub fn memory_bytes(&self) -> u64 {
        let events: usize = self
            .events
            .values()
            .map(|e| e.event.render().len() + e.event.source_id().len() * 2 + 96)
            .sum();
        let chunks: usize = self.chunks.values().map(|c| c.text.len() + 64).sum();
        let entities: usize = self
            .graph
            .entities()
            .map(|e| {
                e.key.len()
                    + e.sources
                        .values()
                        .map(|c| {
                            c.name.len()
                                + c.kind.len()
                                + c.descriptions.iter().map(String::len).sum::<usize>()
                                + 64
                        })
                        .sum::<usize>()
                    + 64
            })
            .sum();
        let relations: usize = self
            .graph
            .relations()
            .iter()
            .map(|r| {
                r.ends.0.len()
                    + r.ends.1.len()
                    + r.sources
                        .values()
                        .map(|c| {
                            c.keywords
                                .iter()
                                .chain(&c.descriptions)
                                .map(String::len)
                                .sum::<usize>()
                                + 64
                        })
                        .sum::<usize>()
                    + 64
            })
            .sum();
        (events + chunks + entities + relations) as u64
            + self.chunk_index.bytes()
            + self.entity_index.bytes()
            + self.relation_index.bytes()
    }
}

/// A [`NamespaceState`] as saved.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedNamespace {
    events: Vec<StoredEvent>,
    chunks: Vec<(u64, Chunk)>,
    entities: Vec<Entity>,
    relations: Vec<Relation>,
    chunk_index: SavedIndex<u64>,
    entity_index: SavedIndex<String>,
    relation_index: SavedIndex<(String, String)>,
    input_tokens: u64,
    next_position: u64,
    next_chunk: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::test_utils::WhitespaceCounter;
    use submem_core::Turn;

    fn turn(session: &str, id: &str, words: usize) -> Event {
        Event::Turn(Turn {
            session_id: session.into(),
            session_date: None,
            speaker: "A".into(),
            text: vec!["w"; words].join(" "),
            source_id: id.into(),
        })
    }

    #[test]
    fn chunks_cut_at_size_and_session() {
        let ev = vec![
            turn("s1", "1", 4),
            turn("s1", "2", 4),
            turn("s1", "3", 4),
            turn("s2", "4", 1),
            turn("s2", "5", 30),
        ];
        // Each turn costs words + 1 (speaker) + 1 (separator).
        let plan = plan_chunks(&ev, &WhitespaceCounter, 12);
        assert_eq!(plan, vec![vec![0, 1], vec![2], vec![3], vec![4]]);
    }

    #[test]
    fn forgetting_rerenders_or_removes_chunks() {
        let ev = [turn("s", "1", 2), turn("s", "2", 2)];
        let mut st = NamespaceState::default();
        let c = st.add_chunk(&ev.iter().collect::<Vec<_>>(), &WhitespaceCounter);
        assert_eq!(
            st.forget_sources(&["1".into(), "x".into()], true, &WhitespaceCounter),
            1
        );
        assert_eq!(st.chunks[&c].text, "A: w w");
        assert!(st.chunks[&c].needs_extraction);
        assert_eq!(
            st.forget_sources(&["2".into()], true, &WhitespaceCounter),
            1
        );
        assert!(st.chunks.is_empty() && st.chunk_index.pending.is_empty());
    }
}
