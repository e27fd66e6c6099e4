"""The checkerboard classification problem of Djuric's thesis (Table 4.5, Fig. 4.5)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from sklearn.utils import check_random_state

if TYPE_CHECKING:
    from vastml._typing import FloatArray, IntArray, RandomState


def make_checkerboard(
    n_samples: int,
    n_rows: int = 4,
    n_cols: int = 4,
    *,
    noise: float = 0.0,
    random_state: RandomState = None,
) -> tuple[FloatArray, IntArray]:
    """Points uniform in the unit square, labelled by the colour of their checkerboard cell.

    Parameters
    ----------
    n_samples : int
    n_rows, n_cols : int, default=4
        The board has ``n_rows x n_cols`` cells (the thesis's "4x4" pattern is the default).
    noise : float, default=0.0
        Fraction of labels flipped at random.
    random_state : int, RandomState or None

    Returns
    -------
    X : ndarray of shape (n_samples, 2)
    y : ndarray of shape (n_samples,), values 0 and 1

    Examples
    --------
    >>> from vastml.datasets import make_checkerboard
    >>> X, y = make_checkerboard(1000, 2, 2, random_state=0)
    >>> X.shape, sorted(set(y.tolist()))
    ((1000, 2), [0, 1])
    """
    if int(n_samples) < 1 or int(n_rows) < 1 or int(n_cols) < 1:
        raise ValueError("`n_samples`, `n_rows` and `n_cols` must be positive")
    if not 0.0 <= float(noise) <= 1.0:
        raise ValueError(f"`noise` must lie in [0, 1], got {noise}")
    rng = check_random_state(random_state)
    X = rng.uniform(size=(int(n_samples), 2))
    cell = np.floor(X[:, 0] * n_cols).astype(int) + np.floor(X[:, 1] * n_rows).astype(int)
    y = cell % 2
    flip = rng.uniform(size=y.shape[0]) < noise
    y[flip] = 1 - y[flip]
    return X, y
