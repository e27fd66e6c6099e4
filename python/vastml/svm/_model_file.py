"""Reading and writing models in BudgetedSVM 1.2's text format.

The grammar, byte for byte as ``budgetedsvm-train`` writes it and ``budgetedsvm-predict``
reads it, is in ``docs/guide/model_files.md``. In short: header rows ``NAME: value`` in a fixed
order, then ``MODEL:`` and one row per weight / support vector / landmark.

- Pegasos / AMM (``ALGORITHM`` 0, 1, 2): header ALGORITHM, DIMENSION, NUMBER_OF_CLASSES,
  LABELS, NUMBER_OF_WEIGHTS (one count per class), BIAS_TERM, KERNEL_WIDTH; rows
  ``label degradation idx:value ...``, grouped by class in LABELS order. The weight is
  ``degradation * values``; with a non-zero BIAS_TERM ``b`` DIMENSION counts a last feature
  that holds the bias weight (the input is ``[x, b]``).
- BSGD (4) and LLSVM (3): header ALGORITHM, DIMENSION, NUMBER_OF_CLASSES, LABELS,
  NUMBER_OF_WEIGHTS (one count), BIAS_TERM, KERNEL_FUNCTION, KERNEL_GAMMA_PARAM,
  KERNEL_DEGREE_PARAM, KERNEL_COEF_PARAM. BSGD rows: ``-k:alpha_k ... idx:value ...`` (alphas
  of class k, 1-based in LABELS order, with a minus sign, then the support vector). LLSVM rows
  (binary): ``w_i W_i1 ... W_iB idx:value ...``, the score being ``g(x)' W w`` with
  ``g_j(x) = k(landmark_j, x)``, positive for the second label.

Labels are integers (BudgetedSVM reads them with ``%d``); other labels are refused on writing.
Kernels: 0 Gaussian ``exp(-g/2 ||x-z||^2)`` (our ``gamma = g/2``), 1 exponential
``exp(-g/2 ||x-z||)``, 2 polynomial ``(coef + x.z)^degree``, 3 linear, 4 sigmoid
``tanh(coef + degree * x.z)`` (our ``gamma`` is the slope). Files that cannot be represented
exactly (a user-defined kernel, a fractional polynomial degree) are refused with a message, as
are truncated or malformed files: every error names the file and the line.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from vastml._typing import PathLike

ALGORITHMS = {"pegasos": 0, "amm_batch": 1, "amm_online": 2, "llsvm": 3, "bsgd": 4}
KERNEL_CODES = {"rbf": 0, "exponential": 1, "poly": 2, "linear": 3, "sigmoid": 4}

_AMM_KEYS = ("ALGORITHM", "DIMENSION", "NUMBER_OF_CLASSES", "LABELS", "NUMBER_OF_WEIGHTS",
             "BIAS_TERM", "KERNEL_WIDTH")
_KERNEL_KEYS = ("ALGORITHM", "DIMENSION", "NUMBER_OF_CLASSES", "LABELS", "NUMBER_OF_WEIGHTS",
                "BIAS_TERM", "KERNEL_FUNCTION", "KERNEL_GAMMA_PARAM", "KERNEL_DEGREE_PARAM",
                "KERNEL_COEF_PARAM")
# A model row may not hold more than this many entries per feature of DIMENSION (guards the
# dense arrays sized from the header against absurd values).
_MAX_CELLS = 2**31


class ModelFileError(ValueError):
    """A model file that is malformed, truncated, or holds what vastml cannot represent.

    The message starts with ``<path>:<line>:`` (the line is 1-based; 0 when the problem is the
    file as a whole).

    Parameters
    ----------
    path : str or os.PathLike
        The model file.
    line : int
        The 1-based line of the problem, 0 for the file as a whole.
    reason : str
        What is wrong there.

    Attributes
    ----------
    path : str
    line : int
    reason : str

    Examples
    --------
    >>> import os, tempfile
    >>> from vastml.svm import ModelFileError, load_budgetedsvm
    >>> path = os.path.join(tempfile.mkdtemp(), "model.txt")
    >>> with open(path, "w") as f:
    ...     _ = f.write("not a model\\n")
    >>> try:
    ...     load_budgetedsvm(path)
    ... except ModelFileError as e:
    ...     print(e.line, isinstance(e, ValueError))
    1 True
    """

    def __init__(self, path: PathLike, line: int, reason: str) -> None:
        self.path, self.line, self.reason = os.fspath(path), int(line), reason
        super().__init__(f"{self.path}:{self.line}: {reason}")


def _num(v):
    return format(float(v), ".17g")


def _sparse_items(v):
    nz = np.flatnonzero(v)
    return " ".join(f"{j + 1}:{_num(v[j])}" for j in nz)


def _integer_labels(labels):
    """The labels as Python ints, or a ValueError naming what the format cannot hold."""
    out = []
    for lab in labels:
        ok = isinstance(lab, (int, np.integer)) and not isinstance(lab, (bool, np.bool_))
        if not ok and isinstance(lab, (float, np.floating)) and float(lab).is_integer():
            ok = True
        if not ok or not -(2**31) <= int(lab) < 2**31:
            raise ValueError(
                "the BudgetedSVM model format holds 32-bit integer class labels only (its "
                f"reader uses %d); this model's `classes_` are {list(labels)[:4]!r}: encode "
                "them as integers first (e.g. with sklearn.preprocessing.LabelEncoder) and keep "
                "the mapping"
            )
        out.append(int(lab))
    return out


def _kernel_header(estimator, d):
    """(code, gamma, degree, coef) in BudgetedSVM's convention for a BSGD / LLSVM estimator."""
    from vastml.svm._bsgd import kernel_gamma

    kern = estimator.kernel
    gamma = kernel_gamma(estimator.gamma, d)
    degree, coef = float(estimator.degree), float(estimator.coef0)
    if kern in ("rbf", "exponential"):
        return KERNEL_CODES[kern], 2.0 * gamma, degree, coef
    if kern == "sigmoid":  # tanh(coef + slope x.z): BudgetedSVM's slope is its -d
        return KERNEL_CODES[kern], 0.0, gamma, coef
    return KERNEL_CODES[kern], 0.0, degree, coef


