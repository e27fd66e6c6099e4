//! Local search with adaptive move probabilities (spec §9.1, §9.7, §9.8).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;

use crate::arrangement::Arrangement;
use crate::error::{OrderError, invalid};
use crate::moves::{MoveConfig, MoveKind, Proposal, random_move, random_proposal};

/// A progress hook: called with (stage, iteration or step number, the arrangement: its error
/// and its current row and column orders); returning `false` stops the work as a cancellation
/// would.
#[derive(Clone)]
pub struct Progress(pub Arc<ProgressFn>);

/// The function behind [`Progress`].
pub type ProgressFn = dyn Fn(&str, usize, &Arrangement) -> bool + Send + Sync;

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress(..)")
    }
}

impl PartialEq for Progress {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Progress {
    /// Calls the hook.
    pub fn report(&self, stage: &str, step: usize, arr: &Arrangement) -> bool {
        (self.0)(stage, step, arr)
    }
}

/// Which axes the search may reorder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axes {
    /// Rows only.
    Rows,
    /// Columns only.
    Cols,
    /// Both; each iteration works on the columns with probability n / (m + n).
    Both,
}

/// Parameters of [`local_search`].
#[derive(Debug, Clone, PartialEq)]
pub struct SearchParams {
    /// Moves to draw from.
    pub moves: Vec<MoveKind>,
    /// Iteration budget (MAXIT).
    pub max_iter: usize,
    /// Segment length L of the adaptive weights and of the automatic stop.
    pub segment: usize,
    /// Reaction factor r of the adaptive weights (0 keeps them fixed).
    pub reaction: f64,
    /// Stop after a segment whose mean change per iteration is above this (e.g. -1e-4);
    /// `None` runs all iterations.
    pub stop_threshold: Option<f64>,
    /// Accept moves that leave the error unchanged (the reference code does).
    pub accept_ties: bool,
    /// Axes to reorder.
    pub axes: Axes,
    /// Move drawing details.
    pub config: MoveConfig,
    /// Seed of the random generator.
    pub seed: u64,
    /// Called after every segment of `segment` iterations (not inside P-LS split jobs).
    pub progress: Option<Progress>,
}

impl Default for SearchParams {
    /// The thesis settings (§16): all moves, L = 500, r = 0.6, 100,000 iterations, stop at -1e-4.
    fn default() -> Self {
        Self {
            moves: MoveKind::ALL.to_vec(),
            max_iter: 100_000,
            segment: 500,
            reaction: 0.6,
            stop_threshold: Some(-1e-4),
            accept_ties: true,
            axes: Axes::Both,
            config: MoveConfig::default(),
            seed: 0,
            progress: None,
        }
    }
}

/// What a search did.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchReport {
    /// Iterations run.
    pub iterations: usize,
    /// Moves accepted.
    pub accepted: usize,
    /// (iteration, error) at the start and after every segment.
    pub history: Vec<(usize, f64)>,
    /// Final move weights (probabilities), in the order of `SearchParams::moves`.
    pub weights: Vec<f64>,
    /// Whether the automatic stop ended the search.
    pub stopped_early: bool,
}

/// The adaptive move weights of ALNS (eq. 5.11-5.12 with the reference code's 0.15 floor).
#[derive(Debug, Clone)]
pub struct MoveWeights {
    weights: Vec<f64>,
    score: Vec<f64>,
    used: Vec<u32>,
    reaction: f64,
}

impl MoveWeights {
    /// `k` moves of weight 1.
    pub fn new(k: usize, reaction: f64) -> Self {
        Self {
            weights: vec![1.0; k],
            score: vec![0.0; k],
            used: vec![0; k],
            reaction,
        }
    }
    /// Draws a move index with probability w_j / Σ w.
    pub fn sample(&self, u: f64) -> usize {
        let total: f64 = self.weights.iter().sum();
        let mut x = u * total;
        for (j, &w) in self.weights.iter().enumerate() {
            if x < w {
                return j;
            }
            x -= w;
        }
        self.weights.len() - 1
    }
    /// Records one use of move `j` that decreased the error by `gain` (0 if not improving).
    pub fn record(&mut self, j: usize, gain: f64) {
        self.used[j] += 1;
        self.score[j] += gain.max(0.0);
    }
    /// Ends a segment: w ← w(1-r) + r·s/max(θ,1), normalise, add 0.15, normalise.
    pub fn end_segment(&mut self) {
        if self.reaction > 0.0 {
            let r = self.reaction;
            for j in 0..self.weights.len() {
                let theta = f64::from(self.used[j].max(1));
                self.weights[j] = self.weights[j] * (1.0 - r) + r * self.score[j] / theta;
            }
            let normalise = |w: &mut Vec<f64>| {
                let s: f64 = w.iter().sum();
                if s > 0.0 && s.is_finite() {
                    w.iter_mut().for_each(|x| *x /= s);
                } else {
                    let k = w.len() as f64;
                    w.iter_mut().for_each(|x| *x = 1.0 / k);
                }
            };
            normalise(&mut self.weights);
            self.weights.iter_mut().for_each(|w| *w += 0.15);
            normalise(&mut self.weights);
        }
        self.score.iter_mut().for_each(|s| *s = 0.0);
        self.used.iter_mut().for_each(|u| *u = 0);
    }
    /// Current probabilities.
    pub fn probabilities(&self) -> Vec<f64> {
        let s: f64 = self.weights.iter().sum();
        self.weights.iter().map(|w| w / s).collect()
    }
}

