//! The improved fast Gauss transform (Algorithms 1 and 2 of the thesis) with an optional
//! kd-tree over the cluster centres (the FIGTree regime for many clusters).

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;
use vastml_spatial::{Clustering, FarthestPoint, KdTree, squared_distance};

use crate::bounds::{MAX_TRUNCATION, log_worst_error, truncation_number, worst_target_distance};
use crate::error::{FgtError, Result, invalid};
use crate::exp::{exp_nonpositive, exp_nonpositive_with, fmadd};
use crate::monomials::{Monomials, n_terms};

/// Targets evaluated together, one per SIMD lane.
pub(crate) const LANES: usize = 8;
/// Weight columns accumulated together.
const MAX_W_LANES: usize = 4;

/// Per-thread buffers of the grouped evaluation.
struct GroupScratch {
    y: Vec<[f64; LANES]>,
    u: Vec<[f64; LANES]>,
    lo: Vec<f64>,
    hi: Vec<f64>,
    mono: Vec<[f64; LANES]>,
    candidates: Vec<usize>,
}

impl GroupScratch {
    fn new(terms: usize, dim: usize) -> Self {
        GroupScratch {
            y: vec![[0.0; LANES]; dim],
            u: vec![[0.0; LANES]; dim],
            lo: vec![0.0; dim],
            hi: vec![0.0; dim],
            mono: vec![[0.0; LANES]; terms],
            candidates: Vec::new(),
        }
    }
}

/// Orders the targets along a Z-order (Morton) curve over their first few coordinates, so
/// that consecutive groups of [`LANES`] are close in space; returns the order and the group
/// ranges.
fn spatial_groups(targets: &[f64], dim: usize) -> (Vec<usize>, Vec<(usize, usize)>) {
    let order = morton_order(targets, dim);
    let m = order.len();
    let groups = (0..m)
        .step_by(LANES)
        .map(|s| (s, (s + LANES).min(m)))
        .collect();
    (order, groups)
}

/// The targets' indices along a Z-order (Morton) curve over their first few coordinates:
/// neighbours in the order are close in space. A sort of 64-bit keys: much cheaper than a
/// tree, and good enough for grouping and cache locality.
pub(crate) fn morton_order(targets: &[f64], dim: usize) -> Vec<usize> {
    let used = dim.min(6);
    // Cells of about one target each, with a few bits to spare, are enough to order them:
    // finer ones only lengthen the radix sort (at 2,500 targets in the plane it was a
    // seventh of an IFGT evaluation).
    let m = targets.len() / dim.max(1);
    let fine = (usize::BITS - m.leading_zeros()).div_ceil(used as u32) + 3;
    let bits = ((63 / used) as u32).min(20).min(fine);
    let mut lo = vec![f64::INFINITY; used];
    let mut hi = vec![f64::NEG_INFINITY; used];
    for y in targets.chunks_exact(dim) {
        for k in 0..used {
            lo[k] = lo[k].min(y[k]);
            hi[k] = hi[k].max(y[k]);
        }
    }
    let cells = ((1u64 << bits) - 1) as f64;
    let scale: Vec<f64> = (0..used)
        .map(|k| {
            if hi[k] > lo[k] {
                cells / (hi[k] - lo[k])
            } else {
                0.0
            }
        })
        .collect();
    let spread = Interleave::new(used, bits);
    let key = |(i, y): (usize, &[f64])| {
        let cell = |k: usize| ((y[k] - lo[k]) * scale[k]) as u64;
        let key = if used == 1 {
            cell(0)
        } else {
            (0..used).fold(0u64, |key, k| {
                key | (spread.spread(cell(k)) << (used - 1 - k))
            })
        };
        (key, i as u32)
    };
    let mut keyed: Vec<(u64, u32)> = if targets.len() / dim.max(1) >= PAR_KEYS_FROM {
        targets.par_chunks_exact(dim).enumerate().map(key).collect()
    } else {
        targets.chunks_exact(dim).enumerate().map(key).collect()
    };
    radix_sort(&mut keyed, bits * used as u32);
    keyed.iter().map(|&(_, i)| i as usize).collect()
}

/// From this many targets their Morton keys are computed on the pool.
const PAR_KEYS_FROM: usize = 32_768;

/// Spreads the bits of a cell index `used` apart (bit j to bit j * used), a byte at a time
/// from a table: the Morton key of cells c_0..c_{used-1} is the sum of
/// `spread(c_k) << (used - 1 - k)` (the first coordinate's bit highest in every group).
/// (A loop over the bits, one coordinate at a time, was half of ordering the targets.)
struct Interleave {
    used: usize,
    /// Bytes of a cell index of `bits` bits.
    bytes: usize,
    table: [u64; 256],
}

impl Interleave {
    fn new(used: usize, bits: u32) -> Self {
        let mut table = [0u64; 256];
        for (v, t) in table.iter_mut().enumerate() {
            *t = (0..8).fold(0, |acc, j| acc | (((v as u64 >> j) & 1) << (j * used)));
        }
        Interleave {
            used,
            bytes: bits.div_ceil(8) as usize,
            table,
        }
    }

    /// `v` below 2^bits. (A fixed count of bytes: stopping at the last non-zero one was a
    /// mispredicted branch per coordinate.)
    #[inline]
    fn spread(&self, v: u64) -> u64 {
        (0..self.bytes).fold(0u64, |out, b| {
            out | (self.table[((v >> (8 * b)) & 0xff) as usize] << (8 * b * self.used))
        })
    }
}

/// Sorts (key, index) pairs by key (stable), where keys fit in `key_bits` bits: an LSD
/// radix sort with 11-bit digits, linear in the number of pairs. A digit every key shares
/// (the high bits of data within a small part of their range) costs one counting pass.
fn radix_sort(items: &mut Vec<(u64, u32)>, key_bits: u32) {
    const DIGIT: u32 = 11;
    const BUCKETS: usize = 1 << DIGIT;
    let n = items.len();
    let mut buf = vec![(0u64, 0u32); n];
    let mut shift = 0;
    while shift < key_bits {
        let mut counts = vec![0usize; BUCKETS + 1];
        for &(k, _) in items.iter() {
            counts[((k >> shift) as usize & (BUCKETS - 1)) + 1] += 1;
        }
        if counts.contains(&n) {
            shift += DIGIT;
            continue;
        }
        for i in 0..BUCKETS {
            counts[i + 1] += counts[i];
        }
        for &item in items.iter() {
            let digit = (item.0 >> shift) as usize & (BUCKETS - 1);
            buf[counts[digit]] = item;
            counts[digit] += 1;
        }
        std::mem::swap(items, &mut buf);
        shift += DIGIT;
    }
}

/// From this many sources the coefficients are computed in one pass in memory order.
const STREAM_FROM: usize = 65_536;

/// Sources between two polls of the cancel flag in the coefficient passes.
pub const POLL_SOURCES: usize = 4096;
/// ... when one coefficient array (clusters x weights x terms) has at most this many values.
const STREAM_WIDTH: usize = 1 << 18;

/// Largest number of expansion terms per cluster we accept (memory and time guard).
pub const MAX_TERMS: f64 = 200_000.0;

/// Number of clusters, truncation number and cut-off chosen by [`choose_parameters`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IfgtParameters {
    /// Number of clusters K.
    pub n_clusters: usize,
    /// Truncation number p_max (terms of degree <= p_max - 1 are kept).
    pub truncation: usize,
    /// Cut-off r: clusters farther than r + r_x^k from a target are skipped.
    pub cutoff: f64,
    /// Largest cluster radius r_x at the chosen K.
    pub max_radius: f64,
    /// The chooser's cost estimate, in multiply-adds.
    pub cost: f64,
}

/// Upper limit on K tried by the chooser: min(N, ceil(20 sqrt(d) * range / h)).
pub fn max_clusters(n: usize, dim: usize, range: f64, h: f64) -> usize {
    let lim = (20.0 * (dim as f64).sqrt() * range / h).ceil();
    (lim.max(1.0) as usize).min(n)
}

/// The IFGT cost model (eq. 2.44, written for N sources and M targets):
/// N r_p (coefficients) + M (d K + n r_p) with n = min(K, (r / r_x)^d) clusters in reach.
pub fn ifgt_cost(n: usize, m: usize, dim: usize, k: usize, rx: f64, cutoff: f64, p: usize) -> f64 {
    let terms = n_terms(dim, p - 1);
    let reach = if rx > 0.0 {
        ((cutoff / rx + 1.0).powi(dim as i32)).min(k as f64)
    } else {
        k as f64
    };
    n as f64 * terms + m as f64 * (dim as f64 * k as f64 + reach * terms)
}

/// What Algorithm 1 plans for: the sizes, the bandwidth h, the accuracy epsilon, the
/// cut-off r and the largest K worth trying (besides the usual limit [`max_clusters`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IfgtProblem {
    /// Number of sources N.
    pub n_sources: usize,
    /// Number of targets M.
    pub n_targets: usize,
    /// Dimension d.
    pub dim: usize,
    /// Longest side of the data's bounding box.
    pub range: f64,
    /// Bandwidth h.
    pub bandwidth: f64,
    /// Accuracy epsilon.
    pub epsilon: f64,
    /// Cut-off r (see [`cutoff_radius`](crate::cutoff_radius)).
    pub cutoff: f64,
    /// Try at most this many clusters (`usize::MAX` for no limit beyond the usual one).
    pub max_clusters: usize,
}

impl IfgtProblem {
    fn k_limit(&self) -> usize {
        max_clusters(self.n_sources, self.dim, self.range, self.bandwidth)
            .min(self.max_clusters.max(1))
    }

