"""Parametric Embedding of class structure (Iwata et al. 2007).

Objects r_n and class centres phi_k in D dimensions; the embedding posterior is a unit-variance
spherical Gaussian mixture, ``q_nk = pi_k exp(-|r_n - phi_k|^2 / 2) / sum_l (...)`` (eq. 1), and

    J(R, Phi) = -sum_nk P_nk log q_nk + eta_r sum_n |r_n|^2 + eta_phi sum_k |phi_k|^2   (2), (6)

is minimised by alternating a damped Newton step per object (its Hessian Cov_q(phi) + 2 eta_r I
is positive definite, so R given Phi is a strictly convex, separable problem) with L-BFGS on the
reduced objective ``J(Phi) = min_R J(R, Phi)`` (spec 001 section 2.3: every evaluation re-solves
R, warm-started), or, with ``phi_step="paper"``, the paper's literal loop (R-step, then one
L-BFGS step on Phi with R frozen). Everything is O(N K D) per pass.

Two interchangeable backends compute the O(N K) parts: ``"rust"`` (``vastml._core.pe_*``,
parallel over objects, GIL released, one fused pass per L-BFGS evaluation) and ``"numpy"``
(the vectorised functions of this module, kept as the test oracle).
"""

from __future__ import annotations

import numbers
import time
import warnings

import numpy as np
import scipy.optimize
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from vastml import _core
from vastml._validation import check_bool, check_int, choice, positive_float

_CHUNK = 65536
_POLISH = 1e-20  # squared-gradient tolerance of the final / out-of-sample R-step
_STAGE_MIN = 20_000  # smallest coarse-to-fine stage (objects)
_SUBSET_GTOL = 0.0
_SHRINK, _GROW = 0.25, 2.0


# --------------------------------------------------------------------------- kernels


def pe_log_posteriors(R, Phi, log_prior):
    """log q_nk of eq. (1), by log-sum-exp over ``log pi_k - |r_n - phi_k|^2 / 2``."""
    a = _logits(R, Phi, log_prior)
    m = a.max(axis=1, keepdims=True)
    a -= m
    a -= np.log(np.exp(a).sum(axis=1, keepdims=True))
    return a


def _logits(R, Phi, log_prior):
    sq = (R * R).sum(1)[:, None] - 2.0 * R @ Phi.T + (Phi * Phi).sum(1)[None, :]
    return log_prior[None, :] - 0.5 * np.maximum(sq, 0.0)


def _xlogy_rows(P, logQ):
    """-sum_k P_nk log q_nk per row, with 0 log 0 = 0 (terms with P_nk = 0 skipped)."""
    return -np.where(P > 0, P * logQ, 0.0).sum(axis=1)


def pe_objective(P, R, Phi, log_prior, eta_r, eta_phi):
    """(J, E, KL) for the whole problem: J of eq. (6), cross-entropy E of eq. (2), KL = E - H(P)."""
    E = float(_xlogy_rows(P, pe_log_posteriors(R, Phi, log_prior)).sum())
    H = float(-np.where(P > 0, P * np.log(np.where(P > 0, P, 1.0)), 0.0).sum())
    J = E + eta_r * float((R * R).sum()) + eta_phi * float((Phi * Phi).sum())
    return J, E, E - H


def pe_gradients(P, R, Phi, log_prior, eta_r, eta_phi):
    """(dJ/dR, dJ/dPhi) from eqs. (3), (4) plus the regulariser terms 2 eta r, 2 eta phi."""
    Q = np.exp(pe_log_posteriors(R, Phi, log_prior))
    Wm = P - Q
    GR = Wm.sum(1)[:, None] * R - Wm @ Phi + 2.0 * eta_r * R
    GPhi = Wm.sum(0)[:, None] * Phi - Wm.T @ R + 2.0 * eta_phi * Phi
    return GR, GPhi


def _value_and_phi_gradient(P, R, Phi, log_prior, eta_r, eta_phi):
    """J and dJ/dPhi from one evaluation of the posteriors (the L-BFGS objective)."""
    logQ = pe_log_posteriors(R, Phi, log_prior)
    J = float(_xlogy_rows(P, logQ).sum())
    J += eta_r * float((R * R).sum()) + eta_phi * float((Phi * Phi).sum())
    Wm = P - np.exp(logQ)
    return J, Wm.sum(0)[:, None] * Phi - Wm.T @ R + 2.0 * eta_phi * Phi


