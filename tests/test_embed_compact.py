"""The compact (32-bit) affinity pipeline of large t-SNE runs (int32 indices, float32
probabilities) against the default 64-bit one on small problems: kNN graph, entropic
affinities, symmetrisation, objective and gradient, the fused descent and the estimator."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_digits
from sklearn.neighbors import NearestNeighbors
from vastml.embed import (
    TSNE,
    EmbeddingObjective,
    _affinities,
    _estimators,
    entropic_affinities,
    symmetrize,
)
from vastml.embed._affinities import is_compact, knn_graph
from vastml.embed._optim import tsne_gradient_descent

F32 = np.finfo(np.float32).eps


@pytest.fixture(scope="module")
def data():
    X = load_digits().data[:700].copy()
    X[1] = X[0]  # duplicates: the self match may not come first
    X[2] = X[0]
    return X


def test_compact_knn_equals_sklearn_kneighbors(data, monkeypatch):
    # Small blocks so the blockwise query crosses block boundaries.
    monkeypatch.setattr(_affinities, "KNN_BLOCK", 97)
    nn = NearestNeighbors(n_neighbors=40).fit(data)
    d64, i64 = knn_graph(nn, 40, compact=False)
    d32, i32 = knn_graph(nn, 40, compact=True)
    assert i32.dtype == np.int32 and i64.dtype == np.int64
    assert d32.dtype == np.float64
    dist, idx = nn.kneighbors()
    # Same neighbour sets with the same distances (ties may be ordered differently).
    np.testing.assert_allclose(d32, dist**2, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(d64, dist**2, rtol=1e-12, atol=1e-9)
    assert (i32 != np.arange(len(data))[:, None]).all()
    same = (np.sort(i32, axis=1) == np.sort(idx, axis=1)).all(axis=1)
    assert same.mean() > 0.99, same.mean()


def test_compact_affinities_and_symmetrisation_match_the_64_bit_path(data):
    P, beta, info = entropic_affinities(data, perplexity=20, n_neighbors=60)
    Pc, betac, infoc = entropic_affinities(data, perplexity=20, n_neighbors=60, compact=True)
    assert not is_compact(P) and is_compact(Pc)
    assert Pc.indices.dtype == np.int32 and Pc.indptr.dtype == np.int32
    np.testing.assert_array_equal(beta, betac)
    np.testing.assert_array_equal(info["evaluations"], infoc["evaluations"])
    np.testing.assert_array_equal(P.indptr, Pc.indptr)
    np.testing.assert_array_equal(P.indices, Pc.indices)
    # float32 storage: each value rounded once.
    assert np.all(np.abs(Pc.data - P.data) <= F32 * P.data)
    for mode in ("joint", "mean"):
        W = symmetrize(P, mode)
        Wc = symmetrize(Pc, mode)
        assert is_compact(Wc)
        np.testing.assert_array_equal(W.indptr, Wc.indptr)
        np.testing.assert_array_equal(W.indices, Wc.indices)
        assert np.all(np.abs(Wc.data - W.data) <= 3 * F32 * W.data), mode
        # and the oracle: SciPy's (P + P^T) / 2 on the compact input (in float64)
        D = sp.csr_array(Pc, dtype=np.float64)
        ref = (D + D.T) * (0.5 / len(data) if mode == "joint" else 0.5)
        assert abs(ref - sp.csr_array(Wc, dtype=np.float64)).max() <= 3 * F32 * ref.max()


@pytest.mark.parametrize("gradient", ["exact", "barnes_hut", "fft"])
def test_compact_objective_and_descent_match_the_64_bit_path(data, gradient):
    P, _, _ = entropic_affinities(data, perplexity=20)
    W = symmetrize(P)
    Wc = symmetrize(entropic_affinities(data, perplexity=20, compact=True)[0])
    X = np.random.default_rng(0).normal(size=(len(data), 2))
    a = EmbeddingObjective("tsne", W, gradient=gradient)
    b = EmbeddingObjective("tsne", Wc, gradient=gradient)
    assert b._indices.dtype == np.int32 and b._data.dtype == np.float32
    (Ea, Ga), (Eb, Gb) = a(X), b(X)
    assert abs(Ea - Eb) <= 1e-6 * abs(Ea)
    assert np.abs(Ga - Gb).max() <= 1e-5 * np.abs(Ga).max()
    assert abs(a.kl_divergence(X) - b.kl_divergence(X)) <= 1e-6
    runs = []
    for obj in (a, b):
        Y, _, E, _ = tsne_gradient_descent(
            obj, X * 1e-2, max_iter=30, learning_rate=20.0, momentum=0.5, exaggeration=12.0
        )
        runs.append((Y, E))
    (Ya, Ea), (Yb, Eb) = runs
    assert np.abs(Ya - Yb).max() <= 1e-4 * np.abs(Ya).max()
    assert abs(Ea - Eb) <= 1e-5 * abs(Ea)


def test_tsne_switches_to_the_compact_path_for_large_inputs(data, monkeypatch):
    # t-SNE's descent is chaotic: float32 rounding of P moves single points within tens of
    # iterations, but the optimum reached is as good (0.24 % apart here at 300 iterations).
    kw = {"perplexity": 20, "max_iter": 300, "early_exaggeration_iter": 50, "random_state": 0}
    wide = TSNE(**kw).fit(data)
    monkeypatch.setattr(_estimators, "AUTO_COMPACT_MIN", 100)
    small = TSNE(**kw).fit(data)
    assert is_compact(small.affinities_) and not is_compact(wide.affinities_)
    assert abs(small.kl_divergence_ - wide.kl_divergence_) <= 1e-2 * wide.kl_divergence_
    # the reported KL is summed in float64 (no float32 rounding of the sum p log p)
    exact = EmbeddingObjective("tsne", wide.affinities_).kl_divergence(small.embedding_)
    assert abs(exact - small.kl_divergence_) <= 1e-6
    np.testing.assert_allclose(small.beta_, wide.beta_)
    new = small.transform(data[:5])
    assert new.shape == (5, 2) and np.isfinite(new).all()


def test_compact_inputs_are_validated(data):
    Pc = entropic_affinities(data[:100], perplexity=10, compact=True)[0]
    bad = Pc.copy()
    bad.data[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        symmetrize(bad)
    with pytest.raises(ValueError, match="NaN"):
        EmbeddingObjective("tsne", bad)
    neg = Pc.copy()
    neg.data[3] = -1
    with pytest.raises(ValueError, match="non-negative"):
        EmbeddingObjective("tsne", neg)
