"""The one progress protocol on every embedding fit: callbacks see iterations 1..k in order,
returning True stops the fit cleanly (``stopped_early_``, a usable model), an exception in a
callback propagates, ``verbose=True`` draws a bar on stderr, and Ctrl-C stops the Rust loops."""

from __future__ import annotations


import numpy as np
import pytest
from _interrupt import seconds_to_stop
import scipy.sparse as sp
from sklearn.datasets import load_digits

from vastml.embed import (
    SNE,
    TSNE,
    ElasticEmbedding,
    EmbeddingObjective,
    ParametricEmbedding,
    SymmetricSNE,
    homotopy,
    minimize,
    tsne_gradient_descent,
)


@pytest.fixture(scope="module")
def digits():
    return load_digits().data[:150]


@pytest.fixture(scope="module")
def posteriors():
    return np.random.default_rng(18).dirichlet(np.full(4, 0.5), 200)


def _estimators():
    """(name, factory(**progress kwargs), data fixture name, iterations of a full fit)."""
    return [
        ("tsne-gd", lambda **kw: TSNE(perplexity=10, max_iter=40, early_exaggeration_iter=10,
                                      random_state=0, **kw), "digits"),
        ("tsne-spectral", lambda **kw: TSNE(perplexity=10, max_iter=20, method="spectral",
                                            early_exaggeration_iter=5, random_state=0, **kw),
         "digits"),
        ("ssne", lambda **kw: SymmetricSNE(perplexity=10, max_iter=20, tol=1e-12,
                                           random_state=0, **kw), "digits"),
        ("sne", lambda **kw: SNE(perplexity=10, max_iter=20, tol=1e-12, random_state=0, **kw),
         "digits"),
        ("ee-homotopy", lambda **kw: ElasticEmbedding(perplexity=10, n_lambdas=3, max_iter=10,
                                                      random_state=0, **kw), "digits"),
        ("ee-direct", lambda **kw: ElasticEmbedding(perplexity=10, homotopy=False, max_iter=20,
                                                    tol=1e-12, random_state=0, **kw), "digits"),
        ("pe", lambda **kw: ParametricEmbedding(l2_penalty_centers=2.0, random_state=0, **kw),
         "posteriors"),
    ]


ESTIMATORS = {name: (make, data) for name, make, data in _estimators()}


def _state(est):
    return est.class_embedding_ if isinstance(est, ParametricEmbedding) else est.embedding_


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_callbacks_see_the_iterations_in_order_and_true_stops(name, request):
    make, data = ESTIMATORS[name]
    X = request.getfixturevalue(data)
    seen = []

    def record(it, objective, state):
        seen.append((it, objective, np.array(state)))

    full = make(callbacks=record).fit(X)
    its = [s[0] for s in seen]
    assert its == list(range(1, len(its) + 1)) and len(its) >= 3, its
    assert not full.stopped_early_
    assert all(np.isfinite(s[1]) or np.isnan(s[1]) for s in seen)
    assert seen[-1][2].shape == _state(full).shape

    # every k-th iteration with callback_every
    every = []
    make(callbacks=lambda it, E, S: every.append(it), callback_every=2).fit(X)
    assert every == [it for it in its if it % 2 == 0]

    # True stops at that iteration with a usable model
    stop_at = 2
    seen.clear()
    stopped = make(callbacks=[record, lambda it, E, S: it >= stop_at]).fit(X)
    assert [s[0] for s in seen] == [1, 2] and stopped.stopped_early_
    state = _state(stopped)
    assert np.isfinite(state).all()
    assert np.array_equal(state, seen[-1][2]) or isinstance(stopped, ParametricEmbedding)
    if hasattr(stopped, "n_iter_") and not isinstance(stopped, ParametricEmbedding):
        assert stopped.n_iter_ == stop_at
    stopped.transform(X[:5])


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_an_exception_in_a_callback_propagates(name, request):
    make, data = ESTIMATORS[name]
    X = request.getfixturevalue(data)

    def boom(it, E, S):
        if it == 2:
            raise RuntimeError("boom from the callback")

    with pytest.raises(RuntimeError, match="boom from the callback"):
        make(callbacks=boom).fit(X)


@pytest.mark.parametrize("name", ["tsne-gd", "ssne", "ee-homotopy", "pe"])
def test_verbose_draws_a_bar_on_stderr(name, request, capfd):
    make, data = ESTIMATORS[name]
    X = request.getfixturevalue(data)
    make().fit(X)
    assert capfd.readouterr().err == ""
    make(verbose=True).fit(X)
    err = capfd.readouterr().err
    assert type(make()).__name__ in err, err


