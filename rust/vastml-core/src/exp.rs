//! One branch-free `exp` that the compiler vectorises.
//!
//! `f64::exp` calls libm one value at a time, and a Gauss sum or a kernel row spends nearly
//! all of its time there. [`exp`] uses the classic range reduction `x = k ln 2 + r`,
//! `|r| <= ln 2 / 2`, a degree-12 Taylor polynomial for `e^r` (truncation below 2e-16
//! relative) evaluated by Estrin's scheme, and builds `2^k` from the exponent bits: no branch
//! and no float-to-int conversion, so a loop over it becomes SIMD code.
//!
//! Accuracy (checked against `f64::exp` in the tests): relative error at most
//! [`MAX_RELATIVE_ERROR`] for `x` in `[-708, 709]`; 0 below -708 (where `e^x` is under the
//! smallest normal double) and `e^709` for `x > 709` (instead of overflowing).
//!
//! ```
//! use vastml_core::exp::{exp, MAX_RELATIVE_ERROR};
//!
//! for x in [-700.0, -3.5, 0.0, 1.0, 42.0, 700.0] {
//!     let want = f64::exp(x);
//!     assert!((exp(x) - want).abs() <= MAX_RELATIVE_ERROR * want);
//! }
//! assert_eq!(exp(-1e6), 0.0);
//! ```

const LOG2E: f64 = std::f64::consts::LOG2_E;
/// ln 2 split in two (fdlibm): the high part has 32 trailing zero bits, so k * LN2_HI is exact.
const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
/// 1.5 * 2^52: adding it rounds to an integer kept in the low mantissa bits.
const SHIFTER: f64 = 6_755_399_441_055_744.0;
/// Below this, e^x is under the smallest normal double; the functions return 0 there.
pub const MIN_ARG: f64 = -708.0;
/// Above this, [`exp`] returns `e^MAX_ARG` (the largest argument whose `2^k` is finite).
pub const MAX_ARG: f64 = 709.0;
/// The largest relative error of [`exp`] and [`exp_nonpositive`] against the correctly
/// rounded `e^x` on `[MIN_ARG, MAX_ARG]` (a few units in the last place).
pub const MAX_RELATIVE_ERROR: f64 = 8e-16;
/// The largest relative error of the degree-7 variant (`LOW = true` in
/// [`exp_nonpositive_with`]), plus an absolute error below 1e-10 from skipping the low part
/// of ln 2.
pub const LOW_RELATIVE_ERROR: f64 = 7.5e-9;

/// `e^x` for any `x`: within [`MAX_RELATIVE_ERROR`] on `[MIN_ARG, MAX_ARG]`, 0 below
/// `MIN_ARG`, `e^MAX_ARG` above `MAX_ARG`, NaN for NaN. Branch-free, so loops vectorise.
#[inline(always)]
pub fn exp(x: f64) -> f64 {
    // A select rather than `x.min(MAX_ARG)`, which would turn NaN into MAX_ARG.
    let y = if x > MAX_ARG { MAX_ARG } else { x };
    exp_nonpositive_with::<false, false>(y)
}

/// `e^x` for `x <= 0`; positive arguments are taken as 0 (they never occur in a Gauss sum).
///
/// Relative error at most [`MAX_RELATIVE_ERROR`] for `x` in `[MIN_ARG, 0]`, 0 below
/// `MIN_ARG`. NaN gives 1 (it is clamped like a positive value).
#[inline(always)]
pub fn exp_nonpositive(x: f64) -> f64 {
    exp_nonpositive_with::<false, false>(x.min(0.0))
}

/// The kernel of [`exp`] without any clamp above (the caller guarantees `x <= MAX_ARG`,
/// usually `x <= 0`), with fused multiply-adds when `FMA` and a degree-7 polynomial when
/// `LOW` (relative error [`LOW_RELATIVE_ERROR`], for sums that need about 1e-8).
///
/// Use `FMA = true` only inside code compiled with the `fma` target feature: elsewhere
/// `mul_add` is a slow library call. The polynomial is evaluated by Estrin's scheme: four
/// levels of multiply-adds instead of twelve chained ones, which keeps the SIMD units busy
/// instead of waiting on latency. Returns 0 below `MIN_ARG` (and for `-inf`).
#[inline(always)]
pub fn exp_nonpositive_with<const FMA: bool, const LOW: bool>(x: f64) -> f64 {
    let t = fmadd::<FMA>(x, LOG2E, SHIFTER);
    let k = t - SHIFTER;
    let r = fmadd::<FMA>(k, -LN2_HI, x);
    // The low part of ln 2 matters below 1e-9 relative accuracy only: k ln2_lo < 1e-7 for
    // k < 700, and the terms where it is that large are below e^-20, so the absolute error
    // stays under 1e-10 -- the degree-7 path skips it.
    let r = if LOW { r } else { fmadd::<FMA>(k, -LN2_LO, r) };
    let r2 = r * r;
    let r4 = r2 * r2;
    let p = if LOW {
        // Taylor to degree 7: relative error < e^0.347 0.347^8 / 8! = 7.5e-9.
        let a0 = fmadd::<FMA>(r, 1.0, 1.0);
        let a1 = fmadd::<FMA>(r, 1.0 / 6.0, 0.5);
        let a2 = fmadd::<FMA>(r, 1.0 / 120.0, 1.0 / 24.0);
        let a3 = fmadd::<FMA>(r, 1.0 / 5_040.0, 1.0 / 720.0);
        let b0 = fmadd::<FMA>(a1, r2, a0);
        let b1 = fmadd::<FMA>(a3, r2, a2);
        fmadd::<FMA>(b1, r4, b0)
    } else {
        poly12::<FMA>(r, r2, r4)
    };
    // 2^k from the integer sitting in the low bits of t; garbage below MIN_ARG, masked.
    let scale = f64::from_bits(t.to_bits().wrapping_add(1023) << 52);
    let value = p * scale;
    if x < MIN_ARG { 0.0 } else { value }
}

