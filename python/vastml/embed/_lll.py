"""Locally Linear Landmarks estimators (thesis chapter 4): eigenmaps, spectral clustering, PCA,
LDA and kernel PCA on L landmarks, with the out-of-sample map ``x = X_tilde z``."""

from __future__ import annotations

import math
import time
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClusterMixin, TransformerMixin
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from vastml._progress import Progress
from vastml._validation import check_float, check_int, choice, validate_rows
from vastml.embed._lll_core import (
    _positive_int,
    gaussian_knn_affinity,
    pieces_to_csr,
    reconstruction_weights,
    reduced_eigenproblem,
    reduced_matrix,
    select_landmarks,
    weight_pieces,
)
from vastml.embed._lll_refine import refine_eigenmaps

if TYPE_CHECKING:
    from typing import Self

    from vastml._typing import ArrayLike, FloatArray, IntArray, RandomState


class _Stopped(Exception):
    """A callback stopped an LLL fit before its reduced problem was solved."""


class _Stages:
    """The one iteration count of an LLL fit across its stages, and its :class:`Progress`.

    Rust loops report through :meth:`rust` (their iterations continue the count); Python
    stages through :meth:`report`.
    """

    def __init__(self, est):
        self.progress = Progress(est.callbacks, callback_every=est.callback_every,
                                 verbose=est.verbose, desc=type(est).__name__)
        self.it = 0

    def rust(self):
        """The ``progress`` argument of one Rust call, or None when nobody listens."""
        if not self.progress.active:
            return None
        base = self.it

        def report(it, objective, state):
            self.it = base + it
            return self.progress.report(self.it, objective, state)

        return report

    def report(self, objective=math.nan, state=None):
        """Reports the next iteration; True when a callback asked to stop."""
        self.it += 1
        return self.progress.report(self.it, objective, state)

    def round(self, it, objective, state):
        """A callback of :func:`refine_eigenmaps` continuing the count."""
        return self.report(objective, state)

    @staticmethod
    def check(result):
        """The result of a Rust call given ``progress``; :class:`_Stopped` when it stopped."""
        if result is None:
            raise _Stopped
        return result


_STOPPED = (
    "{}: a callback stopped the fit before the reduced eigenproblem was solved, so there is no "
    "model; fit again to use it"
)


class _LLLBase(TransformerMixin, BaseEstimator):
    """Landmarks, weights Z and the out-of-sample map shared by every LLL estimator."""

    def _default_kz(self, n_features, L):
        return L

    def _fit_with_progress(self, work, *args):
        """Runs ``work(stages, *args)``; a stop before the solve leaves no fitted state."""
        stages = _Stages(self)
        try:
            with stages.progress:
                work(stages, *args)
        except _Stopped:
            for name in [a for a in vars(self) if a.endswith("_") and not a.startswith("_")]:
                delattr(self, name)
            self.stopped_early_ = True
            warnings.warn(_STOPPED.format(type(self).__name__), ConvergenceWarning, stacklevel=3)
            return self
        self.stopped_early_ = stages.progress.stopped
        return self

    def _landmarks_and_weights(self, X, rng, stages):
        L = self.n_landmarks if isinstance(self.landmarks, str) else None
        if L is not None:
            L = min(_positive_int(L, "n_landmarks"), X.shape[0])
        idx = select_landmarks(X, L, self.landmarks, random_state=rng)
        kz = self.n_landmark_neighbors
        kz = self._default_kz(X.shape[1], idx.size) if kz is None else kz
        kz = min(_positive_int(kz, "n_landmark_neighbors"), idx.size)
        self.landmark_indices_ = idx
        self.landmarks_ = X[idx].copy()
        self.n_landmarks_ = idx.size
        self.n_landmark_neighbors_ = kz
        self.n_features_in_ = X.shape[1]
        nbr, W, L = stages.check(
            weight_pieces(X, self.landmarks_, kz, reg=self.reg, progress=stages.rust()))
        self._z_pieces = (nbr, W)
        return pieces_to_csr(nbr, W, L)

    def weights(self, X: ArrayLike) -> Any:
        """Reconstruction weights Z (n_landmarks x n_samples) of new points."""
        check_is_fitted(self, "landmarks_")
        X = validate_rows(self, X, reset=False)
        return reconstruction_weights(X, self.landmarks_, self.n_landmark_neighbors_, reg=self.reg)

    def transform(self, X: ArrayLike) -> FloatArray:
        """Out-of-sample embedding ``x = X_tilde z`` of new points (thesis 4.5)."""
        check_is_fitted(self, "landmark_embedding_")
        return np.asarray(self.weights(X).T @ self.landmark_embedding_)


