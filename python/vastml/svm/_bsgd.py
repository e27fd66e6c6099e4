"""BSGD: budgeted kernel SVM by SGD, over the Rust trainer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from vastml import _core
from vastml._validation import choice
from vastml.svm._base import (
    BudgetedClassifier,
    check_float,
    check_int,
    check_model_memory,
    core_examples,
)

if TYPE_CHECKING:
    from typing import Self

    from vastml._typing import ArrayLike, RandomState

KERNELS = ("rbf", "exponential", "poly", "linear", "sigmoid")
MAINTENANCE = ("merge", "remove", "remove-random", "project")


def kernel_args(kernel: str, gamma: float, degree: int, coef0: float) -> dict[str, Any]:
    """A kernel as the core reads it (``rbf``'s width ``gamma``, ``poly``'s ``degree`` and
    ``coef0``; the sigmoid's slope is ``gamma``)."""
    return {"kernel": kernel, "gamma": float(gamma), "degree": int(degree), "coef0": float(coef0)}


def kernel_gamma(gamma, n_features):
    """``gamma`` or its default 1/(2 n_features) (BudgetedSVM's 1/D in its exp(-g/2 d^2))."""
    if gamma is None:
        return 1.0 / (2.0 * n_features)
    return check_float(gamma, "gamma", low=0, low_open=True)


class BSGDClassifier(BudgetedClassifier):
    r"""Budgeted stochastic gradient descent: a multi-class kernel SVM with at most ``budget``
    support vectors (Wang, Crammer & Vucetic 2012; Djuric's thesis ch. 5).

    :math:`g(i, x) = \sum_j \alpha_{ij} k(x, z_j)`, prediction :math:`\arg\max_i g(i, x)`. Each
    step is a kernelised multi-class Pegasos step (:math:`\eta = 1/(\lambda t)`); when a new
    support vector exceeds the budget, two are merged (``maintenance="merge"``, Gaussian kernel:
    the merge point is found by golden-section search), one is removed (``"remove"``: the one
    with the smallest :math:`\lVert\alpha_j\rVert^2 k(z_j, z_j)`; ``"remove-random"``), or the
    smallest is removed and its contribution projected onto the span of the others
    (``"project"``, any kernel, :math:`O(B^2)` per maintenance step: the inverse of the SVs'
    kernel matrix is updated by bordering and downdating, and recomputed every B steps).

    Kernels use scikit-learn's widths: ``rbf`` is :math:`\exp(-\gamma\lVert x-y\rVert^2)`.
    BudgetedSVM's ``-g g`` is ``gamma = g / 2`` here.

    Parameters
    ----------
    l2_penalty : float, default=1e-4
        Regularisation :math:`\lambda > 0` (``-L``).
    budget : int, default=100
        Maximum number of support vectors :math:`B` (``-B``); kept exactly.
    maintenance : {"merge", "remove", "remove-random", "project"}, default="merge"
    kernel : {"rbf", "exponential", "poly", "linear", "sigmoid"}, default="rbf"
    gamma : float or None, default=None
        Kernel width; None means ``1 / (2 n_features)``. Slope of the sigmoid kernel.
    degree : int, default=2
        Polynomial degree.
    coef0 : float, default=1.0
        Offset of the polynomial and sigmoid kernels.
    max_iter : int, default=5
        Passes over the data (``-e``).
    shuffle, random_state, verbose, n_jobs, callbacks, callback_every
        As in :class:`~vastml.svm.AMMClassifier`; the state passed to the callbacks after
        every pass is the number of support vectors (``n_weights_``), the objective ``nan``.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    support_vectors_ : ndarray of shape (n_support, n_features)
    dual_coef_ : ndarray of shape (n_support, n_classes)
        :math:`\alpha_{ij}`.
    n_weights_ : int
        Number of support vectors (the model size).
    n_iter_, stopped_early_, t_, n_features_in_

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.svm import BSGDClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(2000, 2))
    >>> y = (X ** 2).sum(1) < 0.5                          # a disc: not linear
    >>> clf = BSGDClassifier(l2_penalty=1e-4, budget=30, gamma=2.0, random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.95), clf.support_vectors_.shape[0] <= 30
    (True, True)
    """

    def __init__(
        self,
        *,
        l2_penalty: float = 1e-4,
        budget: int = 100,
        maintenance: str = "merge",
        kernel: str = "rbf",
        gamma: float | None = None,
        degree: int = 2,
        coef0: float = 1.0,
        max_iter: int = 5,
        shuffle: bool = True,
        random_state: RandomState = None,
        verbose: bool | int = False,
        n_jobs: int | None = None,
        callbacks: Any = None,
        callback_every: int = 1,
    ) -> None:
        self.l2_penalty = l2_penalty
        self.budget = budget
        self.maintenance = maintenance
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.max_iter = max_iter
        self.shuffle = shuffle
        self.random_state = random_state
        self.verbose = verbose
        self.n_jobs = n_jobs
        self.callbacks = callbacks
        self.callback_every = callback_every

    def _check_params(self):
        check_float(self.l2_penalty, "l2_penalty", low=0, low_open=True)
        check_int(self.budget, "budget", 1)
        choice(self.maintenance, "maintenance", MAINTENANCE)
        choice(self.kernel, "kernel", KERNELS)
        if self.maintenance == "merge" and self.kernel != "rbf":
            raise ValueError("`maintenance='merge'` needs `kernel='rbf'`")
        check_float(self.gamma, "gamma", low=0, low_open=True, allow_none=True)
        check_int(self.degree, "degree", 1)
        check_float(self.coef0, "coef0")
        check_int(self.max_iter, "max_iter", 1)
        self._n_jobs()

    def _args(self, n_features):
        return dict(
            l2_penalty=float(self.l2_penalty),
            budget=int(self.budget),
            maintenance=self.maintenance,
            kernel=kernel_args(self.kernel, kernel_gamma(self.gamma, n_features), self.degree, self.coef0),
        )

    def _check_memory(self, n_features, n_classes):
        check_model_memory(n_features, int(self.budget) + 2, "budget")

    def _new_model(self, n_features, n_classes):
        return _core.BsgdModel(n_features, n_classes, self._args(n_features))

    def _store(self, model):
        self.support_vectors_ = model.support_vectors
        self.dual_coef_ = model.alphas
        self.n_weights_ = int(self.support_vectors_.shape[0])
        self.t_ = int(model.steps)

    def _model(self):
        return _core.BsgdModel(
            self.n_features_in_,
            len(self.classes_),
            self._args(self.n_features_in_),
            support_vectors=np.ascontiguousarray(self.support_vectors_, dtype=np.float64),
            alphas=np.ascontiguousarray(self.dual_coef_, dtype=np.float64),
            steps=int(self.t_),
        )

    def _decision_matrix(self, Xc):
        return self._model().decision_function(Xc, n_jobs=self._n_jobs())

    def partial_fit(self, X: ArrayLike, y: ArrayLike, classes: ArrayLike | None = None) -> Self:
        """One more SGD pass over ``X``; ``classes`` is required on the first call.

        Returns
        -------
        self
        """
        model, Xv, y, _ = self._partial_fit_model(X, y, classes)
        seed = int(np.random.default_rng(getattr(self, "t_", 0)).integers(2**62))
        model.epoch(core_examples(Xv), self._encode(y), shuffle=bool(self.shuffle), seed=seed)
        self.n_iter_ += 1
        self._store(model)
        return self
