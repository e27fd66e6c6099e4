"""Shared machinery of the budgeted classifiers: input conversion, labels, epochs, prediction."""

from __future__ import annotations

import numbers
import os
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from vastml._progress import Progress
from vastml._validation import n_jobs_arg

if TYPE_CHECKING:
    from typing import Self

    from vastml._typing import ArrayLike, FloatArray

_SEED_MAX = 2**63 - 1


def core_examples(X):
    """The form the Rust core reads: a C-contiguous float64 array or a CSR tuple.

    Sparse input stays sparse: CSR with sorted, de-duplicated int64 indices (no densifying).
    """
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        if not X.has_canonical_format:
            X = X.copy()
            X.sum_duplicates()
        return (
            np.ascontiguousarray(X.indptr, dtype=np.int64),
            np.ascontiguousarray(X.indices, dtype=np.int64),
            np.ascontiguousarray(X.data, dtype=np.float64),
            int(X.shape[1]),
        )
    return np.ascontiguousarray(X, dtype=np.float64)


def available_bytes():
    """Memory this process may still allocate: the smaller of the address-space limit left
    (RLIMIT_AS) and the machine's available memory (Linux), else None when unknown."""
    limits = []
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft not in (resource.RLIM_INFINITY, -1):
            used = 0
            try:
                with open("/proc/self/statm") as f:
                    used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            except (OSError, ValueError, IndexError):
                pass
            limits.append(max(0, soft - used))
    except (ImportError, ValueError, OSError):
        pass
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    limits.append(int(line.split()[1]) * 1024)
                    break
    except (OSError, ValueError, IndexError):
        pass
    return min(limits) if limits else None


def check_model_memory(n_features, n_vectors, budget_name, *, copies=2):
    """Refuse, before any work, a model of ``n_vectors`` dense float64 vectors of
    ``n_features + 1`` entries (times ``copies`` for the transposed copy prediction makes) that
    cannot fit: MemoryError naming ``X``'s width and the budget parameter."""
    need = 8 * (int(n_features) + 1) * max(1, int(n_vectors)) * copies
    free = available_bytes()
    if need >= 2**62 or (free is not None and need > free):
        have = "" if free is None else f", more than the {free / 2**30:.3g} GiB available"
        raise MemoryError(
            f"`X` has {int(n_features):,} columns: a model of up to {int(n_vectors):,} dense weight "
            f"vectors (`{budget_name}`) would need {need / 2**30:.3g} GiB{have}; reduce the number "
            f"of columns (they are dense in the model) or `{budget_name}`"
        )


def check_int(v, name, low, *, allow_none=False):
    """An int >= low (not a bool)."""
    if v is None and allow_none:
        return None
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"`{name}` must be an int, got {v!r}")
    if v < low:
        raise ValueError(f"`{name}` must be >= {low}, got {v}")
    return int(v)


def check_float(v, name, *, low=None, high=None, low_open=False, allow_none=False):
    """A finite float within [low, high] (or (low, high] when low_open)."""
    if v is None and allow_none:
        return None
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"`{name}` must be a number, got {v!r}")
    v = float(v)
    bad = not np.isfinite(v)
    if low is not None:
        bad |= v <= low if low_open else v < low
    if high is not None:
        bad |= v > high
    if bad:
        lo = "-inf" if low is None else low
        hi = "inf" if high is None else high
        br = "(" if low_open else "["
        raise ValueError(f"`{name}` must be a finite number in {br}{lo}, {hi}], got {v}")
    return v


