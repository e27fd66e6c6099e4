//! TSP-means (spec §1.3, Algorithms 2 and 3 of the thesis): a binary tree by recursive
//! 2-means on sampled points, the 2^l-ary tree T^l that keeps every l-th level, and
//! breadth-first sweeps that replace each node of the list by its children in the order of a
//! local open-path TSP between the node's left and right neighbours in the list.
//!
//! The tree is built in parallel (`rayon::join`; the result does not depend on the number of
//! threads). Sweeps follow the thesis by default: the left neighbour of a node is the last
//! child already placed for the node before it, so the local problems of a sweep are solved
//! one after another. With `parallel_sweep` every node of a sweep sees its neighbours as they
//! were before the sweep (their centroids), which makes the local problems of one level
//! independent and solves them on rayon (a deviation from the thesis, off by default).
//!
//! ```
//! use vastml_order::{Control, TspMeansParams, tsp_means};
//! // two groups on a line, shuffled
//! let x = [10.0, 0.0, 11.0, 1.0, 12.0, 2.0];
//! let r = tsp_means(&x, 1, &TspMeansParams::default(), Control::none()).unwrap();
//! let sorted: Vec<f64> = r.order.iter().map(|&i| x[i]).collect();
//! assert!(sorted == [0.0, 1.0, 2.0, 10.0, 11.0, 12.0] || sorted == [12.0, 11.0, 10.0, 2.0, 1.0, 0.0]);
//! ```

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use rayon::prelude::*;

use vastml_core::{Control, Halt};

use crate::error::{OrderError, invalid};
use crate::tsp_heuristics::{
    PathParams, check_points, exact_path, path_length, polish_windows, solve_path_unchecked,
};

/// Parameters of [`tsp_means`].
#[derive(Debug, Clone)]
pub struct TspMeansParams {
    /// Subtree depth l (1..=16); `None` = ceil(0.5 log2 n), the thesis's default.
    pub levels: Option<usize>,
    /// Points sampled per node for its 2-means (the thesis uses 100).
    pub sample: usize,
    /// Lloyd iterations of each 2-means (on the sample).
    pub kmeans_iter: usize,
    /// Seed of the sampling.
    pub seed: u64,
    /// Solve the local problems of a sweep in parallel from pre-sweep neighbours.
    pub parallel_sweep: bool,
    /// Local solver settings (exact up to `exact_max` free cities).
    pub path: PathParams,
    /// After the sweeps, polish the order with 2-opt and Or-opt in windows of this many
    /// examples ([`polish_windows`]); 0 = the thesis's plain TSP-means.
    pub polish_window: usize,
}

impl Default for TspMeansParams {
    fn default() -> Self {
        TspMeansParams {
            levels: None,
            sample: 100,
            kmeans_iter: 20,
            seed: 0,
            parallel_sweep: false,
            path: PathParams::default(),
            polish_window: 1000,
        }
    }
}

/// Result of [`tsp_means`].
#[derive(Debug, Clone)]
pub struct TspMeans {
    /// The ordering: a permutation of 0..n.
    pub order: Vec<usize>,
    /// The subtree depth l used.
    pub levels: usize,
    /// Number of 2-means runs (internal nodes of T).
    pub n_kmeans: usize,
    /// Number of local TSPs solved (nodes with at least two children).
    pub n_tsp: usize,
    /// Number of sweeps over the list.
    pub n_sweeps: usize,
    /// Wall-clock seconds of the stages: tree (sampling, 2-means, partition, centroids),
    /// sweeps (all local TSPs), polish.
    pub stage_seconds: [f64; 3],
    /// A progress hook asked to stop: `order` is the coarse order of the last sweep reported
    /// (each unexpanded cluster's rows in tree order) and the polish was skipped.
    pub stopped: bool,
}

/// Default subtree depth: ceil(0.5 log2 n), at least 1.
pub fn default_levels(n: usize) -> usize {
    if n <= 2 {
        1
    } else {
        (0.5 * (n as f64).log2()).ceil().max(1.0) as usize
    }
}

/// Node of the binary tree T: a range of the permutation and the two children.
struct BNode {
    range: Range<usize>,
    centroid: Vec<f64>,
    kids: Option<Box<[BNode; 2]>>,
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[inline]
fn d2(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(p, q)| (p - q) * (p - q)).sum()
}

