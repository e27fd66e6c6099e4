//! The inner loop shared by every exact evaluation: sum of weighted Gaussians from a
//! contiguous range of sources (struct-of-arrays layout) at one target.
//!
//! The loop is written so that it vectorises: squared distances are accumulated one
//! coordinate at a time over a block of sources, the exponentials are taken over the
//! block with [`crate::exp`], and the weighted sums use eight independent accumulators
//! (a fixed summation order, so results do not depend on the number of threads). On
//! x86-64 CPUs with AVX2 and FMA a copy compiled for those features is chosen at run time.

use crate::exp::{exp_nonpositive_with, fmadd};

/// Sources per inner block of the direct method (a block stays in L1 across targets).
pub(crate) const BLOCK: usize = 1024;
/// Sources handled together in registers: four AVX2 vectors, four independent exp chains.
const CHUNK: usize = 16;
/// Largest number of weight columns kept in registers; more are done in passes.
const MAX_W: usize = 4;

/// Sources prepared for the kernel: centred on their mean, divided by h, stored
/// coordinate by coordinate (`coords[k * stride + i]`), each row padded so that a chunk of
/// [`CHUNK`] starting anywhere below `n` can be read.
///
/// Two forms of the exponent -||y - x||^2 / h^2 are used:
/// - *expanded*, 2 y.x - |x|^2 - |y|^2 (one multiply-add per coordinate, |x|^2 stored per
///   source), when the rounding error of the cancellation, about 1e-15 (R/h + 4)^2 with R
///   the largest distance of a source from the mean, is below epsilon / 100;
/// - *difference*, the sum of squared differences, otherwise.
///
/// The exponential uses a degree-7 polynomial without the low part of ln 2 (error below
/// 7.5e-9 relative plus 1e-10 absolute, so under 1e-8 per unit weight) when epsilon >= 1e-7,
/// and degree 12 (< 1e-15 relative) below; both stay far inside the epsilon contract.
#[derive(Clone, Debug)]
pub(crate) struct SoaPoints {
    pub dim: usize,
    pub n: usize,
    pub stride: usize,
    coords: Vec<f64>,
    /// -|x|^2 per source (expanded form), padded with zeros.
    neg_norms: Vec<f64>,
    center: Vec<f64>,
    inv_h: f64,
    expanded: bool,
    low_degree: bool,
    /// A chunk of sources whose exponents are all below this is left out (`-inf`: never).
    skip_below: f64,
}

fn padded(n: usize) -> usize {
    n.div_ceil(CHUNK) * CHUNK + CHUNK
}

impl SoaPoints {
    /// From row-major `points` (n x dim), optionally in the order `perm` (perm[i] = row),
    /// for bandwidth h and accuracy epsilon.
    pub fn new(points: &[f64], dim: usize, perm: Option<&[usize]>, h: f64, epsilon: f64) -> Self {
        let n = points.len() / dim;
        let stride = padded(n);
        // The mean with four partial sums per coordinate (rows i, i + 1, i + 2, i + 3 into
        // different ones): summed row by row into one, each coordinate's sum is a chain of
        // dependent additions, the slowest part of this in the plane.
        let mut part = vec![0.0; 4 * dim];
        let mut quads = points.chunks_exact(4 * dim);
        for quad in &mut quads {
            for (a, &v) in part.iter_mut().zip(quad) {
                *a += v;
            }
        }
        for (a, &v) in part.iter_mut().zip(quads.remainder()) {
            *a += v;
        }
        let center: Vec<f64> = (0..dim)
            .map(|k| {
                let p = |r: usize| part[r * dim + k];
                (p(0) + p(1) + (p(2) + p(3))) / n as f64
            })
            .collect();
        let inv_h = 1.0 / h;
        let mut coords = vec![0.0; stride * dim];
        let mut neg_norms = vec![0.0; stride];
        for (i, nn) in neg_norms[..n].iter_mut().enumerate() {
            let row = perm.map_or(i, |p| p[i]);
            let mut norm2 = 0.0;
            for (k, &c) in center.iter().enumerate() {
                let v = (points[row * dim + k] - c) * inv_h;
                coords[k * stride + i] = v;
                norm2 += v * v;
            }
            *nn = -norm2;
        }
        let max_norm2 = neg_norms[..n].iter().fold(0.0f64, |m, &v| m.max(-v));
        let spread = max_norm2.sqrt() + 4.0;
        SoaPoints {
            dim,
            n,
            stride,
            coords,
            neg_norms,
            center,
            inv_h,
            expanded: 1e-15 * spread * spread <= epsilon / 100.0,
            low_degree: epsilon >= 1e-7,
            skip_below: f64::NEG_INFINITY,
        }
    }

