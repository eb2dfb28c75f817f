//! Clustering one layer of the tree (RAPTOR §3, "clustering algorithm"):
//! reduce the embeddings' dimension, fit Gaussian mixtures
//! (`linfa-clustering`'s [`GaussianMixtureModel`], full covariances) for a
//! range of component counts, keep the count with the lowest BIC, and assign
//! every node to each component whose responsibility reaches the threshold
//! (soft clustering: a node may sit in several clusters). A cluster whose
//! members hold too many tokens is clustered again on its own (RAPTOR's
//! local re-clustering).
//!
//! **Deviations.** RAPTOR reduces with UMAP (cosine, `n_neighbors =
//! √(n−1)`); there is no maintained UMAP crate on the workspace's ndarray, so
//! we use PCA (a subspace iteration with a fixed start, deterministic) — a
//! linear map keeps global structure but not UMAP's local neighbourhoods,
//! which makes clusters somewhat coarser. linfa does not expose the
//! log-likelihood, so BIC is computed here from the fitted weights, means
//! and precisions (`BIC = −2·ln L + p·ln n`, `p = k·d + k·d(d+1)/2 + k − 1`).
//! On large layers BIC is evaluated on an even-stride sample of
//! [`RaptorConfig::bic_sample`] points and over a sparser grid of counts
//! (every count up to 16, then steps of a quarter); the chosen model is
//! refitted on every point. A fit that fails (a component empties) is
//! skipped; when every fit fails the layer stays one cluster. When BIC
//! prefers a single component for a set that holds more than
//! [`RaptorConfig::max_cluster_tokens`] (common for a few hundred points in
//! 10 dimensions, where each full-covariance component costs 65
//! parameters), the set is split by a mixture of `⌈tokens / cap⌉`
//! components instead (ours: one summary cannot cover that much text).

use linfa::traits::Fit;
use linfa::DatasetBase;
use linfa_clustering::GaussianMixtureModel;
use ndarray::{Array1, Array2, Axis};

use crate::RaptorConfig;

/// Most levels of local re-clustering below one layer fit.
const MAX_LOCAL_DEPTH: usize = 3;
/// Subspace iterations of the PCA.
const PCA_ITERATIONS: usize = 12;

/// Clusters `vectors` (one per node, same length) whose nodes hold `tokens`;
/// returns clusters of indices (each non-empty, sorted, in order of their
/// first member).
pub fn cluster_layer(vectors: &[&[f32]], tokens: &[usize], cfg: &RaptorConfig) -> Vec<Vec<usize>> {
    let all: Vec<usize> = (0..vectors.len()).collect();
    let mut out = cluster_subset(vectors, tokens, &all, cfg, 0);
    for c in &mut out {
        c.sort_unstable();
        c.dedup();
    }
    out.retain(|c| !c.is_empty());
    out.sort_by_key(|c| c[0]);
    out
}

fn cluster_subset(
    vectors: &[&[f32]],
    tokens: &[usize],
    subset: &[usize],
    cfg: &RaptorConfig,
    depth: usize,
) -> Vec<Vec<usize>> {
    let n = subset.len();
    if n < 3 {
        return vec![subset.to_vec()];
    }
    let dims = cfg.reduce_dims.min(n - 2).max(1);
    let x = pca(vectors, subset, dims);
    let mut groups = gmm_soft_clusters(&x, cfg, None);
    let total: usize = subset.iter().map(|&i| tokens[i]).sum();
    if groups.len() == 1 && total > cfg.max_cluster_tokens {
        // BIC prefers one component (it often does for a few hundred points
        // in 10 dimensions), but one summary cannot cover this much text.
        let k = total
            .div_ceil(cfg.max_cluster_tokens)
            .clamp(2, (n / 2).max(2));
        groups = gmm_soft_clusters(&x, cfg, Some(k));
    }
    let mut out = Vec::new();
    for g in groups {
        let members: Vec<usize> = g.iter().map(|&i| subset[i]).collect();
        let size: usize = members.iter().map(|&i| tokens[i]).sum();
        if size > cfg.max_cluster_tokens
            && members.len() > 2
            && members.len() < n
            && depth < MAX_LOCAL_DEPTH
        {
            out.extend(cluster_subset(vectors, tokens, &members, cfg, depth + 1));
        } else {
            out.push(members);
        }
    }
    out
}