def save_budgetedsvm(estimator: Any, path: PathLike) -> None:
    """Write a fitted Pegasos / AMM / GAMM / BSGD / binary LLSVM classifier to ``path``.

    The file is the one ``budgetedsvm-train`` writes, readable by ``budgetedsvm-predict``
    (see ``docs/guide/model_files.md``).

    Raises
    ------
    ValueError
        When the format cannot hold the model: labels that are not integers, a multi-class
        LLSVM (BudgetedSVM's LLSVM is binary).
    TypeError
        For an estimator of another kind.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from vastml.svm import AMMClassifier, save_budgetedsvm, load_budgetedsvm
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 3)); y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    >>> clf = AMMClassifier(l2_penalty=1e-3, random_state=0).fit(X, y)
    >>> path = os.path.join(tempfile.mkdtemp(), "model.txt")
    >>> save_budgetedsvm(clf, path)
    >>> back = load_budgetedsvm(path)
    >>> bool(np.all(back.predict(X) == clf.predict(X)))
    True
    """
    from vastml.svm._amm import AMMClassifier, PegasosClassifier
    from vastml.svm._bsgd import BSGDClassifier
    from vastml.svm._llsvm import LLSVMClassifier

    if not isinstance(estimator, (AMMClassifier, BSGDClassifier, LLSVMClassifier)):
        raise TypeError(f"cannot write a {type(estimator).__name__} in the BudgetedSVM format")
    if not hasattr(estimator, "classes_"):
        from sklearn.exceptions import NotFittedError

        raise NotFittedError(f"this {type(estimator).__name__} is not fitted yet: call fit first")
    d = int(estimator.n_features_in_)
    labels = _integer_labels(estimator.classes_)
    rows = []
    head = []
    if isinstance(estimator, AMMClassifier):
        if isinstance(estimator, PegasosClassifier):
            algo = "pegasos"
        else:
            algo = "amm_online" if estimator.online else "amm_batch"
        bias = float(estimator.bias)
        dim = d + (bias != 0.0)
        W = np.asarray(estimator.weights_, dtype=np.float64)[:, :dim]
        wc = np.asarray(estimator.weight_class_)
        # Online AMM / the thesis rules give every class below its budget a zero weight that
        # scores 0 (see AMMClassifier); BudgetedSVM knows only stored weights, so write it out.
        floors = not isinstance(estimator, PegasosClassifier) and (
            estimator.online or estimator.variant != "budgetedsvm"
        )
        counts = []
        for k in range(len(labels)):
            mine = np.flatnonzero(wc == k)
            for j in mine:
                rows.append(f"{labels[k]} 1 {_sparse_items(W[j])}".rstrip())
            n = len(mine)
            if n == 0 or (floors and n < int(estimator.max_weights_per_class)):
                rows.append(f"{labels[k]} 1")
                n += 1
            counts.append(n)
        head = [("DIMENSION", dim), ("NUMBER_OF_CLASSES", len(labels)),
                ("LABELS", " ".join(map(str, labels))), ("NUMBER_OF_WEIGHTS", " ".join(map(str, counts))),
                ("BIAS_TERM", _num(bias)), ("KERNEL_WIDTH", "0.0")]
    else:
        code, g, degree, coef = _kernel_header(estimator, d)
        if isinstance(estimator, BSGDClassifier):
            algo = "bsgd"
            SV = np.asarray(estimator.support_vectors_, dtype=np.float64)
            A = np.asarray(estimator.dual_coef_, dtype=np.float64)
            for a, z in zip(A, SV):
                alphas = " ".join(f"-{c + 1}:{_num(a[c])}" for c in range(len(labels)) if a[c] != 0)
                rows.append(f"{alphas} {_sparse_items(z)}".strip())
        else:
            if len(labels) != 2:
                raise ValueError(
                    "BudgetedSVM's LLSVM is binary: a model of "
                    f"{len(labels)} classes cannot be written in its format"
                )
            algo = "llsvm"
            # score = coef . (M g(x)) = g(x)' W w with W = identity, w = M' coef
            w = np.asarray(estimator.map_matrix_).T @ np.asarray(estimator.coef_)[0]
            B = len(w)
            for i, z in enumerate(np.asarray(estimator.landmarks_, dtype=np.float64)):
                unit = " ".join("1" if j == i else "0" for j in range(B))
                rows.append(f"{_num(w[i])} {unit} {_sparse_items(z)}".rstrip())
        head = [("DIMENSION", d), ("NUMBER_OF_CLASSES", len(labels)),
                ("LABELS", " ".join(map(str, labels))), ("NUMBER_OF_WEIGHTS", len(rows)),
                ("BIAS_TERM", "0.0"), ("KERNEL_FUNCTION", code), ("KERNEL_GAMMA_PARAM", _num(g)),
                ("KERNEL_DEGREE_PARAM", _num(degree)), ("KERNEL_COEF_PARAM", _num(coef))]
    text = [f"ALGORITHM: {ALGORITHMS[algo]}"] + [f"{k}: {v}" for k, v in head] + ["MODEL:"]
    # BudgetedSVM's reader skips one byte after "MODEL:\n" (it seeks strlen("MODEL:\n") + 1):
    # a leading space on the first row makes that byte harmless.
    if rows:
        rows[0] = " " + rows[0]
    with open(path, "w") as f:
        f.write("\n".join(text + rows) + "\n")


