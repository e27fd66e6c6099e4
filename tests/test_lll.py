"""Locally Linear Landmarks against their exact counterparts (thesis 8.3 oracles)."""

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import lll as oracle
from sklearn.datasets import make_blobs
from sklearn.decomposition import PCA, KernelPCA
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.metrics import adjusted_rand_score
from vastml.embed import (
    LLLPCA,
    LLLDiscriminantAnalysis,
    LLLEigenmaps,
    LLLKernelPCA,
    LLLSpectralClustering,
    gaussian_knn_affinity,
    kmeans_landmark_warm_start,
    laplacian_eigenmaps,
    procrustes_error,
    reconstruction_weights,
    select_landmarks,
)
from vastml.embed._lll import knn_gaussian
from vastml.embed._lll_core import (
    csr_dense_product,
    pieces_to_csr,
    reduced_matrix,
    sym_quadratic_form,
    weight_pieces,
)
from vastml.embed._lll_refine import refine_eigenmaps


def swiss(n=600, seed=0):
    rng = np.random.default_rng(seed)
    t = rng.uniform(1.5 * np.pi, 4.5 * np.pi, n)
    return np.c_[t * np.cos(t), 10 * rng.uniform(size=n), t * np.sin(t)]


@pytest.fixture(scope="module")
def swiss_graph():
    X = swiss()
    W = knn_gaussian(X, 10, None)
    ev, E = laplacian_eigenmaps(W, 2, solver="dense")
    return X, W, ev, E


def _same_up_to_sign(A, B, tol):
    s = np.sign((A * B).sum(0))
    return np.abs(A * s - B).max() < tol


# ------------------------------------------------------------------ weights Z


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(5, 60),
    d=st.integers(1, 4),
    L=st.integers(3, 20),
    kz=st.integers(1, 8),
    seed=st.integers(0, 10_000),
)
def test_weights_columns_sum_to_one_with_kz_nonzeros(n, d, L, kz, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    lm = rng.normal(size=(L, d))
    kz = min(kz, L)
    Z = reconstruction_weights(X, lm, kz)
    assert Z.shape == (L, n)
    np.testing.assert_allclose(np.asarray(Z.sum(axis=0)).ravel(), 1.0, atol=1e-12)
    assert (np.diff(sp.csc_matrix(Z).indptr) <= kz).all()
    # each column's support is the kz nearest landmarks
    d2 = ((X[:, None] - lm[None]) ** 2).sum(-1)
    nearest = np.sort(np.argsort(d2, axis=1, kind="stable")[:, :kz], axis=1)
    Zc = sp.csc_matrix(Z)
    for j in range(n):
        rows = np.sort(Zc.indices[Zc.indptr[j] : Zc.indptr[j + 1]])
        assert set(rows) <= set(nearest[j]) or np.isclose(
            np.sort(d2[j])[kz - 1], np.sort(d2[j])[min(kz, L - 1)]
        )


def test_weights_exact_reconstruction_with_d_plus_1_landmarks():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 3))
    lm = rng.normal(size=(30, 3)) * 3
    Z = reconstruction_weights(X, lm, 4, reg=0)
    assert np.abs(Z.T @ lm - X).max() < 1e-5  # 1e-12 * trace(G) ridge on a singular G
    Zn = oracle.reconstruction_weights(X, lm, 4, reg=0)
    assert np.abs(Zn.T @ lm - X).max() < 1e-5


def test_weights_invariant_to_similarity_transforms():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(100, 3))
    lm = rng.normal(size=(20, 3))
    Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    shift = rng.normal(size=3)
    Z1 = reconstruction_weights(X, lm, 6).toarray()
    Z2 = reconstruction_weights(2.5 * X @ Q + shift, 2.5 * lm @ Q + shift, 6).toarray()
    np.testing.assert_allclose(Z1, Z2, atol=1e-9)


def test_coincident_point_is_reconstructed_by_its_landmark():
    X = np.random.default_rng(3).normal(size=(40, 2))
    Z = reconstruction_weights(X, X[5:15], 5)
    np.testing.assert_array_equal(Z[:, 5:15].toarray(), np.eye(10))


def test_weights_reject_bad_input():
    X = np.zeros((5, 2))
    with pytest.raises(ValueError, match="`n_neighbors`"):
        reconstruction_weights(X, X[:3], 4)
    with pytest.raises(ValueError, match="landmarks"):
        reconstruction_weights(X, np.zeros((3, 3)), 2)


@pytest.mark.parametrize(
    ("n", "d", "L", "kz", "reg"),
    [
        (3000, 64, 300, 20, 1e-3),  # high D, K_Z < D: several landmark-search blocks
        (500, 3, 40, 10, 1e-3),  # K_Z > D + 1: regularised Gram
        (500, 5, 40, 6, 0.0),  # K_Z = D + 1, reg = 0: exact affine reconstruction
        (300, 8, 12, 12, 1e-2),  # K_Z = L: every landmark
        (257, 2, 5, 1, 1e-3),  # K_Z = 1, block boundary at 256
    ],
)
def test_rust_weights_match_numpy_oracle(n, d, L, kz, reg):
    rng = np.random.default_rng(n + d)
    X = rng.normal(size=(n, d)) + 5.0  # off-centre: the Rust screening centres the data
    lm = X[rng.choice(n, L, replace=False)] + 0.01 * rng.normal(size=(L, d))
    nr, wr, _ = weight_pieces(X, lm, kz, reg=reg)
    nn, wn, _ = oracle.weight_pieces(X, lm, kz, reg=reg)
    assert nr.dtype == np.uint32 and nr.shape == wr.shape == (n, kz)
    np.testing.assert_array_equal(nr, nn)  # same neighbours, nearest first
    tol = 1e-5 if reg == 0 else 1e-9  # reg = 0 leaves a 1e-12 ridge on a near-singular G
    np.testing.assert_allclose(wr, wn, atol=tol * max(1.0, np.abs(wn).max()))
    np.testing.assert_allclose(wr.sum(axis=1), 1.0, atol=1e-12)
    Zr = pieces_to_csr(nr, wr, L)
    np.testing.assert_allclose(Zr.toarray(), oracle.reconstruction_weights(
        X, lm, kz, reg=reg).toarray(), atol=tol * max(1.0, np.abs(wn).max()))


