"""Display compression and the baseline orderings against small cases computed by hand."""

import numpy as np
import pytest
from vastml.reorder import (
    barycentric_order,
    bidirectional_order,
    compress,
    heatmap_order,
    nested_order,
    spectral_order,
)
from vastml.reorder._baselines import _closest_intervals

BLOCKS = np.kron(np.eye(3, dtype=int), np.ones((3, 3), dtype=int))  # thesis Fig. 3.4


def test_compress_mean_of_exact_windows():
    out, score = compress(BLOCKS, (3, 3))  # a = 3, a_odd = 3: windows [0,3) [3,6) [6,9)
    assert out.tolist() == np.eye(3).tolist() and score == 100.0


def test_compress_to_five_rows_samples_the_first_five():
    # a = floor(9 / 5) = 1 -> a_odd = 1, centres r: the block sizes get distorted (Fig. 3.5)
    out, _ = compress(BLOCKS, (5, 5))
    assert out.tolist() == [[1, 1, 1, 0, 0]] * 3 + [[0, 0, 0, 1, 1]] * 2


def test_compress_even_window_is_widened_and_clipped():
    # m = 8 rows to 2: a = 4, a_odd = 5, centres 2 and 6: windows [0,5) and [4,8) (clipped)
    M = np.zeros((8, 1), dtype=int)
    M[[0, 1, 2, 7], 0] = 1
    out, _ = compress(M, (2, 1))
    assert out[:, 0].tolist() == [3 / 5, 1 / 4]
    s, _ = compress(M, (2, 1), method="sample")  # centre cells 2 and 6
    assert s[:, 0].tolist() == [1, 0]
    C = np.array([[5], [5], [5], [6], [6], [7], [6], [6]])
    maj, score = compress(C, (2, 1), method="majority")
    # window 1: 5,5,5,6,6 -> code of 5 (0), 3/5; window 2: 6,7,6,6 -> code of 6 (1), 3/4
    assert maj[:, 0].tolist() == [0, 1] and score == pytest.approx(100 * (3 / 5 + 3 / 4) / 2)


def test_majority_per_column_never_mixes_attributes():
    # Two attributes whose codes collide: column 0 says "a" twice, column 1 says "b" three
    # times in the same 3 x 3 window; the centre column is column 1.
    M = np.array([["x", "y", "x"], ["x", "y", "x"], ["z", "z", "x"]])
    common, s1 = compress(M, (1, 1))
    per, s2 = compress(M, (1, 1), attributes="per_column")
    assert common.tolist() == [[0]] and s1 == pytest.approx(100 * 5 / 9)
    assert per.tolist() == [[1]] and s2 == pytest.approx(100 * 2 / 3)
    # 6 x 4 to 2 x 2: rows a = 3 (windows [0,3) [3,6)); columns b = 2, b_odd = 3, centres 1
    # and 3, windows [0,3) and [2,4) (clipped; its centre stays column 3, not column 2)
    N = np.array([[1, 2, 9, 3], [1, 2, 9, 3], [2, 2, 9, 4], [2, 1, 9, 4], [2, 1, 9, 4], [1, 1, 9, 3]])
    code = {1: 0, 2: 1, 9: 2, 3: 3, 4: 4}  # first appearance, row-major
    per, score = compress(N, (2, 2), attributes="per_column")
    assert per.tolist() == [[code[2], code[3]], [code[1], code[4]]]
    assert score == pytest.approx(100 * (1 + 2 / 3 + 1 + 2 / 3) / 4)
    common, _ = compress(N, (2, 2))
    assert common[0, 0] == code[2]  # 2 has 4 of the 9 cells of rows 0-2, columns 0-2
    assert compress(N, (2, 2), method="sample")[0].tolist() == [[code[2], code[3]], [code[1], code[4]]]
    with pytest.raises(ValueError, match="attributes"):
        compress(N, (2, 2), attributes="mixed")


def test_nested_order_by_hand():
    M = np.array([[1, 0, 0], [1, 1, 1], [0, 1, 0], [1, 1, 0]])
    r, c = nested_order(M)
    assert r.tolist() == [1, 3, 0, 2] and c.tolist() == [0, 1, 2]  # sums 1,3,1,2 / 3,3,1


def test_barycentric_order_by_hand():
    r, c = barycentric_order(np.eye(4, dtype=int)[[2, 0, 3, 1]])  # barycentres 2, 0, 3, 1
    assert r.tolist() == [1, 3, 0, 2] and c.tolist() == [0, 1, 2, 3]
    r, c = barycentric_order(np.array([[0, 0], [0, 1], [1, 0]]))  # empty row last
    assert r.tolist() == [2, 1, 0] and c.tolist() == [0, 1]


def test_closest_intervals_and_bidirectional_by_hand():
    A = np.array([[1, 0, 1, 1, 0, 1], [0, 0, 0, 0, 0, 0], [0, 1, 1, 0, 0, 0]])
    s, e = _closest_intervals(A, only_fill=False)
    # row 0: +1 -1 +1 +1 -1 +1, first best segment is [2, 3] (sum 2)
    assert s.tolist()[0::2] == [2, 1] and e.tolist()[0::2] == [3, 2] and np.isinf(s[1])
    s, e = _closest_intervals(A, only_fill=True)
    assert (s[0], e[0]) == (0, 5)
    band = np.array([[1, 1, 0, 0, 0], [0, 1, 1, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 1, 1]])
    shuffled = band[[3, 1, 0, 2]][:, [4, 0, 2, 1, 3]]
    r, c = bidirectional_order(shuffled)
    out = shuffled[r][:, c]
    assert out.tolist() in (band.tolist(), band[::-1, ::-1].tolist())


def test_spectral_order_follows_a_path_graph():
    # rows 0-1-2 share one column pairwise along a path; columns 0-1-2-3 likewise: the
    # Fiedler vector of a path graph's Laplacian is monotone along the path
    M = np.array([[1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]])
    r, c = spectral_order(M[[2, 0, 1]][:, [3, 1, 0, 2]])
    rows = np.array([2, 0, 1])[r].tolist()
    cols = np.array([3, 1, 0, 2])[c].tolist()
    assert rows in ([0, 1, 2], [2, 1, 0]) and cols in ([0, 1, 2, 3], [3, 2, 1, 0])


def test_heatmap_order_keeps_complete_linkage_pairs_together():
    # Manhattan distances: d(a,b) = d(c,d) = 1, every cross pair >= 3: complete linkage merges
    # {a, b} and {c, d} first, so each pair is adjacent among the leaves
    M = np.array([[1, 1, 0, 0], [0, 0, 1, 1], [1, 1, 1, 0], [0, 0, 0, 1]])  # a, c, b, d
    r, _ = heatmap_order(M)
    pos = {v: i for i, v in enumerate(r.tolist())}
    assert abs(pos[0] - pos[2]) == 1 and abs(pos[1] - pos[3]) == 1
