//! Dual-tree (cell-cell) Barnes-Hut repulsion for t-SNE at large N.
//!
//! The per-target Barnes-Hut walk of [`crate::nbody::BarnesHut`] evaluates one kernel per
//! (target point, accepted source cell); at N = 1,000,000 that is a few hundred evaluations
//! per point and a cache-missing tree walk per target. Here a *pair of cells* (T, S) is
//! accepted when
//!
//! ```text
//! (side_T + side_S)² < θ² |c_T − c_S|²          (c = centre of mass, side = largest side
//!                                                 of the bounding box of the cell's points)
//! ```
//!
//! and S then acts on all of T at once through a first-order Taylor expansion about c_T:
//! for a target x = c_T + δ, with r = c_T − c_S, K₀ = 1 / (1 + |r|²),
//!
//! ```text
//! w K(x)² (x − c_S) ≈ w K₀² r + (w K₀² I − 4 w K₀³ r rᵀ) δ       (force, D + D² numbers)
//! w K(x)           ≈ w K₀ − 2 w K₀² r·δ                         (its Σ over T is |T| w K₀,
//!                                                                 Σ δ = 0 at the centre of mass)
//! ```
//!
//! The expansions are accumulated per target cell, shifted down the tree (F₀ + J Δc, J
//! unchanged) and evaluated at the points of the leaves; pairs of leaves that are never
//! separated are summed exactly. So θ = 0 is exact (no pair is accepted) and the error falls
//! with θ like Barnes-Hut's (source monopole about the centre of mass: O((side_S / d)²);
//! target expansion: O((side_T / d)²)). It is still a Barnes-Hut-type approximation (the
//! same opening criterion, on the sum of the two cell sizes).
//!
//! The tree: points sorted by a Morton (Z-order) key of a 2^k grid over their bounding box,
//! then cut recursively at the key bits, so every cell is a contiguous range of the sorted
//! points (leaves hold at most [`LEAF`] points) and nodes are stored in depth-first order.
//! Traversal: from the target side, each target cell receives the list of source cells not
//! yet accepted from its parent; non-separated sources are opened (the larger cell is split)
//! until they are accepted, or passed down; targets are processed in parallel (rayon join
//! over children of large cells).

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use crate::error::{EmbedError, Result, invalid};
use crate::nbody::check_points;

mod symmetric;

/// Most points in a leaf cell (pairs of leaves are summed exactly).
pub const LEAF: usize = 16;

/// The dual tree's θ per θ of the per-point walk: [`crate::objective::tsne_gradient_descent`]
/// runs the dual tree at `THETA_SCALE * theta`, the largest θ at which its errors did not
/// exceed the per-point walk's at θ = 0.5 on t-SNE embeddings of 10 blobs (relative 2-norm
/// of the force, relative error of Z, against the exact sums):
///
/// | N | per-point 0.5 | dual 0.5 | dual 0.54 | dual 0.6 |
/// |---|---|---|---|---|
/// | 20,000 | 2.69e-2, 1.12e-2 | 1.37e-2, 6.3e-3 | | 2.35e-2, 9.9e-3 |
/// | 50,000 | 1.94e-2, 9.2e-3 | 1.40e-2, 7.5e-3 | 1.77e-2, 9.0e-3 | 2.41e-2, 1.15e-2 |
///
/// The dual tree's advantage per θ shrinks with N (the per-point error falls, the dual
/// tree's stays) and is absent on smooth Gaussian-density layouts, so the scale is small.
pub const THETA_SCALE: f64 = 1.08;

/// Target cells with more points than this process their children in parallel.
const PAR_MIN: usize = 4096;

/// Bits of the Morton grid per dimension (keys are u64).
fn grid_bits(dim: usize) -> u32 {
    (63 / dim as u32).min(31)
}

