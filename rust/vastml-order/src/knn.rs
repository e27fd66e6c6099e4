//! Exact k-nearest-neighbour lists by scanning all pairs, for the candidate lists of the TSP
//! heuristics on points in many dimensions (where a kd-tree prunes little).
//!
//! The points are stored in panels of [`W`] points with their coordinates interleaved, so that
//! a tile of 4 query rows x `W` candidates reads one contiguous panel; a block of [`QUERIES`]
//! rows visits each panel once (it stays in the L1 cache for all its tiles), and the candidates
//! go by in chunks of [`CHUNK`]. The tile is compiled twice: for AVX2 (chosen at run time when
//! the CPU has it) and portably. Both add the squared coordinate differences in the same order
//! with separate multiplies and adds, so they give the same bits as the plain loop
//! `Σ_t (a_t - b_t)²`, and the lists do not depend on the CPU.

use rayon::prelude::*;

/// Candidates per panel (and per tile).
const W: usize = 8;
/// Query rows per tile.
const ROWS: usize = 4;
/// Query rows per block: the tiles that share each panel.
const QUERIES: usize = 32;
/// Candidates per pass of a block (a multiple of `W`).
const CHUNK: usize = 1024;

/// The points in panels of `W`: coordinate `t` of point `b` at
/// `(b / W) * dim * W + t * W + b % W`, padded with zeros to whole panels.
struct Panels {
    p: Vec<f64>,
    n: usize,
    dim: usize,
}

impl Panels {
    fn new(x: &[f64], dim: usize) -> Panels {
        let n = x.len() / dim;
        let mut p = vec![0.0; n.div_ceil(W) * dim * W];
        for (b, r) in x.chunks_exact(dim).enumerate() {
            let base = (b / W) * dim * W + b % W;
            for (t, &v) in r.iter().enumerate() {
                p[base + t * W] = v;
            }
        }
        Panels { p, n, dim }
    }

    fn n_panels(&self) -> usize {
        self.n.div_ceil(W)
    }

    /// The rows `a0..a0 + QUERIES` of `x` as tiles: coordinate `t` of row `a0 + 4 u + r` at
    /// `(u * dim + t) * 4 + r`; rows past the end are zeros.
    fn queries(&self, x: &[f64], a0: usize, q: &mut [f64]) {
        let dim = self.dim;
        q.fill(0.0);
        for a in a0..(a0 + QUERIES).min(self.n) {
            let (u, r) = ((a - a0) / ROWS, (a - a0) % ROWS);
            for (t, &v) in x[a * dim..(a + 1) * dim].iter().enumerate() {
                q[(u * dim + t) * ROWS + r] = v;
            }
        }
    }

    /// Squared distances from the query block `q` (see [`Panels::queries`]) to the points of
    /// panels `p0..p1`: `out[r * len + j]` for query row `r` and point `p0 * W + j`, with
    /// `len = (p1 - p0) * W`.
    fn block(&self, q: &[f64], p0: usize, p1: usize, out: &mut [f64]) {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2, the only feature the function is compiled with.
                unsafe { self.block_avx2(q, p0, p1, out) };
                return;
            }
        }
        self.block_portable(q, p0, p1, out);
    }

    /// [`Panels::block`] compiled for AVX2 (two four-lane vectors per tile row).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn block_avx2(&self, q: &[f64], p0: usize, p1: usize, out: &mut [f64]) {
        self.block_portable(q, p0, p1, out);
    }

    #[inline(always)]
    fn block_portable(&self, q: &[f64], p0: usize, p1: usize, out: &mut [f64]) {
        let dim = self.dim;
        let len = (p1 - p0) * W;
        for p in p0..p1 {
            let panel = &self.p[p * dim * W..(p + 1) * dim * W];
            for (u, qt) in q.chunks_exact(dim * ROWS).enumerate() {
                let mut acc = [[0.0f64; W]; ROWS];
                for (c, qv) in panel.chunks_exact(W).zip(qt.chunks_exact(ROWS)) {
                    for (row, &a) in acc.iter_mut().zip(qv) {
                        for (s, &b) in row.iter_mut().zip(c) {
                            let v = a - b;
                            *s += v * v;
                        }
                    }
                }
                for (r, row) in acc.iter().enumerate() {
                    let o = (u * ROWS + r) * len + (p - p0) * W;
                    out[o..o + W].copy_from_slice(row);
                }
            }
        }
    }
}

