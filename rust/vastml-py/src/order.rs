//! Bindings of `vastml-order`: ConvoMap objective, local search, P-LS, branch and bound, TSP.
//!
//! Matrices arrive as C-contiguous uint32 codes with `n_colours` (0 = binary: codes 0/1).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use numpy::{IntoPyArray, PyArray2, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use vastml_order::bnb::{Bound as LowerBound, PairCosts, branch_and_bound};
use vastml_order::fit::{FitParams, fit};
use vastml_order::tsp::{hamming_distances, tsp_path};
use vastml_order::{
    Arrangement, ErrorKind, Kernel, KernelKind, Matrix, MoveConfig, MoveKind, Objective,
    OrderError, Pattern, PlsParams, Progress, SearchParams, Step, Tolerance,
};

use crate::door::enter;
use crate::errors::ToPyErr;

fn perr(e: OrderError) -> PyErr {
    e.to_pyerr()
}

fn matrix(codes: &PyReadonlyArray2<'_, u32>, n_colours: usize) -> PyResult<Matrix> {
    if !codes.is_c_contiguous() {
        return Err(PyTypeError::new_err(
            "`matrix` must be a C-contiguous uint32 array",
        ));
    }
    let (m, n) = (codes.shape()[0], codes.shape()[1]);
    let s = codes
        .as_slice()
        .map_err(|e| PyTypeError::new_err(format!("`matrix`: {e}")))?;
    if n_colours == 0 {
        let mut v = Vec::with_capacity(s.len());
        for (i, &x) in s.iter().enumerate() {
            if x > 1 {
                return Err(PyValueError::new_err(format!(
                    "binary matrices hold only 0 and 1; found {x} at row {}, column {}",
                    i / n,
                    i % n
                )));
            }
            v.push(x as u8);
        }
        Matrix::binary(m, n, &v).map_err(perr)
    } else {
        Matrix::categorical(m, n, s, n_colours).map_err(perr)
    }
}

