//! Open-path TSP by iterated local search on neighbour lists: 2-opt and Or-opt (Or-3opt
//! segment insertion of 1 to 3 cities, both orientations) with don't-look bits, kicked by
//! random local segment swaps (a double bridge confined to a window of the tour) that are
//! kept only when the repaired tour is shorter. Several independent runs (different seeds)
//! share a time budget on rayon; the shortest wins.
//!
//! The open path is solved as a tour through one extra "dummy" city at distance 0 from every
//! city (so the tour's two edges at the dummy mark the path's free ends); a fixed end city is
//! tied to the dummy by a large negative distance, which no improving move can remove.
//!
//! Distances come from a [`Metric`]: Euclidean on points ([`Points`]) or a dense
//! dissimilarity matrix ([`Dense`]).
//!
//! ```
//! use vastml_order::tsp_ils::{IlsParams, Points, solve};
//! use vastml_order::tsp_heuristics::path_length;
//! // 40 points on a circle, shuffled: the best open path leaves out one edge of the polygon
//! let mut x = Vec::new();
//! for i in 0..40 {
//!     let t = (i * 17 % 40) as f64 / 40.0 * std::f64::consts::TAU;
//!     x.extend([t.cos(), t.sin()]);
//! }
//! let r = solve(&Points::new(&x, 2).unwrap(), None, None, &IlsParams::default(), None).unwrap();
//! let side = 2.0 * (std::f64::consts::PI / 40.0).sin();
//! assert!((path_length(&x, 2, &r.order) - 39.0 * side).abs() < 1e-9);
//! ```

use std::time::{Duration, Instant};

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use rayon::prelude::*;
use vastml_core::Control;

use crate::error::{OrderError, invalid};
use crate::tsp_heuristics::neighbour_lists;

/// Distances between `n` cities.
pub trait Metric: Sync {
    /// Number of cities.
    fn len(&self) -> usize;
    /// Whether there are no cities.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Distance between cities `a` and `b` (symmetric, non-negative, finite).
    fn d(&self, a: usize, b: usize) -> f64;
    /// The `k` nearest other cities of every city, nearest first (row-major, `k` per city,
    /// `k = min(k, n - 1)`).
    fn neighbours(&self, k: usize) -> (Vec<usize>, usize);
}

/// Euclidean distances between the rows of a row-major point array.
#[derive(Debug, Clone, Copy)]
pub struct Points<'a> {
    x: &'a [f64],
    dim: usize,
}

impl<'a> Points<'a> {
    /// Wraps `x` (`n * dim` values, row-major).
    ///
    /// # Errors
    /// `dim == 0`, a length that is not a multiple of `dim`, or non-finite values.
    pub fn new(x: &'a [f64], dim: usize) -> Result<Self, OrderError> {
        crate::tsp_heuristics::check_points(x, dim, None, None)?;
        Ok(Points { x, dim })
    }
}

impl Metric for Points<'_> {
    fn len(&self) -> usize {
        self.x.len() / self.dim
    }
    #[inline]
    fn d(&self, a: usize, b: usize) -> f64 {
        crate::tsp_heuristics::euclid(
            &self.x[a * self.dim..(a + 1) * self.dim],
            &self.x[b * self.dim..(b + 1) * self.dim],
        )
    }
    fn neighbours(&self, k: usize) -> (Vec<usize>, usize) {
        if self.dim >= 8 && self.len() > 2048 {
            return parallel_points_neighbours(self.x, self.dim, k);
        }
        neighbour_lists(self.x, self.dim, k)
    }
}

/// A dense symmetric dissimilarity matrix (`n * n` values, row-major).
#[derive(Debug, Clone, Copy)]
pub struct Dense<'a> {
    d: &'a [f64],
    n: usize,
}

impl<'a> Dense<'a> {
    /// Wraps `d` (`n * n` values).
    ///
    /// # Errors
    /// Not square, non-finite or negative values, or not symmetric.
    pub fn new(d: &'a [f64], n: usize) -> Result<Self, OrderError> {
        if d.len() != n * n {
            return Err(OrderError::ShapeMismatch(format!(
                "{} values are not a {n} x {n} matrix",
                d.len()
            )));
        }
        if let Some(i) = d.iter().position(|v| !v.is_finite() || *v < 0.0) {
            return Err(invalid(
                "D",
                format!("value at ({}, {}) is negative or not finite", i / n, i % n),
            ));
        }
        for a in 0..n {
            for b in 0..a {
                if d[a * n + b] != d[b * n + a] {
                    return Err(invalid("D", format!("not symmetric at ({a}, {b})")));
                }
            }
        }
        Ok(Dense { d, n })
    }
}

impl Metric for Dense<'_> {
    fn len(&self) -> usize {
        self.n
    }
    #[inline]
    fn d(&self, a: usize, b: usize) -> f64 {
        self.d[a * self.n + b]
    }
    fn neighbours(&self, k: usize) -> (Vec<usize>, usize) {
        parallel_brute_neighbours(self, k)
    }
}

