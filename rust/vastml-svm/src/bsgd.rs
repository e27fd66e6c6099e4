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

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use rayon::prelude::*;

use crate::amm::{EpochStats, FitOutcome, ROW_BLOCK, Schedule, permutation, poll_mask};
use vastml_core::{Control, Halt};

/// Most steps between two polls of the cancel flag: a step with merging costs O(B d) kernel
/// work plus a golden-section search per candidate, so a few dozen steps are milliseconds.
const CANCEL_EVERY_STEP: usize = 32;
use crate::data::{Examples, Row, check_labels, check_positive, dot, try_reserve_rows};
use crate::error::{SvmError, invalid, parse_choice, shape};
use crate::kernel::{Kernel, exp_in_place};

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
    /// span of the others: `alpha_R += K_RR^{-1} k_Rp alpha_p` (any kernel). Keeps the SV
    /// kernel matrix and its inverse `A = K^{-1}`: adding an SV is a bordered (rank-one)
    /// update of `A`, and `K_RR^{-1} k_Rp = -A_Rp / A_pp` with the downdate
    /// `A_RR - A_Rp A_pR / A_pp`, so a maintenance step costs O(B^2); `A` is recomputed
    /// from `K` (O(B^3)) once every `B` steps against round-off drift.
    Project,
}

impl std::str::FromStr for Maintenance {
    type Err = SvmError;
    /// `"merge"`, `"remove"` (the smallest), `"remove-random"` or `"project"`.
    fn from_str(s: &str) -> Result<Self, SvmError> {
        use Maintenance as M;
        parse_choice(
            s,
            "maintenance",
            &[
                ("merge", M::Merge),
                ("remove", M::RemoveSmallest),
                ("remove-random", M::RemoveRandom),
                ("project", M::Project),
            ],
        )
    }
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
    /// Projection only: inverse of `gram + ridge` (same layout), updated incrementally.
    kinv: Vec<f64>,
    /// Projection only: maintenance steps since `kinv` was last recomputed from `gram`.
    since_refresh: usize,
}

