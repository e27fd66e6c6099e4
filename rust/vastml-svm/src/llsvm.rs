//! LLSVM: low-rank linearisation SVM (Zhang et al. 2012; thesis sec. 5.1).
//!
//! Landmarks `z_1..z_B` (chosen by the caller: random rows, k-means centres...) give the
//! Nystrom map `phi(x) = M g(x)` with `g(x) = [k(x, z_i)]_i` and `M = Lambda^{-1/2} U'` from
//! `K_BB = U Lambda U'`; eigenvalues at most `1e-5 lambda_max` are dropped. A linear SVM on
//! `phi` is trained by dual coordinate descent (Hsieh et al. 2008): L2-regularised hinge loss,
//! `0 <= a_i <= C = 1/lambda`, random order each outer iteration, at most `max_iter` outer
//! iterations, stop when the projected-gradient spread is at most `tol`. Binary per model;
//! [`llsvm_fit`] runs one-vs-rest for more classes (the models in parallel, one pass of each
//! at a time, so progress is reported per pass) and [`llsvm_decision`] scores with the map
//! folded into the coefficients.

use rand::SeedableRng;
use rand_pcg::Pcg64;
use rayon::prelude::*;

use crate::amm::{FitOutcome, poll_mask};
use crate::data::{Examples, Row, check_positive, dot};
use crate::error::{SvmError, shape};
use crate::kernel::{Kernel, exp_in_place};
use vastml_core::{Control, Halt};

/// Eigen-decomposition of a symmetric `n x n` matrix by cyclic Jacobi rotations.
///
/// Returns the eigenvalues and the eigenvectors as the *columns* of a row-major `n x n` matrix.
pub fn symmetric_eigen(a: &[f64], n: usize) -> (Vec<f64>, Vec<f64>) {
    match symmetric_eigen_with(a, n, Control::none()) {
        Ok(r) => r,
        Err(_) => unreachable!("Control::none() is never cancelled"),
    }
}

/// [`symmetric_eigen`] polling `control`'s cancel flag before each row of rotations of a
/// sweep (O(n^2) work between two polls), so that Ctrl-C stops the O(n^3) sweeps of a large
/// landmark set.
///
/// # Errors
/// [`Halt::Cancelled`] when the flag is raised.
pub fn symmetric_eigen_with(
    a: &[f64],
    n: usize,
    control: Control<'_>,
) -> Result<(Vec<f64>, Vec<f64>), Halt> {
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
            control.check()?;
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
    Ok(((0..n).map(|i| a[i * n + i]).collect(), v))
}

/// The Nystrom map over fixed landmarks.
#[derive(Debug, Clone)]
pub struct Nystrom {
    kernel: Kernel,
    dim: usize,
    /// The landmarks transposed, `(dim, B)`: a row's dot products with every landmark are
    /// one contiguous B-vector update per non-zero (GEMM-style, vectorised).
    land_t: Vec<f64>,
    land_sq: Vec<f64>,
    /// `M`, row-major `(rank, B)`.
    map: Vec<f64>,
    /// `M'`, row-major `(B, rank)`: `phi(x) = sum_j g_j(x) M'[j, ..]`.
    map_t: Vec<f64>,
    rank: usize,
}

/// Rows per block of [`Nystrom::transform`]'s parallel loop.
const BLOCK: usize = 64;

/// `(rows, cols)` row-major -> `(cols, rows)` row-major.
fn transpose(a: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    let mut t = vec![0.0; a.len()];
    for i in 0..rows {
        for j in 0..cols {
            t[j * rows + i] = a[i * cols + j];
        }
    }
    t
}

impl Nystrom {
    /// Builds the map from landmarks, row-major `(B, dim)`.
    ///
    /// # Errors
    /// Parameter/shape errors, [`SvmError::NonFinite`] for bad landmarks.
    pub fn new(kernel: Kernel, landmarks: &[f64], dim: usize) -> Result<Self, SvmError> {
        Self::new_with(kernel, landmarks, dim, Control::none())
    }

