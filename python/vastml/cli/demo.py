"""``vastml demo``: what the library does, on generated data, in one run."""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def _demo(args: argparse.Namespace) -> int:
    from vastml import _core
    from vastml.datasets import make_gaussian_mixture
    from vastml.kernels import GaussTransform, gauss_transform

    n = 20_000 if args.quick else args.n
    grid = 120 if args.quick else args.grid
    sigma = args.bandwidth
    eps = args.epsilon
    print(f"vastml {_core.__version__} demo  (kernels: {_core.simd}, threads: {_core.effective_n_jobs(None)})")
    print(f"\n1. Kernel density of {n:,} points from a mixture of 10 Gaussians in 2-D")
    X = make_gaussian_mixture(n, 2, n_components=10, cluster_std=0.06, random_state=args.seed)
    lo, hi = X.min(0) - 3 * sigma, X.max(0) + 3 * sigma
    gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], grid), np.linspace(lo[1], hi[1], grid))
    targets = np.column_stack([gx.ravel(), gy.ravel()])
    h = np.sqrt(2.0) * sigma  # the transform's h for a Gaussian of std sigma
    t0 = time.perf_counter()
    gt = GaussTransform(X, bandwidth=h, epsilon=eps)
    t_plan = time.perf_counter() - t0
    info = gt.info_
    detail = (
        f"K={info['n_clusters']} clusters, truncation p={info['truncation']}, {info['n_terms']} terms"
        if info["method"].startswith("ifgt")
        else f"cut-off radius {info['cutoff']:.3g}"
    )
    print(f"   kernel std {sigma}, epsilon {eps:g}: auto chose '{gt.method_}' ({detail})")
    print(f"   planning: {t_plan:.3f} s")
    t0 = time.perf_counter()
    G = gt(targets)
    t_eval = time.perf_counter() - t0
    density = G / (n * 2 * np.pi * sigma**2)
    print(f"   density at {len(targets):,} grid points: {t_eval:.3f} s")
    # Check against the exact sum on a sample of grid points.
    rng = np.random.default_rng(0)
    idx = rng.choice(len(targets), size=min(300, len(targets)), replace=False)
    t0 = time.perf_counter()
    exact = GaussTransform(X, bandwidth=h, epsilon=eps, method="direct")(targets[idx])
    t_direct = (time.perf_counter() - t0) * len(targets) / len(idx)
    err = np.max(np.abs(G[idx] - exact)) / n
    print(f"   exact direct sum would take ~{t_direct:.2f} s; measured error max|G-G*|/sum|q| = {err:.2e} (<= {eps:g})")

    m_pts = 5_000 if args.quick else 20_000
    print(f"\n2. Every method on {m_pts:,} uniform sources = targets, epsilon 1e-6 (auto's pick marked *)")
    print(f"   {'d':>2} {'h':>5}  " + "".join(f"{m:>13}" for m in ("direct", "direct-tree", "ifgt", "ifgt-tree", "auto")))
    for d, hh in ((1, 0.1), (2, 0.3), (3, 0.1), (8, 0.5)):
        Xu = np.random.default_rng(d).uniform(size=(m_pts, d))
        cells = []
        chosen = GaussTransform(Xu, bandwidth=hh, epsilon=1e-6).method_
        for method in ("direct", "direct-tree", "ifgt", "ifgt-tree", "auto"):
            if method.startswith("ifgt") and d >= 3 and hh < 0.3:
                cells.append(f"{'(slow)':>13}")  # the IFGT needs too many terms here
                continue
            t0 = time.perf_counter()
            try:
                gauss_transform(Xu, Xu, bandwidth=hh, epsilon=1e-6, method=method)
            except ValueError:
                cells.append(f"{'refused':>13}")
                continue
            mark = "*" if method == chosen else " "
            cells.append(f"{time.perf_counter() - t0:11.3f}s{mark}")
        print(f"   {d:>2} {hh:>5}  " + "".join(cells))

    claw = _demo_bandwidth(args)
    from vastml.cli.svm import demo_section

    demo_section(args)
    from vastml.cli.embed import demo_section as embed_demo

    embed_demo(args, 5)
    from vastml.cli._demo_lll import demo_lll_pe

    demo_lll_pe(args)

    out = args.out
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("\n(matplotlib is not installed: no plot written; pip install 'vastml[plot]')")
        return 0
    fig, axes = plt.subplots(1, 3, figsize=(16, 5))
    sample = X[rng.choice(n, size=min(n, 5000), replace=False)]
    axes[0].scatter(sample[:, 0], sample[:, 1], s=1, alpha=0.4, color="k")
    axes[0].set_title(f"{min(n, 5000):,} of {n:,} points")
    axes[0].set_aspect("equal")
    im = axes[1].imshow(
        density.reshape(grid, grid), origin="lower", extent=(lo[0], hi[0], lo[1], hi[1]), cmap="viridis"
    )
    axes[1].set_title(f"KDE ({gt.method_}, {t_eval:.2f} s, error <= {eps:g})")
    fig.colorbar(im, ax=axes[1], shrink=0.8, label="density")
    grid1, true, curves = claw
    axes[2].plot(grid1, true, color="k", lw=2, label="true density")
    for label, values in curves.items():
        axes[2].plot(grid1, values, lw=1, label=label)
    axes[2].set_title("Marron-Wand claw: bandwidth choice")
    axes[2].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    print(f"\nPlot written to {out}")
    return 0


