//! The result type of k-center clustering.

use rayon::prelude::*;

/// Result of k-center clustering: centres, per-point labels and per-cluster radii.
///
/// Produced by [`FarthestPoint::clustering`](crate::FarthestPoint::clustering) and
/// [`farthest_point_clustering`](crate::farthest_point_clustering).
#[derive(Clone, Debug, PartialEq)]
pub struct Clustering {
    /// Dimension of the points and centres.
    pub dim: usize,
    /// Cluster centres, row-major `k x dim`: the mean of each cluster's members.
    pub centers: Vec<f64>,
    /// `labels[i]` is the cluster of point `i`.
    pub labels: Vec<usize>,
    /// Per cluster, the largest Euclidean distance from a member to the cluster's centre
    /// (recomputed about the mean, so every member lies within it).
    pub radii: Vec<f64>,
    /// Number of members per cluster.
    pub counts: Vec<usize>,
}

impl Clustering {
    /// Centres (means of the members) and radii (largest member distance to the mean) of a
    /// labelling of `points` (row-major, `dim` columns) into `k` clusters; every label must
    /// be below `k`, and every cluster non-empty for its radius to mean anything.
    pub fn from_labels(points: &[f64], dim: usize, labels: Vec<usize>, k: usize) -> Clustering {
        let (offsets, members) = members_csr(&labels, k);
        let cluster = |j: usize| {
            let ids = &members[offsets[j]..offsets[j + 1]];
            let mut mean = vec![0.0; dim];
            for &i in ids {
                for (m, &x) in mean.iter_mut().zip(&points[i * dim..(i + 1) * dim]) {
                    *m += x;
                }
            }
            let count = ids.len().max(1) as f64;
            for m in &mut mean {
                *m /= count;
            }
            let r2 = ids.iter().fold(0.0f64, |acc, &i| {
                acc.max(crate::squared_distance(
                    &points[i * dim..(i + 1) * dim],
                    &mean,
                ))
            });
            (mean, r2.sqrt())
        };
        // a few thousand points take microseconds, less than waking the pool's threads
        let per_cluster: Vec<(Vec<f64>, f64)> = if points.len() < PARALLEL_FROM {
            (0..k).map(cluster).collect()
        } else {
            (0..k).into_par_iter().map(cluster).collect()
        };
        let mut centers = Vec::with_capacity(k * dim);
        let mut radii = Vec::with_capacity(k);
        for (mean, r) in per_cluster {
            centers.extend_from_slice(&mean);
            radii.push(r);
        }
        let counts = offsets.windows(2).map(|w| w[1] - w[0]).collect();
        Clustering {
            dim,
            centers,
            labels,
            radii,
            counts,
        }
    }

    /// Number of clusters `k`.
    pub fn n_clusters(&self) -> usize {
        self.radii.len()
    }

    /// Largest cluster radius (0 for a clustering without clusters).
    pub fn max_radius(&self) -> f64 {
        self.radii.iter().fold(0.0f64, |acc, &r| acc.max(r))
    }

    /// Member indices grouped by cluster, CSR-style: `(offsets, indices)` where the members of
    /// cluster `j` are `indices[offsets[j]..offsets[j + 1]]`, in ascending index order, and
    /// `offsets.len() == n_clusters() + 1`. Labels `>= n_clusters()` (only possible if the public
    /// fields were edited inconsistently) are left out.
    pub fn members(&self) -> (Vec<usize>, Vec<usize>) {
        members_csr(&self.labels, self.n_clusters())
    }
}

/// Coordinates (points x dim) from which the clusters' centres and radii are computed in
/// parallel.
pub(crate) const PARALLEL_FROM: usize = 1 << 16;

/// Counting sort of point indices by label: `(offsets of length k + 1, indices)`, members in
/// ascending index order. Labels `>= k` are skipped.
pub(crate) fn members_csr(labels: &[usize], k: usize) -> (Vec<usize>, Vec<usize>) {
    let mut offsets = vec![0usize; k + 1];
    for &l in labels {
        if l < k {
            offsets[l + 1] += 1;
        }
    }
    for j in 0..k {
        offsets[j + 1] += offsets[j];
    }
    let mut next = offsets.clone();
    let mut indices = vec![0usize; offsets[k]];
    for (i, &l) in labels.iter().enumerate() {
        if l < k {
            indices[next[l]] = i;
            next[l] += 1;
        }
    }
    (offsets, indices)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_groups_in_ascending_order() {
        let c = Clustering {
            dim: 1,
            centers: vec![0.0, 1.0, 2.0],
            labels: vec![2, 0, 2, 1, 0, 2],
            radii: vec![0.0, 0.0, 0.0],
            counts: vec![2, 1, 3],
        };
        let (off, idx) = c.members();
        assert_eq!(off, vec![0, 2, 3, 6]);
        assert_eq!(idx, vec![1, 4, 3, 0, 2, 5]);
        assert_eq!(c.n_clusters(), 3);
    }

    #[test]
    fn max_radius_is_the_largest() {
        let c = Clustering {
            dim: 1,
            centers: vec![0.0, 1.0],
            labels: vec![0, 1],
            radii: vec![0.5, 0.25],
            counts: vec![1, 1],
        };
        assert_eq!(c.max_radius(), 0.5);
    }
}
