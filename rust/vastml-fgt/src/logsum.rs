//! The logarithm of a Gauss sum with non-negative weights, to a relative accuracy, where the
//! sum itself may underflow.
//!
//! For a target y, the sources within a radius R are summed exactly (vectorised, over the
//! kd-tree's leaves in reach), and every subtree the search leaves out, with total weight W and
//! box at squared distance b from y, adds at most W exp(-b / h^2): the sum of those bounds is
//! what is left out. The result is accepted once that is at most `rtol` times the sum found,
//! so it is within a relative `rtol` of the exact sum (|ln G_hat - ln G| <= rtol).
//!
//! Near the data, R^2 = L h^2 with L = ln(1/rtol) + 2.5 (the sum itself). Where that does
//! not certify the sum (far from every source, where it may underflow), the shifted sum
//!
//! ```text
//! ln G(y) = -d_min^2 / h^2 + ln sum_i q_i exp(-(||y - x_i||^2 - d_min^2) / h^2)
//! ```
//!
//! is taken with d_min the distance to the nearest source and R^2 = d_min^2 + L h^2: it is
//! at least the nearest source's weight, so it never underflows; L grows until the bound
//! holds.
//!
//! On a line or in the plane, where the sources fill their bounding box, they are indexed by a
//! [`CellGrid`] instead (one counting sort rather than a partial sort per tree level): the
//! cells in reach are summed, every other cell of the block read is bounded at its distance,
//! and the weight outside the block at the block's. The targets far from the data, which the
//! shifted sum serves, go to a kd-tree over the same sources, built on first need.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;
use vastml_spatial::{CellGrid, KdTree};

use crate::error::{FgtError, Result, invalid};
use crate::exp::exp_nonpositive;
use crate::ifgt::morton_order;
use crate::kernel::{SoaPoints, accumulate, weight_columns};

/// Weighted sources indexed for [`LogGaussSum::evaluate`]: a cell grid on a line or in the
/// plane when their bounding box holds few enough cells, a kd-tree otherwise.
#[derive(Debug)]
pub struct LogGaussSum {
    index: Index,
    /// Sources in the index's order, prepared for the vectorised kernel (difference form, the
    /// degree-12 exponential: the exponent is exact to rounding however far the target).
    soa: SoaPoints,
    /// Weights in the index's order, padded for the kernel.
    wcols: Vec<f64>,
    /// prefix[i] = total weight of the first i sources in the index's order.
    prefix: Vec<f64>,
    dim: usize,
    bandwidth: f64,
    total: f64,
    /// With a grid: the same sums over a kd-tree, built on first use for the targets far from
    /// every source (their search radius reaches most of the grid's cells).
    far: OnceLock<Box<LogGaussSum>>,
}

/// The spatial index of the sources.
#[derive(Debug)]
enum Index {
    Tree(KdTree),
    Grid(CellGrid),
}

/// Side of the grid's cells in bandwidths: about the first search radius at rtol 1e-6
/// (ln(1e6) + MARGIN = 16.3, whose root is 4.04), so a search reads five cells across, three
/// of them in reach. (On uniform 2-D data with about one source per 4 h^2, fit plus 1,200
/// targets: 2.1, 1.2, 0.97, 0.96 and 0.95 ms at 1, 2, 3, 4 and 5 bandwidths; the kd-tree 1.3.)
const GRID_CELL: f64 = 4.0;
/// The grid is used when its cells number at most this many per source (plus a few)...
const GRID_CELLS_PER_SOURCE: usize = 4;
/// ... and at least this fraction of them hold a source. Where most cells are empty (a curve
/// in the plane, tight clusters) the kd-tree's boxes fit the sources better and its searches
/// read fewer of them: 200,000 targets over 7,630 sources on a curve took 88 ms on the grid
/// (29% of its cells occupied) and 72 ms on the tree; on uniform and normal data (51-100%
/// occupied) the grid was as fast or faster.
const GRID_MIN_OCCUPANCY: f64 = 0.4;
/// A grid search that would read more cells than this goes to the kd-tree instead.
const GRID_MAX_BLOCK: usize = 1024;

