"""vastml.kernels.gauss_transform / GaussTransform against the NumPy direct sum."""

import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import direct_gauss
from vastml.datasets import make_gaussian_mixture
from vastml.kernels import METHODS, GaussTransform, gauss_transform


def scaled_error(g, exact, q):
    q = np.asarray(q).reshape(len(q), -1)
    g = np.asarray(g).reshape(len(g), -1)
    exact = np.asarray(exact).reshape(len(exact), -1)
    return np.max(np.abs(g - exact).max(0) / np.abs(q).sum(0))


def run_or_refused(fn, method):
    """Explicit IFGT methods may refuse (ValueError naming `method`) when they cannot meet epsilon."""
    try:
        return fn()
    except ValueError as exc:
        refusal = method in ("ifgt", "ifgt-tree") or (method == "fgt" and "on a line" in str(exc))
        assert refusal and "method" in str(exc), exc
        return None


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("d", [1, 2, 3, 5, 8, 10])
@pytest.mark.parametrize("h", [0.05, 0.3, 1.0])
def test_contract_uniform(method, d, h, rng):
    x = rng.uniform(size=(500, d))
    y = rng.uniform(-0.1, 1.1, size=(120, d))
    q = rng.uniform(-1, 1, size=500)
    eps = 1e-6
    g = run_or_refused(lambda: gauss_transform(x, y, q, bandwidth=h, epsilon=eps, method=method), method)
    if g is not None:
        assert scaled_error(g, direct_gauss(x, y, q, h), q) <= eps


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("eps", [1e-2, 1e-4, 1e-8])
def test_contract_clumpy_several_weights(method, eps, rng):
    x = make_gaussian_mixture(1500, 3, cluster_std=0.03, random_state=1)
    y = make_gaussian_mixture(200, 3, cluster_std=0.1, random_state=2)
    q = rng.normal(size=(1500, 6))  # more columns than the kernels keep in registers (4)
    g = run_or_refused(lambda: gauss_transform(x, y, q, bandwidth=0.15, epsilon=eps, method=method), method)
    if g is not None:
        assert g.shape == (200, 6)
        assert scaled_error(g, direct_gauss(x, y, q, 0.15), q) <= eps


def test_one_dimensional_inputs_and_default_weights(rng):
    x = rng.uniform(size=3000)
    y = np.linspace(0, 1, 11)
    g = gauss_transform(x, y, bandwidth=0.1)
    assert g.shape == (11,)
    assert scaled_error(g, direct_gauss(x, y, np.ones(3000), 0.1), np.ones(3000)) <= 1e-6


def test_fortran_strided_and_integer_inputs_are_converted(rng):
    x = rng.uniform(size=(400, 6))
    xf = np.asfortranarray(x[:, ::2])  # strided then F-ordered
    y = rng.uniform(size=(50, 3))
    q = rng.uniform(size=400).astype(np.float32)
    g = gauss_transform(xf, y, q, bandwidth=0.3, method="direct", epsilon=1e-13)
    exact = direct_gauss(x[:, ::2], y, q.astype(float), 0.3)
    assert scaled_error(g, exact, q) < 1e-12
    gi = gauss_transform(np.arange(10), np.arange(3), bandwidth=2, method="direct", epsilon=1e-13)
    assert scaled_error(gi, direct_gauss(np.arange(10.0), np.arange(3.0), np.ones(10), 2.0), np.ones(10)) < 1e-12


def test_near_machine_precision(rng):
    x = rng.uniform(size=(800, 2))
    q = rng.uniform(size=800)
    g = gauss_transform(x, x[:100], q, bandwidth=0.5, epsilon=1e-14)
    assert scaled_error(g, direct_gauss(x, x[:100], q, 0.5), q) <= 1e-13


def test_reusable_object_matches_function_and_pickles(rng):
    x = rng.uniform(size=(4000, 2))
    q = rng.uniform(-1, 1, size=(4000, 2))
    gt = GaussTransform(x, bandwidth=0.2, epsilon=1e-7)
    assert gt.method_ in METHODS[1:]
    assert set(gt.info_) >= {"method", "n_clusters", "truncation", "n_terms", "cutoff", "estimates"}
    y1, y2 = rng.uniform(size=(30, 2)), rng.uniform(size=(40, 2))
    for y in (y1, y2):
        assert scaled_error(gt(y, q), direct_gauss(x, y, q, 0.2), q) <= 1e-7
    again = pickle.loads(pickle.dumps(gt))
    assert again.method_ == gt.method_
    np.testing.assert_array_equal(again(y1, q), gt(y1, q))
    assert "GaussTransform(n_sources=4000" in repr(gt)


