//! Bindings of `vastml-svm`: argument conversion and delegation only.
//!
//! Examples arrive as a C-contiguous float64 2-D array or as a CSR tuple
//! `(indptr int64, indices int64, data float64, n_features)`; neither is copied. Parameters
//! arrive as a dict read into the option structs below. Training reports every pass (or chunk
//! of a single pass) to `progress` with the state an int: the model size, or the updates made.

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
    KernelKind, LlsvmModel, LlsvmParams, Maintenance, Schedule, SvmError, UpdateOn,
};

use crate::arrays::{Wrap, matrix, rows, rows_n};
use crate::door::enter;
use crate::errors::ToPyErr;
use crate::fgt::finish;
use crate::progress;

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
                let (p, i, d) = (contiguous(p)?, contiguous(i)?, contiguous(d)?);
                to_py(Examples::csr(p, i, d, *n))
            }
        }
    }
}

fn contiguous<'a, T: numpy::Element>(a: &'a PyReadonlyArray1<'_, T>) -> PyResult<&'a [T]> {
    a.as_slice()
        .map_err(|e| PyTypeError::new_err(format!("CSR arrays must be contiguous: {e}")))
}

fn to_py<T>(r: Result<T, SvmError>) -> PyResult<T> {
    r.map_err(ToPyErr::to_pyerr)
}

/// Class codes as NumPy holds them.
pub type Labels<'py> = PyReadonlyArray1<'py, i64>;

/// Examples and their class codes.
fn labelled<'a>(
    x: &'a PyX<'_>,
    y: &PyReadonlyArray1<'_, i64>,
) -> PyResult<(Examples<'a>, Vec<usize>)> {
    Ok((
        x.examples()?,
        to_py(vastml_svm::class_codes(contiguous(y)?))?,
    ))
}

/// Class codes (or cluster labels) as an int64 array.
fn codes<'py>(py: Python<'py>, v: &[usize]) -> Bound<'py, PyArray1<i64>> {
    PyArray1::from_iter(py, v.iter().map(|&c| c as i64))
}

/// Row-major `values` of `cols` columns as a NumPy matrix.
fn by_rows<'py>(py: Python<'py>, v: Vec<f64>, cols: usize) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let n = crate::arrays::n_rows(v.len(), cols);
    matrix(py, v, n, cols)
}

/// The progress state of the SVM trainers (a count) as a Python int.
fn count_state(py: Python<'_>, s: &usize) -> PyResult<Py<PyAny>> {
    Ok(s.into_pyobject(py)?.into_any().unbind())
}

/// A kernel as Python names it: `kernel`, `gamma`, `degree`, `coef0`.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct KernelArgs {
    kernel: Wrap<KernelKind>,
    gamma: f64,
    degree: i32,
    coef0: f64,
}

fn kernel_args(ob: &Bound<'_, PyAny>) -> PyResult<Kernel> {
    let k: KernelArgs = ob.extract()?;
    to_py(Kernel::new(k.kernel.0, k.gamma, k.degree, k.coef0))
}

/// The passes of a `fit`: one per seed.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct ScheduleArgs {
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

