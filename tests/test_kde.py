"""KernelDensity against the exact Gaussian KDE, scikit-learn and SciPy."""

import math
import pickle

import numpy as np
import pytest
from scipy.stats import gaussian_kde
from sklearn.neighbors import KernelDensity as SkKDE
from sklearn.utils.estimator_checks import check_estimator

from vastml.kernels import KernelDensity, sheather_jones


def exact_log_density(X, Y, sigma, w=None):
    w = np.full(len(X), 1 / len(X)) if w is None else w / w.sum()
    d2 = (((Y[:, None, :] - X[None, :, :]) / sigma) ** 2).sum(-1)
    dens = np.exp(-0.5 * d2) @ w / np.prod(np.sqrt(2 * np.pi) * sigma)
    return np.log(dens)


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("method", ["auto", "direct", "ifgt", "direct-tree"])
def test_score_samples_equals_exact_density(d, method):
    rng = np.random.default_rng(d)
    X = rng.normal(size=(1500, d))
    Y = rng.normal(size=(200, d))
    sigma = np.full(d, 0.4)
    kde = KernelDensity(bandwidth=0.4, epsilon=1e-8, method=method).fit(X)
    got = np.exp(kde.score_samples(Y))
    want = np.exp(exact_log_density(X, Y, sigma))
    assert np.abs(got - want).max() <= 1e-8 / np.prod(np.sqrt(2 * np.pi) * sigma)


def test_rtol_certifies_relative_accuracy_in_the_tails():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(2000, 3))
    Y = rng.normal(size=(300, 3)) * 2.0  # many far-tail targets
    want = np.exp(exact_log_density(X, Y, np.full(3, 0.1)))
    keep = want > 1e-250  # the numpy oracle itself underflows beyond
    Y, want = Y[keep], want[keep]
    loose = np.exp(KernelDensity(bandwidth=0.1, epsilon=1e-6).fit(X).score_samples(Y))
    # without rtol: the absolute contract, and below twice its error the log-space sums (so
    # the far tail is relative-accurate even here)
    norm = (2 * np.pi * 0.1**2) ** -1.5
    assert np.max(np.abs(loose - want)) <= 1e-6 * norm
    far = want < 2e-6 * norm
    assert far.sum() > 10 and np.max(np.abs(loose[far] - want[far]) / want[far]) <= 2e-6
    tight = np.exp(KernelDensity(bandwidth=0.1, epsilon=1e-6, rtol=1e-6).fit(X).score_samples(Y))
    assert np.max(np.abs(tight - want) / want) <= 1e-6


def test_matches_scikit_learn_and_scipy():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 2))
    Y = rng.normal(size=(100, 2))
    ours = KernelDensity(bandwidth=0.3, epsilon=1e-10).fit(X).score_samples(Y)
    sk = SkKDE(bandwidth=0.3, rtol=1e-10).fit(X).score_samples(Y)
    np.testing.assert_allclose(ours, sk, rtol=1e-6)
    # scipy's gaussian_kde in 1-D: its factor times the data's std is the kernel's std.
    x = X[:, 0]
    kd = gaussian_kde(x, bw_method=0.2 / x.std(ddof=1))
    ours1 = KernelDensity(bandwidth=0.2, epsilon=1e-10).fit(x[:, None]).score_samples(Y[:, :1])
    np.testing.assert_allclose(ours1, kd.logpdf(Y[:, 0]), rtol=1e-6)


def test_selectors_and_weights():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(4000, 2)) * [1.0, 2.0]
    kde = KernelDensity(bandwidth="sheather-jones").fit(X)
    assert kde.bandwidth_[0] == pytest.approx(sheather_jones(X[:, 0]))
    assert kde.bandwidth_[1] > kde.bandwidth_[0]
    for name in ("scott", "silverman"):
        assert KernelDensity(bandwidth=name).fit(X).bandwidth_.shape == (2,)
    w = rng.random(4000)
    got = KernelDensity(bandwidth=0.5, epsilon=1e-10).fit(X, sample_weight=w).score_samples(X[:20])
    np.testing.assert_allclose(got, exact_log_density(X, X[:20], np.full(2, 0.5), w), rtol=1e-8)


