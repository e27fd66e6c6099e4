"""Optimisers of embedding objectives (thesis chapter 3): search directions, backtracking
line search, the spectral direction with a cached sparse factorisation, L-BFGS, the
momentum gradient descent of t-SNE, and the homotopy over lambda for elastic embedding."""

from __future__ import annotations

import math
import numbers
import time
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.linalg import cho_factor, cho_solve
from scipy.optimize import minimize as scipy_minimize

from vastml import _core
from vastml._progress import Progress

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from vastml._progress import Callback
    from vastml._typing import ArrayLike, FloatArray

    #: What :func:`minimize` minimises: X -> (E, G), e.g. an EmbeddingObjective.
    Objective = Callable[[FloatArray], tuple[float, FloatArray]]
from vastml._validation import as_points, check_float, check_int, check_objective, choice
from vastml.embed._directions import DiagHessianDirection, PartialHessianCG

METHODS = ("spectral", "fp", "gd", "lbfgs", "diagh", "sd-", "cg")
#: Up to this many points the spectral direction uses a dense Cholesky factor.
DENSE_CHOLESKY_MAX = 4000


def _laplacian_parts(W):
    W = sp.csr_array(W, dtype=np.float64)
    W = W - sp.diags_array(W.diagonal())
    degree = np.asarray(W.sum(axis=1)).ravel()
    return sp.csr_array(W), degree


def _sparsify(W, kappa):
    """Keeps each row's kappa largest weights (pattern made symmetric by union)."""
    W = sp.csr_array(W)
    n = W.shape[0]
    rows, cols, vals = [], [], []
    for i in range(n):
        a, b = W.indptr[i], W.indptr[i + 1]
        if b - a == 0:
            continue
        d = W.data[a:b]
        keep = np.argsort(-d, kind="stable")[:kappa]
        rows.append(np.full(keep.size, i))
        cols.append(W.indices[a:b][keep])
        vals.append(d[keep])
    if not rows:
        return sp.csr_array((n, n))
    M = sp.csr_array(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n)
    )
    pattern = (M != 0).maximum((M != 0).T)
    return sp.csr_array(W.multiply(pattern))


_BLAS: list[Any] = []


def _blas_controller():
    if not _BLAS:
        from threadpoolctl import ThreadpoolController  # a dependency of scikit-learn

        _BLAS.append(ThreadpoolController())
    return _BLAS[0]


class SpectralDirection:
    r"""The spectral direction :math:`P = -(4 L^+_\kappa + \mu I)^{-1} G` (thesis §3.4).

    :math:`L^+ = D^+ - W^+` is the Laplacian of the attraction; off the diagonal it is
    sparsified to each point's ``kappa`` largest weights (None: keep all) while the full
    degree diagonal is kept, so ``kappa=0`` gives the fixed-point direction
    :math:`-G / (4 D^+)`. :math:`\mu` = ``relative_ridge`` :math:`\times \min_n D^+_{nn}` (a ridge relative to
    the smallest positive degree, default :math:`10^{-10}`) makes the shift-invariant
    (singular) Laplacian positive definite. Factorised once by SuperLU (symmetric
    minimum-degree ordering) and reused at every iteration.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> W = sp.csr_array(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]]) / 4.0)
    >>> sd = SpectralDirection(W)
    >>> G = np.array([[1.0], [0.0], [-1.0]])
    >>> bool(np.vdot(G, sd(G)) < 0), sd.factorization
    (True, 'cholesky')
    """

    def __init__(
        self, W: ArrayLike, *, kappa: int | None = None, relative_ridge: float = 1e-10
    ) -> None:
        Wo, degree = _laplacian_parts(W)
        self.kappa = kappa
        positive = degree[degree > 0]
        self.mu = relative_ridge * (positive.min() if positive.size else 1.0)
        self.diagonal = 4.0 * degree + self.mu
        self._chol = None
        if kappa == 0:
            self.factorization = "diagonal"
            self._lu = None
            self.matrix = sp.diags_array(self.diagonal).tocsc()
            return
        if kappa is not None:
            if not (isinstance(kappa, numbers.Integral) and kappa > 0):
                raise ValueError(f"`kappa` must be None or an int >= 0, got {kappa!r}")
            Wo = _sparsify(Wo, int(kappa))
        B = sp.diags_array(self.diagonal) - 4.0 * Wo
        self.matrix = sp.csc_array(B)
        n = self.matrix.shape[0]
        self._lu = None
        if n <= DENSE_CHOLESKY_MAX:
            # B is symmetric positive definite (diagonally dominant + mu I): a cached dense
            # Cholesky factor (LAPACK potrf), two triangular solves per iteration.
            try:
                self._chol = cho_factor(self.matrix.toarray(), lower=False, check_finite=False)
                self.factorization = "cholesky"
            except np.linalg.LinAlgError:  # mu lost to rounding: fall back to LU
                self._chol = None
        if self._chol is None and n > 0 and self._lu is None:
            # SciPy has no sparse Cholesky: SuperLU with a symmetric minimum-degree order.
            self.factorization = "superlu"
            self._chol = None
            self._lu = spla.splu(self.matrix, permc_spec="MMD_AT_PLUS_A")

    def __call__(self, G: ArrayLike) -> FloatArray:
        """The direction for the gradient G (n x d)."""
        G = np.asarray(G, dtype=np.float64)
        if self._chol is not None:
            if G.ndim == 2 and G.shape[1] > 8:
                return -cho_solve(self._chol, G, check_finite=False)
            # Two triangular solves with d <= 8 right-hand sides are memory-bound: threaded
            # OpenBLAS made them 47 ms instead of 2.5 ms for N = 720 on the loaded 2-core
            # machine (8x the cost of an objective evaluation), so run them on one thread.
            with _blas_controller().limit(limits=1, user_api="blas"):
                return -cho_solve(self._chol, G, check_finite=False)
        if self._lu is None:
            return -G / self.diagonal[:, None]
        return -self._lu.solve(G)