/// Leaf size of the tree (leaves are summed by the vectorised kernel).
const LEAF_SIZE: usize = 32;
/// The first radius: R^2 = (ln(1/rtol) + MARGIN) h^2 (plus d_min^2 when shifted). The subtrees
/// just beyond R weigh about as much as the sources within it, so at ln(1/rtol) alone their
/// bound rarely certifies the sum, and a second search with a larger radius is needed.
const MARGIN: f64 = 2.5;
/// Targets per parallel task (also how often the cancel flag is polled).
const TASK: usize = 256;
/// Below this (and above zero) a sum near the data is redone with the shift: its terms are
/// near the end of the exponential's range.
const TINY: f64 = 1e-250;

impl LogGaussSum {
    /// Prepares the sums of `sources` (row-major n x `dim`) with non-negative `weights` and
    /// bandwidth h (kernel exp(-||y - x||^2 / h^2)).
    ///
    /// # Errors
    /// [`FgtError::InvalidParameter`] for a bad bandwidth or a negative weight; shape and
    /// finiteness errors of the sources and weights.
    pub fn new(sources: &[f64], dim: usize, weights: &[f64], bandwidth: f64) -> Result<Self> {
        Self::build(sources, dim, weights, bandwidth, true)
    }

    /// [`LogGaussSum::new`], with a cell grid only when `grid` allows it.
    fn build(
        sources: &[f64],
        dim: usize,
        weights: &[f64],
        bandwidth: f64,
        grid: bool,
    ) -> Result<Self> {
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
        let max_cells = GRID_CELLS_PER_SOURCE * n + 64;
        let grid = match grid && dim <= 2 {
            true => CellGrid::build(sources, dim, GRID_CELL * bandwidth, max_cells)?
                .filter(|g| g.occupancy() >= GRID_MIN_OCCUPANCY),
            false => None,
        };
        let index = match grid {
            Some(g) => Index::Grid(g),
            None => Index::Tree(KdTree::build(sources, dim, LEAF_SIZE)?),
        };
        let (points, perm) = match &index {
            Index::Tree(t) => (t.points_in_tree_order(), t.permutation()),
            Index::Grid(g) => (g.points_in_grid_order(), g.permutation()),
        };
        // epsilon 0: the difference form and the degree-12 exponential (relative error below
        // 1e-15 per term), as a relative accuracy needs
        let soa = SoaPoints::new(points, dim, None, bandwidth, 0.0);
        let wcols = weight_columns(weights, 1, Some(perm));
        let mut prefix = Vec::with_capacity(n + 1);
        let mut acc = 0.0;
        prefix.push(0.0);
        for &w in &wcols[..n] {
            acc += w;
            prefix.push(acc);
        }
        Ok(LogGaussSum {
            index,
            soa,
            wcols,
            total: acc,
            prefix,
            dim,
            bandwidth,
            far: OnceLock::new(),
        })
    }

    /// True when the sources are indexed by a cell grid (else by a kd-tree).
    pub fn uses_grid(&self) -> bool {
        matches!(self.index, Index::Grid(_))
    }

    /// The kd-tree sums over the grid's sources, for targets far from all of them.
    fn far(&self, grid: &CellGrid) -> Result<&LogGaussSum> {
        if let Some(f) = self.far.get() {
            return Ok(f);
        }
        let n = grid.len();
        let built = Self::build(
            grid.points_in_grid_order(),
            self.dim,
            &self.wcols[..n],
            self.bandwidth,
            false,
        )?;
        Ok(self.far.get_or_init(|| Box::new(built)))
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
        // Targets in Morton order: consecutive ones reach the same leaves (kept in cache).
        let order = morton_order(targets, self.dim);
        let mut sorted = vec![0.0; m];
        let body = |(task, chunk): (usize, &mut [f64])| {
            if cancel.load(Ordering::Relaxed) {
                return Err(FgtError::Cancelled);
            }
            let mut prepared = vec![0.0; self.dim];
            for (k, o) in chunk.iter_mut().enumerate() {
                let j = order[task * TASK + k];
                let y = &targets[j * self.dim..(j + 1) * self.dim];
                *o = self.one(y, rtol, &mut prepared)?;
            }
            Ok(())
        };
        if crate::par::sequential() {
            sorted.chunks_mut(TASK).enumerate().try_for_each(body)?;
        } else {
            sorted.par_chunks_mut(TASK).enumerate().try_for_each(body)?;
        }
        let mut out = vec![0.0; m];
        for (&j, &v) in order.iter().zip(&sorted) {
            out[j] = v;
        }
        Ok(out)
    }

