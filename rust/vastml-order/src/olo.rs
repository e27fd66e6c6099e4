//! Optimal leaf ordering of a dendrogram (Bar-Joseph, Gifford & Jaakkola 2001): among the
//! 2^(n-1) leaf orders a binary tree allows (each internal node may swap its children), the one
//! with the shortest path, the sum of distances between adjacent leaves.
//!
//! M(v; i, j), the shortest path through the leaves of node v that starts at leaf i of one
//! child and ends at leaf j of the other, is
//! `min_{k, h} M(l; i, k) + d(k, h) + M(r; h, j)` over k in the child of l opposite i and h in
//! the child of r opposite j. It is computed in two stages per row i (first over k for every h,
//! then over h for every j) with Bar-Joseph's early termination: candidates are scanned in
//! increasing order of their partial cost and the scan stops when the partial cost plus the
//! smallest possible remainder cannot win. Rows i run in parallel on rayon. Every pair of
//! leaves has exactly one lowest common ancestor, so all M values fit one packed triangle of
//! n (n - 1) / 2 numbers; the path is recovered top-down by re-deriving each argmin.
//!
//! ```
//! use vastml_order::olo::optimal_leaf_order;
//! use vastml_order::tsp_ils::Points;
//! // leaves 0..4 on a line at 0, 10, 1, 11; tree ((0, 2), (1, 3))
//! let x = [0.0, 10.0, 1.0, 11.0];
//! let merges = [[0, 2], [1, 3], [4, 5]];
//! let (order, length) = optimal_leaf_order(&merges, &Points::new(&x, 1).unwrap()).unwrap();
//! assert_eq!(length, 11.0);
//! assert!(order == vec![0, 2, 1, 3] || order == vec![3, 1, 2, 0]);
//! ```

use rayon::prelude::*;

use vastml_core::Control;

use crate::error::{OrderError, invalid};
use crate::tsp_ils::Metric;

/// Tree nodes as ranges of the default leaf order.
struct Tree {
    /// Leaf (object index) at each position of the default (left-first) leaf order.
    leaf_at: Vec<usize>,
    /// For every node id (leaves 0..n, merges n..2n-1): [start, split, end) of its positions.
    range: Vec<(usize, usize, usize)>,
    /// Children of each internal node (by node id).
    kids: Vec<[usize; 2]>,
}

fn build_tree(merges: &[[usize; 2]], n: usize) -> Result<Tree, OrderError> {
    if merges.len() + 1 != n {
        return Err(OrderError::ShapeMismatch(format!(
            "{} merges for {n} leaves (need n - 1)",
            merges.len()
        )));
    }
    let mut used = vec![false; 2 * n - 1];
    for (t, &[a, b]) in merges.iter().enumerate() {
        for c in [a, b] {
            if c >= n + t || std::mem::replace(&mut used[c], true) {
                return Err(invalid(
                    "linkage",
                    format!("merge {t} uses node {c}, which is not available"),
                ));
            }
        }
        if a == b {
            return Err(invalid(
                "linkage",
                format!("merge {t} joins node {a} with itself"),
            ));
        }
    }
    let size = {
        let mut s = vec![1usize; 2 * n - 1];
        for (t, &[a, b]) in merges.iter().enumerate() {
            s[n + t] = s[a] + s[b];
        }
        s
    };
    let mut range = vec![(0, 0, 0); 2 * n - 1];
    let mut leaf_at = vec![0; n];
    let root = 2 * n - 2;
    range[root] = (0, 0, n);
    let mut stack = vec![root];
    while let Some(v) = stack.pop() {
        let (s, _, e) = range[v];
        if v < n {
            leaf_at[s] = v;
            range[v] = (s, s, e);
            continue;
        }
        let [a, b] = merges[v - n];
        let m = s + size[a];
        range[v] = (s, m, e);
        range[a] = (s, 0, m);
        range[b] = (m, 0, e);
        stack.push(a);
        stack.push(b);
    }
    Ok(Tree {
        leaf_at,
        range,
        kids: merges.to_vec(),
    })
}

