"""`vastml demo` runs, prints what it did and writes a PNG."""

import subprocess
import sys

import pytest


def test_demo_quick(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "demo.png"
    out = subprocess.run(
        [sys.executable, "-m", "vastml", "demo", "--quick", "--out", str(png)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "auto chose" in out.stdout and "measured error" in out.stdout
    assert "Sheather-Jones" in out.stdout and "integrated squared error" in out.stdout
    assert png.exists() and png.stat().st_size > 10_000
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_version_and_help():
    out = subprocess.run([sys.executable, "-m", "vastml", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("vastml ")
    out = subprocess.run([sys.executable, "-m", "vastml"], capture_output=True, text=True)
    assert out.returncode != 0 and "demo" in out.stderr
