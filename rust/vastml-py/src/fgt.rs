//! Bindings of `vastml-fgt`: the Gauss transform. Planner options arrive as a dict (`plan`).

use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyDict, PyString};
use std::sync::atomic::AtomicBool;

use vastml_fgt::{
    GaussTransform, LogGaussSum, Method, PlanOptions, SplitIfgt, calls_inline, plans_inline,
};

use crate::arrays::{matrix, rows, rows_n, same_cols, vector};
use crate::door::{enter, enter_inline};
use crate::errors::ToPyErr;
use crate::options::Wrap;
use crate::progress::{self, finish};
use vastml_fgt::SequentialScope;

/// A planning stage's name, as the progress callable's `state`.
fn stage_to_py(py: Python<'_>, stage: &str) -> PyResult<Py<PyAny>> {
    Ok(PyString::new(py, stage).into_any().unbind())
}

/// Rows of an optional array of `dim` columns (empty when absent).
fn sample<'a>(a: &'a Option<PyReadonlyArray2<'_, f64>>, dim: usize) -> PyResult<Option<&'a [f64]>> {
    let Some(a) = a else { return Ok(None) };
    let (s, sdim) = rows(a, "target_sample")?;
    same_cols("target_sample", sdim, "sources", dim).map(|()| Some(s))
}

/// The planner's options, as the Python `GaussTransform` names them.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct PlanArgs {
    bandwidth: f64,
    epsilon: f64,
    method: Wrap<Method>,
    truncation: Option<usize>,
    n_clusters: Option<usize>,
    #[pyo3(default)]
    n_targets: Option<usize>,
    #[pyo3(default)]
    n_weights: Option<usize>,
    #[pyo3(default)]
    measure: Option<bool>,
}

impl PlanArgs {
    /// Plans over `src` (`dim` columns) with these options and the known targets / sample.
    fn plan(
        &self,
        src: &[f64],
        dim: usize,
        options: PlanOptions<'_>,
        control: &vastml_fgt::Control<'_, str>,
    ) -> vastml_fgt::Result<GaussTransform> {
        let options = PlanOptions {
            n_targets: self.n_targets,
            n_weights: self.n_weights.unwrap_or(options.n_weights),
            truncation: self.truncation,
            n_clusters: self.n_clusters,
            measure: self.measure.unwrap_or(options.measure),
            ..options
        };
        let (h, eps, method) = (self.bandwidth, self.epsilon, self.method.0);
        GaussTransform::plan_with_control(src, dim, h, eps, method, &options, control)
    }
}

/// The Gauss transform of `weights` (n x W) at `targets`, planned for them.
/// Runs `work` on the calling thread with vastml-fgt's loops sequential (`inline`: calls of
/// well under a millisecond, which a hand-off to the pool would double), or on the pool.
fn run<T, F>(py: Python<'_>, n_jobs: Option<isize>, inline: bool, work: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce(&AtomicBool) -> vastml_fgt::Result<T> + Send,
{
    if !inline {
        return enter(py, n_jobs, work);
    }
    enter_inline(py, n_jobs, |cancel| {
        let _sequential = SequentialScope::new(true);
        work(cancel)
    })
}

#[pyfunction]
#[pyo3(signature = (sources, targets, weights, plan, n_jobs=None, progress=None))]
pub fn gauss_transform<'py>(
    py: Python<'py>,
    sources: PyReadonlyArray2<'py, f64>,
    targets: PyReadonlyArray2<'py, f64>,
    weights: PyReadonlyArray2<'py, f64>,
    plan: PlanArgs,
    n_jobs: Option<isize>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let ((src, dim), (tgt, m, tdim)) = (rows(&sources, "sources")?, rows_n(&targets, "targets")?);
    let (w, n_weights) = rows(&weights, "weights")?;
    same_cols("targets", tdim, "sources", dim)?;
    let hook = progress::hook(progress, stage_to_py);
    let inline = hook.is_none() && calls_inline(src.len() / dim.max(1), m, dim);
    let work = |cancel: &AtomicBool| {
        let options = PlanOptions {
            targets: Some(tgt),
            n_weights,
            ..PlanOptions::default()
        };
        let control = progress::control(cancel, hook.as_ref());
        plan.plan(src, dim, options, &control)?
            .evaluate(tgt, w, n_weights, cancel)
    };
    let out = run(py, n_jobs, inline, work);
    matrix(py, finish(hook, out)?, m, n_weights)
}

/// A Gauss transform over fixed sources whose clustering / tree is built once.
#[pyclass(name = "GaussTransform", module = "vastml._core", frozen)]
pub struct PyGaussTransform {
    inner: GaussTransform,
}

