"""Exact and TSP orderings."""

from __future__ import annotations

import numpy as np

from vastml import _core
from vastml.reorder._objective import as_codes, check_choice, check_order, kernel_args


def tsp_order(matrix, *, axis=0, categorical=None, n_jobs=None) -> np.ndarray:
    """Rows (``axis=0``) or columns ordered as an open TSP path, greedy edges + 2-opt.

    Distances are the numbers of differing cells (Hamming distance for binary data); the
    greedy matching adds edges by increasing length while degrees stay ≤ 2 and no cycle
    forms, then at most three 2-opt passes shorten the path (thesis §5.2.6).

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.reorder import tsp_order
    >>> M = np.array([[1, 1, 0], [0, 0, 1], [1, 1, 1], [0, 0, 0]])
    >>> sorted(tsp_order(M).tolist())
    [0, 1, 2, 3]
    """
    if axis not in (0, 1):
        raise ValueError(f"`axis` must be 0 or 1, got {axis!r}")
    codes, n_colours, _ = as_codes(matrix, categorical)
    return np.asarray(_core.tsp_order(codes, n_colours, axis, n_jobs=n_jobs), dtype=np.intp)


def branch_and_bound_order(
    matrix,
    *,
    kernel="gbs",
    kernel_size=3,
    col_order=None,
    bound="slow",
    initial=None,
    categorical=None,
    n_jobs=None,
) -> tuple[np.ndarray, float]:
    """The exact row order minimising the ConvoMap error, by branch and bound.

    Columns stay in ``col_order``; padding is zero ("cropping", which makes an order and its
    reversal equal). With a cross kernel rows and columns are independent, so calling this on
    the matrix and on its transpose solves both. The search is parallel over the first row
    and prunes with a lower bound: ``"slow"`` pays each unplaced row its cheapest links to the
    rows it can still touch, ``"fast"`` its cheapest links overall. Practical up to about 20
    rows; at most 64.

    Returns
    -------
    order : ndarray of int
    error : float
        The ConvoMap error of that order (zero padding).

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.reorder import branch_and_bound_order
    >>> stairs = np.array([[int(c) for c in r] for r in
    ...     ["0001110", "1110000", "0000011", "1100000", "0000001", "0111000", "0000110", "0011100"]])
    >>> order, err = branch_and_bound_order(stairs)
    >>> round(err, 6)
    6.4
    """
    codes, n_colours, _ = as_codes(matrix, categorical)
    if codes.shape[0] > 64:
        raise ValueError(f"`matrix` has {codes.shape[0]} rows; branch and bound handles at most 64")
    name, size, weights = kernel_args(kernel, kernel_size)
    check_choice(bound, "bound", ("fast", "slow"))
    cols = check_order(col_order, codes.shape[1], "col_order")
    init = check_order(initial, codes.shape[0], "initial")
    order, err, _nodes = _core.branch_and_bound_order(
        codes, n_colours, name, size, weights, cols, bound, init, n_jobs=n_jobs
    )
    return np.asarray(order, dtype=np.intp), float(err)