def test_rust_weights_coincident_points_and_threads():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(1000, 10))
    idx = np.arange(0, 1000, 7)
    nr, wr, _L = weight_pieces(X, X[idx], 8)
    np.testing.assert_array_equal(nr[idx, 0], np.arange(idx.size))
    np.testing.assert_array_equal(wr[idx], np.eye(8)[np.zeros(idx.size, int)])
    n1, w1, _ = weight_pieces(X, X[idx], 8, n_jobs=1)
    np.testing.assert_array_equal(n1, nr)
    np.testing.assert_array_equal(w1, wr)


def test_regularisation_is_always_applied():
    """reg * trace(G) also for K_Z <= D + 1 (the LLE convention): the weights shrink towards
    uniform as reg grows, and differ from the unregularised ones."""
    rng = np.random.default_rng(8)
    X = rng.normal(size=(200, 10))
    lm = rng.normal(size=(40, 10))
    _, w0, _ = weight_pieces(X, lm, 8, reg=0)
    _, w1, _ = weight_pieces(X, lm, 8, reg=1e-1)
    _, w2, _ = weight_pieces(X, lm, 8, reg=1e3)
    assert np.abs(w1 - w0).max() > 1e-3
    assert np.linalg.norm(w1 - 1 / 8) < np.linalg.norm(w0 - 1 / 8)
    np.testing.assert_allclose(w2, 1 / 8, atol=1e-2)


def test_reduced_matrix_matches_scipy_products():
    rng = np.random.default_rng(9)
    n, L = 3000, 70
    X = rng.normal(size=(n, 4))
    nbr, W, _ = weight_pieces(X, X[rng.choice(n, L, replace=False)], 6)
    M = sp.random(n, n, density=0.004, random_state=1, format="csr") * 2 - sp.eye(n)
    v = rng.uniform(1, 2, n)
    for kw in ({"diag": v}, {"M": M}, {"diag": v, "M": M}):
        got = reduced_matrix(nbr, W, L, **kw)
        want = oracle.reduced_matrix(nbr, W, L, **kw)
        np.testing.assert_allclose(got, want, atol=1e-12 * np.abs(want).max())
    np.testing.assert_array_equal(reduced_matrix(nbr, W, L, diag=v, M=M, n_jobs=1),
                                  reduced_matrix(nbr, W, L, diag=v, M=M))
    assert not np.any(reduced_matrix(nbr, W, L))
    with pytest.raises(ValueError, match="diag"):
        reduced_matrix(nbr, W, L, diag=v[:-1])
    with pytest.raises(ValueError, match="M"):
        reduced_matrix(nbr, W, L, M=M[:-1])


def test_symmetric_reduced_matrix_reads_the_upper_triangle_and_equals_the_product():
    """The upper-triangle kernel (every edge once) against SciPy's Z M Z^T on a symmetric M
    with a diagonal, for any thread count; on a non-symmetric M it is Z sym_triu(M) Z^T."""
    from vastml.embed._lll import _looks_symmetric

    rng = np.random.default_rng(4)
    n, L = 4000, 50
    X = rng.normal(size=(n, 3))
    nbr, zw, _ = weight_pieces(X, X[rng.choice(n, L, replace=False)], 2)
    Z = pieces_to_csr(nbr, zw, L)
    R = sp.random(n, n, density=0.003, random_state=2, format="csr")
    M = (R + R.T + sp.diags(rng.uniform(0, 1, n))).tocsr()
    assert _looks_symmetric(M)
    want = (Z @ M @ Z.T).toarray()
    v = rng.uniform(1, 2, n)
    for kw in ({}, {"diag": v}):
        got = reduced_matrix(nbr, zw, L, M=M, symmetric=True, **kw)
        w = want + ((Z @ sp.diags(v) @ Z.T).toarray() if kw else 0)
        np.testing.assert_allclose(got, w, atol=1e-12 * np.abs(w).max())
    np.testing.assert_array_equal(reduced_matrix(nbr, zw, L, M=M, symmetric=True, n_jobs=1),
                                  reduced_matrix(nbr, zw, L, M=M, symmetric=True, n_jobs=2))
    # int64 indices, unsorted rows: same numbers
    M64 = M.copy()
    M64.indptr, M64.indices = M64.indptr.astype(np.int64), M64.indices.astype(np.int64)
    M64.indices = M64.indices.copy()
    for r in range(n):  # reverse every row
        a, b = M64.indptr[r], M64.indptr[r + 1]
        M64.indices[a:b] = M64.indices[a:b][::-1].copy()
        M64.data[a:b] = M64.data[a:b][::-1].copy()
    M64.has_sorted_indices = False
    np.testing.assert_allclose(reduced_matrix(nbr, zw, L, M=M64, symmetric=True), want,
                               atol=1e-12 * np.abs(want).max())
    # non-symmetric: the upper triangle mirrored (Rust and the NumPy oracle agree)
    A = (R + sp.diags(rng.uniform(0, 1, n))).tocsr()
    assert not _looks_symmetric(A)
    got = reduced_matrix(nbr, zw, L, M=A, symmetric=True)
    U = sp.triu(A, k=1)
    w = (Z @ (U + U.T + sp.diags(A.diagonal())) @ Z.T).toarray()
    np.testing.assert_allclose(got, w, atol=1e-12 * np.abs(w).max())
    np.testing.assert_allclose(oracle.reduced_matrix(nbr, zw, L, M=A, symmetric=True),
                               w, atol=1e-12 * np.abs(w).max())
    with pytest.raises(ValueError, match="keep_rows"):
        reduced_matrix(nbr, zw, L, M=M, symmetric=True, keep_rows=True)


