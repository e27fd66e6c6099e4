"""The SNE estimator (Hinton & Roweis 2003) next to SymmetricSNE, TSNE and ElasticEmbedding."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_digits
from vastml.embed import SNE, EmbeddingObjective, SymmetricSNE

# scikit-learn's estimator checks of SNE are in tests/test_common.py.


@pytest.fixture(scope="module")
def digits():
    return load_digits().data[:250]


def _sne_kl_dense(P, Y):
    """sum_n KL(P_n || Q_n) with the dense conditional Q (the hand computation)."""
    t = ((Y[:, None, :] - Y[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(t, np.inf)
    Q = np.exp(-t)
    Q /= Q.sum(axis=1, keepdims=True)
    P = P.toarray()
    m = P > 0
    return float((P[m] * np.log(P[m] / Q[m])).sum())


def test_sne_fits_and_reports_the_kl_of_the_conditional_model(digits):
    m = SNE(perplexity=15, max_iter=150, random_state=0).fit(digits)
    assert m.embedding_.shape == (250, 2)
    P = m.affinities_
    assert np.allclose(np.asarray(P.sum(axis=1)).ravel(), 1.0)  # conditional rows
    assert m.kl_divergence_ == pytest.approx(_sne_kl_dense(P, m.embedding_), rel=1e-8)
    Y0 = m._init(digits, np.random.RandomState(0), 1e-4)
    assert m.kl_divergence_ < _sne_kl_dense(P, Y0)
    assert not m.stopped_early_


def test_sne_objective_is_the_sne_model(digits):
    m = SNE(perplexity=15, max_iter=5, random_state=0).fit(digits)
    from vastml.embed import symmetrize

    obj = EmbeddingObjective("sne", symmetrize(m.affinities_, "mean"))
    assert obj.model == "sne"


def test_sne_same_options_as_symmetric_sne():
    sne = set(SNE().get_params())
    ssne = set(SymmetricSNE().get_params())
    assert sne == ssne


def test_sne_is_keyword_only_and_clones():
    with pytest.raises(TypeError):
        SNE(2)
    m = SNE(perplexity=5.0, method="fp")
    assert clone(m).get_params() == m.get_params()


def test_sne_callbacks_stop_and_report(digits):
    seen = []

    def cb(it, E, Y):
        seen.append((it, E, Y.shape))
        return it >= 3

    m = SNE(perplexity=15, max_iter=100, callbacks=[cb], random_state=0).fit(digits)
    assert [s[0] for s in seen] == [1, 2, 3] and m.stopped_early_ and m.n_iter_ == 3
    assert all(s[2] == (250, 2) for s in seen)
    seen.clear()
    SNE(perplexity=15, max_iter=6, callbacks=cb, callback_every=2, random_state=0).fit(digits)
    assert [s[0] for s in seen] == [2, 4]


@pytest.mark.parametrize("method", ["fp", "diagh", "cg", "lbfgs"])
def test_sne_methods(digits, method):
    m = SNE(perplexity=15, max_iter=30, method=method, random_state=0).fit(digits[:120])
    assert np.isfinite(m.embedding_).all()


def test_sne_transform_and_bad_params(digits):
    m = SNE(perplexity=15, max_iter=50, random_state=0).fit(digits[:200])
    Z = m.transform(digits[200:])
    assert Z.shape == (50, 2) and np.isfinite(Z).all()
    with pytest.raises(ValueError, match="max_iter"):
        SNE(max_iter=0).fit(digits)
    with pytest.raises(TypeError, match="callbacks"):
        SNE(callbacks=3).fit(digits)
