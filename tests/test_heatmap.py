"""heatmap(): block compression against a direct computation, honest axes, files, sizes."""

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from vastml.reorder import heatmap  # noqa: E402
from vastml.reorder._heatmap import shrink  # noqa: E402


def test_shrink_mean_and_majority_equal_loops():
    rng = np.random.default_rng(0)
    M = rng.normal(size=(23, 7))
    S = shrink(M, 5, 3)
    for bi in range(S.shape[0]):
        for bj in range(S.shape[1]):
            assert S[bi, bj] == pytest.approx(M[bi * 5:(bi + 1) * 5, bj * 3:(bj + 1) * 3].mean())
    C = rng.integers(0, 4, size=(23, 7))
    S = shrink(C, 5, 3, how="majority")
    for bi in range(S.shape[0]):
        for bj in range(S.shape[1]):
            vals, cnt = np.unique(C[bi * 5:(bi + 1) * 5, bj * 3:(bj + 1) * 3], return_counts=True)
            assert S[bi, bj] == vals[np.argmax(cnt)]


def test_honest_axes_and_orders(tmp_path):
    rng = np.random.default_rng(1)
    X = np.repeat(rng.normal(size=(5, 8)), 600, axis=0) + 0.05 * rng.normal(size=(3000, 8))
    lab = np.repeat(np.arange(5), 600)
    p = rng.permutation(3000)
    h = heatmap(X[p], row_colors=lab[p], col_colors=np.arange(8) % 2, max_size=(500, 100),
                time_limit=0.2, path=tmp_path / "h.png")
    assert (tmp_path / "h.png").stat().st_size > 1000
    assert h.rows_per_pixel == 6 and h.cols_per_pixel == 1
    assert h.image.shape == (500, 8)
    # the seriated rows keep each group together
    assert (np.diff(lab[p][h.row_order]) != 0).sum() == 4
    ax = h.figure.axes[0]
    assert "6 rows per pixel row" in h.figure.axes[0].get_ylabel() or any(
        "6 rows per pixel row" in a.get_ylabel() for a in h.figure.axes)
    assert ax.get_ylim() == (3000.0, 0.0)


def test_svg_and_given_orders(tmp_path):
    X = np.arange(20.0).reshape(5, 4)
    h = heatmap(X, row_order=[4, 3, 2, 1, 0], col_order=[0, 1, 2, 3], scale=None,
                path=tmp_path / "h.svg")
    assert (tmp_path / "h.svg").read_text().lstrip().startswith("<?xml")
    assert np.array_equal(h.image, X[::-1])
    assert h.rows_per_pixel == 1


def test_twenty_thousand_rows():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(20_000, 10))
    h = heatmap(X, time_limit=0.5)
    assert h.image.shape[0] == 1000 and h.rows_per_pixel == 20
    import matplotlib.pyplot as plt
    plt.close(h.figure)


def test_bad_arguments():
    X = np.zeros((4, 3))
    with pytest.raises(ValueError, match="max_size"):
        heatmap(X, max_size=(0, 10))
    with pytest.raises(ValueError, match="row_order"):
        heatmap(X, row_order=[0, 0, 1, 2])
    with pytest.raises(ValueError, match="row_colors"):
        heatmap(X, row_colors=[1, 2])
    with pytest.raises(ValueError, match="compress"):
        heatmap(X, compress="median")


@pytest.mark.parametrize("scale", ["columns", "rows", None])
def test_block_by_block_scaling_equals_scaling_the_whole_matrix(scale):
    # with both orders given the matrix is scaled chunk by chunk, never as a whole: the image
    # must be the block means of the whole scaled, ordered matrix
    rng = np.random.default_rng(3)
    X = rng.normal(size=(250_003, 7)) * rng.uniform(0.5, 4, 7) + rng.normal(0, 5, 7)
    X[:, 3] = 2.0  # a constant column
    ro, co = rng.permutation(X.shape[0]), rng.permutation(7)
    h = heatmap(X, row_order=ro, col_order=co, scale=scale, max_size=(997, 4))
    import matplotlib.pyplot as plt

    plt.close(h.figure)
    if scale == "columns":
        sd = X.std(0)
        S = (X - X.mean(0)) / np.where(sd > 0, sd, 1.0)
    elif scale == "rows":
        sd = X.std(1, keepdims=True)
        S = (X - X.mean(1, keepdims=True)) / np.where(sd > 0, sd, 1.0)
    else:
        S = X
    want = shrink(S[ro][:, co], h.rows_per_pixel, h.cols_per_pixel)
    np.testing.assert_allclose(h.image, want, rtol=1e-9, atol=1e-9)
