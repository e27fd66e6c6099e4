//! Bindings of `vastml-embed`: entropic affinities, embedding objectives, kernel sums.
//!
//! Options arrive as one dict per call (the `*Args` structs below name its keys); the
//! Python wrappers in `vastml.embed` validate them and carry the user documentation.

use std::sync::atomic::AtomicBool;

use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use vastml_embed::affinity::{
    AffinityInfo, AffinityParams, RootMethod, RootOptions, WarmStartKind, entropic_affinities,
};
use vastml_embed::objective::{GdOptions, GdRun, GdState, TsnePairs};
use vastml_embed::parametric::{Evaluation, Problem, RStep};
use vastml_embed::{Kernel, ObjectiveParams, Repulsion, RepulsionMethod};

use crate::arrays::{
    CsrOut, csr_arrays, csr_out, matrix, rows, rows_n, same_cols, slice, vector, with_csr,
};
use crate::door::enter;
use crate::errors::ToPyErr;
use crate::options::{Dict, FromDict, Options, Wrap};
use crate::progress::{self, finish};

type Array1<'py, T> = Bound<'py, PyArray1<T>>;
type Array2<'py> = Bound<'py, PyArray2<f64>>;

/// How the repulsion is computed: keys `method`, `theta`, `epsilon`, `n_interp`, `box_width`.
impl FromDict for Repulsion {
    fn from_dict(d: &Options<'_>) -> PyResult<Self> {
        let method: RepulsionMethod = d.parse("method")?;
        Ok(method.with(&vastml_embed::RepulsionParams {
            theta: d.get("theta")?,
            epsilon: d.get("epsilon")?,
            n_interp: d.get("n_interp")?,
            box_width: d.get("box_width")?,
        }))
    }
}

/// Keys `perplexity`, `warm`, `method`, `tol`, `maxit`, `chunk_size` and (CSR output only)
/// `compact`.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct AffinityArgs {
    perplexity: f64,
    warm: Wrap<WarmStartKind>,
    method: Wrap<RootMethod>,
    tol: f64,
    maxit: u32,
    chunk_size: usize,
    #[pyo3(default)]
    compact: bool,
}

/// `head` (P, dense or as CSR arrays) followed by the per-point results: log_beta,
/// evaluations, bisections, log_beta_lower, log_beta_upper, converged.
fn with_info<'py>(
    py: Python<'py>,
    mut head: Vec<Bound<'py, PyAny>>,
    a: AffinityInfo,
) -> PyResult<Bound<'py, PyTuple>> {
    head.extend([
        a.log_beta.into_pyarray(py).into_any(),
        a.evaluations.into_pyarray(py).into_any(),
        a.bisections.into_pyarray(py).into_any(),
        a.log_beta_lower.into_pyarray(py).into_any(),
        a.log_beta_upper.into_pyarray(py).into_any(),
        a.converged.into_pyarray(py).into_any(),
    ]);
    PyTuple::new(py, head)
}

/// The inputs of both affinity bindings, checked and converted.
struct AffinityJob<'a> {
    sqdist: &'a [f64],
    n: usize,
    k: usize,
    order: Vec<usize>,
    parents: Option<&'a [i64]>,
}

impl<'a> AffinityJob<'a> {
    fn new(
        sqdist: &'a PyReadonlyArray2<'_, f64>,
        order: &PyReadonlyArray1<'_, i64>,
        parents: &'a Option<PyReadonlyArray1<'_, i64>>,
    ) -> PyResult<Self> {
        let (sqdist, n, k) = rows_n(sqdist, "sqdist")?;
        let order = vastml_embed::affinity::order_indices(slice(order, "order")?)
            .map_err(ToPyErr::to_pyerr)?;
        let parents = parents.as_ref().map(|p| slice(p, "parents")).transpose()?;
        Ok(AffinityJob {
            sqdist,
            n,
            k,
            order,
            parents,
        })
    }

