//! Branch and bound for the exact row order (spec §13).
//!
//! With the column order fixed and zero ("cropping") padding, the ones-only abs error of a
//! row order is a constant minus twice the weighted overlaps of rows at distances
//! 1..=h (h = kernel rows / 2). The search minimises Σ_i Σ_p δ_i(r_p, r_{p+i}) with
//! δ_i = C_i − overlap_i ≥ 0, depth first from the top, in parallel over the first row, with a
//! shared upper bound. A solution and its reversal cost the same, so only orders whose first
//! row has a smaller index than the last are explored.
//!
//! The result does not depend on thread timing (unless a deadline, a stopping hook or
//! cancellation cuts the search short): among orders of the optimal cost the search
//! returns the initial order if it is one, else the first one (in the search's own child
//! order) of the subtree with the smallest first row. The shared incumbent carries, next to
//! its cost, the rank of who found it (the initial order ranks first, then the subtrees by
//! first row); a subtree prunes a node whose bound ties the incumbent only when the incumbent
//! outranks it, so a tie that decides the result is never cut by another thread's find.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use rayon::prelude::*;
use vastml_core::{Control, Halt};

use crate::arrangement::{Arrangement, Objective};
use crate::error::{OrderError, invalid};
use crate::matrix::{Matrix, Padding};

/// Lower bound used to prune.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// Each unplaced row pays its cheapest link to any other row (precomputed).
    Fast,
    /// Each unplaced row pays its cheapest links to the rows it can still be next to
    /// (the unplaced ones and the last placed ones).
    Slow,
}

/// Pairwise costs of a row-ordering problem: `cost[i-1][a * n + b]` is the cost of `b`
/// placed `i` positions below `a` (symmetric in a, b).
#[derive(Debug, Clone)]
pub struct PairCosts {
    n: usize,
    cost: Vec<Vec<u64>>,
}

impl PairCosts {
    /// Costs from explicit tables (one n x n table per distance 1..=h).
    ///
    /// # Errors
    /// Tables of the wrong size, or no table.
    pub fn new(n: usize, cost: Vec<Vec<u64>>) -> Result<Self, OrderError> {
        if cost.is_empty() || cost.iter().any(|c| c.len() != n * n) {
            return Err(OrderError::ShapeMismatch(format!(
                "expected at least one {n} x {n} cost table"
            )));
        }
        Ok(Self { n, cost })
    }

    /// The ConvoMap costs of the rows of `matrix` with `objective.kernel`, zero padding and
    /// the columns in `col_order`.
    ///
    /// # Errors
    /// Invalid orders.
    pub fn convomap(
        matrix: &Matrix,
        objective: &Objective,
        col_order: Option<&[usize]>,
    ) -> Result<Self, OrderError> {
        let obj = Objective {
            padding: Padding::Zero,
            ..objective.clone()
        };
        let arr = Arrangement::new(matrix.clone(), obj, None, col_order)?;
        let n = matrix.n_rows();
        let h = arr.kernel_rows(0) / 2;
        let mut cost = Vec::with_capacity(h.max(1));
        for d in 1..=h {
            let sim: Vec<u128> = (0..n * n)
                .into_par_iter()
                .map(|k| {
                    let (a, b) = (k / n, k % n);
                    if a == b {
                        0
                    } else {
                        arr.pair_similarity(0, a, b, d as isize)
                    }
                })
                .collect();
            let top = sim.iter().copied().max().unwrap_or(0);
            cost.push(sim.iter().map(|&s| (top - s) as u64).collect());
        }
        if cost.is_empty() {
            cost.push(vec![0; n * n]);
        }
        Ok(Self { n, cost })
    }

    /// Number of rows.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Cost of a complete order.
    pub fn order_cost(&self, order: &[usize]) -> u64 {
        let n = self.n;
        let mut s = 0;
        for (i, c) in self.cost.iter().enumerate() {
            for p in i + 1..order.len() {
                s += c[order[p - i - 1] * n + order[p]];
            }
        }
        s
    }
}

/// Result of [`branch_and_bound`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BnbResult {
    /// An optimal order.
    pub order: Vec<usize>,
    /// Its cost.
    pub cost: u64,
    /// Nodes visited.
    pub nodes: u64,
    /// A progress hook asked to stop: `order` is the best found by then, not proven optimal.
    pub stopped: bool,
}

