//! A static kd-tree over row-major points: fixed-radius search, k nearest neighbours and
//! leaf-range access for blocked (vectorised) evaluation.
//!
//! Layout: a flat pre-order node array (the left child of node `i` is `i + 1`), one tight
//! axis-aligned bounding box per node, and a copy of the points reordered so that every node owns
//! a contiguous range `start..end` of that copy. Splits are at the median of the dimension in
//! which a sample of the node's points is widest, so the depth is at most `ceil(log2(n))` and
//! queries can use a fixed-size stack (no allocation per radius query).

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering as MemoryOrdering};

use crate::distance::sq_dist_fixed;
use crate::validate::{validate_points, validate_query, validate_radius};
use crate::{Result, SpatialError};

/// A leaf size that works well for low-dimensional data.
pub const DEFAULT_LEAF_SIZE: usize = 16;

/// Capacity of the traversal stacks. Median splits bound the depth by `ceil(log2(n)) <= 64`,
/// and a depth-first traversal never holds more than `depth + 1` pending nodes.
const STACK_CAP: usize = 128;

/// Subtrees at least this large are built with `rayon::join` (on a thread of a rayon pool).
const PAR_BUILD_MIN: usize = 1 << 12;

/// Up to this size the coordinates are read in place during a build (see `Builder::cols`).
const IN_PLACE_BYTES: usize = 256 * 1024;

/// Points sampled from a node to choose its split dimension.
const SPLIT_SAMPLE: usize = 16;

/// Subtrees at least this large poll the cancel flag before they are split (the split is
/// O(size) work, so no more than a few milliseconds pass between two polls).
const POLL_BUILD_MIN: usize = 1 << 12;

/// `Node::right` value that marks a leaf (the root, index 0, is never a right child).
const LEAF: usize = 0;

#[derive(Clone, Copy, Debug)]
struct Node {
    /// First point of this node, in tree order.
    start: usize,
    /// One past the last point of this node, in tree order.
    end: usize,
    /// Index of the right child, or [`LEAF`]. The left child is always `self_index + 1`.
    right: usize,
    /// The coordinate the node splits on (0 for a leaf).
    split: usize,
}

/// A static kd-tree over `n` points in `dim` dimensions.
///
/// The tree owns a reordered copy of the points, so it does not borrow the input. It is `Send +
/// Sync`; all queries take `&self` and can run from many threads at once.
///
/// Distances are compared as squared distances computed exactly like
/// [`squared_distance`](crate::squared_distance), and box pruning is conservative in floating
/// point, so the radius queries return exactly the points a brute-force filter
/// `squared_distance(p, q) <= radius * radius` would return.
///
/// ```
/// use vastml_spatial::KdTree;
///
/// let pts = [0.0, 0.0, 1.0, 0.0, 0.0, 2.0, 5.0, 5.0]; // four 2-D points
/// let tree = KdTree::build(&pts, 2, 16)?;
/// let mut hits = Vec::new();
/// tree.within_radius(&[0.0, 0.0], 1.5, &mut hits)?;
/// hits.sort_by_key(|h| h.0);
/// assert_eq!(hits, vec![(0, 0.0), (1, 1.0)]);
/// assert_eq!(tree.nearest(&[4.0, 4.0], 1)?, vec![(3, 2.0)]);
/// # Ok::<(), vastml_spatial::SpatialError>(())
/// ```
#[derive(Clone)]
pub struct KdTree {
    dim: usize,
    leaf_size: usize,
    /// Points in tree order, row-major.
    points: Vec<f64>,
    /// `perm[i]` = original index of the `i`-th point in tree order.
    perm: Vec<usize>,
    /// Pre-order node array; `nodes[0]` is the root.
    nodes: Vec<Node>,
    /// Per node `2 * dim` values: the box minimum corner, then the maximum corner.
    bounds: Vec<f64>,
}

impl std::fmt::Debug for KdTree {
    /// A summary (the point data can be millions of values).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KdTree")
            .field("len", &self.len())
            .field("dim", &self.dim)
            .field("leaf_size", &self.leaf_size)
            .field("n_nodes", &self.nodes.len())
            .finish_non_exhaustive()
    }
}

/// Parameters shared by the recursive build.
struct Builder<'c> {
    dim: usize,
    leaf_size: usize,
    /// The coordinates: coordinate `k` of point `i` is `cols[i * point_stride + k *
    /// coord_stride]`. Large sets are transposed (`point_stride` 1), so one coordinate of all
    /// points is a compact array that stays in cache while a level reads it in the order of
    /// the points' indices; sets that fit in the L2 cache are read in place (`coord_stride`
    /// 1), as the transposition cost more than it saved (a fifth of a build in 10-D).
    cols: &'c [f64],
    point_stride: usize,
    coord_stride: usize,
    /// Raised: every subtree not yet split stays a leaf and the caller discards the tree.
    cancel: &'c AtomicBool,
    /// Whether large subtrees are built in parallel: only on a thread of a rayon pool (a
    /// build called elsewhere, such as inline on a caller's thread, would otherwise start and
    /// use rayon's global pool, whatever number of threads the caller asked for).
    parallel: bool,
}

/// The mutable state of one subtree under construction: the original indices of its points,
/// scratch space as long, and selection space for the median.
///
/// Only indices move during the build. A split writes the children's indices into the scratch
/// space; the children then use this node's indices as their scratch, so no level copies
/// anything back, and the children's slices are disjoint (subtrees can be built in parallel).
struct Work<'w> {
    perm: &'w mut [usize],
    scratch_perm: &'w mut [usize],
    keys: &'w mut [f64],
    /// Whether `perm` is the build's scratch array (and `scratch_perm` the final one).
    swapped: bool,
}

