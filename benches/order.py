"""Ordering rows for heatmaps (TSP-means, EM-ordering) and object matching (CKS).

Rows:
- ``tsp_uniform``: TSP-means on uniform points in the unit square (n = 1,000 and 5,000) against
  LKH 3 (``elkai``, n = 1,000 only) and ``fast-tsp`` (5 s budget), both run here when installed
  (``pip install -e ".[bench]"``). Path lengths are open paths; a peer's closed tour is cut at
  its longest edge. Targets: L within 8% of LKH's and >= 20x faster.
- ``tsp_1m``: 1,000,000 points in 10-D in a fresh interpreter; target < 60 s, peak < 2 GB.
- ``waveform``: FOM and L on the waveform generator beside the thesis's Table 2.2 (n = 10,000,
  TSP-means) and Table 2.3 (n = 1,500, EM-1 / EM-5, waveform and wave noisy, z-scored).
- ``cks``: Convex Kernelized Sorting of 320 objects against a rotated, noisy, permuted copy;
  target < 10 s.

    .venv/bin/python benches/order.py --quick   # skips the million-point row
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import Bench, Timing  # noqa: E402

from vastml.datasets import make_waveform  # noqa: E402
from vastml.matching import ConvexKernelizedSorting  # noqa: E402
from vastml.reorder import EMOrdering, TSPMeans, figure_of_merit, path_length  # noqa: E402

try:
    import elkai
except ImportError:  # pragma: no cover - optional peer
    elkai = None
try:
    import fast_tsp
except ImportError:  # pragma: no cover - optional peer
    fast_tsp = None


def open_from_tour(x, tour):
    """Best open path from a closed tour: drop its longest edge."""
    t = np.asarray(tour[:-1] if len(tour) > len(x) else tour)
    nxt = np.roll(t, -1)
    e = np.linalg.norm(x[t] - x[nxt], axis=1)
    k = int(np.argmax(e))
    return np.roll(t, -(k + 1))


def main(argv=None) -> int:
    b = Bench("order", argv, repeats=3, quick_repeats=1)
    rng = np.random.default_rng(0)

    # --- TSP-means vs LKH / fast-tsp on uniform points
    for n in (1000, 5000):
        x = rng.random((n, 2))
        tm = TSPMeans(random_state=0)
        peers, extra = {}, {}
        ours = b.time(lambda x=x, tm=tm: tm.fit(x).order_)
        extra["L"] = round(path_length(x, ours.value), 2)
        d = np.sqrt(((x[:, None, :] - x[None, :, :]) ** 2).sum(-1))
        if elkai is not None and n <= 1000:
            lk = b.time(lambda d=d: elkai.DistanceMatrix((d * 1e4).tolist()).solve_tsp(), warmup=0,
                        repeats=1)
            peers["elkai (LKH)"] = lk
            extra["L elkai"] = round(path_length(x, open_from_tour(x, lk.value)), 2)
        if fast_tsp is not None:
            di = np.round(d * (65000 / d.max())).astype(np.int64).tolist()  # fast-tsp: <= 65535
            ft = b.time(lambda di=di: fast_tsp.find_tour(di, duration_seconds=5.0), warmup=0,
                        repeats=1)
            peers["fast-tsp"] = ft
            extra["L fast-tsp"] = round(path_length(x, open_from_tour(x, ft.value)), 2)
        row = b.compare("tsp_uniform", ours, peers, {"n": n}, extra)
        for k, key in (("elkai (LKH)", "L elkai"), ("fast-tsp", "L fast-tsp")):
            if k in peers:
                ratio = extra["L"] / extra[key]
                b.check(f"L within 8% of {k} (n={n})", ratio <= 1.08, f"{ratio:.3f}", row)
                b.check(f">= 20x faster than {k} (n={n})", row.ratio(k) >= 20,
                        f"{row.ratio(k):.1f}x", row)
    if elkai is None:
        b.skip("tsp_uniform", {"peer": "elkai"}, "elkai not installed")
    if fast_tsp is None:
        b.skip("tsp_uniform", {"peer": "fast-tsp"}, "fast-tsp not installed")

    # --- a million points in 10-D, fresh interpreter for peak memory
    if not b.quick:
        for window in (0, 1000):
            code = f"""
