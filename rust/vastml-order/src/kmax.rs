//! KMax (spec §9.6, thesis Table A.14): cut the display at the rows of largest error and
//! reorder the resulting blocks by an exact asymmetric TSP on the junction errors.

use rayon::prelude::*;

use crate::arrangement::{Arrangement, Segment};
use crate::error::{OrderError, invalid};
use crate::matrix::Padding;

/// What one KMax step found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KMax {
    /// Positions picked (sorted): each starts a block.
    pub cuts: Vec<usize>,
    /// Blocks `[start, end)` of the display before the step.
    pub blocks: Vec<(usize, usize)>,
    /// New order of the blocks (indices into `blocks`).
    pub order: Vec<usize>,
    /// Raw error change predicted by the junction costs (exact for the abs error).
    pub predicted: i128,
    /// Exact raw error change of applying `order`.
    pub delta: i128,
}

/// The cut positions of KMax on `axis`: up to `k` positions of largest row error (ties to the
/// lower position), skipping any within the kernel height `kr` of a picked one or of either
/// end of the display, so that every block is at least `kr` long.
pub fn kmax_cuts(arr: &Arrangement, axis: usize, k: usize) -> Vec<usize> {
    let m = arr.len(axis);
    let kr = arr.kernel_rows(axis);
    let errs: Vec<i128> = (0..m)
        .into_par_iter()
        .map(|p| arr.row_raw_error(axis, p))
        .collect();
    let mut by_err: Vec<usize> = (0..m).collect();
    by_err.sort_by(|&a, &b| errs[b].cmp(&errs[a]).then(a.cmp(&b)));
    let mut cuts: Vec<usize> = Vec::new();
    for p in by_err {
        if cuts.len() == k {
            break;
        }
        if p < kr || m - p < kr || cuts.iter().any(|&q| p.abs_diff(q) <= kr) {
            continue;
        }
        cuts.push(p);
    }
    cuts.sort_unstable();
    cuts
}

/// Exact minimum-cost block order (Held-Karp) given `start[i]` (block i first), `end[j]`
/// (block j last) and `cost[i * b + j]` (i directly above j); `closed` adds the cost from
/// the last block back to the first (cyclic padding) and fixes block 0 first.
fn best_order(b: usize, start: &[i128], end: &[i128], cost: &[i128], closed: bool) -> Vec<usize> {
    let full = (1usize << b) - 1;
    let inf = i128::MAX / 4;
    let mut dp = vec![inf; (1 << b) * b];
    let mut from = vec![usize::MAX; (1 << b) * b];
    for i in 0..b {
        if !closed || i == 0 {
            dp[(1 << i) * b + i] = if closed { 0 } else { start[i] };
        }
    }
    for mask in 1..=full {
        for last in 0..b {
            let v = dp[mask * b + last];
            if v >= inf || mask & (1 << last) == 0 {
                continue;
            }
            for nx in 0..b {
                if mask & (1 << nx) != 0 {
                    continue;
                }
                let nm = mask | (1 << nx);
                let c = v + cost[last * b + nx];
                if c < dp[nm * b + nx] {
                    dp[nm * b + nx] = c;
                    from[nm * b + nx] = last;
                }
            }
        }
    }
    let total = |j: usize| dp[full * b + j] + if closed { cost[j * b] } else { end[j] };
    let mut last = (0..b).min_by_key(|&j| (total(j), j)).expect("blocks");
    let mut order = Vec::with_capacity(b);
    let mut mask = full;
    loop {
        order.push(last);
        let prev = from[mask * b + last];
        mask &= !(1 << last);
        if prev == usize::MAX {
            break;
        }
        last = prev;
    }
    order.reverse();
    order
}

