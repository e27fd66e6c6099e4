"""
ConvoMap against classic orders
================================

A planted test matrix (blocks along a band, with 10 % of the cells flipped, then shuffled) is
reordered by the classic methods - hierarchical clustering as a clustered heatmap does
(:func:`~vastml.reorder.heatmap_order`), the spectral order, the barycentric heuristic, a TSP
path through the rows - and by ConvoMap. Each picture's title gives its convolution error
(:func:`~vastml.reorder.convolution_error`, lower is better).
"""

import matplotlib.pyplot as plt
import numpy as np

from vastml.reorder import (
    ConvoMap,
    barycentric_order,
    convolution_error,
    heatmap_order,
    planted_matrix,
    plot_matrix,
    spectral_order,
    tsp_order,
)

rng = np.random.default_rng(0)
planted = planted_matrix("banded_blocks", size=120, noise=0.1)
M = planted[rng.permutation(120)][:, rng.permutation(120)]
kernel_size = 9


def error(R):
    return convolution_error(R, kernel_size=kernel_size)


orders = {
    "shuffled": (np.arange(120), np.arange(120)),
    "hierarchical": heatmap_order(M),
    "spectral": spectral_order(M),
    "barycentric": barycentric_order(M),
    "TSP": (tsp_order(M, axis=0), tsp_order(M, axis=1)),
}
cm = ConvoMap(kernel_size=kernel_size, random_state=0).fit(M)
orders["ConvoMap"] = (cm.row_order_, cm.col_order_)

fig, axes = plt.subplots(2, 3, figsize=(10, 7))
for ax, (name, (rows, cols)) in zip(axes.ravel(), orders.items()):
    R = M[rows][:, cols]
    plot_matrix(R, ax=ax, titles=(f"{name}\nerror {error(R):.0f}",))
fig.tight_layout()
plt.show()
