"""Object matching through kernels: :class:`ConvexKernelizedSorting` (soft ``pi_`` and hard
``match_`` assignments) and the original :class:`KernelizedSorting` baseline, with the CKS
objective, gradient and diagonal Hessian for inspection."""

from typing import TYPE_CHECKING

from vastml._lazy import attach

# Public names, imported on first use (see vastml._lazy): `import vastml.matching` stays cheap.
if TYPE_CHECKING:
    from vastml.matching._cks import (
        ConvexKernelizedSorting,
        KernelizedSorting,
        centred_kernel,
        cks_gradient,
        cks_hessian_diagonal,
        cks_objective,
    )

__all__ = [
    "ConvexKernelizedSorting",
    "KernelizedSorting",
    "centred_kernel",
    "cks_gradient",
    "cks_hessian_diagonal",
    "cks_objective",
]

__getattr__, __dir__ = attach(__name__, __file__)