def pe_r_hessians(R, Phi, log_prior, eta_r):
    """Per-object Hessians Cov_q(phi) + 2 eta_r I (eq. 5), computed centred; shape (N, D, D)."""
    Q = np.exp(pe_log_posteriors(R, Phi, log_prior))
    c = Phi.mean(axis=0)
    Pc = Phi - c
    mu = Q @ Pc
    S = np.einsum("nk,ki,kj->nij", Q, Pc, Pc) - mu[:, :, None] * mu[:, None, :]
    D = Phi.shape[1]
    return S + 2.0 * eta_r * np.eye(D)


def _solve_small(H, g):
    """Batched solve of H x = g, closed form for D <= 2."""
    D = H.shape[1]
    if D == 1:
        return g / H[:, 0, :]
    if D == 2:
        a, b, c, d = H[:, 0, 0], H[:, 0, 1], H[:, 1, 0], H[:, 1, 1]
        det = a * d - b * c
        return np.stack([(d * g[:, 0] - b * g[:, 1]) / det, (a * g[:, 1] - c * g[:, 0]) / det], 1)
    return np.linalg.solve(H, g[..., None])[..., 0]


def _r_step_chunk(P, R, Phi, log_prior, eta_r, tol_r, max_iter, damped):
    """Damped Newton on every object of the chunk (in place on R); returns Newton counts."""
    n = R.shape[0]
    iters = np.zeros(n, dtype=np.int64)
    act = np.arange(n)
    Pw = P.sum(1)
    c = Phi.mean(axis=0)
    Pc = Phi - c
    D = Phi.shape[1]
    eye = 2.0 * eta_r * np.eye(D)
    outer = (Pc[:, :, None] * Pc[:, None, :]).reshape(Pc.shape[0], D * D)
    for _ in range(max_iter):
        if act.size == 0:
            break
        r, p = R[act], P[act]
        logQ = pe_log_posteriors(r, Phi, log_prior)
        Q = np.exp(logQ)
        Wm = p - Q
        g = Wm.sum(1)[:, None] * r - Wm @ Phi + 2.0 * eta_r * r
        gn = (g * g).sum(1)
        keep = gn >= tol_r
        if not keep.any():
            break
        act, r, p, g, Q, logQ = act[keep], r[keep], p[keep], g[keep], Q[keep], logQ[keep]
        mu = Q @ Pc
        H = (Q @ outer).reshape(-1, D, D) - mu[:, :, None] * mu[:, None, :] + eye
        H *= Pw[act, None, None]  # general row sums: the curvature scales with sum_k P_nk
        H += eye * (1.0 - Pw[act, None, None])
        step = -_solve_small(H, g)
        iters[act] += 1
        if not damped:
            R[act] = r + step
            continue
        f0 = _xlogy_rows(p, logQ) + eta_r * (r * r).sum(1)
        slope = (g * step).sum(1)
        t = np.ones(act.size)
        # Newton decrement below what f can resolve: take the full (quadratic-region) step, stop
        stuck = -slope <= 1e-15 * np.maximum(1.0, np.abs(f0))
        R[act[stuck]] = r[stuck] + step[stuck]
        pending = np.flatnonzero(~stuck)
        for _ls in range(40):
            rt = r[pending] + t[pending, None] * step[pending]
            ft = _xlogy_rows(p[pending], pe_log_posteriors(rt, Phi, log_prior))
            ft += eta_r * (rt * rt).sum(1)
            ok = ft <= f0[pending] + 1e-4 * t[pending] * slope[pending]
            R[act[pending[ok]]] = rt[ok]
            pending = pending[~ok]
            if pending.size == 0:
                break
            t[pending] *= 0.5
        # no decrease even for tiny steps: the object sits at the rounding floor, stop it
        stuck[pending] = True
        act = act[~stuck]
    return iters


def pe_r_step(P, Phi, R0, log_prior, eta_r, *, tol_r=1e-12, max_newton_iter=50, damped=True):
    """Minimise J over R with Phi fixed (global: the per-object problems are strictly convex).

    Returns (R, newton iterations per object). Chunked over objects to bound memory.
    """
    R = np.array(R0, dtype=np.float64, copy=True)
    iters = np.empty(R.shape[0], dtype=np.int64)
    for s in range(0, R.shape[0], _CHUNK):
        e = min(R.shape[0], s + _CHUNK)
        Rc = R[s:e]
        iters[s:e] = _r_step_chunk(P[s:e], Rc, Phi, log_prior, eta_r, tol_r, max_newton_iter, damped)
        R[s:e] = Rc
    return R, iters


