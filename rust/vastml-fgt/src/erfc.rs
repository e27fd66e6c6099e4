//! Weighted sums of erfc (Raykar's thesis, chapter 4):
//!
//! ```text
//! E(y_j) = sum_i q_i erfc(y_j - x_i)
//! ```
//!
//! The fast method uses Beaulieu's Fourier series
//! `erfc(z) ~ 1 - (4/pi) sum_{n odd < 2p} e^{-n^2 h^2} / n sin(2 n h z)`, valid for |z| up to
//! about r, around the centres of uniform source intervals: the sine of a difference splits
//! into per-interval coefficients, so each target costs O(p) per nearby interval. Intervals
//! farther than r to the right of a target contribute 2 Q_k (erfc is 2 there to within
//! epsilon), those farther to the left nothing; a suffix sum makes the far field O(1).

use std::f64::consts::{FRAC_2_SQRT_PI, PI};
use std::sync::atomic::AtomicBool;

use rayon::prelude::*;

#[cfg(doc)]
use crate::error::FgtError;
use crate::error::{Result, invalid};
use crate::hermite::{SumMethod, check_sums_1d, per_target};
use crate::intervals::Intervals;

/// erfc(z), accurate to a few ulps (musl's algorithm through the `libm` crate).
pub fn erfc(z: f64) -> f64 {
    libm::erfc(z)
}

/// The inverse of erfc on (0, 2), by Newton's method from a rational first guess.
///
/// ```
/// let z = vastml_fgt::erfc_inverse(1e-6);
/// assert!((vastml_fgt::erfc(z) - 1e-6).abs() < 1e-18);
/// ```
pub fn erfc_inverse(p: f64) -> f64 {
    assert!(p > 0.0 && p < 2.0, "erfc_inverse needs p in (0, 2)");
    if p > 1.0 {
        return -erfc_inverse(2.0 - p);
    }
    // Start: erfc(z) ~ e^{-z^2} / (z sqrt(pi)) for large z.
    let mut z = if p < 0.5 {
        let t = (-(p * PI.sqrt()).ln()).max(0.1);
        (t - 0.5 * t.ln()).max(0.1).sqrt()
    } else {
        (1.0 - p) * PI.sqrt() / 2.0
    };
    for _ in 0..100 {
        // d erfc / dz = -2/sqrt(pi) e^{-z^2}; Newton on ln erfc(z) - ln p is better scaled.
        let e = erfc(z);
        let step = (e.ln() - p.ln()) * e / (FRAC_2_SQRT_PI * (-z * z).exp());
        z += step;
        if step.abs() <= 1e-15 * z.abs().max(1.0) {
            break;
        }
    }
    z
}

/// The parameters of the fast erfc sum (§4.7 of the thesis).
#[derive(Clone, Debug, PartialEq)]
pub struct ErfcParameters {
    /// Half-width of the source intervals, r_x.
    pub interval_radius: f64,
    /// Intervals within this distance of a target use the series, r.
    pub cutoff: f64,
    /// Sampling step of the Fourier series, h.
    pub step: f64,
    /// Number of odd-frequency terms, p.
    pub terms: usize,
}

/// The thesis's parameter choice for a target accuracy `epsilon`.
///
/// ```
/// let p = vastml_fgt::erfc_parameters(1e-6);
/// assert_eq!(p.terms, 14);
/// assert!((p.step - 0.1359).abs() < 1e-4);
/// ```
pub fn erfc_parameters(epsilon: f64) -> ErfcParameters {
    let z_eps = erfc_inverse(epsilon);
    let interval_radius = 0.1 * z_eps;
    let cutoff = z_eps + 2.0 * interval_radius;
    let step = PI / (3.0 * (cutoff + erfc_inverse(epsilon / 2.0)));
    let terms = (erfc_inverse(PI.sqrt() * step * epsilon / 2.0) / (2.0 * step)).ceil() as usize;
    ErfcParameters {
        interval_radius,
        cutoff,
        step,
        terms,
    }
}

