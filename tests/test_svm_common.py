"""scikit-learn's estimator checks on every vastml.svm classifier."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from vastml.svm import AMMClassifier, AROWClassifier, BSGDClassifier, LLSVMClassifier, PegasosClassifier

ESTIMATORS = [
    PegasosClassifier(l2_penalty=1e-3),
    AMMClassifier(l2_penalty=1e-3, max_weights_per_class=5),
    AMMClassifier(l2_penalty=1e-3, online=True, clone_probability=0.2),
    BSGDClassifier(l2_penalty=1e-3, budget=20, max_iter=2),
    BSGDClassifier(l2_penalty=1e-3, budget=20, maintenance="remove", kernel="poly", max_iter=2),
    LLSVMClassifier(l2_penalty=0.01, n_landmarks=20),
    AROWClassifier(),
    AROWClassifier(covariance="diagonal", max_iter=2),
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible(estimator, check):
    check(estimator)
