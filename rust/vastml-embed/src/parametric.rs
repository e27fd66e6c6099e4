//! Parametric Embedding (Iwata et al. 2007) kernels: the per-object Newton step and the
//! O(N K D) objective / centre gradient.
//!
//! Objects `r_n` and class centres `phi_k` live in D dimensions; the embedding posterior is
//! `q_nk = pi_k exp(-|r_n - phi_k|^2 / 2) / sum_l (...)` (eq. 1) and
//!
//! ```text
//! J(R, Phi) = -sum_nk P_nk log q_nk + eta_r sum_n |r_n|^2 + eta_phi sum_k |phi_k|^2   (2), (6)
//! ```
//!
//! Given the centres, J splits into N strictly convex problems (the Hessian of object n is
//! `Cov_q(phi) + 2 eta_r I`, eq. 5), solved here by damped Newton, in parallel over fixed
//! chunks of objects. [`reduced`] fuses that step with the evaluation of J and dJ/dPhi, so
//! one L-BFGS evaluation of the reduced objective `min_R J(R, Phi)` is one pass over P.
//! Reductions add per-chunk partial sums in chunk order, so results do not depend on the
//! number of threads.
//!
//! # Example
//!
//! ```
//! use std::sync::atomic::AtomicBool;
//! use vastml_embed::parametric::{Problem, RStep, r_step};
//!
//! // two objects, two classes on a line (D = 1), uniform prior
//! let p = [0.9, 0.1, 0.5, 0.5];
//! let phi = [-1.3, 1.3];
//! let lp = [0.5f64.ln(), 0.5f64.ln()];
//! let pb = Problem::new(&p, &phi, &lp, 2, 1).unwrap();
//! let mut r = [0.0, 0.0];
//! r_step(&pb, &mut r, &RStep::default(), &AtomicBool::new(false)).unwrap();
//! assert!(r[0] < 0.0 && r[1].abs() < 1e-12);
//! ```

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;
use vastml_fgt::exp_nonpositive;

use crate::error::{EmbedError, Result, check_finite, invalid};

/// Objects per parallel task (fixed, so sums are independent of the thread count).
pub const CHUNK: usize = 2048;

/// The inputs that stay fixed during an R-step: posteriors P (n x k), centres Phi (k x d)
/// and log priors (k), all row-major.
#[derive(Clone, Debug)]
pub struct Problem<'a> {
    p: &'a [f64],
    phi: &'a [f64],
    phi_t: Vec<f64>,
    log_prior: &'a [f64],
    weights: Option<&'a [f64]>,
    n: usize,
    k: usize,
    d: usize,
}

impl<'a> Problem<'a> {
    /// Checks shapes and finiteness.
    ///
    /// # Errors
    /// `ShapeMismatch` when the slices disagree with `k`, `d`; `NonFinite` on NaN / inf;
    /// `InvalidParameter` when `k < 1` or `d < 1`.
    pub fn new(
        p: &'a [f64],
        phi: &'a [f64],
        log_prior: &'a [f64],
        k: usize,
        d: usize,
    ) -> Result<Self> {
        if k == 0 {
            return Err(invalid("n_classes", "must be >= 1"));
        }
        if d == 0 {
            return Err(invalid("n_components", "must be >= 1"));
        }
        if p.len() % k != 0 {
            return Err(EmbedError::ShapeMismatch(format!(
                "P has {} values, not a multiple of {k} classes",
                p.len()
            )));
        }
        if phi.len() != k * d || log_prior.len() != k {
            return Err(EmbedError::ShapeMismatch(format!(
                "Phi must be {k} x {d} and log_prior {k} long"
            )));
        }
        check_finite(p, "P")?;
        check_finite(phi, "Phi")?;
        check_finite(log_prior, "log_prior")?;
        let mut phi_t = vec![0.0; k * d];
        for kk in 0..k {
            for j in 0..d {
                phi_t[j * k + kk] = phi[kk * d + j];
            }
        }
        Ok(Self {
            p,
            phi,
            phi_t,
            log_prior,
            weights: None,
            n: p.len() / k,
            k,
            d,
        })
    }

    /// The same problem with object weights `w_n >= 0` (sample weights): object n's terms of
    /// J (its cross-entropy and its penalty `eta_r |r_n|^2`), of dJ/dPhi, dJ/dR and of the
    /// reduced Hessian are multiplied by `w_n`, so an integer weight equals that many copies
    /// of the object and a zero weight removes it from J (its R-step optimum, which does not
    /// depend on `w_n`, is still computed).
    ///
    /// # Errors
    /// `ShapeMismatch` unless there is one weight per object; `InvalidParameter` on a
    /// negative or non-finite weight.
    pub fn with_weights(mut self, weights: &'a [f64]) -> Result<Self> {
        if weights.len() != self.n {
            return Err(EmbedError::ShapeMismatch(format!(
                "{} weights for {} objects",
                weights.len(),
                self.n
            )));
        }
        if weights.iter().any(|w| !(w.is_finite() && *w >= 0.0)) {
            return Err(invalid("sample_weight", "must be finite numbers >= 0"));
        }
        self.weights = Some(weights);
        Ok(self)
    }

    /// Weight of object n (1 without weights).
    #[inline]
    fn weight(&self, n: usize) -> f64 {
        self.weights.map_or(1.0, |w| w[n])
    }

    /// Number of objects.
    pub fn n_objects(&self) -> usize {
        self.n
    }
}

