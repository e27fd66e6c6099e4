//! Borrowing NumPy arrays as Rust slices, safely, and handing results back as NumPy arrays.

use numpy::{IntoPyArray, PyArray2, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
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

/// As [`rows`], with the row count too, read from the array's shape: the bindings need no
/// `len / cols` division (and no special case for zero columns).
#[allow(dead_code)] // the bindings adopt it one by one (they divide `len` by `cols` today)
pub fn rows_n<'a>(
    a: &'a PyReadonlyArray2<'_, f64>,
    name: &str,
) -> PyResult<(&'a [f64], usize, usize)> {
    let (s, cols) = rows(a, name)?;
    Ok((s, a.shape()[0], cols))
}

/// A contiguous float64 1-D array as a slice.
pub fn vector<'a>(a: &'a numpy::PyReadonlyArray1<'_, f64>, name: &str) -> PyResult<&'a [f64]> {
    a.as_slice()
        .map_err(|_| PyTypeError::new_err(format!("`{name}` must be a contiguous float64 array")))
}

/// A row-major `n_rows x n_cols` result as a NumPy array (moved, not copied).
///
/// # Errors
/// `ValueError` if `values.len() != n_rows * n_cols` (a bug of the binding, reported rather
/// than panicking).
#[allow(dead_code)] // the bindings adopt it one by one (each has a local copy today)
pub fn matrix<'py, T: numpy::Element>(
    py: Python<'py>,
    values: Vec<T>,
    n_rows: usize,
    n_cols: usize,
) -> PyResult<Bound<'py, PyArray2<T>>> {
    numpy::ndarray::Array2::from_shape_vec((n_rows, n_cols), values)
        .map_err(|e| PyValueError::new_err(e.to_string()))
        .map(|a| a.into_pyarray(py))
}
