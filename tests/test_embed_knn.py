"""vastml's parallel kd-tree kNN graph (``neighbors_method="approx"`` of TSNE / entropic_affinities)
against brute force: exact for eps = 0, high recall with exact distances for the
(1 + eps)-approximate search used at large N, and the estimator switch."""

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from vastml import _core
from vastml.embed import TSNE, _affinities, _estimators, entropic_affinities
from vastml.embed._affinities import KNN_APPROX_EPS, rust_knn


def brute(X, k):
    d = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(d, np.inf)
    idx = np.argsort(d, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(d, idx, 1), idx


def recall(idx, truth):
    return np.mean([len(np.intersect1d(a, b)) / len(b) for a, b in zip(idx, truth)])


@pytest.mark.parametrize(("n", "dim", "k"), [(4, 2, 3), (300, 3, 10), (1500, 10, 90)])
def test_exact_equals_brute_force(n, dim, k):
    X, _ = make_blobs(n, n_features=dim, centers=5, random_state=n)
    d, i = rust_knn(X, k, eps=0.0)
    bd, bi = brute(X, k)
    assert i.dtype == np.int32 and d.dtype == np.float64
    np.testing.assert_allclose(d, bd, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(i, bi)  # ties broken by the smaller index in both


@pytest.mark.parametrize("kind", ["blobs", "uniform"])
def test_approx_recall_and_exact_distances(kind):
    rng = np.random.default_rng(1)
    if kind == "blobs":
        X, _ = make_blobs(2500, n_features=10, centers=10, random_state=0)
    else:
        X = rng.uniform(size=(2500, 10))
    k = 90
    d, i = rust_knn(X, k, eps=KNN_APPROX_EPS)
    _, bi = brute(X, k)
    r = recall(i, bi)
    assert r >= 0.99, r
    # Every returned distance is the true one, rows are sorted, self never listed.
    true = ((X[:, None, :] - X[i]) ** 2).sum(-1)
    np.testing.assert_allclose(d, true, rtol=1e-12, atol=1e-12)
    assert (np.diff(d, axis=1) >= 0).all()
    assert (i != np.arange(len(X))[:, None]).all()
    # A much looser search does lose neighbours: the recall check above can fail.
    _, iw = rust_knn(X, k, eps=20.0)
    assert recall(iw, bi) < r


@pytest.mark.parametrize(("eps", "least_recall"), [(0.0, 1.0), (KNN_APPROX_EPS, 0.99)])
def test_queries_against_brute_force(eps, least_recall):
    X, _ = make_blobs(2000, n_features=10, centers=10, random_state=5)
    Q, _ = make_blobs(300, n_features=10, centers=10, random_state=6)
    Q[0] = X[17]  # a query on a training point finds it (nothing is skipped)
    d, i = _core.knn_graph(X, 90, eps, queries=Q)
    full = ((Q[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    bi = np.argsort(full, axis=1, kind="stable")[:, :90]
    assert d.shape == i.shape == (300, 90)
    if eps == 0.0:
        np.testing.assert_array_equal(i, bi)
    assert recall(i, bi) >= least_recall
    np.testing.assert_allclose(d, np.take_along_axis(full, i.astype(np.int64), 1),
                               rtol=1e-12, atol=1e-12)
    assert (np.diff(d, axis=1) >= 0).all()
    assert i[0, 0] == 17 and d[0, 0] == 0.0
    with pytest.raises(ValueError, match="`queries`"):
        _core.knn_graph(X, 3, queries=Q[:, :4].copy())
    with pytest.raises(ValueError):
        _core.knn_graph(X, 2001, queries=Q)


def test_duplicates_and_bad_input():
    X = np.array([[0.0, 0], [0, 0], [0, 0], [5, 5]])
    d, i = rust_knn(X, 2)
    assert i[:3].tolist() == [[1, 2], [0, 2], [0, 1]] and (d[:3] == 0).all()
    with pytest.raises(ValueError):
        rust_knn(X, 4)
    with pytest.raises(ValueError):
        _core.knn_graph(X, 2, -1.0)
    with pytest.raises(ValueError):
        rust_knn(np.array([[np.nan, 0.0], [0, 0], [1, 1]]), 1)


def test_entropic_affinities_and_tsne_switch(monkeypatch):
    X, _ = make_blobs(1200, n_features=10, centers=5, random_state=3)
    P, beta, _ = entropic_affinities(X, perplexity=20)
    Pa, betaa, _ = entropic_affinities(X, perplexity=20, neighbors_method="approx")
    # Same graph up to a few swapped far neighbours: widths nearly equal.
    np.testing.assert_allclose(betaa, beta, rtol=0.02)
    with pytest.raises(ValueError):
        entropic_affinities(X, perplexity=20, neighbors_method="annoy")
    calls = []
    real = _estimators.rust_knn
    monkeypatch.setattr(
        _estimators, "rust_knn", lambda *a, **kw: calls.append(1) or real(*a, **kw)
    )
    kw = dict(perplexity=20, max_iter=50, early_exaggeration_iter=25, random_state=0)
    exact = TSNE(**kw).fit(X)
    assert not calls  # below AUTO_APPROX_MIN: unchanged exact path
    monkeypatch.setattr(_estimators, "AUTO_APPROX_MIN", 1000)
    auto = TSNE(**kw).fit(X)
    assert calls
    np.testing.assert_allclose(auto.beta_, exact.beta_, rtol=0.02)
    # The approximate path never fits scikit-learn's tree: transform queries vastml's tree
    # (same eps) against the training points; scikit-learn's exact index, once fitted,
    # gives nearly the same new points.
    assert not hasattr(auto.nn_, "n_samples_fit_")
    Xq = X[:40] + 0.05
    Y = auto.transform(Xq)
    assert Y.shape == (40, 2) and np.isfinite(Y).all()
    assert not hasattr(auto.nn_, "n_samples_fit_")
    auto.nn_.fit(auto._nn_X)
    Ye = auto.transform(Xq)
    spread = np.abs(auto.embedding_).max()
    assert np.abs(Y - Ye).max() < 0.02 * spread
    with pytest.raises(ValueError):
        TSNE(neighbors_method="bogus").fit(X)


def test_max_iter_auto_is_750_at_large_n(monkeypatch):
    X, _ = make_blobs(250, n_features=5, centers=3, random_state=4)
    kw = dict(perplexity=10, gradient="barnes_hut", random_state=0)
    assert TSNE(**kw).fit(X).n_iter_ == 1000  # unchanged below AUTO_COMPACT_MIN
    monkeypatch.setattr(_estimators, "AUTO_COMPACT_MIN", 200)
    assert TSNE(**kw).fit(X).n_iter_ == 750
    with pytest.raises(ValueError):
        TSNE(max_iter="many").fit(X)
