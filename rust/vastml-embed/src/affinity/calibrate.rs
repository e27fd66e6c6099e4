//! The calibration of one row: the log-precision α = log β whose distribution
//! p_m ∝ exp(−β d²_m) has entropy log K, inside the bounds of Theorem 2.2.2, by the root
//! finders of [`RootMethod`], with the moment loops they evaluate.

use vastml_core::exp::exp_nonpositive;

use super::{RootMethod, RootOptions};

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
pub(super) fn extremes(d2: &[f64]) -> (f64, f64, f64, f64) {
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
            let e = exp_nonpositive(-beta * si);
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
        let e = exp_nonpositive(-beta * si);
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
pub(super) struct RowSolution {
    /// The log-precision found.
    pub(super) log_beta: f64,
    /// Entropy evaluations spent.
    pub(super) evaluations: u32,
    /// Bisection steps among them.
    pub(super) bisections: u32,
    /// log β_L of Theorem 2.2.2.
    pub(super) lower: f64,
    /// log β_U of Theorem 2.2.2.
    pub(super) upper: f64,
    /// False where no precision reaches the perplexity.
    pub(super) converged: bool,
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

/// What every row of one problem shares: the perplexity K, the p₁ of [`p1_bound`], the
/// root finder and whether the moment loops run the AVX2 version.
#[derive(Debug, Clone, Copy)]
pub(super) struct Calibration<'a> {
    /// The perplexity K.
    pub(super) perplexity: f64,
    /// p₁ of Theorem 2.2.2 for the row length.
    pub(super) p1: f64,
    /// The root finder and its tolerance.
    pub(super) opts: &'a RootOptions,
    /// Whether the CPU runs the AVX2 moment loops.
    pub(super) avx2: bool,
}

impl<'a> Calibration<'a> {
    /// The calibration of rows of `k` neighbours.
    pub(super) fn new(k: usize, perplexity: f64, opts: &'a RootOptions) -> Self {
        Calibration {
            perplexity,
            p1: p1_bound(k, perplexity),
            opts,
            avx2: has_avx2(),
        }
    }
}

/// Solves one row: `d2` its squared distances (`summary` = (d²_1, first larger d², d²_N)),
/// warm-started at `a0` when given; `s` is scratch of the same length, `out` receives the
/// probabilities.
pub(super) fn solve_row(
    d2: &[f64],
    summary: (f64, f64, f64),
    a0: Option<f64>,
    cal: &Calibration,
    s: &mut [f64],
    out: &mut [f64],
) -> RowSolution {
    let Calibration {
        perplexity,
        p1,
        opts,
        avx2,
    } = *cal;
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
