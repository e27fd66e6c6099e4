"""
ConvoMap on a real network: American college football
======================================================

The Football data set is the 115 × 115 adjacency matrix of the games between American college
teams in one season; teams play mostly within their conference. In the file's order the matrix
looks like noise. :class:`~vastml.reorder.ConvoMap` reorders rows and columns so that the
heatmap shows the conferences as blocks on the diagonal.

The data are read from the shared data folder with :func:`~vastml.reorder.load_football`; when
it is absent (the documentation may be built elsewhere) a planted block matrix of the same size
is used instead.
"""

import matplotlib.pyplot as plt
import numpy as np

from vastml.reorder import ConvoMap, load_football, planted_matrix, plot_matrix

try:
    A, labels = load_football()
    source = "Football (115 teams)"
except OSError:
    A = planted_matrix("blocks", size=115, noise=0.05)
    labels = None
    source = "generated blocks (data folder absent)"

# %%
# Reorder with a 7 × 7 kernel: blocks of about seven teams or more will show.
cm = ConvoMap(kernel_size=7, random_state=0).fit(A)
R = cm.transform(A)
print(f"{source}: error {cm.initial_error_:.0f} -> {cm.error_:.0f}")

fig, axes = plt.subplots(1, 2, figsize=(9, 4.6))
plot_matrix(A, R, ax=axes, titles=("file order", "ConvoMap order"))
fig.suptitle(source)
fig.tight_layout()

# %%
# The conferences were not given to ConvoMap; along its row order they come out as runs.
if labels is not None:
    fig, ax = plt.subplots(figsize=(9, 1.2))
    ax.imshow(labels[cm.row_order_][None, :], aspect="auto", cmap="tab20", interpolation="nearest")
    ax.set_yticks([])
    ax.set_xlabel("position in the ConvoMap row order (colour = conference)")
    fig.tight_layout()
plt.show()
