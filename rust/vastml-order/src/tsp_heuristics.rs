//! Euclidean open-path TSP heuristics on points (spec §1.3 step 6): a start order (greedy
//! edge matching on k-nearest-neighbour candidate edges, a space-filling curve, or nearest
//! neighbour), improved by 2-opt and Or-opt moves restricted to neighbour lists (kNN from the
//! `vastml-spatial` kd-tree). Either end of the path may be fixed, as TSP-means needs for the
//! left and right neighbours of a node. [`exact_path`] (Held–Karp) is the oracle for tiny
//! instances.
//!
//! ```
//! use vastml_order::tsp_heuristics::{PathParams, path_length, solve_path};
//! // five collinear points in shuffled order; city 0 is a fixed start
//! let x = [2.0, 0.0, 4.0, 1.0, 3.0];
//! let p = solve_path(&x, 1, Some(1), None, &PathParams::default()).unwrap();
//! assert_eq!(p, vec![1, 3, 0, 4, 2]);
//! assert!((path_length(&x, 1, &p) - 4.0).abs() < 1e-12);
//! ```

use std::sync::atomic::{AtomicBool, Ordering};

use vastml_spatial::KdTree;

use crate::error::parse_option;
use crate::error::{OrderError, invalid};

/// How the first path is built before local search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Greedy edge matching over kNN candidate edges; fragments joined nearest-first.
    Greedy,
    /// Hilbert curve (2-D) or Morton order (other dimensions) of the points.
    SpaceFilling,
    /// Nearest neighbour walk from the start city (or city 0).
    NearestNeighbour,
}

parse_option!(Start, "start", {
    "greedy" => Start::Greedy,
    "space_filling" => Start::SpaceFilling,
    "hilbert" => Start::SpaceFilling,
    "nearest_neighbour" => Start::NearestNeighbour,
    "nearest_neighbor" => Start::NearestNeighbour,
});

/// Parameters of [`solve_path`].
#[derive(Debug, Clone)]
pub struct PathParams {
    /// Start construction.
    pub start: Start,
    /// Neighbour-list length for candidate edges and moves (at least 1).
    pub neighbours: usize,
    /// Run 2-opt.
    pub two_opt: bool,
    /// Run Or-opt (segments of 1 to 3 cities, both orientations).
    pub or_opt: bool,
    /// Instances with at most this many free cities are solved exactly (Held–Karp, at most 13).
    pub exact_max: usize,
    /// Upper bound on improvement rounds over all cities.
    pub max_rounds: usize,
    /// After 2-opt / Or-opt, this many segment-swap kicks per city of iterated local search
    /// ([`crate::tsp_ils`]; deterministic, seeded by the instance size); 0 = off.
    pub kicks_per_city: usize,
}

impl Default for PathParams {
    fn default() -> Self {
        PathParams {
            start: Start::Greedy,
            neighbours: 8,
            two_opt: true,
            or_opt: true,
            exact_max: 10,
            max_rounds: 1000,
            kicks_per_city: 0,
        }
    }
}

/// Largest number of free cities [`exact_path`] accepts.
pub const EXACT_LIMIT: usize = 16;

#[inline]
fn dist(x: &[f64], dim: usize, a: usize, b: usize) -> f64 {
    euclid(&x[a * dim..(a + 1) * dim], &x[b * dim..(b + 1) * dim])
}

/// Euclidean distance between two points, with four partial sums: in many dimensions the
/// additions form four independent chains instead of one long dependent one (for up to three
/// coordinates the result is that of the plain sum).
#[inline]
pub(crate) fn euclid(pa: &[f64], pb: &[f64]) -> f64 {
    let mut s = [0.0f64; 4];
    let (ca, cb) = (pa.chunks_exact(4), pb.chunks_exact(4));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (u, v) in ca.zip(cb) {
        for l in 0..4 {
            let t = u[l] - v[l];
            s[l] += t * t;
        }
    }
    let mut tail = 0.0;
    for (u, v) in ra.iter().zip(rb) {
        let t = u - v;
        tail += t * t;
    }
    ((s[0] + s[1]) + (s[2] + s[3]) + tail).sqrt()
}

/// Length of the open path `order` through the rows of `x` (row-major, `dim` columns).
pub fn path_length(x: &[f64], dim: usize, order: &[usize]) -> f64 {
    order.windows(2).map(|w| dist(x, dim, w[0], w[1])).sum()
}

/// Checks the shape and finiteness of `x` and the end points; returns the number of cities.
pub(crate) fn check_points(
    x: &[f64],
    dim: usize,
    start: Option<usize>,
    end: Option<usize>,
) -> Result<usize, OrderError> {
    let m = vastml_core::Points::new_or_empty("X", x, dim)?.len();
    for (name, e) in [("start", start), ("end", end)] {
        if let Some(e) = e
            && e >= m
        {
            return Err(invalid(name, format!("city {e} out of 0..{m}")));
        }
    }
    if start.is_some() && start == end && m > 1 {
        return Err(invalid("end", "start and end must differ"));
    }
    Ok(m)
}

