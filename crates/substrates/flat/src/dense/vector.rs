//! Vector arithmetic of the dense substrate: a dot product written so the
//! compiler vectorises it, the HNSW distance built on it, and the exact top-k
//! scan used below [`crate::DenseConfig::exact_threshold`].

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

/// Cosine distance of unit vectors, `1 − a·b`, clamped at 0.
///
/// hnsw_rs ships `DistDot`, but it asserts `a·b ≤ 1`, which rounding breaks for
/// near-identical vectors (a panic inside a read); this one clamps instead.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct UnitDot;

impl Distance<f32> for UnitDot {
    #[inline]
    fn eval(&self, va: &[f32], vb: &[f32]) -> f32 {
        (1.0 - dot(va, vb)).max(0.0)
    }
}

/// Scales `v` to unit length; returns `false` if it has a NaN or infinity.
pub(crate) fn normalise(v: &mut [f32]) -> bool {
    if v.iter().any(|x| !x.is_finite()) {
        return false;
    }
    submem_core::l2_normalize(v);
    true
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
    fn distance_never_negative() {
        let mut v = vec![0.3f32, 0.4, 0.5, 0.1];
        assert!(normalise(&mut v));
        assert!(UnitDot.eval(&v, &v) >= 0.0);
        assert!(UnitDot.eval(&v, &v) < 1e-6);
        assert!(!normalise(&mut [f32::NAN, 1.0]));
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
