//! k-means: k-means++ seeding (Arthur & Vassilvitskii 2007) and Lloyd iterations, seeded.
//!
//! Assignment steps run in parallel (rayon); results are identical for any thread count (the
//! centre sums are accumulated in point order). An empty cluster is re-seeded with the point
//! farthest from its centre.

use rayon::prelude::*;

use crate::distance::squared_distance;
use crate::validate::validate_points;
use crate::{Result, SpatialError};

/// The result of [`kmeans`].
#[derive(Debug, Clone, PartialEq)]
pub struct KMeans {
    /// Centres, row-major `(k, dim)`.
    pub centers: Vec<f64>,
    /// Cluster of every point.
    pub labels: Vec<usize>,
    /// Sum of squared distances of the points to their centres.
    pub inertia: f64,
    /// Lloyd iterations run.
    pub n_iter: usize,
}

/// SplitMix64: a small seeded generator (enough for seeding; no dependency).
struct SplitMix(u64);

impl SplitMix {
    fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn nearest(p: &[f64], centers: &[f64], dim: usize) -> (usize, f64) {
    let mut best = (0, f64::INFINITY);
    for (j, c) in centers.chunks_exact(dim).enumerate() {
        let d = squared_distance(p, c);
        if d < best.1 {
            best = (j, d);
        }
    }
    best
}

/// k-means++ seeding: the first centre uniformly, each next one with probability proportional
/// to the squared distance to the nearest chosen centre. Returns `(k, dim)` centres.
///
/// # Errors
/// As [`kmeans`].
pub fn kmeans_plus_plus(points: &[f64], dim: usize, k: usize, seed: u64) -> Result<Vec<f64>> {
    let n = validate_points(points, dim)?;
    if k == 0 || k > n {
        return Err(SpatialError::InvalidParameter {
            name: "k",
            reason: format!("must lie in 1..={n} (the number of points), got {k}"),
        });
    }
    let mut rng = SplitMix(seed);
    let first = ((rng.next_f64() * n as f64) as usize).min(n - 1);
    let mut centers = points[first * dim..(first + 1) * dim].to_vec();
    let mut d2: Vec<f64> = points
        .par_chunks_exact(dim)
        .map(|p| squared_distance(p, &centers))
        .collect();
    while centers.len() < k * dim {
        let total: f64 = d2.iter().sum();
        let pick = if total > 0.0 {
            let mut target = rng.next_f64() * total;
            let mut idx = n - 1;
            for (i, &d) in d2.iter().enumerate() {
                if target < d {
                    idx = i;
                    break;
                }
                target -= d;
            }
            idx
        } else {
            // All points coincide with chosen centres: any point will do.
            ((rng.next_f64() * n as f64) as usize).min(n - 1)
        };
        let c = points[pick * dim..(pick + 1) * dim].to_vec();
        d2.par_iter_mut()
            .zip(points.par_chunks_exact(dim))
            .for_each(|(d, p)| *d = d.min(squared_distance(p, &c)));
        centers.extend(c);
    }
    Ok(centers)
}

/// k-means with k-means++ seeding and at most `max_iter` Lloyd iterations; stops early when
/// no label changes or the centres move less than `tol` (squared, summed).
///
/// # Errors
/// [`SpatialError`] for bad points, `k` outside `1..=n`, or `max_iter == 0`.
///
/// # Example
/// ```
/// let pts = [0.0, 0.1, 0.2, 10.0, 10.1, 10.2];
/// let km = vastml_spatial::kmeans(&pts, 1, 2, 100, 0.0, 7)?;
/// assert_eq!(km.labels[0], km.labels[2]);
/// assert_ne!(km.labels[0], km.labels[3]);
/// # Ok::<(), vastml_spatial::SpatialError>(())
/// ```
pub fn kmeans(
    points: &[f64],
    dim: usize,
    k: usize,
    max_iter: usize,
    tol: f64,
    seed: u64,
) -> Result<KMeans> {
    if max_iter == 0 {
        return Err(SpatialError::InvalidParameter {
            name: "max_iter",
            reason: "must be at least 1".to_string(),
        });
    }
    if tol.is_nan() || tol < 0.0 {
        return Err(SpatialError::InvalidParameter {
            name: "tol",
            reason: format!("must be >= 0, got {tol}"),
        });
    }
    let mut centers = kmeans_plus_plus(points, dim, k, seed)?;
    let n = points.len() / dim;
    let mut labels = vec![usize::MAX; n];
    let mut n_iter = 0;
    for _ in 0..max_iter {
        n_iter += 1;
        let assign: Vec<(usize, f64)> = points
            .par_chunks_exact(dim)
            .map(|p| nearest(p, &centers, dim))
            .collect();
        let changed = assign
            .iter()
            .zip(&labels)
            .filter(|((a, _), b)| a != *b)
            .count();
        labels
            .iter_mut()
            .zip(&assign)
            .for_each(|(l, (a, _))| *l = *a);
        let mut sums = vec![0.0; k * dim];
        let mut counts = vec![0usize; k];
        for (p, &l) in points.chunks_exact(dim).zip(&labels) {
            counts[l] += 1;
            sums[l * dim..(l + 1) * dim]
                .iter_mut()
                .zip(p)
                .for_each(|(s, v)| *s += v);
        }
        let mut moved = 0.0;
        let mut taken = vec![false; n];
        for j in 0..k {
            let new: Vec<f64> = if counts[j] > 0 {
                sums[j * dim..(j + 1) * dim]
                    .iter()
                    .map(|s| s / counts[j] as f64)
                    .collect()
            } else {
                // Empty cluster: the point farthest from its centre, not used yet.
                let far = (0..n)
                    .filter(|&i| !taken[i])
                    .max_by(|&a, &b| assign[a].1.total_cmp(&assign[b].1))
                    .unwrap_or(0);
                taken[far] = true;
                points[far * dim..(far + 1) * dim].to_vec()
            };
            moved += squared_distance(&new, &centers[j * dim..(j + 1) * dim]);
            centers[j * dim..(j + 1) * dim].copy_from_slice(&new);
        }
        if changed == 0 || moved <= tol {
            break;
        }
    }
    let (labels, dists): (Vec<usize>, Vec<f64>) = points
        .par_chunks_exact(dim)
        .map(|p| nearest(p, &centers, dim))
        .unzip();
    Ok(KMeans {
        centers,
        labels,
        inertia: dists.iter().sum(),
        n_iter,
    })
}