@dataclass
class OptimizeResult:
    """What :func:`minimize` returns: the solution ``X`` and its ``objective``, the
    iterations run (``n_iter_``, as on the estimators) and objective evaluations, E per iteration (``history``), the
    accepted steps, why the run ended (``stop_reason``) and ``||G||_F`` at ``X``.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from vastml.embed import EmbeddingObjective, minimize
    >>> W = sp.csr_array(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]]) / 4.0)
    >>> r = minimize(EmbeddingObjective("ee", W, repulsion_weight=0.1),
    ...              np.array([[0.0, 1], [1, 0], [2, 2]]), max_iter=5, tol=0.0)
    >>> r.n_iter_, len(r.history), r.stop_reason
    (5, 6, 'max_iter')
    """

    X: np.ndarray
    objective: float
    n_iter_: int
    n_evaluations: int
    history: list = field(default_factory=list)
    step_sizes: list = field(default_factory=list)
    stop_reason: str = ""
    #: ||G||_F at the returned X (NaN for L-BFGS)
    grad_norm: float = math.nan


def _direction_fn(method, objective, W, kappa, direction):
    if direction is not None:
        return direction
    if method == "spectral":
        return SpectralDirection(W, kappa=kappa)
    if method == "fp":
        return SpectralDirection(W, kappa=0)
    if method == "diagh":
        return DiagHessianDirection(objective)
    if method == "sd-":
        return PartialHessianCG(objective, SpectralDirection(W, kappa=kappa))
    return lambda G: -G


def _apply(dirfn, G, X):
    """The direction at (X, G): DiagH and SD- also need X."""
    return dirfn(G, X) if getattr(dirfn, "needs_x", False) else dirfn(G)


def _centered_norm(A):
    return float(np.linalg.norm(A - A.mean(axis=0)))


