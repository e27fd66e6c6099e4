"""1-D Hermite x Gaussian sums and erfc sums: Python front of ``vastml-fgt``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from vastml import _core
from vastml._validation import (
    check_finite_data,
    check_int,
    choice,
    n_jobs_arg,
    open_unit_float,
    positive_float,
)

if TYPE_CHECKING:
    from vastml._typing import ArrayLike, FloatArray

#: Methods of the 1-D sums. ``auto`` runs the fast series when its cost estimate is lower.
SUM_METHODS = ("auto", "direct", "fast")


def as_line(x: ArrayLike, name: str, *, scale_free: bool = False) -> FloatArray:
    """``x`` as a contiguous 1-D float64 array of finite values of a sane scale (see
    :func:`vastml._validation.check_finite_data`; any finite scale with ``scale_free``, for
    callers that standardise; a column vector is accepted)."""
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"`{name}` must be an array of numbers: {exc}") from None
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.ndim != 1:
        raise ValueError(f"`{name}` must be 1-D (points on a line), got shape {a.shape}")
    if a.size == 0:
        raise ValueError(f"`{name}` is empty")
    if scale_free:
        if not np.isfinite(a).all():
            raise ValueError(f"`{name}` contains NaN or infinite values")
    else:
        check_finite_data(a, name)
    return np.ascontiguousarray(a)


def _line_weights(weights: ArrayLike | None, n: int) -> FloatArray:
    if weights is None:
        return np.ones(n)
    w = as_line(weights, "weights")
    if w.shape[0] != n:
        raise ValueError(f"`weights` has {w.shape[0]} values for {n} sources")
    return w


def hermite_gauss_sum(
    sources: ArrayLike,
    targets: ArrayLike,
    derivative_order: int,
    h1: float,
    h2: float | None = None,
    weights: ArrayLike | None = None,
    epsilon: float = 1e-6,
    method: str = "auto",
    n_jobs: int | None = None,
) -> FloatArray:
    r"""Weighted sum of Hermite polynomials times Gaussians on a line, to a guaranteed accuracy.

    .. math:: G_r(y_j) = \sum_i q_i\, He_r\!\left(\frac{y_j - x_i}{h_1}\right)
              \exp\!\left(-\frac{(y_j - x_i)^2}{h_2^2}\right)

    with :math:`\max_j |\hat G_r(y_j) - G_r(y_j)| \le \epsilon \sum_i |q_i|`. :math:`He_r` are
    the probabilists' Hermite polynomials (:math:`He_2(u) = u^2 - 1`). With
    :math:`h_2 = \sqrt{2} h_1` (the default) this is the r-th derivative of a Gaussian kernel
    density estimate up to a constant (Raykar's thesis, chapter 3).

    Parameters
    ----------
    sources, targets : array-like of shape (n,)
        Points :math:`x_i` and :math:`y_j`.
    derivative_order : int
        The Hermite order :math:`r \ge 0` (at most 30): the order of the density derivative
        the sum stands for.
    h1 : float
        Scale of the Hermite argument.
    h2 : float, default=None
        Scale of the Gaussian; None means :math:`\sqrt{2}\,h_1`. The fast method needs
        :math:`h_2 < 2 h_1`.
    weights : array-like of shape (n_sources,), default=None
        :math:`q_i` of any sign; None means ones.
    epsilon : float, default=1e-6
        Absolute accuracy relative to :math:`\sum_i |q_i|`.
    method : {"auto", "direct", "fast"}, default="auto"
    n_jobs : int, default=None
        Threads (None: all cores).

    Returns
    -------
    ndarray of shape (n_targets,)

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.kernels import hermite_gauss_sum
    >>> x = np.linspace(0, 1, 1001)
    >>> g = hermite_gauss_sum(x, [0.5], derivative_order=2, h1=0.1, epsilon=1e-10, method="fast")
    >>> exact = np.sum(((0.5 - x) ** 2 / 0.01 - 1) * np.exp(-((0.5 - x) ** 2) / 0.02))
    >>> bool(abs(g[0] - exact) < 1e-10 * 1001)
    True
    """
    x = as_line(sources, "sources")
    y = as_line(targets, "targets")
    order = check_int(derivative_order, "derivative_order", low=0, high=30)
    h1 = positive_float(h1, "h1")
    h2 = np.sqrt(2.0) * h1 if h2 is None else positive_float(h2, "h2")
    q = _line_weights(weights, x.shape[0])
    params = {
        "order": int(order),
        "h1": h1,
        "h2": float(h2),
        "epsilon": open_unit_float(epsilon, "epsilon"),
        "method": choice(method, "method", SUM_METHODS),
    }
    return _core.hermite_gauss_sum(
        x,
        q,
        y,
        params,
        n_jobs_arg(n_jobs),
    )


def erfc_sum(
    sources: ArrayLike,
    targets: ArrayLike,
    weights: ArrayLike | None = None,
    epsilon: float = 1e-6,
    method: str = "auto",
    n_jobs: int | None = None,
) -> FloatArray:
    r"""Weighted sum of complementary error functions, to a guaranteed accuracy.

    .. math:: E(y_j) = \sum_i q_i \operatorname{erfc}(y_j - x_i)

    with :math:`\max_j |\hat E(y_j) - E(y_j)| \le \epsilon \sum_i |q_i|` (Raykar's thesis,
    chapter 4: Beaulieu's Fourier series about uniform intervals).

    Parameters
    ----------
    sources, targets : array-like of shape (n,)
    weights : array-like of shape (n_sources,), default=None
    epsilon : float, default=1e-6
    method : {"auto", "direct", "fast"}, default="auto"
    n_jobs : int, default=None

    Returns
    -------
    ndarray of shape (n_targets,)

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.special import erfc
    >>> from vastml.kernels import erfc_sum
    >>> x = np.random.default_rng(0).normal(size=5000)
    >>> e = erfc_sum(x, [0.0, 1.0], epsilon=1e-8, method="fast")
    >>> bool(np.allclose(e, [erfc(0.0 - x).sum(), erfc(1.0 - x).sum()], atol=1e-8 * 5000))
    True
    """
    x = as_line(sources, "sources")
    y = as_line(targets, "targets")
    q = _line_weights(weights, x.shape[0])
    return _core.erfc_sum(
        x,
        q,
        y,
        open_unit_float(epsilon, "epsilon"),
        choice(method, "method", SUM_METHODS),
        n_jobs_arg(n_jobs),
    )
