"""``vastml demo`` sections for Locally Linear Landmarks and Parametric Embedding."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np


def demo_lll_pe(args: argparse.Namespace) -> None:
    """Print the LLL-vs-exact eigenmaps comparison and a PE of classifier posteriors; plot both."""
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression

    from vastml.embed import (
        LLLEigenmaps,
        ParametricEmbedding,
        embed_classifier,
        laplacian_eigenmaps,
        procrustes_error,
    )
    from vastml.embed._lll import knn_gaussian

    quick = getattr(args, "quick", False)
    n = 1_500 if quick else 20_000
    rng = np.random.default_rng(getattr(args, "seed", 0))
    t = rng.uniform(1.5 * np.pi, 4.5 * np.pi, n)
    X = np.c_[t * np.cos(t), 20 * rng.uniform(size=n), t * np.sin(t)]
    print(f"\n6. Laplacian eigenmaps of a {n:,}-point swiss roll: Locally Linear Landmarks vs exact")
    W = knn_gaussian(X, 10, None)
    t0 = time.perf_counter()
    _, E = laplacian_eigenmaps(W, 2, solver="arpack", tol=1e-10, random_state=0)
    t_exact = time.perf_counter() - t0
    print(f"   exact (ARPACK): {t_exact:.2f} s")
    lll: LLLEigenmaps | None = None
    for L in (50, 150) if quick else (50, 200, 500, 1000):
        m = LLLEigenmaps(n_components=2, n_landmarks=L, n_landmark_neighbors=5, affinity="precomputed", random_state=0)
        t0 = time.perf_counter()
        m.fit(X, affinity_matrix=W)
        dt = time.perf_counter() - t0
        print(f"   LLL L={L:>4}: {dt:.2f} s, Procrustes error {procrustes_error(m.embedding_, E):.3f}")
        lll = m

    print("\n7. Parametric Embedding of a logistic-regression classifier on the digits (10 classes)")
    Xd, yd = load_digits(return_X_y=True)
    clf = LogisticRegression(max_iter=300).fit(Xd[::2], yd[::2])
    t0 = time.perf_counter()
    pe = embed_classifier(clf, Xd, init="mds", l2_penalty_centers=0.01 * len(Xd), random_state=0)
    print(f"   N={len(Xd):,}, K=10: {time.perf_counter() - t0:.2f} s, {pe.n_iter_} L-BFGS steps, "
          f"KL/N {pe.kl_ / len(Xd):.3f}, embedding agrees with the classifier on "
          f"{(pe.classes_at(pe.embedding_) == clf.predict(Xd)).mean():.1%} of objects")
    assert isinstance(pe, ParametricEmbedding)
    from vastml.embed.lll import LLLKernelDiscriminantAnalysis, kernel_discriminant_analysis

    nk = 600 if quick else 1_500
    Xk, yk = Xd[:nk] / 16.0, yd[:nk]
    t0 = time.perf_counter()
    _, _, Ek = kernel_discriminant_analysis(Xk, yk, 9, gamma=0.05)
    t_k = time.perf_counter() - t0
    t0 = time.perf_counter()
    kda = LLLKernelDiscriminantAnalysis(n_components=9, gamma=0.05, n_landmarks=nk // 5, random_state=0)
    kda.fit(Xk, yk)
    print(f"   kernel LDA of {nk} digits (9 discriminants): exact {t_k:.2f} s, LLL with "
          f"{nk // 5} landmarks {time.perf_counter() - t0:.2f} s, Procrustes error "
          f"{procrustes_error(kda.embedding_, Ek):.3f}")

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    assert lll is not None  # the loop above ran at least once
    out = Path(getattr(args, "out", "vastml-demo.png"))
    out = out.with_name(out.stem + "-lll-pe" + out.suffix)
    fig, ax = plt.subplots(1, 3, figsize=(16, 5))
    ax[0].scatter(E[:, 0], E[:, 1], c=t, s=2, cmap="viridis")
    ax[0].set_title(f"exact eigenmaps ({t_exact:.2f} s)")
    ax[1].scatter(lll.embedding_[:, 0], lll.embedding_[:, 1], c=t, s=2, cmap="viridis")
    ax[1].scatter(*lll.landmark_embedding_.T, s=8, c="r", marker="x", label="landmarks")
    ax[1].set_title(f"LLL, {lll.n_landmarks_} landmarks")
    ax[1].legend(loc="best")
    R, Phi = pe.embedding_, pe.class_embedding_
    ax[2].scatter(R[:, 0], R[:, 1], c=yd, s=4, cmap="tab10")
    for k, (x, y) in enumerate(Phi):
        ax[2].text(x, y, str(k), fontsize=13, ha="center", va="center",
                   bbox={"boxstyle": "round", "fc": "w"})
    lo = np.minimum(R.min(0), Phi.min(0)) - 0.5
    hi = np.maximum(R.max(0), Phi.max(0)) + 0.5
    ax[2].set_xlim(lo[0], hi[0])
    ax[2].set_ylim(lo[1], hi[1])
    ax[2].set_title("Parametric Embedding (objects by true class, centres boxed)")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    print(f"\nPlot written to {out}")
