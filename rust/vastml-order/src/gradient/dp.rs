//! Bounded dynamic programme over sets with a meet in the middle, for both gradient criteria.
//!
//! Let F(S) be the best value, over the orders of a set S placed first, of the triples the
//! prefix already decides: those inside S and those with two objects in S and one outside
//! (the outside object comes later, so the later of the two is the middle). Appending j to S
//! decides the triples (i ∈ S, j, k ∈ R), R = V \ (S + j), with j in the middle:
//!
//! F(S + j) = max_{j} F(S) + g(S, j),   g(S, j) = Σ_{i ∈ S} Σ_{k ∈ R} g(i, j, k).
//!
//! Every triple has two objects in S or two in its complement T, and a triple (s, t, t')
//! with s ∈ S scores like a prefix triple of T read backwards, so the value of the order
//! "best chain of S, then the best chain of T reversed" is F(S) + F(T): the optimum is
//! max_{|S| = ⌈n/2⌉} F(S) + F(V \ S), and only the layers up to the middle are needed.
//!
//! The layers are kept as sorted vectors of sets, and a set whose F plus an upper bound on
//! its best completion (pair-coupled bound on the (placed, unplaced, unplaced) triples and
//! the best middle of each unplaced triple, as in the branch and bound; unweighted also the
//! best order of each unplaced quadruple, shared by its u − 3 triples) is not above the
//! incumbent is dropped: it cannot lie on a strictly better order. Unweighted, the bound is
//! applied to each child inside its parent (before merging: a child pruned there has the
//! same bound as, and a value no larger than, the merged set's best).

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use super::Tables;
use crate::error::OrderError;

/// One set of a layer: F, and the last object of its best chain.
#[derive(Clone, Copy, Debug)]
struct State {
    mask: u32,
    last: u8,
    value: f64,
}

/// Per-layer counts of a run of [`bounded_dp`].
#[derive(Debug, Clone, Default)]
pub(crate) struct DpStats {
    /// distinct sets generated per layer (before the bound)
    pub generated: Vec<usize>,
    /// sets kept per layer
    pub kept: Vec<usize>,
}

/// Precomputed bit planes (unweighted) or distances (weighted).
struct Kernel {
    n: usize,
    weighted: bool,
    /// unweighted: g3[i][a][b] = g(i, a, b) (i first, a in the middle; 0 on repeats)
    g3: Vec<[Row; 32]>,
    /// unweighted: g3t[i][a][b] = g(i, b, a)
    g3t: Vec<[Row; 32]>,
    /// unweighted: b3[a][b][c] = best3(a, b, c)
    b3: Vec<[Row; 32]>,
    /// unweighted: q4[q4at[a * n + b] + c - b - 1][d] = best4(a, b, c, d) + 8 for a < b < c
    /// (8 on repeats): only the rows of the triples in increasing order, so that the table
    /// (C(n, 3) × 32 bytes, 130 kB at n = 30) stays in the L2 cache
    q4: Vec<[u8; 32]>,
    /// unweighted: start of the rows of the pair a < b in `q4`
    q4at: Vec<usize>,
    /// weighted: distances (zero diagonal) and row sums
    d: Vec<f64>,
    rowsum: Vec<f64>,
    /// weighted: Σ_{a<b} d(a, b)
    total: f64,
    /// weighted: maxedge[a * n + b] has bit c set when d(a, b) is the largest edge of the
    /// triangle {a, b, c} (ties by the index pair)
    maxedge: Vec<u32>,
    /// whether the CPU has AVX2 and POPCNT
    simd: bool,
}

/// One row of a dense unweighted table, over 32 object slots.
type Row = [i8; 32];

#[inline(always)]
fn masked_sum(r: &Row, m: &Row) -> i32 {
    let mut acc = [0i16; 32];
    for l in 0..32 {
        acc[l] += i16::from(r[l] & m[l]);
    }
    acc.iter().map(|&v| i32::from(v)).sum()
}

impl Kernel {
    fn new(t: &Tables, d: &[f64]) -> Self {
        let n = t.n;
        let mut k = Self {
            n,
            weighted: t.weighted,
            g3: Vec::new(),
            g3t: Vec::new(),
            b3: Vec::new(),
            q4: Vec::new(),
            q4at: Vec::new(),
            d: Vec::new(),
            rowsum: Vec::new(),
            total: 0.0,
            maxedge: Vec::new(),
            simd: has_simd(),
        };
        if t.weighted {
            k.d = (0..n * n)
                .map(|x| if x / n == x % n { 0.0 } else { d[x] })
                .collect();
            k.rowsum = (0..n)
                .map(|a| k.d[a * n..(a + 1) * n].iter().sum())
                .collect();
            k.total = 0.5 * k.rowsum.iter().sum::<f64>();
            let key = |a: usize, b: usize| (k.d[a * n + b], a.min(b), a.max(b));
            let mut me = vec![0u32; n * n];
            for a in 0..n {
                for b in 0..n {
                    if a == b {
                        continue;
                    }
                    let kab = key(a, b);
                    for c in 0..n {
                        if c != a && c != b && key(a, c) < kab && key(b, c) < kab {
                            me[a * n + b] |= 1 << c;
                        }
                    }
                }
            }
            k.maxedge = me;
        } else {
            k.g3 = vec![[[0; 32]; 32]; n];
            k.g3t = vec![[[0; 32]; 32]; n];
            k.b3 = vec![[[0; 32]; 32]; n];
            for a in 0..n {
                for b in 0..n {
                    for c in 0..n {
                        if a != b && a != c && b != c {
                            let v = t.g(a, b, c).round() as i8;
                            k.g3[a][b][c] = v;
                            k.g3t[a][c][b] = v;
                            k.b3[a][b][c] = t.best3[(a * n + b) * n + c].round() as i8;
                        }
                    }
                }
            }
            if !t.best4.is_empty() {
                k.q4at = vec![0; n * n];
                for a in 0..n {
                    for b in a + 1..n {
                        k.q4at[a * n + b] = k.q4.len();
                        for c in b + 1..n {
                            let mut row = [8u8; 32];
                            for (dd, v) in row[..n].iter_mut().enumerate() {
                                let abc = (a * n + b) * n + c;
                                *v = (t.best4[abc * n + dd].round() as i64 + 8) as u8;
                            }
                            k.q4.push(row);
                        }
                    }
                }
            }
        }
        k
    }

