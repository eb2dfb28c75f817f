//! The read path (LightRAG's *mix* mode): low-level keywords match entities,
//! high-level keywords match relations, the question matches chunks; the
//! matched items' neighbourhoods and source chunks are gathered; the chunk
//! lists (from entities, from relations, dense, and BM25 when
//! `lexical_chunks` is on, the default) are merged by
//! reciprocal rank fusion; the result is rendered under the budget —
//! entity and relation descriptions compactly (truncated), chunks verbatim,
//! in time order.
//!
//! Deviation: LightRAG orders an entity's chunks by how many of the entity's
//! neighbours they mention; here by how many *matched* entities they
//! support (the same idea restricted to what the query touched), which needs
//! no extra pass over the graph.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use submem_core::{Recall, Resolution, SourceHit, TokenCounter};

use crate::store::NamespaceState;

/// How broad one retrieval is.
#[derive(Debug, Clone, Copy)]
pub struct Breadth {
    /// Entities and relations matched.
    pub top_k: usize,
    /// Dense chunk hits (and as many BM25 chunk hits when `lexical` is on).
    pub chunk_top_k: usize,
    /// Fuse a BM25 chunk list beside the dense one.
    pub lexical: bool,
    /// Chunks gathered per matched entity or relation.
    pub chunks_per_item: usize,
    /// RRF constant.
    pub rrf_k: f32,
}

/// The three query vectors (`None` when that level had no keyword).
#[derive(Debug, Clone, Default)]
pub struct QueryVectors {
    /// The question.
    pub question: Option<Vec<f32>>,
    /// Joined low-level keywords.
    pub low: Option<Vec<f32>>,
    /// Joined high-level keywords.
    pub high: Option<Vec<f32>>,
}

/// What a retrieval found, best first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Retrieval {
    /// Entities for the context.
    pub entities: Vec<String>,
    /// Relations for the context.
    pub relations: Vec<(String, String)>,
    /// Chunks with their fused score.
    pub chunks: Vec<(u64, f32)>,
}

fn interleave<T: Clone + Ord>(a: &[T], b: &[T]) -> Vec<T> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for i in 0..a.len().max(b.len()) {
        for x in [a.get(i), b.get(i)].into_iter().flatten() {
            if seen.insert(x.clone()) {
                out.push(x.clone());
            }
        }
    }
    out
}

/// Chunks supporting `sources` ordered by how many `matched` items share
/// them (most first), then oldest first; at most `n`.
fn rank_item_chunks(sources: &[u64], support: &HashMap<u64, usize>, n: usize) -> Vec<u64> {
    let mut v = sources.to_vec();
    v.sort_by(|a, b| support.get(b).cmp(&support.get(a)).then(a.cmp(b)));
    v.truncate(n);
    v
}

/// How many of the items (each given by the chunks it came from) each chunk
/// supports.
fn chunk_support<'a>(
    items: impl Iterator<Item = impl Iterator<Item = &'a u64>>,
) -> HashMap<u64, usize> {
    let mut support: HashMap<u64, usize> = HashMap::new();
    for chunks in items {
        for &c in chunks {
            *support.entry(c).or_default() += 1;
        }
    }
    support
}

