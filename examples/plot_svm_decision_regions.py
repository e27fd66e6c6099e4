"""
Budgeted SVMs: decision regions on a checkerboard
==================================================

A 4 × 4 checkerboard (:func:`~vastml.datasets.make_checkerboard`, centred to
:math:`[-1, 1]^2`) cannot be separated by a line. The pictures show what each classifier of
:mod:`vastml.svm` draws with a fixed budget: Pegasos and AROW are linear; AMM combines a few
hyperplanes per class (GAMM lets it grow them by cloning); LLSVM is a linear SVM on the Nyström
map of 100 landmarks; BSGD is a kernel SVM capped at 100 support vectors.
"""

import time

import matplotlib.pyplot as plt
import numpy as np

from vastml.datasets import make_checkerboard
from vastml.svm import (
    AMMClassifier,
    AROWClassifier,
    BSGDClassifier,
    LLSVMClassifier,
    PegasosClassifier,
)

X, y = make_checkerboard(6_000, random_state=0)
X = 2 * X - 1
X_train, y_train, X_test, y_test = X[:5_000], y[:5_000], X[5_000:], y[5_000:]

models = {
    "Pegasos (linear)": PegasosClassifier(random_state=0),
    "AROW (linear)": AROWClassifier(random_state=0),
    # GAMM with the thesis' settings for this board: 15 epochs, pruning constant 50.
    "GAMM": AMMClassifier(variant="thesis", clone_probability=0.2, max_iter=15, prune_c=50.0,
                          random_state=0),
    "LLSVM, 100 landmarks": LLSVMClassifier(n_landmarks=100, gamma=10.0, random_state=0),
    "BSGD, 100 SVs": BSGDClassifier(budget=100, gamma=10.0, random_state=0),
}

grid = np.linspace(-1, 1, 200)
gx, gy = np.meshgrid(grid, grid)
G = np.column_stack([gx.ravel(), gy.ravel()])

fig, axes = plt.subplots(1, len(models), figsize=(15, 3.4))
for ax, (name, model) in zip(axes, models.items()):
    t0 = time.perf_counter()
    model.fit(X_train, y_train)
    seconds = time.perf_counter() - t0
    Z = model.predict(G).reshape(gx.shape)
    ax.contourf(gx, gy, Z, levels=[-0.5, 0.5, 1.5], cmap="coolwarm", alpha=0.5)
    ax.scatter(X_test[:300, 0], X_test[:300, 1], c=y_test[:300], cmap="coolwarm", s=4)
    error = 1 - model.score(X_test, y_test)
    ax.set_title(f"{name}\ntest error {error:.1%}, {seconds:.2f} s", fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
fig.tight_layout()
plt.show()