#[pymethods]
impl PyGaussTransform {
    #[new]
    #[pyo3(signature = (sources, plan, n_jobs=None, target_sample=None, progress=None))]
    fn new(
        py: Python<'_>,
        sources: PyReadonlyArray2<'_, f64>,
        plan: PlanArgs,
        n_jobs: Option<isize>,
        target_sample: Option<PyReadonlyArray2<'_, f64>>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let (src, dim) = rows(&sources, "sources")?;
        let target_sample = sample(&target_sample, dim)?;
        let hook = progress::hook(progress, stage_to_py);
        let n = src.len() / dim.max(1);
        let m = plan
            .n_targets
            .or(target_sample.map(|t| t.len() / dim.max(1)))
            .unwrap_or(n);
        let inline = hook.is_none() && plans_inline(n, m, dim);
        let work = |cancel: &AtomicBool| {
            let options = PlanOptions {
                target_sample,
                ..PlanOptions::default()
            };
            plan.plan(src, dim, options, &progress::control(cancel, hook.as_ref()))
        };
        let inner = run(py, n_jobs, inline, work);
        Ok(PyGaussTransform {
            inner: finish(hook, inner)?,
        })
    }

    /// G at `targets` (m x d) for `weights` (n x W); returns m x W.
    #[pyo3(signature = (targets, weights, n_jobs=None))]
    fn evaluate<'py>(
        &self,
        py: Python<'py>,
        targets: PyReadonlyArray2<'py, f64>,
        weights: PyReadonlyArray2<'py, f64>,
        n_jobs: Option<isize>,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let ((tgt, m, tdim), (w, n_weights)) =
            (rows_n(&targets, "targets")?, rows(&weights, "weights")?);
        same_cols("targets", tdim, "sources", self.inner.dim())?;
        let work = |cancel: &AtomicBool| self.inner.evaluate(tgt, w, n_weights, cancel);
        let out = run(py, n_jobs, self.inner.runs_inline(m, n_weights), work);
        matrix(py, out?, m, n_weights)
    }

    /// The method that runs ("direct", "direct-tree", "ifgt" or "ifgt-tree").
    #[getter]
    fn method(&self) -> &'static str {
        self.inner.method().name()
    }

    /// Number of sources.
    #[getter]
    fn n_sources(&self) -> usize {
        self.inner.n_sources()
    }

    /// Dimension.
    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim()
    }

    /// The plan: method, clusters, truncation, terms, radii, cost estimates (seconds, one core).
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let i = self.inner.info();
        let d = PyDict::new(py);
        d.set_item("method", i.method.name())?;
        d.set_item("n_clusters", i.n_clusters)?;
        d.set_item("truncation", i.truncation)?;
        d.set_item("n_terms", i.n_terms)?;
        d.set_item("max_cluster_radius", i.max_cluster_radius)?;
        d.set_item("cutoff", i.cutoff)?;
        let named = |v: &[(Method, f64)]| v.iter().map(|(m, s)| (m.name(), *s)).collect::<Vec<_>>();
        d.set_item("estimates", named(&i.estimates).into_py_dict(py)?)?;
        d.set_item("measured", named(&i.measured).into_py_dict(py)?)?;
        d.set_item("stopped", i.stopped)?;
        Ok(d)
    }
}

/// ln sum_i weights[i] exp(-||y - sources[i]||^2 / bandwidth^2), non-negative weights.
#[pyclass(name = "LogGaussSum", module = "vastml._core", frozen)]
pub struct PyLogGaussSum {
    inner: LogGaussSum,
}

#[pymethods]
impl PyLogGaussSum {
    #[new]
    #[pyo3(signature = (sources, weights, bandwidth, n_jobs=None))]
    fn new(
        py: Python<'_>,
        sources: PyReadonlyArray2<'_, f64>,
        weights: PyReadonlyArray1<'_, f64>,
        bandwidth: f64,
        n_jobs: Option<isize>,
    ) -> PyResult<Self> {
        let ((src, dim), w) = (rows(&sources, "sources")?, vector(&weights, "weights")?);
        let work = |_: &AtomicBool| LogGaussSum::new(src, dim, w, bandwidth);
        let inner = run(
            py,
            n_jobs,
            LogGaussSum::builds_inline(src.len() / dim.max(1)),
            work,
        )?;
        Ok(PyLogGaussSum { inner })
    }

    /// The log of the sum at every target (m x d), within `rtol` (absolute, in log units).
    #[pyo3(signature = (targets, rtol, n_jobs=None))]
    fn evaluate<'py>(
        &self,
        py: Python<'py>,
        targets: PyReadonlyArray2<'py, f64>,
        rtol: f64,
        n_jobs: Option<isize>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let (tgt, tdim) = rows(&targets, "targets")?;
        same_cols("targets", tdim, "sources", self.inner.dim())?;
        let out = enter(py, n_jobs, |cancel| self.inner.evaluate(tgt, rtol, cancel))?;
        Ok(out.into_pyarray(py))
    }
}

/// Mean number of sources within `radius` of a source, from `probes` of a strided sample of
/// `sample` sources (whether `KernelDensity` takes its log-space path).
#[pyfunction]
pub fn mean_sources_within(
    py: Python<'_>,
    sources: PyReadonlyArray2<'_, f64>,
    radius: f64,
    probes: usize,
    sample: usize,
) -> PyResult<f64> {
    let (src, dim) = rows(&sources, "sources")?;
    enter_inline(py, Some(1), |_| {
        vastml_fgt::mean_sources_within(src, dim, radius, probes, sample)
    })
}

