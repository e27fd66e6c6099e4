"""Compression of a large matrix to display size (thesis §3.5)."""

from __future__ import annotations

import numpy as np

from vastml.reorder._objective import as_codes


def _windows(m: int, out: int):
    a = max(m // out, 1)
    a_odd = a if a % 2 == 1 else a + 1
    for r in range(out):
        c = a * r + a_odd // 2
        yield max(c - a_odd // 2, 0), min(c + a_odd // 2 + 1, m)


def compress(matrix, shape=(300, 300), *, method="auto", categorical=None):
    """Summarise ``matrix`` to at most ``shape`` cells for display.

    Each output cell summarises the odd-sized window centred at (a·r + ⌊a_odd/2⌋,
    b·c + ⌊b_odd/2⌋), a = ⌊m / rows⌋ (eq. 3.19). ``"mean"`` gives grey levels in [0, 1]
    (a uniform kernel; binary data); ``"majority"`` the most frequent colour code with an
    agreement score (votes for the winner / window cells, its mean ×100 is the quality);
    ``"sample"`` keeps one cell per window. ``"auto"``: mean for binary, majority otherwise.

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
    m, n = codes.shape
    out_r, out_c = min(rows, m), min(cols, n)
    rw = list(_windows(m, out_r))
    cw = list(_windows(n, out_c))
    if method == "sample":
        ri = [(a + b - 1) // 2 for a, b in rw]
        ci = [(a + b - 1) // 2 for a, b in cw]
        return codes[np.ix_(ri, ci)], 100.0
    if method == "mean":
        if n_colours:
            raise ValueError("`method='mean'` needs a binary matrix; use 'majority'")
        X = codes.astype(np.float64)
        out = np.array([[X[a:b, c:d].mean() for c, d in cw] for a, b in rw])
        return out, 100.0
    k = max(n_colours, 2)
    out = np.zeros((out_r, out_c), dtype=np.int64)
    agree = np.zeros((out_r, out_c))
    for i, (a, b) in enumerate(rw):
        for j, (c, d) in enumerate(cw):
            counts = np.bincount(codes[a:b, c:d].ravel(), minlength=k)
            out[i, j] = int(np.argmax(counts))
            agree[i, j] = counts.max() / counts.sum()
    return out, float(agree.mean() * 100.0)
