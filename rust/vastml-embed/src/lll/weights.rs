//! The LLE reconstruction weights Z: nearest landmarks by a screened matrix product, then one
//! small regularised solve per point.

use rayon::prelude::*;
use vastml_core::Control;

use super::{Reports, Weights};
use crate::error::{EmbedError, Result, check_finite, invalid};

/// Points per block of the landmark search (the block's distances to all landmarks are held).
const BLOCK: usize = 256;
/// Blocks per chunk: the parallel unit between two polls / progress reports.
const CHUNK_BLOCKS: usize = 64;
/// Extra candidates whose exact distance is computed after the matrix-product screening, so a
/// rounding error of the screening cannot drop a true K_Z-th nearest landmark.
const MARGIN: usize = 4;
/// Ridge relative to trace(G) added when the regularised Gram matrix is still singular.
const FALLBACK_RIDGE: f64 = 1e-12;

pub(super) fn dot(a: &[f64], b: &[f64]) -> f64 {
    // four accumulators so the loop vectorises
    let mut s = [0.0f64; 4];
    let (ca, ra) = a.split_at(a.len() / 4 * 4);
    let (cb, rb) = b.split_at(ca.len());
    for (x, y) in ca.chunks_exact(4).zip(cb.chunks_exact(4)) {
        s[0] += x[0] * y[0];
        s[1] += x[1] * y[1];
        s[2] += x[2] * y[2];
        s[3] += x[3] * y[3];
    }
    let mut t = (s[0] + s[1]) + (s[2] + s[3]);
    for (x, y) in ra.iter().zip(rb) {
        t += x * y;
    }
    t
}

pub(super) fn sqdist(a: &[f64], b: &[f64]) -> f64 {
    let mut s = [0.0f64; 4];
    let (ca, ra) = a.split_at(a.len() / 4 * 4);
    let (cb, rb) = b.split_at(ca.len());
    for (x, y) in ca.chunks_exact(4).zip(cb.chunks_exact(4)) {
        for l in 0..4 {
            let d = x[l] - y[l];
            s[l] += d * d;
        }
    }
    let mut t = (s[0] + s[1]) + (s[2] + s[3]);
    for (x, y) in ra.iter().zip(rb) {
        t += (x - y) * (x - y);
    }
    t
}

/// Solves `g w = 1` (g: k×k row-major, overwritten) by LU with partial pivoting.
/// Returns false when a pivot is zero or the result is not finite.
fn solve_ones(g: &mut [f64], k: usize, w: &mut [f64]) -> bool {
    w.iter_mut().for_each(|v| *v = 1.0);
    for c in 0..k {
        let (mut p, mut best) = (c, g[c * k + c].abs());
        for r in c + 1..k {
            let v = g[r * k + c].abs();
            if v > best {
                p = r;
                best = v;
            }
        }
        if best == 0.0 || !best.is_finite() {
            return false;
        }
        if p != c {
            for j in 0..k {
                g.swap(c * k + j, p * k + j);
            }
            w.swap(c, p);
        }
        let piv = g[c * k + c];
        for r in c + 1..k {
            let f = g[r * k + c] / piv;
            if f != 0.0 {
                for j in c + 1..k {
                    g[r * k + j] -= f * g[c * k + j];
                }
                w[r] -= f * w[c];
            }
        }
    }
    for c in (0..k).rev() {
        let mut s = w[c];
        for j in c + 1..k {
            s -= g[c * k + j] * w[j];
        }
        w[c] = s / g[c * k + c];
    }
    w.iter().all(|v| v.is_finite())
}

/// Per-thread buffers of the weight computation.
struct Scratch {
    dots: Vec<f32>,
    screen: Vec<f64>,
    cand: Vec<(f64, u32)>,
    diff: Vec<f64>,
    g: Vec<f64>,
    g0: Vec<f64>,
    w: Vec<f64>,
    xc: Vec<f32>,
}

