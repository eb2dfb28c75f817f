//! Vector arithmetic of the dense substrate: a dot product written so the
//! compiler vectorises it, the `i8` codes the HNSW graph holds and their
//! distance, and the exact top-k scan used below
//! [`crate::DenseConfig::exact_threshold`].

use hnsw_rs::prelude::Distance;

/// Dot product of two equal-length slices (eight independent accumulators so
/// the loop vectorises; the tail is added afterwards).
#[inline]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; 8];
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let mut sum = (acc[0] + acc[4]) + (acc[1] + acc[5]) + (acc[2] + acc[6]) + (acc[3] + acc[7]);
    for (x, y) in ra.iter().zip(rb) {
        sum += x * y;
    }
    sum
}

/// Scale of the `i8` codes: a unit vector's components lie in [−1, 1].
const CODE_SCALE: f32 = 127.0;

/// The `i8` code of a unit vector: each component × 127, rounded.
pub(crate) fn quantise(v: &[f32]) -> Vec<i8> {
    v.iter()
        .map(|x| (x * CODE_SCALE).round().clamp(-CODE_SCALE, CODE_SCALE) as i8)
        .collect()
}

/// Cosine distance between the `i8` codes of two unit vectors,
/// `1 − a·b / 127²`, clamped at 0 (rounding can push `a·b` past 127²).
///
/// hnsw_rs's own distances work on `f32` and its `DistDot` asserts `a·b ≤ 1`,
/// which rounding breaks for near-identical vectors (a panic inside a read).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct I8Dot;

impl Distance<i8> for I8Dot {
    #[inline]
    fn eval(&self, va: &[i8], vb: &[i8]) -> f32 {
        // i16 products summed in i32 never overflow for 384-d (or any
        // dimension below 2^31 / 127²); the loop vectorises to multiply-adds.
        let dot: i32 = va
            .iter()
            .zip(vb)
            .map(|(a, b)| i32::from(*a) * i32::from(*b))
            .sum();
        (1.0 - dot as f32 / (CODE_SCALE * CODE_SCALE)).max(0.0)
    }
}

/// Exact top-`k` over `vectors` (row-major, `dim` per row) restricted to rows
/// where `keep(row)`; returns `(row, cosine)` best first, ties broken by the
/// higher row (the newer unit).
pub(crate) fn exact_top_k(
    query: &[f32],
    vectors: &[f32],
    dim: usize,
    k: usize,
    keep: impl Fn(usize) -> bool,
) -> Vec<(usize, f32)> {
    if dim == 0 || k == 0 {
        return Vec::new();
    }
    let mut scored: Vec<(usize, f32)> = vectors
        .chunks_exact(dim)
        .enumerate()
        .filter(|(row, _)| keep(*row))
        .map(|(row, v)| (row, dot(query, v)))
        .collect();
    let better = |a: &(usize, f32), b: &(usize, f32)| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0));
    if scored.len() > k {
        scored.select_nth_unstable_by(k - 1, better);
        scored.truncate(k);
    }
    scored.sort_unstable_by(better);
    scored
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_matches_naive_on_odd_lengths() {
        for n in [0usize, 1, 7, 8, 9, 384, 385] {
            let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
            let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!((dot(&a, &b) - naive).abs() < 1e-4, "n={n}");
        }
    }

    #[test]
    fn quantised_distance_is_close_to_exact_and_never_negative() {
        let mut v = vec![0.3f32, 0.4, 0.5, 0.1];
        submem_core::l2_normalize(&mut v);
        let c = quantise(&v);
        assert!(I8Dot.eval(&c, &c) >= 0.0);
        assert!(I8Dot.eval(&c, &c) < 0.01);
        // Extreme components (±1) map to ±127 without wrapping.
        assert_eq!(quantise(&[1.0, -1.0, 0.0]), vec![127, -127, 0]);
        assert!(I8Dot.eval(&quantise(&[1.0, 0.0]), &quantise(&[-1.0, 0.0])) > 1.99);
        // 384-d: the quantised cosine stays within 0.02 of the exact one.
        let a: Vec<f32> = (0..384).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..384).map(|i| (i as f32 * 0.11 + 1.0).cos()).collect();
        let (mut a, mut b) = (a, b);
        submem_core::l2_normalize(&mut a);
        submem_core::l2_normalize(&mut b);
        let exact = 1.0 - dot(&a, &b);
        let approx = I8Dot.eval(&quantise(&a), &quantise(&b));
        assert!((exact - approx).abs() < 0.02, "{exact} vs {approx}");
    }

    #[test]
    fn exact_top_k_orders_and_filters() {
        let h = std::f32::consts::FRAC_1_SQRT_2;
        let vectors = vec![1.0, 0.0, 0.0, 1.0, h, h, 1.0, 0.0];
        let q = [1.0, 0.0];
        let top = exact_top_k(&q, &vectors, 2, 2, |_| true);
        // Rows 0 and 3 tie at 1.0: the newer (3) comes first.
        assert_eq!(top.iter().map(|t| t.0).collect::<Vec<_>>(), vec![3, 0]);
        let top = exact_top_k(&q, &vectors, 2, 2, |r| r != 3);
        assert_eq!(top.iter().map(|t| t.0).collect::<Vec<_>>(), vec![0, 2]);
        assert!(exact_top_k(&q, &vectors, 2, 0, |_| true).is_empty());
    }
}
