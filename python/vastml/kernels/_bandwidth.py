"""Bandwidth selection for Gaussian kernel density estimates.

Rules of thumb (Scott, Silverman) and the Sheather-Jones solve-the-equation plug-in selector
with the density functionals computed by fast Hermite x Gaussian sums (Raykar's thesis,
chapter 6), plus the exact O(N^2) path used to test it.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np
import scipy.fft as sfft
from scipy.optimize import brentq

from vastml import _core
from vastml._progress import Progress
from vastml._validation import (
    as_float_array,
    as_points,
    check_finite_data,
    check_int,
    choice,
    n_jobs_arg,
    open_unit_float,
    positive_float,
)
from vastml.kernels._sums import SUM_METHODS, as_line, hermite_gauss_sum

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy.typing as npt

    from vastml._typing import ArrayLike, FloatArray

SQRT_2PI = math.sqrt(2.0 * math.pi)
SQRT_PI = math.sqrt(math.pi)


def _stds(X: ArrayLike) -> tuple[FloatArray, int, int]:
    X = as_points(X, "X")
    n, d = X.shape
    if n < 2:
        raise ValueError(f"`X` needs at least 2 samples to estimate a spread, got {n}")
    std = X.std(axis=0, ddof=1)
    if np.any(std == 0):
        raise ValueError("`X` has a feature with zero variance: no bandwidth can be derived from it")
    return std, n, d


def rule_of_thumb(n_samples: int, n_features: int, std: ArrayLike) -> FloatArray:
    r"""The normal-reference rule of thumb of Raykar's thesis, eq. (5.6), = Silverman's rule.

    .. math:: h_j = \left(\frac{4}{d+2}\right)^{1/(d+4)} N^{-1/(d+4)} \hat\sigma_j

    Examples
    --------
    >>> round(float(rule_of_thumb(44484, 1, 0.198555)), 6)  # SARCOS, Table 5.1
    0.02473
    """
    d = int(n_features)
    return (4.0 / (d + 2)) ** (1.0 / (d + 4)) * float(n_samples) ** (-1.0 / (d + 4)) * np.asarray(std)


def silverman_bandwidth(X: ArrayLike) -> FloatArray:
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


def scott_bandwidth(X: ArrayLike) -> FloatArray:
    """Per-feature Scott bandwidths, ``n^(-1/(d+4)) std_j`` (SciPy's ``gaussian_kde`` factor).

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.stats import gaussian_kde
    >>> from vastml.kernels import scott_bandwidth
    >>> x = np.random.default_rng(0).normal(size=(5000, 1))
    >>> h = scott_bandwidth(x)
    >>> bool(np.isclose(h[0], gaussian_kde(x[:, 0]).factor * x[:, 0].std(ddof=1)))
    True
    """
    std, n, d = _stds(X)
    return float(n) ** (-1.0 / (d + 4)) * std


#: Largest derivative order of the density functionals (higher orders are numerically
#: meaningless and their factorials absurdly large).
MAX_DERIVATIVE_ORDER = 1000


def _power(h: float, k: int) -> float:
    """``h ** k``, inf when it overflows (a huge bandwidth makes the sums vanish, not fail)."""
    try:
        return h**k
    except OverflowError:
        return math.inf


def normal_reference_functional(derivative_order: int, std: float) -> float:
    r"""The density functional :math:`\Phi_r = \int p^{(r)} p` of :math:`N(0, \sigma^2)`, r even.

    .. math:: \Phi_r = \frac{(-1)^{r/2}\, r!}{(2\sigma)^{r+1} (r/2)!\, \sqrt{\pi}}

    Examples
    --------
    >>> import math
    >>> bool(abs(normal_reference_functional(6, 1.0) + 15 / (16 * math.sqrt(math.pi))) < 1e-15)
    True
    """
    order = check_int(derivative_order, "derivative_order", low=0, high=MAX_DERIVATIVE_ORDER)
    if order % 2:
        raise ValueError(f"`derivative_order` must be even, got {order}")
    std = positive_float(std, "std")
    half = order // 2
    try:
        denominator = _power(2 * std, order + 1) * math.factorial(half) * SQRT_PI
        return (-1) ** half * math.factorial(order) / denominator
    except (OverflowError, ZeroDivisionError):
        raise ValueError(
            f"the functional of order {order} at `std`={std} is beyond the range of a float"
        ) from None


def density_derivative(
    data: ArrayLike,
    at: ArrayLike,
    derivative_order: int,
    bandwidth: float,
    epsilon: float = 1e-6,
    method: str = "auto",
    n_jobs: int | None = None,
) -> FloatArray:
    r"""The r-th derivative of the Gaussian kernel density estimate of 1-D ``data`` at ``at``.

    .. math:: \hat p^{(r)}(x) = \frac{(-1)^r}{\sqrt{2\pi} N h^{r+1}}
              \sum_i He_r\!\left(\frac{x - x_i}{h}\right) e^{-(x - x_i)^2 / 2h^2}

    computed with one fast Hermite x Gaussian sum; the absolute error is at most
    ``epsilon / (sqrt(2 pi) h^(r+1))``.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(1).normal(size=20000)
    >>> slope = density_derivative(x, [-1.0, 1.0], derivative_order=1, bandwidth=0.2)
    >>> bool(slope[0] > 0 > slope[1])
    True
    """
    x = as_line(data, "data")
    at = as_line(at, "at")
    h = positive_float(bandwidth, "bandwidth")
    order = check_int(derivative_order, "derivative_order", low=0, high=30)
    g = hermite_gauss_sum(x, at, order, h, math.sqrt(2.0) * h, None, epsilon, method, n_jobs)
    return (-1) ** order * g / (SQRT_2PI * x.shape[0] * _power(h, order + 1))


def density_functional(
    data: ArrayLike,
    derivative_order: int,
    bandwidth: float,
    epsilon: float = 1e-3,
    method: str = "auto",
    n_jobs: int | None = None,
) -> float:
    r"""The estimate :math:`\hat\Phi_r(g)` of :math:`\int p^{(r)} p` for even r (thesis eq. 6.21).

    .. math:: \hat\Phi_r(g) = \frac{1}{N(N-1)\sqrt{2\pi}\, g^{r+1}}
              \sum_i \sum_j He_r\!\left(\frac{x_i - x_j}{g}\right) e^{-(x_i - x_j)^2 / 2g^2}

    (the double sum includes i = j, normalised by N(N-1) as in the thesis).

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.kernels import density_functional, normal_reference_functional
    >>> x = np.random.default_rng(0).normal(size=20000)
    >>> phi4 = density_functional(x, 4, bandwidth=0.3, epsilon=1e-8)
    >>> bool(abs(phi4 / normal_reference_functional(4, 1.0) - 1) < 0.2)   # near N(0, 1)'s
    True
    """
    x = as_line(data, "data")
    g = positive_float(bandwidth, "bandwidth")
    order = check_int(derivative_order, "derivative_order", low=0, high=30)
    if order % 2:
        raise ValueError(f"`derivative_order` must be even, got {order}")
    n = x.shape[0]
    if n < 2:
        raise ValueError(f"`data` needs at least 2 samples, got {n}")
    s = hermite_gauss_sum(x, x, order, g, math.sqrt(2.0) * g, None, epsilon, method, n_jobs).sum()
    return float(s / (n * (n - 1) * SQRT_2PI * _power(g, order + 1)))


#: Sample size from which ``method="auto"`` bins the data before the functional sums.
BIN_FROM = 20_000
#: Largest grid spacing of a binned functional, as a fraction of its pilot bandwidth (the
#: coarse one of the two solves compared; the fine one uses half of it).
BIN_RESOLUTION = 1.0 / 20.0
#: Relative accuracy the binned bandwidth must show between two grids (spacing and half of it);
#: the finer one's error is then about a third of it (the error falls as the spacing squared).
BIN_RTOL = 5e-5
#: Largest number of grid nodes; points beyond the grid are kept as points.
MAX_BINS = 4_000_000
#: The pyramid's finest level is this many times finer than the first solves need, so that
#: the resolution can halve twice on the same interval (levels are made on first use, so an
#: unused fine level costs nothing).
HEADROOM = 4
#: Fraction of the points on each side left beyond the grid when the data's range would
#: take more than max(2^16, n) nodes (heavy tails, far outliers).
TAIL_FRACTION = 1e-4
#: SJ constants of the two conventions: pilot factors (a, b) on scale * n^(-1/7), n^(-1/9),
#: the ratio factor of gamma(h), and the upper end of the root's bracket on scale * n^(-1/5).
_CONSTANTS = {
    # exact values of the normal reference (thesis eqs. 6.27-6.33)
    "thesis": ((6.4 / math.sqrt(2.0)) ** (1 / 7), (960.0 / 105.0 / math.sqrt(2.0)) ** (1 / 9),
               (6.0 * math.sqrt(2.0)) ** (1 / 7)),
    # the rounded ones of R's stats::bw.SJ
    "R": (1.24, 1.23, 1.357),
}
CONVENTIONS = tuple(_CONSTANTS)


def robust_scale(x: ArrayLike) -> float:
    """``min(sd, IQR / 1.349)``, the scale of R's ``bw.SJ`` and ``bw.nrd0`` (the sd alone when
    the IQR is zero).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.r_[np.random.default_rng(0).normal(size=999), 1e6]   # one far outlier
    >>> bool(0.9 < robust_scale(x) < 1.1)
    True
    """
    x = as_float_array(x, "x").ravel()
    if x.size < 2:
        raise ValueError(f"`x` needs at least 2 values for a scale, got {x.size}")
    check_finite_data(x, "x")
    sd = float(x.std(ddof=1))
    q25, q75 = np.percentile(x, [25.0, 75.0])
    iqr = float(q75 - q25) / 1.349
    return min(sd, iqr) if iqr > 0 else sd


def _percentiles(x: FloatArray, q: tuple[float, ...], ranks: tuple[int, ...] = ()) -> list[float]:
    """``np.percentile(x, q)`` (its default linear interpolation, to the last bit) from the
    exact order statistics, without sorting or copying x; then the values of ``ranks``, from
    the same pass."""
    n = x.shape[0]
    below = [math.floor(p / 100.0 * (n - 1)) for p in q]
    wanted = sorted({r for i in below for r in (i, min(i + 1, n - 1))} | set(ranks))
    value = dict(zip(wanted, _core.order_statistics(x, wanted)))
    out = []
    for p, i in zip(q, below):
        a, b, t = value[i], value[min(i + 1, n - 1)], p / 100.0 * (n - 1) - i
        out.append(a + (b - a) * t if t < 0.5 else b - (b - a) * (1.0 - t))
    return out + [value[r] for r in ranks]


def _standardise(x: FloatArray) -> tuple[FloatArray, float, tuple[float, float]]:
    """(z, unit, tails) with z = (x - median) / unit of robust scale 1: the selector is
    equivariant, so h(x) = unit * h(z); dividing by the largest deviation first keeps
    x * 1e-300 and x * 1e300 finite. ``tails``: z's values of ranks k and n - 1 - k, k =
    ceil(n ``TAIL_FRACTION``) (the same operations on the same values as z's, so exactly z's
    order statistics), from the pass that finds the quartiles."""
    n = x.shape[0]
    k = min(n // 2 - 1, math.ceil(n * TAIL_FRACTION))
    q25, center, q75, low, high = _percentiles(x, (25.0, 50.0, 75.0), (k, n - 1 - k))
    spread = max(center - float(x.min()), float(x.max()) - center)
    if not spread > 0 or not math.isfinite(spread):
        raise ValueError("`data` has zero variance: the bandwidth is undefined")
    z = x - center
    z /= spread
    # the sd from two sums without the temporaries of z.std() (|z| <= 1 and z is centred on
    # its median, so the difference below does not cancel; std() where it would)
    total, squares = float(z.sum()), float(np.einsum("i,i->", z, z))  # no BLAS threads
    spread_sq = squares - total * total / n
    sd = math.sqrt(spread_sq / (n - 1)) if spread_sq > 1e-6 * squares else float(z.std(ddof=1))
    iqr = (q75 / spread - q25 / spread) / 1.349
    scale = min(sd, iqr) if iqr > 0 else sd
    if not scale > 0:
        raise ValueError("`data` has zero variance: the bandwidth is undefined")
    z /= scale
    tails = ((low - center) / spread / scale, (high - center) / spread / scale)
    return z, spread * scale, tails


@functools.lru_cache(maxsize=None)
def _hermite_powers(order: int) -> tuple[float, ...]:
    """The coefficients of He_order in powers of u^2 (of u * u^2k for odd orders)."""
    unit = np.zeros(order + 1)
    unit[order] = 1.0
    return tuple(float(c) for c in np.polynomial.hermite_e.herme2poly(unit)[order % 2 :: 2])


def _hermite_gauss(u: npt.NDArray[Any], order: int) -> FloatArray:
    """He_order(u) exp(-u^2 / 2), by Horner's rule in u^2 (half the work of ``hermeval``)."""
    powers = _hermite_powers(order)
    v = u * u
    out = np.full_like(v, powers[-1])
    for c in powers[-2::-1]:
        out *= v
        out += c
    if order % 2:
        out *= u
    out *= np.exp(-0.5 * v)
    return out


