//! The shared error vocabulary of the input checks.

use thiserror::Error;

/// What a shared input check ([`Points`](crate::Points), [`Csr`](crate::Csr)) found wrong.
///
/// A wrong length is a [`Error::ShapeMismatch`]; a wrong structure that is not a length (row
/// pointers that decrease, a column index out of range) an [`Error::InvalidParameter`].
///
/// Every variant names the offending argument, so the crates can turn it into their own
/// error type (each implements `From<vastml_core::Error>`) without losing which argument and
/// which check it was. The enum is exhaustive on purpose: a new variant must be mapped in
/// every crate's conversion.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// A scalar parameter is outside its domain (for example `dim == 0`).
    #[error("invalid parameter `{name}`: {reason}")]
    InvalidParameter {
        /// Name of the parameter.
        name: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A slice does not have the length implied by the other arguments.
    #[error("shape mismatch for `{name}`: expected length {expected}, got {actual}")]
    ShapeMismatch {
        /// Name of the offending argument.
        name: &'static str,
        /// The length expected (for example `"a multiple of dim = 3"`).
        expected: String,
        /// The length found.
        actual: usize,
    },
    /// An input holds NaN or an infinity; `row` and `column` locate the first one.
    #[error("`{name}` contains a non-finite value (NaN or infinity) at row {row}, column {column}")]
    NonFinite {
        /// Name of the offending argument.
        name: &'static str,
        /// Row of the first non-finite value.
        row: usize,
        /// Column of the first non-finite value.
        column: usize,
    },
    /// An input that must hold at least one row is empty.
    #[error("`{name}` is empty")]
    Empty {
        /// Name of the offending argument.
        name: &'static str,
    },
}

impl Error {
    /// The name of the argument the error is about.
    pub fn name(&self) -> &'static str {
        match self {
            Error::InvalidParameter { name, .. }
            | Error::ShapeMismatch { name, .. }
            | Error::NonFinite { name, .. }
            | Error::Empty { name } => name,
        }
    }
}

/// Result alias of the shared checks.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_argument_and_the_check() {
        let e = Error::NonFinite {
            name: "X",
            row: 2,
            column: 1,
        };
        assert_eq!(e.name(), "X");
        let text = e.to_string();
        assert!(
            text.contains("`X`") && text.contains("row 2, column 1"),
            "{text}"
        );
        let e = Error::ShapeMismatch {
            name: "indptr",
            expected: "at least 1".into(),
            actual: 0,
        };
        assert_eq!(
            e.to_string(),
            "shape mismatch for `indptr`: expected length at least 1, got 0"
        );
        assert_eq!(
            Error::Empty { name: "points" }.to_string(),
            "`points` is empty"
        );
    }
}
