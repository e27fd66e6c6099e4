//! Bindings of `vastml-svm`: argument conversion and delegation only.
//!
//! Examples arrive as a C-contiguous float64 2-D array or as a CSR tuple
//! `(indptr int64, indices int64, data float64, n_features)`; neither is copied. Parameters
//! arrive as a dict read into the crate's own parameter structs ([`FromDict`]). Training
//! reports every pass (or chunk of a single pass) to `progress` with the state an int: the
//! model size, or the updates made.

use numpy::ndarray::Array3;
use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArrayDyn,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use vastml_core::Control;
use vastml_svm::{
    Amm, AmmParams, Arow, ArowParams, Bsgd, BsgdParams, DcdOptions, EpochStats, Examples, Kernel,
    LlsvmModel, LlsvmParams, Schedule, SvmError,
};

use crate::arrays::{by_rows, index_array, rows, rows_n, slice};
use crate::door::enter;
use crate::errors::ToPyErr;
use crate::options::{Dict, FromDict, Options};
use crate::progress::{self, finish};

/// Examples borrowed from Python.
pub enum PyX<'py> {
    Dense(PyReadonlyArray2<'py, f64>),
    Csr(PyCsr<'py>),
}

/// A CSR tuple `(indptr, indices, data, n_features)`.
pub type PyCsr<'py> = (
    PyReadonlyArray1<'py, i64>,
    PyReadonlyArray1<'py, i64>,
    PyReadonlyArray1<'py, f64>,
    usize,
);

impl<'a, 'py> FromPyObject<'a, 'py> for PyX<'py> {
    type Error = PyErr;

    fn extract(x: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if let Ok(a) = x.extract() {
            return Ok(PyX::Dense(a));
        }
        x.extract().map(PyX::Csr).map_err(|_| {
            PyTypeError::new_err("`X` must be a float64 2-D array or a CSR tuple (indptr, indices, data, n_features)")
        })
    }
}

impl PyX<'_> {
    fn examples(&self) -> PyResult<Examples<'_>> {
        match self {
            PyX::Dense(a) => rows(a, "X").and_then(|(v, d)| to_py(Examples::dense(v, d))),
            PyX::Csr((p, i, d, n)) => {
                let (p, i, d) = (slice(p, "indptr")?, slice(i, "indices")?, slice(d, "data")?);
                to_py(Examples::csr(p, i, d, *n))
            }
        }
    }
}

fn to_py<T>(r: Result<T, SvmError>) -> PyResult<T> {
    r.map_err(ToPyErr::to_pyerr)
}

/// Class codes as NumPy holds them.
pub type Labels<'py> = PyReadonlyArray1<'py, i64>;

/// Examples and their class codes.
fn labelled<'a>(x: &'a PyX<'_>, y: &Labels<'_>) -> PyResult<(Examples<'a>, Vec<usize>)> {
    let codes = to_py(vastml_svm::class_codes(slice(y, "y")?))?;
    Ok((x.examples()?, codes))
}

/// The progress state of the SVM trainers (a count) as a Python int.
fn count_state(py: Python<'_>, s: &usize) -> PyResult<Py<PyAny>> {
    Ok(s.into_pyobject(py)?.into_any().unbind())
}

/// A fitted model's two arrays, both given or both absent.
fn both<A, B>(a: Option<A>, b: Option<B>, names: &str) -> PyResult<Option<(A, B)>> {
    match (a, b) {
        (Some(a), Some(b)) => Ok(Some((a, b))),
        (None, None) => Ok(None),
        _ => Err(PyValueError::new_err(format!(
            "pass both {names}, or neither"
        ))),
    }
}

/// A kernel as Python names it: `kernel`, `gamma`, `degree`, `coef0`.
impl FromDict for Kernel {
    fn from_dict(d: &Options<'_>) -> PyResult<Self> {
        let (gamma, degree, coef0) = (d.get("gamma")?, d.get("degree")?, d.get("coef0")?);
        to_py(Kernel::new(d.parse("kernel")?, gamma, degree, coef0))
    }
}

