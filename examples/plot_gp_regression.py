"""
Gaussian process regression on fast kernel sums
================================================

:class:`~vastml.kernels.GaussianProcessRegressor` solves the GP system by conjugate gradients
whose matrix products are Gauss transforms, so it needs :math:`O(N)` memory instead of the
:math:`O(N^2)` of a Cholesky factorisation. Left: a 1-D fit of 5,000 noisy points with its
posterior band (the standard deviation is computed on 40 points and interpolated: it costs one
CG solve each). Right: how the CG residual fell and how the transform's ε was loosened as it did.

The hyper-parameters are fixed (fit them on a subset with scikit-learn if you need to).
"""

import time

import matplotlib.pyplot as plt
import numpy as np

from vastml.kernels import GaussianProcessRegressor

rng = np.random.default_rng(0)
n = 5_000
x = rng.uniform(-4, 4, n)
f = np.sin(2 * x) + 0.3 * x
y = f + 0.4 * rng.normal(size=n)

t0 = time.perf_counter()
gp = GaussianProcessRegressor(length_scale=0.5, signal_variance=1.0, noise_variance=0.16)
gp.fit(x[:, None], y)
grid = np.linspace(-4, 4, 400)
mean = gp.predict(grid[:, None])
coarse = np.linspace(-4, 4, 40)  # the standard deviation costs one CG solve per point
std = np.interp(grid, coarse, gp.predict(coarse[:, None], return_std=True)[1])
seconds = time.perf_counter() - t0

fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
a.plot(x[:2000], y[:2000], ".", ms=1.5, color="0.6", label=f"data (2,000 of {n:,})")
a.plot(grid, np.sin(2 * grid) + 0.3 * grid, "k--", lw=1, label="true function")
a.plot(grid, mean, "C0", lw=1.5, label="posterior mean")
a.fill_between(grid, mean - 2 * std, mean + 2 * std, color="C0", alpha=0.3, label="± 2 std")
a.set_title(f"fit, 400 means, 40 std: {seconds:.1f} s")
a.legend(fontsize=8)
b.semilogy(np.arange(1, len(gp.residuals_) + 1), gp.residuals_, "o-", ms=3, label="CG residual")
b.semilogy(np.arange(1, len(gp.epsilons_) + 1), gp.epsilons_, "s-", ms=3, label="transform ε")
b.set_xlabel("CG iteration")
b.legend()
fig.tight_layout()
plt.show()
