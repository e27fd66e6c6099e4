"""Low-rank-plus-diagonal preconditioner for GP systems: Nystrom on farthest-point landmarks.

For :math:`\\hat K = K + \\sigma^2 I` the preconditioner is :math:`P = LL^T + \\sigma^2 I` with
:math:`LL^T = K_{XS} K_{SS}^{+} K_{SX}`, the Nystrom approximation of :math:`K` on landmarks
:math:`S` chosen by farthest-point (Gonzalez k-center) traversal in the length-scaled inputs. For
the Gaussian kernel this is the same greedy choice a pivoted Cholesky makes (the pivot is the
point with the largest residual variance, i.e. the one farthest from the landmarks so far), but
the factor is formed with dense blocks (BLAS 3) instead of one column at a time.

:math:`L` is kept as :math:`U\\,\\mathrm{diag}(s)` with orthonormal :math:`U`, so that

- :math:`P^{-1} v = (v - U\\,\\mathrm{diag}(s^2/(s^2+\\sigma^2))\\,U^T v)/\\sigma^2` (Woodbury),
- :math:`\\log\\det P = \\sum_i \\log(s_i^2+\\sigma^2) + (N-k)\\log\\sigma^2`,
- :math:`z = U(s \\odot g_1) + \\sigma g_2 \\sim N(0, P)` for standard normal :math:`g_1, g_2`.
"""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_limits

#: Elements of the N x rank factor we allow (8 bytes each); caps the rank at large N.
MAX_FACTOR_ELEMENTS = 60_000_000


def rbf_block(A, B, signal_variance):
    """sigma_f^2 exp(-||a - b||^2 / 2) between rows of (already length-scaled) A and B."""
    sq = np.einsum("ij,ij->i", A, A)[:, None] + np.einsum("ij,ij->i", B, B)[None, :] - 2.0 * (A @ B.T)
    np.maximum(sq, 0.0, out=sq)
    return signal_variance * np.exp(-0.5 * sq)


def farthest_points(X, k, start=0, order=None, min_dist=None):
    """Indices of ``k`` points by farthest-point traversal (Gonzalez), continuing ``order``.

    Returns ``(order, min_dist)``: the landmark indices and each point's squared distance to
    the nearest landmark, which can be passed back to extend the traversal.
    """
    n = X.shape[0]
    k = min(k, n)
    if order is None:
        order = [int(start)]
        min_dist = np.sum((X - X[start]) ** 2, axis=1)
    order = list(order)
    while len(order) < k:
        nxt = int(np.argmax(min_dist))
        if min_dist[nxt] <= 0.0:  # all remaining points duplicate a landmark
            break
        order.append(nxt)
        np.minimum(min_dist, np.sum((X - X[nxt]) ** 2, axis=1), out=min_dist)
    return np.asarray(order, dtype=np.intp), min_dist


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

    def __init__(self, scaled, signal_variance, noise_variance, rank):
        self.scaled = scaled
        self.signal_variance = float(signal_variance)
        self.noise_variance = float(noise_variance)
        self._order = None
        self._min_dist = None
        self.build(rank)

    @staticmethod
    def max_rank(n):
        return int(max(1, min(n, MAX_FACTOR_ELEMENTS // max(n, 1))))

    def build(self, rank):
        """(Re)build with ``rank`` landmarks, continuing the farthest-point traversal."""
        n = self.scaled.shape[0]
        rank = int(min(max(rank, 1), self.max_rank(n)))
        self._order, self._min_dist = farthest_points(self.scaled, rank, 0, self._order, self._min_dist)
        S = self.scaled[self._order]
        kss = rbf_block(S, S, self.signal_variance)
        with threadpool_limits(1, user_api="blas"):  # small LAPACK calls: threads only contend
            lam, V = np.linalg.eigh(kss)
        keep = lam > 1e-10 * lam[-1]
        W = V[:, keep] / np.sqrt(lam[keep])
        L = np.empty((n, W.shape[1]))
        step = max(1, 4_000_000 // max(len(self._order), 1))
        for a in range(0, n, step):
            L[a : a + step] = rbf_block(self.scaled[a : a + step], S, self.signal_variance) @ W
        with threadpool_limits(1, user_api="blas"):
            s2, E = np.linalg.eigh(L.T @ L)
        keep = s2 > 1e-12 * max(s2[-1], 1e-300)
        s2, E = s2[keep], E[:, keep]
        rotated = L @ E  # = U diag(s), orthogonal columns
        self.basis = rotated / np.sqrt(s2)  # U
        self.sq_singular = s2  # s^2
        # Nystrom extension: k(X, x*) ~ (U diag(s)) c*, c* = extension @ k(S, x*)
        self.extension = E.T @ W.T
        self.landmarks = self._order
        self.residual_variance = max(
            0.0, float(self.signal_variance - np.min(np.einsum("ij,ij->i", L, L)))
        )
        return self

    @property
    def rank(self):
        return self.basis.shape[1]

    @property
    def factor(self):
        """L (n x rank), with LL^T the Nystrom approximation of K."""
        return self.basis * np.sqrt(self.sq_singular)

    def solve(self, V):
        """P^{-1} V by Woodbury (V of shape (n,) or (n, m))."""
        s = self.noise_variance
        shrink = self.sq_singular / (self.sq_singular + s)
        C = self.basis.T @ V
        C = (shrink[:, None] * C) if C.ndim == 2 else shrink * C
        return (V - self.basis @ C) / s

    def logdet(self):
        """log det P."""
        n = self.scaled.shape[0]
        s = self.noise_variance
        return float(np.sum(np.log(self.sq_singular + s)) + (n - self.rank) * np.log(s))

    def sample(self, g_low, g_full):
        """z = L g_low + sigma g_full ~ N(0, P) for standard normal g_low (rank x m), g_full (n x m)."""
        k = self.rank
        return self.basis @ (np.sqrt(self.sq_singular)[:, None] * g_low[:k]) + np.sqrt(
            self.noise_variance
        ) * g_full
