//! The entity–relation graph: a petgraph `StableUnGraph` whose nodes and
//! edges keep **one description per source chunk**.
//!
//! LightRAG merges duplicate entities by name and concatenates (then
//! LLM-summarises) their descriptions, forgetting which document said what;
//! deleting a document then leaves stale descriptions, orphan nodes and stale
//! vectors behind (HKUDS/LightRAG#1555, #1554, #155). Here every node and
//! edge keeps a map `chunk id → contribution`, and the merged description is
//! always a pure function of that map (contributions in chunk order, distinct
//! texts joined by `"; "`). Removing a chunk's contributions therefore
//! repairs every description exactly, without an LLM re-merge, and a node or
//! edge left without contributions is deleted. No LLM summary of long merged
//! descriptions is written (deviation): the renderer truncates them instead,
//! which keeps forgetting exact.

use petgraph::stable_graph::{EdgeIndex, NodeIndex, StableUnGraph};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

use crate::extract::{normalize_name, Extraction};

/// What one chunk says about an entity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntityContribution {
    /// Name as the chunk wrote it.
    pub name: String,
    /// Type as the chunk gave it.
    pub kind: String,
    /// Descriptions from the chunk (one per mention).
    pub descriptions: Vec<String>,
}

/// A merged entity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entity {
    /// Normalised name, the merge key.
    pub key: String,
    /// Contributions by source chunk.
    pub sources: BTreeMap<u64, EntityContribution>,
}

impl Entity {
    /// Display name: the earliest chunk's spelling.
    pub fn name(&self) -> &str {
        self.sources
            .values()
            .next()
            .map_or(self.key.as_str(), |c| c.name.as_str())
    }

    /// Most frequent non-empty type (ties: the earliest).
    pub fn kind(&self) -> String {
        let mut counts: Vec<(String, usize)> = Vec::new();
        for c in self.sources.values().filter(|c| !c.kind.is_empty()) {
            match counts.iter_mut().find(|(k, _)| *k == c.kind) {
                Some(x) => x.1 += 1,
                None => counts.push((c.kind.clone(), 1)),
            }
        }
        counts
            .iter()
            .rev()
            .max_by_key(|(_, n)| *n)
            .map(|(k, _)| k.clone())
            .unwrap_or_default()
    }

    /// The merged description, rebuilt from the contributions.
    pub fn description(&self) -> String {
        merge_texts(self.sources.values().flat_map(|c| c.descriptions.iter()))
    }

    /// The text its vector is computed from: name, type and description.
    pub fn index_text(&self) -> String {
        format!("{} ({}): {}", self.name(), self.kind(), self.description())
    }
}

/// What one chunk says about a relation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelationContribution {
    /// Keywords from the chunk.
    pub keywords: Vec<String>,
    /// Descriptions from the chunk.
    pub descriptions: Vec<String>,
}

/// A merged, undirected relation between two entities.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Relation {
    /// Normalised names of its ends, smaller first.
    pub ends: (String, String),
    /// Contributions by source chunk.
    pub sources: BTreeMap<u64, RelationContribution>,
}

impl Relation {
    /// Merged keywords.
    pub fn keywords(&self) -> String {
        merge_texts(self.sources.values().flat_map(|c| c.keywords.iter()))
    }
    /// Merged description.
    pub fn description(&self) -> String {
        merge_texts(self.sources.values().flat_map(|c| c.descriptions.iter()))
    }
    /// Weight: how many chunks support it.
    pub fn weight(&self) -> usize {
        self.sources.len()
    }
}

