//! Bindings of `vastml-order`: ConvoMap objective, local search, P-LS, branch and bound, TSP.
//!
//! Matrices arrive as C-contiguous uint32 codes with `n_colours` (0 = binary: codes 0/1).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use numpy::{IntoPyArray, PyArray2, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use vastml_order::bnb::{Bound as LowerBound, PairCosts, branch_and_bound};
use vastml_order::fit::fit;
use vastml_order::options::{FitOptions, matrix_from_codes};
use vastml_order::tsp::{hamming_distances, tsp_path_with};
use vastml_order::{Arrangement, Control, MoveKind, Objective, OrderError, Pattern, Progress};

use crate::door::enter;
use crate::errors::ToPyErr;
use crate::progress;
use crate::tsp::order_to_py;

fn perr(e: OrderError) -> PyErr {
    e.to_pyerr()
}

fn matrix(codes: &PyReadonlyArray2<'_, u32>, n_colours: usize) -> PyResult<vastml_order::Matrix> {
    let s = codes
        .as_slice()
        .map_err(|_| PyTypeError::new_err("`matrix` must be a C-contiguous uint32 array"))?;
    matrix_from_codes(codes.shape()[0], codes.shape()[1], s, n_colours).map_err(perr)
}

fn objective(
    kernel: &str,
    kernel_size: (usize, usize),
    weights: Option<PyReadonlyArray2<'_, f64>>,
    padding: &str,
    error: &str,
) -> PyResult<Objective> {
    let w = match &weights {
        Some(w) => Some((
            w.shape()[0],
            w.shape()[1],
            w.as_slice().map_err(|_| {
                PyTypeError::new_err("`kernel` weights must be a C-contiguous float64 array")
            })?,
        )),
        None => None,
    };
    vastml_order::options::objective(kernel, kernel_size, w, padding, error).map_err(perr)
}

fn item<'py, T: pyo3::conversion::FromPyObjectOwned<'py>>(
    d: &Bound<'py, PyDict>,
    key: &str,
) -> PyResult<T> {
    let v = d.get_item(key)?;
    let v = v.ok_or_else(|| PyValueError::new_err(format!("missing option {key:?}")))?;
    v.extract::<T>().map_err(Into::into)
}

/// The [`FitOptions`] of the dict the estimator passes (one key per field).
fn fit_options(d: &Bound<'_, PyDict>) -> PyResult<FitOptions> {
    Ok(FitOptions {
        init: item(d, "init")?,
        method: item(d, "method")?,
        moves: item(d, "moves")?,
        max_iter: item(d, "max_iter")?,
        segment_length: item(d, "segment_length")?,
        reaction: item(d, "reaction")?,
        stop_threshold: item(d, "stop_threshold")?,
        accept_ties: item(d, "accept_ties")?,
        axes: item(d, "axes")?,
        swap_radius: item(d, "swap_radius")?,
        max_block: item(d, "max_block")?,
        tolerance: item(d, "tolerance")?,
        schedule: item(d, "schedule")?,
        n_blocks: item(d, "n_blocks")?,
        seed: item(d, "seed")?,
        recolor: item(d, "recolor")?,
        kmax_k: item(d, "kmax_k")?,
        restarts: item(d, "restarts")?,
        time_budget: item(d, "time_budget")?,
        polish: item(d, "polish")?,
    })
}

/// convolution_error(codes, n_colours, kernel, kernel_size, kernel_weights, padding, error, row_order, col_order, n_jobs=None)
/// --
///
/// The ones-only ConvoMap error of the matrix shown in the given orders.
#[pyfunction]
#[pyo3(signature = (codes, n_colours, kernel, kernel_size, kernel_weights, padding, error, row_order=None, col_order=None, n_jobs=None))]
#[allow(clippy::too_many_arguments)]
pub fn convolution_error(
    py: Python<'_>,
    codes: PyReadonlyArray2<'_, u32>,
    n_colours: usize,
    kernel: &str,
    kernel_size: (usize, usize),
    kernel_weights: Option<PyReadonlyArray2<'_, f64>>,
    padding: &str,
    error: &str,
    row_order: Option<Vec<usize>>,
    col_order: Option<Vec<usize>>,
    n_jobs: Option<isize>,
) -> PyResult<f64> {
    let m = matrix(&codes, n_colours)?;
    let obj = objective(kernel, kernel_size, kernel_weights, padding, error)?;
    enter(py, n_jobs, |cancel: &AtomicBool| {
        Arrangement::new_cancellable(m, obj, row_order.as_deref(), col_order.as_deref(), cancel)
            .map(|a| a.error())
    })
}

/// Result of `convomap_fit`: (row_order, col_order, error, history, move_weights,
/// colour maps (n_cols x n_colours, row-major; empty for binary), stopped by the callback).
type FitResult = (
    Vec<usize>,
    Vec<usize>,
    f64,
    Vec<(String, f64)>,
    Vec<(String, f64)>,
    Vec<u8>,
    bool,
);