# --------------------------------------------------------------------------------------------
# reading


class _Reader:
    def __init__(self, path):
        self.path = os.fspath(path)
        with open(path, "rb") as f:
            raw = f.read()
        try:
            text = raw.decode("ascii")
        except UnicodeDecodeError as exc:
            line = raw[: exc.start].count(b"\n") + 1
            raise ModelFileError(path, line, f"byte {raw[exc.start]:#04x} is not ASCII text") from None
        if not text.endswith("\n"):
            n = text.count("\n") + 1
            raise ModelFileError(path, n, "the file does not end with a newline: it is truncated")
        self.lines = text[:-1].split("\n")

    def error(self, line, reason):
        return ModelFileError(self.path, line, reason)

    def header(self, keys):
        """Header values by key (strings), checked in BudgetedSVM's fixed order."""
        out = {}
        for i, key in enumerate(keys):
            if i >= len(self.lines):
                raise self.error(i + 1, f"the file ends before the {key} row: it is truncated")
            name, sep, value = self.lines[i].partition(":")
            if not sep or name.strip() != key:
                raise self.error(i + 1, f"expected the row '{key}: ...', got {self.lines[i][:60]!r}")
            out[key] = (value.strip(), i + 1)
        i = len(keys)
        if i >= len(self.lines) or self.lines[i].strip() != "MODEL:":
            got = self.lines[i][:60] if i < len(self.lines) else "the end of the file"
            raise self.error(i + 1, f"expected the row 'MODEL:', got {got!r}")
        return out

    def int_(self, value, line, what, low=None, high=None):
        try:
            v = int(value)
        except ValueError:
            raise self.error(line, f"{what} must be an integer, got {value!r}") from None
        if (low is not None and v < low) or (high is not None and v > high):
            raise self.error(line, f"{what} must be in [{low}, {high}], got {v}")
        return v

    def float_(self, value, line, what):
        try:
            v = float(value)
        except ValueError:
            raise self.error(line, f"{what} must be a number, got {value!r}") from None
        if not math.isfinite(v):
            raise self.error(line, f"{what} must be finite, got {value!r}")
        return v

    def body(self, start, n):
        """The n model rows after the header (token lists with their line numbers)."""
        rows = []
        for k in range(n):
            i = start + k
            if i >= len(self.lines):
                raise self.error(i + 1, f"the file ends after {k} of {n} model rows: it is truncated")
            rows.append((self.lines[i].split(), i + 1))
        for j in range(start + n, len(self.lines)):
            if self.lines[j].strip():
                raise self.error(j + 1, f"unexpected text after the {n} model rows (NUMBER_OF_WEIGHTS)")
        return rows

    def features(self, tokens, line, dim):
        """Dense vector from ``idx:value`` tokens (1-based, each index once)."""
        v = np.zeros(dim)
        seen = set()
        for tok in tokens:
            j, sep, x = tok.partition(":")
            if not sep:
                raise self.error(line, f"expected 'index:value', got {tok!r}")
            j = self.int_(j, line, "a feature index", 1, dim)
            if j in seen:
                raise self.error(line, f"feature index {j} appears twice")
            seen.add(j)
            v[j - 1] = self.float_(x, line, f"the value of feature {j}")
        return v