/// The landmarks, centred at their mean, and what the f32 screening of distances needs.
struct Search<'a> {
    landmarks: &'a [f64],
    dim: usize,
    k: usize,
    /// Candidates ranked exactly after the screening (K_Z + margin, at most L).
    kc: usize,
    mean: Vec<f64>,
    lnorm: Vec<f64>,
    lc32: Vec<f32>,
    /// Bound of the screening's relative error on a squared distance.
    gamma: f64,
    lmax: f64,
}

impl<'a> Search<'a> {
    fn new(landmarks: &'a [f64], dim: usize, k: usize) -> Self {
        let l = landmarks.len() / dim;
        // Centre at the landmarks' mean so the screening |x|² + |l|² − 2 x·l cancels less.
        let mut mean = vec![0.0; dim];
        for row in landmarks.chunks_exact(dim) {
            mean.iter_mut().zip(row).for_each(|(m, v)| *m += v);
        }
        mean.iter_mut().for_each(|m| *m /= l as f64);
        let lc: Vec<f64> = landmarks
            .chunks_exact(dim)
            .flat_map(|row| row.iter().zip(&mean).map(|(v, m)| v - m))
            .collect();
        let lnorm: Vec<f64> = lc.chunks_exact(dim).map(|r| dot(r, r)).collect();
        let lc32: Vec<f32> = lc.iter().map(|&v| v as f32).collect();
        // The screening runs in f32 (half the GEMM time of f64). Its error on a squared
        // distance |x|² + |l|² − 2 x·l is at most GAMMA·(|x|² + |l|²) (rounding of the inputs
        // and of a D-term dot product, with room to spare); after the exact distances of the
        // candidates the K_Z-th is checked against the smallest screened value left out, and
        // a point whose ranking the screening could have got wrong is searched exhaustively
        // in f64 (on the bench data: never).
        let gamma = 4.0 * (dim as f64 + 4.0) * f64::from(f32::EPSILON);
        let lmax = lnorm.iter().fold(0.0f64, |a, &v| a.max(v));
        Search {
            landmarks,
            dim,
            k,
            kc: (k + MARGIN).min(l),
            mean,
            lnorm,
            lc32,
            gamma,
            lmax,
        }
    }

    fn n_landmarks(&self) -> usize {
        self.lnorm.len()
    }

    fn scratch(&self) -> Scratch {
        let (l, k, dim) = (self.n_landmarks(), self.k, self.dim);
        Scratch {
            dots: vec![0.0; BLOCK * l],
            screen: vec![0.0; l],
            cand: Vec::with_capacity(l),
            diff: vec![0.0; k * dim],
            g: vec![0.0; k * k],
            g0: vec![0.0; k * k],
            w: vec![0.0; k],
            xc: vec![0.0; BLOCK * dim],
        }
    }

    fn landmark(&self, j: usize) -> &[f64] {
        &self.landmarks[j * self.dim..(j + 1) * self.dim]
    }

    /// Weights of the `m` points of `xb` (a block): indices into `idx_out`, values into
    /// `val_out` (both m×K_Z).
    fn block(
        &self,
        s: &mut Scratch,
        xb: &[f64],
        reg: f64,
        idx_out: &mut [u32],
        val_out: &mut [f64],
    ) {
        let (dim, k, l) = (self.dim, self.k, self.n_landmarks());
        let m = idx_out.len() / k;
        for (dst, src) in s.xc.chunks_exact_mut(dim).zip(xb.chunks_exact(dim)) {
            dst.iter_mut()
                .zip(src.iter().zip(&self.mean))
                .for_each(|(d, (v, mu))| *d = (v - mu) as f32);
        }
        // dots = Xc_b · Lcᵀ  (m × L), f32
        // SAFETY: the strides describe row-major m×dim, (L×dim)ᵀ and m×L arrays that the
        // slices hold entirely.
        unsafe {
            matrixmultiply::sgemm(
                m,
                dim,
                l,
                1.0,
                s.xc.as_ptr(),
                dim as isize,
                1,
                self.lc32.as_ptr(),
                1,
                dim as isize,
                0.0,
                s.dots.as_mut_ptr(),
                l as isize,
                1,
            );
        }
        for p in 0..m {
            let xp = &xb[p * dim..(p + 1) * dim];
            self.nearest(s, xp, p);
            let io = &mut idx_out[p * k..(p + 1) * k];
            let vo = &mut val_out[p * k..(p + 1) * k];
            for (o, c) in io.iter_mut().zip(&s.cand) {
                *o = c.1;
            }
            if s.cand[0].0 == 0.0 {
                vo.iter_mut().for_each(|v| *v = 0.0);
                vo[0] = 1.0;
                continue;
            }
            self.solve(s, xp, reg, io, vo);
        }
    }

