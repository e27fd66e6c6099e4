"""Sharded Gauss transform and kernel density: targets split across workers, sources scattered."""

from __future__ import annotations

import math
import threading
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, validate_data

from vastml import _core
from vastml._validation import (
    as_points,
    as_weights,
    choice,
    n_jobs_arg,
    open_unit_float,
    positive_float,
    validate_rows,
)
from vastml.distributed._partitions import _dask, check_n_partitions, is_dask_array
from vastml.kernels import METHODS, GaussTransform


if TYPE_CHECKING:
    from typing import Self

    from vastml._typing import ArrayLike


def active_client(client: Any = None) -> Any:
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


#: Sources sampled on the client to choose the split plan's cluster centres.
SPLIT_SAMPLE = 20_000
#: ``plan="auto"`` splits the planning over the workers from this many sources on.
SPLIT_MIN_SOURCES = 100_000
PLANS = ("auto", "local", "split")


class _SplitPlan:
    """A split IFGT: centres, combined radii and summed coefficients, shipped once per
    worker; the compiled plan is rebuilt (cheaply: no sources) on first use in a process."""

    def __init__(self, centers, radii, coefficients, bandwidth, epsilon, method, n_weights, one_d, n_jobs):
        self.centers = centers
        self.radii = radii
        self.coefficients = coefficients
        self.bandwidth = bandwidth
        self.epsilon = epsilon
        self.method = method
        self.n_weights = n_weights
        self.one_d = one_d
        self.n_jobs = n_jobs
        self._core = None
        self._lock = threading.Lock()

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_core"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.centers = _aligned(self.centers)
        self.radii = _aligned(self.radii)
        self.coefficients = _aligned(self.coefficients)
        self._lock = threading.Lock()

    def compiled(self):
        with self._lock:
            if self._core is None:
                self._core = _split_core(self.centers, self.radii, self.bandwidth, self.epsilon, self.method)
        return self._core

    def __call__(self, targets):
        y = targets[:, None] if targets.ndim == 1 else targets
        g = self.compiled().evaluate(y, self.coefficients, self.n_weights, self.n_jobs)
        return g[:, 0] if self.one_d else g


def _split_core(centers, radii, bandwidth, epsilon, method):
    return _core.SplitIfgt(_aligned(centers), _aligned(radii), bandwidth, epsilon, method)


def _part_radii(part, centers, n_jobs):
    return _core.split_ifgt_radii(_aligned(part[0]), _aligned(centers), n_jobs)


def _part_coefficients(part, centers, radii, bandwidth, epsilon, method, n_jobs):
    plan = _split_core(centers, radii, bandwidth, epsilon, method)
    return plan.coefficients(_aligned(part[0]), _aligned(part[1]), n_jobs)


