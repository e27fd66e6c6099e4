//! Bindings of the point TSP heuristics and TSP-means of `vastml-order`.
//!
//! Points arrive as C-contiguous float64 `(n, d)` arrays; orders leave as int64 arrays.

use std::sync::atomic::AtomicBool;

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use vastml_order::tsp_heuristics::{PathParams, Start, exact_path, path_length, solve_path};
use vastml_order::{TspMeansParams, tsp_means};

use crate::arrays::rows;
use crate::door::enter;
use crate::errors::ToPyErr;

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

/// tsp_means_order(x, levels, sample, seed, parallel_sweep, neighbours, exact_max, polish_window, n_jobs=None, local_kicks=0)
/// --
///
/// TSP-means ordering of the rows of `x`: (order, levels, n_kmeans, n_tsp, n_sweeps,
/// (tree, sweeps, polish) seconds, path length).
#[pyfunction]
#[pyo3(signature = (x, levels, sample, seed, parallel_sweep, neighbours, exact_max, polish_window, n_jobs=None, local_kicks=0))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
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
) -> PyResult<(
    Bound<'py, PyArray1<i64>>,
    usize,
    usize,
    usize,
    usize,
    (f64, f64, f64),
    f64,
)> {
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
    let (r, length) = enter(py, n_jobs, |c: &AtomicBool| {
        tsp_means(data, dim, &params, Some(c)).map(|r| {
            let length = path_length(data, dim, &r.order);
            (r, length)
        })
    })?;
    let s = r.stage_seconds;
    Ok((
        to_i64(r.order).into_pyarray(py),
        r.levels,
        r.n_kmeans,
        r.n_tsp,
        r.n_sweeps,
        (s[0], s[1], s[2]),
        length,
    ))
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
    let exact = match method {
        "exact" => true,
        "heuristic" => false,
        _ => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "`method` must be 'exact' or 'heuristic', got {method:?}"
            )));
        }
    };
    let order = enter(py, n_jobs, |_c: &AtomicBool| {
        if exact {
            exact_path(data, dim, start, end)
        } else {
            solve_path(data, dim, start, end, &params)
        }
    })?;
    Ok(to_i64(order).into_pyarray(py))
}