/// Packed upper triangle of an n x n symmetric matrix without diagonal.
struct Tri {
    n: usize,
    v: Vec<f64>,
}

impl Tri {
    #[inline]
    fn idx(&self, i: usize, j: usize) -> usize {
        let (a, b) = if i < j { (i, j) } else { (j, i) };
        a * (2 * self.n - a - 1) / 2 + (b - a - 1)
    }
    #[inline]
    fn get(&self, i: usize, j: usize) -> f64 {
        if i == j { 0.0 } else { self.v[self.idx(i, j)] }
    }
}

/// The side ranges of a child: the positions opposite to position `i` inside child `c`
/// (the whole child when it is a leaf).
fn opposite(tree: &Tree, c: usize, n: usize, i: usize) -> (usize, usize) {
    let (s, m, e) = tree.range[c];
    if c < n {
        (s, e)
    } else if i < m {
        (m, e)
    } else {
        (s, m)
    }
}

/// Optimal leaf order of the dendrogram given by `merges` (SciPy linkage rows: node `n + t`
/// joins `merges[t][0]` and `merges[t][1]`) for the distances of `m`. Returns the order of the
/// objects and its path length.
///
/// # Errors
/// A linkage that is not a binary tree over the objects of `m`, or too many objects for
/// memory (n (n - 1) / 2 numbers are stored).
pub fn optimal_leaf_order<M: Metric>(
    merges: &[[usize; 2]],
    m: &M,
) -> Result<(Vec<usize>, f64), OrderError> {
    optimal_leaf_order_with(merges, m, Control::none())
}