class LLLEigenmaps(_LLLBase):
    r"""Laplacian eigenmaps by Locally Linear Landmarks.

    Solves :math:`\min \operatorname{tr}(\tilde X \tilde A \tilde X^T)` s.t.
    :math:`\tilde X \tilde B \tilde X^T = I` with :math:`\tilde A = Z L Z^T`,
    :math:`\tilde B = Z D Z^T` (L x L, dense, thesis 4.10), drops the trivial constant
    eigenvector and maps every point by :math:`X = \tilde X Z`. With every point a landmark
    the result is exact Laplacian eigenmaps (:func:`laplacian_eigenmaps`).

    Parameters
    ----------
    n_components : int, default=2
        Embedding dimension d.
    n_landmarks : int, default=200
        L (ignored when ``landmarks`` is an index array).
    landmarks : {"random", "kmeans", "random-pruned", "minmax"} or array-like of int, default="random"
        See :func:`select_landmarks`.
    n_landmark_neighbors : int, default=None
        K_Z, the landmarks reconstructing each point (default ``min(L, n_features + 1, 10)``,
        at least ``n_components + 1``).
    n_neighbors : int, default=10
        K_W of the Gaussian kNN affinity graph (``affinity="knn-gaussian"``).
    bandwidth : float, default=None
        sigma of the affinities (default: the median distance to the K_W-th neighbour).
    affinity : {"knn-gaussian", "precomputed"}, default="knn-gaussian"
        With ``"precomputed"`` pass the N x N sparse affinity as ``fit(X, affinity_matrix=W)``;
        X is still needed for the weights.
    reg : float, default=1e-3
        Gram regulariser of the weights (relative to its trace, always applied: the LLE
        convention; see :func:`reconstruction_weights`).
    refine : int, default=0
        Our extension, not the thesis' LLL (which is ``refine=0``): after ``X = X_tilde Z``,
        ``refine`` smoothing steps with ``P = D^-1 W`` and a Rayleigh-Ritz solve of the full
        problem in the span of ``[1, X, (P - I) X, ...]`` (:func:`refine_eigenmaps`). Costs
        ``refine + 1`` sparse products of the graph with the N x d embedding; damps LLL's
        interpolation error between landmarks (on the benchmark digits one step halves the
        error). ``embedding_`` is then no longer ``X_tilde Z``; ``transform`` (out-of-sample)
        still uses the landmarks' embedding fitted to it in the D-weighted least-squares
        sense.
    refine_rounds : int, default=1
        Rounds of that refinement (block subspace iteration; converges to exact eigenmaps
        when the spectrum has a gap after the d-th eigenvalue).
    refine_oversample : int, default=0
        p: the refinement starts from the d + p leading non-trivial reduced eigenvectors (the
        Ritz solve keeps the best d), so a direction that LLL ranked just after the d-th can
        be swapped in. Each sparse product then carries d + p columns instead of d. Never
        raises a Ritz value (the span only grows).
    random_state : int, RandomState instance or None
    callbacks : callable, list of callables or None, default=None
        Called as ``callback(iteration, objective, state)``; True stops the fit (Notes).
    callback_every : int, default=1
        Call the callbacks every this many iterations.
    verbose : bool or int, default=False
        A progress bar on stderr.

    Attributes
    ----------
    embedding_ : ndarray (n_samples, n_components)
    landmark_embedding_ : ndarray (n_landmarks, n_components)
        :math:`\tilde X^T`.
    eigenvalues_ : ndarray (n_components,)
        Reduced generalised eigenvalues (the trivial 0 removed).
    landmark_indices_, landmarks_, n_landmarks_, n_landmark_neighbors_, weights_ (Z, CSR)
    stopped_early_ : bool
        Whether a callback stopped the fit.
    fit_times_ : dict
        Wall seconds of the stages of the last ``fit`` (affinity graph, landmarks + weights,
        the two reduced products, the reduced eigensolve, the out-of-sample map).

    Notes
    -----
    Progress (``callbacks``, ``callback_every``, ``verbose``; see :mod:`vastml._progress`): one
    iteration count runs through the stages of the fit. The reconstruction weights report once
    per chunk of 16,384 points and the reduced products Z D Z^T, Z W Z^T once per block (at most
    256 reports each), then the reduced eigensolve reports once with the map X = X_tilde Z, and
    ``refine`` rounds once each. ``objective`` is NaN before the solve; at the solve it is the
    sum of ``eigenvalues_`` (the trace of the reduced problem, minimised), and ``state`` is None
    before the solve and the N x d embedding from it on. A callback returning True before the
    solve stops the fit with no model (the fitted attributes are removed, ``stopped_early_`` is
    True and a ``ConvergenceWarning`` says so); at or after the solve it keeps the result it has
    (a stop at the solve skips the refinement) and sets ``stopped_early_``. Ctrl-C stops the
    Rust loops (``KeyboardInterrupt``).

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.embed import LLLEigenmaps
    >>> t = np.linspace(0, 3 * np.pi, 1000)
    >>> X = np.c_[t * np.cos(t), t * np.sin(t)]
    >>> lll = LLLEigenmaps(n_components=1, n_landmarks=100, random_state=0).fit(X)
    >>> abs(np.corrcoef(lll.embedding_[:, 0], t)[0, 1]) > 0.95
    np.True_
    """

    def __init__(
        self,
        *,
        n_components: int = 2,
        n_landmarks: int = 200,
        landmarks: str | ArrayLike = "random",
        n_landmark_neighbors: int | None = None,
        n_neighbors: int = 10,
        bandwidth: float | None = None,
        affinity: str = "knn-gaussian",
        reg: float = 1e-3,
        refine: int = 0,
        refine_rounds: int = 1,
        refine_oversample: int = 0,
        random_state: RandomState = None,
        callbacks: Any = None,
        callback_every: int = 1,
        verbose: bool | int = False,
    ) -> None:
        self.n_components = n_components
        self.n_landmarks = n_landmarks
        self.landmarks = landmarks
        self.n_landmark_neighbors = n_landmark_neighbors
        self.n_neighbors = n_neighbors
        self.bandwidth = bandwidth
        self.affinity = affinity
        self.reg = reg
        self.refine = refine
        self.refine_rounds = refine_rounds
        self.refine_oversample = refine_oversample
        self.random_state = random_state
        self.callbacks = callbacks
        self.callback_every = callback_every
        self.verbose = verbose

    _drop_first = True

    def _default_kz(self, n_features, L):
        return min(L, max(min(n_features + 1, 10), self._n_out() + 1))

    def _n_out(self):
        return _positive_int(self.n_components, "n_components")

    def _affinity(self, X, affinity_matrix):
        choice(self.affinity, "affinity", ("knn-gaussian", "precomputed"))
        if self.affinity == "precomputed":
            if affinity_matrix is None:
                raise ValueError('`affinity="precomputed"` needs fit(X, affinity_matrix=W)')
            W = sp.csr_matrix(affinity_matrix, dtype=np.float64)
            if W.shape != (X.shape[0], X.shape[0]):
                raise ValueError(f"`affinity_matrix` must be {X.shape[0]} x {X.shape[0]}")
            return W
        return knn_gaussian(X, self.n_neighbors, self.bandwidth)

    def fit(self, X: ArrayLike, y: object = None, affinity_matrix: Any = None) -> Self:
        """Fit the embedding of X (``affinity_matrix``: the N x N graph when
        ``affinity="precomputed"``); returns self."""
        X = validate_data(self, X, dtype=np.float64, order="C", ensure_min_samples=2)
        return self._fit_with_progress(self._fit, X, affinity_matrix)

    def _fit(self, stages, X, affinity_matrix):
        d = self._n_out()
        rng = check_random_state(self.random_state)
        clock = [time.perf_counter()]

        def lap():
            clock.append(time.perf_counter())
            return clock[-1] - clock[-2]

        W = self._affinity(X, affinity_matrix)
        deg = np.asarray(W.sum(axis=1)).ravel()
        times = {"affinity": lap()}
        Z = self._landmarks_and_weights(X, rng, stages)
        times["landmarks + weights"] = lap()
        nbr, zw = self._z_pieces
        L = Z.shape[0]
        # B = Z D Z^T (one cheap pass), A = Z (D - W) Z^T = B - Z W Z^T: the graph goes to
        # Rust as it is (A with M = -W copied all nnz(W) entries first: ~10 % of the time
        # of the product at K_W = 200)
        B = stages.check(reduced_matrix(nbr, zw, L, diag=deg, progress=stages.rust()))
        steps = _positive_int(getattr(self, "refine", 0), "refine", minimum=0)
        rounds = _positive_int(getattr(self, "refine_rounds", 1), "refine_rounds", minimum=0)
        over = _positive_int(getattr(self, "refine_oversample", 0), "refine_oversample",
                             minimum=0)
        refining = steps > 0 and rounds > 0
        # A = Z (D - W) Z^T = B - Z W Z^T; a symmetric graph (every affinity this estimator
        # builds, and any precomputed one that passes a sampled check) is read by its upper
        # triangle only: every edge once
        symmetric = _looks_symmetric(W)
        A = B - stages.check(reduced_matrix(nbr, zw, L, M=W, symmetric=symmetric,
                                            progress=stages.rust()))
        times["Z A Z^T, Z B Z^T"] = lap()
        k = d + 1 if self._drop_first else d
        if k > Z.shape[0]:
            raise ValueError(f"`n_components` needs at least {k} landmarks, got {Z.shape[0]}")
        # the refinement may start from the next `over` reduced eigenvectors too
        kx = min(k + over, Z.shape[0]) if refining and self._drop_first else k
        w, Xt = reduced_eigenproblem(A, B, kx)
        if self._drop_first:
            w, Xt = w[1:], Xt[:, 1:]
        times["reduced eigensolve"] = lap()
        self.weights_ = Z
        self.eigenvalues_ = w[:d]
        self.landmark_embedding_ = Xt[:, :d]
        X0 = np.asarray(Z.T @ Xt)
        self.embedding_ = X0[:, :d]
        times["X = X_tilde Z"] = lap()
        self.fit_times_ = times
        if stages.report(float(np.sum(self.eigenvalues_)), self.embedding_):
            return
        if refining:
            if not self._drop_first:
                raise ValueError("`refine` is for eigenmaps (the trivial eigenvector dropped)")
            w, E = refine_eigenmaps(W, X0, steps=steps, rounds=rounds, deg=deg,
                                    n_components=d, symmetric=symmetric,
                                    callbacks=stages.round if stages.progress.active else None)
            self.eigenvalues_ = w
            self.embedding_ = E
            # landmarks' embedding for transform: the D-weighted least-squares fit
            # E ~ Z^T X_tilde, i.e. (Z D Z^T) X_tilde = Z D E, with Z D Z^T = B_tilde
            rhs = np.asarray(Z @ (deg[:, None] * E))
            try:
                self.landmark_embedding_ = scipy.linalg.solve(B, rhs, assume_a="pos")
            except np.linalg.LinAlgError:
                self.landmark_embedding_ = np.linalg.lstsq(B, rhs, rcond=None)[0]
            times["refine"] = lap()

    def fit_transform(
        self, X: ArrayLike, y: object = None, affinity_matrix: Any = None
    ) -> FloatArray:
        """Fit and return the embedding of X."""
        return self.fit(X, affinity_matrix=affinity_matrix).embedding_


