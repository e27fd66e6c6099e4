//! Bindings of `vastml_embed::lll`: Locally Linear Landmarks weights and reduced products.
//!
//! Z arrives as `lll_weights`'s `(indices, weights, n_landmarks)` and a sparse N x N matrix M
//! as SciPy's `(indptr, indices, data)` (indices both int64 or both int32, uncopied). The long
//! kernels take `progress=None`: the bound `vastml._progress.Progress.report` of the fit,
//! called between chunks of points as `report(iteration, nan, None)`. When it returns True the
//! kernel stops and the binding returns None (an exception it raises is re-raised).

use numpy::{IntoPyArray, PyArray2, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use vastml_core::Control;
use vastml_embed::EmbedError;
use vastml_embed::lll::{
    Csr, SparseRows, Weights, csr_dense_product, reconstruction_weights, sym_quadratic_form,
    z_m_zt, z_m_zt_keep, z_m_zt_sym,
};

use crate::arrays::{CsrIndexArrays, csr_index, matrix, rows, same_cols, vector, with_csr};
use crate::door::enter;
use crate::progress::{self, finish};

/// Z as `lll_weights` returns it, with its column count L.
#[derive(FromPyObject)]
pub struct ZArgs<'py>(
    PyReadonlyArray2<'py, u32>,
    PyReadonlyArray2<'py, f64>,
    usize,
);

impl ZArgs<'_> {
    /// Z and L.
    fn get(&self) -> PyResult<(Weights, usize)> {
        let (indices, weights) = (&self.0, &self.1);
        let (vs, k) = rows(weights, "weights")?;
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
        Ok((z, self.2))
    }
}

/// A sparse matrix as SciPy's `(indptr, indices, data)`.
#[derive(FromPyObject)]
pub struct MArgs<'py>(
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    PyReadonlyArray1<'py, f64>,
);

impl<'py> MArgs<'py> {
    fn parts(&self) -> PyResult<(CsrIndexArrays<'py>, &[f64])> {
        Ok((csr_index(&self.0, &self.1)?, vector(&self.2, "data")?))
    }
}

/// Runs `$body` with `$m` bound to the [`Csr`] of [`MArgs`] `$args` (instantiated for both
/// index widths).
macro_rules! with_m {
    ($args:expr, |$m:ident| $body:expr) => {{
        let (index, data) = $args.parts()?;
        with_csr!(index, |indptr, indices| {
            let $m = $crate::arrays::square_csr("M", indptr, indices, data)?;
            $body
        })
    }};
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
    finish(hook, out)
}

type WeightsOut<'py> = (Bound<'py, PyArray2<u32>>, Bound<'py, PyArray2<f64>>);

/// LLE weights of each row of x from its nearest landmarks: (indices, weights) or None.
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
    same_cols("landmarks", dl, "x", d)?;
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

/// Z (diag(v) + M) Z^T (dense L x L); with `keep_rows` also (diag(v) + M) Z^T as CSR arrays.
#[pyfunction]
#[pyo3(signature = (z, diag=None, m=None, keep_rows=false, n_jobs=None, progress=None))]
pub fn lll_z_m_zt<'py>(
    py: Python<'py>,
    z: ZArgs<'py>,
    diag: Option<PyReadonlyArray1<'py, f64>>,
    m: Option<MArgs<'py>>,
    keep_rows: bool,
    n_jobs: Option<isize>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let (z, l) = z.get()?;
    let dg = diag.as_ref().map(|v| vector(v, "diag")).transpose()?;
    let res = match &m {
        Some(m) => with_m!(m, |m| run(py, n_jobs, progress, |c| {
            product(&z, l, dg, Some(m), c, keep_rows)
        })?),
        None => run(py, n_jobs, progress, |c| {
            product::<i64>(&z, l, dg, None, c, keep_rows)
        })?,
    };
    res.map(|r| product_out(py, r, l)).transpose()
}

/// M X for a sparse N x N matrix M and a dense N x k array X.
#[pyfunction]
#[pyo3(signature = (m, x, n_jobs=None))]
pub fn lll_csr_dense<'py>(
    py: Python<'py>,
    m: MArgs<'py>,
    x: PyReadonlyArray2<'py, f64>,
    n_jobs: Option<isize>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let (xs, k) = rows(&x, "x")?;
    let n = x.shape()[0];
    let out = with_m!(m, |m| {
        enter(py, n_jobs, |cancel| csr_dense_product(m, xs, k, cancel))?
    });
    matrix(py, out, n, k)
}

/// Z M Z^T (dense L x L) for a symmetric M, reading only its upper triangle; None if stopped.
#[pyfunction]
#[pyo3(signature = (z, m, n_jobs=None, progress=None))]
pub fn lll_z_m_zt_sym<'py>(
    py: Python<'py>,
    z: ZArgs<'py>,
    m: MArgs<'py>,
    n_jobs: Option<isize>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Option<Bound<'py, PyArray2<f64>>>> {
    let (z, l) = z.get()?;
    let out = with_m!(m, |m| run(py, n_jobs, progress, |c| z_m_zt_sym(
        &z, l, m, c
    ))?);
    out.map(|o| matrix(py, o, l, l)).transpose()
}

/// V^T M V (k x k) for a symmetric M (upper triangle read) and a dense N x k array V.
#[pyfunction]
#[pyo3(signature = (m, v, n_jobs=None))]
pub fn lll_sym_quadratic_form<'py>(
    py: Python<'py>,
    m: MArgs<'py>,
    v: PyReadonlyArray2<'py, f64>,
    n_jobs: Option<isize>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let (vs, k) = rows(&v, "v")?;
    let out = with_m!(m, |m| {
        enter(py, n_jobs, |cancel| sym_quadratic_form(m, vs, k, cancel))?
    });
    matrix(py, out, k, k)
}
