//! Bindings of `vastml-svm`: argument conversion and delegation only.
//!
//! Examples arrive as a C-contiguous float64 2-D array or as a CSR tuple
//! `(indptr int64, indices int64, data float64, n_features)`; neither is copied. Long
//! arguments lists arrive as a dict (`params`), read into the option structs below. Training
//! calls take `progress` (`vastml._progress.Progress.report`, or None) and report every pass
//! (or chunk of a single pass) with the state an int: the model size, or the updates made.

use numpy::ndarray::{Array2, Array3};
use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArrayDyn,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use vastml_svm::{
    Amm, AmmParams, Arow, Bsgd, BsgdParams, DcdOptions, EpochStats, Examples, FitOutcome, Kernel,
    LlsvmModel, LlsvmParams, Maintenance, Schedule, UpdateOn,
};

use crate::arrays::rows;
use crate::door::enter;
use crate::errors::ToPyErr;
use crate::progress;

/// Examples borrowed from Python.
enum PyX<'py> {
    Dense(PyReadonlyArray2<'py, f64>),
    Csr(
        PyReadonlyArray1<'py, i64>,
        PyReadonlyArray1<'py, i64>,
        PyReadonlyArray1<'py, f64>,
        usize,
    ),
}

impl<'py> PyX<'py> {
    fn new(x: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(a) = x.extract::<PyReadonlyArray2<'py, f64>>() {
            return Ok(PyX::Dense(a));
        }
        let t: (
            PyReadonlyArray1<'py, i64>,
            PyReadonlyArray1<'py, i64>,
            PyReadonlyArray1<'py, f64>,
            usize,
        ) = x.extract().map_err(|_| {
            PyTypeError::new_err(
                "`X` must be a float64 2-D array or a CSR tuple (indptr, indices, data, n_features)",
            )
        })?;
        Ok(PyX::Csr(t.0, t.1, t.2, t.3))
    }

    fn examples(&self) -> PyResult<Examples<'_>> {
        match self {
            PyX::Dense(a) => {
                let (v, d) = rows(a, "X")?;
                Examples::dense(v, d).map_err(ToPyErr::to_pyerr)
            }
            PyX::Csr(p, i, d, n) => Examples::csr(
                slice1(p, "indptr")?,
                slice1(i, "indices")?,
                slice1(d, "data")?,
                *n,
            )
            .map_err(ToPyErr::to_pyerr),
        }
    }
}

fn slice1<'a, T: numpy::Element>(a: &'a PyReadonlyArray1<'_, T>, name: &str) -> PyResult<&'a [T]> {
    a.as_slice()
        .map_err(|e| PyTypeError::new_err(format!("`{name}` must be contiguous: {e}")))
}

fn labels(y: &PyReadonlyArray1<'_, i64>) -> PyResult<Vec<usize>> {
    vastml_svm::class_codes(slice1(y, "y")?).map_err(ToPyErr::to_pyerr)
}

/// Class codes (or cluster labels) as an int64 array.
fn codes<'py>(py: Python<'py>, v: &[usize]) -> Bound<'py, PyArray1<i64>> {
    PyArray1::from_iter(py, v.iter().map(|&c| c as i64))
}

fn matrix<'py>(py: Python<'py>, v: Vec<f64>, cols: usize) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let r = v.len().checked_div(cols).unwrap_or(0);
    Array2::from_shape_vec((r, cols), v)
        .map_err(|e| PyValueError::new_err(e.to_string()))
        .map(|a| a.into_pyarray(py))
}

fn stats_dict<'py>(py: Python<'py>, s: &EpochStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("n_updates", s.n_updates)?;
    d.set_item("mean_loss", s.mean_loss)?;
    d.set_item("n_pruned", s.n_pruned)?;
    d.set_item("n_cloned", s.n_cloned)?;
    Ok(d)
}

/// A kernel as Python names it: `kernel`, `gamma`, `degree`, `coef0`.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct KernelArgs {
    kernel: String,
    gamma: f64,
    degree: i32,
    coef0: f64,
}

