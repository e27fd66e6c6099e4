"""Bandwidth selection benchmark: fast Sheather-Jones on the 15 Marron-Wand densities.

    python benches/bandwidth.py [--quick] [--n N] [--n-direct M]

Per density (N = 50,000 samples; --quick: 10,000 and densities 1, 2, 10, 15):
  ours      sheather_jones(x, epsilon=1e-3)               target: < 2 s at N = 50,000
  peers     the thesis's fast timing at N = 50,000 (published, Table 6.1: 64-120 s, 2007 laptop);
            KDEpy's improved Sheather-Jones (a different selector, same job) when installed.
  accuracy  at N = n_direct (default 2,000) fast vs our exact O(N^2) selector, |dh|/h (target
            <= 1e-4); and the exact selector's time there, for the fast/exact speed-up.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import Bench  # noqa: E402

from vastml.datasets import MARRON_WAND_NAMES, make_marron_wand  # noqa: E402
from vastml.kernels import sheather_jones  # noqa: E402

# Table 6.1 of Raykar's thesis: (h_fast, T_fast seconds) at N = 50,000, epsilon = 1e-3.
THESIS = {1: (0.122215, 64.28), 2: (0.082592, 77.30), 3: (0.020543, 101.62), 4: (0.020621, 105.88),
          5: (0.012881, 91.11), 6: (0.098303, 76.18), 7: (0.092240, 88.61), 8: (0.074699, 90.74),
          9: (0.081302, 89.91), 10: (0.024326, 106.17), 11: (0.086832, 90.45), 12: (0.032493, 119.02),
          13: (0.045797, 104.79), 14: (0.027573, 111.54), 15: (0.023096, 112.57)}


def add_args(ap):
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--n-direct", type=int, default=2000)


def main() -> int:
    bench = Bench("bandwidth", add_args=add_args, repeats=3)
    n = bench.args.n or (10_000 if bench.quick else 50_000)
    numbers = [1, 2, 10, 15] if bench.quick else range(1, 16)
    try:
        from KDEpy.bw_selection import improved_sheather_jones
    except ImportError:
        improved_sheather_jones = None
    for k in numbers:
        x = make_marron_wand(k, n, random_state=k)
        ours = bench.time(lambda x=x: sheather_jones(x))
        peers = {"thesis fast (N=50k)": THESIS[k][1]} if n == 50_000 else {}
        if improved_sheather_jones is not None:
            peers["KDEpy ISJ (binned; other selector)"] = lambda x=x: improved_sheather_jones(x[:, None])
        small = make_marron_wand(k, bench.args.n_direct, random_state=k)
        exact = bench.time(lambda s=small: sheather_jones(s, method="direct"), warmup=0, repeats=1)
        fast_small = bench.time(lambda s=small: sheather_jones(s), warmup=0, repeats=1)
        rel = abs(fast_small.value - exact.value) / exact.value
        row = bench.compare(
            f"#{k} {MARRON_WAND_NAMES[k - 1]}", ours, peers, {"N": n},
            {"h": f"{ours.value:.6f}", "thesis h (N=50k)": THESIS[k][0],
             f"exact s (N={bench.args.n_direct})": f"{exact.median:.3f}",
             "fast/exact |dh|/h": f"{rel:.1e}",
             "exact/fast speed-up": f"{exact.median / fast_small.median:.0f}x"},
        )
        bench.check(f"#{k}: |h_fast - h_exact| / h_exact <= 1e-4", rel <= 1e-4, f"{rel:.1e}", row)
        if n == 50_000:
            bench.check(f"#{k}: under 2 s at N = 50,000", ours.median < 2.0, f"{ours.median:.2f} s", row)
    return bench.report()


if __name__ == "__main__":
    sys.exit(main())
