"""Seriation of numeric data: orders of the rows (and columns) of a data matrix or of the objects
of a dissimilarity matrix, with the methods of R ``seriation`` that people use."""

from __future__ import annotations

import math
import numbers
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from vastml import _core
from vastml._progress import Progress
from vastml._validation import choice, n_jobs_arg
from vastml.reorder._random import seed_of

if TYPE_CHECKING:
    from vastml._typing import ArrayLike, IntArray
    from vastml.reorder._random import Callbacks, RandomStateLike

METHODS = (
    "TSP",
    "OLO",
    "GW",
    "HC",
    "Spectral",
    "MDS",
    "ARSA",
    "BBURCG",
    "BBWRCG",
    "BEA",
    "PCA",
    "TSP_means",
)
_DATA_ONLY = ("BEA", "PCA", "TSP_means")
_LINKAGES = ("single", "complete", "average", "weighted", "centroid", "median", "ward")


def default_time_limit(n: int) -> float:
    """Seconds the TSP search gets by default for ``n`` objects: 0.1 + n / 2,500, at most 5."""
    return min(0.1 + n / 2_500, 5.0)


class _Problem:
    """The objects to order: points with a metric, or a dissimilarity matrix, built lazily."""

    def __init__(self, X, metric):
        self.metric = metric
        if metric == "precomputed":
            self.points = None
            self.D = X
        else:
            self.points = X
            self.D = None
        self.n = X.shape[0]

    def euclidean_points(self):
        return self.points if self.metric == "euclidean" else None

    def dense(self):
        if self.D is None:
            from scipy.spatial.distance import pdist, squareform

            if self.n > 40_000:
                raise ValueError(
                    f"{self.n} objects: a dense dissimilarity matrix would need "
                    f"{self.n**2 * 8 / 1e9:.0f} GB; use method='TSP' or 'TSP_means' with metric='euclidean'"
                )
            self.D = np.ascontiguousarray(squareform(pdist(self.points, metric=self.metric)))
        return self.D

    def condensed(self):
        from scipy.spatial.distance import pdist, squareform

        if self.D is not None:
            return squareform(self.D, checks=False)
        return pdist(self.points, metric=self.metric)

    def rust_args(self):
        """(array, precomputed) for the Rust kernels."""
        p = self.euclidean_points()
        if p is not None:
            return p, False
        return self.dense(), True


def _tsp(
    prob: _Problem,
    *,
    time_limit: float | None,
    seed: int,
    n_jobs: int | None,
    progress: Progress,
    n_neighbors: int = 10,
) -> tuple[np.ndarray, float]:
    x, pre = prob.rust_args()
    n = prob.n
    tl = default_time_limit(n) if time_limit is None else time_limit
    params = _ils_params(n_neighbors, None, tl, 2, 30, seed)
    # with callbacks or a bar the search reports ten times (the best path so far) and stops
    # when a callback returns True
    report = progress.report if progress.active else None
    order, length, *_ = _core.tsp_ils_order(x, pre, (None, None), params, n_jobs=n_jobs,
                                            progress=report)
    return order, length


def _ils_params(neighbours, kicks, time_limit, runs, kick_window, seed):
    """The parameter dict of ``_core.tsp_ils_order``."""
    return {
        "neighbours": neighbours,
        "kicks": kicks,
        "time_limit": time_limit,
        "runs": runs,
        "kick_window": kick_window,
        "seed": seed,
    }


def _linkage(prob: _Problem, method: str) -> np.ndarray:
    from scipy.cluster.hierarchy import linkage

    if method in ("centroid", "median", "ward") and prob.metric != "euclidean":
        raise ValueError(f"`linkage`={method!r} needs metric='euclidean'")
    if prob.metric == "euclidean" and prob.D is None:
        return linkage(prob.points, method=method, metric="euclidean")
    return linkage(prob.condensed(), method=method)


def _olo(prob: _Problem, Z: np.ndarray, n_jobs: int | None) -> np.ndarray:
    x, pre = prob.rust_args()
    merges = np.ascontiguousarray(Z[:, :2].astype(np.int64))
    order, _ = _core.olo_order(x, pre, merges, n_jobs=n_jobs)
    return order


