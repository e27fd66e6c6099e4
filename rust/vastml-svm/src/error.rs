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

/// The value `s` stands for in `table` of (spelling, value) pairs; anything else is an
/// [`SvmError::InvalidParameter`] naming `param` and listing the spellings.
pub(crate) fn parse_choice<T: Copy>(
    s: &str,
    param: &'static str,
    table: &[(&str, T)],
) -> Result<T, SvmError> {
    let found = table.iter().find(|(spelling, _)| *spelling == s);
    found.map(|&(_, v)| v).ok_or_else(|| {
        let spellings: Vec<String> = table.iter().map(|(t, _)| format!("'{t}'")).collect();
        let reason = format!("must be one of {}, got {s:?}", spellings.join(", "));
        invalid(param, reason)
    })
}

impl From<Halt> for SvmError {
    /// A cancelled loop is [`SvmError::Cancelled`]. A loop stopped by its progress hook is not
    /// an error for the drivers that report ([`crate::Amm::fit`] and the others say so in
    /// their result); a loop that cannot stop cleanly maps it to `Cancelled` too.
    fn from(_: Halt) -> Self {
        SvmError::Cancelled
    }
}

impl From<vastml_core::Error> for SvmError {
    /// A failed input check of `vastml_core` ([`vastml_core::Points`], [`vastml_core::Csr`]).
    fn from(e: vastml_core::Error) -> Self {
        use vastml_core::Error as E;
        match e {
            E::InvalidParameter { name, reason } => SvmError::InvalidParameter { name, reason },
            E::NonFinite { name, .. } => SvmError::NonFinite { name },
            E::Empty { name } => SvmError::Empty { name },
            E::ShapeMismatch {
                name,
                expected,
                actual,
            } => shape(name, format!("expected length {expected}, got {actual}")),
        }
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
