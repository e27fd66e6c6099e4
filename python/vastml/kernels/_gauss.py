"""The fast Gauss transform: Python front of ``vastml-fgt``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from vastml import _core
from vastml._progress import Progress
from vastml._validation import (
    as_points,
    as_weights,
    check_int,
    choice,
    n_jobs_arg,
    open_unit_float,
    positive_float,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from vastml._progress import Callback
    from vastml._typing import ArrayLike, FloatArray

#: Evaluation methods. ``auto`` picks the cheapest of the others from cost estimates;
#: ``fgt`` (the original fast Gauss transform on a grid of boxes) is for points on a line.
METHODS = ("auto", "direct", "direct-tree", "ifgt", "ifgt-tree", "fgt")

#: A bandwidth: one number, one per feature, or a matrix.
Bandwidth = Any


def _bandwidth_map(bandwidth: Bandwidth, dim: int) -> tuple[float, FloatArray | None]:
    """The scalar bandwidth to pass to the core and the linear map of the points, or None.

    A number h is used as is. A vector (h_1..h_d) divides coordinate k by h_k (eq. 2.50) and
    a symmetric positive definite matrix H = L L^T maps x to L^-1 x (eq. 2.51); both then run
    with h = 1. Returns (h, map) with ``map`` a (d, d) matrix applied as ``X @ map`` or None.
    """
    if bandwidth is None:
        raise TypeError("a `bandwidth` is needed")
    if isinstance(bandwidth, bool):
        raise TypeError(f"`bandwidth` must be a number, a vector or a matrix, got {bandwidth!r}")
    if np.isscalar(bandwidth) or (isinstance(bandwidth, np.ndarray) and bandwidth.ndim == 0):
        return positive_float(float(bandwidth) if isinstance(bandwidth, np.ndarray) else bandwidth, "bandwidth"), None
    b = np.asarray(bandwidth)
    if b.dtype.kind not in "iuf":
        raise TypeError(f"`bandwidth` must be real numbers, got dtype {b.dtype}")
    b = b.astype(np.float64)
    if not np.all(np.isfinite(b)):
        raise ValueError("`bandwidth` must be finite")
    if b.shape == (dim,):
        if np.any(b <= 0):
            raise ValueError(f"a per-feature `bandwidth` must be positive, got {b.tolist()}")
        return 1.0, np.diag(1.0 / b)
    if b.shape == (dim, dim):
        if not np.allclose(b, b.T, rtol=1e-12, atol=0):
            raise ValueError("a matrix `bandwidth` must be symmetric")
        try:
            factor = np.linalg.cholesky(b)
        except np.linalg.LinAlgError:
            raise ValueError("a matrix `bandwidth` must be positive definite") from None
        # x -> L^-1 x for row vectors: X @ L^-T
        return 1.0, np.linalg.inv(factor).T
    raise ValueError(
        f"`bandwidth` must be a number, a vector of shape ({dim},) or a matrix of shape "
        f"({dim}, {dim}), got shape {b.shape}"
    )


def _mapped(points: FloatArray, linear_map: FloatArray | None) -> FloatArray:
    return points if linear_map is None else np.ascontiguousarray(points @ linear_map)


def _fixed_parameters(
    method: str, truncation: int | None, n_clusters: int | None
) -> tuple[int | None, int | None]:
    if truncation is not None:
        truncation = check_int(truncation, "truncation", low=1, high=100)
    if n_clusters is not None:
        n_clusters = check_int(n_clusters, "n_clusters", low=1)
    if (truncation is not None or n_clusters is not None) and method not in ("ifgt", "ifgt-tree"):
        raise ValueError(
            f"`truncation` and `n_clusters` fix the IFGT's parameters: they need method='ifgt' "
            f"or 'ifgt-tree', got method={method!r}"
        )
    return truncation, n_clusters


def gauss_transform(
    sources: ArrayLike,
    targets: ArrayLike,
    weights: ArrayLike | None = None,
    bandwidth: Bandwidth = None,
    epsilon: float = 1e-6,
    method: str = "auto",
    n_jobs: int | None = None,
    *,
    truncation: int | None = None,
    n_clusters: int | None = None,
    verbose: bool | int = False,
) -> FloatArray:
    r"""Sum of weighted Gaussians at every target, to a guaranteed accuracy.

    Computes

    .. math:: G(y_j) = \sum_i q_i \exp(-\lVert y_j - x_i \rVert^2 / h^2)

    such that :math:`\max_j |\hat G(y_j) - G(y_j)| / \sum_i |q_i| \le \epsilon` (the error is
    absolute, relative to the total absolute weight -- not relative to each :math:`G(y_j)`).

    Note the kernel uses :math:`h^2`, not :math:`2\sigma^2`: for a Gaussian of standard
    deviation :math:`\sigma` pass ``bandwidth = sqrt(2) * sigma``.

    Parameters
    ----------
    sources : array-like of shape (n_sources, n_features) or (n_sources,)
        The points :math:`x_i`. A 1-D array is read as points on a line.
    targets : array-like of shape (n_targets, n_features) or (n_targets,)
        The points :math:`y_j` where the sum is wanted.
    weights : array-like of shape (n_sources,) or (n_sources, n_weights), default=None
        The weights :math:`q_i` (any sign); several columns are summed in one pass. None
        means all ones.
    bandwidth : float, array-like of shape (n_features,) or (n_features, n_features)
        :math:`h > 0`; or one bandwidth per feature, :math:`\exp(-\sum_k (y_k - x_k)^2 / h_k^2)`
        (thesis eq. 2.50); or a symmetric positive definite matrix :math:`H`,
        :math:`\exp(-(y - x)^\top H^{-1} (y - x))` (eq. 2.51; :math:`H = h^2 I` is the scalar
        case). Both run on the points mapped to unit bandwidth, with the same guarantee.
    epsilon : float, default=1e-6
        Accuracy :math:`\epsilon \in (0, 1)`.
    method : {"auto", "direct", "direct-tree", "ifgt", "ifgt-tree", "fgt"}, default="auto"
        ``direct`` is the exact O(MN) sum; ``direct-tree`` sums only the sources within
        :math:`h\sqrt{\ln(1/\epsilon)}` of each target (kd-tree); ``ifgt`` is the improved fast
        Gauss transform on farthest-point clusters; ``ifgt-tree`` adds a kd-tree over the
        cluster centres. ``fgt`` (points on a line only) is the original fast Gauss
        transform: each box of sources' Hermite expansion is translated into one Taylor
        series per box of targets, so a target evaluates a single polynomial. ``auto``
        estimates each one's cost on these data and runs the cheapest. An explicit IFGT
        method raises ValueError when it cannot meet epsilon, ``fgt`` also in more than one
        dimension.
    n_jobs : int or None, default=None
        Threads: None for all cores, k > 0 for k, -1 for all, -2 for all but one.
    truncation : int, default=None
        Fixed-p mode (thesis section 2.12, for ``ifgt`` / ``ifgt-tree`` only): keep the terms
        of degree below ``truncation`` for every source and target, whatever the error bound
        says. The bound is loose by orders of magnitude, so a small p is often accurate
        enough; **epsilon is then no longer guaranteed** (it still sets the cut-off radius).
    n_clusters : int, default=None
        Fixed number of clusters K for ``ifgt`` / ``ifgt-tree`` (p still follows from epsilon
        unless ``truncation`` is given).
    verbose : bool or int, default=False
        Show the planning stages on a progress bar (see :class:`GaussTransform`; planning
        takes seconds from about a million points on).

    Returns
    -------
    G : ndarray of shape (n_targets,) or (n_targets, n_weights)
        One column per weight column; 1-D when ``weights`` is None or 1-D.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.kernels import gauss_transform
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(size=(2000, 2))
    >>> G = gauss_transform(x, x[:5], bandwidth=0.2, epsilon=1e-8)
    >>> exact = np.exp(-((x[:5, None, :] - x[None]) ** 2).sum(-1) / 0.04).sum(1)
    >>> bool(np.max(np.abs(G - exact)) <= 1e-8 * 2000)
    True

    One bandwidth per feature, and the IFGT with a fixed truncation:

    >>> G2 = gauss_transform(x, x[:5], bandwidth=[0.2, 0.4], epsilon=1e-8)
    >>> exact2 = np.exp(-(((x[:5, None, :] - x[None]) / [0.2, 0.4]) ** 2).sum(-1)).sum(1)
    >>> bool(np.max(np.abs(G2 - exact2)) <= 1e-8 * 2000)
    True
    >>> G3 = gauss_transform(x, x[:5], bandwidth=0.2, method="ifgt", truncation=6)
    >>> bool(np.max(np.abs(G3 - exact)) < 0.05 * 2000)
    True
    """
    if bandwidth is None:
        raise TypeError("gauss_transform() needs a `bandwidth`")
    x = as_points(sources, "sources")
    y = as_points(targets, "targets", dim=x.shape[1])
    q, one_d = as_weights(weights, x.shape[0])
    h, linear_map = _bandwidth_map(bandwidth, x.shape[1])
    eps = open_unit_float(epsilon, "epsilon")
    method = choice(method, "method", METHODS)
    truncation, n_clusters = _fixed_parameters(method, truncation, n_clusters)
    n_jobs = n_jobs_arg(n_jobs)
    x, y = _mapped(x, linear_map), _mapped(y, linear_map)
    with Progress(None, verbose=verbose, desc="gauss_transform planning") as progress:
        report = progress.report if progress.active else None
        plan = {"bandwidth": h, "epsilon": eps, "method": method}
        plan.update(truncation=truncation, n_clusters=n_clusters)
        g = _core.gauss_transform(x, y, q, plan, n_jobs, report)
    return g[:, 0] if one_d else g


class GaussTransform:
    r"""A Gauss transform over fixed sources, planned once, evaluated many times.

    Planning (choosing the method, clustering the sources for the IFGT, or building the
    kd-tree) happens in the constructor; each call then only computes the expansion
    coefficients for the given weights and evaluates them at the targets. With
    ``method="auto"`` the cost model ranks the methods, the candidates within 2x of the
    cheapest are timed on a sample of the targets, and the fastest is kept: the trial is
    paid once, here. Without ``target_sample`` the plan assumes targets distributed like the
    sources.

    Parameters
    ----------
    sources : array-like of shape (n_sources, n_features) or (n_sources,)
        The points :math:`x_i`.
    bandwidth : float, array-like of shape (n_features,) or (n_features, n_features)
        :math:`h > 0` in :math:`\exp(-\lVert y - x \rVert^2 / h^2)`, per-feature bandwidths,
        or a matrix :math:`H`; see :func:`gauss_transform`.
    epsilon : float, default=1e-6
        Accuracy: :math:`\max_j |\hat G - G| / \sum_i |q_i| \le \epsilon`.
    method : {"auto", "direct", "direct-tree", "ifgt", "ifgt-tree", "fgt"}, default="auto"
        See :func:`gauss_transform`.
    n_jobs : int or None, default=None
        Threads for planning and for calls that do not pass their own.
    target_sample : array-like of shape (n_samples, n_features), default=None
        Some of the points the transform will be evaluated at, for planning only (the
        guarantee holds at any target).
    n_targets : int, default=None
        Targets per call, for planning (default: as many as ``target_sample`` or the sources).
    n_weights : int, default=1
        Weight columns per call, for planning.
    truncation, n_clusters : int, default=None
        Fixed-p mode and a fixed K for ``ifgt`` / ``ifgt-tree``; see :func:`gauss_transform`.
    callbacks : callable, list of callables or None, default=None
        Called as ``callback(stage, seconds, name)`` after each planning stage (every
        ``callback_every``), numbered from 1. With ``method="auto"`` the stages are the cost
        model's estimate (``"estimate"``, seconds: the cheapest estimate on one core), each
        candidate refined on the data (``"direct-tree"``, ``"ifgt"``: its estimate) and each
        timing of a close candidate (``"time ifgt"``, ...: the seconds of one evaluation it
        predicts); an explicit method has one stage, ``"plan"``. Returning True ends the
        planning with the best method known then (``stopped_early_``); the accuracy is
        guaranteed whatever the method.
    callback_every : int, default=1
    verbose : bool or int, default=False
        Show the planning stages on a progress bar (planning takes seconds from about a
        million sources on).

    Attributes
    ----------
    method_ : str
        The method that runs (never "auto").
    info_ : dict
        The plan: ``n_clusters`` (K), ``truncation`` (p_max), ``n_terms``,
        ``max_cluster_radius``, ``cutoff``, the cost ``estimates`` (seconds, one core:
        planning and a call, or a call alone for a method ``auto`` built while planning) and,
        for ``auto``, the ``measured`` seconds of one call per timed candidate.
    n_features_in_ : int
        Dimension of the sources.
    stopped_early_ : bool
        Whether a callback ended the planning early.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.kernels import GaussTransform
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(size=(5000, 1))
    >>> gt = GaussTransform(x, bandwidth=0.1, epsilon=1e-6)
    >>> gt.method_ in ("direct", "direct-tree", "ifgt", "ifgt-tree", "fgt")
    True
    >>> G = gt(np.linspace(0, 1, 7), weights=rng.uniform(size=5000))
    >>> G.shape
    (7,)
    """

    def __init__(
        self,
        sources: ArrayLike,
        bandwidth: Bandwidth,
        epsilon: float = 1e-6,
        method: str = "auto",
        n_jobs: int | None = None,
        *,
        target_sample: ArrayLike | None = None,
        n_targets: int | None = None,
        n_weights: int = 1,
        truncation: int | None = None,
        n_clusters: int | None = None,
        callbacks: Callback | Sequence[Callback] | None = None,
        callback_every: int = 1,
        verbose: bool | int = False,
    ) -> None:
        self._sources = as_points(sources, "sources")
        d = self._sources.shape[1]
        self.bandwidth = bandwidth
        self._h, self._map = _bandwidth_map(bandwidth, d)
        if self._map is None:
            self.bandwidth = self._h
        self.epsilon = open_unit_float(epsilon, "epsilon")
        self.method = choice(method, "method", METHODS)
        self.n_jobs = n_jobs_arg(n_jobs)
        self.truncation, self.n_clusters = _fixed_parameters(self.method, truncation, n_clusters)
        self._target_sample = (
            None if target_sample is None else as_points(target_sample, "target_sample", dim=d)
        )
        self.n_targets = None if n_targets is None else check_int(n_targets, "n_targets", low=1)
        self.n_weights = check_int(n_weights, "n_weights", low=1)
        with Progress(
            callbacks, callback_every=callback_every, verbose=verbose, desc="GaussTransform planning"
        ) as progress:
            self._plan(progress=progress)

    def _plan(self, method: str | None = None, progress: Progress | None = None) -> None:
        mapped = _mapped(self._sources, self._map)
        sample = None if self._target_sample is None else _mapped(self._target_sample, self._map)
        report = progress.report if progress is not None and progress.active else None
        plan = {
            "bandwidth": self._h,
            "epsilon": self.epsilon,
            "method": method or self.method,
            "n_targets": self.n_targets,
            "n_weights": self.n_weights,
            "truncation": self.truncation,
            "n_clusters": self.n_clusters,
            "measure": True,
        }
        self._core = _core.GaussTransform(mapped, plan, self.n_jobs, sample, report)
        self.method_ = self._core.method
        self.info_ = self._core.info()
        self.stopped_early_ = bool(self.info_.pop("stopped", False))
        self.n_features_in_ = self._sources.shape[1]

    @property
    def sources(self) -> np.ndarray:
        """The sources (read-only view)."""
        v = self._sources.view()
        v.flags.writeable = False
        return v

    def __call__(
        self, targets: ArrayLike, weights: ArrayLike | None = None, n_jobs: int | None = None
    ) -> FloatArray:
        """G at ``targets`` for ``weights``; see :func:`gauss_transform` for shapes."""
        y = as_points(targets, "targets", dim=self.n_features_in_)
        q, one_d = as_weights(weights, self._sources.shape[0])
        n_jobs = self.n_jobs if n_jobs is None else n_jobs_arg(n_jobs)
        g = self._core.evaluate(_mapped(y, self._map), q, n_jobs)
        return g[:, 0] if one_d else g

    evaluate = __call__

    def __repr__(self) -> str:
        return (
            f"GaussTransform(n_sources={self._sources.shape[0]}, n_features={self.n_features_in_}, "
            f"bandwidth={self.bandwidth!r}, epsilon={self.epsilon!r}, method={self.method!r}) "
            f"-> {self.method_}"
        )

    # The compiled plan is rebuilt on unpickling, from the sources and parameters.
    _STATE = ("bandwidth", "epsilon", "method", "n_jobs", "truncation", "n_clusters", "n_targets", "n_weights")

    def __getstate__(self) -> dict[str, Any]:
        state = {k: getattr(self, k) for k in self._STATE}
        state["sources"] = self._sources
        state["target_sample"] = self._target_sample
        state["method_"] = self.method_
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._sources = state["sources"]
        for k in self._STATE:
            setattr(self, k, state.get(k, 1 if k == "n_weights" else None))
        self._target_sample = state.get("target_sample")
        self._h, self._map = _bandwidth_map(self.bandwidth, self._sources.shape[1])
        # an `auto` plan comes back as the method it chose (timing could choose another)
        self._plan(state.get("method_"))