def pe_reduced_hessian(P, R, Phi, log_prior, eta_r, eta_phi):
    """Hessian (KD x KD, index k * D + j) of the reduced objective ``J~(Phi) = min_R J(R, Phi)``.

    R must be the optimum for Phi (each ``r_n*(Phi)``). By the implicit function theorem,
    ``d2J~/dPhi2 = sum_n [C_n - B_n^T A_n^{-1} B_n] + 2 eta_phi I`` with ``A_n = d2J/dr_n2``
    (eq. 5 plus 2 eta_r I), ``B_n = d2J/dr_n dPhi`` and ``C_n = d2E_n/dPhi2``; with
    ``u_l = phi_l - r_n``, ``u_bar = sum_l q_l u_l`` and ``g_l = q_l sum(P_n) - P_nl``:
    ``B_l = g_l I - q_l (u_l - u_bar) u_l^T`` and
    ``C = blockdiag(-g_l I + q_l u_l u_l^T) - v v^T``, ``v_l = q_l u_l`` (times sum(P_n)).
    Vectorised NumPy, chunked over objects: the oracle of the Rust ``pe_reduced_hessian``.
    """
    K, D = Phi.shape
    KD = K * D
    H = np.zeros((KD, KD))
    eye = np.eye(D)
    for s in range(0, P.shape[0], 4096):
        p, r = P[s:s + 4096], R[s:s + 4096]
        Q = np.exp(pe_log_posteriors(r, Phi, log_prior))
        pw = p.sum(1)
        g = pw[:, None] * Q - p
        U = Phi[None] - r[:, None]
        ub = (Q[:, :, None] * U).sum(1)
        Uc = U - ub[:, None]
        A = pw[:, None, None] * np.einsum("nk,nki,nkj->nij", Q, Uc, Uc) + 2.0 * eta_r * eye
        B = (g[:, None, :, None] * eye[None, :, None, :]
             - pw[:, None, None, None] * np.einsum("nl,nlt,nlj->ntlj", Q, Uc, U))
        B = B.reshape(-1, D, KD)
        v = (Q[:, :, None] * U).reshape(-1, KD)
        H -= np.einsum("n,na,nb->ab", pw, v, v)
        H -= np.einsum("nta,nts->as", B, np.linalg.solve(A, B))
        blocks = (np.einsum("n,nl,nli,nlj->lij", pw, Q, U, U)
                  - g.sum(0)[:, None, None] * eye)
        for l in range(K):
            H[l * D:(l + 1) * D, l * D:(l + 1) * D] += blocks[l]
    return H + 2.0 * eta_phi * np.eye(KD)


