"""LLSVM: Nystrom landmarks + a linear SVM trained by dual coordinate descent."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from vastml import _core
from vastml._validation import choice
from vastml.svm._base import (
    BudgetedClassifier,
    check_float,
    check_int,
    check_model_memory,
    core_examples,
)
from vastml.svm._bsgd import KERNELS, kernel_args, kernel_gamma

if TYPE_CHECKING:
    from typing import Self

    from vastml._typing import ArrayLike, RandomState

LANDMARKS = ("kmeans", "kmedoids", "random")


class LLSVMClassifier(BudgetedClassifier):
    r"""Low-rank linearisation SVM (Zhang et al. 2012; Djuric's thesis ch. 5).

    Picks ``n_landmarks`` landmark points :math:`z_i` (k-means centres or random rows of a
    sample of at most ``landmark_sample`` rows), maps every example to
    :math:`\phi(x) = M g(x)` with :math:`g(x) = [k(x, z_i)]_i` and
    :math:`M = \Lambda^{-1/2} U^\top` from :math:`K_{BB} = U \Lambda U^\top` (eigenvalues below
    :math:`10^{-5}\lambda_{max}` dropped), and trains a linear hinge-loss SVM on :math:`\phi`
    by dual coordinate descent with :math:`C = 1/\lambda`. Binary directly; one-vs-rest (in
    parallel) for more classes. Kernels as in :class:`~vastml.svm.BSGDClassifier`.

    Memory: the mapped training set (n_samples x n_landmarks floats) is held while training.

    Parameters
    ----------
    l2_penalty : float, default=0.1
        Regularisation :math:`\lambda` (``-L``); the dual box is :math:`C = 1/\lambda`.
    n_landmarks : int, default=100
        :math:`B` (``-B``); capped at the number of training rows.
    landmarks : {"kmeans", "kmedoids", "random"}, default="kmeans"
        How landmarks are chosen (``-m 1`` / ``-m 2`` / ``-m 0``). k-medoids starts from the
        k-means clustering and alternates assignment with the medoid update (the member with
        the smallest summed distance to its cluster), so landmarks are data rows.
    kernel, gamma, degree, coef0
        As in :class:`~vastml.svm.BSGDClassifier`.
    max_iter : int, default=30
        Dual coordinate descent passes at most.
    tol : float, default=0.01
        Stop when the projected-gradient spread of a pass is at most this.
    landmark_sample : int, default=50000
        Rows (random, densified) from which landmarks are chosen.
    kmeans_iter : int, default=10
        Lloyd iterations for k-means landmarks.
    random_state, verbose, n_jobs
        As in :class:`~vastml.svm.AMMClassifier`; ``n_jobs`` also runs one-vs-rest models
        in parallel.
    callbacks : callable, list of callables or None, default=None
        Called as ``callback(iteration, objective, state)`` after every ``callback_every``
        dual coordinate descent passes (``iteration`` = passes made, from 1; the one-vs-rest
        models make their passes together). ``objective`` is the dual objective
        :math:`\frac12\lVert w\rVert^2 - \sum_i a_i` summed over the models (what dual
        coordinate descent minimises; cheap to compute), ``state`` the number of support
        vectors (examples with :math:`a_i > 0`) summed over the models. Returning True stops
        the fit cleanly after that pass (the weights of the passes made are kept) and sets
        ``stopped_early_``.
    callback_every : int, default=1

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    landmarks_ : ndarray of shape (n_landmarks, n_features)
    map_matrix_ : ndarray of shape (rank, n_landmarks)
        :math:`M`.
    coef_ : ndarray of shape (n_models, rank)
        One row per one-vs-rest model (a single row for two classes, positive =
        ``classes_[1]``).
    n_weights_ : int
        Number of landmarks.
    n_iter_ : int
        Largest number of dual-CD passes over the models.
    stopped_early_ : bool
        Whether a callback stopped the last fit.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.svm import LLSVMClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(2000, 2))
    >>> y = (X ** 2).sum(1) < 0.5
    >>> clf = LLSVMClassifier(l2_penalty=0.01, n_landmarks=30, gamma=2.0, random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.95)
    True
    """

    def __init__(
        self,
        *,
        l2_penalty: float = 0.1,
        n_landmarks: int = 100,
        landmarks: str = "kmeans",
        kernel: str = "rbf",
        gamma: float | None = None,
        degree: int = 2,
        coef0: float = 1.0,
        max_iter: int = 30,
        tol: float = 0.01,
        landmark_sample: int = 50000,
        kmeans_iter: int = 10,
        random_state: RandomState = None,
        verbose: bool | int = False,
        n_jobs: int | None = None,
        callbacks: Any = None,
        callback_every: int = 1,
    ) -> None:
        self.l2_penalty = l2_penalty
        self.n_landmarks = n_landmarks
        self.landmarks = landmarks
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.max_iter = max_iter
        self.tol = tol
        self.landmark_sample = landmark_sample
        self.kmeans_iter = kmeans_iter
        self.random_state = random_state
        self.verbose = verbose
        self.n_jobs = n_jobs
        self.callbacks = callbacks
        self.callback_every = callback_every

    def _check_params(self):
        check_float(self.l2_penalty, "l2_penalty", low=0, low_open=True)
        check_int(self.n_landmarks, "n_landmarks", 1)
        choice(self.landmarks, "landmarks", LANDMARKS)
        choice(self.kernel, "kernel", KERNELS)
        check_float(self.gamma, "gamma", low=0, low_open=True, allow_none=True)
        check_int(self.degree, "degree", 1)
        check_float(self.coef0, "coef0")
        check_int(self.max_iter, "max_iter", 1)
        check_float(self.tol, "tol", low=0)
        check_int(self.landmark_sample, "landmark_sample", 1)
        check_int(self.kmeans_iter, "kmeans_iter", 1)
        self._n_jobs()

    def _kernel_args(self) -> dict[str, Any]:
        return kernel_args(self.kernel, kernel_gamma(self.gamma, self.n_features_in_), self.degree, self.coef0)

    def _choose_landmarks(self, X, seed):
        n = X.shape[0]
        rng = np.random.default_rng(seed)
        rows = rng.choice(n, size=min(n, int(self.landmark_sample)), replace=False)
        sample = X[np.sort(rows)]
        b = min(int(self.n_landmarks), sample.shape[0])
        if self.landmarks == "random":
            picked = sample[rng.choice(sample.shape[0], size=b, replace=False)]
            return np.ascontiguousarray(picked.toarray() if sp.issparse(picked) else picked, dtype=np.float64)
        # BudgetedSVM's k-means: b random distinct rows, then Lloyd iterations; CSR is read
        # directly (distances at O(nnz) per centre), only the centres are dense.
        centers, labels = _core.llsvm_kmeans(
            core_examples(sample), b, max_iter=int(self.kmeans_iter), seed=int(seed), n_jobs=self._n_jobs()
        )
        if self.landmarks == "kmedoids":
            return kmedoids(sample, labels, b, int(self.kmeans_iter))
        return centers

    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Choose landmarks, map the data and train the linear SVM(s).

        Returns
        -------
        self
        """
        self._check_params()
        with self._progress(int(self.max_iter)) as progress:
            Xv, y = self._fit_data(X, y, reset=True)
            self._set_classes(y)
            codes = self._encode(y)
            # landmarks, k-means centres and the mapped batch are dense in n_features
            check_model_memory(Xv.shape[1], 2 * int(self.n_landmarks), "n_landmarks")
            seed = self._seeds(1)[0]
            self.landmarks_ = self._choose_landmarks(Xv, seed)
            models = [1] if len(self.classes_) == 2 else list(range(len(self.classes_)))
            params = {
                "classes": models,
                "kernel": self._kernel_args(),
                "c": 1.0 / float(self.l2_penalty),
                "max_iter": int(self.max_iter),
                "tol": float(self.tol),
                "seed": seed,
            }
            report = progress.report if progress.active else None
            self.map_matrix_, self.coef_, iters, stopped = _core.llsvm_fit(
                core_examples(Xv), codes, self.landmarks_, params, report, n_jobs=self._n_jobs()
            )
        self.n_iter_ = int(max(iters))
        self.stopped_early_ = bool(stopped)
        self.n_weights_ = int(self.landmarks_.shape[0])
        return self

    def _decision_matrix(self, Xc):
        model = (self.landmarks_, self.map_matrix_, self.coef_)
        s = _core.llsvm_decision(Xc, model, self._kernel_args(), n_jobs=self._n_jobs())
        if len(self.classes_) == 2:
            return np.column_stack([-s[:, 0] / 2, s[:, 0] / 2])
        return s