/// Entries of the per-subtree dominance memo (about 40 bytes each).
const MEMO_CAPACITY: usize = 2_000_000;

struct Search<'a> {
    pc: &'a PairCosts,
    bound: Bound,
    best: &'a Incumbent,
    control: Control<'a, [usize]>,
    /// Raised when the hook asked to stop: every subtree ends as at a deadline.
    stop: &'a AtomicBool,
    /// Improvements of the shared incumbent reported so far.
    reports: &'a AtomicUsize,
    /// Stop here, keeping the best order found (`None`: search to the proven optimum).
    deadline: Option<Instant>,
    /// Per distance, per row: other rows sorted by increasing cost.
    sorted: Vec<Vec<Vec<u16>>>,
    /// Per distance, per row: cheapest cost to any other row.
    cheapest: Vec<Vec<u64>>,
}

/// The shared upper bound: a cost and the rank of its finder packed in one atomic word
/// (`cost << RANK_BITS | rank`, so `fetch_min` keeps the cheaper, then the higher-ranked,
/// i.e. smaller, rank). Costs too large to pack keep the cost alone (`ranked == false`): ties
/// are then never pruned against other threads' finds, which is deterministic as well, only
/// slower.
struct Incumbent {
    word: AtomicU64,
    ranked: bool,
}

/// Bits for a rank: 0 for the initial order, `first + 1` for a subtree (n <= 64).
const RANK_BITS: u32 = 7;

impl Incumbent {
    fn new(init_cost: u64) -> Self {
        let ranked = init_cost < 1 << (64 - RANK_BITS);
        let word = if ranked {
            init_cost << RANK_BITS
        } else {
            init_cost
        };
        Self {
            word: AtomicU64::new(word),
            ranked,
        }
    }

    /// Whether a node of subtree `rank` whose completions cost at least `bound` can be cut:
    /// the incumbent is cheaper, or as cheap and found by an equal or higher rank.
    fn cuts(&self, bound: u64, rank: u64) -> bool {
        let w = self.word.load(Ordering::Relaxed);
        if self.ranked {
            let cost = w >> RANK_BITS;
            bound > cost || (bound == cost && rank >= w & ((1 << RANK_BITS) - 1))
        } else {
            bound > w
        }
    }

    /// Offers a complete order of cost `cost` found by subtree `rank`; true when it lowered
    /// the incumbent's cost.
    fn offer(&self, cost: u64, rank: u64) -> bool {
        let (word, shift) = if self.ranked {
            (cost << RANK_BITS | rank, RANK_BITS)
        } else {
            (cost, 0)
        };
        let before = self.word.fetch_min(word, Ordering::Relaxed);
        cost < before >> shift
    }
}

struct Local {
    /// Cheapest cost seen for (placed set, last rows): a prefix that is not cheaper than one
    /// already explored with the same set and the same tail has the same completions.
    memo: std::collections::HashMap<(u64, u64), u64>,
    prefix: Vec<usize>,
    used: u64,
    /// This subtree's rank in the incumbent (its first row + 1).
    rank: u64,
    best_cost: u64,
    best_order: Vec<usize>,
    nodes: u64,
    cancelled: bool,
    /// The deadline passed: the subtree was left unfinished.
    timed_out: bool,
}

