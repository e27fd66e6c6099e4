"""Gaussian kernel density estimation on the fast Gauss transform."""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from vastml import _core
from vastml._progress import Progress
from vastml._validation import choice, n_jobs_arg, open_unit_float, validate_rows
from vastml.kernels._bandwidth import SELECTORS, sheather_jones_bandwidth
from vastml.kernels._gauss import METHODS, Bandwidth, GaussTransform, gauss_transform

if TYPE_CHECKING:
    from typing import Self

    import numpy.typing as npt

    from vastml._typing import ArrayLike, FloatArray, RandomState

    BoolArray = npt.NDArray[np.bool_]


SQRT2 = math.sqrt(2.0)
#: Relative accuracy of the log-space sums that replace densities the absolute guarantee
#: cannot resolve (without ``rtol``).
LOG_RTOL = 1e-6
#: With ``rtol``, the first pass runs at min(epsilon, rtol * g / 2) with g the FIRST_PASS
#: quantile of the sums at a few of the sources (a direct pass over FIRST_PASS_PAIRS pairs at
#: most): it then certifies the densities of most targets near the data at once (a pass at
#: ``epsilon`` = ``rtol`` certifies none, the sums being below the total weight 1).
FIRST_PASS = 0.1
FIRST_PASS_PAIRS = 2e6
#: The targets left are recomputed in passes whose accuracies span at most this factor.
PASS_SPAN = 1e3
#: Largest growth of the volume within the tree's cut-off for which the targets left are
#: recomputed in one pass of the tree at the smallest accuracy any of them needs.
TREE_GROWTH = 2.0
#: Up to this many sources the targets left may take that one pass: the pass builds its own
#: tree, which over more sources costs more than planning a pass per band (20,000 sources in
#: 2-D: 5% slower).
ONE_PASS_MAX_SOURCES = 10_000
#: Up to this many (target, source) pairs the log-space sums are taken directly, without
#: building their kd-tree (a tree over a million points costs more than a few such targets).
LOG_DIRECT_PAIRS = 4e6
#: Accuracy of the direct pass over those targets (its guarantee holds far below 1e-12).
DIRECT_EPSILON = 1e-13
#: With ``rtol``, when a source has at most this many others within the log-space sums' first
#: reach (sqrt(2 ln(1 / rtol)) bandwidths; estimated at fit from a sample), every density is
#: taken by the log-space sums: to ``rtol`` directly, over a tree built once at fit, with no
#: first pass to plan nor re-check. Wider kernels take the fast transform first.
LOG_PATH_MAX_SOURCES = 1000
#: ... in at most this many dimensions (in 3-D, kde.py's row was about 5% slower that way:
#: more subtrees border the reach, each adding a term to the bound).
LOG_PATH_MAX_DIM = 2
#: The estimate counts the neighbours of REACH_PROBES sources among REACH_SAMPLE of them.
REACH_PROBES = 32
REACH_SAMPLE = 1024
#: With ``verbose``, the evaluation runs in chunks of at least this many targets...
EVALUATION_CHUNK = 65_536
#: ... and at most this many chunks (each one recomputes the IFGT's coefficients).
MAX_CHUNKS = 50
#: The transform is planned at the first ``score_samples``, for its number of targets (taken
#: to lie like the sources: a sample of them made the plan of a 20,000-point 1-D estimate
#: slower by a third, for no better choice), and planned again when a later call brings more
#: than REPLAN_FACTOR times as many targets: the best method for 3,000 targets over 400,000
#: heavy-tailed sources (the tree, 0.5 s) is not the one for 400,000 (the IFGT, whose
#: clustering alone takes 3.6 s).
REPLAN_FACTOR = 4


