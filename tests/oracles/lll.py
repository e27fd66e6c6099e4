"""NumPy oracles of the Locally Linear Landmarks kernels (vastml.embed._lll_core): the same
quantities by the plain route (scikit-learn neighbours and batched solves, SciPy sparse
products), used only by tests/test_lll.py."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.neighbors import NearestNeighbors

_CHUNK = 4096  # points per batched Gram solve (bounds memory at chunk * K_Z * D floats)


def weight_pieces(X, landmarks, n_neighbors, *, reg=1e-3):
    """(indices N x K_Z uint32, weights N x K_Z, L) of the LLE reconstruction weights:
    G + max(reg, 1e-12) tr(G) I, G z = 1, rescaled to sum one; a point on a landmark gets
    that landmark's unit vector."""
    X = np.asarray(X, dtype=np.float64)
    Lm = np.asarray(landmarks, dtype=np.float64)
    K = int(n_neighbors)
    n = X.shape[0]
    r = max(float(reg), 1e-12)
    dist, nbr = NearestNeighbors(n_neighbors=K).fit(Lm).kneighbors(X)
    W = np.empty((n, K))
    ones = np.ones(K)
    for s in range(0, n, _CHUNK):
        e = min(n, s + _CHUNK)
        diff = X[s:e, None, :] - Lm[nbr[s:e]]  # (c, K, d)
        G = diff @ diff.transpose(0, 2, 1)  # (c, K, K)
        tr = np.trace(G, axis1=1, axis2=2)
        scale = np.where(tr > 0, tr, 1.0) * r
        G[:, np.arange(K), np.arange(K)] += scale[:, None]
        w = np.linalg.solve(G, np.broadcast_to(ones, (e - s, K))[..., None])[..., 0]
        W[s:e] = w / w.sum(axis=1, keepdims=True)
    hit = dist[:, 0] == 0.0  # coincident with a landmark: reconstruct by that landmark exactly
    if hit.any():
        W[hit] = 0.0
        W[hit, 0] = 1.0
    return nbr.astype(np.uint32), W, Lm.shape[0]


def pieces_to_csr(nbr, W, n_landmarks):
    """Z (L x N, CSR) from per-point landmark indices and weights."""
    n, K = W.shape
    rows = np.asarray(nbr, dtype=np.int64).ravel()
    cols = np.repeat(np.arange(n), K)
    return sp.csr_matrix((W.ravel(), (rows, cols)), shape=(n_landmarks, n))


def reconstruction_weights(X, landmarks, n_neighbors, *, reg=1e-3):
    """Z (L x N, CSR) by :func:`weight_pieces`."""
    nbr, W, L = weight_pieces(X, landmarks, n_neighbors, reg=reg)
    return pieces_to_csr(nbr, W, L)


def reduced_matrix(nbr, W, n_landmarks, *, diag=None, M=None, keep_rows=False, symmetric=False):
    """``Z (diag(v) + M) Z^T`` by SciPy products (with ``symmetric=True`` of the upper
    triangle of M mirrored, what the upper-triangle kernel computes); with ``keep_rows`` also
    ``(diag(v) + M) Z^T``."""
    n = W.shape[0]
    if symmetric and M is not None:
        U = sp.triu(M, k=1, format="csr")
        M = (U + U.T + sp.diags(M.diagonal())).tocsr()
    Z = pieces_to_csr(nbr, W, n_landmarks)
    T = sp.csr_matrix((n, n_landmarks))
    if diag is not None:
        T = T + sp.diags(diag) @ Z.T
    if M is not None:
        T = T + M @ Z.T
    out = np.asarray((Z @ T).todense())
    return (out, sp.csr_matrix(T)) if keep_rows else out


def csr_dense_product(M, Y):
    """``M Y``."""
    return np.asarray(M @ Y)


def sym_quadratic_form(M, V):
    """``V^T M V``."""
    return V.T @ np.asarray(M @ V)
