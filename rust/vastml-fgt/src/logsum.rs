//! The logarithm of a Gauss sum with non-negative weights, to a relative accuracy, where the
//! sum itself may underflow.
//!
//! For a target y with nearest source at squared distance d_min^2,
//!
//! ```text
//! ln G(y) = -d_min^2 / h^2 + ln sum_i q_i exp(-(||y - x_i||^2 - d_min^2) / h^2)
//! ```
//!
//! and the shifted sum is at least the nearest source's weight, so it never underflows. Only
//! the sources within a radius R with R^2 = d_min^2 + L h^2 are summed (a kd-tree finds them);
//! the ones left out add at most W_out e^(-L) to the shifted sum (W_out = their total
//! weight). L starts at ln(1/rtol) and grows until W_out e^(-L) <= rtol S_in, so the
//! result is within a relative `rtol` of the exact sum (|ln G_hat - ln G| <= rtol).

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;
use vastml_spatial::KdTree;

use crate::error::{FgtError, Result, invalid};

/// A kd-tree over weighted sources, for [`LogGaussSum::evaluate`].
#[derive(Debug)]
pub struct LogGaussSum {
    tree: KdTree,
    dim: usize,
    bandwidth: f64,
    /// Weights in tree order.
    weights: Vec<f64>,
    total: f64,
}

/// Leaf size of the tree.
const LEAF_SIZE: usize = 16;
/// Targets per parallel task (also how often the cancel flag is polled).
const TASK: usize = 256;

impl LogGaussSum {
    /// Prepares the sums of `sources` (row-major n x `dim`) with non-negative `weights` and
    /// bandwidth h (kernel exp(-||y - x||^2 / h^2)).
    ///
    /// # Errors
    /// [`FgtError::InvalidParameter`] for a bad bandwidth or a negative weight; shape and
    /// finiteness errors of the sources and weights.
    pub fn new(sources: &[f64], dim: usize, weights: &[f64], bandwidth: f64) -> Result<Self> {
        if !(bandwidth.is_finite() && bandwidth > 0.0) {
            return Err(invalid(
                "bandwidth",
                format!("must be a positive finite number, got {bandwidth}"),
            ));
        }
        let n = crate::check_points(sources, dim, "sources")?;
        if weights.len() != n {
            return Err(FgtError::ShapeMismatch(format!(
                "`weights` has {} values for {n} sources",
                weights.len()
            )));
        }
        if weights.iter().any(|w| !w.is_finite()) {
            return Err(FgtError::NonFinite { name: "weights" });
        }
        if weights.iter().any(|&w| w < 0.0) {
            return Err(invalid(
                "weights",
                "must be non-negative for a log-space sum",
            ));
        }
        let tree = KdTree::build(sources, dim, LEAF_SIZE)?;
        let weights: Vec<f64> = tree.permutation().iter().map(|&i| weights[i]).collect();
        let total = weights.iter().sum();
        Ok(LogGaussSum {
            tree,
            dim,
            bandwidth,
            weights,
            total,
        })
    }

    /// Dimension of the sources.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// ln G(y) at every target (row-major m x dim), within `rtol` in absolute terms of the
    /// logarithm (a relative accuracy of about `rtol` on G); -inf only where every weight is
    /// zero.
    ///
    /// # Errors
    /// Shape and finiteness errors of the targets, a bad `rtol`, and
    /// [`FgtError::Cancelled`].
    pub fn evaluate(&self, targets: &[f64], rtol: f64, cancel: &AtomicBool) -> Result<Vec<f64>> {
        let m = crate::check_points(targets, self.dim, "targets")?;
        if !(rtol > 0.0 && rtol < 1.0) {
            return Err(invalid(
                "rtol",
                format!("must lie in the open interval (0, 1), got {rtol}"),
            ));
        }
        let mut out = vec![0.0; m];
        out.par_chunks_mut(TASK)
            .enumerate()
            .try_for_each(|(task, chunk)| {
                if cancel.load(Ordering::Relaxed) {
                    return Err(FgtError::Cancelled);
                }
                for (k, o) in chunk.iter_mut().enumerate() {
                    let j = task * TASK + k;
                    *o = self.one(&targets[j * self.dim..(j + 1) * self.dim], rtol)?;
                }
                Ok(())
            })?;
        Ok(out)
    }