#[derive(Debug, Clone, Copy)]
struct Cell<const D: usize> {
    start: u32,
    end: u32,
    /// Children: `kids[first_kid .. first_kid + n_kids]` (0 children = leaf).
    first_kid: u32,
    n_kids: u32,
    /// Parent cell (the root is its own parent) and one past the last cell of the subtree
    /// (cells are in depth-first order: the subtree of c is `c..last`).
    parent: u32,
    last: u32,
    /// Largest side of the bounding box of the cell's points (0 for one point).
    size: f64,
    /// Centre of mass (unit weights).
    centre: [f64; D],
    /// Bounding box of the cell's points.
    lo: [f64; D],
    hi: [f64; D],
}

/// The t-SNE repulsion pieces: the normaliser and the unnormalised repulsive forces.
#[derive(Debug, Clone, PartialEq)]
pub struct TsneRepulsion {
    /// Z = Σ_{n≠m} 1 / (1 + t_nm) (approximated).
    pub z: f64,
    /// Per point (input order, n x d row-major): Σ_{m≠n} (x_n − x_m) / (1 + t_nm)².
    pub force: Vec<f64>,
}

/// The Morton-ordered tree of the dual-tree repulsion (D = output dimension, 1 to 3).
#[derive(Debug, Clone)]
pub struct DualTree<const D: usize> {
    cells: Vec<Cell<D>>,
    kids: Vec<u32>,
    /// Points in tree order.
    points: Vec<[f64; D]>,
    /// Input index of each tree position.
    order: Vec<u32>,
    /// Cell pairs with more points than this are split in parallel (symmetric traversal).
    par_min: usize,
}

/// Bit b of `v` moved to bit b * dim.
fn spread(mut v: u64, dim: usize) -> u64 {
    let mut out = 0u64;
    let mut b = 0;
    while v != 0 {
        out |= (v & 1) << (b * dim);
        v >>= 1;
        b += 1;
    }
    out
}

/// (Morton key, index) of every point of `x` (n x D), sorted: a Z-order of a 2^k grid over
/// the bounding box.
fn morton_sorted<const D: usize>(x: &[f64]) -> Vec<(u64, u32)> {
    let mut lo = [f64::INFINITY; D];
    let mut hi = [f64::NEG_INFINITY; D];
    for p in x.chunks_exact(D) {
        for c in 0..D {
            lo[c] = lo[c].min(p[c]);
            hi[c] = hi[c].max(p[c]);
        }
    }
    let side = (0..D).map(|c| hi[c] - lo[c]).fold(0.0, f64::max);
    let bits = grid_bits(D);
    let scale = if side > 0.0 {
        (1u64 << bits) as f64 / side
    } else {
        0.0
    };
    let maxq = (1u64 << bits) - 1;
    let mut keyed: Vec<(u64, u32)> = x
        .par_chunks_exact(D)
        .enumerate()
        .map(|(i, p)| {
            let mut k = 0u64;
            for c in 0..D {
                let q = (((p[c] - lo[c]) * scale) as u64).min(maxq);
                k |= spread(q, D) << c;
            }
            (k, i as u32)
        })
        .collect();
    keyed.par_sort_unstable();
    keyed
}

/// The indices of the points of `x` (n x dim row-major, dim 1 to 3) in Morton (Z) order.
pub(crate) fn morton_order(x: &[f64], dim: usize) -> Vec<u32> {
    let keyed = match dim {
        1 => morton_sorted::<1>(x),
        2 => morton_sorted::<2>(x),
        _ => morton_sorted::<3>(x),
    };
    keyed.into_iter().map(|(_, i)| i).collect()
}

/// Builds the cells of a [`DualTree`] over Morton-sorted points (subtrees of large cells
/// in parallel).
struct Builder<'a, const D: usize> {
    points: &'a [[f64; D]],
    keys: &'a [u64],
    leaf: usize,
    par_build: usize,
    cells: Vec<Cell<D>>,
    kids: Vec<u32>,
}

