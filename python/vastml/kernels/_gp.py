"""Gaussian process regression solved by conjugate gradients on fast Gauss transforms."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from vastml._validation import as_points, choice, n_jobs_arg, open_unit_float, positive_float
from vastml.kernels._gauss import METHODS, GaussTransform

#: Smallest and largest accuracy handed to the Gauss transform inside CG.
EPS_MIN, EPS_MAX = 1e-13, 0.25


class _Kernel:
    """Products with sigma_f^2 exp(-||x - x'||^2 / 2 l^2) over fixed (scaled) training points.

    Plans are cached by accuracy, rounded down to a power of 10, so CG's loosening schedule
    costs a handful of plans, not one per iteration.
    """

    def __init__(self, scaled, signal_variance, method, n_jobs):
        self.scaled = scaled
        self.signal_variance = signal_variance
        self.method = method
        self.n_jobs = n_jobs
        self._plans = {}

    def plan(self, epsilon):
        raw = min(max(epsilon / self.signal_variance, EPS_MIN), EPS_MAX)
        key = math.floor(math.log10(raw))
        if key not in self._plans:
            self._plans[key] = GaussTransform(
                self.scaled, math.sqrt(2.0), 10.0**key, self.method, self.n_jobs
            )
        return self._plans[key]

    def apply(self, targets, weights, epsilon):
        """sigma_f^2 K(targets, train) @ weights with absolute error <= epsilon * sum|weights|."""
        return self.signal_variance * self.plan(epsilon)(targets, weights)


def conjugate_gradient(matvec, b, tol, delta, n_points, max_iter, callback=None):
    r"""Inexact CG for (K + s I) x = b with a loosening accuracy schedule.

    ``matvec(v, epsilon)`` must return the product with an error of at most epsilon * sum|v|
    per entry. The schedule of Raykar's thesis (Simoncini-Szyld),
    :math:`\epsilon_k = \delta \lVert r_0 \rVert / (N \lVert r_{k-1} \rVert)`, keeps the gap
    between the computed and the true residual below :math:`\delta \lVert r_0 \rVert`.
    ``b`` may have several columns (solved together; the schedule follows the worst column).

    ``delta`` above ``tol`` is lowered to ``tol``: otherwise the computed residual could
    reach ``tol`` while the true one stays near ``delta``.

    Returns (x, n_iter, residual history, epsilon history).
    """
    delta = min(delta, tol)
    b = np.asarray(b, dtype=np.float64)
    one = b.ndim == 1
    B = b.reshape(len(b), -1)
    X = np.zeros_like(B)
    R = B.copy()
    P = R.copy()
    r0 = np.linalg.norm(R, axis=0)
    r0[r0 == 0] = 1.0
    rr = np.sum(R * R, axis=0)
    residuals, epsilons = [], []
    active = np.sqrt(rr) / r0 > tol
    k = 0
    while active.any() and k < max_iter:
        k += 1
        eps = float(np.min(delta * r0[active] / (n_points * np.sqrt(rr[active]))))
        eps = min(max(eps, EPS_MIN), EPS_MAX)
        epsilons.append(eps)
        V = matvec(np.ascontiguousarray(P), eps)
        pv = np.sum(P * V, axis=0)
        alpha = np.where(active, rr / np.where(pv == 0, 1.0, pv), 0.0)
        X += alpha * P
        R -= alpha * V
        rr_new = np.sum(R * R, axis=0)
        rel = np.sqrt(rr_new) / r0
        residuals.append(float(rel.max()))
        if callback is not None:
            callback(k, float(rel.max()))
        active = rel > tol
        beta = np.where(active, rr_new / np.where(rr == 0, 1.0, rr), 0.0)
        P = R + beta * P
        rr = rr_new
    return (X[:, 0] if one else X), k, residuals, epsilons


def _length_scales(length_scale, d):
    if isinstance(length_scale, numbers.Real) and not isinstance(length_scale, bool):
        ls = np.full(d, positive_float(length_scale, "length_scale"))
    else:
        ls = np.asarray(length_scale, dtype=np.float64)
        if ls.shape != (d,):
            raise ValueError(f"`length_scale` must be a number or have shape ({d},), got {ls.shape}")
        if not (np.all(np.isfinite(ls)) and np.all(ls > 0)):
            raise ValueError("`length_scale` must be positive and finite")
    return ls


class GaussianProcessRegressor(RegressorMixin, BaseEstimator):
    r"""Gaussian process regression in O(N) memory and O(kN) time (Raykar's thesis, chapter 7).

    The covariance is :math:`k(x, x') = \sigma_f^2 \exp(-\sum_k (x_k - x'_k)^2 / 2\ell_k^2)`
    (scikit-learn's ``ConstantKernel * RBF``; the thesis writes :math:`h_k = \sqrt2\,\ell_k`) plus
    noise :math:`\sigma^2 I`. Training solves :math:`(K + \sigma^2 I)\xi = y` by conjugate
    gradients whose matrix-vector products are fast Gauss transforms with an accuracy that
    loosens as the residual falls; prediction is one more transform. The hyper-parameters are
    fixed (no marginal-likelihood optimisation: fit them on a subset with scikit-learn).

    Parameters
    ----------
    length_scale : float or array-like of shape (n_features,), default=1.0
        :math:`\ell_k`.
    signal_variance : float, default=1.0
        :math:`\sigma_f^2`.
    noise_variance : float, default=0.1
        :math:`\sigma^2` (also what keeps the system well conditioned).
    tol : float, default=1e-3
        CG stops when :math:`\lVert y - \hat K\xi\rVert / \lVert y\rVert \le` tol (the thesis's
        :math:`\eta`).
    delta : float, default=1e-3
        Allowed drift of the computed residual, sets the accuracy schedule.
    epsilon : float, default=1e-6
        Accuracy of the prediction transform (relative to :math:`\sum|\xi|`).
    normalize_y : bool, default=True
        Subtract the training mean of y (the thesis centres the outputs).
    max_iter : int, default=1000
    method : str, default="auto"
        Gauss transform method (see :func:`vastml.kernels.gauss_transform`).
    n_jobs : int, default=None
    callback : callable, default=None
        ``callback(iteration, relative_residual)`` after every CG step.

    Attributes
    ----------
    dual_coef_ : ndarray of shape (n_samples,)
        :math:`\xi = (K + \sigma^2 I)^{-1} (y - \bar y)`.
    n_iter_ : int
    residuals_, epsilons_ : list of float
        Relative residual and transform accuracy per CG iteration.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.kernels import GaussianProcessRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-3, 3, size=(2000, 1))
    >>> y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=2000)
    >>> gp = GaussianProcessRegressor(length_scale=1.0, noise_variance=0.01).fit(X, y)
    >>> bool(np.abs(gp.predict([[0.5]]) - np.sin(0.5)).max() < 0.05)
    True
    """

    def __init__(
        self,
        length_scale=1.0,
        signal_variance=1.0,
        noise_variance=0.1,
        tol=1e-3,
        delta=1e-3,
        epsilon=1e-6,
        normalize_y=True,
        max_iter=1000,
        method="auto",
        n_jobs=None,
        callback=None,
    ):
        self.length_scale = length_scale
        self.signal_variance = signal_variance
        self.noise_variance = noise_variance
        self.tol = tol
        self.delta = delta
        self.epsilon = epsilon
        self.normalize_y = normalize_y
        self.max_iter = max_iter
        self.method = method
        self.n_jobs = n_jobs
        self.callback = callback

    def _check_params(self):
        positive_float(self.signal_variance, "signal_variance")
        positive_float(self.noise_variance, "noise_variance")
        open_unit_float(self.tol, "tol")
        open_unit_float(self.delta, "delta")
        open_unit_float(self.epsilon, "epsilon")
        choice(self.method, "method", METHODS)
        n_jobs_arg(self.n_jobs)
        if isinstance(self.max_iter, bool) or not isinstance(self.max_iter, numbers.Integral) or self.max_iter < 1:
            raise ValueError(f"`max_iter` must be a positive integer, got {self.max_iter!r}")

    def fit(self, X, y):
        """Solve for the dual coefficients by CG with fast kernel products."""
        self._check_params()
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        self.length_scale_ = _length_scales(self.length_scale, X.shape[1])
        self._y_mean = float(y.mean()) if self.normalize_y else 0.0
        yc = y - self._y_mean
        self._scaled = np.ascontiguousarray(X / self.length_scale_)
        self._kernel = _Kernel(self._scaled, float(self.signal_variance), self.method, self.n_jobs)
        noise = float(self.noise_variance)
        scaled = self._scaled

        def matvec(v, eps):
            return self._kernel.apply(scaled, v, eps) + noise * v

        xi, self.n_iter_, self.residuals_, self.epsilons_ = conjugate_gradient(
            matvec, yc, self.tol, self.delta, X.shape[0], self.max_iter, self.callback
        )
        self.dual_coef_ = xi
        return self

    def predict(self, X, return_std=False):
        """Posterior mean (and standard deviation of the latent f) at ``X``.

        The mean costs one Gauss transform. The standard deviation solves one CG system per
        point (all points together, as columns): O(k N) per point, for moderate numbers of
        points. It excludes the noise variance.
        """
        check_is_fitted(self, "dual_coef_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        Xs = np.ascontiguousarray(X / self.length_scale_)
        mean = self._kernel.apply(Xs, self.dual_coef_, self.epsilon) + self._y_mean
        if not return_std:
            return mean
        Ks = self._kernel.signal_variance * np.exp(
            -0.5 * (np.sum(self._scaled**2, 1)[:, None] + np.sum(Xs**2, 1)[None, :] - 2 * self._scaled @ Xs.T)
        )
        noise = float(self.noise_variance)

        def matvec(v, eps):
            return self._kernel.apply(self._scaled, v, eps) + noise * v

        U, _, _, _ = conjugate_gradient(
            matvec, Ks, min(self.tol, 1e-6), self.delta, self._scaled.shape[0], self.max_iter
        )
        var = self._kernel.signal_variance - np.sum(Ks * U.reshape(Ks.shape), axis=0)
        return mean, np.sqrt(np.maximum(var, 0.0))


@dataclass
class ImplicitSurface:
    """A fitted implicit surface f(x) = 0 and the field sampled on a grid.

    Attributes
    ----------
    model : GaussianProcessRegressor
        The field f (negative inside, positive outside).
    values : ndarray of shape (n, n, n)
        f on the grid; ``values[i, j, k]`` is at ``(axes[0][i], axes[1][j], axes[2][k])``.
    axes : tuple of three ndarrays
        Grid coordinates per dimension.
    spacing : tuple of float
        Grid steps, as ``skimage.measure.marching_cubes(values, 0, spacing=spacing)`` wants
        (add ``origin`` to the vertices it returns).
    origin : ndarray of shape (3,)
    """

    model: GaussianProcessRegressor
    values: np.ndarray
    axes: tuple
    spacing: tuple
    origin: np.ndarray


def fit_implicit_surface(
    points,
    normals,
    offset=0.01,
    length_scale=None,
    noise_variance=1e-3,
    grid_size=48,
    padding=0.1,
    tol=1e-3,
    n_jobs=None,
):
    """Fit a surface through a point cloud with oriented normals (Raykar's thesis, §7.8).

    Each surface point gets value 0 and two off-surface points ``x +/- d n`` get the signed
    distances ``+/- d`` (outside positive); ``d`` starts at ``offset`` times the bounding-box
    diagonal and is halved for a point until its off-surface points have it as their nearest
    surface point (Carr et al.'s check). A Gaussian process on the 3N points gives the field.

    Parameters
    ----------
    points, normals : array-like of shape (n_points, 3)
        Surface samples and outward normals (need not be unit length).
    offset : float, default=0.01
        Off-surface distance as a fraction of the bounding-box diagonal.
    length_scale : float, default=None
        Kernel length scale; None means 4 times the median nearest-neighbour distance.
    noise_variance : float, default=1e-3
    grid_size : int, default=48
        Points per axis of the output grid.
    padding : float, default=0.1
        Grid margin around the points, as a fraction of the box size.
    tol : float, default=1e-3
        CG tolerance.
    n_jobs : int, default=None

    Returns
    -------
    ImplicitSurface

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.kernels import fit_implicit_surface
    >>> rng = np.random.default_rng(0)
    >>> p = rng.normal(size=(400, 3)); p /= np.linalg.norm(p, axis=1, keepdims=True)
    >>> s = fit_implicit_surface(p, p, grid_size=16)
    >>> f = s.model.predict([[0, 0, 0], [0, 0, 1], [0, 0, 1.3]])
    >>> bool(f[0] < 0 and abs(f[1]) < 0.02 and f[2] > 0)
    True
    """
    P = as_points(points, "points")
    N = as_points(normals, "normals", dim=P.shape[1])
    if P.shape[1] != 3 or N.shape[0] != P.shape[0]:
        raise ValueError(f"`points` and `normals` must both have shape (n, 3), got {P.shape} and {N.shape}")
    norms = np.linalg.norm(N, axis=1)
    if np.any(norms == 0):
        raise ValueError("`normals` contains zero vectors")
    N = N / norms[:, None]
    lo, hi = P.min(0), P.max(0)
    diag = float(np.linalg.norm(hi - lo))
    tree = cKDTree(P)
    d = np.full(len(P), positive_float(offset, "offset") * diag)
    for _ in range(20):
        bad = np.zeros(len(P), dtype=bool)
        for sign in (1.0, -1.0):
            _, nearest = tree.query(P + sign * d[:, None] * N)
            bad |= nearest != np.arange(len(P))
        if not bad.any():
            break
        d[bad] *= 0.5
    if length_scale is None:
        dist, _ = tree.query(P, k=2)
        length_scale = 4.0 * float(np.median(dist[:, 1]))
    X = np.vstack([P, P + d[:, None] * N, P - d[:, None] * N])
    y = np.concatenate([np.zeros(len(P)), d, -d])
    model = GaussianProcessRegressor(
        length_scale=length_scale,
        signal_variance=1.0,
        noise_variance=noise_variance,
        tol=tol,
        normalize_y=False,
        n_jobs=n_jobs,
    ).fit(X, y)
    if not (isinstance(padding, numbers.Real) and padding >= 0):
        raise ValueError(f"`padding` must be a non-negative number, got {padding!r}")
    margin = float(padding) * (hi - lo)
    g0, g1 = lo - margin, hi + margin
    n = int(grid_size)
    if n < 2:
        raise ValueError(f"`grid_size` must be at least 2, got {grid_size!r}")
    axes = tuple(np.linspace(g0[k], g1[k], n) for k in range(3))
    mesh = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
    values = model.predict(mesh).reshape(n, n, n)
    spacing = tuple(float(a[1] - a[0]) for a in axes)
    return ImplicitSurface(model=model, values=values, axes=axes, spacing=spacing, origin=g0)
