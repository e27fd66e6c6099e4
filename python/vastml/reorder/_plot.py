"""Pictures of matrices: original beside reordered, shrunk for display."""

from __future__ import annotations

import numpy as np

from vastml.reorder._compress import compress
from vastml.reorder._objective import as_codes


def _image(matrix, max_size):
    codes, n_colours, _ = as_codes(matrix)
    img, _ = compress(codes if n_colours == 0 else codes, (max_size, max_size))
    return img, n_colours


def plot_matrix(matrix, reordered=None, *, ax=None, titles=("original", "reordered"), max_size=300):
    """Draw ``matrix`` (and ``reordered`` beside it) shrunk to at most ``max_size`` pixels a
    side: grey levels for binary data (black = ones), a qualitative palette for colours.
    Returns the matplotlib figure."""
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


def save_png(path, matrix, reordered=None, **kwargs) -> None:
    """Write :func:`plot_matrix` of ``matrix`` (and ``reordered``) to a PNG file."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig = plot_matrix(matrix, reordered, **kwargs)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
