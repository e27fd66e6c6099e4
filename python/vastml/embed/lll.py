"""Locally Linear Landmarks (Vladymyrov & Carreira-Perpinan 2013): ``vastml.embed.lll``."""

from vastml.embed._lll import (
    LLLDiscriminantAnalysis,
    LLLEigenmaps,
    LLLKernelPCA,
    LLLPCA,
    LLLSpectralClustering,
    kmeans_landmark_warm_start,
)
from vastml.embed._lll_core import (
    gaussian_knn_affinity,
    laplacian_eigenmaps,
    procrustes_error,
    reconstruction_weights,
    reduced_eigenproblem,
    select_landmarks,
)

__all__ = [
    "LLLDiscriminantAnalysis",
    "LLLEigenmaps",
    "LLLKernelPCA",
    "LLLPCA",
    "LLLSpectralClustering",
    "gaussian_knn_affinity",
    "kmeans_landmark_warm_start",
    "laplacian_eigenmaps",
    "procrustes_error",
    "reconstruction_weights",
    "reduced_eigenproblem",
    "select_landmarks",
]