/// k nearest neighbours of every city by a scan of all pairs, rows in parallel. Ties go to
/// the smaller index.
fn parallel_brute_neighbours<M: Metric>(m: &M, k: usize) -> (Vec<usize>, usize) {
    let n = m.len();
    let k = k.min(n.saturating_sub(1));
    if k == 0 {
        return (Vec::new(), 0);
    }
    let mut out = vec![0usize; n * k];
    out.par_chunks_mut(k).enumerate().for_each(|(a, row)| {
        let mut cand: Vec<(f64, usize)> =
            (0..n).filter(|&b| b != a).map(|b| (m.d(a, b), b)).collect();
        let cmp = |p: &(f64, usize), q: &(f64, usize)| p.0.total_cmp(&q.0).then(p.1.cmp(&q.1));
        if k < cand.len() {
            cand.select_nth_unstable_by(k, cmp);
            cand.truncate(k);
        }
        cand.sort_unstable_by(cmp);
        for (r, c) in row.iter_mut().zip(&cand) {
            *r = c.1;
        }
    });
    (out, k)
}

/// k nearest neighbours of every row of `x` by a scan of all pairs, rows in parallel
/// ([`crate::knn`]). Ties go to the smaller index.
fn parallel_points_neighbours(x: &[f64], dim: usize, k: usize) -> (Vec<usize>, usize) {
    let n = x.len() / dim;
    let k = k.min(n.saturating_sub(1));
    if k == 0 {
        return (Vec::new(), 0);
    }
    (crate::knn::neighbours_parallel(x, dim, k), k)
}

/// Parameters of [`solve`].
#[derive(Debug, Clone)]
pub struct IlsParams {
    /// Neighbour-list length (at least 1).
    pub neighbours: usize,
    /// Kicks per run; `None` = limited by `time_limit` only (then at most `50 n` per run).
    pub kicks: Option<usize>,
    /// Wall-clock budget of all runs together; `None` = no limit (needs `kicks`).
    pub time_limit: Option<Duration>,
    /// Independent runs from different seeds (at least 1), spread over the rayon pool.
    pub runs: usize,
    /// Longest segment of a kick, in cities (at least 3).
    pub kick_window: usize,
    /// Seed of the kicks (run r uses seed + r).
    pub seed: u64,
    /// At most this many cities: exact Held–Karp (at most 13).
    pub exact_max: usize,
}

impl Default for IlsParams {
    fn default() -> Self {
        IlsParams {
            neighbours: 10,
            kicks: None,
            time_limit: Some(Duration::from_millis(200)),
            runs: 2,
            kick_window: 30,
            seed: 0,
            exact_max: 9,
        }
    }
}

/// Result of [`solve`].
#[derive(Debug, Clone)]
pub struct IlsResult {
    /// The path (a permutation of the cities).
    pub order: Vec<usize>,
    /// Its length.
    pub length: f64,
    /// Length of the first local optimum (before any kick) of the best run.
    pub first_length: f64,
    /// Kicks tried over all runs.
    pub kicks: usize,
    /// Kicks that shortened the tour, over all runs.
    pub accepted: usize,
    /// A progress hook asked to stop: `order` is the best path of the last report.
    pub stopped: bool,
}

const EPS: f64 = 1e-10;

/// The cost of the tour through the dummy city `n`.
struct Cost<'a, M: Metric> {
    m: &'a M,
    n: usize,
    fixed: [usize; 2],
    big: f64,
}

impl<M: Metric> Cost<'_, M> {
    #[inline]
    fn c(&self, a: usize, b: usize) -> f64 {
        if a == self.n || b == self.n {
            let o = if a == self.n { b } else { a };
            if o != self.n && (o == self.fixed[0] || o == self.fixed[1]) {
                -self.big
            } else {
                0.0
            }
        } else {
            self.m.d(a, b)
        }
    }
}

/// Array tour with positions; reversals take the shorter side.
struct Tour {
    t: Vec<usize>,
    pos: Vec<usize>,
    /// Journal of reversals (array positions) and kicks since the last commit.
    log: Vec<Op>,
}

#[derive(Clone, Copy)]
enum Op {
    Rev(usize, usize),
    Swap(usize, usize, usize),
}

impl Tour {
    fn new(t: Vec<usize>) -> Self {
        let mut pos = vec![0; t.len()];
        for (i, &c) in t.iter().enumerate() {
            pos[c] = i;
        }
        Tour {
            t,
            pos,
            log: Vec::new(),
        }
    }
    #[inline]
    fn len(&self) -> usize {
        self.t.len()
    }
    #[inline]
    fn next(&self, a: usize) -> usize {
        let i = self.pos[a] + 1;
        self.t[if i == self.len() { 0 } else { i }]
    }
    #[inline]
    fn prev(&self, a: usize) -> usize {
        let i = self.pos[a];
        self.t[if i == 0 { self.len() - 1 } else { i - 1 }]
    }
    /// Reverses the array positions i, i+1, ..., j (cyclically), or the complement when shorter
    /// (the same cyclic tour up to orientation).
    fn reverse_pos(&mut self, i: usize, j: usize) {
        let n = self.len();
        let inner = (j + n - i) % n + 1;
        let (mut i, mut j, len) = if 2 * inner > n {
            ((j + 1) % n, (i + n - 1) % n, n - inner)
        } else {
            (i, j, inner)
        };
        for _ in 0..len / 2 {
            let (a, b) = (self.t[i], self.t[j]);
            self.t[i] = b;
            self.t[j] = a;
            self.pos[b] = i;
            self.pos[a] = j;
            i = if i + 1 == n { 0 } else { i + 1 };
            j = if j == 0 { n - 1 } else { j - 1 };
        }
    }
    /// 2-opt: removes the tour edges (a, b) and (c, d), where b follows a and d follows c in
    /// one orientation, and adds (a, c) and (b, d).
    fn two_move(&mut self, a: usize, b: usize, c: usize, d: usize) {
        let (i, j) = if self.next(a) == b {
            (self.pos[b], self.pos[c])
        } else {
            (self.pos[c], self.pos[b])
        };
        self.reverse_pos(i, j);
        self.log.push(Op::Rev(i, j));
        let _ = d;
    }
    /// Swaps the adjacent blocks of array positions [s, s+l1) and [s+l1, s+l1+l2) (cyclic).
    fn swap_blocks(&mut self, s: usize, l1: usize, l2: usize) {
        let n = self.len();
        let tmp: Vec<usize> = (0..l1 + l2).map(|o| self.t[(s + o) % n]).collect();
        for (o, &c) in tmp[l1..].iter().chain(&tmp[..l1]).enumerate() {
            let p = (s + o) % n;
            self.t[p] = c;
            self.pos[c] = p;
        }
        self.log.push(Op::Swap(s, l1, l2));
    }
    fn undo(&mut self) {
        while let Some(op) = self.log.pop() {
            match op {
                Op::Rev(i, j) => self.reverse_pos(i, j),
                Op::Swap(s, l1, l2) => {
                    self.swap_blocks(s, l2, l1);
                    self.log.pop();
                }
            }
        }
    }
}

