//! The search tree of [`crate::knn_graph`]: a kd-tree specialised for all-points kNN
//! queries with large `k` (t-SNE's 90 neighbours) in moderate dimension.
//!
//! Differences from the general [`crate::KdTree`], all for speed of this one query:
//! - each node keeps only its split dimension and the extents of its two children along it
//!   (`left_max`, `right_min`); the distance of a query to a child's cell is updated
//!   incrementally, one coordinate per node (Arya & Mount 1993; as in FLANN/nanoflann),
//!   instead of a full `dim`-wide box distance per visited child;
//! - leaves are stored transposed (coordinate-major) and padded to [`LANES`] points, so the
//!   distances of a query to a whole leaf are one SIMD loop (AVX2 when the CPU has it),
//!   summed in the same order as [`crate::squared_distance`] (bit-identical results);
//! - the `k` best candidates are a sorted array (binary search, insertion only below the
//!   current `k`-th distance), not a binary heap.
//!
//! Pruning is conservative (a cell is skipped only when `shrink` times its lower-bound
//! distance is strictly beyond the current `k`-th distance), so `shrink = 1` is exact,
//! ties included (candidates are ordered by `(squared distance, original index)`).

use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};

/// Points per register block of the leaf distance kernel (leaf blocks are padded to it).
const LANES: usize = 8;

