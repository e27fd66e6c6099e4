"""Parametric Embedding: posterior builders, metrics (hand computations), warm start and
the eta_phi homotopy (spec 001 §5, §5.5, §7)."""

import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.decomposition import LatentDirichletAllocation
from sklearn.linear_model import LogisticRegression
from sklearn.mixture import GaussianMixture
from vastml.embed import (
    ParametricEmbedding,
    agreement,
    class_f_measure,
    kl_per_object,
    mean_kl,
    posteriors_from_classifier,
    posteriors_from_mixture,
    posteriors_from_topics,
    prec_at_h,
    procrustes_distance,
    topic_word_to_word_topic,
)


def test_classifier_builder_is_predict_proba():
    X, y = load_iris(return_X_y=True)
    clf = LogisticRegression(max_iter=500).fit(X, y)
    P, prior = posteriors_from_classifier(clf, X[:7])
    assert np.allclose(P, clf.predict_proba(X[:7])) and prior is None


def test_mixture_builder_is_responsibilities_and_weights():
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(0, 1, (30, 2)), rng.normal(6, 1, (10, 2))]
    gm = GaussianMixture(2, random_state=0).fit(X)
    P, prior = posteriors_from_mixture(gm, X)
    # by hand: w_k N(x | mu_k, S_k) / sum_j w_j N(x | mu_j, S_j)
    from scipy.stats import multivariate_normal as mvn

    dens = np.stack(
        [gm.weights_[k] * mvn(gm.means_[k], gm.covariances_[k]).pdf(X) for k in range(2)], 1
    )
    assert np.allclose(P, dens / dens.sum(1, keepdims=True), atol=1e-10)
    assert np.allclose(prior, gm.weights_)
    with pytest.raises(TypeError):
        posteriors_from_mixture(object(), X)


def test_topic_builders_by_hand():
    # p(z|w) = p(w|z) p(z) / sum_z' p(w|z') p(z'): word 1 with prior (0.25, 0.75)
    T = np.array([[2.0, 1.0, 1.0], [0.0, 1.0, 3.0]])  # rows -> (.5,.25,.25), (0,.25,.75)
    P, pw = topic_word_to_word_topic(T, [0.25, 0.75])
    a, b = 0.25 * 0.25, 0.25 * 0.75
    assert np.allclose(P[1], [a / (a + b), b / (a + b)])
    assert np.allclose(P[0], [1.0, 0.0])
    pw_hand = np.array([0.5 * 0.25, 0.25, 0.25 * 0.25 + 0.75 * 0.75])
    assert np.allclose(pw, pw_hand / pw_hand.sum())
    Ps, pws = topic_word_to_word_topic(T, [0.25, 0.75], subset=[1, 2])
    assert np.allclose(Ps, P[1:]) and np.isclose(pws.sum(), 1)
    C = np.random.default_rng(1).poisson(2.0, size=(20, 8))
    lda = LatentDirichletAllocation(3, random_state=0).fit(C)
    Pd, prior = posteriors_from_topics(lda, C)
    assert np.allclose(Pd, lda.transform(C) / lda.transform(C).sum(1, keepdims=True))
    assert np.allclose(prior, Pd.mean(0))


def test_prec_at_h_by_hand():
    P = np.array([[0.9, 0.1], [0.7, 0.3], [0.6, 0.4], [0.2, 0.8]])
    R = np.array([[0.0, 0.0], [5.0, 0.0], [1.0, 0.0], [6.0, 0.0]])
    Phi = np.array([[0.0, 0.0], [6.0, 0.0]])
    # class 0: high = {0, 1}, close to (0,0) = {0, 2} -> 1/2; class 1: high = {3, 2}
    # (0.8, 0.4), close to (6,0) = {3, 1} -> 1/2
    m, per = prec_at_h(P, R, 2, Phi)
    assert per.tolist() == [0.5, 0.5] and m == 0.5
    # without Phi: phi_k = r of argmax_n P_nk = r_0 and r_3, the same centres here
    assert prec_at_h(P, R, 2)[1].tolist() == [0.5, 0.5]
    assert prec_at_h(P, R, 4)[0] == 1.0
    with pytest.raises(ValueError):
        prec_at_h(P, R, 5)


