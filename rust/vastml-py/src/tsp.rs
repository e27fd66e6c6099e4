//! Bindings of the point TSP heuristics and TSP-means of `vastml-order`.
//!
//! Points arrive as C-contiguous float64 `(n, d)` arrays, parameters as a dict; orders leave
//! as int64 arrays.

use numpy::{PyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use vastml_order::options::PathMethod;
use vastml_order::tsp_heuristics::{PathParams, Start, exact_path, path_length, solve_path_with};
use vastml_order::{TspMeansParams, tsp_means};

use crate::arrays::{index_array, rows};
use crate::door::enter;
use crate::options::{Dict, FromDict, Options};
use crate::progress::{self, finish};

/// TSP-means' parameters, as `TSPMeans` names them; the paths start greedy.
impl FromDict for TspMeansParams {
    fn from_dict(d: &Options<'_>) -> PyResult<Self> {
        let path = PathParams {
            start: Start::Greedy,
            neighbours: d.get("neighbours")?,
            exact_max: d.get("exact_max")?,
            kicks_per_city: d.get("local_kicks")?,
            ..PathParams::default()
        };
        Ok(TspMeansParams {
            levels: d.get("levels")?,
            sample: d.get("sample")?,
            seed: d.get("seed")?,
            parallel_sweep: d.get("parallel_sweep")?,
            path,
            polish_window: d.get("polish_window")?,
            ..Default::default()
        })
    }
}

/// What `tsp_means_order` returns: (order, (levels, n_kmeans, n_tsp, n_sweeps), (tree,
/// sweeps, polish) seconds, path length, stopped by the progress hook).
pub type TspMeansOut<'py> = (
    Bound<'py, PyArray1<i64>>,
    (usize, usize, usize, usize),
    (f64, f64, f64),
    f64,
    bool,
);

/// TSP-means ordering of the rows of `x`; `progress(iteration, length, order)` after every
/// sweep and the polish (True stops with the order so far).
#[pyfunction]
#[pyo3(signature = (x, params, n_jobs=None, progress=None))]
pub fn tsp_means_order<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    params: Dict<TspMeansParams>,
    n_jobs: Option<isize>,
    progress: Option<Py<PyAny>>,
) -> PyResult<TspMeansOut<'py>> {
    let ((data, dim), params) = (rows(&x, "x")?, params.0);
    let hook = progress::hook(progress, progress::order_state);
    let r = enter(py, n_jobs, |c| {
        let r = tsp_means(data, dim, &params, progress::control(c, hook.as_ref()))?;
        Ok::<_, vastml_order::OrderError>((path_length(data, dim, &r.order), r))
    });
    let (length, r) = finish(hook, r)?;
    let (counts, s) = ((r.levels, r.n_kmeans, r.n_tsp, r.n_sweeps), r.stage_seconds);
    Ok((
        index_array(py, &r.order),
        counts,
        (s[0], s[1], s[2]),
        length,
        r.stopped,
    ))
}

/// An open path's parameters: `init` (the start of the heuristic), `neighbours`, `or_opt`.
impl FromDict for PathParams {
    fn from_dict(d: &Options<'_>) -> PyResult<Self> {
        Ok(PathParams {
            start: d.parse("init")?,
            neighbours: d.get("neighbours")?,
            or_opt: d.get("or_opt")?,
            exact_max: 0,
            ..PathParams::default()
        })
    }
}

/// The `method` key of `tsp_path_order`'s parameters: "exact" or "heuristic".
pub struct PathChoice(PathMethod);

impl FromDict for PathChoice {
    fn from_dict(d: &Options<'_>) -> PyResult<Self> {
        d.parse("method").map(PathChoice)
    }
}

/// Open path through the rows of `x`, from `ends.0` to `ends.1` when given.
#[pyfunction]
#[pyo3(signature = (x, ends, params, n_jobs=None))]
pub fn tsp_path_order<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    ends: (Option<usize>, Option<usize>),
    params: Dict<(PathChoice, PathParams)>,
    n_jobs: Option<isize>,
) -> PyResult<Bound<'py, PyArray1<i64>>> {
    let ((data, dim), (start, end)) = (rows(&x, "x")?, ends);
    let (PathChoice(method), path) = params.0;
    let order = enter(py, n_jobs, |c| match method {
        PathMethod::Exact => exact_path(data, dim, start, end),
        PathMethod::Heuristic => solve_path_with(data, dim, start, end, &path, c),
    })?;
    Ok(index_array(py, &order))
}
