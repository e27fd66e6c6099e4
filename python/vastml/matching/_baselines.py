"""The matching baselines of the CKS thesis: the original Kernelized Sorting (Quadrianto et
al., with the KS-p smoothing of Jagarlamudi et al. and the PCA start) and Least-Squares Object
Matching (Yamada & Sugiyama), both by repeated linear assignment from ``n_init`` starts."""

from __future__ import annotations

import numbers
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.base import BaseEstimator

from vastml._progress import Progress
from vastml._validation import (
    as_permutation,
    as_square_matrix,
    check_float,
    check_int,
    choice,
    n_jobs_arg,
)
from vastml.matching._cks import Kernel, _check_pair, centred_kernel
from vastml.reorder._random import seed_of as _seed

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence
    from typing import Self

    from vastml._progress import Callback
    from vastml._typing import ArrayLike, FloatArray, IntArray, RandomState


def smooth_kernel(kernel_matrix: ArrayLike, power: float) -> FloatArray:
    """KS-p's smoothing (Jagarlamudi et al. 2010): raise every element of a non-negative
    kernel matrix to ``power`` (0 < p <= 1), normalise the rows to unit length, return
    ``M_p M_p^T``.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.matching import smooth_kernel
    >>> smooth_kernel(np.array([[4.0, 0.0], [1.0, 1.0]]), 0.5).round(4).tolist()
    [[1.0, 0.7071], [0.7071, 1.0]]
    """
    K = as_square_matrix(kernel_matrix, "kernel_matrix")
    power = check_float(power, "power", low=0, high=1, low_open=True)
    if (K < 0).any():
        raise ValueError("KS-p needs a non-negative kernel matrix (it raises entries to a power)")
    Mp = K**power
    norms = np.linalg.norm(Mp, axis=1, keepdims=True)
    Mp = Mp / np.where(norms > 0, norms, 1.0)
    return Mp @ Mp.T


def _first_pc_rank(Z: FloatArray) -> IntArray:
    """Rank of each row along the first principal component of its rows (PCA start of KS)."""
    Zc = Z - Z.mean(axis=0)
    _, _, vt = np.linalg.svd(Zc, full_matrices=False)
    t = Zc @ vt[0]
    if (t**3).sum() < 0:  # the component's sign is arbitrary: fix it by the skew
        t = -t
    return np.argsort(np.argsort(t, kind="stable"), kind="stable")


