"""Sharded Gauss transform and kernel density: targets split across workers, sources scattered."""

from __future__ import annotations

import math
import threading

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from vastml._validation import as_points, as_weights, choice, n_jobs_arg, open_unit_float, positive_float
from vastml.distributed._partitions import _dask, check_n_partitions, is_dask_array
from vastml.kernels import METHODS, GaussTransform


def active_client(client=None):
    """``client``, else the current ``distributed`` client, else None (Dask's local scheduler)."""
    if client is not None:
        return client
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


class _Plan:
    """Sources, weights and parameters, shipped once per worker; the Gauss transform is
    planned on first use in each process and kept for every later block there."""

    def __init__(self, sources, weights, bandwidth, epsilon, method, n_jobs):
        self.sources = sources
        self.weights = weights
        self.bandwidth = bandwidth
        self.epsilon = epsilon
        self.method = method
        self.n_jobs = n_jobs
        self._gt = None
        self._lock = threading.Lock()

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_gt"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.sources = _aligned(self.sources)
        self.weights = _aligned(self.weights)
        self._lock = threading.Lock()

    def transform(self):
        with self._lock:
            if self._gt is None:
                self._gt = GaussTransform(
                    self.sources, self.bandwidth, self.epsilon, self.method, self.n_jobs
                )
        return self._gt

    def __call__(self, targets):
        return self.transform()(targets, self.weights, self.n_jobs)


def _aligned(a):
    """An aligned, writeable float64 copy of an array received from another process (if needed)."""
    return np.require(a, dtype=np.float64, requirements=["C", "A", "W"])


def _evaluate(plan, block):
    return plan(_aligned(block))


def _ship(plan, client):
    """The plan as a graph input: scattered to every worker (a future) or one delayed key."""
    dask, _ = _dask()
    if client is not None:
        return client.scatter(plan, broadcast=True, hash=False)
    return dask.delayed(plan, pure=True)


