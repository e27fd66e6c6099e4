//! The improved fast Gauss transform (Algorithms 1 and 2 of the thesis) with an optional
//! kd-tree over the cluster centres (the FIGTree regime for many clusters).

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;
use vastml_spatial::{FarthestPoint, KdTree, squared_distance};

use crate::bounds::{MAX_TRUNCATION, truncation_number};
use crate::error::{FgtError, Result, invalid};
use crate::exp::exp_nonpositive;
use crate::monomials::{Monomials, n_terms};

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

/// Algorithm 1 on the uniform-data model (no clustering): r_x ~ range * K^(-1/d).
/// Cheap; used to decide whether clustering is worth trying. `None` when no K reaches epsilon.
pub fn choose_parameters_uniform(
    n: usize,
    m: usize,
    dim: usize,
    range: f64,
    h: f64,
    epsilon: f64,
    cutoff: f64,
) -> Option<IfgtParameters> {
    let k_lim = max_clusters(n, dim, range, h);
    let mut best: Option<IfgtParameters> = None;
    for k in 1..=k_lim {
        let rx = range * (k as f64).powf(-1.0 / dim as f64);
        let Some(p) = truncation_number(rx, cutoff + rx, h, epsilon, MAX_TRUNCATION) else {
            continue;
        };
        if n_terms(dim, p - 1) > MAX_TERMS {
            continue;
        }
        let cost = ifgt_cost(n, m, dim, k, rx, cutoff, p);
        if best.is_none_or(|b| cost < b.cost) {
            best = Some(IfgtParameters {
                n_clusters: k,
                truncation: p,
                cutoff,
                max_radius: rx,
                cost,
            });
        }
    }
    best
}

/// Algorithm 1 with the real farthest-point radii: grows the clustering one centre at a
/// time (the first k centres never move) and keeps the K of least cost. `None` when no
/// K up to the limit reaches epsilon within [`MAX_TRUNCATION`] terms.
#[allow(clippy::too_many_arguments)]
pub fn choose_parameters(
    sources: &[f64],
    dim: usize,
    n_targets: usize,
    range: f64,
    h: f64,
    epsilon: f64,
    cutoff: f64,
    cancel: &AtomicBool,
) -> Result<Option<IfgtParameters>> {
    let n = sources.len() / dim;
    let k_lim = max_clusters(n, dim, range, h);
    let mut fp = FarthestPoint::new(sources, dim, 0)?;
    let mut best: Option<IfgtParameters> = None;
    for k in 1..=k_lim {
        if k > 1 && !fp.add_center() {
            break;
        }
        if cancel.load(Ordering::Relaxed) {
            return Err(FgtError::Cancelled);
        }
        // Once the search over K centres alone costs more than the best plan, stop.
        if let Some(b) = best {
            if n_targets as f64 * dim as f64 * k as f64 > b.cost {
                break;
            }
        }
        let rx = fp.max_radius();
        let Some(p) = truncation_number(rx, cutoff + rx, h, epsilon, MAX_TRUNCATION) else {
            continue;
        };
        if n_terms(dim, p - 1) > MAX_TERMS {
            continue;
        }
        let cost = ifgt_cost(n, n_targets, dim, k, rx, cutoff, p);
        if best.is_none_or(|b| cost < b.cost) {
            best = Some(IfgtParameters {
                n_clusters: k,
                truncation: p,
                cutoff,
                max_radius: rx,
                cost,
            });
        }
    }
    Ok(best)
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
    monomials: Monomials,
    truncation: usize,
    cutoff: f64,
    center_tree: Option<KdTree>,
}

impl IfgtPlan {
    /// Algorithm 2, steps 2-4 (without the weights): cluster into K clusters, re-centre
    /// each cluster on the better of its seed and its mean with the radius *recomputed*
    /// about that centre (the public code keeps stale radii), update p_max from the actual
    /// radius, and pick each source's truncation.
    pub fn new(
        sources: &[f64],
        dim: usize,
        h: f64,
        epsilon: f64,
        n_clusters: usize,
        cutoff: f64,
        use_tree: bool,
    ) -> Result<Self> {
        let n = sources.len() / dim;
        let mut fp = FarthestPoint::new(sources, dim, 0)?;
        fp.grow_to(n_clusters.clamp(1, n));
        let clustering = fp.clustering();
        let k = clustering.n_clusters();
        let (offsets, members) = clustering.members();
        // Choose per cluster the centre (seed or mean) with the smaller radius.
        let mut centers = clustering.centers.clone();
        let mut radii = clustering.radii.clone();
        for (c, &seed) in fp.seed_indices().iter().enumerate().take(k) {
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
        let rx = radii.iter().copied().fold(0.0f64, f64::max);
        let truncation = truncation_number(rx, cutoff + rx, h, epsilon, MAX_TRUNCATION)
            .ok_or_else(|| {
                invalid(
                    "method",
                    format!(
                        "the IFGT cannot reach epsilon={epsilon:e} with {k} clusters at bandwidth {h} \
                         (more than {MAX_TRUNCATION} terms needed); use 'direct-tree' or 'auto'"
                    ),
                )
            })?;
        if n_terms(dim, truncation - 1) > MAX_TERMS {
            return Err(invalid(
                "method",
                format!(
                    "the IFGT would need {} terms per cluster in {dim} dimensions; use 'direct' or 'auto'",
                    n_terms(dim, truncation - 1)
                ),
            ));
        }
        let monomials = Monomials::new(dim, truncation - 1);
        // Per-source truncation p_i: smallest p meeting the bound for this source's radius.
        let mut source_terms = vec![0u32; n];
        for c in 0..k {
            let reach = cutoff + radii[c];
            let center = &centers[c * dim..(c + 1) * dim];
            for (slot, &i) in source_terms[offsets[c]..offsets[c + 1]]
                .iter_mut()
                .zip(&members[offsets[c]..offsets[c + 1]])
            {
                let a = squared_distance(&sources[i * dim..(i + 1) * dim], center).sqrt();
                let p = truncation_number(a, reach, h, epsilon, truncation).unwrap_or(truncation);
                *slot = monomials.prefix_len(p - 1) as u32;
            }
        }
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
            offsets,
            members,
            source_terms,
            monomials,
            truncation,
            cutoff,
            center_tree,
        })
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

