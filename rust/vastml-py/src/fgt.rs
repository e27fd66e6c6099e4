//! Bindings of `vastml-fgt`: the Gauss transform.

use numpy::{IntoPyArray, PyArray2, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use vastml_fgt::{GaussTransform, LogGaussSum, Method, PlanOptions};

use crate::arrays::rows;
use crate::door::enter;
use crate::errors::ToPyErr;
use crate::progress;

/// A planning stage's name, as the progress callable's `state`.
fn stage_to_py(py: Python<'_>, stage: &str) -> PyResult<Py<PyAny>> {
    Ok(PyString::new(py, stage).into_any().unbind())
}

fn parse_method(method: &str) -> PyResult<Method> {
    method.parse::<Method>().map_err(ToPyErr::to_pyerr)
}

fn check_dims(sources: usize, other: usize, name: &str) -> PyResult<()> {
    if sources != other {
        return Err(PyValueError::new_err(format!(
            "`{name}` has {other} columns but `sources` has {sources}: they must have the same dimension"
        )));
    }
    Ok(())
}

/// gauss_transform(sources, targets, weights, bandwidth, epsilon=1e-6, method="auto", n_jobs=None, truncation=None, n_clusters=None, progress=None)
/// --
///
/// G[j, w] = sum_i weights[i, w] * exp(-||targets[j] - sources[i]||^2 / bandwidth^2), with
/// max |G_hat - G| / sum |weights[:, w]| <= epsilon. All arrays C-contiguous float64, 2-D.
/// `progress(stage_number, seconds, stage_name)` is called after each planning stage.
#[pyfunction]
#[pyo3(signature = (sources, targets, weights, bandwidth, epsilon=1e-6, method="auto", n_jobs=None, truncation=None, n_clusters=None, progress=None))]
#[allow(clippy::too_many_arguments)]
pub fn gauss_transform<'py>(
    py: Python<'py>,
    sources: PyReadonlyArray2<'py, f64>,
    targets: PyReadonlyArray2<'py, f64>,
    weights: PyReadonlyArray2<'py, f64>,
    bandwidth: f64,
    epsilon: f64,
    method: &str,
    n_jobs: Option<isize>,
    truncation: Option<usize>,
    n_clusters: Option<usize>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let method = parse_method(method)?;
    let (src, dim) = rows(&sources, "sources")?;
    let (tgt, tdim) = rows(&targets, "targets")?;
    let (w, n_weights) = rows(&weights, "weights")?;
    check_dims(dim, tdim, "targets")?;
    let m = tgt.len().checked_div(tdim).unwrap_or(0);
    let hook = progress::hook(progress, stage_to_py);
    let out = enter(py, n_jobs, |cancel| {
        let options = PlanOptions {
            targets: Some(tgt),
            n_weights,
            truncation,
            n_clusters,
            ..PlanOptions::default()
        };
        let control = progress::control(cancel, hook.as_ref());
        GaussTransform::plan_with_control(src, dim, bandwidth, epsilon, method, &options, &control)?
            .evaluate(tgt, w, n_weights, cancel)
    });
    if let Some(h) = &hook {
        h.finish()?;
    }
    let out = out?;
    numpy::ndarray::Array2::from_shape_vec((m, n_weights), out)
        .map_err(|e| PyValueError::new_err(e.to_string()))
        .map(|a| a.into_pyarray(py))
}

/// GaussTransform(sources, bandwidth, epsilon=1e-6, method="auto", n_jobs=None, target_sample=None, n_targets=None, n_weights=1, truncation=None, n_clusters=None, measure=True, progress=None)
/// --
///
/// A Gauss transform over fixed sources whose clustering / tree is built once.
/// `progress(stage_number, seconds, stage_name)` is called after each planning stage; True
/// ends the planning with the best method known then (`info()["stopped"]`).
#[pyclass(name = "GaussTransform", module = "vastml._core", frozen)]
pub struct PyGaussTransform {
    inner: GaussTransform,
}