def _map_targets(shipped, targets, out_cols, client, n_partitions):
    """Evaluate the plan on every block of targets: a Dask array for Dask targets, else NumPy."""
    dask, da = _dask()
    lazy = is_dask_array(targets)
    if not lazy:
        targets = np.asarray(targets, dtype=np.float64)
        n = targets.shape[0]
        m = n_partitions or (len(client.scheduler_info()["workers"]) if client is not None else 1)
        targets = da.from_array(targets, chunks=(max(1, -(-n // max(m, 1))),) + targets.shape[1:])
    elif n_partitions is not None:
        targets = targets.rechunk({0: -(-targets.shape[0] // n_partitions)})
    if targets.ndim == 2:
        targets = targets.rechunk({1: -1})
    blocks = targets.to_delayed().ravel()
    pieces = []
    for blk, rows in zip(blocks, targets.chunks[0]):
        shape = (rows,) if out_cols is None else (rows, out_cols)
        task = dask.delayed(_evaluate, pure=True)(shipped, blk)
        pieces.append(da.from_delayed(task, shape=shape, dtype=np.float64))
    out = da.concatenate(pieces, axis=0) if pieces else da.zeros((0,), dtype=np.float64)
    if lazy:
        return out
    if client is not None:
        return client.compute(out).result()
    return out.compute()


def sharded_gauss_transform(
    sources,
    targets,
    weights=None,
    bandwidth=None,
    epsilon=1e-6,
    method="auto",
    *,
    n_partitions=None,
    client=None,
    n_jobs=1,
):
    r"""The Gauss transform of :func:`vastml.kernels.gauss_transform` with the targets sharded.

    :math:`G(y_j) = \sum_i q_i \exp(-\lVert y_j - x_i\rVert^2/h^2)` with the same guarantee
    :math:`\max_j |\hat G(y_j) - G(y_j)| \le \epsilon \sum_i |q_i|`. The sources and weights
    are sent once to every worker (``client.scatter(..., broadcast=True)``), each worker
    plans the transform once, and every block of targets is evaluated where it lives. Every
    target is summed over all the sources with the same plan as on one machine, so the
    result equals the local one.

    Parameters
    ----------
    sources, weights, bandwidth, epsilon, method
        As in :func:`vastml.kernels.gauss_transform`; the sources must fit in one worker.
    targets : Dask array or array-like of shape (n_targets, n_features) or (n_targets,)
        A Dask array (possibly larger than any worker's memory) gives a lazy Dask array
        back, chunked like its rows; a local array is split into ``n_partitions`` blocks
        (default: one per worker) and a NumPy array comes back.
    n_partitions : int or None, default=None
        Re-chunk the targets into this many row blocks.
    client : distributed.Client or None, default=None
        None uses the active client if there is one, else Dask's local scheduler.
    n_jobs : int, default=1
        Threads per task (workers are the parallelism).

    Returns
    -------
    G : Dask array or ndarray of shape (n_targets,) or (n_targets, n_weights)

    Examples
    --------
    .. code-block:: python

        import dask.array as da
        from distributed import Client
        from vastml.distributed import sharded_gauss_transform

        client = Client("tcp://scheduler:8786")
        targets = da.random.uniform(size=(10**9, 2), chunks=(10**7, 2))
        G = sharded_gauss_transform(sources, targets, bandwidth=0.05)   # lazy
        da.to_zarr(G, "G.zarr")
    """
    if bandwidth is None:
        raise TypeError("sharded_gauss_transform() needs a `bandwidth`")
    if is_dask_array(sources):
        sources = sources.compute()
    x = as_points(sources, "sources")
    if not is_dask_array(targets):
        as_points(targets, "targets", dim=x.shape[1])
    elif targets.ndim not in (1, 2) or (x.shape[1] != (1 if targets.ndim == 1 else targets.shape[1])):
        raise ValueError(f"`targets` must have {x.shape[1]} features, got shape {targets.shape}")
    q, one_d = as_weights(weights, x.shape[0])
    plan = _Plan(
        x,
        q[:, 0] if one_d else q,
        positive_float(bandwidth, "bandwidth"),
        open_unit_float(epsilon, "epsilon"),
        choice(method, "method", METHODS),
        n_jobs_arg(n_jobs),
    )
    n_partitions = check_n_partitions(n_partitions)
    client = active_client(client)
    return _map_targets(_ship(plan, client), targets, None if one_d else q.shape[1], client, n_partitions)


class ShardedKernelDensity(BaseEstimator):
    r"""Gaussian kernel density with the evaluation points sharded across Dask workers.

    :math:`\hat f(y) = \sum_i w_i \, N(y; x_i, \sigma^2 I)`, weights normalised to sum 1, i.e.
    :math:`G(y) / (2\pi\sigma^2)^{d/2}` for the Gauss transform :math:`G` with
    :math:`h = \sqrt 2\,\sigma` (:func:`sharded_gauss_transform`); the absolute error of the
    density is at most :math:`\epsilon / (2\pi\sigma^2)^{d/2}`. ``fit`` scatters the data
    once; every later ``score_samples`` reuses it.

    Parameters
    ----------
    bandwidth : float, default=1.0
        The kernel's standard deviation :math:`\sigma` (one number).
    epsilon, method
        As in :func:`vastml.kernels.gauss_transform`.
    n_partitions, client, n_jobs
        As in :func:`sharded_gauss_transform`.

    Attributes
    ----------
    n_features_in_ : int
    n_samples_ : int

    Examples
    --------
    .. code-block:: python

        kde = ShardedKernelDensity(bandwidth=0.05, client=client).fit(points)
        log_density = kde.score_samples(dask_grid)      # lazy Dask array
    """

    def __init__(self, bandwidth=1.0, epsilon=1e-6, method="auto", *, n_partitions=None, client=None, n_jobs=1):
        self.bandwidth = bandwidth
        self.epsilon = epsilon
        self.method = method
        self.n_partitions = n_partitions
        self.client = client
        self.n_jobs = n_jobs

    def fit(self, X, y=None, sample_weight=None):
        """Store ``X`` (NumPy or a Dask array small enough for one worker) and ship it.

        Returns
        -------
        self
        """
        if is_dask_array(X):
            X = X.compute()
        X = as_points(X, "X")
        sigma = positive_float(self.bandwidth, "bandwidth")
        if sample_weight is None:
            w = np.full(X.shape[0], 1.0 / X.shape[0])
        else:
            w, one_d = as_weights(sample_weight, X.shape[0], "sample_weight")
            if not one_d or np.any(w < 0) or w.sum() <= 0:
                raise ValueError("`sample_weight` must be 1-D, non-negative, with a positive sum")
            w = w[:, 0] / w[:, 0].sum()
        plan = _Plan(
            X, w, math.sqrt(2.0) * sigma, open_unit_float(self.epsilon, "epsilon"),
            choice(self.method, "method", METHODS), n_jobs_arg(self.n_jobs),
        )
        check_n_partitions(self.n_partitions)
        self._client = active_client(self.client)
        self._shipped = _ship(plan, self._client)
        self._log_norm = 0.5 * X.shape[1] * math.log(2.0 * math.pi * sigma * sigma)
        self.n_features_in_ = X.shape[1]
        self.n_samples_ = X.shape[0]
        return self

    def density(self, X):
        """The density at every row of ``X`` (lazy for a Dask array)."""
        check_is_fitted(self, "n_features_in_")
        if not is_dask_array(X):
            as_points(X, "X", dim=self.n_features_in_)
        g = _map_targets(self._shipped, X, None, self._client, self.n_partitions)
        return g * math.exp(-self._log_norm)

    def score_samples(self, X):
        """Log density at every row of ``X`` (lazy for a Dask array)."""
        g = self.density(X)
        if is_dask_array(g):
            _, da = _dask()
            return da.log(g)
        with np.errstate(divide="ignore"):
            return np.log(g)

    def score(self, X, y=None):
        """Total log density of ``X``."""
        s = self.score_samples(X)
        return float(s.sum().compute() if is_dask_array(s) else s.sum())
