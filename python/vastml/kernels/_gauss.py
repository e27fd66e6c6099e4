"""The fast Gauss transform: Python front of ``vastml-fgt``."""

from __future__ import annotations

import numpy as np

from vastml import _core
from vastml._validation import (
    as_points,
    as_weights,
    choice,
    n_jobs_arg,
    open_unit_float,
    positive_float,
)

#: Evaluation methods. ``auto`` picks the cheapest of the others from cost estimates.
METHODS = ("auto", "direct", "direct-tree", "ifgt", "ifgt-tree")


def gauss_transform(
    sources,
    targets,
    weights=None,
    bandwidth=None,
    epsilon=1e-6,
    method="auto",
    n_jobs=None,
):
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
    bandwidth : float
        :math:`h > 0`.
    epsilon : float, default=1e-6
        Accuracy :math:`\epsilon \in (0, 1)`.
    method : {"auto", "direct", "direct-tree", "ifgt", "ifgt-tree"}, default="auto"
        ``direct`` is the exact O(MN) sum; ``direct-tree`` sums only the sources within
        :math:`h\sqrt{\ln(1/\epsilon)}` of each target (kd-tree); ``ifgt`` is the improved fast
        Gauss transform on farthest-point clusters; ``ifgt-tree`` adds a kd-tree over the
        cluster centres. ``auto`` estimates each one's cost on these data and runs the
        cheapest. An explicit IFGT method raises ValueError when it cannot meet epsilon.
    n_jobs : int or None, default=None
        Threads: None for all cores, k > 0 for k, -1 for all, -2 for all but one.

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
    """
    if bandwidth is None:
        raise TypeError("gauss_transform() needs a `bandwidth`")
    x = as_points(sources, "sources")
    y = as_points(targets, "targets", dim=x.shape[1])
    q, one_d = as_weights(weights, x.shape[0])
    h = positive_float(bandwidth, "bandwidth")
    eps = open_unit_float(epsilon, "epsilon")
    method = choice(method, "method", METHODS)
    n_jobs = n_jobs_arg(n_jobs)
    g = _core.gauss_transform(x, y, q, h, eps, method, n_jobs)
    return g[:, 0] if one_d else g


class GaussTransform:
    r"""A Gauss transform over fixed sources, planned once, evaluated many times.

    Planning (choosing the method, clustering the sources for the IFGT, or building the
    kd-tree) happens in the constructor; each call then only computes the expansion
    coefficients for the given weights and evaluates them at the targets. With
    ``method="auto"`` the plan assumes targets distributed like the sources.

    Parameters
    ----------
    sources : array-like of shape (n_sources, n_features) or (n_sources,)
        The points :math:`x_i`.
    bandwidth : float
        :math:`h > 0` in :math:`\exp(-\lVert y - x \rVert^2 / h^2)`.
    epsilon : float, default=1e-6
        Accuracy: :math:`\max_j |\hat G - G| / \sum_i |q_i| \le \epsilon`.
    method : {"auto", "direct", "direct-tree", "ifgt", "ifgt-tree"}, default="auto"
        See :func:`gauss_transform`.
    n_jobs : int or None, default=None
        Threads for planning and for calls that do not pass their own.

    Attributes
    ----------
    method_ : str
        The method that runs (never "auto").
    info_ : dict
        The plan: ``n_clusters`` (K), ``truncation`` (p_max), ``n_terms``,
        ``max_cluster_radius``, ``cutoff`` and the cost ``estimates`` (seconds, one core).
    n_features_in_ : int
        Dimension of the sources.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.kernels import GaussTransform
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(size=(5000, 1))
    >>> gt = GaussTransform(x, bandwidth=0.1, epsilon=1e-6)
    >>> gt.method_ in ("direct", "direct-tree", "ifgt", "ifgt-tree")
    True
    >>> G = gt(np.linspace(0, 1, 7), weights=rng.uniform(size=5000))
    >>> G.shape
    (7,)
    """

    def __init__(self, sources, bandwidth, epsilon=1e-6, method="auto", n_jobs=None):
        self._sources = as_points(sources, "sources")
        self.bandwidth = positive_float(bandwidth, "bandwidth")
        self.epsilon = open_unit_float(epsilon, "epsilon")
        self.method = choice(method, "method", METHODS)
        self.n_jobs = n_jobs_arg(n_jobs)
        self._plan()

    def _plan(self):
        self._core = _core.GaussTransform(
            self._sources, self.bandwidth, self.epsilon, self.method, self.n_jobs
        )
        self.method_ = self._core.method
        self.info_ = self._core.info()
        self.n_features_in_ = self._sources.shape[1]

    @property
    def sources(self) -> np.ndarray:
        """The sources (read-only view)."""
        v = self._sources.view()
        v.flags.writeable = False
        return v

    def __call__(self, targets, weights=None, n_jobs=None):
        """G at ``targets`` for ``weights``; see :func:`gauss_transform` for shapes."""
        y = as_points(targets, "targets", dim=self.n_features_in_)
        q, one_d = as_weights(weights, self._sources.shape[0])
        n_jobs = self.n_jobs if n_jobs is None else n_jobs_arg(n_jobs)
        g = self._core.evaluate(y, q, n_jobs)
        return g[:, 0] if one_d else g

    evaluate = __call__

    def __repr__(self):
        return (
            f"GaussTransform(n_sources={self._sources.shape[0]}, n_features={self.n_features_in_}, "
            f"bandwidth={self.bandwidth!r}, epsilon={self.epsilon!r}, method={self.method!r}) "
            f"-> {self.method_}"
        )

    # The compiled plan is rebuilt on unpickling, from the sources and parameters.
    def __getstate__(self):
        return {
            "sources": self._sources,
            "bandwidth": self.bandwidth,
            "epsilon": self.epsilon,
            "method": self.method,
            "n_jobs": self.n_jobs,
        }

    def __setstate__(self, state):
        self._sources = state["sources"]
        self.bandwidth = state["bandwidth"]
        self.epsilon = state["epsilon"]
        self.method = state["method"]
        self.n_jobs = state["n_jobs"]
        self._plan()
