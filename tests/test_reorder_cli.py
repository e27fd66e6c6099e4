"""`vastml reorder FILE` writes the reordered matrix and a PNG; bad input writes nothing."""

import subprocess
import sys

import numpy as np
import pytest

from vastml.reorder import convolution_error, load_matrix, planted_matrix, save_matrix


def run(*args):
    return subprocess.run([sys.executable, "-m", "vastml", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("ext", [".csv", ".npy", ".backup"])
def test_reorder_file(tmp_path, ext):
    pytest.importorskip("matplotlib")
    rng = np.random.default_rng(0)
    M = planted_matrix("blocks", 40, 0.0, random_state=3)
    S = M[rng.permutation(40)][:, rng.permutation(40)]
    src = tmp_path / f"m{ext}"
    save_matrix(src, S)
    assert np.array_equal(load_matrix(src), S)
    out = run("reorder", str(src), "--kernel-size", "5", "--seed", "1")
    assert out.returncode == 0, out.stderr
    res = tmp_path / f"m.reordered{ext if ext != '.csv' else '.csv'}"
    R = load_matrix(res)
    assert sorted(R.sum(axis=1).tolist()) == sorted(S.sum(axis=1).tolist())
    assert convolution_error(R, kernel_size=5) < convolution_error(S, kernel_size=5)
    png = res.with_suffix(".png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "content,ext,args,match",
    [
        ("0,1\n2,1\n", ".csv", ["--categorical", "no"], "binary"),
        ("0,1\n1,1\n", ".csv", ["--kernel-size", "4"], "odd"),
        ("hello", ".xyz", [], "unknown format"),
        ("a,b\nc,d\n", ".csv", [], "not a matrix"),
        ("x\n2 2\n", ".backup", [], "backup"),
        ("0,1\n1,1\n", ".csv", ["--recolor"], "categorical"),
    ],
)
def test_bad_input_writes_nothing(tmp_path, content, ext, args, match):
    src = tmp_path / f"bad{ext}"
    src.write_text(content)
    out = run("reorder", str(src), *args)
    assert out.returncode != 0
    assert match in out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [src.name]


def test_reorder_recolor_verbose(tmp_path):
    stripes = np.repeat(np.arange(3), 6)[:, None]
    A = np.hstack([(stripes + s) % 3 for s in (0, 2, 1, 1, 0, 2)])
    src = tmp_path / "c.csv"
    save_matrix(src, A)
    out = run("reorder", str(src), "--kernel-size", "3", "--recolor", "--verbose")
    assert out.returncode == 0, out.stderr
    assert "ConvoMap" in out.stderr  # the progress bar
    R = load_matrix(tmp_path / "c.reordered.csv")
    assert convolution_error(R, kernel_size=3) < convolution_error(A, kernel_size=3)
