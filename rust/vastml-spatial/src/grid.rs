//! A uniform grid of cells over points on a line or in the plane, stored cell by cell.
//!
//! Where a kd-tree pays about log2(n / leaf) partial sorts to build, the grid is one counting
//! sort: two passes over the points. A fixed-radius search reads the cells of a small block
//! around the query by index, and the cells of one row of that block are contiguous in the
//! grid's point order, so a search returns few, long runs of points. It suits points whose
//! bounding box holds not many more cells than points (neither heavy tails nor far outliers);
//! [`CellGrid::build`] says when it does not.

use crate::validate::validate_points;
use crate::{Result, SpatialError};

/// A uniform grid of square cells of side `width` over 1-D or 2-D points.
///
/// Cells are numbered row by row (`iy * nx + ix`) and the points are stored in that order, so
/// [`points_in_grid_order`](Self::points_in_grid_order)`[starts[c]..starts[c + 1]]` are the
/// points of cell `c`; [`permutation`](Self::permutation) maps them back. It is `Sync`.
#[derive(Debug, Clone)]
pub struct CellGrid {
    dim: usize,
    width: f64,
    inv_width: f64,
    /// Allowance for the rounding of a cell's edges, relative to the box's extent.
    slack: f64,
    /// Lower corner of the grid (the points' smallest coordinates; 0 for the missing axis).
    lo: [f64; 2],
    /// Cells per axis (1 along the missing axis of 1-D points).
    shape: [usize; 2],
    /// `starts[c]..starts[c + 1]` is the range of cell `c` in grid order.
    starts: Vec<usize>,
    points: Vec<f64>,
    perm: Vec<usize>,
}

impl CellGrid {
    /// Sorts `points` (row-major `n x dim`, `dim` 1 or 2) into cells of side `width` over their
    /// bounding box, or returns `Ok(None)` when that takes more than `max_cells` cells.
    ///
    /// # Errors
    /// [`SpatialError::InvalidParameter`] for `dim` outside 1..=2 or a `width` that is not a
    /// positive finite number; the shape, emptiness and finiteness errors of the points.
    ///
    /// # Example
    /// ```
    /// use vastml_spatial::CellGrid;
    /// let pts = [0.0, 0.0, 0.9, 0.1, 3.5, 0.2];
    /// let grid = CellGrid::build(&pts, 2, 1.0, 100)?.expect("4 x 1 cells");
    /// let mut near = Vec::new();
    /// grid.for_each_run_within_radius_or_pruned(&[0.0, 0.0], 1.0, |a, b| near.push((a, b)), |_, _, _| {});
    /// // the first cell holds the two points near the origin; the third point is not read
    /// assert_eq!(near, vec![(0, 2)]);
    /// assert!(CellGrid::build(&pts, 2, 1e-3, 100)?.is_none());
    /// # Ok::<(), vastml_spatial::SpatialError>(())
    /// ```
    pub fn build(points: &[f64], dim: usize, width: f64, max_cells: usize) -> Result<Option<Self>> {
        if !(1..=2).contains(&dim) {
            return Err(SpatialError::InvalidParameter {
                name: "dim",
                reason: format!("a cell grid holds 1-D or 2-D points, got dim = {dim}"),
            });
        }
        if !(width.is_finite() && width > 0.0) {
            return Err(SpatialError::InvalidParameter {
                name: "width",
                reason: format!("must be a positive finite number, got {width}"),
            });
        }
        let n = validate_points(points, dim)?;
        match dim {
            1 => Self::sort::<1>(points, n, width, max_cells),
            _ => Self::sort::<2>(points, n, width, max_cells),
        }
    }

