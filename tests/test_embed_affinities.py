"""Entropic affinities against direct entropy computations (spec 003 §8.1)."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_digits
from vastml import _core
from vastml.embed import entropic_affinities, knn_sqdist, symmetrize, warm_start_order
from vastml.embed._affinities import ORDERS, ROOT_METHODS


def _root(perplexity, **options):
    """The options of ``_core.entropic_affinities_knn``: the wrappers' defaults and ``options``."""
    return {"perplexity": float(perplexity), "warm": "previous", "method": "euler", "tol": 1e-10,
            "maxit": 20, "chunk_size": 2048, **options}


def row_entropy(d2, log_beta):
    s = d2 - d2.min()
    w = np.exp(-np.exp(log_beta) * s)
    p = w / w.sum()
    return -(p[p > 0] * np.log(p[p > 0])).sum()


@pytest.fixture(scope="module")
def digits():
    return load_digits().data[:600]


def check_rows(P, K):
    P = sp.csr_array(P)
    for i in range(P.shape[0]):
        p = P.data[P.indptr[i] : P.indptr[i + 1]]
        H = -(p[p > 0] * np.log(p[p > 0])).sum()
        assert abs(H - np.log(K)) <= 1e-9, (i, H)
        assert abs(p.sum() - 1) < 1e-12
    assert (P.diagonal() == 0).all()
    assert (P.data >= 0).all()


@pytest.mark.parametrize("method", ROOT_METHODS)
def test_every_row_reaches_the_perplexity(digits, method):
    P, beta, info = entropic_affinities(digits, perplexity=25, n_neighbors=100, method=method)
    check_rows(P, 25)
    assert np.isfinite(beta).all() and (beta > 0).all()
    assert info["converged"].all()
    lb = np.log(beta)
    assert (info["log_beta_lower"] <= lb).all() and (lb <= info["log_beta_upper"]).all()


def test_methods_and_orders_agree(digits):
    d2, idx = knn_sqdist(digits, 90)
    ref = np.log(entropic_affinities(knn=(d2, idx), perplexity=30)[1])
    for method in ROOT_METHODS:
        lb = np.log(entropic_affinities(knn=(d2, idx), perplexity=30, method=method)[1])
        assert np.abs(lb - ref).max() < 1e-8, method
    for order in set(ORDERS) - {"raster"}:
        lb = np.log(
            entropic_affinities(knn=(d2, idx), perplexity=30, order=order, random_state=0)[1]
        )
        assert np.abs(lb - ref).max() < 1e-8, order
    # Same result for any thread count.
    lb1 = np.log(entropic_affinities(knn=(d2, idx), perplexity=30, n_jobs=1)[1])
    assert np.array_equal(lb1, ref)


def test_bounds_bracket_the_root_including_adversarial_rows():
    rng = np.random.default_rng(0)
    rows, perps = [], []
    k = 60
    for _ in range(400):
        a = rng.uniform(0, 2)
        b = a + 10 ** rng.uniform(-3, 3)
        row = np.full(k, b)
        row[0] = a  # unique nearest neighbour, the rest at one distance
        if rng.random() < 0.5:
            row[rng.integers(2, k) :] = b + rng.uniform(0, 5)
        rows.append(row)
        perps.append(rng.uniform(1.2, k - 0.1))
    # Each row gets its own perplexity: one call per distinct perplexity.
    for row, K in zip(rows, perps):
        d2 = np.ascontiguousarray(row[None, :])
        P, lb, evals, bis, lo, hi, conv = _core.entropic_affinities_knn(
            d2, np.array([0]), _root(K, warm="bounds")
        )
        assert row_entropy(row, lo[0]) - np.log(K) > 0 > row_entropy(row, hi[0]) - np.log(K)
        assert conv[0]
        assert abs(row_entropy(row, lb[0]) - np.log(K)) <= 1e-10


