"""vastml.svm: oracles (naive NumPy Pegasos, hand-computed AROW steps), sparse == dense,
partial_fit == fit, pickling, arbitrary labels, model arrays, errors, the checkerboard."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp

from vastml import _core
from vastml.datasets import make_checkerboard
from vastml.svm import AMMClassifier, AROWClassifier, BSGDClassifier, LLSVMClassifier, PegasosClassifier
from vastml.svm._base import core_examples


def naive_pegasos(X, y, n_classes, lam, bias, epochs):
    """Crammer-Singer Pegasos in NumPy, examples in order (the oracle)."""
    W = np.zeros((n_classes, X.shape[1] + 1))
    Xb = np.hstack([X, np.full((X.shape[0], 1), bias)])
    t = 0
    for _ in range(epochs):
        for x, c in zip(Xb, y):
            t += 1
            s = W @ x
            wrong = np.where(np.arange(n_classes) == c, -np.inf, s)
            i = int(np.argmax(wrong))
            loss = 1 + s[i] - s[c]
            W *= 1 - 1 / t
            if loss > 0:
                eta = 1 / (lam * t)
                W[c] += eta * x
                W[i] -= eta * x
    return W


def test_pegasos_equals_numpy_oracle(rng):
    X = rng.normal(size=(300, 4))
    y = rng.integers(0, 3, size=300)
    clf = PegasosClassifier(l2_penalty=0.01, max_iter=2, shuffle=False).fit(X, y)
    W = naive_pegasos(X, y, 3, 0.01, 1.0, 2)
    np.testing.assert_allclose(clf.coef_, W[:, :-1], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(clf.intercept_, W[:, -1], rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(clf.predict(X), np.argmax(X @ W[:, :-1].T + W[:, -1], axis=1))


def naive_budgetedsvm_batch(X, y, n_classes, lam, bias, cap, k, c, p, beta, epochs):
    """BudgetedSVM 1.2 ``trainAMMbatch`` (mm_algs.cpp v1.02) in NumPy, examples in order, plain
    weight arrays (the oracle for ``variant="budgetedsvm"``). With ``p`` in {0, 1} and
    ``beta = 1`` the cloning draws are decided. Pruning follows ``Amm::prune`` (smallest norms
    first while their sum stays within (c / (t lam))^2, never a class's last weight), the same
    as BudgetedSVM's whenever no class is down to one weight."""
    Xb = np.hstack([X, np.full((X.shape[0], 1), bias)])
    W = [np.zeros(Xb.shape[1]) for _ in range(n_classes)]
    cls = list(range(n_classes))
    ids = list(range(n_classes))
    nid = n_classes
    t = 0

    def push(w, ci):
        nonlocal nid
        W.append(w)
        cls.append(ci)
        ids.append(nid)
        nid += 1

    def count(ci):
        return sum(1 for q in cls if q == ci)

    def best(s, classes, start, quirk):
        j, f = None, start
        for ci in classes:
            for q in range(len(W)):
                if cls[q] == ci and ((f == 0 if quirk else j is None) or s[q] > f):
                    j, f = q, s[q]
        return j, f

    def prune():
        thr = (c / (t * lam)) ** 2
        norms = [w @ w for w in W]
        left = [count(ci) for ci in range(n_classes)]
        gone, tot = set(), 0.0
        for q in sorted(range(len(W)), key=lambda q: (norms[q], q)):
            if tot + norms[q] > thr:
                break
            if left[cls[q]] <= 1:
                continue
            tot += norms[q]
            left[cls[q]] -= 1
            gone.add(q)
        for lst in (W, cls, ids):
            lst[:] = [v for q, v in enumerate(lst) if q not in gone]

    z = [None] * len(y)
    for epoch in range(epochs + 1):
        batch = epoch > 0
        if epoch >= 2:  # reassign after every batch epoch but the last
            for n, x in enumerate(Xb):
                s = [w @ x for w in W]
                z[n] = ids[best(s, [y[n]], -np.inf, False)[0]]
        for n, x in enumerate(Xb):
            t += 1
            eta = 1 / (lam * (t + 1))
            s = [w @ x for w in W]
            j1, f1 = best(s, [y[n]], 0.0 if batch else -np.inf, batch)
            if batch:
                ja = next((q for q in range(len(W)) if ids[q] == z[n]), j1)
                fa = s[ja]
            else:
                z[n] = ids[j1]
                ja, fa = j1, f1
            others = [ci for ci in range(n_classes) if ci != y[n]]
            j2, f2 = best(s, others, 0.0 if batch else -np.inf, batch)
            for w in W:
                w *= 1 - 1 / (t + 1)
            if 1 + f2 - fa > 0:
                room = count(y[n]) < cap
                if fa > 0 and room and p > 0.5:
                    push(W[ja].copy(), y[n])
                if batch or f1 > 0:
                    W[ja] += eta * x
                W[j2] -= eta * x
                if f1 <= 0 and count(y[n]) < cap:
                    push(eta * x, y[n])
            if batch and k and t % k == 0:
                prune()
    return np.array(W), np.array(cls)


@pytest.mark.parametrize("p", [0.0, 1.0])
def test_budgetedsvm_batch_equals_numpy_oracle(rng, p):
    X = rng.normal(size=(240, 5))
    y = rng.integers(0, 3, size=240)
    # budget 8, pruning every 50 steps: weights are pruned, re-created from examples and (p = 1)
    # cloned in the batch epochs; each of those rules changes the result if left out
    kw = dict(l2_penalty=0.05, max_iter=3, max_weights_per_class=8, prune_every=50, prune_c=5.0)
    clf = AMMClassifier(**kw, clone_probability=p, clone_decay=1.0, shuffle=False).fit(X, y)
    W, cls = naive_budgetedsvm_batch(X, y, 3, 0.05, 1.0, 8, 50, 5.0, p, 1.0, 3)
    assert clf.weight_class_.tolist() == cls.tolist()
    np.testing.assert_allclose(clf.weights_, W, rtol=1e-9, atol=1e-9)
    # the scans in that oracle differ from the thesis variant's: the two models are not equal
    kw.update(clone_probability=p, clone_decay=1.0, shuffle=False, variant="thesis")
    other = AMMClassifier(**kw).fit(X, y)
    assert other.weights_.shape != W.shape or not np.allclose(other.weights_, W)


def test_amm_with_one_weight_is_pegasos(rng):
    X = rng.normal(size=(400, 5))
    y = rng.integers(0, 4, size=400)
    a = AMMClassifier(l2_penalty=1e-3, max_weights_per_class=1, online=True, random_state=3).fit(X, y)
    p = PegasosClassifier(l2_penalty=1e-3, random_state=3).fit(X, y)
    np.testing.assert_array_equal(a.weights_, p.weights_)


def test_sparse_equals_dense_and_is_not_densified(rng):
    X = rng.normal(size=(500, 6)) * (rng.uniform(size=(500, 6)) < 0.4)
    y = np.where(X[:, 0] - X[:, 1] > 0, "a", "b")
    for est in [
        AMMClassifier(l2_penalty=1e-3, random_state=0),
        BSGDClassifier(l2_penalty=1e-3, budget=20, gamma=0.5, random_state=0),
        AROWClassifier(random_state=0),
        LLSVMClassifier(n_landmarks=10, random_state=0),
    ]:
        d = est.fit(X, y).decision_function(X)
        s = est.fit(sp.csr_matrix(X), y).decision_function(sp.csr_matrix(X))
        np.testing.assert_allclose(s, d, rtol=1e-10, atol=1e-10)
    # 2 million columns: a dense copy would need 8 GB; CSR goes straight through.
    n, dim = 2000, 2_000_000
    cols = rng.integers(0, dim, size=(n, 5))
    Xs = sp.csr_matrix((np.ones(n * 5), cols.ravel(), np.arange(0, n * 5 + 1, 5)), shape=(n, dim))
    ys = (cols[:, 0] % 2).astype(int)
    assert AROWClassifier(covariance="diagonal", random_state=0).fit(Xs, ys).score(Xs, ys) > 0.9
    amm = AMMClassifier(l2_penalty=1e-4, max_weights_per_class=2, max_iter=3, random_state=0)
    assert amm.fit(Xs, ys).score(Xs, ys) > 0.85


def test_partial_fit_continues_fit(rng):
    X = rng.normal(size=(300, 3))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    full = AMMClassifier(l2_penalty=1e-3, online=True, max_iter=2, shuffle=False).fit(X, y)
    inc = AMMClassifier(l2_penalty=1e-3, online=True, shuffle=False)
    inc.partial_fit(X, y, classes=[0, 1]).partial_fit(X, y)
    np.testing.assert_allclose(inc.weights_, full.weights_, rtol=1e-12, atol=1e-12 * np.abs(full.weights_).max())
    assert inc.t_ == full.t_ == 600
    a = AROWClassifier(shuffle=False, max_iter=2).fit(X, y)
    b = AROWClassifier(shuffle=False).partial_fit(X[:100], y[:100], classes=[0, 1])
    b.partial_fit(X[100:], y[100:]).partial_fit(X, y)
    np.testing.assert_allclose(b.mean_, a.mean_, rtol=1e-10)
    with pytest.raises(ValueError, match="classes"):
        AMMClassifier().partial_fit(X, y)


def test_arow_hand_steps():
    # Spec oracle 33 (r = 1, no bias): mu = (0.5, 0), Sigma_11 = 0.5; then mu_1 = 2/3, Sigma_11 = 1/3.
    clf = AROWClassifier(update_damping=1.0, bias=0.0, covariance="full")
    x = np.array([[1.0, 0.0]])
    clf.partial_fit(x, ["yes"], classes=["no", "yes"])
    np.testing.assert_allclose(clf.mean_[0, :2], [0.5, 0.0])
    np.testing.assert_allclose(clf.covariance_[0, :2, :2], [[0.5, 0.0], [0.0, 1.0]])
    clf.partial_fit(x, ["yes"])
    np.testing.assert_allclose(clf.mean_[0, 0], 2 / 3)
    np.testing.assert_allclose(clf.covariance_[0, 0, 0], 1 / 3)
    # (6.2): probability of a positive margin = Phi(mu.x / sqrt(x' Sigma x))
    from scipy.stats import norm

    p = clf.margin_probability(np.array([[1.0, 2.0]]))[0, 0]
    mu, S = clf.mean_[0, :2], clf.covariance_[0, :2, :2]
    v = np.array([1.0, 2.0])
    assert p == pytest.approx(norm.cdf(mu @ v / np.sqrt(v @ S @ v)))


def _numpy_arow(X, y, r, bias):
    """AROW with full covariance in plain NumPy, in the given order (the oracle)."""
    Xb = np.column_stack([X, np.full(len(X), bias)])
    mu, S = np.zeros(Xb.shape[1]), np.eye(Xb.shape[1])
    for x, t in zip(Xb, y):
        m = t * (mu @ x)
        if m < 1:
            sx = S @ x
            beta = 1 / (x @ sx + r)
            mu = mu + beta * (1 - m) * t * sx
            S = S - beta * np.outer(sx, sx)
    return mu, S


@pytest.mark.parametrize("d", [1, 9, 100])
def test_arow_full_matches_numpy_steps(rng, d):
    # The fused, vectorised full-covariance epoch (4-row kernels, prefetch, Sigma x of the
    # next example inside the rank-one update) against NumPy, dense and CSR, d not a multiple
    # of 4 and the benchmark's d = 100.
    X = rng.normal(size=(600, d)) * (rng.random((600, d)) < 0.7)
    X[:, d // 2] = 0.0  # a zero column: Sigma x has an exact 0 there (skipped row)
    y = np.where(X @ rng.normal(size=d) + 0.3 * rng.normal(size=600) > 0, 1, -1)
    mu, S = _numpy_arow(X, y, r=2.0, bias=0.5)
    for Xin in (X, sp.csr_matrix(X)):
        clf = AROWClassifier(update_damping=2.0, bias=0.5, shuffle=False).fit(Xin, y)
        np.testing.assert_allclose(clf.mean_[0], mu, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(clf.covariance_[0], S, rtol=1e-10, atol=1e-12)
    # shuffled: dense and CSR walk the same permutation through the same kernels
    a = AROWClassifier(update_damping=2.0, random_state=3).fit(X, y)
    b = AROWClassifier(update_damping=2.0, random_state=3).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(a.covariance_, b.covariance_, rtol=1e-12, atol=1e-14)


def test_arow_model_arrays_round_trip(rng):
    X = rng.normal(size=(400, 4))
    y = rng.choice(["r", "g", "b"], size=400)
    for cov in ["full", "diagonal"]:
        clf = AROWClassifier(covariance=cov, random_state=0).fit(X, y)
        assert clf.mean_.shape == (3, 5)
        assert clf.covariance_.shape == ((3, 5, 5) if cov == "full" else (3, 5))
        back = AROWClassifier.from_model(clf.mean_, clf.covariance_, clf.classes_)
        assert back.covariance == cov
        np.testing.assert_array_equal(back.predict(X), clf.predict(X))
        back.partial_fit(X, y)  # a rebuilt model keeps learning
        # The array is `sigma`; `covariance=` is the estimator parameter and must agree.
        kw = AROWClassifier.from_model(mean=clf.mean_, sigma=clf.covariance_, classes=clf.classes_,
                                       covariance=cov, update_damping=2.0)
        assert kw.covariance == cov and kw.update_damping == 2.0
        np.testing.assert_array_equal(kw.predict(X), clf.predict(X))
        other = "full" if cov == "diagonal" else "diagonal"
        with pytest.raises(ValueError, match="disagrees"):
            AROWClassifier.from_model(clf.mean_, clf.covariance_, clf.classes_, covariance=other)
    with pytest.raises(ValueError, match="sigma"):
        AROWClassifier.from_model(np.zeros((1, 3)), np.zeros((1, 4)), [0, 1])


def test_pickle_and_labels(rng):
    X = rng.normal(size=(300, 3))
    y = np.array(["cat", "dog", "emu"])[np.argmax(X, axis=1)]
    for est in [
        PegasosClassifier(l2_penalty=1e-3, random_state=0),
        AMMClassifier(l2_penalty=1e-3, random_state=0),
        BSGDClassifier(l2_penalty=1e-3, budget=15, random_state=0),
        LLSVMClassifier(l2_penalty=0.01, n_landmarks=15, random_state=0),
        AROWClassifier(random_state=0),
    ]:
        est.fit(X, y)
        assert list(est.classes_) == ["cat", "dog", "emu"]
        assert est.score(X, y) > 0.8, type(est).__name__
        back = pickle.loads(pickle.dumps(est))
        np.testing.assert_array_equal(back.predict(X), est.predict(X))
        np.testing.assert_array_equal(back.decision_function(X), est.decision_function(X))


def test_n_jobs_does_not_change_predictions(rng):
    X = rng.normal(size=(3000, 5))
    y = (np.sin(3 * X[:, 0]) + X[:, 1] > 0).astype(int)
    for est in [AMMClassifier(random_state=0), BSGDClassifier(budget=30, random_state=0)]:
        est.set_params(n_jobs=1).fit(X, y)
        one = est.decision_function(X)
        est.set_params(n_jobs=2)
        np.testing.assert_array_equal(est.decision_function(X), one)


def test_bsgd_budget_and_maintenance(rng):
    X = rng.uniform(-1, 1, size=(2000, 2))
    y = ((X**2).sum(1) < 0.5).astype(int)
    for m in ["merge", "remove", "remove-random", "project"]:
        clf = BSGDClassifier(l2_penalty=1e-4, budget=25, gamma=2.0, maintenance=m, random_state=0).fit(X, y)
        assert clf.n_weights_ <= 25
        assert clf.support_vectors_.shape == (clf.n_weights_, 2)
        assert clf.dual_coef_.shape == (clf.n_weights_, 2)
        assert clf.score(X, y) > (0.93 if m in ("merge", "project") else 0.75), m


def test_gamm_beats_amm_on_checkerboard():
    # Table 4.5's 4x4 pattern (15k/5k as in the thesis, 3 seeds instead of 10): AMM 35.9%,
    # GAMM 7.4% there. Batch GAMM needs an example assigned to a weight that was cloned during
    # the epoch to go to the best of the original and its clones; with the assignment frozen
    # until the next reassignment the clones never specialise and GAMM stayed at 31-36%.
    # Here: AMM about 40%, GAMM (batch and online) about 8-12%. BudgetedSVM's batch rules
    # (variant="budgetedsvm": frozen pre-update copy) leave batch GAMM at 22-41% here.
    amm_err, gamm_err = [], []
    for seed in range(3):
        X, y = make_checkerboard(15000, 4, 4, random_state=seed)
        Xt, yt = make_checkerboard(5000, 4, 4, random_state=100 + seed)
        X, Xt = 2 * X - 1, 2 * Xt - 1
        amm = AMMClassifier(l2_penalty=1e-4, max_iter=15, random_state=seed).fit(X, y)
        amm_err.append(1 - amm.score(Xt, yt))
        for online in (False, True):
            gamm = AMMClassifier(
                l2_penalty=1e-4,
                max_iter=15,
                prune_c=50,
                clone_probability=0.2,
                online=online,
                variant="thesis",
                random_state=seed,
            ).fit(X, y)
            assert gamm.n_weights_ <= 2 * 50
            gamm_err.append(1 - gamm.score(Xt, yt))
    assert np.mean(amm_err) > 0.3, amm_err
    assert np.mean(gamm_err) < 0.16, gamm_err
    assert max(gamm_err) < 0.2, gamm_err


def test_amm_checkerboard_reaches_table_4_5_with_a_validated_lambda():
    # Table 4.5, 4x4: AMM 35.87 +- 3.39 % with lambda "by CV". A sweep of lambda (1e-2..1e-6),
    # budget, batch / online, rules, bias and input scale (docs/benchmarks/svm.md) finds batch
    # AMM at 37.5-51 % and BudgetedSVM 1.2's own batch AMM at 45.6-51 %, its online AMM at best
    # 36.0 %; online AMM with a small lambda is the setting that reaches the thesis's figure.
    errs = []
    for seed in range(3):
        X, y = make_checkerboard(15000, 4, 4, random_state=seed)
        Xt, yt = make_checkerboard(5000, 4, 4, random_state=100 + seed)
        X, Xt = 2 * X - 1, 2 * Xt - 1
        amm = AMMClassifier(l2_penalty=1e-6, max_iter=15, online=True, max_weights_per_class=10,
                            random_state=seed).fit(X, y)
        errs.append(1 - amm.score(Xt, yt))
    assert np.mean(errs) <= 0.3587 + 0.0339, errs


def test_kmeans_binding(rng):
    centres = np.array([[0.0, 0.0], [5.0, 5.0], [0.0, 5.0]])
    X = np.vstack([c + 0.1 * rng.normal(size=(50, 2)) for c in centres])
    C, labels, inertia, n_iter = _core.kmeans(X, 3, seed=1)
    assert sorted(np.bincount(labels).tolist()) == [50, 50, 50]
    assert inertia == pytest.approx(((X - C[labels]) ** 2).sum())
    with pytest.raises(ValueError, match="k"):
        _core.kmeans(X, 0)


def test_llsvm_kmeans_binding(rng):
    # BudgetedSVM-style k-means (random distinct rows, then Lloyd): the centres are the means
    # of their clusters, and CSR input gives the dense result.
    centres = np.array([[0.0, 0.0, 1.0], [5.0, 5.0, 0.0], [0.0, 5.0, 0.0]])
    X = np.vstack([c + 0.1 * rng.normal(size=(60, 3)) for c in centres])
    X[np.abs(X) < 0.05] = 0.0
    C, labels = _core.llsvm_kmeans(X, 3, max_iter=10, seed=4)
    for k in range(3):
        np.testing.assert_allclose(C[k], X[labels == k].mean(0), atol=1e-12)
    C2, labels2 = _core.llsvm_kmeans(core_examples(sp.csr_matrix(X)), 3, max_iter=10, seed=4)
    np.testing.assert_array_equal(labels, labels2)
    np.testing.assert_allclose(C, C2, atol=1e-12)
    with pytest.raises(ValueError, match="n_landmarks"):
        _core.llsvm_kmeans(X, 0)


@pytest.mark.parametrize(
    "est, match",
    [
        (AMMClassifier(l2_penalty=0), "`l2_penalty`"),
        (AMMClassifier(max_weights_per_class=0), "max_weights_per_class"),
        (AMMClassifier(clone_probability=1.5), "clone_probability"),
        (AMMClassifier(max_iter=0), "max_iter"),
        (AMMClassifier(variant="gamm"), "variant"),
        (BSGDClassifier(budget=0), "budget"),
        (BSGDClassifier(maintenance="merge", kernel="poly"), "merge"),
        (BSGDClassifier(kernel="nope"), "kernel"),
        (LLSVMClassifier(landmarks="grid"), "landmarks"),
        (AROWClassifier(update_damping=-1), "`update_damping`"),
        (AROWClassifier(covariance="banded"), "covariance"),
        (PegasosClassifier(n_jobs=0), "n_jobs"),
    ],
)
def test_invalid_parameters(est, match):
    X = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    with pytest.raises((ValueError, TypeError), match=match):
        est.fit(X, [0, 1, 0])


def test_invalid_inputs():
    clf = AMMClassifier()
    with pytest.raises(ValueError, match="class"):
        clf.fit(np.ones((5, 2)), np.zeros(5))
    with pytest.raises(ValueError):
        clf.fit(np.array([[np.nan, 1.0], [0.0, 1.0]]), [0, 1])
    clf.fit(np.eye(3), [0, 1, 2])
    with pytest.raises(ValueError, match="features"):
        clf.predict(np.ones((2, 4)))
    with pytest.raises(ValueError, match="labels not in"):
        AMMClassifier().partial_fit(np.eye(3), [0, 1, 5], classes=[0, 1, 2])


def test_budgetedsvm_model_file_round_trip(tmp_path, rng):
    from vastml.svm import load_budgetedsvm, save_budgetedsvm

    X = rng.normal(size=(400, 4)) * (rng.uniform(size=(400, 4)) < 0.7)
    # the format holds integer labels (string labels are refused: test_svm_model_files.py)
    y2 = np.where(X[:, 0] * X[:, 1] + 0.3 * X[:, 2] > 0, 1, 0)
    y3 = np.array([3, 7, 11])[np.argmax(X[:, :3], axis=1)]
    cases = [
        (PegasosClassifier(l2_penalty=1e-3, random_state=0), y3),
        (AMMClassifier(l2_penalty=1e-3, random_state=0), y3),
        (AMMClassifier(l2_penalty=1e-3, online=True, random_state=0), y2),
        (BSGDClassifier(l2_penalty=1e-3, budget=20, gamma=0.7, random_state=0), y3),
        (LLSVMClassifier(l2_penalty=0.01, n_landmarks=15, gamma=0.7, random_state=0), y2),
    ]
    for k, (est, y) in enumerate(cases):
        est.fit(X, y)
        path = tmp_path / f"m{k}.txt"
        save_budgetedsvm(est, path)
        text = path.read_text()
        assert text.startswith("ALGORITHM: ") and "\nMODEL:\n" in text
        back = load_budgetedsvm(path)
        assert type(back) is type(est)
        np.testing.assert_array_equal(back.classes_, est.classes_)
        np.testing.assert_array_equal(back.predict(X), est.predict(X))
        np.testing.assert_allclose(back.decision_function(X), est.decision_function(X), rtol=1e-9, atol=1e-9)
    with pytest.raises(TypeError):
        save_budgetedsvm(AROWClassifier().fit(X, y2), tmp_path / "arow.txt")
    (tmp_path / "bad.txt").write_text("ALGORITHM: 9\nDIMENSION: 4\nLABELS: 0 1\nMODEL:\n")
    with pytest.raises(ValueError, match="ALGORITHM"):
        load_budgetedsvm(tmp_path / "bad.txt")


def test_kmedoids_landmarks_are_medoids(rng):
    from vastml.svm._llsvm import kmedoids

    X = np.vstack([c + 0.3 * rng.normal(size=(40, 2)) for c in ([0, 0], [4, 0], [0, 4])])
    y = (np.arange(120) // 40 == 1).astype(int)
    clf = LLSVMClassifier(n_landmarks=3, landmarks="kmedoids", gamma=0.5, random_state=0).fit(X, y)
    # every landmark is a data row, and (brute force) the best medoid of its cluster
    d = ((X[:, None, :] - clf.landmarks_[None]) ** 2).sum(-1)
    lab = d.argmin(1)
    for c, m in enumerate(clf.landmarks_):
        members = X[lab == c]
        assert any(np.array_equal(m, r) for r in members)
        cost = ((members[:, None, :] - members[None]) ** 2).sum(-1).sum(1)
        assert ((members - m) ** 2).sum() == pytest.approx(cost.min())
    Xs = sp.csr_matrix(X)
    np.testing.assert_allclose(kmedoids(Xs, lab, 3, 5), kmedoids(X, lab, 3, 5))


def test_verbose_draws_a_bar_over_the_passes(rng, capsys):
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] > 0).astype(int)
    clf = AMMClassifier(max_iter=3, online=True, verbose=True, random_state=0).fit(X, y)
    err = capsys.readouterr().err
    # tqdm redraws at most every 0.1 s, so a fast fit may show only its first frame ("0/3"):
    # the bar and its total are certain, the intermediate frames are not
    assert "AMMClassifier" in err and "/3" in err
    assert clf.n_iter_ == 3
    # batch AMM: the initial online pass, then max_iter epochs (BudgetedSVM's -A 1 -e 3)
    clf = AMMClassifier(max_iter=3, verbose=True, random_state=0).fit(X, y)
    err = capsys.readouterr().err
    assert "/4" in err
    assert clf.n_iter_ == 4 and clf.t_ == 4 * 200
    AMMClassifier(max_iter=2, random_state=0).fit(X, y)
    assert capsys.readouterr().err == ""
