//! The k-nearest-neighbour graph of a point set (every point's `k` nearest *other* points),
//! for the affinities of t-SNE and friends at large N.
//!
//! One kd-tree specialised for this query is built (in parallel; `knn_tree.rs`: split
//! planes with the children's extents and an incremental cell distance, one coordinate per
//! node; leaves stored transposed and padded so a leaf's distances are one SIMD loop;
//! the `k` best kept in a sorted array) and every point is queried in tree order, so
//! consecutive queries walk the same nodes (cache-friendly), in parallel runs with rayon. `eps = 0` is exact; `eps > 0` skips a box when `(1 + eps)`
//! times its distance is beyond the current `k`-th neighbour, the classic
//! `(1 + eps)`-approximate search (Arya et al. 1998): every returned neighbour is within
//! `(1 + eps)` of the true `j`-th neighbour's distance, the distances returned are exact, and
//! recall against the exact graph stays high (tested) while far fewer leaves are scanned.
//!
//! ```
//! use vastml_spatial::knn_graph;
//! let pts: Vec<f64> = (0..10).map(|i| i as f64).collect(); // 10 points on a line
//! let g = knn_graph(&pts, 1, 2, 0.0)?;
//! assert_eq!(&g.indices[0..2], &[1, 2]);
//! assert_eq!(&g.sqdist[10..12], &[1.0, 1.0]); // point 5: 4 and 6 at distance 1
//! assert_eq!(&g.indices[10..12], &[4, 6]);
//! # Ok::<(), vastml_spatial::SpatialError>(())
//! ```

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use crate::knn_tree::{Best, KnnTree};
use crate::validate::validate_points;
use crate::{Result, SpatialError};

/// Leaf size of the kNN tree (larger than [`crate::DEFAULT_LEAF_SIZE`]: with `k` near 100
/// neighbours, larger leaves mean fewer box tests for the same points).
pub const KNN_LEAF_SIZE: usize = 32;

/// Queries per parallel chunk (results are scattered back to input order per chunk).
const CHUNK: usize = 1 << 14;

/// Consecutive queries (in tree order) per parallel task: each starts from the previous
/// one's neighbours.
const RUN: usize = 256;

/// A kNN graph in input order: row `i` of the `n x k` row-major arrays lists point `i`'s
/// neighbours nearest first (ties: smaller index); the point itself is never listed, but its
/// duplicates are (at distance 0).
#[derive(Clone, Debug)]
pub struct KnnGraph {
    /// Neighbours per point.
    pub k: usize,
    /// Squared Euclidean distances, `n x k`.
    pub sqdist: Vec<f64>,
    /// Neighbour indices, `n x k` (32-bit: at most `2^31 - 1` points).
    pub indices: Vec<i32>,
}

/// The `k` nearest other points of every point of `points` (row-major `n x dim`), exact for
/// `eps = 0` and `(1 + eps)`-approximate for `eps > 0` (see the module docs). Runs on the
/// current rayon pool; the result does not depend on the number of threads.
///
/// # Errors
/// [`SpatialError::InvalidParameter`] unless `1 <= k < n`, `eps >= 0` (finite) and
/// `n < 2^31`; [`SpatialError`]s for an empty, ragged or non-finite point set.
pub fn knn_graph(points: &[f64], dim: usize, k: usize, eps: f64) -> Result<KnnGraph> {
    knn_graph_with(points, dim, k, eps, &AtomicBool::new(false))
}

