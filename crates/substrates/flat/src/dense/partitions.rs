//! The partitioned (inverted-file) index of a very large dense namespace:
//! unit vectors grouped around spherical k-means centroids, a query scanning
//! the groups whose centroids lie nearest to it.
//!
//! Why it exists: at a million units an HNSW graph (hnsw_rs) inserts about
//! 1,200 units/s on 2 cores and its greedy walk loses tight topic clusters
//! among tens of thousands (recall@10 0.54–0.60 in the `dense` bench). A
//! partitioned index routes each query by comparing it with *every*
//! centroid, so no walk can get lost, and both its building and its routing
//! are dense matrix products, which run near the machine's peak.
//!
//! Layout: `√n·`[`CENTROIDS_PER_SQRT`] centroids (unit vectors); each
//! partition holds its slots and their one-bit codes contiguously (bit `i`
//! set where component `i` exceeds the mean of the centroids: 48 bytes for
//! 384 dimensions), so a probe streams little memory instead of chasing
//! pointers. A search scores the centroids, scans the `probe` nearest
//! partitions (and more while it has fewer than the candidates it wants),
//! and returns [`RESCORED_PER_WANTED`] times the wanted candidates by
//! Hamming distance; the caller rescores them with the exact `f32` vectors.
//! The scan is bound by memory bandwidth: with the graph's 384-byte `i8`
//! codes a million-unit search took over 2 ms at the probes recall needs;
//! bits are 8× less to read, and the wider rescored pool makes up for
//! their coarser ranking.
//!
//! Training is Lloyd's algorithm on a sample (at most
//! [`SAMPLE_PER_CENTROID`] points per centroid, [`TRAIN_ITERATIONS`]
//! rounds) with the assignment step as one matrix product per chunk of rows
//! on rayon's pool. linfa-clustering's `KMeans` (used elsewhere in the
//! workspace for a few hundred points) measures distances pair by pair,
//! which at 2,000 centroids × 384 dimensions × tens of thousands of points
//! per round is two orders of magnitude slower than the product.
//!
//! Persisted as the centroids and each slot's partition (see
//! [`Partitions::to_bytes`]); the codes are rebuilt from the namespace's
//! vectors on load, so a restored index answers exactly like the saved one.

use ndarray::{s, Array2, ArrayView2, Axis};
use rayon::prelude::*;

use super::vector::dot;

/// Centroids per square root of the points trained on (`4·√n`: 4,000 for a
/// million units trained at once, lists of ~250). Measured with the `dense`
/// bench at a million clustered units, probing 32 partitions: `2·√n` gave
/// recall@10 0.83 (0.83 with 20 training rounds instead of 8), `4·√n` 0.90.
pub(crate) const CENTROIDS_PER_SQRT: f64 = 4.0;
/// Most sample points per centroid in training.
pub(crate) const SAMPLE_PER_CENTROID: usize = 32;
/// Lloyd rounds in training.
pub(crate) const TRAIN_ITERATIONS: usize = 8;
/// The index is trained again once it holds this many times the points it
/// was trained on (its partitions would otherwise grow past their design).
/// Measured building a million clustered units in writes of 5,000 (`dense`
/// bench, medians): 2 gives 8,685 units/s, recall@10 0.978, read p50
/// 1.40 ms; 3 gives 12,640 units/s, 0.972, 1.43 ms; 4 gives 15,202
/// units/s, 0.958, 1.82 ms (its last training, at 340k, leaves partitions
/// three times their design size at a million).
pub(crate) const RETRAIN_GROWTH: usize = 3;
/// Candidates a search returns per wanted one: the one-bit codes rank
/// coarsely, the exact rescoring of a wider pool restores the order.
pub(crate) const RESCORED_PER_WANTED: usize = 4;
/// Rows per matrix product in an assignment.
const ASSIGN_CHUNK: usize = 512;

/// One partition: its slots and their one-bit codes, `⌈dim/64⌉` words per
/// slot.
#[derive(Debug, Default, Clone)]
struct Partition {
    slots: Vec<u32>,
    bits: Vec<u64>,
}

impl Partition {
    /// Adds `slot` with the code of its vector `v`.
    fn push(&mut self, slot: usize, v: &[f32], centre: &[f32]) {
        self.slots.push(slot as u32);
        sign_bits(v, centre, &mut self.bits);
    }
}

