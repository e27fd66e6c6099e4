//! Kernels of BSGD and LLSVM, evaluated from a dot product and two squared norms.
//!
//! Widths use scikit-learn's convention: `Gaussian { gamma }` is `exp(-gamma ||x - y||^2)`.
//! BudgetedSVM's `-g g` means `exp(-g/2 ||x - y||^2)`, i.e. `gamma = g / 2` here.

use crate::error::{SvmError, invalid};

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

impl Kernel {
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