/// convomap_fit(codes, n_colours, kernel, kernel_size, kernel_weights, padding, error, row_order, col_order, options, n_jobs=None, progress=None)
/// --
///
/// TSP initial order (optional) then local search or the P-LS pipeline. `options` is a dict
/// with one key per field of `vastml_order::options::FitOptions`; `progress(stage, step,
/// error, row_order, col_order)` is called along the way (True stops).
#[pyfunction]
#[pyo3(signature = (codes, n_colours, kernel, kernel_size, kernel_weights, padding, error,
    row_order, col_order, options, n_jobs=None, progress=None))]
#[allow(clippy::too_many_arguments)]
pub fn convomap_fit(
    py: Python<'_>,
    codes: PyReadonlyArray2<'_, u32>,
    n_colours: usize,
    kernel: &str,
    kernel_size: (usize, usize),
    kernel_weights: Option<PyReadonlyArray2<'_, f64>>,
    padding: &str,
    error: &str,
    row_order: Option<Vec<usize>>,
    col_order: Option<Vec<usize>>,
    options: &Bound<'_, PyDict>,
    n_jobs: Option<isize>,
    progress: Option<Py<PyAny>>,
) -> PyResult<FitResult> {
    let m = matrix(&codes, n_colours)?;
    let obj = objective(kernel, kernel_size, kernel_weights, padding, error)?;
    let callback_error: Arc<Mutex<Option<PyErr>>> = Default::default();
    let hook = progress.map(|cb| python_progress(cb, callback_error.clone()));
    let params = fit_options(options)?.params(hook).map_err(perr)?;
    let (rows, cols) = (row_order.as_deref(), col_order.as_deref());
    let result = enter(py, n_jobs, |cancel: &AtomicBool| {
        fit(m, obj, rows, cols, &params, cancel)
    });
    if let Some(e) = callback_error.lock().ok().and_then(|mut g| g.take()) {
        return Err(e);
    }
    let r = result?;
    let maps = r.colour_maps;
    Ok((
        r.row_order,
        r.col_order,
        r.error,
        r.history,
        r.move_weights,
        maps,
        r.stopped,
    ))
}

/// A Rust progress hook that calls the Python `callback(stage, step, error, row_order,
/// col_order)`: a true result
/// asks the fit to stop; an exception it raises stops the fit and is kept in `slot` to be
/// raised after.
fn python_progress(cb: Py<PyAny>, slot: Arc<Mutex<Option<PyErr>>>) -> Progress {
    Progress(Arc::new(
        move |stage: &str, step: usize, arr: &Arrangement| {
            let args = (stage, step, arr.error(), arr.order(0), arr.order(1));
            Python::attach(|py| match cb.call1(py, args) {
                Ok(stop) => !stop.is_truthy(py).unwrap_or(false),
                Err(e) => {
                    if let Ok(mut g) = slot.lock() {
                        g.get_or_insert(e);
                    }
                    false
                }
            })
        },
    ))
}

/// tsp_order(codes, n_colours, axis) -> list[int]
/// --
///
/// Greedy + 2-opt open path over the rows (axis 0) or columns (axis 1), Hamming distances.
#[pyfunction]
#[pyo3(signature = (codes, n_colours, axis, n_jobs=None))]
pub fn tsp_order(
    py: Python<'_>,
    codes: PyReadonlyArray2<'_, u32>,
    n_colours: usize,
    axis: usize,
    n_jobs: Option<isize>,
) -> PyResult<Vec<usize>> {
    if axis > 1 {
        return Err(PyValueError::new_err("`axis` must be 0 or 1"));
    }
    let m = matrix(&codes, n_colours)?;
    let n = if axis == 0 { m.n_rows() } else { m.n_cols() };
    enter(py, n_jobs, |c: &AtomicBool| {
        tsp_path_with(&hamming_distances(&m, axis), n, Control::new(c))
    })
}

/// branch_and_bound_order(codes, n_colours, kernel, kernel_size, kernel_weights, col_order, bound, initial, n_jobs=None, progress=None)
/// --
///
/// Exact row order minimising the ConvoMap error with zero padding: (order, error, nodes,
/// stopped). `progress(k, cost, order)` is called at every better incumbent; True stops
/// with the best order so far.
#[pyfunction]
#[pyo3(signature = (codes, n_colours, kernel, kernel_size, kernel_weights, col_order, bound, initial, n_jobs=None, progress=None))]
#[allow(clippy::too_many_arguments)]
pub fn branch_and_bound_order(
    py: Python<'_>,
    codes: PyReadonlyArray2<'_, u32>,
    n_colours: usize,
    kernel: &str,
    kernel_size: (usize, usize),
    kernel_weights: Option<PyReadonlyArray2<'_, f64>>,
    col_order: Option<Vec<usize>>,
    bound: &str,
    initial: Option<Vec<usize>>,
    n_jobs: Option<isize>,
    progress: Option<Py<PyAny>>,
) -> PyResult<(Vec<usize>, f64, u64, bool)> {
    let m = matrix(&codes, n_colours)?;
    let obj = objective(kernel, kernel_size, kernel_weights, "zero", "abs")?;
    let bound: LowerBound = bound.parse().map_err(perr)?;
    let hook = progress::hook(progress, order_to_py);
    let r = enter(py, n_jobs, |cancel: &AtomicBool| {
        let pc = PairCosts::convomap(&m, &obj, col_order.as_deref())?;
        let control = progress::control(cancel, hook.as_ref());
        let r = branch_and_bound(&pc, initial.as_deref(), bound, control)?;
        let err =
            Arrangement::new_cancellable(m, obj, Some(&r.order), col_order.as_deref(), cancel)?
                .error();
        Ok::<_, OrderError>((r.order, err, r.nodes, r.stopped))
    });
    if let Some(h) = &hook {
        h.finish()?;
    }
    r
}