/// Tree construction. The rows are copied once into `xs` and moved with `perm`, so every
/// node's members are a contiguous block of rows: centroids, samples and the 2-means partition
/// read memory in order instead of jumping through a million-row array.
struct Ctx<'a> {
    dim: usize,
    leaf: usize,
    p: &'a TspMeansParams,
    cancel: Option<&'a AtomicBool>,
}

impl Ctx<'_> {
    fn centroid(&self, rows: &[f64]) -> Vec<f64> {
        let mut c = vec![0.0; self.dim];
        for r in rows.chunks_exact(self.dim) {
            for (s, v) in c.iter_mut().zip(r) {
                *s += v;
            }
        }
        let n = (rows.len() / self.dim).max(1) as f64;
        c.iter_mut().for_each(|s| *s /= n);
        c
    }

    /// 2-means on a sample of the rows; returns the two centres (None if they coincide).
    fn two_means(&self, rows: &[f64], seed: u64) -> Option<[Vec<f64>; 2]> {
        let dim = self.dim;
        let n = rows.len() / dim;
        let row = |i: usize| &rows[i * dim..(i + 1) * dim];
        let mut rng = Pcg64::seed_from_u64(seed);
        let sample: Vec<usize> = if n <= self.p.sample {
            (0..n).collect()
        } else {
            (0..self.p.sample).map(|_| rng.random_range(0..n)).collect()
        };
        // k-means++ seeding
        let c0 = row(sample[rng.random_range(0..sample.len())]).to_vec();
        let w: Vec<f64> = sample.iter().map(|&i| d2(row(i), &c0)).collect();
        let total: f64 = w.iter().sum();
        if total <= 0.0 {
            return None;
        }
        let mut t = rng.random::<f64>() * total;
        let mut pick = sample[sample.len() - 1];
        for (k, &wk) in w.iter().enumerate() {
            if t < wk {
                pick = sample[k];
                break;
            }
            t -= wk;
        }
        let mut c = [c0, row(pick).to_vec()];
        let mut assign = vec![0u8; sample.len()];
        for it in 0..self.p.kmeans_iter.max(1) {
            let mut changed = false;
            for (a, &i) in assign.iter_mut().zip(&sample) {
                let side = u8::from(d2(row(i), &c[1]) < d2(row(i), &c[0]));
                if side != *a || it == 0 {
                    changed |= side != *a;
                    *a = side;
                }
            }
            if it > 0 && !changed {
                break;
            }
            let mut sums = [vec![0.0; dim], vec![0.0; dim]];
            let mut counts = [0usize; 2];
            for (&a, &i) in assign.iter().zip(&sample) {
                counts[a as usize] += 1;
                for (s, v) in sums[a as usize].iter_mut().zip(row(i)) {
                    *s += v;
                }
            }
            for s in 0..2 {
                if counts[s] > 0 {
                    c[s] = sums[s].iter().map(|v| v / counts[s] as f64).collect();
                }
            }
        }
        if d2(&c[0], &c[1]) <= 0.0 {
            None
        } else {
            Some(c)
        }
    }

    /// Splits `perm` (the members, at offset `lo` of the whole permutation) recursively;
    /// `rows` holds their rows in the same order and is permuted along.
    fn build(
        &self,
        perm: &mut [usize],
        rows: &mut [f64],
        lo: usize,
        depth: u64,
        kmeans: &mut usize,
    ) -> BNode {
        let n = perm.len();
        let dim = self.dim;
        let centroid = self.centroid(rows);
        let range = lo..lo + n;
        if n <= self.leaf || self.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
            return BNode {
                range,
                centroid,
                kids: None,
            };
        }
        *kmeans += 1;
        let seed = mix(self.p.seed ^ mix(lo as u64 ^ mix(n as u64 ^ (depth << 48))));
        let mut cut = 0;
        if let Some(c) = self.two_means(rows, seed) {
            // partition: members nearer to c[0] first
            let (mut i, mut j) = (0, n);
            while i < j {
                let r = &rows[i * dim..(i + 1) * dim];
                if d2(r, &c[0]) <= d2(r, &c[1]) {
                    i += 1;
                } else {
                    j -= 1;
                    if i < j {
                        perm.swap(i, j);
                        let (a, b) = rows.split_at_mut(j * dim);
                        a[i * dim..(i + 1) * dim].swap_with_slice(&mut b[..dim]);
                    }
                }
            }
            cut = i;
        }
        if cut == 0 || cut == n {
            // degenerate split (duplicates): halves
            cut = n / 2;
        }
        let (a, b) = perm.split_at_mut(cut);
        let (ra, rb) = rows.split_at_mut(cut * dim);
        let (mut ka, mut kb) = (0, 0);
        let (na, nb) = if n > 4096 {
            rayon::join(
                || self.build(a, ra, lo, depth + 1, &mut ka),
                || self.build(b, rb, lo + cut, depth + 1, &mut kb),
            )
        } else {
            (
                self.build(a, ra, lo, depth + 1, &mut ka),
                self.build(b, rb, lo + cut, depth + 1, &mut kb),
            )
        };
        *kmeans += ka + kb;
        BNode {
            range,
            centroid,
            kids: Some(Box::new([na, nb])),
        }
    }
}

