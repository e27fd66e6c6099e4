"""Locally Linear Landmarks and Parametric Embedding benchmarks (issue 8).

Rows
----
- ``exact LE``: Laplacian eigenmaps on a Gaussian kNN graph of digits-like 64-D points
  (mixture of 10 noisy curved manifolds), ARPACK on the normalised affinity.
- ``LLL L=...``: LLLEigenmaps on the same graph (graph build excluded from both), its Procrustes
  error to exact LE, and ``Nystroem`` (scikit-learn's Nystroem features of the Gaussian kernel
  with the same landmarks, eigenmaps of the approximate affinity) at equal landmarks.
- ``PE N=...``: ParametricEmbedding, K = 20, D = 2, on Dirichlet-like posteriors.

Targets (issue 8): LLL reaches 10% error >= 10x faster than exact LE at N = 60,000; LLL error
below Nystroem at equal landmarks; PE at N = 1,000,000, K = 20 under 60 s.

    .venv/bin/python benches/lll.py --quick          # N = 10,000 eigenmaps, PE N = 20,000
    .venv/bin/python benches/lll.py                  # N = 60,000, PE up to 1,000,000
"""

from __future__ import annotations

import sys
import time

import numpy as np

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
from _harness import Bench, Timing  # noqa: E402

from vastml.embed import LLLEigenmaps, ParametricEmbedding, laplacian_eigenmaps  # noqa: E402
from vastml.embed import procrustes_error  # noqa: E402
from vastml.embed._lll import knn_gaussian  # noqa: E402


def log(msg):
    print(f"[lll] {msg}", file=sys.stderr, flush=True)


def digits_like(n, dim=64, seed=0):
    """10 classes, each a noisy 2-D curved sheet embedded in 64-D (pixel-like, in [0, 16])."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 10, n)
    t = rng.uniform(0, 1, (n, 2))
    X = np.empty((n, dim))
    common = rng.uniform(4, 12, dim)
    A0, B0 = rng.normal(0, 3, (2, dim)), rng.normal(0, 2, (2, dim))
    for c in range(10):
        m = y == c
        base = common + rng.normal(0, 0.5, dim)  # overlapping classes: one connected graph
        A = A0 + rng.normal(0, 0.5, (2, dim))
        Bq = B0 + rng.normal(0, 0.5, (2, dim))
        X[m] = base + t[m] @ A + np.sin(3 * t[m]) @ Bq
    X += rng.normal(0, 0.5, X.shape)
    return X, y


def nystroem_eigenmaps(X, idx, gamma, d):
    """LE of the Nystroem-approximated Gaussian affinity W ~ F F^T (F = Nystroem features)."""
    from sklearn.kernel_approximation import Nystroem

    ny = Nystroem(gamma=gamma, n_components=len(idx), random_state=0)
    ny.fit(X[idx])
    F = ny.transform(X)
    deg = F @ F.sum(0)
    deg = np.maximum(deg, 1e-300)
    G = F / np.sqrt(deg)[:, None]
    U, s, _ = np.linalg.svd(G, full_matrices=False)
    return U[:, 1 : d + 1] / np.sqrt(deg)[:, None]


def pe_data(n, K=20, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, K, n)
    logits = rng.normal(0, 1, (n, K))
    logits[np.arange(n), y] += 3
    P = np.exp(logits - logits.max(1, keepdims=True))
    return P / P.sum(1, keepdims=True)


def main():
    def extra(ap):
        ap.add_argument("--n", type=int, default=None, help="eigenmaps points (60,000; quick 10,000)")
        ap.add_argument("--pe-n", type=int, default=None, help="PE objects (quick 20,000)")

    bench = Bench("lll", add_args=extra)
    quick = bench.args.quick
    n = bench.args.n or (10_000 if quick else 60_000)
    d = 10
    X, _ = digits_like(n)
    log(f"graph on {n} points")
    W = knn_gaussian(X, 10, None)
    log("exact LE (dense up to 2,000 points, else ARPACK)")
    exact = bench.time(lambda: laplacian_eigenmaps(W, d, solver="auto", tol=1e-10, random_state=0),
                       warmup=0)
    E = exact.value[1]
    bench.compare("exact LE", exact, {}, {"N": n, "d": d})
    from sklearn.neighbors import NearestNeighbors

    dist, _ = NearestNeighbors(n_neighbors=11).fit(X).kneighbors(X)
    sigma = float(np.median(dist[:, -1]))
    for L in ((200, 500, 1000) if quick else (200, 500, 1000, 2000)):
        m = LLLEigenmaps(d, n_landmarks=L, n_neighbors_z=20, affinity="precomputed",
                         random_state=0)
        t = bench.time(lambda m=m: m.fit(X, affinity_matrix=W), warmup=0)
        err = procrustes_error(m.embedding_, E)
        idx = m.landmark_indices_
        t0 = time.perf_counter()
        En = nystroem_eigenmaps(X, idx, 1 / (2 * sigma**2), d)
        tn = Timing([time.perf_counter() - t0], note="same landmarks")
        err_n = procrustes_error(En, E)
        row = bench.compare(f"LLL L={L}", t, {"exact LE": exact, "Nystroem": tn},
                            {"N": n, "L": L, "K_Z": 20, "d": d})
        row.extra.update({"err": err, "Nystroem err": err_n})
        bench.check(f"LLL L={L} error < Nystroem error", err < err_n,
                    f"{err:.3f} vs {err_n:.3f}", row=row)
        if err <= 0.10:
            bench.check(f"LLL L={L} (err {err:.3f} <= 10%) >= 10x faster than exact LE",
                        row.ratio("exact LE") >= 10, f"ratio {row.ratio('exact LE'):.1f}",
                        row=row)
    pe_sizes = (bench.args.pe_n,) if bench.args.pe_n else ((20_000,) if quick else (100_000, 1_000_000))
    for N in pe_sizes:
        P = pe_data(N)
        pe = ParametricEmbedding(eta_phi="auto", random_state=0, max_iter=300)
        log(f"PE N={N}")
        t = bench.time(lambda pe=pe, P=P: pe.fit(P), warmup=0, repeats=1)
        row = bench.compare(f"PE N={N}", t, {}, {"N": N, "K": 20, "D": 2})
        row.extra.update({"iterations": pe.n_iter_, "KL/N": pe.kl_ / N})
        if N == 1_000_000:
            bench.check("PE N=1e6 K=20 < 60 s", t.median < 60, f"{t.median:.1f} s", row=row)
    return bench.report()


if __name__ == "__main__":
    sys.exit(main())
