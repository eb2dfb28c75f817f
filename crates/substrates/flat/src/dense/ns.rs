//! One namespace of the dense substrate: its units, a contiguous array of
//! their unit vectors, tombstones, and its [`Index`]: none below
//! [`DenseConfig::exact_threshold`] live units (an exact scan), an HNSW
//! [`Graph`] from there, and [`Partitions`] from
//! [`DenseConfig::partition_threshold`].
//!
//! Forgetting sets a tombstone, which reads filter out, and clears the
//! slot's text and vector (the index keeps its copy of the point until
//! compaction);
//! [`DenseNs::compact`] drops the tombstoned slots and rebuilds the index from
//! the survivors. A restore gets the saved index back as it was (see
//! [`super::graph`] and [`super::partitions`]), so it answers every query the
//! same way.

use std::collections::HashMap;
use std::path::Path;
use submem_core::Result;

use super::config::DenseConfig;
use super::graph::{Graph, GraphFiles};
use super::partitions::Partitions;
use super::vector::{dot, exact_top_k};
use crate::unit::StoredUnit;

/// Bytes per neighbour entry inside hnsw_rs (`Arc<Point>` + `f32`, padded).
const NEIGHBOUR_BYTES: u64 = 16;
/// Fixed bytes per hnsw_rs point besides its vector and neighbour lists.
const POINT_OVERHEAD_BYTES: u64 = 96;

/// What serves a namespace's searches besides its vectors.
pub(crate) enum Index {
    /// An exact scan (below [`DenseConfig::exact_threshold`]).
    Exact,
    /// An HNSW graph.
    Graph(Graph),
    /// A partitioned index (from [`DenseConfig::partition_threshold`]).
    Partitions(Partitions),
}

/// A namespace's dense index.
pub(crate) struct DenseNs {
    dim: usize,
    /// Units by slot, in write order.
    pub units: Vec<StoredUnit>,
    /// Row-major unit vectors, `dim` per slot.
    pub vectors: Vec<f32>,
    /// Tombstones: `alive[slot]` is false once forgotten.
    pub alive: Vec<bool>,
    dead: usize,
    /// Live source id → slot.
    ids: HashMap<String, usize>,
    /// Position the next unit gets.
    pub next_position: u64,
    index: Index,
}

impl std::fmt::Debug for DenseNs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenseNs")
            .field("slots", &self.units.len())
            .field("dead", &self.dead)
            .field("index", &self.index_kind())
            .finish()
    }
}

impl DenseNs {
    /// An empty namespace of `dim`-dimensional vectors.
    pub fn new(dim: usize) -> Self {
        DenseNs {
            dim,
            units: Vec::new(),
            vectors: Vec::new(),
            alive: Vec::new(),
            dead: 0,
            ids: HashMap::new(),
            next_position: 0,
            index: Index::Exact,
        }
    }

    /// A namespace from its slots and its index (which must index exactly
    /// these slots).
    pub fn from_parts(
        dim: usize,
        units: Vec<StoredUnit>,
        vectors: Vec<f32>,
        alive: Vec<bool>,
        next_position: u64,
        index: Index,
    ) -> Self {
        let ids = units
            .iter()
            .zip(&alive)
            .enumerate()
            .filter(|(_, (_, a))| **a)
            .map(|(slot, (u, _))| (u.source_id.clone(), slot))
            .collect();
        let dead = alive.iter().filter(|a| !**a).count();
        DenseNs {
            dim,
            units,
            vectors,
            alive,
            dead,
            ids,
            next_position,
            index,
        }
    }

    /// Live source ids → slot.
    pub fn ids(&self) -> &HashMap<String, usize> {
        &self.ids
    }

    /// Units that can still be shown.
    pub fn live(&self) -> usize {
        self.units.len() - self.dead
    }

