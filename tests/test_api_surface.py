"""The public API is learned once: every public name has a runnable Examples section, every
public signature is annotated, every parameter name follows the one vocabulary, and the
vocabulary page shows the table the code has today.

The checks are the documentation tools in ``docs/_tools`` (run them by hand for the lists).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[1] / "docs" / "_tools"


def _tool(name: str):
    if not (TOOLS / f"{name}.py").is_file():
        pytest.skip(f"docs/_tools/{name}.py is not in this checkout")
    spec = importlib.util.spec_from_file_location(f"_tool_{name}", TOOLS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_public_name_has_an_examples_section():
    total, none, untitled = _tool("missing_examples").missing()
    assert total > 100
    assert not none, f"no Examples section: {none}"
    assert not untitled, f"doctests without an Examples heading: {untitled}"


def test_every_public_signature_is_annotated():
    tool = _tool("missing_annotations")
    bad = [
        f"{q}: {m}"
        for pkg in tool.PACKAGES
        for q, f in tool.callables(pkg)
        if (m := tool.missing(f, q))
    ]
    assert not bad, "\n".join(bad)


def test_every_parameter_name_follows_the_vocabulary():
    tool = _tool("param_vocabulary")
    uses = tool.collect()
    bad = {n: tool.problems(n, rows) for n, rows in uses.items() if tool.problems(n, rows)}
    assert not bad, bad


def test_the_conventions_page_shows_todays_table():
    tool = _tool("param_vocabulary")
    out = io.StringIO()
    argv = sys.argv
    try:
        sys.argv = ["param_vocabulary.py", "--markdown"]
        with contextlib.redirect_stdout(out):
            tool.main()
    finally:
        sys.argv = argv
    page = (TOOLS.parent / "conventions.md").read_text()
    assert out.getvalue().strip() in page, (
        "docs/conventions.md is out of date: paste the output of "
        "`python docs/_tools/param_vocabulary.py --markdown` into it"
    )
