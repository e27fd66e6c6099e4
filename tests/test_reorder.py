"""vastml.reorder: the ConvoMap objective against a dense NumPy oracle and the VERIFIED
numbers of the spec, the estimator, branch and bound against brute force, and bad input."""

import itertools
import pickle

import numpy as np
import pytest
from conftest import SHARED_DATA
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.signal import correlate2d

from vastml.reorder import (
    ConvoMap,
    barycentric_order,
    bidirectional_order,
    branch_and_bound_order,
    compress,
    convolution_error,
    gradient_order,
    heatmap_order,
    knn_accuracy,
    load_football,
    load_genes,
    load_mammals,
    load_news,
    load_paleo,
    nested_order,
    planted_categorical,
    planted_matrix,
    spectral_order,
    tsp_order,
)

DATA = SHARED_DATA / "convomap"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared data not found at {DATA}")


def gbs(km, kn):
    cr, cc = km // 2, kn // 2
    cm = max(cr, cc)
    r = np.abs(np.arange(km) - cr)[:, None]
    c = np.abs(np.arange(kn) - cc)[None, :]
    K = cm - np.maximum(r, c) + 1.0
    return K / K.sum()


def dense_error(M, K, padding="zeros_and_ones", quadratic=False):
    """NumPy oracle: ones-only error with explicit padding, summed over colour layers."""
    km, kn = K.shape
    h, w = km // 2, kn // 2
    total = 0.0
    layers = [M == 1] if set(np.unique(M)) <= {0, 1} else [M == v for v in np.unique(M)]
    for L in layers:
        L = L.astype(float)
        if padding == "zeros_and_ones":
            P = np.zeros((L.shape[0] + 2 * h, L.shape[1] + 2 * w))
            P[:h, :] = 1
            P[:, :w] = 1
            P[h : h + L.shape[0], w : w + L.shape[1]] = L
        else:
            mode = {"zero": "constant", "extension": "edge", "cyclic": "wrap"}[padding]
            P = np.pad(L, ((h, h), (w, w)), mode=mode)
        C = correlate2d(P, K, mode="valid")
        d = (1 - C)[L == 1]
        total += (d**2).sum() if quadratic else np.abs(d).sum()
    return total


@settings(max_examples=40, deadline=None)
@given(
    m=st.integers(1, 25),
    n=st.integers(1, 25),
    kr=st.integers(0, 4),
    kc=st.integers(0, 3),
    padding=st.sampled_from(["zeros_and_ones", "zero", "extension", "cyclic"]),
    colours=st.sampled_from([1, 3]),
    quadratic=st.booleans(),
    seed=st.integers(0, 10_000),
)
def test_error_matches_dense_oracle(m, n, kr, kc, padding, colours, quadratic, seed):
    rng = np.random.default_rng(seed)
    M = rng.integers(0, 2 if colours == 1 else colours, size=(m, n))
    if colours > 1:
        M[0, 0] = 2  # make sure it is read as categorical
    K = gbs(2 * kr + 1, 2 * kc + 1)
    got = convolution_error(
        M,
        kernel_size=(2 * kr + 1, 2 * kc + 1),
        padding=padding,
        error="quadratic" if quadratic else "abs",
    )
    want = dense_error(M, K, padding, quadratic)
    assert got == pytest.approx(want, rel=1e-9, abs=1e-9)


def test_orders_permute_the_display():
    rng = np.random.default_rng(0)
    M = rng.integers(0, 2, size=(12, 9))
    r, c = rng.permutation(12), rng.permutation(9)
    assert convolution_error(M, kernel_size=5, row_order=r, col_order=c) == pytest.approx(
        convolution_error(M[r][:, c], kernel_size=5), rel=1e-12
    )


