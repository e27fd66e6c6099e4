"""Lazy public names for the sub-packages, so that ``import vastml.x`` costs almost nothing.

A sub-package's ``__init__.py`` lists its public names as ordinary imports inside an
``if TYPE_CHECKING:`` block (so type checkers, IDEs and readers see exactly where each comes
from) and ends with::

    __getattr__, __dir__ = attach(__name__, __file__)

:func:`attach` reads those import statements from the file once and returns a module
``__getattr__`` that imports the defining module on first access, plus a ``__dir__`` that
lists every lazy name. ``from vastml.kernels import gauss_transform`` and
``vastml.kernels.gauss_transform`` work as before; only the cost moves to first use (scipy,
scikit-learn, matplotlib and dask are imported by the modules that need them, when they are
used). This is the approach of the ``lazy_loader`` package (SPEC 1 of the Scientific Python
project), without the dependency.
"""

from __future__ import annotations

import importlib
import sys

# `typing.TYPE_CHECKING` without importing typing (type checkers treat this name as true), so
# that `import vastml` loads neither typing nor ast.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import ast
    from collections.abc import Callable
    from typing import Any


def lazy_names(path: str, package: str) -> dict[str, tuple[str, str]]:
    """``{public name: (module, attribute)}`` from the ``if TYPE_CHECKING:`` imports of `path`.

    Relative imports are resolved against `package`; ``import a.b`` statements are not
    supported (only ``from m import name [as alias]``).
    """
    import ast  # here, so that `import vastml` alone does not load it

    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    names: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.If) and _is_type_checking(node.test)):
            continue
        for stmt in node.body:
            if not isinstance(stmt, ast.ImportFrom):
                raise TypeError(f"{path}: only `from m import name` belongs in the TYPE_CHECKING block")
            module = stmt.module or ""
            if stmt.level:
                base = package.rsplit(".", stmt.level - 1)[0] if stmt.level > 1 else package
                module = f"{base}.{module}" if module else base
            for alias in stmt.names:
                names[alias.asname or alias.name] = (module, alias.name)
    return names


def _is_type_checking(test: ast.expr) -> bool:
    import ast

    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def attach(
    package: str, path: str | None, submodules: tuple[str, ...] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``(__getattr__, __dir__)`` for the package `package` whose ``__init__`` is `path`
    (None: no lazy names, only `submodules`).

    `submodules` are sub-packages reachable as attributes (``vastml.kernels`` after
    ``import vastml``), imported on first access.
    """
    names = lazy_names(path, package) if path is not None else {}
    subs = frozenset(submodules)

    def __getattr__(name: str) -> Any:
        module = sys.modules[package]
        if name in names:
            mod_name, attr = names[name]
            value = getattr(importlib.import_module(mod_name), attr)
        elif name in subs:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(module, name, value)  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(names) | subs)

    return __getattr__, __dir__
