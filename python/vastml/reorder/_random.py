"""The one conversion of a ``random_state`` to the integer seed the Rust solvers take."""

from __future__ import annotations

import numbers

import numpy as np



def seed_of(random_state: int | np.random.RandomState | np.random.Generator | None) -> int:
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
