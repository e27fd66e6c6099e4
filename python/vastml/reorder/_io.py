"""Reading and writing matrices (CSV, NPY, the reference implementation's ``.backup`` text
format) and loaders of the thesis's real data sets."""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import numpy as np

if TYPE_CHECKING:
    from vastml._typing import ArrayLike, PathLike


@contextmanager
def _malformed(path: PathLike) -> Iterator[None]:
    """Turn any failure to parse ``path`` into one ``ValueError`` that names the file."""
    try:
        yield
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{path}: no such file (pass `root`, or set VASTML_SHARED_DATA to the folder "
            "holding the data sets)"
        ) from None
    except ValueError as exc:
        if str(path) in str(exc):
            raise
        raise ValueError(f"{path}: malformed file ({exc})") from None
    except (EOFError, IndexError, KeyError, StopIteration, OSError, csv.Error) as exc:
        raise ValueError(f"{path}: malformed file ({type(exc).__name__}: {exc})") from None


def _read_backup(path: PathLike) -> tuple[np.ndarray, list[str], list[str]]:
    """A ``.backup`` file: description line; "rows cols n_layers dont_change_colours"; the
    row map; the column map; column labels; row labels ("|%|" stands for a space); then for
    each layer, one line per row listing its set columns, and a separator line. Cells set in
    layer k hold k (or 1 for a single layer); the maps are applied (shown order).

    A malformed file raises ValueError naming the file and the (1-based) line."""
    with open(path) as f:
        lines = f.read().split("\n")

    def fail(line_no: int, what: str) -> NoReturn:
        raise ValueError(f"{path}, line {line_no}: {what}") from None

    def ints(i: int, what: str) -> list[int]:
        if i >= len(lines):
            fail(i + 1, f"the file ends before its {what}")
        try:
            return [int(x) for x in lines[i].split()]
        except ValueError:
            fail(i + 1, f"expected whole numbers for the {what}, got {lines[i][:60]!r}")

    head = ints(1, "header 'rows cols n_layers flag'")
    if len(head) != 4 or min(head[:3]) < 1:
        fail(2, f"expected 'rows cols n_layers flag' with positive sizes, got {lines[1][:60]!r}")
    m, n, layers, _ = head
    row_map, col_map = ints(2, "row map"), ints(3, "column map")
    if sorted(row_map) != list(range(m)):
        fail(3, f"the row map is not a permutation of 0..{m - 1}")
    if sorted(col_map) != list(range(n)):
        fail(4, f"the column map is not a permutation of 0..{n - 1}")
    if len(lines) < 6:
        fail(len(lines), "the file ends before its labels")
    col_labels = [s.replace("|%|", " ") for s in lines[4].rstrip().split(" ")]
    row_labels = [s.replace("|%|", " ") for s in lines[5].rstrip().split(" ")]
    data = np.zeros((m, n), dtype=np.int64)
    i = 6
    for layer in range(layers):
        for r in range(m):
            cols = ints(i, f"set columns of row {r} in layer {layer}")
            bad = [c for c in cols if not 0 <= c < n]
            if bad:
                fail(i + 1, f"column {bad[0]} is outside 0..{n - 1}")
            data[r, cols] = layer if layers > 1 else 1
            i += 1
        if i >= len(lines):
            fail(i + 1, f"the file ends before the separator line after layer {layer}")
        i += 1
    data = data[row_map][:, col_map]
    return data, [row_labels[i] for i in row_map] if len(row_labels) == m else row_labels, (
        [col_labels[i] for i in col_map] if len(col_labels) == n else col_labels
    )


#: The most layers (colours) a ``.backup`` file written by vastml may have.
MAX_BACKUP_LAYERS = 256


