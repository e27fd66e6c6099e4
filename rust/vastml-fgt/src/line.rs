//! Points on a line in a few passes: exact order statistics (quantiles without sorting) and
//! the linear binning of an affine image of the points on a regular grid.
//!
//! Both serve the binned density functionals of the Sheather-Jones bandwidth selector, where
//! the data can have 1e7 points and everything else costs a few milliseconds.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use crate::{FgtError, Result};

/// Bins of one counting pass of [`order_statistics`] (its three arrays stay in the L1 cache).
const BINS: usize = 1024;
/// A bin holding at most this many values is sorted rather than counted again.
const GATHER: usize = 1 << 16;
/// Points per parallel task (and per cancellation check).
const CHUNK: usize = 1 << 16;
/// Up to this many points the functions run on the calling thread (a millisecond or less:
/// waking other threads would cost more on a busy machine).
pub const INLINE_LEN: usize = 1 << 18;

/// `f` of each chunk of `x`, in order: in parallel from [`INLINE_LEN`] points on.
fn map_chunks<T, F>(x: &[f64], chunk: usize, f: F) -> Vec<T>
where
    T: Send,
    F: Fn(&[f64]) -> T + Sync + Send,
{
    if x.len() <= INLINE_LEN {
        x.chunks(chunk).map(f).collect()
    } else {
        x.par_chunks(chunk).map(f).collect()
    }
}

fn checked(x: &[f64], cancel: &AtomicBool) -> Result<()> {
    if x.is_empty() {
        return Err(FgtError::Empty { name: "x" });
    }
    if cancel.load(Ordering::Relaxed) {
        return Err(FgtError::Cancelled);
    }
    Ok(())
}

/// Smallest and largest value of `x`, or None when it holds NaN or infinity.
fn finite_min_max(x: &[f64]) -> Option<(f64, f64)> {
    let parts = map_chunks(x, CHUNK, |c| {
        // four independent lanes, so that the comparisons do not wait on each other
        let (mut lo, mut hi, mut nan) = ([f64::INFINITY; 4], [f64::NEG_INFINITY; 4], false);
        let mut quads = c.chunks_exact(4);
        for q in &mut quads {
            for k in 0..4 {
                lo[k] = if q[k] < lo[k] { q[k] } else { lo[k] };
                hi[k] = if q[k] > hi[k] { q[k] } else { hi[k] };
                nan |= q[k].is_nan();
            }
        }
        for &v in quads.remainder() {
            lo[0] = lo[0].min(v);
            hi[0] = hi[0].max(v);
            nan |= v.is_nan();
        }
        let lo = lo.iter().fold(f64::INFINITY, |a, &b| a.min(b));
        (lo, hi.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b)), nan)
    });
    let (lo, hi, nan) = parts
        .into_iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY, false), |a, b| {
            (a.0.min(b.0), a.1.max(b.1), a.2 | b.2)
        });
    (!nan && lo.is_finite() && hi.is_finite()).then_some((lo, hi))
}

/// The values of `x` within [lo, hi] (inclusive), counted in [`BINS`] bins by a map that is
/// monotone in the value, so that each bin holds a contiguous run of the sorted values.
struct Histogram {
    lo: f64,
    hi: f64,
    half_lo: f64,
    scale: f64,
    count: Vec<usize>,
    /// Values below `lo`.
    below: usize,
}

impl Histogram {
    fn new(lo: f64, hi: f64) -> Self {
        // halves, so that hi - lo cannot overflow; every step below is monotone in v
        let (half_lo, width) = (0.5 * lo, 0.5 * hi - 0.5 * lo);
        let scale = if width > 0.0 {
            BINS as f64 / width
        } else {
            0.0
        };
        Histogram {
            lo,
            hi,
            half_lo,
            scale,
            count: vec![0; BINS],
            below: 0,
        }
    }

