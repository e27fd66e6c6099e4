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
    pub const PAIR_PER_DIM: f64 = 0.12;
    /// One (target, source) pair, fixed part (the exponential and the weighted sum).
    pub const PAIR: f64 = 0.45;
    /// One leaf visited by a tree query (traversal and call overhead).
    pub const LEAF: f64 = 25.0;
    /// One monomial term (one multiply plus one multiply-add per weight column).
    pub const TERM: f64 = 0.9;
    /// One cluster in reach of a target (distance, exponential, loop overhead), per dimension.
    pub const CLUSTER_PER_DIM: f64 = 1.0;
    /// Fixed part of one cluster in reach.
    pub const CLUSTER: f64 = 15.0;
    /// One point-centre distance during farthest-point clustering, per dimension.
    pub const CLUSTERING_PER_DIM: f64 = 0.5;
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
    let per_pair = ns::PAIR + ns::PAIR_PER_DIM * dim as f64 + 0.15 * (w as f64 - 1.0);
    let build = ns::TREE_BUILD * n as f64 * (n as f64).log2().max(1.0);
    build + m as f64 * (leaves_in_reach * ns::LEAF + sources_in_reach * per_pair)
}

/// Cost in ns of the IFGT given K, the number of terms and the mean clusters in reach.
#[allow(clippy::too_many_arguments)]
pub(crate) fn ifgt_cost(
    n: usize,
    m: usize,
    dim: usize,
    w: usize,
    n_clusters: usize,
    terms: f64,
    clusters_in_reach: f64,
    with_tree: bool,
) -> f64 {
    let d = dim as f64;
    let k = n_clusters as f64;
    let clustering = n as f64 * k * d * ns::CLUSTERING_PER_DIM;
    let coefficients = n as f64 * terms * ns::TERM * (1.0 + w as f64) * 0.5;
    let search = if with_tree {
        (k.log2().max(1.0) * 4.0 + clusters_in_reach) * ns::LEAF * 0.5
    } else {
        k * d * 0.6
    };
    let per_target = search
        + clusters_in_reach * (ns::CLUSTER + ns::CLUSTER_PER_DIM * d + terms * ns::TERM * (1.0 + w as f64) * 0.5);
    clustering + coefficients + m as f64 * per_target
}

/// Every `stride`-th target, at most `max` of them (deterministic sample).
pub(crate) fn sample_rows(points: &[f64], dim: usize, max: usize) -> Vec<f64> {
    let m = points.len() / dim;
    if m <= max {
        return points.to_vec();
    }
    let stride = m / max;
    (0..max)
        .flat_map(|i| points[i * stride * dim..(i * stride + 1) * dim].iter().copied())
        .collect()
}