def _write_backup(path: PathLike, matrix: ArrayLike, description: str = "vastml") -> None:
    """Write the ``.backup`` format, whose layers hold colour codes: value v goes to layer v, so
    the file reads back to the same matrix. Only non-negative integer codes below
    :data:`MAX_BACKUP_LAYERS` fit; anything else raises ValueError."""
    a = np.asarray(matrix)
    if a.ndim != 2 or a.size == 0:
        raise ValueError(f"{path}: a .backup file holds a non-empty 2-D matrix, got shape {a.shape}")
    if a.dtype.kind not in "iub":
        if a.dtype.kind != "f" or not np.all(np.isfinite(a)) or not np.all(a == np.round(a)):
            raise ValueError(
                f"{path}: the .backup format holds whole-number colour codes; got {a.dtype} values"
            )
    codes = a.astype(np.int64)
    lo, hi = int(codes.min()), int(codes.max())
    if lo < 0 or hi >= MAX_BACKUP_LAYERS:
        raise ValueError(
            f"{path}: the .backup format holds colour codes 0..{MAX_BACKUP_LAYERS - 1}; "
            f"got values from {lo} to {hi}"
        )
    binary = hi <= 1
    layers = [1] if binary else list(range(hi + 1))
    m, n = codes.shape
    out = [description, f"{m} {n} {len(layers)} 0"]
    out.append(" ".join(str(i) for i in range(m)))
    out.append(" ".join(str(i) for i in range(n)))
    out.append(" ".join(f"c{i}" for i in range(n)))
    out.append(" ".join(f"r{i}" for i in range(m)))
    for v in layers:
        for r in range(m):
            out.append(" ".join(str(c) for c in np.flatnonzero(codes[r] == v)))
        out.append("")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def load_matrix(path: PathLike) -> np.ndarray:
    """Read a matrix from ``.npy``, ``.csv`` / ``.txt`` (comma, tab or space separated numbers)
    or ``.backup``. Raises ValueError naming the file for an unknown or malformed format.

    Examples
    --------
    >>> import os, tempfile
    >>> from vastml.reorder import load_matrix, save_matrix
    >>> path = os.path.join(tempfile.mkdtemp(), "m.csv")
    >>> save_matrix(path, [[1, 0], [0, 1]])
    >>> load_matrix(path).tolist()
    [[1, 0], [0, 1]]
    """
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{path}: no such file")
    ext = p.suffix.lower()
    if ext == ".npy":
        try:
            return np.load(p, allow_pickle=False)
        except Exception as exc:  # numpy's header parser raises many kinds (EOF, syntax, ...)
            raise ValueError(f"{path}: not a valid .npy file ({type(exc).__name__}: {exc})") from None
    if ext == ".backup":
        return _read_backup(p)[0]
    if ext in (".csv", ".txt", ".tsv"):
        try:
            text = p.read_text()
            first = text.lstrip().split("\n", 1)[0]
            delim = "," if "," in first else ("\t" if "\t" in first else None)
            a = np.loadtxt(p, delimiter=delim, ndmin=2)
        except ValueError as exc:
            raise ValueError(f"{path}: not a matrix of numbers ({exc})") from None
        if np.all(a == np.round(a)):
            a = a.astype(np.int64)
        return a
    raise ValueError(f"{path}: unknown format {ext!r}; expected .npy, .csv, .txt or .backup")


def save_matrix(path: PathLike, matrix: ArrayLike) -> None:
    """Write ``matrix`` as ``.npy``, ``.csv`` or ``.backup`` (chosen by the extension).

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from vastml.reorder import load_matrix, save_matrix
    >>> path = os.path.join(tempfile.mkdtemp(), "m.backup")
    >>> save_matrix(path, np.eye(3, dtype=int))
    >>> bool((load_matrix(path) == np.eye(3)).all())
    True
    """
    ext = Path(path).suffix.lower()
    a = np.asarray(matrix)
    if ext == ".npy":
        np.save(path, a)
    elif ext in (".csv", ".txt"):
        fmt = "%d" if a.dtype.kind in "iub" else "%.10g"
        np.savetxt(path, a, delimiter=",", fmt=fmt)
    elif ext == ".backup":
        _write_backup(path, a)
    else:
        raise ValueError(f"{path}: unknown format {ext!r}; expected .npy, .csv or .backup")


def _data_dir(root):
    if root is not None:
        return Path(root)
    env = os.environ.get("VASTML_SHARED_DATA")
    base = Path(env) if env else Path(__file__).resolve().parents[3].parent / "shared" / "data"
    return base / "convomap"


