"""Input checks shared by every public function: convert once, fail early, name the parameter.

The rules, the same everywhere in vastml:

- a value of the wrong kind (a string where a number is wanted, a float where an int is) raises
  ``TypeError``; a value of the right kind out of its range raises ``ValueError``;
- every message names the user's parameter in backticks and says what was expected;
- arrays: complex input is refused (``ValueError``, in scikit-learn's words), sparse input is
  refused (``TypeError``) where only dense input is supported, NaN and inf are refused unless a
  function documents otherwise;
- data (points, kernel matrices) whose magnitude exceeds :data:`MAX_MAGNITUDE` is refused
  (``ValueError``): squares and sums of squares of such values overflow float64 and the result
  would be NaN or inf. Nothing in vastml needs such a scale; standardise the data instead.
"""

from __future__ import annotations

import functools
import numbers
import os
from collections.abc import Collection
from typing import Any

import numpy as np

SPARSE_MESSAGE = "sparse input is not supported here, use X.toarray() if it fits"


def reject_sparse(x: Any, name: str) -> None:
    """Raise TypeError naming ``name`` when ``x`` is a SciPy sparse matrix or array."""
    if hasattr(x, "tocsr") and hasattr(x, "nnz"):
        raise TypeError(f"`{name}`: {SPARSE_MESSAGE}")


COMPLEX_MESSAGE = "Complex data not supported"


def reject_complex(a: Any, name: str) -> None:
    """Raise ValueError naming ``name`` when ``a`` holds complex numbers (ValueError, with
    scikit-learn's wording, so that estimators pass its checks)."""
    if np.iscomplexobj(a):
        raise ValueError(f"{COMPLEX_MESSAGE}: `{name}` must hold real numbers")


def empty_message(name: str, shape: tuple) -> str:
    """The message for an empty array, in scikit-learn's words."""
    what = "sample(s)" if shape[0] == 0 else "feature(s)"
    return f"`{name}` is empty: found 0 {what} (shape={shape}) while a minimum of 1 is required."


#: Largest magnitude accepted in data: its square (1e300) and sums of such squares over many
#: features or samples stay below float64's largest value (about 1.8e308).
MAX_MAGNITUDE = 1e150


def check_finite_data(a: np.ndarray, name: str) -> None:
    """Raise ValueError naming ``name`` when the float array ``a`` holds NaN or inf, or a
    value larger in magnitude than :data:`MAX_MAGNITUDE`.

    One pass for the minimum and one for the maximum, without a temporary (NaN propagates
    through both).

    Examples
    --------
    >>> import numpy as np
    >>> from vastml._validation import check_finite_data
    >>> check_finite_data(np.array([1.0, -1e200]), "X")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: `X` holds values as large as 1e+200 in magnitude: ... standardise ...
    """
    if a.size == 0:
        return
    lo, hi = float(a.min()), float(a.max())
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError(f"`{name}` contains NaN or infinite values")
    _check_magnitude(lo, hi, name)


def _check_magnitude(lo: float, hi: float, name: str) -> None:
    """The magnitude rule of :func:`check_finite_data`, given the finite extremes."""
    top = max(-lo, hi)
    if top > MAX_MAGNITUDE:
        raise ValueError(
            f"`{name}` holds values as large as {top:.3g} in magnitude: their squares overflow "
            f"float64; standardise the data (for example divide by its scale, or use "
            f"sklearn.preprocessing.StandardScaler) so that every |value| <= {MAX_MAGNITUDE:g}"
        )


def validate_rows(estimator: Any, X: Any, *, reset: bool, name: str = "X") -> np.ndarray:
    """scikit-learn's ``validate_data(estimator, X, dtype=float64, order="C",
    ensure_min_samples=1, reset=reset)`` followed by :func:`check_finite_data`: ``X`` as a
    C-contiguous float64 matrix of finite values with at least one row and one column, and
    ``n_features_in_`` set (``reset``) or checked (not ``reset``).

    A C-contiguous float64 ndarray, for an estimator fitted without feature names and with
    the same number of columns, is checked here directly: scikit-learn's checks cost about
    90 us a call, as much as a whole small density evaluation. Anything else, and every
    error, goes through scikit-learn's checks and messages.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.base import BaseEstimator
    >>> from vastml._validation import validate_rows
    >>> est = BaseEstimator()
    >>> validate_rows(est, [[0, 1], [2, 3]], reset=True).dtype, est.n_features_in_
    (dtype('float64'), 2)
    >>> validate_rows(est, np.zeros((1, 3)), reset=False)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: X has 3 features, but BaseEstimator is expecting 2 features as input.
    """
    if (
        type(X) is np.ndarray
        and X.dtype == np.float64
        and X.ndim == 2
        and X.flags.c_contiguous
        and X.shape[0] > 0
        and X.shape[1] > 0
        and not hasattr(estimator, "feature_names_in_")
        and (reset or getattr(estimator, "n_features_in_", None) == X.shape[1])
    ):
        lo, hi = float(X.min()), float(X.max())
        if np.isfinite(lo) and np.isfinite(hi):
            _check_magnitude(lo, hi, name)
            if reset:
                estimator.n_features_in_ = X.shape[1]
            return X
    from sklearn.utils.validation import validate_data

    Xv: np.ndarray = validate_data(estimator, X, dtype=np.float64, order="C", ensure_min_samples=1, reset=reset)
    check_finite_data(Xv, name)
    return Xv