impl Search<'_> {
    fn lower_bound(&self, loc: &Local) -> u64 {
        let n = self.pc.n;
        let k = loc.prefix.len();
        let h = self.pc.cost.len();
        let mut lb = 0;
        // Distance 1 under the slow bound: the rest of the path runs from the last placed row
        // through every unplaced row, so it costs at least their minimum spanning tree.
        let first_dist = if self.bound == Bound::Slow && k >= 1 {
            lb += self.mst(loc);
            1
        } else {
            0
        };
        for u in 0..n {
            if loc.used >> u & 1 == 1 {
                continue;
            }
            for i in first_dist..h.min(k) {
                lb += match self.bound {
                    Bound::Fast => self.cheapest[i][u],
                    Bound::Slow => {
                        let recent = &loc.prefix[k.saturating_sub(i + 1)..];
                        let mut v_best = 0;
                        for &v in &self.sorted[i][u] {
                            let v = v as usize;
                            if loc.used >> v & 1 == 0 || recent.contains(&v) {
                                v_best = self.pc.cost[i][u * n + v];
                                break;
                            }
                        }
                        v_best
                    }
                };
            }
        }
        lb
    }

    /// Prim's minimum spanning tree over the unplaced rows and the last placed row (distance-1 costs).
    fn mst(&self, loc: &Local) -> u64 {
        let n = self.pc.n;
        let c = &self.pc.cost[0];
        let last = loc.prefix[loc.prefix.len() - 1];
        let mut nodes: Vec<usize> = (0..n).filter(|&u| loc.used >> u & 1 == 0).collect();
        if nodes.is_empty() {
            return 0;
        }
        let mut best: Vec<u64> = nodes.iter().map(|&u| c[last * n + u]).collect();
        let mut total = 0;
        while !nodes.is_empty() {
            let (j, _) = best
                .iter()
                .enumerate()
                .min_by_key(|&(_, &b)| b)
                .unwrap_or((0, &0));
            total += best[j];
            let v = nodes.swap_remove(j);
            best.swap_remove(j);
            for (b, &u) in best.iter_mut().zip(&nodes) {
                *b = (*b).min(c[v * n + u]);
            }
        }
        total
    }

    /// Reports a new shared incumbent to the hook (iteration = its rank among improvements).
    fn report(&self, loc: &mut Local, cost: u64) {
        let it = self.reports.fetch_add(1, Ordering::Relaxed) + 1;
        match self.control.report(it, || cost as f64, &loc.best_order) {
            Ok(()) => {}
            Err(Halt::Stopped) => self.stop.store(true, Ordering::Relaxed),
            Err(Halt::Cancelled) => loc.cancelled = true,
        }
    }

    fn dfs(&self, loc: &mut Local, cost: u64) {
        loc.nodes += 1;
        if loc.nodes % 256 == 0 {
            if self.control.is_cancelled() {
                loc.cancelled = true;
            } else if self.stop.load(Ordering::Relaxed)
                || self.deadline.is_some_and(|d| Instant::now() >= d)
            {
                loc.timed_out = true;
            }
        }
        if loc.cancelled || loc.timed_out {
            return;
        }
        let n = self.pc.n;
        let k = loc.prefix.len();
        if k == n {
            if cost < loc.best_cost {
                loc.best_cost = cost;
                loc.best_order = loc.prefix.clone();
                if self.best.offer(cost, loc.rank) && self.control.has_hook() {
                    self.report(loc, cost);
                }
            }
            return;
        }
        let first = loc.prefix[0];
        // symmetry: the last row must have a larger index than the first
        let remaining_max = (0..n).rev().find(|&u| loc.used >> u & 1 == 0);
        if remaining_max.is_none_or(|u| u < first) {
            return;
        }
        let h = self.pc.cost.len();
        if h <= 10 && k >= h {
            let tail = loc.prefix[k - h..]
                .iter()
                .fold(0u64, |acc, &r| (acc << 6) | r as u64);
            match loc.memo.get_mut(&(loc.used, tail)) {
                Some(c) if *c <= cost => return,
                Some(c) => *c = cost,
                None => {
                    if loc.memo.len() < MEMO_CAPACITY {
                        loc.memo.insert((loc.used, tail), cost);
                    }
                }
            }
        }
        // `>=` against this subtree's own best (its first find of a cost wins), the shared
        // incumbent's rule against other subtrees' finds (see the module documentation)
        let bound = cost + self.lower_bound(loc);
        if bound >= loc.best_cost || self.best.cuts(bound, loc.rank) {
            return;
        }
        let mut children: Vec<(u64, usize)> = (0..n)
            .filter(|&u| loc.used >> u & 1 == 0)
            .filter(|&u| k + 1 < n || u > first)
            .map(|u| {
                let add: u64 = (0..h.min(k))
                    .map(|i| self.pc.cost[i][loc.prefix[k - 1 - i] * n + u])
                    .sum();
                (add, u)
            })
            .collect();
        children.sort_unstable();
        for (add, u) in children {
            loc.prefix.push(u);
            loc.used |= 1 << u;
            self.dfs(loc, cost + add);
            loc.used &= !(1 << u);
            loc.prefix.pop();
            if loc.cancelled || loc.timed_out {
                return;
            }
        }
    }
}