#: Relative cost of one multiply-add of the direct tail sums against one unit n log2(n) of an
#: FFT pair over n nodes (measured: about 1 ns against 2 ns on this kind of machine).
DIRECT_COST = 0.5


def _dense_span(w: FloatArray, lags: int) -> tuple[int, int]:
    """The nodes [lo, hi) whose autocorrelation is cheapest by FFT, the pairs with a node
    outside summed directly: minimises (hi - lo + lags) log2(hi - lo + lags) + DIRECT_COST
    (lags + 1) (nonzero weights outside), over cuts that leave 0, 0.1%, 0.3%, 1%, 3% or
    10% of the nonzero weights on each side."""
    if len(w) <= 16 * lags:  # the FFT costs little next to the lags' own sums
        return 0, len(w)
    nz = np.flatnonzero(w)
    if nz.size < 2:
        return 0, len(w)
    best, span = math.inf, (0, len(w))
    cuts = sorted({min(nz.size - 1, int(f * nz.size)) for f in (0.0, 1e-3, 3e-3, 1e-2, 3e-2, 0.1)})
    for left in cuts:
        for right in cuts:
            lo, hi = int(nz[left]) if left else 0, int(nz[nz.size - 1 - right]) + 1 if right else len(w)
            if hi - lo < lags + 1:
                continue
            m = hi - lo + lags
            cost = m * math.log2(m) + DIRECT_COST * (lags + 1) * (left + right)
            if cost < best:
                best, span = cost, (lo, hi)
    return span


