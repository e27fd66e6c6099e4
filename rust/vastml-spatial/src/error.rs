//! The crate's error type.

use thiserror::Error;

/// Everything that can go wrong when building or querying the spatial structures of this crate.
///
/// Every public constructor and checked query returns this error instead of panicking on bad
/// input.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SpatialError {
    /// A scalar parameter is outside its valid range (for example `dim == 0`, `leaf_size == 0`,
    /// a seed index past the end, or a negative radius).
    #[error("invalid parameter `{name}`: {reason}")]
    InvalidParameter {
        /// Name of the offending parameter.
        name: &'static str,
        /// Human-readable explanation.
        reason: String,
    },
    /// A slice does not have the length implied by the other arguments.
    #[error("shape mismatch for `{name}`: expected length {expected}, got {actual}")]
    ShapeMismatch {
        /// Name of the offending argument.
        name: &'static str,
        /// Description of the expected length (for example `"3"` or `"a multiple of dim = 3"`).
        expected: String,
        /// The length that was actually passed.
        actual: usize,
    },
    /// An input contains NaN or an infinity.
    #[error("`{name}` contains non-finite values (NaN or infinity)")]
    NonFinite {
        /// Name of the offending argument.
        name: &'static str,
    },
    /// An input that must hold at least one element is empty.
    #[error("`{name}` is empty")]
    Empty {
        /// Name of the offending argument.
        name: &'static str,
    },
    /// The caller raised the cancel flag (for example Ctrl-C in Python).
    #[error("cancelled")]
    Cancelled,
}

impl From<vastml_core::Error> for SpatialError {
    /// The shared input checks' errors, as this crate reports them (the same four kinds).
    fn from(e: vastml_core::Error) -> Self {
        use vastml_core::Error as E;
        match e {
            E::InvalidParameter { name, reason } => SpatialError::InvalidParameter { name, reason },
            E::ShapeMismatch {
                name,
                expected,
                actual,
            } => SpatialError::ShapeMismatch {
                name,
                expected,
                actual,
            },
            E::NonFinite { name, .. } => SpatialError::NonFinite { name },
            E::Empty { name } => SpatialError::Empty { name },
        }
    }
}