#[pymethods]
impl PyGaussTransform {
    #[new]
    #[pyo3(signature = (sources, bandwidth, epsilon=1e-6, method="auto", n_jobs=None, target_sample=None, n_targets=None, n_weights=1, truncation=None, n_clusters=None, measure=true, progress=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        sources: PyReadonlyArray2<'_, f64>,
        bandwidth: f64,
        epsilon: f64,
        method: &str,
        n_jobs: Option<isize>,
        target_sample: Option<PyReadonlyArray2<'_, f64>>,
        n_targets: Option<usize>,
        n_weights: usize,
        truncation: Option<usize>,
        n_clusters: Option<usize>,
        measure: bool,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let method = parse_method(method)?;
        let (src, dim) = rows(&sources, "sources")?;
        let sample: Option<&[f64]> = match &target_sample {
            Some(t) => {
                let (s, sdim) = rows(t, "target_sample")?;
                check_dims(dim, sdim, "target_sample")?;
                Some(s)
            }
            None => None,
        };
        let hook = progress::hook(progress, stage_to_py);
        let inner = enter(py, n_jobs, |cancel| {
            let options = PlanOptions {
                target_sample: sample,
                n_targets,
                n_weights,
                truncation,
                n_clusters,
                measure,
                ..PlanOptions::default()
            };
            let control = progress::control(cancel, hook.as_ref());
            GaussTransform::plan_with_control(
                src, dim, bandwidth, epsilon, method, &options, &control,
            )
        });
        if let Some(h) = &hook {
            h.finish()?;
        }
        let inner = inner?;
        Ok(PyGaussTransform { inner })
    }

    /// evaluate(targets, weights, n_jobs=None)
    /// --
    ///
    /// G at `targets` (m x d) for `weights` (n x W); returns m x W.
    #[pyo3(signature = (targets, weights, n_jobs=None))]
    fn evaluate<'py>(
        &self,
        py: Python<'py>,
        targets: PyReadonlyArray2<'py, f64>,
        weights: PyReadonlyArray2<'py, f64>,
        n_jobs: Option<isize>,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let (tgt, tdim) = rows(&targets, "targets")?;
        let (w, n_weights) = rows(&weights, "weights")?;
        check_dims(self.inner.dim(), tdim, "targets")?;
        let m = tgt.len().checked_div(tdim).unwrap_or(0);
        let out = enter(py, n_jobs, |cancel| {
            self.inner.evaluate(tgt, w, n_weights, cancel)
        })?;
        numpy::ndarray::Array2::from_shape_vec((m, n_weights), out)
            .map_err(|e| PyValueError::new_err(e.to_string()))
            .map(|a| a.into_pyarray(py))
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
        let est = PyDict::new(py);
        for (m, s) in &i.estimates {
            est.set_item(m.name(), *s)?;
        }
        d.set_item("estimates", est)?;
        let measured = PyDict::new(py);
        for (m, s) in &i.measured {
            measured.set_item(m.name(), *s)?;
        }
        d.set_item("measured", measured)?;
        d.set_item("stopped", i.stopped)?;
        Ok(d)
    }
}

