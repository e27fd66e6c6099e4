"""
Kernel density: how the bandwidth rule matters
===============================================

Samples from three of the Marron-Wand test densities (a claw, a skewed and a separated bimodal
density) are estimated by :class:`~vastml.kernels.KernelDensity` with three bandwidth rules.
Scott's and Silverman's rules assume a normal shape and over-smooth everything else; the
Sheather-Jones plug-in bandwidth (:func:`~vastml.kernels.sheather_jones`) adapts to the data.
The dashed line is the true density (:func:`~vastml.datasets.marron_wand_pdf`).
"""

import matplotlib.pyplot as plt
import numpy as np

from vastml.datasets import MARRON_WAND_NAMES, make_marron_wand, marron_wand_pdf
from vastml.kernels import KernelDensity

grid = np.linspace(-3, 3, 600)
fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
for ax, number in zip(axes, [10, 3, 7]):
    x = make_marron_wand(number, n_samples=5_000, random_state=0)
    ax.plot(grid, marron_wand_pdf(number, grid), "k--", lw=1.2, label="true")
    for rule in ("scott", "silverman", "sheather-jones"):
        kde = KernelDensity(bandwidth=rule).fit(np.reshape(x, (-1, 1)))
        density = np.exp(kde.score_samples(grid[:, None]))
        sigma = float(np.ravel(kde.bandwidth_)[0])
        ax.plot(grid, density, lw=1.4, label=f"{rule} (σ = {sigma:.3f})")
    ax.set_title(f"#{number}: {MARRON_WAND_NAMES[number - 1]}")
    ax.legend(fontsize=7)
fig.tight_layout()
plt.show()
