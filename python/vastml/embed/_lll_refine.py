"""Block-Krylov Rayleigh-Ritz refinement of an approximate Laplacian-eigenmaps embedding (our
extension of Locally Linear Landmarks)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from vastml._progress import Progress
from vastml.embed._lll_core import (
    _fix_signs,
    _positive_int,
    csr_dense_product,
    laplacian_eigenmaps,  # noqa: F401 (the Examples use it)
    sym_quadratic_form,
)

if TYPE_CHECKING:
    from vastml._typing import ArrayLike, FloatArray


def refine_eigenmaps(
    W: Any,
    X0: ArrayLike,
    *,
    steps: int = 1,
    rounds: int = 1,
    deg: ArrayLike | None = None,
    rtol: float = 1e-10,
    WX0: ArrayLike | None = None,
    n_components: int | None = None,
    symmetric: bool = False,
    matmul: Callable[[Any, FloatArray], FloatArray] | None = None,
    callbacks: Any = None,
    callback_every: int = 1,
    verbose: bool | int = False,
) -> tuple[FloatArray | None, FloatArray]:
    r"""Block-Krylov Rayleigh-Ritz refinement of an approximate Laplacian-eigenmaps embedding.

    Not in the thesis (our extension of LLL). LLL's error to the exact eigenvectors is mostly
    high-frequency interpolation error between landmarks; a few smoothing steps with
    :math:`P = D^{-1} W` damp it. Each round takes the block Krylov space
    :math:`[X, P X, \dots, P^s X]` (s = ``steps``) with the constant projected out (block
    Lanczos in the D inner product) and solves :math:`\min \operatorname{tr}(X L X^T)` s.t.
    :math:`X D X^T = I` in it (Rayleigh-Ritz), keeping the smallest Ritz vectors. The products
    with the graph are :math:`W Q_j` for the s + 1 blocks; the next block is
    :math:`D^{-1} W Q_j` made D-orthogonal to the previous ones, and the Ritz matrices come from
    the small Gram matrices :math:`S^T D S` and :math:`S^T W S` of the basis S, so a round costs
    ``steps + 1`` sparse products with an N x k block (k = ``X0.shape[1]``) plus
    O(N (s k)^2) dense work — and later rounds reuse ``W X`` of the previous Ritz vectors
    (``W S R``), so they cost ``steps`` products. The space contains X, so every Ritz value is
    at most the corresponding one of X (Cauchy interlacing); repeated rounds are restarted block
    Lanczos, which converges to the exact eigenvectors when the spectrum has a gap after the
    ``n_components``-th.

    Parameters
    ----------
    W : sparse (N x N) symmetric affinity matrix.
    X0 : ndarray (N, k), the embedding to refine (any constant part is ignored). Giving
        more columns than ``n_components`` (oversampling: the next approximate eigenvectors)
        lets the Ritz solve swap in a direction that the first ``n_components`` missed.
    steps : int, default=1
        s, smoothing steps (Krylov block size) per round; ``0`` is a plain Rayleigh-Ritz.
    rounds : int, default=1
    deg : ndarray (N,) or None
        Degrees of W (computed when None).
    rtol : float
        Basis directions whose D-norm falls below ``rtol`` (relative) are dropped.
    WX0 : ndarray (N, k) or None
        ``W @ X0`` when already known: saves the first sparse product.
    n_components : int or None
        Ritz vectors returned (default k). Each round keeps k of them as the next start.
    symmetric : bool, default=False
        Declares W symmetric (not checked). The last block of the last round then enters the
        Ritz matrix through a quadratic form read from the upper triangle of W (one pass)
        instead of a full product: one round with ``steps=1`` costs one product and a half.
        Not with ``matmul``.
    matmul : callable or None
        ``matmul(W, Y)`` computes the sparse block product ``W @ Y``; default the parallel
        Rust product (SciPy's int32 indices uncopied). A test passes SciPy's product here.
    callbacks : callable, list of callables or None
        Called as ``callback(round, objective, state)`` after every round: ``objective`` is
        the sum of the ``n_components`` smallest Ritz values (the trace the refinement
        minimises), ``state`` the N x ``n_components`` embedding of that round. Returning
        True ends the refinement after that round (its Ritz vectors are returned).
    callback_every : int, default=1
    verbose : bool or int, default=False
        A progress bar over the rounds.

    Returns
    -------
    (eigenvalues (n_components,), X (N, n_components)) with ``X^T D X = I`` and
    ``X^T D 1 = 0``.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> rng = np.random.default_rng(0)
    >>> t = np.sort(rng.uniform(0, 1, 300))
    >>> W = sp.csr_matrix(np.exp(-(t[:, None] - t[None]) ** 2 / 2e-3)); W.setdiag(0)
    >>> lam, X = refine_eigenmaps(W, rng.normal(size=(300, 1)), steps=8, rounds=10)
    >>> lam_exact, X_exact = laplacian_eigenmaps(W, 1, solver="dense")
    >>> bool(np.allclose(lam, lam_exact) and abs(np.corrcoef(X[:, 0], X_exact[:, 0])[0, 1]) > 0.999)
    True
    """
    W = sp.csr_matrix(W, dtype=np.float64)
    X = np.asarray(X0, dtype=np.float64)
    n, k = X.shape
    d = k if n_components is None else _positive_int(n_components, "n_components")
    if d > k:
        raise ValueError(f"`n_components` = {d} exceeds the columns of X0 ({k})")
    steps = _positive_int(steps, "steps", minimum=0)
    rounds = _positive_int(rounds, "rounds", minimum=0)
    if W.shape != (n, n):
        raise ValueError(f"`W` must be {n} x {n}, got {W.shape}")
    if deg is None:
        deg = np.asarray(W.sum(axis=1)).ravel()
    deg = np.asarray(deg, dtype=np.float64)
    if (deg <= 0).any():
        raise ValueError("the affinity graph has isolated points (zero degree)")
    WX = None if WX0 is None else np.asarray(WX0, dtype=np.float64)
    if WX is not None and WX.shape != X.shape:
        raise ValueError(f"`WX0` must have the shape of X0 {X.shape}, got {WX.shape}")
    c = 1.0 / np.sqrt(deg.sum())  # the constant vector c 1, D-normalised (W c 1 = c deg)
    dc = c * deg
    lam = None
    quad = symmetric and matmul is None
    product = csr_dense_product if matmul is None else matmul
    with Progress(callbacks, callback_every=callback_every, verbose=verbose, total=rounds,
                  desc="refine_eigenmaps") as progress:
        for r in range(rounds):
            lam, X, WX = _refine_round(W, X, WX, deg, (c, dc), d, k, steps, rtol,
                                       r == rounds - 1, quad, product)
            if progress.report(r + 1, float(np.sum(lam[:d])), X[:, :d]):
                break
    if lam is None:
        return None, X[:, :d]
    return lam[:d], _fix_signs(X[:, :d])


def _refine_round(W, X, WX, deg, const, d, k, steps, rtol, last, quad, product):
    """One block-Lanczos round of :func:`refine_eigenmaps`: (Ritz values, Ritz vectors, their
    W product or None). ``const`` is (c, c deg) of the D-normalised constant vector c 1."""
    c, dc = const
    # block Lanczos in the D inner product: Q_0 = X minus its constant part, made
    # D-orthonormal; Q_{j+1} = the part of D^-1 W Q_j D-orthogonal to the constant and
    # to Q_0..Q_j. W c = c deg, so W (X - c 1 a^T) = W X - c deg a^T needs no product.
    a = dc @ X
    X = X - c * a
    if WX is not None:
        WX = WX - np.outer(dc, a)
    Q0, T0 = _d_orthonormal(X, deg, [], rtol, coef=True)
    if Q0.shape[1] == 0:
        raise ValueError("the embedding to refine is constant")
    blocks = [Q0]
    Wblocks = [] if WX is None else [WX @ T0]
    for j in range(steps + 1):
        if len(Wblocks) < len(blocks):
            if j == steps and last and quad:
                break  # the last block's product only enters the Ritz matrix: see below
            Wblocks.append(product(W, blocks[-1]))
        if j == steps:
            break
        V = Wblocks[-1] / deg[:, None]
        V -= c * (dc @ V)
        V = _d_orthonormal(V, deg, blocks, rtol)
        if V.shape[1] == 0:  # the span is invariant: nothing new to add
            break
        blocks.append(V)
    S = np.hstack(blocks) if len(blocks) > 1 else blocks[0]
    # S is D-orthonormal to rounding (re-orthonormalised per block), so the Ritz problem
    # is the small symmetric one S^T (D - W) S = I - S^T W S
    nS = S.shape[1]
    if len(Wblocks) == len(blocks):
        WS = np.hstack(Wblocks) if len(Wblocks) > 1 else Wblocks[0]
        SWS = S.T @ WS
    else:
        # last round, symmetric W: the last block Q enters only through Q^T W Q, one pass
        # over the upper triangle of W (half the row fetches of W Q); its cross terms with
        # the earlier blocks come from their products, (W Q_j)^T Q
        WS = None
        SWS = np.empty((nS, nS))
        nP = sum(b.shape[1] for b in Wblocks)
        if nP:
            C = S.T @ (np.hstack(Wblocks) if len(Wblocks) > 1 else Wblocks[0])
            SWS[:, :nP] = C
            SWS[:nP, nP:] = C[nP:, :].T
        SWS[nP:, nP:] = sym_quadratic_form(W, blocks[-1])
    A = np.eye(nS) - SWS
    w, R = np.linalg.eigh(0.5 * (A + A.T))
    if w.size < d:
        raise ValueError(f"the refinement basis has rank {w.size} < {d}")
    kk = min(k, w.size) if not last else d
    lam, R = w[:kk], R[:, :kk]
    X = S @ R
    # W X of the new Ritz vectors: the next round's first product for free
    WX = WS @ R if (WS is not None and not last) else None
    return lam, X, WX


def _d_orthonormal(V, deg, basis, rtol, coef=False):
    """D-orthonormal basis of the part of span(V) D-orthogonal to the blocks of ``basis``
    (block Gram-Schmidt, twice), dropping directions below ``rtol`` of V's D-norm. With
    ``coef=True`` (and no ``basis``) also the matrix M with ``Q = V M``.

    The orthonormalisation is Cholesky QR on the small Gram matrix ``G = V^T D V`` (one pass
    over V for G and one for ``V R^-1``). The Gram route squares the condition number, so a
    second Cholesky QR pass follows unless G was already within 1e-6 of the identity (as for
    the B-orthonormal reduced eigenvectors, whose first pass is then exact to rounding); an
    eigendecomposition of G (dropping the directions below ``rtol``) replaces the Cholesky
    factorisation when that fails or G is ill-conditioned.
    """
    # directions are dropped relative to V's D-norm before the projection
    scale = np.sqrt(np.max(deg @ (V * V))) if (V.size and basis) else None
    for _ in range(2 if basis else 0):
        for Q in basis:
            V = V - Q @ (Q.T @ (deg[:, None] * V))
    k = V.shape[1]
    G = V.T @ (deg[:, None] * V)
    G = 0.5 * (G + G.T)
    if scale is None:
        scale = np.sqrt(np.max(np.diag(G))) if k else 0.0
    near_identity = k > 0 and np.abs(G - np.eye(k)).max() < 1e-6
    M = None
    try:
        Lc = np.linalg.cholesky(G)
        dl = np.diag(Lc)
        if dl.min() > 1e-6 * dl.max() and dl.min() > rtol * scale:
            M = scipy.linalg.solve_triangular(Lc, np.eye(k), lower=True).T
    except np.linalg.LinAlgError:
        pass
    if M is None:  # nearly dependent columns: drop the directions below rtol
        near_identity = False
        s, U = np.linalg.eigh(G)
        keep = s > (rtol * max(scale, 1e-300)) ** 2
        M = U[:, keep] / np.sqrt(s[keep])
    Q = V @ M
    if not near_identity and M.shape[1] > 0:
        # one more Cholesky QR pass for D-orthonormality to rounding
        G = Q.T @ (deg[:, None] * Q)
        Lc = np.linalg.cholesky(0.5 * (G + G.T))
        M2 = scipy.linalg.solve_triangular(Lc, np.eye(M.shape[1]), lower=True).T
        Q = Q @ M2
        M = M @ M2
    if coef:
        return Q, M
    return Q
