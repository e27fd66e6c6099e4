"""``vastml svm train|predict``: BudgetedSVM-style command lines, and the demo section."""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

TRAIN_HELP = """\
Train on a LIBSVM-format file and write the model in BudgetedSVM's text format.
Option letters follow budgetedsvm-train:
  -A algorithm: 0 Pegasos, 1 AMM batch, 2 AMM online, 3 LLSVM, 4 BSGD (2)
  -e epochs (5)  -B weights per class (AMM) / budget (BSGD) / landmarks (LLSVM) (50)
  -L lambda (0.0001)  -b bias (1.0)  -k pruning period (10000)  -c pruning c (10)
  -C GAMM clone probability (0)  -K kernel 0 rbf, 1 exponential, 2 poly, 3 linear, 4 sigmoid (0)
  -g kernel width g of exp(-g/2 ||x-y||^2) (1/D)  -d degree / slope (2)  -i intercept (1)
  -m BSGD 0 removal / 1 merging / 2 projection (ours); LLSVM 0 random / 1 k-means / 2 k-medoids landmarks (1)
  -D dimension (inferred)  -r 1 shuffle / 0 not (1)  -v verbose (0)  -s -z -w -S accepted, ignored
"""


def _load(path, n_features=None):
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(str(path), n_features=n_features)
    return X, y


def _labels(y):
    yi = y.astype(np.int64)
    return yi if np.all(yi == y) else y


def _estimator(a, dim):
    from vastml.svm import AMMClassifier, BSGDClassifier, LLSVMClassifier, PegasosClassifier

    rs = None if a.r else 0
    shuffle = bool(a.r)
    g = a.g if a.g is not None else 1.0 / dim
    kernel = {0: "rbf", 1: "exponential", 2: "poly", 3: "linear", 4: "sigmoid"}.get(a.K)
    if kernel is None:
        raise ValueError(f"-K {a.K}: unknown kernel (0-4)")
    # BudgetedSVM: exp(-g/2 d^2) and exp(-g/2 d) (our gamma = g/2); (i + x.z)^d; tanh(i + d x.z)
    # (its -d is the sigmoid's slope, our gamma)
    gamma = g / 2.0 if a.K in (0, 1) else (a.d if a.K == 4 else g)
    if a.K == 2 and (not float(a.d).is_integer() or a.d < 1):
        raise ValueError(f"-d {a.d:g}: the polynomial degree must be a whole number >= 1")
    if a.A == 0:
        return PegasosClassifier(l2_penalty=a.L, max_iter=a.e, bias=a.b, shuffle=shuffle, random_state=rs, verbose=a.v)
    if a.A in (1, 2):
        return AMMClassifier(
            l2_penalty=a.L, max_iter=a.e, online=a.A == 2, max_weights_per_class=a.B, prune_every=a.k,
            prune_c=a.c, bias=a.b, clone_probability=a.C, shuffle=shuffle, random_state=rs, verbose=a.v,
        )
    if a.A == 3:
        return LLSVMClassifier(
            l2_penalty=a.L, n_landmarks=a.B, landmarks={0: "random", 1: "kmeans", 2: "kmedoids"}.get(a.m, "kmeans"), kernel=kernel,
            gamma=gamma, degree=int(a.d), coef0=a.i, random_state=rs, verbose=a.v,
        )
    if a.A == 4:
        return BSGDClassifier(
            l2_penalty=a.L, budget=a.B, maintenance={0: "remove", 1: "merge", 2: "project"}.get(a.m, "merge"), kernel=kernel,
            gamma=gamma, degree=int(a.d), coef0=a.i, max_iter=a.e, shuffle=shuffle, random_state=rs, verbose=a.v,
        )
    raise ValueError(f"-A {a.A}: unknown algorithm (0-4)")


def _train(a: argparse.Namespace) -> int:
    from vastml.svm import save_budgetedsvm

    X, y = _load(a.train_file, a.D)
    est = _estimator(a, X.shape[1])
    model = a.model_file or (str(a.train_file) + ".model")
    folder = os.path.dirname(os.path.abspath(model))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):  # before the work
        raise OSError(f"cannot write the model file {model!r}: {folder!r} is not a writable folder")
    t0 = time.perf_counter()
    est.fit(X, _labels(y))
    took = time.perf_counter() - t0
    save_budgetedsvm(est, model)
    print(f"trained {type(est).__name__} on {X.shape[0]:,} examples x {X.shape[1]} features in {took:.2f} s;"
          f" model size {est.n_weights_}; written to {model}")
    return 0


