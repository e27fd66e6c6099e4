"""The GP system :math:`\\hat K = \\sigma_f^2 K + \\sigma^2 I` on fast Gauss transforms.

One object per set of hyper-parameters: fast products (plans cached by accuracy), the
preconditioner, a preconditioned solve that grows the preconditioner's rank until CG meets a
target iteration count, and products with the derivatives of the kernel in the length scales.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from vastml.kernels._gauss import GaussTransform
from vastml.kernels._gp_cg import EPS_MAX, EPS_MIN, conjugate_gradient
from vastml.kernels._gp_precond import NystromPreconditioner

if TYPE_CHECKING:
    from vastml._typing import FloatArray
    from vastml.kernels._gp_cg import CGResult, Reporter
    from vastml.kernels._gp_dense import CholeskyPreconditioner, StoredKernelPreconditioner


class GaussKernel:
    """Products with :math:`\\sigma_f^2 \\exp(-\\lVert x - x'\\rVert^2 / 2)` over fixed (length-scaled)
    training points.

    Plans are cached by accuracy, rounded down to a power of 10, so CG's loosening schedule
    costs a handful of plans, not one per iteration.
    """

    def __init__(self, scaled: FloatArray, signal_variance: float, method: str, n_jobs: int | None) -> None:
        self.scaled = scaled
        self.signal_variance = float(signal_variance)
        self.method = method
        self.n_jobs = n_jobs
        self._plans: dict[int, GaussTransform] = {}

    def plan(self, epsilon: float) -> GaussTransform:
        raw = min(max(epsilon / self.signal_variance, EPS_MIN), EPS_MAX)
        key = math.floor(math.log10(raw))
        if key not in self._plans:
            self._plans[key] = GaussTransform(self.scaled, math.sqrt(2.0), 10.0**key, self.method, self.n_jobs)
        return self._plans[key]

    def apply(self, targets: FloatArray, weights: FloatArray, epsilon: float) -> FloatArray:
        """:math:`\\sigma_f^2 K(\\mathrm{targets}, X) W` with absolute error <= epsilon * sum|w| per column."""
        return self.signal_variance * self.plan(epsilon)(targets, weights)

    def __getstate__(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("scaled", "signal_variance", "method", "n_jobs")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._plans = {}


class GPSystem:
    """:math:`\\hat K = K + \\sigma^2 I` with a Nystrom preconditioner of adaptive rank.

    Parameters
    ----------
    scaled : ndarray (n, d)
        Inputs divided by the length scales (and centred).
    signal_variance, noise_variance : float
    method, n_jobs
        Passed to the Gauss transform.
    rank : int
        Initial preconditioner rank (0: no preconditioner).
    target_iterations : int or None
        When CG has not converged after this many iterations, the rank is doubled (up to
        :meth:`NystromPreconditioner.max_rank`) and CG continues from where it was.
    """

    def __init__(
        self,
        scaled: FloatArray,
        signal_variance: float,
        noise_variance: float,
        method: str,
        n_jobs: int | None,
        rank: int,
        target_iterations: int | None,
    ) -> None:
        self.scaled = scaled
        self.n = scaled.shape[0]
        self.noise_variance = float(noise_variance)
        self.kernel = GaussKernel(scaled, signal_variance, method, n_jobs)
        self.target_iterations = target_iterations
        self.precond: NystromPreconditioner | CholeskyPreconditioner | StoredKernelPreconditioner | None = (
            NystromPreconditioner(scaled, signal_variance, noise_variance, rank) if rank > 0 else None
        )

    @property
    def rank(self) -> int:
        return 0 if self.precond is None else self.precond.rank

    @property
    def n_landmarks(self) -> int:
        return 0 if self.precond is None else self.precond.n_visited

    def matvec(self, V: FloatArray, epsilon: float) -> FloatArray:
        return self.kernel.apply(self.scaled, V, epsilon) + self.noise_variance * V

    def _can_grow(self) -> bool:
        p = self.precond
        return (
            p is not None
            and p.rank < NystromPreconditioner.max_rank(self.n)
            and p.n_visited < self.n
            and p.residual_variance > 1e-2 * self.noise_variance
        )

    def solve(
        self,
        B: FloatArray,
        *,
        tol: float,
        delta: float,
        max_iter: int,
        progress: Reporter | None = None,
        grow: bool = True,
        x0: FloatArray | None = None,
        r0: FloatArray | None = None,
        start_iteration: int = 0,
    ) -> tuple[CGResult, int]:
        """Solve :math:`\\hat K X = B`; returns (CGResult of the last run, total iterations).

        ``x0`` and its residual ``r0`` continue an earlier run (its iterations counted from
        ``start_iteration`` in the reports)."""
        B = np.asarray(B, dtype=np.float64)
        b_norm = np.linalg.norm(B.reshape(self.n, -1), axis=0)
        total = 0
        while True:
            budget = max_iter - total
            grow = grow and self.target_iterations is not None and self._can_grow()
            if grow and self.target_iterations is not None:
                budget = min(budget, self.target_iterations)
            res = conjugate_gradient(
                self.matvec,
                B,
                tol=tol,
                delta=delta,
                max_iter=budget,
                preconditioner=None if self.precond is None else self.precond.solve,
                x0=x0,
                r0=r0,
                b_norm=b_norm,
                progress=progress,
                start_iteration=start_iteration + total,
                flexible=getattr(self.precond, "inexact", False),
            )
            total += res.n_iter_
            precond = self.precond
            if res.converged or res.stopped or not grow or total >= max_iter:
                return res, total
            if not isinstance(precond, NystromPreconditioner):  # only a Nystrom factor grows
                return res, total
            precond.build(2 * precond.n_visited)
            x0, r0 = res.x, res.residual

    def derivative_products(self, U: FloatArray, V: FloatArray, epsilon: float) -> FloatArray:
        """For each input dimension k and column c, :math:`u_c^T (K \\odot D_k) v_c` with
        :math:`D_{k,ij} = (\\tilde x_{ik} - \\tilde x_{jk})^2` (the derivative of K in
        :math:`\\log \\ell_k`), and :math:`u_c^T K v_c` as a last row: shape (d + 1, m).

        One transform with weight columns :math:`[V, V \\tilde x_k, V \\tilde x_k^2]`; the square
        is expanded as :math:`\\tilde x_i^2 - 2\\tilde x_i \\tilde x_j + \\tilde x_j^2`.
        """
        Xs = self.scaled
        n, d = Xs.shape
        V = V.reshape(n, -1)
        U = U.reshape(n, -1)
        m = V.shape[1]
        W = np.empty((n, m * (1 + 2 * d)))
        W[:, :m] = V
        for k in range(d):
            xk = Xs[:, k : k + 1]
            W[:, m * (1 + k) : m * (2 + k)] = V * xk
            W[:, m * (1 + d + k) : m * (2 + d + k)] = V * xk * xk
        G = self.kernel.apply(Xs, W, epsilon)
        G0 = G[:, :m]
        out = np.empty((d + 1, m))
        for k in range(d):
            xk = Xs[:, k : k + 1]
            G1 = G[:, m * (1 + k) : m * (2 + k)]
            G2 = G[:, m * (1 + d + k) : m * (2 + d + k)]
            out[k] = np.sum(U * (xk * xk * G0 - 2.0 * xk * G1 + G2), axis=0)
        out[d] = np.sum(U * G0, axis=0)
        return out
