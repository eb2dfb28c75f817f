//! k-means over experience embeddings (linfa-clustering 0.8, pure Rust, no
//! BLAS; its default generator is seeded, so runs are reproducible).

use linfa::traits::{Fit, Predict};
use linfa::DatasetBase;
use linfa_clustering::KMeans;
use ndarray::Array2;

use crate::RefineError;

/// Most Lloyd iterations: 100 (linfa's default is 300; embeddings of a few
/// dozen experiences converge in a handful).
pub const MAX_ITERATIONS: u64 = 100;

/// Cluster labels (`0..k`) of `vectors` into at most `k` clusters. With
/// `k >= n` every vector is its own cluster; `k <= 1` puts all in one.
pub fn kmeans(vectors: &[Vec<f32>], k: usize) -> Result<Vec<usize>, RefineError> {
    let n = vectors.len();
    if n == 0 {
        return Ok(Vec::new());
    }
    if k <= 1 {
        return Ok(vec![0; n]);
    }
    if k >= n {
        return Ok((0..n).collect());
    }
    let dim = vectors[0].len();
    if let Some(v) = vectors.iter().find(|v| v.len() != dim) {
        return Err(RefineError::Dimension {
            expected: dim,
            got: v.len(),
        });
    }
    let flat: Vec<f32> = vectors.iter().flatten().copied().collect();
    let data = Array2::from_shape_vec((n, dim), flat)
        .map_err(|e| RefineError::Clustering(e.to_string()))?;
    let dataset = DatasetBase::from(data.clone());
    let model = KMeans::params(k)
        .max_n_iterations(MAX_ITERATIONS)
        .n_runs(1)
        .fit(&dataset)
        .map_err(|e| RefineError::Clustering(e.to_string()))?;
    let labels: ndarray::Array1<usize> = model.predict(&data);
    // Renumber labels by first appearance so clusters come out in write order.
    let mut map: Vec<Option<usize>> = vec![None; k];
    let mut next = 0;
    Ok(labels
        .iter()
        .map(|&l| {
            let slot = &mut map[l.min(k - 1)];
            *slot.get_or_insert_with(|| {
                next += 1;
                next - 1
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separates_two_blobs() {
        let mut v = Vec::new();
        for i in 0..6 {
            let e = i as f32 * 0.01;
            v.push(vec![1.0, e, 0.0]);
            v.push(vec![0.0, e, 1.0]);
        }
        let labels = kmeans(&v, 2).unwrap();
        assert_eq!(labels[0], 0);
        for (i, l) in labels.iter().enumerate() {
            assert_eq!(*l, i % 2, "{labels:?}");
        }
        assert_eq!(kmeans(&v[..1], 3).unwrap(), vec![0]);
        assert_eq!(kmeans(&v[..3], 1).unwrap(), vec![0, 0, 0]);
    }
}
