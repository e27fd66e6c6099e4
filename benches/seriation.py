"""Seriation of numeric data: vastml's default ``seriate`` path (TSP) and Rust OLO against R
``seriation`` (best of TSP / OLO / GW, via Rscript in the same run), LKH (``elkai``, open path
through a dummy city) and SciPy's ``optimal_leaf_ordering``, on five data families.

Families: ``uniform`` (2-D), ``clustered`` (20 Gaussian blobs, 2-D), ``helix`` (noisy helix in
6-D plus 40 uniform outliers), ``gmix50`` (10-component Gaussian mixture in 50-D), ``mammals``
(the ConvoMap Mammals matrix, 2,221 x 124 binary, as numeric rows; a random subset at n = 1,500
and all 2,221 rows in place of 20,000). Path length is R's ``Path_length`` of the Euclidean
distances. Rows are shuffled.

    .venv/bin/python benches/seriation.py --quick      # n = 1,500, no LKH
    .venv/bin/python benches/seriation.py --lkh        # n = 1,500 and 20,000, LKH at 1,500
    .venv/bin/python benches/seriation.py --sizes 1000 --families gmix50,mammals --lkh --r-methods ""

R runs in a separate ``Rscript`` per method with a timeout (``--r-timeout``, default 300 s);
its time is the ``seriate()`` call only (not ``dist()``). The table's ``x best R`` is our path
length over R's best path, ``speed`` R's time for that best over ours.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from vastml.reorder import path_length, seriate

HERE = Path(__file__).resolve().parent


def helix(n, rng):
    m = n - 40
    t = np.sort(rng.uniform(0, 6 * np.pi, m))
    X = np.c_[np.cos(t), np.sin(t), t / 3, 0.3 * np.cos(2 * t), 0.3 * np.sin(3 * t), t / 6]
    X = X + rng.normal(0, 0.08, X.shape)
    return np.r_[X, rng.uniform(X.min(0), X.max(0), (40, 6))]


def uniform(n, rng):
    return rng.random((n, 2))


def clustered(n, rng):
    c = rng.uniform(0, 10, (20, 2))
    return c[rng.integers(0, 20, n)] + rng.normal(0, 0.3, (n, 2))


def gmix50(n, rng):
    c = rng.normal(0, 3, (10, 50))
    return c[rng.integers(0, 10, n)] + rng.normal(0, 1, (n, 50))


def mammals(n, rng):
    from vastml.reorder import load_mammals

    M = load_mammals().astype(float)
    return M[rng.choice(M.shape[0], min(n, M.shape[0]), replace=False)]


FAMILIES = {"uniform": uniform, "clustered": clustered, "helix": helix, "gmix50": gmix50,
            "mammals": mammals}

R_SCRIPT = r"""
args <- commandArgs(trailingOnly = TRUE)
suppressMessages(library(seriation))
X <- as.matrix(read.csv(args[1], header = FALSE))
d <- dist(X)
t <- system.time(o <- seriate(d, method = args[2]))[["elapsed"]]
cat(sprintf("%.10f %.4f\n", criterion(d, o, method = "Path_length"), t))
"""


def run_r(X, method, timeout):
    if shutil.which("Rscript") is None:
        return None, "Rscript not installed"
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "x.csv"
        np.savetxt(csv, X, delimiter=",", fmt="%.17g")
        script = Path(tmp) / "s.R"
        script.write_text(R_SCRIPT)
        try:
            out = subprocess.run(["Rscript", str(script), str(csv), method], capture_output=True,
                                 text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, f"timeout {timeout} s"
        if out.returncode != 0:
            return None, out.stderr.strip().splitlines()[-1][:80] if out.stderr else "failed"
        L, t = out.stdout.split()
        return (float(L), float(t)), ""


def run_lkh(X):
    import elkai
    from scipy.spatial.distance import pdist, squareform

    n = X.shape[0]
    D = np.zeros((n + 1, n + 1))
    D[:n, :n] = squareform(pdist(X))
    scale = 1e6 / D.max()
    t0 = time.perf_counter()
    tour = elkai.DistanceMatrix((D * scale).round().astype(int).tolist()).solve_tsp(runs=1)
    t = time.perf_counter() - t0
    tour = tour[:-1] if tour[0] == tour[-1] else tour
    i = tour.index(n)
    order = np.array(tour[i + 1:] + tour[:i])
    return path_length(X, order), t


def timed(fn):
    t0 = time.perf_counter()
    v = fn()
    return v, time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--lkh", action="store_true", help="run LKH (elkai) at n = 1,500")
    ap.add_argument("--sizes", default=None, help="comma-separated sizes (default 1500,20000)")
    ap.add_argument("--families", default=None)
    ap.add_argument("--r-timeout", type=float, default=300.0)
    ap.add_argument("--r-methods", default="TSP,OLO,GW", help='comma-separated; "" skips R')
    ap.add_argument("--lkh-max", type=int, default=2500, help="run LKH up to this many rows")
    ap.add_argument("--olo-max", type=int, default=5000, help="run our OLO up to this many rows")
    ap.add_argument("--out", default=str(HERE / "results" / "seriation.json"))
    a = ap.parse_args(argv)
    sizes = [int(s) for s in a.sizes.split(",")] if a.sizes else ([1500] if a.quick else [1500, 20000])
    fams = a.families.split(",") if a.families else list(FAMILIES)
    rows = []
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    hdr = (f"{'family':10s} {'n':>6s} {'ours L':>10s} {'ours s':>7s} {'R best':>10s} {'(method)':>8s} "
           f"{'R s':>7s} {'x best R':>8s} {'speed':>6s} {'LKH L':>10s} {'LKH s':>7s} {'x LKH':>6s} "
           f"{'OLO L':>10s} {'OLO s':>6s} {'SciPy OLO':>10s} {'SciPy s':>7s}")
    print(hdr)
    for n in sizes:
        for fam in fams:
            rng = np.random.default_rng(0)
            X = FAMILIES[fam](n, rng)
            X = np.ascontiguousarray(X[rng.permutation(X.shape[0])])
            nn = X.shape[0]
            row = {"family": fam, "n": nn, "d": X.shape[1]}
            o, t = timed(lambda: seriate(X, random_state=0))
            row["ours"] = {"L": path_length(X, o), "seconds": t}
            if nn <= a.olo_max:
                o2, t2 = timed(lambda: seriate(X, method="OLO"))
                row["ours_olo"] = {"L": path_length(X, o2), "seconds": t2}
            r = {}
            for m in filter(None, a.r_methods.split(",")):
                v, note = run_r(X, m, a.r_timeout)
                r[m] = {"L": v[0], "seconds": v[1]} if v else {"note": note}
            row["R"] = r
            done = {m: v for m, v in r.items() if "L" in v}
            if done:
                bm = min(done, key=lambda m: done[m]["L"])
                row["R_best"] = {"method": bm, **done[bm]}
            if a.lkh and nn <= a.lkh_max:
                L, t = run_lkh(X)
                row["lkh"] = {"L": L, "seconds": t}
            if nn <= 2500:
                from scipy.cluster.hierarchy import leaves_list, linkage, optimal_leaf_ordering
                from scipy.spatial.distance import pdist

                def sp():
                    y = pdist(X)
                    return leaves_list(optimal_leaf_ordering(linkage(y, "average"), y))

                o3, t3 = timed(sp)
                row["scipy_olo"] = {"L": path_length(X, o3), "seconds": t3}
            rows.append(row)
            rb = row.get("R_best", {})
            lk = row.get("lkh", {})
            so = row.get("scipy_olo", {})
            ol = row.get("ours_olo", {})
            f = lambda v, w=10, p=2: f"{v:{w}.{p}f}" if isinstance(v, float) else f"{'-':>{w}s}"  # noqa: E731
            ratio = row["ours"]["L"] / rb["L"] if rb else float("nan")
            speed = rb["seconds"] / row["ours"]["seconds"] if rb else float("nan")
            xl = row["ours"]["L"] / lk["L"] if lk else None
            print(f"{fam:10s} {nn:6d} {f(row['ours']['L'])} {f(row['ours']['seconds'], 7, 3)} {f(rb.get('L'))} "
                  f"{rb.get('method', '-'):>8s} {f(rb.get('seconds'), 7, 2)} {f(ratio, 8, 4)} {f(speed, 6, 1)} "
                  f"{f(lk.get('L'))} {f(lk.get('seconds'), 7, 1)} {f(xl, 6, 4)} {f(ol.get('L'))} "
                  f"{f(ol.get('seconds'), 6, 2)} {f(so.get('L'))} {f(so.get('seconds'), 7, 2)}",
                  flush=True)
            notes = {m: v["note"] for m, v in r.items() if "note" in v}
            if notes:
                print(f"{'':17s} R: {notes}")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"load": os.getloadavg(), "rows": rows}, indent=1))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
