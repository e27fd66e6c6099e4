"""List the public functions and estimator methods whose signature is not fully annotated.

Every name in the ``__all__`` of every sub-package is checked: a function's parameters and
return, and a class's ``__init__`` and public methods defined in vastml. Give sub-package
names to check only those; ``-v`` lists each incomplete signature.

    .venv/bin/python docs/_tools/missing_annotations.py [-v] [embed kernels ...]
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Iterator
from typing import Any

PACKAGES = ["kernels", "reorder", "svm", "embed", "matching", "distributed", "datasets"]


def _own(obj: Any) -> bool:
    return getattr(obj, "__module__", "").startswith("vastml")


def callables(pkg: str) -> Iterator[tuple[str, Callable[..., Any]]]:
    """(qualified name, function) for every checked signature of ``vastml.<pkg>``."""
    mod = importlib.import_module(f"vastml.{pkg}")
    for name in mod.__all__:
        obj = getattr(mod, name)
        if inspect.isclass(obj):
            if not _own(obj):
                continue
            for attr, member in vars(obj).items():
                if attr.startswith("_") and attr != "__init__":
                    continue
                member = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
                if inspect.isfunction(member):
                    yield f"{pkg}.{name}.{attr}", member
        elif inspect.isfunction(obj) and _own(obj):
            yield f"{pkg}.{name}", obj


def missing(func: Callable[..., Any], qualname: str) -> list[str]:
    """The unannotated parameter names of ``func`` (and ``return``)."""
    sig = inspect.signature(func)
    bad = [
        p
        for p, v in sig.parameters.items()
        if p not in ("self", "cls") and v.annotation is inspect.Parameter.empty
    ]
    if sig.return_annotation is inspect.Signature.empty and not qualname.endswith("__init__"):
        bad.append("return")
    return bad


def main(argv: list[str]) -> int:
    verbose = "-v" in argv
    pkgs = [a for a in argv if not a.startswith("-")] or PACKAGES
    total = 0
    for pkg in pkgs:
        rows = [(q, m) for q, f in callables(pkg) if (m := missing(f, q))]
        total += len(rows)
        print(f"{pkg}: {len(rows)} incomplete signatures")
        if verbose:
            for q, m in rows:
                print(f"    {q}: {', '.join(m)}")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
