"""Out-of-sample embedding by N-body sums (thesis §5.4) against the dense M x N path."""

import numpy as np
import pytest
from vastml import _core
from vastml.embed._out_of_sample import (
    SUM_METHOD,
    GridSums,
    _point_objective,
    _sums_objective,
    embed_new_points,
)


def _setup(seed=0, n=600, m=40, k=12, d=2):
    rng = np.random.default_rng(seed)
    Y = rng.normal(size=(n, d)) * 3.0
    Xn = rng.normal(size=(m, d)) * 3.0
    idx = np.stack([rng.choice(n, k, replace=False) for _ in range(m)])
    p = rng.random((m, k))
    p /= p.sum(axis=1, keepdims=True)
    return Y, Xn, idx, p


@pytest.mark.parametrize("model", ["tsne", "ssne", "sne", "ee"])
def test_exact_sums_objective_matches_dense(model):
    Y, Xn, idx, p = _setup()
    kernel = "student" if model == "tsne" else "gaussian"
    sums = _core.SourceSums(Y, kernel, "exact")
    f, g = _sums_objective(model, 0.3, Xn, Y, idx, p, sums)
    fd, gd = _point_objective(model, 0.3, Xn, Y, idx, p)
    assert f == pytest.approx(fd, rel=1e-10)
    assert np.allclose(g, gd, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("model,method", [("tsne", "barnes_hut"), ("ssne", "barnes_hut"), ("ee", "fgt")])
def test_fast_sums_objective_is_close_to_dense(model, method):
    Y, Xn, idx, p = _setup(seed=1)
    kernel = "student" if model == "tsne" else "gaussian"
    dense = _point_objective(model, 0.3, Xn, Y, idx, p)
    exact0 = _sums_objective(model, 0.3, Xn, Y, idx, p, _core.SourceSums(Y, kernel, method, 0.0, 1e-10))
    assert np.allclose(exact0[1], dense[1], rtol=1e-7, atol=1e-9)
    approx = _sums_objective(model, 0.3, Xn, Y, idx, p, _core.SourceSums(Y, kernel, method, 0.5, 1e-4))
    gscale = np.abs(dense[1]).max()
    assert np.abs(approx[1] - dense[1]).max() <= 0.05 * gscale
    # and the approximation is not identical (the test could not fail otherwise)
    if method == "barnes_hut":
        assert np.abs(approx[1] - dense[1]).max() > 0


@pytest.mark.parametrize("model", ["tsne", "ssne"])
def test_transform_with_exact_sums_matches_dense_optimum(model):
    from scipy.optimize import minimize as scipy_minimize

    rng = np.random.default_rng(3)
    Y = rng.normal(size=(300, 2)) * 4.0
    m, k = 25, 10
    idx = np.stack([rng.choice(300, k, replace=False) for _ in range(m)])
    d2 = np.sort(rng.random((m, k)) * 5, axis=1)
    out = embed_new_points(model, 1.0, Y, d2, idx, 4.0, gradient="exact")
    bh = embed_new_points(model, 1.0, Y, d2, idx, 4.0, gradient="barnes_hut", theta=0.0)
    assert np.allclose(out, bh, atol=1e-6)
    # the dense objective is stationary there, and its own minimiser agrees
    root = {"perplexity": 4.0, "warm": "bounds", "method": "euler", "tol": 1e-10, "maxit": 20,
            "chunk_size": 2048}
    p, *_ = _core.entropic_affinities_knn(d2, np.arange(m, dtype=np.int64), root)
    _, g = _point_objective(model, 1.0, out, Y, idx, p)
    assert np.abs(g).max() < 1e-3
    ref = scipy_minimize(
        lambda x: tuple(
            v.ravel() if i else v
            for i, v in enumerate(_point_objective(model, 1.0, x.reshape(m, 2), Y, idx, p))
        ),
        np.einsum("mk,mkd->md", p, Y[idx]).ravel(),
        jac=True,
        method="L-BFGS-B",
    )
    assert np.allclose(out, ref.x.reshape(m, 2), atol=1e-3)


def test_sum_method_of_each_fit_gradient():
    assert SUM_METHOD["fft"] == "grid" and SUM_METHOD["fgt"] == "fgt"


@pytest.mark.parametrize("kernel,d", [("student", 2), ("gaussian", 2), ("student", 1)])
def test_grid_sums_match_exact(kernel, d):
    rng = np.random.default_rng(4)
    Y = rng.normal(size=(3000, d)) * 6.0
    T = rng.normal(size=(400, d)) * 6.0
    T[0] = 200.0  # far outside the grid: the fallback answers
    exact = _core.SourceSums(Y, kernel, "exact")
    g = GridSums(Y, kernel, fallback=exact)
    for a, b in zip(exact.at(T), g.at(T)):
        assert np.abs(a - b).max() <= 5e-3 * np.abs(a).max()
        assert np.abs(a - b).max() > 0  # an approximation (the fallback row is exact)
    # coarser grid, larger error: O(spacing^2)
    e1 = np.abs(GridSums(Y, kernel, spacing=0.1).at(T[1:])[0] - exact.at(T[1:])[0]).max()
    e4 = np.abs(GridSums(Y, kernel, spacing=0.4).at(T[1:])[0] - exact.at(T[1:])[0]).max()
    assert e4 > 4 * e1


def test_transform_by_grid_matches_exact():
    rng = np.random.default_rng(5)
    Y = rng.normal(size=(2000, 2)) * 8.0
    m, k = 60, 15
    idx = np.stack([rng.choice(2000, k, replace=False) for _ in range(m)])
    d2 = np.sort(rng.random((m, k)) * 5, axis=1)
    a = embed_new_points("tsne", 1.0, Y, d2, idx, 5.0, gradient="fft")
    b = embed_new_points("tsne", 1.0, Y, d2, idx, 5.0, gradient="exact")
    assert np.abs(a - b).max() < 1e-2 * np.abs(b).max()


def test_source_sums_validates():
    with pytest.raises(ValueError):
        _core.SourceSums(np.zeros((3, 2)), "student", "fgt")
    with pytest.raises(ValueError):
        _core.SourceSums(np.zeros((3, 2)), "gaussian", "barnes_hut", -1.0)
    s = _core.SourceSums(np.zeros((3, 2)), "gaussian", "exact")
    with pytest.raises(ValueError):
        s.at(np.zeros((2, 3)))


def test_estimator_transform_uses_fit_gradient():
    from sklearn.datasets import load_digits
    from vastml.embed import TSNE

    X = load_digits().data[:400]
    t = TSNE(perplexity=10, max_iter=250, gradient="barnes_hut", random_state=0).fit(X[:300])
    a = t.transform(X[300:])
    t.set_params(gradient="exact")
    b = t.transform(X[300:])
    assert a.shape == (100, 2) and np.isfinite(a).all()
    assert np.abs(a - b).max() < 0.05 * np.abs(b).max()
