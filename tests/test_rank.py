"""RankNCG: erfc-sum gradients against finite differences and direct sums; WMW."""

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression

from vastml.kernels import RankNCG, wmw_score


def brute_wmw(s, y, edges):
    classes = np.unique(y)
    good = total = 0
    for i, j in edges:
        a, b = s[y == classes[i]], s[y == classes[j]]
        good += (b[None, :] > a[:, None]).sum()
        total += a.size * b.size
    return good / total


@pytest.mark.parametrize("graph", ["full", "chain"])
def test_wmw_equals_quadratic_count(graph):
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, 300)
    s = np.round(rng.normal(size=300), 1)  # with ties
    edges = [(i, j) for i in range(4) for j in range(i + 1, 4)] if graph == "full" else [(0, 1), (1, 2), (2, 3)]
    assert wmw_score(s, y, graph) == pytest.approx(brute_wmw(s, y, edges))
    assert wmw_score(-np.arange(4.0), np.arange(4)) == 0.0
    assert wmw_score(np.arange(4.0), np.arange(4)) == 1.0


@pytest.mark.parametrize("graph", ["full", "chain"])
@pytest.mark.parametrize("method", ["fast", "direct"])
def test_gradient_matches_finite_differences(graph, method):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(240, 4))
    y = np.digitize(X @ [1.0, -2.0, 0.5, 0.0], [-1.0, 0.0, 1.0])
    r = RankNCG(l2_penalty=0.5, graph=graph)
    r._setup(X, y)
    w = rng.normal(size=4) * 0.3
    g = r._gradient(w, 1e-10, method, None)
    step = 1e-5
    fd = np.array([(r._objective(w + step * e) - r._objective(w - step * e)) / (2 * step) for e in np.eye(4)])
    assert np.abs(g - fd).max() <= 1e-7 * np.abs(fd).max()


def test_fast_gradient_close_to_direct_and_logistic():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(500, 3))
    y = rng.integers(0, 3, 500)
    r = RankNCG(l2_penalty=0.0)
    r._setup(X, y)
    w = rng.normal(size=3)
    fast = r._gradient(w, 1e-6, "fast", None)
    direct = r._gradient(w, 1e-6, "direct", None)
    pairs = r._pairs
    assert np.abs(fast - direct).max() <= 1e-6 * pairs * np.abs(X).max()
    # The probit match differs from the logistic by at most 0.0227 per pair.
    logistic = np.zeros(3)
    for i, j in r._edges:
        d = r._groups[j][None, :, :] - r._groups[i][:, None, :]
        t = d @ w
        logistic += np.einsum("klm,kl->m", d, 1 / (1 + np.exp(t)))
    assert np.abs(direct - logistic).max() <= 0.0227 * pairs * 2 * np.abs(X).max()


def test_planted_ranking_beats_least_squares():
    rng = np.random.default_rng(3)
    w_true = np.array([1.0, -1.0, 0.5, 0.0, 0.0, 2.0])

    def sample(n):
        X = rng.standard_t(1.5, size=(n, 6))
        return X, np.digitize(X @ w_true, [-2.0, -0.5, 0.5, 2.0])

    X, y = sample(3000)
    Xt, yt = sample(3000)
    rank = RankNCG(l2_penalty=1e-2, random_state=0).fit(X, y)
    ours = rank.score(Xt, yt)
    baseline = wmw_score(LinearRegression().fit(X, y).predict(Xt), yt)
    assert ours > baseline + 0.01
    assert ours > 0.98
    cos = rank.coef_ @ w_true / np.linalg.norm(rank.coef_) / np.linalg.norm(w_true)
    assert cos > 0.99


def test_fast_and_direct_fits_agree():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(400, 3))
    y = np.digitize(X @ [1.0, 0.5, -1.0] + 0.5 * rng.normal(size=400), [-1, 0, 1])
    a = RankNCG(l2_penalty=1.0, method="fast", random_state=0).fit(X, y)
    b = RankNCG(l2_penalty=1.0, method="direct", random_state=0).fit(X, y)
    assert abs(a.score(X, y) - b.score(X, y)) <= 0.005


def test_bad_input():
    X = np.random.default_rng(0).normal(size=(10, 2))
    with pytest.raises(ValueError, match="two distinct"):
        RankNCG().fit(X, np.zeros(10))
    with pytest.raises(ValueError, match="graph"):
        RankNCG(graph="tree").fit(X, np.arange(10) % 2)
    with pytest.raises(ValueError, match="l2_penalty"):
        RankNCG(l2_penalty=-1).fit(X, np.arange(10) % 2)
    with pytest.raises(ValueError):
        wmw_score([1.0, 2.0], [0])


def _ranking_data(n=400, seed=5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return X, np.digitize(X @ [1.0, -0.5, 0.25] + 0.3 * rng.normal(size=n), [-1.0, 0.0, 1.0])


def test_fast_objective_matches_the_quadratic_one():
    X, y = _ranking_data()
    r = RankNCG(l2_penalty=0.3)
    r._setup(X, y)
    for w in (np.array([0.5, -0.2, 0.1]), np.array([2.0, -1.0, 0.3])):
        exact = r._objective(w)
        assert r._fast_objective(w, 1e-10, "fast", None) == pytest.approx(exact, rel=1e-8, abs=1e-6)
        assert r._fast_objective(w, 1e-10, "direct", None) == pytest.approx(exact, rel=1e-10, abs=1e-8)


def test_callbacks_see_each_iteration_and_can_stop():
    X, y = _ranking_data()
    seen = []

    def record(it, objective, coef):
        seen.append((it, objective, coef.copy()))

    full = RankNCG(l2_penalty=0.1, tol=1e-8, random_state=0, callbacks=record).fit(X, y)
    assert [s[0] for s in seen] == list(range(1, full.n_iter_ + 1))
    assert full.n_iter_ >= 3 and not full.stopped_early_
    # the objective is maximised: it rises over the iterations, and is the model's own
    objectives = [s[1] for s in seen]
    assert objectives[-1] > objectives[0]
    full._setup(X, y)
    assert objectives[-1] == pytest.approx(full._objective(full.coef_), rel=1e-6)
    np.testing.assert_array_equal(seen[-1][2], full.coef_)
    # every second iteration reported; True at the second report stops at iteration 4
    calls = []
    early = RankNCG(l2_penalty=0.1, tol=1e-8, random_state=0, callback_every=2,
                    callbacks=[lambda it, f, w: calls.append(it) or it >= 4]).fit(X, y)
    assert calls == [2, 4] and early.n_iter_ == 4 and early.stopped_early_
    np.testing.assert_array_equal(early.coef_, seen[3][2])
    assert early.score(X, y) > 0.8


def test_callback_errors_propagate_and_verbose_draws_a_bar(capfd):
    X, y = _ranking_data(200)

    def boom(it, f, w):
        raise RuntimeError("from the callback")

    with pytest.raises(RuntimeError, match="from the callback"):
        RankNCG(callbacks=boom).fit(X, y)
    RankNCG(max_iter=3, verbose=True).fit(X, y)
    assert "RankNCG" in capfd.readouterr().err
    with pytest.raises(TypeError, match="callbacks"):
        RankNCG(callbacks=3).fit(X, y)
