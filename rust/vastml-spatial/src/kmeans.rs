//! k-means: k-means++ seeding (Arthur & Vassilvitskii 2007) and Lloyd iterations, seeded.
//!
//! Assignment steps run in parallel (rayon); results are identical for any thread count (the
//! centre sums are accumulated in point order). An empty cluster is re-seeded with the point
//! farthest from its centre.

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;
use vastml_core::{Csr, CsrIndex};

use crate::distance::{dot, squared_distance};
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

/// Rows the k-means loops can read: dense or CSR.
trait Rows: Sync {
    fn n(&self) -> usize;
    fn dim(&self) -> usize;
    fn dot(&self, i: usize, c: &[f64]) -> f64;
    fn sq_norm(&self, i: usize) -> f64;
    fn add_to(&self, i: usize, out: &mut [f64]);
    /// `out[c] = x_i . centre_c` for all centres, from the centres transposed
    /// (`centers_t[j * k + c]`): every non-zero adds a contiguous k-vector (vectorises).
    fn dots_all(&self, i: usize, centers_t: &[f64], out: &mut [f64]);
}

struct DenseRows<'a> {
    points: &'a [f64],
    dim: usize,
}

impl Rows for DenseRows<'_> {
    fn n(&self) -> usize {
        self.points.len() / self.dim
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn dot(&self, i: usize, c: &[f64]) -> f64 {
        dot(&self.points[i * self.dim..(i + 1) * self.dim], c)
    }
    fn sq_norm(&self, i: usize) -> f64 {
        let p = &self.points[i * self.dim..(i + 1) * self.dim];
        dot(p, p)
    }
    fn add_to(&self, i: usize, out: &mut [f64]) {
        let p = &self.points[i * self.dim..(i + 1) * self.dim];
        out.iter_mut().zip(p).for_each(|(o, v)| *o += v);
    }
    fn dots_all(&self, i: usize, centers_t: &[f64], out: &mut [f64]) {
        let k = out.len();
        out.iter_mut().for_each(|o| *o = 0.0);
        let p = &self.points[i * self.dim..(i + 1) * self.dim];
        for (&v, col) in p.iter().zip(centers_t.chunks_exact(k)) {
            if v != 0.0 {
                out.iter_mut().zip(col).for_each(|(o, c)| *o += v * c);
            }
        }
    }
}

impl<I: CsrIndex> Rows for Csr<'_, I, f64> {
    fn n(&self) -> usize {
        self.n_rows()
    }
    fn dim(&self) -> usize {
        self.n_cols()
    }
    fn dot(&self, i: usize, c: &[f64]) -> f64 {
        let (cols, vals) = self.row(i);
        cols.iter().zip(vals).map(|(&j, v)| v * c[j.ix()]).sum()
    }
    fn sq_norm(&self, i: usize) -> f64 {
        self.row(i).1.iter().map(|v| v * v).sum()
    }
    fn add_to(&self, i: usize, out: &mut [f64]) {
        let (cols, vals) = self.row(i);
        for (&j, v) in cols.iter().zip(vals) {
            out[j.ix()] += v;
        }
    }
    fn dots_all(&self, i: usize, centers_t: &[f64], out: &mut [f64]) {
        let k = out.len();
        out.iter_mut().for_each(|o| *o = 0.0);
        let (cols, vals) = self.row(i);
        for (&j, &v) in cols.iter().zip(vals) {
            let col = &centers_t[j.ix() * k..(j.ix() + 1) * k];
            out.iter_mut().zip(col).for_each(|(o, c)| *o += v * c);
        }
    }
}

/// `||x_i - c||^2` from norms and a dot product (clamped at 0 against rounding).
fn dist2<R: Rows>(rows: &R, i: usize, xx: f64, c: &[f64], cc: f64) -> f64 {
    (xx + cc - 2.0 * rows.dot(i, c)).max(0.0)
}