/// Options of the per-object Newton iteration.
#[derive(Clone, Copy, Debug)]
pub struct RStep {
    /// eta_r > 0 (the penalty is `eta_r |r|^2`).
    pub eta_r: f64,
    /// Stop an object when `|dJ/dr_n|^2 < tol`.
    pub tol: f64,
    /// Newton steps per object at most.
    pub max_iter: usize,
    /// Armijo backtracking (c = 1e-4, halving, 40 trials) on each Newton step.
    pub damped: bool,
}

impl Default for RStep {
    fn default() -> Self {
        Self {
            eta_r: 0.1,
            tol: 1e-12,
            max_iter: 50,
            damped: true,
        }
    }
}

/// J, its parts and the gradients of one evaluation.
#[derive(Clone, Debug, Default)]
pub struct Evaluation {
    /// J of eq. (6).
    pub objective: f64,
    /// Cross-entropy E of eq. (2).
    pub cross_entropy: f64,
    /// Sum of input entropies (KL = E - entropy).
    pub entropy: f64,
    /// dJ/dPhi (k x d).
    pub grad_phi: Vec<f64>,
    /// dJ/dR (n x d), when asked for.
    pub grad_r: Option<Vec<f64>>,
    /// d2J~/dPhi2 (kd x kd, row-major, index `k * d + j`) of the reduced objective, when asked
    /// for (see [`reduced_hessian`]).
    pub hess_phi: Option<Vec<f64>>,
}

/// Logits `a_k = log pi_k - |r - phi_k|^2 / 2`, posteriors q and their log-normaliser.
struct Post {
    a: Vec<f64>,
    q: Vec<f64>,
    lse: f64,
}

impl Post {
    fn new(k: usize) -> Self {
        Self {
            a: vec![0.0; k],
            q: vec![0.0; k],
            lse: 0.0,
        }
    }

    /// Eq. (1) at r (centres read column-wise from `phi_t`, d x k).
    #[inline]
    fn at(&mut self, pb: &Problem<'_>, r: &[f64]) {
        let k = pb.k;
        self.a.copy_from_slice(pb.log_prior);
        for (j, &rj) in r.iter().enumerate() {
            let col = &pb.phi_t[j * k..j * k + k];
            for (a, &c) in self.a.iter_mut().zip(col) {
                let t = rj - c;
                *a -= 0.5 * t * t;
            }
        }
        let m = self.a.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mut z = 0.0;
        for (q, &a) in self.q.iter_mut().zip(&self.a) {
            *q = exp_nonpositive(a - m);
            z += *q;
        }
        let inv = 1.0 / z;
        self.q.iter_mut().for_each(|q| *q *= inv);
        self.lse = m + z.ln();
    }

    /// `-sum_k P_k log q_k`, terms with P_k = 0 skipped.
    #[inline]
    fn cross_entropy(&self, p: &[f64]) -> f64 {
        let mut s = 0.0;
        for (&pk, &a) in p.iter().zip(&self.a) {
            if pk > 0.0 {
                s -= pk * (a - self.lse);
            }
        }
        s
    }
}

#[inline]
fn sq(r: &[f64]) -> f64 {
    r.iter().map(|v| v * v).sum()
}

/// Per-thread scratch of one object.
struct Scratch {
    post: Post,
    trial_post: Post,
    w: Vec<f64>,
    g: Vec<f64>,
    step: Vec<f64>,
    trial: Vec<f64>,
    mu: Vec<f64>,
    h: Vec<f64>,
}

impl Scratch {
    fn new(k: usize, d: usize) -> Self {
        Self {
            post: Post::new(k),
            trial_post: Post::new(k),
            w: vec![0.0; k],
            g: vec![0.0; d],
            step: vec![0.0; d],
            trial: vec![0.0; d],
            mu: vec![0.0; d],
            h: vec![0.0; d * d],
        }
    }
}

/// `w = P - q` into `s.w` and `sum_k phi_k w_k` into `s.g`; returns `sum_k w_k`.
#[inline]
fn residual(pb: &Problem<'_>, p: &[f64], s: &mut Scratch) -> f64 {
    let k = pb.k;
    let mut wsum = 0.0;
    for ((w, &pk), &q) in s.w.iter_mut().zip(p).zip(&s.post.q) {
        *w = pk - q;
        wsum += *w;
    }
    for (j, g) in s.g.iter_mut().enumerate() {
        let col = &pb.phi_t[j * k..j * k + k];
        *g = col.iter().zip(&s.w).map(|(c, w)| c * w).sum();
    }
    wsum
}

/// Gradient of J_n at r (needs `s.post` at r) into `s.g`; returns `|g|^2`.
#[inline]
fn object_gradient(pb: &Problem<'_>, p: &[f64], r: &[f64], eta_r: f64, s: &mut Scratch) -> f64 {
    let wsum = residual(pb, p, s);
    let mut gn = 0.0;
    for (g, &rj) in s.g.iter_mut().zip(r) {
        *g = wsum * rj - *g + 2.0 * eta_r * rj;
        gn += *g * *g;
    }
    gn
}

/// Newton direction `-H^{-1} g` into `s.step`, H = Pw Cov_q(phi) + 2 eta_r I (centred).
fn newton_direction(pb: &Problem<'_>, pw: f64, eta_r: f64, s: &mut Scratch) {
    let (k, d) = (pb.k, pb.d);
    let q = &s.post.q;
    for (j, mu) in s.mu.iter_mut().enumerate() {
        let col = &pb.phi_t[j * k..j * k + k];
        *mu = col.iter().zip(q).map(|(c, q)| c * q).sum();
    }
    for i in 0..d {
        let ci = &pb.phi_t[i * k..i * k + k];
        for j in 0..=i {
            let cj = &pb.phi_t[j * k..j * k + k];
            let (mi, mj) = (s.mu[i], s.mu[j]);
            let c: f64 = ci
                .iter()
                .zip(cj)
                .zip(q)
                .map(|((a, b), q)| q * (a - mi) * (b - mj))
                .sum();
            let v = pw * c + if i == j { 2.0 * eta_r } else { 0.0 };
            s.h[i * d + j] = v;
            s.h[j * d + i] = v;
        }
    }
    solve_spd(&mut s.h, &s.g, &mut s.step, d);
    s.step.iter_mut().for_each(|v| *v = -*v);
}

