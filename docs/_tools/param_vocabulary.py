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

# One meaning per name (the "meaning" column of the table in docs/conventions.md).
MEANINGS = {
    "l2_penalty": "strength of the L2 penalty on the weights (the papers' lambda)",
    "n_landmark_neighbors": "landmarks that reconstruct each point in LLL (the paper's K_Z)",
    "derivative_order": "order of the derivative of the Gaussian kernel",
    "kernel_x": "kernel (Gram) matrix of the first domain's objects",
    "kernel_y": "kernel (Gram) matrix of the second domain's objects",
    "l2_penalty_marginals": "weight of the penalty that keeps an assignment doubly stochastic (CKS's C)",
    "x": "the array the function works on (data, points, or CG's solution)",
    "Q": "a matrix of class-posterior rows (PE's embedding posteriors)",
    "assignment": "a soft or hard assignment matrix between two domains (the papers' pi)",
    "metric": "distance between rows (a SciPy metric name)",
    "neighbors_method": "how nearest neighbours are found (exact, kd-tree, ...)",
    "repulsion_weight": "weight of the repulsive term of elastic embedding (the paper's lambda)",
    "A": "the first matrix of a matrix equation or comparison",
    "B": "the second matrix of a matrix equation or comparison",
    "adaptive_step": "adapt the step length between iterations",
    "axis": "0 orders the rows, 1 the columns",
    "max_size": "largest image size, in pixels",
    "preconditioner": "the preconditioner of conjugate gradients",
    "relative_ridge": "ridge added to a diagonal, relative to the diagonal's mean (the papers' mu)",
    "row_order": "a permutation of the rows",
    "scale": "how the values are scaled before drawing ('columns', 'global', ...)",
    "start": "where it starts: a schedule's first value, or a path's first point",
    "stopped": "whether the run stopped before its end",
    "n_iter_": "the number of iterations run (a field of a result record)",
    "time_limit": "largest wall-clock time in seconds",
    "truncation": "number of terms of the series expansion (None = chosen from epsilon)",
    "update_damping": "damping of AROW's confidence update (the paper's r)",
    "n_jobs": "threads (or processes) to use; None = all cores",
    "random_state": "the one source of randomness of a call",
    "method": "which algorithm computes the result (each docstring lists the choices)",
    "epsilon": "absolute error bound of a fast sum, relative to the total absolute weight",
    "max_iter": "largest number of iterations / epochs / passes",
    "tol": "tolerance of the stopping rule (the docstring says of which quantity)",
    "n_components": "output dimension of an embedding or decomposition",
    "verbose": "bool or int: progress bar / messages",
    "kernel": "the kernel function (name, array of weights, or callable)",
    "matrix": "the matrix to reorder or evaluate",
    "order": "an ordering of the points: a permutation of the rows, or the order in which they are visited",
    "n_neighbors": "a number of nearest neighbours",
    "bandwidth": "kernel width (σ or h: the docstring says which)",
    "callback": "old form of `callbacks`",
    "callbacks": "callables called as callback(iteration, objective, state); True stops",
    "callback_every": "call the callbacks every this many iterations",
    "n_landmarks": "number of landmarks",
    "gamma": "RBF width, exp(-gamma ||x - y||^2)",
    "n_samples": "number of rows to generate",
    "landmarks": "how landmarks are chosen, or their indices",
    "W": "a sparse affinity (attraction) matrix",
    "reg": "regulariser of the local Gram matrices (times their trace)",
    "categorical": "treat the values as colours (None = decide from the data)",
    "alpha": "strength of an L2 penalty (paper: lambda)",
    "client": "the dask.distributed Client to run on (None = the active one)",
    "backend": "implementation to run (Rust or the NumPy reference)",
    "perplexity": "effective number of neighbours of entropic affinities",
    "kappa": "neighbours kept per row when sparsifying the spectral direction's Laplacian",
    "root": "folder holding the data sets (None = the shared data folder)",
    "init": "how the solution is initialised",
    "eta_r": "weight of the penalty on object coordinates (PE)",
    "eta_phi": "weight of the penalty on class centres (PE)",
    "Phi": "class centres (PE)",
    "log_prior": "log class priors (PE)",
    "P": "affinities or class posteriors (rows are objects)",
    "theta": "Barnes-Hut accuracy (0 = exact)",
    "n_init": "number of random restarts; the best is kept",
    "model": "which objective (ee, sne, ssne, tsne)",
    "sources": "points carrying the weights of a Gauss transform",
    "targets": "points where a Gauss transform is evaluated",
    "weights": "weights q of the sources",
    "n_epochs": "passes over the data (to become max_iter)",
    "shuffle": "shuffle the examples before each epoch",
    "n_partitions": "number of Dask partitions (mappers)",
    "R": "object coordinates (PE)",
    "gradient": "how the repulsion's gradient is computed (exact, barnes_hut, fft, fgt)",
    "C": "penalty weight (paper symbol)",
    "center": "centre the data / kernels",
    "n_iter": "a number of iterations (to become max_iter)",
    "kernel_size": "size of the ConvoMap kernel (rows, cols)",
    "n_features": "number of columns to generate",
    "bias": "value of the constant feature appended to every example",
    "lam": "weight of the repulsion in EE (paper: lambda)",
    "compact": "store affinities as int32 / float32 CSR",
    "padding": "what lies outside the matrix (ConvoMap)",
    "noise_variance": "variance of the observation noise",
    "learning_rate": "gradient-descent step size",
    "n_interp": "interpolation nodes per box (FFT gradient)",
    "ridge": "added to a diagonal to make a solve well posed",
    "affinity_method": "root finder of entropic affinities",
    "neighbors": "how neighbours are found (auto, exact, approx)",
    "neighbours": "number of neighbour candidates per point (to become n_neighbors)",
    "length_scale": "GP kernel length scale (scikit-learn's convention)",
    "rtol": "relative error bound",
    "noise": "amount of noise in generated data",
    "degree": "polynomial kernel degree",
    "coef0": "polynomial kernel offset",
    "r": "AROW regularisation (paper symbol)",
    "covariance": "full or diagonal covariance",
    "update_on": "when AROW updates (margin or mistake)",
    "plan": "how a sharded Gauss transform is planned (local, split, auto)",
    "tol_r": "tolerance of the per-object solves (PE)",
    "max_newton_iter": "Newton steps per object solve (PE)",
    "solver": "the method that solves the core problem (an eigensolver, a linear solver)",
    "affinity": "how the affinity graph is built",
    "n_clusters": "number of clusters",
    "image_shape": "shape of each row seen as an image (for raster orders)",
    "min_iter": "smallest number of iterations",
    "xtol": "tolerance on the relative change of the solution",
    "gtol": "tolerance on the gradient norm",
    "gscale": "scale of the gradient norm for gtol",
    "delta": "tolerance of the GP's CG solve",
    "X0": "initial embedding",
    "objective": "an EmbeddingObjective",
    "labels": "class labels",
    "error": "the error measure (abs or quadratic)",
    "symmetric": "whether the matrix is symmetric",
    "graph": "a precomputed affinity graph",
    "data": "the data",
    "number": "which Marron-Wand density (1-15)",
    "path": "a file path",
    "K": "kernel matrix of the first set (CKS)",
    "L": "kernel matrix of the second set (CKS)",
    "pi": "the soft assignment matrix (CKS)",
    "axes": "which axes (ConvoMap: rows / columns to reorder)",
    "block": "rows per block when streaming a kernel matrix",
    "clf": "a fitted classifier with predict_proba",
    "col_order": "a permutation of the columns",
    "reordered": "the reordered matrix to draw beside the original",
    "size": "side of the generated square matrix",
    "std": "standard deviation of the data",
}

# Names that mean different things in different places (the lead picks one meaning).
MULTI_MEANING: dict[str, str] = {
    # e.g. "axes": "two meanings: ...": none today. (`order` is always an ordering of the
    # points: the rows' permutation, or the order in which they are visited.)
}
PAPER_SYMBOLS = {"K", "L", "pi"}


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
    if name in MULTI_MEANING:
        out.append(MULTI_MEANING[name])
    if len(rows) > 1 and name not in MEANINGS:
        out.append("no meaning written in MEANINGS (docs/_tools/param_vocabulary.py)")
    if name in PAPER_SYMBOLS:
        out.append("a paper symbol: name what it is (e.g. `kernel_x`, `assignment`)")
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
        print("| name | meaning | uses | defaults | used by | today |")
        print("|---|---|---|---|---|---|")
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
            print(f"| `{n}` | {MEANINGS.get(n, '')} | {len(rows)} | {d} | {where} | {status} |")
        else:
            print(f"{n:28s} {len(rows):3d}  {'; '.join(pr) or 'ok'}")


if __name__ == "__main__":
    main()