impl Builder<'_> {
    /// Coordinate `k` of every `stride`-th point of `perm`, in that order.
    fn coordinate<'p>(
        &'p self,
        perm: &'p [usize],
        k: usize,
        stride: usize,
    ) -> impl Iterator<Item = f64> + 'p {
        let (cols, ps) = (&self.cols[k * self.coord_stride..], self.point_stride);
        // positions stepped over a range (`step_by` on the slice's iterator folds through
        // `nth`, a quarter of a small build)
        (0..perm.len())
            .step_by(stride)
            .map(move |j| cols[perm[j] * ps])
    }

    /// Makes `work` a leaf: writes its indices to the final permutation array. (The boxes are
    /// made once the points are in tree order, see [`tight_boxes`].)
    fn finish_leaf(&self, work: Work<'_>) {
        if work.swapped {
            work.scratch_perm.copy_from_slice(work.perm);
        }
    }

    /// Builds the subtree over `work` (whose first point sits at tree position `offset`),
    /// appending its nodes in pre-order. Child indices are relative to `nodes`. On return the
    /// subtree's range of the final permutation is in tree order.
    fn build(&self, work: Work<'_>, offset: usize, nodes: &mut Vec<Node>) {
        let dim = self.dim;
        let m = work.perm.len();
        let me = nodes.len();
        nodes.push(Node {
            start: offset,
            end: offset + m,
            right: LEAF,
            split: 0,
        });
        if m <= self.leaf_size {
            self.finish_leaf(work);
            return;
        }
        // The split dimension is the widest of a sample's bounding box (tight boxes are made
        // bottom-up, from the leaves). A sample without spread falls back to all the points.
        let stride = (m / SPLIT_SAMPLE).max(1);
        let widest = |stride: usize| {
            (0..dim)
                .map(|k| {
                    let (lo, hi) = min_max(self.coordinate(work.perm, k, stride));
                    (hi - lo, k)
                })
                .fold((f64::NEG_INFINITY, 0), |a, b| if b.0 > a.0 { b } else { a })
        };
        let (mut width, mut split_dim) = widest(stride);
        if width <= 0.0 && stride > 1 {
            (width, split_dim) = widest(1);
        }
        if width <= 0.0 || (m >= POLL_BUILD_MIN && self.cancel.load(MemoryOrdering::Relaxed)) {
            // All points coincide (splitting could not prune anything), or cancelled.
            self.finish_leaf(work);
            return;
        }
        let mid = m / 2;
        let (left, right) = self.median_split(work, split_dim, mid);
        let right_index = if m >= PAR_BUILD_MIN && self.parallel {
            let (ln, rn) = rayon::join(
                || self.build_owned(left, offset),
                || self.build_owned(right, offset + mid),
            );
            append_shifted(nodes, ln);
            let right_index = nodes.len();
            append_shifted(nodes, rn);
            right_index
        } else {
            self.build(left, offset, nodes);
            let right_index = nodes.len();
            self.build(right, offset + mid, nodes);
            right_index
        };
        nodes[me].right = right_index;
        nodes[me].split = split_dim;
    }

    /// Builds a subtree into fresh vectors (child indices relative to the returned vector).
    fn build_owned(&self, work: Work<'_>, offset: usize) -> Vec<Node> {
        let cap = 2 * work.perm.len().div_ceil(self.leaf_size);
        let mut nodes = Vec::with_capacity(cap);
        self.build(work, offset, &mut nodes);
        nodes
    }

    /// Splits `work` into the first `mid` points by coordinate `split_dim` and the rest: the
    /// left points are those below the median plus just enough equal to it, and both sides
    /// keep their order (a stable partition, written to the scratch space in one pass). The
    /// median is found by a selection on a copy of that coordinate.
    fn median_split<'w>(
        &self,
        work: Work<'w>,
        split_dim: usize,
        mid: usize,
    ) -> (Work<'w>, Work<'w>) {
        let m = work.perm.len();
        for (key, x) in work
            .keys
            .iter_mut()
            .zip(self.coordinate(work.perm, split_dim, 1))
        {
            *key = x;
        }
        let (below, &mut median, _) = work.keys.select_nth_unstable_by(mid, f64::total_cmp);
        // Every key `< median` is among the first `mid` after the selection, and at least
        // `mid + 1 - n_less` keys equal the median, so exactly `mid` points go left.
        let n_less = below.iter().filter(|&&k| k < median).count();
        let mut equal_budget = mid - n_less;
        let (mut l, mut r) = (0usize, mid);
        let (col, ps) = (
            &self.cols[split_dim * self.coord_stride..],
            self.point_stride,
        );
        for &i in work.perm.iter() {
            let key = col[i * ps];
            let take_equal = (key == median) & (equal_budget > 0);
            let go_left = (key < median) | take_equal;
            equal_budget -= usize::from(take_equal);
            work.scratch_perm[if go_left { l } else { r }] = i;
            l += usize::from(go_left);
            r += usize::from(!go_left);
        }
        debug_assert!(l == mid && r == m);
        let (perm_l, perm_r) = work.scratch_perm.split_at_mut(mid);
        let (sp_l, sp_r) = work.perm.split_at_mut(mid);
        let (keys_l, keys_r) = work.keys.split_at_mut(mid);
        let swapped = !work.swapped;
        (
            Work {
                perm: perm_l,
                scratch_perm: sp_l,
                keys: keys_l,
                swapped,
            },
            Work {
                perm: perm_r,
                scratch_perm: sp_r,
                keys: keys_r,
                swapped,
            },
        )
    }
}

/// The smallest and largest value (inputs are finite).
fn min_max(xs: impl Iterator<Item = f64>) -> (f64, f64) {
    xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
        (if x < lo { x } else { lo }, if x > hi { x } else { hi })
    })
}

/// Appends a subtree built into a separate vector, shifting its child indices.
fn append_shifted(nodes: &mut Vec<Node>, sub: Vec<Node>) {
    let shift = nodes.len();
    nodes.extend(sub.into_iter().map(|mut node| {
        if node.right != LEAF {
            node.right += shift;
        }
        node
    }));
}