def test_shift_invert_reduced_solver_matches_dense():
    """The Lanczos shift-invert path (default for L >= 1500) against dense eigh on a real
    reduced Laplacian pencil, including its near-degenerate cluster eigenvalues."""
    from vastml.embed._lll_core import reduced_eigenproblem

    X, _ = make_blobs(2000, centers=6, n_features=5, cluster_std=2.0, random_state=0)
    W = knn_gaussian(X, 10, None)
    deg = np.asarray(W.sum(axis=1)).ravel()
    nbr, zw, L = weight_pieces(X, X[::8], 6)
    B = reduced_matrix(nbr, zw, L, diag=deg)
    A = reduced_matrix(nbr, zw, L, diag=deg, M=-W)
    w1, V1 = reduced_eigenproblem(A, B, 8, solver="dense")
    w2, V2 = reduced_eigenproblem(A, B, 8, solver="shift-invert")
    np.testing.assert_allclose(w2, w1, atol=1e-10 * w1[-1] + 1e-13)
    np.testing.assert_allclose(V2.T @ B @ V2, np.eye(8), atol=1e-8)
    # same subspace (eigenvectors of near-equal eigenvalues may rotate): projector distance
    P1 = V1 @ V1.T @ B
    assert np.abs(P1 @ V2 - V2).max() < 1e-6 * np.abs(V2).max()
    with pytest.raises(ValueError, match="smallest"):
        reduced_eigenproblem(A, B, 2, largest=True, solver="shift-invert")


def test_shift_invert_with_singular_b_gives_true_eigenpairs():
    """B is not checked by a second Cholesky any more: with a singular B (two identical
    landmark rows of Z) the result must still be eigenpairs of the pencil (A pd: the finite
    eigenvalues are positive), B-orthonormal, not garbage."""
    from vastml.embed._lll_core import reduced_eigenproblem

    rng = np.random.default_rng(0)
    F = rng.normal(size=(60, 60))
    A = F @ F.T + np.eye(60)
    G = rng.normal(size=(60, 60))
    G[1] = G[0]  # rank-deficient B
    B = G @ G.T
    assert np.linalg.matrix_rank(B) < 60
    w, V = reduced_eigenproblem(A, B, 3, solver="shift-invert")
    assert np.all(np.isfinite(w)) and np.all(w > 0)
    np.testing.assert_allclose(V.T @ B @ V, np.eye(3), atol=1e-6)
    assert np.abs(A @ V - B @ V * w).max() < 1e-6 * np.abs(A @ V).max()


# ------------------------------------------------------------------ landmark choice


@pytest.mark.parametrize("method", ["random", "kmeans", "random-pruned"])
def test_landmark_methods_give_distinct_indices(method):
    X = swiss(400)
    idx = select_landmarks(X, 50, method, random_state=0)
    assert idx.shape == (50,) and np.unique(idx).size == 50
    assert idx.min() >= 0 and idx.max() < 400


def test_pruning_spreads_landmarks():
    X = np.random.default_rng(0).uniform(size=(3000, 2))

    def min_gap(idx):
        d = scipy.spatial.distance.pdist(X[idx])
        return d.min()

    import scipy.spatial

    gaps_r = [min_gap(select_landmarks(X, 100, "random", random_state=s)) for s in range(5)]
    gaps_p = [
        min_gap(select_landmarks(X, 100, "random-pruned", n_pruned=50, random_state=s))
        for s in range(5)
    ]
    assert np.mean(gaps_p) > np.mean(gaps_r)


def test_user_landmark_array_and_errors():
    X = swiss(100)
    m = LLLEigenmaps(landmarks=np.array([3, 1, 50, 70, 90, 10]), n_landmark_neighbors=3).fit(X)
    np.testing.assert_array_equal(m.landmark_indices_, [1, 3, 10, 50, 70, 90])
    with pytest.raises(ValueError, match="landmarks"):
        select_landmarks(X, 5, np.array([0, 200]))
    with pytest.raises(ValueError, match="landmarks"):
        select_landmarks(X, 5, "farthest")  # "minmax" is a rule now
    with pytest.raises(ValueError, match="n_landmarks"):
        select_landmarks(X, 101)


# ------------------------------------------------------------------ Laplacian eigenmaps


def test_all_points_as_landmarks_is_exact_eigenmaps(swiss_graph):
    X, W, ev, E = swiss_graph
    m = LLLEigenmaps(n_components=2, landmarks=np.arange(len(X)), affinity="precomputed")
    m.fit(X, affinity_matrix=W)
    np.testing.assert_allclose(m.eigenvalues_, ev, atol=1e-10)
    assert _same_up_to_sign(m.embedding_, E, 1e-8)


def test_reduced_problem_constraints_and_trivial_eigenvector(swiss_graph):
    X, W, _, _ = swiss_graph
    m = LLLEigenmaps(n_components=3, n_landmarks=80, affinity="precomputed", random_state=0)
    m.fit(X, affinity_matrix=W)
    Z = m.weights_
    deg = np.asarray(W.sum(axis=1)).ravel()
    A = (Z @ (sp.diags(deg) - W) @ Z.T).toarray()
    B = (Z @ sp.diags(deg) @ Z.T).toarray()
    np.testing.assert_allclose(A @ np.ones(80), 0, atol=1e-13 * np.abs(A).sum())
    Xt = m.landmark_embedding_
    np.testing.assert_allclose(Xt.T @ B @ Xt, np.eye(3), atol=1e-10)
    # the embedding is D-orthogonal to constants (trivial eigenvector removed)
    np.testing.assert_allclose(m.embedding_.T @ deg, 0, atol=1e-8)
    # the fitted pencil is the SciPy-built one (fit forms A as B - Z W Z^T)
    w = scipy.linalg.eigh(A, B, eigvals_only=True, subset_by_index=[1, 3])
    np.testing.assert_allclose(m.eigenvalues_, w, rtol=1e-9)
    np.testing.assert_allclose(Xt.T @ A @ Xt, np.diag(w), atol=1e-10)
    assert set(m.fit_times_) == {"affinity", "landmarks + weights", "Z A Z^T, Z B Z^T",
                                 "reduced eigensolve", "X = X_tilde Z"}
    assert all(t >= 0 for t in m.fit_times_.values())


