"""
TSP-means: ordering many rows, compressed to screen size
=========================================================

A heatmap of 100,000 rows cannot be drawn row by row: a screen has a few hundred pixels. If the
rows are in a good order, averaging runs of consecutive rows into one pixel row loses little.
:class:`~vastml.reorder.TSPMeans` finds such an order in :math:`O(n \\log n)` by ordering a
recursive 2-means tree along short TSP paths. (It orders millions of rows the same way; this
example keeps the size small so that the documentation builds quickly.)

The data are waveform vectors of 21 features in three classes
(:func:`~vastml.datasets.make_waveform`). Left: the rows in random order, averaged in blocks.
Right: the same rows along the TSP-means path.
"""

import time

import matplotlib.pyplot as plt
import numpy as np

from vastml.datasets import make_waveform
from vastml.reorder import TSPMeans, figure_of_merit, path_length

X, y = make_waveform(100_000, random_state=0)
X = (X - X.mean(axis=0)) / X.std(axis=0)

t0 = time.perf_counter()
tm = TSPMeans(random_state=0).fit(X)
print(f"TSP-means on {X.shape[0]:,} rows: {time.perf_counter() - t0:.1f} s")
order = tm.order_


def squeeze(A, rows=300):
    """Average consecutive rows into `rows` pixel rows."""
    edges = np.linspace(0, A.shape[0], rows + 1).astype(int)
    return np.add.reduceat(A, edges[:-1], axis=0) / np.diff(edges)[:, None]


random_order = np.random.default_rng(0).permutation(X.shape[0])
fig, axes = plt.subplots(1, 2, figsize=(9, 5), sharey=True)
for ax, (name, o) in zip(axes, [("random order", random_order), ("TSP-means order", order)]):
    img = np.hstack([squeeze(X[o]), 3 * squeeze(np.eye(3)[y[o]]) - 1.5])
    ax.imshow(img, aspect="auto", cmap="RdBu_r", vmin=-1.5, vmax=1.5, interpolation="nearest")
    ax.set_title(f"{name}\npath length {path_length(X, o):,.0f}, FOM {figure_of_merit(y, o):.3f}")
    ax.set_xlabel("21 features | 3 class columns")
axes[0].set_ylabel(f"{X.shape[0]:,} rows in 300 pixel rows")
fig.tight_layout()
plt.show()
