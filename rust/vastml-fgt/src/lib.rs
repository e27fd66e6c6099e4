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
//! | [`Method::Fgt`] | on a line (d = 1): Hermite moments per box translated to one Taylor series per target box | d = 1, any h |
//!
//! [`Method::Auto`] estimates the cost of each from the data (sampled neighbour counts and
//! the IFGT parameter choice) and runs the cheapest.
//!
//! # Allocator
//!
//! A plan allocates a few buffers the size of the sources (the tree's copy of them, the
//! kernel's layout, the clusters' members) and frees them when it is dropped. With glibc's
//! allocator, freed memory of a worker thread's arena is handed back to the system and
//! faulted in again by the next plan: in a program that plans many small transforms, that
//! was about 40% of a plan of 2,491 sources in 9-D (0.38-0.48 ms against 0.23 ms). An
//! allocator that keeps freed memory, such as `mimalloc` as the `#[global_allocator]` (what
//! the Python extension uses), or raising glibc's `MALLOC_TRIM_THRESHOLD_`, avoids it.
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

mod auto;
mod bounds;
mod direct;
mod erfc;
mod error;
mod grid1d;
mod hermite;
mod ifgt;
mod intervals;
mod kernel;
mod line;
mod logsum;
pub mod monomials;
mod par;
mod plan;
mod split;

/// Test data shared by the unit tests of the modules.
#[cfg(test)]
pub(crate) mod testing {
    /// `n` numbers in [0, 1) from a fixed linear congruential sequence started at `seed`.
    pub(crate) fn uniform(n: usize, seed: u64) -> Vec<f64> {
        let mut state = seed;
        (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (state >> 11) as f64 / (1u64 << 53) as f64
            })
            .collect()
    }
}

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::AtomicBool;

use vastml_core::{Points, exp};

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
pub use line::{INLINE_LEN, LinearBinning, edge_autocorrelation, linear_binning, order_statistics};
pub use logsum::{LogGaussSum, mean_sources_within};
pub use par::{INLINE_NS, SequentialScope};
pub use split::{SplitIfgt, cluster_radii, split_centers};

use direct::{DirectPlan, TreePlan};
use error::invalid;
use ifgt::IfgtPlan;
pub use vastml_core::{Control, Halt};

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
    /// Points on a line only: the original fast Gauss transform on a grid of boxes (Hermite
    /// moments translated into one Taylor series per target box).
    Fgt,
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
            Method::Fgt => "fgt",
        }
    }

    /// All method names.
    pub const NAMES: [&'static str; 6] =
        ["auto", "direct", "direct-tree", "ifgt", "ifgt-tree", "fgt"];
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
            "fgt" => Ok(Method::Fgt),
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
    /// Number of clusters K (IFGT methods), of occupied source boxes (fgt), else 0.
    pub n_clusters: usize,
    /// Truncation number p_max (IFGT methods, fgt), else 0.
    pub truncation: usize,
    /// Terms per cluster C(p_max - 1 + d, d) (IFGT methods), else 0.
    pub n_terms: usize,
    /// Largest cluster radius (IFGT methods), half the box width (fgt), else 0.
    pub max_cluster_radius: f64,
    /// Cut-off radius: sources (direct-tree) or clusters (IFGT, plus the cluster radius)
    /// beyond it are skipped; infinite for the direct method.
    pub cutoff: f64,
    /// Estimated cost of each method considered, in seconds on one core: planning and a
    /// call, or a call alone for the tree or IFGT that `auto` built while planning.
    pub estimates: Vec<(Method, f64)>,
    /// For `auto`, the candidates that were timed on a sample of the targets: the
    /// extrapolated seconds of one evaluation (on the planning threads). When only the two
    /// IFGT variants were timed, their shared coefficient pass is not included.
    pub measured: Vec<(Method, f64)>,
    /// Whether a progress hook stopped the planning early (see
    /// [`GaussTransform::plan_with_control`]): the method was then chosen from what was
    /// estimated and timed until then.
    pub stopped: bool,
}

