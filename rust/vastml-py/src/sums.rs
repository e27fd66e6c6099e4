//! Bindings of the 1-D sums of `vastml-fgt`: Hermite x Gaussian and erfc.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use vastml_fgt::SumMethod;

use crate::arrays::vector;
use crate::door::enter;
use crate::errors::ToPyErr;

fn parse(method: &str) -> PyResult<SumMethod> {
    method.parse::<SumMethod>().map_err(ToPyErr::to_pyerr)
}

/// hermite_gauss_sum(sources, weights, targets, order, h1, h2, epsilon=1e-6, method="auto", n_jobs=None)
/// --
///
/// G[j] = sum_i weights[i] He_order((targets[j] - sources[i]) / h1) exp(-(targets[j] - sources[i])^2 / h2^2)
/// with max |G_hat - G| <= epsilon * sum |weights|. 1-D contiguous float64 arrays.
#[pyfunction]
#[pyo3(signature = (sources, weights, targets, order, h1, h2, epsilon=1e-6, method="auto", n_jobs=None))]
#[allow(clippy::too_many_arguments)]
pub fn hermite_gauss_sum<'py>(
    py: Python<'py>,
    sources: PyReadonlyArray1<'py, f64>,
    weights: PyReadonlyArray1<'py, f64>,
    targets: PyReadonlyArray1<'py, f64>,
    order: usize,
    h1: f64,
    h2: f64,
    epsilon: f64,
    method: &str,
    n_jobs: Option<isize>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let method = parse(method)?;
    let (x, q, y) = (
        vector(&sources, "sources")?,
        vector(&weights, "weights")?,
        vector(&targets, "targets")?,
    );
    let out = enter(py, n_jobs, |cancel| {
        vastml_fgt::hermite_gauss_sum(x, q, y, order, h1, h2, epsilon, method, cancel)
    })?;
    Ok(out.into_pyarray(py))
}

/// erfc_sum(sources, weights, targets, epsilon=1e-6, method="auto", n_jobs=None)
/// --
///
/// E[j] = sum_i weights[i] erfc(targets[j] - sources[i]) with
/// max |E_hat - E| <= epsilon * sum |weights|. 1-D contiguous float64 arrays.
#[pyfunction]
#[pyo3(signature = (sources, weights, targets, epsilon=1e-6, method="auto", n_jobs=None))]
pub fn erfc_sum<'py>(
    py: Python<'py>,
    sources: PyReadonlyArray1<'py, f64>,
    weights: PyReadonlyArray1<'py, f64>,
    targets: PyReadonlyArray1<'py, f64>,
    epsilon: f64,
    method: &str,
    n_jobs: Option<isize>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let method = parse(method)?;
    let (x, q, y) = (
        vector(&sources, "sources")?,
        vector(&weights, "weights")?,
        vector(&targets, "targets")?,
    );
    let out = enter(py, n_jobs, |cancel| {
        vastml_fgt::erfc_sum(x, q, y, epsilon, method, cancel)
    })?;
    Ok(out.into_pyarray(py))
}
