"""Gaussian process regression benchmark: CG on fast Gauss transforms vs scikit-learn's exact
GaussianProcessRegressor, on the robot-arm data of Raykar's thesis (§7.7).

    python benches/gp.py [--quick] [--n N]

N = 10,000 training points (--quick: 4,000), d = 2, 1,000 test points, noise variance 0.1.
Hyper-parameters: scikit-learn's marginal-likelihood fit (ConstantKernel * RBF + WhiteKernel) on a
1,000-point subset, as the thesis did with GPML; then both methods use them, fixed.
  ours   GaussianProcessRegressor(tol=1e-3, delta=1e-3) fit + predict
  peer   sklearn GaussianProcessRegressor(kernel fixed, optimizer=None, alpha=noise) fit + predict
Targets: >= 10x faster, SMSE within 5% of scikit-learn's.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import Bench  # noqa: E402

from vastml.datasets import make_robot_arm  # noqa: E402
from vastml.kernels import GaussianProcessRegressor  # noqa: E402


def add_args(ap):
    ap.add_argument("--n", type=int, default=None)


def smse(pred, y):
    return float(np.mean((pred - y) ** 2) / np.var(y))


def main() -> int:
    from sklearn.gaussian_process import GaussianProcessRegressor as SkGP
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

    bench = Bench("gp", add_args=add_args, repeats=3, quick_repeats=1)
    n = bench.args.n or (4_000 if bench.quick else 10_000)
    X, y = make_robot_arm(n, random_state=0)
    Xt, yt = make_robot_arm(1_000, random_state=1)
    mu, sd = X.mean(0), X.std(0)
    X, Xt = (X - mu) / sd, (Xt - mu) / sd
    ym = y.mean()
    kernel = ConstantKernel(1.0) * RBF([1.0, 1.0]) + WhiteKernel(0.1)
    hyper = SkGP(kernel, normalize_y=False, random_state=0).fit(X[:1000], y[:1000] - ym).kernel_
    sf2 = hyper.k1.k1.constant_value
    ls = np.asarray(hyper.k1.k2.length_scale, dtype=float)
    noise = hyper.k2.noise_level

    def ours():
        gp = GaussianProcessRegressor(length_scale=ls, signal_variance=sf2, noise_variance=noise).fit(X, y)
        return gp.predict(Xt), gp.n_iter_

    def peer():
        gp = SkGP(ConstantKernel(sf2, "fixed") * RBF(ls, "fixed"), alpha=noise, optimizer=None).fit(X, y - ym)
        return gp.predict(Xt) + ym

    t_ours = bench.time(ours)
    t_peer = bench.time(peer, warmup=0, repeats=1)
    s_ours, s_peer = smse(t_ours.value[0], yt), smse(t_peer.value, yt)
    row = bench.compare(
        "robot arm", t_ours, {"scikit-learn exact": t_peer}, {"N": n, "d": 2},
        {"SMSE": f"{s_ours:.4f}", "sklearn SMSE": f"{s_peer:.4f}", "CG iterations": t_ours.value[1],
         "length scales": np.round(ls, 3).tolist(), "signal var": round(sf2, 3), "noise": round(noise, 4)},
    )
    r = row.ratio("scikit-learn exact")
    bench.check(">= 10x faster than scikit-learn", r >= 10, f"{r:.1f}x", row)
    bench.check("SMSE within 5% of scikit-learn", s_ours <= 1.05 * s_peer, f"{s_ours:.4f} vs {s_peer:.4f}", row)
    return bench.report()


if __name__ == "__main__":
    sys.exit(main())
