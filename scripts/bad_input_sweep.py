#!/usr/bin/env python
"""Try every public entry point of vastml with bad input, each case in its own process.

The sweep enumerates the estimators (``fit`` and every output method, before and after
``fit``), the public functions of ``vastml.kernels``, ``reorder``, ``embed``, ``svm`` and
``matching``, and the ``vastml`` command's sub-commands, and crosses them with bad inputs:
empty, NaN, inf, huge (1e300) and tiny values, complex, object and string arrays, sparse
matrices, 3-D and 1-D arrays, wrong lengths, duplicated points, and absurd parameters (0, -1,
2**62, 1e300, inf, NaN, a string, an unknown option) for each numeric or choice parameter.

Each case runs in a child forked from a process that has already imported the library (so a
case costs milliseconds, not an interpreter start), under an address-space limit
(``RLIMIT_AS``) and a time limit. A case that outlives the limit gets SIGINT: one that then
stops is *slow* (the work was interruptible but the input should have been refused), one that
does not is a *hang*. The outcome of each case is one of:

==============  =====================================================================
clean           an exception of an allowed type (ValueError, TypeError, MemoryError,
                NotFittedError, FileNotFoundError) with a message
ok              a result (checked for NaN / inf when every input was finite)
abort           the process died from a signal (a Rust allocation failure, a segfault)
panic           a Rust panic: pyo3's PanicException, or VastmlError from a panic
hang            still running after the time limit and after SIGINT
slow            still running after the time limit, stopped by SIGINT
nan_output      NaN or inf in the result (or the fitted attributes) from finite input
accepted_nan    a NaN parameter was accepted without an error
wrong_exception an exception of another type (AttributeError, ZeroDivisionError...)
empty_message   an allowed exception type with an empty message
cli_traceback   the command let an exception escape or printed a traceback
base_failed     the valid call the case is derived from failed (the case is skipped)
==============  =====================================================================

Usage::

    python scripts/bad_input_sweep.py                  # everything, about 10 minutes
    python scripts/bad_input_sweep.py --limit 20       # a quick sample (every n-th case)
    python scripts/bad_input_sweep.py --only embed     # cases whose id contains "embed"
    python scripts/bad_input_sweep.py --out failures.json --jobs 2 --timeout 10

It prints a table of the counts per kind and writes the failing cases (with the code that
reproduces each) to the JSON file given by ``--out`` (default ``bad_input_failures.json``).
The exit status is 1 when a case failed.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import json
import math
import os
import resource
import select
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field

FAILING = (
    "abort",
    "panic",
    "hang",
    "slow",
    "nan_output",
    "accepted_nan",
    "wrong_exception",
    "empty_message",
    "cli_traceback",
)
KINDS = ("clean", "ok", *FAILING, "base_failed")
SUBPACKAGES = ("kernels", "reorder", "embed", "svm", "matching")
OUTPUTS = ("predict", "predict_proba", "decision_function", "transform", "score_samples", "score")
# Functions that open files, draw or fetch data: not fed arbitrary arrays.
SKIP_FUNCTIONS = {
    "load_football", "load_genes", "load_mammals", "load_mushrooms", "load_news", "load_paleo",
    "load_matrix", "save_matrix", "save_png", "plot_matrix", "heatmap", "load_budgetedsvm",
    "save_budgetedsvm",
}


# ---------------------------------------------------------------------------------------
# The namespace every case runs in
# ---------------------------------------------------------------------------------------

PRELUDE = """
import numpy as np
import scipy.sparse as sp
import vastml
from vastml import kernels, reorder, embed, svm, matching
rng = np.random.default_rng(0)
X = rng.normal(size=(40, 2))
X4 = np.vstack([rng.normal(size=(20, 4)), rng.normal(3.0, 1.0, size=(20, 4))])
y = np.repeat([0, 1], 20)
B = (rng.random((24, 18)) < 0.35).astype(int)
x1 = rng.normal(size=60)
w = np.ones(40)
P = np.abs(rng.normal(size=(40, 40))); P = P + P.T; np.fill_diagonal(P, 0); P /= P.sum()
perm = rng.permutation(40)
obj = embed.EmbeddingObjective("tsne", P)
"""


def namespace() -> dict:
    ns: dict = {}
    exec(PRELUDE, ns)
    return ns


# Valid values for arguments, by parameter name (the first valid call of a function is built
# from these, then one argument at a time is replaced by a bad value).
ARG_BY_NAME = {
    "X": "X", "x": "x1", "points": "X", "sources": "X", "data": "X", "A": "X", "Y": "X",
    "Y0": "X", "init": None, "targets": "X[:10]", "weights": "w", "q": "w", "y": "y",
    "labels": "y", "matrix": "B", "B": "B", "K": "P * 40", "L": "P * 40", "P": "P",
    "order": "perm", "row_order": "np.arange(24)", "col_order": "np.arange(18)",
    "bandwidth": "0.5", "h": "0.5", "sigma": "0.5", "perplexity": "5.0", "n_neighbors": "5",
    "k": "3", "size": "20", "n": "40", "kind": None, "objective": None, "affinities": "P",
    "scores": "x1", "epsilon": "1e-6", "kernel_size": "3", "gamma": "1.0", "lam": "1.0",
}

# Explicit valid calls where the names above do not make one (the first argument list wins).
BASE_CALLS = {
    "kernels.gauss_transform": "kernels.gauss_transform(X, X[:10], bandwidth=0.5)",
    "kernels.erfc_sum": "kernels.erfc_sum(x1, x1[:10], weights=np.ones(60))",
    "kernels.wmw_score": "kernels.wmw_score(x1, y=np.repeat([0, 1], 30))",
    "reorder.convolution_error": "reorder.convolution_error(B, kernel_size=3)",
    "reorder.planted_matrix": "reorder.planted_matrix('banded', size=20, random_state=0)",
    "reorder.planted_categorical": "reorder.planted_categorical(size=20, random_state=0)",
    "reorder.compress": "reorder.compress(B, (4, 3))",
    "reorder.tsp_path": "reorder.tsp_path(X)",
    "reorder.path_length": "reorder.path_length(X, perm)",
    "reorder.seriate": "reorder.seriate(X, method='OLO')",
    "reorder.tsp_order": "reorder.tsp_order(B)",
    "reorder.branch_and_bound_order": "reorder.branch_and_bound_order(B[:8, :8], kernel_size=3)",
    "embed.entropic_affinities": "embed.entropic_affinities(X, perplexity=5.0)",
    "embed.knn_sqdist": "embed.knn_sqdist(X, n_neighbors=5)",
    "embed.symmetrize": "embed.symmetrize(P * 40)",
    "embed.kernel_sums": "embed.kernel_sums(X)",
    "matching.sinkhorn": "matching.sinkhorn(np.abs(P) + 0.01)",
    "matching.centred_kernel": "matching.centred_kernel(X)",

    "kernels.conjugate_gradient": 'kernels.conjugate_gradient(lambda v, tol: 2 * v, np.ones(5))',
    "kernels.density_derivative": 'kernels.density_derivative(x1, x1[:10], 2, bandwidth=0.5)',
    "kernels.density_functional": 'kernels.density_functional(x1, 2, bandwidth=0.5)',
    "kernels.entropy_index": 'kernels.entropy_index(x1, 0.5)',
    "kernels.fit_implicit_surface": 'kernels.fit_implicit_surface(np.c_[np.cos(np.linspace(0, 6, 40)), np.sin(np.linspace(0, 6, 40)), np.zeros(40)], np.c_[np.cos(np.linspace(0, 6, 40)), np.sin(np.linspace(0, 6, 40)), np.zeros(40)], grid_size=8)',
    "kernels.hermite_gauss_sum": 'kernels.hermite_gauss_sum(x1, x1[:10], 2, 0.5)',
    "kernels.normal_reference_functional": 'kernels.normal_reference_functional(4, 1.0)',
    "kernels.sheather_jones": 'kernels.sheather_jones(x1)',
    "reorder.figure_of_merit": 'reorder.figure_of_merit(y, perm)',
    "reorder.criterion": 'reorder.criterion(P * 40)',
    "reorder.knn_accuracy": 'reorder.knn_accuracy(perm, y, n_neighbors=3)',
    "embed.diag_hessian": 'embed.diag_hessian(obj, X)',
    "embed.embedding_objective": "embed.embedding_objective('tsne', X, P)",
    "embed.homotopy": 'embed.homotopy(obj, X, max_iter=5)',
    "embed.minimize": 'embed.minimize(obj, X, max_iter=5)',
    "embed.tsne_gradient_descent": 'embed.tsne_gradient_descent(obj, X, max_iter=20, learning_rate=10.0, momentum=0.5)',
    "embed.procrustes_distance": 'embed.procrustes_distance(X, X[::-1])',
    "matching.lsmi": 'matching.lsmi(P * 40, P * 40, perm)',
    "matching.smooth_kernel": 'matching.smooth_kernel(P * 40, 0.5)',
    "embed.embedding_hessian": 'embed.embedding_hessian(obj, X)',
}

BAD_ARRAYS = {
    "empty": "{a}[:0]",
    "nan": "_with({a}, np.nan)",
    "inf": "_with({a}, np.inf)",
    "huge": "np.asarray({a}, dtype=float) * 1e300",
    "tiny": "np.asarray({a}, dtype=float) * 1e-300",
    "complex": "np.asarray({a}) + 1j",
    "object": "np.asarray({a}).astype(object)",
    "strings": "np.asarray({a}).astype(str)",
    "sparse": "sp.csr_matrix(np.atleast_2d({a}))",
    "3d": "np.asarray({a})[None]",
    "1d": "np.ravel({a})",
    "scalar": "3.0",
    "none": "None",
    "short": "np.asarray({a})[:-1]",
    "one_row": "np.asarray({a})[:1]",
    "constant": "np.ones_like(np.asarray({a}, dtype=float))",
    "duplicates": "np.repeat(np.asarray({a})[:1], len(np.asarray({a})), axis=0)",
    "fortran": "np.asfortranarray(np.atleast_2d({a}))",
    "bool": "np.asarray({a}) > 0",
}
# Variants whose values are finite (a NaN or inf in the result is then a defect).
FINITE_ARRAYS = {"huge", "tiny", "object", "1d", "short", "one_row", "constant", "duplicates",
                 "fortran", "bool", "empty"}
BAD_NUMBERS = {"nan": "float('nan')", "inf": "float('inf')", "neg": "-1", "zero": "0",
               "huge_int": "2**62", "huge": "1e300", "str": "'a'", "frac": "0.5"}
# What an int parameter and a float parameter are tried with.
INT_BAD = ("nan", "neg", "zero", "huge_int", "str", "frac")
FLOAT_BAD = ("nan", "inf", "neg", "zero", "huge", "str")


def bad_numbers(default):
    """The bad values tried for a parameter whose valid value is `default`."""
    keys = INT_BAD if isinstance(default, int) and not isinstance(default, bool) else FLOAT_BAD
    return {k: BAD_NUMBERS[k] for k in keys}
BAD_CHOICE = "'no-such-option'"
# Fitted attributes documented to be NaN in some settings.
# beta_: the widths of duplicated points, which no width reaches the perplexity for (NaN, with
# a warning, as documented by entropic_affinities).
DOCUMENTED_NAN = {"log_marginal_likelihood_value_", "beta_"}
# What an objective argument (an EmbeddingObjective) is tried with.
BAD_OBJECTIVES = {"none": "None", "array": "P", "string": "'tsne'", "function": "len"}

HELPERS = """
def _with(a, v):
    a = np.array(a, dtype=float, copy=True)
    a.flat[min(3, a.size - 1)] = v
    return a
