"""Make docstrings written for the terminal safe for reStructuredText.

Docstrings in vastml are read in a terminal as often as on the web, so they use plain-text
notation that reStructuredText reads as markup: ``|x|`` (a substitution reference), ``pi_``
(a hyperlink reference) and parameter lines wrapped with a deeper indent. This hook, run
before numpydoc, escapes those outside literals, math and doctests. It changes nothing that
already renders correctly.
"""

from __future__ import annotations

import re

_LITERAL = re.compile(r"(``.+?``|:\w+:`[^`]*`|`[^`]*`_?_?)")
_TRAILING_UNDERSCORE = re.compile(r"(?<=\w)_(?=[\s,.;:)\]}]|$)")
_PARAM_LINE = re.compile(r"^(\s*[\w*][\w, *]*\s:\s?)(.*)$")


def _escape_text(text: str) -> str:
    parts = _LITERAL.split(text)
    for i in range(0, len(parts), 2):  # even indices lie outside literals
        p = parts[i].replace("\\|", "|").replace("|", "\\|")
        parts[i] = _TRAILING_UNDERSCORE.sub(r"\\_", p)
    return "".join(parts)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _join_wrapped_headers(lines: list[str]) -> list[str]:
    """Join a parameter line whose parentheses are still open with its deeper-indented
    continuation (``default=(1, 2,`` / ``        3)``)."""
    out: list[str] = []
    for line in lines:
        if (
            out
            and _PARAM_LINE.match(out[-1])
            and out[-1].count("(") > out[-1].count(")")
            and _indent(line) > _indent(out[-1]) + 4
        ):
            out[-1] = out[-1].rstrip() + " " + line.strip()
        else:
            out.append(line)
    return out


def fix_lines(lines: list[str]) -> list[str]:
    lines = _join_wrapped_headers(lines)
    out: list[str] = []
    block_indent = None  # inside a literal / math block while the indent is deeper than this
    for line in lines:
        stripped = line.strip()
        if block_indent is not None:
            if stripped and _indent(line) <= block_indent:
                block_indent = None
            else:
                out.append(line)
                continue
        table_row = stripped.startswith("|") and stripped.endswith("|") and stripped.count("|") > 2
        if stripped.startswith((">>>", "...", "+-", "+=")) or table_row:
            out.append(line)
            continue
        if stripped.startswith(".. ") or stripped.endswith("::"):
            block_indent = _indent(line)
            if stripped.endswith("::") and not stripped.startswith(".. "):
                out.append(_escape_text(line))
            else:
                out.append(line)
            continue
        m = _PARAM_LINE.match(line)
        if m and _indent(line) == 0:
            out.append(m.group(1) + _escape_text(m.group(2)))
        else:
            out.append(_escape_text(line))
    return out


def _protect_summary(lines: list[str]) -> list[str]:
    """autosummary cuts the first sentence at the first ". "; a period inside a literal of
    the first paragraph (``s.t. X``) would cut the literal in two. A zero-width space after
    such periods keeps the literal whole and looks the same."""
    out = list(lines)
    for i, line in enumerate(out):
        if not line.strip():
            break
        out[i] = re.sub(r"``.+?``", lambda m: re.sub(r"\.(?=\s)", ".\u200b", m.group(0)), line)
    return out


def process_docstring(app, what, name, obj, options, lines):
    if not name.startswith("vastml"):
        return
    lines[:] = _protect_summary(fix_lines(lines))


def skip_sklearn_machinery(app, what, name, obj, skip, options):
    """Leave out the methods scikit-learn adds to every estimator (``set_fit_request`` and
    the other metadata-routing setters): they are documented by scikit-learn, and their
    docstrings refer to its glossary."""
    module = getattr(obj, "__module__", "") or ""
    if module.startswith("sklearn."):
        return True
    return None


def setup(app):
    app.connect("autodoc-process-docstring", process_docstring, priority=400)
    app.connect("autodoc-skip-member", skip_sklearn_machinery)
    return {"parallel_read_safe": True}
