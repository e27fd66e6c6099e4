"""EM-ordering on the waveform generator (spec oracles 12-13) and its backends."""

import numpy as np
import pytest

from vastml.datasets import make_waveform
from vastml.reorder import EMOrdering, TSPMeans, figure_of_merit


def test_waveform_generator_shape_and_classes():
    X, y = make_waveform(600, noise_features=4, random_state=0)
    assert X.shape == (600, 25) and set(y.tolist()) == {0, 1, 2}
    # class means follow the triangular waves: class 2 (h2, h3) is low at feature 11 centre-ish
    assert X[y == 0, 10].mean() > 2 and X[:, 21:].std() == pytest.approx(1, abs=0.1)
    with pytest.raises(ValueError):
        make_waveform(0)


def test_hard_scaling_drops_noise_and_em_lowers_fom():
    X, y = make_waveform(600, noise_features=21, random_state=1)
    base = figure_of_merit(y, TSPMeans(random_state=0).fit((X - X.mean(0)) / X.std(0)).order_)
    em = EMOrdering(n_iter=3, random_state=0).fit(X)
    assert (~em.active_[21:]).mean() >= 0.9
    assert em.active_[5:16].all()  # the informative middle features stay
    fom = figure_of_merit(y, em.order_)
    assert fom < base
    first = figure_of_merit(y, em.history_[0]["order"])
    assert fom <= first + 0.02
    assert len(em.history_) == 3 and em.history_[-1]["n_active"] < 42


def test_backends_and_bad_input():
    X, _ = make_waveform(12, random_state=2)
    ex = EMOrdering(n_iter=2, orderer="exact").fit(X)
    assert sorted(ex.order_.tolist()) == list(range(12))
    cal = EMOrdering(n_iter=1, orderer=lambda z: np.argsort(z[:, 0])).fit(X)
    assert sorted(cal.order_.tolist()) == list(range(12))
    with pytest.raises(ValueError, match="permutation"):
        EMOrdering(orderer=lambda z: np.zeros(len(z), int)).fit(X)
    with pytest.raises(ValueError, match="alpha"):
        EMOrdering(alpha=0.5).fit(X)
    with pytest.raises(ValueError, match="constant"):
        EMOrdering().fit(np.ones((5, 3)))
    with pytest.raises(ValueError, match="NaN"):
        EMOrdering().fit(np.full((5, 3), np.nan))
