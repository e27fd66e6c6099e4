"""vastml.distributed: reducer oracles (no cluster), then everything on a LocalCluster."""

import os
import signal
import sys
import threading
import time
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from vastml.distributed import arow_mr_reduce, solve_riccati

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
db = pytest.importorskip("dask.bag")
distributed = pytest.importorskip("distributed")
cloudpickle = pytest.importorskip("cloudpickle")

from vastml.datasets import make_binary_waveform  # noqa: E402
from vastml.distributed import (  # noqa: E402
    AROWMapReduce,
    DistributedLogisticRegression,
    ShardedKernelDensity,
    sharded_gauss_transform,
)
from vastml.kernels import GaussTransform  # noqa: E402
from vastml.svm import AROWClassifier  # noqa: E402

# Workers cannot import this test module: ship its helper functions by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def random_spd(rng, d):
    a = rng.normal(size=(d, d))
    return a @ a.T + 0.5 * np.eye(d)


def sym_kl_loss(mu, cov, mus, covs, p):
    """Eq. (6.9): sum_m p_m D^S_KL(N(mu, cov) || N(mu_m, cov_m)) (the log-dets cancel)."""
    d = len(mu)
    inv = np.linalg.inv(cov)
    total = 0.0
    for m_mu, m_cov, pm in zip(mus, covs, p):
        m_inv = np.linalg.inv(m_cov)
        dm = mu - m_mu
        # D^S = (KL(a||b) + KL(b||a)) / 2
        total += pm * 0.25 * (
            np.trace(m_inv @ cov) + np.trace(inv @ m_cov) + dm @ (m_inv + inv) @ dm - 2 * d
        )
    return total


# --- reducer oracles (spec section 7, items 35-37) -------------------------------------------


def test_reducer_one_dimensional_hand_case():
    mu, cov = arow_mr_reduce([[0.0], [2.0]], [[[1.0]], [[1.0]]], [5, 5])
    assert mu[0] == pytest.approx(1.0, abs=1e-12)
    assert cov[0, 0] == pytest.approx(np.sqrt(2.0), abs=1e-10)
    mu, var = arow_mr_reduce([[0.0], [2.0]], [[1.0], [1.0]], [1, 1])
    assert (mu[0], var[0]) == pytest.approx((1.0, np.sqrt(2.0)), abs=1e-10)


def test_reducer_single_model_and_identical_models(rng):
    mu = rng.normal(size=4)
    S = random_spd(rng, 4)
    out_mu, out_cov = arow_mr_reduce(mu[None], S[None], [7])
    np.testing.assert_array_equal(out_mu, mu)
    np.testing.assert_array_equal(out_cov, S)
    out_mu, out_cov = arow_mr_reduce([mu, mu, mu], [S, S, S], [1, 2, 3])
    np.testing.assert_allclose(out_mu, mu, atol=1e-12)
    np.testing.assert_allclose(out_cov, S, atol=1e-10)


def test_reducer_ignores_empty_models(rng):
    mus = rng.normal(size=(3, 3))
    covs = np.stack([random_spd(rng, 3) for _ in range(3)])
    with_empty = arow_mr_reduce(mus, covs, [4, 0, 6])
    without = arow_mr_reduce(mus[[0, 2]], covs[[0, 2]], [4, 6])
    np.testing.assert_allclose(with_empty[0], without[0])
    np.testing.assert_allclose(with_empty[1], without[1])


def test_riccati_solver_random_spd(rng):
    for d in (1, 2, 5, 30):
        A, B = random_spd(rng, d), random_spd(rng, d)
        X = solve_riccati(A, B)
        assert np.linalg.norm(X @ A @ X - B) / np.linalg.norm(B) < 1e-10
        np.testing.assert_array_equal(X, X.T)
        assert np.linalg.eigvalsh(X).min() > 0


def test_printed_closed_form_is_wrong_and_ours_is_not(rng):
    # The thesis's X = U^-1/2 B^1/2 U^-T/2 does not solve XAX = B in general; ours does.
    from scipy.linalg import sqrtm

    A, B = random_spd(rng, 3), random_spd(rng, 3)
    U = np.linalg.cholesky(A).T
    Uh = np.real(sqrtm(np.linalg.inv(U)))
    printed = Uh @ np.real(sqrtm(B)) @ Uh.T
    assert np.linalg.norm(printed @ A @ printed - B) / np.linalg.norm(B) > 1e-3
    X = solve_riccati(A, B)
    assert np.linalg.norm(X @ A @ X - B) / np.linalg.norm(B) < 1e-10


