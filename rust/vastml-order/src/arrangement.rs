//! A matrix shown through a row order and a column order, its exact error, and the
//! incremental evaluation of row-block permutations (spec §7-§8).
//!
//! The data never move: `order(axis)[p]` is the original index at displayed position `p`.
//! A move on an axis is a list of [`Segment`]s; [`Arrangement::delta`] evaluates it
//! *before* anything changes (so a rejected move costs no undo), and
//! [`Arrangement::commit`] applies it. Errors are kept as exact integers (kernel weights are
//! integers), so the running error always equals a full recomputation.

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use crate::error::{OrderError, invalid};
use crate::kernel::Kernel;
use crate::matrix::{ErrorKind, Matrix, Padding, set_bits};
use crate::view::{Src, View, dot_shift, shift_counts_masked, weighted_overlap};

/// New displayed positions `dst..dst+len` take the rows found at `src..src+len` before the
/// move (in reverse when `mirrored`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// First destination position.
    pub dst: usize,
    /// First source position.
    pub src: usize,
    /// Length.
    pub len: usize,
    /// Whether the block is reversed.
    pub mirrored: bool,
}

impl Segment {
    fn source_of(&self, p: usize) -> Option<usize> {
        if p >= self.dst && p < self.dst + self.len {
            let off = p - self.dst;
            Some(if self.mirrored {
                self.src + self.len - 1 - off
            } else {
                self.src + off
            })
        } else {
            None
        }
    }
}

/// Pair overlaps computed by a delta, kept for its commit: (axis, segments, (upper entity,
/// distance, overlap)).
type Pending = (usize, Vec<Segment>, Vec<(u32, usize, u128)>);

/// The objective: kernel, padding and error kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Objective {
    /// Kernel (rows x cols as displayed).
    pub kernel: Kernel,
    /// Padding outside the matrix.
    pub padding: Padding,
    /// Absolute or squared per-cell error.
    pub kind: ErrorKind,
}

/// A matrix with a row order and a column order, and its error.
#[derive(Debug, Clone)]
pub struct Arrangement {
    matrix: Matrix,
    objective: Objective,
    kernels: [Kernel; 2],
    maps: [Vec<u32>; 2],
    views: [View; 2],
    total: i128,
    stamp: Vec<u32>,
    generation: u32,
    scratch_bits: Vec<u32>,
    /// Scratch of `delta_pairs`: (old position, new position) of each position of a window.
    window: Vec<[u32; 2]>,
    /// Scratch of `delta_pairs`: positions whose error may change, after and before a move.
    cand_bufs: (Vec<usize>, Vec<usize>),
    all_layers: Vec<usize>,
    /// Integer weights of each axis's kernel, row-major (for the pair overlaps).
    kernel_rows_raw: [Vec<u64>; 2],
    /// Per axis, `pair_cache[e * h + d - 1]`: weighted overlap of entity `e` with the entity
    /// shown `d` positions below it (valid while `cache_ok`). Moves on an axis keep its cache
    /// up to date; they invalidate the other axis's cache (its bit positions moved).
    pair_cache: [Vec<u128>; 2],
    cache_ok: [bool; 2],
    cache_misses: [usize; 2],
    /// New pair overlaps found by the last `delta_pairs`, for `commit`: (axis, segments,
    /// (upper entity, distance, overlap)).
    pending: Option<Pending>,
    /// `colours[col * k + v]`: current colour of value `v` of original column `col` (k layers;
    /// empty for binary matrices). Starts as the identity.
    colours: Vec<u8>,
}

fn check_order(order: &[usize], n: usize, name: &'static str) -> Result<Vec<u32>, OrderError> {
    if order.len() != n {
        return Err(invalid(
            name,
            format!("has {} entries, expected {n}", order.len()),
        ));
    }
    let mut seen = vec![false; n];
    for &i in order {
        if i >= n || seen[i] {
            return Err(invalid(name, "is not a permutation"));
        }
        seen[i] = true;
    }
    Ok(order.iter().map(|&i| i as u32).collect())
}

/// The longest kernel side accepted along a matrix side of `len` cells: 2 `len` + 1 (beyond
/// that the outer weights only ever see padding, while the work grows with the kernel), or
/// 61, the thesis's largest kernel, for tiny matrices.
pub fn usable_kernel_side(len: usize) -> usize {
    len.saturating_mul(2).saturating_add(1).max(61)
}

impl Arrangement {
    /// Shows `matrix` in `row_order` x `col_order` (identity when `None`).
    ///
    /// # Errors
    /// Orders that are not permutations of the right length; a kernel side longer than
    /// [`usable_kernel_side`] of the matrix side it slides along.
    pub fn new(
        matrix: Matrix,
        objective: Objective,
        row_order: Option<&[usize]>,
        col_order: Option<&[usize]>,
    ) -> Result<Self, OrderError> {
        Self::new_cancellable(
            matrix,
            objective,
            row_order,
            col_order,
            &AtomicBool::new(false),
        )
    }

