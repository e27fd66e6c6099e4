"""``vastml order FILE``: order the rows of a numeric table by TSP-means (or EM-ordering) and
write the ordered table and a heatmap PNG (with a class column when labels are given)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np


def save_heatmap(
    path: str | Path,
    X: np.ndarray,
    labels: np.ndarray | None = None,
    *,
    title: str = "",
    max_rows: int = 1000,
    order: np.ndarray | None = None,
) -> None:
    """Heatmap of ``X`` (rows in their given order, columns seriated, features z-scored) with a
    class bar when ``labels`` are given, shrunk to at most ``max_rows`` pixel rows by block
    means; the y axis counts data rows and says how many a pixel row holds. ``order``: draw the
    rows in this order instead (no copy of ``X``). Needs matplotlib."""
    from vastml.reorder._heatmap import heatmap

    X = np.asarray(X, dtype=float)
    heatmap(X, row_order=np.arange(X.shape[0]) if order is None else order, row_colors=labels, max_size=(max_rows, 1000),
            title=title, path=path, figsize=(7, 7))


def _load(path: Path) -> np.ndarray:
    if path.suffix.lower() == ".npy":
        return np.load(path, allow_pickle=False)
    try:
        import pandas as pd
    except ImportError:
        return np.loadtxt(path, delimiter=",", ndmin=2)
    # pandas' C parser reads a million-row table many times faster than np.loadtxt
    return pd.read_csv(path, header=None, dtype=np.float64).to_numpy()


def _standardized(X: np.ndarray) -> np.ndarray:
    """Z-scored columns (constant columns centred only) with one (n, d) temporary."""
    Xs = X - X.mean(0)
    sd = np.sqrt(np.einsum("ij,ij->j", Xs, Xs) / X.shape[0])
    Xs /= np.where(sd > 0, sd, 1.0)
    return Xs


def _save_rows(path: str | Path, T: np.ndarray, order: np.ndarray) -> None:
    """``np.save(path, T[order])`` written in chunks of rows, without the ordered copy."""
    out = np.lib.format.open_memmap(path, mode="w+", dtype=T.dtype, shape=T.shape)
    for s in range(0, T.shape[0], 65_536):
        out[s:s + 65_536] = T[order[s:s + 65_536]]
    out.flush()
    del out


def run_order(args: argparse.Namespace) -> int:
    from vastml.reorder import EMOrdering, TSPMeans, figure_of_merit, path_length
    from vastml.cli._common import atomic_write

    path = Path(args.file)
    try:
        if not path.exists():
            raise ValueError(f"{path}: no such file")
        T = np.asarray(_load(path), dtype=float)
        if T.ndim != 2 or T.shape[0] < 1:
            raise ValueError(f"{path}: expected a 2-D table, got shape {T.shape}")
        labels = None
        if args.label_column is not None:
            c = args.label_column
            if not -T.shape[1] <= c < T.shape[1]:
                raise ValueError(f"--label-column {c} is outside the {T.shape[1]} columns")
            labels = T[:, c]
            X = np.delete(T, c % T.shape[1], axis=1)
        else:
            X = T
        if X.shape[1] == 0:
            raise ValueError("no feature columns left")
        if not np.isfinite(X).all():
            raise ValueError(f"{path}: the table contains NaN or infinite values")
        t0 = time.perf_counter()
        if args.em:
            est = EMOrdering(max_iter=args.em, random_state=args.seed, n_jobs=args.n_jobs).fit(X)
        else:
            Xs = _standardized(X) if args.standardize else X
            est = TSPMeans(levels=args.levels, random_state=args.seed, n_jobs=args.n_jobs).fit(Xs)
        dt = time.perf_counter() - t0
    except (ValueError, TypeError, OSError) as exc:
        print(f"vastml order: error: {exc}", file=sys.stderr)
        return 2
    order = est.order_
    ext = ".npy" if path.suffix.lower() == ".npy" else ".csv"
    out = Path(args.out) if args.out else path.with_name(path.stem + ".ordered" + ext)
    if ext == ".npy":
        atomic_write(out, lambda p: _save_rows(p, T, order))
    else:
        atomic_write(out, lambda p: np.savetxt(p, T[order], delimiter=",", fmt="%.10g"))
    np.savetxt(out.with_suffix(".order.txt"), order, fmt="%d")
    msg = f"{path}: {X.shape[0]} rows x {X.shape[1]} features ordered in {dt:.2f} s, L = {path_length(X, order):.4g}"
    if labels is not None and X.shape[0] > 1:
        msg += f", FOM {figure_of_merit(labels):.3f} -> {figure_of_merit(labels, order):.3f}"
    print(msg)
    print(f"wrote {out} (and {out.with_suffix('.order.txt').name})")
    png = out.with_suffix(".png")
    try:
        atomic_write(png, lambda p: save_heatmap(p, X, labels, order=order,
                                                  title=f"{path.name} ordered"))
        print(f"wrote {png}")
    except ImportError:
        print("(matplotlib is not installed: no PNG written)")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("order", help="order the rows of a numeric table for a heatmap (TSP-means)")
    r.add_argument("file", help="numeric table: .csv (comma separated) or .npy")
    r.add_argument("--label-column", type=int, default=None,
                   help="column holding class labels (e.g. -1 for the last); drawn beside the heatmap")
    r.add_argument("--levels", type=int, default=None, help="TSP-means subtree depth l")
    r.add_argument("--em", type=int, default=0, help="EM-ordering with this many iterations")
    r.add_argument("--no-standardize", dest="standardize", action="store_false")
    r.add_argument("--n-jobs", type=int, default=None)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--out", default=None, help="output table (default FILE.ordered.EXT)")
    r.set_defaults(func=run_order)


def demo(args: argparse.Namespace) -> int:
    """Waveform data with noise features, shuffled, ordered by EM-ordering; heatmap PNG."""
    from vastml.datasets import make_waveform
    from vastml.reorder import EMOrdering, TSPMeans, figure_of_merit

    n = 600 if args.quick else 1500
    X, y = make_waveform(n, noise_features=21, random_state=args.seed)
    print(f"\n9. Ordering rows for a heatmap: waveform, {n} rows, 21 signal + 21 noise features")
    t0 = time.perf_counter()
    Xz = (X - X.mean(0)) / X.std(0)
    tm = TSPMeans(random_state=args.seed).fit(Xz)
    t1 = time.perf_counter()
    em = EMOrdering(max_iter=5, random_state=args.seed).fit(X)
    t2 = time.perf_counter()
    print(f"   FOM: shuffled {figure_of_merit(y):.3f}, TSP-means {figure_of_merit(y, tm.order_):.3f} "
          f"({t1 - t0:.2f} s), EM-5 {figure_of_merit(y, em.order_):.3f} ({t2 - t1:.2f} s; "
          f"{int((~em.active_[21:]).sum())}/21 noise features dropped)")
    try:
        out = Path(args.out).with_name(Path(args.out).stem + "-order.png")
        save_heatmap(out, X[em.order_], y[em.order_], title="waveform + noise, EM-ordering")
        print(f"   heatmap written to {out}")
    except ImportError:
        pass
    return 0
