"""The progress protocol of the SVMs: callbacks per pass (per chunk for AROW), clean stops, errors,
the progress bar and Ctrl-C. The training loops run in Rust and report through the core's hook."""

import sys

import numpy as np
import pytest
from _interrupt import seconds_to_stop
from vastml.svm import (
    AMMClassifier,
    AROWClassifier,
    BSGDClassifier,
    LLSVMClassifier,
    PegasosClassifier,
)
from vastml.svm._arow import _chunks_per_pass


def _data(n=600, n_classes=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = np.argmax(X @ rng.normal(size=(4, n_classes)) + 0.3 * rng.normal(size=(n, n_classes)), axis=1)
    return X, y


# estimator factory, passes a fit makes (the reported iterations), the model parameters
def _pegasos(**kw):
    return PegasosClassifier(**{**dict(l2_penalty=1e-3, max_iter=4, random_state=0), **kw})


def _amm(**kw):
    return AMMClassifier(**{**dict(l2_penalty=1e-3, max_iter=3, max_weights_per_class=4, prune_every=100,
                         random_state=0), **kw})


def _amm_online(**kw):
    return AMMClassifier(**{**dict(l2_penalty=1e-3, max_iter=4, online=True, clone_probability=0.3,
                         random_state=0), **kw})


def _bsgd(**kw):
    return BSGDClassifier(**{**dict(l2_penalty=1e-3, budget=20, gamma=0.5, max_iter=3, random_state=0), **kw})


def _llsvm(**kw):
    return LLSVMClassifier(**{**dict(l2_penalty=1e-2, n_landmarks=30, gamma=0.5, max_iter=6, tol=1e-12,
                           random_state=0), **kw})


def _arow(**kw):
    return AROWClassifier(**{**dict(max_iter=2, random_state=0), **kw})


def _arow_diag(**kw):
    return AROWClassifier(**{**dict(max_iter=2, covariance="diagonal", random_state=0), **kw})


FACTORIES = {
    "pegasos": (_pegasos, 4, ("weights_",)),
    "amm": (_amm, 4, ("weights_", "weight_class_")),
    "amm-online": (_amm_online, 4, ("weights_", "weight_class_")),
    "bsgd": (_bsgd, 3, ("support_vectors_", "dual_coef_")),
    "llsvm": (_llsvm, 6, ("coef_",)),
    "arow": (_arow, 2 * _chunks_per_pass(600), ("mean_", "covariance_")),
    "arow-diagonal": (_arow_diag, 2 * _chunks_per_pass(600), ("mean_", "covariance_")),
}


def _same(a, b, attrs):
    for name in attrs:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


@pytest.mark.parametrize("name", list(FACTORIES))
def test_callbacks_see_every_iteration_and_change_nothing(name):
    make, n_reports, attrs = FACTORIES[name]
    X, y = _data()
    seen = []
    clf = make(callbacks=lambda it, obj, state: seen.append((it, obj, state))).fit(X, y)
    assert [s[0] for s in seen] == list(range(1, n_reports + 1))
    assert not clf.stopped_early_
    assert all(isinstance(s[2], int) for s in seen)
    # the reports do not change the arithmetic
    _same(clf, make().fit(X, y), attrs)
    every = []
    make(callbacks=[lambda it, o, s: every.append(it)], callback_every=2).fit(X, y)
    assert every == list(range(2, n_reports + 1, 2))


@pytest.mark.parametrize("name", ["pegasos", "amm", "amm-online", "bsgd"])
def test_state_is_the_model_size(name):
    make, _, _ = FACTORIES[name]
    X, y = _data()
    seen = []
    clf = make(callbacks=lambda it, obj, state: seen.append((obj, state))).fit(X, y)
    assert all(np.isnan(o) for o, _ in seen)  # no cheap objective: nan, as documented
    assert seen[-1][1] == clf.n_weights_
    if name == "pegasos":
        assert {s for _, s in seen} == {3}


def test_arow_state_counts_the_updates():
    X, y = _data()
    seen = []
    clf = _arow(callbacks=lambda it, obj, state: seen.append(state)).fit(X, y)
    assert seen == sorted(seen) and seen[-1] == clf.n_updates_.sum() > 0


def test_llsvm_reports_the_dual_objective_going_down():
    X, y = _data()
    seen = []
    _llsvm(callbacks=lambda it, obj, state: seen.append((obj, state))).fit(X, y)
    objs = np.array([o for o, _ in seen])
    # exact coordinate minimisation never increases the dual objective 0.5|w|^2 - sum(a)
    assert objs[0] < 0 and np.all(np.diff(objs) <= 1e-9 * np.abs(objs[:-1]))
    assert all(0 < s <= 3 * 600 for _, s in seen)  # support vectors over the 3 models


@pytest.mark.parametrize(
    "name, stop_at, same_as",
    [
        ("pegasos", 2, lambda: _pegasos(max_iter=2)),
        ("amm", 3, lambda: _amm(max_iter=2)),  # batch AMM: the initial pass + 2
        ("amm-online", 2, lambda: _amm_online(max_iter=2)),
        ("bsgd", 1, lambda: _bsgd(max_iter=1)),
        ("llsvm", 2, lambda: _llsvm(max_iter=2)),
        ("arow", _chunks_per_pass(600), lambda: _arow(max_iter=1)),
    ],
)
def test_stopping_keeps_the_model_of_the_passes_made(name, stop_at, same_as):
    make, n_reports, attrs = FACTORIES[name]
    X, y = _data()
    seen = []

    def stop(it, obj, state):
        seen.append(it)
        return it >= stop_at

    clf = make(callbacks=stop).fit(X, y)
    assert seen == list(range(1, stop_at + 1)) and clf.stopped_early_
    assert clf.n_iter_ < FACTORIES[name][0]().fit(X, y).n_iter_ or name == "arow"
    # oracle: the same model as a fit that runs only those passes
    _same(clf, same_as().fit(X, y), attrs)
    assert clf.score(X, y) > 0.6


def test_arow_stopped_mid_pass_equals_training_on_the_examples_seen():
    X, y = _data(n=1000)
    size = -(-1000 // 100)
    clf = AROWClassifier(shuffle=False, callbacks=lambda it, o, s: it == 37).fit(X, y)
    assert clf.stopped_early_ and clf.n_iter_ == 1
    ref = AROWClassifier(shuffle=False).fit(X[: 37 * size], y[: 37 * size])
    np.testing.assert_array_equal(clf.mean_, ref.mean_)
    np.testing.assert_array_equal(clf.covariance_, ref.covariance_)


@pytest.mark.parametrize("name", list(FACTORIES))
def test_an_exception_in_a_callback_propagates(name):
    make, _, _ = FACTORIES[name]
    X, y = _data()

    def boom(it, obj, state):
        raise ZeroDivisionError("from the callback")

    with pytest.raises(ZeroDivisionError, match="from the callback"):
        make(callbacks=boom).fit(X, y)


@pytest.mark.parametrize("name", list(FACTORIES))
def test_verbose_draws_a_bar(name, capfd):
    make, _, _ = FACTORIES[name]
    X, y = _data()
    make(verbose=True).fit(X, y)
    err = capfd.readouterr().err
    assert type(make()).__name__ in err


def test_bad_progress_parameters():
    X, y = _data()
    with pytest.raises(TypeError, match="`callbacks`"):
        _pegasos(callbacks=3).fit(X, y)
    with pytest.raises(ValueError, match="`callback_every`"):
        _bsgd(callback_every=0).fit(X, y)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT delivery differs on Windows")
@pytest.mark.parametrize(
    "make",
    [
        "BSGDClassifier(l2_penalty=1e-4, budget=300, gamma=0.1, max_iter=1000, random_state=0)",
        "AROWClassifier(max_iter=1000, random_state=0)",
        "LLSVMClassifier(n_landmarks=200, max_iter=100000, tol=0.0, random_state=0)",
    ],
)
def test_ctrl_c_stops_a_long_fit(make):
    setup = f"""
        import numpy as np
        from vastml.svm import AROWClassifier, BSGDClassifier, LLSVMClassifier
        rng = np.random.default_rng(0)
        X = rng.normal(size=(20000, 60)); y = (X[:, 0] * X[:, 1] > 0).astype(int)
        clf = {make}
    """
    assert seconds_to_stop(setup, "clf.fit(X, y)", wait=1.5) < 20