"""


@dataclass
class Case:
    id: str
    code: str
    finite: bool = True  # every input finite: NaN / inf in the result is a defect
    nan_param: bool = False  # a NaN parameter: acceptance is a defect
    cli: bool = False
    files: dict = field(default_factory=dict)
    timeout: float | None = None  # seconds before SIGINT, when longer than the default


# ---------------------------------------------------------------------------------------
# Enumeration
# ---------------------------------------------------------------------------------------


def _public(sub: str):
    import importlib

    mod = importlib.import_module(f"vastml.{sub}")
    for name in mod.__all__:
        yield name, getattr(mod, name)


def _numeric_default(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def estimator_cases() -> list[Case]:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
    from _estimators import OUTPUTS as _o  # noqa: F401  (the tests' list of outputs)
    from _estimators import fit_data, quick

    cases = []
    for sub in SUBPACKAGES:
        for name, cls in _public(sub):
            if not (inspect.isclass(cls) and hasattr(cls, "fit")):
                continue
            est = quick(cls)
            params = est.get_params()
            make = f"{sub}.{name}(**{params!r})"
            X0, y0 = fit_data(name, est)
            data = f"_X = np.array({X0.tolist()!r})\n"
            data += f"_y = np.array({y0.tolist()!r})\n" if y0 is not None else "_y = None\n"
            fit = "est.fit({a})" if y0 is None else "est.fit({a}, _y)"
            two = y0 is not None and y0.ndim == 2  # matching: two point sets
            base = f"{data}est = {make}\nout = {fit.format(a='_X')}"
            cases.append(Case(f"{sub}.{name}.fit[valid]", base))
            outs = [m for m in OUTPUTS if hasattr(cls, m)]
            # use before fit
            for m in outs:
                arg = "_X, _y" if m == "score" and y0 is not None else "_X"
                cases.append(Case(f"{sub}.{name}.{m}[before fit]",
                                  f"{data}est = {make}\nout = est.{m}({arg})"))
            # bad X (and bad y) for fit
            for kind, tmpl in BAD_ARRAYS.items():
                bad = tmpl.format(a="_X")
                cases.append(Case(f"{sub}.{name}.fit[X={kind}]",
                                  f"{data}est = {make}\nout = {fit.format(a=bad)}",
                                  finite=kind in FINITE_ARRAYS))
                if y0 is not None and kind in ("empty", "nan", "short", "none", "3d", "complex",
                                               "sparse", "object", "strings", "scalar", "inf"):
                    bady = tmpl.format(a="_y")
                    cases.append(Case(f"{sub}.{name}.fit[y={kind}]",
                                      f"{data}est = {make}\nout = est.fit(_X, {bady})",
                                      finite=kind in FINITE_ARRAYS))
            # bad X for every output after a valid fit
            for m in outs:
                for kind in ("empty", "nan", "inf", "huge", "complex", "sparse", "3d", "1d",
                             "strings", "none", "wide", "narrow"):
                    if kind == "wide":
                        bad = "np.c_[_X, _X]"
                    elif kind == "narrow":
                        bad = "_X[:, :1]"
                    else:
                        bad = BAD_ARRAYS[kind].format(a="_X")
                    arg = f"{bad}, _y" if m == "score" and y0 is not None and not two else bad
                    cases.append(Case(f"{sub}.{name}.{m}[X={kind}]",
                                      f"{data}est = {make}\n{fit.format(a='_X')}\nout = est.{m}({arg})",
                                      finite=kind in FINITE_ARRAYS or kind in ("wide", "narrow")))
            # absurd parameters
            for p, v in params.items():
                if p in ("random_state", "verbose", "callbacks"):
                    continue
                if _numeric_default(v) or (v is None and _looks_numeric(p)):
                    for kind, val in bad_numbers(v).items():
                        cases.append(Case(f"{sub}.{name}({p}={kind})",
                                          f"{data}est = {make}\nest.set_params({p}={val})\nout = {fit.format(a='_X')}",
                                          finite=kind not in ("nan", "inf"), nan_param=kind == "nan"))
                elif isinstance(v, str):
                    cases.append(Case(f"{sub}.{name}({p}=unknown)",
                                      f"{data}est = {make}\nest.set_params({p}={BAD_CHOICE})\nout = {fit.format(a='_X')}"))
    return cases


def _looks_numeric(p: str) -> bool:
    return p.startswith(("n_", "max_", "min_")) or p in (
        "bandwidth", "gamma", "tol", "epsilon", "perplexity", "learning_rate", "alpha", "ridge",
        "l2_penalty", "budget", "degree", "coef0", "momentum", "length_scale", "noise")


def function_cases() -> list[Case]:
    cases = []
    for sub in SUBPACKAGES:
        for name, fn in _public(sub):
            if inspect.isclass(fn) or not callable(fn) or name in SKIP_FUNCTIONS:
                continue
            key = f"{sub}.{name}"
            try:
                sig = inspect.signature(fn)
            except (TypeError, ValueError):
                continue
            base, args = _base_call(key, sub, name, sig)
            if base is None:
                continue
            cases.append(Case(f"{key}[valid]", f"out = {base}"))
            for pname, (pos, expr) in args.items():
                par = sig.parameters[pname]
                default = par.default
                if expr == "obj":
                    for kind, bad in BAD_OBJECTIVES.items():
                        cases.append(Case(f"{key}[{pname}={kind}]",
                                          "out = " + _replace(key, sig, args, pname, bad)))
                    continue
                if expr is not None and par.default is inspect.Parameter.empty and _arrayish(expr):
                    for kind, tmpl in BAD_ARRAYS.items():
                        bad = tmpl.format(a=expr)
                        cases.append(Case(f"{key}[{pname}={kind}]",
                                          "out = " + _replace(key, sig, args, pname, bad),
                                          finite=kind in FINITE_ARRAYS))
                    continue
                value = default if expr is None else None
                if expr is not None and _is_number(expr):
                    value = eval(expr, {})  # noqa: S307 - our own table's literals
                if _numeric_default(value) or (value is None and _looks_numeric(pname)):
                    for kind, val in bad_numbers(value).items():
                        cases.append(Case(f"{key}({pname}={kind})",
                                          "out = " + _replace(key, sig, args, pname, val),
                                          finite=kind not in ("nan", "inf"),
                                          nan_param=kind == "nan"))
                elif isinstance(value, str):
                    cases.append(Case(f"{key}({pname}=unknown)",
                                      "out = " + _replace(key, sig, args, pname, BAD_CHOICE)))
    return cases


def _arrayish(expr: str) -> bool:
    return not _is_number(expr) and not expr.startswith(("'", '"', "lambda"))


def _is_number(expr: str) -> bool:
    try:
        float(eval(expr, {}))  # noqa: S307 - our own table's literals
        return True
    except Exception:
        return False


def _base_call(key, sub, name, sig):
    """The valid call, and for each parameter the expression it gets (None: its default)."""
    args: dict[str, tuple[bool, str | None]] = {}
    if key in BASE_CALLS:
        import ast

        call = ast.parse(BASE_CALLS[key], mode="eval").body
        bound = []
        names = list(sig.parameters)
        if len(call.args) > len(names):
            return None, {}
        for i, a in enumerate(call.args):
            bound.append((names[i], ast.unparse(a), True))
        for kw in call.keywords:
            bound.append((kw.arg, ast.unparse(kw.value), False))
        given = {b[0]: (b[2], b[1]) for b in bound}
    else:
        given = {}
        for p in sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            if p.default is inspect.Parameter.empty:
                expr = ARG_BY_NAME.get(p.name)
                if expr is None:
                    return None, {}
                given[p.name] = (p.kind is not p.KEYWORD_ONLY, expr)
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.name in given:
            args[p.name] = given[p.name]
        elif p.default is not inspect.Parameter.empty and p.name not in (
            "random_state", "verbose", "callbacks", "callback", "out", "ax"
        ):
            args[p.name] = (False, None)
    return _render(sub, name, args), args


def _render(sub, name, args, replace=None):
    pos, kw = [], []
    for p, (positional, expr) in args.items():
        if replace and p == replace[0]:
            expr = replace[1]
        if expr is None:
            continue
        (pos if positional else kw).append(expr if positional else f"{p}={expr}")
    return f"{sub}.{name}({', '.join(pos + kw)})"


def _replace(key, sig, args, pname, bad):
    sub, name = key.split(".")
    positional, expr = args[pname]
    a = dict(args)
    a[pname] = (positional, bad)
    return _render(sub, name, a)


def cli_cases(tmp: str) -> list[Case]:
    """The `vastml` command on good and bad files and options."""
    import numpy as np

    rng = np.random.default_rng(0)
    files = {}

    def put(name, content):
        path = os.path.join(tmp, name)
        if isinstance(content, np.ndarray):
            np.save(path, content)
        else:
            with open(path, "wb") as f:
                f.write(content if isinstance(content, bytes) else content.encode())
        files[name] = path
        return path

    good = rng.normal(size=(40, 3))
    Bm = (rng.random((16, 12)) < 0.3).astype(int)
    put("good.csv", "\n".join(",".join(f"{v:.4f}" for v in r) for r in good))
    put("binary.csv", "\n".join(",".join(str(v) for v in r) for r in Bm))
    put("empty.csv", "")
    put("nan.csv", "1,2,3\n4,nan,6\n7,8,9\n")
    put("ragged.csv", "1,2,3\n4,5\n")
    put("text.csv", "a,b,c\nd,e,f\n")
    put("garbage.npy", b"\x93NUMPY garbage \x00\xff")
    put("cube.npy", rng.normal(size=(3, 3, 3)))
    put("huge.csv", "\n".join(",".join("1e300" for _ in range(3)) for _ in range(10)))
    put("good.svm", "".join(f"{1 if i % 2 else -1} 1:{rng.normal():.3f} 2:{rng.normal():.3f}\n"
                            for i in range(40)))
    put("bigindex.svm", "1 100000000:1\n-1 1:1\n")
    put("badline.svm", "1 1:1\nabc\n")
    put("zeroindex.svm", "1 0:1\n-1 1:2\n")
    put("nanvalue.svm", "1 1:nan\n-1 1:2\n")
    put("empty.svm", "")
    put("bad.model", "ALGORITHM: 4\nNUMBER_OF_CLASSES: 2\nGARBAGE\n")
    put("truncated.model", "ALGORITHM: 4\nNUMBER_OF_CLASSES: 2\nLABELS: 1 -1\nNUMBER_OF_WEIGHTS: 5\n")
    missing = os.path.join(tmp, "missing.csv")
    nodir = os.path.join(tmp, "no", "such", "dir", "out.npy")

    commands = {
        "embed": (["embed", files["good.csv"], "--max-iter", "30", "--perplexity", "5"],
                  {"--perplexity": "float", "--lam": "float", "--max-iter": "int",
                   "--n-jobs": "int", "--seed": "int", "--skip-header": "int"}),
        "order": (["order", files["good.csv"]],
                  {"--levels": "int", "--em": "int", "--n-jobs": "int", "--seed": "int",
                   "--label-column": "int"}),
        "reorder": (["reorder", files["binary.csv"], "--kernel-size", "3", "--max-iter", "20"],
                    {"--kernel-size": "int", "--max-iter": "int", "--n-jobs": "int",
                     "--seed": "int", "--kernel": "str", "--padding": "str"}),
        "svm train": (["svm", "train", "-A", "4", files["good.svm"], os.path.join(tmp, "m.model")],
                      {"-B": "int", "-L": "float", "-e": "int", "-g": "float"}),
        "demo": (["demo", "--quick", "--n", "2000", "--grid", "20", "--out",
                  os.path.join(tmp, "demo.png")],
                 {"--n": "int", "--grid": "int", "--bandwidth": "float", "--epsilon": "float"}),
    }
    values = {"int": ["0", "-1", "2**62", str(2**62), "nan", "abc", "1e300"],
              "float": ["0", "-1", "nan", "inf", "1e300", "abc"],
              "str": ["no-such-option", ""]}
    cases = []
    for cmd, (argv, opts) in commands.items():
        cases.append(Case(f"cli.{cmd}[valid]", f"out = _cli({argv!r})", cli=True))
        for opt, typ in opts.items():
            for v in values[typ]:
                a = _set_opt(argv, opt, v)
                cases.append(Case(f"cli.{cmd}({opt}={v})", f"out = _cli({a!r})", cli=True))
        if cmd in ("embed", "order", "reorder"):
            for f in ("empty.csv", "nan.csv", "ragged.csv", "text.csv", "garbage.npy", "cube.npy",
                      "huge.csv", "good.svm"):
                a = list(argv)
                a[1] = files[f]
                cases.append(Case(f"cli.{cmd}[file={f}]", f"out = _cli({a!r})", cli=True))
            a = list(argv)
            a[1] = missing
            cases.append(Case(f"cli.{cmd}[file=missing]", f"out = _cli({a!r})", cli=True))
            cases.append(Case(f"cli.{cmd}[out=missing dir]", f"out = _cli({argv + ['--out', nodir]!r})",
                              cli=True))
    for f in ("bigindex.svm", "badline.svm", "zeroindex.svm", "nanvalue.svm", "empty.svm"):
        a = ["svm", "train", "-A", "4", files[f], os.path.join(tmp, "m2.model")]
        cases.append(Case(f"cli.svm train[file={f}]", f"out = _cli({a!r})", cli=True))
    for f in ("bad.model", "truncated.model", "good.csv"):
        a = ["svm", "predict", files["good.svm"], files[f], os.path.join(tmp, "pred.txt")]
        cases.append(Case(f"cli.svm predict[model={f}]", f"out = _cli({a!r})", cli=True))
    cases.append(Case("cli.nonsense", "out = _cli(['no-such-command'])", cli=True))
    for c in cases:
        if c.id.startswith("cli.demo"):
            c.timeout = 90.0  # the demo runs every area, ~20 s on a loaded machine
    return cases


def _set_opt(argv, opt, v):
    a = list(argv)
    if opt in a:
        a[a.index(opt) + 1] = v
    else:
        a += [opt, v]
    return a


# ---------------------------------------------------------------------------------------
# Running one case (in the forked child)
# ---------------------------------------------------------------------------------------


def _allowed():
    from sklearn.exceptions import NotFittedError

    return (ValueError, TypeError, MemoryError, FileNotFoundError, KeyboardInterrupt,
            NotFittedError)


def _non_finite(obj, depth=0) -> str | None:
    import numpy as np

    if depth > 3:
        return None
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind in "fc" and obj.size and not np.all(np.isfinite(obj)):
            return f"array {obj.shape} with non-finite values"
        return None
    if isinstance(obj, float):
        return None if math.isfinite(obj) else f"scalar {obj}"
    if isinstance(obj, (tuple, list)):
        for o in obj[:20]:
            r = _non_finite(o, depth + 1)
            if r:
                return r
        return None
    if hasattr(obj, "get_params") and hasattr(obj, "__dict__"):
        for k, v in vars(obj).items():
            if k.endswith("_") and not k.startswith("_") and k not in DOCUMENTED_NAN:
                r = _non_finite(v, depth + 1)
                if r:
                    return f"{k}: {r}"
    return None


def run_case(case: Case, ns_template: dict, result_fd: int, tmp: str, limit: int) -> None:
    """In the child: run the case and write one JSON line of its outcome to `result_fd`."""
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.chdir(tmp)
    import warnings

    warnings.simplefilter("ignore")
    res: dict = {"kind": "ok", "type": "", "message": ""}
    ns = dict(ns_template)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            exec(case.code, ns)
        out = ns.get("out")
        if case.cli:
            text = err.getvalue()
            if "Traceback (most recent call last)" in text:
                res = {"kind": "cli_traceback", "type": "", "message": text[-300:]}
            else:  # a user error: a non-zero exit status and one line
                res["kind"] = "ok" if out in (0, None) else "clean"
                res["message"] = f"exit {out}: {text.strip()[:200]}"
        elif case.nan_param:
            res = {"kind": "accepted_nan", "type": "", "message": "returned without an error"}
        elif case.finite:
            bad = _non_finite(out)
            if bad is None and "est" in ns:
                bad = _non_finite(ns["est"])
            if bad:
                res = {"kind": "nan_output", "type": "", "message": bad}
    except BaseException as e:  # noqa: BLE001 - classifying every outcome is the point
        t = type(e)
        msg = str(e)
        res = {"type": f"{t.__module__}.{t.__qualname__}", "message": msg[:300]}
        if t.__name__ == "PanicException" or "internal error in vastml's Rust core" in msg:
            res["kind"] = "panic"
        elif case.cli and not isinstance(e, SystemExit):
            res["kind"] = "cli_traceback"
            res["message"] = "".join(traceback.format_exception_only(t, e))[-300:]
        elif isinstance(e, SystemExit):
            res["kind"] = "clean" if e.code not in (0, None) else "ok"
        elif isinstance(e, _allowed()):
            res["kind"] = "clean" if msg.strip() else "empty_message"
        else:
            res["kind"] = "wrong_exception"
    data = (json.dumps(res) + "\n").encode()
    os.write(result_fd, data[:60000])
    os.close(result_fd)
    os._exit(0)


# ---------------------------------------------------------------------------------------
# The parent: fork, watch, classify
# ---------------------------------------------------------------------------------------


@dataclass
class Running:
    case: Case
    pid: int
    fd: int
    start: float
    buf: bytes = b""
    interrupted_at: float | None = None


def sweep(cases, jobs, timeout, limit, tmp, progress=True):
    ns = namespace()
    ns["_cli"] = _cli
    exec(HELPERS, ns)
    results = []
    pending = list(cases)
    running: list[Running] = []
    done = 0
    while pending or running:
        while pending and len(running) < jobs:
            case = pending.pop(0)
            r, wfd = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                try:
                    run_case(case, ns, wfd, tmp, limit)
                finally:
                    os._exit(3)
            os.close(wfd)
            running.append(Running(case, pid, r, time.monotonic()))
        fds = [x.fd for x in running]
        ready, _, _ = select.select(fds, [], [], 0.05)
        for x in list(running):
            if x.fd in ready:
                chunk = os.read(x.fd, 65536)
                x.buf += chunk
                if chunk:
                    continue
            pid, status = os.waitpid(x.pid, os.WNOHANG)
            now = time.monotonic()
            if pid == 0:
                if x.interrupted_at is None and now - x.start > max(timeout, x.case.timeout or 0):
                    os.kill(x.pid, signal.SIGINT)
                    x.interrupted_at = now
                elif x.interrupted_at is not None and now - x.interrupted_at > 5:
                    os.kill(x.pid, signal.SIGKILL)
                continue
            # finished
            with contextlib.suppress(OSError):
                x.buf += os.read(x.fd, 65536)
            os.close(x.fd)
            running.remove(x)
            res = _outcome(x, status)
            res.update(id=x.case.id, code=x.case.code, seconds=round(now - x.start, 2))
            results.append(res)
            done += 1
            if progress and done % 100 == 0:
                print(f"  {done}/{len(cases)} cases", file=sys.stderr, flush=True)
    return results


def _outcome(x: Running, status: int) -> dict:
    if x.interrupted_at is not None:
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
            return {"kind": "hang", "type": "", "message": "ignored SIGINT after the time limit"}
        return {"kind": "slow", "type": "", "message": "stopped by SIGINT after the time limit"}
    if os.WIFSIGNALED(status):
        sig = signal.Signals(os.WTERMSIG(status)).name
        return {"kind": "abort", "type": sig, "message": f"killed by {sig}"}
    try:
        return json.loads(x.buf.decode().splitlines()[0])
    except (IndexError, ValueError):
        return {"kind": "abort", "type": "", "message": f"no result (exit status {status})"}


def _cli(argv):
    from vastml.cli import main

    try:
        return main(list(argv))
    except SystemExit as e:  # argparse: a usage error exits 2 after one line
        return e.code


def all_cases(tmp: str) -> list[Case]:
    return estimator_cases() + function_cases() + cli_cases(tmp)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=2, help="cases at once (at most 2)")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per case before SIGINT")
    ap.add_argument("--memory", type=float, default=4.0, help="address-space limit in GiB")
    ap.add_argument("--only", default=None, help="run the cases whose id contains this")
    ap.add_argument("--limit", type=int, default=None, help="run about this many cases (spread)")
    ap.add_argument("--out", default="bad_input_failures.json", help="JSON of the failing cases")
    ap.add_argument("--list", action="store_true", help="list the case ids and exit")
    args = ap.parse_args(argv)
    os.environ.setdefault("MPLBACKEND", "Agg")
    import numpy  # noqa: F401 - imported once, before the children fork
    import scipy.sparse  # noqa: F401
    import sklearn  # noqa: F401

    import vastml

    for sub in SUBPACKAGES:
        __import__(f"vastml.{sub}")
    vastml.kernels.__all__  # noqa: B018 - the lazy modules, loaded in the parent
    with tempfile.TemporaryDirectory(prefix="vastml-sweep-") as tmp:
        cases = all_cases(tmp)
        if args.only:
            cases = [c for c in cases if args.only in c.id]
        if args.limit:
            step = max(1, len(cases) // args.limit)
            cases = cases[::step][: args.limit]
        if args.list:
            print("\n".join(c.id for c in cases))
            return 0
        _load_lazy(cases)
        t0 = time.monotonic()
        jobs = min(max(args.jobs, 1), 2)
        limit = int(args.memory * (1 << 30))
        # the valid calls first: the cases derived from one that fails are not run
        bases = {c.id for c in all_cases(tmp) if c.id.endswith("[valid]")}
        need = sorted({base_of(c.id) for c in cases} & bases)
        print(f"{len(cases)} cases ({len(need)} valid calls first), {jobs} at a time",
              file=sys.stderr)
        by_id = {c.id: c for c in all_cases(tmp)}
        base_results = {r["id"]: r for r in sweep([by_id[b] for b in need], jobs, args.timeout,
                                                   limit, tmp)}
        broken = {b for b, r in base_results.items() if r["kind"] not in ("ok", "nan_output")}
        results = [base_results[c.id] for c in cases if c.id in base_results]
        for c in cases:
            if c.id not in base_results and base_of(c.id) in broken:
                results.append({"id": c.id, "kind": "base_failed", "type": "", "message": "",
                                "code": c.code})
        rest = [c for c in cases if c.id not in base_results and base_of(c.id) not in broken]
        results += sweep(rest, jobs, args.timeout, limit, tmp)
    counts = Counter(r["kind"] for r in results)
    print(f"\n{len(results)} cases in {time.monotonic() - t0:.0f} s\n")
    print("| kind | cases |\n|---|---|")
    for k in KINDS:
        if counts.get(k):
            print(f"| {k} | {counts[k]} |")
    failing = sorted((r for r in results if r["kind"] in FAILING), key=lambda r: (r["kind"], r["id"]))
    with open(args.out, "w") as f:
        json.dump(failing, f, indent=1)
    print(f"\n{len(failing)} failing cases written to {args.out}")
    return 1 if failing else 0


def base_of(case_id: str) -> str:
    """The id of the valid call a case is derived from."""
    head = case_id.split("[")[0].split("(")[0]
    parts = head.split(".")
    if parts[0] == "cli":
        return f"{head}[valid]" if head != "cli.svm predict" else "cli.svm train[valid]"
    if len(parts) == 3:  # an estimator's method
        return f"{parts[0]}.{parts[1]}.fit[valid]"
    if parts[1][:1].isupper():  # an estimator's parameter
        return f"{head}.fit[valid]"
    return f"{head}[valid]"


def _load_lazy(cases):
    """Touch every public name the cases use, so that the children do not import them."""
    import importlib

    for sub in SUBPACKAGES:
        mod = importlib.import_module(f"vastml.{sub}")
        for name in mod.__all__:
            getattr(mod, name)
    import vastml.cli  # noqa: F401
    from vastml.cli import demo, embed, order, reorder, svm  # noqa: F401

    # matplotlib and its fonts, loaded once: the commands draw a PNG
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure()
    fig.text(0.5, 0.5, "warm-up")
    fig.savefig(io.BytesIO(), format="png")
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