def _split_parts(x, q, n_parts):
    bounds = np.linspace(0, x.shape[0], n_parts + 1).astype(int)
    return [(x[a:b], q[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]


def _plan_split(x, q, one_d, bandwidth, epsilon, method, n_targets, plan, client, n_parts, n_jobs):
    """The split plan, or None when the planning should stay local (see ``plan=``)."""
    n = x.shape[0]
    if plan == "local" or (plan == "auto" and (n < SPLIT_MIN_SOURCES or n_parts < 2)):
        return None
    if method in ("direct", "direct-tree"):
        if plan == "split":
            raise ValueError(f"plan='split' needs an IFGT method ('auto', 'ifgt', 'ifgt-tree'), got {method!r}")
        return None
    dask, _ = _dask()
    rng = np.random.default_rng(0)
    sample = x if n <= SPLIT_SAMPLE else x[np.sort(rng.choice(n, SPLIT_SAMPLE, replace=False))]
    centers = _core.split_ifgt_centers(
        np.ascontiguousarray(sample), bandwidth, epsilon, (n, n_targets, q.shape[1]), method
    )
    if centers is None:
        return None
    flat_or_tree = method
    if method == "auto":
        probe = _core.SplitIfgt(centers, _core.split_ifgt_radii(np.ascontiguousarray(sample), centers, 1),
                                bandwidth, epsilon, "auto", np.ascontiguousarray(sample[:256]))
        flat_or_tree = probe.info()["method"]
    parts = _split_parts(x, q, max(1, min(n_parts, n)))
    if client is not None:
        parts = client.scatter(parts)
    part_radii = [dask.delayed(_part_radii, pure=True)(p, centers, n_jobs) for p in parts]
    radii = np.max(np.stack(_compute(part_radii, client)), axis=0)
    part_coeffs = [
        dask.delayed(_part_coefficients, pure=True)(p, centers, radii, bandwidth, epsilon, flat_or_tree, n_jobs)
        for p in parts
    ]
    coefficients = np.sum(np.stack(_compute(part_coeffs, client)), axis=0)
    return _SplitPlan(centers, radii, coefficients, bandwidth, epsilon, flat_or_tree, q.shape[1], one_d, n_jobs)


def _compute(tasks, client):
    if client is not None:
        return client.gather(client.compute(tasks))
    dask, _ = _dask()
    return list(dask.compute(*tasks))


def _n_rows(a):
    return a.shape[0] if is_dask_array(a) else np.asarray(a).shape[0]


def _n_parts(client, n_partitions):
    if n_partitions is not None:
        return n_partitions
    return len(client.scheduler_info()["workers"]) if client is not None else 1


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
    sources: ArrayLike,
    targets: Any,
    weights: ArrayLike | None = None,
    bandwidth: float | None = None,
    epsilon: float = 1e-6,
    method: str = "auto",
    *,
    n_partitions: int | None = None,
    client: Any = None,
    n_jobs: int | None = None,
    plan: str = "auto",
) -> Any:
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
    n_jobs : int or None, default=None
        Threads inside every Dask task. None uses all the cores of the machine the task runs
        on: right when each machine runs one single-threaded Dask worker; with several worker
        threads or processes per machine (Dask's default ``LocalCluster``), pass 1 so that
        the workers, not the threads, are the parallelism and the cores are not oversubscribed.
    plan : {"auto", "local", "split"}, default="auto"
        How the IFGT is planned. ``"local"``: every worker plans on all the sources, exactly
        as on one machine (results equal the local ones to rounding). ``"split"``: the
        sources are split over the workers too; cluster centres are chosen once from a
        sample, each worker measures the cluster radii and computes the expansion
        coefficients of its own part, and the summed coefficients are shipped for the
        evaluation -- the planning is then divided by the number of workers instead of
        repeated on each, with the same epsilon guarantee (the truncation uses the true
        radii over all the sources). ``"auto"``: split from 100,000 sources on when there
        is more than one worker and the IFGT is the clear choice, else local.

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
        sources = sources.compute()  # type: ignore[union-attr]
    x = as_points(sources, "sources")
    if not is_dask_array(targets):
        as_points(targets, "targets", dim=x.shape[1])
    elif targets.ndim not in (1, 2) or (x.shape[1] != (1 if targets.ndim == 1 else targets.shape[1])):
        raise ValueError(f"`targets` must have {x.shape[1]} features, got shape {targets.shape}")
    q, one_d = as_weights(weights, x.shape[0])
    h = positive_float(bandwidth, "bandwidth")
    eps = open_unit_float(epsilon, "epsilon")
    method = choice(method, "method", METHODS)
    how = choice(plan, "plan", PLANS)
    n_jobs = n_jobs_arg(n_jobs)
    n_partitions = check_n_partitions(n_partitions)
    client = active_client(client)
    shipped = _plan_split(
        x, q, one_d, h, eps, method, _n_rows(targets), how, client, _n_parts(client, n_partitions), n_jobs
    ) or _Plan(x, q[:, 0] if one_d else q, h, eps, method, n_jobs)
    return _map_targets(_ship(shipped, client), targets, None if one_d else q.shape[1], client, n_partitions)


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
    n_partitions, client, n_jobs, plan
        As in :func:`sharded_gauss_transform`; with ``plan="split"`` (the default ``"auto"``
        from 100,000 points on) ``fit`` also splits the points over the workers, plans the
        IFGT there and ships only the summed expansion coefficients.

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

    def __init__(
        self,
        *,
        bandwidth: float = 1.0,
        epsilon: float = 1e-6,
        method: str = "auto",
        n_partitions: int | None = None,
        client: Any = None,
        n_jobs: int | None = None,
        plan: str = "auto",
    ) -> None:
        self.bandwidth = bandwidth
        self.plan = plan
        self.epsilon = epsilon
        self.method = method
        self.n_partitions = n_partitions
        self.client = client
        self.n_jobs = n_jobs

    def fit(self, X: Any, y: object = None, sample_weight: ArrayLike | None = None) -> Self:
        """Store ``X`` (NumPy or a Dask array small enough for one worker) and ship it.

        Returns
        -------
        self
        """
        if is_dask_array(X):
            X = X.compute()
        X = validate_data(self, X, dtype=np.float64, order="C", ensure_min_samples=1)
        X = as_points(X, "X")
        sigma = positive_float(self.bandwidth, "bandwidth")
        if sample_weight is None:
            w = np.full(X.shape[0], 1.0 / X.shape[0])
        else:
            w = np.asarray(sample_weight, dtype=np.float64)
            if w.shape != (X.shape[0],):
                raise ValueError(f"`sample_weight` must have shape ({X.shape[0]},), got {w.shape}")
            if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
                raise ValueError("`sample_weight` must be finite, non-negative and not all zero")
            w = w / w.sum()
        h, eps = math.sqrt(2.0) * sigma, open_unit_float(self.epsilon, "epsilon")
        method, n_jobs = choice(self.method, "method", METHODS), n_jobs_arg(self.n_jobs)
        how = choice(self.plan, "plan", PLANS)
        n_partitions = check_n_partitions(self.n_partitions)
        self._client = active_client(self.client)
        # the targets are not known yet: plan for as many as there are sources
        plan = _plan_split(
            X, w[:, None], True, h, eps, method, X.shape[0], how, self._client,
            _n_parts(self._client, n_partitions), n_jobs,
        ) or _Plan(X, w, h, eps, method, n_jobs)
        self._shipped = _ship(plan, self._client)
        self._log_norm = 0.5 * X.shape[1] * math.log(2.0 * math.pi * sigma * sigma)
        self.n_features_in_ = X.shape[1]
        self.n_samples_ = X.shape[0]
        return self

    def density(self, X: Any) -> Any:
        """The density at every row of ``X`` (lazy for a Dask array)."""
        check_is_fitted(self, "n_features_in_")
        if not is_dask_array(X):
            X = validate_rows(self, X, reset=False)
        g = _map_targets(self._shipped, X, None, self._client, self.n_partitions)
        return g * math.exp(-self._log_norm)

    def score_samples(self, X: Any) -> Any:
        """Log density at every row of ``X`` (lazy for a Dask array)."""
        g = self.density(X)
        if is_dask_array(g):
            _, da = _dask()
            return da.log(g)
        with np.errstate(divide="ignore"):
            return np.log(g)

    def score(self, X: Any, y: object = None) -> float:
        """Total log density of ``X``."""
        s = self.score_samples(X)
        return float(s.sum().compute() if is_dask_array(s) else s.sum())
