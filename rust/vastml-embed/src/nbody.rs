//! Kernel sums over all other points: the repulsive term of the embedding gradients.
//!
//! For points x_1..x_N (d dimensions), optional positive source weights v_m (default 1)
//! and a kernel K of the squared distance t, every target n gets (self excluded)
//!
//! ```text
//! s0[n] = Σ_{m≠n} v_m K(t_nm)      s1[n] = Σ_{m≠n} v_m K(t_nm)^q      sx[n] = Σ_{m≠n} v_m K(t_nm)^q x_m
//! ```
//!
//! with q = 1 for the Gaussian e^{−t} and q = 2 for the Student-t 1/(1 + t) (the powers
//! the EE / SNE / t-SNE gradients need; thesis eq. 5.8 and §5.1). Three ways:
//! [`exact_sums`] (O(N²d), parallel over targets), [`BarnesHut`] (2^d-tree, cells
//! summarised by their weighted centre when side / distance < θ; θ = 0 is exact; a cell
//! holding the target is never summarised, thesis erratum 30) and [`fgt_sums`] (the fast
//! Gauss transform of `vastml-fgt`, Gaussian kernel only; self terms subtracted exactly).

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;
use vastml_core::exp::exp_nonpositive;

pub use crate::kernel::{Kernel, KernelSums};

use crate::error::{EmbedError, Result, check_finite, invalid};
pub(crate) use crate::kernel::check_points;

/// How the repulsive kernel sums are computed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Repulsion {
    /// The exact O(N²) sums.
    Exact,
    /// Barnes-Hut with opening angle θ (cell side / distance to its centre).
    BarnesHut {
        /// Opening parameter θ >= 0 (0 = exact).
        theta: f64,
    },
    /// The fast Gauss transform with error <= epsilon · Σ weights (Gaussian kernel only).
    Fgt {
        /// Accuracy of the transform.
        epsilon: f64,
    },
    /// Polynomial interpolation on a grid plus FFT convolution (FIt-SNE; 1-D and 2-D),
    /// see [`crate::interp`].
    Interpolation {
        /// Interpolation nodes per box and dimension.
        n_interp: usize,
        /// Target box width in embedding units (FIt-SNE: 1).
        box_width: f64,
    },
}

/// The name of a [`Repulsion`] method as the Python API spells it (`"exact"`,
/// `"barnes_hut"`, `"fgt"`, `"fft"`); [`RepulsionMethod::with`] adds its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepulsionMethod {
    /// [`Repulsion::Exact`].
    Exact,
    /// [`Repulsion::BarnesHut`].
    BarnesHut,
    /// [`Repulsion::Fgt`].
    Fgt,
    /// [`Repulsion::Interpolation`] (`"fft"`).
    Interpolation,
}

/// The parameters of every [`Repulsion`] method; each method reads its own.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RepulsionParams {
    /// Barnes-Hut opening parameter θ.
    pub theta: f64,
    /// Accuracy of the fast Gauss transform.
    pub epsilon: f64,
    /// Interpolation nodes per box and dimension.
    pub n_interp: usize,
    /// Target box width of the interpolation grid.
    pub box_width: f64,
}

impl RepulsionMethod {
    /// The method with its parameters taken from `params`.
    pub fn with(self, params: &RepulsionParams) -> Repulsion {
        match self {
            RepulsionMethod::Exact => Repulsion::Exact,
            RepulsionMethod::BarnesHut => Repulsion::BarnesHut {
                theta: params.theta,
            },
            RepulsionMethod::Fgt => Repulsion::Fgt {
                epsilon: params.epsilon,
            },
            RepulsionMethod::Interpolation => Repulsion::Interpolation {
                n_interp: params.n_interp,
                box_width: params.box_width,
            },
        }
    }
}

impl std::str::FromStr for RepulsionMethod {
    type Err = EmbedError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "exact" => Ok(RepulsionMethod::Exact),
            "barnes_hut" => Ok(RepulsionMethod::BarnesHut),
            "fgt" => Ok(RepulsionMethod::Fgt),
            "fft" => Ok(RepulsionMethod::Interpolation),
            _ => Err(invalid(
                "gradient",
                format!("unknown method {s:?}; use exact, barnes_hut, fgt or fft"),
            )),
        }
    }
}

fn check_weights(weights: Option<&[f64]>, n: usize) -> Result<()> {
    if let Some(v) = weights {
        if v.len() != n {
            return Err(EmbedError::ShapeMismatch(format!(
                "{} weights for {n} points",
                v.len()
            )));
        }
        check_finite(v, "weights")?;
        if v.iter().any(|&w| w <= 0.0) {
            return Err(invalid("weights", "must be positive"));
        }
    }
    Ok(())
}

const TARGET_BLOCK: usize = 64;

