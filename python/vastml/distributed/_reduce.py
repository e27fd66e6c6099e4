"""The AROW-MR reducer (Djuric's thesis, sec. 6.4, eqs. 6.9-6.12): one Gaussian from many."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np
from sklearn.exceptions import ConvergenceWarning


if TYPE_CHECKING:
    from vastml._typing import ArrayLike, FloatArray


def _spd_sqrt(S):
    """The symmetric positive (semi-)definite square root of a symmetric matrix."""
    w, V = np.linalg.eigh((S + S.T) / 2)
    return (V * np.sqrt(np.clip(w, 0.0, None))) @ V.T


def solve_riccati(A: ArrayLike, B: ArrayLike) -> FloatArray:
    r"""The SPD solution :math:`X` of :math:`XAX = B` for SPD :math:`A` and :math:`B`.

    With :math:`A = U^\top U` (Cholesky), :math:`(UXU^\top)^2 = UBU^\top`, so
    :math:`X = U^{-1}(UBU^\top)^{1/2}U^{-\top}` with the SPD square root. (The thesis's
    eq. 6.12 prints :math:`U^{-1/2}B^{1/2}U^{-\top/2}`, which is wrong; this is the corrected
    closed form of the spec.)

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.distributed import solve_riccati
    >>> A = np.array([[2.0, 0.5], [0.5, 1.0]]); B = np.array([[1.0, 0.2], [0.2, 3.0]])
    >>> X = solve_riccati(A, B)
    >>> bool(np.allclose(X @ A @ X, B))
    True
    """
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    U = np.linalg.cholesky(A).T  # A = U^T U
    C = _spd_sqrt(U @ B @ U.T)
    Uinv = np.linalg.solve(U, np.eye(U.shape[0]))
    X = Uinv @ C @ Uinv.T
    return (X + X.T) / 2


def _check_models(means, covariances, counts):
    means = np.asarray(means, dtype=np.float64)
    covs = np.asarray(covariances, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.float64)
    if means.ndim != 2:
        raise ValueError(f"`means` must have shape (n_models, n_features), got {means.shape}")
    m, d = means.shape
    if m == 0:
        raise ValueError("`means` must hold at least one model")
    if covs.shape == (m, d):
        diagonal = True
        if np.any(covs <= 0):
            raise ValueError("`covariances` (diagonal) must be positive")
    elif covs.shape == (m, d, d):
        diagonal = False
    else:
        raise ValueError(
            f"`covariances` must have shape ({m}, {d}, {d}) or ({m}, {d}), got {covs.shape}"
        )
    if counts.shape != (m,):
        raise ValueError(f"`counts` must have shape ({m},), got {counts.shape}")
    if np.any(counts < 0) or counts.sum() <= 0:
        raise ValueError("`counts` must be non-negative with a positive sum")
    if not (np.isfinite(means).all() and np.isfinite(covs).all() and np.isfinite(counts).all()):
        raise ValueError("`means`, `covariances` and `counts` must be finite")
    keep = counts > 0
    return means[keep], covs[keep], counts[keep] / counts[keep].sum(), diagonal


def arow_mr_reduce(
    means: ArrayLike,
    covariances: ArrayLike,
    counts: ArrayLike,
    *,
    tol: float = 1e-8,
    max_iter: int = 50,
) -> tuple[FloatArray, FloatArray]:
    r"""Combine M Gaussians :math:`N(\mu_m, \Sigma_m)` into the one closest on average.

    Minimises :math:`\sum_m p_m D^S_{KL}(N(\mu^*,\Sigma^*) \,\|\, N(\mu_m,\Sigma_m))` (thesis
    eq. 6.9; :math:`D^S_{KL}` the symmetric KL divergence, :math:`p_m` proportional to
    ``counts``) by alternating the mean update (6.10)

    .. math:: \mu^* = \Big(\sum_m p_m (\Sigma^{*-1} + \Sigma_m^{-1})\Big)^{-1}
              \sum_m p_m (\Sigma^{*-1} + \Sigma_m^{-1}) \mu_m

    and the Riccati equation (6.11) :math:`\Sigma^* A \Sigma^* = B` with
    :math:`A = \sum_m p_m \Sigma_m^{-1}`,
    :math:`B = \sum_m p_m (\Sigma_m + (\mu^*-\mu_m)(\mu^*-\mu_m)^\top)`, solved in closed form
    by :func:`solve_riccati`. Starts from the :math:`p`-weighted averages; stops when the
    relative change of both is below ``tol`` or after ``max_iter`` rounds (with a
    :class:`sklearn.exceptions.ConvergenceWarning`). With diagonal
    covariances every feature is solved on its own:
    :math:`s^*_j = \sqrt{b_j / a_j}`.

    Models with a count of 0 (empty shards) are ignored. Use it to combine AROW models trained
    anywhere (Spark, Hadoop, ...).

    Parameters
    ----------
    means : array-like of shape (n_models, n_features)
    covariances : array-like of shape (n_models, n_features, n_features) or (n_models, n_features)
        Full SPD covariances, or their diagonals (variances).
    counts : array-like of shape (n_models,)
        Training examples behind each model (the mixing weights are their fractions).
    tol : float, default=1e-8
    max_iter : int, default=50

    Returns
    -------
    mean : ndarray of shape (n_features,)
    covariance : ndarray of shape (n_features, n_features) or (n_features,)

    Examples
    --------
    The 1-D hand case of the spec: N(0, 1) and N(2, 1) with equal weights give
    :math:`\mu^* = 1`, :math:`\Sigma^* = \sqrt 2`.

    >>> from vastml.distributed import arow_mr_reduce
    >>> mu, s = arow_mr_reduce([[0.0], [2.0]], [[[1.0]], [[1.0]]], [1, 1])
    >>> round(float(mu[0]), 6), round(float(s[0, 0]), 6)
    (1.0, 1.414214)
    """
    mus, covs, p, diagonal = _check_models(means, covariances, counts)
    if len(p) == 1:
        return mus[0].copy(), covs[0].copy()
    if diagonal:
        return _reduce_diagonal(mus, covs, p, tol, max_iter)
    # Small dense problems run far faster on one BLAS thread: more threads only spin and
    # contend, badly so when the machine is busy (12x at d = 101 with the load of a test run).
    with _blas_threads(1 if mus.shape[1] <= SMALL_D else None):
        return _reduce_full(mus, covs, p, tol, max_iter)


#: Up to this dimension the full-covariance reducer runs on one BLAS thread.
SMALL_D = 512


def _blas_threads(n):
    from contextlib import nullcontext

    if n is None:
        return nullcontext()
    from threadpoolctl import threadpool_limits  # a dependency of scikit-learn

    return threadpool_limits(limits=n, user_api="blas")


def _converged(old, new, tol):
    return np.linalg.norm(new - old) <= tol * max(np.linalg.norm(new), 1e-300)


def _warn(max_iter):
    warnings.warn(
        f"arow_mr_reduce did not converge in {max_iter} iterations", ConvergenceWarning, stacklevel=3
    )


def _reduce_diagonal(mus, s, p, tol, max_iter):
    a = p @ (1.0 / s)  # sum_m p_m / s_mj
    mu = p @ mus
    var = p @ s
    for _ in range(max_iter):
        b = p @ (s + (mu[None, :] - mus) ** 2)
        new_var = np.sqrt(b / a)
        w = p[:, None] * (1.0 / new_var[None, :] + 1.0 / s)
        new_mu = (w * mus).sum(0) / w.sum(0)
        done = _converged(mu, new_mu, tol) and _converged(var, new_var, tol)
        mu, var = new_mu, new_var
        if done:
            return mu, var
    _warn(max_iter)
    return mu, var


def _inv_spd(S):
    L = np.linalg.cholesky(S)
    Linv = np.linalg.solve(L, np.eye(S.shape[0]))
    return Linv.T @ Linv


def _reduce_full(mus, covs, p, tol, max_iter):
    precs = np.stack([_inv_spd(c) for c in covs])
    A = np.einsum("m,mij->ij", p, precs)
    A = (A + A.T) / 2
    prec_mu = np.einsum("m,mij,mj->i", p, precs, mus)  # sum_m p_m Sigma_m^-1 mu_m
    mu_bar = p @ mus
    mu = mu_bar.copy()
    cov = np.einsum("m,mij->ij", p, covs)
    spread = np.einsum("m,mij->ij", p, covs)
    for _ in range(max_iter):
        P = _inv_spd(cov)
        new_mu = np.linalg.solve(P + A, P @ mu_bar + prec_mu)
        dev = mus - new_mu[None, :]
        B = spread + np.einsum("m,mi,mj->ij", p, dev, dev)
        new_cov = solve_riccati(A, B)
        done = _converged(mu, new_mu, tol) and _converged(cov, new_cov, tol)
        mu, cov = new_mu, new_cov
        if done:
            return mu, cov
    _warn(max_iter)
    return mu, cov
