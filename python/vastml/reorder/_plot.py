"""Pictures of matrices: original beside reordered, shrunk for display."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from vastml.reorder._compress import compress
from vastml.reorder._objective import as_codes

if TYPE_CHECKING:
    from collections.abc import Sequence

    from matplotlib.figure import Figure

    from vastml._typing import ArrayLike, PathLike


def _image(matrix, max_size):
    codes, n_colours, _ = as_codes(matrix)
    img, _ = compress(codes if n_colours == 0 else codes, (max_size, max_size))
    return img, n_colours


def plot_matrix(
    matrix: ArrayLike,
    reordered: ArrayLike | None = None,
    *,
    ax: Any = None,
    titles: Sequence[str] = ("original", "reordered"),
    max_size: int = 300,
) -> Figure:
    """Draw ``matrix`` (and ``reordered`` beside it) shrunk to at most ``max_size`` pixels a
    side: grey levels for binary data (black = ones), a qualitative palette for colours.
    Returns the matplotlib figure.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from vastml.reorder import ConvoMap, planted_matrix, plot_matrix
    >>> M = planted_matrix("banded", 40, 0.05, random_state=0)
    >>> fig = plot_matrix(M, ConvoMap(kernel_size=5, max_iter=200, random_state=0).fit_transform(M))
    >>> len(fig.axes)
    2
    """
    import matplotlib.pyplot as plt

    mats = [matrix] if reordered is None else [matrix, reordered]
    if ax is None:
        fig, axes = plt.subplots(1, len(mats), figsize=(5 * len(mats), 5), squeeze=False)
        axes = axes[0]
    else:
        axes = np.atleast_1d(ax)
        fig = axes[0].figure
    for a, m, t in zip(axes, mats, titles):
        img, k = _image(m, max_size)
        if k == 0:
            a.imshow(img, cmap="Greys", vmin=0, vmax=1, interpolation="nearest", aspect="auto")
        else:
            a.imshow(img, cmap="tab20", vmin=0, vmax=19, interpolation="nearest", aspect="auto")
        a.set_title(t)
        a.set_xticks([])
        a.set_yticks([])
    return fig


def save_png(
    path: PathLike, matrix: ArrayLike, reordered: ArrayLike | None = None, **kwargs: Any
) -> None:
    """Write :func:`plot_matrix` of ``matrix`` (and ``reordered``) to a PNG file.

    Examples
    --------
    >>> import os, tempfile
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from vastml.reorder import planted_matrix, save_png
    >>> path = os.path.join(tempfile.mkdtemp(), "m.png")
    >>> save_png(path, planted_matrix("nested", 30))
    >>> os.path.getsize(path) > 0
    True
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig = plot_matrix(matrix, reordered, **kwargs)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
