//! The original fast Gauss transform (Greengard & Strain, 1991) on a line: sources binned
//! into boxes of width w, each box's Hermite expansion (moments) translated into one Taylor
//! expansion per target box, so that a target evaluates a single polynomial whatever the
//! number of boxes within its reach. Cost O(p (N + M) + B (2 R + 1) p^2) for B boxes and R
//! boxes of reach on each side, against the IFGT's O(p N + M n p) with n clusters in reach.
//!
//! With u = (y - c_B)/h, a = (x - c_B)/h and the Hermite functions
//! h_k(t) = (-1)^k d^k/dt^k exp(-t^2),
//!
//! ```text
//! exp(-(y - x)^2 / h^2) = sum_n a^n / n! h_n(u)                      (Hermite, about c_B)
//! h_n(u0 + s)           = sum_m (-s)^m / m! h_{n+m}(u0)               (Taylor, about c_T)
//! ```
//!
//! with u0 = (c_T - c_B)/h and s = (y - c_T)/h. Keeping n < p and m < p leaves, per unit of
//! source weight, at most the sum over the other (n, m) of |a|^n |s|^m / (n! m!) |h_{n+m}(u0)|.
//! Cramér's inequality |h_k(t)| <= K 2^{k/2} sqrt(k!) (K = 1.086435) and
//! (n + m)! <= 2^{n+m} n! m! bound each term by K z^n z^m / sqrt(n! m!), where z = w / h bounds
//! 2|a| and 2|s|, so the truncation error is at most 2 K S_0(z) S_p(z) with
//! S_p(z) = sum_{k >= p} z^k / sqrt(k!). Source boxes farther than R boxes from the target's
//! box are skipped: the nearest of their sources is R w away, which is chosen so that
//! exp(-(R w)^2 / h^2) <= epsilon. Every source then errs by at most epsilon |q_i|.

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use crate::error::{FgtError, Result, invalid};

/// Cramér's constant: |h_k(t)| <= K 2^{k/2} sqrt(k!) exp(-t^2 / 2).
const CRAMER: f64 = 1.086_435;
/// Largest truncation number considered.
const MAX_P: usize = 40;
/// Box widths tried, in units of h.
const WIDTHS: [f64; 8] = [1.0, 0.75, 0.5, 0.35, 0.25, 0.18, 0.125, 0.09];
/// Largest number of boxes: only the occupied ones are stored, but box numbers must stay
/// exact in a double (far outliers at a small bandwidth spread a line over millions).
const MAX_BOXES: f64 = (1u64 << 40) as f64;
/// Sources or targets per parallel task.
const CHUNK: usize = 4096;

/// The grid chosen for a problem: box width (units of h), truncation, reach, boxes, and the
/// estimated cost (ns on one core).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct GridParameters {
    pub z: f64,
    pub truncation: usize,
    pub reach: usize,
    pub n_boxes: usize,
    pub cost: f64,
}

/// S_p(z) = sum_{k >= p} z^k / sqrt(k!) for z <= 1 (the tail beyond k = p + 80 is below
/// 1e-60 of the first term).
fn tail(z: f64, p: usize) -> f64 {
    let mut term = 1.0f64; // z^k / sqrt(k!) at k = 0
    let mut sum = 0.0;
    for k in 0..p + 80 {
        if k >= p {
            sum += term;
        }
        term *= z / ((k + 1) as f64).sqrt();
    }
    sum
}

/// Rigorous bound of the truncation error per unit weight (see the module docs), plus the
/// rounding of a sum whose terms are bounded by K S_0(z)^2.
pub(crate) fn error_bound(z: f64, p: usize) -> f64 {
    let s0 = tail(z, 0);
    2.0 * CRAMER * s0 * tail(z, p) + 256.0 * f64::EPSILON * CRAMER * s0 * s0
}

/// [`error_bound`] for every width of [`WIDTHS`] and p = 0..=`MAX_P`, tabulated once: the
/// search over widths and truncations ran every bound afresh, a tenth of a small transform.
fn bounds_by_width() -> &'static [[f64; MAX_P + 1]; WIDTHS.len()] {
    static TABLE: std::sync::OnceLock<[[f64; MAX_P + 1]; WIDTHS.len()]> =
        std::sync::OnceLock::new();
    TABLE.get_or_init(|| WIDTHS.map(|z| std::array::from_fn(|p| error_bound(z, p))))
}