/// The tight box of every node (`lo` then `hi`, node by node): a leaf's from its rows of the
/// points in tree order, read in order (gathered through the permutation, coordinate by
/// coordinate, they were a fifth of a build in 10-D), and an inner node's from its children's.
/// The nodes are in pre-order, so in reverse every child comes before its parent.
fn tight_boxes(nodes: &[Node], points: &[f64], dim: usize) -> Vec<f64> {
    let mut bounds = vec![0.0; nodes.len() * 2 * dim];
    for (ni, node) in nodes.iter().enumerate().rev() {
        let (done, rest) = bounds.split_at_mut((ni + 1) * 2 * dim);
        let (lo, hi) = done[ni * 2 * dim..].split_at_mut(dim);
        if node.right == LEAF {
            lo.fill(f64::INFINITY);
            hi.fill(f64::NEG_INFINITY);
            for p in points[node.start * dim..node.end * dim].chunks_exact(dim) {
                for ((l, h), &x) in lo.iter_mut().zip(hi.iter_mut()).zip(p) {
                    *l = if x < *l { x } else { *l };
                    *h = if x > *h { x } else { *h };
                }
            }
        } else {
            // the children's boxes, after this node's in `bounds`
            let left = &rest[..2 * dim];
            let right = &rest[(node.right - ni - 1) * 2 * dim..(node.right - ni) * 2 * dim];
            for k in 0..dim {
                lo[k] = left[k].min(right[k]);
                hi[k] = left[dim + k].max(right[dim + k]);
            }
        }
    }
    bounds
}

/// A k-NN candidate, ordered by `(squared distance, original index)`.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    d2: f64,
    index: usize,
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Candidate {}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        self.d2
            .total_cmp(&other.d2)
            .then(self.index.cmp(&other.index))
    }
}

impl KdTree {
    /// Builds a kd-tree over `points` (row-major `n x dim`) with at most `leaf_size` points per
    /// leaf ([`DEFAULT_LEAF_SIZE`] = 16 is a good default; leaves whose points all coincide may
    /// be larger). Called on a thread of a rayon pool, large subtrees are built in parallel on
    /// that pool (elsewhere the build is sequential); the result does not depend on the number
    /// of threads.
    ///
    /// # Errors
    /// - [`SpatialError::InvalidParameter`] if `dim == 0` or `leaf_size == 0`;
    /// - [`SpatialError::ShapeMismatch`] if `points.len()` is not a multiple of `dim`;
    /// - [`SpatialError::Empty`] if there are no points;
    /// - [`SpatialError::NonFinite`] if any coordinate is NaN or infinite.
    pub fn build(points: &[f64], dim: usize, leaf_size: usize) -> Result<KdTree> {
        Self::build_with(points, dim, leaf_size, &AtomicBool::new(false))
    }

    /// [`KdTree::build`] polling `cancel` before splitting each subtree of at least 4,096
    /// points, so that Ctrl-C stops the build of a tree over millions of points.
    ///
    /// # Errors
    /// As [`KdTree::build`], and [`SpatialError::Cancelled`] when `cancel` is raised.
    pub fn build_with(
        points: &[f64],
        dim: usize,
        leaf_size: usize,
        cancel: &AtomicBool,
    ) -> Result<KdTree> {
        let n = validate_points(points, dim)?;
        if leaf_size == 0 {
            return Err(SpatialError::InvalidParameter {
                name: "leaf_size",
                reason: "must be at least 1".to_string(),
            });
        }
        let mut perm: Vec<usize> = (0..n).collect();
        let mut scratch_perm = vec![0usize; n];
        let in_place = n * dim * 8 <= IN_PLACE_BYTES;
        let mut cols = vec![0.0; n * dim];
        if !in_place {
            for (i, row) in points.chunks_exact(dim).enumerate() {
                for (k, &x) in row.iter().enumerate() {
                    cols[k * n + i] = x;
                }
            }
        }
        let (point_stride, coord_stride) = if in_place { (dim, 1) } else { (1, n) };
        let mut keys = vec![0.0; n];
        let work = Work {
            perm: &mut perm,
            scratch_perm: &mut scratch_perm,
            keys: &mut keys,
            swapped: false,
        };
        let nodes = Builder {
            dim,
            leaf_size,
            cols: if in_place { points } else { &cols },
            point_stride,
            coord_stride,
            cancel,
            parallel: rayon::current_thread_index().is_some(),
        }
        .build_owned(work, 0);
        if cancel.load(MemoryOrdering::Relaxed) {
            return Err(SpatialError::Cancelled);
        }
        drop((keys, scratch_perm));
        let mut tree_points = cols;
        for (row, &orig) in tree_points.chunks_exact_mut(dim).zip(&perm) {
            // An explicit loop: `copy_from_slice` of a run-time length is a call per row.
            for (o, &x) in row.iter_mut().zip(&points[orig * dim..(orig + 1) * dim]) {
                *o = x;
            }
        }
        let bounds = tight_boxes(&nodes, &tree_points, dim);
        Ok(KdTree {
            dim,
            leaf_size,
            points: tree_points,
            perm,
            nodes,
            bounds,
        })
    }

    /// Number of points in the tree.
    pub fn len(&self) -> usize {
        self.perm.len()
    }

    /// Whether the tree holds no points (never true for a successfully built tree).
    pub fn is_empty(&self) -> bool {
        self.perm.is_empty()
    }

    /// Dimension of the points.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The `leaf_size` the tree was built with.
    pub fn leaf_size(&self) -> usize {
        self.leaf_size
    }