/// Node of T^l: a range of the permutation, its centroid, and its T^l children (none for a
/// leaf, whose children are its examples).
struct TNode {
    range: Range<usize>,
    children: Vec<usize>,
}

/// Descendants of `b` that T^l keeps as its children: nodes `k` levels down, or leaves above.
fn gather<'a>(b: &'a BNode, k: usize, out: &mut Vec<&'a BNode>) {
    match &b.kids {
        Some(kids) if k > 0 => {
            gather(&kids[0], k - 1, out);
            gather(&kids[1], k - 1, out);
        }
        _ => out.push(b),
    }
}

/// Algorithm 2: T^l from T, nodes in `out`, centroids in `cent`; returns the node id.
fn build_tl(b: &BNode, l: usize, out: &mut Vec<TNode>, cent: &mut Vec<f64>) -> usize {
    let id = out.len();
    out.push(TNode {
        range: b.range.clone(),
        children: Vec::new(),
    });
    cent.extend_from_slice(&b.centroid);
    if let Some(kids) = &b.kids {
        let mut desc = Vec::new();
        gather(&kids[0], l - 1, &mut desc);
        gather(&kids[1], l - 1, &mut desc);
        let ids: Vec<usize> = desc.iter().map(|d| build_tl(d, l, out, cent)).collect();
        out[id].children = ids;
    }
    id
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Item {
    Node(usize),
    /// An example, by its position in the permutation.
    Ex(usize),
}

struct Tree {
    /// The rows in permutation order (`xs[p]` is row `perm[p]` of the input).
    xs: Vec<f64>,
    dim: usize,
    perm: Vec<usize>,
    nodes: Vec<TNode>,
    cent: Vec<f64>,
}

impl Tree {
    fn rep(&self, it: Item) -> &[f64] {
        match it {
            Item::Node(z) => &self.cent[z * self.dim..(z + 1) * self.dim],
            Item::Ex(p) => &self.xs[p * self.dim..(p + 1) * self.dim],
        }
    }

    fn children(&self, z: usize) -> Vec<Item> {
        let n = &self.nodes[z];
        if n.children.is_empty() {
            n.range.clone().map(Item::Ex).collect()
        } else {
            n.children.iter().map(|&c| Item::Node(c)).collect()
        }
    }

    /// Children of `z` ordered by the local open-path TSP between `left` and `right`.
    fn expand(
        &self,
        z: usize,
        left: Option<Item>,
        right: Option<Item>,
        params: &PathParams,
    ) -> Result<Vec<Item>, OrderError> {
        let kids = self.children(z);
        if kids.len() <= 1 {
            return Ok(kids);
        }
        let dim = self.dim;
        let mut buf = Vec::with_capacity((kids.len() + 2) * dim);
        if let Some(l) = left {
            buf.extend_from_slice(self.rep(l));
        }
        for &k in &kids {
            buf.extend_from_slice(self.rep(k));
        }
        if let Some(r) = right {
            buf.extend_from_slice(self.rep(r));
        }
        let m = buf.len() / dim;
        let s = left.map(|_| 0);
        let e = right.map(|_| m - 1);
        let off = usize::from(left.is_some());
        let path = if kids.len() <= params.exact_max.min(13) {
            exact_path(&buf, dim, s, e)?
        } else {
            solve_path_unchecked(&buf, dim, s, e, params, &crate::tsp_heuristics::NEVER)?
        };
        Ok(path
            .into_iter()
            .filter(|&c| Some(c) != s && Some(c) != e)
            .map(|c| kids[c - off])
            .collect())
    }
}

/// Orders the rows of `x` (row-major, `dim` columns) by TSP-means.
///
/// `control` is polled throughout; its hook is called after every sweep (iteration `k` =
/// sweep `k`, the objective the open path length of the order so far, the state that order:
/// each unexpanded cluster's rows in tree order) and once more after the polish (iteration
/// `n_sweeps + 1`). A hook that returns `true` ends the fit with the order of that report
/// and [`TspMeans::stopped`] set.
///
/// # Errors
/// Bad shape or non-finite values, `levels` outside 1..=16, `sample < 2`, or cancellation.
pub fn tsp_means(
    x: &[f64],
    dim: usize,
    params: &TspMeansParams,
    control: Control<'_, [usize]>,
) -> Result<TspMeans, OrderError> {
    tsp_means_progress(x, dim, params, control, &mut |_, _| {})
}

/// Progress callback of [`tsp_means_progress`]: the list's clusters as ranges of the
/// permutation, and the permutation.
pub type SweepCallback<'a> = dyn FnMut(&[Range<usize>], &[usize]) + 'a;

/// [`tsp_means`] that also reports the list after every sweep: `on_sweep(clusters, perm)`
/// gets, for every element of the list in order, its range of `perm` (the examples of that
/// cluster or the single example), a coarse-to-fine view of the ordering.
///
/// # Errors
/// As [`tsp_means`].
pub fn tsp_means_progress(
    x: &[f64],
    dim: usize,
    params: &TspMeansParams,
    control: Control<'_, [usize]>,
    on_sweep: &mut SweepCallback<'_>,
) -> Result<TspMeans, OrderError> {
    let cancel = Some(control.cancel_flag());
    let n = check_points(x, dim, None, None)?;
    let levels = params.levels.unwrap_or_else(|| default_levels(n));
    if !(1..=16).contains(&levels) {
        return Err(invalid(
            "levels",
            format!("must be in 1..=16 (local TSPs of up to 2^levels + 2 cities), got {levels}"),
        ));
    }
    if params.sample < 2 {
        return Err(invalid("sample", "must be at least 2"));
    }
    if params.path.neighbours == 0 {
        return Err(invalid("neighbours", "must be at least 1"));
    }
    if n == 0 {
        return Ok(TspMeans {
            order: Vec::new(),
            levels,
            n_kmeans: 0,
            n_tsp: 0,
            n_sweeps: 0,
            stage_seconds: [0.0; 3],
            stopped: false,
        });
    }
    let ctx = Ctx {
        dim,
        leaf: 1 << levels,
        p: params,
        cancel,
    };
    let clock = std::time::Instant::now();
    let mut stage_seconds = [0.0; 3];
    let mut perm: Vec<usize> = (0..n).collect();
    let mut n_kmeans = 0;
    let mut xs = x.to_vec();
    let root = ctx.build(&mut perm, &mut xs, 0, 0, &mut n_kmeans);
    stage_seconds[0] = clock.elapsed().as_secs_f64();
    check_cancel(cancel)?;
    let mut nodes = Vec::new();
    let mut cent = Vec::new();
    build_tl(&root, levels, &mut nodes, &mut cent);
    drop(root);
    let tree = Tree {
        xs,
        dim,
        perm,
        nodes,
        cent,
    };
    let mut list = vec![Item::Node(0)];
    let (mut n_tsp, mut n_sweeps) = (0, 0);
    let mut stopped = false;
    while !stopped && list.iter().any(|it| matches!(it, Item::Node(_))) {
        check_cancel(cancel)?;
        n_sweeps += 1;
        n_tsp += list
            .iter()
            .filter(|it| matches!(it, Item::Node(z) if tree.children(*z).len() > 1))
            .count();
        let mut next = Vec::with_capacity(list.len() * 4);
        if params.parallel_sweep {
            let parts: Vec<Result<Vec<Item>, OrderError>> = (0..list.len())
                .into_par_iter()
                .map(|i| match list[i] {
                    Item::Ex(p) => Ok(vec![Item::Ex(p)]),
                    Item::Node(z) => {
                        if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                            return Err(OrderError::Cancelled);
                        }
                        let left = i.checked_sub(1).map(|j| list[j]);
                        tree.expand(z, left, list.get(i + 1).copied(), &params.path)
                    }
                })
                .collect();
            for p in parts {
                next.extend(p?);
            }
        } else {
            for i in 0..list.len() {
                match list[i] {
                    Item::Ex(p) => next.push(Item::Ex(p)),
                    Item::Node(z) => {
                        if i % 64 == 0 {
                            check_cancel(cancel)?;
                        }
                        let left = next.last().copied();
                        let kids = tree.expand(z, left, list.get(i + 1).copied(), &params.path)?;
                        next.extend(kids);
                    }
                }
            }
        }
        list = next;
        let ranges: Vec<Range<usize>> = list
            .iter()
            .map(|it| match *it {
                Item::Node(z) => tree.nodes[z].range.clone(),
                Item::Ex(p) => p..p + 1,
            })
            .collect();
        on_sweep(&ranges, &tree.perm);
        if control.has_hook() {
            let order = flatten(&ranges, &tree.perm);
            stopped = halted(control.report(n_sweeps, || path_length(x, dim, &order), &order))?;
        }
    }
    stage_seconds[1] = clock.elapsed().as_secs_f64() - stage_seconds[0];
    let ranges: Vec<Range<usize>> = list
        .iter()
        .map(|it| match *it {
            Item::Node(z) => tree.nodes[z].range.clone(),
            Item::Ex(p) => p..p + 1,
        })
        .collect();
    let mut order = flatten(&ranges, &tree.perm);
    if !stopped && params.polish_window >= 4 && n >= 4 {
        polish_windows(
            x,
            dim,
            &mut order,
            params.polish_window,
            &params.path,
            cancel,
        )?;
        check_cancel(cancel)?;
        stage_seconds[2] = clock.elapsed().as_secs_f64() - stage_seconds[0] - stage_seconds[1];
        if control.has_hook() {
            let r = control.report(n_sweeps + 1, || path_length(x, dim, &order), &order);
            stopped = halted(r)?;
        }
    }
    Ok(TspMeans {
        order,
        levels,
        n_kmeans,
        n_tsp,
        n_sweeps,
        stage_seconds,
        stopped,
    })
}

