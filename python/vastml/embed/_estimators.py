"""Estimators: t-SNE, symmetric SNE and elastic embedding over entropic affinities."""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.decomposition import PCA
from sklearn.neighbors import NearestNeighbors
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Self

    from vastml._progress import Callback
    from vastml._typing import ArrayLike, FloatArray, RandomState

from vastml import _core
from vastml._core import effective_n_jobs
from vastml._progress import Progress
from vastml._validation import check_int, choice, n_jobs_arg, positive_float, validate_rows
from vastml.embed._affinities import (
    ROOT_METHODS,
    default_n_neighbors,
    entropic_affinities,
    knn_graph,
    rust_knn,
    KNN_APPROX_EPS,
    AUTO_APPROX_MIN,
    NEIGHBOR_METHODS,
    symmetrize,
)
from vastml.embed._objectives import EmbeddingObjective, neg_entropy
from vastml.embed._optim import (
    METHODS,
    SpectralDirection,
    descend,
    homotopy,
    minimize,
)
from vastml.embed._out_of_sample import embed_new_points
from vastml.embed._schedules import parse_gradient

GRADIENT_CHOICES = ("auto", "exact", "barnes_hut", "fgt", "fft")
#: Above this many points, gradient="auto" leaves the exact O(N^2) repulsion.
AUTO_EXACT_MAX = 1500
#: From this many points on, gradient="auto" uses the FFT interpolation for t-SNE in 1-D/2-D.
AUTO_FFT_MIN = 10_000
#: From this many points on, the kNN graph and the affinities are kept in 32 bits (int32
#: indices, float32 probabilities: 8 bytes per entry of P instead of 16), so that a
#: million points with 90 neighbours fit in a few GB.
AUTO_COMPACT_MIN = 200_000


