"""Sample weights of Parametric Embedding (spec 001, "Other expectations"): object n's term of
J, w_n (-sum_k P_nk log q_nk + eta_r |r_n|^2), against three oracles: repeating each object
w_n times, dropping the zero-weight objects, and finite differences of the weighted objective
written out by hand."""

import numpy as np
import pytest
from oracles.pe import pe_log_posteriors
from vastml import _core
from vastml.embed import ParametricEmbedding


def _weighted_J(P, R, Phi, lp, eta_r, eta_phi, w):
    """J of the weighted model, by hand from the NumPy log posteriors."""
    logQ = pe_log_posteriors(R, Phi, lp)
    ce = -np.where(P > 0, P * logQ, 0.0).sum(1)
    return float((w * (ce + eta_r * (R * R).sum(1))).sum() + eta_phi * (Phi * Phi).sum())


def _problem(seed, N=30, K=4, D=2):
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.full(K, 0.5), N)
    return P, np.log(rng.dirichlet(np.ones(K))), rng.normal(size=(N, D)), rng.normal(size=(K, D))


def _fd(f, x, h=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        a, b = x.copy(), x.copy()
        a[i] += h
        b[i] -= h
        g[i] = (f(a) - f(b)) / (2 * h)
    return g


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_weighted_objective_and_gradients_match_the_hand_oracle(seed):
    P, lp, R, Phi = _problem(seed)
    w = np.random.default_rng(seed + 100).uniform(0, 3, P.shape[0])
    w[::7] = 0.0
    eta_r, eta_phi = 0.1, 0.7
    options = {"eta_r": eta_r, "eta_phi": eta_phi, "grad_r": True, "sample_weight": w}
    J, _, _, G, GR = _core.pe_evaluate(P, R, Phi, lp, options)
    assert J == pytest.approx(_weighted_J(P, R, Phi, lp, eta_r, eta_phi, w), rel=1e-12)
    fd_phi = _fd(lambda F: _weighted_J(P, R, F, lp, eta_r, eta_phi, w), Phi)
    fd_r = _fd(lambda X: _weighted_J(P, X, Phi, lp, eta_r, eta_phi, w), R)
    np.testing.assert_allclose(G, fd_phi, atol=1e-6)
    np.testing.assert_allclose(GR, fd_r, atol=1e-6)
    # a zero-weight object's coordinates do not enter J
    assert not GR[0].any()


def test_weighted_reduced_gradient_and_hessian_match_finite_differences():
    P, lp, R0, Phi = _problem(5, N=60, K=3)
    w = np.random.default_rng(9).uniform(0, 2, P.shape[0])
    kw = {"eta_r": 0.1, "eta_phi": 0.7, "tol_r": 1e-26, "max_newton_iter": 100}

    def reduced(F):
        J, _, _, G, R, _ = _core.pe_reduced(P, np.ascontiguousarray(F), R0, lp,
                                            {**kw, "sample_weight": w})
        return J, G, R

    J, G, R = reduced(Phi)
    # J~(Phi) = min_R J: the hand objective at the R-step's R, whose rows do not depend on w
    assert J == pytest.approx(_weighted_J(P, R, Phi, lp, 0.1, 0.7, w), rel=1e-12)
    Ru = _core.pe_reduced(P, Phi, R0, lp, kw)[4]  # unweighted
    np.testing.assert_array_equal(R, Ru)
    np.testing.assert_allclose(G, _fd(lambda F: reduced(F)[0], Phi, 1e-5), atol=1e-5)
    Jh, Gh, H, Rh, _ = _core.pe_reduced_hessian(P, Phi, R0, lp, {**kw, "sample_weight": w})
    assert Jh == J
    np.testing.assert_array_equal(Gh, G)
    np.testing.assert_array_equal(Rh, R)
    h = 1e-5
    fd = np.empty_like(H)
    for i in range(Phi.size):
        a, b = Phi.ravel().copy(), Phi.ravel().copy()
        a[i] += h
        b[i] -= h
        fd[:, i] = (reduced(a.reshape(Phi.shape))[1] - reduced(b.reshape(Phi.shape))[1]).ravel()
    fd /= 2 * h
    np.testing.assert_allclose(H, fd, atol=1e-6 * np.abs(H).max())


@pytest.mark.parametrize("phi_step", ["newton", "reduced", "paper"])
def test_integer_weights_equal_repeated_objects(phi_step):
    P = np.random.default_rng(3).dirichlet(np.full(4, 0.4), 80)
    w = np.random.default_rng(4).integers(0, 4, P.shape[0])
    kw = {"l2_penalty_centers": 2.0, "random_state": 0, "phi_step": phi_step}
    a = ParametricEmbedding(**kw).fit(P, sample_weight=w)
    b = ParametricEmbedding(**kw).fit(np.repeat(P, w, axis=0))
    np.testing.assert_allclose(a.class_embedding_, b.class_embedding_, atol=1e-6)
    assert a.objective_ == pytest.approx(b.objective_, rel=1e-9)
    assert a.kl_ == pytest.approx(b.kl_, rel=1e-9)
    np.testing.assert_allclose(a.embedding_[np.repeat(np.arange(len(w)), w)], b.embedding_,
                               atol=1e-6)
    # objective_ is the weighted J at the returned point
    J = _weighted_J(P, a.embedding_, a.class_embedding_, np.log(a.class_prior_), 0.1, 2.0, w)
    assert a.objective_ == pytest.approx(J, rel=1e-10)


def test_zero_weight_equals_dropping_the_object():
    P = np.random.default_rng(6).dirichlet(np.full(3, 0.4), 60)
    w = np.random.default_rng(7).uniform(0.5, 2.0, 60)
    w[[0, 5, 17, 40]] = 0.0
    keep = w > 0
    kw = {"l2_penalty_centers": 1.0, "random_state": 0, "init": "mds"}
    a = ParametricEmbedding(**kw).fit(P, sample_weight=w)
    b = ParametricEmbedding(**kw).fit(P[keep], sample_weight=w[keep])
    np.testing.assert_allclose(a.class_embedding_, b.class_embedding_, atol=1e-7)
    assert a.objective_ == pytest.approx(b.objective_, rel=1e-10)
    np.testing.assert_allclose(a.embedding_[keep], b.embedding_, atol=1e-7)
    # the left-out objects sit where transform puts them
    np.testing.assert_allclose(a.embedding_[~keep], b.transform(P[~keep]), atol=1e-7)


def test_weights_move_the_centres_and_scale_like_the_centre_penalty():
    P = np.random.default_rng(8).dirichlet(np.full(3, 0.4), 50)
    w = np.random.default_rng(9).uniform(0.2, 3.0, 50)
    kw = {"random_state": 0, "init": "mds"}
    plain = ParametricEmbedding(l2_penalty_centers=1.0, **kw).fit(P)
    a = ParametricEmbedding(l2_penalty_centers=1.0, **kw).fit(P, sample_weight=w)
    assert np.abs(a.class_embedding_ - plain.class_embedding_).max() > 1e-3
    # J(c w, c eta_phi) = c J(w, eta_phi): the same centres
    b = ParametricEmbedding(l2_penalty_centers=2.5, **kw).fit(P, sample_weight=2.5 * w)
    np.testing.assert_allclose(a.class_embedding_, b.class_embedding_, atol=1e-6)
    assert b.objective_ == pytest.approx(2.5 * a.objective_, rel=1e-9)
    # all weights 1 is the unweighted fit
    c = ParametricEmbedding(l2_penalty_centers=1.0, **kw).fit(P, sample_weight=np.ones(50))
    np.testing.assert_allclose(c.class_embedding_, plain.class_embedding_, atol=1e-12)
    # "auto" reads N as the total weight
    d = ParametricEmbedding(l2_penalty_centers="auto", **kw).fit(P, sample_weight=w)
    assert d.l2_penalty_centers_ == pytest.approx(0.01 * w.sum())


def test_weighted_score_is_the_weighted_mean_kl():
    P = np.random.default_rng(10).dirichlet(np.full(3, 0.5), 40)
    w = np.random.default_rng(11).uniform(0, 2, 40)
    pe = ParametricEmbedding(l2_penalty_centers=1.0, random_state=0).fit(P)
    Q = pe.posteriors_at(pe.transform(P))
    kl = (P * (np.log(P) - np.log(Q))).sum(1)
    assert pe.score(P, sample_weight=w) == pytest.approx(-(w * kl).sum() / w.sum(), rel=1e-10)
    assert pe.score(P) == pytest.approx(-kl.mean(), rel=1e-10)


@pytest.mark.parametrize(
    ("w", "exc"),
    [
        (np.ones(5), ValueError),  # wrong length
        (-np.ones(10), ValueError),
        (np.zeros(10), ValueError),
        (np.r_[np.ones(9), np.nan], ValueError),
        (np.ones((10, 1)), ValueError),
        (["a"] * 10, TypeError),
    ],
)
def test_bad_sample_weight(w, exc):
    P = np.random.default_rng(0).dirichlet(np.ones(3), 10)
    with pytest.raises(exc, match="`sample_weight`"):
        ParametricEmbedding(l2_penalty_centers=1.0).fit(P, sample_weight=w)


def test_coarse_to_fine_subsets_carry_the_weights(monkeypatch):
    # nested subsets (eta_phi scaled by their share of the total weight) end at the optimum of
    # the direct fit on all objects
    from vastml.embed import _parametric

    P = np.random.default_rng(12).dirichlet(np.full(3, 0.4), 500)
    w = np.random.default_rng(13).uniform(0.0, 4.0, 500)
    kw = {"l2_penalty_centers": 5.0, "random_state": 0, "init": "mds"}
    direct = ParametricEmbedding(coarse_to_fine=False, **kw).fit(P, sample_weight=w)
    monkeypatch.setattr(_parametric, "_STAGE_MIN", 20)
    staged = ParametricEmbedding(coarse_to_fine=True, **kw).fit(P, sample_weight=w)
    assert {h["n_objects"] for h in staged.history_} > {500}  # the subsets did run
    # J is invariant under rotations of the centres about the origin: compare their Gram matrix
    A, B = staged.class_embedding_, direct.class_embedding_
    # (both stop when J is within ~1e-12 relative: the centres agree to ~1e-6 relative)
    np.testing.assert_allclose(A @ A.T, B @ B.T, rtol=1e-5, atol=1e-8)
    assert staged.objective_ == pytest.approx(direct.objective_, rel=1e-10)
    # a subset problem keeps its objects' weights and scales eta_phi by their weight share
    kern = _parametric._Kernels(P, np.log(np.full(3, 1 / 3)), 0.1, 5.0, 1e-12, 50, True, None, w)
    idx = np.arange(0, 500, 7)
    sub = kern.subset(idx, 500)
    np.testing.assert_array_equal(sub.w, w[idx])
    assert sub.eta_phi == pytest.approx(5.0 * w[idx].sum() / w.sum(), rel=1e-12)
    Jw = _weighted_J(P[idx], np.zeros((len(idx), 2)), A, kern.lp, 0.1, 0.0, w[idx])
    J0 = sub.evaluate(np.zeros((len(idx), 2)), A)[0] - sub.eta_phi * (A * A).sum()
    assert J0 == pytest.approx(Jw, rel=1e-12)
