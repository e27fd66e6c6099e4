//! The epsilon-exact fast Gauss transform.
//!
//! Computes, for targets y_j and weighted sources (x_i, q_i) in d dimensions,
//!
//! ```text
//! G(y_j) = sum_i q_i exp(-||y_j - x_i||^2 / h^2)
//! ```
//!
//! with the guarantee `max_j |G_hat(y_j) - G(y_j)| / sum_i |q_i| <= epsilon` (note the
//! kernel uses h^2, not 2 sigma^2: a Gaussian of standard deviation sigma needs
//! h = sqrt(2) sigma). Four methods, after V. C. Raykar's thesis and FIGTree:
//!
//! | method | what it does | good for |
//! |---|---|---|
//! | [`Method::Direct`] | the O(MN) sum, vectorised and parallel | high d with moderate h, small inputs |
//! | [`Method::DirectTree`] | the exact sum over sources within h sqrt(ln 1/epsilon), found with a kd-tree | small h |
//! | [`Method::Ifgt`] | farthest-point clusters and truncated Taylor expansions (IFGT) | low d, moderate and large h |
//! | [`Method::IfgtTree`] | the IFGT with a kd-tree over the cluster centres | many clusters |
//!
//! [`Method::Auto`] estimates the cost of each from the data (sampled neighbour counts and
//! the IFGT parameter choice) and runs the cheapest.
//!
//! # Example
//!
//! ```
//! use vastml_fgt::{GaussTransform, Method};
//! use std::sync::atomic::AtomicBool;
//!
//! // 1,000 sources and 10 targets on a line (d = 1), unit weights.
//! let sources: Vec<f64> = (0..1000).map(|i| i as f64 / 1000.0).collect();
//! let targets = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];
//! let weights = vec![1.0; 1000];
//! let gt = GaussTransform::new(&sources, 1, 0.1, 1e-6, Method::Auto).unwrap();
//! let g = gt.evaluate(&targets, &weights, 1, &AtomicBool::new(false)).unwrap();
//! // Compare with the direct sum: the error is at most epsilon * sum |q| = 1e-3.
//! let exact: f64 = sources.iter().map(|x| (-(0.5f64 - x).powi(2) / 0.01).exp()).sum();
//! assert!((g[4] - exact).abs() <= 1e-6 * 1000.0);
//! ```
#![warn(missing_docs)]

mod bounds;
mod direct;
mod erfc;
mod error;
mod exp;
mod hermite;
mod ifgt;
mod intervals;
mod kernel;
pub mod monomials;
mod plan;
mod split;

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::AtomicBool;

pub use bounds::{
    MAX_TRUNCATION, cutoff_radius, log_truncation_error, truncation_number, worst_target_distance,
};
pub use erfc::{ErfcParameters, erfc, erfc_inverse, erfc_parameters, erfc_sum};
pub use error::{FgtError, Result};
pub use exp::exp_nonpositive;
pub use hermite::{
    HermiteParameters, MAX_ORDER, SumMethod, hermite, hermite_coefficients, hermite_gauss_sum,
    hermite_parameters,
};
pub use ifgt::{
    IfgtParameters, IfgtProblem, choose_parameters, choose_parameters_uniform, max_clusters,
};
pub use kernel::simd_level;
pub use split::{SplitIfgt, cluster_radii, split_centers};

use direct::{DirectPlan, TreePlan};
use error::invalid;
use ifgt::IfgtPlan;

/// How the sum is evaluated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    /// Pick the cheapest of the others from cost estimates.
    Auto,
    /// The direct O(MN) sum.
    Direct,
    /// Direct sum over the sources a kd-tree finds within the cut-off.
    DirectTree,
    /// The improved fast Gauss transform.
    Ifgt,
    /// The IFGT with a kd-tree over the cluster centres.
    IfgtTree,
}

