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
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import numpy as np
from scipy.linalg import cho_solve, cholesky, solve_triangular
from scipy.linalg.blas import ssymv, ssyrk, strsm
from scipy.linalg.lapack import dpstrf, spotrf, spotrs
from threadpoolctl import threadpool_limits

from vastml._validation import n_jobs_arg
from vastml.kernels._gp_precond import farthest_points

if TYPE_CHECKING:
    from vastml._typing import Float32Array, FloatArray
    from vastml.kernels._gp_system import GPSystem

#: Bytes the single-precision kernel matrix may take (4 N^2); N up to about 31,600.
DENSE_MAX_BYTES = 4_000_000_000
#: Dense solver's cost in units of the planner's estimate of one direct (exact) product:
#: DENSE_EXTRA_PRODUCTS + N / DENSE_FLOP_RATIO (a direct product costs N^2 exponentials, the
#: Cholesky N^3 / 3 single-precision multiply-adds). Fitted to the measured wall time of
#: ``solver="dense"`` fits (Cholesky branch) at N = 2,000-16,000 on an idle 2-core machine
#: (``benches/gp_cost_model.py``: 10-12 products, barely growing with N, because LAPACK's
#: factorisation runs at 200-300 GFLOP/s there). On a machine loaded by other processes the
#: factorisation is several times slower and the model favours it too much.
DENSE_FLOP_RATIO = 8000.0
#: Products the dense path spends besides the factorisation (the matrix, refinement steps).
DENSE_EXTRA_PRODUCTS = 10.0


#: The stored-matrix solver tries Nystrom ranks up to this fraction of N (and STORED_MAX_RANK)
#: before it gives way to the Cholesky factor.
STORED_RANK_FRACTION = 0.25
STORED_MAX_RANK = 6000
#: ... and only from this N on: below it, on the flat cases of ``benches/gp.py`` (N = 5,000
#: and 8,000) no rank up to N/4 got the residual below the noise, so the rank search was
#: wasted (0.4 s at N = 5,000 under load), while the factorisation takes 0.1 s on 2 idle
#: cores and 0.5 s on one loaded core there.
STORED_MIN_N = 10_000


def dense_preconditioner(
    scaled: FloatArray,
    signal_variance: float,
    noise_variance: float,
    n_jobs: int | None,
    tol: float = 1e-6,
    b_norm: float = 0.0,
) -> StoredKernelPreconditioner | CholeskyPreconditioner:
    """The preconditioner of ``solver="dense"``: CG on the stored single-precision matrix with
    a Nystrom factor when a rank up to :data:`STORED_RANK_FRACTION` of N leaves a mean residual
    variance below the noise variance (:class:`StoredKernelPreconditioner`), else the
    single-precision Cholesky factor (:class:`CholeskyPreconditioner`).

    ``tol`` is the outer CG's relative tolerance: the inner solve is made accurate to about
    its square root, so that two outer iterations (each error times the inner one) reach it;
    given the norm ``b_norm`` of the outer right-hand side, a later inner solve is only made as
    accurate as the outer tolerance needs from its (smaller) right-hand side."""
    inner_tol = min(1e-2, max(1e-5, 0.3 * math.sqrt(tol)))
    n = scaled.shape[0]
    K = kernel_matrix(scaled, signal_variance, _threads(n_jobs))
    max_rank = min(int(STORED_RANK_FRACTION * n), STORED_MAX_RANK)
    if n >= STORED_MIN_N and max_rank >= StoredKernelPreconditioner.FIRST_RANK and not cholesky_is_faster(
        K, signal_variance + noise_variance, _threads(n_jobs)
    ):
        stored = StoredKernelPreconditioner(
            scaled,
            signal_variance,
            noise_variance,
            n_jobs,
            max_rank=max_rank,
            matrix=K,
            inner_tol=inner_tol,
            outer_tol=tol,
            b_norm=b_norm,
        )
        if stored.ok:
            return stored
    return CholeskyPreconditioner(scaled, signal_variance, noise_variance, n_jobs, matrix=K)


