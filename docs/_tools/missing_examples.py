"""List the public names whose docstring has no numpydoc ``Examples`` section.

Every name in the ``__all__`` of every sub-package is checked; a name whose docstring has
doctest lines (``>>>``) but no ``Examples`` heading is reported separately, since the doctests
run but numpydoc does not show them as examples.

    .venv/bin/python docs/_tools/missing_examples.py
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys

PACKAGES = ["kernels", "reorder", "svm", "embed", "matching", "distributed", "datasets"]
HEADING = re.compile(r"^\s*Examples\s*\n\s*-{3,}\s*$", re.MULTILINE)


def missing() -> tuple[int, list[str], list[str]]:
    """(number of public names, names with neither Examples nor doctests, names whose
    doctests have no Examples heading)."""
    total = 0
    none: list[str] = []
    untitled: list[str] = []
    for pkg in PACKAGES:
        mod = importlib.import_module(f"vastml.{pkg}")
        for name in mod.__all__:
            obj = getattr(mod, name)
            if not (inspect.isclass(obj) or callable(obj)):
                continue  # constants carry no docstring of their own
            total += 1
            doc = inspect.getdoc(obj) or ""
            if HEADING.search(doc):
                continue
            (untitled if ">>>" in doc else none).append(f"vastml.{pkg}.{name}")
    return total, none, untitled


def main() -> int:
    total, none, untitled = missing()
    print(f"{total} public classes and functions; {len(none) + len(untitled)} without an "
          f"Examples section ({len(untitled)} of them have doctests under another heading)")
    print("\nno Examples section and no doctest:")
    for n in none:
        print("  " + n)
    print("\ndoctests but no Examples heading:")
    for n in untitled:
        print("  " + n)
    return 1 if none or untitled else 0


if __name__ == "__main__":
    sys.exit(main())
