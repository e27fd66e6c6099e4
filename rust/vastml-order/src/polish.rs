//! Exhaustive polishing of a local minimum of the pair-form error (abs error, zero or
//! ZerosAndOnes padding): every swap, every reversal and every relocation of a block of
//! 1..=`max_block` consecutive positions (also reversed: Or-opt) to any other place, on
//! one axis at a time, the axes alternating until neither improves.
//!
//! With the other axis fixed, the error of an axis's order `o` is a constant minus
//! `S(o) = 2 Σ_{p<q≤p+h} W[o_p][o_q][q−p] + Σ_p e(o_p, p)`, where `W[a][b][d]` is the
//! kernel-weighted overlap of entities a and b shown d apart and `e(x, p)` the part of x's
//! end terms that depends on its position (zero more than h from both ends). A [`PairTable`]
//! holds W and e for the current order of the other axis, so a move is scored from table
//! look-ups only (no bit work): a far swap reads 8h values, a block relocation about
//! 2·len·h. The random local search never draws most of these moves (a relocation over
//! more than 50 positions, a block moved and reversed at once), and a local minimum of it
//! often still has some.

// positions index several arrays at once here: index loops read best
#![allow(clippy::needless_range_loop)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rayon::prelude::*;

use crate::arrangement::Arrangement;
use crate::error::{OrderError, invalid};
use crate::view::Src;

/// Largest table (entities² × h entries) [`polish`] builds; bigger axes are left alone.
pub const MAX_TABLE_ENTRIES: usize = 1 << 23;

/// Whether [`PairTable::build`] accepts `axis` of `arr`: the pair form, at least two
/// positions, a table of at most [`MAX_TABLE_ENTRIES`] entries, and sums that fit an i64.
pub fn table_fits(arr: &Arrangement, axis: usize) -> bool {
    let m = arr.len(axis);
    let h = (arr.kernel_rows(axis) / 2).min(m.saturating_sub(1)).max(1);
    let other = (arr.len(1 - axis) * arr.matrix().n_layers()) as u128;
    let bound = u128::from(arr.objective().kernel.sum()) * other * (2 * m * h + m) as u128;
    arr.pair_form() && m >= 2 && m * m * h <= MAX_TABLE_ENTRIES && bound < 1 << 62
}

/// Pair overlaps and end terms of one axis for the current order of the other axis.
#[derive(Debug, Clone)]
pub struct PairTable {
    m: usize,
    h: usize,
    /// `w[(a * m + b) * h + d - 1]`: weighted overlap of entities a and b shown d apart.
    w: Vec<i64>,
    /// `e[x * m + p]`: end term of entity x at position p minus its value in the interior.
    e: Vec<i64>,
}