/// LogGaussSum(sources, weights, bandwidth, n_jobs=None)
/// --
///
/// ln sum_i weights[i] exp(-||y - sources[i]||^2 / bandwidth^2) for non-negative weights,
/// in log space (no underflow), to a given relative accuracy.
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
        weights: numpy::PyReadonlyArray1<'_, f64>,
        bandwidth: f64,
        n_jobs: Option<isize>,
    ) -> PyResult<Self> {
        let (src, dim) = rows(&sources, "sources")?;
        let w = crate::arrays::vector(&weights, "weights")?;
        let inner = enter(py, n_jobs, |_| LogGaussSum::new(src, dim, w, bandwidth))?;
        Ok(PyLogGaussSum { inner })
    }

    /// evaluate(targets, rtol, n_jobs=None)
    /// --
    ///
    /// The log of the sum at every target (m x d), within `rtol` (absolute, in log units).
    #[pyo3(signature = (targets, rtol, n_jobs=None))]
    fn evaluate<'py>(
        &self,
        py: Python<'py>,
        targets: PyReadonlyArray2<'py, f64>,
        rtol: f64,
        n_jobs: Option<isize>,
    ) -> PyResult<Bound<'py, numpy::PyArray1<f64>>> {
        let (tgt, tdim) = rows(&targets, "targets")?;
        check_dims(self.inner.dim(), tdim, "targets")?;
        let out = enter(py, n_jobs, |cancel| self.inner.evaluate(tgt, rtol, cancel))?;
        Ok(out.into_pyarray(py))
    }
}

/// split_ifgt_centers(sample, bandwidth, epsilon, n_sources, n_targets, n_weights=1, method="auto")
/// --
///
/// Cluster centres (k x d) for an IFGT whose sources are split in parts, chosen from `sample`
/// (rows of the sources); None when `method="auto"` finds the IFGT not the clear choice.
#[pyfunction]
#[pyo3(signature = (sample, bandwidth, epsilon, n_sources, n_targets, n_weights=1, method="auto"))]
#[allow(clippy::too_many_arguments)]
pub fn split_ifgt_centers<'py>(
    py: Python<'py>,
    sample: PyReadonlyArray2<'py, f64>,
    bandwidth: f64,
    epsilon: f64,
    n_sources: usize,
    n_targets: usize,
    n_weights: usize,
    method: &str,
) -> PyResult<Option<Bound<'py, PyArray2<f64>>>> {
    let method = parse_method(method)?;
    let (s, dim) = rows(&sample, "sample")?;
    let centers = enter(py, Some(1), |cancel| {
        vastml_fgt::split_centers(
            s, dim, bandwidth, epsilon, n_sources, n_targets, n_weights, method, cancel,
        )
    })?;
    centers
        .map(|c| {
            let k = c.len() / dim;
            numpy::ndarray::Array2::from_shape_vec((k, dim), c)
                .map_err(|e| PyValueError::new_err(e.to_string()))
                .map(|a| a.into_pyarray(py))
        })
        .transpose()
}

/// split_ifgt_radii(sources, centers, n_jobs=None)
/// --
///
/// Per centre, the largest distance to a source whose nearest centre it is (0 if none);
/// radii over several parts combine by an element-wise maximum.
#[pyfunction]
#[pyo3(signature = (sources, centers, n_jobs=None))]
pub fn split_ifgt_radii<'py>(
    py: Python<'py>,
    sources: PyReadonlyArray2<'py, f64>,
    centers: PyReadonlyArray2<'py, f64>,
    n_jobs: Option<isize>,
) -> PyResult<Bound<'py, numpy::PyArray1<f64>>> {
    let (src, dim) = rows(&sources, "sources")?;
    let (c, cdim) = rows(&centers, "centers")?;
    check_dims(cdim, dim, "sources")?;
    if src.is_empty() {
        return Ok(vec![0.0; c.len() / cdim.max(1)].into_pyarray(py));
    }
    let r = enter(py, n_jobs, |_| vastml_fgt::cluster_radii(src, dim, c))?;
    Ok(r.into_pyarray(py))
}

/// SplitIfgt(centers, radii, bandwidth, epsilon=1e-6, method="ifgt", target_sample=None)
/// --
///
/// An IFGT plan made of cluster centres and (combined) radii only: coefficients of each
/// part of the sources add up; evaluation takes the summed coefficients.
#[pyclass(name = "SplitIfgt", module = "vastml._core", frozen)]
pub struct PySplitIfgt {
    inner: vastml_fgt::SplitIfgt,
}