    /// The sum of exp(-(||y - x_i||^2 - d2_min) / h^2) over the leaves within `radius`, and
    /// the bound on the subtrees left out (each: its weight times the kernel at its box).
    /// With `d2_min` = 0 the leaves are summed by the vectorised kernel; otherwise (far from
    /// the data, the shifted sum) one source at a time from the original coordinates, whose
    /// differences lose nothing to the scaling however far the target.
    fn tree_sum_within(
        &self,
        tree: &KdTree,
        y: &[f64],
        prepared: &[f64],
        radius: f64,
        d2_min: f64,
    ) -> (f64, f64) {
        let inv_h2 = 1.0 / (self.bandwidth * self.bandwidth);
        let shift = d2_min * inv_h2;
        let points = tree.points_in_tree_order();
        let dim = self.dim;
        let mut sum = [0.0];
        let mut left_out = 0.0;
        let mut run: Option<(usize, usize)> = None;
        let flush = |a: usize, b: usize, sum: &mut [f64; 1]| {
            if d2_min == 0.0 {
                accumulate(prepared, 0.0, &self.soa, &self.wcols, a, b, sum);
            } else {
                for i in a..b {
                    let p = &points[i * dim..(i + 1) * dim];
                    let d2: f64 = p.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum();
                    sum[0] += self.wcols[i] * (-(d2 - d2_min) * inv_h2).exp();
                }
            }
        };
        tree.for_each_leaf_within_radius_or_pruned(
            y,
            radius,
            |start, end, _| {
                run = match run {
                    Some((a, b)) if b == start => Some((a, end)),
                    Some((a, b)) => {
                        flush(a, b, &mut sum);
                        Some((start, end))
                    }
                    None => Some((start, end)),
                };
            },
            |start, end, bd| left_out += self.bound(start, end, bd * inv_h2 - shift),
        );
        if let Some((a, b)) = run {
            flush(a, b, &mut sum);
        }
        (sum[0], left_out)
    }

    /// An upper bound on the sum over sources `start..end` of weight times exp(-e), for every
    /// such exponent e at least `e_min`.
    fn bound(&self, start: usize, end: usize, e_min: f64) -> f64 {
        let w = self.prefix[end] - self.prefix[start];
        // the polynomial exp (relative error below 1e-15), rounded up for a bound
        w.max(0.0) * exp_nonpositive(-e_min) * (1.0 + 1e-12)
    }

    /// As [`Self::tree_sum_within`] with the shift 0, over the grid's cells: the runs in reach
    /// summed, each other cell of the block bounded at its distance, and the weight outside the
    /// block at the block's.
    fn grid_sum_within(
        &self,
        grid: &CellGrid,
        prepared: &[f64],
        y: &[f64],
        radius: f64,
    ) -> (f64, f64) {
        let inv_h2 = 1.0 / (self.bandwidth * self.bandwidth);
        let mut sum = [0.0];
        let (mut left_out, mut summed, mut bounded) = (0.0, 0.0, 0.0);
        let beyond = grid.for_each_run_within_radius_or_pruned(
            y,
            radius,
            |a, b| {
                accumulate(prepared, 0.0, &self.soa, &self.wcols, a, b, &mut sum);
                summed += self.prefix[b] - self.prefix[a];
            },
            |a, b, d2| {
                left_out += self.bound(a, b, d2 * inv_h2);
                bounded += self.prefix[b] - self.prefix[a];
            },
        );
        let seen = summed + bounded;
        if beyond.is_finite() {
            // the rest's weight, with room for the rounding of the prefix sums
            let rest = (self.total - seen).max(0.0) + 1e-14 * self.total;
            left_out += rest * exp_nonpositive(-beyond * inv_h2) * (1.0 + 1e-12);
        }
        (sum[0], left_out)
    }

