//! One namespace of the dense substrate: its units, a contiguous array of
//! their unit vectors, tombstones, and (at or above
//! [`DenseConfig::exact_threshold`] live units) an HNSW graph over them.
//!
//! The graph is always the result of inserting **every slot, in slot order**,
//! into a fresh `hnsw_rs` index (whose level generator is seeded), one at a
//! time: forgetting only sets a tombstone, which reads filter out. The graph
//! is therefore a pure function of the slots and of whether it exists, so a
//! restore that re-inserts the persisted slots rebuilds the very same graph and
//! answers every query the same way. [`DenseNs::compact`] drops the tombstoned
//! slots and rebuilds the graph from the survivors.

use hnsw_rs::hnsw::Hnsw;
use std::collections::HashMap;

use super::config::DenseConfig;
use super::vector::{dot, exact_top_k, UnitDot};
use crate::unit::StoredUnit;

/// Bytes per neighbour entry inside hnsw_rs (`Arc<Point>` + `f32`, padded).
const NEIGHBOUR_BYTES: u64 = 16;
/// Fixed bytes per hnsw_rs point besides its vector and neighbour lists.
const POINT_OVERHEAD_BYTES: u64 = 96;

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
    graph: Option<Hnsw<'static, f32, UnitDot>>,
}

impl std::fmt::Debug for DenseNs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenseNs")
            .field("slots", &self.units.len())
            .field("dead", &self.dead)
            .field("graph", &self.graph.is_some())
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
            graph: None,
        }
    }

    /// Rebuilds a namespace from persisted slots; `with_graph` says whether
    /// the persisted one had a graph.
    pub fn from_parts(
        dim: usize,
        units: Vec<StoredUnit>,
        vectors: Vec<f32>,
        alive: Vec<bool>,
        next_position: u64,
        with_graph: bool,
        cfg: &DenseConfig,
    ) -> Self {
        let ids = units
            .iter()
            .zip(&alive)
            .enumerate()
            .filter(|(_, (_, a))| **a)
            .map(|(slot, (u, _))| (u.source_id.clone(), slot))
            .collect();
        let dead = alive.iter().filter(|a| !**a).count();
        let mut ns = DenseNs {
            dim,
            units,
            vectors,
            alive,
            dead,
            ids,
            next_position,
            graph: None,
        };
        if with_graph {
            ns.graph = Some(ns.build_graph(cfg));
        }
        ns
    }

    /// Live source ids → slot.
    pub fn ids(&self) -> &HashMap<String, usize> {
        &self.ids
    }

    /// Units that can still be shown.
    pub fn live(&self) -> usize {
        self.units.len() - self.dead
    }

    /// Whether an HNSW graph serves this namespace.
    pub fn has_graph(&self) -> bool {
        self.graph.is_some()
    }

    /// Appends units (positions already set) with their unit vectors, then
    /// inserts them into the graph, building it when the namespace reaches
    /// the threshold.
    pub fn append(&mut self, units: Vec<StoredUnit>, vectors: Vec<f32>, cfg: &DenseConfig) {
        let first = self.units.len();
        for (i, u) in units.into_iter().enumerate() {
            self.next_position = self.next_position.max(u.position + 1);
            self.ids.insert(u.source_id.clone(), first + i);
            self.units.push(u);
            self.alive.push(true);
        }
        self.vectors.extend_from_slice(&vectors);
        match &self.graph {
            Some(graph) => {
                for slot in first..self.units.len() {
                    graph.insert_slice((self.row(slot), slot));
                }
            }
            None if self.live() >= cfg.exact_threshold => {
                tracing::debug!(slots = self.units.len(), "building HNSW graph");
                self.graph = Some(self.build_graph(cfg));
            }
            None => {}
        }
    }

    fn row(&self, slot: usize) -> &[f32] {
        &self.vectors[slot * self.dim..(slot + 1) * self.dim]
    }

    /// A fresh graph over every slot, inserted one at a time in slot order.
    fn build_graph(&self, cfg: &DenseConfig) -> Hnsw<'static, f32, UnitDot> {
        let graph = Hnsw::new(
            cfg.max_connections,
            self.units.len().max(1024),
            cfg.max_layers,
            cfg.ef_construction,
            UnitDot,
        );
        for slot in 0..self.units.len() {
            graph.insert_slice((self.row(slot), slot));
        }
        graph
    }

    /// The `k` live slots nearest to `query` (a unit vector), best first, with
    /// their exact cosine; ties go to the newer slot.
    pub fn search(&self, query: &[f32], k: usize, cfg: &DenseConfig) -> Vec<(usize, f32)> {
        // Clamped: a huge user-given k must not become a huge allocation.
        let k = k.min(self.live());
        if k == 0 {
            return Vec::new();
        }
        let Some(graph) = &self.graph else {
            return exact_top_k(query, &self.vectors, self.dim, k, |slot| self.alive[slot]);
        };
        let ef = cfg.ef_search.max(k);
        let hits = if self.dead == 0 {
            graph.search(query, k, ef)
        } else {
            let alive = |id: &usize| self.alive.get(*id).copied().unwrap_or(false);
            graph.search_filter(query, k, ef, Some(&alive))
        };
        let mut scored: Vec<(usize, f32)> = hits
            .into_iter()
            .map(|n| n.d_id)
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

    /// Drops tombstoned slots and rebuilds the graph (or drops it below the
    /// threshold); returns how many slots were removed.
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
        let with_graph = units.len() >= cfg.exact_threshold;
        *self = DenseNs::from_parts(
            self.dim,
            units,
            vectors,
            alive,
            self.next_position,
            with_graph,
            cfg,
        );
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

    /// Estimated bytes: units, the vector array, the id map, and for the
    /// graph one more copy of each vector (hnsw_rs keeps its own), the
    /// expected neighbour lists (`2·M` on layer 0, `M` above on the
    /// `1/(M−1)` share of points that reach them) and a fixed per-point cost.
    pub fn memory_bytes(&self, cfg: &DenseConfig) -> u64 {
        let units: u64 = self.units.iter().map(StoredUnit::heap_bytes).sum();
        let vectors = (self.vectors.capacity() * 4) as u64;
        let ids: u64 = self
            .ids
            .keys()
            .map(|k| (k.capacity() + 32) as u64)
            .sum::<u64>();
        let alive = self.alive.capacity() as u64;
        let graph = if self.graph.is_some() {
            let m = cfg.max_connections as u64;
            let upper = m / (m.saturating_sub(1)).max(1);
            let per_point =
                self.dim as u64 * 4 + (2 * m + upper) * NEIGHBOUR_BYTES + POINT_OVERHEAD_BYTES;
            per_point * self.units.len() as u64
        } else {
            0
        };
        units + vectors + ids + alive + graph
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
    fn rebuilt_graph_answers_like_the_original() {
        let cfg = DenseConfig::default().with_exact_threshold(20);
        let dim = 12;
        let mut ns = DenseNs::new(dim);
        ns.append((0..25).map(unit).collect(), vectors(25, dim, 4), &cfg);
        ns.append((25..60).map(unit).collect(), vectors(35, dim, 5), &cfg);
        ns.forget(&["u3".into()]);
        let copy = DenseNs::from_parts(
            dim,
            ns.units.clone(),
            ns.vectors.clone(),
            ns.alive.clone(),
            ns.next_position,
            true,
            &cfg,
        );
        for seed in 0..20 {
            let q = vectors(1, dim, 100 + seed);
            assert_eq!(ns.search(&q, 5, &cfg), copy.search(&q, 5, &cfg));
        }
    }
}
