"""Projection pursuit with the entropy index on fast kernel density sums."""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING

import numpy as np
from scipy.optimize import OptimizeResult, minimize
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Self

    from vastml._progress import Callback
    from vastml._typing import ArrayLike, FloatArray, RandomState

from vastml._progress import Progress
from vastml._validation import choice, n_jobs_arg, open_unit_float, validate_rows
from vastml.kernels._bandwidth import sheather_jones
from vastml.kernels._sums import SUM_METHODS, hermite_gauss_sum

SQRT_2PI = math.sqrt(2.0 * math.pi)


def entropy_index(
    z: ArrayLike,
    bandwidth: float,
    epsilon: float = 1e-6,
    method: str = "auto",
    n_jobs: int | None = None,
) -> float:
    r"""The entropy index :math:`\hat I = \frac1N \sum_i \log \hat p(z_i)` of 1-D data ``z``.

    :math:`\hat p` is the Gaussian kernel density estimate of ``z`` with the given bandwidth.
    Among unit-variance densities the normal minimises :math:`\int p \log p`, so for
    sphered data a larger index means farther from normal.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.kernels import entropy_index, sheather_jones
    >>> rng = np.random.default_rng(0)
    >>> normal = rng.normal(size=4000)
    >>> bimodal = np.where(rng.random(4000) < 0.5, -1.0, 1.0) + 0.3 * rng.normal(size=4000)
    >>> bimodal /= bimodal.std()
    >>> i_normal = entropy_index(normal, sheather_jones(normal))
    >>> i_bimodal = entropy_index(bimodal, sheather_jones(bimodal))
    >>> bool(i_bimodal > i_normal)
    True
    """
    z = np.ascontiguousarray(z, dtype=np.float64)
    h = float(bandwidth)
    g0 = hermite_gauss_sum(z, z, 0, h, math.sqrt(2) * h, None, epsilon, method, n_jobs)
    p = np.maximum(g0, 1e-300) / (z.size * h * SQRT_2PI)
    return float(np.mean(np.log(p)))


def _index_and_gradient(
    X: FloatArray, a: FloatArray, h: float, epsilon: float, method: str, n_jobs: int | None
) -> tuple[float, FloatArray]:
    """Entropy index of the projection X @ a and its exact gradient in a (h held fixed)."""
    z = np.ascontiguousarray(X @ a)
    n = z.size
    h2 = math.sqrt(2) * h
    g0 = hermite_gauss_sum(z, z, 0, h, h2, None, epsilon, method, n_jobs)
    p = np.maximum(g0, 1e-300) / (n * h * SQRT_2PI)
    w = 1.0 / p
    c1 = -1.0 / (n * h * h * SQRT_2PI)
    dp = c1 * hermite_gauss_sum(z, z, 1, h, h2, None, epsilon, method, n_jobs)
    s = c1 * hermite_gauss_sum(z, z, 1, h, h2, w, epsilon, method, n_jobs)
    index = float(np.mean(np.log(p)))
    grad = X.T @ (w * dp + s) / n
    return index, grad


