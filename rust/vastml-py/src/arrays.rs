//! Borrowing NumPy arrays as Rust slices, safely.

use numpy::{PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

/// A C-contiguous float64 2-D array as a row-major slice, with its column count.
///
/// F-ordered or strided arrays are refused (their raw slice would be silently transposed
/// or wrong); the Python wrappers pass `np.ascontiguousarray(x, dtype=np.float64)`.
pub fn rows<'a>(a: &'a PyReadonlyArray2<'_, f64>, name: &str) -> PyResult<(&'a [f64], usize)> {
    if !a.is_c_contiguous() {
        return Err(PyTypeError::new_err(format!(
            "`{name}` must be a C-contiguous float64 array (use numpy.ascontiguousarray)"
        )));
    }
    let cols = a.shape()[1];
    let s = a
        .as_slice()
        .map_err(|e| PyTypeError::new_err(format!("`{name}`: {e}")))?;
    Ok((s, cols))
}

/// A contiguous float64 1-D array as a slice.
pub fn vector<'a>(a: &'a numpy::PyReadonlyArray1<'_, f64>, name: &str) -> PyResult<&'a [f64]> {
    a.as_slice()
        .map_err(|_| PyTypeError::new_err(format!("`{name}` must be a contiguous float64 array")))
}