class _NeighborEmbedding(TransformerMixin, BaseEstimator):
    """Shared fit machinery: validation, kNN graph, entropic affinities, transform."""

    _model = ""

    def _check_common(self):
        positive_float(self.perplexity, "perplexity")
        if not (isinstance(self.n_components, numbers.Integral) and self.n_components >= 1):
            raise ValueError(f"`n_components` must be a positive int, got {self.n_components!r}")
        choice(self.method, "method", METHODS)
        if isinstance(self.gradient, tuple):  # (method, accuracy schedule), thesis §5.5
            name, _ = parse_gradient(self.gradient, GRADIENT_CHOICES[1:])
        else:
            name = choice(self.gradient, "gradient", GRADIENT_CHOICES + ("bh",))
        choice(self.affinity_method, "affinity_method", ROOT_METHODS)
        choice(getattr(self, "neighbors_method", "exact"), "neighbors_method", NEIGHBOR_METHODS)
        auto_iter = self._model == "tsne" and isinstance(self.max_iter, str) and self.max_iter == "auto"
        if not (auto_iter or (isinstance(self.max_iter, numbers.Integral) and self.max_iter >= 1)):
            raise ValueError(f"`max_iter` must be a positive int, got {self.max_iter!r}")
        if not (isinstance(self.theta, numbers.Real) and self.theta >= 0):
            raise ValueError(f"`theta` must be a number >= 0, got {self.theta!r}")
        if name == "fgt" and self._model == "tsne":
            raise ValueError(
                "gradient='fgt' needs a Gaussian kernel; t-SNE uses 'barnes_hut' or 'exact'"
            )
        if name in ("barnes_hut", "bh") and self.n_components > 3:
            raise ValueError("gradient='barnes_hut' handles n_components <= 3")
        if name == "fft" and self.n_components > 2:
            raise ValueError("gradient='fft' handles n_components <= 2")
        n_jobs_arg(self.n_jobs)

    def _affinities(self, X):
        n = X.shape[0]
        if n < 3:
            raise ValueError(f"need at least 3 samples, got n_samples = {n}")
        if self.perplexity >= n - 1:
            raise ValueError(
                f"`perplexity` ({self.perplexity}) must be less than n_samples - 1 = {n - 1}"
            )
        k = self.n_neighbors
        if k is None:
            k = default_n_neighbors(self.perplexity, n)
        if not (isinstance(k, numbers.Integral) and self.perplexity < k < n):
            raise ValueError(f"`n_neighbors` must be an int in (perplexity, n_samples), got {k!r}")
        # n_jobs=None means all cores here (DESIGN), but one job to scikit-learn.
        jobs = effective_n_jobs(self.n_jobs)
        self.nn_ = NearestNeighbors(n_neighbors=int(k), n_jobs=jobs)
        compact = n >= AUTO_COMPACT_MIN
        method = getattr(self, "neighbors_method", "exact")
        if method == "approx" or (method == "auto" and n >= AUTO_APPROX_MIN):
            # vastml's parallel kd-tree, (1 + eps)-approximate: scikit-learn's exact query
            # is ~40 CPU-minutes at 1M x 10-D (``nn_`` above stays unfitted: ``transform``
            # queries vastml's tree too).
            knn = rust_knn(X, int(k), KNN_APPROX_EPS, self.n_jobs, compact)
            self._nn_X = X  # ``transform`` queries the same kind of tree against it
        else:
            knn = knn_graph(self.nn_.fit(X), int(k), compact)
        P, beta, info = entropic_affinities(
            knn=knn,
            perplexity=self.perplexity,
            method=self.affinity_method,
            random_state=self.random_state,
            n_jobs=self.n_jobs,
            compact=compact,
        )
        del knn
        self.beta_ = beta
        self.affinity_evaluations_ = info["evaluations"]
        return P

    def _gradient_method(self, n):
        if isinstance(self.gradient, tuple):
            return self.gradient
        if self.gradient == "bh":
            return "barnes_hut"
        if self.gradient != "auto":
            return self.gradient
        if n <= AUTO_EXACT_MAX:
            return "exact"
        if self._model == "tsne":
            if n >= AUTO_FFT_MIN and self.n_components <= 2:
                return "fft"
            return "barnes_hut" if self.n_components <= 3 else "exact"
        return "fgt" if self.n_components <= 3 else "exact"

    def fit(self, X: ArrayLike, y: object = None) -> Self:
        """Embed ``X``; returns self."""
        self._fit(X)
        return self

    def fit_transform(self, X: ArrayLike, y: object = None) -> FloatArray:
        """Embed ``X`` and return the embedding."""
        self._fit(X)
        return self.embedding_

    def transform(self, X: ArrayLike) -> FloatArray:
        """Embed new points with the training embedding fixed (their affinities to the
        training points, then each point's own objective; thesis §5.4). The repulsion from
        the training points uses the N-body sums of the fit's ``gradient`` (exact,
        Barnes-Hut at ``theta``, the fast Gauss transform at ``epsilon``; Barnes-Hut for
        ``"fft"``), so M new points cost O(M log N) against N training points, never an
        M x N matrix."""
        check_is_fitted(self, "embedding_")
        X = validate_rows(self, X, reset=False)
        if not hasattr(self.nn_, "n_samples_fit_") and getattr(self, "_nn_X", None) is not None:
            # the fit's neighbours came from vastml's approximate kd-tree: the new points' too
            # (the same tree and eps); fitting scikit-learn's index on the training points and
            # querying it was ~80 % of a 1M-point transform
            sqdist, idx = _core.knn_graph(
                self._nn_X, int(self.nn_.n_neighbors), KNN_APPROX_EPS, n_jobs_arg(self.n_jobs),
                queries=np.asarray(X, dtype=np.float64),
            )
        else:
            if not hasattr(self.nn_, "n_samples_fit_"):
                self.nn_.fit(self._nn_X)
            dist, idx = self.nn_.kneighbors(X)
            sqdist = dist**2
        return embed_new_points(
            self._model,
            getattr(self, "repulsion_weight", 1.0),
            self.embedding_,
            sqdist,
            idx,
            self.perplexity,
            gradient=parse_gradient(self._gradient_method(self.embedding_.shape[0]), GRADIENT_CHOICES)[0],
            theta=self.theta,
            epsilon=getattr(self, "epsilon", 1e-6),
            n_jobs=self.n_jobs,
        )

    def _init(self, X, rng, scale):
        init = self.init
        n, d = X.shape[0], self.n_components
        if isinstance(init, str):
            choice(init, "init", ("pca", "random"))
            if init == "pca" and d <= min(X.shape):
                Y = PCA(n_components=d, random_state=rng.randint(2**31 - 1)).fit_transform(X)
                sd = Y[:, 0].std()
                return Y / (sd if sd > 0 else 1.0) * scale
            return scale * rng.standard_normal((n, d))
        Y = np.asarray(init, dtype=np.float64)
        if Y.shape != (n, d) or not np.isfinite(Y).all():
            raise ValueError(f"`init` array must be finite with shape ({n}, {d})")
        return Y.copy()

    def _progress(self, total):
        """The fit's :class:`~vastml._progress.Progress` (callbacks, callback_every, verbose)."""
        return Progress(
            self.callbacks,
            callback_every=self.callback_every,
            verbose=self.verbose,
            total=total,
            desc=type(self).__name__,
        )

    def _minimize(self, obj, Y, max_iter, **kw):
        """:func:`minimize` reporting to the fit's progress; sets ``stopped_early_``."""
        with self._progress(max_iter) as progress:
            r = minimize(
                obj,
                Y,
                max_iter=max_iter,
                callbacks=progress.report if progress.active else None,
                **kw,
            )
        self.stopped_early_ = progress.stopped
        return r