    /// Number of nodes (internal and leaves).
    pub fn n_nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Calls `visit(original_index, squared_distance)` for every point `p` with
    /// `squared_distance(p, query) <= radius * radius`, in unspecified order.
    ///
    /// This is the allocation-free hot path. `query.len()` must equal [`dim`](Self::dim)
    /// (checked with `debug_assert!`; in release builds a mismatched query visits nothing). A
    /// NaN or negative `radius` visits nothing; use [`within_radius`](Self::within_radius) for a
    /// checked variant.
    pub fn for_each_within_radius<F: FnMut(usize, f64)>(
        &self,
        query: &[f64],
        radius: f64,
        mut visit: F,
    ) {
        let Some(r2) = self.query_radius_sq(query, radius) else {
            return;
        };
        match self.dim {
            1 => self.radius_impl::<1, F>(query, r2, &mut visit),
            2 => self.radius_impl::<2, F>(query, r2, &mut visit),
            3 => self.radius_impl::<3, F>(query, r2, &mut visit),
            _ => self.radius_impl::<0, F>(query, r2, &mut visit),
        }
    }

    /// Collects every point within `radius` of `query` into `out` (cleared first) as
    /// `(original_index, squared_distance)` pairs, in unspecified order.
    ///
    /// # Errors
    /// - [`SpatialError::ShapeMismatch`] if `query.len() != dim`;
    /// - [`SpatialError::NonFinite`] if `query` has a NaN or infinite coordinate;
    /// - [`SpatialError::InvalidParameter`] if `radius` is NaN or negative.
    pub fn within_radius(
        &self,
        query: &[f64],
        radius: f64,
        out: &mut Vec<(usize, f64)>,
    ) -> Result<()> {
        out.clear();
        validate_query(query, self.dim)?;
        validate_radius(radius)?;
        self.for_each_within_radius(query, radius, |i, d2| out.push((i, d2)));
        Ok(())
    }

    /// Number of points within `radius` of `query` (same criterion as
    /// [`for_each_within_radius`](Self::for_each_within_radius)), without collecting them.
    /// Subtrees whose box lies entirely inside the ball are counted without distance
    /// evaluations. A mismatched query length, NaN or negative radius counts nothing.
    pub fn count_within_radius(&self, query: &[f64], radius: f64) -> usize {
        let Some(r2) = self.query_radius_sq(query, radius) else {
            return 0;
        };
        match self.dim {
            1 => self.count_impl::<1>(query, r2),
            2 => self.count_impl::<2>(query, r2),
            3 => self.count_impl::<3>(query, r2),
            _ => self.count_impl::<0>(query, r2),
        }
    }

    /// The `k` nearest neighbours of `query` as `(original_index, squared_distance)`, sorted by
    /// ascending squared distance with ties broken by smaller index. `k` is clamped to
    /// [`len`](Self::len); `k == 0` gives an empty vector.
    ///
    /// # Errors
    /// - [`SpatialError::ShapeMismatch`] if `query.len() != dim`;
    /// - [`SpatialError::NonFinite`] if `query` has a NaN or infinite coordinate.
    pub fn nearest(&self, query: &[f64], k: usize) -> Result<Vec<(usize, f64)>> {
        validate_query(query, self.dim)?;
        let k = k.min(self.len());
        if k == 0 {
            return Ok(Vec::new());
        }
        let heap = match self.dim {
            1 => self.nearest_impl::<1>(query, k),
            2 => self.nearest_impl::<2>(query, k),
            3 => self.nearest_impl::<3>(query, k),
            _ => self.nearest_impl::<0>(query, k),
        };
        Ok(heap
            .into_sorted_vec()
            .into_iter()
            .map(|c| (c.index, c.d2))
            .collect())
    }

    /// The points in tree order (row-major `len() x dim()`). Every leaf visited by
    /// [`for_each_leaf_within_radius`](Self::for_each_leaf_within_radius) is a contiguous row
    /// range of this slice.
    pub fn points_in_tree_order(&self) -> &[f64] {
        &self.points
    }

    /// `permutation()[i]` is the original index of the `i`-th point in tree order.
    pub fn permutation(&self) -> &[usize] {
        &self.perm
    }

