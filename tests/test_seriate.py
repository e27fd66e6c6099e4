"""seriate(): every method returns a permutation; TSP against exhaustive search and the old
heuristic; OLO against exhaustive flips and SciPy; GW / HC against their definitions."""

import itertools

import numpy as np
import pytest
from scipy.cluster.hierarchy import leaves_list, linkage, optimal_leaf_ordering
from scipy.spatial.distance import pdist, squareform

from vastml import _core
from vastml.reorder import criterion, path_length, seriate, tsp_path
from vastml.reorder._seriate import METHODS, _ils_params


def _perm(o, n):
    return np.array_equal(np.sort(o), np.arange(n))


def _blobs(n=60, seed=0):
    rng = np.random.default_rng(seed)
    c = rng.normal(0, 5, (4, 3))
    return np.abs(c[rng.integers(0, 4, n)] + rng.normal(0, 0.5, (n, 3)))


@pytest.mark.parametrize("method", METHODS)
def test_every_method_orders_rows_columns_and_both(method):
    X = _blobs(30 if method.startswith("BB") else 60)
    n, m = X.shape
    o = seriate(X, method=method, random_state=0, time_limit=0.2)
    assert _perm(o, n)
    r, c = seriate(X, method=method, axis="both", random_state=0, time_limit=0.2)
    assert _perm(r, n) and _perm(c, m)
    if method not in ("BEA", "PCA", "TSP_means"):
        D = squareform(pdist(X[:12]))
        assert _perm(seriate(D, method=method, metric="precomputed", random_state=0, time_limit=0.2), 12)


def test_tsp_is_optimal_on_small_instances():
    rng = np.random.default_rng(1)
    for _ in range(8):
        X = rng.random((9, 2))
        D = squareform(pdist(X))
        best = min(D[p[:-1], p[1:]].sum() for p in map(np.array, itertools.permutations(range(9)))
                   if p[0] < p[-1])
        o = seriate(X, random_state=0, time_limit=0.05)
        assert criterion(D, o) == pytest.approx(best, rel=1e-12)
    # above the exact threshold: iterated local search, against Held-Karp on 13 points
    for seed in range(5):
        X = np.random.default_rng(10 + seed).random((13, 2))
        exact = path_length(X, tsp_path(X, method="exact"))
        o, L, *_ = _core.tsp_ils_order(X, False, (None, None), _ils_params(10, 500, None, 1, 30, 0))
        assert L == pytest.approx(path_length(X, o))
        assert L <= exact * 1.01


def test_tsp_is_never_longer_than_the_old_heuristic():
    rng = np.random.default_rng(2)
    for shape in [(800, 2), (600, 6), (500, 30)]:
        X = rng.normal(size=shape)
        old = path_length(X, tsp_path(X))
        new = path_length(X, seriate(X, random_state=0, time_limit=0.3))
        assert new <= old
        # seeded with the old path it cannot get longer, whatever the budget
        o, L, *_ = _core.tsp_ils_order(X, False, (None, None), _ils_params(10, 10, None, 1, 30, 0),
                                         tsp_path(X).astype(np.int64))
        assert L <= old + 1e-9


def test_tsp_on_a_precomputed_matrix_matches_points():
    X = np.random.default_rng(3).random((200, 3))
    D = np.ascontiguousarray(squareform(pdist(X)))
    a = _core.tsp_ils_order(X, False, (None, None), _ils_params(10, 1000, None, 1, 30, 4))[0]
    b = _core.tsp_ils_order(D, True, (None, None), _ils_params(10, 1000, None, 1, 30, 4))[0]
    assert np.array_equal(a, b)


def _flip_orders(Z, n):
    def rec(v):
        if v < n:
            yield [v]
            return
        a, b = int(Z[v - n, 0]), int(Z[v - n, 1])
        for la in rec(a):
            for lb in rec(b):
                yield la + lb
                yield lb + la
    return rec(2 * n - 2)


@pytest.mark.parametrize("method", ["average", "complete", "single", "ward"])
def test_olo_is_optimal_and_never_worse_than_scipy(method):
    rng = np.random.default_rng(4)
    for _ in range(4):
        X = rng.random((10, 2))
        y = pdist(X)
        D = squareform(y)
        Z = linkage(X, method=method)
        o = seriate(X, method="OLO", linkage=method)
        best = min(D[np.array(p[:-1]), np.array(p[1:])].sum() for p in _flip_orders(Z, 10))
        assert criterion(D, o) == pytest.approx(best, rel=1e-12)
        s = leaves_list(optimal_leaf_ordering(Z, y))
        assert criterion(D, o) <= criterion(D, s) + 1e-12
    # larger: never longer than SciPy's optimal_leaf_ordering, which is not always optimal
    # (scipy issue 11227); equal to it where SciPy is right
    X = rng.normal(size=(300, 4))
    y = pdist(X)
    Z = linkage(y, "average")
    s = leaves_list(optimal_leaf_ordering(Z, y))
    o = seriate(X, method="OLO")
    D = squareform(y)
    assert criterion(D, o) <= criterion(D, s) + 1e-9


