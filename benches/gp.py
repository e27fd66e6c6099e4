"""Gaussian process regression benchmark: preconditioned CG on fast Gauss transforms against
scikit-learn's exact GaussianProcessRegressor and GPyTorch's exact GP on CPU, in the same run.

    python benches/gp.py [--quick] [--rows fixed,hyper,big,bighyper] [--sizes 5000,20000]
                         [--cases 1,2] [--hyper-n 10000] [--no-gpytorch] [--no-sklearn-fit] [--threads 1]
                         [--gpytorch-timeout SECONDS] [--out DIR]

Data: inputs uniform on [-1, 1]^d (shape "uniform"), or in 8 tight Gaussian clusters
("clustered"), or stretched 10:1 along the first axis ("anisotropic"); targets are a draw of
f(x) = sum_k sin(3 x_k / s_k) (s the per-axis spread), standardised, plus Gaussian noise of
the stated variance. 2,000 test points from the same distribution; test RMSE is against f.

Rows
  fixed   fixed hyper-parameters (signal variance 1, length scale = fraction x the data's spread
          per axis, noise variance as a fraction of the signal's): fit + predict of the mean.
          ours: GaussianProcessRegressor with its defaults (tol="auto": the mean at the training
          points within 1e-3 std(y) of the exact one; solver="auto": Nystrom-preconditioned CG
          or a single-precision Cholesky preconditioner, by the cost model); peers: sklearn GaussianProcessRegressor(kernel fixed, optimizer=None,
          alpha=noise) and GPyTorch ExactGP in float64 (default CG settings, eval mode), both up
          to N = 20,000 (memory). "max |mean - exact|" is against scikit-learn's Cholesky
          solution, divided by the std of the targets.
  hyper   hyper-parameters by marginal likelihood from the same start (length 1, signal var 1,
          noise 0.1): ours optimizer="lbfgs"; sklearn's own L-BFGS fit; GPyTorch's Adam (lr 0.1,
          50 steps, its default training mode). Every result is scored by the exact NLL
          (scikit-learn's log_marginal_likelihood at the fitted values).
  hyperextrap  hyper-parameter fit at N = --hyper-n (10,000): ours in full against an
          EXTRAPOLATED scikit-learn fit time = one of its NLL + gradient evaluations at that N
          (timed) x the number of evaluations its fit makes at N = 2,000 (counted); both in
          the same run. Our NLL is the exact one at our result.
  big     fixed hyper-parameters at N = 100,000 (and 1e6 with --sizes): ours only (scikit-learn
          would need 80 GB). bighyper: hyper-parameter fit at N = 100,000, ours only.
Targets (checks): fixed, N >= 5,000: >= 5x sklearn, mean within 1e-3 of the targets' std;
N = 20,000: >= 20x; hyper N = 10,000: >= 5x sklearn's fit, NLL within 1%; N = 100,000 hyper
fit < 600 s; faster than GPyTorch at equal (within 1%) NLL.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import Bench, Timing
from vastml.kernels import GaussianProcessRegressor


def add_args(ap):
    ap.add_argument("--rows", default="fixed,hyper", help="comma list of fixed, hyper, big")
    ap.add_argument("--sizes", default=None, help="comma list of N for the fixed/big rows")
    ap.add_argument("--no-gpytorch", action="store_true")
    ap.add_argument("--hyper-n", type=int, default=None)
    ap.add_argument("--cases", default=None, help="comma list of indices into the fixed-row cases")
    ap.add_argument("--threads", type=int, default=None,
                    help="fixed rows: ours with n_jobs=THREADS and scikit-learn under a BLAS limit of THREADS")
    ap.add_argument("--no-sklearn-fit", action="store_true",
                    help="hyper rows: leave out scikit-learn's own fit (its exact NLL still scores every result)")
    ap.add_argument("--gpytorch-timeout", type=float, default=None,
                    help="seconds GPyTorch may take per row (default 120 fixed, 600 hyper)")


def make_data(n, d, shape, noise, seed):
    rng = np.random.default_rng(seed)

    def draw(m):
        if shape == "clustered":
            centres = np.random.default_rng(seed + 99).uniform(-1, 1, size=(8, d))
            return centres[rng.integers(0, 8, m)] + 0.15 * rng.normal(size=(m, d))
        x = rng.uniform(-1, 1, size=(m, d))
        if shape == "anisotropic":
            x[:, 0] *= 10.0
        return x

    X, Xt = draw(n), draw(2000)
    s = X.std(axis=0)
    f = lambda Z: np.sin(3 * Z / s).sum(1)
    ft, fX = f(Xt), f(X)
    mu, sd = fX.mean(), fX.std()
    fX, ft = (fX - mu) / sd, (ft - mu) / sd
    y = fX + math.sqrt(noise) * rng.normal(size=n)
    return X, y, Xt, ft, s


def sklearn_fixed(X, y, Xt, ls, noise, threads=None):
    from sklearn.gaussian_process import GaussianProcessRegressor as SkGP
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel
    from threadpoolctl import threadpool_limits

    ym = y.mean()
    with threadpool_limits(threads, user_api="blas"):
        gp = SkGP(ConstantKernel(1.0, "fixed") * RBF(ls, "fixed"), alpha=noise, optimizer=None).fit(X, y - ym)
        return gp.predict(Xt) + ym


def gpytorch_model(X, y, ls, sf2, noise, fixed):
    import gpytorch
    import torch

    tx = torch.as_tensor(X, dtype=torch.float64)
    ty = torch.as_tensor(y, dtype=torch.float64)
    lik = gpytorch.likelihoods.GaussianLikelihood(noise_constraint=gpytorch.constraints.GreaterThan(1e-6)).double()

    class Model(gpytorch.models.ExactGP):
        def __init__(self):
            super().__init__(tx, ty, lik)
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(ard_num_dims=X.shape[1]))

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    model = Model().double()
    model.covar_module.base_kernel.lengthscale = torch.as_tensor(np.broadcast_to(ls, (X.shape[1],)).copy())
    model.covar_module.outputscale = sf2
    lik.noise = noise
    return model, lik, torch, gpytorch


def gpytorch_fixed(X, y, Xt, ls, noise):
    ym = y.mean()
    model, lik, torch, _ = gpytorch_model(X, y - ym, ls, 1.0, noise, True)
    model.eval()
    lik.eval()
    with torch.no_grad():
        mean = model(torch.as_tensor(Xt, dtype=torch.float64)).mean.numpy()
    return mean + ym


def gpytorch_train(X, y, steps=50):
    model, lik, torch, gpytorch = gpytorch_model(X, y, 1.0, 1.0, 0.1, False)
    model.train()
    lik.train()
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(lik, model)
    tx, ty = model.train_inputs[0], model.train_targets
    for _ in range(steps):
        opt.zero_grad()
        loss = -mll(model(tx), ty)
        loss.backward()
        opt.step()
    ls = model.covar_module.base_kernel.lengthscale.detach().numpy().ravel()
    return np.log(np.r_[model.covar_module.outputscale.item(), ls, lik.noise.item()])


#: Seconds GPyTorch may take per row before it is stopped (its CG at low noise can run for minutes).
GPYTORCH_TIMEOUT = 120


def isolated(bench, kind, args, timeout):
    """Run GPyTorch in a fresh process with a timeout; returns (Timing with .value, None) or
    (None, reason). The result travels through a .npy file."""
    import os
    import tempfile

    fd, path = tempfile.mkstemp(suffix=".npy")
    os.close(fd)
    code = (
        "import json, time, numpy as np, gp as B\n"
        f"kind, args, path = {kind!r}, {args!r}, {path!r}\n"
        "if kind == 'fixed':\n"
        "    n, d, shape, noise, frac = args\n"
        "    X, y, Xt, ft, s = B.make_data(n, d, shape, noise, seed=n + d)\n"
        "    t0 = time.perf_counter(); out = B.gpytorch_fixed(X, y, Xt, frac * s, noise)\n"
        "else:\n"
        "    from vastml.datasets import make_robot_arm\n"
        "    X, y = make_robot_arm(args[0], random_state=0); X = (X - X.mean(0)) / X.std(0)\n"
        "    t0 = time.perf_counter(); out = B.gpytorch_train(X, y - y.mean())\n"
        "sec = time.perf_counter() - t0; np.save(path, out)\n"
        "print(json.dumps({'seconds': sec}))\n"
    )
    res = bench.run_isolated(code, timeout=timeout)
    try:
        if "error" in res:
            return None, f"timeout > {timeout} s" if "timeout" in res["error"] else res["error"][-80:]
        return Timing([res["seconds"]], np.load(path)), None
    finally:
        os.unlink(path)


def exact_nll(X, y, theta):
    from sklearn.gaussian_process import GaussianProcessRegressor as SkGP
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

    kernel = ConstantKernel(1.0) * RBF(np.ones(X.shape[1])) + WhiteKernel(0.1)
    sk = SkGP(kernel, optimizer=None).fit(X[:2], y[:2])
    sk.X_train_, sk.y_train_ = X, y
    return -sk.log_marginal_likelihood(theta)


#: The fixed-hyperparameter grid: (shape, d, noise fraction, length-scale fraction of the spread).
FIXED_CASES = [
    ("uniform", 1, 1e-4, 0.1),
    ("uniform", 2, 1e-3, 0.5),
    ("uniform", 3, 1e-3, 0.3),
    ("uniform", 3, 1e-2, 1.0),
    ("clustered", 2, 1e-3, 0.3),
    ("anisotropic", 2, 1e-1, 2.0),
    ("uniform", 5, 1e-3, 1.0),
    ("uniform", 8, 1e-2, 2.0),
]


def fixed_rows(bench, sizes, use_gpytorch):
    cases = list(FIXED_CASES)
    if bench.args.cases:
        cases = [cases[int(i)] for i in bench.args.cases.split(",")]
    elif bench.quick:
        cases = [cases[1], cases[2], cases[6]]
    for n in sizes:
        for shape, d, noise, frac in cases:
            X, y, Xt, ft, s = make_data(n, d, shape, noise, seed=n + d)
            ls = frac * s
            info = {}

            def ours(X=X, y=y, Xt=Xt, ls=ls, noise=noise, info=info):
                gp = GaussianProcessRegressor(length_scale=ls, noise_variance=noise, n_jobs=bench.args.threads)
                gp.fit(X, y)
                info.update(iters=gp.n_iter_, rank=gp.preconditioner_rank_, solver=gp.solver_)
                return gp.predict(Xt)

            t_ours = bench.time(ours, warmup=0)
            peers = {}
            exact = None
            if n <= 20_000:
                t = bench.time(lambda X=X, y=y, Xt=Xt, ls=ls, noise=noise: sklearn_fixed(
                    X, y, Xt, ls, noise, bench.args.threads), warmup=0, repeats=1)
                peers["sklearn exact"] = t
                exact = t.value
            if use_gpytorch and n <= 20_000:
                t, err = isolated(bench, "fixed", (n, d, shape, noise, frac),
                                  bench.args.gpytorch_timeout or GPYTORCH_TIMEOUT)
                if t is not None:
                    peers["GPyTorch CPU"] = t
                else:
                    info["gpytorch"] = err
            extra = {
                "solver": info["solver"],
                "CG iters": info["iters"],
                "rank": info["rank"],
                "RMSE ours": round(float(np.sqrt(np.mean((t_ours.value - ft) ** 2))), 4),
            }
            if exact is not None:
                extra["RMSE sklearn"] = round(float(np.sqrt(np.mean((exact - ft) ** 2))), 4)
                extra["max|mean-exact|/std(y)"] = float(f"{np.abs(t_ours.value - exact).max() / y.std():.2e}")
            if "GPyTorch CPU" in peers and exact is not None:
                extra["GPyTorch max|mean-exact|/std(y)"] = float(
                    f"{np.abs(peers['GPyTorch CPU'].value - exact).max() / y.std():.2e}"
                )
            extra.update({k: v for k, v in info.items() if k == "gpytorch"})
            row = bench.compare(
                f"fixed {shape}", t_ours, peers,
                {"N": n, "d": d, "noise": noise, "ls/spread": frac}, extra,
            )
            if exact is not None and n >= 5_000:
                r = row.ratio("sklearn exact")
                bench.check(">= 5x sklearn", r >= 5, f"{r:.1f}x", row)
                if n >= 20_000:
                    bench.check(">= 20x sklearn at N=20,000", r >= 20, f"{r:.1f}x", row)
                err = extra["max|mean-exact|/std(y)"]
                bench.check("mean within 1e-3 std of exact", err <= 1e-3, f"{err:.1e}", row)
            print(f"  done fixed N={n} {shape} d={d} noise={noise} ls={frac}", file=sys.stderr, flush=True)


def hyper_rows(bench, n, use_gpytorch, with_sklearn=True):
    from sklearn.gaussian_process import GaussianProcessRegressor as SkGP
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
    from vastml.datasets import make_robot_arm

    X, y = make_robot_arm(n, random_state=0)
    X = (X - X.mean(0)) / X.std(0)
    yc = y - y.mean()

    def ours():
        gp = GaussianProcessRegressor(optimizer="lbfgs", random_state=0).fit(X, y)
        return np.log(np.r_[gp.signal_variance_, gp.length_scale_, gp.noise_variance_])

    t_ours = bench.time(ours, warmup=0, repeats=1)
    peers = {}
    gp_note = None
    if with_sklearn:
        kernel = ConstantKernel(1.0) * RBF([1.0, 1.0]) + WhiteKernel(0.1)
        peers["sklearn fit"] = bench.time(
            lambda: SkGP(kernel, normalize_y=False, random_state=0).fit(X, yc).kernel_.theta, warmup=0, repeats=1
        )
    if use_gpytorch:
        t, err = isolated(bench, "hyper", (n,), bench.args.gpytorch_timeout or 5 * GPYTORCH_TIMEOUT)
        if t is not None:
            peers["GPyTorch Adam x50"] = t
        else:
            gp_note = err
    extra = {}
    nll = {}
    if n <= 20_000:
        nll["ours"] = exact_nll(X, yc, t_ours.value)
        for k, t in peers.items():
            nll[k] = exact_nll(X, yc, t.value)
        extra = {f"NLL {k}": round(v, 2) for k, v in nll.items()}
    extra["theta ours"] = np.round(np.exp(t_ours.value), 3).tolist()
    if gp_note:
        extra["gpytorch"] = gp_note
    row = bench.compare("hyper robot arm", t_ours, peers, {"N": n, "d": 2}, extra)
    if "sklearn fit" in nll:
        r = row.ratio("sklearn fit")
        if n >= 10_000:
            bench.check(">= 5x sklearn fit", r >= 5, f"{r:.1f}x", row)
        gap = (nll["ours"] - nll["sklearn fit"]) / abs(nll["sklearn fit"])
        bench.check("NLL within 1% of sklearn", gap <= 0.01, f"{100 * gap:+.3f}%", row)
    if "GPyTorch Adam x50" in nll:
        r = row.ratio("GPyTorch Adam x50")
        better = nll["ours"] <= nll["GPyTorch Adam x50"] + 0.01 * abs(nll["GPyTorch Adam x50"])
        bench.check("faster than GPyTorch at equal NLL", r >= 1 and better, f"{r:.1f}x", row)
    if n >= 100_000:
        bench.check("N=100,000 fit < 600 s", t_ours.median < 600, f"{t_ours.median:.0f} s", row)


def hyper_extrapolated_row(bench, n, count_n=2000):
    """Hyper-parameter fit at N = n: ours in full; scikit-learn's fit time EXTRAPOLATED as the
    time of one of its NLL + gradient evaluations at N = n (measured, same run) times the number
    of evaluations its own fit makes at N = count_n (measured, same run, same data generator).
    Its fit at n itself (hours at N = 10,000 here) is not run."""
    from sklearn.gaussian_process import GaussianProcessRegressor as SkGP
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
    from vastml.datasets import make_robot_arm

    class Counting(SkGP):
        calls = 0

        def log_marginal_likelihood(self, *a, **kw):
            type(self).calls += 1
            return super().log_marginal_likelihood(*a, **kw)

    def data(m):
        X, y = make_robot_arm(m, random_state=0)
        return (X - X.mean(0)) / X.std(0), y - y.mean()

    X, yc = data(n)

    def ours():
        gp = GaussianProcessRegressor(optimizer="lbfgs", random_state=0).fit(X, yc + 0.0)
        return np.log(np.r_[gp.signal_variance_, gp.length_scale_, gp.noise_variance_])

    t_ours = bench.time(ours, warmup=0, repeats=1)
    kernel = ConstantKernel(1.0) * RBF([1.0, 1.0]) + WhiteKernel(0.1)
    Xs, ys = data(count_n)
    t_small = bench.time(lambda: Counting(kernel, normalize_y=False, random_state=0).fit(Xs, ys), warmup=0, repeats=1)
    evals = Counting.calls
    sk = SkGP(kernel, optimizer=None).fit(X[:2], yc[:2])
    sk.X_train_, sk.y_train_ = X, yc
    t_eval = bench.time(lambda: sk.log_marginal_likelihood(kernel.theta, eval_gradient=True), warmup=0, repeats=1)
    extrapolated = t_eval.median * evals
    nll_ours = exact_nll(X, yc, t_ours.value)
    row = bench.compare(
        "hyper robot arm (sklearn extrapolated)", t_ours, {"sklearn fit (extrapolated)": float(extrapolated)},
        {"N": n, "d": 2},
        {"sklearn s per NLL+grad at N": round(t_eval.median, 2), f"sklearn evals at N={count_n}": evals,
         f"sklearn fit at N={count_n} s": round(t_small.median, 1), "NLL ours (exact)": round(nll_ours, 2),
         "theta ours": np.round(np.exp(t_ours.value), 3).tolist()},
    )
    r = row.ratio("sklearn fit (extrapolated)")
    bench.check(">= 5x sklearn fit (extrapolated)", r >= 5, f"{r:.1f}x", row)


def big_rows(bench, sizes):
    for n in sizes:
        X, y, Xt, ft, s = make_data(n, 3, "uniform", 1e-3, seed=n)
        info = {}

        def ours(X=X, y=y, Xt=Xt, s=s, info=info):
            gp = GaussianProcessRegressor(length_scale=0.3 * s, noise_variance=1e-3).fit(X, y)
            info.update(iters=gp.n_iter_, rank=gp.preconditioner_rank_, solver=gp.solver_)
            return gp.predict(Xt)

        t = bench.time(ours, warmup=0, repeats=1)
        bench.compare(
            "fixed big uniform", t, {}, {"N": n, "d": 3, "noise": 1e-3, "ls/spread": 0.3},
            {"solver": info["solver"], "CG iters": info["iters"], "rank": info["rank"],
             "RMSE ours": round(float(np.sqrt(np.mean((t.value - ft) ** 2))), 4)},
        )


def main() -> int:
    bench = Bench("gp", add_args=add_args, repeats=1, quick_repeats=1)
    rows = bench.args.rows.split(",")
    use_gpytorch = not bench.args.no_gpytorch
    if use_gpytorch:
        try:
            import gpytorch  # noqa: F401
        except ImportError:
            use_gpytorch = False
            print("GPyTorch not installed (pip install -e '.[bench]'): its columns are left out", file=sys.stderr)
    if bench.args.sizes:
        sizes = [int(v) for v in bench.args.sizes.split(",")]
    else:
        sizes = [1_000, 5_000] if bench.quick else [1_000, 5_000, 20_000]
    if "fixed" in rows:
        fixed_rows(bench, sizes, use_gpytorch)
    if "hyper" in rows:
        hyper_rows(bench, bench.args.hyper_n or (2_000 if bench.quick else 10_000), use_gpytorch,
                   with_sklearn=not bench.args.no_sklearn_fit)
    if "big" in rows:
        big = [v for v in sizes if v >= 100_000] or [100_000]
        big_rows(bench, big)
    if "hyperextrap" in rows:
        hyper_extrapolated_row(bench, bench.args.hyper_n or 10_000)
    if "bighyper" in rows:
        hyper_rows(bench, 100_000, False, with_sklearn=False)
    return bench.report()


if __name__ == "__main__":
    sys.exit(main())
