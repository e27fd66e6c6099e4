//! AROW: adaptive regularisation of weight vectors (Crammer, Kulesza & Dredze 2009; thesis
//! sec. 6.2, eqs. 6.4-6.6), binary, with full or diagonal covariance.
//!
//! The model is a Gaussian `N(mu, Sigma)` over weight vectors, from `mu = 0`, `Sigma = I`.
//! On example `(x, y)`, `y in {-1, +1}`, with margin `m = y mu.x` and confidence `v = x' Sigma x`:
//! `beta = 1 / (v + r)`, `alpha = beta max(0, 1 - m)`, `mu += alpha y Sigma x`,
//! `Sigma -= beta (Sigma x)(Sigma x)'`. By default it updates whenever `m < 1` (the hinge is
//! positive), as in the AROW paper; `UpdateOn::Mistake` updates only when `m <= 0`.
//!
//! The diagonal variant keeps the diagonal of the exact update: `s_j -= beta s_j^2 x_j^2`
//! (with `v = sum_j s_j x_j^2`). A bias is an extra constant feature `bias` (0 disables it).

use rand::SeedableRng;
use rand_pcg::Pcg64;
use rayon::prelude::*;

use crate::amm::{FitOutcome, Schedule, permutation, poll_mask};
use crate::data::{Examples, Gathered, Row, Rows, check_positive};
use crate::error::{SvmError, invalid, parse_choice, shape};
use vastml_core::Control;

/// How many examples ahead a full-covariance epoch prefetches (an update takes about a
/// microsecond, a miss to memory a tenth of that; a few skipped examples in a row must not
/// outrun it).
const PREFETCH_AHEAD: usize = 4;

/// When AROW updates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateOn {
    /// Whenever the margin `y mu.x` is below 1 (the AROW paper; default).
    Margin,
    /// Only on mistakes, `y mu.x <= 0` (the thesis's wording).
    Mistake,
}

impl std::str::FromStr for UpdateOn {
    type Err = SvmError;
    /// `"margin"` or `"mistake"`.
    fn from_str(s: &str) -> Result<Self, SvmError> {
        parse_choice(
            s,
            "update_on",
            &[("margin", UpdateOn::Margin), ("mistake", UpdateOn::Mistake)],
        )
    }
}

/// One binary AROW model.
#[derive(Debug, Clone, PartialEq)]
pub struct Arow {
    dim: usize,
    /// `r = 1 / (2 lambda_1)`.
    r: f64,
    bias: f64,
    update_on: UpdateOn,
    /// Mean, `dim + 1` values (bias last).
    mean: Vec<f64>,
    /// Full covariance `(dim + 1)^2` row-major, or its diagonal (`dim + 1` values).
    cov: Vec<f64>,
    diagonal: bool,
    sx: Vec<f64>,
    /// Scratch: the next example's `Sigma x` while the current update runs (see `epoch`).
    sx_next: Vec<f64>,
}

/// The parameters of [`Arow::stack_from_parts`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArowParams {
    /// `r = 1 / (2 lambda_1) > 0`, added to the example's variance in every step's
    /// `beta = 1 / (x' Sigma x + r)`: it damps the updates.
    pub update_damping: f64,
    /// Value of the constant bias feature (0: none).
    pub bias: f64,
    /// When to update.
    pub update_on: UpdateOn,
    /// Diagonal covariance (else full).
    pub diagonal: bool,
}

impl Arow {
    /// A fresh model: `mu = 0`, `Sigma = I`.
    ///
    /// # Errors
    /// [`SvmError::InvalidParameter`] for `dim == 0`, `r <= 0` or a non-finite bias.
    pub fn new(
        dim: usize,
        r: f64,
        bias: f64,
        diagonal: bool,
        update_on: UpdateOn,
    ) -> Result<Self, SvmError> {
        let w = dim + 1;
        let cov = if diagonal {
            vec![1.0; w]
        } else {
            let mut c = vec![0.0; w * w];
            (0..w).for_each(|i| c[i * w + i] = 1.0);
            c
        };
        Self::from_parts(dim, r, bias, update_on, vec![0.0; w], cov, diagonal)
    }