    fn params(&self, args: &AffinityArgs) -> PyResult<AffinityParams<'_>> {
        let root = RootOptions {
            method: args.method.0,
            tol: args.tol,
            maxit: args.maxit,
        };
        Ok(AffinityParams {
            perplexity: args.perplexity,
            root,
            order: &self.order,
            warm: args.warm.0.with(self.parents).map_err(ToPyErr::to_pyerr)?,
            chunk_size: args.chunk_size,
        })
    }
}

/// Entropic affinities from kNN squared distances: (P n x k, log_beta, evaluations, ...).
#[pyfunction]
#[pyo3(signature = (sqdist, order, options, parents=None, n_jobs=None))]
pub fn entropic_affinities_knn<'py>(
    py: Python<'py>,
    sqdist: PyReadonlyArray2<'py, f64>,
    order: PyReadonlyArray1<'py, i64>,
    options: AffinityArgs,
    parents: Option<PyReadonlyArray1<'py, i64>>,
    n_jobs: Option<isize>,
) -> PyResult<Bound<'py, PyTuple>> {
    let job = AffinityJob::new(&sqdist, &order, &parents)?;
    let params = job.params(&options)?;
    let a = enter(py, n_jobs, |cancel| {
        entropic_affinities(job.sqdist, job.n, job.k, &params, cancel)
    })?;
    let (p, info) = a.into_parts();
    with_info(py, vec![matrix(py, p, job.n, job.k)?.into_any()], info)
}

/// As `entropic_affinities_knn`, with the neighbour indices: canonical CSR arrays, then info.
#[pyfunction]
#[pyo3(signature = (sqdist, indices, order, options, parents=None, n_jobs=None))]
pub fn entropic_affinities_csr<'py>(
    py: Python<'py>,
    sqdist: PyReadonlyArray2<'py, f64>,
    indices: &Bound<'py, PyAny>,
    order: PyReadonlyArray1<'py, i64>,
    options: AffinityArgs,
    parents: Option<PyReadonlyArray1<'py, i64>>,
    n_jobs: Option<isize>,
) -> PyResult<Bound<'py, PyTuple>> {
    let job = AffinityJob::new(&sqdist, &order, &parents)?;
    let params = job.params(&options)?;
    let (csr, info) = if options.compact {
        affinities_csr_typed::<i32, f32>(py, indices, &job, &params, n_jobs, "int32")?
    } else {
        affinities_csr_typed::<i64, f64>(py, indices, &job, &params, n_jobs, "int64")?
    };
    with_info(py, vec![csr.0, csr.1, csr.2], info)
}

/// `entropic_affinities_csr` for neighbour indices of type `I` and values of type `V`.
fn affinities_csr_typed<'py, I, V>(
    py: Python<'py>,
    indices: &Bound<'py, PyAny>,
    job: &AffinityJob<'_>,
    params: &AffinityParams<'_>,
    n_jobs: Option<isize>,
    dtype: &str,
) -> PyResult<(CsrOut<'py>, AffinityInfo)>
where
    I: vastml_embed::CsrIndex + numpy::Element,
    V: vastml_embed::CsrValue + numpy::Element,
{
    let bad = || PyTypeError::new_err(format!("`indices` must be a C-contiguous {dtype} array"));
    let idx: PyReadonlyArray2<'py, I> = indices.extract().map_err(|_| bad())?;
    let idx = idx.as_slice().map_err(|_| bad())?;
    let (p, a) = enter(py, n_jobs, |cancel| {
        vastml_embed::affinity::entropic_affinities_csr::<I, V>(
            job.sqdist, idx, job.n, job.k, params, cancel,
        )
    })?;
    Ok((csr_out(py, p.indptr, p.indices, p.data), a))
}

/// `embedding_objective`'s options: `model`, `repulsion_weight`, `need_objective` and the
/// repulsion's keys.
impl FromDict for ObjectiveParams {
    fn from_dict(d: &Options<'_>) -> PyResult<Self> {
        Ok(ObjectiveParams {
            model: d.parse("model")?,
            lambda: d.get("repulsion_weight")?,
            repulsion: d.read()?,
            need_objective: d.get("need_objective")?,
        })
    }
}

/// (E, E+, E-, dE/dX) of an embedding objective at x, the attraction as CSR arrays.
#[pyfunction]
#[pyo3(signature = (x, indptr, indices, data, options, n_jobs=None))]
pub fn embedding_objective<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    indptr: &Bound<'py, PyAny>,
    indices: &Bound<'py, PyAny>,
    data: &Bound<'py, PyAny>,
    options: Dict<ObjectiveParams>,
    n_jobs: Option<isize>,
) -> PyResult<(f64, f64, f64, Array2<'py>)> {
    let params = options.0;
    let (xs, n, dim) = rows_n(&x, "x")?;
    let arrays = csr_arrays(indptr, indices, data)?;
    let ev = with_csr!(arrays, |w| {
        enter(py, n_jobs, |cancel| {
            vastml_embed::evaluate_with(xs, dim, &w, &params, cancel)
        })?
    });
    let g = matrix(py, ev.gradient, n, dim)?;
    Ok((ev.objective, ev.attractive, ev.repulsive, g))
}