/// Runs the three searches and fuses the chunk lists.
pub fn retrieve(state: &NamespaceState, question: &str, q: &QueryVectors, b: Breadth) -> Retrieval {
    let g = &state.graph;
    // Local: entities by the low-level keywords, their relations and chunks.
    let local: Vec<String> = state.entity_index.top_keys(q.low.as_ref(), b.top_k);
    let support = chunk_support(
        local
            .iter()
            .filter_map(|k| g.entity(k))
            .map(|e| e.sources.keys()),
    );
    let mut from_entities: Vec<u64> = Vec::new();
    let mut local_relations: Vec<(String, String)> = Vec::new();
    for k in &local {
        if let Some(e) = g.entity(k) {
            let sources: Vec<u64> = e.sources.keys().copied().collect();
            from_entities.extend(rank_item_chunks(&sources, &support, b.chunks_per_item));
        }
        local_relations.extend(
            g.relations_of(k)
                .into_iter()
                .take(b.top_k)
                .map(|r| r.ends.clone()),
        );
    }
    // Global: relations by the high-level keywords, their ends and chunks.
    let global: Vec<(String, String)> = state.relation_index.top_keys(q.high.as_ref(), b.top_k);
    let rel_support = chunk_support(
        global
            .iter()
            .filter_map(|(x, y)| g.relation(x, y))
            .map(|r| r.sources.keys()),
    );
    let mut from_relations: Vec<u64> = Vec::new();
    let mut global_entities: Vec<String> = Vec::new();
    for (x, y) in &global {
        if let Some(r) = g.relation(x, y) {
            let sources: Vec<u64> = r.sources.keys().copied().collect();
            from_relations.extend(rank_item_chunks(&sources, &rel_support, b.chunks_per_item));
            global_entities.push(x.clone());
            global_entities.push(y.clone());
        }
    }
    // Naive: chunks by the question.
    let dense: Vec<u64> = state
        .chunk_index
        .top_keys(q.question.as_ref(), b.chunk_top_k);
    // Lexical: chunks by BM25 over the question's words.
    let lexical: Vec<u64> = if b.lexical {
        state.chunk_lexicon.top(question, b.chunk_top_k)
    } else {
        Vec::new()
    };
    // Reciprocal rank fusion over the chunk lists (each deduplicated).
    let mut fused: BTreeMap<u64, f32> = BTreeMap::new();
    for list in [&from_entities, &from_relations, &dense, &lexical] {
        let mut seen = BTreeSet::new();
        let mut rank = 0.0f32;
        for &c in list {
            if seen.insert(c) {
                rank += 1.0;
                *fused.entry(c).or_default() += 1.0 / (b.rrf_k + rank);
            }
        }
    }
    let mut chunks: Vec<(u64, f32)> = fused.into_iter().collect();
    chunks.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Retrieval {
        entities: interleave(&local, &global_entities),
        relations: interleave(&global, &local_relations),
        chunks,
    }
}

/// Rendering knobs.
#[derive(Debug, Clone, Copy)]
pub struct RenderParams {
    /// Tokens the memory block may take.
    pub allowance: usize,
    /// Share of it for descriptions.
    pub graph_share: f32,
    /// Longest description shown.
    pub description_tokens: usize,
}

const ENTITY_HEADER: &str = "Entities:";
const RELATION_HEADER: &str = "Relations:";
const CHUNK_HEADER: &str = "Conversation excerpts:";

enum Line {
    Entity(String),
    Relation(String),
}

/// Renders a retrieval under `p.allowance` tokens (exactly counted).
pub fn render(
    state: &NamespaceState,
    r: &Retrieval,
    counter: &dyn TokenCounter,
    p: RenderParams,
) -> Recall {
    let g = &state.graph;
    let short = |s: &str| {
        if counter.count(s) > p.description_tokens {
            format!("{}…", counter.truncate(s, p.description_tokens))
        } else {
            s.to_string()
        }
    };
    let display = |k: &str| g.entity(k).map_or(k.to_string(), |e| e.name().to_string());
    let entity_lines: Vec<String> = r
        .entities
        .iter()
        .filter_map(|k| g.entity(k))
        .map(|e| {
            let kind = e.kind();
            let desc = e.description();
            match (kind.is_empty(), desc.is_empty()) {
                (true, true) => format!("- {}", e.name()),
                (false, true) => format!("- {} ({kind})", e.name()),
                (true, false) => format!("- {}: {}", e.name(), short(&desc)),
                (false, false) => format!("- {} ({kind}): {}", e.name(), short(&desc)),
            }
        })
        .collect();
    let relation_lines: Vec<String> = r
        .relations
        .iter()
        .filter_map(|(a, b)| g.relation(a, b))
        .map(|rel| {
            let kw = rel.keywords();
            let kw = if kw.is_empty() {
                String::new()
            } else {
                format!(" [{}]", short(&kw))
            };
            format!(
                "- {} — {}{kw}: {}",
                display(&rel.ends.0),
                display(&rel.ends.1),
                short(&rel.description())
            )
        })
        .collect();
    // Graph lines, entity and relation alternately, within the graph share.
    let graph_room = (p.allowance as f32 * p.graph_share).floor() as usize;
    let mut lines: Vec<Line> = Vec::new();
    let mut used = 0usize;
    for i in 0..entity_lines.len().max(relation_lines.len()) {
        let pair = [
            entity_lines.get(i).map(|l| Line::Entity(l.clone())),
            relation_lines.get(i).map(|l| Line::Relation(l.clone())),
        ];
        for line in pair.into_iter().flatten() {
            let text = match &line {
                Line::Entity(t) | Line::Relation(t) => t,
            };
            let cost = counter.count(text) + 1;
            if used + cost + 4 <= graph_room {
                used += cost;
                lines.push(line);
            }
        }
    }
    // Chunks, most relevant first, while they fit what is left.
    let mut chosen: Vec<(u64, f32)> = Vec::new();
    let mut chunk_used = 0usize;
    let chunk_room = p
        .allowance
        .saturating_sub(used + if lines.is_empty() { 0 } else { 4 });
    for &(c, score) in &r.chunks {
        let Some(chunk) = state.chunks.get(&c) else {
            continue;
        };
        let cost = chunk.tokens as usize + 1;
        if chunk_used + cost + 4 <= chunk_room {
            chunk_used += cost;
            chosen.push((c, score));
        }
    }
    loop {
        let text = compose(state, &lines, &chosen);
        let tokens = counter.count(&text);
        if tokens <= p.allowance {
            let mut sources = Vec::new();
            for &(c, score) in &chosen {
                for id in state
                    .chunks
                    .get(&c)
                    .map(|ch| ch.events.as_slice())
                    .unwrap_or(&[])
                {
                    sources.push(SourceHit {
                        source_id: id.clone(),
                        score,
                        resolution: Resolution::Raw,
                    });
                }
            }
            return Recall::new(text, tokens, sources);
        }
        // Joining cost more than estimated: drop the least relevant item.
        if chosen.pop().is_none() && lines.pop().is_none() {
            return Recall::empty();
        }
    }
}

