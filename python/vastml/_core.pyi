# Hand-written stub of the compiled module; tests/test_core_stub.py keeps it honest (names, and
# `python -m mypy.stubtest vastml._core` for signatures). Classes made by #[pyclass] cannot be
# subclassed (@final); their constructor is __new__.
from collections.abc import Callable
from typing import Any, Self, final

import numpy as np
import numpy.typing as npt

__version__: str
simd: str

class VastmlError(Exception):
    """Base class of vastml's own errors (parameter and shape errors are ValueError)."""

def effective_n_jobs(n_jobs: int | None = None) -> int: ...
# `plan`: bandwidth, epsilon, method, truncation, n_clusters (GaussTransform: also n_targets,
# n_weights, measure).
def gauss_transform(
    sources: npt.NDArray[np.float64],
    targets: npt.NDArray[np.float64],
    weights: npt.NDArray[np.float64],
    plan: dict[str, Any],
    n_jobs: int | None = None,
    progress: Callable[[int, float, str], bool] | None = None,
) -> npt.NDArray[np.float64]: ...

# `params`: order, h1, h2, epsilon, method.
def hermite_gauss_sum(
    sources: npt.NDArray[np.float64],
    weights: npt.NDArray[np.float64],
    targets: npt.NDArray[np.float64],
    params: dict[str, Any],
    n_jobs: int | None = None,
) -> npt.NDArray[np.float64]: ...
def erfc_sum(
    sources: npt.NDArray[np.float64],
    weights: npt.NDArray[np.float64],
    targets: npt.NDArray[np.float64],
    epsilon: float,
    method: str,
    n_jobs: int | None = None,
) -> npt.NDArray[np.float64]: ...
def order_statistics(
    x: npt.NDArray[np.float64], ranks: list[int], n_jobs: int | None = None
) -> list[float]: ...
def edge_autocorrelation(
    w: npt.NDArray[np.float64], dense: tuple[int, int], lags: int
) -> npt.NDArray[np.float64]: ...
def linear_binning(
    x: npt.NDArray[np.float64],
    affine: tuple[float, float],
    grid: tuple[float, float, int],
    n_jobs: int | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]: ...

def entropic_affinities_knn(
    sqdist: npt.NDArray[np.float64],
    order: npt.NDArray[np.int64],
    options: dict[str, Any],  # perplexity, warm, method, tol, maxit, chunk_size
    parents: npt.NDArray[np.int64] | None = None,
    n_jobs: int | None = None,
) -> tuple[
    npt.NDArray[np.float64],
    npt.NDArray[np.float64],
    npt.NDArray[np.uint32],
    npt.NDArray[np.uint32],
    npt.NDArray[np.float64],
    npt.NDArray[np.float64],
    npt.NDArray[np.bool_],
]: ...
def embedding_objective(  # also int32 / int32 / float32 arrays
    x: npt.NDArray[np.float64],
    indptr: npt.NDArray[np.int64],
    indices: npt.NDArray[np.int64],
    data: npt.NDArray[np.float64],
    # model, repulsion_weight, need_objective, method, theta, epsilon, n_interp, box_width
    options: dict[str, Any],
    n_jobs: int | None = None,
) -> tuple[float, float, float, npt.NDArray[np.float64]]: ...
def kernel_sums(
    x: npt.NDArray[np.float64],
    options: dict[str, Any],  # kernel, method, theta, epsilon, n_interp, box_width
    weights: npt.NDArray[np.float64] | None = None,
    n_jobs: int | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]: ...
def tsne_gd(
    state: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]],
    pairs: TsnePairs,
    options: dict[str, Any],
    progress: Callable[[int, float, npt.NDArray[np.float64]], Any] | None = None,
    n_jobs: int | None = None,
) -> tuple[
    npt.NDArray[np.float64],
    npt.NDArray[np.float64],
    npt.NDArray[np.float64],
    float,
    int,
    bool,
]: ...
def tsne_pairs(  # also int32 / int32 / float32 arrays
    x: npt.NDArray[np.float64],
    indptr: npt.NDArray[np.int64],
    indices: npt.NDArray[np.int64],
    data: npt.NDArray[np.float64],
    n_jobs: int | None = None,
) -> TsnePairs: ...

@final
class TsnePairs:
    @property
    def n_points(self) -> int: ...
    @property
    def relabelled(self) -> bool: ...

@final
class SourceSums:
    def __new__(
        cls,
        sources: npt.NDArray[np.float64],
        kernel: str,
        method: str,
        theta: float = 0.5,
        epsilon: float = 1e-6,
    ) -> Self: ...
    def at(
        self, targets: npt.NDArray[np.float64], n_jobs: int | None = None
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]: ...

