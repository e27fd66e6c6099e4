"""Budgeted non-linear classifiers with a fixed memory budget (Djuric's thesis, ch. 4-6).

- :class:`PegasosClassifier` -- multi-class linear SVM by Pegasos SGD.
- :class:`AMMClassifier` -- adaptive multi-hyperplane machine: batch, online, pruning, GAMM.
- :class:`BSGDClassifier` -- kernel SVM with a budget of support vectors (merging / removal).
- :class:`LLSVMClassifier` -- Nystrom landmarks + a linear SVM (dual coordinate descent).
- :class:`AROWClassifier` -- adaptive regularisation of weights, full or diagonal covariance.

Models can be written and read in BudgetedSVM's text format (:func:`save_budgetedsvm`,
:func:`load_budgetedsvm`; a bad file raises :class:`ModelFileError`, a ValueError naming the
file and the line). All accept dense arrays or scipy.sparse CSR (never densified), arbitrary labels, and follow
scikit-learn's conventions.
"""

from typing import TYPE_CHECKING

from vastml._lazy import attach

# Public names, imported on first use (see vastml._lazy): `import vastml.svm` stays cheap.
if TYPE_CHECKING:
    from vastml.svm._amm import AMMClassifier, PegasosClassifier
    from vastml.svm._arow import AROWClassifier
    from vastml.svm._bsgd import BSGDClassifier
    from vastml.svm._llsvm import LLSVMClassifier
    from vastml.svm._model_file import ModelFileError, load_budgetedsvm, save_budgetedsvm

__all__ = [
    "AMMClassifier",
    "AROWClassifier",
    "BSGDClassifier",
    "LLSVMClassifier",
    "ModelFileError",
    "PegasosClassifier",
    "load_budgetedsvm",
    "save_budgetedsvm",
]

__getattr__, __dir__ = attach(__name__, __file__)