/// Solves H x = b for a symmetric positive definite H (d x d, overwritten by its Cholesky
/// factor); closed form for d <= 2.
fn solve_spd(h: &mut [f64], b: &[f64], x: &mut [f64], d: usize) {
    if d == 1 {
        x[0] = b[0] / h[0];
        return;
    }
    if d == 2 {
        let (a, bb, c, dd) = (h[0], h[1], h[2], h[3]);
        let det = a * dd - bb * c;
        x[0] = (dd * b[0] - bb * b[1]) / det;
        x[1] = (a * b[1] - c * b[0]) / det;
        return;
    }
    for j in 0..d {
        let mut s = h[j * d + j];
        for t in 0..j {
            s -= h[j * d + t] * h[j * d + t];
        }
        let l = s.max(f64::MIN_POSITIVE).sqrt();
        h[j * d + j] = l;
        for i in j + 1..d {
            let mut s = h[i * d + j];
            for t in 0..j {
                s -= h[i * d + t] * h[j * d + t];
            }
            h[i * d + j] = s / l;
        }
    }
    for i in 0..d {
        let mut s = b[i];
        for t in 0..i {
            s -= h[i * d + t] * x[t];
        }
        x[i] = s / h[i * d + i];
    }
    for i in (0..d).rev() {
        let mut s = x[i];
        for t in i + 1..d {
            s -= h[t * d + i] * x[t];
        }
        x[i] = s / h[i * d + i];
    }
}

/// Damped (or pure) Newton on one object, in place; leaves `s.post` at the final r and
/// returns the number of Newton steps.
fn newton_object(pb: &Problem<'_>, p: &[f64], r: &mut [f64], opt: &RStep, s: &mut Scratch) -> u32 {
    let pw: f64 = p.iter().sum();
    s.post.at(pb, r);
    let mut iters = 0u32;
    for _ in 0..opt.max_iter {
        let gn = object_gradient(pb, p, r, opt.eta_r, s);
        if gn < opt.tol {
            break;
        }
        newton_direction(pb, pw, opt.eta_r, s);
        iters += 1;
        if !opt.damped {
            r.iter_mut().zip(&s.step).for_each(|(v, st)| *v += st);
            s.post.at(pb, r);
            continue;
        }
        let f0 = s.post.cross_entropy(p) + opt.eta_r * sq(r);
        let slope: f64 = s.g.iter().zip(&s.step).map(|(g, st)| g * st).sum();
        if -slope <= 1e-15 * f0.abs().max(1.0) {
            // Newton decrement below what f resolves: take the quadratic-region step, stop
            r.iter_mut().zip(&s.step).for_each(|(v, st)| *v += st);
            s.post.at(pb, r);
            break;
        }
        let mut t = 1.0;
        let mut accepted = false;
        for _ in 0..40 {
            for ((tr, &v), &st) in s.trial.iter_mut().zip(r.iter()).zip(&s.step) {
                *tr = v + t * st;
            }
            s.trial_post.at(pb, &s.trial);
            let ft = s.trial_post.cross_entropy(p) + opt.eta_r * sq(&s.trial);
            if ft <= f0 + 1e-4 * t * slope {
                r.copy_from_slice(&s.trial);
                std::mem::swap(&mut s.post, &mut s.trial_post);
                accepted = true;
                break;
            }
            t *= 0.5;
        }
        if !accepted {
            // no decrease even for tiny steps: the object sits at the rounding floor
            break;
        }
    }
    iters
}

fn check_r(pb: &Problem<'_>, r: &[f64], opt: &RStep) -> Result<()> {
    if r.len() != pb.n * pb.d {
        return Err(EmbedError::ShapeMismatch(format!(
            "R must be {} x {}",
            pb.n, pb.d
        )));
    }
    check_finite(r, "R")?;
    if !(opt.eta_r.is_finite() && opt.eta_r > 0.0) {
        return Err(invalid("eta_r", "must be a finite number > 0"));
    }
    if !(opt.tol.is_finite() && opt.tol >= 0.0) {
        return Err(invalid("tol_r", "must be a finite number >= 0"));
    }
    Ok(())
}

/// Minimises J over R with Phi fixed (the global minimum: each object's problem is strictly
/// convex), in place from the warm start in `r` (n x d). Returns Newton steps per object.
///
/// # Errors
/// Shape / finiteness / parameter errors, and `Cancelled` when `cancel` is raised.
pub fn r_step(
    pb: &Problem<'_>,
    r: &mut [f64],
    opt: &RStep,
    cancel: &AtomicBool,
) -> Result<Vec<u32>> {
    check_r(pb, r, opt)?;
    let (k, d) = (pb.k, pb.d);
    let mut iters = vec![0u32; pb.n];
    r.par_chunks_mut(CHUNK * d)
        .zip(iters.par_chunks_mut(CHUNK))
        .enumerate()
        .try_for_each(|(c, (rc, ic))| {
            if cancel.load(Ordering::Relaxed) {
                return Err(EmbedError::Cancelled);
            }
            let mut s = Scratch::new(k, d);
            let base = c * CHUNK;
            for (i, it) in ic.iter_mut().enumerate() {
                let n = base + i;
                *it = newton_object(
                    pb,
                    &pb.p[n * k..n * k + k],
                    &mut rc[i * d..i * d + d],
                    opt,
                    &mut s,
                );
            }
            Ok(())
        })?;
    Ok(iters)
}