/// [`optimal_leaf_order`] polling `control`'s cancel flag at every node of the tree and every
/// row of a node's table (O(n^2) work at most between two polls), so that Ctrl-C stops the
/// O(n^3) worst case.
///
/// # Errors
/// As [`optimal_leaf_order`], and [`OrderError::Cancelled`] when the flag is raised.
pub fn optimal_leaf_order_with<M: Metric>(
    merges: &[[usize; 2]],
    m: &M,
    control: Control<'_>,
) -> Result<(Vec<usize>, f64), OrderError> {
    let cancelled = |_| OrderError::Cancelled;
    let n = m.len();
    if n == 0 {
        return Ok((Vec::new(), 0.0));
    }
    if n == 1 {
        return Ok((vec![0], 0.0));
    }
    let tree = build_tree(merges, n)?;
    // distances and M in position space
    let la = &tree.leaf_at;
    let d = |p: usize, q: usize| m.d(la[p], la[q]);
    let len = n * (n - 1) / 2;
    let mut store = Vec::new();
    store
        .try_reserve_exact(len)
        .map_err(|_| invalid("X", format!("{n} objects need {len} stored values")))?;
    store.resize(len, f64::INFINITY);
    let mut tri = Tri { n, v: store };
    for v in n..2 * n - 1 {
        control.check().map_err(cancelled)?;
        let [a, b] = tree.kids[v - n];
        let (s, mid, e) = tree.range[v];
        // both orientations: rows i in the left child (cols in the right) and vice versa; by
        // symmetry M(i, j) = M(j, i), so rows over the left child suffice
        let (l, r) = if tree.range[a].0 == s { (a, b) } else { (b, a) };
        let _ = (mid, e);
        let (ls, le) = (tree.range[l].0, tree.range[l].2);
        let (rs, re) = (tree.range[r].0, tree.range[r].2);
        let nr = re - rs;
        // the node's distance block d(k, h), k in l, h in r, goes into the slots M(k, h) will
        // take (unused until this node is done); row k of the block is contiguous there
        let block: Vec<Vec<f64>> = (ls..le)
            .into_par_iter()
            .map(|k| (rs..re).map(|h| d(k, h)).collect())
            .collect();
        for (kk, row) in block.into_iter().enumerate() {
            let at = tri.idx(ls + kk, rs);
            tri.v[at..at + nr].copy_from_slice(&row);
        }
        // per h, the smallest distance to each side of l (Bar-Joseph's bound for stage 1)
        let sides: Vec<(usize, usize)> = if l < n {
            vec![(ls, le)]
        } else {
            let lm = tree.range[l].1;
            vec![(ls, lm), (lm, le)]
        };
        let dmin: Vec<Vec<f64>> = sides
            .iter()
            .map(|&(a, b)| {
                (rs..re)
                    .map(|h| {
                        (a..b)
                            .map(|k| tri.v[tri.idx(k, h)])
                            .fold(f64::INFINITY, f64::min)
                    })
                    .collect()
            })
            .collect();
        // the two candidate sets for h (opposite sides within r) and, per j, the smallest
        // M(h, j) over its h set
        let mmin: Vec<f64> = (rs..re)
            .map(|j| {
                let (hs, he) = opposite(&tree, r, n, j);
                (hs..he)
                    .map(|h| tri.get(h, j))
                    .fold(f64::INFINITY, f64::min)
            })
            .collect();
        let tri_ref = &tri;
        let rows: Vec<Vec<f64>> = (ls..le)
            .into_par_iter()
            .map(|i| {
                if control.is_cancelled() {
                    return Vec::new();
                }
                let (ks, ke) = opposite(&tree, l, n, i);
                let dm = &dmin[usize::from(sides.len() == 2 && ks != ls)];
                // stage 1: T(h) = min_k M(i, k) + d(k, h), k by increasing M(i, k)
                let mut ks_sorted: Vec<(f64, usize)> = (ks..ke)
                    .map(|k| (tri_ref.get(i, k), tri_ref.idx(k, rs)))
                    .collect();
                ks_sorted.sort_unstable_by(|p, q| p.0.total_cmp(&q.0));
                let mut t = vec![f64::INFINITY; nr];
                for (hh, th) in t.iter_mut().enumerate() {
                    let lb = dm[hh];
                    for &(mik, row_at) in &ks_sorted {
                        if mik + lb >= *th {
                            break;
                        }
                        let c = mik + tri_ref.v[row_at + hh];
                        if c < *th {
                            *th = c;
                        }
                    }
                }
                // stage 2: M(i, j) = min_h T(h) + M(h, j), h by increasing T(h)
                let mut hs_sorted: Vec<(f64, usize)> =
                    t.iter().enumerate().map(|(hh, &x)| (x, rs + hh)).collect();
                hs_sorted.sort_unstable_by(|p, q| p.0.total_cmp(&q.0));
                (rs..re)
                    .map(|j| {
                        let (hs, he) = opposite(&tree, r, n, j);
                        let lb = mmin[j - rs];
                        let mut best = f64::INFINITY;
                        for &(th, h) in &hs_sorted {
                            if th + lb >= best {
                                break;
                            }
                            if h < hs || h >= he {
                                continue;
                            }
                            let c = th + tri_ref.get(h, j);
                            if c < best {
                                best = c;
                            }
                        }
                        best
                    })
                    .collect()
            })
            .collect();
        control.check().map_err(cancelled)?;
        for (ii, row) in rows.into_iter().enumerate() {
            let at = tri.idx(ls + ii, rs);
            tri.v[at..at + nr].copy_from_slice(&row);
        }
    }
    // best ends at the root
    let root = 2 * n - 2;
    let [a, b] = tree.kids[root - n];
    let (l, r) = if tree.range[a].0 == 0 { (a, b) } else { (b, a) };
    let (mut bi, mut bj, mut best) = (0, 0, f64::INFINITY);
    for i in tree.range[l].0..tree.range[l].2 {
        for j in tree.range[r].0..tree.range[r].2 {
            let c = tri.get(i, j);
            if c < best {
                (bi, bj, best) = (i, j, c);
            }
        }
    }
    control.check().map_err(cancelled)?;
    let mut out = Vec::with_capacity(n);
    let trace = Trace {
        tree: &tree,
        tri: &tri,
        d: &d,
        n,
    };
    trace.path(root, bi, bj, &mut out);
    let order: Vec<usize> = out.into_iter().map(|p| la[p]).collect();
    let length = order.windows(2).map(|w| m.d(w[0], w[1])).sum();
    Ok((order, length))
}