/// Cost in ns of the grid method (one core). Only occupied boxes are stored and visited;
/// when the boxes far outnumber the points (far outliers), the points' box numbers are
/// sorted rather than counted in a table, and each target finds its box by a binary search.
pub(crate) fn grid_cost(n: usize, m: usize, w: usize, g: &GridParameters) -> f64 {
    let (p, wf) = (g.truncation as f64, w as f64);
    let boxes = (g.n_boxes as f64).min(n as f64) + 2.0 * g.reach as f64;
    let sources = n as f64 * (6.0 + p * (0.6 + 0.5 * wf));
    let translate =
        boxes.min(m as f64 + 2.0 * g.reach as f64) * (2 * g.reach + 1) as f64 * p * p * wf * 0.35;
    let mut targets = m as f64 * (8.0 + p * wf * 0.6);
    let nb = g.n_boxes as f64;
    if nb > sparse_from(m) as f64 {
        targets += m as f64 * (m as f64).log2().max(1.0) * 3.0;
    }
    sources + translate + targets
}

/// From this many boxes on, the distinct boxes of `points` points are found by a sort
/// instead of a table over every box.
fn sparse_from(points: usize) -> usize {
    4 * points + 4096
}

/// The distinct box numbers of a set of points, in order, and a way back from a box number
/// to its rank among them (a table when the boxes are not many more than the points).
struct BoxIndex {
    ids: Vec<usize>,
    table: Option<Vec<u32>>,
}

impl BoxIndex {
    /// `raw` holds box numbers below `total`; `u32::MAX` in the table marks an empty box.
    fn new(raw: &[usize], total: usize) -> Self {
        if total <= sparse_from(raw.len()) {
            let mut table = vec![u32::MAX; total];
            for &b in raw {
                table[b] = 0;
            }
            let mut ids = Vec::new();
            for (b, t) in table.iter_mut().enumerate() {
                if *t == 0 {
                    *t = ids.len() as u32;
                    ids.push(b);
                }
            }
            return BoxIndex {
                ids,
                table: Some(table),
            };
        }
        let mut ids = raw.to_vec();
        ids.sort_unstable();
        ids.dedup();
        BoxIndex { ids, table: None }
    }

    /// Rank of box `b`, which must be one of the boxes.
    fn rank(&self, b: usize) -> usize {
        match &self.table {
            Some(t) => t[b] as usize,
            None => self.ids.binary_search(&b).unwrap_or(0),
        }
    }
}

/// The cheapest grid reaching epsilon, or `None` (epsilon below the rounding floor, or a
/// range too wide for a grid).
pub(crate) fn grid_parameters(
    n: usize,
    m: usize,
    w: usize,
    range: f64,
    h: f64,
    epsilon: f64,
) -> Option<GridParameters> {
    let cut = (1.0 / epsilon).ln().max(0.0).sqrt(); // cut-off in units of h
    let mut best: Option<GridParameters> = None;
    for (&z, bounds) in WIDTHS.iter().zip(bounds_by_width()) {
        let Some(p) = (1..=MAX_P).find(|&p| bounds[p] <= epsilon) else {
            continue;
        };
        let boxes = (range / (z * h)).floor() + 1.0;
        // (a NaN range fails this too)
        if boxes.is_nan() || boxes > MAX_BOXES {
            continue;
        }
        let reach = (cut / z).ceil().max(1.0) as usize;
        let mut g = GridParameters {
            z,
            truncation: p,
            reach,
            n_boxes: boxes as usize,
            cost: 0.0,
        };
        g.cost = grid_cost(n, m, w, &g);
        if best.is_none_or(|b| g.cost < b.cost) {
            best = Some(g);
        }
    }
    best
}

/// A planned 1-D grid transform over fixed sources.
#[derive(Debug)]
pub(crate) struct Grid1d {
    h: f64,
    lo: f64,
    width: f64,
    n_boxes: usize,
    reach: usize,
    p: usize,
    /// The occupied boxes' numbers, in order.
    boxes: Vec<usize>,
    /// The k-th occupied box holds the slots `offsets[k]..offsets[k + 1]`.
    offsets: Vec<usize>,
    /// Source index of each slot (sources sorted by box, stable).
    order: Vec<u32>,
    /// (x - c_b) / h of each slot.
    scaled: Vec<f64>,
    /// Translation matrices, (2 R + 1) x p x p: entry [delta + R][m][n] is
    /// (-1)^m / m! h_{n+m}(delta w / h) for target box = source box + delta.
    mats: Vec<f64>,
    params: GridParameters,
}

