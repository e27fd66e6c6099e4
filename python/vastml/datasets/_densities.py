"""The 15 Marron-Wand (1992) test densities: normal mixtures to sample from and evaluate."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from sklearn.utils import check_random_state

if TYPE_CHECKING:
    from vastml._typing import ArrayLike, FloatArray, RandomState


def _components(number: int) -> tuple[list[float], list[float], list[float]]:
    """(weights, means, standard deviations) of density ``number`` (1..15)."""
    third = 1.0 / 3.0
    if number == 1:
        return [1.0], [0.0], [1.0]
    if number == 2:
        return [0.2, 0.2, 0.6], [0.0, 0.5, 13 / 12], [1.0, 2 / 3, 5 / 9]
    if number == 3:
        return ([1 / 8] * 8, [3 * ((2 / 3) ** l - 1) for l in range(8)], [(2 / 3) ** l for l in range(8)])
    if number == 4:
        return [2 / 3, third], [0.0, 0.0], [1.0, 0.1]
    if number == 5:
        return [0.1, 0.9], [0.0, 0.0], [1.0, 0.1]
    if number == 6:
        return [0.5, 0.5], [-1.0, 1.0], [2 / 3, 2 / 3]
    if number == 7:
        return [0.5, 0.5], [-1.5, 1.5], [0.5, 0.5]
    if number == 8:
        return [0.75, 0.25], [0.0, 1.5], [1.0, third]
    if number == 9:
        return [9 / 20, 9 / 20, 0.1], [-1.2, 1.2, 0.0], [0.6, 0.6, 0.25]
    if number == 10:
        return [0.5] + [0.1] * 5, [0.0] + [l / 2 - 1 for l in range(5)], [1.0] + [0.1] * 5
    if number == 11:
        return (
            [0.49, 0.49] + [1 / 350] * 7,
            [-1.0, 1.0] + [(l - 3) / 2 for l in range(7)],
            [2 / 3, 2 / 3] + [0.01] * 7,
        )
    if number == 12:
        ls = range(-2, 3)
        return (
            [0.5] + [2.0 ** (1 - l) / 31 for l in ls],
            [0.0] + [l + 0.5 for l in ls],
            [1.0] + [2.0 ** (-l) / 10 for l in ls],
        )
    if number == 13:
        return (
            [0.46, 0.46] + [1 / 300] * 3 + [7 / 300] * 3,
            [-1.0, 1.0] + [-l / 2 for l in (1, 2, 3)] + [l / 2 for l in (1, 2, 3)],
            [2 / 3, 2 / 3] + [0.01] * 3 + [0.07] * 3,
        )
    if number == 14:
        ls = range(6)
        return (
            [2.0 ** (5 - l) / 63 for l in ls],
            [(65 - 96 * 0.5**l) / 21 for l in ls],
            [(32 / 63) / 2.0**l for l in ls],
        )
    if number == 15:
        return (
            [2 / 7] * 3 + [1 / 21] * 3,
            [(12 * l - 15) / 7 for l in range(3)] + [2 * l / 7 for l in (8, 9, 10)],
            [2 / 7] * 3 + [1 / 21] * 3,
        )
    raise ValueError(f"`number` must be an integer from 1 to 15, got {number!r}")


#: Names of the densities in Marron and Wand's paper.
MARRON_WAND_NAMES = (
    "Gaussian", "Skewed unimodal", "Strongly skewed", "Kurtotic unimodal", "Outlier",
    "Bimodal", "Separated bimodal", "Skewed bimodal", "Trimodal", "Claw",
    "Double claw", "Asymmetric claw", "Asymmetric double claw", "Smooth comb", "Discrete comb",
)


def make_marron_wand(number: int, n_samples: int = 2000, random_state: RandomState = None) -> FloatArray:
    """Draw ``n_samples`` points from Marron-Wand density ``number`` (1 = standard normal).

    Examples
    --------
    >>> from vastml.datasets import make_marron_wand
    >>> x = make_marron_wand(10, 1000, random_state=0)   # the claw
    >>> x.shape
    (1000,)
    """
    w, m, s = (np.asarray(v, dtype=np.float64) for v in _components(number))
    rng = check_random_state(random_state)
    k = rng.choice(len(w), size=int(n_samples), p=w / w.sum())
    return m[k] + s[k] * rng.standard_normal(int(n_samples))


def marron_wand_pdf(number: int, x: ArrayLike) -> FloatArray:
    """The Marron-Wand density ``number`` (1-15) evaluated at ``x``.

    Parameters
    ----------
    number : int
        Which of the fifteen normal mixtures of Marron and Wand (1992): 1 is the standard
        normal, 10 the claw, ... (the numbering of :func:`make_marron_wand`).
    x : array-like
        Where to evaluate; any shape.

    Returns
    -------
    ndarray of the shape of ``x``

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.datasets import marron_wand_pdf
    >>> float(np.round(marron_wand_pdf(1, 0.0), 6))  # the standard normal at 0
    0.398942
    >>> grid = np.linspace(-6, 6, 4001)
    >>> float(np.round(np.sum(marron_wand_pdf(10, grid)) * (grid[1] - grid[0]), 6))  # integrates to 1
    1.0
    """
    w, m, s = (np.asarray(v, dtype=np.float64) for v in _components(number))
    x = np.asarray(x, dtype=np.float64)[..., None]
    return np.sum(w * np.exp(-0.5 * ((x - m) / s) ** 2) / (np.sqrt(2 * np.pi) * s), axis=-1)


def make_robot_arm(
    n_samples: int = 10000, noise_variance: float = 0.1, random_state: RandomState = None
) -> tuple[FloatArray, FloatArray]:
    """MacKay's robot-arm regression data (Raykar's thesis, §7.7).

    ``x1 ~ U[-1.932, -0.453]``, ``x2 ~ U[0.534, 3.142]``,
    ``y = 2 cos(x1) + 1.3 cos(x1 + x2) + noise`` with the given noise variance.

    Returns
    -------
    X : ndarray of shape (n_samples, 2)
    y : ndarray of shape (n_samples,)

    Examples
    --------
    >>> X, y = make_robot_arm(5, random_state=0)
    >>> X.shape, y.shape
    ((5, 2), (5,))
    """
    rng = check_random_state(random_state)
    n = int(n_samples)
    x1 = rng.uniform(-1.932, -0.453, n)
    x2 = rng.uniform(0.534, 3.142, n)
    y = 2.0 * np.cos(x1) + 1.3 * np.cos(x1 + x2) + np.sqrt(noise_variance) * rng.standard_normal(n)
    return np.column_stack([x1, x2]), y
