"""Out-of-sample embedding of new points with the training embedding fixed (thesis §5.4)."""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize as scipy_minimize

from vastml import _core

_CHUNK = 256


def _point_objective(model, lam, Xn, Ytrain, idx, p):
    """f(x) and its gradient for a block of new points, training embedding fixed.

    tsne: sum_j p_j log(1 + t_j) + log sum_n 1/(1 + t_n); ssne: sum_j p_j t_j + log sum_n
    exp(-t_n); ee / sne: sum_j p_j t_j + lam sum_n exp(-t_n) (ee) or log-sum (sne); t =
    squared distance to the training points, j over the point's neighbours.
    """
    m, d = Xn.shape
    diff_nb = Xn[:, None, :] - Ytrain[idx]  # (m, k, d)
    t_nb = np.einsum("mkd,mkd->mk", diff_nb, diff_nb)
    t = (
        np.einsum("md,md->m", Xn, Xn)[:, None]
        - 2.0 * Xn @ Ytrain.T
        + np.einsum("nd,nd->n", Ytrain, Ytrain)[None, :]
    )
    np.maximum(t, 0.0, out=t)
    if model == "tsne":
        att = (p * np.log1p(t_nb)).sum()
        g_att = 2.0 * np.einsum("mk,mkd->md", p / (1.0 + t_nb), diff_nb)
        K = 1.0 / (1.0 + t)
        Z = K.sum(axis=1)
        rep = np.log(Z).sum()
        K2 = K * K
        g_rep = -2.0 * (Xn * K2.sum(axis=1)[:, None] - K2 @ Ytrain) / Z[:, None]
        return att + rep, g_att + g_rep
    att = (p * t_nb).sum()
    g_att = 2.0 * np.einsum("mk,mkd->md", p, diff_nb)
    # Shift by the nearest distance so that far points do not underflow to log 0.
    tmin = t.min(axis=1, keepdims=True)
    K = np.exp(-(t - tmin))
    S = K.sum(axis=1)
    KX = Xn * S[:, None] - K @ Ytrain
    if model == "ee":
        scale = np.exp(-tmin[:, 0])
        return att + lam * float((S * scale).sum()), g_att - 2.0 * lam * KX * scale[:, None]
    rep = float((np.log(S) - tmin[:, 0]).sum())
    return att + rep, g_att - 2.0 * KX / S[:, None]


def embed_new_points(model, lam, Ytrain, sqdist, idx, perplexity, *, max_iter=200, n_jobs=None):
    """Embeds new points given their squared distances and indices to their nearest
    training points: entropic affinities to the neighbours, start at the affinity-weighted
    mean of the neighbours' embeddings, then L-BFGS on the (separable) objective."""
    m = sqdist.shape[0]
    # The points are optimised in chunks, jointly (one L-BFGS run, BLAS products over the
    # chunk), so rounding, and with it where L-BFGS stops, depends on which rows come where.
    # Processing them in a canonical order (by their distances, then their neighbours) makes
    # the result not depend on the order of the batch: transform(X[perm]) == transform(X)[perm]
    # exactly (OpenBLAS's AVX-512 kernels give a row's products different rounding at
    # different positions, which L-BFGS grew to 1e-3).
    sqdist, idx = np.asarray(sqdist), np.asarray(idx)
    canon = np.lexsort(tuple(idx.T[::-1]) + tuple(sqdist.T[::-1]))
    sqdist, idx = sqdist[canon], idx[canon]
    # Each row starts from its own bounds (no warm start from the previous row), so a new
    # point's affinities do not depend on which other points come with it, or in what order.
    p, *_ = _core.entropic_affinities_knn(
        np.ascontiguousarray(sqdist),
        float(perplexity),
        np.arange(m, dtype=np.int64),
        warm="bounds",
        n_jobs=n_jobs,
    )
    out = np.empty((m, Ytrain.shape[1]))
    for a in range(0, m, _CHUNK):
        b = min(m, a + _CHUNK)
        pi, ii = p[a:b], idx[a:b]
        x0 = np.einsum("mk,mkd->md", pi, Ytrain[ii])
        shape = x0.shape

        def fun(x, pi=pi, ii=ii, shape=shape):
            f, g = _point_objective(model, lam, x.reshape(shape), Ytrain, ii, pi)
            return f, g.ravel()

        res = scipy_minimize(
            fun, x0.ravel(), jac=True, method="L-BFGS-B", options={"maxiter": max_iter}
        )
        out[canon[a:b]] = res.x.reshape(shape)
    return out