def _sq_dists(A, B):
    """Squared Euclidean distances between the rows of A and B (dense or sparse)."""
    aa = np.asarray(A.multiply(A).sum(1)).ravel() if sp.issparse(A) else (A * A).sum(1)
    bb = np.asarray(B.multiply(B).sum(1)).ravel() if sp.issparse(B) else (B * B).sum(1)
    ab = A @ B.T
    ab = ab.toarray() if sp.issparse(ab) else np.asarray(ab)
    return np.maximum(aa[:, None] + bb[None, :] - 2 * ab, 0.0)


def kmedoids(X, labels, k, max_iter):
    """Alternating k-medoids from an initial labelling: medoid = the member with the smallest
    summed squared distance to the other members of its cluster; then re-assign to the
    nearest medoid. Returns the medoids as dense rows of X, shape (k, n_features).

    >>> import numpy as np
    >>> X = np.array([[0.0], [0.1], [0.3], [10.0], [10.2]])
    >>> kmedoids(X, np.array([0, 0, 0, 1, 1]), 2, 5).ravel().tolist()
    [0.1, 10.0]
    """
    labels = np.asarray(labels).copy()
    medoids = np.zeros(k, dtype=np.int64)
    for _ in range(max(1, max_iter)):
        for c in range(k):
            members = np.flatnonzero(labels == c)
            if members.size == 0:
                medoids[c] = medoids[c - 1] if c else 0
                continue
            d = _sq_dists(X[members], X[members]).sum(1)
            medoids[c] = members[int(np.argmin(d))]
        new = np.argmin(_sq_dists(X, X[medoids]), axis=1)
        if np.array_equal(new, labels):
            break
        labels = new
    M = X[medoids]
    return np.ascontiguousarray(M.toarray() if sp.issparse(M) else M, dtype=np.float64)