/// Nearest centre of every point (parallel), from the transposed centres.
fn assign_all<R: Rows>(rows: &R, norms: &[f64], centers: &[f64], k: usize) -> Vec<(usize, f64)> {
    let dim = rows.dim();
    let mut ct = vec![0.0; dim * k];
    for (c, z) in centers.chunks_exact(dim).enumerate() {
        for (j, &v) in z.iter().enumerate() {
            ct[j * k + c] = v;
        }
    }
    let cn: Vec<f64> = centers.chunks_exact(dim).map(|z| dot(z, z)).collect();
    (0..rows.n())
        .into_par_iter()
        .map_init(
            || vec![0.0; k],
            |buf, i| {
                rows.dots_all(i, &ct, buf);
                let mut best = (0, f64::INFINITY);
                for (c, (&d, &cc)) in buf.iter().zip(&cn).enumerate() {
                    let d2 = (norms[i] + cc - 2.0 * d).max(0.0);
                    if d2 < best.1 {
                        best = (c, d2);
                    }
                }
                best
            },
        )
        .collect()
}

fn row_dense<R: Rows>(rows: &R, i: usize) -> Vec<f64> {
    let mut v = vec![0.0; rows.dim()];
    rows.add_to(i, &mut v);
    v
}

fn check_k(k: usize, n: usize) -> Result<()> {
    if k == 0 || k > n {
        return Err(SpatialError::InvalidParameter {
            name: "k",
            reason: format!("must lie in 1..={n} (the number of points), got {k}"),
        });
    }
    Ok(())
}

fn plus_plus<R: Rows>(
    rows: &R,
    norms: &[f64],
    k: usize,
    seed: u64,
    cancel: &AtomicBool,
) -> Result<Vec<f64>> {
    let n = rows.n();
    let mut rng = SplitMix(seed);
    let first = ((rng.next_f64() * n as f64) as usize).min(n - 1);
    let mut centers = row_dense(rows, first);
    let c0 = norms[first];
    let mut d2: Vec<f64> = (0..n)
        .into_par_iter()
        .map(|i| dist2(rows, i, norms[i], &centers, c0))
        .collect();
    while centers.len() < k * rows.dim() {
        check_cancel(cancel)?;
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
        let c = row_dense(rows, pick);
        let cc = norms[pick];
        d2.par_iter_mut()
            .enumerate()
            .for_each(|(i, d)| *d = d.min(dist2(rows, i, norms[i], &c, cc)));
        centers.extend(c);
    }
    Ok(centers)
}

fn check_cancel(cancel: &AtomicBool) -> Result<()> {
    if cancel.load(Ordering::Relaxed) {
        Err(SpatialError::Cancelled)
    } else {
        Ok(())
    }
}

/// A cancel flag that is never raised, for the entry points without one.
static NEVER: AtomicBool = AtomicBool::new(false);

fn lloyd<R: Rows>(
    rows: &R,
    k: usize,
    max_iter: usize,
    tol: f64,
    seed: u64,
    cancel: &AtomicBool,
) -> Result<KMeans> {
    let (n, dim) = (rows.n(), rows.dim());
    let norms: Vec<f64> = (0..n).into_par_iter().map(|i| rows.sq_norm(i)).collect();
    let mut centers = plus_plus(rows, &norms, k, seed, cancel)?;
    let mut labels = vec![usize::MAX; n];
    let mut n_iter = 0;
    for _ in 0..max_iter {
        check_cancel(cancel)?;
        n_iter += 1;
        let assign = assign_all(rows, &norms, &centers, k);
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
        for (i, &l) in labels.iter().enumerate() {
            counts[l] += 1;
            rows.add_to(i, &mut sums[l * dim..(l + 1) * dim]);
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
                row_dense(rows, far)
            };
            moved += squared_distance(&new, &centers[j * dim..(j + 1) * dim]);
            centers[j * dim..(j + 1) * dim].copy_from_slice(&new);
        }
        if changed == 0 || moved <= tol {
            break;
        }
    }
    let (labels, dists): (Vec<usize>, Vec<f64>) =
        assign_all(rows, &norms, &centers, k).into_iter().unzip();
    Ok(KMeans {
        centers,
        labels,
        inertia: dists.iter().sum(),
        n_iter,
    })
}

