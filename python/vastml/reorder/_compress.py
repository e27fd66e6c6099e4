"""Compression of a large matrix to display size (thesis §3.5)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from vastml.reorder._objective import as_codes

if TYPE_CHECKING:
    from collections.abc import Iterator

    from vastml._typing import ArrayLike


def _windows(m: int, out: int) -> Iterator[tuple[int, int, int]]:
    """(start, stop, centre) of the window of every output index (eq. 3.19): centre
    a*r + floor(a_odd/2), a_odd cells wide, clipped to the matrix (the centre is not)."""
    a = max(m // out, 1)
    a_odd = a if a % 2 == 1 else a + 1
    for r in range(out):
        c = min(a * r + a_odd // 2, m - 1)
        yield max(c - a_odd // 2, 0), min(c + a_odd // 2 + 1, m), c


def compress(
    matrix: ArrayLike,
    shape: tuple[int, int] = (300, 300),
    *,
    method: str = "auto",
    categorical: bool | None = None,
    attributes: str = "common",
) -> tuple[np.ndarray, float]:
    """Summarise ``matrix`` to at most ``shape`` cells for display.

    Each output cell summarises the odd-sized window centred at (a·r + ⌊a_odd/2⌋,
    b·c + ⌊b_odd/2⌋), a = ⌊m / rows⌋ (eq. 3.19). ``"mean"`` gives grey levels in [0, 1]
    (a uniform kernel; binary data); ``"majority"`` the most frequent colour code with an
    agreement score (votes for the winner / window cells, its mean ×100 is the quality);
    ``"sample"`` keeps one cell per window. ``"auto"``: mean for binary, majority otherwise.

    ``attributes`` says what the colours of a categorical matrix mean (thesis §3.5):
    ``"common"`` (commonAttributes: every column shares the same categories, e.g. a similarity
    matrix) votes over the whole window; ``"per_column"`` (notCommonAttributes: each column
    is its own attribute, e.g. mushrooms, where code 3 of one column and code 3 of another are
    unrelated) votes down one column only, the window's centre column (an a_odd x 1 window),
    so attributes are never mixed; the other columns of the window are left out (sampled).

    Parameters
    ----------
    matrix : array-like of shape (m, n)
    shape : (rows, cols), default=(300, 300)
        The display size; a dimension smaller than that is kept.
    method : {"auto", "mean", "majority", "sample"}, default="auto"
    categorical : bool or None
        As in :func:`convolution_error` (None: binary iff the values are {0, 1}).
    attributes : {"common", "per_column"}, default="common"
        Majority vote over the whole window, or down the centre column only.

    Returns
    -------
    out : ndarray
        Grey levels (mean) or colour codes 0..k-1 (majority, sample).
    agreement : float
        Mean agreement ×100 (100 for "mean" and "sample").

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.reorder import compress
    >>> out, score = compress(np.ones((100, 60), dtype=int), (10, 10))
    >>> out.shape, float(out.max()), score
    ((10, 10), 1.0, 100.0)
    >>> M = np.array([["x", "y", "x"], ["x", "y", "x"], ["z", "z", "x"]])
    >>> compress(M, (1, 1))   # 'x' (code 0) wins 5 of the 9 cells
    (array([[0]]), 55.55555555555556)
    >>> compress(M, (1, 1), attributes="per_column")   # column 1 alone: 'y' (code 1), 2 of 3
    (array([[1]]), 66.66666666666666)
    """
    codes, n_colours, _ = as_codes(matrix, categorical)
    try:
        rows, cols = (int(s) for s in shape)
    except (TypeError, ValueError):
        raise TypeError(f"`shape` must be (rows, cols), got {shape!r}") from None
    if rows <= 0 or cols <= 0:
        raise ValueError(f"`shape` must be positive, got {shape!r}")
    if method == "auto":
        method = "mean" if n_colours == 0 else "majority"
    if method not in ("mean", "majority", "sample"):
        raise ValueError(f"`method` must be 'auto', 'mean', 'majority' or 'sample', got {method!r}")
    if attributes not in ("common", "per_column"):
        raise ValueError(f"`attributes` must be 'common' or 'per_column', got {attributes!r}")
    m, n = codes.shape
    out_r, out_c = min(rows, m), min(cols, n)
    rw = list(_windows(m, out_r))
    cw = list(_windows(n, out_c))
    if method == "sample":
        ri = [c for _, _, c in rw]
        ci = [c for _, _, c in cw]
        return codes[np.ix_(ri, ci)], 100.0
    if method == "mean":
        if n_colours:
            raise ValueError("`method='mean'` needs a binary matrix; use 'majority'")
        X = codes.astype(np.float64)
        out = np.array([[X[a:b, c:d].mean() for c, d, _ in cw] for a, b, _ in rw])
        return out, 100.0
    k = max(n_colours, 2)
    out = np.zeros((out_r, out_c), dtype=np.int64)
    agree = np.zeros((out_r, out_c))
    if attributes == "per_column":  # a_odd x 1 windows down the centre column of each
        cw = [(e, e + 1, e) for _, _, e in cw]
    for i, (a, b, _) in enumerate(rw):
        for j, (c, d, _) in enumerate(cw):
            counts = np.bincount(codes[a:b, c:d].ravel(), minlength=k)
            out[i, j] = int(np.argmax(counts))
            agree[i, j] = counts.max() / counts.sum()
    return out, float(agree.mean() * 100.0)
