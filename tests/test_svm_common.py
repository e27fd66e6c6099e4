"""scikit-learn's estimator checks on every vastml.svm classifier."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from vastml.svm import AMMClassifier, AROWClassifier, BSGDClassifier, LLSVMClassifier, PegasosClassifier

ESTIMATORS = [
    PegasosClassifier(alpha=1e-3),
    AMMClassifier(alpha=1e-3, max_weights_per_class=5),
    AMMClassifier(alpha=1e-3, online=True, clone_probability=0.2),
    BSGDClassifier(alpha=1e-3, budget=20, n_epochs=2),
    BSGDClassifier(alpha=1e-3, budget=20, maintenance="remove", kernel="poly", n_epochs=2),
    LLSVMClassifier(alpha=0.01, n_landmarks=20),
    AROWClassifier(),
    AROWClassifier(covariance="diagonal", n_epochs=2),
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible(estimator, check):
    check(estimator)
