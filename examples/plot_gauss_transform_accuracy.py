"""
Gauss transform: the error guarantee and the speed
===================================================

:func:`~vastml.kernels.gauss_transform` promises
:math:`\\max_j |\\hat G(y_j) - G(y_j)| \\le \\varepsilon \\sum_i |q_i|`. Here 10,000 sources and
targets in 2-D are summed with every method for a range of ε and compared with the exact direct
sum: the measured error (left) stays under the promised bound (the diagonal), and the time
(right) shows what the approximation buys. The approximate methods get cheaper as ε loosens;
``"auto"`` picks the cheapest for the data at hand.
"""

import time

import matplotlib.pyplot as plt
import numpy as np

from vastml.kernels import gauss_transform

rng = np.random.default_rng(0)
n = 10_000
x, y = rng.uniform(size=(n, 2)), rng.uniform(size=(n, 2))
q = rng.uniform(size=n)
h = 0.2

t0 = time.perf_counter()
exact = gauss_transform(x, y, q, bandwidth=h, method="direct")
t_direct = time.perf_counter() - t0

epsilons = [1e-2, 1e-4, 1e-6, 1e-8, 1e-10]
methods = ["ifgt", "direct-tree", "auto"]
errors = {m: [] for m in methods}
times = {m: [] for m in methods}
for m in methods:
    for eps in epsilons:
        t0 = time.perf_counter()
        G = gauss_transform(x, y, q, bandwidth=h, epsilon=eps, method=m)
        times[m].append(time.perf_counter() - t0)
        errors[m].append(np.max(np.abs(G - exact)) / np.sum(np.abs(q)))

fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
a.loglog(epsilons, epsilons, "k--", lw=1, label="bound ε")
for m in methods:
    a.loglog(epsilons, np.maximum(errors[m], 1e-17), "o-", label=m)
    b.semilogx(epsilons, times[m], "o-", label=m)
b.axhline(t_direct, color="k", ls=":", label="direct (exact)")
a.set_xlabel("ε")
a.set_ylabel("max error / Σ|q|")
a.invert_xaxis()
b.set_xlabel("ε")
b.set_ylabel("seconds")
b.invert_xaxis()
a.legend()
b.legend()
fig.suptitle(f"{n:,} × {n:,} points in 2-D, h = {h}")
fig.tight_layout()
plt.show()
