"""List every public parameter name used by more than one public callable of vastml.

Inspects the signatures of every class (its ``__init__``) and function in the ``__all__`` of
each sub-package and prints, for each parameter name used more than once, how many callables use
it, its defaults and where it appears. ``--markdown`` prints the table used in
``docs/conventions.md``; ``--flag`` lists only the names that break the vocabulary.

    .venv/bin/python docs/_tools/param_vocabulary.py --markdown
"""

from __future__ import annotations

import argparse
import importlib
import inspect
from collections import defaultdict

PACKAGES = ["kernels", "reorder", "svm", "embed", "matching", "distributed", "datasets"]

# Names that the vocabulary replaces (docs/conventions.md): a use of one of these is flagged.
RENAMES = {
    "lam": "regularisation named by what it does (e.g. `repulsion_weight`)",
    "neighbours": "`n_neighbors`",
    "n_neighbors_z": "`n_neighbors` (or a name saying which neighbours)",
    "n_iter": "`max_iter`",
    "n_epochs": "`max_iter` (one iteration = one epoch)",
    "callback": "`callbacks` (with `callback_every`)",
    "alpha": "regularisation named by what it does",
    "C": "regularisation named by what it does",
    "r": "regularisation named by what it does",
    "eta_r": "regularisation named by what it does",
    "eta_phi": "regularisation named by what it does",
    "mu_rel": "regularisation named by what it does",
    "seed": "`random_state`",
    "neighbors": "a name that says it is a method (e.g. `neighbors_method`)",
}


def callables():
    for pkg in PACKAGES:
        mod = importlib.import_module(f"vastml.{pkg}")
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name)
            if inspect.isclass(obj):
                fn = obj.__init__
            elif callable(obj):
                fn = obj
            else:
                continue
            try:
                sig = inspect.signature(fn)
            except (TypeError, ValueError):
                continue
            yield f"{pkg}.{name}", inspect.isclass(obj), sig


def collect():
    uses = defaultdict(list)
    for where, is_class, sig in callables():
        for p in sig.parameters.values():
            if p.name in ("self", "X", "y") or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            default = "required" if p.default is p.empty else repr(p.default)
            uses[p.name].append((where, is_class, default, p.kind == p.KEYWORD_ONLY))
    return uses


def problems(name, rows):
    out = []
    if name in RENAMES:
        out.append(f"rename to {RENAMES[name]}")
    if name == "verbose":
        defaults = {d for _, _, d, _ in rows}
        if len(defaults) > 1:
            out.append("defaults differ: " + ", ".join(sorted(defaults)))
    if name == "n_jobs":
        bad = [w for w, _, d, _ in rows if d != "None"]
        if bad:
            out.append("default not None in " + ", ".join(bad))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--flag", action="store_true", help="only names that break the vocabulary")
    args = ap.parse_args()
    uses = collect()
    names = sorted((n for n, r in uses.items() if len(r) > 1), key=lambda n: (-len(uses[n]), n))
    # names used once but on the rename list are flagged too
    flagged_single = sorted(n for n, r in uses.items() if len(r) == 1 and n in RENAMES)
    if args.markdown:
        print("| name | uses | defaults | used by | today |")
        print("|---|---|---|---|---|")
    for n in names + flagged_single:
        rows = uses[n]
        pr = problems(n, rows)
        if args.flag and not pr:
            continue
        defaults = sorted({d for _, _, d, _ in rows})
        if len(defaults) > 4:
            defaults = defaults[:4] + ["..."]
        where = ", ".join(sorted(w.split(".", 1)[1] for w, _, _, _ in rows))
        if args.markdown:
            status = "**" + "; ".join(pr) + "**" if pr else "ok"
            d = ", ".join(f"`{x}`" for x in defaults)
            print(f"| `{n}` | {len(rows)} | {d} | {where} | {status} |")
        else:
            print(f"{n:28s} {len(rows):3d}  {'; '.join(pr) or 'ok'}")


if __name__ == "__main__":
    main()
