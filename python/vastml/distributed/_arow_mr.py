"""AROW-MapReduce (Djuric's thesis, Algorithm 7) on Dask: AROW per partition, one reduce."""

from __future__ import annotations

import numbers
import time
from typing import TYPE_CHECKING

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from vastml._progress import Progress, check_callback_every, check_callbacks
from vastml.distributed._partitions import (
    _dask,
    as_block,
    check_n_partitions,
    compute,
    compute_reporting,
    is_dask_array,
    is_local,
    row_partitions,
    validate_local,
)
from vastml.distributed._reduce import arow_mr_reduce
from vastml.svm import AROWClassifier

if TYPE_CHECKING:
    from typing import Any, Self

    from vastml._typing import ArrayLike, FloatArray, RandomState

_SEED_MAX = 2**62


def _arow_params(est):
    return dict(
        update_damping=est.update_damping, covariance=est.covariance, update_on=est.update_on, bias=est.bias,
        max_iter=est.max_iter, shuffle=est.shuffle, n_jobs=est.n_jobs,
    )


def _without_cov(params):
    # from_model infers ``covariance`` from the array's shape (and takes the array by that name)
    return {k: v for k, v in params.items() if k != "covariance"}


def arow_map(X, y, classes, params, seed):
    """Mapper: AROW on one partition, for the global ``classes``.

    Returns ``(mean, covariance, n_rows)``; ``(None, None, 0)`` for an empty partition. A
    partition that lacks some classes still trains (its examples are all negatives for the
    missing classes) from the prior ``mean = 0, covariance = I``.
    """
    X, y = as_block(X, y)
    if X is None or X.shape[0] == 0:
        return None, None, 0
    params = dict(params, random_state=seed)
    present = np.unique(y)
    if present.shape == classes.shape and np.all(present == classes):
        est = AROWClassifier(**params).fit(X, y)
    else:
        d = X.shape[1] + 1
        k = 1 if len(classes) == 2 else len(classes)
        cov = np.ones((k, d)) if params["covariance"] == "diagonal" else np.repeat(np.eye(d)[None], k, 0)
        est = AROWClassifier.from_model(np.zeros((k, d)), cov, classes, **_without_cov(params))
        for _ in range(int(params["max_iter"])):
            est.partial_fit(X, y)
    return est.mean_, est.covariance_, int(X.shape[0])


def _unique(X, y):
    labels = as_block(X, y)[1]
    return np.unique(labels) if labels is not None else np.array([])


