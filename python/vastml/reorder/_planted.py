"""The thesis's planted test matrices (spec §15.1-§15.2), drawn in Rust with java.util.Random."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from vastml import _core
from vastml._validation import check_float, check_int, choice
from vastml.reorder._random import seed_of

if TYPE_CHECKING:
    from vastml.reorder._random import RandomStateLike

#: The seed of the thesis's generator: the default, which reproduces Tables A.1-A.9.
THESIS_SEED = 545_173_132
PATTERNS = ("nested", "banded", "blocks", "banded_blocks")


def planted_matrix(
    pattern: str,
    size: int = 300,
    noise: float = 0.0,
    *,
    random_state: RandomStateLike = THESIS_SEED,
) -> np.ndarray:
    """A planted ``size`` x ``size`` binary matrix with each cell flipped with probability
    ``noise``.

    Parameters
    ----------
    pattern : {"nested", "banded", "blocks", "banded_blocks"}
        Nested (1 iff i + j < n), banded (1 iff \\|i - j\\| < 0.2 n), four overlapping
        rectangles, or ten overlapping diagonal squares.
    size : int, default=300
    noise : float in [0, 1], default=0.0
        Probability of flipping each cell.
    random_state : None, int, RandomState or Generator, default=545173132
        Seed of the ``java.util.Random`` stream; the default (the thesis's seed) with
        ``size=300`` gives the matrices of the thesis's Tables A.1-A.9.

    Returns
    -------
    ndarray of uint8, shape (size, size)

    Examples
    --------
    >>> from vastml.reorder import planted_matrix
    >>> planted_matrix("nested", 4).tolist()
    [[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 0, 0], [1, 0, 0, 0]]
    >>> int(planted_matrix("banded", 50, 0.1, random_state=1).sum())
    929
    """
    choice(pattern, "pattern", PATTERNS)
    size = check_int(size, "size", low=1)
    noise = check_float(noise, "noise", low=0.0, high=1.0)
    return _core.planted_matrix(pattern, size, noise, seed_of(random_state))


def planted_categorical(
    size: int = 300,
    *,
    random_state: RandomStateLike = THESIS_SEED,
) -> np.ndarray:
    """The thesis's categorical planted matrix: ``size`` x ``size`` with 6 colours (0 = the
    background).

    Parameters
    ----------
    size : int, default=300
    random_state : None, int, RandomState or Generator, default=545173132
        Seed of the ``java.util.Random`` stream (the default is the thesis's).

    Returns
    -------
    ndarray of uint32, shape (size, size)

    Examples
    --------
    >>> from vastml.reorder import planted_categorical
    >>> M = planted_categorical(60)
    >>> M.shape, int(M.max()) <= 5
    ((60, 60), True)
    """
    size = check_int(size, "size", low=1)
    return _core.planted_categorical(size, seed_of(random_state))