@pytest.mark.parametrize(
    "pattern,noise,want",
    [("nested", 0.0, 1805.7), ("banded", 0.1, 10200.8), ("blocks", 0.25, 17639.7), ("banded_blocks", 0.25, 17822.3)],
)
def test_verified_planted_gbs49(pattern, noise, want):
    M = planted_matrix(pattern, 300, noise)
    assert convolution_error(M, kernel_size=49) == pytest.approx(want, abs=0.06)


def test_verified_planted_kernels():
    M = planted_matrix("nested", 300, 0.25)
    assert convolution_error(M, kernel="gbe", kernel_size=49) == pytest.approx(15027.5, abs=0.06)
    assert convolution_error(M, kernel="cgbs_thesis_tables", kernel_size=49) == pytest.approx(13533.6, abs=0.06)
    assert convolution_error(M, kernel_size=49, error="quadratic") == pytest.approx(8588.5, abs=0.06)
    assert convolution_error(M, kernel_size=(11, 3)) == pytest.approx(15948.6, abs=0.06)


def test_verified_categorical():
    A = planted_categorical(300)
    assert convolution_error(A, kernel_size=3) == pytest.approx(50737.5, abs=0.06)
    assert convolution_error(A, kernel_size=21) == pytest.approx(64970.6, abs=0.06)


@needs_data
def test_verified_real_datasets():
    F, labels = load_football(DATA)
    assert F.shape == (115, 115) and len(labels) == 115
    assert convolution_error(F, kernel_size=7) == pytest.approx(1096.05, abs=0.006)
    assert convolution_error(F, kernel_size=11) == pytest.approx(1127.22, abs=0.006)
    M = load_mammals(DATA)
    assert M.shape == (2221, 124)
    assert convolution_error(M, kernel_size=25) == pytest.approx(41405.4, abs=0.06)
    assert convolution_error(M, kernel_size=(29, 5)) == pytest.approx(36945.5, abs=0.06)
    G = load_genes(DATA)
    assert G.shape == (2112, 363)
    assert convolution_error(G, kernel_size=25) == pytest.approx(189528.9, abs=0.06)
    assert convolution_error(G, kernel_size=(29, 5)) == pytest.approx(186241.7, abs=0.06)
    N, y = load_news("news_3cl_1", DATA)
    assert N.shape == (589, 589) and len(y) == 589
    for k, want in [(7, 50609.1), (11, 53378.3), (21, 56043.9)]:
        assert convolution_error(N, kernel_size=k) == pytest.approx(want, abs=0.06)


@needs_data
def test_paleo_loader():
    # the thesis's 1597 x 4215 (its unordered error came from a hash-map order, spec section 15)
    P = load_paleo(DATA)
    assert P.shape == (1597, 4215)
    assert int(P.sum()) == 14133 and set(np.unique(P)) == {0, 1}
    assert P.sum(axis=0).min() >= 1 and P.sum(axis=1).min() >= 1


def test_factor_two_identity_under_cyclic_padding():
    rng = np.random.default_rng(1)
    M = rng.integers(0, 2, size=(40, 30))
    K = gbs(5, 5)
    ones = convolution_error(M, kernel_size=5, padding="cyclic")
    P = np.pad(M.astype(float), 2, mode="wrap")
    full = np.abs(M - correlate2d(P, K, mode="valid")).sum()
    assert full == pytest.approx(2 * ones, rel=1e-12)


def shuffled_planted(pattern, n, noise, seed=0):
    M = planted_matrix(pattern, n, noise, random_state=7)
    rng = np.random.default_rng(seed)
    return M, M[rng.permutation(n)][:, rng.permutation(n)]


def test_convomap_recovers_planted_nested_exactly():
    M, S = shuffled_planted("nested", 40, 0.0)
    cm = ConvoMap(kernel_size=5, random_state=0).fit(S)
    assert cm.error_ == pytest.approx(convolution_error(M, kernel_size=5), abs=1e-9)
    R = cm.transform(S)
    assert convolution_error(R, kernel_size=5) == pytest.approx(cm.error_, rel=1e-12)
    assert cm.error_ <= cm.initial_error_
    assert sorted(cm.row_order_.tolist()) == list(range(40))


