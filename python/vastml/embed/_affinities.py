"""Entropic affinities (Vladymyrov & Carreira-Perpinan 2013; thesis chapter 2)."""

from __future__ import annotations

import math
import numbers
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, connected_components, minimum_spanning_tree
from sklearn.neighbors import NearestNeighbors
from sklearn.utils import check_random_state

from vastml import _core
from vastml._core import effective_n_jobs
from vastml._validation import as_points, choice, n_jobs_arg, positive_float

if TYPE_CHECKING:
    from vastml._typing import ArrayLike, FloatArray, IntArray, RandomState

ROOT_METHODS = ("newton", "halley", "euler", "bisection", "brent", "ridders")
ORDERS = ("density", "mst", "msp", "raster", "random", "bounds")


def default_n_neighbors(perplexity: float, n_samples: int) -> int:
    """3 x perplexity (as openTSNE and scikit-learn), at most n_samples - 1."""
    return int(min(n_samples - 1, max(math.ceil(3 * perplexity), math.floor(perplexity) + 2)))


#: Query rows per block of the compact (32-bit) kNN: bounds scikit-learn's temporaries.
KNN_BLOCK = 65_536


def knn_graph(nn: Any, k: int, compact: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Squared distances and indices of the ``k`` nearest other points of every training
    point of the fitted ``NearestNeighbors`` ``nn`` (self excluded, nearest first).

    ``compact``: int32 indices, queried in blocks of ``KNN_BLOCK`` rows, so that no int64
    or unsquared n x k copy is ever alive (at 1M points x 90 neighbours that is 1.4 GB);
    the self match is dropped as scikit-learn's ``kneighbors()`` does (when duplicates
    push it out, the first column). The result equals the int64 path's (tested)."""
    if not compact:
        dist, idx = nn.kneighbors(n_neighbors=k)
        np.square(dist, out=dist)
        return np.ascontiguousarray(dist), np.ascontiguousarray(idx, dtype=np.int64)
    X = nn._fit_X
    n = X.shape[0]
    sqdist = np.empty((n, k), dtype=np.float64)
    idx = np.empty((n, k), dtype=np.int32)
    for s in range(0, n, KNN_BLOCK):
        e = min(n, s + KNN_BLOCK)
        d, i = nn.kneighbors(X[s:e], n_neighbors=k + 1)
        keep = i != np.arange(s, e)[:, None]
        keep[keep.all(axis=1), 0] = False  # self not listed (duplicates): drop the first
        sqdist[s:e] = np.square(d[keep].reshape(e - s, k))
        idx[s:e] = i[keep].reshape(e - s, k)
    return sqdist, idx


#: ``(1 + eps)``-approximate kd-tree search of ``neighbors_method="approx"``: on 10-D Gaussian
#: blobs it keeps the recall of the exact 90-NN graph at 0.997 (200,000 make_blobs points;
#: > 0.99 tested) for 60 % of the exact search's CPU time (33 s vs 55 s CPU at 200,000).
KNN_APPROX_EPS = 0.3
#: From this many points on, ``neighbors_method="auto"`` uses the approximate Rust kNN; below, the
#: exact scikit-learn search (so results for small and moderate N do not change).
AUTO_APPROX_MIN = 200_000
NEIGHBOR_METHODS = ("auto", "exact", "approx")


def rust_knn(
    X: ArrayLike,
    n_neighbors: int,
    eps: float = 0.0,
    n_jobs: int | None = None,
    compact: bool = True,
) -> tuple[FloatArray, IntArray]:
    """Squared distances and indices of each point's ``n_neighbors`` nearest other points
    (self excluded, duplicates included), nearest first, by vastml's parallel kd-tree
    (``vastml_spatial::knn_graph``): exact for ``eps = 0``, else the ``(1 + eps)``-
    approximate search (returned distances are exact). Indices int32 (``compact``) or int64.

    >>> import numpy as np
    >>> X = np.arange(10.0)[:, None]
    >>> d, i = rust_knn(X, 2)
    >>> i[5].tolist(), d[5].tolist()
    ([4, 6], [1.0, 1.0])
    """
    X = as_points(X, "X")
    n = X.shape[0]
    if not (isinstance(n_neighbors, numbers.Integral) and 1 <= n_neighbors < n):
        raise ValueError(
            f"`n_neighbors` must be an int in [1, n_samples - 1 = {n - 1}], got {n_neighbors!r}"
        )
    d, i = _core.knn_graph(np.ascontiguousarray(X), int(n_neighbors), float(eps), n_jobs_arg(n_jobs))
    return d, (i if compact else i.astype(np.int64))