def test_diagonal_reducer_equals_full_on_diagonal_models(rng):
    # With diagonal covariances the full reducer stays diagonal only when the mean deviations
    # do not couple features (B's outer products): here the means differ in one feature.
    mus = np.tile(rng.normal(size=4), (5, 1))
    mus[:, 2] = rng.normal(size=5)
    var = rng.uniform(0.2, 2.0, size=(5, 4))
    counts = rng.integers(1, 100, size=5)
    mu_d, var_d = arow_mr_reduce(mus, var, counts)
    mu_f, cov_f = arow_mr_reduce(mus, np.stack([np.diag(v) for v in var]), counts)
    np.testing.assert_allclose(mu_d, mu_f, atol=1e-9)
    np.testing.assert_allclose(var_d, np.diag(cov_f), atol=1e-9)
    np.testing.assert_allclose(cov_f, np.diag(np.diag(cov_f)), atol=1e-9)
    # In general the diagonal reducer is the optimum over diagonal covariances only.
    mus = rng.normal(size=(5, 4))
    p = counts / counts.sum()
    covs = np.stack([np.diag(v) for v in var])
    mu_d, var_d = arow_mr_reduce(mus, var, counts, tol=1e-12)
    mu_f, cov_f = arow_mr_reduce(mus, covs, counts, tol=1e-12)
    diag_loss = sym_kl_loss(mu_d, np.diag(var_d), mus, covs, p)
    assert sym_kl_loss(mu_f, cov_f, mus, covs, p) < diag_loss
    assert diag_loss < sym_kl_loss(mu_d, np.diag(var_d * 1.01), mus, covs, p)
    assert diag_loss < sym_kl_loss(mu_d + 0.01, np.diag(var_d), mus, covs, p)


def test_reducer_is_stationary(rng):
    mus = rng.normal(size=(4, 3))
    covs = np.stack([random_spd(rng, 3) for _ in range(4)])
    counts = np.array([1.0, 2.0, 3.0, 4.0])
    p = counts / counts.sum()
    mu, cov = arow_mr_reduce(mus, covs, counts, tol=1e-13, max_iter=500)
    f0 = sym_kl_loss(mu, cov, mus, covs, p)
    h = 1e-5
    for i in range(3):
        e = np.zeros(3)
        e[i] = h
        g = (sym_kl_loss(mu + e, cov, mus, covs, p) - sym_kl_loss(mu - e, cov, mus, covs, p)) / (2 * h)
        assert abs(g) < 1e-6
    for i in range(3):
        for j in range(i, 3):
            E = np.zeros((3, 3))
            E[i, j] = E[j, i] = h
            g = (sym_kl_loss(mu, cov + E, mus, covs, p) - sym_kl_loss(mu, cov - E, mus, covs, p)) / (2 * h)
            assert abs(g) < 1e-6
    # ... and it is a minimum: moving away increases the loss.
    assert sym_kl_loss(mu + 0.01, cov, mus, covs, p) > f0
    assert sym_kl_loss(mu, 1.01 * cov, mus, covs, p) > f0


