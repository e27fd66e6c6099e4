//! BSGD: budgeted stochastic gradient descent for multi-class kernel SVMs (Wang, Crammer &
//! Vucetic 2012; thesis sec. 5.1).
//!
//! The model is `g(i, x) = sum_j alpha_ij k(x, z_j)` over at most `budget` support vectors,
//! prediction `argmax_i g(i, x)`. Each step is a kernelised multi-class Pegasos step
//! (`eta = 1/(lambda t)`, all alphas shrink by `1 - 1/t`; on a positive loss x becomes a support
//! vector with `alpha_y = eta`, `alpha_{i-} = -eta`). When the budget is exceeded one of:
//! - `Removal::Smallest`: drop the SV with the smallest `||alpha_j||^2 k(z_j, z_j)`;
//! - `Removal::Random`: drop a uniformly random SV;
//! - `Merge` (Gaussian kernel): merge the smallest-`||alpha||` SV `m` with the partner `n` whose
//!   merge loses the least weight: `z = h z_m + (1 - h) z_n` with `h` from a golden-section
//!   search, `alpha_z = alpha_m k_mn^{(1-h)^2} + alpha_n k_mn^{h^2}`.
//!
//! An example equal to an existing SV adds its alphas to that SV instead of a new one.
//! Support vectors are stored dense (a merged point is dense anyway).

use std::sync::atomic::{AtomicBool, Ordering};

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use rayon::prelude::*;

use crate::amm::{CANCEL_EVERY, EpochStats, permutation};
use crate::data::{Examples, Row, check_labels, check_positive, dot};
use crate::error::{SvmError, invalid, shape};
use crate::kernel::Kernel;

/// How BSGD keeps its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Maintenance {
    /// Remove the SV with the smallest `||alpha_j||^2 k(z_j, z_j)`.
    RemoveSmallest,
    /// Remove a uniformly random SV.
    RemoveRandom,
    /// Merge two SVs (Gaussian kernel only).
    Merge,
    /// Remove the SV with the smallest `||alpha_j||` and project its contribution onto the
    /// span of the others: `alpha_R += K_RR^{-1} k_Rp alpha_p` (any kernel; keeps the
    /// `B x B` kernel matrix of the SVs, O(B^3) per maintenance step).
    Project,
}

/// Golden-section search tolerance on `h`.
const GOLDEN_TOL: f64 = 1e-4;

/// Maximises `a_m k^{(1-h)^2} + a_n k^{h^2}` over `[lo, hi]` by golden-section search.
pub fn golden_section(a_m: f64, a_n: f64, k_mn: f64, lo: f64, hi: f64) -> f64 {
    // k^e = exp(e ln k): one logarithm, then two exponentials per evaluation.
    let ln_k = k_mn.ln();
    let f = |h: f64| a_m * ((1.0 - h) * (1.0 - h) * ln_k).exp() + a_n * (h * h * ln_k).exp();
    let g = (5f64.sqrt() - 1.0) / 2.0;
    let (mut a, mut b) = (lo, hi);
    let mut c = b - g * (b - a);
    let mut d = a + g * (b - a);
    let (mut fc, mut fd) = (f(c), f(d));
    while (b - a).abs() > GOLDEN_TOL {
        if fc > fd {
            b = d;
            d = c;
            fd = fc;
            c = b - g * (b - a);
            fc = f(c);
        } else {
            a = c;
            c = d;
            fc = fd;
            d = a + g * (b - a);
            fd = f(d);
        }
    }
    (a + b) / 2.0
}

/// The result of merging two support vectors.
#[derive(Debug, Clone, PartialEq)]
pub struct Merge {
    /// Merge point parameter: `z = h z_m + (1 - h) z_n`.
    pub h: f64,
    /// Coefficients of the merged SV, one per class.
    pub alpha: Vec<f64>,
    /// `||alpha_m phi(z_m) + alpha_n phi(z_n) - alpha_z phi(z)||^2` (with `k(x, x) = 1`).
    pub degradation: f64,
}

