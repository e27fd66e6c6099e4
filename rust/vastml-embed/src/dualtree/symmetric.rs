//! The symmetric traversal of the dual tree: each unordered cell pair {A, B} is visited
//! once and acts on both sides (the Student-t kernel is symmetric).
//!
//! For an accepted pair with r = c_A − c_B, K₀ = 1 / (1 + |r|²): A's expansion about c_A
//! gains |B| K₀² r and |B| (K₀² I − 4 K₀³ r rᵀ), B's expansion about c_B gains −|A| K₀² r and
//! |A| (K₀² I − 4 K₀³ r rᵀ), and Z gains 2 |A| |B| K₀; pairs of leaves are summed exactly,
//! each point pair once. The pairs accepted are those of the target-wise traversal (same
//! opening criterion and the same rule for which cell to split, which is symmetric in the
//! two cells but for exact ties of sizes), except that pairs of large cells are split on
//! both sides at once so they can run in parallel.
//!
//! Parallelism without locks or per-thread copies: a subtree owns the contiguous ranges of
//! its cells (depth-first order) and points (Morton order), handed out as disjoint mutable
//! [`View`]s. The children of a cell interact with themselves in parallel, then pair by pair
//! in the rounds of a round-robin tournament (each round a matching: disjoint subtrees);
//! two large cells A, B split both and their children pair up in the rounds of a Latin
//! rectangle. The summation order is fixed by the tree, so results do not depend on the
//! number of threads.

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use super::{Cell, DualTree, Expansion, TsneRepulsion};
use crate::error::{EmbedError, Result, invalid};

/// The mutable state of one subtree: far-field expansions of its cells and the forces of
/// its points (tree order).
struct View<'a, const D: usize> {
    /// The subtree's root cell; `exp[0]` is its expansion.
    root: usize,
    exp: &'a mut [Expansion<D>],
    /// Tree position of the subtree's first point.
    p0: usize,
    force: &'a mut [[f64; D]],
}

impl<const D: usize> View<'_, D> {
    fn exp(&mut self, c: u32) -> &mut Expansion<D> {
        &mut self.exp[c as usize - self.root]
    }

    fn force(&mut self, c: &Cell<D>) -> &mut [[f64; D]] {
        &mut self.force[c.start as usize - self.p0..c.end as usize - self.p0]
    }
}

/// The rounds of a round-robin tournament of `n` players (circle method): every pair
/// i < j exactly once, each round a matching.
fn tournament(n: usize) -> Vec<Vec<(usize, usize)>> {
    let m = n + n % 2;
    let mut rounds = Vec::with_capacity(m.saturating_sub(1));
    for r in 0..m.saturating_sub(1) {
        let mut round = Vec::with_capacity(m / 2);
        let mut push = |a: usize, b: usize| {
            if a < n && b < n {
                round.push((a.min(b), a.max(b)));
            }
        };
        push(m - 1, r);
        for i in 1..m / 2 {
            push((r + i) % (m - 1), (r + m - 1 - i) % (m - 1));
        }
        rounds.push(round);
    }
    rounds
}

/// Disjoint mutable references to `views[i]` and `views[j]` for the pairs of one round.
fn matched<'s, 'a, const D: usize>(
    views: &'s mut [View<'a, D>],
    round: &[(usize, usize)],
) -> Vec<(&'s mut View<'a, D>, &'s mut View<'a, D>)> {
    let mut slots: Vec<Option<&'s mut View<'a, D>>> = views.iter_mut().map(Some).collect();
    let mut out = Vec::with_capacity(round.len());
    for &(i, j) in round {
        if let (Some(a), Some(b)) = (slots[i].take(), slots[j].take()) {
            out.push((a, b));
        }
    }
    out
}