def _gw(prob: _Problem, Z: np.ndarray) -> np.ndarray:
    """Gruvaeus & Wainer: at every merge, of the four ways to join the two child orders keep
    the one whose adjacent ends are nearest."""
    n = prob.n
    x, pre = prob.rust_args()
    if pre:
        d = lambda a, b: x[a, b]  # noqa: E731
    else:
        d = lambda a, b: math.sqrt(float(((x[a] - x[b]) ** 2).sum()))  # noqa: E731
    ends: list[Any] = [(i, i) for i in range(n)] + [None] * (n - 1)
    how: list[Any] = [None] * (n - 1)
    for t in range(n - 1):
        a, b = int(Z[t, 0]), int(Z[t, 1])
        (fa, la), (fb, lb) = ends[a], ends[b]
        # (reverse a, reverse b): joined ends are (end of a, start of b)
        opts = [
            (d(la, fb), False, False),
            (d(fa, fb), True, False),
            (d(la, lb), False, True),
            (d(fa, lb), True, True),
        ]
        _, ra, rb = min(opts, key=lambda o: o[0])
        how[t] = (a, ra, b, rb)
        first = la if ra else fa
        last = fb if rb else lb
        ends[n + t] = (first, last)
    out = []
    stack = [(2 * n - 2, False)]
    while stack:
        v, rev = stack.pop()
        if v < n:
            out.append(v)
            continue
        a, ra, b, rb = how[v - n]
        seq = [(a, ra), (b, rb)]
        if rev:
            seq = [(b, not rb), (a, not ra)]
        # push in reverse so the first is popped first
        stack.append(seq[1])
        stack.append(seq[0])
    return np.asarray(out, dtype=np.intp)


def _spectral(prob: _Problem) -> np.ndarray:
    """Fiedler vector of the Laplacian of the similarity 1 / (1 + d) (as R ``Spectral``)."""
    D = prob.dense()
    W = 1.0 / (1.0 + D)
    L = np.diag(W.sum(1)) - W
    vals, vecs = np.linalg.eigh(L)
    return np.argsort(vecs[:, 1], kind="stable")


def _mds(prob: _Problem) -> np.ndarray:
    """First coordinate of classical (Torgerson) MDS; for Euclidean points, the first principal
    component, without the n x n matrix."""
    p = prob.euclidean_points()
    if p is not None:
        return _pca_rows(p)
    D = prob.dense()
    n = D.shape[0]
    J = np.eye(n) - 1.0 / n
    B = -0.5 * J @ (D**2) @ J
    vals, vecs = np.linalg.eigh(B)
    return np.argsort(vecs[:, -1], kind="stable")


def _pca_rows(X: np.ndarray) -> np.ndarray:
    Xc = X - X.mean(0)
    # first right singular vector by the d x d covariance (cheap for tall matrices)
    C = Xc.T @ Xc
    vals, vecs = np.linalg.eigh(C)
    return np.argsort(Xc @ vecs[:, -1], kind="stable")


def _ls_merit(D: np.ndarray, o: np.ndarray) -> float:
    idx = np.arange(len(o), dtype=np.float64)
    return float((D[np.ix_(o, o)] * np.abs(np.subtract.outer(idx, idx))).sum() / 2)


def _arsa(
    prob: _Problem,
    *,
    time_limit: float | None,
    seed: int,
    progress: Progress,
    cool: float = 0.5,
    t_min: float = 1e-4,
    n_temps: int | None = None,
) -> np.ndarray:
    """Simulated annealing with pairwise interchanges and insertions (Brusco, Köhn & Stahl
    2008), maximising Σ_{i<j} d(ψi, ψj) |i - j| (the linear seriation merit): moves are
    evaluated incrementally in O(n)."""
    D = prob.dense()
    n = D.shape[0]
    rng = np.random.default_rng(seed)
    o = rng.permutation(n)
    if n < 3:
        return np.arange(n)
    tl = default_time_limit(n) * 5 if time_limit is None else time_limit
    t_end = time.perf_counter() + tl
    pos = np.arange(n, dtype=np.float64)

    def swap_delta(o, i, j):
        # merit change of exchanging positions i and j
        a, b = o[i], o[j]
        da = D[a, o]
        db = D[b, o]
        wi = np.abs(pos - i)
        wj = np.abs(pos - j)
        delta = ((db - da) * wi).sum() + ((da - db) * wj).sum()
        # the pair (a, b) itself keeps distance |i - j|; remove its double-counted terms
        delta -= (D[b, b] - D[a, b]) * abs(j - i) + (D[a, a] - D[b, a]) * abs(i - j)
        return delta

    merit = _ls_merit(D, o)
    best, best_o = merit, o.copy()
    # initial temperature: 10x the mean absolute change of random swaps
    samp = [abs(swap_delta(o, *rng.choice(n, 2, replace=False))) for _ in range(min(50, n))]
    temp = 10.0 * (np.mean(samp) + 1e-12)
    t_stop = temp * t_min
    moves_per_temp = 10 * n
    it = 0
    while temp > t_stop and time.perf_counter() < t_end:
        it += 1
        for _ in range(moves_per_temp):
            i, j = rng.integers(0, n, 2)
            if i == j:
                continue
            delta = swap_delta(o, i, j)
            if delta >= 0 or rng.random() < math.exp(delta / temp):
                o[i], o[j] = o[j], o[i]
                merit += delta
                if merit > best:
                    best, best_o = merit, o.copy()
        temp *= cool
        if progress.report(it, -best, best_o):
            break
    return best_o


