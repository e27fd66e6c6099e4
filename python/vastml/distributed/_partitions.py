"""Turning a Dask collection (or a local array) into row partitions of (X, y) for mappers."""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np
import scipy.sparse as sp


def _dask() -> tuple[Any, Any]:
    try:
        import dask
        import dask.array as da
    except ImportError as e:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "vastml.distributed needs Dask: pip install 'vastml[distributed]'"
        ) from e
    return dask, da


def is_dask_array(x: object) -> bool:
    _, da = _dask()
    return isinstance(x, da.Array)


def _is_dask_bag(x: object) -> bool:
    try:
        import dask.bag as db
    except ImportError:
        return False
    return isinstance(x, db.Bag)


def _is_dask_dataframe(x: object) -> bool:
    return (
        hasattr(x, "npartitions")
        and hasattr(x, "to_delayed")
        and hasattr(x, "dask")
        and not is_dask_array(x)
        and not _is_dask_bag(x)
    )


def is_local(X: object) -> bool:
    """Whether ``X`` is local data (array-like or scipy.sparse), not a Dask collection."""
    return not (is_dask_array(X) or _is_dask_bag(X) or _is_dask_dataframe(X))


def validate_local(est: Any, X: Any, y: Any) -> tuple[Any, Any]:
    """scikit-learn's checks of local training data for a classifier (sets ``n_features_in_``):
    2-D finite float64 ``X`` (CSR kept sparse), 1-D class labels ``y``."""
    from sklearn.utils.multiclass import check_classification_targets
    from sklearn.utils.validation import validate_data

    if y is None:
        raise ValueError(
            f"{type(est).__name__} requires y to be passed, but the target y is None"
        )
    X, y = validate_data(est, X, y, accept_sparse="csr", dtype=np.float64, order="C")
    check_classification_targets(y)
    return X, y


def check_n_partitions(n: object) -> int | None:
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"`n_partitions` must be a positive int or None, got {n!r}")
    return int(n)


def as_block(X: Any, y: Any) -> tuple[Any, np.ndarray | None]:
    """One partition as a (2-D float64 array or CSR matrix, 1-D labels) pair.

    A Dask bag partition is a list of (X, y) pairs, stacked here; a pandas partition becomes
    a NumPy array.
    """
    if y is None and isinstance(X, (list, tuple)):
        if len(X) == 0:
            return None, None
        xs, ys = zip(*X)
        if any(sp.issparse(b) for b in xs):
            X = sp.vstack([sp.csr_matrix(b) for b in xs], format="csr")
        else:
            X = np.vstack([np.atleast_2d(np.asarray(b, dtype=np.float64)) for b in xs])
        y = np.concatenate([np.ravel(np.asarray(b)) for b in ys])
    if hasattr(X, "to_numpy"):
        X = X.to_numpy()
    if hasattr(y, "to_numpy"):
        y = y.to_numpy()
    # Arrays received from other processes can be read-only views of unaligned network
    # buffers, which the Rust core refuses: own an aligned, writeable copy in that case.
    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=np.float64)
        X.data, X.indices, X.indptr = (
            np.require(a, requirements=["C", "A", "W"]) for a in (X.data, X.indices, X.indptr)
        )
    else:
        X = np.require(X, dtype=np.float64, requirements=["C", "A", "W"])
        if X.ndim == 1:
            X = X[:, None]
    y = np.ravel(np.asarray(y))
    if X.shape[0] != y.shape[0]:
        raise ValueError(f"a partition has {X.shape[0]} rows in X but {y.shape[0]} labels")
    values = X.data if sp.issparse(X) else X
    if not np.isfinite(values).all():
        raise ValueError("`X` contains NaN or infinite values")
    return X, y