    /// A model from its mean (`dim + 1` values, bias last) and covariance (`(dim+1)^2`
    /// row-major when full, `dim + 1` when diagonal).
    ///
    /// # Errors
    /// Parameter and shape errors; [`SvmError::NonFinite`] for non-finite parts.
    pub fn from_parts(
        dim: usize,
        r: f64,
        bias: f64,
        update_on: UpdateOn,
        mean: Vec<f64>,
        cov: Vec<f64>,
        diagonal: bool,
    ) -> Result<Self, SvmError> {
        if dim == 0 {
            return Err(invalid("dim", "must be at least 1"));
        }
        check_positive(r, "r")?;
        if !bias.is_finite() {
            return Err(invalid("bias", "must be finite"));
        }
        let w = dim + 1;
        if mean.len() != w {
            return Err(shape(
                "mean",
                format!("expected {w} values, got {}", mean.len()),
            ));
        }
        let expect = if diagonal { w } else { w * w };
        if cov.len() != expect {
            return Err(shape(
                "covariance",
                format!("expected {expect} values, got {}", cov.len()),
            ));
        }
        if !mean.iter().chain(&cov).all(|v| v.is_finite()) {
            return Err(SvmError::NonFinite {
                name: "mean/covariance",
            });
        }
        Ok(Arow {
            dim,
            r,
            bias,
            update_on,
            mean,
            cov,
            diagonal,
            sx: vec![0.0; w],
            sx_next: vec![0.0; w],
        })
    }

    /// `k` models from their stacked means (row-major `(k, dim + 1)`) and covariances
    /// (`(k, dim + 1, dim + 1)`, or `(k, dim + 1)` when `params.diagonal`).
    ///
    /// # Errors
    /// Shape errors when the stacks do not hold `k` models; as [`Arow::from_parts`].
    pub fn stack_from_parts(
        dim: usize,
        params: ArowParams,
        k: usize,
        means: &[f64],
        covariances: &[f64],
    ) -> Result<Vec<Self>, SvmError> {
        let w = dim + 1;
        let per = if params.diagonal { w } else { w * w };
        if means.len() != k * w {
            return Err(shape("means", format!("must have shape ({k}, {w})")));
        }
        if covariances.len() != k * per {
            return Err(shape("covariances", "has the wrong shape"));
        }
        means
            .chunks_exact(w)
            .zip(covariances.chunks_exact(per))
            .map(|(m, c)| {
                let ArowParams {
                    update_damping,
                    bias,
                    update_on,
                    diagonal,
                } = params;
                Self::from_parts(
                    dim,
                    update_damping,
                    bias,
                    update_on,
                    m.to_vec(),
                    c.to_vec(),
                    diagonal,
                )
            })
            .collect()
    }

    /// The stacked means and covariances of `models` (the inverse of
    /// [`Arow::stack_from_parts`]).
    pub fn unstack(models: &[Self]) -> (Vec<f64>, Vec<f64>) {
        let means = models.iter().flat_map(|a| a.mean.iter().copied()).collect();
        let covs = models.iter().flat_map(|a| a.cov.iter().copied()).collect();
        (means, covs)
    }

    /// The mean `mu` (`dim + 1` values, bias last).
    pub fn mean(&self) -> &[f64] {
        &self.mean
    }

    /// The covariance: `(dim + 1)^2` row-major, or its diagonal.
    pub fn covariance(&self) -> &[f64] {
        &self.cov
    }

    /// Whether the covariance is diagonal.
    pub fn is_diagonal(&self) -> bool {
        self.diagonal
    }

    /// `mu . [x; bias]`.
    pub fn margin(&self, x: Row<'_>) -> f64 {
        x.dot(&self.mean[..self.dim]) + self.bias * self.mean[self.dim]
    }

    /// `[x; bias]' Sigma [x; bias]`, the variance of the margin.
    pub fn variance(&mut self, x: Row<'_>) -> f64 {
        if self.diagonal {
            let d = self.dim;
            let mut v = self.bias * self.bias * self.cov[d];
            match x {
                Row::Dense(xs) => xs.iter().zip(&self.cov).for_each(|(a, s)| v += s * a * a),
                Row::Sparse(idx, val) => idx
                    .iter()
                    .zip(val)
                    .for_each(|(&j, a)| v += self.cov[j as usize] * a * a),
            }
            v
        } else {
            self.sigma_x(x);
            let d = self.dim;
            x.dot(&self.sx[..d]) + self.bias * self.sx[d]
        }
    }

    /// `self.sx = Sigma [x; bias]` (full covariance; Sigma symmetric, so rows = columns).
    fn sigma_x(&mut self, x: Row<'_>) {
        kernels::sigma_x(&self.cov, self.dim + 1, x, self.bias, &mut self.sx);
    }

    /// Whether margin `m = y mu.x` calls for an update.
    #[inline]
    fn goes(&self, m: f64) -> bool {
        match self.update_on {
            UpdateOn::Margin => m < 1.0,
            UpdateOn::Mistake => m <= 0.0,
        }
    }

