"""Seriation criteria with the definitions of R ``seriation`` (Hahsler, Hornik & Buchta 2008).

Losses (smaller is better): Path_length, AR_events, AR_deviations, Least_squares, BAR,
Moore_stress, Neumann_stress, 2SUM. Merits (larger is better): Gradient_raw, Gradient_weighted,
Inertia, ME. The values equal R's ``criterion()`` on the same dissimilarity matrix and order.
"""

from __future__ import annotations

import numbers

from typing import TYPE_CHECKING, cast

import numpy as np

from vastml._validation import choice

if TYPE_CHECKING:
    from collections.abc import Sequence

    from vastml._typing import ArrayLike

_DIST_METHODS = (
    "Path_length",
    "AR_events",
    "AR_deviations",
    "Gradient_raw",
    "Gradient_weighted",
    "Inertia",
    "Least_squares",
    "BAR",
    "2SUM",
    "ME",
    "Moore_stress",
    "Neumann_stress",
)
_MATRIX_METHODS = ("ME", "Moore_stress", "Neumann_stress")

#: Criteria where a larger value is better (the rest are losses).
MERITS = frozenset({"Gradient_raw", "Gradient_weighted", "Inertia", "ME"})


def _check_order(order: ArrayLike | None, n: int, name: str) -> np.ndarray:
    if order is None:
        return np.arange(n)
    o = np.asarray(order)
    if o.ndim != 1 or o.shape[0] != n or not np.issubdtype(o.dtype, np.integer):
        raise ValueError(f"`{name}` must be a permutation of 0..{n - 1} (integers), got shape {o.shape}")
    if not np.array_equal(np.sort(o), np.arange(n)):
        raise ValueError(f"`{name}` must be a permutation of 0..{n - 1}")
    return o.astype(np.intp)


def _ar_row_terms(D: np.ndarray, kind: str) -> float:
    """Sum over i < k < j of f(d_ij, d_ik) + f(d_ij, d_kj) for the ordered matrix ``D``.

    ``kind`` = "events" (1 if d_ij < d_ik), "deviations" (|d_ij - d_ik| if d_ij < d_ik),
    "sign" (sign(d_ij - d_ik)), "diff" (d_ij - d_ik).
    """
    n = D.shape[0]
    total = 0.0
    for i in range(n - 2):
        # row part: fixed i, pairs k < j both after i: compare d(i, j) with d(i, k)
        r = D[i, i + 1 :]
        # column part: fixed j = n - 1 - i ... use symmetric form: fixed j, pairs i < k before j
        c = D[: n - 1 - i, n - 1 - i]
        for v, sign in ((r, 1.0), (c[::-1], 1.0)):
            # v[a] for a nearer, v[b] for b farther (a < b): term f(v[b], v[a])
            diff = v[None, :] - v[:, None]  # diff[a, b] = v[b] - v[a]
            iu = np.triu_indices(v.shape[0], 1)
            dv = diff[iu]
            if kind == "events":
                total += float(np.count_nonzero(dv < 0))
            elif kind == "deviations":
                total += float(-dv[dv < 0].sum())
            elif kind == "sign":
                total += float(np.sign(dv).sum())
            else:
                total += float(dv.sum()) * sign
    return total


def _neighbour_stress(X: np.ndarray, moore: bool) -> float:
    """Sum over cells and their right / lower (and, for Moore, diagonal) neighbours of the
    squared difference, times 2 (R's ``stress``)."""
    s = ((X[:, 1:] - X[:, :-1]) ** 2).sum() + ((X[1:, :] - X[:-1, :]) ** 2).sum()
    if moore:
        s += ((X[1:, 1:] - X[:-1, :-1]) ** 2).sum() + ((X[1:, :-1] - X[:-1, 1:]) ** 2).sum()
    return float(2.0 * s)


def _bond_energy(X: np.ndarray) -> float:
    """0.5 Σ x_ij (x_i,j-1 + x_i,j+1 + x_i-1,j + x_i+1,j) (McCormick et al.'s measure of
    effectiveness)."""
    return float((X[:, 1:] * X[:, :-1]).sum() + (X[1:, :] * X[:-1, :]).sum())


