//! LLSVM: low-rank linearisation SVM (Zhang et al. 2012; thesis sec. 5.1).
//!
//! Landmarks `z_1..z_B` (chosen by the caller: random rows, k-means centres...) give the
//! Nystrom map `phi(x) = M g(x)` with `g(x) = [k(x, z_i)]_i` and `M = Lambda^{-1/2} U'` from
//! `K_BB = U Lambda U'`; eigenvalues at most `1e-5 lambda_max` are dropped. A linear SVM on
//! `phi` is trained by dual coordinate descent (Hsieh et al. 2008): L2-regularised hinge loss,
//! `0 <= a_i <= C = 1/lambda`, random order each outer iteration, at most `max_iter` outer
//! iterations, stop when the projected-gradient spread is at most `tol`. Binary per model;
//! the Python layer runs one-vs-rest for more classes.

use std::sync::atomic::{AtomicBool, Ordering};

use rand::SeedableRng;
use rand_pcg::Pcg64;
use rayon::prelude::*;

use crate::data::{Examples, check_positive, dot};
use crate::error::{SvmError, shape};
use crate::kernel::Kernel;

/// Eigen-decomposition of a symmetric `n x n` matrix by cyclic Jacobi rotations.
///
/// Returns the eigenvalues and the eigenvectors as the *columns* of a row-major `n x n` matrix.
pub fn symmetric_eigen(a: &[f64], n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut a = a.to_vec();
    let mut v = vec![0.0; n * n];
    (0..n).for_each(|i| v[i * n + i] = 1.0);
    let norm: f64 = a.iter().map(|x| x * x).sum::<f64>().sqrt();
    for _sweep in 0..100 {
        let off: f64 = (0..n)
            .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| a[i * n + j] * a[i * n + j])
            .sum::<f64>()
            .sqrt();
        if off <= 1e-15 * norm.max(f64::MIN_POSITIVE) {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = a[p * n + q];
                if apq.abs() <= 1e-300 {
                    continue;
                }
                let theta = (a[q * n + q] - a[p * n + p]) / (2.0 * apq);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..n {
                    let akp = a[k * n + p];
                    let akq = a[k * n + q];
                    a[k * n + p] = c * akp - s * akq;
                    a[k * n + q] = s * akp + c * akq;
                }
                for k in 0..n {
                    let apk = a[p * n + k];
                    let aqk = a[q * n + k];
                    a[p * n + k] = c * apk - s * aqk;
                    a[q * n + k] = s * apk + c * aqk;
                }
                for k in 0..n {
                    let vkp = v[k * n + p];
                    let vkq = v[k * n + q];
                    v[k * n + p] = c * vkp - s * vkq;
                    v[k * n + q] = s * vkp + c * vkq;
                }
            }
        }
    }
    ((0..n).map(|i| a[i * n + i]).collect(), v)
}

/// The Nystrom map over fixed landmarks.
#[derive(Debug, Clone)]
pub struct Nystrom {
    kernel: Kernel,
    dim: usize,
    landmarks: Vec<f64>,
    land_sq: Vec<f64>,
    /// `M`, row-major `(rank, B)`.
    map: Vec<f64>,
    rank: usize,
}

