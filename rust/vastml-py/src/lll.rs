//! Bindings of `vastml_embed::lll`: Locally Linear Landmarks weights and reduced products.

use numpy::{IntoPyArray, PyArray2, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use vastml_embed::lll::{
    Csr, SparseRows, Weights, csr_dense_product, reconstruction_weights, sym_quadratic_form,
    z_m_zt, z_m_zt_keep, z_m_zt_sym,
};

use crate::arrays::{rows, vector};
use crate::door::enter;

fn matrix<'py, T: numpy::Element>(
    py: Python<'py>,
    v: Vec<T>,
    r: usize,
    c: usize,
) -> PyResult<Bound<'py, PyArray2<T>>> {
    numpy::ndarray::Array2::from_shape_vec((r, c), v)
        .map_err(|e| PyValueError::new_err(e.to_string()))
        .map(|a| a.into_pyarray(py))
}

fn ints<'a, T: numpy::Element>(a: &'a PyReadonlyArray1<'_, T>, name: &str) -> PyResult<&'a [T]> {
    a.as_slice()
        .map_err(|_| PyTypeError::new_err(format!("`{name}` must be a contiguous array")))
}

type WeightsOut<'py> = (Bound<'py, PyArray2<u32>>, Bound<'py, PyArray2<f64>>);

/// lll_weights(x, landmarks, n_neighbors, reg, n_jobs=None)
/// --
///
/// LLE reconstruction weights of every row of `x` (N x D) from its `n_neighbors` nearest
/// rows of `landmarks` (L x D), G + reg tr(G) I. Returns (indices N x K uint32, nearest
/// first; weights N x K, rows summing to one).
#[pyfunction]
#[pyo3(signature = (x, landmarks, n_neighbors, reg, n_jobs=None))]
pub fn lll_weights<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    landmarks: PyReadonlyArray2<'py, f64>,
    n_neighbors: usize,
    reg: f64,
    n_jobs: Option<isize>,
) -> PyResult<WeightsOut<'py>> {
    let (xs, d) = rows(&x, "x")?;
    let (ls, dl) = rows(&landmarks, "landmarks")?;
    if d != dl {
        return Err(PyValueError::new_err(format!(
            "`landmarks` has {dl} features, `x` has {d}"
        )));
    }
    let n = xs.len().checked_div(d).unwrap_or(0);
    let w = enter(py, n_jobs, |cancel| {
        reconstruction_weights(xs, ls, d, n_neighbors, reg, cancel)
    })?;
    Ok((
        matrix(py, w.indices, n, n_neighbors)?,
        matrix(py, w.values, n, n_neighbors)?,
    ))
}