/// Cells with more points than this build their children's subtrees in parallel.
const PAR_BUILD: usize = 65_536;

impl<const D: usize> Builder<'_, D> {
    /// Adds the cell of sorted positions start..end whose keys agree on the bits from
    /// `level` up (its children split on the next D bits below); returns its index.
    fn build(&mut self, start: usize, end: usize, level: usize, parent: u32) -> u32 {
        let id = self.cells.len();
        self.cells.push(Cell {
            start: start as u32,
            end: end as u32,
            first_kid: 0,
            n_kids: 0,
            parent,
            last: 0,
            size: 0.0,
            centre: [0.0; D],
            lo: [0.0; D],
            hi: [0.0; D],
        });
        let mut centre = [0.0; D];
        let mut lo = [f64::INFINITY; D];
        let mut hi = [f64::NEG_INFINITY; D];
        if end - start <= self.leaf || level == 0 {
            for p in &self.points[start..end] {
                for c in 0..D {
                    centre[c] += p[c];
                    lo[c] = lo[c].min(p[c]);
                    hi[c] = hi[c].max(p[c]);
                }
            }
        } else {
            // Descend the key bits until the points split (a level where all of them
            // share the bits adds no node); empty children are skipped.
            let mut lvl = level;
            let mut cuts = Vec::with_capacity(9);
            while lvl > 0 {
                lvl -= D;
                cuts.clear();
                cuts.push(start);
                let mask = (1u64 << D) - 1;
                let mut s = start;
                while s < end {
                    let b = (self.keys[s] >> lvl) & mask;
                    s += self.keys[s..end].partition_point(|&k| (k >> lvl) & mask <= b);
                    cuts.push(s);
                }
                if cuts.len() > 2 {
                    break;
                }
            }
            let mut kids = [0u32; 8];
            let nk = cuts.len() - 1;
            if end - start > self.par_build {
                // Large: the children's subtrees in parallel, appended in order (the same
                // depth-first layout as the serial build).
                let subs: Vec<(Vec<Cell<D>>, Vec<u32>)> = (0..nk)
                    .into_par_iter()
                    .map(|w| {
                        let mut b = Builder {
                            points: self.points,
                            keys: self.keys,
                            leaf: self.leaf,
                            par_build: self.par_build,
                            cells: Vec::new(),
                            kids: Vec::new(),
                        };
                        b.build(cuts[w], cuts[w + 1], lvl, 0);
                        (b.cells, b.kids)
                    })
                    .collect();
                for (w, (cs, ks)) in subs.into_iter().enumerate() {
                    let (oc, ok) = (self.cells.len() as u32, self.kids.len() as u32);
                    kids[w] = oc;
                    self.cells.extend(cs.into_iter().map(|mut c| {
                        c.first_kid += ok;
                        c.parent += oc;
                        c.last += oc;
                        c
                    }));
                    self.cells[oc as usize].parent = id as u32;
                    self.kids.extend(ks.into_iter().map(|k| k + oc));
                }
            } else {
                for w in 0..nk {
                    kids[w] = self.build(cuts[w], cuts[w + 1], lvl, id as u32);
                }
            }
            for &k in &kids[..nk] {
                let ck = &self.cells[k as usize];
                let m = (ck.end - ck.start) as f64;
                for c in 0..D {
                    centre[c] += m * ck.centre[c];
                    lo[c] = lo[c].min(ck.lo[c]);
                    hi[c] = hi[c].max(ck.hi[c]);
                }
            }
            let first = self.kids.len() as u32;
            self.kids.extend_from_slice(&kids[..nk]);
            self.cells[id].first_kid = first;
            self.cells[id].n_kids = nk as u32;
        }
        let m = (end - start) as f64;
        for c in centre.iter_mut() {
            *c /= m;
        }
        let last = self.cells.len() as u32;
        let c = &mut self.cells[id];
        c.last = last;
        c.centre = centre;
        c.lo = lo;
        c.hi = hi;
        // The cell size of the opening criterion: the largest side of the points' bounding
        // box (at most the geometric side of the Morton cell, often much less).
        c.size = (0..D).map(|k| hi[k] - lo[k]).fold(0.0, f64::max);
        id as u32
    }
}

