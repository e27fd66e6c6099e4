"""vastml: seeing and learning from data too large for the usual tools.

The compiled core lives in :mod:`vastml._core`; the public API is in the sub-packages:

- :mod:`vastml.kernels` -- the epsilon-exact fast Gauss transform (:func:`~vastml.kernels.gauss_transform`,
  :class:`~vastml.kernels.GaussTransform`).
- :mod:`vastml.reorder` -- matrix reordering for heatmaps (:class:`~vastml.reorder.ConvoMap`,
  :func:`~vastml.reorder.branch_and_bound_order`, baselines, compression, plots).
- :mod:`vastml.datasets` -- generators of the synthetic data used in tests, benches and demos.

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
