"""PCA and linear discriminant analysis through their duals on Locally Linear Landmarks
(thesis 4.11-4.17)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from vastml.embed._lll import _LLLBase
from vastml.embed._lll_core import _positive_int, reduced_eigenproblem
from vastml._validation import validate_rows

if TYPE_CHECKING:
    from typing import Self

    from vastml._typing import ArrayLike, BoolArray, FloatArray, RandomState


def _unit_rows(M: FloatArray, negligible: BoolArray) -> FloatArray:
    """The rows of ``M`` scaled to unit length; zero rows and the ``negligible`` ones
    (directions of no variance, as on constant data) replaced by unit vectors orthogonal to
    the others, so the components stay orthonormal instead of 0 / 0 = NaN."""
    norms = np.linalg.norm(M, axis=1)
    good = (norms > 0) & ~negligible
    M = M.copy()
    M[good] /= norms[good][:, None]
    bad = np.flatnonzero(~good)
    if bad.size:
        # the rows of Vt beyond the rank of the good rows span their orthogonal complement
        kept = M[good]
        if kept.shape[0]:
            Vt = np.linalg.svd(kept, full_matrices=True)[2]
            rest = Vt[np.linalg.matrix_rank(kept):]
        else:
            rest = np.eye(M.shape[1])
        take = min(bad.size, rest.shape[0])
        M[bad[:take]] = rest[:take]
    return M


class LLLPCA(_LLLBase):
    r"""PCA through its dual on Locally Linear Landmarks (thesis 4.11-4.13).

    :math:`\tilde A = (Z\bar Y)(Z\bar Y)^T` (never the N x N Gram), :math:`\tilde B = Z Z^T`,
    leading eigenvectors; the linear map is recovered as
    :math:`M = \Lambda^{-1/2} \tilde X^T Z \bar Y`, rows normalised, so ``transform`` is linear.
    Cost O(K_Z N D + L^2 D + L^3). With every point a landmark it is exact PCA.

    Attributes
    ----------
    components_ : ndarray (n_components, n_features)
    explained_variance_ : ndarray (n_components,)
    mean_, landmark_indices_, landmarks_, weights_

    Notes
    -----
    Progress (``callbacks``, ``callback_every``, ``verbose``; see :mod:`vastml._progress`): one
    iteration count runs through the stages of the fit. The reconstruction weights report once
    per chunk of 16,384 points, then the reduced eigensolve reports once. ``objective`` is NaN
    before the solve; at the solve it is the sum of ``eigenvalues_`` (the trace of the reduced
    problem, maximised), and ``state`` is None before the solve and ``components_`` from it on.
    A callback returning True before the solve stops the fit with no model (the fitted
    attributes are removed, ``stopped_early_`` is True and a ``ConvergenceWarning`` says so); at
    or after the solve it keeps the result it has and sets ``stopped_early_``. Ctrl-C stops the
    Rust loops (``KeyboardInterrupt``).

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.embed import LLLPCA
    >>> X = np.random.default_rng(0).normal(size=(500, 5)) * [5, 2, 1, 1, 1]
    >>> p = LLLPCA(n_components=2, n_landmarks=100, random_state=0).fit(X)
    >>> bool(abs(p.components_[0, 0]) > 0.95)
    True
    """

    def __init__(
        self,
        *,
        n_components: int = 2,
        n_landmarks: int = 200,
        landmarks: str | ArrayLike = "random",
        n_landmark_neighbors: int | None = None,
        reg: float = 1e-3,
        random_state: RandomState = None,
        callbacks: Any = None,
        callback_every: int = 1,
        verbose: bool | int = False,
    ) -> None:
        self.n_components = n_components
        self.n_landmarks = n_landmarks
        self.landmarks = landmarks
        self.n_landmark_neighbors = n_landmark_neighbors
        self.reg = reg
        self.random_state = random_state
        self.callbacks = callbacks
        self.callback_every = callback_every
        self.verbose = verbose

    def _default_kz(self, n_features, L):
        return min(L, n_features + 1)

    def fit(self, X: ArrayLike, y: object = None) -> Self:
        """Fit the principal axes of X; returns self."""
        X = validate_data(self, X, dtype=np.float64, order="C", ensure_min_samples=2)
        return self._fit_with_progress(self._fit, X)

    def _fit(self, stages, X):
        d = _positive_int(self.n_components, "n_components")
        rng = check_random_state(self.random_state)
        self.mean_ = X.mean(axis=0)
        Z = self._landmarks_and_weights(X, rng, stages)
        F = np.asarray(Z @ (X - self.mean_))  # L x D
        lam, Xt = reduced_eigenproblem(F @ F.T, (Z @ Z.T), d, largest=True)
        lam = np.maximum(lam, 1e-300)
        # directions of no variance (constant or rank-deficient data): any unit vectors
        # orthogonal to the others
        M = _unit_rows((Xt.T @ F) / np.sqrt(lam)[:, None], lam <= 1e-12 * lam.max())
        self.weights_ = Z
        self.components_ = M
        self.explained_variance_ = lam / max(X.shape[0] - 1, 1)
        stages.report(float(np.sum(lam)), M)

    def transform(self, X: ArrayLike) -> FloatArray:
        check_is_fitted(self, "components_")
        X = validate_rows(self, X, reset=False)
        return (X - self.mean_) @ self.components_.T


class LLLDiscriminantAnalysis(_LLLBase):
    r"""Linear discriminant analysis through its dual on Locally Linear Landmarks (thesis 4.14-4.17).

    :math:`\tilde A = F S_b F^T`, :math:`\tilde B = F S_t F^T` with :math:`F = Z \bar Y`
    (L x D), :math:`S_b = \sum_k N_k \mu_k \mu_k^T` over **all** labels and
    :math:`S_t = \bar Y^T \bar Y`; solved within the range of F, so the reduced problem is
    never singular. The projection is ``M = X_tilde^T F`` (rows scaled to unit length). When F has full column rank (L >= D
    and landmarks in general position) this is exact LDA; LLL matters when D > L.

    Notes
    -----
    Progress (``callbacks``, ``callback_every``, ``verbose``; see :mod:`vastml._progress`): one
    iteration count runs through the stages of the fit. The reconstruction weights report once
    per chunk of 16,384 points, then the reduced eigensolve reports once. ``objective`` is NaN
    before the solve; at the solve it is the sum of ``eigenvalues_`` (the trace of the reduced
    problem, maximised), and ``state`` is None before the solve and ``components_`` from it on.
    A callback returning True before the solve stops the fit with no model (the fitted
    attributes are removed, ``stopped_early_`` is True and a ``ConvergenceWarning`` says so); at
    or after the solve it keeps the result it has and sets ``stopped_early_``. Ctrl-C stops the
    Rust loops (``KeyboardInterrupt``).

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.embed import LLLDiscriminantAnalysis
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat([0, 1], 100)
    >>> X = rng.normal(size=(200, 3)); X[:, 2] += 4 * y
    >>> lda = LLLDiscriminantAnalysis(n_components=1, n_landmarks=20, random_state=0).fit(X, y)
    >>> bool(abs(lda.components_[0, 2]) > 0.9)
    True
    """

    def __init__(
        self,
        *,
        n_components: int = 1,
        n_landmarks: int = 200,
        landmarks: str | ArrayLike = "random",
        n_landmark_neighbors: int | None = None,
        reg: float = 1e-3,
        ridge: float = 1e-10,
        random_state: RandomState = None,
        callbacks: Any = None,
        callback_every: int = 1,
        verbose: bool | int = False,
    ) -> None:
        self.n_components = n_components
        self.n_landmarks = n_landmarks
        self.landmarks = landmarks
        self.n_landmark_neighbors = n_landmark_neighbors
        self.reg = reg
        self.ridge = ridge
        self.random_state = random_state
        self.callbacks = callbacks
        self.callback_every = callback_every
        self.verbose = verbose

    def _default_kz(self, n_features, L):
        return min(L, n_features + 1)

    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Fit the discriminant directions of X with labels y; returns self."""
        X = validate_data(self, X, dtype=np.float64, order="C", ensure_min_samples=2)
        return self._fit_with_progress(self._fit, X, y)

    def _fit(self, stages, X, y):
        y = np.asarray(y)
        if y.shape != (X.shape[0],):
            raise ValueError(f"`y` must have shape ({X.shape[0]},), got {y.shape}")
        d = _positive_int(self.n_components, "n_components")
        self.classes_, yi = np.unique(y, return_inverse=True)
        if self.classes_.size < 2:
            raise ValueError("`y` needs at least 2 classes")
        rng = check_random_state(self.random_state)
        self.mean_ = X.mean(axis=0)
        Yc = X - self.mean_
        counts = np.bincount(yi)
        mu = np.zeros((counts.size, X.shape[1]))
        np.add.at(mu, yi, Yc)
        mu /= counts[:, None]
        Sb = (mu * counts[:, None]).T @ mu
        St = Yc.T @ Yc
        Z = self._landmarks_and_weights(X, rng, stages)
        F = np.asarray(Z @ Yc)
        U, s, Vt = np.linalg.svd(F, full_matrices=False)
        r = int(np.sum(s > s[0] * 1e-10)) if s.size and s[0] > 0 else 0
        if d > r:
            raise ValueError(f"`n_components` = {d} exceeds the rank {r} of the landmark problem")
        G = s[:r, None] * Vt[:r]  # r x D, F = U_r G
        Ar = G @ Sb @ G.T
        Br = G @ St @ G.T
        Br += self.ridge * np.trace(Br) / r * np.eye(r)
        lam, v = reduced_eigenproblem(Ar, Br, d, largest=True)
        self.weights_ = Z
        self.landmark_embedding_ = U[:, :r] @ v
        self.eigenvalues_ = lam
        M = v.T @ G
        self.components_ = M / np.linalg.norm(M, axis=1, keepdims=True)
        stages.report(float(np.sum(lam)), self.components_)

    def transform(self, X: ArrayLike) -> FloatArray:
        check_is_fitted(self, "components_")
        X = validate_rows(self, X, reset=False)
        return (X - self.mean_) @ self.components_.T