def test_f_measure_kl_agreement_procrustes_by_hand():
    y = [0, 0, 0, 1]
    P = [[0.9, 0.1], [0.6, 0.4], [0.3, 0.7], [0.2, 0.8]]
    # class 0: predicted {0, 1}, true {0, 1, 2}: prec 1, rec 2/3 -> F 0.8
    # class 1: predicted {2, 3}, true {3}: prec 1/2, rec 1 -> F 2/3
    assert np.allclose(class_f_measure(y, P), [0.8, 2 / 3])
    Q = np.array([[0.5, 0.5], [0.6, 0.4], [0.6, 0.4], [0.1, 0.9]])
    kl = kl_per_object(P, Q)
    assert kl[1] == 0.0
    assert kl[0] == pytest.approx(0.9 * np.log(0.9 / 0.5) + 0.1 * np.log(0.1 / 0.5))
    assert mean_kl(P, Q) == pytest.approx(kl.mean())
    assert agreement(P, Q) == 0.75  # object 2 differs (1 vs 0); object 0 ties -> 0 both
    A = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 1.0]])
    B = A.copy()
    B[0] += [0.0, 0.3]
    Rm = np.array([[0.0, 1.0], [-1.0, 0.0]])
    # a rigid motion of B changes nothing; the residual is that of the best fit of B to A
    assert procrustes_distance(A, B @ Rm + 7.0) == pytest.approx(procrustes_distance(A, B))
    assert 0 < procrustes_distance(A, B) <= np.linalg.norm(
        (A - A.mean(0)) - (B - B.mean(0))
    ) + 1e-12


def _P(seed=0, n=150, k=4):
    return np.random.default_rng(seed).dirichlet(np.full(k, 0.3), size=n)


def test_warm_start_reuses_the_centres():
    P = _P()
    pe = ParametricEmbedding(l2_penalty_centers=2.0, random_state=0).fit(P)
    J0, n0 = pe.objective_, pe.n_iter_
    pe.set_params(warm_start=True, random_state=123)
    pe.fit(P)
    # starting at the optimum: no worse, and (almost) no work
    assert pe.objective_ <= J0 + 1e-9 * abs(J0) and pe.n_iter_ <= max(2, n0 // 2)
    cold = ParametricEmbedding(l2_penalty_centers=2.0, random_state=123).fit(P)
    assert not np.allclose(cold.class_embedding_, pe.class_embedding_)  # the start mattered


def test_eta_phi_homotopy_ends_at_the_target():
    P = _P(1)
    pe = ParametricEmbedding(l2_penalty_centers=2.0, l2_penalty_centers_path=3, random_state=0).fit(P)
    stages = {h.get("stage") for h in pe.history_} - {None}
    assert stages == {0, 1, 2}
    etas = sorted(
        {h["l2_penalty_centers"] for h in pe.history_ if "l2_penalty_centers" in h}, reverse=True
    )
    assert np.allclose(etas, [200.0, 200.0 ** (2 / 3) * 2.0 ** (1 / 3), 200.0 ** (1 / 3) * 2.0 ** (2 / 3)])
    # the final stage is the eta_phi = 2 problem: its stationarity holds at the result
    direct = ParametricEmbedding(l2_penalty_centers=2.0, random_state=0).fit(P)
    assert pe.converged_ and abs(pe.objective_ - direct.objective_) < 0.05 * abs(direct.objective_)
    with pytest.raises(ValueError):
        ParametricEmbedding(l2_penalty_centers_path=[1.0, -2.0]).fit(P)