def _common_header(r, h):
    algo = r.int_(*h["ALGORITHM"], "ALGORITHM", 0, 4)
    dim = r.int_(*h["DIMENSION"], "DIMENSION", 1, 2**31 - 1)
    n_classes = r.int_(*h["NUMBER_OF_CLASSES"], "NUMBER_OF_CLASSES", 2, 2**31 - 1)
    value, line = h["LABELS"]
    labels = [r.int_(t, line, "a label") for t in value.split()]
    if len(labels) != n_classes:
        raise r.error(line, f"LABELS holds {len(labels)} labels, NUMBER_OF_CLASSES says {n_classes}")
    if len(set(labels)) != len(labels):
        raise r.error(line, "LABELS repeats a label")
    bias = r.float_(*h["BIAS_TERM"], "BIAS_TERM")
    return algo, dim, labels, bias


def _check_cells(r, line, n_rows, dim):
    from vastml.svm._base import available_bytes

    need = 16 * n_rows * dim  # the dense model and the copy prediction makes
    free = available_bytes()
    if n_rows * dim > _MAX_CELLS or (free is not None and need > free):
        raise r.error(line, f"{n_rows:,} rows of DIMENSION {dim:,} need {need / 2**30:.3g} GiB as dense "
                      "vectors, more than this reader holds or the memory available")


