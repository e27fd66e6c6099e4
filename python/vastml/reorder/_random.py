"""The one conversion of a ``random_state`` to the integer seed the Rust solvers take."""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, TypeAlias

    #: What a ``random_state`` may be.
    RandomStateLike: TypeAlias = int | np.random.RandomState | np.random.Generator | None
    #: One progress callback, ``callback(iteration, objective, state) -> stop?``.
    Callback: TypeAlias = Callable[[int, float, Any], Any]
    #: The ``callbacks`` parameter: one callback, several, or None.
    Callbacks: TypeAlias = Callback | Sequence[Callback] | None



def seed_of(random_state: RandomStateLike) -> int:
    """A non-negative integer seed from ``random_state``.

    ``None`` draws a fresh seed, an int is used as is, a ``RandomState`` or ``Generator``
    draws one (and so advances).

    Examples
    --------
    >>> import numpy as np
    >>> seed_of(7)
    7
    >>> seed_of(np.random.RandomState(0)) == seed_of(np.random.RandomState(0))
    True
    """
    if random_state is None:
        return int(np.random.default_rng().integers(2**63))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(2**63))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(2**31))
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"`random_state` must be non-negative, got {random_state}")
        return int(random_state)
    raise TypeError(
        "`random_state` must be None, an int, a numpy RandomState or a numpy Generator, "
        f"got {random_state!r}"
    )
