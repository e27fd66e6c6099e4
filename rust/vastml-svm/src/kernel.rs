//! Kernels of BSGD and LLSVM, evaluated from a dot product and two squared norms.
//!
//! Widths use scikit-learn's convention: `Gaussian { gamma }` is `exp(-gamma ||x - y||^2)`.
//! BudgetedSVM's `-g g` means `exp(-g/2 ||x - y||^2)`, i.e. `gamma = g / 2` here.

use crate::error::{SvmError, invalid, parse_choice};

/// A kernel function.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kernel {
    /// `exp(-gamma ||x - y||^2)`.
    Gaussian {
        /// Width `gamma > 0`.
        gamma: f64,
    },
    /// `exp(-gamma ||x - y||)`.
    Exponential {
        /// Width `gamma > 0`.
        gamma: f64,
    },
    /// `(x.y + coef)^degree`.
    Polynomial {
        /// Degree (>= 1).
        degree: i32,
        /// Offset.
        coef: f64,
    },
    /// `x.y`.
    Linear,
    /// `tanh(slope x.y + coef)`.
    Sigmoid {
        /// Slope.
        slope: f64,
        /// Offset.
        coef: f64,
    },
}

/// A kernel's family, as scikit-learn spells it (`"rbf"`, `"exponential"`, `"poly"`,
/// `"linear"`, `"sigmoid"`; `"gaussian"` and `"polynomial"` too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelKind {
    /// [`Kernel::Gaussian`].
    Gaussian,
    /// [`Kernel::Exponential`].
    Exponential,
    /// [`Kernel::Polynomial`].
    Polynomial,
    /// [`Kernel::Linear`].
    Linear,
    /// [`Kernel::Sigmoid`].
    Sigmoid,
}

impl std::str::FromStr for KernelKind {
    type Err = SvmError;
    fn from_str(s: &str) -> Result<Self, SvmError> {
        use KernelKind as K;
        parse_choice(
            s,
            "kernel",
            &[
                ("rbf", K::Gaussian),
                ("gaussian", K::Gaussian),
                ("exponential", K::Exponential),
                ("poly", K::Polynomial),
                ("polynomial", K::Polynomial),
                ("linear", K::Linear),
                ("sigmoid", K::Sigmoid),
            ],
        )
    }
}

impl Kernel {
    /// The kernel of family `kind` with scikit-learn's parameters: `gamma` is the width of
    /// the Gaussian and exponential kernels and the slope of the sigmoid, `coef0` the offset
    /// of the polynomial and sigmoid; the parameters a family does not use are ignored.
    ///
    /// # Errors
    /// As [`Kernel::validate`].
    pub fn new(kind: KernelKind, gamma: f64, degree: i32, coef0: f64) -> Result<Self, SvmError> {
        let kernel = match kind {
            KernelKind::Gaussian => Kernel::Gaussian { gamma },
            KernelKind::Exponential => Kernel::Exponential { gamma },
            KernelKind::Polynomial => Kernel::Polynomial {
                degree,
                coef: coef0,
            },
            KernelKind::Linear => Kernel::Linear,
            KernelKind::Sigmoid => Kernel::Sigmoid {
                slope: gamma,
                coef: coef0,
            },
        };
        kernel.validate()?;
        Ok(kernel)
    }

    /// Checks the parameters.
    ///
    /// # Errors
    /// [`SvmError::InvalidParameter`] for a non-positive width, degree < 1 or non-finite values.
    pub fn validate(&self) -> Result<(), SvmError> {
        match *self {
            Kernel::Gaussian { gamma } | Kernel::Exponential { gamma } => {
                if !(gamma.is_finite() && gamma > 0.0) {
                    return Err(invalid("gamma", format!("must be positive, got {gamma}")));
                }
            }
            Kernel::Polynomial { degree, coef } => {
                if degree < 1 || !coef.is_finite() {
                    return Err(invalid("degree", "must be >= 1 with a finite coef"));
                }
            }
            Kernel::Linear => {}
            Kernel::Sigmoid { slope, coef } => {
                if !(slope.is_finite() && coef.is_finite()) {
                    return Err(invalid("coef", "sigmoid parameters must be finite"));
                }
            }
        }
        Ok(())
    }

    /// `k(x, y)` from `x.y`, `||x||^2` and `||y||^2`.
    #[inline]
    pub fn eval(&self, dot: f64, xx: f64, yy: f64) -> f64 {
        match *self {
            Kernel::Gaussian { gamma } => (-gamma * (xx + yy - 2.0 * dot).max(0.0)).exp(),
            Kernel::Exponential { gamma } => (-gamma * (xx + yy - 2.0 * dot).max(0.0).sqrt()).exp(),
            Kernel::Polynomial { degree, coef } => (dot + coef).powi(degree),
            Kernel::Linear => dot,
            Kernel::Sigmoid { slope, coef } => (slope * dot + coef).tanh(),
        }
    }
}

/// `exp(x)` for every element, in place, with [`vastml_core::exp::exp`] (branch-free, so the
/// compiler vectorises it; libm's `exp` is a call per element). Relative error below
/// [`vastml_core::exp::MAX_RELATIVE_ERROR`] for `x` in `[-708, 709]`; results underflow to 0
/// below -708, and inputs above 709 saturate at `exp(709)`.
pub fn exp_in_place(xs: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    if crate::data::has_avx2() {
        // SAFETY: the CPU supports AVX2 (checked at run time just above).
        unsafe { exp_avx2(xs) };
        return;
    }
    exp_generic(xs);
}

/// [`exp_in_place`] compiled for 256-bit vectors (same operations, same results).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn exp_avx2(xs: &mut [f64]) {
    exp_generic(xs);
}

#[inline(always)]
fn exp_generic(xs: &mut [f64]) {
    for v in xs.iter_mut() {
        *v = vastml_core::exp::exp(*v);
    }
}

#[cfg(test)]
mod tests {
    use super::{exp_generic, exp_in_place};

    #[test]
    fn fast_exp_matches_libm() {
        let mut xs: Vec<f64> = (0..20_001)
            .map(|i| -708.0 + i as f64 * (1417.0 / 20_000.0))
            .collect();
        xs.extend([
            0.0, -0.0, 1e-300, -1e-300, 0.5, -0.5, 1.0, -1.0, 700.0, -707.9,
        ]);
        let want: Vec<f64> = xs.iter().map(|x| x.exp()).collect();
        let mut got = xs.clone();
        exp_in_place(&mut got);
        for ((x, g), w) in xs.iter().zip(&got).zip(&want) {
            assert!((g - w).abs() <= 2e-15 * w.abs(), "exp({x}) = {g}, libm {w}");
        }
        let mut tiny = [-709.0, -800.0, -1e9, f64::NEG_INFINITY];
        exp_in_place(&mut tiny);
        assert_eq!(tiny, [0.0; 4]);
        // The AVX2 build and the baseline build compute the same values.
        let mut base = xs.clone();
        exp_generic(&mut base);
        assert_eq!(got, base);
    }
}
