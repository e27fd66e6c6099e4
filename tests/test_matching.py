"""Convex Kernelized Sorting: Lemma 1, gradient and Hessian against finite differences, planted
permutations, Hungarian output, bad input."""

import itertools

import numpy as np
import pytest

from vastml.matching import (
    ConvexKernelizedSorting,
    KernelizedSorting,
    centred_kernel,
    cks_gradient,
    cks_hessian_diagonal,
    cks_objective,
)


def sym(m, rng):
    a = rng.normal(size=(m, m))
    return a + a.T


def test_lemma_1_identity():
    rng = np.random.default_rng(0)
    m = 9
    K, L = centred_kernel(sym(m, rng), "precomputed"), centred_kernel(sym(m, rng), "precomputed")
    P = np.eye(m)[rng.permutation(m)]
    lhs = ((K @ P.T - (L @ P).T) ** 2).sum()
    rhs = (K**2).sum() + (L**2).sum() - 2 * np.trace(K @ P.T @ L @ P)
    assert lhs == pytest.approx(rhs)


def test_gradient_and_diagonal_hessian_match_finite_differences():
    rng = np.random.default_rng(1)
    m, C = 6, 10.0
    K, L = sym(m, rng), sym(m, rng)
    pi = rng.random((m, m))
    G = cks_gradient(pi, K, L, C)
    H = cks_hessian_diagonal(K, L, C)
    h = 1e-5
    for i, j in [(0, 0), (2, 3), (5, 1), (4, 4)]:
        e = np.zeros((m, m))
        e[i, j] = h
        fp, f0, fm = (cks_objective(pi + e, K, L, C), cks_objective(pi, K, L, C),
                      cks_objective(pi - e, K, L, C))
        assert G[i, j] == pytest.approx((fp - fm) / (2 * h), rel=1e-6)
        assert H[i, j] == pytest.approx((fp - 2 * f0 + fm) / h**2, rel=1e-4)
    # element-wise form (3.5) of the thesis
    i, j = 2, 4
    g35 = 2 * sum(
        -L[k, i] * sum(K[j, l] * pi[k, l] - pi[l, j] * L[k, l] for l in range(m))
        + K[k, j] * sum(K[k, l] * pi[i, l] - pi[l, k] * L[i, l] for l in range(m))
        for k in range(m)
    )
    r, c = pi.sum(axis=1), pi.sum(axis=0)
    assert G[i, j] == pytest.approx(g35 + 2 * C * (r[i] + c[j] - 2))


def test_planted_permutation_recovered():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(20, 4))
    p = rng.permutation(20)
    # run to the optimum by the thesis's objective rule alone (no assignment patience)
    cks = ConvexKernelizedSorting(patience=None).fit(X, X[p])
    np.testing.assert_array_equal(cks.match_, p)
    assert cks.objective_ < 1e-2
    assert np.abs(cks.assignment_.sum(axis=0) - 1).max() < 1e-2
    assert np.abs(cks.assignment_.sum(axis=1) - 1).max() < 1e-2
    assert (cks.assignment_ >= 0).all()


def test_rotated_noisy_copy_recovered_and_hungarian_is_a_permutation():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(20, 3))
    p = rng.permutation(20)
    Q = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    Y = X[p] @ Q + 0.01 * rng.normal(size=(20, 3))
    cks = ConvexKernelizedSorting().fit(X, Y)
    assert sorted(cks.match_.tolist()) == list(range(20))
    assert (cks.match_ == p).mean() >= 0.9
    ks = KernelizedSorting(n_init=3, random_state=0).fit(X, Y)
    assert sorted(ks.match_.tolist()) == list(range(20))


def test_bad_input():
    with pytest.raises(ValueError, match="same number"):
        ConvexKernelizedSorting().fit(np.zeros((5, 2)), np.zeros((6, 2)))
    with pytest.raises(ValueError, match="NaN"):
        ConvexKernelizedSorting().fit(np.full((5, 2), np.nan), np.zeros((5, 2)))
    with pytest.raises(ValueError, match="kernel"):
        ConvexKernelizedSorting(kernel="poly").fit(np.zeros((5, 2)), np.zeros((5, 2)))
    with pytest.raises(ValueError, match="l2_penalty_marginals"):
        ConvexKernelizedSorting(l2_penalty_marginals=-1).fit(np.eye(3), np.eye(3))
    with pytest.raises(ValueError, match="patience"):
        ConvexKernelizedSorting(patience=0).fit(np.eye(3), np.eye(3))
    with pytest.raises(ValueError, match="tol"):
        ConvexKernelizedSorting(tol=np.nan).fit(np.eye(3), np.eye(3))