def test_error_falls_as_landmarks_grow(swiss_graph):
    X, W, _, E = swiss_graph

    def err(L):
        return np.mean(
            [
                procrustes_error(
                    LLLEigenmaps(n_components=2, n_landmarks=L, affinity="precomputed", random_state=s)
                    .fit(X, affinity_matrix=W)
                    .embedding_,
                    E,
                )
                for s in range(4)
            ]
        )

    e = [err(L) for L in (20, 60, 200)]
    assert e[0] > e[1] > e[2]


def test_lll_beats_landmark_only_eigenmaps(swiss_graph):
    """LLL error < LE(Z) error (LE on the landmark subgraph, then X = X_tilde Z) at equal L."""
    X, W, _, E = swiss_graph
    e_lll, e_lez = [], []
    for s in range(5):
        m = LLLEigenmaps(n_components=2, n_landmarks=100, affinity="precomputed", random_state=s)
        m.fit(X, affinity_matrix=W)
        idx = m.landmark_indices_
        _, Xl = laplacian_eigenmaps(knn_gaussian(X[idx], 10, None), 2, solver="dense")
        e_lll.append(procrustes_error(m.embedding_, E))
        e_lez.append(procrustes_error(np.asarray(m.weights_.T @ Xl), E))
    assert np.mean(e_lll) < np.mean(e_lez)


def test_out_of_sample_reproduces_training_and_landmarks(swiss_graph):
    X, W, _, _ = swiss_graph
    m = LLLEigenmaps(n_components=2, n_landmarks=60, affinity="precomputed", random_state=1)
    m.fit(X, affinity_matrix=W)
    np.testing.assert_allclose(m.transform(X), m.embedding_, atol=1e-12)
    np.testing.assert_allclose(m.transform(m.landmarks_), m.landmark_embedding_, atol=1e-12)


def test_arpack_agrees_with_dense(swiss_graph):
    _, W, ev, E = swiss_graph
    ev2, E2 = laplacian_eigenmaps(W, 2, solver="arpack", random_state=0)
    np.testing.assert_allclose(ev2, ev, atol=1e-9)
    assert _same_up_to_sign(E2, E, 1e-6)


def test_knn_affinity_is_symmetric_without_self_loops():
    W = gaussian_knn_affinity(swiss(200), 5, 2.0)
    assert abs(W - W.T).max() == 0 and W.diagonal().max() == 0
    assert ((W > 0).sum(axis=1) >= 5).all()


def test_eigenmaps_validation():
    X = swiss(50)
    with pytest.raises(ValueError, match="affinity_matrix"):
        LLLEigenmaps(affinity="precomputed").fit(X)
    with pytest.raises(ValueError, match="affinity"):
        LLLEigenmaps(affinity="rbf").fit(X)
    with pytest.raises(ValueError, match="landmarks"):
        LLLEigenmaps(n_components=5, landmarks=np.array([0, 1, 2])).fit(X)


# ------------------------------------------------------------------ spectral clustering


def test_spectral_clustering_recovers_planted_clusters():
    X, y = make_blobs(3000, centers=5, cluster_std=1.0, random_state=7)
    sc = LLLSpectralClustering(n_clusters=5, n_landmarks=150, random_state=0).fit(X)
    assert adjusted_rand_score(y, sc.labels_) > 0.99
    assert adjusted_rand_score(y[:100], sc.predict(X[:100])) > 0.99
    # against exact spectral clustering (every point a landmark): <= 1% disagreement
    ex = LLLSpectralClustering(n_clusters=5, landmarks=np.arange(3000), random_state=0).fit(X)
    assert adjusted_rand_score(ex.labels_, sc.labels_) > 0.98
    # one cluster: the constant eigenvector alone, every point in it
    one = LLLSpectralClustering(n_clusters=1, n_landmarks=50, random_state=0).fit(X)
    assert one.embedding_.shape == (3000, 1) and not np.any(one.labels_)
    with pytest.raises(ValueError, match="n_clusters"):
        LLLSpectralClustering(n_clusters=0).fit(X)


def test_spectral_clustering_all_landmarks_matches_exact():
    X, _y = make_blobs(400, centers=3, cluster_std=1.0, random_state=3)
    W = knn_gaussian(X, 10, None)
    sc = LLLSpectralClustering(n_clusters=3, landmarks=np.arange(400), affinity="precomputed", random_state=0)
    sc.fit(X, affinity_matrix=W)
    deg = np.asarray(W.sum(axis=1)).ravel()
    dm = 1 / np.sqrt(deg)
    S = (sp.diags(dm) @ W @ sp.diags(dm)).toarray()
    mu, U = scipy.linalg.eigh(S, subset_by_index=[397, 399])
    Xe = U[:, ::-1] * dm[:, None]
    # the kNN graph may be disconnected (repeated eigenvalue 0): compare subspaces
    assert scipy.linalg.subspace_angles(sc.embedding_, Xe).max() < 1e-6
    np.testing.assert_allclose(sc.eigenvalues_, 1 - mu[::-1], atol=1e-10)


def test_landmark_warm_start_kmeans_is_no_worse_than_median_random_restart():
    from sklearn.cluster import KMeans

    X, _ = make_blobs(4000, centers=8, cluster_std=1.5, random_state=4)
    idx = select_landmarks(X, 200, random_state=0)
    warm = kmeans_landmark_warm_start(X, X[idx], 8, n_init=20, random_state=0)
    singles = [KMeans(8, n_init=1, init="random", random_state=s).fit(X).inertia_ for s in range(9)]
    assert warm.inertia_ <= np.median(singles) * (1 + 1e-9)