/// The exact minimum of `costs` over all orders, starting from the upper bound of
/// `initial` (any permutation; the identity when `None`). Parallel over the first row.
///
/// `control` is polled every 256 nodes; its hook is called at every improvement of the shared
/// incumbent (iteration `k` = the `k`-th improvement, the objective its cost, the state its
/// order). A hook that returns `true` ends the search with the best order found so far and
/// [`BnbResult::stopped`] set.
///
/// # Errors
/// More than 64 rows, an invalid `initial`, or cancellation.
///
/// # Example
/// ```
/// use vastml_order::Control;
/// use vastml_order::bnb::{Bound, PairCosts, branch_and_bound, exhaustive};
///
/// // cost[0][a * n + b]: the cost of placing b next to a (a path: 0-1-2-3 is cheapest)
/// let n = 4;
/// let mut c = vec![9u64; n * n];
/// for a in 0..n - 1 {
///     c[a * n + a + 1] = 1;
///     c[(a + 1) * n + a] = 1;
/// }
/// let pc = PairCosts::new(n, vec![c])?;
/// let r = branch_and_bound(&pc, Some(&[2, 0, 3, 1]), Bound::Slow, Control::none())?;
/// assert_eq!(r.cost, 3);
/// assert_eq!(r.cost, exhaustive(&pc).cost);
/// # Ok::<(), vastml_order::OrderError>(())
/// ```
pub fn branch_and_bound(
    costs: &PairCosts,
    initial: Option<&[usize]>,
    bound: Bound,
    control: Control<'_, [usize]>,
) -> Result<BnbResult, OrderError> {
    search(costs, initial, bound, None, control).map(|(r, _)| r)
}

/// The exact row order of a ConvoMap objective, the columns fixed in `col_order`: the
/// [`PairCosts::convomap`] of the matrix (zero padding) searched by [`branch_and_bound`], and
/// the ConvoMap error of the order found under the objective's own padding.
///
/// # Errors
/// As [`PairCosts::convomap`] and [`branch_and_bound`]; `Cancelled` when `control`'s flag is
/// raised.
pub fn convomap_row_order(
    matrix: Matrix,
    objective: Objective,
    col_order: Option<&[usize]>,
    initial: Option<&[usize]>,
    bound: Bound,
    control: Control<'_, [usize]>,
) -> Result<(BnbResult, f64), OrderError> {
    let cancel = control.cancel_flag();
    let costs = PairCosts::convomap(&matrix, &objective, col_order)?;
    let r = branch_and_bound(&costs, initial, bound, control)?;
    let rows = Some(&r.order[..]);
    let error = Arrangement::new_cancellable(matrix, objective, rows, col_order, cancel)?.error();
    Ok((r, error))
}

/// [`branch_and_bound`] that stops at `deadline` (when given) with the best order found by
/// then: the result is exact only when the returned flag is `true` (no subtree was cut).
/// For heuristic uses, such as the block-ordering kicks of the iterated local search, where
/// a good order soon matters more than a proven one.
///
/// # Errors
/// As [`branch_and_bound`]; the deadline is not an error.
pub fn branch_and_bound_until(
    costs: &PairCosts,
    initial: Option<&[usize]>,
    bound: Bound,
    deadline: Option<Instant>,
    cancel: &AtomicBool,
) -> Result<(BnbResult, bool), OrderError> {
    search(costs, initial, bound, deadline, Control::new(cancel))
}