class KernelDensity(BaseEstimator):
    r"""Gaussian kernel density estimate, evaluated in linear time to a guaranteed accuracy.

    .. math:: \hat p(x) = \frac{1}{\sum_i w_i} \sum_i w_i \prod_k \frac{1}{\sqrt{2\pi}\sigma_k}
              \exp\!\left(-\sum_k \frac{(x_k - x_{ik})^2}{2\sigma_k^2}\right)

    The sum is a Gauss transform of the points scaled by the bandwidths (Raykar's thesis,
    chapter 5), so every density value is within
    :math:`\epsilon \prod_k (\sqrt{2\pi}\sigma_k)^{-1}` of the exact estimate -- an absolute
    error. Where the density is too small for that error to say anything (at most twice it),
    the log density is computed in log space instead, from the sources near the target, to a
    relative accuracy of 1e-6: it is finite wherever a source has weight, however far out.

    Parameters
    ----------
    bandwidth : float, array-like of shape (n_features,) or (n_features, n_features), or {"scott", "silverman", "sheather-jones"}, default=1.0
        Standard deviation :math:`\sigma` of the Gaussian kernel (one per feature, or one for
        all), or its full covariance matrix :math:`H` (kernel :math:`\exp(-\frac12 u^\top H^{-1} u)`,
        computed on the points mapped by :math:`L^{-1}`, :math:`H = LL^\top`). The names select per-feature bandwidths from the data: Scott's and Silverman's
        rules (normal reference, scaled by each feature's standard deviation) or the
        Sheather-Jones plug-in (solve-the-equation, computed with fast density-derivative sums).
    epsilon : float, default=1e-6
        Accuracy of the Gauss transform, relative to the total weight.
    method : {"auto", "direct", "direct-tree", "ifgt", "ifgt-tree", "fgt"}, default="auto"
        How the Gauss transform is evaluated (see :func:`vastml.kernels.gauss_transform`).
    rtol : float, default=None
        Also guarantee a relative accuracy: densities the epsilon-exact pass cannot certify to
        within ``rtol`` relative error (low-density targets, where the absolute error
        dominates) are recomputed: those known to within a factor of two by the fast transform
        again at the accuracy each needs (grouped by power of ten), the others in log space
        from the sources within reach of each target (a search whose radius grows until the
        sources left out are certified below ``rtol``). For narrow kernels in one or two
        dimensions (at most 1,000 sources within that reach of a source, estimated at fit)
        every density is taken in log space, over an index of the sources built at fit (a
        grid of cells on a line or in the plane where the sources fill their extent, a
        kd-tree otherwise) and kept for every call. ``None`` keeps only the absolute
        guarantee.
    n_jobs : int, default=None
        Threads (None: all cores).
    verbose : bool or int, default=False
        Show progress bars: of the Sheather-Jones selection, of the planning of the
        transform (at the first ``score_samples``, for its number of targets), and of the
        evaluation in ``score_samples`` (then run in chunks of at least 65,536 targets, at
        most 50 of them).

    Attributes
    ----------
    bandwidth_ : ndarray of shape (n_features,) or (n_features, n_features)
        The per-feature standard deviations (or the covariance matrix) used.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.kernels import KernelDensity
    >>> X = np.random.default_rng(0).normal(size=(5000, 1))
    >>> kde = KernelDensity(bandwidth="sheather-jones").fit(X)
    >>> bool(abs(np.exp(kde.score_samples([[0.0]]))[0] - 1 / np.sqrt(2 * np.pi)) < 0.03)
    True
    """

    _factor: npt.NDArray[np.floating[Any]] | None
    _whiten: npt.NDArray[np.floating[Any]] | None
    _log_plan: _core.LogGaussSum | None

    def __init__(
        self,
        *,
        bandwidth: Bandwidth | str = 1.0,
        epsilon: float = 1e-6,
        method: str = "auto",
        rtol: float | None = None,
        n_jobs: int | None = None,
        verbose: bool | int = False,
    ) -> None:
        self.bandwidth = bandwidth
        self.epsilon = epsilon
        self.method = method
        self.rtol = rtol
        self.n_jobs = n_jobs
        self.verbose = verbose

    def _resolve_bandwidth(self, X: FloatArray) -> FloatArray:
        bw = self.bandwidth
        d = X.shape[1]
        if isinstance(bw, str):
            choice(bw, "bandwidth", SELECTORS)
            if X.shape[0] < 3:
                raise ValueError(f"bandwidth={bw!r} needs at least 3 samples, got {X.shape[0]}")
            if bw == "sheather-jones":
                return sheather_jones_bandwidth(X, verbose=self.verbose)
            return np.asarray(SELECTORS[bw](X), dtype=np.float64)
        if isinstance(bw, bool):
            raise TypeError(f"`bandwidth` must be a number, an array or a selector name, got {bw!r}")
        if isinstance(bw, numbers.Real):
            bw = np.full(d, float(bw))
        else:
            bw = np.asarray(bw, dtype=np.float64)
            if bw.shape == (d, d) and d > 1:
                if not (np.all(np.isfinite(bw)) and np.allclose(bw, bw.T)):
                    raise ValueError("a matrix `bandwidth` must be a finite symmetric covariance matrix")
                try:
                    np.linalg.cholesky(bw)
                except np.linalg.LinAlgError:
                    raise ValueError("a matrix `bandwidth` must be positive definite") from None
                return bw
            if bw.shape != (d,):
                raise ValueError(
                    f"`bandwidth` must be a number, have shape ({d},) (per feature) or ({d}, {d}) "
                    f"(a covariance matrix), got {bw.shape}"
                )
        if not (np.all(np.isfinite(bw)) and np.all(bw > 0)):
            raise ValueError(f"`bandwidth` must be positive and finite, got {self.bandwidth!r}")
        return bw

    def fit(self, X: ArrayLike, y: object = None, sample_weight: ArrayLike | None = None) -> Self:
        """Store the data (scaled by the bandwidths); the Gauss transform is planned by the
        first ``score_samples``, for the number of targets it brings.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : ignored
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights (None: all equal).

        Returns
        -------
        self
        """
        open_unit_float(self.epsilon, "epsilon")
        choice(self.method, "method", METHODS)
        if self.rtol is not None:
            open_unit_float(self.rtol, "rtol")
        n_jobs_arg(self.n_jobs)
        Xv: FloatArray = validate_rows(self, X, reset=True)
        self.bandwidth_ = self._resolve_bandwidth(Xv)
        n = Xv.shape[0]
        if sample_weight is None:
            w = np.full(n, 1.0 / n)
        else:
            w = np.asarray(sample_weight, dtype=np.float64)
            if w.shape != (n,):
                raise ValueError(f"`sample_weight` must have shape ({n},), got {w.shape}")
            if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
                raise ValueError("`sample_weight` must be finite, non-negative and not all zero")
            w = w / w.sum()
        self._weights = np.ascontiguousarray(w)
        # Whitening map: per-feature scaling, or L^-1 for a covariance H = L L^T (spec §7), so
        # the kernel becomes exp(-|z - z_i|^2 / 2) on the mapped points.
        if self.bandwidth_.ndim == 2:
            factor = np.linalg.cholesky(self.bandwidth_)
            self._factor = factor
            self._whiten = np.linalg.inv(factor).T
            log_det = float(np.sum(np.log(np.diag(factor))))
        else:
            self._factor = None
            self._whiten = None
            log_det = float(np.sum(np.log(self.bandwidth_)))
        self._scaled = self._map(Xv)
        self._norm = log_det + 0.5 * Xv.shape[1] * math.log(2.0 * math.pi)
        self._pass_epsilon = float(self.epsilon)
        self._X = Xv
        self._log_plan = None  # the log-space sums' index, built on first use
        self._transform: GaussTransform | None = None  # planned by score_samples
        self._planned_for = 0
        # every density in log space (narrow kernels with rtol)
        self._log_path = bool(
            self.rtol is not None
            and Xv.shape[1] <= LOG_PATH_MAX_DIM
            and self._sources_in_reach(float(self.rtol)) <= LOG_PATH_MAX_SOURCES
        )
        if self._log_path:
            self._log_sums()  # built now, and kept for every score_samples
        elif self.rtol is not None:
            self._pass_epsilon = min(self._pass_epsilon, self._first_pass_epsilon(float(self.rtol)))
        return self

    def _planned(self, Xs: FloatArray) -> GaussTransform:
        """The transform's plan for as many targets as ``Xs`` holds, made on first use and again
        when ``Xs`` holds more than REPLAN_FACTOR times the targets planned for."""
        m = Xs.shape[0]
        if self._transform is None or m > REPLAN_FACTOR * self._planned_for:
            self._transform = GaussTransform(
                self._scaled, SQRT2, self._pass_epsilon, self.method, self.n_jobs,
                n_targets=m, verbose=self.verbose,
            )
            self._planned_for = m
        return self._transform

    def _sources_in_reach(self, rtol: float) -> float:
        """Mean number of sources within the log-space sums' first reach of a source, estimated
        from REACH_PROBES sources among REACH_SAMPLE of them (tens of thousands of pairs)."""
        # kernel exp(-|u|^2 / 2) on the scaled points: reach^2 = 2 ln(1 / rtol)
        reach = math.sqrt(2.0 * math.log(1.0 / rtol))
        return _core.mean_sources_within(self._scaled, reach, REACH_PROBES, REACH_SAMPLE)

    def _first_pass_epsilon(self, rtol: float) -> float:
        """rtol / 2 times a low quantile of the sums at a few sources (see FIRST_PASS)."""
        n = self._scaled.shape[0]
        k = int(min(64, max(4, FIRST_PASS_PAIRS // n)))
        probe = np.ascontiguousarray(self._scaled[:: max(1, n // k)][:k])
        g = gauss_transform(self._scaled, probe, self._weights, SQRT2, 1e-13, "direct", self.n_jobs)
        return float(max(0.5 * rtol * np.quantile(g, FIRST_PASS), 1e-14))

    def score_samples(self, X: ArrayLike) -> FloatArray:
        """Log density at each row of ``X`` (``-inf`` only where every weight is zero).

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_is_fitted(self, "bandwidth_")
        Xv: FloatArray = validate_rows(self, X, reset=False)
        Xs = self._map(Xv)
        if self._log_path:
            return self._evaluate_log(Xs) - self._norm
        g = self._evaluate(Xs)
        # the weights sum to 1, so |g - exact| <= eps
        eps = float(getattr(self, "_pass_epsilon", self.epsilon))
        if self.rtol is not None:
            rtol = float(self.rtol)
            certified = (g - eps > 0) & (eps <= rtol * (g - eps))
        else:
            rtol = LOG_RTOL
            certified = g > 2 * eps
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.log(g)  # the uncertified entries are overwritten below
        resolved = ~certified & (g > 2 * eps)
        n_sources = self._scaled.shape[0]
        # a few pairs: the exact sums below do them all at once, cheaper than a pass
        if self.rtol is not None and resolved.sum() * n_sources > LOG_DIRECT_PAIRS:
            certified |= self._tighten(Xs, g, rtol, out, resolved, eps)
        rest = np.flatnonzero(~certified)
        if rest.size and rest.size * n_sources <= LOG_DIRECT_PAIRS:
            # the direct sum at DIRECT_EPSILON certifies the densities above about
            # DIRECT_EPSILON / rtol; the exact log-sum-exp does the others
            e = DIRECT_EPSILON
            gd = gauss_transform(self._scaled, Xs[rest], self._weights, SQRT2, e, "direct", self.n_jobs)
            ok = (gd - e > 0) & (e <= rtol * (gd - e))
            out[rest[ok]] = np.log(gd[ok])
            rest = rest[~ok]
            # the exact log-sum-exp costs N per target, the tree about 2 N log2(N) to build
            if rest.size and (rest.size <= 2 * math.log2(n_sources) or self._log_plan is not None):
                out[rest] = self._log_direct(Xs[rest]) if self._log_plan is None else (
                    self._log_plan.evaluate(np.ascontiguousarray(Xs[rest]), rtol, self.n_jobs))
            elif rest.size:
                out[rest] = self._log_sums().evaluate(np.ascontiguousarray(Xs[rest]), rtol, self.n_jobs)
        elif rest.size:
            out[rest] = self._log_sums().evaluate(np.ascontiguousarray(Xs[rest]), rtol, self.n_jobs)
        return out - self._norm

    def _log_direct(self, Xs: FloatArray) -> FloatArray:
        """ln sum_i w_i exp(-|x - z_i|^2 / 2) at each row of ``Xs``: the exact log-sum-exp."""
        src = self._scaled
        with np.errstate(divide="ignore"):
            log_w = np.log(self._weights)
        out = np.empty(Xs.shape[0])
        step = max(1, (1 << 22) // src.shape[0])
        for s in range(0, Xs.shape[0], step):
            d2 = ((Xs[s:s + step, None, :] - src[None, :, :]) ** 2).sum(-1)
            e = log_w - 0.5 * d2
            top = e.max(axis=1)
            out[s:s + step] = top + np.log(np.exp(e - top[:, None]).sum(axis=1))
        return out

    def _evaluate_log(self, Xs: FloatArray) -> FloatArray:
        """Every log-sum at ``Xs`` to ``rtol`` in log space: in one call, or in chunks on a
        progress bar with ``verbose``."""
        plan, rtol, m = self._log_sums(), float(self.rtol), Xs.shape[0]  # type: ignore[arg-type]
        if not self.verbose:
            return plan.evaluate(Xs, rtol, self.n_jobs)
        chunk = max(EVALUATION_CHUNK, -(-m // MAX_CHUNKS))
        starts = range(0, m, chunk)
        out = np.empty(m)
        with Progress(None, verbose=self.verbose, total=len(starts), desc="KernelDensity evaluation") as progress:
            for k, start in enumerate(starts, 1):
                out[start:start + chunk] = plan.evaluate(Xs[start:start + chunk], rtol, self.n_jobs)
                progress.report(k)
        return out

    def _evaluate(self, Xs: FloatArray) -> FloatArray:
        """The transform at ``Xs``: in one call, or in chunks on a progress bar with ``verbose``."""
        m = Xs.shape[0]
        verbose = self.verbose
        transform = self._planned(Xs)
        if not verbose:
            return transform(Xs, self._weights)
        chunk = max(EVALUATION_CHUNK, -(-m // MAX_CHUNKS))
        starts = range(0, m, chunk)
        out = np.empty(m)
        with Progress(None, verbose=verbose, total=len(starts), desc="KernelDensity evaluation") as progress:
            for k, start in enumerate(starts, 1):
                out[start:start + chunk] = transform(Xs[start:start + chunk], self._weights)
                progress.report(k)
        return out

    def _tighten(
        self, Xs: FloatArray, g: FloatArray, rtol: float, out: FloatArray, resolved: BoolArray, eps: float
    ) -> BoolArray:
        """Targets known to within a factor of two but not to ``rtol``: recomputed by the fast
        transform at the accuracy each needs (``eps`` is the first pass's), in passes whose
        accuracies span at most PASS_SPAN; returns the mask of those now certified (their log
        densities written into ``out``)."""
        done = np.zeros(len(g), dtype=bool)
        idx = np.flatnonzero(resolved)
        if not idx.size:
            return done
        need = rtol * (g[idx] - eps) / (1.0 + rtol)
        band = np.floor(np.log10(need))
        # beyond what a fast pass can certify (below 1e-14): the log-space sums do it
        bands = [b for b in np.unique(band)[::-1] if b >= -14]
        # The direct sum costs the same at any accuracy, and the tree's cut-off grows only as
        # sqrt(ln(1 / epsilon)): when the first pass ran the direct sum, or the tree and the
        # smallest accuracy at most doubles the volume within its cut-off, one pass of the
        # same method at the smallest accuracy does every band, without planning anew per band.
        assert self._transform is not None  # fitted for the transform path
        method = self._transform.method_
        if self._scaled.shape[0] > ONE_PASS_MAX_SOURCES:
            method = self.method
        elif bands and method == "direct-tree":
            growth = (bands[-1] / min(bands[0], -1.0)) ** (0.5 * Xs.shape[1])
            if growth > TREE_GROWTH:
                method = self.method
        elif method != "direct":
            method = self.method
        span = math.inf if method in ("direct", "direct-tree") else math.log10(PASS_SPAN)
        while bands:
            group = [b for b in bands if b >= bands[0] - span]
            bands = bands[len(group):]
            e = 10.0 ** group[-1]
            sel = idx[(band <= group[0]) & (band >= group[-1])]
            gb = gauss_transform(self._scaled, Xs[sel], self._weights, SQRT2, e, method, self.n_jobs)
            ok = (gb - e > 0) & (e <= rtol * (gb - e))
            out[sel[ok]] = np.log(gb[ok])
            done[sel[ok]] = True
        return done

    def _map(self, X: FloatArray) -> FloatArray:
        if self._whiten is not None:
            return np.ascontiguousarray(X @ self._whiten)
        bw = self.bandwidth_
        if bw.size and np.all(bw == bw[0]):
            # by the reciprocal: within an ulp of the quotients (sources and targets alike),
            # and numpy multiplies twice as fast as it divides (60,000 x 2: 40 us, not 80)
            return np.ascontiguousarray(X * (1.0 / bw[0]))
        return np.ascontiguousarray(X / bw)

    def _log_sums(self) -> _core.LogGaussSum:
        """The index of the log-space sums (a cell grid or a kd-tree), built on first use."""
        plan = getattr(self, "_log_plan", None)
        if plan is None:
            plan = _core.LogGaussSum(self._scaled, self._weights, SQRT2, self.n_jobs)
            self._log_plan = plan
        return plan

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.pop("_log_plan", None)  # rebuilt on use
        return state

    def score(self, X: ArrayLike, y: object = None) -> float:
        """Total log-likelihood of ``X`` under the estimate."""
        return float(np.sum(self.score_samples(X)))

    def sample(self, n_samples: int = 1, random_state: RandomState = None) -> FloatArray:
        """Draw ``n_samples`` points from the estimate (a data point plus kernel noise).

        Returns
        -------
        ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self, "bandwidth_")
        if isinstance(n_samples, bool) or not isinstance(n_samples, numbers.Integral) or n_samples < 1:
            raise ValueError(f"`n_samples` must be a positive integer, got {n_samples!r}")
        rng = check_random_state(random_state)
        idx = rng.choice(self._X.shape[0], size=int(n_samples), p=self._weights)
        noise = rng.standard_normal((int(n_samples), self._X.shape[1]))
        if self._factor is not None:
            return self._X[idx] + noise @ self._factor.T
        return self._X[idx] + noise * self.bandwidth_
