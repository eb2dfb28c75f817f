//! One namespace's tree: leaves (packed events, kept verbatim, with their
//! source ids) and summary nodes (one per cluster, pointing at the nodes
//! they summarise). Pure data and bookkeeping; model calls live in
//! [`crate::build`].
//!
//! A summary is *stale* when something under it changed (a leaf joined, a
//! leaf lost an event to `forget`, a child was rewritten): a stale summary is
//! never shown and is rewritten before the next read. This is how forgotten
//! text can never come back through a summary written before the forget.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use submem_core::{Event, TokenCounter};
use submem_kit::chunk::session_chunks;

/// Node id within a namespace.
pub type NodeId = u64;

/// One event inside a leaf.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeafEvent {
    /// The event's source id.
    pub source_id: String,
    /// [`Event::render`]: what the leaf shows.
    pub text: String,
    /// Who spoke or which step (for extractive summaries).
    pub label: String,
    /// The event's content without framing (for extractive summaries).
    pub body: String,
    /// Budget tokens of `text`.
    pub tokens: u32,
}

impl LeafEvent {
    /// Builds the leaf form of `event`.
    pub fn from_event(event: &Event, counter: &dyn TokenCounter) -> Self {
        let text = event.render();
        let (label, body) = match event {
            Event::Turn(t) => (t.speaker.clone(), t.text.clone()),
            Event::Step(s) => (
                format!("step {} ({})", s.step, s.action),
                s.observation.clone(),
            ),
        };
        LeafEvent {
            source_id: event.source_id().to_string(),
            tokens: u32::try_from(counter.count(&text)).unwrap_or(u32::MAX),
            text,
            label,
            body,
        }
    }
}

/// A node of the tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// 0 for leaves; a summary of level-`l` nodes is at level `l + 1`.
    pub level: u32,
    /// What a recall shows (leaves: their events' rendered text, one a line).
    pub text: String,
    /// Budget tokens of `text`.
    pub tokens: u32,
    /// L2-normalised embedding of `text`; empty while the node is stale.
    pub embedding: Vec<f32>,
    /// Summaries: the nodes summarised (one level down).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<NodeId>,
    /// Leaves: their events, in time order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<LeafEvent>,
    /// Write order of the first event covered (for rendering in time order).
    pub position: u64,
    /// Summaries: mean of the children's embeddings, normalised (new leaves
    /// join the level-1 cluster of the nearest centroid).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub centroid: Vec<f32>,
    /// Must be rewritten (summaries) or re-embedded (leaves) before it is shown.
    #[serde(default)]
    pub stale: bool,
}

impl Node {
    /// Whether it is a leaf.
    pub fn is_leaf(&self) -> bool {
        self.level == 0
    }

    /// Whether a recall may show it.
    pub fn showable(&self) -> bool {
        !self.stale && !self.embedding.is_empty()
    }
}

/// A namespace's tree.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct NsTree {
    /// Every node by id (ordered, so every pass is deterministic).
    pub nodes: BTreeMap<NodeId, Node>,
    /// Id the next node gets.
    pub next_id: NodeId,
    /// Position the next leaf gets.
    pub next_position: u64,
    /// Leaves written since the tree was last brought up to date.
    pub pending: Vec<NodeId>,
    /// Whether a full build has run since the tree was last emptied.
    pub built: bool,
    /// Leaves the last full build clustered.
    pub leaves_at_build: usize,
    /// Leaves inserted incrementally since the last full build.
    pub inserted_since_build: usize,
    /// Source id → leaf holding it.
    #[serde(skip)]
    pub by_source: HashMap<String, NodeId>,
}

impl NsTree {
    /// Rebuilds `by_source` and checks invariants after deserialisation.
    pub fn reindex(&mut self) -> Result<(), String> {
        self.by_source.clear();
        for (id, n) in &self.nodes {
            if *id >= self.next_id {
                return Err(format!("node {id} is beyond next id {}", self.next_id));
            }
            if n.is_leaf() {
                if n.events.is_empty() || !n.children.is_empty() {
                    return Err(format!("leaf {id} has no events or has children"));
                }
                for e in &n.events {
                    if self.by_source.insert(e.source_id.clone(), *id).is_some() {
                        return Err(format!("source id {:?} appears twice", e.source_id));
                    }
                }
            } else {
                for c in &n.children {
                    match self.nodes.get(c) {
                        Some(child) if child.level + 1 == n.level => {}
                        _ => return Err(format!("summary {id} has a bad child {c}")),
                    }
                }
            }
        }
        if let Some(p) = self.pending.iter().find(|p| !self.nodes.contains_key(p)) {
            return Err(format!("pending leaf {p} does not exist"));
        }
        Ok(())
    }

