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

# vastml-order (matrix reordering); codes are uint32, n_colours 0 means binary.
def convolution_error(
    codes: npt.NDArray[np.uint32],
    n_colours: int,
    kernel: str,
    kernel_size: tuple[int, int],
    kernel_weights: npt.NDArray[np.float64] | None,
    padding: str,
    error: str,
    row_order: list[int] | None = None,
    col_order: list[int] | None = None,
    n_jobs: int | None = None,
) -> float: ...
def convomap_fit(
    codes: npt.NDArray[np.uint32],
    n_colours: int,
    kernel: str,
    kernel_size: tuple[int, int],
    kernel_weights: npt.NDArray[np.float64] | None,
    padding: str,
    error: str,
    row_order: list[int] | None,
    col_order: list[int] | None,
    init: str,
    method: str,
    moves: list[str],
    max_iter: int,
    segment_length: int,
    reaction: float,
    stop_threshold: float | None,
    accept_ties: bool,
    axes_name: str,
    swap_radius: int,
    max_block: int,
    tolerance: tuple[int, int, int, float],
    schedule: list[int],
    n_blocks: int,
    seed: int,
    n_jobs: int | None = None,
) -> tuple[list[int], list[int], float, list[tuple[str, float]], list[tuple[str, float]]]: ...
def tsp_order(
    codes: npt.NDArray[np.uint32], n_colours: int, axis: int, n_jobs: int | None = None
) -> list[int]: ...
def branch_and_bound_order(
    codes: npt.NDArray[np.uint32],
    n_colours: int,
    kernel: str,
    kernel_size: tuple[int, int],
    kernel_weights: npt.NDArray[np.float64] | None,
    col_order: list[int] | None,
    bound: str,
    initial: list[int] | None,
    n_jobs: int | None = None,
) -> tuple[list[int], float, int]: ...
def planted_matrix(
    pattern: str, size: int = 300, noise: float = 0.0, seed: int = 545173132
) -> npt.NDArray[np.uint8]: ...
def planted_categorical(size: int = 300, seed: int = 545173132) -> npt.NDArray[np.uint32]: ...
def time_moves(
    codes: npt.NDArray[np.uint32],
    n_colours: int,
    kernel: str,
    kernel_size: tuple[int, int],
    padding: str,
    n_moves: int = 200,
    seed: int = 0,
    n_jobs: int | None = None,
) -> tuple[list[tuple[str, float]], float]: ...
def tsp_means_order(
    x: npt.NDArray[np.float64],
    levels: int | None,
    sample: int,
    seed: int,
    parallel_sweep: bool,
    neighbours: int,
    exact_max: int,
    polish_window: int,
    n_jobs: int | None = None,
) -> tuple[npt.NDArray[np.int64], int, int, int, int]: ...
def tsp_path_order(
    x: npt.NDArray[np.float64],
    start: int | None,
    end: int | None,
    method: str,
    init: str,
    neighbours: int,
    or_opt: bool,
    n_jobs: int | None = None,
) -> npt.NDArray[np.int64]: ...
