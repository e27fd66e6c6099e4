//! Bindings of `vastml-embed`: entropic affinities, embedding objectives, kernel sums.

use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use vastml_embed::affinity::{RootMethod, RootOptions, WarmStart, entropic_affinities};
use vastml_embed::{Csr, Kernel, Model, Repulsion};

use crate::arrays::{rows, vector};
use crate::door::enter;
use crate::errors::ToPyErr;
use crate::progress;
use std::sync::atomic::AtomicBool;
use vastml_embed::objective::{GdOptions, GdRun, GdState, tsne_gradient_descent_prepared};
use vastml_embed::parametric::RStep;

fn index_vector<'a>(a: &'a PyReadonlyArray1<'_, i64>, name: &str) -> PyResult<&'a [i64]> {
    a.as_slice()
        .map_err(|_| PyTypeError::new_err(format!("`{name}` must be a contiguous int64 array")))
}

/// The visiting order as `usize` indices (an error names `order` if one is negative).
fn order_arg(order: &PyReadonlyArray1<'_, i64>) -> PyResult<Vec<usize>> {
    vastml_embed::affinity::order_indices(index_vector(order, "order")?).map_err(ToPyErr::to_pyerr)
}

/// CSR arrays from Python in one of the two layouts the kernels take: int64 / float64
/// (SciPy's and NumPy's defaults) or the compact int32 / float32 of large problems.
enum CsrArrays<'py> {
    Wide(
        PyReadonlyArray1<'py, i64>,
        PyReadonlyArray1<'py, i64>,
        PyReadonlyArray1<'py, f64>,
    ),
    Compact(
        PyReadonlyArray1<'py, i32>,
        PyReadonlyArray1<'py, i32>,
        PyReadonlyArray1<'py, f32>,
    ),
}

fn csr_arrays<'py>(
    indptr: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    data: &Bound<'py, PyAny>,
) -> PyResult<CsrArrays<'py>> {
    if let (Ok(p), Ok(i), Ok(d)) = (indptr.extract(), indices.extract(), data.extract()) {
        return Ok(CsrArrays::Wide(p, i, d));
    }
    if let (Ok(p), Ok(i), Ok(d)) = (indptr.extract(), indices.extract(), data.extract()) {
        return Ok(CsrArrays::Compact(p, i, d));
    }
    Err(PyTypeError::new_err(
        "CSR arrays must be int64 / int64 / float64 or int32 / int32 / float32 (contiguous)",
    ))
}

fn slice<'a, T: numpy::Element>(a: &'a PyReadonlyArray1<'_, T>, name: &str) -> PyResult<&'a [T]> {
    a.as_slice()
        .map_err(|_| PyTypeError::new_err(format!("`{name}` must be contiguous")))
}

/// Runs `$body` with `$w` bound to a [`Csr`] of either layout (the body is instantiated
/// for both index / value types).
macro_rules! with_csr {
    ($arrays:expr, |$w:ident| $body:expr) => {
        match &$arrays {
            CsrArrays::Wide(p, i, d) => {
                let $w = Csr {
                    indptr: slice(p, "indptr")?,
                    indices: slice(i, "indices")?,
                    data: slice(d, "data")?,
                };
                $body
            }
            CsrArrays::Compact(p, i, d) => {
                let $w = Csr {
                    indptr: slice(p, "indptr")?,
                    indices: slice(i, "indices")?,
                    data: slice(d, "data")?,
                };
                $body
            }
        }
    };
}

fn matrix<'py>(
    py: Python<'py>,
    v: Vec<f64>,
    r: usize,
    c: usize,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    numpy::ndarray::Array2::from_shape_vec((r, c), v)
        .map_err(|e| PyValueError::new_err(e.to_string()))
        .map(|a| a.into_pyarray(py))
}

fn repulsion_with(
    gradient: &str,
    theta: f64,
    epsilon: f64,
    n_interp: usize,
    box_width: f64,
) -> PyResult<Repulsion> {
    match gradient {
        "exact" => Ok(Repulsion::Exact),
        "barnes_hut" => Ok(Repulsion::BarnesHut { theta }),
        "fgt" => Ok(Repulsion::Fgt { epsilon }),
        "fft" => Ok(Repulsion::Interpolation {
            n_interp,
            box_width,
        }),
        _ => Err(PyValueError::new_err(format!(
            "`gradient` must be 'exact', 'barnes_hut', 'fgt' or 'fft', got {gradient:?}"
        ))),
    }
}

fn warm_start<'a>(warm: &str, parents: Option<&'a [i64]>) -> PyResult<WarmStart<'a>> {
    Ok(match (warm, parents) {
        ("previous", _) => WarmStart::Previous,
        ("bounds", _) => WarmStart::Bounds,
        ("parents", Some(p)) => WarmStart::Parents(p),
        ("parents", None) => return Err(PyValueError::new_err("warm='parents' needs `parents`")),
        _ => {
            return Err(PyValueError::new_err(format!(
                "`warm` must be 'previous', 'parents' or 'bounds', got {warm:?}"
            )));
        }
    })
}