@pytest.mark.parametrize("method", METHODS)
def test_same_result_for_any_n_jobs(method, rng):
    x = rng.uniform(size=(3000, 3))
    q = rng.uniform(-1, 1, size=3000)
    y = rng.uniform(size=(700, 3))
    r1 = run_or_refused(lambda: gauss_transform(x, y, q, bandwidth=0.3, method=method, n_jobs=1), method)
    if r1 is None:
        return
    r2 = gauss_transform(x, y, q, bandwidth=0.3, method=method, n_jobs=2)
    r3 = gauss_transform(x, y, q, bandwidth=0.3, method=method, n_jobs=None)
    np.testing.assert_array_equal(r1, r2)
    np.testing.assert_array_equal(r1, r3)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"bandwidth": 0.0}, "bandwidth"),
        ({"bandwidth": -1.0}, "bandwidth"),
        ({"bandwidth": np.inf}, "bandwidth"),
        ({"bandwidth": 0.1, "epsilon": 0.0}, "epsilon"),
        ({"bandwidth": 0.1, "epsilon": 1.0}, "epsilon"),
        ({"bandwidth": 0.1, "epsilon": 2.0}, "epsilon"),
        ({"bandwidth": 0.1, "method": "fft"}, "method"),
        ({"bandwidth": 0.1, "n_jobs": 0}, "n_jobs"),
        ({"bandwidth": 0.1, "weights": np.ones(7)}, "weights"),
        ({"bandwidth": 0.1, "weights": np.array([np.nan] * 10)}, "weights"),
        ({"bandwidth": 0.1, "targets": np.ones((4, 3))}, "targets"),
        ({"bandwidth": 0.1, "targets": np.array([[np.inf, 0.0]])}, "targets"),
        ({"bandwidth": 0.1, "targets": np.ones((0, 2))}, "targets"),
        ({"bandwidth": 0.1, "sources": np.ones((0, 2))}, "sources"),
        ({"bandwidth": 0.1, "sources": np.full((10, 2), np.nan)}, "sources"),
        ({"bandwidth": 0.1, "sources": np.ones((2, 2, 2))}, "sources"),
    ],
)
def test_bad_input_names_the_parameter(kwargs, match):
    args = {"sources": np.ones((10, 2)), "targets": np.ones((3, 2)), "weights": None}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        gauss_transform(**args)


def test_type_errors():
    with pytest.raises(TypeError, match="bandwidth"):
        gauss_transform(np.ones((3, 1)), np.ones((3, 1)))
    with pytest.raises(TypeError, match="bandwidth"):
        gauss_transform(np.ones((3, 1)), np.ones((3, 1)), bandwidth="wide")
    with pytest.raises(TypeError, match="sources"):
        gauss_transform([["a", "b"]], np.ones((3, 2)), bandwidth=1.0)


def test_core_rejects_non_contiguous_arrays_directly():
    from vastml import _core

    x = np.asfortranarray(np.ones((10, 2)))
    plan = {"bandwidth": 1.0, "epsilon": 1e-6, "method": "direct", "truncation": None, "n_clusters": None}
    with pytest.raises(TypeError, match="C-contiguous"):
        _core.gauss_transform(x, np.ones((2, 2)), np.ones((10, 1)), plan)
    with pytest.raises(ValueError, match="dimension"):
        _core.gauss_transform(np.ones((10, 2)), np.ones((2, 3)), np.ones((10, 1)), plan)


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    d=st.integers(1, 6),
    n=st.integers(1, 300),
    m=st.integers(1, 40),
    log_h=st.floats(-2.0, 0.5),
    log_eps=st.floats(-10, -2),
    w=st.integers(1, 3),
)
def test_contract_property(seed, d, n, m, log_h, log_eps, w):
    rng = np.random.default_rng(seed)
    x = rng.uniform(size=(n, d))
    y = rng.uniform(-0.3, 1.3, size=(m, d))
    q = rng.normal(size=(n, w))
    h, eps = 10.0**log_h, 10.0**log_eps
    g = gauss_transform(x, y, q, bandwidth=h, epsilon=eps)
    assert scaled_error(g, direct_gauss(x, y, q, h), q) <= eps