    /// Unweighted: the rows of `q4` of the triples (a, b, c), c = b + 1, ..., n - 1 (a < b).
    #[inline(always)]
    fn q4_rows(&self, a: usize, b: usize) -> &[[u8; 32]] {
        let at = self.q4at[a * self.n + b];
        &self.q4[at..at + self.n - b - 1]
    }

    /// Weighted: calls `out(j, g(S, j))` for every j outside S.
    #[inline(always)]
    fn gains(&self, s: u32, out: &mut impl FnMut(usize, f64)) {
        let n = self.n;
        let all = full(n);
        let u = all & !s;
        let (ns, nu) = (s.count_ones() as i32, u.count_ones() as i32);
        {
            let mut ds = [0.0f64; 32];
            let mut fi = s;
            while fi != 0 {
                let i = fi.trailing_zeros() as usize;
                fi &= fi - 1;
                let row = &self.d[i * n..(i + 1) * n];
                for (x, &v) in ds[..n].iter_mut().zip(row) {
                    *x += v;
                }
            }
            let mut cross = 0.0;
            let mut fu = u;
            while fu != 0 {
                cross += ds[fu.trailing_zeros() as usize];
                fu &= fu - 1;
            }
            let mut fj = u;
            while fj != 0 {
                let j = fj.trailing_zeros() as usize;
                fj &= fj - 1;
                let g = 2.0 * (cross - ds[j])
                    - f64::from(nu - 1) * ds[j]
                    - f64::from(ns) * (self.rowsum[j] - ds[j]);
                out(j, g);
            }
        }
    }

    /// Weighted: upper bound on the triples a completion of S still decides: the
    /// pair-coupled bound on (placed, unplaced, unplaced) plus the best middle of every
    /// unplaced triple (3 × its longest edge − its perimeter).
    #[inline(always)]
    fn bound(&self, s: u32) -> f64 {
        let n = self.n;
        let u = full(n) & !s;
        let mut ds = [0.0f64; 32];
        let mut fi = s;
        while fi != 0 {
            let i = fi.trailing_zeros() as usize;
            fi &= fi - 1;
            let row = &self.d[i * n..(i + 1) * n];
            for (x, &v) in ds[..n].iter_mut().zip(row) {
                *x += v;
            }
        }
        let fs = f64::from(s.count_ones());
        let nu = u.count_ones();
        // pair terms: Σ_{a<b ∈ U} (ds_a + ds_b) / 2 − |S| d_ab + 3/2 |ds_a − ds_b|, the last
        // sum from the sorted ds (the k-th smallest of m values enters with 2k − m + 1)
        let mut xs = [0.0f64; 32];
        let mut m = 0;
        let mut sum_u = 0.0;
        let mut fa = u;
        while fa != 0 {
            let a = fa.trailing_zeros() as usize;
            fa &= fa - 1;
            xs[m] = ds[a];
            sum_u += ds[a];
            m += 1;
        }
        let xs = &mut xs[..m];
        xs.sort_unstable_by(f64::total_cmp);
        let mut spread = 0.0;
        for (k, &x) in xs.iter().enumerate() {
            spread += x * (2.0 * k as f64 - (m as f64 - 1.0));
        }
        // Σ_{a<b ∈ U} d_ab: all pairs minus those touching S (Σ_{i ∈ S} ds_i counts the pairs
        // inside S twice)
        let mut touch = 0.0;
        let mut fi = s;
        while fi != 0 {
            let i = fi.trailing_zeros() as usize;
            fi &= fi - 1;
            touch += self.rowsum[i] - 0.5 * ds[i];
        }
        let perim = self.total - touch;
        let pairs = 0.5 * (m as f64 - 1.0) * sum_u - fs * perim + 1.5 * spread;
        // unplaced triples: best3 = 3 max edge - perimeter
        let tri = if nu >= 3 {
            let mut maxes = 0.0;
            let mut fa = u;
            while fa != 0 {
                let a = fa.trailing_zeros() as usize;
                fa &= fa - 1;
                let (row, me) = (
                    &self.d[a * n..(a + 1) * n],
                    &self.maxedge[a * n..(a + 1) * n],
                );
                let mut fb = fa;
                while fb != 0 {
                    let b = fb.trailing_zeros() as usize;
                    fb &= fb - 1;
                    maxes += row[b] * f64::from((me[b] & u).count_ones());
                }
            }
            3.0 * maxes - f64::from(nu - 2) * perim
        } else {
            0.0
        };
        pairs + tri
    }

