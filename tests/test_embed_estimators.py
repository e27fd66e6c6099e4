"""TSNE, SymmetricSNE and ElasticEmbedding: scikit-learn contract, quality against
scikit-learn's TSNE, out-of-sample transform, bad input."""

import functools
import pickle

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.manifold import TSNE as SkTSNE
from sklearn.neighbors import KNeighborsClassifier
from vastml.embed import TSNE, ElasticEmbedding, EmbeddingObjective, SymmetricSNE, _estimators

# scikit-learn's estimator checks of these estimators are in tests/test_common.py.


@pytest.fixture(scope="module")
def digits():
    d = load_digits()
    return d.data[:700], d.target[:700]


def knn_accuracy(Y, y):
    """Leave-one-out 1-NN accuracy of the labels in the embedding."""
    clf = KNeighborsClassifier(n_neighbors=2).fit(Y, y)
    idx = clf.kneighbors(Y, return_distance=False)[:, 1]
    return (y[idx] == y).mean()


def test_tsne_matches_scikit_learn_quality(digits):
    X, y = digits[0][:500], digits[1][:500]
    ours = TSNE(perplexity=30, random_state=0, max_iter=500).fit(X)
    sk = SkTSNE(perplexity=30, random_state=0, max_iter=500, init="pca").fit(X)
    assert ours.kl_divergence_ <= sk.kl_divergence_ * 1.05, (ours.kl_divergence_, sk.kl_divergence_)
    assert knn_accuracy(ours.embedding_, y) > 0.9
    assert ours.n_iter_ == 500
    # Barnes-Hut with theta = 0.5 reaches a similar KL.
    bh = TSNE(perplexity=30, random_state=0, max_iter=500, gradient="barnes_hut").fit(X)
    assert bh.kl_divergence_ <= sk.kl_divergence_ * 1.05


def test_tsne_fft_gradient(digits, monkeypatch):
    X, y = digits
    m = TSNE(perplexity=30, random_state=0, max_iter=400, gradient="fft").fit(X)
    ex = TSNE(perplexity=30, random_state=0, max_iter=400, gradient="exact").fit(X)
    # Both embeddings scored by the exact KL (m.kl_divergence_ is itself FFT-approximate).
    # With FIt-SNE's grid (3 nodes per unit box) the noisier gradient ends a few % above
    # the exact run after 400 iterations (Barnes-Hut ~4 %); more nodes close the gap.
    exact_kl = EmbeddingObjective("tsne", m.affinities_).kl_divergence
    kl = exact_kl(m.embedding_)
    assert kl <= ex.kl_divergence_ * 1.08, (kl, m.kl_divergence_, ex.kl_divergence_)
    assert abs(m.kl_divergence_ - kl) < 0.01 * kl
    monkeypatch.setattr(
        _estimators, "EmbeddingObjective", functools.partial(EmbeddingObjective, n_interp=5)
    )
    m5 = TSNE(perplexity=30, random_state=0, max_iter=400, gradient="fft").fit(X)
    monkeypatch.undo()
    assert exact_kl(m5.embedding_) < kl, (exact_kl(m5.embedding_), kl)
    assert knn_accuracy(m.embedding_, y) > 0.9
    kw = dict(perplexity=10, max_iter=40, random_state=0, gradient="fft")
    a = TSNE(n_jobs=1, **kw).fit_transform(X[:300])
    b = TSNE(n_jobs=2, **kw).fit_transform(X[:300])
    assert np.array_equal(a, b)
    # "auto" picks it for large 1-D/2-D t-SNE problems only.
    assert TSNE()._gradient_method(50_000) == "fft"
    assert TSNE()._gradient_method(5_000) == "barnes_hut"
    assert TSNE(n_components=3)._gradient_method(50_000) == "barnes_hut"
    with pytest.raises(ValueError, match="n_components <= 2"):
        TSNE(n_components=3, gradient="fft").fit(X[:50])


def test_tsne_other_optimisers(digits):
    X, y = digits
    for method in ("spectral", "lbfgs"):
        m = TSNE(perplexity=30, random_state=0, max_iter=300, method=method).fit(X)
        assert np.isfinite(m.kl_divergence_) and m.kl_divergence_ < 1.5, method
        assert knn_accuracy(m.embedding_, y) > 0.85, method


def test_transform_places_new_points_near_their_class(digits):
    X, y = digits
    d = load_digits()
    Xn, yn = d.data[1500:1650], d.target[1500:1650]
    for est in (
        TSNE(perplexity=30, random_state=0, max_iter=500),
        ElasticEmbedding(perplexity=30, repulsion_weight=1.0, n_lambdas=10, tol=1e-5, random_state=0),
    ):
        est.fit(X)
        Yn = est.transform(Xn)
        assert Yn.shape == (150, 2) and np.isfinite(Yn).all()
        clf = KNeighborsClassifier(n_neighbors=5).fit(est.embedding_, y)
        assert (clf.predict(Yn) == yn).mean() > 0.85, type(est).__name__
        # A training point's own neighbours put it near its own embedding.
        Yt = est.transform(X[:50])
        scale = np.ptp(est.embedding_, axis=0).max()
        assert np.median(np.linalg.norm(Yt - est.embedding_[:50], axis=1)) < 0.05 * scale