struct Search<'a, M: Metric> {
    cost: Cost<'a, M>,
    nb: &'a [usize],
    nbd: &'a [f64],
    k: usize,
    tour: Tour,
    active: Vec<bool>,
    queue: std::collections::VecDeque<usize>,
}

impl<M: Metric> Search<'_, M> {
    #[inline]
    fn c(&self, a: usize, b: usize) -> f64 {
        self.cost.c(a, b)
    }
    fn push(&mut self, a: usize) {
        if !self.active[a] {
            self.active[a] = true;
            self.queue.push_back(a);
        }
    }
    /// Candidate partners of `a` with their costs: the dummy first (cost `c(a, dummy)`), then
    /// the neighbour list. The dummy's own list is empty.
    fn candidates(&self, a: usize) -> (usize, &[usize], &[f64]) {
        let n = self.cost.n;
        if a == n {
            (n, &[], &[])
        } else {
            (
                n,
                &self.nb[a * self.k..(a + 1) * self.k],
                &self.nbd[a * self.k..(a + 1) * self.k],
            )
        }
    }

    /// First improving 2-opt move that adds an edge at `a`; returns the gain.
    fn two_opt(&mut self, a: usize) -> f64 {
        let (dummy, nb, nbd) = self.candidates(a);
        for dir in [true, false] {
            let an = if dir {
                self.tour.next(a)
            } else {
                self.tour.prev(a)
            };
            let g1 = self.c(a, an);
            let cands = (a != dummy)
                .then(|| (dummy, self.c(a, dummy)))
                .into_iter()
                .chain(nb.iter().copied().zip(nbd.iter().copied()));
            for (c, dac) in cands {
                if dac >= g1 {
                    if c == dummy {
                        continue;
                    }
                    break;
                }
                let cn = if dir {
                    self.tour.next(c)
                } else {
                    self.tour.prev(c)
                };
                if c == an || cn == a {
                    continue;
                }
                let gain = g1 + self.c(c, cn) - dac - self.c(an, cn);
                if gain > EPS {
                    // new edges (a, c), (an, cn)
                    self.tour.two_move(a, an, c, cn);
                    for v in [a, an, c, cn] {
                        self.push(v);
                    }
                    return gain;
                }
            }
        }
        0.0
    }

    /// Best Or-opt move of a segment of 1..=3 cities that starts or ends at `a`, inserted next
    /// to a neighbour of one of its ends; applies it and returns the gain.
    fn or_opt(&mut self, a: usize) -> f64 {
        let n_all = self.tour.len();
        let dummy = self.cost.n;
        for len in 1..=3usize {
            if len + 3 > n_all {
                break;
            }
            for forward in [true, false] {
                if len == 1 && !forward {
                    continue;
                }
                // segment s..e in tour order
                let (s, e) = if forward {
                    let mut e = a;
                    for _ in 1..len {
                        e = self.tour.next(e);
                    }
                    (a, e)
                } else {
                    let mut s = a;
                    for _ in 1..len {
                        s = self.tour.prev(s);
                    }
                    (s, a)
                };
                let (p, nx) = (self.tour.prev(s), self.tour.next(e));
                let remove = self.c(p, s) + self.c(e, nx) - self.c(p, nx);
                if remove <= EPS {
                    continue;
                }
                let mut inside = [usize::MAX; 3];
                let mut v = s;
                for slot in inside.iter_mut().take(len) {
                    *slot = v;
                    v = self.tour.next(v);
                }
                let mut best: Option<(f64, usize, usize, bool)> = None;
                let ends = [s, e];
                for &end in &ends[..if len == 1 { 1 } else { 2 }] {
                    let (_, nb, nbd) = self.candidates(end);
                    let cands = (end != dummy)
                        .then(|| (dummy, self.c(end, dummy)))
                        .into_iter()
                        .chain(nb.iter().copied().zip(nbd.iter().copied()));
                    for (c, dc) in cands {
                        if dc >= remove {
                            if c == dummy {
                                continue;
                            }
                            break;
                        }
                        if inside[..len].contains(&c) {
                            continue;
                        }
                        for (u, w) in [(c, self.tour.next(c)), (self.tour.prev(c), c)] {
                            // the edge (u, w) must not touch the segment
                            if u == e || w == s || inside[..len].contains(&u) {
                                continue;
                            }
                            if w == p {
                                continue;
                            }
                            let base = self.c(u, w);
                            // reversed: (u, e), (s, w); same: (u, s), (e, w)
                            let rev = self.c(u, e) + self.c(s, w) - base;
                            let same = self.c(u, s) + self.c(e, w) - base;
                            let (add, keep) = if same < rev {
                                (same, true)
                            } else {
                                (rev, false)
                            };
                            let gain = remove - add;
                            if gain > EPS && best.is_none_or(|b| gain > b.0) {
                                best = Some((gain, u, w, keep));
                            }
                        }
                    }
                }
                if let Some((gain, u, w, keep)) = best {
                    self.move_segment([p, s, e, nx], (u, w, keep));
                    for v in [p, s, e, nx, u, w] {
                        self.push(v);
                    }
                    return gain;
                }
            }
        }
        0.0
    }

    /// Moves the segment s..e (p before s, nx after e) between the adjacent cities u, w
    /// (w follows u in the orientation where s..e runs forward); `keep` = s next to u.
    fn move_segment(&mut self, [p, s, e, nx]: [usize; 4], (u, w, keep): (usize, usize, bool)) {
        // orient (u, w) like p -> s
        let s_fwd = self.tour.next(p) == s;
        let uw_fwd = self.tour.next(u) == w;
        let (u, w, keep) = if s_fwd == uw_fwd {
            (u, w, keep)
        } else {
            (w, u, !keep)
        };
        // p s..e nx ... u w  ->  p nx ... u e..s w
        self.tour.two_move(p, s, u, w);
        if nx != u {
            self.tour.two_move(p, u, nx, e);
        }
        if keep && s != e {
            // u e..s w -> u s..e w
            self.tour.two_move(u, e, s, w);
        }
    }

    fn local_search(&mut self) -> f64 {
        let mut gain = 0.0;
        while let Some(a) = self.queue.pop_front() {
            self.active[a] = false;
            loop {
                let g = self.two_opt(a);
                let g = if g > 0.0 { g } else { self.or_opt(a) };
                if g <= 0.0 {
                    break;
                }
                gain += g;
            }
        }
        gain
    }
}