/// lll_z_m_zt(indices, weights, n_landmarks, diag=None, indptr=None, m_indices=None, m_data=None, n_jobs=None, keep_rows=False)
/// --
///
/// Z (diag(v) + M) Z^T as a dense L x L array, for Z given by `lll_weights`'s (indices,
/// weights) and an optional N x N CSR matrix M (indptr / indices both int64 or both int32, as
/// SciPy stores them: no copy of a large graph). Deterministic for any n_jobs. With
/// `keep_rows=True` returns (that array, (indptr int64 N + 1, indices uint32, values)) where the
/// second is the CSR N x L matrix (diag(v) + M) Z^T computed on the way.
#[pyfunction]
#[pyo3(signature = (indices, weights, n_landmarks, diag=None, indptr=None, m_indices=None, m_data=None, n_jobs=None, keep_rows=false))]
#[allow(clippy::too_many_arguments)]
pub fn lll_z_m_zt<'py>(
    py: Python<'py>,
    indices: PyReadonlyArray2<'py, u32>,
    weights: PyReadonlyArray2<'py, f64>,
    n_landmarks: usize,
    diag: Option<PyReadonlyArray1<'py, f64>>,
    indptr: Option<Bound<'py, PyAny>>,
    m_indices: Option<Bound<'py, PyAny>>,
    m_data: Option<PyReadonlyArray1<'py, f64>>,
    n_jobs: Option<isize>,
    keep_rows: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let (vs, k) = rows(&weights, "weights")?;
    if indices.shape() != weights.shape() {
        return Err(PyValueError::new_err(
            "`indices` and `weights` differ in shape",
        ));
    }
    let ix = indices
        .as_slice()
        .map_err(|_| PyTypeError::new_err("`indices` must be a C-contiguous uint32 array"))?;
    let z = Weights {
        k,
        indices: ix.to_vec(),
        values: vs.to_vec(),
    };
    let dg = diag.as_ref().map(|v| vector(v, "diag")).transpose()?;
    let out = match (&indptr, &m_indices, &m_data) {
        (Some(p), Some(i), Some(v)) => {
            let data = vector(v, "m_data")?;
            if let (Ok(p), Ok(i)) = (
                p.extract::<PyReadonlyArray1<'py, i64>>(),
                i.extract::<PyReadonlyArray1<'py, i64>>(),
            ) {
                let m = Csr {
                    indptr: ints(&p, "indptr")?,
                    indices: ints(&i, "m_indices")?,
                    data,
                };
                enter(py, n_jobs, |cancel| {
                    product(&z, n_landmarks, dg, Some(m), cancel, keep_rows)
                })?
            } else if let (Ok(p), Ok(i)) = (
                p.extract::<PyReadonlyArray1<'py, i32>>(),
                i.extract::<PyReadonlyArray1<'py, i32>>(),
            ) {
                let m = Csr {
                    indptr: ints(&p, "indptr")?,
                    indices: ints(&i, "m_indices")?,
                    data,
                };
                enter(py, n_jobs, |cancel| {
                    product(&z, n_landmarks, dg, Some(m), cancel, keep_rows)
                })?
            } else {
                return Err(PyTypeError::new_err(
                    "`indptr` and `m_indices` must both be int64 or both int32 arrays",
                ));
            }
        }
        (None, None, None) => enter(py, n_jobs, |cancel| {
            product::<i64>(&z, n_landmarks, dg, None, cancel, keep_rows)
        })?,
        _ => {
            return Err(PyValueError::new_err(
                "give all of `indptr`, `m_indices`, `m_data` or none",
            ));
        }
    };
    let (out, kept) = out;
    let dense = matrix(py, out, n_landmarks, n_landmarks)?;
    match kept {
        None => Ok(dense.into_any()),
        Some(t) => {
            let start: Vec<i64> = t.start.iter().map(|&v| v as i64).collect();
            let rows = (
                start.into_pyarray(py),
                t.index.into_pyarray(py),
                t.value.into_pyarray(py),
            );
            Ok((dense, rows).into_pyobject(py)?.into_any())
        }
    }
}

/// `z_m_zt`, or `z_m_zt_keep` when the rows are wanted.
fn product<I: vastml_embed::CsrIndex>(
    z: &Weights,
    l: usize,
    dg: Option<&[f64]>,
    m: Option<Csr<'_, I>>,
    cancel: &std::sync::atomic::AtomicBool,
    keep: bool,
) -> vastml_embed::Result<(Vec<f64>, Option<SparseRows>)> {
    if keep {
        z_m_zt_keep(z, l, dg, m, cancel).map(|(o, t)| (o, Some(t)))
    } else {
        z_m_zt(z, l, dg, m, cancel).map(|o| (o, None))
    }
}

/// lll_csr_dense(indptr, indices, data, x, n_jobs=None)
/// --
///
/// M X for an N x N CSR matrix M (indptr / indices both int64 or both int32, uncopied) and a
/// dense N x k array X; returns N x k. Deterministic for any n_jobs.
#[pyfunction]
#[pyo3(signature = (indptr, indices, data, x, n_jobs=None))]
pub fn lll_csr_dense<'py>(
    py: Python<'py>,
    indptr: Bound<'py, PyAny>,
    indices: Bound<'py, PyAny>,
    data: PyReadonlyArray1<'py, f64>,
    x: PyReadonlyArray2<'py, f64>,
    n_jobs: Option<isize>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let (xs, k) = rows(&x, "x")?;
    let n = x.shape()[0];
    let data = vector(&data, "data")?;
    let out = if let (Ok(p), Ok(i)) = (
        indptr.extract::<PyReadonlyArray1<'py, i64>>(),
        indices.extract::<PyReadonlyArray1<'py, i64>>(),
    ) {
        let m = Csr {
            indptr: ints(&p, "indptr")?,
            indices: ints(&i, "indices")?,
            data,
        };
        enter(py, n_jobs, |cancel| csr_dense_product(m, xs, k, cancel))?
    } else if let (Ok(p), Ok(i)) = (
        indptr.extract::<PyReadonlyArray1<'py, i32>>(),
        indices.extract::<PyReadonlyArray1<'py, i32>>(),
    ) {
        let m = Csr {
            indptr: ints(&p, "indptr")?,
            indices: ints(&i, "indices")?,
            data,
        };
        enter(py, n_jobs, |cancel| csr_dense_product(m, xs, k, cancel))?
    } else {
        return Err(PyTypeError::new_err(
            "`indptr` and `indices` must both be int64 or both int32 arrays",
        ));
    };
    matrix(py, out, n, k)
}

