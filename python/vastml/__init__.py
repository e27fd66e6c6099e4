"""vastml: seeing and learning from data too large for the usual tools.

The compiled core lives in :mod:`vastml._core`; the public API is in seven sub-packages, each
loaded on first use:

- :mod:`vastml.reorder` -- matrix reordering for heatmaps (:class:`~vastml.reorder.ConvoMap`,
  :func:`~vastml.reorder.branch_and_bound_order`, :class:`~vastml.reorder.TSPMeans`,
  :class:`~vastml.reorder.EMOrdering`, :func:`~vastml.reorder.seriate`, compression, plots).
- :mod:`vastml.kernels` -- the epsilon-exact fast Gauss transform
  (:func:`~vastml.kernels.gauss_transform`) and what is built on it: kernel density estimation,
  bandwidth selection, Gaussian process regression, ranking, projection pursuit.
- :mod:`vastml.svm` -- non-linear classifiers on a fixed memory budget (Pegasos, AMM, BSGD,
  LLSVM, AROW) that read and write BudgetedSVM model files.
- :mod:`vastml.embed` -- 2-D embeddings of large data sets: entropic affinities, t-SNE / SNE /
  elastic embedding with the spectral direction, Locally Linear Landmarks, Parametric Embedding.
- :mod:`vastml.matching` -- matching objects across domains (convex kernelized sorting).
- :mod:`vastml.distributed` -- the same on Dask when one machine is not enough.
- :mod:`vastml.datasets` -- generators of the synthetic data used in tests, benches and demos.

The ``vastml`` command (:mod:`vastml.cli`) runs a demonstration and the main tools on files.

Errors: bad parameters and inputs raise :class:`ValueError` (or :class:`TypeError`) naming the
parameter; everything else raises :class:`VastmlError`.
"""

from vastml._core import VastmlError, __version__, effective_n_jobs
from vastml._lazy import attach

__all__ = ["VastmlError", "__version__", "effective_n_jobs"]

# The sub-packages load on first use (`vastml.kernels` after `import vastml` works), so that
# `import vastml` costs only the compiled core.
__getattr__, __dir__ = attach(
    __name__,
    None,
    submodules=("datasets", "distributed", "embed", "kernels", "matching", "reorder", "svm"),
)
