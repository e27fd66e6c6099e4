"""
Locally Linear Landmarks against exact Laplacian eigenmaps
===========================================================

Laplacian eigenmaps need the bottom eigenvectors of an N × N graph Laplacian.
:class:`~vastml.embed.LLLEigenmaps` reconstructs every point from a few nearby landmarks and
solves an L × L problem instead. With more landmarks the embedding approaches the exact one
(:func:`~vastml.embed.laplacian_eigenmaps`); ``refine=1`` adds one smoothing step on the full
graph, which removes most of the remaining interpolation error. The error is the Procrustes
error against the exact embedding (:func:`~vastml.embed.procrustes_error`).

The data are 6,000 points on a rolled-up rectangle (a short, tall swiss roll, so that the first
two eigenvectors unroll its two sides), coloured by the position along the roll.
"""

import time

import matplotlib.pyplot as plt
import numpy as np

from vastml.embed import LLLEigenmaps, gaussian_knn_affinity, laplacian_eigenmaps, procrustes_error

rng = np.random.default_rng(0)
t = rng.uniform(1.5 * np.pi, 3 * np.pi, 6_000)  # position along the roll
height = rng.uniform(0, 25, 6_000)
X = np.column_stack([t * np.cos(t), height, t * np.sin(t)])
n_neighbors, bandwidth = 10, 1.5

t0 = time.perf_counter()
W = gaussian_knn_affinity(X, n_neighbors=n_neighbors, bandwidth=bandwidth)
_, exact = laplacian_eigenmaps(W, 2, random_state=0)
t_exact = time.perf_counter() - t0

runs = []
for L, refine in [(25, 0), (100, 0), (100, 1)]:
    t0 = time.perf_counter()
    lll = LLLEigenmaps(n_components=2, n_landmarks=L, n_neighbors=n_neighbors,
                       bandwidth=bandwidth, refine=refine, random_state=0).fit(X)
    runs.append((L, refine, lll, time.perf_counter() - t0))

fig, axes = plt.subplots(1, 4, figsize=(14, 3.5))
axes[0].scatter(exact[:, 0], exact[:, 1], c=t, cmap="viridis", s=2)
axes[0].set_title(f"exact ({t_exact:.1f} s)")
for ax, (L, refine, lll, seconds) in zip(axes[1:], runs):
    E = lll.embedding_
    err = procrustes_error(E, exact)
    ax.scatter(E[:, 0], E[:, 1], c=t, cmap="viridis", s=2)
    extra = " + refine" if refine else ""
    ax.set_title(f"LLL, {L} landmarks{extra}\nerror {err:.3f} ({seconds:.1f} s)")
for ax in axes:
    ax.set_xticks([])
    ax.set_yticks([])
fig.tight_layout()
plt.show()
