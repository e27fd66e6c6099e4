"""TSP-means, the point TSP and the ordering measures against exact oracles and spec values."""

import itertools

import numpy as np
import pytest

from vastml.reorder import (
    TSPMeans,
    dpc,
    dpc_entropy,
    dpc_sigma,
    figure_of_merit,
    path_length,
    tsp_path,
)


def blobs(sep, seed, per=200):
    rng = np.random.default_rng(seed)
    c = np.array([[0, 0], [0, sep], [sep, 0], [sep, sep]], float)
    x = np.vstack([rng.normal(size=(per, 2)) + ci for ci in c])
    return x, np.repeat(np.arange(4), per)


def test_fom_and_path_length_by_hand():
    assert figure_of_merit([0, 0, 1, 1, 2]) == 0.5
    y = np.array([2, 0, 1, 0, 2, 1])
    o = np.argsort(y, kind="stable")
    assert figure_of_merit(y, o) == pytest.approx(2 / 5)  # (c - 1) / (n - 1), the minimum
    assert figure_of_merit(y, o[::-1]) == figure_of_merit(y, o)
    assert figure_of_merit(y + 7, o) == figure_of_merit(y, o)  # relabelling
    assert path_length([[0, 0], [3, 4], [3, 0]]) == 9.0
    assert path_length([[0, 0], [3, 4], [3, 0]], [2, 1, 0]) == 9.0
    # random orders of 3 balanced classes: FOM near 1 - sum p^2 = 2/3
    rng = np.random.default_rng(0)
    yy = np.repeat([0, 1, 2], 2000)
    assert abs(figure_of_merit(yy, rng.permutation(6000)) - 2 / 3) < 0.02


def test_dpc_reconstructs_and_sigma_entropy():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(20, 3))
    o = rng.permutation(20)
    np.testing.assert_allclose(np.cumsum(dpc(x, o), axis=0), x[o], atol=1e-12)
    assert dpc_sigma([[0.0], [1.0], [3.0]])[0] ** 2 == pytest.approx(2.5)
    s = dpc_sigma(x, o)
    h = dpc_entropy(x, o)
    assert h == pytest.approx(0.5 * 3 * np.log(2 * np.pi * np.e) + np.log(s).sum())
    # the E-step sigma minimises the Gaussian entropy for a fixed order
    assert dpc_entropy(x, o, sigma=s * 1.1) > h and dpc_entropy(x, o, sigma=s * 0.9) > h
    assert dpc_entropy(x, o, model="laplace") > 0


def test_bad_input_rejected():
    with pytest.raises(ValueError, match="permutation"):
        figure_of_merit([0, 1, 1], [0, 0, 1])
    with pytest.raises(ValueError, match="NaN"):
        TSPMeans().fit([[0.0, np.nan], [1.0, 1.0]])
    with pytest.raises(ValueError, match="levels"):
        TSPMeans(levels=0).fit(np.zeros((10, 2)))
    with pytest.raises(ValueError, match="levels"):
        TSPMeans(levels=17).fit(np.zeros((10, 2)))
    with pytest.raises(ValueError, match="empty"):
        TSPMeans().fit(np.zeros((0, 2)))
    with pytest.raises(ValueError, match="exact"):
        tsp_path(np.zeros((20, 1)), method="exact")
    with pytest.raises(ValueError, match="differ"):
        tsp_path(np.zeros((5, 1)), start=1, end=1)


def test_exact_path_matches_brute_force():
    rng = np.random.default_rng(2)
    x = rng.random((7, 2))
    best = min(path_length(x, list(p)) for p in itertools.permutations(range(7)))
    assert path_length(x, tsp_path(x, method="exact")) == pytest.approx(best)
    p = tsp_path(x, method="exact", start=3, end=5)
    assert p[0] == 3 and p[-1] == 5
    best35 = min(
        path_length(x, [3, *q, 5]) for q in itertools.permutations([0, 1, 2, 4, 6])
    )
    assert path_length(x, p) == pytest.approx(best35)


@pytest.mark.parametrize("n", [1, 2, 3, 16, 257])
def test_tspmeans_is_a_permutation(n):
    x = np.random.default_rng(n).random((n, 3))
    o = TSPMeans(random_state=0).fit(x).order_
    assert sorted(o.tolist()) == list(range(n))
    dup = np.ones((n, 2))
    assert sorted(TSPMeans(levels=1).fit(dup).order_.tolist()) == list(range(n))


def test_four_blobs_within_20_percent_of_two_opt():
    x, y = blobs(4.5, 3)
    tm = TSPMeans(random_state=0).fit(x)
    two = tsp_path(x)
    assert tm.path_length_ <= 1.2 * path_length(x, two)
    # L computed in Rust against the NumPy measure; stage timings are reported
    assert tm.path_length_ == pytest.approx(path_length(x, tm.order_), rel=1e-12)
    assert set(tm.stage_seconds_) == {"tree", "sweeps", "polish"}
    assert all(v >= 0 for v in tm.stage_seconds_.values())
    # thesis Fig 2.4: FOM 0.033 for TSP-means (0.038 for LK)
    assert figure_of_merit(y, tm.order_) <= 1.2 * figure_of_merit(y, two) + 0.01
    assert figure_of_merit(y, tm.order_) < 0.06
    far, yf = blobs(50.0, 4)
    assert figure_of_merit(yf, TSPMeans(random_state=1).fit(far).order_) == pytest.approx(3 / 799)


def test_circle_ordered_along_the_circle():
    rng = np.random.default_rng(5)
    a = rng.random(500) * 2 * np.pi
    x = np.c_[np.cos(a), np.sin(a)]
    o = TSPMeans(random_state=0).fit(x).order_
    step = np.abs(np.diff(a[o]))
    step = np.minimum(step, 2 * np.pi - step)
    assert (step > 0.1).sum() <= 1
    assert path_length(x, o) < 1.02 * 2 * np.pi


def test_one_dimensional_small_input_is_sorted():
    # (a 1-D X raises, as in scikit-learn: points on a line are one column)
    x = np.random.default_rng(6).permutation(12).astype(float)
    o = TSPMeans(levels=4, polish_window=0).fit(x[:, None]).order_
    assert path_length(x, o) == pytest.approx(11.0)


def test_reproducible_with_seed_and_fit_transform():
    x = np.random.default_rng(7).random((3000, 4))
    a = TSPMeans(random_state=3).fit(x).order_
    b = TSPMeans(random_state=3, n_jobs=1).fit(x).order_
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(TSPMeans(random_state=3).fit_transform(x), x[a])


def test_order_cli_writes_table_order_and_png(tmp_path):
    from vastml.cli import main
    from vastml.datasets import make_waveform

    X, y = make_waveform(200, random_state=0)
    f = tmp_path / "w.csv"
    np.savetxt(f, np.c_[X, y], delimiter=",")
    assert main(["order", str(f), "--label-column", "-1"]) == 0
    out = np.loadtxt(tmp_path / "w.ordered.csv", delimiter=",")
    order = np.loadtxt(tmp_path / "w.ordered.order.txt", dtype=int)
    np.testing.assert_allclose(out, np.c_[X, y][order], rtol=1e-9)
    assert (tmp_path / "w.ordered.png").stat().st_size > 1000
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2\n3,nan\n")
    assert main(["order", str(bad)]) == 2
    assert not (tmp_path / "bad.ordered.csv").exists()
    assert main(["order", str(tmp_path / "missing.csv")]) == 2
