# Hand-written stub of the compiled module; tests/test_core_stub.py keeps it honest.
from typing import Any

import numpy as np
import numpy.typing as npt

__version__: str
simd: str

class VastmlError(Exception):
    """Base class of vastml's own errors (parameter and shape errors are ValueError)."""

def effective_n_jobs(n_jobs: int | None = None) -> int: ...
def gauss_transform(
    sources: npt.NDArray[np.float64],
    targets: npt.NDArray[np.float64],
    weights: npt.NDArray[np.float64],
    bandwidth: float,
    epsilon: float = 1e-6,
    method: str = "auto",
    n_jobs: int | None = None,
) -> npt.NDArray[np.float64]: ...
def hermite_gauss_sum(
    sources: npt.NDArray[np.float64],
    weights: npt.NDArray[np.float64],
    targets: npt.NDArray[np.float64],
    order: int,
    h1: float,
    h2: float,
    epsilon: float = 1e-6,
    method: str = "auto",
    n_jobs: int | None = None,
) -> npt.NDArray[np.float64]: ...
def erfc_sum(
    sources: npt.NDArray[np.float64],
    weights: npt.NDArray[np.float64],
    targets: npt.NDArray[np.float64],
    epsilon: float = 1e-6,
    method: str = "auto",
    n_jobs: int | None = None,
) -> npt.NDArray[np.float64]: ...

def entropic_affinities_knn(
    sqdist: npt.NDArray[np.float64],
    perplexity: float,
    order: npt.NDArray[np.int64],
    parents: npt.NDArray[np.int64] | None = None,
    warm: str = "previous",
    method: str = "euler",
    tol: float = 1e-10,
    maxit: int = 20,
    chunk_size: int = 2048,
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
def embedding_objective(
    model: str,
    x: npt.NDArray[np.float64],
    indptr: npt.NDArray[np.int64],
    indices: npt.NDArray[np.int64],
    data: npt.NDArray[np.float64],
    lam: float = 1.0,
    gradient: str = "exact",
    theta: float = 0.5,
    epsilon: float = 1e-6,
    need_objective: bool = True,
    n_jobs: int | None = None,
) -> tuple[float, float, float, npt.NDArray[np.float64]]: ...
def kernel_sums(
    x: npt.NDArray[np.float64],
    kernel: str = "gaussian",
    method: str = "exact",
    theta: float = 0.5,
    epsilon: float = 1e-6,
    weights: npt.NDArray[np.float64] | None = None,
    n_jobs: int | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]: ...

class GaussTransform:
    def __init__(
        self,
        sources: npt.NDArray[np.float64],
        bandwidth: float,
        epsilon: float = 1e-6,
        method: str = "auto",
        n_jobs: int | None = None,
    ) -> None: ...
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
