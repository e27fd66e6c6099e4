"""Seriation criteria against values R ``seriation`` 1.4.1 computed once, and against direct
triple / pair loops written from the definitions."""

import itertools

import numpy as np
import pytest
from scipy.spatial.distance import pdist, squareform

from vastml.reorder import criterion

# R fixture (run once with R 4 + seriation 1.4.1):
#   P <- matrix(c(6.3, 9.0, 7.8, 2.3, 3.0, 8.7, 0.1, 8.2, 8.0, 4.7, 3.0, 2.8, 2.5, 4.5),
#               ncol = 2, byrow = TRUE)
#   d <- dist(P); o <- ser_permutation(c(2, 3, 5, 6, 0, 4, 1) + 1)
#   criterion(d, o, method = m); criterion(d, method = m)   # m = the names below
#   criterion(d, o, method = "BAR", b = 2)
P = np.array([[6.3, 9.0], [7.8, 2.3], [3.0, 8.7], [0.1, 8.2], [8.0, 4.7], [3.0, 2.8], [2.5, 4.5]])
ORDER = [2, 3, 5, 6, 0, 4, 1]
R_ORDERED = {
    "Path_length": 23.7662213303563,
    "AR_events": 21,
    "AR_deviations": 30.4032924988709,
    "Gradient_raw": 28,
    "Gradient_weighted": 103.176972688976,
    "Inertia": 2591.53655330047,
    "Least_squares": 455.533231614322,
    "BAR": 23.7662213303563,
    "ME": 7.02293729782104,
    "Moore_stress": 44.9921964522638,
    "Neumann_stress": 29.5699862042419,
    "2SUM": 55.7117871201529,
}
R_IDENTITY = {
    "Path_length": 33.5700833451058,
    "AR_events": 33,
    "AR_deviations": 82.5451697600078,
    "Gradient_raw": 4,
    "Gradient_weighted": -8.03099668410015,
    "Inertia": 2156.91199126848,
    "Least_squares": 603.810524111758,
    "BAR": 33.5700833451058,
    "ME": 6.07961702346802,
    "Moore_stress": 48.4380453526678,
    "Neumann_stress": 33.1684621960237,
    "2SUM": 63.3655613503715,
}
R_BAR_B2 = 77.2356826698492
# R: X <- matrix(c(5,5,9,7,6, 9,2,1,6,0, 0,5,4,8,6, 5,4,2,0,2, 6,2,3,0,7, 1,2,8,5,8), ncol = 5,
#                byrow = TRUE)
#    om <- ser_permutation(c(0, 1, 3, 2, 5, 4) + 1, c(3, 2, 4, 1, 0) + 1)
#    criterion(X, om, method = c("ME", "Moore_stress", "Neumann_stress")); criterion(X, method = ...)
X = np.array([[5, 5, 9, 7, 6], [9, 2, 1, 6, 0], [0, 5, 4, 8, 6], [5, 4, 2, 0, 2], [6, 2, 3, 0, 7],
              [1, 2, 8, 5, 8]])
R_MATRIX_ORDERED = {"ME": 904, "Moore_stress": 2600, "Neumann_stress": 1344}
R_MATRIX_IDENTITY = {"ME": 801, "Moore_stress": 3126, "Neumann_stress": 1606}


@pytest.mark.parametrize("order,want", [(ORDER, R_ORDERED), (None, R_IDENTITY)])
def test_dissimilarity_criteria_equal_r(order, want):
    D = squareform(pdist(P))
    got = criterion(D, order, method=list(want))
    for m, v in want.items():
        # R computes ME on single-precision floats
        rel = 1e-6 if m == "ME" else 1e-12
        assert got[m] == pytest.approx(v, rel=rel, abs=1e-12), m
    assert criterion(D, ORDER, method="BAR", band=2) == pytest.approx(R_BAR_B2, rel=1e-12)


