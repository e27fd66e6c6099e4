//! Univariate Hermite x Gaussian sums (Raykar's thesis, chapter 3):
//!
//! ```text
//! G_r(y_j) = sum_i q_i He_r((y_j - x_i) / h1) exp(-(y_j - x_i)^2 / h2^2)
//! ```
//!
//! with He_r the probabilists' Hermite polynomials (He_0 = 1, He_1 = u, He_2 = u^2 - 1, ...).
//! With h1 = h and h2 = sqrt(2) h this is, up to a constant, the r-th derivative of a Gaussian
//! kernel density estimate, which is what bandwidth selection and projection pursuit need.
//!
//! The fast method groups sources into uniform intervals of half-width r_x, expands the
//! Gaussian about each interval centre to p terms and the Hermite polynomial exactly (binomial
//! theorem), and folds both into one polynomial of degree p + r - 1 per interval, evaluated by
//! Horner's rule at each target for the intervals within the cut-off. Cost O((p + r) N + (p +
//! r) n M) after an O(p r^2) per-interval fold, with n the number of intervals near a target.
//!
//! The parameters come from rigorous bounds (tighter thesis bounds are not worst cases):
//! the cut-off uses Cramér's inequality |He_r(u)| <= 1.086435 sqrt(r!) e^{u^2/4}, and the
//! truncation number p bounds |He_r| by its polynomial with absolute coefficients and the
//! Taylor remainder of e^{2ab} by (2ab)^p / p! e^{2ab}, maximised over a grid of source and
//! target offsets. Every source's error is then at most epsilon |q_i|.

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;
use vastml_core::exp::exp_nonpositive;
use vastml_core::{Points, check_finite};

use crate::error::{FgtError, Result, invalid};
use crate::intervals::Intervals;

/// How a 1-D sum (Hermite x Gaussian or erfc) is evaluated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SumMethod {
    /// The fast method when its estimated cost is lower, else the direct sum.
    Auto,
    /// The O(MN) sum, parallel over targets (also the slow oracle of the tests).
    Direct,
    /// The epsilon-exact series method.
    Fast,
}

impl SumMethod {
    /// The method's name as the Python API spells it.
    pub fn name(self) -> &'static str {
        match self {
            SumMethod::Auto => "auto",
            SumMethod::Direct => "direct",
            SumMethod::Fast => "fast",
        }
    }
}

impl std::str::FromStr for SumMethod {
    type Err = FgtError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(SumMethod::Auto),
            "direct" => Ok(SumMethod::Direct),
            "fast" => Ok(SumMethod::Fast),
            other => Err(invalid(
                "method",
                format!("must be one of 'auto', 'direct', 'fast', got {other:?}"),
            )),
        }
    }
}

/// Cramér's constant: |He_r(u)| e^{-u^2/4} <= K sqrt(r!).
const CRAMER: f64 = 1.086_435;
/// Largest truncation number tried before the interval is halved.
const MAX_P: usize = 60;
/// Highest Hermite order accepted.
pub const MAX_ORDER: usize = 30;

/// He_r(u) by the three-term recurrence He_{k+1} = u He_k - k He_{k-1}.
///
/// ```
/// assert_eq!(vastml_fgt::hermite(4, 2.0), 16.0 - 24.0 + 3.0);
/// ```
pub fn hermite(order: usize, u: f64) -> f64 {
    let (mut prev, mut cur) = (1.0, u);
    if order == 0 {
        return prev;
    }
    for k in 1..order {
        let next = u * cur - k as f64 * prev;
        prev = cur;
        cur = next;
    }
    cur
}

/// Coefficients a_l of He_r(u) = sum_l a_l u^{r - 2l}: a_l = (-1)^l r! / (2^l l! (r - 2l)!).
pub fn hermite_coefficients(order: usize) -> Vec<f64> {
    let mut a = vec![0.0; order / 2 + 1];
    a[0] = 1.0;
    for l in 1..a.len() {
        // a_l / a_{l-1} = -(r - 2l + 2)(r - 2l + 1) / (2 l)
        let r = order as f64;
        let l_f = l as f64;
        a[l] = -a[l - 1] * (r - 2.0 * l_f + 2.0) * (r - 2.0 * l_f + 1.0) / (2.0 * l_f);
    }
    a
}

/// The parameters of the fast method for one problem.
#[derive(Clone, Debug, PartialEq)]
pub struct HermiteParameters {
    /// Half-width of the source intervals.
    pub interval_radius: f64,
    /// Sources farther than this from a target are ignored.
    pub cutoff: f64,
    /// Taylor terms of the Gaussian (degrees 0..p-1).
    pub truncation: usize,
}

fn ln_factorial(n: usize) -> f64 {
    (2..=n).map(|k| (k as f64).ln()).sum()
}