def load_budgetedsvm(path: PathLike) -> Any:
    """Read a model written by BudgetedSVM 1.2 or :func:`save_budgetedsvm` into a fitted
    vastml classifier (Pegasos / AMM / BSGD / LLSVM, by its ALGORITHM row).

    A non-zero BIAS_TERM of a kernel model (BudgetedSVM appends the constant ``b`` to every
    input) is folded into the kernel exactly: into the alphas (Gaussian) or into ``coef0``
    (polynomial, linear, sigmoid, where every support vector's bias feature is ``b``).

    Raises
    ------
    ModelFileError
        (a ValueError) naming the file and the line, for a truncated or malformed file or one
        vastml cannot represent exactly.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from vastml.svm import load_budgetedsvm
    >>> path = os.path.join(tempfile.mkdtemp(), "model.txt")
    >>> with open(path, "w") as f:
    ...     _ = f.write("ALGORITHM: 0\\nDIMENSION: 3\\nNUMBER_OF_CLASSES: 2\\nLABELS: -1 1\\n"
    ...                 "NUMBER_OF_WEIGHTS: 1 1\\nBIAS_TERM: 1.000000\\nKERNEL_WIDTH: 0.0\\n"
    ...                 "MODEL:\\n -1 0.5 1:-2.0 3:0.2\\n1 0.5 1:2.0 3:-0.2\\n")
    >>> clf = load_budgetedsvm(path)
    >>> clf.predict(np.array([[1.0, 0.0], [-1.0, 5.0]])).tolist()
    [1, -1]
    """
    r = _Reader(path)
    if not r.lines or not r.lines[0].startswith("ALGORITHM"):
        raise r.error(1, "expected the row 'ALGORITHM: <0..4>' first")
    _, _, val = r.lines[0].partition(":")
    algo = r.int_(val.strip(), 1, "ALGORITHM", 0, 4)
    if algo in (0, 1, 2):
        return _load_amm(r, r.header(_AMM_KEYS))
    return _load_kernel(r, r.header(_KERNEL_KEYS))


