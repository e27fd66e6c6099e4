"""Input checks shared by every public function: convert once, fail early, name the parameter."""

from __future__ import annotations

import numbers

import numpy as np


def as_points(x, name: str, *, dim: int | None = None) -> np.ndarray:
    """Return ``x`` as a C-contiguous float64 array of shape (n, d).

    A 1-D array is read as n points in one dimension. Raises ValueError naming ``name`` for
    empty, non-finite, wrongly shaped input, or a dimension different from ``dim``.
    """
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"`{name}` must be an array of numbers: {exc}") from None
    if a.ndim == 1:
        a = a.reshape(-1, 1)
    if a.ndim != 2:
        raise ValueError(f"`{name}` must be 2-D (n_samples, n_features), got shape {a.shape}")
    if a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f"`{name}` is empty (shape {a.shape})")
    if dim is not None and a.shape[1] != dim:
        raise ValueError(
            f"`{name}` has {a.shape[1]} features but the sources have {dim}: dimensions must match"
        )
    if not np.isfinite(a).all():
        raise ValueError(f"`{name}` contains NaN or infinite values")
    return np.ascontiguousarray(a)


def as_weights(w, n: int, name: str = "weights") -> tuple[np.ndarray, bool]:
    """Weights as a C-contiguous (n, W) float64 array, and whether the input was 1-D."""
    if w is None:
        return np.ones((n, 1)), True
    try:
        a = np.asarray(w, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"`{name}` must be an array of numbers: {exc}") from None
    one_d = a.ndim == 1
    if one_d:
        a = a.reshape(-1, 1)
    if a.ndim != 2 or a.shape[0] != n:
        raise ValueError(
            f"`{name}` must have shape ({n},) or ({n}, n_weights) to match the sources, got {np.shape(w)}"
        )
    if a.shape[1] == 0:
        raise ValueError(f"`{name}` has no columns")
    if not np.isfinite(a).all():
        raise ValueError(f"`{name}` contains NaN or infinite values")
    return np.ascontiguousarray(a), one_d


def positive_float(v, name: str) -> float:
    """A finite number > 0."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"`{name}` must be a positive number, got {v!r}")
    v = float(v)
    if not (np.isfinite(v) and v > 0):
        raise ValueError(f"`{name}` must be a positive finite number, got {v}")
    return v


def open_unit_float(v, name: str) -> float:
    """A number in the open interval (0, 1)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"`{name}` must be a number in (0, 1), got {v!r}")
    v = float(v)
    if not (0.0 < v < 1.0):
        raise ValueError(f"`{name}` must lie in the open interval (0, 1), got {v}")
    return v


def choice(v, name: str, options) -> str:
    """One of ``options`` (strings)."""
    if not isinstance(v, str) or v not in options:
        raise ValueError(f"`{name}` must be one of {sorted(options)}, got {v!r}")
    return v


def n_jobs_arg(v, name: str = "n_jobs"):
    """None or a non-zero int (checked again, with the same rule, in Rust)."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"`{name}` must be None or an int, got {v!r}")
    if int(v) == 0:
        raise ValueError(f"`{name}` == 0 is not allowed; use None (all cores), a positive count, or -1")
    return int(v)
