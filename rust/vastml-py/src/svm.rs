//! Bindings of `vastml-svm` (and `vastml_spatial::kmeans` for LLSVM landmarks).
//!
//! Examples arrive as a C-contiguous float64 2-D array or as a CSR tuple
//! `(indptr int64, indices int64, data float64, n_features)`; neither is copied.

use numpy::ndarray::{Array2, Array3};
use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rayon::prelude::*;
use vastml_svm::{
    Amm, AmmParams, Arow, Bsgd, BsgdParams, DcdOptions, EpochStats, Examples, Kernel, Maintenance,
    Nystrom, SvmError, UpdateOn,
};

use crate::arrays::rows;
use crate::door::enter;
use crate::errors::ToPyErr;

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
    slice1(y, "y")?
        .iter()
        .map(|&v| usize::try_from(v).map_err(|_| PyValueError::new_err("`y` codes must be >= 0")))
        .collect()
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

fn kernel(name: &str, gamma: f64, degree: i32, coef: f64) -> PyResult<Kernel> {
    let k = match name {
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

/// AmmModel(n_features, n_classes, lambda_, max_weights_per_class, prune_every, prune_c, bias,
///          clone_probability=0.0, clone_decay=0.99, weights=None, weight_class=None, steps=0,
///          budgetedsvm=False)
/// --
///
/// An AMM / GAMM / Pegasos model under training (max_weights_per_class=1 is Pegasos).
#[pyclass(name = "AmmModel", module = "vastml._core")]
pub struct PyAmm {
    inner: Amm,
}

#[pymethods]
impl PyAmm {
    #[new]
    #[pyo3(signature = (n_features, n_classes, lambda_, max_weights_per_class, prune_every, prune_c, bias, clone_probability=0.0, clone_decay=0.99, weights=None, weight_class=None, steps=0, budgetedsvm=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        n_features: usize,
        n_classes: usize,
        lambda_: f64,
        max_weights_per_class: usize,
        prune_every: u64,
        prune_c: f64,
        bias: f64,
        clone_probability: f64,
        clone_decay: f64,
        weights: Option<PyReadonlyArray2<'_, f64>>,
        weight_class: Option<PyReadonlyArray1<'_, i64>>,
        steps: u64,
        budgetedsvm: bool,
    ) -> PyResult<Self> {
        let params = AmmParams {
            lambda: lambda_,
            max_weights_per_class,
            prune_every,
            prune_c,
            bias,
            clone_probability,
            clone_decay,
            budgetedsvm,
        };
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

    /// One SGD pass; `batch=True` keeps the assignments of the last `reassign` fixed;
    /// `initial=True` (BudgetedSVM mode) is batch AMM's initial online pass.
    #[pyo3(signature = (x, y, shuffle=true, seed=0, batch=false, initial=false))]
    #[allow(clippy::too_many_arguments)]
    fn epoch<'py>(
        &mut self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        y: PyReadonlyArray1<'py, i64>,
        shuffle: bool,
        seed: u64,
        batch: bool,
        initial: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let px = PyX::new(x)?;
        let ex = px.examples()?;
        let y = labels(&y)?;
        let model = &mut self.inner;
        let s = enter(py, Some(1), |cancel| {
            model.epoch_with(&ex, &y, shuffle, seed, batch, initial, cancel)
        })?;
        stats_dict(py, &s)
    }

    /// Recomputes the batch assignments; returns how many changed.
    fn reassign<'py>(
        &mut self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        y: PyReadonlyArray1<'py, i64>,
    ) -> PyResult<usize> {
        let px = PyX::new(x)?;
        let ex = px.examples()?;
        let y = labels(&y)?;
        let model = &mut self.inner;
        enter(py, Some(1), |_| model.reassign(&ex, &y))
    }

    /// Forgets the batch assignments.
    fn clear_assignments(&mut self) {
        self.inner.clear_assignments();
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
        let out = enter(py, n_jobs, |_| model.decision(&ex))?;
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
        let v: Vec<i64> = self
            .inner
            .weight_classes()
            .iter()
            .map(|&c| c as i64)
            .collect();
        v.into_pyarray(py)
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

/// BsgdModel(n_features, n_classes, lambda_, budget, maintenance, kernel, gamma, degree, coef,
///           support_vectors=None, alphas=None, steps=0)
/// --
///
/// A BSGD model under training; maintenance is 'merge', 'remove', 'remove-random' or 'project'.
#[pyclass(name = "BsgdModel", module = "vastml._core")]
pub struct PyBsgd {
    inner: Bsgd,
    n_classes: usize,
    dim: usize,
}

#[pymethods]
impl PyBsgd {
    #[new]
    #[pyo3(signature = (n_features, n_classes, lambda_, budget, maintenance, kernel, gamma, degree=2, coef=1.0, support_vectors=None, alphas=None, steps=0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        n_features: usize,
        n_classes: usize,
        lambda_: f64,
        budget: usize,
        maintenance: &str,
        kernel: &str,
        gamma: f64,
        degree: i32,
        coef: f64,
        support_vectors: Option<PyReadonlyArray2<'_, f64>>,
        alphas: Option<PyReadonlyArray2<'_, f64>>,
        steps: u64,
    ) -> PyResult<Self> {
        let maintenance = match maintenance {
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
        let params = BsgdParams {
            lambda: lambda_,
            budget,
            kernel: self::kernel(kernel, gamma, degree, coef)?,
            maintenance,
        };
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

    /// One SGD pass with budget maintenance.
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
        let ex = px.examples()?;
        let y = labels(&y)?;
        let model = &mut self.inner;
        let s = enter(py, Some(1), |cancel| {
            model.epoch(&ex, &y, shuffle, seed, cancel)
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
        let out = enter(py, n_jobs, |_| model.decision(&ex))?;
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

/// arow_fit(x, y, classes, means, covariances, r, bias, diagonal, update_on, shuffle, seed, n_jobs=None)
/// --
///
/// One AROW pass for each one-vs-rest model k (class code classes[k] is +1). means (k, d+1);
/// covariances (k, d+1, d+1), or (k, d+1) when diagonal. Returns (means, covariances, n_updates).
#[pyfunction]
#[pyo3(signature = (x, y, classes, means, covariances, r, bias, diagonal, update_on, shuffle, seed, n_jobs=None))]
#[allow(clippy::too_many_arguments)]
pub fn arow_fit<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    y: PyReadonlyArray1<'py, i64>,
    classes: PyReadonlyArray1<'py, i64>,
    means: PyReadonlyArray2<'py, f64>,
    covariances: &Bound<'py, PyAny>,
    r: f64,
    bias: f64,
    diagonal: bool,
    update_on: &str,
    shuffle: bool,
    seed: u64,
    n_jobs: Option<isize>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>, Vec<usize>)> {
    let update_on = match update_on {
        "margin" => UpdateOn::Margin,
        "mistake" => UpdateOn::Mistake,
        other => {
            return Err(PyValueError::new_err(format!(
                "`update_on` must be 'margin' or 'mistake', got {other:?}"
            )));
        }
    };
    let px = PyX::new(x)?;
    let ex = px.examples()?;
    let y = labels(&y)?;
    let classes = labels(&classes)?;
    let (mv, w) = rows(&means, "means")?;
    let k = classes.len();
    if w != ex.dim() + 1 || mv.len() != k * w {
        return Err(PyValueError::new_err(format!(
            "`means` must have shape ({k}, {})",
            ex.dim() + 1
        )));
    }
    let cov_arr: numpy::PyReadonlyArrayDyn<'py, f64> = covariances.extract()?;
    if !cov_arr.is_c_contiguous() {
        return Err(PyTypeError::new_err(
            "`covariances` must be C-contiguous float64",
        ));
    }
    let cv = cov_arr
        .as_slice()
        .map_err(|e| PyTypeError::new_err(e.to_string()))?;
    let per = if diagonal { w } else { w * w };
    if cv.len() != k * per {
        return Err(PyValueError::new_err("`covariances` has the wrong shape"));
    }
    let mut models = (0..k)
        .map(|j| {
            Arow::from_parts(
                ex.dim(),
                r,
                bias,
                update_on,
                mv[j * w..(j + 1) * w].to_vec(),
                cv[j * per..(j + 1) * per].to_vec(),
                diagonal,
            )
        })
        .collect::<Result<Vec<_>, SvmError>>()
        .map_err(ToPyErr::to_pyerr)?;
    let updates = enter(py, n_jobs, |cancel| {
        vastml_svm::arow_one_vs_rest(&mut models, &classes, &ex, &y, shuffle, seed, cancel)
    })?;
    let m: Vec<f64> = models.iter().flat_map(|a| a.mean().to_vec()).collect();
    let c: Vec<f64> = models
        .iter()
        .flat_map(|a| a.covariance().to_vec())
        .collect();
    let means = matrix(py, m, w)?.into_any();
    let covs = if diagonal {
        matrix(py, c, w)?.into_any()
    } else {
        Array3::from_shape_vec((k, w, w), c)
            .map_err(|e| PyValueError::new_err(e.to_string()))?
            .into_pyarray(py)
            .into_any()
    };
    Ok((means, covs, updates))
}

/// llsvm_fit(x, y, classes, landmarks, kernel, gamma, degree, coef, c, max_iter, tol, seed, n_jobs=None)
/// --
///
/// Nystrom map over the landmarks and one dual-CD linear SVM per one-vs-rest model.
/// Returns (map_matrix (rank, B), coef (k, rank), n_iter per model).
#[pyfunction]
#[pyo3(signature = (x, y, classes, landmarks, kernel, gamma, degree, coef, c, max_iter, tol, seed, n_jobs=None))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub fn llsvm_fit<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    y: PyReadonlyArray1<'py, i64>,
    classes: PyReadonlyArray1<'py, i64>,
    landmarks: PyReadonlyArray2<'py, f64>,
    kernel: &str,
    gamma: f64,
    degree: i32,
    coef: f64,
    c: f64,
    max_iter: usize,
    tol: f64,
    seed: u64,
    n_jobs: Option<isize>,
) -> PyResult<(
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Vec<usize>,
)> {
    let kern = self::kernel(kernel, gamma, degree, coef)?;
    let px = PyX::new(x)?;
    let ex = px.examples()?;
    let y = labels(&y)?;
    let classes = labels(&classes)?;
    let (lm, ld) = rows(&landmarks, "landmarks")?;
    if ld != ex.dim() {
        return Err(PyValueError::new_err(
            "`landmarks` and `X` differ in n_features",
        ));
    }
    if y.len() != ex.len() {
        return Err(PyValueError::new_err("one label per example"));
    }
    let (map, rank, ws, iters) = enter(py, n_jobs, |cancel| {
        let ny = Nystrom::new(kern, lm, ld)?;
        let feats = ny.transform(&ex)?;
        let rank = ny.rank();
        let res: Result<Vec<(Vec<f64>, usize)>, SvmError> = classes
            .par_iter()
            .map(|&cl| {
                let t: Vec<f64> = y
                    .iter()
                    .map(|&l| if l == cl { 1.0 } else { -1.0 })
                    .collect();
                let opts = DcdOptions {
                    c,
                    max_iter,
                    tol,
                    seed,
                };
                vastml_svm::dual_cd(&feats, rank, &t, opts, cancel)
            })
            .collect();
        let res = res?;
        let ws: Vec<f64> = res.iter().flat_map(|(w, _)| w.clone()).collect();
        let iters: Vec<usize> = res.iter().map(|(_, i)| *i).collect();
        Ok::<_, SvmError>((ny.map_matrix().to_vec(), rank, ws, iters))
    })?;
    Ok((
        matrix(py, map, ld_b(lm.len(), ld))?,
        matrix(py, ws, rank)?,
        iters,
    ))
}

fn ld_b(len: usize, dim: usize) -> usize {
    len.checked_div(dim).unwrap_or(0)
}

/// llsvm_decision(x, landmarks, map_matrix, coef, kernel, gamma, degree, coef0, n_jobs=None)
/// --
///
/// Scores coef . (map_matrix g(x)), shape (n, k).
#[pyfunction]
#[pyo3(signature = (x, landmarks, map_matrix, coef, kernel, gamma, degree, coef0, n_jobs=None))]
#[allow(clippy::too_many_arguments)]
pub fn llsvm_decision<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    landmarks: PyReadonlyArray2<'py, f64>,
    map_matrix: PyReadonlyArray2<'py, f64>,
    coef: PyReadonlyArray2<'py, f64>,
    kernel: &str,
    gamma: f64,
    degree: i32,
    coef0: f64,
    n_jobs: Option<isize>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let kern = self::kernel(kernel, gamma, degree, coef0)?;
    let px = PyX::new(x)?;
    let ex = px.examples()?;
    let (lm, ld) = rows(&landmarks, "landmarks")?;
    let (mm, _) = rows(&map_matrix, "map_matrix")?;
    let (w, rank) = rows(&coef, "coef")?;
    let k = w.len().checked_div(rank).unwrap_or(0);
    let b = ld_b(lm.len(), ld);
    if b == 0 || mm.len() != rank * b {
        return Err(PyValueError::new_err(
            "`map_matrix` must have shape (coef.shape[1], n_landmarks)",
        ));
    }
    // score = coef . (M g(x)) = (coef M) g(x): fold the map into the coefficients once.
    let mut folded = vec![0.0; k * b];
    for (j, row) in folded.chunks_exact_mut(b).enumerate() {
        for (r, &c) in w[j * rank..(j + 1) * rank].iter().enumerate() {
            row.iter_mut()
                .zip(&mm[r * b..(r + 1) * b])
                .for_each(|(o, m)| *o += c * m);
        }
    }
    let out = enter(py, n_jobs, |_| {
        Nystrom::from_parts(kern, lm, ld, &folded)?.transform(&ex)
    })?;
    matrix(py, out, k)
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
    let d = ex.dim();
    let (c, l) = enter(py, n_jobs, |cancel| {
        vastml_svm::kmeans_landmarks(&ex, k, max_iter, seed, cancel)
    })?;
    let l: Vec<i64> = l.into_iter().map(|v| v as i64).collect();
    Ok((matrix(py, c, d)?, l.into_pyarray(py)))
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
    let (km, d) = match &px {
        PyX::Dense(a) => {
            let (p, d) = rows(a, "x")?;
            (
                enter(py, n_jobs, |_| {
                    vastml_spatial::kmeans(p, d, k, max_iter, tol, seed)
                })?,
                d,
            )
        }
        PyX::Csr(p, i, v, d) => {
            let to_usize = |s: &[i64], name: &str| -> PyResult<Vec<usize>> {
                s.iter()
                    .map(|&t| {
                        usize::try_from(t)
                            .map_err(|_| PyValueError::new_err(format!("`{name}` must be >= 0")))
                    })
                    .collect()
            };
            let ip = to_usize(slice1(p, "indptr")?, "indptr")?;
            let ix = to_usize(slice1(i, "indices")?, "indices")?;
            let vals = slice1(v, "data")?;
            let d = *d;
            let km = enter(py, n_jobs, |_| {
                vastml_spatial::kmeans_csr(
                    vastml_core::Csr::new("X", &ip, &ix, vals, d)
                        .map_err(vastml_spatial::SpatialError::from)?,
                    k,
                    max_iter,
                    tol,
                    seed,
                )
            })?;
            (km, d)
        }
    };
    let labels: Vec<i64> = km.labels.iter().map(|&l| l as i64).collect();
    Ok((
        matrix(py, km.centers, d)?,
        labels.into_pyarray(py),
        km.inertia,
        km.n_iter,
    ))
}