/// lll_z_m_zt_sym(indices, weights, n_landmarks, indptr, m_indices, m_data, n_jobs=None)
/// --
///
/// Z M Z^T (dense L x L) for a symmetric N x N CSR matrix M, reading only its upper triangle
/// (every edge once; the lower triangle is never read nor checked). Deterministic for any
/// n_jobs.
#[pyfunction]
#[pyo3(signature = (indices, weights, n_landmarks, indptr, m_indices, m_data, n_jobs=None))]
#[allow(clippy::too_many_arguments)]
pub fn lll_z_m_zt_sym<'py>(
    py: Python<'py>,
    indices: PyReadonlyArray2<'py, u32>,
    weights: PyReadonlyArray2<'py, f64>,
    n_landmarks: usize,
    indptr: Bound<'py, PyAny>,
    m_indices: Bound<'py, PyAny>,
    m_data: PyReadonlyArray1<'py, f64>,
    n_jobs: Option<isize>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let (vs, k) = rows(&weights, "weights")?;
    if indices.shape() != weights.shape() {
        return Err(PyValueError::new_err(
            "`indices` and `weights` differ in shape",
        ));
    }
    let ix = indices
        .as_slice()
        .map_err(|_| PyTypeError::new_err("`indices` must be a C-contiguous uint32 array"))?;
    let z = Weights {
        k,
        indices: ix.to_vec(),
        values: vs.to_vec(),
    };
    let data = vector(&m_data, "m_data")?;
    let out = if let (Ok(p), Ok(i)) = (
        indptr.extract::<PyReadonlyArray1<'py, i64>>(),
        m_indices.extract::<PyReadonlyArray1<'py, i64>>(),
    ) {
        let m = Csr {
            indptr: ints(&p, "indptr")?,
            indices: ints(&i, "m_indices")?,
            data,
        };
        enter(py, n_jobs, |cancel| z_m_zt_sym(&z, n_landmarks, m, cancel))?
    } else if let (Ok(p), Ok(i)) = (
        indptr.extract::<PyReadonlyArray1<'py, i32>>(),
        m_indices.extract::<PyReadonlyArray1<'py, i32>>(),
    ) {
        let m = Csr {
            indptr: ints(&p, "indptr")?,
            indices: ints(&i, "m_indices")?,
            data,
        };
        enter(py, n_jobs, |cancel| z_m_zt_sym(&z, n_landmarks, m, cancel))?
    } else {
        return Err(PyTypeError::new_err(
            "`indptr` and `m_indices` must both be int64 or both int32 arrays",
        ));
    };
    matrix(py, out, n_landmarks, n_landmarks)
}

/// lll_sym_quadratic_form(indptr, indices, data, v, n_jobs=None)
/// --
///
/// V^T M V (k x k) for a symmetric N x N CSR matrix M (indptr / indices both int64 or both
/// int32, uncopied; only the upper triangle is read, symmetry is not checked) and a dense N x k
/// array V. Deterministic for any n_jobs.
#[pyfunction]
#[pyo3(signature = (indptr, indices, data, v, n_jobs=None))]
pub fn lll_sym_quadratic_form<'py>(
    py: Python<'py>,
    indptr: Bound<'py, PyAny>,
    indices: Bound<'py, PyAny>,
    data: PyReadonlyArray1<'py, f64>,
    v: PyReadonlyArray2<'py, f64>,
    n_jobs: Option<isize>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let (vs, k) = rows(&v, "v")?;
    let data = vector(&data, "data")?;
    let out = if let (Ok(p), Ok(i)) = (
        indptr.extract::<PyReadonlyArray1<'py, i64>>(),
        indices.extract::<PyReadonlyArray1<'py, i64>>(),
    ) {
        let m = Csr {
            indptr: ints(&p, "indptr")?,
            indices: ints(&i, "indices")?,
            data,
        };
        enter(py, n_jobs, |cancel| sym_quadratic_form(m, vs, k, cancel))?
    } else if let (Ok(p), Ok(i)) = (
        indptr.extract::<PyReadonlyArray1<'py, i32>>(),
        indices.extract::<PyReadonlyArray1<'py, i32>>(),
    ) {
        let m = Csr {
            indptr: ints(&p, "indptr")?,
            indices: ints(&i, "indices")?,
            data,
        };
        enter(py, n_jobs, |cancel| sym_quadratic_form(m, vs, k, cancel))?
    } else {
        return Err(PyTypeError::new_err(
            "`indptr` and `indices` must both be int64 or both int32 arrays",
        ));
    };
    matrix(py, out, k, k)
}