def test_olo_equals_scipy_where_scipy_is_optimal():
    # on 4 points (SciPy's docstring scale) SciPy is right; the orders agree up to reversal
    rng = np.random.default_rng(5)
    agree = 0
    for _ in range(20):
        X = rng.random((6, 2))
        y = pdist(X)
        Z = linkage(y, "average")
        s = leaves_list(optimal_leaf_ordering(Z, y))
        o = seriate(X, method="OLO")
        D = squareform(y)
        if abs(criterion(D, s) - criterion(D, o)) < 1e-12:
            agree += 1
            assert np.array_equal(o, s) or np.array_equal(o, s[::-1])
    assert agree >= 10


def test_gw_and_hc_keep_the_tree():
    X = _blobs(40, 6)
    Z = linkage(X, "average")
    assert np.array_equal(seriate(X, method="HC"), leaves_list(Z))
    o = seriate(X, method="GW")
    pos = np.empty(40, int)
    pos[o] = np.arange(40)
    members = {i: [i] for i in range(40)}
    for t, (a, b) in enumerate(Z[:, :2].astype(int)):
        members[40 + t] = members[a] + members[b]
        p = pos[members[40 + t]]
        assert p.max() - p.min() + 1 == len(p)
    D = squareform(pdist(X))
    # GW flips make the path no longer than the plain leaves in these clustered data
    assert criterion(D, o) <= criterion(D, leaves_list(Z)) + 1e-9


def test_spectral_mds_pca_recover_a_line():
    t = np.random.default_rng(7).permutation(40).astype(float)
    X = np.c_[t, 0.5 * t]
    for method in ("Spectral", "MDS", "PCA"):
        o = seriate(X, method=method)
        assert np.all(np.diff(t[o]) > 0) or np.all(np.diff(t[o]) < 0), method


def test_exact_gradient_methods_are_exact():
    x = np.random.default_rng(8).random(8)
    D = np.abs(np.subtract.outer(x, x))
    for method, crit in (("BBURCG", "Gradient_raw"), ("BBWRCG", "Gradient_weighted")):
        o = seriate(D, method=method, metric="precomputed")
        best = max(criterion(D, list(p), method=crit) for p in itertools.permutations(range(8)))
        assert criterion(D, o, method=crit) == pytest.approx(best)


def test_arsa_improves_on_random_and_reports():
    X = _blobs(50, 9)
    D = squareform(pdist(X))
    seen = []
    o = seriate(X, method="ARSA", random_state=0, time_limit=1.0,
                callbacks=lambda it, obj, st: seen.append(obj) or it >= 3)
    assert _perm(o, 50)
    assert 1 <= len(seen) <= 3
    rnd = np.random.default_rng(0).permutation(50)
    assert criterion(D, o, method="AR_events") < criterion(D, rnd, method="AR_events")


def test_tsp_progress_and_stop():
    X = np.random.default_rng(10).random((500, 2))
    seen = []
    o = seriate(X, time_limit=1.0, callbacks=lambda it, obj, st: seen.append((it, obj)) or it >= 2)
    assert _perm(o, 500)
    assert [s[0] for s in seen] == [1, 2]
    assert seen[1][1] <= seen[0][1]