def criterion(
    x: ArrayLike,
    order: ArrayLike | None = None,
    *,
    method: str | Sequence[str] = "Path_length",
    col_order: ArrayLike | None = None,
    band: int | None = None,
) -> float | dict[str, float]:
    """A seriation criterion of ``x`` in ``order``, defined as in R ``seriation``.

    Parameters
    ----------
    x : array of shape (n, n) or (n, m)
        A symmetric dissimilarity matrix (all methods), or for ``"ME"``, ``"Moore_stress"`` and
        ``"Neumann_stress"`` with ``col_order`` given, a data matrix.
    order : array of int or None
        Order of the objects (rows); None = as given.
    method : str or list of str
        "Path_length" Σ d(o_i, o_i+1); "AR_events" / "AR_deviations" the number / total size of
        violations of the anti-Robinson form over triples i < k < j (d_ij < d_ik and
        d_ij < d_kj); "Gradient_raw" / "Gradient_weighted" Σ_{i<k<j} f(d_ij - d_ik) +
        f(d_ij - d_kj) with f = sign / identity (merits); "Inertia" Σ_ij d_ij (i - j)^2 (merit);
        "Least_squares" Σ_ij (d_ij - |i - j|)^2; "BAR" banded anti-Robinson
        Σ_{0<|i-j|<=b} (b + 1 - |i - j|) d_ij over i < j, with ``band`` b (default
        max(1, floor(n / 5))); "2SUM" Σ_ij (i - j)^2 / (1 + d_ij); "ME" the bond energy
        (merit), "Moore_stress" / "Neumann_stress" the squared differences of neighbouring
        cells (8 / 4 neighbours). For a dissimilarity matrix the last three are taken on the
        similarity 1 / (1 + d) with rows and columns in ``order``, as R does.
    col_order : array of int or None
        Column order for a data matrix (ME and stress only). When given, ``x`` is a data matrix.
    band : int or None
        Band b of "BAR".

    Returns
    -------
    float, or dict of floats when ``method`` is a list.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([0.0, 2.0, 1.0, 4.0])
    >>> D = np.abs(np.subtract.outer(x, x))
    >>> criterion(D, [0, 2, 1, 3])
    4.0
    >>> criterion(D, [0, 1, 2, 3], method="AR_events")
    2.0
    >>> criterion(D, [0, 2, 1, 3], method=["AR_events", "Gradient_raw"])
    {'AR_events': 0.0, 'Gradient_raw': 8.0}
    """
    if isinstance(method, (list, tuple)):
        return {
            m: cast(float, criterion(x, order, method=m, col_order=col_order, band=band))
            for m in method
        }
    A = np.asarray(x, dtype=np.float64)
    if A.ndim != 2:
        raise ValueError(f"`x` must be a 2-D array, got shape {A.shape}")
    if not np.isfinite(A).all():
        raise ValueError("`x` contains NaN or infinite values")
    if col_order is not None:
        choice(method, "method", _MATRIX_METHODS)
        ro = _check_order(order, A.shape[0], "order")
        co = _check_order(col_order, A.shape[1], "col_order")
        X = A[np.ix_(ro, co)]
        if method == "ME":
            if (X < 0).any():
                raise ValueError("`x` must be non-negative for method='ME'")
            return _bond_energy(X)
        return _neighbour_stress(X, method == "Moore_stress")
    choice(method, "method", _DIST_METHODS)
    n = A.shape[0]
    if A.shape[1] != n:
        raise ValueError(
            f"`x` must be a square dissimilarity matrix (or give `col_order` for a data matrix), got shape {A.shape}"
        )
    if not np.allclose(A, A.T, rtol=1e-12, atol=1e-12):
        raise ValueError("`x` must be symmetric")
    o = _check_order(order, n, "order")
    D = A[np.ix_(o, o)]
    idx = np.arange(n, dtype=np.float64)
    gap = np.abs(np.subtract.outer(idx, idx))
    if method == "Path_length":
        return float(np.diagonal(D, 1).sum())
    if method == "AR_events":
        return _ar_row_terms(D, "events")
    if method == "AR_deviations":
        return _ar_row_terms(D, "deviations")
    if method == "Gradient_raw":
        return _ar_row_terms(D, "sign")
    if method == "Gradient_weighted":
        return _ar_row_terms(D, "diff")
    if method == "Inertia":
        return float((D * gap**2).sum())
    if method == "Least_squares":
        return float(((D - gap) ** 2).sum())
    if method == "2SUM":
        return float((gap**2 / (1.0 + D)).sum())
    if method == "BAR":
        b = max(1, n // 5) if band is None else band
        if isinstance(b, bool) or not isinstance(b, numbers.Integral):
            raise TypeError(f"`band` must be an integer, got {band!r}")
        b = int(b)
        if not 1 <= b < max(n, 2):
            raise ValueError(f"`band` must be in 1..{n - 1}, got {b}")
        w = np.where((gap > 0) & (gap <= b), b + 1 - gap, 0.0)
        return float(np.triu(w * D).sum())
    S = 1.0 / (1.0 + D)
    if method == "ME":
        return _bond_energy(S)
    return _neighbour_stress(S, method == "Moore_stress")