/// planted_matrix(pattern, size=300, noise=0.0, seed=545173132)
/// --
///
/// The thesis's planted binary matrix (java.util.Random draws), uint8 size x size.
#[pyfunction]
#[pyo3(signature = (pattern, size=300, noise=0.0, seed=vastml_order::THESIS_SEED))]
pub fn planted_matrix<'py>(
    py: Python<'py>,
    pattern: &str,
    size: usize,
    noise: f64,
    seed: i64,
) -> PyResult<Bound<'py, PyArray2<u8>>> {
    let p: Pattern = pattern.parse().map_err(perr)?;
    let v = vastml_order::planted(p, size, noise, seed).map_err(perr)?;
    numpy::ndarray::Array2::from_shape_vec((size, size), v)
        .map_err(|e| PyValueError::new_err(e.to_string()))
        .map(|a| a.into_pyarray(py))
}

/// planted_categorical(size=300, seed=545173132)
/// --
///
/// The thesis's categorical planted matrix (6 colours), uint32 size x size.
#[pyfunction]
#[pyo3(signature = (size=300, seed=vastml_order::THESIS_SEED))]
pub fn planted_categorical<'py>(
    py: Python<'py>,
    size: usize,
    seed: i64,
) -> PyResult<Bound<'py, PyArray2<u32>>> {
    let v = vastml_order::planted_categorical(size, seed).map_err(perr)?;
    numpy::ndarray::Array2::from_shape_vec((size, size), v)
        .map_err(|e| PyValueError::new_err(e.to_string()))
        .map(|a| a.into_pyarray(py))
}

/// time_moves(codes, n_colours, kernel, kernel_size, padding, n_moves=200, seed=0, n_jobs=None)
/// --
///
/// Benchmark hook: mean seconds of one incremental move evaluation per move kind, and of one
/// full error recomputation (on the pool of n_jobs threads).
#[pyfunction]
#[pyo3(signature = (codes, n_colours, kernel, kernel_size, padding, n_moves=200, seed=0, n_jobs=None))]
#[allow(clippy::too_many_arguments)]
pub fn time_moves(
    py: Python<'_>,
    codes: PyReadonlyArray2<'_, u32>,
    n_colours: usize,
    kernel: &str,
    kernel_size: (usize, usize),
    padding: &str,
    n_moves: usize,
    seed: u64,
    n_jobs: Option<isize>,
) -> PyResult<(Vec<(String, f64)>, f64)> {
    let m = matrix(&codes, n_colours)?;
    let obj = objective(kernel, kernel_size, None, padding, "abs")?;
    enter(py, n_jobs, |_c: &AtomicBool| {
        let mut arr = Arrangement::new(m, obj, None, None)?;
        let (per, full) = vastml_order::time_moves(&mut arr, &MoveKind::ALL, n_moves, seed);
        Ok::<_, OrderError>((
            per.into_iter()
                .map(|(k, s)| (k.name().to_string(), s))
                .collect(),
            full,
        ))
    })
}

/// gradient_order(dissimilarities, weighted=False, n_jobs=None) -> (order, value, nodes)
/// --
///
/// Branch and bound maximising the anti-Robinson within-row-and-column gradient.
#[pyfunction]
#[pyo3(signature = (dissimilarities, weighted=false, n_jobs=None))]
pub fn gradient_order(
    py: Python<'_>,
    dissimilarities: PyReadonlyArray2<'_, f64>,
    weighted: bool,
    n_jobs: Option<isize>,
) -> PyResult<(Vec<usize>, f64, u64)> {
    let (d, n) = crate::arrays::rows(&dissimilarities, "dissimilarities")?;
    if d.len() != n * n {
        return Err(PyValueError::new_err(
            "`dissimilarities` must be a square matrix",
        ));
    }
    let kind = if weighted {
        vastml_order::gradient::Gradient::Weighted
    } else {
        vastml_order::gradient::Gradient::Unweighted
    };
    enter(py, n_jobs, |cancel: &AtomicBool| {
        vastml_order::gradient::gradient_order(d, n, kind, cancel)
            .map(|r| (r.order, r.value, r.nodes))
    })
}
