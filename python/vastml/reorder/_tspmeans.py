"""TSP-means (thesis Algorithms 2-3) and the plain point TSP it uses, as estimators."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from sklearn.base import BaseEstimator

from vastml import _core
from vastml._progress import Progress
from vastml._validation import as_points, check_bool, check_int, choice, n_jobs_arg
from vastml.reorder._random import seed_of

if TYPE_CHECKING:
    from vastml._typing import ArrayLike, IntArray
    from vastml.reorder._random import Callbacks, RandomStateLike


class TSPMeans(BaseEstimator):
    """Order the rows of a data set for a heatmap by TSP-means: recursive 2-means on 100
    sampled points per node, the 2^l-ary tree that keeps every l-th level, and sweeps that
    replace each node of a list by its children in the order of a local open-path TSP between
    the node's left and right neighbours. O(n log n); the tree is built in parallel.

    Parameters
    ----------
    levels : int or None, default=None
        Subtree depth l (1..16); None = ceil(0.5 log2 n), the thesis's default. Local TSPs have
        at most 2^l + 2 cities; nodes of at most 2^l examples are not split.
    sample : int, default=100
        Points sampled per node for its 2-means.
    polish_window : int, default=1000
        After the sweeps, 2-opt and Or-opt in windows of this many rows (0 = the thesis's plain
        TSP-means). Shortens L by several per cent at little cost.
    parallel_sweep : bool, default=False
        Solve the local TSPs of a sweep in parallel, each seeing its neighbours as they were
        before the sweep (a deviation from the thesis, whose left neighbour is the last child
        placed; off by default).
    n_neighbors : int, default=8
        Neighbour-list length of the local 2-opt / Or-opt.
    local_kicks : int, default=0
        Kicks per city of iterated local search on each local tour after 2-opt / Or-opt (the
        solver of :func:`seriate`'s "TSP"; deterministic); 0 (default) = plain 2-opt / Or-opt.
        On 100,000 x 50 Gaussian-mixture rows, 2 kicks per city shortened L by 0.17% for 13x
        the sweep time, so it is off by default.
    n_jobs : int or None, default=None
        Threads (None = all cores).
    random_state : None, int, RandomState or Generator, default=None
        Seed of the sampling.
    callbacks : callable, list of callables or None, default=None
        Called as ``callback(iteration, L, order)`` after every sweep (iteration k = sweep k)
        and once more after the polish, with ``order`` the rows in the order so far (each
        cluster not yet expanded in tree order) and ``L`` its path length. Returning True
        stops the fit with that order (no polish) and sets ``stopped_early_``.
    callback_every : int, default=1
        Call the callbacks every this many iterations.
    verbose : bool or int, default=False
        Draw a progress bar (one step per sweep).

    Attributes
    ----------
    order_ : ndarray of int64 of shape (n_samples,)
        The row order.
    levels_ : int
        The subtree depth used.
    n_kmeans_, n_tsp_, n_sweeps_ : int
        Numbers of 2-means runs, local TSPs and sweeps.
    n_iter_ : int
        Iterations reported (the sweeps, plus one for the polish).
    path_length_ : float
        Open path length L of ``order_``.
    stage_seconds_ : dict
        Wall-clock seconds of the stages "tree" (sampling, 2-means, partition), "sweeps" (all
        local TSPs) and "polish".
    stopped_early_ : bool
        A callback stopped the fit.
    n_features_in_ : int

    Notes
    -----
    An order of the rows it was fitted on: there is no ``transform`` of new data (which
    rows would a new row go between?), so the scikit-learn checks that fit on one set and
    transform another do not apply.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.reorder import TSPMeans
    >>> x = np.r_[np.zeros((50, 2)), np.full((50, 2), 10.0)] + np.random.default_rng(0).random((100, 2))
    >>> o = TSPMeans(random_state=0).fit(x[::-1]).order_
    >>> int((np.diff(x[::-1][o, 0]) > 5).sum() + (np.diff(x[::-1][o, 0]) < -5).sum())
    1
    """

    def __init__(
        self,
        *,
        levels: int | None = None,
        sample: int = 100,
        polish_window: int = 1000,
        parallel_sweep: bool = False,
        n_neighbors: int = 8,
        local_kicks: int = 0,
        n_jobs: int | None = None,
        random_state: RandomStateLike = None,
        callbacks: Callbacks = None,
        callback_every: int = 1,
        verbose: bool | int = False,
    ) -> None:
        self.levels = levels
        self.sample = sample
        self.polish_window = polish_window
        self.parallel_sweep = parallel_sweep
        self.n_neighbors = n_neighbors
        self.local_kicks = local_kicks
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.callbacks = callbacks
        self.callback_every = callback_every
        self.verbose = verbose

    def fit(self, X: ArrayLike, y: object = None) -> TSPMeans:
        """Order the rows of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self
        """
        x = as_points(X, "X", allow_1d=False)
        levels = None if self.levels is None else check_int(self.levels, "levels", low=1, high=16)
        sample = check_int(self.sample, "sample", low=2)
        window = check_int(self.polish_window, "polish_window", low=0)
        if 0 < window < 4:
            raise ValueError(f"`polish_window` must be 0 (off) or at least 4, got {window}")
        nb = check_int(self.n_neighbors, "n_neighbors", low=1)
        kicks = check_int(self.local_kicks, "local_kicks", low=0)
        parallel = check_bool(self.parallel_sweep, "parallel_sweep")
        seed = seed_of(self.random_state)
        with Progress(self.callbacks, callback_every=self.callback_every, verbose=self.verbose,
                      desc="TSPMeans") as progress:
            params = {"levels": levels, "sample": sample, "seed": seed, "parallel_sweep": parallel}
            params.update(neighbours=nb, exact_max=10, polish_window=window, local_kicks=kicks)
            order, counts, secs, length, stopped = _core.tsp_means_order(
                x, params, n_jobs=n_jobs_arg(self.n_jobs),
                progress=progress.report if progress.active else None,
            )
        self.order_ = order
        self.levels_, self.n_kmeans_, self.n_tsp_, self.n_sweeps_ = counts
        self.n_iter_ = self.n_sweeps_ + int(not stopped and window >= 4 and x.shape[0] >= 4)
        self.stopped_early_ = bool(stopped)
        self.n_features_in_ = x.shape[1]
        self.stage_seconds_ = dict(zip(("tree", "sweeps", "polish"), secs))
        # L in Rust: no (n, d) temporaries, so a million rows cost no extra memory
        self.path_length_ = float(length)
        return self

    def fit_transform(self, X: ArrayLike, y: object = None) -> np.ndarray:
        """Fit and return ``X`` with its rows in ``order_``."""
        self.fit(X)
        return np.asarray(X)[self.order_]


def tsp_path(
    X: ArrayLike,
    *,
    start: int | None = None,
    end: int | None = None,
    method: str = "heuristic",
    init: str = "greedy",
    n_neighbors: int = 8,
    or_opt: bool = True,
    n_jobs: int | None = None,
) -> IntArray:
    """A short open path through the rows of ``X`` (Euclidean distances).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    start, end : int or None, default=None
        Rows the path must begin / end at (free when None).
    method : {"heuristic", "exact"}, default="heuristic"
        ``"exact"``: Held-Karp (at most 16 free rows), the oracle; ``"heuristic"``: ``init``
        then 2-opt and Or-opt on k-nearest-neighbour lists.
    init : {"greedy", "space_filling", "nearest_neighbour"}, default="greedy"
        Initial path of the heuristic.
    n_neighbors : int, default=8
        Neighbour-list length of 2-opt / Or-opt.
    or_opt : bool, default=True
        Run Or-opt (segment moves) after 2-opt.
    n_jobs : int or None, default=None
        Threads (None = all cores).

    Returns
    -------
    order : ndarray of int64 of shape (n_samples,)

    Examples
    --------
    >>> from vastml.reorder import tsp_path
    >>> tsp_path([[2.0], [0.0], [4.0], [1.0], [3.0]], method="exact", start=1).tolist()
    [1, 3, 0, 4, 2]
    >>> tsp_path([[2.0], [0.0], [4.0], [1.0], [3.0]], start=2).tolist()
    [2, 4, 0, 3, 1]
    """
    x = as_points(X, "X", scale_free=True)
    # Path lengths only compare, so a positive scale changes no path: bring coordinates whose
    # squared distances would overflow (or underflow to 0) to unit size first.
    span = float(np.abs(x).max()) if x.size else 0.0
    if span > 1e100 or 0 < span < 1e-100:
        x = x / span
    n = x.shape[0]
    choice(method, "method", ("exact", "heuristic"))
    choice(init, "init", ("greedy", "space_filling", "nearest_neighbour"))
    for name, v in (("start", start), ("end", end)):
        if v is not None:
            check_int(v, name, low=0, high=n - 1)
    if start is not None and start == end and n > 1:
        raise ValueError("`start` and `end` must differ")
    if method == "exact" and n - (start is not None) - (end is not None) > 16:
        raise ValueError("method='exact' takes at most 16 free rows; use method='heuristic'")
    params: dict[str, object] = {"method": method, "init": init}
    params.update(neighbours=check_int(n_neighbors, "n_neighbors", low=1))
    params.update(or_opt=check_bool(or_opt, "or_opt"))
    return _core.tsp_path_order(x, (start, end), params, n_jobs=n_jobs_arg(n_jobs))