type AffinityOut<'py> = (
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<bool>>,
);

/// entropic_affinities_knn(sqdist, perplexity, order, parents=None, warm="previous", method="euler", tol=1e-10, maxit=20, chunk_size=2048, n_jobs=None)
/// --
///
/// Per-row precisions of perplexity `perplexity` from kNN squared distances (n x k, self
/// excluded). Returns (P n x k, log_beta, evaluations, bisections, log_beta_lower,
/// log_beta_upper, converged).
#[pyfunction]
#[pyo3(signature = (sqdist, perplexity, order, parents=None, warm="previous", method="euler", tol=1e-10, maxit=20, chunk_size=2048, n_jobs=None))]
#[allow(clippy::too_many_arguments)]
pub fn entropic_affinities_knn<'py>(
    py: Python<'py>,
    sqdist: PyReadonlyArray2<'py, f64>,
    perplexity: f64,
    order: PyReadonlyArray1<'py, i64>,
    parents: Option<PyReadonlyArray1<'py, i64>>,
    warm: &str,
    method: &str,
    tol: f64,
    maxit: u32,
    chunk_size: usize,
    n_jobs: Option<isize>,
) -> PyResult<AffinityOut<'py>> {
    let method = method.parse::<RootMethod>().map_err(ToPyErr::to_pyerr)?;
    let (d2, k) = rows(&sqdist, "sqdist")?;
    let n = d2.len().checked_div(k).unwrap_or(0);
    let order = order_arg(&order)?;
    let parents = parents
        .as_ref()
        .map(|p| index_vector(p, "parents"))
        .transpose()?;
    let warm = warm_start(warm, parents)?;
    let opts = RootOptions { method, tol, maxit };
    let a = enter(py, n_jobs, |cancel| {
        entropic_affinities(
            d2, n, k, perplexity, &opts, &order, warm, chunk_size, cancel,
        )
    })?;
    Ok((
        matrix(py, a.probabilities, n, k)?,
        a.log_beta.into_pyarray(py),
        a.evaluations.into_pyarray(py),
        a.bisections.into_pyarray(py),
        a.log_beta_lower.into_pyarray(py),
        a.log_beta_upper.into_pyarray(py),
        a.converged.into_pyarray(py),
    ))
}

type AffinityCsrOut<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<bool>>,
);

/// entropic_affinities_csr(sqdist, indices, perplexity, order, parents=None, warm="previous", method="euler", tol=1e-10, maxit=20, chunk_size=2048, n_jobs=None, compact=False)
/// --
///
/// As entropic_affinities_knn, with the neighbour indices (n x k): returns the conditional
/// affinities as canonical CSR arrays (indptr, indices, data; columns sorted, repeats
/// summed) followed by log_beta, evaluations, bisections, log_beta_lower, log_beta_upper,
/// converged. `compact`: int32 `indices` in, int32 / float32 CSR arrays out (else int64 /
/// float64).
#[pyfunction]
#[pyo3(signature = (sqdist, indices, perplexity, order, parents=None, warm="previous", method="euler", tol=1e-10, maxit=20, chunk_size=2048, n_jobs=None, compact=false))]
#[allow(clippy::too_many_arguments)]
pub fn entropic_affinities_csr<'py>(
    py: Python<'py>,
    sqdist: PyReadonlyArray2<'py, f64>,
    indices: &Bound<'py, PyAny>,
    perplexity: f64,
    order: PyReadonlyArray1<'py, i64>,
    parents: Option<PyReadonlyArray1<'py, i64>>,
    warm: &str,
    method: &str,
    tol: f64,
    maxit: u32,
    chunk_size: usize,
    n_jobs: Option<isize>,
    compact: bool,
) -> PyResult<AffinityCsrOut<'py>> {
    let method = method.parse::<RootMethod>().map_err(ToPyErr::to_pyerr)?;
    let (d2, k) = rows(&sqdist, "sqdist")?;
    let parents = parents
        .as_ref()
        .map(|p| index_vector(p, "parents"))
        .transpose()?;
    let job = AffinityJob {
        d2,
        n: d2.len().checked_div(k).unwrap_or(0),
        k,
        perplexity,
        opts: RootOptions { method, tol, maxit },
        order: order_arg(&order)?,
        warm: warm_start(warm, parents)?,
        chunk_size,
    };
    let (csr, a) = if compact {
        affinities_csr_typed::<i32, f32>(py, indices, &job, n_jobs, "int32")?
    } else {
        affinities_csr_typed::<i64, f64>(py, indices, &job, n_jobs, "int64")?
    };
    Ok(affinity_csr_out(py, csr, a))
}

/// The CSR arrays followed by the per-point results, as Python receives them.
fn affinity_csr_out<'py>(
    py: Python<'py>,
    (ip, ix, dt): CsrOut<'py>,
    a: vastml_embed::affinity::AffinityInfo,
) -> AffinityCsrOut<'py> {
    (
        ip,
        ix,
        dt,
        a.log_beta.into_pyarray(py),
        a.evaluations.into_pyarray(py),
        a.bisections.into_pyarray(py),
        a.log_beta_lower.into_pyarray(py),
        a.log_beta_upper.into_pyarray(py),
        a.converged.into_pyarray(py),
    )
}

