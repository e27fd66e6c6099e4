//! Bindings of `vastml-fgt`: the Gauss transform.

use numpy::{IntoPyArray, PyArray2, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use vastml_fgt::{GaussTransform, Method};

use crate::arrays::rows;
use crate::door::enter;
use crate::errors::ToPyErr;

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

/// gauss_transform(sources, targets, weights, bandwidth, epsilon=1e-6, method="auto", n_jobs=None)
/// --
///
/// G[j, w] = sum_i weights[i, w] * exp(-||targets[j] - sources[i]||^2 / bandwidth^2), with
/// max |G_hat - G| / sum |weights[:, w]| <= epsilon. All arrays C-contiguous float64, 2-D.
#[pyfunction]
#[pyo3(signature = (sources, targets, weights, bandwidth, epsilon=1e-6, method="auto", n_jobs=None))]
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
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let method = parse_method(method)?;
    let (src, dim) = rows(&sources, "sources")?;
    let (tgt, tdim) = rows(&targets, "targets")?;
    let (w, n_weights) = rows(&weights, "weights")?;
    check_dims(dim, tdim, "targets")?;
    let m = tgt.len().checked_div(tdim).unwrap_or(0);
    let out = enter(py, n_jobs, |cancel| {
        vastml_fgt::gauss_transform(
            src, tgt, dim, w, n_weights, bandwidth, epsilon, method, cancel,
        )
    })?;
    numpy::ndarray::Array2::from_shape_vec((m, n_weights), out)
        .map_err(|e| PyValueError::new_err(e.to_string()))
        .map(|a| a.into_pyarray(py))
}

/// GaussTransform(sources, bandwidth, epsilon=1e-6, method="auto", n_jobs=None)
/// --
///
/// A Gauss transform over fixed sources whose clustering / tree is built once.
#[pyclass(name = "GaussTransform", module = "vastml._core", frozen)]
pub struct PyGaussTransform {
    inner: GaussTransform,
}

#[pymethods]
impl PyGaussTransform {
    #[new]
    #[pyo3(signature = (sources, bandwidth, epsilon=1e-6, method="auto", n_jobs=None))]
    fn new(
        py: Python<'_>,
        sources: PyReadonlyArray2<'_, f64>,
        bandwidth: f64,
        epsilon: f64,
        method: &str,
        n_jobs: Option<isize>,
    ) -> PyResult<Self> {
        let method = parse_method(method)?;
        let (src, dim) = rows(&sources, "sources")?;
        let inner = enter(py, n_jobs, |cancel| {
            GaussTransform::plan(src, dim, bandwidth, epsilon, method, None, 1, cancel)
        })?;
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
        Ok(d)
    }
}