    pub fn has_tree(&self) -> bool {
        self.center_tree.is_some()
    }

    pub fn max_radius(&self) -> f64 {
        self.radii.iter().copied().fold(0.0, f64::max)
    }

    /// Coefficients C^k_alpha for every weight column, laid out [cluster][weight][term]
    /// (eq. 2.25), computed in parallel over clusters (deterministic).
    pub fn coefficients(&self, sources: &[f64], weights: &[f64], n_weights: usize) -> Vec<f64> {
        let dim = self.dim;
        let terms = self.monomials.len();
        let inv_h = 1.0 / self.h;
        let neg_inv_h2 = -inv_h * inv_h;
        let mut coeffs = vec![0.0; self.n_clusters() * n_weights * terms];
        coeffs
            .par_chunks_mut(n_weights * terms)
            .enumerate()
            .for_each(|(c, block)| {
                let center = &self.centers[c * dim..(c + 1) * dim];
                let mut u = vec![0.0; dim];
                let mut mono = vec![0.0; terms];
                for slot in self.offsets[c]..self.offsets[c + 1] {
                    let i = self.members[slot];
                    let x = &sources[i * dim..(i + 1) * dim];
                    let mut d2 = 0.0;
                    for kk in 0..dim {
                        let t = x[kk] - center[kk];
                        d2 += t * t;
                        u[kk] = t * inv_h;
                    }
                    let len = self.source_terms[slot] as usize;
                    self.monomials.evaluate(&u, &mut mono[..len]);
                    let g = exp_nonpositive(d2 * neg_inv_h2);
                    for w in 0..n_weights {
                        let qg = weights[i * n_weights + w] * g;
                        if qg == 0.0 {
                            continue;
                        }
                        let row = &mut block[w * terms..w * terms + len];
                        for (cf, m) in row.iter_mut().zip(&mono[..len]) {
                            *cf += qg * m;
                        }
                    }
                }
                let constants = self.monomials.constants();
                for w in 0..n_weights {
                    for (cf, k) in block[w * terms..(w + 1) * terms].iter_mut().zip(constants) {
                        *cf *= k;
                    }
                }
            });
        coeffs
    }

    /// Step 5: evaluate at every target (parallel over targets).
    pub fn evaluate(
        &self,
        targets: &[f64],
        coeffs: &[f64],
        n_weights: usize,
        out: &mut [f64],
        cancel: &AtomicBool,
    ) -> Result<()> {
        let dim = self.dim;
        let terms = self.monomials.len();
        let inv_h = 1.0 / self.h;
        let neg_inv_h2 = -inv_h * inv_h;
        let max_reach = self.cutoff + self.max_radius();
        const CHUNK: usize = 128;
        out.par_chunks_mut(CHUNK * n_weights)
            .enumerate()
            .try_for_each(|(chunk, out_chunk)| {
                if cancel.load(Ordering::Relaxed) {
                    return Err(FgtError::Cancelled);
                }
                let mut u = vec![0.0; dim];
                let mut mono = vec![0.0; terms];
                let first = chunk * CHUNK;
                for (t, o) in out_chunk.chunks_mut(n_weights).enumerate() {
                    let y = &targets[(first + t) * dim..(first + t + 1) * dim];
                    let mut visit = |c: usize, d2: f64| {
                        if d2 > self.reach_sq[c] {
                            return;
                        }
                        let center = &self.centers[c * dim..(c + 1) * dim];
                        for kk in 0..dim {
                            u[kk] = (y[kk] - center[kk]) * inv_h;
                        }
                        self.monomials.evaluate(&u, &mut mono);
                        let g = exp_nonpositive(d2 * neg_inv_h2);
                        let base = c * n_weights * terms;
                        for (w, ow) in o.iter_mut().enumerate() {
                            let cf = &coeffs[base + w * terms..base + (w + 1) * terms];
                            let s: f64 = cf.iter().zip(&mono).map(|(a, b)| a * b).sum();
                            *ow += g * s;
                        }
                    };
                    match &self.center_tree {
                        Some(tree) => tree.for_each_within_radius(y, max_reach, &mut visit),
                        None => {
                            for c in 0..self.radii.len() {
                                let center = &self.centers[c * dim..(c + 1) * dim];
                                // partial distance with early exit (section 2.5.8)
                                let limit = self.reach_sq[c];
                                let mut d2 = 0.0;
                                for kk in 0..dim {
                                    let t = y[kk] - center[kk];
                                    d2 += t * t;
                                    if d2 > limit {
                                        break;
                                    }
                                }
                                visit(c, d2);
                            }
                        }
                    }
                }
                Ok(())
            })
    }

    /// Mean number of clusters within reach of the given sample of targets.
    pub fn mean_clusters_in_reach(&self, sample: &[f64]) -> f64 {
        let dim = self.dim;
        let m = sample.len() / dim;
        if m == 0 {
            return self.n_clusters() as f64;
        }
        let mut count = 0usize;
        for y in sample.chunks_exact(dim) {
            for c in 0..self.n_clusters() {
                if squared_distance(y, &self.centers[c * dim..(c + 1) * dim]) <= self.reach_sq[c] {
                    count += 1;
                }
            }
        }
        count as f64 / m as f64
    }
}