impl PairTable {
    /// The table of `axis` of `arr` (which must have the pair form: abs error, zero or
    /// ZerosAndOnes padding).
    ///
    /// # Errors
    /// An objective that is not of the pair form, or a table above [`MAX_TABLE_ENTRIES`].
    pub fn build(arr: &Arrangement, axis: usize) -> Result<Self, OrderError> {
        if !table_fits(arr, axis) {
            return Err(invalid(
                "polish",
                "needs the abs error with zeros_and_ones or zero padding and an axis of 2 to \
                 sqrt(MAX_TABLE_ENTRIES / h) positions",
            ));
        }
        let m = arr.len(axis);
        let h = (arr.kernel_rows(axis) / 2).min(m - 1);
        let hk = arr.kernel_rows(axis) / 2;
        let mut w = vec![0i64; m * m * h];
        if h > 0 {
            let upper: Vec<Vec<i64>> = (0..m)
                .into_par_iter()
                .map(|a| {
                    let mut row = vec![0i64; (m - a - 1) * h];
                    let mut buf = vec![0i64; hk];
                    for b in a + 1..m {
                        arr.real_overlaps(axis, a as u32, b as u32, &mut buf);
                        row[(b - a - 1) * h..(b - a) * h].copy_from_slice(&buf[..h]);
                    }
                    row
                })
                .collect();
            for (a, row) in upper.into_iter().enumerate() {
                for b in a + 1..m {
                    let v = &row[(b - a - 1) * h..(b - a) * h];
                    w[(a * m + b) * h..(a * m + b + 1) * h].copy_from_slice(v);
                    w[(b * m + a) * h..(b * m + a + 1) * h].copy_from_slice(v);
                }
            }
        }
        // end terms: Σ_{d=1..h} (#neighbours at ±d in range) cB(d) + padding rows beyond
        // the ends, minus the interior value 2 Σ cB(d) (see `Arrangement::edge_term`)
        let e: Vec<i64> = (0..m)
            .into_par_iter()
            .flat_map_iter(|x| {
                let cb: Vec<i64> = (0..=hk as isize)
                    .map(|d| arr.contrib(axis, x as u32, Src::Bottom, d) as i64)
                    .collect();
                let ct: Vec<i64> = (0..=hk as isize)
                    .map(|d| arr.contrib(axis, x as u32, Src::Top, -d) as i64)
                    .collect();
                let interior: i64 = 2 * cb[1..].iter().sum::<i64>();
                (0..m).map(move |p| {
                    if p >= hk && p + hk < m {
                        return 0;
                    }
                    let mut g = 0i64;
                    for d in 1..=hk {
                        let cnt = i64::from(p >= d) + i64::from(p + d < m);
                        g += cnt * cb[d];
                        if p < d {
                            g += ct[d];
                        }
                        if p + d >= m {
                            g += cb[d];
                        }
                    }
                    g - interior
                })
            })
            .collect();
        Ok(Self { m, h, w, e })
    }

    #[inline]
    fn wv(&self, a: u32, b: u32, d: usize) -> i64 {
        if d == 0 || d > self.h {
            0
        } else {
            self.w[(a as usize * self.m + b as usize) * self.h + d - 1]
        }
    }

    #[inline]
    fn ev(&self, x: u32, p: usize) -> i64 {
        self.e[x as usize * self.m + p]
    }

    fn near(&self, p: usize) -> bool {
        p < self.h || p + self.h >= self.m
    }

    /// `S(o)`: the raw error of order `o` is a constant minus this.
    pub fn score(&self, o: &[u32]) -> i64 {
        let (m, h) = (self.m, self.h);
        let mut s = 0i64;
        for p in 0..m {
            for d in 1..=h.min(m - 1 - p) {
                s += 2 * self.wv(o[p], o[p + d], d);
            }
            s += self.ev(o[p], p);
        }
        s
    }

    /// Change of `S` when positions `a` and `b` swap their entities.
    pub fn delta_swap(&self, o: &[u32], a: usize, b: usize) -> i64 {
        let (m, h) = (self.m, self.h);
        let (x, y) = (o[a], o[b]);
        let mut ds = 0i64;
        for (p, old, new) in [(a, x, y), (b, y, x)] {
            for q in p.saturating_sub(h)..=(p + h).min(m - 1) {
                if q == a || q == b {
                    continue;
                }
                let d = p.abs_diff(q);
                ds += 2 * (self.wv(new, o[q], d) - self.wv(old, o[q], d));
            }
            ds += self.ev(new, p) - self.ev(old, p);
        }
        ds
    }

    /// Change of `S` when positions `a..=b` are reversed (`a < b`).
    pub fn delta_reverse(&self, o: &[u32], a: usize, b: usize) -> i64 {
        let (m, h) = (self.m, self.h);
        let mut ds = 0i64;
        let mut visit = |p: usize| {
            let (np, op) = (o[a + b - p], o[p]);
            for q in p.saturating_sub(h)..a {
                let d = p - q;
                ds += 2 * (self.wv(np, o[q], d) - self.wv(op, o[q], d));
            }
            for q in b + 1..=(p + h).min(m - 1) {
                let d = q - p;
                ds += 2 * (self.wv(np, o[q], d) - self.wv(op, o[q], d));
            }
            if self.near(p) {
                ds += self.ev(np, p) - self.ev(op, p);
            }
        };
        if b - a < 2 * h {
            (a..=b).for_each(&mut visit);
        } else {
            (a..a + h).chain(b + 1 - h..=b).for_each(&mut visit);
            // positions near an end inside the block's middle: end terms only
            for p in (a + h..=b - h).filter(|&p| self.near(p)) {
                ds += self.ev(o[a + b - p], p) - self.ev(o[p], p);
            }
        }
        ds
    }