/// e^r by Taylor to degree 12 (coefficients 1/i!), Estrin's scheme.
#[inline(always)]
fn poly12<const FMA: bool>(r: f64, r2: f64, r4: f64) -> f64 {
    let r8 = r4 * r4;
    let a0 = fmadd::<FMA>(r, 1.0, 1.0);
    let a1 = fmadd::<FMA>(r, 1.0 / 6.0, 0.5);
    let a2 = fmadd::<FMA>(r, 1.0 / 120.0, 1.0 / 24.0);
    let a3 = fmadd::<FMA>(r, 1.0 / 5_040.0, 1.0 / 720.0);
    let a4 = fmadd::<FMA>(r, 1.0 / 362_880.0, 1.0 / 40_320.0);
    let a5 = fmadd::<FMA>(r, 1.0 / 39_916_800.0, 1.0 / 3_628_800.0);
    let a6 = 1.0 / 479_001_600.0;
    let b0 = fmadd::<FMA>(a1, r2, a0);
    let b1 = fmadd::<FMA>(a3, r2, a2);
    let b2 = fmadd::<FMA>(a5, r2, a4);
    let c0 = fmadd::<FMA>(b1, r4, b0);
    let c1 = fmadd::<FMA>(a6, r4, b2);
    fmadd::<FMA>(c1, r8, c0)
}

/// `a * b + c`, fused (one rounding) when `FMA`, else a multiply then an add.
#[inline(always)]
pub fn fmadd<const FMA: bool>(a: f64, b: f64, c: f64) -> f64 {
    if FMA { a.mul_add(b, c) } else { a * b + c }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Worst relative error of `f` against `f64::exp` on `n + 1` points of `[lo, hi]`.
    fn worst(f: impl Fn(f64) -> f64, lo: f64, hi: f64, n: usize) -> f64 {
        (0..=n)
            .map(|i| {
                let x = lo + (hi - lo) * (i as f64) / (n as f64);
                let e = x.exp();
                ((f(x) - e) / e).abs()
            })
            .fold(0.0, f64::max)
    }

    #[test]
    fn matches_std_over_the_whole_range() {
        let w = worst(exp, MIN_ARG, MAX_ARG, 400_000);
        assert!(w <= MAX_RELATIVE_ERROR, "worst relative error {w}");
        let w = worst(exp_nonpositive, MIN_ARG, 0.0, 200_000);
        assert!(w <= MAX_RELATIVE_ERROR, "worst relative error {w}");
        // Near 0, where r is tiny and the polynomial is nearly 1.
        let w = worst(exp, -1e-6, 1e-6, 10_000);
        assert!(w <= MAX_RELATIVE_ERROR, "worst relative error near 0: {w}");
    }

    #[test]
    fn fused_and_low_paths_agree() {
        for i in 0..1000 {
            let x = -0.7 * i as f64;
            let a = exp_nonpositive_with::<true, false>(x);
            let b = exp_nonpositive(x);
            let low = exp_nonpositive_with::<false, true>(x);
            assert!(
                (low - b).abs() <= LOW_RELATIVE_ERROR * b.abs() + 1e-10,
                "{x}: degree 7 {low} vs {b}"
            );
            if x > -20.0 {
                assert!(
                    (low - b).abs() <= 1.2e-8 * b.abs(),
                    "{x}: degree 7 {low} vs {b}"
                );
            }
            assert!((a - b).abs() <= 4e-16 * b.abs(), "{x}: {a} vs {b}");
        }
    }

    #[test]
    fn edges() {
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-0.0), 1.0);
        assert_eq!(exp_nonpositive(0.0), 1.0);
        assert_eq!(exp(-1e6), 0.0);
        assert_eq!(exp(-709.0), 0.0);
        assert_eq!(exp(f64::NEG_INFINITY), 0.0);
        assert_eq!(exp_nonpositive(f64::NEG_INFINITY), 0.0);
        assert!(exp(f64::NAN).is_nan());
        assert_eq!(exp(1e6), exp(MAX_ARG));
        assert_eq!(exp(f64::INFINITY), exp(MAX_ARG));
        assert!(exp(MAX_ARG).is_finite());
        // Positive arguments are clamped to 0 by the non-positive variant.
        assert_eq!(exp_nonpositive(3.0), 1.0);
        assert!((exp_nonpositive(-1e-300) - 1.0).abs() < 1e-16);
        assert!((exp(1e-300) - 1.0).abs() < 1e-16);
    }
}