def test_full_covariance_bandwidth():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(800, 2))
    Y = rng.normal(size=(50, 2))
    H = np.array([[0.09, 0.05], [0.05, 0.16]])
    got = KernelDensity(bandwidth=H, epsilon=1e-10).fit(X).score_samples(Y)
    diff = Y[:, None, :] - X[None, :, :]
    quad = np.einsum("ijk,kl,ijl->ij", diff, np.linalg.inv(H), diff)
    want = np.log(np.exp(-0.5 * quad).mean(1) / (2 * np.pi * np.sqrt(np.linalg.det(H))))
    np.testing.assert_allclose(got, want, rtol=1e-8)
    s = KernelDensity(bandwidth=H).fit(np.zeros((1, 2))).sample(20000, random_state=0)
    np.testing.assert_allclose(np.cov(s.T), H, atol=0.01)
    with pytest.raises(ValueError, match="positive definite"):
        KernelDensity(bandwidth=np.array([[1.0, 2.0], [2.0, 1.0]])).fit(X)


def test_density_integrates_to_one_and_samples():
    X = np.random.default_rng(2).normal(size=(2000, 1))
    kde = KernelDensity(bandwidth=0.2).fit(X)
    grid = np.linspace(-7, 7, 4001)[:, None]
    total = np.trapezoid(np.exp(kde.score_samples(grid)), grid[:, 0])
    assert total == pytest.approx(1.0, abs=1e-5)
    s = kde.sample(20000, random_state=0)
    assert s.shape == (20000, 1)
    assert s.std() == pytest.approx(math.sqrt(X.var() + 0.04), rel=0.03)
    assert kde.score(X[:10]) == pytest.approx(kde.score_samples(X[:10]).sum())


def test_pickle_round_trip():
    X = np.random.default_rng(3).normal(size=(500, 2))
    kde = KernelDensity(bandwidth=0.3).fit(X)
    again = pickle.loads(pickle.dumps(kde))
    np.testing.assert_array_equal(again.score_samples(X[:5]), kde.score_samples(X[:5]))


def test_scikit_learn_estimator_checks():
    check_estimator(KernelDensity())


@pytest.mark.parametrize(
    "params, message",
    [
        ({"bandwidth": 0.0}, "bandwidth"),
        ({"bandwidth": -1.0}, "bandwidth"),
        ({"bandwidth": "rule"}, "bandwidth"),
        ({"bandwidth": [1.0, 2.0, 3.0]}, "bandwidth"),
        ({"epsilon": 2.0}, "epsilon"),
        ({"method": "fft"}, "method"),
    ],
)
def test_bad_parameters(params, message):
    with pytest.raises((ValueError, TypeError), match=message):
        KernelDensity(**params).fit(np.random.default_rng(0).normal(size=(20, 2)))


def test_bad_data():
    with pytest.raises(ValueError):
        KernelDensity().fit([[np.nan, 1.0]])
    kde = KernelDensity().fit(np.zeros((5, 2)) + np.arange(5)[:, None])
    with pytest.raises(ValueError, match="features"):
        kde.score_samples(np.zeros((3, 3)))


def exact_log_density_stable(X, Y, sigma):
    """log of the Gaussian KDE by log-sum-exp (no underflow), blockwise."""
    out = np.empty(len(Y))
    for s in range(0, len(Y), 500):
        d2 = (((Y[s:s + 500, None, :] - X[None, :, :]) / sigma) ** 2).sum(-1)
        top = (-0.5 * d2).max(1)
        out[s:s + 500] = top + np.log(np.exp(-0.5 * d2 - top[:, None]).sum(1))
    return out - np.log(len(X)) - X.shape[1] * np.log(np.sqrt(2 * np.pi) * sigma)


def ring(n, rng):
    t = rng.uniform(0, 2 * np.pi, n)
    r = 1 + 0.02 * rng.standard_normal(n)
    return np.c_[r * np.cos(t), 3 * r * np.sin(t)]