/// A trained partitioned index over slots of a namespace.
#[derive(Debug, Clone)]
pub(crate) struct Partitions {
    dim: usize,
    /// Row-major unit centroids, `dim` per partition.
    centroids: Vec<f32>,
    /// Mean of the centroids: the threshold of each code bit.
    centre: Vec<f32>,
    partitions: Vec<Partition>,
    /// Partition of each slot, in slot order.
    assignment: Vec<u32>,
    /// Points the centroids were trained on.
    trained_on: usize,
}

impl Partitions {
    /// Trains centroids on `vectors` (row-major unit vectors, `dim` per
    /// slot) and indexes every slot; `keep(slot)` says which slots take
    /// part in training (forgotten ones do not, but are still assigned so
    /// that slot numbers stay aligned).
    pub fn build(vectors: &[f32], dim: usize, keep: impl Fn(usize) -> bool) -> Self {
        let slots = vectors.len() / dim.max(1);
        let live: Vec<usize> = (0..slots).filter(|s| keep(*s)).collect();
        let count = ((live.len() as f64).sqrt() * CENTROIDS_PER_SQRT).round() as usize;
        let count = count.clamp(1, live.len().max(1));
        let centroids = train(vectors, dim, &live, count);
        let mut index = Partitions {
            dim,
            partitions: vec![Partition::default(); centroids.len() / dim.max(1)],
            centre: mean_row(&centroids, dim),
            centroids,
            assignment: Vec::with_capacity(slots),
            trained_on: live.len(),
        };
        index.insert(vectors, 0);
        index
    }

    /// Rebuilds an index from its saved centroids and slot assignment over
    /// the namespace's `vectors`; `None` when they do not fit together.
    pub fn restore(
        vectors: &[f32],
        dim: usize,
        centroids: Vec<f32>,
        assignment: Vec<u32>,
        trained_on: usize,
    ) -> Option<Self> {
        let count = centroids.len() / dim.max(1);
        if dim == 0
            || count == 0
            || centroids.len() != count * dim
            || assignment.len() * dim != vectors.len()
            || assignment.iter().any(|p| *p as usize >= count)
            || centroids.iter().any(|x| !x.is_finite())
        {
            return None;
        }
        let mut partitions = vec![Partition::default(); count];
        let centre = mean_row(&centroids, dim);
        for (slot, p) in assignment.iter().enumerate() {
            partitions[*p as usize].push(slot, &vectors[slot * dim..(slot + 1) * dim], &centre);
        }
        Some(Partitions {
            dim,
            centre,
            centroids,
            partitions,
            assignment,
            trained_on,
        })
    }