    /// As [`Arrangement::new`], polling `cancel` between rows of the first full error
    /// computation (the one pass whose cost grows with the matrix times the kernel).
    ///
    /// # Errors
    /// As [`Arrangement::new`], and [`OrderError::Cancelled`] when `cancel` is raised.
    pub fn new_cancellable(
        matrix: Matrix,
        objective: Objective,
        row_order: Option<&[usize]>,
        col_order: Option<&[usize]>,
        cancel: &AtomicBool,
    ) -> Result<Self, OrderError> {
        let (m, n) = (matrix.n_rows(), matrix.n_cols());
        let (kr, kc) = (objective.kernel.rows(), objective.kernel.cols());
        let (max_r, max_c) = (usable_kernel_side(m), usable_kernel_side(n));
        if kr > max_r || kc > max_c {
            return Err(invalid(
                "kernel_size",
                format!(
                    "a {kr} x {kc} kernel is larger than a {m} x {n} matrix can use \
                     (at most {max_r} x {max_c})"
                ),
            ));
        }
        let rows: Vec<usize> = row_order.map_or_else(|| (0..m).collect(), <[usize]>::to_vec);
        let cols: Vec<usize> = col_order.map_or_else(|| (0..n).collect(), <[usize]>::to_vec);
        let maps = [
            check_order(&rows, m, "row_order")?,
            check_order(&cols, n, "col_order")?,
        ];
        let kernels = [objective.kernel.clone(), objective.kernel.transposed()];
        let views = [
            View::build(
                &matrix,
                0,
                &maps[1],
                kernels[0].cols() / 2,
                objective.padding,
            ),
            View::build(
                &matrix,
                1,
                &maps[0],
                kernels[1].cols() / 2,
                objective.padding,
            ),
        ];
        let k = matrix.n_layers();
        let colours = if k > 1 {
            (0..n).flat_map(|_| (0..k).map(|v| v as u8)).collect()
        } else {
            Vec::new()
        };
        let mut a = Self {
            stamp: vec![0; m.max(n)],
            generation: 0,
            scratch_bits: Vec::new(),
            window: Vec::new(),
            cand_bufs: (Vec::new(), Vec::new()),
            all_layers: (0..k).collect(),
            pair_cache: [Vec::new(), Vec::new()],
            cache_ok: [false, false],
            cache_misses: [0, 0],
            pending: None,
            kernel_rows_raw: [0, 1].map(|a: usize| {
                let kk = &kernels[a];
                (0..kk.rows() * kk.cols())
                    .map(|i| kk.raw(i / kk.cols(), i % kk.cols()))
                    .collect()
            }),
            colours,
            matrix,
            objective,
            kernels,
            maps,
            views,
            total: 0,
        };
        a.total = a.full_raw_cancellable(0, cancel)?;
        Ok(a)
    }

    /// The matrix.
    pub fn matrix(&self) -> &Matrix {
        &self.matrix
    }
    /// The objective.
    pub fn objective(&self) -> &Objective {
        &self.objective
    }
    /// Number of displayed positions on `axis` (0 rows, 1 columns).
    pub fn len(&self, axis: usize) -> usize {
        self.maps[axis].len()
    }
    /// Whether the matrix is empty (never: construction rejects it).
    pub fn is_empty(&self) -> bool {
        self.maps[0].is_empty()
    }
    /// Original index at each displayed position of `axis`.
    pub fn order(&self, axis: usize) -> Vec<usize> {
        self.maps[axis].iter().map(|&i| i as usize).collect()
    }
    /// Calls `f(j)` for every displayed position `j` of the other axis where the entity shown
    /// at `pos` on `axis` is set in `layer`, in increasing order (visits only set bits).
    pub(crate) fn for_each_set(
        &self,
        axis: usize,
        layer: usize,
        pos: usize,
        mut f: impl FnMut(usize),
    ) {
        let v = &self.views[axis];
        for i in set_bits(v.real_of(layer, self.maps[axis][pos] as usize)) {
            f(i - v.pad);
        }
    }

    /// Kernel rows (the reach along `axis` is `kernel_rows(axis) / 2`).
    pub fn kernel_rows(&self, axis: usize) -> usize {
        self.kernels[axis].rows()
    }