def test_reducer_validation():
    with pytest.raises(ValueError, match="covariances"):
        arow_mr_reduce([[0.0, 1.0]], [[[1.0]]], [1])
    with pytest.raises(ValueError, match="counts"):
        arow_mr_reduce([[0.0], [1.0]], [[1.0], [1.0]], [0, 0])
    with pytest.raises(ValueError, match="counts"):
        arow_mr_reduce([[0.0], [1.0]], [[1.0], [1.0]], [1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(Exception, match="converge"):
            arow_mr_reduce([[0.0], [2.0]], [[1.0], [3.0]], [1, 1], max_iter=1)


def test_binary_waveform_generator():
    X, y = make_binary_waveform(3000, n_noise_features=4, random_state=1)
    assert X.shape == (3000, 25)
    assert abs((y == 1).mean() - 2 / 3) < 0.03
    X2, _ = make_binary_waveform(3000, n_noise_features=4, random_state=1)
    np.testing.assert_array_equal(X, X2)
    # At i = 11 (column 10): h1 = 6, h2 = h3 = 2, so class 3 averages 2 and classes 1, 2 average 4.
    assert abs(X[y == -1, 10].mean() - 2.0) < 0.15
    assert abs(X[y == 1, 10].mean() - 4.0) < 0.15
    assert abs(X[:, 21:].std() - 1.0) < 0.05


# --- on a LocalCluster -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address=None, silence_logs=40,
    ) as cluster, distributed.Client(cluster) as c:
        c.run(lambda: __import__("vastml.distributed"))  # workers import once, up front
        yield c


def waveform(n, seed=0, extra=0):
    return make_binary_waveform(n, n_noise_features=extra, random_state=seed)


def local_shard_models(X, y, bounds, classes, seed, **params):
    out = []
    for m, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]), start=1):
        if b == a:
            continue
        d = X.shape[1] + 1
        if set(np.unique(y[a:b])) == set(classes):
            est = AROWClassifier(random_state=seed + m, n_jobs=1, **params).fit(X[a:b], y[a:b])
        else:
            cov = np.repeat(np.eye(d)[None], 1, 0)
            est = AROWClassifier.from_model(np.zeros((1, d)), cov, classes, random_state=seed + m, n_jobs=1, **params)
            est.partial_fit(X[a:b], y[a:b])
        out.append((est.mean_[0], est.covariance_[0], b - a))
    return out


def test_arow_mr_one_partition_is_single_machine_arow(client):
    X, y = waveform(3000)
    single = AROWClassifier(update_damping=5.0, random_state=7).fit(X, y)
    mr = AROWMapReduce(update_damping=5.0, random_state=7, client=client).fit(da.from_array(X, chunks=(3000, 21)), da.from_array(y, chunks=3000))
    np.testing.assert_array_equal(mr.mean_, single.mean_)
    np.testing.assert_array_equal(mr.covariance_, single.covariance_)
    np.testing.assert_array_equal(mr.predict(X[:50]), single.predict(X[:50]))


