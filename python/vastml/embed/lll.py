"""Locally Linear Landmarks (Vladymyrov & Carreira-Perpinan 2013): an alias.

``vastml.embed.lll`` holds exactly the Locally Linear Landmarks names of :mod:`vastml.embed`
(the same objects); import them from either.
"""

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

__all__ = [
    "LLLPCA",
    "LLLDiscriminantAnalysis",
    "LLLEigenmaps",
    "LLLKernelDiscriminantAnalysis",
    "LLLKernelPCA",
    "LLLSpectralClustering",
    "gaussian_knn_affinity",
    "kernel_discriminant_analysis",
    "kmeans_landmark_warm_start",
    "laplacian_eigenmaps",
    "minmax_landmarks",
    "procrustes_error",
    "reconstruction_weights",
    "reduced_eigenproblem",
    "refine_eigenmaps",
    "select_landmarks",
]