    /// Unweighted: pushes the children of `st` whose value plus bound exceeds `thr`. The
    /// matrix A[a][b] = Σ_{i ∈ S} g(i, a, b) of the parent gives each child's gain
    /// (Σ_{k ∈ R} A[j][k]) and, with g(j, ·, ·) added, its pair-coupled bound; the triple
    /// and quadruple totals of the child are the parent's minus those with j (see
    /// [`Kernel::children`]), so no set needs bounding again after merging.
    #[inline(always)]
    fn expand_unweighted<const AVX: bool>(&self, st: &State, thr: f64, out: &mut Vec<State>) {
        self.children::<AVX>(st, thr, |j, value, bound| {
            if value + bound > thr {
                out.push(State {
                    mask: st.mask | 1 << j,
                    last: j as u8,
                    value,
                });
            }
        });
    }

    /// Unweighted, for a set after merging: the pair-coupled bound plus the better of the
    /// triple bound and the quadruple bound (Σ best4 over the unplaced quadruples / (u − 3):
    /// each unplaced triple lies in u − 3 of them), both rounded down (the values are
    /// integers). The oracle of the bounds [`Kernel::children`] gives each child.
    #[cfg(test)]
    fn strong_bound(&self, s: u32) -> f64 {
        let n = self.n;
        let u = full(n) & !s;
        let nu = u.count_ones() as i32;
        let mut a = [[0i8; 32]; 32];
        let mut at = [[0i8; 32]; 32];
        let mut um = [0i8; 32];
        let mut um8 = [0u8; 32];
        let mut fx = u;
        while fx != 0 {
            let x = fx.trailing_zeros() as usize;
            fx &= fx - 1;
            um[x] = -1;
            um8[x] = 0xff;
            let mut fi = s;
            while fi != 0 {
                let i = fi.trailing_zeros() as usize;
                fi &= fi - 1;
                let (g, gt) = (&self.g3[i][x], &self.g3t[i][x]);
                for l in 0..32 {
                    a[x][l] += g[l];
                    at[x][l] += gt[l];
                }
            }
        }
        let mut accp = [0i16; 32];
        let mut acc3 = [0i16; 32];
        let mut fx = u;
        while fx != 0 {
            let x = fx.trailing_zeros() as usize;
            fx &= fx - 1;
            let (ax, atx) = (&a[x], &at[x]);
            for l in 0..32 {
                accp[l] += i16::from(ax[l].max(atx[l]) & um[l]);
            }
            let mut fy = fx;
            while fy != 0 {
                let y = fy.trailing_zeros() as usize;
                fy &= fy - 1;
                let r = &self.b3[x][y];
                for l in 0..32 {
                    acc3[l] += i16::from(r[l] & um[l]);
                }
            }
        }
        let pairs2: i32 = accp.iter().map(|&v| i32::from(v)).sum();
        // Σ_{x<y} Σ_{c ∈ U} best3 counts each triple three times
        let c3x3: i32 = acc3.iter().map(|&v| i32::from(v)).sum();
        let mut inner = c3x3 / 3;
        if !self.q4.is_empty() && nu >= 4 {
            // Σ_{x<y<z} Σ_{w ∈ U} (best4 + 8): each quadruple four times, plus 8 per term
            let mut total: i64 = 0;
            let mut rows = 0i64;
            let mut fx = u;
            while fx != 0 {
                let x = fx.trailing_zeros() as usize;
                fx &= fx - 1;
                let mut fy = fx;
                while fy != 0 {
                    let y = fy.trailing_zeros() as usize;
                    fy &= fy - 1;
                    let q = self.q4_rows(x, y);
                    let mut acc = [0u8; 32];
                    let mut k = 0;
                    let mut fz = fy;
                    while fz != 0 {
                        let z = fz.trailing_zeros() as usize;
                        fz &= fz - 1;
                        let r = &q[z - y - 1];
                        for l in 0..32 {
                            acc[l] += r[l] & um8[l];
                        }
                        k += 1;
                        rows += 1;
                        if k == 15 {
                            total += acc.iter().map(|&v| i64::from(v)).sum::<i64>();
                            acc = [0u8; 32];
                            k = 0;
                        }
                    }
                    total += acc.iter().map(|&v| i64::from(v)).sum::<i64>();
                }
            }
            let c4 = (total - 8 * rows * i64::from(nu)) / 4;
            inner = inner.min(c4.div_euclid(i64::from(nu - 3)) as i32);
        }
        f64::from(pairs2 / 2 + inner)
    }

    /// Unweighted: lane w of Σ_{x<y<z ∈ U} (best4(x, y, z, w) + 8) (8 where w is one of
    /// x, y, z), with byte lanes flushed every 15 rows (15 × 16 < 256).
    #[inline(always)]
    fn quad_lanes<const AVX: bool>(&self, u: u32) -> [u32; 32] {
        #[cfg(target_arch = "x86_64")]
        if AVX {
            // SAFETY: AVX is only set where the CPU has AVX2 (`Kernel::simd`).
            return unsafe { avx::quad_lanes(self, u) };
        }
        let mut tot = [0u32; 32];
        let mut acc = [0u8; 32];
        let mut k = 0;
        let mut fx = u;
        while fx != 0 {
            let x = fx.trailing_zeros() as usize;
            fx &= fx - 1;
            let mut fy = fx;
            while fy != 0 {
                let y = fy.trailing_zeros() as usize;
                fy &= fy - 1;
                let rows = self.q4_rows(x, y);
                let mut fz = fy;
                while fz != 0 {
                    let z = fz.trailing_zeros() as usize;
                    fz &= fz - 1;
                    let r = &rows[z - y - 1];
                    for l in 0..32 {
                        acc[l] += r[l];
                    }
                    k += 1;
                    if k == 15 {
                        for l in 0..32 {
                            tot[l] += u32::from(acc[l]);
                        }
                        acc = [0; 32];
                        k = 0;
                    }
                }
            }
        }
        for l in 0..32 {
            tot[l] += u32::from(acc[l]);
        }
        tot
    }