    /// The leaves in tree order: each one's row range of
    /// [`points_in_tree_order`](Self::points_in_tree_order) and its tight bounding box
    /// (`lo`, `hi`).
    ///
    /// ```
    /// use vastml_spatial::KdTree;
    /// let pts: Vec<f64> = (0..100).map(f64::from).collect(); // 100 points on a line
    /// let tree = KdTree::build(&pts, 1, 10)?;
    /// let leaves: Vec<_> = tree.leaves().collect();
    /// assert_eq!(leaves.iter().map(|(r, _, _)| r.len()).sum::<usize>(), 100);
    /// let (range, lo, hi) = &leaves[0];
    /// assert_eq!((range.start, lo[0], hi[0]), (0, 0.0, (range.len() - 1) as f64));
    /// # Ok::<(), vastml_spatial::SpatialError>(())
    /// ```
    pub fn leaves(&self) -> impl Iterator<Item = (std::ops::Range<usize>, &[f64], &[f64])> {
        let dim = self.dim;
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, node)| node.right == LEAF)
            .map(move |(ni, node)| {
                let (lo, hi) = self.node_box(ni, dim);
                (node.start..node.end, lo, hi)
            })
    }

    /// Calls `visit(start, end, min_sq_dist_to_box)` for every leaf whose bounding box is within
    /// `radius` of `query` (squared box distance `<= radius * radius`), where `start..end` is a
    /// row range of [`points_in_tree_order`](Self::points_in_tree_order) (map back with
    /// [`permutation`](Self::permutation)). Points inside a visited leaf may still be farther
    /// than `radius`; no leaf containing a point within `radius` is skipped.
    ///
    /// Allocation-free. `query.len()` must equal [`dim`](Self::dim) (checked with
    /// `debug_assert!`; in release builds a mismatched query visits nothing). A NaN or negative
    /// radius visits nothing.
    pub fn for_each_leaf_within_radius<F: FnMut(usize, usize, f64)>(
        &self,
        query: &[f64],
        radius: f64,
        mut visit: F,
    ) {
        let Some(r2) = self.query_radius_sq(query, radius) else {
            return;
        };
        // every dimension up to 10 has its own copy: the box distances, most of a search at a
        // small radius in many dimensions, then unroll and vectorise
        match self.dim {
            // up to four dimensions a box test costs about what the running bound does, and
            // a plain loop over a stack beats the recursion (measured: 3-10% faster)
            1..=4 => self.for_each_leaf_within_large_radius(query, radius, visit),
            5 => self.leaf_impl::<5, F>(query, r2, &mut visit),
            6 => self.leaf_impl::<6, F>(query, r2, &mut visit),
            7 => self.leaf_impl::<7, F>(query, r2, &mut visit),
            8 => self.leaf_impl::<8, F>(query, r2, &mut visit),
            9 => self.leaf_impl::<9, F>(query, r2, &mut visit),
            10 => self.leaf_impl::<10, F>(query, r2, &mut visit),
            _ => self.leaf_impl::<0, F>(query, r2, &mut visit),
        }
    }

    /// As [`for_each_leaf_within_radius`](Self::for_each_leaf_within_radius) (the same leaves,
    /// in the same order), testing the box of every node on the way. From five dimensions on
    /// the other keeps a running bound that costs O(1) per node instead of O(d); that pays
    /// when the radius prunes most of the tree, while this is faster when the radius reaches
    /// much of it. Below five dimensions both are this search.
    pub fn for_each_leaf_within_large_radius<F: FnMut(usize, usize, f64)>(
        &self,
        query: &[f64],
        radius: f64,
        mut visit: F,
    ) {
        let Some(r2) = self.query_radius_sq(query, radius) else {
            return;
        };
        let none = &mut |_, _, _| {};
        match self.dim {
            1 => self.leaf_pruned_impl::<1, F, _>(query, r2, &mut visit, none),
            2 => self.leaf_pruned_impl::<2, F, _>(query, r2, &mut visit, none),
            3 => self.leaf_pruned_impl::<3, F, _>(query, r2, &mut visit, none),
            4 => self.leaf_pruned_impl::<4, F, _>(query, r2, &mut visit, none),
            5 => self.leaf_pruned_impl::<5, F, _>(query, r2, &mut visit, none),
            6 => self.leaf_pruned_impl::<6, F, _>(query, r2, &mut visit, none),
            7 => self.leaf_pruned_impl::<7, F, _>(query, r2, &mut visit, none),
            8 => self.leaf_pruned_impl::<8, F, _>(query, r2, &mut visit, none),
            9 => self.leaf_pruned_impl::<9, F, _>(query, r2, &mut visit, none),
            10 => self.leaf_pruned_impl::<10, F, _>(query, r2, &mut visit, none),
            _ => self.leaf_pruned_impl::<0, F, _>(query, r2, &mut visit, none),
        }
    }

    /// As [`for_each_leaf_within_radius`](Self::for_each_leaf_within_radius), and calls
    /// `pruned(start, end, min_sq_dist_to_box)` for every subtree left out because its box
    /// is farther than `radius` (its points are the row range `start..end` of
    /// [`points_in_tree_order`](Self::points_in_tree_order)): the leaves visited and the
    /// subtrees pruned partition the points, so a caller can bound what it leaves out.
    pub fn for_each_leaf_within_radius_or_pruned<F, G>(
        &self,
        query: &[f64],
        radius: f64,
        mut visit: F,
        mut pruned: G,
    ) where
        F: FnMut(usize, usize, f64),
        G: FnMut(usize, usize, f64),
    {
        let Some(r2) = self.query_radius_sq(query, radius) else {
            return;
        };
        match self.dim {
            1 => self.leaf_pruned_impl::<1, F, G>(query, r2, &mut visit, &mut pruned),
            2 => self.leaf_pruned_impl::<2, F, G>(query, r2, &mut visit, &mut pruned),
            3 => self.leaf_pruned_impl::<3, F, G>(query, r2, &mut visit, &mut pruned),
            _ => self.leaf_pruned_impl::<0, F, G>(query, r2, &mut visit, &mut pruned),
        }
    }

    /// The squared radius of an unchecked query, or `None` when it must visit nothing
    /// (query length other than `dim`, which also trips a `debug_assert!`; NaN or negative
    /// radius).
    #[inline]
    fn query_radius_sq(&self, query: &[f64], radius: f64) -> Option<f64> {
        debug_assert_eq!(query.len(), self.dim, "query length must equal dim");
        (query.len() == self.dim && radius >= 0.0).then_some(radius * radius)
    }

    /// Bounding box of node `ni` as `(lo, hi)`.
    #[inline(always)]
    fn node_box(&self, ni: usize, dim: usize) -> (&[f64], &[f64]) {
        self.bounds[ni * 2 * dim..(ni + 1) * 2 * dim].split_at(dim)
    }

    /// Minimum squared distance from `q` to the box of node `ni`. Never larger (in floating
    /// point) than the computed squared distance from `q` to any point in the box.
    #[inline(always)]
    fn box_min_sq<const D: usize>(&self, ni: usize, q: &[f64]) -> f64 {
        let dim = if D == 0 { self.dim } else { D };
        let (lo, hi) = self.node_box(ni, dim);
        let mut s = 0.0;
        for ((&l, &h), &x) in lo[..dim].iter().zip(&hi[..dim]).zip(&q[..dim]) {
            // branch-free (at most one of the two is positive): in many dimensions the
            // branches of the three cases are mispredicted about half the time
            let d = (l - x).max(0.0) + (x - h).max(0.0);
            s += d * d;
        }
        s
    }

    /// Maximum squared distance from `q` to the box of node `ni`. Never smaller (in floating
    /// point) than the computed squared distance from `q` to any point in the box.
    #[inline(always)]
    fn box_max_sq<const D: usize>(&self, ni: usize, q: &[f64]) -> f64 {
        let dim = if D == 0 { self.dim } else { D };
        let (lo, hi) = self.node_box(ni, dim);
        let mut s = 0.0;
        for ((&l, &h), &x) in lo[..dim].iter().zip(&hi[..dim]).zip(&q[..dim]) {
            let d = (x - l).abs().max((h - x).abs());
            s += d * d;
        }
        s
    }

    fn radius_impl<const D: usize, F: FnMut(usize, f64)>(&self, q: &[f64], r2: f64, visit: &mut F) {
        let dim = if D == 0 { self.dim } else { D };
        let mut stack = [0usize; STACK_CAP];
        let mut top = 1;
        while top > 0 {
            top -= 1;
            let ni = stack[top];
            if self.box_min_sq::<D>(ni, q) > r2 {
                continue;
            }
            let node = self.nodes[ni];
            if node.right == LEAF {
                let pts = &self.points[node.start * dim..node.end * dim];
                let ids = &self.perm[node.start..node.end];
                for (p, &id) in pts.chunks_exact(dim).zip(ids) {
                    let d2 = sq_dist_fixed::<D>(p, q, dim);
                    if d2 <= r2 {
                        visit(id, d2);
                    }
                }
            } else {
                stack[top] = node.right;
                stack[top + 1] = ni + 1;
                top += 2;
            }
        }
    }

    fn count_impl<const D: usize>(&self, q: &[f64], r2: f64) -> usize {
        let dim = if D == 0 { self.dim } else { D };
        let mut count = 0;
        let mut stack = [0usize; STACK_CAP];
        let mut top = 1;
        while top > 0 {
            top -= 1;
            let ni = stack[top];
            if self.box_min_sq::<D>(ni, q) > r2 {
                continue;
            }
            let node = self.nodes[ni];
            if self.box_max_sq::<D>(ni, q) <= r2 {
                count += node.end - node.start;
            } else if node.right == LEAF {
                let pts = &self.points[node.start * dim..node.end * dim];
                count += pts
                    .chunks_exact(dim)
                    .filter(|p| sq_dist_fixed::<D>(p, q, dim) <= r2)
                    .count();
            } else {
                stack[top] = node.right;
                stack[top + 1] = ni + 1;
                top += 2;
            }
        }
        count
    }

    /// The leaves within `sqrt(r2)` of `q`, found with a bound updated in O(1) per node.
    ///
    /// `off[k]` is the distance from `q` to the tightest interval known on the way down in
    /// coordinate `k`: the root's box, then each split child's extent in its parent's split
    /// coordinate (a child's box lies in its parent's, so every ancestor's interval still
    /// holds). Their squares sum to a lower bound of the distance to the node's box that a
    /// child updates in its one coordinate, instead of the O(d) distance to each box. A leaf
    /// is then tested against its own box, so the same leaves are visited as by testing every
    /// box: the bound only prunes subtrees whose boxes are all farther.
    fn leaf_impl<const D: usize, F: FnMut(usize, usize, f64)>(
        &self,
        q: &[f64],
        r2: f64,
        visit: &mut F,
    ) {
        let dim = if D == 0 { self.dim } else { D };
        let mut buf = [0.0; 16];
        let mut heap = Vec::new();
        let off = if dim <= buf.len() {
            &mut buf[..dim]
        } else {
            heap.resize(dim, 0.0);
            &mut heap[..]
        };
        let (lo, hi) = self.node_box(0, dim);
        let mut rd = 0.0;
        for (k, o) in off.iter_mut().enumerate() {
            *o = (lo[k] - q[k]).max(0.0) + (q[k] - hi[k]).max(0.0);
            rd += *o * *o;
        }
        // The running bound rounds at each step (at most 64 levels): pruning only past this
        // slack never skips a box within the radius.
        let limit = r2 * (1.0 + 1e-12);
        if rd <= limit {
            self.leaf_descend::<D, F>(0, q, (r2, limit), rd, off, visit);
        }
    }

    /// The leaves under node `ni`, whose bound is `rd` (see [`leaf_impl`](Self::leaf_impl)).
    /// `(r2, limit)`: the squared radius, and the bound above which a subtree is pruned.
    fn leaf_descend<const D: usize, F: FnMut(usize, usize, f64)>(
        &self,
        ni: usize,
        q: &[f64],
        (r2, limit): (f64, f64),
        rd: f64,
        off: &mut [f64],
        visit: &mut F,
    ) {
        let dim = if D == 0 { self.dim } else { D };
        let node = self.nodes[ni];
        if node.right == LEAF {
            let bd = self.box_min_sq::<D>(ni, q);
            if bd <= r2 {
                visit(node.start, node.end, bd);
            }
            return;
        }
        let k = node.split;
        let (old, x) = (off[k], q[k]);
        let base = rd - old * old;
        for child in [ni + 1, node.right] {
            let b = &self.bounds[child * 2 * dim..];
            let o = (b[k] - x).max(0.0) + (x - b[dim + k]).max(0.0);
            let rc = base + o * o;
            if rc <= limit {
                off[k] = o;
                self.leaf_descend::<D, F>(child, q, (r2, limit), rc, off, visit);
            }
        }
        off[k] = old;
    }

    fn leaf_pruned_impl<const D: usize, F, G>(
        &self,
        q: &[f64],
        r2: f64,
        visit: &mut F,
        pruned: &mut G,
    ) where
        F: FnMut(usize, usize, f64),
        G: FnMut(usize, usize, f64),
    {
        let mut stack = [0usize; STACK_CAP];
        let mut top = 1;
        while top > 0 {
            top -= 1;
            let ni = stack[top];
            let bd = self.box_min_sq::<D>(ni, q);
            if bd > r2 {
                let node = self.nodes[ni];
                pruned(node.start, node.end, bd);
                continue;
            }
            let node = self.nodes[ni];
            if node.right == LEAF {
                visit(node.start, node.end, bd);
            } else {
                stack[top] = node.right;
                stack[top + 1] = ni + 1;
                top += 2;
            }
        }
    }

    /// Returns a max-heap holding the `k` best candidates (`1 <= k <= len`).
    fn nearest_impl<const D: usize>(&self, q: &[f64], k: usize) -> BinaryHeap<Candidate> {
        self.search_impl::<D>(q, k, 1.0, usize::MAX)
    }

    /// The `k` best candidates for `q` as a max-heap, leaving out the point stored at tree
    /// position `skip` (`usize::MAX`: none); a box is skipped when `shrink` times its
    /// distance exceeds the current `k`-th distance (`shrink = 1`: exact search).
    fn search_impl<const D: usize>(
        &self,
        q: &[f64],
        k: usize,
        shrink: f64,
        skip: usize,
    ) -> BinaryHeap<Candidate> {
        let dim = if D == 0 { self.dim } else { D };
        let mut heap: BinaryHeap<Candidate> = BinaryHeap::with_capacity(k + 1);
        let mut stack = [(0usize, 0.0f64); STACK_CAP];
        stack[0] = (0, self.box_min_sq::<D>(0, q));
        let mut top = 1;
        while top > 0 {
            top -= 1;
            let (ni, bd) = stack[top];
            // `>` rather than `>=`: a box at exactly the current worst distance may still hold
            // an equally distant point with a smaller index.
            if heap.len() == k && heap.peek().is_some_and(|w| bd * shrink > w.d2) {
                continue;
            }
            let node = self.nodes[ni];
            if node.right == LEAF {
                let pts = &self.points[node.start * dim..node.end * dim];
                let ids = &self.perm[node.start..node.end];
                for (j, (p, &index)) in pts.chunks_exact(dim).zip(ids).enumerate() {
                    if node.start + j == skip {
                        continue;
                    }
                    let cand = Candidate {
                        d2: sq_dist_fixed::<D>(p, q, dim),
                        index,
                    };
                    if heap.len() < k {
                        heap.push(cand);
                    } else if let Some(mut worst) = heap.peek_mut() {
                        if cand < *worst {
                            // Dropping the `PeekMut` restores the heap order.
                            *worst = cand;
                        }
                    }
                }
            } else {
                let (l, r) = (ni + 1, node.right);
                let (bl, br) = (self.box_min_sq::<D>(l, q), self.box_min_sq::<D>(r, q));
                // Push the farther child first so the nearer one is explored first.
                let (near, far) = if bl <= br {
                    ((l, bl), (r, br))
                } else {
                    ((r, br), (l, bl))
                };
                stack[top] = far;
                stack[top + 1] = near;
                top += 2;
            }
        }
        heap
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::squared_distance;

    fn grid(n: usize) -> Vec<f64> {
        (0..n * n)
            .flat_map(|i| [(i % n) as f64, (i / n) as f64])
            .collect()
    }

    #[test]
    fn leaves_visited_and_subtrees_pruned_partition_the_points() {
        let pts: Vec<f64> = (0..3000)
            .map(|i| ((i * 7919 + 13) % 1009) as f64 / 97.0)
            .collect();
        for dim in [1, 2, 3, 5] {
            let pts = &pts[..pts.len() / dim * dim];
            let tree = KdTree::build(pts, dim, 8).unwrap();
            let n = tree.len();
            let tp = tree.points_in_tree_order();
            for (q, radius) in [(0.3, 0.5), (4.0, 1.5), (-20.0, 2.0), (5.0, 100.0)] {
                let q = vec![q; dim];
                let owner = std::cell::RefCell::new(vec![0u8; n]);
                tree.for_each_leaf_within_radius_or_pruned(
                    &q,
                    radius,
                    |s, e, bd| {
                        assert!(bd <= radius * radius);
                        owner.borrow_mut()[s..e].iter_mut().for_each(|o| *o += 1);
                    },
                    |s, e, bd| {
                        assert!(bd > radius * radius);
                        for i in s..e {
                            owner.borrow_mut()[i] += 1;
                            // the box distance bounds every point of the subtree from below
                            assert!(bd <= squared_distance(&tp[i * dim..(i + 1) * dim], &q));
                        }
                    },
                );
                let owner = owner.into_inner();
                assert!(owner.iter().all(|&o| o == 1), "dim {dim}, q {q:?}");
                // the same leaves as the plain traversal
                let (mut a, mut b) = (Vec::new(), Vec::new());
                tree.for_each_leaf_within_radius(&q, radius, |s, e, _| a.push((s, e)));
                tree.for_each_leaf_within_radius_or_pruned(
                    &q,
                    radius,
                    |s, e, _| b.push((s, e)),
                    |_, _, _| {},
                );
                assert_eq!(a, b);
            }
        }
    }

    #[test]
    fn is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<KdTree>();
        check::<crate::FarthestPoint<'static>>();
        let tree = KdTree::build(&[0.0, 1.0, 2.0], 1, 1).unwrap();
        let dbg = format!("{tree:?}");
        assert!(
            dbg.contains("len: 3") && dbg.contains("n_nodes: 5"),
            "{dbg}"
        );
    }

    #[test]
    fn tree_order_is_a_permutation_and_leaves_partition() {
        let pts = grid(20);
        let tree = KdTree::build(&pts, 2, 3).unwrap();
        let mut seen = tree.permutation().to_vec();
        seen.sort_unstable();
        assert_eq!(seen, (0..400).collect::<Vec<_>>());
        for (i, &orig) in tree.permutation().iter().enumerate() {
            assert_eq!(
                &tree.points_in_tree_order()[i * 2..i * 2 + 2],
                &pts[orig * 2..orig * 2 + 2]
            );
        }
        // With an infinite radius every leaf is visited exactly once and they tile 0..n.
        let mut ranges = Vec::new();
        tree.for_each_leaf_within_radius(&[0.0, 0.0], f64::INFINITY, |s, e, _| ranges.push((s, e)));
        ranges.sort_unstable();
        let mut next = 0;
        for (s, e) in ranges {
            assert_eq!(s, next);
            assert!(e > s && e - s <= 3);
            next = e;
        }
        assert_eq!(next, 400);
    }

    #[test]
    fn leaf_boxes_contain_their_points_and_distance_is_a_lower_bound() {
        let pts = grid(15);
        let tree = KdTree::build(&pts, 2, 4).unwrap();
        let q = [3.3, -2.0];
        tree.for_each_leaf_within_radius(&q, 100.0, |s, e, bd| {
            for row in tree.points_in_tree_order()[s * 2..e * 2].chunks_exact(2) {
                assert!(squared_distance(row, &q) >= bd);
            }
        });
    }

    /// Every node's box is the tight box of its points (each side touches one), for leaves
    /// and inner nodes, in a few dimensions and with duplicate points.
    #[test]
    fn every_box_is_the_tight_box_of_its_points() {
        for dim in [1, 3, 10] {
            let n = 3_000;
            let pts: Vec<f64> = (0..n * dim)
                .map(|i| ((i * 7_919 + i / 5) % 1_013) as f64 * 0.37)
                .collect();
            let tree = KdTree::build(&pts, dim, 16).unwrap();
            let order = tree.points_in_tree_order();
            for (ni, node) in tree.nodes.iter().enumerate() {
                let (lo, hi) = tree.node_box(ni, dim);
                for k in 0..dim {
                    let col = (node.start..node.end).map(|i| order[i * dim + k]);
                    assert_eq!((lo[k], hi[k]), min_max(col), "node {ni}, coordinate {k}");
                }
            }
        }
    }

    #[test]
    fn depth_is_logarithmic() {
        let pts: Vec<f64> = (0..5000).map(|i| ((i * 7919) % 5000) as f64).collect();
        let tree = KdTree::build(&pts, 1, 1).unwrap();
        fn depth(t: &KdTree, ni: usize) -> usize {
            let node = t.nodes[ni];
            if node.right == LEAF {
                1
            } else {
                1 + depth(t, ni + 1).max(depth(t, node.right))
            }
        }
        assert!(depth(&tree, 0) <= 14, "depth {}", depth(&tree, 0));
    }

    #[test]
    fn parallel_build_matches_structure_invariants() {
        // Big enough to take the rayon::join path; coarse coordinates give many duplicates.
        let n = PAR_BUILD_MIN * 2 + 17;
        for dim in [1, 2, 3, 7] {
            let pts: Vec<f64> = (0..n * dim)
                .map(|i| ((i as u64).wrapping_mul(2654435761) % 1009) as f64 / 1009.0)
                .collect();
            // on a pool of two threads (outside a pool the build is sequential)
            let two = rayon::ThreadPoolBuilder::new()
                .num_threads(2)
                .build()
                .unwrap();
            let tree = two.install(|| KdTree::build(&pts, dim, 16).unwrap());
            // Every internal node's children split its range in halves (the left one the
            // smaller), and every node's box is the tight box of its points.
            for (ni, node) in tree.nodes.iter().enumerate() {
                if node.right != LEAF {
                    let l = tree.nodes[ni + 1];
                    let r = tree.nodes[node.right];
                    assert_eq!(l.start, node.start);
                    assert_eq!(l.end, r.start);
                    assert_eq!(r.end, node.end);
                    assert_eq!(l.end - l.start, (node.end - node.start) / 2);
                }
                let (lo, hi) = tree.node_box(ni, dim);
                let rows = &tree.points_in_tree_order()[node.start * dim..node.end * dim];
                for k in 0..dim {
                    let column = rows.chunks_exact(dim).map(|row| row[k]);
                    assert_eq!(lo[k], column.clone().fold(f64::INFINITY, f64::min));
                    assert_eq!(hi[k], column.fold(f64::NEG_INFINITY, f64::max));
                }
            }
            // The same tree on one thread.
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .build()
                .unwrap();
            let serial = pool.install(|| KdTree::build(&pts, dim, 16).unwrap());
            assert_eq!(serial.permutation(), tree.permutation());
            assert_eq!(serial.bounds, tree.bounds);
            for (t, &orig) in tree.permutation().iter().enumerate() {
                assert_eq!(
                    &tree.points_in_tree_order()[t * dim..(t + 1) * dim],
                    &pts[orig * dim..(orig + 1) * dim]
                );
            }
            let q = vec![0.5; dim];
            let r = 0.1 * dim as f64;
            let brute = (0..n)
                .filter(|&i| squared_distance(&pts[i * dim..(i + 1) * dim], &q) <= r * r)
                .count();
            assert!(brute > 0);
            assert_eq!(tree.count_within_radius(&q, r), brute, "dim {dim}");
            let mut hits = Vec::new();
            tree.within_radius(&q, r, &mut hits).unwrap();
            assert_eq!(hits.len(), brute, "dim {dim}");
        }
    }

    #[test]
    fn all_duplicates_make_one_leaf() {
        let pts = vec![1.5; 3 * 100];
        let tree = KdTree::build(&pts, 3, 4).unwrap();
        assert_eq!(tree.n_nodes(), 1);
        assert_eq!(tree.count_within_radius(&[1.5, 1.5, 1.5], 0.0), 100);
        assert_eq!(tree.count_within_radius(&[1.5, 1.5, 1.6], 0.05), 0);
        let nn = tree.nearest(&[0.0, 0.0, 0.0], 3).unwrap();
        assert_eq!(
            nn.iter().map(|x| x.0).collect::<Vec<_>>(),
            vec![0, 1, 2],
            "ties broken by index"
        );
    }

    #[test]
    fn unchecked_queries_ignore_bad_radius() {
        let tree = KdTree::build(&grid(4), 2, 2).unwrap();
        let mut n = 0;
        tree.for_each_within_radius(&[0.0, 0.0], -1.0, |_, _| n += 1);
        tree.for_each_within_radius(&[0.0, 0.0], f64::NAN, |_, _| n += 1);
        tree.for_each_leaf_within_radius(&[0.0, 0.0], -1.0, |_, _, _| n += 1);
        assert_eq!(n, 0);
        assert_eq!(tree.count_within_radius(&[0.0, 0.0], -2.0), 0);
        assert_eq!(tree.count_within_radius(&[0.0, 0.0], f64::INFINITY), 16);
    }
}