/// (s0, s1, sx) of the kernel sums.
type SumsOut<'py> = (Array1<'py, f64>, Array1<'py, f64>, Array2<'py>);

fn sums_out(
    py: Python<'_>,
    s: vastml_embed::nbody::KernelSums,
    n: usize,
    dim: usize,
) -> PyResult<SumsOut<'_>> {
    Ok((
        s.s0.into_pyarray(py),
        s.s1.into_pyarray(py),
        matrix(py, s.sx, n, dim)?,
    ))
}

/// The `kernel` key of `kernel_sums`'s options.
pub struct KernelChoice(Kernel);

impl FromDict for KernelChoice {
    fn from_dict(d: &Options<'_>) -> PyResult<Self> {
        d.parse("kernel").map(KernelChoice)
    }
}

/// Kernel sums over all other points (s0, s1, sx); options: `kernel` and the repulsion's keys.
#[pyfunction]
#[pyo3(signature = (x, options, weights=None, n_jobs=None))]
pub fn kernel_sums<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    options: Dict<(KernelChoice, Repulsion)>,
    weights: Option<PyReadonlyArray1<'py, f64>>,
    n_jobs: Option<isize>,
) -> PyResult<SumsOut<'py>> {
    let (KernelChoice(kernel), rep) = options.0;
    let (xs, n, dim) = rows_n(&x, "x")?;
    let w = weights.as_ref().map(|w| vector(w, "weights")).transpose()?;
    let s = enter(py, n_jobs, |cancel| {
        vastml_embed::nbody::kernel_sums(xs, dim, kernel, w, rep, cancel)
    })?;
    sums_out(py, s, n, dim)
}

/// The t-SNE repulsion (Z, F) by the dual-tree Barnes-Hut.
#[pyfunction]
#[pyo3(signature = (x, theta=0.5, n_jobs=None, leaf=16, symmetric=true))]
pub fn tsne_repulsion<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    theta: f64,
    n_jobs: Option<isize>,
    leaf: usize,
    symmetric: bool,
) -> PyResult<(f64, Array2<'py>)> {
    let (xs, n, dim) = rows_n(&x, "x")?;
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

/// P's unordered pairs prepared once for several `tsne_gd` calls.
#[pyclass(name = "TsnePairs", module = "vastml._core", frozen)]
pub struct PyTsnePairs {
    inner: TsnePairsAny,
}

enum TsnePairsAny {
    Wide(TsnePairs<f64>),
    Compact(TsnePairs<f32>),
}

impl From<TsnePairs<f64>> for TsnePairsAny {
    fn from(p: TsnePairs<f64>) -> Self {
        TsnePairsAny::Wide(p)
    }
}

impl From<TsnePairs<f32>> for TsnePairsAny {
    fn from(p: TsnePairs<f32>) -> Self {
        TsnePairsAny::Compact(p)
    }
}

/// `$body` with `$p` bound to the pairs of `$any`, whatever their value type.
macro_rules! with_pairs {
    ($any:expr, |$p:ident| $body:expr) => {
        match $any {
            TsnePairsAny::Wide($p) => $body,
            TsnePairsAny::Compact($p) => $body,
        }
    };
}

#[pymethods]
impl PyTsnePairs {
    /// Number of points.
    #[getter]
    fn n_points(&self) -> usize {
        with_pairs!(&self.inner, |p| p.n_points())
    }

    /// True when the points are relabelled in Morton order.
    #[getter]
    fn relabelled(&self) -> bool {
        with_pairs!(&self.inner, |p| p.relabelled())
    }
}

/// Prepares the symmetric CSR P for `tsne_gd` at the embedding x.
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
    let inner = with_csr!(arrays, |w| {
        TsnePairsAny::from(enter(py, n_jobs, |_| TsnePairs::new(&w, xs, dim))?)
    });
    Ok(PyTsnePairs { inner })
}

