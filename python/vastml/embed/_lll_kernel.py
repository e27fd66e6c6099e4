"""Kernel PCA and kernel Fisher discriminant analysis on Locally Linear Landmarks (thesis
4.16-4.18), and the exact kernel discriminant analysis they reduce."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from vastml._validation import as_points, check_float, validate_rows
from vastml.embed._lll import _LLLBase, _Stopped
from vastml.embed._lll_core import _positive_int, reduced_eigenproblem

if TYPE_CHECKING:
    from typing import Self

    from vastml._typing import ArrayLike, FloatArray, RandomState


class LLLKernelPCA(_LLLBase):
    r"""Kernel PCA on Locally Linear Landmarks (thesis 4.18).

    :math:`\tilde A = Z \bar K Z^T`, :math:`\tilde B = Z Z^T`; the centring of K is applied
    implicitly and K is streamed in row blocks (O(N^2 D) time, O(block N) memory). Scores are
    scaled like scikit-learn's ``KernelPCA`` (``sqrt(lambda)`` times the unit eigenvector), so
    with every point a landmark they equal it up to sign. ``transform`` is the LLL out-of-sample
    map ``sqrt(lambda) X_tilde z``.

    Notes
    -----
    Progress (``callbacks``, ``callback_every``, ``verbose``; see :mod:`vastml._progress`): one
    iteration count runs through the stages of the fit. The reconstruction weights report once
    per chunk of 16,384 points and the kernel once per ``block`` rows, then the reduced
    eigensolve reports once. ``objective`` is NaN before the solve; at the solve it is the sum
    of ``eigenvalues_`` (the trace of the reduced problem, maximised), and ``state`` is None
    before the solve and the embedding from it on. A callback returning True before the solve
    stops the fit with no model (the fitted attributes are removed, ``stopped_early_`` is True
    and a ``ConvergenceWarning`` says so); at or after the solve it keeps the result it has and
    sets ``stopped_early_``. Ctrl-C stops the Rust loops (``KeyboardInterrupt``).

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.embed import LLLKernelPCA
    >>> X = np.random.default_rng(0).normal(size=(300, 3))
    >>> LLLKernelPCA(n_components=2, n_landmarks=50, gamma=0.5, random_state=0).fit_transform(X).shape
    (300, 2)
    """

    def __init__(
        self,
        *,
        n_components: int = 2,
        kernel: str = "rbf",
        gamma: float | None = None,
        n_landmarks: int = 200,
        landmarks: str | ArrayLike = "random",
        n_landmark_neighbors: int | None = None,
        reg: float = 1e-3,
        block: int = 2048,
        random_state: RandomState = None,
        callbacks: Any = None,
        callback_every: int = 1,
        verbose: bool | int = False,
    ) -> None:
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.n_landmarks = n_landmarks
        self.landmarks = landmarks
        self.n_landmark_neighbors = n_landmark_neighbors
        self.reg = reg
        self.block = block
        self.random_state = random_state
        self.callbacks = callbacks
        self.callback_every = callback_every
        self.verbose = verbose

    def _default_kz(self, n_features, L):
        return min(L, n_features + 1)

    def fit(self, X: ArrayLike, y: object = None) -> Self:
        """Fit the kernel principal components of X; returns self."""
        X = validate_data(self, X, dtype=np.float64, order="C", ensure_min_samples=2)
        return self._fit_with_progress(self._fit, X)

    def _fit(self, stages, X):
        d = _positive_int(self.n_components, "n_components")
        rng = check_random_state(self.random_state)
        Z = self._landmarks_and_weights(X, rng, stages)
        n = X.shape[0]
        L = Z.shape[0]
        ZK = np.zeros((L, n))  # Z K, accumulated over row blocks of the symmetric K
        ZT = Z.T.tocsr()
        kw = {} if self.gamma is None else {"gamma": check_float(self.gamma, "gamma", low=0, low_open=True)}
        b = _positive_int(self.block, "block")
        total = 0.0  # 1^T K 1
        for s in range(0, n, b):
            Kb = pairwise_kernels(X[s : s + b], X, metric=self.kernel, **kw)
            ZK += np.asarray(ZT[s : s + b].T @ Kb)
            total += Kb.sum()
            if stages.report():
                raise _Stopped
        zk1 = ZK.sum(axis=1)  # Z K 1
        z1 = np.asarray(Z.sum(axis=1)).ravel()  # Z 1
        ZKZ = np.asarray(Z @ ZK.T)
        A = ZKZ - np.outer(z1, zk1) / n - np.outer(zk1, z1) / n + np.outer(z1, z1) * total / n**2
        lam, Xt = reduced_eigenproblem(A, (Z @ Z.T), d, largest=True)
        lam = np.maximum(lam, 0.0)
        self.weights_ = Z
        self.eigenvalues_ = lam
        self.landmark_embedding_ = Xt * np.sqrt(lam)
        self.embedding_ = np.asarray(Z.T @ self.landmark_embedding_)
        stages.report(float(np.sum(lam)), self.embedding_)

    def fit_transform(self, X: ArrayLike, y: object = None) -> FloatArray:
        """Fit and return the embedding of X."""
        return self.fit(X).embedding_


def _centred_zk(X, Z, kernel, kw, block, stages):
    """``Z K_bar`` (L x N) with the centred kernel ``K_bar = C K C`` streamed in row blocks.

    Returns (Z K_bar, row means of K, mean of K, ||K_bar||_F^2); K is never held whole.
    ``||C K C||^2 = ||K||^2 - 2 ||K 1||^2 / N + (1'K1)^2 / N^2`` (K symmetric).
    """
    n = X.shape[0]
    ZK = np.zeros((Z.shape[0], n))
    ZT = Z.T.tocsr()
    k1 = np.empty(n)
    fro = 0.0
    for s in range(0, n, block):
        Kb = pairwise_kernels(X[s : s + block], X, metric=kernel, **kw)
        ZK += np.asarray(ZT[s : s + block].T @ Kb)
        k1[s : s + block] = Kb.sum(axis=1)
        fro += float(np.einsum("ij,ij->", Kb, Kb))
        if stages.report():
            raise _Stopped
    total = float(k1.sum())
    z1 = np.asarray(Z.sum(axis=1)).ravel()
    zk1 = ZK @ np.ones(n)
    ZKc = ZK - np.outer(z1, k1) / n - zk1[:, None] / n + z1[:, None] * total / n**2
    fro_c = fro - 2.0 * float(k1 @ k1) / n + total**2 / n**2
    return ZKc, k1 / n, total / n**2, max(fro_c, 0.0)


def _class_indicator(y):
    classes, yi = np.unique(y, return_inverse=True)
    if classes.size < 2:
        raise ValueError("`y` needs at least 2 classes")
    return classes, yi, np.bincount(yi)


def kernel_discriminant_analysis(
    X: ArrayLike,
    y: ArrayLike,
    n_components: int = 1,
    *,
    kernel: str = "rbf",
    gamma: float | None = None,
    ridge: float = 1e-3,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    r"""Exact kernel Fisher discriminant analysis (Baudat & Anouar 2000; Mika et al. 1999).

    Dense N x N: with the centred kernel :math:`\bar K`, class-averaging matrix Q
    (:math:`Q_{ij} = 1/N_k` when i, j are both in class k), solves
    :math:`\bar K Q \bar K \alpha = \lambda (\bar K \bar K + \mu I) \alpha` for the leading
    ``n_components`` (between-class over total scatter in feature space, thesis 4.16-4.18 with
    K for :math:`\bar Y^T \bar Y`), :math:`\mu = \text{ridge}\,\|\bar K\|_F^2 / N`. The oracle of
    :class:`LLLKernelDiscriminantAnalysis` (equal to it when every point is a landmark).

    Returns (eigenvalues, dual coefficients alpha (N x d), embedding ``K_bar alpha`` (N x d)).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat([0, 1], 50)
    >>> X = rng.normal(size=(100, 2)); X[:, 0] += 3 * y
    >>> lam, alpha, E = kernel_discriminant_analysis(X, y, 1, gamma=0.1)
    >>> bool(lam[0] > 0.5 and abs(np.corrcoef(E[:, 0], y)[0, 1]) > 0.8)
    True
    """
    X = as_points(X, "X")
    y = np.asarray(y)
    if y.shape != (X.shape[0],):
        raise ValueError(f"`y` must have shape ({X.shape[0]},), got {y.shape}")
    _, yi, counts = _class_indicator(y)
    d = _positive_int(n_components, "n_components")
    n = X.shape[0]
    kw = {} if gamma is None else {"gamma": gamma}
    K = pairwise_kernels(X, metric=kernel, **kw)
    C = np.eye(n) - 1.0 / n
    Kc = C @ K @ C
    S = np.zeros((counts.size, n))
    np.add.at(S, yi, Kc)  # class sums of the rows of K_bar: C x N
    H = (S / counts[:, None]).T @ S
    T = Kc @ Kc
    T += float(ridge) * float((Kc * Kc).sum()) / n * np.eye(n)
    lam, alpha = reduced_eigenproblem(H, T, d, largest=True)
    return lam, alpha, Kc @ alpha


class LLLKernelDiscriminantAnalysis(_LLLBase):
    r"""Kernel Fisher discriminant analysis on Locally Linear Landmarks (thesis 4.16-4.18).

    The dual coefficients are reconstructed from the landmarks', :math:`\alpha = Z^T \tilde X`,
    so the N x N problem :math:`\bar K Q \bar K \alpha = \lambda(\bar K\bar K + \mu I)\alpha`
    (:func:`kernel_discriminant_analysis`) shrinks to L x L with
    :math:`\tilde A = (Z\bar K) Q (Z\bar K)^T` and
    :math:`\tilde B = (Z\bar K)(Z\bar K)^T + \mu Z Z^T`. ``Z K_bar`` (L x N) is built by
    streaming K in row blocks with implicit centring: O(N^2 D + L^2 N) time, O(L N) memory, and
    all labels are used. With every point a landmark it is exact kernel LDA.

    ``transform`` is the kernel projection :math:`\sum_n \alpha_n \bar k(x_n, x)` (it needs the
    training points, as any kernel method).

    Parameters
    ----------
    n_components : int, default=1
    kernel : str, default="rbf"
        Any metric of :func:`sklearn.metrics.pairwise.pairwise_kernels`.
    gamma : float, default=None
    n_landmarks, landmarks, n_landmark_neighbors, reg, random_state
        As for :class:`LLLKernelPCA` (K_Z defaults to ``n_features + 1``).
    ridge : float, default=1e-3
        mu relative to :math:`\|\bar K\|_F^2 / N`.
    block : int, default=2048
        Rows of K per block.
    callbacks : callable, list of callables or None, default=None
        Called as ``callback(iteration, objective, state)``; True stops the fit (Notes).
    callback_every : int, default=1
        Call the callbacks every this many iterations.
    verbose : bool or int, default=False
        A progress bar on stderr.

    Attributes
    ----------
    embedding_ : ndarray (n_samples, n_components)
    dual_coef_ : ndarray (n_samples, n_components)
    eigenvalues_ : ndarray (n_components,)
        Between-class over (regularised) total scatter, in [0, 1).
    landmark_embedding_, landmark_indices_, landmarks_, weights_, classes_

    Notes
    -----
    Progress (``callbacks``, ``callback_every``, ``verbose``; see :mod:`vastml._progress`): one
    iteration count runs through the stages of the fit. The reconstruction weights report once
    per chunk of 16,384 points and the kernel once per ``block`` rows, then the reduced
    eigensolve reports once. ``objective`` is NaN before the solve; at the solve it is the sum
    of ``eigenvalues_`` (the trace of the reduced problem, maximised), and ``state`` is None
    before the solve and the embedding from it on. A callback returning True before the solve
    stops the fit with no model (the fitted attributes are removed, ``stopped_early_`` is True
    and a ``ConvergenceWarning`` says so); at or after the solve it keeps the result it has and
    sets ``stopped_early_``. Ctrl-C stops the Rust loops (``KeyboardInterrupt``).

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.embed.lll import LLLKernelDiscriminantAnalysis
    >>> rng = np.random.default_rng(0)
    >>> t = rng.uniform(0, 2 * np.pi, 600); y = (rng.uniform(size=600) < 0.5).astype(int)
    >>> X = np.c_[np.cos(t), np.sin(t)] * (1 + 2 * y)[:, None] + 0.1 * rng.normal(size=(600, 2))
    >>> kda = LLLKernelDiscriminantAnalysis(n_components=1, gamma=1.0, n_landmarks=60, random_state=0)
    >>> E = kda.fit(X, y).embedding_
    >>> bool(abs(np.corrcoef(E[:, 0], y)[0, 1]) > 0.9)
    True
    """

    def __init__(
        self,
        *,
        n_components: int = 1,
        kernel: str = "rbf",
        gamma: float | None = None,
        n_landmarks: int = 200,
        landmarks: str | ArrayLike = "random",
        n_landmark_neighbors: int | None = None,
        reg: float = 1e-3,
        ridge: float = 1e-3,
        block: int = 2048,
        random_state: RandomState = None,
        callbacks: Any = None,
        callback_every: int = 1,
        verbose: bool | int = False,
    ) -> None:
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.n_landmarks = n_landmarks
        self.landmarks = landmarks
        self.n_landmark_neighbors = n_landmark_neighbors
        self.reg = reg
        self.ridge = ridge
        self.block = block
        self.random_state = random_state
        self.callbacks = callbacks
        self.callback_every = callback_every
        self.verbose = verbose

    def _default_kz(self, n_features, L):
        return min(L, n_features + 1)

    def _kw(self):
        return {} if self.gamma is None else {"gamma": self.gamma}

    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Fit the kernel discriminant directions of X with labels y; returns self."""
        X = validate_data(self, X, dtype=np.float64, order="C", ensure_min_samples=2)
        return self._fit_with_progress(self._fit, X, y)

    def _fit(self, stages, X, y):
        y = np.asarray(y)
        if y.shape != (X.shape[0],):
            raise ValueError(f"`y` must have shape ({X.shape[0]},), got {y.shape}")
        self.classes_, yi, counts = _class_indicator(y)
        d = _positive_int(self.n_components, "n_components")
        rng = check_random_state(self.random_state)
        Z = self._landmarks_and_weights(X, rng, stages)
        n = X.shape[0]
        ZKc, kmean, kall, fro = _centred_zk(X, Z, self.kernel, self._kw(),
                                            _positive_int(self.block, "block"), stages)
        S = np.zeros((ZKc.shape[0], counts.size))  # class sums of the columns of Z K_bar
        for k in range(counts.size):
            S[:, k] = ZKc[:, yi == k].sum(axis=1)
        A = (S / counts) @ S.T
        mu = float(self.ridge) * fro / n
        B = ZKc @ ZKc.T + mu * np.asarray((Z @ Z.T).todense())
        lam, Xt = reduced_eigenproblem(A, B, d, largest=True)
        self.weights_ = Z
        self.eigenvalues_ = lam
        self.landmark_embedding_ = Xt
        self.dual_coef_ = np.asarray(Z.T @ Xt)
        self.embedding_ = ZKc.T @ Xt
        self.X_fit_ = X
        self._kmean, self._kall = kmean, kall
        stages.report(float(np.sum(lam)), self.embedding_)

    def transform(self, X: ArrayLike) -> FloatArray:
        """Kernel projection of new points, ``sum_n alpha_n k_bar(x_n, x)``."""
        check_is_fitted(self, "dual_coef_")
        Xv = validate_rows(self, X, reset=False)
        out = np.empty((Xv.shape[0], self.dual_coef_.shape[1]))
        b = _positive_int(self.block, "block")
        for s in range(0, Xv.shape[0], b):
            Kx = pairwise_kernels(Xv[s : s + b], self.X_fit_, metric=self.kernel, **self._kw())
            Kx = Kx - Kx.mean(axis=1, keepdims=True) - self._kmean[None, :] + self._kall
            out[s : s + b] = Kx @ self.dual_coef_
        return out

    def fit_transform(self, X: ArrayLike, y: ArrayLike) -> FloatArray:
        """Fit and return the embedding of X."""
        return self.fit(X, y).embedding_
