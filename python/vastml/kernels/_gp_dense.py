"""The dense solver of a GP system, and the cost model that chooses between it and CG on transforms.

When the kernel's spectrum is flat (short length scales in a few dimensions, or low noise) a
low-rank preconditioner cannot capture :math:`K`: CG then needs hundreds of products, each a
near-direct Gauss transform. When :math:`N` is small enough that the kernel matrix fits in
memory, it is cheaper to factor it once. Here the factor is a single-precision Cholesky of
:math:`\\hat K = K + \\sigma^2 I` (LAPACK ``spotrf``, multithreaded: about twice the speed of the
double-precision one and half its memory), used as the preconditioner of the same CG whose
products stay the double-precision, accuracy-controlled Gauss transforms. So the accuracy
guarantee is CG's (the residual is computed in double precision); the factor's rounding only
costs an iteration or two. Should single precision lose positive definiteness (at noise far
below the signal), the factored matrix gets a shift, which keeps it a valid preconditioner.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

import numpy as np
from scipy.linalg.lapack import spotrf, spotrs
from threadpoolctl import threadpool_limits

from vastml._validation import n_jobs_arg

if TYPE_CHECKING:
    from vastml._typing import FloatArray
    from vastml.kernels._gp_system import GPSystem

#: Bytes the single-precision kernel matrix may take (4 N^2); N up to about 31,600.
DENSE_MAX_BYTES = 4_000_000_000
#: Dense factorisation cost in units of one direct (exact) product: build + N / DENSE_FLOP_RATIO
#: for the Cholesky. A direct product costs N^2 exponentials; the factorisation N^3 / 3 fused
#: multiply-adds in single precision, which run about 60 times faster per entry.
DENSE_FLOP_RATIO = 180.0
#: Products the dense path spends besides the factorisation (the matrix, refinement steps).
DENSE_EXTRA_PRODUCTS = 6.0


def _available_bytes() -> float:
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return math.inf


def dense_fits(n: int) -> bool:
    """Whether the single-precision kernel matrix of ``n`` points fits the memory budget
    (:data:`DENSE_MAX_BYTES` and half of the free memory)."""
    need = 4.0 * n * n
    return need <= DENSE_MAX_BYTES and need <= 0.5 * _available_bytes()


def expected_iterations(residual_variance: float, noise_variance: float, tol: float) -> float:
    """CG iterations to reach ``tol`` with a Nystrom preconditioner whose largest residual
    variance is ``residual_variance``: :math:`\\tfrac12\\sqrt{\\kappa}\\ln(2/\\mathrm{tol})` with
    the preconditioned condition number :math:`\\kappa \\approx 1 + \\rho / \\sigma^2`."""
    kappa = 1.0 + max(residual_variance, 0.0) / noise_variance
    return max(1.0, 0.5 * math.sqrt(kappa) * math.log(2.0 / tol))


def choose_solver(system: GPSystem, tol: float, delta: float, max_iter: int) -> tuple[str, dict]:
    """``"dense"`` or ``"cg"`` for ``system`` (built with its starting Nystrom preconditioner).

    The CG cost is the expected iterations (:func:`expected_iterations`, from the starting
    preconditioner's residual variance)
    times the planned cost of one transform at the first iteration's accuracy; the dense cost
    is :data:`DENSE_EXTRA_PRODUCTS` + N / :data:`DENSE_FLOP_RATIO` direct products. Both are in
    the transform planner's own units, so the choice needs no timing of its own. Returns the
    choice and the numbers behind it.
    """
    n = system.n
    info: dict = {"fits": dense_fits(n)}
    if not info["fits"] or system.precond is None:
        return "cg", info
    iters = min(float(max_iter), expected_iterations(system.precond.residual_variance, system.noise_variance, tol))
    plan = system.kernel.plan(min(delta, tol) / n * system.kernel.signal_variance)
    estimates = plan.info_.get("estimates", {})
    measured = plan.info_.get("measured", {})
    direct = float(estimates.get("direct", 0.0))
    product = float(measured.get(plan.method_, estimates.get(plan.method_, direct)))
    if direct <= 0.0 or product <= 0.0:
        return "cg", info
    cg_cost = iters * product / direct
    dense_cost = DENSE_EXTRA_PRODUCTS + n / DENSE_FLOP_RATIO
    info.update(expected_iterations=iters, cg_cost=cg_cost, dense_cost=dense_cost, method=plan.method_)
    return ("dense" if dense_cost < cg_cost else "cg"), info


def _squared_distances(A: FloatArray, B: FloatArray) -> FloatArray:
    sq = np.einsum("ij,ij->i", A, A)[:, None] + np.einsum("ij,ij->i", B, B)[None, :] - 2.0 * (A @ B.T)
    return np.maximum(sq, 0.0, out=sq)


def _threads(n_jobs: int | None) -> int:
    """BLAS threads for ``n_jobs`` (None or -1: all cores, -2 all but one, as ``n_jobs_arg``).

    Deliberately not adapted to the machine's load: the factor (and so the last bits of every
    prediction) must not depend on what else runs. On an oversubscribed machine pass
    ``n_jobs=1``: spinning BLAS threads made a 2-thread factorisation 2-5x slower there."""
    cores = os.cpu_count() or 1
    n_jobs = n_jobs_arg(n_jobs)
    if n_jobs is None:
        return cores
    return n_jobs if n_jobs > 0 else max(1, cores + 1 + n_jobs)


class CholeskyPreconditioner:
    """:math:`P = \\tilde C \\tilde C^T`, the single-precision Cholesky factor of
    :math:`\\hat K + \\tau I` (:math:`\\tau = 0` unless single precision needs a shift).

    Parameters
    ----------
    scaled : ndarray of shape (n, d)
        Length-scaled training inputs.
    signal_variance, noise_variance : float
    n_jobs : int or None
        BLAS / LAPACK threads (None: all cores).

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.kernels._gp_dense import CholeskyPreconditioner
    >>> from vastml.kernels._gp_precond import rbf_block
    >>> X = np.random.default_rng(0).uniform(size=(200, 2)) * 4
    >>> P = CholeskyPreconditioner(X, 1.0, 0.01, None)
    >>> K = rbf_block(X, X, 1.0) + 0.01 * np.eye(200)
    >>> v = np.ones(200)
    >>> bool(np.linalg.norm(P.solve(v) - np.linalg.solve(K, v)) < 1e-3 * np.linalg.norm(np.linalg.solve(K, v)))
    True
    """

    def __init__(self, scaled: FloatArray, signal_variance: float, noise_variance: float, n_jobs: int | None) -> None:
        n = scaled.shape[0]
        self.n = n
        self.threads = _threads(n_jobs)
        self.shift = 0.0
        sf2, noise = float(signal_variance), float(noise_variance)
        with threadpool_limits(self.threads, user_api="blas"):
            for _ in range(6):
                A = np.empty((n, n), dtype=np.float32, order="F")
                step = max(1, 2_000_000 // max(n, 1))
                for a in range(0, n, step):
                    # column block (Fortran order; K is symmetric): squared distances in double
                    # precision (they cancel), the exponential in single (it is stored so)
                    sq = _squared_distances(scaled, scaled[a : a + step]).astype(np.float32)
                    sq *= np.float32(-0.5)
                    np.exp(sq, out=sq)
                    sq *= np.float32(sf2)
                    A[:, a : a + step] = sq
                A.flat[:: n + 1] = np.float32(sf2 + noise + self.shift)
                c, info = spotrf(A, lower=1, clean=0, overwrite_a=1)
                if info == 0:
                    break
                # single precision lost positive definiteness: shift (still a valid preconditioner)
                self.shift = max(10.0 * self.shift, noise, 1e-6 * sf2)
            else:  # pragma: no cover - a shift of 1e5 sigma^2 always factors
                raise np.linalg.LinAlgError("the kernel matrix could not be factored in single precision")
        self._factor = c

    def solve(self, V: FloatArray) -> FloatArray:
        """:math:`P^{-1}V` (V of shape (n,) or (n, m)), computed in single precision."""
        with threadpool_limits(self.threads, user_api="blas"):
            x, info = spotrs(self._factor, np.asarray(V, dtype=np.float32), lower=1)
        if info != 0:  # pragma: no cover - spotrs only fails on bad arguments
            raise np.linalg.LinAlgError(f"spotrs failed ({info})")
        return x.astype(np.float64)

    @property
    def rank(self) -> int:
        return self.n

    @property
    def n_visited(self) -> int:
        return self.n

    residual_variance = 0.0