/// Best merge of SVs with coefficients `alpha_m`, `alpha_n` and kernel value `k_mn` (Gaussian).
pub fn merge_pair(alpha_m: &[f64], alpha_n: &[f64], k_mn: f64) -> Merge {
    let (mut a_m, mut a_n) = (0.0, 0.0);
    for (&am, &an) in alpha_m.iter().zip(alpha_n) {
        let mut den = am + an;
        if den == 0.0 {
            den = 1e-4;
        }
        a_m += am / den;
        a_n += an / den;
    }
    let (lo, hi) = if a_m * a_n > 0.0 {
        (0.0, 1.0)
    } else if a_m > 0.0 {
        (1.0, 6.0)
    } else {
        (-5.0, 0.0)
    };
    let h = golden_section(a_m, a_n, k_mn, lo, hi);
    let km = k_mn.powf((1.0 - h) * (1.0 - h));
    let kn = k_mn.powf(h * h);
    let alpha: Vec<f64> = alpha_m
        .iter()
        .zip(alpha_n)
        .map(|(am, an)| am * km + an * kn)
        .collect();
    let degradation = alpha_m
        .iter()
        .zip(alpha_n)
        .zip(&alpha)
        .map(|((am, an), az)| am * am + an * an + 2.0 * k_mn * am * an - az * az)
        .sum();
    Merge {
        h,
        alpha,
        degradation,
    }
}

/// Hyper-parameters of BSGD.
#[derive(Debug, Clone, PartialEq)]
pub struct BsgdParams {
    /// Regularisation `lambda > 0`.
    pub lambda: f64,
    /// Maximum number of support vectors `B >= 1`.
    pub budget: usize,
    /// The kernel (merging needs a Gaussian one).
    pub kernel: Kernel,
    /// Budget maintenance.
    pub maintenance: Maintenance,
}

/// A BSGD model under training.
#[derive(Debug, Clone)]
pub struct Bsgd {
    params: BsgdParams,
    dim: usize,
    n_classes: usize,
    /// Support vectors, row-major `(n_sv, dim)`.
    sv: Vec<f64>,
    sv_sq: Vec<f64>,
    /// Coefficients `(n_sv, n_classes)`, times `scale`.
    alpha: Vec<f64>,
    scale: f64,
    t: u64,
    kx: Vec<f64>,
    n_merged: usize,
    /// Projection only: kernel matrix of the SVs, row-major with stride `budget + 1`.
    gram: Vec<f64>,
}

impl Bsgd {
    /// A model without support vectors.
    ///
    /// # Errors
    /// Parameter errors (merging with a non-Gaussian kernel among them).
    pub fn new(params: BsgdParams, dim: usize, n_classes: usize) -> Result<Self, SvmError> {
        Self::from_parts(params, dim, n_classes, &[], &[], 0)
    }

    /// A model from support vectors `(n_sv, dim)`, coefficients `(n_sv, n_classes)` and `t`.
    ///
    /// # Errors
    /// Parameter, shape and non-finite errors; more SVs than the budget.
    pub fn from_parts(
        params: BsgdParams,
        dim: usize,
        n_classes: usize,
        sv: &[f64],
        alpha: &[f64],
        t: u64,
    ) -> Result<Self, SvmError> {
        check_positive(params.lambda, "lambda")?;
        params.kernel.validate()?;
        if params.budget == 0 {
            return Err(invalid("budget", "must be at least 1"));
        }
        if params.maintenance == Maintenance::Merge
            && !matches!(params.kernel, Kernel::Gaussian { .. })
        {
            return Err(invalid("maintenance", "merging needs the Gaussian kernel"));
        }
        if dim == 0 {
            return Err(invalid("dim", "must be at least 1"));
        }
        if n_classes < 2 {
            return Err(invalid("n_classes", "needs at least 2 classes"));
        }
        if sv.len() % dim != 0 || alpha.len() != sv.len() / dim * n_classes {
            return Err(shape("support_vectors", "inconsistent SV / alpha sizes"));
        }
        if sv.len() / dim > params.budget {
            return Err(invalid("budget", "more support vectors than the budget"));
        }
        if !sv.iter().chain(alpha).all(|v| v.is_finite()) {
            return Err(SvmError::NonFinite {
                name: "support_vectors",
            });
        }
        let sv_sq = sv
            .chunks_exact(dim)
            .map(|z| z.iter().map(|a| a * a).sum())
            .collect();
        Ok(Bsgd {
            params,
            dim,
            n_classes,
            sv: sv.to_vec(),
            sv_sq,
            alpha: alpha.to_vec(),
            scale: 1.0,
            t,
            kx: Vec::new(),
            n_merged: 0,
            gram: Vec::new(),
        }
        .with_gram())
    }

    /// Number of support vectors.
    pub fn n_support(&self) -> usize {
        self.sv_sq.len()
    }

