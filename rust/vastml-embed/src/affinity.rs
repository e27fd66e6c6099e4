//! Entropic affinities: per-point Gaussian precisions with a given perplexity.
//!
//! For each point n with squared distances d²_nm to its k neighbours, find the precision
//! β_n (σ_n = 1/sqrt(2β_n)) such that the distribution p_m ∝ exp(−β_n d²_nm) has entropy
//! log K (K = perplexity). The root is found in α = log β (thesis §2.3.1) inside the bounds
//! of Theorem 2.2.2, by Newton, Halley or Euler steps with a bisection fallback
//! (Algorithm 1), or by the derivative-free bisection, Brent and Ridders for comparison.
//! Points are visited in a user-given order and warm-started from an earlier point (the
//! previous one, or a parent such as the MST parent); the order is cut into fixed-size
//! chunks that run in parallel, so the result does not depend on the thread count.

use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use crate::error::{EmbedError, Result, check_finite, invalid};
use crate::objective::{CsrIndex, CsrValue};

mod csr;

pub use csr::{CsrMatrix, symmetrize_csr};

/// The root finder of each point's log-precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootMethod {
    /// Newton's method (quadratic; one derivative).
    Newton,
    /// Halley's method (cubic; two derivatives; the most conservative step).
    Halley,
    /// Euler's (Chebyshev's parabola) method (cubic; two derivatives).
    Euler,
    /// Plain bisection of the bracket.
    Bisection,
    /// Brent's method on the bracket (derivative-free).
    Brent,
    /// Ridders' method on the bracket (derivative-free).
    Ridders,
}

impl RootMethod {
    /// The lower-case name used by the Python API.
    pub fn name(self) -> &'static str {
        match self {
            RootMethod::Newton => "newton",
            RootMethod::Halley => "halley",
            RootMethod::Euler => "euler",
            RootMethod::Bisection => "bisection",
            RootMethod::Brent => "brent",
            RootMethod::Ridders => "ridders",
        }
    }

    fn derivatives(self) -> u8 {
        match self {
            RootMethod::Newton => 1,
            RootMethod::Halley | RootMethod::Euler => 2,
            _ => 0,
        }
    }
}

impl FromStr for RootMethod {
    type Err = EmbedError;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "newton" => RootMethod::Newton,
            "halley" => RootMethod::Halley,
            "euler" => RootMethod::Euler,
            "bisection" => RootMethod::Bisection,
            "brent" => RootMethod::Brent,
            "ridders" => RootMethod::Ridders,
            _ => {
                return Err(invalid(
                    "method",
                    format!(
                        "unknown root finder {s:?}; use newton, halley, euler, bisection, brent or ridders"
                    ),
                ));
            }
        })
    }
}

/// Where each point's root finder starts.
#[derive(Debug, Clone, Copy)]
pub enum WarmStart<'a> {
    /// From the previous point of the order (sequential orders such as density or random).
    Previous,
    /// From `parents[n]` (a point index, or −1 for the bounds midpoint), e.g. the MST parent
    /// in breadth-first order. A parent that comes later in the order, or in another chunk,
    /// is ignored (midpoint start).
    Parents(&'a [i64]),
    /// Always from the midpoint of the bounds.
    Bounds,
}

/// Options of the root finder (default: Euler steps, tol 1e-10 on |H − log K|, 20 steps
/// before a forced bisection).
#[derive(Debug, Clone, Copy)]
pub struct RootOptions {
    /// The root finder.
    pub method: RootMethod,
    /// Tolerance on |H − log K| (nats).
    pub tol: f64,
    /// Derivative steps before a forced bisection.
    pub maxit: u32,
}

impl Default for RootOptions {
    fn default() -> Self {
        RootOptions {
            method: RootMethod::Euler,
            tol: 1e-10,
            maxit: 20,
        }
    }
}

/// The affinities of all points and what it took to find them.
#[derive(Debug, Clone)]
pub struct Affinities {
    /// n x k row-major: p_{m|n} over the n-th row's neighbours (rows sum to 1).
    pub probabilities: Vec<f64>,
    /// log β_n.
    pub log_beta: Vec<f64>,
    /// Entropy evaluations per point (each is one O(k) pass).
    pub evaluations: Vec<u32>,
    /// Bisection steps per point (fallbacks of the derivative methods, or all of them).
    pub bisections: Vec<u32>,
    /// log β_L of Theorem 2.2.2 (before any widening).
    pub log_beta_lower: Vec<f64>,
    /// log β_U of Theorem 2.2.2 (before any widening).
    pub log_beta_upper: Vec<f64>,
    /// False where no precision reaches the perplexity (e.g. more than K tied nearest
    /// neighbours, or all distances equal); that row is then the best limit found.
    pub converged: Vec<bool>,
}