impl KernelArgs {
    fn build(&self) -> PyResult<Kernel> {
        let (gamma, degree, coef) = (self.gamma, self.degree, self.coef0);
        let k = match self.kernel.as_str() {
            "rbf" | "gaussian" => Kernel::Gaussian { gamma },
            "exponential" => Kernel::Exponential { gamma },
            "poly" | "polynomial" => Kernel::Polynomial { degree, coef },
            "linear" => Kernel::Linear,
            "sigmoid" => Kernel::Sigmoid { slope: gamma, coef },
            other => {
                return Err(PyValueError::new_err(format!(
                    "`kernel` must be one of 'rbf', 'exponential', 'poly', 'linear', 'sigmoid', got {other:?}"
                )));
            }
        };
        k.validate().map_err(ToPyErr::to_pyerr)?;
        Ok(k)
    }
}

/// The progress state of the SVM trainers (a count) as a Python int.
fn count_state(py: Python<'_>, s: &usize) -> PyResult<Py<PyAny>> {
    Ok(s.into_pyobject(py)?.into_any().unbind())
}

fn outcome(o: FitOutcome) -> (usize, bool) {
    (o.n_iter, o.stopped)
}

/// The passes of a `fit`: one per seed.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct ScheduleArgs {
    seeds: Vec<u64>,
    shuffle: bool,
    #[pyo3(default)]
    online: bool,
}

impl ScheduleArgs {
    fn schedule(&self) -> Schedule<'_> {
        Schedule {
            seeds: &self.seeds,
            shuffle: self.shuffle,
            online: self.online,
        }
    }
}

/// `AmmModel`'s parameters, as `AMMClassifier` names them for the core.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct AmmArgs {
    l2_penalty: f64,
    max_weights_per_class: usize,
    prune_every: u64,
    prune_c: f64,
    bias: f64,
    clone_probability: f64,
    clone_decay: f64,
    budgetedsvm: bool,
}

impl From<AmmArgs> for AmmParams {
    fn from(a: AmmArgs) -> Self {
        AmmParams {
            lambda: a.l2_penalty,
            max_weights_per_class: a.max_weights_per_class,
            prune_every: a.prune_every,
            prune_c: a.prune_c,
            bias: a.bias,
            clone_probability: a.clone_probability,
            clone_decay: a.clone_decay,
            budgetedsvm: a.budgetedsvm,
        }
    }
}

/// AmmModel(n_features, n_classes, params, weights=None, weight_class=None, steps=0)
/// --
///
/// An AMM / GAMM / Pegasos model under training (max_weights_per_class=1 is Pegasos).
/// `params`: dict of l2_penalty, max_weights_per_class, prune_every, prune_c, bias,
/// clone_probability, clone_decay, budgetedsvm.
#[pyclass(name = "AmmModel", module = "vastml._core")]
pub struct PyAmm {
    inner: Amm,
}

#[pymethods]
impl PyAmm {
    #[new]
    #[pyo3(signature = (n_features, n_classes, params, weights=None, weight_class=None, steps=0))]
    fn new(
        n_features: usize,
        n_classes: usize,
        params: AmmArgs,
        weights: Option<PyReadonlyArray2<'_, f64>>,
        weight_class: Option<PyReadonlyArray1<'_, i64>>,
        steps: u64,
    ) -> PyResult<Self> {
        let params = AmmParams::from(params);
        let inner = match (weights, weight_class) {
            (Some(w), Some(c)) => {
                let (wv, _) = rows(&w, "weights")?;
                let cls = labels(&c)?;
                Amm::from_parts(params, n_features, n_classes, wv, &cls, steps)
            }
            (None, None) => Amm::new(params, n_features, n_classes),
            _ => {
                return Err(PyValueError::new_err(
                    "pass both `weights` and `weight_class`, or neither",
                ));
            }
        }
        .map_err(ToPyErr::to_pyerr)?;
        Ok(PyAmm { inner })
    }

