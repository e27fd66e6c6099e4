//! Choosing among the four evaluation methods from cost estimates (`method = auto`).
//!
//! The thesis gives no switching rule; FIGTree's later versions estimate flop counts with
//! sampled neighbour counts (Morariu et al., NIPS 2008). We do the same in nanoseconds on
//! our own kernels: a direct pair, a tree leaf visit, an IFGT term, each with a constant
//! measured on an AVX2 machine (see `benches/gauss.py`). Sampled targets give the mean
//! number of sources or clusters within reach, so clumpy data are judged as they are.

/// Constants of the cost model, nanoseconds on one core.
pub(crate) mod ns {
    /// One (target, source) pair of the vectorised direct kernel, per dimension.
    pub const PAIR_PER_DIM: f64 = 0.25;
    /// One (target, source) pair, fixed part (the exponential and the weighted sum).
    pub const PAIR: f64 = 1.3;
    /// One node of the centre tree visited by a group of IFGT targets.
    pub const LEAF: f64 = 40.0;
    /// One monomial term at a target (one multiply plus one multiply-add per weight column).
    pub const TERM: f64 = 0.9;
    /// A source's contribution to its cluster's coefficients: per term kept, and per source
    /// (its offset, exponential and first monomials). Measured at 25 + 1.15 t ns for t
    /// terms (17 plans, d = 2-8, 10 to 970 terms per source: 1.15-2.95 ns a term), against
    /// 0.42-0.62 ns for a term at a target; here in the units of the direct pair (the
    /// model's over the measured one is 1.7-2.2): the constant before (0.9 a term) put the
    /// coefficients at a third of their time.
    pub const COEFFICIENT_TERM: f64 = 2.2;
    pub const COEFFICIENT_SOURCE: f64 = 47.0;
    /// One cluster in reach of a target (distance, exponential, loop overhead), per dimension.
    pub const CLUSTER_PER_DIM: f64 = 1.0;
    /// Fixed part of one cluster in reach.
    pub const CLUSTER: f64 = 15.0;
    /// One point-centre distance during farthest-point clustering, per dimension.
    pub const CLUSTERING_PER_DIM: f64 = 2.5;
    /// Share of the expansion's terms a target uses on average (target-side truncation).
    pub const TARGET_TERMS: f64 = 0.35;
    /// Building a kd-tree, per point and level.
    pub const TREE_BUILD: f64 = 8.0;
}

/// Cost in ns of the direct method.
pub(crate) fn direct_cost(n: usize, m: usize, dim: usize, w: usize) -> f64 {
    let per_pair = ns::PAIR + ns::PAIR_PER_DIM * dim as f64 + 0.15 * (w as f64 - 1.0);
    n as f64 * m as f64 * per_pair
}

/// Cost in ns of the tree method given the mean number of sources and leaves in reach.
pub(crate) fn tree_cost(
    n: usize,
    m: usize,
    dim: usize,
    w: usize,
    sources_in_reach: f64,
    leaves_in_reach: f64,
) -> f64 {
    let build = ns::TREE_BUILD * n as f64 * (n as f64).log2().max(1.0);
    build + tree_call_cost(m, dim, w, sources_in_reach, leaves_in_reach)
}

/// The kd-tree sum's costs on one core, measured against the direct kernel's pair
/// (0.77 + 0.10 d ns here): a pair, a run of contiguous leaves and a target's descent, each
/// as a + b d ns. Fitted on 80 calls (uniform, clustered, heavy-tailed and curved data,
/// d = 2-10, 14 to 19,000 sources in reach of a target, 20,000 sources); the fit is within
/// 0.88-1.22 of every call. The model's constants before put a tree pair at 2.5 direct
/// pairs: 2.6x the tree's measured time in the median (up to 3.7x), which made the IFGT and
/// the direct sum look close to a tree that beat them by 3-7x (a clustering and two trials
/// on a 0.5 s call).
mod tree_ns {
    pub const DIRECT_PAIR: (f64, f64) = (0.77, 0.10);
    pub const PAIR: (f64, f64) = (0.894, 0.153);
    pub const RUN: (f64, f64) = (78.0, 6.5);
    /// From the root to the first leaf (about 9 levels: 20,000 sources in leaves of 32).
    pub const DESCENT: (f64, f64) = (53.0, 18.0);
}

