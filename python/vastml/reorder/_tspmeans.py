"""TSP-means (thesis Algorithms 2-3) and the plain point TSP it uses, as estimators."""

from __future__ import annotations

import numbers

import numpy as np

from vastml import _core
from vastml._validation import as_points, choice, n_jobs_arg
from vastml.reorder._random import seed_of


def _int(v, name: str, lo: int, hi: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"`{name}` must be an integer, got {v!r}")
    if v < lo or (hi is not None and v > hi):
        rng = f">= {lo}" if hi is None else f"in {lo}..{hi}"
        raise ValueError(f"`{name}` must be {rng}, got {v}")
    return int(v)


class TSPMeans:
    """Order the rows of a data set for a heatmap by TSP-means: recursive 2-means on 100
    sampled points per node, the 2^l-ary tree that keeps every l-th level, and sweeps that
    replace each node of a list by its children in the order of a local open-path TSP between
    the node's left and right neighbours. O(n log n); the tree is built in parallel.

    Parameters
    ----------
    levels : int or None
        Subtree depth l (1..16); None = ceil(0.5 log2 n), the thesis's default. Local TSPs have
        at most 2^l + 2 cities; nodes of at most 2^l examples are not split.
    sample : int
        Points sampled per node for its 2-means.
    polish_window : int
        After the sweeps, 2-opt and Or-opt in windows of this many rows (0 = the thesis's plain
        TSP-means). Shortens L by several per cent at little cost.
    parallel_sweep : bool
        Solve the local TSPs of a sweep in parallel, each seeing its neighbours as they were
        before the sweep (a deviation from the thesis, whose left neighbour is the last child
        placed; off by default).
    n_neighbors : int
        Neighbour-list length of the local 2-opt / Or-opt.
    local_kicks : int
        Kicks per city of iterated local search on each local tour after 2-opt / Or-opt (the
        solver of :func:`seriate`'s "TSP"; deterministic); 0 (default) = plain 2-opt / Or-opt.
        On 100,000 x 50 Gaussian-mixture rows, 2 kicks per city shortened L by 0.17% for 13x
        the sweep time, so it is off by default.
    n_jobs : int or None
        Threads (None = all cores).
    random_state : None, int or numpy Generator
        Seed of the sampling.

    Attributes
    ----------
    order_ : ndarray of int64, the row order.
    levels_ : int; n_kmeans_, n_tsp_, n_sweeps_ : counts; path_length_ : float (L of order_).
    stage_seconds_ : dict, wall-clock seconds of the stages "tree" (sampling, 2-means,
        partition), "sweeps" (all local TSPs) and "polish".

    >>> import numpy as np
    >>> x = np.r_[np.zeros((50, 2)), np.full((50, 2), 10.0)] + np.random.default_rng(0).random((100, 2))
    >>> o = TSPMeans(random_state=0).fit(x[::-1]).order_
    >>> int((np.diff(x[::-1][o, 0]) > 5).sum() + (np.diff(x[::-1][o, 0]) < -5).sum())
    1
    """

    def __init__(
        self,
        levels=None,
        *,
        sample=100,
        polish_window=1000,
        parallel_sweep=False,
        n_neighbors=8,
        local_kicks=0,
        n_jobs=None,
        random_state=None,
    ):
        self.levels = levels
        self.sample = sample
        self.polish_window = polish_window
        self.parallel_sweep = parallel_sweep
        self.n_neighbors = n_neighbors
        self.local_kicks = local_kicks
        self.n_jobs = n_jobs
        self.random_state = random_state

    def get_params(self, deep=True):
        return {
            k: getattr(self, k)
            for k in (
                "levels",
                "sample",
                "polish_window",
                "parallel_sweep",
                "n_neighbors",
                "local_kicks",
                "n_jobs",
                "random_state",
            )
        }

    def set_params(self, **params):
        for k, v in params.items():
            if k not in self.get_params():
                raise ValueError(f"unknown parameter {k!r}")
            setattr(self, k, v)
        return self

    def fit(self, X, y=None):
        x = as_points(X, "X")
        n = x.shape[0]
        levels = None if self.levels is None else _int(self.levels, "levels", 1, 16)
        sample = _int(self.sample, "sample", 2)
        window = _int(self.polish_window, "polish_window", 0)
        if 0 < window < 4:
            raise ValueError(f"`polish_window` must be 0 (off) or at least 4, got {window}")
        nb = _int(self.n_neighbors, "n_neighbors", 1)
        kicks = _int(self.local_kicks, "local_kicks", 0)
        order, lv, nk, nt, ns, secs, length = _core.tsp_means_order(
            x,
            levels,
            sample,
            seed_of(self.random_state),
            bool(self.parallel_sweep),
            nb,
            10,
            window,
            n_jobs=n_jobs_arg(self.n_jobs),
            local_kicks=kicks,
        )
        self.order_ = order
        self.levels_, self.n_kmeans_, self.n_tsp_, self.n_sweeps_ = lv, nk, nt, ns
        self.n_features_in_ = x.shape[1]
        self.stage_seconds_ = dict(zip(("tree", "sweeps", "polish"), secs))
        # L in Rust: no (n, d) temporaries, so a million rows cost no extra memory
        self.path_length_ = float(length)
        return self

    def fit_transform(self, X, y=None):
        """Fit and return ``X`` with its rows in ``order_``."""
        self.fit(X)
        return np.asarray(X)[self.order_]


def tsp_path(X, *, start=None, end=None, method="heuristic", init="greedy", n_neighbors=8,
             or_opt=True, n_jobs=None) -> np.ndarray:
    """A short open path through the rows of ``X`` (Euclidean), from row ``start`` to row
    ``end`` when given. ``method="exact"``: Held-Karp (at most 16 free rows), the oracle;
    ``"heuristic"``: ``init`` ("greedy", "space_filling" or "nearest_neighbour") then 2-opt and
    Or-opt on k-nearest-neighbour lists.

    >>> tsp_path([[2.0], [0.0], [4.0], [1.0], [3.0]], method="exact").tolist() in ([1, 3, 0, 4, 2], [2, 4, 0, 3, 1])
    True
    """
    x = as_points(X, "X")
    # Path lengths only compare, so a positive scale changes no path: bring coordinates whose
    # squared distances would overflow (or underflow to 0) to unit size first.
    span = float(np.abs(x).max())
    if span > 1e100 or 0 < span < 1e-100:
        x = x / span
    n = x.shape[0]
    choice(method, "method", ("exact", "heuristic"))
    choice(init, "init", ("greedy", "space_filling", "nearest_neighbour"))
    for name, v in (("start", start), ("end", end)):
        if v is not None:
            _int(v, name, 0, n - 1)
    if start is not None and start == end and n > 1:
        raise ValueError("`start` and `end` must differ")
    if method == "exact" and n - (start is not None) - (end is not None) > 16:
        raise ValueError("method='exact' takes at most 16 free rows; use method='heuristic'")
    return _core.tsp_path_order(
        x, start, end, method, init, _int(n_neighbors, "n_neighbors", 1), bool(or_opt),
        n_jobs=n_jobs_arg(n_jobs),
    )