/// Exact shortest open path (Held–Karp dynamic programme) through all rows of `x`, starting at
/// `start` and ending at `end` when given (a missing end is free). The oracle for small
/// instances: O(2^f f^2) time for f free cities.
///
/// # Errors
/// Bad shape, non-finite values, end points out of range or equal, or more than
/// [`EXACT_LIMIT`] free cities.
pub fn exact_path(
    x: &[f64],
    dim: usize,
    start: Option<usize>,
    end: Option<usize>,
) -> Result<Vec<usize>, OrderError> {
    let m = check_points(x, dim, start, end)?;
    if m <= 1 {
        return Ok((0..m).collect());
    }
    let free: Vec<usize> = (0..m)
        .filter(|&c| Some(c) != start && Some(c) != end)
        .collect();
    let f = free.len();
    if f > EXACT_LIMIT {
        return Err(invalid(
            "X",
            format!("{f} free cities; the exact solver takes at most {EXACT_LIMIT}"),
        ));
    }
    let mut out = Vec::with_capacity(m);
    if f == 0 {
        out.extend(start);
        out.extend(end);
        return Ok(out);
    }
    let full = (1usize << f) - 1;
    let mut dp = vec![f64::INFINITY; (full + 1) * f];
    let mut from = vec![u8::MAX; (full + 1) * f];
    for j in 0..f {
        dp[(1 << j) * f + j] = start.map_or(0.0, |s| dist(x, dim, s, free[j]));
    }
    for set in 1..=full {
        for j in 0..f {
            let cur = dp[set * f + j];
            if set & (1 << j) == 0 || !cur.is_finite() {
                continue;
            }
            for k in 0..f {
                if set & (1 << k) != 0 {
                    continue;
                }
                let nset = set | (1 << k);
                let v = cur + dist(x, dim, free[j], free[k]);
                if v < dp[nset * f + k] {
                    dp[nset * f + k] = v;
                    from[nset * f + k] = j as u8;
                }
            }
        }
    }
    let (mut best, mut last) = (f64::INFINITY, 0);
    for j in 0..f {
        let v = dp[full * f + j] + end.map_or(0.0, |e| dist(x, dim, free[j], e));
        if v < best {
            best = v;
            last = j;
        }
    }
    let mut rev = Vec::with_capacity(f);
    let mut set = full;
    let mut j = last;
    loop {
        rev.push(free[j]);
        let p = from[set * f + j];
        set &= !(1 << j);
        if p == u8::MAX {
            break;
        }
        j = p as usize;
    }
    out.extend(start);
    out.extend(rev.into_iter().rev());
    out.extend(end);
    Ok(out)
}

/// The `k` nearest other cities of every city, nearest first (row-major `m x k'` with
/// `k' = min(k, m - 1)`). Uses the kd-tree of `vastml-spatial` above 64 cities, a direct scan
/// below.
pub fn neighbour_lists(x: &[f64], dim: usize, k: usize) -> (Vec<usize>, usize) {
    neighbour_lists_with(x, dim, k, &NEVER).expect("a flag never raised")
}

/// Cities queried between two polls of the cancel flag in [`neighbour_lists_with`].
const QUERY_CHUNK: usize = 4096;

/// [`neighbour_lists`] polling `cancel` while the kd-tree is built and between chunks of
/// 4,096 queries, which run in parallel (the lists do not depend on the number of threads).
///
/// # Errors
/// [`OrderError::Cancelled`] when `cancel` is raised.
pub fn neighbour_lists_with(
    x: &[f64],
    dim: usize,
    k: usize,
    cancel: &AtomicBool,
) -> Result<(Vec<usize>, usize), OrderError> {
    use rayon::prelude::*;
    let m = x.len() / dim;
    let k = k.min(m.saturating_sub(1));
    let mut out = Vec::with_capacity(m * k);
    if k == 0 {
        return Ok((out, 0));
    }
    if m <= 64 {
        let mut cand: Vec<(f64, usize)> = Vec::with_capacity(m);
        for a in 0..m {
            cand.clear();
            cand.extend((0..m).filter(|&b| b != a).map(|b| (dist(x, dim, a, b), b)));
            cand.sort_by(|p, q| p.0.total_cmp(&q.0).then(p.1.cmp(&q.1)));
            out.extend(cand[..k].iter().map(|c| c.1));
        }
    } else if dim >= 4 && m <= 8192 {
        // a kd-tree prunes little in many dimensions or on small sets: scan all pairs once
        out = brute_neighbours(x, dim, k);
    } else {
        // points were validated by the caller, so the tree can only be cancelled
        let tree = KdTree::build_with(x, dim, 16, cancel).map_err(|_| OrderError::Cancelled)?;
        out.resize(m * k, 0);
        for (chunk, rows) in out.chunks_mut(QUERY_CHUNK * k).enumerate() {
            cancelled(cancel)?;
            rows.par_chunks_mut(k).enumerate().for_each(|(i, row)| {
                let a = chunk * QUERY_CHUNK + i;
                let nn = tree.nearest(&x[a * dim..(a + 1) * dim], k + 1);
                let nn = nn.expect("validated query");
                let mut others = nn.into_iter().map(|(b, _)| b).filter(|&b| b != a);
                // k + 1 hits all equal to a cannot happen (indices are distinct); pad defensively
                let pad = if a == 0 { 1 } else { 0 };
                row.iter_mut()
                    .for_each(|o| *o = others.next().unwrap_or(pad));
            });
        }
    }
    Ok((out, k))
}