    /// The plan with K clusters of largest radius r_x, if it reaches epsilon within
    /// [`MAX_TRUNCATION`] and [`MAX_TERMS`].
    fn candidate(&self, k: usize, rx: f64) -> Option<IfgtParameters> {
        let (h, eps, r, dim) = (self.bandwidth, self.epsilon, self.cutoff, self.dim);
        let p = truncation_number(rx, r + rx, h, eps, MAX_TRUNCATION)?;
        if n_terms(dim, p - 1) > MAX_TERMS {
            return None;
        }
        Some(IfgtParameters {
            n_clusters: k,
            truncation: p,
            cutoff: r,
            max_radius: rx,
            cost: ifgt_cost(self.n_sources, self.n_targets, dim, k, rx, r, p),
        })
    }
}

/// Writes `(x - center) / h` into `u` (`inv_h` = 1 / h) and returns `|x - center|^2`.
#[inline]
fn scaled_offset(x: &[f64], center: &[f64], inv_h: f64, u: &mut [f64]) -> f64 {
    let mut d2 = 0.0;
    for ((ui, &xi), &ci) in u.iter_mut().zip(x).zip(center) {
        let t = xi - ci;
        d2 += t * t;
        *ui = t * inv_h;
    }
    d2
}

#[cfg(test)]
impl IfgtProblem {
    /// A problem over a unit range with the tree's cut-off and no cap on K (for tests).
    pub(crate) fn on_unit_range(n: usize, m: usize, dim: usize, h: f64, epsilon: f64) -> Self {
        IfgtProblem {
            n_sources: n,
            n_targets: m,
            dim,
            range: 1.0,
            bandwidth: h,
            epsilon,
            cutoff: crate::cutoff_radius(h, epsilon, None),
            max_clusters: usize::MAX,
        }
    }
}

impl IfgtProblem {
    /// The largest cluster radius (within 1/4096 of the range) at which some truncation
    /// reaches epsilon within [`MAX_TRUNCATION`] and [`MAX_TERMS`]; 0 when none does. Every
    /// clustering the IFGT can use has all its radii below it.
    pub(crate) fn largest_feasible_radius(&self) -> f64 {
        let ok = |rx: f64| self.candidate(1, rx).is_some();
        if ok(self.range) {
            self.range
        } else {
            bisect_ok(0.0, self.range, ok)
        }
    }
}

/// Keeps the cheaper of `best` and `candidate`.
fn keep_cheaper(best: &mut Option<IfgtParameters>, candidate: Option<IfgtParameters>) {
    if let Some(c) = candidate {
        if best.is_none_or(|b| c.cost < b.cost) {
            *best = Some(c);
        }
    }
}

/// Algorithm 1 on the uniform-data model (no clustering): r_x ~ range * K^(-1/d).
/// Cheap; used to decide whether clustering is worth trying. `None` when no K reaches epsilon.
pub fn choose_parameters_uniform(problem: &IfgtProblem) -> Option<IfgtParameters> {
    let limit = problem.k_limit();
    // The radius shrinks as K grows, and so do the terms a radius needs: when the largest K
    // reaches no epsilon, no K does (the common answer at small bandwidths, where the search
    // below would try a hundred K, each with a search over p).
    let rx = problem.range * (limit as f64).powf(-1.0 / problem.dim as f64);
    problem.candidate(limit, rx)?;
    uniform_search(problem, limit)
}

/// The search of [`choose_parameters_uniform`] over K (up to `limit`).
fn uniform_search(problem: &IfgtProblem, limit: usize) -> Option<IfgtParameters> {
    let mut best: Option<IfgtParameters> = None;
    // every K up to 64, then K growing by 5% a step: the model is smooth in K, and a small
    // bandwidth allows tens of thousands of K, each costing a search over p (this loop was
    // most of auto's planning time on small problems)
    let mut k = 1usize;
    // the cost of K is at least M d K (every target's distance to every centre), so past the
    // K where that alone exceeds the best cost no larger K can win
    let floor = problem.n_targets as f64 * problem.dim as f64;
    while k <= limit {
        if best.is_some_and(|b| floor * k as f64 > b.cost) {
            break;
        }
        let rx = problem.range * (k as f64).powf(-1.0 / problem.dim as f64);
        keep_cheaper(&mut best, problem.candidate(k, rx));
        k = if k < 64 {
            k + 1
        } else {
            (k + k / 20).min(limit.max(k + 1))
        };
        if k == limit {
            let rx = problem.range * (k as f64).powf(-1.0 / problem.dim as f64);
            keep_cheaper(&mut best, problem.candidate(k, rx));
            break;
        }
    }
    best
}

/// Algorithm 1 with the real farthest-point radii: grows the clustering one centre at a
/// time (the first k centres never move) and keeps the K of least cost. `None` when no K up
/// to the limit reaches epsilon within [`MAX_TRUNCATION`] terms.
///
/// # Errors
/// Invalid sources (see [`FarthestPoint::new`]) and [`FgtError::Cancelled`].
pub fn choose_parameters(
    sources: &[f64],
    problem: &IfgtProblem,
    cancel: &AtomicBool,
) -> Result<Option<IfgtParameters>> {
    Ok(choose_clustering(sources, problem, cancel)?.map(|(p, _, _)| p))
}

/// On a line (d = 1) the farthest-point clustering is replaced by K equal intervals over the
/// sources' range (as in chapter 3 of the thesis): the same guarantee, since the bound uses
/// the actual radii, for O(N) work instead of growing K clusters one by one. K comes from
/// Algorithm 1 on the uniform model; empty intervals are dropped. A few far outliers stretch
/// the range so far that no K within the limit reaches epsilon: then the interval width is
/// taken from the model on the bulk of the sources (a sample less its 1/64 most extreme on
/// each side) and laid over the whole range, every outlier landing in an interval of its own.
/// Returns `None` when neither reaches epsilon.
pub(crate) fn interval_clustering(
    sources: &[f64],
    problem: &IfgtProblem,
) -> Option<(IfgtParameters, Clustering, Vec<usize>)> {
    let lo = sources.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = sources.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let range = (hi - lo).max(problem.bandwidth * 1e-3);
    if let Some(params) = choose_parameters_uniform(&IfgtProblem { range, ..*problem }) {
        let clustering = equal_intervals(sources, params.n_clusters.max(1), problem.bandwidth);
        return Some((params, clustering, Vec::new()));
    }
    let bulk = bulk_range(sources).max(problem.bandwidth * 1e-3);
    if bulk >= 0.5 * range {
        return None;
    }
    let params = choose_parameters_uniform(&IfgtProblem {
        range: bulk,
        ..*problem
    })?;
    let width = bulk / params.n_clusters.max(1) as f64;
    let clustering = intervals_of_width(sources, width)?;
    Some((params, clustering, Vec::new()))
}

/// The extent of a sample of up to 1,024 points on a line less its 1/64 most extreme
/// values on each side.
fn bulk_range(sources: &[f64]) -> f64 {
    let n = sources.len();
    let stride = n.div_ceil(1024).max(1);
    let mut sample: Vec<f64> = sources.iter().step_by(stride).copied().collect();
    sample.sort_unstable_by(f64::total_cmp);
    let cut = sample.len() / 64;
    match (sample.get(cut), sample.len().checked_sub(1 + cut)) {
        (Some(&a), Some(b)) => sample[b] - a,
        _ => 0.0,
    }
}

/// Intervals of the given width over the range of points on a line, numbered in order,
/// the empty ones dropped; `None` when there would be more than 2^40 of them.
pub(crate) fn intervals_of_width(sources: &[f64], width: f64) -> Option<Clustering> {
    let lo = sources.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = sources.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let total = ((hi - lo) / width).floor() + 1.0;
    if !(width > 0.0 && total.is_finite() && total <= (1u64 << 40) as f64) {
        return None;
    }
    let last = total as u64 - 1;
    let raw: Vec<u64> = sources
        .iter()
        .map(|&x| (((x - lo) / width) as u64).min(last))
        .collect();
    // the distinct non-empty intervals, in order: a table when there are not many more
    // intervals than points, else a sort
    if total as usize <= 4 * sources.len() + 1024 {
        let mut table = vec![usize::MAX; total as usize];
        for &r in &raw {
            table[r as usize] = 0;
        }
        let mut next = 0;
        for t in table.iter_mut().filter(|t| **t == 0) {
            *t = next;
            next += 1;
        }
        let labels = raw.iter().map(|&r| table[r as usize]).collect();
        return Some(Clustering::from_labels(sources, 1, labels, next));
    }
    let mut used = raw.clone();
    used.sort_unstable();
    used.dedup();
    let labels = raw
        .iter()
        .map(|r| used.binary_search(r).unwrap_or(0))
        .collect();
    Some(Clustering::from_labels(sources, 1, labels, used.len()))
}

/// `k` equal intervals over the range of points on a line, the empty ones dropped.
pub(crate) fn equal_intervals(sources: &[f64], k: usize, bandwidth: f64) -> Clustering {
    let lo = sources.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = sources.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let range = (hi - lo).max(bandwidth * 1e-3);
    let k = k.max(1);
    let width = range / k as f64;
    let raw: Vec<usize> = sources
        .iter()
        .map(|&x| (((x - lo) / width) as usize).min(k - 1))
        .collect();
    // renumber the non-empty intervals 0..k'
    let mut used = vec![usize::MAX; k];
    let mut next = 0;
    for &r in &raw {
        if used[r] == usize::MAX {
            used[r] = 0;
        }
    }
    for u in used.iter_mut() {
        if *u == 0 {
            *u = next;
            next += 1;
        }
    }
    let labels = raw.iter().map(|&r| used[r]).collect();
    Clustering::from_labels(sources, 1, labels, next)
}