/// Distinct non-empty texts in order, joined by `"; "`.
fn merge_texts<'a>(texts: impl Iterator<Item = &'a String>) -> String {
    let mut seen = BTreeSet::new();
    texts
        .map(|t| t.trim())
        .filter(|t| !t.is_empty() && seen.insert(t.to_string()))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Key of a relation: its ends' normalised names, smaller first.
pub fn relation_key(a: &str, b: &str) -> (String, String) {
    if a <= b {
        (a.to_string(), b.to_string())
    } else {
        (b.to_string(), a.to_string())
    }
}

/// What a change touched, so the caller can re-index exactly those items.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Touched {
    /// Entities whose text changed (re-embed).
    pub entities_changed: BTreeSet<String>,
    /// Entities deleted (drop their vectors).
    pub entities_removed: BTreeSet<String>,
    /// Relations whose text changed.
    pub relations_changed: BTreeSet<(String, String)>,
    /// Relations deleted.
    pub relations_removed: BTreeSet<(String, String)>,
}

/// The graph of one namespace.
#[derive(Debug, Default, Clone)]
pub struct KnowledgeGraph {
    graph: StableUnGraph<Entity, Relation>,
    nodes: BTreeMap<String, NodeIndex>,
}

impl KnowledgeGraph {
    /// Number of entities.
    pub fn entity_count(&self) -> usize {
        self.nodes.len()
    }

    /// Number of relations.
    pub fn relation_count(&self) -> usize {
        self.graph.edge_count()
    }

    /// The entity with normalised name `key`.
    pub fn entity(&self, key: &str) -> Option<&Entity> {
        self.nodes
            .get(key)
            .and_then(|&ix| self.graph.node_weight(ix))
    }

    /// The relation between `a` and `b` (normalised names, any order).
    pub fn relation(&self, a: &str, b: &str) -> Option<&Relation> {
        let (&ia, &ib) = (self.nodes.get(a)?, self.nodes.get(b)?);
        self.graph
            .find_edge(ia, ib)
            .and_then(|e| self.graph.edge_weight(e))
    }

    /// Every entity, by key.
    pub fn entities(&self) -> impl Iterator<Item = &Entity> {
        self.nodes
            .values()
            .filter_map(|&ix| self.graph.node_weight(ix))
    }

    /// Every relation, in key order.
    pub fn relations(&self) -> Vec<&Relation> {
        let mut v: Vec<&Relation> = self.graph.edge_weights().collect();
        v.sort_by(|a, b| a.ends.cmp(&b.ends));
        v
    }

    /// Number of relations of an entity.
    pub fn degree(&self, key: &str) -> usize {
        self.nodes
            .get(key)
            .map_or(0, |&ix| self.graph.edges(ix).count())
    }

    /// Relations of an entity, most supported first (ties: the ends' combined
    /// degree, then key), as LightRAG orders a node's edges.
    pub fn relations_of(&self, key: &str) -> Vec<&Relation> {
        let Some(&ix) = self.nodes.get(key) else {
            return Vec::new();
        };
        let mut v: Vec<&Relation> = self.graph.edges(ix).map(|e| e.weight()).collect();
        v.sort_by(|a, b| {
            let da = self.degree(&a.ends.0) + self.degree(&a.ends.1);
            let db = self.degree(&b.ends.0) + self.degree(&b.ends.1);
            b.weight()
                .cmp(&a.weight())
                .then(db.cmp(&da))
                .then(a.ends.cmp(&b.ends))
        });
        v
    }

    fn node_for(&mut self, key: &str) -> NodeIndex {
        if let Some(&ix) = self.nodes.get(key) {
            return ix;
        }
        let ix = self.graph.add_node(Entity {
            key: key.to_string(),
            sources: BTreeMap::new(),
        });
        self.nodes.insert(key.to_string(), ix);
        ix
    }