def test_solver_reaches_the_optimum_of_a_slow_oracle():
    """The projected quasi-Newton solver against SciPy's L-BFGS-B on the same convex problem."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(4)
    m, C = 8, 10.0
    X = rng.normal(size=(m, 3))
    Y = X[rng.permutation(m)] + 0.3 * rng.normal(size=(m, 3))
    K, L = centred_kernel(X, center=False), centred_kernel(Y, center=False)

    def fun(v):
        pi = v.reshape(m, m)
        return cks_objective(pi, K, L, C), cks_gradient(pi, K, L, C).ravel()

    ref = minimize(fun, np.full(m * m, 1 / m), jac=True, method="L-BFGS-B",
                   bounds=[(0, None)] * (m * m), options={"ftol": 1e-14, "gtol": 1e-10,
                                                           "maxiter": 5000})
    cks = ConvexKernelizedSorting(l2_penalty_marginals=C, tol=1e-10, patience=None).fit(X, Y)
    assert ref.fun > 1e-3  # noisy copy: the optimum is not a zero of the objective
    assert cks.objective_ == pytest.approx(cks_objective(cks.assignment_, K, L, C))
    assert cks.objective_ <= ref.fun * (1 + 1e-6) + 1e-9
    assert np.abs(cks.assignment_ - ref.x.reshape(m, m)).max() < 0.05
    # the default (assignment patience) stops earlier at the same hard assignment
    early = ConvexKernelizedSorting(l2_penalty_marginals=C).fit(X, Y)
    assert early.n_iter_ < cks.n_iter_
    np.testing.assert_array_equal(early.match_, cks.match_)


def test_centred_kernels_make_the_thesis_start_stationary():
    """Why center=False is the default: with H K H the start 11^T/m has objective 0 and a zero
    gradient (K 1 = 0), so the relaxation's minimum is the uninformative uniform matrix."""
    rng = np.random.default_rng(5)
    m = 15
    X = rng.normal(size=(m, 2))
    p = rng.permutation(m)
    Kc, Lc = centred_kernel(X), centred_kernel(X[p])
    u = np.full((m, m), 1 / m)
    assert cks_objective(u, Kc, Lc) == pytest.approx(0, abs=1e-20)
    assert np.abs(cks_gradient(u, Kc, Lc)).max() < 1e-12
    cks = ConvexKernelizedSorting(center=True).fit(X, X[p])
    assert np.abs(cks.assignment_ - u).max() < 1e-6 * (1 / m)  # rounding-level moves only
    # uncentred kernels: the same start moves and recovers the planted permutation
    cks = ConvexKernelizedSorting().fit(X, X[p])
    np.testing.assert_array_equal(cks.match_, p)


def test_rotated_noisy_copy_of_100_objects_recovered():
    rng = np.random.default_rng(6)
    m = 100
    X = rng.normal(size=(m, 6))
    p = rng.permutation(m)
    Q = np.linalg.qr(rng.normal(size=(6, 6)))[0]
    Y = X[p] @ Q + 0.05 * rng.normal(size=(m, 6))
    cks = ConvexKernelizedSorting().fit(X, Y)
    assert (cks.match_ == p).mean() >= 0.97
    assert sorted(cks.match_.tolist()) == list(range(m))


def test_sinkhorn_by_hand_and_cks_projection():
    from vastml.matching import sinkhorn

    # [[1, 1], [1, 3]] balances to [[a, 1 - a], [1 - a, a]] with a / (1 - a) = sqrt(3) (the
    # cross ratio p11 p22 / (p12 p21) = 3 is invariant under row and column scaling)
    a = np.sqrt(3) / (1 + np.sqrt(3))
    np.testing.assert_allclose(sinkhorn(np.array([[1.0, 1.0], [1.0, 3.0]])), [[a, 1 - a], [1 - a, a]], atol=1e-9)
    rng = np.random.default_rng(3)
    X = rng.normal(size=(25, 3))
    p = rng.permutation(25)
    cks = ConvexKernelizedSorting(projection="sinkhorn").fit(X, X[p])
    np.testing.assert_allclose(cks.assignment_.sum(0), 1, atol=1e-6)
    np.testing.assert_allclose(cks.assignment_.sum(1), 1, atol=1e-6)
    assert (cks.match_ == p).all()
    with pytest.raises(ValueError, match="projection"):
        ConvexKernelizedSorting(projection="qp").fit(X, X)