def as_float_array(x: Any, name: str) -> np.ndarray:
    """``x`` as a float64 array (any shape): TypeError for sparse, complex or non-numbers."""
    reject_sparse(x, name)
    reject_complex(x, name)
    try:
        return np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"`{name}` must be an array of numbers: {exc}") from None


def as_points(
    x: Any, name: str, *, dim: int | None = None, allow_1d: bool = True, scale_free: bool = False
) -> np.ndarray:
    """Return ``x`` as a C-contiguous float64 array of shape (n, d).

    A 1-D array is read as n points in one dimension (estimators pass ``allow_1d=False``: a
    1-D ``X`` is then refused, as scikit-learn does, since it could be one sample or one
    feature). Raises ValueError naming ``name`` for
    empty, non-finite, complex or wrongly shaped input, values larger in magnitude than
    :data:`MAX_MAGNITUDE`, or a dimension different from ``dim``; TypeError for sparse or
    non-numeric input. ``scale_free=True`` accepts any finite magnitude: for callers whose
    result cannot depend on the scale and who rescale the data themselves.

    Examples
    --------
    >>> from vastml._validation import as_points
    >>> as_points([1.0, 2.0], "x").shape
    (2, 1)
    >>> as_points([[1j]], "x")
    Traceback (most recent call last):
    ValueError: Complex data not supported: `x` must hold real numbers
    """
    reject_sparse(x, name)
    reject_complex(x, name)
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"`{name}` must be an array of numbers: {exc}") from None
    if a.ndim == 1 and not allow_1d:
        raise ValueError(
            f"`{name}` must be 2-D (n_samples, n_features), got a 1-D array of shape {a.shape}. "
            "Reshape your data with X.reshape(-1, 1) for one feature or X.reshape(1, -1) for one "
            "sample."
        )
    if a.ndim == 1:
        a = a.reshape(-1, 1)
    if a.ndim != 2:
        raise ValueError(f"`{name}` must be 2-D (n_samples, n_features), got shape {a.shape}")
    if a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(empty_message(name, a.shape))
    if dim is not None and a.shape[1] != dim:
        raise ValueError(
            f"`{name}` has {a.shape[1]} features but the sources have {dim}: dimensions must match"
        )
    if scale_free:
        if not np.isfinite(a).all():
            raise ValueError(f"`{name}` contains NaN or infinite values")
    else:
        check_finite_data(a, name)
    return np.ascontiguousarray(a)


def as_weights(w: Any, n: int, name: str = "weights") -> tuple[np.ndarray, bool]:
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


def positive_float(v: Any, name: str) -> float:
    """A finite number > 0."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"`{name}` must be a positive number, got {v!r}")
    v = float(v)
    if not (np.isfinite(v) and v > 0):
        raise ValueError(f"`{name}` must be a positive finite number, got {v}")
    return v


def open_unit_float(v: Any, name: str) -> float:
    """A number in the open interval (0, 1)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"`{name}` must be a number in (0, 1), got {v!r}")
    v = float(v)
    if not (0.0 < v < 1.0):
        raise ValueError(f"`{name}` must lie in the open interval (0, 1), got {v}")
    return v


def check_int(v: Any, name: str, *, low: int | None = None, high: int | None = None) -> int:
    """An int (not a bool, not a float) in ``[low, high]``; either bound may be None.

    Examples
    --------
    >>> from vastml._validation import check_int
    >>> check_int(3, "max_iter", low=1)
    3
    >>> check_int(0, "max_iter", low=1)
    Traceback (most recent call last):
    ValueError: `max_iter` must be >= 1, got 0
    """
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"`{name}` must be an int, got {v!r}")
    v = int(v)
    if low is not None and v < low:
        raise ValueError(f"`{name}` must be >= {low}, got {v}")
    if high is not None and v > high:
        raise ValueError(f"`{name}` must be <= {high}, got {v}")
    return v