def minimize(
    objective: Objective,
    X0: ArrayLike,
    *,
    method: str = "spectral",
    max_iter: int = 1000,
    tol: float | None = 1e-7,
    min_iter: int = 5,
    kappa: int | None = None,
    direction: Callable[..., FloatArray] | None = None,
    step: float | None = None,
    rho: float = 0.8,
    c: float = 0.1,
    alpha0: float = 1.0,
    max_seconds: float | None = None,
    callbacks: Callback | Sequence[Callback] | None = None,
    callback_every: int = 1,
    verbose: bool | int = False,
    xtol: float | None = None,
    center: bool = False,
    gtol: float | None = None,
    gscale: float = 1.0,
    target: float | None = None,
    adaptive_step: bool = True,
) -> OptimizeResult:
    r"""Minimises ``objective`` (a callable X -> (E, G), e.g. an :class:`EmbeddingObjective`)
    from ``X0``.

    ``method`` (thesis §3.3): ``"spectral"`` (spectral direction, SD), ``"fp"`` (fixed
    point, the diagonal of the attractive Hessian), ``"diagh"`` (the diagonal of the psd
    part of the Hessian, :func:`diag_hessian`), ``"sd-"`` (the same-dimension blocks of
    the psd part of the Hessian, solved by conjugate gradients preconditioned with the
    spectral factor, :class:`PartialHessianCG`), ``"gd"`` (steepest descent) — each with
    backtracking line search for sufficient decrease :math:`E(X + \alpha P) \le E(X) + c
    \alpha \langle G, P\rangle`, contraction ``rho``, the initial trial step at each
    iteration the previously accepted one (never increasing); ``"cg"`` (nonlinear conjugate
    gradients, Polak-Ribiere+ with a strong-Wolfe line search that may take steps > 1, as
    Rasmussen's ``minimize.m``); or ``"lbfgs"`` (SciPy's L-BFGS-B, 100 stored pairs).
    ``"diagh"`` and ``"sd-"`` build dense N x N pieces (up to 6,000 points). With
    ``step`` set, no line search: a fixed step (for approximate gradients, thesis §5.5).
    Stops when the relative decrease of E falls below ``tol`` (after ``min_iter``
    iterations; with ``xtol`` set, only if also :math:`\|\Delta X\|_F \le` ``xtol``
    :math:`\|X\|_F`, so that a run does not stop at the saddle X ~ 0 where E barely
    changes while X still grows geometrically), after ``max_iter`` iterations or
    ``max_seconds``, or when a callback returns True (``stop_reason == "callback"``).

    ``callbacks`` (a callable or a list of them) are called as ``callback(iteration, E, X)``
    every ``callback_every`` iterations (iteration counted from 1); returning True stops the
    run with the current X. ``verbose=True`` draws a progress bar (see
    :mod:`vastml._progress`).

    Two stopping rules for comparing optimisers at equal accuracy (a relative-decrease test
    stops a slow method early, at a higher E): with ``gtol`` set, the run stops on
    stationarity instead, :math:`\|G\|_F \le` ``gtol * gscale`` (``gscale`` a scale fixed
    for the problem, e.g. the norm of the attractive gradient at a reference X); with
    ``target`` set, it stops as soon as :math:`E \le` ``target`` (e.g. the E another
    method reached). Either replaces the ``tol`` test (and, like it, waits for ``min_iter``
    iterations: a path through the saddle X ~ 0, where G ~ 0, must still move);
    ``max_iter`` still applies.

    ``adaptive_step=False`` starts every backtracking search at ``alpha0`` instead of the
    previously accepted step (the thesis's adaptive rule is the default).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from vastml.embed import EmbeddingObjective
    >>> W = sp.csr_array(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]]) / 4.0)
    >>> f = EmbeddingObjective("ee", W, repulsion_weight=0.0)
    >>> r = minimize(f, np.array([[0.0, 1], [1, 0], [2, 2]]), gtol=1e-8, min_iter=1)
    >>> r.stop_reason, r.objective < 1e-12
    ('gtol', True)
    """
    check_objective(objective)
    choice(method, "method", METHODS)
    check_int(max_iter, "max_iter", low=0)
    if tol is not None:
        check_float(tol, "tol", low=0)
    check_int(min_iter, "min_iter", low=0)
    check_float(gscale, "gscale", low=0, low_open=True)
    check_float(rho, "rho", low=0, high=1, low_open=True, high_open=True)
    check_float(c, "c", low=0, high=1, low_open=True, high_open=True)
    check_float(alpha0, "alpha0", low=0, low_open=True)
    if max_seconds is not None:
        check_float(max_seconds, "max_seconds", low=0, low_open=True)
    X = np.array(as_points(X0, "X0", allow_1d=False), dtype=np.float64, order="C", copy=True)
    with Progress(
        callbacks, callback_every=callback_every, verbose=verbose, total=max_iter, desc="minimize"
    ) as progress:
        report = progress.report if progress.active else None
        if method == "lbfgs":
            return _lbfgs(
                objective, X, max_iter=max_iter, tol=tol, callback=report, max_seconds=max_seconds
            )
        if method == "cg":
            return _nonlinear_cg(
                objective,
                X,
                max_iter=max_iter,
                tol=tol,
                min_iter=min_iter,
                callback=report,
                max_seconds=max_seconds,
                center=center,
                gtol=gtol,
                gscale=gscale,
                target=target,
            )
        return _line_search_descent(
            objective,
            X,
            method=method,
            max_iter=max_iter,
            tol=tol,
            min_iter=min_iter,
            kappa=kappa,
            direction=direction,
            step=step,
            rho=rho,
            c=c,
            alpha0=alpha0,
            max_seconds=max_seconds,
            callback=report,
            xtol=xtol,
            center=center,
            gtol=gtol,
            gscale=gscale,
            target=target,
            adaptive_step=adaptive_step,
        )


