"""Projection pursuit: exact gradient, planted direction recovery."""

import numpy as np
import pytest

from vastml.kernels import ProjectionPursuit, entropy_index, sheather_jones
from vastml.kernels._pursuit import _index_and_gradient


def test_gradient_matches_finite_differences():
    rng = np.random.default_rng(1)
    Z = rng.normal(size=(500, 4))
    a = rng.normal(size=4)
    a /= np.linalg.norm(a)
    idx, g = _index_and_gradient(Z, a, 0.3, 1e-12, "fast", None)
    assert idx == pytest.approx(entropy_index(Z @ a, 0.3, 1e-12))
    step = 1e-6
    fd = [
        (_index_and_gradient(Z, a + step * e, 0.3, 1e-12, "fast", None)[0]
         - _index_and_gradient(Z, a - step * e, 0.3, 1e-12, "fast", None)[0]) / (2 * step)
        for e in np.eye(4)
    ]
    np.testing.assert_allclose(g, fd, atol=1e-7)


def test_index_is_smallest_for_the_normal():
    rng = np.random.default_rng(0)
    n = 4000
    normal = rng.normal(size=n)
    bimodal = np.where(rng.random(n) < 0.5, -1, 1) * 0.9 + 0.45 * rng.normal(size=n)
    uniform = rng.uniform(-np.sqrt(3), np.sqrt(3), n)
    values = [entropy_index(z / z.std(), sheather_jones(z / z.std())) for z in (normal, bimodal, uniform)]
    assert values[0] < values[1] and values[0] < values[2]


def test_recovers_planted_direction_in_5d():
    rng = np.random.default_rng(1)
    u = rng.normal(size=5)
    u /= np.linalg.norm(u)
    n = 3000
    b = np.where(rng.random(n) < 0.5, -1.5, 1.5) + 0.4 * rng.normal(size=n)
    mix = rng.normal(size=(5, 5))
    X = (rng.normal(size=(n, 5)) + np.outer(b, u)) @ mix
    pp = ProjectionPursuit(random_state=0).fit(X)
    target = np.linalg.solve(mix, u)
    c = pp.components_[0]
    assert abs(c @ target) / np.linalg.norm(c) / np.linalg.norm(target) > 0.97
    z = pp.transform(X)[:, 0]
    assert z.std(ddof=1) == pytest.approx(1.0, rel=1e-9)


def test_two_components_are_orthogonal_in_sphered_space():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(1500, 3))
    X[:, 0] = np.sign(X[:, 0]) * 1.2 + 0.3 * X[:, 0]
    pp = ProjectionPursuit(n_components=2, n_init=3, random_state=0).fit(X)
    assert abs(pp.directions_[0] @ pp.directions_[1]) < 1e-8
    assert pp.transform(X).shape == (1500, 2)


def test_bad_input():
    X = np.random.default_rng(0).normal(size=(50, 2))
    with pytest.raises(ValueError, match="n_components"):
        ProjectionPursuit(n_components=3).fit(X)
    with pytest.raises(ValueError, match="collinear"):
        ProjectionPursuit().fit(np.column_stack([X[:, 0], 2 * X[:, 0]]))
    with pytest.raises(ValueError, match="epsilon"):
        ProjectionPursuit(epsilon=0).fit(X)


def _bimodal(n=1500, seed=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    X[:, 1] = np.where(rng.random(n) < 0.5, -2, 2) + 0.3 * rng.normal(size=n)
    return X


def test_callbacks_see_each_iteration_and_can_stop():
    X = _bimodal()
    seen = []
    full = ProjectionPursuit(n_init=2, random_state=0,
                             callbacks=lambda it, f, a: seen.append((it, f, a.copy()))).fit(X)
    assert [s[0] for s in seen] == list(range(1, len(seen) + 1))
    assert len(seen) >= full.n_iter_ and not full.stopped_early_
    assert all(abs(np.linalg.norm(a) - 1) < 1e-12 for _, _, a in seen)
    # the index reported is the index of the direction reported (at the search's bandwidth)
    assert max(f for _, f, _ in seen) == pytest.approx(full.index_[0], rel=1e-6)
    early = ProjectionPursuit(n_components=2, n_init=2, random_state=0,
                              callbacks=lambda it, f, a: it >= 3).fit(X)
    assert early.stopped_early_ and early.components_.shape == (1, 3)
    assert early.transform(X).shape == (X.shape[0], 1)


def test_callback_errors_propagate_and_verbose_draws_a_bar(capfd):
    X = _bimodal(500)

    def boom(it, f, a):
        raise RuntimeError("from the callback")

    with pytest.raises(RuntimeError, match="from the callback"):
        ProjectionPursuit(n_init=1, callbacks=boom).fit(X)
    ProjectionPursuit(n_init=1, max_iter=3, verbose=True).fit(X)
    assert "ProjectionPursuit" in capfd.readouterr().err