/// Squared distances of `q` to the `mp` points of a transposed leaf block (`dim` rows of
/// `mp` values, `mp` a multiple of [`LANES`]) into `out[..mp]`; each is summed over the
/// coordinates in order, exactly as [`crate::squared_distance`].
#[inline(always)]
fn leaf_distances_impl<const D: usize>(
    block: &[f64],
    mp: usize,
    q: &[f64],
    dim: usize,
    out: &mut [f64],
) {
    let dim = if D == 0 { dim } else { D };
    for pb in (0..mp).step_by(LANES) {
        let mut acc = [0.0f64; LANES];
        for (j, &qj) in q[..dim].iter().enumerate() {
            let xs = &block[j * mp + pb..j * mp + pb + LANES];
            for (a, &x) in acc.iter_mut().zip(xs) {
                let d = x - qj;
                *a += d * d;
            }
        }
        out[pb..pb + LANES].copy_from_slice(&acc);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn leaf_distances_avx2<const D: usize>(
    block: &[f64],
    mp: usize,
    q: &[f64],
    dim: usize,
    out: &mut [f64],
) {
    leaf_distances_impl::<D>(block, mp, q, dim, out);
}

#[inline(always)]
fn leaf_distances<const D: usize>(
    block: &[f64],
    mp: usize,
    q: &[f64],
    dim: usize,
    out: &mut [f64],
    avx2: bool,
) {
    #[cfg(target_arch = "x86_64")]
    {
        if avx2 {
            // SAFETY: `avx2` is true only when the CPU has AVX2 (checked at build time of
            // the tree).
            return unsafe { leaf_distances_avx2::<D>(block, mp, q, dim, out) };
        }
    }
    let _ = avx2;
    leaf_distances_impl::<D>(block, mp, q, dim, out);
}

/// Subtrees at least this large are built with `rayon::join`.
const PAR_BUILD_MIN: usize = 1 << 15;

#[derive(Clone, Copy, Debug)]
struct Node {
    /// First point of this node, in tree order.
    start: u32,
    /// One past the last point, in tree order.
    end: u32,
    /// Index of the right child, or 0 for a leaf (the left child is the next node).
    right: u32,
    /// Split dimension.
    dim: u32,
    /// Leaves: offset of the leaf's transposed, padded block in `KnnTree::points`.
    soa: usize,
    /// Largest coordinate `dim` of the left child.
    left_max: f64,
    /// Smallest coordinate `dim` of the right child.
    right_min: f64,
}

/// A kd-tree over row-major points stored in tree order.
pub(crate) struct KnnTree {
    dim: usize,
    /// Points in tree order, row-major.
    pub(crate) points: Vec<f64>,
    /// `perm[t]` = original index of the point at tree position `t`.
    pub(crate) perm: Vec<u32>,
    nodes: Vec<Node>,
    /// Whether this CPU runs the AVX2 distance kernel.
    avx2: bool,
}

/// The `k` best candidates seen so far, sorted by `(d2, index)`.
pub(crate) struct Best {
    k: usize,
    pub(crate) d2: Vec<f64>,
    pub(crate) idx: Vec<u32>,
    /// Scratch of the leaf distances.
    buf: Vec<f64>,
}

impl Best {
    pub(crate) fn new(k: usize) -> Best {
        Best {
            k,
            d2: Vec::with_capacity(k + 1),
            idx: Vec::with_capacity(k + 1),
            buf: Vec::new(),
        }
    }

    pub(crate) fn clear(&mut self) {
        self.d2.clear();
        self.idx.clear();
    }

    /// The current `k`-th squared distance (infinite while fewer than `k` are held).
    #[inline(always)]
    fn worst(&self) -> f64 {
        if self.d2.len() < self.k {
            f64::INFINITY
        } else {
            self.d2[self.k - 1]
        }
    }

    /// Inserts `(d, i)` if it is among the `k` best and not held yet.
    #[inline(always)]
    pub(crate) fn insert(&mut self, d: f64, i: u32) {
        let len = self.d2.len();
        if len == self.k {
            let (wd, wi) = (self.d2[len - 1], self.idx[len - 1]);
            if d > wd || (d == wd && i >= wi) {
                return;
            }
        }
        // Position: after every candidate ordered before (d, i) (binary search).
        let before = |t: usize| self.d2[t] < d || (self.d2[t] == d && self.idx[t] < i);
        let (mut lo, mut hi) = (0usize, len);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if before(mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo < len && self.d2[lo] == d && self.idx[lo] == i {
            return; // already held
        }
        if len < self.k {
            self.d2.push(0.0);
            self.idx.push(0);
        }
        let last = self.d2.len() - 1;
        self.d2.copy_within(lo..last, lo + 1);
        self.idx.copy_within(lo..last, lo + 1);
        self.d2[lo] = d;
        self.idx[lo] = i;
    }
}

struct Builder<'c> {
    dim: usize,
    leaf: usize,
    /// Raised: subtrees not yet split stay leaves and the caller discards the tree.
    cancel: &'c AtomicBool,
}

/// Subtrees at least this large poll the cancel flag before they are split.
const POLL_BUILD_MIN: usize = 1 << 12;

impl Builder<'_> {
    /// Builds the subtree over `perm` / `rows` (first point at tree position `offset`) into
    /// `nodes` (pre-order, child indices relative to `nodes`).
    fn build(
        &self,
        perm: &mut [u32],
        rows: &mut [f64],
        scratch: (&mut [u32], &mut [f64]),
        offset: usize,
        nodes: &mut Vec<Node>,
    ) {
        let dim = self.dim;
        let m = perm.len();
        let me = nodes.len();
        nodes.push(Node {
            start: offset as u32,
            end: (offset + m) as u32,
            right: 0,
            dim: 0,
            soa: 0,
            left_max: 0.0,
            right_min: 0.0,
        });
        if m <= self.leaf {
            return;
        }
        // Widest dimension of the points' bounding box.
        let mut lo = vec![f64::INFINITY; dim];
        let mut hi = vec![f64::NEG_INFINITY; dim];
        for p in rows.chunks_exact(dim) {
            for ((l, h), &x) in lo.iter_mut().zip(hi.iter_mut()).zip(p) {
                *l = if x < *l { x } else { *l };
                *h = if x > *h { x } else { *h };
            }
        }
        let (mut sd, mut widest) = (0, f64::NEG_INFINITY);
        for (j, (l, h)) in lo.iter().zip(&hi).enumerate() {
            if h - l > widest {
                widest = h - l;
                sd = j;
            }
        }
        if widest <= 0.0 {
            return; // all points coincide
        }
        if m >= POLL_BUILD_MIN && self.cancel.load(AtomicOrdering::Relaxed) {
            return;
        }
        let mid = m / 2;
        let (sp, sr) = scratch;
        // Median of coordinate `sd` (selection on a copy kept in the scratch rows).
        let keys = &mut sr[..m];
        for (key, r) in keys.iter_mut().zip(rows.chunks_exact(dim)) {
            *key = r[sd];
        }
        let (below, &mut median, _) = keys.select_nth_unstable_by(mid, f64::total_cmp);
        let n_less = below.iter().filter(|&&x| x < median).count();
        let mut equal_budget = mid - n_less;
        // One stable pass into the scratch space (the keys there are no longer needed),
        // then back.
        let (mut l, mut r) = (0usize, mid);
        let (mut left_max, mut right_min) = (f64::NEG_INFINITY, f64::INFINITY);
        for (t, &orig) in perm.iter().enumerate() {
            let row = &rows[t * dim..(t + 1) * dim];
            let key = row[sd];
            let take_equal = key == median && equal_budget > 0;
            let go_left = key < median || take_equal;
            equal_budget -= usize::from(take_equal);
            let dest = if go_left {
                left_max = left_max.max(key);
                l += 1;
                l - 1
            } else {
                right_min = right_min.min(key);
                r += 1;
                r - 1
            };
            sp[dest] = orig;
            sr[dest * dim..(dest + 1) * dim].copy_from_slice(row);
        }
        debug_assert!(l == mid && r == m);
        perm.copy_from_slice(sp);
        rows.copy_from_slice(sr);
        nodes[me].dim = sd as u32;
        nodes[me].left_max = left_max;
        nodes[me].right_min = right_min;
        let (pl, pr) = perm.split_at_mut(mid);
        let (rl, rr) = rows.split_at_mut(mid * dim);
        let (spl, spr) = sp.split_at_mut(mid);
        let (srl, srr) = sr.split_at_mut(mid * dim);
        if m >= PAR_BUILD_MIN {
            let (ln, rn) = rayon::join(
                || {
                    let mut v = Vec::new();
                    self.build(pl, rl, (spl, srl), offset, &mut v);
                    v
                },
                || {
                    let mut v = Vec::new();
                    self.build(pr, rr, (spr, srr), offset + mid, &mut v);
                    v
                },
            );
            append_shifted(nodes, ln);
            nodes[me].right = nodes.len() as u32;
            append_shifted(nodes, rn);
        } else {
            self.build(pl, rl, (spl, srl), offset, nodes);
            nodes[me].right = nodes.len() as u32;
            self.build(pr, rr, (spr, srr), offset + mid, nodes);
        }
    }
}

fn append_shifted(nodes: &mut Vec<Node>, sub: Vec<Node>) {
    let shift = nodes.len() as u32;
    nodes.extend(sub.into_iter().map(|mut nd| {
        if nd.right != 0 {
            nd.right += shift;
        }
        nd
    }));
}

/// What stays fixed during one neighbour search: the query point, its own tree position
/// (never reported) and the pruning factor.
#[derive(Clone, Copy)]
struct Query<'q> {
    q: &'q [f64],
    skip: u32,
    shrink: f64,
}