def _bea(X: np.ndarray, seed: int) -> np.ndarray:
    """Bond energy algorithm (McCormick, Schweitzer & White 1972) for the rows of a non-negative
    data matrix: rows are inserted one by one, in random order, where they add the most bond
    energy x_i . x_j with their new neighbours."""
    if (X < 0).any():
        raise ValueError("method='BEA' needs a non-negative data matrix")
    n = X.shape[0]
    rng = np.random.default_rng(seed)
    B = X @ X.T
    rest = list(rng.permutation(n))
    order = [rest.pop()]
    for r in rest:
        o = np.asarray(order)
        gain_mid = B[r, o[:-1]] + B[r, o[1:]] - B[o[:-1], o[1:]]
        cands = np.r_[B[r, o[0]], gain_mid, B[r, o[-1]]]
        at = int(np.argmax(cands))
        order.insert(at, r)
    return np.asarray(order, dtype=np.intp)


def _order_one(X, *, method, metric, linkage, time_limit, seed, n_jobs, progress):
    n = X.shape[0]
    if n <= 1:
        return np.arange(n, dtype=np.intp)
    if method in _DATA_ONLY and metric == "precomputed":
        raise ValueError(f"method={method!r} orders a data matrix, not a dissimilarity matrix")
    if method == "PCA":
        return _pca_rows(X)
    if method == "BEA":
        return _bea(X, seed)
    if method == "TSP_means":
        from vastml.reorder._tspmeans import TSPMeans

        if metric != "euclidean":
            raise ValueError("method='TSP_means' works with metric='euclidean'")
        # the fit reports after every sweep and after the polish through seriate's progress
        cb = (lambda it, length, order: progress.report(it, length, order)) if progress.active else None
        return TSPMeans(random_state=seed, n_jobs=n_jobs, callbacks=cb).fit(X).order_.astype(np.intp)
    prob = _Problem(X, metric)
    if method == "TSP":
        order, _ = _tsp(prob, time_limit=time_limit, seed=seed, n_jobs=n_jobs, progress=progress)
        return order.astype(np.intp)
    if method in ("OLO", "GW", "HC"):
        Z = _linkage(prob, linkage)
        if method == "HC":
            from scipy.cluster.hierarchy import leaves_list

            return leaves_list(Z).astype(np.intp)
        if method == "GW":
            return _gw(prob, Z)
        return _olo(prob, Z, n_jobs).astype(np.intp)
    if method == "Spectral":
        return _spectral(prob)
    if method == "MDS":
        return _mds(prob)
    if method == "ARSA":
        return _arsa(prob, time_limit=time_limit, seed=seed, progress=progress)
    # exact gradient orders
    from vastml.reorder._orders import gradient_order

    if n > 64:
        raise ValueError(f"method={method!r} is exact (branch and bound) and takes at most 64 objects, got {n}")
    order, _ = gradient_order(prob.dense(), weighted=method == "BBWRCG", n_jobs=n_jobs)
    return order