#[derive(Debug)]
pub(crate) enum Engine {
    Direct(DirectPlan),
    Tree(TreePlan),
    Ifgt(Box<IfgtPlan>),
    Grid(grid1d::Grid1d),
}

/// A Gauss transform over fixed sources, reusable for many targets and weight vectors
/// (the clustering or tree is built once).
#[derive(Debug)]
pub struct GaussTransform {
    dim: usize,
    n: usize,
    bandwidth: f64,
    epsilon: f64,
    /// The sources as given, for the IFGT's coefficients (the other engines keep their own
    /// prepared copy, and this stays empty).
    sources: Vec<f64>,
    engine: Engine,
    info: PlanInfo,
    /// Estimated ns of one call at `call_m` targets (one core), to run small calls inline.
    call_ns: f64,
    /// The part of `call_ns` that does not shrink with the targets: the IFGT's coefficients,
    /// a pass over every source (at 512 targets of 137,435 sources it was 7.6 ms, run on
    /// one thread when the whole call was scaled down with the targets).
    call_fixed_ns: f64,
    call_m: usize,
    call_w: usize,
}

/// Checks a row-major point set (through [`vastml_core::Points`], the one point-set check of
/// the crates); returns the number of points.
pub(crate) fn check_points(points: &[f64], dim: usize, name: &'static str) -> Result<usize> {
    Ok(Points::new(name, points, dim)?.len())
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

/// Longest edge of the bounding box, its diagonal, and every side, over several point sets
/// (finite: checked before).
fn extent(sets: &[&[f64]], dim: usize) -> (f64, f64, Vec<f64>) {
    let (lo, hi) = vastml_core::coordinate_bounds(sets, dim);
    let sides: Vec<f64> = lo.iter().zip(&hi).map(|(a, b)| b - a).collect();
    let longest = sides.iter().copied().fold(0.0, f64::max);
    let diag = sides.iter().map(|s| s * s).sum::<f64>().sqrt();
    (longest, diag, sides)
}

/// Everything [`GaussTransform::plan_with`] may be told besides the sources and the
/// accuracy. The default plans for targets distributed like the sources, one weight
/// column, the error bound's own K and p, and lets `auto` time its close candidates.
#[derive(Clone, Copy, Debug)]
pub struct PlanOptions<'a> {
    /// All the targets the transform will be evaluated at (row-major, `dim` columns): the
    /// IFGT cut-off may then use the largest source-target distance, so the plan must only
    /// be evaluated at targets inside the bounding box of sources and targets.
    pub targets: Option<&'a [f64]>,
    /// A sample of where the transform will be evaluated, used only to plan (ignored when
    /// `targets` is given); the guarantee then holds at any target.
    pub target_sample: Option<&'a [f64]>,
    /// Number of targets per evaluation (default: the count of `targets`, else of the
    /// sources).
    pub n_targets: Option<usize>,
    /// Weight columns per evaluation.
    pub n_weights: usize,
    /// Fixed truncation number p for the IFGT methods (fixed-p mode, thesis section 2.12):
    /// every source and target keeps the terms of degree < p and the error bound is not
    /// enforced.
    pub truncation: Option<usize>,
    /// Fixed number of clusters K for the IFGT methods (p still follows from epsilon unless
    /// `truncation` is given).
    pub n_clusters: Option<usize>,
    /// Whether `auto` times the candidates its cost model finds within 2x of the cheapest
    /// on a sample of the targets, and keeps the fastest.
    pub measure: bool,
}