fn check(sources: &[f64], weights: &[f64], targets: &[f64], epsilon: f64) -> Result<()> {
    check_sums_1d(sources, weights, targets)?;
    if !(epsilon > 0.0 && epsilon < 1.0) {
        return Err(invalid(
            "epsilon",
            format!("must lie in the open interval (0, 1), got {epsilon}"),
        ));
    }
    Ok(())
}

fn fast(
    sources: &[f64],
    weights: &[f64],
    targets: &[f64],
    params: &ErfcParameters,
    cancel: &AtomicBool,
) -> Result<Vec<f64>> {
    let p = params.terms;
    let h = params.step;
    let intervals = Intervals::new(sources, 2.0 * params.interval_radius);
    let k = intervals.len();
    // Per interval: Q, then A_n, B_n for the odd n = 1, 3, ..., 2p - 1 (scaled by e^{-n^2h^2}/n).
    let stride = 1 + 2 * p;
    let scale: Vec<f64> = (0..p)
        .map(|t| {
            let n = (2 * t + 1) as f64;
            (-n * n * h * h).exp() / n
        })
        .collect();
    let coeffs: Vec<f64> = (0..k)
        .into_par_iter()
        .flat_map_iter(|c| {
            let centre = intervals.centre(c);
            let mut row = vec![0.0; stride];
            for &i in intervals.members(c) {
                let q = weights[i];
                row[0] += q;
                // cos / sin of n theta for odd n, by rotating by 2 theta.
                let theta = 2.0 * h * (sources[i] - centre);
                let (s1, c1) = theta.sin_cos();
                let (s2, c2) = (2.0 * theta).sin_cos();
                let (mut s, mut co) = (s1, c1);
                for t in 0..p {
                    row[1 + 2 * t] += q * co;
                    row[2 + 2 * t] += q * s;
                    let s_next = s * c2 + co * s2;
                    co = co * c2 - s * s2;
                    s = s_next;
                }
            }
            for t in 0..p {
                row[1 + 2 * t] *= scale[t];
                row[2 + 2 * t] *= scale[t];
            }
            row.into_iter()
        })
        .collect();
    // suffix[c] = sum of Q over intervals c.. (the far-right ones count 2 Q).
    let mut suffix = vec![0.0; k + 1];
    for c in (0..k).rev() {
        suffix[c] = suffix[c + 1] + coeffs[c * stride];
    }
    let r = params.cutoff;
    per_target(targets, cancel, |y| {
        let near = intervals.near(y, r);
        let mut e = 2.0 * suffix[near.end];
        // Intervals left of the near range all have y - c > r: erfc ~ 0.
        // When the near range is empty, `near.end` is the first interval right of y + r.
        for c in near {
            let row = &coeffs[c * stride..(c + 1) * stride];
            let theta = 2.0 * h * (y - intervals.centre(c));
            let (s1, c1) = theta.sin_cos();
            let (s2, c2) = (2.0 * theta).sin_cos();
            let (mut s, mut co) = (s1, c1);
            let mut series = 0.0;
            for t in 0..p {
                // sin(n(theta_y - theta_x)) = sin n theta_y cos n theta_x - cos n theta_y sin n theta_x
                series += row[1 + 2 * t] * s - row[2 + 2 * t] * co;
                let s_next = s * c2 + co * s2;
                co = co * c2 - s * s2;
                s = s_next;
            }
            e += row[0] - 4.0 / PI * series;
        }
        e
    })
}

fn direct(
    sources: &[f64],
    weights: &[f64],
    targets: &[f64],
    cancel: &AtomicBool,
) -> Result<Vec<f64>> {
    per_target(targets, cancel, |y| {
        sources
            .iter()
            .zip(weights)
            .map(|(&x, &q)| q * erfc(y - x))
            .sum()
    })
}

