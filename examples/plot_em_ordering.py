"""
EM-ordering: ignoring noisy features
=====================================

Waveform data with 21 extra columns of pure noise: a TSP path through all 42 features is
driven as much by the noise as by the signal. :class:`~vastml.reorder.EMOrdering` alternates
ordering the rows with estimating each feature's noise scale along the order, and drops the
features that the order does not explain. Its ``active_`` attribute tells which features it kept.
"""

import matplotlib.pyplot as plt
import numpy as np

from vastml.datasets import make_waveform
from vastml.reorder import EMOrdering, TSPMeans, figure_of_merit

X, y = make_waveform(1_500, noise_features=21, random_state=0)
X = (X - X.mean(axis=0)) / X.std(axis=0)

plain = TSPMeans(polish_window=0, random_state=0).fit(X).order_
em = EMOrdering(random_state=0).fit(X)
print(f"features kept: {int(np.sum(em.active_))} of {X.shape[1]}")

fig, axes = plt.subplots(1, 3, figsize=(11, 4.5), gridspec_kw={"width_ratios": [3, 3, 2]})
for ax, (name, o) in zip(axes, [("TSP-means on all features", plain), ("EM-ordering", em.order_)]):
    ax.imshow(X[o], aspect="auto", cmap="RdBu_r", vmin=-2.5, vmax=2.5, interpolation="nearest")
    ax.axvline(20.5, color="k", lw=1)
    ax.set_title(f"{name}\nFOM {figure_of_merit(y, o):.3f} (lower is better)")
    ax.set_xlabel("21 signal | 21 noise features")
axes[0].set_ylabel("rows in the order found")
axes[2].bar(np.arange(X.shape[1]), np.where(em.active_, 1.0, 0.2),
            color=["C0" if j < 21 else "C3" for j in range(X.shape[1])])
axes[2].set_title("features kept by EM-ordering\n(blue: signal, red: noise)")
axes[2].set_yticks([])
axes[2].set_xlabel("feature")
fig.tight_layout()
plt.show()
