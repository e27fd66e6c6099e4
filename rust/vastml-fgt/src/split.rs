//! The IFGT with its sources split over several places (processes, machines, chunks).
//!
//! One plan serves every part: the cluster centres are chosen once from a sample of the
//! sources ([`split_centers`]), each part reports the radius of every cluster over its own
//! sources ([`cluster_radii`], combined by an element-wise maximum), and the plan built from
//! the centres and the combined radii ([`SplitIfgt::new`]) gives each part's coefficients
//! ([`SplitIfgt::coefficients`], combined by a sum). Any part can then evaluate any
//! targets ([`SplitIfgt::evaluate`]). The guarantee is the single-machine one,
//! `max_j |G_hat(y_j) - G(y_j)| <= epsilon * sum_i |q_i|`, since the truncation is chosen
//! from the true radii over all the sources. The planning work per part is linear in its
//! own sources, so splitting the sources over P workers divides it by P.
//!
//! # Example
//!
//! ```
//! use std::sync::atomic::AtomicBool;
//! use vastml_fgt::{SplitIfgt, cluster_radii, direct_reference, split_centers, Method};
//!
//! // 2,000 sources on a spiral in 2-D, split in two halves.
//! let src: Vec<f64> = (0..2000)
//!     .flat_map(|i| { let t = i as f64 / 300.0; [t.cos() * t / 7.0, t.sin() * t / 7.0] })
//!     .collect();
//! let (a, b) = src.split_at(1000 * 2);
//! let (h, eps) = (0.3, 1e-6);
//! let cancel = AtomicBool::new(false);
//! let centers = split_centers(&src[..400], 2, h, eps, (2000, 2000, 1), Method::Ifgt, &cancel)
//!     .unwrap()
//!     .expect("the IFGT applies");
//! let radii: Vec<f64> = cluster_radii(a, 2, &centers).unwrap().iter()
//!     .zip(cluster_radii(b, 2, &centers).unwrap())
//!     .map(|(x, y)| x.max(y))
//!     .collect();
//! let plan = SplitIfgt::new(centers, radii, 2, h, eps, Method::Ifgt, &[]).unwrap();
//! let ones = vec![1.0; 1000];
//! let mut coeffs = plan.coefficients(a, &ones, 1, &cancel).unwrap();
//! for (c, d) in coeffs.iter_mut().zip(plan.coefficients(b, &ones, 1, &cancel).unwrap()) {
//!     *c += d;
//! }
//! let targets = [0.0, 0.0, 0.5, -0.5];
//! let g = plan.evaluate(&targets, &coeffs, 1, &cancel).unwrap();
//! let exact = direct_reference(&src, &targets, 2, &vec![1.0; 2000], 1, h);
//! assert!((g[0] - exact[0]).abs() <= eps * 2000.0);
//! assert!((g[1] - exact[1]).abs() <= eps * 2000.0);
//! ```

use std::sync::atomic::AtomicBool;

use crate::bounds::cutoff_radius;
use crate::error::{FgtError, Result, invalid};
use crate::ifgt::{Accuracy, IfgtPlan, IfgtProblem, choose_clustering, choose_parameters_uniform};
use crate::monomials;
use crate::{Method, check_points, check_scalars, extent, plan};

pub use crate::ifgt::cluster_radii;