/// The `#[pymethods]` of a model under training (a pyclass whose `inner` is an [`Amm`] or a
/// [`Bsgd`]): `fit`, `epoch` (one partial_fit pass, run by `$epoch`), `decision_function`
/// (`$n_classes` columns), then the class's own `$extra` methods.
macro_rules! trainer_methods {
    ($ty:ty, n_classes = $n_classes:expr, epoch = $epoch:expr, { $($extra:tt)* }) => {
        #[pymethods]
        impl $ty {
            /// Trains one pass per seed; returns (passes made, stopped by a callback).
            #[pyo3(signature = (x, y, schedule, progress=None))]
            fn fit(&mut self, py: Python<'_>, x: PyX<'_>, y: Labels<'_>, schedule: ScheduleArgs, progress: Option<Py<PyAny>>) -> PyResult<(usize, bool)> {
                let ((ex, y), model) = (labelled(&x, &y)?, &mut self.inner);
                let hook = progress::hook(progress, count_state);
                let out = enter(py, Some(1), |cancel| {
                    let control = progress::control(cancel, hook.as_ref());
                    model.fit(&ex, &y, &schedule.schedule(), control)
                });
                finish(hook, out).map(|o| (o.n_iter, o.stopped))
            }

            /// One SGD pass (partial_fit): its statistics.
            #[pyo3(signature = (x, y, shuffle=true, seed=0))]
            fn epoch<'py>(&mut self, py: Python<'py>, x: PyX<'py>, y: Labels<'py>, shuffle: bool, seed: u64) -> PyResult<Bound<'py, PyDict>> {
                let ((ex, y), model) = (labelled(&x, &y)?, &mut self.inner);
                let s: EpochStats = enter(py, Some(1), |cancel| {
                    ($epoch)(model, &ex, &y, (shuffle, seed), Control::new(cancel))
                })?;
                let d = PyDict::new(py);
                d.set_item("n_updates", s.n_updates)?;
                d.set_item("mean_loss", s.mean_loss)?;
                d.set_item("n_pruned", s.n_pruned)?;
                d.set_item("n_cloned", s.n_cloned)?;
                Ok(d)
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

/// `AmmModel`'s parameters, as `AMMClassifier` names them for the core.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct AmmArgs {
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
            params: AmmArgs,
            weights: Option<PyReadonlyArray2<'_, f64>>,
            weight_class: Option<PyReadonlyArray1<'_, i64>>,
            steps: u64,
        ) -> PyResult<Self> {
            let params = AmmParams::from(params);
            let inner = match (weights, weight_class) {
                (Some(w), Some(c)) => {
                    let cls = to_py(vastml_svm::class_codes(contiguous(&c)?))?;
                    Amm::from_parts(
                        params,
                        n_features,
                        n_classes,
                        rows(&w, "weights")?.0,
                        &cls,
                        steps,
                    )
                }
                (None, None) => Amm::new(params, n_features, n_classes),
                _ => {
                    return Err(PyValueError::new_err(
                        "pass both `weights` and `weight_class`, or neither",
                    ));
                }
            };
            Ok(PyAmm {
                inner: to_py(inner)?,
            })
        }

        /// Weights, shape (n_weights, n_features + 1), the bias weight last.
        #[getter]
        fn weights<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
            by_rows(py, self.inner.weights(), self.inner.dim() + 1)
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
            to_py(self.inner.set_clone_probability(p))
        }
    }
);

/// `BsgdModel`'s parameters, as `BSGDClassifier` names them for the core.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct BsgdArgs {
    l2_penalty: f64,
    budget: usize,
    maintenance: Wrap<Maintenance>,
    #[pyo3(from_py_with = kernel_args)]
    kernel: Kernel,
}

impl From<BsgdArgs> for BsgdParams {
    fn from(a: BsgdArgs) -> Self {
        BsgdParams {
            lambda: a.l2_penalty,
            budget: a.budget,
            kernel: a.kernel,
            maintenance: a.maintenance.0,
        }
    }
}

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
            params: BsgdArgs,
            support_vectors: Option<PyReadonlyArray2<'_, f64>>,
            alphas: Option<PyReadonlyArray2<'_, f64>>,
            steps: u64,
        ) -> PyResult<Self> {
            let params = BsgdParams::from(params);
            let inner = match (support_vectors, alphas) {
                (Some(s), Some(a)) => {
                    let (sv, al) = (rows(&s, "support_vectors")?.0, rows(&a, "alphas")?.0);
                    Bsgd::from_parts(params, n_features, n_classes, sv, al, steps)
                }
                (None, None) => Bsgd::new(params, n_features, n_classes),
                _ => {
                    return Err(PyValueError::new_err(
                        "pass both `support_vectors` and `alphas`, or neither",
                    ));
                }
            };
            let (inner, dim) = (to_py(inner)?, n_features);
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

/// `arow_fit`'s parameters.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct ArowArgs {
    classes: Vec<usize>,
    update_damping: f64,
    bias: f64,
    diagonal: bool,
    update_on: Wrap<UpdateOn>,
    seeds: Vec<u64>,
    shuffle: bool,
}

/// The stacked AROW models: means `(k, d + 1)` and covariances `(k, d + 1, d + 1)` (or
/// `(k, d + 1)` when diagonal).
pub type ArowModels<'py> = (PyReadonlyArray2<'py, f64>, PyReadonlyArrayDyn<'py, f64>);

