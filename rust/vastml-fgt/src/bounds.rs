//! Error bounds and truncation numbers of the IFGT (section 2.6 of the thesis).
//!
//! With a = ||x_i - c|| (source to expansion centre) and b = ||y - c|| (target to centre),
//! keeping the terms of degree <= p - 1 leaves a point-wise error at most |q_i| delta(p, a, b),
//!
//! ```text
//! delta(p, a, b) = (1/p!) (2ab/h^2)^p exp(-(a - b)^2 / h^2)            (eq. 2.40)
//! ```
//!
//! which, as a function of b, peaks at b*(a, p) = (a + sqrt(a^2 + 2 p h^2)) / 2 (eq. 2.41).
//! Targets farther than the cut-off r_y from the centre are never evaluated, so the worst
//! case is at min(b*, r_y).

/// Hard cap on the truncation number (figtree's `P_UPPER_LIMIT`).
pub const MAX_TRUNCATION: usize = 100;

/// ln delta(p, a, b) computed in log space (no overflow for p up to 100).
pub fn log_truncation_error(p: usize, a: f64, b: f64, h: f64) -> f64 {
    let h2 = h * h;
    let log_fact: f64 = (2..=p).map(|j| (j as f64).ln()).sum();
    let x = 2.0 * a * b / h2;
    if x == 0.0 {
        return f64::NEG_INFINITY;
    }
    p as f64 * x.ln() - log_fact - (a - b) * (a - b) / h2
}

/// The maximiser b*(a, p) of delta over b.
pub fn worst_target_distance(a: f64, p: usize, h: f64) -> f64 {
    0.5 * (a + (a * a + 2.0 * p as f64 * h * h).sqrt())
}

/// ln delta(p, a, min(b*(a, p), reach)): the bound for `p` terms at distance `a` from the
/// centre against the worst point at most `reach` from it on the other side (the bound is
/// symmetric in the two distances). It grows with `a` while `a <= reach`. `p` is at most
/// [`MAX_TRUNCATION`].
pub(crate) fn log_worst_error(p: usize, a: f64, reach: f64, h: f64) -> f64 {
    let b = worst_target_distance(a, p, h).min(reach);
    let h2 = h * h;
    let x = 2.0 * a * b / h2;
    if x == 0.0 {
        return f64::NEG_INFINITY;
    }
    p as f64 * x.ln() - log_factorials()[p] - (a - b) * (a - b) / h2
}

/// Smallest p in 1..=`cap` with delta(p, a, min(b*(a, p), cutoff)) <= epsilon, where
/// `a` is the source's (or the cluster's) radius and `cutoff` the largest target distance
/// from the centre that is evaluated. `None` when even `cap` terms do not reach epsilon.
pub fn truncation_number(a: f64, cutoff: f64, h: f64, epsilon: f64, cap: usize) -> Option<usize> {
    if a == 0.0 || cutoff == 0.0 {
        return Some(1);
    }
    let log_eps = epsilon.ln();
    // Once the worst target distance b*(a, p) (growing with p) passes the cut-off, the
    // worst target sits at the cut-off for every larger p: its logarithm is then taken once
    // (the same arithmetic as `log_worst_error`, so the same values), not once per p.
    let h2 = h * h;
    let at_cutoff = (2.0 * a * cutoff / h2).ln();
    let gauss_at_cutoff = (a - cutoff) * (a - cutoff) / h2;
    let log_fact = log_factorials();
    (1..=cap.min(MAX_TRUNCATION)).find(|&p| {
        let log_delta = if worst_target_distance(a, p, h) >= cutoff {
            p as f64 * at_cutoff - log_fact[p] - gauss_at_cutoff
        } else {
            log_worst_error(p, a, cutoff, h)
        };
        log_delta <= log_eps
    })
}

/// ln(p!) for p = 0..=MAX_TRUNCATION, computed once.
fn log_factorials() -> &'static [f64; MAX_TRUNCATION + 1] {
    static TABLE: std::sync::OnceLock<[f64; MAX_TRUNCATION + 1]> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = [0.0; MAX_TRUNCATION + 1];
        for p in 1..=MAX_TRUNCATION {
            t[p] = t[p - 1] + (p as f64).ln();
        }
        t
    })
}