@pytest.mark.parametrize("covariance", ["full", "diagonal"])
def test_arow_mr_equals_local_map_then_reduce(client, covariance):
    X, y = waveform(4000, seed=1)
    clf = AROWMapReduce(update_damping=5.0, covariance=covariance, n_partitions=4, random_state=3, client=client)
    clf.fit(da.from_array(X, chunks=(1000, 21)), da.from_array(y, chunks=1000))
    models = []
    for m in range(4):
        est = AROWClassifier(update_damping=5.0, covariance=covariance, random_state=3 + m).fit(X[1000 * m : 1000 * (m + 1)], y[1000 * m : 1000 * (m + 1)])
        models.append(est)
    mu, cov = arow_mr_reduce([e.mean_[0] for e in models], [e.covariance_[0] for e in models], [1000] * 4)
    np.testing.assert_allclose(clf.mean_[0], mu, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(clf.covariance_[0], cov, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(clf.partition_sizes_, [1000] * 4)
    Xt, yt = waveform(2000, seed=2)
    assert clf.score(Xt, yt) > 0.8
    lazy = clf.predict(da.from_array(Xt, chunks=(500, 21)))
    np.testing.assert_array_equal(lazy.compute(), clf.predict(Xt))


def test_arow_mr_single_class_and_empty_partitions(client):
    X, y = waveform(3000, seed=4)
    order = np.argsort(y, kind="stable")  # sorted labels: some partitions see one class only
    X, y = X[order], y[order]
    bounds = [0, 0, 600, 1200, 1800, 2400, 3000]  # the first partition is empty
    blocks = [(X[a:b], y[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    bag = db.from_sequence(blocks, partition_size=1).filter(lambda b: len(b[1]) > 0)
    clf = AROWMapReduce(update_damping=5.0, random_state=0, client=client).fit(bag)
    assert clf.partition_sizes_.tolist() == [0, 600, 600, 600, 600, 600]
    assert set(np.unique(y[:600])) == {-1} and set(np.unique(y[-600:])) == {1}
    # Oracle: the same models trained here (partition m has seed 0 + m), reduced.
    models = local_shard_models(X, y, np.array(bounds), np.array([-1, 1]), seed=-1, update_damping=5.0)
    mu, cov = arow_mr_reduce([m[0] for m in models], [m[1] for m in models], [m[2] for m in models])
    np.testing.assert_allclose(clf.mean_[0], mu, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(clf.covariance_[0], cov, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="2 classes"):
        AROWMapReduce(client=client).fit(da.from_array(X[-600:], chunks=(300, 21)), da.from_array(y[-600:], chunks=300))


def test_arow_mr_bag_of_csr_blocks_equals_dense(client):
    X, y = waveform(2000, seed=5)
    X[np.abs(X) < 1.0] = 0.0
    blocks = [(sp.csr_matrix(X[i : i + 250]), y[i : i + 250]) for i in range(0, 2000, 250)]
    bag = db.from_sequence(blocks, npartitions=4)  # two blocks per partition
    sparse = AROWMapReduce(update_damping=5.0, covariance="diagonal", random_state=2, client=client).fit(bag, classes=[-1, 1])
    dense = AROWMapReduce(update_damping=5.0, covariance="diagonal", random_state=2, client=client).fit(
        da.from_array(X, chunks=(500, 21)), da.from_array(y, chunks=500)
    )
    np.testing.assert_allclose(sparse.mean_, dense.mean_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(sparse.covariance_, dense.covariance_, rtol=1e-10, atol=1e-12)


def test_arow_mr_dask_dataframe_equals_array(client):
    dd = pytest.importorskip("dask.dataframe")  # needs pandas, not part of the extra
    pd = pytest.importorskip("pandas")
    X, y = waveform(1600, seed=8)
    ddf = dd.from_pandas(pd.DataFrame(X), npartitions=4)
    ys = dd.from_pandas(pd.Series(y), npartitions=4)
    from_df = AROWMapReduce(update_damping=5.0, random_state=0, client=client).fit(ddf, ys)
    from_arr = AROWMapReduce(update_damping=5.0, random_state=0, client=client).fit(da.from_array(X, chunks=(400, 21)), da.from_array(y, chunks=400))
    np.testing.assert_allclose(from_df.mean_, from_arr.mean_, rtol=1e-12)


def test_arow_mr_multiclass(client):
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]])
    lab = rng.integers(0, 3, size=1500)
    X = centres[lab] + rng.normal(size=(1500, 2))
    names = np.array(["a", "b", "c"])[lab]
    clf = AROWMapReduce(n_partitions=3, random_state=0, client=client).fit(X, names)
    assert clf.mean_.shape == (3, 3) and clf.covariance_.shape == (3, 3, 3)
    assert clf.score(X, names) > 0.9


def test_arow_mr_validation():
    with pytest.raises(ValueError, match="n_partitions"):
        AROWMapReduce(n_partitions=0).fit(np.zeros((4, 2)), [0, 1, 0, 1])
    with pytest.raises(ValueError, match="covariance"):
        AROWMapReduce(covariance="band").fit(np.zeros((4, 2)), [0, 1, 0, 1])
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        AROWMapReduce().fit(np.zeros((4, 2)), [0, 1, 0])
    with pytest.raises(ValueError, match="rows"):  # a Dask partition with too few labels
        AROWMapReduce().fit(db.from_sequence([(np.zeros((4, 2)), np.array([0, 1, 0]))], npartitions=1))


def test_sharded_gauss_transform_equals_local(client, rng):
    x = rng.uniform(size=(4000, 2))
    y = rng.uniform(size=(3000, 2))
    q = rng.uniform(-1, 1, size=(4000, 2))
    for method in ("direct", "ifgt", "auto"):
        gt = GaussTransform(x, 0.2, 1e-6, method, n_jobs=1)
        # The IFGT adapts its truncation to each call's targets: the local oracle evaluates the
        # same blocks (the direct sum does not depend on them).
        local = np.concatenate([gt(y[i : i + 700], q) for i in range(0, 3000, 700)])
        sharded = sharded_gauss_transform(x, da.from_array(y, chunks=(700, 2)), q, 0.2, 1e-6, method, client=client)
        assert isinstance(sharded, da.Array)
        np.testing.assert_allclose(sharded.compute(), local, rtol=1e-12, atol=1e-12)
        if method == "direct":
            np.testing.assert_allclose(local, gt(y, q), rtol=1e-12, atol=1e-12)
    direct = np.exp(-((y[:, None] - x[None]) ** 2).sum(-1) / 0.04) @ q
    got = sharded_gauss_transform(x, y, q, bandwidth=0.2, epsilon=1e-6, method="ifgt", n_partitions=5, client=client)
    assert np.abs(got - direct).max() <= 1e-6 * np.abs(q).sum(0).max()
    one = sharded_gauss_transform(x[:, 0], y[:, 0], bandwidth=0.1, client=client)
    assert one.shape == (3000,)
    with pytest.raises(ValueError, match="targets"):
        sharded_gauss_transform(x, da.zeros((10, 3), chunks=5), bandwidth=0.1, client=client)
    with pytest.raises(TypeError, match="bandwidth"):
        sharded_gauss_transform(x, y, client=client)


def test_split_plan_meets_epsilon_on_the_cluster(client, rng):
    # Sources split over the workers too: centres from a sample, radii and coefficients
    # combined. A different clustering from the local plan, the same guarantee.
    x = rng.uniform(size=(6000, 2))
    y = rng.uniform(size=(900, 2))
    q = rng.uniform(-1, 1, size=(6000, 2))
    direct = np.exp(-((y[:, None] - x[None]) ** 2).sum(-1) / 0.04) @ q
    for method in ("ifgt", "ifgt-tree", "auto"):
        for eps in (1e-3, 1e-7):
            got = sharded_gauss_transform(x, y, q, 0.2, eps, method, client=client, plan="split")
            err = (np.abs(got - direct).max(0) / np.abs(q).sum(0)).max()
            assert err <= eps, (method, eps, err)
    # the split path really ran: a plan of centres, radii covering every source, summed coefficients
    from vastml.distributed import _gauss

    plan = _gauss._plan_split(x, q, False, 0.2, 1e-6, "ifgt", len(y), "split", client, 2, 1)
    assert isinstance(plan, _gauss._SplitPlan) and 1 < plan.centers.shape[0] < len(x)
    nearest = ((x[:, None] - plan.centers[None]) ** 2).sum(-1)
    assert np.all(np.sqrt(nearest.min(1)) <= plan.radii[nearest.argmin(1)] * (1 + 1e-12))
    assert _gauss._plan_split(x, q, False, 0.2, 1e-6, "ifgt", len(y), "auto", client, 2, 1) is None  # < 100k: local
    # 1-D, lazy targets, three parts (more parts than workers)
    lazy = sharded_gauss_transform(x[:, 0], da.from_array(y[:, 0], chunks=300), q[:, 0], 0.05, 1e-6,
                                   "ifgt", n_partitions=3, client=client, plan="split")
    exact = np.exp(-((y[:, :1] - x[None, :, 0]) ** 2) / 0.0025) @ q[:, 0]
    assert np.abs(lazy.compute() - exact).max() <= 1e-6 * np.abs(q[:, 0]).sum()
    # without a client (Dask's local scheduler) and with fewer sources than parts
    tiny = sharded_gauss_transform(x[:1], y, q[:1], 0.2, 1e-6, "ifgt", n_partitions=4, plan="split")
    np.testing.assert_allclose(tiny, np.exp(-((y - x[0]) ** 2).sum(-1) / 0.04)[:, None] * q[:1], atol=1e-6 * np.abs(q[0]).max())
    with pytest.raises(ValueError, match="plan"):
        sharded_gauss_transform(x, y, q, 0.2, plan="sometimes", client=client)
    with pytest.raises(ValueError, match="split"):
        sharded_gauss_transform(x, y, q, 0.2, method="direct-tree", plan="split", client=client)


def test_split_plan_kernel_density(client, rng):
    x = rng.normal(size=(5000, 2))
    grid = rng.normal(size=(300, 2))
    kde = ShardedKernelDensity(bandwidth=0.3, epsilon=1e-8, client=client, plan="split").fit(x)
    exact = np.exp(-((grid[:, None] - x[None]) ** 2).sum(-1) / 0.18).mean(1) / (2 * np.pi * 0.09)
    assert np.abs(kde.density(grid) - exact).max() <= 1e-8 / (2 * np.pi * 0.09)
    local = ShardedKernelDensity(bandwidth=0.3, epsilon=1e-8, client=client, plan="local").fit(x)
    assert np.abs(local.density(grid) - kde.density(grid)).max() <= 2e-8 / (2 * np.pi * 0.09)


def test_sharded_kernel_density(client, rng):
    from scipy.stats import multivariate_normal

    x = rng.normal(size=(2000, 2))
    w = rng.uniform(size=2000)
    kde = ShardedKernelDensity(bandwidth=0.3, epsilon=1e-8, client=client).fit(x, sample_weight=w)
    grid = rng.normal(size=(400, 2))
    exact = sum(wi * multivariate_normal(xi, 0.09 * np.eye(2)).pdf(grid) for xi, wi in zip(x[::1], w)) / w.sum()
    dens = kde.density(da.from_array(grid, chunks=(100, 2))).compute()
    assert np.abs(dens - exact).max() <= 1e-8 / (2 * np.pi * 0.09)
    np.testing.assert_allclose(kde.score_samples(grid), np.log(exact), rtol=1e-6)


def test_logistic_allreduce_equals_sklearn(client):
    from sklearn.linear_model import LogisticRegression

    X, y = waveform(3000, seed=6)
    alpha = 1e-1
    ref = LogisticRegression(C=1 / (alpha * 3000), tol=1e-12, max_iter=2000).fit(X, y)
    lr = DistributedLogisticRegression(l2_penalty=alpha, tol=1e-8, max_iter=500, client=client)
    lr.fit(da.from_array(X, chunks=(1200, 21)), da.from_array(y, chunks=1200))
    assert lr.partition_sizes_.tolist() == [1200, 1200, 600]
    np.testing.assert_allclose(lr.coef_, ref.coef_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(lr.intercept_, ref.intercept_, atol=1e-7)
    np.testing.assert_allclose(lr.predict_proba(X[:20]), ref.predict_proba(X[:20]), atol=1e-5)


def test_logistic_averaging_approaches_the_optimum(client):
    from sklearn.metrics import log_loss

    X, y = waveform(3000, seed=7)
    alpha = 1e-2

    def objective(est):
        return log_loss(y, est.predict_proba(X)) + 0.5 * alpha * (est.coef_ ** 2).sum()

    best = DistributedLogisticRegression(l2_penalty=alpha, tol=1e-10, max_iter=500).fit(X, y)  # no client: local
    kw = dict(method="averaging", l2_penalty=alpha, n_partitions=4, random_state=0, client=client)
    one = DistributedLogisticRegression(max_iter=1, **kw).fit(X, y)
    avg = DistributedLogisticRegression(max_iter=10, **kw).fit(X, y)
    # Parameter mixing is approximate: near the optimum, and closer with more passes.
    assert objective(best) <= objective(avg) < objective(best) * 1.02
    assert objective(avg) < objective(one)
    assert (avg.predict(X) == best.predict(X)).mean() > 0.97


def slow_block(n_rows, seed):
    time.sleep(1.0)
    X, y = make_binary_waveform(n_rows, random_state=seed)
    return np.column_stack([X, y])


def slow_data():
    parts = [da.from_delayed(dask.delayed(slow_block)(800, s), shape=(800, 22), dtype=float) for s in range(4)]
    Xy = da.concatenate(parts)
    return Xy[:, :21], Xy[:, 21]


def test_killed_worker_is_retried_and_result_unchanged(client):
    # Runs last on the shared cluster. Data made by slow tasks so that a worker dies
    # mid-computation; Dask recomputes its tasks on the other worker (the nanny restarts it).
    expected = AROWMapReduce(update_damping=5.0, random_state=1).fit(*slow_data(), classes=[-1, 1])  # local
    pids = client.run(os.getpid)
    result = {}

    def fit():
        result["est"] = AROWMapReduce(update_damping=5.0, random_state=1, client=client).fit(*slow_data(), classes=[-1, 1])

    thread = threading.Thread(target=fit)
    thread.start()
    victim = None
    deadline = time.time() + 30
    while victim is None and time.time() < deadline:
        busy = [w for w, keys in client.processing().items() if keys]
        victim = busy[0] if busy else None
        time.sleep(0.02)
    assert victim is not None
    os.kill(pids[victim], signal.SIGKILL)
    thread.join(120)
    assert not thread.is_alive()
    np.testing.assert_array_equal(result["est"].mean_, expected.mean_)
    np.testing.assert_array_equal(result["est"].covariance_, expected.covariance_)
    assert victim not in client.scheduler_info()["workers"] or pids[victim] != client.run(os.getpid).get(victim)


# --- progress: callbacks per partition (AROW-MR) and per round (logistic regression) ----------


@pytest.mark.parametrize("on_client", [True, False])
def test_arow_mr_reports_every_partition_and_stops_cleanly(client, on_client):
    X, y = waveform(4000, seed=11)
    kw = dict(update_damping=5.0, n_partitions=4, random_state=3, client=client if on_client else None)
    seen = []
    full = AROWMapReduce(callbacks=lambda it, obj, rows: seen.append((it, obj, rows)), **kw)
    if on_client:
        full.fit(X, y)
    else:
        with dask.config.set(scheduler="synchronous"):
            full.fit(X, y)
    assert [s[0] for s in seen] == [1, 2, 3, 4] and np.isnan(seen[0][1])
    assert [s[2] for s in seen] == [1000, 2000, 3000, 4000] and not full.stopped_early_
    np.testing.assert_array_equal(full.mean_, AROWMapReduce(**kw).fit(X, y).mean_)
    # stop after two partitions: the reduction of those two models (the oracle: the reducer
    # over the two local shard models that were received)
    stopped = AROWMapReduce(callbacks=lambda it, obj, rows: it >= 2, **kw).fit(X, y)
    assert stopped.stopped_early_ and (stopped.partition_sizes_ > 0).sum() == 2
    kept = np.flatnonzero(stopped.partition_sizes_)
    models = [
        AROWClassifier(update_damping=5.0, random_state=3 + m).fit(X[1000 * m : 1000 * (m + 1)], y[1000 * m : 1000 * (m + 1)])
        for m in kept
    ]
    mu, cov = arow_mr_reduce([e.mean_[0] for e in models], [e.covariance_[0] for e in models], [1000, 1000])
    np.testing.assert_allclose(stopped.mean_[0], mu, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(stopped.covariance_[0], cov, rtol=1e-12, atol=1e-12)
    assert stopped.score(X, y) > 0.8


def test_arow_mr_callback_errors_and_bar(client, capfd):
    X, y = waveform(2000, seed=12)

    def boom(it, obj, rows):
        raise ZeroDivisionError("from the callback")

    with pytest.raises(ZeroDivisionError, match="from the callback"):
        AROWMapReduce(n_partitions=2, callbacks=boom, client=client).fit(X, y)
    with pytest.raises(TypeError, match="`callbacks`"):
        AROWMapReduce(callbacks=1).fit(X, y)
    AROWMapReduce(n_partitions=2, verbose=True, client=client).fit(X, y)
    assert "AROWMapReduce" in capfd.readouterr().err


@pytest.mark.parametrize("method", ["allreduce", "averaging"])
def test_logistic_reports_every_round_and_stops_cleanly(client, method, capfd):
    X, y = waveform(2000, seed=13)
    kw = dict(method=method, l2_penalty=1e-2, n_partitions=2, random_state=0, max_iter=8, client=client)
    seen = []
    lr = DistributedLogisticRegression(callbacks=lambda it, obj, w: seen.append((it, obj, w)), **kw).fit(X, y)
    assert [s[0] for s in seen] == list(range(1, lr.n_iter_ + 1)) and not lr.stopped_early_
    assert all(s[2].shape == (21,) for s in seen)
    np.testing.assert_array_equal(seen[-1][2], lr.coef_[0])
    if method == "allreduce":
        # the objective of every L-BFGS iteration, recomputed here, and decreasing
        def objective(w, b):
            m = np.where(y == lr.classes_[1], 1.0, -1.0) * (X @ w + b)
            return np.logaddexp(0, -m).mean() + 0.5 * 1e-2 * w @ w

        np.testing.assert_allclose(seen[-1][1], objective(lr.coef_[0], lr.intercept_[0]), rtol=1e-10)
        assert all(b[1] <= a[1] for a, b in zip(seen, seen[1:]))
    else:
        assert all(np.isnan(s[1]) for s in seen)
    stopped = DistributedLogisticRegression(callbacks=lambda it, obj, w: it >= 3, **kw).fit(X, y)
    assert stopped.stopped_early_ and stopped.n_iter_ <= 4
    if method == "averaging":
        # the same model as three passes
        three = DistributedLogisticRegression(**dict(kw, max_iter=3)).fit(X, y)
        np.testing.assert_array_equal(stopped.coef_, three.coef_)
    else:
        np.testing.assert_array_equal(stopped.coef_[0], seen[2][2])
    assert stopped.score(X, y) > 0.7  # a usable model after 3 rounds (the full fit: ~0.85)
    with pytest.raises(ZeroDivisionError):
        DistributedLogisticRegression(callbacks=lambda *a: 1 / 0, **kw).fit(X, y)
    DistributedLogisticRegression(verbose=True, **kw).fit(X, y)
    assert "DistributedLogisticRegression" in capfd.readouterr().err