    /// ln G(y) (the same whichever other targets are evaluated with it).
    fn one(&self, y: &[f64], rtol: f64, prepared: &mut [f64]) -> Result<f64> {
        if self.total <= 0.0 {
            return Ok(f64::NEG_INFINITY);
        }
        // the difference form: prepare_target returns 0, and the shift goes in its place
        self.soa.prepare_target(y, prepared);
        match &self.index {
            Index::Tree(tree) => self.one_over_tree(tree, y, rtol, prepared),
            Index::Grid(grid) => self.one_over_grid(grid, y, rtol, prepared),
        }
    }

    /// [`Self::one`] over the kd-tree: near the data, the plain sum (shift 0); where it is too
    /// small for that, the sum shifted by the nearest source's distance.
    fn one_over_tree(&self, tree: &KdTree, y: &[f64], rtol: f64, prepared: &[f64]) -> Result<f64> {
        let h2 = self.bandwidth * self.bandwidth;
        let mut extra = (1.0 / rtol).ln() + MARGIN;
        let mut d2_min = 0.0;
        loop {
            let radius = (d2_min + extra * h2).sqrt();
            let (sum, left_out) = self.tree_sum_within(tree, y, prepared, radius, d2_min);
            if d2_min == 0.0 && sum < TINY {
                d2_min = tree.nearest(y, 1)?[0].1;
                if d2_min > 0.0 {
                    continue;
                }
            }
            match certified(sum, left_out, rtol, extra) {
                Ok(ln) => return Ok(ln - d2_min / h2),
                Err(next) => extra = next,
            }
        }
    }

    /// [`Self::one`] over the grid, for targets near the data; the others (whose sum is tiny,
    /// or whose search would read too many cells) go to the kd-tree.
    fn one_over_grid(
        &self,
        grid: &CellGrid,
        y: &[f64],
        rtol: f64,
        prepared: &mut [f64],
    ) -> Result<f64> {
        let h2 = self.bandwidth * self.bandwidth;
        let mut extra = (1.0 / rtol).ln() + MARGIN;
        loop {
            let radius = (extra * h2).sqrt();
            if grid.block_cells(y, radius) > GRID_MAX_BLOCK {
                return self.far(grid)?.one(y, rtol, prepared);
            }
            let (sum, left_out) = self.grid_sum_within(grid, prepared, y, radius);
            if sum < TINY {
                return self.far(grid)?.one(y, rtol, prepared);
            }
            match certified(sum, left_out, rtol, extra) {
                Ok(ln) => return Ok(ln),
                Err(next) => extra = next,
            }
        }
    }
}

