"""The COIL-20 substitutes of benches/embed.py's homotopy rows (``coil_like``): shape,
determinism, closed loops, black background, and the statistics the bench reports."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches"))
import embed


@pytest.mark.parametrize("kind", embed.COIL_DATA)
def test_shape_determinism_and_closed_loops(kind):
    n_obj, n_views = 3, 12
    Y = embed.coil_like(kind, n_objects=n_obj, n_views=n_views)
    side = 48 if kind == "digits" else 128
    assert Y.shape == (n_obj * n_views, side * side)
    assert np.isfinite(Y).all() and Y.min() >= 0
    np.testing.assert_array_equal(Y, embed.coil_like(kind, n_objects=n_obj, n_views=n_views))
    loops = Y.reshape(n_obj, n_views, -1)
    # views differ from one step to the next, and they sit at k x 360 / n_views degrees (so
    # the loop closes: twice as many views interleave the same ones)
    step = np.linalg.norm(loops - np.roll(loops, -1, axis=1), axis=2)
    assert (step > 0).all()
    fine = embed.coil_like(kind, n_objects=1, n_views=2 * n_views)
    np.testing.assert_allclose(fine[::2], Y[:n_views], atol=1e-9)
    if kind != "digits":  # 128 x 128 with a black background: the corners stay black
        ims = Y.reshape(-1, side, side)
        assert np.abs(ims[:, :4, :4]).max() < 1e-12
        assert np.abs(ims[:, -4:, -4:]).max() < 1e-12


def test_turntable_turns_about_the_vertical_axis():
    """Half a turn of a turntable object mirrors its silhouette left-right (orthographic
    camera), unlike an in-plane rotation, which turns it upside down."""
    Y = embed.coil_like("turntable", n_objects=1, n_views=4).reshape(4, 128, 128)
    front, back = Y[0] > 1e-3, Y[2] > 1e-3
    mirrored = np.mean(front == back[:, ::-1])
    upside_down = np.mean(front == back[::-1, ::-1])
    assert mirrored > 0.97 and upside_down < mirrored


def test_coil_stats_see_separate_loops():
    """Two far apart loops: the nearest other-object view is many steps away, nothing of W
    joins them, and 4L has a second zero eigenvalue; joining them moves all three."""
    t = np.linspace(0, 2 * np.pi, 72, endpoint=False)
    loop = np.c_[np.cos(t), np.sin(t)]
    Y = np.r_[loop, loop + [100.0, 0.0]]
    lab = np.repeat([0, 1], 72)
    W = np.exp(-np.square(Y[:, None] - Y[None]).sum(-1) / 0.01)
    np.fill_diagonal(W, 0)
    s = embed._coil_stats(Y, W)
    assert float(s["nearest other object / view step (median)"]) > 100
    assert s["rank of the nearest other-object view (median)"] == 72
    assert float(s["W+ mass between objects"]) == 0.0
    assert float(s["4L+ eigenvalues 2-4 (x 1e-5)"].split("/")[0]) < 1e-6
    W2 = W + 0.01 * (lab[:, None] != lab[None, :])
    s2 = embed._coil_stats(Y, W2)
    assert float(s2["W+ mass between objects"]) > 0.01
    assert float(s2["4L+ eigenvalues 2-4 (x 1e-5)"].split("/")[0]) > 1