    fn scale(&self) -> f64 {
        let s = self.objective.kernel.sum() as f64;
        match self.objective.kind {
            ErrorKind::Abs => s,
            ErrorKind::Quadratic => s * s,
        }
    }
    /// The current error (exact integer total divided by the kernel normaliser).
    pub fn error(&self) -> f64 {
        self.total as f64 / self.scale()
    }
    /// The current error as an exact integer in units of 1/ΣK (abs) or 1/(ΣK)² (quadratic).
    pub fn raw_error(&self) -> i128 {
        self.total
    }
    /// Converts a raw error difference to the error scale.
    pub fn to_error(&self, raw: i128) -> f64 {
        raw as f64 / self.scale()
    }
    /// Whether (pos, other) is set in `layer`, with pos on `axis` and other on the other axis.
    #[inline]
    pub fn cell(&self, axis: usize, layer: usize, pos: usize, other: usize) -> bool {
        self.views[axis].cell(layer, self.maps[axis][pos] as usize, other)
    }

    #[inline]
    fn fetch(&self, axis: usize, at: impl Fn(usize) -> u32, q: isize) -> Src {
        let m = self.maps[axis].len() as isize;
        if q >= 0 && q < m {
            return Src::Real(at(q as usize));
        }
        match self.objective.padding {
            Padding::ZerosAndOnes | Padding::Zero => {
                if q < 0 {
                    Src::Top
                } else {
                    Src::Bottom
                }
            }
            Padding::Extension => Src::Real(at(q.clamp(0, m - 1) as usize)),
            Padding::Cyclic => Src::Real(at(q.rem_euclid(m) as usize)),
        }
    }

    /// Σ_dc K[d][dc] · popcount(x & shift(src, dc)) over layers: the weighted count of
    /// set neighbours of the row `ent` in the neighbour row at offset `d`.
    #[inline]
    pub(crate) fn contrib(&self, axis: usize, ent: u32, src: Src, d: isize) -> u128 {
        self.contrib_in(axis, ent, src, d, &self.all_layers)
    }

    /// [`Self::contrib`] restricted to `layers`.
    #[inline]
    fn contrib_in(&self, axis: usize, ent: u32, src: Src, d: isize, layers: &[usize]) -> u128 {
        let k = &self.kernels[axis];
        let view = &self.views[axis];
        let kr = (d + k.rows() as isize / 2) as usize;
        if view.pad < 64 {
            let row = &self.kernel_rows_raw[axis][kr * k.cols()..(kr + 1) * k.cols()];
            return layers
                .iter()
                .map(|&l| {
                    weighted_overlap(
                        view.masked_real(l, ent as usize),
                        view.masked_src(l, src),
                        row,
                        view.pad,
                    )
                })
                .sum();
        }
        let pad = view.pad as isize;
        let mut acc = 0u128;
        for &l in layers {
            let x = view.real_of(l, ent as usize);
            let y = view.src_bits(l, src);
            for kc in 0..k.cols() {
                let wgt = k.raw(kr, kc);
                if wgt != 0 {
                    acc += u128::from(wgt) * u128::from(dot_shift(x, y, kc as isize - pad));
                }
            }
        }
        acc
    }

    /// Weighted overlap of original rows (`axis` 0) or columns `a` and `b` when `b` is displayed
    /// `d` positions after `a`: `Σ_dc K[d][dc] · |a ∩ shift(b, dc)|`, summed over layers (the
    /// other axis in its current order, padding bits of `b` included).
    pub fn pair_similarity(&self, axis: usize, a: usize, b: usize, d: isize) -> u128 {
        self.contrib(axis, a as u32, Src::Real(b as u32), d)
    }

    /// Weighted overlap of original row (`axis` 0) or column `x` with the padding row at
    /// offset `d`: above the display (`top`) or below it; `edge` is the first (last) displayed
    /// entity, which the extension padding repeats.
    pub(crate) fn padding_similarity(
        &self,
        axis: usize,
        x: usize,
        top: bool,
        edge: usize,
        d: isize,
    ) -> u128 {
        let src = match self.objective.padding {
            Padding::Extension | Padding::Cyclic => Src::Real(edge as u32),
            _ if top => Src::Top,
            _ => Src::Bottom,
        };
        self.contrib(axis, x as u32, src, d)
    }

    fn ones(&self, axis: usize, ent: u32, layers: &[usize]) -> u128 {
        let v = &self.views[axis];
        layers
            .iter()
            .map(|&l| u128::from(v.ones[l * v.n_ent + ent as usize]))
            .sum()
    }

    /// Raw error of the row `ent` with neighbour sources given by `src(d)`.
    fn row_raw(&self, axis: usize, ent: u32, src: impl Fn(isize) -> Src) -> i128 {
        self.row_raw_in(axis, ent, src, &self.all_layers)
    }

