"""Bad input gets a clear error: no aborts, panics, hangs or silent wrong answers.

Cases that once killed the process run in a subprocess under an address-space limit, so a
regression shows as a failed test rather than a dead test run.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import vastml
from vastml import reorder as R
from vastml._validation import as_points, check_float, check_int, n_jobs_arg

RNG = np.random.default_rng(0)
X = RNG.normal(size=(60, 2))
B = (RNG.random((24, 18)) < 0.35).astype(int)

# 4 GiB of address space: enough for the interpreter, NumPy and the extension, far below
# what the absurd sizes below would ask for.
_LIMIT = 4 << 30


def _run_limited(code: str) -> subprocess.CompletedProcess:
    prelude = textwrap.dedent(
        f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, ({_LIMIT}, {_LIMIT}))
        import numpy as np
        import vastml
        from vastml import reorder as R
        rng = np.random.default_rng(0)
        B = (rng.random((24, 18)) < 0.35).astype(int)
        """
    )
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "call, exc",
    [
        ("R.convolution_error(B, kernel_size=10**9 + 1)", "ValueError"),
        ("R.ConvoMap(kernel_size=10**9 + 1, max_iter=1).fit(B)", "ValueError"),
        ("R.planted_matrix('banded', size=10**6)", "MemoryError"),
        ("R.planted_matrix('banded', size=2**32)", "ValueError"),
    ],
)
def test_absurd_sizes_raise_instead_of_aborting(call, exc):
    r = _run_limited(
        f"""
        try:
            {call}
        except BaseException as e:
            print("RAISED", type(e).__name__, e)
        else:
            print("RETURNED")
        """
    )
    assert r.returncode == 0, f"process died ({r.returncode}): {r.stderr[-500:]}"
    assert f"RAISED {exc}" in r.stdout, r.stdout + r.stderr[-500:]
    assert "size" in r.stdout  # the message names the parameter


def test_kernel_larger_than_the_matrix_is_refused_at_once():
    with pytest.raises(ValueError, match="kernel_size"):
        R.convolution_error(B, kernel_size=101)
    # the largest useful kernel still works
    assert np.isfinite(R.convolution_error(B, kernel_size=49))


@pytest.mark.parametrize("scale", [1e155, 1e-170])
def test_extreme_scales_give_the_same_path(scale):
    # squared distances overflow (or underflow): once a Rust panic ("some city remains")
    np.testing.assert_array_equal(R.tsp_path(X * scale), R.tsp_path(X))


def test_backup_round_trip_keeps_values(tmp_path):
    p = tmp_path / "m.backup"
    for M in ([[0, 2], [5, 2]], [[0, 1], [1, 1]], B, [[3, 3, 0], [1, 2, 2]]):
        R.save_matrix(p, M)
        np.testing.assert_array_equal(R.load_matrix(p), np.asarray(M))


@pytest.mark.parametrize("bad", [[[-1, 0]], [[0.5, 1]], [[0, 300]], [[np.nan, 1]]])
def test_backup_refuses_what_it_cannot_hold(tmp_path, bad):
    with pytest.raises(ValueError, match="backup"):
        R.save_matrix(tmp_path / "m.backup", np.asarray(bad))


@pytest.mark.parametrize(
    "body, line",
    [
        ("x\n1 2 1 0\n0\n0 1\na b\nr\n-1\n\n", 7),  # a column outside the matrix
        ("x\n1 2 1 0\n0\n0 1\na b\nr\n0 7\n\n", 7),
        ("x\n1 2 1 0\n0\n0 1\na b\nr\nzero\n\n", 7),
        ("x\n1 2 1 0\n0\n1 1\na b\nr\n0\n\n", 4),  # the column map is no permutation
        ("x\n1 two 1 0\n", 2),
        ("x\n2 2 1 0\n0 1\n0 1\na b\nr s\n0\n", 9),  # truncated after row 0
    ],
)
def test_malformed_backup_names_file_and_line(tmp_path, body, line):
    p = tmp_path / "bad.backup"
    p.write_text(body)
    with pytest.raises(ValueError, match=rf"bad\.backup, line {line}:"):
        R.load_matrix(p)


def test_object_arrays_of_zeros_and_ones_are_binary():
    from vastml.reorder._objective import as_codes

    assert as_codes(B.astype(object))[1] == 0  # binary: colour count 0
    assert as_codes(B)[1] == 0
    assert R.convolution_error(B.astype(object)) == R.convolution_error(B)
    assert as_codes(np.array([["a", "b"], ["b", "a"]], dtype=object))[1] == 2