def _line_search_descent(
    objective,
    X,
    *,
    method,
    max_iter,
    tol,
    min_iter,
    kappa,
    direction,
    step,
    rho,
    c,
    alpha0,
    max_seconds,
    callback,
    xtol,
    center,
    gtol,
    gscale,
    target,
    adaptive_step,
):
    """The line-search methods of :func:`minimize` (all but L-BFGS and CG); ``callback`` is
    the Progress report (or None)."""
    W = getattr(objective, "W", None)
    if method in ("spectral", "fp", "diagh", "sd-") and W is None and direction is None:
        raise ValueError(
            "the spectral, fp, diagh and sd- directions need `objective.W` (the attraction)"
        )
    dirfn = _direction_fn(method, objective, W, kappa, direction)
    start = time.perf_counter()
    n_eval = 0
    if hasattr(objective, "iteration"):
        objective.iteration = 0
    E, G = objective(X)
    n_eval += 1
    history, steps = [E], []
    alpha = alpha0
    stopped = "max_iter"
    it = 0
    if min_iter <= 0 and _reached(E, G, gtol, gscale, target):
        return OptimizeResult(
            X, float(E), 0, n_eval, history, steps, _reason(gtol), float(np.linalg.norm(G))
        )
    for it in range(1, max_iter + 1):
        if hasattr(objective, "iteration"):
            objective.iteration = it  # accuracy schedules (iteration 0 was the start)
        P = _apply(dirfn, G, X)
        slope = float(np.vdot(G, P))
        if not slope < 0:
            stopped = "not a descent direction (gradient ~ 0)"
            it -= 1
            break
        if step is not None:
            Xn = X + step * P
            En, Gn = objective(Xn)
            n_eval += 1
            alpha = step
        else:
            if not adaptive_step:
                alpha = alpha0
            while True:
                Xn = X + alpha * P
                En, Gn = objective(Xn)
                n_eval += 1
                if En <= E + c * alpha * slope or alpha < 1e-20:
                    break
                alpha *= rho
        decrease = E - En
        x_settled = (
            True
            if xtol is None
            # translation is free (E is shift invariant): measure X and the move about their means
            else _centered_norm(Xn - X) <= xtol * _centered_norm(Xn)
        )
        if center:
            # E and G are shift invariant; removing the mean keeps the relative precision of
            # X when it is tiny (near the collapsed saddle X ~ 0 of a homotopy)
            Xn = Xn - Xn.mean(axis=0)
        X, E, G = Xn, En, Gn
        history.append(E)
        steps.append(alpha)
        if callback is not None and callback(it, E, X):
            stopped = "callback"
            break
        if gtol is not None or target is not None:
            if it >= min_iter and _reached(E, G, gtol, gscale, target):
                stopped = _reason(gtol)
                break
        elif it >= min_iter and step is None and decrease <= tol * abs(E) and x_settled:
            stopped = "tol"
            break
        if max_seconds is not None and time.perf_counter() - start > max_seconds:
            stopped = "max_seconds"
            break
    return OptimizeResult(
        X, float(E), it, n_eval, history, steps, stopped, float(np.linalg.norm(G))
    )


def _reached(E, G, gtol, gscale, target):
    if gtol is not None:
        return float(np.linalg.norm(G)) <= gtol * gscale
    return target is not None and E <= target


def _reason(gtol):
    return "gtol" if gtol is not None else "target"


