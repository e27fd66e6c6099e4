"""Matrix reordering (ConvoMap) against the thesis's tables, and incremental vs full error.

Rows:
- ``move``: one incremental move evaluation vs one full recomputation of the error on a random
  2,000 x 400 binary matrix with GBS(25) (one thread); target >= 100x per move kind.
- ``convomap``: TSP + P-LS on the data sets of Tables A.7-A.9 (artificial 300 x 300 at 0/10/25%
  noise, GBS(49), shuffled with a fixed seed), A.10 (Gene, Football), A.11 (Mammals,
  Mushrooms) and A.13 (news_3cl_1). The peer is the thesis's published TSP+P-LS time (Scala,
  i7 / i5 laptops, Appendix A). Targets: our error <= the thesis's error and our time <= 2% of
  the thesis's time, on 2 cores.
- ``bnb``: the ConvoMap branch and bound on random binary matrices (rows only, GBS 3 x 3, zero
  padding). R seriation's BBURCG/BBWRCG rows run only when ``Rscript`` is installed.

    .venv/bin/python benches/reorder.py --quick     # under 2 minutes
    .venv/bin/python benches/reorder.py --rows gene # rows whose name contains "gene"
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import Bench, Timing  # noqa: E402

from vastml import _core  # noqa: E402
from vastml.reorder import (  # noqa: E402
    ConvoMap,
    branch_and_bound_order,
    convolution_error,
    gradient_order,
    load_football,
    load_genes,
    load_mammals,
    load_mushrooms,
    load_news,
    planted_matrix,
)
from vastml.reorder._io import _data_dir  # noqa: E402

# (table, dataset, kernel size, thesis TSP+P-LS error, thesis time in s)
THESIS = [
    ("A.7", "nested 0%", 49, 1806, 2001.98),
    ("A.7", "banded 0%", 49, 3435, 1225.43),
    ("A.7", "blocks 0%", 49, 2708, 3346.99),
    ("A.7", "banded_blocks 0%", 49, 4476, 706.08),
    ("A.8", "nested 10%", 49, 9021, 26371.55),
    ("A.8", "banded 10%", 49, 10148, 16695.25),
    ("A.8", "blocks 10%", 49, 9224, 32596.49),
    ("A.8", "banded_blocks 10%", 49, 10403, 29139.47),
    ("A.9", "nested 25%", 49, 17111, 21353.64),
    ("A.9", "banded 25%", 49, 17586, 21782.34),
    ("A.9", "blocks 25%", 49, 16953, 45855.61),
    ("A.9", "banded_blocks 25%", 49, 17438, 43510.83),
    ("A.10", "gene", 25, 158741, 12653.78),
    ("A.10", "gene", (29, 5), 152661, 3067.16),
    ("A.10", "football", 7, 618, 15.27),
    ("A.10", "football", 11, 725, 25.59),
    ("A.11", "mammals", 25, 21384, 4956.01),
    ("A.11", "mammals", (29, 5), 16000, 1227.34),
    ("A.11", "mushrooms", 25, 78122, 23961.56),
    ("A.11", "mushrooms", (29, 5), 59512, 5011.06),
    ("A.13", "news_3cl_1", 7, 23177.7, 306.38),
    ("A.13", "news_3cl_1", 11, 26765.5, 1773.35),
    ("A.13", "news_3cl_1", 21, 31593.9, 19846.24),
]
QUICK = {("A.10", "football", 7), ("A.8", "nested 10%", 49), ("A.13", "news_3cl_1", 7)}


def add_args(ap):
    ap.add_argument("--rows", action="append", default=[], help="run rows whose name contains this")
    ap.add_argument("--n-jobs", type=int, default=None)


def dataset(name):
    if "%" in name:
        pattern, noise = name.split()
        M = planted_matrix(pattern, 300, float(noise[:-1]) / 100)
        rng = np.random.default_rng(0)
        return M[rng.permutation(300)][:, rng.permutation(300)]
    return {
        "gene": load_genes,
        "football": lambda: load_football()[0],
        "mammals": load_mammals,
        "mushrooms": lambda: load_mushrooms()[0],
        "news_3cl_1": lambda: load_news("news_3cl_1")[0],
    }[name]()


def main(argv=None) -> int:
    b = Bench("reorder", argv, repeats=1, quick_repeats=1, add_args=add_args)
    sel = [s.lower() for s in b.args.rows]

    def wanted(name):
        return not sel or any(s in name.lower() for s in sel)

    # 1. incremental move evaluation vs full recomputation
    if wanted("move"):
        rng = np.random.default_rng(0)
        M = (rng.random((2000, 400)) < 0.3).astype(np.uint32)
        per, full = _core.time_moves(M, 0, "gbs", (25, 25), "zeros_and_ones", 300, 0, n_jobs=1)
        for kind, secs in per:
            row = b.compare(
                f"move {kind}",
                Timing([float(secs)]),
                {"full recomputation": Timing([float(full)], note="measured")},
                {"m": 2000, "n": 400, "kernel": "GBS(25)"},
            )
            b.check(f"{kind}: incremental >= 100x faster than full", full / secs >= 100,
                    f"{full / secs:.0f}x", row)

    # 2. TSP + P-LS vs the thesis tables
    have_data = _data_dir(None).is_dir()
    for table, name, k, t_err, t_time in THESIS:
        label = f"convomap {name}"
        if not wanted(label) or (b.quick and (table, name, k) not in QUICK):
            continue
        ks = f"{k[0]}x{k[1]}" if isinstance(k, tuple) else str(k)
        params = {"table": table, "kernel": f"GBS({ks})"}
        if "%" not in name and not have_data:
            b.skip(label, params, "shared data not found")
            continue
        X = dataset(name)
        print(f"[reorder] {label} GBS({ks}) {X.shape} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        cm = ConvoMap(kernel_size=k, random_state=0, n_jobs=b.args.n_jobs).fit(X)
        dt = time.perf_counter() - t0
        row = b.compare(
            label,
            Timing([dt]),
            {"thesis TSP+P-LS": float(t_time)},
            params,
            {"shape": f"{X.shape[0]}x{X.shape[1]}", "original": round(convolution_error(X, kernel_size=k), 1)
             if "%" not in name else None, "tsp": round(dict(cm.history_)["tsp"], 1),
             "ours error": round(cm.error_, 1), "thesis error": t_err,
             "err ratio": round(cm.error_ / t_err, 4)},
        )
        b.check(f"{label} {ks}: error <= thesis", cm.error_ <= t_err + 0.5,
                f"{cm.error_:.1f} vs {t_err}", row)
        b.check(f"{label} {ks}: time <= 2% of thesis", dt <= 0.02 * t_time,
                f"{dt:.1f} s vs {0.02 * t_time:.1f} s", row)

    # 3. branch and bound
    if wanted("bnb"):
        # banded rows (width 8 of 40 columns) with 10% of the bits flipped, rows shuffled;
        # uniformly random rows are the worst case (14 rows already take seconds).
        sizes = [16, 20] if b.quick else [16, 20, 24, 30]
        for n in sizes:
            rng = np.random.default_rng(n)
            M = (np.abs(np.subtract.outer(np.arange(n), np.arange(40) * n / 40)) < 4).astype(int)
            M ^= (rng.random(M.shape) < 0.1).astype(int)
            M = M[rng.permutation(n)]
            print(f"[reorder] bnb {n} rows ...", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            order, err = branch_and_bound_order(M, n_jobs=b.args.n_jobs)
            dt = time.perf_counter() - t0
            row = b.compare("bnb convomap", Timing([dt]), {}, {"rows": n, "cols": 40, "kernel": "GBS(3)"},
                            {"ours error": round(err, 3)})
            if n == 30:
                b.check("bnb: 30 rows within a minute", dt <= 60, f"{dt:.1f} s", row)
        # anti-Robinson gradient criteria on random points in 5-D (Euclidean distances); the
        # peer times are the R seriation figures (BBURCG / BBWRCG)
        r_times = {20: (1.2, 0.3), 22: (39.0, 6.0), 24: (110.0, 8.0)}
        g_sizes = [20] if b.quick else [20, 22, 24, 30]
        for n in g_sizes:
            rng = np.random.default_rng(100 + n)
            X = rng.random((n, 5))
            D = np.sqrt(((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
            for weighted, crit in [(False, "BBURCG"), (True, "BBWRCG")]:
                print(f"[reorder] gradient {crit} n={n} ...", file=sys.stderr, flush=True)
                t0 = time.perf_counter()
                _, value = gradient_order(D, weighted=weighted, n_jobs=b.args.n_jobs)
                dt = time.perf_counter() - t0
                peers = {}
                if n in r_times:
                    peers[f"R seriation {crit} (published)"] = r_times[n][int(weighted)]
                row = b.compare(f"bnb gradient {crit}", Timing([dt]), peers,
                                {"n": n, "points": "uniform 5-D"}, {"value": round(value, 4)})
                if n in r_times:
                    b.check(f"{crit} n={n}: >= 5x faster than R", r_times[n][int(weighted)] / dt >= 5,
                            f"{r_times[n][int(weighted)] / dt:.1f}x", row)
                if n == 30:
                    b.check(f"{crit} n=30 within a minute", dt <= 60, f"{dt:.1f} s", row)
        if shutil.which("Rscript") is None:
            b.skip("R seriation (run here)", {"n": "20,22,24"},
                   "Rscript not installed: the R rows above are the issue's published times")
    return b.report()


if __name__ == "__main__":
    sys.exit(main())
