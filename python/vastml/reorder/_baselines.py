"""Baseline orderings of the thesis (chapter 2): nested, barycentric, bidirectional, spectral,
heatmap, TSP."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from vastml._validation import check_int
from vastml.reorder._objective import as_codes

if TYPE_CHECKING:
    from vastml._typing import ArrayLike, IntArray


def _binary(matrix: ArrayLike, name: str = "matrix") -> np.ndarray:
    codes, n_colours, _ = as_codes(matrix, None, name)
    if n_colours:
        raise ValueError(f"`{name}` must be binary (0/1) for this baseline")
    return codes.astype(np.float64)


def nested_order(matrix: ArrayLike) -> tuple[IntArray, IntArray]:
    """Rows and columns by decreasing number of ones (ties keep the input order).

    In array indexing this puts the dense rows at the top and the dense columns at the
    left, where the thesis's ZerosAndOnes padding has its ones (the thesis, drawing (0,0)
    at the bottom-left, says "increasing").

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.reorder import nested_order
    >>> r, c = nested_order(np.array([[0, 1], [1, 1]]))
    >>> r.tolist(), c.tolist()
    ([1, 0], [1, 0])
    """
    M = _binary(matrix)
    rows = np.argsort(-M.sum(axis=1), kind="stable")
    cols = np.argsort(-M.sum(axis=0), kind="stable")
    return rows, cols


def barycentric_order(matrix: ArrayLike, *, max_iter: int = 10) -> tuple[IntArray, IntArray]:
    """Alternately sort rows and columns by barycentre Σ_c c·M[r,c] / Σ_c M[r,c] (eq. 2.1).

    Rows (columns) without ones keep their barycentre undefined and go last.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.reorder import barycentric_order
    >>> r, c = barycentric_order(np.eye(4, dtype=int)[[2, 0, 3, 1]])
    >>> r.tolist()
    [1, 3, 0, 2]
    """
    M = _binary(matrix)
    rows = np.arange(M.shape[0])
    cols = np.arange(M.shape[1])

    def bary(A: np.ndarray) -> np.ndarray:
        s = A.sum(axis=1)
        pos = A @ np.arange(A.shape[1], dtype=np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            b = pos / s
        b[s == 0] = np.inf
        return b

    for _ in range(check_int(max_iter, "max_iter", low=0)):
        new_rows = rows[np.argsort(bary(M[rows][:, cols]), kind="stable")]
        new_cols = cols[np.argsort(bary(M[new_rows][:, cols].T), kind="stable")]
        if np.array_equal(new_rows, rows) and np.array_equal(new_cols, cols):
            break
        rows, cols = new_rows, new_cols
    return rows, cols


def _closest_intervals(A: np.ndarray, only_fill: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the interval [start, end] of the closest consecutive-ones row: fewest flips
    (maximum-sum segment with +1 for ones and -1 for zeros), or with only 0 -> 1 flips the span
    from the first to the last one. Rows without ones get (inf, inf)."""
    m, n = A.shape
    start = np.full(m, np.inf)
    end = np.full(m, np.inf)
    for r in range(m):
        ones = np.flatnonzero(A[r])
        if len(ones) == 0:
            continue
        if only_fill:
            start[r], end[r] = ones[0], ones[-1]
            continue
        best, cur, cur_start, best_span = -1, 0, 0, (ones[0], ones[0])
        for c in range(n):
            if cur <= 0:
                cur, cur_start = 0, c
            cur += 1 if A[r, c] else -1
            if cur > best:
                best, best_span = cur, (cur_start, c)
        start[r], end[r] = best_span
    return start, end


def bidirectional_order(
    matrix: ArrayLike, *, max_iter: int = 10, only_fill: bool = False
) -> tuple[IntArray, IntArray]:
    """Alternating banded ordering (Garriga, Junttila & Mannila; the thesis's "Bidirectional").

    Given the column order, each row is replaced by its closest consecutive-ones interval
    (fewest flips; ``only_fill=True``: only 0 -> 1 flips, i.e. first to last one), the rows
    are sorted by (interval start, interval end) -- nested intervals (Sperner conflicts) are
    resolved by that order --, then the same for the columns; ``max_iter`` rounds or until
    nothing changes. Rows (columns) without ones go last.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.reorder import bidirectional_order
    >>> B = np.array([[1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]])
    >>> r, c = bidirectional_order(B[[2, 0, 1]])
    >>> B[[2, 0, 1]][r][:, c].tolist()
    [[1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]
    """
    M = _binary(matrix) > 0
    rows = np.arange(M.shape[0])
    cols = np.arange(M.shape[1])

    def sort_rows(A: np.ndarray) -> np.ndarray:
        start, end = _closest_intervals(A, only_fill)
        return np.lexsort((end, start))

    for _ in range(check_int(max_iter, "max_iter", low=0)):
        new_rows = rows[sort_rows(M[rows][:, cols])]
        new_cols = cols[sort_rows(M[new_rows][:, cols].T)]
        if np.array_equal(new_rows, rows) and np.array_equal(new_cols, cols):
            break
        rows, cols = new_rows, new_cols
    return rows, cols


def spectral_order(matrix: ArrayLike) -> tuple[IntArray, IntArray]:
    """Rows and columns by the Fiedler vector of the unnormalised Laplacian of the
    dot-product similarities.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.reorder import spectral_order
    >>> r, c = spectral_order(np.eye(5, dtype=int))
    >>> sorted(r.tolist())
    [0, 1, 2, 3, 4]
    """
    M = _binary(matrix)

    def fiedler(A: np.ndarray) -> np.ndarray:
        S = A @ A.T
        np.fill_diagonal(S, 0.0)
        L = np.diag(S.sum(axis=1)) - S
        if len(L) < 2:
            return np.arange(len(L))
        _, vecs = np.linalg.eigh(L)
        return np.argsort(vecs[:, 1], kind="stable")

    return fiedler(M), fiedler(M.T)


def heatmap_order(matrix: ArrayLike) -> tuple[IntArray, IntArray]:
    """Leaves of complete-linkage hierarchical clustering with Manhattan distance, for the
    rows and for the columns (the thesis's "HeatMap" baseline, after R's heatmap3).

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.reorder import heatmap_order
    >>> r, c = heatmap_order(np.array([[1, 0], [0, 1], [1, 0]]))
    >>> sorted(r.tolist())
    [0, 1, 2]
    """
    from scipy.cluster.hierarchy import leaves_list, linkage

    codes, _, _ = as_codes(matrix)
    X = codes.astype(np.float64)

    def leaves(A: np.ndarray) -> np.ndarray:
        if len(A) < 2:
            return np.arange(len(A))
        return leaves_list(linkage(A, method="complete", metric="cityblock")).astype(np.intp)

    return leaves(X), leaves(X.T)