    /// Leaves out the sources farther than `radius` from a target when they come in whole
    /// chunks: for a sum that may drop every source beyond `radius` (the kd-tree's cut-off).
    /// A chunk is skipped when each computed exponent is below -(radius / h)^2 - 1; the
    /// exponents are accurate far within 1 (see the forms above), so only sources beyond the
    /// radius are left out.
    /// Where nothing is skipped the test costs up to 30% of a call (6-D, every leaf in
    /// reach): worth it only when most chunks are out of reach.
    pub fn skipping_beyond(mut self, radius: f64) -> Self {
        let r = radius * self.inv_h;
        self.skip_below = -(r * r) - 1.0;
        self
    }

    /// Whether chunks out of reach are skipped.
    fn skipping(&self) -> bool {
        self.skip_below > f64::NEG_INFINITY
    }

    /// Maps a target into the prepared coordinates: writes the per-coordinate factors into
    /// `buf` (2 y' in the expanded form, y' otherwise) and returns -|y'|^2 (expanded) or 0.
    #[inline]
    pub fn prepare_target(&self, y: &[f64], buf: &mut [f64]) -> f64 {
        let mut norm2 = 0.0;
        for k in 0..self.dim {
            let v = (y[k] - self.center[k]) * self.inv_h;
            norm2 += v * v;
            buf[k] = if self.expanded { 2.0 * v } else { v };
        }
        if self.expanded { -norm2 } else { 0.0 }
    }
}

/// Weight columns stored column by column (`data[w * stride + i]`, stride as for
/// [`SoaPoints`], padding zero), optionally permuted.
pub(crate) fn weight_columns(
    weights: &[f64],
    n_weights: usize,
    perm: Option<&[usize]>,
) -> Vec<f64> {
    let n = weights.len() / n_weights;
    let stride = padded(n);
    let mut data = vec![0.0; stride * n_weights];
    for i in 0..n {
        let row = perm.map_or(i, |p| p[i]);
        for w in 0..n_weights {
            data[w * stride + i] = weights[row * n_weights + w];
        }
    }
    data
}

/// Adds sum_{i in start..end} q_w[i] exp(-||y - x_i||^2 / h^2) to `out[w]` for every
/// weight column, for a target prepared by [`SoaPoints::prepare_target`]. In the difference
/// form, `y_norm` (0 from `prepare_target`) is added to every exponent: a shift s gives
/// exp(s - ||y - x_i||^2 / h^2).
#[inline]
pub(crate) fn accumulate(
    y: &[f64],
    y_norm: f64,
    sources: &SoaPoints,
    weights: &[f64],
    start: usize,
    end: usize,
    out: &mut [f64],
) {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx2_fma() {
            // SAFETY: the CPU supports the features the function is compiled with.
            unsafe { accumulate_avx2(y, y_norm, sources, weights, start, end, out) };
            return;
        }
    }
    dispatch::<false>(y, y_norm, sources, weights, start, end, out);
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
    vastml_spatial::simd_allowed()
        && std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn accumulate_avx2(
    y: &[f64],
    y_norm: f64,
    sources: &SoaPoints,
    weights: &[f64],
    start: usize,
    end: usize,
    out: &mut [f64],
) {
    dispatch::<true>(y, y_norm, sources, weights, start, end, out);
}

#[inline(always)]
fn dispatch<const FMA: bool>(
    y: &[f64],
    y_norm: f64,
    sources: &SoaPoints,
    weights: &[f64],
    start: usize,
    end: usize,
    out: &mut [f64],
) {
    let args = (y, y_norm, sources, weights, start, end, out);
    // the test for chunks out of reach is its own copy: even untaken, it slows the loop
    match (sources.expanded, sources.low_degree, sources.skipping()) {
        (true, true, false) => kernel::<FMA, true, true, false>(args),
        (true, false, false) => kernel::<FMA, true, false, false>(args),
        (false, true, false) => kernel::<FMA, false, true, false>(args),
        (false, false, false) => kernel::<FMA, false, false, false>(args),
        (true, true, true) => kernel::<FMA, true, true, true>(args),
        (true, false, true) => kernel::<FMA, true, false, true>(args),
        (false, true, true) => kernel::<FMA, false, true, true>(args),
        (false, false, true) => kernel::<FMA, false, false, true>(args),
    }
}

/// The arguments of [`accumulate`].
type Args<'a> = (
    &'a [f64],
    f64,
    &'a SoaPoints,
    &'a [f64],
    usize,
    usize,
    &'a mut [f64],
);