def test_log_densities_far_from_the_data_are_finite_and_exact():
    rng = np.random.default_rng(3)
    X = ring(4000, rng)
    Y = np.c_[rng.uniform(-1.2, 1.2, 3000), rng.uniform(-3.5, 3.5, 3000)]
    want = exact_log_density_stable(X, Y, 0.02)
    assert np.sum(want < -745) > 100  # many densities underflow in linear space
    for rtol in (None, 1e-6):
        got = KernelDensity(bandwidth=0.02, rtol=rtol).fit(X).score_samples(Y)
        assert np.all(np.isfinite(got))
        tiny = want < np.log(1e-6 / (2 * np.pi * 0.02**2))  # below the absolute accuracy
        assert np.max(np.abs(got[tiny] - want[tiny])) <= 2e-6
        if rtol is not None:
            assert np.max(np.abs(got - want)) <= 2e-6


def test_rtol_in_one_call_at_many_targets_equals_chunked_calls():
    # the shape that once stalled: most targets uncertified, many of them far out
    rng = np.random.default_rng(4)
    X = ring(20000, rng)
    Y = np.c_[rng.uniform(-1.2, 1.2, 60000), rng.uniform(-3.5, 3.5, 60000)]
    kde = KernelDensity(bandwidth=0.02, rtol=1e-6).fit(X)
    whole = kde.score_samples(Y)
    parts = np.concatenate([kde.score_samples(Y[s:s + 10000]) for s in range(0, 60000, 10000)])
    assert np.all(np.isfinite(whole))
    np.testing.assert_allclose(whole, parts, rtol=0, atol=2e-6)
    idx = rng.choice(60000, 400, replace=False)
    np.testing.assert_allclose(whole[idx], exact_log_density_stable(X, Y[idx], 0.02), rtol=0, atol=2e-6)


def test_verbose_shows_selection_planning_and_chunked_evaluation(capfd, monkeypatch):
    import vastml.kernels._kde as kde_module

    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 2))
    Y = rng.normal(size=(1000, 2))
    quiet = KernelDensity(bandwidth="sheather-jones").fit(X)
    loud = KernelDensity(bandwidth="sheather-jones", verbose=True).fit(X)
    assert "sheather_jones" in capfd.readouterr().err
    np.testing.assert_array_equal(quiet.bandwidth_, loud.bandwidth_)
    monkeypatch.setattr(kde_module, "EVALUATION_CHUNK", 128)  # 8 chunks of 1,000 targets
    got = loud.score_samples(Y)
    # the transform is planned by the first score_samples, for its targets
    err = capfd.readouterr().err
    assert "GaussTransform planning" in err and "KernelDensity evaluation" in err
    np.testing.assert_allclose(got, quiet.score_samples(Y), rtol=0, atol=1e-12)
    sheather_jones(X[:, 0], verbose=True)
    assert "sheather_jones" in capfd.readouterr().err


def test_rtol_at_a_tiny_bandwidth_tightens_in_one_tree_pass(monkeypatch):
    # uniform points and a kernel far narrower than their spacing: every target has a few
    # sources in reach, the first pass (a tree) certifies about half of the densities, and
    # the rest are recomputed by one more tree pass at the smallest accuracy any needs
    import vastml.kernels._kde as kde_module

    monkeypatch.setattr(kde_module, "LOG_PATH_MAX_SOURCES", -1)  # the fast transform first
    rng = np.random.default_rng(20)
    X = rng.random((8000, 2))
    Y = rng.random((3000, 2))
    sigma = 0.004
    kde = KernelDensity(bandwidth=sigma, rtol=1e-6).fit(X)

    calls = []
    real = kde_module.gauss_transform

    def spy(sources, targets, weights, bandwidth, epsilon, method, n_jobs):
        calls.append((len(targets), epsilon, method))
        return real(sources, targets, weights, bandwidth, epsilon, method, n_jobs)

    monkeypatch.setattr(kde_module, "gauss_transform", spy)
    got = kde.score_samples(Y)
    assert kde._transform.method_ == "direct-tree"  # planned by score_samples, for Y
    tree_passes = [c for c in calls if c[2] == "direct-tree"]
    assert len(tree_passes) == 1 and tree_passes[0][0] > 500, calls
    want = exact_log_density_stable(X, Y, sigma)
    # relative accuracy rtol on the density is an absolute one on its log
    np.testing.assert_allclose(got, want, rtol=0, atol=1.01e-6)