class _Rounds:
    """One :class:`Progress` shared by the starts of a multi-start fit, which may run on
    threads: the rounds are numbered 1, 2, ... in the order they finish (under a lock), and a
    stop asked by a callback ends every start at its next round."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.lock = threading.Lock()
        self.count = 0
        self.stopped = False

    def report(self, objective: float, match: IntArray) -> bool:
        """Report one round; True when the fit must stop."""
        if not self.progress.active:
            return False
        with self.lock:
            if self.stopped:
                return True
            self.count += 1
            state = match.copy() if self.progress.wants(self.count) else None
            try:
                self.stopped = self.progress.report(self.count, objective, state)
            except BaseException:
                self.stopped = True  # the other starts end too; the error is raised by this one
                raise
            return self.stopped


def _random_starts(
    rng: np.random.Generator, m: int, n_init: int, first: IntArray | None = None
) -> Iterator[IntArray]:
    """``n_init`` random permutations of ``range(m)`` drawn one at a time (memory does not
    grow with ``n_init``), the first replaced by ``first`` when given (still drawn, so the
    later starts do not depend on it)."""
    for k in range(n_init):
        start = rng.permutation(m)
        yield first if k == 0 and first is not None else start


def _run_starts(
    run: Callable[[IntArray], tuple[float, IntArray]],
    starts: Iterable[IntArray],
    n_jobs: int | None,
    n_starts: int,
) -> list[tuple[float, IntArray]]:
    """``run`` on each of the ``n_starts`` starts, on ``n_jobs`` threads (checked by
    ``n_jobs_arg``), in order; the starts are taken a batch at a time."""
    if n_jobs is not None and n_jobs < 0:
        n_jobs = max(1, (os.cpu_count() or 1) + 1 + n_jobs)
    if n_jobs == 1 or n_starts == 1:
        return [run(s) for s in starts]
    out: list[tuple[float, IntArray]] = []
    it = iter(starts)
    with ThreadPoolExecutor(max_workers=n_jobs) as pool:
        while batch := list(islice(it, 64)):
            out.extend(pool.map(run, batch))
    return out


_PROGRESS_DOC = """
    callbacks : callable, list of callables or None, default=None
        Called as ``callback(iteration, objective, match)`` after each linear-assignment
        round (every ``callback_every``), the rounds of all starts numbered in the order they
        finish; ``objective`` is the {what} being maximised, ``match`` a copy of the start's
        current matching. Returning True stops every start (keeping the best so far) and sets
        ``stopped_early_``.
    callback_every : int, default=1
    verbose : bool or int, default=False
        Draw a progress bar of the rounds (``n_init * max_iter`` at most)."""


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
        depend on it.{progress}

    Attributes
    ----------
    match_ : ndarray of shape (m,)
        ``match_[i]`` = the X object matched to ``y_i``.
    objective_ : float
        ``trace(K pi^T L pi)`` of the kept start.
    objectives_ : list of float
        Per start.
    stopped_early_ : bool
        Whether a callback stopped the fit.

    Notes
    -----
    ``fit(X, Y)`` takes the second set as scikit-learn's ``y`` argument (same number of rows).

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.matching import KernelizedSorting
    >>> X = np.random.default_rng(1).normal(size=(20, 2))
    >>> ks = KernelizedSorting(random_state=0).fit(X, X)
    >>> sorted(ks.match_.tolist()) == list(range(20))
    True
    """

    __doc__ = (__doc__ or "").replace("{progress}", _PROGRESS_DOC.format(what="KS objective"))

    def __init__(
        self,
        *,
        kernel: Kernel = "rbf",
        gamma: float | None = None,
        max_iter: int = 100,
        n_init: int = 1,
        init: str = "random",
        smoothing_power: float | None = None,
        zero_diagonal: bool = False,
        random_state: RandomState | np.random.Generator = None,
        n_jobs: int | None = None,
        callbacks: Callback | Sequence[Callback] | None = None,
        callback_every: int = 1,
        verbose: bool | int = False,
    ) -> None:
        self.kernel = kernel
        self.gamma = gamma
        self.max_iter = max_iter
        self.n_init = n_init
        self.init = init
        self.smoothing_power = smoothing_power
        self.zero_diagonal = zero_diagonal
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.callbacks = callbacks
        self.callback_every = callback_every
        self.verbose = verbose

    def fit(self, X: ArrayLike, Y: ArrayLike) -> Self:
        """Match ``Y``'s objects to ``X``'s; returns self."""
        Xv, Yv = _check_pair(X, Y, self.kernel)
        if not (self.kernel == "precomputed" or callable(self.kernel)):
            self.n_features_in_ = Xv.shape[1]
        max_iter = check_int(self.max_iter, "max_iter", low=1)
        n_init = check_int(self.n_init, "n_init", low=1)
        choice(self.init, "init", ("random", "pca"))
        p = self.smoothing_power
        if p is not None and (isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0 < p <= 1):
            raise ValueError(f"`smoothing_power` must be None or in (0, 1], got {p!r}")
        if self.init == "pca" and (self.kernel == "precomputed" or callable(self.kernel)):
            raise ValueError("`init='pca'` needs the data, not a precomputed or callable `kernel`")
        n_jobs = n_jobs_arg(self.n_jobs)
        progress = Progress(self.callbacks, callback_every=self.callback_every, verbose=self.verbose,
                            total=n_init * max_iter, desc="KernelizedSorting")
        if p is None:
            K = centred_kernel(Xv, self.kernel, self.gamma)
            L = centred_kernel(Yv, self.kernel, self.gamma)
        else:
            K = centred_kernel(smooth_kernel(centred_kernel(Xv, self.kernel, self.gamma, False), p), "precomputed")
            L = centred_kernel(smooth_kernel(centred_kernel(Yv, self.kernel, self.gamma, False), p), "precomputed")
        if self.zero_diagonal:
            np.fill_diagonal(K, 0.0)
            np.fill_diagonal(L, 0.0)
        m = K.shape[0]
        rng = np.random.default_rng(_seed(self.random_state))
        first = None
        if self.init == "pca":
            rx, ry = _first_pc_rank(np.asarray(Xv, float)), _first_pc_rank(np.asarray(Yv, float))
            first = np.argsort(rx)[ry]  # y_i <- the x of the same rank
        starts = _random_starts(rng, m, n_init, first)
        rounds = _Rounds(progress)

        def objective(match: IntArray) -> float:
            return float((L * K[np.ix_(match, match)]).sum())

        def run(match: IntArray) -> tuple[float, IntArray]:
            LP = np.empty_like(L)
            for _ in range(max_iter):
                if rounds.stopped:
                    break
                LP[:, match] = L  # L P with P[k, match[k]] = 1, without the dense product
                rows, cols = linear_sum_assignment(LP @ K, maximize=True)
                new = cols[np.argsort(rows)]
                converged = np.array_equal(new, match)
                match = new
                # every round is reported, the last (converged) one too
                if rounds.report(objective(match), match) or converged:
                    break
            return objective(match), match

        with progress:
            results = _run_starts(run, starts, n_jobs, n_init)
        best = max(range(len(results)), key=lambda k: (results[k][0], -k))
        self.objectives_ = [r[0] for r in results]
        self.objective_, self.match_ = results[best]
        self.stopped_early_ = rounds.stopped
        return self


