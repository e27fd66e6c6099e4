"""The distributed estimators on Dask's local schedulers (no ``distributed`` client in this
module): progress is reported as each mapper finishes, and stopping skips the mappers not
yet started."""

import numpy as np
import pytest

dask = pytest.importorskip("dask")

from vastml.datasets import make_binary_waveform  # noqa: E402
from vastml.distributed import AROWMapReduce, _arow_mr  # noqa: E402


def _count_mappers(monkeypatch):
    calls = []
    mapper = _arow_mr.arow_map

    def counted(*args, **kwargs):
        calls.append(len(calls))
        return mapper(*args, **kwargs)

    monkeypatch.setattr(_arow_mr, "arow_map", counted)
    return calls


@pytest.mark.parametrize("scheduler", ["synchronous", "threads"])
def test_arow_mr_reports_each_mapper_as_it_finishes(monkeypatch, scheduler):
    X, y = make_binary_waveform(4000, random_state=11)
    calls = _count_mappers(monkeypatch)
    seen = []

    def callback(it, objective, rows):
        seen.append((it, rows, len(calls)))

    with dask.config.set(scheduler=scheduler):
        est = AROWMapReduce(update_damping=5.0, n_partitions=4, random_state=3, callbacks=callback).fit(X, y)
    assert [s[0] for s in seen] == [1, 2, 3, 4] and [s[1] for s in seen] == [1000, 2000, 3000, 4000]
    if scheduler == "synchronous":  # one mapper at a time: each report comes before the next runs
        assert [s[2] for s in seen] == [1, 2, 3, 4]
    assert not est.stopped_early_ and (est.partition_sizes_ == 1000).all()


def test_arow_mr_stop_on_the_local_scheduler_skips_the_remaining_mappers(monkeypatch):
    X, y = make_binary_waveform(4000, random_state=11)
    calls = _count_mappers(monkeypatch)
    with dask.config.set(scheduler="synchronous"):
        est = AROWMapReduce(
            update_damping=5.0, n_partitions=4, random_state=3, callbacks=lambda it, obj, rows: it >= 2
        ).fit(X, y)
    assert len(calls) == 2 and est.stopped_early_
    assert (est.partition_sizes_ > 0).sum() == 2 and est.score(X, y) > 0.8
    with dask.config.set(scheduler="synchronous"), pytest.raises(ZeroDivisionError):
        AROWMapReduce(n_partitions=2, callbacks=lambda *a: 1 / 0).fit(X, y)
