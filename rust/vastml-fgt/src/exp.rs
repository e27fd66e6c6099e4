//! A branch-free `exp` for non-positive arguments that the compiler vectorises.
//!
//! `f64::exp` calls libm one value at a time; the direct Gauss sum spends nearly all of
//! its time there. This version uses the classic range reduction x = k ln 2 + r,
//! |r| <= ln 2 / 2, a degree-12 Taylor polynomial for e^r (truncation < 1e-16 relative)
//! evaluated by Estrin's scheme with fused multiply-adds, and builds 2^k from the exponent bits,
//! with no branch and no integer conversion, so a loop over it becomes SIMD code.

const LOG2E: f64 = std::f64::consts::LOG2_E;
/// ln 2 split in two (fdlibm): the high part has 32 trailing zero bits, so k * LN2_HI is exact.
const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
/// 1.5 * 2^52: adding it rounds to an integer kept in the low mantissa bits.
const SHIFTER: f64 = 6_755_399_441_055_744.0;
/// Below this, e^x is under the smallest normal double; we return 0 there.
const MIN_ARG: f64 = -708.0;

/// e^x for x <= 0 (values above 0 are clamped to 0, NaN gives garbage).
///
/// Relative error below 2e-16 for x in [-708, 0]; returns 0 for x < -708.
#[inline(always)]
pub fn exp_nonpositive(x: f64) -> f64 {
    exp_nonpositive_with::<false, false>(x.min(0.0))
}

/// [`exp_nonpositive`] without the clamp at 0 (the caller guarantees x <= 0), with fused
/// multiply-adds when `FMA` (only inside code compiled with the `fma` target feature:
/// elsewhere `mul_add` is a slow library call).
///
/// The polynomial is evaluated by Estrin's scheme: four levels of multiply-adds instead of
/// twelve chained ones, which keeps the SIMD units busy instead of waiting on latency.
#[inline(always)]
pub(crate) fn exp_nonpositive_with<const FMA: bool, const LOW: bool>(x: f64) -> f64 {
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

/// a * b + c, fused when `FMA`.
#[inline(always)]
pub(crate) fn fmadd<const FMA: bool>(a: f64, b: f64, c: f64) -> f64 {
    if FMA { a.mul_add(b, c) } else { a * b + c }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_libm_over_the_range() {
        let mut worst: f64 = 0.0;
        let n = 200_000;
        for i in 0..=n {
            let x = -708.0 * (i as f64) / (n as f64);
            let e = x.exp();
            let rel = ((exp_nonpositive(x) - e) / e).abs();
            worst = worst.max(rel);
        }
        assert!(worst < 8e-16, "worst relative error {worst}");
    }

    #[test]
    fn fused_path_agrees() {
        for i in 0..1000 {
            let x = -0.7 * i as f64;
            let a = exp_nonpositive_with::<true, false>(x);
            let b = exp_nonpositive(x);
            let low = exp_nonpositive_with::<false, true>(x);
            // degree 7 without ln2_lo: 7.5e-9 relative plus at most 1e-10 absolute
            assert!(
                (low - b).abs() <= 7.5e-9 * b.abs() + 1e-10,
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
        assert_eq!(exp_nonpositive(0.0), 1.0);
        assert_eq!(exp_nonpositive(-1e6), 0.0);
        assert_eq!(exp_nonpositive(-f64::INFINITY), 0.0);
        // Positive arguments are clamped to 0 (they never occur in a Gauss sum).
        assert_eq!(exp_nonpositive(3.0), 1.0);
        assert!((exp_nonpositive(-1e-300) - 1.0).abs() < 1e-16);
    }
}
