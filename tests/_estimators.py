"""Data that each public estimator can be fitted on, for the tests that run over all of them."""

from __future__ import annotations

import inspect

import numpy as np
from sklearn.base import is_classifier, is_regressor

OUTPUTS = ("predict", "predict_proba", "decision_function", "transform", "score_samples")
# Fits that take two point sets (objects matched across domains).
PAIRS = {"KernelizedSorting", "ConvexKernelizedSorting", "LeastSquaresObjectMatching"}
_BINARY = {"ConvoMap"}


def fit_data(name: str, est: object) -> tuple[np.ndarray, np.ndarray | None]:
    rng = np.random.default_rng(7)
    if name in _BINARY:
        X = (rng.random((24, 18)) < 0.3).astype(float)
        return X, None
    X = np.vstack([rng.normal(size=(20, 4)), rng.normal(3.0, 1.0, size=(20, 4))])
    if est.__sklearn_tags__().input_tags.positive_only:  # probability rows (PE's posteriors)
        X = np.abs(X) + 0.01
        X /= X.sum(axis=1, keepdims=True)
    if name in PAIRS:
        return X, X[::-1] @ rng.normal(size=(4, 4))
    if is_regressor(est):
        return X, X @ np.array([1.0, -2.0, 0.5, 0.0]) + 0.1 * rng.normal(size=40)
    y_param = inspect.signature(type(est).fit).parameters.get("y")
    if is_classifier(est) or (y_param is not None and y_param.default is inspect.Parameter.empty):
        return X, np.repeat([0, 1], 20)
    return X, None


def quick(cls: type) -> object:
    """``cls`` with test_common's quick settings and, where it is random, ``random_state=0``."""
    from test_common import QUICK

    est = cls(**QUICK.get(cls.__name__, {}))
    params = est.get_params()
    if "random_state" in params and params["random_state"] is None:
        est.set_params(random_state=0)
    return est


def fit(est: object, name: str) -> object:
    """Fit ``est`` on its :func:`fit_data`; return it."""
    X, y = fit_data(name, est)
    return est.fit(X) if y is None else est.fit(X, y)