fn check_iter(max_iter: usize, tol: f64) -> Result<()> {
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
    Ok(())
}

/// k-means++ seeding: the first centre uniformly, each next one with probability proportional
/// to the squared distance to the nearest chosen centre. Returns `(k, dim)` centres.
///
/// # Errors
/// As [`kmeans`].
pub fn kmeans_plus_plus(points: &[f64], dim: usize, k: usize, seed: u64) -> Result<Vec<f64>> {
    let n = validate_points(points, dim)?;
    check_k(k, n)?;
    let rows = DenseRows { points, dim };
    let norms: Vec<f64> = (0..n).map(|i| rows.sq_norm(i)).collect();
    plus_plus(&rows, &norms, k, seed, &NEVER)
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
    kmeans_with(points, dim, k, max_iter, tol, seed, &NEVER)
}

/// [`kmeans`], polling `cancel` before each centre of the seeding and each Lloyd iteration.
///
/// # Errors
/// As [`kmeans`], and [`SpatialError::Cancelled`] when `cancel` is raised.
pub fn kmeans_with(
    points: &[f64],
    dim: usize,
    k: usize,
    max_iter: usize,
    tol: f64,
    seed: u64,
    cancel: &AtomicBool,
) -> Result<KMeans> {
    check_iter(max_iter, tol)?;
    let n = validate_points(points, dim)?;
    check_k(k, n)?;
    lloyd(&DenseRows { points, dim }, k, max_iter, tol, seed, cancel)
}

/// [`kmeans`] on CSR rows (any [`CsrIndex`] width; the matrix was checked when the [`Csr`]
/// view was built), never densified: distances use `||x||^2 + ||c||^2 - 2 x.c` at O(nnz) per
/// point and centre. Centres are dense, row-major `(k, n_cols)`.
///
/// # Errors
/// As [`kmeans`] (`dim` is the number of columns).
///
/// # Example
/// ```
/// use vastml_core::Csr;
///
/// // Rows [1, 0, 0], [0.9, 0, 0], [0, 0, 5]: two clusters.
/// let (indptr, indices, data) = ([0i64, 1, 2, 3], [0i64, 0, 2], [1.0, 0.9, 5.0]);
/// let x = Csr::new("X", &indptr, &indices, &data, 3)?;
/// let km = vastml_spatial::kmeans_csr(x, 2, 10, 0.0, 1)?;
/// assert_eq!(km.labels[0], km.labels[1]);
/// assert_ne!(km.labels[0], km.labels[2]);
/// # Ok::<(), vastml_spatial::SpatialError>(())
/// ```
pub fn kmeans_csr<I: CsrIndex>(
    points: Csr<'_, I, f64>,
    k: usize,
    max_iter: usize,
    tol: f64,
    seed: u64,
) -> Result<KMeans> {
    kmeans_csr_with(points, k, max_iter, tol, seed, &NEVER)
}

/// [`kmeans_csr`], polling `cancel` as [`kmeans_with`] does.
///
/// # Errors
/// As [`kmeans_csr`], and [`SpatialError::Cancelled`] when `cancel` is raised.
pub fn kmeans_csr_with<I: CsrIndex>(
    points: Csr<'_, I, f64>,
    k: usize,
    max_iter: usize,
    tol: f64,
    seed: u64,
    cancel: &AtomicBool,
) -> Result<KMeans> {
    check_iter(max_iter, tol)?;
    if points.n_cols() == 0 {
        return Err(SpatialError::InvalidParameter {
            name: "dim",
            reason: "must be at least 1".to_string(),
        });
    }
    if points.n_rows() == 0 {
        return Err(SpatialError::Empty { name: "points" });
    }
    check_k(k, points.n_rows())?;
    lloyd(&points, k, max_iter, tol, seed, cancel)
}
