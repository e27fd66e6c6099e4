//! Escaping local minima by block ordering (spec §11) and the parallel local search
//! pipeline P-LS (spec §12).

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use rayon::prelude::*;

use crate::arrangement::{Arrangement, Objective};
use crate::bnb::{Bound, PairCosts, branch_and_bound_until};
use crate::colours::set_colour_map;
use crate::error::{OrderError, invalid};
use crate::kernel::{Kernel, KernelKind};
use crate::matrix::{ErrorKind, Matrix, Padding};
use crate::search::{Axes, SearchParams, local_search};

/// One step of the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Squash blocks, order them exactly, re-expand (rows, then columns).
    BlockOrdering,
    /// Independent local searches on this many blocks of each axis, in parallel.
    Split(usize),
    /// KMax with this many cuts on the rows and columns alternately until the error changes
    /// by less than 0.01 (spec §9.6).
    KMax(usize),
    /// Go back to the arrangement the pipeline started from (the best seen so far is kept).
    Restart,
    /// End the pipeline unless the step before gave a new best arrangement.
    StopUnlessImproved,
    /// Exhaustive polish (`crate::polish`): every swap, reversal and relocation of a
    /// block of up to this many positions (also reversed), rows and columns alternately
    /// until neither improves (pair-form objectives only; others are left unchanged).
    Polish(usize),
}

/// Parameters of [`pls`].
#[derive(Debug, Clone, PartialEq)]
pub struct PlsParams {
    /// The inner local search (per block).
    pub search: SearchParams,
    /// Steps, in order.
    pub schedule: Vec<Step>,
    /// Number of blocks of the block ordering.
    pub n_blocks: usize,
    /// Iterated local search after the schedule: this many rounds of "a 3- and a 1-split
    /// search from the best arrangement", kicked first (see `perturb`) unless the round
    /// before improved the best; round 2 is always kicked, by a flip of the display (0: none). Each round is seeded from (seed, round), so the
    /// result does not depend on the thread count.
    pub restarts: usize,
    /// Start no further round once this many seconds have passed since the pipeline
    /// started (`None`: only `restarts` bounds the rounds), and cut a kick's block ordering
    /// short at that time (keeping the best block order found). A wall-clock bound: the
    /// rounds actually run then depend on the machine's speed and load.
    pub time_budget: Option<f64>,
    /// After everything else, polish the best arrangement exhaustively
    /// ([`crate::polish::polish`]) with blocks of up to this many positions (`None`: off);
    /// with a `time_budget`, the polish stops at twice the budget, keeping its gains.
    pub polish: Option<usize>,
}

impl Default for PlsParams {
    /// The thesis pipeline: BO, 3-split, 2-split, BO, 3-split, 1-split; inner LS of 5000
    /// iterations with L = 100, r = 0.6; 10 blocks. Then a 1-split from the start, and only
    /// if that beats everything before (the block orderings, perturbations, did not pay
    /// off), a 3- and a 1-split from there without block ordering.
    fn default() -> Self {
        Self {
            search: SearchParams {
                max_iter: 5000,
                segment: 100,
                ..SearchParams::default()
            },
            schedule: vec![
                Step::BlockOrdering,
                Step::Split(3),
                Step::Split(2),
                Step::BlockOrdering,
                Step::Split(3),
                Step::Split(1),
                Step::Restart,
                Step::Split(1),
                Step::StopUnlessImproved,
                Step::Split(3),
                Step::Split(1),
            ],
            n_blocks: 10,
            restarts: 0,
            time_budget: None,
            polish: None,
        }
    }
}

/// Squashes `axis` of the displayed matrix into `n_blocks` blocks by majority vote, orders
/// the blocks with branch and bound (3 x 3 cross GBS, zero padding) and re-expands them
/// keeping each block's inner order. May raise the error (it is a diversification step).
///
/// # Errors
/// `n_blocks` < 2 or above 64, cancellation.
pub fn block_ordering(
    arr: &mut Arrangement,
    axis: usize,
    n_blocks: usize,
    cancel: &AtomicBool,
) -> Result<(), OrderError> {
    if !(2..=64).contains(&n_blocks) {
        return Err(invalid("n_blocks", "must lie in 2..=64"));
    }
    let m = arr.len(axis);
    let size = m.div_ceil(n_blocks).max(1);
    let blocks: Vec<(usize, usize)> = (0..m)
        .step_by(size)
        .map(|s| (s, (s + size).min(m)))
        .collect();
    order_blocks(arr, axis, &blocks, None, cancel)
}