class TSNE(_NeighborEmbedding):
    r"""t-distributed stochastic neighbour embedding over entropic affinities.

    Minimises :math:`KL(P \| Q)` with :math:`q_{nm} \propto (1 + \|x_n - x_m\|^2)^{-1}` and
    :math:`P` the symmetrised entropic affinities of ``perplexity`` over each point's
    ``n_neighbors`` nearest neighbours. Repulsion: exact (O(N^2)) or Barnes-Hut (``theta``).

    Parameters
    ----------
    n_components : int, default=2
    perplexity : float, default=30.0
        Effective number of neighbours K of the entropic affinities.
    early_exaggeration : float, default=12.0
        Factor on the attraction during the first ``early_exaggeration_iter`` iterations.
    early_exaggeration_iter : int, default=250
        Iterations of the exaggeration phase (counted in ``max_iter``).
    learning_rate : float or "auto", default="auto"
        Step of ``method="gd"``; "auto" = max(N / early_exaggeration / 4, 50) during the
        exaggeration phase and max(N / 4, 50) after it (openTSNE's N / exaggeration; our
        gradient carries the factor 4).
    max_iter : int or "auto", default="auto"
        Total iterations (exaggeration phase included). "auto": 1,000 below
        ``AUTO_COMPACT_MIN`` = 200,000 points, 750 from there on (openTSNE's default
        250 + 500 schedule, so that a million points fit in minutes).
    tol : float, default=None
        Convergence stop of ``method="gd"`` after the exaggeration phase: stop at a check
        (every 50 iterations) where KL(P||Q) fell by less than ``tol`` (relative) since the
        previous one. None (default) runs all ``max_iter`` iterations: t-SNE's KL keeps
        falling slowly (on the digits ~1.5e-4 relative per 50 iterations at iteration
        1,000), so a stop that does not cost KL saves little.
    method : {"gd", "spectral", "fp", "lbfgs", "diagh", "sd-", "cg"}, default="gd"
        Optimiser: momentum gradient descent with gains (the usual t-SNE optimiser),
        spectral direction (the Laplacian of P, factorised once; thesis §3.4), fixed point,
        L-BFGS, or the partial-Hessian directions of :func:`minimize` (DiagH, SD-: dense,
        up to 6,000 points) and nonlinear conjugate gradients.
    gradient : {"auto", "exact", "barnes_hut", "fft"} or tuple, default="auto"
        "auto": exact up to 1,500 points, Barnes-Hut above, and the FFT-accelerated
        interpolation (FIt-SNE; ``n_components <= 2``) from 10,000 points on.
        ``("barnes_hut", schedule)`` changes theta with the iteration (thesis §5.5; see
        :class:`EmbeddingObjective`); the descent then runs in the NumPy loop.
    theta : float, default=0.5
        Barnes-Hut opening angle (0 = exact). From 50,000 points the descent uses the
        dual-tree Barnes-Hut at 1.08 ``theta`` (its error there matches the per-point
        walk's at ``theta``).
    n_neighbors : int, default=None
        Neighbours for the affinities (None: 3 x perplexity).
    affinity_method : str, default="euler"
        Root finder of :func:`entropic_affinities`.
    kappa : int, default=None
        Sparsity of the spectral direction's Laplacian (None: the full kNN pattern).
    init : {"pca", "random"} or ndarray, default="pca"
    neighbors_method : {"auto", "exact", "approx"}, default="auto"
        kNN search (as openTSNE's ``neighbors``): scikit-learn's exact tree, or vastml's
        parallel kd-tree with a ``(1 + eps)``-approximate search (exact distances, recall
        > 0.99 on 10-D blobs); "auto" = exact below 200,000 points, approx from there on.
    random_state : int, RandomState instance or None, default=None
    n_jobs : int, default=None
        Threads (None: all cores).
    callbacks : callable or list of callables, default=None
        Called as ``callback(iteration, objective, embedding)`` every ``callback_every``
        iterations (iteration counted from 1 over both phases); returning True stops the fit with the
        embedding so far and sets ``stopped_early_``.
    callback_every : int, default=1
    verbose : bool or int, default=False
        Draw a progress bar (tqdm's when installed) with the objective.

    Attributes
    ----------
    embedding_ : ndarray of shape (n_samples, n_components)
    kl_divergence_ : float
        KL(P||Q) at the end (computed with the repulsion method used).
    n_iter_ : int
    stopped_early_ : bool
        Whether a callback stopped the fit.
    beta_ : ndarray of shape (n_samples,)
        Precisions of the entropic affinities.
    affinities_ : scipy.sparse.csr_array
        The joint P.

    Notes
    -----
    ``transform`` embeds new points against the fitted embedding (thesis §5.4), so
    ``transform(X_train)`` is not ``fit_transform(X_train)`` and a point's embedding depends on
    the batch it came with: scikit-learn's checks that assume a fixed function of each point do
    not apply to it.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from vastml.embed import TSNE
    >>> X = load_digits().data[:300]
    >>> tsne = TSNE(perplexity=20, max_iter=300, random_state=0).fit(X)
    >>> tsne.embedding_.shape
    (300, 2)
    >>> bool(tsne.kl_divergence_ < 1.5)
    True
    """

    _model = "tsne"

    def __init__(
        self,
        *,
        n_components: int = 2,
        perplexity: float = 30.0,
        early_exaggeration: float = 12.0,
        early_exaggeration_iter: int = 250,
        learning_rate: float | str = "auto",
        max_iter: int | str = "auto",
        tol: float | None = None,
        method: str = "gd",
        gradient: str | tuple[str, Any] = "auto",
        theta: float = 0.5,
        n_neighbors: int | None = None,
        affinity_method: str = "euler",
        kappa: int | None = None,
        init: str | ArrayLike = "pca",
        neighbors_method: str = "auto",
        random_state: RandomState = None,
        n_jobs: int | None = None,
        callbacks: Callback | Sequence[Callback] | None = None,
        callback_every: int = 1,
        verbose: bool | int = False,
    ) -> None:
        self.n_components = n_components
        self.perplexity = perplexity
        self.early_exaggeration = early_exaggeration
        self.early_exaggeration_iter = early_exaggeration_iter
        self.learning_rate = learning_rate
        self.max_iter = max_iter
        self.tol = tol
        self.method = method
        self.gradient = gradient
        self.theta = theta
        self.n_neighbors = n_neighbors
        self.affinity_method = affinity_method
        self.kappa = kappa
        self.init = init
        self.neighbors_method = neighbors_method
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.callbacks = callbacks
        self.callback_every = callback_every
        self.verbose = verbose

    def _fit(self, X):
        self._check_common()
        exag = positive_float(self.early_exaggeration, "early_exaggeration")
        check_int(self.early_exaggeration_iter, "early_exaggeration_iter", low=0)
        X = validate_data(self, X, dtype=np.float64, order="C", ensure_min_samples=3)
        rng = check_random_state(self.random_state)
        n = X.shape[0]
        P = symmetrize(self._affinities(X), "joint")
        self.affinities_ = P
        obj = EmbeddingObjective(
            "tsne", P, gradient=self._gradient_method(n), theta=self.theta, n_jobs=self.n_jobs
        )
        Y = self._init(X, rng, 1e-4)
        max_iter = self.max_iter
        if max_iter == "auto":
            max_iter = 1000 if n < AUTO_COMPACT_MIN else 750
        n1 = min(int(self.early_exaggeration_iter), int(max_iter))
        n2 = int(max_iter) - n1
        with self._progress(int(max_iter)) as progress:
            if self.method == "gd":
                Y = self._gradient_descent(obj, P, Y, n, exag, n1, n2, progress)
            else:
                Y = self._line_search(obj, P, Y, exag, n1, n2, progress)
        self.stopped_early_ = progress.stopped
        self.embedding_ = Y
        self.kl_divergence_ = obj.kl_divergence(Y)
        return self

    def _gradient_descent(self, obj, P, Y, n, exag, n1, n2, progress):
        """The usual t-SNE optimiser: exaggeration phase (momentum 0.5), then momentum 0.8."""
        # "auto": openTSNE's N / exaggeration per phase (Belkina et al. 2019), divided by
        # 4 because our gradient keeps the factor 4 that openTSNE folds into the step.
        lr = self.learning_rate
        if lr == "auto":
            lr1, lr2 = max(n / exag / 4.0, 50.0), max(n / 4.0, 50.0)
        else:
            lr1 = lr2 = positive_float(lr, "learning_rate")
        common = {"min_gain": 0.01, "objective_every": 50, "fused": True, "relabel_every": 250}
        Y, state, _, done1 = descend(
            obj,
            Y,
            progress,
            max_iter=n1,
            learning_rate=lr1,
            momentum=0.5,
            exaggeration=exag,
            state=None,
            it0=0,
            tol=None,
            tol_offset=0.0,
            **common,
        )
        done2 = 0
        if not progress.stopped:
            tol = None if self.tol is None else positive_float(self.tol, "tol")
            Y, _, _, done2 = descend(
                obj,
                Y,
                progress,
                max_iter=n2,
                learning_rate=lr2,
                momentum=0.8,
                exaggeration=1.0,
                state=state,
                it0=n1,
                tol=tol,
                tol_offset=neg_entropy(P.data) if tol is not None else 0.0,
                **common,
            )
        self.n_iter_ = done1 + done2
        return Y

    def _line_search(self, obj, P, Y, exag, n1, n2, progress):
        """``minimize`` in two phases (exaggerated attraction, then the plain objective)."""
        direction = None
        if self.method in ("spectral", "fp"):
            direction = SpectralDirection(P, kappa=0 if self.method == "fp" else self.kappa)
        it = 0
        for scale, iters in ((exag, n1), (1.0, n2)):
            if iters == 0 or progress.stopped:
                continue
            obj.attraction_scale = scale
            r = minimize(
                obj,
                Y,
                method=self.method,
                max_iter=iters,
                direction=direction,
                tol=1e-9,
                callbacks=(
                    (lambda k, E, X, it=it: progress.report(it + k, E, X))
                    if progress.active
                    else None
                ),
            )
            obj.attraction_scale = 1.0
            Y, it = r.X, it + r.n_iter_
        self.n_iter_ = it
        return Y