    /// One AROW step on `(x, y)`, `y` = +1 or -1. Returns whether it updated.
    pub fn update(&mut self, x: Row<'_>, y: f64) -> bool {
        let m = y * self.margin(x);
        if !self.goes(m) {
            return false;
        }
        let d = self.dim;
        let v = self.variance(x);
        let beta = 1.0 / (v + self.r);
        let alpha = beta * (1.0 - m).max(0.0);
        if self.diagonal {
            // Sigma x is s_j x_j; update mean with the old s, then shrink s.
            let bias = self.bias;
            let mut upd = |j: usize, xj: f64| {
                let s = self.cov[j];
                self.mean[j] += alpha * y * s * xj;
                self.cov[j] = s - beta * s * s * xj * xj;
            };
            match x {
                Row::Dense(xs) => xs.iter().enumerate().for_each(|(j, &a)| upd(j, a)),
                Row::Sparse(idx, val) => {
                    idx.iter().zip(val).for_each(|(&j, &a)| upd(j as usize, a))
                }
            }
            upd(d, bias);
        } else {
            // variance() left Sigma x in self.sx.
            for (m, s) in self.mean.iter_mut().zip(&self.sx) {
                *m += alpha * y * s;
            }
            kernels::rank_one(&mut self.cov, d + 1, &self.sx, beta, None);
        }
        true
    }

    /// One pass in `order` with full covariance: the same steps as [`Arow::update`] on every
    /// example (same bits), arranged so `Sigma` is read once per update instead of twice.
    ///
    /// After the mean update of example k, the margin of example k+1 is already final (it
    /// depends on the mean only), so when k+1 will update too, its `Sigma_new x_{k+1}` is
    /// computed row by row inside the rank-one update of k. Rows a few examples ahead are
    /// prefetched, which hides the cache miss of a random-order read.
    fn epoch_full<R: Rows>(
        &mut self,
        data: &R,
        targets: &[f64],
        order: &[usize],
        control: Control<'_>,
    ) -> Result<usize, SvmError> {
        let d = self.dim;
        let w = d + 1;
        // A full-covariance update costs O(w^2): poll about every 4 million multiply-adds.
        let poll = poll_mask(w * w);
        let mut n_updates = 0;
        // Margin of order[k] under the current mean, and whether self.sx = Sigma x of it.
        let mut next_margin: Option<f64> = None;
        let mut have_sx = false;
        for (k, &i) in order.iter().enumerate() {
            if k & poll == 0 {
                control.check()?;
            }
            if let Some(&ahead) = order.get(k + PREFETCH_AHEAD) {
                data.row(ahead).prefetch(2048);
            }
            let (x, y) = (data.row(i), targets[i]);
            let m = match next_margin.take() {
                Some(m) => m,
                None => y * self.margin(x),
            };
            if !self.goes(m) {
                have_sx = false;
                continue;
            }
            if !have_sx {
                self.sigma_x(x);
            }
            let v = x.dot(&self.sx[..d]) + self.bias * self.sx[d];
            let beta = 1.0 / (v + self.r);
            let alpha = beta * (1.0 - m).max(0.0);
            for (mu, s) in self.mean.iter_mut().zip(&self.sx) {
                *mu += alpha * y * s;
            }
            n_updates += 1;
            have_sx = false;
            let mut next = None;
            if let Some(&j) = order.get(k + 1) {
                let x2 = data.row(j);
                let m2 = targets[j] * self.margin(x2);
                next_margin = Some(m2);
                if self.goes(m2) {
                    next = Some((x2, self.bias, &mut self.sx_next[..]));
                    have_sx = true;
                }
            }
            kernels::rank_one(&mut self.cov, w, &self.sx, beta, next);
            if have_sx {
                std::mem::swap(&mut self.sx, &mut self.sx_next);
            }
        }
        Ok(n_updates)
    }

    /// One pass over the examples; `targets[i]` is +1 or -1. Returns the number of updates.
    ///
    /// # Errors
    /// Shape errors; [`SvmError::Cancelled`] when `cancel` is raised.
    pub fn epoch(
        &mut self,
        data: &Examples<'_>,
        targets: &[f64],
        order: &[usize],
        control: Control<'_>,
    ) -> Result<usize, SvmError> {
        if data.dim() != self.dim {
            return Err(shape(
                "X",
                format!("{} features, the model has {}", data.dim(), self.dim),
            ));
        }
        if targets.len() != data.len() {
            return Err(shape("y", "one target per example"));
        }
        self.pass(data, targets, order, control)
    }