/// Per-chunk partial sums of an evaluation.
struct Partial {
    with_entropy: bool,
    ce: f64,
    ent: f64,
    rr: f64,
    gphi: Vec<f64>,
    /// lower triangle (full kd x kd storage) of the reduced Hessian's data term, or empty
    hess: Vec<f64>,
}

/// Adds object n's terms (with `s.post` at r) to the partial sums; writes dJ/dr_n when asked.
/// `(eta_r, weight)`: the R penalty and the object's sample weight.
fn accumulate(
    pb: &Problem<'_>,
    (p, r): (&[f64], &[f64]),
    s: &mut Scratch,
    part: &mut Partial,
    gr: Option<&mut [f64]>,
    (eta_r, weight): (f64, f64),
) {
    let (k, d) = (pb.k, pb.d);
    part.ce += weight * s.post.cross_entropy(p);
    if gr.is_some() || part.with_entropy {
        for &pk in p {
            if pk > 0.0 {
                part.ent -= weight * pk * pk.ln();
            }
        }
    }
    part.rr += weight * sq(r);
    let wsum = residual(pb, p, s);
    // dE/dphi_k = w_k (phi_k - r), stored column-wise (d x k) and transposed in `combine`
    for (j, &rj) in r.iter().enumerate() {
        let col = &pb.phi_t[j * k..j * k + k];
        let acc = &mut part.gphi[j * k..j * k + k];
        for ((a, &c), &w) in acc.iter_mut().zip(col).zip(&s.w) {
            *a += weight * w * (c - rj);
        }
    }
    if let Some(out) = gr {
        for j in 0..d {
            out[j] = weight * (wsum * r[j] - s.g[j] + 2.0 * eta_r * r[j]);
        }
    }
}

fn combine(pb: &Problem<'_>, parts: Vec<Partial>, eta_r: f64, eta_phi: f64) -> Evaluation {
    let (k, d) = (pb.k, pb.d);
    let mut ce = 0.0;
    let mut ent = 0.0;
    let mut rr = 0.0;
    let mut gphi_t = vec![0.0; k * d];
    let kd = k * d;
    let with_hess = parts.first().is_some_and(|p| !p.hess.is_empty());
    let mut hess = if with_hess {
        vec![0.0; kd * kd]
    } else {
        Vec::new()
    };
    for part in parts {
        ce += part.ce;
        ent += part.ent;
        rr += part.rr;
        for (g, v) in gphi_t.iter_mut().zip(&part.gphi) {
            *g += v;
        }
        for (h, v) in hess.iter_mut().zip(&part.hess) {
            *h += v;
        }
    }
    let hess_phi = with_hess.then(|| {
        for a in 0..kd {
            for b in 0..a {
                hess[b * kd + a] = hess[a * kd + b];
            }
            hess[a * kd + a] += 2.0 * eta_phi;
        }
        hess
    });
    let mut gphi = vec![0.0; k * d];
    for kk in 0..k {
        for j in 0..d {
            gphi[kk * d + j] = gphi_t[j * k + kk];
        }
    }
    let pp = sq(pb.phi);
    for (g, &ph) in gphi.iter_mut().zip(pb.phi) {
        *g += 2.0 * eta_phi * ph;
    }
    Evaluation {
        objective: ce + eta_r * rr + eta_phi * pp,
        cross_entropy: ce,
        entropy: ent,
        grad_phi: gphi,
        grad_r: None,
        hess_phi,
    }
}

/// J, E, the input entropy and dJ/dPhi at (R, Phi); dJ/dR too when `with_grad_r`.
///
/// # Errors
/// Shape / finiteness / parameter errors, `Cancelled`.
pub fn evaluate(
    pb: &Problem<'_>,
    r: &[f64],
    eta_r: f64,
    eta_phi: f64,
    with_grad_r: bool,
    cancel: &AtomicBool,
) -> Result<Evaluation> {
    if !(eta_r.is_finite() && eta_r >= 0.0 && eta_phi.is_finite() && eta_phi >= 0.0) {
        return Err(invalid(
            "eta",
            "eta_r and eta_phi must be finite numbers >= 0",
        ));
    }
    if r.len() != pb.n * pb.d {
        return Err(EmbedError::ShapeMismatch(format!(
            "R must be {} x {}",
            pb.n, pb.d
        )));
    }
    check_finite(r, "R")?;
    let (k, d) = (pb.k, pb.d);
    let mut grad_r = if with_grad_r {
        vec![0.0; pb.n * d]
    } else {
        Vec::new()
    };
    let n_chunks = pb.n.div_ceil(CHUNK);
    let mut gr_chunks: Vec<Option<&mut [f64]>> = if with_grad_r {
        grad_r.chunks_mut(CHUNK * d).map(Some).collect()
    } else {
        (0..n_chunks).map(|_| None).collect()
    };
    let parts: Vec<Partial> = gr_chunks
        .par_iter_mut()
        .enumerate()
        .map(|(c, gr)| {
            if cancel.load(Ordering::Relaxed) {
                return Err(EmbedError::Cancelled);
            }
            let mut s = Scratch::new(k, d);
            let mut part = Partial {
                with_entropy: true,
                ce: 0.0,
                ent: 0.0,
                rr: 0.0,
                gphi: vec![0.0; k * d],
                hess: Vec::new(),
            };
            let lo = c * CHUNK;
            let hi = (lo + CHUNK).min(pb.n);
            for n in lo..hi {
                let rn = &r[n * d..n * d + d];
                s.post.at(pb, rn);
                let out = gr
                    .as_deref_mut()
                    .map(|g| &mut g[(n - lo) * d..(n - lo) * d + d]);
                let pn = &pb.p[n * k..n * k + k];
                let coef = (eta_r, pb.weight(n));
                accumulate(pb, (pn, rn), &mut s, &mut part, out, coef);
            }
            Ok(part)
        })
        .collect::<Result<_>>()?;
    drop(gr_chunks);
    let mut ev = combine(pb, parts, eta_r, eta_phi);
    if with_grad_r {
        ev.grad_r = Some(grad_r);
    }
    Ok(ev)
}