    /// `s.cand` := the K_Z (or more) nearest landmarks of point `xp` (row `p` of the block),
    /// by exact squared distance, ties by index.
    fn nearest(&self, s: &mut Scratch, xp: &[f64], p: usize) {
        let (k, l, kc) = (self.k, self.n_landmarks(), self.kc);
        let xn: f64 = xp
            .iter()
            .zip(&self.mean)
            .map(|(v, mu)| (v - mu) * (v - mu))
            .sum();
        // the screened values (a vectorisable pass), then the kc smallest kept sorted by
        // insertion: most of the L values fail the first comparison, and an insertion shifts
        // at most kc entries in place
        let dp = &s.dots[p * l..(p + 1) * l];
        for ((v, &d), &ln) in s.screen.iter_mut().zip(dp).zip(&self.lnorm) {
            *v = xn + ln - 2.0 * f64::from(d);
        }
        s.cand.clear();
        for (j, &v) in s.screen.iter().enumerate() {
            let mut at = s.cand.len();
            if at == kc {
                if v >= s.cand[kc - 1].0 {
                    continue;
                }
                at = kc - 1;
            } else {
                s.cand.push((v, j as u32));
            }
            while at > 0 && s.cand[at - 1].0 > v {
                s.cand[at] = s.cand[at - 1];
                at -= 1;
            }
            s.cand[at] = (v, j as u32);
        }
        let screened_max = s.cand.last().map_or(f64::INFINITY, |c| c.0);
        for c in s.cand.iter_mut() {
            c.0 = sqdist(xp, self.landmark(c.1 as usize));
        }
        s.cand
            .sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        // a landmark left out has a screened value >= screened_max, so its true squared
        // distance is >= screened_max - err: if that could still beat the K_Z-th candidate,
        // rank all landmarks exactly
        if kc < l && screened_max - self.gamma * (xn + self.lmax) <= s.cand[k - 1].0 {
            s.cand.clear();
            s.cand
                .extend((0..l).map(|j| (sqdist(xp, self.landmark(j)), j as u32)));
            s.cand
                .sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        }
    }

    /// The regularised LLE weights of `xp` from the landmarks `io` into `vo`.
    fn solve(&self, s: &mut Scratch, xp: &[f64], reg: f64, io: &[u32], vo: &mut [f64]) {
        let (dim, k) = (self.dim, self.k);
        for (i, &j) in io.iter().enumerate() {
            s.diff[i * dim..(i + 1) * dim]
                .iter_mut()
                .zip(xp.iter().zip(self.landmark(j as usize)))
                .for_each(|(d, (a, b))| *d = a - b);
        }
        let mut trace = 0.0;
        for i in 0..k {
            let di = &s.diff[i * dim..(i + 1) * dim];
            for j in 0..=i {
                let v = dot(di, &s.diff[j * dim..(j + 1) * dim]);
                s.g0[i * k + j] = v;
                s.g0[j * k + i] = v;
            }
            trace += s.g0[i * k + i];
        }
        let scale = if trace > 0.0 { trace } else { 1.0 };
        for r in [reg.max(FALLBACK_RIDGE), 1e-9, 1e-6] {
            s.g.copy_from_slice(&s.g0);
            for i in 0..k {
                s.g[i * k + i] += r * scale;
            }
            if solve_ones(&mut s.g, k, &mut s.w) {
                let sum: f64 = s.w.iter().sum();
                if sum != 0.0 && sum.is_finite() {
                    vo.iter_mut().zip(&s.w).for_each(|(o, w)| *o = w / sum);
                    return;
                }
            }
        }
        vo.iter_mut().for_each(|v| *v = 1.0 / k as f64);
    }
}