/// The inputs of `entropic_affinities_csr` common to both index layouts.
struct AffinityJob<'a> {
    d2: &'a [f64],
    n: usize,
    k: usize,
    perplexity: f64,
    opts: RootOptions,
    order: Vec<usize>,
    warm: WarmStart<'a>,
    chunk_size: usize,
}

/// `entropic_affinities_csr` for neighbour indices of type `I` and values of type `V`.
fn affinities_csr_typed<'py, I, V>(
    py: Python<'py>,
    indices: &Bound<'py, PyAny>,
    job: &AffinityJob<'_>,
    n_jobs: Option<isize>,
    dtype: &str,
) -> PyResult<(CsrOut<'py>, vastml_embed::affinity::AffinityInfo)>
where
    I: vastml_embed::CsrIndex + numpy::Element,
    V: vastml_embed::CsrValue + numpy::Element,
{
    let bad = || PyTypeError::new_err(format!("`indices` must be a C-contiguous {dtype} array"));
    let idx: PyReadonlyArray2<'py, I> = indices.extract().map_err(|_| bad())?;
    let idx = idx.as_slice().map_err(|_| bad())?;
    let j = job;
    let (p, a) = enter(py, n_jobs, |cancel| {
        vastml_embed::affinity::entropic_affinities_csr::<I, V>(
            j.d2,
            idx,
            j.n,
            j.k,
            j.perplexity,
            &j.opts,
            &j.order,
            j.warm,
            j.chunk_size,
            cancel,
        )
    })?;
    let out = (
        p.indptr.into_pyarray(py).into_any(),
        p.indices.into_pyarray(py).into_any(),
        p.data.into_pyarray(py).into_any(),
    );
    Ok((out, a))
}

/// embedding_objective(model, x, indptr, indices, data, repulsion_weight=1.0, gradient="exact", theta=0.5, epsilon=1e-6, need_objective=True, n_jobs=None, n_interp=3, box_width=1.0)
/// --
///
/// E = E+ + repulsion_weight E- and its gradient for model 'ee' | 'sne' | 'ssne' | 'tsne' at the
/// embedding x (n x d), attraction given as CSR arrays. Returns (E, E+, E-, G).
#[pyfunction]
#[pyo3(signature = (model, x, indptr, indices, data, repulsion_weight=1.0, gradient="exact", theta=0.5, epsilon=1e-6, need_objective=true, n_jobs=None, n_interp=3, box_width=1.0))]
#[allow(clippy::too_many_arguments)]
pub fn embedding_objective<'py>(
    py: Python<'py>,
    model: &str,
    x: PyReadonlyArray2<'py, f64>,
    indptr: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    data: &Bound<'py, PyAny>,
    repulsion_weight: f64,
    gradient: &str,
    theta: f64,
    epsilon: f64,
    need_objective: bool,
    n_jobs: Option<isize>,
    n_interp: usize,
    box_width: f64,
) -> PyResult<(f64, f64, f64, Bound<'py, PyArray2<f64>>)> {
    let model = model.parse::<Model>().map_err(ToPyErr::to_pyerr)?;
    let rep = repulsion_with(gradient, theta, epsilon, n_interp, box_width)?;
    let (xs, dim) = rows(&x, "x")?;
    let n = xs.len().checked_div(dim).unwrap_or(0);
    let arrays = csr_arrays(indptr, indices, data)?;
    let ev = with_csr!(arrays, |w| enter(py, n_jobs, |cancel| {
        vastml_embed::evaluate_with(
            model,
            xs,
            dim,
            &w,
            repulsion_weight,
            rep,
            need_objective,
            cancel,
        )
    })?);
    Ok((
        ev.objective,
        ev.attractive,
        ev.repulsive,
        matrix(py, ev.gradient, n, dim)?,
    ))
}

type SumsOut<'py> = (
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray2<f64>>,
);

/// kernel_sums(x, kernel="gaussian", method="exact", theta=0.5, epsilon=1e-6, weights=None, n_jobs=None, n_interp=3, box_width=1.0)
/// --
///
/// Per point (self excluded): s0 = sum v K, s1 = sum v K^q, sx = sum v K^q x_m, with
/// q = 1 (gaussian exp(-t)) or 2 (student 1/(1+t)), t the squared distance.
#[pyfunction]
#[pyo3(signature = (x, kernel="gaussian", method="exact", theta=0.5, epsilon=1e-6, weights=None, n_jobs=None, n_interp=3, box_width=1.0))]
#[allow(clippy::too_many_arguments)]
pub fn kernel_sums<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    kernel: &str,
    method: &str,
    theta: f64,
    epsilon: f64,
    weights: Option<PyReadonlyArray1<'py, f64>>,
    n_jobs: Option<isize>,
    n_interp: usize,
    box_width: f64,
) -> PyResult<SumsOut<'py>> {
    let kernel = kernel.parse::<Kernel>().map_err(ToPyErr::to_pyerr)?;
    let rep = repulsion_with(method, theta, epsilon, n_interp, box_width)?;
    let (xs, dim) = rows(&x, "x")?;
    let n = xs.len().checked_div(dim).unwrap_or(0);
    let w = weights.as_ref().map(|w| vector(w, "weights")).transpose()?;
    let s = enter(py, n_jobs, |cancel| {
        vastml_embed::nbody::kernel_sums(xs, dim, kernel, w, rep, cancel)
    })?;
    Ok((
        s.s0.into_pyarray(py),
        s.s1.into_pyarray(py),
        matrix(py, s.sx, n, dim)?,
    ))
}