impl Grid1d {
    /// Bins the sources (a counting sort) and tabulates the translations.
    ///
    /// # Errors
    /// [`FgtError::InvalidParameter`] when no grid reaches epsilon.
    pub fn new(sources: &[f64], h: f64, epsilon: f64, m: usize, w: usize) -> Result<Self> {
        let n = sources.len();
        if n > u32::MAX as usize {
            return Err(invalid("sources", "too many for the 1-D grid"));
        }
        let (lo, hi) = vastml_core::coordinate_bounds(&[sources], 1);
        let (lo, hi) = (lo[0], hi[0]);
        let params = grid_parameters(n, m, w, hi - lo, h, epsilon).ok_or_else(|| {
            invalid(
                "method",
                format!(
                    "the 1-D grid cannot reach epsilon={epsilon:e} at bandwidth {h} over a range of {}",
                    hi - lo
                ),
            )
        })?;
        let width = params.z * h;
        let nb = params.n_boxes;
        let box_of = |x: f64| (((x - lo) / width) as usize).min(nb - 1);
        let raw: Vec<usize> = sources.iter().map(|&x| box_of(x)).collect();
        let index = BoxIndex::new(&raw, nb);
        let ranks: Vec<usize> = raw.iter().map(|&b| index.rank(b)).collect();
        let occupied = index.ids.len();
        let mut offsets = vec![0usize; occupied + 1];
        for &k in &ranks {
            offsets[k + 1] += 1;
        }
        for k in 0..occupied {
            offsets[k + 1] += offsets[k];
        }
        let mut next = offsets.clone();
        let mut order = vec![0u32; n];
        let mut scaled = vec![0.0; n];
        for (i, &x) in sources.iter().enumerate() {
            let k = ranks[i];
            let slot = next[k];
            next[k] += 1;
            order[slot] = i as u32;
            scaled[slot] = (x - (lo + (raw[i] as f64 + 0.5) * width)) / h;
        }
        let boxes = index.ids;
        let (p, reach) = (params.truncation, params.reach);
        let mut mats = vec![0.0; (2 * reach + 1) * p * p];
        let mut herm = vec![0.0; 2 * p];
        for (k, mat) in mats.chunks_exact_mut(p * p).enumerate() {
            let u0 = (k as f64 - reach as f64) * params.z;
            // h_k(u0) = H_k(u0) exp(-u0^2), H_{k+1} = 2 u H_k - 2 k H_{k-1}
            herm[0] = (-u0 * u0).exp();
            if 2 * p > 1 {
                herm[1] = 2.0 * u0 * herm[0];
            }
            for j in 1..2 * p - 1 {
                herm[j + 1] = 2.0 * u0 * herm[j] - 2.0 * j as f64 * herm[j - 1];
            }
            let mut scale = 1.0; // (-1)^m / m!
            for mm in 0..p {
                for nn in 0..p {
                    mat[mm * p + nn] = scale * herm[nn + mm];
                }
                scale *= -1.0 / (mm + 1) as f64;
            }
        }
        Ok(Grid1d {
            h,
            lo,
            width,
            n_boxes: nb,
            reach,
            p,
            boxes,
            offsets,
            order,
            scaled,
            mats,
            params,
        })
    }

    pub fn params(&self) -> &GridParameters {
        &self.params
    }

    /// Number of occupied boxes.
    pub fn n_boxes(&self) -> usize {
        self.boxes.len()
    }

    /// Half the box width (the radius of a box about its centre).
    pub fn half_width(&self) -> f64 {
        0.5 * self.width
    }

    /// Distance beyond which sources are skipped (R box widths).
    pub fn cutoff(&self) -> f64 {
        self.reach as f64 * self.width
    }