    /// [`Arow::epoch`] after its checks, over the examples or a gathered copy of them.
    fn pass<R: Rows>(
        &mut self,
        data: &R,
        targets: &[f64],
        order: &[usize],
        control: Control<'_>,
    ) -> Result<usize, SvmError> {
        if !self.diagonal {
            return self.epoch_full(data, targets, order, control);
        }
        let mut n = 0;
        let poll = poll_mask(self.dim + 1);
        for (k, &i) in order.iter().enumerate() {
            if k & poll == 0 {
                control.check()?;
            }
            n += usize::from(self.update(data.row(i), targets[i]));
        }
        Ok(n)
    }
}

/// How often a single-pass learner reports: this many chunks of examples per pass.
pub const CHUNKS_PER_PASS: usize = 100;

/// What [`arow_one_vs_rest`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArowOutcome {
    /// Updates made by every model.
    pub n_updates: Vec<usize>,
    /// Chunks run (`n_iter`) and whether the hook stopped the fit.
    pub outcome: FitOutcome,
}

/// Trains several binary AROW models (one-vs-rest columns) over the same examples in parallel,
/// one pass per seed of `schedule` (`schedule.online` is ignored).
///
/// `labels[i]` is the class of example i; model k treats class `classes[k]` as +1 and the rest
/// as -1. All models see the same (seeded) order. AROW is a single-pass learner, so every pass
/// is cut into [`CHUNKS_PER_PASS`] chunks of consecutive examples (in the pass's order) and
/// chunk `c` (counted from 1 over all passes) is reported as `control.report(c, NaN,
/// &n_updates)`: no objective (AROW minimises none over the data), the state is the number of
/// updates made so far by all models. The chunks do not change the arithmetic: the models are
/// the same, bit for bit, as after whole passes.
///
/// # Errors
/// Shape errors; [`SvmError::Cancelled`]. A hook that asks to stop is not an error: the models
/// hold the examples seen (see [`FitOutcome`]).
pub fn arow_one_vs_rest(
    models: &mut [Arow],
    classes: &[usize],
    data: &Examples<'_>,
    labels: &[usize],
    schedule: &Schedule<'_>,
    control: Control<'_, usize>,
) -> Result<ArowOutcome, SvmError> {
    if models.len() != classes.len() {
        return Err(shape("classes", "one positive class per model"));
    }
    if labels.len() != data.len() {
        return Err(shape("y", "one label per example"));
    }
    if let Some(m) = models.iter().find(|m| m.dim != data.dim()) {
        let features = format!("{} features, the model has {}", data.dim(), m.dim);
        return Err(shape("X", features));
    }
    let mut done = ArowOutcome {
        n_updates: vec![0; models.len()],
        outcome: FitOutcome::ran(0),
    };
    for &seed in schedule.seeds {
        let mut rng = Pcg64::seed_from_u64(seed);
        let order = permutation(data.len(), schedule.shuffle, &mut rng);
        // One gathered copy in the shuffled order, shared by all models (streams, no cache
        // miss per row); then every model walks it in sequence. Only for diagonal models: a
        // full-covariance step costs O(d^2), so prefetching a few rows ahead hides the random
        // reads, and copying the data would cost more (time, memory, and memory bandwidth
        // that parallel workers on one machine share) than it saves.
        let gathered = if schedule.shuffle && models.iter().any(|m| m.diagonal) {
            Gathered::new(data, &order)
        } else {
            None
        };
        let pass = match &gathered {
            Some(g) => {
                let labels: Vec<usize> = order.iter().map(|&i| labels[i]).collect();
                let in_order: Vec<usize> = (0..order.len()).collect();
                let examples = (g, &labels[..], &in_order[..]);
                one_vs_rest_pass(models, classes, examples, &mut done, &control)
            }
            None => one_vs_rest_pass(models, classes, (data, labels, &order), &mut done, &control),
        };
        if pass? {
            done.outcome.stopped = true;
            return Ok(done);
        }
    }
    Ok(done)
}