class _BinnedPairs:
    """The pairwise sums of a linear binning of z on a regular grid.

    sum_ij K(z_i - z_j) over the grid is sum_lag K(lag * spacing) A(lag), with A the
    autocorrelation of the bin weights (one FFT, on first use): each functional then costs
    one dot product over the lags within the kernel's reach. Points beyond the grid are kept
    as points and their pairs summed with the fast Hermite sums.
    """

    def __init__(
        self, spacing: float, weights: npt.NDArray[Any], lo: float, last: float, out: _Outside | None
    ) -> None:
        """Bin weights ``weights`` on the nodes ``lo + k spacing`` up to ``last`` (the binned
        interval's end; trailing nodes beyond it are zero); ``out``: the points beyond."""
        self.spacing, self.weights, self.lo, self.last, self.out = spacing, weights, lo, last, out
        self._autocorrelation: FloatArray | None = None

    def autocorrelation(self, lags: int) -> FloatArray:
        """sum_k w_k w_(k + lag) for lag = 0 .. ``lags`` (at least), kept for the next call:
        one FFT of the dense middle of the weights (zero-padded by the lags, which keeps them
        free of wrap-around) plus the pairs with a node in the sparse tails, summed directly
        (``_core.edge_autocorrelation``), the split chosen by ``_dense_span``."""
        if self._autocorrelation is None or len(self._autocorrelation) <= lags:
            w = self.weights
            lags = min(len(w) - 1, max(2 * lags, 1600))
            lo, hi = _dense_span(w, lags)
            size = sfft.next_fast_len(hi - lo + lags, real=True)
            spectrum = sfft.rfft(w[lo:hi], size)
            a = sfft.irfft(spectrum.real**2 + spectrum.imag**2, size)[: lags + 1]
            if lo > 0 or hi < len(w):
                a += _core.edge_autocorrelation(w, (lo, hi), lags)
            self._autocorrelation = a
        return self._autocorrelation

    def coarsen(self) -> _BinnedPairs:
        """The same data on the grid of twice the spacing (hat of a coarse node = the fine
        one plus half of each neighbour's): exactly the linear binning on that grid."""
        w = self.weights
        half = 0.5 * w[1::2]
        coarse = np.zeros(len(w) // 2 + 1)
        coarse[: (len(w) + 1) // 2] = w[0::2]
        coarse[: len(half)] += half
        coarse[1 : len(half) + 1] += half
        return _BinnedPairs(2 * self.spacing, coarse, self.lo, self.last, self.out)

    def pair_sum(self, order: int, g: float, epsilon: float, n_jobs: int | None) -> float:
        """sum_ij He_r(d_ij / g) exp(-d_ij^2 / 2 g^2) over all ordered pairs (i = j too)."""
        reach = int(min(len(self.weights) - 1, math.ceil(13.0 * g / self.spacing)))
        u = np.arange(reach + 1) * (self.spacing / g)
        k = _hermite_gauss(u, order)
        a = self.autocorrelation(reach)[: reach + 1]
        total = a[0] * k[0] + 2.0 * float(a[1:] @ k[1:])
        if self.out is not None:
            total += self._outside_pairs(order, g, epsilon, n_jobs)
        return total

    def _outside_pairs(self, order: int, g: float, epsilon: float, n_jobs: int | None) -> float:
        """Pairs with a point beyond the grid: grid-point pairs twice, point-point once. Only
        the grid nodes and points within the kernel's reach (13 g, where it is below 1e-30)
        take part."""
        if self.out is None:
            return 0.0
        reach, total = 13.0 * g, 0.0
        first = self.lo
        # the points below the grid reach its first nodes, those above its last ones
        for near in self.out.near(first, self.last, reach):
            if not near.size:
                continue
            a = int(max(0, math.floor((near[0] - reach - first) / self.spacing)))
            b = int(min(len(self.weights), math.ceil((near[-1] + reach - first) / self.spacing) + 1))
            keep = a + np.flatnonzero(self.weights[a:b] > 0)
            if keep.size * near.size <= 200_000:  # direct, without planning a transform
                u = (near[None, :] - (self.lo + keep[:, None] * self.spacing)) / g
                kernel = _hermite_gauss(u, order)
                total += 2.0 * float(self.weights[keep] @ kernel.sum(axis=1))
            elif keep.size:
                nodes = self.lo + keep * self.spacing
                h2 = math.sqrt(2.0) * g
                cross = hermite_gauss_sum(nodes, near, order, g, h2, self.weights[keep], epsilon, "auto", n_jobs)
                total += 2.0 * float(cross.sum())
        return total + self.out.pair_sum(order, g, epsilon, n_jobs)


class _Outside:
    """The points beyond a grid's interval, sorted, shared by the pyramid's levels; a few
    hundred of them keep their pairwise differences for the direct sums."""

    def __init__(self, points: FloatArray) -> None:
        self.points = np.sort(points)
        self._gaps = self.points[:, None] - self.points[None, :] if points.size <= 300 else None

    def near(self, first: float, last: float, reach: float) -> tuple[FloatArray, FloatArray]:
        """The points within ``reach`` below ``first`` and within ``reach`` above ``last``."""
        p = self.points
        below = p[np.searchsorted(p, first - reach, "right") : np.searchsorted(p, first, "left")]
        above = p[np.searchsorted(p, last, "right") : np.searchsorted(p, last + reach, "left")]
        return below, above

    def pair_sum(self, order: int, g: float, epsilon: float, n_jobs: int | None) -> float:
        """sum_ij He_r(d_ij / g) exp(-d_ij^2 / 2 g^2) over the ordered pairs of the points."""
        if self._gaps is not None:
            return float(_hermite_gauss(self._gaps / g, order).sum())
        p, h2 = self.points, math.sqrt(2.0) * g
        return float(hermite_gauss_sum(p, p, order, g, h2, None, epsilon, "auto", n_jobs).sum())


class _Pyramid:
    """A linear binning of z at spacing, 2 spacing, 4 spacing, ... over one interval: a
    functional at pilot g is summed on the coarsest grid whose spacing is at most
    ``resolution * g``, so that every functional has the same relative binning error
    O((spacing / g)^2) and costs a few hundred lags whatever g is.

    The interval's node count is rounded up so that every level ends on the same node. A
    level is made on first use: by exact coarsening of a finer level when that grid is small
    against the data, else by binning the data directly (so a fine level nobody uses costs
    nothing). When the data outnumber the finest grid's nodes four times, the finest level is
    binned at once and every other level coarsened from it. ``out`` (the points beyond the
    interval) is known once a level is made.
    """

    def __init__(self, z: FloatArray, spacing: float, window: tuple[float, float]) -> None:
        lo, hi = window
        nodes = math.ceil((hi - lo) / spacing) + 2
        self.depth = max(0, int(math.log2(nodes / 16.0))) if nodes > 16 else 0
        step = 1 << self.depth
        self.nodes = (nodes - 1 + step - 1) // step * step + 1
        self.z, self.lo, self.spacing = z, lo, spacing
        self.last = lo + (self.nodes - 1) * spacing
        self.levels: dict[int, _BinnedPairs] = {}
        self.out: _Outside | None = None
        if z.shape[0] > 4 * self.nodes:
            self._bin(0)

    def _bin(self, j: int) -> _BinnedPairs | None:
        """Level ``j`` binned from the data (None when its points beyond differ from the
        first level's, a rounding at the interval's end: the caller coarsens instead)."""
        weights, out = _core.linear_binning(
            self.z, (0.0, 1.0), (self.lo, self.spacing * 2.0**j, (self.nodes - 1 >> j) + 1)
        )
        if self.levels and out.size != (0 if self.out is None else self.out.points.size):
            return None
        if not self.levels:
            self.out = _Outside(out) if out.size else None
        level = self.levels[j] = _BinnedPairs(self.spacing * 2.0**j, weights, self.lo, self.last, self.out)
        return level

    def level(self, j: int) -> _BinnedPairs:
        """Level ``j`` (spacing * 2^j), made if it is not there yet."""
        if j in self.levels:
            return self.levels[j]
        finer = max((i for i in self.levels if i < j), default=None)
        # coarsening costs about 1.5 ns per fine node, binning 3.5 ns per point
        if finer is None or len(self.levels[finer].weights) > 2 * self.z.shape[0]:
            level = self._bin(j)
            if level is not None:
                return level
            finer = finer if finer is not None else self._bin_finest()
        for i in range(finer, j):
            self.levels[i + 1] = self.levels[i].coarsen()
        return self.levels[j]

    def _bin_finest(self) -> int:
        """Level 0 binned from the data even where its points beyond differ (it then counts
        as the reference): every level is coarsened from it."""
        self.levels.clear()
        self._bin(0)
        return 0

    def index(self, g: float, resolution: float) -> int:
        """The level of pilot ``g``: the coarsest whose spacing is at most ``resolution * g``
        (the finest one when even that is coarser)."""
        j = 0
        while j < self.depth and self.spacing * 2.0 ** (j + 1) <= resolution * g:
            j += 1
        return j

    def at(self, g: float, resolution: float) -> _BinnedPairs:
        """The grid for pilot ``g`` (see ``index``)."""
        return self.level(self.index(g, resolution))

    def start(self, g: float, resolution: float) -> None:
        """Makes the level of pilot ``g`` and, when it is small enough to be coarsened from,
        none of the coarser ones by binning: the solves ask for coarse levels first, so the
        finest level they are expected to need is binned before them."""
        j = self.index(g, resolution)
        while j < self.depth and (self.nodes - 1 >> j) + 1 > 2 * self.z.shape[0]:
            j += 1
        self.level(j)


def _window(z: FloatArray, spacing: float, budget_nodes: int, tails: tuple[float, float]) -> tuple[float, float]:
    """The interval of the grid of ``spacing``: the data's range when it takes at most
    ``budget_nodes`` nodes. Otherwise the range between ``tails`` (the order statistics that
    leave the ``TAIL_FRACTION`` outermost points out on each side) widened by half its length
    on each side, within the data, then cut to that many nodes. Points beyond stay points."""
    budget = budget_nodes * spacing
    lo, hi = float(z.min()), float(z.max())
    if hi - lo <= budget:
        return lo, hi
    q_lo, q_hi = tails
    margin = 0.5 * (q_hi - q_lo)
    lo, hi = max(lo, q_lo - margin), min(hi, q_hi + margin)
    if hi - lo > budget:
        lo = max(lo, -0.5 * budget)  # z is centred on the median
        hi = min(hi, lo + budget)
    return lo, hi


def _functional(
    nodes: FloatArray,
    weights: FloatArray | None,
    n: int,
    order: int,
    g: float,
    epsilon: float,
    method: str,
    n_jobs: int | None,
) -> float:
    """Phi_r(g) of the N points the weighted nodes stand for (thesis eq. 6.21, N(N-1))."""
    q = None if weights is None else weights
    G = hermite_gauss_sum(nodes, nodes, order, g, math.sqrt(2.0) * g, q, epsilon, method, n_jobs)
    s = float(G.sum() if weights is None else G @ weights)
    return s / (n * (n - 1) * SQRT_2PI * g ** (order + 1))


def _r_zeroin(
    f: Callable[[float], float], ax: float, bx: float, fa: float, fb: float, tol: float, maxit: int = 1000
) -> float:
    """R's ``R_zeroin2`` (Brent), step for step, as ``uniroot`` calls it."""
    eps = np.finfo(float).eps
    a, b, c, fc = ax, bx, ax, fa
    if fa == 0:
        return a
    if fb == 0:
        return b
    for _ in range(maxit + 1):
        prev_step = b - a
        if abs(fc) < abs(fb):
            a, b, c = b, c, b
            fa, fb, fc = fb, fc, fb
        tol_act = 2 * eps * abs(b) + tol / 2
        new_step = (c - b) / 2
        if abs(new_step) <= tol_act or fb == 0:
            return b
        if abs(prev_step) >= tol_act and abs(fa) > abs(fb):
            cb = c - b
            if a == c:
                t1 = fb / fa
                p = cb * t1
                q = 1.0 - t1
            else:
                q, t1, t2 = fa / fc, fb / fc, fb / fa
                p = t2 * (cb * q * (q - t1) - (b - a) * (t1 - 1.0))
                q = (q - 1.0) * (t1 - 1.0) * (t2 - 1.0)
            if p > 0:
                q = -q
            else:
                p = -p
            if p < (0.75 * cb * q - abs(tol_act * q) / 2) and p < abs(prev_step * q / 2):
                new_step = p / q
        if abs(new_step) < tol_act:
            new_step = tol_act if new_step > 0 else -tol_act
        a, fa = b, fb
        b += new_step
        fb = f(b)
        if (fb > 0 and fc > 0) or (fb < 0 and fc < 0):
            c, fc = a, fa
    return b


def _secant(equation: Callable[[float], float], near: float) -> float | None:
    """The root of ``equation`` by secant steps from ``near`` (a root of a nearby equation:
    three or four evaluations), or None when the steps do not settle within 0.5-2x of it."""
    x0, x1 = near, near * 1.0005
    f0, f1 = equation(x0), equation(x1)
    for _ in range(10):
        if f1 == f0:
            return x1 if f1 == 0 else None
        x0, x1, f0 = x1, x1 - f1 * (x1 - x0) / (f1 - f0), f1
        if not 0.5 * near < x1 < 2.0 * near:
            return None
        if abs(x1 - x0) <= 1e-11 * x1:
            return x1
        f1 = equation(x1)
    return None


def _solve(
    phi: Callable[[int, float], float], n: int, convention: str, near: float | None = None
) -> tuple[float, dict[str, float]]:
    """The SJ equation on standardised data (robust scale 1); phi(order, g) -> Phi_r(g).
    ``near``: a bandwidth the root is known to be close to (thesis convention)."""
    a_factor, b_factor, ratio_factor = _CONSTANTS[convention]
    g1 = a_factor * n ** (-1.0 / 7.0)
    g2 = b_factor * n ** (-1.0 / 9.0)
    phi4_g1 = phi(4, g1)
    phi6_g2 = phi(6, g2)
    if not (phi4_g1 > 0 and phi6_g2 < 0):
        raise ValueError(
            "the pilot density functionals have the wrong sign (Phi_4 must be > 0, Phi_6 < 0); "
            "the data are too far from a smooth density for the plug-in selector"
        )
    ratio = ratio_factor * (phi4_g1 / -phi6_g2) ** (1.0 / 7.0)
    c1 = 1.0 / (2.0 * SQRT_PI * n)

    def equation(h: float) -> float:
        phi4 = phi(4, ratio * h ** (5.0 / 7.0))
        if phi4 <= 0:
            return h  # the estimate failed at this pilot: move on as if h were too small
        return (c1 / phi4) ** 0.2 - h

    details = {"g1": g1, "g2": g2, "phi4_g1": phi4_g1, "phi6_g2": phi6_g2}
    if convention == "R":
        hmax = 1.144 * n ** -0.2
        lower, upper = 0.1 * hmax, hmax
        f_lo, f_hi = equation(lower), equation(upper)
        itry = 1
        while f_lo * f_hi > 0:
            if itry > 99:
                raise ValueError("no solution in the specified range of bandwidths")
            if itry % 2:
                upper *= 1.2
                f_hi = equation(upper)
            else:
                lower /= 1.2
                f_lo = equation(lower)
            itry += 1
        # R evaluates its default tol = 0.1 * lower lazily, after the bracket has grown
        return _r_zeroin(equation, lower, upper, f_lo, f_hi, 0.1 * lower), details
    if near is not None:
        root = _secant(equation, near)
        if root is not None:
            return root, details
    # Bracket around the normal-reference bandwidth (the root is rarely far below it).
    h_normal = (4.0 / (3.0 * n)) ** 0.2
    lo, hi = (h_normal / 2.0, 2.0 * h_normal) if near is None else (near * 0.999, near * 1.001)
    f_lo, f_hi = -equation(lo), -equation(hi)
    for _ in range(40):
        if f_lo < 0 < f_hi:
            break
        if f_lo >= 0:
            lo /= 4.0 if near is None else 1.1
            f_lo = -equation(lo)
        if f_hi <= 0:
            hi *= 4.0 if near is None else 1.1
            f_hi = -equation(hi)
    else:
        raise ValueError("could not bracket the Sheather-Jones equation's root")
    return brentq(lambda h: -equation(h), lo, hi, xtol=1e-14, rtol=1e-9), details


@overload
def sheather_jones(
    data: ArrayLike,
    epsilon: float = ...,
    method: str = ...,
    n_jobs: int | None = ...,
    return_details: Literal[False] = ...,
    *,
    convention: str = ...,
    verbose: bool | int = ...,
) -> float: ...
@overload
def sheather_jones(
    data: ArrayLike,
    epsilon: float,
    method: str,
    n_jobs: int | None,
    return_details: Literal[True],
    *,
    convention: str = ...,
    verbose: bool | int = ...,
) -> tuple[float, dict[str, float]]: ...
@overload
def sheather_jones(
    data: ArrayLike,
    epsilon: float = ...,
    method: str = ...,
    n_jobs: int | None = ...,
    *,
    return_details: Literal[True],
    convention: str = ...,
    verbose: bool | int = ...,
) -> tuple[float, dict[str, float]]: ...
def sheather_jones(
    data: ArrayLike,
    epsilon: float = 1e-6,
    method: str = "auto",
    n_jobs: int | None = None,
    return_details: bool = False,
    *,
    convention: str = "thesis",
    verbose: bool | int = False,
) -> float | tuple[float, dict[str, float]]:
    r"""The Sheather-Jones solve-the-equation plug-in bandwidth of 1-D data.

    Minimises the AMISE of a Gaussian kernel density estimate by solving
    :math:`h = [R(K) / (\mu_2(K)^2 \hat\Phi_4(\gamma(h)) N)]^{1/5}` with the two-stage pilot
    estimates of Raykar's thesis, section 6.5.2. Every density functional is one fast
    Hermite x Gaussian sum (O(N) instead of O(N^2)).

    The scale of the normal-reference pilots is R's robust ``min(sd, IQR / 1.349)``, so a far
    outlier does not inflate the pilots; the data are standardised first (the selector is
    scale-equivariant), so values of any magnitude work.

    From ``BIN_FROM`` samples on, ``method="auto"`` bins the data linearly on a regular grid
    and sums each density functional at pilot g on the coarsest of the grid's exact
    coarsenings (spacing, 2 spacing, 4 spacing, ...) whose spacing is at most r g, so that
    every functional has the same relative binning error O((spacing / g)^2) and costs a few
    hundred lags whatever g is (the autocorrelation of the bin weights by one FFT over the
    grid's dense middle, the pairs with a node in sparse tails summed directly). It solves
    with r = ``BIN_RESOLUTION`` and with r / 2 and
    accepts when the two bandwidths agree to ``BIN_RTOL`` (5e-5; the error falls as r^2, so
    the finer one is then within about a third of that, 1.6e-5 at most on the Marron-Wand
    and heavy-tailed benchmark samples); otherwise it halves r, binning again
    whenever the grid is too coarse for the smallest pilot near the root. When the data's
    range would take more than max(2^16, N) nodes (heavy tails, far outliers), the grid
    covers the inner points and the outermost ``TAIL_FRACTION`` on each side stays points,
    whose pairs go through the fast Hermite sums; a grid that would leave more than 5% of the
    data outside falls back to the points.

    Parameters
    ----------
    data : array-like of shape (n_samples,)
    epsilon : float, default=1e-6
        Accuracy of each sum, relative to N^2 (the thesis used 1e-3, which leaves the bandwidth
        up to about 2e-4 from the exact one; 1e-6 keeps it within 1e-6).
    method : {"auto", "direct", "fast", "binned"}, default="auto"
        ``direct`` is the exact O(N^2) computation (slow; for testing); ``fast`` the fast sums
        over the points; ``binned`` the binned sums at any size.
    n_jobs : int, default=None
    return_details : bool, default=False
        Also return a dict with the pilot bandwidths and functionals.
    convention : {"thesis", "R"}, default="thesis"
        ``thesis`` solves the thesis's equation to full precision with the exact
        normal-reference constants. ``R`` reproduces ``stats::bw.SJ(method="ste")``: its
        constants rounded to three digits (1.24, 1.23, 1.357), its bracket
        [0.1 hmax, hmax] with hmax = 1.144 scale n^(-1/5), grown by 1.2, and its
        ``uniroot`` with the default tolerance 0.1 * lower (R's own Brent, step for step),
        which leaves R's answer about 1% from the root. R also bins the pairwise distances
        (1,000 bins by default, which is what makes it far off on heavy tails); with
        ``convention="R"`` the sums are over the points, as R's with very many bins.
    verbose : bool or int, default=False
        Show a progress bar of the density-functional evaluations (each one fast sum over the
        data or the grid; a selection takes a few dozen).

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
    >>> bool(abs(sheather_jones(x * 1e-40) / 1e-40 - h) < 1e-9 * h)   # any scale
    True
    """
    x = as_line(data, "data", scale_free=True)  # standardised below
    n = x.shape[0]
    if n < 3:
        raise ValueError(f"`data` needs at least 3 samples, got {n}")
    epsilon = open_unit_float(epsilon, "epsilon")
    method = choice(method, "method", SUM_METHODS + ("binned",))
    convention = choice(convention, "convention", CONVENTIONS)
    n_jobs = n_jobs_arg(n_jobs)
    z, unit, tails = _standardise(x)
    binned = method == "binned" or (method == "auto" and n >= BIN_FROM and convention == "thesis")
    with Progress(None, verbose=verbose, desc="sheather_jones") as progress:
        count = _Counter(progress)
        if binned:
            h, details = _solve_binned(z, tails, epsilon, n_jobs, convention, count)
        else:
            sum_method = "auto" if method == "binned" else method

            def phi(order: int, g: float) -> float:
                return count(_functional(z, None, n, order, g, epsilon, sum_method, n_jobs))

            h, details = _solve(phi, n, convention)
            details["grid_spacing"] = 0.0
    h *= unit
    if return_details:
        details.update(
            g1=details["g1"] * unit, g2=details["g2"] * unit,
            phi4_g1=details["phi4_g1"] / unit**5, phi6_g2=details["phi6_g2"] / unit**7,
            sigma=float(x.std(ddof=1)), scale=unit,
        )
        return h, details
    return h


class _Counter:
    """Reports each density-functional evaluation of a selection to a progress bar (the
    selection has no objective of its own: the value reported is the functional)."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.n = 0

    def __call__(self, value: float) -> float:
        if self.progress.active:
            self.n += 1
            self.progress.report(self.n, value)
        return value


def _solve_binned(
    z: FloatArray,
    tails: tuple[float, float],
    epsilon: float,
    n_jobs: int | None,
    convention: str,
    count: _Counter,
) -> tuple[float, dict[str, float]]:
    """SJ on binned data (see sheather_jones): solved with every functional on a grid of
    spacing at most ``r`` times its pilot, and again at ``r / 2``; ``r`` halves until the two
    agree, and the data are binned again whenever the finest grid is too coarse for the
    smallest pilot near the root. ``tails``: see ``_window``."""
    n = z.shape[0]
    a_factor, b_factor, ratio_factor = _CONSTANTS[convention]
    g_min = min(a_factor * n ** (-1.0 / 7.0), b_factor * n ** (-1.0 / 9.0), 0.5 * (4.0 / (3.0 * n)) ** 0.2)
    resolution = BIN_RESOLUTION
    spacing = g_min * resolution / 2.0 / HEADROOM
    norm = n * (n - 1) * SQRT_2PI
    budget_nodes = min(MAX_BINS, HEADROOM * max(1 << 16, n))
    pyramid: _Pyramid | None = None
    near: float | None = None

    memo: dict[tuple[int, float, int], float] = {}

    def solve_at(pyr: _Pyramid, res: float, near: float | None) -> tuple[float, dict[str, float]]:
        def phi(order: int, g: float) -> float:
            grid = pyr.at(g, res)
            key = (order, g, id(grid))
            if key not in memo:
                memo[key] = count(grid.pair_sum(order, g, epsilon, n_jobs) / (norm * g ** (order + 1)))
            return memo[key]
        return _solve(phi, n, convention, near)

    coarse_h: float | None = None
    while True:
        if pyramid is None or pyramid.spacing > spacing:
            memo.clear()
            pyramid = _Pyramid(z, spacing, _window(z, spacing, budget_nodes, tails))
            pyramid.start(g_min, resolution / 2.0)  # the smallest pilot's grid in the fine solve
            coarse_h = None
            if pyramid.out is not None and pyramid.out.points.size > n // 20:  # the grid misses too much
                def phi(order: int, g: float) -> float:
                    return count(_functional(z, None, n, order, g, epsilon, "auto", n_jobs))
                h, details = _solve(phi, n, convention, near)
                details["grid_spacing"] = 0.0
                return h, details
        if coarse_h is None:
            coarse_h, _ = solve_at(pyramid, resolution, near)
        fine_h, details = solve_at(pyramid, resolution / 2.0, coarse_h)
        ratio = ratio_factor * (details["phi4_g1"] / -details["phi6_g2"]) ** (1.0 / 7.0)
        g_root = min(details["g1"], details["g2"], ratio * fine_h ** (5.0 / 7.0))
        near = fine_h
        need = 0.5 * resolution * g_root  # the fine solve's spacing at the smallest pilot
        if pyramid.spacing > 1.25 * need:  # the finest grid is too coarse near the root
            spacing = need / HEADROOM
            continue
        if abs(fine_h - coarse_h) <= BIN_RTOL * fine_h:
            details["grid_spacing"] = pyramid.spacing
            return fine_h, details
        resolution /= 2.0
        coarse_h = fine_h  # the next coarse solve is this fine one, on the same grids
        if pyramid.spacing > 0.625 * need:
            spacing = 0.5 * need / HEADROOM


def sheather_jones_bandwidth(
    X: ArrayLike,
    epsilon: float = 1e-6,
    method: str = "auto",
    n_jobs: int | None = None,
    *,
    verbose: bool | int = False,
) -> FloatArray:
    """Per-feature Sheather-Jones bandwidths of ``X`` (n_samples, n_features); see
    :func:`sheather_jones`.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.kernels import sheather_jones_bandwidth
    >>> X = np.random.default_rng(0).normal(size=(2000, 2)) * [1.0, 10.0]
    >>> h = sheather_jones_bandwidth(X)
    >>> bool(abs(h[1] / h[0] - 10.0) < 1.0)   # scale-equivariant per feature
    True
    """
    X = as_points(X, "X", scale_free=True)  # each column standardised by sheather_jones
    return np.array(
        [sheather_jones(X[:, j], epsilon, method, n_jobs, verbose=verbose) for j in range(X.shape[1])]
    )


#: Names accepted by ``KernelDensity(bandwidth=...)``.
SELECTORS = {
    "scott": scott_bandwidth,
    "silverman": silverman_bandwidth,
    "sheather-jones": sheather_jones_bandwidth,
}