impl Method {
    /// Name used in Python and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Method::Auto => "auto",
            Method::Direct => "direct",
            Method::DirectTree => "direct-tree",
            Method::Ifgt => "ifgt",
            Method::IfgtTree => "ifgt-tree",
        }
    }

    /// All method names.
    pub const NAMES: [&'static str; 5] = ["auto", "direct", "direct-tree", "ifgt", "ifgt-tree"];
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Method {
    type Err = FgtError;
    fn from_str(s: &str) -> Result<Method> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "auto" => Ok(Method::Auto),
            "direct" => Ok(Method::Direct),
            "direct-tree" | "tree" => Ok(Method::DirectTree),
            "ifgt" => Ok(Method::Ifgt),
            "ifgt-tree" | "figtree" => Ok(Method::IfgtTree),
            other => Err(invalid(
                "method",
                format!(
                    "unknown method {other:?}; expected one of {:?}",
                    Method::NAMES
                ),
            )),
        }
    }
}

/// What a [`GaussTransform`] decided and why.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanInfo {
    /// The method that runs (never `Auto`).
    pub method: Method,
    /// Number of clusters K (IFGT methods), else 0.
    pub n_clusters: usize,
    /// Truncation number p_max (IFGT methods), else 0.
    pub truncation: usize,
    /// Terms per cluster C(p_max - 1 + d, d) (IFGT methods), else 0.
    pub n_terms: usize,
    /// Largest cluster radius (IFGT methods), else 0.
    pub max_cluster_radius: f64,
    /// Cut-off radius: sources (direct-tree) or clusters (IFGT, plus the cluster radius)
    /// beyond it are skipped; infinite for the direct method.
    pub cutoff: f64,
    /// Estimated cost of each method considered, in seconds on one core.
    pub estimates: Vec<(Method, f64)>,
}

#[derive(Debug)]
enum Engine {
    Direct(DirectPlan),
    Tree(TreePlan),
    Ifgt(IfgtPlan),
}

/// A Gauss transform over fixed sources, reusable for many targets and weight vectors
/// (the clustering or tree is built once).
#[derive(Debug)]
pub struct GaussTransform {
    dim: usize,
    n: usize,
    bandwidth: f64,
    epsilon: f64,
    sources: Vec<f64>,
    engine: Engine,
    info: PlanInfo,
}

/// Checks a row-major point set; returns the number of points.
fn check_points(points: &[f64], dim: usize, name: &'static str) -> Result<usize> {
    if dim == 0 {
        return Err(invalid("dim", "must be at least 1"));
    }
    if points.is_empty() {
        return Err(FgtError::Empty { name });
    }
    if points.len() % dim != 0 {
        return Err(FgtError::ShapeMismatch(format!(
            "`{name}` has {} values, not a multiple of dim = {dim}",
            points.len()
        )));
    }
    if points.iter().any(|v| !v.is_finite()) {
        return Err(FgtError::NonFinite { name });
    }
    Ok(points.len() / dim)
}

fn check_scalars(bandwidth: f64, epsilon: f64) -> Result<()> {
    if !(bandwidth.is_finite() && bandwidth > 0.0) {
        return Err(invalid(
            "bandwidth",
            format!("must be a positive finite number, got {bandwidth}"),
        ));
    }
    if !(epsilon > 0.0 && epsilon < 1.0) {
        return Err(invalid(
            "epsilon",
            format!("must lie in the open interval (0, 1), got {epsilon}"),
        ));
    }
    Ok(())
}

/// Longest edge of the bounding box, its diagonal, and every side, over several point sets.
fn extent(sets: &[&[f64]], dim: usize) -> (f64, f64, Vec<f64>) {
    let mut lo = vec![f64::INFINITY; dim];
    let mut hi = vec![f64::NEG_INFINITY; dim];
    for set in sets {
        for p in set.chunks_exact(dim) {
            for k in 0..dim {
                lo[k] = lo[k].min(p[k]);
                hi[k] = hi[k].max(p[k]);
            }
        }
    }
    let sides: Vec<f64> = lo.iter().zip(&hi).map(|(a, b)| b - a).collect();
    let longest = sides.iter().copied().fold(0.0, f64::max);
    let diag = sides.iter().map(|s| s * s).sum::<f64>().sqrt();
    (longest, diag, sides)
}