/// The rows of every range of `perm`, in list order: the order a list of clusters stands for.
fn flatten(ranges: &[Range<usize>], perm: &[usize]) -> Vec<usize> {
    ranges
        .iter()
        .flat_map(|r| perm[r.clone()].iter().copied())
        .collect()
}

/// `Ok(true)` when a progress hook asked to stop, `Ok(false)` to go on, an error when cancelled.
pub(crate) fn halted(r: Result<(), Halt>) -> Result<bool, OrderError> {
    match r {
        Ok(()) => Ok(false),
        Err(Halt::Stopped) => Ok(true),
        Err(Halt::Cancelled) => Err(OrderError::Cancelled),
    }
}

fn check_cancel(cancel: Option<&AtomicBool>) -> Result<(), OrderError> {
    if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
        Err(OrderError::Cancelled)
    } else {
        Ok(())
    }
}

/// The list update of Algorithm 3, line 8: replaces `list[at]` by `children` (already in tour
/// order). Used by the sweeps in this form; kept public for the thesis's worked example.
///
/// # Errors
/// `at` out of range.
pub fn splice<T: Copy>(list: &[T], at: usize, children: &[T]) -> Result<Vec<T>, OrderError> {
    if at >= list.len() {
        return Err(invalid(
            "at",
            format!("position {at} out of a list of {}", list.len()),
        ));
    }
    let mut out = Vec::with_capacity(list.len() + children.len());
    out.extend_from_slice(&list[..at]);
    out.extend_from_slice(children);
    out.extend_from_slice(&list[at + 1..]);
    Ok(out)
}

