//! Bindings of the seriation kernels of `vastml-order`: the iterated-local-search open-path
//! TSP on points or a dissimilarity matrix, and optimal leaf ordering.

use std::time::Duration;

use numpy::{PyArray1, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use vastml_order::Control;
use vastml_order::olo::optimal_leaf_order_with;
use vastml_order::options::{indices_from_i64, pairs_from_i64};
use vastml_order::tsp_ils::{Dense, IlsParams, Points, solve_cancellable};

use crate::arrays::{index_array, rows, slice};
use crate::door::enter;
use crate::options::{Dict, FromDict, Options};
use crate::progress;

/// The iterated local search's parameters, as `seriate` names them.
impl FromDict for IlsParams {
    fn from_dict(d: &Options<'_>) -> PyResult<Self> {
        let time_limit: Option<f64> = d.get("time_limit")?;
        Ok(IlsParams {
            neighbours: d.get("neighbours")?,
            kicks: d.get("kicks")?,
            time_limit: time_limit.map(Duration::from_secs_f64),
            runs: d.get("runs")?,
            kick_window: d.get("kick_window")?,
            seed: d.get("seed")?,
            ..IlsParams::default()
        })
    }
}

/// What `tsp_ils_order` returns: (order, length, first local optimum length, kicks, accepted).
pub type IlsOut<'py> = (Bound<'py, PyArray1<i64>>, f64, f64, usize, usize);

/// Open path through the rows of `x` (points) or the objects of the dissimilarity matrix `x`
/// (`precomputed`) by 2-opt + Or-opt iterated local search, from `ends.0` to `ends.1`;
/// `progress(iteration, length, order)` after each of ten rounds, True to stop.
#[pyfunction]
#[pyo3(signature = (x, precomputed, ends, params, init=None, n_jobs=None, progress=None))]
pub fn tsp_ils_order<'py>(
    x: PyReadonlyArray2<'py, f64>,
    precomputed: bool,
    ends: (Option<usize>, Option<usize>),
    params: Dict<IlsParams>,
    init: Option<PyReadonlyArray1<'py, i64>>,
    n_jobs: Option<isize>,
    progress: Option<Py<PyAny>>,
) -> PyResult<IlsOut<'py>> {
    // (no `py` argument: with the hook it would be one too many)
    let py = x.py();
    let (data, dim) = rows(&x, "x")?;
    let init = init
        .as_ref()
        .map(|a| slice(a, "init").map(indices_from_i64))
        .transpose()?;
    let (params, (start, end), init) = (params.0, ends, init.as_deref());
    let hook = progress::hook::<[usize]>(progress, progress::order_state);
    let r = enter(py, n_jobs, |c| {
        let ctl = progress::control(c, hook.as_ref());
        if precomputed {
            solve_cancellable(&Dense::new(data, dim)?, start, end, &params, init, ctl)
        } else {
            solve_cancellable(&Points::new(data, dim)?, start, end, &params, init, ctl)
        }
    });
    let r = progress::finish(hook, r)?;
    Ok((
        index_array(py, &r.order),
        r.length,
        r.first_length,
        r.kicks,
        r.accepted,
    ))
}

/// Optimal leaf ordering of the dendrogram `merges` ((n - 1, 2) int64, SciPy linkage columns
/// 0 and 1) for the rows of `x` or the dissimilarity matrix `x` (`precomputed`): (order, length).
#[pyfunction]
#[pyo3(signature = (x, precomputed, merges, n_jobs=None))]
pub fn olo_order<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    precomputed: bool,
    merges: PyReadonlyArray2<'py, i64>,
    n_jobs: Option<isize>,
) -> PyResult<(Bound<'py, PyArray1<i64>>, f64)> {
    let (data, dim) = rows(&x, "x")?;
    if merges.shape()[1] != 2 {
        return Err(PyValueError::new_err("`merges` must have 2 columns"));
    }
    let mg = merges
        .as_slice()
        .map_err(|e| pyo3::exceptions::PyTypeError::new_err(format!("`merges`: {e}")))?;
    let pairs = pairs_from_i64(mg);
    let (order, length) = enter(py, n_jobs, |c| match precomputed {
        true => optimal_leaf_order_with(&pairs, &Dense::new(data, dim)?, Control::new(c)),
        false => optimal_leaf_order_with(&pairs, &Points::new(data, dim)?, Control::new(c)),
    })?;
    Ok((index_array(py, &order), length))
}