fn search(
    costs: &PairCosts,
    initial: Option<&[usize]>,
    bound: Bound,
    deadline: Option<Instant>,
    control: Control<'_, [usize]>,
) -> Result<(BnbResult, bool), OrderError> {
    let n = costs.n;
    if n > 64 {
        return Err(invalid(
            "matrix",
            format!("branch and bound handles at most 64 rows (got {n})"),
        ));
    }
    let init: Vec<usize> = initial.map_or_else(|| (0..n).collect(), <[usize]>::to_vec);
    let mut seen = vec![false; n];
    if init.len() != n
        || init
            .iter()
            .any(|&i| i >= n || std::mem::replace(&mut seen[i], true))
    {
        return Err(invalid("initial", "is not a permutation of the rows"));
    }
    if n <= 2 {
        let r = BnbResult {
            cost: costs.order_cost(&init),
            order: init,
            nodes: 1,
            stopped: false,
        };
        return Ok((r, true));
    }
    let h = costs.cost.len();
    let sorted: Vec<Vec<Vec<u16>>> = (0..h)
        .map(|i| {
            (0..n)
                .map(|u| {
                    let mut v: Vec<u16> = (0..n).filter(|&v| v != u).map(|v| v as u16).collect();
                    v.sort_by_key(|&v| (costs.cost[i][u * n + v as usize], v));
                    v
                })
                .collect()
        })
        .collect();
    let cheapest: Vec<Vec<u64>> = (0..h)
        .map(|i| {
            (0..n)
                .map(|u| costs.cost[i][u * n + sorted[i][u][0] as usize])
                .collect()
        })
        .collect();
    let mut init = init;
    if initial.is_none() {
        let dist: Vec<u32> = costs.cost[0]
            .iter()
            .map(|&c| u32::try_from(c).unwrap_or(u32::MAX).min((1 << 24) - 1))
            .collect();
        if let Ok(path) = crate::tsp::tsp_path(&dist, n)
            && costs.order_cost(&path) < costs.order_cost(&init)
        {
            init = path;
        }
    }
    let init_cost = costs.order_cost(&init);
    let best = Incumbent::new(init_cost);
    let stop = AtomicBool::new(false);
    let reports = AtomicUsize::new(0);
    let search = Search {
        pc: costs,
        bound,
        best: &best,
        control,
        stop: &stop,
        reports: &reports,
        deadline,
        sorted,
        cheapest,
    };
    let found: Mutex<Vec<(u64, usize, Vec<usize>)>> = Mutex::new(Vec::new());
    let nodes = AtomicU64::new(0);
    let cancelled = AtomicBool::new(false);
    let timed_out = AtomicBool::new(false);
    (0..n - 1).into_par_iter().for_each(|first| {
        let mut loc = Local {
            memo: std::collections::HashMap::new(),
            prefix: vec![first],
            used: 1 << first,
            rank: first as u64 + 1,
            best_cost: u64::MAX,
            best_order: Vec::new(),
            nodes: 0,
            cancelled: false,
            timed_out: false,
        };
        search.dfs(&mut loc, 0);
        nodes.fetch_add(loc.nodes, Ordering::Relaxed);
        if loc.cancelled {
            cancelled.store(true, Ordering::Relaxed);
        }
        if loc.timed_out {
            timed_out.store(true, Ordering::Relaxed);
        }
        if !loc.best_order.is_empty()
            && let Ok(mut f) = found.lock()
        {
            f.push((loc.best_cost, first, loc.best_order));
        }
    });
    if cancelled.load(Ordering::Relaxed) {
        return Err(OrderError::Cancelled);
    }
    let mut found = found.into_inner().unwrap_or_default();
    found.sort();
    let (cost, order) = match found.into_iter().next() {
        Some((c, _, o)) if c < init_cost => (c, o),
        _ => (init_cost, init),
    };
    let r = BnbResult {
        order,
        cost,
        nodes: nodes.load(Ordering::Relaxed),
        stopped: stop.load(Ordering::Relaxed),
    };
    Ok((r, !timed_out.load(Ordering::Relaxed)))
}

/// Exhaustive search over all orders (the oracle for small n).
pub fn exhaustive(costs: &PairCosts) -> BnbResult {
    let n = costs.n;
    let mut perm: Vec<usize> = (0..n).collect();
    let mut best = (costs.order_cost(&perm), perm.clone());
    let mut c = vec![0usize; n];
    let mut i = 0;
    let mut count = 1u64;
    while i < n {
        if c[i] < i {
            if i % 2 == 0 {
                perm.swap(0, i);
            } else {
                perm.swap(c[i], i);
            }
            count += 1;
            let v = costs.order_cost(&perm);
            if v < best.0 {
                best = (v, perm.clone());
            }
            c[i] += 1;
            i = 0;
        } else {
            c[i] = 0;
            i += 1;
        }
    }
    BnbResult {
        order: best.1,
        cost: best.0,
        nodes: count,
        stopped: false,
    }
}
