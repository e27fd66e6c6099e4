"""Finite input never gives NaN or inf: huge data is refused by name, degenerate data and
absurd parameters get a finite answer or a clear error.

Data whose magnitude exceeds ``vastml._validation.MAX_MAGNITUDE`` (1e150) is refused with a
ValueError naming the parameter (squares of such values overflow float64). Below it, the
scale-equivariant functions give the scaled answer: the oracle is the same call at scale 1.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from vastml import embed, kernels, matching, reorder, svm
from vastml._validation import MAX_MAGNITUDE, as_points, as_square_matrix, check_finite_data

RNG = np.random.default_rng(0)
X = RNG.normal(size=(40, 2))
Y = RNG.normal(size=(40, 2))
X1 = RNG.normal(size=60)
_P = np.abs(RNG.normal(size=(40, 40)))
_P = _P + _P.T
np.fill_diagonal(_P, 0)
P = _P / _P.sum()
PERM = RNG.permutation(40)
OBJ = embed.EmbeddingObjective("tsne", P)
KDE = kernels.KernelDensity(bandwidth=0.5).fit(X)


# --- the validation helper ------------------------------------------------------------------


def test_check_finite_data_refuses_by_name_and_keeps_the_nan_message():
    check_finite_data(np.array([MAX_MAGNITUDE, -MAX_MAGNITUDE, 0.0]), "X")  # the limit itself
    check_finite_data(np.empty((0, 3)), "X")
    with pytest.raises(ValueError, match=r"`X` holds values as large as 2e\+150 .*standardise"):
        check_finite_data(np.array([[1.0, -2e150]]), "X")
    for bad in (np.nan, np.inf, -np.inf):
        with pytest.raises(ValueError, match="`W` contains NaN or infinite values"):
            check_finite_data(np.array([1e300, bad]), "W")


def test_as_points_and_square_matrices_refuse_huge_values_unless_scale_free():
    with pytest.raises(ValueError, match="`Z` holds values as large as 2.33e\\+300"):
        as_points(X * 1e300, "Z")
    with pytest.raises(ValueError, match="`K` holds values"):
        as_square_matrix(P * 1e300, "K")
    np.testing.assert_array_equal(as_points(X * 1e300, "Z", scale_free=True), X * 1e300)
    with pytest.raises(ValueError, match="NaN or infinite"):
        as_points([[np.nan]], "Z", scale_free=True)
    # tsp_path rescales itself: huge coordinates keep their path
    np.testing.assert_array_equal(reorder.tsp_path(X * 1e300), reorder.tsp_path(X))


# --- the calls that once returned NaN or inf from finite data scaled by 1e300 ---------------

# (id, call at scale s, the parameter the error must name)
HUGE = [
    ("diag_hessian", lambda s: embed.diag_hessian(OBJ, X * s), "X"),
    ("embedding_hessian", lambda s: embed.embedding_hessian(OBJ, X * s), "X"),
    ("embedding_objective", lambda s: embed.embedding_objective("tsne", X * s, P)[0], "X"),
    ("procrustes A", lambda s: embed.procrustes_distance(X * s, Y * s / 2), "A"),
    ("procrustes B", lambda s: embed.procrustes_distance(X, Y * s), "B"),
    ("kde score", lambda s: KDE.score(X * s), "X"),
    ("kde score_samples", lambda s: KDE.score_samples(X * s), "X"),
    (
        "density_derivative data",
        lambda s: kernels.density_derivative(X1 * s, X1[:10], 2, bandwidth=0.5),
        "data",
    ),
    (
        "density_derivative at",
        lambda s: kernels.density_derivative(X1, X1[:10] * s, 2, bandwidth=0.5),
        "at",
    ),
    ("hermite sources", lambda s: kernels.hermite_gauss_sum(X1 * s, X1[:10], 2, 0.5), "sources"),
    ("hermite targets", lambda s: kernels.hermite_gauss_sum(X1, X1[:10] * s, 2, 0.5), "targets"),
    ("scott", lambda s: kernels.scott_bandwidth(X * s), "X"),
    ("silverman", lambda s: kernels.silverman_bandwidth(X * s), "X"),
    ("robust_scale", lambda s: kernels.robust_scale(X1 * s), "x"),
    ("centred_kernel", lambda s: matching.centred_kernel(X * s), "X"),
    ("lsmi kernel_x", lambda s: matching.lsmi(P * 40 * s, P * 40, PERM)[0], "kernel_x"),
    ("lsmi kernel_y", lambda s: matching.lsmi(P * 40, P * 40 * s, PERM)[0], "kernel_y"),
    ("dpc_sigma", lambda s: reorder.dpc_sigma(X * s, PERM), "X"),
    ("dpc_entropy", lambda s: reorder.dpc_entropy(X * s, PERM), "X"),
    ("path_length", lambda s: reorder.path_length(X * s, PERM), "X"),
]


@pytest.mark.parametrize("call, name", [h[1:] for h in HUGE], ids=[h[0] for h in HUGE])
def test_huge_data_is_refused_by_name(call, name):
    assert np.isfinite(call(1.0)).all()
    with pytest.raises(ValueError, match=f"`{name}` holds values as large as .*standardise"):
        call(1e300)


# scale-equivariant results (both procrustes inputs scaled in "procrustes A")
EQUIVARIANT = ["procrustes A", "scott", "silverman", "robust_scale", "dpc_sigma", "path_length"]


@pytest.mark.parametrize("case", EQUIVARIANT)
def test_at_the_largest_accepted_scale_the_answer_is_scaled(case):
    # oracle: the call at scale 1, times the scale
    call = {h[0]: h[1] for h in HUGE}[case]
    s = MAX_MAGNITUDE / np.abs(X).max() / 4  # every input within the limit
    np.testing.assert_allclose(call(s), s * np.asarray(call(1.0)), rtol=1e-9)


def test_tsne_descent_of_zero_iterations_reports_the_start_objective():
    for fused in (True, False):
        for exaggeration in (1.0, 4.0):
            kw = {"momentum": 0.5, "fused": fused, "exaggeration": exaggeration}
            X0, _, E0, done = embed.tsne_gradient_descent(
                OBJ, X, max_iter=0, learning_rate=1.0, **kw
            )
            # oracle: one iteration with a vanishing step reports the objective of the start
            _, _, E1, _ = embed.tsne_gradient_descent(
                OBJ, X, max_iter=1, learning_rate=1e-300, **kw
            )
            assert done == 0 and np.isfinite(E0)
            np.testing.assert_array_equal(X0, X)
            assert E0 == pytest.approx(E1, rel=1e-12)
    assert OBJ.attraction_scale == 1.0


@pytest.mark.parametrize(
    "data, rank_one",
    [
        (np.ones((50, 4)), False),
        (np.repeat(RNG.normal(size=(1, 4)), 50, axis=0), False),
        (np.c_[X1[:50], np.zeros((50, 3))], True),
    ],
    ids=["constant", "duplicates", "rank_one"],
)
def test_lllpca_components_stay_orthonormal_on_degenerate_data(data, rank_one):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = embed.LLLPCA(n_components=2, n_landmarks=20, random_state=0).fit(data)
    M = p.components_
    assert np.isfinite(M).all() and np.isfinite(p.explained_variance_).all()
    np.testing.assert_allclose(M @ M.T, np.eye(2), atol=1e-12)
    if rank_one:
        # the one direction of variance comes first
        assert abs(M[0, 0]) == pytest.approx(1.0)
    assert np.isfinite(p.transform(data)).all()


@pytest.mark.parametrize("cls", [svm.PegasosClassifier, svm.AMMClassifier])
def test_svm_bias_feature_is_bounded(cls):
    y = (X[:, 0] > 0).astype(int)
    with pytest.raises(ValueError, match="`bias`"):
        cls(bias=1e300).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = cls(bias=MAX_MAGNITUDE, random_state=0).fit(X, y)
    assert np.isfinite(m.decision_function(X)).all()


def test_convex_kernelized_sorting_refuses_a_penalty_that_swamps_the_kernels():
    Yp = X[PERM]
    with pytest.raises(ValueError, match="`l2_penalty_marginals`"):
        matching.ConvexKernelizedSorting(l2_penalty_marginals=1e300).fit(X, Yp)
    # at the bound the solver still recovers the permutation (y_i = x_PERM[i])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        top = matching.ConvexKernelizedSorting(
            l2_penalty_marginals=matching._cks.MAX_L2_PENALTY_MARGINALS
        ).fit(X, Yp)
    assert np.isfinite(top.objective_)
    np.testing.assert_array_equal(top.match_, PERM)


def test_multi_start_matchings_draw_their_starts_lazily():
    from vastml.matching._baselines import _random_starts, _run_starts

    rng = np.random.default_rng(3)
    eager = [rng.permutation(7) for _ in range(5)]
    first = np.arange(7)[::-1]
    lazy = list(_random_starts(np.random.default_rng(3), 7, 5, first))
    np.testing.assert_array_equal(lazy[0], first)
    for a, b in zip(lazy[1:], eager[1:]):
        np.testing.assert_array_equal(a, b)
    # an absurd number of starts costs nothing before it is consumed
    starts = _random_starts(np.random.default_rng(3), 7, 2**62)
    assert next(starts).shape == (7,)
    # batches keep the order of the starts
    out = _run_starts(lambda s: (float(s[0]), s), iter(eager * 30), 2, 150)
    assert [o[0] for o in out] == [float(s[0]) for s in eager * 30]


@pytest.mark.parametrize("hessian", [embed.diag_hessian, embed.embedding_hessian])
def test_hessians_check_the_number_of_points(hessian):
    # one row against 40 points' weights once broadcast into a NaN Hessian
    with pytest.raises(ValueError, match="`X` has 1 points but the objective's weights have 40"):
        hessian(OBJ, X[:1])
