"""Exact and TSP orderings."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from vastml import _core
from vastml._progress import Progress
from vastml.reorder._objective import (
    as_codes,
    check_choice,
    check_order,
    kernel_args,
    objective_args,
)

if TYPE_CHECKING:
    from vastml._typing import ArrayLike, IntArray
    from vastml.reorder._random import Callbacks


def tsp_order(
    matrix: ArrayLike, *, axis: int = 0, categorical: bool | None = None, n_jobs: int | None = None
) -> IntArray:
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
    return np.asarray(_core.tsp_order((codes, n_colours), axis, n_jobs=n_jobs), dtype=np.intp)


def branch_and_bound_order(
    matrix: ArrayLike,
    *,
    kernel: str | ArrayLike = "gbs",
    kernel_size: int | tuple[int, int] = 3,
    col_order: ArrayLike | None = None,
    bound: str = "slow",
    initial: ArrayLike | None = None,
    categorical: bool | None = None,
    n_jobs: int | None = None,
    callbacks: Callbacks = None,
    callback_every: int = 1,
    verbose: bool | int = False,
) -> tuple[IntArray, float]:
    """The exact row order minimising the ConvoMap error, by branch and bound.

    Columns stay in ``col_order``; padding is zero ("cropping", which makes an order and its
    reversal equal). With a cross kernel rows and columns are independent, so calling this on
    the matrix and on its transpose solves both. The search is parallel over the first row
    and prunes with a lower bound: ``"slow"`` pays each unplaced row its cheapest links to the
    rows it can still touch, ``"fast"`` its cheapest links overall. Practical up to about 20
    rows; at most 64.

    Parameters
    ----------
    matrix : array-like of shape (n_rows, n_cols)
        Binary or categorical matrix.
    kernel : str or array-like, default="gbs"
        Kernel name or explicit weights (as :class:`ConvoMap`).
    kernel_size : int or (int, int), default=3
        Odd kernel side(s).
    col_order : array-like of int or None, default=None
        The fixed column order (None = as given).
    bound : {"slow", "fast"}, default="slow"
        The lower bound that prunes.
    initial : array-like of int or None, default=None
        A row order whose cost is the first upper bound (None = a TSP path).
    categorical : bool or None, default=None
        Treat the values as colours (None = decide from the data).
    n_jobs : int or None, default=None
        Threads (None = all cores).
    callbacks : callable, list of callables or None, default=None
        Called as ``callback(k, cost, order)`` at the k-th improvement of the best order
        found, with ``cost`` its integer pair cost (the error up to a constant and a scale).
        Returning True stops the search with that best order, which is then not proven
        optimal.
    callback_every : int, default=1
        Call the callbacks every this many improvements.
    verbose : bool or int, default=False
        Draw a progress bar (one step per improvement).

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
    with Progress(callbacks, callback_every=callback_every, verbose=verbose,
                  desc="branch_and_bound_order") as progress:
        options = {"col_order": cols, "bound": bound, "initial": init}
        order, err, _nodes, _stopped = _core.branch_and_bound_order(
            (codes, n_colours), objective_args(name, size, weights), options, n_jobs=n_jobs,
            progress=progress.report if progress.active else None,
        )
    return np.asarray(order, dtype=np.intp), float(err)


def gradient_order(
    dissimilarities: ArrayLike, *, weighted: bool = False, n_jobs: int | None = None
) -> tuple[IntArray, float]:
    """The order maximising the anti-Robinson gradient of a dissimilarity matrix, exactly.

    The within-row-and-column gradient of an order ψ is
    Σ_{i<k<j} f(d(ψi,ψj) − d(ψi,ψk)) + f(d(ψi,ψj) − d(ψk,ψj)) with f = sign (``weighted=False``,
    R seriation's ``BBURCG``) or f(x) = x (``weighted=True``, ``BBWRCG``), after Brusco & Stahl.
    Unweighted: branch and bound, with an incumbent from a multi-start insertion local search,
    Brusco & Stahl's bound (pair choices shared by all placed objects) tightened by a bound over
    quadruples of unplaced objects, the reversal symmetry cut, the insertion / interchange tests
    and a memo of dominated prefixes; children are bounded from their parent's incremental state
    and only survivors are built; parallel over the first two objects with a shared incumbent.
    Weighted: the gradient equals ``3 Σ_k cut(first k objects) − (n + 1) Σ_{i<j} d(i, j)``, so up
    to 20 objects it is solved by an O(2^n n) dynamic programme over the sets of placed objects.
    Unweighted from 16, weighted from 21, up to 32 objects use a bounded dynamic programme over
    sets instead: the value a completion adds depends on the prefix only through its set, so
    each set is kept once with its best chain; every triple has two objects in the first or in
    the second half, so the optimum is the best ``F(S) + F(complement)`` over half-size sets and
    only sets up to half the objects are built; sets whose value plus the bounds above cannot
    beat the heuristic incumbent are dropped. Above 32 objects: the branch and bound (weighted
    with a joint triple-plus-pair bound). Exponential: on 2 loaded cores n = 26 takes about
    15 s unweighted and 4 s weighted, n = 28 a few minutes.

    Returns
    -------
    order : ndarray of int
    value : float
        The gradient of that order.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.reorder import gradient_order
    >>> x = np.array([0.0, 3.0, 1.0, 2.0])
    >>> order, value = gradient_order(np.abs(np.subtract.outer(x, x)))
    >>> order.tolist() in ([0, 2, 3, 1], [1, 3, 2, 0]), value
    (True, 8.0)
    """
    d = np.ascontiguousarray(np.asarray(dissimilarities, dtype=np.float64))
    if d.ndim != 2 or d.shape[0] != d.shape[1] or d.shape[0] == 0:
        raise ValueError(f"`dissimilarities` must be a square matrix, got shape {d.shape}")
    if d.shape[0] > 64:
        raise ValueError("`dissimilarities` has more than 64 objects; branch and bound is exponential")
    if not np.isfinite(d).all():
        raise ValueError("`dissimilarities` contains NaN or infinite values")
    if not np.allclose(d, d.T, rtol=1e-12, atol=0):
        raise ValueError("`dissimilarities` must be symmetric")
    order, value, _ = _core.gradient_order(d, bool(weighted), n_jobs=n_jobs)
    return np.asarray(order, dtype=np.intp), float(value)