    /// Trains one pass per seed (batch AMM's schedule unless `online`); `schedule`: dict of
    /// seeds, shuffle, online. Returns (passes made, stopped by a callback).
    #[pyo3(signature = (x, y, schedule, progress=None))]
    fn fit(
        &mut self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        y: PyReadonlyArray1<'_, i64>,
        schedule: ScheduleArgs,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<(usize, bool)> {
        let px = PyX::new(x)?;
        let (ex, y) = (px.examples()?, labels(&y)?);
        let schedule = schedule.schedule();
        let hook = progress::hook(progress, count_state);
        let model = &mut self.inner;
        let out = enter(py, Some(1), |cancel| {
            model.fit(&ex, &y, &schedule, progress::control(cancel, hook.as_ref()))
        });
        finish(hook, out).map(outcome)
    }

    /// One online SGD pass (partial_fit).
    #[pyo3(signature = (x, y, shuffle=true, seed=0))]
    fn epoch<'py>(
        &mut self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        y: PyReadonlyArray1<'py, i64>,
        shuffle: bool,
        seed: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let px = PyX::new(x)?;
        let (ex, y) = (px.examples()?, labels(&y)?);
        let model = &mut self.inner;
        let s = enter(py, Some(1), |cancel| {
            let control = vastml_core::Control::new(cancel);
            model.epoch(&ex, &y, shuffle, seed, false, control)
        })?;
        stats_dict(py, &s)
    }

    /// Class scores g(i, x), shape (n, n_classes).
    #[pyo3(signature = (x, n_jobs=None))]
    fn decision_function<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        n_jobs: Option<isize>,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let px = PyX::new(x)?;
        let ex = px.examples()?;
        let model = &self.inner;
        let out = enter(py, n_jobs, |cancel| {
            model.decision_with(&ex, vastml_core::Control::new(cancel))
        })?;
        matrix(py, out, model.n_classes())
    }

    /// Weights, shape (n_weights, n_features + 1), the bias weight last.
    #[getter]
    fn weights<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        matrix(py, self.inner.weights(), self.inner.dim() + 1)
    }

    /// Class code of every weight.
    #[getter]
    fn weight_class<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
        codes(py, self.inner.weight_classes())
    }

    /// SGD steps taken (t).
    #[getter]
    fn steps(&self) -> u64 {
        self.inner.steps()
    }

    /// Current GAMM clone probability.
    #[getter]
    fn clone_probability(&self) -> f64 {
        self.inner.clone_probability()
    }

    /// Restores the GAMM clone probability.
    fn set_clone_probability(&mut self, p: f64) -> PyResult<()> {
        self.inner
            .set_clone_probability(p)
            .map_err(ToPyErr::to_pyerr)
    }
}

/// Raises a callback's exception if there was one, else the work's result.
fn finish<T>(hook: Option<progress::PyHook<usize>>, out: PyResult<T>) -> PyResult<T> {
    if let Some(h) = hook {
        h.finish()?;
    }
    out
}

/// `BsgdModel`'s parameters, as `BSGDClassifier` names them for the core.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct BsgdArgs {
    l2_penalty: f64,
    budget: usize,
    maintenance: String,
    #[pyo3(from_py_with = kernel_args)]
    kernel: Kernel,
}

fn kernel_args(ob: &Bound<'_, PyAny>) -> PyResult<Kernel> {
    ob.extract::<KernelArgs>()?.build()
}

impl BsgdArgs {
    fn params(&self) -> PyResult<BsgdParams> {
        let maintenance = match self.maintenance.as_str() {
            "merge" => Maintenance::Merge,
            "remove" => Maintenance::RemoveSmallest,
            "remove-random" => Maintenance::RemoveRandom,
            "project" => Maintenance::Project,
            other => {
                return Err(PyValueError::new_err(format!(
                    "`maintenance` must be 'merge', 'remove', 'remove-random' or 'project', got {other:?}"
                )));
            }
        };
        Ok(BsgdParams {
            lambda: self.l2_penalty,
            budget: self.budget,
            kernel: self.kernel,
            maintenance,
        })
    }
}

/// BsgdModel(n_features, n_classes, params, support_vectors=None, alphas=None, steps=0)
/// --
///
/// A BSGD model under training. `params`: dict of l2_penalty, budget, maintenance ('merge',
/// 'remove', 'remove-random' or 'project') and kernel (a dict of kernel, gamma, degree, coef0).
#[pyclass(name = "BsgdModel", module = "vastml._core")]
pub struct PyBsgd {
    inner: Bsgd,
    n_classes: usize,
    dim: usize,
}

