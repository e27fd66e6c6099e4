"""Parametric Embedding of class structure (Iwata et al. 2007).

Objects r_n and class centres phi_k in D dimensions; the embedding posterior is a unit-variance
spherical Gaussian mixture, ``q_nk = pi_k exp(-|r_n - phi_k|^2 / 2) / sum_l (...)`` (eq. 1), and

    J(R, Phi) = -sum_nk P_nk log q_nk + eta_r sum_n |r_n|^2 + eta_phi sum_k |phi_k|^2   (2), (6)

is minimised by alternating a damped Newton step per object (its Hessian Cov_q(phi) + 2 eta_r I
is positive definite, so R given Phi is a strictly convex, separable problem) with L-BFGS on the
reduced objective ``J(Phi) = min_R J(R, Phi)`` (spec 001 section 2.3: every evaluation re-solves
R, warm-started), or, with ``phi_step="paper"``, the paper's literal loop (R-step, then one
L-BFGS step on Phi with R frozen). Everything is O(N K D) per pass.

The O(N K) parts run in Rust (``vastml._core.pe_*``, parallel over objects, GIL released, one
fused pass per evaluation); their vectorised NumPy oracle lives with the tests
(``tests/oracles/pe.py``).
"""

from __future__ import annotations

import numbers
import time
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.optimize
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, check_non_negative, validate_data

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Self

    from vastml._progress import Callback
    from vastml._typing import ArrayLike, FloatArray, IntArray, RandomState

from vastml import _core
from vastml._progress import Progress
from vastml._validation import check_bool, check_float, check_int, choice, positive_float

_POLISH = 1e-20  # squared-gradient tolerance of the final / out-of-sample R-step
_STAGE_MIN = 20_000  # smallest coarse-to-fine stage (objects)
_SUBSET_GTOL = 0.0
_SHRINK, _GROW = 0.25, 2.0


# --------------------------------------------------------------------------- kernels


def _log_posteriors(R, Phi, log_prior):
    """log q_nk of eq. (1), by log-sum-exp over ``log pi_k - |r_n - phi_k|^2 / 2``."""
    sq = (R * R).sum(1)[:, None] - 2.0 * R @ Phi.T + (Phi * Phi).sum(1)[None, :]
    a = log_prior[None, :] - 0.5 * np.maximum(sq, 0.0)
    a -= a.max(axis=1, keepdims=True)
    a -= np.log(np.exp(a).sum(axis=1, keepdims=True))
    return a


class _Kernels:
    """The O(N K) work of one fit, in Rust (``vastml._core.pe_*``, parallel over objects):
    R-step, fused reduced evaluation (with or without the reduced Hessian), plain evaluation.
    ``tests/oracles/pe.py`` holds a NumPy class of the same interface, the test oracle."""

    def __init__(self, P, log_prior, eta_r, eta_phi, tol_r, max_newton_iter, damped, n_jobs,
                 sample_weight=None):
        self.P, self.lp = P, np.ascontiguousarray(log_prior, dtype=np.float64)
        self.eta_r, self.eta_phi = eta_r, eta_phi
        self.kw = {"eta_r": eta_r, "eta_phi": eta_phi, "tol_r": tol_r,
                   "max_newton_iter": max_newton_iter, "damped": damped,
                   "sample_weight": sample_weight}
        self.n_jobs = n_jobs
        # w_n multiplies object n's terms of J, dJ/dPhi and the reduced Hessian (None: all 1);
        # the R-step does not depend on it
        self.w = sample_weight

    def r_step(self, Phi, R, **override):
        """(R*, Newton steps per object) for the centres Phi, warm-started at R."""
        kw = {**self.kw, **override}
        Phi = np.ascontiguousarray(Phi, dtype=np.float64)
        R, it = _core.pe_r_step(self.P, Phi, np.ascontiguousarray(R, dtype=np.float64),
                                self.lp, kw, n_jobs=self.n_jobs)
        return R, it.astype(np.int64)

    def evaluate(self, R, Phi):
        """(J, E, entropy, dJ/dPhi) at (R, Phi)."""
        Phi = np.ascontiguousarray(Phi, dtype=np.float64)
        J, E, H, G, _ = _core.pe_evaluate(self.P, R, Phi, self.lp, self.kw, n_jobs=self.n_jobs)
        return J, E, H, G

    def reduced(self, Phi, R):
        """(J~, dJ~/dPhi, R*, Newton steps) of the reduced objective, warm-started at R."""
        Phi = np.ascontiguousarray(Phi, dtype=np.float64)
        J, _, _, G, R, it = _core.pe_reduced(self.P, Phi, R, self.lp, self.kw, n_jobs=self.n_jobs)
        return J, G, R, it

    def reduced_hessian(self, Phi, R):
        """(J~, dJ~/dPhi, d2J~/dPhi2, R*, Newton steps), warm-started at R."""
        Phi = np.ascontiguousarray(Phi, dtype=np.float64)
        return _core.pe_reduced_hessian(self.P, Phi, R, self.lp, self.kw, n_jobs=self.n_jobs)

    def subset(self, idx, n_total):
        """The same problem on the objects ``idx``, eta_phi scaled by their share of the
        objects (of the total weight, with sample weights) so that its optimum estimates the
        full one (J of the subset ~ J * len(idx) / n_total)."""
        if self.w is None:
            share, w = len(idx) / n_total, None
        else:
            w = np.ascontiguousarray(self.w[idx])
            share = w.sum() / self.w.sum()
        sub = type(self)(np.ascontiguousarray(self.P[idx]), self.lp, self.eta_r,
                         self.eta_phi * share, 0, 0, True, self.n_jobs, w)
        sub.kw = {**self.kw, "eta_phi": sub.eta_phi, "sample_weight": w}
        return sub