    fn bin(&self, v: f64) -> usize {
        (((0.5 * v - self.half_lo) * self.scale) as usize).min(BINS - 1)
    }

    fn of(x: &[f64], lo: f64, hi: f64, cancel: &AtomicBool) -> Result<Histogram> {
        let chunk = CHUNK.max(x.len().div_ceil(rayon::current_num_threads()));
        let parts = map_chunks(x, chunk, |c| {
            if cancel.load(Ordering::Relaxed) {
                return Err(FgtError::Cancelled);
            }
            let mut h = Histogram::new(lo, hi);
            for &v in c {
                if v < lo {
                    h.below += 1;
                } else if v <= hi {
                    let b = h.bin(v);
                    h.count[b] += 1;
                }
            }
            Ok(h)
        });
        parts
            .into_iter()
            .try_fold(Histogram::new(lo, hi), |mut a, b| {
                let b = b?;
                a.below += b.below;
                a.count.iter_mut().zip(&b.count).for_each(|(s, c)| *s += c);
                Ok(a)
            })
    }

    /// The bin holding the value of (global) rank `rank` and that value's rank within it.
    fn locate(&self, rank: usize) -> (usize, usize) {
        let mut r = rank - self.below;
        for (b, &c) in self.count.iter().enumerate() {
            if r < c {
                return (b, r);
            }
            r -= c;
        }
        unreachable!("rank beyond the histogram's values")
    }

    /// `visit(state, k, v)` for every value v of x in bins[k], with one state per chunk of x.
    fn scan<T, I, F>(&self, x: &[f64], bins: &[usize], init: I, visit: F) -> Vec<T>
    where
        T: Send,
        I: Fn() -> T + Sync + Send,
        F: Fn(&mut T, usize, f64) + Sync + Send,
    {
        let mut slot = vec![u16::MAX; BINS];
        for (k, &b) in bins.iter().enumerate() {
            slot[b] = k as u16; // at most BINS bins
        }
        map_chunks(x, CHUNK, |c| {
            let mut state = init();
            for &v in c {
                if v >= self.lo && v <= self.hi {
                    let k = slot[self.bin(v)];
                    if k != u16::MAX {
                        visit(&mut state, k as usize, v);
                    }
                }
            }
            state
        })
    }
}

/// Indices into `ranks` grouped by the bin of `hist` holding their value.
fn by_bin(hist: &Histogram, ranks: &[usize], which: &[usize]) -> Vec<(usize, Vec<usize>)> {
    let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
    for &i in which {
        let b = hist.locate(ranks[i]).0;
        match groups.iter_mut().find(|g| g.0 == b) {
            Some(g) => g.1.push(i),
            None => groups.push((b, vec![i])),
        }
    }
    groups
}

/// Values in a sorted sample of x (every stride-th) used to bracket each rank.
const SAMPLE: usize = 8192;