    /// Slots indexed.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.assignment.len()
    }

    /// Whether the index has outgrown what it was trained on.
    pub fn needs_training(&self, live: usize) -> bool {
        live > RETRAIN_GROWTH * self.trained_on.max(1)
    }

    /// Indexes slots `first..` of `vectors` (those not yet indexed), each in
    /// the partition of its nearest centroid.
    pub fn insert(&mut self, vectors: &[f32], first: usize) {
        let dim = self.dim;
        debug_assert_eq!(first, self.assignment.len());
        let new = &vectors[first * dim..];
        let nearest = assign(new, dim, &self.centroids);
        for (i, p) in nearest.into_iter().enumerate() {
            let slot = first + i;
            let row = &vectors[slot * dim..(slot + 1) * dim];
            self.partitions[p as usize].push(slot, row, &self.centre);
            self.assignment.push(p);
        }
    }

    /// Up to `want ×` [`RESCORED_PER_WANTED`] slots whose codes lie nearest
    /// the unit vector `query`'s among slots `keep` accepts: the `probe`
    /// partitions nearest the query are scanned, and further ones, nearest
    /// first, while fewer than that many candidates were found.
    pub fn search(
        &self,
        query: &[f32],
        want: usize,
        probe: usize,
        keep: impl Fn(usize) -> bool,
    ) -> Vec<usize> {
        let arch = pulp::Arch::new();
        let dim = self.dim;
        let mut order: Vec<(usize, f32)> = Vec::with_capacity(self.partitions.len());
        arch.dispatch(
            #[inline(always)]
            || {
                order.extend(
                    self.centroids
                        .chunks_exact(dim)
                        .map(|c| dot(query, c))
                        .enumerate(),
                )
            },
        );
        order.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let want = want.saturating_mul(RESCORED_PER_WANTED);
        let mut code = Vec::new();
        sign_bits(query, &self.centre, &mut code);
        let words = code.len();
        let mut found: Vec<(u32, u32)> = Vec::new();
        let mut scores: Vec<u32> = Vec::new();
        for (visited, (p, _)) in order.into_iter().enumerate() {
            if visited >= probe && found.len() >= want {
                break;
            }
            let part = &self.partitions[p];
            scores.clear();
            // Scanning codes is where a search spends its time: run with
            // the instructions the CPU has (a popcount where present; the
            // x86-64 baseline lacks one).
            arch.dispatch(
                #[inline(always)]
                || scores.extend(part.bits.chunks_exact(words).map(|row| hamming(&code, row))),
            );
            for (slot, score) in part.slots.iter().zip(&scores) {
                if keep(*slot as usize) {
                    found.push((*slot, *score));
                }
            }
        }
        let better = |a: &(u32, u32), b: &(u32, u32)| a.1.cmp(&b.1).then(b.0.cmp(&a.0));
        if found.len() > want && want > 0 {
            found.select_nth_unstable_by(want - 1, better);
        }
        found.truncate(want);
        found.into_iter().map(|(slot, _)| slot as usize).collect()
    }

    /// Bytes this index holds (codes, slots, assignment, centroids).
    pub fn memory_bytes(&self) -> u64 {
        let parts: usize = self
            .partitions
            .iter()
            .map(|p| 8 * p.bits.capacity() + 4 * p.slots.capacity() + 48)
            .sum();
        (parts + 4 * self.assignment.capacity() + 4 * self.centroids.capacity()) as u64
    }

    /// The saved form: a header (`b"SMIVF1"`, dimension, centroid count,
    /// slot count, points trained on; little-endian), the centroids as
    /// `f32`, then each slot's partition as `u32`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(38 + 4 * self.centroids.len() + 4 * self.assignment.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(self.dim as u32).to_le_bytes());
        out.extend_from_slice(&(self.partitions.len() as u32).to_le_bytes());
        out.extend_from_slice(&(self.assignment.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.trained_on as u64).to_le_bytes());
        for x in &self.centroids {
            out.extend_from_slice(&x.to_le_bytes());
        }
        for p in &self.assignment {
            out.extend_from_slice(&p.to_le_bytes());
        }
        out
    }

    /// Reads [`Partitions::to_bytes`]'s form back over the namespace's
    /// `vectors`; an error says what does not fit.
    pub fn from_bytes(bytes: &[u8], vectors: &[f32], dim: usize) -> Result<Self, String> {
        let header = MAGIC.len() + 24;
        if bytes.len() < header || &bytes[..MAGIC.len()] != MAGIC {
            return Err("not a partitioned-index file".into());
        }
        let u32_at =
            |i: usize| u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        let u64_at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[i..i + 8]);
            u64::from_le_bytes(b)
        };
        let at = MAGIC.len();
        let (file_dim, count) = (u32_at(at) as usize, u32_at(at + 4) as usize);
        let (slots, trained_on) = (u64_at(at + 8) as usize, u64_at(at + 16) as usize);
        if file_dim != dim {
            return Err(format!("index of dimension {file_dim}, store of {dim}"));
        }
        let expected = count
            .checked_mul(dim)
            .and_then(|c| c.checked_add(slots))
            .and_then(|w| w.checked_mul(4))
            .and_then(|b| b.checked_add(header));
        if expected != Some(bytes.len()) {
            return Err(format!(
                "{} bytes for {count} centroids and {slots} slots (truncated?)",
                bytes.len()
            ));
        }
        let words = |from: usize, n: usize| {
            (0..n).map(move |i| {
                let j = from + 4 * i;
                [bytes[j], bytes[j + 1], bytes[j + 2], bytes[j + 3]]
            })
        };
        let centroids: Vec<f32> = words(header, count * dim).map(f32::from_le_bytes).collect();
        let assignment: Vec<u32> = words(header + 4 * count * dim, slots)
            .map(u32::from_le_bytes)
            .collect();
        Partitions::restore(vectors, dim, centroids, assignment, trained_on)
            .ok_or_else(|| "centroids or assignment do not fit the store's vectors".into())
    }
}

const MAGIC: &[u8; 6] = b"SMIVF1";