    fn one(&self, y: &[f64], rtol: f64) -> Result<f64> {
        if self.total <= 0.0 {
            return Ok(f64::NEG_INFINITY);
        }
        let h2 = self.bandwidth * self.bandwidth;
        let d2_min = self.tree.nearest(y, 1)?[0].1;
        let points = self.tree.points_in_tree_order();
        let dim = self.dim;
        let mut extra = (1.0 / rtol).ln();
        loop {
            let radius = (d2_min + extra * h2).sqrt();
            let (mut sum, mut inside) = (0.0, 0.0);
            self.tree
                .for_each_leaf_within_radius(y, radius, |start, end, _| {
                    for i in start..end {
                        let p = &points[i * dim..(i + 1) * dim];
                        let d2: f64 = p.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum();
                        if d2 <= radius * radius {
                            let w = self.weights[i];
                            inside += w;
                            sum += w * (-(d2 - d2_min) / h2).exp();
                        }
                    }
                });
            let outside = (self.total - inside).max(0.0);
            let left_out = outside * (-extra).exp();
            if outside == 0.0 || (sum > 0.0 && left_out <= rtol * sum) {
                return Ok(sum.ln() - d2_min / h2);
            }
            // enough for the bound next time, when the sum stays what it is
            let need = if sum > 0.0 {
                (outside / (rtol * sum)).ln()
            } else {
                extra + 1.0
            };
            extra = need.max(extra + 1.0) * 1.25;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact_log(sources: &[f64], w: &[f64], dim: usize, y: &[f64], h: f64) -> f64 {
        // log-sum-exp of the terms
        let logs: Vec<f64> = sources
            .chunks_exact(dim)
            .zip(w)
            .filter(|(_, w)| **w > 0.0)
            .map(|(x, w)| {
                let d2: f64 = x.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum();
                w.ln() - d2 / (h * h)
            })
            .collect();
        let top = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        top + logs.iter().map(|l| (l - top).exp()).sum::<f64>().ln()
    }

    #[test]
    fn matches_log_sum_exp_near_and_far_where_the_plain_sum_underflows() {
        let dim = 2;
        let n = 3000;
        let mut state = 11u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let sources: Vec<f64> = (0..n * dim).map(|_| next()).collect();
        let weights: Vec<f64> = (0..n)
            .map(|i| if i % 7 == 0 { 0.0 } else { next() })
            .collect();
        let h = 0.01;
        let targets = [0.5, 0.5, 0.02, 0.98, 3.0, 3.0, -40.0, 7.0, 0.3, 0.7];
        let plan = LogGaussSum::new(&sources, dim, &weights, h).unwrap();
        for rtol in [1e-3, 1e-8] {
            let got = plan
                .evaluate(&targets, rtol, &AtomicBool::new(false))
                .unwrap();
            for (j, y) in targets.chunks_exact(dim).enumerate() {
                let want = exact_log(&sources, &weights, dim, y, h);
                assert!(want.is_finite() && got[j].is_finite());
                assert!(
                    (got[j] - want).abs() <= 2.0 * rtol,
                    "rtol {rtol}, target {j}: {} vs {want}",
                    got[j]
                );
            }
        }
        // the far targets do underflow in linear space
        assert_eq!((-(40.0f64 * 40.0) / (h * h)).exp(), 0.0);
    }

    #[test]
    fn all_zero_weights_give_minus_infinity_and_negative_weights_are_refused() {
        let s = [0.0, 1.0, 2.0];
        let plan = LogGaussSum::new(&s, 1, &[0.0; 3], 1.0).unwrap();
        let v = plan
            .evaluate(&[0.5], 1e-6, &AtomicBool::new(false))
            .unwrap();
        assert_eq!(v[0], f64::NEG_INFINITY);
        assert!(LogGaussSum::new(&s, 1, &[1.0, -1.0, 0.0], 1.0).is_err());
    }
}
