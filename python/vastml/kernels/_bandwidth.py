"""Bandwidth selection for Gaussian kernel density estimates.

Rules of thumb (Scott, Silverman) and the Sheather-Jones solve-the-equation plug-in selector
with the density functionals computed by fast Hermite x Gaussian sums (Raykar's thesis,
chapter 6), plus the exact O(N^2) path used to test it.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

from vastml._validation import as_points, choice, n_jobs_arg, open_unit_float, positive_float
from vastml.kernels._sums import SUM_METHODS, as_line, hermite_gauss_sum

SQRT_2PI = math.sqrt(2.0 * math.pi)
SQRT_PI = math.sqrt(math.pi)


def _stds(X) -> tuple[np.ndarray, int, int]:
    X = as_points(X, "X")
    n, d = X.shape
    if n < 2:
        raise ValueError(f"`X` needs at least 2 samples to estimate a spread, got {n}")
    std = X.std(axis=0, ddof=1)
    if np.any(std == 0):
        raise ValueError("`X` has a feature with zero variance: no bandwidth can be derived from it")
    return std, n, d


def rule_of_thumb(n_samples: int, n_features: int, std):
    r"""The normal-reference rule of thumb of Raykar's thesis, eq. (5.6), = Silverman's rule.

    .. math:: h_j = \left(\frac{4}{d+2}\right)^{1/(d+4)} N^{-1/(d+4)} \hat\sigma_j

    Examples
    --------
    >>> round(float(rule_of_thumb(44484, 1, 0.198555)), 6)  # SARCOS, Table 5.1
    0.02473
    """
    d = int(n_features)
    return (4.0 / (d + 2)) ** (1.0 / (d + 4)) * float(n_samples) ** (-1.0 / (d + 4)) * np.asarray(std)


def silverman_bandwidth(X) -> np.ndarray:
    """Per-feature Silverman bandwidths, ``(4 / (d + 2))^(1/(d+4)) n^(-1/(d+4)) std_j``.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(size=(10000, 1))
    >>> h = silverman_bandwidth(x)
    >>> bool(abs(h[0] - 1.06 * 10000 ** -0.2) < 0.01)
    True
    """
    std, n, d = _stds(X)
    return rule_of_thumb(n, d, std)


def scott_bandwidth(X) -> np.ndarray:
    """Per-feature Scott bandwidths, ``n^(-1/(d+4)) std_j`` (SciPy's ``gaussian_kde`` factor)."""
    std, n, d = _stds(X)
    return float(n) ** (-1.0 / (d + 4)) * std


def normal_reference_functional(order: int, std: float) -> float:
    r"""The density functional :math:`\Phi_r = \int p^{(r)} p` of :math:`N(0, \sigma^2)`, r even.

    .. math:: \Phi_r = \frac{(-1)^{r/2}\, r!}{(2\sigma)^{r+1} (r/2)!\, \sqrt{\pi}}

    Examples
    --------
    >>> import math
    >>> bool(abs(normal_reference_functional(6, 1.0) + 15 / (16 * math.sqrt(math.pi))) < 1e-15)
    True
    """
    if order % 2:
        raise ValueError(f"`order` must be even, got {order}")
    half = order // 2
    return (-1) ** half * math.factorial(order) / ((2 * std) ** (order + 1) * math.factorial(half) * SQRT_PI)


def density_derivative(data, at, order, bandwidth, epsilon=1e-6, method="auto", n_jobs=None):
    r"""The r-th derivative of the Gaussian kernel density estimate of 1-D ``data`` at ``at``.

    .. math:: \hat p^{(r)}(x) = \frac{(-1)^r}{\sqrt{2\pi} N h^{r+1}}
              \sum_i He_r\!\left(\frac{x - x_i}{h}\right) e^{-(x - x_i)^2 / 2h^2}

    computed with one fast Hermite x Gaussian sum; the absolute error is at most
    ``epsilon / (sqrt(2 pi) h^(r+1))``.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(1).normal(size=20000)
    >>> slope = density_derivative(x, [-1.0, 1.0], order=1, bandwidth=0.2)
    >>> bool(slope[0] > 0 > slope[1])
    True
    """
    x = as_line(data, "data")
    h = positive_float(bandwidth, "bandwidth")
    g = hermite_gauss_sum(x, at, order, h, math.sqrt(2.0) * h, None, epsilon, method, n_jobs)
    return (-1) ** order * g / (SQRT_2PI * x.shape[0] * h ** (order + 1))


def density_functional(data, order, bandwidth, epsilon=1e-3, method="auto", n_jobs=None) -> float:
    r"""The estimate :math:`\hat\Phi_r(g)` of :math:`\int p^{(r)} p` for even r (thesis eq. 6.21).

    .. math:: \hat\Phi_r(g) = \frac{1}{N(N-1)\sqrt{2\pi}\, g^{r+1}}
              \sum_i \sum_j He_r\!\left(\frac{x_i - x_j}{g}\right) e^{-(x_i - x_j)^2 / 2g^2}

    (the double sum includes i = j, normalised by N(N-1) as in the thesis).
    """
    x = as_line(data, "data")
    g = positive_float(bandwidth, "bandwidth")
    n = x.shape[0]
    s = hermite_gauss_sum(x, x, order, g, math.sqrt(2.0) * g, None, epsilon, method, n_jobs).sum()
    return float(s / (n * (n - 1) * SQRT_2PI * g ** (order + 1)))


def sheather_jones(data, epsilon=1e-3, method="auto", n_jobs=None, return_details=False):
    r"""The Sheather-Jones solve-the-equation plug-in bandwidth of 1-D data.

    Minimises the AMISE of a Gaussian kernel density estimate by solving
    :math:`h = [R(K) / (\mu_2(K)^2 \hat\Phi_4(\gamma(h)) N)]^{1/5}` with the two-stage pilot
    estimates of Raykar's thesis, section 6.5.2. Every density functional is one fast
    Hermite x Gaussian sum (O(N) instead of O(N^2)).

    Parameters
    ----------
    data : array-like of shape (n_samples,)
    epsilon : float, default=1e-3
        Accuracy of each sum (the thesis's value; the bandwidth agrees with the exact one to
        about 1e-5 relative).
    method : {"auto", "direct", "fast"}, default="auto"
        ``direct`` is the exact O(N^2) computation (slow; for testing).
    n_jobs : int, default=None
    return_details : bool, default=False
        Also return a dict with the pilot bandwidths and functionals.

    Returns
    -------
    float, or (float, dict) with ``return_details``.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(size=2000)
    >>> h = sheather_jones(x)
    >>> bool(0.2 < h < 0.26)   # AMISE-optimal for N(0, 1): (4 / 3N)^(1/5) = 0.2316
    True
    """
    x = as_line(data, "data")
    n = x.shape[0]
    if n < 3:
        raise ValueError(f"`data` needs at least 3 samples, got {n}")
    epsilon = open_unit_float(epsilon, "epsilon")
    method = choice(method, "method", SUM_METHODS)
    n_jobs = n_jobs_arg(n_jobs)
    sigma = float(x.std(ddof=1))
    if sigma == 0:
        raise ValueError("`data` has zero variance: the bandwidth is undefined")

    def phi(order, g):
        return density_functional(x, order, g, epsilon, method, n_jobs)

    phi6_nr = normal_reference_functional(6, sigma)
    phi8_nr = normal_reference_functional(8, sigma)
    g1 = (-6.0 / (SQRT_2PI * phi6_nr * n)) ** (1.0 / 7.0)
    g2 = (30.0 / (SQRT_2PI * phi8_nr * n)) ** (1.0 / 9.0)
    phi4_g1 = phi(4, g1)
    phi6_g2 = phi(6, g2)
    if not (phi4_g1 > 0 and phi6_g2 < 0):
        raise ValueError(
            "the pilot density functionals have the wrong sign (Phi_4 must be > 0, Phi_6 < 0); "
            "the data are too far from a smooth density for the plug-in selector"
        )
    ratio = (-6.0 * math.sqrt(2.0) * phi4_g1 / phi6_g2) ** (1.0 / 7.0)

    def equation(h):
        gamma = ratio * h ** (5.0 / 7.0)
        phi4 = phi(4, gamma)
        if phi4 <= 0:
            return -h  # the estimate failed at this pilot: treat as "h too large"
        return h - (1.0 / (2.0 * SQRT_PI * phi4 * n)) ** 0.2

    # Bracket around the normal-reference bandwidth (the root is rarely far below it).
    h_normal = (4.0 / (3.0 * n)) ** 0.2 * sigma
    lo, hi = h_normal / 20.0, 2.0 * h_normal
    f_lo, f_hi = equation(lo), equation(hi)
    for _ in range(40):
        if f_lo < 0 < f_hi:
            break
        if f_lo >= 0:
            lo /= 4.0
            f_lo = equation(lo)
        if f_hi <= 0:
            hi *= 4.0
            f_hi = equation(hi)
    else:
        raise ValueError("could not bracket the Sheather-Jones equation's root")
    h = brentq(equation, lo, hi, xtol=1e-12 * sigma, rtol=1e-9)
    if return_details:
        return h, {"g1": g1, "g2": g2, "phi4_g1": phi4_g1, "phi6_g2": phi6_g2, "sigma": sigma}
    return h


def sheather_jones_bandwidth(X, epsilon=1e-3, method="auto", n_jobs=None) -> np.ndarray:
    """Per-feature Sheather-Jones bandwidths of ``X`` (n_samples, n_features)."""
    X = as_points(X, "X")
    return np.array([sheather_jones(X[:, j], epsilon, method, n_jobs) for j in range(X.shape[1])])


#: Names accepted by ``KernelDensity(bandwidth=...)``.
SELECTORS = {
    "scott": scott_bandwidth,
    "silverman": silverman_bandwidth,
    "sheather-jones": sheather_jones_bandwidth,
}
