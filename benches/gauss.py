"""Fast Gauss transform benchmark: vastml.kernels against FIGTree and scikit-learn.

    python benches/gauss.py [--quick] [--rows d=3,h=0.1] [--repeats N] [--n-jobs J]

G(y_j) = sum_i q_i exp(-||y_j - x_i||^2 / h^2), sources/targets uniform in [0,1]^d, q ~ U[0,1],
N = M = 20,000, epsilon = 1e-6.  Per (d, h) row:
  direct  our exact sum vs FIGTree direct                        target: >= 8x faster
  auto    our method="auto" vs FIGTree auto,                      target: <= 0.5x FIGTree auto
          vs our direct, vs scikit-learn KernelDensity (live)     target: <= 1.2x our direct
          error max|G_auto - G_direct| / sum|q|                   target: <= epsilon
  direct-tree / ifgt / ifgt-tree, each timed when a pilot run (subprocess, 1/10 of the targets,
          killed at cap/2) estimates it under --cap seconds, otherwise "skipped (est. X s)".
Headline: N = M = 1,000,000, d = 2, h = 0.1 in a fresh subprocess: < 10 s and peak RSS < 1 GB,
error checked on 1,000 random targets against a chunked numpy direct sum.
FIGTree: the reference C++ library, run live in the same sitting on the same data (one
thread; how to build it: benches/_figtree.py); without it the FIGTree columns are empty.
"""
from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _figtree import figtree_time  # noqa: E402
from _harness import Bench, Timing, fmt_s  # noqa: E402

from vastml.kernels import GaussTransform, gauss_transform  # noqa: E402

N = 20_000
EPS = 1e-6
# (d, h) rows, N = M = 20,000, epsilon = 1e-6.
ROWS = [(1, 0.1), (3, 0.1), (3, 0.5), (5, 0.1), (5, 0.5), (8, 0.1), (8, 0.5)]
FIGTREE_BUDGET = {False: 10.0, True: 2.0}  # seconds per FIGTree call before it is extrapolated
FIGTREE_TIMEOUT = 120.0
QUICK_DIMS = {1, 3, 8}
METHODS = ("direct-tree", "ifgt", "ifgt-tree")
BIG = {"d": 2, "h": 0.1}           # the 1,000,000-point headline row
BIG_N, BIG_SECONDS, BIG_RSS, BIG_CHECKED = 1_000_000, 10.0, 1e9, 1_000
SK_BUDGET = {False: 10.0, True: 1.0}  # seconds per scikit-learn call (full, quick)
TARGETS = {"direct_vs_figtree": 8.0, "auto_vs_figtree": 0.5, "auto_vs_direct": 1.2}

_PILOT = """
import json, time
from gauss import make_data, seed_for
from vastml.kernels import GaussTransform
X, Y, q = make_data({n}, {n}, {d}, seed_for({d}))
t0 = time.perf_counter()
gt = GaussTransform(X, bandwidth={h!r}, epsilon={eps!r}, method={method!r}, n_jobs={n_jobs!r})
t1 = time.perf_counter()
gt(Y[:{m}], q)
print(json.dumps({{"build": t1 - t0, "eval": time.perf_counter() - t1}}))
"""

_BIG = """
import json, time
import numpy as np
from gauss import make_data, seed_for
from vastml.kernels import gauss_transform
X, Y, q = make_data({n}, {n}, {d}, seed_for({d}))
t0 = time.perf_counter()
G = gauss_transform(X, Y, q, bandwidth={h!r}, epsilon={eps!r}, method="auto", n_jobs={n_jobs!r})
t = time.perf_counter() - t0
idx = np.random.default_rng(seed_for({d}) + 1).choice({n}, {k}, replace=False)
print(json.dumps({{"seconds": t, "idx": idx.tolist(), "values": G[idx].tolist()}}))
"""


def seed_for(d: int) -> int:
    return 20_000 + d


def make_data(n: int, m: int, d: int, seed: int):
    rng = np.random.default_rng(seed)
    return rng.random((n, d)), rng.random((m, d)), rng.random(n)