    /// Unweighted: Σ_{x ∈ fx} Σ_l (rows[x][l] & m[l]) for rows with |entries| <= 2 (the
    /// byte sum of at most 32 rows cannot overflow).
    #[inline(always)]
    fn small_rows_sum<const AVX: bool>(rows: &[Row; 32], fx: u32, m: &Row) -> i32 {
        #[cfg(target_arch = "x86_64")]
        if AVX {
            // SAFETY: as in `quad_lanes`.
            return unsafe { avx::small_rows_sum(rows, fx, m) };
        }
        let mut acc = [0i16; 32];
        let mut fx = fx;
        while fx != 0 {
            let x = fx.trailing_zeros() as usize;
            fx &= fx - 1;
            let r = &rows[x];
            for l in 0..32 {
                acc[l] += i16::from(r[l] & m[l]);
            }
        }
        acc.iter().map(|&v| i32::from(v)).sum()
    }

    /// Unweighted: twice the pair-coupled bound of the child S + j: Σ_{x ∈ fx} Σ_l
    /// (max(a[x][l] + gj[x][l], at[x][l] + gtj[x][l]) & m[l]).
    #[inline(always)]
    fn pair_sum<const AVX: bool>(
        a: &[Row; 32],
        at: &[Row; 32],
        gj: &[Row; 32],
        gtj: &[Row; 32],
        fx: u32,
        m: &Row,
    ) -> i32 {
        #[cfg(target_arch = "x86_64")]
        if AVX {
            // SAFETY: as in `quad_lanes`.
            return unsafe { avx::pair_sum(a, at, gj, gtj, fx, m) };
        }
        let mut accp = [0i16; 32];
        let mut fx = fx;
        while fx != 0 {
            let x = fx.trailing_zeros() as usize;
            fx &= fx - 1;
            let (ax, atx, gx, gtx) = (&a[x], &at[x], &gj[x], &gtj[x]);
            for l in 0..32 {
                let p = (ax[l] + gx[l]).max(atx[l] + gtx[l]);
                accp[l] += i16::from(p & m[l]);
            }
        }
        accp.iter().map(|&v| i32::from(v)).sum()
    }

    /// Unweighted: calls `f(j, value, bound)` for every child S + j of `st`. The bound is
    /// [`Kernel::strong_bound`] of the child, from the parent's tables, wherever the
    /// cheaper bound without the quadruples (never below it) exceeds `thr - value`; else
    /// that cheaper bound.
    #[inline(always)]
    fn children<const AVX: bool>(&self, st: &State, thr: f64, mut f: impl FnMut(usize, f64, f64)) {
        let n = self.n;
        let s = st.mask;
        let u = full(n) & !s;
        let nu = u.count_ones() as i32;
        let mut a = [[0i8; 32]; 32];
        let mut at = [[0i8; 32]; 32];
        let mut um = [0i8; 32];
        let mut fx = u;
        while fx != 0 {
            let x = fx.trailing_zeros() as usize;
            fx &= fx - 1;
            um[x] = -1;
            let mut fi = s;
            while fi != 0 {
                let i = fi.trailing_zeros() as usize;
                fi &= fi - 1;
                let (g, gt) = (&self.g3[i][x], &self.g3t[i][x]);
                for l in 0..32 {
                    a[x][l] += g[l];
                    at[x][l] += gt[l];
                }
            }
        }
        // t3[j] = Σ_{x, y ∈ U} best3(j, x, y): twice the best3 of the unplaced triples with
        // j (repeated indices score 0); their sum is six times those of all unplaced triples
        let mut t3 = [0i32; 32];
        let mut c3x6 = 0;
        let mut fj = u;
        while fj != 0 {
            let j = fj.trailing_zeros() as usize;
            fj &= fj - 1;
            t3[j] = Self::small_rows_sum::<AVX>(&self.b3[j], u, &um);
            c3x6 += t3[j];
        }
        // each child's value, pair-coupled bound and triple bound
        let mut value = [0.0f64; 32];
        let mut pairs = [0i32; 32];
        let mut inner = [0i32; 32];
        let mut open = false;
        let mut fj = u;
        while fj != 0 {
            let j = fj.trailing_zeros() as usize;
            fj &= fj - 1;
            let mut m = um;
            m[j] = 0;
            value[j] = st.value + f64::from(masked_sum(&a[j], &m));
            // counts every pair twice
            let pairs2 =
                Self::pair_sum::<AVX>(&a, &at, &self.g3[j], &self.g3t[j], u & !(1 << j), &m);
            pairs[j] = pairs2 / 2;
            inner[j] = c3x6 / 6 - t3[j] / 2;
            open |= value[j] + f64::from(pairs[j] + inner[j]) > thr;
        }
        // t4[w] = Σ_{x<y<z ∈ U \ w} best4(w, x, y, z): the best4 of the unplaced quadruples
        // with w, all w at once (lane w of the rows of the triples of U; the lanes of x, y, z
        // hold the offset 8); the child S + j keeps the quadruples of U without j, and each
        // triple of its nu - 1 unplaced objects lies in nu - 4 of them
        if open && !self.q4.is_empty() && nu >= 5 {
            let tot = self.quad_lanes::<AVX>(u);
            let rows = nu * (nu - 1) * (nu - 2) / 6;
            let mut t4 = [0i32; 32];
            let mut c4 = 0i32;
            let mut fw = u;
            while fw != 0 {
                let w = fw.trailing_zeros() as usize;
                fw &= fw - 1;
                t4[w] = tot[w] as i32 - 8 * rows;
                c4 += t4[w];
            }
            // each quadruple counted once per member
            c4 /= 4;
            let mut fj = u;
            while fj != 0 {
                let j = fj.trailing_zeros() as usize;
                fj &= fj - 1;
                inner[j] = inner[j].min((c4 - t4[j]).div_euclid(nu - 4));
            }
        }
        let mut fj = u;
        while fj != 0 {
            let j = fj.trailing_zeros() as usize;
            fj &= fj - 1;
            f(j, value[j], f64::from(pairs[j] + inner[j]));
        }
    }