fn tour_cost<M: Metric>(cost: &Cost<'_, M>, t: &[usize]) -> f64 {
    let n = t.len();
    (0..n).map(|i| cost.c(t[i], t[(i + 1) % n])).sum()
}

/// Cuts the tour at the dummy city `n` into the open path.
fn tour_to_path(t: &[usize], n: usize) -> Vec<usize> {
    let i = t.iter().position(|&c| c == n).unwrap_or(0);
    t[i + 1..].iter().chain(&t[..i]).copied().collect()
}

/// Shortest open path found through all cities of `m`, from `start` to `end` when given.
/// Up to `params.exact_max` cities the path is exact (Held–Karp, points only through
/// [`solve_exact`]); otherwise each run starts from `init` (a space-filling order when `None`;
/// all runs share it) and alternates local search and kicks until its kicks or the shared time
/// budget run out.
///
/// # Errors
/// Bad parameters, end points out of range or equal, `init` not a permutation, cancellation.
pub fn solve<M: Metric>(
    m: &M,
    start: Option<usize>,
    end: Option<usize>,
    params: &IlsParams,
    init: Option<&[usize]>,
) -> Result<IlsResult, OrderError> {
    solve_cancellable(m, start, end, params, init, Control::none())
}

/// [`solve`] that polls `control`'s cancel flag every 64 kicks of every run and, with a
/// hook, reports [`REPORTS`] times: the kicks (or the time budget) are cut into that many
/// rounds, and after round k the hook gets iteration k, the length of the best path so far and
/// that path (an exact path is reported once). A hook that returns `true` ends the search with that path
/// ([`IlsResult::stopped`]). Each run's kicks are the same however they are cut into rounds,
/// so with a kick budget the result does not depend on the hook.
///
/// # Errors
/// As [`solve`]; [`OrderError::Cancelled`] when the flag is raised before the first local optimum.
pub fn solve_cancellable<M: Metric>(
    m: &M,
    start: Option<usize>,
    end: Option<usize>,
    params: &IlsParams,
    init: Option<&[usize]>,
    control: Control<'_, [usize]>,
) -> Result<IlsResult, OrderError> {
    let n = m.len();
    if params.neighbours == 0 {
        return Err(invalid("neighbours", "must be at least 1"));
    }
    if params.runs == 0 {
        return Err(invalid("runs", "must be at least 1"));
    }
    if params.kick_window < 3 {
        return Err(invalid("kick_window", "must be at least 3"));
    }
    if params.kicks.is_none() && params.time_limit.is_none() {
        return Err(invalid("kicks", "give kicks or a time limit"));
    }
    for (name, e) in [("start", start), ("end", end)] {
        if let Some(e) = e
            && e >= n
        {
            return Err(invalid(name, format!("city {e} out of 0..{n}")));
        }
    }
    if start.is_some() && start == end && n > 1 {
        return Err(invalid("end", "start and end must differ"));
    }
    if let Some(p) = init {
        let mut seen = vec![false; n];
        if p.len() != n
            || p.iter()
                .any(|&c| c >= n || std::mem::replace(&mut seen[c], true))
        {
            return Err(invalid("init", format!("must be a permutation of 0..{n}")));
        }
    }
    let t0 = Instant::now();
    let length_of = |o: &[usize]| o.windows(2).map(|w| m.d(w[0], w[1])).sum::<f64>();
    if n <= 3 || n <= params.exact_max.min(13) {
        let order = exact_by_metric(m, start, end);
        let length = length_of(&order);
        // one report: the search is over
        let stopped =
            control.has_hook() && crate::tsp_means::halted(control.report(1, || length, &order))?;
        return Ok(IlsResult {
            order,
            length,
            first_length: length,
            kicks: 0,
            accepted: 0,
            stopped,
        });
    }
    let (nb, k) = m.neighbours(params.neighbours);
    let nbd: Vec<f64> = nb
        .par_chunks(k.max(1))
        .enumerate()
        .flat_map_iter(|(a, row)| row.iter().map(move |&b| m.d(a, b)).collect::<Vec<_>>())
        .collect();
    // an upper bound on any path: n times the largest distance from city 0, doubled
    let big = {
        let r = (0..n).map(|b| m.d(0, b)).fold(0.0, f64::max);
        4.0 * (n as f64) * r.max(1.0) + 1.0
    };
    let fixed = [start.unwrap_or(usize::MAX), end.unwrap_or(usize::MAX)];
    let mut path: Vec<usize> = match init {
        Some(p) => p.to_vec(),
        None => greedy_on_lists(m, &nb, &nbd, k),
    };
    // put the fixed ends at the ends of the initial path
    if let Some(s) = start {
        path.retain(|&c| c != s);
        path.insert(0, s);
    }
    if let Some(e) = end {
        path.retain(|&c| c != e);
        path.push(e);
    }
    let mut tour0 = path;
    tour0.push(n);
    let deadline = params.time_limit.map(|t| t0 + t);
    let max_kicks = params.kicks.unwrap_or(50 * n);
    let mut runs: Vec<Run<'_, M>> = (0..params.runs)
        .map(|r| Run {
            s: Search {
                cost: Cost { m, n, fixed, big },
                nb: &nb,
                nbd: &nbd,
                k,
                tour: Tour::new(tour0.clone()),
                active: vec![true; n + 1],
                queue: (0..=n).collect(),
            },
            rng: Pcg64::seed_from_u64(params.seed.wrapping_add(r as u64)),
            len: f64::NAN,
            first: f64::NAN,
            kicks: 0,
            accepted: 0,
        })
        .collect();
    let window = params.kick_window.min((n + 1) / 3).max(1);
    let best_of = |runs: &[Run<'_, M>]| {
        runs.iter()
            .enumerate()
            .min_by(|x, y| x.1.len.total_cmp(&y.1.len).then(x.0.cmp(&y.0)))
            .map_or(0, |x| x.0)
    };
    let path_of = |r: &Run<'_, M>| orient(tour_to_path(&r.s.tour.t, n), start, end);
    let rounds = if control.has_hook() { REPORTS } else { 1 };
    let mut stopped = false;
    for round in 1..=rounds {
        let until = Round {
            kicks: max_kicks * round / rounds,
            deadline: params
                .time_limit
                .map(|t| t0 + t.mul_f64(round as f64 / rounds as f64)),
        };
        runs.par_iter_mut()
            .for_each(|r| r.advance(until, deadline, window, &control));
        if control.is_cancelled() {
            break;
        }
        if control.has_hook() {
            let order = path_of(&runs[best_of(&runs)]);
            if crate::tsp_means::halted(control.report(round, || length_of(&order), &order))? {
                stopped = true;
                break;
            }
        }
    }
    if control.is_cancelled() && runs.iter().all(|r| r.kicks == 0) {
        return Err(OrderError::Cancelled);
    }
    let best = &runs[best_of(&runs)];
    let order = path_of(best);
    let length = length_of(&order);
    Ok(IlsResult {
        order,
        length,
        first_length: best.first,
        kicks: runs.iter().map(|r| r.kicks).sum(),
        accepted: runs.iter().map(|r| r.accepted).sum(),
        stopped,
    })
}