# ------------------------------------------------------------------ PCA, LDA, kernel PCA


def test_pca_all_landmarks_is_exact_and_few_landmarks_close():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6)) * [5, 3, 2, 1, 1, 0.5] + 3
    ref = PCA(3).fit(X)
    p = LLLPCA(n_components=3, landmarks=np.arange(300)).fit(X)
    assert _same_up_to_sign(p.components_.T, ref.components_.T, 1e-10)
    np.testing.assert_allclose(p.explained_variance_, ref.explained_variance_, rtol=1e-10)
    assert _same_up_to_sign(p.transform(X), ref.transform(X), 1e-8)
    errs = [
        np.abs(np.abs(LLLPCA(n_components=3, n_landmarks=L, random_state=0).fit(X).components_)
               - np.abs(ref.components_)).max()
        for L in (10, 60)
    ]
    assert errs[1] < 0.05 and errs[1] < errs[0] + 1e-12


def test_lda_all_landmarks_is_exact_and_uses_all_labels():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 3, 300)
    X = rng.normal(size=(300, 6)) + y[:, None] * np.array([0, 0, 0, 2, 0, 1])
    ref = LinearDiscriminantAnalysis(n_components=2).fit(X, y)
    a = LLLDiscriminantAnalysis(n_components=2, landmarks=np.arange(300)).fit(X, y)
    ang = scipy.linalg.subspace_angles(a.components_.T, ref.scalings_[:, :2])
    assert ang.max() < 1e-6
    # a landmark-poor problem (L < D): relabelling a non-landmark point changes the result
    Xh = rng.normal(size=(300, 40)) + y[:, None] * rng.normal(size=40)
    m1 = LLLDiscriminantAnalysis(n_components=1, n_landmarks=10, random_state=0).fit(Xh, y)
    y2 = y.copy()
    j = np.setdiff1d(np.arange(300), m1.landmark_indices_)[0]
    y2[j] = (y2[j] + 1) % 3
    m2 = LLLDiscriminantAnalysis(n_components=1, n_landmarks=10, random_state=0).fit(Xh, y2)
    assert np.abs(np.abs(m1.components_) - np.abs(m2.components_)).max() > 1e-8


def test_kernel_pca_all_landmarks_is_exact():
    X = np.random.default_rng(2).normal(size=(250, 4))
    ref = KernelPCA(3, kernel="rbf", gamma=0.2).fit(X)
    m = LLLKernelPCA(n_components=3, gamma=0.2, landmarks=np.arange(250), block=64).fit(X)
    np.testing.assert_allclose(m.eigenvalues_, ref.eigenvalues_, rtol=1e-9)
    assert _same_up_to_sign(m.embedding_, ref.transform(X), 1e-8)
    m2 = LLLKernelPCA(n_components=3, gamma=0.2, n_landmarks=60, random_state=0).fit(X)
    np.testing.assert_allclose(m2.transform(X), m2.embedding_, atol=1e-12)
    Xr = ref.transform(X)
    e = [
        np.mean([procrustes_error(LLLKernelPCA(n_components=3, gamma=0.2, n_landmarks=L, random_state=s)
                                  .fit(X).embedding_, Xr) for s in range(3)])
        for L in (30, 150)
    ]
    assert e[1] < e[0] and e[1] < 0.15


def test_kernel_lda_oracle_with_linear_kernel_is_lda():
    """The exact kernel-LDA oracle itself: with a linear kernel it is Fisher LDA."""
    from vastml.embed.lll import kernel_discriminant_analysis

    rng = np.random.default_rng(3)
    y = rng.integers(0, 3, 200)
    X = rng.normal(size=(200, 5)) + y[:, None] * np.array([0, 2, 0, 1, 0])
    lam, _alpha, E = kernel_discriminant_analysis(X, y, 2, kernel="linear", ridge=1e-12)
    ref = LinearDiscriminantAnalysis(n_components=2).fit(X, y).transform(X)
    # same 2-D subspace of projections (columns of E span the LDA scores)
    ang = scipy.linalg.subspace_angles(E - E.mean(0), ref - ref.mean(0))
    assert ang.max() < 1e-6
    assert np.all((lam > 0) & (lam < 1))


def test_kernel_lda_all_landmarks_is_exact_and_few_landmarks_close():
    from vastml.embed.lll import LLLKernelDiscriminantAnalysis, kernel_discriminant_analysis

    rng = np.random.default_rng(4)
    n = 240
    y = rng.integers(0, 3, n)
    t = rng.uniform(0, 2 * np.pi, n)
    X = np.c_[np.cos(t), np.sin(t)] * (1.0 + y)[:, None] + 0.15 * rng.normal(size=(n, 2))
    lam, alpha, E = kernel_discriminant_analysis(X, y, 2, gamma=0.5)
    m = LLLKernelDiscriminantAnalysis(n_components=2, gamma=0.5, landmarks=np.arange(n), block=50).fit(X, y)
    np.testing.assert_allclose(m.eigenvalues_, lam, rtol=1e-8)
    assert _same_up_to_sign(m.embedding_, E, 1e-7)
    assert _same_up_to_sign(m.dual_coef_, alpha, 1e-6)
    # out-of-sample of the training points reproduces the embedding
    np.testing.assert_allclose(m.transform(X), m.embedding_, atol=1e-9)
    # fewer landmarks: the error to the exact solution falls as L grows and stays small
    e = [np.mean([procrustes_error(
        LLLKernelDiscriminantAnalysis(n_components=2, gamma=0.5, n_landmarks=L, random_state=s)
        .fit(X, y).embedding_, E) for s in range(3)]) for L in (10, 80)]
    assert e[1] < e[0] and e[1] < 0.1
    with pytest.raises(ValueError, match="2 classes"):
        LLLKernelDiscriminantAnalysis(n_components=1).fit(X, np.zeros(n))


# ------------------------------------------------------------------ refinement (our extension)


