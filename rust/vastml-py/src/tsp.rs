//! Bindings of the point TSP heuristics and TSP-means of `vastml-order`.
//!
//! Points arrive as C-contiguous float64 `(n, d)` arrays; orders leave as int64 arrays.

use std::sync::atomic::AtomicBool;

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use vastml_order::options::PathMethod;
use vastml_order::tsp_heuristics::{PathParams, Start, exact_path, path_length, solve_path_with};
use vastml_order::{OrderError, TspMeansParams, tsp_means};

use crate::arrays::rows;
use crate::door::enter;
use crate::errors::ToPyErr;
use crate::progress;

fn path_params(
    start: &str,
    neighbours: usize,
    or_opt: bool,
    exact_max: usize,
    kicks_per_city: usize,
) -> PyResult<PathParams> {
    Ok(PathParams {
        start: start.parse::<Start>().map_err(|e| e.to_pyerr())?,
        neighbours,
        or_opt,
        exact_max,
        kicks_per_city,
        ..PathParams::default()
    })
}

fn to_i64(v: Vec<usize>) -> Vec<i64> {
    v.into_iter().map(|i| i as i64).collect()
}

/// What `tsp_means_order` returns: (order, levels, n_kmeans, n_tsp, n_sweeps, (tree, sweeps,
/// polish) seconds, path length, stopped by the progress hook).
type TspMeansOut<'py> = (
    Bound<'py, PyArray1<i64>>,
    (usize, usize, usize, usize),
    (f64, f64, f64),
    f64,
    bool,
);

/// An order as the int64 array a progress callback receives.
pub fn order_to_py(py: Python<'_>, order: &[usize]) -> PyResult<Py<PyAny>> {
    Ok(PyArray1::from_iter(py, order.iter().map(|&i| i as i64))
        .into_any()
        .unbind())
}

/// tsp_means_order(x, levels, sample, seed, parallel_sweep, neighbours, exact_max, polish_window, n_jobs=None, local_kicks=0, progress=None)
/// --
///
/// TSP-means ordering of the rows of `x`: (order, (levels, n_kmeans, n_tsp, n_sweeps),
/// (tree, sweeps, polish) seconds, path length, stopped). `progress(iteration, length, order)`
/// is called after every sweep and after the polish; True stops with the order so far.
#[pyfunction]
#[pyo3(signature = (x, levels, sample, seed, parallel_sweep, neighbours, exact_max, polish_window, n_jobs=None, local_kicks=0, progress=None))]
#[allow(clippy::too_many_arguments)]
pub fn tsp_means_order<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    levels: Option<usize>,
    sample: usize,
    seed: u64,
    parallel_sweep: bool,
    neighbours: usize,
    exact_max: usize,
    polish_window: usize,
    n_jobs: Option<isize>,
    local_kicks: usize,
    progress: Option<Py<PyAny>>,
) -> PyResult<TspMeansOut<'py>> {
    let (data, dim) = rows(&x, "x")?;
    let params = TspMeansParams {
        levels,
        sample,
        seed,
        parallel_sweep,
        path: path_params("greedy", neighbours, true, exact_max, local_kicks)?,
        polish_window,
        ..TspMeansParams::default()
    };
    let hook = progress::hook(progress, order_to_py);
    let r = enter(py, n_jobs, |c: &AtomicBool| {
        tsp_means(data, dim, &params, progress::control(c, hook.as_ref()))
            .map(|r| (path_length(data, dim, &r.order), r))
    });
    if let Some(h) = &hook {
        h.finish()?;
    }
    let (length, r) = r?;
    let counts = (r.levels, r.n_kmeans, r.n_tsp, r.n_sweeps);
    let s = r.stage_seconds;
    let order = to_i64(r.order).into_pyarray(py);
    Ok((order, counts, (s[0], s[1], s[2]), length, r.stopped))
}

/// tsp_path_order(x, start, end, method, init, neighbours, or_opt, n_jobs=None)
/// --
///
/// Open path through the rows of `x`, from `start` to `end` when given: `method` "exact"
/// (Held-Karp, at most 16 free cities) or "heuristic" (`init` start, 2-opt, Or-opt on kNN lists).
#[pyfunction]
#[pyo3(signature = (x, start, end, method, init, neighbours, or_opt, n_jobs=None))]
#[allow(clippy::too_many_arguments)]
pub fn tsp_path_order<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    start: Option<usize>,
    end: Option<usize>,
    method: &str,
    init: &str,
    neighbours: usize,
    or_opt: bool,
    n_jobs: Option<isize>,
) -> PyResult<Bound<'py, PyArray1<i64>>> {
    let (data, dim) = rows(&x, "x")?;
    let params = path_params(init, neighbours, or_opt, 0, 0)?;
    let method: PathMethod = method.parse().map_err(|e: OrderError| e.to_pyerr())?;
    let order = enter(py, n_jobs, |c: &AtomicBool| match method {
        PathMethod::Exact => exact_path(data, dim, start, end),
        PathMethod::Heuristic => solve_path_with(data, dim, start, end, &params, c),
    })?;
    Ok(to_i64(order).into_pyarray(py))
}