impl FromDict for AmmParams {
    fn from_dict(d: &Options<'_>) -> PyResult<Self> {
        Ok(AmmParams {
            lambda: d.get("l2_penalty")?,
            max_weights_per_class: d.get("max_weights_per_class")?,
            prune_every: d.get("prune_every")?,
            prune_c: d.get("prune_c")?,
            bias: d.get("bias")?,
            clone_probability: d.get("clone_probability")?,
            clone_decay: d.get("clone_decay")?,
            budgetedsvm: d.get("budgetedsvm")?,
        })
    }
}

impl FromDict for BsgdParams {
    fn from_dict(d: &Options<'_>) -> PyResult<Self> {
        Ok(BsgdParams {
            lambda: d.get("l2_penalty")?,
            budget: d.get("budget")?,
            kernel: d.get::<Dict<Kernel>>("kernel")?.0,
            maintenance: d.parse("maintenance")?,
        })
    }
}

/// The passes of a `fit`: `seeds` (one pass per seed), `shuffle`, and for AMM `online`.
pub struct ScheduleArgs {
    seeds: Vec<u64>,
    shuffle: bool,
    online: bool,
}

impl FromDict for ScheduleArgs {
    fn from_dict(d: &Options<'_>) -> PyResult<Self> {
        let (seeds, shuffle) = (d.get("seeds")?, d.get("shuffle")?);
        let online = d.get_or("online", false)?;
        Ok(ScheduleArgs {
            seeds,
            shuffle,
            online,
        })
    }
}

impl ScheduleArgs {
    fn schedule(&self) -> Schedule<'_> {
        let (seeds, shuffle, online) = (&self.seeds[..], self.shuffle, self.online);
        Schedule {
            seeds,
            shuffle,
            online,
        }
    }
}

/// One partial_fit pass's statistics as a dict.
fn stats_dict(py: Python<'_>, s: EpochStats) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("n_updates", s.n_updates)?;
    d.set_item("mean_loss", s.mean_loss)?;
    d.set_item("n_pruned", s.n_pruned)?;
    d.set_item("n_cloned", s.n_cloned)?;
    Ok(d)
}

/// The `#[pymethods]` of a model under training (a pyclass whose `inner` is an [`Amm`] or a
/// [`Bsgd`]): `fit`, `epoch` (one partial_fit pass, run by `$epoch`), `decision_function`
/// (`$n_classes` columns), then the class's own `$extra` methods.
macro_rules! trainer_methods {
    ($ty:ty, n_classes = $n_classes:expr, epoch = $epoch:expr, { $($extra:tt)* }) => {
        #[pymethods]
        impl $ty {
            /// Trains one pass per seed; returns (passes made, stopped by a callback).
            #[pyo3(signature = (x, y, schedule, progress=None))]
            fn fit(&mut self, py: Python<'_>, x: PyX<'_>, y: Labels<'_>, schedule: Dict<ScheduleArgs>, progress: Option<Py<PyAny>>) -> PyResult<(usize, bool)> {
                let ((ex, y), model) = (labelled(&x, &y)?, &mut self.inner);
                let hook = progress::hook(progress, count_state);
                let out = enter(py, Some(1), |cancel| {
                    model.fit(&ex, &y, &schedule.0.schedule(), progress::control(cancel, hook.as_ref()))
                });
                finish(hook, out).map(|o| (o.n_iter, o.stopped))
            }

            /// One SGD pass (partial_fit): its statistics.
            #[pyo3(signature = (x, y, shuffle=true, seed=0))]
            fn epoch<'py>(&mut self, py: Python<'py>, x: PyX<'py>, y: Labels<'py>, shuffle: bool, seed: u64) -> PyResult<Bound<'py, PyDict>> {
                let ((ex, y), model) = (labelled(&x, &y)?, &mut self.inner);
                let s = enter(py, Some(1), |cancel| {
                    ($epoch)(model, &ex, &y, (shuffle, seed), Control::new(cancel))
                })?;
                stats_dict(py, s)
            }

            /// Class scores, shape (n, n_classes).
            #[pyo3(signature = (x, n_jobs=None))]
            fn decision_function<'py>(&self, py: Python<'py>, x: PyX<'py>, n_jobs: Option<isize>) -> PyResult<Bound<'py, PyArray2<f64>>> {
                let (ex, model) = (x.examples()?, &self.inner);
                let out = enter(py, n_jobs, |cancel| model.decision_with(&ex, Control::new(cancel)))?;
                by_rows(py, out, ($n_classes)(self))
            }

            $($extra)*
        }
    };
}

