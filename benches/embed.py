"""Benchmark of vastml.embed against openTSNE and scikit-learn.

Rows (peers run in the same process, right after ours; read the ratios, not the seconds):

- ``affinities``: entropic affinities on a shared exact kNN graph (k = 90 = 3 x perplexity 30),
  ours (Euler steps in log beta, density order) + symmetrisation vs openTSNE's perplexity
  calibration ``joint_probabilities_nn``; mean entropy evaluations per point. Target: >= 3x.
- ``t-SNE``: ``vastml.embed.TSNE()`` (defaults) vs ``openTSNE.TSNE(n_jobs=2)`` and
  ``sklearn.manifold.TSNE()``, on the digits and on a 50-D mixture of 10 Gaussian blobs
  (20,000 points; with --quick only 800 digits). KL: each library's own report, and the exact
  KL(P||Q) of every embedding under our P (the fair comparison). Target: exact KL <= the
  better peer's (+1 %) in <= half the faster peer's time.
- ``homotopy``: EE homotopy (thesis §3.6) on a COIL-20 substitute (``--homotopy-data``,
  default ``turntable``: 10 rendered solids turning about the vertical axis in 5-degree steps,
  128 x 128, 720 points; ``digits``: the earlier in-plane rotated digits; see ``coil_like``),
  with the data statistics the thesis's counts depend on (loop separation, W+ mass between
  objects, 4L+'s small eigenvalues), spectral direction vs fixed point, objective
  evaluations (thesis Table 3.1: 5,183 vs 26,219; target >= 4x fewer for SD), three rows:
  the thesis rule (each lambda stops on a relative decrease < tol: not equal accuracy, the
  slower method stops at a higher E), equal E (FP runs each lambda until it reaches SD's
  E(lambda) (1 + ``--homotopy-margin``)), and same start at the last lambda (both from SD's
  end point, ``--homotopy-conv-iter`` iterations; evaluations until E is within 1e-6 and
  1e-7 of the lowest E). Procrustes gap of the two final embeddings. --quick: 10 values of
  lambda, tol 1e-5, 300 iterations. ``--rows homotopy`` runs only these.
- ``1M``: not run by default (``--big``; ``--only-big`` runs nothing else): Barnes-Hut t-SNE
  of 1,000,000 10-D points (make_blobs, 10 centres) in a subprocess, TSNE defaults (kNN by
  vastml's approximate kd-tree from 200,000 points, 750 iterations): wall and CPU seconds,
  the kNN + affinities stage, peak RSS. Target < 15 min and < 4 GB. ``--big-n N`` runs
  the same row at N points (no targets checked), e.g. 200,000 for a smoke run.
  ``--only-big-affinities``: only the stage before the descent at ``--big-n`` points (kNN,
  affinities, symmetrisation; wall, CPU and peak RSS, kNN recall on 200 sampled rows against
  brute force, max |H - log K|). Target: <= ~80 s wall / ~150 s CPU at 1M.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from _harness import Bench, Timing
from scipy import ndimage
from sklearn.datasets import load_digits, make_blobs
from sklearn.neighbors import NearestNeighbors
from vastml.embed import (
    TSNE,
    EmbeddingObjective,
    entropic_affinities,
    homotopy,
    minimize,
    symmetrize,
)

PERPLEXITY = 30
K = 90


def log(msg):
    print(f"[embed] {msg}", file=sys.stderr, flush=True)


def blobs(n):
    X, y = make_blobs(n_samples=n, n_features=50, centers=10, cluster_std=2.0, random_state=0)
    return X, y


COIL_SIZE = 128  # COIL-20's 128 x 128 grey images: D = 16,384
SK_IMAGES = (  # scikit-image's bundled sample pictures (no download)
    "camera",
    "astronaut",
    "coffee",
    "chelsea",
    "coins",
    "moon",
    "horse",
    "rocket",
    "clock",
    "logo",
)


def _disk(size=COIL_SIZE):
    r = (size - 1) / 2
    yy, xx = np.mgrid[:size, :size]
    return (yy - r) ** 2 + (xx - r) ** 2 <= r**2


def _rotated_views(images, n_views):
    """Each image rotated in the image plane in 360 / n_views degree steps (closed loops)."""
    return np.array(
        [
            ndimage.rotate(im, 360 * v / n_views, reshape=False, order=1).ravel()
            for im in images
            for v in range(n_views)
        ]
    )


def _sk_image(name, size=COIL_SIZE):
    """A scikit-image sample image: grey in [0, 1], central square crop, size x size."""
    import skimage.data
    from skimage.color import rgb2gray, rgba2rgb
    from skimage.transform import resize

    im = getattr(skimage.data, name)()
    if im.ndim == 3 and im.shape[2] == 4:
        im = rgba2rgb(im, background=(0, 0, 0))
    if im.ndim == 3:
        im = rgb2gray(im)
    im = im.astype(float)
    im = (im - im.min()) / (im.max() - im.min())
    if name == "horse":  # a black horse on white: inverted, an object on black
        im = 1 - im
    h, w = im.shape
    s = min(h, w)
    im = im[(h - s) // 2 : (h - s) // 2 + s, (w - s) // 2 : (w - s) // 2 + s]
    return resize(im, (size, size), anti_aliasing=True)


def _turntable(n_objects, n_views, seed=0, n_phi=720, n_y=192, tex_sigma=3.0, blur=0.6):
    """COIL-style renders: 10 textured solids on black, each turning about the vertical axis.

    Each object is a surface r(phi, y) about the vertical axis (can, box, vase, cone, ball,
    bottle profiles; the round ones with a random low-order lobe pattern so that turning
    changes the silhouette), with a scikit-image sample picture (smoothed by ``tex_sigma``
    texels, as labels and paint are at COIL's resolution) wrapped around it as albedo, a
    random overall brightness, Lambertian shading under one light, scaled to fill the frame,
    rendered orthographically by z-buffered point splatting and smoothed by ``blur`` pixels.
    The camera is fixed and the object turns in 360 / n_views degree steps, like COIL-20's
    turntable.
    """
    from skimage.transform import resize

    size = COIL_SIZE
    rng = np.random.default_rng(seed)
    phi, y = np.meshgrid(np.linspace(0, 2 * np.pi, n_phi, endpoint=False), np.linspace(-1, 1, n_y))
    t = (y + 1) / 2  # 0 at the bottom, 1 at the top
    profiles = {
        "can": 0.55 + 0 * t,
        "vase": 0.35 + 0.25 * np.sin(np.pi * (0.2 + 1.3 * t)),
        "cone": 0.15 + 0.5 * (1 - t),
        "ball": 0.7 * np.sqrt(np.clip(1 - y**2, 0.02, None)),
        "bottle": np.where(t < 0.6, 0.45, 0.45 - 0.3 * np.clip((t - 0.6) / 0.2, 0, 1)),
    }
    kinds = ["can", "box", "vase", "cone", "ball", "bottle", "box", "can", "vase", "ball"]
    light = np.array([0.35, 0.45, 0.82])
    light /= np.linalg.norm(light)
    out = []
    for k in range(n_objects):
        kind = kinds[k % len(kinds)]
        if kind == "box":  # rectangular cross-section, 0.62 x 0.38 (x 0.9)
            r = 0.9 / np.maximum(np.abs(np.cos(phi)) / 0.62, np.abs(np.sin(phi)) / 0.38)
        else:
            amp, ph = rng.uniform(0.05, 0.25, 3), rng.uniform(0, 2 * np.pi, 3)
            lobes = sum(amp[j] * np.cos((j + 1) * phi + ph[j]) for j in range(3))
            r = profiles[kind] * (1 + lobes / 2)
        tex = resize(_sk_image(SK_IMAGES[k % len(SK_IMAGES)]), (n_y, n_phi), anti_aliasing=True)
        tex = ndimage.gaussian_filter(
            tex[::-1], (tex_sigma, tex_sigma * n_phi / n_y / 2), mode=("nearest", "wrap")
        )
        albedo = ((0.25 + 0.75 * tex) * rng.uniform(0.5, 1.0)).ravel()
        pts = np.stack([r * np.sin(phi), y, r * np.cos(phi)], -1)  # y up, camera on +z
        nrm = np.cross(np.gradient(pts, axis=0), np.roll(pts, -1, 1) - np.roll(pts, 1, 1))
        nrm /= np.linalg.norm(nrm, axis=-1, keepdims=True) + 1e-12
        pts, nrm = pts.reshape(-1, 3), nrm.reshape(-1, 3)
        rmax = np.hypot(pts[:, 0], pts[:, 2]).max()
        scale = 0.46 * size / max(rmax, 1 / 0.95)  # the object fills the frame
        for v in range(n_views):
            c, s = np.cos(2 * np.pi * v / n_views), np.sin(2 * np.pi * v / n_views)
            x, z = c * pts[:, 0] + s * pts[:, 2], -s * pts[:, 0] + c * pts[:, 2]
            nx, nz = c * nrm[:, 0] + s * nrm[:, 2], -s * nrm[:, 0] + c * nrm[:, 2]
            vis = nz > 0  # faces turned to the camera
            col = np.round((size - 1) / 2 + scale * x[vis]).astype(int)
            row = np.round((size - 1) / 2 - scale * 0.95 * pts[vis, 1]).astype(int)
            lit = nx[vis] * light[0] + nrm[vis, 1] * light[1] + nz[vis] * light[2]
            shade = albedo[vis] * (0.15 + 0.85 * np.clip(lit, 0, None))
            depth = z[vis]
            ok = (col >= 0) & (col < size) & (row >= 0) & (row < size)
            pix, shade, depth = row[ok] * size + col[ok], shade[ok], depth[ok]
            o = np.lexsort((-depth, pix))  # per pixel, the nearest point first
            pix, shade = pix[o], shade[o]
            first = np.r_[True, pix[1:] != pix[:-1]]
            im = np.zeros(size * size)
            im[pix[first]] = shade[first]
            out.append(ndimage.gaussian_filter(im.reshape(size, size), blur).ravel())
    return np.array(out)


COIL_DATA = ("turntable", "digits", "digits128", "skimage")


def coil_like(kind="turntable", n_objects=10, n_views=72):
    """A COIL-20 substitute (spec §6): n_objects x n_views views forming closed 1-D loops.

    - ``turntable`` (the default): 128 x 128 renders of 10 textured solids turning about the
      vertical axis on a black background, as COIL-20's objects do (:func:`_turntable`).
    - ``digits``: the first image of each digit class zoomed to 32 x 32, padded to 48 x 48,
      rotated in the image plane (the data of the earlier rows; D = 2,304).
    - ``digits128``: the same digits zoomed to 88 x 88 inside a 128 x 128 disk, in-plane.
    - ``skimage``: 10 scikit-image sample pictures, grey, 128 x 128, cut to a disk (so that
      rotation adds no corner artefacts), in-plane.
    """
    if kind == "turntable":
        return _turntable(n_objects, n_views)
    if kind == "skimage":
        disk = _disk()
        return _rotated_views([_sk_image(n) * disk for n in SK_IMAGES[:n_objects]], n_views)
    d = load_digits()
    firsts = [d.images[np.where(d.target == k)[0][0]] for k in range(n_objects)]
    if kind == "digits":
        return _rotated_views([np.pad(ndimage.zoom(im, 4, order=1), 8) for im in firsts], n_views)
    if kind == "digits128":
        pad, disk = (COIL_SIZE - 88) // 2, _disk()
        return _rotated_views(
            [np.pad(ndimage.zoom(im / 16, 11, order=1), pad) * disk for im in firsts], n_views
        )
    raise ValueError(f"unknown COIL-like data {kind!r}; one of {COIL_DATA}")


def offset_objects(Y, offset, n_views=72, seed=5):
    """Moves each object's views by its own random vector of length ``offset`` x the median
    distance between consecutive views: fewer affinities between objects, so a worse
    conditioned attraction (offset 4: smallest eigenvalue of 4 L+ 2.4e-6 instead of 5.4e-5)."""
    if not offset:
        return Y
    shift = np.random.default_rng(seed).normal(size=(len(Y) // n_views, Y.shape[1]))
    step = np.median(np.linalg.norm(Y[1:n_views] - Y[: n_views - 1], axis=1))
    shift *= offset * step / np.linalg.norm(shift, axis=1, keepdims=True)
    return Y + np.repeat(shift, n_views, axis=0)


def once(fn):
    t0 = time.perf_counter()
    v = fn()
    return Timing([time.perf_counter() - t0], v)


def bench_affinities(bench, name, X):
    dist, idx = NearestNeighbors(n_neighbors=K).fit(X).kneighbors()
    d2 = dist**2
    from openTSNE import affinity

    def ours():
        P, beta, info = entropic_affinities(knn=(d2, idx), perplexity=PERPLEXITY)
        return symmetrize(P), info

    def peer():
        return affinity.joint_probabilities_nn(idx, dist, [PERPLEXITY], symmetrize=True, n_jobs=2)

    row = bench.compare(f"affinities {name}", ours, {"openTSNE": peer}, {"N": len(X), "k": K})
    P, info = row.ours.value
    evals = float(info["evaluations"].mean())
    row.extra["evals/point"] = round(evals, 2)
    newton = entropic_affinities(knn=(d2, idx), perplexity=PERPLEXITY, method="newton")[2][
        "evaluations"
    ].mean()
    row.extra["steps/point euler/newton"] = f"{evals - 1:.2f}/{newton - 1:.2f}"

    row.extra["max |H-logK|"] = _max_entropy_gap(
        entropic_affinities(knn=(d2, idx), perplexity=PERPLEXITY)[0]
    )
    ratio = row.ratio("openTSNE")
    bench.check(
        f"affinities {name}: >= 3x openTSNE calibration", ratio >= 3, f"{ratio:.2f}x", row=row
    )
    bench.check(
        f"affinities {name}: <= 2.5 root-finding steps per point (Euler)",
        evals - 1 <= 2.5,
        f"{evals - 1:.2f}",
        row=row,
    )


def _max_entropy_gap(P):
    gaps = []
    for i in range(P.shape[0]):
        p = P.data[P.indptr[i] : P.indptr[i + 1]]
        p = p[p > 0]
        gaps.append(abs(-(p * np.log(p)).sum() - np.log(PERPLEXITY)))
    return float(max(gaps))


def bench_tsne(bench, name, X):
    import openTSNE
    from sklearn.manifold import TSNE as SkTSNE

    log(f"t-SNE {name}: ours")
    ours = once(lambda: TSNE(perplexity=PERPLEXITY, random_state=0).fit(X))
    log(f"t-SNE {name}: openTSNE")
    ot = once(lambda: openTSNE.TSNE(perplexity=PERPLEXITY, n_jobs=2, random_state=0).fit(X))
    log(f"t-SNE {name}: scikit-learn")
    sk = once(lambda: SkTSNE(perplexity=PERPLEXITY, random_state=0).fit(X))
    row = bench.compare(f"t-SNE {name}", ours, {"openTSNE": ot, "sklearn": sk}, {"N": len(X)})
    model = ours.value
    exact = EmbeddingObjective("tsne", model.affinities_)
    kl = {
        "ours": exact.kl_divergence(model.embedding_),
        "openTSNE": exact.kl_divergence(np.asarray(ot.value)),
        "sklearn": exact.kl_divergence(sk.value.embedding_),
    }
    row.extra["KL reported ours/oT/sk"] = (
        f"{model.kl_divergence_:.3f}/{ot.value.kl_divergence:.3f}/{sk.value.kl_divergence_:.3f}"
    )
    row.extra["KL exact (our P) ours/oT/sk"] = (
        f"{kl['ours']:.3f}/{kl['openTSNE']:.3f}/{kl['sklearn']:.3f}"
    )
    best = min(kl["openTSNE"], kl["sklearn"])
    fastest = min(row.peer_seconds("openTSNE"), row.peer_seconds("sklearn"))
    bench.check(
        f"t-SNE {name}: KL <= better peer's (+1%)",
        kl["ours"] <= 1.01 * best,
        f"{kl['ours']:.3f} vs {best:.3f}",
        row=row,
    )
    bench.check(
        f"t-SNE {name}: time <= 0.5x faster peer",
        row.ours.median <= 0.5 * fastest,
        f"{row.ours.median:.1f} s vs {fastest:.1f} s",
        row=row,
    )


def _procrustes_gap(A, B):
    """||B R - A|| / ||A|| for the best rotation R (both centred): 0 = same embedding."""
    from scipy.linalg import orthogonal_procrustes

    A = A - A.mean(axis=0)
    B = B - B.mean(axis=0)
    if not np.linalg.norm(A) > 0:  # A collapsed to a point (a path that never left X = 0)
        return float("inf")
    R, _ = orthogonal_procrustes(B, A)
    return float(np.linalg.norm(B @ R - A) / np.linalg.norm(A))


def _coil_stats(Y, W, n_views=72):
    """What makes COIL-20 hard for fixed point: each object is its own loop (the nearest view of
    another object is many view steps away; little of W+ joins two objects), so 4 L+ has
    small nonzero eigenvalues (the relative motions of the loops)."""
    from sklearn.metrics import pairwise_distances

    N = len(Y)
    lab = np.repeat(np.arange(N // n_views), n_views)
    D = pairwise_distances(Y)
    same = lab[:, None] == lab[None, :]
    i = np.arange(N)
    step = np.median(D[i, lab * n_views + (i % n_views + 1) % n_views])
    other = np.where(same, np.inf, D).min(axis=1)
    rank = np.argmax(~same[i[:, None], np.argsort(D, axis=1)[:, 1:]], axis=1) + 1
    Wd = W.toarray() if hasattr(W, "toarray") else np.asarray(W)
    ev = np.linalg.eigvalsh(4 * (np.diag(Wd.sum(axis=1)) - Wd))
    return {
        "nearest other object / view step (median)": f"{np.median(other) / step:.2f}",
        "rank of the nearest other-object view (median)": int(np.median(rank)),
        "W+ mass between objects": f"{Wd[~same].sum() / Wd.sum():.3f}",
        "4L+ eigenvalues 2-4 (x 1e-5)": "/".join(f"{e / 1e-5:.2g}" for e in ev[1:4]),
    }


def _evals_to(trace, level):
    """Evaluations until the first E <= level in a [(evaluations, E), ...] trace (None: never)."""
    return next((n for n, e in trace if e <= level), None)


def bench_homotopy(
    bench, quick, margin=1e-5, conv_iter=None, offset=0.0, data="turntable", neighbors=None
):
    """Three rows, all on one COIL-like problem (objective evaluations are counts: load does
    not change them, only the seconds):

    1. thesis rule: each method follows its own path, each lambda stopped by the relative
       decrease of E < tol (thesis Table 3.1's rule). Not equal accuracy: the slower method
       stops earlier, at a higher E.
    2. equal E: fixed point's path with each lambda run until E <= SD's E(lambda) (1 + margin),
       or 10^4 iterations: "evaluations to reach SD's accuracy".
    3. convergence at the last lambda from SD's end point (thesis §3.8 (a), same start):
       evaluations of each method until E is within 1e-6 (and 1e-8) relative of the lowest E
       either reaches in ``conv_iter`` iterations.
    """
    Y = offset_objects(coil_like(data), offset)
    # K = 20 as in the thesis; n_neighbors None: 3K = 60 (sparse); N - 1: the full affinities
    P, _, _ = entropic_affinities(Y, perplexity=20, n_neighbors=neighbors)
    # Normalised as in the thesis' reference COIL demo (W+ and W- each sum to 1): W+ / sum(W+)
    # and the uniform W- = 1 / (N (N - 1)) folded into lambda, so lambda = 1e-4 .. 1e2 means
    # what it means in the thesis (unnormalised, lambda = 100 is ~ N times more repulsion).
    W = symmetrize(P, "mean")
    W = W / W.sum()
    N = len(Y)
    stats = _coil_stats(Y, W)
    log(f"homotopy data {data}: {stats}")
    X0 = 1e-5 * np.random.default_rng(0).normal(size=(N, 2))
    n_lambdas, tol, max_iter = (10, 1e-5, 1000) if quick else (50, 1e-6, 10_000)
    conv_iter = conv_iter or (300 if quick else 3000)
    lambdas = np.logspace(-4, 2, n_lambdas) / (N * (N - 1))
    params = {
        "data": data,
        "N": N,
        "D": Y.shape[1],
        "lambdas": n_lambdas,
        "tol": tol,
        **({"offset": offset} if offset else {}),
        **({"neighbors": neighbors} if neighbors else {}),
    }

    def run(method, **kw):
        log(f"homotopy: {method} {sorted(kw)}")
        obj = EmbeddingObjective("ee", W)
        t = once(
            lambda: homotopy(
                obj, X0, lambdas=lambdas, method=method, tol=tol, max_iter=max_iter, **kw
            )
        )
        X, info = t.value
        log(
            f"homotopy: {method} {sorted(kw)}: {info['n_evaluations']} evaluations, "
            f"E = {info['objective'][-1]:.6f}, {t.median:.1f} s"
        )
        return t, X, info

    t_sd, X_sd, sd = run("spectral")
    t_fp, X_fp, fp = run("fp")
    ev_sd, ev_fp = sd["n_evaluations"], fp["n_evaluations"]
    row = bench.compare(
        f"homotopy EE (COIL-like {data}), thesis rule (own paths, unequal accuracy)",
        t_sd,
        {"vastml fp": t_fp},
        params,
        {
            "evals sd/fp": f"{ev_sd}/{ev_fp}",
            "ratio fp/sd": f"{ev_fp / ev_sd:.2f}x",
            "evals per lambda sd/fp": f"{ev_sd / n_lambdas:.0f}/{ev_fp / n_lambdas:.0f}",
            "E sd/fp": f"{sd['objective'][-1]:.6f}/{fp['objective'][-1]:.6f}",
            "step at last lambda sd/fp": f"{sd['last_step'][-1]:.3g}/{fp['last_step'][-1]:.3g}",
            "Procrustes gap sd-fp": f"{_procrustes_gap(X_sd, X_fp):.3f}",
            "thesis evals sd/fp": "5183/26219 (SD step ~0.1 at lambda=100)",
            **stats,
        },
    )
    bench.check(
        "homotopy thesis rule: SD >= 4x fewer evaluations than FP",
        ev_fp >= 4 * ev_sd,
        f"{ev_fp / max(ev_sd, 1):.2f}x",
        row=row,
    )

    E_sd = np.asarray(sd["objective"])
    t_eq, X_eq, eq = run("fp", targets=E_sd + margin * np.abs(E_sd))
    reached = sum(s == "target" for s in eq["stopped"])
    ev_eq = eq["n_evaluations"]
    row = bench.compare(
        f"homotopy EE (COIL-like {data}), equal E (FP to SD's E(lambda) within {margin:g})",
        t_sd,
        {"vastml fp": t_eq},
        {**params, "margin": margin},
        {
            "evals sd/fp": f"{ev_sd}/{ev_eq}",
            "ratio fp/sd": f"{ev_eq / ev_sd:.2f}x",
            "E sd/fp": f"{E_sd[-1]:.6f}/{eq['objective'][-1]:.6f}",
            "lambdas where FP reached SD's E": f"{reached}/{n_lambdas}",
            "Procrustes gap sd-fp": f"{_procrustes_gap(X_sd, X_eq):.3f}",
        },
    )
    bench.check(
        "homotopy equal E: SD >= 4x fewer evaluations than FP",
        ev_eq >= 4 * ev_sd,
        f"{ev_eq / max(ev_sd, 1):.2f}x",
        row=row,
    )

    # 3. Same start (SD's end point), the last lambda, run long: evaluations to a level.
    traces, times = {}, {}
    for method in ("spectral", "fp"):
        log(f"homotopy: convergence at the last lambda, {method}")
        obj = EmbeddingObjective("ee", W, repulsion_weight=lambdas[-1])
        count = [0]

        def f(X, obj=obj, count=count):
            count[0] += 1
            return obj(X)

        f.W = W
        trace = []
        t = once(
            lambda f=f, trace=trace, count=count: minimize(
                f,
                X_sd,
                method=method,
                tol=0.0,
                max_iter=conv_iter,
                center=True,
                callbacks=lambda it, E, X: trace.append((count[0], E)) and False,
            )
        )
        traces[method], times[method] = trace, t
    E_best = min(min(e for _, e in tr) for tr in traces.values())
    levels = {}
    for rel in (1e-6, 1e-7):
        level = E_best + rel * abs(E_best)
        levels[rel] = [_evals_to(traces[m], level) for m in ("spectral", "fp")]
    ev = levels[1e-6]
    # "never" counts as more than all the evaluations of that run
    fp_total = ev[1] if ev[1] is not None else traces["fp"][-1][0] + 1
    ok = ev[0] is not None and fp_total >= 4 * ev[0]
    row = bench.compare(
        f"EE ({data}) at the last lambda from SD's end point, {conv_iter} iterations each",
        times["spectral"],
        {"vastml fp": times["fp"]},
        {"N": N, "iterations": conv_iter},
        {
            "lowest E": f"{E_best:.8f}",
            "E after the runs sd/fp": (
                f"{traces['spectral'][-1][1]:.8f}/{traces['fp'][-1][1]:.8f}"
            ),
            **{
                f"evals to E* (1+{rel:g}) sd/fp": "/".join(
                    "never" if v is None else str(v) for v in vals
                )
                for rel, vals in levels.items()
            },
        },
    )
    bench.check(
        "last lambda, same start: SD >= 4x fewer evaluations than FP to E* (1+1e-6)",
        ok,
        "/".join("never" if v is None else str(v) for v in ev),
        row=row,
    )


DIRECTIONS = ("gd", "fp", "diagh", "cg", "sd-", "lbfgs", "spectral")


def _coil_ee(data):
    """The homotopy rows' COIL-like EE problem: W+ and W- each normalised to sum to 1."""
    Y = coil_like(data)
    P, _, _ = entropic_affinities(Y, perplexity=20)
    W = symmetrize(P, "mean")
    return W / W.sum(), len(Y)


def bench_directions(bench, quick, data="turntable", seconds=None):
    """Thesis §3.8 (a): every search direction from the same start to the same end point on
    the COIL-like data (EE, W+ and W- normalised as in the homotopy rows, lambda = 100).
    The start is the spectral direction's homotopy end point at lambda = 50 (so every method
    heads for the same minimum at lambda = 100); each method runs for ``seconds`` (60; 20
    quick); a row gives the seconds (and iterations) until E has made 99.9 % of the decrease
    from the start to the lowest E any method reached (and the seconds to 99 %). Thesis ordering: GD >> (FP, DiagH) >
    (CG, SD-) > (L-BFGS, SD)."""
    seconds = seconds or (20.0 if quick else 60.0)
    W, N = _coil_ee(data)
    scale = 1.0 / (N * (N - 1))
    obj = EmbeddingObjective("ee", W)
    X0 = 1e-5 * np.random.default_rng(0).normal(size=(N, 2))
    lams = np.logspace(-4, np.log10(50.0), 10 if quick else 40) * scale
    Xs, _ = homotopy(obj, X0, lambdas=lams, method="spectral", tol=1e-6, max_iter=2000)
    obj.repulsion_weight = 100.0 * scale
    traces = {}
    for m in DIRECTIONS:
        trace = []
        t0 = time.perf_counter()

        def cb(it, E, X, trace=trace, t0=t0):
            trace.append((time.perf_counter() - t0, it, float(E)))

        r = minimize(obj, Xs, method=m, max_iter=10**6, tol=1e-13, max_seconds=seconds,
                     callbacks=cb)
        traces[m] = (trace, r)
        log(f"directions {m}: {r.n_iter_} iterations, E = {r.objective:.8f}, {r.stop_reason}")
    # Levels relative to the decrease from the common start (the methods end at slightly
    # different points of one flat basin, so a relative-E level far below 1e-3 of the
    # decrease is reached by none in a short cap)
    E0 = float(obj(Xs)[0])
    E_min = min(r.objective for _, r in traces.values())
    t = {}
    for m, (trace, r) in traces.items():
        hits = []
        for frac in (1e-2, 1e-3):
            level = E_min + frac * (E0 - E_min)
            hits.append(next(((s, it) for s, it, e in trace if e <= level), None))
        t[m] = hits[1][0] if hits[1] else float("inf")
        bench.compare(
            f"directions {m} (COIL-like EE, lambda 100)",
            Timing([t[m] if hits[1] else float("nan")]),
            {},
            {"method": m, "N": N, "cap": f"{seconds:g} s"},
            {
                "s to 99 % of the decrease": f"{hits[0][0]:.2f}" if hits[0] else "> cap",
                "iterations to 99.9 %": hits[1][1] if hits[1] else f"> {r.n_iter_}",
                "evaluations (run)": r.n_evaluations,
                "final E": f"{r.objective:.8f}",
            },
        )
    ordered = sorted(t, key=t.get)
    log(f"directions: time order {ordered}")
    bench.check(
        "directions: GD slowest, L-BFGS and SD faster than FP and DiagH",
        t["gd"] >= max(v for k, v in t.items() if k != "gd")
        and max(t["lbfgs"], t["spectral"]) < min(t["fp"], t["diagh"]),
        " < ".join(f"{m} {t[m]:.1f}s" for m in ordered),
    )


def bench_schedules(bench, quick, n=4000, max_iter=100, step=0.3):
    """Thesis §5.7 (Fig. 5.3): swiss roll, EE lambda = 1e-4 (W+ = the symmetrised entropic
    affinities of perplexity 20, W- = 1), gradient descent with the fixed step 0.3 and the
    fast Gauss transform, 100 iterations from the same small random start: FGT order p fixed
    at 3, fixed at 10, increasing 1 -> 10 (the thesis schedule), decreasing 10 -> 1 (every
    10 iterations), and the exact gradient. E is computed exactly after the run (not by the
    optimiser). Thesis: the increasing schedule decreases E about as p = 10 does per
    iteration but faster; p = 3 and the decreasing schedule end higher."""
    from sklearn.datasets import make_swiss_roll

    from vastml.embed import accuracy_schedule

    Y, _ = make_swiss_roll(n, random_state=0)
    P, _, _ = entropic_affinities(Y, perplexity=20)
    W = symmetrize(P, "mean")
    X0 = 1e-2 * np.random.default_rng(0).normal(size=(n, 2))
    exact = EmbeddingObjective("ee", W, repulsion_weight=1e-4)
    runs = {
        "p = 3": ("fgt", [3]),
        "p = 10": ("fgt", [10]),
        "p 1 -> 10 (thesis)": ("fgt", accuracy_schedule("order")),
        "p 10 -> 1": ("fgt", np.repeat(np.arange(10, 0, -1), 10)),
        "exact": "exact",
    }
    out = {}
    for name, grad in runs.items():
        obj = EmbeddingObjective("ee", W, repulsion_weight=1e-4, gradient=grad)
        t = once(lambda obj=obj: minimize(obj, X0, method="gd", step=step, max_iter=max_iter))
        out[name] = (t, float(exact(t.value.X)[0]))
        log(f"schedules {name}: E = {out[name][1]:.6f}, {t.median:.1f} s")
    for name, (t, E) in out.items():
        bench.compare(
            f"swiss roll EE, GD 100 its: {name}",
            t,
            {},
            {"N": n, "iterations": max_iter, "step": step},
            {"E (exact)": f"{E:.6f}", "E0": f"{float(exact(X0)[0]):.6f}"},
        )
    E = {k: v[1] for k, v in out.items()}
    T = {k: v[0].median for k, v in out.items()}
    inc = "p 1 -> 10 (thesis)"
    bench.check(
        "schedules: increasing p reaches p = 10's E (within 1 %) faster, below p = 3's",
        E[inc] <= E["p = 10"] + 0.01 * abs(E["p = 10"]) and T[inc] < T["p = 10"]
        and E[inc] < E["p = 3"],
        f"E {E[inc]:.5f} vs {E['p = 10']:.5f} / {E['p = 3']:.5f}; {T[inc]:.1f} s vs {T['p = 10']:.1f} s",
    )


_TRANSFORM = """
import json, time, resource
import numpy as np
from sklearn.datasets import make_blobs
from sklearn.decomposition import PCA
from sklearn.neighbors import NearestNeighbors
from vastml.embed import TSNE
n, m = {n}, {m}
X, _ = make_blobs(n_samples=n + m, n_features=10, centers=10, cluster_std=2.0, random_state=0)
Xtr, Xnew = X[:n], X[n:]
del X
# the fitted embedding, built cheaply: a PCA layout of the training data scaled to the spread
# of a t-SNE of this size (std 30); the transform does not care how it was obtained
Y = PCA(2, random_state=0).fit_transform(Xtr)
Y *= 30.0 / Y[:, 0].std()
t = TSNE()
t.embedding_, t.n_features_in_ = Y, Xtr.shape[1]
t.nn_ = NearestNeighbors(n_neighbors=90, n_jobs=-1)
t._nn_X = Xtr
c0, t0 = time.process_time(), time.perf_counter()
Z = t.transform(Xnew)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
# the nearest training point of 200 new points (exact; outside the timed part: transform
# need not leave ``nn_`` fitted)
d, i = NearestNeighbors(n_neighbors=1).fit(Xtr).kneighbors(Xnew[:200])
gap = float(np.median(np.linalg.norm(Z[:200] - Y[i[:, 0]], axis=1)))
print(json.dumps({{"seconds": wall, "cpu": cpu, "finite": bool(np.isfinite(Z).all()),
                  "gap": gap}}))
"""


def bench_transform(bench, quick, n=None, m=10_000):
    """Out-of-sample ``TSNE.transform`` of ``m`` new points against an ``n``-point fitted
    embedding (default 1,000,000; 100,000 quick) in a subprocess: wall and CPU seconds of
    the whole transform (the first kNN query fits the neighbour index on the training data;
    then affinities, then the per-point objectives with the repulsion read from the training
    points' kernel fields on a grid), peak RSS. The fitted embedding is a PCA layout of the
    training data scaled to a t-SNE-like spread (the transform's cost does not depend on how
    it was obtained). Target (1M): < 30 s, no memory blow-up. openTSNE's ``prepare_partial``
    with k = 1 took about 4 minutes for 1.28M points on 32 threads (published)."""
    n = n or (100_000 if quick else 1_000_000)
    info = bench.run_isolated(_TRANSFORM.format(n=n, m=m), timeout=1800)
    if "error" in info:
        bench.skip(f"transform {m} new vs {n}", {"N": n, "M": m}, str(info["error"])[-200:])
        return
    row = bench.compare(
        f"transform {m} new vs {n} fitted (t-SNE, subprocess)",
        Timing([info["seconds"]]),
        {},
        {"N": n, "M": m},
        {
            "CPU": f"{info['cpu']:.0f} s",
            "peak RSS": f"{info['peak_rss_bytes'] / 1e9:.2f} GB",
            "median |x - x(nearest train)|": f"{info['gap']:.2f}",
        },
    )
    if n == 1_000_000:
        bench.check("transform 1M: < 30 s", info["seconds"] < 30, f"{info['seconds']:.0f} s", row=row)


_BIG = """
import json, resource, time, numpy as np
from sklearn.datasets import make_blobs
from vastml.embed import TSNE
X, _ = make_blobs(n_samples={n}, n_features=10, centers=10, random_state=0)
cpu = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
t, c = time.perf_counter(), cpu()
stages = {{}}
_aff = TSNE._affinities
def timed(self, X):  # the stage split (kNN + affinities), without a per-iteration callback
    t0, c0 = time.perf_counter(), cpu()
    P = _aff(self, X)
    stages["affinities"] = (time.perf_counter() - t0, cpu() - c0)
    return P
TSNE._affinities = timed
m = TSNE(perplexity=30, gradient="barnes_hut", random_state=0).fit(X)
print(json.dumps({{"seconds": time.perf_counter() - t, "cpu_seconds": cpu() - c,
                  "stages": stages, "n_iter": m.n_iter_, "kl": m.kl_divergence_}}))
"""

_BIG_AFF = """
import json, math, resource, time, numpy as np
from sklearn.datasets import make_blobs
from vastml.embed import entropic_affinities, symmetrize
from vastml.embed._affinities import KNN_APPROX_EPS, rust_knn
X, _ = make_blobs(n_samples={n}, n_features=10, centers=10, random_state=0)
cpu = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
st = {{}}
def run(name, f):
    t, c = time.perf_counter(), cpu()
    r = f()
    st[name] = (time.perf_counter() - t, cpu() - c)
    return r
d, i = run("kNN", lambda: rust_knn(X, 90, KNN_APPROX_EPS))
P, beta, info = run("affinities", lambda: entropic_affinities(knn=(d, i), perplexity=30, compact=True))
rows = np.random.default_rng(0).choice(X.shape[0], 200, replace=False)
hits, gap = 0, 0.0
for r in rows:  # recall against brute force; entropy of the float64 row at the found beta
    dd = ((X - X[r]) ** 2).sum(1)
    dd[r] = np.inf
    hits += np.isin(i[r], np.argpartition(dd, 90)[:90]).sum()
    p = np.exp(-beta[r] * (d[r] - d[r].min()))
    p /= p.sum()
    gap = max(gap, abs(-(p * np.log(p)).sum() - math.log(30)))
del d, i
S = run("symmetrize", lambda: symmetrize(P, "joint"))
print(json.dumps({{"stages": st, "recall": hits / (90 * len(rows)), "max_gap": gap,
                  "evals": float(info["evaluations"].mean()), "nnz": int(S.nnz)}}))
"""


def main(argv=None):
    def add_args(ap):
        ap.add_argument(
            "--n", type=int, default=None, help="blob points (default 20,000; 5,000 quick)"
        )
        ap.add_argument(
            "--tsne-digits",
            type=int,
            default=None,
            help="digits for the t-SNE row (default all 1,797; 800 quick)",
        )
        ap.add_argument("--big", action="store_true", help="also run the 1,000,000-point row")
        ap.add_argument("--skip-tsne", action="store_true", help="only affinities and homotopy")
        ap.add_argument("--only-big", action="store_true", help="run only the 1M row")
        ap.add_argument(
            "--only-big-affinities",
            action="store_true",
            help="run only the stage before t-SNE's descent at --big-n points (kNN, "
            "affinities, symmetrisation: wall, CPU, peak RSS, kNN recall, max |H - log K|)",
        )
        ap.add_argument(
            "--big-n", type=int, default=1_000_000, help="points of the --big row (default 1M)"
        )
        ap.add_argument(
            "--rows",
            default="all",
            help="comma-separated subset of affinities,tsne,homotopy (default all); also "
            "directions, transform, schedules (only when named)",
        )
        ap.add_argument(
            "--homotopy-margin",
            type=float,
            default=1e-5,
            help="equal-E row: FP runs to SD's E(lambda) (1 + margin)",
        )
        ap.add_argument(
            "--homotopy-conv-iter",
            type=int,
            default=None,
            help="iterations of the same-start run at the last lambda (3000; 300 quick)",
        )
        ap.add_argument(
            "--homotopy-data",
            default="turntable",
            choices=COIL_DATA,
            help="COIL-20 substitute of the homotopy rows (see coil_like; default turntable)",
        )
        ap.add_argument(
            "--homotopy-neighbors",
            type=int,
            default=None,
            help="neighbours of the affinities (default 60 = 3 x perplexity; 719: all)",
        )
        ap.add_argument(
            "--homotopy-offset",
            type=float,
            default=0.0,
            help="move each object's views apart by this x the view step (0: the data as is)",
        )

    bench = Bench("embed", argv, repeats=3, quick_repeats=1, add_args=add_args)
    a = bench.args
    n = a.n or (5000 if bench.quick else 20000)
    digits = load_digits().data
    Xb, _ = blobs(n)
    nd = a.tsne_digits or (800 if bench.quick else len(digits))
    jobs = [
        ("affinities digits", bench_affinities, (bench, "digits", digits)),
        (f"affinities blobs {n}", bench_affinities, (bench, f"blobs {n}", Xb)),
    ]
    if not a.skip_tsne:
        jobs.append((f"t-SNE digits {nd}", bench_tsne, (bench, f"digits {nd}", digits[:nd])))
        if not bench.quick:  # the blob t-SNE alone takes minutes for the three libraries
            jobs.append((f"t-SNE blobs {n}", bench_tsne, (bench, f"blobs {n}", Xb)))
    jobs.append(
        (
            "homotopy",
            bench_homotopy,
            (
                bench,
                bench.quick,
                a.homotopy_margin,
                a.homotopy_conv_iter,
                a.homotopy_offset,
                a.homotopy_data,
                a.homotopy_neighbors,
            ),
        )
    )
    if a.rows != "all":
        wanted = {r.strip() for r in a.rows.split(",")}
        jobs = [j for j in jobs if j[0].split()[0].replace("t-SNE", "tsne") in wanted]
        # rows run only when asked for (not part of "all", so --quick keeps its time)
        if "directions" in wanted:
            jobs.append(("directions", bench_directions, (bench, bench.quick, a.homotopy_data)))
        if "schedules" in wanted:
            jobs.append(("schedules", bench_schedules, (bench, bench.quick)))
        if "transform" in wanted:
            jobs.append(("transform", bench_transform, (bench, bench.quick)))
    if a.only_big:
        a.big, jobs = True, []
    if a.only_big_affinities:
        jobs = []
        nb = a.big_n
        info = bench.run_isolated(_BIG_AFF.format(n=nb), timeout=3600)
        if "error" in info:
            bench.skip("1M stage before the descent", {"N": nb}, str(info["error"])[-200:])
        else:
            st = info["stages"]
            wall, cpu = (sum(v[j] for v in st.values()) for j in (0, 1))
            bench.compare(
                "1M stage before the descent (kNN + affinities + symmetrisation)",
                Timing([wall]),
                {},
                {"N": nb},
                {
                    **{f"{k}": f"{v[0]:.1f} s wall / {v[1]:.1f} s CPU" for k, v in st.items()},
                    "CPU": f"{cpu:.0f} s",
                    "peak RSS": f"{info['peak_rss_bytes'] / 1e9:.2f} GB",
                    "kNN recall (200 rows)": f"{info['recall']:.4f}",
                    "max |H - log K| (200 rows)": f"{info['max_gap']:.1e}",
                    "evaluations per point": f"{info['evals']:.2f}",
                    "nnz P": info["nnz"],
                },
            )
    for tag, fn, args in jobs:
        log(tag)
        try:
            fn(*args)
        except Exception as e:  # keep the other rows; a failure is a missed target
            bench.check(f"{tag}: row ran", False, f"{type(e).__name__}: {e}"[:300])
            log(f"{tag}: {type(e).__name__}: {e}")
    if a.big:
        nb = a.big_n
        info = bench.run_isolated(_BIG.format(n=nb), timeout=3600)
        if "error" in info:
            bench.skip(
                "t-SNE 1M (subprocess)", {"N": nb}, "failed: " + str(info["error"])[-200:]
            )
        else:
            aff_wall, aff_cpu = info["stages"].get("affinities", (float("nan"),) * 2)
            row = bench.compare(
                "t-SNE 1M (subprocess)",
                Timing([info["seconds"]]),
                {},
                {"N": nb},
                {
                    "peak RSS": f"{info['peak_rss_bytes'] / 1e9:.2f} GB",
                    "CPU": f"{info['cpu_seconds']:.0f} s",
                    "kNN+affinities": f"{aff_wall:.0f} s wall / {aff_cpu:.0f} s CPU",
                    "iterations": info["n_iter"],
                    "KL": f"{info['kl']:.4f}",
                },
            )
            if nb == 1_000_000:  # the targets hold for the 1M row only
                bench.check(
                    "1M: < 15 min", info["seconds"] < 900, f"{info['seconds']:.0f} s", row=row
                )
                bench.check("1M: < 4 GB", info["peak_rss_bytes"] < 4e9, row=row)
    else:
        bench.skip("t-SNE 1M (subprocess)", {"N": 1_000_000}, "not run (use --big)")
    return bench.report()


if __name__ == "__main__":
    sys.exit(main())