def symmetrize_csr(  # also int32 / int32 / float32 arrays (same layout out)
    n: int,
    indptr: npt.NDArray[np.int64],
    indices: npt.NDArray[np.int64],
    data: npt.NDArray[np.float64],
    scale: float,
    n_jobs: int | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]: ...

def entropic_affinities_csr(
    sqdist: npt.NDArray[np.float64],
    indices: npt.NDArray[np.int64],
    order: npt.NDArray[np.int64],
    # as entropic_affinities_knn, and compact=True: int32 indices in, int32 / float32 CSR out
    options: dict[str, Any],
    parents: npt.NDArray[np.int64] | None = None,
    n_jobs: int | None = None,
) -> tuple[
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
    npt.NDArray[np.float64],
    npt.NDArray[np.float64],
    npt.NDArray[np.uint32],
    npt.NDArray[np.uint32],
    npt.NDArray[np.float64],
    npt.NDArray[np.float64],
    npt.NDArray[np.bool_],
]: ...

@final
class GaussTransform:
    def __new__(
        cls,
        sources: npt.NDArray[np.float64],
        plan: dict[str, Any],
        n_jobs: int | None = None,
        target_sample: npt.NDArray[np.float64] | None = None,
        progress: Callable[[int, float, str], bool] | None = None,
    ) -> Self: ...
    def evaluate(
        self,
        targets: npt.NDArray[np.float64],
        weights: npt.NDArray[np.float64],
        n_jobs: int | None = None,
    ) -> npt.NDArray[np.float64]: ...
    @property
    def method(self) -> str: ...
    @property
    def n_sources(self) -> int: ...
    @property
    def dim(self) -> int: ...
    def info(self) -> dict[str, Any]: ...

@final
class LogGaussSum:
    def __new__(
        cls,
        sources: npt.NDArray[np.float64],
        weights: npt.NDArray[np.float64],
        bandwidth: float,
        n_jobs: int | None = None,
    ) -> Self: ...
    def evaluate(
        self,
        targets: npt.NDArray[np.float64],
        rtol: float,
        n_jobs: int | None = None,
    ) -> npt.NDArray[np.float64]: ...

def mean_sources_within(
    sources: npt.NDArray[np.float64], radius: float, probes: int, sample: int
) -> float: ...

# The IFGT with its sources split in parts (vastml.distributed's plan="split").
def split_ifgt_centers(
    sample: npt.NDArray[np.float64],
    bandwidth: float,
    epsilon: float,
    sizes: tuple[int, int, int],
    method: str,
) -> npt.NDArray[np.float64] | None: ...
def split_ifgt_radii(
    sources: npt.NDArray[np.float64],
    centers: npt.NDArray[np.float64],
    n_jobs: int | None = None,
) -> npt.NDArray[np.float64]: ...

@final
class SplitIfgt:
    def __new__(
        cls,
        centers: npt.NDArray[np.float64],
        radii: npt.NDArray[np.float64],
        bandwidth: float,
        epsilon: float,
        method: str,
        target_sample: npt.NDArray[np.float64] | None = None,
    ) -> Self: ...
    def coefficients(
        self,
        sources: npt.NDArray[np.float64],
        weights: npt.NDArray[np.float64],
        n_jobs: int | None = None,
    ) -> npt.NDArray[np.float64]: ...
    def evaluate(
        self,
        targets: npt.NDArray[np.float64],
        coefficients: npt.NDArray[np.float64],
        n_weights: int,
        n_jobs: int | None = None,
    ) -> npt.NDArray[np.float64]: ...
    def info(self) -> dict[str, Any]: ...

# -- vastml.svm ------------------------------------------------------------------------------
# X is a C-contiguous float64 2-D array or a CSR tuple (indptr int64, indices int64,
# data float64, n_features).
_Examples = npt.NDArray[np.float64] | tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64], int]

@final
class AmmModel:
    def __new__(
        cls,
        n_features: int,
        n_classes: int,
        params: dict[str, Any],
        weights: npt.NDArray[np.float64] | None = None,
        weight_class: npt.NDArray[np.int64] | None = None,
        steps: int = 0,
    ) -> Self: ...
    def fit(
        self,
        x: _Examples,
        y: npt.NDArray[np.int64],
        schedule: dict[str, Any],
        progress: Callable[[int, float, Any], bool] | None = None,
    ) -> tuple[int, bool]: ...
    def epoch(self, x: _Examples, y: npt.NDArray[np.int64], shuffle: bool = True, seed: int = 0) -> dict[str, Any]: ...
    def decision_function(self, x: _Examples, n_jobs: int | None = None) -> npt.NDArray[np.float64]: ...
    @property
    def weights(self) -> npt.NDArray[np.float64]: ...
    @property
    def weight_class(self) -> npt.NDArray[np.int64]: ...
    @property
    def steps(self) -> int: ...
    @property
    def clone_probability(self) -> float: ...
    def set_clone_probability(self, p: float) -> None: ...