    /// Merges chunk `chunk`'s extraction. Relation ends missing from the
    /// entity list become entities described by nothing but their name.
    pub fn add_extraction(&mut self, chunk: u64, x: &Extraction) -> Touched {
        let mut touched = Touched::default();
        for e in &x.entities {
            let key = normalize_name(&e.name);
            let ix = self.node_for(&key);
            if let Some(node) = self.graph.node_weight_mut(ix) {
                let c = node
                    .sources
                    .entry(chunk)
                    .or_insert_with(|| EntityContribution {
                        name: e.name.trim().to_string(),
                        kind: e.kind.clone(),
                        descriptions: Vec::new(),
                    });
                if c.kind.is_empty() {
                    c.kind = e.kind.clone();
                }
                if !e.description.trim().is_empty() {
                    c.descriptions.push(e.description.trim().to_string());
                }
            }
            touched.entities_changed.insert(key);
        }
        for r in &x.relations {
            let (ka, kb) = (normalize_name(&r.source), normalize_name(&r.target));
            for (k, name) in [(&ka, &r.source), (&kb, &r.target)] {
                let ix = self.node_for(k);
                if let Some(node) = self.graph.node_weight_mut(ix) {
                    node.sources
                        .entry(chunk)
                        .or_insert_with(|| EntityContribution {
                            name: name.trim().to_string(),
                            kind: String::new(),
                            descriptions: Vec::new(),
                        });
                }
                touched.entities_changed.insert(k.clone());
            }
            let ends = relation_key(&ka, &kb);
            let (ia, ib) = (self.nodes[&ends.0], self.nodes[&ends.1]);
            let edge = match self.graph.find_edge(ia, ib) {
                Some(e) => e,
                None => self.graph.add_edge(
                    ia,
                    ib,
                    Relation {
                        ends: ends.clone(),
                        sources: BTreeMap::new(),
                    },
                ),
            };
            if let Some(rel) = self.graph.edge_weight_mut(edge) {
                let c = rel
                    .sources
                    .entry(chunk)
                    .or_insert_with(|| RelationContribution {
                        keywords: Vec::new(),
                        descriptions: Vec::new(),
                    });
                c.keywords.extend(
                    r.keywords
                        .split([',', ';'])
                        .map(str::trim)
                        .filter(|k| !k.is_empty())
                        .map(str::to_string),
                );
                if !r.description.trim().is_empty() {
                    c.descriptions.push(r.description.trim().to_string());
                }
            }
            touched.relations_changed.insert(ends);
        }
        touched
    }

    /// Removes every contribution of the given chunks, deletes entities and
    /// relations left without any (a removed entity takes its relations
    /// along), and reports what changed.
    pub fn remove_chunks(&mut self, chunks: &BTreeSet<u64>) -> Touched {
        let mut touched = Touched::default();
        let edges: Vec<EdgeIndex> = self.graph.edge_indices().collect();
        for e in edges {
            let Some(rel) = self.graph.edge_weight_mut(e) else {
                continue;
            };
            if !drop_sources(&mut rel.sources, chunks) {
                continue;
            }
            let ends = rel.ends.clone();
            if rel.sources.is_empty() {
                self.graph.remove_edge(e);
                touched.relations_removed.insert(ends);
            } else {
                touched.relations_changed.insert(ends);
            }
        }
        let keys: Vec<String> = self.nodes.keys().cloned().collect();
        for key in keys {
            let ix = self.nodes[&key];
            let Some(node) = self.graph.node_weight_mut(ix) else {
                continue;
            };
            if !drop_sources(&mut node.sources, chunks) {
                continue;
            }
            if node.sources.is_empty() {
                let incident: Vec<(String, String)> = self
                    .graph
                    .edges(ix)
                    .map(|e| e.weight().ends.clone())
                    .collect();
                for ends in incident {
                    touched.relations_changed.remove(&ends);
                    touched.relations_removed.insert(ends);
                }
                self.graph.remove_node(ix);
                self.nodes.remove(&key);
                touched.entities_removed.insert(key);
            } else {
                touched.entities_changed.insert(key);
            }
        }
        touched
    }

    /// The graph as plain lists (entities and relations in key order).
    pub fn to_parts(&self) -> (Vec<Entity>, Vec<Relation>) {
        (
            self.entities().cloned().collect(),
            self.relations().into_iter().cloned().collect(),
        )
    }

