//! Bindings of `vastml_embed::lll`: Locally Linear Landmarks weights and reduced products.
//!
//! The long kernels (`lll_weights`, `lll_z_m_zt`, `lll_z_m_zt_sym`) take `progress=None`: the
//! bound `vastml._progress.Progress.report` of the fit, called between chunks of points as
//! `report(iteration, nan, None)`. When it returns True the kernel stops and the binding
//! returns None (an exception it raises is re-raised).

use numpy::{IntoPyArray, PyArray2, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use vastml_core::Control;
use vastml_embed::EmbedError;
use vastml_embed::lll::{
    Csr, SparseRows, Weights, csr_dense_product, reconstruction_weights, sym_quadratic_form,
    z_m_zt, z_m_zt_keep, z_m_zt_sym,
};

use crate::arrays::{csr_index, matrix, rows, vector, with_csr};
use crate::door::enter;
use crate::progress;

/// Runs `$body` with `$m` bound to the [`Csr`] of `$index` and `$data` (instantiated for both
/// index widths).
macro_rules! with_lll_csr {
    ($index:expr, $data:expr, |$m:ident| $body:expr) => {
        with_csr!($index, |indptr, indices| {
            let $m = Csr {
                indptr,
                indices,
                data: $data,
            };
            $body
        })
    };
}

/// Z from `lll_weights`'s (indices, weights).
fn weights_arg(
    indices: &PyReadonlyArray2<'_, u32>,
    weights: &PyReadonlyArray2<'_, f64>,
) -> PyResult<Weights> {
    let (vs, k) = rows(weights, "weights")?;
    if indices.shape() != weights.shape() {
        return Err(PyValueError::new_err(
            "`indices` and `weights` differ in shape",
        ));
    }
    let ix = indices
        .as_slice()
        .map_err(|_| PyTypeError::new_err("`indices` must be a C-contiguous uint32 array"))?;
    Ok(Weights {
        k,
        indices: ix.to_vec(),
        values: vs.to_vec(),
    })
}

/// Runs `work` through [`enter`] with the optional progress hook: None when the hook stopped it.
fn run<T: Send>(
    py: Python<'_>,
    n_jobs: Option<isize>,
    progress: Option<Py<PyAny>>,
    work: impl FnOnce(Control<'_>) -> vastml_embed::Result<T> + Send,
) -> PyResult<Option<T>> {
    let hook = progress::hook::<()>(progress, progress::no_state);
    let out = enter(py, n_jobs, |cancel| {
        match work(progress::control(cancel, hook.as_ref())) {
            Err(EmbedError::Stopped) => Ok(None),
            r => r.map(Some),
        }
    });
    if let Some(h) = &hook {
        h.finish()?;
    }
    out
}

type WeightsOut<'py> = (Bound<'py, PyArray2<u32>>, Bound<'py, PyArray2<f64>>);

/// lll_weights(x, landmarks, n_neighbors, reg, n_jobs=None, progress=None)
/// --
///
/// LLE reconstruction weights of every row of `x` (N x D) from its `n_neighbors` nearest
/// rows of `landmarks` (L x D), G + reg tr(G) I. Returns (indices N x K uint32, nearest
/// first; weights N x K, rows summing to one), or None when `progress` stopped it.
#[pyfunction]
#[pyo3(signature = (x, landmarks, n_neighbors, reg, n_jobs=None, progress=None))]
pub fn lll_weights<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    landmarks: PyReadonlyArray2<'py, f64>,
    n_neighbors: usize,
    reg: f64,
    n_jobs: Option<isize>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Option<WeightsOut<'py>>> {
    let (xs, d) = rows(&x, "x")?;
    let (ls, dl) = rows(&landmarks, "landmarks")?;
    if d != dl {
        return Err(PyValueError::new_err(format!(
            "`landmarks` has {dl} features, `x` has {d}"
        )));
    }
    let n = x.shape()[0];
    let work = |c: Control<'_>| reconstruction_weights(xs, ls, d, n_neighbors, reg, c);
    let Some(w) = run(py, n_jobs, progress, work)? else {
        return Ok(None);
    };
    let idx = matrix(py, w.indices, n, n_neighbors)?;
    Ok(Some((idx, matrix(py, w.values, n, n_neighbors)?)))
}

/// `z_m_zt`, or `z_m_zt_keep` when the rows are wanted.
fn product<I: vastml_embed::CsrIndex>(
    z: &Weights,
    l: usize,
    dg: Option<&[f64]>,
    m: Option<Csr<'_, I>>,
    control: Control<'_>,
    keep: bool,
) -> vastml_embed::Result<(Vec<f64>, Option<SparseRows>)> {
    if keep {
        z_m_zt_keep(z, l, dg, m, control).map(|(o, t)| (o, Some(t)))
    } else {
        z_m_zt(z, l, dg, m, control).map(|o| (o, None))
    }
}

/// The dense product, or (it, (indptr, indices, values) of the kept rows).
fn product_out<'py>(
    py: Python<'py>,
    (out, kept): (Vec<f64>, Option<SparseRows>),
    l: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let dense = matrix(py, out, l, l)?;
    match kept {
        None => Ok(dense.into_any()),
        Some(t) => {
            let r = (
                t.start.into_pyarray(py),
                t.index.into_pyarray(py),
                t.value.into_pyarray(py),
            );
            Ok((dense, r).into_pyobject(py)?.into_any())
        }
    }
}

