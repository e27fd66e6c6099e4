//! Euclidean distance helpers.

/// Squared Euclidean distance of two equal-length slices.
///
/// The sum is accumulated left to right starting from `0.0`; every distance in this crate is
/// computed in exactly this order, so results are bit-for-bit reproducible against a brute-force
/// loop that calls this function.
///
/// The slices should have equal length (checked with `debug_assert!`); in release builds extra
/// trailing elements of the longer slice are ignored.
///
/// ```
/// assert_eq!(vastml_spatial::squared_distance(&[0.0, 0.0], &[3.0, 4.0]), 25.0);
/// ```
#[inline]
pub fn squared_distance(a: &[f64], b: &[f64]) -> f64 {
    debug_assert_eq!(a.len(), b.len(), "squared_distance: length mismatch");
    let mut s = 0.0;
    for (x, y) in a.iter().zip(b) {
        let d = x - y;
        s += d * d;
    }
    s
}

/// Dot product of two equal-length slices with four accumulators, summed pairwise at the end
/// (it vectorises; a single-chain `iter().sum()` is bound by the latency of floating-point
/// addition). The k-means of this crate and the SVM kernels of `vastml-svm` share it.
///
/// ```
/// assert_eq!(vastml_spatial::dot(&[1.0, 2.0, 3.0, 4.0, 5.0], &[1.0; 5]), 15.0);
/// ```
#[inline]
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for k in 0..4 {
            acc[k] += x[k] * y[k];
        }
    }
    let tail: f64 = ra.iter().zip(rb).map(|(x, y)| x * y).sum();
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// Squared distance with the dimension fixed at compile time when `D > 0` (so the loop is fully
/// unrolled), or taken from `dim` when `D == 0`. Same summation order as [`squared_distance`].
#[inline(always)]
pub(crate) fn sq_dist_fixed<const D: usize>(a: &[f64], b: &[f64], dim: usize) -> f64 {
    let dim = if D == 0 { dim } else { D };
    let mut s = 0.0;
    for (x, y) in a[..dim].iter().zip(&b[..dim]) {
        let d = x - y;
        s += d * d;
    }
    s
}