/// Floyd and Rivest's selection: brackets around each rank from the quantiles of a sample,
/// then one pass counting the values below each bracket and collecting those within; None
/// when a rank falls outside its bracket (the sample misled: rare; the caller counts bins).
fn from_sample_brackets(
    x: &[f64],
    ranks: &[usize],
    cancel: &AtomicBool,
) -> Result<Option<Vec<f64>>> {
    let n = x.len();
    if n < 4 * SAMPLE || ranks.is_empty() {
        return Ok(None);
    }
    let mut sample: Vec<f64> = (0..SAMPLE).map(|i| x[i * n / SAMPLE]).collect();
    sample.sort_unstable_by(f64::total_cmp);
    // (lo, hi) in the sample's ranks, widened by 4 standard deviations of a sample rank
    let mut spans: Vec<(usize, usize)> = ranks
        .iter()
        .map(|&r| {
            let p = r as f64 / n as f64;
            let pos = p * SAMPLE as f64;
            let margin = 4.0 * (SAMPLE as f64 * p * (1.0 - p)).sqrt() + 4.0;
            let a = (pos - margin).max(0.0) as usize;
            (a, ((pos + margin) as usize).min(SAMPLE - 1))
        })
        .collect();
    spans.sort_unstable();
    spans.dedup_by(|b, a| {
        let joined = b.0 <= a.1 + 1;
        a.1 = if joined { a.1.max(b.1) } else { a.1 };
        joined
    });
    // value brackets, merged until strictly apart (ties in the sample can make them touch);
    // a bracket reaching the sample's first or last value reaches past x's extremes
    let value = |k: usize| match k {
        0 => f64::NEG_INFINITY,
        k if k == SAMPLE - 1 => f64::INFINITY,
        k => sample[k],
    };
    let mut brackets: Vec<(f64, f64)> = Vec::with_capacity(spans.len());
    for &(a, b) in &spans {
        match brackets.last_mut() {
            Some(last) if value(a) <= last.1 => last.1 = last.1.max(value(b)),
            _ => brackets.push((value(a), value(b))),
        }
    }
    // interval 2j + 1 is bracket j, interval 2j the values between brackets j - 1 and j
    let parts = map_chunks(x, CHUNK, |c| {
        if cancel.load(Ordering::Relaxed) {
            return Err(FgtError::Cancelled);
        }
        let mut count = vec![0usize; 2 * brackets.len() + 1];
        let mut within: Vec<Vec<f64>> = vec![Vec::new(); brackets.len()];
        for &v in c {
            // the interval by counting bounds below v, without a branch on the comparisons
            let at: usize = brackets
                .iter()
                .map(|&(a, b)| usize::from(v >= a) + usize::from(v > b))
                .sum();
            count[at] += 1;
            if at & 1 == 1 {
                within[at >> 1].push(v);
            }
        }
        Ok((count, within))
    });
    let mut count = vec![0usize; 2 * brackets.len() + 1];
    let mut within: Vec<Vec<f64>> = vec![Vec::new(); brackets.len()];
    for part in parts {
        let (c, w) = part?;
        count.iter_mut().zip(&c).for_each(|(s, c)| *s += c);
        within.iter_mut().zip(w).for_each(|(s, c)| s.extend(c));
    }
    let below: Vec<usize> = (0..brackets.len())
        .map(|j| count[..2 * j + 1].iter().sum())
        .collect();
    let mut out = Vec::with_capacity(ranks.len());
    for &r in ranks {
        let hit = (0..brackets.len()).find(|&j| below[j] <= r && r < below[j] + within[j].len());
        match hit {
            Some(j) => {
                let k = r - below[j];
                out.push(*within[j].select_nth_unstable_by(k, f64::total_cmp).1);
            }
            None => return Ok(None),
        }
    }
    Ok(Some(out))
}

/// The values of ranks `ranks` (0-based, ascending order: rank 0 is the minimum) of `x`,
/// exactly as sorting would give them, in O(len) time: one pass for the range, then (from
/// 32,768 values on) brackets around each rank from a sorted sample of 8,192 values and one
/// pass collecting the values within them (Floyd and Rivest). Should a rank fall outside its
/// bracket, one counting pass over 1,024 bins and one pass gathering the few bins that hold
/// the ranks, which are then sorted; a bin too crowded to sort (heavy tails squeeze most
/// values into one bin of the full range) is counted again over its own range.
///
/// # Errors
/// [`FgtError::Empty`] for no values, [`FgtError::NonFinite`] for NaN or infinity,
/// [`FgtError::InvalidParameter`] for a rank `>= x.len()`, [`FgtError::Cancelled`].
///
/// # Example
/// ```
/// use std::sync::atomic::AtomicBool;
/// let x = [5.0, 1.0, 4.0, 2.0, 3.0];
/// let q = vastml_fgt::order_statistics(&x, &[0, 2, 4], &AtomicBool::new(false)).unwrap();
/// assert_eq!(q, vec![1.0, 3.0, 5.0]);
/// ```
pub fn order_statistics(x: &[f64], ranks: &[usize], cancel: &AtomicBool) -> Result<Vec<f64>> {
    checked(x, cancel)?;
    if let Some(&r) = ranks.iter().find(|&&r| r >= x.len()) {
        return Err(FgtError::InvalidParameter {
            name: "ranks",
            reason: format!("rank {r} of {} values", x.len()),
        });
    }
    let (lo, hi) = finite_min_max(x).ok_or(FgtError::NonFinite { name: "x" })?;
    match from_sample_brackets(x, ranks, cancel)? {
        Some(out) => Ok(out),
        None => by_counting(x, ranks, (lo, hi), cancel),
    }
}