def _demo_bandwidth(
    args: argparse.Namespace,
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Section 3: Sheather-Jones vs Silverman on the claw density; returns curves to plot."""
    from vastml.datasets import make_marron_wand, marron_wand_pdf
    from vastml.kernels import KernelDensity, sheather_jones, silverman_bandwidth

    n = 5_000 if args.quick else 100_000
    print(f"\n3. Bandwidth of a kernel density estimate: {n:,} draws from the Marron-Wand claw")
    x = make_marron_wand(10, n, random_state=args.seed)
    t0 = time.perf_counter()
    h_sj = sheather_jones(x)
    t_sj = time.perf_counter() - t0
    h_si = float(silverman_bandwidth(x[:, None])[0])
    print(f"   Sheather-Jones (solve-the-equation, fast Hermite sums): h = {h_sj:.4f} in {t_sj:.3f} s")
    print(f"   Silverman's rule of thumb:                               h = {h_si:.4f} (oversmooths the claws)")
    grid1 = np.linspace(-3, 3, 600)
    true = marron_wand_pdf(10, grid1)
    curves = {}
    for label, h in ((f"Sheather-Jones h={h_sj:.3f}", h_sj), (f"Silverman h={h_si:.3f}", h_si)):
        dens = np.exp(KernelDensity(bandwidth=h).fit(x[:, None]).score_samples(grid1[:, None]))
        ise = float(np.sum((dens - true) ** 2) * (grid1[1] - grid1[0]))
        print(f"   integrated squared error with {label.split(' h=')[0]}: {ise:.2e}")
        curves[label] = dens
    return grid1, true, curves


def _demo_all(args: argparse.Namespace) -> int:
    from vastml.cli.reorder import demo as reorder_demo
    from vastml.cli.order import demo as order_demo

    from vastml._validation import check_float

    # the mixture lies in the unit square: a kernel wider than 10 shows nothing (and a huge
    # one overflowed the density's normaliser)
    check_float(args.bandwidth, "--bandwidth", low=0, high=10, low_open=True)
    rc = _demo(args)
    rc = rc or reorder_demo(args)
    return rc or order_demo(args)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``vastml demo`` to the sub-command parsers ``sub``."""
    d = sub.add_parser("demo", help="run the demonstration on generated data")
    d.add_argument("--n", type=int, default=1_000_000, help="number of points (default 1,000,000)")
    d.add_argument("--grid", type=int, default=300, help="density grid side (default 300)")
    d.add_argument("--bandwidth", type=float, default=0.02, help="kernel standard deviation")
    d.add_argument("--epsilon", type=float, default=1e-6, help="accuracy of the Gauss transform")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--out", default="vastml-demo.png", help="PNG to write (needs matplotlib)")
    d.add_argument("--quick", action="store_true", help="small sizes, a few seconds")
    d.set_defaults(func=_demo_all)
