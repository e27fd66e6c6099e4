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
#: The sum method of new points for each ``gradient`` of the fit ("grid": the training
#: points' kernel fields on a grid by one FFT convolution, :class:`GridSums`; 1-D and 2-D,
#: Barnes-Hut above).
SUM_METHOD = {"exact": "exact", "barnes_hut": "barnes_hut", "fgt": "fgt", "fft": "grid"}
#: Most grid nodes per dimension of :class:`GridSums` (the spacing grows beyond).
GRID_MAX_NODES = {1: 1 << 16, 2: 1024}


class GridSums:
    r"""The kernel sums of fixed sources as fields on a regular grid, for new points.

    With the training embedding fixed, :math:`S_0(x) = \sum_m K(\|x - y_m\|^2)`,
    :math:`S_1(x) = \sum_m K^q` and :math:`S_x(x) = \sum_m K^q y_m` are fixed functions of
    the new point's position x. They are computed once on a grid (sources spread to their
    nearest nodes with bilinear weights, one FFT convolution with the kernel sampled on the
    grid; the FFT interpolation idea of FIt-SNE), O(N + G log G), and read at any target by
    cubic-spline interpolation, O(1) per target and call. Targets outside the grid (beyond
    ``margin`` around the sources) fall back to ``fallback`` (a :class:`vastml._core.SourceSums`).
    ``spacing`` (default 0.1 embedding units, coarser when the grid would exceed
    :data:`GRID_MAX_NODES`) sets the accuracy: the error is O(spacing^2).
    """

    def __init__(self, Y, kernel, *, spacing=0.1, margin=4.0, fallback=None):
        import scipy.fft as sfft
        from scipy import ndimage

        Y = np.asarray(Y, dtype=np.float64)
        n, d = Y.shape
        if d not in GRID_MAX_NODES:
            raise ValueError("GridSums handles 1-D and 2-D embeddings")
        self.kernel, self.fallback = kernel, fallback
        lo = Y.min(axis=0) - margin
        span = float((Y.max(axis=0) + margin - lo).max())
        h = max(spacing, span / (GRID_MAX_NODES[d] - 1))
        shape = tuple(int(np.ceil((Y[:, c].max() + margin - lo[c]) / h)) + 2 for c in range(d))
        self.lo, self.h, self.shape = lo, h, shape
        # bilinear spreading of the weights 1 and y_c to the 2^d nearest nodes
        u = (Y - lo) / h
        base = np.floor(u).astype(np.int64)
        frac = u - base
        chans = [np.ones(n)] + [Y[:, c] for c in range(d)]
        grids = [np.zeros(int(np.prod(shape))) for _ in chans]
        for corner in range(1 << d):
            w = np.ones(n)
            flat = np.zeros(n, dtype=np.int64)
            for c in range(d):
                bit = (corner >> c) & 1
                w = w * (frac[:, c] if bit else 1.0 - frac[:, c])
                flat = flat * shape[c] + base[:, c] + bit
            for g, v in zip(grids, chans):
                g += np.bincount(flat, weights=w * v, minlength=g.size)
        grids = [g.reshape(shape) for g in grids]
        # circular convolution over a period >= 2m - 1 (the kernel wrapped), i.e. the
        # linear one on the m nodes: each FFT once (the sources' and the two kernels')
        L = tuple(sfft.next_fast_len(2 * m - 1, real=True) for m in shape)
        axes = []
        for m, Lc in zip(shape, L):
            j = np.arange(Lc)
            off = np.where(j < m, j, j - Lc).astype(float) * h
            axes.append(np.where((j < m) | (j > Lc - m), off, np.inf))
        offs = np.meshgrid(*axes, indexing="ij")
        t = sum(o * o for o in offs)
        K = np.exp(-t) if kernel == "gaussian" else 1.0 / (1.0 + t)
        Kq = K if kernel == "gaussian" else K * K
        fk, fkq = sfft.rfftn(K, workers=-1), sfft.rfftn(Kq, workers=-1)
        del K, Kq, t, offs
        cut = tuple(slice(0, m) for m in shape)

        def conv(g, fker):
            return sfft.irfftn(sfft.rfftn(g, s=L, workers=-1) * fker, s=L, workers=-1)[cut]

        f0 = sfft.rfftn(grids[0], s=L, workers=-1)
        fields = [sfft.irfftn(f0 * fk, s=L, workers=-1)[cut]]
        fields.append(sfft.irfftn(f0 * fkq, s=L, workers=-1)[cut])
        del f0
        fields += [conv(g, fkq) for g in grids[1:]]
        self._coef = [ndimage.spline_filter(f, order=3) for f in fields]

    def at(self, targets, n_jobs=None):
        from scipy import ndimage

        T = np.asarray(targets, dtype=np.float64)
        u = ((T - self.lo) / self.h).T
        inside = np.all((u >= 1) & (u <= np.array(self.shape)[:, None] - 2), axis=0)
        vals = [
            ndimage.map_coordinates(c, u[:, inside], order=3, prefilter=False) for c in self._coef
        ]
        m, d = T.shape
        s0, s1, sx = np.empty(m), np.empty(m), np.empty((m, d))
        s0[inside], s1[inside] = vals[0], vals[1]
        sx[inside] = np.stack(vals[2:], axis=1)
        if not inside.all():
            f0, f1, fx = self.fallback.at(np.ascontiguousarray(T[~inside]), n_jobs)
            s0[~inside], s1[~inside], sx[~inside] = f0, f1, fx
        return s0, s1, sx


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


