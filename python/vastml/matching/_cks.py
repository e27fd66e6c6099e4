"""Convex Kernelized Sorting (thesis Ch.3, AAAI 2012) and the original Kernelized Sorting
(Quadrianto et al.) as its baseline.

Both match two equally sized sets X and Y through kernels alone. pi[i, j] (rows index Y,
columns index X) says how strongly y_i matches x_j. CKS minimises the convex relaxation
``||K pi^T - (L pi)^T||_F^2 + C sum_k ((r_k - 1)^2 + (c_k - 1)^2)`` over pi >= 0 (r, c = row
and column sums of pi; K, L the kernels) by a projected limited-memory quasi-Newton method on
variables scaled by the diagonal of the Hessian (the thesis's diagonal-Hessian
preconditioning), with an exact step along each direction (the objective is quadratic), then
rounds pi to a permutation with the Hungarian algorithm (scipy). The heavy work is four m x m
matrix products per iteration (NumPy BLAS, O(m^3); no m^4 object is formed).
"""

from __future__ import annotations

import numbers

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.sparse import csr_matrix
from sklearn.base import BaseEstimator
from threadpoolctl import threadpool_limits

from vastml._validation import as_points, choice, n_jobs_arg
from vastml.reorder._random import seed_of as _seed


def centred_kernel(Z, kernel="rbf", gamma=None, center=True) -> np.ndarray:
    """``H K H`` for the kernel matrix of the rows of ``Z``: "rbf" ``exp(-gamma ||z - z'||^2)``
    with gamma = 1 / median of the squared distances by default (the thesis's choice), "linear",
    "precomputed" (``Z`` is the kernel matrix) or a callable ``k(Z) -> K``. ``center=False``
    returns K itself."""
    if callable(kernel):
        K = np.asarray(kernel(Z), dtype=float)
    elif kernel == "precomputed":
        K = np.asarray(Z, dtype=float)
        if K.ndim != 2 or K.shape[0] != K.shape[1]:
            raise ValueError("a precomputed kernel must be a square matrix")
        if not np.isfinite(K).all():
            raise ValueError("the kernel matrix contains NaN or infinite values")
    else:
        choice(kernel, "kernel", ("rbf", "linear", "precomputed"))
        z = as_points(Z, "X")
        if kernel == "linear":
            K = z @ z.T
        else:
            sq = (z**2).sum(axis=1)
            d2 = np.maximum(sq[:, None] + sq[None, :] - 2 * z @ z.T, 0.0)
            if gamma is None:
                off = d2[~np.eye(len(z), dtype=bool)]
                med = np.median(off) if off.size else 1.0
                gamma = 1.0 / med if med > 0 else 1.0
            elif not (np.isfinite(gamma) and gamma > 0):
                raise ValueError(f"`gamma` must be a positive number, got {gamma!r}")
            K = np.exp(-gamma * d2)
    K = 0.5 * (K + K.T)
    if not center:
        return K
    return K - K.mean(axis=0)[None, :] - K.mean(axis=1)[:, None] + K.mean()


def cks_objective(pi, K, L, C=10.0) -> float:
    """The penalised CKS objective (thesis 3.7) at ``pi`` for centred kernels K (X side) and L."""
    E = pi @ K - L @ pi
    r, c = pi.sum(axis=1), pi.sum(axis=0)
    return float((E**2).sum() + C * (((r - 1) ** 2).sum() + ((c - 1) ** 2).sum()))


def cks_gradient(pi, K, L, C=10.0) -> np.ndarray:
    """Gradient of :func:`cks_objective`: ``2 (pi K^2 - 2 L pi K + L^2 pi) + 2 C (r_i + c_j - 2)``."""
    E = pi @ K - L @ pi
    r, c = pi.sum(axis=1), pi.sum(axis=0)
    return 2 * (E @ K - L @ E) + 2 * C * (r[:, None] + c[None, :] - 2)