    /// The best relocation of the block `o[i..i + len]`, reversed or not, to any other
    /// place: `(change of S, gap in the order without the block, reversed)`, or `None`
    /// when there is no other place.
    pub fn best_relocation(&self, o: &[u32], i: usize, len: usize) -> Option<(i64, usize, bool)> {
        let (m, h) = (self.m, self.h);
        if len == 0 || len >= m || i + len > m {
            return None;
        }
        let blk: Vec<u32> = o[i..i + len].to_vec();
        let rev: Vec<u32> = blk.iter().rev().copied().collect();
        let s: Vec<u32> = o[..i].iter().chain(&o[i + len..]).copied().collect();
        let ms = s.len();
        // cross[g]: Σ over pairs of s crossing gap g (x < g <= y, y - x <= h) of
        // W(d + len) - W(d): what inserting the block there does to them
        let f = |x: usize, y: usize| {
            let d = y - x;
            self.wv(s[x], s[y], d + len) - self.wv(s[x], s[y], d)
        };
        let mut cross = vec![0i64; ms + 1];
        for g in 0..ms {
            let mut c = cross[g];
            for y in g + 1..=(g + h).min(ms - 1) {
                c += f(g, y);
            }
            for x in g.saturating_sub(h)..g {
                c -= f(x, g);
            }
            cross[g + 1] = c;
        }
        let bpairs = |bv: &[u32], g: usize| -> i64 {
            let mut t = 0i64;
            for (k, &z) in bv.iter().enumerate() {
                // left neighbours s[g-1-t] at distance k + 1 + t
                let mut d = k + 1;
                let mut q = g;
                while d <= h && q > 0 {
                    q -= 1;
                    t += self.wv(z, s[q], d);
                    d += 1;
                }
                let mut d = len - k;
                let mut q = g;
                while d <= h && q < ms {
                    t += self.wv(z, s[q], d);
                    q += 1;
                    d += 1;
                }
            }
            t
        };
        let near: Vec<usize> = (0..m).filter(|&p| self.near(p)).collect();
        let ends = |bv: &[u32], g: usize| -> i64 {
            near.iter()
                .map(|&p| {
                    let x = if p < g {
                        s[p]
                    } else if p < g + len {
                        bv[p - g]
                    } else {
                        s[p - len]
                    };
                    self.ev(x, p)
                })
                .sum()
        };
        let base = 2 * (cross[i] + bpairs(&blk, i)) + ends(&blk, i);
        let mut best: Option<(i64, usize, bool)> = None;
        for g in 0..=ms {
            for reversed in [false, true] {
                if reversed && len == 1 || !reversed && g == i {
                    continue;
                }
                let bv = if reversed { &rev } else { &blk };
                let v = 2 * (cross[g] + bpairs(bv, g)) + ends(bv, g) - base;
                if best.is_none_or(|b| v > b.0) {
                    best = Some((v, g, reversed));
                }
            }
        }
        best
    }
}

/// Applies a relocation found by [`PairTable::best_relocation`].
fn relocate(o: &mut Vec<u32>, i: usize, len: usize, g: usize, reversed: bool) {
    let mut blk: Vec<u32> = o.drain(i..i + len).collect();
    if reversed {
        blk.reverse();
    }
    o.splice(g..g, blk);
}

/// What [`polish`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolishReport {
    /// Improving moves applied: swaps, reversals, block relocations.
    pub moves: [usize; 3],
    /// Axis passes run (a table built and every neighbourhood scanned until no gain).
    pub passes: usize,
}

