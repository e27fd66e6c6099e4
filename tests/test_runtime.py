"""The narrow door into Rust: n_jobs rules, errors, Ctrl-C."""

import os
import subprocess
import sys
import textwrap

import pytest
from _interrupt import seconds_to_stop

import vastml
from vastml import _core


def test_effective_n_jobs_rules():
    cpus = os.cpu_count()
    assert _core.effective_n_jobs(1) == 1
    assert _core.effective_n_jobs(3) == min(3, cpus)
    assert _core.effective_n_jobs(2**62) == cpus  # clamped to the cores, as n_jobs_arg does
    assert _core.effective_n_jobs(-1) == cpus
    assert _core.effective_n_jobs(-2) == max(cpus - 1, 1)
    assert _core.effective_n_jobs(None) >= 1
    with pytest.raises(ValueError, match="n_jobs"):
        _core.effective_n_jobs(0)


def test_error_classes():
    assert issubclass(vastml.VastmlError, Exception)
    assert vastml.VastmlError.__module__ == "vastml"


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT delivery differs on Windows")
def test_ctrl_c_interrupts_a_long_transform():
    # the work stops within a fraction of a second on a quiet machine (the full 200k x 200k
    # direct sum takes minutes); the bound leaves room for a loaded one
    setup = """
        import numpy as np
        from vastml.kernels import gauss_transform
        x = np.random.default_rng(0).uniform(size=(200_000, 3))
    """
    call = 'gauss_transform(x, x, bandwidth=0.5, method="direct")'
    assert seconds_to_stop(setup, call) < 20


def test_fork_child_can_use_the_pools():
    code = textwrap.dedent(
        """
        import os, numpy as np
        from vastml.kernels import gauss_transform
        x = np.random.default_rng(0).uniform(size=(2000, 2))
        a = gauss_transform(x, x[:10], bandwidth=0.3)
        pid = os.fork()
        if pid == 0:
            b = gauss_transform(x, x[:10], bandwidth=0.3)
            os._exit(0 if np.array_equal(a, b) else 3)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "0", out.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT delivery differs on Windows")
def test_ctrl_c_interrupts_a_long_convolution_error():
    # uninterrupted, the full error of this matrix and kernel takes minutes
    setup = """
        import numpy as np
        from vastml.reorder import convolution_error
        B = (np.random.default_rng(0).random((6000, 6000)) < 0.3).astype(np.uint8)
    """
    assert seconds_to_stop(setup, "convolution_error(B, kernel_size=301)", timeout=600) < 20


# Ctrl-C in the loops that did not poll the cancel flag before: optimal leaf ordering, the
# kd-tree build and kNN queries, the IFGT coefficient pass and LLSVM's Nystrom
# eigendecomposition. Each call runs for many seconds (minutes on a loaded machine); each stops
# within a fraction of a second on a quiet one, the bound leaves room for a loaded one.


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT delivery differs on Windows")
def test_ctrl_c_interrupts_optimal_leaf_ordering():
    setup = """
        import numpy as np
        from scipy.cluster.hierarchy import linkage
        from vastml import _core
        x = np.random.default_rng(0).normal(size=(4_000, 2))
        merges = np.ascontiguousarray(linkage(x, "average")[:, :2].astype(np.int64))
    """
    call = "_core.olo_order(x, False, merges)"
    assert seconds_to_stop(setup, call, timeout=600) < 20


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT delivery differs on Windows")
def test_ctrl_c_interrupts_the_kd_tree_knn_graph():
    setup = """
        import numpy as np
        from vastml.embed import knn_sqdist
        x = np.random.default_rng(0).normal(size=(800_000, 3))
    """
    call = 'knn_sqdist(x, 30, neighbors_method="approx")'
    # the call runs for 15 s or more on a loaded machine: stopping within 5 s needs the polls
    assert seconds_to_stop(setup, call, wait=0.5, timeout=600) < 5


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT delivery differs on Windows")
def test_ctrl_c_interrupts_the_ifgt_coefficients():
    # many sources, one target, a narrow bandwidth: the coefficient pass is the work
    setup = """
        import numpy as np
        from vastml.kernels import GaussTransform
        x = np.random.default_rng(0).uniform(size=(1_500_000, 3))
        gt = GaussTransform(x, bandwidth=0.2, epsilon=1e-10, method="ifgt")
    """
    call = "gt(x[:1])"
    # the call runs for 10 s or more on a loaded machine: stopping within 5 s needs the polls
    assert seconds_to_stop(setup, call, wait=0.5, timeout=600) < 5


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT delivery differs on Windows")
def test_ctrl_c_interrupts_the_nystrom_eigendecomposition():
    # 2,000 random landmarks: the Jacobi sweeps over the 2,000 x 2,000 kernel matrix are the work
    setup = """
        import numpy as np
        from vastml.svm import LLSVMClassifier
        rng = np.random.default_rng(0)
        X = rng.normal(size=(2500, 5))
        y = (X[:, 0] > 0).astype(int)
        clf = LLSVMClassifier(n_landmarks=2000, landmarks="random", random_state=0)
    """
    assert seconds_to_stop(setup, "clf.fit(X, y)", wait=2.0, timeout=600) < 20
