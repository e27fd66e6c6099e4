//! Python bindings of vastml. This crate holds no algorithm: it converts arguments,
//! releases the GIL through `door::enter`, and maps errors.

mod arrays;
mod door;
mod embed;
mod errors;
mod fgt;
mod lll;
mod options;
mod order;
mod progress;
mod seriate;
mod sums;
mod svm;
mod tsp;

use pyo3::prelude::*;

/// Memory freed by one call stays with the allocator for the next (polars does the same):
/// glibc's malloc returned it to the system and faulted it in again, a fifth of building the
/// index of a 7,500-point density.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Number of threads an `n_jobs` value means (None = all cores or RAYON_NUM_THREADS).
#[pyfunction]
#[pyo3(signature = (n_jobs=None))]
fn effective_n_jobs(n_jobs: Option<isize>) -> PyResult<usize> {
    door::resolve_n_jobs(n_jobs)
}

/// The compiled core of vastml.
#[pymodule]
mod _core {
    #[pymodule_export]
    use super::effective_n_jobs;
    #[pymodule_export]
    use super::embed::PySourceSums;
    #[pymodule_export]
    use super::embed::entropic_affinities_csr;
    #[pymodule_export]
    use super::embed::knn_graph;
    #[pymodule_export]
    use super::embed::pe_reduced_hessian;
    #[pymodule_export]
    use super::embed::symmetrize_csr;
    #[pymodule_export]
    use super::embed::tsne_gd;
    #[pymodule_export]
    use super::embed::tsne_repulsion;
    #[pymodule_export]
    use super::embed::{PyTsnePairs, tsne_pairs};
    #[pymodule_export]
    use super::embed::{embedding_objective, entropic_affinities_knn, kernel_sums};
    #[pymodule_export]
    use super::embed::{pe_evaluate, pe_r_step, pe_reduced};
    #[pymodule_export]
    use super::errors::VastmlError;
    #[pymodule_export]
    use super::fgt::PyLogGaussSum;
    #[pymodule_export]
    use super::fgt::{
        PyGaussTransform, PySplitIfgt, gauss_transform, mean_sources_within, split_ifgt_centers,
        split_ifgt_radii,
    };
    #[pymodule_export]
    use super::lll::{
        lll_csr_dense, lll_sym_quadratic_form, lll_weights, lll_z_m_zt, lll_z_m_zt_sym,
    };
    #[pymodule_export]
    use super::order::{
        branch_and_bound_order, convolution_error, convomap_fit, gradient_order,
        planted_categorical, planted_matrix, time_moves, tsp_order,
    };
    #[pymodule_export]
    use super::seriate::{olo_order, tsp_ils_order};
    #[pymodule_export]
    use super::sums::{
        edge_autocorrelation, erfc_sum, hermite_gauss_sum, linear_binning, order_statistics,
    };
    #[pymodule_export]
    use super::svm::{PyAmm, PyBsgd, arow_fit, kmeans, llsvm_decision, llsvm_fit, llsvm_kmeans};
    #[pymodule_export]
    use super::tsp::{tsp_means_order, tsp_path_order};

    #[pymodule_init]
    fn init(m: &pyo3::Bound<'_, pyo3::types::PyModule>) -> pyo3::PyResult<()> {
        use pyo3::types::PyModuleMethods;
        m.add("__version__", env!("CARGO_PKG_VERSION"))?;
        m.add("simd", vastml_fgt::simd_level())?;
        Ok(())
    }
}
