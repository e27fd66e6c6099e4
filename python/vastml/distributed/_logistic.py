"""Distributed logistic regression, the thesis's baseline (sec. 6.5): averaging or AllReduce."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize
from scipy.special import expit, log_expit
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from vastml._progress import Progress, check_callback_every, check_callbacks
from vastml._validation import choice
from vastml.distributed._partitions import (
    _dask,
    as_block,
    check_n_partitions,
    compute,
    is_local,
    row_partitions,
    validate_local,
)
from vastml.svm._base import check_float, check_int


if TYPE_CHECKING:
    from typing import Any, Self

    from vastml._typing import ArrayLike, RandomState


def _prepare(X, y, classes):
    X, y = as_block(X, y)
    if X is None:
        return np.zeros((0, 0)), np.zeros(0)
    if not np.all(np.isin(y, classes)):
        raise ValueError(f"`y` has labels not in {classes.tolist()}")
    return X, np.where(y == classes[1], 1.0, -1.0)


def _unique(X, y):
    labels = as_block(X, y)[1]
    return np.unique(labels) if labels is not None else np.array([])


def _n_rows_features(block):
    return block[0].shape


def _loss_grad(block, w, b):
    """Sum over one partition of the log-loss and its gradient (w, b)."""
    X, y = block
    if X.shape[0] == 0:
        return 0.0, np.zeros_like(w), 0.0
    m = y * (np.asarray(X @ w).ravel() + b)
    loss = -log_expit(m).sum()
    r = -y * expit(-m)  # d loss / d score
    g = np.asarray(X.T @ r).ravel()
    return float(loss), g, float(r.sum())


def _add(a, b):
    return a[0] + b[0], a[1] + b[1], a[2] + b[2]


def _tree_sum(parts):
    """AllReduce's aggregation: pairwise sums up a binary tree (as Dask tasks)."""
    dask, _ = _dask()
    while len(parts) > 1:
        nxt = [dask.delayed(_add, pure=True)(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
        if len(parts) % 2:
            nxt.append(parts[-1])
        parts = nxt
    return parts[0]


def _sgd_pass(block, w, b, alpha, fit_intercept, eta, batch_size, seed):
    """One shuffled mini-batch SGD pass over a partition, from (w, b)."""
    X, y = block
    n = X.shape[0]
    w = w.copy()
    if n == 0:
        return w, b, 0
    order = np.random.default_rng(seed).permutation(n)
    for start in range(0, n, batch_size):
        idx = np.sort(order[start : start + batch_size])
        Xb, yb = X[idx], y[idx]
        m = yb * (np.asarray(Xb @ w).ravel() + b)
        r = -yb * expit(-m)
        w -= eta * (np.asarray(Xb.T @ r).ravel() / len(idx) + alpha * w)
        if fit_intercept:
            b -= eta * r.mean()
    return w, b, n


class DistributedLogisticRegression(ClassifierMixin, BaseEstimator):
    r"""Binary logistic regression on partitions of a Dask collection (thesis sec. 6.5 baseline).

    Minimises :math:`\frac1n\sum_i \log(1 + e^{-y_i(w^\top x_i + b)}) + \frac\lambda2\lVert w\rVert^2`
    (the intercept is not penalised; :math:`\lambda` = ``l2_penalty``), the objective of
    scikit-learn's ``LogisticRegression`` with :math:`C = 1/(\lambda n)`.

    - ``method="averaging"``: every pass, each partition runs shuffled mini-batch SGD from the
      current model and the driver averages the models weighted by partition size
      (parameter mixing, one round of communication per pass).
    - ``method="allreduce"``: L-BFGS on the full-batch objective; every evaluation sums the
      partitions' losses and gradients up a binary tree of Dask tasks (Agarwal et al.
      2011's AllReduce), the partitions staying in the workers' memory between rounds.

    Parameters
    ----------
    method : {"averaging", "allreduce"}, default="allreduce"
    l2_penalty : float, default=1e-4
        L2 penalty :math:`\lambda \ge 0` on the weights.
    fit_intercept : bool, default=True
    max_iter : int, default=100
        Passes (averaging) or L-BFGS iterations (allreduce).
    tol : float, default=1e-6
        L-BFGS gradient tolerance (allreduce).
    learning_rate : float, default=0.1
        SGD step :math:`\eta_0`; pass t uses :math:`\eta_0/\sqrt{t+1}` (averaging).
    batch_size : int, default=16
        SGD mini-batch (averaging).
    n_partitions, client, random_state
        As in :class:`AROWMapReduce`.
    verbose : bool or int, default=False
        Draw a progress bar over the rounds (see :mod:`vastml._progress`).
    callbacks : callable, list of callables or None, default=None
        Called as ``callback(iteration, objective, state)`` after every ``callback_every``
        rounds of communication: ``"averaging"`` reports every averaged pass with ``objective``
        ``nan`` (it would cost one more pass), ``"allreduce"`` every L-BFGS iteration with the
        objective above (computed anyway). ``state`` is the current weight vector
        :math:`w` (a copy; the intercept is not included). Returning True stops the fit
        cleanly with the model of that round and sets ``stopped_early_``.
    callback_every : int, default=1

    Attributes
    ----------
    classes_, coef_ (1, n_features), intercept_ (1,), n_iter_, n_features_in_
    stopped_early_ : bool
        Whether a callback stopped the fit.
    partition_sizes_ : ndarray
    fit_time_ : float

    Notes
    -----
    Binary only (two classes): scikit-learn's estimator checks run with its binary tag.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.distributed import DistributedLogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(1000, 3)); y = (X @ [1.0, -1.0, 0.5] > 0).astype(int)
    >>> lr = DistributedLogisticRegression(n_partitions=4).fit(X, y)
    >>> bool(lr.score(X, y) > 0.95)
    True
    """

    def __init__(
        self,
        *,
        method: str = "allreduce",
        l2_penalty: float = 1e-4,
        fit_intercept: bool = True,
        max_iter: int = 100,
        tol: float = 1e-6,
        learning_rate: float = 0.1,
        batch_size: int = 16,
        n_partitions: int | None = None,
        client: Any = None,
        random_state: RandomState = None,
        verbose: bool | int = False,
        callbacks: Any = None,
        callback_every: int = 1,
    ) -> None:
        self.method = method
        self.l2_penalty = l2_penalty
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.n_partitions = n_partitions
        self.client = client
        self.random_state = random_state
        self.verbose = verbose
        self.callbacks = callbacks
        self.callback_every = callback_every

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # CSR blocks and local scipy.sparse, never densified
        tags.classifier_tags.multi_class = False  # binary (see Notes)
        return tags

    def _check_params(self):
        choice(self.method, "method", ("averaging", "allreduce"))
        check_float(self.l2_penalty, "l2_penalty", low=0)
        check_int(self.max_iter, "max_iter", 1)
        check_float(self.tol, "tol", low=0, low_open=True)
        check_float(self.learning_rate, "learning_rate", low=0, low_open=True)
        check_int(self.batch_size, "batch_size", 1)
        check_n_partitions(self.n_partitions)
        check_callbacks(self.callbacks)
        check_callback_every(self.callback_every)

    def _persist(self, tasks):
        dask, _ = _dask()
        if self.client is not None:
            return self.client.persist(tasks)
        return list(dask.persist(*tasks))

    def fit(self, X: Any, y: Any = None, classes: ArrayLike | None = None) -> Self:
        """Fit on the partitions of ``X``, ``y`` (the inputs of :meth:`AROWMapReduce.fit`).

        Returns
        -------
        self
        """
        dask, _ = _dask()
        self._check_params()
        t0 = time.perf_counter()
        if is_local(X):
            X, y = validate_local(self, X, y)
        parts = row_partitions(X, y, self.n_partitions, self.client)
        if classes is None:
            found = compute([dask.delayed(_unique)(a, b) for a, b in parts], self.client)
            classes = np.unique(np.concatenate([np.asarray(c) for c in found]))
        else:
            classes = np.unique(np.asarray(classes))
        if classes.shape[0] != 2:
            raise ValueError(
                "Only binary classification is supported: DistributedLogisticRegression needs "
                f"samples of exactly 2 classes; got {classes.shape[0]} class(es) ({classes.tolist()})"
            )
        blocks = self._persist([dask.delayed(_prepare, pure=True)(a, b, classes) for a, b in parts])
        shapes = compute([dask.delayed(_n_rows_features)(blk) for blk in blocks], self.client)
        sizes = np.array([s[0] for s in shapes], dtype=np.int64)
        n = int(sizes.sum())
        if n == 0:
            raise ValueError("all partitions are empty")
        d = max(s[1] for s in shapes)
        with Progress(self.callbacks, callback_every=self.callback_every, verbose=self.verbose,
                      total=int(self.max_iter), desc=type(self).__name__) as progress:
            if self.method == "allreduce":
                w, b = self._fit_allreduce(blocks, n, d, progress)
            else:
                w, b = self._fit_averaging(blocks, sizes, d, progress)
        self.stopped_early_ = progress.stopped
        self.classes_ = classes
        self.coef_ = w[None, :]
        self.intercept_ = np.array([b])
        self.n_features_in_ = d
        self.partition_sizes_ = sizes
        self.fit_time_ = time.perf_counter() - t0
        return self

    def _fit_allreduce(self, blocks, n, d, progress):
        dask, _ = _dask()
        alpha = float(self.l2_penalty)

        def objective(theta):
            w, b = theta[:d], theta[d] if self.fit_intercept else 0.0
            total = _tree_sum([dask.delayed(_loss_grad, pure=True)(blk, w, b) for blk in blocks])
            loss, gw, gb = compute([total], self.client)[0]
            f = loss / n + 0.5 * alpha * w @ w
            g = np.append(gw / n + alpha * w, gb / n if self.fit_intercept else 0.0)
            return f, g

        rounds = [0]
        stopped_at = []

        def report(intermediate_result):
            rounds[0] += 1
            x = intermediate_result.x
            if progress.report(rounds[0], float(intermediate_result.fun), x[:d].copy()):
                stopped_at.append(x.copy())
                raise StopIteration

        res = minimize(
            objective, np.zeros(d + 1), jac=True, method="L-BFGS-B",
            options={"maxiter": int(self.max_iter), "gtol": float(self.tol), "ftol": 1e-14},
            callback=report if progress.active else None,
        )
        x = stopped_at[0] if stopped_at else res.x
        self.n_iter_ = int(res.nit)
        return x[:d], float(x[d]) if self.fit_intercept else 0.0

    def _fit_averaging(self, blocks, sizes, d, progress):
        dask, _ = _dask()
        rng = check_random_state(self.random_state)
        w, b = np.zeros(d), 0.0
        p = sizes / sizes.sum()
        for t in range(int(self.max_iter)):
            eta = float(self.learning_rate) / np.sqrt(t + 1.0)
            seeds = rng.randint(0, 2**62, size=len(blocks), dtype=np.int64)
            tasks = [
                dask.delayed(_sgd_pass, pure=True)(
                    blk, w, b, float(self.l2_penalty), bool(self.fit_intercept), eta,
                    int(self.batch_size), int(s),
                )
                for blk, s in zip(blocks, seeds)
            ]
            models = compute(tasks, self.client)
            w = sum(pm * m[0] for pm, m in zip(p, models))
            b = float(sum(pm * m[1] for pm, m in zip(p, models)))
            self.n_iter_ = t + 1
            if progress.report(t + 1, float("nan"), np.array(w, dtype=np.float64)):
                break
        return w, b

    def decision_function(self, X: Any) -> Any:
        """Scores :math:`w^\\top x + b` (positive favours ``classes_[1]``)."""
        check_is_fitted(self, "coef_")
        if is_local(X):
            X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, order="C", reset=False)
        else:
            X = np.ascontiguousarray(X, dtype=np.float64)  # a Dask collection: computed here
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"`X` must have {self.n_features_in_} features, got shape {X.shape}")
        return np.asarray(X @ self.coef_[0]).ravel() + self.intercept_[0]

    def predict_proba(self, X: Any) -> Any:
        """Class probabilities, columns in the order of ``classes_``."""
        p = expit(self.decision_function(X))
        return np.column_stack([1 - p, p])

    def predict(self, X: Any) -> Any:
        """The most probable class."""
        check_is_fitted(self, "coef_")
        return self.classes_[(self.decision_function(X) > 0).astype(int)]
