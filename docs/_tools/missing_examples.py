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


def main() -> int:
    total = 0
    none, untitled = [], []
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
    print(f"{total} public classes and functions; {len(none) + len(untitled)} without an "
          f"Examples section ({len(untitled)} of them have doctests under another heading)")
    print("\nno Examples section and no doctest:")
    for n in none:
        print("  " + n)
    print("\ndoctests but no Examples heading:")
    for n in untitled:
        print("  " + n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