#[pymethods]
impl PyBsgd {
    #[new]
    #[pyo3(signature = (n_features, n_classes, params, support_vectors=None, alphas=None, steps=0))]
    fn new(
        n_features: usize,
        n_classes: usize,
        params: BsgdArgs,
        support_vectors: Option<PyReadonlyArray2<'_, f64>>,
        alphas: Option<PyReadonlyArray2<'_, f64>>,
        steps: u64,
    ) -> PyResult<Self> {
        let params = params.params()?;
        let inner = match (support_vectors, alphas) {
            (Some(s), Some(a)) => {
                let (sv, _) = rows(&s, "support_vectors")?;
                let (al, _) = rows(&a, "alphas")?;
                Bsgd::from_parts(params, n_features, n_classes, sv, al, steps)
            }
            (None, None) => Bsgd::new(params, n_features, n_classes),
            _ => {
                return Err(PyValueError::new_err(
                    "pass both `support_vectors` and `alphas`, or neither",
                ));
            }
        }
        .map_err(ToPyErr::to_pyerr)?;
        Ok(PyBsgd {
            inner,
            n_classes,
            dim: n_features,
        })
    }

    /// Trains one pass per seed; `schedule`: dict of seeds, shuffle. Returns (passes made,
    /// stopped by a callback).
    #[pyo3(signature = (x, y, schedule, progress=None))]
    fn fit(
        &mut self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        y: PyReadonlyArray1<'_, i64>,
        schedule: ScheduleArgs,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<(usize, bool)> {
        let px = PyX::new(x)?;
        let (ex, y) = (px.examples()?, labels(&y)?);
        let schedule = schedule.schedule();
        let hook = progress::hook(progress, count_state);
        let model = &mut self.inner;
        let out = enter(py, Some(1), |cancel| {
            model.fit(&ex, &y, &schedule, progress::control(cancel, hook.as_ref()))
        });
        finish(hook, out).map(outcome)
    }

    /// One SGD pass with budget maintenance (partial_fit).
    #[pyo3(signature = (x, y, shuffle=true, seed=0))]
    fn epoch<'py>(
        &mut self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        y: PyReadonlyArray1<'py, i64>,
        shuffle: bool,
        seed: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let px = PyX::new(x)?;
        let (ex, y) = (px.examples()?, labels(&y)?);
        let model = &mut self.inner;
        let s = enter(py, Some(1), |cancel| {
            model.epoch(&ex, &y, shuffle, seed, vastml_core::Control::new(cancel))
        })?;
        stats_dict(py, &s)
    }

    /// Class scores, shape (n, n_classes).
    #[pyo3(signature = (x, n_jobs=None))]
    fn decision_function<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        n_jobs: Option<isize>,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let px = PyX::new(x)?;
        let ex = px.examples()?;
        let model = &self.inner;
        let out = enter(py, n_jobs, |cancel| {
            model.decision_with(&ex, vastml_core::Control::new(cancel))
        })?;
        matrix(py, out, self.n_classes)
    }

    /// Support vectors, shape (n_sv, n_features).
    #[getter]
    fn support_vectors<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        matrix(py, self.inner.support_vectors().to_vec(), self.dim)
    }

    /// Coefficients, shape (n_sv, n_classes).
    #[getter]
    fn alphas<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        matrix(py, self.inner.alphas(), self.n_classes)
    }

    /// SGD steps taken (t).
    #[getter]
    fn steps(&self) -> u64 {
        self.inner.steps()
    }
}

/// `arow_fit`'s parameters.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct ArowArgs {
    classes: Vec<usize>,
    update_damping: f64,
    bias: f64,
    diagonal: bool,
    update_on: String,
    shuffle: bool,
    seeds: Vec<u64>,
}

impl ArowArgs {
    fn update_on(&self) -> PyResult<UpdateOn> {
        match self.update_on.as_str() {
            "margin" => Ok(UpdateOn::Margin),
            "mistake" => Ok(UpdateOn::Mistake),
            other => Err(PyValueError::new_err(format!(
                "`update_on` must be 'margin' or 'mistake', got {other:?}"
            ))),
        }
    }

    /// The models from their stacked means `(k, d+1)` and covariances.
    fn models(&self, dim: usize, means: &[f64], covs: &[f64]) -> PyResult<Vec<Arow>> {
        let params = vastml_svm::ArowParams {
            update_damping: self.update_damping,
            bias: self.bias,
            update_on: self.update_on()?,
            diagonal: self.diagonal,
        };
        Arow::stack_from_parts(dim, params, self.classes.len(), means, covs)
            .map_err(ToPyErr::to_pyerr)
    }
}