/// The displayed matrix with each block of positions of `axis` squashed into one row by
/// majority vote: for binary data a one where more than half of the block has one, for
/// categorical data the most frequent colour (the lowest on ties). The other axis keeps its
/// displayed order.
fn squash_blocks(
    arr: &Arrangement,
    axis: usize,
    blocks: &[(usize, usize)],
) -> Result<Matrix, OrderError> {
    let n = arr.len(1 - axis);
    let layers = arr.matrix().n_layers();
    let mut codes = Vec::with_capacity(blocks.len() * n);
    let mut bits = Vec::with_capacity(blocks.len() * n);
    // counts[l * n + j]: entities of the block set at position j in layer l (set bits only)
    let mut counts = vec![0usize; layers * n];
    for &(s, e) in blocks {
        counts.iter_mut().for_each(|c| *c = 0);
        for p in s..e {
            for l in 0..layers {
                arr.for_each_set(axis, l, p, |j| counts[l * n + j] += 1);
            }
        }
        for j in 0..n {
            if layers == 1 {
                bits.push(u8::from(2 * counts[j] > e - s));
            } else {
                let best = (0..layers).max_by_key(|&l| (counts[l * n + j], usize::MAX - l));
                codes.push(best.unwrap_or(0) as u32);
            }
        }
    }
    if layers == 1 {
        Matrix::binary(blocks.len(), n, &bits)
    } else {
        Matrix::categorical(blocks.len(), n, &codes, layers)
    }
}

/// Block ordering on given consecutive blocks (start, end) of positions covering the axis;
/// at `deadline` the branch and bound stops with the best block order found by then.
fn order_blocks(
    arr: &mut Arrangement,
    axis: usize,
    blocks: &[(usize, usize)],
    deadline: Option<Instant>,
    cancel: &AtomicBool,
) -> Result<(), OrderError> {
    if blocks.len() < 3 {
        return Ok(());
    }
    let squashed = squash_blocks(arr, axis, blocks)?;
    let obj = Objective {
        kernel: Kernel::new(KernelKind::CrossGbs, 3, 3)?,
        padding: Padding::Zero,
        kind: ErrorKind::Abs,
    };
    let pc = PairCosts::convomap(&squashed, &obj, None)?;
    let (result, _) = branch_and_bound_until(&pc, None, Bound::Slow, deadline, cancel)?;
    let old = arr.order(axis);
    let order: Vec<usize> = result
        .order
        .iter()
        .flat_map(|&b| old[blocks[b].0..blocks[b].1].iter().copied())
        .collect();
    arr.set_order(axis, &order)
}

/// (axis, first position, new order of the block, colour maps of the block's original
/// columns when colours may change) of one split job.
type JobResult = (usize, usize, Vec<usize>, Vec<(usize, Vec<u8>)>);

/// N-SplitSearch: every block of `n_splits` consecutive positions of each axis gets its own
/// local search from the same snapshot, in parallel; all results are applied together.
///
/// # Errors
/// As [`local_search`].
pub fn split_search(
    arr: &mut Arrangement,
    n_splits: usize,
    params: &SearchParams,
    phase: u64,
    cancel: &AtomicBool,
) -> Result<(), OrderError> {
    if n_splits == 0 {
        return Err(invalid("n_splits", "must be positive"));
    }
    let axes: &[usize] = match params.axes {
        Axes::Rows => &[0],
        Axes::Cols => &[1],
        Axes::Both => &[0, 1],
    };
    let mut jobs = Vec::new();
    for &axis in axes {
        let len = arr.len(axis);
        let k = n_splits.min(len.max(1));
        for b in 0..k {
            let (lo, hi) = (b * len / k, (b + 1) * len / k);
            if hi - lo >= 2 {
                jobs.push((axis, lo, hi, b));
            }
        }
    }
    let recolour = arr.matrix().n_layers() > 1
        && (params.config.recolour || params.moves.contains(&crate::moves::MoveKind::Recolor));
    let snapshot: &Arrangement = arr;
    let results: Vec<Result<JobResult, OrderError>> = jobs
        .par_iter()
        .map(|&(axis, lo, hi, b)| {
            let mut local = snapshot.clone();
            let mut p = params.clone();
            p.progress = None;
            p.axes = if axis == 0 { Axes::Rows } else { Axes::Cols };
            p.seed = params
                .seed
                .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                .wrapping_add(phase << 32 | (axis as u64) << 16 | b as u64);
            let mut ranges = [(0, local.len(0)), (0, local.len(1))];
            ranges[axis] = (lo, hi);
            local_search(&mut local, &p, Some(ranges), cancel)?;
            let seg = local.order(axis)[lo..hi].to_vec();
            let k = local.matrix().n_layers();
            let maps = if axis == 1 && recolour {
                seg.iter()
                    .map(|&c| (c, local.colour_maps()[c * k..(c + 1) * k].to_vec()))
                    .collect()
            } else {
                Vec::new()
            };
            Ok((axis, lo, seg, maps))
        })
        .collect();
    let mut orders = [arr.order(0), arr.order(1)];
    for r in results {
        let (axis, lo, seg, maps) = r?;
        orders[axis][lo..lo + seg.len()].copy_from_slice(&seg);
        for (col, target) in maps {
            set_colour_map(arr, col, &target);
        }
    }
    for &axis in axes {
        arr.set_order(axis, &orders[axis])?;
    }
    Ok(())
}