/// Cost in ns of one call of a built tree plan, given the mean number of sources and leaf
/// runs in reach; in the units of [`direct_cost`] (the tree's measured costs scaled by the
/// ratio of the model's direct pair to the measured one), so that the two compare as they
/// run.
pub(crate) fn tree_call_cost(
    m: usize,
    dim: usize,
    w: usize,
    sources_in_reach: f64,
    leaves_in_reach: f64,
) -> f64 {
    let d = dim as f64;
    let at = |(a, b): (f64, f64)| a + b * d;
    let model_pair = ns::PAIR + ns::PAIR_PER_DIM * d;
    let units = model_pair / at(tree_ns::DIRECT_PAIR);
    let weights = 1.0 + 0.15 * (w as f64 - 1.0) / model_pair;
    let per_target = leaves_in_reach * at(tree_ns::RUN)
        + sources_in_reach * at(tree_ns::PAIR) * weights
        + at(tree_ns::DESCENT);
    m as f64 * units * per_target
}

/// Data-free estimate of the tree method for points spread uniformly over a box with the
/// given sides: the share of sources within `radius` is the ball's volume over the box's.
pub(crate) fn tree_cost_uniform(n: usize, m: usize, w: usize, radius: f64, sides: &[f64]) -> f64 {
    let dim = sides.len();
    let d = dim as f64;
    // volume of the unit d-ball over that of its bounding cube [-1, 1]^d
    let ball_to_cube =
        std::f64::consts::PI.powf(d / 2.0) / gamma_half_plus_one(dim) / 2f64.powi(dim as i32);
    let mut frac = ball_to_cube;
    for &s in sides {
        frac *= if s > 0.0 {
            (2.0 * radius / s).min(1.0)
        } else {
            1.0
        };
    }
    let pts = n as f64 * frac.min(1.0);
    tree_cost(n, m, dim, w, pts, (pts / 16.0).max(1.0))
}

/// Gamma(d/2 + 1).
fn gamma_half_plus_one(dim: usize) -> f64 {
    let mut g = if dim % 2 == 0 {
        1.0
    } else {
        std::f64::consts::PI.sqrt() / 2.0
    };
    let mut x = if dim % 2 == 0 { 1.0 } else { 1.5 };
    while x <= dim as f64 / 2.0 + 1e-9 {
        g *= x;
        x += 1.0;
    }
    g
}

/// The size of a Gauss transform: `n` sources and `m` targets in `dim` dimensions, `w`
/// weight columns.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Size {
    pub n: usize,
    pub m: usize,
    pub dim: usize,
    pub w: usize,
}

/// The expansion terms an IFGT call works through: per source in the coefficients, and per
/// (target, cluster in reach) pair in the evaluation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IfgtTerms {
    pub per_source: f64,
    pub per_pair: f64,
}

impl IfgtTerms {
    /// Before a plan is built: every source at the whole expansion, and the share of it the
    /// target-side truncation kept on uniform data ([`ns::TARGET_TERMS`]).
    pub fn full(terms: f64) -> Self {
        IfgtTerms {
            per_source: terms,
            per_pair: ns::TARGET_TERMS * terms,
        }
    }
}

/// Cost in ns of the IFGT given K, the terms and the mean clusters in reach.
pub(crate) fn ifgt_cost(
    size: Size,
    n_clusters: usize,
    terms: IfgtTerms,
    clusters_in_reach: f64,
    with_tree: bool,
) -> f64 {
    let clustering = size.n as f64 * n_clusters as f64 * size.dim as f64 * ns::CLUSTERING_PER_DIM;
    clustering + ifgt_call_cost(size, n_clusters, terms, clusters_in_reach, with_tree)
}

/// Cost in ns of the IFGT's coefficients in one call, at `terms` per source: a pass over the
/// sources, whatever the number of targets.
pub(crate) fn ifgt_coefficient_cost(size: Size, terms: f64) -> f64 {
    size.n as f64
        * (ns::COEFFICIENT_SOURCE + terms * ns::COEFFICIENT_TERM * (1.0 + size.w as f64) * 0.5)
}

/// Cost in ns of one call of a built IFGT plan: the coefficients and the evaluation.
pub(crate) fn ifgt_call_cost(
    size: Size,
    n_clusters: usize,
    terms: IfgtTerms,
    clusters_in_reach: f64,
    with_tree: bool,
) -> f64 {
    let Size { m, dim, w, .. } = size;
    let d = dim as f64;
    let k = n_clusters as f64;
    let coefficients = ifgt_coefficient_cost(size, terms.per_source);
    let search = if with_tree {
        (k.log2().max(1.0) * 4.0 + clusters_in_reach) * ns::LEAF * 0.5
    } else {
        ifgt_flat_search(n_clusters, dim)
    };
    let per_target = search
        + clusters_in_reach
            * (ns::CLUSTER
                + ns::CLUSTER_PER_DIM * d
                + terms.per_pair * ns::TERM * (1.0 + w as f64) * 0.5);
    coefficients + m as f64 * per_target
}

/// Cost in ns per target of the IFGT's search for the clusters in reach without the centre
/// tree: a box test against every centre.
pub(crate) fn ifgt_flat_search(n_clusters: usize, dim: usize) -> f64 {
    n_clusters as f64 * dim as f64 * 0.6
}

