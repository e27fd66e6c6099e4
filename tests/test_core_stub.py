"""python/vastml/_core.pyi must describe the compiled module exactly."""

import ast
import inspect
from pathlib import Path

import vastml
from vastml import _core

STUB = Path(vastml.__file__).with_name("_core.pyi")


def stub_names():
    tree = ast.parse(STUB.read_text())
    names, members = set(), {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            members[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names, members, tree


def test_stub_lists_exactly_the_public_names():
    names, _, _ = stub_names()
    public = {n for n in dir(_core) if not n.startswith("_")} | {"__version__"}
    assert names == public, f"only in stub: {names - public}; only in module: {public - names}"


def test_stub_class_members_exist():
    _, members, _ = stub_names()
    for cls, meths in members.items():
        obj = getattr(_core, cls)
        for m in meths:
            if m in ("__init__", "__new__"):
                continue
            assert hasattr(obj, m), f"{cls}.{m} is in the stub but not in the module"
        inherited = set(dir(obj.__base__)) if obj.__base__ is not object else set()
        real = {n for n in dir(obj) if not n.startswith("_")} - inherited
        assert real <= meths, f"{cls}: missing from stub: {real - meths}"


def test_stub_function_parameters_match():
    _, _, tree = stub_names()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            sig = inspect.signature(getattr(_core, node.name))
            stub_params = [a.arg for a in node.args.args + node.args.kwonlyargs]
            assert stub_params == list(sig.parameters), node.name


def test_stubtest_signatures_and_types_match():
    """mypy's stubtest: every name, signature, default and class kind of the stub is the extension's."""
    import subprocess
    import sys

    allowlist = Path(__file__).with_name("stubtest_allowlist.txt")
    cmd = [sys.executable, "-m", "mypy.stubtest", "vastml._core", "--allowlist", str(allowlist)]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(__file__).parent)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