/// One pass of [`arow_one_vs_rest`] over `(rows, labels, order)`, in [`CHUNKS_PER_PASS`]
/// reported chunks, counted in `done`. Returns whether the hook asked to stop.
fn one_vs_rest_pass<R: Rows>(
    models: &mut [Arow],
    classes: &[usize],
    (rows, labels, order): (&R, &[usize], &[usize]),
    done: &mut ArowOutcome,
    control: &Control<'_, usize>,
) -> Result<bool, SvmError> {
    let inner = Control::new(control.cancel_flag());
    let targets: Vec<Vec<f64>> = classes
        .iter()
        .map(|&c| {
            labels
                .iter()
                .map(|&l| if l == c { 1.0 } else { -1.0 })
                .collect()
        })
        .collect();
    let size = order.len().div_ceil(CHUNKS_PER_PASS).max(1);
    for part in order.chunks(size) {
        let made: Vec<usize> = models
            .par_iter_mut()
            .zip(targets.par_iter())
            .map(|(m, t)| m.pass(rows, t, part, inner))
            .collect::<Result<_, _>>()?;
        done.n_updates
            .iter_mut()
            .zip(&made)
            .for_each(|(a, b)| *a += b);
        done.outcome.n_iter += 1;
        let total: usize = done.n_updates.iter().sum();
        let report = control.report(done.outcome.n_iter, || f64::NAN, &total);
        if FitOutcome::after(done.outcome.n_iter, report)?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Examples per block of [`arow_decision`]: the cancel flag is polled once per block.
const DECISION_BLOCK: usize = 1024;

/// Margins `mu_k . x` of several models, row-major `(n, models.len())`, parallel over blocks
/// of examples; `control`'s cancel flag is polled before each block of 1,024 examples.
///
/// # Errors
/// A shape error if a model's dimension differs from the data's, [`SvmError::Cancelled`]
/// when the cancel flag is raised.
pub fn arow_decision(
    models: &[Arow],
    data: &Examples<'_>,
    control: Control<'_>,
) -> Result<Vec<f64>, SvmError> {
    if models.iter().any(|m| m.dim != data.dim()) {
        return Err(shape("X", "feature count differs from the model's"));
    }
    let k = models.len().max(1);
    let mut out = vec![0.0; data.len() * models.len()];
    out.par_chunks_mut(k * DECISION_BLOCK)
        .enumerate()
        .try_for_each(|(b, block)| {
            control.check()?;
            for (j, o) in block.chunks_mut(k).enumerate() {
                let x = data.row(b * DECISION_BLOCK + j);
                for (v, m) in o.iter_mut().zip(models) {
                    *v = m.margin(x);
                }
            }
            Ok::<(), SvmError>(())
        })?;
    Ok(out)
}

/// Full-covariance kernels on `Sigma` (`w x w` row-major, `w = d + 1`, bias last).
///
/// Per element they do exactly the arithmetic of the plain loops (the dot products keep
/// [`dot`]'s four interleaved accumulators and its final reduction), so the AVX2 versions give
/// the same bits as the generic ones. They are faster because four rows share each load of
/// `x` (four independent addition chains instead of one latency-bound chain), and because the
/// rank-one update and the next example's `Sigma x` are one pass over `Sigma` instead of two.
mod kernels {
    use crate::data::{Row, dot};

    /// `out[i] = x . row_i[..d] + bias row_i[d]` for every row `i` of `cov`.
    pub(super) fn sigma_x(cov: &[f64], w: usize, x: Row<'_>, bias: f64, out: &mut [f64]) {
        #[cfg(target_arch = "x86_64")]
        if let Row::Dense(xs) = x
            && crate::data::has_avx2()
        {
            // SAFETY: the CPU supports AVX2 (checked at run time just above).
            unsafe { avx2::sigma_x(cov, w, xs, bias, out) };
            return;
        }
        for (i, o) in out.iter_mut().enumerate() {
            *o = row_dot(&cov[i * w..(i + 1) * w], x, bias);
        }
    }

    /// `x . row[..d] + bias row[d]`, the plain loop's `(Sigma x)_i`.
    #[inline(always)]
    fn row_dot(row: &[f64], x: Row<'_>, bias: f64) -> f64 {
        let d = row.len() - 1;
        x.dot(&row[..d]) + bias * row[d]
    }

    /// `row -= si s` unless `si == 0` (the plain loop skips such rows, keeping their bits).
    #[inline(always)]
    fn row_update(row: &mut [f64], s: &[f64], si: f64) {
        if si != 0.0 {
            row.iter_mut().zip(s).for_each(|(c, sj)| *c -= si * sj);
        }
    }

    /// The AROW rank-one update `Sigma -= beta s s'` (`s = Sigma x`) row by row,
    /// `row_i -= (s_i beta) s`; when `next = (x', bias, out)` is given, also
    /// `out = Sigma_new [x'; bias]`, each row dotted right after its update.
    pub(super) fn rank_one(
        cov: &mut [f64],
        w: usize,
        s: &[f64],
        beta: f64,
        next: Option<(Row<'_>, f64, &mut [f64])>,
    ) {
        #[cfg(target_arch = "x86_64")]
        if crate::data::has_avx2() {
            match next {
                // SAFETY: the CPU supports AVX2 (checked at run time just above).
                Some((Row::Dense(xs), bias, out)) => unsafe {
                    avx2::rank_one_sigma_x(cov, w, s, beta, xs, bias, out)
                },
                // SAFETY: as above.
                other => unsafe { avx2::rank_one_plain(cov, w, s, beta, other) },
            }
            return;
        }
        rank_one_generic(cov, w, s, beta, next, 0);
    }

    /// [`rank_one`] for rows `from..w`, one row at a time.
    #[inline(always)]
    fn rank_one_generic(
        cov: &mut [f64],
        w: usize,
        s: &[f64],
        beta: f64,
        mut next: Option<(Row<'_>, f64, &mut [f64])>,
        from: usize,
    ) {
        for i in from..w {
            let row = &mut cov[i * w..(i + 1) * w];
            row_update(row, s, s[i] * beta);
            if let Some((x, bias, out)) = next.as_mut() {
                out[i] = row_dot(row, *x, *bias);
            }
        }
    }

    /// `dot`'s final reduction: lanes `(a0 + a1) + (a2 + a3)` plus the sequential tail.
    #[inline(always)]
    fn finish(acc: [f64; 4], x: &[f64], row: &[f64]) -> f64 {
        let tail: f64 = x.iter().zip(row).map(|(a, b)| a * b).sum();
        (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
    }

    #[cfg(target_arch = "x86_64")]
    mod avx2 {
        use std::arch::x86_64::*;

        use super::{Row, dot, finish, rank_one_generic, row_dot, row_update};

        #[inline(always)]
        fn lanes(v: __m256d) -> [f64; 4] {
            let mut a = [0.0; 4];
            // SAFETY: `a` holds four f64 (unaligned store).
            unsafe { _mm256_storeu_pd(a.as_mut_ptr(), v) };
            a
        }

        /// [`super::sigma_x`] for a dense `x`, four rows at a time.
        #[target_feature(enable = "avx2")]
        pub(super) unsafe fn sigma_x(cov: &[f64], w: usize, x: &[f64], bias: f64, out: &mut [f64]) {
            let d = w - 1;
            assert!(x.len() == d && cov.len() == w * w && out.len() == w);
            let nc = d / 4;
            let t = 4 * nc;
            let mut i = 0;
            while i + 4 <= w {
                let rows = [
                    &cov[i * w..(i + 1) * w],
                    &cov[(i + 1) * w..(i + 2) * w],
                    &cov[(i + 2) * w..(i + 3) * w],
                    &cov[(i + 3) * w..(i + 4) * w],
                ];
                let mut a = [_mm256_setzero_pd(); 4];
                for c in 0..nc {
                    // SAFETY: offsets 4c..4c+4 <= t <= d lie within x and every row (w > d).
                    let xv = unsafe { _mm256_loadu_pd(x.as_ptr().add(4 * c)) };
                    for r in 0..4 {
                        // SAFETY: as above.
                        let rv = unsafe { _mm256_loadu_pd(rows[r].as_ptr().add(4 * c)) };
                        a[r] = _mm256_add_pd(a[r], _mm256_mul_pd(rv, xv));
                    }
                }
                for r in 0..4 {
                    let row = rows[r];
                    out[i + r] = finish(lanes(a[r]), &x[t..], &row[t..d]) + bias * row[d];
                }
                i += 4;
            }
            for (k, o) in out.iter_mut().enumerate().skip(i) {
                let row = &cov[k * w..(k + 1) * w];
                *o = dot(x, &row[..d]) + bias * row[d];
            }
        }

        /// [`super::rank_one`] compiled for AVX2 (no next example, or a sparse one).
        #[target_feature(enable = "avx2")]
        pub(super) unsafe fn rank_one_plain(
            cov: &mut [f64],
            w: usize,
            s: &[f64],
            beta: f64,
            next: Option<(Row<'_>, f64, &mut [f64])>,
        ) {
            rank_one_generic(cov, w, s, beta, next, 0);
        }

        /// The rank-one update fused with the next dense example's `Sigma x`: four rows at a
        /// time, each value updated, stored and multiplied by `x` while in a register.
        #[target_feature(enable = "avx2")]
        pub(super) unsafe fn rank_one_sigma_x(
            cov: &mut [f64],
            w: usize,
            s: &[f64],
            beta: f64,
            x: &[f64],
            bias: f64,
            out: &mut [f64],
        ) {
            let d = w - 1;
            assert!(x.len() == d && cov.len() == w * w && out.len() == w && s.len() == w);
            let nc = d / 4;
            let t = 4 * nc;
            let mut i = 0;
            while i + 4 <= w {
                let si = [
                    s[i] * beta,
                    s[i + 1] * beta,
                    s[i + 2] * beta,
                    s[i + 3] * beta,
                ];
                let block = &mut cov[i * w..(i + 4) * w];
                if si.contains(&0.0) {
                    // Rows the plain loop skips: one at a time, exactly as it does.
                    for r in 0..4 {
                        let row = &mut block[r * w..(r + 1) * w];
                        row_update(row, s, si[r]);
                        out[i + r] = row_dot(row, Row::Dense(x), bias);
                    }
                    i += 4;
                    continue;
                }
                let sv4 = si.map(|v| _mm256_set1_pd(v));
                let p = block.as_mut_ptr();
                let mut a = [_mm256_setzero_pd(); 4];
                for c in 0..nc {
                    // SAFETY: offsets 4c..4c+4 <= t <= d lie within x and s (len w > d).
                    let (xv, sv) = unsafe {
                        (
                            _mm256_loadu_pd(x.as_ptr().add(4 * c)),
                            _mm256_loadu_pd(s.as_ptr().add(4 * c)),
                        )
                    };
                    for r in 0..4 {
                        // SAFETY: r w + 4c + 4 <= r w + d < 4w: within `block`, which no
                        // other reference touches during the loop.
                        let rv = unsafe {
                            let q = p.add(r * w + 4 * c);
                            let rv = _mm256_sub_pd(_mm256_loadu_pd(q), _mm256_mul_pd(sv4[r], sv));
                            _mm256_storeu_pd(q, rv);
                            rv
                        };
                        a[r] = _mm256_add_pd(a[r], _mm256_mul_pd(rv, xv));
                    }
                }
                for r in 0..4 {
                    let row = &mut block[r * w..(r + 1) * w];
                    row[t..]
                        .iter_mut()
                        .zip(&s[t..])
                        .for_each(|(c, sj)| *c -= si[r] * sj);
                    out[i + r] = finish(lanes(a[r]), &x[t..], &row[t..d]) + bias * row[d];
                }
                i += 4;
            }
            rank_one_generic(cov, w, s, beta, Some((Row::Dense(x), bias, out)), i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// The plain per-example AROW step (full covariance) as first written: one dot product
    /// per row of `Sigma`, then the rank-one update row by row. The oracle for the fused,
    /// vectorised epoch, which must reproduce it bit for bit.
    fn plain_step(
        mean: &mut [f64],
        cov: &mut [f64],
        x: Row<'_>,
        y: f64,
        r: f64,
        bias: f64,
        on: UpdateOn,
    ) -> bool {
        let w = mean.len();
        let d = w - 1;
        let m = y * (x.dot(&mean[..d]) + bias * mean[d]);
        let go = match on {
            UpdateOn::Margin => m < 1.0,
            UpdateOn::Mistake => m <= 0.0,
        };
        if !go {
            return false;
        }
        let sx: Vec<f64> = (0..w)
            .map(|i| {
                let row = &cov[i * w..(i + 1) * w];
                x.dot(&row[..d]) + bias * row[d]
            })
            .collect();
        let v = x.dot(&sx[..d]) + bias * sx[d];
        let beta = 1.0 / (v + r);
        let alpha = beta * (1.0 - m).max(0.0);
        for (mu, s) in mean.iter_mut().zip(&sx) {
            *mu += alpha * y * s;
        }
        for i in 0..w {
            let si = sx[i] * beta;
            if si == 0.0 {
                continue;
            }
            cov[i * w..(i + 1) * w]
                .iter_mut()
                .zip(&sx)
                .for_each(|(c, sj)| *c -= si * sj);
        }
        true
    }

    fn lcg(seed: u64) -> impl FnMut() -> f64 {
        let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15).wrapping_add(1);
        move || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        }
    }

    /// Dense values, CSR (indptr, indices, values) of the same rows, and labels.
    type Data = (Vec<f64>, Vec<i64>, Vec<i64>, Vec<f64>, Vec<f64>);

    /// Dense and CSR data with a few all-zero columns (their rows of `Sigma x` are 0, the
    /// skipped-row case) and labels from a noisy linear rule.
    fn data(n: usize, d: usize, seed: u64) -> Data {
        let mut u = lcg(seed);
        let mut x = vec![0.0; n * d];
        let (mut ip, mut ix, mut dv) = (vec![0i64], Vec::new(), Vec::new());
        let mut y = Vec::with_capacity(n);
        for i in 0..n {
            let mut s = 0.0;
            for j in 0..d {
                if j % 5 == 3 || u() < -0.3 {
                    continue;
                }
                let v = 4.0 * u();
                x[i * d + j] = v;
                ix.push(j as i64);
                dv.push(v);
                s += v * ((j % 3) as f64 - 1.0);
            }
            ip.push(ix.len() as i64);
            y.push(if s + u() > 0.0 { 1.0 } else { -1.0 });
        }
        (x, ip, ix, dv, y)
    }

    #[test]
    fn fused_epoch_reproduces_plain_steps_bit_for_bit() {
        let cancel = AtomicBool::new(false);
        for (d, n, seed) in [
            (1, 50, 1),
            (3, 200, 2),
            (4, 300, 3),
            (7, 300, 4),
            (8, 300, 5),
            (21, 400, 6),
            (100, 300, 7),
        ] {
            let (x, ip, ix, dv, y) = data(n, d, seed);
            let mut rng = Pcg64::seed_from_u64(seed);
            let order = permutation(n, true, &mut rng);
            let sets = [
                Examples::dense(&x, d).unwrap(),
                Examples::csr(&ip, &ix, &dv, d).unwrap(),
            ];
            for ex in sets {
                for (on, r, bias) in [
                    (UpdateOn::Margin, 1.0, 1.0),
                    (UpdateOn::Mistake, 0.1, 0.0),
                    (UpdateOn::Margin, 5.0, 0.5),
                ] {
                    let mut fast = Arow::new(d, r, bias, false, on).unwrap();
                    let w = d + 1;
                    let (mut mean, mut cov) = (fast.mean.clone(), fast.cov.clone());
                    let mut count = 0;
                    // two passes: the second starts from a non-identity Sigma
                    for _ in 0..2 {
                        let got = fast.epoch(&ex, &y, &order, Control::new(&cancel)).unwrap();
                        let want = order
                            .iter()
                            .filter(|&&i| {
                                plain_step(&mut mean, &mut cov, ex.row(i), y[i], r, bias, on)
                            })
                            .count();
                        assert_eq!(got, want, "d = {d}");
                        count += got;
                    }
                    assert!(count > 0 && count < 2 * n, "d = {d}: {count} updates");
                    let bits = |v: &[f64]| v.iter().map(|a| a.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(fast.mean()), bits(&mean), "mean, d = {d}, {on:?}");
                    assert_eq!(
                        bits(fast.covariance()),
                        bits(&cov),
                        "covariance, d = {d}, {on:?}"
                    );
                    assert_eq!(fast.covariance().len(), w * w);
                    // single steps (update()) agree with the epoch too
                    let mut one = Arow::new(d, r, bias, false, on).unwrap();
                    for &i in &order {
                        one.update(ex.row(i), y[i]);
                    }
                    let mut ep = Arow::new(d, r, bias, false, on).unwrap();
                    ep.epoch(&ex, &y, &order, Control::new(&cancel)).unwrap();
                    assert_eq!(bits(one.covariance()), bits(ep.covariance()));
                    assert_eq!(bits(one.mean()), bits(ep.mean()));
                }
            }
        }
    }

    #[test]
    fn one_vs_rest_without_gather_equals_sequential_epochs() {
        // shuffle = true no longer gathers full-covariance data: same result as walking
        // the permutation directly.
        let (n, d) = (300, 6);
        let (x, _, _, _, y) = data(n, d, 9);
        let labels: Vec<usize> = y.iter().map(|&v| usize::from(v > 0.0)).collect();
        let ex = Examples::dense(&x, d).unwrap();
        let cancel = AtomicBool::new(false);
        let mut models = vec![Arow::new(d, 1.0, 1.0, false, UpdateOn::Margin).unwrap()];
        let schedule = Schedule {
            seeds: &[42],
            shuffle: true,
            online: false,
        };
        let out = arow_one_vs_rest(
            &mut models,
            &[1],
            &ex,
            &labels,
            &schedule,
            Control::new(&cancel),
        )
        .unwrap();
        assert_eq!(out.outcome, FitOutcome::ran(CHUNKS_PER_PASS));
        let mut rng = Pcg64::seed_from_u64(42);
        let order = permutation(n, true, &mut rng);
        let (mut mean, mut cov) = (vec![0.0; d + 1], vec![0.0; (d + 1) * (d + 1)]);
        (0..=d).for_each(|i| cov[i * (d + 1) + i] = 1.0);
        for &i in &order {
            plain_step(
                &mut mean,
                &mut cov,
                ex.row(i),
                y[i],
                1.0,
                1.0,
                UpdateOn::Margin,
            );
        }
        assert_eq!(models[0].mean(), &mean[..]);
        assert_eq!(models[0].covariance(), &cov[..]);
    }
}