def test_block_product_matches_scipy():
    rng = np.random.default_rng(0)
    M = sp.random(700, 700, density=0.02, random_state=1, format="csr")
    M.data -= 0.3
    Y = rng.normal(size=(700, 5))
    want = M @ Y
    np.testing.assert_allclose(csr_dense_product(M, Y), want, rtol=1e-13, atol=1e-13)
    M64 = M.copy()
    M64.indptr, M64.indices = M64.indptr.astype(np.int64), M64.indices.astype(np.int64)
    assert np.array_equal(csr_dense_product(M64, Y), csr_dense_product(M, Y))
    with pytest.raises(ValueError):
        csr_dense_product(M, Y[:-1])


@pytest.fixture(scope="module")
def gap_graph():
    """Swiss roll with a clear spectral gap after the 2nd eigenvalue (checked)."""
    X = swiss(800, seed=3)
    W = knn_gaussian(X, 12, None)
    ev, E = laplacian_eigenmaps(W, 3, solver="dense")
    assert ev[2] / ev[1] > 1.5
    return X, W, ev[:2], E[:, :2]


@pytest.mark.parametrize("steps", [0, 1, 3])
def test_refinement_never_increases_ritz_values_or_error(gap_graph, steps):
    """The refined span contains the LLL embedding, so each Ritz value is at most LLL's
    (interlacing), and on a problem with a gap the error to exact eigenmaps falls."""
    X, W, ev, E = gap_graph
    for seed in range(3):
        m = LLLEigenmaps(n_components=2, n_landmarks=40, affinity="precomputed", random_state=seed)
        m.fit(X, affinity_matrix=W)
        r = LLLEigenmaps(n_components=2, n_landmarks=40, affinity="precomputed", random_state=seed,
                         refine=steps).fit(X, affinity_matrix=W)
        if steps == 0:  # refine=0 is the thesis' LLL, untouched
            assert np.array_equal(r.embedding_, m.embedding_)
            continue
        assert np.all(r.eigenvalues_ <= m.eigenvalues_ * (1 + 1e-12))
        assert np.all(r.eigenvalues_ >= ev * (1 - 1e-10))  # never below the exact ones
        assert procrustes_error(r.embedding_, E) < procrustes_error(m.embedding_, E)
        deg = np.asarray(W.sum(axis=1)).ravel()
        np.testing.assert_allclose(r.embedding_.T @ (deg[:, None] * r.embedding_), np.eye(2),
                                   atol=1e-10)
        np.testing.assert_allclose(r.embedding_.T @ deg, 0, atol=1e-8)
        assert "refine" in r.fit_times_


def test_refinement_to_convergence_is_exact_eigenmaps(gap_graph):
    X, W, ev, E = gap_graph
    r = LLLEigenmaps(n_components=2, n_landmarks=30, affinity="precomputed", random_state=0, refine=16,
                     refine_rounds=10).fit(X, affinity_matrix=W)
    np.testing.assert_allclose(r.eigenvalues_, ev, rtol=1e-9)
    assert _same_up_to_sign(r.embedding_, E, 1e-5 * np.abs(E).max())


def test_refinement_matches_scipy_products_and_plain_ritz(gap_graph):
    X, W, _, _ = gap_graph
    rng = np.random.default_rng(0)
    X0 = rng.normal(size=(len(X), 2))
    a = refine_eigenmaps(W, X0, steps=2, rounds=2)
    b = refine_eigenmaps(W, X0, steps=2, rounds=2, matmul=oracle.csr_dense_product)
    np.testing.assert_allclose(a[0], b[0], rtol=1e-10)
    assert _same_up_to_sign(a[1], b[1], 1e-8 * np.abs(b[1]).max())
    # steps=0: Rayleigh-Ritz in span([1, X0]) computed the slow way
    lam, Xr = refine_eigenmaps(W, X0, steps=0)
    deg = np.asarray(W.sum(axis=1)).ravel()
    Y = np.c_[np.ones(len(X)), X0]
    Lap = sp.diags(deg) - W
    w, V = scipy.linalg.eigh(Y.T @ (Lap @ Y), Y.T @ (deg[:, None] * Y))
    np.testing.assert_allclose(lam, w[1:], rtol=1e-9)
    assert _same_up_to_sign(Xr, Y @ V[:, 1:], 1e-8 * np.abs(Xr).max())
    with pytest.raises(ValueError):
        refine_eigenmaps(W, X0[:-1])


def test_refined_out_of_sample_is_the_least_squares_landmark_fit(gap_graph):
    X, W, _, _ = gap_graph
    r = LLLEigenmaps(n_components=2, n_landmarks=50, affinity="precomputed", random_state=0,
                     refine=1).fit(X, affinity_matrix=W)
    deg = np.asarray(W.sum(axis=1)).ravel()
    Z = r.weights_.toarray()
    Xt = np.linalg.solve(Z @ (deg[:, None] * Z.T), Z @ (deg[:, None] * r.embedding_))
    np.testing.assert_allclose(r.landmark_embedding_, Xt, atol=1e-8 * np.abs(Xt).max())
    np.testing.assert_allclose(r.transform(r.landmarks_), r.landmark_embedding_, atol=1e-10)
    with pytest.raises((TypeError, ValueError)):
        LLLEigenmaps(n_components=2, refine=-1, affinity="precomputed").fit(X, affinity_matrix=W)


