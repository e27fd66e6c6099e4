"""The portable (scalar) code paths against the AVX2 / FMA / POPCNT ones.

Every crate picks its SIMD kernels at run time (`is_x86_feature_detected!`), behind one switch,
`vastml_spatial::simd_allowed()`, which the environment variable VASTML_NO_SIMD turns off. The
same computations, one in each dispatched kernel, run in two fresh interpreters, with and
without the variable, and must agree: bit for bit where the SIMD copy does the same arithmetic
(POPCNT counts, AVX2 without FMA: kNN tree, affinities, SVM kernels, ordering), to rounding
where FMA fuses a multiply and an add (the Gauss transform's direct and IFGT kernels).
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from vastml import _core

SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import scipy.sparse as sp
    from vastml import _core
    from vastml.kernels import gauss_transform
    from vastml.embed import entropic_affinities
    from vastml.reorder import ConvoMap, gradient_order, planted_matrix
    from vastml.svm import AROWClassifier, BSGDClassifier, LLSVMClassifier, PegasosClassifier

    rng = np.random.default_rng(0)
    out = {"simd": np.array(_core.simd)}
    # vastml-fgt: the direct kernel (accumulate) and IFGT group evaluation
    x, y, q = rng.uniform(size=(3000, 3)), rng.uniform(size=(400, 3)), rng.normal(size=3000)
    for method in ("direct", "ifgt"):
        for eps in (1e-4, 1e-10):
            out[f"gauss_{method}_{eps}"] = gauss_transform(x, y, q, bandwidth=0.3, epsilon=eps, method=method)
    # vastml-spatial: the kNN tree; vastml-embed: the entropic-affinity moments
    pts = rng.normal(size=(600, 5))
    dist, idx = _core.knn_graph(pts, 12)
    out["knn_dist"], out["knn_idx"] = dist, idx
    out["affinities"] = entropic_affinities(pts, perplexity=5, n_neighbors=15)[0].toarray()
    # vastml-svm: dense and sparse dot products, the vectorised exp, the dual CD, AROW's updates
    X = rng.normal(size=(400, 8))
    labels = (X[:, 0] * X[:, 1] + 0.3 * X[:, 2] > 0).astype(int)
    Xs = sp.random(400, 50, density=0.1, format="csr", random_state=1)
    row_sums = np.asarray(Xs.sum(axis=1)).ravel()
    ys = (row_sums > np.median(row_sums)).astype(int)
    for name, clf, data, target in (
        ("arow_full", AROWClassifier(random_state=0), X, labels),
        ("arow_diag", AROWClassifier(covariance="diagonal", random_state=0), X, labels),
        ("pegasos_sparse", PegasosClassifier(random_state=0), Xs, ys),
        ("bsgd_rbf", BSGDClassifier(budget=50, random_state=0), X, labels),
        ("llsvm", LLSVMClassifier(n_landmarks=40, random_state=0), X, labels),
    ):
        out[name] = clf.fit(data, target).decision_function(data)
    # vastml-order: POPCNT shift counts (ConvoMap), the AVX2 dynamic programme (gradient order)
    m = np.asarray(planted_matrix("nested", 48, 0.05, random_state=3))
    cm = ConvoMap(kernel_size=3, random_state=0, n_jobs=1).fit(m)
    out["convomap_rows"], out["convomap_cols"] = cm.row_order_, cm.col_order_
    d = rng.uniform(size=(14, 14))
    order, value = gradient_order(d + d.T, weighted=True)
    out["gradient_order"], out["gradient_value"] = order, np.array(value)
    np.savez(sys.argv[1], **out)
    """
)


def _run(tmp_path, name, no_simd):
    env = dict(os.environ)
    env.pop("VASTML_NO_SIMD", None)
    if no_simd:
        env["VASTML_NO_SIMD"] = "1"
    script = tmp_path / "simd_case.py"
    script.write_text(SCRIPT)
    path = tmp_path / f"{name}.npz"
    subprocess.run([sys.executable, str(script), str(path)], env=env, check=True, timeout=600)
    return dict(np.load(path))


@pytest.mark.skipif(_core.simd == "baseline", reason="this CPU has no AVX2+FMA: only the scalar paths exist")
def test_scalar_paths_match_simd_paths(tmp_path):
    simd = _run(tmp_path, "simd", no_simd=False)
    scalar = _run(tmp_path, "scalar", no_simd=True)
    assert str(simd["simd"]) == "avx2+fma"
    assert str(scalar["simd"]) == "baseline", "VASTML_NO_SIMD=1 did not turn the SIMD kernels off"
    for key in sorted(set(simd) - {"simd"}):
        a, b = simd[key], scalar[key]
        assert a.shape == b.shape, key
        if key.startswith("gauss_"):
            # the Gauss transform's kernels fuse multiply-adds (FMA), which rounds once instead
            # of twice: the sums agree to a few ulps of the total weight, far inside epsilon
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * np.abs(a).max(), err_msg=key)
        else:
            # AVX2 copies without FMA do the same operations in the same order: bit for bit
            np.testing.assert_array_equal(a, b, err_msg=key)
