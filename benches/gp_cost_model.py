"""Calibrate the constants of the GP solver's cost model on this machine.

    python benches/gp_cost_model.py [--sizes 2000,4000,8000] [--n-jobs N] [--out DIR]

`GaussianProcessRegressor(solver="auto")` compares, in units of the transform planner's
estimated seconds for one direct (exact) product on one core, the expected cost of Nystrom-
preconditioned CG (expected iterations x the planned product's estimate) with the cost of the
dense solver, modelled as ``DENSE_EXTRA_PRODUCTS + N / DENSE_FLOP_RATIO`` (the kernel matrix
and the double-precision refinement products, plus an N^3 / 3 factorisation against an N^2
product). This script measures, for a flat-spectrum problem (uniform on [-1, 1]^3, length
0.3 of the spread, noise 1e-3) at each N, the wall time of the dense solver's whole fit
(`solver="dense"`, which also includes the starting Nystrom factor and the solves) and the
planner's estimate of one direct product, and fits ``t_dense / t_direct = a + N / b`` by least
squares: ``a`` is DENSE_EXTRA_PRODUCTS and ``b`` DENSE_FLOP_RATIO. The Cholesky branch is forced
(the stored-matrix branch is switched off for the measurement), so the model stays the
conservative one: when the stored-matrix solver applies it is cheaper than modelled.
It prints the measurements and the fit and writes gp_cost_model.json.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gp import make_data
from vastml.kernels import (
    GaussianProcessRegressor,
    _gp_dense,
)
from vastml.kernels._gauss import GaussTransform


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2000,4000,8000")
    ap.add_argument("--n-jobs", type=int, default=None)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = ap.parse_args()
    rows = []
    _gp_dense.STORED_RANK_FRACTION = 0.0  # measure the Cholesky branch the model describes
    for n in (int(v) for v in args.sizes.split(",")):
        X, y, _, _, s = make_data(n, 3, "uniform", 1e-3, seed=n + 3)
        ls = 0.3 * s
        scaled = np.ascontiguousarray((X - X.mean(0)) / ls)
        plan = GaussTransform(scaled, math.sqrt(2.0), 1e-9, "auto", args.n_jobs)
        direct = float(plan.info_["estimates"]["direct"])
        t0, c0 = time.perf_counter(), time.process_time()
        gp = GaussianProcessRegressor(length_scale=ls, noise_variance=1e-3, solver="dense", n_jobs=args.n_jobs)
        gp.fit(X, y)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        rows.append({"N": n, "dense_s": wall, "dense_cpu_s": cpu, "direct_estimate_s": direct,
                     "ratio": wall / direct, "cg_iters": gp.n_iter_})
        print(f"N={n:>6}  dense fit {wall:7.2f} s (cpu {cpu:7.2f} s)  direct product (estimate) "
              f"{direct:.4f} s  ratio {wall / direct:8.1f}", flush=True)
    N = np.array([r["N"] for r in rows], dtype=float)
    ratio = np.array([r["ratio"] for r in rows])
    A = np.stack([np.ones_like(N), N], axis=1)
    (a, slope), *_ = np.linalg.lstsq(A, ratio, rcond=None)
    fit = {"DENSE_EXTRA_PRODUCTS": float(a), "DENSE_FLOP_RATIO": float(1.0 / slope) if slope > 0 else math.inf}
    print(f"fit: t_dense / t_direct = {a:.1f} + N / {fit['DENSE_FLOP_RATIO']:.0f}"
          f"   (in the code: {_gp_dense.DENSE_EXTRA_PRODUCTS:g} + N / {_gp_dense.DENSE_FLOP_RATIO:g})")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gp_cost_model.json").write_text(json.dumps({"rows": rows, "fit": fit}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
