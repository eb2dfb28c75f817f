//! Piece vectors in one contiguous block, one row per piece.
//!
//! A dense piece ranking compares the query with every piece of the history
//! on each read. Held as one `Vec<f32>` per piece in a hash map, the vectors
//! were scattered over the heap, and at 1,000 units (5,000 pieces of 384
//! floats, 7.7 MB) the ranking spent most of its time waiting on memory.
//! Rows here are written in the order pieces are embedded, so a ranking
//! streams them.

use rustc_hash::FxHashMap;
use submem_core::cosine;

use crate::pieces::PieceKey;

/// Piece vectors by piece key, stored as rows of one block.
#[derive(Debug, Clone, Default)]
pub struct PieceVectors {
    /// Floats per row; 0 until the first vector arrives.
    dim: usize,
    rows: Vec<f32>,
    // Fx, not SipHash: the keys are our own sequence numbers.
    slot_of: FxHashMap<PieceKey, usize>,
    /// The piece of each row (`None` for a free row).
    key_of: Vec<Option<PieceKey>>,
    free: Vec<usize>,
}

impl PieceVectors {
    /// The vector of piece `k`.
    pub fn get(&self, k: &PieceKey) -> Option<&[f32]> {
        let slot = *self.slot_of.get(k)?;
        self.rows.get(slot * self.dim..(slot + 1) * self.dim)
    }

    /// Whether piece `k` has a vector.
    pub fn contains_key(&self, k: &PieceKey) -> bool {
        self.slot_of.contains_key(k)
    }

    /// Pieces with a vector.
    pub fn len(&self) -> usize {
        self.slot_of.len()
    }

    /// Whether no piece has a vector.
    pub fn is_empty(&self) -> bool {
        self.slot_of.is_empty()
    }

    /// Sets the vector of piece `k`. A vector of another length than those
    /// held comes from another embedder, and vectors of two embedders cannot
    /// be compared: the old ones are dropped (a render asks for them again).
    pub fn insert(&mut self, k: PieceKey, v: &[f32]) {
        if v.len() != self.dim {
            if !self.slot_of.is_empty() {
                tracing::warn!(
                    held = self.dim,
                    new = v.len(),
                    "piece vectors of another dimension: dropping the old ones"
                );
            }
            *self = PieceVectors {
                dim: v.len(),
                ..PieceVectors::default()
            };
        }
        if self.dim == 0 {
            self.slot_of.insert(k, 0);
            return;
        }
        let slot = match self.slot_of.get(&k) {
            Some(&s) => s,
            None => {
                let s = self.free.pop().unwrap_or(self.key_of.len());
                if s == self.key_of.len() {
                    self.rows.resize(self.rows.len() + self.dim, 0.0);
                    self.key_of.push(None);
                }
                self.slot_of.insert(k, s);
                self.key_of[s] = Some(k);
                s
            }
        };
        self.rows[slot * self.dim..(slot + 1) * self.dim].copy_from_slice(v);
    }

    /// Removes the vector of piece `k` (its row is zeroed and reused).
    pub fn remove(&mut self, k: &PieceKey) {
        if let Some(slot) = self.slot_of.remove(k) {
            if let Some(row) = self.rows.get_mut(slot * self.dim..(slot + 1) * self.dim) {
                row.fill(0.0);
            }
            if let Some(k) = self.key_of.get_mut(slot) {
                *k = None;
                self.free.push(slot);
            }
        }
    }

    /// The cosine of `q` with every held vector whose piece passes `keep`,
    /// reading the rows in storage order (no lookup per piece).
    pub fn cosines(
        &self,
        q: &[f32],
        mut keep: impl FnMut(&PieceKey) -> bool,
    ) -> Vec<(PieceKey, f32)> {
        if self.dim == 0 {
            return self
                .slot_of
                .keys()
                .filter(|k| keep(k))
                .map(|k| (*k, 0.0))
                .collect();
        }
        self.rows
            .chunks_exact(self.dim)
            .zip(&self.key_of)
            .filter_map(|(row, k)| k.filter(|k| keep(k)).map(|k| (k, cosine(row, q))))
            .collect()
    }

    /// Every piece with its vector, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&PieceKey, &[f32])> {
        self.slot_of
            .iter()
            .map(|(k, &s)| (k, &self.rows[s * self.dim..(s + 1) * self.dim]))
    }

    /// Bytes the vectors take (rows in use).
    pub fn bytes(&self) -> u64 {
        4 * (self.slot_of.len() * self.dim) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_get_replace_remove_and_reuse() {
        let mut pv = PieceVectors::default();
        assert!(pv.get(&(1, 0)).is_none());
        pv.insert((1, 0), &[1.0, 2.0]);
        pv.insert((2, 0), &[3.0, 4.0]);
        assert_eq!(pv.get(&(1, 0)), Some(&[1.0, 2.0][..]));
        pv.insert((1, 0), &[5.0, 6.0]);
        assert_eq!(pv.get(&(1, 0)), Some(&[5.0, 6.0][..]));
        assert_eq!(pv.len(), 2);
        pv.remove(&(1, 0));
        assert!(!pv.contains_key(&(1, 0)));
        assert_eq!(pv.len(), 1);
        // The freed row is reused, not appended.
        pv.insert((3, 1), &[7.0, 8.0]);
        assert_eq!(pv.rows.len(), 4);
        let mut c = pv.cosines(&[1.0, 0.0], |_| true);
        c.sort_by_key(|x| x.0);
        assert_eq!(c, vec![((2, 0), 3.0), ((3, 1), 7.0)]);
        assert_eq!(pv.cosines(&[1.0, 0.0], |k| k.0 == 3), vec![((3, 1), 7.0)]);
        assert_eq!(pv.get(&(3, 1)), Some(&[7.0, 8.0][..]));
        assert_eq!(pv.get(&(2, 0)), Some(&[3.0, 4.0][..]));
        assert_eq!(pv.bytes(), 16);
        let mut all: Vec<(PieceKey, Vec<f32>)> = pv.iter().map(|(k, v)| (*k, v.to_vec())).collect();
        all.sort_by_key(|x| x.0);
        assert_eq!(
            all,
            vec![((2, 0), vec![3.0, 4.0]), ((3, 1), vec![7.0, 8.0])]
        );
    }

    #[test]
    fn another_dimension_drops_the_old_vectors() {
        let mut pv = PieceVectors::default();
        pv.insert((1, 0), &[1.0, 2.0]);
        pv.insert((2, 0), &[1.0, 2.0, 3.0]);
        assert!(pv.get(&(1, 0)).is_none());
        assert_eq!(pv.get(&(2, 0)), Some(&[1.0, 2.0, 3.0][..]));
        assert_eq!(pv.len(), 1);
    }

    #[test]
    fn removed_rows_are_zeroed() {
        let mut pv = PieceVectors::default();
        pv.insert((1, 0), &[1.0, 2.0]);
        pv.remove(&(1, 0));
        assert!(pv.rows.iter().all(|x| *x == 0.0));
    }
}