def cks_hessian_diagonal(K, L, C=10.0) -> np.ndarray:
    """Diagonal of the Hessian (thesis 3.6 plus the penalty's 4C):
    ``2 (sum_k K_kj^2 + sum_k L_ki^2 - 2 K_jj L_ii) + 4 C`` at (i, j)."""
    kk = (K**2).sum(axis=0)
    ll = (L**2).sum(axis=0)
    return 2 * (kk[None, :] + ll[:, None] - 2 * np.outer(np.diag(L), np.diag(K))) + 4 * C


def _check_pair(X, Y, kernel):
    if kernel == "precomputed" or callable(kernel):
        m1, m2 = len(X), len(Y)
    else:
        X, Y = as_points(X, "X", allow_1d=False), as_points(Y, "Y")
        m1, m2 = X.shape[0], Y.shape[0]
    if m1 != m2:
        raise ValueError(f"X and Y must hold the same number of objects, got {m1} and {m2}")
    if m1 < 2:
        raise ValueError(f"at least 2 objects per side are needed, got n_samples = {m1}")
    return X, Y


def _hungarian(pi):
    rows, cols = linear_sum_assignment(pi, maximize=True)
    return cols[np.argsort(rows)]


def _dot(a, b):
    """sum(a * b) through BLAS, without the temporary."""
    return float(np.dot(a.ravel(), b.ravel()))


def _projected_quasi_newton(K, L, C, max_iter, tol, patience, memory=5, check_every=10):
    """Minimise the penalised CKS objective over pi >= 0 from ``11^T / m``.

    Variables are scaled by the square root of the Hessian diagonal, so the scaled problem has
    a unit diagonal. Each iteration: an L-BFGS direction (two-loop recursion, ``memory`` pairs)
    on the free variables (those not at 0 with a positive gradient), the exact minimiser of the
    quadratic along it, projection onto pi >= 0 with halving until the Armijo condition holds
    (the residual ``pi K - L pi`` is updated by linearity, with a sparse correction for the
    clipped entries, so an iteration costs four dense products).
    Stops after ``max_iter`` iterations; when the objective decreased by at most ``tol`` times
    its value over the last 10 iterations (the thesis's rule, averaged against zig-zag); or,
    with ``patience``, when the Hungarian assignment (computed every ``check_every``
    iterations) was the same at ``patience`` consecutive checks. Returns (pi, objective,
    iterations, assignment or None).
    """
    m = K.shape[0]
    sc = np.sqrt(cks_hessian_diagonal(K, L, C))
    pi = np.full((m, m), 1.0 / m)

    def parts(p):
        return p @ K - L @ p, p.sum(axis=1), p.sum(axis=0)

    def value(E, r, c):
        return _dot(E, E) + C * (float(((r - 1) ** 2).sum()) + float(((c - 1) ** 2).sum()))

    def grad(E, r, c):
        return 2 * (E @ K - L @ E) + 2 * C * (r[:, None] + c[None, :] - 2)

    E, r, c = parts(pi)
    f = value(E, r, c)
    G = grad(E, r, c)
    S, Y, R = [], [], []
    hist = [f]
    match, same = None, 0
    it = 0
    for it in range(1, max_iter + 1):
        g = G / sc
        free = (pi > 0) | (g <= 0)
        q = g * free
        alphas = []
        for s_, y_, rho in zip(reversed(S), reversed(Y), reversed(R)):
            a = rho * _dot(s_, q)
            alphas.append(a)
            q -= a * y_
        if S:
            q *= _dot(S[-1], Y[-1]) / _dot(Y[-1], Y[-1])
        for (s_, y_, rho), a in zip(zip(S, Y, R), reversed(alphas)):
            q += (a - rho * _dot(y_, q)) * s_
        du = -q * free
        if _dot(g, du) >= 0:  # not a descent direction: restart from the gradient
            du = -g * free
            S.clear()
            Y.clear()
            R.clear()
        d = du / sc
        gd = _dot(G, d)
        if gd >= 0:  # projected gradient is zero: optimal
            break
        Ed = d @ K - L @ d
        rd, cd = d.sum(axis=1), d.sum(axis=0)
        dHd = 2 * (_dot(Ed, Ed) + C * (_dot(rd, rd) + _dot(cd, cd)))
        t = -gd / dHd

        def step(t):
            # pi + t d clipped at 0; E, r, c follow by linearity plus a sparse correction for
            # the clipped entries (a few per cent of them), so no dense product is needed
            new = pi + t * d
            En, rn, cn = E + t * Ed, r + t * rd, c + t * cd
            neg = new < 0
            if neg.any():
                i, j = np.nonzero(neg)
                v = -new[i, j]
                new[i, j] = 0.0
                D = csr_matrix((v, (i, j)), shape=(m, m))
                En = En + D @ K - (D.T @ L).T
                rn = rn + np.bincount(i, v, m)
                cn = cn + np.bincount(j, v, m)
            return new, En, rn, cn

        new, En, rn, cn = step(t)
        fn = value(En, rn, cn)
        for _ in range(30):
            if fn <= f + 1e-4 * (_dot(G, new) - _dot(G, pi)):
                break
            t *= 0.5
            new, En, rn, cn = step(t)
            fn = value(En, rn, cn)
        if fn >= f:
            break
        if it % 50 == 0:  # refresh against rounding drift of the updates
            En, rn, cn = parts(new)
            fn = value(En, rn, cn)
        Gn = grad(En, rn, cn)
        s_, y_ = (new - pi) * sc, (Gn - G) / sc
        sy = _dot(s_, y_)
        if sy > 1e-12 * np.sqrt(_dot(s_, s_) * _dot(y_, y_)):
            S.append(s_)
            Y.append(y_)
            R.append(1.0 / sy)
            if len(S) > memory:
                del S[0], Y[0], R[0]
        pi, E, r, c, f, G = new, En, rn, cn, fn, Gn
        hist.append(f)
        if it >= 10 and hist[-11] - f <= tol * max(f, 1e-300):
            break
        if patience and it % check_every == 0:
            cur = _hungarian(pi)
            same = same + 1 if match is not None and np.array_equal(cur, match) else 0
            match = cur
            if same + 1 >= patience:
                return pi, f, it, match
    return pi, f, it, None