#: Leading blocks (at most half of N) whose factorisation times the machine's LAPACK, its
#: time extrapolated as N^3: the small one first, the large one only when the small one does
#: not already show the factorisation to be the cheaper.
#: Smaller blocks run further below the full factorisation's rate (on 2 idle cores, blocks of
#: 2,048 / 4,096 reach 0.4 / 0.6 of it), so the extrapolation leans towards the stored solver,
#: and a verdict for the factorisation from the small block holds.
CHOLESKY_PROBES = (1024, 4096)
#: The stored-matrix solver's cost in symmetric products with the stored matrix: the rank
#: search, the triangular solve and rank-k update of the factor, and the inner CG's products.
#: Measured at N = 20,000 (rank 2,916) on 2 idle cores: 16.5 s against 0.114 s per product.
STORED_PRODUCTS = 140.0


def cholesky_is_faster(K: Float32Array, diagonal: float, threads: int) -> bool:
    """Whether factoring the stored matrix ``K`` (diagonal set to ``diagonal``) is expected to
    beat the stored-matrix CG, timed here: the factorisation of leading blocks of the sizes
    :data:`CHOLESKY_PROBES` (the larger only when the smaller does not decide for the
    factorisation), extrapolated as N^3, against :data:`STORED_PRODUCTS` symmetric products
    with the whole matrix.

    The choice is timed, not modelled, because the two are bound by different things: the
    factorisation by the cores' arithmetic (LAPACK reaches hundreds of GFLOP/s on two idle
    AVX-512 cores, a tenth of that when other processes share them), the products by memory
    bandwidth, which load barely changes. Either branch gives the same solution to the outer
    CG's tolerance; only the time differs."""
    n = K.shape[0]
    with threadpool_limits(threads, user_api="blas"):
        v = np.ones(n, dtype=np.float32)
        t0 = time.perf_counter()
        ssymv(1.0, K.T, v, lower=1)
        t_product = time.perf_counter() - t0
        for size in CHOLESKY_PROBES:
            m = max(1, min(n // 2, size))
            A = np.array(K[:m, :m], order="F")
            A.flat[:: m + 1] = np.float32(diagonal)
            t0 = time.perf_counter()
            spotrf(A, lower=1, clean=0, overwrite_a=1)
            t_factor = (time.perf_counter() - t0) * (n / m) ** 3
            if t_factor <= STORED_PRODUCTS * t_product:
                return True
            if m == n // 2:
                break
    return False


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


#: When the expected CG cost is within this factor of the dense solver's, CG is tried first
#: (capped at the dense solver's cost) before the dense solver: the expected iteration count,
#: from the largest residual variance, is pessimistic when only a few points are far from the
#: landmarks. Set from the N = 5,000 grid of ``benches/gp.py``: clustered data (d = 2) expected
#: 1.8 times the dense cost and converged in under half the expected iterations; uniform d = 8
#: expected 3.3 times and needed twice the expected iterations.
TRIAL_FACTOR = 2.5


def choose_solver(
    system: GPSystem,
    tol: float,
    delta: float,
    max_iter: int,
    residual_variance: float | None = None,
) -> tuple[str, dict]:
    """``"dense"``, ``"cg"`` or ``"trial"`` (CG first, capped, then the dense solver) for
    ``system``.

    The CG cost is the expected iterations (:func:`expected_iterations`, from the starting
    Nystrom factor's largest residual variance: ``residual_variance``, or that of
    ``system.precond``) times the planned cost of one transform at the first iteration's
    accuracy; the dense cost is :data:`DENSE_EXTRA_PRODUCTS` + N / :data:`DENSE_FLOP_RATIO`
    direct products. Both are in the transform planner's own units, so the choice needs no
    timing of its own. ``"trial"`` when the dense solver is the cheaper but CG's cost is within
    :data:`TRIAL_FACTOR` of it; ``info["trial_iterations"]`` is then the CG iterations that
    cost as much as the dense solver. Returns the choice and the numbers behind it.
    """
    n = system.n
    info: dict = {"fits": dense_fits(n)}
    if residual_variance is None:
        if system.precond is None:
            return "cg", info
        residual_variance = system.precond.residual_variance
    if not info["fits"]:
        return "cg", info
    iters = min(float(max_iter), expected_iterations(residual_variance, system.noise_variance, tol))
    plan = system.kernel.plan(min(delta, tol) / n * system.kernel.signal_variance)
    # both in the planner's estimated seconds on one core (its "measured" times are of a
    # sample of the targets, not comparable with the estimate of a direct product)
    estimates = plan.info_.get("estimates", {})
    direct = float(estimates.get("direct", 0.0))
    product = float(estimates.get(plan.method_, direct))
    if direct <= 0.0 or product <= 0.0:
        return "cg", info
    cg_cost = iters * product / direct
    dense_cost = DENSE_EXTRA_PRODUCTS + n / DENSE_FLOP_RATIO
    info.update(
        expected_iterations=iters,
        cg_cost=cg_cost,
        dense_cost=dense_cost,
        method=plan.method_,
        residual_variance=residual_variance,
    )
    if dense_cost >= cg_cost:
        return "cg", info
    if cg_cost <= TRIAL_FACTOR * dense_cost:
        info["trial_iterations"] = max(1, int(dense_cost * direct / product))
        return "trial", info
    return "dense", info


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

    def __init__(
        self,
        scaled: FloatArray,
        signal_variance: float,
        noise_variance: float,
        n_jobs: int | None,
        matrix: Float32Array | None = None,
    ) -> None:
        n = scaled.shape[0]
        self.n = n
        self.threads = _threads(n_jobs)
        self.shift = 0.0
        sf2, noise = float(signal_variance), float(noise_variance)
        with threadpool_limits(self.threads, user_api="blas"):
            for _ in range(6):
                # K is symmetric: its C-order array, transposed, is the Fortran-order matrix
                # LAPACK factors in place (no copy)
                A = (matrix if matrix is not None else kernel_matrix(scaled, sf2, self.threads)).T
                matrix = None
                A.flat[:: n + 1] = np.float32(sf2 + noise + self.shift)
                c, info = spotrf(A, lower=1, clean=0, overwrite_a=1)
                if info == 0:
                    break
                # single precision lost positive definiteness: shift (still a valid preconditioner)
                self.shift = max(10.0 * self.shift, noise, 1e-6 * sf2)
            else:  # pragma: no cover - a shift of 1e5 sigma^2 always factors
                raise np.linalg.LinAlgError(
                    "the kernel matrix could not be factored in single precision"
                )
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


def kernel_matrix(scaled: FloatArray, signal_variance: float, threads: int) -> Float32Array:
    """The single-precision kernel matrix :math:`\\sigma_f^2 K` (C order, so symmetric that its
    transpose is the Fortran-order matrix), built in row blocks on ``threads`` threads.

    The exponent :math:`a\\cdot b - |a|^2/2 - |b|^2/2 + \\log\\sigma_f^2` of a whole block is
    one double-precision product of augmented coordinates :math:`[a, |a|^2, 1]` and
    :math:`[b, -1/2, -|b|^2/2 + \\log\\sigma_f^2]` (double precision because it cancels), and
    the exponential is written straight into the single-precision matrix.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.kernels._gp_dense import kernel_matrix
    >>> from vastml.kernels._gp_precond import rbf_block
    >>> X = np.random.default_rng(0).normal(size=(300, 3))
    >>> K = kernel_matrix(X, 2.0, 2)
    >>> K.dtype == np.float32, bool(np.abs(K - rbf_block(X, X, 2.0)).max() < 1e-6)
    (True, True)
    """
    n, d = scaled.shape
    K = np.empty((n, n), dtype=np.float32)
    norms = np.einsum("ij,ij->i", scaled, scaled)
    left = np.empty((n, d + 2))
    left[:, :d] = scaled
    left[:, d] = -0.5 * norms
    left[:, d + 1] = 1.0
    right = np.empty((n, d + 2))
    right[:, :d] = scaled
    right[:, d] = 1.0
    right[:, d + 1] = -0.5 * norms + math.log(signal_variance)
    right = np.ascontiguousarray(right.T)
    step = max(1, 1_000_000 // max(n, 1))

    def rows(a: int) -> None:
        b = min(n, a + step)
        expo = left[a:b] @ right
        np.minimum(expo, math.log(signal_variance), out=expo)
        # the exponent rounded to single precision changes exp by a relative |expo| * 6e-8,
        # at most 2.2e-8 sigma_f^2 in absolute terms (where expo = -1): below the result's own
        # rounding; the single-precision exp is several times faster
        out = K[a:b]
        out[...] = expo
        np.exp(out, out=out)

    starts = range(0, n, step)
    with threadpool_limits(1, user_api="blas"):
        if threads > 1:
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(rows, starts))
        else:
            for a in starts:
                rows(a)
    return K


class StoredKernelPreconditioner:
    """:math:`P^{-1}v \\approx \\hat K^{-1}v` by conjugate gradients in single precision on the
    stored kernel matrix, preconditioned by a Nystrom factor of large rank.

    On a flat spectrum a Nystrom factor whose rank is a fraction of N already leaves a residual
    :math:`K - LL^T` of the order of the noise (CG then takes tens of iterations), and it costs
    :math:`O(Nr^2)`, against the :math:`N^3/3` of a Cholesky factorisation; each iteration is one
    single-precision product with the stored matrix (memory bound, :math:`N^2` operations).
    The rank is the smallest of a geometric schedule whose mean residual variance, estimated
    on a random sample of points, is at most the noise variance. The outer CG of
    :class:`~vastml.kernels._gp_system.GPSystem` keeps its double-precision products; this
    inner solve only has to be accurate to ``inner_tol``.

    Parameters
    ----------
    scaled : ndarray of shape (n, d)
        Length-scaled training inputs.
    signal_variance, noise_variance : float
    n_jobs : int or None
        BLAS threads and kernel-matrix builders (None: all cores).
    max_rank : int
        Largest rank tried; when its residual is still above the noise variance, ``ok`` is
        False (the caller factors the whole matrix instead).
    inner_tol : float
        Relative residual of the inner solve.
    outer_tol, b_norm : float
        The outer CG's relative tolerance and the norm of its right-hand side (0: unknown).
        When known, an inner solve of a right-hand side v stops at the relative residual
        :math:`\\max(\\epsilon_{in}, \\min(0.3\\,\\epsilon_{out}\\lVert b\\rVert /
        \\lVert v\\rVert, 10^{-2}))` (``inner_tol``, ``outer_tol``): the second solve of the
        outer CG, whose right-hand side is the outer residual, needs only to cut that residual
        to the outer tolerance.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.kernels._gp_dense import StoredKernelPreconditioner
    >>> from vastml.kernels._gp_precond import rbf_block
    >>> X = np.random.default_rng(0).uniform(size=(400, 2)) * 4
    >>> P = StoredKernelPreconditioner(X, 1.0, 0.01, None, max_rank=200)
    >>> K = rbf_block(X, X, 1.0) + 0.01 * np.eye(400)
    >>> v = np.ones(400)
    >>> bool(P.ok and np.linalg.norm(K @ P.solve(v) - v) < 1e-3 * np.linalg.norm(v))
    True
    """

    #: The solve is an inner iteration (the outer CG runs flexible).
    inexact = True
    #: Ranks start here and grow by RANK_GROWTH.
    FIRST_RANK = 256
    RANK_GROWTH = 1.5
    #: Points of the residual-variance sample.
    SAMPLE = 512
    #: Inner iterations at most (per solve).
    MAX_INNER = 300

    def __init__(
        self,
        scaled: FloatArray,
        signal_variance: float,
        noise_variance: float,
        n_jobs: int | None,
        *,
        max_rank: int,
        matrix: Float32Array | None = None,
        inner_tol: float = 1e-4,
        outer_tol: float = 0.0,
        b_norm: float = 0.0,
        random_state: int = 0,
    ) -> None:
        t0 = time.perf_counter()
        n = scaled.shape[0]
        self.n = n
        self.threads = _threads(n_jobs)
        self.noise = float(noise_variance)
        self.inner_tol = float(inner_tol)
        self.outer_tol = float(outer_tol)
        self.b_norm = float(b_norm)
        self.inner_iterations: list[int] = []
        sf2 = float(signal_variance)
        rng = np.random.default_rng(random_state)
        sample = rng.choice(n, size=min(n, self.SAMPLE), replace=False)
        max_rank = int(min(max(max_rank, 1), n))
        order, min_dist = None, None
        self.ok = False
        self.schedule: list[tuple[int, float]] = []  # (rank, sampled mean residual variance)
        rank = min(self.FIRST_RANK, max_rank)
        K = kernel_matrix(scaled, sf2, self.threads) if matrix is None else matrix
        self.timings = {"matrix": time.perf_counter() - t0}
        with threadpool_limits(self.threads, user_api="blas"):
            while True:
                # the farthest-point traversal continues only as far as the rank tried; K_SS
                # in double from the stored entries, pivots below single precision's rounding
                # dropped
                order, min_dist = farthest_points(scaled, rank, 0, order, min_dist)
                S = order
                c, piv, r, _ = dpstrf(K[np.ix_(S, S)].astype(np.float64), lower=1, tol=1e-6 * sf2)
                C = np.tril(c[:r, :r])
                keep = S[piv[:r] - 1]
                B = solve_triangular(C, K[np.ix_(keep, sample)].astype(np.float64), lower=True)
                self.sample_residual = float(
                    np.mean(np.maximum(sf2 - np.einsum("ij,ij->j", B, B), 0.0))
                )
                self.schedule.append((rank, self.sample_residual))
                if self.sample_residual <= self.noise:
                    self.ok = True
                    break
                if rank >= max_rank or len(order) < rank:  # the cap, or every distinct point
                    break
                rank = min(max_rank, int(self.RANK_GROWTH * rank))
            self.rank = len(keep)
            self.timings["rank"] = time.perf_counter() - t0
            if not self.ok:
                return
            self._K = K
            LT = K[keep]  # K_SX (r x n), overwritten by L^T = C^-1 K_SX
            LT = strsm(1.0, C.astype(np.float32), LT.T, side=1, lower=1, trans_a=1, overwrite_b=1).T
            self.timings["trsm"] = time.perf_counter() - t0
            gram = ssyrk(1.0, LT.T, trans=1).astype(np.float64)  # L^T L, upper triangle
            self.timings["syrk"] = time.perf_counter() - t0
            gram = np.triu(gram) + np.triu(gram, 1).T
            gram[np.diag_indices_from(gram)] += self.noise
        self._LT = LT
        self._inner = cholesky(gram, lower=True)  # sigma^2 I + L^T L, kept in double precision

    def _woodbury(self, R: Float32Array) -> Float32Array:
        # (L L^T + sigma^2 I)^-1 R = (R - L (sigma^2 I + L^T L)^-1 L^T R) / sigma^2
        u = cho_solve((self._inner, True), (self._LT @ R).astype(np.float64), check_finite=False)
        return (R - self._LT.T @ u.astype(np.float32)) * np.float32(1.0 / self.noise)

    def solve(self, V: FloatArray) -> FloatArray:
        """:math:`\\hat K^{-1}V` to a relative residual ``inner_tol`` per column (looser for a
        small right-hand side when the outer tolerance is known; V of shape (n,) or (n, m)), by
        Nystrom-preconditioned CG in single precision."""
        V = np.asarray(V)
        B = V.reshape(self.n, -1).astype(np.float32)
        noise = np.float32(self.noise)
        X = np.zeros_like(B)
        R = B.copy()
        bn = np.linalg.norm(B, axis=0)
        bn[bn == 0] = 1.0
        tol = np.full(B.shape[1], self.inner_tol)
        if self.outer_tol > 0.0 and self.b_norm > 0.0:
            tol = np.maximum(tol, np.minimum(0.3 * self.outer_tol * self.b_norm / bn, 1e-2))
        with threadpool_limits(self.threads, user_api="blas"):
            Z = self._woodbury(R)
            P = Z.copy()
            rz = np.sum(R * Z, axis=0)
            active = np.linalg.norm(R, axis=0) / bn > tol
            it = 0
            while active.any() and it < self.MAX_INNER:
                it += 1
                # symmetric product: reads one triangle, half the memory traffic of a general one
                Q = np.empty_like(P)
                for j in range(P.shape[1]):
                    Q[:, j] = ssymv(1.0, self._K.T, P[:, j], lower=1)
                Q += noise * P
                pq = np.sum(P * Q, axis=0)
                alpha = np.where(active, rz / np.where(pq == 0, 1, pq), 0).astype(np.float32)
                X += alpha * P
                R -= alpha * Q
                active &= np.linalg.norm(R, axis=0) / bn > tol
                Z = self._woodbury(R)
                rz_new = np.sum(R * Z, axis=0)
                beta = np.where(active, rz_new / np.where(rz == 0, 1, rz), 0).astype(np.float32)
                P = Z + beta * P
                rz = rz_new
        self.inner_iterations.append(it)
        return X.astype(np.float64).reshape(V.shape)

    @property
    def n_visited(self) -> int:
        return self.n

    residual_variance = 0.0