/// An AMM / GAMM / Pegasos model under training (max_weights_per_class=1 is Pegasos).
#[pyclass(name = "AmmModel", module = "vastml._core")]
pub struct PyAmm {
    inner: Amm,
}

trainer_methods!(
    PyAmm,
    n_classes = |m: &PyAmm| m.inner.n_classes(),
    epoch = |m: &mut Amm, x, y, (shuffle, seed), c| m.epoch(x, y, shuffle, seed, false, c),
    {
        #[new]
        #[pyo3(signature = (n_features, n_classes, params, weights=None, weight_class=None, steps=0))]
        fn new(
            n_features: usize,
            n_classes: usize,
            params: Dict<AmmParams>,
            weights: Option<PyReadonlyArray2<'_, f64>>,
            weight_class: Option<Labels<'_>>,
            steps: u64,
        ) -> PyResult<Self> {
            let (params, dims) = (params.0, (n_features, n_classes));
            let inner = match both(weights, weight_class, "`weights` and `weight_class`")? {
                Some((w, c)) => {
                    let cls = to_py(vastml_svm::class_codes(slice(&c, "weight_class")?))?;
                    let w = rows(&w, "weights")?.0;
                    Amm::from_parts(params, dims.0, dims.1, w, &cls, steps)
                }
                None => Amm::new(params, n_features, n_classes),
            };
            to_py(inner).map(|inner| PyAmm { inner })
        }

        /// Weights, shape (n_weights, n_features + 1), the bias weight last.
        #[getter]
        fn weights<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
            by_rows(py, self.inner.weights(), self.inner.dim() + 1)
        }

        /// Class code of every weight.
        #[getter]
        fn weight_class<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
            index_array(py, self.inner.weight_classes())
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
            to_py(self.inner.set_clone_probability(p))
        }
    }
);

/// A BSGD model under training.
#[pyclass(name = "BsgdModel", module = "vastml._core")]
pub struct PyBsgd {
    inner: Bsgd,
    n_classes: usize,
    dim: usize,
}

trainer_methods!(
    PyBsgd,
    n_classes = |m: &PyBsgd| m.n_classes,
    epoch = |m: &mut Bsgd, x, y, (shuffle, seed), c| m.epoch(x, y, shuffle, seed, c),
    {
        #[new]
        #[pyo3(signature = (n_features, n_classes, params, support_vectors=None, alphas=None, steps=0))]
        fn new(
            n_features: usize,
            n_classes: usize,
            params: Dict<BsgdParams>,
            support_vectors: Option<PyReadonlyArray2<'_, f64>>,
            alphas: Option<PyReadonlyArray2<'_, f64>>,
            steps: u64,
        ) -> PyResult<Self> {
            let (params, dim) = (params.0, n_features);
            let inner = match both(support_vectors, alphas, "`support_vectors` and `alphas`")? {
                Some((s, a)) => {
                    let (sv, al) = (rows(&s, "support_vectors")?.0, rows(&a, "alphas")?.0);
                    Bsgd::from_parts(params, dim, n_classes, sv, al, steps)
                }
                None => Bsgd::new(params, dim, n_classes),
            };
            let inner = to_py(inner)?;
            Ok(PyBsgd {
                inner,
                n_classes,
                dim,
            })
        }

        /// Support vectors, shape (n_sv, n_features).
        #[getter]
        fn support_vectors<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
            by_rows(py, self.inner.support_vectors().to_vec(), self.dim)
        }

        /// Coefficients, shape (n_sv, n_classes).
        #[getter]
        fn alphas<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
            by_rows(py, self.inner.alphas(), self.n_classes)
        }

        /// SGD steps taken (t).
        #[getter]
        fn steps(&self) -> u64 {
            self.inner.steps()
        }
    }
);

