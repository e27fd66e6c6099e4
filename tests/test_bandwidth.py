"""Bandwidth selection: fast Sheather-Jones against the exact O(N^2) path, rules of thumb."""

import math
import shutil
import subprocess

import numpy as np
import pytest
from scipy.integrate import quad

from vastml.datasets import make_marron_wand, marron_wand_pdf
from vastml.kernels import (
    density_derivative,
    density_functional,
    normal_reference_functional,
    robust_scale,
    rule_of_thumb,
    scott_bandwidth,
    sheather_jones,
    silverman_bandwidth,
)
from vastml import _core
from vastml.kernels._bandwidth import (
    _BinnedPairs,
    _Pyramid,
    _dense_span,
    _hermite_gauss,
    _percentiles,
    _r_zeroin,
)


@pytest.mark.parametrize("number", range(1, 16))
def test_fast_sheather_jones_equals_exact_on_marron_wand(number):
    x = make_marron_wand(number, 2000, random_state=number)
    fast = sheather_jones(x, epsilon=1e-3, method="fast")
    exact = sheather_jones(x, method="direct")
    assert abs(fast - exact) / exact <= 1e-4


@pytest.mark.parametrize("number", range(1, 16))
def test_marron_wand_densities_are_normalised_and_sampled(number):
    total, _ = quad(lambda t: marron_wand_pdf(number, t), -8, 8, limit=400, points=[0.0])
    assert abs(total - 1) < 1e-6
    x = make_marron_wand(number, 20000, random_state=0)
    # The sample's histogram follows the density.
    hist, edges = np.histogram(x, bins=40, range=(-3, 3))
    centres = 0.5 * (edges[1:] + edges[:-1])
    expected = marron_wand_pdf(number, centres) * 20000 * (edges[1] - edges[0])
    assert np.abs(hist - expected).max() < 6 * np.sqrt(expected.max()) + 30


def test_sarcos_rule_of_thumb_column():
    # Table 5.1 of the thesis: N = 44,484, common sigma = 0.198555.
    table = [0.024730, 0.033357, 0.041688, 0.049527, 0.056808, 0.063527, 0.069711, 0.075400, 0.080637, 0.085465]
    for d, h in enumerate(table, start=1):
        assert float(rule_of_thumb(44484, d, 0.198555)) == pytest.approx(h, rel=5e-5)


def test_normal_sample_bandwidth_and_functionals():
    x = np.random.default_rng(0).normal(size=20000)
    h, details = sheather_jones(x, return_details=True)
    assert abs(h - (4 / (3 * 20000)) ** 0.2) / h < 0.1
    # At the bias-cancelling pilot bandwidths the functionals approach their true values.
    phi4, phi6 = details["phi4_g1"], details["phi6_g2"]
    assert phi4 == pytest.approx(density_functional(x, 4, details["g1"], epsilon=1e-10), rel=1e-3)
    assert phi4 == pytest.approx(3 / (8 * math.sqrt(math.pi)), rel=0.15)
    assert phi6 == pytest.approx(-15 / (16 * math.sqrt(math.pi)), rel=0.25)


@pytest.mark.parametrize("order", [0, 2, 4, 6, 8])
def test_normal_reference_functional_matches_integration(order):
    sigma = 0.7

    def pdf(t):
        return math.exp(-t * t / (2 * sigma * sigma)) / (sigma * math.sqrt(2 * math.pi))

    def deriv(t):
        # p^(r)(t) = (-1)^r He_r(t/sigma) p(t) / sigma^r
        from scipy.special import eval_hermitenorm

        return (-1) ** order * eval_hermitenorm(order, t / sigma) * pdf(t) / sigma**order

    val, _ = quad(lambda t: deriv(t) * pdf(t), -12, 12)
    assert normal_reference_functional(order, sigma) == pytest.approx(val, rel=1e-8)


def test_density_derivative_matches_finite_differences():
    x = np.random.default_rng(3).normal(size=3000)
    at = np.linspace(-2, 2, 9)
    h, delta = 0.25, 1e-4
    for r in range(4):
        up = density_derivative(x, at + delta, r, h, epsilon=1e-12)
        down = density_derivative(x, at - delta, r, h, epsilon=1e-12)
        fd = (up - down) / (2 * delta)
        np.testing.assert_allclose(density_derivative(x, at, r + 1, h, epsilon=1e-12), fd, atol=1e-5 * 4**r)