/// Sums `q_i erfc(y_j - x_i)` for every target, with
/// `max_j |E_hat(y_j) - E(y_j)| <= epsilon * sum_i |q_i|` for the fast method.
///
/// # Errors
///
/// [`FgtError::InvalidParameter`] for epsilon outside (0, 1); [`FgtError::ShapeMismatch`]
/// when weights and sources differ in length; [`FgtError::NonFinite`]; [`FgtError::Empty`];
/// [`FgtError::Cancelled`].
///
/// # Example
///
/// ```
/// use std::sync::atomic::AtomicBool;
/// use vastml_fgt::{SumMethod, erfc, erfc_sum};
///
/// let x: Vec<f64> = (0..1000).map(|i| (i as f64 * 0.618).fract() * 6.0 - 3.0).collect();
/// let q = vec![1.0; x.len()];
/// let e = erfc_sum(&x, &q, &[0.5], 1e-8, SumMethod::Fast, &AtomicBool::new(false)).unwrap();
/// let exact: f64 = x.iter().map(|&xi| erfc(0.5 - xi)).sum();
/// assert!((e[0] - exact).abs() <= 1e-8 * 1000.0);
/// ```
pub fn erfc_sum(
    sources: &[f64],
    weights: &[f64],
    targets: &[f64],
    epsilon: f64,
    method: SumMethod,
    cancel: &AtomicBool,
) -> Result<Vec<f64>> {
    check(sources, weights, targets, epsilon)?;
    let params = erfc_parameters(epsilon);
    let use_fast = match method {
        SumMethod::Direct => false,
        SumMethod::Fast => true,
        SumMethod::Auto => {
            // erfc costs ~20 ns; the series ~ (2p + 8) flops per near interval.
            let n = sources.len() as f64;
            let m = targets.len() as f64;
            let near = (params.cutoff / params.interval_radius + 1.0).min(n);
            let fast_cost = n * (2.0 * params.terms as f64 + 20.0)
                + m * near * (3.0 * params.terms as f64 + 30.0)
                + 2e4;
            fast_cost < n * m * 25.0
        }
    };
    if use_fast {
        fast(sources, weights, targets, &params, cancel)
    } else {
        direct(sources, weights, targets, cancel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_reproduce_the_sanity_check() {
        // Spec §9: erfc^-1(eps) = 2.327 / 3.459 / 4.573, h = 0.1993 / 0.1359 / 0.1033, p = 7 / 14 / 24.
        for (eps, zi, h, p) in [
            (1e-3, 2.327, 0.1993, 7),
            (1e-6, 3.459, 0.1359, 14),
            (1e-10, 4.573, 0.1033, 24),
        ] {
            assert!((erfc_inverse(eps) - zi).abs() < 1e-3);
            let par = erfc_parameters(eps);
            assert!((par.step - h).abs() < 1e-4, "{par:?}");
            assert_eq!(par.terms, p);
        }
    }

    #[test]
    fn series_matches_erfc_within_epsilon_on_its_range() {
        for eps in [1e-3, 1e-6, 1e-10] {
            let par = erfc_parameters(eps);
            let reach = par.cutoff + par.interval_radius;
            let mut worst: f64 = 0.0;
            for i in -1000..=1000 {
                let z = reach * i as f64 / 1000.0;
                let mut s = 0.0;
                for t in 0..par.terms {
                    let n = (2 * t + 1) as f64;
                    s += (-n * n * par.step * par.step).exp() / n * (2.0 * n * par.step * z).sin();
                }
                worst = worst.max((1.0 - 4.0 / PI * s - erfc(z)).abs());
            }
            assert!(worst <= eps, "eps {eps}: series error {worst}");
        }
    }

    #[test]
    fn inverse_round_trips() {
        for p in [1e-300, 1e-30, 1e-10, 1e-3, 0.2, 0.9, 1.0, 1.3, 1.999] {
            let z = erfc_inverse(p);
            assert!(((erfc(z) - p) / p).abs() < 1e-12, "p = {p}");
        }
    }
}
