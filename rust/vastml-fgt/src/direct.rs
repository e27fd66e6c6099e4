//! Exact evaluation: the direct O(MN) sum, and the direct sum restricted by a kd-tree to
//! the sources within the cut-off h sqrt(ln(1/epsilon)) of each target.

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;
use vastml_spatial::{KdTree, squared_distance};

use crate::error::{FgtError, Result};
use crate::ifgt::morton_order;
use crate::kernel::{BLOCK, SoaPoints, accumulate, weight_columns};

/// Targets handled by one parallel task.
const TARGET_CHUNK: usize = 64;

/// Sources per block so that a block's coordinates, norms and weights (about 16 KiB)
/// stay in L1 while every target of a task passes over them.
fn block_len(dim: usize, n_weights: usize) -> usize {
    let per_source = 8 * (dim + 1 + n_weights);
    ((16 * 1024 / per_source) / 16 * 16).clamp(64, BLOCK)
}

/// The direct sum over all sources (vectorised, parallel over targets).
#[derive(Debug)]
pub(crate) struct DirectPlan {
    sources: SoaPoints,
}

impl DirectPlan {
    pub fn new(sources: &[f64], dim: usize, h: f64, epsilon: f64) -> Self {
        DirectPlan {
            sources: SoaPoints::new(sources, dim, None, h, epsilon),
        }
    }

    pub fn evaluate(
        &self,
        targets: &[f64],
        weights: &[f64],
        n_weights: usize,
        out: &mut [f64],
        cancel: &AtomicBool,
    ) -> Result<()> {
        let dim = self.sources.dim;
        let n = self.sources.n;
        let wcols = weight_columns(weights, n_weights, None);
        let body = |(chunk, out_chunk): (usize, &mut [f64])| -> Result<()> {
            if cancel.load(Ordering::Relaxed) {
                return Err(FgtError::Cancelled);
            }
            let first = chunk * TARGET_CHUNK;
            let count = out_chunk.len() / n_weights;
            let mut prepared = vec![0.0; count * dim];
            let norms: Vec<f64> = (0..count)
                .map(|t| {
                    let y = &targets[(first + t) * dim..(first + t + 1) * dim];
                    self.sources
                        .prepare_target(y, &mut prepared[t * dim..(t + 1) * dim])
                })
                .collect();
            // Source blocks outside, targets inside: a block stays in L1 across targets.
            let block = block_len(dim, n_weights);
            let mut s = 0;
            while s < n {
                let e = (s + block).min(n);
                for (t, o) in out_chunk.chunks_mut(n_weights).enumerate() {
                    let y = &prepared[t * dim..(t + 1) * dim];
                    accumulate(y, norms[t], &self.sources, &wcols, s, e, o);
                }
                s = e;
            }
            Ok(())
        };
        let size = TARGET_CHUNK * n_weights;
        if crate::par::sequential() {
            out.chunks_mut(size).enumerate().try_for_each(body)
        } else {
            out.par_chunks_mut(size).enumerate().try_for_each(body)
        }
    }
}

/// Direct sum over the sources that a kd-tree finds within the cut-off of each target.
#[derive(Debug)]
pub(crate) struct TreePlan {
    tree: KdTree,
    /// Sources in tree order, struct-of-arrays.
    sources: SoaPoints,
    radius: f64,
    /// Whether the radius reaches much of the tree: the leaves are then found by testing
    /// every box ([`KdTree::for_each_leaf_within_large_radius`]).
    wide: bool,
}

/// Leaf size of the source tree: leaves are evaluated with the vectorised kernel.
const LEAF_SIZE: usize = 32;
/// Up to this size (points, norms and weights) the tree is not searched in the targets'
/// Morton order: it stays in the L2 cache in any order.
const SMALL_TREE_BYTES: usize = 256 * 1024;

/// Targets of the sample on which [`TreePlan::new`] decides whether to skip chunks.
const SKIP_SAMPLE: usize = 64;
/// Leaves reached after which that sample is enough.
const SKIP_LEAVES: usize = 256;
/// Share of empty leaves reached below which the search tests every box (measured in 6-D
/// and 8-D: the running bound cost 5-8% when every leaf holds sources in reach).
const WIDE_SHARE: f64 = 0.5;
/// Share of the leaves reached that hold no source within reach above which the kernel
/// tests chunks of sources for being out of reach. Measured on the sums grid: the share is
/// above 0.9 or below 0.15 in most cases; at 0.6 (3-D) the test still cost 5%.
const SKIP_SHARE: f64 = 0.8;

impl TreePlan {
    /// The tree over `sources`. On `sample` (some targets, or the sources) it measures the
    /// share of the leaves reached that hold no source in reach, which decides whether the
    /// kernel skips chunks of sources out of reach ([`SoaPoints::skipping_beyond`]) and how
    /// the leaves are searched (`wide`).
    pub fn new(
        sources: &[f64],
        dim: usize,
        h: f64,
        epsilon: f64,
        radius: f64,
        sample: &[f64],
    ) -> Result<Self> {
        let tree = KdTree::build(sources, dim, LEAF_SIZE)?;
        let soa = SoaPoints::new(tree.points_in_tree_order(), dim, None, h, epsilon);
        let empty = empty_leaf_share(&tree, sample, radius);
        let soa = if empty > SKIP_SHARE {
            soa.skipping_beyond(radius)
        } else {
            soa
        };
        Ok(TreePlan {
            tree,
            sources: soa,
            radius,
            wide: empty < WIDE_SHARE,
        })
    }

    pub fn radius(&self) -> f64 {
        self.radius
    }