/// Reports of [`solve_cancellable`] to a progress hook (rounds of the search).
pub const REPORTS: usize = 10;

/// Where a round of [`solve_cancellable`] ends: this many kicks of a run, or this time.
#[derive(Clone, Copy)]
struct Round {
    kicks: usize,
    deadline: Option<Instant>,
}

/// One run of the iterated local search: its tour, random stream and counts.
struct Run<'a, M: Metric> {
    s: Search<'a, M>,
    rng: Pcg64,
    /// Length of the tour (NaN before the first local search).
    len: f64,
    /// Length of the first local optimum.
    first: f64,
    kicks: usize,
    accepted: usize,
}

impl<M: Metric> Run<'_, M> {
    /// Kicks (after the first local search) until `until` or the search's `deadline`, kicks
    /// of `window` cities at most, polling the cancel flag every 64 kicks.
    fn advance(
        &mut self,
        until: Round,
        deadline: Option<Instant>,
        window: usize,
        control: &Control<'_, [usize]>,
    ) {
        let s = &mut self.s;
        if self.len.is_nan() {
            let mut len = tour_cost(&s.cost, &s.tour.t);
            len -= s.local_search();
            s.tour.log.clear();
            (self.len, self.first) = (len, len);
        }
        let total = s.cost.n + 1;
        while self.kicks < until.kicks {
            if self.kicks % 64 == 0 {
                let past = |d: Option<Instant>| d.is_some_and(|d| Instant::now() >= d);
                if past(deadline) || past(until.deadline) || control.is_cancelled() {
                    break;
                }
            }
            self.kicks += 1;
            let rng = &mut self.rng;
            let p0 = rng.random_range(0..total);
            let l1 = rng.random_range(1..=window);
            let l2 = rng.random_range(1..=window);
            let (a, b) = (s.tour.t[(p0 + total - 1) % total], s.tour.t[p0]);
            let c1 = s.tour.t[(p0 + l1 - 1) % total];
            let c2 = s.tour.t[(p0 + l1) % total];
            let d1 = s.tour.t[(p0 + l1 + l2 - 1) % total];
            let d2 = s.tour.t[(p0 + l1 + l2) % total];
            // a [b..c1] [c2..d1] d2 -> a [c2..d1] [b..c1] d2
            let delta =
                s.c(a, c2) + s.c(d1, b) + s.c(c1, d2) - s.c(a, b) - s.c(c1, c2) - s.c(d1, d2);
            s.tour.swap_blocks(p0, l1, l2);
            for v in [a, b, c1, c2, d1, d2] {
                s.push(v);
            }
            let new_len = self.len + delta - s.local_search();
            if new_len < self.len - EPS {
                self.len = new_len;
                self.accepted += 1;
                s.tour.log.clear();
            } else {
                s.tour.undo();
            }
        }
    }
}