/// What the pipeline did: the error after each step, and the step that gave the best.
#[derive(Debug, Clone, PartialEq)]
pub struct PlsReport {
    /// (step name, error after it), starting with ("start", initial error).
    pub history: Vec<(String, f64)>,
}

/// The P-LS pipeline: runs the steps, tracks the best arrangement after every step and
/// leaves `arr` at the best (the steps are not monotone). [`Step::StopUnlessImproved`] adds no
/// history entry.
///
/// # Errors
/// As the steps.
pub fn pls(
    arr: &mut Arrangement,
    params: &PlsParams,
    cancel: &AtomicBool,
) -> Result<PlsReport, OrderError> {
    let mut best = snapshot(arr);
    let clock = Instant::now();
    let mut history = vec![("start".to_string(), arr.error())];
    let start = best.clone();
    let mut improved = false;
    for (i, step) in params.schedule.iter().enumerate() {
        let name = match *step {
            Step::BlockOrdering => {
                let axes: &[usize] = match params.search.axes {
                    Axes::Rows => &[0],
                    Axes::Cols => &[1],
                    Axes::Both => &[0, 1],
                };
                for &axis in axes {
                    block_ordering(arr, axis, params.n_blocks, cancel)?;
                }
                "block_ordering".to_string()
            }
            Step::Split(k) => {
                split_search(arr, k, &params.search, i as u64, cancel)?;
                format!("split_{k}")
            }
            Step::Restart => {
                restore(arr, &start)?;
                "restart".to_string()
            }
            Step::StopUnlessImproved => {
                if !improved {
                    break;
                }
                continue;
            }
            Step::Polish(k) => {
                let axes: &[usize] = match params.search.axes {
                    Axes::Rows => &[0],
                    Axes::Cols => &[1],
                    Axes::Both => &[0, 1],
                };
                crate::polish::polish(arr, axes, k, usize::MAX, None, cancel)?;
                "polish".to_string()
            }
            Step::KMax(k) => {
                let axes: &[usize] = match params.search.axes {
                    Axes::Rows => &[0],
                    Axes::Cols => &[1],
                    Axes::Both => &[0, 1],
                };
                crate::kmax::kmax(arr, axes, k, 100, cancel)?;
                "kmax".to_string()
            }
        };
        history.push((name.clone(), arr.error()));
        improved = arr.raw_error() < best.0;
        if improved {
            best = snapshot(arr);
        }
        if let Some(p) = &params.search.progress {
            if !p.report(&name, i + 1, arr) {
                return Err(OrderError::Cancelled);
            }
        }
    }
    let axes: &[usize] = match params.search.axes {
        Axes::Rows => &[0],
        Axes::Cols => &[1],
        Axes::Both => &[0, 1],
    };
    let base = params.schedule.len() as u64 + 1;
    // the first round continues from the best of the pipeline; the second always starts
    // from the flipped best (kick 0), so the other orientation is searched early, before
    // rounds with small gains settle in one basin
    let (mut continue_next, mut kicks) = (true, 0usize);
    // a kick's block ordering stops at the end of the budget with the best block order
    // found: on a small matrix one exact ordering of 17 noisy blocks can outlast the budget
    // (football, GBS(7): 0.3-0.6 s against a budget of 0.12 s)
    let deadline = params.time_budget.and_then(|b| after(clock, b));
    for round in 0..params.restarts {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        if arr.raw_error() != best.0 {
            restore(arr, &best)?;
        }
        let mut rng = Pcg64::seed_from_u64(
            params
                .search
                .seed
                .wrapping_mul(0xD1B5_4A32_D192_ED03)
                .wrapping_add(round as u64),
        );
        // after a round that improved, continue from the new best without a kick (the
        // automatic stop ends searches that still had gains); else the next kick
        if !continue_next || round == 1 {
            perturb(arr, axes, kicks, &mut rng, deadline, cancel)?;
            kicks += 1;
        }
        for (j, k) in [3, 1].into_iter().enumerate() {
            let phase = base + 2 * round as u64 + j as u64;
            split_search(arr, k, &params.search, phase, cancel)?;
        }
        let name = format!("ils_{}", round + 1);
        history.push((name.clone(), arr.error()));
        continue_next = arr.raw_error() < best.0;
        if continue_next {
            best = snapshot(arr);
        }
        if let Some(p) = &params.search.progress {
            if !p.report(&name, params.schedule.len() + round + 1, arr) {
                return Err(OrderError::Cancelled);
            }
        }
    }
    if arr.raw_error() > best.0 {
        restore(arr, &best)?;
    }
    if let Some(max_block) = params.polish {
        // only ever lowers the error: applies improving moves of the best arrangement; with
        // a time budget it stops at twice the budget (keeping the moves applied until then)
        let deadline = params.time_budget.and_then(|b| after(clock, 2.0 * b));
        crate::polish::polish(arr, axes, max_block, usize::MAX, deadline, cancel)?;
        history.push(("polish".to_string(), arr.error()));
        if let Some(p) = &params.search.progress {
            let step = params.schedule.len() + params.restarts + 1;
            if !p.report("polish", step, arr) {
                return Err(OrderError::Cancelled);
            }
        }
    }
    Ok(PlsReport { history })
}