def _looks_symmetric(W, n_samples=2000, seed=0):
    """True when ``n_samples`` random stored entries of W (CSR) all equal their transposes
    (to 1e-12 relative): a cheap check, so that the upper-triangle kernel is used only on a
    graph that is symmetric (a non-symmetric one fails it with near certainty unless its
    asymmetry sits in a handful of entries; eigenmaps needs a symmetric W anyway)."""
    if W.nnz == 0:
        return True
    rng = np.random.default_rng(seed)
    e = rng.integers(0, W.nnz, min(n_samples, W.nnz))
    rows = np.searchsorted(W.indptr, e, side="right") - 1
    cols = W.indices[e]
    there = W.data[e]
    back = np.asarray(W[cols, rows]).ravel()
    return bool(np.all(np.abs(back - there) <= 1e-12 * np.abs(there)))


def knn_gaussian(X, n_neighbors, bandwidth):
    """Gaussian kNN affinities; ``bandwidth=None`` is the median K_W-th-neighbour distance."""
    check_int(n_neighbors, "n_neighbors", low=1, high=X.shape[0] - 1)
    if bandwidth is not None:
        bandwidth = check_float(bandwidth, "bandwidth", low=0, low_open=True)
    if bandwidth is None:
        from sklearn.neighbors import NearestNeighbors

        k = min(_positive_int(n_neighbors, "n_neighbors") + 1, X.shape[0])
        dist, _ = NearestNeighbors(n_neighbors=k).fit(X).kneighbors(X)
        bandwidth = float(np.median(dist[:, -1])) or 1.0
    return gaussian_knn_affinity(X, n_neighbors, bandwidth)


