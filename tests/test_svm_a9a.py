"""a9a accuracy (the issue's BudgetedSVM commands), when the shared data are present."""

import pytest

from conftest import SHARED_DATA

A9A = SHARED_DATA / "a9a"
pytestmark = pytest.mark.skipif(
    not (A9A / "a9a_train.txt").exists(), reason=f"a9a not found in {A9A} (shared data absent)"
)


@pytest.fixture(scope="module")
def a9a():
    from sklearn.datasets import load_svmlight_file

    Xtr, ytr = load_svmlight_file(str(A9A / "a9a_train.txt"), n_features=123)
    Xte, yte = load_svmlight_file(str(A9A / "a9a_test.txt"), n_features=123)
    return Xtr, ytr, Xte, yte


def _cases():
    from vastml.svm import AMMClassifier, AROWClassifier, BSGDClassifier, LLSVMClassifier, PegasosClassifier

    # (name, estimator, max test error %): BudgetedSVM's published error + 0.3 points
    # (Pegasos: its 16.52%; AROW: the linear-SVM level).
    return [
        ("pegasos", PegasosClassifier(l2_penalty=1e-3, random_state=0), 16.82),
        ("amm-batch", AMMClassifier(l2_penalty=1e-3, max_weights_per_class=20, random_state=0), 15.39),
        ("amm-online", AMMClassifier(l2_penalty=1e-3, max_weights_per_class=20, online=True, random_state=0), 15.49),
        # GAMM -A 1 -C 0.2: BudgetedSVM's 14.86% + 0.3
        ("gamm", AMMClassifier(l2_penalty=1e-3, max_weights_per_class=20, clone_probability=0.2,
                               random_state=0), 15.16),
        ("llsvm", LLSVMClassifier(l2_penalty=0.1, gamma=0.005, n_landmarks=100, random_state=0), 15.53),
        ("arow-diagonal", AROWClassifier(covariance="diagonal", random_state=0), 15.5),
        ("arow-full", AROWClassifier(random_state=0), 15.5),
        # the BSGD target is the thesis level (16%), not BudgetedSVM's 23.62%
        ("bsgd-merge", BSGDClassifier(l2_penalty=1e-4, gamma=0.005, budget=200, random_state=0), 16.0),
    ]


@pytest.mark.parametrize("case", range(8))
def test_a9a_error(a9a, case):
    Xtr, ytr, Xte, yte = a9a
    name, est, limit = _cases()[case]
    est.fit(Xtr, ytr)
    err = 100 * (1 - est.score(Xte, yte))
    assert err <= limit, f"{name}: {err:.2f}% > {limit}%"
    if name.startswith(("amm", "gamm")):
        assert 5 <= est.n_weights_ <= 40  # Table 4.4: 11-16 on a9a; the cap is 2 x 20
    if name.startswith("bsgd"):
        assert est.n_weights_ == 200  # the budget is kept exactly