class SymmetricSNE(_NeighborEmbedding):
    r"""Symmetric SNE: :math:`KL(P \| Q)` with Gaussian :math:`q_{nm} \propto
    \exp(-\|x_n - x_m\|^2)`, optimised by the spectral direction by default.

    Parameters are those of :class:`TSNE` except the exaggeration and learning rate;
    ``gradient`` may also be ``"fgt"`` (fast Gauss transform; "auto" uses it above 1,500
    points), with accuracy ``epsilon``; ``tol`` is the relative decrease of the objective
    that stops the line-search optimisers. ``callbacks`` are called as
    ``callback(iteration, objective, embedding)`` every ``callback_every`` iterations;
    returning True stops the fit (``stopped_early_``); ``verbose=True`` draws a progress bar.

    Notes
    -----
    ``transform`` embeds new points against the fitted embedding (thesis §5.4), so
    ``transform(X_train)`` is not ``fit_transform(X_train)`` and a point's embedding depends on
    the batch it came with: scikit-learn's checks that assume a fixed function of each point do
    not apply to it.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from vastml.embed import SymmetricSNE
    >>> X = load_digits().data[:200]
    >>> m = SymmetricSNE(perplexity=15, max_iter=100, random_state=0).fit(X)
    >>> bool(m.kl_divergence_ < 2.0)
    True
    """

    _model = "ssne"

    def __init__(
        self,
        *,
        n_components: int = 2,
        perplexity: float = 30.0,
        max_iter: int = 1000,
        method: str = "spectral",
        gradient: str | tuple[str, Any] = "auto",
        theta: float = 0.5,
        epsilon: float = 1e-4,
        tol: float = 1e-7,
        n_neighbors: int | None = None,
        affinity_method: str = "euler",
        kappa: int | None = None,
        init: str | ArrayLike = "pca",
        random_state: RandomState = None,
        n_jobs: int | None = None,
        callbacks: Callback | Sequence[Callback] | None = None,
        callback_every: int = 1,
        verbose: bool | int = False,
    ) -> None:
        self.n_components = n_components
        self.perplexity = perplexity
        self.max_iter = max_iter
        self.method = method
        self.gradient = gradient
        self.theta = theta
        self.epsilon = epsilon
        self.tol = tol
        self.n_neighbors = n_neighbors
        self.affinity_method = affinity_method
        self.kappa = kappa
        self.init = init
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.callbacks = callbacks
        self.callback_every = callback_every
        self.verbose = verbose

    def _fit(self, X):
        self._check_common()
        X = validate_data(self, X, dtype=np.float64, order="C", ensure_min_samples=3)
        rng = check_random_state(self.random_state)
        P = symmetrize(self._affinities(X), "joint")
        self.affinities_ = P
        obj = EmbeddingObjective(
            "ssne",
            P,
            gradient=self._gradient_method(X.shape[0]),
            theta=self.theta,
            epsilon=positive_float(self.epsilon, "epsilon"),
            n_jobs=self.n_jobs,
        )
        Y = self._init(X, rng, 1e-4)
        r = self._minimize(
            obj,
            Y,
            int(self.max_iter),
            method=self.method,
            kappa=self.kappa,
            tol=positive_float(self.tol, "tol"),
        )
        self.embedding_, self.n_iter_ = r.X, r.n_iter_
        self.kl_divergence_ = obj.kl_divergence(r.X)
        return self