type Expansion<const D: usize> = ([f64; D], [[f64; D]; D]);

impl<const D: usize> DualTree<D> {
    /// Builds the tree over `x` (n x D row-major).
    ///
    /// # Errors
    /// Shape and finiteness errors; D outside 1..=3; more than u32::MAX points.
    pub fn new(x: &[f64]) -> Result<DualTree<D>> {
        DualTree::with_leaf(x, LEAF)
    }

    /// Builds the tree over `x` (n x D row-major) with at most `leaf` points per leaf.
    ///
    /// # Errors
    /// As [`DualTree::new`]; `leaf` = 0.
    pub fn with_leaf(x: &[f64], leaf: usize) -> Result<DualTree<D>> {
        DualTree::built(x, leaf, PAR_BUILD)
    }

    /// [`DualTree::with_leaf`], building subtrees of more than `par_build` points in parallel.
    fn built(x: &[f64], leaf: usize, par_build: usize) -> Result<DualTree<D>> {
        if leaf == 0 {
            return Err(invalid("leaf", "must be >= 1"));
        }
        if !(1..=3).contains(&D) {
            return Err(invalid(
                "n_components",
                "the dual tree handles 1 to 3 dimensions",
            ));
        }
        let n = check_points(x, D)?;
        if n >= u32::MAX as usize {
            return Err(invalid("X", "too many points for the tree"));
        }
        let keyed = morton_sorted::<D>(x);
        let bits = grid_bits(D);
        let order: Vec<u32> = keyed.iter().map(|&(_, i)| i).collect();
        let keys: Vec<u64> = keyed.into_iter().map(|(k, _)| k).collect();
        let points: Vec<[f64; D]> = order
            .par_iter()
            .map(|&i| {
                let mut p = [0.0; D];
                p.copy_from_slice(&x[i as usize * D..(i as usize + 1) * D]);
                p
            })
            .collect();
        let mut b = Builder {
            points: &points,
            keys: &keys,
            leaf,
            par_build,
            cells: Vec::with_capacity(2 * n / leaf + 16),
            kids: Vec::with_capacity(2 * n / leaf + 16),
        };
        if n > 0 {
            b.build(0, n, bits as usize * D, 0);
        }
        let (cells, kids) = (b.cells, b.kids);
        let tree = DualTree {
            cells,
            kids,
            points,
            order,
            par_min: PAR_MIN,
        };
        Ok(tree)
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// True when the tree holds no point.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    fn children(&self, c: &Cell<D>) -> &[u32] {
        &self.kids[c.first_kid as usize..(c.first_kid + c.n_kids) as usize]
    }

    /// Sets the size (points of the pair) from which the symmetric traversal splits cell
    /// pairs in parallel (the result does not depend on it but for the pairs of large cells
    /// split on both sides).
    pub fn set_par_min(&mut self, par_min: usize) {
        self.par_min = par_min.max(1);
    }

