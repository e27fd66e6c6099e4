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
from _estimators import OUTPUTS, PAIRS, fit_data, quick
from sklearn.base import clone
from test_common import CHECKED


def _layouts(X: np.ndarray) -> dict[str, np.ndarray]:
    wide = np.zeros((X.shape[0], 2 * X.shape[1]))
    wide[:, ::2] = X
    return {
        "C": np.ascontiguousarray(X),
        "F": np.asfortranarray(X),
        "strided": wide[:, ::2],
    }


def _is_clock(name: str) -> bool:
    """Wall-clock measurements are not results."""
    return "time" in name or "second" in name


def _fitted(est: object) -> dict[str, object]:
    out = {}
    for k, v in vars(est).items():
        if k.endswith("_") and not k.startswith("_") and not _is_clock(k):
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
            if not _is_clock(str(k)) and not _is_clock(where):
                _same(a[k], b[k], f"{where}[{k!r}]")


@pytest.mark.parametrize("cls", CHECKED, ids=lambda c: c.__name__)
def test_layout_never_changes_a_result(cls):
    name = cls.__name__
    base = quick(cls)
    X, y = fit_data(name, base)
    results = {}
    for layout, Xl in _layouts(X).items():
        est = clone(base)
        args = (Xl,) if y is None else (Xl, y)
        fit_result = est.fit(*args)
        assert fit_result is est
        outs = {}
        for meth in OUTPUTS:
            f = getattr(est, meth, None)
            if f is None or not callable(f) or (meth == "transform" and name in PAIRS):
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