/// The `k` nearest other rows of every row by one pass over all pairs (each pair's distance
/// is computed once and offered to both rows). Ties go to the smaller index, as in the direct
/// scan of [`neighbour_lists`].
fn brute_neighbours(x: &[f64], dim: usize, k: usize) -> Vec<usize> {
    crate::knn::neighbours_serial(x, dim, k)
}

fn find(parent: &mut [usize], mut a: usize) -> usize {
    while parent[a] != a {
        parent[a] = parent[parent[a]];
        a = parent[a];
    }
    a
}

/// Greedy edge matching on candidate edges, then fragments joined nearest-end-first.
fn greedy_start(
    x: &[f64],
    dim: usize,
    nb: &[usize],
    k: usize,
    start: Option<usize>,
    end: Option<usize>,
) -> Vec<usize> {
    let m = x.len() / dim;
    let mut edges: Vec<(f64, usize, usize)> = Vec::with_capacity(m * k);
    for a in 0..m {
        for &b in &nb[a * k..(a + 1) * k] {
            if a < b || !nb[b * k..(b + 1) * k].contains(&a) {
                edges.push((dist(x, dim, a, b), a.min(b), a.max(b)));
            }
        }
    }
    edges.sort_by(|p, q| p.0.total_cmp(&q.0).then((p.1, p.2).cmp(&(q.1, q.2))));
    edges.dedup_by(|p, q| p.1 == q.1 && p.2 == q.2);
    let cap = |c: usize| {
        if Some(c) == start || Some(c) == end {
            1
        } else {
            2
        }
    };
    let mut deg = vec![0u8; m];
    let mut adj = vec![[usize::MAX; 2]; m];
    let mut parent: Vec<usize> = (0..m).collect();
    // whether a fragment holds the fixed start / end
    let mut has_s = vec![false; m];
    let mut has_e = vec![false; m];
    if let Some(s) = start {
        has_s[s] = true;
    }
    if let Some(e) = end {
        has_e[e] = true;
    }
    let mut n_edges = 0;
    for &(_, a, b) in &edges {
        if n_edges + 1 >= m {
            break;
        }
        if deg[a] >= cap(a) || deg[b] >= cap(b) {
            continue;
        }
        let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
        if ra == rb || ((has_s[ra] || has_s[rb]) && (has_e[ra] || has_e[rb])) {
            continue;
        }
        adj[a][deg[a] as usize] = b;
        adj[b][deg[b] as usize] = a;
        deg[a] += 1;
        deg[b] += 1;
        parent[ra] = rb;
        has_s[rb] |= has_s[ra];
        has_e[rb] |= has_e[ra];
        n_edges += 1;
    }
    // walk fragments: from an end city (degree < 2), follow adjacency to the other end
    let walk = |from: usize, out: &mut Vec<usize>, seen: &mut [bool]| -> usize {
        let (mut prev, mut cur) = (usize::MAX, from);
        loop {
            out.push(cur);
            seen[cur] = true;
            let next = adj[cur]
                .iter()
                .copied()
                .find(|&n| n != usize::MAX && n != prev);
            match next {
                Some(n) => {
                    prev = cur;
                    cur = n;
                }
                None => return cur,
            }
        }
    };
    let mut seen = vec![false; m];
    let mut order = Vec::with_capacity(m);
    let end_frag = end.map(|e| find(&mut parent, e));
    // fragment ends (cities of degree < 2), excluding the end fragment until last
    let mut ends: Vec<usize> = (0..m).filter(|&c| deg[c] < 2).collect();
    let first = start.unwrap_or_else(|| {
        ends.iter()
            .copied()
            .find(|&c| Some(find(&mut parent, c)) != end_frag)
            .or_else(|| ends.iter().copied().find(|&c| Some(c) != end))
            .unwrap_or(ends[0])
    });
    let mut tail = walk(first, &mut order, &mut seen);
    while order.len() < m {
        // nearest unvisited fragment end, not of the end fragment unless it is the last one
        let remaining_other = ends
            .iter()
            .any(|&c| !seen[c] && Some(find(&mut parent, c)) != end_frag);
        let mut best = (f64::INFINITY, usize::MAX);
        for &c in &ends {
            if seen[c] || Some(c) == end {
                continue;
            }
            let in_end = Some(find(&mut parent, c)) == end_frag;
            if in_end && remaining_other {
                continue;
            }
            let d = dist(x, dim, tail, c);
            // the first candidate is taken even at an infinite distance (coordinates so
            // large that their squares overflow), so the walk always goes on
            if best.1 == usize::MAX || d < best.0 {
                best = (d, c);
            }
        }
        if best.1 == usize::MAX {
            // only the lone fixed end city is left
            best.1 = end.expect("some city remains");
        }
        tail = walk(best.1, &mut order, &mut seen);
        ends.retain(|&c| !seen[c]);
    }
    order
}

fn hilbert_key(x: u32, y: u32, bits: u32) -> u64 {
    let (mut x, mut y) = (x, y);
    let mut d: u64 = 0;
    let mut s = 1u32 << (bits - 1);
    while s > 0 {
        let rx = u32::from(x & s > 0);
        let ry = u32::from(y & s > 0);
        d += u64::from(s) * u64::from(s) * u64::from((3 * rx) ^ ry);
        if ry == 0 {
            if rx == 1 {
                x = s.wrapping_mul(2).wrapping_sub(1).wrapping_sub(x) & ((1 << bits) - 1);
                y = s.wrapping_mul(2).wrapping_sub(1).wrapping_sub(y) & ((1 << bits) - 1);
            }
            std::mem::swap(&mut x, &mut y);
        }
        s >>= 1;
    }
    d
}