    /// The t-SNE repulsion with opening parameter θ (θ = 0: exact) by the target-wise
    /// traversal: each target cell takes its list of source cells (each unordered pair is
    /// visited from both sides). Kept as the reference of [`DualTree::tsne_repulsion`].
    ///
    /// # Errors
    /// [`EmbedError::InvalidParameter`] for θ < 0 or NaN; [`EmbedError::Cancelled`].
    pub fn tsne_repulsion_targetwise(
        &self,
        theta: f64,
        cancel: &AtomicBool,
    ) -> Result<TsneRepulsion> {
        if theta.is_nan() || theta < 0.0 {
            return Err(invalid("theta", "must be >= 0"));
        }
        let n = self.len();
        let mut f = vec![[0.0; D]; n];
        let mut z = 0.0;
        if n > 0 {
            z = self.process(
                0,
                vec![0],
                ([0.0; D], [[0.0; D]; D]),
                theta * theta,
                &mut f,
                cancel,
            );
        }
        if cancel.load(Ordering::Relaxed) {
            return Err(EmbedError::Cancelled);
        }
        let mut force = vec![0.0; n * D];
        for (p, &i) in self.order.iter().enumerate() {
            force[i as usize * D..(i as usize + 1) * D].copy_from_slice(&f[p]);
        }
        Ok(TsneRepulsion { z, force })
    }

    /// Target cell `t` (its points' forces in `out`) against the source cells of `list`,
    /// with the far field `inherited` of its ancestors expanded about its centre; returns
    /// its share of Z.
    fn process(
        &self,
        t: u32,
        list: Vec<u32>,
        inherited: Expansion<D>,
        theta2: f64,
        out: &mut [[f64; D]],
        cancel: &AtomicBool,
    ) -> f64 {
        let tc = &self.cells[t as usize];
        let t_leaf = tc.n_kids == 0;
        let count_t = (tc.end - tc.start) as f64;
        let (mut f0, mut jac) = inherited;
        let mut z = 0.0;
        let mut next = Vec::with_capacity(list.len() * 2);
        let mut stack = list;
        while let Some(s) = stack.pop() {
            let sc = &self.cells[s as usize];
            let mut r = [0.0; D];
            let mut d2 = 0.0;
            for (c, rc) in r.iter_mut().enumerate() {
                *rc = tc.centre[c] - sc.centre[c];
                d2 += *rc * *rc;
            }
            let sz = tc.size + sc.size;
            if s != t && sz * sz < theta2 * d2 {
                let w = (sc.end - sc.start) as f64;
                let k = 1.0 / (1.0 + d2);
                let a = w * k * k;
                let b = 4.0 * a * k;
                z += count_t * w * k;
                for c in 0..D {
                    f0[c] += a * r[c];
                    jac[c][c] += a;
                    for e in 0..D {
                        jac[c][e] -= b * r[c] * r[e];
                    }
                }
                continue;
            }
            let s_leaf = sc.n_kids == 0;
            if s_leaf && t_leaf {
                z += self.direct(tc, sc, s == t, out);
            } else if t_leaf || (!s_leaf && sc.size >= tc.size) {
                stack.extend_from_slice(self.children(sc));
            } else {
                next.push(s);
            }
        }
        if t_leaf {
            let base = tc.start as usize;
            for (p, o) in self.points[base..tc.end as usize]
                .iter()
                .zip(out.iter_mut())
            {
                for c in 0..D {
                    let mut v = f0[c];
                    for e in 0..D {
                        v += jac[c][e] * (p[e] - tc.centre[e]);
                    }
                    o[c] += v;
                }
            }
            return z;
        }
        // Children: the far field shifted to their centres, the open sources passed down.
        let kids = self.children(tc);
        let mut parts = Vec::with_capacity(kids.len());
        let mut rest = out;
        for &k in kids {
            let kc = &self.cells[k as usize];
            let (a, b) = rest.split_at_mut((kc.end - kc.start) as usize);
            rest = b;
            let mut g = f0;
            for (gc, row) in g.iter_mut().zip(&jac) {
                for (e, j) in row.iter().enumerate() {
                    *gc += j * (kc.centre[e] - tc.centre[e]);
                }
            }
            parts.push((k, a, (g, jac)));
        }
        let zs: Vec<f64> = if count_t as usize > PAR_MIN {
            if cancel.load(Ordering::Relaxed) {
                return z;
            }
            parts
                .into_par_iter()
                .map(|(k, a, e)| self.process(k, next.clone(), e, theta2, a, cancel))
                .collect()
        } else {
            parts
                .into_iter()
                .map(|(k, a, e)| self.process(k, next.clone(), e, theta2, a, cancel))
                .collect()
        };
        z + zs.iter().sum::<f64>()
    }

