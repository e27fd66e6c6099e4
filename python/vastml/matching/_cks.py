"""Convex Kernelized Sorting (thesis Ch.3, AAAI 2012) and the original Kernelized Sorting
(Quadrianto et al.) as its baseline.

Both match two equally sized sets X and Y through kernels alone. The soft assignment pi
(``assignment``; rows index Y, columns index X) says how strongly y_i matches x_j. CKS minimises
the convex relaxation ``||K pi^T - (L pi)^T||_F^2 + C sum_k ((r_k - 1)^2 + (c_k - 1)^2)`` over
pi >= 0 (r, c = row and column sums of pi; K = ``kernel_x``, L = ``kernel_y``, C =
``l2_penalty_marginals``) by a projected limited-memory quasi-Newton method on
variables scaled by the diagonal of the Hessian (the thesis's diagonal-Hessian
preconditioning), with an exact step along each direction (the objective is quadratic), then
rounds pi to a permutation with the Hungarian algorithm (scipy). The heavy work is four m x m
matrix products per iteration (NumPy BLAS, O(m^3); no m^4 object is formed).

The baselines KS and LSOM live in :mod:`vastml.matching._baselines`.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.sparse import csr_matrix
from sklearn.base import BaseEstimator
from threadpoolctl import threadpool_limits

from vastml._progress import Progress
from vastml._validation import as_points, check_float, check_int, choice

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Self

    from vastml._progress import Callback
    from vastml._typing import ArrayLike, FloatArray, IntArray

#: A kernel: a name, or a callable ``k(Z) -> K``.
Kernel = str | Callable[[Any], Any]


def centred_kernel(
    Z: ArrayLike, kernel: Kernel = "rbf", gamma: float | None = None, center: bool = True
) -> FloatArray:
    """``H K H`` for the kernel matrix of the rows of ``Z``: "rbf" ``exp(-gamma ||z - z'||^2)``
    with gamma = 1 / median of the squared distances by default (the thesis's choice), "linear",
    "precomputed" (``Z`` is the kernel matrix) or a callable ``k(Z) -> K``. ``center=False``
    returns K itself.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.matching import centred_kernel
    >>> Z = np.array([[0.0], [1.0], [3.0]])
    >>> K = centred_kernel(Z, "linear", center=False)
    >>> K.tolist()
    [[0.0, 0.0, 0.0], [0.0, 1.0, 3.0], [0.0, 3.0, 9.0]]
    >>> bool(np.allclose(centred_kernel(Z, "linear").sum(axis=0), 0))   # H K H: rows sum to 0
    True
    """
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
            else:
                gamma = check_float(gamma, "gamma", low=0.0, low_open=True)
            K = np.exp(-gamma * d2)
    K = 0.5 * (K + K.T)
    if not center:
        return K
    return K - K.mean(axis=0)[None, :] - K.mean(axis=1)[:, None] + K.mean()


def _cks_args(
    kernel_x: ArrayLike, kernel_y: ArrayLike, penalty: float
) -> tuple[FloatArray, FloatArray, float]:
    K = np.asarray(kernel_x, dtype=float)
    L = np.asarray(kernel_y, dtype=float)
    if K.ndim != 2 or K.shape[0] != K.shape[1] or L.shape != K.shape:
        raise ValueError(
            f"`kernel_x` and `kernel_y` must be square matrices of one size, got {K.shape} and {L.shape}"
        )
    return K, L, check_float(penalty, "l2_penalty_marginals", low=0.0)


def cks_objective(
    assignment: ArrayLike, kernel_x: ArrayLike, kernel_y: ArrayLike, l2_penalty_marginals: float = 10.0
) -> float:
    """The penalised CKS objective (thesis 3.7) at a soft assignment.

    ``||pi K - L pi||_F^2 + C sum_i ((r_i - 1)^2 + (c_i - 1)^2)`` for the soft ``assignment``
    pi (rows index Y, columns index X; r, c its row and column sums), the kernel matrices
    ``kernel_x`` (K, of X) and ``kernel_y`` (L, of Y), and ``l2_penalty_marginals`` (C), the
    weight of the quadratic penalty pulling the row and column sums of pi to 1.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.matching import cks_objective
    >>> K = np.array([[1.0, 0.2], [0.2, 1.0]])
    >>> swap = np.array([[0.0, 1.0], [1.0, 0.0]])
    >>> L = swap @ K @ swap.T            # Y is X with its two objects swapped
    >>> cks_objective(swap, K, L)        # the true matching: a zero of the objective
    0.0
    >>> cks_objective(np.full((2, 2), 0.5), K, L)   # the uniform start is a zero too here
    0.0
    """
    K, L, C = _cks_args(kernel_x, kernel_y, l2_penalty_marginals)
    pi = np.asarray(assignment, dtype=float)
    E = pi @ K - L @ pi
    r, c = pi.sum(axis=1), pi.sum(axis=0)
    return float((E**2).sum() + C * (((r - 1) ** 2).sum() + ((c - 1) ** 2).sum()))


def cks_gradient(
    assignment: ArrayLike, kernel_x: ArrayLike, kernel_y: ArrayLike, l2_penalty_marginals: float = 10.0
) -> FloatArray:
    """Gradient of :func:`cks_objective` in the assignment pi:
    ``2 (pi K^2 - 2 L pi K + L^2 pi) + 2 C (r_i + c_j - 2)``.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.matching import cks_gradient, cks_objective
    >>> rng = np.random.default_rng(0)
    >>> K, L, pi = np.eye(3), np.eye(3), rng.random((3, 3))
    >>> e = np.zeros((3, 3)); e[1, 2] = 1e-6
    >>> fd = (cks_objective(pi + e, K, L) - cks_objective(pi - e, K, L)) / 2e-6
    >>> bool(abs(cks_gradient(pi, K, L)[1, 2] - fd) < 1e-6)
    True
    """
    K, L, C = _cks_args(kernel_x, kernel_y, l2_penalty_marginals)
    pi = np.asarray(assignment, dtype=float)
    E = pi @ K - L @ pi
    r, c = pi.sum(axis=1), pi.sum(axis=0)
    return 2 * (E @ K - L @ E) + 2 * C * (r[:, None] + c[None, :] - 2)


def cks_hessian_diagonal(
    kernel_x: ArrayLike, kernel_y: ArrayLike, l2_penalty_marginals: float = 10.0
) -> FloatArray:
    """Diagonal of the Hessian of :func:`cks_objective` (thesis 3.6 plus the penalty's 4C):
    ``2 (sum_k K_kj^2 + sum_k L_ki^2 - 2 K_jj L_ii) + 4 C`` at (i, j); the objective is
    quadratic, so it does not depend on the assignment.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.matching import cks_hessian_diagonal
    >>> K, L = np.diag([1.0, 2.0]), np.eye(2)
    >>> cks_hessian_diagonal(K, L, 10.0).tolist()   # 2 (K_jj^2 + 1 - 2 K_jj) + 40
    [[40.0, 42.0], [40.0, 42.0]]
    """
    K, L, C = _cks_args(kernel_x, kernel_y, l2_penalty_marginals)
    kk = (K**2).sum(axis=0)
    ll = (L**2).sum(axis=0)
    return 2 * (kk[None, :] + ll[:, None] - 2 * np.outer(np.diag(L), np.diag(K))) + 4 * C


def _check_pair(X: Any, Y: Any, kernel: Kernel) -> tuple[Any, Any]:
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


def _hungarian(pi: FloatArray) -> IntArray:
    rows, cols = linear_sum_assignment(pi, maximize=True)
    return cols[np.argsort(rows)]


def _dot(a: FloatArray, b: FloatArray) -> float:
    """sum(a * b) through BLAS, without the temporary."""
    return float(np.dot(a.ravel(), b.ravel()))


#: Largest ``l2_penalty_marginals`` of :class:`ConvexKernelizedSorting`. The kernel term is
#: lost to rounding against a huge penalty: on 40 Gaussian points (RBF kernels) the match is
#: exact up to C = 1e9, 85% right at 1e12, and from about 1e16 the fit stops at its start
#: (1e200 and up divided by zero). The thesis uses C = 10.
MAX_L2_PENALTY_MARGINALS = 1e8


def _projected_quasi_newton(
    K: FloatArray,
    L: FloatArray,
    C: float,
    max_iter: int,
    tol: float,
    patience: int | None,
    progress: Progress | None = None,
    memory: int = 5,
    check_every: int = 10,
) -> tuple[FloatArray, float, int, IntArray | None, bool]:
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
    iterations) was the same at ``patience`` consecutive checks; or when ``progress``
    reports a stop. Returns (pi, objective, iterations, assignment or None, stopped).
    """
    m = K.shape[0]
    sc = np.sqrt(cks_hessian_diagonal(K, L, C))
    pi = np.full((m, m), 1.0 / m)

    def parts(p: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        return p @ K - L @ p, p.sum(axis=1), p.sum(axis=0)

    def value(E: FloatArray, r: FloatArray, c: FloatArray) -> float:
        return _dot(E, E) + C * (float(((r - 1) ** 2).sum()) + float(((c - 1) ** 2).sum()))

    def grad(E: FloatArray, r: FloatArray, c: FloatArray) -> FloatArray:
        return 2 * (E @ K - L @ E) + 2 * C * (r[:, None] + c[None, :] - 2)

    E, r, c = parts(pi)
    f = value(E, r, c)
    G = grad(E, r, c)
    S: list[FloatArray] = []
    Y: list[FloatArray] = []
    R: list[float] = []
    hist = [f]
    match: IntArray | None = None
    same = 0
    it = 0
    for it in range(1, max_iter + 1):
        g = G / sc
        free = (pi > 0) | (g <= 0)
        q = g * free
        alphas: list[float] = []
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
        if not dHd > 0:  # no curvature left along d (underflow): nothing more to gain
            break
        t = -gd / dHd

        def step(t: float) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
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
        if progress is not None and progress.report(it, f, pi.copy() if progress.wants(it) else None):
            return pi, f, it, None, True
        if it >= 10 and hist[-11] - f <= tol * max(f, 1e-300):
            break
        if patience and it % check_every == 0:
            cur = _hungarian(pi)
            same = same + 1 if match is not None and np.array_equal(cur, match) else 0
            match = cur
            if same + 1 >= patience:
                return pi, f, it, match, False
    return pi, f, it, None, False


def sinkhorn(assignment: ArrayLike, *, max_iter: int = 1000, tol: float = 1e-9) -> FloatArray:
    """Sinkhorn-Knopp balancing: alternately scale the rows and the columns of a non-negative
    square matrix (a soft ``assignment``) to sum to 1, until both are within ``tol``; returns
    the doubly stochastic matrix.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.matching import sinkhorn
    >>> sinkhorn(np.array([[1.0, 1.0], [1.0, 3.0]])).round(4).tolist()
    [[0.634, 0.366], [0.366, 0.634]]
    """
    check_int(max_iter, "max_iter", low=1)
    check_float(tol, "tol", low=0)
    P = np.array(assignment, dtype=float)
    if P.ndim != 2 or P.shape[0] != P.shape[1] or (P < 0).any() or not np.isfinite(P).all():
        raise ValueError("`assignment` must be a square, finite, non-negative matrix")
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
    kernel : "rbf", "linear", "precomputed" or callable, default="rbf"
        "rbf" has gamma = 1/median squared distance per side; "precomputed" means X and Y are
        the two kernel matrices; a callable is ``k(Z) -> K``.
    gamma : float or None, default=None
        RBF width for both sides (None = the median rule per side).
    l2_penalty_marginals : float, default=10.0
        Weight C of the quadratic penalty ``C sum_k ((r_k - 1)^2 + (c_k - 1)^2)`` pulling the
        row and column sums of the soft assignment to 1 (thesis: C = 10). At most 1e8: far
        above the kernel term's scale, that term is lost to rounding against the penalty.
    max_iter : int, default=10000
        Quasi-Newton iterations at most (thesis: 10,000).
    tol : float, default=1e-6
        Stop when the objective decreased by at most ``tol`` times its value over the last 10
        iterations (thesis: 1e-6).
    patience : int or None, default=3
        Also stop when the Hungarian assignment (computed every 10 iterations) was the same at
        ``patience`` consecutive checks. The thesis's objective rule alone runs thousands of
        iterations on m = 320 after the assignment has settled; ``patience=None`` restores it.
    center : bool, default=False
        Centre the kernels (``H K H``) as the thesis writes. Off by default: with centred
        kernels the thesis's start ``pi = 1 1^T / m`` already has objective 0 (``K 1 = 0``), so
        the relaxation is minimised by the uninformative uniform matrix and the solver cannot
        move; uncentred kernels keep the planted permutation as the unique zero (Lemma 1 holds
        for any symmetric K and L).
    projection : {None, "sinkhorn"}, default=None
        Project the penalised solution onto the doubly stochastic matrices by Sinkhorn-Knopp
        balancing (thesis Sec. 3.3.1 lists it as optional and skips it) before ``assignment_`` and the
        Hungarian rounding.
    callbacks : callable, list of callables or None, default=None
        Called as ``callback(iteration, objective, assignment)`` after each iteration (every
        ``callback_every``): the penalised objective being minimised and a copy of the soft
        assignment. Returning True stops the fit with that assignment (rounded as usual) and
        sets ``stopped_early_``.
    callback_every : int, default=1
    verbose : bool or int, default=False
        Draw a progress bar of the iterations.

    Attributes
    ----------
    assignment_ : ndarray of shape (m, m)
        Soft assignment, rows index Y, columns index X.
    match_ : ndarray of shape (m,)
        ``match_[i]`` = the X object matched to ``y_i`` (Hungarian on ``assignment_``).
    objective_ : float
    n_iter_ : int
    stopped_early_ : bool
        Whether a callback stopped the fit.

    Notes
    -----
    ``fit(X, Y)`` takes the second set as scikit-learn's ``y`` argument: an array with as
    many rows as ``X`` (a 1-D one is read as points on a line), so scikit-learn's estimator
    checks, which pass a target vector there, match the rows of ``X`` to its values.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.matching import ConvexKernelizedSorting
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(30, 3)); p = rng.permutation(30)
    >>> cks = ConvexKernelizedSorting().fit(X, X[p])
    >>> bool((cks.match_ == p).all())
    True
    """

    def __init__(
        self,
        *,
        kernel: Kernel = "rbf",
        gamma: float | None = None,
        l2_penalty_marginals: float = 10.0,
        max_iter: int = 10000,
        tol: float = 1e-6,
        center: bool = False,
        patience: int | None = 3,
        projection: str | None = None,
        callbacks: Callback | Sequence[Callback] | None = None,
        callback_every: int = 1,
        verbose: bool | int = False,
    ) -> None:
        self.kernel = kernel
        self.gamma = gamma
        self.l2_penalty_marginals = l2_penalty_marginals
        self.max_iter = max_iter
        self.tol = tol
        self.center = center
        self.patience = patience
        self.projection = projection
        self.callbacks = callbacks
        self.callback_every = callback_every
        self.verbose = verbose

    def fit(self, X: ArrayLike, Y: ArrayLike) -> Self:
        """Match ``Y``'s objects to ``X``'s; returns self."""
        Xv, Yv = _check_pair(X, Y, self.kernel)
        if not (self.kernel == "precomputed" or callable(self.kernel)):
            self.n_features_in_ = Xv.shape[1]
        C = check_float(
            self.l2_penalty_marginals,
            "l2_penalty_marginals",
            low=0.0,
            low_open=True,
            high=MAX_L2_PENALTY_MARGINALS,
        )
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
        progress = Progress(self.callbacks, callback_every=self.callback_every, verbose=self.verbose,
                            total=int(self.max_iter), desc="ConvexKernelizedSorting")
        K = centred_kernel(Xv, self.kernel, self.gamma, self.center)
        L = centred_kernel(Yv, self.kernel, self.gamma, self.center)
        m = K.shape[0]
        if L.shape != (m, m):
            raise ValueError(f"kernel matrices of different sizes: {K.shape} and {L.shape}")
        # small products run faster on one BLAS thread than on a contended pool
        with progress, threadpool_limits(limits=1 if m < 1000 else None):
            pi, f, it, match, stopped = _projected_quasi_newton(
                K, L, C, int(self.max_iter), float(self.tol), self.patience,
                progress if progress.active else None)
        if self.projection == "sinkhorn":
            pi = sinkhorn(np.maximum(pi, 0.0))
            match = None
        self.assignment_ = pi
        self.objective_ = float(f)
        self.n_iter_ = it
        self.stopped_early_ = stopped
        self.match_ = _hungarian(pi) if match is None else match
        return self