/// arow_fit(x, y, model, params, progress=None, n_jobs=None)
/// --
///
/// AROW passes (one per seed) for each one-vs-rest model k (class code classes[k] is +1).
/// model = (means (k, d+1), covariances (k, d+1, d+1), or (k, d+1) when diagonal); params:
/// dict of classes, update_damping, bias, diagonal, update_on, shuffle, seeds. Returns (means,
/// covariances, n_updates, chunks reported, stopped by a callback).
#[pyfunction]
#[pyo3(signature = (x, y, model, params, progress=None, n_jobs=None))]
#[allow(clippy::type_complexity)]
pub fn arow_fit<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    y: PyReadonlyArray1<'py, i64>,
    model: (PyReadonlyArray2<'py, f64>, PyReadonlyArrayDyn<'py, f64>),
    params: ArowArgs,
    progress: Option<Py<PyAny>>,
    n_jobs: Option<isize>,
) -> PyResult<(
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Vec<usize>,
    usize,
    bool,
)> {
    let px = PyX::new(x)?;
    let (ex, y) = (px.examples()?, labels(&y)?);
    let (means, _) = rows(&model.0, "means")?;
    let covs = contiguous(&model.1, "covariances")?;
    let mut models = params.models(ex.dim(), means, covs)?;
    let schedule = Schedule {
        seeds: &params.seeds,
        shuffle: params.shuffle,
        online: false,
    };
    let hook = progress::hook(progress, count_state);
    let out = enter(py, n_jobs, |cancel| {
        let control = progress::control(cancel, hook.as_ref());
        vastml_svm::arow_one_vs_rest(&mut models, &params.classes, &ex, &y, &schedule, control)
    });
    let out = finish(hook, out)?;
    let (m, c) = Arow::unstack(&models);
    let (means, covs) = arow_arrays(py, m, c, models.len(), ex.dim() + 1, params.diagonal)?;
    let (n_iter, stopped) = outcome(out.outcome);
    Ok((means, covs, out.n_updates, n_iter, stopped))
}

/// The stacked means `(k, w)` and covariances `(k, w, w)` (or `(k, w)` when diagonal).
fn arow_arrays<'py>(
    py: Python<'py>,
    m: Vec<f64>,
    c: Vec<f64>,
    k: usize,
    w: usize,
    diagonal: bool,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let means = matrix(py, m, w)?.into_any();
    let covs = if diagonal {
        matrix(py, c, w)?.into_any()
    } else {
        Array3::from_shape_vec((k, w, w), c)
            .map_err(|e| PyValueError::new_err(e.to_string()))?
            .into_pyarray(py)
            .into_any()
    };
    Ok((means, covs))
}

fn contiguous<'a>(a: &'a PyReadonlyArrayDyn<'_, f64>, name: &str) -> PyResult<&'a [f64]> {
    if !a.is_c_contiguous() {
        return Err(PyTypeError::new_err(format!(
            "`{name}` must be C-contiguous float64"
        )));
    }
    a.as_slice()
        .map_err(|e| PyTypeError::new_err(e.to_string()))
}

/// `llsvm_fit`'s parameters.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct LlsvmArgs {
    classes: Vec<usize>,
    #[pyo3(from_py_with = kernel_args)]
    kernel: Kernel,
    c: f64,
    max_iter: usize,
    tol: f64,
    seed: u64,
}

impl LlsvmArgs {
    fn params(&self) -> LlsvmParams {
        let dcd = DcdOptions {
            c: self.c,
            max_iter: self.max_iter,
            tol: self.tol,
            seed: self.seed,
        };
        LlsvmParams {
            kernel: self.kernel,
            dcd,
        }
    }
}