impl<const D: usize> DualTree<D> {
    /// The t-SNE repulsion by the symmetric traversal (θ = 0: exact); see the module doc.
    ///
    /// # Errors
    /// [`EmbedError::InvalidParameter`] for θ < 0 or NaN; [`EmbedError::Cancelled`].
    pub fn tsne_repulsion(&self, theta: f64, cancel: &AtomicBool) -> Result<TsneRepulsion> {
        if theta.is_nan() || theta < 0.0 {
            return Err(invalid("theta", "must be >= 0"));
        }
        let n = self.len();
        let mut f = vec![[0.0; D]; n];
        let mut z = 0.0;
        if n > 0 {
            let mut exp = vec![([0.0; D], [[0.0; D]; D]); self.cells.len()];
            let mut root = View {
                root: 0,
                exp: &mut exp,
                p0: 0,
                force: &mut f,
            };
            z = self.self_pairs(&mut root, theta * theta, cancel);
            if cancel.load(Ordering::Relaxed) {
                return Err(EmbedError::Cancelled);
            }
            self.push_down(&mut exp, &mut f);
        }
        let mut force = vec![0.0; n * D];
        for (p, &i) in self.order.iter().enumerate() {
            force[i as usize * D..(i as usize + 1) * D].copy_from_slice(&f[p]);
        }
        Ok(TsneRepulsion { z, force })
    }

    /// Shifts every cell's expansion down to its children (depth-first order: parents
    /// first) and evaluates the leaves' at their points, adding to `f` (tree order).
    fn push_down(&self, exp: &mut [Expansion<D>], f: &mut [[f64; D]]) {
        for c in 1..self.cells.len() {
            let cc = &self.cells[c];
            let p = cc.parent as usize;
            let (head, tail) = exp.split_at_mut(c);
            let (pf, pj) = head[p];
            let pc = &self.cells[p].centre;
            let (cf, cj) = &mut tail[0];
            for a in 0..D {
                let mut v = pf[a];
                for e in 0..D {
                    v += pj[a][e] * (cc.centre[e] - pc[e]);
                    cj[a][e] += pj[a][e];
                }
                cf[a] += v;
            }
        }
        let leaves: Vec<(&Cell<D>, &Expansion<D>)> = self
            .cells
            .iter()
            .zip(exp.iter())
            .filter(|(c, _)| c.n_kids == 0)
            .collect();
        for (c, (f0, jac)) in leaves {
            let (s, e) = (c.start as usize, c.end as usize);
            for (p, o) in self.points[s..e].iter().zip(&mut f[s..e]) {
                for a in 0..D {
                    let mut v = f0[a];
                    for b in 0..D {
                        v += jac[a][b] * (p[b] - c.centre[b]);
                    }
                    o[a] += v;
                }
            }
        }
    }

    /// The views of the children of the view's root cell.
    fn split<'s>(&self, v: &'s mut View<'_, D>) -> Vec<View<'s, D>> {
        let t = &self.cells[v.root];
        let mut exp = &mut v.exp[1..];
        let mut force = &mut v.force[..];
        let mut out = Vec::with_capacity(t.n_kids as usize);
        for &k in self.children(t) {
            let kc = &self.cells[k as usize];
            let (e, er) = exp.split_at_mut((kc.last - k) as usize);
            let (f, fr) = force.split_at_mut((kc.end - kc.start) as usize);
            out.push(View {
                root: k as usize,
                exp: e,
                p0: kc.start as usize,
                force: f,
            });
            (exp, force) = (er, fr);
        }
        out
    }