def _objective(model="ee", n=30, repulsion_weight=0.5, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.random((n, n))
    W = sp.csr_array(np.triu(A, 1) + np.triu(A, 1).T)
    X0 = 1e-2 * rng.normal(size=(n, 2))
    return EmbeddingObjective(model, W, repulsion_weight=repulsion_weight), X0


@pytest.mark.parametrize("method", ["spectral", "gd", "cg", "lbfgs"])
def test_minimize_reports_stops_and_raises(method):
    obj, X0 = _objective()
    seen = []
    r = minimize(obj, X0, method=method, max_iter=8, tol=0.0,
                 callbacks=lambda it, E, X: seen.append((it, E, X.copy())))
    assert [s[0] for s in seen] == list(range(1, r.n_iter_ + 1)) and r.n_iter_ >= 3
    assert seen[-1][1] == pytest.approx(r.objective)
    seen.clear()
    r = minimize(obj, X0, method=method, max_iter=8, tol=0.0,
                 callbacks=lambda it, E, X: seen.append(it) or it >= 2)
    assert seen == [1, 2] and r.stop_reason == "callback" and r.n_iter_ == 2
    with pytest.raises(ZeroDivisionError):
        minimize(obj, X0, method=method, max_iter=8, callbacks=lambda it, E, X: 1 / 0)


def test_homotopy_counts_iterations_along_the_path_and_stops():
    obj, X0 = _objective(repulsion_weight=0.0)
    seen = []
    X, info = homotopy(obj, X0, lambdas=[1e-3, 1e-2, 1e-1], max_iter=5, tol=0.0,
                       callbacks=lambda it, E, X_: seen.append((it, obj.repulsion_weight)))
    assert [s[0] for s in seen] == list(range(1, info["n_iter"] + 1))
    assert [s[1] for s in seen] == sorted(s[1] for s in seen)  # lambdas in order
    assert not info["stopped_early"] and len(info["objective"]) == 3
    stop = info["n_iter_per_lambda"][0] + 1  # the first iteration at the second lambda
    seen.clear()
    X, info = homotopy(obj, X0, lambdas=[1e-3, 1e-2, 1e-1], max_iter=5, tol=0.0,
                       callbacks=lambda it, E, X_: seen.append(it) or it >= stop)
    assert seen == list(range(1, stop + 1)) and info["stopped_early"] and info["n_iter"] == stop
    assert len(info["objective"]) == 2 and np.isfinite(X).all()
    with pytest.raises(ValueError, match="from the callback"):
        homotopy(obj, X0, lambdas=[1e-3, 1e-2], max_iter=5,
                 callbacks=lambda it, E, X_: (_ for _ in ()).throw(ValueError("from the callback")))


@pytest.mark.parametrize("fused", [True, False])
def test_tsne_gradient_descent_reports_every_iteration(fused):
    obj, X0 = _objective("tsne", n=40)
    seen = []
    X, _, E, done = tsne_gradient_descent(
        obj, X0, max_iter=30, learning_rate=10.0, momentum=0.5, it0=5, fused=fused,
        objective_every=10, callbacks=lambda it, E, X_: seen.append((it, E)),
    )
    assert [s[0] for s in seen] == list(range(6, 36)) and done == 30
    assert seen[-1][1] == pytest.approx(E)
    seen.clear()
    X, _, E, done = tsne_gradient_descent(
        obj, X0, max_iter=30, learning_rate=10.0, momentum=0.5, fused=fused,
        callbacks=lambda it, E, X_: seen.append(it) or it >= 4,
    )
    assert seen == [1, 2, 3, 4] and done == 4 and np.isfinite(X).all()
    with pytest.raises(KeyError):
        tsne_gradient_descent(obj, X0, max_iter=30, learning_rate=10.0, momentum=0.5,
                              fused=fused, callbacks=lambda it, E, X_: {}[it])


def test_ctrl_c_stops_the_rust_tsne_descent():
    # 50 exact iterations at 20,000 points take minutes; a cancelled one stops within seconds
    setup = """
        import numpy as np, scipy.sparse as sp
        from vastml.embed import EmbeddingObjective, tsne_gradient_descent
        n = 20_000
        rng = np.random.default_rng(0)
        rows = np.repeat(np.arange(n), 5)
        cols = (rows + rng.integers(1, n, rows.size)) % n
        W = sp.csr_array((np.full(rows.size, 1.0 / rows.size), (rows, cols)), shape=(n, n))
        W = (W + W.T) / 2
        obj = EmbeddingObjective("tsne", W, gradient="exact")
        X0 = rng.normal(size=(n, 2))
    """
    call = "tsne_gradient_descent(obj, X0, max_iter=50, learning_rate=100.0, momentum=0.5)"
    assert seconds_to_stop(setup, call) < 20