/// Relative ridge added to the SV kernel diagonal for the projection's inverse.
const PROJECT_RIDGE: f64 = 1e-10;

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
        let mut room = Vec::new();
        try_reserve_rows(&mut room, params.budget.min(64) + 1, dim, "dim")?;
        let sv_sq = sv
            .chunks_exact(dim)
            .map(|z| z.iter().map(|a| a * a).sum())
            .collect();
        Ok(Bsgd {
            params,
            dim,
            n_classes,
            sv: {
                room.extend_from_slice(sv);
                room
            },
            sv_sq,
            alpha: alpha.to_vec(),
            scale: 1.0,
            t,
            kx: Vec::new(),
            n_merged: 0,
            gram: Vec::new(),
            kinv: Vec::new(),
            since_refresh: 0,
        })
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

    /// Builds the SV kernel matrix and its inverse when the maintenance is projection and
    /// they are not built yet (lazily, at the first training epoch: a model rebuilt for
    /// prediction never needs them).
    fn ensure_gram(&mut self) {
        if self.params.maintenance == Maintenance::Project && self.gram.is_empty() {
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
            self.kinv = vec![0.0; st * st];
            self.refresh_inverse();
        }
    }

    /// Ridge of SV `j`'s diagonal entry.
    fn ridge(&self, j: usize) -> f64 {
        let st = self.stride();
        PROJECT_RIDGE * self.gram[j * st + j].abs() + 1e-300
    }

    /// Recomputes `kinv = (K + ridge)^{-1}` from `gram` by Gauss-Jordan elimination with
    /// partial pivoting, O(n^3).
    fn refresh_inverse(&mut self) {
        let (st, n) = (self.stride(), self.n_support());
        let mut a = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                a[i * n + j] = self.gram[i * st + j];
            }
            a[i * n + i] += self.ridge(i);
        }
        let mut inv = vec![0.0; n * n];
        (0..n).for_each(|i| inv[i * n + i] = 1.0);
        for col in 0..n {
            let piv = (col..n)
                .max_by(|&x, &y| a[x * n + col].abs().total_cmp(&a[y * n + col].abs()))
                .unwrap_or(col);
            if piv != col {
                for k in 0..n {
                    a.swap(piv * n + k, col * n + k);
                    inv.swap(piv * n + k, col * n + k);
                }
            }
            let d = a[col * n + col];
            let d = if d.abs() < 1e-300 { 1e-300 } else { d };
            for k in 0..n {
                a[col * n + k] /= d;
                inv[col * n + k] /= d;
            }
            for r in 0..n {
                if r != col {
                    let f = a[r * n + col];
                    if f != 0.0 {
                        for k in 0..n {
                            a[r * n + k] -= f * a[col * n + k];
                            inv[r * n + k] -= f * inv[col * n + k];
                        }
                    }
                }
            }
        }
        for i in 0..n {
            for j in 0..n {
                self.kinv[i * st + j] = inv[i * n + j];
            }
        }
        self.since_refresh = 0;
    }

    /// Bordered update of `kinv` after SV `m = n - 1` was appended (its `gram` row and
    /// column filled): with `u = A k` and `s = k_mm + ridge - k'u`,
    /// `A' = [[A + u u'/s, -u/s], [-u'/s, 1/s]]`. O(n^2).
    fn grow_inverse(&mut self) {
        let (st, n) = (self.stride(), self.n_support());
        let m = n - 1;
        let k: Vec<f64> = (0..m).map(|j| self.gram[m * st + j]).collect();
        let u: Vec<f64> = (0..m)
            .map(|i| dot(&self.kinv[i * st..i * st + m], &k))
            .collect();
        let s = self.gram[m * st + m] + self.ridge(m) - dot(&k, &u);
        if s.is_nan() || s <= 1e-12 * self.gram[m * st + m].abs() {
            // x lies (numerically) in the span of the SVs: rebuild A from K.
            self.refresh_inverse();
            return;
        }
        let inv_s = 1.0 / s;
        for i in 0..m {
            let ui = u[i] * inv_s;
            let row = &mut self.kinv[i * st..i * st + m];
            row.iter_mut().zip(&u).for_each(|(a, &uj)| *a += ui * uj);
            self.kinv[i * st + m] = -ui;
            self.kinv[m * st + i] = -ui;
        }
        self.kinv[m * st + m] = inv_s;
    }

    /// `K_RR^{-1} k_Rp` for `R` = every SV but `p`, from the inverse: `-A_Rp / A_pp`
    /// (entry `p` of the result is 0). O(n).
    fn projection_coefficients(&self, p: usize) -> Vec<f64> {
        let (st, n) = (self.stride(), self.n_support());
        let app = self.kinv[p * st + p];
        (0..n)
            .map(|j| {
                if j == p {
                    0.0
                } else {
                    -self.kinv[j * st + p] / app
                }
            })
            .collect()
    }

    /// The same coefficients by a direct dense solve of `(K_RR + ridge) d = k_Rp`, O(n^3):
    /// the oracle the incremental inverse is tested against.
    #[cfg(test)]
    fn projection_coefficients_direct(&self, p: usize) -> Vec<f64> {
        let (st, n) = (self.stride(), self.n_support());
        let rest: Vec<usize> = (0..n).filter(|&j| j != p).collect();
        let m = rest.len();
        let mut a = vec![0.0; m * (m + 1)];
        for (r, &i) in rest.iter().enumerate() {
            for (c, &j) in rest.iter().enumerate() {
                a[r * (m + 1) + c] = self.gram[i * st + j];
            }
            a[r * (m + 1) + r] += self.ridge(i);
            a[r * (m + 1) + m] = self.gram[i * st + p];
        }
        let w = m + 1;
        for col in 0..m {
            let piv = (col..m)
                .max_by(|&x, &y| a[x * w + col].abs().total_cmp(&a[y * w + col].abs()))
                .unwrap();
            for k in 0..w {
                a.swap(piv * w + k, col * w + k);
            }
            for r in 0..m {
                if r != col {
                    let f = a[r * w + col] / a[col * w + col];
                    for k in 0..w {
                        a[r * w + k] -= f * a[col * w + k];
                    }
                }
            }
        }
        let mut out = vec![0.0; n];
        for (r, &i) in rest.iter().enumerate() {
            out[i] = a[r * w + m] / a[r * w + r];
        }
        out
    }

    /// Removes SV `p` and adds its projection onto the span of the others to their alphas,
    /// in O(n^2) from the maintained inverse.
    fn project_out(&mut self, p: usize) {
        let (st, c, n) = (self.stride(), self.n_classes, self.n_support());
        if n > 1 {
            let d = self.projection_coefficients(p);
            let ap: Vec<f64> = self.alpha[p * c..(p + 1) * c].to_vec();
            for (j, &dj) in d.iter().enumerate() {
                if j != p && dj != 0.0 {
                    for (cls, a) in ap.iter().enumerate() {
                        self.alpha[j * c + cls] += dj * a;
                    }
                }
            }
            // Inverse of K_RR: A_RR - A_Rp A_pR / A_pp (row/column p become garbage, then
            // `remove` moves the last SV into slot p).
            let app = self.kinv[p * st + p];
            let col: Vec<f64> = (0..n).map(|j| self.kinv[j * st + p]).collect();
            for i in (0..n).filter(|&i| i != p) {
                let f = col[i] / app;
                let row = &mut self.kinv[i * st..i * st + n];
                row.iter_mut().zip(&col).for_each(|(a, &cj)| *a -= f * cj);
            }
        }
        self.remove(p);
        self.since_refresh += 1;
        if self.since_refresh >= self.params.budget {
            self.refresh_inverse();
        }
    }

    fn kernel_row(&mut self, x: Row<'_>) {
        let xx = x.sq_norm();
        let k = self.params.kernel;
        let d = self.dim;
        self.kx.clear();
        match k {
            Kernel::Gaussian { gamma } => {
                self.kx.extend(
                    self.sv
                        .chunks_exact(d)
                        .zip(&self.sv_sq)
                        .map(|(z, &zz)| -gamma * (xx + zz - 2.0 * x.dot(z)).max(0.0)),
                );
                exp_in_place(&mut self.kx);
            }
            _ => self.kx.extend(
                self.sv
                    .chunks_exact(d)
                    .zip(&self.sv_sq)
                    .map(|(z, &zz)| k.eval(x.dot(z), xx, zz)),
            ),
        }
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
                        self.grow_inverse();
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
                let kv = &mut self.kinv;
                for t in 0..=last {
                    kv[j * st + t] = kv[last * st + t];
                }
                for t in 0..=last {
                    kv[t * st + j] = kv[t * st + last];
                }
                kv[j * st + j] = kv[last * st + last];
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
        control: Control<'_>,
    ) -> Result<EpochStats, SvmError> {
        if data.dim() != self.dim {
            return Err(shape("X", "feature count differs from the model's"));
        }
        check_labels(labels, data.len(), self.n_classes)?;
        self.ensure_gram();
        let mut rng = Pcg64::seed_from_u64(seed);
        let order = permutation(data.len(), shuffle, &mut rng);
        let mut stats = EpochStats::default();
        let merged0 = self.n_merged;
        let mut sum = 0.0;
        let cost = (self.params.budget + 1) * (self.dim + 1);
        let poll = poll_mask(cost).min(CANCEL_EVERY_STEP - 1);
        for (k, &i) in order.iter().enumerate() {
            if k & poll == 0 {
                control.check()?;
            }
            let l = self.step(data.row(i), labels[i], &mut rng);
            stats.n_updates += usize::from(l > 0.0);
            sum += l;
        }
        stats.mean_loss = sum / data.len() as f64;
        stats.n_pruned = self.n_merged - merged0;
        Ok(stats)
    }

    /// One pass per seed of `schedule` ([`Bsgd::epoch`]; `schedule.online` is ignored),
    /// reporting pass `e` (from 1) as `control.report(e, NaN, &n_support)`: no objective (it
    /// would cost a pass of kernel evaluations), the state is the number of support vectors.
    ///
    /// # Errors
    /// As [`Bsgd::epoch`]. A hook that asks to stop is not an error (see [`FitOutcome`]).
    pub fn fit(
        &mut self,
        data: &Examples<'_>,
        labels: &[usize],
        schedule: &Schedule<'_>,
        control: Control<'_, usize>,
    ) -> Result<FitOutcome, SvmError> {
        let inner = Control::new(control.cancel_flag());
        for (e, &seed) in schedule.seeds.iter().enumerate() {
            self.epoch(data, labels, schedule.shuffle, seed, inner)?;
            let report = control.report(e + 1, || f64::NAN, &self.n_support());
            if let Some(out) = FitOutcome::after(e + 1, report)? {
                return Ok(out);
            }
        }
        Ok(FitOutcome::ran(schedule.seeds.len()))
    }

    /// Class scores `(n, n_classes)`, parallel over examples.
    ///
    /// # Errors
    /// A shape error on a dimension mismatch.
    pub fn decision(&self, data: &Examples<'_>) -> Result<Vec<f64>, SvmError> {
        self.decision_with(data, Control::none())
    }

    /// [`Bsgd::decision`] polling `control`'s cancel flag every block of rows.
    ///
    /// # Errors
    /// As [`Bsgd::decision`], and [`SvmError::Cancelled`].
    pub fn decision_with(
        &self,
        data: &Examples<'_>,
        control: Control<'_>,
    ) -> Result<Vec<f64>, SvmError> {
        if data.dim() != self.dim {
            return Err(shape("X", "feature count differs from the model's"));
        }
        let (d, c) = (self.dim, self.n_classes);
        let nsv = self.n_support();
        // SVs transposed, so x . z_j for all j is one pass over the non-zeros of x.
        let mut st = vec![0.0; d * nsv];
        for (j, z) in self.sv.chunks_exact(d).enumerate() {
            for (f, &v) in z.iter().enumerate() {
                st[f * nsv + j] = v;
            }
        }
        // Coefficients transposed `(n_classes, nsv)`, scale folded in.
        let mut alpha_t = vec![0.0; c * nsv];
        for (j, a) in self.alpha.chunks_exact(c).enumerate() {
            for (i, &v) in a.iter().enumerate() {
                alpha_t[i * nsv + j] = self.scale * v;
            }
        }
        let mut out = vec![0.0; data.len() * c];
        if c == 0 {
            return Ok(out);
        }
        out.par_chunks_mut(c * ROW_BLOCK)
            .enumerate()
            .try_for_each_init(
                || vec![0.0; nsv],
                |dots, (blk, ob)| {
                    control.check()?;
                    for (k, o) in ob.chunks_exact_mut(c).enumerate() {
                        self.scores_into(data.row(blk * ROW_BLOCK + k), &st, &alpha_t, dots, o);
                    }
                    Ok::<(), Halt>(())
                },
            )?;
        Ok(out)
    }

    /// The class scores of one row into `o`, from the transposed SVs `st` and coefficients
    /// `alpha_t` (`dots` is scratch of length n_support).
    fn scores_into(
        &self,
        x: Row<'_>,
        st: &[f64],
        alpha_t: &[f64],
        dots: &mut [f64],
        o: &mut [f64],
    ) {
        let k = self.params.kernel;
        let nsv = self.n_support();
        let xx = x.sq_norm();
        dots.iter_mut().for_each(|v| *v = 0.0);
        if nsv > 0 {
            x.dots_transposed(st, dots);
        }
        if let Kernel::Gaussian { gamma } = k {
            for (dj, &zz) in dots.iter_mut().zip(&self.sv_sq) {
                *dj = -gamma * (xx + zz - 2.0 * *dj).max(0.0);
            }
            exp_in_place(dots);
        } else {
            for (dj, &zz) in dots.iter_mut().zip(&self.sv_sq) {
                *dj = k.eval(*dj, xx, zz);
            }
        }
        // g(i, x) = k(x) . alpha[.., i]: one dot product per class (independent
        // accumulators instead of a read-modify-write of `o` per SV).
        for (oi, ai) in o.iter_mut().zip(alpha_t.chunks_exact(nsv.max(1))) {
            *oi = dot(dots, ai);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// The O(B^2) incremental inverse gives the same projection coefficients as a direct
    /// dense solve, after many insertions, projections and periodic refreshes.
    #[test]
    fn incremental_projection_matches_direct_solve() {
        let (n, d, budget) = (400, 3, 12);
        let mut s: u64 = 7;
        let mut next = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64
        };
        let x: Vec<f64> = (0..n * d).map(|_| 2.0 * next() - 1.0).collect();
        let y: Vec<usize> = x
            .chunks_exact(d)
            .map(|r| usize::from(r[0] * r[1] > 0.0))
            .collect();
        for kernel in [
            Kernel::Gaussian { gamma: 1.5 },
            Kernel::Polynomial {
                degree: 3,
                coef: 1.0,
            },
        ] {
            let params = BsgdParams {
                lambda: 1e-2,
                budget,
                kernel,
                maintenance: Maintenance::Project,
            };
            let mut m = Bsgd::new(params, d, 2).unwrap();
            let cancel = AtomicBool::new(false);
            let mut checked = 0;
            for chunk in 0..20 {
                let lo = chunk * 20;
                let part = Examples::dense(&x[lo * d..(lo + 20) * d], d).unwrap();
                m.epoch(&part, &y[lo..lo + 20], false, 0, Control::new(&cancel))
                    .unwrap();
                assert!(m.n_support() <= budget);
                for p in 0..m.n_support() {
                    let fast = m.projection_coefficients(p);
                    let slow = m.projection_coefficients_direct(p);
                    let scale = slow.iter().fold(1.0f64, |a, v| a.max(v.abs()));
                    for (f, w) in fast.iter().zip(&slow) {
                        assert!(
                            (f - w).abs() <= 1e-6 * scale,
                            "{kernel:?} p={p}: {f} vs {w}"
                        );
                    }
                    checked += 1;
                }
            }
            assert!(checked > 100);
        }
    }
}