def sinkhorn(pi, *, max_iter=1000, tol=1e-9):
    """Sinkhorn-Knopp balancing: alternately scale the rows and the columns of a non-negative
    matrix to sum to 1, until both are within ``tol``; returns the doubly stochastic matrix.

    Examples
    --------
    >>> sinkhorn(np.array([[1.0, 1.0], [1.0, 3.0]])).round(4).tolist()
    [[0.634, 0.366], [0.366, 0.634]]
    """
    P = np.array(pi, dtype=float)
    if P.ndim != 2 or P.shape[0] != P.shape[1] or (P < 0).any() or not np.isfinite(P).all():
        raise ValueError("`pi` must be a square, finite, non-negative matrix")
    P = P + 1e-300 * (P.sum(axis=1, keepdims=True) == 0)  # an empty row cannot be scaled
    for _ in range(int(max_iter)):
        P /= P.sum(axis=1, keepdims=True)
        P /= P.sum(axis=0, keepdims=True)
        if np.abs(P.sum(axis=1) - 1).max() <= tol:
            break
    return P


class ConvexKernelizedSorting(BaseEstimator):
    """Match the objects of X to those of Y (same count) by Convex Kernelized Sorting.

    Parameters
    ----------
    kernel : "rbf" (gamma = 1/median squared distance per side), "linear", "precomputed"
        (X and Y are the two kernel matrices) or a callable ``k(Z) -> K``.
    gamma : float or None, RBF width for both sides (None = the median rule per side).
    C : penalty on row and column sums (thesis: 10).
    max_iter, tol : stop after ``max_iter`` iterations or when the objective decreased by at
        most ``tol`` times its value over the last 10 iterations (thesis: 10,000 and 1e-6).
    patience : int or None, also stop when the Hungarian assignment (computed every 10
        iterations) was the same at ``patience`` consecutive checks (default 3). The thesis's
        objective rule alone runs thousands of iterations on m = 320 after the assignment has
        settled; ``patience=None`` restores it.
    center : bool, centre the kernels (``H K H``) as the thesis writes. Off by default: with
        centred kernels the thesis's start ``pi = 1 1^T / m`` already has objective 0
        (``K 1 = 0``), so the relaxation is minimised by the uninformative uniform matrix and
        the solver cannot move; uncentred kernels keep the planted permutation as the unique
        zero (Lemma 1 holds for any symmetric K and L).
    projection : {None, "sinkhorn"}, default=None
        Project the penalised solution onto the doubly stochastic matrices by Sinkhorn-Knopp
        balancing (thesis Sec. 3.3.1 lists it as optional and skips it) before ``pi_`` and the
        Hungarian rounding.

    Attributes
    ----------
    pi_ : (m, m) soft assignment, rows index Y, columns index X.
    match_ : (m,) int, ``match_[i]`` = the X object matched to ``y_i`` (Hungarian on pi_).
    objective_, n_iter_.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(30, 3)); p = rng.permutation(30)
    >>> cks = ConvexKernelizedSorting().fit(X, X[p])
    >>> bool((cks.match_ == p).all())
    True
    """

    def __init__(self, *, kernel="rbf", gamma=None, C=10.0, max_iter=10000, tol=1e-6,
                 center=False, patience=3, projection=None):
        self.kernel = kernel
        self.gamma = gamma
        self.C = C
        self.max_iter = max_iter
        self.tol = tol
        self.center = center
        self.patience = patience
        self.projection = projection

    def fit(self, X, Y):
        """Match ``Y``'s objects to ``X``'s; returns self."""
        X, Y = _check_pair(X, Y, self.kernel)
        if not (self.kernel == "precomputed" or callable(self.kernel)):
            self.n_features_in_ = X.shape[1]
        C = float(self.C)
        if not (np.isfinite(C) and C > 0):
            raise ValueError(f"`C` must be a positive number, got {self.C!r}")
        if isinstance(self.max_iter, bool) or not isinstance(self.max_iter, numbers.Integral) or self.max_iter < 1:
            raise ValueError(f"`max_iter` must be an integer >= 1, got {self.max_iter!r}")
        if self.patience is not None and (isinstance(self.patience, bool)
                                          or not isinstance(self.patience, numbers.Integral)
                                          or self.patience < 1):
            raise ValueError(f"`patience` must be None or an integer >= 1, got {self.patience!r}")
        if not (np.isfinite(self.tol) and self.tol >= 0):
            raise ValueError(f"`tol` must be a number >= 0, got {self.tol!r}")
        if self.projection not in (None, "sinkhorn"):
            raise ValueError(f"`projection` must be None or 'sinkhorn', got {self.projection!r}")
        K = centred_kernel(X, self.kernel, self.gamma, self.center)
        L = centred_kernel(Y, self.kernel, self.gamma, self.center)
        m = K.shape[0]
        if L.shape != (m, m):
            raise ValueError(f"kernel matrices of different sizes: {K.shape} and {L.shape}")
        # small products run faster on one BLAS thread than on a contended pool
        with threadpool_limits(limits=1 if m < 1000 else None):
            pi, f, it, match = _projected_quasi_newton(
                K, L, C, int(self.max_iter), float(self.tol), self.patience)
        if self.projection == "sinkhorn":
            pi = sinkhorn(np.maximum(pi, 0.0))
            match = None
        self.pi_ = pi
        self.objective_ = float(f)
        self.n_iter_ = it
        self.match_ = _hungarian(pi) if match is None else match
        return self


