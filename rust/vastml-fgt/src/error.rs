//! The error type of the crate.

use vastml_spatial::SpatialError;

/// Everything that can go wrong in a Gauss transform.
#[derive(Debug, thiserror::Error)]
pub enum FgtError {
    /// A parameter is outside its domain (`name` is the parameter's name).
    #[error("invalid parameter `{name}`: {reason}")]
    InvalidParameter {
        /// Name of the parameter.
        name: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// Two inputs disagree in shape.
    #[error("shape mismatch: {0}")]
    ShapeMismatch(String),
    /// An input holds NaN or infinity.
    #[error("`{name}` contains NaN or infinite values")]
    NonFinite {
        /// Name of the input.
        name: &'static str,
    },
    /// An input is empty where data is needed.
    #[error("`{name}` is empty")]
    Empty {
        /// Name of the input.
        name: &'static str,
    },
    /// The caller asked the computation to stop (for example Ctrl-C in Python).
    #[error("cancelled")]
    Cancelled,
    /// An error of the spatial structures underneath.
    #[error(transparent)]
    Spatial(#[from] SpatialError),
}

impl From<vastml_core::Error> for FgtError {
    /// The shared input checks' errors, as this crate reports them.
    fn from(e: vastml_core::Error) -> Self {
        use vastml_core::Error as E;
        match e {
            E::InvalidParameter { name, reason } => FgtError::InvalidParameter { name, reason },
            E::ShapeMismatch {
                name,
                expected,
                actual,
            } => FgtError::ShapeMismatch(format!(
                "`{name}`: expected length {expected}, got {actual}"
            )),
            E::NonFinite { name, .. } => FgtError::NonFinite { name },
            E::Empty { name } => FgtError::Empty { name },
        }
    }
}

/// Result alias of the crate.
pub type Result<T> = std::result::Result<T, FgtError>;

pub(crate) fn invalid(name: &'static str, reason: impl Into<String>) -> FgtError {
    FgtError::InvalidParameter {
        name,
        reason: reason.into(),
    }
}