/// Order of the rows of `x` along a space-filling curve: sorted for 1-D, Hilbert curve for
/// 2-D, Morton (Z-order) on the first 8 coordinates otherwise.
pub fn space_filling_order(x: &[f64], dim: usize) -> Vec<usize> {
    let m = x.len() / dim;
    let used = dim.min(8);
    let mut lo = vec![f64::INFINITY; used];
    let mut hi = vec![f64::NEG_INFINITY; used];
    for i in 0..m {
        for k in 0..used {
            lo[k] = lo[k].min(x[i * dim + k]);
            hi[k] = hi[k].max(x[i * dim + k]);
        }
    }
    let bits = if used <= 2 {
        16
    } else {
        (64 / used as u32).min(16)
    };
    let q = |i: usize, k: usize| -> u32 {
        let span = hi[k] - lo[k];
        if span <= 0.0 {
            0
        } else {
            let t = (x[i * dim + k] - lo[k]) / span;
            ((t * f64::from((1u32 << bits) - 1)).round()) as u32
        }
    };
    let mut keyed: Vec<(u64, usize)> = (0..m)
        .map(|i| {
            let key = match used {
                1 => u64::from(q(i, 0)),
                2 => hilbert_key(q(i, 0), q(i, 1), bits),
                _ => {
                    let mut key = 0u64;
                    for b in (0..bits).rev() {
                        for k in 0..used {
                            key = (key << 1) | u64::from((q(i, k) >> b) & 1);
                        }
                    }
                    key
                }
            };
            (key, i)
        })
        .collect();
    keyed.sort_unstable();
    keyed.into_iter().map(|p| p.1).collect()
}

fn nearest_neighbour_start(
    x: &[f64],
    dim: usize,
    start: Option<usize>,
    end: Option<usize>,
) -> Vec<usize> {
    let m = x.len() / dim;
    let mut seen = vec![false; m];
    let mut cur = start.unwrap_or(if end == Some(0) { 1 } else { 0 });
    let mut order = vec![cur];
    seen[cur] = true;
    if let Some(e) = end {
        seen[e] = true;
    }
    let target = m - usize::from(end.is_some());
    while order.len() < target {
        let mut best = (f64::INFINITY, 0);
        for (c, &done) in seen.iter().enumerate() {
            if !done {
                let d = dist(x, dim, cur, c);
                if d < best.0 {
                    best = (d, c);
                }
            }
        }
        cur = best.1;
        seen[cur] = true;
        order.push(cur);
    }
    order.extend(end);
    order
}

/// Local search state: the path, positions, fixed ends.
struct Local<'a> {
    x: &'a [f64],
    dim: usize,
    p: Vec<usize>,
    pos: Vec<usize>,
    lo: usize,
    hi: usize,
}

const EPS: f64 = 1e-10;