/// [`order_statistics`] by counting bins, the values of `x` within `range` (its min and max).
fn by_counting(
    x: &[f64],
    ranks: &[usize],
    range: (f64, f64),
    cancel: &AtomicBool,
) -> Result<Vec<f64>> {
    let (lo, hi) = range;
    let mut out = vec![f64::NAN; ranks.len()];
    // (indices into ranks, the value range holding them)
    let mut pending: Vec<(Vec<usize>, f64, f64)> = vec![((0..ranks.len()).collect(), lo, hi)];
    while let Some((which, lo, hi)) = pending.pop() {
        let hist = Histogram::of(x, lo, hi, cancel)?;
        let (mut gather, crowded): (Vec<_>, Vec<_>) = by_bin(&hist, ranks, &which)
            .into_iter()
            .partition(|g| hist.count[g.0] <= GATHER);
        if !crowded.is_empty() {
            // the value range of each crowded bin: one pass
            let bins: Vec<usize> = crowded.iter().map(|g| g.0).collect();
            let none = (f64::INFINITY, f64::NEG_INFINITY);
            let parts = hist.scan(
                x,
                &bins,
                || vec![none; bins.len()],
                |r, k, v| {
                    r[k] = (r[k].0.min(v), r[k].1.max(v));
                },
            );
            for (k, (b, idx)) in crowded.into_iter().enumerate() {
                let (a, z) = parts
                    .iter()
                    .fold(none, |s, p| (s.0.min(p[k].0), s.1.max(p[k].1)));
                if a == z {
                    idx.iter().for_each(|&i| out[i] = a);
                } else if a > lo || z < hi {
                    pending.push((idx, a, z)); // narrower: count it again
                } else {
                    gather.push((b, idx)); // cannot narrow (rounding): sort it
                }
            }
        }
        if gather.is_empty() {
            continue;
        }
        let bins: Vec<usize> = gather.iter().map(|g| g.0).collect();
        let parts = hist.scan(
            x,
            &bins,
            || vec![Vec::new(); bins.len()],
            |f, k, v| f[k].push(v),
        );
        for (k, (_, idx)) in gather.into_iter().enumerate() {
            let mut values: Vec<f64> = parts.iter().flat_map(|p| p[k].iter().copied()).collect();
            values.sort_unstable_by(f64::total_cmp);
            let first = ranks[idx[0]] - hist.locate(ranks[idx[0]]).1;
            for i in idx {
                out[i] = values[ranks[i] - first];
            }
        }
    }
    Ok(out)
}

/// The linear binning of z = (x - center) * scale on the nodes lo + k spacing,
/// k = 0 .. n_nodes - 1: each z within [lo, lo + (n_nodes - 1) spacing] gives 1 - f to the
/// node below it and f to the one above (f its fractional position between them).
#[derive(Debug, Clone, PartialEq)]
pub struct LinearBinning {
    /// The node weights (they sum to the number of points inside).
    pub weights: Vec<f64>,
    /// The z of the points beyond the nodes, in the order of x.
    pub outside: Vec<f64>,
}