/// tsne_repulsion(x, theta=0.5, n_jobs=None, leaf=16, symmetric=True)
/// --
///
/// The t-SNE repulsion by the dual-tree (cell-cell) Barnes-Hut of large N: returns
/// (Z, F) with Z = sum_{n!=m} 1/(1+t_nm) and F[n] = sum_{m!=n} (x_n - x_m)/(1+t_nm)^2
/// (x has 1 to 3 columns; theta = 0 is exact). `leaf`: most points per leaf;
/// `symmetric=False`: the target-wise traversal (each cell pair visited from both sides).
#[pyfunction]
#[pyo3(signature = (x, theta=0.5, n_jobs=None, leaf=16, symmetric=true))]
pub fn tsne_repulsion<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    theta: f64,
    n_jobs: Option<isize>,
    leaf: usize,
    symmetric: bool,
) -> PyResult<(f64, Bound<'py, PyArray2<f64>>)> {
    let (xs, dim) = rows(&x, "x")?;
    let n = xs.len().checked_div(dim).unwrap_or(0);
    let opts = vastml_embed::dualtree::DualOptions {
        leaf,
        symmetric,
        ..Default::default()
    };
    let r = enter(py, n_jobs, |cancel| {
        vastml_embed::dualtree::tsne_repulsion_with(xs, dim, theta, opts, cancel)
    })?;
    Ok((r.z, matrix(py, r.force, n, dim)?))
}

/// (x, update, gains, objective, iterations run, stopped by the progress hook).
type GdOut<'py> = (
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    f64,
    usize,
    bool,
);

/// P's unordered pairs prepared once for several `tsne_gd` calls (from 50,000 points:
/// relabelled in the Morton order of the embedding given to `tsne_pairs`).
#[pyclass(name = "TsnePairs", module = "vastml._core", frozen)]
pub struct PyTsnePairs {
    inner: TsnePairsAny,
}

enum TsnePairsAny {
    Wide(vastml_embed::objective::TsnePairs<f64>),
    Compact(vastml_embed::objective::TsnePairs<f32>),
}

#[pymethods]
impl PyTsnePairs {
    /// Number of points.
    #[getter]
    fn n_points(&self) -> usize {
        match &self.inner {
            TsnePairsAny::Wide(p) => p.n_points(),
            TsnePairsAny::Compact(p) => p.n_points(),
        }
    }

    /// True when the points are relabelled in Morton order.
    #[getter]
    fn relabelled(&self) -> bool {
        match &self.inner {
            TsnePairsAny::Wide(p) => p.relabelled(),
            TsnePairsAny::Compact(p) => p.relabelled(),
        }
    }
}

/// tsne_pairs(x, indptr, indices, data, n_jobs=None)
/// --
///
/// Prepares the symmetric CSR P for `tsne_gd(..., pairs=...)` at the embedding x (each
/// unordered pair once; from 50,000 points relabelled in x's Morton order).
#[pyfunction]
#[pyo3(signature = (x, indptr, indices, data, n_jobs=None))]
pub fn tsne_pairs<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    indptr: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    data: &Bound<'py, PyAny>,
    n_jobs: Option<isize>,
) -> PyResult<PyTsnePairs> {
    let (xs, dim) = rows(&x, "x")?;
    let arrays = csr_arrays(indptr, indices, data)?;
    let inner = match &arrays {
        CsrArrays::Wide(p, i, d) => {
            let w = Csr {
                indptr: slice(p, "indptr")?,
                indices: slice(i, "indices")?,
                data: slice(d, "data")?,
            };
            TsnePairsAny::Wide(enter(py, n_jobs, |_| {
                vastml_embed::objective::TsnePairs::new(&w, xs, dim)
            })?)
        }
        CsrArrays::Compact(p, i, d) => {
            let w = Csr {
                indptr: slice(p, "indptr")?,
                indices: slice(i, "indices")?,
                data: slice(d, "data")?,
            };
            TsnePairsAny::Compact(enter(py, n_jobs, |_| {
                vastml_embed::objective::TsnePairs::new(&w, xs, dim)
            })?)
        }
    };
    Ok(PyTsnePairs { inner })
}

/// The options of `tsne_gd`: a dict from Python with these keys.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct GdArgs {
    n_iter: usize,
    learning_rate: f64,
    momentum: f64,
    exaggeration: f64,
    min_gain: f64,
    gradient: String,
    theta: f64,
    n_interp: usize,
    box_width: f64,
    objective_at_last: bool,
    iterations_before: usize,
    objective_before: f64,
}

