"""GP regression by CG on fast sums against an exact Cholesky solve; implicit surfaces."""

import pickle

import numpy as np
import pytest
from scipy.linalg import cho_factor, cho_solve

from vastml.datasets import make_robot_arm
from vastml.kernels import GaussianProcessRegressor, conjugate_gradient, fit_implicit_surface


def rbf(A, B, ls, sf2=1.0):
    return sf2 * np.exp(-0.5 * (((A[:, None, :] - B[None, :, :]) / ls) ** 2).sum(-1))


@pytest.fixture(scope="module")
def problem():
    X, y = make_robot_arm(1000, random_state=0)
    Xt, _ = make_robot_arm(300, random_state=1)
    ls, sf2, noise = np.array([0.6, 0.9]), 2.0, 0.1
    K = rbf(X, X, ls, sf2) + noise * np.eye(len(X))
    ym = y.mean()
    xi = cho_solve(cho_factor(K), y - ym)
    Ks = rbf(Xt, X, ls, sf2)
    mean = Ks @ xi + ym
    var = sf2 - np.sum(Ks * cho_solve(cho_factor(K), Ks.T).T, axis=1)
    return X, y, Xt, ls, sf2, noise, xi, mean, np.sqrt(var)


def test_predictions_equal_cholesky(problem):
    X, y, Xt, ls, sf2, noise, xi, mean, std = problem
    gp = GaussianProcessRegressor(length_scale=ls, signal_variance=sf2, noise_variance=noise, tol=1e-7).fit(X, y)
    m, s = gp.predict(Xt, return_std=True)
    scale = np.abs(mean).max()
    assert np.abs(m - mean).max() <= 1e-4 * scale
    assert np.abs(s - std).max() <= 1e-4 * np.sqrt(sf2)
    assert np.abs(gp.dual_coef_ - xi).max() <= 1e-4 * np.abs(xi).max()


def test_thesis_tolerances_meet_residual_and_schedule(problem):
    X, y, _, ls, sf2, noise, _, _, _ = problem
    gp = GaussianProcessRegressor(length_scale=ls, signal_variance=sf2, noise_variance=noise, tol=1e-3, delta=1e-3)
    gp.fit(X, y)
    K = rbf(X, X, ls, sf2) + noise * np.eye(len(X))
    yc = y - y.mean()
    true_residual = np.linalg.norm(yc - K @ gp.dual_coef_) / np.linalg.norm(yc)
    assert true_residual <= 2e-3  # eta + delta
    # The accuracy loosens as the residual falls.
    eps, res = np.array(gp.epsilons_), np.array(gp.residuals_)
    assert eps[-1] > 10 * eps[0]
    falling = np.diff(res[:-1]) < 0
    assert np.all(np.diff(eps[1:])[falling] >= -1e-18)


def test_conjugate_gradient_solves_a_dense_system():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(50, 50))
    A = A @ A.T + 50 * np.eye(50)
    b = rng.normal(size=(50, 3))
    x, k, res, eps = conjugate_gradient(lambda v, e: A @ v, b, 1e-10, 1e-10, 50, 500)
    np.testing.assert_allclose(A @ x, b, atol=1e-8)
    assert k == len(res) == len(eps)


def test_callback_pickle_and_bad_input(problem):
    X, y, Xt, ls, sf2, noise, *_ = problem
    seen = []
    gp = GaussianProcessRegressor(length_scale=ls, callback=lambda k, r: seen.append((k, r))).fit(X, y)
    assert len(seen) == gp.n_iter_ and seen[-1][1] <= 1e-3
    gp.callback = None  # a lambda does not pickle; the fitted state does
    again = pickle.loads(pickle.dumps(gp))
    np.testing.assert_array_equal(again.predict(Xt[:5]), gp.predict(Xt[:5]))
    for params, msg in [
        ({"noise_variance": 0.0}, "noise_variance"),
        ({"length_scale": [1.0, 2.0, 3.0]}, "length_scale"),
        ({"tol": 0.0}, "tol"),
        ({"method": "fft"}, "method"),
        ({"max_iter": 0}, "max_iter"),
    ]:
        with pytest.raises(ValueError, match=msg):
            GaussianProcessRegressor(**params).fit(X, y)
    with pytest.raises(ValueError):
        GaussianProcessRegressor().fit(X, y[:-1])


def test_implicit_sphere():
    rng = np.random.default_rng(0)
    p = rng.normal(size=(600, 3))
    p /= np.linalg.norm(p, axis=1, keepdims=True)
    s = fit_implicit_surface(p, 2 * p, grid_size=20)
    assert s.values.shape == (20, 20, 20)
    # Field is negative inside, about zero on, positive outside the unit sphere.
    r = np.linalg.norm(np.stack(np.meshgrid(*s.axes, indexing="ij"), -1), axis=-1)
    assert np.all(s.values[(r > 0.6) & (r < 0.85)] < 0)
    assert np.all(s.values[(r > 1.12) & (r < 1.2)] > 0)
    q = rng.normal(size=(50, 3))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    assert np.abs(s.model.predict(q)).max() < 0.02
    assert s.spacing[0] == pytest.approx(s.axes[0][1] - s.axes[0][0])
    with pytest.raises(ValueError, match="normals"):
        fit_implicit_surface(p, np.zeros_like(p))
