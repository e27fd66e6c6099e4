"""Write the API reference pages (one per sub-package) from each package's ``__all__``.

Called by ``conf.py`` at the start of every build, so the reference always lists exactly the
public names: a name added to ``__all__`` appears, a removed or renamed one disappears. The
pages are build products (ignored by git); autosummary then writes one page per name.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

PACKAGES = [
    ("vastml.kernels", "Gauss transforms and kernel methods"),
    ("vastml.reorder", "Matrix and row reordering"),
    ("vastml.svm", "Budgeted SVMs"),
    ("vastml.embed", "Nonlinear embeddings"),
    ("vastml.matching", "Object matching"),
    ("vastml.distributed", "Dask versions"),
    ("vastml.datasets", "Data generators"),
    ("vastml", "Top level"),
]


def public_names(module_name: str) -> list[str]:
    """The names in ``module_name.__all__`` (sorted, ``__version__`` left out)."""
    mod = importlib.import_module(module_name)
    names = [n for n in getattr(mod, "__all__", []) if not n.startswith("__")]
    return sorted(dict.fromkeys(names), key=str.lower)


def classify(module_name: str, names: list[str]):
    mod = importlib.import_module(module_name)
    classes, functions, data = [], [], []
    for n in names:
        obj = getattr(mod, n)
        if inspect.isclass(obj):
            classes.append(n)
        elif callable(obj):
            functions.append(n)
        else:
            data.append(n)
    return classes, functions, data


def _summary(mod) -> str:
    doc = inspect.getdoc(mod) or ""
    return doc.split("\n\n")[0].replace("\n", " ").strip()


def page(module_name: str, title: str) -> str:
    mod = importlib.import_module(module_name)
    names = public_names(module_name)
    classes, functions, data = classify(module_name, names)
    head = f"``{module_name}``: {title}"
    out = [head, "=" * len(head), "", f".. currentmodule:: {module_name}", ""]
    summary = _summary(mod)
    if summary:
        out += [summary, ""]
    # autosummary picks docs/_templates/autosummary/{class,function}.rst by object type
    for label, group in (("Classes", classes), ("Functions", functions)):
        if not group:
            continue
        out += [label, "-" * len(label), "", ".. autosummary::", "   :toctree: generated/",
                "   :nosignatures:", ""]
        out += [f"   {n}" for n in group]
        out.append("")
    if data:
        out += ["Constants", "---------", ""]
        for n in data:
            out += [f".. py:data:: {n}", f"   :value: {getattr(mod, n)!r}", ""]
    return "\n".join(out)


def write_api_pages(folder: Path) -> list[str]:
    folder = Path(folder)
    written = []
    for name, title in PACKAGES:
        text = page(name, title)
        path = folder / f"{name}.rst"
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        written.append(name)
    return written


if __name__ == "__main__":
    for name, _ in PACKAGES:
        print(page(name, _))