/// [`knn_graph`] polling `cancel` while the tree is built (before splitting each subtree of
/// at least 4,096 points) and before each chunk of 16,384 queries, so that Ctrl-C stops it.
///
/// # Errors
/// As [`knn_graph`], and [`SpatialError::Cancelled`] when `cancel` is raised.
pub fn knn_graph_with(
    points: &[f64],
    dim: usize,
    k: usize,
    eps: f64,
    cancel: &AtomicBool,
) -> Result<KnnGraph> {
    let n = validate_points(points, dim)?;
    if k == 0 || k >= n {
        return Err(SpatialError::InvalidParameter {
            name: "k",
            reason: format!("must lie in [1, n - 1 = {}], got {k}", n.saturating_sub(1)),
        });
    }
    check_eps_and_size(eps, n)?;
    let tree = KnnTree::build(points, dim, KNN_LEAF_SIZE, cancel).ok_or(SpatialError::Cancelled)?;
    let shrink = (1.0 + eps) * (1.0 + eps);
    let perm = &tree.perm;
    let mut sqdist = vec![0.0f64; n * k];
    let mut indices = vec![0i32; n * k];
    let mut buf_d = vec![0.0f64; CHUNK.min(n) * k];
    let mut buf_i = vec![0u32; CHUNK.min(n) * k];
    for start in (0..n).step_by(CHUNK) {
        if cancel.load(Ordering::Relaxed) {
            return Err(SpatialError::Cancelled);
        }
        let end = (start + CHUNK).min(n);
        let m = end - start;
        buf_d[..m * k]
            .par_chunks_mut(k * RUN)
            .zip(buf_i[..m * k].par_chunks_mut(k * RUN))
            .enumerate()
            .for_each(|(r, (bd, bi))| {
                let first = start + r * RUN;
                let mut best = Best::new(k);
                for j in 0..bd.len() / k {
                    let t = first + j;
                    let o = perm[t] as usize;
                    let q = &points[o * dim..(o + 1) * dim];
                    best.clear();
                    tree.search(q, t, shrink, &mut best);
                    bd[j * k..(j + 1) * k].copy_from_slice(&best.d2);
                    bi[j * k..(j + 1) * k].copy_from_slice(&best.idx);
                }
            });
        for j in 0..m {
            let row = perm[start + j] as usize;
            sqdist[row * k..(row + 1) * k].copy_from_slice(&buf_d[j * k..(j + 1) * k]);
            for (o, &x) in indices[row * k..(row + 1) * k]
                .iter_mut()
                .zip(&buf_i[j * k..(j + 1) * k])
            {
                *o = x as i32;
            }
        }
    }
    Ok(KnnGraph { k, sqdist, indices })
}

/// The `k` nearest points of `points` (row-major `n x dim`, the reference set) to each row of
/// `queries` (row-major `m x dim`, e.g. new points against a training set): the same tree and
/// search as [`knn_graph`], exact for `eps = 0` and `(1 + eps)`-approximate for `eps > 0`; no
/// point is skipped (a query equal to a reference point finds it at distance 0). Row `i` of
/// the result lists query `i`'s neighbours nearest first (ties: smaller index). Runs on the
/// current rayon pool; the result does not depend on the number of threads.
///
/// ```
/// use vastml_spatial::knn_query;
/// let pts: Vec<f64> = (0..10).map(|i| i as f64).collect(); // 0, 1, ..., 9 on a line
/// let g = knn_query(&pts, 1, &[2.2, 9.6], 2, 0.0)?;
/// assert_eq!(&g.indices, &[2, 3, 9, 8]);
/// # Ok::<(), vastml_spatial::SpatialError>(())
/// ```
///
/// # Errors
/// [`SpatialError::InvalidParameter`] unless `1 <= k <= n`, `eps >= 0` (finite) and
/// `n < 2^31`; [`SpatialError`]s for an empty, ragged or non-finite point or query set.
pub fn knn_query(
    points: &[f64],
    dim: usize,
    queries: &[f64],
    k: usize,
    eps: f64,
) -> Result<KnnGraph> {
    knn_query_with(points, dim, queries, k, eps, &AtomicBool::new(false))
}

/// [`knn_query`] polling `cancel` while the tree is built (as [`knn_graph_with`] does).
///
/// # Errors
/// As [`knn_query`], and [`SpatialError::Cancelled`] when `cancel` is raised.
pub fn knn_query_with(
    points: &[f64],
    dim: usize,
    queries: &[f64],
    k: usize,
    eps: f64,
    cancel: &AtomicBool,
) -> Result<KnnGraph> {
    let n = validate_points(points, dim)?;
    let m = validate_points(queries, dim)?;
    if k == 0 || k > n {
        return Err(SpatialError::InvalidParameter {
            name: "k",
            reason: format!("must lie in [1, n = {n}], got {k}"),
        });
    }
    check_eps_and_size(eps, n)?;
    let tree = KnnTree::build(points, dim, KNN_LEAF_SIZE, cancel).ok_or(SpatialError::Cancelled)?;
    let shrink = (1.0 + eps) * (1.0 + eps);
    let mut sqdist = vec![0.0f64; m * k];
    let mut indices = vec![0i32; m * k];
    sqdist
        .par_chunks_mut(k * RUN)
        .zip(indices.par_chunks_mut(k * RUN))
        .enumerate()
        .for_each(|(r, (bd, bi))| {
            let mut best = Best::new(k);
            for j in 0..bd.len() / k {
                let t = r * RUN + j;
                best.clear();
                // no tree position equals u32::MAX (n < 2^31): nothing is skipped
                tree.search(
                    &queries[t * dim..(t + 1) * dim],
                    u32::MAX as usize,
                    shrink,
                    &mut best,
                );
                bd[j * k..(j + 1) * k].copy_from_slice(&best.d2);
                for (o, &x) in bi[j * k..(j + 1) * k].iter_mut().zip(&best.idx) {
                    *o = x as i32;
                }
            }
        });
    Ok(KnnGraph { k, sqdist, indices })
}