/// Bins z = (x - center) * scale linearly on n_nodes nodes from `lo` at `spacing` (see
/// [`LinearBinning`]), in one pass over x (parallel from [`INLINE_LEN`] points on).
///
/// # Errors
/// [`FgtError::InvalidParameter`] for a non-positive or non-finite `spacing` or `scale`, a
/// non-finite `center` or `lo`, or fewer than two nodes; [`FgtError::Empty`],
/// [`FgtError::Cancelled`].
///
/// # Example
/// ```
/// use std::sync::atomic::AtomicBool;
/// let x = [0.25, 1.0, 9.0];
/// let b = vastml_fgt::linear_binning(&x, 0.0, 1.0, 0.0, 1.0, 3, &AtomicBool::new(false)).unwrap();
/// assert_eq!(b.weights, vec![0.75, 1.25, 0.0]);
/// assert_eq!(b.outside, vec![9.0]);
/// ```
pub fn linear_binning(
    x: &[f64],
    center: f64,
    scale: f64,
    lo: f64,
    spacing: f64,
    n_nodes: usize,
    cancel: &AtomicBool,
) -> Result<LinearBinning> {
    checked(x, cancel)?;
    let bad = |name, reason: &str| {
        Err(FgtError::InvalidParameter {
            name,
            reason: reason.to_string(),
        })
    };
    if !(spacing > 0.0 && spacing.is_finite()) {
        return bad("spacing", "must be positive and finite");
    }
    if !(scale > 0.0 && scale.is_finite()) {
        return bad("scale", "must be positive and finite");
    }
    if !(center.is_finite() && lo.is_finite()) {
        return bad("lo", "center and lo must be finite");
    }
    if n_nodes < 2 {
        return bad("n_nodes", "at least two nodes");
    }
    let last = (n_nodes - 1) as f64;
    let inv = 1.0 / spacing;
    // one weight vector per task: few tasks when the grid is large against the data
    let tasks = (x.len() / n_nodes.max(CHUNK)).clamp(1, rayon::current_num_threads());
    let chunk = x.len().div_ceil(tasks);
    let parts = map_chunks(x, chunk, |c| {
        let mut w = vec![0.0; n_nodes];
        let mut out = Vec::new();
        for (i, &v) in c.iter().enumerate() {
            if i % CHUNK == 0 && cancel.load(Ordering::Relaxed) {
                return Err(FgtError::Cancelled);
            }
            let z = (v - center) * scale;
            let t = (z - lo) * inv;
            if t >= 0.0 && t <= last {
                let k = (t as usize).min(n_nodes - 2);
                let f = t - k as f64;
                w[k] += 1.0 - f;
                w[k + 1] += f;
            } else {
                out.push(z);
            }
        }
        Ok((w, out))
    })
    .into_iter()
    .collect::<Result<Vec<_>>>()?;
    let mut parts = parts.into_iter();
    let (mut weights, mut outside) = parts.next().unwrap_or_default();
    for (w, o) in parts {
        weights.iter_mut().zip(&w).for_each(|(a, b)| *a += b);
        outside.extend(o);
    }
    Ok(LinearBinning { weights, outside })
}