impl KnnTree {
    /// Builds the tree over `points` (row-major `n x dim`, finite, `n < 2^32`) with leaves
    /// of at most `leaf` points (more only where all points coincide).
    /// Returns `None` when `cancel` was raised during the build.
    pub(crate) fn build(
        points: &[f64],
        dim: usize,
        leaf: usize,
        cancel: &AtomicBool,
    ) -> Option<KnnTree> {
        let n = points.len() / dim;
        let mut perm: Vec<u32> = (0..n as u32).collect();
        let mut rows = points.to_vec();
        let mut sp = vec![0u32; n];
        let mut sr = vec![0.0f64; n * dim];
        let mut nodes = Vec::with_capacity(2 * n.div_ceil(leaf.max(1)) + 1);
        Builder {
            dim,
            leaf: leaf.max(1),
            cancel,
        }
        .build(&mut perm, &mut rows, (&mut sp, &mut sr), 0, &mut nodes);
        drop((sp, sr));
        if cancel.load(AtomicOrdering::Relaxed) {
            return None;
        }
        // Leaves transposed (coordinate-major within each leaf) and padded to a multiple of
        // LANES points, for the batched distances.
        let mut total = 0usize;
        for nd in nodes.iter_mut().filter(|nd| nd.right == 0) {
            nd.soa = total;
            total += (nd.end - nd.start).div_ceil(LANES as u32) as usize * LANES * dim;
        }
        let mut soa = vec![0.0f64; total];
        for nd in nodes.iter().filter(|nd| nd.right == 0) {
            let (s, e) = (nd.start as usize, nd.end as usize);
            let mp = (e - s).div_ceil(LANES) * LANES;
            let block = &mut soa[nd.soa..nd.soa + mp * dim];
            for (p, row) in rows[s * dim..e * dim].chunks_exact(dim).enumerate() {
                for (j, &x) in row.iter().enumerate() {
                    block[j * mp + p] = x;
                }
            }
        }
        Some(KnnTree {
            dim,
            points: soa,
            perm,
            nodes,
            avx2: has_avx2(),
        })
    }

    /// The `k` nearest other points of the point at tree position `pos` into `best`
    /// (which may already hold candidates, e.g. the previous query's neighbours, ordered
    /// by `(d2, original index)`; the point itself must not be among them).
    pub(crate) fn search(&self, q: &[f64], pos: usize, shrink: f64, best: &mut Best) {
        match self.dim {
            2 => self.search_impl::<2>(q, pos, shrink, best),
            3 => self.search_impl::<3>(q, pos, shrink, best),
            10 => self.search_impl::<10>(q, pos, shrink, best),
            _ => self.search_impl::<0>(q, pos, shrink, best),
        }
    }