def load_football(root: PathLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Football 115 x 115 adjacency from ``Football/football.paj`` (edge ``i j`` sets A[i,j],
    A[j,i] and A[i,i], as the reference code does) and the 12 conference labels.

    Examples
    --------
    The files live in the shared data folder (``VASTML_SHARED_DATA`` or ``root``), not in
    the package:

    >>> from vastml.reorder import load_football
    >>> A, labels = load_football(); A.shape, labels.shape  # doctest: +SKIP
    ((115, 115), (115,))
    """
    d = _data_dir(root) / "Football"
    path = d / "football.paj"
    with _malformed(path):
        lines = path.read_text().split("\n")
        start = next(i for i, l in enumerate(lines) if l.startswith("*Edges"))
        n = int(lines[0].split()[1])
        if not 0 < n <= start:
            raise ValueError(f"{path}: {n} vertices declared, {start - 1} listed")
        A = np.zeros((n, n), dtype=np.int64)
        for line in lines[start + 1 :]:
            t = line.split()
            if len(t) >= 2:
                a, b = int(t[0]) - 1, int(t[1]) - 1
                if not (0 <= a < n and 0 <= b < n):
                    raise ValueError(f"{path}: edge {line.strip()!r} names a vertex beyond {n}")
                A[a, b] = A[b, a] = A[a, a] = 1
    with _malformed(d / "labels.txt"):
        labels = np.loadtxt(d / "labels.txt", dtype=np.int64)
    return A, labels


def load_mammals(root: PathLike | None = None) -> np.ndarray:
    """Mammals 2221 x 124 (locations x species; the 69 climate columns dropped).

    Examples
    --------
    The files live in the shared data folder (``VASTML_SHARED_DATA`` or ``root``), not in
    the package:

    >>> from vastml.reorder import load_mammals
    >>> load_mammals().shape  # doctest: +SKIP
    (2221, 124)
    """
    path = _data_dir(root) / "Mammals" / "mammals.txt"
    with _malformed(path):
        return np.loadtxt(path, delimiter=",", ndmin=2)[:, 69:].astype(np.int64)


def load_paleo(root: PathLike | None = None) -> np.ndarray:
    """Paleo 1597 x 4215 (NOW fossil localities x species, 1 where the species was found),
    from the NOW export ``NOW/NOW_public_030717.csv``; rows by locality id (``LIDNUM``),
    columns by species id (``SIDNUM``). The thesis's original order came from a hash map, so
    only the shape and the number of ones (14,133) match it, not the unordered error.

    Examples
    --------
    The files live in the shared data folder (``VASTML_SHARED_DATA`` or ``root``), not in
    the package:

    >>> from vastml.reorder import load_paleo
    >>> X = load_paleo(); X.shape, int(X.sum())  # doctest: +SKIP
    ((1597, 4215), 14133)
    """
    path = _data_dir(root) / "NOW" / "NOW_public_030717.csv"
    with _malformed(path), path.open(newline="", encoding="utf-8", errors="replace") as f:
        rows = csv.reader(f, delimiter="|")
        header = next(rows)
        li, si = header.index("LIDNUM"), header.index("SIDNUM")
        pairs = np.array([(int(r[li]), int(r[si])) for r in rows if len(r) > max(li, si)])
        if pairs.size == 0:
            raise ValueError(f"{path}: no (LIDNUM, SIDNUM) rows")
    loc, r = np.unique(pairs[:, 0], return_inverse=True)
    spec, c = np.unique(pairs[:, 1], return_inverse=True)
    X = np.zeros((len(loc), len(spec)), dtype=np.int64)
    X[r, c] = 1
    return X


def load_genes(root: PathLike | None = None) -> np.ndarray:
    """Gene expression 2112 x 363 (binarised).

    Examples
    --------
    The files live in the shared data folder (``VASTML_SHARED_DATA`` or ``root``), not in
    the package:

    >>> from vastml.reorder import load_genes
    >>> load_genes().shape  # doctest: +SKIP
    (2112, 363)
    """
    path = _data_dir(root) / "Genes" / "tkde_binarized_data.txt"
    with _malformed(path):
        with path.open() as f:
            n_cols = len(f.readline().split("\t"))
        return np.loadtxt(
            path, skiprows=1, delimiter="\t", usecols=range(1, n_cols + 1), ndmin=2
        ).astype(np.int64)


def _read_octave_text(path: PathLike) -> dict[str, np.ndarray]:
    with _malformed(path):
        return _parse_octave_text(path, Path(path).read_text().split("\n"))


def _parse_octave_text(path: PathLike, lines: list[str]) -> dict[str, np.ndarray]:
    out = {}
    i = 0
    while i < len(lines):
        if lines[i].startswith("# name:"):
            name = lines[i].split(":", 1)[1].strip()
            meta = {}
            i += 1
            while i < len(lines) and lines[i].startswith("#"):
                k, v = lines[i][2:].split(":", 1)
                meta[k.strip()] = v.strip()
                i += 1
            if meta.get("type") == "matrix":
                r, c = int(meta["rows"]), int(meta["columns"])
                if r < 0 or c < 0 or i + r > len(lines):
                    raise ValueError(f"{path}: matrix {name!r} declares {r} rows, the file is shorter")
                out[name] = np.array(
                    [[float(x) for x in lines[i + j].split()] for j in range(r)]
                ).reshape(r, c)
                i += r
        else:
            i += 1
    return out


def load_news(
    name: str = "news_3cl_1", root: PathLike | None = None
) -> tuple[np.ndarray, np.ndarray | None]:
    """A 20-Newsgroups similarity matrix as 4 colours (commonAttributes) and the labels.

    S = A·Aᵀ / max, binned at 0.05, 0.1, 0.25; rows and columns whose colours are all equal
    are dropped (news_3cl_1: 589 x 589).

    Examples
    --------
    The files live in the shared data folder (``VASTML_SHARED_DATA`` or ``root``), not in
    the package:

    >>> from vastml.reorder import load_news
    >>> C, labels = load_news(); C.shape  # doctest: +SKIP
    (589, 589)
    """
    path = _data_dir(root) / "DocumentGraphs" / f"{name}.mat"
    d = _read_octave_text(path)
    if "A" not in d or d["A"].ndim != 2 or d["A"].shape[0] != d["A"].shape[1]:
        raise ValueError(f"{path}: no square matrix named 'A'")
    A = d["A"]
    S = A @ A.T
    S = S / S.max()
    C = np.digitize(S, [0.05, 0.1, 0.25])
    keep_r = C.std(axis=1) > 0
    keep_c = C.std(axis=0) > 0
    labels = d["y"].ravel().astype(np.int64)[keep_r] if "y" in d else None
    return C[keep_r][:, keep_c], labels


def load_mushrooms(
    root: PathLike | None = None, categorical: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Mushrooms binary 8124 x 111 (LIBSVM one-hot file, zero-variance columns dropped) and
    the edible / poisonous labels.

    With ``categorical=True``: the UCI file as 8124 x 20 colour codes (the reference code's
    choice: stalk-root, which has '?' values, and the constant veil-type are dropped; each
    value is coded by its index of first appearance within its column, so at most 12
    colours) and labels 0 = edible, 1 = poisonous. Its columns are different attributes: fit
    it with ``ConvoMap(recolor=True)``.

    Examples
    --------
    The files live in the shared data folder (``VASTML_SHARED_DATA`` or ``root``), not in
    the package:

    >>> from vastml.reorder import load_mushrooms
    >>> X, y = load_mushrooms(); X.shape  # doctest: +SKIP
    (8124, 111)
    """
    if categorical:
        path = _data_dir(root) / "Mushrooms" / "agaricus-lepiota.data.txt"
        rows = [line.strip().split(",") for line in path.read_text().splitlines() if line.strip()]
        A = np.array(rows)
        y = (A[:, 0] == "p").astype(np.int64)
        keep = [j for j in range(1, A.shape[1]) if j not in (11, 16)]  # stalk-root, veil-type
        X = np.empty((A.shape[0], len(keep)), dtype=np.int64)
        for out, j in enumerate(keep):
            _, first, inv = np.unique(A[:, j], return_index=True, return_inverse=True)
            rank = np.empty(len(first), dtype=np.int64)
            rank[np.argsort(first, kind="stable")] = np.arange(len(first))
            X[:, out] = rank[inv.ravel()]
        return X, y
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(str(_data_dir(root) / "Mushrooms" / "mushrooms.txt"))
    X = np.asarray(X.todense()).astype(np.int64)
    keep = X.std(axis=0) > 0
    return X[:, keep], y.astype(np.int64)