/// One evaluation of the reduced objective `J~(Phi) = min_R J(R, Phi)`: the R-step (in place
/// on the warm start `r`) fused with J and dJ/dPhi at the new R (the envelope theorem makes
/// the latter the gradient of J~). Returns the evaluation (its `entropy`, a constant of P,
/// is not computed: NaN) and the Newton steps per object.
///
/// # Errors
/// Shape / finiteness / parameter errors, `Cancelled`.
pub fn reduced(
    pb: &Problem<'_>,
    r: &mut [f64],
    opt: &RStep,
    eta_phi: f64,
    cancel: &AtomicBool,
) -> Result<(Evaluation, Vec<u32>)> {
    reduced_impl(pb, r, opt, eta_phi, false, cancel)
}

/// [`reduced`] plus the exact Hessian of the reduced objective, `Evaluation::hess_phi`
/// (kd x kd), in the same pass over P.
///
/// With `r_n*(Phi)` the optimum of object n, the implicit function theorem gives
///
/// ```text
/// d2J~/dPhi2 = sum_n [ C_n - B_n^T A_n^{-1} B_n ] + 2 eta_phi I,
/// A_n = d2J/dr_n2 (d x d), B_n = d2J/dr_n dPhi (d x kd), C_n = d2E_n/dPhi2 (kd x kd),
/// ```
///
/// and with `u_l = phi_l - r_n`, `u_bar = sum_l q_l u_l`, `g_l = pw q_l - p_l`
/// (`pw = sum_l p_l`):
/// `A = pw Cov_q(phi) + 2 eta_r I`, `B_l = g_l I - pw q_l (u_l - u_bar) u_l^T`,
/// `C = blockdiag(-g_l I + pw q_l u_l u_l^T) - pw v v^T` with `v_l = q_l u_l`. Each object
/// adds K blocks of d x d and a symmetric rank-(d + 1) update: O(K^2 d^2) per object.
/// J~ is invariant under rotations of Phi about the origin, so at a stationary point the
/// Hessian is singular along `Phi S` for every skew-symmetric S (the caller handles it).
///
/// # Errors
/// Shape / finiteness / parameter errors, `Cancelled`.
pub fn reduced_hessian(
    pb: &Problem<'_>,
    r: &mut [f64],
    opt: &RStep,
    eta_phi: f64,
    cancel: &AtomicBool,
) -> Result<(Evaluation, Vec<u32>)> {
    reduced_impl(pb, r, opt, eta_phi, true, cancel)
}

/// Per-thread scratch of one object's reduced-Hessian term.
struct HessScratch {
    /// The R-step's eta_r (the 2 eta_r I of A).
    eta_r: f64,
    u: Vec<f64>,
    ub: Vec<f64>,
    a: Vec<f64>,
    x: Vec<f64>,
}

impl HessScratch {
    fn new(k: usize, d: usize, eta_r: f64) -> Self {
        Self {
            eta_r,
            u: vec![0.0; k * d],
            ub: vec![0.0; d],
            a: vec![0.0; d * d],
            x: vec![0.0; (d + 1) * k * d],
        }
    }
}

