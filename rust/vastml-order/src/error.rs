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
    /// An allocation sized by `name` could not be made (`bytes` were asked for).
    #[error("cannot allocate {bytes} bytes for `{name}`: not enough memory")]
    OutOfMemory {
        /// The parameter that sized the allocation.
        name: &'static str,
        /// The size asked for.
        bytes: usize,
    },
    /// The computation was cancelled through its cancel flag.
    #[error("cancelled")]
    Cancelled,
}

impl From<vastml_core::Error> for OrderError {
    /// The shared input checks' errors, as this crate reports them (a non-finite value is an
    /// invalid parameter whose reason says where it is).
    fn from(e: vastml_core::Error) -> Self {
        use vastml_core::Error as E;
        match e {
            E::InvalidParameter { name, reason } => invalid(name, reason),
            E::ShapeMismatch {
                name,
                expected,
                actual,
            } => OrderError::ShapeMismatch(format!(
                "`{name}`: expected length {expected}, got {actual}"
            )),
            E::NonFinite { name, row, column } => invalid(
                name,
                format!("non-finite value (NaN or infinity) at row {row}, column {column}"),
            ),
            E::Empty { name } => invalid(name, "must not be empty"),
        }
    }
}

/// Shorthand for an [`OrderError::InvalidParameter`].
pub(crate) fn invalid(name: &'static str, reason: impl Into<String>) -> OrderError {
    OrderError::InvalidParameter {
        name,
        reason: reason.into(),
    }
}

/// A vector of `len` copies of `value`, or [`OrderError::OutOfMemory`] naming `name` when the
/// allocation fails or its size overflows (instead of aborting the process).
pub(crate) fn try_filled<T: Clone>(
    len: usize,
    value: T,
    name: &'static str,
) -> Result<Vec<T>, OrderError> {
    let bytes = len.saturating_mul(std::mem::size_of::<T>().max(1));
    let mut v = Vec::new();
    v.try_reserve_exact(len)
        .map_err(|_| OrderError::OutOfMemory { name, bytes })?;
    v.resize(len, value);
    Ok(v)
}

/// `a * b`, or [`OrderError::InvalidParameter`] naming `name` when it overflows (a size
/// absurd on its face).
pub(crate) fn checked_cells(a: usize, b: usize, name: &'static str) -> Result<usize, OrderError> {
    a.checked_mul(b)
        .ok_or_else(|| invalid(name, format!("{a} x {b} cells overflow the address space")))
}

/// `FromStr` for an option enum: each spelling maps to a variant; anything else is an
/// [`OrderError::InvalidParameter`] naming `param` and listing the spellings.
macro_rules! parse_option {
    ($ty:ty, $param:literal, { $($text:literal => $variant:expr),+ $(,)? }) => {
        impl std::str::FromStr for $ty {
            type Err = $crate::error::OrderError;
            fn from_str(s: &str) -> Result<Self, $crate::error::OrderError> {
                match s {
                    $($text => Ok($variant),)+
                    o => Err($crate::error::invalid(
                        $param,
                        format!(
                            "must be one of {}, got {o:?}",
                            [$(concat!("'", $text, "'")),+].join(", ")
                        ),
                    )),
                }
            }
        }
    };
}

pub(crate) use parse_option;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurd_allocations_are_errors_not_aborts() {
        let e = try_filled(usize::MAX / 2, 0u64, "size").unwrap_err();
        assert!(matches!(e, OrderError::OutOfMemory { name: "size", .. }));
        assert!(checked_cells(1 << 33, 1 << 33, "size").is_err());
        assert_eq!(try_filled(3, 7u8, "size").unwrap(), vec![7, 7, 7]);
    }
}
