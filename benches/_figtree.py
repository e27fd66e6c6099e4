"""FIGTree (the thesis's C++ library) run live on the benchmark machine, one thread.

Built outside the repository:

    git clone https://github.com/vmorariu/figtree /work/peers/figtree
    make -C /work/peers/figtree              # gives lib/libfigtree.so
    export FIGTREE_DIR=/work/peers/figtree   # the default

Each call runs in a subprocess (FIGTree writes to stdout and cannot be interrupted), on a
prefix of the targets when all of them would take longer than the budget, and is then
extrapolated linearly through the two largest prefixes timed. Fast calls are repeated (best of
a few) against load noise.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

FIGTREE_DIR = Path(os.environ.get("FIGTREE_DIR", "/work/peers/figtree"))
#: FIGTree's evaluation methods (figtree.h): its automatic choice and the direct sum.
EVAL = {"auto": 4, "direct": 0}
N_CHECK = 64  # values returned, for the error check

_SCRIPT = r"""
import ctypes, json, sys, time
import numpy as np
lib = ctypes.CDLL(sys.argv[1])
P = ctypes.POINTER(ctypes.c_double)
lib.figtree.argtypes = [ctypes.c_int] * 4 + [P, ctypes.c_double, P, P, ctypes.c_double, P] + [ctypes.c_int] * 4
lib.figtree.restype = ctypes.c_int
d = np.load(sys.argv[2])
X, Y, q, h, eps = d["X"], d["Y"], d["q"], float(d["h"]), float(d["eps"])
method = int(sys.argv[4])
out = {}
for m in map(int, sys.argv[3].split(",")):
    y = np.ascontiguousarray(Y[:m])
    g = np.zeros(m)
    ptr = lambda a: a.ctypes.data_as(P)
    best, spent = float("inf"), 0.0
    while spent < 0.3 and best > 0:  # fast calls are repeated (best of a few) against load noise
        t0 = time.perf_counter()
        # non-uniform IFGT parameters (1) and cluster-wise truncation (2), as the thesis's auto
        rc = lib.figtree(X.shape[1], X.shape[0], m, 1, ptr(X), h, ptr(q), ptr(y), eps, ptr(g), method, 1, 2, 0)
        t = time.perf_counter() - t0
        best, spent = min(best, t), spent + t
    out[m] = {"seconds": best, "rc": rc, "values": g[:%d].tolist()}
print(json.dumps(out))
""" % N_CHECK


def available() -> bool:
    return (FIGTREE_DIR / "lib" / "libfigtree.so").exists()


def extrapolate(times: dict[int, float], m: int) -> float:
    """Seconds for m targets, linear through the two largest timed prefixes.

    The smallest prefix is the first call: the fixed part of a call is at most all of it,
    so the slope is at least what the largest prefix spent beyond it (a load burst during
    the middle prefix once flattened the line, and a 22 s call came out at 0.49 s).

    >>> round(extrapolate({512: 0.03, 5120: 0.48, 10240: 0.49}, 102400), 2)
    4.63
    >>> round(extrapolate({512: 1.0, 5120: 1.05, 10240: 1.1}, 102400), 2)
    2.0
    """
    items = sorted(times.items())
    m2, t2 = items[-1]
    if m2 >= m or len(items) == 1:
        return t2 * m / m2
    m1, t1 = items[-2]
    slope = (t2 - t1) / (m2 - m1)
    if len(items) > 2:
        slope = max(slope, (t2 - items[0][1]) / m2)
    if slope <= 0:
        slope = t2 / m2
    return t2 + slope * (m - m2)


def prefixes(m: int, first: float, budget: float, m1: int) -> list[int]:
    """Prefix sizes to time after one of m1 targets took `first` seconds.

    Two prefixes (half and all of what fits the budget), so that the line extrapolated
    through them does not start from the first call, which pays for what a first call pays
    (and, in a library that runs small calls on one thread, can run differently).
    """
    if first * m / m1 <= budget or m1 >= m:
        return [m]
    m2 = int(min(m, max(2 * m1, m * 0.3 * budget / max(first * m / m1, 1e-9))))
    return [m2] if m2 >= m else [max(m2 // 2, m1 + 1), m2]


def figtree_time(X, Y, q, h, eps, budget, timeout, method="auto"):
    """(seconds for all targets, the first N_CHECK values, note) of FIGTree's `method` ("auto"
    or "direct") for the sum with kernel exp(-|y - x|^2 / h^2); (None, None, why) when it is
    not built or fails, (timeout, None, note) when it ran past `timeout`."""
    lib = FIGTREE_DIR / "lib" / "libfigtree.so"
    if not lib.exists():
        return None, None, "FIGTree not built"
    M = Y.shape[0]
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "case.npz"
        np.savez(data, X=X, Y=Y, q=q, h=h, eps=eps)

        def run(ms):
            env = dict(os.environ, LD_LIBRARY_PATH=str(lib.parent))
            args = [sys.executable, "-c", _SCRIPT, str(lib), str(data), ",".join(map(str, ms)), str(EVAL[method])]
            p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)
            if p.returncode != 0:
                raise RuntimeError(p.stderr.strip()[-200:] or f"exit {p.returncode}")
            return {int(k): v for k, v in json.loads(p.stdout.strip().splitlines()[-1]).items()}

        m1 = min(M, 512)
        try:
            first = run([m1])
            ms = prefixes(M, first[m1]["seconds"], budget, m1)
            res = first if ms == [m1] else {**first, **run(ms)}
            times = {k: v["seconds"] for k, v in res.items()}
            # FIGTree chooses its method and parameters for the targets it is given, so a
            # prefix can run another plan than the whole call: the extrapolation is replaced
            # by the whole call wherever that fits a quarter of the timeout (a case of 47,744
            # targets came out at 1.1, 3.6 and 10.6 s from prefixes of 1,024).
            if max(times) < M and extrapolate(times, M) <= timeout / 4:
                times = {M: run([M])[M]["seconds"]}
        except subprocess.TimeoutExpired:
            return timeout, None, f"> {timeout:g} s"
        except RuntimeError as e:
            return None, None, "failed: " + str(e)
    note = "" if max(times) == M else f"ext. from {max(times)}"
    return extrapolate(times, M), np.array(res[m1]["values"]), note