impl Local<'_> {
    #[inline]
    fn d(&self, a: Option<usize>, b: Option<usize>) -> f64 {
        match (a, b) {
            (Some(a), Some(b)) => dist(self.x, self.dim, a, b),
            _ => 0.0,
        }
    }
    #[inline]
    fn at(&self, i: isize) -> Option<usize> {
        if i < 0 || i as usize >= self.p.len() {
            None
        } else {
            Some(self.p[i as usize])
        }
    }
    /// Gain of reversing positions x..=y (positive = shorter).
    fn rev_gain(&self, x: usize, y: usize) -> f64 {
        let (xi, yi) = (x as isize, y as isize);
        let (px, py) = (self.at(xi - 1), self.at(yi + 1));
        let (a, b) = (Some(self.p[x]), Some(self.p[y]));
        self.d(px, a) + self.d(b, py) - self.d(px, b) - self.d(a, py)
    }
    fn reverse(&mut self, x: usize, y: usize) {
        self.p[x..=y].reverse();
        for i in x..=y {
            self.pos[self.p[i]] = i;
        }
    }
    fn valid(&self, x: usize, y: usize) -> bool {
        self.lo <= x && x < y && y <= self.hi
    }

    /// Tries the 2-opt moves that create an edge from city `a` to one of its neighbours, and
    /// the free-end reversals at `a`. Applies the first improving move.
    fn two_opt_at(&mut self, a: usize, nb: &[usize]) -> bool {
        let i = self.pos[a];
        let m = self.p.len();
        let mut cands: [(usize, usize); 2] = [(usize::MAX, 0); 2];
        // free ends: drop the edge after / before a
        let mut n_c = 0;
        if self.hi == m - 1 && i + 1 < m {
            cands[n_c] = (i + 1, m - 1);
            n_c += 1;
        }
        if self.lo == 0 && i > 0 {
            cands[n_c] = (0, i - 1);
            n_c += 1;
        }
        for &(x, y) in &cands[..n_c] {
            if self.valid(x, y) && self.rev_gain(x, y) > EPS {
                self.reverse(x, y);
                return true;
            }
        }
        // neighbour-list pruning: the new edge (a, b) must be shorter than the edge it replaces
        let d_succ = self.d(Some(a), self.at(i as isize + 1));
        let d_pred = self.d(self.at(i as isize - 1), Some(a));
        for &b in nb {
            let dab = dist(self.x, self.dim, a, b);
            if dab >= d_succ && dab >= d_pred {
                break;
            }
            let j = self.pos[b];
            let (succ_move, pred_move) = if j > i {
                ((i + 1, j), (i, j - 1))
            } else {
                ((j + 1, i), (j, i.wrapping_sub(1)))
            };
            for (ok, (x, y)) in [(dab < d_succ, succ_move), (dab < d_pred, pred_move)] {
                if ok && y != usize::MAX && self.valid(x, y) && self.rev_gain(x, y) > EPS {
                    self.reverse(x, y);
                    return true;
                }
            }
        }
        false
    }

    /// Or-opt: moves the segment of length 1..=3 that starts at `a` next to a neighbour of
    /// its ends (either orientation). Applies the first improving move.
    fn or_opt_at(&mut self, a: usize, nb: &[usize], kk: usize) -> bool {
        let nb_of = |c: usize| &nb[c * kk..(c + 1) * kk];
        let m = self.p.len();
        let i = self.pos[a];
        for k in 1..=3usize {
            let j = i + k - 1;
            if i < self.lo || j > self.hi || j >= m {
                break;
            }
            let (s0, s1) = (self.p[i], self.p[j]);
            let prev = self.at(i as isize - 1);
            let next = self.at(j as isize + 1);
            let remove = self.d(prev, Some(s0)) + self.d(Some(s1), next) - self.d(prev, next);
            if remove <= EPS {
                continue;
            }
            // gaps g: between positions g and g+1 (g = -1: before the first city)
            let mut best: Option<(f64, isize, bool)> = None;
            let both = [s0, s1];
            let ends = &both[..if k == 1 { 1 } else { 2 }];
            for (&end, &c) in ends
                .iter()
                .flat_map(|e| std::iter::repeat(e).zip(nb_of(*e)))
            {
                if i <= self.pos[c] && self.pos[c] <= j {
                    continue;
                }
                // pruning: the edge from the segment end to c must be shorter than the gain
                if dist(self.x, self.dim, end, c) >= remove {
                    continue;
                }
                let pc = self.pos[c] as isize;
                for g in [pc - 1, pc] {
                    if g >= i as isize - 1 && g <= j as isize {
                        continue;
                    }
                    // fixed ends: nothing goes before a fixed start or after a fixed end
                    if g < self.lo as isize - 1 || g > self.hi as isize {
                        continue;
                    }
                    let (u, v) = (self.at(g), self.at(g + 1));
                    let base = self.d(u, v);
                    let fwd = self.d(u, Some(s0)) + self.d(Some(s1), v) - base;
                    let bwd = self.d(u, Some(s1)) + self.d(Some(s0), v) - base;
                    let (add, flip) = if bwd < fwd { (bwd, true) } else { (fwd, false) };
                    let gain = remove - add;
                    if gain > EPS && best.is_none_or(|b| gain > b.0) {
                        best = Some((gain, g, flip));
                    }
                }
            }
            if let Some((_, g, flip)) = best {
                let (lo_r, hi_r);
                if g > j as isize {
                    let g = g as usize;
                    // segment i..=j moves after position g
                    self.p[i..=g].rotate_left(k);
                    if flip {
                        self.p[g + 1 - k..=g].reverse();
                    }
                    (lo_r, hi_r) = (i, g);
                } else {
                    let g1 = (g + 1) as usize;
                    self.p[g1..=j].rotate_right(k);
                    if flip {
                        self.p[g1..g1 + k].reverse();
                    }
                    (lo_r, hi_r) = (g1, j);
                }
                for t in lo_r..=hi_r {
                    self.pos[self.p[t]] = t;
                }
                return true;
            }
        }
        false
    }
}

/// Improves `path` (a permutation of the rows of `x`) in place by 2-opt and Or-opt moves on
/// neighbour lists `nb` (`k` per city). With `fix_start` / `fix_end` the first / last city stays.
/// Returns the number of improving moves. Stops early (the path stays a valid permutation)
/// when `cancel` is raised; the caller checks the flag.
pub fn improve_path(
    x: &[f64],
    dim: usize,
    path: &mut Vec<usize>,
    (nb, k): (&[usize], usize),
    (fix_start, fix_end): (bool, bool),
    params: &PathParams,
    cancel: &AtomicBool,
) -> usize {
    let m = path.len();
    if m < 3 {
        return 0;
    }
    let mut pos = vec![0; m];
    for (i, &c) in path.iter().enumerate() {
        pos[c] = i;
    }
    let mut st = Local {
        x,
        dim,
        p: std::mem::take(path),
        pos,
        lo: usize::from(fix_start),
        hi: if fix_end { m - 2 } else { m - 1 },
    };
    let nb_of = |c: usize| &nb[c * k..(c + 1) * k];
    let mut moves = 0;
    // don't-look bits: a queue of cities whose surroundings changed
    let mut active = vec![true; m];
    let mut queue: std::collections::VecDeque<usize> = (0..m).collect();
    let budget = params.max_rounds.saturating_mul(m);
    let mut steps = 0;
    while let Some(a) = queue.pop_front() {
        active[a] = false;
        steps += 1;
        if steps > budget || (steps % 1024 == 0 && cancel.load(Ordering::Relaxed)) {
            break; // a cancelled caller sees the flag and discards the path
        }
        let before = st.pos[a];
        let improved = (params.two_opt && st.two_opt_at(a, nb_of(a)))
            || (params.or_opt && st.or_opt_at(a, nb, k));
        if improved {
            moves += 1;
            // wake a and the cities around its old and new positions
            let now = st.pos[a];
            for q in [before, now] {
                for t in q.saturating_sub(2)..(q + 3).min(m) {
                    let c = st.p[t];
                    if !active[c] {
                        active[c] = true;
                        queue.push_back(c);
                    }
                }
            }
            for &c in nb_of(a) {
                if !active[c] {
                    active[c] = true;
                    queue.push_back(c);
                }
            }
        }
    }
    *path = st.p;
    moves
}