@final
class BsgdModel:
    def __new__(
        cls,
        n_features: int,
        n_classes: int,
        params: dict[str, Any],
        support_vectors: npt.NDArray[np.float64] | None = None,
        alphas: npt.NDArray[np.float64] | None = None,
        steps: int = 0,
    ) -> Self: ...
    def fit(
        self,
        x: _Examples,
        y: npt.NDArray[np.int64],
        schedule: dict[str, Any],
        progress: Callable[[int, float, Any], bool] | None = None,
    ) -> tuple[int, bool]: ...
    def epoch(self, x: _Examples, y: npt.NDArray[np.int64], shuffle: bool = True, seed: int = 0) -> dict[str, Any]: ...
    def decision_function(self, x: _Examples, n_jobs: int | None = None) -> npt.NDArray[np.float64]: ...
    @property
    def support_vectors(self) -> npt.NDArray[np.float64]: ...
    @property
    def alphas(self) -> npt.NDArray[np.float64]: ...
    @property
    def steps(self) -> int: ...

def arow_fit(
    x: _Examples,
    y: npt.NDArray[np.int64],
    model: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]],
    params: dict[str, Any],
    progress: Callable[[int, float, Any], bool] | None = None,
    n_jobs: int | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], list[int], int, bool]: ...
def llsvm_fit(
    x: _Examples,
    y: npt.NDArray[np.int64],
    landmarks: npt.NDArray[np.float64],
    params: dict[str, Any],
    progress: Callable[[int, float, Any], bool] | None = None,
    n_jobs: int | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], list[int], bool]: ...
def llsvm_decision(
    x: _Examples,
    model: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]],
    kernel: dict[str, Any],
    n_jobs: int | None = None,
) -> npt.NDArray[np.float64]: ...
def kmeans(
    x: _Examples, k: int, max_iter: int = 100, tol: float = 0.0, seed: int = 0, n_jobs: int | None = None
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], float, int]: ...
def llsvm_kmeans(
    x: _Examples, k: int, max_iter: int = 10, seed: int = 0, n_jobs: int | None = None
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]: ...
# vastml-order (matrix reordering); codes are uint32, n_colours 0 means binary.
# A matrix is (codes, n_colours); an objective a dict of kernel, kernel_size, kernel_weights,
# padding and error; orders (row_order, col_order), each a list or None.
_Matrix = tuple[npt.NDArray[np.uint32], int]
_Orders = tuple[list[int] | None, list[int] | None]

def convolution_error(
    matrix: _Matrix, objective: dict[str, Any], orders: _Orders, n_jobs: int | None = None
) -> float: ...
def convomap_fit(
    matrix: _Matrix,
    objective: dict[str, Any],
    orders: _Orders,
    options: dict[str, Any],
    n_jobs: int | None = None,
    progress: Any = None,
) -> tuple[
    list[int], list[int], float, list[tuple[str, float]], list[tuple[str, float]], list[int], bool
]: ...
def tsp_order(matrix: _Matrix, axis: int, n_jobs: int | None = None) -> list[int]: ...

# `options`: col_order, bound, initial.
def branch_and_bound_order(
    matrix: _Matrix,
    objective: dict[str, Any],
    options: dict[str, Any],
    n_jobs: int | None = None,
    progress: Any = None,
) -> tuple[list[int], float, int, bool]: ...
def planted_matrix(
    pattern: str, size: int = 300, noise: float = 0.0, seed: int = ...
) -> npt.NDArray[np.uint8]: ...
def planted_categorical(size: int = 300, seed: int = ...) -> npt.NDArray[np.uint32]: ...
def time_moves(
    matrix: _Matrix,
    objective: dict[str, Any],
    n_moves: int = 200,
    seed: int = 0,
    n_jobs: int | None = None,
) -> tuple[list[tuple[str, float]], float]: ...
def gradient_order(
    dissimilarities: npt.NDArray[np.float64], weighted: bool = False, n_jobs: int | None = None
) -> tuple[list[int], float, int]: ...
# `params`: levels, sample, seed, parallel_sweep, neighbours, exact_max, polish_window,
# local_kicks.
def tsp_means_order(
    x: npt.NDArray[np.float64],
    params: dict[str, Any],
    n_jobs: int | None = None,
    progress: Any = None,
) -> tuple[
    npt.NDArray[np.int64], tuple[int, int, int, int], tuple[float, float, float], float, bool
]: ...

