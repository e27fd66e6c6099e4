"""
TSP-means: a million rows, compressed to screen size
====================================================

A heatmap of 1,000,000 rows cannot be drawn row by row: a screen has a few hundred pixels. If
the rows are in a good order, averaging runs of consecutive rows into one pixel row loses
little. :class:`~vastml.reorder.TSPMeans` finds such an order in :math:`O(n \\log n)` by
ordering a recursive 2-means tree along short TSP paths.

The data are 1,000,000 rows of 8 features drawn from a mixture of 12 Gaussian clusters, in
random order. Left: the rows as they come, averaged in 300 blocks of about 3,300 rows. Right:
the same rows along the TSP-means path; the two right-hand columns show the cluster of each row
(the share of the block's rows in clusters 0-5 and 6-11), which TSP-means was not given.

The fit uses ``polish_window=0`` (the thesis's plain TSP-means): the default window polish
shortens the path by a few per cent more but takes about twice as long, and this example has to
stay quick because the documentation is built on every change. The time printed below is that of
the machine that built this page.
"""

import time

import matplotlib.pyplot as plt
import numpy as np

from vastml.reorder import TSPMeans, figure_of_merit, path_length

rng = np.random.default_rng(0)
n, d, k = 1_000_000, 8, 12
centres = rng.normal(scale=4.0, size=(k, d))
y = rng.integers(k, size=n)
X = centres[y] + rng.normal(size=(n, d))

t0 = time.perf_counter()
tm = TSPMeans(polish_window=0, random_state=0).fit(X)
print(f"TSP-means on {n:,} rows x {d} features: {time.perf_counter() - t0:.1f} s "
      f"({tm.n_sweeps_} sweeps, {tm.n_tsp_:,} local TSPs)")
order = tm.order_


def squeeze(A, rows=300):
    """Average consecutive rows into `rows` pixel rows."""
    edges = np.linspace(0, A.shape[0], rows + 1).astype(int)
    return np.add.reduceat(A, edges[:-1], axis=0) / np.diff(edges)[:, None]


# %%
# Only the 300 averaged rows are drawn; the figure costs the same for any number of rows.
side = np.c_[y < k // 2, y >= k // 2].astype(float)
fig, axes = plt.subplots(1, 2, figsize=(9, 5), sharey=True)
for ax, (name, o) in zip(axes, [("random order", np.arange(n)), ("TSP-means order", order)]):
    img = np.hstack([squeeze(X[o]) / 4, 3 * squeeze(side[o]) - 1.5])
    ax.imshow(img, aspect="auto", cmap="RdBu_r", vmin=-1.5, vmax=1.5, interpolation="nearest")
    ax.set_title(f"{name}\npath length {path_length(X, o):,.0f}, FOM {figure_of_merit(y, o):.4f}")
    ax.set_xlabel(f"{d} features | 2 cluster columns")
axes[0].set_ylabel(f"{n:,} rows in 300 pixel rows")
fig.tight_layout()
plt.show()
