//! Bindings of the seriation kernels of `vastml-order`: the iterated-local-search open-path
//! TSP on points or a dissimilarity matrix, and optimal leaf ordering.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;
use vastml_order::Control;
use vastml_order::olo::optimal_leaf_order_with;
use vastml_order::options::{indices_from_i64, pairs_from_i64};
use vastml_order::tsp_ils::{Dense, IlsParams, IlsResult, Points, solve_cancellable};

use crate::arrays::rows;
use crate::door::enter;

fn to_i64(v: Vec<usize>) -> Vec<i64> {
    v.into_iter().map(|i| i as i64).collect()
}

/// What `tsp_ils_order` returns: (order, length, first local optimum length, kicks, accepted).
type IlsOut<'py> = (Bound<'py, PyArray1<i64>>, f64, f64, usize, usize);

fn ils_params(
    neighbours: usize,
    kicks: Option<usize>,
    time_limit: Option<Duration>,
    runs: usize,
    kick_window: usize,
    seed: u64,
) -> IlsParams {
    IlsParams {
        neighbours,
        kicks,
        time_limit,
        runs,
        kick_window,
        seed,
        ..IlsParams::default()
    }
}

/// tsp_ils_order(x, precomputed, start, end, neighbours, kicks, time_limit, runs, kick_window, seed, init, n_jobs=None)
/// --
///
/// Open path through the rows of `x` (points, Euclidean) or through the objects of the square
/// dissimilarity matrix `x` (`precomputed`): 2-opt + Or-opt iterated local search on neighbour
/// lists. Returns (order, length, first local optimum length, kicks, accepted kicks).
#[pyfunction]
#[pyo3(signature = (x, precomputed, start, end, neighbours, kicks, time_limit, runs, kick_window, seed, init, n_jobs=None))]
#[allow(clippy::too_many_arguments)]
pub fn tsp_ils_order<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    precomputed: bool,
    start: Option<usize>,
    end: Option<usize>,
    neighbours: usize,
    kicks: Option<usize>,
    time_limit: Option<f64>,
    runs: usize,
    kick_window: usize,
    seed: u64,
    init: Option<PyReadonlyArray1<'py, i64>>,
    n_jobs: Option<isize>,
) -> PyResult<IlsOut<'py>> {
    let (data, dim) = rows(&x, "x")?;
    let init = match &init {
        Some(a) => Some(indices_from_i64(a.as_slice().map_err(|e| {
            pyo3::exceptions::PyTypeError::new_err(format!("`init`: {e}"))
        })?)),
        None => None,
    };
    let time_limit = time_limit.map(Duration::from_secs_f64);
    let params = ils_params(neighbours, kicks, time_limit, runs, kick_window, seed);
    let r: IlsResult = enter(py, n_jobs, |c: &AtomicBool| {
        if precomputed {
            let m = Dense::new(data, dim)?;
            solve_cancellable(&m, start, end, &params, init.as_deref(), Control::new(c))
        } else {
            let m = Points::new(data, dim)?;
            solve_cancellable(&m, start, end, &params, init.as_deref(), Control::new(c))
        }
    })?;
    let order = to_i64(r.order).into_pyarray(py);
    Ok((order, r.length, r.first_length, r.kicks, r.accepted))
}

/// olo_order(x, precomputed, merges, n_jobs=None)
/// --
///
/// Optimal leaf ordering of the dendrogram `merges` ((n - 1, 2) int64, SciPy linkage columns
/// 0 and 1) for Euclidean distances between the rows of `x` or the dissimilarity matrix `x`
/// (`precomputed`). Returns (order, path length).
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
    let mg = merges
        .as_slice()
        .map_err(|e| pyo3::exceptions::PyTypeError::new_err(format!("`merges`: {e}")))?;
    if merges.shape()[1] != 2 {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "`merges` must have 2 columns",
        ));
    }
    let pairs = pairs_from_i64(mg);
    let (order, length) = enter(py, n_jobs, |c: &AtomicBool| {
        if precomputed {
            optimal_leaf_order_with(&pairs, &Dense::new(data, dim)?, Control::new(c))
        } else {
            optimal_leaf_order_with(&pairs, &Points::new(data, dim)?, Control::new(c))
        }
    })?;
    Ok((to_i64(order).into_pyarray(py), length))
}