def _load_amm(r, h):
    from vastml.svm._amm import AMMClassifier, PegasosClassifier

    algo, dim, labels, bias = _common_header(r, h)
    value, line = h["NUMBER_OF_WEIGHTS"]
    counts = [r.int_(t, line, "a weight count", 0, 2**31 - 1) for t in value.split()]
    if len(counts) != len(labels):
        raise r.error(line, f"NUMBER_OF_WEIGHTS holds {len(counts)} counts for {len(labels)} classes")
    r.float_(*h["KERNEL_WIDTH"], "KERNEL_WIDTH")
    d = dim - (bias != 0.0)
    if d < 1:
        raise r.error(h["DIMENSION"][1], "DIMENSION leaves no feature besides the bias")
    n = sum(counts)
    _check_cells(r, line, n, dim)
    rows = r.body(len(_AMM_KEYS) + 1, n)
    W = np.zeros((n, d + 1))
    wc = np.zeros(n, dtype=np.int64)
    k = 0
    for cls, cnt in enumerate(counts):
        for _ in range(cnt):
            toks, ln = rows[k]
            if len(toks) < 2:
                raise r.error(ln, "a weight row needs 'label degradation idx:value ...'")
            lab = r.int_(toks[0], ln, "the weight's label")
            if lab != labels[cls]:
                raise r.error(ln, f"weight row of label {lab} where NUMBER_OF_WEIGHTS expects label {labels[cls]}")
            deg = r.float_(toks[1], ln, "the degradation")
            v = r.features(toks[2:], ln, dim) * deg
            W[k, :dim] = v
            wc[k] = cls
            k += 1
    order = np.argsort(labels, kind="stable")
    code = np.empty(len(labels), dtype=np.int64)
    code[order] = np.arange(len(labels))
    wc = code[wc]
    classes = np.array(labels, dtype=np.int64)[order]
    if algo == 0:
        if any(c != 1 for c in counts):
            raise r.error(line, "a Pegasos model (ALGORITHM 0) has one weight per class")
        est = PegasosClassifier(bias=bias)
    else:
        per = np.bincount(wc, minlength=len(labels))
        if algo == 2 and per.min() == 0:
            raise r.error(line, "an online AMM model needs at least one weight per class")
        cap = max(1, int(per.max()))
        if algo == 2:
            # Online AMM scores a class below its budget at least 0 (its reserved zero
            # weight); pad each class with copies of its own weights up to a common count,
            # which changes no score and leaves no class below the budget.
            extra_w, extra_c = [], []
            for c in range(len(labels)):
                mine = np.flatnonzero(wc == c)
                for j in range(cap - len(mine)):
                    extra_w.append(W[mine[j % len(mine)]])
                    extra_c.append(c)
            if extra_w:
                W = np.vstack([W, np.array(extra_w)])
                wc = np.concatenate([wc, np.array(extra_c, dtype=np.int64)])
        est = AMMClassifier(bias=bias, online=algo == 2, max_weights_per_class=cap)
    o = np.argsort(wc, kind="stable")
    W, wc = W[o], wc[o]
    est.weights_, est.weight_class_ = W, wc
    est.n_weights_, est.t_, est.clone_probability_ = len(wc), 0, 0.0
    if algo == 0:
        est.coef_, est.intercept_ = W[:, :-1], W[:, -1] * bias
    est.classes_ = classes
    est.n_features_in_ = d
    est.n_iter_ = 0
    return est