    /// All pairs within the subtree of the view's root; returns their share of Z.
    fn self_pairs(&self, v: &mut View<'_, D>, theta2: f64, cancel: &AtomicBool) -> f64 {
        let t = &self.cells[v.root];
        if t.n_kids == 0 {
            return self.direct_self(t, v.force);
        }
        let big = (t.end - t.start) as usize > self.par_min;
        if big && cancel.load(Ordering::Relaxed) {
            return 0.0;
        }
        let mut kids = self.split(v);
        let mut z = if big {
            let zs: Vec<f64> = kids
                .par_iter_mut()
                .map(|k| self.self_pairs(k, theta2, cancel))
                .collect();
            zs.iter().sum()
        } else {
            kids.iter_mut()
                .map(|k| self.self_pairs(k, theta2, cancel))
                .sum()
        };
        for round in tournament(kids.len()) {
            let pairs = matched(&mut kids, &round);
            if big {
                let zs: Vec<f64> = pairs
                    .into_par_iter()
                    .map(|(a, b)| self.cross(a.root as u32, a, b.root as u32, b, theta2, cancel))
                    .collect();
                z += zs.iter().sum::<f64>();
            } else {
                for (a, b) in pairs {
                    z += self.cross(a.root as u32, a, b.root as u32, b, theta2, cancel);
                }
            }
        }
        z
    }

    /// Cell `a` (in view `va`) against cell `b` (in view `vb`, disjoint); returns their
    /// share of Z (both orders).
    fn cross(
        &self,
        a: u32,
        va: &mut View<'_, D>,
        b: u32,
        vb: &mut View<'_, D>,
        theta2: f64,
        cancel: &AtomicBool,
    ) -> f64 {
        let (ac, bc) = (&self.cells[a as usize], &self.cells[b as usize]);
        let mut r = [0.0; D];
        let mut d2 = 0.0;
        for (c, rc) in r.iter_mut().enumerate() {
            *rc = ac.centre[c] - bc.centre[c];
            d2 += *rc * *rc;
        }
        let sz = ac.size + bc.size;
        let (na, nb) = ((ac.end - ac.start) as f64, (bc.end - bc.start) as f64);
        if sz * sz < theta2 * d2 {
            let k = 1.0 / (1.0 + d2);
            let k2 = k * k;
            let (fa, ja) = va.exp(a);
            let (wa, wb) = (nb * k2, na * k2);
            let (ba, bb) = (4.0 * wa * k, 4.0 * wb * k);
            for c in 0..D {
                fa[c] += wa * r[c];
                ja[c][c] += wa;
                for e in 0..D {
                    ja[c][e] -= ba * r[c] * r[e];
                }
            }
            let (fb, jb) = vb.exp(b);
            for c in 0..D {
                fb[c] -= wb * r[c];
                jb[c][c] += wb;
                for e in 0..D {
                    jb[c][e] -= bb * r[c] * r[e];
                }
            }
            return 2.0 * na * nb * k;
        }
        let (a_leaf, b_leaf) = (ac.n_kids == 0, bc.n_kids == 0);
        if a_leaf && b_leaf {
            return self.direct_cross(ac, va.force(ac), bc, vb.force(bc));
        }
        if !a_leaf
            && !b_leaf
            && (na + nb) as usize > self.par_min
            && va.root == a as usize
            && vb.root == b as usize
        {
            if cancel.load(Ordering::Relaxed) {
                return 0.0;
            }
            // Split both; the children pair up in the rounds of a Latin rectangle.
            let (mut ka, mut kb) = (self.split(va), self.split(vb));
            if ka.len() > kb.len() {
                std::mem::swap(&mut ka, &mut kb);
            }
            let mut z = 0.0;
            for shift in 0..kb.len() {
                let mut rb: Vec<&mut View<'_, D>> = kb.iter_mut().collect();
                rb.rotate_left(shift);
                let zs: Vec<f64> = ka
                    .iter_mut()
                    .zip(rb)
                    .collect::<Vec<_>>()
                    .into_par_iter()
                    .map(|(x, y)| self.cross(x.root as u32, x, y.root as u32, y, theta2, cancel))
                    .collect();
                z += zs.iter().sum::<f64>();
            }
            return z;
        }
        // The target-wise rule, seen from a: split b unless a is the larger (or b a leaf).
        if a_leaf || (!b_leaf && bc.size >= ac.size) {
            self.children(bc)
                .iter()
                .map(|&k| self.cross(a, va, k, vb, theta2, cancel))
                .sum()
        } else {
            self.children(ac)
                .iter()
                .map(|&k| self.cross(k, va, b, vb, theta2, cancel))
                .sum()
        }
    }