    /// Support vectors, row-major `(n_sv, dim)`.
    pub fn support_vectors(&self) -> &[f64] {
        &self.sv
    }

    /// `||z_j||^2` as maintained incrementally.
    pub fn support_sq_norms(&self) -> &[f64] {
        &self.sv_sq
    }

    /// Coefficients `(n_sv, n_classes)` with the scale folded in.
    pub fn alphas(&self) -> Vec<f64> {
        self.alpha.iter().map(|a| a * self.scale).collect()
    }

    /// Steps so far.
    pub fn steps(&self) -> u64 {
        self.t
    }

    /// Merges done so far by this object.
    pub fn n_merged(&self) -> usize {
        self.n_merged
    }

    fn stride(&self) -> usize {
        self.params.budget + 1
    }

    /// Builds the SV kernel matrix when the maintenance is projection.
    fn with_gram(mut self) -> Self {
        if self.params.maintenance == Maintenance::Project {
            let (st, d, n) = (self.stride(), self.dim, self.n_support());
            self.gram = vec![0.0; st * st];
            for i in 0..n {
                for j in 0..n {
                    let (zi, zj) = (&self.sv[i * d..(i + 1) * d], &self.sv[j * d..(j + 1) * d]);
                    self.gram[i * st + j] =
                        self.params
                            .kernel
                            .eval(dot(zi, zj), self.sv_sq[i], self.sv_sq[j]);
                }
            }
        }
        self
    }

    /// Removes SV `p` and adds its projection onto the span of the others to their alphas.
    fn project_out(&mut self, p: usize) {
        let (st, c, n) = (self.stride(), self.n_classes, self.n_support());
        let rest: Vec<usize> = (0..n).filter(|&j| j != p).collect();
        let m = rest.len();
        if m > 0 {
            // Cholesky of K_RR (+ a tiny ridge for numerical safety), then solve K_RR d = k_Rp.
            let trace: f64 = rest.iter().map(|&j| self.gram[j * st + j]).sum();
            let ridge = 1e-10 * trace / m as f64;
            let mut l = vec![0.0; m * m];
            let mut ok = true;
            for a in 0..m {
                for b in 0..=a {
                    let mut v = self.gram[rest[a] * st + rest[b]];
                    if a == b {
                        v += ridge;
                    }
                    for t in 0..b {
                        v -= l[a * m + t] * l[b * m + t];
                    }
                    if a == b {
                        if v <= 0.0 {
                            ok = false;
                            break;
                        }
                        l[a * m + a] = v.sqrt();
                    } else {
                        l[a * m + b] = v / l[b * m + b];
                    }
                }
                if !ok {
                    break;
                }
            }
            if ok {
                let mut y: Vec<f64> = rest.iter().map(|&j| self.gram[j * st + p]).collect();
                for a in 0..m {
                    let s: f64 = (0..a).map(|t| l[a * m + t] * y[t]).sum();
                    y[a] = (y[a] - s) / l[a * m + a];
                }
                for a in (0..m).rev() {
                    let s: f64 = (a + 1..m).map(|t| l[t * m + a] * y[t]).sum();
                    y[a] = (y[a] - s) / l[a * m + a];
                }
                let ap: Vec<f64> = self.alpha[p * c..(p + 1) * c].to_vec();
                for (&j, &dj) in rest.iter().zip(&y) {
                    for (cls, a) in ap.iter().enumerate() {
                        self.alpha[j * c + cls] += dj * a;
                    }
                }
            }
        }
        self.remove(p);
    }

    fn kernel_row(&mut self, x: Row<'_>) {
        let xx = x.sq_norm();
        let k = self.params.kernel;
        let d = self.dim;
        self.kx.clear();
        self.kx.extend(
            self.sv
                .chunks_exact(d)
                .zip(&self.sv_sq)
                .map(|(z, &zz)| k.eval(x.dot(z), xx, zz)),
        );
    }