def test_rules_of_thumb_per_feature():
    X = np.random.default_rng(0).normal(size=(5000, 2)) * [1.0, 3.0]
    s, v = scott_bandwidth(X), silverman_bandwidth(X)
    assert s[1] / s[0] == pytest.approx(X[:, 1].std(ddof=1) / X[:, 0].std(ddof=1))
    assert v[0] == pytest.approx((4 / 4) ** (1 / 6) * 5000 ** (-1 / 6) * X[:, 0].std(ddof=1))


def test_bad_input():
    with pytest.raises(ValueError, match="zero variance"):
        sheather_jones(np.ones(10))
    with pytest.raises(ValueError, match="at least 3"):
        sheather_jones([1.0, 2.0])
    with pytest.raises(ValueError, match="data"):
        sheather_jones([1.0, np.nan, 2.0, 3.0])
    with pytest.raises(ValueError, match="method"):
        sheather_jones(np.arange(10.0), method="slow")
    with pytest.raises(ValueError, match="even"):
        normal_reference_functional(3, 1.0)


def test_robust_scale_keeps_a_far_outlier_from_moving_the_bandwidth():
    x = np.random.default_rng(0).normal(size=2000)
    h = sheather_jones(x)
    with_outlier = sheather_jones(np.r_[x, 1e6])
    assert abs(with_outlier - h) / h < 0.01
    assert robust_scale(np.r_[x, 1e6]) == pytest.approx(robust_scale(x), rel=0.01)


@pytest.mark.parametrize("factor", [1e-40, 1e40, 1e-300, 1e300])
def test_extreme_scales_are_standardised(factor):
    x = np.random.default_rng(1).normal(size=3000)
    h = sheather_jones(x)
    assert sheather_jones(x * factor) / factor == pytest.approx(h, rel=1e-9)
    assert sheather_jones(x * factor + 5 * factor) / factor == pytest.approx(h, rel=1e-6)


@pytest.mark.parametrize("number", range(1, 16))
def test_binned_sheather_jones_equals_exact_on_marron_wand(number):
    x = make_marron_wand(number, 3000, random_state=number)
    binned = sheather_jones(x, method="binned")
    exact = sheather_jones(x, method="direct")
    assert abs(binned - exact) / exact <= 1e-4


@pytest.mark.parametrize("sample", ["t2", "t3", "lognormal", "outlier"])
def test_binned_sheather_jones_on_heavy_tails(sample):
    rng = np.random.default_rng(7)
    x = {
        "t2": lambda: rng.standard_t(2, 4000),
        "t3": lambda: rng.standard_t(3, 4000),
        "lognormal": lambda: rng.lognormal(size=4000),
        "outlier": lambda: np.r_[rng.normal(size=3999), 1e5],
    }[sample]()
    binned, details = sheather_jones(x, method="binned", return_details=True)
    assert details["grid_spacing"] > 0
    exact = sheather_jones(x, method="direct")
    assert abs(binned - exact) / exact <= 1e-4


def test_r_zeroin_is_brent_with_r_tolerance():
    f = lambda h: math.cos(h) - h  # noqa: E731
    root = 0.7390851332151607
    for tol in (1e-2, 1e-6, 1e-12):
        got = _r_zeroin(f, 0.0, 1.0, f(0.0), f(1.0), tol)
        assert abs(got - root) <= tol


def test_r_convention_differs_from_the_thesis_only_by_its_documented_choices():
    x = make_marron_wand(3, 3000, random_state=0)
    thesis = sheather_jones(x, method="direct")
    r = sheather_jones(x, method="direct", convention="R")
    # R's rounded constants and its loose root (tolerance 0.1 * lower) move h by at most ~2%
    assert 0 < abs(r - thesis) / thesis < 0.03
    with pytest.raises(ValueError, match="convention"):
        sheather_jones(x, convention="S")


@pytest.mark.skipif(shutil.which("Rscript") is None, reason="R (Rscript) is not installed")
@pytest.mark.parametrize("number", [1, 2, 6, 10])
def test_r_convention_matches_r_bw_sj_with_many_bins(number, tmp_path):
    x = make_marron_wand(number, 1500, random_state=number)
    path = tmp_path / "x.txt"
    np.savetxt(path, x, fmt="%.17g")
    out = subprocess.run(
        ["Rscript", "-e", f"x <- scan('{path}', quiet=TRUE); cat(sprintf('%.17g', bw.SJ(x, nb=400000L)))"],
        capture_output=True, text=True, check=True,
    ).stdout
    h_r = float(out.strip().split()[-1])
    h = sheather_jones(x, method="direct", convention="R")
    assert abs(h - h_r) / h_r <= 1e-4