/// `seconds` after `start` (at least `start`); `None` when too far to represent (an
/// infinite or huge budget: no deadline).
fn after(start: Instant, seconds: f64) -> Option<Instant> {
    let d = Duration::try_from_secs_f64(seconds.max(0.0)).ok()?;
    start.checked_add(d)
}

/// The kick number `kick` of the iterated local search, on each axis in `axes`. Every eighth
/// kick, starting with the first (which always starts round 2), flips the display: every axis in `axes` reversed at once,
/// a joint move no search on one axis makes (reversing the rows alone mirrors the pattern);
/// under ZerosAndOnes padding (ones above and left) the flipped pattern has another error
/// and its own local minima. Of the other kicks, the odd ones a block ordering on 4-16 blocks
/// whose boundaries start at a random offset (a different cut of the display than the
/// pipeline's fixed 10 blocks), the even ones two random segments of up to a sixth of the
/// axis, each reversed or moved elsewhere.
fn perturb(
    arr: &mut Arrangement,
    axes: &[usize],
    kick: usize,
    rng: &mut Pcg64,
    deadline: Option<Instant>,
    cancel: &AtomicBool,
) -> Result<(), OrderError> {
    if kick % 8 == 0 {
        for &axis in axes {
            let mut order = arr.order(axis);
            order.reverse();
            arr.set_order(axis, &order)?;
        }
        return Ok(());
    }
    let kick = kick - kick / 8 - 1;
    for &axis in axes {
        let m = arr.len(axis);
        if m < 8 {
            continue;
        }
        if kick % 2 == 1 {
            let k = rng.random_range(4..=16usize).min(m / 2);
            let size = m.div_ceil(k).max(1);
            let offset = rng.random_range(0..size);
            let mut cuts = vec![0];
            cuts.extend((offset..m).step_by(size).filter(|&c| c > 0));
            cuts.push(m);
            let blocks: Vec<(usize, usize)> = cuts.windows(2).map(|w| (w[0], w[1])).collect();
            order_blocks(arr, axis, &blocks, deadline, cancel)?;
        } else {
            let mut order = arr.order(axis);
            for _ in 0..2 {
                let len = rng.random_range(2..=(m / 6).max(2));
                let lo = rng.random_range(0..=m - len);
                if rng.random::<f64>() < 0.5 {
                    order[lo..lo + len].reverse();
                } else {
                    let seg: Vec<usize> = order.drain(lo..lo + len).collect();
                    let at = rng.random_range(0..=order.len());
                    order.splice(at..at, seg);
                }
            }
            arr.set_order(axis, &order)?;
        }
    }
    Ok(())
}

