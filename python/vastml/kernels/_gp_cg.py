"""Preconditioned conjugate gradients with inexact products, and Lanczos quadrature from them.

Raykar's thesis (chapter 7) solves :math:`\\hat K \\xi = y` by CG whose products are fast Gauss
transforms with an accuracy :math:`\\epsilon_k` that loosens as the residual falls
(Simoncini-Szyld): :math:`\\epsilon_k = \\delta \\lVert b\\rVert / (N \\lVert r_{k-1}\\rVert)`
keeps the gap between the computed and the true residual below :math:`\\delta\\lVert b\\rVert`.
Here the same schedule drives a preconditioned CG over several right-hand sides at once (one
transform per iteration with one weight column per right-hand side, as GPyTorch's mBCG), and
the CG coefficients give each column's Lanczos tridiagonal matrix for stochastic Lanczos
quadrature.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from vastml._validation import check_float, check_int

if TYPE_CHECKING:
    from collections.abc import Callable

    from vastml._typing import ArrayLike, FloatArray


class Reporter(Protocol):
    """What CG reports to: a :class:`vastml._progress.Progress` or a view of one."""

    def report(self, iteration: int, objective: float, state: Any) -> bool: ...

#: Smallest and largest accuracy handed to the Gauss transform inside CG.
EPS_MIN, EPS_MAX = 1e-13, 0.25


@dataclass
class CGResult:
    """Outcome of :func:`conjugate_gradient`.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.kernels import conjugate_gradient
    >>> A = np.array([[4.0, 1.0], [1.0, 3.0]])
    >>> res = conjugate_gradient(lambda V, eps: A @ V, np.array([1.0, 2.0]), tol=1e-10)
    >>> res.converged, res.n_iter_ <= 2, bool(np.allclose(A @ res.x, [1.0, 2.0]))
    (True, True, True)

    Attributes
    ----------
    x : ndarray
        The solution, shaped like ``b``.
    n_iter_ : int
        Iterations run (the largest over the columns), as ``n_iter_`` of an estimator.
    converged : bool
        Every column reached ``tol``.
    residuals, epsilons : list of float
        Largest relative residual and the transform accuracy, per iteration.
    alphas, betas : ndarray of shape (n_iter_, n_columns)
        CG step lengths and direction updates (0 once a column has converged).
    column_iters : ndarray of shape (n_columns,)
        Iterations each column took.
    rz0 : ndarray of shape (n_columns,)
        :math:`r_0^T P^{-1} r_0` per column.
    stopped : bool
        A callback asked to stop.
    """

    x: np.ndarray
    n_iter_: int
    converged: bool
    residuals: list = field(default_factory=list)
    epsilons: list = field(default_factory=list)
    alphas: np.ndarray | None = None
    betas: np.ndarray | None = None
    column_iters: np.ndarray | None = None
    rz0: np.ndarray | None = None
    residual: np.ndarray | None = None
    stopped: bool = False


def conjugate_gradient(
    matvec: Callable[[FloatArray, float], FloatArray],
    b: ArrayLike,
    *,
    tol: float = 1e-3,
    delta: float = 1e-3,
    max_iter: int = 1000,
    preconditioner: Callable[[FloatArray], FloatArray] | None = None,
    x0: FloatArray | None = None,
    r0: FloatArray | None = None,
    b_norm: FloatArray | None = None,
    progress: Reporter | None = None,
    start_iteration: int = 0,
    flexible: bool = False,
) -> CGResult:
    r"""Solve :math:`A X = B` by preconditioned CG with a loosening product accuracy.

    Parameters
    ----------
    matvec : callable
        ``matvec(V, epsilon)`` returns :math:`AV` (V of shape (n, m)) with an error of at most
        ``epsilon * sum|v|`` per entry of each column.
    b : ndarray of shape (n,) or (n, m)
        Right-hand sides, solved together: one product per iteration for all columns.
    tol : float
        A column stops when :math:`\lVert r\rVert / \lVert b\rVert \le` tol (the thesis's
        :math:`\eta`).
    delta : float
        Allowed drift of the computed from the true residual, relative to
        :math:`\lVert b\rVert`; sets :math:`\epsilon_k = \delta\lVert b\rVert/(N\lVert
        r_{k-1}\rVert)` (the smallest over the active columns). A ``delta`` above ``tol`` is
        lowered to ``tol``.
    max_iter : int
    preconditioner : callable, optional
        ``preconditioner(R)`` returns :math:`P^{-1}R` for a symmetric positive definite P.
    x0, r0 : ndarray, optional
        A starting point and its residual :math:`B - AX_0` (to continue an earlier run).
    b_norm : ndarray, optional
        :math:`\lVert b\rVert` per column when ``b`` is not the original right-hand side.
    progress : vastml._progress.Progress, optional
        Reported each iteration with the largest relative residual as objective and the
        current X as state; True stops the run.
    start_iteration : int
        Offset added to the iteration numbers reported to ``progress``.
    flexible : bool
        Polak-Ribiere direction updates (flexible CG), for a preconditioner that is an inexact
        iterative solve; the Lanczos coefficients are then not those of a fixed operator.

    Returns
    -------
    CGResult

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.kernels import conjugate_gradient
    >>> A = np.array([[4.0, 1.0], [1.0, 3.0]])
    >>> res = conjugate_gradient(lambda v, eps: A @ v, np.array([1.0, 2.0]), tol=1e-12)
    >>> np.round(res.x, 6).tolist(), res.converged
    ([0.090909, 0.636364], True)
    """
    tol = check_float(tol, "tol", low=0)
    delta = min(check_float(delta, "delta", low=0), tol)
    check_int(max_iter, "max_iter", low=0)
    check_int(start_iteration, "start_iteration", low=0)
    if not callable(matvec):
        raise TypeError(f"`matvec` must be a callable (v, eps) -> A v, got {type(matvec).__name__}")
    b = np.asarray(b, dtype=np.float64)
    one = b.ndim == 1
    B = b.reshape(len(b), -1)
    n, m = B.shape
    bn = np.linalg.norm(B, axis=0) if b_norm is None else np.asarray(b_norm, dtype=np.float64).reshape(m)
    bn = np.where(bn == 0, 1.0, bn)
    if x0 is None:
        X = np.zeros_like(B)
        R = B.copy()
    else:
        X = np.array(np.asarray(x0, dtype=np.float64).reshape(n, m))
        R = np.array(np.asarray(r0, dtype=np.float64).reshape(n, m)) if r0 is not None else B - matvec(X, EPS_MIN)
    apply_m = preconditioner if preconditioner is not None else (lambda V: V)
    Z = apply_m(R)
    P = Z.copy()
    rz = np.sum(R * Z, axis=0)
    rz0 = rz.copy()
    rnorm = np.linalg.norm(R, axis=0)
    active = rnorm / bn > tol
    residuals, epsilons, alphas, betas = [], [], [], []
    col_iters = np.zeros(m, dtype=np.int64)
    k = 0
    stopped = False
    while active.any() and k < max_iter:
        k += 1
        eps = float(np.min(delta * bn[active] / (n * rnorm[active])))
        eps = min(max(eps, EPS_MIN), EPS_MAX)
        epsilons.append(eps)
        V = matvec(np.ascontiguousarray(P), eps)
        pv = np.sum(P * V, axis=0)
        alpha = np.where(active, rz / np.where(pv == 0, 1.0, pv), 0.0)
        X += alpha * P
        R -= alpha * V
        rnorm = np.linalg.norm(R, axis=0)
        rel = rnorm / bn
        residuals.append(float(rel[active].max()))
        if np.any(active & (rel > tol)):
            Z = apply_m(R)
            rz_new = np.sum(R * Z, axis=0)
            # Polak-Ribiere z^T (r_new - r_old) when the preconditioner is itself an iterative
            # solve (flexible CG); Fletcher-Reeves otherwise (the Lanczos coefficients need it)
            num = rz_new - np.sum((R + alpha * V) * Z, axis=0) if flexible else rz_new
            beta = np.where(active, num / np.where(rz == 0, 1.0, rz), 0.0)
        else:  # all converged: no preconditioner solve for a direction that is never taken
            rz_new, beta = rz, np.zeros(m)
        alphas.append(alpha)
        betas.append(beta)
        col_iters += active
        active = active & (rel > tol)
        P = Z + beta * P
        rz = rz_new
        if progress is not None and progress.report(start_iteration + k, residuals[-1], X):
            stopped = True
            break
    A = np.array(alphas).reshape(k, m)
    Bt = np.array(betas).reshape(k, m)
    return CGResult(
        x=X[:, 0] if one else X,
        n_iter_=k,
        converged=not active.any(),
        residuals=residuals,
        epsilons=epsilons,
        alphas=A,
        betas=Bt,
        column_iters=col_iters,
        rz0=rz0,
        residual=R,
        stopped=stopped,
    )


def lanczos_tridiagonal(alphas: FloatArray, betas: FloatArray, n_steps: int) -> tuple[FloatArray, FloatArray]:
    """The Lanczos matrix T (n_steps x n_steps) of one column from its CG coefficients.

    :math:`T_{jj} = 1/\\alpha_j + \\beta_{j-1}/\\alpha_{j-1}`,
    :math:`T_{j,j+1} = \\sqrt{\\beta_j}/\\alpha_j`.
    """
    a = np.asarray(alphas[:n_steps], dtype=np.float64)
    bt = np.asarray(betas[:n_steps], dtype=np.float64)
    diag = 1.0 / a
    diag[1:] += bt[:-1] / a[:-1]
    off = np.sqrt(np.maximum(bt[:-1], 0.0)) / a[:-1]
    return diag, off


def lanczos_quadrature_logdet(result: CGResult) -> float:
    r"""Stochastic Lanczos quadrature of :math:`\log\det(P^{-1/2} A P^{-1/2})` from probe solves.

    With probes :math:`z_i \sim N(0, P)` solved by :func:`conjugate_gradient` (preconditioner
    :math:`P^{-1}`), each column gives :math:`z_i^T P^{-1} z_i \, e_1^T \log(T_i) e_1`, an
    unbiased-in-the-limit estimate of the trace of the logarithm; the mean over probes is
    returned.
    """
    from scipy.linalg import eigh_tridiagonal

    alphas, betas, iters, rz0 = result.alphas, result.betas, result.column_iters, result.rz0
    if alphas is None or betas is None or iters is None or rz0 is None:
        raise ValueError("the CG result keeps no Lanczos coefficients")
    m = alphas.shape[1]
    est = np.empty(m)
    for j in range(m):
        steps = int(iters[j])
        if steps == 0:
            est[j] = 0.0
            continue
        d, e = lanczos_tridiagonal(alphas[:, j], betas[:, j], steps)
        if steps == 1:
            lam, W = d, np.ones((1, 1))
        else:
            lam, W = eigh_tridiagonal(d, e)
        lam = np.maximum(lam, 1e-300)
        est[j] = rz0[j] * float(np.sum(W[0] ** 2 * np.log(lam)))
    return float(est.mean())