impl GaussTransform {
    /// Prepares the transform of `sources` (row-major n x `dim`) with bandwidth h and
    /// accuracy epsilon. `Method::Auto` plans for targets distributed like the sources.
    ///
    /// # Errors
    /// [`FgtError::InvalidParameter`] for h <= 0, epsilon outside (0, 1), or an IFGT method
    /// that cannot meet epsilon; [`FgtError::Empty`], [`FgtError::ShapeMismatch`] and
    /// [`FgtError::NonFinite`] for bad sources.
    pub fn new(
        sources: &[f64],
        dim: usize,
        bandwidth: f64,
        epsilon: f64,
        method: Method,
    ) -> Result<GaussTransform> {
        Self::plan(
            sources,
            dim,
            bandwidth,
            epsilon,
            method,
            None,
            1,
            &AtomicBool::new(false),
        )
    }

    /// Like [`GaussTransform::new`] but plans for the given targets and number of weight
    /// columns (used by [`gauss_transform`]); the cut-off also uses the largest
    /// source-target distance, so the transform must then only be evaluated at targets
    /// inside the bounding box of `sources` and `targets`.
    ///
    /// # Errors
    /// As [`GaussTransform::new`], plus [`FgtError::Cancelled`] when `cancel` is set.
    #[allow(clippy::too_many_arguments)]
    pub fn plan(
        sources: &[f64],
        dim: usize,
        bandwidth: f64,
        epsilon: f64,
        method: Method,
        targets: Option<&[f64]>,
        n_weights: usize,
        cancel: &AtomicBool,
    ) -> Result<GaussTransform> {
        let n = check_points(sources, dim, "sources")?;
        check_scalars(bandwidth, epsilon)?;
        if let Some(t) = targets {
            check_points(t, dim, "targets")?;
        }
        let h = bandwidth;
        let m = targets.map_or(n, |t| t.len() / dim);
        let w = n_weights.max(1);
        let (range, diag, sides) = match targets {
            Some(t) => extent(&[sources, t], dim),
            None => extent(&[sources], dim),
        };
        let tree_radius = cutoff_radius(h, epsilon, None);
        // The IFGT cut-off may use the largest source-target distance only when the targets are known.
        let ifgt_cutoff = cutoff_radius(h, epsilon, targets.map(|_| diag));
        let range = range.max(h * 1e-3);
        let sample = plan::sample_rows(targets.unwrap_or(sources), dim, 128);
        let mut estimates = Vec::new();
        let problem = IfgtProblem {
            n_sources: n,
            n_targets: m,
            dim,
            range,
            bandwidth: h,
            epsilon,
            cutoff: ifgt_cutoff,
            max_clusters: usize::MAX,
        };

        let build_ifgt =
            |with_tree: bool, k_budget: usize, cancel: &AtomicBool| -> Result<Option<IfgtPlan>> {
                let problem = IfgtProblem {
                    max_clusters: k_budget,
                    ..problem
                };
                let chosen = if dim == 1 {
                    ifgt::interval_clustering(sources, &problem)
                } else {
                    ifgt::choose_clustering(sources, &problem, cancel)?
                };
                match chosen {
                    Some((_, clustering, seeds)) => Ok(Some(IfgtPlan::new(
                        sources,
                        dim,
                        h,
                        epsilon,
                        clustering,
                        &seeds,
                        ifgt_cutoff,
                        with_tree,
                    )?)),
                    None => Ok(None),
                }
            };

        let engine = match method {
            Method::Direct => Engine::Direct(DirectPlan::new(sources, dim, h, epsilon)),
            Method::DirectTree => {
                Engine::Tree(TreePlan::new(sources, dim, h, epsilon, tree_radius)?)
            }
            Method::Ifgt | Method::IfgtTree => {
                match build_ifgt(method == Method::IfgtTree, usize::MAX, cancel)? {
                    Some(p) => Engine::Ifgt(p),
                    None => {
                        return Err(invalid(
                            "method",
                            format!(
                                "the IFGT cannot reach epsilon={epsilon:e} at bandwidth {h} with at most \
                                 {} clusters; use 'direct-tree' or 'auto'",
                                max_clusters(n, dim, range, h)
                            ),
                        ));
                    }
                }
            }
            Method::Auto => {
                // Data-free estimates first; a method is refined on the data (tree built and
                // sampled, or sources clustered) only if its rough cost is within 3x of the
                // cheapest rough cost, so a clearly losing method costs nothing to rule out.
                let direct = plan::direct_cost(n, m, dim, w);
                estimates.push((Method::Direct, direct));
                let tree_rough = (tree_radius < diag && n >= 64)
                    .then(|| plan::tree_cost_uniform(n, m, w, tree_radius, &sides));
                let ifgt_rough = choose_parameters_uniform(&problem).map(|u| {
                    let terms = monomials::n_terms(dim, u.truncation - 1);
                    let reach = (((ifgt_cutoff / u.max_radius) + 1.0).powi(dim as i32))
                        .min(u.n_clusters as f64);
                    plan::ifgt_cost(n, m, dim, w, u.n_clusters, terms, reach, false)
                });
                let rough_best = [Some(direct), tree_rough, ifgt_rough]
                    .into_iter()
                    .flatten()
                    .fold(f64::INFINITY, f64::min);
                let mut best: (f64, Option<Engine>) = (direct, None);
                if let Some(rough) = tree_rough {
                    // the uniform model overestimates the tree by up to ~5x
                    if rough < 5.0 * rough_best {
                        let tree = TreePlan::new(sources, dim, h, epsilon, tree_radius)?;
                        let (pts, runs) = tree.mean_sources_in_reach(&sample);
                        let cost = plan::tree_cost(n, m, dim, w, pts, runs);
                        estimates.push((Method::DirectTree, cost));
                        if cost < best.0 {
                            best = (cost, Some(Engine::Tree(tree)));
                        }
                    } else {
                        estimates.push((Method::DirectTree, rough));
                    }
                }
                if let Some(rough) = ifgt_rough {
                    // the IFGT model is within ~1.2x; clustering is only worth trying when
                    // it may beat the best refined alternative, and never grows past the
                    // number of clusters whose clustering alone would cost more than that.
                    if rough < 1.2 * best.0 {
                        let k_budget = (best.0
                            / (n as f64 * dim as f64 * plan::ns::CLUSTERING_PER_DIM))
                            .max(1.0) as usize;
                        if let Some(p) = build_ifgt(false, k_budget, cancel)? {
                            let reach = p.mean_clusters_in_reach(&sample);
                            let terms = p.n_terms() as f64;
                            let k = p.n_clusters();
                            let flat = plan::ifgt_cost(n, m, dim, w, k, terms, reach, false);
                            let treed = plan::ifgt_cost(n, m, dim, w, k, terms, reach, true);
                            estimates.push((Method::Ifgt, flat));
                            estimates.push((Method::IfgtTree, treed));
                            if flat.min(treed) < best.0 {
                                let plan = if treed < flat {
                                    p.with_center_tree()?
                                } else {
                                    p
                                };
                                best = (flat.min(treed), Some(Engine::Ifgt(plan)));
                            }
                        }
                    } else {
                        estimates.push((Method::Ifgt, rough));
                    }
                }
                match best.1 {
                    Some(engine) => engine,
                    None => Engine::Direct(DirectPlan::new(sources, dim, h, epsilon)),
                }
            }
        };
        let info = match &engine {
            Engine::Direct(_) => PlanInfo {
                method: Method::Direct,
                n_clusters: 0,
                truncation: 0,
                n_terms: 0,
                max_cluster_radius: 0.0,
                cutoff: f64::INFINITY,
                estimates: Vec::new(),
            },
            Engine::Tree(t) => PlanInfo {
                method: Method::DirectTree,
                n_clusters: 0,
                truncation: 0,
                n_terms: 0,
                max_cluster_radius: 0.0,
                cutoff: t.radius(),
                estimates: Vec::new(),
            },
            Engine::Ifgt(p) => PlanInfo {
                method: if p.has_tree() {
                    Method::IfgtTree
                } else {
                    Method::Ifgt
                },
                n_clusters: p.n_clusters(),
                truncation: p.truncation(),
                n_terms: p.n_terms(),
                max_cluster_radius: p.max_radius(),
                cutoff: ifgt_cutoff,
                estimates: Vec::new(),
            },
        };
        let info = PlanInfo {
            estimates: estimates.into_iter().map(|(k, c)| (k, c * 1e-9)).collect(),
            ..info
        };
        Ok(GaussTransform {
            dim,
            n,
            bandwidth,
            epsilon,
            sources: sources.to_vec(),
            engine,
            info,
        })
    }