def knn_sqdist(
    X: ArrayLike,
    n_neighbors: int,
    n_jobs: int | None = None,
    compact: bool = False,
    neighbors_method: str = "exact",
) -> tuple[FloatArray, IntArray]:
    """Squared Euclidean distances and indices of each point's ``n_neighbors`` nearest
    other points (self excluded), nearest first, by scikit-learn's ``NearestNeighbors``
    (``compact``: int32 indices, see :func:`knn_graph`), or with ``neighbors_method="approx"``
    (``"auto"`` from ``AUTO_APPROX_MIN`` points on) by :func:`rust_knn` with
    ``KNN_APPROX_EPS``.

    Examples
    --------
    >>> import numpy as np
    >>> d, i = knn_sqdist(np.arange(6.0)[:, None], 2)
    >>> i[0].tolist(), d[0].tolist()
    ([1, 2], [1.0, 4.0])
    """
    X = as_points(X, "X")
    n = X.shape[0]
    if not (isinstance(n_neighbors, numbers.Integral) and 1 <= n_neighbors < n):
        raise ValueError(
            f"`n_neighbors` must be an int in [1, n_samples - 1 = {n - 1}], got {n_neighbors!r}"
        )
    choice(neighbors_method, "neighbors_method", NEIGHBOR_METHODS)
    if neighbors_method == "approx" or (neighbors_method == "auto" and n >= AUTO_APPROX_MIN):
        return rust_knn(X, n_neighbors, KNN_APPROX_EPS, n_jobs, compact)
    # n_jobs=None means all cores here (DESIGN), but one job to scikit-learn.
    nn = NearestNeighbors(n_neighbors=int(n_neighbors), n_jobs=effective_n_jobs(n_jobs)).fit(X)
    return knn_graph(nn, int(n_neighbors), compact)


def _mst_order(sqdist, idx, kappa):
    n = idx.shape[0]
    k = min(kappa, idx.shape[1])
    rows = np.repeat(np.arange(n), k)
    # A tiny offset keeps zero-distance (duplicate) edges in the sparse graph.
    w = np.sqrt(sqdist[:, :k]).ravel() + 1e-300
    g = sp.csr_array((w, (rows, idx[:, :k].ravel())), shape=(n, n))
    tree = minimum_spanning_tree(g.maximum(g.T))
    tree = tree + tree.T
    n_comp, labels = connected_components(tree, directed=False)
    order, parents = [], np.full(n, -1, dtype=np.int64)
    seen = np.zeros(n_comp, dtype=bool)
    for root in range(n):
        c = labels[root]
        if seen[c]:
            continue
        seen[c] = True
        o, pred = breadth_first_order(tree, root, directed=False, return_predecessors=True)
        order.append(o)
        parents[o[1:]] = pred[o[1:]]
    return np.concatenate(order).astype(np.int64), parents


def _msp_order(idx, kappa, rng):
    """Algorithm 2 (minimum spanning path): walk to the nearest unvisited neighbour, jump to
    a random unvisited point when stuck. Neighbours in ``idx`` are sorted nearest first."""
    n = idx.shape[0]
    k = min(kappa, idx.shape[1])
    visited = np.zeros(n, dtype=bool)
    jumps = rng.permutation(n)
    j = 0
    order = np.empty(n, dtype=np.int64)
    i = int(jumps[0])
    for t in range(n):
        visited[i] = True
        order[t] = i
        nxt = -1
        for m in idx[i, :k]:
            if not visited[m]:
                nxt = int(m)
                break
        if nxt < 0:
            while j < n and visited[jumps[j]]:
                j += 1
            if j == n:
                break
            nxt = int(jumps[j])
        i = nxt
    return order


def _raster_order(image_shape, n):
    h, w = image_shape
    if h * w != n:
        raise ValueError(f"`image_shape` {image_shape} does not hold the {n} points")
    grid = np.arange(n).reshape(h, w)
    grid[1::2] = grid[1::2, ::-1]
    return grid.ravel().astype(np.int64)