def test_per_feature_and_matrix_bandwidths_match_the_direct_sum(rng):
    x = rng.uniform(size=(3000, 3))
    y = rng.uniform(size=(60, 3))
    q = rng.uniform(-1, 1, size=3000)
    hs = np.array([0.1, 0.3, 0.7])
    diff = y[:, None, :] - x[None]
    exact = np.exp(-((diff / hs) ** 2).sum(-1)) @ q
    for method in ("auto", "direct", "direct-tree", "ifgt"):
        got = gauss_transform(x, y, q, bandwidth=hs, epsilon=1e-8, method=method)
        assert scaled_error(got, exact, q) <= 1e-8, method
    # a full SPD matrix H: exp(-(y - x)^T H^-1 (y - x))
    a = rng.normal(size=(3, 3))
    H = 0.05 * (a @ a.T + 0.5 * np.eye(3))
    quad = np.einsum("mnk,kl,mnl->mn", diff, np.linalg.inv(H), diff)
    exact = np.exp(-quad) @ q
    for method in ("auto", "direct", "ifgt-tree"):
        got = gauss_transform(x, y, q, bandwidth=H, epsilon=1e-8, method=method)
        assert scaled_error(got, exact, q) <= 1e-8, method
    gt = GaussTransform(x, bandwidth=H, epsilon=1e-8)
    assert scaled_error(gt(y, q), exact, q) <= 1e-8
    assert scaled_error(pickle.loads(pickle.dumps(gt))(y, q), exact, q) <= 1e-8
    # a scalar h is the matrix h^2 I
    np.testing.assert_allclose(
        gauss_transform(x, y, q, bandwidth=0.3 ** 2 * np.eye(3), epsilon=1e-10, method="direct"),
        gauss_transform(x, y, q, bandwidth=0.3, epsilon=1e-10, method="direct"),
        rtol=0, atol=1e-9 * np.abs(q).sum(),
    )


@pytest.mark.parametrize("bandwidth, match", [
    (np.ones(2), r"shape \(3,\)"),
    (np.array([0.1, -0.2, 0.3]), "positive"),
    (np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]), "symmetric"),
    (-np.eye(3), "positive definite"),
    (np.array([0.1, np.nan, 0.3]), "finite"),
])
def test_bad_bandwidth_arrays(bandwidth, match):
    x = np.ones((10, 3))
    with pytest.raises(ValueError, match=match):
        gauss_transform(x, x, bandwidth=bandwidth)


def test_fixed_truncation_and_clusters_against_the_direct_sum(rng):
    x = rng.uniform(size=(4000, 2))
    q = rng.uniform(size=4000)
    y = rng.uniform(size=(200, 2))
    exact = direct_gauss(x, y, q, 0.3)
    errors = {}
    for p in (1, 3, 8, 16):
        g = gauss_transform(x, y, q, bandwidth=0.3, method="ifgt", truncation=p, n_clusters=12)
        errors[p] = scaled_error(g, exact, q)
    # more terms, less error; p = 1 keeps only each cluster's weight at its centre
    assert errors[1] > errors[3] > errors[8] > errors[16]
    assert errors[1] > 1e-3 and errors[16] < 1e-6
    gt = GaussTransform(x, bandwidth=0.3, method="ifgt-tree", truncation=5, n_clusters=7)
    assert (gt.info_["truncation"], gt.info_["n_clusters"], gt.method_) == (5, 7, "ifgt-tree")
    assert scaled_error(gt(y, q), exact, q) == pytest.approx(
        scaled_error(gauss_transform(x, y, q, bandwidth=0.3, method="ifgt", truncation=5, n_clusters=7), exact, q),
        rel=0.5,
    )
    # K alone: p still follows from epsilon, so the contract holds
    g = gauss_transform(x, y, q, bandwidth=0.3, epsilon=1e-7, method="ifgt", n_clusters=20)
    assert scaled_error(g, exact, q) <= 1e-7
    # p alone in 1-D
    x1, y1 = x[:, 0], y[:, 0]
    g = gauss_transform(x1, y1, q, bandwidth=0.3, method="ifgt", truncation=12)
    assert scaled_error(g, direct_gauss(x1[:, None], y1[:, None], q, 0.3), q) < 1e-6
    with pytest.raises(ValueError, match="method"):
        gauss_transform(x, y, q, bandwidth=0.3, truncation=4)
    with pytest.raises(ValueError, match="truncation"):
        gauss_transform(x, y, q, bandwidth=0.3, method="ifgt", truncation=0)
    with pytest.raises(ValueError, match="n_clusters"):
        GaussTransform(x, bandwidth=0.3, method="ifgt", n_clusters=0)


