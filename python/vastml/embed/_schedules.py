r"""Accuracy schedules of the N-body gradients (thesis §5.5): a homotopy in accuracy.

With approximate gradients each inexact step lands at a random-like perturbation of the
exact one, and the objective settles at a level :math:`e^* = \mu / (1 - r)` above the
minimum, :math:`\mu = \tfrac12 \xi^2 \operatorname{tr} H` (Theorem 5.4.1). Far from the
minimum that level does not matter, so the thesis starts cheap and inaccurate and raises
the accuracy: Barnes-Hut :math:`\theta` from 2 down to 0.1, fast-Gauss-transform order
:math:`p` from 1 up to 10, both log-uniformly over the first 100 iterations, then fixed.

vastml's fast Gauss transform is the improved FGT with an error bound ``epsilon`` rather than
a truncation order; an order p is mapped to the thesis's own error bound (5.5) for it (per
unit source weight, r = 1/2), :func:`fgt_order_epsilon`.
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from vastml._typing import ArrayLike, FloatArray

#: The thesis's schedules: (start, stop, iterations).
THESIS_THETA = (2.0, 0.1, 100)
THESIS_ORDER = (1, 10, 100)


def accuracy_schedule(
    kind: str, *, start: float | None = None, stop: float | None = None, ramp_iter: int = 100
) -> FloatArray:
    r"""The log-uniform accuracy schedule of thesis §5.5, one value per iteration for the
    first ``ramp_iter`` iterations (then the last value holds).

    Parameters
    ----------
    kind : {"theta", "order"}
        ``"theta"``: Barnes-Hut opening angle, default 2 -> 0.1. ``"order"``: fast Gauss
        transform order p, default 1 -> 10, rounded to integers.
    start, stop : float, optional
        First and last value (default: the thesis's, above).
    ramp_iter : int, default=100
        Iterations over which the value moves from ``start`` to ``stop`` (the thesis's 100).

    Examples
    --------
    >>> from vastml.embed import accuracy_schedule
    >>> s = accuracy_schedule("order")
    >>> int(s[0]), int(s[-1]), len(s)
    (1, 10, 100)
    >>> t = accuracy_schedule("theta", ramp_iter=3)
    >>> [round(float(v), 3) for v in t]
    [2.0, 0.447, 0.1]
    """
    if kind not in ("theta", "order"):
        raise ValueError(f"`kind` must be 'theta' or 'order', got {kind!r}")
    d0, d1, _ = THESIS_THETA if kind == "theta" else THESIS_ORDER
    a = float(d0 if start is None else start)
    b = float(d1 if stop is None else stop)
    if not (isinstance(ramp_iter, numbers.Integral) and ramp_iter >= 1):
        raise ValueError(f"`ramp_iter` must be a positive int, got {ramp_iter!r}")
    if not (a > 0 and b > 0):
        raise ValueError("`start` and `stop` must be positive")
    s = np.geomspace(a, b, int(ramp_iter))
    return np.round(s) if kind == "order" else s


def fgt_order_epsilon(p: int, d: int = 2, box_ratio: float = 0.5) -> float:
    r"""The fast-Gauss-transform error bound (thesis eq. 5.5) of order ``p`` in ``d``
    dimensions per unit total source weight, with :math:`r` = ``box_ratio`` < 1 the side of the
    FGT's boxes relative to the Gaussian's width (the thesis uses r = 1/2),
    :math:`\frac{1}{(1-r)^d} \sum_{k=0}^{d-1} \binom{d}{k} (1 - r^p)^k
    (r^p / \sqrt{p!})^{d-k}`, capped at 0.5: the ``epsilon`` vastml's transform is run with
    for a thesis order p.

    Examples
    --------
    >>> from vastml.embed import fgt_order_epsilon
    >>> f"{fgt_order_epsilon(10):.1e}"
    '4.1e-06'
    """
    p = int(p)
    if p < 1:
        raise ValueError(f"`p` must be an int >= 1, got {p}")
    r = float(box_ratio)
    if not 0 < r < 1:
        raise ValueError(f"`box_ratio` must lie in (0, 1), got {box_ratio}")
    a = r**p / math.sqrt(math.factorial(p))
    tot = sum(math.comb(d, k) * (1 - r**p) ** k * a ** (d - k) for k in range(d))
    return min(0.5, tot / (1 - r) ** d)


def parse_gradient(
    gradient: str | tuple[str, Any], choices: tuple[str, ...]
) -> tuple[str, Any]:
    """Splits ``gradient`` (a name, or ``(name, schedule)``) into (name, schedule or None).
    ``"bh"`` is short for ``"barnes_hut"``; a schedule is ``"thesis"``, a sequence of values
    (theta for Barnes-Hut, orders p for the FGT) or a callable ``iteration -> value``."""
    if isinstance(gradient, tuple):
        if len(gradient) != 2:
            raise ValueError("`gradient` as a tuple must be (method, schedule)")
        name, sched = gradient
    else:
        name, sched = gradient, None
    if name == "bh":
        name = "barnes_hut"
    if name not in choices:
        raise ValueError(f"`gradient` must be one of {choices} (or (method, schedule)), got {name!r}")
    if sched is None:
        return name, None
    if name not in ("barnes_hut", "fgt"):
        raise ValueError("an accuracy schedule needs gradient 'barnes_hut' (theta) or 'fgt' (order p)")
    if isinstance(sched, str):
        if sched != "thesis":
            raise ValueError(f"schedule must be 'thesis', a sequence or a callable, got {sched!r}")
        sched = accuracy_schedule("theta" if name == "barnes_hut" else "order")
    if not callable(sched):
        sched = np.asarray(sched, dtype=float)
        if sched.ndim != 1 or sched.size == 0 or not np.isfinite(sched).all() or (sched <= 0).any():
            raise ValueError("an accuracy schedule must be a non-empty sequence of positive numbers")
    return name, sched


def schedule_value(sched, iteration):
    """The schedule's value at ``iteration`` (0-based; the last value holds)."""
    if callable(sched):
        return float(sched(int(iteration)))
    return float(sched[min(int(iteration), sched.size - 1)])


def inexact_step_error(
    hessian: ArrayLike,
    gradient: ArrayLike,
    xi: float,
    *,
    hessian_jacobian: ArrayLike | None = None,
    objective: float | None = None,
) -> tuple[float, float] | tuple[float, float, float, float]:
    r"""Mean and variance of the change of E when a step lands at a Gaussian perturbation
    :math:`\varepsilon \sim N(0, \xi^2 I)` of the exact point (Theorem 5.4.1, eqs. 5.10-5.12):

    .. math::

        \mu_\Delta = \tfrac12 \xi^2 \operatorname{tr} H, \qquad
        v_\Delta = \xi^2 \|g\|^2 + \xi^4 \bigl(\tfrac12 \|H\|_F^2 + 1^T J_H g\bigr),

    exact for a quadratic E (then :math:`J_H = 0`, the default); with ``objective`` = E(x)
    also the relative :math:`\mu_\delta = \mu_\Delta / E`, :math:`v_\delta = v_\Delta / E^2`.

    Returns ``(mean, variance)`` or, with ``objective``, ``(mean, variance, rel_mean,
    rel_variance)``.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.embed import inexact_step_error
    >>> m, v = inexact_step_error(np.diag([2.0, 4.0]), np.array([1.0, 0.0]), 0.1)
    >>> round(m, 12), round(v, 12)
    (0.03, 0.011)
    """
    H = np.asarray(hessian, dtype=float)
    g = np.asarray(gradient, dtype=float).ravel()
    xi2 = float(xi) ** 2
    mean = 0.5 * xi2 * float(np.trace(H))
    third = 0.0 if hessian_jacobian is None else float(np.sum(np.asarray(hessian_jacobian) @ g))
    var = xi2 * float(g @ g) + xi2 * xi2 * (0.5 * float(np.sum(H * H)) + third)
    if objective is None:
        return mean, var
    E = float(objective)
    return mean, var, mean / E, var / E**2


def inexact_error_level(
    rate: float, mean_error: float, *, e0: float = 1.0, max_iter: int | None = None
) -> float | FloatArray:
    r"""The level :math:`e^* = \mu / (1 - r)` that inexact iterations of a method converging
    linearly at rate r settle at (thesis §5.6, :math:`e_{k+1} = r e_k + \mu`); with
    ``max_iter`` the whole sequence :math:`e_0, \dots, e_{n}` (n = ``max_iter``) instead.

    Examples
    --------
    >>> from vastml.embed import inexact_error_level
    >>> round(inexact_error_level(0.9, 0.01), 12)
    0.1
    """
    r, mu = float(rate), float(mean_error)
    if not 0 <= r < 1:
        raise ValueError(f"`rate` must lie in [0, 1), got {rate}")
    if max_iter is None:
        return mu / (1.0 - r)
    e = np.empty(int(max_iter) + 1)
    e[0] = e0
    for k in range(int(max_iter)):
        e[k + 1] = r * e[k] + mu
    return e
