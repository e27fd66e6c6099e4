"""Import cost and the lazy public names of the sub-packages (python/vastml/_lazy.py)."""

import importlib
import json
import subprocess
import sys

import pytest

SUBPACKAGES = ("datasets", "distributed", "embed", "kernels", "matching", "reorder", "svm")
HEAVY = ("matplotlib", "dask", "distributed", "sklearn", "scipy.sparse.linalg", "scipy.optimize", "pandas")


def _modules_after(statement):
    """The modules loaded by `statement` in a fresh interpreter."""
    code = f"import sys; {statement}; import json; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


@pytest.mark.parametrize("statement", ["import vastml"] + [f"import vastml.{s}" for s in SUBPACKAGES])
def test_import_loads_no_heavy_dependency(statement):
    loaded = _modules_after(statement)
    heavy = sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert not heavy, f"`{statement}` imported {heavy}"


def test_first_use_loads_only_what_it_needs():
    loaded = _modules_after("from vastml.kernels import gauss_transform")
    assert "vastml.kernels._gauss" in loaded
    assert not {"matplotlib", "dask", "vastml.kernels._gp", "vastml.kernels._rank"} & loaded


@pytest.mark.parametrize("name", SUBPACKAGES)
def test_public_names_resolve_and_dir_is_truthful(name):
    pkg = importlib.import_module(f"vastml.{name}")
    assert len(set(pkg.__all__)) == len(pkg.__all__), "duplicates in __all__"
    listed = set(dir(pkg))
    for attr in pkg.__all__:
        assert attr in listed, f"vastml.{name}.{attr} is in __all__ but not in dir()"
        value = getattr(pkg, attr)
        assert value is not None
        # the object is the one the defining module holds, and a second lookup is the same
        assert getattr(pkg, attr) is value
    # nothing public is reachable that __all__ does not list (besides sub-modules)
    lazy = {n for n in listed if not n.startswith("_") and not n.startswith("__")}
    modules = {n for n in lazy if type(getattr(pkg, n)).__name__ == "module"}
    assert lazy - modules <= set(pkg.__all__) | {"TYPE_CHECKING", "attach"}, lazy - set(pkg.__all__)
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        pkg.not_a_name  # noqa: B018


@pytest.mark.parametrize("name", SUBPACKAGES)
def test_star_import(name):
    ns = {}
    exec(f"from vastml.{name} import *", ns)
    pkg = importlib.import_module(f"vastml.{name}")
    assert set(pkg.__all__) <= set(ns)


def test_subpackages_are_attributes_of_vastml():
    code = "import vastml; print(type(vastml.kernels).__name__, 'kernels' in dir(vastml))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["module", "True"]
