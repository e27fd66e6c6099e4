"""Learning to rank by maximising the generalised Wilcoxon-Mann-Whitney statistic (RankNCG)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from scipy.special import erfc
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, Self

    import numpy.typing as npt

    from vastml._progress import Callback
    from vastml._typing import ArrayLike, FloatArray, RandomState

from vastml._progress import Progress
from vastml._validation import check_float, check_int, choice, n_jobs_arg, open_unit_float, validate_rows
from vastml.kernels._gauss import gauss_transform
from vastml.kernels._sums import SUM_METHODS, erfc_sum

#: Scale of the probit match of the logistic: sigma(t) ~ 1 - erfc(C t) / 2 (thesis eq. 8.11).
PROBIT = math.sqrt(3.0) / (math.pi * math.sqrt(2.0))
GRAPHS = ("full", "chain")


def preference_edges(n_classes: int, graph: str) -> list[tuple[int, int]]:
    """Edges (i, j), i < j, meaning every sample of class j is preferred to every one of class i."""
    choice(graph, "graph", GRAPHS)
    if graph == "chain":
        return [(i, i + 1) for i in range(n_classes - 1)]
    return [(i, j) for i in range(n_classes) for j in range(i + 1, n_classes)]


def wmw_score(scores: ArrayLike, y: ArrayLike, graph: str = "full") -> float:
    """The generalised Wilcoxon-Mann-Whitney statistic of ``scores`` for ordinal labels ``y``.

    The fraction of pairs (x_k of class i, x_l of class j) over the edges of the preference
    graph (higher label preferred) with ``scores[l] > scores[k]``, strictly: ties count as
    wrong. O(m log m).

    Examples
    --------
    >>> wmw_score([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])
    0.75
    """
    s = np.asarray(scores, dtype=np.float64).ravel()
    y = np.asarray(y).ravel()
    if s.shape != y.shape:
        raise ValueError(f"`scores` and `y` must have the same length, got {s.shape[0]} and {y.shape[0]}")
    classes = np.unique(y)
    if classes.size < 2:
        raise ValueError("`y` must hold at least two distinct labels")
    groups = [np.sort(s[y == c]) for c in classes]
    correct = total = 0
    for i, j in preference_edges(len(classes), graph):
        correct += int(np.searchsorted(groups[i], groups[j], side="left").sum())
        total += groups[i].size * groups[j].size
    return correct / total


class RankNCG(BaseEstimator):
    r"""Linear ranking function maximising a bound on the generalised WMW statistic.

    Learns :math:`f(x) = w^\top x` maximising the penalised pairwise log-likelihood
    :math:`-\frac{\lambda}{2}\lVert w\rVert^2 + \sum_{\text{pairs}} \log\sigma(w^\top(x_l - x_k))`
    (a lower bound on the WMW statistic) by Polak-Ribière nonlinear conjugate gradients with a
    secant line search. The gradient's O(M^2) pair sums become O(M) fast erfc sums through the
    probit match :math:`\sigma(t) \approx 1 - \operatorname{erfc}(\sqrt3\, t / (\pi\sqrt2))/2`
    (Raykar's thesis, chapter 8).

    Parameters
    ----------
    l2_penalty : float, default=1.0
        Strength :math:`\lambda \ge 0` of the L2 penalty :math:`\frac{\lambda}{2}\lVert w\rVert^2`
        on the weights.
    graph : {"full", "chain"}, default="full"
        Preference graph over the ordered labels: all pairs of labels, or neighbours only.
    epsilon : float, default=1e-6
        Accuracy of the erfc sums.
    method : {"auto", "direct", "fast"}, default="auto"
        How the erfc sums are computed (``direct``: exact O(M^2)).
    tol : float, default=1e-4
        Stop when the gradient norm falls below ``tol`` times the first one.
    max_iter : int, default=200
    random_state : int, RandomState or None, default=None
        Random initial direction.
    n_jobs : int, default=None
    callbacks : callable, list of callables or None, default=None
        Called as ``callback(iteration, objective, coef)`` after each conjugate-gradient
        iteration, every ``callback_every`` iterations: ``objective`` is the probit-matched
        penalised log-likelihood being *maximised* (computed with fast erfc and Gauss sums,
        only when someone looks), ``coef`` a copy of the current weights. Returning True
        stops the fit with those weights and sets ``stopped_early_``.
    callback_every : int, default=1
    verbose : bool or int, default=False
        Draw a progress bar of the iterations.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    classes_ : ndarray
        Labels in increasing order of preference.
    n_iter_ : int
    stopped_early_ : bool
        Whether a callback stopped the fit.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.kernels import RankNCG
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(600, 5))
    >>> y = np.digitize(X @ [1.0, -2.0, 0.5, 0.0, 0.0], [-1.0, 1.0])
    >>> rank = RankNCG(l2_penalty=1e-3, random_state=0).fit(X, y)
    >>> bool(rank.score(X, y) > 0.95)
    True
    """

    def __init__(
        self,
        *,
        l2_penalty: float = 1.0,
        graph: str = "full",
        epsilon: float = 1e-6,
        method: str = "auto",
        tol: float = 1e-4,
        max_iter: int = 200,
        random_state: RandomState = None,
        n_jobs: int | None = None,
        callbacks: Callback | Sequence[Callback] | None = None,
        callback_every: int = 1,
        verbose: bool | int = False,
    ) -> None:
        self.l2_penalty = l2_penalty
        self.graph = graph
        self.epsilon = epsilon
        self.method = method
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.callbacks = callbacks
        self.callback_every = callback_every
        self.verbose = verbose

    # -- the gradient ------------------------------------------------------------------
    def _setup(self, X: FloatArray, y: npt.NDArray[Any]) -> None:
        self.classes_ = np.unique(y)
        if self.classes_.size < 2:
            raise ValueError(
                "`y` must hold at least two distinct labels to rank (got 1 class"
                f"{' and 1 sample' if len(y) == 1 else ''})"
            )
        self._groups = [X[y == c] for c in self.classes_]
        self._edges = preference_edges(len(self._groups), self.graph)
        means = [g.mean(axis=0) for g in self._groups]
        sizes = [g.shape[0] for g in self._groups]
        self._a1 = sum(sizes[i] * sizes[j] * (means[i] - means[j]) for i, j in self._edges)
        self._pairs = sum(sizes[i] * sizes[j] for i, j in self._edges)
        # better[i]: classes preferred to i; worse[j]: classes j is preferred to.
        self._better = [[j for (a, j) in self._edges if a == i] for i in range(len(self._groups))]
        self._worse = [[a for (a, j) in self._edges if j == i] for i in range(len(self._groups))]

    def _gradient(self, w: FloatArray, eps: float, method: str, n_jobs: int | None) -> FloatArray:
        """Gradient of the probit-matched penalised log-likelihood (thesis eqs. 8.13-8.17)."""
        z = [PROBIT * (g @ w) for g in self._groups]
        g = -float(self.l2_penalty) * w - self._a1
        for i, grp in enumerate(self._groups):
            if self._better[i]:
                # A2: sum over k in i of x_k sum_{l in better} erfc(z_k - z_l)
                src = np.concatenate([z[j] for j in self._better[i]])
                e = erfc_sum(src, z[i], None, eps, method, n_jobs)
                g = g + 0.5 * (grp.T @ e)
            if self._worse[i]:
                # A3: sum over l in i of x_l sum_{k in worse} erfc(z_k - z_l)
                src = -np.concatenate([z[k] for k in self._worse[i]])
                e = erfc_sum(src, -z[i], None, eps, method, n_jobs)
                g = g - 0.5 * (grp.T @ e)
        return g

    def _objective(self, w: FloatArray) -> float:
        """The probit-matched objective the gradient belongs to (O(M^2); the oracle of tests)."""
        total = -0.5 * float(self.l2_penalty) * float(w @ w)
        for i, j in self._edges:
            t = (self._groups[j] @ w)[None, :] - (self._groups[i] @ w)[:, None]
            total += np.sum(0.5 * t * erfc(PROBIT * t) - np.exp(-((PROBIT * t) ** 2)) / (2 * PROBIT * math.sqrt(math.pi)))
        return float(total)

    def _fast_objective(self, w: FloatArray, eps: float, method: str, n_jobs: int | None) -> float:
        """:meth:`_objective` in O(M) fast sums: with z = C s and t = (z_l - z_k) / C,
        sum_kl t erfc(z_l - z_k) / 2 = (sum_l z_l E(z_l) - E_z(z_l)) / 2C (E: erfc sums with
        unit and with z_k weights), and the Gaussian term is a 1-D Gauss transform."""
        z = [PROBIT * (g @ w) for g in self._groups]
        total = -0.5 * float(self.l2_penalty) * float(w @ w)
        gauss_method = "direct" if method == "direct" else "auto"
        for i in range(len(self._groups)):
            if not self._better[i] or z[i].size == 0:
                continue
            tgt = np.concatenate([z[j] for j in self._better[i]])
            e1 = erfc_sum(z[i], tgt, None, eps, method, n_jobs)
            ez = erfc_sum(z[i], tgt, z[i], eps, method, n_jobs)
            gs = gauss_transform(z[i], tgt, None, 1.0, eps, gauss_method, n_jobs)
            total += float(tgt @ e1 - ez.sum()) / (2 * PROBIT)
            total -= float(gs.sum()) / (2 * PROBIT * math.sqrt(math.pi))
        return total

    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Learn ``coef_`` from samples ``X`` with ordinal labels ``y`` (larger = preferred)."""
        check_float(self.l2_penalty, "l2_penalty", low=0.0)
        eps = open_unit_float(self.epsilon, "epsilon")
        method = choice(self.method, "method", SUM_METHODS)
        choice(self.graph, "graph", GRAPHS)
        open_unit_float(self.tol, "tol")
        n_jobs = n_jobs_arg(self.n_jobs)
        max_iter = check_int(self.max_iter, "max_iter", low=1)
        progress = Progress(
            self.callbacks, callback_every=self.callback_every, verbose=self.verbose,
            total=max_iter, desc="RankNCG",
        )
        Xv: FloatArray
        Xv, yv = validate_data(self, X, y, dtype=np.float64, order="C")
        self._setup(Xv, yv)
        rng = check_random_state(self.random_state)
        w = rng.standard_normal(Xv.shape[1]) * 1e-3

        def grad(v: FloatArray) -> FloatArray:
            return self._gradient(v, eps, method, n_jobs)

        g = grad(w)
        g0 = float(np.linalg.norm(g)) or 1.0
        d = g.copy()
        step = 1.0 / g0
        it = 0
        stopped = False
        with progress:
            for it in range(1, max_iter + 1):
                w, g_new, step = _secant_search(grad, w, d, g, step)
                gn = float(np.linalg.norm(g_new))
                if progress.active:
                    objective = self._fast_objective(w, eps, method, n_jobs)
                    if progress.report(it, objective, w.copy()):
                        stopped = True
                        break
                if gn <= self.tol * g0:
                    g = g_new
                    break
                beta = max(0.0, float(g_new @ (g_new - g)) / float(g @ g))
                d = g_new + beta * d
                if float(d @ g_new) <= 0:  # not an ascent direction: restart
                    d = g_new.copy()
                g = g_new
        self.coef_: np.ndarray = w
        self.n_iter_ = it
        self.stopped_early_ = stopped
        return self

    def decision_function(self, X: ArrayLike) -> FloatArray:
        """Ranking scores ``X @ coef_`` (larger = preferred)."""
        check_is_fitted(self, "coef_")
        Xv = validate_rows(self, X, reset=False)
        return Xv @ self.coef_

    def score(self, X: ArrayLike, y: ArrayLike) -> float:
        """Generalised WMW statistic of the scores on ``X`` against ``y``."""
        return wmw_score(self.decision_function(X), y, self.graph)