    fn search_impl<const D: usize>(&self, q: &[f64], pos: usize, shrink: f64, best: &mut Best) {
        let dim = if D == 0 { self.dim } else { D };
        let mut off = [0.0f64; 64];
        let mut off_dyn;
        let off: &mut [f64] = if dim <= 64 {
            &mut off[..dim]
        } else {
            off_dyn = vec![0.0; dim];
            &mut off_dyn
        };
        let query = Query {
            q,
            skip: pos as u32,
            shrink,
        };
        self.visit::<D>(0, 0.0, &query, off, best);
    }

    /// Visits node `ni`, whose cell is at squared distance `rd` from the query (`off` the
    /// per-dimension offsets making up `rd`), nearer child first, pruning cells farther than
    /// the current k-th neighbour.
    fn visit<const D: usize>(
        &self,
        ni: usize,
        rd: f64,
        query: &Query,
        off: &mut [f64],
        best: &mut Best,
    ) {
        let Query { q, skip, shrink } = *query;
        let dim = if D == 0 { self.dim } else { D };
        let node = self.nodes[ni];
        if node.right == 0 {
            let (s, e) = (node.start as usize, node.end as usize);
            let m = e - s;
            let mp = m.div_ceil(LANES) * LANES;
            let block = &self.points[node.soa..node.soa + mp * dim];
            let mut buf = std::mem::take(&mut best.buf);
            buf.resize(mp, 0.0);
            leaf_distances::<D>(block, mp, q, dim, &mut buf, self.avx2);
            let mut worst = best.worst();
            for (p, &d) in buf[..m].iter().enumerate() {
                let t = s + p;
                if d <= worst && t as u32 != skip {
                    best.insert(d, self.perm[t]);
                    worst = best.worst();
                }
            }
            best.buf = buf;
            return;
        }
        let sd = node.dim as usize;
        let v = q[sd];
        let lo_gap = v - node.left_max; // > 0: the query is right of the left child
        let hi_gap = node.right_min - v; // > 0: the query is left of the right child
        let (near, far, cut) = if lo_gap < hi_gap {
            // Nearer to the left child.
            (ni + 1, node.right as usize, hi_gap.max(0.0))
        } else {
            (node.right as usize, ni + 1, lo_gap.max(0.0))
        };
        // The near child's cell: the query may also lie outside it along `sd`.
        let near_cut = if near == ni + 1 {
            lo_gap.max(0.0)
        } else {
            hi_gap.max(0.0)
        };
        let old = off[sd];
        let near_off = old.max(near_cut);
        let near_rd = rd + near_off * near_off - old * old;
        if near_rd * shrink <= best.worst() {
            off[sd] = near_off;
            self.visit::<D>(near, near_rd, query, off, best);
            off[sd] = old;
        }
        let far_off = old.max(cut);
        let far_rd = rd + far_off * far_off - old * old;
        if far_rd * shrink <= best.worst() {
            off[sd] = far_off;
            self.visit::<D>(far, far_rd, query, off, best);
            off[sd] = old;
        }
    }
}

/// Visits every point (tree position) of the tree: used by tests.
#[cfg(test)]
impl KnnTree {
    pub(crate) fn leaves_partition(&self) -> bool {
        let mut next = 0u32;
        for nd in &self.nodes {
            if nd.right == 0 {
                if nd.start != next {
                    return false;
                }
                next = nd.end;
            }
        }
        next as usize == self.perm.len()
    }
}

pub(crate) fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::simd_allowed() && std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_tile_the_tree_order_and_blocks_hold_the_points() {
        let (n, dim) = (1000, 3);
        let pts: Vec<f64> = (0..n * dim).map(|i| ((i * 7919) % 1013) as f64).collect();
        let tree = KnnTree::build(&pts, dim, 32, &AtomicBool::new(false)).unwrap();
        assert!(tree.leaves_partition());
        let mut seen = tree.perm.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..n as u32).collect::<Vec<_>>());
        for nd in tree.nodes.iter().filter(|nd| nd.right == 0) {
            let (s, e) = (nd.start as usize, nd.end as usize);
            assert!(e - s <= 32);
            let mp = (e - s).div_ceil(LANES) * LANES;
            for t in s..e {
                let o = tree.perm[t] as usize;
                for j in 0..dim {
                    assert_eq!(tree.points[nd.soa + j * mp + (t - s)], pts[o * dim + j]);
                }
            }
        }
    }
}