    /// G at every target for each weight column (row-major `n x w` weights, `m x w` out).
    pub fn evaluate(
        &self,
        targets: &[f64],
        weights: &[f64],
        w: usize,
        out: &mut [f64],
        cancel: &AtomicBool,
    ) -> Result<()> {
        let (p, nb, reach) = (self.p, self.n_boxes, self.reach);
        let check = || {
            if cancel.load(Ordering::Relaxed) {
                Err(FgtError::Cancelled)
            } else {
                Ok(())
            }
        };
        // Hermite moments per occupied source box: A[k][c][n] = sum q_c a^n / n!
        let inv: Vec<f64> = (1..=p).map(|k| 1.0 / k as f64).collect();
        let mut moments = vec![0.0; self.boxes.len() * w * p];
        let sequential = crate::par::sequential();
        let moment_of_box = |(k, acc): (usize, &mut [f64])| {
            if k % 1024 == 0 {
                check()?;
            }
            for slot in self.offsets[k]..self.offsets[k + 1] {
                let a = self.scaled[slot];
                let i = self.order[slot] as usize;
                let q = &weights[i * w..(i + 1) * w];
                let mut t = 1.0;
                for (nn, f) in inv.iter().enumerate() {
                    for (c, &qc) in q.iter().enumerate() {
                        acc[c * p + nn] += qc * t;
                    }
                    t *= a * f;
                }
            }
            Ok::<(), FgtError>(())
        };
        if sequential {
            moments
                .chunks_mut(w * p)
                .enumerate()
                .try_for_each(moment_of_box)?;
        } else {
            moments
                .par_chunks_mut(w * p)
                .enumerate()
                .with_min_len(64)
                .try_for_each(moment_of_box)?;
        }
        // Target boxes, shifted by R so that every box within reach of a source has an index;
        // only those holding a target get Taylor coefficients.
        let nl = nb + 2 * reach;
        // (a truncating cast is the floor here, t being non-negative; `floor` is a call)
        let local_box = |y: f64| -> Option<usize> {
            let t = (y - self.lo) / self.width + reach as f64;
            // (through i64: a cast to usize checks for values above i64's range, a
            // fifth of an evaluation of 2,000 targets)
            (t >= 0.0 && t < nl as f64).then_some(t as i64 as usize)
        };
        let target_boxes: Vec<usize> = targets.iter().filter_map(|&y| local_box(y)).collect();
        let wanted = BoxIndex::new(&target_boxes, nl);
        drop(target_boxes);
        // Taylor coefficients per wanted target box
        let mut local = vec![0.0; wanted.ids.len() * w * p];
        let local_of_box = |(r, acc): (usize, &mut [f64])| {
            if r % 256 == 0 {
                check()?;
            }
            // target box t = tl - R takes source boxes b = tl - k, k = 0..=2R (delta =
            // t - b = k - R): the occupied ones among tl - 2R..=tl
            let tl = wanted.ids[r];
            let first = self.boxes.partition_point(|&b| b + 2 * reach < tl);
            for (j, &b) in self.boxes.iter().enumerate().skip(first) {
                if b > tl {
                    break;
                }
                let k = tl - b;
                let mat = &self.mats[k * p * p..(k + 1) * p * p];
                let a = &moments[j * w * p..(j + 1) * w * p];
                for c in 0..w {
                    let ac = &a[c * p..(c + 1) * p];
                    let out_c = &mut acc[c * p..(c + 1) * p];
                    for (mm, o) in out_c.iter_mut().enumerate() {
                        let row = &mat[mm * p..(mm + 1) * p];
                        *o += row.iter().zip(ac).map(|(x, y)| x * y).sum::<f64>();
                    }
                }
            }
            Ok::<(), FgtError>(())
        };
        if sequential {
            local
                .chunks_mut(w * p)
                .enumerate()
                .try_for_each(local_of_box)?;
        } else {
            local
                .par_chunks_mut(w * p)
                .enumerate()
                .with_min_len(16)
                .try_for_each(local_of_box)?;
        }
        // every target: one polynomial in s = (y - c_T) / h
        let inv_h = 1.0 / self.h;
        let chunk_of_targets = |(o, ys): (&mut [f64], &[f64])| {
            check()?;
            for (oj, &y) in o.chunks_exact_mut(w).zip(ys) {
                match local_box(y) {
                    None => oj.iter_mut().for_each(|v| *v = 0.0),
                    Some(tl) => {
                        let centre = self.lo + ((tl as f64 - reach as f64) + 0.5) * self.width;
                        let s = (y - centre) * inv_h;
                        let r = wanted.rank(tl);
                        for (c, v) in oj.iter_mut().enumerate() {
                            let coef = &local[(r * w + c) * p..(r * w + c + 1) * p];
                            *v = coef.iter().rev().fold(0.0, |acc, &l| acc * s + l);
                        }
                    }
                }
            }
            Ok::<(), FgtError>(())
        };
        if sequential {
            out.chunks_mut(CHUNK * w)
                .zip(targets.chunks(CHUNK))
                .try_for_each(chunk_of_targets)
        } else {
            out.par_chunks_mut(CHUNK * w)
                .zip(targets.par_chunks(CHUNK))
                .try_for_each(chunk_of_targets)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::direct_reference;

    fn points(n: usize, seed: u64) -> Vec<f64> {
        crate::testing::uniform(n, seed)
    }

    /// The bound of the module docs holds term by term: checked against the exact double
    /// series truncated far out, for the widths used.
    #[test]
    fn bound_decreases_and_reaches_small_epsilon() {
        for &z in &WIDTHS {
            let mut last = f64::INFINITY;
            for p in 1..30 {
                let b = error_bound(z, p);
                assert!(b <= last);
                last = b;
            }
        }
        assert!(error_bound(0.5, 20) < 1e-12);
        assert!(grid_parameters(1000, 1000, 1, 1.0, 0.01, 1e-16).is_none());
    }

    /// Far outliers at a small bandwidth spread the line over tens of millions of boxes:
    /// only the occupied ones are stored (the sorted path for sources and targets), and the
    /// error stays within epsilon against the direct sum, at targets in the bulk, at the
    /// outliers, between them and beyond.
    #[test]
    fn far_outliers_use_only_the_occupied_boxes() {
        let cancel = AtomicBool::new(false);
        let n = 4000;
        let mut x = points(n, 11);
        for (i, v) in x.iter_mut().enumerate().take(12) {
            *v = if i % 2 == 0 { 1e5 } else { -3e4 } * (1.0 + i as f64 * 1e-3);
        }
        let mut y: Vec<f64> = points(900, 12);
        y.extend_from_slice(&[x[0], x[1] + 0.004, x[4], -1e4, 5e5, 0.5]);
        let q: Vec<f64> = points(n, 13).iter().map(|v| v - 0.3).collect();
        for &(h, eps) in &[(0.01, 1e-6), (0.003, 1e-9), (0.05, 1e-4)] {
            let grid = Grid1d::new(&x, h, eps, y.len(), 1).unwrap();
            assert!(grid.n_boxes as f64 > 10.0 * sparse_from(n) as f64);
            assert!(grid.n_boxes() <= n);
            let mut g = vec![0.0; y.len()];
            grid.evaluate(&y, &q, 1, &mut g, &cancel).unwrap();
            let exact = direct_reference(&x, &y, 1, &q, 1, h);
            let qsum: f64 = q.iter().map(|v| v.abs()).sum();
            for (j, (a, b)) in g.iter().zip(&exact).enumerate() {
                assert!((a - b).abs() <= eps * qsum, "h={h} target {j}: {a} vs {b}");
            }
        }
    }

    /// Every source's error within epsilon |q| against the direct sum, for several
    /// bandwidths, accuracies, signed weights, two weight columns, and targets inside,
    /// outside and far from the sources.
    #[test]
    fn grid_meets_epsilon_against_the_direct_sum() {
        let cancel = AtomicBool::new(false);
        for &(n, h, eps) in &[
            (3000usize, 0.05, 1e-6),
            (2000, 0.01, 1e-10),
            (5000, 0.3, 1e-3),
            (4000, 0.002, 1e-8),
            (1500, 2.0, 1e-12),
        ] {
            let mut x = points(n, 1);
            // a clump and a far point
            for v in x.iter_mut().take(n / 3) {
                *v *= 0.01;
            }
            x[7] = 3.0;
            let mut y: Vec<f64> = points(700, 2).iter().map(|v| 1.6 * v - 0.3).collect();
            y.extend_from_slice(&[3.0, -50.0, 1e6, x[11]]);
            let q: Vec<f64> = points(2 * n, 3).iter().map(|v| v - 0.4).collect();
            let grid = Grid1d::new(&x, h, eps, y.len(), 2).unwrap();
            let mut g = vec![0.0; y.len() * 2];
            grid.evaluate(&y, &q, 2, &mut g, &cancel).unwrap();
            let exact = direct_reference(&x, &y, 1, &q, 2, h);
            for c in 0..2 {
                let qsum: f64 = q.iter().skip(c).step_by(2).map(|v| v.abs()).sum();
                let err = (0..y.len())
                    .map(|j| (g[j * 2 + c] - exact[j * 2 + c]).abs())
                    .fold(0.0, f64::max);
                assert!(
                    err <= eps * qsum,
                    "n={n} h={h} eps={eps}: {err} > {}",
                    eps * qsum
                );
            }
        }
    }
}