def test_ks_p_smoothing_by_hand():
    from vastml.matching import smooth_kernel

    K = np.array([[4.0, 1.0, 0.0], [1.0, 9.0, 4.0], [0.0, 4.0, 1.0]])
    Mp = np.sqrt(K)
    Mp = Mp / np.linalg.norm(Mp, axis=1, keepdims=True)
    np.testing.assert_allclose(smooth_kernel(K, 0.5), Mp @ Mp.T)
    np.testing.assert_allclose(np.diag(smooth_kernel(K, 0.3)), 1.0)
    with pytest.raises(ValueError, match="non-negative"):
        smooth_kernel(-K, 0.5)
    rng = np.random.default_rng(4)
    X = rng.normal(size=(30, 2))
    p = rng.permutation(30)
    ks = KernelizedSorting(smoothing_power=0.5, init="pca", random_state=0).fit(X, X[p])
    assert sorted(ks.match_.tolist()) == list(range(30))


def test_ks_pca_start_matches_by_first_component_rank():
    # X and a permuted Y with a clear first principal component: the PCA start alone is the
    # planted matching (no linear-assignment round can improve on the exact match)
    rng = np.random.default_rng(5)
    X = np.column_stack([np.linspace(-5, 5, 40) ** 3 / 25 + rng.normal(scale=1e-3, size=40),
                         rng.normal(scale=0.1, size=40)])
    p = rng.permutation(40)
    ks = KernelizedSorting(init="pca", max_iter=1, random_state=0).fit(X, X[p])
    assert (ks.match_ == p).all()
    with pytest.raises(ValueError, match="init"):
        KernelizedSorting(init="spectral").fit(X, X)


def test_ks_restarts_on_threads_match_serial_and_clone():
    from sklearn.base import clone

    rng = np.random.default_rng(6)
    X = rng.normal(size=(30, 2))
    Y = X[rng.permutation(30)] + 0.05 * rng.normal(size=(30, 2))
    one = KernelizedSorting(n_init=4, random_state=1, n_jobs=1).fit(X, Y)
    two = KernelizedSorting(n_init=4, random_state=1, n_jobs=2).fit(X, Y)
    assert one.objectives_ == two.objectives_ and (one.match_ == two.match_).all()
    assert one.objective_ == max(one.objectives_)
    assert clone(one).get_params() == one.get_params()
    assert clone(ConvexKernelizedSorting(l2_penalty_marginals=3.0)).get_params()["l2_penalty_marginals"] == 3.0
    with pytest.raises(TypeError):
        KernelizedSorting("rbf")


def test_lsmi_against_explicit_sums_and_lsom_fixed_point():
    from vastml.matching import LeastSquaresObjectMatching, centred_kernel, lsmi

    rng = np.random.default_rng(7)
    X = rng.normal(size=(6, 2))
    Y = rng.normal(size=(6, 2))
    K, L = centred_kernel(X, center=False), centred_kernel(Y, center=False)
    match = rng.permutation(6)  # y_i <-> x_match[i]
    pair = {int(match[i]): i for i in range(6)}  # x_j <-> y_pair[j]
    n, lam = 6, 0.1
    H = np.zeros((n, n))
    h = np.zeros(n)
    for a in range(n):
        for b in range(n):
            for i in range(n):
                for j in range(n):
                    H[a, b] += K[i, a] * K[i, b] * L[pair[j], pair[a]] * L[pair[j], pair[b]] / n**2
        for i in range(n):
            h[a] += K[i, a] * L[pair[i], pair[a]] / n
    alpha = np.linalg.solve(H + lam * np.eye(n), h)
    smi, got = lsmi(K, L, match, lam)
    np.testing.assert_allclose(got, alpha, rtol=1e-9)
    assert smi == pytest.approx(0.5 * h @ alpha - 0.5)
    # a noisy copy: the planted match is an LSOM fixed point with more SMI than a random one
    Z = rng.normal(size=(40, 2))
    p = rng.permutation(40)
    om = LeastSquaresObjectMatching(init=p).fit(Z, Z[p] + 0.01 * rng.normal(size=(40, 2)))
    assert (om.match_ == p).all()
    Kz, Lz = centred_kernel(Z, center=False), centred_kernel(Z[p], center=False)
    assert om.smi_ > max(lsmi(Kz, Lz, rng.permutation(40), 1e-3)[0] for _ in range(5))
    many = LeastSquaresObjectMatching(n_init=3, random_state=0, n_jobs=2).fit(Z, Z[p])
    assert many.smi_ == max(many.smis_) and sorted(many.match_.tolist()) == list(range(40))
    with pytest.raises(ValueError, match="init"):
        LeastSquaresObjectMatching(init=[0, 0, 1]).fit(Z[:3], Z[:3])