    /// The surviving children of a run of parents (weighted: every child; the bound is
    /// applied once per distinct set after merging).
    #[inline(always)]
    fn expand_chunk<const AVX: bool>(&self, chunk: &[State], thr: f64, out: &mut Vec<State>) {
        for st in chunk {
            if self.weighted {
                self.gains(st.mask, &mut |j, g| {
                    out.push(State {
                        mask: st.mask | 1 << j,
                        last: j as u8,
                        value: st.value + g,
                    });
                });
            } else {
                self.expand_unweighted::<AVX>(st, thr, out);
            }
        }
    }

    /// [`Kernel::expand_chunk`] compiled for AVX2 and POPCNT.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,popcnt")]
    unsafe fn expand_chunk_avx2(&self, chunk: &[State], thr: f64, out: &mut Vec<State>) {
        self.expand_chunk::<true>(chunk, thr, out);
    }

    /// [`Kernel::bound`] compiled for AVX2 and POPCNT.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,popcnt")]
    unsafe fn bound_avx2(&self, s: u32) -> f64 {
        self.bound(s)
    }

    fn expand_fast(&self, chunk: &[State], thr: f64, out: &mut Vec<State>) {
        #[cfg(target_arch = "x86_64")]
        {
            if self.simd {
                // SAFETY: the CPU supports the features the function is compiled with.
                unsafe { self.expand_chunk_avx2(chunk, thr, out) };
                return;
            }
        }
        self.expand_chunk::<false>(chunk, thr, out);
    }

    fn bound_fast(&self, s: u32) -> f64 {
        #[cfg(target_arch = "x86_64")]
        {
            if self.simd {
                // SAFETY: as in `expand_fast`.
                return unsafe { self.bound_avx2(s) };
            }
        }
        self.bound(s)
    }
}

/// AVX2 versions of the unweighted inner loops (same results as the portable ones).
#[cfg(target_arch = "x86_64")]
mod avx {
    use std::arch::x86_64::{
        __m256i, _mm_srli_si128, _mm256_add_epi8, _mm256_add_epi16, _mm256_add_epi32,
        _mm256_and_si256, _mm256_castsi256_si128, _mm256_cvtepu8_epi32, _mm256_extracti128_si256,
        _mm256_loadu_si256, _mm256_madd_epi16, _mm256_maddubs_epi16, _mm256_max_epi8,
        _mm256_set1_epi8, _mm256_set1_epi16, _mm256_setzero_si256, _mm256_storeu_si256,
    };

    use super::Row;

    #[inline(always)]
    fn load(r: &[u8; 32]) -> __m256i {
        // SAFETY: 32 readable bytes; unaligned load.
        unsafe { _mm256_loadu_si256(r.as_ptr().cast()) }
    }

    #[inline(always)]
    fn load_i8(r: &Row) -> __m256i {
        // SAFETY: as in `load`.
        unsafe { _mm256_loadu_si256(r.as_ptr().cast()) }
    }

