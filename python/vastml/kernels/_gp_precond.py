"""Low-rank-plus-diagonal preconditioner for GP systems: Nystrom on farthest-point landmarks.

For :math:`\\hat K = K + \\sigma^2 I` the preconditioner is :math:`P = LL^T + \\sigma^2 I` with
:math:`LL^T = K_{XS} K_{SS}^{+} K_{SX}`, the Nystrom approximation of :math:`K` on landmarks
:math:`S` chosen by farthest-point (Gonzalez k-center) traversal in the length-scaled inputs. For
the Gaussian kernel this is the same greedy choice a pivoted Cholesky makes (the pivot is the
point with the largest residual variance, i.e. the one farthest from the landmarks so far), but
the factor is formed with dense blocks (BLAS 3) instead of one column at a time.

:math:`L = K_{XS} C^{-T}` with :math:`C` the (pivoted) Cholesky factor of :math:`K_{SS}`, and

- :math:`P^{-1} v = (v - L(\\sigma^2 I + L^TL)^{-1}L^T v)/\\sigma^2` (Woodbury),
- :math:`\\log\\det P = \\log\\det(\\sigma^2 I + L^TL) + (N-k)\\log\\sigma^2`,
- :math:`z = L g_1 + \\sigma g_2 \\sim N(0, P)` for standard normal :math:`g_1, g_2`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from scipy.linalg import cholesky, solve_triangular
from scipy.linalg.lapack import dpstrf

if TYPE_CHECKING:
    from collections.abc import Sequence

    from vastml._typing import FloatArray, IntArray

#: Elements of the N x rank factor we allow (8 bytes each); caps the rank at large N.
MAX_FACTOR_ELEMENTS = 60_000_000
#: Largest rank (the dense k x k factorisations stay cheap).
MAX_RANK = 2048


def rbf_block(A: FloatArray, B: FloatArray, signal_variance: float) -> FloatArray:
    """sigma_f^2 exp(-||a - b||^2 / 2) between rows of (already length-scaled) A and B."""
    sq = np.einsum("ij,ij->i", A, A)[:, None] + np.einsum("ij,ij->i", B, B)[None, :] - 2.0 * (A @ B.T)
    np.maximum(sq, 0.0, out=sq)
    return signal_variance * np.exp(-0.5 * sq)


def farthest_points(
    X: FloatArray,
    k: int,
    start: int = 0,
    order: Sequence[int] | IntArray | None = None,
    min_dist: FloatArray | None = None,
) -> tuple[IntArray, FloatArray]:
    """Indices of ``k`` points by farthest-point traversal (Gonzalez), continuing ``order``.

    Returns ``(order, min_dist)``: the landmark indices and each point's squared distance to
    the nearest landmark, which can be passed back to extend the traversal.
    """
    n, d = X.shape
    k = min(k, n)
    columns = [np.ascontiguousarray(X[:, j]) for j in range(d)]
    sq, diff = np.empty(n), np.empty(n)

    def distances(i: int) -> FloatArray:
        # squared distances to point i, a coordinate at a time into preallocated arrays: the
        # same sums as np.sum((X - X[i]) ** 2, axis=1), without its n x d temporaries
        sq.fill(0.0)
        for col in columns:
            np.subtract(col, col[i], out=diff)
            np.multiply(diff, diff, out=diff)
            np.add(sq, diff, out=sq)
        return sq

    if order is None or min_dist is None:
        order = [int(start)]
        min_dist = distances(int(start)).copy()
    taken = list(order)
    dist = min_dist
    while len(taken) < k:
        nxt = int(np.argmax(dist))
        if dist[nxt] <= 0.0:  # all remaining points duplicate a landmark
            break
        taken.append(nxt)
        np.minimum(dist, distances(nxt), out=dist)
    return np.asarray(taken, dtype=np.intp), dist


class NystromPreconditioner:
    """:math:`P = LL^T + \\sigma^2 I` on farthest-point landmarks, applied by Woodbury.

    Parameters
    ----------
    scaled : ndarray of shape (n, d)
        Training inputs divided by the length scales.
    signal_variance, noise_variance : float
        :math:`\\sigma_f^2` and :math:`\\sigma^2`.
    rank : int
        Number of landmarks (capped by n and by :data:`MAX_FACTOR_ELEMENTS`).

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.kernels._gp_precond import NystromPreconditioner, rbf_block
    >>> X = np.random.default_rng(0).uniform(size=(300, 2)) * 5
    >>> P = NystromPreconditioner(X, 1.0, 0.01, rank=40)
    >>> v = np.ones(300)
    >>> Pd = P.factor @ P.factor.T + 0.01 * np.eye(300)
    >>> bool(np.allclose(P.solve(v), np.linalg.solve(Pd, v)))
    True
    """

    _order: IntArray | None
    _min_dist: FloatArray | None

    def __init__(
        self,
        scaled: FloatArray,
        signal_variance: float,
        noise_variance: float,
        rank: int,
        traversal: tuple[IntArray, FloatArray] | None = None,
    ) -> None:
        self.scaled = scaled
        self.signal_variance = float(signal_variance)
        self.noise_variance = float(noise_variance)
        # a farthest-point traversal already made (by :func:`residual_variance_estimate`)
        self._order, self._min_dist = traversal if traversal is not None else (None, None)
        self.build(rank)

    @staticmethod
    def max_rank(n: int, fraction: float = 0.25) -> int:
        """The rank cap: ``fraction`` of the points, at most 2,048 and 6e7 / n."""
        return int(max(1, min(max(int(n * fraction), 1), MAX_RANK, MAX_FACTOR_ELEMENTS // max(n, 1))))

    def build(self, rank: int, fraction: float = 0.25) -> NystromPreconditioner:
        """(Re)build with ``rank`` landmarks, continuing the farthest-point traversal."""
        n = self.scaled.shape[0]
        rank = int(min(max(rank, 1), self.max_rank(n, fraction)))
        order, self._min_dist = farthest_points(self.scaled, rank, 0, self._order, self._min_dist)
        self._order = order
        S = self.scaled[order]
        kss = rbf_block(S, S, self.signal_variance)
        # pivoted Cholesky of K_SS drops landmarks that add nothing numerically
        c, piv, r, _ = dpstrf(kss, lower=1, tol=1e-10 * self.signal_variance)
        piv = piv[:r] - 1
        C = np.tril(c[:r, :r])
        self.landmarks = order[piv]
        S = S[piv]
        L = np.empty((n, r))
        step = max(1, 4_000_000 // max(r, 1))
        for a in range(0, n, step):
            blk = rbf_block(self.scaled[a : a + step], S, self.signal_variance)
            L[a : a + step] = solve_triangular(C, blk.T, lower=True).T
        self.factor = L  # L = K_XS C^-T, L L^T = K_XS K_SS^-1 K_SX
        self._chol_landmarks = C
        gram = L.T @ L
        gram[np.diag_indices_from(gram)] += self.noise_variance
        inner = cholesky(gram, lower=True)  # C C^T = sigma^2 I + L^T L
        self._inner_logdet = 2.0 * float(np.sum(np.log(np.diag(inner))))
        self._woodbury = solve_triangular(inner, L.T, lower=True).T  # L C^-T
        self.residual_variance = max(0.0, float(self.signal_variance - np.min(np.einsum("ij,ij->i", L, L))))
        return self

    @property
    def rank(self) -> int:
        return self.factor.shape[1]

    @property
    def n_visited(self) -> int:
        """Points the farthest-point traversal has taken (landmarks before pivoting)."""
        return 0 if self._order is None else len(self._order)

    def extension(self, kernel_to_landmarks: FloatArray) -> FloatArray:
        """c* with k(X, x*) ~ L c* (the Nystrom extension), from k(S, x*) as rows (m x rank)."""
        return solve_triangular(self._chol_landmarks, kernel_to_landmarks.T, lower=True).T

    def solve(self, V: FloatArray) -> FloatArray:
        """P^{-1} V by Woodbury (V of shape (n,) or (n, m))."""
        W = self._woodbury
        return (V - W @ (W.T @ V)) / self.noise_variance

    def logdet(self) -> float:
        """log det P = log det(sigma^2 I + L^T L) + (n - rank) log sigma^2."""
        n = self.scaled.shape[0]
        return self._inner_logdet + (n - self.rank) * float(np.log(self.noise_variance))

    def sample(self, g_low: FloatArray, g_full: FloatArray) -> FloatArray:
        """z = L g_low + sigma g_full ~ N(0, P) for standard normal g_low (rank x m), g_full (n x m)."""
        return self.factor @ g_low[: self.rank] + np.sqrt(self.noise_variance) * g_full


def residual_variance_estimate(
    scaled: FloatArray,
    signal_variance: float,
    rank: int,
    n_far: int = 64,
    n_random: int = 512,
    random_state: int = 0,
) -> tuple[float, tuple[IntArray, FloatArray]]:
    """The largest residual variance :math:`\\sigma_f^2 - k_{xS}K_{SS}^{-1}k_{Sx}` of the Nystrom
    factor on ``rank`` farthest-point landmarks, over a sample of the points, without forming
    the N x rank factor: the ``n_far`` points farthest from the landmarks (where the largest
    residual is, since it grows with the distance to the nearest landmark) and ``n_random``
    others drawn at random.

    Returns the estimate and the traversal ``(order, min_dist)``, which
    :class:`NystromPreconditioner` can continue (``traversal=``) so that the factor, when it is
    needed, has the same landmarks and the same residual at the sampled points.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.kernels._gp_precond import NystromPreconditioner, residual_variance_estimate
    >>> X = np.random.default_rng(0).uniform(size=(2000, 3)) * 6
    >>> rho, traversal = residual_variance_estimate(X, 1.0, 100)
    >>> P = NystromPreconditioner(X, 1.0, 0.01, 100, traversal=traversal)
    >>> bool(0.9 * P.residual_variance <= rho <= P.residual_variance)
    True
    """
    n = scaled.shape[0]
    sf2 = float(signal_variance)
    rank = int(min(max(rank, 1), n))
    order, min_dist = farthest_points(scaled, rank, 0)
    kss = rbf_block(scaled[order], scaled[order], sf2)
    c, piv, r, _ = dpstrf(kss, lower=1, tol=1e-10 * sf2)
    C = np.tril(c[:r, :r])
    S = order[piv[:r] - 1]
    far = np.argpartition(min_dist, max(n - n_far, 0))[max(n - n_far, 0) :]
    rng = np.random.default_rng(random_state)
    sample = np.union1d(far, rng.choice(n, size=min(n, n_random), replace=False))
    B = solve_triangular(C, rbf_block(scaled[S], scaled[sample], sf2), lower=True)
    rho = max(0.0, float(sf2 - np.min(np.einsum("ij,ij->j", B, B))))
    return rho, (order, min_dist)