def test_convomap_planted_blocks_within_half_percent():
    M, S = shuffled_planted("blocks", 50, 0.1)
    planted = convolution_error(M, kernel_size=5)
    cm = ConvoMap(kernel_size=5, max_iter=20000, stop_threshold=None, random_state=1).fit(S)
    assert cm.error_ <= planted * 1.005


def test_convomap_reproducible_for_any_n_jobs():
    _, S = shuffled_planted("banded", 40, 0.1)
    a = ConvoMap(kernel_size=3, random_state=5, n_jobs=1).fit(S)
    b = ConvoMap(kernel_size=3, random_state=5, n_jobs=2).fit(S)
    assert np.array_equal(a.row_order_, b.row_order_)
    assert np.array_equal(a.col_order_, b.col_order_)
    assert a.error_ == b.error_
    c = pickle.loads(pickle.dumps(a))
    assert np.array_equal(c.transform(S), a.transform(S))


def test_convomap_restart_and_stop_unless_improved():
    _, S = shuffled_planted("banded", 60, 0.1)
    tsp = ConvoMap(kernel_size=5, schedule=(), random_state=0).fit(S)
    # nothing improved on the TSP yet: P-LS ends there
    stop = ConvoMap(kernel_size=5, schedule=("stop_unless_improved", 1), random_state=0).fit(S)
    assert stop.history_ == tsp.history_
    assert np.array_equal(stop.row_order_, tsp.row_order_) and np.array_equal(stop.col_order_, tsp.col_order_)
    # a block ordering that raised the error, back to the start, a split that improves on
    # it, so the last split runs too; the best arrangement is returned
    sched = ("block_ordering", "restart", 1, "stop_unless_improved", 2)
    cm = ConvoMap(kernel_size=5, schedule=sched, random_state=0).fit(S)
    names = [h[0] for h in cm.history_]
    assert names == ["start", "tsp", "block_ordering", "restart", "split_1", "split_2"]
    assert cm.history_[2][1] > tsp.error_
    assert cm.history_[3][1] == tsp.error_
    assert cm.history_[4][1] < tsp.error_
    assert cm.error_ == min(h[1] for h in cm.history_[1:])
    assert convolution_error(cm.transform(S), kernel_size=5) == pytest.approx(cm.error_, rel=1e-12)


def test_convomap_local_search_and_categorical():
    rng = np.random.default_rng(2)
    A = np.repeat(np.repeat(rng.integers(0, 4, size=(4, 4)), 6, axis=0), 6, axis=1)
    S = A[rng.permutation(24)][:, rng.permutation(24)]
    cm = ConvoMap(kernel_size=3, method="ls", max_iter=3000, random_state=0).fit(S)
    assert cm.n_colours_ == 4
    assert cm.error_ < cm.initial_error_
    assert set(cm.move_weights_) == {
        "swap_rectangles", "swap", "adjacent_swap", "reverse", "relocate", "block_swap"
    }
    assert abs(sum(cm.move_weights_.values()) - 1) < 1e-9
    assert convolution_error(cm.transform(S), kernel_size=3) == pytest.approx(cm.error_, rel=1e-12)


