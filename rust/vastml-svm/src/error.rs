//! The crate's error type.

use thiserror::Error;
use vastml_core::Halt;

/// Everything that can go wrong when training or applying a classifier of this crate.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum SvmError {
    /// A scalar parameter is outside its valid range.
    #[error("invalid parameter `{name}`: {reason}")]
    InvalidParameter {
        /// Name of the offending parameter.
        name: &'static str,
        /// Human-readable explanation.
        reason: String,
    },
    /// An array does not have the length or structure implied by the other arguments.
    #[error("shape mismatch for `{name}`: {reason}")]
    ShapeMismatch {
        /// Name of the offending argument.
        name: &'static str,
        /// What was expected and what was passed.
        reason: String,
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
    /// The computation was cancelled through its cancel flag.
    #[error("cancelled")]
    Cancelled,
}

pub(crate) fn invalid(name: &'static str, reason: impl Into<String>) -> SvmError {
    SvmError::InvalidParameter {
        name,
        reason: reason.into(),
    }
}

pub(crate) fn shape(name: &'static str, reason: impl Into<String>) -> SvmError {
    SvmError::ShapeMismatch {
        name,
        reason: reason.into(),
    }
}

impl From<Halt> for SvmError {
    /// A cancelled loop is [`SvmError::Cancelled`]. A loop stopped by its progress hook is not
    /// an error for the drivers that report ([`crate::Amm::fit`] and the others say so in
    /// their result); a loop that cannot stop cleanly maps it to `Cancelled` too.
    fn from(_: Halt) -> Self {
        SvmError::Cancelled
    }
}

impl From<vastml_spatial::SpatialError> for SvmError {
    fn from(e: vastml_spatial::SpatialError) -> Self {
        use vastml_spatial::SpatialError as S;
        match e {
            S::InvalidParameter { name, reason } => SvmError::InvalidParameter { name, reason },
            S::NonFinite { name } => SvmError::NonFinite { name },
            S::Empty { name } => SvmError::Empty { name },
            S::ShapeMismatch {
                name,
                expected,
                actual,
            } => shape(name, format!("expected length {expected}, got {actual}")),
            S::Cancelled => SvmError::Cancelled,
            other => invalid("X", other.to_string()),
        }
    }
}