def test_sparse_and_complex_matrices_are_refused_clearly():
    import scipy.sparse as sp

    with pytest.raises(TypeError, match="sparse input is not supported here"):
        R.convolution_error(sp.csr_matrix(B))
    with pytest.raises(ValueError, match="Complex data not supported"):
        R.convolution_error(B + 0j)
    with pytest.raises(TypeError, match="sparse input is not supported here"):
        as_points(sp.csr_matrix(X), "X")
    with pytest.raises(ValueError, match="Complex data not supported"):
        as_points(X + 1j, "X")


def test_validation_kinds_and_ranges():
    with pytest.raises(TypeError, match="`max_iter` must be an int"):
        check_int(2.0, "max_iter")
    with pytest.raises(TypeError):
        check_int(True, "max_iter")
    with pytest.raises(ValueError, match="`n_neighbors` must be >= 1, got 0"):
        check_int(0, "n_neighbors", low=1)
    with pytest.raises(ValueError, match="`momentum` must be < 1"):
        check_float(2, "momentum", low=0, high=1, high_open=True)
    with pytest.raises(ValueError, match="finite"):
        check_float(float("nan"), "rho")
    assert n_jobs_arg(2**62) == (os.cpu_count() or 1)
    assert n_jobs_arg(-(2**62)) == -(os.cpu_count() or 1)
    with pytest.raises(ValueError):
        n_jobs_arg(0)


def _cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "vastml", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


@pytest.mark.parametrize(
    "args",
    [
        ("svm", "train", "/nonexistent/train.txt"),
        ("order", "/nonexistent.npy"),
        ("reorder", "/nonexistent.npy"),
        ("embed", "/nonexistent.npy"),
        ("demo", "--quick", "--out", "/nonexistent-folder/demo.png"),
    ],
)
def test_cli_user_errors_are_one_line(args):
    r = _cli(*args)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert "error:" in r.stderr and "nonexistent" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_cli_debug_shows_the_traceback():
    r = _cli("embed", "/nonexistent.npy", "--debug")
    assert r.returncode != 0
    assert "Traceback" in r.stderr


def test_cli_checks_out_before_the_work(tmp_path):
    np.save(tmp_path / "m.npy", B)
    r = _cli("reorder", str(tmp_path / "m.npy"), "--out", str(tmp_path / "nope" / "o.npy"))
    assert r.returncode == 2 and "does not exist" in r.stderr, r.stderr


def test_written_files_get_the_users_umask(tmp_path):
    from vastml.cli._common import atomic_write

    old = os.umask(0o022)
    try:
        out = tmp_path / "o.npy"
        atomic_write(out, lambda p: np.save(p, B))
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    np.testing.assert_array_equal(np.load(out), B)


def test_knn_accuracy_refuses_impossible_neighbour_counts():
    with pytest.raises(ValueError, match="`n_neighbors` must be >= 1"):
        R.knn_accuracy(list(range(40)), [0] * 20 + [1] * 20, n_neighbors=0)
    with pytest.raises(ValueError, match="`n_neighbors` must be <= 39"):
        R.knn_accuracy(list(range(40)), [0] * 20 + [1] * 20, n_neighbors=40)


def test_distributed_logistic_regression_refuses_nan():
    pytest.importorskip("dask")
    from vastml.distributed import DistributedLogisticRegression

    Xn = X.copy()
    Xn[3, 1] = np.nan
    y = (X[:, 0] > 0).astype(int)
    with pytest.raises(ValueError, match="NaN"):
        DistributedLogisticRegression(n_partitions=2).fit(Xn, y)