def test_auto_times_its_close_candidates_and_keeps_epsilon(rng):
    # two Gaussian clusters in 2-D: the case where a guessed cost misleads (the model puts
    # the IFGT and the tree within a few percent of each other)
    centres = np.array([[0.2, 0.3], [0.7, 0.6]])
    x = centres[rng.integers(2, size=30000)] + 0.05 * rng.standard_normal((30000, 2))
    y = centres[rng.integers(2, size=30000)] + 0.05 * rng.standard_normal((30000, 2))
    q = rng.uniform(size=30000)
    gt = GaussTransform(x, bandwidth=0.01, epsilon=1e-8, target_sample=y[:2000], n_targets=30000)
    info = gt.info_
    assert len(info["measured"]) >= 2, info
    assert gt.method_ in info["measured"]
    # the kept method was the fastest measured one
    assert info["measured"][gt.method_] == min(info["measured"].values())
    assert scaled_error(gt(y[:300], q), direct_gauss(x, y[:300], q, 0.01), q) <= 1e-8


def _planning_problem(rng):
    centres = np.array([[0.2, 0.3], [0.7, 0.6]])
    x = centres[rng.integers(2, size=30000)] + 0.05 * rng.standard_normal((30000, 2))
    y = centres[rng.integers(2, size=30000)] + 0.05 * rng.standard_normal((30000, 2))
    return x, y, rng.uniform(size=30000)


def test_planning_stages_reach_the_callbacks_and_a_stop_keeps_epsilon(rng):
    x, y, q = _planning_problem(rng)
    kw = {"bandwidth": 0.02, "epsilon": 1e-8, "target_sample": y[:2000], "n_targets": 30000}
    seen = []
    gt = GaussTransform(x, **kw, callbacks=lambda k, s, name: seen.append((k, s, name)))
    assert [k for k, _, _ in seen] == list(range(1, len(seen) + 1))
    assert seen[0][2] == "estimate" and all(s > 0 for _, s, _ in seen)
    timed: dict[str, list[float]] = {}
    for _, s, name in seen:
        if name.startswith("time "):
            timed.setdefault(name[5:], []).append(s)
    # each candidate's measurement is the fastest of its timings, each one reported
    assert {m: min(t) for m, t in timed.items()} == gt.info_["measured"] and not gt.stopped_early_
    # a stop at the first stage: no timing, and the plan still meets epsilon
    early = GaussTransform(x, **kw, callbacks=lambda k, s, name: True)
    assert early.stopped_early_ and early.info_["measured"] == {}
    assert scaled_error(early(y[:300], q), direct_gauss(x, y[:300], q, 0.02), q) <= 1e-8
    # an explicit method has one stage
    one = []
    GaussTransform(x, bandwidth=0.3, method="direct", callbacks=lambda *a: one.append(a))
    assert one == [(1, one[0][1], "plan")]