/// `tsne_gd`'s step options: `learning_rate`, `momentum`, `exaggeration`, `min_gain`.
impl FromDict for GdOptions {
    fn from_dict(d: &Options<'_>) -> PyResult<Self> {
        Ok(GdOptions {
            learning_rate: d.get("learning_rate")?,
            momentum: d.get("momentum")?,
            exaggeration: d.get("exaggeration")?,
            min_gain: d.get("min_gain")?,
        })
    }
}

/// `tsne_gd`'s run: `n_iter`, `iterations_before`, `objective_at_last`, `objective_before`.
impl FromDict for GdRun {
    fn from_dict(d: &Options<'_>) -> PyResult<Self> {
        Ok(GdRun {
            n_iter: d.get("n_iter")?,
            iterations_before: d.get("iterations_before")?,
            objective_at_last: d.get("objective_at_last")?,
            objective_before: d.get("objective_before")?,
        })
    }
}

/// The embedding handed to the progress callable: flat (Python reshapes it).
fn flat_to_py(py: Python<'_>, x: &[f64]) -> PyResult<Py<PyAny>> {
    Ok(x.to_vec().into_pyarray(py).into_any().unbind())
}

/// (x, update, gains) of the gradient descent.
type GdArrays<'py> = (
    PyReadonlyArray2<'py, f64>,
    PyReadonlyArray2<'py, f64>,
    PyReadonlyArray2<'py, f64>,
);

/// (x, update, gains, objective, iterations run, stopped by the progress hook).
type GdOut<'py> = (Array2<'py>, Array2<'py>, Array2<'py>, f64, usize, bool);

/// `n_iter` iterations of t-SNE's momentum gradient descent with gains, from `state`.
#[pyfunction]
#[pyo3(signature = (state, pairs, options, progress=None, n_jobs=None))]
pub fn tsne_gd<'py>(
    py: Python<'py>,
    state: GdArrays<'py>,
    pairs: Bound<'py, PyTsnePairs>,
    options: Dict<(GdOptions, GdRun, Repulsion)>,
    progress: Option<Py<PyAny>>,
    n_jobs: Option<isize>,
) -> PyResult<GdOut<'py>> {
    let (opts, run, rep) = options.0;
    let (xs, n, dim) = rows_n(&state.0, "x")?;
    let (mut x, mut update) = (xs.to_vec(), rows(&state.1, "update")?.0.to_vec());
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
    });
    let out = finish(hook, out)?;
    let (x, u) = (matrix(py, x, n, dim)?, matrix(py, update, n, dim)?);
    let g = matrix(py, gains, n, dim)?;
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
        use vastml_embed::objective::tsne_gradient_descent_prepared as descend;
        with_pairs!(self, |p| descend(state, p, rep, opts, run, control))
    }
}

// ---------------------------------------------------------------- Parametric Embedding

