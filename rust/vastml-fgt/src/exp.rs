//! A branch-free `exp` for non-positive arguments that the compiler vectorises.
//!
//! `f64::exp` calls libm one value at a time; the direct Gauss sum spends nearly all of
//! its time there. This version uses the classic range reduction x = k ln 2 + r,
//! |r| <= ln 2 / 2, a degree-12 Taylor polynomial for e^r (truncation < 1e-16 relative)
//! evaluated by Horner with fused multiply-adds, and builds 2^k from the exponent bits,
//! with no branch and no integer conversion, so a loop over it becomes SIMD code.

const LOG2E: f64 = std::f64::consts::LOG2_E;
const LN2_HI: f64 = 6.931_471_803_691_238_2e-1;
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
/// 1.5 * 2^52: adding it rounds to an integer kept in the low mantissa bits.
const SHIFTER: f64 = 6_755_399_441_055_744.0;
/// Below this, e^x is under the smallest normal double; we return 0 there.
const MIN_ARG: f64 = -708.0;

/// e^x for x <= 0 (values above 0 are clamped to 0, NaN gives garbage).
///
/// Relative error below 2e-16 for x in [-708, 0]; returns 0 for x < -708.
#[inline(always)]
pub fn exp_nonpositive(x: f64) -> f64 {
    exp_nonpositive_with::<false>(x)
}

/// [`exp_nonpositive`] with fused multiply-adds when `FMA` (only inside code compiled
/// with the `fma` target feature: elsewhere `mul_add` is a slow library call).
#[inline(always)]
pub(crate) fn exp_nonpositive_with<const FMA: bool>(x_in: f64) -> f64 {
    let x = x_in.clamp(MIN_ARG, 0.0);
    let t = fmadd::<FMA>(x, LOG2E, SHIFTER);
    let k = t - SHIFTER;
    let r = fmadd::<FMA>(k, -LN2_HI, x);
    let r = fmadd::<FMA>(k, -LN2_LO, r);
    // e^r, |r| <= 0.347, Taylor to degree 12.
    let mut p = 1.0 / 479_001_600.0;
    p = fmadd::<FMA>(p, r, 1.0 / 39_916_800.0);
    p = fmadd::<FMA>(p, r, 1.0 / 3_628_800.0);
    p = fmadd::<FMA>(p, r, 1.0 / 362_880.0);
    p = fmadd::<FMA>(p, r, 1.0 / 40_320.0);
    p = fmadd::<FMA>(p, r, 1.0 / 5_040.0);
    p = fmadd::<FMA>(p, r, 1.0 / 720.0);
    p = fmadd::<FMA>(p, r, 1.0 / 120.0);
    p = fmadd::<FMA>(p, r, 1.0 / 24.0);
    p = fmadd::<FMA>(p, r, 1.0 / 6.0);
    p = fmadd::<FMA>(p, r, 0.5);
    p = fmadd::<FMA>(p, r, 1.0);
    p = fmadd::<FMA>(p, r, 1.0);
    // 2^k from the integer sitting in the low bits of t (k in [-1022, 0]).
    let scale = f64::from_bits(t.to_bits().wrapping_add(1023) << 52);
    let value = p * scale;
    if x_in < MIN_ARG { 0.0 } else { value }
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
        assert!(worst < 4e-16, "worst relative error {worst}");
    }

    #[test]
    fn fused_path_agrees() {
        for i in 0..1000 {
            let x = -0.7 * i as f64;
            let a = exp_nonpositive_with::<true>(x);
            let b = exp_nonpositive(x);
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