/// Chooses interval radius, cut-off and truncation number so that each source's error is at
/// most `epsilon |q_i|`; `None` when the kernel does not decay (h2 >= 2 h1).
pub fn hermite_parameters(
    order: usize,
    h1: f64,
    h2: f64,
    epsilon: f64,
) -> Option<HermiteParameters> {
    // |He_r((y-x)/h1)| e^{-(y-x)^2/h2^2} <= K sqrt(r!) e^{-decay (y-x)^2}.
    let decay = 1.0 / (h2 * h2) - 1.0 / (4.0 * h1 * h1);
    if decay <= 0.0 {
        return None;
    }
    let log_bound = (CRAMER.ln() + 0.5 * ln_factorial(order) - epsilon.ln()).max(0.0);
    let cutoff = (log_bound / decay).sqrt();
    let abs_coeffs: Vec<f64> = hermite_coefficients(order)
        .iter()
        .map(|c| c.abs())
        .collect();
    let ln_eps = epsilon.ln();
    let mut radius = 0.5 * h1.min(h2 / std::f64::consts::SQRT_2);
    loop {
        let reach = radius + cutoff;
        // Worst case over source offset a <= radius and target offset b <= reach.
        const GRID_A: usize = 12;
        const GRID_B: usize = 400;
        let mut chosen = None;
        'p: for p in 1..=MAX_P {
            let ln_pfact = ln_factorial(p);
            for ia in 1..=GRID_A {
                let a = radius * ia as f64 / GRID_A as f64;
                for ib in 0..=GRID_B {
                    // A slightly finer grid near the source keeps the maximum honest.
                    let b = reach * ib as f64 / GRID_B as f64;
                    let u = (a + b) / h1;
                    let poly: f64 = abs_coeffs
                        .iter()
                        .enumerate()
                        .map(|(l, c)| c * u.powi((order - 2 * l) as i32))
                        .sum();
                    let z = 2.0 * a * b / (h2 * h2);
                    if z == 0.0 {
                        continue;
                    }
                    let ln_err = poly.max(f64::MIN_POSITIVE).ln() + p as f64 * z.ln()
                        - ln_pfact
                        - (a - b) * (a - b) / (h2 * h2);
                    // A 1% margin covers the maximum falling between grid points.
                    if ln_err + 0.01 > ln_eps {
                        continue 'p;
                    }
                }
            }
            chosen = Some(p);
            break;
        }
        if let Some(p) = chosen {
            return Some(HermiteParameters {
                interval_radius: radius,
                cutoff,
                truncation: p,
            });
        }
        radius *= 0.5;
    }
}

/// The checks every 1-D sum (Hermite x Gaussian, erfc) makes of its inputs: non-empty finite
/// sources, one finite weight per source, finite (possibly no) targets.
///
/// # Errors
/// [`FgtError::Empty`], [`FgtError::ShapeMismatch`] or [`FgtError::NonFinite`] naming the
/// argument.
pub(crate) fn check_sums_1d(sources: &[f64], weights: &[f64], targets: &[f64]) -> Result<()> {
    Points::new("sources", sources, 1)?;
    if weights.len() != sources.len() {
        return Err(FgtError::ShapeMismatch(format!(
            "`weights` has {} values for {} sources",
            weights.len(),
            sources.len()
        )));
    }
    check_finite("weights", weights, 1)?;
    check_finite("targets", targets, 1)?;
    Ok(())
}

fn check_inputs(
    sources: &[f64],
    weights: &[f64],
    targets: &[f64],
    order: usize,
    h1: f64,
    h2: f64,
    epsilon: f64,
) -> Result<()> {
    check_sums_1d(sources, weights, targets)?;
    if order > MAX_ORDER {
        return Err(invalid(
            "order",
            format!("must be at most {MAX_ORDER}, got {order}"),
        ));
    }
    for (name, h) in [("h1", h1), ("h2", h2)] {
        if !(h.is_finite() && h > 0.0) {
            return Err(invalid(
                name,
                format!("must be a positive finite number, got {h}"),
            ));
        }
    }
    if !(epsilon > 0.0 && epsilon < 1.0) {
        return Err(invalid(
            "epsilon",
            format!("must lie in the open interval (0, 1), got {epsilon}"),
        ));
    }
    Ok(())
}

/// Targets per parallel task and per cancellation check.
const CHUNK: usize = 256;