class ElasticEmbedding(_NeighborEmbedding):
    r"""Elastic embedding (Carreira-Perpinan 2010):
    :math:`E = \sum_{nm} w^+_{nm} \|x_n - x_m\|^2 + \lambda \sum_{n \ne m} \exp(-\|x_n - x_m\|^2)`
    with :math:`W^+ = (P + P^T)/2` of the entropic affinities.

    By default the minimiser is followed along a homotopy over lambda (``n_lambdas``
    log-spaced values from ``repulsion_weight * 1e-6`` to ``repulsion_weight``; thesis §3.6) with the spectral
    direction, factorised once.

    Parameters
    ----------
    repulsion_weight : float, default=1.0
        Weight :math:`\lambda` of the repulsion (no universal value: it depends on the
        scale of :math:`W^+`; with row sums near 1, values around 1e-3 to 10 are useful).
    homotopy : bool, default=True
        Follow the path from small lambda; False minimises at ``repulsion_weight`` from ``init``.
    n_lambdas : int, default=50
    tol : float, default=1e-6
        Relative decrease of E that ends each lambda (or the direct run).
    max_iter : int, default=1000
        Iterations per lambda (homotopy) or in total.
    method, gradient, theta, epsilon, perplexity, n_neighbors, affinity_method, kappa,
    init, random_state, n_jobs
        As in :class:`SymmetricSNE`; ``init`` defaults to tiny random values
        (:math:`10^{-5}` scale) as in the thesis.
    callbacks : callable or list of callables, default=None
        Called as ``callback(iteration, objective, embedding)`` every ``callback_every``
        iterations (with the homotopy, iterations count along the whole path and the
        objective is E at the current lambda); returning True stops the fit with the
        embedding so far and sets ``stopped_early_``.
    callback_every : int, default=1
    verbose : bool or int, default=False
        Draw a progress bar.

    Attributes
    ----------
    embedding_ : ndarray of shape (n_samples, n_components)
    objective_ : float
        E at the end (with the repulsion method used).
    n_iter_ : int
    stopped_early_ : bool
    n_evaluations_ : int
        Objective evaluations (the thesis' cost measure, Table 3.1).

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from vastml.embed import ElasticEmbedding
    >>> X = load_digits().data[:200]
    >>> ee = ElasticEmbedding(perplexity=15, repulsion_weight=1.0, n_lambdas=10, random_state=0).fit(X)
    >>> ee.embedding_.shape
    (200, 2)
    """

    _model = "ee"

    def __init__(
        self,
        *,
        n_components: int = 2,
        perplexity: float = 30.0,
        repulsion_weight: float = 1.0,
        homotopy: bool = True,
        n_lambdas: int = 50,
        tol: float = 1e-6,
        max_iter: int = 1000,
        method: str = "spectral",
        gradient: str | tuple[str, Any] = "auto",
        theta: float = 0.5,
        epsilon: float = 1e-4,
        n_neighbors: int | None = None,
        affinity_method: str = "euler",
        kappa: int | None = None,
        init: str | ArrayLike = "random",
        random_state: RandomState = None,
        n_jobs: int | None = None,
        callbacks: Callback | Sequence[Callback] | None = None,
        callback_every: int = 1,
        verbose: bool | int = False,
    ) -> None:
        self.n_components = n_components
        self.perplexity = perplexity
        self.repulsion_weight = repulsion_weight
        self.homotopy = homotopy
        self.n_lambdas = n_lambdas
        self.tol = tol
        self.max_iter = max_iter
        self.method = method
        self.gradient = gradient
        self.theta = theta
        self.epsilon = epsilon
        self.n_neighbors = n_neighbors
        self.affinity_method = affinity_method
        self.kappa = kappa
        self.init = init
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.callbacks = callbacks
        self.callback_every = callback_every
        self.verbose = verbose

    def _fit(self, X):
        self._check_common()
        lam = positive_float(self.repulsion_weight, "repulsion_weight")
        if not (isinstance(self.n_lambdas, numbers.Integral) and self.n_lambdas >= 1):
            raise ValueError(f"`n_lambdas` must be a positive int, got {self.n_lambdas!r}")
        X = validate_data(self, X, dtype=np.float64, order="C", ensure_min_samples=3)
        rng = check_random_state(self.random_state)
        W = symmetrize(self._affinities(X), "mean")
        self.affinities_ = W
        obj = EmbeddingObjective(
            "ee",
            W,
            repulsion_weight=lam,
            gradient=self._gradient_method(X.shape[0]),
            theta=self.theta,
            epsilon=positive_float(self.epsilon, "epsilon"),
            n_jobs=self.n_jobs,
        )
        Y = self._init(X, rng, 1e-5)
        tol = positive_float(self.tol, "tol")
        if self.homotopy:
            lambdas = np.logspace(np.log10(lam) - 6, np.log10(lam), int(self.n_lambdas))
            lambdas[-1] = lam
            with self._progress(None) as progress:
                Y, info = homotopy(
                    obj,
                    Y,
                    lambdas=lambdas,
                    method=self.method,
                    kappa=self.kappa,
                    tol=tol,
                    max_iter=int(self.max_iter),
                    callbacks=progress.report if progress.active else None,
                )
            self.stopped_early_ = progress.stopped
            self.n_iter_, self.n_evaluations_ = info["n_iter"], info["n_evaluations"]
        else:
            r = self._minimize(
                obj, Y, int(self.max_iter), method=self.method, kappa=self.kappa, tol=tol
            )
            Y, self.n_iter_, self.n_evaluations_ = r.X, r.n_iter_, r.n_evaluations
        obj.repulsion_weight = lam
        self.embedding_ = Y
        self.objective_ = float(obj(Y)[0])
        return self