impl Default for PlanOptions<'_> {
    fn default() -> Self {
        PlanOptions {
            targets: None,
            target_sample: None,
            n_targets: None,
            n_weights: 1,
            truncation: None,
            n_clusters: None,
            measure: true,
        }
    }
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
        Self::plan_with(
            sources,
            dim,
            bandwidth,
            epsilon,
            method,
            &PlanOptions::default(),
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
    // The short form of `plan_with` for the common case (targets known): a struct would
    // make it `plan_with` again.
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
        let options = PlanOptions {
            targets,
            n_weights,
            ..PlanOptions::default()
        };
        Self::plan_with(sources, dim, bandwidth, epsilon, method, &options, cancel)
    }

    /// The general planner: see [`PlanOptions`].
    ///
    /// # Errors
    /// As [`GaussTransform::plan`], plus [`FgtError::InvalidParameter`] for a fixed
    /// truncation or K with a method other than an IFGT one, or out of range.
    pub fn plan_with(
        sources: &[f64],
        dim: usize,
        bandwidth: f64,
        epsilon: f64,
        method: Method,
        options: &PlanOptions<'_>,
        cancel: &AtomicBool,
    ) -> Result<GaussTransform> {
        let control = Control::new(cancel);
        Self::plan_with_control(sources, dim, bandwidth, epsilon, method, options, &control)
    }

    /// [`GaussTransform::plan_with`] reporting its stages to a progress hook.
    ///
    /// `method = auto` reports each stage as it ends, numbered from 1: the model's estimates
    /// (`"estimate"`, objective: the cheapest estimate in seconds on one core), each candidate
    /// refined on the data (`"direct-tree"`, `"ifgt"`: its estimate) and each timing of a
    /// close candidate (`"time direct"`, ...: the extrapolated seconds of one evaluation); the
    /// state is the stage's name. A hook returning `true` ends the planning at that stage with
    /// the best method known then ([`PlanInfo::stopped`]). An explicit method reports its one
    /// stage (`"plan"`). The cancel flag is polled at every stage and inside the clustering.
    ///
    /// # Errors
    /// As [`GaussTransform::plan_with`].
    pub fn plan_with_control(
        sources: &[f64],
        dim: usize,
        bandwidth: f64,
        epsilon: f64,
        method: Method,
        options: &PlanOptions<'_>,
        control: &Control<'_, str>,
    ) -> Result<GaussTransform> {
        let cancel = control.cancel_flag();
        let n = check_points(sources, dim, "sources")?;
        check_scalars(bandwidth, epsilon)?;
        let targets = options.targets;
        if let Some(t) = targets {
            check_points(t, dim, "targets")?;
        }
        let sample_src = match (targets, options.target_sample) {
            (Some(t), _) => Some(t),
            (None, Some(s)) if !s.is_empty() => {
                check_points(s, dim, "target_sample")?;
                Some(s)
            }
            _ => None,
        };
        let fixed = options.truncation.is_some() || options.n_clusters.is_some();
        if fixed && !matches!(method, Method::Ifgt | Method::IfgtTree) {
            return Err(invalid(
                "method",
                format!(
                    "a fixed truncation or number of clusters needs method 'ifgt' or 'ifgt-tree', got '{method}'"
                ),
            ));
        }
        if options.n_clusters == Some(0) {
            return Err(invalid("n_clusters", "must be at least 1"));
        }
        let h = bandwidth;
        let m = options
            .n_targets
            .unwrap_or_else(|| targets.map_or(n, |t| t.len() / dim))
            .max(1);
        let w = options.n_weights.max(1);
        let (range, diag, sides) = match sample_src {
            Some(t) => extent(&[sources, t], dim),
            None => extent(&[sources], dim),
        };
        let tree_radius = cutoff_radius(h, epsilon, None);
        // The IFGT cut-off may use the largest source-target distance only when the targets are known.
        let ifgt_cutoff = cutoff_radius(h, epsilon, targets.map(|_| diag));
        let range = range.max(h * 1e-3);
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
        let accuracy = ifgt::Accuracy {
            h,
            epsilon,
            cutoff: ifgt_cutoff,
        };
        let ctx = auto::Context {
            sources,
            dim,
            h,
            epsilon,
            m,
            w,
            diag,
            sides: &sides,
            tree_radius,
            ifgt_cutoff,
            problem,
            sample_src: sample_src.unwrap_or(sources),
            measure: options.measure,
            coefficient_seconds: std::cell::Cell::new(None),
        };

        let mut estimates = Vec::new();
        let mut measured = Vec::new();
        let mut stopped = false;
        let engine = match method {
            Method::Direct => Engine::Direct(DirectPlan::new(sources, dim, h, epsilon)),
            Method::DirectTree => {
                let sample = sample_src.unwrap_or(sources);
                Engine::Tree(TreePlan::new(
                    sources,
                    dim,
                    h,
                    epsilon,
                    tree_radius,
                    sample,
                )?)
            }
            Method::Ifgt | Method::IfgtTree => {
                let tree = method == Method::IfgtTree;
                let plan = match options.n_clusters {
                    Some(k) => {
                        let (clustering, seeds) =
                            ifgt::fixed_clustering(sources, dim, k, h, cancel)?;
                        match options.truncation {
                            // any p will do here; the fixed one replaces it below
                            Some(_) => {
                                IfgtPlan::new_unbounded(sources, dim, accuracy, clustering, tree)?
                            }
                            None => {
                                IfgtPlan::new(sources, dim, accuracy, clustering, &seeds, tree)?
                            }
                        }
                    }
                    None => match ctx.build_ifgt(tree, usize::MAX, cancel)? {
                        Some(p) => p,
                        None if options.truncation.is_some() => {
                            let k = max_clusters(n, dim, range, h);
                            let (clustering, _) =
                                ifgt::fixed_clustering(sources, dim, k, h, cancel)?;
                            IfgtPlan::new_unbounded(sources, dim, accuracy, clustering, tree)?
                        }
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
                    },
                };
                let plan = match options.truncation {
                    Some(p) => plan.with_fixed_truncation(p)?,
                    None => plan,
                };
                Engine::Ifgt(Box::new(plan))
            }
            Method::Fgt => {
                if dim != 1 {
                    return Err(invalid(
                        "method",
                        format!("'fgt' needs points on a line (d = 1), got d = {dim}"),
                    ));
                }
                Engine::Grid(grid1d::Grid1d::new(sources, h, epsilon, m, w)?)
            }
            Method::Auto => {
                let chosen = ctx.choose(control)?;
                estimates = chosen.estimates;
                measured = chosen.measured;
                stopped = chosen.stopped;
                chosen.engine
            }
        };
        if method != Method::Auto {
            // one stage; a stop asked here has nothing left to skip
            match control.report(1, || f64::NAN, "plan") {
                Err(Halt::Cancelled) => return Err(FgtError::Cancelled),
                Err(Halt::Stopped) => stopped = true,
                Ok(()) => {}
            }
        }
        let info = match &engine {
            Engine::Direct(_) => PlanInfo {
                method: Method::Direct,
                n_clusters: 0,
                truncation: 0,
                n_terms: 0,
                max_cluster_radius: 0.0,
                cutoff: f64::INFINITY,
                estimates: Vec::new(),
                measured: Vec::new(),
                stopped: false,
            },
            Engine::Tree(t) => PlanInfo {
                method: Method::DirectTree,
                n_clusters: 0,
                truncation: 0,
                n_terms: 0,
                max_cluster_radius: 0.0,
                cutoff: t.radius(),
                estimates: Vec::new(),
                measured: Vec::new(),
                stopped: false,
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
                measured: Vec::new(),
                stopped: false,
            },
            Engine::Grid(g) => PlanInfo {
                method: Method::Fgt,
                n_clusters: g.n_boxes(),
                truncation: g.params().truncation,
                n_terms: g.params().truncation,
                max_cluster_radius: g.half_width(),
                cutoff: g.cutoff(),
                estimates: Vec::new(),
                measured: Vec::new(),
                stopped: false,
            },
        };
        let call_ns = {
            let size = plan::Size { n, m, dim, w };
            let model = match &engine {
                Engine::Direct(_) => plan::direct_cost(n, m, dim, w),
                Engine::Tree(t) => plan::tree_cost_uniform(n, m, w, t.radius(), &sides),
                Engine::Ifgt(p) => {
                    let k = p.n_clusters();
                    let terms = plan::IfgtTerms::full(p.n_terms() as f64);
                    plan::ifgt_call_cost(size, k, terms, k as f64, p.has_tree())
                }
                Engine::Grid(g) => g.params().cost,
            };
            // auto's estimate refined on the data, when it has one (it includes the plan)
            estimates
                .iter()
                .filter(|(k, _)| *k == info.method)
                .map(|(_, c)| *c)
                .fold(model, f64::min)
        };
        let call_fixed_ns = match &engine {
            Engine::Ifgt(p) => {
                plan::ifgt_coefficient_cost(plan::Size { n, m, dim, w }, p.mean_source_terms())
            }
            _ => 0.0,
        }
        .min(call_ns);
        let info = PlanInfo {
            estimates: estimates.into_iter().map(|(k, c)| (k, c * 1e-9)).collect(),
            measured,
            stopped,
            ..info
        };
        Ok(GaussTransform {
            dim,
            n,
            bandwidth,
            epsilon,
            sources: match engine {
                Engine::Ifgt(_) => sources.to_vec(),
                _ => Vec::new(),
            },
            engine,
            info,
            call_ns,
            call_fixed_ns,
            call_m: m,
            call_w: w,
        })
    }

    /// Whether a call at `m` targets with `n_weights` weight columns is estimated below
    /// [`INLINE_NS`] of work: [`GaussTransform::evaluate`] then runs it in one piece on the
    /// calling thread, and a caller that hands calls to a thread pool had better not.
    pub fn runs_inline(&self, m: usize, n_weights: usize) -> bool {
        let w = self.call_w;
        let per_target = self.call_ns - self.call_fixed_ns;
        (self.call_fixed_ns + per_target * (m as f64 / self.call_m as f64))
            * (n_weights.max(w) as f64 / w as f64)
            < INLINE_NS
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
        let _inline =
            par::SequentialScope::new(par::sequential() || self.runs_inline(m, n_weights));
        match &self.engine {
            Engine::Direct(p) => p.evaluate(targets, weights, n_weights, &mut out, cancel)?,
            Engine::Tree(p) => p.evaluate(targets, weights, n_weights, &mut out, cancel)?,
            Engine::Ifgt(p) => {
                let coeffs = p.coefficients(&self.sources, weights, n_weights, cancel)?;
                p.evaluate(targets, &coeffs, n_weights, &mut out, cancel)?
            }
            Engine::Grid(g) => g.evaluate(targets, weights, n_weights, &mut out, cancel)?,
        }
        Ok(out)
    }
}