def _nonlinear_cg(
    objective, X, *, max_iter, tol, min_iter, callback, max_seconds, center, gtol, gscale, target
):
    """Polak-Ribiere+ nonlinear conjugate gradients with SciPy's strong-Wolfe line search
    (c1 = 1e-4, c2 = 0.1; steps > 1 allowed), restarting along -G when the direction is
    not a descent one. Same stopping rules as the line-search methods of :func:`minimize`."""
    from scipy.optimize import line_search as _line_search
    from scipy.optimize._linesearch import LineSearchWarning

    shape = X.shape
    cache = {}
    n_eval = [0]

    def evaluate(x):
        key = x.tobytes()
        if key not in cache:
            cache.clear()
            n_eval[0] += 1
            try:
                E, G = objective(x.reshape(shape))
            except ValueError:  # a trial step so long that E is not defined (SNE underflow)
                E, G = math.inf, np.zeros(x.size)
            cache[key] = (float(E), np.asarray(G, dtype=np.float64).ravel())
        return cache[key]

    start = time.perf_counter()
    x = X.ravel().copy()
    E, g = evaluate(x)
    history, steps = [E], []
    p = -g
    E_old = None
    stopped, it = "max_iter", 0
    # Steps may be long (median 256 on the COIL-like EE; capping the extrapolation at 3x
    # the previous move, as minimize.m does, left E three times higher after 20 s): a trial
    # point where E is not defined (SNE's normaliser underflows) counts as E = inf.
    alpha_guess = 1.0
    for it in range(1, max_iter + 1):
        slope = float(g @ p)
        if not slope < 0:
            p, slope = -g, -float(g @ g)
            if not slope < 0:
                stopped = "not a descent direction (gradient ~ 0)"
                it -= 1
                break
        amax = 1e10
        with warnings.catch_warnings():  # no Wolfe point is handled below
            warnings.simplefilter("ignore", LineSearchWarning)
            res = _line_search(
                lambda z: evaluate(z)[0],
                lambda z: evaluate(z)[1],
                x,
                p,
                gfk=g,
                old_fval=E,
                old_old_fval=E_old,
                c1=1e-4,
                c2=0.1,
                amax=amax,
                maxiter=20,
            )
        alpha = res[0]
        if alpha is None:  # no Wolfe point: restart along -G with backtracking
            p = -g
            alpha = alpha_guess
            while True:
                En, gn = evaluate(x + alpha * p)
                if En <= E - 1e-4 * alpha * float(g @ g) or alpha < 1e-20:
                    break
                alpha *= 0.5
        xn = x + alpha * p
        En, gn = evaluate(xn)
        if center:
            xr = xn.reshape(shape)
            xn = (xr - xr.mean(axis=0)).ravel()
            cache.clear()
            cache[xn.tobytes()] = (En, gn)
        beta = max(0.0, float(gn @ (gn - g)) / float(g @ g)) if float(g @ g) > 0 else 0.0
        p = -gn + beta * p
        decrease = E - En
        E_old, E, g, x = E, En, gn, xn
        alpha_guess = alpha
        history.append(E)
        steps.append(alpha)
        if callback is not None and callback(it, E, x.reshape(shape)):
            stopped = "callback"
            break
        if gtol is not None or target is not None:
            if it >= min_iter and _reached(E, g, gtol, gscale, target):
                stopped = _reason(gtol)
                break
        elif it >= min_iter and decrease <= tol * abs(E):
            stopped = "tol"
            break
        if max_seconds is not None and time.perf_counter() - start > max_seconds:
            stopped = "max_seconds"
            break
    return OptimizeResult(
        np.ascontiguousarray(x.reshape(shape)),
        float(E),
        it,
        n_eval[0],
        history,
        steps,
        stopped,
        float(np.linalg.norm(g)),
    )


def _lbfgs(objective, X, *, max_iter, tol, callback, max_seconds=None):
    shape = X.shape
    start = time.perf_counter()
    history = []
    n_eval = [0]

    def fun(x):
        E, G = objective(x.reshape(shape))
        n_eval[0] += 1
        return E, G.ravel()

    stopped = []

    def cb(intermediate_result):
        E = float(intermediate_result.fun)
        history.append(E)
        if callback is not None and callback(
            len(history), E, intermediate_result.x.reshape(shape)
        ):
            stopped.append("callback")
            raise StopIteration
        if max_seconds is not None and time.perf_counter() - start > max_seconds:
            stopped.append("max_seconds")
            raise StopIteration

    res = scipy_minimize(
        fun,
        X.ravel(),
        jac=True,
        method="L-BFGS-B",
        callback=cb,
        options={
            "maxiter": max_iter,
            "maxcor": 100,
            "ftol": tol,
            "gtol": 0.0,
            "maxfun": 10 * max_iter,
        },
    )
    X = res.x.reshape(shape)
    return OptimizeResult(
        np.ascontiguousarray(X),
        float(res.fun),
        len(history) if stopped else int(res.nit),
        n_eval[0],
        history,
        [],
        stopped[0] if stopped else str(res.message),
    )