    /// Exact sums of the points of leaf `tc` (forces in `out`) against those of leaf `sc`.
    fn direct(&self, tc: &Cell<D>, sc: &Cell<D>, same: bool, out: &mut [[f64; D]]) -> f64 {
        let src = &self.points[sc.start as usize..sc.end as usize];
        let tgt = &self.points[tc.start as usize..tc.end as usize];
        let mut z = 0.0;
        for (j, (p, o)) in tgt.iter().zip(out.iter_mut()).enumerate() {
            let mut acc = [0.0; D];
            for (m, q) in src.iter().enumerate() {
                if same && m == j {
                    continue;
                }
                let mut d = [0.0; D];
                let mut t = 0.0;
                for c in 0..D {
                    d[c] = p[c] - q[c];
                    t += d[c] * d[c];
                }
                let k = 1.0 / (1.0 + t);
                z += k;
                let k2 = k * k;
                for c in 0..D {
                    acc[c] += k2 * d[c];
                }
            }
            for c in 0..D {
                o[c] += acc[c];
            }
        }
        z
    }
}

/// The t-SNE repulsion of `x` (n x dim row-major, dim 1 to 3) by the dual tree
/// (symmetric traversal, leaves of [`LEAF`] points).
///
/// # Errors
/// As [`DualTree::new`] and [`DualTree::tsne_repulsion`].
pub fn tsne_repulsion(
    x: &[f64],
    dim: usize,
    theta: f64,
    cancel: &AtomicBool,
) -> Result<TsneRepulsion> {
    tsne_repulsion_with(x, dim, theta, DualOptions::default(), cancel)
}

/// Variants of the dual-tree repulsion (for tests and tuning).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DualOptions {
    /// Most points in a leaf.
    pub leaf: usize,
    /// Symmetric traversal (each unordered cell pair once) instead of the target-wise one.
    pub symmetric: bool,
    /// Cell pairs with more points than this are split in parallel (symmetric traversal).
    pub par_min: usize,
}

impl Default for DualOptions {
    fn default() -> Self {
        DualOptions {
            leaf: LEAF,
            symmetric: true,
            par_min: PAR_MIN,
        }
    }
}