/// A short open path through all rows of `x`, from `start` to `end` when given (missing ends
/// are free). Exact (Held–Karp) up to `params.exact_max` free cities, otherwise the start
/// construction followed by 2-opt and Or-opt on neighbour lists.
///
/// # Errors
/// Bad shape, non-finite values, bad end points, or `neighbours == 0`.
pub fn solve_path(
    x: &[f64],
    dim: usize,
    start: Option<usize>,
    end: Option<usize>,
    params: &PathParams,
) -> Result<Vec<usize>, OrderError> {
    solve_path_with(x, dim, start, end, params, &NEVER)
}

/// [`solve_path`], polling `cancel` between its stages and every 1,024 local-search steps.
///
/// # Errors
/// As [`solve_path`], and [`OrderError::Cancelled`] when `cancel` is raised.
pub fn solve_path_with(
    x: &[f64],
    dim: usize,
    start: Option<usize>,
    end: Option<usize>,
    params: &PathParams,
    cancel: &AtomicBool,
) -> Result<Vec<usize>, OrderError> {
    let m = check_points(x, dim, start, end)?;
    if params.neighbours == 0 {
        return Err(invalid("neighbours", "must be at least 1"));
    }
    let n_free = m - usize::from(start.is_some()) - usize::from(end.is_some());
    if n_free <= params.exact_max.min(13) {
        return exact_path(x, dim, start, end);
    }
    solve_path_unchecked(x, dim, start, end, params, cancel)
}

/// A cancel flag that is never raised, for the entry points without one.
pub(crate) static NEVER: AtomicBool = AtomicBool::new(false);

fn cancelled(cancel: &AtomicBool) -> Result<(), OrderError> {
    if cancel.load(Ordering::Relaxed) {
        Err(OrderError::Cancelled)
    } else {
        Ok(())
    }
}

/// [`solve_path`] without validation or the exact branch (inputs are trusted).
pub(crate) fn solve_path_unchecked(
    x: &[f64],
    dim: usize,
    start: Option<usize>,
    end: Option<usize>,
    params: &PathParams,
    cancel: &AtomicBool,
) -> Result<Vec<usize>, OrderError> {
    let (nb, k) = neighbour_lists_with(x, dim, params.neighbours, cancel)?;
    let mut path = match params.start {
        Start::Greedy => greedy_start(x, dim, &nb, k, start, end),
        Start::NearestNeighbour => nearest_neighbour_start(x, dim, start, end),
        Start::SpaceFilling => {
            let mut o: Vec<usize> = space_filling_order(x, dim)
                .into_iter()
                .filter(|&c| Some(c) != start && Some(c) != end)
                .collect();
            if let Some(s) = start {
                o.insert(0, s);
            }
            o.extend(end);
            o
        }
    };
    let fixed = (start.is_some(), end.is_some());
    improve_path(x, dim, &mut path, (&nb, k), fixed, params, cancel);
    cancelled(cancel)?;
    let m = path.len();
    if params.kicks_per_city > 0 && m > 8 {
        let ils = crate::tsp_ils::IlsParams {
            neighbours: params.neighbours,
            kicks: Some(params.kicks_per_city.saturating_mul(m)),
            time_limit: None,
            runs: 1,
            seed: m as u64,
            exact_max: 0,
            ..crate::tsp_ils::IlsParams::default()
        };
        let pts = crate::tsp_ils::Points::new(x, dim)?;
        let control = vastml_core::Control::new(cancel);
        path =
            crate::tsp_ils::solve_cancellable(&pts, start, end, &ils, Some(&path), control)?.order;
    }
    Ok(path)
}

