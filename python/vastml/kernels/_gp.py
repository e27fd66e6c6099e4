"""Gaussian process regression solved by preconditioned conjugate gradients on fast Gauss transforms."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.spatial import cKDTree
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, check_random_state, validate_data
from threadpoolctl import threadpool_limits

from vastml._progress import Progress
from vastml._validation import (
    as_points,
    check_int,
    choice,
    n_jobs_arg,
    open_unit_float,
    positive_float,
    validate_rows,
)
from vastml.kernels._gauss import METHODS
from vastml.kernels._gp_cg import CGResult, conjugate_gradient
from vastml.kernels._gp_dense import choose_solver, dense_fits, dense_preconditioner
from vastml.kernels._gp_mll import MarginalLikelihood, optimize_hyperparameters
from vastml.kernels._gp_precond import NystromPreconditioner, rbf_block, residual_variance_estimate
from vastml.kernels._gp_system import GPSystem

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Self

    from vastml._progress import Callback
    from vastml._typing import ArrayLike, FloatArray, RandomState

__all__ = ["CGResult", "GaussianProcessRegressor", "ImplicitSurface", "conjugate_gradient", "fit_implicit_surface"]

#: Marginal-likelihood evaluations allowed per L-BFGS start.
MAX_OPTIMIZER_EVALS = 60


def _length_scales(length_scale: float | ArrayLike, d: int) -> FloatArray:
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
    noise :math:`\sigma^2 I`. Training solves :math:`\hat K\xi = y` with :math:`\hat K = K +
    \sigma^2 I` by conjugate gradients whose products are fast Gauss transforms with an accuracy
    that loosens as the residual falls (the thesis's schedule), preconditioned by
    :math:`P = LL^T + \sigma^2 I`, a Nystrom factor on farthest-point landmarks applied by
    Woodbury. The rank of :math:`L` doubles until CG converges within ``target_iterations``.
    When the kernel's spectrum is too flat for a low-rank factor (short length scales, low
    noise) and the kernel matrix fits in memory, a cost model switches to ``solver="dense"``:
    the kernel matrix is stored in single precision and the preconditioner is either CG on it
    with a Nystrom factor of rank up to N/4 (when that rank leaves a residual below the noise
    and a timed probe finds it cheaper than factoring) or its single-precision Cholesky factor; the outer CG then converges in a few products,
    still computed in double precision to the same tolerance.
    The length scales (ARD: one per feature, by scaling the inputs), signal and noise variance
    can be fitted by maximising the log marginal likelihood with L-BFGS, its log-determinant
    estimated by stochastic Lanczos quadrature and its gradient's traces by Hutchinson probes
    on the same fast products. Predictive standard deviations come from a cache of
    :math:`L^T\hat K^{-1}L` built once (a block solve), so each test point then costs a small
    dense product, not a CG solve.

    Parameters
    ----------
    length_scale : float or array-like of shape (n_features,), default=1.0
        :math:`\ell_k` (the starting value when ``optimizer`` is set).
    signal_variance : float, default=1.0
        :math:`\sigma_f^2`.
    noise_variance : float, default=0.1
        :math:`\sigma^2`.
    optimizer : {"lbfgs", None}, default=None
        ``"lbfgs"`` fits the hyper-parameters (log-scaled, within scikit-learn's default bounds
        1e-5..1e5) by L-BFGS-B on the estimated marginal likelihood; None keeps them fixed.
    n_restarts_optimizer : int, default=0
        Further L-BFGS starts, drawn log-uniformly within a factor 10 of the initial values.
    n_probes : int, default=8
        Probe vectors of the stochastic log-determinant and trace estimates.
    tol : float or "auto", default="auto"
        A float: CG stops when :math:`\lVert y - \hat K\xi\rVert / \lVert y\rVert \le` tol
        (the thesis's :math:`\eta`). ``"auto"``: the predictive mean at every training point is
        within :math:`10^{-3}\,\mathrm{std}(y)` of the exact solve's. CG stops when
        :math:`2\lVert r\rVert_2 \le 0.9\cdot10^{-3}\,\mathrm{std}(y)` (the solve's error in the
        mean is :math:`K\hat K^{-1}r = r - \sigma^2\hat K^{-1}r`, of norm at most
        :math:`2\lVert r\rVert_2`), a relative tolerance of about :math:`4.5\cdot10^{-4}/\sqrt N`,
        and the mean's transform gets the accuracy :math:`10^{-4}\,\mathrm{std}(y)` (below
        ``epsilon`` times :math:`\sum|\xi|` when that is smaller).
    delta : float, default=1e-3
        Allowed drift of the computed residual; sets the accuracy schedule
        :math:`\epsilon_k = \delta\lVert y\rVert / (N\lVert r_{k-1}\rVert)`.
    epsilon : float, default=1e-6
        Accuracy of the prediction transforms (relative to :math:`\sum|\xi|`; with
        ``tol="auto"`` the mean's is tightened as that describes).
    normalize_y : bool, default=True
        Subtract the training mean of y (the thesis centres the outputs).
    max_iter : int, default=1000
        CG iterations at most.
    preconditioner_rank : "auto" or int, default="auto"
        Landmarks of the preconditioner; "auto" starts at 256 (capped) and lets CG grow it, an int
        fixes the starting rank, 0 turns preconditioning off (the thesis's plain CG).
    target_iterations : int or None, default=50
        CG iterations after which the preconditioner's rank is doubled (while it is below
        the memory cap of 6e7 factor entries and the Nystrom residual still exceeds 1% of
        :math:`\sigma^2`); None never grows it.
    method : str, default="auto"
        Gauss transform method (see :func:`vastml.kernels.gauss_transform`).
    solver : {"auto", "cg", "dense"}, default="auto"
        How the final solve is preconditioned. ``"cg"``: the Nystrom factor above. ``"dense"``:
        the whole kernel matrix in single precision (memory 4 N^2 bytes, at most 4 GB and half
        the free memory) with CG on it preconditioned by a Nystrom factor of rank r <= N/4
        (cost O(N r^2)), or its Cholesky factor (N^3 / 3 operations), for flat spectra.
        ``"auto"`` picks ``"dense"`` when it fits and its cost, in transform products, is below
        CG's expected iterations times the planned cost of one product (see
        ``docs/guide/kernels.md``); when the two are within a factor 2.5, CG is tried first,
        capped at the dense solver's cost, and the dense solver continues from its iterate if
        it does not converge. Either way CG stops at ``tol`` on double-precision products.
    n_jobs : int, default=None
    random_state : int, RandomState instance or None, default=None
        Probes and restarts.
    callbacks : callable or list of callables, default=None
        ``callback(iteration, objective, state)``: while fitting hyper-parameters, once per
        marginal-likelihood evaluation with the negative log marginal likelihood and the log
        hyper-parameters :math:`[\log\ell, \log\sigma_f^2, \log\sigma^2]`; then once per CG
        iteration of the final solve (numbered on from there) with the relative residual and
        the current dual coefficients. Returning True stops: the best hyper-parameters so far
        are kept, or CG ends with the current coefficients.
    callback_every : int, default=1
    verbose : bool or int, default=False
        Progress bar.

    Attributes
    ----------
    dual_coef_ : ndarray of shape (n_samples,)
        :math:`\xi = \hat K^{-1} (y - \bar y)`.
    length_scale_ : ndarray of shape (n_features,)
    signal_variance_, noise_variance_ : float
        The hyper-parameters used (fitted or given).
    log_marginal_likelihood_value_ : float
        The estimated log marginal likelihood at the fitted hyper-parameters (only with
        ``optimizer``; NaN otherwise).
    n_iter_ : int
        CG iterations of the final solve.
    solver_ : str
        The preconditioner the final solve used: ``"cg"`` (Nystrom) or ``"dense"`` (Cholesky).
    preconditioner_rank_ : int
        Rank of the Nystrom factor (with the dense solver: the rank of the stored-matrix
        branch's factor, or n_samples for the Cholesky branch).
    residuals_, epsilons_ : list of float
        Relative residual and transform accuracy per CG iteration (of the last CG run).
    stopped_early_ : bool

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
    >>> mean, std = gp.predict([[0.5], [10.0]], return_std=True)
    >>> bool(std[0] < 0.05 and std[1] > 0.9)
    True
    """

    def __init__(
        self,
        *,
        length_scale: float | ArrayLike = 1.0,
        signal_variance: float = 1.0,
        noise_variance: float = 0.1,
        optimizer: str | None = None,
        n_restarts_optimizer: int = 0,
        n_probes: int = 8,
        tol: float | str = "auto",
        delta: float = 1e-3,
        epsilon: float = 1e-6,
        normalize_y: bool = True,
        max_iter: int = 1000,
        preconditioner_rank: int | str = "auto",
        target_iterations: int | None = 50,
        method: str = "auto",
        solver: str = "auto",
        n_jobs: int | None = None,
        random_state: RandomState = None,
        callbacks: Callback | Sequence[Callback] | None = None,
        callback_every: int = 1,
        verbose: bool | int = False,
    ) -> None:
        self.length_scale = length_scale
        self.signal_variance = signal_variance
        self.noise_variance = noise_variance
        self.optimizer = optimizer
        self.n_restarts_optimizer = n_restarts_optimizer
        self.n_probes = n_probes
        self.tol = tol
        self.delta = delta
        self.epsilon = epsilon
        self.normalize_y = normalize_y
        self.max_iter = max_iter
        self.preconditioner_rank = preconditioner_rank
        self.target_iterations = target_iterations
        self.method = method
        self.solver = solver
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.callbacks = callbacks
        self.callback_every = callback_every
        self.verbose = verbose

    def _check_params(self, n: int) -> int:
        positive_float(self.signal_variance, "signal_variance")
        positive_float(self.noise_variance, "noise_variance")
        if isinstance(self.tol, str):
            choice(self.tol, "tol", ("auto",))
        else:
            open_unit_float(self.tol, "tol")
        open_unit_float(self.delta, "delta")
        open_unit_float(self.epsilon, "epsilon")
        choice(self.method, "method", METHODS)
        choice(self.solver, "solver", ("auto", "cg", "dense"))
        n_jobs_arg(self.n_jobs)
        check_int(self.max_iter, "max_iter", low=1)
        check_int(self.n_restarts_optimizer, "n_restarts_optimizer", low=0)
        check_int(self.n_probes, "n_probes", low=1)
        if self.optimizer is not None:
            choice(self.optimizer, "optimizer", ("lbfgs",))
        if self.target_iterations is not None:
            check_int(self.target_iterations, "target_iterations", low=1)
        if isinstance(self.preconditioner_rank, str):
            choice(self.preconditioner_rank, "preconditioner_rank", ("auto",))
            return min(NystromPreconditioner.max_rank(n), 256)
        return check_int(self.preconditioner_rank, "preconditioner_rank", low=0)

    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Fit the hyper-parameters (with ``optimizer``), then solve for the dual coefficients."""
        # The dense algebra here is small (rank x rank factors, n x rank products); BLAS threads
        # only contend with the transform's own threads.
        with threadpool_limits(1, user_api="blas"):
            return self._fit(X, y)

    def _fit(self, X_in: ArrayLike, y_in: ArrayLike) -> Self:
        X: FloatArray
        y: FloatArray
        X, y = validate_data(self, X_in, y_in, dtype=np.float64, order="C", y_numeric=True)
        rank = self._check_params(X.shape[0])
        d = X.shape[1]
        ls = _length_scales(self.length_scale, d)
        sf2, noise = float(self.signal_variance), float(self.noise_variance)
        self._x_offset = X.mean(axis=0)
        Xc = X - self._x_offset
        self._y_mean = float(y.mean()) if self.normalize_y else 0.0
        yc = y - self._y_mean
        rng = check_random_state(self.random_state)
        self.stopped_early_ = False
        self.log_marginal_likelihood_value_ = math.nan
        with Progress(self.callbacks, callback_every=self.callback_every, verbose=self.verbose, desc="GP") as progress:
            offset = 0
            if self.optimizer is not None:
                mll = MarginalLikelihood(
                    Xc,
                    yc,
                    int(self.n_probes),
                    np.random.default_rng(rng.randint(2**31)),
                    {
                        "method": self.method,
                        "n_jobs": self.n_jobs,
                        "rank": rank,
                        "target_iterations": self.target_iterations,
                        "tol": 1e-2 if isinstance(self.tol, str) else max(float(self.tol), 1e-2),
                        "delta": max(float(self.delta), 1e-2),
                        "max_iter": int(self.max_iter),
                        "epsilon": 1e-6,
                    },
                    progress,
                )
                theta0 = np.log(np.concatenate([ls, [sf2, noise]]))
                theta, nll, runs, stopped = optimize_hyperparameters(
                    mll, theta0, int(self.n_restarts_optimizer), rng, MAX_OPTIMIZER_EVALS
                )
                self.stopped_early_ = stopped
                self.optimizer_runs_ = runs
                ls, sf2, noise = np.exp(theta[:d]), math.exp(theta[d]), math.exp(theta[d + 1])
                self.log_marginal_likelihood_value_ = -nll
                rank = mll.rank
                offset = mll.n_evals
            self.length_scale_ = ls
            self.signal_variance_ = sf2
            self.noise_variance_ = noise
            self._scaled = np.ascontiguousarray(Xc / ls)
            self._start_rank = rank
            # with solver "auto" or "dense" the Nystrom factor is built only when CG is to run
            lazy = self.solver != "cg"
            system = GPSystem(
                self._scaled, sf2, noise, self.method, self.n_jobs, 0 if lazy else rank, self.target_iterations
            )
            tol = self._relative_tol(yc)
            solver, trial_iterations = self._choose_solver(system, tol, rank)
            reporter = None if self.stopped_early_ else _Offset(progress, offset)
            delta = float(self.delta)
            res: CGResult | None = None
            total = 0
            if solver == "trial":
                # CG first, given the iterations that cost as much as the dense solver
                trial = _Trial(reporter, trial_iterations, tol)
                cap = min(trial_iterations, int(self.max_iter))
                res, total = system.solve(yc, tol=tol, delta=delta, max_iter=cap, progress=trial, grow=False)
                failed = not res.converged and (trial.gave_up or not res.stopped)
                solver = "dense" if failed and total < int(self.max_iter) else "cg"
                res.stopped = res.stopped and not trial.gave_up
            nystrom = system.precond
            if solver == "dense":
                system.precond = dense_preconditioner(
                    self._scaled, sf2, noise, self.n_jobs, tol, float(np.linalg.norm(yc))
                )
                system.target_iterations = None
                res, more = system.solve(
                    yc,
                    tol=tol,
                    delta=delta,
                    max_iter=int(self.max_iter) - total,
                    progress=reporter,
                    x0=None if res is None else res.x,
                    r0=None if res is None else res.residual,
                    start_iteration=total,
                )
                total += more
            elif res is None:
                res, total = system.solve(yc, tol=tol, delta=delta, max_iter=int(self.max_iter), progress=reporter)
        self.stopped_early_ = self.stopped_early_ or res.stopped
        self.solver_ = solver
        self.preconditioner_rank_ = system.rank
        if solver == "dense":  # the n x n factor is not kept; std columns fall back on the Nystrom one
            dense = system.precond
            keys = ("rank", "inner_iterations", "schedule", "timings")
            self._dense_info = {"preconditioner": type(dense).__name__}
            self._dense_info.update({k: getattr(dense, k) for k in keys if hasattr(dense, k)})
            system.precond = nystrom
            system.target_iterations = self.target_iterations
        self._system = system
        self._kernel = system.kernel
        self.dual_coef_ = res.x
        self.n_iter_ = total
        self.residuals_ = res.residuals
        self.epsilons_ = res.epsilons
        self._mean_epsilon = float(self.epsilon)
        if isinstance(self.tol, str):  # the transform's share of the mean's error bound
            mass = float(np.abs(res.x).sum())
            if mass > 0.0:
                bound = self.PREDICT_SHARE * self.MEAN_TOL * float(np.std(yc)) / mass
                self._mean_epsilon = min(self._mean_epsilon, max(bound, 1e-13))
        self._variance_cache = None
        return self

    #: With ``tol="auto"``: the predictive mean's error bound at the training points, over std(y).
    MEAN_TOL = 1e-3
    #: The share of MEAN_TOL left to the prediction transform (the solve gets the rest).
    PREDICT_SHARE = 0.1

    def _relative_tol(self, yc: FloatArray) -> float:
        if not isinstance(self.tol, str):
            return float(self.tol)
        norm = float(np.linalg.norm(yc))
        if norm == 0.0:
            return 0.5
        share = (1.0 - self.PREDICT_SHARE) * self.MEAN_TOL
        return max(0.5 * share * float(np.std(yc)) / norm, 1e-14)

    def _choose_solver(self, system: GPSystem, tol: float, rank: int) -> tuple[str, int]:
        """The solver (``"cg"``, ``"dense"`` or ``"trial"``) and the trial's iteration cap; sets
        ``system.precond`` to the Nystrom factor when CG is to run."""
        if self.solver == "cg":
            return "cg", 0
        if self.solver == "dense":
            if not dense_fits(system.n):
                raise ValueError(
                    f"`solver='dense'` needs {4 * system.n**2 / 1e9:.1f} GB for the kernel matrix; "
                    "use solver='cg' or 'auto'"
                )
            return "dense", 0
        if rank == 0:  # preconditioner_rank=0 asks for the thesis's plain CG
            return "cg", 0
        sf2 = system.kernel.signal_variance
        # the starting factor's largest residual variance, from a sample: the N x rank factor
        # itself is built only when CG is to run
        rho, traversal = residual_variance_estimate(system.scaled, sf2, rank)
        choice_, self._solver_costs = choose_solver(system, tol, float(self.delta), int(self.max_iter), rho)
        if choice_ != "dense":
            system.precond = NystromPreconditioner(system.scaled, sf2, system.noise_variance, rank, traversal)
        return choice_, int(self._solver_costs.get("trial_iterations", 0))

    def _scale(self, X: FloatArray) -> FloatArray:
        return np.ascontiguousarray((X - self._x_offset) / self.length_scale_)

    def predict(self, X: ArrayLike, return_std: bool = False) -> FloatArray | tuple[FloatArray, FloatArray]:
        r"""Posterior mean (and standard deviation of the latent f) at ``X``.

        The mean costs one Gauss transform. The standard deviation excludes the noise
        variance; the first call with ``return_std=True`` builds a cache (a block CG solve of
        :math:`\hat K Z = L` for the preconditioner's factor L), after which each point costs
        one transform column per landmark and a small dense product.
        """
        check_is_fitted(self, "dual_coef_")
        Xs = self._scale(validate_rows(self, X, reset=False))
        mean = self._kernel.apply(Xs, self.dual_coef_, self._mean_epsilon) + self._y_mean
        if not return_std:
            return mean
        with threadpool_limits(1, user_api="blas"):
            return mean, self._predict_std(Xs)

    def _build_variance_cache(self) -> tuple[FloatArray, FloatArray, NystromPreconditioner] | None:
        """:math:`Z = \\hat K^{-1}L` and :math:`G = L^TZ` for a Nystrom factor L whose residual
        variance is at most a tenth of the noise variance (None when the rank cap stops first)."""
        sf2, noise = self.signal_variance_, self.noise_variance_
        rank = max(64, self._system.rank if self._system.precond is not None else self._start_rank)
        precond = NystromPreconditioner(self._scaled, sf2, noise, rank)
        cap = precond.max_rank(self._scaled.shape[0], fraction=0.5)
        while precond.residual_variance > 0.1 * noise and precond.n_visited < cap:
            precond.build(2 * precond.n_visited, fraction=0.5)
        if precond.residual_variance > 0.1 * noise:
            return None
        system = GPSystem(self._scaled, sf2, noise, self.method, self.n_jobs, 0, None)
        system.kernel = self._kernel
        system.precond = precond
        L = precond.factor
        res, _ = system.solve(L, tol=1e-4, delta=1e-4, max_iter=int(self.max_iter), grow=False)
        Z = res.x.reshape(L.shape)
        G = L.T @ Z
        return np.ascontiguousarray(Z), 0.5 * (G + G.T), precond

    _variance_cache: tuple[FloatArray, FloatArray, NystromPreconditioner] | bool | None

    def _predict_std(self, Xs: FloatArray) -> FloatArray:
        if self._variance_cache is None:
            self._variance_cache = self._build_variance_cache() or False
        sf2 = self.signal_variance_
        if not isinstance(self._variance_cache, tuple):  # no accurate low-rank cache: one CG column per point
            if self._system.precond is None and self._start_rank > 0:  # the dense solver left none
                self._system.precond = NystromPreconditioner(
                    self._scaled, sf2, self.noise_variance_, self._start_rank
                )
            Ks = rbf_block(self._scaled, Xs, sf2)
            res, _ = self._system.solve(Ks, tol=1e-6, delta=1e-6, max_iter=int(self.max_iter), grow=False)
            quad = np.sum(Ks * res.x.reshape(Ks.shape), axis=0)
        else:
            # k(X, x*) = L c* + e*; k*^T K^-1 k* = 2 k*^T Z c* - c*^T G c* + e*^T K^-1 e*, and the last
            # term is below |e*|^2 / sigma^2, small since L's residual variance is.
            Z, G, precond = self._variance_cache
            C = precond.extension(rbf_block(Xs, self._scaled[precond.landmarks], sf2))
            KZ = self._kernel.apply(Xs, Z, self.epsilon)
            quad = 2.0 * np.sum(KZ * C, axis=1) - np.einsum("ij,jk,ik->i", C, G, C)
        return np.sqrt(np.maximum(sf2 - quad, 0.0))


class _Trial:
    """The reporter of a capped CG trial: passes reports on, and stops CG (``gave_up``) when,
    from the third iteration on, the residual's mean rate of decrease so far projects more than
    twice ``cap`` iterations to reach ``tol``."""

    __slots__ = ("cap", "gave_up", "reporter", "tol")

    def __init__(self, reporter: _Offset | None, cap: int, tol: float) -> None:
        self.reporter, self.cap, self.tol = reporter, cap, tol
        self.gave_up = False

    def report(self, iteration: int, objective: float, state: Any) -> bool:
        if self.reporter is not None and self.reporter.report(iteration, objective, state):
            return True
        if iteration >= 3 and objective > self.tol:
            rate = -math.log(max(objective, 1e-300)) / iteration  # from a relative residual of 1
            projected = iteration + math.log(objective / self.tol) / rate if rate > 0 else math.inf
            if projected > 2 * self.cap:
                self.gave_up = True
                return True
        return False


class _Offset:
    """A Progress seen through an iteration offset (the final solve numbers on after the
    marginal-likelihood evaluations)."""

    __slots__ = ("offset", "progress")

    def __init__(self, progress: Progress, offset: int) -> None:
        self.progress, self.offset = progress, offset

    def report(self, iteration: int, objective: float, state: Any) -> bool:
        return self.progress.report(self.offset + iteration, objective, state)


@dataclass
class ImplicitSurface:
    """A fitted implicit surface f(x) = 0 and the field sampled on a grid.

    Attributes
    ----------
    model : GaussianProcessRegressor
        The field f (negative inside, positive outside).
    values : ndarray of shape (n, n, n)
        f on the grid; ``values[i, j, k]`` is at
        ``(grid_axes[0][i], grid_axes[1][j], grid_axes[2][k])``.
    grid_axes : tuple of three ndarrays
        Grid coordinates per dimension.
    spacing : tuple of float
        Grid steps, as ``skimage.measure.marching_cubes(values, 0, spacing=spacing)`` wants
        (add ``origin`` to the vertices it returns).
    origin : ndarray of shape (3,)

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.kernels import fit_implicit_surface
    >>> rng = np.random.default_rng(0)
    >>> p = rng.normal(size=(300, 3)); p /= np.linalg.norm(p, axis=1, keepdims=True)
    >>> s = fit_implicit_surface(p, p, grid_size=8)
    >>> s.values.shape, len(s.grid_axes), bool(s.values[4, 4, 4] < 0 < s.values[0, 0, 0])
    ((8, 8, 8), 3, True)
    """

    model: GaussianProcessRegressor
    values: np.ndarray
    grid_axes: tuple
    spacing: tuple
    origin: np.ndarray


def fit_implicit_surface(
    points: ArrayLike,
    normals: ArrayLike,
    offset: float = 0.01,
    length_scale: float | None = None,
    noise_variance: float = 1e-3,
    grid_size: int = 48,
    padding: float = 0.1,
    tol: float = 1e-3,
    n_jobs: int | None = None,
) -> ImplicitSurface:
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
    grid_axes = tuple(np.linspace(g0[k], g1[k], n) for k in range(3))
    mesh = np.stack(np.meshgrid(*grid_axes, indexing="ij"), axis=-1).reshape(-1, 3)
    values = model.predict(mesh).reshape(n, n, n)
    spacing = tuple(float(a[1] - a[0]) for a in grid_axes)
    return ImplicitSurface(model=model, values=values, grid_axes=grid_axes, spacing=spacing, origin=g0)