class SNE(_NeighborEmbedding):
    r"""Stochastic neighbour embedding (Hinton & Roweis 2003): per-point normalisation.

    Minimises :math:`\sum_n KL(P_n \| Q_n)` with the conditional entropic affinities
    :math:`p_{m|n}` of ``perplexity`` and :math:`q_{m|n} = \exp(-\|x_n - x_m\|^2) /
    \sum_{k \ne n} \exp(-\|x_n - x_k\|^2)`. Up to the constant :math:`\sum p \log p` this is
    :math:`E = \sum_{n,m} w^+_{nm} \|x_n - x_m\|^2 + \sum_n \log \sum_{k \ne n} e^{-\|x_n -
    x_k\|^2}` with :math:`W^+ = (P + P^T)/2` (thesis §3.1), so the spectral direction
    applies with the constant Laplacian of :math:`W^+`, factorised once.

    Parameters
    ----------
    n_components : int, default=2
    perplexity : float, default=30.0
        Effective number of neighbours K of the entropic affinities.
    max_iter : int, default=1000
    method : {"spectral", "fp", "gd", "lbfgs", "diagh", "sd-", "cg"}, default="spectral"
        Optimiser, see :func:`vastml.embed.minimize`.
    gradient : {"auto", "exact", "barnes_hut", "fgt"}, default="auto"
        Repulsion sums: "auto" is exact up to 1,500 points, the fast Gauss transform above.
    theta : float, default=0.5
        Barnes-Hut opening angle.
    epsilon : float, default=1e-4
        Accuracy of the fast Gauss transform.
    tol : float, default=1e-7
        Relative decrease of the objective that stops the line-search optimisers.
    n_neighbors, affinity_method, kappa, init, random_state, n_jobs
        As in :class:`SymmetricSNE`.
    callbacks : callable or list of callables, default=None
        Called as ``callback(iteration, objective, embedding)`` every ``callback_every``
        iterations; returning True stops the fit with the embedding so far
        (``stopped_early_``).
    callback_every : int, default=1
    verbose : bool or int, default=False
        Draw a progress bar.

    Attributes
    ----------
    embedding_ : ndarray of shape (n_samples, n_components)
    kl_divergence_ : float
        :math:`\sum_n KL(P_n \| Q_n)` at the end (with the repulsion method used).
    n_iter_ : int
    stopped_early_ : bool
    affinities_ : scipy.sparse.csr_array
        The conditional P (rows sum to 1).

    Notes
    -----
    ``transform`` embeds new points against the fitted embedding (thesis §5.4), so
    ``transform(X_train)`` is not ``fit_transform(X_train)`` and a point's embedding depends on
    the batch it came with: scikit-learn's checks that assume a fixed function of each point do
    not apply to it.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from vastml.embed import SNE
    >>> X = load_digits().data[:200]
    >>> m = SNE(perplexity=15, max_iter=100, random_state=0).fit(X)
    >>> m.embedding_.shape, bool(m.kl_divergence_ < 200 * 1.0)
    ((200, 2), True)
    """

    _model = "sne"

    def __init__(
        self,
        *,
        n_components: int = 2,
        perplexity: float = 30.0,
        max_iter: int = 1000,
        method: str = "spectral",
        gradient: str | tuple[str, Any] = "auto",
        theta: float = 0.5,
        epsilon: float = 1e-4,
        tol: float = 1e-7,
        n_neighbors: int | None = None,
        affinity_method: str = "euler",
        kappa: int | None = None,
        init: str | ArrayLike = "pca",
        random_state: RandomState = None,
        n_jobs: int | None = None,
        callbacks: Callback | Sequence[Callback] | None = None,
        callback_every: int = 1,
        verbose: bool | int = False,
    ) -> None:
        self.n_components = n_components
        self.perplexity = perplexity
        self.max_iter = max_iter
        self.method = method
        self.gradient = gradient
        self.theta = theta
        self.epsilon = epsilon
        self.tol = tol
        self.n_neighbors = n_neighbors
        self.affinity_method = affinity_method
        self.kappa = kappa
        self.init = init
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.callbacks = callbacks
        self.callback_every = callback_every
        self.verbose = verbose

    def _fit(self, X):
        self._check_common()
        max_iter = check_int(self.max_iter, "max_iter", low=1)
        tol = positive_float(self.tol, "tol")
        eps = positive_float(self.epsilon, "epsilon")
        X = validate_data(self, X, dtype=np.float64, order="C", ensure_min_samples=3)
        rng = check_random_state(self.random_state)
        P = self._affinities(X)
        self.affinities_ = P
        W = symmetrize(P, "mean")
        obj = EmbeddingObjective(
            "sne",
            W,
            gradient=self._gradient_method(X.shape[0]),
            theta=self.theta,
            epsilon=eps,
            n_jobs=self.n_jobs,
        )
        Y = self._init(X, rng, 1e-4)
        r = self._minimize(
            obj, Y, max_iter, method=self.method, kappa=self.kappa, tol=tol
        )
        self.embedding_, self.n_iter_ = r.X, r.n_iter_
        self.kl_divergence_ = float(obj(r.X)[0]) + neg_entropy(sp.csr_array(P).data)
        return self
