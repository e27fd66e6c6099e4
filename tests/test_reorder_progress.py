"""The progress protocol (vastml._progress) of the reorder estimators whose loops run in Rust:
TSPMeans (a report per sweep and one after the polish), branch_and_bound_order (a report per
better incumbent), heatmap's bar; and Ctrl-C stopping the Rust loops."""

from __future__ import annotations


import numpy as np
import pytest
from _interrupt import seconds_to_stop

from vastml.reorder import (
    TSPMeans,
    branch_and_bound_order,
    convolution_error,
    heatmap,
    path_length,
)


def _blobs(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=10.0, size=(8, 3))
    return centres[rng.integers(8, size=n)] + rng.normal(size=(n, 3))


def _is_perm(o, n):
    return np.array_equal(np.sort(o), np.arange(n))


def test_tspmeans_callbacks_see_every_sweep_and_the_polish():
    X = _blobs()
    seen = []
    tm = TSPMeans(levels=3, random_state=0,
                  callbacks=lambda it, obj, order: seen.append((it, obj, order.copy()))).fit(X)
    its = [s[0] for s in seen]
    assert its == list(range(1, tm.n_sweeps_ + 2)) and tm.n_iter_ == tm.n_sweeps_ + 1
    for _, obj, order in seen:  # objective = L of the order handed over
        assert _is_perm(order, len(X)) and obj == pytest.approx(path_length(X, order))
    assert np.array_equal(seen[-1][2], tm.order_) and seen[-1][1] == pytest.approx(tm.path_length_)
    assert not tm.stopped_early_
    # the coarse orders get shorter sweep by sweep; the polish shortens the last one
    lengths = [s[1] for s in seen]
    assert lengths[-1] < lengths[-2] < lengths[0]
    plain = TSPMeans(levels=3, random_state=0).fit(X)
    assert np.array_equal(plain.order_, tm.order_), "callbacks must not change the result"
    # callback_every=2: iterations 2, 4, ...
    seen.clear()
    TSPMeans(levels=3, random_state=0, callback_every=2,
             callbacks=[lambda it, obj, order: seen.append((it, obj, order))]).fit(X)
    assert [s[0] for s in seen] == list(range(2, tm.n_sweeps_ + 2, 2))


def test_tspmeans_a_true_callback_stops_with_the_order_so_far():
    X = _blobs()
    full = TSPMeans(levels=3, random_state=0).fit(X)
    tm = TSPMeans(levels=3, random_state=0, callbacks=lambda it, obj, order: it >= 1).fit(X)
    assert tm.stopped_early_ and tm.n_sweeps_ == 1 < full.n_sweeps_ and tm.n_iter_ == 1
    assert _is_perm(tm.order_, len(X))
    assert tm.path_length_ == pytest.approx(path_length(X, tm.order_))
    assert tm.path_length_ > full.path_length_  # the coarse order of one sweep, unpolished


def test_tspmeans_callback_errors_propagate_and_verbose_draws_a_bar(capsys):
    X = _blobs(500)

    def boom(it, obj, order):
        raise RuntimeError("boom in a callback")

    with pytest.raises(RuntimeError, match="boom in a callback"):
        TSPMeans(random_state=0, callbacks=boom).fit(X)
    with pytest.raises(TypeError, match="callbacks"):
        TSPMeans(callbacks=3).fit(X)
    TSPMeans(random_state=0, verbose=True).fit(X)
    assert "TSPMeans" in capsys.readouterr().err


def _stairs(n=12, seed=3):
    rng = np.random.default_rng(seed)
    M = np.zeros((n, 14), int)
    for i in range(n):
        a = rng.integers(0, 10)
        M[i, a : a + rng.integers(2, 5)] = 1
    return M


