"""Feasibility study: a two-level (block-Jacobi + Nystrom coarse space) preconditioner for the
GP system on a flat spectrum, measured before any library code is written for it.

    python benches/gp_precond_study.py [--n 20000] [--configs 1000:1000,2000:2000,1000:3000,0:2916]
                                       [--case 2] [--tols 5e-4,3e-5] [--max-iter 300] [--threads T]
                                       [--out DIR]

The system is that of ``benches/gp.py``'s fixed row ``--case`` (default 2: uniform d=3, noise
1e-3, length 0.3 of the spread) at N = ``--n``. The kernel matrix is stored in single precision
(``vastml.kernels._gp_dense.kernel_matrix``, as the library's dense solver does), and CG runs in
single precision on it (``ssymv``, one triangle) with the preconditioner

    M = U U^T + blockdiag_b(K - U U^T) + sigma^2 I,

applied by Woodbury: ``U = K_{nL} C^{-T}`` is the Nystrom factor on ``rank`` farthest-point
landmarks (``C C^T = K_{LL}``, pivoted), and the blocks are the leaves (at most ``block`` points)
of a kd-tree that halves the longest side; each block's ``K_bb - U_b U_b^T + sigma^2 I`` is
factored by Cholesky. Block 0 means a diagonal (Nystrom alone, as the library's stored-matrix
solver), rank 0 plain block-Jacobi. This is the partially-independent (PITC-like) form of an
additive two-level Schwarz preconditioner without overlap.

Each configuration ``block:rank`` prints the CG iterations to each relative residual of
``--tols`` (5e-4 is the library's inner tolerance at N = 20,000; the outer solve needs about two
such solves), the set-up time, and the time of one product with the stored matrix, so that
iterations x product + set-up can be compared with the 4 s that 20x scikit-learn needs there.
``--library`` times instead the library's stored-matrix branch (forced), fit + predict, with
the second inner solve loosened to the outer tolerance and without. ``--tiles`` prints instead, for every case, the fraction of the matrix in tiles of kd-tree
leaves whose entries are all below 1e-7 (what a tile-sparse product could skip).
Times are wall times of numpy / scipy code on this machine (the set-up is not optimised); the
iteration counts do not depend on the load. It writes ``gp_precond_study.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy.linalg import cho_solve, cholesky, solve_triangular
from scipy.linalg.blas import ssymv
from scipy.linalg.lapack import dpstrf
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gp import FIXED_CASES, make_data
from vastml.kernels._gp_dense import kernel_matrix
from vastml.kernels._gp_precond import farthest_points

CASES = FIXED_CASES


def kd_leaves(X: np.ndarray, idx: np.ndarray, size: int) -> list[np.ndarray]:
    """Leaves of at most ``size`` points of a kd-tree that halves the longest side."""
    if len(idx) <= size:
        return [idx]
    sub = X[idx]
    axis = int(np.argmax(sub.max(0) - sub.min(0)))
    order = np.argsort(sub[:, axis], kind="stable")
    half = len(idx) // 2
    return kd_leaves(X, idx[order[:half]], size) + kd_leaves(X, idx[order[half:]], size)


class TwoLevel:
    """M^{-1} for M = U U^T + blockdiag(K - U U^T) + noise I, in single precision."""

    def __init__(self, K: np.ndarray, X: np.ndarray, noise: float, block: int, rank: int) -> None:
        n = len(X)
        t0 = time.perf_counter()
        if rank > 0:
            landmarks, _ = farthest_points(X, rank)
            c, piv, r, _ = dpstrf(
                K[np.ix_(landmarks, landmarks)].astype(np.float64), lower=1, tol=1e-6
            )
            keep = landmarks[piv[:r] - 1]
            C = np.tril(c[:r, :r])
            U = solve_triangular(C, K[keep].astype(np.float64), lower=True).T.astype(np.float32)
        else:
            U = np.zeros((n, 0), dtype=np.float32)
        self.U = U
        if block > 0:
            self.blocks = kd_leaves(X, np.arange(n), block)
            self.factors = []
            W = np.empty_like(U)
            for b in self.blocks:
                Ub = U[b]
                E = K[np.ix_(b, b)] - Ub @ Ub.T
                E.flat[:: len(b) + 1] += np.float32(noise)
                F = cholesky(E, lower=True)
                self.factors.append(F)
                W[b] = cho_solve((F, True), Ub)
        else:  # diagonal: Nystrom alone, (K - U U^T)_ii + noise
            self.blocks = None
            self.diag = (np.diag(K) - np.einsum("ij,ij->i", U, U) + noise).astype(np.float32)
            W = U / self.diag[:, None]
        self.W = W
        G = np.eye(U.shape[1]) + U.T.astype(np.float64) @ W.astype(np.float64)
        self.G = cholesky(G, lower=True) if U.shape[1] else None
        self.setup = time.perf_counter() - t0

    def _blocks(self, v: np.ndarray) -> np.ndarray:
        if self.blocks is None:
            return v / self.diag
        out = np.empty_like(v)
        for b, F in zip(self.blocks, self.factors):
            out[b] = cho_solve((F, True), v[b])
        return out

    def __call__(self, v: np.ndarray) -> np.ndarray:
        z = self._blocks(v)
        if self.G is not None:
            u = cho_solve((self.G, True), (self.U.T @ z).astype(np.float64)).astype(np.float32)
            z = z - self.W @ u
        return z


def pcg(
    K: np.ndarray, noise: float, b: np.ndarray, M: TwoLevel, tols: list[float], max_iter: int
) -> dict:
    """Iterations of single-precision PCG on the stored matrix to each relative residual."""
    tols = sorted(tols, reverse=True)
    x = np.zeros_like(b)
    r = b.copy()
    z = M(r)
    p = z.copy()
    rz = float(r @ z)
    bn = float(np.linalg.norm(b))
    hits: dict = {}
    for it in range(1, max_iter + 1):
        q = ssymv(1.0, K.T, p, lower=1) + np.float32(noise) * p
        a = rz / float(p @ q)
        x += np.float32(a) * p
        r -= np.float32(a) * q
        rel = float(np.linalg.norm(r)) / bn
        while tols and rel <= tols[0]:
            hits[tols.pop(0)] = it
        if not tols:
            break
        z = M(r)
        rz_new = float(r @ z)
        p = z + np.float32(rz_new / rz) * p
        rz = rz_new
    for t in tols:
        hits[t] = None  # not reached within max_iter
    return hits


def negligible_tiles(X: np.ndarray, leaf: int, threshold: float = 1e-7) -> float:
    """Fraction of the kernel matrix's entries in tiles (pairs of kd-tree leaves of at most
    ``leaf`` points) whose largest entry, bounded by the boxes' distance, is below
    ``threshold``: what a tile-sparse product or build could skip."""
    leaves = kd_leaves(X, np.arange(len(X)), leaf)
    lo = np.array([X[b].min(0) for b in leaves])
    hi = np.array([X[b].max(0) for b in leaves])
    gap = np.maximum(0.0, np.maximum(lo[:, None] - hi[None], lo[None] - hi[:, None]))
    sizes = np.array([len(b) for b in leaves], dtype=np.float64)
    skip = np.exp(-0.5 * (gap**2).sum(-1)) < threshold
    return float((np.outer(sizes, sizes) * skip).sum() / len(X) ** 2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--case", type=int, default=2)
    ap.add_argument(
        "--configs", default="1000:1000,2000:1000,2000:2000,1000:3000,0:2000,0:2916,0:3000"
    )
    ap.add_argument("--tols", default="5e-4,3e-5")
    ap.add_argument("--max-iter", type=int, default=300)
    ap.add_argument(
        "--tiles",
        action="store_true",
        help="only print the fraction of negligible tiles (kd leaves of 500 and 1,000) per case",
    )
    ap.add_argument(
        "--library",
        action="store_true",
        help="time the library's stored-matrix branch with and without the loosened second inner solve",
    )
    ap.add_argument("--threads", type=int, default=None, help="BLAS threads (default: all)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = ap.parse_args()
    with threadpool_limits(args.threads, user_api="blas"):
        return study(args)


def library_rows(args: argparse.Namespace) -> int:
    """fit + predict (2,000 test points) of GaussianProcessRegressor(solver="dense") forced to
    the stored-matrix branch, with the second inner solve loosened to the outer tolerance (the
    library's default) and without (``b_norm=0``), in the same run."""
    from vastml.kernels import GaussianProcessRegressor, _gp_dense

    shape, d, noise, frac = CASES[args.case]
    X, y, Xt, _, s = make_data(args.n, d, shape, noise, seed=args.n + d)
    _gp_dense.STORED_MIN_N = 0
    _gp_dense.cholesky_is_faster = lambda *a: False
    init = _gp_dense.StoredKernelPreconditioner.__init__
    means = []
    for loosen in (False, True):

        def patched(self, *a, loosen=loosen, **kw):
            if not loosen:
                kw["b_norm"] = 0.0
            init(self, *a, **kw)

        _gp_dense.StoredKernelPreconditioner.__init__ = patched
        t0, c0 = time.perf_counter(), time.process_time()
        gp = GaussianProcessRegressor(length_scale=frac * s, noise_variance=noise, solver="dense")
        gp.fit(X, y)
        means.append(gp.predict(Xt))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        info = gp._dense_info
        print(
            f"{shape} d={d} noise={noise} ls={frac} N={args.n} second solve loosened {loosen}: "
            f"{wall:.1f} s (cpu {cpu:.1f} s), {info['preconditioner']} rank {info.get('rank')}, "
            f"inner iterations {info.get('inner_iterations')}, outer residuals {gp.residuals_}",
            flush=True,
        )
    _gp_dense.StoredKernelPreconditioner.__init__ = init
    print(f"  max |mean difference| / std(y) = {np.abs(means[0] - means[1]).max() / y.std():.1e}")
    return 0


def study(args: argparse.Namespace) -> int:
    if args.library:
        return library_rows(args)
    if args.tiles:
        for shape, d, noise, frac in CASES:
            X, _, _, _, s = make_data(args.n, d, shape, noise, seed=args.n + d)
            scaled = (X - X.mean(0)) / (frac * s)
            parts = ", ".join(
                f"leaves of {leaf}: {negligible_tiles(scaled, leaf):.2f}" for leaf in (500, 1000)
            )
            print(f"{shape} d={d} ls={frac} N={args.n}: entries in negligible tiles, {parts}")
        return 0
    shape, d, noise, frac = CASES[args.case]
    n = args.n
    X, y, _, _, s = make_data(n, d, shape, noise, seed=n + d)
    scaled = np.ascontiguousarray((X - X.mean(0)) / (frac * s))
    yc = (y - y.mean()).astype(np.float32)
    t0 = time.perf_counter()
    K = kernel_matrix(scaled, 1.0, args.threads or 2)
    t_matrix = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(3):
        ssymv(1.0, K.T, yc, lower=1)
    t_product = (time.perf_counter() - t0) / 3
    print(
        f"{shape} d={d} noise={noise} ls={frac} N={n}: matrix {t_matrix:.2f} s, "
        f"one stored-matrix product {t_product:.3f} s",
        flush=True,
    )
    tols = [float(t) for t in args.tols.split(",")]
    rows = []
    for spec in args.configs.split(","):
        block, rank = (int(v) for v in spec.split(":"))
        M = TwoLevel(K, scaled, noise, block, rank)
        t0 = time.perf_counter()
        hits = pcg(K, noise, yc, M, tols, args.max_iter)
        t_cg = time.perf_counter() - t0
        row = {
            "block": block,
            "rank": M.U.shape[1],
            "setup_s": M.setup,
            "cg_s": t_cg,
            "iterations": {str(k): v for k, v in hits.items()},
        }
        rows.append(row)
        its = ", ".join(f"{k:g}: {v}" for k, v in sorted(hits.items(), reverse=True))
        print(
            f"  block {block:>5} rank {M.U.shape[1]:>5}: iterations to ({its}); set-up {M.setup:.1f} s, "
            f"CG {t_cg:.1f} s",
            flush=True,
        )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gp_precond_study.json").write_text(
        json.dumps(
            {
                "case": [shape, d, noise, frac],
                "N": n,
                "matrix_s": t_matrix,
                "product_s": t_product,
                "rows": rows,
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