def homotopy(
    objective: Any,
    X0: ArrayLike,
    *,
    lambdas: ArrayLike | None = None,
    method: str = "spectral",
    kappa: int | None = None,
    tol: float = 1e-6,
    max_iter: int = 10_000,
    min_iter: int = 1,
    callbacks: Callback | Sequence[Callback] | None = None,
    callback_every: int = 1,
    verbose: bool | int = False,
    keep_path: bool = False,
    xtol: float | None = None,
    center: bool = True,
    gtol: float | None = None,
    gscale: float = 1.0,
    targets: ArrayLike | None = None,
    adaptive_step: bool = True,
) -> tuple[FloatArray, dict[str, Any]]:
    r"""Follows the minimiser path X(lambda) of E = E+ + lambda E- for increasing lambda
    (thesis §3.6): the factorisation of the spectral direction is computed once; the line
    search restarts at step 1 for each lambda; each lambda runs until the relative decrease
    of E falls below ``tol`` or ``max_iter`` iterations. ``lambdas`` defaults to
    ``numpy.logspace(-4, 2, 50)``. ``objective.repulsion_weight`` is set along the path (and
    left at the last value). Returns ``(X, info)`` with ``info["n_evaluations"]``, ``info["n_iter"]``,
    ``info["objective"]``, ``info["n_iter_per_lambda"]`` and ``info["last_step"]`` (the
    last accepted step) per lambda and, with ``keep_path``, ``info["path"]``.

    ``center`` removes the mean of X after every step (E is shift invariant): the
    spectral direction collapses X towards 0 at small lambda (10^-24 on the COIL-like
    bench), and without centring the non-constant part of X falls below the rounding of
    its mean, so X can never leave the saddle X ~ 0. ``xtol`` (default None: the thesis
    rule) also requires the relative change of X to fall below it before a lambda ends.

    ``gtol`` (with ``gscale``) or ``targets`` (one E per lambda, e.g. another method's
    ``info["objective"]``) replace the relative-decrease rule by the stationarity or the
    reach-this-E rule of :func:`minimize`, for comparisons at equal accuracy. ``info`` also
    holds ``n_evaluations_per_lambda``, ``grad_norm`` (``||G||_F`` at the end of each lambda)
    and ``stopped`` (why each lambda ended), and ``stopped_early`` (a callback stopped the path).

    ``callbacks`` are called as ``callback(iteration, E, X)`` every ``callback_every``
    iterations, ``iteration`` counting the inner iterations along the whole path (from 1) and
    ``E`` the objective at the current lambda (``objective.repulsion_weight``); returning True
    ends the path there with the current X. ``verbose=True`` draws a progress bar over the lambdas'
    iterations.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from vastml.embed import EmbeddingObjective
    >>> W = sp.csr_array(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]]) / 4.0)
    >>> f = EmbeddingObjective("ee", W, repulsion_weight=0.0)
    >>> X0 = np.array([[0.0, 1e-3], [1e-3, 0], [2e-3, 2e-3]])
    >>> X, info = homotopy(f, X0, lambdas=[0.01, 0.1], max_iter=50)
    >>> X.shape, len(info["objective"]), f.repulsion_weight
    ((3, 2), 2, 0.1)
    """
    check_objective(objective, ("W", "repulsion_weight"))
    choice(method, "method", METHODS)
    check_float(gscale, "gscale", low=0, low_open=True)
    lambdas = np.logspace(-4, 2, 50) if lambdas is None else np.asarray(lambdas, dtype=float)
    if (
        lambdas.ndim != 1
        or lambdas.size == 0
        or (lambdas < 0).any()
        or (np.diff(lambdas) < 0).any()
    ):
        raise ValueError(
            "`lambdas` must be a non-empty increasing sequence of non-negative numbers"
        )
    if targets is not None:
        targets = np.asarray(targets, dtype=float)
        if targets.shape != lambdas.shape:
            raise ValueError("`targets` needs one objective value per lambda")
    direction = None
    if method in ("spectral", "fp", "diagh", "sd-"):
        # factorised once for the whole path
        direction = _direction_fn(method, objective, objective.W, kappa, None)
    X = np.array(as_points(X0, "X0", allow_1d=False), dtype=np.float64, order="C", copy=True)
    info: dict[str, Any] = {
        "lambdas": lambdas,
        "n_evaluations": 0,
        "n_iter": 0,
        "objective": [],
        "n_iter_per_lambda": [],
        "last_step": [],
        "n_evaluations_per_lambda": [],
        "grad_norm": [],
        "stopped": [],
        "path": [],
        "stopped_early": False,
    }
    progress = Progress(
        callbacks, callback_every=callback_every, verbose=verbose, desc="homotopy"
    )
    with progress:
        for k, lam in enumerate(lambdas):
            objective.repulsion_weight = float(lam)
            done = info["n_iter"]
            r = minimize(
                objective,
                X,
                method=method,
                max_iter=max_iter,
                tol=tol,
                min_iter=min_iter,
                direction=direction,
                alpha0=1.0,
                xtol=xtol,
                center=center,
                gtol=gtol,
                gscale=gscale,
                target=None if targets is None else float(targets[k]),
                adaptive_step=adaptive_step,
                callbacks=_offset(progress, done) if progress.active else None,
            )
            X = r.X
            if _record_lambda(info, r, keep_path):
                break
    return X, info


def _offset(progress: Progress, done: int) -> Callback:
    """``progress.report`` with the iterations of an inner run shifted by ``done``."""

    def report(it: int, E: float, X: FloatArray) -> bool:
        return progress.report(done + it, E, X)

    return report