class AROWMapReduce(ClassifierMixin, BaseEstimator):
    r"""AROW-MapReduce: AROW on each partition of a Dask collection, combined in one reduce.

    Djuric's thesis, Algorithm 7 (sec. 6.4). Every partition :math:`D_m` trains an
    :class:`~vastml.svm.AROWClassifier` on a Dask worker (the mappers); the driver combines
    the M models :math:`N(\mu_m, \Sigma_m)` with :func:`arow_mr_reduce` (minimum expected
    symmetric KL, mixing weights :math:`p_m = |D_m|/|D|`). One pass over the data, one
    round of communication: mappers may fail and be re-run by Dask without changing the
    result (every mapper has its own seed).

    Parameters
    ----------
    update_damping, covariance, update_on, bias, shuffle
        As in :class:`~vastml.svm.AROWClassifier` (``update_damping`` is the paper's
        :math:`r = 1/(2\lambda_1)`).
    max_iter : int, default=1
        Passes of AROW over its partition in every mapper (as ``AROWClassifier``'s ``max_iter``).
    n_partitions : int or None, default=None
        Number of mappers M. None keeps the partitions of a Dask collection (and one
        partition for local arrays); an int re-partitions into M (near-)equal row shards.
    client : distributed.Client or None, default=None
        Where to run. None uses Dask's current default (the active ``Client`` if one exists).
    reduce_tol : float, default=1e-8
        The reducer stops when the relative change of the combined mean and covariance is
        below this (``tol`` of :func:`arow_mr_reduce`).
    reduce_max_iter : int, default=50
        Rounds of the reducer's alternating updates at most (``max_iter`` of
        :func:`arow_mr_reduce`).
    random_state : int, RandomState or None, default=None
        Partition m trains with seed ``random_state + m`` (an int), so one partition
        reproduces ``AROWClassifier(random_state=random_state)``.
    n_jobs : int or None, default=None
        Threads inside every mapper (one-vs-rest models run in parallel). None uses all the cores of the machine the task runs
        on: right when each machine runs one single-threaded Dask worker; with several worker
        threads or processes per machine (Dask's default ``LocalCluster``), pass 1 so that
        the workers, not the threads, are the parallelism and the cores are not oversubscribed.
    verbose : bool or int, default=False
        Draw a progress bar over the partitions (see :mod:`vastml._progress`).
    callbacks : callable, list of callables or None, default=None
        Called as ``callback(iteration, objective, state)`` as the mappers finish (every
        ``callback_every`` partitions): ``iteration`` counts the partitions trained so far
        (from 1, in the order they finish), ``objective`` is ``nan`` (AROW minimises none),
        ``state`` the number of rows trained on so far. Returning True stops the fit cleanly:
        the mappers still running are cancelled and the models received so far are reduced
        (``stopped_early_`` is True, ``partition_sizes_`` holds 0 for the dropped partitions).
        The reports come as the mappers finish, on a ``distributed`` client and on Dask's
        local schedulers alike.
    callback_every : int, default=1

    Attributes
    ----------
    classes_, mean_, covariance_, n_features_in_
        As in :class:`~vastml.svm.AROWClassifier` (the combined model).
    classifier_ : AROWClassifier
        The combined model as a single-machine classifier.
    partition_sizes_ : ndarray of shape (n_partitions,)
        Rows per partition (0 for an empty one, which is ignored by the reducer).
    n_iter_ : int
        Passes of AROW over every partition (``max_iter``).
    stopped_early_ : bool
        Whether a callback stopped the fit.
    map_time_, reduce_time_ : float
        Seconds spent mapping (wall clock, all partitions) and reducing.

    Examples
    --------
    .. code-block:: python

        import dask.array as da
        from distributed import Client
        from vastml.distributed import AROWMapReduce

        client = Client("tcp://scheduler:8786")       # or Client(LocalCluster())
        X = da.from_zarr("features.zarr")               # rows chunked across the cluster
        y = da.from_zarr("labels.zarr")
        clf = AROWMapReduce(update_damping=5.0, n_partitions=40).fit(X, y)
        clf.predict(X_test)

    Without a cluster the same code runs on Dask's local scheduler:

    >>> import numpy as np
    >>> from vastml.distributed import AROWMapReduce
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 4)); y = (X @ [1.0, -2.0, 0.5, 1.0] > 0).astype(int)
    >>> clf = AROWMapReduce(n_partitions=4, random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.95), clf.partition_sizes_.tolist()
    (True, [500, 500, 500, 500])
    """

    def __init__(
        self,
        *,
        update_damping: float = 1.0,
        covariance: str = "full",
        update_on: str = "margin",
        bias: float = 1.0,
        max_iter: int = 1,
        shuffle: bool = True,
        n_partitions: int | None = None,
        client: Any = None,
        reduce_tol: float = 1e-8,
        reduce_max_iter: int = 50,
        random_state: RandomState = None,
        n_jobs: int | None = None,
        verbose: bool | int = False,
        callbacks: Any = None,
        callback_every: int = 1,
    ) -> None:
        self.update_damping = update_damping
        self.covariance = covariance
        self.update_on = update_on
        self.bias = bias
        self.max_iter = max_iter
        self.shuffle = shuffle
        self.n_partitions = n_partitions
        self.client = client
        self.reduce_tol = reduce_tol
        self.reduce_max_iter = reduce_max_iter
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.callbacks = callbacks
        self.callback_every = callback_every

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # CSR blocks and local scipy.sparse, never densified
        return tags

    def _seeds(self, m):
        rs = self.random_state
        if rs is None:
            return [None] * m
        if isinstance(rs, numbers.Integral) and not isinstance(rs, bool):
            return [int(rs) + i for i in range(m)]
        rng = check_random_state(rs)
        return [int(s) for s in rng.randint(0, _SEED_MAX, size=m, dtype=np.int64)]

    def fit(self, X: Any, y: Any = None, classes: ArrayLike | None = None) -> Self:
        """Map AROW over the partitions of ``X``/``y`` and reduce the models.

        ``X`` is a Dask array or dataframe (with ``y`` a Dask array or series), a Dask bag of
        ``(X_block, y_block)`` pairs (``y=None``; blocks dense or CSR), or local arrays.
        ``classes`` (all labels) saves one pass over ``y`` that finds them.

        Returns
        -------
        self
        """
        dask, _ = _dask()
        params = _arow_params(self)
        AROWClassifier(**params)._check_params()  # errors before any work
        check_n_partitions(self.n_partitions)
        check_callbacks(self.callbacks)
        check_callback_every(self.callback_every)
        if is_local(X):
            X, y = validate_local(self, X, y)
        parts = row_partitions(X, y, self.n_partitions, self.client)
        if classes is None:
            found = compute([dask.delayed(_unique)(a, b) for a, b in parts], self.client)
            classes = np.unique(np.concatenate([np.asarray(c) for c in found]))
        else:
            classes = np.unique(np.asarray(classes))
        if classes.shape[0] < 2:
            raise ValueError(
                f"AROWMapReduce needs samples of at least 2 classes; got {classes.shape[0]} class"
                f" ({classes.tolist()})"
            )
        seeds = self._seeds(len(parts))
        t0 = time.perf_counter()
        tasks = [
            dask.delayed(arow_map, pure=True)(a, b, classes, params, s)
            for (a, b), s in zip(parts, seeds)
        ]
        with Progress(self.callbacks, callback_every=self.callback_every, verbose=self.verbose,
                      total=len(tasks), desc=type(self).__name__) as progress:
            models = self._map(tasks, progress)
        self.stopped_early_ = progress.stopped
        self.map_time_ = time.perf_counter() - t0
        models = [m if m is not None else (None, None, 0) for m in models]
        self.partition_sizes_ = np.array([m[2] for m in models], dtype=np.int64)
        full = [m for m in models if m[2] > 0]
        if not full:
            raise ValueError("all partitions are empty")
        t0 = time.perf_counter()
        means = np.stack([m[0] for m in full])  # (M, k, d)
        covs = np.stack([m[1] for m in full])
        counts = np.array([m[2] for m in full], dtype=np.float64)
        out = [
            arow_mr_reduce(means[:, k], covs[:, k], counts, tol=self.reduce_tol, max_iter=self.reduce_max_iter)
            for k in range(means.shape[1])
        ]
        self.reduce_time_ = time.perf_counter() - t0
        self.mean_ = np.stack([o[0] for o in out])
        self.covariance_ = np.stack([o[1] for o in out])
        self.classes_ = classes
        self.n_features_in_ = self.mean_.shape[1] - 1
        self.n_iter_ = int(self.max_iter)
        self.classifier_ = AROWClassifier.from_model(
            self.mean_, self.covariance_, classes, **_without_cov(params)
        )
        return self

    def _map(self, tasks: list[Any], progress: Progress) -> list[Any]:
        """The mappers' models; reported to ``progress`` as they arrive when it is active."""
        if not progress.active:
            return compute(tasks, self.client)
        rows = [0, 0]  # partitions received, rows trained on

        def on_result(_: int, model: Any) -> bool:
            rows[0] += 1
            rows[1] += int(model[2])
            return progress.report(rows[0], float("nan"), rows[1])

        return compute_reporting(tasks, self.client, on_result)

    def _apply(self, method, X):
        check_is_fitted(self, "classifier_")
        if is_dask_array(X):
            clf = self.classifier_
            X = X.rechunk({1: -1})
            fn = getattr(clf, method)
            if method == "decision_function" and len(self.classes_) > 2:
                k = len(self.classes_)
                return X.map_blocks(fn, chunks=(X.chunks[0], (k,)), dtype=np.float64)
            dtype = self.classes_.dtype if method == "predict" else np.float64
            return X.map_blocks(fn, drop_axis=1, dtype=dtype)
        return getattr(self.classifier_, method)(X)

    def decision_function(self, X: Any) -> Any:
        r"""Scores :math:`\mu^\top x` (see :class:`~vastml.svm.AROWClassifier`); lazy for a Dask array."""
        return self._apply("decision_function", X)

    def predict(self, X: Any) -> Any:
        """Labels; a lazy Dask array for a Dask array ``X``."""
        return self._apply("predict", X)

    def margin_probability(self, X: ArrayLike) -> FloatArray:
        """See :meth:`vastml.svm.AROWClassifier.margin_probability` (local arrays)."""
        check_is_fitted(self, "classifier_")
        return self.classifier_.margin_probability(X)