/// Cluster centres (row-major `k x dim`) for an IFGT over `n_sources` sources, `n_targets`
/// targets and `n_weights` weight columns (`sizes`), chosen by the farthest-point search of the single-machine planner
/// run on `sample` (rows of the sources; a few tens of thousands are plenty).
///
/// With `Method::Auto`, returns `None` when the data-free cost model says the IFGT is not
/// the clear choice (the direct or tree sum would be cheaper); then plan on one machine
/// instead. `Method::Ifgt` / `Method::IfgtTree` only return `None` when the IFGT cannot
/// reach epsilon.
///
/// # Errors
/// Bad sample, bandwidth or epsilon; `Method::Direct` / `DirectTree`;
/// [`FgtError::Cancelled`].
pub fn split_centers(
    sample: &[f64],
    dim: usize,
    bandwidth: f64,
    epsilon: f64,
    (n_sources, n_targets, n_weights): (usize, usize, usize),
    method: Method,
    cancel: &AtomicBool,
) -> Result<Option<Vec<f64>>> {
    check_points(sample, dim, "sample")?;
    check_scalars(bandwidth, epsilon)?;
    if matches!(method, Method::Direct | Method::DirectTree) {
        return Err(invalid(
            "method",
            "the split transform is an IFGT: use 'auto', 'ifgt' or 'ifgt-tree'",
        ));
    }
    let (range, diag, sides) = extent(&[sample], dim);
    let h = bandwidth;
    let problem = IfgtProblem {
        n_sources: n_sources.max(1),
        n_targets: n_targets.max(1),
        dim,
        range: range.max(h * 1e-3),
        bandwidth: h,
        epsilon,
        cutoff: cutoff_radius(h, epsilon, None),
        max_clusters: usize::MAX,
    };
    if method == Method::Auto {
        let (n, m, w) = (problem.n_sources, problem.n_targets, n_weights.max(1));
        let Some(u) = choose_parameters_uniform(&problem) else {
            return Ok(None);
        };
        let terms = monomials::n_terms(dim, u.truncation - 1);
        let reach =
            (((problem.cutoff / u.max_radius) + 1.0).powi(dim as i32)).min(u.n_clusters as f64);
        let ifgt = plan::ifgt_cost(
            plan::Size { n, m, dim, w },
            u.n_clusters,
            plan::IfgtTerms::full(terms),
            reach,
            false,
        );
        let tree_radius = cutoff_radius(h, epsilon, None);
        // The uniform model overestimates the tree by up to ~5x: only a clear IFGT win counts.
        let tree = if tree_radius < diag {
            plan::tree_cost_uniform(n, m, w, tree_radius, &sides) / 5.0
        } else {
            f64::INFINITY
        };
        if ifgt > plan::direct_cost(n, m, dim, w).min(tree) {
            return Ok(None);
        }
    }
    let Some((_, clustering, seeds)) = choose_clustering(sample, &problem, cancel)? else {
        return Ok(None);
    };
    let k = clustering.n_clusters();
    let mut centers = Vec::with_capacity(k * dim);
    for &s in &seeds[..k] {
        centers.extend_from_slice(&sample[s * dim..(s + 1) * dim]);
    }
    Ok(Some(centers))
}

/// An IFGT plan made of cluster centres and radii only: the sources stay where they are.
#[derive(Debug)]
pub struct SplitIfgt {
    dim: usize,
    plan: IfgtPlan,
}

impl SplitIfgt {
    /// The plan for `centers` (row-major `k x dim`, from [`split_centers`]) and `radii`
    /// (per centre, the maximum of [`cluster_radii`] over every part of the sources).
    /// `method` is `Ifgt` (flat scan of the clusters), `IfgtTree` (kd-tree over the
    /// centres) or `Auto` (the cheaper by the planner's model on `target_sample`, rows of
    /// targets; flat when the sample is empty).
    ///
    /// # Errors
    /// Mismatched shapes, non-finite values, negative radii, a direct method, or an IFGT
    /// that cannot reach epsilon with these radii.
    pub fn new(
        centers: Vec<f64>,
        radii: Vec<f64>,
        dim: usize,
        bandwidth: f64,
        epsilon: f64,
        method: Method,
        target_sample: &[f64],
    ) -> Result<SplitIfgt> {
        let k = check_points(&centers, dim, "centers")?;
        check_scalars(bandwidth, epsilon)?;
        if matches!(method, Method::Direct | Method::DirectTree) {
            return Err(invalid(
                "method",
                "a split plan is an IFGT: use 'auto', 'ifgt' or 'ifgt-tree'",
            ));
        }
        if radii.len() != k {
            return Err(FgtError::ShapeMismatch(format!(
                "{} radii for {k} centres",
                radii.len()
            )));
        }
        if radii.iter().any(|r| !(r.is_finite() && *r >= 0.0)) {
            return Err(invalid("radii", "must be finite and non-negative"));
        }
        let cutoff = cutoff_radius(bandwidth, epsilon, None);
        let mut plan = IfgtPlan::from_centers(
            centers,
            radii,
            dim,
            Accuracy {
                h: bandwidth,
                epsilon,
                cutoff,
            },
            false,
        )?;
        let use_tree = match method {
            Method::IfgtTree => true,
            Method::Auto if !target_sample.is_empty() => {
                check_points(target_sample, dim, "target_sample")?;
                let reach = plan.mean_clusters_in_reach(target_sample);
                let terms = plan::IfgtTerms::full(plan.n_terms() as f64);
                let cost = |tree| {
                    plan::ifgt_cost(
                        plan::Size {
                            n: 1,
                            m: 1,
                            dim,
                            w: 1,
                        },
                        k,
                        terms,
                        reach,
                        tree,
                    )
                };
                cost(true) < cost(false)
            }
            _ => false,
        };
        if use_tree {
            plan = plan.with_center_tree()?;
        }
        Ok(SplitIfgt { dim, plan })
    }