/// Checks the arguments of [`reconstruction_weights`]; returns (N, L).
fn check_args(
    x: &[f64],
    landmarks: &[f64],
    dim: usize,
    k: usize,
    reg: f64,
) -> Result<(usize, usize)> {
    if dim == 0 {
        return Err(invalid("dim", "must be positive"));
    }
    if x.len() % dim != 0 || landmarks.len() % dim != 0 {
        return Err(EmbedError::ShapeMismatch(format!(
            "x ({}) and landmarks ({}) must both hold rows of {dim} values",
            x.len(),
            landmarks.len()
        )));
    }
    let (n, l) = (x.len() / dim, landmarks.len() / dim);
    if k == 0 || k > l {
        return Err(invalid(
            "n_neighbors",
            format!("must lie in [1, {l}] (the number of landmarks), got {k}"),
        ));
    }
    if l > u32::MAX as usize {
        return Err(invalid("landmarks", "more than 2^32 landmarks"));
    }
    if !(reg.is_finite() && reg >= 0.0) {
        return Err(invalid(
            "reg",
            format!("must be finite and >= 0, got {reg}"),
        ));
    }
    check_finite(x, "x")?;
    check_finite(landmarks, "landmarks")?;
    Ok((n, l))
}

/// LLE reconstruction weights of every point from its `k` nearest landmarks.
///
/// `x` (N×D) and `landmarks` (L×D) are row-major. Column n of Z solves
/// `min ||x_n − Σ_i z_i l_i||² s.t. Σ_i z_i = 1` over its K_Z nearest landmarks: `G z = 1`
/// with `G_ij = (x_n − l_i)ᵀ(x_n − l_j) + reg·tr(G)·δ_ij`, then rescaled to sum to one
/// (thesis 4.7-4.8; the LLE convention). With `reg = 0` and a singular G (K_Z > D) a ridge
/// of `1e-12·tr(G)` is added. A point that coincides with its nearest landmark gets exactly
/// that landmark's unit vector. Landmarks within a point's list are ordered by distance
/// (ties by index).
///
/// Points are processed in chunks of 16,384 (each parallel over blocks of 256); between
/// chunks `control` is polled and its hook gets reports numbered 1, 2, … (at most 256,
/// objective NaN). The weights do not depend on the number of threads.
///
/// # Errors
/// `k` = 0 or above L, `dim` = 0, shapes that disagree, non-finite input, negative `reg`,
/// [`EmbedError::Cancelled`] or [`EmbedError::Stopped`].
pub fn reconstruction_weights(
    x: &[f64],
    landmarks: &[f64],
    dim: usize,
    k: usize,
    reg: f64,
    control: Control<'_>,
) -> Result<Weights> {
    let (n, _) = check_args(x, landmarks, dim, k, reg)?;
    let search = Search::new(landmarks, dim, k);
    let mut indices = vec![0u32; n * k];
    let mut values = vec![0.0f64; n * k];
    let chunk = BLOCK * CHUNK_BLOCKS;
    let total = n.div_ceil(chunk);
    let mut reports = Reports::new(total);
    for (c, (idx, val)) in indices
        .chunks_mut(chunk * k)
        .zip(values.chunks_mut(chunk * k))
        .enumerate()
    {
        let xc = &x[c * chunk * dim..];
        idx.par_chunks_mut(BLOCK * k)
            .zip(val.par_chunks_mut(BLOCK * k))
            .enumerate()
            .for_each_init(
                || search.scratch(),
                |s, (b, (idx_out, val_out))| {
                    if control.is_cancelled() {
                        return;
                    }
                    let m = idx_out.len() / k;
                    let xb = &xc[b * BLOCK * dim..(b * BLOCK + m) * dim];
                    search.block(s, xb, reg, idx_out, val_out);
                },
            );
        reports.after(&control, c + 1, total)?;
    }
    Ok(Weights { k, indices, values })
}