def test_kept_rows_are_w_times_zt_and_give_the_same_refinement(gap_graph):
    X, W, _, _ = gap_graph
    nbr, zw, L = weight_pieces(X, X[:40], 3)
    Z = pieces_to_csr(nbr, zw, L)
    deg = np.asarray(W.sum(axis=1)).ravel()
    for product in (reduced_matrix, oracle.reduced_matrix):
        out, T = product(nbr, zw, L, M=W, diag=deg, keep_rows=True)
        want = (W + sp.diags(deg)) @ Z.T
        np.testing.assert_allclose(T.toarray(), want.toarray(), atol=1e-12)
        np.testing.assert_allclose(out, (Z @ want).toarray(), atol=1e-10)
    # the refinement with W X0 given equals the one that computes it
    X0 = np.asarray(Z.T @ np.random.default_rng(0).normal(size=(L, 2)))
    a = refine_eigenmaps(W, X0, steps=2)
    b = refine_eigenmaps(W, X0, steps=2, WX0=W @ X0)
    np.testing.assert_allclose(a[0], b[0], rtol=1e-10)
    assert _same_up_to_sign(a[1], b[1], 1e-8 * np.abs(a[1]).max())


def test_oversampled_refinement_never_increases_ritz_values(gap_graph):
    """Starting the refinement from d + p reduced eigenvectors enlarges the Krylov span, so
    each of the d smallest Ritz values is at most the one without oversampling."""
    X, W, ev, _E = gap_graph
    for seed in range(3):
        kw = {"n_landmarks": 40, "affinity": "precomputed", "random_state": seed, "refine": 1}
        a = LLLEigenmaps(n_components=2, **kw).fit(X, affinity_matrix=W)
        b = LLLEigenmaps(n_components=2, refine_oversample=3, **kw).fit(X, affinity_matrix=W)
        assert b.embedding_.shape == (len(X), 2) and b.landmark_embedding_.shape == (40, 2)
        assert np.all(b.eigenvalues_ <= a.eigenvalues_ * (1 + 1e-12))
        assert np.all(b.eigenvalues_ >= ev * (1 - 1e-10))
        deg = np.asarray(W.sum(axis=1)).ravel()
        np.testing.assert_allclose(b.embedding_.T @ (deg[:, None] * b.embedding_), np.eye(2),
                                   atol=1e-10)
    with pytest.raises(ValueError, match="n_components"):
        refine_eigenmaps(W, np.random.default_rng(0).normal(size=(len(X), 2)), n_components=3)


def test_symmetric_quadratic_form_matches_the_product():
    rng = np.random.default_rng(3)
    R = sp.random(900, 900, density=0.01, random_state=5, format="csr")
    M = (R + R.T + sp.diags(rng.uniform(size=900))).tocsr()
    for k in (1, 9, 17):  # fixed-width kernels and the general one
        V = rng.normal(size=(900, k))
        want = V.T @ (M @ V)
        np.testing.assert_allclose(sym_quadratic_form(M, V), want,
                                   atol=1e-12 * np.abs(want).max())
    np.testing.assert_array_equal(sym_quadratic_form(M, V, n_jobs=1),
                                  sym_quadratic_form(M, V, n_jobs=2))
    with pytest.raises(ValueError):
        sym_quadratic_form(M, V[:-1])


@pytest.mark.parametrize("rounds", [1, 2])
def test_refinement_with_the_symmetric_last_block_equals_the_full_products(gap_graph, rounds):
    """The last block through its quadratic form (upper triangle of W) gives the Ritz pairs of
    the full products."""
    X, W, _, _ = gap_graph
    X0 = np.random.default_rng(1).normal(size=(len(X), 4))
    for steps in (0, 1, 2):
        a = refine_eigenmaps(W, X0, steps=steps, rounds=rounds, n_components=2)
        b = refine_eigenmaps(W, X0, steps=steps, rounds=rounds, n_components=2, symmetric=True)
        np.testing.assert_allclose(b[0], a[0], rtol=1e-10)
        assert _same_up_to_sign(b[1], a[1], 1e-7 * np.abs(a[1]).max())


def test_minmax_landmarks_maximise_the_distance_to_those_before():
    from vastml.embed import minmax_landmarks, select_landmarks

    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(size=(300, 3)), rng.normal(size=(100, 3)) * 0.1 + 5])
    order = minmax_landmarks(X, 25, random_state=1)
    assert len(set(order.tolist())) == 25
    for k in range(1, 25):
        # exhaustive: the distance from every point to the set chosen so far
        d = np.sqrt(((X[:, None, :] - X[order[:k]][None, :, :]) ** 2).sum(-1)).min(axis=1)
        assert d[order[k]] == pytest.approx(d.max(), rel=1e-9, abs=1e-12)
    # the second landmark is the point farthest from the first
    assert np.argmax(((X - X[order[0]]) ** 2).sum(1)) == order[1]
    assert np.array_equal(select_landmarks(X, 25, "minmax", random_state=1), np.sort(order))
    # all points once (duplicates included) when L = N
    Xd = np.concatenate([X[:5], X[:5]])
    assert sorted(minmax_landmarks(Xd, 10, random_state=0).tolist()) == list(range(10))


def test_minmax_landmarks_in_lll():
    from vastml.embed import LLLEigenmaps

    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 3))
    m = LLLEigenmaps(n_components=2, n_landmarks=40, landmarks="minmax", random_state=0).fit(X)
    assert m.n_landmarks_ == 40 and np.isfinite(m.embedding_).all()


# ------------------------------------------------------------------ progress, stopping, Ctrl-C


@pytest.fixture(scope="module")
def big_roll():
    """20,000 points: two chunks of the weights, twenty blocks of Z D Z^T."""
    X = swiss(20_000, seed=5)
    return X, gaussian_knn_affinity(X, 8, 2.0)


def _eigenmaps(**kw):
    return LLLEigenmaps(n_landmarks=100, affinity="precomputed", random_state=0, **kw)


