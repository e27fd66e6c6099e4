import os
from pathlib import Path

import numpy as np
import pytest

SHARED_DATA = Path(os.environ.get("VASTML_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def direct_gauss(x, y, q, h):
    """The O(MN) oracle in NumPy: sum_i q_i exp(-||y_j - x_i||^2 / h^2)."""
    x = np.atleast_2d(np.asarray(x, float).reshape(len(x), -1))
    y = np.atleast_2d(np.asarray(y, float).reshape(len(y), -1))
    d2 = ((y[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    return np.exp(-d2 / h**2) @ q
