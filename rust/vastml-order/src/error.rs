//! The error type of the crate.

use thiserror::Error;

/// Errors of `vastml-order`.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum OrderError {
    /// A parameter is out of its domain; `name` is the parameter.
    #[error("invalid `{name}`: {reason}")]
    InvalidParameter {
        /// Parameter name.
        name: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// Array shapes that do not fit together.
    #[error("shape mismatch: {0}")]
    ShapeMismatch(String),
    /// The computation was cancelled through its cancel flag.
    #[error("cancelled")]
    Cancelled,
}

/// Shorthand for an [`OrderError::InvalidParameter`].
pub(crate) fn invalid(name: &'static str, reason: impl Into<String>) -> OrderError {
    OrderError::InvalidParameter {
        name,
        reason: reason.into(),
    }
}