    pub fn evaluate(
        &self,
        targets: &[f64],
        weights: &[f64],
        n_weights: usize,
        out: &mut [f64],
        cancel: &AtomicBool,
    ) -> Result<()> {
        let dim = self.sources.dim;
        let wcols = weight_columns(weights, n_weights, Some(self.tree.permutation()));
        // Targets in Morton order: consecutive targets reach the same leaves, which then stay
        // in cache (in input order each target pulls its own part of the tree from memory).
        // A tree that fits in the L2 cache stays there anyway: then the order (a sort, and a
        // scatter of the results) is skipped.
        let order =
            (self.sources.n * (dim + 2) * 8 > SMALL_TREE_BYTES).then(|| morton_order(targets, dim));
        let mut sorted = vec![0.0; if order.is_some() { out.len() } else { 0 }];
        let body = |(chunk, out_chunk): (usize, &mut [f64])| -> Result<()> {
            if cancel.load(Ordering::Relaxed) {
                return Err(FgtError::Cancelled);
            }
            let first = chunk * TARGET_CHUNK;
            let mut prepared = vec![0.0; dim];
            for (t, o) in out_chunk.chunks_mut(n_weights).enumerate() {
                let j = order.as_ref().map_or(first + t, |order| order[first + t]);
                let y = &targets[j * dim..(j + 1) * dim];
                let norm = self.sources.prepare_target(y, &mut prepared);
                // Leaves next to each other in tree order are summed as one range.
                let mut run: Option<(usize, usize)> = None;
                let mut leaf = |start, end, _| {
                    run = match run {
                        Some((a, b)) if b == start => Some((a, end)),
                        Some((a, b)) => {
                            accumulate(&prepared, norm, &self.sources, &wcols, a, b, o);
                            Some((start, end))
                        }
                        None => Some((start, end)),
                    };
                };
                if self.wide {
                    self.tree
                        .for_each_leaf_within_large_radius(y, self.radius, &mut leaf);
                } else {
                    self.tree
                        .for_each_leaf_within_radius(y, self.radius, &mut leaf);
                }
                if let Some((a, b)) = run {
                    accumulate(&prepared, norm, &self.sources, &wcols, a, b, o);
                }
            }
            Ok(())
        };
        let size = TARGET_CHUNK * n_weights;
        let dest: &mut [f64] = if order.is_some() { &mut sorted } else { out };
        if crate::par::sequential() {
            dest.chunks_mut(size).enumerate().try_for_each(body)?;
        } else {
            dest.par_chunks_mut(size).enumerate().try_for_each(body)?;
        }
        if let Some(order) = &order {
            for (&j, v) in order.iter().zip(sorted.chunks_exact(n_weights)) {
                out[j * n_weights..(j + 1) * n_weights].copy_from_slice(v);
            }
        }
        Ok(())
    }

    /// Mean number of sources in the leaves reached from the given sample of targets, and
    /// mean number of contiguous runs of such leaves (each is one kernel call).
    pub fn mean_sources_in_reach(&self, sample: &[f64]) -> (f64, f64) {
        let dim = self.sources.dim;
        let m = sample.len() / dim;
        if m == 0 {
            return (self.sources.n as f64, 1.0);
        }
        let (mut pts, mut leaves) = (0usize, 0usize);
        for y in sample.chunks_exact(dim) {
            let mut last = usize::MAX;
            self.tree
                .for_each_leaf_within_radius(y, self.radius, |s, e, _| {
                    pts += e - s;
                    if s != last {
                        leaves += 1;
                    }
                    last = e;
                });
        }
        (pts as f64 / m as f64, leaves as f64 / m as f64)
    }
}

/// Of the leaves within `radius` of up to [`SKIP_SAMPLE`] targets of `sample` (spread over
/// it; once [`SKIP_LEAVES`] leaves are reached, no more targets), the share that hold no
/// source within `radius` (0 without a sample).
fn empty_leaf_share(tree: &KdTree, sample: &[f64], radius: f64) -> f64 {
    let dim = tree.dim();
    let points = tree.points_in_tree_order();
    let step = (sample.len() / dim / SKIP_SAMPLE).max(1);
    let r2 = radius * radius;
    let (mut reached, mut empty) = (0usize, 0usize);
    for y in sample.chunks_exact(dim).step_by(step) {
        if reached >= SKIP_LEAVES {
            break;
        }
        tree.for_each_leaf_within_radius(y, radius, |s, e, _| {
            reached += 1;
            let near = points[s * dim..e * dim]
                .chunks_exact(dim)
                .any(|x| squared_distance(x, y) <= r2);
            empty += usize::from(!near);
        });
    }
    if reached == 0 {
        0.0
    } else {
        empty as f64 / reached as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_leaf_share_is_one_below_the_spacing_and_zero_above_the_spread() {
        // 400 points on a 20 x 20 lattice of spacing 1, queried at the points themselves
        // shifted by (0.5, 0.5): the nearest point is 0.71 away
        let pts: Vec<f64> = (0..400)
            .flat_map(|i| [f64::from(i % 20), f64::from(i / 20)])
            .collect();
        let tree = KdTree::build(&pts, 2, LEAF_SIZE).unwrap();
        let sample: Vec<f64> = pts.iter().map(|v| v + 0.5).collect();
        assert_eq!(empty_leaf_share(&tree, &sample, 0.7), 1.0);
        assert_eq!(empty_leaf_share(&tree, &sample, 30.0), 0.0);
        assert_eq!(empty_leaf_share(&tree, &[], 0.7), 0.0);
    }
}
