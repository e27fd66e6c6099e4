"""Kernel sums in linear time with a guaranteed error.

- :func:`gauss_transform` -- G(y_j) = sum_i q_i exp(-||y_j - x_i||^2 / h^2), epsilon-exact.
- :class:`GaussTransform` -- the same over fixed sources, planned once and evaluated many times.
"""

from vastml.kernels._gauss import METHODS, GaussTransform, gauss_transform

__all__ = ["METHODS", "GaussTransform", "gauss_transform"]