def _record_lambda(info, r, keep_path):
    """Adds one lambda's run to the homotopy's ``info``; True when a callback stopped it."""
    info["n_evaluations"] += r.n_evaluations
    info["n_iter"] += r.n_iter_
    info["objective"].append(r.objective)
    info["n_iter_per_lambda"].append(r.n_iter_)
    info["last_step"].append(r.step_sizes[-1] if r.step_sizes else float("nan"))
    info["n_evaluations_per_lambda"].append(r.n_evaluations)
    info["grad_norm"].append(r.grad_norm)
    info["stopped"].append(r.stop_reason)
    if keep_path:
        info["path"].append(r.X.copy())
    info["stopped_early"] = r.stop_reason == "callback"
    return info["stopped_early"]


def tsne_gradient_descent(
    objective: Any,
    X: ArrayLike,
    *,
    max_iter: int,
    learning_rate: float,
    momentum: float,
    exaggeration: float = 1.0,
    min_gain: float = 0.01,
    state: tuple[ArrayLike, ArrayLike] | None = None,
    callbacks: Callback | Sequence[Callback] | None = None,
    callback_every: int = 1,
    verbose: bool | int = False,
    it0: int = 0,
    objective_every: int = 50,
    fused: bool = True,
    tol: float | None = None,
    tol_offset: float = 0.0,
    relabel_every: int = 250,
) -> tuple[FloatArray, tuple[FloatArray, FloatArray], float, int]:
    """Gradient descent with momentum and per-coordinate gains (van der Maaten's t-SNE
    optimiser, as scikit-learn and openTSNE use it): ``max_iter`` iterations, numbered
    ``it0 + 1, ..., it0 + max_iter``. The objective is evaluated every ``objective_every``
    iterations and at the last (the callbacks see the latest value).

    ``callbacks`` are called as ``callback(iteration, E, X)`` every ``callback_every``
    iterations; returning True stops the descent there. ``verbose=True`` draws a progress
    bar.

    With ``fused`` (default) and a t-SNE :class:`EmbeddingObjective`, the iterations run
    in Rust (one call per ``objective_every`` iterations; Rust reports every iteration to
    the callbacks and stops on Ctrl-C);
    ``fused=False`` is the reference NumPy loop (same arithmetic). The fused calls share
    P's pairs, prepared at the start and every ``relabel_every`` iterations (from 50,000
    points relabelled in the Morton order of the embedding then: memory locality only).
    ``tol``: stop early, at an objective check, when the objective fell by less than
    ``tol * |E + tol_offset|`` since the previous check ``objective_every`` iterations
    before (``tol_offset = sum p log p`` makes it relative to KL(P||Q)).
    Returns ``(X, state, E, n_done)``; with ``max_iter=0``, ``X`` unchanged and ``E`` its
    objective (with the exaggeration).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from vastml.embed import EmbeddingObjective
    >>> W = sp.csr_array(np.array([[0, 1, 1], [1, 0, 1], [1, 1, 0]]) / 6.0)
    >>> f = EmbeddingObjective("tsne", W)
    >>> X0 = np.array([[0.0, 1e-2], [1e-2, 0], [2e-2, 2e-2]])
    >>> X, state, E, done = tsne_gradient_descent(f, X0, max_iter=20, learning_rate=1.0,
    ...                                           momentum=0.5)
    >>> X.shape, done
    ((3, 2), 20)
    """
    check_objective(objective, ("attraction_scale",))
    X = as_points(X, "X", allow_1d=False)
    check_int(max_iter, "max_iter", low=0)
    check_float(learning_rate, "learning_rate", low=0, low_open=True)
    check_float(momentum, "momentum", low=0, high=1, high_open=True)
    check_float(exaggeration, "exaggeration", low=0, low_open=True)
    check_float(min_gain, "min_gain", low=0)
    check_int(it0, "it0", low=0)
    check_int(objective_every, "objective_every", low=1)
    check_int(relabel_every, "relabel_every", low=1)
    if tol is not None:
        check_float(tol, "tol", low=0)
    check_float(tol_offset, "tol_offset")
    with Progress(
        callbacks,
        callback_every=callback_every,
        verbose=verbose,
        total=it0 + max_iter,
        desc="t-SNE",
    ) as progress:
        return descend(
            objective,
            X,
            progress,
            max_iter=max_iter,
            learning_rate=learning_rate,
            momentum=momentum,
            exaggeration=exaggeration,
            min_gain=min_gain,
            state=state,
            it0=it0,
            objective_every=objective_every,
            fused=fused,
            tol=tol,
            tol_offset=tol_offset,
            relabel_every=relabel_every,
        )