def kmeans_landmark_warm_start(
    X: ArrayLike,
    landmark_rows: ArrayLike,
    n_clusters: int,
    *,
    n_init: int = 20,
    random_state: RandomState = None,
) -> KMeans:
    """k-means on all points started from the best of ``n_init`` k-means runs on the landmarks.

    Costs ``n_init`` passes over L points plus one over N (thesis 4.7.1).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        All points (e.g. their spectral embedding).
    landmark_rows : array-like of shape (n_landmarks, n_features)
        The landmarks' rows.
    n_clusters : int
    n_init : int, default=20
        k-means runs on the landmarks.
    random_state : int, RandomState instance or None

    Returns
    -------
    sklearn.cluster.KMeans fitted on X.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import make_blobs
    >>> X, y = make_blobs(500, centers=3, random_state=0)
    >>> km = kmeans_landmark_warm_start(X, X[::10], 3, random_state=0)
    >>> km.labels_.shape, km.cluster_centers_.shape
    ((500,), (3, 2))
    """
    rng = check_random_state(random_state)
    small = KMeans(n_clusters=n_clusters, n_init=n_init, random_state=rng).fit(landmark_rows)
    return KMeans(n_clusters=n_clusters, init=small.cluster_centers_, n_init=1).fit(X)


class LLLSpectralClustering(ClusterMixin, LLLEigenmaps):
    r"""Normalised-cut spectral clustering (Ng et al. 2002) by Locally Linear Landmarks.

    Embeds with :class:`LLLEigenmaps` in ``n_clusters`` dimensions (the constant eigenvector
    kept, thesis 4.19-4.21), normalises rows to unit length and runs k-means started from the
    best of ``n_init`` k-means runs on the landmarks' rows (:func:`kmeans_landmark_warm_start`).
    K_Z defaults to ``n_clusters + 1``.

    Notes
    -----
    Progress (``callbacks``, ``callback_every``, ``verbose``; see :mod:`vastml._progress`): one
    iteration count runs through the stages of the fit. The reconstruction weights report once
    per chunk of 16,384 points and the reduced products Z D Z^T, Z W Z^T once per block (at most
    256 reports each), then the reduced eigensolve reports once with the map X = X_tilde Z.
    ``objective`` is NaN before the solve; at the solve it is the sum of ``eigenvalues_`` (the
    trace of the reduced problem, minimised), and ``state`` is None before the solve and the N x
    ``n_clusters`` embedding from it on. A callback returning True before the solve stops the
    fit with no model (the fitted attributes are removed, ``stopped_early_`` is True and a
    ``ConvergenceWarning`` says so); at or after the solve it keeps the result it has (the
    k-means on that embedding still runs) and sets ``stopped_early_``. Ctrl-C stops the Rust
    loops (``KeyboardInterrupt``).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import make_blobs
    >>> from vastml.embed import LLLSpectralClustering
    >>> X, y = make_blobs(600, centers=3, cluster_std=0.5, random_state=0)
    >>> sc = LLLSpectralClustering(n_clusters=3, n_landmarks=60, random_state=0).fit(X)
    >>> from sklearn.metrics import adjusted_rand_score
    >>> adjusted_rand_score(y, sc.labels_) > 0.99
    True
    """

    _drop_first = False

    def __init__(
        self,
        *,
        n_clusters: int = 8,
        n_landmarks: int = 200,
        landmarks: str | ArrayLike = "random",
        n_landmark_neighbors: int | None = None,
        n_neighbors: int = 10,
        bandwidth: float | None = None,
        affinity: str = "knn-gaussian",
        reg: float = 1e-3,
        n_init: int = 20,
        random_state: RandomState = None,
        callbacks: Any = None,
        callback_every: int = 1,
        verbose: bool | int = False,
    ) -> None:
        self.n_clusters = n_clusters
        self.n_landmarks = n_landmarks
        self.landmarks = landmarks
        self.n_landmark_neighbors = n_landmark_neighbors
        self.n_neighbors = n_neighbors
        self.bandwidth = bandwidth
        self.affinity = affinity
        self.reg = reg
        self.n_init = n_init
        self.random_state = random_state
        self.callbacks = callbacks
        self.callback_every = callback_every
        self.verbose = verbose

    def _n_out(self):
        return _positive_int(self.n_clusters, "n_clusters")

    def _default_kz(self, n_features, L):
        return min(L, self._n_out() + 1)

    def fit(self, X: ArrayLike, y: object = None, affinity_matrix: Any = None) -> Self:
        """Fit the embedding and the clusters of X; returns self."""
        super().fit(X, affinity_matrix=affinity_matrix)
        if not hasattr(self, "embedding_"):  # stopped before the reduced solve
            return self
        E = _unit_rows(self.embedding_)
        El = _unit_rows(self.landmark_embedding_)
        km = kmeans_landmark_warm_start(
            E, El, self._n_out(), n_init=self.n_init, random_state=self.random_state
        )
        self.kmeans_ = km
        self.labels_ = km.labels_
        return self

    def predict(self, X: ArrayLike) -> IntArray:
        """Cluster of new points through the out-of-sample embedding."""
        check_is_fitted(self, "kmeans_")
        return self.kmeans_.predict(_unit_rows(self.transform(X)))


def _unit_rows(E):
    nrm = np.linalg.norm(E, axis=1, keepdims=True)
    return E / np.where(nrm > 0, nrm, 1.0)
