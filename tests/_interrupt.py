"""Ctrl-C in a subprocess: the one driver behind every "Ctrl-C stops it" test."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time


def seconds_to_stop(setup: str, call: str, *, wait: float = 1.0, timeout: float = 240) -> float:
    """Run ``setup`` then ``call`` in a fresh Python, send SIGINT ``wait`` seconds into
    ``call``, and return how long the process took to stop after the signal.

    The call must raise ``KeyboardInterrupt`` (not finish first): the assertion says which.
    """
    script = "\n".join(
        [
            "import signal, sys, time",
            # A shell that starts jobs in the background (no job control) makes them ignore
            # SIGINT, and Python then keeps it ignored: restore the usual handler.
            "signal.signal(signal.SIGINT, signal.default_int_handler)",
            textwrap.dedent(setup),
            'print("ready", flush=True)',
            "t = time.perf_counter()",
            "try:",
            textwrap.indent(textwrap.dedent(call).strip(), "    "),
            "except KeyboardInterrupt:",
            '    print(f"interrupted {time.perf_counter() - t:.2f}", flush=True)',
            "    sys.exit(0)",
            'print(f"finished {time.perf_counter() - t:.2f}", flush=True)',
        ]
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(wait)
    t0 = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=timeout)  # generous: CI machines can be heavily loaded
    assert out.startswith("interrupted"), f"the call was not interrupted: {out!r}"
    return time.perf_counter() - t0