def direct_numpy(X, Y, q, h, block=1 << 20):
    """Reference sum in float64, chunked over sources, chunks spread over threads (numpy releases
    the GIL).  Squared distances by broadcasting for d <= 3, by |y|^2 + |x|^2 - 2 y.x above.
    Cost ~ len(X) * len(Y) exp calls: ~10-40 s for 1,000 x 1,000,000 on 2 cores."""
    X, Y, q = np.asarray(X) / h, np.asarray(Y) / h, np.asarray(q, dtype=float)
    step = max(1, block // max(1, len(Y)))

    def part(s):
        x = X[s:s + step]
        if X.shape[1] <= 3:
            e, t = np.subtract.outer(Y[:, 0], x[:, 0]), None
            np.square(e, out=e)
            for k in range(1, X.shape[1]):
                t = np.subtract.outer(Y[:, k], x[:, k], out=t)
                e += np.square(t, out=t)
        else:
            e = np.einsum("ij,ij->i", Y, Y)[:, None] + np.einsum("ij,ij->i", x, x) - 2 * (Y @ x.T)
            np.maximum(e, 0.0, out=e)
        np.exp(np.negative(e, out=e), out=e)
        return e @ q[s:s + step]

    try:  # BLAS threads inside our threads oversubscribe the cores (10-20x slower gemv here)
        from threadpoolctl import threadpool_limits
        limit = threadpool_limits(1, user_api="blas")
    except ImportError:
        limit = contextlib.nullcontext()
    with limit, ThreadPoolExecutor(os.cpu_count() or 1) as ex:
        return sum(ex.map(part, range(0, len(X), step)), np.zeros(len(Y)))


def rel_err(G, ref, q) -> float:
    return float(np.max(np.abs(np.asarray(G) - ref)) / np.sum(np.abs(q)))


def sklearn_kde(X, q, h, atol):
    """KernelDensity whose score_samples maps back to our G: sklearn returns
    log(sum_i q_i K(y - x_i) / sum_i q_i) with K the normalised N(0, sigma^2 I) density; with
    sigma = h / sqrt(2), K = exp(-r^2/h^2) / (pi h^2)^(d/2).  atol is on that density (sklearn
    bounds the density error by atol / 2), so atol = eps / (pi h^2)^(d/2) is eps-exact for us."""
    from sklearn.neighbors import KernelDensity
    c = (math.pi * h * h) ** (X.shape[1] / 2)
    kde = KernelDensity(kernel="gaussian", bandwidth=h / math.sqrt(2), algorithm="kd_tree",
                        rtol=0, atol=atol)
    return kde, lambda Yq: np.exp(kde.score_samples(Yq)) * np.sum(q) * c


def verify_sklearn_conversion() -> None:
    rng = np.random.default_rng(0)
    for d in (1, 3, 5):
        X, Y, q = rng.random((60, d)), rng.random((9, d)), rng.random(60)
        kde, G = sklearn_kde(X, q, 0.3, atol=0.0)
        kde.fit(X, sample_weight=q)
        ref = direct_numpy(X, Y, q, 0.3)
        assert np.allclose(G(Y), ref, rtol=1e-10, atol=0), (d, G(Y), ref)


def sklearn_peer(bench: Bench, X, Y, q, h, budget: float) -> Timing:
    """Fit + score, scoring only a prefix of Y if all of Y would exceed `budget` seconds per call;
    the time is then extrapolated linearly (note "ext. xK") and the value covers the prefix."""
    c = (math.pi * h * h) ** (X.shape[1] / 2)
    kde, G = sklearn_kde(X, q, h, atol=EPS / c)
    fit = bench.time(lambda: kde.fit(X, sample_weight=q), warmup=0, repeats=1).median
    m, spent = 1, 0.0
    while spent < 0.2 and m < len(Y):  # pilot: double the targets until it takes 0.2 s
        m = min(len(Y), 2 * m)
        t0 = time.perf_counter()
        G(Y[:m])
        spent = time.perf_counter() - t0
    m = min(len(Y), max(1, int(budget * m / max(spent, 1e-9))))
    sc = bench.time(lambda: G(Y[:m]), warmup=0, repeats=None if m == len(Y) else 1)
    k = len(Y) / m
    note = "" if m == len(Y) else f"ext. x{k:.3g}"
    return Timing([fit + s * k for s in sc.times], sc.value, note)


def parse_rows(specs) -> list[dict]:
    """["d=3,h=0.1", "d=8"] -> [{"d": 3.0, "h": 0.1}, {"d": 8.0}]."""
    out = []
    for spec in specs or []:
        try:
            f = {k.strip(): float(v) for k, v in (kv.split("=") for kv in spec.split(","))}
        except ValueError:
            f = {"?": 0}
        if not f or set(f) - {"d", "h"}:
            raise SystemExit(f"--rows {spec!r}: expected keys d and/or h, e.g. d=3,h=0.1")
        out.append(f)
    return out


def wanted(filters, quick, d, h, big=False) -> bool:
    if filters:
        return any(all(abs({"d": d, "h": h}.get(k, math.nan) - v) < 1e-12 for k, v in f.items())
                   for f in filters)
    return big or not quick or d in QUICK_DIMS


def log(msg: str) -> None:
    print(f"[gauss] {msg}", file=sys.stderr, flush=True)


def figtree_peer(X, Y, q, h, method, quick) -> Timing | None:
    """FIGTree's `method` on the same data, live (None when it is not built or failed)."""
    secs, _, note = figtree_time(X, Y, q, h, EPS, FIGTREE_BUDGET[quick], FIGTREE_TIMEOUT, method)
    if secs is None:
        log(f"FIGTree {method}: {note}")
        return None
    return Timing([secs], note=note)


def bench_row(bench: Bench, d, h, n, n_jobs, cap) -> None:
    X, Y, q = make_data(n, n, d, seed_for(d))
    p = {"d": d, "h": h, "N": n}
    tag = f"d={d} h={h}"
    fig_direct = figtree_peer(X, Y, q, h, "direct", bench.quick)
    fig_auto = figtree_peer(X, Y, q, h, "auto", bench.quick)

    def run(method):
        return lambda: gauss_transform(X, Y, q, bandwidth=h, epsilon=EPS, method=method,
                                       n_jobs=n_jobs)

    direct = bench.time(run("direct"))
    G_dir = direct.value
    sub = np.random.default_rng(1).choice(n, min(n, 1000), replace=False)
    err_dir = rel_err(G_dir[sub], direct_numpy(X, Y[sub], q, h), q)
    row = bench.compare("direct", direct, {"FIGTree direct": fig_direct} if fig_direct else {}, p,
                        {"err/Σq": err_dir})
    if fig_direct:
        r = row.ratio("FIGTree direct")
        goal = TARGETS["direct_vs_figtree"]
        bench.check(f"{tag}: direct >= {goal:g}x faster than FIGTree direct", r >= goal,
                    f"{r:.2f}x", row=row)
    bench.check(f"{tag}: direct error <= eps (vs numpy, {len(sub)} targets)", err_dir <= EPS,
                f"{err_dir:.2e}", row=row)
    log(f"{tag}: direct {fmt_s(direct.median)}, err {err_dir:.1e}")

    method = GaussTransform(X, bandwidth=h, epsilon=EPS, method="auto", n_jobs=n_jobs).method_
    auto = bench.time(run("auto"))
    err_auto = rel_err(auto.value, G_dir, q)
    sk = sklearn_peer(bench, X, Y, q, h, budget=SK_BUDGET[bench.quick])
    err_sk = rel_err(sk.value, G_dir[:len(sk.value)], q)
    peers = {"FIGTree auto": fig_auto} if fig_auto else {}
    peers |= {"vastml direct": direct, "sklearn kd_tree": sk}
    row = bench.compare("auto", auto, peers, p,
                        {"method": method, "err/Σq": err_auto, "sklearn err/Σq": err_sk})
    if fig_auto:
        r = row.ratio("FIGTree auto")
        bench.check(f"{tag}: auto <= {TARGETS['auto_vs_figtree']:g}x FIGTree auto",
                    1 / r <= TARGETS["auto_vs_figtree"], f"{1 / r:.3f}x", row=row)
    r = row.ratio("vastml direct")
    bench.check(f"{tag}: auto ({method}) <= {TARGETS['auto_vs_direct']:g}x our direct",
                1 / r <= TARGETS["auto_vs_direct"], f"{1 / r:.3f}x", row=row)
    bench.check(f"{tag}: auto error <= eps", err_auto <= EPS, f"{err_auto:.2e}", row=row)
    log(f"{tag}: auto ({method}) {fmt_s(auto.median)}, err {err_auto:.1e}; "
        f"sklearn {fmt_s(sk.median)} {sk.note}")

    for m in METHODS:
        if m == method:
            est = auto.median
        else:  # pilot in a subprocess: hopeless methods may be very slow or memory-hungry
            code = _PILOT.format(n=n, d=d, h=h, eps=EPS, method=m, n_jobs=n_jobs, m=max(1, n // 10))
            pilot = bench.run_isolated(code, timeout=2.0 + cap / 2)
            if "error" in pilot:
                why = (f"skipped (est. > {cap:g} s)" if pilot["error"].startswith("timeout")
                       else "failed: " + pilot["error"].splitlines()[-1][:120])
                bench.skip(m, p, why)
                log(f"{tag}: {m} {why}")
                continue
            est = pilot["build"] + pilot["eval"] * n / max(1, n // 10)
        if est > cap:
            bench.skip(m, p, f"skipped (est. {est:.3g} s)")
            log(f"{tag}: {m} skipped (est. {est:.3g} s)")
            continue
        slow = est > 5 or bench.quick
        t = bench.time(run(m), warmup=0 if slow else 1, repeats=1 if est > 5 else None)
        err = rel_err(t.value, G_dir, q)
        row = bench.compare(m, t, {"vastml direct": direct, "vastml auto": auto}, p,
                            {"err/Σq": err})
        bench.check(f"{tag}: {m} error <= eps", err <= EPS, f"{err:.2e}", row=row)
        log(f"{tag}: {m} {fmt_s(t.median)}, err {err:.1e}")


def bench_big(bench: Bench, n, n_jobs) -> None:
    d, h = BIG["d"], BIG["h"]
    p, tag = {"d": d, "h": h, "N": n}, f"{n:,} points d={d} h={h}"
    k = min(n, BIG_CHECKED)
    runs = [bench.run_isolated(_BIG.format(n=n, d=d, h=h, eps=EPS, n_jobs=n_jobs, k=k))
            for _ in range(bench.repeats)]
    bad = [r["error"] for r in runs if "error" in r]
    if bad:
        bench.skip("auto (subprocess)", p, "failed: " + bad[0].splitlines()[-1][:120])
        bench.check(f"{tag}: runs", False, bad[0][-300:])
        log(f"{tag}: failed: {bad[0]}")
        return
    X, Y, q = make_data(n, n, d, seed_for(d))
    idx = np.asarray(runs[0]["idx"])  # same seed in every run
    t0 = time.perf_counter()
    ref = direct_numpy(X, Y[idx], q, h)
    log(f"{tag}: numpy reference on {len(idx)} targets in {time.perf_counter() - t0:.1f} s")
    err = max(rel_err(r["values"], ref, q) for r in runs)
    peak = max(r["peak_rss_bytes"] or 0 for r in runs)
    ours = Timing([r["seconds"] for r in runs], note="subprocess")
    method = GaussTransform(X, bandwidth=h, epsilon=EPS, method="auto", n_jobs=n_jobs).method_
    t0 = time.perf_counter()
    sk = sklearn_peer(bench, X, Y, q, h, budget=SK_BUDGET[bench.quick])
    log(f"{tag}: sklearn peer measured in {time.perf_counter() - t0:.1f} s")
    ks = min(len(sk.value), 200)  # sklearn error on its first targets (numpy reference is costly)
    err_sk = rel_err(sk.value[:ks], direct_numpy(X, Y[:ks], q, h), q)
    wall = fmt_s(float(np.median([r["wall_seconds"] for r in runs])))
    extra = {"method": method, "err/Σq": err, "sklearn err/Σq": err_sk,
             "peak RSS": f"{peak / 2**20:.0f} MiB", "wall": wall}
    row = bench.compare("auto (subprocess)", ours, {"sklearn kd_tree": sk}, p, extra)
    if n == BIG_N:
        bench.check(f"{tag}: auto < {BIG_SECONDS:g} s", ours.median < BIG_SECONDS,
                    f"{ours.median:.2f} s (subprocess wall incl. start-up + data: {wall})", row=row)
        bench.check(f"{tag}: peak RSS < 1 GB", 0 < peak < BIG_RSS, f"{peak / 1e6:.0f} MB", row=row)
    bench.check(f"{tag}: error <= eps ({k} targets vs numpy)", err <= EPS, f"{err:.2e}", row=row)
    log(f"{tag}: {fmt_s(ours.median)}, peak {peak / 2**20:.0f} MiB, err {err:.1e}; "
        f"sklearn {fmt_s(sk.median)} {sk.note}")


def main(argv=None) -> int:
    def add_args(ap):
        ap.add_argument("--rows", action="append", metavar="d=3,h=0.1",
                        help="only rows matching all given keys (repeatable); d=2 is the 1M row")
        ap.add_argument("--n", type=int, default=N, help="N = M for the (d, h) rows")
        ap.add_argument("--big-n", type=int, default=BIG_N,
                        help="N = M for the headline row (0: skip it)")
        ap.add_argument("--n-jobs", type=int, default=None,
                        help="passed to vastml (default None: the library's default)")
        ap.add_argument("--cap", type=float, default=None,
                        help="per-call time cap for explicit methods (default 30 s, quick 3 s)")

    bench = Bench("gauss", argv, repeats=3, quick_repeats=1, add_args=add_args)
    a = bench.args
    cap = a.cap if a.cap is not None else (3.0 if bench.quick else 30.0)
    filters = parse_rows(a.rows)
    verify_sklearn_conversion()
    jobs = [(f"d={d} h={h}", bench_row, (bench, d, h, a.n, a.n_jobs, cap))
            for d, h in ROWS if wanted(filters, bench.quick, d, h)]
    if a.big_n and wanted(filters, bench.quick, BIG["d"], BIG["h"], big=True):
        jobs.append((f"{a.big_n:,} points", bench_big, (bench, a.big_n, a.n_jobs)))
    if not jobs:
        raise SystemExit(f"no row matches --rows {' '.join(a.rows or [])}")
    for tag, fn, args in jobs:
        try:
            fn(*args)
        except Exception as e:  # keep the other rows; the failure is a missed target
            bench.check(f"{tag}: row ran", False, f"{type(e).__name__}: {e}"[:300])
            log(f"{tag}: {type(e).__name__}: {e}")
    return bench.report()


if __name__ == "__main__":
    sys.exit(main())
