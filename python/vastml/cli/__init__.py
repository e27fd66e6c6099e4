"""The ``vastml`` command, one module per sub-command.

- ``vastml demo`` (:mod:`vastml.cli.demo`): what the library does, on generated data;
- ``vastml svm train|predict`` (:mod:`vastml.cli.svm`): BudgetedSVM-compatible training;
- ``vastml reorder FILE`` (:mod:`vastml.cli.reorder`): ConvoMap on a matrix file;
- ``vastml order FILE`` (:mod:`vastml.cli.order`): TSP-means / EM-ordering of a table;
- ``vastml embed FILE`` (:mod:`vastml.cli.embed`): t-SNE, SNE or EE of a table.

A user error prints one line and exits with status 2; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from vastml.cli._common import check_out, user_errors

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    from vastml import __version__

    p = argparse.ArgumentParser(
        prog="vastml",
        description="vastml: large-data tools with a Rust core",
        epilog="Errors print one line; add --debug anywhere to see the traceback.",
    )
    p.add_argument("--version", action="version", version=f"vastml {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    from vastml.cli import demo, embed, order, reorder, svm

    demo.add_parser(sub)
    svm.add_svm_parser(sub)
    reorder.add_parser(sub)
    embed.add_embed_parser(sub)
    order.add_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``vastml`` command; return its exit code.

    A user error (a missing file, a bad option value, data the command cannot read) prints one
    line ``vastml COMMAND: error: ...`` on stderr and returns 2; ``--debug`` (anywhere on the
    command line) shows the traceback instead.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    if debug:
        argv.remove("--debug")
    args = build_parser().parse_args(argv)
    try:
        check_out(getattr(args, "out", None))
        return int(args.func(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except user_errors() as exc:
        if debug:
            raise
        msg = str(exc) or type(exc).__name__
        if isinstance(exc, OSError) and exc.filename is not None:
            msg = f"{exc.filename}: {exc.strerror or msg}"
        elif isinstance(exc, MemoryError):
            msg = f"not enough memory: {msg}"
        command = " ".join(
            str(c) for c in (getattr(args, "command", None), getattr(args, "svm_command", None)) if c
        )
        print(f"vastml {command}: error: {msg}" if command else f"vastml: error: {msg}", file=sys.stderr)
        return 2