/// Offers candidate `c` at squared distance `d` to a list kept sorted by (distance, index).
#[inline]
fn offer(bd: &mut [f64], bi: &mut [usize], d: f64, c: usize) {
    let k = bd.len();
    if d > bd[k - 1] || (d == bd[k - 1] && c >= bi[k - 1]) {
        return;
    }
    let mut t = k - 1;
    while t > 0 && (d < bd[t - 1] || (d == bd[t - 1] && c < bi[t - 1])) {
        bd[t] = bd[t - 1];
        bi[t] = bi[t - 1];
        t -= 1;
    }
    bd[t] = d;
    bi[t] = c;
}

/// The `k` nearest other rows of every row of `x` (`0 < k < n`), nearest first, ties to the
/// smaller index, by one pass over all pairs on the calling thread: each pair's distance is
/// computed once and offered to both rows.
pub(crate) fn neighbours_serial(x: &[f64], dim: usize, k: usize) -> Vec<usize> {
    let pan = Panels::new(x, dim);
    let m = pan.n;
    let mut bd = vec![f64::INFINITY; m * k];
    let mut bi = vec![usize::MAX; m * k];
    // the k-th distance of every list, contiguous: most pairs fail this test and go no further
    let mut kth = vec![f64::INFINITY; m];
    let mut q = vec![0.0; QUERIES * dim];
    let mut dd = vec![0.0; QUERIES * CHUNK];
    for a0 in (0..m).step_by(QUERIES) {
        pan.queries(x, a0, &mut q);
        let a_end = (a0 + QUERIES).min(m);
        let mut p0 = a0 / W;
        while p0 < pan.n_panels() {
            let p1 = (p0 + CHUNK / W).min(pan.n_panels());
            let len = (p1 - p0) * W;
            pan.block(&q, p0, p1, &mut dd[..QUERIES * len]);
            for a in a0..a_end {
                let row = &dd[(a - a0) * len..(a - a0 + 1) * len];
                // pairs (a, b) with b > a only
                let b_lo = (a + 1).max(p0 * W);
                let b_hi = (p1 * W).min(m);
                let mut kth_a = kth[a];
                for b in b_lo..b_hi {
                    let d = row[b - p0 * W];
                    // `offer` settles ties by index
                    if d <= kth_a {
                        let r = a * k..(a + 1) * k;
                        offer(&mut bd[r.clone()], &mut bi[r], d, b);
                        kth_a = bd[(a + 1) * k - 1];
                    }
                    if d <= kth[b] {
                        let r = b * k..(b + 1) * k;
                        offer(&mut bd[r.clone()], &mut bi[r], d, a);
                        kth[b] = bd[(b + 1) * k - 1];
                    }
                }
                kth[a] = kth_a;
            }
            p0 = p1;
        }
    }
    bi
}