    /// [`Self::row_raw`] restricted to `layers`.
    fn row_raw_in(
        &self,
        axis: usize,
        ent: u32,
        src: impl Fn(isize) -> Src,
        layers: &[usize],
    ) -> i128 {
        let k = &self.kernels[axis];
        let h = (k.rows() / 2) as isize;
        let s = u128::from(k.sum());
        match self.objective.kind {
            ErrorKind::Abs => {
                let mut c = 0u128;
                for d in -h..=h {
                    c += self.contrib_in(axis, ent, src(d), d, layers);
                }
                (self.ones(axis, ent, layers) * s) as i128 - c as i128
            }
            ErrorKind::Quadratic => {
                let view = &self.views[axis];
                let pad = view.pad;
                let mut total = 0i128;
                for &l in layers {
                    let x = view.real_of(l, ent as usize);
                    let srcs: Vec<&[u64]> = (-h..=h).map(|d| view.src_bits(l, src(d))).collect();
                    for (wi, &xw) in x.iter().enumerate() {
                        let mut bits = xw;
                        while bits != 0 {
                            let i = wi * 64 + bits.trailing_zeros() as usize;
                            bits &= bits - 1;
                            let mut conv = 0u128;
                            for (kr, y) in srcs.iter().enumerate() {
                                for kc in 0..k.cols() {
                                    let j = i + kc - pad;
                                    if (y[j / 64] >> (j % 64)) & 1 == 1 {
                                        conv += u128::from(k.raw(kr, kc));
                                    }
                                }
                            }
                            let diff = s as i128 - conv as i128;
                            total += diff * diff;
                        }
                    }
                }
                total
            }
        }
    }

    /// Raw error of the row displayed at `p` on `axis` (ones-only, summed over layers).
    pub fn row_raw_error(&self, axis: usize, p: usize) -> i128 {
        let map = &self.maps[axis];
        self.row_raw(axis, map[p], |d| {
            self.fetch(axis, |q| map[q], p as isize + d)
        })
    }

    /// Error of the row displayed at `p` on `axis`.
    pub fn row_error(&self, axis: usize, p: usize) -> f64 {
        self.row_raw_error(axis, p) as f64 / self.scale()
    }

    /// Full recomputation of the raw error through `axis` (both axes give the same value).
    pub fn full_raw(&self, axis: usize) -> i128 {
        (0..self.len(axis))
            .into_par_iter()
            .map(|p| self.row_raw_error(axis, p))
            .sum()
    }

    /// [`Self::full_raw`], polling `cancel` before each row.
    fn full_raw_cancellable(&self, axis: usize, cancel: &AtomicBool) -> Result<i128, OrderError> {
        (0..self.len(axis))
            .into_par_iter()
            .map(|p| {
                if cancel.load(Ordering::Relaxed) {
                    Err(OrderError::Cancelled)
                } else {
                    Ok(self.row_raw_error(axis, p))
                }
            })
            .try_reduce(|| 0, |a, b| Ok(a + b))
    }

    /// Full recomputation of the error.
    pub fn full_error(&self) -> f64 {
        self.full_raw(0) as f64 / self.scale()
    }