/// Improves one axis until no swap, reversal or block relocation (blocks of 1..=`max_block`,
/// also reversed) improves it, or until `deadline` (then it keeps the moves applied so
/// far); returns the number of moves of each kind applied. The arrangement's order is set
/// at the end (its error is recomputed from scratch).
///
/// # Errors
/// As [`PairTable::build`], cancellation.
pub fn polish_axis(
    arr: &mut Arrangement,
    axis: usize,
    max_block: usize,
    deadline: Option<Instant>,
    cancel: &AtomicBool,
) -> Result<[usize; 3], OrderError> {
    let table = PairTable::build(arr, axis)?;
    let m = arr.len(axis);
    let mut o: Vec<u32> = arr.order(axis).iter().map(|&x| x as u32).collect();
    let mut moves = [0usize; 3];
    let mut gain = 0i64;
    let late = || deadline.is_some_and(|d| Instant::now() >= d);
    'scan: loop {
        let before = gain;
        for a in 0..m {
            if cancel.load(Ordering::Relaxed) {
                return Err(OrderError::Cancelled);
            }
            if late() {
                break 'scan;
            }
            for b in a + 1..m {
                let v = table.delta_swap(&o, a, b);
                if v > 0 {
                    o.swap(a, b);
                    gain += v;
                    moves[0] += 1;
                }
            }
        }
        for a in 0..m {
            if cancel.load(Ordering::Relaxed) {
                return Err(OrderError::Cancelled);
            }
            if late() {
                break 'scan;
            }
            for b in a + 1..m {
                let v = table.delta_reverse(&o, a, b);
                if v > 0 {
                    o[a..=b].reverse();
                    gain += v;
                    moves[1] += 1;
                }
            }
        }
        for len in 1..=max_block.min(m.saturating_sub(1)) {
            for i in 0..=m - len {
                if cancel.load(Ordering::Relaxed) {
                    return Err(OrderError::Cancelled);
                }
                if late() {
                    break 'scan;
                }
                if let Some((v, g, reversed)) = table.best_relocation(&o, i, len) {
                    if v > 0 {
                        relocate(&mut o, i, len, g, reversed);
                        gain += v;
                        moves[2] += 1;
                    }
                }
            }
        }
        if gain == before {
            break;
        }
    }
    if gain > 0 {
        let expected = arr.raw_error() - i128::from(gain);
        let order: Vec<usize> = o.iter().map(|&x| x as usize).collect();
        arr.set_order(axis, &order)?;
        debug_assert_eq!(arr.raw_error(), expected);
    }
    Ok(moves)
}

/// [`polish_axis`] on the rows, then the columns, alternating until an axis pass applies no
/// move on either (or `max_passes` axis passes ran, or `deadline` passed: the moves applied
/// until then are kept). Axes whose table would be too large
/// are skipped; an objective that is not of the pair form is left unchanged.
///
/// # Errors
/// Cancellation.
pub fn polish(
    arr: &mut Arrangement,
    axes: &[usize],
    max_block: usize,
    max_passes: usize,
    deadline: Option<Instant>,
    cancel: &AtomicBool,
) -> Result<PolishReport, OrderError> {
    let mut report = PolishReport::default();
    let usable: Vec<usize> = axes
        .iter()
        .copied()
        .filter(|&a| table_fits(arr, a))
        .collect();
    let mut quiet = 0;
    let mut k = 0;
    while quiet < usable.len()
        && report.passes < max_passes
        && deadline.is_none_or(|d| Instant::now() < d)
    {
        let axis = usable[k % usable.len()];
        k += 1;
        let mv = polish_axis(arr, axis, max_block, deadline, cancel)?;
        report.passes += 1;
        if mv.iter().sum::<usize>() == 0 {
            quiet += 1;
        } else {
            quiet = 1;
        }
        for (t, v) in report.moves.iter_mut().zip(mv) {
            *t += v;
        }
    }
    Ok(report)
}