def _lbfgs_direction(g, pairs):
    """-H g by the two-loop recursion over (s, y) pairs, H0 = (s'y / y'y) I."""
    q = g.copy()
    alphas = []
    for s, y, rho in reversed(pairs):
        a = rho * (s @ q)
        alphas.append(a)
        q -= a * y
    if pairs:
        s, y, _ = pairs[-1]
        q *= (s @ y) / (y @ y)
    for (s, y, rho), a in zip(pairs, reversed(alphas)):
        b = rho * (y @ q)
        q += (a - b) * s
    return -q


def _gauge_complement(Phi):
    """Orthonormal basis (KD x m) of the directions orthogonal to the rotations ``Phi S`` (S
    skew-symmetric): J~ is invariant under rotations about the origin, so its Hessian is
    singular along them at a stationary point; Newton steps are taken in the complement."""
    K, D = Phi.shape
    gens = []
    for i in range(D):
        for j in range(i + 1, D):
            S = np.zeros((D, D))
            S[i, j], S[j, i] = 1.0, -1.0
            gens.append((Phi @ S).ravel())
    if not gens:
        return np.eye(K * D)
    _, sv, Vt = np.linalg.svd(np.array(gens), full_matrices=True)
    rank = int((sv > 1e-8 * max(1.0, np.linalg.norm(Phi))).sum())
    return Vt[rank:].T


def _trust_region_step(H, g, radius):
    """Exact minimiser of ``g'p + p'Hp / 2`` over ``|p| <= radius`` (Moré-Sorensen by an
    eigendecomposition; H may be indefinite). Returns (p, predicted decrease, interior)."""
    w, V = np.linalg.eigh(H)
    a = V.T @ g
    if w[0] > 0:
        p = -a / w
        if np.linalg.norm(p) <= radius:
            return V @ p, 0.5 * float(a @ (a / w)), True
    lo = max(0.0, -w[0])
    gn = np.linalg.norm(a)

    def norm_at(lam):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.linalg.norm(np.where(w + lam > 0, a / (w + lam), np.inf * np.abs(a)))

    tiny = 1e-12 * max(1.0, abs(w).max())
    if norm_at(lo + tiny) <= radius:
        # hard case: g has (almost) no component along the lowest eigenvector(s)
        lam = lo + tiny
        c = np.where(w + lam > tiny * 1e3, -a / (w + lam), 0.0)
        rest = radius**2 - float(c @ c)
        c[0] += np.sqrt(max(rest, 0.0))
    else:
        hi = lo + gn / radius + tiny
        while norm_at(hi) > radius:
            hi *= 2.0
        lo_ = lo + tiny
        for _ in range(200):
            mid = 0.5 * (lo_ + hi)
            if norm_at(mid) > radius:
                lo_ = mid
            else:
                hi = mid
            if hi - lo_ <= 1e-14 * hi:
                break
        c = -a / (w + hi)
    pred = -(float(a @ c) + 0.5 * float(c @ (w * c)))
    return V @ c, pred, False


def classical_mds(D2, n_components, *, random_state=None):
    """Torgerson MDS of a squared-distance matrix; pads with small noise when rank-deficient."""
    D2 = np.asarray(D2, dtype=np.float64)
    k = D2.shape[0]
    J = np.eye(k) - 1.0 / k
    B = -0.5 * J @ D2 @ J
    w, V = np.linalg.eigh(B)
    order = np.argsort(-w)[:n_components]
    w, V = np.maximum(w[order], 0.0), V[:, order]
    Y = V * np.sqrt(w)
    if Y.shape[1] < n_components:
        Y = np.hstack([Y, np.zeros((k, n_components - Y.shape[1]))])
    rng = check_random_state(random_state)
    scale = np.sqrt((Y**2).sum() / k) if (Y**2).sum() > 0 else 1.0
    Y += 1e-3 * scale * rng.standard_normal(Y.shape)
    return Y


def _mds_init(P, D, init_scale, rng, sample_weight=None):
    """Classical MDS of the soft class profiles M_k = sum_n P_nk P_n / sum_n P_nk (spec 2.4;
    sum_n w_n ... with sample weights)."""
    Pw = P if sample_weight is None else P * sample_weight[:, None]
    colsum = Pw.sum(0)
    M = (Pw.T @ P) / np.where(colsum > 0, colsum, 1.0)[:, None]
    sq = (M * M).sum(1)
    D2 = np.maximum(sq[:, None] + sq[None, :] - 2 * M @ M.T, 0.0)
    Y = classical_mds(D2, D, random_state=rng)
    Y -= Y.mean(0)
    rms = np.sqrt((Y**2).sum(1).mean())
    return Y * (init_scale / rms if rms > 0 else 1.0)


# --------------------------------------------------------------------------- estimator


def _check_P(est: Any, P: ArrayLike, *, reset: bool) -> FloatArray:
    """Validates posteriors P (n_objects x n_classes) for ``est``: a finite, non-negative,
    dense 2-D array with at least 2 classes (``n_features_in_`` set when ``reset``, checked
    otherwise) whose rows sum to 1 (rescaled with a warning under ``est.normalize``)."""
    K = getattr(est, "n_features_in_", None)
    shape = np.shape(P) if hasattr(P, "shape") else None
    if not reset and K is not None and shape is not None and len(shape) == 2 and shape[1] != K:
        raise ValueError(
            f"X has {shape[1]} features, but {type(est).__name__} is expecting {K} features as "
            f"input (`P` has {shape[1]} classes, the fit had {K})"
        )
    P = np.asarray(
        validate_data(est, P, reset=reset, dtype=np.float64, order="C", ensure_min_features=2)
    )
    check_non_negative(P, type(est).__name__)
    s = P.sum(1)
    if (np.abs(s - 1.0) > 1e-6).any():
        if not est.normalize:
            raise ValueError(
                "rows of `P` must sum to 1 (within 1e-6); pass normalize=True to rescale"
            )
        if (s <= 0).any():
            raise ValueError("`P` has an all-zero row")
        warnings.warn("rows of `P` renormalised to sum to 1", UserWarning, stacklevel=3)
        P = P / s[:, None]
    return np.ascontiguousarray(P)


