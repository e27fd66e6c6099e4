"""``vastml reorder FILE`` and the reordering part of ``vastml demo``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from vastml.cli._common import atomic_write


def _kernel_size(text: str) -> int | tuple[int, int]:
    parts = text.lower().replace("×", "x").split("x")
    try:
        sizes = [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"--kernel-size must be like 25 or 29x5, got {text!r}") from None
    if len(sizes) == 1:
        return sizes[0]
    if len(sizes) == 2:
        return (sizes[0], sizes[1])
    raise ValueError(f"--kernel-size must be like 25 or 29x5, got {text!r}")


def run_reorder(args: argparse.Namespace) -> int:
    from vastml.reorder import ConvoMap, load_matrix, save_matrix, save_png

    path = Path(args.file)
    try:
        M = load_matrix(path)
        if M.ndim != 2:
            raise ValueError(f"{path}: expected a 2-D matrix, got shape {M.shape}")
        categorical = {"auto": None, "yes": True, "no": False}[args.categorical]
        cm = ConvoMap(
            kernel=args.kernel,
            kernel_size=_kernel_size(args.kernel_size),
            padding=args.padding,
            method=args.method,
            max_iter=args.max_iter,
            categorical=categorical,
            recolor=bool(getattr(args, "recolor", False)),
            verbose=bool(getattr(args, "verbose", False)),
            n_jobs=args.n_jobs,
            random_state=args.seed,
        )
        cm._params()  # validate everything before the work starts
        t0 = time.perf_counter()
        R = cm.fit_transform(M)
        dt = time.perf_counter() - t0
    except (ValueError, TypeError) as exc:
        print(f"vastml reorder: error: {exc}", file=sys.stderr)
        return 2
    ext = path.suffix.lower() if path.suffix.lower() in (".npy", ".backup") else ".csv"
    out = Path(args.out) if args.out else path.with_name(path.stem + ".reordered" + ext)
    png = out.with_suffix(".png")
    atomic_write(out, lambda p: save_matrix(p, R))
    print(f"{path}: {M.shape[0]} x {M.shape[1]}, error {cm.initial_error_:.1f} -> {cm.error_:.1f} in {dt:.2f} s")
    for step, e in cm.history_:
        print(f"  {step:<16} {e:12.1f}")
    np.savetxt(out.with_suffix(".rows.txt"), cm.row_order_, fmt="%d")
    np.savetxt(out.with_suffix(".cols.txt"), cm.col_order_, fmt="%d")
    print(f"wrote {out} (and .rows.txt / .cols.txt orders)")
    try:
        atomic_write(png, lambda p: save_png(p, M, R))
        print(f"wrote {png}")
    except ImportError:
        print("(matplotlib is not installed: no PNG written)")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("reorder", help="reorder a binary or categorical matrix (ConvoMap)")
    r.add_argument("file", help="matrix file: .csv, .txt, .npy or .backup")
    r.add_argument("--kernel", default="gbs")
    r.add_argument("--kernel-size", default="25", help="odd size, or ROWSxCOLS such as 29x5")
    r.add_argument("--padding", default="zeros_and_ones")
    r.add_argument("--method", default="pls", choices=["pls", "ls"])
    r.add_argument("--max-iter", type=int, default=None)
    r.add_argument("--categorical", default="auto", choices=["auto", "yes", "no"])
    r.add_argument("--recolor", action="store_true",
                   help="colours may be relabelled per column (each column its own attribute)")
    r.add_argument("--verbose", action="store_true", help="print the error after every step")
    r.add_argument("--n-jobs", type=int, default=None)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--out", default=None, help="output matrix (default FILE.reordered.EXT)")
    r.set_defaults(func=run_reorder)


def demo(args: argparse.Namespace) -> int:
    """A planted banded-blocks matrix, shuffled, then recovered by ConvoMap."""
    from vastml.reorder import ConvoMap, convolution_error, planted_matrix

    n = 120 if args.quick else 300
    k = 11 if args.quick else 25
    M = planted_matrix("banded_blocks", n, 0.1)
    rng = np.random.default_rng(args.seed)
    S = M[rng.permutation(n)][:, rng.permutation(n)]
    print(f"\n8. Matrix reordering (ConvoMap): a planted {n} x {n} banded-blocks matrix, 10% noise, shuffled")
    t0 = time.perf_counter()
    cm = ConvoMap(kernel_size=k, random_state=args.seed).fit(S)
    dt = time.perf_counter() - t0
    planted = convolution_error(M, kernel_size=k)
    print(f"   GBS({k}) error: planted {planted:.1f}, shuffled {cm.initial_error_:.1f}, recovered {cm.error_:.1f} ({dt:.1f} s)")
    try:
        from vastml.reorder import save_png

        out = Path(args.out).with_name(Path(args.out).stem + "-reorder.png")
        save_png(out, S, cm.transform(S), titles=("shuffled", "ConvoMap"))
        print(f"   picture written to {out}")
    except ImportError:
        pass
    return 0
