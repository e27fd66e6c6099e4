"""
Parametric Embedding of a classifier
=====================================

:class:`~vastml.embed.ParametricEmbedding` places each class at a centre and each object so
that a Gaussian mixture on the centres reproduces the classifier's posteriors. Classes the
classifier confuses end up close together, and objects it is unsure about sit between their
candidate classes. :func:`~vastml.embed.embed_classifier` takes any fitted classifier with
``predict_proba``.

Here a logistic regression is trained on half of the handwritten digits and its posteriors on
the other half are embedded.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression

from vastml.embed import embed_classifier

X, y = load_digits(return_X_y=True)
X = X / 16.0
half = X.shape[0] // 2
clf = LogisticRegression(C=0.05, max_iter=500).fit(X[:half], y[:half])
pe = embed_classifier(clf, X[half:], random_state=0)

E, C = pe.embedding_, pe.class_embedding_
fig, ax = plt.subplots(figsize=(6.5, 6))
ax.scatter(E[:, 0], E[:, 1], c=y[half:], cmap="tab10", s=8, alpha=0.7)
for k, (cx, cy) in enumerate(C):
    ax.text(cx, cy, str(clf.classes_[k]), fontsize=16, weight="bold", ha="center", va="center",
            bbox=dict(boxstyle="circle", fc="white", ec=plt.cm.tab10(k / 9)))
n_test = X.shape[0] - half
ax.set_title(f"posteriors of {n_test} test digits (KL per digit {pe.kl_ / n_test:.3f})")
ax.set_xticks([])
ax.set_yticks([])
fig.tight_layout()
plt.show()