def lsmi(
    kernel_x: ArrayLike, kernel_y: ArrayLike, match: ArrayLike, ridge: float = 1e-3
) -> tuple[float, FloatArray]:
    """Least-squares mutual information between the rows of X and of Y paired by ``match``.

    ``y_i`` is paired with ``x_match[i]``. The density-ratio model
    ``r(x, y) = sum_l alpha_l k(x, x_l) l(y, y_l)`` is centred on the pairs (Suzuki et al.;
    Yamada & Sugiyama's LSOM): with K = ``kernel_x``, L' = ``kernel_y`` in X's order,
    ``H = (K K) o (L' L') / n^2``, ``h = (K o L') 1 / n``, ``alpha = (H + ridge I)^-1 h`` and
    SMI ``= h' alpha / 2 - 1/2``. Returns ``(smi, alpha)``.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.matching import centred_kernel, lsmi
    >>> x = np.random.default_rng(0).normal(size=(30, 1))
    >>> K = centred_kernel(x, center=False)
    >>> paired, _ = lsmi(K, K, np.arange(30))                             # y = x
    >>> shuffled, _ = lsmi(K, K, np.random.default_rng(1).permutation(30))
    >>> bool(paired > shuffled)
    True
    """
    K = as_square_matrix(kernel_x, "kernel_x")
    n = K.shape[0]
    L = as_square_matrix(kernel_y, "kernel_y", n)
    ridge = check_float(ridge, "ridge", low=0.0, low_open=True)
    inv = np.empty(n, dtype=np.int64)
    inv[as_permutation(match, n, "match")] = np.arange(n)  # x_j is paired with y_inv[j]
    Lx = L[np.ix_(inv, inv)]
    H = (K @ K) * (Lx @ Lx) / n**2
    h = (K * Lx).sum(axis=0) / n
    alpha = np.linalg.solve(H + ridge * np.eye(n), h)
    return 0.5 * float(h @ alpha) - 0.5, alpha