/// Projects the rows `subset` of `vectors`, centred, onto their top `dims`
/// principal directions.
pub fn pca(vectors: &[&[f32]], subset: &[usize], dims: usize) -> Array2<f64> {
    let n = subset.len();
    let d = subset.first().map_or(0, |&i| vectors[i].len());
    let mut x = Array2::<f64>::zeros((n, d));
    for (r, &i) in subset.iter().enumerate() {
        for (c, v) in vectors[i].iter().enumerate().take(d) {
            x[[r, c]] = f64::from(*v);
        }
    }
    if let Some(mean) = x.mean_axis(Axis(0)) {
        x -= &mean;
    }
    let dims = dims.min(d).max(1);
    // A fixed, well-spread start so that results are reproducible.
    let mut q = Array2::<f64>::from_shape_fn((d, dims), |(i, j)| {
        let h = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ (j as u64 + 1).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
        ((h >> 11) as f64 / (1u64 << 53) as f64) - 0.5
    });
    orthonormalize(&mut q);
    for _ in 0..PCA_ITERATIONS {
        let xq = x.dot(&q);
        q = x.t().dot(&xq);
        orthonormalize(&mut q);
    }
    x.dot(&q)
}

/// Modified Gram–Schmidt on the columns; a column that vanishes is left zero.
fn orthonormalize(q: &mut Array2<f64>) {
    let cols = q.ncols();
    for j in 0..cols {
        for k in 0..j {
            let dot = q.column(j).dot(&q.column(k));
            let prev = q.column(k).to_owned();
            q.column_mut(j).scaled_add(-dot, &prev);
        }
        let norm = q.column(j).dot(&q.column(j)).sqrt();
        if norm > 1e-12 {
            q.column_mut(j).mapv_inplace(|v| v / norm);
        } else {
            q.column_mut(j).fill(0.0);
        }
    }
}

/// Component counts tried for `n` points: every count up to 16, then steps
/// of a quarter; at most `max` and at most `n / 2`.
fn candidate_counts(n: usize, max: usize) -> Vec<usize> {
    let top = max.min(n / 2).max(1);
    let mut out = Vec::new();
    let mut k = 1;
    while k <= top {
        out.push(k);
        k += if k < 16 { 1 } else { (k / 4).max(1) };
    }
    out
}

fn fit(x: &Array2<f64>, k: usize) -> Option<GaussianMixtureModel<f64>> {
    let data = DatasetBase::from(x.clone());
    for reg in [1e-6, 1e-3] {
        if let Ok(m) = GaussianMixtureModel::params(k)
            .reg_covariance(reg)
            .max_n_iterations(200)
            .tolerance(1e-3)
            .fit(&data)
        {
            if m.weights().iter().all(|w| w.is_finite()) {
                return Some(m);
            }
        }
    }
    None
}

