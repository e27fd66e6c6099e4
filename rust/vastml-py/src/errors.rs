//! Mapping of the pure-Rust crates' typed errors to Python exceptions.
//!
//! Parameter, shape and value errors become `ValueError` (the message names the parameter);
//! an allocation sized by a parameter that cannot be made becomes `MemoryError`;
//! everything else becomes `vastml.VastmlError`. A cancelled computation becomes
//! `KeyboardInterrupt` (it is only ever cancelled because of Ctrl-C).

use pyo3::exceptions::{PyException, PyKeyboardInterrupt, PyMemoryError, PyValueError};
use pyo3::{PyErr, create_exception};
use vastml_embed::EmbedError;
use vastml_fgt::FgtError;
use vastml_order::OrderError;
use vastml_spatial::SpatialError;
use vastml_svm::SvmError;

create_exception!(
    vastml,
    VastmlError,
    PyException,
    "Base class of vastml's own errors (parameter and shape errors are ValueError)."
);

/// Conversion of a crate error into the Python exception users should see.
pub trait ToPyErr {
    /// The Python exception for this error.
    fn to_pyerr(self) -> PyErr;
}

impl ToPyErr for PyErr {
    fn to_pyerr(self) -> PyErr {
        self
    }
}

impl ToPyErr for SpatialError {
    fn to_pyerr(self) -> PyErr {
        match self {
            SpatialError::InvalidParameter { .. }
            | SpatialError::ShapeMismatch { .. }
            | SpatialError::NonFinite { .. }
            | SpatialError::Empty { .. } => PyValueError::new_err(self.to_string()),
            SpatialError::Cancelled => PyKeyboardInterrupt::new_err("cancelled"),
            #[allow(unreachable_patterns)]
            other => VastmlError::new_err(other.to_string()),
        }
    }
}

impl ToPyErr for FgtError {
    fn to_pyerr(self) -> PyErr {
        match self {
            FgtError::InvalidParameter { .. }
            | FgtError::ShapeMismatch(_)
            | FgtError::NonFinite { .. }
            | FgtError::Empty { .. } => PyValueError::new_err(self.to_string()),
            FgtError::Cancelled => PyKeyboardInterrupt::new_err("cancelled"),
            FgtError::Spatial(e) => e.to_pyerr(),
        }
    }
}

impl ToPyErr for SvmError {
    fn to_pyerr(self) -> PyErr {
        match self {
            SvmError::Cancelled => PyKeyboardInterrupt::new_err("cancelled"),
            SvmError::InvalidParameter { .. }
            | SvmError::ShapeMismatch { .. }
            | SvmError::NonFinite { .. }
            | SvmError::Empty { .. } => PyValueError::new_err(self.to_string()),
            #[allow(unreachable_patterns)]
            other => VastmlError::new_err(other.to_string()),
        }
    }
}

impl ToPyErr for OrderError {
    fn to_pyerr(self) -> PyErr {
        match self {
            OrderError::InvalidParameter { .. } | OrderError::ShapeMismatch(_) => {
                PyValueError::new_err(self.to_string())
            }
            OrderError::OutOfMemory { .. } => PyMemoryError::new_err(self.to_string()),
            OrderError::Cancelled => PyKeyboardInterrupt::new_err("cancelled"),
        }
    }
}

impl ToPyErr for EmbedError {
    fn to_pyerr(self) -> PyErr {
        match self {
            EmbedError::InvalidParameter { .. }
            | EmbedError::ShapeMismatch(_)
            | EmbedError::NonFinite { .. } => PyValueError::new_err(self.to_string()),
            EmbedError::Cancelled => PyKeyboardInterrupt::new_err("cancelled"),
            EmbedError::Stopped => VastmlError::new_err(self.to_string()),
            EmbedError::Fgt(e) => e.to_pyerr(),
        }
    }
}