def _load_kernel(r, h):
    from vastml.svm._bsgd import BSGDClassifier
    from vastml.svm._llsvm import LLSVMClassifier

    algo, dim, labels, bias = _common_header(r, h)
    n = r.int_(*h["NUMBER_OF_WEIGHTS"], "NUMBER_OF_WEIGHTS", 1 if algo == 3 else 0, 2**31 - 1)
    kcode = r.int_(*h["KERNEL_FUNCTION"], "KERNEL_FUNCTION", 0, 5)
    if kcode == 5:
        raise r.error(h["KERNEL_FUNCTION"][1], "a user-defined kernel (5) cannot be read: its code is not in the file")
    g = r.float_(*h["KERNEL_GAMMA_PARAM"], "KERNEL_GAMMA_PARAM")
    deg = r.float_(*h["KERNEL_DEGREE_PARAM"], "KERNEL_DEGREE_PARAM")
    coef = r.float_(*h["KERNEL_COEF_PARAM"], "KERNEL_COEF_PARAM")
    d = dim - (bias != 0.0)
    if d < 1:
        raise r.error(h["DIMENSION"][1], "DIMENSION leaves no feature besides the bias")
    if algo == 3 and len(labels) != 2:
        raise r.error(h["NUMBER_OF_CLASSES"][1], "an LLSVM model is binary")
    line = h["NUMBER_OF_WEIGHTS"][1]
    _check_cells(r, line, n, dim + (n if algo == 3 else 0))
    rows = r.body(len(_KERNEL_KEYS) + 1, n)
    c = len(labels)
    Z = np.zeros((n, dim))
    coefs = np.zeros((n, c)) if algo == 4 else np.zeros(n)
    Wm = np.zeros((n, n)) if algo == 3 else None
    for i, (toks, ln) in enumerate(rows):
        if algo == 4:
            feats = []
            for tok in toks:
                if tok.startswith("-"):
                    j, sep, x = tok[1:].partition(":")
                    if not sep:
                        raise r.error(ln, f"expected '-class:alpha', got {tok!r}")
                    k = r.int_(j, ln, "an alpha's class index", 1, c)
                    coefs[i, k - 1] = r.float_(x, ln, f"the alpha of class {k}")
                else:
                    feats.append(tok)
            Z[i] = r.features(feats, ln, dim)
        else:
            if len(toks) < 1 + n:
                raise r.error(ln, f"an LLSVM row needs 'w' and {n} entries of W before the landmark")
            coefs[i] = r.float_(toks[0], ln, "the hyperplane weight")
            Wm[i] = [r.float_(t, ln, "an entry of W") for t in toks[1 : 1 + n]]
            Z[i] = r.features(toks[1 + n :], ln, dim)
    kline = h["KERNEL_FUNCTION"][1]
    kern = {0: "rbf", 1: "exponential", 2: "poly", 3: "linear", 4: "sigmoid"}[kcode]
    gamma, degree, coef0 = None, 2, float(coef)
    scale = np.ones(n)
    if bias != 0.0:
        last = Z[:, -1]
        const = np.all(np.abs(last - bias) <= 1e-6 * max(1.0, abs(bias)))
        if kern == "rbf":
            scale = np.exp(-0.5 * g * (last - bias) ** 2)
        elif not const:
            raise r.error(kline, f"BIAS_TERM {bias:g} with a {kern} kernel needs every row's bias "
                          "feature (the last) equal to it")
        Z = Z[:, :-1]
    b2 = bias * bias
    if kern in ("rbf", "exponential"):
        if g <= 0:
            raise r.error(h["KERNEL_GAMMA_PARAM"][1], f"KERNEL_GAMMA_PARAM must be > 0 for a {kern} kernel")
        gamma = g / 2.0
    elif kern == "poly":
        if not float(deg).is_integer() or deg < 1:
            raise r.error(h["KERNEL_DEGREE_PARAM"][1], f"a polynomial degree of {deg:g} cannot be represented (a whole number >= 1 is)")
        degree, coef0 = int(deg), coef + b2
    elif kern == "linear":
        if bias != 0.0:
            kern, degree, coef0 = "poly", 1, b2
    else:  # sigmoid: tanh(coef + slope x'.z')
        if deg <= 0:
            raise r.error(h["KERNEL_DEGREE_PARAM"][1], "the sigmoid slope (KERNEL_DEGREE_PARAM) must be > 0")
        gamma, coef0 = deg, coef + deg * b2
    order = np.argsort(labels, kind="stable")
    classes = np.array(labels, dtype=np.int64)[order]
    if algo == 4:
        est = BSGDClassifier(kernel=kern, gamma=gamma, degree=degree, coef0=coef0, budget=max(1, n),
                             maintenance="merge" if kern == "rbf" else "remove")
        est.support_vectors_ = np.ascontiguousarray(Z)
        est.dual_coef_ = np.ascontiguousarray(coefs[:, order] * scale[:, None])
        est.n_weights_, est.t_ = n, 0
    else:
        est = LLSVMClassifier(kernel=kern, gamma=gamma, degree=degree, coef0=coef0, n_landmarks=n)
        sign = 1.0 if labels[1] > labels[0] else -1.0  # positive score means LABELS[1]
        est.landmarks_ = np.ascontiguousarray(Z)
        est.map_matrix_ = np.ascontiguousarray((scale[:, None] * Wm).T)
        est.coef_ = sign * coefs[None, :]
        est.n_weights_ = n
    est.classes_ = classes
    est.n_features_in_ = Z.shape[1]
    est.n_iter_ = 0
    return est
