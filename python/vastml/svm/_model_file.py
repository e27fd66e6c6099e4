"""Reading and writing models in the BudgetedSVM text format.

The layout follows BudgetedSVM's README: header rows ALGORITHM, DIMENSION, NUMBER_OF_CLASSES,
LABELS, NUMBER_OF_WEIGHTS, BIAS_TERM, KERNEL_WIDTH, then MODEL and one row per weight:

- Pegasos / AMM (``ALGORITHM`` 0, 1, 2): ``class degradation idx:value ...`` with 1-based
  feature indices; the bias weight is feature ``DIMENSION + 1``.
- BSGD (4): ``-1:alpha_1 -2:alpha_2 ... idx:value ...`` (alphas with negative class indices,
  then the support vector).
- LLSVM (3, binary): ``w idx:value ...``: the hyperplane coefficient of the landmark
  (``M' w`` in our notation), then the landmark.

Header values are written as ``NAME: value``. ``KERNEL_WIDTH`` is BudgetedSVM's ``g``
(``exp(-g/2 ||x - y||^2)``), i.e. twice our ``gamma``. BudgetedSVM itself cannot be built here,
so files have been checked for round trips through vastml only, not against files it wrote.
"""

from __future__ import annotations

import numpy as np

ALGORITHMS = {"pegasos": 0, "amm_batch": 1, "amm_online": 2, "llsvm": 3, "bsgd": 4}


def _sparse_items(v, offset=1):
    nz = np.flatnonzero(v)
    return " ".join(f"{j + offset}:{v[j]:.17g}" for j in nz)


def save_budgetedsvm(estimator, path):
    """Write a fitted Pegasos / AMM / BSGD / (binary) LLSVM classifier to ``path``.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from vastml.svm import AMMClassifier, save_budgetedsvm, load_budgetedsvm
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 3)); y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    >>> clf = AMMClassifier(alpha=1e-3, random_state=0).fit(X, y)
    >>> path = os.path.join(tempfile.mkdtemp(), "model.txt")
    >>> save_budgetedsvm(clf, path)
    >>> back = load_budgetedsvm(path)
    >>> bool(np.all(back.predict(X) == clf.predict(X)))
    True
    """
    from vastml.svm._amm import AMMClassifier, PegasosClassifier
    from vastml.svm._bsgd import BSGDClassifier, kernel_gamma
    from vastml.svm._llsvm import LLSVMClassifier

    d = int(estimator.n_features_in_)
    labels = estimator.classes_
    rows = []
    if isinstance(estimator, AMMClassifier):
        if isinstance(estimator, PegasosClassifier):
            algo = "pegasos"
        else:
            algo = "amm_online" if estimator.online else "amm_batch"
        order = np.argsort(estimator.weight_class_, kind="stable")
        counts = np.bincount(estimator.weight_class_, minlength=len(labels))
        for j in order:
            w = estimator.weights_[j]
            rows.append(f"{labels[estimator.weight_class_[j]]} 0 {_sparse_items(w)}".rstrip())
        bias, width = float(estimator.bias), 0.0
    elif isinstance(estimator, BSGDClassifier):
        if estimator.kernel != "rbf":
            raise ValueError("only Gaussian-kernel BSGD models can be written in this format")
        algo = "bsgd"
        counts = [estimator.support_vectors_.shape[0]]
        for a, z in zip(estimator.dual_coef_, estimator.support_vectors_):
            alphas = " ".join(f"-{c + 1}:{a[c]:.17g}" for c in range(len(labels)))
            rows.append(f"{alphas} {_sparse_items(z)}".rstrip())
        bias, width = 0.0, 2.0 * kernel_gamma(estimator.gamma, d)
    elif isinstance(estimator, LLSVMClassifier):
        if len(labels) != 2 or estimator.kernel != "rbf":
            raise ValueError("only binary Gaussian-kernel LLSVM models can be written in this format")
        algo = "llsvm"
        # score = w . (M g(x)) = (M' w) . g(x): one coefficient per landmark
        coef = estimator.map_matrix_.T @ estimator.coef_[0]
        counts = [estimator.landmarks_.shape[0]]
        for c, z in zip(coef, estimator.landmarks_):
            rows.append(f"{c:.17g} {_sparse_items(z)}".rstrip())
        bias, width = 0.0, 2.0 * kernel_gamma(estimator.gamma, d)
    else:
        raise TypeError(f"cannot write a {type(estimator).__name__} in the BudgetedSVM format")
    with open(path, "w") as f:
        f.write(f"ALGORITHM: {ALGORITHMS[algo]}\n")
        f.write(f"DIMENSION: {d}\n")
        f.write(f"NUMBER_OF_CLASSES: {len(labels)}\n")
        f.write("LABELS: " + " ".join(str(v) for v in labels) + "\n")
        f.write("NUMBER_OF_WEIGHTS: " + " ".join(str(int(c)) for c in counts) + "\n")
        f.write(f"BIAS_TERM: {bias:.17g}\n")
        f.write(f"KERNEL_WIDTH: {width:.17g}\n")
        f.write("MODEL:\n")
        for r in rows:
            f.write(r + "\n")