/// Every `stride`-th target, at most `max` of them (deterministic sample).
pub(crate) fn sample_rows(points: &[f64], dim: usize, max: usize) -> Vec<f64> {
    let m = points.len() / dim;
    if m <= max {
        return points.to_vec();
    }
    let stride = m / max;
    (0..max)
        .flat_map(|i| {
            points[i * stride * dim..(i * stride + 1) * dim]
                .iter()
                .copied()
        })
        .collect()
}

/// Mean nearest-neighbour distance within a sample of points, over what it would be for as
/// many points spread uniformly over a box with the given sides (Poisson points:
/// Gamma(1 + 1/d) / (rho V_d)^(1/d), V_d the unit ball's volume). About 1 for data that fill
/// their box, well below 1 for clusters or a few-dimensional sheet inside it.
pub(crate) fn crowding(sample: &[f64], dim: usize, sides: &[f64]) -> f64 {
    let m = sample.len() / dim;
    if m < 8 || dim == 0 {
        return 1.0;
    }
    let d = dim as f64;
    let scale = sides.iter().copied().fold(0.0f64, f64::max);
    if scale <= 0.0 {
        return 1.0;
    }
    // sides far below the largest are counted at 1e-6 of it (a flat box is not empty)
    let volume: f64 = sides.iter().map(|&s| s.max(1e-6 * scale)).product();
    let ball = std::f64::consts::PI.powf(d / 2.0) / gamma_half_plus_one(dim);
    let rho = m as f64 / volume;
    let expected = gamma_one_plus_inverse(d) / (rho * ball).powf(1.0 / d);
    let mut total = 0.0;
    for i in 0..m {
        let a = &sample[i * dim..(i + 1) * dim];
        let nearest = (0..m)
            .filter(|&j| j != i)
            .map(|j| {
                let b = &sample[j * dim..(j + 1) * dim];
                a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum::<f64>()
            })
            .fold(f64::INFINITY, f64::min);
        total += nearest.sqrt();
    }
    total / m as f64 / expected
}

/// Gamma(1 + 1/d) for d >= 1 (between 0.886 and 1), by Stirling's series at 4 + 1/d.
fn gamma_one_plus_inverse(d: f64) -> f64 {
    let x = 1.0 / d;
    let z = 4.0 + x;
    let ln = (z - 0.5) * z.ln() - z + 0.5 * (2.0 * std::f64::consts::PI).ln() + 1.0 / (12.0 * z)
        - 1.0 / (360.0 * z.powi(3))
        + 1.0 / (1260.0 * z.powi(5));
    // Gamma(1 + x) = Gamma(4 + x) / ((1 + x)(2 + x)(3 + x))
    ln.exp() / ((1.0 + x) * (2.0 + x) * (3.0 + x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gamma_and_crowding_are_right_on_known_points() {
        // Gamma(2) = 1, Gamma(1.5) = sqrt(pi) / 2
        assert!((gamma_one_plus_inverse(1.0) - 1.0).abs() < 1e-6);
        assert!((gamma_one_plus_inverse(2.0) - std::f64::consts::PI.sqrt() / 2.0).abs() < 1e-6);
        let mut state = 1u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        for dim in [2, 5, 8] {
            let uniform: Vec<f64> = (0..128 * dim).map(|_| next()).collect();
            let c = crowding(&uniform, dim, &vec![1.0; dim]);
            assert!(c > 0.7 && c < 1.6, "{dim}: {c}");
            // the same number of points on a segment of the box's diagonal
            let line: Vec<f64> = (0..128)
                .flat_map(|_| {
                    let t = next();
                    vec![t; dim]
                })
                .collect();
            let c = crowding(&line, dim, &vec![1.0; dim]);
            assert!(c < 0.3, "{dim}: {c}");
        }
    }

    /// The tree's measured costs against the direct sum's: with every source in reach (the
    /// leaves one run) a tree call costs 1.1-1.6 direct sums, so that the check that skips
    /// hopeless trees can fire; with 1% in reach in a few runs, well under a tenth of one.
    #[test]
    fn a_tree_pair_costs_a_little_more_than_a_direct_one() {
        let (n, m) = (20_000usize, 5_000usize);
        for dim in [1, 2, 5, 10] {
            let direct = direct_cost(n, m, dim, 1);
            let all = tree_call_cost(m, dim, 1, n as f64, 1.0);
            assert!(
                all > 1.1 * direct && all < 1.6 * direct,
                "{dim}: {}",
                all / direct
            );
            let few = tree_call_cost(m, dim, 1, 0.01 * n as f64, 4.0);
            assert!(few < 0.1 * direct, "{dim}: {}", few / direct);
        }
    }
}
