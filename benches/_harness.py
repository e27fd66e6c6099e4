"""Shared helper for the ``benches/<area>.py`` scripts.

    bench = Bench("gauss")                         # parses --quick, --repeats N, --out DIR
    t = bench.time(fn)                             # Timing: median/min/times/value
    row = bench.compare("direct", ours, {"FIGTree": 3.74, "sklearn": peer_fn}, {"d": 3})
    bench.check("direct >= 8x FIGTree", row.ratio("FIGTree") >= 8, "...", row=row)
    info = bench.run_isolated("...; print(json.dumps({...}))")  # + peak_rss_bytes, wall_seconds
    sys.exit(bench.report())                       # table + results/<area>.json, always 0

Peers are callables (timed live, in this process, right after ours), floats (published
seconds we cannot run here, shown as "published") or ready-made ``Timing`` objects (e.g.
extrapolated from a subsample; their ``note`` is shown).  ratio = peer / ours: > 1 means
we are faster.  Targets are recorded with ``check`` and never fail the process.
Only the stdlib is needed (numpy/scipy/sklearn versions are read from package metadata).
"""
from __future__ import annotations

import argparse, datetime, json, math, os, platform, statistics, subprocess, sys, tempfile
import threading, time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent


@dataclass(eq=False)
class Timing:
    times: list[float]           # seconds, one per repeat
    value: Any = None            # return value of the last call
    note: str = ""               # e.g. "ext. from 2000 targets"

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def min(self) -> float:
        return min(self.times)

    def to_json(self) -> dict:
        return {"median": self.median, "min": self.min, "times": self.times, "note": self.note}


@dataclass(eq=False)
class Row:
    name: str
    params: dict
    ours: Timing | None                              # None: skipped (see extra["note"])
    peers: dict[str, Timing | float] = field(default_factory=dict)
    extra: dict = field(default_factory=dict)

    def peer_seconds(self, peer: str) -> float:
        p = self.peers[peer]
        return p.median if isinstance(p, Timing) else float(p)

    def ratio(self, peer: str) -> float:
        """Speed-up peer / ours (> 1: we are faster)."""
        ok = self.ours is not None and self.ours.median > 0
        return self.peer_seconds(peer) / self.ours.median if ok else float("nan")


def fmt_s(t: float | None) -> str:
    if t is None or t != t:
        return "-"
    return f"{t * 1e3:.2f} ms" if t < 1 else f"{t:.3f} s"


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.2e}" if v != 0 and (abs(v) < 1e-2 or abs(v) >= 1e5) else f"{v:.4g}"
    return "" if v is None else str(v)


def _jsonable(o: Any) -> Any:
    """JSON-ready copy: numpy scalars/arrays to Python, NaN/inf to None, unknown objects to str."""
    if isinstance(o, dict):
        return {str(k): _jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_jsonable(v) for v in o]
    if hasattr(o, "tolist"):
        return _jsonable(o.tolist())
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return o if o is None or isinstance(o, (str, int, float)) else str(o)


def _run(cmd: list[str]) -> str | None:
    try:
        r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=10)
        return r.stdout.strip() if r.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


# Child bootstrap for run_isolated: argv = [hwm_file, code]; writes VmHWM (bytes) at exit.
_BOOT = """
import atexit, sys
def _hwm(path=sys.argv[1]):
    try:
        with open("/proc/self/status") as f:
            kib = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
        with open(path, "w") as f:
            f.write(str(kib * 1024))
    except Exception:
        pass
atexit.register(_hwm)
_code, sys.argv = sys.argv[2], ["-c"]
exec(compile(_code, "<isolated>", "exec"), {"__name__": "__main__"})
"""


