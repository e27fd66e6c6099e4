"""Inputs that used to kill the process: each runs in a subprocess under an address-space
limit and must end in a MemoryError / ValueError that names the parameter."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

LIMIT = 3 * 2**30  # bytes of address space for the child

HUGE = "sp.csr_matrix(([1.0, 1.0], ([0, 1], [10**12 - 1, 0])), shape=(2, 10**12))"


def _run(body):
    code = textwrap.dedent(f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, ({LIMIT}, {LIMIT}))
        import numpy as np, scipy.sparse as sp
        from vastml.svm import AMMClassifier, BSGDClassifier, LLSVMClassifier, PegasosClassifier
        try:
            {body}
        except (MemoryError, ValueError) as exc:
            print(type(exc).__name__ + ": " + str(exc))
            sys.exit(0)
        print("no error")
        sys.exit(3)
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize("make,param", [
    ("AMMClassifier()", "max_weights_per_class"),
    ("AMMClassifier(online=True)", "max_weights_per_class"),
    ("PegasosClassifier()", "n_classes"),
    ("BSGDClassifier()", "budget"),
    ("LLSVMClassifier()", "n_landmarks"),
])
def test_fit_on_10_to_12_columns_raises_not_aborts(make, param):
    run = _run(f"{make}.fit({HUGE}, [0, 1])")
    assert run.returncode == 0, f"exit {run.returncode}: {run.stdout}{run.stderr[-600:]}"
    assert run.stdout.startswith("MemoryError") and "`X`" in run.stdout and f"`{param}`" in run.stdout


def test_partial_fit_on_10_to_12_columns_raises_not_aborts():
    for make in ("AMMClassifier()", "BSGDClassifier()"):
        run = _run(f"{make}.partial_fit({HUGE}, [0, 1], classes=[0, 1])")
        assert run.returncode == 0, f"exit {run.returncode}: {run.stdout}{run.stderr[-600:]}"
        assert run.stdout.startswith("MemoryError")


def test_cli_train_on_a_huge_feature_index(tmp_path):
    data = tmp_path / "huge.txt"
    data.write_text("1 100000000:1\n-1 1:1\n")
    code = textwrap.dedent(f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, ({LIMIT}, {LIMIT}))
        from vastml.cli import main
        sys.exit(main(sys.argv[1:]))
    """)
    for algo in ("0", "1", "2", "3", "4"):
        run = subprocess.run([sys.executable, "-c", code, "svm", "train", "-A", algo, str(data),
                              str(tmp_path / "m.txt")], capture_output=True, text=True, timeout=300, check=False)
        assert run.returncode == 2, f"-A {algo}: exit {run.returncode}: {run.stderr[-600:]}"
        assert "Traceback" not in run.stderr
        assert "not enough memory" in run.stderr and "`X`" in run.stderr, run.stderr
