"""Locally Linear Landmarks (Vladymyrov & Carreira-Perpinan 2013): ``vastml.embed.lll``."""

from vastml.embed._lll import (
    LLLDiscriminantAnalysis,
    LLLEigenmaps,
    LLLKernelDiscriminantAnalysis,
    LLLKernelPCA,
    LLLPCA,
    LLLSpectralClustering,
    kernel_discriminant_analysis,
    kmeans_landmark_warm_start,
)
from vastml.embed._lll_core import (
    gaussian_knn_affinity,
    laplacian_eigenmaps,
    procrustes_error,
    reconstruction_weights,
    reduced_eigenproblem,
    refine_eigenmaps,
    select_landmarks,
)

__all__ = [
    "LLLDiscriminantAnalysis",
    "LLLEigenmaps",
    "LLLKernelDiscriminantAnalysis",
    "LLLKernelPCA",
    "LLLPCA",
    "LLLSpectralClustering",
    "gaussian_knn_affinity",
    "kernel_discriminant_analysis",
    "kmeans_landmark_warm_start",
    "laplacian_eigenmaps",
    "procrustes_error",
    "reconstruction_weights",
    "reduced_eigenproblem",
    "refine_eigenmaps",
    "select_landmarks",
]
