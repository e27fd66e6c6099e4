"""Type aliases of the public signatures (for type checkers; nothing here runs at import time).

Modules import these under ``if TYPE_CHECKING:`` with ``from __future__ import annotations``,
so annotations cost nothing when vastml is used.
"""

from __future__ import annotations

import os
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

#: A float64 NumPy array (what vastml returns).
FloatArray: TypeAlias = npt.NDArray[np.float64]
#: A boolean NumPy array (masks).
BoolArray: TypeAlias = npt.NDArray[np.bool_]
#: A float32 NumPy array (the single-precision kernel matrices of the GP's dense solver).
Float32Array: TypeAlias = npt.NDArray[np.float32]
#: An integer NumPy array (labels, orders, indices).
IntArray: TypeAlias = npt.NDArray[np.integer[Any]]
#: Anything NumPy can turn into an array (what vastml accepts).
ArrayLike: TypeAlias = npt.ArrayLike
#: A seed for ``numpy.random.default_rng``.
Seed: TypeAlias = int | np.random.Generator | np.random.SeedSequence | None
#: A seed for scikit-learn's ``check_random_state``.
RandomState: TypeAlias = int | np.random.RandomState | None
#: A file or folder name.
PathLike: TypeAlias = str | os.PathLike[str]
