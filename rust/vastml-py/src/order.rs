//! Bindings of `vastml-order`: ConvoMap objective, local search, P-LS, branch and bound, TSP.
//!
//! A matrix arrives as `(codes, n_colours)`: C-contiguous uint32 codes (`n_colours` 0 =
//! binary, codes 0/1); an objective as a dict of kernel, kernel_size, kernel_weights, padding
//! and error.

use std::sync::{Arc, Mutex};

use numpy::{PyArray2, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use vastml_order::bnb::{Bound as LowerBound, convomap_row_order};
use vastml_order::fit::fit;
use vastml_order::gradient::Gradient;
use vastml_order::options::{FitOptions, matrix_from_codes};
use vastml_order::tsp::{hamming_distances, tsp_path_with};
use vastml_order::{
    Arrangement, Control, ErrorKind, KernelKind, Matrix, MoveKind, Objective, OrderError, Padding,
    Pattern, Progress,
};

use crate::arrays::matrix;
use crate::door::enter;
use crate::errors::ToPyErr;
use crate::options::{Dict, FromDict, Options, Wrap};
use crate::progress::{self, finish};

fn perr(e: OrderError) -> PyErr {
    e.to_pyerr()
}

/// A matrix as `(codes, n_colours)`.
#[derive(FromPyObject)]
pub struct MatrixArgs<'py>(PyReadonlyArray2<'py, u32>, usize);

impl MatrixArgs<'_> {
    fn matrix(&self) -> PyResult<Matrix> {
        let MatrixArgs(codes, n_colours) = self;
        let s = codes
            .as_slice()
            .map_err(|_| PyTypeError::new_err("`matrix` must be a C-contiguous uint32 array"))?;
        let (m, n) = (codes.shape()[0], codes.shape()[1]);
        matrix_from_codes(m, n, s, *n_colours).map_err(perr)
    }
}

/// A ConvoMap objective: kernel (name, size, optional weights), padding and error kind.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct ObjectiveArgs<'py> {
    kernel: Wrap<KernelKind>,
    kernel_size: (usize, usize),
    kernel_weights: Option<PyReadonlyArray2<'py, f64>>,
    padding: Wrap<Padding>,
    error: Wrap<ErrorKind>,
}

impl ObjectiveArgs<'_> {
    fn objective(&self) -> PyResult<Objective> {
        let weights = match &self.kernel_weights {
            Some(w) => Some((
                w.shape()[0],
                w.shape()[1],
                w.as_slice().map_err(|_| {
                    PyTypeError::new_err("`kernel` weights must be a C-contiguous float64 array")
                })?,
            )),
            None => None,
        };
        let (kind, size) = (self.kernel.0, self.kernel_size);
        let (padding, error) = (self.padding.0, self.error.0);
        vastml_order::options::objective(kind, size, weights, padding, error).map_err(perr)
    }
}

/// Optional row and column orders.
pub type Orders = (Option<Vec<usize>>, Option<Vec<usize>>);

/// The ones-only ConvoMap error of the matrix shown in the given orders.
#[pyfunction]
#[pyo3(signature = (matrix, objective, orders, n_jobs=None))]
pub fn convolution_error(
    py: Python<'_>,
    matrix: MatrixArgs<'_>,
    objective: ObjectiveArgs<'_>,
    orders: Orders,
    n_jobs: Option<isize>,
) -> PyResult<f64> {
    let (m, obj) = (matrix.matrix()?, objective.objective()?);
    let (rows, cols) = (orders.0.as_deref(), orders.1.as_deref());
    enter(py, n_jobs, |cancel| {
        Arrangement::new_cancellable(m, obj, rows, cols, cancel).map(|a| a.error())
    })
}

/// Result of `convomap_fit`: (row_order, col_order, error, history, move_weights,
/// colour maps (n_cols x n_colours, row-major; empty for binary), stopped by the callback).
pub type FitResult = (
    Vec<usize>,
    Vec<usize>,
    f64,
    Vec<(String, f64)>,
    Vec<(String, f64)>,
    Vec<u8>,
    bool,
);

/// The dict the estimator passes, one key per field.
impl FromDict for FitOptions {
    fn from_dict(d: &Options<'_>) -> PyResult<Self> {
        macro_rules! read {
            ($($field:ident),+) => { FitOptions { $($field: d.get(stringify!($field))?),+ } };
        }
        Ok(read!(
            init,
            method,
            moves,
            max_iter,
            segment_length,
            reaction,
            stop_threshold,
            accept_ties,
            axes,
            swap_radius,
            max_block,
            tolerance,
            schedule,
            n_blocks,
            seed,
            recolor,
            kmax_k,
            restarts,
            time_budget,
            polish
        ))
    }
}