def _secant_search(
    grad: Callable[[FloatArray], FloatArray],
    w: FloatArray,
    d: FloatArray,
    g: FloatArray,
    step: float,
    max_steps: int = 12,
) -> tuple[FloatArray, FloatArray, float]:
    """Line search along the ascent direction d: regula falsi on phi'(a) = grad(w + a d) . d.

    Brackets the zero of the directional derivative by doubling the trial step, then takes
    secant steps inside the bracket until |phi'| falls below a tenth of |phi'(0)|. Returns
    the new point, its gradient and the step taken (the next search's first trial).
    """
    slope0 = float(g @ d)
    lo, s_lo = 0.0, slope0
    a = step
    g_a = grad(w + a * d)
    s = float(g_a @ d)
    for _ in range(40):
        if s <= 0:
            break
        lo, s_lo = a, s
        a *= 2.0
        g_a = grad(w + a * d)
        s = float(g_a @ d)
    else:
        return w + a * d, g_a, a
    hi, s_hi = a, s
    for _ in range(max_steps):
        if abs(s) <= 0.1 * abs(slope0) or s_hi == s_lo:
            break
        a = hi - s_hi * (hi - lo) / (s_hi - s_lo)
        g_a = grad(w + a * d)
        s = float(g_a @ d)
        if s > 0:
            lo, s_lo = a, s
        else:
            hi, s_hi = a, s
    return w + a * d, g_a, a