    /// Number of sources.
    pub fn n_sources(&self) -> usize {
        self.n
    }

    /// Dimension d.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Bandwidth h.
    pub fn bandwidth(&self) -> f64 {
        self.bandwidth
    }

    /// Accuracy epsilon.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// The method that runs.
    pub fn method(&self) -> Method {
        self.info.method
    }

    /// What was planned.
    pub fn info(&self) -> &PlanInfo {
        &self.info
    }

    /// G at every target for each of `n_weights` weight columns (`weights` is row-major
    /// n_sources x n_weights); returns row-major n_targets x n_weights.
    ///
    /// # Errors
    /// Shape, emptiness and finiteness errors for `targets` and `weights`;
    /// [`FgtError::Cancelled`] if `cancel` becomes true while running.
    pub fn evaluate(
        &self,
        targets: &[f64],
        weights: &[f64],
        n_weights: usize,
        cancel: &AtomicBool,
    ) -> Result<Vec<f64>> {
        let m = check_points(targets, self.dim, "targets")?;
        if n_weights == 0 {
            return Err(invalid("weights", "needs at least one column"));
        }
        if weights.len() != self.n * n_weights {
            return Err(FgtError::ShapeMismatch(format!(
                "`weights` has {} values, expected n_sources x n_weights = {} x {n_weights}",
                weights.len(),
                self.n
            )));
        }
        if weights.iter().any(|v| !v.is_finite()) {
            return Err(FgtError::NonFinite { name: "weights" });
        }
        let mut out = vec![0.0; m * n_weights];
        match &self.engine {
            Engine::Direct(p) => p.evaluate(targets, weights, n_weights, &mut out, cancel)?,
            Engine::Tree(p) => p.evaluate(targets, weights, n_weights, &mut out, cancel)?,
            Engine::Ifgt(p) => {
                let coeffs = p.coefficients(&self.sources, weights, n_weights);
                p.evaluate(targets, &coeffs, n_weights, &mut out, cancel)?
            }
        }
        Ok(out)
    }
}

