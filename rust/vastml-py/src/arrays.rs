//! The shared conversions of every binding: NumPy arrays borrowed as Rust slices, CSR arrays
//! in either index width, and results handed back as NumPy arrays.

use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use vastml_embed::{Csr, CsrIndex, CsrValue};

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

/// As [`rows`], with the row count too: `(values, n_rows, n_cols)`.
pub fn rows_n<'a>(
    a: &'a PyReadonlyArray2<'_, f64>,
    name: &str,
) -> PyResult<(&'a [f64], usize, usize)> {
    let (s, cols) = rows(a, name)?;
    Ok((s, n_rows(s.len(), cols), cols))
}

/// Number of rows of a row-major buffer of `len` values in `cols` columns (0 without
/// columns): the one place that divides a length by a column count.
pub fn n_rows(len: usize, cols: usize) -> usize {
    len.checked_div(cols).unwrap_or(0)
}

/// Checks that `name` (of `cols` columns) has the dimension of `other` (`other_cols`).
pub fn same_cols(name: &str, cols: usize, other: &str, other_cols: usize) -> PyResult<()> {
    match cols == other_cols {
        true => Ok(()),
        false => Err(PyValueError::new_err(format!(
            "`{name}` has {cols} columns but `{other}` has {other_cols}: they must have the same dimension"
        ))),
    }
}

/// A contiguous float64 1-D array as a slice.
pub fn vector<'a>(a: &'a PyReadonlyArray1<'_, f64>, name: &str) -> PyResult<&'a [f64]> {
    a.as_slice()
        .map_err(|_| PyTypeError::new_err(format!("`{name}` must be a contiguous float64 array")))
}

/// A contiguous 1-D array of any element type as a slice.
pub fn slice<'a, T: numpy::Element>(
    a: &'a PyReadonlyArray1<'_, T>,
    name: &str,
) -> PyResult<&'a [T]> {
    a.as_slice()
        .map_err(|_| PyTypeError::new_err(format!("`{name}` must be a contiguous array")))
}

/// A row-major `n_rows x n_cols` result as a NumPy array (moved, not copied).
///
/// # Errors
/// `ValueError` if `values.len() != n_rows * n_cols` (a bug of the binding, reported rather
/// than panicking).
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

/// Row-major `values` of `cols` columns as a NumPy matrix (the row count is implied).
pub fn by_rows<T: numpy::Element>(
    py: Python<'_>,
    values: Vec<T>,
    cols: usize,
) -> PyResult<Bound<'_, PyArray2<T>>> {
    let n = n_rows(values.len(), cols);
    matrix(py, values, n, cols)
}

/// Indices (an order, class codes, cluster labels) as the int64 array Python expects.
pub fn index_array<'py>(py: Python<'py>, indices: &[usize]) -> Bound<'py, PyArray1<i64>> {
    PyArray1::from_iter(py, indices.iter().map(|&i| i as i64))
}

/// CSR `(indptr, indices, data)` handed back to Python, in the layout they were computed in.
pub type CsrOut<'py> = (Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>);

/// The three CSR arrays as NumPy arrays (moved, not copied).
pub fn csr_out<'py, I: numpy::Element, V: numpy::Element>(
    py: Python<'py>,
    indptr: Vec<I>,
    indices: Vec<I>,
    data: Vec<V>,
) -> CsrOut<'py> {
    (
        indptr.into_pyarray(py).into_any(),
        indices.into_pyarray(py).into_any(),
        data.into_pyarray(py).into_any(),
    )
}

/// The index arrays of a CSR matrix in either width SciPy uses (int32 arrays are not copied).
pub enum CsrIndexArrays<'py> {
    /// int64 `indptr` and `indices` (SciPy's default for large matrices).
    Wide(PyReadonlyArray1<'py, i64>, PyReadonlyArray1<'py, i64>),
    /// int32 `indptr` and `indices`.
    Compact(PyReadonlyArray1<'py, i32>, PyReadonlyArray1<'py, i32>),
}