fn compose(state: &NamespaceState, lines: &[Line], chosen: &[(u64, f32)]) -> String {
    let mut parts: Vec<&str> = Vec::new();
    let (mut entities, mut relations) = (Vec::new(), Vec::new());
    for line in lines {
        match line {
            Line::Entity(t) => entities.push(t.as_str()),
            Line::Relation(t) => relations.push(t.as_str()),
        }
    }
    if !entities.is_empty() {
        parts.push(ENTITY_HEADER);
        parts.extend(entities);
    }
    if !relations.is_empty() {
        parts.push(RELATION_HEADER);
        parts.extend(relations);
    }
    let mut in_time: Vec<&crate::store::Chunk> = chosen
        .iter()
        .filter_map(|(c, _)| state.chunks.get(c))
        .collect();
    in_time.sort_by_key(|c| c.position);
    if !in_time.is_empty() && !parts.is_empty() {
        parts.push(CHUNK_HEADER);
    }
    parts.extend(in_time.iter().map(|c| c.text.as_str()));
    parts.join("\n")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use submem_core::test_utils::WhitespaceCounter;
    use submem_core::{Event, Turn};

    fn turn(id: &str, text: &str) -> Event {
        Event::Turn(Turn {
            session_id: "s1".into(),
            session_date: None,
            speaker: "x".into(),
            text: text.into(),
            source_id: id.into(),
        })
    }

    #[test]
    fn lexical_chunks_join_the_fusion_only_when_on() {
        let mut st = NamespaceState::default();
        let (a, b) = (
            turn("a", "we talked about the weather"),
            turn("b", "Zelda adopted a greyhound"),
        );
        st.add_chunk(&[&a], &WhitespaceCounter);
        let zelda = st.add_chunk(&[&b], &WhitespaceCounter);
        // No query vectors (no embedder hit, no keywords): only BM25 can find it.
        let none = QueryVectors::default();
        let on = Breadth {
            top_k: 5,
            chunk_top_k: 5,
            chunks_per_item: 5,
            rrf_k: 60.0,
            lexical: true,
        };
        let found = retrieve(&st, "What did Zelda adopt?", &none, on);
        assert_eq!(
            found.chunks.iter().map(|c| c.0).collect::<Vec<_>>(),
            vec![zelda]
        );
        let off = Breadth {
            lexical: false,
            ..on
        };
        assert!(retrieve(&st, "What did Zelda adopt?", &none, off)
            .chunks
            .is_empty());
        // Question words alone ("what", "did") match nothing.
        assert!(retrieve(&st, "What did you do?", &none, on)
            .chunks
            .is_empty());
    }
}