def _neighbour_coords(Ynb):
    """The neighbours' coordinates ``Ytrain[idx]`` (m, k, d) as d contiguous (m, k) arrays:
    the objective's sums then run along the contiguous neighbour axis (a reduction over the
    short last axis of an (m, k, d) array is several times slower)."""
    return [np.ascontiguousarray(Ynb[:, :, c]) for c in range(Ynb.shape[2])]


def _sums_objective(model, lam, Xn, Ytrain, idx, p, sums, n_jobs=None, Ynb=None):
    """f(x) and its gradient for a block of new points from the N-body sums of
    ``sums`` (a :class:`vastml._core.SourceSums` or :class:`GridSums` over the training
    embedding): the same objective as :func:`_point_objective` without the M x N matrix.
    ``Ynb``: ``Ytrain[idx]`` (m, k, d), or its :func:`_neighbour_coords`, gathered once by
    the caller."""
    if Ynb is None:
        Ynb = Ytrain[idx]
    if not isinstance(Ynb, list):
        Ynb = _neighbour_coords(Ynb)
    d = Xn.shape[1]
    diffs = [Xn[:, c, None] - Ynb[c] for c in range(d)]  # d arrays (m, k)
    t_nb = diffs[0] * diffs[0]
    for dc in diffs[1:]:
        t_nb += dc * dc
    s0, s1, sx = sums.at(np.ascontiguousarray(Xn), n_jobs)
    bad = ~(s0 > 0)
    if bad.any():
        # a point so far from every training point that its Gaussian sum underflows:
        # the dense path, which shifts by the nearest distance (rare; only those rows)
        f_b, g_b = _point_objective(model, lam, Xn[bad], Ytrain, idx[bad], p[bad])
        good = ~bad
        f_g, g_g = _sums_objective(
            model, lam, Xn[good], Ytrain, idx[good], p[good], sums, n_jobs,
            [c[good] for c in Ynb],
        )
        g = np.empty_like(Xn)
        g[bad], g[good] = g_b, g_g
        return f_b + f_g, g
    rep_grad = Xn * s1[:, None] - sx  # sum_n K^q (x - y_n)
    if model == "tsne":
        att = float((p * np.log1p(t_nb)).sum())
        wgt = p / (1.0 + t_nb)
    else:
        att = float(np.vdot(p, t_nb))
        wgt = p
    g_att = np.empty_like(Xn)
    for c, dc in enumerate(diffs):
        g_att[:, c] = np.einsum("mk,mk->m", wgt, dc)
    g_att *= 2.0
    if model == "tsne":
        return att + float(np.log(s0).sum()), g_att - 2.0 * rep_grad / s0[:, None]
    if model == "ee":
        return att + lam * float(s0.sum()), g_att - 2.0 * lam * rep_grad
    return att + float(np.log(s0).sum()), g_att - 2.0 * rep_grad / s0[:, None]


def source_sums(model, Ytrain, gradient, *, theta=0.5, epsilon=1e-6):
    """The kernel sums over the training embedding at new points for the fit's ``gradient``
    (see :data:`SUM_METHOD`): a :class:`vastml._core.SourceSums` or a :class:`GridSums`."""
    kernel = "student" if model == "tsne" else "gaussian"
    method = SUM_METHOD[gradient]
    if method == "grid":
        bh = _core.SourceSums(Ytrain, kernel, "barnes_hut", float(theta), float(epsilon))
        if Ytrain.shape[1] not in GRID_MAX_NODES:
            return bh
        return GridSums(Ytrain, kernel, fallback=bh)
    return _core.SourceSums(Ytrain, kernel, method, float(theta), float(epsilon))


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
    sums = source_sums(model, Ytrain, gradient, theta=theta, epsilon=epsilon)
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
    root = {"perplexity": float(perplexity), "warm": "bounds", "method": "euler", "tol": 1e-10,
            "maxit": 20, "chunk_size": 2048}
    p, *_ = _core.entropic_affinities_knn(
        np.ascontiguousarray(sqdist), np.arange(m, dtype=np.int64), root, n_jobs=n_jobs
    )
    out = np.empty((m, Ytrain.shape[1]))
    for a in range(0, m, _CHUNK):
        b = min(m, a + _CHUNK)
        pi, ii = p[a:b], idx[a:b]
        Ynb = _neighbour_coords(Ytrain[ii])
        x0 = np.stack([np.einsum("mk,mk->m", pi, c) for c in Ynb], axis=1)
        shape = x0.shape

        def fun(x, pi=pi, ii=ii, shape=shape, Ynb=Ynb):
            f, g = _sums_objective(
                model, lam, x.reshape(shape), Ytrain, ii, pi, sums, n_jobs, Ynb
            )
            return f, g.ravel()

        res = scipy_minimize(
            fun, x0.ravel(), jac=True, method="L-BFGS-B", options={"maxiter": max_iter}
        )
        out[canon[a:b]] = res.x.reshape(shape)
    return out