/// Runs `f` over chunks of `targets` in parallel, writing into the returned vector and
/// stopping with [`FgtError::Cancelled`] when `cancel` is set.
pub(crate) fn per_target<F>(targets: &[f64], cancel: &AtomicBool, f: F) -> Result<Vec<f64>>
where
    F: Fn(f64) -> f64 + Sync,
{
    let mut out = vec![0.0; targets.len()];
    out.par_chunks_mut(CHUNK)
        .zip(targets.par_chunks(CHUNK))
        .try_for_each(|(o, t)| {
            if cancel.load(Ordering::Relaxed) {
                return Err(FgtError::Cancelled);
            }
            for (oj, &y) in o.iter_mut().zip(t) {
                *oj = f(y);
            }
            Ok(())
        })?;
    Ok(out)
}

/// Sources, weights, order and the two bandwidths of one sum.
struct Problem<'a> {
    sources: &'a [f64],
    weights: &'a [f64],
    order: usize,
    h1: f64,
    h2: f64,
}

/// The O(MN) Hermite x Gaussian sum, parallel over targets.
fn direct(problem: &Problem<'_>, targets: &[f64], cancel: &AtomicBool) -> Result<Vec<f64>> {
    let Problem {
        sources,
        weights,
        order,
        h1,
        h2,
    } = *problem;
    let (inv1, inv2sq) = (1.0 / h1, 1.0 / (h2 * h2));
    per_target(targets, cancel, |y| {
        sources
            .iter()
            .zip(weights)
            .map(|(&x, &q)| {
                let d = y - x;
                q * hermite(order, d * inv1) * exp_nonpositive(-d * d * inv2sq)
            })
            .sum()
    })
}

/// The series method with the given parameters.
fn fast(
    problem: &Problem<'_>,
    targets: &[f64],
    params: &HermiteParameters,
    cancel: &AtomicBool,
) -> Result<Vec<f64>> {
    let Problem {
        sources,
        weights,
        order,
        h1,
        h2,
    } = *problem;
    let p = params.truncation;
    let degree = p + order; // coefficients per interval (degrees 0..p+r-1)
    let intervals = Intervals::new(sources, 2.0 * params.interval_radius);
    let rho = h2 / h1;
    let a_l = hermite_coefficients(order);
    // Fold the Gaussian's Taylor coefficients, the Hermite binomial expansion and rho^j into
    // factor[k][l][m] multiplying M_{k+m} in the coefficient of b^{k + r - 2l - m}.
    let mut two_k_over_kfact = vec![1.0; p];
    for k in 1..p {
        two_k_over_kfact[k] = two_k_over_kfact[k - 1] * 2.0 / k as f64;
    }
    let inv_h2 = 1.0 / h2;
    let coeffs: Vec<f64> = (0..intervals.len())
        .into_par_iter()
        .flat_map_iter(|n| {
            let c = intervals.centre(n);
            // Moments M_s = sum_i q_i e^{-a_i^2} a_i^s, a_i = (x_i - c) / h2, s < p + r.
            let mut moments = vec![0.0; degree];
            for &i in intervals.members(n) {
                let a = (sources[i] - c) * inv_h2;
                let mut t = weights[i] * exp_nonpositive(-a * a);
                for m in moments.iter_mut() {
                    *m += t;
                    t *= a;
                }
            }
            let mut d = vec![0.0; degree];
            for (k, &gk) in two_k_over_kfact.iter().enumerate() {
                for (l, &al) in a_l.iter().enumerate() {
                    let e = order - 2 * l;
                    let scale = gk * al * rho.powi(e as i32);
                    let mut binom = 1.0; // C(e, m) (-1)^m
                    for m in 0..=e {
                        d[k + e - m] += scale * binom * moments[k + m];
                        binom *= -((e - m) as f64) / (m as f64 + 1.0);
                    }
                }
            }
            d.into_iter()
        })
        .collect();
    let reach = params.interval_radius + params.cutoff;
    per_target(targets, cancel, |y| {
        let mut g = 0.0;
        for n in intervals.near(y, reach) {
            let b = (y - intervals.centre(n)) * inv_h2;
            let d = &coeffs[n * degree..(n + 1) * degree];
            let poly = d.iter().rev().fold(0.0, |acc, &c| acc * b + c);
            g += poly * exp_nonpositive(-b * b);
        }
        g
    })
}

/// Estimated cost (arbitrary units) of the direct and fast methods.
fn costs(n: usize, m: usize, order: usize, params: &HermiteParameters) -> (f64, f64) {
    let direct = n as f64 * m as f64 * (12.0 + order as f64);
    let per_interval = (params.truncation + order) as f64;
    let near =
        2.0 * (params.cutoff + params.interval_radius) / (2.0 * params.interval_radius) + 1.0;
    let fast = n as f64 * (per_interval + 12.0)
        + m as f64 * near.min(n as f64) * (per_interval + 14.0)
        + 2e4;
    (direct, fast)
}