#[inline(always)]
fn kernel<const FMA: bool, const EXPANDED: bool, const LOW: bool, const SKIP: bool>(
    (y, y_norm, sources, weights, start, end, out): Args<'_>,
) {
    let stride = sources.stride;
    let dim = sources.dim;
    let coords = &sources.coords[..];
    for w0 in (0..out.len()).step_by(MAX_W) {
        let nw = (out.len() - w0).min(MAX_W);
        let mut acc = [[0.0f64; CHUNK]; MAX_W];
        let mut s = start;
        while s < end {
            let len = (end - s).min(CHUNK);
            // the exponent of CHUNK sources, kept in registers across dimensions
            // y_norm is -|y|^2 in the expanded form, and in the difference form 0 or the
            // shift a caller adds to every exponent (the log-space sums)
            let mut arg = [y_norm; CHUNK];
            if EXPANDED {
                let nx: &[f64; CHUNK] = sources.neg_norms[s..s + CHUNK].try_into().expect("padded");
                for l in 0..CHUNK {
                    arg[l] += nx[l];
                }
            }
            for (k, &yk) in y.iter().enumerate().take(dim) {
                let xk: &[f64; CHUNK] = coords[k * stride + s..k * stride + s + CHUNK]
                    .try_into()
                    .expect("padded rows");
                for l in 0..CHUNK {
                    if EXPANDED {
                        arg[l] = fmadd::<FMA>(yk, xk[l], arg[l]);
                    } else {
                        let t = yk - xk[l];
                        arg[l] = fmadd::<FMA>(-t, t, arg[l]);
                    }
                }
            }
            if SKIP {
                // the largest exponent, lane by lane (`f64::max` would be a NaN-aware chain)
                let mut top = [f64::NEG_INFINITY; 4];
                for (l, &a) in arg.iter().enumerate() {
                    let j = l % 4;
                    top[j] = if a > top[j] { a } else { top[j] };
                }
                let top = if top[0] > top[1] { top[0] } else { top[1] }.max(if top[2] > top[3] {
                    top[2]
                } else {
                    top[3]
                });
                if top < sources.skip_below {
                    s += len;
                    continue;
                }
            }
            let mut e = [0.0f64; CHUNK];
            for l in 0..CHUNK {
                e[l] = exp_nonpositive_with::<FMA, LOW>(arg[l]);
            }
            if len < CHUNK {
                for (l, v) in e.iter_mut().enumerate() {
                    if l >= len {
                        *v = 0.0;
                    }
                }
            }
            for (w, a) in acc.iter_mut().enumerate().take(nw) {
                let base = (w0 + w) * stride + s;
                let q: &[f64; CHUNK] = weights[base..base + CHUNK].try_into().expect("padded rows");
                for l in 0..CHUNK {
                    a[l] = fmadd::<FMA>(q[l], e[l], a[l]);
                }
            }
            s += len;
        }
        for (w, a) in acc.iter().enumerate().take(nw) {
            out[w0 + w] += reduce(a);
        }
    }
}

/// Sum of a chunk of partial sums in a fixed tree order.
#[inline(always)]
fn reduce(a: &[f64; CHUNK]) -> f64 {
    let mut v = *a;
    let mut width = CHUNK / 2;
    while width > 0 {
        for l in 0..width {
            v[l] += v[l + width];
        }
        width /= 2;
    }
    v[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(
        pts: &[f64],
        w: &[f64],
        dim: usize,
        y: &[f64],
        h: f64,
        a: usize,
        b: usize,
    ) -> [f64; 2] {
        let mut out = [0.0; 2];
        for i in a..b {
            let d2: f64 = (0..dim).map(|k| (y[k] - pts[i * dim + k]).powi(2)).sum();
            for c in 0..2 {
                out[c] += w[i * 2 + c] * (-d2 / (h * h)).exp();
            }
        }
        out
    }

    #[test]
    fn accumulate_matches_naive_sum_in_every_form() {
        let dim = 3;
        let n = 1000;
        let pts: Vec<f64> = (0..n * dim)
            .map(|i| ((i * 7919) % 1000) as f64 / 1000.0)
            .collect();
        let w: Vec<f64> = (0..n * 2).map(|i| ((i * 31) % 17) as f64 - 8.0).collect();
        let wc = weight_columns(&w, 2, None);
        let y = [0.3, 0.6, 0.1];
        let h = 0.2f64;
        let exact = naive(&pts, &w, dim, &y, h, 5, 997);
        let qsum: f64 = w[10..1994].iter().map(|v| v.abs()).sum();
        // (epsilon, expected form): expanded + low degree, expanded + high degree,
        // difference form (tiny epsilon makes the expansion unsafe)
        for (eps, expanded, low) in [
            (1e-6, true, true),
            (1e-10, true, false),
            (1e-19, false, false),
        ] {
            let soa = SoaPoints::new(&pts, dim, None, h, eps);
            assert_eq!((soa.expanded, soa.low_degree), (expanded, low));
            let mut buf = [0.0; 3];
            let yn = soa.prepare_target(&y, &mut buf);
            let mut out = [0.0; 2];
            accumulate(&buf, yn, &soa, &wc, 5, 997, &mut out);
            for c in 0..2 {
                assert!(
                    (out[c] - exact[c]).abs() <= eps.max(1e-14) * qsum,
                    "{eps}: {out:?} vs {exact:?}"
                );
            }
            // masked tails: every split of the range gives the same sum
            let mut parts = [0.0; 2];
            for (a, b) in [(5, 21), (21, 22), (22, 500), (500, 997)] {
                accumulate(&buf, yn, &soa, &wc, a, b, &mut parts);
            }
            for c in 0..2 {
                assert!((parts[c] - out[c]).abs() < 1e-9);
            }
        }
    }
}