    /// Which index serves this namespace: `exact`, `hnsw` or `partitions`.
    pub fn index_kind(&self) -> &'static str {
        match self.index {
            Index::Exact => "exact",
            Index::Graph(_) => "hnsw",
            Index::Partitions(_) => "partitions",
        }
    }

    /// Whether an HNSW graph serves this namespace.
    #[cfg(test)]
    pub fn has_graph(&self) -> bool {
        matches!(self.index, Index::Graph(_))
    }

    /// Appends units (positions already set) with their unit vectors, then
    /// indexes them: into the graph or partitions the namespace has, or
    /// building the graph or partitions when it reaches their threshold
    /// (and training the partitions again when they have outgrown theirs).
    pub fn append(&mut self, units: Vec<StoredUnit>, vectors: Vec<f32>, cfg: &DenseConfig) {
        let first = self.units.len();
        for (i, u) in units.into_iter().enumerate() {
            self.next_position = self.next_position.max(u.position + 1);
            self.ids.insert(u.source_id.clone(), first + i);
            self.units.push(u);
            self.alive.push(true);
        }
        self.vectors.extend_from_slice(&vectors);
        let live = self.live();
        let rebuild = match &self.index {
            Index::Exact => live >= cfg.exact_threshold,
            Index::Graph(_) => live >= cfg.exact_threshold && live >= cfg.partition_threshold,
            Index::Partitions(p) => p.needs_training(live),
        };
        if rebuild {
            self.index = self.build_index(cfg);
        } else if let Index::Graph(graph) = &self.index {
            graph.insert(self.rows(first..self.units.len()));
        } else if let Index::Partitions(p) = &mut self.index {
            p.insert(&self.vectors, first);
        }
    }

    fn row(&self, slot: usize) -> &[f32] {
        &self.vectors[slot * self.dim..(slot + 1) * self.dim]
    }

    fn rows(&self, slots: std::ops::Range<usize>) -> Vec<(&[f32], usize)> {
        slots.map(|slot| (self.row(slot), slot)).collect()
    }

    /// A fresh index over every slot, of the kind the live count calls for.
    fn build_index(&self, cfg: &DenseConfig) -> Index {
        let live = self.live();
        if live == 0 || live < cfg.exact_threshold {
            Index::Exact
        } else if live >= cfg.partition_threshold {
            tracing::debug!(slots = self.units.len(), "training partitions");
            let alive = &self.alive;
            Index::Partitions(Partitions::build(&self.vectors, self.dim, |s| alive[s]))
        } else {
            tracing::debug!(slots = self.units.len(), "building HNSW graph");
            let graph = Graph::new(cfg, self.units.len());
            graph.insert(self.rows(0..self.units.len()));
            Index::Graph(graph)
        }
    }

    /// Saves the graph, if any, into `dir` under `basename`.
    pub fn save_graph(&self, dir: &Path, basename: &str) -> Result<Option<GraphFiles>> {
        match &self.index {
            Index::Graph(g) => g.save(dir, basename).map(Some),
            _ => Ok(None),
        }
    }

    /// The partitions, if they serve this namespace.
    pub fn partitions(&self) -> Option<&Partitions> {
        match &self.index {
            Index::Partitions(p) => Some(p),
            _ => None,
        }
    }

    /// The `k` live slots nearest to `query` (a unit vector), best first, with
    /// their exact cosine; ties go to the newer slot. With a graph, the `ef`
    /// candidates it finds are rescored exactly and the best `k` kept; with
    /// partitions, the `4·ef` their codes rank first.
    pub fn search(&self, query: &[f32], k: usize, cfg: &DenseConfig) -> Vec<(usize, f32)> {
        // Clamped: a huge user-given k must not become a huge allocation.
        let k = k.min(self.live());
        if k == 0 {
            return Vec::new();
        }
        let ef = cfg.ef_search.max(k);
        let is_alive = |slot: &usize| self.alive.get(*slot).copied().unwrap_or(false);
        let graph = match &self.index {
            Index::Exact => {
                return exact_top_k(query, &self.vectors, self.dim, k, |slot| self.alive[slot])
            }
            Index::Partitions(p) => {
                let hits = p.search(query, ef, cfg.partition_probe, |s| is_alive(&s));
                return self.rescore(query, hits, k);
            }
            Index::Graph(graph) => graph,
        };
        // The whole candidate list comes back and is rescored with the exact
        // vectors below, which undoes the graph's quantisation. hnsw_rs's
        // filtered search never stops early, so forgotten slots are dropped
        // from the unfiltered list; only when too few survive is the
        // filtered search worth its cost.
        let mut hits = graph.search(query, ef, ef, None);
        if self.dead > 0 {
            hits.retain(is_alive);
            if hits.len() < k {
                hits = graph.search(query, ef, ef, Some(&is_alive));
            }
        }
        self.rescore(query, hits, k)
    }

    /// The best `k` of the live `hits` by exact cosine, ties to the newer.
    fn rescore(&self, query: &[f32], hits: Vec<usize>, k: usize) -> Vec<(usize, f32)> {
        let mut scored: Vec<(usize, f32)> = hits
            .into_iter()
            .filter(|slot| self.alive.get(*slot).copied().unwrap_or(false))
            .map(|slot| (slot, dot(query, self.row(slot))))
            .collect();
        scored.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
        scored.truncate(k);
        scored
    }

    /// Tombstones the listed live source ids; returns how many were found.
    pub fn forget(&mut self, source_ids: &[String]) -> usize {
        let mut n = 0;
        for id in source_ids {
            if let Some(slot) = self.ids.remove(id) {
                self.alive[slot] = false;
                // The slot stays until compaction (graph point ids are
                // slots), its content does not: no persisted copy may hold
                // a forgotten event's text or vector.
                let unit = &mut self.units[slot];
                unit.text = String::new();
                unit.source_id = String::new();
                unit.tokens = 0;
                let dim = self.dim;
                self.vectors[slot * dim..(slot + 1) * dim].fill(0.0);
                self.dead += 1;
                n += 1;
            }
        }
        n
    }

    /// Whether tombstones exceed the configured share of slots.
    pub fn needs_compaction(&self, cfg: &DenseConfig) -> bool {
        self.dead > 0 && self.dead as f32 > cfg.compact_share * self.units.len() as f32
    }

    /// Drops tombstoned slots and rebuilds the index for the survivors;
    /// returns how many slots were removed.
    pub fn compact(&mut self, cfg: &DenseConfig) -> usize {
        let removed = self.dead;
        if removed == 0 {
            return 0;
        }
        let mut units = Vec::with_capacity(self.live());
        let mut vectors = Vec::with_capacity(self.live() * self.dim);
        for (slot, unit) in std::mem::take(&mut self.units).into_iter().enumerate() {
            if self.alive[slot] {
                vectors.extend_from_slice(self.row(slot));
                units.push(unit);
            }
        }
        let alive = vec![true; units.len()];
        *self = DenseNs::from_parts(
            self.dim,
            units,
            vectors,
            alive,
            self.next_position,
            Index::Exact,
        );
        self.index = self.build_index(cfg);
        removed
    }

    /// Tokens of the live units' text.
    pub fn stored_tokens(&self) -> u64 {
        self.units
            .iter()
            .zip(&self.alive)
            .filter(|(_, a)| **a)
            .map(|(u, _)| u64::from(u.tokens))
            .sum()
    }

    /// Estimated bytes: units, the vector array, the id map, and the index:
    /// for a graph each vector's `i8` code (hnsw_rs keeps its own copy), the
    /// expected neighbour lists (`2·M` on layer 0, `M` above on the
    /// `1/(M−1)` share of points that reach them) and a fixed per-point
    /// cost; for partitions what they hold.
    pub fn memory_bytes(&self, cfg: &DenseConfig) -> u64 {
        let units: u64 = self.units.iter().map(StoredUnit::heap_bytes).sum();
        let vectors = (self.vectors.capacity() * 4) as u64;
        let ids: u64 = self
            .ids
            .keys()
            .map(|k| (k.capacity() + 32) as u64)
            .sum::<u64>();
        let alive = self.alive.capacity() as u64;
        let index = match &self.index {
            Index::Exact => 0,
            Index::Graph(_) => {
                let m = cfg.max_connections as u64;
                let upper = m / (m.saturating_sub(1)).max(1);
                let per_point =
                    self.dim as u64 + (2 * m + upper) * NEIGHBOUR_BYTES + POINT_OVERHEAD_BYTES;
                per_point * self.units.len() as u64
            }
            Index::Partitions(p) => p.memory_bytes(),
        };
        units + vectors + ids + alive + index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(i: usize) -> StoredUnit {
        StoredUnit {
            source_id: format!("u{i}"),
            text: format!("unit {i}"),
            position: i as u64,
            tokens: 2,
        }
    }

    /// Deterministic pseudo-random unit vectors.
    fn vectors(n: usize, dim: usize, seed: u64) -> Vec<f32> {
        let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        let mut out = Vec::with_capacity(n * dim);
        for _ in 0..n {
            let mut v: Vec<f32> = (0..dim)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((x >> 33) as f32 / (1u64 << 31) as f32) - 0.5
                })
                .collect();
            submem_core::l2_normalize(&mut v);
            out.extend(v);
        }
        out
    }

    #[test]
    fn graph_is_built_at_threshold_and_search_finds_exact_match() {
        let cfg = DenseConfig::default().with_exact_threshold(50);
        let dim = 16;
        let mut ns = DenseNs::new(dim);
        ns.append((0..40).map(unit).collect(), vectors(40, dim, 1), &cfg);
        assert!(!ns.has_graph());
        ns.append((40..80).map(unit).collect(), vectors(40, dim, 2), &cfg);
        assert!(ns.has_graph());
        let q = ns.row(63).to_vec();
        let top = ns.search(&q, 3, &cfg);
        assert_eq!(top[0].0, 63);
        assert!((top[0].1 - 1.0).abs() < 1e-5);
    }

    #[test]
    fn forget_filters_and_compaction_renumbers() {
        let cfg = DenseConfig::default().with_exact_threshold(10);
        let dim = 8;
        let mut ns = DenseNs::new(dim);
        ns.append((0..30).map(unit).collect(), vectors(30, dim, 3), &cfg);
        let q = ns.row(7).to_vec();
        assert_eq!(ns.forget(&["u7".into(), "missing".into()]), 1);
        assert!(ns.search(&q, 30, &cfg).iter().all(|(s, _)| *s != 7));
        assert!(!ns.needs_compaction(&cfg));
        let many: Vec<String> = (0..10).map(|i| format!("u{i}")).collect();
        assert_eq!(ns.forget(&many), 9);
        assert!(ns.needs_compaction(&cfg));
        assert_eq!(ns.compact(&cfg), 10);
        assert_eq!(ns.units.len(), 20);
        assert_eq!(ns.live(), 20);
        assert!(ns.has_graph());
        assert_eq!(ns.ids()["u10"], 0);
        assert_eq!(ns.next_position, 30);
    }

    #[test]
    fn saved_graph_loads_and_answers_like_the_original() {
        let cfg = DenseConfig::default().with_exact_threshold(20);
        let dim = 12;
        let mut ns = DenseNs::new(dim);
        ns.append((0..25).map(unit).collect(), vectors(25, dim, 4), &cfg);
        // A batch large enough to be inserted in parallel.
        ns.append((25..300).map(unit).collect(), vectors(275, dim, 5), &cfg);
        ns.forget(&["u3".into()]);
        let dir = tempfile::tempdir().unwrap();
        let files = ns.save_graph(dir.path(), "g").unwrap().unwrap();
        let graph = Graph::load(dir.path(), &files, 300, dim).unwrap();
        let copy = DenseNs::from_parts(
            dim,
            ns.units.clone(),
            ns.vectors.clone(),
            ns.alive.clone(),
            ns.next_position,
            Index::Graph(graph),
        );
        for seed in 0..20 {
            let q = vectors(1, dim, 100 + seed);
            assert_eq!(ns.search(&q, 5, &cfg), copy.search(&q, 5, &cfg));
        }
        assert!(Graph::load(dir.path(), &files, 299, dim).is_err());
        let mut altered = files.clone();
        altered.graph_sha256 = "0".repeat(64);
        assert!(Graph::load(dir.path(), &altered, 300, dim).is_err());
    }

    #[test]
    fn tombstones_are_skipped_without_losing_k() {
        let cfg = DenseConfig::default().with_exact_threshold(10);
        let dim = 16;
        let mut ns = DenseNs::new(dim);
        ns.append((0..200).map(unit).collect(), vectors(200, dim, 6), &cfg);
        let q = ns.row(42).to_vec();
        let before = ns.search(&q, 10, &cfg);
        let gone: Vec<String> = before[..5].iter().map(|(s, _)| format!("u{s}")).collect();
        ns.forget(&gone);
        let after = ns.search(&q, 10, &cfg);
        assert_eq!(after.len(), 10);
        assert!(after.iter().all(|(s, _)| ns.alive[*s]));
        // Forgetting all but three still finds those three.
        let most: Vec<String> = (3..200).map(|i| format!("u{i}")).collect();
        ns.forget(&most);
        let left: Vec<usize> = ns.search(&q, 10, &cfg).iter().map(|(s, _)| *s).collect();
        assert_eq!(left.len(), 3);
    }
}