/// Adds object n's term `C - B^T A^{-1} B` (see [`reduced_hessian`]) to the lower triangle of
/// `hess` (kd x kd); `q` the posteriors at the object's optimum `r`.
fn accumulate_hessian(
    pb: &Problem<'_>,
    p: &[f64],
    q: &[f64],
    r: &[f64],
    weight: f64,
    hs: &mut HessScratch,
    hess: &mut [f64],
) {
    let (k, d) = (pb.k, pb.d);
    let kd = k * d;
    let pw: f64 = p.iter().sum();
    for (l, ul) in hs.u.chunks_exact_mut(d).enumerate() {
        for (j, u) in ul.iter_mut().enumerate() {
            *u = pb.phi[l * d + j] - r[j];
        }
    }
    hs.ub.iter_mut().for_each(|v| *v = 0.0);
    for (ul, &ql) in hs.u.chunks_exact(d).zip(q) {
        for (b, &u) in hs.ub.iter_mut().zip(ul) {
            *b += ql * u;
        }
    }
    // A = pw Cov_q(phi) + 2 eta_r I (centred), then its Cholesky factor L (lower)
    for i in 0..d {
        for j in 0..=i {
            let mut c = 0.0;
            for (ul, &ql) in hs.u.chunks_exact(d).zip(q) {
                c += ql * (ul[i] - hs.ub[i]) * (ul[j] - hs.ub[j]);
            }
            hs.a[i * d + j] = pw * c + if i == j { 2.0 * hs.eta_r } else { 0.0 };
        }
    }
    for j in 0..d {
        let mut s = hs.a[j * d + j];
        for t in 0..j {
            s -= hs.a[j * d + t] * hs.a[j * d + t];
        }
        let l = s.max(f64::MIN_POSITIVE).sqrt();
        hs.a[j * d + j] = l;
        for i in j + 1..d {
            let mut s = hs.a[i * d + j];
            for t in 0..j {
                s -= hs.a[i * d + t] * hs.a[j * d + t];
            }
            hs.a[i * d + j] = s / l;
        }
    }
    // row 0: sqrt(pw) v; rows 1..=d: L^{-1} B (forward substitution over the rows of B)
    let sp = pw.sqrt();
    let (x0, xb) = hs.x.split_at_mut(kd);
    for ((x, ul), &ql) in x0.chunks_exact_mut(d).zip(hs.u.chunks_exact(d)).zip(q) {
        for (xv, &u) in x.iter_mut().zip(ul) {
            *xv = sp * ql * u;
        }
    }
    for t in 0..d {
        let (done, rest) = xb.split_at_mut(t * kd);
        let row = &mut rest[..kd];
        for (l, (x, ul)) in row
            .chunks_exact_mut(d)
            .zip(hs.u.chunks_exact(d))
            .enumerate()
        {
            let gl = pw * q[l] - p[l];
            let c = pw * q[l] * (ul[t] - hs.ub[t]);
            for (j, (xv, &u)) in x.iter_mut().zip(ul).enumerate() {
                *xv = if j == t { gl } else { 0.0 } - c * u;
            }
        }
        for s in 0..t {
            let lts = hs.a[t * d + s];
            for (xv, &m) in row.iter_mut().zip(&done[s * kd..s * kd + kd]) {
                *xv -= lts * m;
            }
        }
        let inv = 1.0 / hs.a[t * d + t];
        row.iter_mut().for_each(|v| *v *= inv);
    }
    // block diagonal: -g_l I + pw q_l u_l u_l^T; the object's whole term times its weight
    // (the rank update's rows times its square root)
    for (l, ul) in hs.u.chunks_exact(d).enumerate() {
        let gl = weight * (pw * q[l] - p[l]);
        let c = weight * pw * q[l];
        for i in 0..d {
            let a = l * d + i;
            for j in 0..=i {
                hess[a * kd + l * d + j] += c * ul[i] * ul[j] - if i == j { gl } else { 0.0 };
            }
        }
    }
    if weight != 1.0 {
        let sw = weight.sqrt();
        hs.x.iter_mut().for_each(|v| *v *= sw);
    }
    rank_update(hess, &hs.x, kd);
}

/// `hess -= sum_rows x x^T` on the lower triangle (rows of length kd, up to three per pass).
fn rank_update(hess: &mut [f64], x: &[f64], kd: usize) {
    let mut rows = x.chunks_exact(kd);
    loop {
        match (rows.next(), rows.next(), rows.next()) {
            (Some(x0), Some(x1), Some(x2)) => {
                for a in 0..kd {
                    let (c0, c1, c2) = (x0[a], x1[a], x2[a]);
                    let h = &mut hess[a * kd..a * kd + a + 1];
                    for (((hv, &v0), &v1), &v2) in h.iter_mut().zip(x0).zip(x1).zip(x2) {
                        *hv -= c0 * v0 + c1 * v1 + c2 * v2;
                    }
                }
            }
            (Some(x0), Some(x1), None) => {
                for a in 0..kd {
                    let (c0, c1) = (x0[a], x1[a]);
                    let h = &mut hess[a * kd..a * kd + a + 1];
                    for ((hv, &v0), &v1) in h.iter_mut().zip(x0).zip(x1) {
                        *hv -= c0 * v0 + c1 * v1;
                    }
                }
                break;
            }
            (Some(x0), None, _) => {
                for a in 0..kd {
                    let c0 = x0[a];
                    let h = &mut hess[a * kd..a * kd + a + 1];
                    for (hv, &v0) in h.iter_mut().zip(x0) {
                        *hv -= c0 * v0;
                    }
                }
                break;
            }
            _ => break,
        }
    }
}