fn objective(
    kernel: &str,
    kernel_size: (usize, usize),
    weights: Option<PyReadonlyArray2<'_, f64>>,
    padding: &str,
    error: &str,
) -> PyResult<Objective> {
    let kernel = match weights {
        Some(w) => {
            let (r, c) = (w.shape()[0], w.shape()[1]);
            let v: Vec<f64> = w.as_array().iter().copied().collect();
            Kernel::from_weights(r, c, &v).map_err(perr)?
        }
        None => {
            let kind: KernelKind = kernel.parse().map_err(perr)?;
            Kernel::new(kind, kernel_size.0, kernel_size.1).map_err(perr)?
        }
    };
    Ok(Objective {
        kernel,
        padding: padding.parse().map_err(perr)?,
        kind: error.parse::<ErrorKind>().map_err(perr)?,
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
    enter(py, n_jobs, |_cancel: &AtomicBool| {
        Arrangement::new(m, obj, row_order.as_deref(), col_order.as_deref()).map(|a| a.error())
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

/// convomap_fit(codes, n_colours, kernel, kernel_size, kernel_weights, padding, error, ...)
/// --
///
/// TSP initial order (optional) then local search or the P-LS pipeline.
#[pyfunction]
#[pyo3(signature = (codes, n_colours, kernel, kernel_size, kernel_weights, padding, error,
    row_order, col_order, init, method, moves, max_iter, segment_length, reaction,
    stop_threshold, accept_ties, axes_name, swap_radius, max_block, tolerance, schedule,
    n_blocks, seed, n_jobs=None, recolor=false, kmax_k=5, progress=None, restarts=0,
    time_budget=None, polish=0))]
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
    init: &str,
    method: &str,
    moves: Vec<String>,
    max_iter: usize,
    segment_length: usize,
    reaction: f64,
    stop_threshold: Option<f64>,
    accept_ties: bool,
    axes_name: &str,
    swap_radius: usize,
    max_block: usize,
    tolerance: (usize, usize, usize, f64),
    schedule: Vec<String>,
    n_blocks: usize,
    seed: u64,
    n_jobs: Option<isize>,
    recolor: bool,
    kmax_k: usize,
    progress: Option<Py<PyAny>>,
    restarts: usize,
    time_budget: Option<f64>,
    polish: usize,
) -> PyResult<FitResult> {
    let m = matrix(&codes, n_colours)?;
    let callback_error: Arc<Mutex<Option<PyErr>>> = Default::default();
    let moves = moves
        .iter()
        .map(|s| s.parse())
        .collect::<Result<Vec<MoveKind>, _>>()
        .map_err(perr)?;
    let schedule = schedule
        .iter()
        .map(|s| Step::parse(s, kmax_k))
        .collect::<Result<Vec<_>, _>>()
        .map_err(perr)?;
    let params = FitParams {
        init: init.parse().map_err(perr)?,
        method: method.parse().map_err(perr)?,
        pls: PlsParams {
            search: SearchParams {
                moves,
                max_iter,
                segment: segment_length,
                reaction,
                stop_threshold,
                accept_ties,
                axes: axes_name.parse().map_err(perr)?,
                config: MoveConfig {
                    swap_radius,
                    max_block,
                    tolerance: Tolerance {
                        zeros: tolerance.0,
                        extra_zeros: tolerance.1,
                        per_ones: tolerance.2,
                        min_density: tolerance.3,
                    },
                    recolour: recolor,
                },
                seed,
                progress: progress.map(|cb| python_progress(cb, callback_error.clone())),
            },
            schedule,
            n_blocks,
            restarts,
            time_budget,
            polish: (polish > 0).then_some(polish),
        },
    };
    let obj = objective(kernel, kernel_size, kernel_weights, padding, error)?;
    let result = enter(py, n_jobs, |cancel: &AtomicBool| {
        fit(
            m,
            obj,
            row_order.as_deref(),
            col_order.as_deref(),
            &params,
            cancel,
        )
    });
    if let Some(e) = callback_error.lock().ok().and_then(|mut g| g.take()) {
        return Err(e);
    }
    let r = result?;
    Ok((
        r.row_order,
        r.col_order,
        r.error,
        r.history,
        r.move_weights,
        r.colour_maps,
        r.stopped,
    ))
}

/// A Rust progress hook that calls the Python `callback(stage, step, error)`: a true result
/// asks the fit to stop; an exception it raises stops the fit and is kept in `slot` to be
/// raised after.
fn python_progress(cb: Py<PyAny>, slot: Arc<Mutex<Option<PyErr>>>) -> Progress {
    Progress(Arc::new(move |stage: &str, step: usize, err: f64| {
        Python::attach(|py| match cb.call1(py, (stage, step, err)) {
            Ok(stop) => !stop.is_truthy(py).unwrap_or(false),
            Err(e) => {
                if let Ok(mut g) = slot.lock() {
                    g.get_or_insert(e);
                }
                false
            }
        })
    }))
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
    enter(py, n_jobs, |_c: &AtomicBool| {
        let n = if axis == 0 { m.n_rows() } else { m.n_cols() };
        tsp_path(&hamming_distances(&m, axis), n)
    })
}

/// branch_and_bound_order(codes, n_colours, kernel, kernel_size, kernel_weights, col_order, bound, initial, n_jobs=None)
/// --
///
/// Exact row order minimising the ConvoMap error with zero padding: (order, error, nodes).
#[pyfunction]
#[pyo3(signature = (codes, n_colours, kernel, kernel_size, kernel_weights, col_order, bound, initial, n_jobs=None))]
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
) -> PyResult<(Vec<usize>, f64, u64)> {
    let m = matrix(&codes, n_colours)?;
    let obj = objective(kernel, kernel_size, kernel_weights, "zero", "abs")?;
    let bound = match bound {
        "fast" => LowerBound::Fast,
        "slow" => LowerBound::Slow,
        o => {
            return Err(PyValueError::new_err(format!(
                "`bound` must be 'fast' or 'slow', got {o:?}"
            )));
        }
    };
    enter(py, n_jobs, |cancel: &AtomicBool| {
        let pc = PairCosts::convomap(&m, &obj, col_order.as_deref())?;
        let r = branch_and_bound(&pc, initial.as_deref(), bound, cancel)?;
        let err = Arrangement::new(m, obj, Some(&r.order), col_order.as_deref())?.error();
        Ok::<_, OrderError>((r.order, err, r.nodes))
    })
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