/// p₁ of Theorem 2.2.2 (eq. 2.11) for n neighbours and perplexity K: the solution in
/// [3/4, 1] of 2(1 − p₁) log(n / (2(1 − p₁))) = log min(sqrt(2n), K).
pub fn p1_bound(n: usize, perplexity: f64) -> f64 {
    let n = n as f64;
    let target = perplexity.min((2.0 * n).sqrt()).ln();
    // q = 2(1 - p1) in (0, 1/2]; f(q) = q log(n/q) is increasing there (n >= 2).
    let f = |q: f64| q * (n / q).ln() - target;
    if f(0.5) <= 0.0 {
        return 0.75;
    }
    let (mut lo, mut hi) = (0.0f64, 0.5f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if f(mid) > 0.0 {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    1.0 - 0.5 * (0.5 * (lo + hi))
}

/// Summary of one row's squared distances in one pass: (d²_1, first strictly larger d²,
/// d²_N, Σ d²).
fn extremes(d2: &[f64]) -> (f64, f64, f64, f64) {
    let mut d1 = f64::INFINITY;
    let mut d2nd = f64::INFINITY;
    let mut dn = f64::NEG_INFINITY;
    let mut sum = 0.0;
    for &v in d2 {
        // d2nd stays the smallest value strictly above the running minimum.
        if v < d1 {
            d2nd = d1;
            d1 = v;
        } else if v > d1 && v < d2nd {
            d2nd = v;
        }
        dn = dn.max(v);
        sum += v;
    }
    (d1, d2nd, dn, sum)
}

/// (log β_L, log β_U) of Theorem 2.2.2 for one row of squared distances (eqs. 2.9, 2.10),
/// with N := the row length and `p1` from [`p1_bound`]. Ties at the nearest distance use
/// the first strictly larger distance for Δ₂². Returns NaNs when all distances are equal.
pub fn log_beta_bounds(d2: &[f64], perplexity: f64, p1: f64) -> (f64, f64) {
    let (d1, d2nd, dn, _) = extremes(d2);
    bounds_from(d2.len(), d1, d2nd, dn, perplexity, p1)
}

fn bounds_from(len: usize, d1: f64, d2nd: f64, dn: f64, perplexity: f64, p1: f64) -> (f64, f64) {
    let n = len as f64;
    if dn <= d1 || !d2nd.is_finite() {
        return (f64::NAN, f64::NAN);
    }
    let log_ratio = (n / perplexity).ln();
    let first = n / (n - 1.0) * log_ratio / (dn - d1);
    let second = (log_ratio / (dn * dn - d1 * d1)).sqrt();
    let lower = first.max(second);
    let upper = (p1 / (1.0 - p1) * (n - 1.0)).ln() / (d2nd - d1);
    (lower.ln(), upper.ln())
}

/// Lanes of the moment loops: independent partial sums, so the compiler can keep them in
/// SIMD registers (a single running sum is a serial chain it may not reorder).
const LANES: usize = 8;

/// [Z, Σ w s, Σ w s², Σ w s³] with w = exp(−β s) (the last two only for `D` ≥ 1, 2); fills
/// `w` with the unnormalised probabilities.
#[inline(always)]
fn moments_lanes<const D: u8>(s: &[f64], beta: f64, w: &mut [f64]) -> [f64; 4] {
    let mut acc = [[0.0f64; LANES]; 4];
    let split = s.len() - s.len() % LANES;
    let (s_main, s_tail) = s.split_at(split);
    let (w_main, w_tail) = w.split_at_mut(split);
    for (wc, sc) in w_main
        .chunks_exact_mut(LANES)
        .zip(s_main.chunks_exact(LANES))
    {
        for l in 0..LANES {
            let si = sc[l];
            let e = vastml_fgt::exp_nonpositive(-beta * si);
            wc[l] = e;
            let es = e * si;
            acc[0][l] += e;
            acc[1][l] += es;
            if D > 0 {
                acc[2][l] += es * si;
            }
            if D > 1 {
                acc[3][l] += es * si * si;
            }
        }
    }
    for (l, (wi, &si)) in w_tail.iter_mut().zip(s_tail).enumerate() {
        let e = vastml_fgt::exp_nonpositive(-beta * si);
        *wi = e;
        let es = e * si;
        acc[0][l] += e;
        acc[1][l] += es;
        if D > 0 {
            acc[2][l] += es * si;
        }
        if D > 1 {
            acc[3][l] += es * si * si;
        }
    }
    acc.map(|a| a.iter().sum())
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn moments_avx2<const D: u8>(s: &[f64], beta: f64, w: &mut [f64]) -> [f64; 4] {
    moments_lanes::<D>(s, beta, w)
}

/// Whether this CPU runs the AVX2 version of the moment loops.
fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        vastml_spatial::simd_allowed()
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

fn moments<const D: u8>(s: &[f64], beta: f64, w: &mut [f64], avx2: bool) -> [f64; 4] {
    #[cfg(target_arch = "x86_64")]
    {
        if avx2 {
            // SAFETY: `avx2` is only true when the CPU has AVX2 and FMA (`has_avx2`).
            return unsafe { moments_avx2::<D>(s, beta, w) };
        }
    }
    let _ = avx2;
    moments_lanes::<D>(s, beta, w)
}

/// F(α) = H − log K and its first two derivatives in α = log β (thesis §2.3.1), for
/// distances `s` already shifted so that min s = 0. Fills `w` with the unnormalised
/// probabilities; returns (F, F', F'', Z).
fn entropy_gap(
    s: &[f64],
    a: f64,
    log_k: f64,
    derivs: u8,
    w: &mut [f64],
    avx2: bool,
) -> (f64, f64, f64, f64) {
    let beta = a.exp();
    let [z, s1, s2, s3] = match derivs {
        0 => moments::<0>(s, beta, w, avx2),
        1 => moments::<1>(s, beta, w, avx2),
        _ => moments::<2>(s, beta, w, avx2),
    };
    let m1 = s1 / z;
    let f = beta * m1 + z.ln() - log_k;
    if derivs == 0 {
        return (f, f64::NAN, f64::NAN, z);
    }
    let m2 = s2 / z;
    let var = m1 * m1 - m2;
    let g = beta * beta * var;
    let h = if derivs > 1 {
        let m3 = s3 / z;
        2.0 * g + beta * beta * beta * (m3 - 3.0 * m1 * m2 + 2.0 * m1 * m1 * m1)
    } else {
        f64::NAN
    };
    (f, g, h, z)
}

/// Outcome of one row.
#[derive(Debug, Clone, Copy, Default)]
struct RowSolution {
    log_beta: f64,
    evaluations: u32,
    bisections: u32,
    lower: f64,
    upper: f64,
    converged: bool,
}

/// Most entropy evaluations a row may spend (widening included) before giving up.
const MAX_EVALUATIONS: u32 = 400;

struct Row<'a> {
    s: &'a [f64],
    log_k: f64,
    w: &'a mut [f64],
    evaluations: u32,
    avx2: bool,
    /// (α, Z) of the last evaluation: `w` holds its unnormalised probabilities.
    last: (f64, f64),
}

impl Row<'_> {
    fn eval(&mut self, a: f64, derivs: u8) -> (f64, f64, f64) {
        self.evaluations += 1;
        let (f, g, h, z) = entropy_gap(self.s, a, self.log_k, derivs, self.w, self.avx2);
        self.last = (a, z);
        (f, g, h)
    }

    /// Leaves the normalised probabilities at α in `w` (free when α was evaluated last).
    fn finish(&mut self, a: f64) {
        if self.last.0 != a {
            let (_, _, _, z) = entropy_gap(self.s, a, self.log_k, 0, self.w, self.avx2);
            self.last = (a, z);
        }
        let z = self.last.1;
        self.w.iter_mut().for_each(|p| *p /= z);
    }
}

/// The derivative step from a (F, F', F'') or None when it is not usable.
fn derivative_step(method: RootMethod, f: f64, g: f64, h: f64) -> Option<f64> {
    if g >= 0.0 || !g.is_finite() {
        return None; // F is decreasing; g = 0 means a flat region
    }
    let step = match method {
        RootMethod::Newton => -f / g,
        RootMethod::Halley => {
            let den = 2.0 * g * g - f * h;
            if den == 0.0 || !den.is_finite() {
                -f / g
            } else {
                -2.0 * f * g / den
            }
        }
        RootMethod::Euler => {
            let disc = g * g - 2.0 * h * f;
            if disc < 0.0 || !h.is_finite() || h == 0.0 {
                -f / g
            } else {
                // Rationalised root of F + g p + h p²/2 = 0 nearer to p = 0.
                -2.0 * f / (g + g.signum() * disc.sqrt())
            }
        }
        _ => return None,
    };
    step.is_finite().then_some(step)
}

/// Algorithm 1: derivative steps (or bisection) inside a bracket that is narrowed after
/// every evaluation. The bracket is only trusted once F has been seen on each side: if it
/// collapses on an unverified end, it is widened (the thesis bounds never needed it in
/// tests, but ties and round-off must not hang or mislead the solver).
fn solve_bracketed(
    row: &mut Row,
    lo0: f64,
    hi0: f64,
    a0: Option<f64>,
    opts: &RootOptions,
) -> (f64, u32, bool) {
    let method = opts.method;
    let derivs = method.derivatives();
    let (mut lo, mut hi) = (lo0, hi0);
    let (mut lo_seen, mut hi_seen) = (false, false);
    let mut widen = 1.0f64;
    let mut a = match a0 {
        Some(a) if a > lo && a < hi => a,
        _ => 0.5 * (lo + hi),
    };
    let mut bisections = 0u32;
    let mut steps = 0u32;
    let mut best = (f64::INFINITY, a);
    loop {
        let (f, g, h) = row.eval(a, derivs);
        if f.abs() < best.0 {
            best = (f.abs(), a);
        }
        if f.abs() < opts.tol {
            return (a, bisections, true);
        }
        if row.evaluations >= MAX_EVALUATIONS {
            break;
        }
        if f > 0.0 {
            lo = a;
            lo_seen = true;
        } else {
            hi = a;
            hi_seen = true;
        }
        if hi - lo <= 4.0 * f64::EPSILON * a.abs().max(1.0) {
            if !lo_seen {
                lo = a - widen;
                widen *= 2.0;
            } else if !hi_seen {
                hi = a + widen;
                widen *= 2.0;
            } else {
                // The root is bracketed to round-off; |F| cannot get lower in f64.
                break;
            }
        }
        let next = if derivs > 0 && steps < opts.maxit {
            derivative_step(method, f, g, h).map(|p| a + p)
        } else {
            None
        };
        match next {
            Some(x) if x > lo && x < hi => {
                a = x;
                steps += 1;
            }
            _ => {
                a = 0.5 * (lo + hi);
                bisections += 1;
                steps = 0;
            }
        }
    }
    // Not converged to tol: return the best point seen (a round-off-level miss is still
    // a converged row; a row without a root is not).
    let ok = best.0 < 1e3 * opts.tol.max(1e-12);
    if best.1 != a {
        row.eval(best.1, 0);
    }
    (best.1, bisections, ok)
}

/// Evaluates F at both ends and widens until they bracket a root (derivative-free methods).
fn verified_bracket(row: &mut Row, mut lo: f64, mut hi: f64) -> Option<(f64, f64, f64, f64)> {
    let mut flo = row.eval(lo, 0).0;
    let mut widen = 1.0;
    while flo <= 0.0 {
        if row.evaluations >= MAX_EVALUATIONS {
            return None;
        }
        lo -= widen;
        widen *= 2.0;
        flo = row.eval(lo, 0).0;
    }
    let mut fhi = row.eval(hi, 0).0;
    widen = 1.0;
    while fhi >= 0.0 {
        if row.evaluations >= MAX_EVALUATIONS {
            return None;
        }
        hi += widen;
        widen *= 2.0;
        fhi = row.eval(hi, 0).0;
    }
    Some((lo, flo, hi, fhi))
}

fn solve_ridders(row: &mut Row, lo: f64, hi: f64, tol: f64) -> (f64, bool) {
    let Some((mut x1, mut f1, mut x2, mut f2)) = verified_bracket(row, lo, hi) else {
        return (0.5 * (lo + hi), false);
    };
    loop {
        let xm = 0.5 * (x1 + x2);
        let fm = row.eval(xm, 0).0;
        if fm.abs() < tol {
            return (xm, true);
        }
        let s = (fm * fm - f1 * f2).sqrt();
        if s == 0.0 || row.evaluations >= MAX_EVALUATIONS {
            return (xm, false);
        }
        let xn = xm + (xm - x1) * (f1 - f2).signum() * fm / s;
        let fnew = row.eval(xn, 0).0;
        if fnew.abs() < tol {
            return (xn, true);
        }
        if fm.signum() != fnew.signum() {
            (x1, f1, x2, f2) = (xm, fm, xn, fnew);
        } else if f1.signum() != fnew.signum() {
            (x2, f2) = (xn, fnew);
        } else {
            (x1, f1) = (xn, fnew);
        }
        if (x2 - x1).abs() <= 4.0 * f64::EPSILON * xn.abs().max(1.0) {
            return (xn, true);
        }
    }
}

fn solve_brent(row: &mut Row, lo: f64, hi: f64, tol: f64) -> (f64, bool) {
    let Some((mut a, mut fa, mut b, mut fb)) = verified_bracket(row, lo, hi) else {
        return (0.5 * (lo + hi), false);
    };
    let (mut c, mut fc) = (b, fb);
    let (mut d, mut e) = (b - a, b - a);
    loop {
        if (fb > 0.0 && fc > 0.0) || (fb < 0.0 && fc < 0.0) {
            (c, fc) = (a, fa);
            d = b - a;
            e = d;
        }
        if fc.abs() < fb.abs() {
            (a, fa) = (b, fb);
            (b, fb) = (c, fc);
            (c, fc) = (a, fa);
        }
        let tol1 = 2.0 * f64::EPSILON * b.abs().max(1.0);
        let xm = 0.5 * (c - b);
        if fb.abs() < tol || xm.abs() <= tol1 {
            return (b, true);
        }
        if row.evaluations >= MAX_EVALUATIONS {
            return (b, false);
        }
        if e.abs() >= tol1 && fa.abs() > fb.abs() {
            let s = fb / fa;
            let (mut p, mut q);
            if a == c {
                p = 2.0 * xm * s;
                q = 1.0 - s;
            } else {
                let qq = fa / fc;
                let r = fb / fc;
                p = s * (2.0 * xm * qq * (qq - r) - (b - a) * (r - 1.0));
                q = (qq - 1.0) * (r - 1.0) * (s - 1.0);
            }
            if p > 0.0 {
                q = -q;
            }
            p = p.abs();
            let min1 = 3.0 * xm * q - (tol1 * q).abs();
            let min2 = (e * q).abs();
            if 2.0 * p < min1.min(min2) {
                e = d;
                d = p / q;
            } else {
                d = xm;
                e = d;
            }
        } else {
            d = xm;
            e = d;
        }
        (a, fa) = (b, fb);
        b += if d.abs() > tol1 { d } else { tol1.copysign(xm) };
        fb = row.eval(b, 0).0;
    }
}

/// Solves one row: `d2` its squared distances, `s` scratch of the same length, `out`
/// receives the probabilities.
#[allow(clippy::too_many_arguments)]
fn solve_row(
    d2: &[f64],
    summary: (f64, f64, f64),
    perplexity: f64,
    p1: f64,
    a0: Option<f64>,
    opts: &RootOptions,
    s: &mut [f64],
    out: &mut [f64],
    avx2: bool,
) -> RowSolution {
    let k = d2.len();
    let (d1, d2nd, dn) = summary;
    let (lower, upper) = bounds_from(k, d1, d2nd, dn, perplexity, p1);
    if !lower.is_finite() || !upper.is_finite() {
        // All distances equal: every β gives the uniform row (entropy log k > log K).
        out.iter_mut().for_each(|p| *p = 1.0 / k as f64);
        return RowSolution {
            log_beta: f64::NAN,
            evaluations: 0,
            bisections: 0,
            lower,
            upper,
            converged: false,
        };
    }
    for (si, &v) in s.iter_mut().zip(d2) {
        *si = v - d1;
    }
    let mut row = Row {
        s,
        log_k: perplexity.ln(),
        w: out,
        evaluations: 0,
        avx2,
        last: (f64::NAN, f64::NAN),
    };
    let (a, bisections, converged) = match opts.method {
        RootMethod::Brent => {
            let (a, ok) = solve_brent(&mut row, lower, upper, opts.tol);
            (a, 0, ok)
        }
        RootMethod::Ridders => {
            let (a, ok) = solve_ridders(&mut row, lower, upper, opts.tol);
            (a, 0, ok)
        }
        _ => solve_bracketed(&mut row, lower, upper, a0, opts),
    };
    let evaluations = row.evaluations;
    // Probabilities at the returned point: those of the last evaluation, normalised (one
    // more pass, not counted as an iteration, only when the root was not evaluated last).
    row.finish(a);
    RowSolution {
        log_beta: a,
        evaluations,
        bisections,
        lower,
        upper,
        converged,
    }
}

/// Checks the arguments shared by the affinity entry points; returns each point's position
/// in `order`.
fn check_problem(
    sqdist: &[f64],
    n: usize,
    k: usize,
    perplexity: f64,
    opts: &RootOptions,
    order: &[usize],
    warm: WarmStart,
) -> Result<Vec<usize>> {
    if sqdist.len() != n * k {
        return Err(EmbedError::ShapeMismatch(format!(
            "sqdist has {} values, expected n_points * n_neighbors = {}",
            sqdist.len(),
            n * k
        )));
    }
    if k < 2 {
        return Err(invalid(
            "n_neighbors",
            "need at least 2 neighbours per point",
        ));
    }
    if !(perplexity > 1.0 && perplexity < k as f64) {
        return Err(invalid(
            "perplexity",
            format!("must lie in (1, n_neighbors = {k}), got {perplexity}"),
        ));
    }
    if opts.tol.is_nan() || opts.tol <= 0.0 {
        return Err(invalid("tol", "must be positive"));
    }
    check_finite(sqdist, "sqdist")?;
    if sqdist.iter().any(|&v| v < 0.0) {
        return Err(invalid("sqdist", "squared distances must be >= 0"));
    }
    if order.len() != n {
        return Err(invalid(
            "order",
            format!("has {} entries for {n} points", order.len()),
        ));
    }
    let mut pos = vec![usize::MAX; n];
    for (i, &o) in order.iter().enumerate() {
        if o >= n || pos[o] != usize::MAX {
            return Err(invalid("order", "must be a permutation of 0..n"));
        }
        pos[o] = i;
    }
    if let WarmStart::Parents(p) = warm {
        if p.len() != n || p.iter().any(|&j| j < -1 || j >= n as i64) {
            return Err(invalid("parents", "needs one entry per point in -1..n"));
        }
    }
    Ok(pos)
}

/// Rows solved in the order's positions: probabilities (n x k, row t = point order[t])
/// and each row's solution.
struct Solved {
    probabilities: Vec<f64>,
    rows: Vec<RowSolution>,
}

/// Solves every row, in chunks of `chunk` consecutive points of the order that run in
/// parallel (so the result does not depend on the thread count).
#[allow(clippy::too_many_arguments)]
fn solve_all(
    sqdist: &[f64],
    n: usize,
    k: usize,
    perplexity: f64,
    opts: &RootOptions,
    order: &[usize],
    pos: &[usize],
    warm: WarmStart,
    chunk_size: usize,
    cancel: &AtomicBool,
) -> Result<Solved> {
    let chunk = chunk_size.max(1);
    let p1 = p1_bound(k, perplexity);
    let avx2 = has_avx2();
    let mut probabilities = vec![0.0; n * k];
    let mut rows = vec![RowSolution::default(); n];
    probabilities
        .par_chunks_mut(chunk * k)
        .zip(rows.par_chunks_mut(chunk))
        .zip(order.par_chunks(chunk))
        .enumerate()
        .try_for_each(|(c, ((probs, sols), idx))| {
            let start = c * chunk;
            let mut scratch = vec![0.0; k];
            let mut log_scales: Vec<f64> = Vec::with_capacity(idx.len());
            for (j, &pt) in idx.iter().enumerate() {
                if cancel.load(Ordering::Relaxed) {
                    return Err(EmbedError::Cancelled);
                }
                let from = match warm {
                    WarmStart::Previous => j.checked_sub(1),
                    WarmStart::Bounds => None,
                    WarmStart::Parents(p) => usize::try_from(p[pt])
                        .ok()
                        .map(|q| pos[q])
                        .filter(|&q| q >= start && q < start + j)
                        .map(|q| q - start),
                };
                let row = &sqdist[pt * k..(pt + 1) * k];
                let (d1, d2nd, dn, sum) = extremes(row);
                // Warm start in scale-free terms: scaling a row's distances by c scales its
                // β by 1/c (thesis §2.1), so carry log β + log(mean shifted distance) over.
                let log_scale = ((sum - k as f64 * d1) / k as f64).ln();
                let a0 = from
                    .map(|q| {
                        let shifted = sols[q].log_beta + log_scales[q] - log_scale;
                        if shifted.is_finite() {
                            shifted
                        } else {
                            sols[q].log_beta
                        }
                    })
                    .filter(|a| a.is_finite());
                log_scales.push(log_scale);
                sols[j] = solve_row(
                    row,
                    (d1, d2nd, dn),
                    perplexity,
                    p1,
                    a0,
                    opts,
                    &mut scratch,
                    &mut probs[j * k..(j + 1) * k],
                    avx2,
                );
            }
            Ok(())
        })?;
    Ok(Solved {
        probabilities,
        rows,
    })
}

/// Entropic affinities of n points from their k-nearest-neighbour squared distances.
///
/// `sqdist` is n x k row-major (self excluded; any order within a row). `order` is a
/// permutation of 0..n: the points are solved in that order, warm-started as `warm`
/// says, in chunks of `chunk_size` consecutive points of the order that run in parallel.
///
/// # Errors
/// [`EmbedError::InvalidParameter`] for k < 2, perplexity outside (1, k), tol <= 0, a bad
/// order or parents; [`EmbedError::ShapeMismatch`]; [`EmbedError::NonFinite`] or a
/// negative distance; [`EmbedError::Cancelled`].
#[allow(clippy::too_many_arguments)]
pub fn entropic_affinities(
    sqdist: &[f64],
    n_points: usize,
    n_neighbors: usize,
    perplexity: f64,
    opts: &RootOptions,
    order: &[usize],
    warm: WarmStart,
    chunk_size: usize,
    cancel: &AtomicBool,
) -> Result<Affinities> {
    let (n, k) = (n_points, n_neighbors);
    let pos = check_problem(sqdist, n, k, perplexity, opts, order, warm)?;
    let solved = solve_all(
        sqdist, n, k, perplexity, opts, order, &pos, warm, chunk_size, cancel,
    )?;
    let mut probabilities = vec![0.0; n * k];
    probabilities
        .par_chunks_mut(k)
        .zip(pos.par_iter())
        .with_min_len(256)
        .for_each(|(row, &t)| row.copy_from_slice(&solved.probabilities[t * k..(t + 1) * k]));
    let info = AffinityInfo::from_rows(&solved.rows, &pos);
    Ok(Affinities {
        probabilities,
        log_beta: info.log_beta,
        evaluations: info.evaluations,
        bisections: info.bisections,
        log_beta_lower: info.log_beta_lower,
        log_beta_upper: info.log_beta_upper,
        converged: info.converged,
    })
}

/// Per-point results of [`entropic_affinities_csr`] (the matrix itself is separate).
#[derive(Debug, Clone)]
pub struct AffinityInfo {
    /// log β_n.
    pub log_beta: Vec<f64>,
    /// Entropy evaluations per point.
    pub evaluations: Vec<u32>,
    /// Bisection steps per point.
    pub bisections: Vec<u32>,
    /// log β_L of Theorem 2.2.2.
    pub log_beta_lower: Vec<f64>,
    /// log β_U of Theorem 2.2.2.
    pub log_beta_upper: Vec<f64>,
    /// False where no precision reaches the perplexity.
    pub converged: Vec<bool>,
}

impl AffinityInfo {
    fn from_rows(rows: &[RowSolution], pos: &[usize]) -> AffinityInfo {
        let at = |f: fn(&RowSolution) -> f64| pos.iter().map(|&t| f(&rows[t])).collect();
        AffinityInfo {
            log_beta: at(|r| r.log_beta),
            evaluations: pos.iter().map(|&t| rows[t].evaluations).collect(),
            bisections: pos.iter().map(|&t| rows[t].bisections).collect(),
            log_beta_lower: at(|r| r.lower),
            log_beta_upper: at(|r| r.upper),
            converged: pos.iter().map(|&t| rows[t].converged).collect(),
        }
    }
}

/// [`entropic_affinities`] returning the conditional affinities as an n x n CSR matrix
/// ready for SciPy: `indices` (n x k, the neighbours of each row of `sqdist`) give the
/// columns; each row's columns come out increasing, repeated columns summed, so the
/// matrix is in canonical form. The root finding, the warm starts and the per-point
/// results are those of [`entropic_affinities`].
///
/// # Errors
/// As [`entropic_affinities`], and [`EmbedError::ShapeMismatch`] for `indices` of the wrong
/// length or out of 0..n.
#[allow(clippy::too_many_arguments)]
pub fn entropic_affinities_csr<I: CsrIndex, V: CsrValue>(
    sqdist: &[f64],
    indices: &[I],
    n_points: usize,
    n_neighbors: usize,
    perplexity: f64,
    opts: &RootOptions,
    order: &[usize],
    warm: WarmStart,
    chunk_size: usize,
    cancel: &AtomicBool,
) -> Result<(CsrMatrix<I, V>, AffinityInfo)> {
    let (n, k) = (n_points, n_neighbors);
    let pos = check_problem(sqdist, n, k, perplexity, opts, order, warm)?;
    if indices.len() != n * k {
        return Err(EmbedError::ShapeMismatch(format!(
            "indices has {} values, expected n_points * n_neighbors = {}",
            indices.len(),
            n * k
        )));
    }
    if n > u32::MAX as usize || k > u32::MAX as usize || n.saturating_mul(k) > I::MAX {
        return Err(invalid(
            "n_points",
            "at most 2^32 - 1 points and neighbours",
        ));
    }
    if indices.par_iter().any(|&j| !j.below(n)) {
        return Err(EmbedError::ShapeMismatch(
            "neighbour index out of 0..n_points".into(),
        ));
    }
    let solved = solve_all(
        sqdist, n, k, perplexity, opts, order, &pos, warm, chunk_size, cancel,
    )?;
    let csr = csr::rows_to_csr(n, k, indices, &solved.probabilities, &pos);
    Ok((csr, AffinityInfo::from_rows(&solved.rows, &pos)))
}

/// A visiting order given as signed indices (NumPy's int64) as the `usize` indices that
/// [`entropic_affinities`] takes.
///
/// # Errors
/// [`EmbedError::InvalidParameter`] naming `order` when an index is negative.
///
/// # Example
/// ```
/// use vastml_embed::affinity::order_indices;
/// assert_eq!(order_indices(&[2, 0, 1]).unwrap(), vec![2, 0, 1]);
/// assert!(order_indices(&[0, -1]).is_err());
/// ```
pub fn order_indices(order: &[i64]) -> Result<Vec<usize>> {
    order
        .iter()
        .map(|&i| usize::try_from(i).map_err(|_| invalid("order", "holds a negative index")))
        .collect()
}

/// Entropy H (nats) of p ∝ exp(−exp(a) d²) over one row: the oracle used by the tests.
pub fn row_entropy(d2: &[f64], log_beta: f64) -> f64 {
    let (d1, _, _, _) = extremes(d2);
    let s: Vec<f64> = d2.iter().map(|&v| v - d1).collect();
    let mut w = vec![0.0; s.len()];
    entropy_gap(&s, log_beta, 0.0, 0, &mut w, false).0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derivatives_match_finite_differences() {
        let d2 = [0.3, 1.0, 1.7, 2.5, 4.0, 9.0];
        let s: Vec<f64> = d2.iter().map(|v| v - 0.3).collect();
        let mut w = vec![0.0; 6];
        let a = 0.2;
        let h = 1e-5;
        let (_, g, hh, _) = entropy_gap(&s, a, 1.0, 2, &mut w, false);
        let fp = entropy_gap(&s, a + h, 1.0, 2, &mut w, false);
        let fm = entropy_gap(&s, a - h, 1.0, 2, &mut w, false);
        assert!(((fp.0 - fm.0) / (2.0 * h) - g).abs() < 1e-7 * g.abs().max(1.0));
        assert!(((fp.1 - fm.1) / (2.0 * h) - hh).abs() < 1e-6 * hh.abs().max(1.0));
    }

    #[test]
    fn lane_moments_match_a_plain_loop() {
        // 8 full lanes x 2 plus a tail of 5; both instruction sets.
        let s: Vec<f64> = (0..21)
            .map(|i| (i as f64 * 0.37).sin().abs() * 3.0)
            .collect();
        let beta = 1.7;
        let (mut z, mut s1, mut s2, mut s3) = (0.0, 0.0, 0.0, 0.0);
        for &v in &s {
            let e = (-beta * v).exp();
            z += e;
            s1 += e * v;
            s2 += e * v * v;
            s3 += e * v * v * v;
        }
        for avx2 in [false, has_avx2()] {
            let mut w = vec![0.0; s.len()];
            let m = moments::<2>(&s, beta, &mut w, avx2);
            for (got, want) in m.iter().zip([z, s1, s2, s3]) {
                assert!((got - want).abs() <= 1e-14 * want.abs(), "{got} vs {want}");
            }
            for (wi, &v) in w.iter().zip(&s) {
                assert!((wi - (-beta * v).exp()).abs() <= 1e-15);
            }
        }
        let d2 = [4.0, 1.0, 1.0, 9.0, 2.5];
        assert_eq!(extremes(&d2), (1.0, 2.5, 9.0, 17.5));
    }

    #[test]
    fn p1_is_three_quarters_for_large_perplexity() {
        assert_eq!(p1_bound(50, 10.0), 0.75);
        let p = p1_bound(1000, 5.0);
        assert!(p > 0.75 && p < 1.0);
        let q = 2.0 * (1.0 - p);
        assert!((q * (1000.0 / q).ln() - 5f64.ln()).abs() < 1e-12);
    }
}