def test_ee_and_ssne_embed_digits(digits):
    X, y = digits
    ee = ElasticEmbedding(perplexity=30, repulsion_weight=1.0, n_lambdas=10, tol=1e-5, random_state=0).fit(X)
    assert np.isfinite(ee.objective_) and ee.n_evaluations_ >= ee.n_iter_
    assert knn_accuracy(ee.embedding_, y) > 0.85
    ss = SymmetricSNE(perplexity=30, max_iter=200, random_state=0).fit(X)
    assert knn_accuracy(ss.embedding_, y) > 0.8
    # The FGT and Barnes-Hut repulsions give embeddings of the same quality.
    ssf = SymmetricSNE(perplexity=30, max_iter=200, random_state=0, gradient="fgt").fit(X)
    assert abs(ssf.kl_divergence_ - ss.kl_divergence_) < 0.05


def test_pickle_and_callback(digits):
    X, _ = digits
    seen = []
    m = TSNE(
        perplexity=10,
        max_iter=30,
        early_exaggeration_iter=10,
        random_state=0,
        callbacks=lambda it, E, Y: seen.append(it) or it >= 25,
    )
    m.fit(X[:200])
    assert seen == list(range(1, 26)) and m.stopped_early_ and m.n_iter_ == 25
    m.set_params(callbacks=None)  # a lambda does not pickle
    m2 = pickle.loads(pickle.dumps(m))
    assert np.array_equal(m2.embedding_, m.embedding_)
    assert np.allclose(m2.transform(X[200:210]), m.transform(X[200:210]))


def test_same_result_for_any_thread_count(digits):
    X, _ = digits
    a = TSNE(perplexity=10, max_iter=50, random_state=0, n_jobs=1).fit_transform(X[:300])
    b = TSNE(perplexity=10, max_iter=50, random_state=0, n_jobs=2).fit_transform(X[:300])
    assert np.allclose(a, b, rtol=1e-9, atol=1e-12)


def test_bad_input(digits):
    X, _ = digits
    with pytest.raises(ValueError, match="perplexity"):
        TSNE(perplexity=30).fit(X[:20])
    bad = X[:100].copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        TSNE(perplexity=5).fit(bad)
    with pytest.raises(ValueError, match="method"):
        TSNE(method="newton").fit(X)
    with pytest.raises(ValueError, match="gradient"):
        TSNE(gradient="fgt").fit(X)
    with pytest.raises(ValueError, match="repulsion_weight"):
        ElasticEmbedding(repulsion_weight=-1.0).fit(X)


def test_tsne_tol_stops_the_second_phase_early(digits):
    """TSNE(tol): the run stops at a 50-iteration check once KL fell by less than tol
    (relative); the reported n_iter_ is where it stopped and a looser tol stops earlier."""
    X, _ = digits
    kw = {"perplexity": 20, "max_iter": 1000, "early_exaggeration_iter": 100, "random_state": 0}
    full = TSNE(**kw).fit(X[:300])
    loose = TSNE(tol=1e-2, **kw).fit(X[:300])
    tight = TSNE(tol=1e-3, **kw).fit(X[:300])
    assert full.n_iter_ == 1000
    assert loose.n_iter_ % 50 == 0 and 100 < loose.n_iter_ <= tight.n_iter_ < 1000
    assert full.kl_divergence_ <= tight.kl_divergence_ <= loose.kl_divergence_ * 1.001
    with pytest.raises(ValueError, match="tol"):
        TSNE(tol=-1.0).fit(X[:50])


def test_transform_does_not_depend_on_batch_order():
    """New points' affinities start from their own bounds, not from the previous row's root,
    so transform is permutation-equivariant (a warm start from the previous row made the
    roots, hence the embeddings, depend on the order at the 1e-11 level, which L-BFGS grew
    past scikit-learn's check_methods_sample_order_invariance tolerance)."""
    from sklearn.neighbors import NearestNeighbors

    from vastml import _core

    rng = np.random.default_rng(0)
    X, Xn = rng.normal(size=(60, 5)), rng.normal(size=(25, 5))
    perm = rng.permutation(25)
    d, _ = NearestNeighbors(n_neighbors=15).fit(X).kneighbors(Xn)
    sq = np.ascontiguousarray(d**2)
    order = np.arange(25, dtype=np.int64)
    root = {"perplexity": 5.0, "warm": "bounds", "method": "euler", "tol": 1e-10, "maxit": 20,
            "chunk_size": 2048}
    p = _core.entropic_affinities_knn(sq, order, root)[0]
    sq_perm = np.ascontiguousarray(sq[perm])
    p_perm = _core.entropic_affinities_knn(sq_perm, order, root)[0]
    np.testing.assert_array_equal(p[perm], p_perm)
    tsne = TSNE(perplexity=5, max_iter=100, random_state=0).fit(X)
    np.testing.assert_allclose(
        tsne.transform(Xn)[perm], tsne.transform(Xn[perm]), rtol=1e-7, atol=1e-9
    )
