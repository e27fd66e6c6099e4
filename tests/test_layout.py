"""Memory layout never changes a result.

Every public estimator is fitted on a C-ordered array, on a Fortran-ordered copy and on a
strided view of the same values; the fitted attributes and the outputs of its prediction and
transformation methods must be *identical* (not merely close): the arrays are converted once,
at the door, so the numbers that reach the algorithm are the same.
"""

from __future__ import annotations

import inspect
import numbers

import numpy as np
import pytest
from sklearn.base import clone, is_classifier, is_regressor
from test_common import CHECKED, QUICK

_OUTPUTS = ("predict", "predict_proba", "decision_function", "transform", "score_samples")
# Fits that take two point sets (objects matched across domains).
_PAIRS = {"KernelizedSorting", "ConvexKernelizedSorting", "LeastSquaresObjectMatching"}
_BINARY = {"ConvoMap"}


def _data(name: str, est: object) -> tuple[np.ndarray, np.ndarray | None]:
    rng = np.random.default_rng(7)
    if name in _BINARY:
        X = (rng.random((24, 18)) < 0.3).astype(float)
        return X, None
    X = np.vstack([rng.normal(size=(20, 4)), rng.normal(3.0, 1.0, size=(20, 4))])
    if name in _PAIRS:
        return X, X[::-1] @ rng.normal(size=(4, 4))
    if is_regressor(est):
        return X, X @ np.array([1.0, -2.0, 0.5, 0.0]) + 0.1 * rng.normal(size=40)
    y_param = inspect.signature(type(est).fit).parameters.get("y")
    if is_classifier(est) or (y_param is not None and y_param.default is inspect.Parameter.empty):
        return X, np.repeat([0, 1], 20)
    return X, None


def _layouts(X: np.ndarray) -> dict[str, np.ndarray]:
    wide = np.zeros((X.shape[0], 2 * X.shape[1]))
    wide[:, ::2] = X
    return {
        "C": np.ascontiguousarray(X),
        "F": np.asfortranarray(X),
        "strided": wide[:, ::2],
    }


def _fitted(est: object) -> dict[str, object]:
    out = {}
    for k, v in vars(est).items():
        if k.endswith("_") and not k.startswith("_") and "time" not in k:
            out[k] = v
    return out


def _same(a: object, b: object, where: str) -> None:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape, where
        if a.dtype.kind in "fc":
            np.testing.assert_array_equal(a, b, err_msg=where)
        else:
            assert np.array_equal(a, b), where
    elif isinstance(a, numbers.Real) and isinstance(b, numbers.Real):
        assert (a == b) or (a != a and b != b), f"{where}: {a} != {b}"
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _same(a[k], b[k], f"{where}[{k!r}]")


@pytest.mark.parametrize("cls", CHECKED, ids=lambda c: c.__name__)
def test_layout_never_changes_a_result(cls):
    name = cls.__name__
    base = cls(**QUICK.get(name, {}))
    if "random_state" in base.get_params() and base.get_params()["random_state"] is None:
        base.set_params(random_state=0)
    X, y = _data(name, base)
    results = {}
    for layout, Xl in _layouts(X).items():
        est = clone(base)
        args = (Xl,) if y is None else (Xl, y)
        fit_result = est.fit(*args)
        assert fit_result is est
        outs = {}
        for meth in _OUTPUTS:
            f = getattr(est, meth, None)
            if f is None or not callable(f) or (meth == "transform" and name in _PAIRS):
                continue
            if "X" not in inspect.signature(f).parameters:
                continue
            outs[meth] = f(Xl)
        results[layout] = (_fitted(est), outs)
    ref_fit, ref_out = results["C"]
    assert ref_fit, f"{name} stored no fitted attribute"
    for layout in ("F", "strided"):
        fit, out = results[layout]
        assert fit.keys() == ref_fit.keys()
        for k in ref_fit:
            _same(ref_fit[k], fit[k], f"{name}.{k} ({layout} vs C)")
        assert out.keys() == ref_out.keys()
        for k in ref_out:
            _same(ref_out[k], out[k], f"{name}.{k}() ({layout} vs C)")