fn reduced_impl(
    pb: &Problem<'_>,
    r: &mut [f64],
    opt: &RStep,
    eta_phi: f64,
    with_hessian: bool,
    cancel: &AtomicBool,
) -> Result<(Evaluation, Vec<u32>)> {
    check_r(pb, r, opt)?;
    if !(eta_phi.is_finite() && eta_phi >= 0.0) {
        return Err(invalid("eta_phi", "must be a finite number >= 0"));
    }
    let (k, d) = (pb.k, pb.d);
    let kd = k * d;
    let mut iters = vec![0u32; pb.n];
    let parts: Vec<Partial> = r
        .par_chunks_mut(CHUNK * d)
        .zip(iters.par_chunks_mut(CHUNK))
        .enumerate()
        .map(|(c, (rc, ic))| {
            if cancel.load(Ordering::Relaxed) {
                return Err(EmbedError::Cancelled);
            }
            let mut s = Scratch::new(k, d);
            let mut hs = HessScratch::new(k, d, opt.eta_r);
            let mut part = Partial {
                with_entropy: false,
                ce: 0.0,
                ent: 0.0,
                rr: 0.0,
                gphi: vec![0.0; k * d],
                hess: if with_hessian {
                    vec![0.0; kd * kd]
                } else {
                    Vec::new()
                },
            };
            let base = c * CHUNK;
            for (i, it) in ic.iter_mut().enumerate() {
                let n = base + i;
                let p = &pb.p[n * k..n * k + k];
                let rn = &mut rc[i * d..i * d + d];
                *it = newton_object(pb, p, rn, opt, &mut s);
                let w = pb.weight(n);
                accumulate(pb, (p, rn), &mut s, &mut part, None, (opt.eta_r, w));
                if with_hessian && w > 0.0 {
                    accumulate_hessian(pb, p, &s.post.q, rn, w, &mut hs, &mut part.hess);
                }
            }
            Ok(part)
        })
        .collect::<Result<_>>()?;
    let mut ev = combine(pb, parts, opt.eta_r, eta_phi);
    ev.entropy = f64::NAN;
    Ok((ev, iters))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(
        n: usize,
        k: usize,
        d: usize,
        seed: u64,
    ) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
        let mut p = vec![0.0; n * k];
        for row in p.chunks_mut(k) {
            let mut s = 0.0;
            for v in row.iter_mut() {
                *v = rng.random::<f64>().powi(3);
                s += *v;
            }
            row.iter_mut().for_each(|v| *v /= s);
        }
        let phi: Vec<f64> = (0..k * d)
            .map(|_| rng.random::<f64>() * 4.0 - 2.0)
            .collect();
        let r: Vec<f64> = (0..n * d)
            .map(|_| rng.random::<f64>() * 2.0 - 1.0)
            .collect();
        let lp = vec![-(k as f64).ln(); k];
        (p, phi, r, lp)
    }

    #[test]
    fn gradients_match_finite_differences() {
        for d in [1, 2, 3] {
            let (p, phi, r, lp) = problem(9, 4, d, d as u64);
            let pb = Problem::new(&p, &phi, &lp, 4, d).unwrap();
            let no = AtomicBool::new(false);
            let ev = evaluate(&pb, &r, 0.1, 0.7, true, &no).unwrap();
            let j = |rr: &[f64], ph: &[f64]| {
                let pb = Problem::new(&p, ph, &lp, 4, d).unwrap();
                evaluate(&pb, rr, 0.1, 0.7, false, &no).unwrap().objective
            };
            let h = 1e-6;
            let gr = ev.grad_r.unwrap();
            for i in 0..r.len() {
                let (mut a, mut b) = (r.clone(), r.clone());
                a[i] += h;
                b[i] -= h;
                assert!(((j(&a, &phi) - j(&b, &phi)) / (2.0 * h) - gr[i]).abs() < 1e-6);
            }
            for i in 0..phi.len() {
                let (mut a, mut b) = (phi.clone(), phi.clone());
                a[i] += h;
                b[i] -= h;
                assert!(((j(&r, &a) - j(&r, &b)) / (2.0 * h) - ev.grad_phi[i]).abs() < 1e-6);
            }
        }
    }

    #[test]
    fn r_step_reaches_stationarity_and_reduced_agrees() {
        for d in [1, 2, 4] {
            let (p, phi, r0, lp) = problem(5000, 6, d, 7);
            let pb = Problem::new(&p, &phi, &lp, 6, d).unwrap();
            let no = AtomicBool::new(false);
            let opt = RStep::default();
            let mut r = r0.clone();
            r_step(&pb, &mut r, &opt, &no).unwrap();
            let ev = evaluate(&pb, &r, opt.eta_r, 0.5, true, &no).unwrap();
            let g = ev.grad_r.unwrap();
            // every object stops at |g|^2 < tol = 1e-12
            for gn in g.chunks(d) {
                assert!(gn.iter().map(|v| v * v).sum::<f64>() < 1e-12);
            }
            let mut r2 = r0.clone();
            let (ev2, _) = reduced(&pb, &mut r2, &opt, 0.5, &no).unwrap();
            assert_eq!(r, r2);
            assert_eq!(ev.objective, ev2.objective);
            assert_eq!(ev.grad_phi, ev2.grad_phi);
        }
    }

    #[test]
    fn reduced_hessian_matches_finite_differences_of_the_reduced_gradient() {
        for d in [1, 2, 3] {
            let k = 4;
            let (p, phi, r0, lp) = problem(300, k, d, 11 + d as u64);
            let opt = RStep {
                tol: 1e-26,
                max_iter: 100,
                ..RStep::default()
            };
            let no = AtomicBool::new(false);
            let grad = |ph: &[f64]| {
                let pb = Problem::new(&p, ph, &lp, k, d).unwrap();
                let mut r = r0.clone();
                reduced(&pb, &mut r, &opt, 0.7, &no).unwrap().0.grad_phi
            };
            let pb = Problem::new(&p, &phi, &lp, k, d).unwrap();
            let mut r = r0.clone();
            let (ev, _) = reduced_hessian(&pb, &mut r, &opt, 0.7, &no).unwrap();
            assert_eq!(ev.grad_phi, grad(&phi));
            let hs = ev.hess_phi.unwrap();
            let kd = k * d;
            let scale = hs.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let h = 1e-5;
            for i in 0..kd {
                let (mut a, mut b) = (phi.clone(), phi.clone());
                a[i] += h;
                b[i] -= h;
                let (ga, gb) = (grad(&a), grad(&b));
                for j in 0..kd {
                    let fd = (ga[j] - gb[j]) / (2.0 * h);
                    assert!(
                        (fd - hs[j * kd + i]).abs() < 1e-6 * scale,
                        "d={d} H[{j},{i}] = {} vs fd {fd}",
                        hs[j * kd + i]
                    );
                }
            }
        }
    }

    #[test]
    fn results_do_not_depend_on_thread_count() {
        let (p, phi, r0, lp) = problem(3 * CHUNK + 17, 5, 2, 3);
        let pb = Problem::new(&p, &phi, &lp, 5, 2).unwrap();
        let no = AtomicBool::new(false);
        let run = |t: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .unwrap();
            pool.install(|| {
                let mut r = r0.clone();
                let (ev, _) = reduced(&pb, &mut r, &RStep::default(), 0.3, &no).unwrap();
                (r, ev.objective, ev.grad_phi)
            })
        };
        assert_eq!(run(1), run(3));
    }

    #[test]
    fn integer_weights_equal_duplicated_objects() {
        // weights (2, 0, 1, 3, ...) against the objects repeated that many times: the same J,
        // dJ/dPhi and reduced Hessian; the R-step optimum of an object does not depend on it
        let (k, d, n) = (4, 2, 40);
        let (p, phi, r0, lp) = problem(n, k, d, 21);
        let w: Vec<f64> = (0..n).map(|i| ((i * 7) % 4) as f64).collect();
        let (mut pd, mut rd) = (Vec::new(), Vec::new());
        for (i, &wi) in w.iter().enumerate() {
            for _ in 0..wi as usize {
                pd.extend_from_slice(&p[i * k..i * k + k]);
                rd.extend_from_slice(&r0[i * d..i * d + d]);
            }
        }
        let no = AtomicBool::new(false);
        let opt = RStep {
            tol: 1e-26,
            max_iter: 100,
            ..RStep::default()
        };
        let pw = Problem::new(&p, &phi, &lp, k, d)
            .unwrap()
            .with_weights(&w)
            .unwrap();
        let pdup = Problem::new(&pd, &phi, &lp, k, d).unwrap();
        let mut r = r0.clone();
        let (ew, _) = reduced_hessian(&pw, &mut r, &opt, 0.7, &no).unwrap();
        let mut r2 = rd.clone();
        let (ed, _) = reduced_hessian(&pdup, &mut r2, &opt, 0.7, &no).unwrap();
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * (1.0 + a.abs().max(b.abs()));
        assert!(
            close(ew.objective, ed.objective),
            "{} vs {}",
            ew.objective,
            ed.objective
        );
        for (a, b) in ew.grad_phi.iter().zip(&ed.grad_phi) {
            assert!(close(*a, *b), "{a} vs {b}");
        }
        for (a, b) in ew.hess_phi.unwrap().iter().zip(&ed.hess_phi.unwrap()) {
            assert!(close(*a, *b), "{a} vs {b}");
        }
        // the unweighted R-step gives every object (the zero-weight ones too) the same optimum
        let mut ru = r0.clone();
        r_step(
            &Problem::new(&p, &phi, &lp, k, d).unwrap(),
            &mut ru,
            &opt,
            &no,
        )
        .unwrap();
        assert_eq!(r, ru);
    }

    #[test]
    fn weighted_gradients_match_finite_differences() {
        let (k, d) = (3, 2);
        let (p, phi, r, lp) = problem(7, k, d, 5);
        let w = [0.5, 2.0, 0.0, 1.25, 3.0, 0.1, 1.0];
        let no = AtomicBool::new(false);
        let j = |rr: &[f64], ph: &[f64]| {
            let pb = Problem::new(&p, ph, &lp, k, d)
                .unwrap()
                .with_weights(&w)
                .unwrap();
            evaluate(&pb, rr, 0.1, 0.7, false, &no).unwrap().objective
        };
        let pb = Problem::new(&p, &phi, &lp, k, d)
            .unwrap()
            .with_weights(&w)
            .unwrap();
        let ev = evaluate(&pb, &r, 0.1, 0.7, true, &no).unwrap();
        let gr = ev.grad_r.unwrap();
        let h = 1e-6;
        for i in 0..r.len() {
            let (mut a, mut b) = (r.to_vec(), r.to_vec());
            a[i] += h;
            b[i] -= h;
            assert!(((j(&a, &phi) - j(&b, &phi)) / (2.0 * h) - gr[i]).abs() < 1e-6);
        }
        for i in 0..phi.len() {
            let (mut a, mut b) = (phi.clone(), phi.clone());
            a[i] += h;
            b[i] -= h;
            assert!(((j(&r, &a) - j(&r, &b)) / (2.0 * h) - ev.grad_phi[i]).abs() < 1e-6);
        }
        // object 2 has weight 0: J does not move with it
        let mut a = r.to_vec();
        a[2 * d] += 0.5;
        assert_eq!(j(&a, &phi), j(&r, &phi));
        assert!(
            Problem::new(&p, &phi, &lp, k, d)
                .unwrap()
                .with_weights(&w[..3])
                .is_err()
        );
        let neg = [1.0, -1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
        assert!(
            Problem::new(&p, &phi, &lp, k, d)
                .unwrap()
                .with_weights(&neg)
                .is_err()
        );
    }

    #[test]
    fn rejects_bad_input() {
        let (p, phi, mut r, lp) = problem(4, 3, 2, 1);
        assert!(Problem::new(&p, &phi[..4], &lp, 3, 2).is_err());
        let pb = Problem::new(&p, &phi, &lp, 3, 2).unwrap();
        let no = AtomicBool::new(false);
        let bad = RStep {
            eta_r: 0.0,
            ..RStep::default()
        };
        assert!(r_step(&pb, &mut r, &bad, &no).is_err());
        assert!(r_step(&pb, &mut r[..6], &RStep::default(), &no).is_err());
        let yes = AtomicBool::new(true);
        assert!(matches!(
            r_step(&pb, &mut r, &RStep::default(), &yes),
            Err(EmbedError::Cancelled)
        ));
    }
}