def test_planning_callback_errors_propagate_and_verbose_draws_a_bar(rng, capfd):
    x, y, q = _planning_problem(rng)

    def boom(k, s, name):
        raise RuntimeError("from the callback")

    with pytest.raises(RuntimeError, match="from the callback"):
        GaussTransform(x, bandwidth=0.02, callbacks=boom)
    GaussTransform(x[:5000], bandwidth=0.02, verbose=True)
    assert "GaussTransform planning" in capfd.readouterr().err
    g = gauss_transform(x[:5000], y[:50], q[:5000], bandwidth=0.02, verbose=True)
    assert "gauss_transform planning" in capfd.readouterr().err
    np.testing.assert_allclose(g, gauss_transform(x[:5000], y[:50], q[:5000], bandwidth=0.02))


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT delivery differs on Windows")
def test_ctrl_c_interrupts_the_planning():
    # the first planning stage sends SIGINT to the process: the door raises the cancel flag,
    # the planner sees it at its next stage and KeyboardInterrupt reaches Python
    code = textwrap.dedent(
        """
        import os, signal, time, numpy as np
        from vastml.kernels import GaussTransform
        signal.signal(signal.SIGINT, signal.default_int_handler)
        rng = np.random.default_rng(0)
        x = rng.uniform(size=(30000, 2))
        def interrupt(k, seconds, name):
            if k == 1:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.5)  # the main thread polls for signals meanwhile
        try:
            GaussTransform(x, bandwidth=0.02, epsilon=1e-8, callbacks=interrupt)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        else:
            print("finished", flush=True)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, check=False)
    assert out.stdout.strip() == "interrupted", out.stdout + out.stderr


@pytest.mark.parametrize("h, eps", [(0.002, 1e-8), (0.05, 1e-6), (0.4, 1e-11), (3.0, 1e-3)])
def test_fgt_on_a_line_meets_epsilon(h, eps, rng):
    # clumped and spread sources, targets inside, outside and far away, signed weights
    x = np.concatenate([rng.normal(0, 0.01, 700), rng.uniform(-1, 2, 1800), [40.0]])
    y = np.concatenate([rng.uniform(-1.5, 2.5, 400), [40.0, -1e3, 1e6], x[:20]])
    q = rng.uniform(-1, 1, size=(x.size, 3))
    gt = GaussTransform(x, bandwidth=h, epsilon=eps, method="fgt")
    assert gt.method_ == "fgt" and gt.info_["truncation"] >= 1
    assert scaled_error(gt(y, q), direct_gauss(x, y, q, h), q) <= eps


def test_fgt_spans_far_outliers_with_the_occupied_boxes_only(rng):
    # 0.5% of the sources 1e2-1e4 away at h = 0.01: about 2e7 boxes of which a few hundred hold
    # sources (the grid used to refuse more than 4 (N + M) boxes); two weight columns, targets
    # in the bulk, at the outliers and beyond
    x = rng.standard_normal(4000)
    far = rng.random(x.size) < 0.005
    x[far] = np.sign(rng.standard_normal(far.sum())) * 10 ** rng.uniform(2, 4, far.sum())
    y = np.concatenate([rng.standard_normal(500), x[far][:10], x[far][:5] + 0.01, [3e4, -2e5]])
    q = rng.uniform(-1, 1, size=(x.size, 2))
    gt = GaussTransform(x, bandwidth=0.01, epsilon=1e-6, method="fgt")
    assert gt.method_ == "fgt" and gt.info_["n_clusters"] <= x.size
    assert scaled_error(gt(y, q), direct_gauss(x, y, q, 0.01), q) <= 1e-6


def test_fgt_refuses_more_than_one_dimension(rng):
    with pytest.raises(ValueError, match="on a line"):
        GaussTransform(rng.uniform(size=(100, 2)), bandwidth=0.1, method="fgt")


def test_auto_takes_the_grid_on_a_large_line(rng):
    # the KDE of many points at themselves: auto runs the grid transform, within epsilon
    x = rng.standard_normal(200_000)
    gt = GaussTransform(x, bandwidth=0.1, epsilon=1e-6)
    assert gt.method_ == "fgt"
    sub = x[::997]
    q = np.ones(x.size)
    assert scaled_error(gt(sub, q), direct_gauss(x, sub, q, 0.1), q) <= 1e-6


def test_auto_clusters_a_curved_sheet_the_uniform_model_rules_out():
    # a curve in 7-D, stretched along random axes: spread over its box the IFGT could not
    # reach epsilon, but the curve needs few clusters; auto must try them (4x the direct sum)
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 1, 7))
    stretch = 10 ** rng.uniform(-1, 1, size=7)

    def sheet(n):
        t = rng.random((n, 1))
        return (t @ a + 0.3 * np.sin(3 * t @ b)) * stretch + 1e-3 * rng.standard_normal((n, 7))

    x, y, q = sheet(3000), sheet(20000), rng.random(3000)
    gt = GaussTransform(x, bandwidth=0.73, epsilon=5e-4, target_sample=y)
    assert gt.method_ in ("ifgt", "ifgt-tree"), gt.info_
    assert scaled_error(gt(y[:400], q), direct_gauss(x, y[:400], q, 0.73), q) <= 5e-4