/// The part of the autocorrelation A(lag) = sum_k w_k w_(k + lag), lag = 0 ..= `lags`, that
/// comes from the pairs of nodes not both in `dense`: the pairs whose lower node is below
/// `dense.start`, and those whose upper node is at or beyond `dense.end` while the lower one
/// is not below `dense.start`. The rest of A is the autocorrelation of `w[dense]` alone (an
/// FFT's job), so a grid whose tails are sparse pays an FFT only over its dense middle and
/// `lags + 1` multiply-adds per nonzero weight outside it.
///
/// # Errors
/// [`FgtError::InvalidParameter`] when `dense` is not a range within `w`.
///
/// # Example
/// ```
/// let w = [1.0, 0.0, 2.0, 3.0];
/// // everything outside the (empty) dense part: the whole autocorrelation
/// let a = vastml_fgt::edge_autocorrelation(&w, 0..0, 2).unwrap();
/// assert_eq!(a, vec![14.0, 6.0, 2.0]);
/// // both nodes of the pair (2, 3) are in 2..4: its product 6 is left to the FFT
/// let b = vastml_fgt::edge_autocorrelation(&w, 2..4, 2).unwrap();
/// assert_eq!(b, vec![1.0, 0.0, 2.0]);
/// ```
pub fn edge_autocorrelation(w: &[f64], dense: Range<usize>, lags: usize) -> Result<Vec<f64>> {
    if dense.start > dense.end || dense.end > w.len() {
        return Err(FgtError::InvalidParameter {
            name: "dense",
            reason: format!("{dense:?} is not a range within {} weights", w.len()),
        });
    }
    let mut a = vec![0.0; lags + 1];
    for (j, &wj) in w[..dense.start].iter().enumerate() {
        if wj != 0.0 {
            let partners = &w[j..w.len().min(j + lags + 1)];
            a.iter_mut().zip(partners).for_each(|(s, &v)| *s += wj * v);
        }
    }
    for (i, &wi) in w.iter().enumerate().skip(dense.end) {
        if wi != 0.0 {
            let partners = &w[i.saturating_sub(lags).max(dense.start)..=i];
            a.iter_mut()
                .zip(partners.iter().rev())
                .for_each(|(s, &v)| *s += wi * v);
        }
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::uniform;

    fn sorted(x: &[f64]) -> Vec<f64> {
        let mut s = x.to_vec();
        s.sort_unstable_by(f64::total_cmp);
        s
    }

    fn ranks_of(n: usize) -> Vec<usize> {
        let mut r = vec![0, n / 4, n / 4 + 1, n / 2, n - 1 - n / 4, n - 1];
        r.retain(|&k| k < n);
        r
    }

    #[test]
    fn order_statistics_equal_sorting() {
        let off = AtomicBool::new(false);
        let u = uniform(300_000, 3);
        let cases: Vec<Vec<f64>> = vec![
            u.clone(),
            // heavy tails: most values crowd one bin of the full range
            u.iter().map(|&v| 1.0 / (v - 0.5)).collect(),
            u.iter().map(|&v| (v * 1e300).powi(3).min(1e308)).collect(),
            // ties and a far outlier
            u.iter()
                .map(|&v| (v * 7.0).floor())
                .chain([1e300, -1e300])
                .collect(),
            vec![2.0; 100_000],
            vec![1.0],
            u[..1000].iter().map(|&v| v * 1e-300).collect(),
        ];
        for x in cases {
            let r = ranks_of(x.len());
            let s = sorted(&x);
            let want: Vec<f64> = r.iter().map(|&k| s[k]).collect();
            assert_eq!(order_statistics(&x, &r, &off).unwrap(), want);
            // the counting path alone (the sampled brackets serve most calls)
            let range = finite_min_max(&x).unwrap();
            assert_eq!(by_counting(&x, &r, range, &off).unwrap(), want);
        }
    }

    #[test]
    fn a_misleading_sample_falls_back_to_counting() {
        // every value the stride samples is huge, so each bracket misses its rank
        let n = 1 << 17;
        let x: Vec<f64> = (0..n)
            .map(|i| {
                if i % (n / SAMPLE) == 0 {
                    1e9 + i as f64
                } else {
                    (i * 7919 % n) as f64
                }
            })
            .collect();
        let off = AtomicBool::new(false);
        assert_eq!(from_sample_brackets(&x, &[n / 2], &off).unwrap(), None);
        let s = sorted(&x);
        let r = ranks_of(n);
        let want: Vec<f64> = r.iter().map(|&k| s[k]).collect();
        assert_eq!(order_statistics(&x, &r, &off).unwrap(), want);
    }

    #[test]
    fn order_statistics_refuse_bad_input() {
        let off = AtomicBool::new(false);
        assert!(matches!(
            order_statistics(&[], &[0], &off),
            Err(FgtError::Empty { .. })
        ));
        assert!(matches!(
            order_statistics(&[1.0, f64::NAN, 2.0], &[0], &off),
            Err(FgtError::NonFinite { .. })
        ));
        assert!(matches!(
            order_statistics(&[1.0, 2.0], &[2], &off),
            Err(FgtError::InvalidParameter { .. })
        ));
        assert!(matches!(
            order_statistics(&[1.0, 2.0], &[0], &AtomicBool::new(true)),
            Err(FgtError::Cancelled)
        ));
    }

    #[test]
    fn linear_binning_equals_the_definition() {
        let off = AtomicBool::new(false);
        let x: Vec<f64> = uniform(200_000, 9)
            .iter()
            .map(|&v| 10.0 * v - 3.0)
            .collect();
        let (center, scale, lo, spacing, n) = (1.0, 0.5, -1.5, 0.01, 301);
        let b = linear_binning(&x, center, scale, lo, spacing, n, &off).unwrap();
        let mut w = vec![0.0; n];
        let mut out = Vec::new();
        for &v in &x {
            let z = (v - center) * scale;
            let t = (z - lo) / spacing;
            if (0.0..=(n - 1) as f64).contains(&t) {
                let k = (t.floor() as usize).min(n - 2);
                w[k] += 1.0 - (t - k as f64);
                w[k + 1] += t - k as f64;
            } else {
                out.push(z);
            }
        }
        let worst = b
            .weights
            .iter()
            .zip(&w)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(worst < 1e-9, "{worst}");
        assert_eq!(b.outside, out);
        let total: f64 = b.weights.iter().sum();
        assert!((total - (x.len() - out.len()) as f64).abs() < 1e-6);
    }

    #[test]
    fn linear_binning_refuses_bad_parameters() {
        let off = AtomicBool::new(false);
        let x = [1.0, 2.0];
        assert!(linear_binning(&x, 0.0, 1.0, 0.0, 0.0, 3, &off).is_err());
        assert!(linear_binning(&x, 0.0, f64::NAN, 0.0, 1.0, 3, &off).is_err());
        assert!(linear_binning(&x, 0.0, 1.0, 0.0, 1.0, 1, &off).is_err());
        assert!(linear_binning(&[], 0.0, 1.0, 0.0, 1.0, 3, &off).is_err());
    }

    #[test]
    fn edge_autocorrelation_completes_the_dense_part() {
        let mut state = 7_u64;
        let w: Vec<f64> = (0..300)
            .map(|k| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1);
                let u = (state >> 11) as f64 / (1u64 << 53) as f64;
                // sparse tails, a dense middle
                if (40..250).contains(&k) || u < 0.1 {
                    u
                } else {
                    0.0
                }
            })
            .collect();
        let direct = |v: &[f64], lags: usize| -> Vec<f64> {
            (0..=lags)
                .map(|l| {
                    (0..v.len().saturating_sub(l))
                        .map(|k| v[k] * v[k + l])
                        .sum()
                })
                .collect()
        };
        for (dense, lags) in [
            (0..0, 20),
            (40..250, 20),
            (0..300, 7),
            (100..120, 35),
            (5..6, 299),
        ] {
            let edge = edge_autocorrelation(&w, dense.clone(), lags).unwrap();
            let middle = direct(&w[dense.clone()], lags);
            for (l, want) in direct(&w, lags).iter().enumerate() {
                let got = edge[l] + middle.get(l).copied().unwrap_or(0.0);
                assert!(
                    (got - want).abs() <= 1e-12 * want.abs().max(1.0),
                    "{dense:?} lag {l}: {got} vs {want}"
                );
            }
        }
        let (start, end) = (10, 5);
        assert!(edge_autocorrelation(&w, start..end, 3).is_err());
        assert!(edge_autocorrelation(&w, 0..301, 3).is_err());
    }
}
