"""Log marginal likelihood of a GP and its gradient, by stochastic Lanczos quadrature and
Hutchinson probes on fast products; L-BFGS over the log hyper-parameters with restarts.

.. math::

    \\mathrm{NLL}(\\theta) = \\tfrac12 y^T \\hat K^{-1} y + \\tfrac12 \\log\\det \\hat K + \\tfrac N2 \\log 2\\pi,
    \\qquad
    \\frac{\\partial\\,\\mathrm{NLL}}{\\partial\\theta} = \\tfrac12 \\operatorname{tr}(\\hat K^{-1}\\partial\\hat K)
        - \\tfrac12 \\xi^T \\partial\\hat K\\, \\xi .

With probes :math:`z_i \\sim N(0, P)` (P the preconditioner), one preconditioned CG over
:math:`[y, z_1, \\dots, z_m]` gives :math:`\\xi`, the Lanczos matrices of the probes
(:math:`\\log\\det \\hat K = \\log\\det P + \\mathrm{SLQ}`), and
:math:`\\operatorname{tr}(\\hat K^{-1}\\partial\\hat K) \\approx \\frac1m \\sum_i (\\hat K^{-1}z_i)^T
\\partial\\hat K\\,(P^{-1} z_i)` (GPyTorch's estimator). The probes are drawn once per fit, so
the objective is a deterministic function of the hyper-parameters for L-BFGS.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.optimize import minimize

from vastml.kernels._gp_cg import lanczos_quadrature_logdet
from vastml.kernels._gp_precond import NystromPreconditioner
from vastml.kernels._gp_system import GPSystem

if TYPE_CHECKING:
    from vastml._progress import Progress
    from vastml._typing import FloatArray
    from vastml.kernels._gp_cg import CGResult

#: Bounds of every hyper-parameter (scikit-learn's defaults for RBF, ConstantKernel, WhiteKernel).
BOUNDS = (1e-5, 1e5)


class MarginalLikelihood:
    """NLL and gradient in :math:`\\theta = [\\log\\ell_1..\\log\\ell_d, \\log\\sigma_f^2, \\log\\sigma^2]`.

    Parameters
    ----------
    X : ndarray (n, d)
        Centred inputs.
    y : ndarray (n,)
        Centred targets.
    n_probes : int
    rng : numpy Generator
    options : dict
        ``method``, ``n_jobs``, ``rank``, ``target_iterations``, ``tol``, ``delta``,
        ``max_iter``, ``epsilon`` (derivative products).
    progress : Progress or None
        Reported once per evaluation with the NLL.
    """

    def __init__(
        self,
        X: FloatArray,
        y: FloatArray,
        n_probes: int,
        rng: np.random.Generator | np.random.RandomState,
        options: dict[str, Any],
        progress: Progress | None = None,
    ) -> None:
        self.X, self.y = X, y
        self.n, self.d = X.shape
        self.opt = dict(options)
        self.g_full = rng.standard_normal((self.n, n_probes))
        self.g_low = rng.standard_normal((NystromPreconditioner.max_rank(self.n), n_probes))
        self.progress = progress
        self.n_evals = 0
        self.best: tuple[float, FloatArray | None] = (math.inf, None)
        self.rank = options["rank"]

    def system(self, theta: FloatArray) -> GPSystem:
        ls = np.exp(theta[: self.d])
        sf2, noise = math.exp(theta[self.d]), math.exp(theta[self.d + 1])
        scaled = np.ascontiguousarray(self.X / ls)
        return GPSystem(
            scaled, sf2, noise, self.opt["method"], self.opt["n_jobs"], self.rank, self.opt["target_iterations"]
        )

    def __call__(self, theta: FloatArray) -> tuple[float, FloatArray]:
        """(NLL, gradient) at ``theta``."""
        theta = np.asarray(theta, dtype=np.float64)
        n, d = self.n, self.d
        while True:
            sys_ = self.system(theta)
            noise = sys_.noise_variance
            P = sys_.precond
            rank = sys_.n_landmarks
            if isinstance(P, NystromPreconditioner):  # the system's own (never the dense factor)
                Z = P.sample(self.g_low, self.g_full)
                PinvZ = P.solve(Z)
                logdet_p = P.logdet()
            else:
                total = noise + sys_.kernel.signal_variance
                Z = self.g_full * math.sqrt(total)
                PinvZ = Z / total
                logdet_p = n * math.log(total)
            B = np.column_stack([self.y, Z])
            res, _ = sys_.solve(B, tol=self.opt["tol"], delta=self.opt["delta"], max_iter=self.opt["max_iter"])
            if sys_.n_landmarks == rank:
                break
            # CG grew the preconditioner: the probes must follow the new P, so start again
            # with that rank (kept for the next evaluations).
            self.rank = sys_.n_landmarks
        xi = res.x[:, 0]
        KinvZ = res.x[:, 1:]
        probes = _drop_first(res)
        logdet = logdet_p + lanczos_quadrature_logdet(probes)
        fit = float(self.y @ xi)
        nll = 0.5 * fit + 0.5 * logdet + 0.5 * n * math.log(2 * math.pi)
        m = Z.shape[1]
        # derivative products: quadratic term with (xi, xi), trace term with (K^-1 z, P^-1 z)
        both = sys_.derivative_products(res.x, np.column_stack([xi, PinvZ]), self.opt["epsilon"])
        quad = both[:, 0]
        trace = both[:, 1:].mean(axis=1)
        grad = np.empty(d + 2)
        grad[:d] = 0.5 * trace[:d] - 0.5 * quad[:d]
        grad[d] = 0.5 * trace[d] - 0.5 * quad[d]
        tr_inv = float(np.sum(KinvZ * PinvZ)) / m
        grad[d + 1] = 0.5 * noise * tr_inv - 0.5 * noise * float(xi @ xi)
        self.n_evals += 1
        if nll < self.best[0]:
            self.best = (nll, theta.copy())
        if self.progress is not None and self.progress.report(self.n_evals, nll, theta.copy()):
            raise _Stop
        return nll, grad


class _Stop(Exception):
    pass


def _drop_first(res: CGResult) -> CGResult:
    """The CGResult restricted to the probe columns (all but the first)."""
    from dataclasses import replace

    if res.alphas is None or res.betas is None or res.column_iters is None or res.rz0 is None:
        raise ValueError("the CG result keeps no Lanczos coefficients")
    return replace(
        res,
        alphas=res.alphas[:, 1:],
        betas=res.betas[:, 1:],
        column_iters=res.column_iters[1:],
        rz0=res.rz0[1:],
    )


def optimize_hyperparameters(
    mll: MarginalLikelihood,
    theta0: FloatArray,
    n_restarts: int,
    rng: np.random.Generator | np.random.RandomState,
    max_evals: int,
) -> tuple[FloatArray, float, list[tuple[float, FloatArray, int]], bool]:
    """L-BFGS-B on ``mll`` from ``theta0`` and ``n_restarts`` log-uniform draws within a factor
    10 of it (clipped to :data:`BOUNDS`). Returns (theta, nll, per-start results, stopped)."""
    lo, hi = math.log(BOUNDS[0]), math.log(BOUNDS[1])
    starts = [np.clip(theta0, lo, hi)]
    for _ in range(n_restarts):
        starts.append(np.clip(theta0 + rng.uniform(-math.log(10), math.log(10), size=theta0.shape), lo, hi))
    runs = []
    stopped = False
    for s in starts:
        try:
            r = minimize(
                mll,
                s,
                jac=True,
                method="L-BFGS-B",
                bounds=[(lo, hi)] * len(s),
                options={"maxfun": max_evals, "maxiter": max_evals},
            )
            runs.append((float(r.fun), r.x, int(r.nfev)))
        except _Stop:
            stopped = True
            break
    nll, theta = mll.best
    if theta is None:
        raise RuntimeError("the marginal likelihood was never evaluated")
    return theta, nll, runs, stopped
