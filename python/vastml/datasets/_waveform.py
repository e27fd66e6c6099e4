"""Breiman's waveform generator (CART, 1984; UCI "waveform"), the Ch.2 benchmark of the thesis."""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from vastml._typing import FloatArray, IntArray, Seed


def make_waveform(
    n_samples: int = 1500, *, noise_features: int = 0, noise: float = 1.0, random_state: Seed = None
) -> tuple[FloatArray, IntArray]:
    """Waveform data: 21 features, 3 balanced classes, each a random convex combination of two
    of three triangular waves plus N(0, noise^2) noise; ``noise_features`` extra pure-noise
    N(0, 1) columns are appended (the thesis's "wave noisy" has 21).

    ``h1(i) = max(6 - |i - 11|, 0)``, ``h2(i) = h1(i - 4)``, ``h3(i) = h1(i + 4)`` for
    i = 1..21; class 0 = u h1 + (1 - u) h2, class 1 = u h1 + (1 - u) h3, class 2 =
    u h2 + (1 - u) h3 with u ~ U(0, 1).

    Returns ``(X, y)``: float64 ``(n_samples, 21 + noise_features)`` and int labels 0..2.

    Examples
    --------
    >>> X, y = make_waveform(300, noise_features=21, random_state=0)
    >>> X.shape, sorted(set(y.tolist()))
    ((300, 42), [0, 1, 2])
    """
    for name, v, lo in (("n_samples", n_samples, 1), ("noise_features", noise_features, 0)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo:
            raise ValueError(f"`{name}` must be an integer >= {lo}, got {v!r}")
    if not (np.isfinite(noise) and noise >= 0):
        raise ValueError(f"`noise` must be a finite number >= 0, got {noise!r}")
    rng = np.random.default_rng(random_state)
    i = np.arange(1, 22)
    h1 = np.maximum(6 - np.abs(i - 11), 0).astype(float)
    h2 = np.maximum(6 - np.abs(i - 4 - 11), 0).astype(float)
    h3 = np.maximum(6 - np.abs(i + 4 - 11), 0).astype(float)
    pairs = np.array([[h1, h2], [h1, h3], [h2, h3]])
    y = rng.integers(0, 3, n_samples)
    u = rng.random((n_samples, 1))
    X = u * pairs[y, 0] + (1 - u) * pairs[y, 1] + noise * rng.standard_normal((n_samples, 21))
    if noise_features:
        X = np.hstack([X, rng.standard_normal((n_samples, noise_features))])
    return X, y