/// One KMax step on `axis` (spec §9.6): cut at up to `k` rows of largest error
/// ([`kmax_cuts`]), weigh every ordered pair of the `k + 1` blocks by the error of the rows
/// around their junction when one is placed directly above the other (and the first and
/// last blocks by the padding), find the exact best block order (Held-Karp instead of the
/// thesis's symmetrised TSP heuristic: there are only k + 1 blocks) and apply it when it does
/// not raise the error. The block order found is optimal among all block orders for the abs
/// error (the cost decomposition is exact because each block is at least the kernel height).
///
/// # Errors
/// `k` = 0 or above 15.
pub fn kmax_step(arr: &mut Arrangement, axis: usize, k: usize) -> Result<KMax, OrderError> {
    if !(1..=15).contains(&k) {
        return Err(invalid("kmax_k", "must lie in 1..=15"));
    }
    let m = arr.len(axis);
    let cuts = kmax_cuts(arr, axis, k);
    let mut bounds = vec![0];
    bounds.extend(&cuts);
    bounds.push(m);
    let blocks: Vec<(usize, usize)> = bounds.windows(2).map(|w| (w[0], w[1])).collect();
    let b = blocks.len();
    let ident: Vec<usize> = (0..b).collect();
    if b < 2 {
        return Ok(KMax {
            cuts,
            blocks,
            order: ident,
            predicted: 0,
            delta: 0,
        });
    }
    let h = (arr.kernel_rows(axis) / 2) as isize;
    let order0 = arr.order(axis);
    let padding = arr.objective().padding;
    let closed = padding == Padding::Cyclic;
    // similarity across a junction: both rows' contributions from each other
    let sim = |x: usize, y: usize, d: isize| -> i128 {
        (arr.pair_similarity(axis, x, y, d) + arr.pair_similarity(axis, y, x, -d)) as i128
    };
    let cost: Vec<i128> = (0..b * b)
        .into_par_iter()
        .map(|ij| {
            let (i, j) = (ij / b, ij % b);
            if i == j {
                return 0;
            }
            let (bi, bj) = (blocks[i], blocks[j]);
            let mut c = 0i128;
            for t in 1..=h {
                for s in 1..=h - t + 1 {
                    let x = order0[bi.1 - t as usize];
                    let y = order0[bj.0 + s as usize - 1];
                    c -= sim(x, y, t + s - 1);
                }
            }
            c
        })
        .collect();
    // padding terms of the first (last) block: what its top (bottom) rows see outside
    let pad_term = |blk: (usize, usize), top: bool| -> i128 {
        let mut c = 0i128;
        for t in 0..h {
            let (x, ds): (usize, Vec<isize>) = if top {
                (order0[blk.0 + t as usize], (-h..-t).collect())
            } else {
                (order0[blk.1 - 1 - t as usize], (t + 1..=h).collect())
            };
            for d in ds {
                c -= arr.padding_similarity(
                    axis,
                    x,
                    top,
                    order0[if top { blk.0 } else { blk.1 - 1 }],
                    d,
                ) as i128;
            }
        }
        c
    };
    let (start, end): (Vec<i128>, Vec<i128>) = if closed {
        (vec![0; b], vec![0; b])
    } else {
        (
            blocks.iter().map(|&blk| pad_term(blk, true)).collect(),
            blocks.iter().map(|&blk| pad_term(blk, false)).collect(),
        )
    };
    let value = |o: &[usize]| -> i128 {
        let mut v: i128 = o.windows(2).map(|w| cost[w[0] * b + w[1]]).sum();
        if closed {
            v += cost[o[b - 1] * b + o[0]];
        } else {
            v += start[o[0]] + end[o[b - 1]];
        }
        v
    };
    let order = best_order(b, &start, &end, &cost, closed);
    let predicted = value(&order) - value(&ident);
    let mut segs = Vec::new();
    let mut dst = 0;
    for &i in &order {
        let (s, e) = blocks[i];
        if s != dst {
            segs.push(Segment {
                dst,
                src: s,
                len: e - s,
                mirrored: false,
            });
        }
        dst += e - s;
    }
    let delta = if segs.is_empty() {
        0
    } else {
        arr.delta(axis, &segs)
    };
    if delta <= 0 && !segs.is_empty() {
        arr.commit(axis, &segs, delta);
    }
    let applied = delta <= 0;
    Ok(KMax {
        cuts,
        blocks,
        order: if applied { order } else { ident },
        predicted,
        delta: if applied { delta } else { 0 },
    })
}

/// KMax on the rows and the columns alternately until a round changes the error by less
/// than 0.01 (spec §9.6), at most `max_rounds` rounds. Returns the rounds run.
///
/// # Errors
/// As [`kmax_step`], and cancellation.
pub fn kmax(
    arr: &mut Arrangement,
    axes: &[usize],
    k: usize,
    max_rounds: usize,
    cancel: &std::sync::atomic::AtomicBool,
) -> Result<usize, OrderError> {
    for round in 0..max_rounds {
        if cancel.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(OrderError::Cancelled);
        }
        let mut d = 0;
        for &axis in axes {
            d += kmax_step(arr, axis, k)?.delta;
        }
        if arr.to_error(d).abs() < 0.01 {
            return Ok(round + 1);
        }
    }
    Ok(max_rounds)
}