def cross(K):
    C = np.zeros_like(K)
    C[K.shape[0] // 2, :] = K[K.shape[0] // 2, :]
    C[:, K.shape[1] // 2] = K[:, K.shape[1] // 2]
    return C / C.sum()


def brute_force(M, K):
    return min(dense_error(M[list(p)], K, "zero") for p in itertools.permutations(range(M.shape[0])))


@pytest.mark.parametrize("seed", range(6))
def test_branch_and_bound_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(3, 8))
    M = rng.integers(0, 2, size=(m, 6))
    for kernel, size, K in [("gbs", 3, gbs(3, 3)), ("cross_gbs", 5, cross(gbs(5, 5)))]:
        order, err = branch_and_bound_order(M, kernel=kernel, kernel_size=size)
        assert sorted(order.tolist()) == list(range(m))
        assert err == pytest.approx(brute_force(M, K), abs=1e-9)
        assert convolution_error(M, kernel=kernel, kernel_size=size, padding="zero", row_order=order) == pytest.approx(err)


def test_tsp_and_baselines_are_permutations():
    _, S = shuffled_planted("banded", 30, 0.0)
    assert sorted(tsp_order(S).tolist()) == list(range(30))
    assert sorted(tsp_order(S, axis=1).tolist()) == list(range(30))
    for f in (nested_order, barycentric_order, spectral_order, heatmap_order):
        r, c = f(S)
        assert sorted(r.tolist()) == list(range(30)), f.__name__
        assert sorted(c.tolist()) == list(range(30)), f.__name__
    M, S = shuffled_planted("nested", 30, 0.0)
    r, c = nested_order(S)
    assert convolution_error(S[r][:, c], kernel_size=5) == pytest.approx(convolution_error(M, kernel_size=5))


def test_compress_and_accuracy():
    M = np.zeros((90, 60), dtype=int)
    M[:45] = 1
    out, score = compress(M, (9, 6))
    assert out.shape == (9, 6) and 0 <= out.min() and out.max() <= 1
    C = np.full((30, 30), 3)
    out, score = compress(C, (5, 5), method="majority")
    assert score == 100.0 and (out == 0).all()
    labels = [0] * 30 + [1] * 30
    good = knn_accuracy(np.arange(60), labels, n_neighbors=3, n_splits=3, random_state=0)
    bad = knn_accuracy(np.random.default_rng(0).permutation(60), labels, n_splits=3, random_state=0)
    assert good >= 0.9 > bad


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: convolution_error([[0, 2], [1, 0]], categorical=False), "binary"),
        (lambda: convolution_error(np.eye(3), kernel_size=4), "odd"),
        (lambda: convolution_error(np.eye(3), kernel=-np.ones((3, 3))), "negative"),
        (lambda: convolution_error(np.eye(3), kernel="nope"), "kernel"),
        (lambda: convolution_error(np.eye(3), padding="mirror"), "padding"),
        (lambda: convolution_error(np.eye(3), kernel=np.array([[1.0, 2.0, 3.0]])), "symmetric"),
        (lambda: convolution_error(np.zeros((0, 3))), "empty"),
        (lambda: convolution_error(np.eye(3), row_order=[0, 0, 1]), "permutation"),
        (lambda: ConvoMap(moves=["teleport"]).fit(np.eye(4)), "moves"),
        (lambda: ConvoMap(kernel_size=2).fit(np.eye(4)), "odd"),
        (lambda: ConvoMap(schedule=("restart", "again")).fit(np.eye(4)), "schedule"),
        (lambda: branch_and_bound_order(np.eye(70, dtype=int)), "64"),
    ],
)
def test_bad_input_names_the_problem(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def gradient_value(D, order, weighted):
    v = 0.0
    f = (lambda x: x) if weighted else np.sign
    for i, k, j in itertools.combinations(order, 3):
        v += f(D[i, j] - D[i, k]) + f(D[i, j] - D[k, j])
    return v


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("weighted", [False, True])
def test_gradient_order_equals_brute_force(seed, weighted):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 8))
    X = rng.random((n, 3))
    D = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    order, value = gradient_order(D, weighted=weighted)
    best = max(gradient_value(D, p, weighted) for p in itertools.permutations(range(n)))
    assert value == pytest.approx(best, abs=1e-9)
    assert gradient_value(D, order, weighted) == pytest.approx(value, abs=1e-9)
    with pytest.raises(ValueError, match="symmetric"):
        gradient_order(D + np.triu(np.ones_like(D), 1))