class ProjectionPursuit(TransformerMixin, BaseEstimator):
    r"""Find the most non-Gaussian directions of data with the entropy index (Raykar §6.8).

    The data are centred and sphered; each direction :math:`a` (unit length, orthogonal to
    the ones found before) maximises :math:`\hat I(a) = \frac1N\sum_i\log\hat p(a^\top x_i)`,
    where :math:`\hat p` is a Gaussian KDE of the projection with the Sheather-Jones bandwidth.
    The index, the bandwidth and the exact gradient each take O(N) fast Hermite x Gaussian
    sums, so an evaluation is linear in N. L-BFGS runs from ``n_init`` random starts with the
    bandwidth fixed, which is then re-selected at the optimum and the search repeated once.

    Parameters
    ----------
    n_components : int, default=1
    n_init : int, default=10
        Random starting directions per component.
    epsilon : float, default=1e-6
        Accuracy of the sums.
    method : {"auto", "direct", "fast"}, default="auto"
    max_iter : int, default=100
        L-BFGS iterations per start.
    random_state : int, RandomState or None, default=None
    n_jobs : int, default=None
    callbacks : callable, list of callables or None, default=None
        Called as ``callback(iteration, objective, direction)`` after each L-BFGS iteration
        of every search (every ``callback_every``), numbered across the searches:
        ``objective`` is the entropy index being maximised, ``direction`` the current unit
        direction in sphered coordinates. Returning True ends the fit with the best
        direction found so far for the current component and no further components
        (``components_`` may then have fewer rows than ``n_components``), and sets
        ``stopped_early_``.
    callback_every : int, default=1
    verbose : bool or int, default=False
        Draw a progress bar of the L-BFGS iterations.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Directions in the original feature space: ``transform(X) = (X - mean_) @ components_.T``
        (unit variance projections).
    directions_ : ndarray of shape (n_components, n_features)
        The same directions in sphered coordinates (orthonormal).
    index_ : ndarray of shape (n_components,)
        Entropy index reached by each direction.
    bandwidth_ : ndarray of shape (n_components,)
        Bandwidth used for each direction.
    mean_ : ndarray of shape (n_features,)
    n_iter_ : int
        The most L-BFGS iterations any one search ran (at most ``max_iter``).
    stopped_early_ : bool
        Whether a callback stopped the fit.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.kernels import ProjectionPursuit
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 3))
    >>> X[:, 2] = np.where(rng.random(2000) < 0.5, -2, 2) + 0.3 * rng.normal(size=2000)
    >>> pp = ProjectionPursuit(random_state=0).fit(X)
    >>> bool(abs(pp.components_[0] / np.linalg.norm(pp.components_[0]))[2] > 0.99)
    True
    """

    _iterations: int
    _max_nit: int
    _stopped: bool

    def __init__(
        self,
        *,
        n_components: int = 1,
        n_init: int = 10,
        epsilon: float = 1e-6,
        method: str = "auto",
        max_iter: int = 100,
        random_state: RandomState = None,
        n_jobs: int | None = None,
        callbacks: Callback | Sequence[Callback] | None = None,
        callback_every: int = 1,
        verbose: bool | int = False,
    ) -> None:
        self.n_components = n_components
        self.n_init = n_init
        self.epsilon = epsilon
        self.method = method
        self.max_iter = max_iter
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.callbacks = callbacks
        self.callback_every = callback_every
        self.verbose = verbose

    def _search(
        self,
        Z: FloatArray,
        start: FloatArray,
        basis: FloatArray,
        eps: float,
        method: str,
        n_jobs: int | None,
        progress: Progress,
    ) -> tuple[FloatArray, float, float]:
        """Maximise the index over unit vectors orthogonal to ``basis``, from ``start``; a stop
        asked through ``progress`` (``self._stopped``) ends it at the current point."""
        d = Z.shape[1]
        proj = np.eye(d) - basis.T @ basis if basis.size else np.eye(d)

        def unit(v: FloatArray) -> FloatArray:
            u = proj @ v
            return u / np.linalg.norm(u)

        def report(intermediate_result: OptimizeResult) -> None:
            self._iterations += 1
            if progress.report(self._iterations, -float(intermediate_result.fun), unit(intermediate_result.x)):
                self._stopped = True
                raise StopIteration  # L-BFGS-B ends with its current point

        a = unit(start)
        h = sheather_jones(Z @ a, 1e-3, method, n_jobs)
        best = (a, -math.inf, h)
        for _ in range(2):

            def fun(v: FloatArray, h: float = h) -> tuple[float, FloatArray]:
                u = proj @ v
                norm = np.linalg.norm(u)
                a = u / norm
                idx, g = _index_and_gradient(Z, a, h, eps, method, n_jobs)
                # d a / d v = proj (I - a a^T) / |proj v|, symmetric.
                gv = proj @ (g - a * (a @ g)) / norm
                return -idx, -gv

            res = minimize(fun, a, jac=True, method="L-BFGS-B", options={"maxiter": int(self.max_iter)},
                           callback=report if progress.active else None)
            self._max_nit = max(self._max_nit, int(res.nit))
            a = unit(res.x)
            best = (a, -float(res.fun), h)
            if self._stopped:
                break
            h = sheather_jones(Z @ a, 1e-3, method, n_jobs)
        return best

    def fit(self, X: ArrayLike, y: object = None) -> Self:
        """Find ``n_components`` directions."""
        eps = open_unit_float(self.epsilon, "epsilon")
        method = choice(self.method, "method", SUM_METHODS)
        n_jobs = n_jobs_arg(self.n_jobs)
        for name in ("n_components", "n_init", "max_iter"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
                raise ValueError(f"`{name}` must be a positive integer, got {v!r}")
        X = validate_data(self, X, dtype=np.float64, order="C", ensure_min_samples=3)
        assert isinstance(X, np.ndarray)
        d = X.shape[1]
        if self.n_components > d:
            raise ValueError(f"`n_components` = {self.n_components} exceeds n_features = {d}")
        self.mean_ = X.mean(axis=0)
        cov = np.cov(X - self.mean_, rowvar=False).reshape(d, d)
        vals, vecs = np.linalg.eigh(cov)
        if vals.min() <= 1e-12 * max(vals.max(), 1e-300):
            raise ValueError("`X` has (nearly) collinear features: sphering needs a full-rank covariance")
        self._whiten = vecs / np.sqrt(vals)  # Z = (X - mean) @ whiten has identity covariance
        Z = np.ascontiguousarray((X - self.mean_) @ self._whiten)
        rng = check_random_state(self.random_state)
        self._max_nit = 0
        self._iterations = 0
        self._stopped = False
        progress = Progress(
            self.callbacks, callback_every=self.callback_every, verbose=self.verbose,
            total=None, desc="ProjectionPursuit",
        )
        found: list[np.ndarray] = []
        indices: list[float] = []
        bandwidths: list[float] = []
        with progress:
            for _ in range(int(self.n_components)):
                basis = np.array(found).reshape(-1, d)
                best: tuple[np.ndarray, float, float] | None = None
                for _ in range(int(self.n_init)):
                    a, idx, h = self._search(Z, rng.standard_normal(d), basis, eps, method, n_jobs, progress)
                    if best is None or idx > best[1]:
                        best = (a, idx, h)
                    if self._stopped:
                        break
                assert best is not None  # n_init >= 1
                found.append(best[0])
                indices.append(best[1])
                bandwidths.append(best[2])
                if self._stopped:
                    break
        self.directions_ = np.array(found)
        self.components_ = (self._whiten @ self.directions_.T).T
        self.index_ = np.array(indices)
        self.bandwidth_ = np.array(bandwidths)
        self.n_iter_ = max(self._max_nit, 1)
        self.stopped_early_ = self._stopped
        return self

    def transform(self, X: ArrayLike) -> FloatArray:
        """Project ``X`` on the directions found (unit-variance coordinates)."""
        check_is_fitted(self, "components_")
        X = validate_rows(self, X, reset=False)
        return (X - self.mean_) @ self.components_.T