def warm_start_order(
    order: str | ArrayLike,
    sqdist: FloatArray,
    idx: IntArray,
    perplexity: float,
    *,
    kappa: int | None = None,
    image_shape: tuple[int, int] | None = None,
    random_state: RandomState = None,
) -> tuple[IntArray, IntArray | None, str]:
    """The visiting order of the points and where each starts its root finder.

    Returns ``(order, parents, warm)`` for the Rust solver: ``warm`` is "previous" (from the
    previous point of the order), "parents" (from ``parents[n]``) or "bounds".

    Examples
    --------
    >>> import numpy as np
    >>> d, i = knn_sqdist(np.arange(6.0)[:, None], 3)
    >>> order, parents, warm = warm_start_order("mst", d, i, 2.0)
    >>> sorted(order.tolist()), warm
    ([0, 1, 2, 3, 4, 5], 'parents')
    """
    n = sqdist.shape[0]
    rng = check_random_state(random_state)
    if not isinstance(order, str):
        o = np.asarray(order)
        if (
            o.shape != (n,)
            or not np.issubdtype(o.dtype, np.integer)
            or not np.array_equal(np.sort(o), np.arange(n))
        ):
            raise ValueError(
                "`order` must be one of the named orders or a permutation of range(n_samples)"
            )
        return o.astype(np.int64), None, "previous"
    choice(order, "order", ORDERS)
    if kappa is None:
        kappa = {"density": math.ceil(perplexity), "mst": 30, "msp": 100}.get(order, 30)
    if not (isinstance(kappa, numbers.Integral) and kappa >= 1):
        raise ValueError(f"`order_kappa` must be a positive int, got {kappa!r}")
    kappa = int(min(kappa, sqdist.shape[1]))
    if order == "density":
        return np.argsort(sqdist[:, kappa - 1], kind="stable").astype(np.int64), None, "previous"
    if order == "random":
        return rng.permutation(n).astype(np.int64), None, "previous"
    if order == "bounds":
        return np.arange(n, dtype=np.int64), None, "bounds"
    if order == "raster":
        if image_shape is None:
            raise ValueError(
                "order='raster' needs `image_shape` = (height, width) of the pixel grid"
            )
        return _raster_order(image_shape, n), None, "previous"
    if order == "mst":
        o, parents = _mst_order(sqdist, idx, kappa)
        return o, parents, "parents"
    return _msp_order(idx, kappa, rng), None, "previous"