def test_embedding_parameters_are_range_checked():
    import scipy.sparse as sp

    from vastml import embed as E

    with pytest.raises(ValueError, match="`n_interp` must be <= 20"):
        E.kernel_sums(X, method="fft", n_interp=300)
    with pytest.raises(ValueError, match="`n_interp`"):
        E.kernel_sums(X, method="fft", n_interp=10**5)
    W = sp.csr_array(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]]) / 4.0)
    f = E.EmbeddingObjective("ee", W, repulsion_weight=0.0)
    X3 = np.array([[0.0, 1], [1, 0], [2, 2]])
    with pytest.raises(ValueError, match="`rho`"):
        E.minimize(f, X3, rho=2)
    with pytest.raises(ValueError, match="`max_seconds`"):
        E.minimize(f, X3, max_seconds=-1)
    with pytest.raises(ValueError, match="`momentum`"):
        E.tsne_gradient_descent(f, X3, max_iter=5, learning_rate=1.0, momentum=2)
    with pytest.raises(ValueError, match="`bandwidth`"):
        E.LLLEigenmaps(bandwidth=-1, n_landmarks=10).fit(X)
    with pytest.raises(ValueError, match="`n_neighbors`"):
        E.LLLEigenmaps(n_neighbors=100, n_landmarks=10).fit(X)
    with pytest.raises(ValueError, match="`gamma`"):
        E.LLLKernelPCA(gamma=0, n_landmarks=10).fit(X)


def test_unfitted_and_misshaped_embedding_calls():
    from sklearn.exceptions import NotFittedError

    from vastml import embed as E

    with pytest.raises(NotFittedError):
        E.LLLSpectralClustering().predict(X)
    pe = E.ParametricEmbedding(max_iter=5, random_state=0).fit(np.full((20, 3), 1 / 3))
    with pytest.raises(ValueError, match=r"shape \(n, 2\)"):
        pe.classes_at(np.ones((5, 4)))


def test_memory_layout_never_changes_an_embedding():
    from vastml import embed as E

    kw = dict(perplexity=5, random_state=0, max_iter=100, early_exaggeration_iter=50)
    a = E.TSNE(**kw).fit_transform(X)
    b = E.TSNE(**kw).fit_transform(np.asfortranarray(X))
    np.testing.assert_array_equal(a, b)


def _backup_text(M) -> str:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "m.backup"
        R.save_matrix(p, M)
        return p.read_text()


_BACKUP = _backup_text(np.array([[0, 2, 1], [1, 1, 0], [2, 0, 0], [0, 0, 1]]))


def _load_backup_text(text: str):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "f.backup"
        p.write_text(text)
        return R.load_matrix(p)