def smooth_kernel(K, power):
    """KS-p's smoothing (Jagarlamudi et al. 2010): raise every element to ``power`` (0 < p <= 1),
    normalise the rows to unit length, return ``M_p M_p^T``.

    Examples
    --------
    >>> smooth_kernel(np.array([[4.0, 0.0], [1.0, 1.0]]), 0.5).round(4).tolist()
    [[1.0, 0.7071], [0.7071, 1.0]]
    """
    K = np.asarray(K, dtype=float)
    if (K < 0).any():
        raise ValueError("KS-p needs a non-negative kernel matrix (it raises entries to a power)")
    Mp = K**power
    norms = np.linalg.norm(Mp, axis=1, keepdims=True)
    Mp = Mp / np.where(norms > 0, norms, 1.0)
    return Mp @ Mp.T


def _first_pc_rank(Z):
    """Rank of each row along the first principal component of its rows (PCA start of KS)."""
    Zc = Z - Z.mean(axis=0)
    _, _, vt = np.linalg.svd(Zc, full_matrices=False)
    t = Zc @ vt[0]
    if (t**3).sum() < 0:  # the component's sign is arbitrary: fix it by the skew
        t = -t
    return np.argsort(np.argsort(t, kind="stable"), kind="stable")


class KernelizedSorting(BaseEstimator):
    """The original Kernelized Sorting (Quadrianto et al.): maximise ``trace(K pi^T L pi)`` over
    permutations by repeated linear assignment (Hungarian) on ``L pi K``. Unstable and
    start-dependent (the thesis's baseline): ``n_init`` restarts keep the best.

    Parameters
    ----------
    kernel, gamma
        As in :class:`ConvexKernelizedSorting` (the kernels are centred, as KS does).
    max_iter : int, default=100
        Linear-assignment rounds per start (stops earlier at a fixed point).
    n_init : int, default=1
        Starts; the one with the largest objective is kept.
    init : {"random", "pca"}, default="random"
        ``"pca"``: KS's PCA start, matching the objects of both sides by their rank along each
        side's first principal component (data kernels only); later starts are random.
    smoothing_power : float in (0, 1] or None, default=None
        KS-p: smooth both kernels first (:func:`smooth_kernel`; non-negative kernels only).
    zero_diagonal : bool, default=False
        Zero the kernels' diagonals (the thesis does for documents).
    random_state : int, RandomState or None
    n_jobs : int or None
        Starts run on this many threads (the products release the GIL); the result does not
        depend on it.

    Attributes
    ----------
    match_ : (m,) int, ``match_[i]`` = the X object matched to ``y_i``.
    objective_ : float, ``trace(K pi^T L pi)`` of the kept start.
    objectives_ : list of float, per start.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(1).normal(size=(20, 2))
    >>> ks = KernelizedSorting(random_state=0).fit(X, X)
    >>> sorted(ks.match_.tolist()) == list(range(20))
    True
    """

    def __init__(self, *, kernel="rbf", gamma=None, max_iter=100, n_init=1, init="random",
                 smoothing_power=None, zero_diagonal=False, random_state=None, n_jobs=None):
        self.kernel = kernel
        self.gamma = gamma
        self.max_iter = max_iter
        self.n_init = n_init
        self.init = init
        self.smoothing_power = smoothing_power
        self.zero_diagonal = zero_diagonal
        self.random_state = random_state
        self.n_jobs = n_jobs

    def fit(self, X, Y):
        """Match ``Y``'s objects to ``X``'s; returns self."""
        X, Y = _check_pair(X, Y, self.kernel)
        if not (self.kernel == "precomputed" or callable(self.kernel)):
            self.n_features_in_ = X.shape[1]
        for name in ("max_iter", "n_init"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
                raise ValueError(f"`{name}` must be an integer >= 1, got {v!r}")
        choice(self.init, "init", ("random", "pca"))
        p = self.smoothing_power
        if p is not None and (isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0 < p <= 1):
            raise ValueError(f"`smoothing_power` must be None or in (0, 1], got {p!r}")
        if self.init == "pca" and (self.kernel == "precomputed" or callable(self.kernel)):
            raise ValueError("`init='pca'` needs the data, not a precomputed or callable `kernel`")
        n_jobs = n_jobs_arg(self.n_jobs)
        if p is None:
            K = centred_kernel(X, self.kernel, self.gamma)
            L = centred_kernel(Y, self.kernel, self.gamma)
        else:
            K = centred_kernel(smooth_kernel(centred_kernel(X, self.kernel, self.gamma, False), p), "precomputed")
            L = centred_kernel(smooth_kernel(centred_kernel(Y, self.kernel, self.gamma, False), p), "precomputed")
        if self.zero_diagonal:
            np.fill_diagonal(K, 0.0)
            np.fill_diagonal(L, 0.0)
        m = K.shape[0]
        rng = np.random.default_rng(_seed(self.random_state))
        starts = [rng.permutation(m) for _ in range(int(self.n_init))]
        if self.init == "pca":
            rx, ry = _first_pc_rank(np.asarray(X, float)), _first_pc_rank(np.asarray(Y, float))
            starts[0] = np.argsort(rx)[ry]  # y_i <- the x of the same rank

        def run(match):
            LP = np.empty_like(L)
            for _ in range(int(self.max_iter)):
                LP[:, match] = L  # L P with P[k, match[k]] = 1, without the dense product
                rows, cols = linear_sum_assignment(LP @ K, maximize=True)
                new = cols[np.argsort(rows)]
                if np.array_equal(new, match):
                    break
                match = new
            return float((L * K[np.ix_(match, match)]).sum()), match

        workers = 1 if n_jobs is None and len(starts) == 1 else (n_jobs or None)
        if workers == 1 or len(starts) == 1:
            results = [run(s) for s in starts]
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=workers) as pool:
                results = list(pool.map(run, starts))
        best = max(range(len(results)), key=lambda k: (results[k][0], -k))
        self.objectives_ = [r[0] for r in results]
        self.objective_, self.match_ = results[best]
        return self