def entropic_affinities(
    X: ArrayLike | None = None,
    *,
    perplexity: float = 30.0,
    n_neighbors: int | None = None,
    knn: tuple[ArrayLike, ArrayLike] | None = None,
    metric: str = "euclidean",
    method: str = "euler",
    order: str | ArrayLike = "density",
    order_kappa: int | None = None,
    tol: float = 1e-10,
    maxit: int = 20,
    image_shape: tuple[int, int] | None = None,
    random_state: RandomState = None,
    n_jobs: int | None = None,
    compact: bool = False,
    neighbors_method: str = "exact",
) -> tuple[sp.csr_array, FloatArray, dict[str, Any]]:
    r"""Entropic affinities: per-point Gaussian widths with a given perplexity.

    For each point :math:`y_n` find the precision :math:`\beta_n = 1/(2\sigma_n^2)` such that
    :math:`p_{m|n} \propto \exp(-\beta_n \|y_n - y_m\|^2)` over its ``n_neighbors`` nearest
    neighbours has entropy :math:`\log K` (K = ``perplexity``, natural logs). The root is
    found in :math:`\log\beta` inside the bounds of the thesis' Theorem 2.2.2 by Euler
    (default; cubic, about 2 steps per point on the digits vs 3 for Newton), Halley or
    Newton steps with a bisection fallback, warm-started along
    ``order``; points are solved in parallel chunks of the order, so the result does not
    depend on ``n_jobs``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features), optional
        The data. Not needed when ``knn`` is given.
    perplexity : float, default=30.0
        The target perplexity K, in (1, n_neighbors).
    n_neighbors : int, default=None
        Neighbours per point (k). None: 3 x perplexity (capped at n_samples - 1); the
        thesis recommends about 5 x perplexity for affinities close to the full ones.
    knn : tuple (sqdist, indices), optional
        A precomputed neighbour graph: squared distances and indices, each (n_samples, k),
        self excluded. Overrides ``X`` and ``n_neighbors``.
    metric : {"euclidean"}, default="euclidean"
        Only the Euclidean metric is supported (the Gaussian kernel uses squared distances).
    method : {"newton", "halley", "euler", "bisection", "brent", "ridders"}, default="euler"
        Root finder of log beta (bisection, Brent and Ridders are there for comparison).
    order : {"density", "mst", "msp", "raster", "random", "bounds"} or array, default="density"
        Warm-start order: density (by distance to the ``order_kappa``-th neighbour, dense
        first), minimum spanning tree (breadth-first, from the parent), minimum spanning
        path, raster (zig-zag over ``image_shape``), random, or no warm start ("bounds":
        every point starts at the middle of its bounds). An array is a custom order.
    order_kappa : int, default=None
        The graph degree of the order (density: ceil(perplexity); mst: 30; msp: 100).
    tol : float, default=1e-10
        Tolerance on :math:`|H - \log K|` per point.
    maxit : int, default=20
        Derivative steps before a forced bisection.
    image_shape : tuple (height, width), optional
        For ``order="raster"``.
    random_state : int, RandomState or None
        For the random and msp orders.
    n_jobs : int, default=None
        Threads (None: all cores).
    compact : bool, default=False
        32-bit storage for large problems: int32 neighbour indices (kNN queried in
        blocks) and a CSR matrix with int32 indices and float32 values (8 bytes per entry
        instead of 16). The widths are found in float64 as always; only the stored
        probabilities are rounded to float32 (relative error < 6e-8).
    neighbors_method : {"exact", "approx", "auto"}, default="exact"
        kNN search from ``X``: scikit-learn's exact tree, or vastml's parallel kd-tree with
        the ``(1 + KNN_APPROX_EPS)``-approximate search (recall > 0.99 on 10-D blobs, exact
        distances; much faster at 10-D and N in the millions); "auto" = "approx" from
        ``AUTO_APPROX_MIN`` = 200,000 points on.

    Returns
    -------
    P : scipy.sparse.csr_array of shape (n_samples, n_samples)
        Row-stochastic conditional affinities :math:`p_{m|n}` (zero diagonal), in
        canonical form (each row's columns increasing, no repeats).
    beta : ndarray of shape (n_samples,)
        Precisions :math:`\beta_n` (:math:`\sigma_n = 1/\sqrt{2\beta_n}`).
    info : dict
        ``evaluations`` (entropy evaluations per point), ``bisections``, ``log_beta_lower``,
        ``log_beta_upper`` (the bounds), ``converged`` (False where no width reaches the
        perplexity, e.g. more than K duplicates of a point), ``n_neighbors``, ``order``.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.embed import entropic_affinities
    >>> X = np.random.default_rng(0).normal(size=(500, 5))
    >>> P, beta, info = entropic_affinities(X, perplexity=20)
    >>> p = P[[0]].data
    >>> bool(abs(np.exp(-(p * np.log(p)).sum()) - 20) < 1e-8)
    True
    >>> float(info["evaluations"].mean()) < 6
    True
    """
    perplexity = positive_float(perplexity, "perplexity")
    choice(metric, "metric", ("euclidean",))
    choice(method, "method", ROOT_METHODS)
    tol = positive_float(tol, "tol")
    if not (isinstance(maxit, numbers.Integral) and 1 <= maxit < 2**31):
        raise ValueError(f"`maxit` must be an int in [1, 2**31), got {maxit!r}")
    n_jobs = n_jobs_arg(n_jobs)
    if knn is not None:
        try:
            sqdist, idx = knn
        except (TypeError, ValueError):
            raise TypeError("`knn` must be a pair (sqdist, indices)") from None
        sqdist = as_points(sqdist, "knn[0] (sqdist)")
        idx = np.asarray(idx)
        if idx.shape != sqdist.shape or not np.issubdtype(idx.dtype, np.integer):
            raise ValueError(
                "`knn` indices must be an int array of the same shape as the distances"
            )
        n = sqdist.shape[0]
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise ValueError("`knn` indices out of range")
        if (sqdist < 0).any():
            raise ValueError("`knn` distances must be squared distances (>= 0)")
        if compact and n >= 2**31:
            raise ValueError("compact affinities hold at most 2^31 - 1 points")
        idx = np.ascontiguousarray(idx, dtype=np.int32 if compact else np.int64)
    else:
        if X is None:
            raise ValueError("give `X` or `knn`")
        X = as_points(X, "X")
        n = X.shape[0]
        if n < 3:
            raise ValueError(f"need at least 3 points, got {n}")
        if n_neighbors is None:
            n_neighbors = default_n_neighbors(perplexity, n)
        sqdist, idx = knn_sqdist(
            X, n_neighbors, n_jobs, compact=bool(compact), neighbors_method=neighbors_method
        )
    k = sqdist.shape[1]
    if not (1.0 < perplexity < k):
        raise ValueError(
            f"`perplexity` must lie in (1, n_neighbors = {k}) (and n_neighbors < n_samples), got {perplexity}"
        )
    o, parents, warm = warm_start_order(
        order,
        sqdist,
        idx,
        perplexity,
        kappa=order_kappa,
        image_shape=image_shape,
        random_state=random_state,
    )
    # One Rust pass: root finding, then each row's neighbours sorted by index (repeats of
    # a user's graph summed) into canonical CSR arrays that SciPy takes as they are.
    root = {"perplexity": perplexity, "warm": warm, "method": method, "tol": tol,
            "maxit": int(maxit), "chunk_size": 2048, "compact": bool(compact)}
    indptr, indices, data, log_beta, evals, bis, lo, hi, conv = _core.entropic_affinities_csr(
        sqdist, idx, o, root, parents, n_jobs=n_jobs
    )
    P = _csr(data, indices, indptr, n)
    if not np.all(conv):
        bad = np.flatnonzero(~np.asarray(conv, dtype=bool))
        warnings.warn(
            f"{bad.size} of {n} points (e.g. row {int(bad[0])}) have no kernel width that "
            f"reaches perplexity {perplexity:g}: their {k} neighbours are all at the same "
            "distance (duplicated points). Their rows of P are uniform over those neighbours "
            "and their beta is NaN; remove duplicates or lower `perplexity`.",
            RuntimeWarning,
            stacklevel=2,
        )
    info = {
        "evaluations": evals,
        "bisections": bis,
        "log_beta_lower": lo,
        "log_beta_upper": hi,
        "converged": conv,
        "n_neighbors": k,
        "order": o,
    }
    return P, np.exp(log_beta), info