def _recorder(seen):
    return lambda it, f, state: seen.append((it, f, state))


def _noisy_copy(m=30, seed=8):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, 3))
    p = rng.permutation(m)
    return X, X[p] + 0.05 * rng.normal(size=(m, 3)), p


def test_cks_callbacks_see_each_iteration_and_can_stop():
    from vastml.matching import cks_objective

    X, Y, _ = _noisy_copy()
    seen = []
    full = ConvexKernelizedSorting(callbacks=lambda it, f, a: seen.append((it, f, a))).fit(X, Y)
    assert [s[0] for s in seen] == list(range(1, full.n_iter_ + 1)) and not full.stopped_early_
    K, L = centred_kernel(X, center=False), centred_kernel(Y, center=False)
    for _, f, a in seen[:: max(1, len(seen) // 5)]:
        assert f == pytest.approx(cks_objective(a, K, L))  # the objective of the state reported
    assert all(b[1] <= a[1] for a, b in itertools.pairwise(seen))  # a descent method
    early = ConvexKernelizedSorting(callbacks=lambda it, f, a: it >= 5).fit(X, Y)
    assert early.stopped_early_ and early.n_iter_ == 5
    np.testing.assert_array_equal(early.assignment_, seen[4][2])
    assert sorted(early.match_.tolist()) == list(range(30))
    calls = []
    ConvexKernelizedSorting(max_iter=9, patience=None, callback_every=4,
                            callbacks=lambda it, f, a: calls.append((it, a is None))).fit(X, Y)
    assert calls == [(4, False), (8, False)]


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_ks_and_lsom_callbacks_number_the_rounds_of_every_start(n_jobs):
    from vastml.matching import LeastSquaresObjectMatching

    X, Y, _ = _noisy_copy()
    K, L = centred_kernel(X), centred_kernel(Y)
    for cls, attr in ((KernelizedSorting, "objectives_"), (LeastSquaresObjectMatching, "smis_")):
        seen: list = []
        est = cls(n_init=3, random_state=0, n_jobs=n_jobs, callbacks=_recorder(seen)).fit(X, Y)
        assert [s[0] for s in seen] == list(range(1, len(seen) + 1)) and len(seen) >= 3
        assert not est.stopped_early_
        assert max(f for _, f, _ in seen) <= max(getattr(est, attr)) + 1e-9
        if cls is KernelizedSorting:  # the KS objective of the match reported
            _, f, match = seen[-1]
            assert f == pytest.approx(float((L * K[np.ix_(match, match)]).sum()))
        plain = cls(n_init=3, random_state=0, n_jobs=n_jobs).fit(X, Y)
        np.testing.assert_array_equal(plain.match_, est.match_)  # watching changes nothing
        early = cls(n_init=3, random_state=0, n_jobs=n_jobs, callbacks=lambda it, f, m: True).fit(X, Y)
        assert early.stopped_early_ and sorted(early.match_.tolist()) == list(range(30))


def test_matching_callback_errors_propagate_and_verbose_draws_a_bar(capfd):
    from vastml.matching import LeastSquaresObjectMatching

    X, Y, _ = _noisy_copy(15)

    def boom(it, f, state):
        raise RuntimeError("from the callback")

    for cls in (ConvexKernelizedSorting, KernelizedSorting, LeastSquaresObjectMatching):
        with pytest.raises(RuntimeError, match="from the callback"):
            cls(callbacks=boom).fit(X, Y)
        cls(verbose=True).fit(X, Y)
        assert cls.__name__ in capfd.readouterr().err
