"""The one progress protocol of vastml: callbacks that can stop a fit, and a progress bar.

Every iterative fit in vastml takes the same three parameters, modelled on openTSNE:

``callbacks`` : callable, list of callables or None
    Each is called as ``callback(iteration, objective, state)`` every ``callback_every``
    iterations. ``iteration`` counts from 1, ``objective`` is the value the fit minimises (or
    ``nan`` where it has none), and ``state`` is the current solution (an embedding, an order, a
    weight vector: each estimator's docstring says which). Returning ``True`` stops the fit
    cleanly: it keeps the best state so far and sets ``stopped_early_ = True``.
``callback_every`` : int
    How often the callbacks are called (the progress bar is updated at every report).
``verbose`` : bool or int
    ``True`` (or an int > 0) draws a progress bar with the objective in its postfix: tqdm's
    when tqdm is installed, plain text lines on stderr otherwise.

Estimators do not talk to the callbacks themselves: they make a :class:`Progress` and call
:meth:`Progress.report` from their loop (or from the chunk boundary of a Rust loop), which
returns True when the fit must stop. When both ``callbacks`` and ``verbose`` are off, a report
costs one attribute test.
"""

from __future__ import annotations

import math
import numbers
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["Progress", "check_callbacks", "check_callback_every"]

Callback = Callable[[int, float, Any], Any]


def check_callbacks(callbacks: Any, name: str = "callbacks") -> list[Callback]:
    """Normalise ``callbacks`` to a list of callables; raise TypeError naming ``name`` otherwise.

    Examples
    --------
    >>> from vastml._progress import check_callbacks
    >>> check_callbacks(None)
    []
    >>> len(check_callbacks([print, print]))
    2
    """
    if callbacks is None:
        return []
    if callable(callbacks):
        return [callbacks]
    if isinstance(callbacks, (str, bytes)) or not isinstance(callbacks, Iterable):
        raise TypeError(f"`{name}` must be a callable, a list of callables or None, got {callbacks!r}")
    out = list(callbacks)
    for cb in out:
        if not callable(cb):
            raise TypeError(f"`{name}` must hold only callables, got {cb!r}")
    return out


def check_callback_every(v: Any, name: str = "callback_every") -> int:
    """A positive int."""
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"`{name}` must be a positive int, got {v!r}")
    if int(v) < 1:
        raise ValueError(f"`{name}` must be >= 1, got {v}")
    return int(v)


def _verbosity(v: Any) -> int:
    if v is None:
        return 0
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, numbers.Integral):
        if int(v) < 0:
            raise ValueError(f"`verbose` must be a bool or an int >= 0, got {v}")
        return int(v)
    raise TypeError(f"`verbose` must be a bool or an int >= 0, got {v!r}")


class _TextBar:
    """The plain-text fallback of tqdm: one line per update, at most one a second."""

    def __init__(self, total: int | None, desc: str):
        self.total, self.desc, self.n = total, desc, 0
        self._last = 0.0
        self._postfix = ""
        self._start = time.perf_counter()

    def update(self, n: int) -> None:
        self.n += n
        now = time.perf_counter()
        if now - self._last >= 1.0:
            self._last = now
            self._print()

    def set_postfix_str(self, s: str, refresh: bool = False) -> None:
        self._postfix = s

    def _print(self) -> None:
        of = f"/{self.total}" if self.total else ""
        post = f" {self._postfix}" if self._postfix else ""
        el = time.perf_counter() - self._start
        print(f"{self.desc}: {self.n}{of} [{el:.1f} s]{post}", file=sys.stderr, flush=True)

    def close(self) -> None:
        self._print()


def _make_bar(total: int | None, desc: str) -> Any:
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - exercised by the fallback test with tqdm hidden
        return _TextBar(total, desc)
    return tqdm(total=total, desc=desc, leave=False, file=sys.stderr)


class Progress:
    """Calls the callbacks and draws the bar for one fit.

    Parameters
    ----------
    callbacks : callable, list of callables or None
        See the module docstring.
    callback_every : int, default=1
        Report to the callbacks every this many iterations.
    verbose : bool or int, default=False
        Draw a progress bar.
    total : int or None
        The number of iterations expected, for the bar.
    desc : str
        The bar's label, usually the estimator's name.

    Examples
    --------
    >>> from vastml._progress import Progress
    >>> seen = []
    >>> def stop_at_three(iteration, objective, state):
    ...     seen.append(iteration)
    ...     return iteration >= 3
    >>> with Progress(stop_at_three, total=10, desc="demo") as progress:
    ...     for it in range(1, 11):
    ...         if progress.report(it, 1.0 / it, None):
    ...             break
    >>> seen, progress.stopped
    ([1, 2, 3], True)
    """

    __slots__ = ("callbacks", "every", "bar", "stopped", "active", "_n")

    def __init__(
        self,
        callbacks: Any = None,
        *,
        callback_every: int = 1,
        verbose: Any = False,
        total: int | None = None,
        desc: str = "fit",
    ):
        self.callbacks = check_callbacks(callbacks)
        self.every = check_callback_every(callback_every)
        self.bar = _make_bar(total, desc) if _verbosity(verbose) > 0 else None
        self.stopped = False
        self.active = bool(self.callbacks) or self.bar is not None
        self._n = 0

    def report(self, iteration: int, objective: float = math.nan, state: Any = None) -> bool:
        """Report iteration ``iteration``; return True when a callback asked to stop."""
        if not self.active:
            return False
        if self.bar is not None:
            step = iteration - self._n
            if step > 0:
                self.bar.update(step)
                self._n = iteration
            if objective == objective:  # not NaN
                self.bar.set_postfix_str(f"objective={objective:.6g}", refresh=False)
        if self.callbacks and iteration % self.every == 0:
            for cb in self.callbacks:
                if cb(int(iteration), float(objective), state) is True:
                    self.stopped = True
        return self.stopped

    def wants(self, iteration: int) -> bool:
        """Whether :meth:`report` would call the callbacks at ``iteration`` (to skip building
        an expensive ``state`` when nobody looks)."""
        return bool(self.callbacks) and iteration % self.every == 0

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