/// The exact sums (O(N²d)), parallel over blocks of targets.
///
/// # Errors
/// Shape, finiteness and weight errors; [`EmbedError::Cancelled`].
pub fn exact_sums(
    x: &[f64],
    dim: usize,
    kernel: Kernel,
    weights: Option<&[f64]>,
    cancel: &AtomicBool,
) -> Result<KernelSums> {
    let n = check_points(x, dim)?;
    check_weights(weights, n)?;
    let ones;
    let v = match weights {
        Some(w) => w,
        None => {
            ones = vec![1.0; n];
            &ones
        }
    };
    match (dim, kernel) {
        (1, Kernel::Gaussian) => exact_soa::<1>(x, v, |t| exp_nonpositive(-t), |k| k, cancel),
        (2, Kernel::Gaussian) => exact_soa::<2>(x, v, |t| exp_nonpositive(-t), |k| k, cancel),
        (3, Kernel::Gaussian) => exact_soa::<3>(x, v, |t| exp_nonpositive(-t), |k| k, cancel),
        (1, Kernel::StudentT) => exact_soa::<1>(x, v, |t| 1.0 / (1.0 + t), |k| k * k, cancel),
        (2, Kernel::StudentT) => exact_soa::<2>(x, v, |t| 1.0 / (1.0 + t), |k| k * k, cancel),
        (3, Kernel::StudentT) => exact_soa::<3>(x, v, |t| 1.0 / (1.0 + t), |k| k * k, cancel),
        _ => exact_rows(x, dim, kernel, v, cancel),
    }
}

/// Exact sums for a fixed small dimension with the coordinates stored by column, so the
/// inner loop over sources is branch-free and vectorisable (self skipped by splitting it).
fn exact_soa<const D: usize>(
    x: &[f64],
    v: &[f64],
    kern: impl Fn(f64) -> f64 + Sync,
    power: impl Fn(f64) -> f64 + Sync,
    cancel: &AtomicBool,
) -> Result<KernelSums> {
    let n = v.len();
    let cols: Vec<Vec<f64>> = (0..D)
        .map(|c| (0..n).map(|i| x[i * D + c]).collect())
        .collect();
    let mut s0 = vec![0.0; n];
    let mut s1 = vec![0.0; n];
    let mut sx = vec![0.0; n * D];
    s0.par_chunks_mut(TARGET_BLOCK)
        .zip(s1.par_chunks_mut(TARGET_BLOCK))
        .zip(sx.par_chunks_mut(TARGET_BLOCK * D))
        .enumerate()
        .try_for_each(|(b, ((a0, a1), ax))| {
            if cancel.load(Ordering::Relaxed) {
                return Err(EmbedError::Cancelled);
            }
            for (j, (o0, o1)) in a0.iter_mut().zip(a1.iter_mut()).enumerate() {
                let i = b * TARGET_BLOCK + j;
                let mut xi = [0.0; D];
                for (c, q) in xi.iter_mut().enumerate() {
                    *q = cols[c][i];
                }
                let mut acc = (0.0, 0.0, [0.0; D]);
                for (lo, hi) in [(0, i), (i + 1, n)] {
                    for m in lo..hi {
                        let mut t = 0.0;
                        for c in 0..D {
                            let d = xi[c] - cols[c][m];
                            t += d * d;
                        }
                        let k = kern(t);
                        let kq = v[m] * power(k);
                        acc.0 += v[m] * k;
                        acc.1 += kq;
                        for (a, col) in acc.2.iter_mut().zip(&cols) {
                            *a += kq * col[m];
                        }
                    }
                }
                *o0 = acc.0;
                *o1 = acc.1;
                ax[j * D..(j + 1) * D].copy_from_slice(&acc.2);
            }
            Ok(())
        })?;
    Ok(KernelSums { s0, s1, sx })
}

/// Exact sums for any dimension (row-major coordinates).
fn exact_rows(
    x: &[f64],
    dim: usize,
    kernel: Kernel,
    v: &[f64],
    cancel: &AtomicBool,
) -> Result<KernelSums> {
    let n = v.len();
    let mut s0 = vec![0.0; n];
    let mut s1 = vec![0.0; n];
    let mut sx = vec![0.0; n * dim];
    s0.par_chunks_mut(TARGET_BLOCK)
        .zip(s1.par_chunks_mut(TARGET_BLOCK))
        .zip(sx.par_chunks_mut(TARGET_BLOCK * dim))
        .enumerate()
        .try_for_each(|(b, ((a0, a1), ax))| {
            if cancel.load(Ordering::Relaxed) {
                return Err(EmbedError::Cancelled);
            }
            for (j, (o0, o1)) in a0.iter_mut().zip(a1.iter_mut()).enumerate() {
                let i = b * TARGET_BLOCK + j;
                let xi = &x[i * dim..(i + 1) * dim];
                let ox = &mut ax[j * dim..(j + 1) * dim];
                for m in (0..n).filter(|&m| m != i) {
                    let xm = &x[m * dim..(m + 1) * dim];
                    let t: f64 = xi.iter().zip(xm).map(|(a, b)| (a - b) * (a - b)).sum();
                    let k = kernel.value(t);
                    let kq = v[m] * kernel.powered(k);
                    *o0 += v[m] * k;
                    *o1 += kq;
                    for (o, c) in ox.iter_mut().zip(xm) {
                        *o += kq * c;
                    }
                }
            }
            Ok(())
        })?;
    Ok(KernelSums { s0, s1, sx })
}

/// Largest output dimension the Barnes-Hut tree handles (quadtree d = 2, octree d = 3).
pub const MAX_TREE_DIM: usize = 3;

#[derive(Debug, Clone)]
struct Node {
    start: u32,
    end: u32,
    first_child: u32,
    n_children: u8,
    side: f64,
    weight: f64,
    /// Σ v x over the cell.
    moment: [f64; MAX_TREE_DIM],
    /// Σ v x / Σ v: where the cell's summary kernel is evaluated.
    centre: [f64; MAX_TREE_DIM],
}