def test_the_transform_is_planned_for_the_targets_of_the_call():
    # planned by the first score_samples for its targets (not at fit for as many as there
    # are sources), again for a call with more than four times as many, and kept otherwise;
    # every call within epsilon of the exact density
    rng = np.random.default_rng(8)
    X = rng.normal(size=(3000, 3))
    kde = KernelDensity(bandwidth=0.4, epsilon=1e-9).fit(X)
    assert kde._transform is None
    got = {}
    for m in (10, 40, 41, 200, 30):
        Y = rng.normal(size=(m, 3))
        before = kde._transform
        dens = np.exp(kde.score_samples(Y))
        replanned = kde._transform is not before
        got[m] = (replanned, kde._planned_for, kde._transform.n_targets)
        want = np.exp(exact_log_density_stable(X, Y, 0.4))
        norm = (np.sqrt(2 * np.pi) * 0.4) ** 3
        np.testing.assert_allclose(dens, want, rtol=0, atol=2e-9 / norm)
    assert got == {10: (True, 10, 10), 40: (False, 10, 10), 41: (True, 41, 41),
                   200: (True, 200, 200), 30: (False, 200, 200)}


def test_rtol_at_a_tiny_bandwidth_takes_every_density_in_log_space(monkeypatch):
    # the same kernel: a handful of sources in reach of each target, so every density goes to
    # the log-space sums over the tree built at fit, used again by each call (no transform)
    import vastml.kernels._kde as kde_module

    rng = np.random.default_rng(20)
    X = rng.random((8000, 2))
    Y = rng.random((3000, 2))
    sigma = 0.004
    kde = KernelDensity(bandwidth=sigma, rtol=1e-6).fit(X)
    assert kde._transform is None
    plan = kde._log_plan
    assert plan is not None
    calls = []
    monkeypatch.setattr(kde_module, "gauss_transform", lambda *a: calls.append(a))
    got = kde.score_samples(Y)
    again = kde.score_samples(Y[:100])
    assert not calls and kde._log_plan is plan
    want = exact_log_density_stable(X, Y, sigma)
    np.testing.assert_allclose(got, want, rtol=0, atol=1.01e-6)
    np.testing.assert_array_equal(again, got[:100])
    # pickled without the tree, rebuilt on use
    back = pickle.loads(pickle.dumps(kde))
    np.testing.assert_array_equal(back.score_samples(Y[:100]), got[:100])


@pytest.mark.parametrize("log_path", [True, False])
def test_rtol_on_heavy_tailed_data_at_far_targets_equals_the_exact_log_sum_exp(monkeypatch, log_path):
    # Student-t sources and targets (1.5 degrees of freedom) and a narrow kernel: targets out
    # to 1e4 spreads, where the log density is about -1e9 (scikit-learn's rtol search is off by
    # up to 1e8 there); the float64 log-sum-exp over every source is the oracle
    import vastml.kernels._kde as kde_module

    if not log_path:
        monkeypatch.setattr(kde_module, "LOG_PATH_MAX_SOURCES", -1)
    rng = np.random.default_rng(45)

    def student(n):
        return rng.standard_normal((n, 2)) / np.sqrt(rng.chisquare(1.5, size=(n, 1)) / 1.5)

    X, Y = student(5000), student(4000)
    sigma = 0.01
    kde = KernelDensity(bandwidth=sigma, rtol=1e-6).fit(X)
    assert kde._log_path == log_path
    got = kde.score_samples(Y)
    far = np.argsort(-np.abs(Y).max(axis=1))[:100]
    idx = np.r_[far, rng.choice(len(Y), 300, replace=False)]
    want = exact_log_density_stable(X, Y[idx], sigma)
    assert want.min() < -1e6
    # rtol, plus the rounding of a logarithm that large
    tol = 1.01e-6 + 8 * np.finfo(float).eps * np.abs(want)
    assert np.all(np.abs(got[idx] - want) <= tol), np.max(np.abs(got[idx] - want) - tol)
