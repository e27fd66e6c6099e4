"""Locally Linear Landmarks (Vladymyrov & Carreira-Perpinan 2013; thesis chapter 4): the pieces.

A spectral problem ``min tr(X A X^T) s.t. X B X^T = I`` over N points is reduced to one over L
landmarks by assuming the embedding is reconstructed from the landmarks' embedding with the same
local linear weights that reconstruct the data, ``Y ~ Y_tilde Z`` => ``X ~ X_tilde Z``:

    A_tilde = Z A Z^T,  B_tilde = Z B Z^T   (L x L, dense),   X = X_tilde Z.

This module holds the parts every case study shares: landmark choice, the weights ``Z``, the
reduced generalised eigenproblem, the exact Laplacian-eigenmaps solve and the Gaussian kNN graph.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.linalg
import scipy.sparse as sp
import scipy.sparse.linalg
from sklearn.cluster import KMeans
from sklearn.neighbors import NearestNeighbors
from sklearn.utils import check_random_state

from vastml._validation import as_points, choice, positive_float

if TYPE_CHECKING:
    from vastml._typing import ArrayLike, FloatArray, IntArray, RandomState

LANDMARK_METHODS = ("random", "kmeans", "random-pruned", "minmax")


def _positive_int(v: object, name: str, *, minimum: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"`{name}` must be an integer, got {v!r}")
    if int(v) < minimum:
        raise ValueError(f"`{name}` must be >= {minimum}, got {v}")
    return int(v)


def select_landmarks(
    X: ArrayLike,
    n_landmarks: int | None,
    method: str | ArrayLike = "random",
    *,
    n_pruned: int | None = None,
    random_state: RandomState = None,
) -> IntArray:
    """Indices of ``n_landmarks`` data points to serve as landmarks.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    n_landmarks : int
        L, at most ``n_samples``.
    method : {"random", "kmeans", "random-pruned", "minmax"} or array-like of int
        ``"random"``: uniform without replacement (the thesis default). ``"kmeans"``: k-means
        with L clusters, then the data point closest to each centroid (duplicates are replaced
        by random points). ``"random-pruned"``: draw ``L + n_pruned`` at random and drop one point
        of each of the ``n_pruned`` closest pairs, so landmarks do not bunch up. ``"minmax"``:
        MinMax (de Silva & Tenenbaum 2004; :func:`minmax_landmarks`), each landmark the point
        farthest from those chosen before it. An integer array is taken as the landmark
        indices themselves.
    n_pruned : int, default=None
        M for ``"random-pruned"`` (default ``max(1, L // 10)``).
    random_state : int, RandomState instance or None

    Returns
    -------
    ndarray of int of shape (n_landmarks,), sorted.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(100, 2))
    >>> select_landmarks(X, 10, "random-pruned", random_state=0).shape
    (10,)
    """
    X = as_points(X, "X")
    n = X.shape[0]
    if not isinstance(method, str):
        idx = np.asarray(method)
        if idx.ndim != 1 or idx.size == 0 or not np.issubdtype(idx.dtype, np.integer):
            raise ValueError("`landmarks` given as an array must be a non-empty 1-D array of indices")
        if idx.min() < 0 or idx.max() >= n:
            raise ValueError(f"`landmarks` indices must lie in [0, {n})")
        idx = np.unique(idx)
        return idx
    choice(method, "landmarks", LANDMARK_METHODS)
    L = _positive_int(n_landmarks, "n_landmarks")
    if L > n:
        raise ValueError(f"`n_landmarks` = {L} exceeds the number of points {n}")
    rng = check_random_state(random_state)
    if method == "random":
        return np.sort(rng.choice(n, L, replace=False))
    if method == "minmax":
        return np.sort(minmax_landmarks(X, L, random_state=rng))
    if method == "kmeans":
        km = KMeans(n_clusters=L, n_init=1, random_state=rng, max_iter=50).fit(X)
        nn = NearestNeighbors(n_neighbors=1).fit(X)
        idx = np.unique(nn.kneighbors(km.cluster_centers_, return_distance=False)[:, 0])
        if idx.size < L:  # several centroids share a closest point: top up at random
            rest = np.setdiff1d(np.arange(n), idx)
            idx = np.concatenate([idx, rng.choice(rest, L - idx.size, replace=False)])
        return np.sort(idx)
    M = max(1, L // 10) if n_pruned is None else _positive_int(n_pruned, "n_pruned", minimum=0)
    M = min(M, n - L)
    cand = rng.choice(n, L + M, replace=False)
    if M == 0:
        return np.sort(cand)
    k = min(L + M, 8)
    dist, nbr = NearestNeighbors(n_neighbors=k).fit(X[cand]).kneighbors(X[cand])
    i = np.repeat(np.arange(L + M), k - 1)
    j = nbr[:, 1:].ravel()
    order = np.argsort(dist[:, 1:].ravel(), kind="stable")
    alive = np.ones(L + M, dtype=bool)
    dropped = 0
    for t in order:
        a, b = i[t], j[t]
        if alive[a] and alive[b]:
            alive[max(a, b)] = False
            dropped += 1
            if dropped == M:
                break
    keep = cand[alive]
    if keep.size > L:  # fewer close pairs among the k-NN than M: drop the excess at random
        keep = rng.choice(keep, L, replace=False)
    return np.sort(keep)


def minmax_landmarks(
    X: ArrayLike, n_landmarks: int, *, random_state: RandomState = None, chunk: int = 8192
) -> IntArray:
    """MinMax landmarks (de Silva & Tenenbaum 2004), in the order they are chosen.

    The first landmark is a random data point; each next one is the point whose Euclidean
    distance to the nearest landmark chosen so far is largest (greedy farthest-point, the
    2-approximation of the k-centre problem). O(N L D) time, O(N) memory: one pass over the
    data per landmark, updating each point's distance to its nearest landmark. Ties go to
    the lowest index. Points that coincide with a landmark (distance 0) are chosen only
    once every distinct point is.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    n_landmarks : int
        L, at most ``n_samples``.
    random_state : int, RandomState instance or None
        Picks the first landmark.

    Returns
    -------
    ndarray of int of shape (n_landmarks,), in selection order.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0], [1.0], [10.0], [4.0]])
    >>> minmax_landmarks(X, 3, random_state=0).tolist()
    [0, 2, 3]
    """
    X = as_points(X, "X")
    n = X.shape[0]
    L = _positive_int(n_landmarks, "n_landmarks")
    if L > n:
        raise ValueError(f"`n_landmarks` = {L} exceeds the number of points {n}")
    rng = check_random_state(random_state)
    sq = np.einsum("ij,ij->i", X, X)
    nearest = np.full(n, np.inf)
    chosen = np.empty(L, dtype=np.int64)
    chosen[0] = rng.randint(n)
    for k in range(L):
        if k > 0:
            chosen[k] = int(np.argmax(nearest))
        c = X[chosen[k]]
        for a in range(0, n, chunk):
            b = min(n, a + chunk)
            d2 = sq[a:b] - 2.0 * (X[a:b] @ c) + sq[chosen[k]]
            np.maximum(d2, 0.0, out=d2)
            np.minimum(nearest[a:b], d2, out=nearest[a:b])
        nearest[chosen[k]] = -1.0  # never chosen twice, even among duplicates
    return chosen


def reconstruction_weights(
    X: ArrayLike,
    landmarks: ArrayLike,
    n_neighbors: int,
    *,
    reg: float = 1e-3,
    n_jobs: int | None = None,
) -> Any:
    """LLE-style weights ``Z`` (L x N, CSR) reconstructing every point from its nearest landmarks.

    Column n solves ``min ||x_n - sum_i z_in l_i||^2 s.t. sum_i z_in = 1`` over the
    ``n_neighbors`` (K_Z) nearest landmarks (thesis eqs. 4.6-4.8): ``G z = 1`` with the local
    Gram matrix ``G_ij = (x_n - l_i)^T (x_n - l_j)``, then rescaled to sum to one. ``G`` is
    always regularised by ``reg * trace(G)`` on the diagonal (the LLE convention): on noisy
    data a Gram with K_Z close to n_features is nearly singular even when K_Z <= n_features + 1,
    and the unregularised weights then fit the noise (on the 64-D bench data K_Z = 50 went from
    41 % to 12 % Procrustes error to exact eigenmaps at L = 1000 with ``reg = 1e-3``).
    ``reg=0`` gives the exact affine reconstruction (a ``1e-12 * trace(G)`` ridge keeps the
    singular G of K_Z > n_features solvable). A point that coincides with a landmark gets
    exactly that landmark's unit vector.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    landmarks : array-like of shape (n_landmarks, n_features)
    n_neighbors : int
        K_Z, at most ``n_landmarks``.
    reg : float, default=1e-3
    n_jobs : int or None
        Threads (None: all cores). The landmark search is a blocked matrix product screened
        in single precision, then exact distances of the candidates; LU solves; parallel over
        blocks of points, the same weights for any ``n_jobs``.

    Returns
    -------
    scipy.sparse.csr_matrix of shape (n_landmarks, n_samples)
        Exactly K_Z stored entries per column (before removal of exact zeros), columns sum to 1.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> Z = reconstruction_weights(X, X[:10], 3, reg=0)
    >>> bool(np.allclose(Z.sum(axis=0), 1) and np.allclose((Z.T @ X[:10]), X))
    True
    """
    pieces = weight_pieces(X, landmarks, n_neighbors, reg=reg, n_jobs=n_jobs)
    assert pieces is not None  # only a progress report can stop it
    return pieces_to_csr(*pieces)


def pieces_to_csr(nbr, W, n_landmarks):
    """Z (L x N, CSR) from per-point landmark indices and weights (both N x K_Z)."""
    n, K = W.shape
    Z = sp.csc_matrix(
        (W.ravel(), nbr.ravel().astype(np.int64), np.arange(0, n * K + 1, K)),
        shape=(n_landmarks, n),
    )
    return Z.tocsr()


def weight_pieces(X, landmarks, n_neighbors, *, reg=1e-3, n_jobs=None, progress=None):
    """(indices N x K_Z, weights N x K_Z, L) of :func:`reconstruction_weights`, nearest first.

    ``progress``: a report callable ``(iteration, objective, state) -> stop`` that the Rust loop
    calls between chunks of points; None is returned when it asked to stop.
    """
    X = as_points(X, "X")
    Lm = as_points(landmarks, "landmarks", dim=X.shape[1])
    L = Lm.shape[0]
    K = _positive_int(n_neighbors, "n_neighbors")
    if K > L:
        raise ValueError(f"`n_neighbors` = {K} exceeds the number of landmarks {L}")
    if not (np.isfinite(reg) and reg >= 0):
        raise ValueError(f"`reg` must be a finite number >= 0, got {reg}")
    from vastml import _core

    out = _core.lll_weights(
        np.ascontiguousarray(X, dtype=np.float64),
        np.ascontiguousarray(Lm, dtype=np.float64),
        K,
        float(reg),
        n_jobs,
        progress,
    )
    return None if out is None else (out[0], out[1], L)


def _csr_arrays(M):
    """(indptr, indices, data) as the Rust kernels take them: SciPy's int32 pair uncopied, else
    int64; float64 data."""
    it = np.int32 if M.indptr.dtype == np.int32 and M.indices.dtype == np.int32 else np.int64
    return (np.ascontiguousarray(M.indptr, dtype=it), np.ascontiguousarray(M.indices, dtype=it),
            np.ascontiguousarray(M.data, dtype=np.float64))


def reduced_matrix(nbr, W, n_landmarks, *, diag=None, M=None, n_jobs=None, keep_rows=False,
                   symmetric=False, progress=None):
    """``Z (diag(v) + M) Z^T`` (L x L, dense) for Z given as :func:`weight_pieces`.

    ``vastml._core.lll_z_m_zt``: one pass over the points (parallel and deterministic).
    ``keep_rows=True`` also returns the N x L CSR matrix ``(diag(v) + M) Z^T`` computed on the
    way (then ``M (Z^T X_tilde)`` costs a small sparse product instead of a pass over M).

    ``symmetric=True`` declares M symmetric (not checked): only its upper triangle is read
    (``vastml._core.lll_z_m_zt_sym``: every edge once, ``Z M Z^T = S + S^T`` with
    ``S = Z triu-part``; about 3x faster than the general kernel on a K_W = 200 graph); for a
    non-symmetric M the result is ``Z (triu(M) + triu(M)^T - diag(M)) Z^T``. Not with
    ``keep_rows``.

    ``progress``: a report callable the Rust loops call between chunks of points (see
    :func:`weight_pieces`); None is returned when it asked to stop.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> X = np.random.default_rng(0).normal(size=(200, 2))
    >>> nbr, W, L = weight_pieces(X, X[:20], 3)
    >>> Z = pieces_to_csr(nbr, W, L)
    >>> M = sp.random(200, 200, density=0.05, random_state=0, format="csr")
    >>> bool(np.allclose(reduced_matrix(nbr, W, L, M=M), (Z @ M @ Z.T).toarray()))
    True
    """
    n = W.shape[0]
    if diag is not None:
        diag = np.ascontiguousarray(diag, dtype=np.float64)
        if diag.shape != (n,):
            raise ValueError(f"`diag` must have shape ({n},)")
    if M is not None:
        M = sp.csr_matrix(M, dtype=np.float64)  # no copy for a float64 CSR matrix
        if M.shape != (n, n):
            raise ValueError(f"`M` must be {n} x {n}")
    if symmetric and keep_rows:
        raise ValueError("`keep_rows` needs the general kernel (`symmetric=False`)")
    from vastml import _core

    z = (np.ascontiguousarray(nbr, dtype=np.uint32), np.ascontiguousarray(W, dtype=np.float64),
         int(n_landmarks))
    if symmetric and M is not None:
        out = _core.lll_z_m_zt_sym(z, _csr_arrays(M), n_jobs, progress)
        if out is not None and diag is not None:
            out += reduced_matrix(nbr, W, n_landmarks, diag=diag, n_jobs=n_jobs)
        return out
    # SciPy's int32 index arrays go in as they are (no copy of a large graph)
    m = None if M is None else _csr_arrays(M)
    res = _core.lll_z_m_zt(z, diag, m, bool(keep_rows), n_jobs, progress)
    if res is None or not keep_rows:
        return res
    out, (indptr, idx, val) = res
    return out, sp.csr_matrix((val, idx.astype(np.int32), indptr.astype(np.int64)),
                              shape=(n, n_landmarks))


def reduced_eigenproblem(
    A_tilde: Any,
    B_tilde: Any,
    n_components: int,
    *,
    largest: bool = False,
    jitter: float = 1e-12,
    solver: str = "auto",
) -> tuple[FloatArray, FloatArray]:
    """Solve ``A_tilde u = lambda B_tilde u``; return (eigenvalues, X_tilde (L x d)).

    Columns of ``X_tilde`` satisfy ``X_tilde^T B_tilde X_tilde = I``. ``B_tilde`` is psd (pd iff
    Z has full row rank); when Cholesky fails a ``jitter * trace / L`` ridge is added.

    ``solver="dense"``: ``scipy.linalg.eigh`` with ``subset_by_index`` (reduction to standard
    form and tridiagonalisation, ~3 L^3 flops whatever d). ``"shift-invert"`` (smallest
    eigenvalues only, A psd): one Cholesky factorisation of ``A - sigma B`` with sigma just
    below the spectrum (L^3 / 3 flops), then ARPACK Lanczos on ``(A - sigma B)^-1 B`` and a
    final Rayleigh-Ritz step on the d vectors, so they are exactly B-orthonormal; about 10x
    cheaper than ``"dense"`` at L = 4000. ``"auto"``: shift-invert when the smallest
    ``n_components <= L / 50`` eigenpairs of an ``L >= 1500`` problem are asked for.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> F = rng.normal(size=(300, 300)); A = F @ F.T; B = np.eye(300) + 0.1 * A / 300
    >>> w1, V1 = reduced_eigenproblem(A, B, 3, solver="dense")
    >>> w2, V2 = reduced_eigenproblem(A, B, 3, solver="shift-invert")
    >>> bool(np.allclose(w1, w2) and np.allclose(np.abs(V1), np.abs(V2), atol=1e-6))
    True
    """
    A = np.asarray(A_tilde.toarray() if sp.issparse(A_tilde) else A_tilde, dtype=np.float64)
    B = np.asarray(B_tilde.toarray() if sp.issparse(B_tilde) else B_tilde, dtype=np.float64)
    A = 0.5 * (A + A.T)
    B = 0.5 * (B + B.T)
    L = A.shape[0]
    if n_components > L:
        raise ValueError(f"`n_components` = {n_components} exceeds the number of landmarks {L}")
    choice(solver, "solver", ("auto", "dense", "shift-invert"))
    if solver == "auto":
        solver = "shift-invert" if (not largest and L >= 1500 and 50 * n_components <= L) \
            else "dense"
    if solver == "shift-invert":
        if largest:
            raise ValueError('`solver="shift-invert"` computes the smallest eigenpairs only')
        out = _shift_invert_smallest(A, B, n_components)
        if out is not None:
            return out[0], _fix_signs(out[1])
    sub = [L - n_components, L - 1] if largest else [0, n_components - 1]
    try:
        w, V = scipy.linalg.eigh(A, B, subset_by_index=sub)
    except np.linalg.LinAlgError:
        ridge = jitter * max(np.trace(B), 1e-300) / L
        w, V = scipy.linalg.eigh(A, B + ridge * np.eye(L), subset_by_index=sub)
    if largest:
        w, V = w[::-1], V[:, ::-1]
    return w, _fix_signs(V)


def _shift_invert_smallest(A, B, k):
    """Smallest k eigenpairs of the pencil (A psd, B pd) by shift-invert Lanczos, or None when a
    factorisation fails (the caller falls back to the dense solver)."""
    L = A.shape[0]
    tb = np.trace(B)
    if not (tb > 0):
        return None
    sigma = -1e-3 * max(np.trace(A), 1e-300) / tb  # below the spectrum: A - sigma B is pd
    try:
        c = scipy.linalg.cho_factor(A - sigma * B, check_finite=False)
    except np.linalg.LinAlgError:
        return None
    # B must be pd for ARPACK's M-inner products. It is whenever Z has full row rank (every
    # landmark a data point that reconstructs itself); a second Cholesky just to check that
    # cost as much as the one above, so a singular B is caught below instead (the
    # Rayleigh-Ritz Cholesky of V^T B V fails, and the caller falls back to dense + ridge).
    op = scipy.sparse.linalg.LinearOperator(
        (L, L), matvec=lambda v: scipy.linalg.cho_solve(c, v, check_finite=False), dtype=float)
    v0 = np.random.default_rng(0).uniform(-1, 1, L)
    try:
        _, V = scipy.sparse.linalg.eigsh(A, k=k, M=B, sigma=sigma, which="LM", OPinv=op,
                                         v0=v0, tol=1e-12, ncv=min(L, max(2 * k + 1, 20)))
    except (scipy.sparse.linalg.ArpackError, np.linalg.LinAlgError):
        return None
    # Rayleigh-Ritz on span(V): exact B-orthonormality and sorted eigenvalues
    try:
        w, R = scipy.linalg.eigh(V.T @ A @ V, V.T @ B @ V)
    except np.linalg.LinAlgError:
        return None
    if not np.all(np.isfinite(w)):
        return None
    return w, V @ R


def csr_dense_product(M, Y, *, n_jobs=None):
    """``M Y`` for a sparse N x N matrix M and a dense N x k block Y (N x k, float64).

    ``vastml._core.lll_csr_dense``: parallel over rows, the k columns updated together,
    SciPy's int32 index arrays passed uncopied; the same result for any ``n_jobs``.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> M = sp.random(50, 50, density=0.1, random_state=0, format="csr")
    >>> Y = np.arange(150.0).reshape(50, 3)
    >>> bool(np.allclose(csr_dense_product(M, Y), M @ Y))
    True
    """
    M = sp.csr_matrix(M, dtype=np.float64)
    Y = np.ascontiguousarray(Y, dtype=np.float64)
    if Y.ndim != 2 or M.shape != (Y.shape[0], Y.shape[0]):
        raise ValueError(f"`M` must be N x N and `Y` N x k, got {M.shape} and {Y.shape}")
    from vastml import _core

    return _core.lll_csr_dense(_csr_arrays(M), Y, n_jobs)


def sym_quadratic_form(M, V, *, n_jobs=None):
    """``V^T M V`` (k x k) for a symmetric sparse N x N matrix M and a dense N x k block V.

    ``vastml._core.lll_sym_quadratic_form``: one pass over the upper triangle of M (every edge
    once: half the random row fetches of ``M @ V``; symmetry is not checked, the lower
    triangle is never read).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> R = sp.random(60, 60, density=0.1, random_state=0, format="csr")
    >>> M = (R + R.T).tocsr()
    >>> V = np.random.default_rng(0).normal(size=(60, 3))
    >>> bool(np.allclose(sym_quadratic_form(M, V), V.T @ (M @ V)))
    True
    """
    M = sp.csr_matrix(M, dtype=np.float64)
    V = np.ascontiguousarray(V, dtype=np.float64)
    if V.ndim != 2 or M.shape != (V.shape[0], V.shape[0]):
        raise ValueError(f"`M` must be N x N and `V` N x k, got {M.shape} and {V.shape}")
    from vastml import _core

    return _core.lll_sym_quadratic_form(_csr_arrays(M), V, n_jobs)


def _fix_signs(V):
    """Deterministic signs: the largest-magnitude entry of each column is positive."""
    i = np.argmax(np.abs(V), axis=0)
    s = np.sign(V[i, np.arange(V.shape[1])])
    s[s == 0] = 1.0
    return V * s


def gaussian_knn_affinity(X: ArrayLike, n_neighbors: int = 10, bandwidth: float = 1.0) -> Any:
    """Symmetric sparse Gaussian affinities on the kNN graph (K_W neighbours, width sigma).

    ``w_nm = exp(-||x_n - x_m||^2 / (2 sigma^2))`` if m is among the ``n_neighbors`` nearest
    neighbours of n or vice versa; no self-loops.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    n_neighbors : int, default=10
        K_W (at most ``n_samples - 1``).
    bandwidth : float, default=1.0
        sigma.

    Returns
    -------
    scipy.sparse.csr_matrix of shape (n_samples, n_samples)

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(100, 2))
    >>> W = gaussian_knn_affinity(X, n_neighbors=5, bandwidth=0.5)
    >>> W.shape, bool((W != W.T).nnz == 0), bool(W.diagonal().max() == 0)
    ((100, 100), True, True)
    """
    X = as_points(X, "X")
    n = X.shape[0]
    k = min(_positive_int(n_neighbors, "n_neighbors"), n - 1)
    bandwidth = positive_float(bandwidth, "bandwidth")
    if k < 1:
        raise ValueError("need at least 2 points for an affinity graph")
    dist, nbr = NearestNeighbors(n_neighbors=k + 1).fit(X).kneighbors(X)
    dist, nbr = dist[:, 1:], nbr[:, 1:]
    val = np.exp(-0.5 * (dist / bandwidth) ** 2)  # (dist / bandwidth): no overflow of bandwidth**2
    W = sp.csr_matrix((val.ravel(), (np.repeat(np.arange(n), k), nbr.ravel())), shape=(n, n))
    return W.maximum(W.T).tocsr()


def laplacian_eigenmaps(
    W: Any,
    n_components: int,
    *,
    solver: str = "auto",
    tol: float = 0.0,
    random_state: RandomState = None,
) -> tuple[FloatArray, FloatArray]:
    """Exact Laplacian eigenmaps: ``min tr(X L X^T) s.t. X D X^T = I, X D 1 = 0``.

    Returns (eigenvalues, X (N x d)) of ``L x = lambda D x`` excluding the trivial constant
    solution. ``solver="dense"`` uses ``scipy.linalg.eigh``; ``"arpack"`` uses ``eigsh`` on the
    normalised affinity ``D^-1/2 W D^-1/2`` (largest eigenvalues, lambda = 1 - mu).

    Parameters
    ----------
    W : sparse matrix of shape (N, N)
        Symmetric affinities with no isolated point.
    n_components : int
        d.
    solver : {"auto", "dense", "arpack"}, default="auto"
        ``"auto"``: dense up to N = 2000.
    tol : float, default=0.0
        ARPACK's tolerance (0: machine precision).
    random_state : int, RandomState instance or None
        ARPACK's start vector.

    Returns
    -------
    (eigenvalues (d,), X (N, d)), columns with ``X^T D X = I``.

    Examples
    --------
    >>> import numpy as np
    >>> t = np.linspace(0, 1, 200)
    >>> W = gaussian_knn_affinity(t[:, None], n_neighbors=5, bandwidth=0.02)
    >>> lam, X = laplacian_eigenmaps(W, 1)
    >>> bool(abs(np.corrcoef(X[:, 0], t)[0, 1]) > 0.95)
    True
    """
    W = sp.csr_matrix(W, dtype=np.float64)
    n = W.shape[0]
    deg = np.asarray(W.sum(axis=1)).ravel()
    if (deg <= 0).any():
        raise ValueError("the affinity graph has isolated points (zero degree)")
    if solver == "auto":
        solver = "dense" if n <= 2000 else "arpack"
    choice(solver, "solver", ("dense", "arpack"))
    dm = 1.0 / np.sqrt(deg)
    S = sp.diags(dm) @ W @ sp.diags(dm)
    k = n_components + 1
    if solver == "dense":
        mu, U = scipy.linalg.eigh(S.toarray(), subset_by_index=[n - k, n - 1])
    else:
        rng = check_random_state(random_state)
        v0 = rng.uniform(-1, 1, n)
        mu, U = scipy.sparse.linalg.eigsh(S, k=k, which="LA", tol=tol, v0=v0)
    order = np.argsort(-mu)
    mu, U = mu[order], U[:, order]
    X = _fix_signs(U[:, 1:] * dm[:, None])
    return 1.0 - mu[1:], X


def procrustes_error(X_approx: ArrayLike, X_exact: ArrayLike) -> float:
    """Relative error ``||procr(X_approx) - X_exact||_F / ||X_exact||_F`` (thesis 4.8).

    Procrustes alignment with translation, orthogonal transform and uniform scale.

    Examples
    --------
    >>> import numpy as np
    >>> B = np.random.default_rng(0).normal(size=(50, 2))
    >>> R = np.array([[0.0, -1.0], [1.0, 0.0]])
    >>> procrustes_error(3 * B @ R + 1, B) < 1e-12
    True
    """
    A = np.asarray(X_approx, dtype=np.float64)
    B = np.asarray(X_exact, dtype=np.float64)
    a = A - A.mean(axis=0)
    b = B - B.mean(axis=0)
    U, s, Vt = np.linalg.svd(a.T @ b)
    R = U @ Vt
    na = np.sum(a * a)
    scale = s.sum() / na if na > 0 else 0.0
    fit = scale * a @ R + B.mean(axis=0)
    return float(np.linalg.norm(fit - B) / np.linalg.norm(B))