def _predict(a: argparse.Namespace) -> int:
    from vastml.svm import load_budgetedsvm

    est = load_budgetedsvm(a.model_file)
    X, y = _load(a.test_file, est.n_features_in_)
    y = _labels(y)
    t0 = time.perf_counter()
    pred = est.predict(X)
    took = time.perf_counter() - t0
    with open(a.output_file, "w") as f:
        if a.o:
            s = est._decision_matrix(est._predict_data(X))
            top = np.sort(s, axis=1)
            score = top[:, -1] - top[:, -2]
            for p, sc in zip(pred, score):
                f.write(f"{p}\t{sc:.6g}\n")
        else:
            f.writelines(f"{p}\n" for p in pred)
    try:
        acc = float(np.mean(pred == y))
        print(f"accuracy {100 * acc:.2f}% (error {100 * (1 - acc):.2f}%) on {len(y):,} examples; "
              f"predicted in {took:.3f} s; written to {a.output_file}")
    except (TypeError, ValueError):
        print(f"predicted {len(pred):,} examples in {took:.3f} s; written to {a.output_file}")
    return 0


def add_svm_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``svm train`` and ``svm predict`` to the ``vastml`` command."""
    s = sub.add_parser("svm", help="budgeted SVMs on LIBSVM-format files (BudgetedSVM options)")
    ss = s.add_subparsers(dest="svm_command", required=True)
    t = ss.add_parser("train", help="train a model", description=TRAIN_HELP,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag, typ, default in [
        ("-A", int, 2), ("-e", int, 5), ("-B", int, 50), ("-L", float, 1e-4), ("-b", float, 1.0),
        ("-k", int, 10000), ("-c", float, 10.0), ("-C", float, 0.0), ("-K", int, 0), ("-g", float, None),
        ("-d", float, 2.0), ("-i", float, 1.0), ("-m", int, 1), ("-D", int, None), ("-r", int, 1),
        ("-v", int, 0), ("-s", int, 1), ("-z", int, 50000), ("-w", int, 1000), ("-S", int, None),
    ]:
        t.add_argument(flag, type=typ, default=default, help=argparse.SUPPRESS)
    t.add_argument("train_file")
    t.add_argument("model_file", nargs="?")
    t.set_defaults(func=_train)
    p = ss.add_parser("predict", help="predict with a model file")
    p.add_argument("-o", type=int, default=0, help="1: also write the winner-minus-runner-up score")
    p.add_argument("-v", type=int, default=0, help=argparse.SUPPRESS)
    for flag in ("-z", "-w", "-S"):
        p.add_argument(flag, type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("test_file")
    p.add_argument("model_file")
    p.add_argument("output_file")
    p.set_defaults(func=_predict)


def demo_section(args: argparse.Namespace) -> None:
    """The ``vastml demo`` part on budgeted SVMs: the thesis's 4x4 checkerboard."""
    from vastml.datasets import make_checkerboard
    from vastml.svm import AMMClassifier, BSGDClassifier, LLSVMClassifier, PegasosClassifier

    n = 5_000 if args.quick else 15_000
    X, y = make_checkerboard(n, 4, 4, random_state=args.seed)
    Xt, yt = make_checkerboard(5_000, 4, 4, random_state=args.seed + 1)
    X, Xt = 2 * X - 1, 2 * Xt - 1
    print(f"\n4. Budgeted classifiers on a 4x4 checkerboard ({n:,} train / 5,000 test points)")
    models = [
        ("Pegasos (linear)", PegasosClassifier(l2_penalty=1e-4, random_state=0)),
        ("AMM batch", AMMClassifier(l2_penalty=1e-4, max_iter=15, random_state=0)),
        ("GAMM (p=0.2)", AMMClassifier(l2_penalty=1e-4, max_iter=15, prune_c=50, clone_probability=0.2,
                                       variant="thesis", random_state=0)),
        ("LLSVM, 100 landmarks", LLSVMClassifier(l2_penalty=1e-3, n_landmarks=100, gamma=20.0, random_state=0)),
        ("BSGD merge, budget 100", BSGDClassifier(l2_penalty=1e-4, budget=100, gamma=20.0, random_state=0)),
    ]
    for name, est in models:
        t0 = time.perf_counter()
        est.fit(X, y)
        took = time.perf_counter() - t0
        err = 100 * (1 - est.score(Xt, yt))
        print(f"   {name:24s} test error {err:5.1f}%   model size {est.n_weights_:4d}   train {took:.2f} s")
    sys.stdout.flush()
