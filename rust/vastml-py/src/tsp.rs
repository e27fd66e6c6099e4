//! Bindings of the point TSP heuristics and TSP-means of `vastml-order`.
//!
//! Points arrive as C-contiguous float64 `(n, d)` arrays, parameters as a dict; orders leave
//! as int64 arrays.

use numpy::{PyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use vastml_order::options::PathMethod;
use vastml_order::tsp_heuristics::{PathParams, Start, exact_path, path_length, solve_path_with};
use vastml_order::{TspMeansParams, tsp_means};

use crate::arrays::rows;
use crate::door::enter;
use crate::options::Wrap;
use crate::progress::{self, finish};

/// An order as an int64 array.
pub fn order_array<'py>(py: Python<'py>, order: &[usize]) -> Bound<'py, PyArray1<i64>> {
    PyArray1::from_iter(py, order.iter().map(|&i| i as i64))
}

/// An order as the int64 array a progress callback receives.
pub fn order_to_py(py: Python<'_>, order: &[usize]) -> PyResult<Py<PyAny>> {
    Ok(order_array(py, order).into_any().unbind())
}

/// TSP-means' parameters, as `TSPMeans` names them for the core.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct TspMeansArgs {
    levels: Option<usize>,
    sample: usize,
    seed: u64,
    parallel_sweep: bool,
    neighbours: usize,
    exact_max: usize,
    polish_window: usize,
    local_kicks: usize,
}

impl From<TspMeansArgs> for TspMeansParams {
    fn from(a: TspMeansArgs) -> Self {
        let path = PathParams {
            start: Start::Greedy,
            neighbours: a.neighbours,
            exact_max: a.exact_max,
            kicks_per_city: a.local_kicks,
            ..PathParams::default()
        };
        let (levels, sample, seed) = (a.levels, a.sample, a.seed);
        let (parallel_sweep, polish_window) = (a.parallel_sweep, a.polish_window);
        TspMeansParams {
            levels,
            sample,
            seed,
            parallel_sweep,
            path,
            polish_window,
            ..Default::default()
        }
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
    params: TspMeansArgs,
    n_jobs: Option<isize>,
    progress: Option<Py<PyAny>>,
) -> PyResult<TspMeansOut<'py>> {
    let (data, dim) = rows(&x, "x")?;
    let params = TspMeansParams::from(params);
    let hook = progress::hook(progress, order_to_py);
    let r = enter(py, n_jobs, |c| {
        let r = tsp_means(data, dim, &params, progress::control(c, hook.as_ref()))?;
        Ok::<_, vastml_order::OrderError>((path_length(data, dim, &r.order), r))
    });
    let (length, r) = finish(hook, r)?;
    let (counts, s) = ((r.levels, r.n_kmeans, r.n_tsp, r.n_sweeps), r.stage_seconds);
    Ok((
        order_array(py, &r.order),
        counts,
        (s[0], s[1], s[2]),
        length,
        r.stopped,
    ))
}

/// An open path's parameters: `method` ("exact" or "heuristic"), `init` (the start of the
/// heuristic), `neighbours` and `or_opt`.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct PathArgs {
    method: Wrap<PathMethod>,
    init: Wrap<Start>,
    neighbours: usize,
    or_opt: bool,
}

/// Open path through the rows of `x`, from `ends.0` to `ends.1` when given.
#[pyfunction]
#[pyo3(signature = (x, ends, params, n_jobs=None))]
pub fn tsp_path_order<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    ends: (Option<usize>, Option<usize>),
    params: PathArgs,
    n_jobs: Option<isize>,
) -> PyResult<Bound<'py, PyArray1<i64>>> {
    let (data, dim) = rows(&x, "x")?;
    let (start, end) = ends;
    let path = PathParams {
        start: params.init.0,
        neighbours: params.neighbours,
        or_opt: params.or_opt,
        exact_max: 0,
        ..PathParams::default()
    };
    let order = enter(py, n_jobs, |c| match params.method.0 {
        PathMethod::Exact => exact_path(data, dim, start, end),
        PathMethod::Heuristic => solve_path_with(data, dim, start, end, &path, c),
    })?;
    Ok(order_array(py, &order))
}