/// A 2^d-tree (quadtree for d = 2, octree for d = 3) over weighted points for Barnes-Hut
/// kernel sums.
#[derive(Debug, Clone)]
pub struct BarnesHut {
    dim: usize,
    nodes: Vec<Node>,
    /// Points in tree order (row-major), their weights, and the tree position of each point.
    points: Vec<f64>,
    weights: Vec<f64>,
    position: Vec<u32>,
    /// Input index of each tree position (the inverse of `position`).
    order: Vec<u32>,
}

/// Deepest split; beyond it (coincident points) a leaf keeps several points, summed exactly.
const MAX_DEPTH: usize = 52;

impl BarnesHut {
    /// Builds the tree over `x` (n x dim row-major, dim <= 3) with optional positive weights.
    ///
    /// # Errors
    /// [`EmbedError::InvalidParameter`] for dim > 3; shape, finiteness and weight errors.
    pub fn new(x: &[f64], dim: usize, weights: Option<&[f64]>) -> Result<BarnesHut> {
        let n = check_points(x, dim)?;
        if dim > MAX_TREE_DIM {
            return Err(invalid(
                "n_components",
                format!("Barnes-Hut handles 1 to {MAX_TREE_DIM} output dimensions, got {dim}"),
            ));
        }
        if n >= u32::MAX as usize {
            return Err(invalid("X", "too many points for the tree"));
        }
        check_weights(weights, n)?;
        let mut perm: Vec<u32> = (0..n as u32).collect();
        let mut lo = [0.0; MAX_TREE_DIM];
        let mut hi = [0.0; MAX_TREE_DIM];
        for c in 0..dim {
            lo[c] = f64::INFINITY;
            hi[c] = f64::NEG_INFINITY;
        }
        for p in x.chunks_exact(dim) {
            for c in 0..dim {
                lo[c] = lo[c].min(p[c]);
                hi[c] = hi[c].max(p[c]);
            }
        }
        let side = (0..dim)
            .map(|c| hi[c] - lo[c])
            .fold(0.0, f64::max)
            .max(f64::MIN_POSITIVE);
        let mut tree = BarnesHut {
            dim,
            nodes: Vec::with_capacity(2 * n.max(1)),
            points: Vec::new(),
            weights: Vec::new(),
            position: vec![0; n],
            order: Vec::new(),
        };
        if n == 0 {
            return Ok(tree);
        }
        tree.nodes.push(Node {
            start: 0,
            end: n as u32,
            first_child: 0,
            n_children: 0,
            side,
            weight: 0.0,
            moment: [0.0; MAX_TREE_DIM],
            centre: [0.0; MAX_TREE_DIM],
        });
        let mut scratch = vec![0u32; n];
        tree.split(0, lo, x, weights, (&mut perm, &mut scratch), 0);
        tree.points = perm
            .iter()
            .flat_map(|&i| x[i as usize * dim..(i as usize + 1) * dim].iter().copied())
            .collect();
        tree.weights = perm
            .iter()
            .map(|&i| weights.map_or(1.0, |w| w[i as usize]))
            .collect();
        for (p, &i) in perm.iter().enumerate() {
            tree.position[i as usize] = p as u32;
        }
        tree.order = perm;
        Ok(tree)
    }

    /// Fills in cell `node` (lower corner `lo`, at `depth`) and splits it into its
    /// non-empty orthants, recursively; `perm` holds the point indices in tree order and
    /// `scratch` is a buffer of the same length.
    fn split(
        &mut self,
        node: usize,
        lo: [f64; MAX_TREE_DIM],
        x: &[f64],
        weights: Option<&[f64]>,
        (perm, scratch): (&mut [u32], &mut [u32]),
        depth: usize,
    ) {
        let dim = self.dim;
        let (start, end, side) = {
            let nd = &self.nodes[node];
            (nd.start as usize, nd.end as usize, nd.side)
        };
        // Weight and moment of the cell.
        let mut weight = 0.0;
        let mut moment = [0.0; MAX_TREE_DIM];
        for &i in &perm[start..end] {
            let v = weights.map_or(1.0, |w| w[i as usize]);
            weight += v;
            for c in 0..dim {
                moment[c] += v * x[i as usize * dim + c];
            }
        }
        self.nodes[node].weight = weight;
        self.nodes[node].moment = moment;
        for (c, m) in self.nodes[node].centre.iter_mut().zip(&moment).take(dim) {
            *c = m / weight;
        }
        if end - start <= 1 || depth >= MAX_DEPTH {
            return;
        }
        let half = 0.5 * side;
        let orthant = |i: u32| -> usize {
            let p = &x[i as usize * dim..(i as usize + 1) * dim];
            (0..dim).fold(0, |acc, c| acc | (((p[c] >= lo[c] + half) as usize) << c))
        };
        let n_orth = 1usize << dim;
        let mut counts = [0usize; 1 << MAX_TREE_DIM];
        for &i in &perm[start..end] {
            counts[orthant(i)] += 1;
        }
        if counts[..n_orth].iter().filter(|&&c| c > 0).count() == 1 && half <= 0.0 {
            return;
        }
        let mut offsets = [0usize; 1 << MAX_TREE_DIM];
        let mut acc = start;
        for o in 0..n_orth {
            offsets[o] = acc;
            acc += counts[o];
        }
        let mut cursor = offsets;
        for &i in &perm[start..end] {
            let o = orthant(i);
            scratch[cursor[o]] = i;
            cursor[o] += 1;
        }
        perm[start..end].copy_from_slice(&scratch[start..end]);
        let first = self.nodes.len();
        let mut children = Vec::with_capacity(n_orth);
        for o in 0..n_orth {
            if counts[o] == 0 {
                continue;
            }
            let mut clo = lo;
            for (c, l) in clo.iter_mut().enumerate().take(dim) {
                if (o >> c) & 1 == 1 {
                    *l += half;
                }
            }
            children.push((self.nodes.len(), clo));
            self.nodes.push(Node {
                start: offsets[o] as u32,
                end: (offsets[o] + counts[o]) as u32,
                first_child: 0,
                n_children: 0,
                side: half,
                weight: 0.0,
                moment: [0.0; MAX_TREE_DIM],
                centre: [0.0; MAX_TREE_DIM],
            });
        }
        self.nodes[node].first_child = first as u32;
        self.nodes[node].n_children = children.len() as u8;
        for (child, clo) in children {
            self.split(
                child,
                clo,
                x,
                weights,
                (&mut *perm, &mut *scratch),
                depth + 1,
            );
        }
    }

