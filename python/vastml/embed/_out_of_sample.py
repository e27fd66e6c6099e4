"""Out-of-sample embedding of new points with the training embedding fixed (thesis §5.4).

Each new point x minimises its own objective against the N fixed training points (eq. 5.9:
attraction to its nearest training points, repulsion from all of them). The repulsion's
kernel sums over the training points are computed for all M new points at once by the same
N-body machinery as the fit (:class:`vastml._core.SourceSums`: exact, Barnes-Hut or the fast
Gauss transform), built once per ``transform``: O(M log N + N log N) with Barnes-Hut,
O(M + N) per evaluation with the fast Gauss transform, never an M x N matrix.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize as scipy_minimize

from vastml import _core

_CHUNK = 4096
#: The sum method of new points for each ``gradient`` of the fit: the FFT interpolation
#: of FIt-SNE sums over all pairs of one set, so new points use Barnes-Hut there.
SUM_METHOD = {"exact": "exact", "barnes_hut": "barnes_hut", "fgt": "fgt", "fft": "barnes_hut"}


def _point_objective(model, lam, Xn, Ytrain, idx, p):
    """f(x) and its gradient for a block of new points, training embedding fixed, by the
    dense O(M N) distance matrix (the reference of :func:`_sums_objective`).

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


def _sums_objective(model, lam, Xn, Ytrain, idx, p, sums, n_jobs=None):
    """f(x) and its gradient for a block of new points from the N-body sums of
    ``sums`` (a :class:`vastml._core.SourceSums` over the training embedding): the same
    objective as :func:`_point_objective` without the M x N matrix."""
    diff_nb = Xn[:, None, :] - Ytrain[idx]  # (m, k, d)
    t_nb = np.einsum("mkd,mkd->mk", diff_nb, diff_nb)
    s0, s1, sx = sums.at(np.ascontiguousarray(Xn), n_jobs)
    bad = ~(s0 > 0)
    if bad.any():
        # a point so far from every training point that its Gaussian sum underflows:
        # the dense path, which shifts by the nearest distance (rare; only those rows)
        f_b, g_b = _point_objective(model, lam, Xn[bad], Ytrain, idx[bad], p[bad])
        good = ~bad
        f_g, g_g = _sums_objective(model, lam, Xn[good], Ytrain, idx[good], p[good], sums, n_jobs)
        g = np.empty_like(Xn)
        g[bad], g[good] = g_b, g_g
        return f_b + f_g, g
    rep_grad = Xn * s1[:, None] - sx  # sum_n K^q (x - y_n)
    if model == "tsne":
        att = float((p * np.log1p(t_nb)).sum())
        g_att = 2.0 * np.einsum("mk,mkd->md", p / (1.0 + t_nb), diff_nb)
        return att + float(np.log(s0).sum()), g_att - 2.0 * rep_grad / s0[:, None]
    att = float((p * t_nb).sum())
    g_att = 2.0 * np.einsum("mk,mkd->md", p, diff_nb)
    if model == "ee":
        return att + lam * float(s0.sum()), g_att - 2.0 * lam * rep_grad
    return att + float(np.log(s0).sum()), g_att - 2.0 * rep_grad / s0[:, None]


def embed_new_points(
    model,
    lam,
    Ytrain,
    sqdist,
    idx,
    perplexity,
    *,
    gradient="exact",
    theta=0.5,
    epsilon=1e-6,
    max_iter=200,
    n_jobs=None,
):
    """Embeds new points given their squared distances and indices to their nearest
    training points: entropic affinities to the neighbours, start at the affinity-weighted
    mean of the neighbours' embeddings, then L-BFGS on the (separable) objective, whose
    repulsion comes from the kernel sums of ``gradient`` (see :data:`SUM_METHOD`; ``theta``
    for Barnes-Hut, ``epsilon`` for the fast Gauss transform) over the training embedding.

    Examples
    --------
    >>> import numpy as np
    >>> Y = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> d2 = np.array([[0.01, 1.0, 1.0]])
    >>> x = embed_new_points("tsne", 1.0, Y, d2, np.array([[0, 1, 2]]), 2.0,
    ...                      gradient="barnes_hut", theta=0.0)
    >>> x.shape
    (1, 2)
    """
    m = sqdist.shape[0]
    Ytrain = np.ascontiguousarray(Ytrain, dtype=np.float64)
    kernel = "student" if model == "tsne" else "gaussian"
    sums = _core.SourceSums(
        Ytrain, kernel, SUM_METHOD[gradient], float(theta), float(epsilon)
    )
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
            f, g = _sums_objective(model, lam, x.reshape(shape), Ytrain, ii, pi, sums, n_jobs)
            return f, g.ravel()

        res = scipy_minimize(
            fun, x0.ravel(), jac=True, method="L-BFGS-B", options={"maxiter": max_iter}
        )
        out[canon[a:b]] = res.x.reshape(shape)
    return out