def _check_sample_weight(sample_weight, n):
    """None, or the weights as a contiguous float64 (n,) array: finite, >= 0, not all 0."""
    if sample_weight is None:
        return None
    try:
        w = np.asarray(sample_weight, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"`sample_weight` must be an array of numbers: {exc}") from None
    if w.ndim == 0:
        w = np.full(n, float(w))
    if w.shape != (n,):
        raise ValueError(f"`sample_weight` must have shape ({n},), got {w.shape}")
    if not np.isfinite(w).all() or (w < 0).any() or not w.sum() > 0:
        raise ValueError("`sample_weight` must be finite, non-negative and not all zero")
    return np.ascontiguousarray(w)


def _check_prior(prior, K):
    if prior is None:
        return np.full(K, 1.0 / K)
    p = np.asarray(prior, dtype=np.float64)
    if p.shape != (K,) or not np.isfinite(p).all() or (p <= 0).any():
        raise ValueError(f"`class_prior` must be {K} positive finite numbers")
    return p / p.sum()


class ParametricEmbedding(TransformerMixin, BaseEstimator):
    r"""Parametric Embedding (PE) of objects and classes from class posteriors.

    Input ``P[n, k] = p(c_k | x_n)``; output object coordinates ``embedding_`` (N x D) and class
    centres ``class_embedding_`` (K x D) such that the unit-variance Gaussian mixture on the
    centres reproduces P (minimum sum of KL divergences, eqs. 1, 2, 6 of Iwata et al. 2007).
    Cost O(N K D) per iteration. ``transform`` embeds new objects exactly (a strictly convex
    problem per object given the centres).

    Parameters
    ----------
    n_components : int, default=2
        D.
    l2_penalty_objects : float, default=0.1
        :math:`\eta_r`, the weight of the L2 penalty :math:`\eta_r \sum_n |r_n|^2` on the object
        coordinates (no 1/2).
    l2_penalty_centers : float or "auto", default=50.0
        :math:`\eta_\phi`, the weight of the L2 penalty :math:`\eta_\phi \sum_k |\phi_k|^2` on
        the class centres. "auto" is 0.01 N (50 at the paper's N = 5000); its effect scales as
        :math:`\eta_\phi / N`.
    class_prior : array-like of shape (K,), default=None
        p(c_k) (uniform when None); also accepted by ``fit``.
    init : {"random", "mds"} or array (K, D), default="random"
        Initial centres: N(0, init_scale^2), classical MDS of the class profiles, or given.
    init_scale : float, default=1.0
    n_init : int, default=1
        Restarts (random/MDS-with-noise); the lowest J is kept.
    warm_start : bool, default=False
        Start ``fit`` from the previous fit's ``class_embedding_`` (same number of classes
        and components; one run, ``n_init`` and ``init`` ignored then).
    l2_penalty_centers_path : int, sequence of float or None, default=None
        The homotopy of spec 001 §7 against local minima in Phi (no guarantee; compare with
        ``n_init``): fit first with a larger ``l2_penalty_centers`` (compact classes, a
        smoother problem), then warm-start each next stage from the previous centres and
        objects, ending at ``l2_penalty_centers``. An int n: n stages log-spaced from 100
        ``l2_penalty_centers`` down to ``l2_penalty_centers``; a sequence: those values, then
        ``l2_penalty_centers``. ``history_`` holds the stages' records
        (``stage`` key) before the final one's.
    tol_r : float, default=1e-12
        Per object: stop Newton when |dJ/dr_n|^2 < tol_r.
    tol_phi : float, default=1e-6
        Stop when |dJ/dPhi| <= tol_phi * N (L-BFGS and paper steps).
    ftol : float, default=1e-12
        Stop when J changes by at most ftol * |J| (relative) between iterations; Newton stops
        when its model predicts at most that much decrease left (the Newton decrement
        ``g' H^-1 g / 2``), i.e. J is within ~ftol of the local optimum, which is stricter than
        the gradient rule and costs at most one evaluation more.
    max_iter, max_newton_iter : int, default=1000, 50
    damped_newton : bool, default=True
        Armijo backtracking on each object's Newton step (monotone; pure Newton if False).
    normalize : bool, default=False
        Renormalise rows of P that do not sum to 1 (with a warning) instead of raising.
    phi_step : {"newton", "reduced", "paper"}, default="newton"
        ``"newton"``: trust-region Newton on ``J~(Phi) = min_R J(R, Phi)`` with its exact
        Hessian (implicit function theorem, accumulated in the same pass over P as the R-step,
        J and dJ/dPhi), steps orthogonal to the rotations that
        leave J~ unchanged; converges quadratically (~10-30 evaluations instead of ~100-250).
        ``"reduced"``: L-BFGS (SciPy) on J~, each line-search trial re-solving R (spec 001
        section 2.3). ``"paper"``: the paper's section 3 loop verbatim: R-step to tolerance,
        then one L-BFGS direction on Phi (eq. 8) with the step length by backtracking on J with
        R frozen. All three have the same fixed points.
    lbfgs_memory : int, default=10
        s, the L-BFGS memory.
    coarse_to_fine : bool, default=True
        With ``phi_step="newton"`` and N >= 100,000: first fit the centres on nested random
        subsets of N / 5^j >= 20,000 objects (:math:`\eta_\phi` scaled by the subset's share, so the
        subset's optimum estimates the full one), then finish on all objects; the final
        iterations and the convergence test use the full objective.
    n_jobs : int or None, default=None
        Threads of the per-object work (None: all cores or ``RAYON_NUM_THREADS``).
    callbacks : callable or list of callables, default=None
        Called as ``callback(iteration, objective, class_embedding)`` every ``callback_every``
        centre iterations (counted from 1 over all stages and restarts; ``objective`` is J,
        ``class_embedding`` the current centres); returning True stops the fit with the
        current centres (their objects re-solved) and sets ``stopped_early_``.
    callback_every : int, default=1
    verbose : bool or int, default=False
        Draw a progress bar with J.
    random_state : int, RandomState instance or None

    Attributes
    ----------
    embedding_ : ndarray (n_objects, n_components)
    class_embedding_ : ndarray (n_classes, n_components)
    class_prior_ : ndarray (n_classes,)
    objective_, cross_entropy_, kl_ : float
        J, E and sum of KL at the solution.
    n_iter_ : int
        Iterations on the centres (Newton trials, over all stages / L-BFGS iterations).
    n_newton_iter_ : int
        Total Newton iterations (max over objects, summed over R-steps).
    converged_ : bool
    stopped_early_ : bool
        Whether a callback stopped the fit.
    l2_penalty_centers_ : float
        The :math:`\eta_\phi` used (``"auto"`` resolved).
    history_ : list of dict
        Per iteration: J, time; with Newton (per accepted step) also |grad Phi|
        (``grad_norm``), the trust radius, the actual / predicted decrease (``rho``), the centres
        (``phi``) and the number of objects of the stage (``n_objects``; J is that stage's
        objective).

    Notes
    -----
    The input is class posteriors: non-negative rows that sum to 1 (the estimator's tag
    ``positive_only``). scikit-learn's estimator checks feed it arbitrary non-negative data, so
    they run it with ``normalize=True`` (rows rescaled, with a warning); the integer data of
    their dtype check, and the shifted data of their two checks of ``sample_weight`` given as
    a pandas Series or a list, hold all-zero rows, which no rescaling makes
    posteriors, so those checks fail (a ValueError names the all-zero row). ``transform`` embeds
    each object exactly given the centres, so ``transform(P)`` reproduces ``embedding_`` and
    does not depend on the batch. The class regions of the embedding are given by
    :meth:`posteriors_at` and :meth:`classes_at`, which take coordinates, not posteriors.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.embed import ParametricEmbedding
    >>> P = np.random.default_rng(0).dirichlet(np.full(4, 0.3), size=200)
    >>> pe = ParametricEmbedding(l2_penalty_centers=2.0, random_state=0).fit(P)
    >>> pe.embedding_.shape, pe.class_embedding_.shape
    ((200, 2), (4, 2))
    >>> bool(np.allclose(pe.transform(P[:5]), pe.embedding_[:5], atol=1e-5))
    True
    """

    def __init__(
        self,
        *,
        n_components: int = 2,
        l2_penalty_objects: float = 0.1,
        l2_penalty_centers: float | str = 50.0,
        class_prior: ArrayLike | None = None,
        init: str | ArrayLike = "random",
        init_scale: float = 1.0,
        n_init: int = 1,
        tol_r: float = 1e-12,
        tol_phi: float = 1e-6,
        ftol: float = 1e-12,
        max_iter: int = 1000,
        max_newton_iter: int = 50,
        damped_newton: bool = True,
        normalize: bool = False,
        phi_step: str = "newton",
        lbfgs_memory: int = 10,
        coarse_to_fine: bool = True,
        n_jobs: int | None = None,
        callbacks: Callback | Sequence[Callback] | None = None,
        callback_every: int = 1,
        verbose: bool | int = False,
        random_state: RandomState = None,
        warm_start: bool = False,
        l2_penalty_centers_path: int | ArrayLike | None = None,
    ) -> None:
        self.n_components = n_components
        self.l2_penalty_objects = l2_penalty_objects
        self.l2_penalty_centers = l2_penalty_centers
        self.class_prior = class_prior
        self.init = init
        self.init_scale = init_scale
        self.n_init = n_init
        self.tol_r = tol_r
        self.tol_phi = tol_phi
        self.ftol = ftol
        self.max_iter = max_iter
        self.max_newton_iter = max_newton_iter
        self.damped_newton = damped_newton
        self.normalize = normalize
        self.phi_step = phi_step
        self.lbfgs_memory = lbfgs_memory
        self.coarse_to_fine = coarse_to_fine
        self.n_jobs = n_jobs
        self.callbacks = callbacks
        self.callback_every = callback_every
        self.verbose = verbose
        self.random_state = random_state
        self.warm_start = warm_start
        self.l2_penalty_centers_path = l2_penalty_centers_path

    class_embedding_: FloatArray

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        return tags

    # -- parameters
    def _params(self, N):
        D = self.n_components
        if isinstance(D, bool) or not isinstance(D, numbers.Integral) or D < 1:
            raise ValueError(f"`n_components` must be a positive integer, got {D!r}")
        eta_r = positive_float(self.l2_penalty_objects, "l2_penalty_objects")
        if isinstance(self.l2_penalty_centers, str):
            choice(self.l2_penalty_centers, "l2_penalty_centers", ("auto",))
            eta_phi = 0.01 * N
        else:
            eta_phi = positive_float(self.l2_penalty_centers, "l2_penalty_centers")
        return int(D), eta_r, eta_phi

    def fit(
        self,
        P: ArrayLike,
        y: object = None,
        sample_weight: ArrayLike | None = None,
        class_prior: ArrayLike | None = None,
        init_phi: ArrayLike | None = None,
        init_r: ArrayLike | None = None,
    ) -> Self:
        r"""Fit to posteriors P (N x K). ``init_r`` only changes speed, never the result.

        Parameters
        ----------
        P : array-like of shape (n_objects, n_classes)
            Class posteriors p(c_k | x_n), rows summing to 1.
        y : ignored
        sample_weight : array-like of shape (n_objects,), default=None
            :math:`w_n \ge 0`, the weight of object n's term of the objective,
            :math:`J = \sum_n w_n (-\sum_k P_{nk} \log q_{nk} + \eta_r |r_n|^2) + \eta_\phi
            \sum_k |\phi_k|^2` (e.g. word frequencies; None: all 1). As in scikit-learn, an
            integer weight equals repeating the object that many times and a zero weight
            equals leaving it out (its coordinates are still those ``transform`` would
            give). An object's own optimum ``r_n`` given the centres does not depend on its
            weight; the weights move the centres. ``"auto"`` penalties and the tolerance
            ``tol_phi * N`` use the total weight for N.
        class_prior, init_phi, init_r : optional
            Override ``class_prior`` / ``init``; a warm start of the object coordinates.

        Returns
        -------
        self

        Examples
        --------
        >>> import numpy as np
        >>> from vastml.embed import ParametricEmbedding
        >>> P = np.random.default_rng(0).dirichlet(np.full(3, 0.3), size=50)
        >>> w = np.arange(50) % 3  # weights 0, 1, 2
        >>> a = ParametricEmbedding(l2_penalty_centers=1.0, random_state=0)
        >>> a = a.fit(P, sample_weight=w)
        >>> b = ParametricEmbedding(l2_penalty_centers=1.0, random_state=0)
        >>> b = b.fit(np.repeat(P, w, axis=0))  # each object repeated w_n times
        >>> bool(np.allclose(a.class_embedding_, b.class_embedding_, atol=1e-6))
        True
        """
        P = _check_P(self, P, reset=True)
        N, K = P.shape
        w = _check_sample_weight(sample_weight, N)
        D, eta_r, eta_phi = self._params(N if w is None else float(w.sum()))
        prior = _check_prior(class_prior if class_prior is not None else self.class_prior, K)
        if ((P if w is None else P * w[:, None]).sum(0) == 0).any():
            warnings.warn("a class has zero posterior mass for every object", UserWarning, 2)
        log_prior = np.log(prior)
        rng = check_random_state(self.random_state)
        n_init = int(self.n_init)
        if n_init < 1:
            raise ValueError(f"`n_init` must be >= 1, got {self.n_init}")
        warm = (
            check_bool(self.warm_start, "warm_start")
            and init_phi is None
            and getattr(self, "class_embedding_", None) is not None
            and self.class_embedding_.shape == (K, D)
        )
        path = self._eta_phi_path(eta_phi)
        self._fit_progress = Progress(
            self.callbacks,
            callback_every=self.callback_every,
            verbose=self.verbose,
            total=int(self.max_iter),
            desc=type(self).__name__,
        )
        self._fit_reports = 0
        best: dict[str, Any] | None = None
        try:
            for _ in range(1 if warm else n_init):
                Phi0 = (
                    self.class_embedding_.copy()
                    if warm
                    else self._init_phi(P, D, K, rng, init_phi, w)
                )
                R0, stages = init_r, []
                for stage, v in enumerate(path):
                    res = self._fit_one(P, log_prior, Phi0, R0, eta_r, v, rng, w)
                    stages += [dict(h, stage=stage, l2_penalty_centers=v) for h in res["history"]]
                    Phi0, R0 = res["Phi"], res["R"]
                    if self._fit_progress.stopped:  # a callback stopped an early stage
                        res["history"] = stages
                        break
                else:
                    res = self._fit_one(P, log_prior, Phi0, R0, eta_r, eta_phi, rng, w)
                    res["history"] = stages + res["history"]
                if best is None or res["J"] < best["J"]:
                    best = res
                if self._fit_progress.stopped:
                    break
        finally:
            self._fit_progress.close()
            self.stopped_early_ = self._fit_progress.stopped
            del self._fit_progress, self._fit_reports
        assert best is not None  # n_init >= 1
        self.class_prior_ = prior
        self.embedding_ = best["R"]
        self.class_embedding_ = best["Phi"]
        self.objective_, self.cross_entropy_, self.kl_ = best["J"], best["E"], best["KL"]
        self.n_iter_ = best["nit"]
        self.n_newton_iter_ = best["newton"]
        self.converged_ = best["converged"]
        self.history_ = best["history"]
        self.l2_penalty_centers_ = eta_phi
        self.n_features_in_ = K
        if not self.converged_ and not self.stopped_early_:
            warnings.warn("ParametricEmbedding did not converge", ConvergenceWarning, 2)
        return self

    def _eta_phi_path(self, eta_phi):
        """The homotopy's eta_phi stages before the final ``eta_phi`` (empty: none)."""
        path = self.l2_penalty_centers_path
        if path is None:
            return []
        if isinstance(path, numbers.Integral) and not isinstance(path, bool):
            n = check_int(path, "l2_penalty_centers_path", low=1)
            return [float(v) for v in np.geomspace(100.0 * eta_phi, eta_phi, n + 1)[:-1]]
        vals = np.asarray(path, dtype=np.float64)
        if vals.ndim != 1 or not np.isfinite(vals).all() or (vals <= 0).any():
            raise ValueError(
                "`l2_penalty_centers_path` must be an int, or a sequence of positive numbers"
            )
        return [float(v) for v in vals]

    def fit_transform(self, P: ArrayLike, y: object = None, **kw: Any) -> FloatArray:
        """Fit to P and return the object coordinates ``embedding_``."""
        return self.fit(P, **kw).embedding_

    def _init_phi(self, P, D, K, rng, init_phi, sample_weight=None):
        init = self.init if init_phi is None else init_phi
        scale = positive_float(self.init_scale, "init_scale")
        if isinstance(init, str):
            choice(init, "init", ("random", "mds"))
            if init == "random":
                return scale * rng.standard_normal((K, D))
            return _mds_init(P, D, scale, rng, sample_weight)
        Phi0 = np.asarray(init, dtype=np.float64)
        if Phi0.shape != (K, D) or not np.isfinite(Phi0).all():
            raise ValueError(f"`init` given as an array must be finite with shape ({K}, {D})")
        return Phi0.copy()

    def _kernels(self, P, log_prior, eta_r, eta_phi, sample_weight=None):
        args = (P, log_prior, eta_r, eta_phi, self.tol_r, int(self.max_newton_iter),
                bool(self.damped_newton), self.n_jobs)
        return _Kernels(*args) if sample_weight is None else _Kernels(*args, sample_weight)

    def _fit_one(self, P, log_prior, Phi0, init_r, eta_r, eta_phi, rng, sample_weight=None):
        N, K = P.shape
        D = Phi0.shape[1]
        if init_r is None:
            R = P @ Phi0
        else:
            R = np.asarray(init_r, dtype=np.float64)
            if R.shape != (N, D):
                raise ValueError(f"`init_r` must have shape ({N}, {D})")
            R = R.copy()
        kern = self._kernels(P, log_prior, eta_r, eta_phi, sample_weight)
        size = N if sample_weight is None else float(sample_weight.sum())  # N in tol_phi * N
        choice(self.phi_step, "phi_step", ("newton", "reduced", "paper"))
        check_float(self.tol_phi, "tol_phi", low=0)
        check_float(self.ftol, "ftol", low=0)
        check_float(self.tol_r, "tol_r", low=0)
        check_int(self.max_newton_iter, "max_newton_iter", low=1)
        check_int(self.max_iter, "max_iter", low=0)
        memory = int(self.lbfgs_memory)
        if memory < 1:
            raise ValueError(f"`lbfgs_memory` must be >= 1, got {self.lbfgs_memory}")
        if self.phi_step == "newton":
            Phi, R, nit, newton, status_ok, history = self._fit_newton(
                kern, Phi0, np.ascontiguousarray(R), rng, init_r is None)
        else:
            fit = self._fit_reduced if self.phi_step == "reduced" else self._fit_paper
            Phi, R, nit, newton, status_ok, history = fit(kern, Phi0, np.ascontiguousarray(R),
                                                          memory, size)
        # the final R for the returned Phi (the cache may hold a trial point), polished so that
        # transform() reproduces it
        R, _ = kern.r_step(Phi, R, tol_r=min(self.tol_r, _POLISH))
        J, E, H, G = kern.evaluate(R, Phi)
        gnorm = float(np.linalg.norm(G))
        converged = bool(
            gnorm <= self.tol_phi * size
            or (len(history) >= 2 and abs(history[-2]["J"] - history[-1]["J"])
                <= self.ftol * max(1.0, abs(history[-1]["J"])))
            or status_ok
        )
        return {"R": R, "Phi": Phi, "J": J, "E": E, "KL": E - H, "nit": nit, "newton": newton,
                "converged": converged, "history": history, "grad_norm": gnorm}

    def _stage_sizes(self, N):
        sizes = [N]
        if self.coarse_to_fine:
            while sizes[0] // 5 >= _STAGE_MIN:
                sizes.insert(0, sizes[0] // 5)
        return sizes

    def _fit_newton(self, kern, Phi0, R, rng, fresh_r):
        """Trust-region Newton on J~(Phi) (exact reduced Hessian), coarse to fine: on nested
        random subsets first (``coarse_to_fine``), then on all objects."""
        N = R.shape[0]
        sizes = self._stage_sizes(N)
        perm = rng.permutation(N) if len(sizes) > 1 else None
        Phi = Phi0.copy()
        radius = 0.5 * np.sqrt(Phi.size)
        history, nit, newton, converged = [], 0, 0, False
        t0 = time.perf_counter()
        done = np.zeros(N, dtype=bool)  # objects whose R has been optimised once
        for n_s in sizes:
            idx = np.sort(perm[:n_s]) if n_s < N else None
            if fresh_r and done.any():  # objects new to this stage start from P Phi
                new = ~done if idx is None else np.setdiff1d(idx, np.flatnonzero(done))
                R[new] = kern.P[new] @ Phi
            ks = kern if idx is None else kern.subset(idx, N)
            Rs = R if idx is None else np.ascontiguousarray(R[idx])
            # a subset's optimum is within O(1/sqrt(n)) of the full one: no tighter solve; on
            # all objects only the Newton decrement stops (one more step squares the error)
            gtol = 0.0 if idx is None else _SUBSET_GTOL * n_s
            try:
                Phi, Rs, it, nw, converged, radius = self._trust_newton(
                    ks, Phi, Rs, radius, gtol, history, t0, int(self.max_iter) - nit)
            except StopIteration as stop:
                Phi, Rs, it, nw = stop.value
                if idx is None:
                    R = Rs
                else:
                    R[idx] = Rs
                return Phi, R, nit + it, newton + nw, False, history
            nit, newton = nit + it, newton + nw
            if idx is None:
                R = Rs
                done[:] = True
            else:
                R[idx] = Rs
                done[idx] = True
        return Phi, R, nit, newton, converged, history

    def _trust_newton(self, kern, Phi, R, radius, gtol, history, t0, max_iter):
        """One stage: returns (Phi, R, trials, Newton steps, converged, final radius)."""
        K, D = Phi.shape
        n_obj = R.shape[0]
        J, G, H, R, it = kern.reduced_hessian(Phi, R)
        newton = int(it.max()) if it.size else 0
        nit = 0
        while True:
            g = G.ravel()
            if np.linalg.norm(g) <= gtol or not np.any(g):
                return Phi, R, nit, newton, True, radius
            if nit >= max_iter:
                return Phi, R, nit, newton, False, radius
            Z = _gauge_complement(Phi)
            pz, pred, interior = _trust_region_step(Z.T @ H @ Z, Z.T @ g, radius)
            if interior and pred <= self.ftol * max(1.0, abs(J)):
                # Newton decrement: what is left to gain is below ftol (relative)
                return Phi, R, nit, newton, True, radius
            p = Z @ pz
            pn = float(np.linalg.norm(p))
            nit += 1
            Jt, Gt, Ht, Rt, it = kern.reduced_hessian(Phi + p.reshape(K, D), R)
            newton += int(it.max()) if it.size else 0
            rho = (J - Jt) / pred if pred > 0 else -np.inf
            if rho < 0.25:
                radius = _SHRINK * pn
            elif rho > 0.75 and pn >= 0.99 * radius:
                radius = _GROW * radius
            if rho > 1e-4:
                Phi, J, G, H, R = Phi + p.reshape(K, D), Jt, Gt, Ht, Rt
                history.append({"J": float(J), "grad_norm": float(np.linalg.norm(G)),
                                "radius": float(radius), "rho": float(rho), "n_objects": n_obj,
                                "phi": Phi.copy(),
                                "time": time.perf_counter() - t0})
                try:
                    self._report(history, Phi)
                except StopIteration:
                    raise StopIteration((Phi, R, nit, newton)) from None
            elif pred <= 1e-14 * max(1.0, abs(J)) or radius <= 1e-12 * (1.0 + np.linalg.norm(Phi)):
                # the model's decrease is below what J resolves: stationary to rounding
                return Phi, R, nit, newton, True, radius

    def _fit_reduced(self, kern, Phi0, R, memory, size):
        """L-BFGS (SciPy) on J~(Phi) = min_R J(R, Phi); every evaluation re-solves R."""
        K, D = Phi0.shape
        state = {"R": R, "newton": 0}

        def fun(phi):
            J, G, R, it = kern.reduced(phi.reshape(K, D), state["R"])
            state["R"] = R
            state["newton"] += int(it.max()) if it.size else 0
            return J, G.ravel()

        history = []
        t0 = time.perf_counter()

        def cb(intermediate_result):
            J = intermediate_result.fun
            history.append({"J": float(J), "time": time.perf_counter() - t0})
            self._report(history, intermediate_result.x.reshape(K, D))
            if len(history) >= 2 and abs(history[-2]["J"] - J) <= self.ftol * max(1.0, abs(J)):
                raise StopIteration

        res = scipy.optimize.minimize(
            fun, Phi0.ravel(), jac=True, method="L-BFGS-B", callback=cb,
            options={"maxiter": int(self.max_iter), "maxcor": memory, "gtol": 0.0, "ftol": 0.0,
                     "maxls": 40},
        )
        return (res.x.reshape(K, D), state["R"], int(res.nit), state["newton"], res.status == 0,
                history)

    def _fit_paper(self, kern, Phi0, R, memory, size):
        """The paper's loop (section 3): R-step to tolerance, then one L-BFGS step on Phi with
        R frozen (eq. 8), the step length by backtracking on J(R, Phi + lambda d). ``size``:
        N (the total weight with sample weights) of the stopping rule |dJ/dPhi| <= tol_phi N."""
        Phi = Phi0.copy()
        pairs, history, newton = [], [], 0
        t0 = time.perf_counter()
        prev = None  # (phi, gradient) of the previous outer iteration
        nit = 0
        for nit in range(1, int(self.max_iter) + 1):
            R, it = kern.r_step(Phi, R)
            newton += int(it.max()) if it.size else 0
            J, _, _, G = kern.evaluate(R, Phi)
            g = G.ravel()
            history.append({"J": float(J), "time": time.perf_counter() - t0})
            try:
                self._report(history, Phi)
            except StopIteration:
                return Phi, R, nit, newton, False, history
            if np.linalg.norm(g) <= self.tol_phi * size or (
                len(history) >= 2
                and abs(history[-2]["J"] - J) <= self.ftol * max(1.0, abs(J))
            ):
                return Phi, R, nit, newton, True, history
            if prev is not None:
                s_, y_ = Phi.ravel() - prev[0], g - prev[1]
                sy = s_ @ y_
                if sy > 1e-12 * np.linalg.norm(s_) * np.linalg.norm(y_):  # J is not convex
                    pairs.append((s_, y_, 1.0 / sy))
                    pairs = pairs[-memory:]
            d = _lbfgs_direction(g, pairs)
            slope = g @ d
            if not slope < 0:  # not a descent direction: restart from steepest descent
                pairs, d = [], -g
                slope = g @ d
            prev = (Phi.ravel().copy(), g)
            lam = 1.0 if pairs else min(1.0, 1.0 / max(np.linalg.norm(g), 1e-300))
            for _ in range(60):
                trial = Phi + lam * d.reshape(Phi.shape)
                if kern.evaluate(R, trial)[0] <= J + 1e-4 * lam * slope:
                    Phi = trial
                    break
                lam *= 0.5
            else:  # no decrease along d with R frozen: stationary to rounding
                return Phi, R, nit, newton, True, history
        return Phi, R, nit, newton, False, history

    def _report(self, history, Phi):
        """Reports the last centre iteration to the fit's progress; StopIteration on True."""
        self._fit_reports += 1
        if self._fit_progress.report(self._fit_reports, history[-1]["J"], np.array(Phi)):
            raise StopIteration

    def transform(self, P: ArrayLike) -> FloatArray:
        """Embed new objects with the centres fixed (the global optimum per object)."""
        check_is_fitted(self, "class_embedding_")
        P = _check_P(self, P, reset=False)
        kern = self._kernels(
            P, np.log(self.class_prior_), float(self.l2_penalty_objects), self.l2_penalty_centers_
        )
        R, _ = kern.r_step(self.class_embedding_, P @ self.class_embedding_,
                           tol_r=min(self.tol_r, _POLISH),
                           max_newton_iter=max(int(self.max_newton_iter), 100))
        return R

    def posteriors_at(self, R: ArrayLike) -> FloatArray:
        """Embedding posteriors q(c_k | r) of eq. (1) at coordinates R (n, n_components): the
        class regions of the embedding, e.g. to shade a plot.

        Examples
        --------
        >>> import numpy as np
        >>> from vastml.embed import ParametricEmbedding
        >>> P = np.random.default_rng(0).dirichlet(np.full(3, 0.3), size=60)
        >>> pe = ParametricEmbedding(l2_penalty_centers=1.0, random_state=0).fit(P)
        >>> Q = pe.posteriors_at(pe.class_embedding_)
        >>> Q.shape, bool(np.allclose(Q.sum(1), 1.0))
        ((3, 3), True)
        """
        check_is_fitted(self, "class_embedding_")
        d = self.class_embedding_.shape[1]
        R = np.asarray(R, dtype=np.float64)
        if R.ndim == 1 and R.shape[0] == d:
            R = R[None, :]
        if R.ndim != 2 or R.shape[1] != d:
            raise ValueError(
                f"`R` must be embedding coordinates of shape (n, {d}), got shape {R.shape}"
            )
        if not np.isfinite(R).all():
            raise ValueError("`R` contains NaN or infinite values")
        return np.exp(_log_posteriors(R, self.class_embedding_, np.log(self.class_prior_)))

    def classes_at(self, R: ArrayLike) -> IntArray:
        """Most probable class (index) at coordinates R (n, n_components).

        Examples
        --------
        >>> import numpy as np
        >>> from vastml.embed import ParametricEmbedding
        >>> P = np.eye(3)[np.arange(60) % 3] * 0.9 + 0.1 / 3
        >>> pe = ParametricEmbedding(l2_penalty_centers=1.0, random_state=0).fit(P)
        >>> pe.classes_at(pe.class_embedding_).tolist()
        [0, 1, 2]
        """
        return np.argmax(self.posteriors_at(R), axis=1)

    def score(
        self, P: ArrayLike, y: object = None, sample_weight: ArrayLike | None = None
    ) -> float:
        """Minus the mean KL(P_n || q(. | r_n)) after embedding P (weighted by
        ``sample_weight`` when given)."""
        check_is_fitted(self, "class_embedding_")
        P = _check_P(self, P, reset=False)
        w = _check_sample_weight(sample_weight, P.shape[0])
        Q = self.posteriors_at(self.transform(P))
        kl = np.where(P > 0, P * (np.log(np.where(P > 0, P, 1.0)) - np.log(Q)), 0.0).sum(1)
        return -float(np.average(kl, weights=w))


def posteriors_from_classifier(clf: Any, X: ArrayLike) -> tuple[FloatArray, FloatArray | None]:
    """(P, prior) from a fitted scikit-learn classifier with ``predict_proba``.

    The prior is the classifier's own when it has one (``class_prior_``/``class_count_`` for
    naive Bayes, ``priors_`` for discriminant analysis, ``weights_`` for mixtures), else None.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.naive_bayes import GaussianNB
    >>> X, y = load_iris(return_X_y=True)
    >>> P, prior = posteriors_from_classifier(GaussianNB().fit(X, y), X)
    >>> P.shape, prior.round(3).tolist()
    ((150, 3), [0.333, 0.333, 0.333])
    """
    if not hasattr(clf, "predict_proba"):
        raise TypeError("`clf` must have a predict_proba method")
    P = np.asarray(clf.predict_proba(X), dtype=np.float64)
    prior = None
    for attr in ("class_prior_", "priors_", "weights_"):
        v = getattr(clf, attr, None)
        if v is not None and np.shape(v) == (P.shape[1],):
            prior = np.asarray(v, dtype=np.float64)
            break
    if prior is None and getattr(clf, "class_count_", None) is not None:
        c = np.asarray(clf.class_count_, dtype=np.float64)
        prior = c / c.sum()
    if prior is not None and (prior <= 0).any():
        prior = None
    P = np.clip(P, 0.0, None)
    P /= P.sum(1, keepdims=True)
    return P, prior


def embed_classifier(clf: Any, X: ArrayLike, **params: Any) -> ParametricEmbedding:
    """Parametric Embedding of a classifier's posteriors on X (as in the paper's experiments).

    Returns the fitted :class:`ParametricEmbedding`; ``params`` go to its constructor.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.naive_bayes import GaussianNB
    >>> X, y = load_iris(return_X_y=True)
    >>> pe = embed_classifier(GaussianNB().fit(X, y), X, l2_penalty_centers=1.0, random_state=0)
    >>> pe.class_embedding_.shape
    (3, 2)
    """
    P, prior = posteriors_from_classifier(clf, X)
    if prior is not None and "class_prior" not in params:
        params["class_prior"] = prior
    return ParametricEmbedding(**params).fit(P)