/// Polishes a long open path window by window: the path is cut into consecutive windows of
/// `window` cities, each improved by 2-opt and Or-opt with its end cities fixed (free at the
/// ends of the whole path), in parallel on rayon; a second pass shifts the windows by half a
/// window so that moves across the first cuts are tried. O(n) work for a fixed window.
///
/// # Errors
/// Bad shape or values, `order` not of the right length, `window < 4`, or cancellation.
pub fn polish_windows(
    x: &[f64],
    dim: usize,
    order: &mut [usize],
    window: usize,
    params: &PathParams,
    cancel: Option<&std::sync::atomic::AtomicBool>,
) -> Result<(), OrderError> {
    let n = check_points(x, dim, None, None)?;
    if order.len() != n {
        return Err(OrderError::ShapeMismatch(format!(
            "order of {} cities for {n} points",
            order.len()
        )));
    }
    if window < 4 {
        return Err(invalid("window", "must be at least 4"));
    }
    use rayon::prelude::*;
    let flag = cancel.unwrap_or(&NEVER);
    for offset in [0, window / 2] {
        if offset >= n || cancel.is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed)) {
            break;
        }
        let (head, tail) = order.split_at_mut(offset);
        let work = |(ci, chunk): (usize, &mut [usize]), first: bool, last: bool| {
            let m = chunk.len();
            if m < 4 {
                return;
            }
            let mut buf = Vec::with_capacity(m * dim);
            for &c in chunk.iter() {
                buf.extend_from_slice(&x[c * dim..(c + 1) * dim]);
            }
            let (nb, k) = neighbour_lists(&buf, dim, params.neighbours);
            let mut path: Vec<usize> = (0..m).collect();
            let fix_start = !(first && ci == 0);
            let fix_end = !last;
            improve_path(
                &buf,
                dim,
                &mut path,
                (&nb, k),
                (fix_start, fix_end),
                params,
                flag,
            );
            let old: Vec<usize> = chunk.to_vec();
            for (t, &p) in path.iter().enumerate() {
                chunk[t] = old[p];
            }
        };
        let n_chunks = tail.len().div_ceil(window);
        tail.par_chunks_mut(window)
            .enumerate()
            .for_each(|(ci, ch)| work((ci, ch), offset == 0, ci + 1 == n_chunks));
        if offset > 0 {
            work((0, head), true, false);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_pcg::Pcg64;

    fn uniform(n: usize, dim: usize, seed: u64) -> Vec<f64> {
        let mut rng = Pcg64::seed_from_u64(seed);
        (0..n * dim).map(|_| rng.random::<f64>()).collect()
    }

    fn is_perm(p: &[usize], m: usize) -> bool {
        let mut s = p.to_vec();
        s.sort_unstable();
        s == (0..m).collect::<Vec<_>>()
    }

    /// Brute force over all permutations (the oracle of the oracle).
    fn brute(x: &[f64], dim: usize, start: Option<usize>, end: Option<usize>) -> f64 {
        let m = x.len() / dim;
        let mut best = f64::INFINITY;
        let mut p: Vec<usize> = (0..m).collect();
        fn rec(
            k: usize,
            p: &mut Vec<usize>,
            x: &[f64],
            dim: usize,
            s: Option<usize>,
            e: Option<usize>,
            best: &mut f64,
        ) {
            let m = p.len();
            if k == m {
                if s.is_none_or(|s| p[0] == s) && e.is_none_or(|e| p[m - 1] == e) {
                    *best = best.min(path_length(x, dim, p));
                }
                return;
            }
            for i in k..m {
                p.swap(k, i);
                rec(k + 1, p, x, dim, s, e, best);
                p.swap(k, i);
            }
        }
        rec(0, &mut p, x, dim, start, end, &mut best);
        best
    }

    #[test]
    fn exact_matches_brute_force_with_all_end_rules() {
        for seed in 0..6 {
            let x = uniform(7, 2, seed);
            for (s, e) in [
                (None, None),
                (Some(0), None),
                (None, Some(3)),
                (Some(2), Some(5)),
            ] {
                let p = exact_path(&x, 2, s, e).unwrap();
                assert!(is_perm(&p, 7));
                if let Some(s) = s {
                    assert_eq!(p[0], s);
                }
                if let Some(e) = e {
                    assert_eq!(p[6], e);
                }
                let b = brute(&x, 2, s, e);
                assert!(
                    (path_length(&x, 2, &p) - b).abs() < 1e-9,
                    "{seed} {s:?} {e:?}"
                );
            }
        }
    }

    #[test]
    fn heuristic_is_near_exact_on_small_instances_and_keeps_ends() {
        let params = PathParams {
            exact_max: 0,
            ..PathParams::default()
        };
        let mut worst: f64 = 1.0;
        for seed in 0..20 {
            let x = uniform(11, 2, 100 + seed);
            for (s, e) in [
                (None, None),
                (Some(0), Some(10)),
                (Some(4), None),
                (None, Some(1)),
            ] {
                for start in [Start::Greedy, Start::SpaceFilling, Start::NearestNeighbour] {
                    let pr = PathParams {
                        start,
                        ..params.clone()
                    };
                    let p = solve_path(&x, 2, s, e, &pr).unwrap();
                    assert!(is_perm(&p, 11));
                    if let Some(s) = s {
                        assert_eq!(p[0], s);
                    }
                    if let Some(e) = e {
                        assert_eq!(p[10], e);
                    }
                    let opt = path_length(&x, 2, &exact_path(&x, 2, s, e).unwrap());
                    let r = path_length(&x, 2, &p) / opt;
                    assert!(r >= 1.0 - 1e-12);
                    worst = worst.max(r);
                }
            }
        }
        // 2-opt + Or-opt on 11 cities: every path within 15%, and not all optimal by luck
        assert!(worst < 1.15, "worst ratio {worst}");
    }

    #[test]
    fn two_opt_or_opt_improve_on_the_start_and_are_2opt_local_optima() {
        let x = uniform(2000, 2, 7);
        let params = PathParams::default();
        let (nb, k) = neighbour_lists(&x, 2, params.neighbours);
        let start = greedy_start(&x, 2, &nb, k, None, None);
        assert!(is_perm(&start, 2000));
        let p = solve_path(&x, 2, None, None, &params).unwrap();
        assert!(is_perm(&p, 2000));
        let (l0, l1) = (path_length(&x, 2, &start), path_length(&x, 2, &p));
        assert!(l1 < 0.97 * l0, "{l0} -> {l1}");
        // the random uniform TSP constant: optimal tour ~ 0.7124 sqrt(n A); within 10%
        let bound = 0.7124 * (2000f64).sqrt();
        assert!(l1 < 1.10 * bound, "{l1} vs {bound}");
        // no improving 2-opt move remains among those the pruned neighbour lists reach: for a
        // neighbour b of a with d(a, b) < d(a, succ a), swapping the edges (a, succ a) and
        // (b, succ b) for (a, b) and (succ a, succ b) does not shorten the path
        let mut pos = vec![0; 2000];
        for (i, &c) in p.iter().enumerate() {
            pos[c] = i;
        }
        let mut checked = 0;
        for a in 0..2000 {
            let i = pos[a];
            if i + 1 == 2000 {
                continue;
            }
            let sa = p[i + 1];
            for &b in &nb[a * k..(a + 1) * k] {
                let j = pos[b];
                if j + 1 == 2000 || b == sa || dist(&x, 2, a, b) >= dist(&x, 2, a, sa) {
                    continue;
                }
                let sb = p[j + 1];
                let g = dist(&x, 2, a, sa) + dist(&x, 2, b, sb)
                    - dist(&x, 2, a, b)
                    - dist(&x, 2, sa, sb);
                assert!(g < 1e-9, "improving move left: {g}");
                checked += 1;
            }
        }
        assert!(checked > 100);
    }

    #[test]
    fn brute_and_kd_tree_neighbour_lists_agree() {
        for (m, dim) in [(300usize, 2usize), (500, 10), (3000, 3)] {
            let x = uniform(m, dim, 40 + dim as u64);
            let (nb, k) = neighbour_lists(&x, dim, 6);
            assert_eq!(k, 6);
            // oracle: sort every row's candidates
            for a in (0..m).step_by(7) {
                let mut c: Vec<(f64, usize)> = (0..m)
                    .filter(|&b| b != a)
                    .map(|b| (dist(&x, dim, a, b), b))
                    .collect();
                c.sort_by(|p, q| p.0.total_cmp(&q.0).then(p.1.cmp(&q.1)));
                let want: Vec<usize> = c[..6].iter().map(|p| p.1).collect();
                assert_eq!(
                    &nb[a * 6..(a + 1) * 6],
                    &want[..],
                    "m={m} dim={dim} row {a}"
                );
            }
        }
    }

    #[test]
    fn kicks_never_lengthen_the_local_path_and_keep_its_ends() {
        for seed in 0..4 {
            let x = uniform(300, 3, 70 + seed);
            let base = PathParams::default();
            let kicked = PathParams {
                kicks_per_city: 3,
                ..PathParams::default()
            };
            for (s, e) in [(None, None), (Some(3), Some(200))] {
                let a = solve_path(&x, 3, s, e, &base).unwrap();
                let b = solve_path(&x, 3, s, e, &kicked).unwrap();
                assert!(is_perm(&b, 300));
                assert!(s.is_none() || (a[0], a[299]) == (b[0], b[299]));
                assert!(path_length(&x, 3, &b) <= path_length(&x, 3, &a) + 1e-9);
            }
        }
    }

    #[test]
    fn collinear_points_come_out_sorted() {
        let mut rng = Pcg64::seed_from_u64(3);
        let mut x: Vec<f64> = (0..300).map(|i| i as f64).collect();
        for i in (1..300).rev() {
            let j = rng.random_range(0..=i);
            x.swap(i, j);
        }
        let p = solve_path(&x, 1, None, None, &PathParams::default()).unwrap();
        assert!((path_length(&x, 1, &p) - 299.0).abs() < 1e-9);
    }

    #[test]
    fn bad_input_is_rejected() {
        let p = PathParams::default();
        assert!(solve_path(&[0.0, f64::NAN], 1, None, None, &p).is_err());
        assert!(solve_path(&[0.0, 1.0, 2.0], 2, None, None, &p).is_err());
        assert!(solve_path(&[0.0, 1.0], 1, Some(2), None, &p).is_err());
        assert!(solve_path(&[0.0, 1.0], 1, Some(1), Some(1), &p).is_err());
        assert!(exact_path(&uniform(40, 1, 1), 1, None, None).is_err());
        assert_eq!(
            solve_path(&[], 1, None, None, &p).unwrap(),
            Vec::<usize>::new()
        );
        assert_eq!(solve_path(&[5.0], 1, None, None, &p).unwrap(), vec![0]);
    }

    #[test]
    fn space_filling_orders_are_permutations() {
        for dim in [1, 2, 3, 10] {
            let x = uniform(500, dim, dim as u64);
            assert!(is_perm(&space_filling_order(&x, dim), 500));
        }
    }

    #[test]
    fn a_raised_flag_cancels_solve_path_and_a_lowered_one_changes_nothing() {
        let x = uniform(3000, 2, 5);
        let params = PathParams::default();
        let plain = solve_path(&x, 2, None, None, &params).unwrap();
        let with = solve_path_with(&x, 2, None, None, &params, &AtomicBool::new(false)).unwrap();
        assert_eq!(plain, with);
        let stop = AtomicBool::new(true);
        assert!(matches!(
            solve_path_with(&x, 2, None, None, &params, &stop),
            Err(OrderError::Cancelled)
        ));
    }
}