/// [`neighbours_serial`] with the rows in blocks spread over rayon (each pair is computed
/// twice, once for each of its rows; the lists are the same).
pub(crate) fn neighbours_parallel(x: &[f64], dim: usize, k: usize) -> Vec<usize> {
    let pan = Panels::new(x, dim);
    let n = pan.n;
    let mut out = vec![0usize; n * k];
    out.par_chunks_mut(QUERIES * k).enumerate().for_each_init(
        || {
            (
                vec![0.0; QUERIES * dim],
                vec![0.0; QUERIES * CHUNK],
                vec![f64::INFINITY; QUERIES * k],
                vec![usize::MAX; QUERIES * k],
            )
        },
        |(q, dd, bd, bi), (blk, lists)| {
            let a0 = blk * QUERIES;
            let a_end = (a0 + QUERIES).min(n);
            pan.queries(x, a0, q);
            bd.fill(f64::INFINITY);
            bi.fill(usize::MAX);
            let mut p0 = 0;
            while p0 < pan.n_panels() {
                let p1 = (p0 + CHUNK / W).min(pan.n_panels());
                let len = (p1 - p0) * W;
                pan.block(q, p0, p1, &mut dd[..QUERIES * len]);
                for a in a0..a_end {
                    let r = a - a0;
                    let row = &dd[r * len..(r + 1) * len];
                    let (bda, bia) = (&mut bd[r * k..(r + 1) * k], &mut bi[r * k..(r + 1) * k]);
                    for b in p0 * W..(p1 * W).min(n) {
                        let d = row[b - p0 * W];
                        // candidates arrive in increasing index: a tie never displaces
                        if b != a && d < bda[k - 1] {
                            offer(bda, bia, d, b);
                        }
                    }
                }
                p0 = p1;
            }
            lists.copy_from_slice(&bi[..lists.len()]);
        },
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_pcg::Pcg64;

    /// The oracle: every distance by the plain loop, lists by a full sort.
    fn sorted_scan(x: &[f64], dim: usize, k: usize) -> Vec<usize> {
        let n = x.len() / dim;
        let d2 = |a: usize, b: usize| {
            let mut s = 0.0;
            for t in 0..dim {
                let v = x[a * dim + t] - x[b * dim + t];
                s += v * v;
            }
            s
        };
        let mut out = Vec::new();
        for a in 0..n {
            let mut c: Vec<(f64, usize)> =
                (0..n).filter(|&b| b != a).map(|b| (d2(a, b), b)).collect();
            c.sort_by(|p, q| p.0.total_cmp(&q.0).then(p.1.cmp(&q.1)));
            out.extend(c[..k].iter().map(|p| p.1));
        }
        out
    }

    #[test]
    fn tiles_equal_the_sorted_scan_for_every_shape() {
        let mut rng = Pcg64::seed_from_u64(5);
        for &(n, dim, k) in &[
            (2, 3, 1),
            (5, 1, 4),
            (9, 50, 3),
            (37, 7, 8),
            (130, 50, 10),
            (67, 2, 5),
            (1100, 3, 4),
        ] {
            let x: Vec<f64> = (0..n * dim).map(|_| rng.random::<f64>()).collect();
            let want = sorted_scan(&x, dim, k);
            assert_eq!(
                neighbours_serial(&x, dim, k),
                want,
                "serial n={n} dim={dim}"
            );
            assert_eq!(
                neighbours_parallel(&x, dim, k),
                want,
                "parallel n={n} dim={dim}"
            );
        }
    }

    #[test]
    fn ties_go_to_the_smaller_index() {
        // a grid with many equal distances, and duplicated points
        let mut x = Vec::new();
        for i in 0..12 {
            x.extend([f64::from(i % 4), f64::from(i / 4)]);
        }
        x.extend([1.0, 1.0, 1.0, 1.0]);
        let want = sorted_scan(&x, 2, 6);
        assert_eq!(neighbours_serial(&x, 2, 6), want);
        assert_eq!(neighbours_parallel(&x, 2, 6), want);
    }

    #[test]
    fn the_portable_tile_gives_the_same_bits_as_the_plain_loop() {
        let mut rng = Pcg64::seed_from_u64(9);
        let (n, dim) = (23, 13);
        let x: Vec<f64> = (0..n * dim)
            .map(|_| rng.random::<f64>() * 100.0 - 50.0)
            .collect();
        let pan = Panels::new(&x, dim);
        let mut q = vec![0.0; QUERIES * dim];
        pan.queries(&x, 0, &mut q);
        let len = pan.n_panels() * W;
        let mut out = vec![0.0; QUERIES * len];
        let mut out_portable = vec![0.0; QUERIES * len];
        pan.block(&q, 0, pan.n_panels(), &mut out);
        pan.block_portable(&q, 0, pan.n_panels(), &mut out_portable);
        for a in 0..n {
            for b in 0..n {
                let mut s = 0.0;
                for t in 0..dim {
                    let v = x[a * dim + t] - x[b * dim + t];
                    s += v * v;
                }
                assert_eq!(out[a * len + b].to_bits(), s.to_bits());
                assert_eq!(out_portable[a * len + b].to_bits(), s.to_bits());
            }
        }
    }
}
