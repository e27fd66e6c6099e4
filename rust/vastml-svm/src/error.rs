//! The crate's error type.

use thiserror::Error;

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