    fn step(&mut self, x: Row<'_>, y: usize, rng: &mut Pcg64) -> f64 {
        self.t += 1;
        let t = self.t as f64;
        let eta = 1.0 / (self.params.lambda * t);
        let c = self.n_classes;
        self.kernel_row(x);
        let mut g = vec![0.0; c];
        for (kj, aj) in self.kx.iter().zip(self.alpha.chunks_exact(c)) {
            g.iter_mut().zip(aj).for_each(|(gi, a)| *gi += kj * a);
        }
        g.iter_mut().for_each(|v| *v *= self.scale);
        let mut wrong = (y + 1) % c;
        for (i, &gi) in g.iter().enumerate() {
            if i != y && gi > g[wrong] {
                wrong = i;
            }
        }
        let loss = (1.0 + g[wrong] - g[y]).max(0.0);
        if self.t == 1 {
            self.alpha.iter_mut().for_each(|a| *a = 0.0);
            self.scale = 1.0;
        } else {
            self.scale *= 1.0 - 1.0 / t;
        }
        if loss > 0.0 {
            let a = eta / self.scale;
            let xx = x.sq_norm();
            let d = self.dim;
            let dup = self
                .sv
                .chunks_exact(d)
                .zip(&self.sv_sq)
                .position(|(z, &zz)| (xx + zz - 2.0 * x.dot(z)) <= 1e-12 * xx.max(1.0));
            match dup {
                Some(j) => {
                    self.alpha[j * c + y] += a;
                    self.alpha[j * c + wrong] -= a;
                }
                None => {
                    let start = self.sv.len();
                    self.sv.resize(start + d, 0.0);
                    x.axpy(1.0, &mut self.sv[start..]);
                    self.sv_sq.push(xx);
                    if self.params.maintenance == Maintenance::Project {
                        let (st, m) = (self.stride(), self.n_support() - 1);
                        let kxx = self.params.kernel.eval(xx, xx, xx);
                        for (j, &kj) in self.kx.iter().enumerate() {
                            self.gram[m * st + j] = kj;
                            self.gram[j * st + m] = kj;
                        }
                        self.gram[m * st + m] = kxx;
                    }
                    let s = self.alpha.len();
                    self.alpha.resize(s + c, 0.0);
                    self.alpha[s + y] = a;
                    self.alpha[s + wrong] = -a;
                    if self.n_support() > self.params.budget {
                        self.maintain(rng);
                    }
                }
            }
        }
        if self.scale < 1e-9 {
            let s = self.scale;
            self.alpha.iter_mut().for_each(|v| *v *= s);
            self.scale = 1.0;
        }
        loss
    }

    fn remove(&mut self, j: usize) {
        let (d, c) = (self.dim, self.n_classes);
        let last = self.n_support() - 1;
        if j != last {
            self.sv.copy_within(last * d..(last + 1) * d, j * d);
            self.alpha.copy_within(last * c..(last + 1) * c, j * c);
            self.sv_sq[j] = self.sv_sq[last];
            if !self.gram.is_empty() {
                let st = self.stride();
                for t in 0..=last {
                    self.gram[j * st + t] = self.gram[last * st + t];
                }
                for t in 0..=last {
                    self.gram[t * st + j] = self.gram[t * st + last];
                }
                self.gram[j * st + j] = self.gram[last * st + last];
            }
        }
        self.sv.truncate(last * d);
        self.alpha.truncate(last * c);
        self.sv_sq.truncate(last);
    }

    fn alpha_sq(&self, j: usize) -> f64 {
        let c = self.n_classes;
        self.alpha[j * c..(j + 1) * c].iter().map(|a| a * a).sum()
    }

    fn maintain(&mut self, rng: &mut Pcg64) {
        let n = self.n_support();
        match self.params.maintenance {
            Maintenance::RemoveRandom => {
                let j = rng.random_range(0..n);
                self.remove(j);
            }
            Maintenance::RemoveSmallest => {
                let k = self.params.kernel;
                let d = self.dim;
                let cost = |j: usize| {
                    let zz = self.sv_sq[j];
                    let z = &self.sv[j * d..(j + 1) * d];
                    let dot: f64 = z.iter().map(|a| a * a).sum();
                    self.alpha_sq(j) * k.eval(dot, zz, zz)
                };
                let j = (0..n)
                    .min_by(|&a, &b| cost(a).total_cmp(&cost(b)))
                    .unwrap_or(0);
                self.remove(j);
            }
            Maintenance::Merge => self.merge_smallest(),
            Maintenance::Project => {
                let p = (0..n)
                    .min_by(|&a, &b| self.alpha_sq(a).total_cmp(&self.alpha_sq(b)))
                    .unwrap_or(0);
                self.project_out(p);
            }
        }
    }

