"""Accuracy schedules (thesis §5.5) and Theorem 5.4.1 (spec oracle 5 of §8.4)."""

import numpy as np
import pytest
from vastml.embed import (
    EmbeddingObjective,
    accuracy_schedule,
    fgt_order_epsilon,
    inexact_error_level,
    inexact_step_error,
    minimize,
)


def test_thesis_schedules():
    t = accuracy_schedule("theta")
    assert t[0] == 2.0 and t[-1] == pytest.approx(0.1) and t.size == 100
    assert np.allclose(np.diff(np.log(t)), np.log(0.05) / 99)  # log-uniform
    p = accuracy_schedule("order")
    assert p[0] == 1 and p[-1] == 10 and (np.diff(p) >= 0).all() and set(p) <= set(range(1, 11))


def test_fgt_order_epsilon_matches_the_spec_table():
    # spec §8.4 item 2 (bound 5.5, r = 1/2, d = 2): 0.37 (p=3), 2.2e-2 (p=5), 1.6e-4 (p=8),
    # 4.1e-6 (p=10), 8.9e-8 (p=12); p = 1 (3.0) is capped at 0.5
    for p, v in [(3, 0.37), (5, 2.2e-2), (8, 1.6e-4), (10, 4.1e-6), (12, 8.9e-8)]:
        assert fgt_order_epsilon(p) == pytest.approx(v, rel=0.05)
    assert fgt_order_epsilon(1) == 0.5


def test_theorem_5_4_1_monte_carlo_on_a_quadratic():
    rng = np.random.default_rng(0)
    n = 6
    A = rng.normal(size=(n, n))
    H = A @ A.T + np.eye(n)
    b = rng.normal(size=n)

    def E(x):
        return 0.5 * np.einsum("...i,ij,...j->...", x, H, x) - x @ b

    # near the minimiser, where the xi^4 term is a visible part of the variance
    x = np.linalg.solve(H, b) + 0.02 * rng.normal(size=n)
    g = H @ x - b
    xi = 0.2
    mean, var = inexact_step_error(H, g, xi)
    S = 400_000
    dE = E(x + xi * rng.normal(size=(S, n))) - E(x)
    se = np.sqrt(var / S)
    assert abs(dE.mean() - mean) < 4 * se  # (5.10), exact for a quadratic
    assert dE.var() == pytest.approx(var, rel=0.02)  # (5.11)
    # the xi^4 term matters: dropping it moves the variance off by more than MC error
    assert abs(dE.var() - xi**2 * g @ g) > 0.05 * var
    assert mean == pytest.approx(0.5 * xi**2 * np.trace(H))


def test_inexact_iterations_settle_at_mu_over_one_minus_r():
    e = inexact_error_level(0.9, 0.01, max_iter=400)
    assert e[0] == 1.0 and e[-1] == pytest.approx(0.1, rel=1e-12)
    assert inexact_error_level(0.9, 0.01) == pytest.approx(0.1)
    # a real run: gradient descent with rate r on a quadratic with Gaussian step errors
    # (one curvature, so that E_{k+1} = r E_k exactly for the exact steps)
    rng = np.random.default_rng(1)
    eta, xi = 0.05, 0.02
    h = np.full(3, 2.0)
    r = (1 - eta * 2.0) ** 2
    mu = 0.5 * xi**2 * h.sum()
    X = rng.normal(size=(20000, 3))
    for _ in range(300):
        X = X - eta * h * X + xi * rng.normal(size=X.shape)
    Ebar = (0.5 * h * X * X).sum(axis=1).mean()
    assert Ebar == pytest.approx(inexact_error_level(r, mu), rel=0.03)


def _ee_problem(n=300, seed=0):
    from sklearn.datasets import make_swiss_roll
    from vastml.embed import entropic_affinities, symmetrize

    Y, _ = make_swiss_roll(n, random_state=seed)
    P, _, _ = entropic_affinities(Y, perplexity=10)
    return symmetrize(P, "mean")


def test_schedule_changes_the_accuracy_with_the_iteration():
    W = _ee_problem()
    seen = []
    obj = EmbeddingObjective("ee", W, repulsion_weight=1e-2, gradient=("bh", "thesis"))
    orig = obj.parts

    def spy(X, need_objective=True):
        out = orig(X, need_objective)
        seen.append(obj.theta)
        return out

    obj.parts = spy
    X0 = np.random.default_rng(0).normal(size=(300, 2))
    minimize(obj, X0, method="gd", step=0.05, max_iter=120)
    assert seen[0] == 2.0 and seen[1] < 2.0 and seen[-1] == pytest.approx(0.1)
    assert obj.gradient == "barnes_hut"
    o2 = EmbeddingObjective("ee", W, repulsion_weight=1e-2, gradient=("fgt", [1, 3, 10]))
    o2.iteration = 0
    o2(X0)
    assert o2.epsilon == 0.5
    o2.iteration = 7
    o2(X0)
    assert o2.epsilon == pytest.approx(fgt_order_epsilon(10))


@pytest.mark.parametrize(
    "bad", [("exact", "thesis"), ("bh", "fast"), ("fgt", [0.0, 1.0]), ("bh", 1, 2)]
)
def test_bad_schedules_are_refused(bad):
    with pytest.raises(ValueError):
        EmbeddingObjective("ee", _ee_problem(50), gradient=bad)


def test_estimators_accept_a_schedule():
    from sklearn.datasets import load_digits
    from vastml.embed import TSNE, ElasticEmbedding

    X = load_digits().data[:150]
    t = TSNE(perplexity=10, max_iter=120, early_exaggeration_iter=50, gradient=("bh", "thesis"),
             random_state=0).fit(X)
    assert t.n_iter_ == 120 and np.isfinite(t.kl_divergence_)
    ee = ElasticEmbedding(perplexity=10, n_lambdas=3, max_iter=30,
                          gradient=("fgt", [1, 5, 10]), random_state=0).fit(X)
    assert np.isfinite(ee.objective_)
    with pytest.raises(ValueError):
        TSNE(gradient=("exact", "thesis")).fit(X)