def check_float(
    v: Any,
    name: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """A finite real number in the interval given by ``low`` / ``high`` (closed unless ``*_open``).

    Examples
    --------
    >>> from vastml._validation import check_float
    >>> check_float(0.5, "momentum", low=0, high=1, high_open=True)
    0.5
    >>> check_float(2, "momentum", low=0, high=1, high_open=True)
    Traceback (most recent call last):
    ValueError: `momentum` must be < 1, got 2.0
    """
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"`{name}` must be a real number, got {v!r}")
    v = float(v)
    if not np.isfinite(v):
        raise ValueError(f"`{name}` must be finite, got {v}")
    if low is not None and (v <= low if low_open else v < low):
        raise ValueError(f"`{name}` must be {'>' if low_open else '>='} {low}, got {v}")
    if high is not None and (v >= high if high_open else v > high):
        raise ValueError(f"`{name}` must be {'<' if high_open else '<='} {high}, got {v}")
    return v


def check_bool(v: Any, name: str) -> bool:
    """A bool (NumPy's included)."""
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"`{name}` must be True or False, got {v!r}")
    return bool(v)


def choice(v: Any, name: str, options: Collection[str]) -> str:
    """One of ``options`` (strings)."""
    if not isinstance(v, str) or v not in options:
        raise ValueError(f"`{name}` must be one of {sorted(options)}, got {v!r}")
    return v


@functools.cache
def _cores() -> int:
    """The machine's cores (``os.cpu_count`` reads a file on Linux: 6 us on every plan)."""
    return os.cpu_count() or 1


def n_jobs_arg(v: Any, name: str = "n_jobs") -> int | None:
    """None or a non-zero int, a positive count clamped to the machine's cores.

    -1 means all cores, -2 all but one (as in scikit-learn); the rule is checked again in Rust.

    Examples
    --------
    >>> import os
    >>> from vastml._validation import n_jobs_arg
    >>> n_jobs_arg(2**62) == (os.cpu_count() or 1)
    True
    """
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"`{name}` must be None or an int, got {v!r}")
    v = int(v)
    if v == 0:
        raise ValueError(f"`{name}` == 0 is not allowed; use None (all cores), a positive count, or -1")
    cores = _cores()
    if v > cores:
        return cores
    if v < -cores:
        return -cores
    return v


def check_objective(objective: Any, needs: Collection[str] = (), name: str = "objective") -> Any:
    """``objective`` if it is callable and has every attribute in ``needs``; TypeError naming
    ``name`` otherwise (an array or a string passed where an objective belongs).

    Examples
    --------
    >>> from vastml._validation import check_objective
    >>> check_objective(None, ("W",))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    TypeError: `objective` must be an embedding objective (...) with `W`, got NoneType
    """
    if not callable(objective) or not all(hasattr(objective, a) for a in needs):
        what = " with " + ", ".join(f"`{a}`" for a in needs) if needs else ""
        raise TypeError(
            f"`{name}` must be an embedding objective (such as vastml.embed.EmbeddingObjective)"
            f"{what}, got {type(objective).__name__}"
        )
    return objective


def as_permutation(order: Any, n: int, name: str) -> np.ndarray:
    """``order`` as an int64 array holding a permutation of ``range(n)``; TypeError for
    non-integers (floats, strings, sparse), ValueError for anything else that is not one.

    Examples
    --------
    >>> from vastml._validation import as_permutation
    >>> as_permutation([2, 0, 1], 3, "order").tolist()
    [2, 0, 1]
    >>> as_permutation([0.0, 1.0], 2, "order")
    Traceback (most recent call last):
    TypeError: `order` must be a permutation of range(2) (integers), got dtype float64
    """
    reject_sparse(order, name)
    o = np.asarray(order)
    if o.dtype == object:
        if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in o.ravel()):
            raise TypeError(f"`{name}` must be a permutation of range({n}) (integers)")
        o = o.astype(np.int64)
    if o.dtype.kind not in "iu":
        raise TypeError(
            f"`{name}` must be a permutation of range({n}) (integers), got dtype {o.dtype}"
        )
    if o.ndim != 1 or o.shape[0] != n or not np.array_equal(np.sort(o), np.arange(n)):
        raise ValueError(f"`{name}` must be a permutation of range({n}), got shape {o.shape}")
    return o.astype(np.int64)


def as_square_matrix(x: Any, name: str, n: int | None = None) -> np.ndarray:
    """``x`` as a finite float64 square matrix (of side ``n`` when given).

    Examples
    --------
    >>> from vastml._validation import as_square_matrix
    >>> as_square_matrix([[1, 2], [3, 4]], "K").shape
    (2, 2)
    >>> as_square_matrix([[1, 2]], "K")
    Traceback (most recent call last):
    ValueError: `K` must be a square matrix, got shape (1, 2)
    """
    a = as_float_array(x, name)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] == 0:
        raise ValueError(f"`{name}` must be a square matrix, got shape {a.shape}")
    if n is not None and a.shape[0] != n:
        raise ValueError(f"`{name}` must be {n} x {n} to match the other arguments, got {a.shape}")
    check_finite_data(a, name)
    return a