/// `indptr` and `indices` of one width.
pub fn csr_index<'py>(
    indptr: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
) -> PyResult<CsrIndexArrays<'py>> {
    if let (Ok(p), Ok(i)) = (indptr.extract(), indices.extract()) {
        return Ok(CsrIndexArrays::Wide(p, i));
    }
    if let (Ok(p), Ok(i)) = (indptr.extract(), indices.extract()) {
        return Ok(CsrIndexArrays::Compact(p, i));
    }
    Err(PyTypeError::new_err(
        "`indptr` and `indices` must both be int64 or both int32 arrays",
    ))
}

/// CSR arrays in one of the two layouts the kernels take: int64 / float64 (SciPy's and
/// NumPy's defaults) or the compact int32 / float32 of large problems.
pub enum CsrArrays<'py> {
    /// int64 / int64 / float64.
    Wide(
        PyReadonlyArray1<'py, i64>,
        PyReadonlyArray1<'py, i64>,
        PyReadonlyArray1<'py, f64>,
    ),
    /// int32 / int32 / float32.
    Compact(
        PyReadonlyArray1<'py, i32>,
        PyReadonlyArray1<'py, i32>,
        PyReadonlyArray1<'py, f32>,
    ),
}

/// `indptr`, `indices` and `data` of one layout.
pub fn csr_arrays<'py>(
    indptr: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    data: &Bound<'py, PyAny>,
) -> PyResult<CsrArrays<'py>> {
    if let (Ok(p), Ok(i), Ok(d)) = (indptr.extract(), indices.extract(), data.extract()) {
        return Ok(CsrArrays::Wide(p, i, d));
    }
    if let (Ok(p), Ok(i), Ok(d)) = (indptr.extract(), indices.extract(), data.extract()) {
        return Ok(CsrArrays::Compact(p, i, d));
    }
    Err(PyTypeError::new_err(
        "CSR arrays must be int64 / int64 / float64 or int32 / int32 / float32 (contiguous)",
    ))
}

/// Runs `$body` with `$w` bound to the `vastml_embed::Csr` of [`CsrArrays`] `$arrays`, or
/// with the index slices `($p, $i)` of [`CsrIndexArrays`] (the body is instantiated for both
/// widths).
macro_rules! with_csr {
    ($arrays:expr, |$w:ident| $body:expr) => {
        match &$arrays {
            $crate::arrays::CsrArrays::Wide(p, i, d) => {
                let $w = $crate::arrays::csr_slices(p, i, d)?;
                $body
            }
            $crate::arrays::CsrArrays::Compact(p, i, d) => {
                let $w = $crate::arrays::csr_slices(p, i, d)?;
                $body
            }
        }
    };
    ($index:expr, |$p:ident, $i:ident| $body:expr) => {
        match &$index {
            $crate::arrays::CsrIndexArrays::Wide(p, i) => {
                let ($p, $i) = (
                    $crate::arrays::slice(p, "indptr")?,
                    $crate::arrays::slice(i, "indices")?,
                );
                $body
            }
            $crate::arrays::CsrIndexArrays::Compact(p, i) => {
                let ($p, $i) = (
                    $crate::arrays::slice(p, "indptr")?,
                    $crate::arrays::slice(i, "indices")?,
                );
                $body
            }
        }
    };
}
pub(crate) use with_csr;

/// The borrowed CSR matrix of one layout of [`CsrArrays`].
pub fn csr_slices<'a, I, V>(
    indptr: &'a PyReadonlyArray1<'_, I>,
    indices: &'a PyReadonlyArray1<'_, I>,
    data: &'a PyReadonlyArray1<'_, V>,
) -> PyResult<Csr<'a, I, V>>
where
    I: CsrIndex + numpy::Element,
    V: CsrValue + numpy::Element,
{
    let (indptr, indices) = (slice(indptr, "indptr")?, slice(indices, "indices")?);
    let data = slice(data, "data")?;
    square_csr("attraction", indptr, indices, data)
}

/// The checked square CSR view of the three slices (as many columns as rows).
pub fn square_csr<'a, I: CsrIndex, V: CsrValue>(
    name: &'static str,
    indptr: &'a [I],
    indices: &'a [I],
    data: &'a [V],
) -> PyResult<Csr<'a, I, V>> {
    let n = indptr.len().saturating_sub(1);
    Csr::new_or_empty(name, indptr, indices, data, n)
        .map_err(|e| crate::errors::ToPyErr::to_pyerr(vastml_embed::EmbedError::from(e)))
}
