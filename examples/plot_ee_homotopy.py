"""
The elastic embedding homotopy
===============================

Elastic embedding minimises :math:`E(X) = E^+(X) + \\lambda E^-(X)`: an attraction between
neighbours and a repulsion between all pairs, weighted by :math:`\\lambda`. Minimising directly
at a large :math:`\\lambda` from a random start often ends in a poor local minimum;
:func:`~vastml.embed.homotopy` instead starts at a tiny :math:`\\lambda`, where the problem is
almost quadratic, and follows the minimiser as :math:`\\lambda` grows, each step warm-started
from the last and driven by the spectral direction (the gradient preconditioned by the
attraction's graph Laplacian, factorised once).

The pictures are snapshots of the path on 600 digits.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits

from vastml.embed import EmbeddingObjective, entropic_affinities, homotopy, symmetrize

X, y = load_digits(return_X_y=True)
X, y = X[:600], y[:600]
P, _, _ = entropic_affinities(X, perplexity=20)
W = symmetrize(P, mode="mean")

objective = EmbeddingObjective("ee", W)
X0 = 1e-5 * np.random.default_rng(0).normal(size=(X.shape[0], 2))
lambdas = np.logspace(-3, 1, 16)
Y, info = homotopy(objective, X0, lambdas=lambdas, tol=1e-4, max_iter=100, keep_path=True)
print(f"{info['n_evaluations']} objective evaluations along {len(lambdas)} values of lambda")

show = [3, 7, 11, 15]
fig, axes = plt.subplots(1, len(show) + 1, figsize=(15, 3.4),
                         gridspec_kw={"width_ratios": [1] * len(show) + [1.2]})
for ax, k in zip(axes, show):
    Z = info["path"][k]
    ax.scatter(Z[:, 0], Z[:, 1], c=y, cmap="tab10", s=4)
    ax.set_title(f"λ = {lambdas[k]:.3g}")
    ax.set_xticks([])
    ax.set_yticks([])
axes[-1].semilogx(lambdas, info["n_iter_per_lambda"], "o-")
axes[-1].set_xlabel("λ")
axes[-1].set_ylabel("iterations")
axes[-1].set_title("work per λ")
fig.tight_layout()
plt.show()