    /// [`Self::build`] for `D`-dimensional points (checked): the box, then the counting sort.
    /// With `D` a constant, each point moves as `D` values, not through a `memcpy` call (a
    /// third of the sort's time with `dim` a variable).
    fn sort<const D: usize>(
        points: &[f64],
        n: usize,
        width: f64,
        max_cells: usize,
    ) -> Result<Option<Self>> {
        // 0 along the missing axis of 1-D points
        let (mut lo, mut hi) = ([0.0; 2], [0.0; 2]);
        let (l, h) = vastml_core::coordinate_bounds(&[points], D);
        lo[..D].copy_from_slice(&l);
        hi[..D].copy_from_slice(&h);
        // counted in floating point first: a wide box must not overflow the product
        let per_axis = |k: usize| ((hi[k] - lo[k]) / width).floor() + 1.0;
        let cells = (0..D).map(per_axis).product::<f64>();
        if cells > max_cells as f64 {
            return Ok(None);
        }
        let mut shape = [1usize; 2];
        for (k, s) in shape.iter_mut().enumerate().take(D) {
            *s = per_axis(k) as usize;
        }
        let extent = (0..D)
            .map(|k| hi[k].abs().max(lo[k].abs()))
            .fold(width, f64::max);
        let mut grid = CellGrid {
            dim: D,
            width,
            inv_width: 1.0 / width,
            slack: 64.0 * f64::EPSILON * extent,
            lo,
            shape,
            starts: vec![0; shape[0] * shape[1] + 1],
            points: vec![0.0; n * D],
            perm: vec![0; n],
        };
        // each point's cell, counted into the start of the next one
        let cell: Vec<usize> = points
            .chunks_exact(D)
            .map(|p| {
                let c = grid.cell_of(p);
                grid.starts[c + 1] += 1;
                c
            })
            .collect();
        for c in 1..grid.starts.len() {
            grid.starts[c] += grid.starts[c - 1];
        }
        let mut next = grid.starts.clone();
        for (i, (&c, p)) in cell.iter().zip(points.chunks_exact(D)).enumerate() {
            let at = &mut next[c];
            grid.perm[*at] = i;
            grid.points[*at * D..(*at + 1) * D].copy_from_slice(p);
            *at += 1;
        }
        Ok(Some(grid))
    }

    /// The cell of a point inside the grid's box (clamped onto the grid for one outside it).
    fn cell_of(&self, p: &[f64]) -> usize {
        let axis = |k: usize| self.index_on(k, p[k]);
        if self.dim == 1 {
            axis(0)
        } else {
            axis(1) * self.shape[0] + axis(0)
        }
    }

    /// The index along axis `k` of the cell holding coordinate `x`, clamped onto the grid.
    /// (A truncating cast, not `floor`, which is a library call on baseline x86-64: below the
    /// grid the cast saturates at 0. The cell's edges may differ from `x` by a rounding; the
    /// distances below allow for it.)
    #[inline]
    fn index_on(&self, k: usize, x: f64) -> usize {
        (((x - self.lo[k]) * self.inv_width) as usize).min(self.shape[k] - 1)
    }

    /// Distance along axis `k` from `x` to the slab of cells with index `i`, less a rounding
    /// allowance (so it never exceeds the distance to a point assigned to that slab).
    #[inline]
    fn gap(&self, k: usize, x: f64, i: usize) -> f64 {
        let a = self.lo[k] + i as f64 * self.width;
        let g = (a - x).max(x - (a + self.width));
        (g - self.slack).max(0.0)
    }

    /// The index range along axis `k` of the cells within `reach` of `x`.
    fn span(&self, k: usize, x: f64, reach: f64) -> (usize, usize) {
        (self.index_on(k, x - reach), self.index_on(k, x + reach))
    }