impl GdArgs {
    fn parts(&self) -> PyResult<(Repulsion, GdOptions, GdRun)> {
        let rep = repulsion_with(
            &self.gradient,
            self.theta,
            0.0,
            self.n_interp,
            self.box_width,
        )?;
        let opts = GdOptions {
            learning_rate: self.learning_rate,
            momentum: self.momentum,
            exaggeration: self.exaggeration,
            min_gain: self.min_gain,
        };
        let run = GdRun {
            n_iter: self.n_iter,
            iterations_before: self.iterations_before,
            objective_at_last: self.objective_at_last,
            objective_before: self.objective_before,
        };
        Ok((rep, opts, run))
    }
}

/// The embedding handed to the progress callable: flat (Python reshapes it).
fn flat_to_py(py: Python<'_>, x: &[f64]) -> PyResult<Py<PyAny>> {
    Ok(x.to_vec().into_pyarray(py).into_any().unbind())
}

type GdArrays<'py> = (
    PyReadonlyArray2<'py, f64>,
    PyReadonlyArray2<'py, f64>,
    PyReadonlyArray2<'py, f64>,
);

/// tsne_gd(state, pairs, options, progress=None, n_jobs=None)
/// --
///
/// `options["n_iter"]` iterations of t-SNE's momentum gradient descent with gains in one call
/// from `state` = (x, update, gains) over P's prepared `pairs` (attraction scaled by
/// `exaggeration`, repulsion by `gradient`). `progress(iteration, objective, x_flat)` is
/// called after every iteration (numbered from `iterations_before + 1`; the objective is the
/// latest computed, `objective_before` until then); True stops the run there. Returns
/// (x, update, gains, objective, iterations run, stopped), the objective at the last iterate
/// when `objective_at_last`.
#[pyfunction]
#[pyo3(signature = (state, pairs, options, progress=None, n_jobs=None))]
pub fn tsne_gd<'py>(
    py: Python<'py>,
    state: GdArrays<'py>,
    pairs: Bound<'py, PyTsnePairs>,
    options: GdArgs,
    progress: Option<Py<PyAny>>,
    n_jobs: Option<isize>,
) -> PyResult<GdOut<'py>> {
    let (rep, opts, run) = options.parts()?;
    let (xs, dim) = rows(&state.0, "x")?;
    let n = xs.len().checked_div(dim).unwrap_or(0);
    let mut x = xs.to_vec();
    let mut update = rows(&state.1, "update")?.0.to_vec();
    let mut gains = rows(&state.2, "gains")?.0.to_vec();
    let hook = progress::hook(progress, flat_to_py);
    let inner: &TsnePairsAny = &pairs.get().inner;
    let out = enter(py, n_jobs, |cancel| {
        let control = progress::control(cancel, hook.as_ref());
        let st = GdState {
            x: &mut x,
            dim,
            update: &mut update,
            gains: &mut gains,
        };
        inner.descend(st, rep, opts, run, control)
    })?;
    if let Some(h) = &hook {
        h.finish()?;
    }
    let (x, u, g) = (
        matrix(py, x, n, dim)?,
        matrix(py, update, n, dim)?,
        matrix(py, gains, n, dim)?,
    );
    Ok((x, u, g, out.objective, out.n_done, out.stopped))
}

impl TsnePairsAny {
    /// The gradient descent over these pairs, whatever their value type.
    fn descend(
        &self,
        state: GdState<'_>,
        rep: Repulsion,
        opts: GdOptions,
        run: GdRun,
        control: vastml_core::Control<'_, [f64]>,
    ) -> vastml_embed::Result<vastml_embed::objective::GdOutcome> {
        match self {
            TsnePairsAny::Wide(p) => {
                tsne_gradient_descent_prepared(state, p, rep, opts, run, control)
            }
            TsnePairsAny::Compact(p) => {
                tsne_gradient_descent_prepared(state, p, rep, opts, run, control)
            }
        }
    }
}

// ---------------------------------------------------------------- Parametric Embedding

type PeOut<'py> = (
    f64,
    f64,
    f64,
    Bound<'py, PyArray2<f64>>,
    Option<Bound<'py, PyArray2<f64>>>,
);
type PeStepOut<'py> = (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray1<u32>>);
/// (J, E, entropy, dJ/dPhi, R, Newton steps) of `pe_reduced`.
type PeReducedOut<'py> = (
    f64,
    f64,
    f64,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray1<u32>>,
);
/// (J, dJ/dPhi, d2J/dPhi2, R, Newton steps) of `pe_reduced_hessian`.
type PeHessianOut<'py> = (
    f64,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray1<u32>>,
);

fn pe_problem<'a>(
    p: &'a [f64],
    k: usize,
    phi: &'a [f64],
    d: usize,
    log_prior: &'a [f64],
    weights: Option<&'a [f64]>,
) -> PyResult<vastml_embed::parametric::Problem<'a>> {
    let pb = vastml_embed::parametric::Problem::new(p, phi, log_prior, k, d);
    match weights {
        Some(w) => pb.and_then(|pb| pb.with_weights(w)),
        None => pb,
    }
    .map_err(ToPyErr::to_pyerr)
}