def test_derivative_methods_need_few_evaluations(digits):
    d2, idx = knn_sqdist(digits, 150)
    mean = {
        m: entropic_affinities(knn=(d2, idx), perplexity=30, method=m)[2]["evaluations"].mean()
        for m in ROOT_METHODS
    }
    for m in ("newton", "halley", "euler"):
        assert mean[m] < 6, mean
    assert mean["bisection"] > 20 and mean["bisection"] > 4 * mean["newton"]
    assert mean["brent"] < mean["bisection"]
    # Warm starts help: the density order needs fewer evaluations than no warm start.
    bounds = entropic_affinities(knn=(d2, idx), perplexity=30, order="bounds")[2][
        "evaluations"
    ].mean()
    assert mean["newton"] < bounds


def test_invariances(digits):
    X = digits[:300]
    rng = np.random.default_rng(1)
    Q, _ = np.linalg.qr(rng.normal(size=(64, 64)))
    _, b, _ = entropic_affinities(X, perplexity=20, n_neighbors=80)
    _, b_rot, _ = entropic_affinities(X @ Q + 5.0, perplexity=20, n_neighbors=80)
    assert np.allclose(np.log(b_rot), np.log(b), atol=1e-7)
    _, b_scaled, _ = entropic_affinities(3.0 * X, perplexity=20, n_neighbors=80)
    assert np.allclose(b_scaled, b / 9.0, rtol=1e-7)
    perm = rng.permutation(300)
    _, b_perm, _ = entropic_affinities(X[perm], perplexity=20, n_neighbors=80)
    assert np.allclose(np.log(b_perm), np.log(b)[perm], atol=1e-7)


def test_sparse_close_to_full(digits):
    X = digits[:400]
    _, b_full, _ = entropic_affinities(X, perplexity=15, n_neighbors=399)
    _, b_knn, _ = entropic_affinities(X, perplexity=15, n_neighbors=75)
    _, b_more, _ = entropic_affinities(X, perplexity=15, n_neighbors=200)
    rel = np.abs(np.log(b_knn) - np.log(b_full)) / np.abs(np.log(b_full))
    rel_more = np.abs(np.log(b_more) - np.log(b_full)) / np.abs(np.log(b_full))
    # Threshold from a digits run (spec §8.1.6): k = 5K gives ~3e-3 median relative error.
    assert np.median(rel) < 1e-2
    assert np.median(rel_more) < np.median(rel) / 3
    assert not np.allclose(b_full, b_knn, rtol=1e-12)  # the truncation does change something


def test_orders_are_valid(digits):
    d2, idx = knn_sqdist(digits, 40)
    n = len(d2)
    for name in ("mst", "msp", "density", "random"):
        o, parents, warm = warm_start_order(name, d2, idx, 30, random_state=0)
        assert np.array_equal(np.sort(o), np.arange(n)), name
        if name == "mst":
            pos = np.empty(n, int)
            pos[o] = np.arange(n)
            has = parents >= 0
            assert (pos[parents[has]] < pos[has]).all()
    o, _, _ = warm_start_order("raster", d2[:6], idx[:6], 3, image_shape=(2, 3))
    assert o.tolist() == [0, 1, 2, 5, 4, 3]


def test_duplicates_and_ties():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 3))
    X[100:104] = X[0]  # 4 copies of point 0: fewer than K, a root exists
    P, beta, info = entropic_affinities(X, perplexity=10)
    assert info["converged"].all()
    check_rows(P, 10)
    X[100:120] = X[0]  # 20 copies > K: no width reaches perplexity 10 there
    P, beta, info = entropic_affinities(X, perplexity=10, n_neighbors=40)
    assert not info["converged"][0]
    assert info["converged"][130:].all()