def _parse_label(s):
    for conv in (int, float):
        try:
            return conv(s)
        except ValueError:
            pass
    return s


def load_budgetedsvm(path):
    """Read a model written by :func:`save_budgetedsvm` into a fitted vastml classifier."""
    from vastml.svm._amm import AMMClassifier, PegasosClassifier
    from vastml.svm._bsgd import BSGDClassifier
    from vastml.svm._llsvm import LLSVMClassifier

    header = {}
    with open(path) as f:
        lines = f.read().splitlines()
    i = 0
    while i < len(lines) and not lines[i].startswith("MODEL"):
        key, _, value = lines[i].partition(":")
        header[key.strip().upper().replace(" ", "_")] = value.strip()
        i += 1
    if i == len(lines):
        raise ValueError(f"{path}: no MODEL row")
    try:
        algo = int(header["ALGORITHM"])
        d = int(header["DIMENSION"])
        labels = np.array([_parse_label(s) for s in header["LABELS"].split()])
        bias = float(header.get("BIAS_TERM", "0"))
        width = float(header.get("KERNEL_WIDTH", "0"))
    except (KeyError, ValueError) as exc:
        raise ValueError(f"{path}: bad or missing header field: {exc}") from None
    body = [ln.split() for ln in lines[i + 1 :] if ln.strip()]
    order = np.argsort(labels, kind="stable")
    classes = labels[order]
    code_of = {lab: int(np.searchsorted(classes, lab)) for lab in labels}

    def dense(items, n):
        v = np.zeros(n)
        for it in items:
            j, _, x = it.partition(":")
            j = int(j)
            if not 1 <= j <= n:
                raise ValueError(f"{path}: feature index {j} outside 1..{n}")
            v[j - 1] = float(x)
        return v

    if algo in (0, 1, 2):
        est = PegasosClassifier(bias=bias) if algo == 0 else AMMClassifier(bias=bias, online=algo == 2)
        W = np.array([dense(r[2:], d + 1) for r in body])
        wc = np.array([code_of[_parse_label(r[0])] for r in body], dtype=np.int64)
        est.weights_, est.weight_class_ = W, wc
        est.n_weights_, est.t_, est.clone_probability_ = len(wc), 0, 0.0
        if algo == 0:
            o = np.argsort(wc, kind="stable")
            est.coef_, est.intercept_ = W[o, :-1], W[o, -1] * bias
        else:
            est.max_weights_per_class = max(est.max_weights_per_class, int(np.bincount(wc).max()))
    elif algo == 4:
        c = len(labels)
        alphas, svs = [], []
        for r in body:
            a = np.zeros(c)
            feats = []
            for it in r:
                j, _, x = it.partition(":")
                if int(j) < 0:
                    a[code_of[labels[-int(j) - 1]]] = float(x)
                else:
                    feats.append(it)
            alphas.append(a)
            svs.append(dense(feats, d))
        est = BSGDClassifier(gamma=width / 2.0, budget=max(1, len(svs)))
        est.support_vectors_ = np.array(svs).reshape(len(svs), d)
        est.dual_coef_ = np.array(alphas).reshape(len(svs), c)
        est.n_weights_, est.t_ = len(svs), 0
    elif algo == 3:
        coef = np.array([float(r[0]) for r in body])
        est = LLSVMClassifier(gamma=width / 2.0, n_landmarks=len(body))
        est.landmarks_ = np.array([dense(r[1:], d) for r in body]).reshape(len(body), d)
        est.map_matrix_ = np.eye(len(body))
        est.coef_ = coef[None, :]
        est.n_weights_, est.n_iter_ = len(body), 0
    else:
        raise ValueError(f"{path}: unknown ALGORITHM {algo}")
    est.classes_ = classes
    est.n_features_in_ = d
    if not hasattr(est, "n_iter_"):
        est.n_iter_ = 0
    return est