/// Exactly `k` clusters (fewer when there are fewer distinct points): equal intervals on a
/// line, farthest-point clustering otherwise; with the seeds of the latter.
pub(crate) fn fixed_clustering(
    sources: &[f64],
    dim: usize,
    k: usize,
    bandwidth: f64,
    cancel: &AtomicBool,
) -> Result<(Clustering, Vec<usize>)> {
    if dim == 1 {
        return Ok((equal_intervals(sources, k, bandwidth), Vec::new()));
    }
    let mut fp = FarthestPoint::new(sources, dim, 0)?;
    let mut got = 1;
    while got < k {
        if cancel.load(Ordering::Relaxed) {
            return Err(FgtError::Cancelled);
        }
        if !fp.add_center() {
            break;
        }
        got += 1;
    }
    Ok((
        fp.clustering_of_first(got),
        fp.seed_indices()[..got].to_vec(),
    ))
}

/// [`choose_parameters`], also returning the clustering at the chosen K and its seeds.
pub(crate) fn choose_clustering(
    sources: &[f64],
    problem: &IfgtProblem,
    cancel: &AtomicBool,
) -> Result<Option<(IfgtParameters, Clustering, Vec<usize>)>> {
    let dim = problem.dim;
    let mut fp = FarthestPoint::new(sources, dim, 0)?;
    let mut best: Option<IfgtParameters> = None;
    for k in 1..=problem.k_limit() {
        if k > 1 && !fp.add_center() {
            break;
        }
        if cancel.load(Ordering::Relaxed) {
            return Err(FgtError::Cancelled);
        }
        // Once the search over K centres alone costs more than the best plan, stop; and
        // since the cost in K falls and then rises, stop as well once K is well past the
        // best K found (twice it, and 8 more) -- the clustering steps are the planning cost.
        if let Some(b) = best {
            if problem.n_targets as f64 * dim as f64 * k as f64 > b.cost
                || (k >= 2 * b.n_clusters && k >= b.n_clusters + 8)
            {
                break;
            }
        }
        keep_cheaper(&mut best, problem.candidate(k, fp.max_radius()));
    }
    Ok(best.map(|b| {
        let clustering = fp.clustering_of_first(b.n_clusters);
        let seeds = fp.seed_indices()[..b.n_clusters].to_vec();
        (b, clustering, seeds)
    }))
}

/// Index of the nearest centre (ties to the smaller index) of every source.
fn nearest_centers(tree: &KdTree, sources: &[f64], dim: usize) -> Result<Vec<usize>> {
    let nearest = |x: &[f64]| Ok(tree.nearest(x, 1)?[0].0);
    if crate::par::sequential() {
        sources.chunks_exact(dim).map(nearest).collect()
    } else {
        sources.par_chunks(dim).map(nearest).collect()
    }
}

/// CSR (offsets, members) of a labelling into `k` groups, members in index order.
fn csr_of_labels(labels: &[usize], k: usize) -> (Vec<usize>, Vec<usize>) {
    let mut offsets = vec![0usize; k + 1];
    for &l in labels {
        offsets[l + 1] += 1;
    }
    for j in 0..k {
        offsets[j + 1] += offsets[j];
    }
    let mut next = offsets.clone();
    let mut members = vec![0usize; labels.len()];
    for (i, &l) in labels.iter().enumerate() {
        members[next[l]] = i;
        next[l] += 1;
    }
    (offsets, members)
}

/// Per centre (row-major `k x dim`), the largest distance to a source whose nearest centre
/// it is (0 for a centre no source is nearest to). The radii over several sets of sources
/// combine by an element-wise maximum; with them, [`SplitIfgt`](crate::SplitIfgt) builds a plan
/// whose guarantee covers every source. Without sources every radius is 0.
///
/// # Errors
/// Non-finite or mis-shaped centres or sources.
pub fn cluster_radii(sources: &[f64], dim: usize, centers: &[f64]) -> Result<Vec<f64>> {
    let k = centers.len() / dim.max(1);
    if sources.is_empty() {
        return Ok(vec![0.0; k]);
    }
    let tree = KdTree::build(centers, dim, 8)?;
    let labels = nearest_centers(&tree, sources, dim)?;
    let mut r2 = vec![0.0f64; k];
    for (x, &c) in sources.chunks_exact(dim).zip(&labels) {
        r2[c] = r2[c].max(squared_distance(x, &centers[c * dim..(c + 1) * dim]));
    }
    Ok(r2.into_iter().map(f64::sqrt).collect())
}

/// Largest source radius a in [0, max_radius] at which exactly `p` terms meet epsilon
/// against every target within `reach` (bisection: the bound grows with a while a <= reach).
///
/// The first p whose limit covers a source is the p the old cumulative form ("at most p
/// terms") gave, but each step costs one logarithm instead of p.
fn largest_radius_within(p: usize, max_radius: f64, reach: f64, h: f64, epsilon: f64) -> f64 {
    let log_eps = epsilon.ln();
    let ok = |a: f64| log_worst_error(p, a, reach, h) <= log_eps;
    if ok(max_radius) {
        return max_radius;
    }
    bisect_ok(0.0, max_radius, ok)
}