def test_bad_input_is_rejected(digits):
    with pytest.raises(ValueError, match="perplexity"):
        entropic_affinities(digits[:20], perplexity=30)
    with pytest.raises(ValueError, match="perplexity"):
        entropic_affinities(digits, perplexity=30, n_neighbors=20)
    with pytest.raises(ValueError, match="metric"):
        entropic_affinities(digits, metric="cosine")
    bad = digits[:50].copy()
    bad[3, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        entropic_affinities(bad, perplexity=5)
    with pytest.raises(ValueError, match="method"):
        entropic_affinities(digits, method="secant")
    with pytest.raises(ValueError, match="order"):
        entropic_affinities(digits, order="spiral")
    with pytest.raises(ValueError, match="image_shape"):
        entropic_affinities(digits, order="raster")


def test_symmetrize():
    rng = np.random.default_rng(0)
    P, _, _ = entropic_affinities(rng.normal(size=(100, 2)), perplexity=5)
    J = symmetrize(P)
    assert abs(J.sum() - 1) < 1e-12
    assert abs(J - J.T).max() < 1e-15
    M = symmetrize(P, mode="mean")
    assert np.allclose(M.toarray(), (P + P.T).toarray() / 2)


def test_csr_output_is_canonical_and_matches_the_dense_rows(digits):
    d2, idx = knn_sqdist(digits, 40)
    n, k = idx.shape
    P, beta, info = entropic_affinities(knn=(d2, idx), perplexity=12)
    # Slow oracle: the solver's n x k rows scattered into a dense matrix by their indices.
    o = info["order"]
    rows = _core.entropic_affinities_knn(d2, o, _root(12.0))[0]
    dense = np.zeros((n, n))
    np.add.at(dense, (np.repeat(np.arange(n), k), idx.ravel()), rows.ravel())
    assert np.array_equal(P.toarray(), dense)
    assert P.has_canonical_format
    for i in range(n):  # what SciPy's canonical flag promises, checked directly
        assert (np.diff(P.indices[P.indptr[i] : P.indptr[i + 1]]) > 0).all()
    # A user's graph in any column order, with a repeated neighbour: repeats are summed.
    idx2 = idx[:, ::-1].copy()
    idx2[:, 0] = idx2[:, 1]
    P2, _, info2 = entropic_affinities(knn=(d2[:, ::-1], idx2), perplexity=12)
    rows2 = _core.entropic_affinities_knn(
        np.ascontiguousarray(d2[:, ::-1]), info2["order"], _root(12.0)
    )[0]
    dense2 = np.zeros((n, n))
    np.add.at(dense2, (np.repeat(np.arange(n), k), idx2.ravel()), rows2.ravel())
    assert np.allclose(P2.toarray(), dense2, rtol=0, atol=1e-15)
    assert P2.nnz == n * (k - 1)
    for i in range(n):
        assert (np.diff(P2.indices[P2.indptr[i] : P2.indptr[i + 1]]) > 0).all()


def test_symmetrize_matches_scipy_for_sorted_and_unsorted_rows(digits):
    d2, idx = knn_sqdist(digits, 30)
    P, _, _ = entropic_affinities(knn=(d2, idx), perplexity=10)
    want = ((P + P.T) / 2).toarray()
    np.fill_diagonal(want, 0)
    # Unsorted rows, a diagonal entry and a repeat (SciPy sums repeats in toarray()).
    n = P.shape[0]
    U = sp.csr_array(
        (
            np.r_[P.data[::-1], 0.25, 0.5],
            np.r_[P.indices[::-1], 3, P.indices[0]],
            np.r_[0, np.full(n - 1, 0), P.nnz + 2],
        ),
        shape=(n, n),
    )
    for M, ref in ((P, want), (U, None)):
        S = symmetrize(M, "mean")
        if ref is None:
            ref = ((U + U.T) / 2).toarray()
            np.fill_diagonal(ref, 0)
        assert np.allclose(S.toarray(), ref, rtol=1e-14, atol=0)
        assert S.has_canonical_format
        for i in range(n):
            r = S.indices[S.indptr[i] : S.indptr[i + 1]]
            assert (np.diff(r) > 0).all() and i not in r


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(0, 1e3, allow_nan=False), min_size=8, max_size=30),
    st.floats(0.02, 0.95),
    st.sampled_from(["newton", "halley", "euler"]),
)
def test_random_rows_reach_their_perplexity(row, frac, method):
    row = np.array(row)
    # Gaps below 1e-12 (down to subnormals) would need beta beyond the float range: they are ties.
    row[row < 1e-12] = 0.0
    k = row.size
    K = 1 + frac * (k - 1)
    ties = (row == row.min()).sum()
    P, lb, *_, conv = _core.entropic_affinities_knn(
        np.ascontiguousarray(row[None, :]), np.array([0]), _root(K, method=method)
    )
    if ties < K and row.max() > row.min():
        assert conv[0]
        assert abs(row_entropy(row, lb[0]) - np.log(K)) <= 1e-10