impl FromDict for ArowParams {
    fn from_dict(d: &Options<'_>) -> PyResult<Self> {
        Ok(ArowParams {
            update_damping: d.get("update_damping")?,
            bias: d.get("bias")?,
            update_on: d.parse("update_on")?,
            diagonal: d.get("diagonal")?,
        })
    }
}

/// The stacked AROW models: means `(k, d + 1)` and covariances `(k, d + 1, d + 1)` (or
/// `(k, d + 1)` when diagonal).
pub type ArowModels<'py> = (PyReadonlyArray2<'py, f64>, PyReadonlyArrayDyn<'py, f64>);

/// The models' stacked means and covariances as NumPy arrays.
fn arow_arrays<'py>(
    py: Python<'py>,
    models: &[Arow],
    w: usize,
    diagonal: bool,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let (m, c) = Arow::unstack(models);
    let covs = match diagonal {
        true => by_rows(py, c, w)?.into_any(),
        false => Array3::from_shape_vec((models.len(), w, w), c)
            .map_err(|e| PyValueError::new_err(e.to_string()))?
            .into_pyarray(py)
            .into_any(),
    };
    Ok((by_rows(py, m, w)?.into_any(), covs))
}

/// What `arow_fit` returns: (means, covariances, n_updates, chunks reported, stopped).
type ArowOut<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Vec<usize>,
    usize,
    bool,
);

/// AROW passes (one per seed) of each one-vs-rest model k (class code classes[k] is +1).
#[pyfunction]
#[pyo3(signature = (x, y, model, params, progress=None, n_jobs=None))]
pub fn arow_fit<'py>(
    py: Python<'py>,
    x: PyX<'py>,
    y: Labels<'py>,
    model: ArowModels<'py>,
    params: Dict<(ArowParams, ScheduleArgs, Classes)>,
    progress: Option<Py<PyAny>>,
    n_jobs: Option<isize>,
) -> PyResult<ArowOut<'py>> {
    let ((ex, y), (p, schedule, Classes(classes))) = (labelled(&x, &y)?, params.0);
    let (means, covs) = (rows(&model.0, "means")?.0, model.1.as_slice());
    let covs = covs.map_err(|e| PyTypeError::new_err(format!("`covariances`: {e}")))?;
    let mut models = to_py(Arow::stack_from_parts(
        ex.dim(),
        p,
        classes.len(),
        means,
        covs,
    ))?;
    let hook = progress::hook(progress, count_state);
    let out = enter(py, n_jobs, |cancel| {
        let control = progress::control(cancel, hook.as_ref());
        let schedule = schedule.schedule();
        vastml_svm::arow_one_vs_rest(&mut models, &classes, &ex, &y, &schedule, control)
    });
    let out = finish(hook, out)?;
    let (means, covs) = arow_arrays(py, &models, ex.dim() + 1, p.diagonal)?;
    let (n, o) = (out.n_updates, out.outcome);
    Ok((means, covs, n, o.n_iter, o.stopped))
}

/// The class code of each one-vs-rest model (key `classes`).
pub struct Classes(Vec<usize>);

impl FromDict for Classes {
    fn from_dict(d: &Options<'_>) -> PyResult<Self> {
        d.get("classes").map(Classes)
    }
}

impl FromDict for LlsvmParams {
    fn from_dict(d: &Options<'_>) -> PyResult<Self> {
        let dcd = DcdOptions {
            c: d.get("c")?,
            max_iter: d.get("max_iter")?,
            tol: d.get("tol")?,
            seed: d.get("seed")?,
        };
        let kernel = d.get::<Dict<Kernel>>("kernel")?.0;
        Ok(LlsvmParams { kernel, dcd })
    }
}

/// What `llsvm_fit` returns: (map_matrix (rank, B), coef (k, rank), n_iter per model, stopped).
type LlsvmOut<'py> = (
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Vec<usize>,
    bool,
);