/// The last point of [lo, hi] found by bisection at which `ok` holds, given that it holds
/// at `lo` and not at `hi`, and switches once in between. Twelve halvings leave it within
/// 1/4096 of the interval below the switch: a limit that much short costs a term to the
/// few sources (or targets) in that sliver, and each halving costs a logarithm per term of
/// every cluster radius, the larger part of planning a small IFGT.
fn bisect_ok(mut lo: f64, mut hi: f64, ok: impl Fn(f64) -> bool) -> f64 {
    for _ in 0..12 {
        let mid = 0.5 * (lo + hi);
        if ok(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Per cluster, one limit per truncation order.
type Limits = Vec<Vec<f64>>;

/// Per cluster, the source and target limits of [`IfgtPlan`] for p = 1..truncation - 1,
/// computed once per radius rounded up to the grid rx 0.97^k (radii below rx 0.97^400 and
/// zero are used as they are).
fn limits_by_radius(
    radii: &[f64],
    truncation: usize,
    cutoff: f64,
    h: f64,
    epsilon: f64,
) -> (Limits, Limits) {
    const RATIO: f64 = 0.97;
    const STEPS: usize = 400;
    let rx = radii.iter().copied().fold(0.0f64, f64::max);
    let limits = |r: f64| -> (Vec<f64>, Vec<f64>) {
        (
            (1..truncation)
                .map(|p| largest_radius_within(p, r, cutoff + r, h, epsilon))
                .collect(),
            (1..truncation)
                .map(|p| target_limit(p, r, cutoff + r, h, epsilon))
                .collect(),
        )
    };
    let mut memo: Vec<Option<(Vec<f64>, Vec<f64>)>> = vec![None; STEPS + 1];
    let mut sources = Vec::with_capacity(radii.len());
    let mut targets = Vec::with_capacity(radii.len());
    for &r in radii {
        let step = if r > 0.0 && rx > 0.0 {
            let mut k = ((rx / r).ln() / (1.0 / RATIO).ln()).floor().max(0.0) as usize;
            while k > 0 && rx * RATIO.powi(k as i32) < r {
                k -= 1;
            }
            (k <= STEPS).then_some(k)
        } else {
            None
        };
        let (s, t) = match step {
            Some(k) => memo[k]
                .get_or_insert_with(|| limits(rx * RATIO.powi(k as i32)))
                .clone(),
            None => limits(r),
        };
        sources.push(s);
        targets.push(t);
    }
    (sources, targets)
}

/// Largest target distance b in [0, reach] up to which `p` terms meet epsilon against every
/// source within `radius` of the centre.
///
/// The bound is symmetric in the source and target distances, so the worst source for a
/// target at b is at min(b*(b, p), radius), and as a function of b the bound rises up to
/// b*(radius, p) and falls after it (the Gaussian wins). So either p terms suffice at that
/// peak, and then for every b <= reach, or they fail on an interval starting below the peak,
/// whose start is found by bisection on the rising side.
fn target_limit(p: usize, radius: f64, reach: f64, h: f64, epsilon: f64) -> f64 {
    let log_eps = epsilon.ln();
    let ok = |b: f64| log_worst_error(p, b, radius, h) <= log_eps;
    let peak = worst_target_distance(radius, p, h).min(reach);
    if ok(peak) {
        return reach;
    }
    bisect_ok(0.0, peak, ok)
}

/// A built IFGT: clusters, truncation, and everything that does not depend on the weights.
#[derive(Debug)]
pub(crate) struct IfgtPlan {
    dim: usize,
    h: f64,
    /// Cluster centres, K x dim.
    centers: Vec<f64>,
    /// Per-cluster radius about its centre.
    radii: Vec<f64>,
    /// (r + r_x^k)^2 per cluster.
    reach_sq: Vec<f64>,
    /// Members of each cluster, CSR.
    offsets: Vec<usize>,
    members: Vec<usize>,
    /// Per-source number of terms kept (prefix length of the graded order), in `members` order.
    source_terms: Vec<u32>,
    /// Cluster of each source, in source order (the streamed coefficients).
    source_cluster: Vec<u32>,
    /// `source_terms` in source order.
    source_len: Vec<u32>,
    /// Per cluster, `source_limits[c][p - 1]` is the largest source distance from the centre
    /// at which `p` terms meet epsilon.
    source_limits: Vec<Vec<f64>>,
    /// Target-side truncation (Morariu et al. 2008): per cluster, `target_limits[c][p - 1]` is
    /// the largest target distance from the centre at which `p` terms meet epsilon for every
    /// source of the cluster; nearer targets use fewer terms.
    target_limits: Vec<Vec<f64>>,
    monomials: Monomials,
    truncation: usize,
    cutoff: f64,
    center_tree: Option<KdTree>,
}

/// The sources of one cluster for its coefficients: the cluster's index, its `members` and
/// the number of terms each keeps, and the weights (`n_weights` columns, in source order).
#[derive(Clone, Copy)]
struct ClusterSources<'a> {
    sources: &'a [f64],
    cluster: usize,
    members: &'a [usize],
    source_terms: &'a [u32],
    weights: &'a [f64],
    n_weights: usize,
    cancel: &'a AtomicBool,
}

/// What an IFGT plan must reach: the bandwidth `h`, the error bound `epsilon` and the
/// cut-off radius beyond which a cluster is not evaluated.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Accuracy {
    pub h: f64,
    pub epsilon: f64,
    pub cutoff: f64,
}

impl IfgtPlan {
    /// Algorithm 2, steps 2-4 (without the weights): cluster into K clusters, re-centre
    /// each cluster on the better of its seed and its mean with the radius *recomputed*
    /// about that centre (the public code keeps stale radii), update p_max from the actual
    /// radius, and pick each source's truncation.
    pub fn new(
        sources: &[f64],
        dim: usize,
        accuracy: Accuracy,
        clustering: Clustering,
        seeds: &[usize],
        use_tree: bool,
    ) -> Result<Self> {
        let k = clustering.n_clusters();
        let (offsets, members) = clustering.members();
        // Choose per cluster the centre (seed or mean) with the smaller radius (without
        // seeds, the means).
        let Clustering {
            mut centers,
            mut radii,
            ..
        } = clustering;
        for (c, &seed) in seeds.iter().enumerate().take(k) {
            let seed_pt = &sources[seed * dim..(seed + 1) * dim];
            let r_seed = members[offsets[c]..offsets[c + 1]]
                .iter()
                .map(|&i| squared_distance(&sources[i * dim..(i + 1) * dim], seed_pt))
                .fold(0.0f64, f64::max)
                .sqrt();
            if r_seed < radii[c] {
                radii[c] = r_seed;
                centers[c * dim..(c + 1) * dim].copy_from_slice(seed_pt);
            }
        }
        let mut plan = IfgtPlan::from_centers_inner(centers, radii, dim, accuracy, use_tree, true)?;
        plan.set_members(sources, offsets, members);
        Ok(plan)
    }

    /// As [`IfgtPlan::new`] without seeds and without requiring that epsilon be reachable:
    /// the start of a fixed-p plan ([`IfgtPlan::with_fixed_truncation`]).
    pub fn new_unbounded(
        sources: &[f64],
        dim: usize,
        accuracy: Accuracy,
        clustering: Clustering,
        use_tree: bool,
    ) -> Result<Self> {
        let (offsets, members) = clustering.members();
        let Clustering { centers, radii, .. } = clustering;
        let mut plan =
            IfgtPlan::from_centers_inner(centers, radii, dim, accuracy, use_tree, false)?;
        plan.set_members(sources, offsets, members);
        Ok(plan)
    }

    /// A plan from given cluster centres and radii, without sources: every source later
    /// given to [`coefficients_of`](Self::coefficients_of) must lie within its nearest
    /// centre's radius (as it does when the radii come from [`cluster_radii`] over all of
    /// them). The truncation, per-cluster limits and optional centre tree are built here.
    pub fn from_centers(
        centers: Vec<f64>,
        radii: Vec<f64>,
        dim: usize,
        accuracy: Accuracy,
        use_tree: bool,
    ) -> Result<Self> {
        Self::from_centers_inner(centers, radii, dim, accuracy, use_tree, true)
    }

    fn from_centers_inner(
        centers: Vec<f64>,
        radii: Vec<f64>,
        dim: usize,
        accuracy: Accuracy,
        use_tree: bool,
        require_bound: bool,
    ) -> Result<Self> {
        let Accuracy { h, epsilon, cutoff } = accuracy;
        let k = radii.len();
        let rx = radii.iter().copied().fold(0.0f64, f64::max);
        let reached = truncation_number(rx, cutoff + rx, h, epsilon, MAX_TRUNCATION);
        let truncation = match reached {
            Some(p) if n_terms(dim, p - 1) <= MAX_TERMS => p,
            // a fixed-p plan replaces the truncation afterwards
            _ if !require_bound => 1,
            None => {
                return Err(invalid(
                    "method",
                    format!(
                        "the IFGT cannot reach epsilon={epsilon:e} with {k} clusters at bandwidth {h} \
                         (more than {MAX_TRUNCATION} terms needed); use 'direct-tree' or 'auto'"
                    ),
                ));
            }
            Some(p) => {
                return Err(invalid(
                    "method",
                    format!(
                        "the IFGT would need {} terms per cluster in {dim} dimensions; use 'direct' or 'auto'",
                        n_terms(dim, p - 1)
                    ),
                ));
            }
        };
        let monomials = Monomials::new(dim, truncation - 1);
        // Per-source truncation p_i: smallest p meeting the bound for this source's radius.
        // The bound grows with the radius, so per cluster we find, by bisection, the largest
        // radius each p covers; every source is then placed with a few comparisons.
        // The limits take (p_max - 1) bisections per cluster, which with thousands of clusters
        // was most of the plan: they are computed once per radius rounded *up* to a
        // geometric grid (ratio 0.97 below the largest). A larger radius is conservative for
        // both limits (more sources to cover, a longer reach), so the bound still holds.
        let (source_limits, target_limits) =
            limits_by_radius(&radii, truncation, cutoff, h, epsilon);
        let reach_sq = radii.iter().map(|r| (cutoff + r) * (cutoff + r)).collect();
        let center_tree = if use_tree {
            Some(KdTree::build(&centers, dim, 8)?)
        } else {
            None
        };
        Ok(IfgtPlan {
            dim,
            h,
            centers,
            radii,
            reach_sq,
            offsets: vec![0; k + 1],
            members: Vec::new(),
            source_terms: Vec::new(),
            source_cluster: Vec::new(),
            source_len: Vec::new(),
            source_limits,
            target_limits,
            monomials,
            truncation,
            cutoff,
            center_tree,
        })
    }

    /// Stores the clusters' members and each source's number of terms, in `members` order
    /// and in source order. Within a cluster the members are ordered by their number of
    /// terms (stably), so that the sources the coefficient pass takes together mostly keep
    /// the same terms.
    fn set_members(&mut self, sources: &[f64], offsets: Vec<usize>, members: Vec<usize>) {
        let n = sources.len() / self.dim;
        let mut cluster = vec![0u32; n];
        for c in 0..self.radii.len() {
            for &i in &members[offsets[c]..offsets[c + 1]] {
                cluster[i] = c as u32;
            }
        }
        let degrees = self.degrees_by_source(sources, &cluster);
        let prefix = self.prefix_lens();
        let mut sorted = vec![0usize; members.len()];
        let mut next = vec![0usize; prefix.len() + 1];
        for w in offsets.windows(2) {
            next.fill(0);
            for &i in &members[w[0]..w[1]] {
                next[degrees[i] as usize + 1] += 1;
            }
            next[0] = w[0];
            for g in 0..prefix.len() {
                next[g + 1] += next[g];
            }
            for &i in &members[w[0]..w[1]] {
                let g = degrees[i] as usize;
                sorted[next[g]] = i;
                next[g] += 1;
            }
        }
        self.source_len = degrees.iter().map(|&g| prefix[g as usize]).collect();
        self.source_terms = sorted.iter().map(|&i| self.source_len[i]).collect();
        self.source_cluster = cluster;
        self.offsets = offsets;
        self.members = sorted;
    }

    /// Number of terms kept per degree limit: `prefix_lens()[g]` terms are those of degree
    /// at most `g`. (Looked up: the binomial costs divisions and a rounding, and was most of
    /// the pass over the sources.)
    fn prefix_lens(&self) -> Vec<u32> {
        (0..self.truncation.max(1))
            .map(|g| self.monomials.prefix_len(g) as u32)
            .collect()
    }

    /// Number of terms kept for each source (prefix length for its distance from its centre),
    /// in source order.
    fn terms_by_source(&self, sources: &[f64], cluster: &[u32]) -> Vec<u32> {
        let prefix = self.prefix_lens();
        let degrees = self.degrees_by_source(sources, cluster);
        degrees.iter().map(|&g| prefix[g as usize]).collect()
    }

    /// Highest degree kept for each source, in source order: a pass over the sources in
    /// memory order.
    fn degrees_by_source(&self, sources: &[f64], cluster: &[u32]) -> Vec<u32> {
        let dim = self.dim;
        let top = self.truncation.max(1) - 1;
        // The limits rise with p, so the number of them below the distance is counted
        // without a branch (a loop that stops at the first limit above it mispredicts its
        // exit at nearly every source).
        let degree = |(x, &c): (&[f64], &u32)| {
            let c = c as usize;
            let a = squared_distance(x, &self.centers[c * dim..(c + 1) * dim]).sqrt();
            let below: usize = self.source_limits[c]
                .iter()
                .map(|&limit| usize::from(a > limit))
                .sum();
            below.min(top) as u32
        };
        if crate::par::sequential() {
            return sources.chunks_exact(dim).zip(cluster).map(degree).collect();
        }
        sources
            .par_chunks(dim * 4096)
            .zip(cluster.par_chunks(4096))
            .flat_map_iter(|(xs, cs)| xs.chunks_exact(dim).zip(cs).map(degree))
            .collect()
    }

    /// Number of terms kept for each source (in `members` order, clusters in CSR `offsets`).
    fn source_terms_of(&self, sources: &[f64], offsets: &[usize], members: &[usize]) -> Vec<u32> {
        let n = sources.len() / self.dim;
        let mut cluster = vec![0u32; n];
        for c in 0..self.radii.len() {
            for &i in &members[offsets[c]..offsets[c + 1]] {
                cluster[i] = c as u32;
            }
        }
        let by_source = self.terms_by_source(sources, &cluster);
        members.iter().map(|&i| by_source[i]).collect()
    }

    pub fn n_clusters(&self) -> usize {
        self.radii.len()
    }

    pub fn truncation(&self) -> usize {
        self.truncation
    }

    pub fn n_terms(&self) -> usize {
        self.monomials.len()
    }

    /// The same plan with a kd-tree over the cluster centres.
    pub fn with_center_tree(mut self) -> Result<Self> {
        if self.center_tree.is_none() {
            self.center_tree = Some(KdTree::build(&self.centers, self.dim, 8)?);
        }
        Ok(self)
    }

    pub fn has_tree(&self) -> bool {
        self.center_tree.is_some()
    }

    /// The same plan without the kd-tree over the cluster centres.
    pub fn without_center_tree(mut self) -> Self {
        self.center_tree = None;
        self
    }

    /// The same clusters with a fixed truncation number p for every source and target (the
    /// thesis's fixed-p mode, section 2.12): the error bound is no longer enforced.
    ///
    /// # Errors
    /// [`FgtError::InvalidParameter`] when p is 0, above [`MAX_TRUNCATION`], or needs more
    /// than [`MAX_TERMS`] terms.
    pub fn with_fixed_truncation(mut self, p: usize) -> Result<Self> {
        if p == 0 || p > MAX_TRUNCATION {
            return Err(invalid(
                "truncation",
                format!("must lie in 1..={MAX_TRUNCATION}, got {p}"),
            ));
        }
        if n_terms(self.dim, p - 1) > MAX_TERMS {
            return Err(invalid(
                "truncation",
                format!(
                    "{p} needs {} terms per cluster in {} dimensions (at most {MAX_TERMS})",
                    n_terms(self.dim, p - 1),
                    self.dim
                ),
            ));
        }
        self.monomials = Monomials::new(self.dim, p - 1);
        self.truncation = p;
        let every = vec![f64::NEG_INFINITY; p - 1];
        self.source_limits = vec![every.clone(); self.radii.len()];
        self.target_limits = vec![every; self.radii.len()];
        let full = self.monomials.len() as u32;
        self.source_terms.iter_mut().for_each(|t| *t = full);
        self.source_len.iter_mut().for_each(|t| *t = full);
        Ok(self)
    }

    /// Seconds (CPU seconds over the threads) to compute the coefficients of every
    /// `stride`-th source of each cluster (unit weights, `n_weights` columns), and the
    /// number of sources that took. The pass also has a fixed part (the clusters'
    /// accumulators), so the cost of all the sources is best interpolated from two strides.
    ///
    /// # Errors
    /// [`FgtError::Cancelled`] when `cancel` is raised.
    pub fn time_coefficients(
        &self,
        sources: &[f64],
        n_weights: usize,
        stride: usize,
        cancel: &AtomicBool,
    ) -> Result<(f64, usize)> {
        let stride = stride.max(1);
        let n = sources.len() / self.dim;
        let width = self.n_clusters() * n_weights * self.monomials.len();
        if n >= STREAM_FROM && width <= STREAM_WIDTH && self.source_len.len() == n {
            // the streamed pass on a prefix of the sources
            let m = (n / stride).max(1);
            let ones = vec![1.0; m * n_weights];
            let t0 = crate::auto::cpu_seconds();
            let c =
                self.coefficients_streamed(&sources[..m * self.dim], &ones, n_weights, cancel)?;
            std::hint::black_box(c);
            let t = (crate::auto::cpu_seconds() - t0) / rayon::current_num_threads() as f64;
            return Ok((t, m));
        }
        let k = self.n_clusters();
        let mut offsets = vec![0usize; k + 1];
        let mut members = Vec::new();
        let mut terms = Vec::new();
        for c in 0..k {
            for slot in (self.offsets[c]..self.offsets[c + 1]).step_by(stride) {
                members.push(self.members[slot]);
                terms.push(self.source_terms[slot]);
            }
            offsets[c + 1] = members.len();
        }
        let n = sources.len() / self.dim;
        let ones = vec![1.0; n * n_weights];
        let t0 = crate::auto::cpu_seconds();
        let c = self.coefficients_csr(
            sources,
            (&offsets, &members, &terms),
            &ones,
            n_weights,
            cancel,
        )?;
        std::hint::black_box(c);
        let t = (crate::auto::cpu_seconds() - t0) / rayon::current_num_threads() as f64;
        Ok((t, members.len()))
    }

    pub fn max_radius(&self) -> f64 {
        self.radii.iter().copied().fold(0.0, f64::max)
    }

    /// Coefficients C^k_alpha for every weight column, laid out [cluster][weight][term]
    /// (eq. 2.25), computed in parallel over clusters (deterministic). Polls `cancel` every
    /// [`POLL_SOURCES`] sources of each parallel task.
    ///
    /// # Errors
    /// [`FgtError::Cancelled`] when `cancel` is raised.
    pub fn coefficients(
        &self,
        sources: &[f64],
        weights: &[f64],
        n_weights: usize,
        cancel: &AtomicBool,
    ) -> Result<Vec<f64>> {
        let width = self.n_clusters() * n_weights * self.monomials.len();
        let n = sources.len() / self.dim;
        if n >= STREAM_FROM && width <= STREAM_WIDTH && self.source_len.len() == n {
            return self.coefficients_streamed(sources, weights, n_weights, cancel);
        }
        self.coefficients_csr(
            sources,
            (&self.offsets, &self.members, &self.source_terms),
            weights,
            n_weights,
            cancel,
        )
    }

    /// The coefficients from a pass over the sources in memory order: a cluster's members are
    /// spread over the whole array, so visiting them cluster by cluster misses the cache on
    /// every source once the data outgrow it. The sources are cut into at most 16 fixed
    /// chunks (whatever the number of threads), each summed into its own coefficient array,
    /// and the arrays are added in chunk order: deterministic.
    fn coefficients_streamed(
        &self,
        sources: &[f64],
        weights: &[f64],
        n_weights: usize,
        cancel: &AtomicBool,
    ) -> Result<Vec<f64>> {
        let dim = self.dim;
        let terms = self.monomials.len();
        let width = self.n_clusters() * n_weights * terms;
        let n = sources.len() / dim;
        let chunk = n.div_ceil(16).max(4096);
        let inv_h = 1.0 / self.h;
        let neg_inv_h2 = -inv_h * inv_h;
        let partial = |ch: usize| {
            let mut local = vec![0.0; width];
            let mut u = vec![0.0; dim];
            let mut mono = vec![0.0; terms];
            for i in ch * chunk..((ch + 1) * chunk).min(n) {
                if i % POLL_SOURCES == 0 && cancel.load(Ordering::Relaxed) {
                    break;
                }
                let c = self.source_cluster[i] as usize;
                let center = &self.centers[c * dim..(c + 1) * dim];
                let x = &sources[i * dim..(i + 1) * dim];
                let d2 = scaled_offset(x, center, inv_h, &mut u);
                let len = self.source_len[i] as usize;
                self.monomials.evaluate(&u, &mut mono[..len]);
                let g = exp_nonpositive(d2 * neg_inv_h2);
                let block = &mut local[c * n_weights * terms..(c + 1) * n_weights * terms];
                for w in 0..n_weights {
                    let qg = weights[i * n_weights + w] * g;
                    if qg == 0.0 {
                        continue;
                    }
                    for (cf, m) in block[w * terms..w * terms + len]
                        .iter_mut()
                        .zip(&mono[..len])
                    {
                        *cf += qg * m;
                    }
                }
            }
            local
        };
        let partials: Vec<Vec<f64>> = if crate::par::sequential() {
            (0..n.div_ceil(chunk)).map(partial).collect()
        } else {
            (0..n.div_ceil(chunk))
                .into_par_iter()
                .map(partial)
                .collect()
        };
        if cancel.load(Ordering::Relaxed) {
            return Err(FgtError::Cancelled);
        }
        let mut coeffs = vec![0.0; width];
        for part in &partials {
            for (c, p) in coeffs.iter_mut().zip(part) {
                *c += p;
            }
        }
        let constants = self.monomials.constants();
        for block in coeffs.chunks_exact_mut(terms) {
            for (cf, k) in block.iter_mut().zip(constants) {
                *cf *= k;
            }
        }
        Ok(coeffs)
    }

    /// The coefficients of any set of sources, each assigned to its nearest centre (the
    /// assignment of [`cluster_radii`]); the coefficients of a union of source sets are the
    /// sum of theirs, which is how sources split over several machines are combined.
    pub fn coefficients_of(
        &self,
        sources: &[f64],
        weights: &[f64],
        n_weights: usize,
        cancel: &AtomicBool,
    ) -> Result<Vec<f64>> {
        let tree = KdTree::build_with(&self.centers, self.dim, 8, cancel).map_err(|e| match e {
            vastml_spatial::SpatialError::Cancelled => FgtError::Cancelled,
            e => e.into(),
        })?;
        let labels = nearest_centers(&tree, sources, self.dim)?;
        let (offsets, members) = csr_of_labels(&labels, self.n_clusters());
        let dim = self.dim;
        for (i, &c) in labels.iter().enumerate() {
            let a2 = squared_distance(
                &sources[i * dim..(i + 1) * dim],
                &self.centers[c * dim..(c + 1) * dim],
            );
            if a2.sqrt() > self.radii[c] * (1.0 + 1e-12) {
                return Err(invalid(
                    "radii",
                    format!(
                        "source {i} lies {} from its nearest centre {c}, beyond that cluster's radius {}: \
                         the radii must cover every part of the sources",
                        a2.sqrt(),
                        self.radii[c]
                    ),
                ));
            }
        }
        let terms = self.source_terms_of(sources, &offsets, &members);
        self.coefficients_csr(
            sources,
            (&offsets, &members, &terms),
            weights,
            n_weights,
            cancel,
        )
    }

    fn coefficients_csr(
        &self,
        sources: &[f64],
        (offsets, members, source_terms): (&[usize], &[usize], &[u32]),
        weights: &[f64],
        n_weights: usize,
        cancel: &AtomicBool,
    ) -> Result<Vec<f64>> {
        let terms = self.monomials.len();
        let mut coeffs = vec![0.0; self.n_clusters() * n_weights * terms];
        let cluster_block = |(c, block): (usize, &mut [f64])| {
            let (s, e) = (offsets[c], offsets[c + 1]);
            let job = ClusterSources {
                sources,
                cluster: c,
                members: &members[s..e],
                source_terms: &source_terms[s..e],
                weights,
                n_weights,
                cancel,
            };
            self.cluster_coefficients(&job, block);
        };
        let size = n_weights * terms;
        if crate::par::sequential() {
            coeffs.chunks_mut(size).enumerate().for_each(cluster_block);
        } else {
            coeffs
                .par_chunks_mut(size)
                .enumerate()
                .for_each(cluster_block);
        }
        if cancel.load(Ordering::Relaxed) {
            return Err(FgtError::Cancelled);
        }
        Ok(coeffs)
    }

    /// The coefficients of one cluster into `block` ([weight][term]); see [`ClusterSources`].
    /// The sources go [`LANES`] at a time, one per SIMD lane, each lane summing its own share
    /// of every coefficient; the lanes are added at the end. Every source contributes exactly
    /// its own terms, so the coefficients of a union of source sets are the sum of theirs up
    /// to rounding.
    fn cluster_coefficients(&self, job: &ClusterSources<'_>, block: &mut [f64]) {
        #[cfg(target_arch = "x86_64")]
        {
            if crate::kernel::has_avx2_fma() {
                // SAFETY: the CPU supports the features the function is compiled with.
                unsafe { self.cluster_coefficients_avx2(job, block) };
                return;
            }
        }
        self.cluster_coefficients_generic::<false>(job, block);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn cluster_coefficients_avx2(&self, job: &ClusterSources<'_>, block: &mut [f64]) {
        self.cluster_coefficients_generic::<true>(job, block);
    }

    #[inline(always)]
    fn cluster_coefficients_generic<const FMA: bool>(
        &self,
        job: &ClusterSources<'_>,
        block: &mut [f64],
    ) {
        let ClusterSources {
            sources,
            cluster: c,
            members,
            source_terms,
            weights,
            n_weights,
            cancel,
        } = *job;
        let dim = self.dim;
        let terms = self.monomials.len();
        let inv_h = 1.0 / self.h;
        let neg_inv_h2 = -inv_h * inv_h;
        let center = &self.centers[c * dim..(c + 1) * dim];
        let mut u = vec![[0.0f64; LANES]; dim];
        let mut mono = vec![[0.0f64; LANES]; terms];
        let mut acc = vec![[0.0f64; LANES]; n_weights * terms];
        for (gi, (group, lens)) in members
            .chunks(LANES)
            .zip(source_terms.chunks(LANES))
            .enumerate()
        {
            if (gi * LANES) % POLL_SOURCES == 0 && cancel.load(Ordering::Relaxed) {
                return;
            }
            let lanes = group.len();
            let mut d2 = [0.0f64; LANES];
            for (k, uk) in u.iter_mut().enumerate() {
                for l in 0..LANES {
                    // padding lanes repeat the last source, with weight 0 below
                    let t = sources[group[l.min(lanes - 1)] * dim + k] - center[k];
                    d2[l] = fmadd::<FMA>(t, t, d2[l]);
                    uk[l] = t * inv_h;
                }
            }
            let mut g = [0.0f64; LANES];
            for l in 0..LANES {
                g[l] = exp_nonpositive_with::<FMA, false>(d2[l] * neg_inv_h2);
            }
            // Each source keeps exactly its own terms: the terms are cut where a lane's
            // truncation ends, and each run of terms takes the lanes that keep it.
            let mut cuts = [0usize; LANES];
            for (cut, &len) in cuts.iter_mut().zip(lens) {
                *cut = len as usize;
            }
            cuts.sort_unstable();
            let len = cuts[LANES - 1];
            self.monomials.evaluate_lanes(&u, &mut mono[..len]);
            let mut start = 0;
            for &end in &cuts {
                if end <= start {
                    continue;
                }
                for w in 0..n_weights {
                    let mut qg = [0.0f64; LANES];
                    for l in 0..lanes {
                        if lens[l] as usize >= end {
                            qg[l] = weights[group[l] * n_weights + w] * g[l];
                        }
                    }
                    let run = w * terms + start..w * terms + end;
                    for (a, m) in acc[run].iter_mut().zip(&mono[start..end]) {
                        for l in 0..LANES {
                            a[l] = fmadd::<FMA>(qg[l], m[l], a[l]);
                        }
                    }
                }
                start = end;
            }
        }
        let constants = self.monomials.constants();
        for w in 0..n_weights {
            let sums = &acc[w * terms..(w + 1) * terms];
            for ((cf, a), k) in block[w * terms..(w + 1) * terms]
                .iter_mut()
                .zip(sums)
                .zip(constants)
            {
                *cf = a.iter().sum::<f64>() * k;
            }
        }
    }

    /// Step 5: evaluate at every target.
    ///
    /// Targets are grouped [`LANES`] at a time by a kd-tree over the targets, so that a group
    /// is small in space; each group visits the clusters within reach of its bounding box
    /// (through the tree over centres when there is one) and evaluates the expansion for all
    /// its targets at once, one target per SIMD lane. A lane whose target lies beyond the
    /// cluster's cut-off r + r_x^k is masked out, exactly as in the per-target algorithm,
    /// since the truncation bound only holds inside the cut-off.
    pub fn evaluate(
        &self,
        targets: &[f64],
        coeffs: &[f64],
        n_weights: usize,
        out: &mut [f64],
        cancel: &AtomicBool,
    ) -> Result<()> {
        let dim = self.dim;
        let m = targets.len() / dim;
        let (order, groups) = spatial_groups(targets, dim);
        // results in group order, scattered back at the end
        let mut sorted = vec![0.0; m * n_weights];
        const GROUPS_PER_TASK: usize = 16;
        // (first target, its groups of targets as (start, end) runs)
        type Task<'a> = (usize, &'a [(usize, usize)]);
        let tasks: Vec<Task<'_>> = groups
            .chunks(GROUPS_PER_TASK)
            .map(|g| (g[0].0, g))
            .collect();
        let mut slices: Vec<&mut [f64]> = Vec::with_capacity(tasks.len());
        let mut rest: &mut [f64] = &mut sorted;
        for (i, (first, _)) in tasks.iter().enumerate() {
            let end = tasks.get(i + 1).map_or(m, |t| t.0);
            let (head, tail) = rest.split_at_mut((end - first) * n_weights);
            slices.push(head);
            rest = tail;
        }
        let task = |((first, groups), res): (&Task<'_>, &mut [f64])| {
            if cancel.load(Ordering::Relaxed) {
                return Err(FgtError::Cancelled);
            }
            let mut scratch = GroupScratch::new(self.monomials.len(), dim);
            for &(s, e) in groups.iter() {
                let res = &mut res[(s - first) * n_weights..(e - first) * n_weights];
                self.evaluate_group(targets, &order[s..e], coeffs, n_weights, res, &mut scratch);
            }
            Ok(())
        };
        if crate::par::sequential() {
            tasks.iter().zip(slices).try_for_each(task)?;
        } else {
            tasks
                .par_iter()
                .zip(slices.into_par_iter())
                .try_for_each(task)?;
        }
        for (i, &t) in order.iter().enumerate() {
            out[t * n_weights..(t + 1) * n_weights]
                .copy_from_slice(&sorted[i * n_weights..(i + 1) * n_weights]);
        }
        Ok(())
    }

    #[inline]
    fn evaluate_group(
        &self,
        targets: &[f64],
        members: &[usize],
        coeffs: &[f64],
        n_weights: usize,
        res: &mut [f64],
        scratch: &mut GroupScratch,
    ) {
        #[cfg(target_arch = "x86_64")]
        {
            if crate::kernel::has_avx2_fma() {
                // SAFETY: the CPU supports the features the function is compiled with.
                unsafe {
                    self.evaluate_group_avx2(targets, members, coeffs, n_weights, res, scratch)
                };
                return;
            }
        }
        self.evaluate_group_generic::<false>(targets, members, coeffs, n_weights, res, scratch);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn evaluate_group_avx2(
        &self,
        targets: &[f64],
        members: &[usize],
        coeffs: &[f64],
        n_weights: usize,
        res: &mut [f64],
        scratch: &mut GroupScratch,
    ) {
        self.evaluate_group_generic::<true>(targets, members, coeffs, n_weights, res, scratch);
    }

    #[inline(always)]
    fn evaluate_group_generic<const FMA: bool>(
        &self,
        targets: &[f64],
        members: &[usize],
        coeffs: &[f64],
        n_weights: usize,
        res: &mut [f64],
        scratch: &mut GroupScratch,
    ) {
        let dim = self.dim;
        let terms = self.monomials.len();
        let inv_h = 1.0 / self.h;
        let neg_inv_h2 = -inv_h * inv_h;
        let lanes = members.len();
        // gather the group's targets, one per lane (padding lanes repeat the last target)
        let y = &mut scratch.y;
        let (lo, hi) = (&mut scratch.lo, &mut scratch.hi);
        lo.fill(f64::INFINITY);
        hi.fill(f64::NEG_INFINITY);
        for l in 0..LANES {
            let t = members[l.min(lanes - 1)];
            for k in 0..dim {
                let v = targets[t * dim + k];
                y[k][l] = v;
                lo[k] = lo[k].min(v);
                hi[k] = hi[k].max(v);
            }
        }
        // clusters within reach of the group's bounding box
        let candidates = &mut scratch.candidates;
        candidates.clear();
        let box_reach = |c: usize| -> bool {
            let center = &self.centers[c * dim..(c + 1) * dim];
            let mut d2 = 0.0;
            for k in 0..dim {
                let t = (lo[k] - center[k]).max(center[k] - hi[k]).max(0.0);
                d2 += t * t;
            }
            d2 <= self.reach_sq[c]
        };
        match &self.center_tree {
            Some(tree) => {
                let mid: Vec<f64> = (0..dim).map(|k| 0.5 * (lo[k] + hi[k])).collect();
                let half = (0..dim)
                    .map(|k| 0.25 * (hi[k] - lo[k]) * (hi[k] - lo[k]))
                    .sum::<f64>()
                    .sqrt();
                let radius = self.cutoff + self.max_radius() + half;
                tree.for_each_within_radius(&mid, radius, |c, _| {
                    if box_reach(c) {
                        candidates.push(c);
                    }
                });
                candidates.sort_unstable();
            }
            None => candidates.extend((0..self.radii.len()).filter(|&c| box_reach(c))),
        }
        let mut acc = [[0.0f64; LANES]; MAX_W_LANES];
        for w0 in (0..n_weights).step_by(MAX_W_LANES) {
            let nw = (n_weights - w0).min(MAX_W_LANES);
            for a in acc.iter_mut() {
                *a = [0.0; LANES];
            }
            for &c in candidates.iter() {
                let center = &self.centers[c * dim..(c + 1) * dim];
                let mut d2 = [0.0f64; LANES];
                for k in 0..dim {
                    let mut u = [0.0f64; LANES];
                    for l in 0..LANES {
                        let t = y[k][l] - center[k];
                        d2[l] = fmadd::<FMA>(t, t, d2[l]);
                        u[l] = t * inv_h;
                    }
                    scratch.u[k] = u;
                }
                // all lanes computed, then masked: branch-free, so it vectorises
                let reach = self.reach_sq[c];
                let mut g = [0.0f64; LANES];
                for l in 0..LANES {
                    let e = exp_nonpositive_with::<FMA, false>(d2[l] * neg_inv_h2);
                    g[l] = if d2[l] <= reach && l < lanes { e } else { 0.0 };
                }
                if g.iter().all(|&v| v == 0.0) {
                    continue;
                }
                // terms needed by the farthest target of the group still in reach
                let b2 = d2[..lanes]
                    .iter()
                    .filter(|&&v| v <= reach)
                    .fold(0.0f64, |m, &v| m.max(v));
                let b = b2.sqrt();
                // the limits rise with p: counted without a branch, as for the sources
                let p = 1 + self.target_limits[c]
                    .iter()
                    .map(|&lim| usize::from(b > lim))
                    .sum::<usize>();
                let used = self.monomials.prefix_len(p - 1);
                self.monomials
                    .evaluate_lanes(&scratch.u, &mut scratch.mono[..used]);
                let base = c * n_weights * terms;
                for (w, a) in acc.iter_mut().enumerate().take(nw) {
                    let cf = &coeffs[base + (w0 + w) * terms..base + (w0 + w) * terms + used];
                    // four running sums over interleaved terms, so that the multiply-adds
                    // do not each wait on the previous one's result
                    let mut s4 = [[0.0f64; LANES]; 4];
                    let mono = &scratch.mono[..used];
                    let (cf4, cf_rest) = cf.split_at(used - used % 4);
                    for (c4, m4) in cf4.chunks_exact(4).zip(mono.chunks_exact(4)) {
                        for j in 0..4 {
                            for l in 0..LANES {
                                s4[j][l] = fmadd::<FMA>(c4[j], m4[j][l], s4[j][l]);
                            }
                        }
                    }
                    for (j, (coef, m)) in cf_rest.iter().zip(&mono[used - used % 4..]).enumerate() {
                        for l in 0..LANES {
                            s4[j][l] = fmadd::<FMA>(*coef, m[l], s4[j][l]);
                        }
                    }
                    let mut s = [0.0f64; LANES];
                    for l in 0..LANES {
                        s[l] = (s4[0][l] + s4[1][l]) + (s4[2][l] + s4[3][l]);
                    }
                    for l in 0..LANES {
                        a[l] = fmadd::<FMA>(g[l], s[l], a[l]);
                    }
                }
            }
            for l in 0..lanes {
                for (w, a) in acc.iter().enumerate().take(nw) {
                    res[l * n_weights + w0 + w] = a[l];
                }
            }
        }
    }

    /// Mean number of clusters within reach of the given sample of targets.
    pub fn mean_clusters_in_reach(&self, sample: &[f64]) -> f64 {
        self.work_in_reach(sample).0
    }

    /// Mean number of clusters within reach of the given sample of targets, and the mean
    /// number of expansion terms a (target, cluster in reach) pair evaluates after the
    /// target-side truncation (each target on its own: a group of targets evaluates the terms
    /// of its farthest one, a little more).
    pub(crate) fn work_in_reach(&self, sample: &[f64]) -> (f64, f64) {
        let dim = self.dim;
        let m = sample.len() / dim;
        if m == 0 {
            return (self.n_clusters() as f64, self.n_terms() as f64);
        }
        let (mut pairs, mut terms) = (0usize, 0usize);
        for y in sample.chunks_exact(dim) {
            for c in 0..self.n_clusters() {
                let d2 = squared_distance(y, &self.centers[c * dim..(c + 1) * dim]);
                if d2 <= self.reach_sq[c] {
                    let b = d2.sqrt();
                    let p = 1 + self.target_limits[c]
                        .iter()
                        .take_while(|&&lim| b > lim)
                        .count();
                    terms += self.monomials.prefix_len(p - 1);
                    pairs += 1;
                }
            }
        }
        let per_pair = if pairs == 0 {
            0.0
        } else {
            terms as f64 / pairs as f64
        };
        (pairs as f64 / m as f64, per_pair)
    }

    /// Mean number of expansion terms a source contributes to its cluster's coefficients
    /// (after the source-side truncation).
    pub(crate) fn mean_source_terms(&self) -> f64 {
        if self.source_terms.is_empty() {
            return self.n_terms() as f64;
        }
        self.source_terms.iter().map(|&t| f64::from(t)).sum::<f64>()
            / self.source_terms.len() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bound for `p` terms meets epsilon at every source distance of an even grid over
    /// [0, `a.0`] (`a.1` steps) and target distance over [0, `b.0`] (`b.1` steps).
    fn assert_bound_holds(p: usize, a: (f64, usize), b: (f64, usize), h: f64, eps: f64) {
        for i in 0..=a.1 {
            let x = a.0 * i as f64 / a.1 as f64;
            for j in 0..=b.1 {
                let y = b.0 * j as f64 / b.1 as f64;
                let e = crate::bounds::log_truncation_error(p, x, y, h);
                assert!(e <= eps.ln() + 1e-9, "h={h} p={p} a={x} b={y}: {e}");
            }
        }
    }

    /// Within the target limit, p terms meet epsilon for every source and target distance
    /// (brute force on a grid), and just past it they do not for some source.
    #[test]
    fn target_limit_is_safe_and_tight() {
        let eps = 1e-6;
        for &(h, radius, reach) in &[(0.1, 0.05, 0.42), (0.5, 0.3, 2.0), (0.2, 0.15, 0.7)] {
            for p in 1..14 {
                let limit = target_limit(p, radius, reach, h, eps);
                assert!((0.0..=reach).contains(&limit));
                assert_bound_holds(p, (radius, 60), (limit, 60), h, eps);
                if limit < reach {
                    let b = limit + 1e-3 * reach;
                    let worst = (0..=2000)
                        .map(|j| {
                            crate::bounds::log_truncation_error(p, radius * j as f64 / 2000.0, b, h)
                        })
                        .fold(f64::NEG_INFINITY, f64::max);
                    assert!(worst > eps.ln(), "limit not tight: h={h} p={p}");
                }
            }
        }
    }

    /// A source covered first by the limit of p terms gets the smallest p meeting the bound
    /// (the truncation number, brute force over p), and within every limit the bound
    /// holds against every target within reach; just past a limit below the radius it fails.
    /// The largest feasible radius is feasible, and 1/2048 of the range more is not.
    #[test]
    fn largest_feasible_radius_is_the_edge_of_feasibility() {
        for (dim, h, eps) in [
            (2, 0.1, 1e-6),
            (6, 0.05, 1e-9),
            (10, 0.01, 1e-9),
            (3, 2.0, 1e-3),
        ] {
            let problem = IfgtProblem::on_unit_range(1000, 1000, dim, h, eps);
            let r = problem.largest_feasible_radius();
            assert!(problem.candidate(1, r).is_some(), "{dim} {h} {eps}");
            if r < problem.range {
                assert!(r > 0.0);
                assert!(problem.candidate(1, r + problem.range / 2048.0).is_none());
            }
        }
    }

    #[test]
    fn source_limits_give_each_source_its_truncation_number() {
        let eps = 1e-7;
        for &(h, radius, cutoff) in &[(0.1, 0.05, 0.4), (0.5, 0.45, 2.0), (0.2, 0.3, 0.7)] {
            let reach = cutoff + radius;
            let p_max = truncation_number(radius, reach, h, eps, MAX_TRUNCATION).unwrap();
            let limits: Vec<f64> = (1..p_max)
                .map(|p| largest_radius_within(p, radius, reach, h, eps))
                .collect();
            for (i, &limit) in limits.iter().enumerate() {
                let p = i + 1;
                assert_bound_holds(p, (limit, 40), (reach, 80), h, eps);
                if limit < radius {
                    let a = limit + radius / 2048.0;
                    let e = crate::bounds::log_worst_error(p, a, reach, h);
                    assert!(e > eps.ln(), "limit not tight: h={h} p={p}");
                }
            }
            for j in 0..=500 {
                let a = radius * j as f64 / 500.0;
                // counted as the plan counts them (the limits rise with p, next test)
                let first = 1 + limits.iter().filter(|&&l| a > l).count();
                let want = truncation_number(a, reach, h, eps, MAX_TRUNCATION).unwrap();
                // the limits are found to 1/4096 of the radius: in that sliver below a limit
                // a source gets more terms than it needs, never fewer
                let sliver = first > want && a - limits[want - 1] <= radius / 4096.0;
                assert!(
                    first == want || sliver,
                    "h={h} a={a}: {first} terms, needs {want}"
                );
            }
        }
    }

    /// The source and target limits never fall as p grows, so the number of terms a plan gives
    /// a distance (the count of limits below it) is the first p whose limit covers it.
    #[test]
    fn limits_rise_with_the_truncation() {
        let mut checked = 0;
        for &eps in &[1e-3, 1e-7, 1e-12] {
            for &h in &[0.05, 0.3, 1.5] {
                for &radius in &[0.01, 0.1, 0.5, 2.0] {
                    for &cutoff in &[0.2 * h, h, 5.0 * h] {
                        let reach = cutoff + radius;
                        let Some(p_max) = truncation_number(radius, reach, h, eps, MAX_TRUNCATION)
                        else {
                            continue;
                        };
                        let (sources, targets) = limits_by_radius(&[radius], p_max, cutoff, h, eps);
                        for limits in [&sources[0], &targets[0]] {
                            assert!(
                                limits.windows(2).all(|w| w[0] <= w[1]),
                                "eps={eps} h={h} radius={radius} cutoff={cutoff}: {limits:?}"
                            );
                            checked += usize::from(limits.len() >= 3);
                        }
                    }
                }
            }
        }
        assert!(checked >= 40, "only {checked} sets of three or more limits");
    }

    /// The pruned search of the uniform model (no K when the largest reaches no epsilon; no
    /// K past the one whose M d K exceeds the best cost) gives exactly the parameters of the
    /// full search, over dimensions, ranges, bandwidths, accuracies and sizes.
    #[test]
    fn pruned_uniform_search_equals_the_full_one() {
        fn full(problem: &IfgtProblem) -> Option<IfgtParameters> {
            let limit = problem.k_limit();
            let mut best = None;
            let mut k = 1usize;
            while k <= limit {
                let rx = problem.range * (k as f64).powf(-1.0 / problem.dim as f64);
                keep_cheaper(&mut best, problem.candidate(k, rx));
                k = if k < 64 {
                    k + 1
                } else {
                    (k + k / 20).min(limit.max(k + 1))
                };
                if k == limit {
                    let rx = problem.range * (k as f64).powf(-1.0 / problem.dim as f64);
                    keep_cheaper(&mut best, problem.candidate(k, rx));
                    break;
                }
            }
            best
        }
        let (mut some, mut none) = (0, 0);
        for dim in 1..=10 {
            for &h in &[0.003, 0.02, 0.1, 0.4, 1.5, 6.0] {
                for &eps in &[1e-3, 1e-6, 1e-10] {
                    for &(n, m) in &[(1000, 30_000), (50_000, 2000), (1_000_000, 1_000_000)] {
                        let problem = IfgtProblem::on_unit_range(n, m, dim, h, eps);
                        let got = choose_parameters_uniform(&problem);
                        assert_eq!(got, full(&problem), "d={dim} h={h} eps={eps} n={n} m={m}");
                        if got.is_some() {
                            some += 1;
                        } else {
                            none += 1;
                        }
                    }
                }
            }
        }
        assert!(some > 100 && none > 100, "{some} {none}");
    }

    /// On a line with a few far outliers the uniform model over the whole range reaches no
    /// epsilon; the intervals sized on the bulk of the sources do, and the IFGT (and auto,
    /// whichever it picks) meets epsilon against the direct sum, with signed weights, at
    /// targets in the bulk, at the outliers and between them.
    #[test]
    fn a_line_with_far_outliers_gets_intervals_sized_on_its_bulk() {
        use crate::{GaussTransform, Method, direct_reference};
        let n = 6000;
        let u = crate::testing::uniform(3 * n, 11);
        // a blob of about unit spread, and 0.5% of the points 100-10,000 away
        let x: Vec<f64> = (0..n)
            .map(|i| {
                let blob = (u[3 * i] + u[3 * i + 1] + u[3 * i + 2] - 1.5) * 2.0;
                if i % 200 == 7 {
                    let far = 10f64.powf(2.0 + 2.0 * u[3 * i]);
                    if i % 400 == 7 { far } else { -far }
                } else {
                    blob
                }
            })
            .collect();
        let q: Vec<f64> = u.iter().take(n).map(|v| v - 0.3).collect();
        let qsum: f64 = q.iter().map(|v| v.abs()).sum();
        let mut y: Vec<f64> = x.iter().step_by(37).copied().collect();
        y.extend([-3.0, 0.0, 2.5, 50.0, -7000.0]);
        let cancel = AtomicBool::new(false);
        for (h, eps) in [(0.07, 1.5e-4), (0.02, 1e-8), (0.3, 1e-6)] {
            let full = IfgtProblem {
                n_sources: n,
                n_targets: y.len(),
                dim: 1,
                range: 2e4,
                bandwidth: h,
                epsilon: eps,
                cutoff: crate::cutoff_radius(h, eps, None),
                max_clusters: usize::MAX,
            };
            assert!(choose_parameters_uniform(&full).is_none(), "h={h}");
            let exact = direct_reference(&x, &y, 1, &q, 1, h);
            for method in [Method::Ifgt, Method::IfgtTree, Method::Auto] {
                let gt = GaussTransform::new(&x, 1, h, eps, method).unwrap();
                let g = gt.evaluate(&y, &q, 1, &cancel).unwrap();
                for (j, (a, b)) in g.iter().zip(&exact).enumerate() {
                    assert!(
                        (a - b).abs() <= eps * qsum,
                        "h={h} {method}: target {j}: {a} against {b}"
                    );
                }
            }
        }
        // the intervals of a given width cover every point, in order, with no empty one
        let c = intervals_of_width(&x, 0.05).unwrap();
        let (offsets, members) = c.members();
        assert!(c.n_clusters() > 100 && members.len() == n);
        assert!(offsets.windows(2).all(|w| w[1] > w[0]));
        assert!(intervals_of_width(&x, 0.0).is_none());
    }

    #[test]
    fn radix_sort_matches_a_comparison_sort() {
        let mut state = 7u64;
        let mut items: Vec<(u64, u32)> = (0..5000u32)
            .map(|i| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                ((state >> 30) & ((1 << 34) - 1), i)
            })
            .collect();
        let mut expect = items.clone();
        expect.sort(); // stable on (key, index) = stable on key, since indices ascend
        radix_sort(&mut items, 34);
        assert_eq!(items, expect);
    }

    /// The table's key is the bit-by-bit interleave, in every number of coordinates.
    #[test]
    fn interleaved_keys_match_the_bit_loop() {
        let mut state = 11u64;
        for used in 1..=6usize {
            let bits = (63 / used).min(20) as u32;
            let spread = Interleave::new(used, bits);
            for _ in 0..500 {
                let cells: Vec<u64> = (0..used)
                    .map(|_| {
                        state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                        (state >> 20) & ((1 << bits) - 1)
                    })
                    .collect();
                let mut expect = 0u64;
                for b in (0..bits).rev() {
                    for c in &cells {
                        expect = (expect << 1) | ((c >> b) & 1);
                    }
                }
                let key = cells
                    .iter()
                    .enumerate()
                    .fold(0, |acc, (k, &c)| acc | (spread.spread(c) << (used - 1 - k)));
                assert_eq!(key, expect, "{used} {cells:?}");
            }
        }
    }

    /// Keys sharing their high digits (a skipped pass) still come out sorted.
    #[test]
    fn radix_sort_skips_shared_digits() {
        let mut items: Vec<(u64, u32)> = (0..3000u32)
            .map(|i| {
                (
                    (1 << 40) | u64::from(i.wrapping_mul(2_654_435_761) % 1777),
                    i,
                )
            })
            .collect();
        let mut expect = items.clone();
        expect.sort();
        radix_sort(&mut items, 60);
        assert_eq!(items, expect);
    }

    #[test]
    fn spatial_groups_cover_every_target_once_in_groups_of_lanes() {
        let targets: Vec<f64> = (0..1003 * 3).map(|i| ((i * 7919) % 997) as f64).collect();
        let (order, groups) = spatial_groups(&targets, 3);
        let mut seen = order.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..1003).collect::<Vec<_>>());
        assert!(groups.iter().all(|&(s, e)| e > s && e - s <= LANES));
        assert_eq!(groups.last().map(|g| g.1), Some(1003));
    }
}