/// pe_r_step(p, phi, r, log_prior, eta_r, tol_r=1e-12, max_newton_iter=50, damped=True, n_jobs=None)
/// --
///
/// Parametric Embedding R-step: damped Newton per object with the centres `phi` (k x d)
/// fixed, from the warm start `r` (n x d). Returns (R, Newton steps per object).
#[pyfunction]
#[pyo3(signature = (p, phi, r, log_prior, eta_r, tol_r=1e-12, max_newton_iter=50, damped=true, n_jobs=None))]
#[allow(clippy::too_many_arguments)]
pub fn pe_r_step<'py>(
    py: Python<'py>,
    p: PyReadonlyArray2<'py, f64>,
    phi: PyReadonlyArray2<'py, f64>,
    r: PyReadonlyArray2<'py, f64>,
    log_prior: PyReadonlyArray1<'py, f64>,
    eta_r: f64,
    tol_r: f64,
    max_newton_iter: usize,
    damped: bool,
    n_jobs: Option<isize>,
) -> PyResult<PeStepOut<'py>> {
    let (ps, k) = rows(&p, "p")?;
    let (fs, d) = rows(&phi, "phi")?;
    let (rs, _) = rows(&r, "r")?;
    let lp = vector(&log_prior, "log_prior")?;
    let pb = pe_problem(ps, k, fs, d, lp, None)?;
    let opt = RStep {
        eta_r,
        tol: tol_r,
        max_iter: max_newton_iter,
        damped,
    };
    let mut out = rs.to_vec();
    let n = pb.n_objects();
    let (out, it) = enter(py, n_jobs, |cancel| {
        vastml_embed::parametric::r_step(&pb, &mut out, &opt, cancel).map(|it| (out, it))
    })?;
    Ok((matrix(py, out, n, d)?, it.into_pyarray(py)))
}

/// pe_evaluate(p, r, phi, log_prior, eta_r, eta_phi, grad_r=False, n_jobs=None, sample_weight=None)
/// --
///
/// Parametric Embedding J, E, input entropy, dJ/dPhi (k x d) and, with `grad_r`, dJ/dR;
/// each object's terms times its `sample_weight` when given.
#[pyfunction]
#[pyo3(signature = (p, r, phi, log_prior, eta_r, eta_phi, grad_r=false, n_jobs=None, sample_weight=None))]
#[allow(clippy::too_many_arguments)]
pub fn pe_evaluate<'py>(
    py: Python<'py>,
    p: PyReadonlyArray2<'py, f64>,
    r: PyReadonlyArray2<'py, f64>,
    phi: PyReadonlyArray2<'py, f64>,
    log_prior: PyReadonlyArray1<'py, f64>,
    eta_r: f64,
    eta_phi: f64,
    grad_r: bool,
    n_jobs: Option<isize>,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
) -> PyResult<PeOut<'py>> {
    let (ps, k) = rows(&p, "p")?;
    let (fs, d) = rows(&phi, "phi")?;
    let (rs, _) = rows(&r, "r")?;
    let lp = vector(&log_prior, "log_prior")?;
    let sw = sample_weight
        .as_ref()
        .map(|w| vector(w, "sample_weight"))
        .transpose()?;
    let pb = pe_problem(ps, k, fs, d, lp, sw)?;
    let n = pb.n_objects();
    let ev = enter(py, n_jobs, |cancel| {
        vastml_embed::parametric::evaluate(&pb, rs, eta_r, eta_phi, grad_r, cancel)
    })?;
    let gr = ev.grad_r.map(|g| matrix(py, g, n, d)).transpose()?;
    Ok((
        ev.objective,
        ev.cross_entropy,
        ev.entropy,
        matrix(py, ev.grad_phi, k, d)?,
        gr,
    ))
}

type PeEval = fn(
    &vastml_embed::parametric::Problem<'_>,
    &mut [f64],
    &RStep,
    f64,
    &AtomicBool,
) -> vastml_embed::Result<(vastml_embed::parametric::Evaluation, Vec<u32>)>;

type PeArrays<'a, 'py> = (
    &'a PyReadonlyArray2<'py, f64>,
    &'a PyReadonlyArray2<'py, f64>,
    &'a PyReadonlyArray2<'py, f64>,
    &'a PyReadonlyArray1<'py, f64>,
);