def descend(
    objective,
    X,
    progress,
    *,
    max_iter,
    learning_rate,
    momentum,
    exaggeration,
    min_gain,
    state,
    it0,
    objective_every,
    fused,
    tol,
    tol_offset,
    relabel_every,
):
    """:func:`tsne_gradient_descent` reporting to a given :class:`~vastml._progress.Progress`
    (an estimator's, shared by its phases)."""
    X = np.array(X, dtype=np.float64, order="C")
    if state is not None:
        update, gains = (np.array(a, dtype=np.float64, order="C") for a in state)
    else:
        update, gains = np.zeros_like(X), np.ones_like(X)
    if max_iter == 0:
        # nothing to run: the objective of the start (as the iterations would report it,
        # with the exaggeration), not NaN
        objective.attraction_scale = exaggeration
        try:
            E = float(objective(X)[0])
        finally:
            objective.attraction_scale = 1.0
        return X, (update, gains), E, 0
    use_rust = (
        fused
        and getattr(objective, "model", None) == "tsne"
        and getattr(objective, "gradient", None) in ("exact", "barnes_hut", "fft")
        and getattr(objective, "schedule", None) is None  # schedules run in the NumPy loop
    )
    if use_rust:
        return _fused_descent(
            objective, X, update, gains, max_iter, learning_rate, momentum, exaggeration,
            min_gain, progress, it0, objective_every, tol, tol_offset, relabel_every,
        )
    return _numpy_descent(
        objective, X, update, gains, max_iter, learning_rate, momentum, exaggeration,
        min_gain, progress, it0, objective_every, tol, tol_offset,
    )


def _fused_descent(
    objective, X, update, gains, max_iter, learning_rate, momentum, exaggeration, min_gain,
    progress, it0, objective_every, tol, tol_offset, relabel_every,
):
    """The Rust iterations of :func:`tsne_gradient_descent`: one call per objective check;
    Rust reports every iteration to ``progress`` and polls Ctrl-C."""
    E, E_prev = math.nan, math.nan
    d = X.shape[1]
    report = (
        (lambda it, e, x: progress.report(it, e, x.reshape(-1, d))) if progress.active else None
    )
    options = {
        "learning_rate": float(learning_rate),
        "momentum": float(momentum),
        "exaggeration": float(exaggeration),
        "min_gain": float(min_gain),
        "method": objective.gradient,
        "theta": float(objective.theta),
        "epsilon": float(getattr(objective, "epsilon", 0.0)),
        "n_interp": int(objective.n_interp),
        "box_width": float(getattr(objective, "box_width", 1.0)),
    }
    done = 0
    pairs, prepared_at = None, 0
    while done < max_iter:
        if pairs is None or done - prepared_at >= relabel_every:
            # P's pairs prepared once for many calls (from 50,000 points relabelled in
            # the Morton order of the current embedding, for memory locality; the order
            # stays good for hundreds of iterations). Drop the old ones first (memory).
            pairs = None
            pairs = _core.tsne_pairs(
                X, objective._indptr, objective._indices, objective._data, objective.n_jobs
            )
            prepared_at = done
        step = min(objective_every - (it0 + done) % objective_every, max_iter - done)
        X, update, gains, e, ran, stopped = _core.tsne_gd(
            (X, update, gains),
            pairs,
            {
                **options,
                "n_iter": int(step),
                "objective_at_last": True,
                "iterations_before": it0 + done,
                "objective_before": E,
            },
            progress=report,
            n_jobs=objective.n_jobs,
        )
        objective.n_evaluations += ran
        done += ran
        if stopped:
            E = float(e)
            break
        E_prev, E = E, float(e)
        if tol is not None and E_prev - E <= tol * abs(E + tol_offset):
            break
    return X, (update, gains), E, done


def _numpy_descent(
    objective, X, update, gains, max_iter, learning_rate, momentum, exaggeration, min_gain,
    progress, it0, objective_every, tol, tol_offset,
):
    """The reference NumPy iterations of :func:`tsne_gradient_descent` (same arithmetic)."""
    E, E_prev = math.nan, math.nan
    callback = progress.report if progress.active else None
    done = 0
    objective.attraction_scale = exaggeration
    try:
        for i in range(max_iter):
            if hasattr(objective, "iteration"):
                objective.iteration = it0 + i
            need = (it0 + i + 1) % objective_every == 0 or i == max_iter - 1
            if need:
                E_prev, (E, G) = E, objective(X)
            else:
                G = objective.grad(X)
            inc = update * G < 0.0
            gains[inc] += 0.2
            gains[~inc] *= 0.8
            np.clip(gains, min_gain, None, out=gains)
            update = momentum * update - learning_rate * gains * G
            X = X + update
            X -= X.mean(axis=0)
            done = i + 1
            if callback is not None and callback(it0 + i + 1, E, X):
                break
            if need and tol is not None and E_prev - E <= tol * abs(E + tol_offset):
                break
    finally:
        objective.attraction_scale = 1.0
    return X, (update, gains), E, done