impl Nystrom {
    /// Builds the map from landmarks, row-major `(B, dim)`.
    ///
    /// # Errors
    /// Parameter/shape errors, [`SvmError::NonFinite`] for bad landmarks.
    pub fn new(kernel: Kernel, landmarks: &[f64], dim: usize) -> Result<Self, SvmError> {
        kernel.validate()?;
        let lm = Examples::dense(landmarks, dim)?;
        let b = lm.len();
        let land_sq: Vec<f64> = landmarks
            .chunks_exact(dim)
            .map(|z| z.iter().map(|a| a * a).sum())
            .collect();
        let mut kbb = vec![0.0; b * b];
        for i in 0..b {
            for j in 0..b {
                let zi = &landmarks[i * dim..(i + 1) * dim];
                let zj = &landmarks[j * dim..(j + 1) * dim];
                let dot: f64 = zi.iter().zip(zj).map(|(a, c)| a * c).sum();
                kbb[i * b + j] = kernel.eval(dot, land_sq[i], land_sq[j]);
            }
        }
        let (vals, vecs) = symmetric_eigen(&kbb, b);
        let lmax = vals.iter().cloned().fold(0.0, f64::max);
        if lmax.is_nan() || lmax <= 0.0 {
            return Err(shape(
                "landmarks",
                "the landmark kernel matrix has no positive eigenvalue",
            ));
        }
        let keep: Vec<usize> = (0..b).filter(|&i| vals[i] > 1e-5 * lmax).collect();
        let rank = keep.len();
        let mut map = vec![0.0; rank * b];
        for (r, &i) in keep.iter().enumerate() {
            let s = 1.0 / vals[i].sqrt();
            for j in 0..b {
                map[r * b + j] = s * vecs[j * b + i];
            }
        }
        Ok(Nystrom {
            kernel,
            dim,
            landmarks: landmarks.to_vec(),
            land_sq,
            map,
            rank,
        })
    }

    /// A map from landmarks `(B, dim)` and a mapping matrix `(rank, B)` computed before.
    ///
    /// # Errors
    /// Parameter, shape and non-finite errors.
    pub fn from_parts(
        kernel: Kernel,
        landmarks: &[f64],
        dim: usize,
        map: &[f64],
    ) -> Result<Self, SvmError> {
        kernel.validate()?;
        let b = Examples::dense(landmarks, dim)?.len();
        if map.len() % b != 0 {
            return Err(shape(
                "map",
                format!("{} values are not rank x {b}", map.len()),
            ));
        }
        if !map.iter().all(|v| v.is_finite()) {
            return Err(SvmError::NonFinite { name: "map" });
        }
        Ok(Nystrom {
            kernel,
            dim,
            land_sq: landmarks
                .chunks_exact(dim)
                .map(|z| z.iter().map(|a| a * a).sum())
                .collect(),
            landmarks: landmarks.to_vec(),
            rank: map.len() / b,
            map: map.to_vec(),
        })
    }

    /// Number of features of the map (the numerical rank of `K_BB`).
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of landmarks.
    pub fn n_landmarks(&self) -> usize {
        self.land_sq.len()
    }

    /// The mapping matrix `M`, row-major `(rank, B)`.
    pub fn map_matrix(&self) -> &[f64] {
        &self.map
    }

    /// `phi(x_i)` of every example, row-major `(n, rank)`, parallel over examples.
    ///
    /// # Errors
    /// A shape error on a dimension mismatch.
    pub fn transform(&self, data: &Examples<'_>) -> Result<Vec<f64>, SvmError> {
        if data.dim() != self.dim {
            return Err(shape("X", "feature count differs from the landmarks'"));
        }
        let (b, r, d) = (self.n_landmarks(), self.rank, self.dim);
        let mut out = vec![0.0; data.len() * r];
        out.par_chunks_mut(r.max(1)).enumerate().for_each_init(
            || vec![0.0; b],
            |g, (i, o)| {
                let x = data.row(i);
                let xx = x.sq_norm();
                for (j, gj) in g.iter_mut().enumerate() {
                    let z = &self.landmarks[j * d..(j + 1) * d];
                    *gj = self.kernel.eval(x.dot(z), xx, self.land_sq[j]);
                }
                for (k, ok) in o.iter_mut().enumerate() {
                    let m = &self.map[k * b..(k + 1) * b];
                    *ok = m.iter().zip(g.iter()).map(|(a, c)| a * c).sum();
                }
            },
        );
        Ok(out)
    }
}

/// Options of [`dual_cd`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DcdOptions {
    /// Box bound `C > 0` on the dual variables (`1 / lambda`).
    pub c: f64,
    /// Maximum number of outer iterations (passes).
    pub max_iter: usize,
    /// Stop when the projected-gradient spread of a pass is at most this.
    pub tol: f64,
    /// Seed of the per-pass random orders.
    pub seed: u64,
}

