//! The error type of the crate.

use vastml_fgt::FgtError;

/// Everything that can go wrong in the embedding kernels.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
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
    /// The caller asked the computation to stop (for example Ctrl-C in Python).
    #[error("cancelled")]
    Cancelled,
    /// A progress hook asked the computation to stop (a callback returned True in Python).
    #[error("stopped by a progress hook")]
    Stopped,
    /// An error of the fast Gauss transform underneath.
    #[error(transparent)]
    Fgt(#[from] FgtError),
}

impl From<vastml_core::Halt> for EmbedError {
    fn from(h: vastml_core::Halt) -> Self {
        match h {
            vastml_core::Halt::Cancelled => EmbedError::Cancelled,
            vastml_core::Halt::Stopped => EmbedError::Stopped,
        }
    }
}

impl From<vastml_core::Error> for EmbedError {
    /// The shared input checks' errors, as this crate reports them.
    fn from(e: vastml_core::Error) -> Self {
        use vastml_core::Error as E;
        match e {
            E::InvalidParameter { name, reason } => EmbedError::InvalidParameter { name, reason },
            E::ShapeMismatch {
                name,
                expected,
                actual,
            } => EmbedError::ShapeMismatch(format!(
                "`{name}`: expected length {expected}, got {actual}"
            )),
            E::NonFinite { name, .. } => EmbedError::NonFinite { name },
            E::Empty { name } => EmbedError::ShapeMismatch(format!("`{name}` is empty")),
        }
    }
}

/// Result alias of the crate.
pub type Result<T> = std::result::Result<T, EmbedError>;

pub(crate) fn invalid(name: &'static str, reason: impl Into<String>) -> EmbedError {
    EmbedError::InvalidParameter {
        name,
        reason: reason.into(),
    }
}

pub(crate) fn check_finite(values: &[f64], name: &'static str) -> Result<()> {
    if values.iter().all(|v| v.is_finite()) {
        Ok(())
    } else {
        Err(EmbedError::NonFinite { name })
    }
}
