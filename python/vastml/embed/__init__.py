"""Nonlinear embeddings at scale (Vladymyrov 2014, chapters 2, 3 and 5).

- :func:`entropic_affinities`, :func:`symmetrize` -- per-point Gaussian widths of a given
  perplexity (bounded Newton / Halley / Euler in log beta, warm-start orders), CSR output.
- :class:`EmbeddingObjective`, :func:`embedding_objective`, :func:`kernel_sums` -- E = E+ +
  lambda E- and its gradient for EE, SNE, symmetric SNE and t-SNE; exact, Barnes-Hut or
  fast-Gauss-transform repulsion.
- :func:`minimize`, :class:`SpectralDirection`, :func:`homotopy` -- spectral direction,
  fixed point, gradient descent, L-BFGS, backtracking line search, the lambda homotopy.
- :class:`SNE`, :class:`TSNE`, :class:`SymmetricSNE`, :class:`ElasticEmbedding` -- scikit-learn estimators
  with out-of-sample ``transform``.
"""

from typing import TYPE_CHECKING

from vastml._lazy import attach

# Public names, imported on first use (see vastml._lazy): `import vastml.embed` stays cheap.
if TYPE_CHECKING:
    from vastml.embed._affinities import entropic_affinities, knn_sqdist, symmetrize, warm_start_order
    from vastml.embed._estimators import SNE, TSNE, ElasticEmbedding, SymmetricSNE
    from vastml.embed._directions import (
        DiagHessianDirection,
        PartialHessianCG,
        diag_hessian,
        embedding_hessian,
    )
    from vastml.embed._objectives import EmbeddingObjective, embedding_objective, kernel_sums
    from vastml.embed._schedules import (
        accuracy_schedule,
        fgt_order_epsilon,
        inexact_error_level,
        inexact_step_error,
    )
    from vastml.embed._optim import (
        OptimizeResult,
        SpectralDirection,
        homotopy,
        minimize,
        tsne_gradient_descent,
    )
    from vastml.embed._lll import LLLEigenmaps, LLLSpectralClustering, kmeans_landmark_warm_start
    from vastml.embed._lll_core import (
        gaussian_knn_affinity,
        laplacian_eigenmaps,
        minmax_landmarks,
        procrustes_error,
        reconstruction_weights,
        reduced_eigenproblem,
        select_landmarks,
    )
    from vastml.embed._lll_kernel import (
        LLLKernelDiscriminantAnalysis,
        LLLKernelPCA,
        kernel_discriminant_analysis,
    )
    from vastml.embed._lll_linear import LLLPCA, LLLDiscriminantAnalysis
    from vastml.embed._lll_refine import refine_eigenmaps
    from vastml.embed._pe_tools import (
        agreement,
        class_f_measure,
        kl_per_object,
        mean_kl,
        posteriors_from_mixture,
        posteriors_from_topics,
        prec_at_h,
        procrustes_distance,
        topic_word_to_word_topic,
    )
    from vastml.embed._parametric import (
        ParametricEmbedding,
        embed_classifier,
        posteriors_from_classifier,
    )

__all__ = [
    "SNE",
    "TSNE",
    "DiagHessianDirection",
    "ElasticEmbedding",
    "EmbeddingObjective",
    "OptimizeResult",
    "SpectralDirection",
    "PartialHessianCG",
    "SymmetricSNE",
    "accuracy_schedule",
    "diag_hessian",
    "embedding_hessian",
    "embedding_objective",
    "entropic_affinities",
    "fgt_order_epsilon",
    "homotopy",
    "inexact_error_level",
    "inexact_step_error",
    "kernel_sums",
    "knn_sqdist",
    "minimize",
    "symmetrize",
    "tsne_gradient_descent",
    "warm_start_order",
]

__all__ += [
    "LLLDiscriminantAnalysis",
    "LLLEigenmaps",
    "LLLKernelDiscriminantAnalysis",
    "LLLKernelPCA",
    "LLLPCA",
    "LLLSpectralClustering",
    "ParametricEmbedding",
    "agreement",
    "class_f_measure",
    "embed_classifier",
    "kl_per_object",
    "mean_kl",
    "posteriors_from_mixture",
    "posteriors_from_topics",
    "prec_at_h",
    "procrustes_distance",
    "topic_word_to_word_topic",
    "gaussian_knn_affinity",
    "kmeans_landmark_warm_start",
    "laplacian_eigenmaps",
    "minmax_landmarks",
    "posteriors_from_classifier",
    "procrustes_error",
    "reconstruction_weights",
    "reduced_eigenproblem",
    "refine_eigenmaps",
    "kernel_discriminant_analysis",
    "select_landmarks",
]

__getattr__, __dir__ = attach(__name__, __file__)