/// Turns the path so that `start` comes first / `end` last.
fn orient(mut order: Vec<usize>, start: Option<usize>, end: Option<usize>) -> Vec<usize> {
    if start.is_some_and(|s| order.last() == Some(&s) && order.first() != Some(&s))
        || end.is_some_and(|e| order.first() == Some(&e) && order.last() != Some(&e))
    {
        order.reverse();
    }
    order
}

/// Held–Karp over a metric (at most 13 cities).
fn exact_by_metric<M: Metric>(m: &M, start: Option<usize>, end: Option<usize>) -> Vec<usize> {
    let n = m.len();
    if n <= 1 {
        return (0..n).collect();
    }
    let full = 1usize << n;
    let mut dp = vec![f64::INFINITY; full * n];
    let mut from = vec![usize::MAX; full * n];
    for j in 0..n {
        if start.is_none_or(|s| s == j) && end != Some(j) {
            dp[(1 << j) * n + j] = 0.0;
        }
    }
    for set in 1..full {
        for j in 0..n {
            let cur = dp[set * n + j];
            if set & (1 << j) == 0 || !cur.is_finite() {
                continue;
            }
            for c in 0..n {
                let ns = set | (1 << c);
                if set & (1 << c) != 0 || (end == Some(c) && ns != full - 1) {
                    continue;
                }
                let v = cur + m.d(j, c);
                if v < dp[ns * n + c] {
                    dp[ns * n + c] = v;
                    from[ns * n + c] = j;
                }
            }
        }
    }
    let last_set = full - 1;
    let mut last = 0;
    let mut best = f64::INFINITY;
    for j in 0..n {
        if end.is_some_and(|e| e != j) {
            continue;
        }
        if dp[last_set * n + j] < best {
            best = dp[last_set * n + j];
            last = j;
        }
    }
    let mut rev = Vec::with_capacity(n);
    let (mut set, mut j) = (last_set, last);
    loop {
        rev.push(j);
        let p = from[set * n + j];
        set &= !(1 << j);
        if p == usize::MAX {
            break;
        }
        j = p;
    }
    rev.reverse();
    rev
}

/// Exact shortest open path of a metric of at most 13 cities (Held–Karp), the oracle of
/// [`solve`] on tiny instances.
///
/// # Errors
/// More than 13 cities, or end points out of range.
pub fn solve_exact<M: Metric>(
    m: &M,
    start: Option<usize>,
    end: Option<usize>,
) -> Result<Vec<usize>, OrderError> {
    let n = m.len();
    if n > 13 {
        return Err(invalid(
            "D",
            format!("{n} cities; the exact solver takes at most 13"),
        ));
    }
    for (name, e) in [("start", start), ("end", end)] {
        if let Some(e) = e
            && e >= n
        {
            return Err(invalid(name, format!("city {e} out of 0..{n}")));
        }
    }
    if start.is_some() && start == end && n > 1 {
        return Err(invalid("end", "start and end must differ"));
    }
    Ok(exact_by_metric(m, start, end))
}