    /// Dimension of the points.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.perm.len()
    }

    /// Always `false`: a grid holds at least one point.
    pub fn is_empty(&self) -> bool {
        self.perm.is_empty()
    }

    /// Number of cells.
    pub fn n_cells(&self) -> usize {
        self.starts.len() - 1
    }

    /// Fraction of the cells that hold at least one point.
    pub fn occupancy(&self) -> f64 {
        let occupied = self.starts.windows(2).filter(|w| w[1] > w[0]).count();
        occupied as f64 / self.n_cells() as f64
    }

    /// Side of a cell.
    pub fn cell_width(&self) -> f64 {
        self.width
    }

    /// The points, row-major, cell by cell.
    pub fn points_in_grid_order(&self) -> &[f64] {
        &self.points
    }

    /// `permutation()[i]` is the original index of the `i`-th point in grid order.
    pub fn permutation(&self) -> &[usize] {
        &self.perm
    }

    /// How many cells a search of `radius` about `query` reads (the block of cells within
    /// `radius` plus one cell width of it, by axis).
    pub fn block_cells(&self, query: &[f64], radius: f64) -> usize {
        self.block(query, radius).cells()
    }

    /// The block of cells a search of `radius` about `query` reads: every cell within `radius`
    /// plus one cell width of it, by axis. (Rows are `(0, 0)` on a line.)
    pub fn block(&self, query: &[f64], radius: f64) -> Block {
        debug_assert_eq!(query.len(), self.dim);
        let reach = radius + self.width;
        Block {
            cols: self.span(0, query[0], reach),
            rows: if self.dim == 2 {
                self.span(1, query[1], reach)
            } else {
                (0, 0)
            },
        }
    }

    /// Squared distance along axis `k` from `x` to the slab of cells with index `i`, less a
    /// rounding allowance: a lower bound on that coordinate's squared difference for every
    /// point of the slab. 0 for the missing axis of a line.
    #[inline]
    pub fn gap2(&self, k: usize, x: f64, i: usize) -> f64 {
        if k >= self.dim {
            return 0.0;
        }
        let g = self.gap(k, x, i);
        g * g
    }

    /// The range, in grid order, of the points of the cell in column `ix` and row `iy`.
    #[inline]
    pub fn cell(&self, ix: usize, iy: usize) -> (usize, usize) {
        let c = iy * self.shape[0] + ix;
        (self.starts[c], self.starts[c + 1])
    }

    /// Squared distance from `query` to every point outside `block` (infinity when the block
    /// is the whole grid), at least the block's reach squared but for a rounding allowance.
    pub fn beyond2(&self, query: &[f64], block: &Block) -> f64 {
        let mut beyond = f64::INFINITY;
        let spans = [block.cols, block.rows];
        for k in 0..self.dim {
            let (a, b) = spans[k];
            if a > 0 {
                beyond = beyond.min(query[k] - (self.lo[k] + a as f64 * self.width));
            }
            if b + 1 < self.shape[k] {
                beyond = beyond.min(self.lo[k] + (b + 1) as f64 * self.width - query[k]);
            }
        }
        let beyond = (beyond - self.slack).max(0.0);
        beyond * beyond
    }

    /// Calls `visit(start, end)` for runs of consecutive points (in grid order) that hold every
    /// point within `radius` of `query`, and `pruned(start, end, d2)` for every other non-empty
    /// cell of the block read, with `d2` the squared distance from `query` to that cell: no
    /// point of it is nearer. Returns the squared distance from `query` to every point outside
    /// the block (infinity when the block is the whole grid), at least `radius + width` squared
    /// but for a rounding allowance.
    ///
    /// `query.len()` must equal [`dim`](Self::dim) (checked with `debug_assert!`).
    pub fn for_each_run_within_radius_or_pruned<F, G>(
        &self,
        query: &[f64],
        radius: f64,
        mut visit: F,
        mut pruned: G,
    ) -> f64
    where
        F: FnMut(usize, usize),
        G: FnMut(usize, usize, f64),
    {
        let r2 = radius * radius;
        let block = self.block(query, radius);
        let y = if self.dim == 2 { query[1] } else { 0.0 };
        for iy in block.rows.0..=block.rows.1 {
            let dy2 = self.gap2(1, y, iy);
            let mut run: Option<(usize, usize)> = None;
            for ix in block.cols.0..=block.cols.1 {
                let (s, e) = self.cell(ix, iy);
                if s == e {
                    continue;
                }
                let d2 = self.gap2(0, query[0], ix) + dy2;
                if d2 <= r2 {
                    // the cells of a row that are in reach are consecutive in grid order
                    run = Some(run.map_or((s, e), |(a, _)| (a, e)));
                } else {
                    pruned(s, e, d2);
                }
            }
            if let Some((a, b)) = run {
                visit(a, b);
            }
        }
        self.beyond2(query, &block)
    }
}

/// The cells a search reads: columns `cols.0..=cols.1` of rows `rows.0..=rows.1`
/// ([`CellGrid::block`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// First and last column.
    pub cols: (usize, usize),
    /// First and last row (`(0, 0)` on a line).
    pub rows: (usize, usize),
}

