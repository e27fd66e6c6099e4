"""
A sharded kernel density on a Dask cluster
===========================================

:class:`~vastml.distributed.ShardedKernelDensity` splits the evaluation of a kernel density
over the workers of a Dask cluster: the sample (here 200,000 points drawn from a ring and two
blobs) is scattered once, and a lazy Dask array of targets, which could be larger than any
worker's memory, is evaluated chunk by chunk on the workers. The ε guarantee of the Gauss
transform holds for every target.

A ``LocalCluster`` of two single-thread workers stands in for a real cluster; to use one,
connect a ``distributed.Client`` to its scheduler's address instead.
"""

import time

import dask.array as da
import matplotlib.pyplot as plt
import numpy as np
from distributed import Client, LocalCluster

from vastml.distributed import ShardedKernelDensity

rng = np.random.default_rng(0)
n = 200_000
angle = rng.uniform(0, 2 * np.pi, n // 2)
ring = np.column_stack([np.cos(angle), np.sin(angle)]) * 2 + 0.15 * rng.normal(size=(n // 2, 2))
blobs = np.vstack([
    rng.normal([0.6, 0.3], 0.25, (n // 4, 2)),
    rng.normal([-0.7, -0.5], 0.35, (n // 4, 2)),
])
points = np.vstack([ring, blobs])

side = 400
g = np.linspace(-3, 3, side)
gx, gy = np.meshgrid(g, g)
targets = da.from_array(np.column_stack([gx.ravel(), gy.ravel()]), chunks=(side * side // 4, 2))

cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None)
client = Client(cluster)
t0 = time.perf_counter()
kde = ShardedKernelDensity(bandwidth=0.08, epsilon=1e-6, client=client, n_jobs=1).fit(points)
density = kde.density(targets)  # lazy: nothing has run yet
values = density.compute()
seconds = time.perf_counter() - t0
client.close()
cluster.close()

fig, ax = plt.subplots(figsize=(6, 5.4))
im = ax.imshow(values.reshape(side, side), origin="lower", extent=(-3, 3, -3, 3), cmap="magma")
fig.colorbar(im, ax=ax, label="density")
ax.set_title(f"{n:,} points, {side * side:,} targets on 2 workers: {seconds:.1f} s")
fig.tight_layout()
plt.show()