/// What [`Trace::path`] reads: the dendrogram, the table of optimal path costs, the
/// dissimilarity and the number of leaves.
struct Trace<'a> {
    tree: &'a Tree,
    tri: &'a Tri,
    d: &'a dyn Fn(usize, usize) -> f64,
    n: usize,
}

impl Trace<'_> {
    /// Appends the positions of the optimal path of node `v` from position `i` to position `j`.
    fn path(&self, v: usize, i: usize, j: usize, out: &mut Vec<usize>) {
        let Trace { tree, tri, d, n } = *self;
        if v < n {
            out.push(i);
            return;
        }
        let (_, mid, _) = tree.range[v];
        if i >= mid {
            // i in the right part: trace j -> i and reverse that piece
            let at = out.len();
            self.path(v, j, i, out);
            out[at..].reverse();
            return;
        }
        let [a, b] = tree.kids[v - n];
        let (l, r) = if tree.range[a].0 == tree.range[v].0 {
            (a, b)
        } else {
            (b, a)
        };
        let (ks, ke) = opposite(tree, l, n, i);
        let (hs, he) = opposite(tree, r, n, j);
        let target = tri.get(i, j);
        let (mut bk, mut bh, mut best) = (ks, hs, f64::INFINITY);
        for k in ks..ke {
            let mik = tri.get(i, k);
            for h in hs..he {
                let c = mik + d(k, h) + tri.get(h, j);
                if c < best {
                    (bk, bh, best) = (k, h, c);
                }
            }
        }
        debug_assert!((best - target).abs() <= 1e-9 * target.abs().max(1.0));
        self.path(l, i, bk, out);
        self.path(r, bh, j, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tsp_ils::{Dense, Points};
    use rand::{RngExt, SeedableRng};
    use rand_pcg::Pcg64;

    /// All 2^(n-1) flip patterns of the tree: the oracle.
    fn brute(merges: &[[usize; 2]], m: &dyn Fn(usize, usize) -> f64, n: usize) -> f64 {
        fn leaves(merges: &[[usize; 2]], n: usize, v: usize, flips: u64, out: &mut Vec<usize>) {
            if v < n {
                out.push(v);
                return;
            }
            let [a, b] = merges[v - n];
            let (a, b) = if flips >> (v - n) & 1 == 1 {
                (b, a)
            } else {
                (a, b)
            };
            leaves(merges, n, a, flips, out);
            leaves(merges, n, b, flips, out);
        }
        let mut best = f64::INFINITY;
        for flips in 0..(1u64 << (n - 1)) {
            let mut o = Vec::new();
            leaves(merges, n, 2 * n - 2, flips, &mut o);
            let l: f64 = o.windows(2).map(|w| m(w[0], w[1])).sum();
            best = best.min(l);
        }
        best
    }

    fn random_tree(n: usize, rng: &mut Pcg64) -> Vec<[usize; 2]> {
        let mut avail: Vec<usize> = (0..n).collect();
        let mut merges = Vec::new();
        for t in 0..n - 1 {
            let i = rng.random_range(0..avail.len());
            let a = avail.swap_remove(i);
            let j = rng.random_range(0..avail.len());
            let b = avail.swap_remove(j);
            merges.push([a, b]);
            avail.push(n + t);
        }
        merges
    }

    #[test]
    fn equals_exhaustive_flips_on_random_trees() {
        let mut rng = Pcg64::seed_from_u64(5);
        for n in [2usize, 3, 5, 8, 11, 13] {
            for _ in 0..6 {
                let x: Vec<f64> = (0..n * 3).map(|_| rng.random::<f64>()).collect();
                let merges = random_tree(n, &mut rng);
                let p = Points::new(&x, 3).unwrap();
                let (o, l) = optimal_leaf_order(&merges, &p).unwrap();
                let mut s = o.clone();
                s.sort_unstable();
                assert_eq!(s, (0..n).collect::<Vec<_>>());
                let want = brute(&merges, &|a, b| p.d(a, b), n);
                assert!((l - want).abs() < 1e-9, "n={n}: {l} vs {want}");
            }
        }
    }

    #[test]
    fn dense_and_points_agree() {
        let mut rng = Pcg64::seed_from_u64(6);
        let n = 200;
        let x: Vec<f64> = (0..n * 2).map(|_| rng.random::<f64>()).collect();
        let p = Points::new(&x, 2).unwrap();
        let d: Vec<f64> = (0..n * n).map(|i| p.d(i / n, i % n)).collect();
        let merges = random_tree(n, &mut rng);
        let a = optimal_leaf_order(&merges, &p).unwrap();
        let b = optimal_leaf_order(&merges, &Dense::new(&d, n).unwrap()).unwrap();
        assert_eq!(a.0, b.0);
    }

    /// Points whose distance function raises a cancel flag after `after` calls: a flag raised
    /// in the middle of the work, not only before it.
    struct Tripwire<'a> {
        points: Points<'a>,
        calls: std::sync::atomic::AtomicUsize,
        after: usize,
        flag: &'a std::sync::atomic::AtomicBool,
    }

    impl Metric for Tripwire<'_> {
        fn len(&self) -> usize {
            self.points.len()
        }
        fn d(&self, a: usize, b: usize) -> f64 {
            use std::sync::atomic::Ordering::Relaxed;
            if self.calls.fetch_add(1, Relaxed) == self.after {
                self.flag.store(true, Relaxed);
            }
            self.points.d(a, b)
        }
        fn neighbours(&self, k: usize) -> (Vec<usize>, usize) {
            self.points.neighbours(k)
        }
    }

    #[test]
    fn a_cancel_flag_raised_midway_stops_it() {
        use std::sync::atomic::{AtomicBool, AtomicUsize};
        let mut rng = Pcg64::seed_from_u64(7);
        let n = 300;
        let x: Vec<f64> = (0..n * 2).map(|_| rng.random::<f64>()).collect();
        let merges = random_tree(n, &mut rng);
        let flag = AtomicBool::new(false);
        let m = Tripwire {
            points: Points::new(&x, 2).unwrap(),
            calls: AtomicUsize::new(0),
            after: n * n / 8,
            flag: &flag,
        };
        let e = optimal_leaf_order_with(&merges, &m, Control::new(&flag)).unwrap_err();
        assert_eq!(e, OrderError::Cancelled);
        // a flag that is never raised changes nothing
        let p = Points::new(&x, 2).unwrap();
        let lowered = AtomicBool::new(false);
        let a = optimal_leaf_order_with(&merges, &p, Control::new(&lowered)).unwrap();
        assert_eq!(a, optimal_leaf_order(&merges, &p).unwrap());
    }

    #[test]
    fn bad_linkage_is_rejected() {
        let x = [0.0, 1.0, 2.0];
        let p = Points::new(&x, 1).unwrap();
        assert!(optimal_leaf_order(&[[0, 1]], &p).is_err());
        assert!(optimal_leaf_order(&[[0, 1], [1, 2]], &p).is_err());
        assert!(optimal_leaf_order(&[[0, 5], [1, 2]], &p).is_err());
    }
}