/// The checks [`knn_graph_with`] and [`knn_query_with`] share: `eps` finite and >= 0, and
/// `n` reference points that 32-bit indices can hold.
fn check_eps_and_size(eps: f64, n: usize) -> Result<()> {
    if !(eps.is_finite() && eps >= 0.0) {
        return Err(SpatialError::InvalidParameter {
            name: "eps",
            reason: format!("must be finite and >= 0, got {eps}"),
        });
    }
    if n > i32::MAX as usize {
        return Err(SpatialError::InvalidParameter {
            name: "points",
            reason: "at most 2^31 - 1 points (32-bit indices)".to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::squared_distance;
    use rand::{RngExt, SeedableRng};
    use rand_pcg::Pcg64;

    /// Brute force: the `k` nearest reference points to each query, sorted by (squared
    /// distance, index), skipping reference `skip(i)` for query `i`.
    fn brute_nearest<'a>(
        points: &[f64],
        queries: impl Iterator<Item = &'a [f64]>,
        dim: usize,
        k: usize,
        skip: impl Fn(usize) -> Option<usize>,
    ) -> (Vec<f64>, Vec<i32>) {
        let n = points.len() / dim;
        let (mut d, mut ix) = (Vec::new(), Vec::new());
        for (i, q) in queries.enumerate() {
            let mut all: Vec<(f64, usize)> = (0..n)
                .filter(|&j| skip(i) != Some(j))
                .map(|j| (squared_distance(q, &points[j * dim..(j + 1) * dim]), j))
                .collect();
            all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            for &(dd, j) in &all[..k] {
                d.push(dd);
                ix.push(j as i32);
            }
        }
        (d, ix)
    }

    /// Brute force: every other point sorted by (squared distance, index).
    fn brute(points: &[f64], dim: usize, k: usize) -> (Vec<f64>, Vec<i32>) {
        brute_nearest(points, points.chunks(dim), dim, k, Some)
    }

    fn blobs(n: usize, dim: usize, seed: u64) -> Vec<f64> {
        let mut rng = Pcg64::seed_from_u64(seed);
        let centres: Vec<f64> = (0..5 * dim)
            .map(|_| rng.random_range(-10.0..10.0))
            .collect();
        (0..n)
            .flat_map(|_| {
                let c = rng.random_range(0..5);
                let cs = centres[c * dim..(c + 1) * dim].to_vec();
                let noise: Vec<f64> = (0..dim).map(|_| rng.random_range(-1.0..1.0)).collect();
                cs.into_iter()
                    .zip(noise)
                    .map(|(a, b)| a + b)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn exact_equals_brute_force() {
        for (n, dim, k) in [(3, 2, 2), (50, 1, 7), (700, 3, 20), (900, 10, 30)] {
            let pts = blobs(n, dim, n as u64);
            let g = knn_graph(&pts, dim, k, 0.0).unwrap();
            let (d, ix) = brute(&pts, dim, k);
            assert_eq!(g.sqdist, d, "n={n} dim={dim}");
            assert_eq!(g.indices, ix, "n={n} dim={dim}");
        }
    }

    /// Brute force of `knn_query`: every reference point sorted by (squared distance, index).
    fn brute_query(points: &[f64], queries: &[f64], dim: usize, k: usize) -> (Vec<f64>, Vec<i32>) {
        brute_nearest(points, queries.chunks(dim), dim, k, |_| None)
    }

    #[test]
    fn query_exact_equals_brute_force() {
        for (n, m, dim, k) in [
            (3, 2, 2, 3),
            (50, 9, 1, 7),
            (700, 300, 3, 20),
            (900, 600, 10, 30),
        ] {
            let pts = blobs(n, dim, n as u64);
            let mut qs = blobs(m, dim, 1000 + m as u64);
            qs[..dim].copy_from_slice(&pts[..dim]); // a query equal to a reference point
            let g = knn_query(&pts, dim, &qs, k, 0.0).unwrap();
            let (d, ix) = brute_query(&pts, &qs, dim, k);
            assert_eq!(g.sqdist, d, "n={n} dim={dim}");
            assert_eq!(g.indices, ix, "n={n} dim={dim}");
            assert_eq!((g.indices[0], g.sqdist[0]), (0, 0.0));
        }
    }

    #[test]
    fn query_approximate_has_high_recall_and_exact_distances() {
        let (n, m, dim, k) = (5000, 500, 10, 90);
        let pts = blobs(n, dim, 3);
        let qs = blobs(m, dim, 4);
        let (_, ix) = brute_query(&pts, &qs, dim, k);
        let g = knn_query(&pts, dim, &qs, k, 0.3).unwrap();
        let mut hits = 0;
        for i in 0..m {
            let truth = &ix[i * k..(i + 1) * k];
            let q = &qs[i * dim..(i + 1) * dim];
            for (j, &r) in g.indices[i * k..(i + 1) * k].iter().enumerate() {
                let r = r as usize;
                let d = squared_distance(q, &pts[r * dim..(r + 1) * dim]);
                assert_eq!(d, g.sqdist[i * k + j]);
                hits += usize::from(truth.contains(&(r as i32)));
            }
        }
        let recall = hits as f64 / (m * k) as f64;
        assert!(recall > 0.95, "recall {recall}");
        assert!(knn_query(&pts, dim, &qs, n + 1, 0.0).is_err());
        assert!(knn_query(&pts, dim, &qs, 0, 0.0).is_err());
        assert!(knn_query(&pts, dim, &qs[..7], 3, 0.0).is_err());
        assert!(knn_query(&pts, dim, &qs, 3, -1.0).is_err());
    }

    #[test]
    fn duplicates_are_neighbours_self_is_not() {
        // Three copies of the origin and one far point.
        let pts = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 5.0, 5.0];
        let g = knn_graph(&pts, 2, 2, 0.0).unwrap();
        assert_eq!(&g.indices[..6], &[1, 2, 0, 2, 0, 1]);
        assert_eq!(&g.sqdist[..6], &[0.0; 6]);
    }

    #[test]
    fn approximate_has_high_recall_and_exact_distances() {
        let (n, dim, k) = (3000, 10, 30);
        let pts = blobs(n, dim, 7);
        let (_, ix) = brute(&pts, dim, k);
        let mut last = 1.0;
        for eps in [0.5, 2.0] {
            let g = knn_graph(&pts, dim, k, eps).unwrap();
            let mut hits = 0;
            for i in 0..n {
                let truth = &ix[i * k..(i + 1) * k];
                for (j, &m) in g.indices[i * k..(i + 1) * k].iter().enumerate() {
                    let m = m as usize;
                    assert_ne!(m, i);
                    let d = squared_distance(
                        &pts[i * dim..(i + 1) * dim],
                        &pts[m * dim..(m + 1) * dim],
                    );
                    assert_eq!(g.sqdist[i * k + j], d);
                    hits += usize::from(truth.contains(&(m as i32)));
                }
            }
            let recall = hits as f64 / (n * k) as f64;
            assert!(recall <= last + 1e-12, "recall grew with eps: {recall}");
            assert!(
                recall > if eps < 1.0 { 0.95 } else { 0.5 },
                "eps {eps}: recall {recall}"
            );
            last = recall;
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Small integer coordinates: many ties and duplicates, leaves of coincident
        /// points, every dimension path (2, 3, 10 and the generic one).
        #[test]
        fn exact_equals_brute_force_with_ties(
            n in 2usize..400,
            dim in proptest::sample::select(vec![1usize, 2, 3, 5, 10, 12]),
            kf in 0.0f64..1.0,
            seed in 0u64..1000,
            spread in 1i32..6,
        ) {
            let mut rng = Pcg64::seed_from_u64(seed);
            let pts: Vec<f64> = (0..n * dim).map(|_| rng.random_range(0..spread) as f64).collect();
            let k = 1 + ((n - 2) as f64 * kf) as usize;
            let g = knn_graph(&pts, dim, k, 0.0).unwrap();
            let (d, ix) = brute(&pts, dim, k);
            proptest::prop_assert_eq!(g.sqdist, d);
            proptest::prop_assert_eq!(g.indices, ix);
        }
    }

    #[test]
    fn bad_parameters() {
        let pts = [0.0, 1.0, 2.0];
        assert!(knn_graph(&pts, 1, 0, 0.0).is_err());
        assert!(knn_graph(&pts, 1, 3, 0.0).is_err());
        assert!(knn_graph(&pts, 1, 1, -1.0).is_err());
        assert!(knn_graph(&pts, 1, 1, f64::NAN).is_err());
        assert!(knn_graph(&[f64::NAN, 0.0], 1, 1, 0.0).is_err());
    }
}