# `params`: method, init, neighbours, or_opt.
def tsp_path_order(
    x: npt.NDArray[np.float64],
    ends: tuple[int | None, int | None],
    params: dict[str, Any],
    n_jobs: int | None = None,
) -> npt.NDArray[np.int64]: ...
def olo_order(
    x: npt.NDArray[np.float64],
    precomputed: bool,
    merges: npt.NDArray[np.int64],
    n_jobs: int | None = None,
) -> tuple[npt.NDArray[np.int64], float]: ...
# `params`: neighbours, kicks, time_limit, runs, kick_window, seed.
def tsp_ils_order(
    x: npt.NDArray[np.float64],
    precomputed: bool,
    ends: tuple[int | None, int | None],
    params: dict[str, Any],
    init: npt.NDArray[np.int64] | None = None,
    n_jobs: int | None = None,
    progress: Callable[[int, float, npt.NDArray[np.int64]], Any] | None = None,
) -> tuple[npt.NDArray[np.int64], float, float, int, int]: ...
def pe_r_step(
    p: npt.NDArray[np.float64],
    phi: npt.NDArray[np.float64],
    r: npt.NDArray[np.float64],
    log_prior: npt.NDArray[np.float64],
    options: dict[str, Any],  # eta_r, eta_phi, tol_r, max_newton_iter, damped, grad_r, sample_weight
    n_jobs: int | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.uint32]]: ...
def pe_evaluate(
    p: npt.NDArray[np.float64],
    r: npt.NDArray[np.float64],
    phi: npt.NDArray[np.float64],
    log_prior: npt.NDArray[np.float64],
    options: dict[str, Any],  # eta_r, eta_phi, tol_r, max_newton_iter, damped, grad_r, sample_weight
    n_jobs: int | None = None,
) -> tuple[float, float, float, npt.NDArray[np.float64], npt.NDArray[np.float64] | None]: ...
def pe_reduced(
    p: npt.NDArray[np.float64],
    phi: npt.NDArray[np.float64],
    r: npt.NDArray[np.float64],
    log_prior: npt.NDArray[np.float64],
    options: dict[str, Any],  # eta_r, eta_phi, tol_r, max_newton_iter, damped, grad_r, sample_weight
    n_jobs: int | None = None,
) -> tuple[
    float,
    float,
    float,
    npt.NDArray[np.float64],
    npt.NDArray[np.float64],
    npt.NDArray[np.uint32],
]: ...
# Z of lll_weights with its column count L; a sparse matrix as SciPy's (indptr, indices, data)
# (indices both int64 or both int32).
_LllZ = tuple[npt.NDArray[np.uint32], npt.NDArray[np.float64], int]
_Csr = tuple[npt.NDArray[np.int64] | npt.NDArray[np.int32], npt.NDArray[np.int64] | npt.NDArray[np.int32], npt.NDArray[np.float64]]

def lll_weights(
    x: npt.NDArray[np.float64],
    landmarks: npt.NDArray[np.float64],
    n_neighbors: int,
    reg: float,
    n_jobs: int | None = None,
    progress: Any = None,
) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.float64]] | None: ...
def lll_z_m_zt(
    z: _LllZ,
    diag: npt.NDArray[np.float64] | None = None,
    m: _Csr | None = None,
    keep_rows: bool = False,
    n_jobs: int | None = None,
    progress: Any = None,
) -> (
    npt.NDArray[np.float64]
    | tuple[
        npt.NDArray[np.float64],
        tuple[npt.NDArray[np.uintp], npt.NDArray[np.uint32], npt.NDArray[np.float64]],
    ]
    | None
): ...
def lll_z_m_zt_sym(
    z: _LllZ,
    m: _Csr,
    n_jobs: int | None = None,
    progress: Any = None,
) -> npt.NDArray[np.float64] | None: ...
def lll_sym_quadratic_form(
    m: _Csr,
    v: npt.NDArray[np.float64],
    n_jobs: int | None = None,
) -> npt.NDArray[np.float64]: ...
def lll_csr_dense(
    m: _Csr,
    x: npt.NDArray[np.float64],
    n_jobs: int | None = None,
) -> npt.NDArray[np.float64]: ...
def pe_reduced_hessian(
    p: npt.NDArray[np.float64],
    phi: npt.NDArray[np.float64],
    r: npt.NDArray[np.float64],
    log_prior: npt.NDArray[np.float64],
    options: dict[str, Any],  # eta_r, eta_phi, tol_r, max_newton_iter, damped, grad_r, sample_weight
    n_jobs: int | None = None,
) -> tuple[
    float,
    npt.NDArray[np.float64],
    npt.NDArray[np.float64],
    npt.NDArray[np.float64],
    npt.NDArray[np.uint32],
]: ...
def knn_graph(
    x: npt.NDArray[np.float64],
    k: int,
    eps: float = 0.0,
    n_jobs: int | None = None,
    queries: npt.NDArray[np.float64] | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int32]]: ...
def tsne_repulsion(
    x: npt.NDArray[np.float64],
    theta: float = 0.5,
    n_jobs: int | None = None,
    leaf: int = 16,
    symmetric: bool = True,
) -> tuple[float, npt.NDArray[np.float64]]: ...