    /// Number of points in the tree.
    pub fn len(&self) -> usize {
        self.position.len()
    }

    /// True when the tree holds no point.
    pub fn is_empty(&self) -> bool {
        self.position.is_empty()
    }

    /// The Barnes-Hut sums at every tree point (self excluded), in the input order.
    ///
    /// # Errors
    /// [`EmbedError::InvalidParameter`] for θ < 0 or NaN; [`EmbedError::Cancelled`].
    pub fn sums(&self, kernel: Kernel, theta: f64, cancel: &AtomicBool) -> Result<KernelSums> {
        if theta.is_nan() || theta < 0.0 {
            return Err(invalid("theta", "must be >= 0"));
        }
        let dim = self.dim;
        let n = self.len();
        let theta2 = theta * theta;
        let mut s0 = vec![0.0; n];
        let mut s1 = vec![0.0; n];
        let mut sx = vec![0.0; n * dim];
        s0.par_chunks_mut(TARGET_BLOCK)
            .zip(s1.par_chunks_mut(TARGET_BLOCK))
            .zip(sx.par_chunks_mut(TARGET_BLOCK * dim))
            .enumerate()
            .try_for_each(|(b, ((a0, a1), ax))| {
                if cancel.load(Ordering::Relaxed) {
                    return Err(EmbedError::Cancelled);
                }
                let mut stack: Vec<u32> = Vec::with_capacity(64);
                for (j, (o0, o1)) in a0.iter_mut().zip(a1.iter_mut()).enumerate() {
                    // Targets in tree order (neighbouring queries share cells: cache friendly).
                    let p = b * TARGET_BLOCK + j;
                    let pos = p as u32;
                    let xq = &self.points[p * dim..(p + 1) * dim];
                    let ox = &mut ax[j * dim..(j + 1) * dim];
                    stack.clear();
                    stack.push(0);
                    while let Some(c) = stack.pop() {
                        let node = &self.nodes[c as usize];
                        let holds_query = node.start <= pos && pos < node.end;
                        let count = (node.end - node.start) as usize;
                        if node.n_children == 0 || (count == 1 && !holds_query) {
                            for m in node.start as usize..node.end as usize {
                                if m == p {
                                    continue;
                                }
                                let xm = &self.points[m * dim..(m + 1) * dim];
                                let t: f64 =
                                    xq.iter().zip(xm).map(|(a, b)| (a - b) * (a - b)).sum();
                                let v = self.weights[m];
                                let k = kernel.value(t);
                                let kq = v * kernel.powered(k);
                                *o0 += v * k;
                                *o1 += kq;
                                for (o, cc) in ox.iter_mut().zip(xm) {
                                    *o += kq * cc;
                                }
                            }
                            continue;
                        }
                        if !holds_query {
                            let mut t = 0.0;
                            for (q, m) in xq.iter().zip(&node.centre) {
                                let d = q - m;
                                t += d * d;
                            }
                            if node.side * node.side < theta2 * t {
                                let k = kernel.value(t);
                                let kq = kernel.powered(k);
                                *o0 += node.weight * k;
                                *o1 += node.weight * kq;
                                for (o, m) in ox.iter_mut().zip(&node.moment) {
                                    *o += kq * m;
                                }
                                continue;
                            }
                        }
                        let f = node.first_child;
                        stack.extend(f..f + node.n_children as u32);
                    }
                }
                Ok(())
            })?;
        let mut out = KernelSums {
            s0: vec![0.0; n],
            s1: vec![0.0; n],
            sx: vec![0.0; n * dim],
        };
        for (p, &i) in self.order.iter().enumerate() {
            let i = i as usize;
            out.s0[i] = s0[p];
            out.s1[i] = s1[p];
            out.sx[i * dim..(i + 1) * dim].copy_from_slice(&sx[p * dim..(p + 1) * dim]);
        }
        Ok(out)
    }
}

/// Targets per group of [`BarnesHut::sums_grouped`] (the largest cells with at most this
/// many points share one traversal).
pub const BH_GROUP: usize = 32;

