//! Exact dense indexes over chunks, entities and relations, with lazy batch
//! indexing: items are marked *pending* when written or changed, and their
//! vectors are computed in batches on `manage` or on the first read that
//! needs them. A changed or removed item loses its vector at once, so no
//! stale vector can ever match (LightRAG keeps stale vectors after deletes,
//! HKUDS/LightRAG#1554). Every vector records a digest of the text it was
//! computed from, which [`crate::GraphMemory::check_consistency`] verifies.
//!
//! Brute-force cosine (not HNSW): one namespace holds hundreds to a few
//! thousand items, where an exact scan costs well under a millisecond and
//! keeps results deterministic across persist/restore.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use submem_core::cosine;

/// First 8 bytes of the SHA-256 of `text`, as a number.
pub fn digest(text: &str) -> u64 {
    let h = Sha256::digest(text.as_bytes());
    let mut b = [0u8; 8];
    b.copy_from_slice(&h[..8]);
    u64::from_le_bytes(b)
}

/// One indexed vector and the digest of its text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Indexed {
    /// [`digest`] of the text embedded.
    pub digest: u64,
    /// L2-normalised vector.
    pub vector: Vec<f32>,
}

/// A [`VectorIndex`] as saved.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedIndex<K> {
    /// Vectors with their keys.
    pub vectors: Vec<(K, Indexed)>,
    /// Keys waiting for a vector.
    pub pending: Vec<K>,
}

/// A dense index keyed by `K`.
#[derive(Debug, Clone)]
pub struct VectorIndex<K: Ord> {
    /// Vectors by key.
    pub vectors: BTreeMap<K, Indexed>,
    /// Keys waiting for a vector.
    pub pending: BTreeSet<K>,
}

impl<K: Ord> Default for VectorIndex<K> {
    fn default() -> Self {
        VectorIndex {
            vectors: BTreeMap::new(),
            pending: BTreeSet::new(),
        }
    }
}

impl<K: Ord + Clone> VectorIndex<K> {
    /// Drops `key`'s vector and queues it for embedding.
    pub fn mark(&mut self, key: K) {
        self.vectors.remove(&key);
        self.pending.insert(key);
    }

    /// Forgets `key` entirely.
    pub fn remove(&mut self, key: &K) {
        self.vectors.remove(key);
        self.pending.remove(key);
    }

    /// Stores a computed vector.
    pub fn insert(&mut self, key: K, text: &str, vector: Vec<f32>) {
        self.pending.remove(&key);
        self.vectors.insert(
            key,
            Indexed {
                digest: digest(text),
                vector,
            },
        );
    }

    /// The `k` keys closest to `query` by cosine, best first (ties: key order).
    pub fn top_k(&self, query: &[f32], k: usize) -> Vec<(K, f32)> {
        let mut scored: Vec<(K, f32)> = self
            .vectors
            .iter()
            .map(|(key, ix)| (key.clone(), cosine(query, &ix.vector)))
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        scored.truncate(k);
        scored
    }

    /// The keys of [`VectorIndex::top_k`] for `query`, none without a query.
    pub fn top_keys(&self, query: Option<&Vec<f32>>, k: usize) -> Vec<K> {
        query.map_or_else(Vec::new, |q| {
            self.top_k(q, k).into_iter().map(|(key, _)| key).collect()
        })
    }

    /// The index as lists (JSON maps cannot have tuple keys).
    pub fn to_saved(&self) -> SavedIndex<K> {
        SavedIndex {
            vectors: self
                .vectors
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            pending: self.pending.iter().cloned().collect(),
        }
    }

    /// Rebuilds an index from [`to_saved`](Self::to_saved). Vectors of
    /// another dimension (another embedder) are dropped and queued again.
    pub fn from_saved(saved: SavedIndex<K>, dimension: usize) -> Self {
        let mut ix = VectorIndex::default();
        ix.pending.extend(saved.pending);
        for (k, v) in saved.vectors {
            if v.vector.len() == dimension {
                ix.vectors.insert(k, v);
            } else {
                ix.pending.insert(k);
            }
        }
        ix
    }

    /// Heap bytes of the vectors, roughly.
    pub fn bytes(&self) -> u64 {
        self.vectors
            .values()
            .map(|v| (v.vector.len() * 4 + 48) as u64)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marking_drops_the_old_vector() {
        let mut ix: VectorIndex<u64> = VectorIndex::default();
        ix.insert(1, "a", vec![1.0, 0.0]);
        ix.insert(2, "b", vec![0.0, 1.0]);
        assert_eq!(ix.top_k(&[1.0, 0.0], 1)[0].0, 1);
        ix.mark(1);
        assert_eq!(ix.top_k(&[1.0, 0.0], 2).len(), 1);
        assert!(ix.pending.contains(&1));
        ix.remove(&1);
        assert!(ix.pending.is_empty());
        assert_ne!(digest("a"), digest("b"));
    }
}