import json, time, numpy as np
from vastml.reorder import TSPMeans
x = np.random.default_rng(1).random((1_000_000, 10))
t = time.perf_counter()
tm = TSPMeans(random_state=0, polish_window={window}).fit(x)
print(json.dumps({{"seconds": time.perf_counter() - t, "L": tm.path_length_,
                  "stages": tm.stage_seconds_}}))
"""
            res = b.run_isolated(code, timeout=1800)
            gb = (res.get("peak_rss_bytes") or 0) / 1e9
            secs = float(res.get("seconds", float("nan")))
            row = b.compare("tsp_1m", Timing([secs], note="fresh interpreter"), {},
                            {"n": 1_000_000, "d": 10, "polish_window": window},
                            {"peak GB": round(gb, 2), "L": round(res.get("L", float("nan")), 0),
                             "stages s": ", ".join(f"{k} {v:.1f}" for k, v in
                                                   res.get("stages", {}).items()),
                             "note": res.get("error", "")})
            b.check(f"1M x 10-D under 60 s (polish {window})", res.get("seconds", 1e9) < 60,
                    f"{res.get('seconds', float('nan')):.1f} s", row)
            b.check(f"1M x 10-D under 2 GB (polish {window})", 0 < gb < 2, f"{gb:.2f} GB", row)

    # --- waveform against the thesis's tables
    n10 = 2000 if b.quick else 10000
    X, y = make_waveform(n10, random_state=2)
    Xz = (X - X.mean(0)) / X.std(0)
    for levels in (7, None):
        t = b.time(lambda lv=levels: TSPMeans(levels=lv, random_state=0).fit(Xz), repeats=1)
        b.compare("waveform tsp-means", t, {}, {"n": n10, "l": levels or "auto"},
                  {"FOM": round(figure_of_merit(y, t.value.order_), 3),
                   "L": round(t.value.path_length_, 0),
                   "thesis (n=10k, l=7)": "FOM 0.229, L 29,840 (Table 2.2)"})
    for noisy, thesis in ((0, "EM-1 0.239, EM-5 0.238"), (21, "EM-1 0.282, EM-5 0.237")):
        foms = []
        for seed in range(1 if b.quick else 5):
            X, y = make_waveform(1500, noise_features=noisy, random_state=10 + seed)
            em = EMOrdering(max_iter=5, random_state=seed).fit(X)
            foms.append([figure_of_merit(y, em.history_[0]["order"]),
                         figure_of_merit(y, em.order_),
                         int((~em.active_[21:]).sum()) if noisy else 0])
        f = np.mean(foms, axis=0)
        t = b.time(lambda X=X: EMOrdering(max_iter=5, random_state=0).fit(X), repeats=1)
        row = b.compare("waveform em", t, {}, {"n": 1500, "noise_features": noisy},
                        {"FOM EM-1": round(f[0], 3), "FOM EM-5": round(f[1], 3),
                         "noise dropped": f"{f[2]:.1f}/{noisy}", "thesis (Table 2.3)": thesis})
        b.check(f"EM-5 FOM within 0.03 of the thesis (noise {noisy})",
                abs(f[1] - (0.238 if noisy == 0 else 0.237)) <= 0.03, f"{f[1]:.3f}", row)

    # --- CKS on 320 x 320
    m = 320
    Xc = rng.normal(size=(m, 10))
    p = rng.permutation(m)
    Q = np.linalg.qr(rng.normal(size=(10, 10)))[0]
    Yc = Xc[p] @ Q + 0.05 * rng.normal(size=(m, 10))
    t = b.time(lambda: ConvexKernelizedSorting().fit(Xc, Yc), repeats=1)
    acc = float((t.value.match_ == p).mean())
    row = b.compare("cks", t, {}, {"m": m}, {"accuracy": round(acc, 3),
                                             "iterations": t.value.n_iter_,
                                             "objective": round(t.value.objective_, 2)})
    b.check("CKS 320 x 320 under 10 s", t.median < 10, f"{t.median:.1f} s", row)
    return b.report()


if __name__ == "__main__":
    raise SystemExit(main())