/// The options of the `pe_*` bindings: `eta_r`, `eta_phi` (all but `pe_r_step`; a missing
/// one is NaN, which the crate refuses), `tol_r`, `max_newton_iter`, `damped`, `grad_r`,
/// `sample_weight`.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct PeArgs<'py> {
    eta_r: f64,
    #[pyo3(default = f64::NAN)]
    eta_phi: f64,
    #[pyo3(default = 1e-12)]
    tol_r: f64,
    #[pyo3(default = 50)]
    max_newton_iter: usize,
    #[pyo3(default = true)]
    damped: bool,
    #[pyo3(default)]
    grad_r: bool,
    /// Each object's weight on its terms of J (None: all 1).
    #[pyo3(default)]
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
}

impl PeArgs<'_> {
    fn r_step(&self) -> RStep {
        RStep {
            eta_r: self.eta_r,
            tol: self.tol_r,
            max_iter: self.max_newton_iter,
            damped: self.damped,
        }
    }
}

/// The arrays of a Parametric Embedding problem: P (n x k), Phi (k x d), R (n x d), log prior.
struct PeArrays<'a> {
    problem: Problem<'a>,
    r: &'a [f64],
    k: usize,
    d: usize,
}

impl<'a> PeArrays<'a> {
    fn new(
        p: &'a PyReadonlyArray2<'_, f64>,
        phi: &'a PyReadonlyArray2<'_, f64>,
        r: &'a PyReadonlyArray2<'_, f64>,
        log_prior: &'a PyReadonlyArray1<'_, f64>,
        options: &'a PeArgs<'_>,
    ) -> PyResult<Self> {
        let ((ps, k), (fs, d)) = (rows(p, "p")?, rows(phi, "phi")?);
        let (r, lp) = (rows(r, "r")?.0, vector(log_prior, "log_prior")?);
        let weights = options.sample_weight.as_ref();
        let weights = weights.map(|w| vector(w, "sample_weight")).transpose()?;
        let problem = Problem::new(ps, fs, lp, k, d)
            .and_then(|pb| match weights {
                Some(w) => pb.with_weights(w),
                None => Ok(pb),
            })
            .map_err(ToPyErr::to_pyerr)?;
        Ok(PeArrays { problem, r, k, d })
    }

    fn n(&self) -> usize {
        self.problem.n_objects()
    }
}

/// Parametric Embedding R-step with Phi fixed, from the warm start r: (R, Newton steps).
#[pyfunction]
#[pyo3(signature = (p, phi, r, log_prior, options, n_jobs=None))]
pub fn pe_r_step<'py>(
    py: Python<'py>,
    p: PyReadonlyArray2<'py, f64>,
    phi: PyReadonlyArray2<'py, f64>,
    r: PyReadonlyArray2<'py, f64>,
    log_prior: PyReadonlyArray1<'py, f64>,
    options: PeArgs<'py>,
    n_jobs: Option<isize>,
) -> PyResult<(Array2<'py>, Array1<'py, u32>)> {
    let a = PeArrays::new(&p, &phi, &r, &log_prior, &options)?;
    let (mut out, step) = (a.r.to_vec(), options.r_step());
    let it = enter(py, n_jobs, |cancel| {
        vastml_embed::parametric::r_step(&a.problem, &mut out, &step, cancel)
    })?;
    Ok((matrix(py, out, a.n(), a.d)?, it.into_pyarray(py)))
}

/// Parametric Embedding (J, E, entropy, dJ/dPhi, dJ/dR if `grad_r` else None).
type PeOut<'py> = (f64, f64, f64, Array2<'py>, Option<Array2<'py>>);

