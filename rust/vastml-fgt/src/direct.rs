//! Exact evaluation: the direct O(MN) sum, and the direct sum restricted by a kd-tree to
//! the sources within the cut-off h sqrt(ln(1/epsilon)) of each target.

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;
use vastml_spatial::KdTree;

use crate::error::{FgtError, Result};
use crate::kernel::{BLOCK, SoaPoints, accumulate, weight_columns};

/// Targets handled by one parallel task.
const TARGET_CHUNK: usize = 64;

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
        out.par_chunks_mut(TARGET_CHUNK * n_weights)
            .enumerate()
            .try_for_each(|(chunk, out_chunk)| {
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
                let mut s = 0;
                while s < n {
                    let e = (s + BLOCK).min(n);
                    for (t, o) in out_chunk.chunks_mut(n_weights).enumerate() {
                        let y = &prepared[t * dim..(t + 1) * dim];
                        accumulate(y, norms[t], &self.sources, &wcols, s, e, o);
                    }
                    s = e;
                }
                Ok(())
            })
    }
}

/// Direct sum over the sources that a kd-tree finds within the cut-off of each target.
#[derive(Debug)]
pub(crate) struct TreePlan {
    tree: KdTree,
    /// Sources in tree order, struct-of-arrays.
    sources: SoaPoints,
    radius: f64,
}

/// Leaf size of the source tree: leaves are evaluated with the vectorised kernel.
const LEAF_SIZE: usize = 32;

impl TreePlan {
    pub fn new(sources: &[f64], dim: usize, h: f64, epsilon: f64, radius: f64) -> Result<Self> {
        let tree = KdTree::build(sources, dim, LEAF_SIZE)?;
        let soa = SoaPoints::new(tree.points_in_tree_order(), dim, None, h, epsilon);
        Ok(TreePlan {
            tree,
            sources: soa,
            radius,
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
        out.par_chunks_mut(TARGET_CHUNK * n_weights)
            .enumerate()
            .try_for_each(|(chunk, out_chunk)| {
                if cancel.load(Ordering::Relaxed) {
                    return Err(FgtError::Cancelled);
                }
                let first = chunk * TARGET_CHUNK;
                let mut prepared = vec![0.0; dim];
                for (t, o) in out_chunk.chunks_mut(n_weights).enumerate() {
                    let y = &targets[(first + t) * dim..(first + t + 1) * dim];
                    let norm = self.sources.prepare_target(y, &mut prepared);
                    self.tree
                        .for_each_leaf_within_radius(y, self.radius, |start, end, _| {
                            accumulate(&prepared, norm, &self.sources, &wcols, start, end, o);
                        });
                }
                Ok(())
            })
    }

    /// Mean number of sources in the leaves reached from the given sample of targets.
    pub fn mean_sources_in_reach(&self, sample: &[f64]) -> (f64, f64) {
        let dim = self.sources.dim;
        let m = sample.len() / dim;
        if m == 0 {
            return (self.sources.n as f64, 1.0);
        }
        let (mut pts, mut leaves) = (0usize, 0usize);
        for y in sample.chunks_exact(dim) {
            self.tree
                .for_each_leaf_within_radius(y, self.radius, |s, e, _| {
                    pts += e - s;
                    leaves += 1;
                });
        }
        (pts as f64 / m as f64, leaves as f64 / m as f64)
    }
}