/// From this many points on, [`Repulsion::BarnesHut`] uses [`BarnesHut::sums_grouped`]
/// (below, the per-target [`BarnesHut::sums`], so small results do not change).
pub const BH_GROUPED_MIN: usize = 50_000;

impl BarnesHut {
    /// The Barnes-Hut sums with one traversal per *group* of targets (the largest tree cells
    /// holding at most [`BH_GROUP`] points; Barnes 1990's grouping): a source cell is
    /// summarised for the whole group when side < θ × (distance from the group's bounding box
    /// to the cell's centre), which implies the per-target criterion side < θ × (distance
    /// from the target to the centre) for every target of the group, and the summary is still
    /// evaluated at each target's own position. So each target gets a Barnes-Hut sum at least
    /// as accurate as [`sums`](Self::sums) (θ = 0 is exact), while the branchy, cache-missing
    /// tree walk is shared by up to [`BH_GROUP`] targets and the kernel loops run over
    /// contiguous targets.
    ///
    /// # Errors
    /// [`EmbedError::InvalidParameter`] for θ < 0 or NaN; [`EmbedError::Cancelled`].
    pub fn sums_grouped(
        &self,
        kernel: Kernel,
        theta: f64,
        cancel: &AtomicBool,
    ) -> Result<KernelSums> {
        if theta.is_nan() || theta < 0.0 {
            return Err(invalid("theta", "must be >= 0"));
        }
        let dim = self.dim;
        let n = self.len();
        let theta2 = theta * theta;
        let mut s0 = vec![0.0; n];
        let mut s1 = vec![0.0; n];
        let mut sx = vec![0.0; n * dim];
        if n > 0 {
            // The groups tile the tree positions 0..n in order (pre-order, children by start).
            let mut groups: Vec<u32> = Vec::with_capacity(2 * n / BH_GROUP + 1);
            let mut st = vec![0u32];
            while let Some(c) = st.pop() {
                let nd = &self.nodes[c as usize];
                if nd.n_children == 0 || (nd.end - nd.start) as usize <= BH_GROUP {
                    groups.push(c);
                } else {
                    let f = nd.first_child;
                    st.extend((f..f + nd.n_children as u32).rev());
                }
            }
            let mut parts = Vec::with_capacity(groups.len());
            let (mut r0, mut r1, mut rx) = (&mut s0[..], &mut s1[..], &mut sx[..]);
            for &g in &groups {
                let m = (self.nodes[g as usize].end - self.nodes[g as usize].start) as usize;
                let (a0, b0) = r0.split_at_mut(m);
                let (a1, b1) = r1.split_at_mut(m);
                let (ax, bx) = rx.split_at_mut(m * dim);
                parts.push((g, a0, a1, ax));
                (r0, r1, rx) = (b0, b1, bx);
            }
            parts.into_par_iter().with_min_len(16).try_for_each_init(
                || Vec::<u32>::with_capacity(128),
                |stack, (g, o0, o1, ox)| {
                    if cancel.load(Ordering::Relaxed) {
                        return Err(EmbedError::Cancelled);
                    }
                    self.group_sums(g, kernel, theta2, stack, (o0, o1, ox));
                    Ok(())
                },
            )?;
        }
        let mut out = KernelSums {
            s0: vec![0.0; n],
            s1: vec![0.0; n],
            sx: vec![0.0; n * dim],
        };
        for (p, &i) in self.order.iter().enumerate() {
            let i = i as usize;
            out.s0[i] = s0[p];
            out.s1[i] = s1[p];
            out.sx[i * dim..(i + 1) * dim].copy_from_slice(&sx[p * dim..(p + 1) * dim]);
        }
        Ok(out)
    }

    /// The sums of the targets of group cell `g` (tree positions `start..end`), in tree order,
    /// into its parts `(s0, s1, sx)` of the outputs.
    fn group_sums(
        &self,
        g: u32,
        kernel: Kernel,
        theta2: f64,
        stack: &mut Vec<u32>,
        (o0, o1, ox): (&mut [f64], &mut [f64], &mut [f64]),
    ) {
        let dim = self.dim;
        let (gs, ge) = {
            let nd = &self.nodes[g as usize];
            (nd.start as usize, nd.end as usize)
        };
        let targets = &self.points[gs * dim..ge * dim];
        let mut lo = [f64::INFINITY; MAX_TREE_DIM];
        let mut hi = [f64::NEG_INFINITY; MAX_TREE_DIM];
        for t in targets.chunks_exact(dim) {
            for c in 0..dim {
                lo[c] = lo[c].min(t[c]);
                hi[c] = hi[c].max(t[c]);
            }
        }
        stack.clear();
        stack.push(0);
        while let Some(c) = stack.pop() {
            let node = &self.nodes[c as usize];
            let (ns, ne) = (node.start as usize, node.end as usize);
            let disjoint = ne <= gs || ns >= ge;
            if disjoint && (ne - ns > 1 || node.n_children == 0) {
                let mut d2 = 0.0;
                for (cc, m) in node.centre.iter().enumerate().take(dim) {
                    let d = if *m < lo[cc] {
                        lo[cc] - m
                    } else if *m > hi[cc] {
                        m - hi[cc]
                    } else {
                        0.0
                    };
                    d2 += d * d;
                }
                if node.side * node.side < theta2 * d2 {
                    for (j, t) in targets.chunks_exact(dim).enumerate() {
                        let mut tt = 0.0;
                        for (q, m) in t.iter().zip(&node.centre) {
                            let d = q - m;
                            tt += d * d;
                        }
                        let k = kernel.value(tt);
                        let kq = kernel.powered(k);
                        o0[j] += node.weight * k;
                        o1[j] += node.weight * kq;
                        for (o, m) in ox[j * dim..(j + 1) * dim].iter_mut().zip(&node.moment) {
                            *o += kq * m;
                        }
                    }
                    continue;
                }
            }
            if node.n_children == 0 || (disjoint && ne - ns == 1) {
                // Exact: every source point of the cell against every target (self skipped).
                for m in ns..ne {
                    let xm = &self.points[m * dim..(m + 1) * dim];
                    let v = self.weights[m];
                    for (j, t) in targets.chunks_exact(dim).enumerate() {
                        if gs + j == m {
                            continue;
                        }
                        let tt: f64 = t.iter().zip(xm).map(|(a, b)| (a - b) * (a - b)).sum();
                        let k = kernel.value(tt);
                        let kq = v * kernel.powered(k);
                        o0[j] += v * k;
                        o1[j] += kq;
                        for (o, cc) in ox[j * dim..(j + 1) * dim].iter_mut().zip(xm) {
                            *o += kq * cc;
                        }
                    }
                }
                continue;
            }
            let f = node.first_child;
            stack.extend(f..f + node.n_children as u32);
        }
    }
}

