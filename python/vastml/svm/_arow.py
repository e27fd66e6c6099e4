"""AROW (adaptive regularisation of weight vectors), binary and one-vs-rest."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp
from scipy.special import ndtr

from vastml import _core
from vastml._validation import choice
from vastml.svm._base import BudgetedClassifier, check_float, check_int, core_examples

if TYPE_CHECKING:
    from typing import Self

    from vastml._progress import Progress
    from vastml._typing import ArrayLike, FloatArray, RandomState

#: AROW is a single-pass learner: it reports this many times per pass (chunks of examples).
CHUNKS_PER_PASS = 100


class AROWClassifier(BudgetedClassifier):
    r"""AROW: online learning of a Gaussian over weight vectors (Crammer, Kulesza & Dredze
    2009; Djuric's thesis ch. 6).

    From :math:`\mu = 0, \Sigma = I`, each example :math:`(x, y)`, :math:`y = \pm 1`, with margin
    :math:`m = y\mu^\top x < 1` updates :math:`\beta = 1/(x^\top\Sigma x + r)`,
    :math:`\alpha = \beta(1 - m)`, :math:`\mu \mathrel{+}= \alpha y \Sigma x`,
    :math:`\Sigma \mathrel{-}= \beta \Sigma x x^\top \Sigma`. ``covariance="diagonal"`` keeps only
    the diagonal of that update, :math:`s_j \mathrel{-}= \beta s_j^2 x_j^2`, for high-dimensional
    sparse data. Binary directly; one-vs-rest (in parallel, ``n_jobs``) for more classes.

    The model is accessible and constructible as arrays (``mean_``, ``covariance_``; see
    :meth:`from_model`), e.g. for a MapReduce combination of models trained on shards.

    Parameters
    ----------
    update_damping : float, default=1.0
        The paper's :math:`r = 1/(2\lambda_1) > 0`: it is added to the example's variance in
        :math:`\beta = 1/(x^\top\Sigma x + r)`, so it damps every update (larger: smaller,
        more conservative steps).
    covariance : {"full", "diagonal"}, default="full"
    update_on : {"margin", "mistake"}, default="margin"
        Update when the margin is below 1 (the AROW paper), or only on mistakes.
    bias : float, default=1.0
        Constant bias feature appended to every example (0: none). It is the last
        coordinate of ``mean_`` and ``covariance_``.
    max_iter : int, default=1
        Passes over the data.
    shuffle, random_state, verbose, n_jobs
        As in :class:`~vastml.svm.AMMClassifier`.
    callbacks : callable, list of callables or None, default=None
        AROW is a single-pass learner, so it reports per chunk of examples: every pass is cut
        into 100 chunks of consecutive examples (fewer for under 100 examples) and the callbacks
        are called as ``callback(iteration, objective, state)`` after every
        ``callback_every`` chunks (``iteration`` counts chunks over all passes, from 1).
        ``objective`` is ``nan`` (AROW minimises no objective over the data), ``state`` the
        number of updates made so far (all models). Returning True stops the fit cleanly
        after that chunk: the model holds the examples seen and ``stopped_early_`` is True.
        The chunks do not change the result.
    callback_every : int, default=1

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    mean_ : ndarray of shape (n_models, n_features + 1)
        :math:`\mu` of every model: one row for two classes (positive = ``classes_[1]``),
        else one per class (one-vs-rest).
    covariance_ : ndarray of shape (n_models, n_features + 1, n_features + 1) or (n_models, n_features + 1)
        :math:`\Sigma` of every model (its diagonal when ``covariance="diagonal"``).
    n_updates_ : ndarray of shape (n_models,)
        Updates made by the last fit / partial_fit.
    n_iter_ : int
        Passes made by the last fit (a pass cut short by a callback counts).
    stopped_early_ : bool
        Whether a callback stopped the last fit.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.svm import AROWClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(1000, 5))
    >>> y = np.where(X @ np.arange(1, 6) + 0.1 * rng.normal(size=1000) > 0, "pos", "neg")
    >>> clf = AROWClassifier(random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.95), clf.mean_.shape, clf.covariance_.shape
    (True, (1, 6), (1, 6, 6))
    """

    mean_: FloatArray
    covariance_: FloatArray

    def __init__(
        self,
        *,
        update_damping: float = 1.0,
        covariance: str = "full",
        update_on: str = "margin",
        bias: float = 1.0,
        max_iter: int = 1,
        shuffle: bool = True,
        random_state: RandomState = None,
        verbose: bool | int = False,
        n_jobs: int | None = None,
        callbacks: Any = None,
        callback_every: int = 1,
    ) -> None:
        self.update_damping = update_damping
        self.covariance = covariance
        self.update_on = update_on
        self.bias = bias
        self.max_iter = max_iter
        self.shuffle = shuffle
        self.random_state = random_state
        self.verbose = verbose
        self.n_jobs = n_jobs
        self.callbacks = callbacks
        self.callback_every = callback_every

    def _check_params(self):
        check_float(self.update_damping, "update_damping", low=0, low_open=True)
        choice(self.covariance, "covariance", ("full", "diagonal"))
        choice(self.update_on, "update_on", ("margin", "mistake"))
        check_float(self.bias, "bias")
        check_int(self.max_iter, "max_iter", 1)
        self._n_jobs()

    @classmethod
    def from_model(cls, mean: ArrayLike, sigma: ArrayLike, classes: ArrayLike, **params: Any) -> Self:
        r"""An AROW classifier from model arrays (e.g. combined from shard models).

        Parameters
        ----------
        mean : array of shape (n_models, n_features + 1)
            :math:`\mu` of every one-vs-rest model (one model for two classes).
        sigma : array of shape (n_models, n_features + 1, n_features + 1) or (n_models, n_features + 1)
            :math:`\Sigma` of every model, full or its diagonal. (Named ``sigma`` so that
            ``covariance=`` keeps meaning the estimator parameter.)
        classes : array-like
            The class labels.
        **params
            Estimator parameters. ``covariance`` is inferred from ``sigma``'s shape; passing it
            is allowed but it must agree.

        Examples
        --------
        >>> import numpy as np
        >>> clf = AROWClassifier.from_model(np.array([[1.0, 0.0]]), np.ones((1, 2)), [0, 1])
        >>> clf.covariance, clf.predict(np.array([[2.0], [-2.0]])).tolist()
        ('diagonal', [1, 0])
        """
        mean = np.atleast_2d(np.asarray(mean, dtype=np.float64))
        cov = np.asarray(sigma, dtype=np.float64)
        classes = np.asarray(classes)
        n_models = 1 if len(classes) == 2 else len(classes)
        if len(classes) < 2 or mean.shape[0] != n_models:
            raise ValueError(f"`mean` must have {n_models} rows for {len(classes)} classes, got {mean.shape[0]}")
        w = mean.shape[1]
        if cov.shape == (n_models, w):
            kind = "diagonal"
        elif cov.shape == (n_models, w, w):
            kind = "full"
        else:
            raise ValueError(f"`sigma` must have shape ({n_models}, {w}, {w}) or ({n_models}, {w}), got {cov.shape}")
        if params.setdefault("covariance", kind) != kind:
            raise ValueError(
                f"`covariance={params['covariance']!r}` disagrees with `sigma` of shape {cov.shape} ({kind!r})"
            )
        if not (np.isfinite(mean).all() and np.isfinite(cov).all()):
            raise ValueError("`mean` and `sigma` must be finite")
        est = cls(**params)
        est._check_params()
        est.classes_ = np.unique(classes)
        est.mean_ = np.ascontiguousarray(mean)
        est.covariance_ = np.ascontiguousarray(cov)
        est.n_features_in_ = w - 1
        est.n_iter_ = 0
        est.n_updates_ = np.zeros(n_models, dtype=np.int64)
        return est

    def _models(self):
        return np.array([1], dtype=np.int64) if len(self.classes_) == 2 else np.arange(len(self.classes_), dtype=np.int64)

    def _fresh(self, d):
        k = len(self._models())
        mean = np.zeros((k, d + 1))
        if self.covariance == "diagonal":
            cov = np.ones((k, d + 1))
        else:
            cov = np.repeat(np.eye(d + 1)[None], k, axis=0)
        return mean, cov

    def _passes(self, X: Any, codes: Any, seeds: list[int], progress: Progress | None) -> tuple[int, bool]:
        """AROW passes (one per seed) in Rust; returns (chunks made, stopped by a callback)."""
        params = {
            "classes": [int(c) for c in self._models()],
            "update_damping": float(self.update_damping),
            "bias": float(self.bias),
            "diagonal": self.covariance == "diagonal",
            "update_on": self.update_on,
            "shuffle": bool(self.shuffle),
            "seeds": seeds,
        }
        model = (np.ascontiguousarray(self.mean_), np.ascontiguousarray(self.covariance_))
        report = progress.report if progress is not None and progress.active else None
        mean, cov, upd, chunks, stopped = _core.arow_fit(
            core_examples(X), codes, model, params, report, n_jobs=self._n_jobs()
        )
        self.mean_, self.covariance_ = mean, cov
        self.n_updates_ = np.asarray(upd, dtype=np.int64)
        return int(chunks), bool(stopped)

    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Train from scratch (``max_iter`` passes).

        Returns
        -------
        self
        """
        self._check_params()
        Xv, y = self._fit_data(X, y, reset=True)
        self._set_classes(y)
        codes = self._encode(y)
        self.mean_, self.covariance_ = self._fresh(Xv.shape[1])
        passes = int(self.max_iter)
        per_pass = _chunks_per_pass(Xv.shape[0])
        with self._progress(passes * per_pass) as progress:
            chunks, stopped = self._passes(Xv, codes, self._seeds(passes), progress)
        self.n_iter_ = math.ceil(chunks / per_pass)
        self.stopped_early_ = stopped
        return self

    def partial_fit(self, X: ArrayLike, y: ArrayLike, classes: ArrayLike | None = None) -> Self:
        """One more pass over ``X``; ``classes`` is required on the first call.

        Returns
        -------
        self
        """
        Xv, y, first = self._partial_fit_data(X, y, classes)
        if first:
            self.mean_, self.covariance_ = self._fresh(Xv.shape[1])
        codes = self._encode(y)
        seed = int(np.random.default_rng(int(self.n_iter_) + int(codes.sum())).integers(2**62))
        self._passes(Xv, codes, [seed], None)
        self.n_iter_ += 1
        return self

    def _margins(self, X):
        d = self.n_features_in_
        W = self.mean_[:, :d]
        s = X @ W.T
        return np.asarray(s) + float(self.bias) * self.mean_[:, d]

    def _decision_matrix(self, X):
        s = self._margins(X)
        if len(self.classes_) == 2:
            return np.column_stack([-s[:, 0] / 2, s[:, 0] / 2])
        return s

    def _predict_data(self, X):
        from sklearn.utils.validation import check_is_fitted, validate_data

        check_is_fitted(self)
        return validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False, order="C")

    def margin_probability(self, X: ArrayLike) -> FloatArray:
        r"""Probability, under the Gaussian over weights, that the margin is positive (eq. 6.2).

        :math:`P(w^\top x > 0) = \Phi(\mu^\top x / \sqrt{x^\top\Sigma x})` for every model.
        It is a confidence, not a calibrated class probability (two rows with the same
        ``decision_function`` can differ in variance), so it is not offered as
        ``predict_proba``.

        Returns
        -------
        p : ndarray of shape (n_samples, n_models)
            One column per model: a single column (for ``classes_[1]``) with two classes.
        """
        Xv = self._predict_data(X)
        m = self._margins(Xv)
        Xb = sp.hstack([sp.csr_matrix(Xv), np.full((Xv.shape[0], 1), float(self.bias))]).tocsr()
        var = np.empty_like(m)
        for k in range(m.shape[1]):
            if self.covariance_.ndim == 2:
                var[:, k] = np.asarray(Xb.multiply(Xb) @ self.covariance_[k]).ravel()
            else:
                var[:, k] = np.asarray(Xb.multiply(np.asarray(Xb @ self.covariance_[k])).sum(axis=1)).ravel()
        return ndtr(m / np.sqrt(np.maximum(var, 1e-300)))


def _chunks_per_pass(n: int) -> int:
    """The chunks a pass over ``n`` examples is cut into (as the core cuts it)."""
    size = max(1, -(-n // CHUNKS_PER_PASS))
    return -(-n // size)