def test_branch_and_bound_callbacks_see_each_better_order_and_can_stop():
    M = _stairs()
    ident = np.arange(len(M))
    seen = []
    order, err = branch_and_bound_order(
        M, initial=ident, callbacks=lambda k, cost, o: seen.append((k, cost, o.copy())))
    assert [s[0] for s in seen] == list(range(1, len(seen) + 1)) and seen
    costs = [s[1] for s in seen]
    for o in (s[2] for s in seen):
        assert _is_perm(o, len(M))
    # each report is a better incumbent than the start; the errors of the reported orders
    # rank as their costs (cost = a constant minus a multiple of the error's overlaps)
    errs = [convolution_error(M, padding="zero", row_order=s[2]) for s in seen]
    assert min(errs) == pytest.approx(err)
    assert errs[int(np.argmin(costs))] == pytest.approx(err)
    plain, plain_err = branch_and_bound_order(M, initial=ident)
    assert plain_err == pytest.approx(err)
    # True at the first improvement: that order comes back (not proven optimal)
    first = []
    o1, e1 = branch_and_bound_order(M, initial=ident,
                                    callbacks=lambda k, c, o: first.append(o.copy()) or True)
    assert _is_perm(o1, len(M)) and e1 >= err - 1e-12
    assert e1 == pytest.approx(convolution_error(M, padding="zero", row_order=o1))
    assert e1 <= convolution_error(M, padding="zero", row_order=ident)


def test_branch_and_bound_callback_errors_propagate_and_verbose_draws_a_bar(capsys):
    M = _stairs()

    def boom(k, cost, o):
        raise ValueError("boom in a callback")

    with pytest.raises(ValueError, match="boom in a callback"):
        branch_and_bound_order(M, initial=np.arange(len(M)), callbacks=boom)
    branch_and_bound_order(M, initial=np.arange(len(M)), verbose=True)
    assert "branch_and_bound_order" in capsys.readouterr().err


def test_heatmap_verbose_draws_the_seriation_bars(capsys):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    X = np.random.default_rng(0).random((60, 5))
    heatmap(X, time_limit=0.05, verbose=True)
    assert "seriate TSP" in capsys.readouterr().err


@pytest.mark.parametrize(
    "call",
    [
        "TSPMeans(random_state=0).fit(x)",
        "branch_and_bound_order(m)",
        "tsp_path(x)",
    ],
)
def test_ctrl_c_stops_the_rust_loops(call):
    setup = """
        import numpy as np
        from vastml.reorder import TSPMeans, branch_and_bound_order, tsp_path
        x = np.random.default_rng(0).random((2_000_000, 3))
        m = (np.random.default_rng(1).random((40, 60)) < 0.3).astype(int)
    """
    assert seconds_to_stop(setup, call, wait=1.5) < 20


def test_em_ordering_follows_the_protocol(capsys):
    from vastml.datasets import make_waveform
    from vastml.reorder import EMOrdering

    X, _ = make_waveform(200, noise_features=3, random_state=0)
    seen = []
    em = EMOrdering(max_iter=4, tol=0.0, random_state=0,
                    callbacks=lambda it, h, order: seen.append((it, h, order))).fit(X)
    assert [s[0] for s in seen] == list(range(1, em.n_iter_ + 1))
    assert [s[1] for s in seen] == pytest.approx([h["H"] for h in em.history_])
    assert np.array_equal(seen[-1][2], em.order_) and not em.stopped_early_
    stop = EMOrdering(max_iter=4, tol=0.0, random_state=0, callbacks=lambda it, h, o: it >= 1).fit(X)
    assert stop.stopped_early_ and stop.n_iter_ == 1 and _is_perm(stop.order_, len(X))

    def boom(it, h, order):
        raise RuntimeError("boom in EM")

    with pytest.raises(RuntimeError, match="boom in EM"):
        EMOrdering(max_iter=2, random_state=0, callbacks=boom).fit(X)
    EMOrdering(max_iter=2, random_state=0, verbose=True).fit(X)
    assert "EMOrdering" in capsys.readouterr().err