/// The Gaussian sums by the fast Gauss transform of `vastml-fgt` (bandwidth 1, so the
/// kernel is exp(−t)), with the self terms subtracted exactly. The error of each sum is at
/// most epsilon · Σ v (and epsilon · Σ v |x| for the moments).
///
/// # Errors
/// Shape, finiteness and weight errors; errors of the transform.
pub fn fgt_sums(
    x: &[f64],
    dim: usize,
    weights: Option<&[f64]>,
    epsilon: f64,
    cancel: &AtomicBool,
) -> Result<KernelSums> {
    let n = check_points(x, dim)?;
    check_weights(weights, n)?;
    let cols = dim + 1;
    let mut w = vec![0.0; n * cols];
    for i in 0..n {
        let v = weights.map_or(1.0, |w| w[i]);
        w[i * cols] = v;
        for c in 0..dim {
            w[i * cols + 1 + c] = v * x[i * dim + c];
        }
    }
    let g = vastml_fgt::gauss_transform(
        x,
        x,
        dim,
        &w,
        cols,
        1.0,
        epsilon,
        vastml_fgt::Method::Auto,
        cancel,
    )?;
    let mut s0 = vec![0.0; n];
    let mut sx = vec![0.0; n * dim];
    for i in 0..n {
        s0[i] = g[i * cols] - w[i * cols];
        for c in 0..dim {
            sx[i * dim + c] = g[i * cols + 1 + c] - w[i * cols + 1 + c];
        }
    }
    Ok(KernelSums {
        s1: s0.clone(),
        s0,
        sx,
    })
}

/// The sums by the chosen [`Repulsion`].
///
/// # Errors
/// As the chosen method; [`EmbedError::InvalidParameter`] for the FGT with a Student-t kernel.
pub fn kernel_sums(
    x: &[f64],
    dim: usize,
    kernel: Kernel,
    weights: Option<&[f64]>,
    repulsion: Repulsion,
    cancel: &AtomicBool,
) -> Result<KernelSums> {
    match repulsion {
        Repulsion::Exact => exact_sums(x, dim, kernel, weights, cancel),
        Repulsion::BarnesHut { theta } => {
            let tree = BarnesHut::new(x, dim, weights)?;
            if tree.len() >= BH_GROUPED_MIN {
                tree.sums_grouped(kernel, theta, cancel)
            } else {
                tree.sums(kernel, theta, cancel)
            }
        }
        Repulsion::Fgt { epsilon } => {
            if kernel != Kernel::Gaussian {
                return Err(invalid(
                    "gradient",
                    "the fast Gauss transform needs a Gaussian kernel (EE, SNE, s-SNE); use Barnes-Hut for t-SNE",
                ));
            }
            fgt_sums(x, dim, weights, epsilon, cancel)
        }
        Repulsion::Interpolation {
            n_interp,
            box_width,
        } => crate::interp::interpolation_sums(
            x,
            dim,
            kernel,
            weights,
            crate::interp::InterpOptions {
                n_interp,
                box_width,
                ..Default::default()
            },
            cancel,
        ),
    }
}

