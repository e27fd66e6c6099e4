"""AMM, online AMM, GAMM and multi-class Pegasos over the Rust trainer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from vastml import _core
from vastml._validation import MAX_MAGNITUDE
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


class AMMClassifier(BudgetedClassifier):
    r"""Adaptive multi-hyperplane machine: a budgeted non-linear classifier trained by SGD.

    Every class owns up to ``max_weights_per_class`` weight vectors; the score of class i is
    :math:`g(i, x) = \max_j w_{ij}^\top x` and the prediction :math:`\arg\max_i g(i, x)`
    (Wang, Djuric, Crammer & Vucetic, KDD 2011; Djuric's thesis ch. 4). Training is SGD with
    step :math:`1/(\lambda t)` on the convex sub-problem with fixed assignments: batch AMM
    (``online=False``) runs one online pass and then ``max_iter`` epochs, re-assigning every
    example to its best-scoring true-class weight before each (``max_iter + 1`` passes, as
    BudgetedSVM 1.2's ``-A 1 -e max_iter``); online AMM (``online=True``) assigns at every step
    (``max_iter`` passes). Small weights are pruned every ``prune_every``
    steps (removed set's norm at most :math:`c / ((t-1)\lambda)`). With ``clone_probability > 0``
    this is GAMM (thesis Algorithm 6): on a positive loss, while the class is below its budget,
    the assigned true-class weight is cloned with that probability (which then decays by
    ``clone_decay``; clones count against the budget), letting the model grow where one
    hyperplane is not enough.

    Batch AMM follows one of two rule sets (``variant``):

    - ``"budgetedsvm"`` (default): BudgetedSVM 1.2's ``trainAMMbatch`` line by line. Every
      class starts with one stored zero weight and only stored weights compete; step
      :math:`1/(\lambda (t+1))`; in the initial pass a true-class weight is updated only if it
      scores > 0 (otherwise the example becomes a new weight while there is room), and every
      example is assigned to its best true-class weight *before* its step: those assignments
      are the first epoch's, re-assignment follows every later epoch but the last. A clone is
      a copy of the assigned weight (which must score > 0) taken before the update; the
      original keeps the update and its examples, the copy gets examples from the next
      re-assignment. No pruning in the initial pass.
    - ``"thesis"``: the thesis's conventions (below). The copy takes the step's update, an
      example assigned to a weight cloned during the epoch goes to the best-scoring member of
      that weight's family until the next re-assignment, and every batch epoch starts with a
      re-assignment. Needed for the thesis's checkerboard result (Table 4.5).

    Online AMM (``online=True``) always uses the thesis rules; ``partial_fit`` makes an online
    pass with the estimator's rules.

    Thesis rules: each class also owns a reserved zero weight that scores 0 while the class is
    below its budget, so class scores are then never negative; it turns into a new weight when
    it wins.

    Parameters
    ----------
    l2_penalty : float, default=1e-4
        Regularisation :math:`\lambda > 0` (BudgetedSVM's ``-L``).
    max_iter : int, default=5
        Epochs (``-e``): batch AMM makes ``max_iter + 1`` passes (the initial online pass,
        then ``max_iter`` with fixed assignments), online AMM ``max_iter``.
    online : bool, default=False
        Online AMM (``-A 2``) instead of batch AMM (``-A 1``).
    max_weights_per_class : int, default=50
        Budget of weights per class, :math:`B_{lim}` (``-B``). 1 gives multi-class Pegasos.
    prune_every : int, default=10000
        Pruning period :math:`k` (``-k``); 0 disables pruning.
    prune_c : float, default=10.0
        Pruning aggressiveness :math:`c \ge 0` (``-c``).
    bias : float, default=1.0
        Value of the constant bias feature (``-b``); 0 for no bias term. At most 1e150 in
        magnitude (a larger feature overflows the scores).
    clone_probability : float, default=0.0
        GAMM's cloning probability :math:`p` (the thesis uses 0.2); 0 is plain AMM.
    clone_decay : float, default=0.99
        GAMM's decay :math:`\beta` of the cloning probability after each clone.
    variant : {"budgetedsvm", "thesis"}, default="budgetedsvm"
        Rules of batch AMM / GAMM (see above); ignored when ``online=True``.
    shuffle : bool, default=True
        Shuffle the examples every epoch.
    random_state : int, RandomState or None, default=None
        Seeds the shuffles and the cloning draws.
    verbose : bool or int, default=False
        Draw a progress bar over the passes (see :mod:`vastml._progress`).
    callbacks : callable, list of callables or None, default=None
        Called as ``callback(iteration, objective, state)`` after every ``callback_every``
        passes over the data (``iteration`` = passes made, from 1). ``objective`` is ``nan``
        (the training objective would cost one more pass), ``state`` the current model size
        (number of weights, ``n_weights_``). Returning True stops the fit cleanly after that
        pass: the model keeps the passes made and ``stopped_early_`` is True.
    callback_every : int, default=1
    n_jobs : int or None, default=None
        Threads for prediction (training SGD is sequential).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    weights_ : ndarray of shape (n_weights, n_features + 1)
        Every weight vector, bias weight last.
    weight_class_ : ndarray of shape (n_weights,)
        Index into ``classes_`` of every weight.
    n_weights_ : int
        Number of weights (the model size; reserved zero weights not counted).
    n_iter_ : int
        Passes over the data made by the last ``fit`` (``partial_fit`` adds one each).
    stopped_early_ : bool
        Whether a callback stopped the last ``fit``.
    t_ : int
        SGD steps taken.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.svm import AMMClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(2000, 2))
    >>> y = np.where(X[:, 0] * X[:, 1] > 0, "same", "diff")   # XOR: not linear
    >>> clf = AMMClassifier(l2_penalty=1e-3, max_iter=10, random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.9), clf.n_weights_ > 2
    (True, True)
    """

    def __init__(
        self,
        *,
        l2_penalty: float = 1e-4,
        max_iter: int = 5,
        online: bool = False,
        max_weights_per_class: int = 50,
        prune_every: int = 10000,
        prune_c: float = 10.0,
        bias: float = 1.0,
        clone_probability: float = 0.0,
        clone_decay: float = 0.99,
        variant: str = "budgetedsvm",
        shuffle: bool = True,
        random_state: RandomState = None,
        verbose: bool | int = False,
        n_jobs: int | None = None,
        callbacks: Any = None,
        callback_every: int = 1,
    ) -> None:
        self.l2_penalty = l2_penalty
        self.max_iter = max_iter
        self.online = online
        self.max_weights_per_class = max_weights_per_class
        self.prune_every = prune_every
        self.prune_c = prune_c
        self.bias = bias
        self.clone_probability = clone_probability
        self.clone_decay = clone_decay
        self.variant = variant
        self.shuffle = shuffle
        self.random_state = random_state
        self.verbose = verbose
        self.n_jobs = n_jobs
        self.callbacks = callbacks
        self.callback_every = callback_every

    def _budgetedsvm(self):
        return not self._is_online() and self.variant == "budgetedsvm"

    # parameters of the Rust model, checked
    def _amm_args(self):
        if self.variant not in ("budgetedsvm", "thesis"):
            raise ValueError(f"variant must be 'budgetedsvm' or 'thesis', got {self.variant!r}")
        return dict(
            l2_penalty=check_float(self.l2_penalty, "l2_penalty", low=0, low_open=True),
            max_weights_per_class=check_int(self.max_weights_per_class, "max_weights_per_class", 1),
            prune_every=check_int(self.prune_every, "prune_every", 0),
            prune_c=check_float(self.prune_c, "prune_c", low=0),
            bias=check_float(self.bias, "bias", low=-MAX_MAGNITUDE, high=MAX_MAGNITUDE),
            clone_probability=check_float(self.clone_probability, "clone_probability", low=0, high=1),
            clone_decay=check_float(self.clone_decay, "clone_decay", low=0, high=1),
            budgetedsvm=self._budgetedsvm(),
        )

    def _check_params(self):
        self._amm_args()
        check_int(self.max_iter, "max_iter", 1)
        self._n_jobs()

    def _is_online(self):
        return bool(self.online)

    def _check_memory(self, n_features, n_classes):
        check_model_memory(n_features, (int(self.max_weights_per_class) + 1) * n_classes,
                           "max_weights_per_class")

    def _n_passes(self) -> int:
        # Batch AMM: the initial online pass, then max_iter epochs with fixed assignments, as
        # BudgetedSVM 1.2's trainAMMbatch does for -e max_iter (so -A 1 -e 5 is 6 passes).
        return int(self.max_iter) + (0 if self._is_online() else 1)

    def _schedule(self, seeds: list[int]) -> dict[str, Any]:
        return {"seeds": seeds, "shuffle": bool(self.shuffle), "online": self._is_online()}

    def _new_model(self, n_features, n_classes):
        return _core.AmmModel(n_features, n_classes, self._amm_args())

    def _store(self, model):
        self.weights_ = model.weights
        self.weight_class_ = model.weight_class
        self.n_weights_ = int(self.weight_class_.shape[0])
        self.t_ = int(model.steps)
        self.clone_probability_ = float(model.clone_probability)

    def _model(self):
        args = self._amm_args()
        m = _core.AmmModel(
            self.n_features_in_,
            len(self.classes_),
            args,
            weights=np.ascontiguousarray(self.weights_, dtype=np.float64),
            weight_class=np.ascontiguousarray(self.weight_class_, dtype=np.int64),
            steps=int(self.t_),
        )
        m.set_clone_probability(self.clone_probability_)
        return m

    def _decision_matrix(self, Xc):
        return self._model().decision_function(Xc, n_jobs=self._n_jobs())

    def partial_fit(self, X: ArrayLike, y: ArrayLike, classes: ArrayLike | None = None) -> Self:
        """One online pass over ``X`` (assignments by argmax), continuing the model.

        ``classes`` (all labels that will ever appear) is required on the first call.

        Returns
        -------
        self
        """
        model, Xv, y, first = self._partial_fit_model(X, y, classes)
        codes = self._encode(y)
        seed = self._seeds(1)[0] if first else int(np.random.default_rng(self.t_).integers(2**62))
        model.epoch(core_examples(Xv), codes, shuffle=bool(self.shuffle), seed=seed)
        self.n_iter_ += 1
        self._store(model)
        return self


class PegasosClassifier(AMMClassifier):
    r"""Multi-class (Crammer-Singer) linear SVM trained by Pegasos SGD.

    One weight per class, :math:`\arg\max_i w_i^\top x`, step :math:`1/(\lambda t)`; the
    shortcut BudgetedSVM offers as ``-A 0``. Exactly :class:`AMMClassifier` with
    ``max_weights_per_class=1``.

    Parameters
    ----------
    l2_penalty : float, default=1e-4
        Regularisation :math:`\lambda > 0`.
    max_iter : int, default=5
        Passes over the data (``-e``).
    bias : float, default=1.0
        Constant bias feature (regularised like the weights); 0 for none. At most 1e150 in
        magnitude (a larger feature overflows the scores).
    shuffle, random_state, verbose, n_jobs, callbacks, callback_every
        As in :class:`AMMClassifier` (the state passed to the callbacks is the number of
        classes: Pegasos keeps one weight per class).

    Attributes
    ----------
    classes_, weights_, weight_class_, n_weights_, n_iter_, stopped_early_, t_, n_features_in_
        As in :class:`AMMClassifier`; ``weights_`` has one row per class.
    coef_ : ndarray of shape (n_classes, n_features)
    intercept_ : ndarray of shape (n_classes,)
        The bias weight times ``bias``.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.svm import PegasosClassifier
    >>> rng = np.random.default_rng(0)
    >>> Xv = rng.normal(size=(600, 3))
    >>> y = np.argmax(Xv @ rng.normal(size=(3, 3)), axis=1)
    >>> clf = PegasosClassifier(l2_penalty=1e-3, random_state=0).fit(Xv, y)
    >>> bool(clf.score(Xv, y) > 0.9), clf.coef_.shape
    (True, (3, 3))
    """

    def __init__(
        self,
        *,
        l2_penalty: float = 1e-4,
        max_iter: int = 5,
        bias: float = 1.0,
        shuffle: bool = True,
        random_state: RandomState = None,
        verbose: bool | int = False,
        n_jobs: int | None = None,
        callbacks: Any = None,
        callback_every: int = 1,
    ) -> None:
        self.l2_penalty = l2_penalty
        self.max_iter = max_iter
        self.bias = bias
        self.shuffle = shuffle
        self.random_state = random_state
        self.verbose = verbose
        self.n_jobs = n_jobs
        self.callbacks = callbacks
        self.callback_every = callback_every

    def _amm_args(self):
        return dict(
            l2_penalty=check_float(self.l2_penalty, "l2_penalty", low=0, low_open=True),
            max_weights_per_class=1,
            prune_every=0,
            prune_c=0.0,
            bias=check_float(self.bias, "bias", low=-MAX_MAGNITUDE, high=MAX_MAGNITUDE),
            clone_probability=0.0,
            clone_decay=0.99,
            budgetedsvm=False,
        )

    def _is_online(self):
        return True

    def _check_memory(self, n_features, n_classes):
        check_model_memory(n_features, n_classes, "n_classes")

    def _store(self, model):
        super()._store(model)
        order = np.argsort(self.weight_class_, kind="stable")
        self.coef_ = self.weights_[order, :-1]
        self.intercept_ = self.weights_[order, -1] * float(self.bias)