class _Kernels:
    """The O(N K) work of one fit: R-step, fused reduced evaluation, plain evaluation."""

    def __init__(self, backend, P, log_prior, eta_r, eta_phi, tol_r, max_newton_iter, damped,
                 n_jobs):
        self.rust = backend == "rust"
        self.P, self.lp = P, np.ascontiguousarray(log_prior, dtype=np.float64)
        self.eta_r, self.eta_phi = eta_r, eta_phi
        self.kw = dict(tol_r=tol_r, max_newton_iter=max_newton_iter, damped=damped)
        self.n_jobs = n_jobs

    def r_step(self, Phi, R, **override):
        kw = {**self.kw, **override}
        Phi = np.ascontiguousarray(Phi, dtype=np.float64)
        if self.rust:
            R, it = _core.pe_r_step(self.P, Phi, np.ascontiguousarray(R, dtype=np.float64),
                                    self.lp, self.eta_r, n_jobs=self.n_jobs, **kw)
            return R, it.astype(np.int64)
        return pe_r_step(self.P, Phi, R, self.lp, self.eta_r, **kw)

    def evaluate(self, R, Phi):
        """(J, E, entropy, dJ/dPhi) at (R, Phi)."""
        Phi = np.ascontiguousarray(Phi, dtype=np.float64)
        if self.rust:
            J, E, H, G, _ = _core.pe_evaluate(self.P, R, Phi, self.lp, self.eta_r,
                                              self.eta_phi, n_jobs=self.n_jobs)
            return J, E, H, G
        J, E, KL = pe_objective(self.P, R, Phi, self.lp, self.eta_r, self.eta_phi)
        _, G = pe_gradients(self.P, R, Phi, self.lp, self.eta_r, self.eta_phi)
        return J, E, E - KL, G

    def reduced(self, Phi, R):
        """(J~, dJ~/dPhi, R*, Newton steps) of the reduced objective, warm-started at R."""
        Phi = np.ascontiguousarray(Phi, dtype=np.float64)
        if self.rust:
            J, _, _, G, R, it = _core.pe_reduced(self.P, Phi, R, self.lp, self.eta_r,
                                                 self.eta_phi, n_jobs=self.n_jobs, **self.kw)
            return J, G, R, it
        R, it = pe_r_step(self.P, Phi, R, self.lp, self.eta_r, **self.kw)
        J, G = _value_and_phi_gradient(self.P, R, Phi, self.lp, self.eta_r, self.eta_phi)
        return J, G, R, it

    def reduced_hessian(self, Phi, R):
        """(J~, dJ~/dPhi, d2J~/dPhi2, R*, Newton steps), warm-started at R."""
        Phi = np.ascontiguousarray(Phi, dtype=np.float64)
        if self.rust:
            return _core.pe_reduced_hessian(self.P, Phi, R, self.lp, self.eta_r, self.eta_phi,
                                            n_jobs=self.n_jobs, **self.kw)
        J, G, R, it = self.reduced(Phi, R)
        H = pe_reduced_hessian(self.P, R, Phi, self.lp, self.eta_r, self.eta_phi)
        return J, G, H, R, it

    def subset(self, idx, n_total):
        """The same problem on the objects ``idx``, eta_phi scaled by len(idx) / n_total so that
        its optimum estimates the full one (J of the subset ~ J * len(idx) / n_total)."""
        sub = _Kernels("rust" if self.rust else "numpy", np.ascontiguousarray(self.P[idx]),
                       self.lp, self.eta_r, self.eta_phi * len(idx) / n_total, 0, 0, True,
                       self.n_jobs)
        sub.kw = dict(self.kw)
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


def _mds_init(P, D, init_scale, rng):
    """Classical MDS of the soft class profiles M_k = sum_n P_nk P_n / sum_n P_nk (spec 2.4)."""
    colsum = P.sum(0)
    M = (P.T @ P) / np.where(colsum > 0, colsum, 1.0)[:, None]
    sq = (M * M).sum(1)
    D2 = np.maximum(sq[:, None] + sq[None, :] - 2 * M @ M.T, 0.0)
    Y = classical_mds(D2, D, random_state=rng)
    Y -= Y.mean(0)
    rms = np.sqrt((Y**2).sum(1).mean())
    return Y * (init_scale / rms if rms > 0 else 1.0)


# --------------------------------------------------------------------------- estimator


