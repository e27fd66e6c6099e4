//! The inner loop shared by every exact evaluation: sum of weighted Gaussians from a
//! contiguous range of sources (struct-of-arrays layout) at one target.
//!
//! The loop is written so that it vectorises: squared distances are accumulated one
//! coordinate at a time over a block of sources, the exponentials are taken over the
//! block with [`crate::exp`], and the weighted sums use eight independent accumulators
//! (a fixed summation order, so results do not depend on the number of threads). On
//! x86-64 CPUs with AVX2 and FMA a copy compiled for those features is chosen at run time.

use crate::exp::{exp_nonpositive_with, fmadd};

/// Sources per inner block: the block's coordinates and exponentials stay in L1.
pub(crate) const BLOCK: usize = 256;
const LANES: usize = 8;

/// Points stored coordinate by coordinate (`coords[k * n + i]` is coordinate k of point i).
#[derive(Clone, Debug)]
pub(crate) struct SoaPoints {
    pub dim: usize,
    pub n: usize,
    pub coords: Vec<f64>,
}

impl SoaPoints {
    /// From row-major `points` (n x dim), optionally in the order `perm` (perm[i] = row).
    pub fn from_rows(points: &[f64], dim: usize, perm: Option<&[usize]>) -> Self {
        let n = points.len() / dim;
        let mut coords = vec![0.0; n * dim];
        for i in 0..n {
            let row = perm.map_or(i, |p| p[i]);
            for k in 0..dim {
                coords[k * n + i] = points[row * dim + k];
            }
        }
        SoaPoints { dim, n, coords }
    }

    #[inline(always)]
    pub fn coord(&self, k: usize) -> &[f64] {
        &self.coords[k * self.n..(k + 1) * self.n]
    }
}

/// Weight columns stored column by column (`data[w * n + i]`), optionally permuted.
pub(crate) fn weight_columns(weights: &[f64], n_weights: usize, perm: Option<&[usize]>) -> Vec<f64> {
    let n = weights.len() / n_weights;
    let mut data = vec![0.0; n * n_weights];
    for i in 0..n {
        let row = perm.map_or(i, |p| p[i]);
        for w in 0..n_weights {
            data[w * n + i] = weights[row * n_weights + w];
        }
    }
    data
}

/// Adds sum_{i in range} q_w[i] exp(-||y - x_i||^2 / h^2) to `out[w]` for every weight column.
///
/// `neg_inv_h2` is -1/h^2, `weights` is column-major with `sources.n` rows.
#[inline]
pub(crate) fn accumulate(
    y: &[f64],
    sources: &SoaPoints,
    weights: &[f64],
    start: usize,
    end: usize,
    neg_inv_h2: f64,
    out: &mut [f64],
) {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx2_fma() {
            // SAFETY: the CPU supports the features the function is compiled with.
            unsafe { accumulate_avx2(y, sources, weights, start, end, neg_inv_h2, out) };
            return;
        }
    }
    accumulate_generic::<false>(y, sources, weights, start, end, neg_inv_h2, out);
}

/// The instruction set the kernels use on this CPU: "avx2+fma" or "baseline".
pub fn simd_level() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx2_fma() {
            return "avx2+fma";
        }
    }
    "baseline"
}

#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn has_avx2_fma() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn accumulate_avx2(
    y: &[f64],
    sources: &SoaPoints,
    weights: &[f64],
    start: usize,
    end: usize,
    neg_inv_h2: f64,
    out: &mut [f64],
) {
    accumulate_generic::<true>(y, sources, weights, start, end, neg_inv_h2, out);
}

#[inline(always)]
fn accumulate_generic<const FMA: bool>(
    y: &[f64],
    sources: &SoaPoints,
    weights: &[f64],
    start: usize,
    end: usize,
    neg_inv_h2: f64,
    out: &mut [f64],
) {
    let n = sources.n;
    let mut d2 = [0.0f64; BLOCK];
    let mut s = start;
    while s < end {
        let len = (end - s).min(BLOCK);
        let d2 = &mut d2[..len];
        d2.fill(0.0);
        for (k, &yk) in y.iter().enumerate() {
            let xk = &sources.coord(k)[s..s + len];
            for (acc, &x) in d2.iter_mut().zip(xk) {
                let t = yk - x;
                *acc = fmadd::<FMA>(t, t, *acc);
            }
        }
        for v in d2.iter_mut() {
            *v = exp_nonpositive_with::<FMA>(*v * neg_inv_h2);
        }
        for (w, o) in out.iter_mut().enumerate() {
            let q = &weights[w * n + s..w * n + s + len];
            *o += dot::<FMA>(q, d2);
        }
        s += len;
    }
}

/// Dot product with eight accumulators (vectorises; fixed order).
#[inline(always)]
fn dot<const FMA: bool>(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0f64; LANES];
    let ca = a.chunks_exact(LANES);
    let cb = b.chunks_exact(LANES);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, z) in ca.zip(cb) {
        for l in 0..LANES {
            acc[l] = fmadd::<FMA>(x[l], z[l], acc[l]);
        }
    }
    let mut tail = 0.0;
    for (x, z) in ra.iter().zip(rb) {
        tail = fmadd::<FMA>(*x, *z, tail);
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accumulate_matches_naive_sum() {
        let dim = 3;
        let n = 1000;
        let pts: Vec<f64> = (0..n * dim).map(|i| ((i * 7919) % 1000) as f64 / 1000.0).collect();
        let w: Vec<f64> = (0..n * 2).map(|i| ((i * 31) % 17) as f64 - 8.0).collect();
        let soa = SoaPoints::from_rows(&pts, dim, None);
        let wc = weight_columns(&w, 2, None);
        let y = [0.3, 0.6, 0.1];
        let h = 0.2f64;
        let mut out = [0.0; 2];
        accumulate(&y, &soa, &wc, 5, 997, -1.0 / (h * h), &mut out);
        let mut naive = [0.0; 2];
        for i in 5..997 {
            let d2: f64 = (0..dim).map(|k| (y[k] - pts[i * dim + k]).powi(2)).sum();
            for c in 0..2 {
                naive[c] += w[i * 2 + c] * (-d2 / (h * h)).exp();
            }
        }
        for c in 0..2 {
            assert!((out[c] - naive[c]).abs() < 1e-12 * 1000.0, "{out:?} vs {naive:?}");
        }
    }
}