    /// [`Nystrom::new`] polling `control`'s cancel flag every row of the landmark kernel
    /// matrix and every row of rotations of its eigendecomposition.
    ///
    /// # Errors
    /// As [`Nystrom::new`], and [`SvmError::Cancelled`].
    pub fn new_with(
        kernel: Kernel,
        landmarks: &[f64],
        dim: usize,
        control: Control<'_>,
    ) -> Result<Self, SvmError> {
        kernel.validate()?;
        let lm = Examples::dense(landmarks, dim)?;
        let b = lm.len();
        let land_sq: Vec<f64> = landmarks
            .chunks_exact(dim)
            .map(|z| z.iter().map(|a| a * a).sum())
            .collect();
        let mut kbb = vec![0.0; b * b];
        for i in 0..b {
            control.check()?;
            for j in i..b {
                let zi = &landmarks[i * dim..(i + 1) * dim];
                let zj = &landmarks[j * dim..(j + 1) * dim];
                let kij = kernel.eval(dot(zi, zj), land_sq[i], land_sq[j]);
                kbb[i * b + j] = kij;
                kbb[j * b + i] = kij;
            }
        }
        let (vals, vecs) = symmetric_eigen_with(&kbb, b, control)?;
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
            land_t: transpose(landmarks, b, dim),
            land_sq,
            map_t: transpose(&map, rank, b),
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
        let rank = map.len() / b;
        Ok(Nystrom {
            kernel,
            dim,
            land_sq: landmarks
                .chunks_exact(dim)
                .map(|z| z.iter().map(|a| a * a).sum())
                .collect(),
            land_t: transpose(landmarks, b, dim),
            rank,
            map_t: transpose(map, rank, b),
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

    /// `g(x) = [k(x, z_j)]_j` into `g` (length B): the dot products with all landmarks at
    /// once from the transposed landmarks (O(nnz(x) B), contiguous), then the kernel.
    #[inline]
    fn kernel_row(&self, x: Row<'_>, g: &mut [f64]) {
        g.iter_mut().for_each(|v| *v = 0.0);
        x.dots_transposed(&self.land_t, g);
        let xx = x.sq_norm();
        match self.kernel {
            Kernel::Gaussian { gamma } => {
                // exp(-gamma (xx + zz - 2 x.z)): the exponents in one pass, then a
                // vectorised exp over the row (no libm call per element).
                for (gj, &zz) in g.iter_mut().zip(&self.land_sq) {
                    *gj = -gamma * (xx + zz - 2.0 * *gj).max(0.0);
                }
                exp_in_place(g);
            }
            k => {
                for (gj, &zz) in g.iter_mut().zip(&self.land_sq) {
                    *gj = k.eval(*gj, xx, zz);
                }
            }
        }
    }

    /// `phi(x_i)` of every example, row-major `(n, rank)`, parallel over blocks of rows.
    ///
    /// # Errors
    /// A shape error on a dimension mismatch.
    pub fn transform(&self, data: &Examples<'_>) -> Result<Vec<f64>, SvmError> {
        self.transform_with(data, Control::none())
    }

    /// [`Nystrom::transform`] polling `control`'s cancel flag every block of rows.
    ///
    /// # Errors
    /// As [`Nystrom::transform`], and [`SvmError::Cancelled`].
    pub fn transform_with(
        &self,
        data: &Examples<'_>,
        control: Control<'_>,
    ) -> Result<Vec<f64>, SvmError> {
        if data.dim() != self.dim {
            return Err(shape("X", "feature count differs from the landmarks'"));
        }
        let (b, r) = (self.n_landmarks(), self.rank);
        let mut out = vec![0.0; data.len() * r];
        if r == 0 {
            return Ok(out);
        }
        out.par_chunks_mut(r * BLOCK)
            .enumerate()
            .try_for_each_init(
                || vec![0.0; b],
                |g, (blk, o)| {
                    control.check()?;
                    for (k, orow) in o.chunks_exact_mut(r).enumerate() {
                        self.kernel_row(data.row(blk * BLOCK + k), g);
                        if r <= 4 {
                            // Few outputs (folded prediction coefficients): dot products.
                            for (q, oq) in orow.iter_mut().enumerate() {
                                *oq = dot(&self.map[q * b..(q + 1) * b], g);
                            }
                        } else {
                            // phi = sum_j g_j M'[j, ..]: contiguous axpys over `rank`.
                            for (&gj, mrow) in g.iter().zip(self.map_t.chunks_exact(r)) {
                                orow.iter_mut().zip(mrow).for_each(|(a, m)| *a += gj * m);
                            }
                        }
                    }
                    Ok::<(), Halt>(())
                },
            )?;
        Ok(out)
    }
}

/// k-means landmarks as BudgetedSVM picks them: `k` distinct random rows as the initial
/// centres, then `iters` Lloyd iterations; an empty cluster restarts at a random row.
/// Distances use `||x||^2 + ||c||^2 - 2 x.c` with the centres transposed, so a sparse row
/// costs O(nnz(x) k) and is never densified. Returns the centres `(k, dim)` and labels.
///
/// # Errors
/// [`SvmError::InvalidParameter`] if `k` is 0 or exceeds the number of rows.
pub fn kmeans_landmarks(
    data: &Examples<'_>,
    k: usize,
    iters: usize,
    seed: u64,
    control: Control<'_>,
) -> Result<(Vec<f64>, Vec<usize>), SvmError> {
    let (n, d) = (data.len(), data.dim());
    if k == 0 || k > n {
        return Err(crate::error::invalid(
            "n_landmarks",
            format!("must lie in 1..={n}, got {k}"),
        ));
    }
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut centres = vec![0.0; k * d];
    // k distinct rows (partial Fisher-Yates).
    let mut idx: Vec<usize> = (0..n).collect();
    for c in 0..k {
        let j = rand::RngExt::random_range(&mut rng, c..n);
        idx.swap(c, j);
        data.row(idx[c]).axpy(1.0, &mut centres[c * d..(c + 1) * d]);
    }
    let sq: Vec<f64> = (0..n).map(|i| data.row(i).sq_norm()).collect();
    let mut labels = vec![0usize; n];
    for _ in 0..iters.max(1) {
        control.check()?;
        let ct = transpose(&centres, k, d);
        let csq: Vec<f64> = centres.chunks_exact(d).map(|c| dot(c, c)).collect();
        labels.par_chunks_mut(BLOCK).enumerate().try_for_each_init(
            || vec![0.0; k],
            |g, (blk, lab)| {
                control.check()?;
                for (q, l) in lab.iter_mut().enumerate() {
                    let i = blk * BLOCK + q;
                    g.iter_mut().for_each(|v| *v = 0.0);
                    data.row(i).dots_transposed(&ct, g);
                    let mut best = (f64::INFINITY, 0);
                    for (c, (&xc, &cc)) in g.iter().zip(&csq).enumerate() {
                        let dist = sq[i] + cc - 2.0 * xc;
                        if dist < best.0 {
                            best = (dist, c);
                        }
                    }
                    *l = best.1;
                }
                Ok::<(), Halt>(())
            },
        )?;
        let mut counts = vec![0usize; k];
        centres.iter_mut().for_each(|v| *v = 0.0);
        let poll = poll_mask(d);
        for (i, &l) in labels.iter().enumerate() {
            if i & poll == 0 {
                control.check()?;
            }
            counts[l] += 1;
            data.row(i).axpy(1.0, &mut centres[l * d..(l + 1) * d]);
        }
        for c in 0..k {
            let cen = &mut centres[c * d..(c + 1) * d];
            if counts[c] == 0 {
                let r = rand::RngExt::random_range(&mut rng, 0..n);
                data.row(r).axpy(1.0, cen);
            } else {
                let inv = 1.0 / counts[c] as f64;
                cen.iter_mut().for_each(|v| *v *= inv);
            }
        }
    }
    Ok((centres, labels))
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
    control: Control<'_>,
) -> Result<(Vec<f64>, usize), SvmError> {
    dual_cd_full(features, dim, targets, options, control).map(|(w, _, it)| (w, it))
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
    control: Control<'_>,
) -> Result<(Vec<f64>, Vec<f64>, usize), SvmError> {
    let mut dcd = Dcd::new(features, dim, targets, options)?;
    while !dcd.done && dcd.iters < options.max_iter {
        dcd.pass(control)?;
    }
    Ok((dcd.w, dcd.alpha, dcd.iters))
}

/// One binary dual coordinate descent, one outer iteration (pass) at a time.
struct Dcd<'a> {
    features: &'a [f64],
    dim: usize,
    targets: &'a [f64],
    c: f64,
    tol: f64,
    q: Vec<f64>,
    alpha: Vec<f64>,
    w: Vec<f64>,
    rng: Pcg64,
    iters: usize,
    /// Shrinking (Hsieh et al. 2008, as in LIBLINEAR): variables stuck at a bound with a
    /// gradient pointing outside the box leave the active set until the end check.
    active: Vec<usize>,
    n_usable: usize,
    pg_max_old: f64,
    pg_min_old: f64,
    /// Converged on the whole problem.
    done: bool,
}

impl<'a> Dcd<'a> {
    fn new(
        features: &'a [f64],
        dim: usize,
        targets: &'a [f64],
        options: DcdOptions,
    ) -> Result<Self, SvmError> {
        check_positive(options.c, "C")?;
        let n = targets.len();
        if dim == 0 || features.len() != n * dim {
            return Err(shape("features", "must hold n * dim values"));
        }
        let q: Vec<f64> = features
            .chunks_exact(dim)
            .map(|r| r.iter().map(|a| a * a).sum())
            .collect();
        let active: Vec<usize> = (0..n).filter(|&i| q[i] > 0.0).collect();
        Ok(Self {
            features,
            dim,
            targets,
            c: options.c,
            tol: options.tol,
            alpha: vec![0.0; n],
            w: vec![0.0; dim],
            rng: Pcg64::seed_from_u64(options.seed),
            iters: 0,
            n_usable: active.len(),
            active,
            q,
            pg_max_old: f64::INFINITY,
            pg_min_old: f64::NEG_INFINITY,
            done: false,
        })
    }

    /// One outer iteration; sets `done` on convergence.
    fn pass(&mut self, control: Control<'_>) -> Result<(), SvmError> {
        control.check()?;
        #[cfg(target_arch = "x86_64")]
        if crate::data::has_avx2() {
            // SAFETY: the CPU supports AVX2 (checked at run time just above).
            return unsafe { self.pass_avx2(control) };
        }
        self.pass_generic(control)
    }

    /// [`Dcd::pass`] compiled for 256-bit vectors (same operations, same results).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn pass_avx2(&mut self, control: Control<'_>) -> Result<(), SvmError> {
        self.pass_generic(control)
    }

    #[inline(always)]
    fn pass_generic(&mut self, control: Control<'_>) -> Result<(), SvmError> {
        let (dim, c) = (self.dim, self.c);
        let Self {
            features,
            targets,
            q,
            alpha,
            w,
            rng,
            active,
            ..
        } = self;
        self.iters += 1;
        for k in (1..active.len()).rev() {
            let j = rand::RngExt::random_range(rng, 0..=k);
            active.swap(k, j);
        }
        let (mut pg_max, mut pg_min) = (f64::NEG_INFINITY, f64::INFINITY);
        let mut s = 0;
        let mut steps = 0usize;
        let poll = poll_mask(dim);
        while s < active.len() {
            steps += 1;
            if steps & poll == 0 {
                control.check()?;
            }
            let i = active[s];
            let xi = &features[i * dim..(i + 1) * dim];
            let yi = targets[i];
            let g = yi * dot(xi, w) - 1.0;
            let pg = if alpha[i] == 0.0 {
                if g > self.pg_max_old {
                    active.swap_remove(s);
                    continue;
                }
                g.min(0.0)
            } else if alpha[i] == c {
                if g < self.pg_min_old {
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
        if pg_max - pg_min <= self.tol {
            if active.len() == self.n_usable {
                self.done = true;
                return Ok(());
            }
            // Converged on the shrunk problem: check every variable once more.
            *active = (0..targets.len()).filter(|&i| q[i] > 0.0).collect();
            self.pg_max_old = f64::INFINITY;
            self.pg_min_old = f64::NEG_INFINITY;
            return Ok(());
        }
        self.pg_max_old = if pg_max > 0.0 { pg_max } else { f64::INFINITY };
        self.pg_min_old = if pg_min < 0.0 {
            pg_min
        } else {
            f64::NEG_INFINITY
        };
        Ok(())
    }

    /// The dual objective `0.5 |w|^2 - sum(alpha)` (minimised), O(n + dim).
    fn dual_objective(&self) -> f64 {
        0.5 * dot(&self.w, &self.w) - self.alpha.iter().sum::<f64>()
    }

    /// Examples with a positive dual variable (the support vectors).
    fn n_support(&self) -> usize {
        self.alpha.iter().filter(|&&a| a > 0.0).count()
    }
}

/// What [`dual_cd_one_vs_rest`] and [`llsvm_fit`] trained.
#[derive(Debug, Clone, PartialEq)]
pub struct OneVsRest {
    /// Weights, row-major `(classes.len(), dim)`: row k separates `classes[k]` from the rest.
    pub coef: Vec<f64>,
    /// Outer iterations (passes) of every model.
    pub n_iter: Vec<usize>,
    /// Passes reported (the largest of `n_iter`) and whether the hook stopped the fit.
    pub outcome: FitOutcome,
}

/// One [`dual_cd`] model per class of `classes` (class `classes[k]` is +1, the rest -1), the
/// models in parallel, one pass of each at a time.
///
/// After pass `p` (from 1) of the models still running, reports
/// `control.report(p, objective, &n_support)`: the sum of the models' dual objectives
/// `0.5 |w|^2 - sum(alpha)` (what dual coordinate descent minimises; O(n) to compute) and the
/// number of support vectors (positive dual variables) summed over the models. The models are
/// the same, bit for bit, as from [`dual_cd`] one at a time.
///
/// # Errors
/// As [`dual_cd`]; a shape error unless there is one label per row of `features`. A hook that
/// asks to stop is not an error: the weights of the passes made are returned.
pub fn dual_cd_one_vs_rest(
    features: &[f64],
    dim: usize,
    labels: &[usize],
    classes: &[usize],
    options: DcdOptions,
    control: Control<'_, usize>,
) -> Result<OneVsRest, SvmError> {
    if dim == 0 || features.len() != labels.len() * dim {
        return Err(shape("y", "one label per row of `features`"));
    }
    let targets: Vec<Vec<f64>> = classes
        .iter()
        .map(|&cl| {
            labels
                .iter()
                .map(|&l| if l == cl { 1.0 } else { -1.0 })
                .collect()
        })
        .collect();
    let mut models = targets
        .iter()
        .map(|t| Dcd::new(features, dim, t, options))
        .collect::<Result<Vec<_>, _>>()?;
    let inner = Control::new(control.cancel_flag());
    let mut outcome = FitOutcome::ran(0);
    for pass in 1..=options.max_iter {
        if models.iter().all(|m| m.done) {
            break;
        }
        models
            .par_iter_mut()
            .filter(|m| !m.done)
            .try_for_each(|m| m.pass(inner))?;
        outcome = FitOutcome::ran(pass);
        let objective = || models.iter().map(Dcd::dual_objective).sum();
        let n_support: usize = models.iter().map(Dcd::n_support).sum();
        if let Some(stopped) = FitOutcome::after(pass, control.report(pass, objective, &n_support))?
        {
            outcome = stopped;
            break;
        }
    }
    Ok(OneVsRest {
        coef: models.iter().flat_map(|m| m.w.iter().copied()).collect(),
        n_iter: models.iter().map(|m| m.iters).collect(),
        outcome,
    })
}

/// Options of [`llsvm_fit`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LlsvmParams {
    /// The kernel of the Nystrom map.
    pub kernel: Kernel,
    /// The linear SVM on the mapped examples.
    pub dcd: DcdOptions,
}

/// A trained LLSVM: the Nystrom map and the one-vs-rest linear models on it.
#[derive(Debug, Clone, PartialEq)]
pub struct LlsvmFit {
    /// The map `M`, row-major `(rank, n_landmarks)` (see [`Nystrom::map_matrix`]).
    pub map_matrix: Vec<f64>,
    /// Rank of the map (columns of `coef`).
    pub rank: usize,
    /// The linear models on `phi(x) = M g(x)`, their passes and how the fit ended.
    pub models: OneVsRest,
}

/// LLSVM training: the Nystrom map over `landmarks` (row-major `(B, data.dim())`), every
/// example mapped, then [`dual_cd_one_vs_rest`] on the mapped examples (reports as there).
///
/// # Errors
/// Shape errors (landmarks' width, one label per example), a bad kernel or `C`,
/// [`SvmError::Cancelled`].
///
/// # Example
///
/// ```
/// use vastml_core::Control;
/// use vastml_svm::{DcdOptions, Examples, Kernel, LlsvmModel, LlsvmParams, llsvm_decision, llsvm_fit};
///
/// // A disc inside a square: not linear in x, linear in the Nystrom features.
/// let xs: Vec<f64> = (0..400).flat_map(|i| [(i % 20) as f64 / 10.0 - 1.0, (i / 20) as f64 / 10.0 - 1.0]).collect();
/// let y: Vec<usize> = xs.chunks(2).map(|p| usize::from(p[0] * p[0] + p[1] * p[1] < 0.5)).collect();
/// let data = Examples::dense(&xs, 2)?;
/// let landmarks: Vec<f64> = xs.chunks(2).step_by(13).flatten().copied().collect();
/// let dcd = DcdOptions { c: 100.0, max_iter: 50, tol: 1e-3, seed: 0 };
/// let params = LlsvmParams { kernel: Kernel::Gaussian { gamma: 2.0 }, dcd };
/// let fit = llsvm_fit(&data, &y, &[1], &landmarks, &params, Control::none())?;
/// let model = LlsvmModel { kernel: params.kernel, landmarks: &landmarks, map_matrix: &fit.map_matrix, coef: &fit.models.coef, rank: fit.rank };
/// let scores = llsvm_decision(&data, &model, Control::none())?;
/// let errors = scores.iter().zip(&y).filter(|&(s, &c)| (*s > 0.0) != (c == 1)).count();
/// assert!(errors < 20, "{errors} errors");
/// # Ok::<(), vastml_svm::SvmError>(())
/// ```
pub fn llsvm_fit(
    data: &Examples<'_>,
    labels: &[usize],
    classes: &[usize],
    landmarks: &[f64],
    params: &LlsvmParams,
    control: Control<'_, usize>,
) -> Result<LlsvmFit, SvmError> {
    if labels.len() != data.len() {
        return Err(shape("y", "one label per example"));
    }
    let ny = Nystrom::new_with(
        params.kernel,
        landmarks,
        data.dim(),
        Control::new(control.cancel_flag()),
    )?;
    let features = ny.transform_with(data, Control::new(control.cancel_flag()))?;
    let rank = ny.rank();
    let models = dual_cd_one_vs_rest(&features, rank, labels, classes, params.dcd, control)?;
    Ok(LlsvmFit {
        map_matrix: ny.map_matrix().to_vec(),
        rank,
        models,
    })
}

/// A trained LLSVM as borrowed arrays, for [`llsvm_decision`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LlsvmModel<'a> {
    /// The kernel of the Nystrom map.
    pub kernel: Kernel,
    /// Landmarks, row-major `(B, dim)`.
    pub landmarks: &'a [f64],
    /// The map `M`, row-major `(rank, B)`.
    pub map_matrix: &'a [f64],
    /// One-vs-rest weights, row-major `(k, rank)`.
    pub coef: &'a [f64],
    /// The rank of the map.
    pub rank: usize,
}

/// LLSVM scores `coef . (M g(x))`, row-major `(n, k)`: the map is folded into the coefficients
/// once (`(coef M) g(x)`), so a row costs B kernel values and k dot products of length B.
///
/// # Errors
/// Shape errors when the arrays disagree, [`SvmError::Cancelled`].
pub fn llsvm_decision(
    data: &Examples<'_>,
    model: &LlsvmModel<'_>,
    control: Control<'_>,
) -> Result<Vec<f64>, SvmError> {
    let dim = data.dim();
    let b = model.landmarks.len().checked_div(dim).unwrap_or(0);
    let rank = model.rank;
    if b == 0 || model.map_matrix.len() != rank * b {
        return Err(shape(
            "map_matrix",
            "must have shape (coef.shape[1], n_landmarks)",
        ));
    }
    if rank == 0 || model.coef.len() % rank != 0 {
        return Err(shape("coef", "must have `rank` columns"));
    }
    let folded = fold_coefficients(model.map_matrix, model.coef, rank, b);
    Nystrom::from_parts(model.kernel, model.landmarks, dim, &folded)?.transform_with(data, control)
}

/// `coef M`, row-major `(k, B)`, for `coef` `(k, rank)` and `M` `(rank, B)`.
fn fold_coefficients(map: &[f64], coef: &[f64], rank: usize, b: usize) -> Vec<f64> {
    let k = coef.len() / rank;
    let mut folded = vec![0.0; k * b];
    for (j, row) in folded.chunks_exact_mut(b).enumerate() {
        for (r, &c) in coef[j * rank..(j + 1) * rank].iter().enumerate() {
            row.iter_mut()
                .zip(&map[r * b..(r + 1) * b])
                .for_each(|(o, m)| *o += c * m);
        }
    }
    folded
}

/// k-means with k-means++ seeding ([`vastml_spatial::kmeans`], or
/// [`vastml_spatial::kmeans_csr`] for CSR examples, never densified), polling `control`'s
/// cancel flag before each seeding centre and each Lloyd iteration.
///
/// # Errors
/// The parameter errors of [`vastml_spatial::kmeans`] (`k` outside `1..=n`, ...);
/// [`SvmError::Cancelled`] when the flag is raised.
pub fn kmeans(
    data: &Examples<'_>,
    k: usize,
    max_iter: usize,
    tol: f64,
    seed: u64,
    control: Control<'_>,
) -> Result<vastml_spatial::KMeans, SvmError> {
    let cancel = control.cancel_flag();
    Ok(match *data {
        Examples::Dense(p) => {
            vastml_spatial::kmeans_with(p.as_slice(), p.dim(), k, max_iter, tol, seed, cancel)?
        }
        Examples::Csr(m) => vastml_spatial::kmeans_csr_with(m, k, max_iter, tol, seed, cancel)?,
    })
}