def lsmi(K, L, match, regularization=1e-3):
    """Least-squares mutual information between the rows of X and of Y paired by ``match``
    (``y_i`` with ``x_match[i]``), with the density-ratio model
    ``r(x, y) = sum_l alpha_l k(x, x_l) l(y, y_l)`` centred on the pairs (Suzuki et al.; Yamada
    & Sugiyama's LSOM): ``H = (K K) o (L' L') / n^2``, ``h = (K o L') 1 / n`` with ``L'`` the Y
    kernel in X's order, ``alpha = (H + regularization I)^-1 h`` and SMI ``= h' alpha / 2 - 1/2``.
    Returns ``(smi, alpha)``.
    """
    n = K.shape[0]
    inv = np.empty(n, dtype=np.int64)
    inv[np.asarray(match)] = np.arange(n)  # x_j is paired with y_inv[j]
    Lx = L[np.ix_(inv, inv)]
    H = (K @ K) * (Lx @ Lx) / n**2
    h = (K * Lx).sum(axis=0) / n
    alpha = np.linalg.solve(H + regularization * np.eye(n), h)
    return 0.5 * float(h @ alpha) - 0.5, alpha


class LeastSquaresObjectMatching(BaseEstimator):
    """LSOM (Yamada & Sugiyama 2011), the thesis's third matching baseline: maximise the
    least-squares mutual information (:func:`lsmi`) between X and the matched Y by alternating
    the LSMI fit (``alpha``) with a linear assignment on ``K diag(alpha) L'^T``; ``n_init``
    starts keep the largest SMI. Kernel widths and the regulariser are fixed here (the paper
    picks them by cross-validation).

    Parameters
    ----------
    kernel, gamma
        As in :class:`ConvexKernelizedSorting` (uncentred Gaussian kernels by default).
    regularization : float, default=1e-3
        Ridge term of the LSMI fit.
    max_iter : int, default=100
    n_init : int, default=1
    init : {"random", "pca"} or array of shape (m,), default="random"
        Start: random, KS's PCA start, or a given match.
    random_state, n_jobs
        As in :class:`KernelizedSorting`.

    Attributes
    ----------
    match_ : (m,) int, ``match_[i]`` = the X object matched to ``y_i``.
    smi_ : float, the LSMI of the kept match; ``smis_`` per start.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(1).normal(size=(20, 2)); p = np.random.default_rng(2).permutation(20)
    >>> om = LeastSquaresObjectMatching(init=p).fit(X, X[p])
    >>> bool((om.match_ == p).all())
    True
    """

    def __init__(self, *, kernel="rbf", gamma=None, regularization=1e-3, max_iter=100, n_init=1,
                 init="random", random_state=None, n_jobs=None):
        self.kernel = kernel
        self.gamma = gamma
        self.regularization = regularization
        self.max_iter = max_iter
        self.n_init = n_init
        self.init = init
        self.random_state = random_state
        self.n_jobs = n_jobs

    def fit(self, X, Y):
        """Match ``Y``'s objects to ``X``'s; returns self."""
        X, Y = _check_pair(X, Y, self.kernel)
        if not (self.kernel == "precomputed" or callable(self.kernel)):
            self.n_features_in_ = X.shape[1]
        for name in ("max_iter", "n_init"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
                raise ValueError(f"`{name}` must be an integer >= 1, got {v!r}")
        reg = self.regularization
        if isinstance(reg, bool) or not isinstance(reg, numbers.Real) or not (np.isfinite(reg) and reg > 0):
            raise ValueError(f"`regularization` must be a positive number, got {reg!r}")
        n_jobs = n_jobs_arg(self.n_jobs)
        K = centred_kernel(X, self.kernel, self.gamma, False)
        L = centred_kernel(Y, self.kernel, self.gamma, False)
        m = K.shape[0]
        rng = np.random.default_rng(_seed(self.random_state))
        starts = [rng.permutation(m) for _ in range(int(self.n_init))]
        init = self.init
        if isinstance(init, str):
            choice(init, "init", ("random", "pca"))
            if init == "pca":
                if self.kernel == "precomputed" or callable(self.kernel):
                    raise ValueError("`init='pca'` needs the data, not a precomputed or callable `kernel`")
                rx, ry = _first_pc_rank(np.asarray(X, float)), _first_pc_rank(np.asarray(Y, float))
                starts[0] = np.argsort(rx)[ry]
        else:
            given = np.asarray(init)
            if given.shape != (m,) or not np.array_equal(np.sort(given), np.arange(m)):
                raise ValueError("`init` must be 'random', 'pca' or a permutation of the objects")
            starts[0] = given.astype(np.int64)

        def run(match):
            smi, alpha = lsmi(K, L, match, reg)
            for _ in range(int(self.max_iter)):
                inv = np.empty(m, dtype=np.int64)
                inv[match] = np.arange(m)
                # gain of pairing x_i with y_j: sum_l alpha_l k(x_i, x_l) l(y_j, y_inv[l])
                G = K @ (alpha[:, None] * L[inv, :])
                rows, cols = linear_sum_assignment(G, maximize=True)  # x_rows[k] <- y_cols[k]
                new = np.empty(m, dtype=np.int64)
                new[cols] = rows
                if np.array_equal(new, match):
                    break
                new_smi, new_alpha = lsmi(K, L, new, reg)
                if new_smi <= smi:
                    break
                match, smi, alpha = new, new_smi, new_alpha
            return smi, match

        if len(starts) == 1 or n_jobs == 1:
            results = [run(s) for s in starts]
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=n_jobs) as pool:
                results = list(pool.map(run, starts))
        best = max(range(len(results)), key=lambda k: (results[k][0], -k))
        self.smis_ = [r[0] for r in results]
        self.smi_, self.match_ = results[best]
        return self
