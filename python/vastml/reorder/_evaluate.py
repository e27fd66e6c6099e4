"""Accuracy of an ordering for labelled rows (thesis §6.3)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from vastml._validation import as_permutation, check_int

if TYPE_CHECKING:
    from vastml._typing import ArrayLike, RandomState


def knn_accuracy(
    order: ArrayLike,
    labels: ArrayLike,
    *,
    n_neighbors: int = 10,
    n_splits: int = 10,
    random_state: RandomState = None,
) -> float:
    """Mean stratified-K-fold accuracy of predicting a row's label from its ``n_neighbors``
    nearest training rows *by position* in the ordered matrix (majority vote).

    Parameters
    ----------
    order : sequence of int
        Original row shown at each position (``ConvoMap.row_order_``).
    labels : sequence
        Label of each original row.

    Examples
    --------
    >>> from vastml.reorder import knn_accuracy
    >>> knn_accuracy(list(range(40)), [0] * 20 + [1] * 20, n_neighbors=3, n_splits=4, random_state=0)
    1.0
    """
    from sklearn.model_selection import StratifiedKFold

    lab = np.asarray(labels)
    if lab.ndim != 1:
        raise ValueError(f"`labels` must be 1-D, got shape {lab.shape}")
    order = as_permutation(order, len(lab), "order")
    check_int(n_neighbors, "n_neighbors", low=1, high=len(order) - 1)
    check_int(n_splits, "n_splits", low=2, high=len(order))
    _, y = np.unique(lab, return_inverse=True)
    y_pos = y[order]  # label at each displayed position
    k = len(np.unique(y))
    accs = []
    folds = StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=random_state)
    for train, test in folds.split(np.zeros(len(y_pos)), y_pos):
        is_train = np.zeros(len(y_pos), dtype=bool)
        is_train[train] = True
        correct = 0
        for i in test:
            votes = np.zeros(k, dtype=np.int64)
            up, down, count = i - 1, i + 1, 0
            while count < n_neighbors and (up >= 0 or down < len(y_pos)):
                if up >= 0:
                    if is_train[up]:
                        votes[y_pos[up]] += 1
                        count += 1
                    up -= 1
                if down < len(y_pos) and count < n_neighbors:
                    if is_train[down]:
                        votes[y_pos[down]] += 1
                        count += 1
                    down += 1
            correct += int(np.argmax(votes) == y_pos[i])
        accs.append(correct / len(test))
    return float(np.mean(accs))
