"""Smoke test of an installed vastml, run by scripts/install_test.sh from outside the source tree.

Imports every sub-package and runs a small, checked computation in each area; exits non-zero on
the first failure. Each check compares against a NumPy oracle or an invariant, so it can fail.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time

import numpy as np

import vastml

ROOT = vastml.__file__.rsplit("/", 2)[0]


def check(name, cond, detail=""):
    print(f"  {'ok ' if cond else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
    if not cond:
        raise SystemExit(f"smoke test failed: {name} {detail}")


def imports():
    print("imports")
    check("vastml is the installed copy", "site-packages" in vastml.__file__, vastml.__file__)
    for mod in pkgutil.walk_packages(vastml.__path__, "vastml."):
        if mod.name == "vastml.__main__":
            continue
        importlib.import_module(mod.name)
    for sub in ("datasets", "distributed", "embed", "kernels", "matching", "reorder", "svm"):
        pkg = importlib.import_module(f"vastml.{sub}")
        missing = [n for n in pkg.__all__ if not hasattr(pkg, n)]
        check(f"vastml.{sub}: all {len(pkg.__all__)} public names resolve", not missing, str(missing))
    from vastml import _core

    check("compiled core", bool(_core.__version__), f"{_core.__version__}, kernels: {_core.simd}")


def kernels(rng):
    print("kernels")
    from vastml.kernels import KernelDensity, gauss_transform

    x, y, q = rng.uniform(size=(3000, 2)), rng.uniform(size=(500, 2)), rng.uniform(size=3000)
    h = 0.2
    exact = np.exp(-((y[:, None, :] - x[None]) ** 2).sum(-1) / h**2) @ q
    for method in ("direct", "direct-tree", "ifgt", "ifgt-tree", "auto"):
        g = gauss_transform(x, y, q, bandwidth=h, epsilon=1e-6, method=method)
        err = np.abs(g - exact).max() / q.sum()
        check(f"gauss_transform {method} vs direct sum", err <= 1e-6, f"error {err:.1e}")
    kde = KernelDensity(bandwidth=0.3).fit(rng.normal(size=(2000, 1)))
    grid = np.linspace(-8, 8, 4001)[:, None]
    mass = np.exp(kde.score_samples(grid)).sum() * (grid[1, 0] - grid[0, 0])
    check("KernelDensity integrates to 1", abs(mass - 1) < 1e-3, f"{mass:.5f}")


def reorder(rng):
    print("reorder")
    from vastml.reorder import ConvoMap, convolution_error, planted_matrix

    m = np.asarray(planted_matrix("nested", 60, 0.02, random_state=1))
    shuffled = m[rng.permutation(60)][:, rng.permutation(60)]
    cm = ConvoMap(kernel_size=3, random_state=0, n_jobs=1).fit(shuffled)
    before = convolution_error(shuffled, kernel_size=3)
    after = convolution_error(shuffled[cm.row_order_][:, cm.col_order_], kernel_size=3)
    check("ConvoMap orders are permutations", sorted(cm.row_order_) == list(range(60)))
    check("ConvoMap lowers the convolution error", after < before, f"{before:g} -> {after:g}")


def svm(rng):
    print("svm")
    from vastml.datasets import make_checkerboard
    from vastml.svm import AROWClassifier, BSGDClassifier, PegasosClassifier

    X, y = make_checkerboard(3000, 2, 2, random_state=0)
    lin_X = rng.normal(size=(2000, 5))
    lin_y = (lin_X @ np.arange(1, 6) > 0).astype(int)
    for clf in (AROWClassifier(random_state=0), PegasosClassifier(random_state=0)):
        acc = clf.fit(lin_X, lin_y).score(lin_X, lin_y)
        check(f"{type(clf).__name__} separates a linear problem", acc > 0.9, f"accuracy {acc:.3f}")
    acc = BSGDClassifier(budget=100, random_state=0).fit(X, y).score(X, y)
    check("BSGDClassifier learns the 2x2 checkerboard", acc > 0.8, f"accuracy {acc:.3f}")


def embed(rng):
    print("embed")
    from vastml.embed import TSNE, entropic_affinities

    X = np.vstack([rng.normal(size=(100, 5)), rng.normal(size=(100, 5)) + 8])
    P, _, _ = entropic_affinities(X, perplexity=10, n_neighbors=30)
    rows = np.asarray(P.sum(axis=1)).ravel()
    check("entropic affinities rows sum to 1", np.allclose(rows, 1, atol=1e-8))
    Y = TSNE(perplexity=10, max_iter=250, random_state=0).fit_transform(X)
    d_in = np.linalg.norm(Y[:100].mean(0) - Y[100:].mean(0))
    spread = max(Y[:100].std(0).max(), Y[100:].std(0).max())
    check("t-SNE keeps two far clusters apart", d_in > 2 * spread, f"{d_in:.1f} vs {spread:.1f}")


def matching(rng):
    print("matching")
    from vastml.matching import ConvexKernelizedSorting

    X = rng.normal(size=(30, 2)) * [3, 1]
    perm = rng.permutation(30)
    m = ConvexKernelizedSorting(kernel="linear").fit(X, X[perm]).match_
    check("CKS match is a permutation", sorted(m) == list(range(30)))


def distributed(rng):
    print("distributed (dask local scheduler)")
    from vastml.distributed import AROWMapReduce, sharded_gauss_transform
    from vastml.kernels import gauss_transform

    X = rng.normal(size=(1000, 4))
    y = np.where(X @ [1.0, -2.0, 0.5, 1.0] > 0, 1, -1)
    acc = AROWMapReduce(n_partitions=2, random_state=0).fit(X, y).score(X, y)
    check("AROWMapReduce on 2 partitions", acc > 0.9, f"accuracy {acc:.3f}")
    x, t, q = rng.uniform(size=(800, 2)), rng.uniform(size=(300, 2)), rng.uniform(size=800)
    g = sharded_gauss_transform(x, t, q, bandwidth=0.3, epsilon=1e-6)
    ref = gauss_transform(x, t, q, bandwidth=0.3, epsilon=1e-6, method="direct")
    err = np.abs(np.asarray(g) - ref).max() / q.sum()
    check("sharded_gauss_transform vs one machine", err <= 2e-6, f"error {err:.1e}")


def datasets():
    print("datasets")
    from vastml.datasets import make_gaussian_mixture, make_marron_wand, make_waveform, marron_wand_pdf

    X = make_gaussian_mixture(500, 3, random_state=0)
    check("make_gaussian_mixture shape", X.shape == (500, 3))
    Xw, yw = make_waveform(300, random_state=0)
    check("make_waveform: 21 features, 3 classes", Xw.shape == (300, 21) and set(yw) == {0, 1, 2})
    grid = np.linspace(-4, 4, 8001)
    mass = marron_wand_pdf(2, grid).sum() * (grid[1] - grid[0])
    check("Marron-Wand density integrates to 1", abs(mass - 1) < 1e-3, f"{mass:.5f}")
    check("make_marron_wand", make_marron_wand(2, 100, random_state=0).shape[0] == 100)


def main():
    t0 = time.perf_counter()
    imports()
    for area in (kernels, reorder, svm, embed, matching, distributed):
        area(np.random.default_rng(0))
    datasets()
    print(f"smoke test passed in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