/// Dual coordinate descent for the L2-regularised hinge-loss linear SVM without bias.
///
/// `features` row-major `(n, dim)`, `targets` +1/-1. Returns `w` and the
/// number of outer iterations; [`dual_cd_full`] also returns the dual variables.
///
/// # Errors
/// Shape errors, a non-positive `c`, [`SvmError::Cancelled`].
pub fn dual_cd(
    features: &[f64],
    dim: usize,
    targets: &[f64],
    options: DcdOptions,
    cancel: &AtomicBool,
) -> Result<(Vec<f64>, usize), SvmError> {
    dual_cd_full(features, dim, targets, options, cancel).map(|(w, _, it)| (w, it))
}

/// [`dual_cd`] returning `(w, alpha, n_iter)`, with `w = sum_i alpha_i y_i x_i`.
///
/// # Errors
/// As [`dual_cd`].
pub fn dual_cd_full(
    features: &[f64],
    dim: usize,
    targets: &[f64],
    options: DcdOptions,
    cancel: &AtomicBool,
) -> Result<(Vec<f64>, Vec<f64>, usize), SvmError> {
    let DcdOptions {
        c,
        max_iter,
        tol,
        seed,
    } = options;
    check_positive(c, "C")?;
    let n = targets.len();
    if dim == 0 || features.len() != n * dim {
        return Err(shape("features", "must hold n * dim values"));
    }
    let q: Vec<f64> = features
        .chunks_exact(dim)
        .map(|r| r.iter().map(|a| a * a).sum())
        .collect();
    let mut alpha = vec![0.0; n];
    let mut w = vec![0.0; dim];
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut iters = 0;
    // Shrinking (Hsieh et al. 2008, as in LIBLINEAR): variables stuck at a bound with a
    // gradient pointing outside the box leave the active set until the end check.
    let mut active: Vec<usize> = (0..n).filter(|&i| q[i] > 0.0).collect();
    let n_usable = active.len();
    let (mut pg_max_old, mut pg_min_old) = (f64::INFINITY, f64::NEG_INFINITY);
    while iters < max_iter {
        if cancel.load(Ordering::Relaxed) {
            return Err(SvmError::Cancelled);
        }
        iters += 1;
        for k in (1..active.len()).rev() {
            let j = rand::RngExt::random_range(&mut rng, 0..=k);
            active.swap(k, j);
        }
        let (mut pg_max, mut pg_min) = (f64::NEG_INFINITY, f64::INFINITY);
        let mut s = 0;
        while s < active.len() {
            let i = active[s];
            let xi = &features[i * dim..(i + 1) * dim];
            let yi = targets[i];
            let g = yi * dot(xi, &w) - 1.0;
            let pg = if alpha[i] == 0.0 {
                if g > pg_max_old {
                    active.swap_remove(s);
                    continue;
                }
                g.min(0.0)
            } else if alpha[i] == c {
                if g < pg_min_old {
                    active.swap_remove(s);
                    continue;
                }
                g.max(0.0)
            } else {
                g
            };
            pg_max = pg_max.max(pg);
            pg_min = pg_min.min(pg);
            if pg.abs() > 1e-12 {
                let old = alpha[i];
                alpha[i] = (old - g / q[i]).clamp(0.0, c);
                let delta = (alpha[i] - old) * yi;
                w.iter_mut().zip(xi).for_each(|(wk, xk)| *wk += delta * xk);
            }
            s += 1;
        }
        if pg_max - pg_min <= tol {
            if active.len() == n_usable {
                break;
            }
            // Converged on the shrunk problem: check every variable once more.
            active = (0..n).filter(|&i| q[i] > 0.0).collect();
            pg_max_old = f64::INFINITY;
            pg_min_old = f64::NEG_INFINITY;
            continue;
        }
        pg_max_old = if pg_max > 0.0 { pg_max } else { f64::INFINITY };
        pg_min_old = if pg_min < 0.0 {
            pg_min
        } else {
            f64::NEG_INFINITY
        };
    }
    Ok((w, alpha, iters))
}