    /// Sum of the 16 i16 lanes.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn hsum_i16(v: __m256i) -> i32 {
        let v = _mm256_madd_epi16(v, _mm256_set1_epi16(1));
        let mut out = [0i32; 8];
        // SAFETY: 32 writable bytes.
        unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), v) };
        out.iter().sum()
    }

    /// Pairwise sums of signed bytes into i16 lanes.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn widen(v: __m256i) -> __m256i {
        _mm256_maddubs_epi16(_mm256_set1_epi8(1), v)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn small_rows_sum(rows: &[Row; 32], mut fx: u32, m: &Row) -> i32 {
        let m = load_i8(m);
        let mut acc = _mm256_setzero_si256();
        while fx != 0 {
            let x = fx.trailing_zeros() as usize;
            fx &= fx - 1;
            acc = _mm256_add_epi8(acc, _mm256_and_si256(load_i8(&rows[x]), m));
        }
        hsum_i16(widen(acc))
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn pair_sum(
        a: &[Row; 32],
        at: &[Row; 32],
        gj: &[Row; 32],
        gtj: &[Row; 32],
        mut fx: u32,
        m: &Row,
    ) -> i32 {
        let m = load_i8(m);
        let mut acc = _mm256_setzero_si256();
        while fx != 0 {
            let x = fx.trailing_zeros() as usize;
            fx &= fx - 1;
            let p = _mm256_add_epi8(load_i8(&a[x]), load_i8(&gj[x]));
            let q = _mm256_add_epi8(load_i8(&at[x]), load_i8(&gtj[x]));
            let v = _mm256_and_si256(_mm256_max_epi8(p, q), m);
            acc = _mm256_add_epi16(acc, widen(v));
        }
        hsum_i16(acc)
    }

    /// Adds the 32 byte lanes of `acc` to the u32 lanes of `tot`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn flush(acc: __m256i, tot: &mut [__m256i; 4]) {
        let lo = _mm256_castsi256_si128(acc);
        let hi = _mm256_extracti128_si256::<1>(acc);
        tot[0] = _mm256_add_epi32(tot[0], _mm256_cvtepu8_epi32(lo));
        tot[1] = _mm256_add_epi32(tot[1], _mm256_cvtepu8_epi32(_mm_srli_si128::<8>(lo)));
        tot[2] = _mm256_add_epi32(tot[2], _mm256_cvtepu8_epi32(hi));
        tot[3] = _mm256_add_epi32(tot[3], _mm256_cvtepu8_epi32(_mm_srli_si128::<8>(hi)));
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn quad_lanes(kern: &super::Kernel, u: u32) -> [u32; 32] {
        let mut tot = [_mm256_setzero_si256(); 4];
        let mut acc = _mm256_setzero_si256();
        let mut k = 0;
        let mut fx = u;
        while fx != 0 {
            let x = fx.trailing_zeros() as usize;
            fx &= fx - 1;
            let mut fy = fx;
            while fy != 0 {
                let y = fy.trailing_zeros() as usize;
                fy &= fy - 1;
                let rows = kern.q4_rows(x, y);
                let mut fz = fy;
                while fz != 0 {
                    let z = fz.trailing_zeros() as usize;
                    fz &= fz - 1;
                    acc = _mm256_add_epi8(acc, load(&rows[z - y - 1]));
                    k += 1;
                    if k == 15 {
                        flush(acc, &mut tot);
                        acc = _mm256_setzero_si256();
                        k = 0;
                    }
                }
            }
        }
        flush(acc, &mut tot);
        let mut out = [0u32; 32];
        for (c, v) in out.chunks_exact_mut(8).zip(tot) {
            // SAFETY: 32 writable bytes.
            unsafe { _mm256_storeu_si256(c.as_mut_ptr().cast(), v) };
        }
        out
    }
}

fn has_simd() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        vastml_spatial::simd_allowed()
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("popcnt")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[inline]
fn full(n: usize) -> u32 {
    if n >= 32 { u32::MAX } else { (1u32 << n) - 1 }
}

/// A strictly better order and its value.
pub(crate) type Better = (f64, Vec<usize>);

/// Finds an order strictly better than `best` (by more than `eps`) or proves there is none.
/// Returns the better order with its value, if any, and the per-layer counts.
///
/// # Errors
/// Cancellation.
pub(crate) fn bounded_dp(
    t: &Tables,
    d: &[f64],
    best: f64,
    cancel: &AtomicBool,
) -> Result<(Option<Better>, DpStats), OrderError> {
    let n = t.n;
    assert!((4..=32).contains(&n), "bounded_dp handles 4..=32 objects");
    let k = Kernel::new(t, d);
    let eps = t.eps;
    let all = full(n);
    let h = n / 2;
    let top = n - h;
    let mut stats = DpStats::default();
    let mut layers: Vec<Vec<State>> = vec![vec![State {
        mask: 0,
        last: 0,
        value: 0.0,
    }]];
    for layer in 1..=top {
        if cancel.load(Ordering::Relaxed) {
            return Err(OrderError::Cancelled);
        }
        let prev = &layers[layer - 1];
        let mut kids: Vec<State> = prev
            .par_chunks(1024)
            .flat_map_iter(|chunk| {
                let mut out = Vec::new();
                k.expand_fast(chunk, best + eps, &mut out);
                out
            })
            .collect();
        // distinct sets, each with its best chain (ties: the smallest last object)
        kids.par_sort_unstable_by(|a, b| {
            a.mask
                .cmp(&b.mask)
                .then(b.value.total_cmp(&a.value))
                .then(a.last.cmp(&b.last))
        });
        kids.dedup_by_key(|s| s.mask);
        stats.generated.push(kids.len());
        // (unweighted: the children were already bounded in their parent)
        let kept: Vec<State> = if k.weighted {
            kids.into_par_iter()
                .filter(|s| s.value + k.bound_fast(s.mask) > best + eps)
                .collect()
        } else {
            kids
        };
        stats.kept.push(kept.len());
        layers.push(kept);
    }
    let find = |layer: usize, mask: u32| -> Option<&State> {
        let l = &layers[layer];
        l.binary_search_by_key(&mask, |s| s.mask)
            .ok()
            .map(|i| &l[i])
    };
    // meet in the middle: S in the top layer, its complement in layer h
    let winner = layers[top]
        .par_iter()
        .filter_map(|s| {
            let c = all & !s.mask;
            find(h, c).map(|o| (s.value + o.value, s.mask))
        })
        .reduce_with(|a, b| {
            if b.0 > a.0 || (b.0 == a.0 && b.1 < a.1) {
                b
            } else {
                a
            }
        });
    let Some((value, mask)) = winner else {
        return Ok((None, stats));
    };
    if value <= best + eps {
        return Ok((None, stats));
    }
    let chain = |mut m: u32, mut layer: usize| -> Vec<usize> {
        let mut out = Vec::with_capacity(layer);
        while layer > 0 {
            let s = find(layer, m).expect("a kept set's best parent is kept");
            out.push(usize::from(s.last));
            m &= !(1 << s.last);
            layer -= 1;
        }
        out.reverse();
        out
    };
    let mut order = chain(mask, top);
    let mut back = chain(all & !mask, h);
    back.reverse();
    order.extend(back);
    Ok((Some((value, order)), stats))
}