impl BarnesHut {
    /// The Barnes-Hut sums at outside `targets` (m x dim row-major) over all tree points
    /// (no self exclusion: the targets are not tree points), with the per-target opening
    /// rule of [`sums`](Self::sums); θ = 0 is exact. O(m log N) after the O(N log N) build.
    ///
    /// # Errors
    /// [`EmbedError::InvalidParameter`] for θ < 0 or NaN; shape and finiteness errors of
    /// the targets; [`EmbedError::Cancelled`].
    pub fn sums_at(
        &self,
        targets: &[f64],
        kernel: Kernel,
        theta: f64,
        cancel: &AtomicBool,
    ) -> Result<KernelSums> {
        if theta.is_nan() || theta < 0.0 {
            return Err(invalid("theta", "must be >= 0"));
        }
        let dim = self.dim;
        let m = check_points(targets, dim)?;
        let theta2 = theta * theta;
        let mut s0 = vec![0.0; m];
        let mut s1 = vec![0.0; m];
        let mut sx = vec![0.0; m * dim];
        if self.is_empty() {
            return Ok(KernelSums { s0, s1, sx });
        }
        s0.par_chunks_mut(TARGET_BLOCK)
            .zip(s1.par_chunks_mut(TARGET_BLOCK))
            .zip(sx.par_chunks_mut(TARGET_BLOCK * dim))
            .enumerate()
            .try_for_each(|(b, ((a0, a1), ax))| {
                if cancel.load(Ordering::Relaxed) {
                    return Err(EmbedError::Cancelled);
                }
                let mut stack: Vec<u32> = Vec::with_capacity(64);
                for (j, (o0, o1)) in a0.iter_mut().zip(a1.iter_mut()).enumerate() {
                    let p = b * TARGET_BLOCK + j;
                    let xq = &targets[p * dim..(p + 1) * dim];
                    let ox = &mut ax[j * dim..(j + 1) * dim];
                    stack.clear();
                    stack.push(0);
                    while let Some(c) = stack.pop() {
                        let node = &self.nodes[c as usize];
                        let count = (node.end - node.start) as usize;
                        if node.n_children == 0 || count == 1 {
                            for mm in node.start as usize..node.end as usize {
                                let xm = &self.points[mm * dim..(mm + 1) * dim];
                                let t: f64 =
                                    xq.iter().zip(xm).map(|(a, b)| (a - b) * (a - b)).sum();
                                let v = self.weights[mm];
                                let k = kernel.value(t);
                                let kq = v * kernel.powered(k);
                                *o0 += v * k;
                                *o1 += kq;
                                for (o, cc) in ox.iter_mut().zip(xm) {
                                    *o += kq * cc;
                                }
                            }
                            continue;
                        }
                        let mut t = 0.0;
                        for (q, mc) in xq.iter().zip(&node.centre) {
                            let d = q - mc;
                            t += d * d;
                        }
                        if node.side * node.side < theta2 * t {
                            let k = kernel.value(t);
                            let kq = kernel.powered(k);
                            *o0 += node.weight * k;
                            *o1 += node.weight * kq;
                            for (o, mc) in ox.iter_mut().zip(&node.moment) {
                                *o += kq * mc;
                            }
                            continue;
                        }
                        let f = node.first_child;
                        stack.extend(f..f + node.n_children as u32);
                    }
                }
                Ok(())
            })?;
        Ok(KernelSums { s0, s1, sx })
    }
}

/// Kernel sums at outside targets over a fixed set of sources: the repulsion of the
/// out-of-sample embedding (thesis §5.4, eq. 5.9), where M new points move against N
/// fixed training points. Built once (the Barnes-Hut tree over the sources), then
/// [`at`](Self::at) costs O(M log N) (Barnes-Hut), O(M + N) (fast Gauss transform) or
/// O(M N) (exact) per call.
///
/// ```
/// use std::sync::atomic::AtomicBool;
/// use vastml_embed::{Kernel, Repulsion};
/// use vastml_embed::nbody::SourceSums;
/// let sources = [0.0, 0.0, 1.0, 0.0];
/// let s = SourceSums::new(&sources, 2, Kernel::Gaussian, Repulsion::Exact).unwrap();
/// let r = s.at(&[0.0, 0.0], &AtomicBool::new(false)).unwrap();
/// assert!((r.s0[0] - (1.0 + (-1.0f64).exp())).abs() < 1e-12);
/// ```
#[derive(Debug, Clone)]
pub struct SourceSums {
    kernel: Kernel,
    dim: usize,
    how: SourceMethod,
}

#[derive(Debug, Clone)]
enum SourceMethod {
    Exact(Vec<f64>),
    BarnesHut(BarnesHut, f64),
    Fgt(Vec<f64>, f64),
}

impl SourceSums {
    /// Prepares the sums over `sources` (n x dim row-major) with `repulsion` (exact,
    /// Barnes-Hut or the fast Gauss transform; the interpolation method is for
    /// all-pairs sums only).
    ///
    /// # Errors
    /// Shape and finiteness errors; [`EmbedError::InvalidParameter`] for the interpolation,
    /// for the FGT with a Student-t kernel, for Barnes-Hut above 3 dimensions.
    pub fn new(
        sources: &[f64],
        dim: usize,
        kernel: Kernel,
        repulsion: Repulsion,
    ) -> Result<SourceSums> {
        check_points(sources, dim)?;
        let how = match repulsion {
            Repulsion::Exact => SourceMethod::Exact(sources.to_vec()),
            Repulsion::BarnesHut { theta } => {
                if theta.is_nan() || theta < 0.0 {
                    return Err(invalid("theta", "must be >= 0"));
                }
                SourceMethod::BarnesHut(BarnesHut::new(sources, dim, None)?, theta)
            }
            Repulsion::Fgt { epsilon } => {
                if kernel != Kernel::Gaussian {
                    return Err(invalid(
                        "gradient",
                        "the fast Gauss transform needs a Gaussian kernel",
                    ));
                }
                SourceMethod::Fgt(sources.to_vec(), epsilon)
            }
            Repulsion::Interpolation { .. } => {
                return Err(invalid(
                    "gradient",
                    "sums at new points use 'exact', 'barnes_hut' or 'fgt'",
                ));
            }
        };
        Ok(SourceSums { kernel, dim, how })
    }