    /// Dimension of the points.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Number of clusters K.
    pub fn n_clusters(&self) -> usize {
        self.plan.n_clusters()
    }

    /// Truncation number p_max.
    pub fn truncation(&self) -> usize {
        self.plan.truncation()
    }

    /// Terms per cluster.
    pub fn n_terms(&self) -> usize {
        self.plan.n_terms()
    }

    /// Largest cluster radius.
    pub fn max_radius(&self) -> f64 {
        self.plan.max_radius()
    }

    /// Whether the centres are searched through a kd-tree.
    pub fn has_tree(&self) -> bool {
        self.plan.has_tree()
    }

    /// Length of a coefficient vector for `n_weights` weight columns.
    pub fn coefficient_len(&self, n_weights: usize) -> usize {
        self.n_clusters() * n_weights * self.n_terms()
    }

    /// The coefficients of one part of the sources (row-major `n x dim`, weights
    /// `n x n_weights`); the coefficients of all the sources are the sum over the parts.
    /// Every source must lie within the radius its nearest centre was given.
    ///
    /// # Errors
    /// Shape or finiteness errors; [`FgtError::InvalidParameter`] when a source lies beyond
    /// its cluster's radius (the radii did not cover this part); [`FgtError::Cancelled`]
    /// when `cancel` is raised (polled every few thousand sources).
    pub fn coefficients(
        &self,
        sources: &[f64],
        weights: &[f64],
        n_weights: usize,
        cancel: &AtomicBool,
    ) -> Result<Vec<f64>> {
        if sources.is_empty() {
            return Ok(vec![0.0; self.coefficient_len(n_weights)]);
        }
        let n = check_points(sources, self.dim, "sources")?;
        check_weights(weights, n, n_weights)?;
        self.plan
            .coefficients_of(sources, weights, n_weights, cancel)
    }

    /// G at `targets` (row-major `m x dim`) from the summed coefficients; `m x n_weights`.
    ///
    /// # Errors
    /// Shape or finiteness errors; [`FgtError::Cancelled`].
    pub fn evaluate(
        &self,
        targets: &[f64],
        coeffs: &[f64],
        n_weights: usize,
        cancel: &AtomicBool,
    ) -> Result<Vec<f64>> {
        if targets.is_empty() {
            return Ok(Vec::new());
        }
        let m = check_points(targets, self.dim, "targets")?;
        if n_weights == 0 || coeffs.len() != self.coefficient_len(n_weights) {
            return Err(FgtError::ShapeMismatch(format!(
                "{} coefficients, expected {} for {n_weights} weight column(s)",
                coeffs.len(),
                self.coefficient_len(n_weights)
            )));
        }
        let mut out = vec![0.0; m * n_weights];
        self.plan
            .evaluate(targets, coeffs, n_weights, &mut out, cancel)?;
        Ok(out)
    }
}

fn check_weights(weights: &[f64], n: usize, n_weights: usize) -> Result<()> {
    if n_weights == 0 {
        return Err(invalid("weights", "needs at least one column"));
    }
    if weights.len() != n * n_weights {
        return Err(FgtError::ShapeMismatch(format!(
            "`weights` has {} values, expected n_sources x n_weights = {n} x {n_weights}",
            weights.len()
        )));
    }
    if weights.iter().any(|v| !v.is_finite()) {
        return Err(FgtError::NonFinite { name: "weights" });
    }
    Ok(())
}