/// Shared body of `pe_reduced` and `pe_reduced_hessian`: checks (P, Phi, R, log prior), runs
/// `eval` (the R-step from the warm start R fused with J, dJ/dPhi and, for the Hessian
/// variant, d2J/dPhi2) without the GIL, and returns (evaluation, R, Newton steps, k, d, n).
#[allow(clippy::type_complexity)]
fn pe_reduced_common(
    py: Python<'_>,
    (p, phi, r, log_prior): PeArrays<'_, '_>,
    opt: RStep,
    eta_phi: f64,
    n_jobs: Option<isize>,
    eval: PeEval,
    sample_weight: Option<&PyReadonlyArray1<'_, f64>>,
) -> PyResult<(
    vastml_embed::parametric::Evaluation,
    Vec<f64>,
    Vec<u32>,
    usize,
    usize,
    usize,
)> {
    let (ps, k) = rows(p, "p")?;
    let (fs, d) = rows(phi, "phi")?;
    let (rs, _) = rows(r, "r")?;
    let lp = vector(log_prior, "log_prior")?;
    let sw = sample_weight
        .map(|w| vector(w, "sample_weight"))
        .transpose()?;
    let pb = pe_problem(ps, k, fs, d, lp, sw)?;
    let n = pb.n_objects();
    let mut out = rs.to_vec();
    let (ev, it, out) = enter(py, n_jobs, |cancel| {
        eval(&pb, &mut out, &opt, eta_phi, cancel).map(|(ev, it)| (ev, it, out))
    })?;
    Ok((ev, out, it, k, d, n))
}

/// pe_reduced(p, phi, r, log_prior, eta_r, eta_phi, tol_r=1e-12, max_newton_iter=50, damped=True, n_jobs=None, sample_weight=None)
/// --
///
/// One evaluation of the reduced objective min_R J(R, Phi): the R-step from the warm start
/// `r` fused with J and dJ/dPhi. Returns (J, E, entropy, dJ/dPhi, R, Newton steps per object).
#[pyfunction]
#[pyo3(signature = (p, phi, r, log_prior, eta_r, eta_phi, tol_r=1e-12, max_newton_iter=50, damped=true, n_jobs=None, sample_weight=None))]
#[allow(clippy::too_many_arguments)]
pub fn pe_reduced<'py>(
    py: Python<'py>,
    p: PyReadonlyArray2<'py, f64>,
    phi: PyReadonlyArray2<'py, f64>,
    r: PyReadonlyArray2<'py, f64>,
    log_prior: PyReadonlyArray1<'py, f64>,
    eta_r: f64,
    eta_phi: f64,
    tol_r: f64,
    max_newton_iter: usize,
    damped: bool,
    n_jobs: Option<isize>,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
) -> PyResult<PeReducedOut<'py>> {
    let (ev, out, it, k, d, n) = pe_reduced_common(
        py,
        (&p, &phi, &r, &log_prior),
        RStep {
            eta_r,
            tol: tol_r,
            max_iter: max_newton_iter,
            damped,
        },
        eta_phi,
        n_jobs,
        vastml_embed::parametric::reduced,
        sample_weight.as_ref(),
    )?;
    Ok((
        ev.objective,
        ev.cross_entropy,
        ev.entropy,
        matrix(py, ev.grad_phi, k, d)?,
        matrix(py, out, n, d)?,
        it.into_pyarray(py),
    ))
}

/// pe_reduced_hessian(p, phi, r, log_prior, eta_r, eta_phi, tol_r=1e-12, max_newton_iter=50, damped=True, n_jobs=None, sample_weight=None)
/// --
///
/// `pe_reduced` plus the exact Hessian of the reduced objective min_R J(R, Phi) with respect
/// to Phi (kd x kd, index k * d + j), in the same pass. Returns (J, dJ/dPhi, d2J/dPhi2, R,
/// Newton steps per object).
#[pyfunction]
#[pyo3(signature = (p, phi, r, log_prior, eta_r, eta_phi, tol_r=1e-12, max_newton_iter=50, damped=true, n_jobs=None, sample_weight=None))]
#[allow(clippy::too_many_arguments)]
pub fn pe_reduced_hessian<'py>(
    py: Python<'py>,
    p: PyReadonlyArray2<'py, f64>,
    phi: PyReadonlyArray2<'py, f64>,
    r: PyReadonlyArray2<'py, f64>,
    log_prior: PyReadonlyArray1<'py, f64>,
    eta_r: f64,
    eta_phi: f64,
    tol_r: f64,
    max_newton_iter: usize,
    damped: bool,
    n_jobs: Option<isize>,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
) -> PyResult<PeHessianOut<'py>> {
    let (ev, out, it, k, d, n) = pe_reduced_common(
        py,
        (&p, &phi, &r, &log_prior),
        RStep {
            eta_r,
            tol: tol_r,
            max_iter: max_newton_iter,
            damped,
        },
        eta_phi,
        n_jobs,
        vastml_embed::parametric::reduced_hessian,
        sample_weight.as_ref(),
    )?;
    let hess = ev.hess_phi.unwrap_or_default();
    Ok((
        ev.objective,
        matrix(py, ev.grad_phi, k, d)?,
        matrix(py, hess, k * d, k * d)?,
        matrix(py, out, n, d)?,
        it.into_pyarray(py),
    ))
}

type CsrOut<'py> = (Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>);

