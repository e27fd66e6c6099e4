"""
t-SNE, symmetric SNE and elastic embedding of the digits
=========================================================

Three objectives on the same entropic affinities (perplexity 30) of 800 handwritten digits:
:class:`~vastml.embed.TSNE` (heavy-tailed similarities: well separated clusters),
:class:`~vastml.embed.SymmetricSNE` (Gaussian similarities: crowded clusters) and
:class:`~vastml.embed.ElasticEmbedding` (attraction of neighbours against a uniform repulsion of
all pairs, followed along a homotopy over the repulsion weight).
"""

import time

import matplotlib.pyplot as plt
from sklearn.datasets import load_digits

from vastml.embed import TSNE, ElasticEmbedding, SymmetricSNE

X, y = load_digits(return_X_y=True)
X, y = X[:800], y[:800]

models = {
    "t-SNE": TSNE(random_state=0, max_iter=500),
    "symmetric SNE": SymmetricSNE(random_state=0, max_iter=100, tol=1e-4),
    "elastic embedding": ElasticEmbedding(random_state=0, n_lambdas=12, tol=1e-4, max_iter=100),
}
fig, axes = plt.subplots(1, 3, figsize=(12, 4.2))
for ax, (name, model) in zip(axes, models.items()):
    t0 = time.perf_counter()
    Y = model.fit_transform(X)
    seconds = time.perf_counter() - t0
    ax.scatter(Y[:, 0], Y[:, 1], c=y, cmap="tab10", s=4)
    ax.set_title(f"{name} ({seconds:.1f} s)")
    ax.set_xticks([])
    ax.set_yticks([])
fig.tight_layout()
plt.show()