/// TSP initial order (optional) then local search or the P-LS pipeline; `progress(stage,
/// step, error, row_order, col_order)` is called along the way (True stops).
#[pyfunction]
#[pyo3(signature = (matrix, objective, orders, options, n_jobs=None, progress=None))]
pub fn convomap_fit(
    py: Python<'_>,
    matrix: MatrixArgs<'_>,
    objective: ObjectiveArgs<'_>,
    orders: Orders,
    options: Dict<FitOptions>,
    n_jobs: Option<isize>,
    progress: Option<Py<PyAny>>,
) -> PyResult<FitResult> {
    let (m, obj) = (matrix.matrix()?, objective.objective()?);
    let callback_error: Arc<Mutex<Option<PyErr>>> = Default::default();
    let hook = progress.map(|cb| python_progress(cb, callback_error.clone()));
    let params = options.0.params(hook).map_err(perr)?;
    let (rows, cols) = (orders.0.as_deref(), orders.1.as_deref());
    let result = enter(py, n_jobs, |cancel| {
        fit(m, obj, rows, cols, &params, cancel)
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

/// A Rust progress hook that calls the Python `callback(stage, step, error, row_order,
/// col_order)`: a true result asks the fit to stop; an exception it raises stops the fit and
/// is kept in `slot`.
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

/// Greedy + 2-opt open path over the rows (axis 0) or columns (axis 1), Hamming distances.
#[pyfunction]
#[pyo3(signature = (matrix, axis, n_jobs=None))]
pub fn tsp_order(
    py: Python<'_>,
    matrix: MatrixArgs<'_>,
    axis: usize,
    n_jobs: Option<isize>,
) -> PyResult<Vec<usize>> {
    if axis > 1 {
        return Err(PyValueError::new_err("`axis` must be 0 or 1"));
    }
    let m = matrix.matrix()?;
    let n = if axis == 0 { m.n_rows() } else { m.n_cols() };
    enter(py, n_jobs, |c| {
        tsp_path_with(&hamming_distances(&m, axis), n, Control::new(c))
    })
}

/// Branch and bound's options: the column order, the lower bound and an initial row order.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct BnbArgs {
    col_order: Option<Vec<usize>>,
    bound: Wrap<LowerBound>,
    initial: Option<Vec<usize>>,
}

/// Exact row order minimising the ConvoMap error with zero padding: (order, error, nodes,
/// stopped); `progress(k, cost, order)` at every better incumbent (True stops).
#[pyfunction]
#[pyo3(signature = (matrix, objective, options, n_jobs=None, progress=None))]
pub fn branch_and_bound_order(
    py: Python<'_>,
    matrix: MatrixArgs<'_>,
    objective: ObjectiveArgs<'_>,
    options: BnbArgs,
    n_jobs: Option<isize>,
    progress: Option<Py<PyAny>>,
) -> PyResult<(Vec<usize>, f64, u64, bool)> {
    let (m, obj) = (matrix.matrix()?, objective.objective()?);
    let (cols, initial) = (options.col_order.as_deref(), options.initial.as_deref());
    let hook = progress::hook(progress, progress::order_state);
    let r = enter(py, n_jobs, |cancel| {
        let control = progress::control(cancel, hook.as_ref());
        convomap_row_order(m, obj, cols, initial, options.bound.0, control)
    });
    finish(hook, r).map(|(r, error)| (r.order, error, r.nodes, r.stopped))
}

/// The thesis's planted binary matrix (java.util.Random draws), uint8 size x size.
#[pyfunction]
#[pyo3(signature = (pattern, size=300, noise=0.0, seed=vastml_order::THESIS_SEED))]
pub fn planted_matrix<'py>(
    py: Python<'py>,
    pattern: Wrap<Pattern>,
    size: usize,
    noise: f64,
    seed: i64,
) -> PyResult<Bound<'py, PyArray2<u8>>> {
    let v = vastml_order::planted(pattern.0, size, noise, seed).map_err(perr)?;
    matrix(py, v, size, size)
}

/// The thesis's categorical planted matrix (6 colours), uint32 size x size.
#[pyfunction]
#[pyo3(signature = (size=300, seed=vastml_order::THESIS_SEED))]
pub fn planted_categorical<'py>(
    py: Python<'py>,
    size: usize,
    seed: i64,
) -> PyResult<Bound<'py, PyArray2<u32>>> {
    let v = vastml_order::planted_categorical(size, seed).map_err(perr)?;
    matrix(py, v, size, size)
}

/// Benchmark hook: mean seconds of one incremental move evaluation per move kind, and of one
/// full error recomputation (on the pool of n_jobs threads).
#[pyfunction]
#[pyo3(signature = (matrix, objective, n_moves=200, seed=0, n_jobs=None))]
pub fn time_moves(
    py: Python<'_>,
    matrix: MatrixArgs<'_>,
    objective: ObjectiveArgs<'_>,
    n_moves: usize,
    seed: u64,
    n_jobs: Option<isize>,
) -> PyResult<(Vec<(String, f64)>, f64)> {
    let (m, obj) = (matrix.matrix()?, objective.objective()?);
    enter(py, n_jobs, |_| {
        let mut arr = Arrangement::new(m, obj, None, None)?;
        let (per, full) = vastml_order::time_moves(&mut arr, &MoveKind::ALL, n_moves, seed);
        let named = per
            .into_iter()
            .map(|(k, s)| (k.name().to_string(), s))
            .collect();
        Ok::<_, OrderError>((named, full))
    })
}

/// Branch and bound maximising the anti-Robinson within-row-and-column gradient: (order,
/// value, nodes).
#[pyfunction]
#[pyo3(signature = (dissimilarities, weighted=false, n_jobs=None))]
pub fn gradient_order(
    py: Python<'_>,
    dissimilarities: PyReadonlyArray2<'_, f64>,
    weighted: bool,
    n_jobs: Option<isize>,
) -> PyResult<(Vec<usize>, f64, u64)> {
    let (d, n) = crate::arrays::rows(&dissimilarities, "dissimilarities")?;
    let kind = match weighted {
        true => Gradient::Weighted,
        false => Gradient::Unweighted,
    };
    enter(py, n_jobs, |cancel| {
        vastml_order::gradient::gradient_order(d, n, kind, cancel)
            .map(|r| (r.order, r.value, r.nodes))
    })
}
