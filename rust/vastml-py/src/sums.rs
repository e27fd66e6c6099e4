//! Bindings of the 1-D sums of `vastml-fgt`: Hermite x Gaussian and erfc, and the order
//! statistics and linear binning of points on a line.

use std::sync::atomic::AtomicBool;

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use vastml_fgt::SumMethod;

use crate::arrays::vector;
use crate::door::{enter, enter_inline};
use crate::errors::ToPyErr;
use crate::options::Wrap;

type Array<'py> = Bound<'py, PyArray1<f64>>;

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

/// The values of `ranks` (0-based, ascending) of `x`, exactly as sorting would give them.
#[pyfunction]
#[pyo3(signature = (x, ranks, n_jobs=None))]
pub fn order_statistics(
    py: Python<'_>,
    x: PyReadonlyArray1<'_, f64>,
    ranks: Vec<usize>,
    n_jobs: Option<isize>,
) -> PyResult<Vec<f64>> {
    let x = vector(&x, "x")?;
    let work = |cancel: &AtomicBool| vastml_fgt::order_statistics(x, &ranks, cancel);
    match x.len() <= vastml_fgt::INLINE_LEN {
        true => enter_inline(py, n_jobs, work),
        false => enter(py, n_jobs, work),
    }
}

/// Linear binning of z = (x - center) * scale (`affine` = (center, scale)) on the nodes
/// lo + k spacing (`grid` = (lo, spacing, n_nodes)): (node weights, z of the points beyond).
#[pyfunction]
#[pyo3(signature = (x, affine, grid, n_jobs=None))]
pub fn linear_binning<'py>(
    py: Python<'py>,
    x: PyReadonlyArray1<'py, f64>,
    affine: (f64, f64),
    grid: (f64, f64, usize),
    n_jobs: Option<isize>,
) -> PyResult<(Array<'py>, Array<'py>)> {
    let (x, (center, scale), (lo, spacing, n)) = (vector(&x, "x")?, affine, grid);
    let work =
        |cancel: &AtomicBool| vastml_fgt::linear_binning(x, center, scale, lo, spacing, n, cancel);
    let b = match x.len() <= vastml_fgt::INLINE_LEN {
        true => enter_inline(py, n_jobs, work),
        false => enter(py, n_jobs, work),
    }?;
    Ok((b.weights.into_pyarray(py), b.outside.into_pyarray(py)))
}

/// The autocorrelation's lags 0 ..= `lags` from the pairs of nodes not both in `dense`
/// (start, end): see `vastml_fgt::edge_autocorrelation`.
#[pyfunction]
pub fn edge_autocorrelation<'py>(
    py: Python<'py>,
    w: PyReadonlyArray1<'py, f64>,
    dense: (usize, usize),
    lags: usize,
) -> PyResult<Array<'py>> {
    let a = vastml_fgt::edge_autocorrelation(vector(&w, "w")?, dense.0..dense.1, lags);
    Ok(a.map_err(ToPyErr::to_pyerr)?.into_pyarray(py))
}