    fn merge_smallest(&mut self) {
        let (d, c) = (self.dim, self.n_classes);
        let n = self.n_support();
        let m = (0..n)
            .min_by(|&a, &b| self.alpha_sq(a).total_cmp(&self.alpha_sq(b)))
            .unwrap_or(0);
        let gamma = match self.params.kernel {
            Kernel::Gaussian { gamma } => gamma,
            _ => return,
        };
        let zm = &self.sv[m * d..(m + 1) * d];
        let am = &self.alpha[m * c..(m + 1) * c];
        let mut best: Option<(usize, Merge, f64)> = None;
        for nn in (0..n).filter(|&j| j != m) {
            let zn = &self.sv[nn * d..(nn + 1) * d];
            let dot: f64 = zm.iter().zip(zn).map(|(a, b)| a * b).sum();
            let d2 = (self.sv_sq[m] + self.sv_sq[nn] - 2.0 * dot).max(0.0);
            let kmn = (-gamma * d2).exp();
            let mg = merge_pair(am, &self.alpha[nn * c..(nn + 1) * c], kmn);
            if best
                .as_ref()
                .is_none_or(|(_, b, _)| mg.degradation < b.degradation)
            {
                best = Some((nn, mg, dot));
            }
        }
        let Some((nn, mg, dot)) = best else {
            return;
        };
        let h = mg.h;
        let new_sq = h * h * self.sv_sq[m]
            + (1.0 - h) * (1.0 - h) * self.sv_sq[nn]
            + 2.0 * h * (1.0 - h) * dot;
        for k in 0..d {
            self.sv[m * d + k] = h * self.sv[m * d + k] + (1.0 - h) * self.sv[nn * d + k];
        }
        self.sv_sq[m] = new_sq.max(0.0);
        self.alpha[m * c..(m + 1) * c].copy_from_slice(&mg.alpha);
        self.remove(nn);
        self.n_merged += 1;
    }

    /// One (seeded, optionally shuffled) pass over the examples.
    ///
    /// # Errors
    /// Shape errors; [`SvmError::Cancelled`].
    pub fn epoch(
        &mut self,
        data: &Examples<'_>,
        labels: &[usize],
        shuffle: bool,
        seed: u64,
        cancel: &AtomicBool,
    ) -> Result<EpochStats, SvmError> {
        if data.dim() != self.dim {
            return Err(shape("X", "feature count differs from the model's"));
        }
        check_labels(labels, data.len(), self.n_classes)?;
        let mut rng = Pcg64::seed_from_u64(seed);
        let order = permutation(data.len(), shuffle, &mut rng);
        let mut stats = EpochStats::default();
        let merged0 = self.n_merged;
        let mut sum = 0.0;
        for (k, &i) in order.iter().enumerate() {
            if k % CANCEL_EVERY == 0 && cancel.load(Ordering::Relaxed) {
                return Err(SvmError::Cancelled);
            }
            let l = self.step(data.row(i), labels[i], &mut rng);
            stats.n_updates += usize::from(l > 0.0);
            sum += l;
        }
        stats.mean_loss = sum / data.len() as f64;
        stats.n_pruned = self.n_merged - merged0;
        Ok(stats)
    }

    /// Class scores `(n, n_classes)`, parallel over examples.
    ///
    /// # Errors
    /// A shape error on a dimension mismatch.
    pub fn decision(&self, data: &Examples<'_>) -> Result<Vec<f64>, SvmError> {
        if data.dim() != self.dim {
            return Err(shape("X", "feature count differs from the model's"));
        }
        let (d, c) = (self.dim, self.n_classes);
        let k = self.params.kernel;
        let nsv = self.n_support();
        // SVs transposed, so x . z_j for all j is one pass over the non-zeros of x.
        let mut st = vec![0.0; d * nsv];
        for (j, z) in self.sv.chunks_exact(d).enumerate() {
            for (f, &v) in z.iter().enumerate() {
                st[f * nsv + j] = v;
            }
        }
        let mut out = vec![0.0; data.len() * c];
        out.par_chunks_mut(c).enumerate().for_each_init(
            || vec![0.0; nsv],
            |dots, (i, o)| {
                let x = data.row(i);
                let xx = x.sq_norm();
                dots.iter_mut().for_each(|v| *v = 0.0);
                if nsv > 0 {
                    x.dots_transposed(&st, dots);
                }
                for ((&dj, &zz), a) in dots.iter().zip(&self.sv_sq).zip(self.alpha.chunks_exact(c))
                {
                    let kv = k.eval(dj, xx, zz) * self.scale;
                    o.iter_mut().zip(a).for_each(|(v, ai)| *v += kv * ai);
                }
            },
        );
        Ok(out)
    }
}
