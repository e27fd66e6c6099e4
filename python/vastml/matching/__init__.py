"""Object matching through kernels: :class:`ConvexKernelizedSorting` (soft ``pi_`` and hard
``match_`` assignments) and the baselines :class:`KernelizedSorting` (KS, KS-p, PCA start) and
:class:`LeastSquaresObjectMatching` (LSOM), with the CKS
objective, gradient and diagonal Hessian for inspection."""

from typing import TYPE_CHECKING

from vastml._lazy import attach

# Public names, imported on first use (see vastml._lazy): `import vastml.matching` stays cheap.
if TYPE_CHECKING:
    from vastml.matching._baselines import (
        KernelizedSorting,
        LeastSquaresObjectMatching,
        lsmi,
        smooth_kernel,
    )
    from vastml.matching._cks import (
        ConvexKernelizedSorting,
        centred_kernel,
        cks_gradient,
        cks_hessian_diagonal,
        cks_objective,
        sinkhorn,
    )

__all__ = [
    "ConvexKernelizedSorting",
    "KernelizedSorting",
    "LeastSquaresObjectMatching",
    "centred_kernel",
    "cks_gradient",
    "cks_hessian_diagonal",
    "cks_objective",
    "lsmi",
    "sinkhorn",
    "smooth_kernel",
]

__getattr__, __dir__ = attach(__name__, __file__)