def _csr(data, indices, indptr, n):
    """A canonical CSR array on Rust's arrays without copies (SciPy wants one index dtype
    for indptr and indices; the n + 1 row pointers are the ones converted)."""
    indptr = indptr.astype(indices.dtype, copy=False)
    P = sp.csr_array((data, indices, indptr), shape=(n, n), copy=False)
    P.has_canonical_format = True
    return P


def is_compact(P: Any) -> bool:
    """True for a CSR matrix in the 32-bit layout (int32 indices, float32 values)."""
    return (
        sp.issparse(P)
        and P.format == "csr"
        and P.dtype == np.float32
        and P.indices.dtype == np.int32
        and P.indptr.dtype == np.int32
    )


def symmetrize(P: Any, mode: str = "joint", *, n_jobs: int | None = None) -> sp.csr_array:
    """Symmetric affinities from conditional ones.

    ``mode="joint"``: :math:`(P + P^T) / (2N)` (sums to 1; for symmetric SNE and t-SNE);
    ``mode="mean"``: :math:`(P + P^T) / 2` (for elastic embedding and SNE's attraction).
    The diagonal is zeroed.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> P = sp.csr_array(np.array([[0, 1.0], [1.0, 0]]))
    >>> float(symmetrize(P).sum())
    1.0
    """
    choice(mode, "mode", ("joint", "mean"))
    compact = is_compact(P)
    if not compact and not (sp.issparse(P) and P.format == "csr" and P.dtype == np.float64):
        P = sp.csr_array(P, dtype=np.float64)
    n = P.shape[0]
    if P.shape != (n, n):
        raise ValueError(f"`P` must be square, got shape {P.shape}")
    # In Rust: rows sorted unless they already are (as entropic_affinities returns them),
    # transpose by counting sort, rows of P and P^T merged in parallel (no SciPy sparse
    # addition, which first sorts and canonicalises both operands).
    # A compact (int32 / float32) P stays compact: no 64-bit copy of a large matrix.
    it, vt = (np.int32, np.float32) if compact else (np.int64, np.float64)
    indptr, indices, data = _core.symmetrize_csr(
        n,
        np.ascontiguousarray(P.indptr, dtype=it),
        np.ascontiguousarray(P.indices, dtype=it),
        np.ascontiguousarray(P.data, dtype=vt),
        0.5 / n if mode == "joint" else 0.5,
        n_jobs_arg(n_jobs),
    )
    return _csr(data, indices, indptr, n)