/// lll_z_m_zt(indices, weights, n_landmarks, diag=None, indptr=None, m_indices=None, m_data=None, n_jobs=None, keep_rows=False, progress=None)
/// --
///
/// Z (diag(v) + M) Z^T as a dense L x L array, for Z given by `lll_weights`'s (indices,
/// weights) and an optional N x N CSR matrix M (indptr / indices both int64 or both int32, as
/// SciPy stores them: no copy of a large graph). Deterministic for any n_jobs. With
/// `keep_rows=True` returns (that array, (indptr uint N + 1, indices uint32, values)) where the
/// second is the CSR N x L matrix (diag(v) + M) Z^T computed on the way. None when `progress`
/// stopped it.
#[pyfunction]
#[pyo3(signature = (indices, weights, n_landmarks, diag=None, indptr=None, m_indices=None, m_data=None, n_jobs=None, keep_rows=false, progress=None))]
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
    progress: Option<Py<PyAny>>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let z = weights_arg(&indices, &weights)?;
    let dg = diag.as_ref().map(|v| vector(v, "diag")).transpose()?;
    let l = n_landmarks;
    let res = match (&indptr, &m_indices, &m_data) {
        (Some(p), Some(i), Some(v)) => with_lll_csr!(csr_index(p, i)?, vector(v, "m_data")?, |m| {
            run(py, n_jobs, progress, |c| {
                product(&z, l, dg, Some(m), c, keep_rows)
            })?
        }),
        (None, None, None) => run(py, n_jobs, progress, |c| {
            product::<i64>(&z, l, dg, None, c, keep_rows)
        })?,
        _ => {
            return Err(PyValueError::new_err(
                "give all of `indptr`, `m_indices`, `m_data` or none",
            ));
        }
    };
    res.map(|r| product_out(py, r, l)).transpose()
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
    let out = with_lll_csr!(csr_index(&indptr, &indices)?, vector(&data, "data")?, |m| {
        enter(py, n_jobs, |cancel| csr_dense_product(m, xs, k, cancel))?
    });
    matrix(py, out, n, k)
}

/// lll_z_m_zt_sym(indices, weights, n_landmarks, indptr, m_indices, m_data, n_jobs=None, progress=None)
/// --
///
/// Z M Z^T (dense L x L) for a symmetric N x N CSR matrix M, reading only its upper triangle
/// (every edge once; the lower triangle is never read nor checked). Deterministic for any
/// n_jobs. None when `progress` stopped it.
#[pyfunction]
#[pyo3(signature = (indices, weights, n_landmarks, indptr, m_indices, m_data, n_jobs=None, progress=None))]
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
    progress: Option<Py<PyAny>>,
) -> PyResult<Option<Bound<'py, PyArray2<f64>>>> {
    let z = weights_arg(&indices, &weights)?;
    let (ix, data) = (csr_index(&indptr, &m_indices)?, vector(&m_data, "m_data")?);
    let l = n_landmarks;
    let out = with_lll_csr!(ix, data, |m| run(py, n_jobs, progress, |c| z_m_zt_sym(
        &z, l, m, c
    ))?);
    out.map(|o| matrix(py, o, n_landmarks, n_landmarks))
        .transpose()
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
    let out = with_lll_csr!(csr_index(&indptr, &indices)?, vector(&data, "data")?, |m| {
        enter(py, n_jobs, |cancel| sym_quadratic_form(m, vs, k, cancel))?
    });
    matrix(py, out, k, k)
}
