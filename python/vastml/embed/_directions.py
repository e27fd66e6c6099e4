r"""The Hessian of the embedding objectives and the partial-Hessian directions built from it
(thesis §3.2-3.3).

In Laplacian form (thesis eq. 3.3, rows of X as points, index ``n * d + i``)

.. math::

    \nabla^2 E = 4 L \otimes I_d + 8 L^{xx} - (\text{rank terms of the normalisers}),

with :math:`L` the Laplacian of the weights :math:`w_{nm}` of the gradient :math:`G = 4 L X`,
:math:`L^{xx}` the :math:`Nd \times Nd` Laplacian of :math:`c_{nm} \Delta_i \Delta_j`
(:math:`\Delta = x_n - x_m`) and the rank terms :math:`16 \lambda\, v v^T`,
:math:`v = \mathrm{vec}(L^q X)` for symmetric SNE / t-SNE and :math:`\lambda \sum_n a_n a_n^T`,
:math:`a_n = \sum_k q_{k|n} \nabla t_{nk}` for SNE (one per point's normaliser).

The positive semidefinite pieces give the partial-Hessian directions: DiagH (the diagonal of
:math:`4 L^+ \otimes I + 8 L^{xx}_{+}`) and SD- (the same-dimension blocks of that matrix,
solved by preconditioned conjugate gradients with the spectral factor as preconditioner).
Everything here is dense, O(N^2 d) per call like the exact gradient, for up to
:data:`DENSE_MAX` points.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from vastml._validation import as_points, check_float, check_objective

if TYPE_CHECKING:
    from vastml._typing import ArrayLike, FloatArray

#: Largest N for the dense Hessian pieces (a few N x N float64 arrays).
DENSE_MAX = 6000


def _dense_attraction(objective):
    W = objective.W
    A = W.toarray() if hasattr(W, "toarray") else np.asarray(W)
    A = np.asarray(A, dtype=np.float64)
    np.fill_diagonal(A, 0.0)
    return A * getattr(objective, "attraction_scale", 1.0)


class _Pieces:
    """The pairwise weights of one model at one X (dense N x N)."""

    def __init__(self, objective, X):
        check_objective(objective, ("model", "repulsion_weight", "W"))
        X = as_points(X, "X", allow_1d=False)
        n = X.shape[0]
        if n > DENSE_MAX:
            raise ValueError(
                f"the Hessian pieces are dense: at most {DENSE_MAX} points, got {n}"
            )
        model, lam = objective.model, float(objective.repulsion_weight)
        P = _dense_attraction(objective)
        if P.shape[0] != n:
            raise ValueError(f"`X` has {n} points but the objective's weights have {P.shape[0]}")
        sq = np.einsum("ij,ij->i", X, X)
        t = np.maximum(sq[:, None] + sq[None, :] - 2.0 * X @ X.T, 0.0)
        np.fill_diagonal(t, 0.0)
        off = ~np.eye(n, dtype=bool)
        self.X, self.model, self.lam = X, model, lam
        self.rank = None  # (vectors, coefficient): H -= coefficient * sum v v^T
        if model == "ee":
            K = np.exp(-t) * off
            self.w = P - lam * K  # weights of 4 L (x) I
            self.a_pos = P  # psd part of those
            self.c = lam * K  # weights of 8 L^xx (times Delta_i Delta_j)
            self.c_pos = self.c
        elif model == "ssne":
            K = np.exp(-t) * off
            q = K / K.sum()
            self.w, self.a_pos = P - lam * q, P
            self.c = self.c_pos = lam * q
            Lq = _laplacian(-q)
            self.rank = ((Lq @ X).ravel()[None, :], 16.0 * lam)
        elif model == "tsne":
            K = off / (1.0 + t)
            q = K / K.sum()
            self.w, self.a_pos = (P - lam * q) * K, P * K
            self.c = -(P - 2.0 * lam * q) * K * K
            self.c_pos = 2.0 * lam * q * K * K
            Lq = _laplacian(-q * K)
            self.rank = ((Lq @ X).ravel()[None, :], 16.0 * lam)
        elif model == "sne":
            # Per-point normalisers: q_{m|n} row-stochastic; the symmetric part enters L.
            tt = t + np.where(off, 0.0, np.inf)
            tmin = tt.min(axis=1, keepdims=True)
            K = np.exp(-(tt - tmin))
            Qc = K / K.sum(axis=1, keepdims=True)
            qbar = 0.5 * (Qc + Qc.T)
            self.w, self.a_pos = P - lam * qbar, P
            self.c = self.c_pos = lam * qbar
            # a_n = sum_k q_{k|n} grad t_nk: 2 sum_k q Delta at block n, -2 q Delta at block k.
            d = X.shape[1]
            Delta = X[:, None, :] - X[None, :, :]  # (n, k, d)
            A = np.zeros((n, n, d))
            A[np.arange(n), np.arange(n)] = 2.0 * np.einsum("nk,nkd->nd", Qc, Delta)
            A -= 2.0 * Qc[:, :, None] * Delta
            self.rank = (A.reshape(n, n * d), lam)
        else:  # pragma: no cover - EmbeddingObjective validates the model
            raise ValueError(f"unknown model {model!r}")


def _laplacian(W):
    return np.diag(W.sum(axis=1)) - W


def embedding_hessian(objective: Any, X: ArrayLike) -> FloatArray:
    r"""The full Hessian :math:`\nabla^2 E` at ``X`` (dense, shape ``(N d, N d)``, index
    ``n * d + i``) of an exact :class:`EmbeddingObjective` (EE, SNE, symmetric SNE or
    t-SNE), with its ``repulsion_weight`` and ``attraction_scale``.

    Thesis eq. (3.3)-(3.4): :math:`4 L \otimes I_d + 8 L^{xx}` minus the rank terms of the
    normalisers (see the module docs). O(N^2 d^2) memory.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from vastml.embed import EmbeddingObjective, embedding_hessian
    >>> W = sp.csr_array(np.array([[0, 1.0], [1.0, 0]]))
    >>> H = embedding_hessian(EmbeddingObjective("ee", W, repulsion_weight=0.0), np.zeros((2, 1)))
    >>> H.tolist()
    [[4.0, -4.0], [-4.0, 4.0]]
    """
    pc = _Pieces(objective, X)
    X = np.asarray(pc.X, dtype=np.float64)
    n, d = X.shape
    H4 = np.zeros((n, d, n, d))
    L = _laplacian(pc.w)
    for i in range(d):
        H4[:, i, :, i] += 4.0 * L
    Delta = X[:, None, :] - X[None, :, :]
    for i in range(d):
        for j in range(d):
            Wij = pc.c * Delta[:, :, i] * Delta[:, :, j]
            H4[:, i, :, j] += 8.0 * _laplacian(Wij)
    H = H4.reshape(n * d, n * d)
    if pc.rank is not None:
        V, coef = pc.rank
        H -= coef * V.T @ V
    return H


def diag_hessian(objective: Any, X: ArrayLike, ridge: float = 0.0) -> FloatArray:
    r"""The diagonal of the positive semidefinite part of the Hessian (the DiagH matrix of
    thesis §3.3), shape ``(N, d)``: :math:`4 \sum_m w^+_{nm} + 8 \sum_m c^+_{nm}
    (x_{in} - x_{im})^2 + \mu`, :math:`\mu` = ``ridge``.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from vastml.embed import EmbeddingObjective
    >>> W = sp.csr_array(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]]) / 4.0)
    >>> f = EmbeddingObjective("ee", W, repulsion_weight=0.1)
    >>> X = np.array([[0.0, 1], [1, 0], [2, 2]])
    >>> D = diag_hessian(f, X)
    >>> D.shape, bool((D > 0).all())
    ((3, 2), True)
    """
    check_float(ridge, "ridge", low=0)
    pc = _Pieces(objective, X)
    Delta2 = (pc.X[:, None, :] - pc.X[None, :, :]) ** 2
    return 4.0 * pc.a_pos.sum(axis=1)[:, None] + 8.0 * np.einsum("nm,nmd->nd", pc.c_pos, Delta2) + ridge


class DiagHessianDirection:
    r"""DiagH: :math:`P = -G / \mathrm{diag}(B)`, B the psd part of the Hessian (thesis
    §3.3; "about the fixed point in practice"). O(N^2 d) per direction (dense). The ridge
    :math:`\mu` added to the diagonal is ``relative_ridge`` times 4 times the smallest positive
    degree of the attraction (relative, so that it scales with the weights).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from vastml.embed import EmbeddingObjective
    >>> W = sp.csr_array(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]]) / 4.0)
    >>> f = EmbeddingObjective("ee", W, repulsion_weight=0.1)
    >>> X = np.array([[0.0, 1], [1, 0], [2, 2]])
    >>> E, G = f(X)
    >>> P = DiagHessianDirection(f)(G, X)
    >>> bool(np.vdot(G, P) < 0)
    True
    """

    needs_x = True

    def __init__(self, objective: Any, relative_ridge: float = 1e-10) -> None:
        self.objective = objective
        deg = _dense_attraction(objective).sum(axis=1)
        pos = deg[deg > 0]
        self.mu = relative_ridge * 4.0 * (pos.min() if pos.size else 1.0)

    def __call__(self, G: ArrayLike, X: ArrayLike) -> FloatArray:
        """The direction for the gradient G at the embedding X."""
        return -np.asarray(G) / diag_hessian(self.objective, X, self.mu)


class PartialHessianCG:
    r"""SD-: the same-dimension blocks of the psd part of the Hessian,
    :math:`B_i = 4 L^+ + 8 L^{xx}_{+,ii} + \mu I` for each output dimension i, solved for
    :math:`B_i p_i = -g_i` by conjugate gradients preconditioned with the cached spectral
    factor :math:`(4 L^+_\kappa + \mu I)^{-1}` (thesis §3.3: relative residual ``rtol`` =
    0.1 or ``max_cg`` = 50 iterations). ``n_cg`` counts the CG iterations of all calls.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from vastml.embed import EmbeddingObjective
    >>> W = sp.csr_array(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]]) / 4.0)
    >>> f = EmbeddingObjective("ee", W, repulsion_weight=0.1)
    >>> X = np.array([[0.0, 1], [1, 0], [2, 2]])
    >>> from vastml.embed import SpectralDirection
    >>> E, G = f(X)
    >>> sd_minus = PartialHessianCG(f, SpectralDirection(W))
    >>> bool(np.vdot(G, sd_minus(G, X)) < 0), sd_minus.n_cg > 0
    (True, True)
    """

    needs_x = True

    def __init__(
        self,
        objective: Any,
        preconditioner: Any,
        *,
        rtol: float = 0.1,
        max_cg: int = 50,
    ) -> None:
        self.objective = objective
        self.pre = preconditioner
        self.mu = getattr(preconditioner, "mu", 0.0)
        self.rtol, self.max_cg = float(rtol), int(max_cg)
        self.n_cg = 0

    def __call__(self, G: ArrayLike, X: ArrayLike) -> FloatArray:
        """The direction for the gradient G at the embedding X."""
        pc = _Pieces(self.objective, X)
        G = np.asarray(G, dtype=np.float64)
        n, d = G.shape
        La = _laplacian(pc.a_pos)
        Delta = pc.X[:, None, :] - pc.X[None, :, :]
        P = np.empty_like(G)
        for i in range(d):
            B = 4.0 * La + 8.0 * _laplacian(pc.c_pos * Delta[:, :, i] ** 2)
            B[np.diag_indices(n)] += self.mu
            P[:, i] = self._pcg(B, -G[:, i])
        return P

    def _pcg(self, B, b):
        x = np.zeros_like(b)
        r = b.copy()
        bnorm = np.linalg.norm(b)
        if bnorm == 0.0:
            return x
        z = -self.pre(r[:, None])[:, 0]
        p = z.copy()
        rz = r @ z
        for _ in range(self.max_cg):
            Bp = B @ p
            alpha = rz / (p @ Bp)
            x += alpha * p
            r -= alpha * Bp
            self.n_cg += 1
            if np.linalg.norm(r) <= self.rtol * bnorm:
                break
            z = -self.pre(r[:, None])[:, 0]
            rz_new = r @ z
            p = z + (rz_new / rz) * p
            rz = rz_new
        return x
