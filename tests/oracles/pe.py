"""NumPy oracle of Parametric Embedding (Iwata et al. 2007): the vectorised objective,
gradients, per-object Newton R-step and reduced Hessian that the Rust kernels
(``vastml._core.pe_*``) are tested against, and :class:`NumpyKernels`, a drop-in for the
estimator's Rust ``_Kernels`` so that a whole fit can be compared.

Notation of the paper: ``R`` object coordinates, ``Phi`` class centres, ``eta_r`` and
``eta_phi`` the L2 penalties on them (``l2_penalty_objects``, ``l2_penalty_centers`` of
:class:`vastml.embed.ParametricEmbedding`).
"""

from __future__ import annotations

import numpy as np

_CHUNK = 65536


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


def value_and_phi_gradient(P, R, Phi, log_prior, eta_r, eta_phi):
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


class NumpyKernels:
    """The interface of ``vastml.embed._parametric._Kernels`` over the NumPy functions above."""

    def __init__(self, P, log_prior, eta_r, eta_phi, tol_r, max_newton_iter, damped, n_jobs):
        self.P, self.lp = P, np.ascontiguousarray(log_prior, dtype=np.float64)
        self.eta_r, self.eta_phi = eta_r, eta_phi
        self.kw = {"tol_r": tol_r, "max_newton_iter": max_newton_iter, "damped": damped}
        self.n_jobs = n_jobs

    def r_step(self, Phi, R, **override):
        return pe_r_step(self.P, Phi, R, self.lp, self.eta_r, **{**self.kw, **override})

    def evaluate(self, R, Phi):
        J, E, KL = pe_objective(self.P, R, Phi, self.lp, self.eta_r, self.eta_phi)
        _, G = pe_gradients(self.P, R, Phi, self.lp, self.eta_r, self.eta_phi)
        return J, E, E - KL, G

    def reduced(self, Phi, R):
        R, it = pe_r_step(self.P, Phi, R, self.lp, self.eta_r, **self.kw)
        J, G = value_and_phi_gradient(self.P, R, Phi, self.lp, self.eta_r, self.eta_phi)
        return J, G, R, it

    def reduced_hessian(self, Phi, R):
        J, G, R, it = self.reduced(Phi, R)
        H = pe_reduced_hessian(self.P, R, Phi, self.lp, self.eta_r, self.eta_phi)
        return J, G, H, R, it

    def subset(self, idx, n_total):
        sub = type(self)(np.ascontiguousarray(self.P[idx]), self.lp, self.eta_r,
                         self.eta_phi * len(idx) / n_total, 0, 0, True, self.n_jobs)
        sub.kw = dict(self.kw)
        return sub