    /// Exact sums over the point pairs of leaf `tc` (forces in `f`); returns 2 Σ_{i<j} K.
    fn direct_self(&self, tc: &Cell<D>, f: &mut [[f64; D]]) -> f64 {
        let pts = &self.points[tc.start as usize..tc.end as usize];
        let mut z = 0.0;
        for i in 0..pts.len() {
            let p = pts[i];
            let mut acc = [0.0; D];
            for j in i + 1..pts.len() {
                let q = &pts[j];
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
                    f[j][c] -= k2 * d[c];
                }
            }
            for c in 0..D {
                f[i][c] += acc[c];
            }
        }
        2.0 * z
    }

    /// Exact sums between the points of leaves `ac` and `bc` (forces in `fa`, `fb`);
    /// returns 2 Σ K.
    fn direct_cross(
        &self,
        ac: &Cell<D>,
        fa: &mut [[f64; D]],
        bc: &Cell<D>,
        fb: &mut [[f64; D]],
    ) -> f64 {
        let pa = &self.points[ac.start as usize..ac.end as usize];
        let pb = &self.points[bc.start as usize..bc.end as usize];
        let mut z = 0.0;
        for (p, o) in pa.iter().zip(fa.iter_mut()) {
            let mut acc = [0.0; D];
            for (q, ob) in pb.iter().zip(fb.iter_mut()) {
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
                    ob[c] -= k2 * d[c];
                }
            }
            for c in 0..D {
                o[c] += acc[c];
            }
        }
        2.0 * z
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tournament_rounds_are_matchings_covering_every_pair_once() {
        for n in 1..=9 {
            let mut seen = std::collections::HashSet::new();
            for round in tournament(n) {
                let mut used = vec![false; n];
                for (a, b) in round {
                    assert!(a < b && b < n && !used[a] && !used[b]);
                    used[a] = true;
                    used[b] = true;
                    assert!(seen.insert((a, b)));
                }
            }
            assert_eq!(seen.len(), n * (n - 1) / 2, "n = {n}");
        }
    }
}

#[cfg(test)]
mod profile {
    use super::super::*;
    use std::time::Instant;

    /// Phase timings at 1M points (run by hand: `cargo test --release profile_1m -- --ignored
    /// --nocapture`).
    #[test]
    #[ignore]
    fn profile_1m() {
        let n = 1_000_000;
        let mut s = 1u64;
        let mut u = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64) / ((1u64 << 53) as f64)
        };
        let mut x = Vec::with_capacity(2 * n);
        for i in 0..n {
            let a = (i % 10) as f64 * 0.628;
            let r = 125.0 + 25.0 * (u() + u() + u() - 1.5);
            x.push(r * a.cos() + 25.0 * (u() + u() - 1.0));
            x.push(r * a.sin() + 25.0 * (u() + u() - 1.0));
        }
        // As in the descent: points already in Morton order.
        let perm = morton_order(&x, 2);
        let x: Vec<f64> = perm
            .iter()
            .flat_map(|&i| [x[2 * i as usize], x[2 * i as usize + 1]])
            .collect();
        let no = AtomicBool::new(false);
        for _ in 0..2 {
            let t = Instant::now();
            let keyed = morton_sorted::<2>(&x);
            let t_sort = t.elapsed();
            drop(keyed);
            let t = Instant::now();
            let tree = DualTree::<2>::new(&x).unwrap();
            let t_new = t.elapsed();
            let t = Instant::now();
            let r = tree.tsne_repulsion(0.54, &no).unwrap();
            let t_rep = t.elapsed();
            let t = Instant::now();
            let r2 = tree.tsne_repulsion(1e6, &no).unwrap();
            let t_far = t.elapsed();
            eprintln!(
                "sort {t_sort:?} new {t_new:?} repulsion(0.54) {t_rep:?} repulsion(1e6) {t_far:?} z {} {}",
                r.z, r2.z
            );
        }
    }
}