    /// Rebuilds a graph from [`to_parts`](Self::to_parts); rejects duplicate
    /// entities, dangling or duplicate relations and empty contributions.
    pub fn from_parts(entities: Vec<Entity>, relations: Vec<Relation>) -> Result<Self, String> {
        let mut g = KnowledgeGraph::default();
        for e in entities {
            if e.sources.is_empty() || g.nodes.contains_key(&e.key) {
                return Err(format!("entity {:?} is empty or duplicated", e.key));
            }
            let key = e.key.clone();
            let ix = g.graph.add_node(e);
            g.nodes.insert(key, ix);
        }
        for r in relations {
            let (Some(&ia), Some(&ib)) = (g.nodes.get(&r.ends.0), g.nodes.get(&r.ends.1)) else {
                return Err(format!("relation {:?} has a missing end", r.ends));
            };
            if r.sources.is_empty() || g.graph.find_edge(ia, ib).is_some() {
                return Err(format!("relation {:?} is empty or duplicated", r.ends));
            }
            g.graph.add_edge(ia, ib, r);
        }
        Ok(g)
    }
}

/// Drops the contributions of `chunks` from `sources`; whether any went.
fn drop_sources<V>(sources: &mut BTreeMap<u64, V>, chunks: &BTreeSet<u64>) -> bool {
    let before = sources.len();
    sources.retain(|c, _| !chunks.contains(c));
    sources.len() != before
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::{ExtractedEntity, ExtractedRelation};

    fn x(ents: &[(&str, &str)], rels: &[(&str, &str, &str)]) -> Extraction {
        Extraction {
            entities: ents
                .iter()
                .map(|(n, d)| ExtractedEntity {
                    name: n.to_string(),
                    kind: "person".into(),
                    description: d.to_string(),
                })
                .collect(),
            relations: rels
                .iter()
                .map(|(a, b, d)| ExtractedRelation {
                    source: a.to_string(),
                    target: b.to_string(),
                    keywords: "k".into(),
                    description: d.to_string(),
                })
                .collect(),
        }
    }

    #[test]
    fn merges_by_normalised_name_and_repairs_on_removal() {
        let mut g = KnowledgeGraph::default();
        g.add_extraction(1, &x(&[("Ana", "likes tea")], &[("Ana", "Ben", "friends")]));
        g.add_extraction(
            2,
            &x(&[("ana", "plays violin")], &[("ben", "ANA", "neighbours")]),
        );
        assert_eq!(g.entity_count(), 2);
        assert_eq!(g.relation_count(), 1);
        assert_eq!(
            g.entity("ana").unwrap().description(),
            "likes tea; plays violin"
        );
        assert_eq!(g.relation("ben", "ana").unwrap().weight(), 2);
        let t = g.remove_chunks(&BTreeSet::from([2]));
        assert_eq!(g.entity("ana").unwrap().description(), "likes tea");
        assert_eq!(g.relation("ana", "ben").unwrap().description(), "friends");
        assert!(t.entities_changed.contains("ana") && t.relations_removed.is_empty());
        let t = g.remove_chunks(&BTreeSet::from([1]));
        assert_eq!((g.entity_count(), g.relation_count()), (0, 0));
        assert_eq!(t.entities_removed.len(), 2);
        assert_eq!(t.relations_removed.len(), 1);
    }

    #[test]
    fn parts_round_trip() {
        let mut g = KnowledgeGraph::default();
        g.add_extraction(1, &x(&[("A", "a")], &[("A", "B", "ab"), ("B", "C", "bc")]));
        let (e, r) = g.to_parts();
        let h = KnowledgeGraph::from_parts(e.clone(), r.clone()).unwrap();
        assert_eq!(h.to_parts(), (e.clone(), r.clone()));
        assert_eq!(h.relations_of("b").len(), 2);
        let mut dup = e.clone();
        dup.push(e[0].clone());
        assert!(KnowledgeGraph::from_parts(dup, r).is_err());
    }
}