/// symmetrize_csr(n, indptr, indices, data, scale, n_jobs=None)
/// --
///
/// scale * (P + P^T) with the diagonal dropped, for an n x n CSR matrix (rows in any
/// column order, duplicates summed). Returns canonical (indptr, indices, data) in the
/// layout of the input: int64 / float64, or the compact int32 / float32.
#[pyfunction]
#[pyo3(signature = (n, indptr, indices, data, scale, n_jobs=None))]
pub fn symmetrize_csr<'py>(
    py: Python<'py>,
    n: usize,
    indptr: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    data: &Bound<'py, PyAny>,
    scale: f64,
    n_jobs: Option<isize>,
) -> PyResult<CsrOut<'py>> {
    let arrays = csr_arrays(indptr, indices, data)?;
    with_csr!(arrays, |w| {
        let s = enter(py, n_jobs, |_cancel| {
            vastml_embed::affinity::symmetrize_csr(n, w.indptr, w.indices, w.data, scale)
        })?;
        Ok((
            s.indptr.into_pyarray(py).into_any(),
            s.indices.into_pyarray(py).into_any(),
            s.data.into_pyarray(py).into_any(),
        ))
    })
}

/// (sqdist, indices) of `knn_graph`.
type KnnOut<'py> = (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<i32>>);

/// knn_graph(x, k, eps=0.0, n_jobs=None, queries=None)
/// --
///
/// The k nearest other points of every row of x (n x d, float64) by a parallel kd-tree:
/// exact for eps = 0, (1 + eps)-approximate otherwise (distances always exact). Returns
/// (sqdist float64 n x k, indices int32 n x k), nearest first. With `queries` (m x d): the k
/// nearest rows of x to each query row instead (m x k; nothing skipped).
#[pyfunction]
#[pyo3(signature = (x, k, eps=0.0, n_jobs=None, queries=None))]
pub fn knn_graph<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    k: usize,
    eps: f64,
    n_jobs: Option<isize>,
    queries: Option<PyReadonlyArray2<'py, f64>>,
) -> PyResult<KnnOut<'py>> {
    let (pts, dim) = rows(&x, "x")?;
    let qs = queries.as_ref().map(|q| rows(q, "queries")).transpose()?;
    if qs.is_some_and(|(_, qd)| qd != dim) {
        return Err(PyValueError::new_err(format!(
            "`queries` must have {dim} columns, as `x`"
        )));
    }
    let n = match qs {
        Some((q, _)) => q.len().checked_div(dim).unwrap_or(0),
        None => pts.len().checked_div(dim).unwrap_or(0),
    };
    let g = enter(py, n_jobs, |_cancel| match qs {
        Some((q, _)) => vastml_spatial::knn_query(pts, dim, q, k, eps),
        None => vastml_spatial::knn_graph(pts, dim, k, eps),
    })?;
    let idx = numpy::ndarray::Array2::from_shape_vec((n, k), g.indices)
        .map_err(|e| PyValueError::new_err(e.to_string()))?
        .into_pyarray(py);
    Ok((matrix(py, g.sqdist, n, k)?, idx))
}

/// SourceSums(sources, kernel="gaussian", method="barnes_hut", theta=0.5, epsilon=1e-6)
/// --
///
/// Kernel sums at new points over fixed sources (the out-of-sample embedding): the
/// Barnes-Hut tree over `sources` is built once; `at(targets)` returns (s0, s1, sx) =
/// (sum K, sum K^q, sum K^q x_m) over all sources at each target row.
#[pyclass(name = "SourceSums", module = "vastml._core", frozen)]
pub struct PySourceSums {
    inner: vastml_embed::nbody::SourceSums,
}

#[pymethods]
impl PySourceSums {
    #[new]
    #[pyo3(signature = (sources, kernel="gaussian", method="barnes_hut", theta=0.5, epsilon=1e-6))]
    fn new(
        py: Python<'_>,
        sources: PyReadonlyArray2<'_, f64>,
        kernel: &str,
        method: &str,
        theta: f64,
        epsilon: f64,
    ) -> PyResult<Self> {
        let kernel = kernel.parse::<Kernel>().map_err(ToPyErr::to_pyerr)?;
        let rep = repulsion_with(method, theta, epsilon, 3, 1.0)?;
        let (xs, dim) = rows(&sources, "sources")?;
        let inner = enter(py, Some(1), |_| {
            vastml_embed::nbody::SourceSums::new(xs, dim, kernel, rep)
        })?;
        Ok(PySourceSums { inner })
    }

    /// at(targets, n_jobs=None) -> (s0, s1, sx)
    #[pyo3(signature = (targets, n_jobs=None))]
    fn at<'py>(
        &self,
        py: Python<'py>,
        targets: PyReadonlyArray2<'py, f64>,
        n_jobs: Option<isize>,
    ) -> PyResult<SumsOut<'py>> {
        let (ts, dim) = rows(&targets, "targets")?;
        if dim != self.inner.dim() {
            return Err(PyValueError::new_err(format!(
                "`targets` must have {} columns (as the sources), got {dim}",
                self.inner.dim()
            )));
        }
        let m = ts.len().checked_div(dim).unwrap_or(0);
        let s = enter(py, n_jobs, |cancel| self.inner.at(ts, cancel))?;
        Ok((
            s.s0.into_pyarray(py),
            s.s1.into_pyarray(py),
            matrix(py, s.sx, m, dim)?,
        ))
    }
}