class LeastSquaresObjectMatching(BaseEstimator):
    """LSOM (Yamada & Sugiyama 2011), the thesis's third matching baseline: maximise the
    least-squares mutual information (:func:`lsmi`) between X and the matched Y by alternating
    the LSMI fit (``alpha``) with a linear assignment on ``K diag(alpha) L'^T``; ``n_init``
    starts keep the largest SMI. Kernel widths and the ridge are fixed here (the paper picks
    them by cross-validation).

    Parameters
    ----------
    kernel, gamma
        As in :class:`ConvexKernelizedSorting` (uncentred Gaussian kernels by default).
    ridge : float, default=1e-3
        Added to the diagonal of the LSMI system (the paper's lambda).
    max_iter : int, default=100
        Rounds per start.
    n_init : int, default=1
    init : {"random", "pca"} or array of shape (m,), default="random"
        Start: random, KS's PCA start, or a given match.
    random_state, n_jobs
        As in :class:`KernelizedSorting`.{progress}

    Attributes
    ----------
    match_ : ndarray of shape (m,)
        ``match_[i]`` = the X object matched to ``y_i``.
    smi_ : float
        The LSMI of the kept match.
    smis_ : list of float
        Per start.
    stopped_early_ : bool
        Whether a callback stopped the fit.

    Notes
    -----
    ``fit(X, Y)`` takes the second set as scikit-learn's ``y`` argument (same number of rows).

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.matching import LeastSquaresObjectMatching
    >>> X = np.random.default_rng(1).normal(size=(20, 2)); p = np.random.default_rng(2).permutation(20)
    >>> om = LeastSquaresObjectMatching(init=p).fit(X, X[p])
    >>> bool((om.match_ == p).all())
    True
    """

    __doc__ = (__doc__ or "").replace("{progress}", _PROGRESS_DOC.format(what="LSMI"))

    def __init__(
        self,
        *,
        kernel: Kernel = "rbf",
        gamma: float | None = None,
        ridge: float = 1e-3,
        max_iter: int = 100,
        n_init: int = 1,
        init: str | ArrayLike = "random",
        random_state: RandomState | np.random.Generator = None,
        n_jobs: int | None = None,
        callbacks: Callback | Sequence[Callback] | None = None,
        callback_every: int = 1,
        verbose: bool | int = False,
    ) -> None:
        self.kernel = kernel
        self.gamma = gamma
        self.ridge = ridge
        self.max_iter = max_iter
        self.n_init = n_init
        self.init = init
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.callbacks = callbacks
        self.callback_every = callback_every
        self.verbose = verbose

    def fit(self, X: ArrayLike, Y: ArrayLike) -> Self:
        """Match ``Y``'s objects to ``X``'s; returns self."""
        Xv, Yv = _check_pair(X, Y, self.kernel)
        if not (self.kernel == "precomputed" or callable(self.kernel)):
            self.n_features_in_ = Xv.shape[1]
        max_iter = check_int(self.max_iter, "max_iter", low=1)
        n_init = check_int(self.n_init, "n_init", low=1)
        ridge = check_float(self.ridge, "ridge", low=0.0, low_open=True)
        n_jobs = n_jobs_arg(self.n_jobs)
        progress = Progress(self.callbacks, callback_every=self.callback_every, verbose=self.verbose,
                            total=n_init * max_iter, desc="LeastSquaresObjectMatching")
        K = centred_kernel(Xv, self.kernel, self.gamma, False)
        L = centred_kernel(Yv, self.kernel, self.gamma, False)
        m = K.shape[0]
        rng = np.random.default_rng(_seed(self.random_state))
        first = None
        init: Any = self.init
        if isinstance(init, str):
            choice(init, "init", ("random", "pca"))
            if init == "pca":
                if self.kernel == "precomputed" or callable(self.kernel):
                    raise ValueError("`init='pca'` needs the data, not a precomputed or callable `kernel`")
                rx, ry = _first_pc_rank(np.asarray(Xv, float)), _first_pc_rank(np.asarray(Yv, float))
                first = np.argsort(rx)[ry]
        else:
            given = np.asarray(init)
            if given.shape != (m,) or not np.array_equal(np.sort(given), np.arange(m)):
                raise ValueError("`init` must be 'random', 'pca' or a permutation of the objects")
            first = given.astype(np.int64)
        starts = _random_starts(rng, m, n_init, first)
        rounds = _Rounds(progress)

        def run(match: IntArray) -> tuple[float, IntArray]:
            smi, alpha = lsmi(K, L, match, ridge)
            for _ in range(max_iter):
                if rounds.stopped:
                    break
                inv = np.empty(m, dtype=np.int64)
                inv[match] = np.arange(m)
                # gain of pairing x_i with y_j: sum_l alpha_l k(x_i, x_l) l(y_j, y_inv[l])
                G = K @ (alpha[:, None] * L[inv, :])
                rows, cols = linear_sum_assignment(G, maximize=True)  # x_rows[k] <- y_cols[k]
                new = np.empty(m, dtype=np.int64)
                new[cols] = rows
                done = bool(np.array_equal(new, match))
                if not done:
                    new_smi, new_alpha = lsmi(K, L, new, ridge)
                    done = new_smi <= smi  # no gain: keep the current matching
                    if not done:
                        match, smi, alpha = new, new_smi, new_alpha
                # every round is reported, the last (converged) one too
                if rounds.report(smi, match) or done:
                    break
            return smi, match

        with progress:
            results = _run_starts(run, starts, n_jobs, n_init)
        best = max(range(len(results)), key=lambda k: (results[k][0], -k))
        self.smis_ = [r[0] for r in results]
        self.smi_, self.match_ = results[best]
        self.stopped_early_ = rounds.stopped
        return self
