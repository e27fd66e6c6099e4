"""Kernel sums in linear time with a guaranteed error, and the methods built on them.

- :func:`gauss_transform` / :class:`GaussTransform` -- sum_i q_i exp(-||y - x_i||^2 / h^2).
- :func:`hermite_gauss_sum` -- 1-D sum_i q_i He_r((y - x_i)/h1) exp(-(y - x_i)^2 / h2^2).
- :func:`erfc_sum` -- 1-D sum_i q_i erfc(y - x_i).
- :class:`KernelDensity` -- Gaussian KDE, bandwidth by number, Scott, Silverman or Sheather-Jones.
- :class:`GaussianProcessRegressor`, :func:`fit_implicit_surface` -- GP regression by CG on fast sums.
- :class:`RankNCG`, :func:`wmw_score` -- ranking by the generalised WMW statistic, erfc-sum gradients.
- :class:`ProjectionPursuit`, :func:`entropy_index` -- most non-Gaussian directions.
- :func:`sheather_jones`, :func:`density_derivative`, :func:`density_functional` -- bandwidth selection.
"""

from typing import TYPE_CHECKING

from vastml._lazy import attach

# Public names, imported on first use (see vastml._lazy): `import vastml.kernels` stays cheap.
if TYPE_CHECKING:
    from vastml.kernels._bandwidth import (
        density_derivative,
        density_functional,
        normal_reference_functional,
        robust_scale,
        rule_of_thumb,
        scott_bandwidth,
        sheather_jones,
        sheather_jones_bandwidth,
        silverman_bandwidth,
    )
    from vastml.kernels._gauss import METHODS, GaussTransform, gauss_transform
    from vastml.kernels._gp import (
        CGResult,
        GaussianProcessRegressor,
        ImplicitSurface,
        conjugate_gradient,
        fit_implicit_surface,
    )
    from vastml.kernels._kde import KernelDensity
    from vastml.kernels._pursuit import ProjectionPursuit, entropy_index
    from vastml.kernels._rank import RankNCG, wmw_score
    from vastml.kernels._sums import SUM_METHODS, erfc_sum, hermite_gauss_sum

__all__ = [
    "METHODS",
    "SUM_METHODS",
    "CGResult",
    "GaussTransform",
    "GaussianProcessRegressor",
    "ImplicitSurface",
    "KernelDensity",
    "ProjectionPursuit",
    "RankNCG",
    "conjugate_gradient",
    "density_derivative",
    "density_functional",
    "entropy_index",
    "erfc_sum",
    "fit_implicit_surface",
    "gauss_transform",
    "hermite_gauss_sum",
    "normal_reference_functional",
    "robust_scale",
    "rule_of_thumb",
    "scott_bandwidth",
    "sheather_jones",
    "sheather_jones_bandwidth",
    "silverman_bandwidth",
    "wmw_score",
]

__getattr__, __dir__ = attach(__name__, __file__)