class BudgetedClassifier(ClassifierMixin, BaseEstimator):
    """Base class: label encoding, validation, seeding, decision_function and predict.

    Subclasses implement ``_check_params()``, ``_new_model(n_features, n_classes)`` (a core
    model whose ``fit(Xc, codes, schedule, progress)`` runs the passes in Rust and reports
    after each), ``_store(model)`` and ``_decision_matrix(Xc)`` (scores of shape
    (n, n_classes)).
    """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    # -- input -----------------------------------------------------------------------------
    def _fit_data(self, X, y, reset):
        X, y = validate_data(
            self, X, y, accept_sparse="csr", dtype=np.float64, reset=reset, order="C"
        )
        check_classification_targets(y)
        return X, y

    def _set_classes(self, y, classes=None):
        labels = np.unique(y) if classes is None else np.unique(np.asarray(classes))
        if labels.shape[0] < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of at least 2 classes; got 1 class"
                f" ({labels[0]!r})"
            )
        self.classes_ = labels

    def _encode(self, y):
        codes = np.searchsorted(self.classes_, y)
        codes = np.clip(codes, 0, len(self.classes_) - 1)
        if not np.all(self.classes_[codes] == y):
            unknown = np.setdiff1d(np.unique(y), self.classes_)
            raise ValueError(f"`y` has labels not in `classes`: {unknown[:5]!r}")
        return codes.astype(np.int64)

    def _seeds(self, n):
        rng = check_random_state(self.random_state)
        return [int(s) for s in rng.randint(0, _SEED_MAX, size=n, dtype=np.int64)]

    def _progress(self, total: int) -> Progress:
        """The fit's :class:`~vastml._progress.Progress` (validates the progress parameters)."""
        return Progress(
            self.callbacks,
            callback_every=self.callback_every,
            verbose=self.verbose,
            total=total,
            desc=type(self).__name__,
        )

    def _schedule(self, seeds: list[int]) -> dict[str, Any]:
        return {"seeds": seeds, "shuffle": bool(self.shuffle)}

    # -- fitting ---------------------------------------------------------------------------
    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Train from scratch on ``X`` (dense or scipy.sparse, rows = examples) and labels ``y``.

        Returns
        -------
        self
        """
        self._check_params()
        n_passes = self._n_passes()
        with self._progress(n_passes) as progress:
            Xv, y = self._fit_data(X, y, reset=True)
            self._set_classes(y)
            codes = self._encode(y)
            self._check_memory(Xv.shape[1], len(self.classes_))
            Xc = core_examples(Xv)
            model = self._new_model(Xv.shape[1], len(self.classes_))
            schedule = self._schedule(self._seeds(n_passes))
            report = progress.report if progress.active else None
            n_iter, stopped = model.fit(Xc, codes, schedule, report)
        self.n_iter_ = int(n_iter)
        self.stopped_early_ = bool(stopped)
        self._store(model)
        return self

    def _partial_fit_data(self, X, y, classes):
        """``(X, y, first)`` of a ``partial_fit`` call, validated; the first call (``first``)
        also sets ``classes_`` (from ``classes``, required then) and ``n_iter_ = 0``."""
        self._check_params()
        first = not hasattr(self, "classes_")
        if first and classes is None:
            raise ValueError("`classes` must be passed on the first call to partial_fit")
        Xv, y = self._fit_data(X, y, reset=first)
        if first:
            self._set_classes(y, classes)
            self.n_iter_ = 0
        return Xv, y, first

    def _partial_fit_model(self, X, y, classes):
        """``(model, X, y, first)`` of a ``partial_fit`` call: a new core model on the first
        call (after the memory check), else the fitted one."""
        Xv, y, first = self._partial_fit_data(X, y, classes)
        if first:
            self._check_memory(Xv.shape[1], len(self.classes_))
            return self._new_model(Xv.shape[1], len(self.classes_)), Xv, y, first
        return self._model(), Xv, y, first

    def _n_passes(self) -> int:
        return int(self.max_iter)

    def _check_memory(self, n_features, n_classes):
        """Subclasses: raise MemoryError (check_model_memory) when the model cannot fit."""

    # -- prediction ------------------------------------------------------------------------
    def _predict_data(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False, order="C")
        return core_examples(X)

    def decision_function(self, X: ArrayLike) -> FloatArray:
        """Class scores.

        Returns
        -------
        scores : ndarray of shape (n_samples,) for two classes (positive favours
            ``classes_[1]``), else (n_samples, n_classes) with the score of every class.
        """
        s = self._decision_matrix(self._predict_data(X))
        if s.shape[1] == 2:
            return s[:, 1] - s[:, 0]
        return s

    def predict(self, X: ArrayLike) -> np.ndarray:
        """The class with the largest score for every row of ``X``."""
        s = self._decision_matrix(self._predict_data(X))
        return self.classes_[np.argmax(s, axis=1)]

    def _n_jobs(self):
        return n_jobs_arg(self.n_jobs)
