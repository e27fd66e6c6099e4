//! Bindings of the 1-D sums of `vastml-fgt`: Hermite x Gaussian and erfc.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use vastml_fgt::SumMethod;

use crate::arrays::vector;
use crate::door::enter;
use crate::options::Wrap;

/// The Hermite sum's parameters: `order`, bandwidths `h1` (of the Hermite function) and
/// `h2` (of the Gaussian), `epsilon`, `method`.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct HermiteArgs {
    order: usize,
    h1: f64,
    h2: f64,
    epsilon: f64,
    method: Wrap<SumMethod>,
}

/// G[j] = sum_i weights[i] He_order((y_j - x_i) / h1) exp(-(y_j - x_i)^2 / h2^2).
#[pyfunction]
#[pyo3(signature = (sources, weights, targets, params, n_jobs=None))]
pub fn hermite_gauss_sum<'py>(
    py: Python<'py>,
    sources: PyReadonlyArray1<'py, f64>,
    weights: PyReadonlyArray1<'py, f64>,
    targets: PyReadonlyArray1<'py, f64>,
    params: HermiteArgs,
    n_jobs: Option<isize>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let x = vector(&sources, "sources")?;
    let (q, y) = (vector(&weights, "weights")?, vector(&targets, "targets")?);
    let (p, method) = (&params, params.method.0);
    let out = enter(py, n_jobs, |cancel| {
        vastml_fgt::hermite_gauss_sum(x, q, y, p.order, p.h1, p.h2, p.epsilon, method, cancel)
    })?;
    Ok(out.into_pyarray(py))
}

/// E[j] = sum_i weights[i] erfc(targets[j] - sources[i]).
#[pyfunction]
#[pyo3(signature = (sources, weights, targets, epsilon, method, n_jobs=None))]
pub fn erfc_sum<'py>(
    py: Python<'py>,
    sources: PyReadonlyArray1<'py, f64>,
    weights: PyReadonlyArray1<'py, f64>,
    targets: PyReadonlyArray1<'py, f64>,
    epsilon: f64,
    method: Wrap<SumMethod>,
    n_jobs: Option<isize>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let x = vector(&sources, "sources")?;
    let (q, y) = (vector(&weights, "weights")?, vector(&targets, "targets")?);
    let out = enter(py, n_jobs, |cancel| {
        vastml_fgt::erfc_sum(x, q, y, epsilon, method.0, cancel)
    })?;
    Ok(out.into_pyarray(py))
}