    fn next_generation(&mut self) -> u32 {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.stamp.iter_mut().for_each(|s| *s = 0);
            self.generation = 1;
        }
        self.generation
    }

    /// Positions whose error may change under `segs`, deduplicated.
    fn candidates(&mut self, axis: usize, segs: &[Segment]) -> Vec<usize> {
        let mut out = Vec::new();
        self.candidates_into(axis, segs, &mut out);
        out
    }

    /// [`Self::candidates`] into `out` (cleared first).
    fn candidates_into(&mut self, axis: usize, segs: &[Segment], out: &mut Vec<usize>) {
        out.clear();
        let m = self.len(axis) as isize;
        let h = (self.kernels[axis].rows() / 2) as isize;
        let cyclic = self.objective.padding == Padding::Cyclic;
        let g = self.next_generation();
        let mut push = |q: isize, stamp: &mut [u32]| {
            let q = if cyclic {
                q.rem_euclid(m)
            } else if q < 0 || q >= m {
                return;
            } else {
                q
            };
            let q = q as usize;
            if stamp[q] != g {
                stamp[q] = g;
                out.push(q);
            }
        };
        for s in segs {
            let (a, b) = (s.dst as isize, (s.dst + s.len) as isize - 1);
            if cyclic && b - a + 1 + 2 * h >= m {
                for q in 0..m {
                    push(q, &mut self.stamp);
                }
                continue;
            }
            if b - a < 2 * h + 1 {
                for q in a - h..=b + h {
                    push(q, &mut self.stamp);
                }
            } else {
                for q in (a - h..a + h).chain(b - h + 1..=b + h) {
                    push(q, &mut self.stamp);
                }
            }
        }
    }

    /// Exact raw error change of applying `segs` on `axis`, evaluated without changing anything.
    ///
    /// The segments must describe a permutation of the positions they cover.
    pub fn delta(&mut self, axis: usize, segs: &[Segment]) -> i128 {
        if segs.is_empty() {
            return 0;
        }
        if self.objective.kind == ErrorKind::Abs
            && matches!(
                self.objective.padding,
                Padding::ZerosAndOnes | Padding::Zero
            )
        {
            return self.delta_pairs(axis, segs);
        }
        self.delta_rows(axis, segs)
    }

    /// Σ_kc K[d][kc] · |x ∩ shift(y, kc − pad)| over layers, real bits only: the weighted
    /// overlap of two rows `d` apart. Symmetric in (x, y) because K is column-symmetric.
    #[inline]
    fn real_overlap(&self, axis: usize, x: u32, y: u32, d: usize) -> u128 {
        let k = &self.kernels[axis];
        let view = &self.views[axis];
        let kr = d + k.rows() / 2;
        let pad = view.pad;
        let mut acc = 0u128;
        if pad < 64 {
            let row = &self.kernel_rows_raw[axis][kr * k.cols()..(kr + 1) * k.cols()];
            for &l in &self.all_layers {
                let (xb, yb) = (
                    view.masked_real(l, x as usize),
                    view.masked_real(l, y as usize),
                );
                acc += weighted_overlap(xb, yb, row, pad);
            }
            return acc;
        }
        for &l in &self.all_layers {
            let xb = view.real_of(l, x as usize);
            let yb = view.real_of(l, y as usize);
            for kc in 0..k.cols() {
                let wgt = k.raw(kr, kc);
                if wgt != 0 {
                    acc +=
                        u128::from(wgt) * u128::from(dot_shift(xb, yb, kc as isize - pad as isize));
                }
            }
        }
        acc
    }

    /// [`Self::real_overlap`] of `x` and `y` for every distance d in 1..=h at once
    /// (`out[d - 1]`, h = half the kernel height along `axis`): one pass over the words
    /// counts the overlaps at every column shift, shared by all kernel rows.
    pub(crate) fn real_overlaps(&self, axis: usize, x: u32, y: u32, out: &mut [i64]) {
        let k = &self.kernels[axis];
        let h = k.rows() / 2;
        let view = &self.views[axis];
        let pad = view.pad;
        if pad >= 64 || k.cols() != 2 * pad + 1 {
            for d in 1..=h {
                out[d - 1] = self.real_overlap(axis, x, y, d) as i64;
            }
            return;
        }
        let mut counts = [0u32; 127];
        let c = &mut counts[..k.cols()];
        for &l in &self.all_layers {
            shift_counts_masked(
                view.masked_real(l, x as usize),
                view.masked_real(l, y as usize),
                pad,
                c,
            );
        }
        for d in 1..=h {
            let kr = d + h;
            let row = &self.kernel_rows_raw[axis][kr * k.cols()..(kr + 1) * k.cols()];
            out[d - 1] = row
                .iter()
                .zip(c.iter())
                .map(|(&w, &n)| w as i64 * i64::from(n))
                .sum();
        }
    }

    /// Whether the error is the pair form that [`Self::delta_pairs`] (and the tables of
    /// `polish`) use: abs error with zero or ZerosAndOnes padding.
    pub(crate) fn pair_form(&self) -> bool {
        self.objective.kind == ErrorKind::Abs
            && matches!(
                self.objective.padding,
                Padding::ZerosAndOnes | Padding::Zero
            )
    }

    /// The position-dependent part of the error of entity `x` shown at `p` that is not a
    /// pair overlap: its weighted overlap with the left padding bits of its neighbours (one
    /// per neighbour in range) and with the padding rows above and below the display.
    pub(crate) fn edge_term(&self, axis: usize, x: u32, p: usize) -> u128 {
        let m = self.len(axis) as isize;
        let h = (self.kernels[axis].rows() / 2) as isize;
        let p = p as isize;
        let mut g = 0u128;
        for d in 1..=h {
            let cnt = u128::from(p - d >= 0) + u128::from(p + d < m);
            // the bottom padding row is a row of left padding bits only
            if cnt > 0 {
                g += cnt * self.contrib(axis, x, Src::Bottom, d);
            }
        }
        for d in -h..=h {
            let q = p + d;
            if q < 0 {
                g += self.contrib(axis, x, Src::Top, d);
            } else if q >= m {
                g += self.contrib(axis, x, Src::Bottom, d);
            }
        }
        g
    }

    /// [`Self::delta`] for the abs error with zero or ZerosAndOnes padding, by pairs: the
    /// error is a constant minus twice the weighted overlap of every pair of rows at most
    /// h apart, minus terms of rows near the ends (see [`Self::edge_term`]). Only pairs
    /// that are not at the same distance before and after the move change; each is
    /// evaluated once (not once per row).
    fn delta_pairs(&mut self, axis: usize, segs: &[Segment]) -> i128 {
        let m = self.len(axis);
        let h = self.kernels[axis].rows() / 2;
        let inverse: Vec<Segment> = segs
            .iter()
            .map(|s| Segment {
                dst: s.src,
                src: s.dst,
                len: s.len,
                mirrored: s.mirrored,
            })
            .collect();
        if !self.cache_ok[axis] && h > 0 {
            // rebuild once enough moves were evaluated without a cache to pay for it
            self.cache_misses[axis] += 1;
            if self.cache_misses[axis] >= (m * h / 256).max(16) {
                self.rebuild_cache(axis);
            }
        }
        let (mut new_cands, mut old_cands) = std::mem::take(&mut self.cand_bufs);
        self.candidates_into(axis, segs, &mut new_cands);
        self.candidates_into(axis, &inverse, &mut old_cands);
        // old position of each new position (`src`) and new position of each old one (`dst`)
        // over the window the moved segments and their reach cover
        let lo = segs
            .iter()
            .map(|s| s.dst)
            .min()
            .unwrap_or(0)
            .saturating_sub(h);
        let hi = segs
            .iter()
            .map(|s| s.dst + s.len)
            .max()
            .unwrap_or(0)
            .saturating_add(2 * h)
            .min(m);
        let mut window = std::mem::take(&mut self.window);
        window.clear();
        window.extend((lo..hi).map(|p| [p as u32, p as u32]));
        for s in segs {
            for p in s.dst..s.dst + s.len {
                if let Some(q) = s.source_of(p) {
                    window[p - lo][0] = q as u32;
                    window[q - lo][1] = p as u32;
                }
            }
        }
        let map = &self.maps[axis];
        let through = |p: usize, k: usize| {
            if p >= lo && p < hi {
                window[p - lo][k] as usize
            } else {
                p
            }
        };
        let src = |p: usize| through(p, 0);
        let dst = |p: usize| through(p, 1);
        let cached = self.cache_ok[axis];
        // the buffer of the last evaluated move's overlaps, reused
        let mut fresh = self.pending.take().map(|p| p.2).unwrap_or_default();
        fresh.clear();
        let mut pairs = 0i128;
        for &p in &new_cands {
            let sp = src(p);
            for d in 1..=h.min(m - 1 - p) {
                let q = p + d;
                let sq = src(q);
                if sq.abs_diff(sp) != d {
                    let v = self.real_overlap(axis, map[sp], map[sq], d);
                    pairs += v as i128;
                    if cached {
                        fresh.push((map[sp], d, v));
                    }
                } else if cached && sq + d == sp {
                    // the same pair upside down: same overlap, new upper entity
                    let v = self.pair_cache[axis][map[sq] as usize * h + d - 1];
                    fresh.push((map[sp], d, v));
                }
            }
        }
        let cache = &self.pair_cache[axis];
        for &p in &old_cands {
            let dp = dst(p);
            for d in 1..=h.min(m - 1 - p) {
                let q = p + d;
                if dst(q).abs_diff(dp) != d {
                    pairs -= if cached {
                        cache[map[p] as usize * h + d - 1]
                    } else {
                        self.real_overlap(axis, map[p], map[q], d)
                    } as i128;
                }
            }
        }
        // rows whose old or new position is within h of an end
        let mut edge = 0i128;
        let near = |p: usize| p < h || p + h >= m;
        for p in (0..h.min(m)).chain(m.saturating_sub(h).max(h.min(m))..m) {
            let sp = src(p);
            if sp != p {
                let x = map[sp];
                edge += self.edge_term(axis, x, p) as i128 - self.edge_term(axis, x, sp) as i128;
            }
            let dp = dst(p);
            if dp != p && !near(dp) {
                let x = map[p];
                edge += self.edge_term(axis, x, dp) as i128 - self.edge_term(axis, x, p) as i128;
            }
        }
        self.window = window;
        self.cand_bufs = (new_cands, old_cands);
        if cached {
            self.pending = Some((axis, segs.to_vec(), fresh));
        }
        -2 * pairs - edge
    }

    /// Whether moves on `axis` currently read old pair overlaps from the cache (tests).
    pub fn pair_cache_ready(&self, axis: usize) -> bool {
        self.cache_ok[axis]
    }

    /// Builds the pair-overlap cache of `axis` now (a search builds it by itself after a few
    /// moves on one axis; benchmarks call this to keep the build out of the timed moves).
    pub fn warm_pair_cache(&mut self, axis: usize) {
        if !self.cache_ok[axis] && self.kernels[axis].rows() > 1 {
            self.rebuild_cache(axis);
        }
    }

    /// Recomputes the pair-overlap cache of `axis`.
    fn rebuild_cache(&mut self, axis: usize) {
        let m = self.len(axis);
        let h = self.kernels[axis].rows() / 2;
        let map = &self.maps[axis];
        let rows: Vec<Vec<u128>> = (0..m)
            .into_par_iter()
            .map(|p| {
                (1..=h.min(m - 1 - p))
                    .map(|d| self.real_overlap(axis, map[p], map[p + d], d))
                    .collect()
            })
            .collect();
        let mut cache = std::mem::take(&mut self.pair_cache[axis]);
        cache.clear();
        cache.resize(self.views[axis].n_ent * h, 0);
        for (p, vals) in rows.into_iter().enumerate() {
            let e = self.maps[axis][p] as usize;
            cache[e * h..e * h + vals.len()].copy_from_slice(&vals);
        }
        self.pair_cache[axis] = cache;
        self.cache_ok[axis] = true;
        self.cache_misses[axis] = 0;
    }

    fn invalidate_caches(&mut self) {
        self.cache_ok = [false, false];
        self.cache_misses = [0, 0];
        self.pending = None;
    }

    /// [`Self::delta`] row by row: every dirty row's error before and after.
    fn delta_rows(&mut self, axis: usize, segs: &[Segment]) -> i128 {
        let cands = self.candidates(axis, segs);
        let map = &self.maps[axis];
        let h = (self.kernels[axis].rows() / 2) as isize;
        let source = |p: usize| -> (usize, bool) {
            for s in segs {
                if let Some(q) = s.source_of(p) {
                    return (q, s.mirrored);
                }
            }
            (p, false)
        };
        let new_at = |q: usize| map[source(q).0];
        let old_at = |q: usize| map[q];
        let mut delta = 0i128;
        for &p in &cands {
            let (p_old, mirrored) = source(p);
            let ent = map[p_old];
            let newf = |d: isize| self.fetch(axis, new_at, p as isize + d);
            let oldf = |d: isize| self.fetch(axis, old_at, p_old as isize + d);
            if mirrored && (-h..=h).all(|d| newf(d) == oldf(-d)) {
                continue;
            }
            match self.objective.kind {
                ErrorKind::Abs => {
                    // A reversed row meets its old neighbour at -d where it now has +d; the
                    // kernel is row-symmetric, so pair offset d with old offset -d.
                    let sign = if mirrored { -1 } else { 1 };
                    for d in -h..=h {
                        let (sn, so) = (newf(d), oldf(sign * d));
                        if sn != so {
                            delta += self.contrib(axis, ent, so, sign * d) as i128
                                - self.contrib(axis, ent, sn, d) as i128;
                        }
                    }
                }
                ErrorKind::Quadratic => {
                    if (-h..=h).any(|d| newf(d) != oldf(d)) {
                        delta += self.row_raw(axis, ent, newf) - self.row_raw(axis, ent, oldf);
                    }
                }
            }
        }
        delta
    }

    /// Applies `segs` on `axis`; `delta` must be the value [`Arrangement::delta`] returned.
    pub fn commit(&mut self, axis: usize, segs: &[Segment], delta: i128) {
        let pending = self.pending.take();
        if self.cache_ok[axis] {
            match pending {
                Some((a, ref sg, ref fresh)) if a == axis && sg.as_slice() == segs => {
                    let h = self.kernels[axis].rows() / 2;
                    // pairs inside a reversed block keep their overlap but swap their ends
                    let mut moved = Vec::new();
                    for s in segs.iter().filter(|s| s.mirrored) {
                        for p in s.dst..s.dst + s.len {
                            for d in 1..=h.min(s.dst + s.len - 1 - p) {
                                let upper_new = self.maps[axis][s.source_of(p).unwrap_or(p)];
                                let upper_old =
                                    self.maps[axis][s.source_of(p + d).unwrap_or(p + d)];
                                let v = self.pair_cache[axis][upper_old as usize * h + d - 1];
                                moved.push((upper_new, d, v));
                            }
                        }
                    }
                    let cache = &mut self.pair_cache[axis];
                    for &(e, d, v) in moved.iter().chain(fresh.iter()) {
                        cache[e as usize * h + d - 1] = v;
                    }
                }
                _ => self.cache_ok[axis] = false,
            }
        }
        if !segs.is_empty() {
            self.cache_ok[1 - axis] = false;
            self.cache_misses[1 - axis] = 0;
        }
        let mut pairs: Vec<(usize, usize)> = Vec::new();
        for s in segs {
            for i in 0..s.len {
                let dst = s.dst + i;
                if let Some(src) = s.source_of(dst) {
                    pairs.push((dst, src));
                }
            }
        }
        let old: Vec<u32> = pairs.iter().map(|&(_, s)| self.maps[axis][s]).collect();
        for (&(d, _), &v) in pairs.iter().zip(old.iter()) {
            self.maps[axis][d] = v;
        }
        // only entities of the other axis with a bit at a moved position change: those whose
        // displayed position is set in a moved entity's bits (a 0.2 %-dense matrix touches
        // a few hundred of 4,215 columns instead of all of them); each moves its bits of the
        // span the move covers
        let lo = pairs.iter().map(|&(d, _)| d).min().unwrap_or(0);
        let hi = pairs.iter().map(|&(d, _)| d + 1).max().unwrap_or(0);
        let mut new_pos: Vec<u32> = (lo as u32..hi as u32).collect();
        for &(d, s) in &pairs {
            new_pos[s - lo] = d as u32;
        }
        let mut scratch = std::mem::take(&mut self.scratch_bits);
        let [v0, v1] = &mut self.views;
        let (moved, other) = if axis == 0 { (&*v0, v1) } else { (&*v1, v0) };
        let mut union = vec![0u64; moved.w];
        for l in 0..moved.n_layers {
            union.iter_mut().for_each(|u| *u = 0);
            for &e in &old {
                for (u, &b) in union.iter_mut().zip(moved.real_of(l, e as usize)) {
                    *u |= b;
                }
            }
            let other_map = &self.maps[1 - axis];
            for i in set_bits(&union) {
                let ent = other_map[i - moved.pad] as usize;
                other.permute_entity(l, ent, lo, &new_pos, &mut scratch);
            }
        }
        self.scratch_bits = scratch;
        self.total += delta;
    }

    /// Replaces the order of `axis` (recomputes the error from scratch).
    ///
    /// # Errors
    /// An order that is not a permutation.
    pub fn set_order(&mut self, axis: usize, order: &[usize]) -> Result<(), OrderError> {
        let name = if axis == 0 { "row_order" } else { "col_order" };
        self.maps[axis] = check_order(order, self.len(axis), name)?;
        self.invalidate_caches();
        let other = 1 - axis;
        self.views[other] = View::build(
            &self.matrix,
            other,
            &self.maps[axis],
            self.kernels[other].cols() / 2,
            self.objective.padding,
        );
        self.total = self.full_raw(0);
        Ok(())
    }

    /// Swaps colours `a` and `b` in original column `col` (a relabelling of that attribute,
    /// spec §9.5) and returns the exact raw error change, computed incrementally: the error of
    /// the band of columns within the kernel's reach of `col`, in layers `a` and `b` only, is
    /// subtracted, the colours are swapped, and the band's error is added back. Applying the
    /// same swap again undoes it exactly.
    ///
    /// # Panics
    /// A column or colour out of range.
    pub fn recolour(&mut self, col: usize, a: usize, b: usize) -> i128 {
        let k = self.matrix.n_layers();
        assert!(col < self.len(1) && a < k && b < k, "recolour out of range");
        if a == b {
            return 0;
        }
        self.invalidate_caches();
        let band = self.recolour_band(col);
        let layers = [a, b];
        let old = self.band_raw(&band, &layers);
        self.matrix.swap_colours_in_column(col, a, b);
        self.views[1].swap_entity_layers(col, a, b);
        let pc = self.maps[1]
            .iter()
            .position(|&c| c as usize == col)
            .expect("column in map");
        self.views[0].swap_position_layers(pc, a, b);
        for v in &mut self.colours[col * k..(col + 1) * k] {
            if *v as usize == a {
                *v = b as u8;
            } else if *v as usize == b {
                *v = a as u8;
            }
        }
        let new = self.band_raw(&band, &layers);
        self.total += new - old;
        new - old
    }

    /// Displayed column positions whose error can change when original column `col` is
    /// recoloured: those within the kernel's reach along the columns.
    fn recolour_band(&self, col: usize) -> Vec<usize> {
        let n = self.len(1);
        let h = self.kernels[1].rows() / 2;
        let pc = self.maps[1]
            .iter()
            .position(|&c| c as usize == col)
            .expect("column in map");
        if self.objective.padding == Padding::Cyclic {
            if 2 * h + 1 >= n {
                return (0..n).collect();
            }
            return (0..=2 * h).map(|t| (pc + n + t - h) % n).collect();
        }
        (pc.saturating_sub(h)..(pc + h + 1).min(n)).collect()
    }

    fn band_raw(&self, band: &[usize], layers: &[usize]) -> i128 {
        let map = &self.maps[1];
        band.iter()
            .map(|&q| {
                self.row_raw_in(
                    1,
                    map[q],
                    |d| self.fetch(1, |i| map[i], q as isize + d),
                    layers,
                )
            })
            .sum()
    }

    /// Current colour of every value of every original column, row-major
    /// (`n_cols` x `n_colours`; empty for a binary matrix).
    pub fn colour_maps(&self) -> &[u8] {
        &self.colours
    }

    /// Current colour of value `v` (its layer in the input matrix) of original column `col`.
    pub fn colour_of(&self, col: usize, v: usize) -> usize {
        self.colours[col * self.matrix.n_layers() + v] as usize
    }
}