def _check_P(P, name="P", normalize=False, n_classes=None):
    try:
        P = np.asarray(P, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"`{name}` must be an array of numbers: {exc}") from None
    if P.ndim != 2 or P.shape[0] == 0:
        raise ValueError(f"`{name}` must be a non-empty 2-D array (n_objects, n_classes)")
    if P.shape[1] < 2:
        raise ValueError(f"`{name}` needs at least 2 classes, got {P.shape[1]}")
    if n_classes is not None and P.shape[1] != n_classes:
        raise ValueError(f"`{name}` has {P.shape[1]} classes, the fit had {n_classes}")
    if not np.isfinite(P).all() or (P < 0).any():
        raise ValueError(f"`{name}` must be finite and non-negative")
    s = P.sum(1)
    if (np.abs(s - 1.0) > 1e-6).any():
        if not normalize:
            raise ValueError(
                f"rows of `{name}` must sum to 1 (within 1e-6); pass normalize=True to rescale"
            )
        if (s <= 0).any():
            raise ValueError(f"`{name}` has an all-zero row")
        warnings.warn(f"rows of `{name}` renormalised to sum to 1", UserWarning, stacklevel=3)
        P = P / s[:, None]
    return np.ascontiguousarray(P)


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
    eta_r, eta_phi : float, default=0.1, 50.0
        Regularisers (no 1/2: the penalty is ``eta |.|^2``). ``eta_phi="auto"`` is 0.01 N (50 at
        the paper's N = 5000); its effect scales as eta_phi / N.
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
    eta_phi_path : int, sequence of float or None, default=None
        The homotopy of spec 001 §7 against local minima in Phi (no guarantee; compare with
        ``n_init``): fit first with a larger eta_phi (compact classes, a smoother problem),
        then warm-start each next stage from the previous centres and objects, ending at
        ``eta_phi``. An int n: n stages log-spaced from 100 ``eta_phi`` down to ``eta_phi``;
        a sequence: those values, then ``eta_phi``. ``history_`` holds the stages' records
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
        J and dJ/dPhi; see :func:`pe_reduced_hessian`), steps orthogonal to the rotations that
        leave J~ unchanged; converges quadratically (~10-30 evaluations instead of ~100-250).
        ``"reduced"``: L-BFGS (SciPy) on J~, each line-search trial re-solving R (spec 001
        section 2.3). ``"paper"``: the paper's section 3 loop verbatim: R-step to tolerance,
        then one L-BFGS direction on Phi (eq. 8) with the step length by backtracking on J with
        R frozen. All three have the same fixed points.
    lbfgs_memory : int, default=10
        s, the L-BFGS memory.
    coarse_to_fine : bool, default=True
        With ``phi_step="newton"`` and N >= 100,000: first fit the centres on nested random
        subsets of N / 5^j >= 20,000 objects (eta_phi scaled by the subset's share, so the
        subset's optimum estimates the full one), then finish on all objects; the final
        iterations and the convergence test use the full objective.
    backend : {"rust", "numpy"}, default="rust"
        Where the O(N K) work runs: compiled, parallel over objects (``n_jobs``), or the
        vectorised NumPy oracle (same results to ~1e-10).
    n_jobs : int or None, default=None
        Threads of the Rust backend (None: all cores or ``RAYON_NUM_THREADS``).
    verbose : int, default=0
    callback : callable or None
        Called with a dict (J, time) after every centre iteration; returning False stops.
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
    history_ : list of dict
        Per iteration: J, time; with Newton (per accepted step) also |grad Phi|
        (``grad_norm``), the trust radius, the actual / predicted decrease (``rho``), the centres
        (``phi``) and the number of objects of the stage (``n_objects``; J is that stage's
        objective).

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.embed import ParametricEmbedding
    >>> P = np.random.default_rng(0).dirichlet(np.full(4, 0.3), size=200)
    >>> pe = ParametricEmbedding(eta_phi=2.0, random_state=0).fit(P)
    >>> pe.embedding_.shape, pe.class_embedding_.shape
    ((200, 2), (4, 2))
    >>> bool(np.allclose(pe.transform(P[:5]), pe.embedding_[:5], atol=1e-5))
    True
    """

    def __init__(
        self,
        n_components=2,
        *,
        eta_r=0.1,
        eta_phi=50.0,
        class_prior=None,
        init="random",
        init_scale=1.0,
        n_init=1,
        tol_r=1e-12,
        tol_phi=1e-6,
        ftol=1e-12,
        max_iter=1000,
        max_newton_iter=50,
        damped_newton=True,
        normalize=False,
        phi_step="newton",
        lbfgs_memory=10,
        coarse_to_fine=True,
        backend="rust",
        n_jobs=None,
        verbose=0,
        callback=None,
        random_state=None,
        warm_start=False,
        eta_phi_path=None,
    ):
        self.n_components = n_components
        self.eta_r = eta_r
        self.eta_phi = eta_phi
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
        self.backend = backend
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.callback = callback
        self.random_state = random_state
        self.warm_start = warm_start
        self.eta_phi_path = eta_phi_path

    # -- parameters
    def _params(self, N):
        D = self.n_components
        if isinstance(D, bool) or not isinstance(D, numbers.Integral) or D < 1:
            raise ValueError(f"`n_components` must be a positive integer, got {D!r}")
        eta_r = positive_float(self.eta_r, "eta_r")
        if isinstance(self.eta_phi, str):
            choice(self.eta_phi, "eta_phi", ("auto",))
            eta_phi = 0.01 * N
        else:
            eta_phi = positive_float(self.eta_phi, "eta_phi")
        return int(D), eta_r, eta_phi

    def fit(self, P, y=None, class_prior=None, init_phi=None, init_r=None):
        """Fit to posteriors P (N x K). ``init_r`` only changes speed, never the result."""
        P = _check_P(P, normalize=self.normalize)
        N, K = P.shape
        D, eta_r, eta_phi = self._params(N)
        prior = _check_prior(class_prior if class_prior is not None else self.class_prior, K)
        if (P.sum(0) == 0).any():
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
        best = None
        for _ in range(1 if warm else n_init):
            Phi0 = self.class_embedding_.copy() if warm else self._init_phi(P, D, K, rng, init_phi)
            R0, stages = init_r, []
            for stage, v in enumerate(path):
                res = self._fit_one(P, log_prior, Phi0, R0, eta_r, v, rng)
                stages += [dict(h, stage=stage, eta_phi=v) for h in res["history"]]
                Phi0, R0 = res["Phi"], res["R"]
            res = self._fit_one(P, log_prior, Phi0, R0, eta_r, eta_phi, rng)
            res["history"] = stages + res["history"]
            if best is None or res["J"] < best["J"]:
                best = res
        self.class_prior_ = prior
        self.embedding_ = best["R"]
        self.class_embedding_ = best["Phi"]
        self.objective_, self.cross_entropy_, self.kl_ = best["J"], best["E"], best["KL"]
        self.n_iter_ = best["nit"]
        self.n_newton_iter_ = best["newton"]
        self.converged_ = best["converged"]
        self.history_ = best["history"]
        self.eta_phi_ = eta_phi
        self.n_features_in_ = K
        if not self.converged_:
            warnings.warn("ParametricEmbedding did not converge", ConvergenceWarning, 2)
        return self

    def _eta_phi_path(self, eta_phi):
        """The homotopy's eta_phi stages before the final ``eta_phi`` (empty: none)."""
        path = self.eta_phi_path
        if path is None:
            return []
        if isinstance(path, numbers.Integral) and not isinstance(path, bool):
            n = check_int(path, "eta_phi_path", low=1)
            return [float(v) for v in np.geomspace(100.0 * eta_phi, eta_phi, n + 1)[:-1]]
        vals = np.asarray(path, dtype=np.float64)
        if vals.ndim != 1 or not np.isfinite(vals).all() or (vals <= 0).any():
            raise ValueError("`eta_phi_path` must be an int, or a sequence of positive numbers")
        return [float(v) for v in vals]

    def fit_transform(self, P, y=None, **kw):
        return self.fit(P, **kw).embedding_

    def _init_phi(self, P, D, K, rng, init_phi):
        init = self.init if init_phi is None else init_phi
        scale = positive_float(self.init_scale, "init_scale")
        if isinstance(init, str):
            choice(init, "init", ("random", "mds"))
            if init == "random":
                return scale * rng.standard_normal((K, D))
            return _mds_init(P, D, scale, rng)
        Phi0 = np.asarray(init, dtype=np.float64)
        if Phi0.shape != (K, D) or not np.isfinite(Phi0).all():
            raise ValueError(f"`init` given as an array must be finite with shape ({K}, {D})")
        return Phi0.copy()

    def _kernels(self, P, log_prior, eta_r, eta_phi):
        choice(self.backend, "backend", ("rust", "numpy"))
        return _Kernels(self.backend, P, log_prior, eta_r, eta_phi, self.tol_r,
                        int(self.max_newton_iter), bool(self.damped_newton), self.n_jobs)

    def _fit_one(self, P, log_prior, Phi0, init_r, eta_r, eta_phi, rng):
        N, K = P.shape
        D = Phi0.shape[1]
        if init_r is None:
            R = P @ Phi0
        else:
            R = np.asarray(init_r, dtype=np.float64)
            if R.shape != (N, D):
                raise ValueError(f"`init_r` must have shape ({N}, {D})")
            R = R.copy()
        kern = self._kernels(P, log_prior, eta_r, eta_phi)
        choice(self.phi_step, "phi_step", ("newton", "reduced", "paper"))
        memory = int(self.lbfgs_memory)
        if memory < 1:
            raise ValueError(f"`lbfgs_memory` must be >= 1, got {self.lbfgs_memory}")
        if self.phi_step == "newton":
            Phi, R, nit, newton, status_ok, history = self._fit_newton(
                kern, Phi0, np.ascontiguousarray(R), rng, init_r is None)
        else:
            fit = self._fit_reduced if self.phi_step == "reduced" else self._fit_paper
            Phi, R, nit, newton, status_ok, history = fit(kern, Phi0, np.ascontiguousarray(R),
                                                          memory)
        # the final R for the returned Phi (the cache may hold a trial point), polished so that
        # transform() reproduces it
        R, _ = kern.r_step(Phi, R, tol_r=min(self.tol_r, _POLISH))
        J, E, H, G = kern.evaluate(R, Phi)
        gnorm = float(np.linalg.norm(G))
        converged = bool(
            gnorm <= self.tol_phi * N
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
                    self._report(history)
                except StopIteration:
                    raise StopIteration((Phi, R, nit, newton)) from None
            elif pred <= 1e-14 * max(1.0, abs(J)) or radius <= 1e-12 * (1.0 + np.linalg.norm(Phi)):
                # the model's decrease is below what J resolves: stationary to rounding
                return Phi, R, nit, newton, True, radius

    def _fit_reduced(self, kern, Phi0, R, memory):
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
            self._report(history)
            if len(history) >= 2 and abs(history[-2]["J"] - J) <= self.ftol * max(1.0, abs(J)):
                raise StopIteration

        res = scipy.optimize.minimize(
            fun, Phi0.ravel(), jac=True, method="L-BFGS-B", callback=cb,
            options={"maxiter": int(self.max_iter), "maxcor": memory, "gtol": 0.0, "ftol": 0.0,
                     "maxls": 40},
        )
        return (res.x.reshape(K, D), state["R"], int(res.nit), state["newton"], res.status == 0,
                history)

    def _fit_paper(self, kern, Phi0, R, memory):
        """The paper's loop (section 3): R-step to tolerance, then one L-BFGS step on Phi with
        R frozen (eq. 8), the step length by backtracking on J(R, Phi + lambda d)."""
        N = R.shape[0]
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
                self._report(history)
            except StopIteration:
                return Phi, R, nit, newton, False, history
            if np.linalg.norm(g) <= self.tol_phi * N or (
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

    def _report(self, history):
        if self.callback is not None and self.callback(dict(history[-1])) is False:
            raise StopIteration
        if self.verbose:
            h = history[-1]
            print(f"[PE] it {len(history)}: J = {h['J']:.10g} ({h['time']:.2f} s)", flush=True)

    def transform(self, P):
        """Embed new objects with the centres fixed (the global optimum per object)."""
        check_is_fitted(self, "class_embedding_")
        P = _check_P(P, normalize=self.normalize, n_classes=self.n_features_in_)
        kern = self._kernels(P, np.log(self.class_prior_), float(self.eta_r), self.eta_phi_)
        R, _ = kern.r_step(self.class_embedding_, P @ self.class_embedding_,
                           tol_r=min(self.tol_r, _POLISH),
                           max_newton_iter=max(int(self.max_newton_iter), 100))
        return R

    def predict_proba(self, R):
        """Embedding posteriors q(c_k | r) of eq. (1) at coordinates R."""
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
        return np.exp(pe_log_posteriors(R, self.class_embedding_, np.log(self.class_prior_)))

    def predict(self, R):
        """Most probable class (index) at coordinates R."""
        return np.argmax(self.predict_proba(R), axis=1)

    def score(self, P, y=None):
        """Minus the mean KL(P_n || q(. | r_n)) after embedding P."""
        P = _check_P(P, normalize=self.normalize, n_classes=getattr(self, "n_features_in_", None))
        Q = self.predict_proba(self.transform(P))
        kl = np.where(P > 0, P * (np.log(np.where(P > 0, P, 1.0)) - np.log(Q)), 0.0).sum(1)
        return -float(kl.mean())


def posteriors_from_classifier(clf, X):
    """(P, prior) from a fitted scikit-learn classifier with ``predict_proba``.

    The prior is the classifier's own when it has one (``class_prior_``/``class_count_`` for
    naive Bayes, ``priors_`` for discriminant analysis, ``weights_`` for mixtures), else None.
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


def embed_classifier(clf, X, **params):
    """Parametric Embedding of a classifier's posteriors on X (as in the paper's experiments).

    Returns the fitted :class:`ParametricEmbedding`; ``params`` go to its constructor.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.naive_bayes import GaussianNB
    >>> X, y = load_iris(return_X_y=True)
    >>> pe = embed_classifier(GaussianNB().fit(X, y), X, eta_phi=1.0, random_state=0)
    >>> pe.class_embedding_.shape
    (3, 2)
    """
    P, prior = posteriors_from_classifier(clf, X)
    if prior is not None and "class_prior" not in params:
        params["class_prior"] = prior
    return ParametricEmbedding(**params).fit(P)
