"""Every file parser of vastml survives truncation and byte flips (Hypothesis).

A damaged file gives a ``ValueError`` that names the file, or data of the right kind; never
another exception, a crash or a hang. The BudgetedSVM model files and ``.backup`` are fuzzed
in ``test_svm_model_files.py`` and ``test_bad_input.py``; here are ``load_matrix``'s ``.npy``
and ``.csv`` readers and the data-set loaders' text formats (Octave text, Pajek, the NOW export).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vastml import reorder as R

_SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _npy_bytes() -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.arange(12, dtype=np.int64).reshape(3, 4))
    return buf.getvalue()


_CSV = b"0,1,0,1\n1,1,0,0\n0,0,1,1\n"
_OCTAVE = (
    b"# Created by Octave\n# name: A\n# type: matrix\n# rows: 3\n# columns: 3\n"
    b" 1 0.5 0\n 0.5 1 0.2\n 0 0.2 1\n\n\n# name: y\n# type: matrix\n# rows: 3\n# columns: 1\n"
    b" 1\n 2\n 2\n\n\n"
)
_PAJEK = b'*Vertices 4\n1 "a"\n2 "b"\n3 "c"\n4 "d"\n*Edges\n1 2\n2 3\n3 4\n'
_LABELS = b"0\n0\n1\n1\n"
_NOW = b"LIDNUM|SIDNUM|NAME\n1|10|x\n1|11|y\n2|10|z\n3|12|w\n"


def _edits(n: int):
    return st.lists(
        st.tuples(st.integers(0, n - 1), st.integers(0, 255)), min_size=1, max_size=4
    )


def _flip(data: bytes, edits) -> bytes:
    b = bytearray(data)
    for i, v in edits:
        b[i] = v
    return bytes(b)


def _expect(call, name: str):
    """Run ``call``: its result, or None after a ValueError that names ``name``."""
    try:
        return call()
    except ValueError as e:
        assert name in str(e), f"the error does not name the file: {e!r}"
        return None


def _damage(data: bytes, load, step: int = 1) -> None:
    """``load`` every truncation of ``data`` (every ``step`` bytes) and random byte flips."""
    for cut in range(0, len(data), step):
        load(data[:cut])

    @_SETTINGS
    @given(_edits(len(data)))
    def flips(edits):
        load(_flip(data, edits))

    flips()


def _matrix_cases(tmp_path: Path, suffix: str, data: bytes, check):
    p = tmp_path / f"m{suffix}"

    def load(content: bytes):
        p.write_bytes(content)
        out = _expect(lambda: R.load_matrix(p), p.name)
        if out is not None:
            check(out)

    _damage(data, load)


def test_load_matrix_npy_survives_damage(tmp_path):
    def check(a):
        assert isinstance(a, np.ndarray)

    good = _npy_bytes()
    p = tmp_path / "ok.npy"
    p.write_bytes(good)
    np.testing.assert_array_equal(R.load_matrix(p), np.arange(12).reshape(3, 4))
    _matrix_cases(tmp_path, ".npy", good, check)


def test_load_matrix_csv_survives_damage(tmp_path):
    def check(a):
        assert isinstance(a, np.ndarray) and a.ndim == 2 and a.dtype.kind in "if"

    _matrix_cases(tmp_path, ".csv", _CSV, check)


def _dataset_cases(tmp_path: Path, rel: str, data: bytes, loader, extra: dict[str, bytes] | None = None):
    root = tmp_path / "data"
    target = root / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    for r, content in (extra or {}).items():
        (root / r).write_bytes(content)

    def load(content: bytes):
        target.write_bytes(content)
        _expect(lambda: loader(root), target.name)

    target.write_bytes(data)
    loader(root)  # the undamaged file loads
    _damage(data, load, step=max(1, len(data) // 60))


def test_octave_text_loader_survives_damage(tmp_path):
    _dataset_cases(
        tmp_path, "DocumentGraphs/news.mat", _OCTAVE, lambda root: R.load_news("news", root=root)
    )


def test_pajek_loader_survives_damage(tmp_path):
    _dataset_cases(
        tmp_path,
        "Football/football.paj",
        _PAJEK,
        lambda root: R.load_football(root=root),
        extra={"Football/labels.txt": _LABELS},
    )


def test_now_export_loader_survives_damage(tmp_path):
    _dataset_cases(tmp_path, "NOW/NOW_public_030717.csv", _NOW, lambda root: R.load_paleo(root=root))


@pytest.mark.parametrize("loader", ["load_football", "load_mammals", "load_paleo", "load_genes", "load_news"])
def test_missing_data_folder_is_a_clear_error(tmp_path, loader):
    with pytest.raises((ValueError, FileNotFoundError)) as e:
        getattr(R, loader)(root=tmp_path)
    assert str(tmp_path) in str(e.value)