/// Nystrom map over the landmarks and one dual-CD linear SVM per one-vs-rest model.
#[pyfunction]
#[pyo3(signature = (x, y, landmarks, params, progress=None, n_jobs=None))]
pub fn llsvm_fit<'py>(
    py: Python<'py>,
    x: PyX<'py>,
    y: Labels<'py>,
    landmarks: PyReadonlyArray2<'py, f64>,
    params: Dict<(LlsvmParams, Classes)>,
    progress: Option<Py<PyAny>>,
    n_jobs: Option<isize>,
) -> PyResult<LlsvmOut<'py>> {
    let ((ex, y), (p, Classes(classes))) = (labelled(&x, &y)?, params.0);
    let (lm, b, _) = rows_n(&landmarks, "landmarks")?;
    let hook = progress::hook(progress, count_state);
    let out = enter(py, n_jobs, |cancel| {
        let control = progress::control(cancel, hook.as_ref());
        vastml_svm::llsvm_fit(&ex, &y, &classes, lm, &p, control)
    });
    let fit = finish(hook, out)?;
    let map = by_rows(py, fit.map_matrix, b)?;
    let coef = by_rows(py, fit.models.coef, fit.rank)?;
    Ok((map, coef, fit.models.n_iter, fit.models.outcome.stopped))
}

/// The LLSVM model `(landmarks, map_matrix, coef)`.
pub type LlsvmArrays<'py> = (
    PyReadonlyArray2<'py, f64>,
    PyReadonlyArray2<'py, f64>,
    PyReadonlyArray2<'py, f64>,
);

/// LLSVM scores coef . (map_matrix g(x)), shape (n, k).
#[pyfunction]
#[pyo3(signature = (x, model, kernel, n_jobs=None))]
pub fn llsvm_decision<'py>(
    py: Python<'py>,
    x: PyX<'py>,
    model: LlsvmArrays<'py>,
    kernel: Dict<Kernel>,
    n_jobs: Option<isize>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let (ex, (coef, k, rank)) = (x.examples()?, rows_n(&model.2, "coef")?);
    let (landmarks, map_matrix) = (
        rows(&model.0, "landmarks")?.0,
        rows(&model.1, "map_matrix")?.0,
    );
    let kernel = kernel.0;
    let m = LlsvmModel {
        kernel,
        landmarks,
        map_matrix,
        coef,
        rank,
    };
    let out = enter(py, n_jobs, |cancel| {
        vastml_svm::llsvm_decision(&ex, &m, Control::new(cancel))
    })?;
    by_rows(py, out, k)
}

/// Cluster centres and the label of every example.
type Clusters<'py> = (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray1<i64>>);

/// LLSVM's k-means landmarks (BudgetedSVM's): (centers, labels).
#[pyfunction]
#[pyo3(signature = (x, k, max_iter=10, seed=0, n_jobs=None))]
pub fn llsvm_kmeans<'py>(
    py: Python<'py>,
    x: PyX<'py>,
    k: usize,
    max_iter: usize,
    seed: u64,
    n_jobs: Option<isize>,
) -> PyResult<Clusters<'py>> {
    let ex = x.examples()?;
    let (c, l) = enter(py, n_jobs, |cancel| {
        vastml_svm::kmeans_landmarks(&ex, k, max_iter, seed, Control::new(cancel))
    })?;
    Ok((by_rows(py, c, ex.dim())?, index_array(py, &l)))
}

/// What `kmeans` returns: (centers, labels, inertia, n_iter).
type KmeansOut<'py> = (
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray1<i64>>,
    f64,
    usize,
);

/// Seeded k-means (k-means++ then Lloyd), dense or CSR: (centers, labels, inertia, n_iter).
#[pyfunction]
#[pyo3(signature = (x, k, max_iter=100, tol=0.0, seed=0, n_jobs=None))]
pub fn kmeans<'py>(
    py: Python<'py>,
    x: PyX<'py>,
    k: usize,
    max_iter: usize,
    tol: f64,
    seed: u64,
    n_jobs: Option<isize>,
) -> PyResult<KmeansOut<'py>> {
    let ex = x.examples()?;
    let km = enter(py, n_jobs, |cancel| {
        vastml_svm::kmeans(&ex, k, max_iter, tol, seed, Control::new(cancel))
    })?;
    let centers = by_rows(py, km.centers, ex.dim())?;
    Ok((centers, index_array(py, &km.labels), km.inertia, km.n_iter))
}