/// One-shot Gauss transform: plans for these targets and evaluates.
///
/// `sources` is n x `dim`, `targets` m x `dim`, `weights` n x `n_weights` (all row-major);
/// returns m x `n_weights`.
///
/// # Errors
/// As [`GaussTransform::plan`] and [`GaussTransform::evaluate`].
#[allow(clippy::too_many_arguments)]
pub fn gauss_transform(
    sources: &[f64],
    targets: &[f64],
    dim: usize,
    weights: &[f64],
    n_weights: usize,
    bandwidth: f64,
    epsilon: f64,
    method: Method,
    cancel: &AtomicBool,
) -> Result<Vec<f64>> {
    let gt = GaussTransform::plan(
        sources,
        dim,
        bandwidth,
        epsilon,
        method,
        Some(targets),
        n_weights,
        cancel,
    )?;
    gt.evaluate(targets, weights, n_weights, cancel)
}

/// The plain O(MN) double loop with `f64::exp`: the slow oracle for tests.
pub fn direct_reference(
    sources: &[f64],
    targets: &[f64],
    dim: usize,
    weights: &[f64],
    n_weights: usize,
    bandwidth: f64,
) -> Vec<f64> {
    let n = sources.len() / dim;
    let m = targets.len() / dim;
    let h2 = bandwidth * bandwidth;
    let mut out = vec![0.0; m * n_weights];
    for j in 0..m {
        let y = &targets[j * dim..(j + 1) * dim];
        for i in 0..n {
            let x = &sources[i * dim..(i + 1) * dim];
            let d2: f64 = x.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum();
            let g = (-d2 / h2).exp();
            for w in 0..n_weights {
                out[j * n_weights + w] += weights[i * n_weights + w] * g;
            }
        }
    }
    out
}
