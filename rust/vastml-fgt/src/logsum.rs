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
use vastml_spatial::{Block, CellGrid, KdTree};

use crate::error::{FgtError, Result, invalid};
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

/// See [`LogGaussSum::builds_inline`].
const INLINE_SOURCES: usize = 1 << 14;
/// Leaf size of the tree (leaves are summed by the vectorised kernel).
const LEAF_SIZE: usize = 32;
/// The first radius: R^2 = (ln(1/rtol) + MARGIN) h^2 (plus d_min^2 when shifted). The subtrees
/// just beyond R weigh about as much as the sources within it, so at ln(1/rtol) alone their
/// bound rarely certifies the sum, and a second search with a larger radius is needed.
const MARGIN: f64 = 2.5;
/// Targets per parallel task (also how often the cancel flag is polled), at most...
const TASK: usize = 256;
/// ... and at least this many, with about TASKS_PER_THREAD tasks per thread: a call of a
/// thousand targets split in 256s left one of two threads with three tasks and the other
/// with two.
const MIN_TASK: usize = 32;
const TASKS_PER_THREAD: usize = 4;
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
        let soa = || SoaPoints::new(points, dim, None, bandwidth, 0.0);
        let weighed = || {
            let wcols = weight_columns(weights, 1, Some(perm));
            // written in place: pushed, the running sum went through memory at every step
            let mut prefix = vec![0.0; n + 1];
            let mut acc = 0.0;
            for (p, &w) in prefix[1..].iter_mut().zip(&wcols[..n]) {
                acc += w;
                *p = acc;
            }
            (wcols, prefix, acc)
        };
        // side by side on a pool's threads when the build was handed to one (see
        // builds_inline): 59,805 sources in the plane, 1.33 -> 1.20 ms
        let on_pool = rayon::current_thread_index().is_some() && !crate::par::sequential();
        let (soa, (wcols, prefix, acc)) = match on_pool && !Self::builds_inline(n) {
            true => rayon::join(soa, weighed),
            false => (soa(), weighed()),
        };
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

    /// Whether building the sums over `n` sources is best run on the calling thread: below
    /// INLINE_SOURCES (a few hundred microseconds), handing it to a thread pool cost as much
    /// again (7,495 sources in the plane: 210 us inline, 310 us on the pool).
    pub fn builds_inline(n: usize) -> bool {
        n <= INLINE_SOURCES
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
        let size = m
            .div_ceil(TASKS_PER_THREAD * rayon::current_num_threads())
            .clamp(MIN_TASK, TASK);
        let body = |(task, chunk): (usize, &mut [f64])| {
            if cancel.load(Ordering::Relaxed) {
                return Err(FgtError::Cancelled);
            }
            // the target's prepared coordinates, then the grid's per-column scratch
            let mut scratch = vec![0.0; self.dim + 2 * GRID_MAX_BLOCK];
            for (k, o) in chunk.iter_mut().enumerate() {
                let j = order[task * size + k];
                let y = &targets[j * self.dim..(j + 1) * self.dim];
                *o = self.one(y, rtol, &mut scratch)?;
            }
            Ok(())
        };
        if crate::par::sequential() {
            sorted.chunks_mut(size).enumerate().try_for_each(body)?;
        } else {
            sorted.par_chunks_mut(size).enumerate().try_for_each(body)?;
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
    #[inline]
    fn bound(&self, start: usize, end: usize, e_min: f64) -> f64 {
        let w = self.prefix[end] - self.prefix[start];
        // rounded up for the rounding of the weights' prefix sums
        w.max(0.0) * exp_upper(e_min) * (1.0 + 1e-12)
    }

    /// As [`Self::tree_sum_within`] with the shift 0, over the grid's `block` of cells: the
    /// runs in reach summed, each other cell of the block bounded at its distance, and the
    /// weight outside the block at the block's. A cell's bound is its weight times the
    /// kernel at its column's gap times the kernel at its row's (the squared distance to a
    /// cell is the sum of the two squared gaps): an exponential per column and per row of the
    /// block rather than per cell, kept in `columns` (at least twice the block's columns).
    fn grid_sum_within(
        &self,
        grid: &CellGrid,
        block: &Block,
        prepared: &[f64],
        columns: &mut [f64],
        y: &[f64],
        radius: f64,
    ) -> (f64, f64) {
        let inv_h2 = 1.0 / (self.bandwidth * self.bandwidth);
        let r2 = radius * radius;
        let (x0, x1) = block.cols;
        let nc = x1 - x0 + 1;
        let (gx2, ex) = columns[..2 * nc].split_at_mut(nc);
        for (j, (g, e)) in gx2.iter_mut().zip(ex.iter_mut()).enumerate() {
            *g = grid.gap2(0, y[0], x0 + j);
            *e = exp_upper(*g * inv_h2);
        }
        let y1 = if self.dim == 2 { y[1] } else { 0.0 };
        let mut sum = [0.0];
        let (mut left_out, mut seen) = (0.0, 0.0);
        for iy in block.rows.0..=block.rows.1 {
            let gy2 = grid.gap2(1, y1, iy);
            let ey = exp_upper(gy2 * inv_h2);
            let mut run: Option<(usize, usize)> = None;
            for (j, (&g, &e)) in gx2.iter().zip(ex.iter()).enumerate() {
                let (a, b) = grid.cell(x0 + j, iy);
                if a == b {
                    continue;
                }
                let w = self.prefix[b] - self.prefix[a];
                seen += w;
                if g + gy2 <= r2 {
                    // the cells of a row in reach are consecutive in grid order
                    run = Some(run.map_or((a, b), |(s, _)| (s, b)));
                } else {
                    left_out += w.max(0.0) * (e * ey);
                }
            }
            if let Some((a, b)) = run {
                accumulate(prepared, 0.0, &self.soa, &self.wcols, a, b, &mut sum);
            }
        }
        // rounded up for the rounding of the weights' prefix sums and the products
        left_out *= 1.0 + 1e-12;
        let beyond = grid.beyond2(y, block);
        if beyond.is_finite() {
            // the rest's weight, with room for the rounding of the prefix sums
            let rest = (self.total - seen).max(0.0) + 1e-14 * self.total;
            left_out += rest * exp_upper(beyond * inv_h2) * (1.0 + 1e-12);
        }
        (sum[0], left_out)
    }

    /// ln G(y) (the same whichever other targets are evaluated with it).
    /// `scratch` holds the target's prepared coordinates (`dim`) and 2 GRID_MAX_BLOCK more.
    fn one(&self, y: &[f64], rtol: f64, scratch: &mut [f64]) -> Result<f64> {
        if self.total <= 0.0 {
            return Ok(f64::NEG_INFINITY);
        }
        // the difference form: prepare_target returns 0, and the shift goes in its place
        self.soa.prepare_target(y, &mut scratch[..self.dim]);
        match &self.index {
            Index::Tree(tree) => self.one_over_tree(tree, y, rtol, &scratch[..self.dim]),
            Index::Grid(grid) => self.one_over_grid(grid, y, rtol, scratch),
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
        scratch: &mut [f64],
    ) -> Result<f64> {
        let h2 = self.bandwidth * self.bandwidth;
        let mut extra = (1.0 / rtol).ln() + MARGIN;
        loop {
            let radius = (extra * h2).sqrt();
            let block = grid.block(y, radius);
            if block.cells() > GRID_MAX_BLOCK {
                return self.far(grid)?.one(y, rtol, scratch);
            }
            let (prepared, columns) = scratch.split_at_mut(self.dim);
            let (sum, left_out) = self.grid_sum_within(grid, &block, prepared, columns, y, radius);
            if sum < TINY {
                return self.far(grid)?.one(y, rtol, scratch);
            }
            match certified(sum, left_out, rtol, extra) {
                Ok(ln) => return Ok(ln),
                Err(next) => extra = next,
            }
        }
    }
}

/// Mean number of sources within `radius` of a source (itself included), estimated from up to
/// `probes` sources among a strided sample of about `sample` of them: whether the log-space
/// sums suit the data, told before they are built. The sample is every (n / `sample`)-th
/// source and the probes every (sample size / `probes`)-th of those; the count over the
/// sample is scaled to all n sources.
///
/// # Errors
/// [`FgtError::InvalidParameter`] for a radius that is negative or not finite, or `probes` or
/// `sample` 0; shape and finiteness errors of the sources.
///
/// # Example
/// ```
/// // 100 sources in a line, one apart: about 5 within 2 of a source (fewer at the ends)
/// let sources: Vec<f64> = (0..100).map(f64::from).collect();
/// let m = vastml_fgt::mean_sources_within(&sources, 1, 2.0, 100, 100)?;
/// assert!((m - 4.94).abs() < 1e-12);
/// # Ok::<(), vastml_fgt::FgtError>(())
/// ```
pub fn mean_sources_within(
    sources: &[f64],
    dim: usize,
    radius: f64,
    probes: usize,
    sample: usize,
) -> Result<f64> {
    let n = crate::check_points(sources, dim, "sources")?;
    if !(radius.is_finite() && radius >= 0.0) {
        return Err(invalid(
            "radius",
            format!("must be a non-negative finite number, got {radius}"),
        ));
    }
    if probes == 0 || sample == 0 {
        return Err(invalid(
            "probes",
            "the probes and the sample must be positive counts",
        ));
    }
    let stride = (n / sample).max(1);
    let m = n.div_ceil(stride);
    // the sample coordinate by coordinate, so the distance loop below vectorises
    let mut cols = vec![0.0; m * dim];
    for (i, p) in sources.chunks_exact(dim).step_by(stride).enumerate() {
        for (k, &v) in p.iter().enumerate() {
            cols[k * m + i] = v;
        }
    }
    let r2 = radius * radius;
    let probe_stride = (m / probes).max(1);
    let probes: Vec<usize> = (0..m).step_by(probe_stride).take(probes).collect();
    let within: usize = match dim {
        // one pass per probe, the squared distance in registers, not in a buffer filled
        // column by column (7,495 sources in the plane, from Python: 32 -> 21 us)
        1 => count_within::<1>(&cols, m, &probes, r2),
        2 => count_within::<2>(&cols, m, &probes, r2),
        3 => count_within::<3>(&cols, m, &probes, r2),
        _ => {
            let mut d2 = vec![0.0; m];
            let mut within = 0;
            for &j in &probes {
                d2.fill(0.0);
                for k in 0..dim {
                    let (col, c) = (&cols[k * m..(k + 1) * m], cols[k * m + j]);
                    for (acc, &v) in d2.iter_mut().zip(col) {
                        *acc += (c - v) * (c - v);
                    }
                }
                within += d2.iter().filter(|&&v| v <= r2).count();
            }
            within
        }
    };
    Ok(within as f64 / probes.len() as f64 * n as f64 / m as f64)
}

/// The (probe, point) pairs of a `D`-dimensional sample held column by column (`m` points)
/// within squared distance `r2`; the squared distances are summed coordinate by coordinate
/// from 0, as in the general loop, so the counts are the same.
fn count_within<const D: usize>(cols: &[f64], m: usize, probes: &[usize], r2: f64) -> usize {
    let cs: [&[f64]; D] = std::array::from_fn(|k| &cols[k * m..(k + 1) * m]);
    let mut within = 0;
    for &j in probes {
        let c: [f64; D] = std::array::from_fn(|k| cs[k][j]);
        let mut count = 0;
        for i in 0..m {
            let mut acc = 0.0;
            for (&ck, col) in c.iter().zip(&cs) {
                let v = col[i];
                acc += (ck - v) * (ck - v);
            }
            count += usize::from(acc <= r2);
        }
        within += count;
    }
    within
}

/// Steps per unit of the exponent in [`exp_upper`]'s table.
const EXP_STEPS: usize = 64;
/// Beyond this exponent, exp(-e) is below the smallest double (5e-324).
const EXP_LAST: usize = 745;

/// exp(-e) for e >= 0, rounded up to within a factor e^(1 / EXP_STEPS) (1.6%): the bounds of
/// what a search leaves out, one per subtree or cell it prunes, are most of a search's work
/// with the polynomial exponential; a bound needs no more than this. Two table reads: e is
/// rounded down to a multiple of 1 / EXP_STEPS, and exp(-whole) exp(-fraction) is taken from
/// tables rounded up. 0 from EXP_LAST on, 1 at or below 0 (and for NaN).
#[inline]
fn exp_upper(e: f64) -> f64 {
    struct Tables {
        whole: [f64; EXP_LAST + 1],
        frac: [f64; EXP_STEPS],
    }
    static TABLES: std::sync::LazyLock<Tables> = std::sync::LazyLock::new(|| {
        // f64::exp is within one unit in the last place: 4 units up is above the exact value
        let up = 1.0 + 4.0 * f64::EPSILON;
        let mut t = Tables {
            whole: [0.0; EXP_LAST + 1],
            frac: [0.0; EXP_STEPS],
        };
        for (i, v) in t.whole.iter_mut().enumerate() {
            *v = (-(i as f64)).exp() * up;
        }
        for (j, v) in t.frac.iter_mut().enumerate() {
            *v = (-(j as f64) / EXP_STEPS as f64).exp() * up;
        }
        t
    });
    if e.is_nan() || e <= 0.0 {
        return 1.0;
    }
    if e >= EXP_LAST as f64 {
        return 0.0;
    }
    // truncation is the floor of a positive number; the product's rounding is within the
    // tables' margin
    let k = (e * EXP_STEPS as f64) as usize;
    let t = &*TABLES;
    t.whole[k / EXP_STEPS] * t.frac[k % EXP_STEPS]
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

    /// The table's exponential is never below exp(-e) (computed in higher precision from
    /// two halves, so its own rounding cannot hide an error) and at most e^(1 / 64) above it.
    #[test]
    fn exp_upper_bounds_the_exponential_from_above_within_its_step() {
        let mut next = uniform(3);
        let step = (1.0 / EXP_STEPS as f64).exp();
        for i in 0..200_000 {
            let e = match i % 4 {
                0 => 745.0 * next(),
                1 => 10.0 * next(),
                2 => (i / 4) as f64 / EXP_STEPS as f64, // exactly on a step
                _ => next() * 1e-3,
            };
            let (hi, lo) = ((-(e * 0.5)).exp(), (-(e - e * 0.5)).exp());
            let want = hi * lo;
            let got = exp_upper(e);
            if want < 1e-300 {
                assert!((0.0..=1e-290).contains(&got), "e = {e}: {got}");
                continue;
            }
            assert!(
                got >= want * (1.0 - 4.0 * f64::EPSILON),
                "e = {e}: {got} < {want}"
            );
            assert!(
                got <= want * step * (1.0 + 1e-14),
                "e = {e}: {got} > {want} e^(1/64)"
            );
        }
        assert_eq!(exp_upper(0.0), 1.0);
        assert_eq!(exp_upper(-3.0), 1.0);
        assert_eq!(exp_upper(f64::NAN), 1.0);
        assert_eq!(exp_upper(745.0), 0.0);
        assert_eq!(exp_upper(f64::INFINITY), 0.0);
    }

    /// The estimate is the exhaustive mean when the sample and the probes are every source,
    /// and scales a strided sample's count to all the sources.
    #[test]
    fn mean_sources_within_counts_pairs_exhaustively_on_its_sample() {
        let mut next = uniform(11);
        for dim in 1..=4 {
            let n = 300;
            let pts: Vec<f64> = (0..n * dim).map(|_| next() * 4.0).collect();
            let r = 0.7;
            let pair = |a: usize, b: usize| {
                let d2: f64 = (0..dim)
                    .map(|k| (pts[a * dim + k] - pts[b * dim + k]).powi(2))
                    .sum();
                d2 <= r * r
            };
            let all = (0..n)
                .flat_map(|a| (0..n).map(move |b| (a, b)))
                .filter(|&(a, b)| pair(a, b))
                .count();
            let got = mean_sources_within(&pts, dim, r, n, n).unwrap();
            assert!(
                (got - all as f64 / n as f64).abs() < 1e-12,
                "{dim}-D: {got}"
            );
            // every 3rd source sampled (100), every 10th of those probed (10)
            let probes: Vec<usize> = (0..10).map(|j| 30 * j).collect();
            let inside = probes
                .iter()
                .map(|&p| (0..n).step_by(3).filter(|&b| pair(p, b)).count())
                .sum::<usize>();
            let want = inside as f64 / 10.0 * 3.0;
            let got = mean_sources_within(&pts, dim, r, 10, 100).unwrap();
            assert!(
                (got - want).abs() < 1e-12,
                "{dim}-D sampled: {got} vs {want}"
            );
        }
        assert!(mean_sources_within(&[0.0, 1.0], 1, -1.0, 4, 4).is_err());
        assert!(mean_sources_within(&[0.0, 1.0], 1, 1.0, 0, 4).is_err());
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