def seriate(
    X: ArrayLike,
    *,
    method: str = "TSP",
    metric: str = "euclidean",
    axis: int | str = 0,
    linkage: str = "average",
    time_limit: float | None = None,
    random_state: RandomStateLike = None,
    n_jobs: int | None = None,
    callbacks: Callbacks = None,
    callback_every: int = 1,
    verbose: bool | int = False,
) -> IntArray | tuple[IntArray, IntArray]:
    """Order the rows (and/or columns) of a data matrix, or the objects of a dissimilarity
    matrix, so that similar ones are near each other.

    Parameters
    ----------
    X : array of shape (n, d), or (n, n) with ``metric="precomputed"``
        Numeric data (rows are objects), or a symmetric non-negative dissimilarity matrix.
    method : str
        "TSP" (default): the shortest open path found by 2-opt + Or-opt iterated local search
        on neighbour lists within ``time_limit``, in Rust, parallel (two runs). "OLO": optimal leaf
        ordering of a hierarchical clustering with ``linkage`` (in Rust; equal to SciPy's
        ``optimal_leaf_ordering``). "GW": Gruvaeus & Wainer's flips of that clustering. "HC":
        its leaves as SciPy draws them. "Spectral": the Fiedler vector of the Laplacian of the
        similarity 1 / (1 + d). "MDS": the first classical-MDS coordinate (for Euclidean data
        the first principal component). "ARSA": simulated annealing for the linear seriation
        merit Σ d_ij |i - j| (O(n) per move, n^2 memory). "BBURCG" / "BBWRCG": the exact
        order maximising the unweighted / weighted anti-Robinson gradient (at most 64 objects;
        exponential). Data matrices only: "BEA" (bond energy insertion, non-negative data),
        "PCA" (scores on the first principal component), "TSP_means" (millions of rows, see
        :class:`TSPMeans`).
    metric : str
        "euclidean" (no n x n matrix for TSP, OLO, MDS, PCA, TSP_means), any metric of
        ``scipy.spatial.distance.pdist``, or "precomputed".
    axis : 0, 1 or "both"
        Order the rows (0), the columns (1, i.e. the rows of ``X.T``) or both (a pair of orders).
        Must be 0 with ``metric="precomputed"``.
    linkage : str
        SciPy linkage method for "OLO", "GW" and "HC".
    time_limit : float or None
        Seconds for the search of "TSP" (default 0.1 + n / 2,500, at most 5) and "ARSA" (five
        times that). The other methods run to completion.
    random_state : None, int or numpy Generator
        Seed of the TSP kicks, ARSA, BEA and TSP-means. With a time limit the TSP result also
        depends on the machine's speed.
    n_jobs : int or None
        Threads (None = all cores).
    callbacks, callback_every, verbose
        Progress protocol of :mod:`vastml._progress`: "TSP" reports ten times from one search
        (objective = length of the best path so far, state = that order; once for up to 9
        objects, solved exactly), "TSP_means" after every sweep and after the polish
        (objective = path length, state = the order so far, see :class:`TSPMeans`), "ARSA" once
        per temperature (objective = minus the merit); a callback returning True stops with the
        best order so far. The other methods report once when done.

    Returns
    -------
    order : ndarray of int, or (row_order, col_order) with ``axis="both"``.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.reorder import seriate, criterion
    >>> rng = np.random.default_rng(0)
    >>> t = rng.permutation(50) / 50.0
    >>> X = np.c_[np.cos(3 * t), np.sin(3 * t)]
    >>> o = seriate(X, random_state=0)
    >>> bool(np.all(np.diff(t[o]) > 0) or np.all(np.diff(t[o]) < 0))
    True
    >>> from scipy.spatial.distance import cdist
    >>> o2 = seriate(cdist(X, X), method="OLO", metric="precomputed")
    >>> round(criterion(cdist(X, X), o2), 6) >= round(criterion(cdist(X, X), o), 6)
    True
    """
    choice(method, "method", METHODS)
    if not isinstance(metric, str):
        raise TypeError(f"`metric` must be a string, got {metric!r}")
    if axis not in (0, 1, "both"):
        raise ValueError(f"`axis` must be 0, 1 or 'both', got {axis!r}")
    choice(linkage, "linkage", _LINKAGES)
    if time_limit is not None:
        if isinstance(time_limit, bool) or not isinstance(time_limit, numbers.Real):
            raise TypeError(f"`time_limit` must be a number of seconds, got {time_limit!r}")
        if not time_limit > 0 or not math.isfinite(time_limit):
            raise ValueError(f"`time_limit` must be positive and finite, got {time_limit}")
    A = np.asarray(X)
    if A.dtype == object or not (np.issubdtype(A.dtype, np.number) or A.dtype == bool):
        raise TypeError(f"`X` must be a numeric array, got dtype {A.dtype}")
    A = np.ascontiguousarray(A, dtype=np.float64)
    if A.ndim != 2:
        raise ValueError(f"`X` must be 2-D, got shape {A.shape}")
    if not np.isfinite(A).all():
        raise ValueError("`X` contains NaN or infinite values")
    if metric == "precomputed":
        if axis != 0:
            raise ValueError("`axis` must be 0 with metric='precomputed'")
        if A.shape[0] != A.shape[1]:
            raise ValueError(f"a precomputed `X` must be square, got shape {A.shape}")
        if (A < 0).any() or not np.allclose(A, A.T, rtol=1e-12, atol=1e-12):
            raise ValueError("a precomputed `X` must be symmetric and non-negative")
        A = np.ascontiguousarray((A + A.T) / 2)
    seed = seed_of(random_state)
    jobs = n_jobs_arg(n_jobs)
    axes = (0, 1) if axis == "both" else (axis,)
    out = []
    with Progress(callbacks, callback_every=callback_every, verbose=verbose, desc=f"seriate {method}") as progress:
        for ax in axes:
            M = A if ax == 0 else np.ascontiguousarray(A.T)
            o = _order_one(M, method=method, metric=metric, linkage=linkage, time_limit=time_limit,
                           seed=seed, n_jobs=jobs, progress=progress)
            out.append(np.asarray(o, dtype=np.intp))
        if method not in ("TSP", "ARSA", "TSP_means"):
            progress.report(1, math.nan, out[0] if len(out) == 1 else tuple(out))
    return (out[0], out[1]) if axis == "both" else out[0]