/// The cut-off distance h sqrt(ln(1/epsilon)) beyond which a single Gaussian term is
/// below epsilon (eq. 2.35), optionally capped by the largest source-target distance.
pub fn cutoff_radius(h: f64, epsilon: f64, max_distance: Option<f64>) -> f64 {
    let r = h * (1.0 / epsilon).ln().sqrt();
    max_distance.map_or(r, |m| r.min(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_holds_pointwise() {
        // Realised truncation error of exp(2 u.v) against delta (spec oracle 4).
        let h = 0.5;
        let mut state = 12345u64;
        let mut rnd = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        for _ in 0..2000 {
            let a = rnd() * 1.0;
            let b = rnd() * 2.0;
            let cos = 2.0 * rnd() - 1.0;
            let p = 1 + (rnd() * 20.0) as usize;
            let z = 2.0 * a * b * cos / (h * h);
            let mut partial = 0.0;
            let mut term = 1.0;
            for n in 0..p {
                if n > 0 {
                    term *= z / n as f64;
                }
                partial += term;
            }
            let err = ((-(a * a) - b * b) / (h * h)).exp() * (z.exp() - partial).abs();
            let bound = log_truncation_error(p, a, b, h).exp();
            assert!(
                err <= bound * (1.0 + 1e-9) + 1e-15,
                "a={a} b={b} p={p}: {err} > {bound}"
            );
        }
    }

    #[test]
    fn worst_target_distance_maximises_delta() {
        let h = 0.4;
        for &(a, p) in &[(0.1, 3), (0.5, 7), (1.0, 12), (0.05, 20)] {
            let bs = worst_target_distance(a, p, h);
            let at = log_truncation_error(p, a, bs, h);
            for i in 1..4000 {
                let b = i as f64 * 1e-3;
                assert!(log_truncation_error(p, a, b, h) <= at + 1e-12);
            }
        }
    }

    #[test]
    fn truncation_number_monotone_in_radius_and_epsilon() {
        let h = 0.4;
        let r = cutoff_radius(h, 1e-3, None);
        let mut last = 0;
        for i in 0..50 {
            let a = i as f64 * 0.02;
            let p = truncation_number(a, r + a, h, 1e-3, MAX_TRUNCATION).unwrap();
            assert!(p >= last, "p must not fall as the radius grows");
            last = p;
        }
        let mut last = usize::MAX;
        for k in 1..12 {
            let eps = 10f64.powi(-k);
            let p = truncation_number(0.3, 0.3 + cutoff_radius(h, eps, None), h, eps, 100).unwrap();
            assert!(p as i64 >= 0 && (last == usize::MAX || p >= last));
            last = p;
        }
    }

    /// The truncation number taken with one logarithm past the cut-off is the one found by
    /// evaluating the bound at every p, over radii, cut-offs, bandwidths and accuracies.
    #[test]
    fn truncation_number_equals_the_bound_at_every_p() {
        for &h in &[0.01, 0.1, 0.7, 3.0] {
            for i in 1..40 {
                let a = h * 0.05 * i as f64;
                for &c in &[0.3, 1.0, 2.5, 8.0] {
                    let cutoff = a + c * h;
                    for k in 2..12 {
                        let eps = 10f64.powi(-k);
                        let slow = (1..=MAX_TRUNCATION)
                            .find(|&p| log_worst_error(p, a, cutoff, h) <= eps.ln());
                        let fast = truncation_number(a, cutoff, h, eps, MAX_TRUNCATION);
                        assert_eq!(fast, slow, "h={h} a={a} cutoff={cutoff} eps={eps}");
                    }
                }
            }
        }
    }

    #[test]
    fn unreachable_bound_is_reported() {
        assert_eq!(truncation_number(50.0, 60.0, 0.01, 1e-12, 10), None);
        assert_eq!(truncation_number(0.0, 1.0, 0.1, 1e-6, 10), Some(1));
    }
}
