//! What every way of computing the repulsive kernel sums shares: the [`Kernel`], the
//! [`KernelSums`] they return and the check of the embedding coordinates.
//!
//! [`crate::nbody`] (exact, Barnes-Hut, FGT) and [`crate::interp`] (grid interpolation) both
//! build on this module, and neither on the other's internals.

use std::str::FromStr;

use vastml_core::Points;
use vastml_core::exp::exp_nonpositive;

use crate::error::{EmbedError, Result, invalid};

/// The similarity kernel of the embedding, a function of the squared distance t.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// K(t) = exp(−t) (EE, SNE, symmetric SNE).
    Gaussian,
    /// K(t) = 1 / (1 + t) (t-SNE).
    StudentT,
}

impl Kernel {
    /// K(t).
    #[inline]
    pub fn value(self, t: f64) -> f64 {
        match self {
            Kernel::Gaussian => exp_nonpositive(-t),
            Kernel::StudentT => 1.0 / (1.0 + t),
        }
    }

    /// K(t)^q with q the power of the gradient sums (1 Gaussian, 2 Student-t).
    #[inline]
    pub(crate) fn powered(self, k: f64) -> f64 {
        match self {
            Kernel::Gaussian => k,
            Kernel::StudentT => k * k,
        }
    }
}

impl FromStr for Kernel {
    type Err = EmbedError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "gaussian" => Ok(Kernel::Gaussian),
            "student" | "student-t" => Ok(Kernel::StudentT),
            _ => Err(invalid(
                "kernel",
                format!("unknown kernel {s:?}; use gaussian or student"),
            )),
        }
    }
}

/// The three sums of [`crate::nbody`]'s module docs, per target.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelSums {
    /// Σ v K per target.
    pub s0: Vec<f64>,
    /// Σ v K^q per target.
    pub s1: Vec<f64>,
    /// Σ v K^q x_m per target, n x d row-major.
    pub sx: Vec<f64>,
}

/// Checks the embedding coordinates `x` (n x `dim`, row-major, named `X`) through the one
/// point-set check of the crates; returns n. No points is allowed: every sum over them is
/// empty (and zero).
///
/// # Errors
/// [`EmbedError::InvalidParameter`] for `dim == 0`, [`EmbedError::ShapeMismatch`] for a length
/// that is not a multiple of `dim`, [`EmbedError::NonFinite`] for NaN or infinity.
pub(crate) fn check_points(x: &[f64], dim: usize) -> Result<usize> {
    Ok(Points::new_or_empty("X", x, dim)?.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_and_their_names() {
        assert_eq!("gaussian".parse::<Kernel>().unwrap(), Kernel::Gaussian);
        assert_eq!("student-t".parse::<Kernel>().unwrap(), Kernel::StudentT);
        assert!("cauchy".parse::<Kernel>().is_err());
        for t in [0.0, 0.5, 3.0, 50.0] {
            let g = Kernel::Gaussian.value(t);
            assert!((g - (-t).exp()).abs() <= 1e-15 * (-t).exp());
            assert_eq!(Kernel::Gaussian.powered(g), g);
            let s = Kernel::StudentT.value(t);
            assert_eq!(s, 1.0 / (1.0 + t));
            assert_eq!(Kernel::StudentT.powered(s), s * s);
        }
    }

    #[test]
    fn coordinates_are_checked_once_for_all_methods() {
        assert_eq!(check_points(&[0.0; 6], 3).unwrap(), 2);
        assert!(matches!(
            check_points(&[0.0; 6], 0),
            Err(EmbedError::InvalidParameter { name: "dim", .. })
        ));
        assert!(matches!(
            check_points(&[0.0; 5], 3),
            Err(EmbedError::ShapeMismatch(_))
        ));
        assert_eq!(check_points(&[], 2).unwrap(), 0);
        assert!(matches!(
            check_points(&[0.0, f64::NAN], 2),
            Err(EmbedError::NonFinite { name: "X" })
        ));
    }
}