def test_matrix_criteria_equal_r():
    got = criterion(X, [0, 1, 3, 2, 5, 4], col_order=[3, 2, 4, 1, 0],
                    method=["ME", "Moore_stress", "Neumann_stress"])
    assert got == {k: float(v) for k, v in R_MATRIX_ORDERED.items()}
    got = criterion(X, None, col_order=np.arange(5), method=list(R_MATRIX_IDENTITY))
    assert got == {k: float(v) for k, v in R_MATRIX_IDENTITY.items()}


def _loops(D, o):
    """The definitions as plain loops over pairs and triples."""
    n = len(o)
    d = lambda i, j: D[o[i], o[j]]  # noqa: E731
    out = dict(Path_length=sum(d(i, i + 1) for i in range(n - 1)), AR_events=0, AR_deviations=0.0,
               Gradient_raw=0, Gradient_weighted=0.0)
    for i, k, j in itertools.combinations(range(n), 3):
        for near in (d(i, k), d(k, j)):
            out["AR_events"] += d(i, j) < near
            out["AR_deviations"] += max(0.0, near - d(i, j))
            out["Gradient_raw"] += np.sign(d(i, j) - near)
            out["Gradient_weighted"] += d(i, j) - near
    out["Inertia"] = sum(d(i, j) * (i - j) ** 2 for i in range(n) for j in range(n))
    out["Least_squares"] = sum((d(i, j) - abs(i - j)) ** 2 for i in range(n) for j in range(n))
    b = 3
    out["BAR"] = sum((b + 1 - (j - i)) * d(i, j) for i in range(n) for j in range(i + 1, min(n, i + b + 1)))
    return out


def test_criteria_equal_loops_on_random_data():
    rng = np.random.default_rng(3)
    for n in (5, 9, 16):
        D = squareform(pdist(rng.normal(size=(n, 3))))
        o = rng.permutation(n)
        want = _loops(D, o)
        for m, v in want.items():
            got = criterion(D, o, method=m, band=3 if m == "BAR" else None)
            assert got == pytest.approx(v, rel=1e-12, abs=1e-9), (n, m)


def test_hand_computed_values():
    # objects on a line at 0, 1, 2, 4: the sorted order is a perfect anti-Robinson matrix
    x = np.array([0.0, 2.0, 1.0, 4.0])
    D = np.abs(np.subtract.outer(x, x))
    s = [0, 2, 1, 3]
    assert criterion(D, s) == 4.0
    assert criterion(D, s, method="AR_events") == 0.0
    # identity order 0, 2, 1, 4: triples (0,1,2): d(0,1)=1 < d(0,2)=2 -> 1 event; d(0,1)=1 vs
    # d(2,1)=1 equal -> none; (1,2,3) rows: d(2,4)=2 < d(2,1)=1? no; d(2,4)=2 < d(1,4)=3 -> 1.
    assert criterion(D, None, method="AR_events") == 2.0
    # Gradient_raw of the sorted order: 4 triples x 2 strictly increasing comparisons
    assert criterion(D, s, method="Gradient_raw") == 8.0
    # 2x2 matrix [[1, 2], [3, 4]]: ME = 1*2 + 3*4 + 1*3 + 2*4 = 25; Neumann 2*(1+1+4+4) = 20
    M = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert criterion(M, None, col_order=[0, 1], method="ME") == 25.0
    assert criterion(M, None, col_order=[0, 1], method="Neumann_stress") == 20.0
    # Moore adds the diagonals (1-4)^2 + (3-2)^2 = 10, doubled
    assert criterion(M, None, col_order=[0, 1], method="Moore_stress") == 40.0


def test_bad_arguments():
    D = np.zeros((3, 3))
    with pytest.raises(ValueError, match="method"):
        criterion(D, method="nope")
    with pytest.raises(ValueError, match="order"):
        criterion(D, [0, 0, 1])
    with pytest.raises(ValueError, match="square"):
        criterion(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="symmetric"):
        criterion(np.array([[0.0, 1.0], [2.0, 0.0]]))
    with pytest.raises(ValueError, match="band"):
        criterion(D, method="BAR", band=3)
    with pytest.raises(ValueError, match="non-negative"):
        criterion(-np.ones((2, 2)), col_order=[0, 1], method="ME")