/// Parametric Embedding J, E, input entropy, dJ/dPhi and, with `grad_r`, dJ/dR.
#[pyfunction]
#[pyo3(signature = (p, r, phi, log_prior, options, n_jobs=None))]
pub fn pe_evaluate<'py>(
    py: Python<'py>,
    p: PyReadonlyArray2<'py, f64>,
    r: PyReadonlyArray2<'py, f64>,
    phi: PyReadonlyArray2<'py, f64>,
    log_prior: PyReadonlyArray1<'py, f64>,
    options: PeArgs<'py>,
    n_jobs: Option<isize>,
) -> PyResult<PeOut<'py>> {
    let a = PeArrays::new(&p, &phi, &r, &log_prior, &options)?;
    let (eta_r, eta_phi, grad_r) = (options.eta_r, options.eta_phi, options.grad_r);
    let ev = enter(py, n_jobs, |cancel| {
        vastml_embed::parametric::evaluate(&a.problem, a.r, eta_r, eta_phi, grad_r, cancel)
    })?;
    let gr = ev.grad_r.map(|g| matrix(py, g, a.n(), a.d)).transpose()?;
    let gp = matrix(py, ev.grad_phi, a.k, a.d)?;
    Ok((ev.objective, ev.cross_entropy, ev.entropy, gp, gr))
}

/// The evaluation of `pe_reduced` or `pe_reduced_hessian`.
type PeEval = fn(
    &Problem<'_>,
    &mut [f64],
    &RStep,
    f64,
    &AtomicBool,
) -> vastml_embed::Result<(Evaluation, Vec<u32>)>;

/// The outcome of one reduced evaluation: J and its derivatives, R, Newton steps.
struct Reduced {
    ev: Evaluation,
    r: Vec<f64>,
    steps: Vec<u32>,
}

impl PeArrays<'_> {
    /// The R-step from the warm start R fused with `eval`, without the GIL.
    fn reduced(
        &self,
        py: Python<'_>,
        o: &PeArgs<'_>,
        n_jobs: Option<isize>,
        eval: PeEval,
    ) -> PyResult<Reduced> {
        let (mut r, step, eta_phi) = (self.r.to_vec(), o.r_step(), o.eta_phi);
        let (ev, steps) = enter(py, n_jobs, |cancel| {
            eval(&self.problem, &mut r, &step, eta_phi, cancel)
        })?;
        Ok(Reduced { ev, r, steps })
    }
}

/// (J, E, entropy, dJ/dPhi, R, Newton steps) of `pe_reduced`.
type PeReducedOut<'py> = (f64, f64, f64, Array2<'py>, Array2<'py>, Array1<'py, u32>);

/// One evaluation of the reduced objective min_R J(R, Phi) from the warm start r.
#[pyfunction]
#[pyo3(signature = (p, phi, r, log_prior, options, n_jobs=None))]
pub fn pe_reduced<'py>(
    py: Python<'py>,
    p: PyReadonlyArray2<'py, f64>,
    phi: PyReadonlyArray2<'py, f64>,
    r: PyReadonlyArray2<'py, f64>,
    log_prior: PyReadonlyArray1<'py, f64>,
    options: PeArgs<'py>,
    n_jobs: Option<isize>,
) -> PyResult<PeReducedOut<'py>> {
    let a = PeArrays::new(&p, &phi, &r, &log_prior, &options)?;
    let red = a.reduced(py, &options, n_jobs, vastml_embed::parametric::reduced)?;
    let ev = red.ev;
    let gp = matrix(py, ev.grad_phi, a.k, a.d)?;
    let r = matrix(py, red.r, a.n(), a.d)?;
    Ok((
        ev.objective,
        ev.cross_entropy,
        ev.entropy,
        gp,
        r,
        red.steps.into_pyarray(py),
    ))
}

/// (J, dJ/dPhi, d2J/dPhi2, R, Newton steps) of `pe_reduced_hessian`.
type PeHessianOut<'py> = (f64, Array2<'py>, Array2<'py>, Array2<'py>, Array1<'py, u32>);