/// Greedy local search on the positions `ranges[axis].0 .. ranges[axis].1` of each axis
/// (the whole matrix when `ranges` is `None`). Neighbours outside a range are the real
/// neighbours, not padding. Polls `cancel` every 256 iterations.
///
/// # Errors
/// No moves, a zero segment length, a reaction outside [0, 1], bad ranges, or cancellation.
pub fn local_search(
    arr: &mut Arrangement,
    params: &SearchParams,
    ranges: Option<[(usize, usize); 2]>,
    cancel: &AtomicBool,
) -> Result<SearchReport, OrderError> {
    if params.moves.is_empty() {
        return Err(invalid("moves", "at least one move is needed"));
    }
    if params.segment == 0 {
        return Err(invalid("segment_length", "must be positive"));
    }
    if !(0.0..=1.0).contains(&params.reaction) {
        return Err(invalid("reaction", "must lie in [0, 1]"));
    }
    let ranges = ranges.unwrap_or([(0, arr.len(0)), (0, arr.len(1))]);
    for (axis, &(lo, hi)) in ranges.iter().enumerate() {
        if lo > hi || hi > arr.len(axis) {
            return Err(invalid("ranges", "out of the matrix"));
        }
    }
    let (m, n) = (ranges[0].1 - ranges[0].0, ranges[1].1 - ranges[1].0);
    let p_cols = match params.axes {
        Axes::Rows => 0.0,
        Axes::Cols => 1.0,
        Axes::Both => n as f64 / (m + n).max(1) as f64,
    };
    let mut rng = Pcg64::seed_from_u64(params.seed);
    let mut weights = MoveWeights::new(params.moves.len(), params.reaction);
    let mut report = SearchReport {
        iterations: 0,
        accepted: 0,
        history: vec![(0, arr.error())],
        weights: Vec::new(),
        stopped_early: false,
    };
    let mut segment_start = arr.raw_error();
    for it in 0..params.max_iter {
        if it % 256 == 0 && cancel.load(Ordering::Relaxed) {
            return Err(OrderError::Cancelled);
        }
        let j = weights.sample(rng.random::<f64>());
        let mut axis = usize::from(rng.random::<f64>() < p_cols);
        if params.moves[j] == MoveKind::Recolor && params.axes != Axes::Rows {
            axis = 1;
        }
        let (lo, hi) = ranges[axis];
        let mut gain = 0.0;
        let accept = |d: i128| d < 0 || (d == 0 && params.accept_ties);
        match random_proposal(arr, axis, params.moves[j], lo, hi, &params.config, &mut rng) {
            Some(Proposal::Perm(mv)) => {
                let segs = mv.segments();
                if !segs.is_empty() {
                    let d = arr.delta(axis, &segs);
                    if accept(d) {
                        arr.commit(axis, &segs, d);
                        report.accepted += 1;
                        gain = -arr.to_error(d);
                    }
                }
            }
            Some(Proposal::Recolour(rc)) => {
                let saved = arr.raw_error();
                let mut d = 0;
                for &col in &rc.cols {
                    d += arr.recolour(col, rc.a, rc.b);
                }
                let segs = rc.then.map(|m| m.segments()).unwrap_or_default();
                let dm = if segs.is_empty() {
                    0
                } else {
                    arr.delta(1, &segs)
                };
                if accept(d + dm) {
                    if !segs.is_empty() {
                        arr.commit(1, &segs, dm);
                    }
                    report.accepted += 1;
                    gain = -arr.to_error(d + dm);
                } else {
                    for &col in rc.cols.iter().rev() {
                        arr.recolour(col, rc.a, rc.b);
                    }
                    debug_assert_eq!(arr.raw_error(), saved);
                }
            }
            None => {}
        }
        weights.record(j, gain);
        report.iterations = it + 1;
        if (it + 1) % params.segment == 0 {
            weights.end_segment();
            let now = arr.raw_error();
            report.history.push((it + 1, arr.error()));
            if let Some(p) = &params.progress {
                if !p.report("iteration", it + 1, arr) {
                    return Err(OrderError::Cancelled);
                }
            }
            if let Some(thr) = params.stop_threshold {
                let slope = arr.to_error(now - segment_start) / params.segment as f64;
                if slope > thr {
                    report.stopped_early = true;
                    break;
                }
            }
            segment_start = now;
        }
    }
    if report.history.last().map(|h| h.0) != Some(report.iterations) {
        report.history.push((report.iterations, arr.error()));
    }
    report.weights = weights.probabilities();
    Ok(report)
}

/// Mean seconds of one incremental evaluation ([`Arrangement::delta`]) of random moves of
/// each kind on the rows, and of one full recomputation of the error, for benchmarks. The
/// pair-overlap cache of the rows is built before the timed moves (a search builds it after
/// its first moves on an axis and keeps it current).
pub fn time_moves(
    arr: &mut Arrangement,
    kinds: &[MoveKind],
    n_moves: usize,
    seed: u64,
) -> (Vec<(MoveKind, f64)>, f64) {
    let mut rng = Pcg64::seed_from_u64(seed);
    let cfg = MoveConfig::default();
    let m = arr.len(0);
    arr.warm_pair_cache(0);
    let mut out = Vec::new();
    for &kind in kinds {
        let moves: Vec<_> = (0..n_moves)
            .filter_map(|_| random_move(arr, 0, kind, 0, m, &cfg, &mut rng))
            .map(|mv| mv.segments())
            .collect();
        let t = std::time::Instant::now();
        let mut sink = 0i128;
        for segs in &moves {
            sink = sink.wrapping_add(arr.delta(0, segs));
        }
        std::hint::black_box(sink);
        out.push((kind, t.elapsed().as_secs_f64() / moves.len().max(1) as f64));
    }
    let reps = 3;
    let t = std::time::Instant::now();
    for _ in 0..reps {
        std::hint::black_box(arr.full_raw(0));
    }
    (out, t.elapsed().as_secs_f64() / f64::from(reps))
}
