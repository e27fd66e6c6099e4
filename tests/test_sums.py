"""The 1-D Hermite x Gaussian and erfc sums against NumPy / SciPy oracles."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import erfc, eval_hermitenorm

from vastml.kernels import erfc_sum, hermite_gauss_sum


def hermite_direct(x, q, y, r, h1, h2):
    d = y[:, None] - x[None, :]
    return (eval_hermitenorm(r, d / h1) * np.exp(-(d**2) / h2**2)) @ q


@pytest.mark.parametrize("order", range(9))
@pytest.mark.parametrize("h", [0.01, 0.1, 1.0])
def test_hermite_fast_within_epsilon(order, h):
    rng = np.random.default_rng(order)
    x = rng.random(3000)
    q = rng.normal(size=3000)
    y = rng.uniform(-0.2, 1.2, 400)
    for eps in (1e-3, 1e-8):
        got = hermite_gauss_sum(x, y, order, h, weights=q, epsilon=eps, method="fast")
        err = np.abs(got - hermite_direct(x, q, y, order, h, math.sqrt(2) * h)).max() / np.abs(q).sum()
        assert err <= eps


def test_hermite_zero_order_is_the_kde_sum():
    rng = np.random.default_rng(1)
    x, y, h = rng.normal(size=2000), rng.normal(size=50), 0.3
    got = hermite_gauss_sum(x, y, 0, h, epsilon=1e-10)
    want = np.exp(-((y[:, None] - x[None, :]) ** 2) / (2 * h * h)).sum(1)
    np.testing.assert_allclose(got, want, atol=1e-10 * 2000)


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    order=st.integers(0, 8),
    h1=st.floats(0.01, 2.0),
    ratio=st.floats(0.2, 1.9),
    log_eps=st.floats(-11, -2),
)
def test_hermite_contract_property(seed, order, h1, ratio, log_eps):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-3, 3, 200)
    q = rng.normal(size=200)
    y = rng.uniform(-4, 4, 40)
    eps = 10.0**log_eps
    got = hermite_gauss_sum(x, y, order, h1, h1 * ratio, q, eps, "fast")
    assert np.abs(got - hermite_direct(x, q, y, order, h1, h1 * ratio)).max() <= eps * np.abs(q).sum()


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), spread=st.floats(0.01, 40.0), log_eps=st.floats(-13, -1))
def test_erfc_contract_property(seed, spread, log_eps):
    rng = np.random.default_rng(seed)
    x = rng.normal(scale=spread, size=300)
    q = rng.normal(size=300)
    y = rng.normal(scale=1.5 * spread, size=60)
    eps = 10.0**log_eps
    got = erfc_sum(x, y, q, eps, "fast")
    want = erfc(y[:, None] - x[None, :]) @ q
    assert np.abs(got - want).max() <= eps * np.abs(q).sum()


def test_direct_methods_are_exact():
    rng = np.random.default_rng(2)
    x, y, q = rng.normal(size=500), rng.normal(size=30), rng.normal(size=500)
    np.testing.assert_allclose(erfc_sum(x, y, q, method="direct"), erfc(y[:, None] - x) @ q, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        hermite_gauss_sum(x, y, 3, 0.4, 0.5, q, method="direct"),
        hermite_direct(x, q, y, 3, 0.4, 0.5),
        rtol=1e-12,
        atol=1e-10,
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"derivative_order": -1}, "derivative_order"),
        ({"derivative_order": 31}, "derivative_order"),
        ({"h1": 0.0}, "h1"),
        ({"h2": -1.0}, "h2"),
        ({"epsilon": 0.0}, "epsilon"),
        ({"method": "ifgt"}, "method"),
        ({"weights": np.ones(3)}, "weights"),
    ],
)
def test_hermite_bad_input(kwargs, message):
    args = {"sources": np.zeros(5), "targets": np.zeros(2), "derivative_order": 2, "h1": 1.0}
    args.update(kwargs)
    with pytest.raises((ValueError, TypeError), match=message):
        hermite_gauss_sum(**args)


def test_bad_input_names_the_parameter():
    with pytest.raises(ValueError, match="sources"):
        erfc_sum([np.nan, 1.0], [0.0])
    with pytest.raises(ValueError, match="targets"):
        erfc_sum([0.0], np.zeros((2, 2)))
    with pytest.raises(ValueError, match="h2 < 2 h1"):
        hermite_gauss_sum([0.0, 1.0], [0.0], 1, 1.0, 2.5, method="fast")
