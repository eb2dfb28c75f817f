//! k-means over segment vectors with `linfa-clustering` (k-means++ seeding,
//! the library's fixed seed, so a history always gives the same episodes).

use std::collections::HashSet;

use linfa::traits::{Fit, Predict};
use linfa::DatasetBase;
use linfa_clustering::KMeans;
use ndarray::Array2;

use crate::KvError;

/// Labels of the points and one centroid per label (unnormalised means).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Clusters {
    /// Cluster of each point, in input order.
    pub labels: Vec<usize>,
    /// Centroid of each cluster.
    pub centroids: Vec<Vec<f32>>,
}

/// Clusters `points` (all of one dimension) into at most `k` groups: k is
/// capped by the number of distinct points, and k = 1 is the plain mean.
/// Clusters that end up empty are dropped and labels renumbered.
pub(crate) fn kmeans(
    points: &[Vec<f32>],
    k: usize,
    runs: usize,
    max_iterations: u64,
) -> Result<Clusters, KvError> {
    let Some(dim) = points.first().map(Vec::len) else {
        return Ok(Clusters {
            labels: Vec::new(),
            centroids: Vec::new(),
        });
    };
    if points.iter().any(|p| p.len() != dim) {
        return Err(KvError::Cluster("vectors of different lengths".into()));
    }
    let distinct: HashSet<Vec<u32>> = points
        .iter()
        .map(|p| p.iter().map(|x| x.to_bits()).collect())
        .collect();
    let k = k.min(distinct.len()).max(1);
    if k == 1 {
        return Ok(Clusters {
            labels: vec![0; points.len()],
            centroids: vec![mean(points.iter().map(Vec::as_slice), dim)],
        });
    }
    let flat: Vec<f64> = points
        .iter()
        .flat_map(|p| p.iter().map(|&x| f64::from(x)))
        .collect();
    let records = Array2::from_shape_vec((points.len(), dim), flat)
        .map_err(|e| KvError::Cluster(e.to_string()))?;
    let data = DatasetBase::from(records.clone());
    let model = KMeans::params(k)
        .n_runs(runs)
        .max_n_iterations(max_iterations)
        .tolerance(1e-5)
        .fit(&data)
        .map_err(|e| KvError::Cluster(e.to_string()))?;
    let raw: Vec<usize> = model.predict(&records).to_vec();
    // Renumber in order of first appearance so that label order follows time.
    let mut remap = vec![usize::MAX; k];
    let mut next = 0;
    let labels = raw
        .iter()
        .map(|&l| {
            if remap[l] == usize::MAX {
                remap[l] = next;
                next += 1;
            }
            remap[l]
        })
        .collect::<Vec<_>>();
    let mut centroids = vec![Vec::new(); next];
    for (old, &new) in remap.iter().enumerate() {
        if new != usize::MAX {
            centroids[new] = model
                .centroids()
                .row(old)
                .iter()
                .map(|&x| x as f32)
                .collect();
        }
    }
    Ok(Clusters { labels, centroids })
}

/// The arithmetic mean of `vectors` (zeros when there are none).
pub(crate) fn mean<'a>(vectors: impl Iterator<Item = &'a [f32]>, dim: usize) -> Vec<f32> {
    let mut sum = vec![0.0f32; dim];
    let mut n = 0usize;
    for v in vectors {
        sum.iter_mut().zip(v).for_each(|(s, x)| *s += x);
        n += 1;
    }
    if n > 0 {
        sum.iter_mut().for_each(|s| *s /= n as f32);
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separates_two_obvious_groups_and_follows_time_order() {
        let pts = vec![
            vec![1.0, 0.0],
            vec![0.0, 1.0],
            vec![0.98, 0.05],
            vec![0.02, 0.97],
        ];
        let c = kmeans(&pts, 2, 5, 100).unwrap();
        assert_eq!(c.labels, vec![0, 1, 0, 1]);
        assert!(c.centroids[0][0] > 0.9 && c.centroids[1][1] > 0.9);
        assert_eq!(c, kmeans(&pts, 2, 5, 100).unwrap(), "deterministic");
    }

    #[test]
    fn k_is_capped_by_distinct_points() {
        let pts = vec![vec![1.0, 0.0]; 5];
        let c = kmeans(&pts, 4, 5, 100).unwrap();
        assert_eq!(c.labels, vec![0; 5]);
        assert_eq!(c.centroids, vec![vec![1.0, 0.0]]);
        assert!(kmeans(&[], 3, 5, 100).unwrap().labels.is_empty());
        assert!(kmeans(&[vec![1.0], vec![1.0, 2.0]], 2, 5, 100).is_err());
    }
}
