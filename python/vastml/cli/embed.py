"""``vastml embed FILE`` and the embedding part of ``vastml demo``."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

ESTIMATORS = ("tsne", "ee", "ssne")


def add_embed_parser(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser("embed", help="embed the rows of a numeric file in 2-D (t-SNE, EE, s-SNE)")
    e.add_argument("file", help=".npy, or .csv / .txt / .tsv of numbers (one row per point)")
    e.add_argument("--method", choices=ESTIMATORS, default="tsne", help="embedding (default tsne)")
    e.add_argument("--perplexity", type=float, default=30.0)
    e.add_argument("--lam", type=float, default=1.0, help="EE repulsion weight lambda")
    e.add_argument("--max-iter", type=int, default=1000)
    e.add_argument("--labels", default=None, help="file of one label per row (colours the plot)")
    e.add_argument(
        "--label-column",
        type=int,
        default=None,
        help="use this column of FILE as labels (and drop it from the data)",
    )
    e.add_argument(
        "--delimiter",
        default=None,
        help="text delimiter (default: comma for .csv, whitespace otherwise)",
    )
    e.add_argument("--skip-header", type=int, default=0, help="header lines to skip in text files")
    e.add_argument(
        "--out", default=None, help="coordinates file (.npy or .csv; default FILE-embedding.csv)"
    )
    e.add_argument(
        "--plot", default=None, help="scatter PNG (default FILE-embedding.png; 'none' to skip)"
    )
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--n-jobs", type=int, default=None)
    e.set_defaults(func=run_embed)


def _load(path: Path, delimiter: str | None, skip_header: int) -> np.ndarray:
    if path.suffix == ".npy":
        return np.load(path, allow_pickle=False)
    if delimiter is None and path.suffix == ".csv":
        delimiter = ","
    if delimiter is None and path.suffix == ".tsv":
        delimiter = "\t"
    return np.loadtxt(path, delimiter=delimiter, skiprows=skip_header, ndmin=2)


def _estimator(name, args):
    from vastml.embed import TSNE, ElasticEmbedding, SymmetricSNE

    common = dict(perplexity=args.perplexity, random_state=args.seed, n_jobs=args.n_jobs)
    if name == "tsne":
        return TSNE(max_iter=args.max_iter, **common)
    if name == "ssne":
        return SymmetricSNE(max_iter=args.max_iter, **common)
    return ElasticEmbedding(repulsion_weight=args.lam, max_iter=args.max_iter, **common)


def scatter(Y, labels, path, title):
    """Writes a scatter PNG of the 2-D embedding coloured by labels; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 7))
    if labels is None:
        ax.scatter(Y[:, 0], Y[:, 1], s=3, color="k", alpha=0.6)
    else:
        uniq, codes = np.unique(labels, return_inverse=True)
        sc = ax.scatter(
            Y[:, 0], Y[:, 1], s=3, c=codes, cmap="tab10" if len(uniq) <= 10 else "tab20"
        )
        if len(uniq) <= 20:
            handles = [
                plt.Line2D([], [], ls="", marker="o", color=sc.cmap(sc.norm(i)))
                for i in range(len(uniq))
            ]
            ax.legend(handles, [str(u) for u in uniq], loc="best", fontsize=7, markerscale=1.5)
    ax.set_title(title)
    ax.set_xticks([])
    ax.set_yticks([])
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def run_embed(args: argparse.Namespace) -> int:
    path = Path(args.file)
    X = _load(path, args.delimiter, args.skip_header)
    labels = None
    if args.label_column is not None:
        labels = X[:, args.label_column]
        X = np.delete(X, args.label_column, axis=1)
    if args.labels is not None:
        labels = np.loadtxt(args.labels, dtype=str, ndmin=1)
        if len(labels) != len(X):
            raise SystemExit(f"--labels has {len(labels)} entries for {len(X)} rows")
    est = _estimator(args.method, args)
    t0 = time.perf_counter()
    Y = est.fit_transform(X)
    dt = time.perf_counter() - t0
    score = getattr(est, "kl_divergence_", getattr(est, "objective_", float("nan")))
    print(
        f"{args.method}: {len(X):,} points x {X.shape[1]} features in {dt:.2f} s (objective {score:.4g})"
    )
    out = Path(args.out) if args.out else path.with_name(path.stem + "-embedding.csv")
    if out.suffix == ".npy":
        np.save(out, Y)
    else:
        np.savetxt(out, Y, delimiter=",", header="x,y" if Y.shape[1] == 2 else "", comments="")
    print(f"coordinates written to {out}")
    if args.plot != "none":
        png = Path(args.plot) if args.plot else path.with_name(path.stem + "-embedding.png")
        if scatter(
            Y, labels, png, f"{args.method} of {path.name} (perplexity {args.perplexity:g})"
        ):
            print(f"plot written to {png}")
        else:
            print("(matplotlib is not installed: no plot; pip install 'vastml[plot]')")
    return 0


def demo_section(args: argparse.Namespace, number: int) -> None:
    """t-SNE of the scikit-learn digits, with a scatter PNG next to the demo's plot."""
    from sklearn.datasets import load_digits

    from vastml.embed import TSNE, entropic_affinities

    d = load_digits()
    X, y = (d.data[:600], d.target[:600]) if args.quick else (d.data, d.target)
    print(f"\n{number}. t-SNE of {len(X):,} scikit-learn digits (64-D)")
    t0 = time.perf_counter()
    _, _, info = entropic_affinities(X, perplexity=30)
    print(
        f"   entropic affinities (perplexity 30): {time.perf_counter() - t0:.2f} s, "
        f"{info['evaluations'].mean():.2f} entropy evaluations per point"
    )
    t0 = time.perf_counter()
    tsne = TSNE(perplexity=30, random_state=args.seed, max_iter=300 if args.quick else 1000).fit(X)
    print(f"   t-SNE: {time.perf_counter() - t0:.2f} s, KL {tsne.kl_divergence_:.3f}")
    png = Path(args.out).with_name(Path(args.out).stem + "-embed.png")
    if scatter(tsne.embedding_, y, png, f"t-SNE of the digits (KL {tsne.kl_divergence_:.3f})"):
        print(f"   plot written to {png}")