@pytest.mark.parametrize("weighted", [False, True])
def test_gradient_order_sets_dp_recovers_a_line(weighted):
    # n = 22 runs the bounded DP over sets. Points on a line: the sorted order gives every
    # triple its best middle (the outer pair is the longest), which no order can beat.
    rng = np.random.default_rng(5)
    x = rng.permutation(np.cumsum(rng.random(22) + 0.1))
    D = np.abs(np.subtract.outer(x, x))
    order, value = gradient_order(D, weighted=weighted)
    assert list(order) in (list(np.argsort(x)), list(np.argsort(x)[::-1]))
    best = sum(3 * max(D[a, b], D[a, c], D[b, c]) - D[a, b] - D[a, c] - D[b, c] if weighted else 2
               for a, b, c in itertools.combinations(range(22), 3))
    assert value == pytest.approx(best, rel=1e-12)
    assert gradient_value(D, order, weighted) == pytest.approx(value, rel=1e-12)


def _is_banded(A):
    """Every row's ones are consecutive and their starts and ends never decrease."""
    starts, ends = [], []
    for row in A:
        ones = np.flatnonzero(row)
        if len(ones) == 0:
            continue
        if ones[-1] - ones[0] + 1 != len(ones):
            return False
        starts.append(ones[0])
        ends.append(ones[-1])
    return bool(np.all(np.diff(starts) >= 0) and np.all(np.diff(ends) >= 0))


@pytest.mark.parametrize("only_fill", [False, True])
def test_bidirectional_recovers_shuffled_band(only_fill):
    n, w = 30, 5
    B = (np.abs(np.subtract.outer(np.arange(n), np.arange(n))) < w).astype(int)
    rng = np.random.default_rng(1)
    S = B[rng.permutation(n)]
    assert not _is_banded(S)
    r, c = bidirectional_order(S, only_fill=only_fill)
    assert sorted(r.tolist()) == list(range(n)) and sorted(c.tolist()) == list(range(n))
    assert _is_banded(S[r][:, c])


def test_bidirectional_closest_interval_ignores_isolated_one():
    # the isolated 1 in the first row is a flip away from the interval [3, 5]
    from vastml.reorder._baselines import _closest_intervals

    A = np.array([[1, 0, 0, 1, 1, 1, 0], [0, 0, 1, 1, 0, 0, 0]], dtype=bool)
    start, end = _closest_intervals(A, only_fill=False)
    assert start.tolist() == [3, 2] and end.tolist() == [5, 3]
    start, end = _closest_intervals(A, only_fill=True)
    assert start.tolist() == [0, 2] and end.tolist() == [5, 3]


@pytest.mark.parametrize("init", ["heatmap", "bidirectional", "nested"])
def test_convomap_baseline_init_is_the_starting_order(init):
    rng = np.random.default_rng(3)
    M = (rng.random((40, 30)) < 0.3).astype(int)
    from vastml.reorder._convomap import _BASELINE_INITS

    r, c = _BASELINE_INITS[init](M)
    cm = ConvoMap(kernel_size=5, init=init, max_iter=200, random_state=0).fit(M)
    assert cm.initial_error_ == pytest.approx(convolution_error(M[r][:, c], kernel_size=5))
    assert cm.error_ <= cm.initial_error_ + 1e-9
    with pytest.raises(ValueError, match="binary"):
        ConvoMap(kernel_size=3, init=init).fit(rng.integers(0, 3, (10, 8)))