@pytest.mark.parametrize("n", [3, 4, 5, 1000, 40_000, 300_001])
def test_order_statistics_equal_sorting(n):
    rng = np.random.default_rng(n)
    samples = {
        "normal": rng.normal(size=n),
        "t1": rng.standard_t(1, n),  # most values in one bin of the full range
        "ties": np.floor(rng.uniform(0, 5, n)),
        "sorted": np.sort(rng.uniform(size=n)),
        "outlier": np.r_[rng.normal(size=n - 1), 1e300],
    }
    for name, x in samples.items():
        ranks = sorted({0, n // 4, n // 4 + 1, n // 2, n - 1 - n // 4, n - 1} & set(range(n)))
        want = np.sort(x)[ranks]
        assert _core.order_statistics(x, ranks) == list(want), name
        # the selector's quartiles are np.percentile's to the last bit
        assert _percentiles(x, (25.0, 50.0, 75.0)) == list(np.percentile(x, [25.0, 50.0, 75.0])), name


def test_linear_binning_equals_bincount():
    x = np.random.default_rng(3).normal(size=50_000) * 3.0
    lo, spacing, nodes = -4.0, 0.01, 801
    weights, out = _core.linear_binning(x, (1.0, 0.5), (lo, spacing, nodes))
    z = (x - 1.0) * 0.5
    inside = (z >= lo) & (z <= lo + (nodes - 1) * spacing)
    t = (z[inside] - lo) / spacing
    k = np.minimum(np.floor(t).astype(int), nodes - 2)
    want = np.bincount(k, 1.0 - (t - k), nodes) + np.bincount(k + 1, t - k, nodes)
    np.testing.assert_allclose(weights, want, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(out, z[~inside])


def test_autocorrelation_of_sparse_tails_equals_the_direct_one():
    # a dense middle and sparse tails: the FFT covers only the middle, the tails' pairs are
    # summed directly; both together must be the whole autocorrelation
    rng = np.random.default_rng(5)
    w = np.zeros(60_000)
    w[25_000:31_000] = rng.uniform(size=6_000)
    tails = np.r_[rng.integers(0, 25_000, 150), rng.integers(31_000, 60_000, 150)]
    w[tails] = rng.uniform(size=tails.size)
    lags = 700
    lo, hi = _dense_span(w, lags)
    assert 0 < lo and hi < len(w)  # the split is used here
    got = _BinnedPairs(1.0, w, 0.0, len(w) - 1.0, None).autocorrelation(lags // 2)[: lags + 1]
    want = np.array([w[: len(w) - k] @ w[k:] for k in range(lags + 1)])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9 * want[0])


@pytest.mark.parametrize("n", [1_000, 200_000])
def test_pyramid_levels_binned_or_coarsened_are_one_binning(n):
    # a level made by binning the data directly and the same level coarsened from a finer
    # one hold the same weights; every level ends on the same node (so the points beyond
    # the interval pair with the grid's end at every level) and shares those points
    z = np.random.default_rng(n).standard_t(2, n)
    window = (-20.0, 20.0)
    direct, chain = _Pyramid(z, 0.01, window), _Pyramid(z, 0.01, window)
    chain.level(0)
    for j in range(chain.depth + 1):
        a, b = direct._bin(j) if j not in direct.levels else direct.levels[j], chain.level(j)
        np.testing.assert_allclose(a.weights, b.weights, rtol=0, atol=1e-9)
        assert a.spacing == b.spacing and a.last == b.last == direct.last
        assert math.isclose(direct.last, a.lo + (len(a.weights) - 1) * a.spacing, rel_tol=1e-12)
        np.testing.assert_array_equal(a.out.points, b.out.points)
    assert direct.last >= 20.0
    assert direct.out is not None
    assert direct.out.points.size == np.count_nonzero((z < -20.0) | (z > direct.last))



@pytest.mark.parametrize("order", range(9))
def test_hermite_gauss_equals_hermeval(order):
    u = np.linspace(-13.0, 13.0, 1001)
    unit = np.zeros(order + 1)
    unit[order] = 1.0
    want = np.polynomial.hermite_e.hermeval(u, unit) * np.exp(-0.5 * u * u)
    np.testing.assert_allclose(_hermite_gauss(u, order), want, rtol=1e-12, atol=1e-13)
