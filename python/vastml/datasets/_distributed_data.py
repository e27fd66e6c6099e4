"""Binary waveform data for the AROW-MR experiment (Djuric's thesis, Fig. 6.1)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from vastml._typing import FloatArray, IntArray, Seed


def make_binary_waveform(
    n_samples: int, *, n_noise_features: int = 0, random_state: Seed = None
) -> tuple[FloatArray, IntArray]:
    r"""Breiman's waveform data (UCI generator), made binary as in the thesis's ch. 6.

    With :math:`h_1(i) = \max(6 - |i - 11|, 0)`, :math:`h_2(i) = h_1(i - 4)`,
    :math:`h_3(i) = h_1(i + 4)` (:math:`i = 1..21`) and :math:`u \sim U(0, 1)`, class 1 is
    :math:`u h_1 + (1-u) h_2`, class 2 is :math:`u h_1 + (1-u) h_3`, class 3 is
    :math:`u h_2 + (1-u) h_3`, each plus N(0, 1) noise per feature; classes are equally
    likely. Classes 1 and 2 are labelled +1, class 3 is -1. ``n_noise_features`` appends
    pure N(0, 1) columns (e.g. 79 for 100-dimensional rows).

    Returns
    -------
    X : ndarray of shape (n_samples, 21 + n_noise_features)
    y : ndarray of shape (n_samples,) with values -1 and +1

    Examples
    --------
    >>> from vastml.datasets import make_binary_waveform
    >>> X, y = make_binary_waveform(6, n_noise_features=2, random_state=0)
    >>> X.shape, sorted(set(y.tolist())) <= [-1, 1]
    ((6, 23), True)
    """
    n = int(n_samples)
    extra = int(n_noise_features)
    if n < 0 or extra < 0:
        raise ValueError("`n_samples` and `n_noise_features` must be >= 0")
    rng = np.random.default_rng(random_state)
    i = np.arange(1, 22)
    h1 = np.maximum(6 - np.abs(i - 11), 0).astype(np.float64)
    h2 = np.maximum(6 - np.abs(i - 4 - 11), 0).astype(np.float64)
    h3 = np.maximum(6 - np.abs(i + 4 - 11), 0).astype(np.float64)
    bases = np.array([[h1, h2], [h1, h3], [h2, h3]])  # (class, pair, 21)
    cls = rng.integers(0, 3, size=n)
    u = rng.uniform(size=(n, 1))
    X = np.empty((n, 21 + extra))
    X[:, :21] = u * bases[cls, 0] + (1 - u) * bases[cls, 1] + rng.normal(size=(n, 21))
    if extra:
        X[:, 21:] = rng.normal(size=(n, extra))
    y = np.where(cls < 2, 1, -1)
    return X, y