/// llsvm_fit(x, y, landmarks, params, progress=None, n_jobs=None)
/// --
///
/// Nystrom map over the landmarks and one dual-CD linear SVM per one-vs-rest model (class
/// code classes[k] is +1). params: dict of classes, kernel (dict of kernel, gamma, degree,
/// coef0), c, max_iter, tol, seed. Returns (map_matrix (rank, B), coef (k, rank), n_iter per
/// model, stopped by a callback).
#[pyfunction]
#[pyo3(signature = (x, y, landmarks, params, progress=None, n_jobs=None))]
#[allow(clippy::type_complexity)]
pub fn llsvm_fit<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    y: PyReadonlyArray1<'py, i64>,
    landmarks: PyReadonlyArray2<'py, f64>,
    params: LlsvmArgs,
    progress: Option<Py<PyAny>>,
    n_jobs: Option<isize>,
) -> PyResult<(
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Vec<usize>,
    bool,
)> {
    let px = PyX::new(x)?;
    let (ex, y) = (px.examples()?, labels(&y)?);
    let (lm, _) = rows(&landmarks, "landmarks")?;
    let p = params.params();
    let hook = progress::hook(progress, count_state);
    let out = enter(py, n_jobs, |cancel| {
        let control = progress::control(cancel, hook.as_ref());
        vastml_svm::llsvm_fit(&ex, &y, &params.classes, lm, &p, control)
    });
    let fit = finish(hook, out)?;
    let b = landmarks.shape()[0];
    Ok((
        matrix(py, fit.map_matrix, b)?,
        matrix(py, fit.models.coef, fit.rank)?,
        fit.models.n_iter,
        fit.models.outcome.stopped,
    ))
}

/// llsvm_decision(x, model, kernel, n_jobs=None)
/// --
///
/// Scores coef . (map_matrix g(x)), shape (n, k); model = (landmarks, map_matrix, coef),
/// kernel: dict of kernel, gamma, degree, coef0.
#[pyfunction]
#[pyo3(signature = (x, model, kernel, n_jobs=None))]
pub fn llsvm_decision<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    model: (
        PyReadonlyArray2<'py, f64>,
        PyReadonlyArray2<'py, f64>,
        PyReadonlyArray2<'py, f64>,
    ),
    kernel: KernelArgs,
    n_jobs: Option<isize>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let px = PyX::new(x)?;
    let ex = px.examples()?;
    let (coef, rank) = rows(&model.2, "coef")?;
    let m = LlsvmModel {
        kernel: kernel.build()?,
        landmarks: rows(&model.0, "landmarks")?.0,
        map_matrix: rows(&model.1, "map_matrix")?.0,
        coef,
        rank,
    };
    let out = enter(py, n_jobs, |cancel| {
        vastml_svm::llsvm_decision(&ex, &m, vastml_core::Control::new(cancel))
    })?;
    matrix(py, out, model.2.shape()[0])
}

/// llsvm_kmeans(x, k, max_iter=10, seed=0, n_jobs=None)
/// --
///
/// LLSVM's k-means landmarks (BudgetedSVM's: k random distinct rows, then `max_iter` Lloyd
/// iterations) on dense rows or a CSR tuple (not densified). Returns (centers, labels).
#[pyfunction]
#[pyo3(signature = (x, k, max_iter=10, seed=0, n_jobs=None))]
#[allow(clippy::type_complexity)]
pub fn llsvm_kmeans<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    k: usize,
    max_iter: usize,
    seed: u64,
    n_jobs: Option<isize>,
) -> PyResult<(Bound<'py, PyArray2<f64>>, Bound<'py, PyArray1<i64>>)> {
    let px = PyX::new(x)?;
    let ex = px.examples()?;
    let (c, l) = enter(py, n_jobs, |cancel| {
        let control = vastml_core::Control::new(cancel);
        vastml_svm::kmeans_landmarks(&ex, k, max_iter, seed, control)
    })?;
    Ok((matrix(py, c, ex.dim())?, codes(py, &l)))
}

/// kmeans(x, k, max_iter=100, tol=0.0, seed=0, n_jobs=None)
/// --
///
/// Seeded k-means (k-means++ then Lloyd) on dense rows or a CSR tuple (not densified).
/// Returns (centers, labels, inertia, n_iter).
#[pyfunction]
#[pyo3(signature = (x, k, max_iter=100, tol=0.0, seed=0, n_jobs=None))]
#[allow(clippy::type_complexity)]
pub fn kmeans<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    k: usize,
    max_iter: usize,
    tol: f64,
    seed: u64,
    n_jobs: Option<isize>,
) -> PyResult<(
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray1<i64>>,
    f64,
    usize,
)> {
    let px = PyX::new(x)?;
    let ex = px.examples()?;
    let km = enter(py, n_jobs, |cancel| {
        vastml_svm::kmeans(
            &ex,
            k,
            max_iter,
            tol,
            seed,
            vastml_core::Control::new(cancel),
        )
    })?;
    Ok((
        matrix(py, km.centers, ex.dim())?,
        codes(py, &km.labels),
        km.inertia,
        km.n_iter,
    ))
}