/// Bits differing between two codes.
#[inline(always)]
fn hamming(a: &[u64], b: &[u64]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

/// Appends the one-bit code of `v` (bit `i` set where `v[i] > centre[i]`).
fn sign_bits(v: &[f32], centre: &[f32], out: &mut Vec<u64>) {
    for (block, thresholds) in v.chunks(64).zip(centre.chunks(64)) {
        let mut word = 0u64;
        for (i, (x, t)) in block.iter().zip(thresholds).enumerate() {
            if x > t {
                word |= 1 << i;
            }
        }
        out.push(word);
    }
}

/// Mean of the rows of a row-major matrix with `dim` columns.
fn mean_row(rows: &[f32], dim: usize) -> Vec<f32> {
    let mut mean = vec![0.0f32; dim];
    let count = rows.len() / dim.max(1);
    for row in rows.chunks_exact(dim.max(1)) {
        for (m, x) in mean.iter_mut().zip(row) {
            *m += x;
        }
    }
    for m in &mut mean {
        *m /= count.max(1) as f32;
    }
    mean
}

/// The nearest centroid (largest dot product) of each row of `rows`.
fn assign(rows: &[f32], dim: usize, centroids: &[f32]) -> Vec<u32> {
    let count = centroids.len() / dim;
    let Ok(c) = ArrayView2::from_shape((count, dim), centroids) else {
        return vec![0; rows.len() / dim];
    };
    let ct = c.t();
    rows.par_chunks(ASSIGN_CHUNK * dim)
        .flat_map_iter(|chunk| {
            let m = chunk.len() / dim;
            let scores = match ArrayView2::from_shape((m, dim), chunk) {
                Ok(a) => a.dot(&ct),
                Err(_) => Array2::zeros((m, count)),
            };
            scores
                .axis_iter(Axis(0))
                .map(|row| {
                    let mut best = (0usize, f32::NEG_INFINITY);
                    for (i, s) in row.iter().enumerate() {
                        if *s > best.1 {
                            best = (i, *s);
                        }
                    }
                    best.0 as u32
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Spherical k-means: `count` unit centroids for the `live` slots of
/// `vectors`, trained on an evenly spaced sample of them.
fn train(vectors: &[f32], dim: usize, live: &[usize], count: usize) -> Vec<f32> {
    if live.is_empty() {
        // Nothing to learn from: one centroid at the origin takes every slot.
        return vec![0.0; dim];
    }
    let sample_size = live.len().min(count * SAMPLE_PER_CENTROID);
    let stride = live.len() as f64 / sample_size.max(1) as f64;
    let mut sample = Vec::with_capacity(sample_size * dim);
    for i in 0..sample_size {
        let slot = live[((i as f64 * stride) as usize).min(live.len() - 1)];
        sample.extend_from_slice(&vectors[slot * dim..(slot + 1) * dim]);
    }
    // Seeds: every (sample/count)-th sample point, spread over the history.
    let step = (sample_size / count.max(1)).max(1);
    let mut centroids: Vec<f32> = (0..count)
        .flat_map(|i| {
            let row = (i * step).min(sample_size.saturating_sub(1));
            sample[row * dim..(row + 1) * dim].to_vec()
        })
        .collect();
    let Ok(points) = ArrayView2::from_shape((sample_size, dim), &sample) else {
        return centroids;
    };
    for round in 0..TRAIN_ITERATIONS {
        let nearest = assign(&sample, dim, &centroids);
        let mut sums = Array2::<f32>::zeros((count, dim));
        let mut sizes = vec![0usize; count];
        for (row, p) in nearest.iter().enumerate() {
            let p = *p as usize;
            sizes[p] += 1;
            let mut target = sums.row_mut(p);
            target += &points.row(row);
        }
        let mut reseeded = 0;
        for (p, size) in sizes.iter().enumerate() {
            let mut row = sums.slice_mut(s![p, ..]);
            if *size == 0 {
                // An empty partition takes a sample point far along the
                // history instead, so no centroid is wasted.
                let donor = (p * 7919 + round * 104_729) % sample_size.max(1);
                row.assign(&points.row(donor));
                reseeded += 1;
            }
            let norm = row.dot(&row).sqrt();
            if norm > 0.0 {
                row /= norm;
            }
        }
        centroids = sums.into_raw_vec_and_offset().0;
        tracing::trace!(round, reseeded, "partition training round");
    }
    centroids
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dense::vector::exact_top_k;

    /// `n` unit vectors around `n / 20` random centres, deterministic.
    fn clustered(n: usize, dim: usize, seed: u64) -> Vec<f32> {
        let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        let mut next = move || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 33) as f32 / (1u64 << 31) as f32) - 0.5
        };
        let unit = |v: &mut Vec<f32>| submem_core::l2_normalize(v);
        let centres: Vec<Vec<f32>> = (0..(n / 20).max(1))
            .map(|_| {
                let mut c: Vec<f32> = (0..dim).map(|_| next()).collect();
                unit(&mut c);
                c
            })
            .collect();
        let mut out = Vec::with_capacity(n * dim);
        for i in 0..n {
            let c = &centres[(i * 7) % centres.len()];
            let mut off: Vec<f32> = (0..dim).map(|_| next()).collect();
            unit(&mut off);
            let mut v: Vec<f32> = c.iter().zip(&off).map(|(a, b)| a + 0.75 * b).collect();
            unit(&mut v);
            out.extend(v);
        }
        out
    }

    #[test]
    fn finds_what_an_exact_scan_finds_on_clustered_vectors() {
        let (n, dim) = (4_000, 128);
        let vectors = clustered(n + 50, dim, 1);
        let (stored, fresh) = vectors.split_at(n * dim);
        let index = Partitions::build(stored, dim, |_| true);
        assert_eq!(index.len(), n);
        let (mut hits, mut total) = (0, 0);
        for q in fresh.chunks_exact(dim) {
            let truth: Vec<usize> = exact_top_k(q, stored, dim, 10, |_| true)
                .into_iter()
                .map(|(s, _)| s)
                .collect();
            let got = index.search(q, 10, 8, |_| true);
            hits += truth.iter().filter(|s| got.contains(s)).count();
            total += truth.len();
        }
        let recall = hits as f64 / total as f64;
        assert!(recall >= 0.95, "recall {recall}");
    }

    #[test]
    fn keeps_probing_until_enough_candidates_and_skips_filtered_slots() {
        let (n, dim) = (1_000, 16);
        let vectors = clustered(n, dim, 2);
        let index = Partitions::build(&vectors, dim, |_| true);
        let q = &vectors[..dim];
        // One partition cannot hold 900 slots: the search goes on.
        let got = index.search(q, 900 / RESCORED_PER_WANTED, 1, |_| true);
        assert_eq!(got.len(), 900);
        let even = index.search(q, 100 / RESCORED_PER_WANTED, 1, |s| s % 2 == 0);
        assert_eq!(even.len(), 100);
        assert!(even.iter().all(|s| s % 2 == 0));
        // The query's own slot is among the candidates (its code is its own).
        assert!(index.search(q, 1, 4, |_| true).contains(&0));
    }

    #[test]
    fn an_index_of_forgotten_slots_only_still_answers() {
        let vectors = clustered(10, 8, 4);
        let index = Partitions::build(&vectors, 8, |_| false);
        assert_eq!(index.len(), 10);
        assert!(index.search(&vectors[..8], 3, 2, |_| false).is_empty());
    }

    #[test]
    fn inserts_after_training_and_round_trips_through_bytes() {
        let (n, dim) = (600, 16);
        let vectors = clustered(n, dim, 3);
        let mut index = Partitions::build(&vectors[..400 * dim], dim, |_| true);
        index.insert(&vectors, 400);
        assert_eq!(index.len(), 600);
        assert!(!index.needs_training(600));
        assert!(index.needs_training(400 * RETRAIN_GROWTH + 1));
        let bytes = index.to_bytes();
        let back = Partitions::from_bytes(&bytes, &vectors, dim).unwrap();
        for q in vectors.chunks_exact(dim).step_by(37) {
            assert_eq!(
                index.search(q, 10, 3, |_| true),
                back.search(q, 10, 3, |_| true)
            );
        }
        // Truncated, wrong dimension, foreign vectors, or a partition out
        // of range: refused with a reason, never a panic.
        assert!(Partitions::from_bytes(&bytes[..bytes.len() - 1], &vectors, dim).is_err());
        assert!(Partitions::from_bytes(&bytes, &vectors, dim + 1).is_err());
        assert!(Partitions::from_bytes(&bytes, &vectors[..dim * 10], dim).is_err());
        assert!(Partitions::from_bytes(b"junk", &vectors, dim).is_err());
        let mut bad = bytes.clone();
        let last = bad.len() - 4;
        bad[last..].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(Partitions::from_bytes(&bad, &vectors, dim).is_err());
    }
}
