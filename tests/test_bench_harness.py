"""Tests of benches/_harness.py alone (dummy callables, tiny numpy work, no sleeps)."""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches"))
import _harness  # noqa: E402
from _harness import Bench, Timing  # noqa: E402


@pytest.fixture
def bench(tmp_path):
    return Bench("dummy", ["--out", str(tmp_path)])


def test_timing_median_and_min():
    t = Timing([3.0, 1.0, 2.0])
    assert (t.median, t.min) == (2.0, 1.0)
    assert Timing([4.0, 1.0, 3.0, 2.0]).median == 2.5


def test_time_calls_warmup_plus_repeats_and_keeps_last_value(bench):
    calls = []

    def fn():
        calls.append(1)
        return np.arange(len(calls)).sum()

    t = bench.time(fn, warmup=2, repeats=4)
    assert len(calls) == 6 and len(t.times) == 4
    assert t.value == sum(range(6))
    assert all(x >= 0 for x in t.times) and t.min <= t.median <= max(t.times)
    assert len(bench.time(fn, warmup=0).times) == bench.repeats == 5


def test_parsing_quick_repeats_out_and_extra_args(tmp_path):
    assert Bench("a", []).repeats == 5 and not Bench("a", []).quick
    q = Bench("a", ["--quick"])
    assert q.quick and 1 <= q.repeats <= 3
    assert Bench("a", ["--quick", "--repeats", "7"]).repeats == 7
    assert Bench("a", [], repeats=3, quick_repeats=2).repeats == 3
    assert Bench("a", ["--quick"], repeats=3, quick_repeats=2).repeats == 2
    b = Bench("a", ["--out", str(tmp_path), "--rows", "d=3"],
              add_args=lambda ap: ap.add_argument("--rows", action="append"))
    assert b.out == tmp_path and b.args.rows == ["d=3"]
    assert Bench("a", []).out == Path(_harness.__file__).resolve().parent / "results"


def test_ratio_is_peer_over_ours(bench):
    x = np.random.default_rng(0).random(200_000)
    row = bench.compare("tiny", lambda: x[:10].sum(),
                        {"heavy": lambda: np.sort(x), "paper": 2.0, "given": Timing([0.5])},
                        {"n": 10}, warmup=1, repeats=3)
    assert row.ratio("heavy") > 1  # the peer is slower: we are faster
    assert row.ratio("paper") == pytest.approx(2.0 / row.ours.median)
    fixed = bench.compare("fixed", Timing([1.0, 2.0, 3.0]),
                          {"paper": 8.0, "fast": Timing([0.5])}, {})
    assert fixed.ratio("paper") == 4.0 and fixed.ratio("fast") == 0.25
    assert isinstance(row.peers["heavy"], Timing) and isinstance(row.peers["paper"], float)


def test_report_writes_json_and_returns_zero(bench, tmp_path, capsys):
    peers = {"FIGTree": 3.0, "live": Timing([2.0], note="ext. x10")}
    row = bench.compare("r1", Timing([1.0]), peers, {"d": 3, "h": 0.1},
                        {"err/Σq": 1e-9, "method": "ifgt"})
    row.extra["late"] = np.float64(0.5)  # extra can be completed after compare
    bench.skip("r2", {"d": 8}, "skipped (est. 99 s)")
    bench.check("fast enough", row.ratio("FIGTree") >= 2, "3.0x", row=row)
    bench.check("not met", False, "nope")
    assert bench.report() == 0
    out = capsys.readouterr().out
    assert "targets: 1/2 met" in out and "(published)" in out and "(ext. x10)" in out
    assert "skipped (est. 99 s)" in out and "3.00x" in out
    doc = json.loads((tmp_path / "dummy.json").read_text())
    assert {"machine", "commit", "dirty", "date", "quick", "rows", "checks"} <= set(doc)
    assert doc["machine"]["cores"] >= 1 and "numpy" in doc["machine"]
    assert doc["quick"] is False and doc["targets_met"] == 1 and doc["targets_total"] == 2
    r1, r2 = doc["rows"]
    assert r1["ours"]["median"] == 1.0 and r1["params"] == {"d": 3, "h": 0.1}
    assert r1["peers"]["FIGTree"] == {"seconds": 3.0, "kind": "published", "ratio": 3.0}
    assert r1["peers"]["live"]["kind"] == "live" and r1["peers"]["live"]["ratio"] == 2.0
    assert r1["extra"] == {"err/Σq": 1e-9, "method": "ifgt", "late": 0.5}
    assert r2["ours"] is None and r2["extra"]["note"] == "skipped (est. 99 s)"
    assert doc["checks"][0] == {"name": "fast enough", "ok": True, "detail": "3.0x", "row": 0}
    assert doc["checks"][1]["row"] is None


def test_commit_tolerates_missing_git(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no git binary on PATH
    b = Bench("nogit", ["--out", str(tmp_path)])
    assert b.commit is None and b.dirty is None
    assert b.report() == 0 and json.loads((tmp_path / "nogit.json").read_text())["commit"] is None


def test_run_isolated_returns_dict_and_own_peak_memory(bench):
    big = np.ones(20_000_000)  # 160 MB in the parent must not show in the child's peak
    res = bench.run_isolated("import json, numpy as np\nprint('noise')\n"
                             "a = np.ones(6_000_000)  # 48 MB\n"
                             "print(json.dumps({'s': float(a.sum()), 'main': __name__}))")
    assert res["s"] == 6e6 and res["main"] == "__main__" and res["returncode"] == 0
    assert "error" not in res and res["wall_seconds"] > 0
    assert 48e6 < res["peak_rss_bytes"] < big.nbytes
    small = bench.run_isolated("print('{\"x\": 1}')")
    assert small["x"] == 1 and 0 < small["peak_rss_bytes"] < res["peak_rss_bytes"]


def test_run_isolated_sees_benches_on_path(bench):
    res = bench.run_isolated("import json, _harness; print(json.dumps({'ok': True}))")
    assert res["ok"] is True


def test_run_isolated_reports_failures_without_raising(bench):
    res = bench.run_isolated("raise ValueError('boom')")
    assert res["returncode"] != 0 and "boom" in res["error"]
    res = bench.run_isolated("print('not json')")
    assert res["returncode"] == 0 and "JSON" in res["error"]
    res = bench.run_isolated("while True: pass", timeout=0.3)
    assert res["error"].startswith("timeout") and res["peak_rss_bytes"] is None


def test_grid_extrapolation_is_not_flattened_by_a_slow_middle_prefix():
    from _figtree import extrapolate

    # a load burst during the middle prefix: the line through the last two is flat, but the
    # first call bounds the fixed part, so the per-target cost stays near the true 45 us
    assert extrapolate({512: 0.03, 5120: 0.48, 10240: 0.49}, 102400) == pytest.approx(4.63)
    # a large fixed part (the IFGT's coefficients) is not multiplied with the targets
    assert extrapolate({512: 1.0, 5120: 1.05, 10240: 1.1}, 102400) == pytest.approx(2.0)
    # all targets timed: no extrapolation
    assert extrapolate({512: 0.01, 2000: 0.04}, 2000) == 0.04
