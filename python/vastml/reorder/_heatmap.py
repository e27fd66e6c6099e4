"""A heatmap of a numeric matrix at any size: rows and columns seriated, the matrix shrunk to
screen resolution by block means (or majorities), axes that say how many rows a pixel holds."""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from vastml._validation import choice

if TYPE_CHECKING:
    from collections.abc import Callable

    from vastml._typing import ArrayLike, PathLike
    from vastml.reorder._random import RandomStateLike


@dataclass
class Heatmap:
    """What :func:`heatmap` drew.

    Attributes
    ----------
    figure : matplotlib Figure
    row_order, col_order : ndarray of int, the orders of the rows and columns drawn.
    rows_per_pixel, cols_per_pixel : int, data rows / columns in one drawn cell.
    image : ndarray, the (compressed) matrix drawn.
    """

    figure: object
    row_order: np.ndarray
    col_order: np.ndarray
    rows_per_pixel: int
    cols_per_pixel: int
    image: np.ndarray


def _blocks(n: int, target: int) -> int:
    return max(1, -(-n // max(1, target)))


def shrink(M: ArrayLike, rows_per_block: int, cols_per_block: int = 1, *, how: str = "mean") -> np.ndarray:
    """``M`` reduced to blocks of ``rows_per_block`` x ``cols_per_block`` cells: the block mean
    (``how="mean"``) or the most frequent value (``"majority"``, ties to the smallest; for codes).

    >>> shrink(np.arange(12.0).reshape(6, 2), 3)
    array([[2., 3.],
           [8., 9.]])
    >>> shrink(np.array([[1], [1], [2], [2], [2], [0]]), 3, how="majority").ravel().tolist()
    [1, 2]
    """
    choice(how, "how", ("mean", "majority"))
    M = np.asarray(M)
    n, m = M.shape
    rs = np.arange(0, n, rows_per_block)
    cs = np.arange(0, m, cols_per_block)
    if how == "mean":
        A = np.add.reduceat(M.astype(np.float64, copy=False), rs, axis=0)
        A = np.add.reduceat(A, cs, axis=1)
        rn = np.diff(np.r_[rs, n])
        cn = np.diff(np.r_[cs, m])
        return A / np.outer(rn, cn)
    vals, codes = np.unique(M, return_inverse=True)
    codes = codes.reshape(n, m)
    k = len(vals)
    out = np.empty((len(rs), len(cs)), dtype=vals.dtype)
    rblock = np.repeat(np.arange(len(rs)), np.diff(np.r_[rs, n]))
    cblock = np.repeat(np.arange(len(cs)), np.diff(np.r_[cs, m]))
    counts = np.zeros((len(rs), len(cs), k), dtype=np.int64)
    np.add.at(counts, (rblock[:, None], cblock[None, :], codes), 1)
    out[:] = vals[counts.argmax(axis=2)]
    return out


def _side_codes(colors: Any, n: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    c = np.asarray(colors)
    if c.shape[:1] != (n,):
        raise ValueError(f"`{name}` must have one entry per {'row' if 'row' in name else 'column'} ({n}), got shape {c.shape}")
    labels, codes = np.unique(c, return_inverse=True)
    return labels, codes.reshape(n)


def heatmap(
    X: ArrayLike,
    *,
    row_method: str | None = "auto",
    col_method: str | None = "auto",
    metric: str = "euclidean",
    row_order: ArrayLike | None = None,
    col_order: ArrayLike | None = None,
    scale: str | None = "columns",
    compress: str = "mean",
    max_size: tuple[int, int] = (1000, 800),
    row_colors: ArrayLike | None = None,
    col_colors: ArrayLike | None = None,
    cmap: Any = None,
    vmin: float | None = None,
    vmax: float | None = None,
    title: str = "",
    path: PathLike | None = None,
    figsize: tuple[float, float] = (8, 8),
    dpi: int = 100,
    time_limit: float | None = None,
    random_state: RandomStateLike = 0,
    n_jobs: int | None = None,
    verbose: bool | int = False,
) -> Heatmap:
    """Draw ``X`` as a heatmap with its rows and columns seriated, at any size.

    Parameters
    ----------
    X : array of shape (n, m)
        Numeric data.
    row_method, col_method : str or None
        A :func:`seriate` method for the rows / columns, None to keep them as given. "auto":
        "TSP" up to 50,000 rows, "TSP_means" above; columns by "TSP" on the columns (on a
        sample of 20,000 rows when there are more).
    metric : str
        Metric of the seriation (see :func:`seriate`).
    row_order, col_order : array of int or None
        Orders to use instead of seriating.
    scale : "columns", "rows" or None
        Z-score the columns (default) or rows before seriating and drawing.
    compress : "mean" or "majority"
        How a pixel shows the cells it stands for when the matrix is larger than ``max_size``:
        their mean, or (codes) their most frequent value.
    max_size : (rows, columns)
        The largest image drawn, in cells; larger matrices are shrunk by whole blocks of rows /
        columns, and the axes say how many data rows / columns a drawn cell holds.
    row_colors, col_colors : array of shape (n,) / (m,) or None
        Labels drawn as a side bar (block majority when compressed).
    cmap, vmin, vmax : colour map and limits (default "RdBu_r" and +-2.5 for scaled data).
    title : str
    path : str, Path or None
        Write the figure (PNG or SVG by the suffix) and close it.
    figsize, dpi : figure size in inches and resolution.
    time_limit, random_state, n_jobs : passed to :func:`seriate`.
    verbose : bool or int, default=False
        Draw a progress bar for each seriation (rows, then columns).

    Returns
    -------
    Heatmap

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = np.repeat(rng.normal(size=(4, 6)), 500, axis=0) + 0.1 * rng.normal(size=(2000, 6))
    >>> h = heatmap(X[rng.permutation(2000)], max_size=(400, 100), time_limit=0.1)
    >>> h.rows_per_pixel, h.image.shape
    (5, (400, 6))
    >>> import matplotlib.pyplot as plt; plt.close(h.figure)
    """
    import matplotlib

    if path is not None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from vastml.reorder._seriate import seriate

    A = np.asarray(X)
    if A.ndim != 2 or A.shape[0] == 0 or A.shape[1] == 0:
        raise ValueError(f"`X` must be a non-empty 2-D array, got shape {A.shape}")
    if not np.issubdtype(A.dtype, np.number) and A.dtype != bool:
        raise TypeError(f"`X` must be numeric, got dtype {A.dtype}")
    A = np.asarray(A, dtype=np.float64)
    if not np.isfinite(A).all():
        raise ValueError("`X` contains NaN or infinite values")
    if scale is not None:
        choice(scale, "scale", ("columns", "rows"))
    choice(compress, "compress", ("mean", "majority"))
    if (not isinstance(max_size, (tuple, list)) or len(max_size) != 2
            or not all(isinstance(v, numbers.Integral) and v >= 1 for v in max_size)):
        raise ValueError(f"`max_size` must be a pair of positive integers, got {max_size!r}")
    n, m = A.shape
    scaled = _scaler(A, scale)

    def resolve(method: str | None, size: int) -> str | None:
        if method == "auto":
            return "TSP" if size <= 50_000 else "TSP_means"
        return method

    if row_order is None:
        rm = resolve(row_method, n)
        if rm is not None and n >= 3:
            # the seriation needs the whole scaled matrix; the image is then drawn from it
            A = scaled(A)
            scaled = _scaler(A, None)
        row_order = (np.arange(n) if rm is None or n < 3 else
                     seriate(A, method=rm, metric=metric, time_limit=time_limit,
                             random_state=random_state, n_jobs=n_jobs, verbose=verbose))
    row_order = np.asarray(row_order, dtype=np.intp)
    if col_order is None:
        cm = resolve(col_method, m)
        if cm is None or m < 3:
            col_order = np.arange(m)
        else:
            S = scaled(A if n <= 20_000 else A[np.random.default_rng(random_state).choice(n, 20_000, replace=False)])
            col_order = seriate(np.ascontiguousarray(S.T), method="TSP" if cm == "TSP_means" else cm,
                                metric=metric, time_limit=time_limit, random_state=random_state,
                                n_jobs=n_jobs, verbose=verbose)
    col_order = np.asarray(col_order, dtype=np.intp)
    for o, k, name in ((row_order, n, "row_order"), (col_order, m, "col_order")):
        if o.shape != (k,) or not np.array_equal(np.sort(o), np.arange(k)):
            raise ValueError(f"`{name}` must be a permutation of 0..{k - 1}")
    rpp = _blocks(n, max_size[0])
    cpp = _blocks(m, max_size[1])
    # shrink block by block of rows, so that only the ordered slice of one block is copied
    img = _shrink_ordered(A, row_order, col_order, rpp, cpp, compress, scaled)

    side_r = row_colors is not None
    side_c = col_colors is not None
    fig = plt.figure(figsize=figsize, dpi=dpi)
    widths = [0.4, 10, 0.3] if side_r else [10, 0.3]
    heights = [0.4, 10] if side_c else [10]
    gs = fig.add_gridspec(len(heights), len(widths), width_ratios=widths, height_ratios=heights,
                          wspace=0.03, hspace=0.03)
    r0 = 1 if side_c else 0
    c0 = 1 if side_r else 0
    ax = fig.add_subplot(gs[r0, c0])
    if cmap is None:
        cmap = "RdBu_r" if scale is not None else "viridis"
    if vmin is None and vmax is None and scale is not None:
        vmin, vmax = -2.5, 2.5
    im = ax.imshow(img, aspect="auto", cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest",
                   extent=(0, m, n, 0))
    ylabel = "row (ordered)" + (f", {rpp} rows per pixel row" if rpp > 1 else "")
    xlabel = "column (ordered)" + (f", {cpp} columns per pixel column" if cpp > 1 else "")
    ax.set_xlabel(xlabel)
    if m <= 40:
        ax.set_xticks(np.arange(m) + 0.5)
        ax.set_xticklabels([str(c) for c in col_order], fontsize=6, rotation=90)
    if side_r:
        labels, codes = _side_codes(row_colors, n, "row_colors")
        sc = shrink(codes[row_order][:, None], rpp, 1, how="majority")
        sax = fig.add_subplot(gs[r0, 0], sharey=ax)
        sax.imshow(sc, aspect="auto", cmap="tab10" if len(labels) <= 10 else "tab20",
                   interpolation="nearest", extent=(0, 1, n, 0), vmin=0, vmax=max(9, len(labels) - 1))
        sax.set_xticks([])
        sax.set_ylabel(ylabel)
        ax.tick_params(labelleft=False)
    else:
        ax.set_ylabel(ylabel)
    if side_c:
        labels, codes = _side_codes(col_colors, m, "col_colors")
        sc = shrink(codes[col_order][None, :], 1, cpp, how="majority")
        cax_top = fig.add_subplot(gs[0, c0], sharex=ax)
        cax_top.imshow(sc, aspect="auto", cmap="tab10" if len(labels) <= 10 else "tab20",
                       interpolation="nearest", extent=(0, m, 1, 0), vmin=0, vmax=max(9, len(labels) - 1))
        cax_top.set_yticks([])
        cax_top.tick_params(labelbottom=False)
        if title:
            cax_top.set_title(title, fontsize=9)
    elif title:
        ax.set_title(title, fontsize=9)
    cbar_ax = fig.add_subplot(gs[r0, c0 + 1])
    fig.colorbar(im, cax=cbar_ax, label="z-score" if scale is not None else "value")
    if path is not None:
        fig.savefig(path, dpi=dpi, bbox_inches="tight")
        plt.close(fig)
    return Heatmap(fig, row_order, col_order, rpp, cpp, img)


def _scaler(A: np.ndarray, scale: str | None) -> Callable[[np.ndarray], np.ndarray]:
    """The z-scoring of ``scale`` as a function of a block of rows of ``A``: column statistics
    come from the whole of ``A`` (computed here in chunks, without an (n, m) temporary), row
    statistics from each row."""
    if scale == "columns":
        n = A.shape[0]
        mu = A.mean(0)
        ss = np.zeros(A.shape[1])
        for s in range(0, n, 65_536):
            d = A[s:s + 65_536] - mu
            ss += np.einsum("ij,ij->j", d, d)
        sd = np.sqrt(ss / n)
        sd = np.where(sd > 0, sd, 1.0)

        def columns(B: np.ndarray, cols: np.ndarray | None = None) -> np.ndarray:
            return (B - mu) / sd if cols is None else (B - mu[cols]) / sd[cols]
        return columns
    if scale == "rows":
        def rows(B: np.ndarray, cols: np.ndarray | None = None) -> np.ndarray:
            sd = B.std(1, keepdims=True)
            return (B - B.mean(1, keepdims=True)) / np.where(sd > 0, sd, 1.0)
        return rows

    def unscaled(B: np.ndarray, cols: np.ndarray | None = None) -> np.ndarray:
        return B
    return unscaled


def _shrink_ordered(
    A: np.ndarray, row_order: np.ndarray, col_order: np.ndarray, rpp: int, cpp: int, how: str,
    scaled: Callable[..., np.ndarray] | None = None,
) -> np.ndarray:
    """shrink(scaled(A)[row_order][:, col_order]) computed over chunks of whole row blocks, so
    that the ordered (and scaled) copy never exceeds about 100,000 rows."""
    n = len(row_order)
    step = rpp * max(1, 100_000 // rpp)
    parts = []
    for s in range(0, n, step):
        B = A[row_order[s:s + step]][:, col_order]
        if scaled is not None:
            B = scaled(B, col_order)
        parts.append(shrink(B, rpp, cpp, how=how))
    return np.vstack(parts)