def test_convomap_restarts_never_worse_and_exact():
    M, S = shuffled_planted("blocks", 60, 0.1)
    plain = ConvoMap(kernel_size=5, random_state=3).fit(S)
    a = ConvoMap(kernel_size=5, random_state=3, restarts=6, n_jobs=1).fit(S)
    b = ConvoMap(kernel_size=5, random_state=3, restarts=6, n_jobs=2).fit(S)
    # the pipeline before the rounds is the plain run; one history entry per round
    assert a.history_[: len(plain.history_)] == plain.history_
    assert [h[0] for h in a.history_[len(plain.history_):]] == [f"ils_{r}" for r in range(1, 7)]
    assert a.error_ <= plain.error_
    assert a.error_ == min(h[1] for h in a.history_[1:])
    # the returned error is the error of the returned orders, recomputed in full
    assert convolution_error(a.transform(S), kernel_size=5) == pytest.approx(a.error_, rel=1e-12)
    assert convolution_error(S, kernel_size=5, row_order=a.row_order_, col_order=a.col_order_) == (
        pytest.approx(a.error_, rel=1e-12)
    )
    # reproducible for any n_jobs
    assert np.array_equal(a.row_order_, b.row_order_) and np.array_equal(a.col_order_, b.col_order_)
    assert a.history_ == b.history_
    # a budget spent before P-LS ends runs no round
    c = ConvoMap(kernel_size=5, random_state=3, restarts=6, time_budget=1e-9).fit(S)
    assert c.history_ == plain.history_
    # a budget too large for a deadline (it used to panic converting to a Duration) is no bound
    for huge in (1e30, float("inf")):
        d = ConvoMap(kernel_size=5, random_state=3, restarts=6, time_budget=huge, polish=True).fit(S)
        assert d.history_[: len(a.history_)] == a.history_ and d.history_[-1][0] == "polish"


def test_convomap_polish_exact_never_worse_and_a_local_minimum():
    M, S = shuffled_planted("banded", 60, 0.1)
    base = ConvoMap(kernel_size=7, random_state=2, restarts=2, n_jobs=1).fit(S)
    a = ConvoMap(kernel_size=7, random_state=2, restarts=2, polish=True, n_jobs=1).fit(S)
    b = ConvoMap(kernel_size=7, random_state=2, restarts=2, polish=True, n_jobs=2).fit(S)
    # the polish runs last, from the best of the same pipeline and rounds
    assert a.history_[:-1] == base.history_ and a.history_[-1][0] == "polish"
    assert a.error_ <= base.error_ and a.error_ == a.history_[-1][1]
    assert sorted(a.row_order_) == list(range(60)) and sorted(a.col_order_) == list(range(60))
    assert convolution_error(a.transform(S), kernel_size=7) == pytest.approx(a.error_, rel=1e-12)
    assert np.array_equal(a.row_order_, b.row_order_) and np.array_equal(a.col_order_, b.col_order_)
    # polishing the result again changes nothing (it is a local minimum of every move)
    again = ConvoMap(kernel_size=7, init="none", schedule=("polish",), random_state=0).fit(a.transform(S))
    assert again.error_ == pytest.approx(a.error_, rel=1e-12)
    assert np.array_equal(again.row_order_, np.arange(60)) and np.array_equal(again.col_order_, np.arange(60))
    # a brute-force check of one neighbourhood: no adjacent swap of rows improves it
    R = a.transform(S)
    for i in range(59):
        p = np.arange(60)
        p[[i, i + 1]] = p[[i + 1, i]]
        assert convolution_error(R[p], kernel_size=7) >= a.error_ - 1e-9
    # other objectives are left as they are
    c = ConvoMap(kernel_size=7, random_state=2, padding="cyclic", polish=True, max_iter=300).fit(S)
    assert c.history_[-1] == ("polish", c.error_) and c.error_ == min(h[1] for h in c.history_[1:-1])
    with pytest.raises(ValueError, match="polish"):
        ConvoMap(polish=0).fit(np.eye(4))


@pytest.mark.parametrize(
    "kw, match", [({"restarts": -1}, "restarts"), ({"time_budget": 0}, "time_budget"), ({"restarts": 1.5}, "restarts")]
)
def test_convomap_restart_parameters_checked(kw, match):
    with pytest.raises(ValueError, match=match):
        ConvoMap(**kw).fit(np.eye(4))
