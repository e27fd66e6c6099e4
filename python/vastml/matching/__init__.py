"""Object matching through kernels: :class:`ConvexKernelizedSorting` (soft ``pi_`` and hard
``match_`` assignments) and the original :class:`KernelizedSorting` baseline, with the CKS
objective, gradient and diagonal Hessian for inspection."""

from vastml.matching._cks import (
    ConvexKernelizedSorting,
    KernelizedSorting,
    centred_kernel,
    cks_gradient,
    cks_hessian_diagonal,
    cks_objective,
    sinkhorn,
    smooth_kernel,
)

__all__ = [
    "ConvexKernelizedSorting",
    "KernelizedSorting",
    "centred_kernel",
    "cks_gradient",
    "cks_hessian_diagonal",
    "cks_objective",
    "sinkhorn",
    "smooth_kernel",
]