def _split_local(X: Any, y: np.ndarray, n_partitions: int) -> list[tuple[Any, np.ndarray]]:
    n = X.shape[0]
    bounds = np.linspace(0, n, n_partitions + 1).round().astype(int)
    return [(X[a:b], y[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]


def row_partitions(
    X: Any, y: Any, n_partitions: int | None = None, client: Any = None
) -> list[tuple[Any, Any]]:
    """The (X, y) partitions of a data set, as pairs of Dask delayed objects / futures.

    Accepted: Dask arrays (rows chunked; columns are merged into one chunk), Dask dataframes
    with a Dask series of labels, a Dask bag whose elements are (X block, y block) pairs
    (``y=None``; blocks may be scipy.sparse CSR), or local NumPy / scipy.sparse arrays split
    into ``n_partitions`` contiguous shards (scattered to the cluster when ``client`` is
    given). ``n_partitions`` re-partitions Dask arrays and dataframes too.
    """
    dask, da = _dask()
    n_partitions = check_n_partitions(n_partitions)
    if _is_dask_bag(X):
        if y is not None:
            raise ValueError("with a Dask bag of (X, y) blocks `y` must be None")
        if n_partitions is not None:
            X = X.repartition(npartitions=n_partitions)
        return [(p, None) for p in X.to_delayed()]
    if y is None:
        raise ValueError("`y` is required (except for a Dask bag of (X, y) blocks)")
    if is_dask_array(X):
        if X.ndim != 2:
            raise ValueError(f"`X` must be 2-D, got {X.ndim}-D")
        if n_partitions is not None:
            X = X.rechunk({0: -(-X.shape[0] // n_partitions), 1: -1})
        else:
            X = X.rechunk({1: -1})
        y = da.asarray(y) if not is_dask_array(y) else y
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"`X` has {X.shape[0]} rows but `y` has {y.shape[0]} labels")
        y = y.rechunk((X.chunks[0],))
        return list(zip(X.to_delayed().ravel(), y.to_delayed().ravel()))
    if _is_dask_dataframe(X):
        if n_partitions is not None:
            X = X.repartition(npartitions=n_partitions)
            y = y.repartition(npartitions=n_partitions)
        xs, ys = X.to_delayed(), y.to_delayed()
        if len(xs) != len(ys):
            raise ValueError("`X` and `y` must have the same partitions")
        return list(zip(xs, ys))
    # Local data: split here, ship once.
    if not sp.issparse(X):
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"`X` must be 2-D, got {X.ndim}-D")
    else:
        X = sp.csr_matrix(X)
    y = np.ravel(np.asarray(y))
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"`X` has {X.shape[0]} rows but `y` has {y.shape[0]} labels")
    parts = _split_local(X, y, n_partitions or 1)
    if client is not None:
        # hash=False: a later fit on the same data must not share (and race to release) keys
        return [tuple(client.scatter(list(p), hash=False)) for p in parts]
    return [(dask.delayed(a), dask.delayed(b)) for a, b in parts]


def compute(tasks: Iterable[Any], client: Any = None) -> list[Any]:
    """Run Dask tasks: on ``client`` when given, else on Dask's current default scheduler."""
    dask, _ = _dask()
    if client is not None:
        return client.gather(client.compute(list(tasks)))
    return list(dask.compute(*tasks))


class _Stop(Exception):
    """Raised from a local scheduler callback to end a computation that was asked to stop."""


def _compute_reporting_local(tasks: list[Any], out: list[Any], on_result: Any) -> list[Any]:
    """``compute_reporting`` on Dask's local schedulers: a scheduler callback hands over each
    task's result as soon as it is computed, in the calling thread (where the local
    schedulers run their callbacks)."""
    dask, _ = _dask()
    from dask.callbacks import Callback

    index = {t.key: i for i, t in enumerate(tasks)}

    def posttask(key: Any, result: Any, *_: Any) -> None:
        i = index.get(key)
        if i is not None:
            out[i] = result
            if on_result(i, result):  # a callback's error propagates as itself
                raise _Stop

    try:
        with Callback(posttask=posttask):
            dask.compute(*tasks)
    except _Stop:
        pass
    return out


def compute_reporting(tasks: list[Any], client: Any, on_result: Any) -> list[Any]:
    """Run Dask tasks, calling ``on_result(index, result)`` for each as it arrives; when it
    returns True the tasks still running are cancelled. Returns the results, None for the
    cancelled ones.

    Results arrive as they are computed: with a ``distributed`` client (``client``, else the
    active one) as the workers finish them, with Dask's local schedulers as each task ends
    (a scheduler callback sees every finished key; stopping ends the computation there).
    """
    from vastml.distributed._gauss import active_client

    out: list[Any] = [None] * len(tasks)
    client = active_client(client)
    if client is None:
        return _compute_reporting_local(tasks, out, on_result)
    from distributed import as_completed

    futures = client.compute(list(tasks))
    index = {f.key: i for i, f in enumerate(futures)}
    pending = as_completed(futures, with_results=True)
    for fut, r in pending:
        out[index[fut.key]] = r
        if on_result(index[fut.key], r):
            client.cancel([f for f in futures if not f.done()])
            break
    return out