    /// Adds a node and returns its id.
    pub fn add(&mut self, node: Node) -> NodeId {
        let id = self.next_id;
        self.next_id += 1;
        if node.is_leaf() {
            for e in &node.events {
                self.by_source.insert(e.source_id.clone(), id);
            }
        }
        self.nodes.insert(id, node);
        id
    }

    /// Ids of the leaves, in time order.
    pub fn leaves(&self) -> Vec<NodeId> {
        let mut v: Vec<(u64, NodeId)> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.is_leaf())
            .map(|(id, n)| (n.position, *id))
            .collect();
        v.sort_unstable();
        v.into_iter().map(|(_, id)| id).collect()
    }

    /// Child → the summaries that list it.
    pub fn parents(&self) -> HashMap<NodeId, Vec<NodeId>> {
        let mut out: HashMap<NodeId, Vec<NodeId>> = HashMap::new();
        for (id, n) in &self.nodes {
            for c in &n.children {
                out.entry(*c).or_default().push(*id);
            }
        }
        out
    }

    /// Marks every summary above `start` stale (transitively).
    pub fn mark_ancestors_stale(&mut self, start: &[NodeId]) {
        let parents = self.parents();
        let mut stack: Vec<NodeId> = start.to_vec();
        let mut seen: HashSet<NodeId> = HashSet::new();
        while let Some(id) = stack.pop() {
            for p in parents.get(&id).into_iter().flatten() {
                if seen.insert(*p) {
                    if let Some(n) = self.nodes.get_mut(p) {
                        n.stale = true;
                    }
                    stack.push(*p);
                }
            }
        }
    }

    /// Drops every summary (before a full build).
    pub fn drop_summaries(&mut self) {
        self.nodes.retain(|_, n| n.is_leaf());
    }

    /// Whether any node waits for a rewrite or an embedding.
    pub fn has_stale(&self) -> bool {
        self.nodes.values().any(|n| n.stale)
    }

    /// Leaves under `id` (itself when it is a leaf).
    pub fn descendant_leaves(&self, id: NodeId) -> BTreeSet<NodeId> {
        let mut out = BTreeSet::new();
        let mut stack = vec![id];
        let mut seen = HashSet::new();
        while let Some(x) = stack.pop() {
            if !seen.insert(x) {
                continue;
            }
            match self.nodes.get(&x) {
                Some(n) if n.is_leaf() => {
                    out.insert(x);
                }
                Some(n) => stack.extend(n.children.iter().copied()),
                None => {}
            }
        }
        out
    }

    /// Removes the events `source_ids`: leaves that lose an event are
    /// rewritten from what remains (and re-embedded later), emptied leaves are
    /// removed, and every summary above a touched leaf becomes stale.
    /// Returns how many events were removed.
    pub fn forget_sources(&mut self, source_ids: &[String], counter: &dyn TokenCounter) -> usize {
        let mut touched: BTreeMap<NodeId, HashSet<&str>> = BTreeMap::new();
        for s in source_ids {
            if let Some(leaf) = self.by_source.get(s) {
                touched.entry(*leaf).or_default().insert(s.as_str());
            }
        }
        let mut removed = 0;
        let ids: Vec<NodeId> = touched.keys().copied().collect();
        self.mark_ancestors_stale(&ids);
        let mut emptied = Vec::new();
        for (leaf, drop) in &touched {
            let Some(n) = self.nodes.get_mut(leaf) else {
                continue;
            };
            let before = n.events.len();
            n.events.retain(|e| !drop.contains(e.source_id.as_str()));
            removed += before - n.events.len();
            if n.events.is_empty() {
                emptied.push(*leaf);
            } else {
                n.text = leaf_text(&n.events);
                n.tokens = u32::try_from(counter.count(&n.text)).unwrap_or(u32::MAX);
                n.embedding.clear();
                n.stale = true;
            }
        }
        for s in source_ids {
            self.by_source.remove(s);
        }
        for leaf in &emptied {
            self.nodes.remove(leaf);
        }
        if !emptied.is_empty() {
            let gone: HashSet<NodeId> = emptied.iter().copied().collect();
            for n in self.nodes.values_mut() {
                n.children.retain(|c| !gone.contains(c));
            }
            self.pending.retain(|p| !gone.contains(p));
        }
        removed
    }

    /// Tokens of the events stored.
    pub fn input_tokens(&self) -> u64 {
        self.nodes
            .values()
            .flat_map(|n| &n.events)
            .map(|e| u64::from(e.tokens))
            .sum()
    }

    /// Tokens of every node (leaves and summaries).
    pub fn stored_tokens(&self) -> u64 {
        self.nodes.values().map(|n| u64::from(n.tokens)).sum()
    }

    /// Approximate heap bytes.
    pub fn memory_bytes(&self) -> u64 {
        self.nodes
            .values()
            .map(|n| {
                let events: usize = n
                    .events
                    .iter()
                    .map(|e| e.text.len() + e.source_id.len() + e.label.len() + e.body.len() + 40)
                    .sum();
                (n.text.len()
                    + 4 * (n.embedding.len() + n.centroid.len())
                    + 8 * n.children.len()
                    + events
                    + std::mem::size_of::<Node>()) as u64
            })
            .sum::<u64>()
            + self
                .by_source
                .keys()
                .map(|k| k.len() as u64 + 40)
                .sum::<u64>()
    }
}

