"""One progress protocol for every estimator that reports progress.

Every public estimator with a ``callbacks`` parameter must: call each callback as
``callback(iteration, objective, state)`` with iterations counted from 1, increasing, on the
``callback_every`` grid; stop cleanly when a callback returns True (``stopped_early_`` True, fewer
reports, a fitted estimator whose outputs work; or, for a pipeline stopped before it has any
usable state, no model and a ``ConvergenceWarning``); let a callback's exception propagate; and draw
a progress bar on stderr with ``verbose=True``. ``callback_every`` and ``verbose`` always come
with ``callbacks``.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest
from _estimators import OUTPUTS, PAIRS, fit, fit_data, quick
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from test_common import CLASSES

REPORTING = [c for c in CLASSES if "callbacks" in inspect.signature(c.__init__).parameters]


def test_the_protocol_parameters_come_together():
    assert REPORTING, "no estimator takes callbacks"
    for cls in CLASSES:
        params = inspect.signature(cls.__init__).parameters
        assert "callback" not in params, f"{cls.__name__} still takes `callback`"
        if "callbacks" in params:
            for p in ("callback_every", "verbose"):
                assert p in params, f"{cls.__name__} takes callbacks but not {p}"
            assert params["callbacks"].default is None
            assert params["callback_every"].default == 1
            assert params["verbose"].default is False


@pytest.mark.parametrize("cls", REPORTING, ids=lambda c: c.__name__)
def test_callbacks_see_the_iterations(cls):
    def run(every):
        seen = []
        est = quick(cls).set_params(
            callbacks=[lambda i, o, s: seen.append((i, o))], callback_every=every
        )
        return fit(est, cls.__name__), seen

    est, seen = run(1)
    assert seen, f"{cls.__name__} never called its callback"
    its = [it for it, _ in seen]
    assert all(isinstance(it, int) for it in its)
    assert its == list(range(1, len(its) + 1)), its
    assert all(isinstance(obj, float) for _, obj in seen)
    assert est.stopped_early_ is False
    _, every_2 = run(2)
    assert [it for it, _ in every_2] == [it for it in its if it % 2 == 0]


@pytest.mark.parametrize("cls", REPORTING, ids=lambda c: c.__name__)
def test_a_true_callback_stops_the_fit_cleanly(cls):
    name = cls.__name__
    full = []
    fit(quick(cls).set_params(callbacks=lambda i, o, s: full.append(i)), name)
    stops = []

    def stop(iteration, objective, state):
        stops.append(iteration)
        return True

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = fit(quick(cls).set_params(callbacks=stop), name)
    assert est.stopped_early_ is True
    assert stops == full[:1], (stops, full[:3])
    X, _ = fit_data(name, est)
    for meth in OUTPUTS:
        f = getattr(est, meth, None)
        if f is None or (meth == "transform" and name in PAIRS):
            continue
        if "X" in inspect.signature(f).parameters:
            try:
                out = np.asarray(f(X))
            except NotFittedError:
                # A pipeline stopped before it has any usable state (LLL before its solve)
                # keeps no model and says so with a ConvergenceWarning.
                assert any(issubclass(w.category, ConvergenceWarning) for w in caught), name
                continue
            assert out.shape[0] == X.shape[0]


@pytest.mark.parametrize("cls", REPORTING, ids=lambda c: c.__name__)
def test_a_callbacks_exception_propagates(cls):
    def boom(iteration, objective, state):
        raise RuntimeError("from the callback")

    with pytest.raises(RuntimeError, match="from the callback"):
        fit(quick(cls).set_params(callbacks=boom), cls.__name__)


@pytest.mark.parametrize("cls", REPORTING, ids=lambda c: c.__name__)
def test_verbose_draws_a_bar_and_silence_is_silent(cls, capfd):
    name = cls.__name__
    fit(quick(cls), name)
    quiet = capfd.readouterr()
    assert quiet.err == "" and quiet.out == "", f"{name} printed without verbose"
    fit(clone(quick(cls)).set_params(verbose=True), name)
    loud = capfd.readouterr()
    assert loud.err.strip(), f"{name} drew no bar with verbose=True"


def test_bad_protocol_arguments_are_refused():
    for cls in REPORTING:
        with pytest.raises(TypeError, match="callbacks"):
            fit(quick(cls).set_params(callbacks=3), cls.__name__)
        with pytest.raises(ValueError, match="callback_every"):
            fit(quick(cls).set_params(callback_every=0), cls.__name__)
