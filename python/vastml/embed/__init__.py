"""Nonlinear embeddings at scale (Vladymyrov 2014, chapters 2, 3 and 5).

- :func:`entropic_affinities`, :func:`symmetrize` -- per-point Gaussian widths of a given
  perplexity (bounded Newton / Halley / Euler in log beta, warm-start orders), CSR output.
- :class:`EmbeddingObjective`, :func:`embedding_objective`, :func:`kernel_sums` -- E = E+ +
  lambda E- and its gradient for EE, SNE, symmetric SNE and t-SNE; exact, Barnes-Hut or
  fast-Gauss-transform repulsion.
- :func:`minimize`, :class:`SpectralDirection`, :func:`homotopy` -- spectral direction,
  fixed point, gradient descent, L-BFGS, backtracking line search, the lambda homotopy.
- :class:`TSNE`, :class:`SymmetricSNE`, :class:`ElasticEmbedding` -- scikit-learn estimators
  with out-of-sample ``transform``.
"""

from vastml.embed._affinities import entropic_affinities, knn_sqdist, symmetrize, warm_start_order
from vastml.embed._estimators import TSNE, ElasticEmbedding, SymmetricSNE
from vastml.embed._objectives import EmbeddingObjective, embedding_objective, kernel_sums
from vastml.embed._optim import (
    OptimizeResult,
    SpectralDirection,
    homotopy,
    minimize,
    tsne_gradient_descent,
)

__all__ = [
    "TSNE",
    "ElasticEmbedding",
    "EmbeddingObjective",
    "OptimizeResult",
    "SpectralDirection",
    "SymmetricSNE",
    "embedding_objective",
    "entropic_affinities",
    "homotopy",
    "kernel_sums",
    "knn_sqdist",
    "minimize",
    "symmetrize",
    "tsne_gradient_descent",
    "warm_start_order",
]