/// Fits the mixture with the lowest BIC (or with `forced` components, the
/// largest count at or below it that fits) and returns its soft clusters
/// (by row index of `x`).
pub fn gmm_soft_clusters(
    x: &Array2<f64>,
    cfg: &RaptorConfig,
    forced: Option<usize>,
) -> Vec<Vec<usize>> {
    let n = x.nrows();
    let all = || vec![(0..n).collect::<Vec<_>>()];
    let sample = if n > cfg.bic_sample {
        let rows: Vec<usize> = (0..cfg.bic_sample)
            .map(|i| i * n / cfg.bic_sample)
            .collect();
        x.select(Axis(0), &rows)
    } else {
        x.clone()
    };
    let mut best: Option<(f64, usize, GaussianMixtureModel<f64>)> = None;
    let candidates = match forced {
        Some(k) => (2..=k.min(n)).rev().collect(),
        None => candidate_counts(sample.nrows(), cfg.max_clusters),
    };
    for k in candidates {
        if forced.is_some() && best.is_some() {
            break;
        }
        let Some(m) = fit(&sample, k) else { continue };
        let score = bic(&m, &sample);
        if best.as_ref().is_none_or(|(b, _, _)| score < *b) {
            best = Some((score, k, m));
        }
    }
    let Some((_, k, model)) = best else {
        return all();
    };
    if k == 1 {
        return all();
    }
    let model = if sample.nrows() == n {
        model
    } else {
        match fit(x, k) {
            Some(m) => m,
            None => model,
        }
    };
    let Some(proba) = responsibilities(&model, x) else {
        return all();
    };
    let mut clusters = vec![Vec::new(); k];
    for (i, row) in proba.rows().into_iter().enumerate() {
        let mut any = false;
        for (c, p) in row.iter().enumerate() {
            if *p >= cfg.membership_threshold {
                clusters[c].push(i);
                any = true;
            }
        }
        if !any {
            let arg = row
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .map_or(0, |(c, _)| c);
            clusters[arg].push(i);
        }
    }
    clusters.retain(|c| !c.is_empty());
    if clusters.is_empty() {
        return all();
    }
    clusters
}

/// Bayesian information criterion of `model` on `x` (lower is better).
pub fn bic(model: &GaussianMixtureModel<f64>, x: &Array2<f64>) -> f64 {
    let k = model.weights().len() as f64;
    let d = x.ncols() as f64;
    let params = k * d + k * d * (d + 1.0) / 2.0 + (k - 1.0);
    -2.0 * log_likelihood(model, x) + params * (x.nrows() as f64).ln()
}

/// Per-row log of `w_c · N(x | μ_c, Σ_c)` for every component (from the
/// fitted weights, means and precisions); `None` when a precision matrix is
/// not positive definite.
fn weighted_log_densities(
    model: &GaussianMixtureModel<f64>,
    x: &Array2<f64>,
) -> Option<Array2<f64>> {
    let d = x.ncols();
    let k = model.weights().len();
    let norm = d as f64 * (2.0 * std::f64::consts::PI).ln();
    let mut out = Array2::<f64>::zeros((x.nrows(), k));
    for c in 0..k {
        let prec = model.precisions().index_axis(Axis(0), c).to_owned();
        let chol = cholesky(&prec)?;
        let log_det_prec = 2.0 * (0..d).map(|i| chol[[i, i]].ln()).sum::<f64>();
        let lw = model.weights()[c].ln();
        let mean: Array1<f64> = model.means().row(c).to_owned();
        for (r, row) in x.rows().into_iter().enumerate() {
            let diff = &row - &mean;
            let maha = diff.dot(&prec.dot(&diff));
            out[[r, c]] = lw - 0.5 * (norm - log_det_prec + maha);
        }
    }
    Some(out)
}

fn log_sum_exp(row: ndarray::ArrayView1<'_, f64>) -> f64 {
    let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !m.is_finite() {
        return m;
    }
    m + row.iter().map(|t| (t - m).exp()).sum::<f64>().ln()
}

/// Total log-likelihood of the rows of `x` under `model`, with a stable
/// log-sum-exp over components.
pub fn log_likelihood(model: &GaussianMixtureModel<f64>, x: &Array2<f64>) -> f64 {
    match weighted_log_densities(model, x) {
        Some(w) => w.rows().into_iter().map(log_sum_exp).sum(),
        None => f64::NEG_INFINITY,
    }
}