/// Whether planning and one call for `n` sources and `m` targets in `dim` dimensions (the
/// one-shot transform) is small enough to run on the calling thread: the direct sum's
/// estimate is below [`INLINE_NS`].
pub fn calls_inline(n: usize, m: usize, dim: usize) -> bool {
    plan::direct_cost(n, m, dim, 1) < INLINE_NS
}

/// Whether planning for `n` sources and `m` targets in `dim` dimensions is small enough to
/// run on the calling thread: as [`calls_inline`], or the sources hold at most
/// [`PLAN_INLINE_VALUES`] coordinates (a tree, a clustering or a few timed samples of them
/// take well under a millisecond, while handing the plan to a thread pool cost about 0.1 ms:
/// 1,519 sources on a line, 0.13 ms on the pool).
pub fn plans_inline(n: usize, m: usize, dim: usize) -> bool {
    calls_inline(n, m, dim) || n.saturating_mul(dim) <= PLAN_INLINE_VALUES
}

/// See [`plans_inline`].
pub const PLAN_INLINE_VALUES: usize = 1 << 13;

/// One-shot Gauss transform: plans for these targets and evaluates.
///
/// `sources` is n x `dim`, `targets` m x `dim`, `weights` n x `n_weights` (all row-major);
/// returns m x `n_weights`.
///
/// # Errors
/// As [`GaussTransform::plan`] and [`GaussTransform::evaluate`].
// The one-shot form mirrors the mathematical definition, one argument per input; the
// planner's struct form is `GaussTransform::plan_with`.
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