/// The neighbour trick of §1.3 step 4: a closed tour over the children and the left and right
/// neighbours, where the neighbours are adjacent (their distance was set to 0), is cut between
/// them; returns the children in order from the left to the right neighbour.
///
/// # Errors
/// The neighbours are missing from the tour or not adjacent in it.
pub fn cut_closed_tour<T: Copy + PartialEq>(
    tour: &[T],
    left: T,
    right: T,
) -> Result<Vec<T>, OrderError> {
    let m = tour.len();
    let (Some(a), Some(b)) = (
        tour.iter().position(|&t| t == left),
        tour.iter().position(|&t| t == right),
    ) else {
        return Err(invalid("tour", "must contain both neighbours"));
    };
    if (a + 1) % m == b {
        // ... right, left ... reading backwards from left reaches right last
        Ok((1..m - 1).map(|k| tour[(a + m - k) % m]).collect())
    } else if (b + 1) % m == a {
        Ok((1..m - 1).map(|k| tour[(a + k) % m]).collect())
    } else {
        Err(invalid(
            "tour",
            "the neighbours must be adjacent in the tour",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tsp_heuristics::{path_length, solve_path};
    use rand::{RngExt, SeedableRng};
    use rand_pcg::Pcg64;

    fn is_perm(p: &[usize], n: usize) -> bool {
        let mut s = p.to_vec();
        s.sort_unstable();
        s == (0..n).collect::<Vec<_>>()
    }

    fn gauss(rng: &mut Pcg64) -> f64 {
        let (u, v): (f64, f64) = (rng.random(), rng.random());
        (-2.0 * (1.0 - u).ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    /// Four planted blobs (200 each) of identity covariance at `sep` apart, and labels.
    fn blobs(sep: f64, seed: u64) -> (Vec<f64>, Vec<usize>) {
        let mut rng = Pcg64::seed_from_u64(seed);
        let centres = [(0.0, 0.0), (0.0, sep), (sep, 0.0), (sep, sep)];
        let mut x = Vec::new();
        let mut y = Vec::new();
        for (c, &(a, b)) in centres.iter().enumerate() {
            for _ in 0..200 {
                x.push(a + gauss(&mut rng));
                x.push(b + gauss(&mut rng));
                y.push(c);
            }
        }
        (x, y)
    }

    fn fom(order: &[usize], y: &[usize]) -> f64 {
        let c = order.windows(2).filter(|w| y[w[0]] != y[w[1]]).count();
        c as f64 / (order.len() - 1) as f64
    }

    #[test]
    fn worked_example_of_the_thesis() {
        // L = [17, 19, 16, 18, 5, 7, 6]; node 5 has children 10, 22, 23; the local TSP over
        // {18, 10, 22, 23, 7} gives the tour [18, 23, 10, 22, 7]
        let list = [17, 19, 16, 18, 5, 7, 6];
        let kids = cut_closed_tour(&[18, 23, 10, 22, 7], 18, 7).unwrap();
        assert_eq!(kids, vec![23, 10, 22]);
        // the same tour read from any rotation or direction cuts the same way
        assert_eq!(cut_closed_tour(&[22, 7, 18, 23, 10], 18, 7).unwrap(), kids);
        let mut rev = vec![18, 23, 10, 22, 7];
        rev.reverse();
        assert_eq!(cut_closed_tour(&rev, 18, 7).unwrap(), kids);
        assert_eq!(
            splice(&list, 4, &kids).unwrap(),
            vec![17, 19, 16, 18, 23, 10, 22, 7, 6]
        );
        // first step from the root: [1] -> [4, 5, 7, 6]
        assert_eq!(splice(&[1], 0, &[4, 5, 7, 6]).unwrap(), vec![4, 5, 7, 6]);
        assert!(cut_closed_tour(&[18, 10, 23, 7, 22], 18, 7).is_err());
        assert!(splice(&list, 7, &kids).is_err());
    }

    #[test]
    fn outputs_are_permutations_for_small_and_degenerate_inputs() {
        let p = TspMeansParams::default();
        for n in [1usize, 2, 3, 5, 17, 100] {
            let x: Vec<f64> = (0..n * 2).map(|i| ((i * 7919) % 13) as f64).collect();
            let r = tsp_means(&x, 2, &p, Control::none()).unwrap();
            assert!(is_perm(&r.order, n), "n = {n}");
        }
        // duplicates and constant columns
        let x = vec![1.0; 3000];
        let r = tsp_means(
            &x,
            3,
            &TspMeansParams {
                levels: Some(2),
                ..p.clone()
            },
            Control::none(),
        )
        .unwrap();
        assert!(is_perm(&r.order, 1000));
        assert!(
            tsp_means(&[], 2, &p, Control::none())
                .unwrap()
                .order
                .is_empty()
        );
    }

    #[test]
    fn progressive_lists_cover_every_example_once() {
        let (x, _) = blobs(4.5, 1);
        let params = TspMeansParams {
            levels: Some(2),
            ..TspMeansParams::default()
        };
        let mut sweeps = 0;
        let mut last_len = 1;
        let r = tsp_means_progress(&x, 2, &params, Control::none(), &mut |ranges, perm| {
            sweeps += 1;
            let mut seen = vec![0u8; 800];
            for r in ranges {
                for &i in &perm[r.clone()] {
                    seen[i] += 1;
                }
            }
            assert!(seen.iter().all(|&s| s == 1));
            assert!(ranges.len() >= last_len);
            last_len = ranges.len();
        })
        .unwrap();
        assert_eq!(sweeps, r.n_sweeps);
        assert!(r.n_sweeps >= 3);
        assert_eq!(last_len, 800);
    }

    #[test]
    fn small_inputs_are_one_local_tsp() {
        // n <= 2^l: the root is a leaf, so TSP-means is the plain solver
        let mut rng = Pcg64::seed_from_u64(5);
        let x: Vec<f64> = (0..24).map(|_| rng.random::<f64>()).collect();
        let p = TspMeansParams {
            levels: Some(4),
            ..TspMeansParams::default()
        };
        let r = tsp_means(&x, 2, &p, Control::none()).unwrap();
        let opt = exact_path(&x, 2, None, None).unwrap();
        assert!((path_length(&x, 2, &r.order) - path_length(&x, 2, &opt)).abs() < 1e-9);
        // 1-D input of size <= 2^l comes out sorted (exact local solver)
        let x1: Vec<f64> = (0..12).map(|i| ((i * 5) % 12) as f64).collect();
        let r = tsp_means(&x1, 1, &p, Control::none()).unwrap();
        assert!((path_length(&x1, 1, &r.order) - 11.0).abs() < 1e-12);
    }

    #[test]
    fn separated_blobs_are_visited_contiguously() {
        let (x, y) = blobs(50.0, 2);
        for parallel_sweep in [false, true] {
            let p = TspMeansParams {
                parallel_sweep,
                ..TspMeansParams::default()
            };
            let r = tsp_means(&x, 2, &p, Control::none()).unwrap();
            assert!(is_perm(&r.order, 800));
            assert!((fom(&r.order, &y) - 3.0 / 799.0).abs() < 1e-12);
        }
    }

    #[test]
    fn thesis_blobs_fom_and_length_near_two_opt() {
        // thesis Fig 2.4: TSP-means FOM 0.033, L 199.86 vs LK 181.44 (ratio 1.10)
        let (x, y) = blobs(4.5, 3);
        let r = tsp_means(&x, 2, &TspMeansParams::default(), Control::none()).unwrap();
        let two = solve_path(&x, 2, None, None, &PathParams::default()).unwrap();
        let (lt, l2) = (path_length(&x, 2, &r.order), path_length(&x, 2, &two));
        assert!(lt < 1.2 * l2, "TSP-means {lt} vs 2-opt {l2}");
        let (ft, f2) = (fom(&r.order, &y), fom(&two, &y));
        assert!(ft <= 1.2 * f2 + 0.01, "FOM {ft} vs {f2}");
        assert!(ft < 0.06, "FOM {ft}");
    }

    #[test]
    fn circle_is_ordered_along_the_circle() {
        let mut rng = Pcg64::seed_from_u64(9);
        let n = 600;
        let ang: Vec<f64> = (0..n)
            .map(|_| rng.random::<f64>() * std::f64::consts::TAU)
            .collect();
        let x: Vec<f64> = ang.iter().flat_map(|a| [a.cos(), a.sin()]).collect();
        let r = tsp_means(&x, 2, &TspMeansParams::default(), Control::none()).unwrap();
        // angular steps between neighbours: all small except at most one wrap-around
        let big = r
            .order
            .windows(2)
            .filter(|w| {
                let d = (ang[w[0]] - ang[w[1]]).abs();
                d.min(std::f64::consts::TAU - d) > 0.1
            })
            .count();
        assert!(big <= 1, "{big} jumps");
        assert!(path_length(&x, 2, &r.order) < 1.02 * std::f64::consts::TAU);
    }

    #[test]
    fn uniform_square_beats_baselines_and_is_near_two_opt() {
        let mut rng = Pcg64::seed_from_u64(11);
        let n = 5000;
        let x: Vec<f64> = (0..2 * n).map(|_| rng.random::<f64>()).collect();
        for parallel_sweep in [false, true] {
            let p = TspMeansParams {
                parallel_sweep,
                seed: 4,
                ..TspMeansParams::default()
            };
            let r = tsp_means(&x, 2, &p, Control::none()).unwrap();
            assert!(is_perm(&r.order, n));
            let lt = path_length(&x, 2, &r.order);
            let two = solve_path(&x, 2, None, None, &PathParams::default()).unwrap();
            let l2 = path_length(&x, 2, &two);
            let mut by_x: Vec<usize> = (0..n).collect();
            by_x.sort_by(|&a, &b| x[2 * a].total_cmp(&x[2 * b]));
            let lx = path_length(&x, 2, &by_x);
            assert!(lt < lx && lt <= 1.15 * l2, "{lt} vs 2-opt {l2}, sort {lx}");
        }
    }

    #[test]
    fn same_result_on_any_thread_count() {
        let mut rng = Pcg64::seed_from_u64(13);
        let x: Vec<f64> = (0..3 * 20000).map(|_| rng.random::<f64>()).collect();
        let p = TspMeansParams::default();
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
            .install(|| tsp_means(&x, 3, &p, Control::none()).unwrap().order);
        let two = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap()
            .install(|| tsp_means(&x, 3, &p, Control::none()).unwrap().order);
        assert_eq!(one, two);
    }

    #[test]
    fn bad_parameters_and_cancel() {
        let x = [0.0, 1.0, 2.0];
        let bad = |p: TspMeansParams| tsp_means(&x, 1, &p, Control::none()).is_err();
        assert!(bad(TspMeansParams {
            levels: Some(0),
            ..TspMeansParams::default()
        }));
        assert!(bad(TspMeansParams {
            levels: Some(17),
            ..TspMeansParams::default()
        }));
        assert!(bad(TspMeansParams {
            sample: 1,
            ..TspMeansParams::default()
        }));
        assert!(
            tsp_means(
                &[0.0, f64::INFINITY],
                1,
                &TspMeansParams::default(),
                Control::none()
            )
            .is_err()
        );
        let stop = AtomicBool::new(true);
        assert_eq!(
            tsp_means(&x, 1, &TspMeansParams::default(), Control::new(&stop)).unwrap_err(),
            OrderError::Cancelled
        );
    }

    #[test]
    fn the_hook_sees_every_sweep_and_the_polish_and_can_stop_with_a_permutation() {
        let (x, _) = blobs(4.5, 1);
        let n = x.len() / 2;
        let params = TspMeansParams {
            levels: Some(2),
            ..TspMeansParams::default()
        };
        let seen = std::sync::Mutex::new(Vec::new());
        let hook = |it: usize, obj: f64, order: &[usize]| {
            assert!(is_perm(order, n));
            assert!((obj - path_length(&x, 2, order)).abs() < 1e-9);
            seen.lock().unwrap().push(it);
            false
        };
        let full = tsp_means(&x, 2, &params, Control::none().with_hook(&hook, 1)).unwrap();
        let seen = seen.into_inner().unwrap();
        assert_eq!(seen, (1..=full.n_sweeps + 1).collect::<Vec<_>>());
        assert!(!full.stopped);
        let plain = tsp_means(&x, 2, &params, Control::none()).unwrap();
        assert_eq!(plain.order, full.order, "a hook must not change the result");
        let stop = |it: usize, _: f64, _: &[usize]| it >= 1;
        let r = tsp_means(&x, 2, &params, Control::none().with_hook(&stop, 1)).unwrap();
        assert!(r.stopped && r.n_sweeps == 1 && is_perm(&r.order, n));
        assert!(full.n_sweeps > 1);
    }
}