/// (raw error, row order, column order, colour maps) of an arrangement.
type Snapshot = (i128, Vec<usize>, Vec<usize>, Vec<u8>);

/// The current orders and colours of `arr`, with its raw error.
fn snapshot(arr: &Arrangement) -> Snapshot {
    (
        arr.raw_error(),
        arr.order(0),
        arr.order(1),
        arr.colour_maps().to_vec(),
    )
}

/// Puts `arr` back in the orders and colours of a snapshot.
fn restore(arr: &mut Arrangement, snap: &Snapshot) -> Result<(), OrderError> {
    let k = arr.matrix().n_layers();
    if k > 1 {
        for col in 0..arr.len(1) {
            set_colour_map(arr, col, &snap.3[col * k..(col + 1) * k]);
        }
    }
    arr.set_order(0, &snap.1)?;
    arr.set_order(1, &snap.2)?;
    debug_assert_eq!(arr.raw_error(), snap.0);
    Ok(())
}

#[cfg(test)]
mod tests {
    use rand::{RngExt, SeedableRng};
    use rand_pcg::Pcg64;

    use super::*;

    /// The majority vote cell by cell, through `Arrangement::cell` (the squash's oracle).
    fn squash_by_cells(arr: &Arrangement, axis: usize, blocks: &[(usize, usize)]) -> Matrix {
        let (n, layers) = (arr.len(1 - axis), arr.matrix().n_layers());
        let mut bits = Vec::new();
        let mut codes = Vec::new();
        for &(s, e) in blocks {
            for j in 0..n {
                let count = |l: usize| (s..e).filter(|&p| arr.cell(axis, l, p, j)).count();
                if layers == 1 {
                    bits.push(u8::from(2 * count(0) > e - s));
                } else {
                    let best = (0..layers).max_by_key(|&l| (count(l), usize::MAX - l));
                    codes.push(best.unwrap_or(0) as u32);
                }
            }
        }
        if layers == 1 {
            Matrix::binary(blocks.len(), n, &bits).unwrap()
        } else {
            Matrix::categorical(blocks.len(), n, &codes, layers).unwrap()
        }
    }

    #[test]
    fn squash_from_set_bits_equals_the_cell_vote() {
        let mut rng = Pcg64::seed_from_u64(7);
        for case in 0..60 {
            let (m, n) = (rng.random_range(3..90), rng.random_range(3..150));
            let colours = if case % 3 == 0 {
                rng.random_range(2..5)
            } else {
                1
            };
            let density = rng.random_range(0.01..0.7);
            let matrix = if colours == 1 {
                let v: Vec<u8> = (0..m * n)
                    .map(|_| u8::from(rng.random_bool(density)))
                    .collect();
                Matrix::binary(m, n, &v).unwrap()
            } else {
                let v: Vec<u32> = (0..m * n)
                    .map(|_| rng.random_range(0..colours as u32))
                    .collect();
                Matrix::categorical(m, n, &v, colours).unwrap()
            };
            let mut rows: Vec<usize> = (0..m).collect();
            let mut cols: Vec<usize> = (0..n).collect();
            for i in (1..m).rev() {
                rows.swap(i, rng.random_range(0..=i));
            }
            for i in (1..n).rev() {
                cols.swap(i, rng.random_range(0..=i));
            }
            let obj = Objective {
                kernel: Kernel::new(KernelKind::Gbs, 3, 5).unwrap(),
                padding: Padding::ZerosAndOnes,
                kind: ErrorKind::Abs,
            };
            let arr = Arrangement::new(matrix, obj, Some(&rows), Some(&cols)).unwrap();
            for axis in 0..2 {
                let len = arr.len(axis);
                let mut cuts = vec![0];
                while *cuts.last().unwrap() < len {
                    let last = *cuts.last().unwrap();
                    cuts.push((last + rng.random_range(1..8)).min(len));
                }
                let blocks: Vec<(usize, usize)> = cuts.windows(2).map(|w| (w[0], w[1])).collect();
                assert_eq!(
                    squash_blocks(&arr, axis, &blocks).unwrap(),
                    squash_by_cells(&arr, axis, &blocks),
                    "case {case} axis {axis}"
                );
            }
        }
    }
}