#[cfg(test)]
mod tests {
    use super::super::{Gradient, Tables, order_value};
    use super::*;

    fn lcg(s: &mut u64) -> u64 {
        *s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *s >> 33
    }

    /// random points in 3-D, or small integer dissimilarities (many ties)
    fn matrix(n: usize, s: &mut u64, ties: bool) -> Vec<f64> {
        let mut d = vec![0.0; n * n];
        let pts: Vec<[f64; 3]> = (0..n)
            .map(|_| [0; 3].map(|_| (lcg(s) % 1000) as f64 / 1000.0))
            .collect();
        for a in 0..n {
            for b in a + 1..n {
                let v = if ties {
                    (lcg(s) % 4) as f64
                } else {
                    (0..3)
                        .map(|c| (pts[a][c] - pts[b][c]).powi(2))
                        .sum::<f64>()
                        .sqrt()
                };
                d[a * n + b] = v;
                d[b * n + a] = v;
            }
        }
        d
    }

    /// Best value over the orders that start with the objects of `prefix` (in that order).
    fn best_with_prefix(t: &Tables, prefix: &mut Vec<usize>) -> f64 {
        if prefix.len() == t.n {
            return order_value(t, prefix);
        }
        let mut best = f64::NEG_INFINITY;
        for u in 0..t.n {
            if !prefix.contains(&u) {
                prefix.push(u);
                best = best.max(best_with_prefix(t, prefix));
                prefix.pop();
            }
        }
        best
    }

    /// F(S) by brute force: the best prefix value over the orders of S.
    fn f_exact(t: &Tables, s: u32) -> f64 {
        let n = t.n;
        let members: Vec<usize> = (0..n).filter(|&i| s >> i & 1 == 1).collect();
        let outside: Vec<usize> = (0..n).filter(|&i| s >> i & 1 == 0).collect();
        let mut best = f64::NEG_INFINITY;
        let mut p = members.clone();
        permute(&mut p, 0, &mut |o| {
            let mut v = 0.0;
            for i in 0..o.len() {
                for j in i + 1..o.len() {
                    for k in j + 1..o.len() {
                        v += t.g(o[i], o[j], o[k]);
                    }
                    for &c in &outside {
                        v += t.g(o[i], o[j], c);
                    }
                }
            }
            best = best.max(v);
        });
        best
    }

    fn permute(p: &mut Vec<usize>, k: usize, f: &mut impl FnMut(&[usize])) {
        if k == p.len() {
            f(p);
            return;
        }
        for i in k..p.len() {
            p.swap(k, i);
            permute(p, k + 1, f);
            p.swap(k, i);
        }
    }

    fn exhaustive(t: &Tables) -> f64 {
        best_with_prefix(t, &mut Vec::new())
    }

    /// The DP with no incumbent finds the exhaustive optimum (and its order has that
    /// value); with the optimum as incumbent it finds nothing strictly better.
    #[test]
    fn equals_exhaustive_with_and_without_ties() {
        let mut s = 23u64;
        let no = AtomicBool::new(false);
        for n in 4..=9 {
            for case in 0..4 {
                let d = matrix(n, &mut s, case % 2 == 1);
                for kind in [Gradient::Unweighted, Gradient::Weighted] {
                    let t = Tables::new(&d, n, kind);
                    let ex = exhaustive(&t);
                    let (r, _) = bounded_dp(&t, &d, f64::NEG_INFINITY, &no).unwrap();
                    let (v, o) = r.expect("an order beats -inf");
                    assert!((v - ex).abs() < 1e-9, "{kind:?} n {n}: {v} vs {ex}");
                    assert!((order_value(&t, &o) - ex).abs() < 1e-9);
                    let mut q = o.clone();
                    q.sort_unstable();
                    assert_eq!(q, (0..n).collect::<Vec<_>>());
                    let (r, _) = bounded_dp(&t, &d, ex, &no).unwrap();
                    assert!(r.is_none(), "{kind:?} n {n}: beat the optimum");
                    // an incumbent just below the optimum is beaten by the optimum
                    let (r, _) = bounded_dp(&t, &d, ex - 1.0, &no).unwrap();
                    assert!((r.unwrap().0 - ex).abs() < 1e-9);
                }
            }
        }
    }