def test_eigenmaps_callbacks_count_every_stage_in_order_and_change_nothing(big_roll):
    X, W = big_roll
    seen = []

    def record(it, objective, state):
        seen.append((it, objective, None if state is None else state.shape))

    m = _eigenmaps(refine=1, refine_rounds=3, callbacks=[record]).fit(X, affinity_matrix=W)
    its = [s[0] for s in seen]
    assert its == list(range(1, len(its) + 1))
    # 2 weight chunks + 20 blocks of Z D Z^T (+ any of Z W Z^T), the solve, 3 rounds
    assert len(its) >= 2 + 20 + 1 + 3
    assert all(np.isnan(o) and st is None for _, o, st in seen[:-4])
    assert all(st == (len(X), 2) for _, _, st in seen[-4:])
    assert seen[-1][1] == pytest.approx(float(np.sum(m.eigenvalues_)), rel=1e-12)
    assert m.stopped_early_ is False
    ref = _eigenmaps(refine=1, refine_rounds=3).fit(X, affinity_matrix=W)
    np.testing.assert_array_equal(m.embedding_, ref.embedding_)
    # callback_every: only every 5th iteration reaches the callbacks
    seen.clear()
    _eigenmaps(callbacks=record, callback_every=5).fit(X, affinity_matrix=W)
    assert [s[0] for s in seen] == list(range(5, len(its) - 3 + 1, 5))


def test_a_stop_at_the_solve_or_a_round_keeps_a_usable_model(big_roll):
    X, W = big_roll
    seen = []
    _eigenmaps(refine=1, refine_rounds=3, callbacks=lambda *a: seen.append(a[0])).fit(
        X, affinity_matrix=W)
    solve = seen[-4]
    plain = _eigenmaps().fit(X, affinity_matrix=W)
    m = _eigenmaps(refine=1, refine_rounds=3, callbacks=lambda it, o, s: it == solve)
    m.fit(X, affinity_matrix=W)
    assert m.stopped_early_ is True
    np.testing.assert_array_equal(m.embedding_, plain.embedding_)  # refinement skipped
    np.testing.assert_allclose(m.transform(X[:50]), plain.transform(X[:50]))
    # a stop after the first of three rounds: that round's Ritz vectors, better than none
    r1 = _eigenmaps(refine=1, refine_rounds=3, callbacks=lambda it, o, s: it == solve + 1)
    r1.fit(X, affinity_matrix=W)
    one = _eigenmaps(refine=1, refine_rounds=1).fit(X, affinity_matrix=W)
    assert r1.stopped_early_ is True
    np.testing.assert_allclose(r1.eigenvalues_, one.eigenvalues_, rtol=1e-8)
    assert np.all(r1.eigenvalues_ <= plain.eigenvalues_ + 1e-12)
    assert r1.transform(X[:5]).shape == (5, 2)


@pytest.mark.parametrize("stop_at", [1, 3])  # the weights (Rust), Z D Z^T (Rust)
def test_a_stop_before_the_solve_leaves_no_model_and_warns(big_roll, stop_at):
    from sklearn.exceptions import ConvergenceWarning, NotFittedError

    X, W = big_roll
    m = _eigenmaps().fit(X, affinity_matrix=W)  # a refit must not keep the old model
    m.set_params(callbacks=lambda it, o, s: it == stop_at)
    with pytest.warns(ConvergenceWarning, match="no model"):
        m.fit(X, affinity_matrix=W)
    assert m.stopped_early_ is True
    assert not hasattr(m, "embedding_") and not hasattr(m, "landmark_embedding_")
    with pytest.raises(NotFittedError):
        m.transform(X[:5])


@pytest.mark.parametrize("make", [
    lambda cb: LLLPCA(n_landmarks=50, random_state=0, callbacks=cb),
    lambda cb: LLLKernelPCA(n_landmarks=50, gamma=0.1, block=500, random_state=0, callbacks=cb),
])
def test_pca_progress_and_stops(make):
    from sklearn.exceptions import ConvergenceWarning

    X = swiss(2000, seed=1)
    seen = []
    m = make(lambda it, o, s: seen.append((it, o))).fit(X)
    assert [s[0] for s in seen] == list(range(1, len(seen) + 1))
    assert seen[-1][1] == pytest.approx(float(np.sum(m.eigenvalues_ if hasattr(
        m, "eigenvalues_") else m.explained_variance_ * (len(X) - 1))))
    assert m.stopped_early_ is False
    # a stop at the last report (the solve) keeps the model; at the first, none
    m = make(lambda it, o, s: it == len(seen)).fit(X)
    assert m.stopped_early_ is True and m.transform(X[:3]).shape == (3, 2)
    with pytest.warns(ConvergenceWarning):
        m = make(lambda it, o, s: True).fit(X)
    assert m.stopped_early_ is True and not hasattr(m, "weights_")


@pytest.mark.parametrize("stage", ["rust", "python"])
def test_an_exception_in_a_callback_propagates(big_roll, stage):
    X, W = big_roll

    def boom(it, objective, state):
        if stage == "rust" or state is not None:
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        _eigenmaps(callbacks=boom).fit(X, affinity_matrix=W)


def test_verbose_draws_a_bar_on_stderr(big_roll, capfd):
    X, W = big_roll
    _eigenmaps(verbose=True).fit(X, affinity_matrix=W)
    assert "LLLEigenmaps" in capfd.readouterr().err
    with pytest.raises(TypeError, match="callbacks"):
        _eigenmaps(callbacks=3).fit(X, affinity_matrix=W)


def test_ctrl_c_stops_the_weights():
    from _interrupt import seconds_to_stop

    setup = """
        import numpy as np
        from vastml.embed import reconstruction_weights
        rng = np.random.default_rng(0)
        x = rng.normal(size=(600_000, 30)); lm = rng.normal(size=(8_000, 30))
    """
    assert seconds_to_stop(setup, "reconstruction_weights(x, lm, 10)") < 30


def test_vastml_embed_and_vastml_embed_lll_export_the_same_lll_names():
    import vastml.embed
    import vastml.embed.lll

    lll_names = set(vastml.embed.lll.__all__)
    for name in lll_names:
        assert getattr(vastml.embed, name) is getattr(vastml.embed.lll, name), name
    defined_in_lll = {
        n for n in vastml.embed.__all__
        if getattr(getattr(vastml.embed, n), "__module__", "").startswith("vastml.embed._lll")
    }
    assert defined_in_lll == lll_names