/// Sums `q_i He_r((y_j - x_i) / h1) exp(-(y_j - x_i)^2 / h2^2)` over 1-D sources for every
/// target, with `max_j |G_hat(y_j) - G(y_j)| <= epsilon * sum_i |q_i|`.
///
/// `SumMethod::Fast` needs `h2 < 2 h1` (otherwise the summand does not decay and there is
/// no cut-off); `Auto` falls back to the direct sum then.
///
/// # Errors
///
/// [`FgtError::InvalidParameter`] for h1, h2 not positive, epsilon outside (0, 1), order
/// above [`MAX_ORDER`] or `Fast` with h2 >= 2 h1; [`FgtError::ShapeMismatch`] when weights and
/// sources differ in length; [`FgtError::NonFinite`], [`FgtError::Empty`];
/// [`FgtError::Cancelled`] when `cancel` is set.
///
/// # Example
///
/// ```
/// use std::sync::atomic::AtomicBool;
/// use vastml_fgt::{SumMethod, hermite, hermite_gauss_sum};
///
/// let x: Vec<f64> = (0..2000).map(|i| (i as f64 * 0.618).fract()).collect();
/// let q = vec![1.0; x.len()];
/// let y = [0.25, 0.5];
/// let (h1, h2) = (0.1, 0.1 * 2f64.sqrt());
/// let g = hermite_gauss_sum(&x, &q, &y, 4, h1, h2, 1e-8, SumMethod::Fast, &AtomicBool::new(false)).unwrap();
/// let exact: f64 = x.iter().map(|&xi| {
///     let d = 0.5 - xi;
///     hermite(4, d / h1) * (-d * d / (h2 * h2)).exp()
/// }).sum();
/// assert!((g[1] - exact).abs() <= 1e-8 * 2000.0);
/// ```
// Public signature of the sum (its arguments are the thesis's inputs, one each); the bindings
// call it as is, so a parameter struct would change the API, not just this file.
#[allow(clippy::too_many_arguments)]
pub fn hermite_gauss_sum(
    sources: &[f64],
    weights: &[f64],
    targets: &[f64],
    order: usize,
    h1: f64,
    h2: f64,
    epsilon: f64,
    method: SumMethod,
    cancel: &AtomicBool,
) -> Result<Vec<f64>> {
    check_inputs(sources, weights, targets, order, h1, h2, epsilon)?;
    let params = hermite_parameters(order, h1, h2, epsilon);
    let use_fast = match (method, &params) {
        (SumMethod::Direct, _) => false,
        (SumMethod::Fast, None) => {
            return Err(invalid(
                "h2",
                format!(
                    "the fast method needs h2 < 2 h1 (the summand must decay), got h1 = {h1}, h2 = {h2}"
                ),
            ));
        }
        (SumMethod::Fast, Some(_)) => true,
        (SumMethod::Auto, None) => false,
        (SumMethod::Auto, Some(p)) => {
            let (d, f) = costs(sources.len(), targets.len(), order, p);
            f < d
        }
    };
    let problem = Problem {
        sources,
        weights,
        order,
        h1,
        h2,
    };
    match params {
        Some(p) if use_fast => fast(&problem, targets, &p, cancel),
        _ => direct(&problem, targets, cancel),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_coefficients_equal_recurrence() {
        for r in 0..=12 {
            let a = hermite_coefficients(r);
            for &u in &[-3.0, -0.7, 0.0, 0.4, 2.5] {
                let explicit: f64 = a
                    .iter()
                    .enumerate()
                    .map(|(l, c)| c * f64::powi(u, (r - 2 * l) as i32))
                    .sum();
                let rec = hermite(r, u);
                assert!(
                    (explicit - rec).abs() <= 1e-9 * (1.0 + rec.abs()),
                    "r={r} u={u}"
                );
            }
        }
        assert_eq!(hermite(2, 3.0), 8.0);
        assert_eq!(hermite_coefficients(6), vec![1.0, -15.0, 45.0, -15.0]);
    }

    #[test]
    fn cramer_bound_holds() {
        for r in 0..=20 {
            let bound = CRAMER * ln_factorial(r).mul_add(0.5, 0.0).exp();
            for i in -400..=400 {
                let u = i as f64 * 0.05;
                assert!(hermite(r, u).abs() * (-u * u / 4.0).exp() <= bound * (1.0 + 1e-12));
            }
        }
    }

    #[test]
    fn parameters_need_decay_and_grow_with_precision() {
        assert!(hermite_parameters(2, 1.0, 2.0, 1e-6).is_none());
        let loose = hermite_parameters(4, 0.1, 0.1 * 2f64.sqrt(), 1e-3).unwrap();
        let tight = hermite_parameters(4, 0.1, 0.1 * 2f64.sqrt(), 1e-9).unwrap();
        assert!(tight.truncation >= loose.truncation);
        assert!(tight.cutoff > loose.cutoff);
        assert!(loose.truncation <= MAX_P);
    }
}