impl ArowArgs {
    /// The models of `dim` features from their stacked arrays.
    fn models(&self, dim: usize, (means, covs): &ArowModels<'_>) -> PyResult<Vec<Arow>> {
        let covs = covs
            .as_slice()
            .map_err(|e| PyTypeError::new_err(format!("`covariances`: {e}")))?;
        let (update_damping, bias, diagonal) = (self.update_damping, self.bias, self.diagonal);
        let p = ArowParams {
            update_damping,
            bias,
            update_on: self.update_on.0,
            diagonal,
        };
        let k = self.classes.len();
        to_py(Arow::stack_from_parts(
            dim,
            p,
            k,
            rows(means, "means")?.0,
            covs,
        ))
    }
}

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
pub type ArowOut<'py> = (
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
    y: PyReadonlyArray1<'py, i64>,
    model: ArowModels<'py>,
    params: ArowArgs,
    progress: Option<Py<PyAny>>,
    n_jobs: Option<isize>,
) -> PyResult<ArowOut<'py>> {
    let (ex, y) = labelled(&x, &y)?;
    let mut models = params.models(ex.dim(), &model)?;
    let (seeds, shuffle) = (&params.seeds, params.shuffle);
    let hook = progress::hook(progress, count_state);
    let out = enter(py, n_jobs, |cancel| {
        let control = progress::control(cancel, hook.as_ref());
        let schedule = Schedule {
            seeds,
            shuffle,
            online: false,
        };
        vastml_svm::arow_one_vs_rest(&mut models, &params.classes, &ex, &y, &schedule, control)
    });
    let out = finish(hook, out)?;
    let (means, covs) = arow_arrays(py, &models, ex.dim() + 1, params.diagonal)?;
    Ok((
        means,
        covs,
        out.n_updates,
        out.outcome.n_iter,
        out.outcome.stopped,
    ))
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

/// What `llsvm_fit` returns: (map_matrix (rank, B), coef (k, rank), n_iter per model, stopped).
pub type LlsvmOut<'py> = (
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
    y: PyReadonlyArray1<'py, i64>,
    landmarks: PyReadonlyArray2<'py, f64>,
    params: LlsvmArgs,
    progress: Option<Py<PyAny>>,
    n_jobs: Option<isize>,
) -> PyResult<LlsvmOut<'py>> {
    let (ex, y) = labelled(&x, &y)?;
    let (lm, b, _) = rows_n(&landmarks, "landmarks")?;
    let dcd = DcdOptions {
        c: params.c,
        max_iter: params.max_iter,
        tol: params.tol,
        seed: params.seed,
    };
    let p = LlsvmParams {
        kernel: params.kernel,
        dcd,
    };
    let hook = progress::hook(progress, count_state);
    let out = enter(py, n_jobs, |cancel| {
        let control = progress::control(cancel, hook.as_ref());
        vastml_svm::llsvm_fit(&ex, &y, &params.classes, lm, &p, control)
    });
    let fit = finish(hook, out)?;
    let (map, coef) = (
        by_rows(py, fit.map_matrix, b)?,
        by_rows(py, fit.models.coef, fit.rank)?,
    );
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
    #[pyo3(from_py_with = kernel_args)] kernel: Kernel,
    n_jobs: Option<isize>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let ex = x.examples()?;
    let (coef, k, rank) = rows_n(&model.2, "coef")?;
    let (landmarks, map_matrix) = (
        rows(&model.0, "landmarks")?.0,
        rows(&model.1, "map_matrix")?.0,
    );
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
pub type Clusters<'py> = (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray1<i64>>);

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
    Ok((by_rows(py, c, ex.dim())?, codes(py, &l)))
}

/// What `kmeans` returns: (centers, labels, inertia, n_iter).
pub type KmeansOut<'py> = (
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray1<i64>>,
    f64,
    usize,
);

/// Seeded k-means (k-means++ then Lloyd) on dense rows or a CSR tuple (not densified).
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
    Ok((
        by_rows(py, km.centers, ex.dim())?,
        codes(py, &km.labels),
        km.inertia,
        km.n_iter,
    ))
}