def test_tsp_callbacks_see_every_round_of_one_search(monkeypatch):
    import vastml.reorder._seriate as seriate_module

    X = np.random.default_rng(11).random((400, 2))
    calls = []
    real = _core.tsp_ils_order

    def counted(*args, **kwargs):
        calls.append(kwargs.get("progress"))
        return real(*args, **kwargs)

    monkeypatch.setattr(seriate_module._core, "tsp_ils_order", counted)
    seen = []
    o = seriate(X, time_limit=0.5, random_state=0,
                callbacks=lambda it, obj, st: seen.append((it, obj, np.array(st))) and False)
    # one Rust call with the hook, which reported every round: the best path so far
    assert len(calls) == 1 and calls[0] is not None
    assert [s[0] for s in seen] == list(range(1, 11))
    for k, (_, obj, st) in enumerate(seen):
        assert _perm(st, 400) and obj == pytest.approx(path_length(X, st))
        assert k == 0 or obj <= seen[k - 1][1]
    assert np.array_equal(seen[-1][2], o)
    # True stops the search with the path of that report
    calls.clear()
    stop = []
    o = seriate(X, time_limit=0.5, random_state=0,
                callbacks=lambda it, obj, st: stop.append((it, np.array(st))) or it >= 4)
    assert len(calls) == 1 and [s[0] for s in stop] == [1, 2, 3, 4]
    assert np.array_equal(o, stop[-1][1])
    # callback_every thins the calls, not the search
    every = []
    seriate(X, time_limit=0.2, random_state=0, callback_every=5,
            callbacks=lambda it, obj, st: every.append(it) and False)
    assert every == [5, 10]


def test_tsp_with_callbacks_equals_tsp_without(monkeypatch):
    import vastml.reorder._seriate as seriate_module

    # a kick budget instead of a time limit: the search no longer depends on the machine
    def by_kicks(neighbours, kicks, time_limit, runs, kick_window, seed):
        return {"neighbours": neighbours, "kicks": 100, "time_limit": None, "runs": runs,
                "kick_window": kick_window, "seed": seed}

    monkeypatch.setattr(seriate_module, "_ils_params", by_kicks)
    for X in (np.random.default_rng(13).random((600, 2)), _blobs(400, seed=3)):
        plain = seriate(X, random_state=5)
        seen = []
        with_cb = seriate(X, random_state=5,
                          callbacks=lambda it, obj, st: seen.append(it) and False)
        assert np.array_equal(plain, with_cb) and seen == list(range(1, 11))
        for jobs in (1, 2):
            assert np.array_equal(seriate(X, random_state=5, n_jobs=jobs,
                                          callbacks=lambda it, obj, st: False), plain)
        # the bindings: the same path, length and kick counts with and without a hook
        params = by_kicks(10, None, None, 2, 30, 5)
        a = _core.tsp_ils_order(X, False, (None, None), params)
        b = _core.tsp_ils_order(X, False, (None, None), params, progress=lambda it, obj, st: False)
        assert np.array_equal(a[0], b[0]) and a[1:] == b[1:]


def test_tsp_means_reports_every_sweep_and_a_stop_keeps_that_order():
    X = np.random.default_rng(12).random((3000, 3))
    seen = []
    o = seriate(X, method="TSP_means", random_state=0,
                callbacks=lambda it, obj, st: seen.append((it, obj, np.array(st))) and False)
    assert _perm(o, 3000)
    # every sweep, then the polish; each report carries the order so far and its length
    assert [s[0] for s in seen] == list(range(1, len(seen) + 1)) and len(seen) >= 3
    for _, obj, st in seen:
        assert _perm(st, 3000) and obj == pytest.approx(path_length(X, st))
    assert np.array_equal(seen[-1][2], o)
    first = seriate(X, method="TSP_means", random_state=0, callbacks=lambda it, obj, st: it >= 1)
    assert np.array_equal(first, seen[0][2])


def test_bea_orders_blocks_together():
    X = np.kron(np.eye(3), np.ones((10, 4)))
    rng = np.random.default_rng(11)
    p = rng.permutation(30)
    o = seriate(X[p], method="BEA", random_state=0)
    lab = (p[o] // 10)
    assert (np.diff(lab) != 0).sum() == 2


def test_bad_arguments():
    X = np.random.default_rng(0).random((10, 3))
    with pytest.raises(ValueError, match="method"):
        seriate(X, method="nope")
    with pytest.raises(ValueError, match="axis"):
        seriate(X, axis=2)
    with pytest.raises(ValueError, match="time_limit"):
        seriate(X, time_limit=-1)
    with pytest.raises(TypeError, match="time_limit"):
        seriate(X, time_limit="1")
    with pytest.raises(ValueError, match="square"):
        seriate(X, metric="precomputed")
    with pytest.raises(ValueError, match="NaN"):
        seriate(np.array([[np.nan, 1.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="data matrix"):
        seriate(squareform(pdist(X)), method="PCA", metric="precomputed")
    with pytest.raises(ValueError, match="64"):
        seriate(np.random.default_rng(0).random((70, 2)), method="BBURCG")
    with pytest.raises(ValueError, match="linkage"):
        seriate(X, method="OLO", linkage="ward", metric="cityblock")
