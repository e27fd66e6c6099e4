"""vastml beyond one machine, on Dask (``pip install 'vastml[distributed]'``).

- :class:`AROWMapReduce` -- AROW on every partition, models combined by :func:`arow_mr_reduce`
  (Djuric's thesis, Algorithm 7); :func:`solve_riccati` is its closed-form covariance step.
- :class:`DistributedLogisticRegression` -- the thesis's baseline: per-pass parameter averaging,
  or AllReduce-style summed gradients with L-BFGS.
- :func:`sharded_gauss_transform`, :class:`ShardedKernelDensity` -- targets split across
  workers, sources scattered once; the epsilon contract of :func:`vastml.kernels.gauss_transform`.

Everything runs on the active ``distributed.Client`` (a ``LocalCluster`` or a real cluster by
scheduler address) or on the ``client=`` passed in; without one, on Dask's local scheduler.
The reducer (:func:`arow_mr_reduce`) needs only NumPy.
"""

from typing import TYPE_CHECKING

from vastml._lazy import attach

# Public names, imported on first use (see vastml._lazy): `import vastml.distributed` stays cheap.
if TYPE_CHECKING:
    from vastml.distributed._arow_mr import AROWMapReduce
    from vastml.distributed._gauss import ShardedKernelDensity, sharded_gauss_transform
    from vastml.distributed._logistic import DistributedLogisticRegression
    from vastml.distributed._reduce import arow_mr_reduce, solve_riccati

__all__ = [
    "AROWMapReduce",
    "DistributedLogisticRegression",
    "ShardedKernelDensity",
    "arow_mr_reduce",
    "sharded_gauss_transform",
    "solve_riccati",
]

__getattr__, __dir__ = attach(__name__, __file__)