/// Cluster centres (k x d) for an IFGT over sources split in parts, chosen from `sample`;
/// None when `method="auto"` finds the IFGT not the clear choice. `sizes` is
/// (n_sources, n_targets, n_weights).
#[pyfunction]
#[pyo3(signature = (sample, bandwidth, epsilon, sizes, method))]
pub fn split_ifgt_centers<'py>(
    py: Python<'py>,
    sample: PyReadonlyArray2<'py, f64>,
    bandwidth: f64,
    epsilon: f64,
    sizes: (usize, usize, usize),
    method: Wrap<Method>,
) -> PyResult<Option<Bound<'py, PyArray2<f64>>>> {
    let (s, dim) = rows(&sample, "sample")?;
    let centers = enter(py, Some(1), |cancel| {
        vastml_fgt::split_centers(s, dim, bandwidth, epsilon, sizes, method.0, cancel)
    })?;
    let as_matrix = |c: Vec<f64>| {
        let k = crate::arrays::n_rows(c.len(), dim);
        matrix(py, c, k, dim)
    };
    centers.map(as_matrix).transpose()
}

/// Per centre, the largest distance to a source whose nearest centre it is (0 if none).
#[pyfunction]
#[pyo3(signature = (sources, centers, n_jobs=None))]
pub fn split_ifgt_radii<'py>(
    py: Python<'py>,
    sources: PyReadonlyArray2<'py, f64>,
    centers: PyReadonlyArray2<'py, f64>,
    n_jobs: Option<isize>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let ((src, dim), (c, cdim)) = (rows(&sources, "sources")?, rows(&centers, "centers")?);
    same_cols("sources", dim, "centers", cdim)?;
    let r = enter(py, n_jobs, |_| vastml_fgt::cluster_radii(src, dim, c))?;
    Ok(r.into_pyarray(py))
}

/// An IFGT plan made of cluster centres and (combined) radii only.
#[pyclass(name = "SplitIfgt", module = "vastml._core", frozen)]
pub struct PySplitIfgt {
    inner: SplitIfgt,
}

#[pymethods]
impl PySplitIfgt {
    #[new]
    #[pyo3(signature = (centers, radii, bandwidth, epsilon, method, target_sample=None))]
    fn new(
        centers: PyReadonlyArray2<'_, f64>,
        radii: PyReadonlyArray1<'_, f64>,
        bandwidth: f64,
        epsilon: f64,
        method: Wrap<Method>,
        target_sample: Option<PyReadonlyArray2<'_, f64>>,
    ) -> PyResult<Self> {
        let ((c, dim), r) = (rows(&centers, "centers")?, vector(&radii, "radii")?);
        let sample = sample(&target_sample, dim)?.unwrap_or(&[]);
        let inner = SplitIfgt::new(
            c.to_vec(),
            r.to_vec(),
            dim,
            bandwidth,
            epsilon,
            method.0,
            sample,
        );
        Ok(PySplitIfgt {
            inner: inner.map_err(ToPyErr::to_pyerr)?,
        })
    }

    /// This part's coefficients (flat); sum them over the parts.
    #[pyo3(signature = (sources, weights, n_jobs=None))]
    fn coefficients<'py>(
        &self,
        py: Python<'py>,
        sources: PyReadonlyArray2<'py, f64>,
        weights: PyReadonlyArray2<'py, f64>,
        n_jobs: Option<isize>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let ((src, dim), (w, n_weights)) = (rows(&sources, "sources")?, rows(&weights, "weights")?);
        if !src.is_empty() {
            same_cols("sources", dim, "centers", self.inner.dim())?;
        }
        let c = enter(py, n_jobs, |c| {
            self.inner.coefficients(src, w, n_weights, c)
        })?;
        Ok(c.into_pyarray(py))
    }

    /// G at `targets` (m x d) from the summed coefficients; m x n_weights.
    #[pyo3(signature = (targets, coefficients, n_weights, n_jobs=None))]
    fn evaluate<'py>(
        &self,
        py: Python<'py>,
        targets: PyReadonlyArray2<'py, f64>,
        coefficients: PyReadonlyArray1<'py, f64>,
        n_weights: usize,
        n_jobs: Option<isize>,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let ((tgt, m, tdim), coeffs) = (
            rows_n(&targets, "targets")?,
            vector(&coefficients, "coefficients")?,
        );
        if !tgt.is_empty() {
            same_cols("targets", tdim, "centers", self.inner.dim())?;
        }
        let out = enter(py, n_jobs, |cancel| {
            self.inner.evaluate(tgt, coeffs, n_weights, cancel)
        });
        matrix(py, out?, m, n_weights)
    }

    /// The plan: clusters, truncation, terms, largest radius, whether a centre tree is used.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let method = if self.inner.has_tree() {
            "ifgt-tree"
        } else {
            "ifgt"
        };
        d.set_item("method", method)?;
        d.set_item("n_clusters", self.inner.n_clusters())?;
        d.set_item("truncation", self.inner.truncation())?;
        d.set_item("n_terms", self.inner.n_terms())?;
        d.set_item("max_cluster_radius", self.inner.max_radius())?;
        Ok(d)
    }
}