/// [`tsne_repulsion`] with the tree and traversal of `opts`.
///
/// # Errors
/// As [`tsne_repulsion`]; `opts.leaf` = 0.
pub fn tsne_repulsion_with(
    x: &[f64],
    dim: usize,
    theta: f64,
    opts: DualOptions,
    cancel: &AtomicBool,
) -> Result<TsneRepulsion> {
    fn run<const D: usize>(
        x: &[f64],
        theta: f64,
        opts: DualOptions,
        cancel: &AtomicBool,
    ) -> Result<TsneRepulsion> {
        let mut t = DualTree::<D>::with_leaf(x, opts.leaf)?;
        t.set_par_min(opts.par_min);
        if opts.symmetric {
            t.tsne_repulsion(theta, cancel)
        } else {
            t.tsne_repulsion_targetwise(theta, cancel)
        }
    }
    match dim {
        1 => run::<1>(x, theta, opts, cancel),
        2 => run::<2>(x, theta, opts, cancel),
        3 => run::<3>(x, theta, opts, cancel),
        _ => Err(invalid(
            "n_components",
            format!("the dual tree handles 1 to 3 output dimensions, got {dim}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nbody::{BarnesHut, Kernel, exact_sums};

    fn layout(n: usize, dim: usize, seed: u64) -> Vec<f64> {
        // Clusters of uneven density, like a t-SNE layout (deterministic LCG).
        let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        let mut u = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64) / ((1u64 << 53) as f64)
        };
        let mut x = Vec::with_capacity(n * dim);
        for i in 0..n {
            let cl = (i % 7) as f64;
            for c in 0..dim {
                let centre = 20.0 * ((cl * (c as f64 + 1.3)).sin());
                let g = (u() + u() + u() - 1.5) * (1.0 + cl);
                x.push(centre + g);
            }
        }
        // A few coincident points.
        for c in 0..dim {
            x[dim + c] = x[c];
        }
        x
    }

    /// Exact Z and forces from the O(N²) sums (x s1 − sx, Σ s0).
    fn exact(x: &[f64], dim: usize) -> (f64, Vec<f64>) {
        let no = AtomicBool::new(false);
        let s = exact_sums(x, dim, Kernel::StudentT, None, &no).unwrap();
        let f = (0..x.len())
            .map(|i| x[i] * s.s1[i / dim] - s.sx[i])
            .collect();
        (s.s0.iter().sum(), f)
    }

    fn rel_err(a: &[f64], b: &[f64]) -> f64 {
        let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
        let den: f64 = b.iter().map(|y| y * y).sum();
        (num / den).sqrt()
    }

    #[test]
    fn theta_zero_is_exact() {
        let no = AtomicBool::new(false);
        for dim in 1..=3 {
            let x = layout(700, dim, dim as u64);
            let (z, f) = exact(&x, dim);
            let r = tsne_repulsion(&x, dim, 0.0, &no).unwrap();
            assert!((r.z - z).abs() <= 1e-10 * z, "dim {dim}: {} vs {z}", r.z);
            assert!(rel_err(&r.force, &f) < 1e-12, "dim {dim}");
        }
    }

    #[test]
    fn error_falls_with_theta_and_tracks_per_point_bh() {
        let no = AtomicBool::new(false);
        for dim in [2, 3] {
            let x = layout(3000, dim, 7 + dim as u64);
            let (z, f) = exact(&x, dim);
            let mut prev = 0.0;
            for theta in [0.1, 0.25, 0.5, 1.0] {
                let r = tsne_repulsion(&x, dim, theta, &no).unwrap();
                let e = rel_err(&r.force, &f);
                let ez = (r.z - z).abs() / z;
                // Per-point Barnes-Hut on the same points and θ.
                let s = BarnesHut::new(&x, dim, None)
                    .unwrap()
                    .sums(Kernel::StudentT, theta, &no)
                    .unwrap();
                let fb: Vec<f64> = (0..x.len())
                    .map(|i| x[i] * s.s1[i / dim] - s.sx[i])
                    .collect();
                let eb = rel_err(&fb, &f);
                let ezb = (s.s0.iter().sum::<f64>() - z).abs() / z;
                eprintln!(
                    "dim {dim} theta {theta}: dual force {e:.2e} Z {ez:.2e}; per-point {eb:.2e} Z {ezb:.2e}"
                );
                assert!(e > prev, "error must grow with theta");
                assert!(e < 2.0 * eb, "dual {e} vs per-point {eb} at theta {theta}");
                assert!(ez < 2.0 * ezb.max(eb), "Z: dual {ez} vs per-point {ezb}");
                prev = e;
            }
        }
    }

    #[test]
    fn symmetric_traversal_equals_the_target_wise_one() {
        let no = AtomicBool::new(false);
        for dim in 1..=3 {
            let x = layout(5000, dim, 11 + dim as u64);
            let (z, f) = exact(&x, dim);
            for theta in [0.0, 0.3, 0.5, 0.8] {
                let serial = DualOptions {
                    par_min: usize::MAX,
                    ..DualOptions::default()
                };
                let tw = DualOptions {
                    symmetric: false,
                    ..serial
                };
                let a = tsne_repulsion_with(&x, dim, theta, serial, &no).unwrap();
                let b = tsne_repulsion_with(&x, dim, theta, tw, &no).unwrap();
                // Same accepted pairs: equal up to rounding.
                assert!((a.z - b.z).abs() <= 1e-10 * b.z, "dim {dim} theta {theta}");
                assert!(
                    rel_err(&a.force, &b.force) < 1e-10,
                    "dim {dim} theta {theta}"
                );
                // Parallel splitting (both cells of large pairs, tiny threshold here): at
                // least as accurate; leaf sizes 1 and 40; θ = 0 exact in all.
                let eb = rel_err(&b.force, &f);
                for leaf in [1, 40] {
                    let par = DualOptions {
                        leaf,
                        par_min: 64,
                        ..DualOptions::default()
                    };
                    let c = tsne_repulsion_with(&x, dim, theta, par, &no).unwrap();
                    let ec = rel_err(&c.force, &f);
                    if theta == 0.0 {
                        assert!(ec < 1e-12 && (c.z - z).abs() <= 1e-10 * z, "dim {dim}");
                    } else if leaf == 40 {
                        assert!(ec <= 1.05 * eb, "dim {dim} theta {theta}: {ec} vs {eb}");
                    }
                    assert!((c.z - z).abs() <= 0.05 * z, "dim {dim} theta {theta}");
                }
                // Deterministic: the same in a one-thread pool.
                let one = rayon::ThreadPoolBuilder::new()
                    .num_threads(1)
                    .build()
                    .unwrap();
                let par = DualOptions {
                    par_min: 64,
                    ..DualOptions::default()
                };
                let c1 = one.install(|| tsne_repulsion_with(&x, dim, theta, par, &no).unwrap());
                let c2 = tsne_repulsion_with(&x, dim, theta, par, &no).unwrap();
                assert_eq!(c1, c2);
            }
        }
    }

    #[test]
    fn parallel_build_equals_the_serial_one() {
        let no = AtomicBool::new(false);
        let x = layout(20_000, 2, 5);
        let serial = DualTree::<2>::built(&x, LEAF, usize::MAX).unwrap();
        let par = DualTree::<2>::built(&x, LEAF, 100).unwrap();
        assert_eq!(serial.cells.len(), par.cells.len());
        for (a, b) in serial.cells.iter().zip(&par.cells) {
            assert_eq!(
                (a.start, a.end, a.n_kids, a.parent, a.last, a.centre, a.size),
                (b.start, b.end, b.n_kids, b.parent, b.last, b.centre, b.size)
            );
            assert_eq!(serial.children(a), par.children(b));
        }
        assert_eq!(
            serial.tsne_repulsion(0.5, &no).unwrap(),
            par.tsne_repulsion(0.5, &no).unwrap()
        );
    }

    #[test]
    fn tiny_and_degenerate_inputs() {
        let no = AtomicBool::new(false);
        // Empty, one point, all coincident (more than a leaf), bad theta, bad dim.
        assert_eq!(tsne_repulsion(&[], 2, 0.5, &no).unwrap().z, 0.0);
        let one = tsne_repulsion(&[1.0, 2.0], 2, 0.5, &no).unwrap();
        assert_eq!((one.z, one.force.clone()), (0.0, vec![0.0, 0.0]));
        let same = vec![3.0; 2 * 40];
        let r = tsne_repulsion(&same, 2, 0.5, &no).unwrap();
        assert!((r.z - 40.0 * 39.0).abs() < 1e-9 && r.force.iter().all(|&v| v == 0.0));
        assert!(tsne_repulsion(&[0.0, 1.0], 2, -1.0, &no).is_err());
        assert!(tsne_repulsion(&[0.0; 8], 4, 0.5, &no).is_err());
        let yes = AtomicBool::new(true);
        let x = layout(10_000, 2, 3);
        assert!(matches!(
            tsne_repulsion(&x, 2, 0.5, &yes),
            Err(EmbedError::Cancelled)
        ));
    }
}