def machine_info() -> dict:
    from importlib import metadata
    info: dict[str, Any] = {"os": platform.platform(), "python": platform.python_version(),
                            "cores": os.cpu_count(), "cpu": platform.processor() or None}
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        cpu = [ln for ln in lines if ln.startswith("model name")]
        info["cpu"] = cpu[0].split(":", 1)[1].strip() if cpu else info["cpu"]
        info["ram_bytes"] = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError, AttributeError):
        pass
    if hasattr(os, "getloadavg"):  # other work on the machine skews timings
        info["loadavg_1_5_15"] = [round(x, 2) for x in os.getloadavg()]
    if hasattr(os, "sched_getaffinity"):
        info["usable_cores"] = len(os.sched_getaffinity(0))
    for pkg in ("numpy", "scipy", "scikit-learn"):
        try:
            info[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            info[pkg] = None
    try:
        import vastml
        info["vastml"] = getattr(vastml, "__version__", "?")
    except Exception as e:  # not built yet, or broken: record why
        info["vastml"] = f"not importable ({type(e).__name__})"
    return info


class Bench:
    def __init__(self, area: str, argv: list[str] | None = None, *, repeats: int = 5,
                 quick_repeats: int = 1, add_args: Callable | None = None):
        """Parse argv (default sys.argv[1:]); add_args(parser) adds area-specific options, read
        back from bench.args.  Default repeats per measurement: `repeats`, or `quick_repeats`
        with --quick; --repeats N overrides both."""
        ap = argparse.ArgumentParser(description=f"vastml benchmark: {area}")
        ap.add_argument("--quick", action="store_true", help="fewer rows and repeats")
        ap.add_argument("--repeats", type=int, default=None, help="timed calls per measurement")
        ap.add_argument("--out", default=str(BENCH_DIR / "results"), help="where <area>.json goes")
        if add_args:
            add_args(ap)
        self.args = ap.parse_args(argv)
        self.argv = list(sys.argv[1:] if argv is None else argv)
        self.area, self.quick, self.out = area, self.args.quick, Path(self.args.out)
        self.repeats = self.args.repeats or (quick_repeats if self.quick else repeats)
        self.machine = machine_info()
        sha = _run(["git", "rev-parse", "--short", "HEAD"])
        status = _run(["git", "status", "--porcelain"])
        self.dirty = None if status is None else bool(status)
        self.commit = None if sha is None else sha + ("-dirty" if self.dirty else "")
        self.rows: list[Row] = []
        self.checks: list[dict] = []

    def time(self, fn: Callable[[], Any], *, warmup: int = 1, repeats: int | None = None) -> Timing:
        """Call fn `warmup` times untimed, then `repeats` times (default: --repeats / mode)."""
        value = None
        for _ in range(warmup):
            value = fn()
        times = []
        for _ in range(repeats or self.repeats):
            t0 = time.perf_counter()
            value = fn()
            times.append(time.perf_counter() - t0)
        return Timing(times, value)

    def compare(self, row_name: str, ours: Callable | Timing, peers: dict[str, Any], params: dict,
                extra: dict | None = None, *, warmup: int = 1, repeats: int | None = None) -> Row:
        """Time ours, then each callable peer (same process, same settings); a float peer is a
        published time in seconds, a Timing is used as is.  extra: free columns (the returned
        row.extra may still be filled in before report())."""
        def timed(f):
            return f if isinstance(f, (Timing, int, float)) else self.time(f, warmup=warmup,
                                                                         repeats=repeats)
        t, done = timed(ours), {k: timed(p) for k, p in peers.items()}
        row = Row(row_name, dict(params), t, done, dict(extra or {}))
        self.rows.append(row)
        return row

    def skip(self, row_name: str, params: dict, reason: str) -> Row:
        row = Row(row_name, dict(params), None, {}, {"note": reason})
        self.rows.append(row)
        return row

    def check(self, name: str, ok: bool, detail: str = "", row: Row | None = None) -> bool:
        i = next((i for i, r in enumerate(self.rows) if r is row), None)
        self.checks.append({"name": name, "ok": bool(ok), "detail": detail, "row": i})
        return bool(ok)

    def run_isolated(self, code: str, *, timeout: float | None = None) -> dict:
        """Run a snippet in a fresh interpreter (same sys.path + benches/, cwd); its last stdout
        line must be a JSON dict.  Adds peak_rss_bytes, wall_seconds, returncode and, on failure,
        "error" (never raises).  Peak RSS is the child's own VmHWM, written at exit (None if it
        was killed).  Not rusage: on Linux a child's ru_maxrss also counts the parent's RSS at
        fork/exec time (vfork + exec keeps the old mm's high-water mark); macOS uses it."""
        env = dict(os.environ)
        path = [str(BENCH_DIR)] + [p or os.getcwd() for p in sys.path]
        env["PYTHONPATH"] = os.pathsep.join(path)
        with tempfile.TemporaryDirectory() as tmp:
            out, err, hwm = (Path(tmp) / n for n in ("out", "err", "hwm"))
            with out.open("w") as fo, err.open("w") as fe:
                t0 = time.perf_counter()
                p = subprocess.Popen([sys.executable, "-c", _BOOT, str(hwm), code],
                                     stdout=fo, stderr=fe, env=env)
                killed: list[bool] = []
                timer = threading.Timer(timeout or 0, lambda: killed.append(1) or p.kill())
                if timeout:
                    timer.start()
                peak = None
                if sys.platform == "darwin":  # no /proc: rusage of this child (bytes on macOS)
                    _, status, ru = os.wait4(p.pid, 0)
                    p.returncode, peak = os.waitstatus_to_exitcode(status), ru.ru_maxrss
                else:
                    p.wait()
                wall = time.perf_counter() - t0
                timer.cancel()
            if hwm.exists():
                peak = int(hwm.read_text())
            lines, errtext = out.read_text().strip().splitlines(), err.read_text()
        res: dict[str, Any] = {}
        try:
            res = dict(json.loads(lines[-1]))
        except (IndexError, ValueError, TypeError):
            res["error"] = "no JSON dict on the last stdout line"
        if p.returncode != 0:
            res["error"] = (f"timeout after {timeout:g} s" if killed
                            else f"exit code {p.returncode}: " + errtext.strip()[-800:])
        res.update(peak_rss_bytes=peak, wall_seconds=wall, returncode=p.returncode)
        return res

    def report(self) -> int:
        """Print the table and the checks, write <out>/<area>.json; always returns 0."""
        extra_keys = list(dict.fromkeys(k for r in self.rows for k in r.extra))
        extra_keys.sort(key=lambda k: k == "note")  # free text last
        head = ["row", "params", "ours", "peer", "peer time", "ratio", *extra_keys, "target"]
        table = [head]
        for i, r in enumerate(self.rows):
            marks = "".join("✓" if c["ok"] else "✗" for c in self.checks if c["row"] == i)
            first = [r.name, " ".join(f"{k}={_fmt(v)}" for k, v in r.params.items()),
                     fmt_s(r.ours.median) if r.ours else "skipped"]
            tail = [_fmt(r.extra.get(k))[:70] for k in extra_keys] + [marks]
            for j, (k, p) in enumerate(r.peers.items() or [("", None)]):
                note = "published" if not isinstance(p, Timing) else p.note
                cell = "" if p is None else fmt_s(r.peer_seconds(k)) + (f" ({note})" * bool(note))
                ratio = "" if p is None else f"{r.ratio(k):.2f}x"
                table.append((first if j == 0 else [""] * 3) + [k, cell, ratio]
                             + (tail if j == 0 else [""] * len(tail)))
        widths = [max(len(str(line[c])) for line in table) for c in range(len(head))]
        print(f"\n== {self.area} == commit {self.commit}  {'quick' if self.quick else 'full'}"
              f"  {self.machine.get('cpu')} x{self.machine.get('cores')}")
        for line in table:
            print("  ".join(str(c).ljust(w) for c, w in zip(line, widths)).rstrip())
        for c in self.checks:
            print(f"{'✓' if c['ok'] else '✗'} {c['name']}: {c['detail']}")
        met = sum(c["ok"] for c in self.checks)
        print(f"targets: {met}/{len(self.checks)} met")
        doc = {"area": self.area, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
               "quick": self.quick, "repeats": self.repeats, "argv": self.argv,
               "commit": self.commit, "dirty": self.dirty, "machine": self.machine,
               "rows": [{"name": r.name, "params": r.params,
                         "ours": r.ours.to_json() if r.ours else None,
                         "peers": {k: (p.to_json() | {"kind": "live", "ratio": r.ratio(k)})
                                   if isinstance(p, Timing) else
                                   {"seconds": float(p), "kind": "published", "ratio": r.ratio(k)}
                                   for k, p in r.peers.items()},
                         "extra": r.extra} for r in self.rows],
               "checks": self.checks, "targets_met": met, "targets_total": len(self.checks)}
        self.out.mkdir(parents=True, exist_ok=True)
        path = self.out / f"{self.area}.json"
        path.write_text(json.dumps(_jsonable(doc), indent=1, allow_nan=False) + "\n")
        print(f"wrote {path}")
        return 0