/// Responsibilities (rows sum to 1), computed stably; linfa's
/// `predict_proba` exponentiates without shifting and can underflow for
/// points far from every component.
pub fn responsibilities(model: &GaussianMixtureModel<f64>, x: &Array2<f64>) -> Option<Array2<f64>> {
    let mut w = weighted_log_densities(model, x)?;
    for mut row in w.rows_mut() {
        let l = log_sum_exp(row.view());
        row.mapv_inplace(|v| (v - l).exp());
    }
    Some(w)
}

/// Lower Cholesky factor of a symmetric positive definite matrix.
fn cholesky(a: &Array2<f64>) -> Option<Array2<f64>> {
    let n = a.nrows();
    let mut l = Array2::<f64>::zeros((n, n));
    for i in 0..n {
        for j in 0..=i {
            let mut s = a[[i, j]];
            for k in 0..j {
                s -= l[[i, k]] * l[[j, k]];
            }
            if i == j {
                if s <= 0.0 || !s.is_finite() {
                    return None;
                }
                l[[i, i]] = s.sqrt();
            } else {
                l[[i, j]] = s / l[[j, j]];
            }
        }
    }
    Some(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three well-separated blobs in 16 dimensions.
    fn blobs(per: usize) -> Vec<Vec<f32>> {
        let mut out = Vec::new();
        let mut s = 7u64;
        let mut noise = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.2
        };
        for b in 0..3 {
            for _ in 0..per {
                let mut v = vec![0.0f32; 16];
                v[b * 5] = 1.0;
                for x in v.iter_mut() {
                    *x += noise();
                }
                out.push(v);
            }
        }
        out
    }

    #[test]
    fn bic_finds_three_blobs() {
        let v = blobs(20);
        let refs: Vec<&[f32]> = v.iter().map(Vec::as_slice).collect();
        let tokens = vec![10; refs.len()];
        let cfg = RaptorConfig::default().with_reduce_dims(4);
        let clusters = cluster_layer(&refs, &tokens, &cfg);
        assert_eq!(clusters.len(), 3, "{clusters:?}");
        for (b, c) in clusters.iter().enumerate() {
            assert!(c.iter().all(|&i| i / 20 == b), "{clusters:?}");
        }
    }

    #[test]
    fn oversized_clusters_are_split_again() {
        let v = blobs(20);
        let refs: Vec<&[f32]> = v.iter().map(Vec::as_slice).collect();
        let tokens = vec![100; refs.len()];
        let cfg = RaptorConfig::default()
            .with_reduce_dims(4)
            .with_max_cluster_tokens(1000);
        let clusters = cluster_layer(&refs, &tokens, &cfg);
        assert!(clusters.len() > 3, "{}", clusters.len());
    }

    #[test]
    fn pca_keeps_the_main_direction() {
        let v: Vec<Vec<f32>> = (0..30)
            .map(|i| vec![i as f32, 0.01 * (i % 3) as f32, 0.0])
            .collect();
        let refs: Vec<&[f32]> = v.iter().map(Vec::as_slice).collect();
        let all: Vec<usize> = (0..30).collect();
        let y = pca(&refs, &all, 1);
        let spread = y.column(0).iter().fold(0.0f64, |a, b| a.max(b.abs()));
        assert!(spread > 14.0, "{spread}");
    }

    #[test]
    fn tiny_layers_stay_one_cluster_and_counts_are_capped() {
        let v = [vec![1.0f32, 0.0], vec![0.0, 1.0]];
        let refs: Vec<&[f32]> = v.iter().map(Vec::as_slice).collect();
        assert_eq!(
            cluster_layer(&refs, &[1, 1], &RaptorConfig::default()),
            vec![vec![0, 1]]
        );
        assert_eq!(candidate_counts(10, 50), vec![1, 2, 3, 4, 5]);
        let c = candidate_counts(1000, 50);
        assert_eq!(*c.last().unwrap(), 47);
        assert!(c.len() < 30);
    }
}