impl Block {
    /// Number of cells in the block.
    pub fn cells(&self) -> usize {
        (self.cols.1 - self.cols.0 + 1) * (self.rows.1 - self.rows.0 + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: u64) -> impl FnMut() -> f64 {
        let mut s = seed;
        move || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// Every point within the radius is in a visited run, every pruned cell's distance is a
    /// lower bound for its points, and every point outside the block is beyond the returned
    /// distance: checked against all points, in 1-D and 2-D, for queries inside and outside.
    #[test]
    fn search_matches_exhaustive_distances() {
        for dim in 1..=2 {
            let mut next = lcg(7 + dim as u64);
            let n = 700;
            let pts: Vec<f64> = (0..n * dim).map(|_| 10.0 * next() * next()).collect();
            let grid = CellGrid::build(&pts, dim, 0.37, 10 * n).unwrap().unwrap();
            let order = grid.points_in_grid_order();
            for (i, &o) in grid.permutation().iter().enumerate() {
                assert_eq!(&order[i * dim..(i + 1) * dim], &pts[o * dim..(o + 1) * dim]);
            }
            for trial in 0..200 {
                let q: Vec<f64> = (0..dim).map(|_| 14.0 * next() - 2.0).collect();
                let radius = [0.0, 0.2, 0.5, 1.3, 4.0][trial % 5];
                let seen = std::cell::RefCell::new(vec![0u8; n]);
                let mut bound = vec![f64::INFINITY; n];
                let beyond = grid.for_each_run_within_radius_or_pruned(
                    &q,
                    radius,
                    |a, b| (a..b).for_each(|i| seen.borrow_mut()[i] += 1),
                    |a, b, d2| {
                        (a..b).for_each(|i| {
                            seen.borrow_mut()[i] += 1;
                            bound[i] = d2;
                        })
                    },
                );
                let seen = seen.into_inner();
                assert!(beyond >= (radius + grid.cell_width()).powi(2) * (1.0 - 1e-9));
                for i in 0..n {
                    let p = &order[i * dim..(i + 1) * dim];
                    let d2: f64 = p.iter().zip(&q).map(|(a, b)| (a - b) * (a - b)).sum();
                    assert!(seen[i] <= 1, "point {i} reported twice");
                    if seen[i] == 0 {
                        assert!(d2 >= beyond * (1.0 - 1e-12), "point {i} at {d2} < {beyond}");
                    } else if bound[i].is_finite() {
                        assert!(d2 >= bound[i] * (1.0 - 1e-12) && bound[i] > radius * radius);
                    }
                    if d2 <= radius * radius {
                        assert!(seen[i] == 1 && bound[i].is_infinite(), "point {i} missed");
                    }
                }
            }
        }
    }

    #[test]
    fn refuses_wide_boxes_and_bad_parameters() {
        let pts = [0.0, 1e300];
        assert!(CellGrid::build(&pts, 1, 1.0, usize::MAX).unwrap().is_none());
        assert!(CellGrid::build(&pts, 3, 1.0, 10).is_err());
        assert!(CellGrid::build(&pts, 1, 0.0, 10).is_err());
        assert!(CellGrid::build(&pts, 1, f64::NAN, 10).is_err());
        assert!(CellGrid::build(&[f64::NAN], 1, 1.0, 10).is_err());
        assert!(CellGrid::build(&[], 1, 1.0, 10).is_err());
        // a single point: one cell, every search reads it
        let g = CellGrid::build(&[2.0, 3.0], 2, 1.0, 1).unwrap().unwrap();
        assert_eq!((g.n_cells(), g.len(), g.occupancy()), (1, 1, 1.0));
        // two points at opposite corners of a 3 x 3 grid
        let g = CellGrid::build(&[0.0, 0.0, 2.5, 2.5], 2, 1.0, 9)
            .unwrap()
            .unwrap();
        assert_eq!((g.n_cells(), g.occupancy()), (9, 2.0 / 9.0));
        assert_eq!(g.block_cells(&[100.0, -100.0], 1.0), 1);
    }
}
