"""Quality measures of a row ordering (spec §1.1, §1.4): FOM, open path length L, DPC
residuals, their per-feature scale and entropy."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from vastml._validation import as_points, choice

if TYPE_CHECKING:
    from vastml._typing import ArrayLike, FloatArray


def _order(order: ArrayLike | None, n: int) -> np.ndarray:
    if order is None:
        return np.arange(n)
    o = np.asarray(order)
    if o.ndim != 1 or o.shape[0] != n or not np.issubdtype(o.dtype, np.integer):
        raise ValueError(f"`order` must be a 1-D integer array of length {n}")
    if not np.array_equal(np.sort(o), np.arange(n)):
        raise ValueError("`order` must be a permutation of 0..n-1")
    return o


def figure_of_merit(labels: ArrayLike, order: ArrayLike | None = None) -> float:
    """FOM (thesis eq. 2.9): the fraction of neighbouring pairs in ``order`` whose labels differ.

    Lower is better; 0 <= FOM <= 1.

    Examples
    --------
    >>> from vastml.reorder import figure_of_merit
    >>> figure_of_merit([0, 0, 1, 1, 2])
    0.5
    >>> figure_of_merit(["a", "b", "a", "b"], order=[0, 2, 1, 3])
    0.3333333333333333
    """
    y = np.asarray(labels)
    if y.ndim != 1 or y.shape[0] < 2:
        raise ValueError("`labels` must be 1-D with at least 2 entries")
    o = _order(order, y.shape[0])
    ys = y[o]
    return float(np.count_nonzero(ys[1:] != ys[:-1]) / (y.shape[0] - 1))


def path_length(X: ArrayLike, order: ArrayLike | None = None) -> float:
    """L: the sum of Euclidean distances between neighbouring rows of ``X[order]`` (open path,
    the closing edge is not counted).

    Examples
    --------
    >>> from vastml.reorder import path_length
    >>> path_length([[0, 0], [3, 4], [3, 0]])
    9.0
    """
    x = as_points(X, "X")
    o = _order(order, x.shape[0])
    # in chunks of edges, so that a million rows need no (n, d) temporaries
    n_edges = max(len(o) - 1, 0)
    step = 65_536
    edges = [np.sqrt(np.einsum("ij,ij->i", d, d)) for d in
             (x[o[s + 1:min(s + step, n_edges) + 1]] - x[o[s:min(s + step, n_edges)]]
              for s in range(0, n_edges, step))]
    return float(np.concatenate(edges).sum()) if edges else 0.0


def dpc(X: ArrayLike, order: ArrayLike | None = None) -> FloatArray:
    """Differential predictive coding of ``X[order]``: the first row, then the row differences
    (lossless: ``np.cumsum(dpc(X, o), axis=0)`` gives back ``X[o]``).

    Examples
    --------
    >>> from vastml.reorder import dpc
    >>> dpc([[0.0], [1.0], [3.0]]).ravel().tolist()
    [0.0, 1.0, 2.0]
    """
    x = as_points(X, "X")
    o = _order(order, x.shape[0])
    xs = x[o]
    return np.vstack([xs[:1], np.diff(xs, axis=0)])


def dpc_sigma(X: ArrayLike, order: ArrayLike | None = None, model: str = "gaussian") -> FloatArray:
    """Per-feature residual scale of ``X[order]`` (E-step, eq. 2.8): the Gaussian sigma_j
    (root mean squared difference) or the Laplace b_j (mean absolute difference).

    Examples
    --------
    >>> from vastml.reorder import dpc_sigma
    >>> dpc_sigma([[0.0], [1.0], [3.0]]) ** 2
    array([2.5])
    """
    choice(model, "model", ("gaussian", "laplace"))
    x = as_points(X, "X")
    if x.shape[0] < 2:
        raise ValueError("`X` needs at least 2 rows for DPC residuals")
    e = dpc(x, order)[1:]
    if model == "gaussian":
        return np.sqrt((e**2).mean(axis=0))
    return np.abs(e).mean(axis=0)


def dpc_entropy(
    X: ArrayLike, order: ArrayLike | None = None, model: str = "gaussian", sigma: ArrayLike | None = None
) -> float:
    """Average negative log-likelihood of the DPC residuals of ``X[order]`` (eq. 2.5 in its
    exact form): ``0.5 m log(2 pi) + sum_j log sigma_j + sum (e_ij / sigma_j)^2 / (2 (n - 1))``
    for the Gaussian model, ``sum_j log(2 b_j) + sum |e_ij| / b_j / (n - 1)`` for the Laplace
    model. ``sigma`` defaults to the E-step estimate, where the Gaussian H equals
    ``0.5 m log(2 pi e) + sum_j log sigma_j``.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.reorder import dpc_entropy
    >>> h = dpc_entropy([[0.0], [1.0], [3.0]])
    >>> bool(abs(h - (0.5 * np.log(2 * np.pi * np.e) + 0.5 * np.log(2.5))) < 1e-12)
    True
    """
    choice(model, "model", ("gaussian", "laplace"))
    x = as_points(X, "X")
    if x.shape[0] < 2:
        raise ValueError("`X` needs at least 2 rows for DPC residuals")
    e = dpc(x, order)[1:]
    s = dpc_sigma(x, order, model) if sigma is None else np.asarray(sigma, dtype=float)
    if s.shape != (x.shape[1],) or not np.all(s > 0):
        raise ValueError(
            f"`sigma` must hold {x.shape[1]} positive scales (a constant feature has none)"
        )
    n1 = e.shape[0]
    if model == "gaussian":
        m = x.shape[1]
        return float(
            0.5 * m * np.log(2 * np.pi) + np.log(s).sum() + ((e / s) ** 2).sum() / (2 * n1)
        )
    return float(np.log(2 * s).sum() + (np.abs(e) / s).sum() / n1)