    /// Without an incumbent (nothing pruned but by the bound against -inf) at n = 12 the DP
    /// equals the branch and bound.
    #[test]
    fn unpruned_equals_branch_and_bound() {
        let mut s = 31u64;
        let no = AtomicBool::new(false);
        for (n, tie) in [(11, false), (12, true)] {
            let d = matrix(n, &mut s, tie);
            for kind in [Gradient::Unweighted, Gradient::Weighted] {
                let t = Tables::new(&d, n, kind);
                let bb = super::super::gradient_order_with(&d, n, kind, &no, 5).unwrap();
                let (r, _) = bounded_dp(&t, &d, f64::NEG_INFINITY, &no).unwrap();
                let (v, o) = r.unwrap();
                assert!(
                    (v - bb.value).abs() < 1e-9,
                    "{kind:?} {n}: {v} vs {}",
                    bb.value
                );
                assert!((order_value(&t, &o) - v).abs() < 1e-9);
            }
        }
    }

    /// Every child's bound from [`Kernel::children`] is the strong bound of the child
    /// computed from scratch (or, when that cheaper bound is already below the threshold, not
    /// below it), and the AVX2 path gives the same children as the portable one, at sizes
    /// the exhaustive tests do not reach (up to 32 objects, with and without ties).
    #[test]
    fn children_match_the_strong_bound_and_the_portable_path() {
        let mut s = 37u64;
        for (n, tie) in [(13, false), (20, true), (30, false), (32, true)] {
            let d = matrix(n, &mut s, tie);
            let t = Tables::new(&d, n, Gradient::Unweighted);
            let k = Kernel::new(&t, &d);
            for case in 0..30 {
                let size = lcg(&mut s) as usize % (n - 1);
                let mut mask = 0u32;
                while (mask.count_ones() as usize) < size {
                    mask |= 1 << (lcg(&mut s) as usize % n);
                }
                let st = State {
                    mask,
                    last: 0,
                    value: (lcg(&mut s) % 50) as f64,
                };
                // half the cases with a threshold that cuts some children
                let thr = if case % 2 == 0 {
                    f64::NEG_INFINITY
                } else {
                    st.value + (lcg(&mut s) % 200) as f64
                };
                let mut p = Vec::new();
                k.children::<false>(&st, thr, |j, v, b| p.push((j, v, b)));
                assert_eq!(p.len() as u32, n as u32 - size as u32);
                for &(j, v, b) in &p {
                    let sb = k.strong_bound(mask | 1 << j);
                    if v + b > thr {
                        assert_eq!(b, sb, "n {n} {mask:b} + {j}");
                    } else {
                        assert!(b >= sb, "n {n} {mask:b} + {j}");
                    }
                }
                if k.simd {
                    let mut q = Vec::new();
                    k.children::<true>(&st, thr, |j, v, b| q.push((j, v, b)));
                    assert_eq!(p, q, "n {n} {mask:b}");
                }
            }
        }
    }

    /// Best value the objects outside `mask` can add after it: the triples with one object
    /// in the set and two outside, and those with all three outside.
    fn completion(t: &Tables, mask: u32) -> f64 {
        let n = t.n;
        let members: Vec<usize> = (0..n).filter(|&i| mask >> i & 1 == 1).collect();
        let mut rest: Vec<usize> = (0..n).filter(|&i| mask >> i & 1 == 0).collect();
        let mut best = f64::NEG_INFINITY;
        permute(&mut rest, 0, &mut |o| {
            let mut v = 0.0;
            for i in 0..o.len() {
                for j in i + 1..o.len() {
                    for &p in &members {
                        v += t.g(p, o[i], o[j]);
                    }
                    for k in j + 1..o.len() {
                        v += t.g(o[i], o[j], o[k]);
                    }
                }
            }
            best = best.max(v);
        });
        best
    }

    /// The bounds (unweighted: each child's, from its parent; weighted: per set) are >= the
    /// best completion, and the unweighted child value is F(S) + g(S, j) by brute force.
    #[test]
    fn bounds_dominate_the_best_completion() {
        let mut s = 29u64;
        for case in 0..12 {
            let n = 4 + case % 4;
            let d = matrix(n, &mut s, case % 3 == 0);
            for kind in [Gradient::Unweighted, Gradient::Weighted] {
                let t = Tables::new(&d, n, kind);
                let k = Kernel::new(&t, &d);
                for mask in 0..full(n) {
                    let u = full(n) & !mask;
                    let f = f_exact(&t, mask);
                    if kind == Gradient::Weighted {
                        let b = k.bound(mask);
                        let c = completion(&t, mask);
                        assert!(b >= c - 1e-9, "{n} {mask:b}: {b} < {c}");
                        continue;
                    }
                    let sb = k.strong_bound(mask);
                    let c = completion(&t, mask);
                    assert!(sb >= c, "strong {n} {mask:b}: {sb} < {c}");
                    if u.count_ones() == 2 {
                        assert_eq!(sb, c);
                    }
                    let st = State {
                        mask,
                        last: 0,
                        value: f,
                    };
                    let mut seen = 0;
                    k.children::<false>(&st, f64::NEG_INFINITY, |j, value, bound| {
                        seen += 1;
                        let child = mask | 1 << j;
                        let mut g = 0.0;
                        for i in (0..n).filter(|&i| mask >> i & 1 == 1) {
                            for r in (0..n).filter(|&r| child >> r & 1 == 0) {
                                g += t.g(i, j, r);
                            }
                        }
                        assert_eq!(value, f + g);
                        assert!(value <= f_exact(&t, child));
                        let c = completion(&t, child);
                        assert!(bound >= c, "{n} {mask:b} + {j}: {bound} < {c}");
                        assert_eq!(bound, k.strong_bound(child), "{n} {mask:b} + {j}");
                    });
                    assert_eq!(seen, u.count_ones());
                }
            }
        }
    }
}