/// A leaf's text: its events' rendered text, one a line.
pub fn leaf_text(events: &[LeafEvent]) -> String {
    events
        .iter()
        .map(|e| e.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Packs events (oldest first) into leaves of about `leaf_tokens`: an event
/// joins the open leaf when it belongs to the same session and the leaf stays
/// within the target; an event larger than the target is a leaf of its own.
pub fn pack_leaves(
    events: &[Event],
    counter: &dyn TokenCounter,
    leaf_tokens: usize,
) -> Vec<Vec<LeafEvent>> {
    let mut leaves: Vec<LeafEvent> = events
        .iter()
        .map(|e| LeafEvent::from_event(e, counter))
        .collect();
    let chunks = session_chunks(events, leaf_tokens, |i, _| leaves[i].tokens as usize);
    // The chunks cover `leaves` in order: hand them out from the back.
    let mut out: Vec<Vec<LeafEvent>> = Vec::with_capacity(chunks.len());
    for range in chunks.into_iter().rev() {
        out.push(leaves.split_off(range.start));
    }
    out.reverse();
    out
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
    fn leaves_pack_within_sessions_and_keep_long_events_whole() {
        let ev = vec![
            turn("s1", "1", 30),
            turn("s1", "2", 30),
            turn("s1", "3", 30),
            turn("s2", "4", 10),
            turn("s2", "5", 200),
        ];
        let leaves = pack_leaves(&ev, &WhitespaceCounter, 70);
        let ids: Vec<Vec<&str>> = leaves
            .iter()
            .map(|l| l.iter().map(|e| e.source_id.as_str()).collect())
            .collect();
        assert_eq!(ids, vec![vec!["1", "2"], vec!["3"], vec!["4"], vec!["5"]]);
    }

    #[test]
    fn forgetting_marks_ancestors_stale_and_removes_empty_leaves() {
        let c = WhitespaceCounter;
        let mut t = NsTree::default();
        let mk = |evs: Vec<LeafEvent>, pos| Node {
            level: 0,
            text: leaf_text(&evs),
            tokens: 1,
            embedding: vec![1.0],
            children: vec![],
            events: evs,
            position: pos,
            centroid: vec![],
            stale: false,
        };
        let ev = |id: &str| LeafEvent::from_event(&turn("s", id, 3), &c);
        let a = t.add(mk(vec![ev("a"), ev("b")], 0));
        let b = t.add(mk(vec![ev("c")], 2));
        let s1 = t.add(Node {
            level: 1,
            children: vec![a, b],
            ..mk(vec![], 0)
        });
        let root = t.add(Node {
            level: 2,
            children: vec![s1],
            ..mk(vec![], 0)
        });
        t.reindex().unwrap();
        assert_eq!(t.forget_sources(&["a".into(), "zz".into()], &c), 1);
        assert!(t.nodes[&s1].stale && t.nodes[&root].stale);
        assert!(t.nodes[&a].stale && t.nodes[&a].events.len() == 1);
        assert_eq!(t.forget_sources(&["c".into()], &c), 1);
        assert!(!t.nodes.contains_key(&b));
        assert_eq!(t.nodes[&s1].children, vec![a]);
        assert_eq!(
            t.descendant_leaves(root).into_iter().collect::<Vec<_>>(),
            vec![a]
        );
        t.reindex().unwrap();
    }
}