/// Greedy edge matching over the neighbour-list edges, fragments joined nearest end first
/// (by a scan; O(f^2) in the number f of fragments, small after the matching).
fn greedy_on_lists<M: Metric>(m: &M, nb: &[usize], nbd: &[f64], k: usize) -> Vec<usize> {
    let n = m.len();
    let mut edges: Vec<(f64, usize, usize)> = Vec::with_capacity(n * k);
    for a in 0..n {
        for t in 0..k {
            let b = nb[a * k + t];
            edges.push((nbd[a * k + t], a.min(b), a.max(b)));
        }
    }
    edges.par_sort_unstable_by(|p, q| p.0.total_cmp(&q.0).then((p.1, p.2).cmp(&(q.1, q.2))));
    edges.dedup_by(|p, q| p.1 == q.1 && p.2 == q.2);
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(parent: &mut [usize], mut a: usize) -> usize {
        while parent[a] != a {
            parent[a] = parent[parent[a]];
            a = parent[a];
        }
        a
    }
    let mut adj = vec![[usize::MAX; 2]; n];
    let mut deg = vec![0u8; n];
    for &(_, a, b) in &edges {
        if deg[a] >= 2 || deg[b] >= 2 {
            continue;
        }
        let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
        if ra == rb {
            continue;
        }
        parent[ra] = rb;
        adj[a][deg[a] as usize] = b;
        adj[b][deg[b] as usize] = a;
        deg[a] += 1;
        deg[b] += 1;
    }
    // fragments as paths
    let mut seen = vec![false; n];
    let mut frags: Vec<Vec<usize>> = Vec::new();
    for c in 0..n {
        if seen[c] || deg[c] == 2 {
            continue;
        }
        let mut f = Vec::new();
        let (mut prev, mut cur) = (usize::MAX, c);
        loop {
            f.push(cur);
            seen[cur] = true;
            match adj[cur]
                .iter()
                .copied()
                .find(|&x| x != usize::MAX && x != prev)
            {
                Some(x) => {
                    prev = cur;
                    cur = x;
                }
                None => break,
            }
        }
        frags.push(f);
    }
    if frags.len() <= 1 {
        return frags.pop().unwrap_or_default();
    }
    // join fragments: from the current tail, the nearest free fragment end; fragments are
    // visited in a space-filling order of their ends to keep the scan short
    let nf = frags.len();
    let mut used = vec![false; nf];
    let mut order = std::mem::take(&mut frags[0]);
    used[0] = true;
    let ends: Vec<[usize; 2]> = frags
        .iter()
        .map(|f| {
            if f.is_empty() {
                [usize::MAX; 2]
            } else {
                [f[0], f[f.len() - 1]]
            }
        })
        .collect();
    for _ in 1..nf {
        let tail = *order.last().unwrap_or(&0);
        let mut best = (f64::INFINITY, 0, false);
        for (i, e) in ends.iter().enumerate() {
            if used[i] {
                continue;
            }
            for (flip, &c) in [false, true].iter().zip(e) {
                let d = m.d(tail, c);
                if d < best.0 {
                    best = (d, i, *flip);
                }
            }
        }
        used[best.1] = true;
        let mut f = std::mem::take(&mut frags[best.1]);
        if best.2 {
            f.reverse();
        }
        order.extend(f);
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tsp_heuristics::{PathParams, path_length, solve_path};

    fn uniform(n: usize, dim: usize, seed: u64) -> Vec<f64> {
        let mut rng = Pcg64::seed_from_u64(seed);
        (0..n * dim).map(|_| rng.random::<f64>()).collect()
    }

    fn is_perm(p: &[usize], m: usize) -> bool {
        let mut s = p.to_vec();
        s.sort_unstable();
        s == (0..m).collect::<Vec<_>>()
    }

    fn dense_of(x: &[f64], dim: usize) -> Vec<f64> {
        let p = Points::new(x, dim).unwrap();
        let n = p.len();
        (0..n * n).map(|i| p.d(i / n, i % n)).collect()
    }

    fn kicks(k: usize) -> IlsParams {
        IlsParams {
            kicks: Some(k),
            time_limit: None,
            exact_max: 0,
            ..IlsParams::default()
        }
    }

    #[test]
    fn exact_by_metric_matches_held_karp_on_points() {
        for seed in 0..5 {
            let x = uniform(9, 2, seed);
            let d = dense_of(&x, 2);
            let m = Dense::new(&d, 9).unwrap();
            for (s, e) in [
                (None, None),
                (Some(2), None),
                (None, Some(4)),
                (Some(1), Some(7)),
            ] {
                let a = solve_exact(&m, s, e).unwrap();
                let b = crate::tsp_heuristics::exact_path(&x, 2, s, e).unwrap();
                assert!(is_perm(&a, 9));
                assert!((path_length(&x, 2, &a) - path_length(&x, 2, &b)).abs() < 1e-9);
                if let Some(s) = s {
                    assert_eq!(a[0], s);
                }
                if let Some(e) = e {
                    assert_eq!(a[8], e);
                }
            }
        }
    }

    #[test]
    fn local_search_finds_the_optimum_of_small_instances_with_any_end_rule() {
        let mut n_opt = 0;
        let mut total = 0;
        for seed in 0..25 {
            let x = uniform(12, 2, 300 + seed);
            let m = Points::new(&x, 2).unwrap();
            for (s, e) in [
                (None, None),
                (Some(0), Some(11)),
                (Some(5), None),
                (None, Some(3)),
            ] {
                let r = solve(&m, s, e, &kicks(300), None).unwrap();
                assert!(is_perm(&r.order, 12));
                if let Some(s) = s {
                    assert_eq!(r.order[0], s);
                }
                if let Some(e) = e {
                    assert_eq!(r.order[11], e);
                }
                assert!((r.length - path_length(&x, 2, &r.order)).abs() < 1e-9);
                let opt = path_length(&x, 2, &exact_path_pts(&x, s, e));
                assert!(r.length >= opt - 1e-9);
                assert!(
                    r.length <= 1.02 * opt,
                    "seed {seed} {s:?} {e:?}: {} vs {opt}",
                    r.length
                );
                n_opt += usize::from(r.length <= opt + 1e-9);
                total += 1;
            }
        }
        // iterated local search on 12 cities: nearly always the optimum
        assert!(n_opt * 10 >= total * 9, "{n_opt} of {total} optimal");
    }

    fn exact_path_pts(x: &[f64], s: Option<usize>, e: Option<usize>) -> Vec<usize> {
        crate::tsp_heuristics::exact_path(x, 2, s, e).unwrap()
    }

    #[test]
    fn never_longer_than_the_old_heuristic_and_kicks_help() {
        for (n, dim, seed) in [(500usize, 2usize, 1u64), (800, 5, 2), (1500, 2, 3)] {
            let x = uniform(n, dim, seed);
            let old = solve_path(&x, dim, None, None, &PathParams::default()).unwrap();
            let m = Points::new(&x, dim).unwrap();
            let r = solve(&m, None, None, &kicks(20 * n), None).unwrap();
            assert!(is_perm(&r.order, n));
            let lo = path_length(&x, dim, &old);
            assert!(r.length <= lo, "{n} {dim}: {} vs old {lo}", r.length);
            assert!(
                r.length < 0.985 * r.first_length,
                "{} vs {}",
                r.length,
                r.first_length
            );
            // started from the old path, it can only get shorter
            let r2 = solve(&m, None, None, &kicks(5 * n), Some(&old)).unwrap();
            assert!(r2.length <= lo + 1e-9);
        }
    }

    #[test]
    fn dense_and_points_give_the_same_path_for_the_same_seed() {
        let x = uniform(300, 3, 9);
        let d = dense_of(&x, 3);
        let a = solve(&Points::new(&x, 3).unwrap(), None, None, &kicks(2000), None).unwrap();
        let b = solve(
            &Dense::new(&d, 300).unwrap(),
            None,
            None,
            &kicks(2000),
            None,
        )
        .unwrap();
        assert_eq!(a.order, b.order);
    }

    #[test]
    fn parallel_point_neighbours_equal_the_sorted_scan() {
        let (n, dim) = (3000usize, 12usize);
        let x = uniform(n, dim, 21);
        let (nb, k) = parallel_points_neighbours(&x, dim, 7);
        assert_eq!(k, 7);
        let p = Points::new(&x, dim).unwrap();
        for a in (0..n).step_by(37) {
            let mut c: Vec<(f64, usize)> =
                (0..n).filter(|&b| b != a).map(|b| (p.d(a, b), b)).collect();
            c.sort_by(|u, v| u.0.total_cmp(&v.0).then(u.1.cmp(&v.1)));
            let want: Vec<usize> = c[..7].iter().map(|u| u.1).collect();
            assert_eq!(&nb[a * 7..(a + 1) * 7], &want[..], "row {a}");
        }
    }

    #[test]
    fn fixed_ends_stay_on_large_instances() {
        let x = uniform(400, 2, 4);
        let m = Points::new(&x, 2).unwrap();
        let r = solve(&m, Some(17), Some(230), &kicks(4000), None).unwrap();
        assert_eq!((r.order[0], r.order[399]), (17, 230));
        assert!(is_perm(&r.order, 400));
        let r = solve(&m, None, Some(5), &kicks(4000), None).unwrap();
        assert_eq!(r.order[399], 5);
    }

    #[test]
    fn bad_input_is_rejected() {
        let x = uniform(20, 2, 1);
        let m = Points::new(&x, 2).unwrap();
        let p = IlsParams::default();
        assert!(solve(&m, Some(20), None, &p, None).is_err());
        assert!(solve(&m, Some(3), Some(3), &p, None).is_err());
        assert!(solve(&m, None, None, &p, Some(&[0, 1, 2])).is_err());
        let bad = IlsParams {
            kicks: None,
            time_limit: None,
            ..IlsParams::default()
        };
        assert!(solve(&m, None, None, &bad, None).is_err());
        assert!(Dense::new(&[0.0, 1.0, 2.0, 0.0], 2).is_err());
        assert!(Dense::new(&[0.0, -1.0, -1.0, 0.0], 2).is_err());
        assert!(Points::new(&[0.0, f64::NAN], 1).is_err());
    }

    /// A hook sees the ten rounds (each the best path so far, never longer than the one
    /// before), costs nothing in the result with a kick budget, and a stop keeps the path of
    /// that report; with fixed ends and on 1 and 2 threads alike.
    #[test]
    fn the_hook_sees_every_round_changes_nothing_and_can_stop() {
        use std::sync::Mutex;
        let x = uniform(300, 2, 8);
        let m = Points::new(&x, 2).unwrap();
        for (start, end) in [(None, None), (Some(3), Some(250))] {
            let p = kicks(3000);
            let plain = solve(&m, start, end, &p, None).unwrap();
            for threads in [1, 2] {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                let seen = Mutex::new(Vec::new());
                let stop_at = Mutex::new(usize::MAX);
                let hook = |it: usize, len: f64, order: &[usize]| {
                    seen.lock().unwrap().push((it, len, order.to_vec()));
                    it >= *stop_at.lock().unwrap()
                };
                let run = || {
                    let c = Control::none().with_hook(&hook, 1);
                    pool.install(|| solve_cancellable(&m, start, end, &p, None, c).unwrap())
                };
                let r = run();
                assert!(!r.stopped);
                assert_eq!((&r.order, r.length), (&plain.order, plain.length));
                assert_eq!((r.kicks, r.accepted), (plain.kicks, plain.accepted));
                let got = std::mem::take(&mut *seen.lock().unwrap());
                assert_eq!(
                    got.iter().map(|g| g.0).collect::<Vec<_>>(),
                    (1..=10).collect::<Vec<_>>()
                );
                for (k, (_, len, order)) in got.iter().enumerate() {
                    assert!(is_perm(order, 300));
                    assert_eq!(*len, path_length(&x, 2, order));
                    assert!(k == 0 || *len <= got[k - 1].1);
                }
                assert_eq!(got[9].2, plain.order);
                // stop at the third report
                *stop_at.lock().unwrap() = 3;
                let r = run();
                let got = std::mem::take(&mut *seen.lock().unwrap());
                assert!(r.stopped);
                assert_eq!(got.len(), 3);
                assert_eq!(r.order, got[2].2);
                assert_eq!(r.length, got[2].1);
                *stop_at.lock().unwrap() = usize::MAX;
            }
        }
    }
}