    /// Number of coordinates of the sources (and of the targets).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Σ_m K, Σ_m K^q and Σ_m K^q x_m over all sources at each target (m x dim).
    ///
    /// # Errors
    /// Shape and finiteness errors of the targets; errors of the method;
    /// [`EmbedError::Cancelled`].
    pub fn at(&self, targets: &[f64], cancel: &AtomicBool) -> Result<KernelSums> {
        let dim = self.dim;
        let m = check_points(targets, dim)?;
        match &self.how {
            SourceMethod::BarnesHut(tree, theta) => {
                tree.sums_at(targets, self.kernel, *theta, cancel)
            }
            SourceMethod::Exact(src) => {
                let kernel = self.kernel;
                let mut s0 = vec![0.0; m];
                let mut s1 = vec![0.0; m];
                let mut sx = vec![0.0; m * dim];
                s0.par_iter_mut()
                    .zip(s1.par_iter_mut())
                    .zip(sx.par_chunks_mut(dim))
                    .enumerate()
                    .try_for_each(|(j, ((o0, o1), ox))| {
                        if j % TARGET_BLOCK == 0 && cancel.load(Ordering::Relaxed) {
                            return Err(EmbedError::Cancelled);
                        }
                        let xq = &targets[j * dim..(j + 1) * dim];
                        for xm in src.chunks_exact(dim) {
                            let t: f64 = xq.iter().zip(xm).map(|(a, b)| (a - b) * (a - b)).sum();
                            let k = kernel.value(t);
                            let kq = kernel.powered(k);
                            *o0 += k;
                            *o1 += kq;
                            for (o, c) in ox.iter_mut().zip(xm) {
                                *o += kq * c;
                            }
                        }
                        Ok(())
                    })?;
                Ok(KernelSums { s0, s1, sx })
            }
            SourceMethod::Fgt(src, epsilon) => {
                let n = src.len() / dim;
                let cols = dim + 1;
                let mut w = vec![0.0; n * cols];
                for i in 0..n {
                    w[i * cols] = 1.0;
                    w[i * cols + 1..(i + 1) * cols].copy_from_slice(&src[i * dim..(i + 1) * dim]);
                }
                let g = vastml_fgt::gauss_transform(
                    src,
                    targets,
                    dim,
                    &w,
                    cols,
                    1.0,
                    *epsilon,
                    vastml_fgt::Method::Auto,
                    cancel,
                )?;
                let mut s0 = vec![0.0; m];
                let mut sx = vec![0.0; m * dim];
                for j in 0..m {
                    s0[j] = g[j * cols];
                    sx[j * dim..(j + 1) * dim].copy_from_slice(&g[j * cols + 1..(j + 1) * cols]);
                }
                Ok(KernelSums {
                    s1: s0.clone(),
                    s0,
                    sx,
                })
            }
        }
    }
}

#[cfg(test)]
mod source_sums_tests {
    use super::*;

    fn lcg(n: usize, seed: u64) -> Vec<f64> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 11) as f64 / (1u64 << 53) as f64) * 6.0 - 3.0
            })
            .collect()
    }

    #[test]
    fn barnes_hut_and_fgt_at_targets_match_exact() {
        let cancel = AtomicBool::new(false);
        let src = lcg(2 * 3000, 1);
        let tgt = lcg(2 * 200, 2);
        for kernel in [Kernel::Gaussian, Kernel::StudentT] {
            let exact = SourceSums::new(&src, 2, kernel, Repulsion::Exact)
                .unwrap()
                .at(&tgt, &cancel)
                .unwrap();
            let bh0 = SourceSums::new(&src, 2, kernel, Repulsion::BarnesHut { theta: 0.0 })
                .unwrap()
                .at(&tgt, &cancel)
                .unwrap();
            for (a, b) in exact.s0.iter().zip(&bh0.s0) {
                assert!((a - b).abs() <= 1e-10 * a.abs().max(1e-300));
            }
            // relative L1 error of s1: small, and smaller at the smaller opening angle
            let err = |theta: f64| {
                let bh = SourceSums::new(&src, 2, kernel, Repulsion::BarnesHut { theta })
                    .unwrap()
                    .at(&tgt, &cancel)
                    .unwrap();
                let num: f64 = exact
                    .s1
                    .iter()
                    .zip(&bh.s1)
                    .map(|(a, b)| (a - b).abs())
                    .sum();
                num / exact.s1.iter().map(|a| a.abs()).sum::<f64>()
            };
            let (e5, e2) = (err(0.5), err(0.2));
            assert!(e5 < 5e-2 && e2 < e5 && e5 > 0.0, "{kernel:?}: {e5} {e2}");
        }
        let exact = SourceSums::new(&src, 2, Kernel::Gaussian, Repulsion::Exact)
            .unwrap()
            .at(&tgt, &cancel)
            .unwrap();
        let fgt = SourceSums::new(&src, 2, Kernel::Gaussian, Repulsion::Fgt { epsilon: 1e-8 })
            .unwrap()
            .at(&tgt, &cancel)
            .unwrap();
        for (a, b) in exact.sx.iter().zip(&fgt.sx) {
            assert!((a - b).abs() <= 1e-6 * 3000.0 * 3.0);
        }
        assert!(
            SourceSums::new(&src, 2, Kernel::StudentT, Repulsion::Fgt { epsilon: 1e-3 }).is_err()
        );
    }
}