/// ln(sum) when what is left out is at most `rtol` times the sum; otherwise the next search's
/// `extra`. What is left out decays at least as exp(-extra): enough for the bound next time,
/// when the sum stays what it is.
fn certified(sum: f64, left_out: f64, rtol: f64, extra: f64) -> std::result::Result<f64, f64> {
    if left_out == 0.0 || (sum > 0.0 && left_out <= rtol * sum) {
        return Ok(sum.ln());
    }
    let need = if sum > 0.0 {
        extra + (left_out / (rtol * sum)).ln()
    } else {
        extra + 1.0
    };
    Err(need.max(extra + 0.5) + 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Uniform numbers in [0, 1) from a seeded linear congruential generator.
    fn uniform(seed: u64) -> impl FnMut() -> f64 {
        let mut state = seed;
        move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        }
    }

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
        let mut next = uniform(11u64);
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
    fn matches_log_sum_exp_on_heavy_tailed_sources_at_far_targets() {
        // Cauchy-like sources (ratio of uniforms) and targets out to 1e5 spreads, where the
        // log density is about -1e14: the log-space sum against the float64 log-sum-exp
        for dim in [1, 2, 3] {
            let n = 4000;
            let mut next = uniform(7u64 + dim as u64);
            let sources: Vec<f64> = (0..n * dim)
                .map(|_| (next() - 0.5) / (next() + 1e-3))
                .collect();
            let weights: Vec<f64> = (0..n).map(|_| 0.1 + next()).collect();
            let h = 0.005;
            let mut targets: Vec<f64> = sources[..40 * dim].to_vec();
            for k in 0..40 {
                let r = 10f64.powf(-2.0 + 7.0 * k as f64 / 39.0);
                targets.extend((0..dim).map(|c| if c == k % dim { r } else { 0.3 * r }));
            }
            let plan = LogGaussSum::new(&sources, dim, &weights, h).unwrap();
            for rtol in [1e-6, 1e-10] {
                let got = plan
                    .evaluate(&targets, rtol, &AtomicBool::new(false))
                    .unwrap();
                for (j, y) in targets.chunks_exact(dim).enumerate() {
                    let want = exact_log(&sources, &weights, dim, y, h);
                    // rtol, and the rounding of a logarithm of that size
                    let tol = 2.0 * rtol + 8.0 * f64::EPSILON * want.abs();
                    assert!(
                        (got[j] - want).abs() <= tol,
                        "dim {dim}, rtol {rtol}, target {j}: {} vs {want}",
                        got[j]
                    );
                }
            }
        }
    }

    #[test]
    fn grid_and_tree_match_log_sum_exp_from_the_data_to_far_beyond_it() {
        // Sources on a line and in the plane (a uniform bulk plus a tight cluster), indexed by
        // the cell grid and by the kd-tree; targets on sources, between them, just off the
        // data's edge (where the sum is small but does not underflow), and far beyond it
        // (where the grid hands the target to the tree).
        for dim in [1, 2] {
            let n = 2500;
            let mut next = uniform(3u64 + dim as u64);
            let mut sources: Vec<f64> = (0..n * dim).map(|_| next()).collect();
            for v in &mut sources[..200 * dim] {
                *v = 0.25 + 0.01 * *v;
            }
            let weights: Vec<f64> = (0..n)
                .map(|i| if i % 5 == 0 { 0.0 } else { next() })
                .collect();
            let h = 0.006;
            let mut targets: Vec<f64> = sources[..30 * dim].to_vec();
            targets.extend((0..30 * dim).map(|_| next()));
            for k in 0..40 {
                // 0.5 h to 1e4 h beyond the edge x = 1
                let off = 0.5 * h * 10f64.powf(4.3 * k as f64 / 39.0);
                targets.push(1.0 + off);
                if dim == 2 {
                    targets.push(next());
                }
            }
            let grid = LogGaussSum::new(&sources, dim, &weights, h).unwrap();
            let tree = LogGaussSum::build(&sources, dim, &weights, h, false).unwrap();
            assert!(grid.uses_grid() && !tree.uses_grid());
            for rtol in [1e-4, 1e-6, 1e-10] {
                let cancel = AtomicBool::new(false);
                let g = grid.evaluate(&targets, rtol, &cancel).unwrap();
                let t = tree.evaluate(&targets, rtol, &cancel).unwrap();
                for (j, y) in targets.chunks_exact(dim).enumerate() {
                    let want = exact_log(&sources, &weights, dim, y, h);
                    let tol = rtol + 8.0 * f64::EPSILON * want.abs();
                    for (name, got) in [("grid", g[j]), ("tree", t[j])] {
                        assert!(
                            (got - want).abs() <= tol,
                            "{name}, dim {dim}, rtol {rtol}, target {j}: {got} vs {want}"
                        );
                    }
                }
            }
            assert!(grid.far.get().is_some(), "the far targets went to the tree");
        }
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
