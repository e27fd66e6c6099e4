"""
ConvoMap on real presence data: European mammals
================================================

The Mammals data set records which of 124 mammal species live in each of 2,221 grid cells of
Europe (1 = present). In the file's order the 2,221 x 124 matrix is a grey blur. Species that
share a range and places that share a fauna should sit together: then the heatmap shows the
faunas as blocks, even shrunk to a few hundred pixels. :class:`~vastml.reorder.ConvoMap` finds
row and column orders that minimise the difference between the matrix and its blurred view
(the convolution error), starting from TSP paths and improving them with the parallel local
search P-LS; ``time_budget`` bounds the search so that the example stays quick.

The data are read from the shared data folder with :func:`~vastml.reorder.load_mammals`. When
that folder is absent (the documentation may be built elsewhere) the example says so and uses a
noisy planted block matrix of the same shape instead.
"""

import time

import matplotlib.pyplot as plt
import numpy as np

from vastml.reorder import ConvoMap, compress, load_mammals, planted_matrix

try:
    A = load_mammals()
    source = f"Mammals ({A.shape[0]:,} places x {A.shape[1]} species)"
except OSError as exc:
    print(f"The Mammals data are not available ({exc}); using a planted block matrix instead.")
    P = planted_matrix("banded_blocks", size=2221, noise=0.05, random_state=0)
    A = P[:, :: 2221 // 124][:, :124]
    source = "planted blocks (the shared data folder is absent)"

# shuffle: the file is already sorted by place, which would flatter the "before" picture
rng = np.random.default_rng(0)
A = A[rng.permutation(A.shape[0])][:, rng.permutation(A.shape[1])]

# %%
# A 9 x 9 kernel: structures of about nine places or species and larger will show.
t0 = time.perf_counter()
cm = ConvoMap(kernel_size=9, time_budget=6.0, random_state=0).fit(A)
print(f"{source}: error {cm.initial_error_:,.0f} -> {cm.error_:,.0f} in {time.perf_counter() - t0:.1f} s")
R = cm.transform(A)

# %%
# Both pictures are shrunk to 300 x 124 cells by block means (grey = mixed block): the
# reordered one keeps its structure at that size.
fig, axes = plt.subplots(1, 2, figsize=(9, 5), sharey=True)
for ax, (name, M) in zip(axes, [("shuffled", A), ("ConvoMap order", R)]):
    img, _ = compress(M, (300, 124), method="mean")
    ax.imshow(img, aspect="auto", cmap="Greys", vmin=0, vmax=1, interpolation="nearest")
    ax.set_title(name)
    ax.set_xlabel("species")
axes[0].set_ylabel("places (shrunk to 300 pixel rows)")
fig.suptitle(source)
fig.tight_layout()
plt.show()
