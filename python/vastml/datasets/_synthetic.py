"""Simple synthetic point sets (the thesis's "uniform" and "clumpy" data)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, overload

import numpy as np

if TYPE_CHECKING:
    from vastml._typing import FloatArray, IntArray, Seed


def make_uniform(n_samples: int, n_features: int, *, random_state: Seed = None) -> FloatArray:
    """Points uniform in the unit hypercube [0, 1]^d.

    Examples
    --------
    >>> from vastml.datasets import make_uniform
    >>> make_uniform(5, 3, random_state=0).shape
    (5, 3)
    """
    rng = np.random.default_rng(random_state)
    return rng.uniform(size=(int(n_samples), int(n_features)))


@overload
def make_gaussian_mixture(
    n_samples: int,
    n_features: int,
    *,
    n_components: int = ...,
    cluster_std: float = ...,
    random_state: Seed = ...,
    return_labels: Literal[False] = ...,
) -> FloatArray: ...
@overload
def make_gaussian_mixture(
    n_samples: int,
    n_features: int,
    *,
    n_components: int = ...,
    cluster_std: float = ...,
    random_state: Seed = ...,
    return_labels: Literal[True],
) -> tuple[FloatArray, IntArray]: ...
def make_gaussian_mixture(
    n_samples: int,
    n_features: int,
    *,
    n_components: int = 10,
    cluster_std: float = 0.05,
    random_state: Seed = None,
    return_labels: bool = False,
) -> FloatArray | tuple[FloatArray, IntArray]:
    """"Clumpy" data: a mixture of isotropic Gaussians with centres uniform in [0.1, 0.9]^d.

    Parameters
    ----------
    n_samples, n_features : int
        Shape of the output.
    n_components : int, default=10
        Number of Gaussians (the thesis uses 10).
    cluster_std : float, default=0.05
        Standard deviation of each Gaussian.
    random_state : int, Generator or None
        Seed.
    return_labels : bool, default=False
        Also return the component of each point.

    Examples
    --------
    >>> from vastml.datasets import make_gaussian_mixture
    >>> X, y = make_gaussian_mixture(100, 2, n_components=3, random_state=0, return_labels=True)
    >>> X.shape, sorted(set(y.tolist()))
    ((100, 2), [0, 1, 2])
    """
    rng = np.random.default_rng(random_state)
    centres = rng.uniform(0.1, 0.9, size=(int(n_components), int(n_features)))
    labels = rng.integers(0, n_components, size=int(n_samples))
    X = centres[labels] + cluster_std * rng.standard_normal((int(n_samples), int(n_features)))
    return (X, labels) if return_labels else X