/// `pe_reduced` plus the exact Hessian of the reduced objective with respect to Phi.
#[pyfunction]
#[pyo3(signature = (p, phi, r, log_prior, options, n_jobs=None))]
pub fn pe_reduced_hessian<'py>(
    py: Python<'py>,
    p: PyReadonlyArray2<'py, f64>,
    phi: PyReadonlyArray2<'py, f64>,
    r: PyReadonlyArray2<'py, f64>,
    log_prior: PyReadonlyArray1<'py, f64>,
    options: PeArgs<'py>,
    n_jobs: Option<isize>,
) -> PyResult<PeHessianOut<'py>> {
    let a = PeArrays::new(&p, &phi, &r, &log_prior, &options)?;
    let red = a.reduced(
        py,
        &options,
        n_jobs,
        vastml_embed::parametric::reduced_hessian,
    )?;
    let kd = a.k * a.d;
    let gp = matrix(py, red.ev.grad_phi, a.k, a.d)?;
    let hess = matrix(py, red.ev.hess_phi.unwrap_or_default(), kd, kd)?;
    let r = matrix(py, red.r, a.n(), a.d)?;
    Ok((red.ev.objective, gp, hess, r, red.steps.into_pyarray(py)))
}

/// scale * (P + P^T) without the diagonal, as canonical CSR arrays in the input's layout.
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
            vastml_embed::affinity::symmetrize_csr(n, w.indptr(), w.indices(), w.data(), scale)
        })?;
        Ok(csr_out(py, s.indptr, s.indices, s.data))
    })
}

/// The k nearest other points of every row of x: (sqdist n x k, indices int32 n x k); with
/// `queries` (m x d), the k nearest rows of x to each query instead (m x k).
#[pyfunction]
#[pyo3(signature = (x, k, eps=0.0, n_jobs=None, queries=None))]
pub fn knn_graph<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    k: usize,
    eps: f64,
    n_jobs: Option<isize>,
    queries: Option<PyReadonlyArray2<'py, f64>>,
) -> PyResult<(Array2<'py>, Bound<'py, PyArray2<i32>>)> {
    let (pts, n, dim) = rows_n(&x, "x")?;
    let qs = queries.as_ref().map(|q| rows_n(q, "queries")).transpose()?;
    if let Some((_, _, qdim)) = qs {
        same_cols("queries", qdim, "x", dim)?;
    }
    let m = qs.map_or(n, |(_, m, _)| m);
    let g = enter(py, n_jobs, |cancel| match qs {
        Some((q, _, _)) => vastml_spatial::knn_query_with(pts, dim, q, k, eps, cancel),
        None => vastml_spatial::knn_graph_with(pts, dim, k, eps, cancel),
    })?;
    Ok((matrix(py, g.sqdist, m, k)?, matrix(py, g.indices, m, k)?))
}

/// Kernel sums at new points over fixed sources (the out-of-sample embedding).
#[pyclass(name = "SourceSums", module = "vastml._core", frozen)]
pub struct PySourceSums {
    inner: vastml_embed::nbody::SourceSums,
}

#[pymethods]
impl PySourceSums {
    #[new]
    #[pyo3(signature = (sources, kernel, method, theta=0.5, epsilon=1e-6))]
    fn new(
        py: Python<'_>,
        sources: PyReadonlyArray2<'_, f64>,
        kernel: Wrap<Kernel>,
        method: Wrap<RepulsionMethod>,
        theta: f64,
        epsilon: f64,
    ) -> PyResult<Self> {
        let params = vastml_embed::RepulsionParams {
            theta,
            epsilon,
            n_interp: 3,
            box_width: 1.0,
        };
        let (xs, dim) = rows(&sources, "sources")?;
        let inner = enter(py, Some(1), |_| {
            vastml_embed::nbody::SourceSums::new(xs, dim, kernel.0, method.0.with(&params))
        })?;
        Ok(PySourceSums { inner })
    }

    /// (s0, s1, sx) over all sources at each target row.
    #[pyo3(signature = (targets, n_jobs=None))]
    fn at<'py>(
        &self,
        py: Python<'py>,
        targets: PyReadonlyArray2<'py, f64>,
        n_jobs: Option<isize>,
    ) -> PyResult<SumsOut<'py>> {
        let (ts, m, dim) = rows_n(&targets, "targets")?;
        same_cols("targets", dim, "sources", self.inner.dim())?;
        let s = enter(py, n_jobs, |cancel| self.inner.at(ts, cancel))?;
        sums_out(py, s, m, dim)
    }
}