#[pymethods]
impl PySplitIfgt {
    #[new]
    #[pyo3(signature = (centers, radii, bandwidth, epsilon=1e-6, method="ifgt", target_sample=None))]
    fn new(
        centers: PyReadonlyArray2<'_, f64>,
        radii: numpy::PyReadonlyArray1<'_, f64>,
        bandwidth: f64,
        epsilon: f64,
        method: &str,
        target_sample: Option<PyReadonlyArray2<'_, f64>>,
    ) -> PyResult<Self> {
        let method = parse_method(method)?;
        let (c, dim) = rows(&centers, "centers")?;
        let r = crate::arrays::vector(&radii, "radii")?;
        let sample: &[f64] = match &target_sample {
            Some(t) => {
                let (s, sdim) = rows(t, "target_sample")?;
                check_dims(dim, sdim, "target_sample")?;
                s
            }
            None => &[],
        };
        let inner = vastml_fgt::SplitIfgt::new(
            c.to_vec(),
            r.to_vec(),
            dim,
            bandwidth,
            epsilon,
            method,
            sample,
        )
        .map_err(ToPyErr::to_pyerr)?;
        Ok(PySplitIfgt { inner })
    }

    /// coefficients(sources, weights, n_jobs=None)
    /// --
    ///
    /// This part's coefficients (flat); sum them over the parts.
    #[pyo3(signature = (sources, weights, n_jobs=None))]
    fn coefficients<'py>(
        &self,
        py: Python<'py>,
        sources: PyReadonlyArray2<'py, f64>,
        weights: PyReadonlyArray2<'py, f64>,
        n_jobs: Option<isize>,
    ) -> PyResult<Bound<'py, numpy::PyArray1<f64>>> {
        let (src, dim) = rows(&sources, "sources")?;
        let (w, n_weights) = rows(&weights, "weights")?;
        if !src.is_empty() {
            check_dims(self.inner_dim(), dim, "sources")?;
        }
        let c = enter(py, n_jobs, |c| {
            self.inner.coefficients(src, w, n_weights, c)
        })?;
        Ok(c.into_pyarray(py))
    }

    /// evaluate(targets, coefficients, n_weights, n_jobs=None)
    /// --
    ///
    /// G at `targets` (m x d) from the summed coefficients; m x n_weights.
    #[pyo3(signature = (targets, coefficients, n_weights, n_jobs=None))]
    fn evaluate<'py>(
        &self,
        py: Python<'py>,
        targets: PyReadonlyArray2<'py, f64>,
        coefficients: numpy::PyReadonlyArray1<'py, f64>,
        n_weights: usize,
        n_jobs: Option<isize>,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let (tgt, tdim) = rows(&targets, "targets")?;
        let coeffs = crate::arrays::vector(&coefficients, "coefficients")?;
        if !tgt.is_empty() {
            check_dims(self.inner_dim(), tdim, "targets")?;
        }
        let m = tgt.len().checked_div(tdim).unwrap_or(0);
        let out = enter(py, n_jobs, |cancel| {
            self.inner.evaluate(tgt, coeffs, n_weights, cancel)
        })?;
        numpy::ndarray::Array2::from_shape_vec((m, n_weights), out)
            .map_err(|e| PyValueError::new_err(e.to_string()))
            .map(|a| a.into_pyarray(py))
    }

    /// The plan: clusters, truncation, terms, largest radius, whether a centre tree is used.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item(
            "method",
            if self.inner.has_tree() {
                "ifgt-tree"
            } else {
                "ifgt"
            },
        )?;
        d.set_item("n_clusters", self.inner.n_clusters())?;
        d.set_item("truncation", self.inner.truncation())?;
        d.set_item("n_terms", self.inner.n_terms())?;
        d.set_item("max_cluster_radius", self.inner.max_radius())?;
        Ok(d)
    }
}

impl PySplitIfgt {
    fn inner_dim(&self) -> usize {
        self.inner.dim()
    }
}