def test_backup_parser_survives_truncation_and_byte_flips():
    """Fuzz the .backup reader: every truncation and random byte flips give a ValueError that
    names the file, or a matrix of the declared shape; nothing else."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    expected = np.array([[0, 2, 1], [1, 1, 0], [2, 0, 0], [0, 0, 1]])
    np.testing.assert_array_equal(_load_backup_text(_BACKUP), expected)

    def outcome(text):
        try:
            M = _load_backup_text(text)
        except ValueError as e:
            assert "f.backup" in str(e), e
            return None
        assert M.ndim == 2 and M.dtype.kind == "i"
        return M

    for cut in range(len(_BACKUP)):
        M = outcome(_BACKUP[:cut])
        if M is not None:  # a cut inside the final separator lines may still be whole
            np.testing.assert_array_equal(M, expected)

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.tuples(st.integers(0, len(_BACKUP) - 1), st.sampled_from("0123456789 -x\n")),
                    min_size=1, max_size=4))
    def flips(edits):
        chars = list(_BACKUP)
        for i, c in edits:
            chars[i] = c
        outcome("".join(chars))

    flips()


def test_entropic_affinities_warn_about_duplicated_points():
    from vastml.embed import entropic_affinities

    X = np.r_[np.zeros((30, 2)), RNG.normal(size=(30, 2))]
    with pytest.warns(RuntimeWarning, match="duplicated points"):
        P, beta, info = entropic_affinities(X, perplexity=5)
    stuck = ~info["converged"]
    assert stuck[:30].all() and np.isnan(beta[stuck]).all()
    # their rows are still probability rows, uniform over the neighbours
    rows = P[np.flatnonzero(stuck)[:3]].toarray()
    np.testing.assert_allclose(rows.sum(axis=1), 1.0)
    assert all(np.ptp(r[r > 0]) == 0 for r in rows)


# Cases found by scripts/bad_input_sweep.py (each fixed at the validation that lets it through).


def test_n_jobs_beyond_the_cores_is_clamped_not_a_hang():
    # ConvoMap passed n_jobs=2**62 to Rust, which tried to start 2**62 threads (ignoring Ctrl-C)
    r = _run_limited(
        """
        from vastml import _core
        import os
        R.ConvoMap(kernel_size=3, max_iter=5, n_jobs=2**62, random_state=0).fit(B)
        print("DONE", _core.effective_n_jobs(2**62) == os.cpu_count())
        """
    )
    assert r.returncode == 0, r.stderr[-500:]
    assert "DONE True" in r.stdout


def _objective():
    from vastml.embed import EmbeddingObjective

    P = np.abs(RNG.normal(size=(20, 20)))
    P = P + P.T
    np.fill_diagonal(P, 0)
    return EmbeddingObjective("tsne", P / P.sum())


@pytest.mark.parametrize("bad", [None, np.eye(20), "tsne", len])
def test_embedding_functions_refuse_what_is_not_an_objective(bad):
    from vastml import embed as E

    Y = RNG.normal(size=(20, 2))
    for call in (
        lambda: E.diag_hessian(bad, Y),
        lambda: E.embedding_hessian(bad, Y),
        lambda: E.homotopy(bad, Y, max_iter=2),
        lambda: E.tsne_gradient_descent(bad, Y, max_iter=2, learning_rate=1.0, momentum=0.5),
    ):
        with pytest.raises(TypeError, match="`objective`"):
            call()
    if not callable(bad):
        with pytest.raises(TypeError, match="`objective`"):
            E.minimize(bad, Y, max_iter=2)


@pytest.mark.parametrize("Y", [None, 3.0, np.zeros(20)])
def test_embedding_functions_check_the_embedding(Y):
    from vastml import embed as E

    f = _objective()
    for call in (
        lambda: E.diag_hessian(f, Y),
        lambda: E.embedding_hessian(f, Y),
        lambda: E.tsne_gradient_descent(f, Y, max_iter=2, learning_rate=1.0, momentum=0.5),
    ):
        with pytest.raises((ValueError, TypeError), match="`X`"):
            call()


def test_lsmi_checks_its_kernels_and_its_matching():
    from vastml.matching import lsmi

    K = np.exp(-((X[:20, None, 0] - X[None, :20, 0]) ** 2))
    perm = np.arange(20)
    with pytest.raises(ValueError, match="`kernel_x` must be a square"):
        lsmi(K[:1], K, perm)
    with pytest.raises(ValueError, match="`kernel_y` must be 20 x 20"):
        lsmi(K, K[:-1, :-1], perm)
    with pytest.raises(TypeError, match="`match`"):
        lsmi(K, K, perm.astype(float))
    with pytest.raises(ValueError, match="`match`"):
        lsmi(K, K, np.zeros(20, dtype=int))
    smi, _ = lsmi(K, K, perm)
    assert np.isfinite(smi)


_TGD = "E.tsne_gradient_descent(_objective(), Y, max_iter=2, learning_rate=1.0, momentum=0.5"
_CG = "K.conjugate_gradient(lambda v, eps: 2 * v, np.ones(3)"


@pytest.mark.parametrize(
    "call, name",
    [
        ("E.diag_hessian(_objective(), Y, ridge=nan)", "ridge"),
        ("E.embedding_objective('tsne', Y, W, theta=nan)", "theta"),
        ("E.embedding_objective('tsne', Y, W, epsilon=nan)", "epsilon"),
        ("E.minimize(_objective(), Y, gscale=nan)", "gscale"),
        ("E.homotopy(_objective(), Y, gscale=nan)", "gscale"),
        (f"{_TGD}, tol=nan)", "tol"),
        (f"{_TGD}, tol_offset=nan)", "tol_offset"),
        (f"{_TGD}, objective_every=0)", "objective_every"),
        (f"{_TGD}, relabel_every=nan)", "relabel_every"),
        ("E.entropic_affinities(Y, perplexity=5.0, maxit=2**62)", "maxit"),
        ("E.ParametricEmbedding(ftol=nan, max_iter=5).fit(Pr)", "ftol"),
        ("E.ParametricEmbedding(tol_phi=nan, max_iter=5).fit(Pr)", "tol_phi"),
        ("E.ParametricEmbedding(max_newton_iter=-1, max_iter=5).fit(Pr)", "max_newton_iter"),
        (f"{_CG}, tol=nan)", "tol"),
        (f"{_CG}, delta=nan)", "delta"),
        (f"{_CG}, max_iter=nan)", "max_iter"),
        (f"{_CG}, start_iteration=nan)", "start_iteration"),
        ("K.normal_reference_functional(4, nan)", "std"),
        ("K.normal_reference_functional(4, 0.0)", "std"),
        ("K.normal_reference_functional(2**62, 1.0)", "derivative_order"),
        ("K.robust_scale([])", "x"),
        ("K.robust_scale([1.0])", "x"),
        ("M.sinkhorn(np.ones((3, 3)), tol=nan)", "tol"),
        ("M.smooth_kernel(np.ones((3, 3)), nan)", "power"),
        ("M.smooth_kernel(np.ones((3, 3)), -1.0)", "power"),
        ("R.ConvoMap(stop_threshold=nan).fit(B)", "stop_threshold"),
        ("R.knn_accuracy(np.arange(24).astype(object) + 0.5, np.arange(24) % 2)", "order"),
        ("E.gaussian_knn_affinity(Y, bandwidth=nan)", "bandwidth"),
    ],
)
def test_bad_parameters_are_refused_by_name(call, name):
    from vastml import embed as E
    from vastml import kernels as K
    from vastml import matching as M

    nan = float("nan")
    Y = RNG.normal(size=(20, 2))
    W = _objective().W
    Pr = np.abs(RNG.normal(size=(20, 3))) + 0.01
    Pr /= Pr.sum(axis=1, keepdims=True)
    with pytest.raises((ValueError, TypeError), match=f"`{name}`"):
        eval(call)


def test_huge_bandwidths_give_finite_values_not_overflow_errors():
    from vastml import embed as E
    from vastml import kernels as K

    x = RNG.normal(size=60)
    assert np.isfinite(K.density_derivative(x, x[:5], 2, bandwidth=1e300)).all()
    assert np.isfinite(K.density_functional(x, 2, bandwidth=1e300))
    assert K.normal_reference_functional(4, 1e300) == 0.0
    W = E.gaussian_knn_affinity(X, n_neighbors=5, bandwidth=1e300)
    assert np.allclose(W.data, 1.0)


@pytest.mark.parametrize("value", ["1e300", "0", "nan"])
def test_demo_refuses_an_absurd_bandwidth_in_one_line(value, tmp_path):
    # --bandwidth 1e300 overflowed the density's normaliser: a raw OverflowError traceback
    r = _cli("demo", "--quick", "--bandwidth", value, "--out", str(tmp_path / "d.png"))
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert "`--bandwidth`" in r.stderr


def test_validate_rows_shortcut_agrees_with_scikit_learn():
    # The shortcut for C-contiguous float64 arrays sets and checks n_features_in_ as
    # scikit-learn's validate_data does; every other input, and every error, goes through it.
    import pandas as pd
    from sklearn.base import BaseEstimator
    from sklearn.utils.validation import validate_data

    from vastml._validation import validate_rows

    X = np.arange(12.0).reshape(6, 2)
    ours, theirs = BaseEstimator(), BaseEstimator()
    assert validate_rows(ours, X, reset=True) is X  # no copy
    validate_data(theirs, X, dtype=np.float64, order="C")
    assert vars(ours) == vars(theirs) == {"n_features_in_": 2}
    assert validate_rows(ours, X[:1], reset=False) is not None
    for bad, match in [
        (np.zeros((2, 3)), "X has 3 features, but BaseEstimator is expecting 2"),
        (np.array([[np.nan, 0.0]]), "NaN"),
        (np.array([[np.inf, 0.0]]), "infinity"),
        (np.zeros((0, 2)), "0 sample"),
        (np.array([[1e200, 0.0]]), "standardise"),
    ]:
        with pytest.raises(ValueError, match=match):
            validate_rows(ours, bad, reset=False)
    # the slow path for anything else: lists, Fortran order, other dtypes, data frames
    for other in [X.tolist(), np.asfortranarray(X), X.astype(np.float32), X[:, ::-1]]:
        out = validate_rows(BaseEstimator(), other, reset=True)
        assert out.dtype == np.float64 and out.flags.c_contiguous
        np.testing.assert_array_equal(out, np.asarray(other, dtype=np.float64))
    named = BaseEstimator()
    validate_rows(named, pd.DataFrame(X, columns=["a", "b"]), reset=True)
    assert list(named.feature_names_in_) == ["a", "b"]
    with pytest.warns(UserWarning, match="feature names"):
        validate_rows(named, X, reset=False)
    # refitting on an array forgets the names, as scikit-learn does
    validate_rows(named, X, reset=True)
    assert not hasattr(named, "feature_names_in_")
