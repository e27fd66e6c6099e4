"""Embedding objectives E = E+ + lambda E- (thesis chapter 3) over the Rust kernels."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

if TYPE_CHECKING:
    from vastml._typing import ArrayLike, FloatArray

from vastml import _core
from vastml._validation import as_points, check_float, check_int, choice, n_jobs_arg
from vastml.embed._affinities import is_compact
from vastml.embed._schedules import fgt_order_epsilon, parse_gradient, schedule_value

MODELS = ("ee", "sne", "ssne", "tsne")
GRADIENTS = ("exact", "barnes_hut", "fgt", "fft")


def as_attraction(W: Any, n: int, name: str = "W") -> sp.csr_array:
    """A square, symmetric-pattern, non-negative CSR matrix with sorted indices (a compact
    int32 / float32 matrix, see ``entropic_affinities(compact=True)``, is kept as it is)."""
    if is_compact(W):
        if W.shape != (n, n):
            raise ValueError(f"`{name}` must have shape ({n}, {n}), got {W.shape}")
        if not W.has_canonical_format:
            W = W.copy()
            W.sum_duplicates()
        # In blocks: no float64 temporary of a large P.
        for s in range(0, W.nnz, 1 << 22):
            d = W.data[s : s + (1 << 22)]
            if not np.isfinite(d).all():
                raise ValueError(f"`{name}` contains NaN or infinite values")
            if (d < 0).any():
                raise ValueError(f"`{name}` must be non-negative")
        return W
    try:
        W = sp.csr_array(W, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"`{name}` must be a sparse or dense matrix of numbers: {exc}") from None
    if W.shape != (n, n):
        raise ValueError(f"`{name}` must have shape ({n}, {n}), got {W.shape}")
    W.sum_duplicates()
    if not np.isfinite(W.data).all():
        raise ValueError(f"`{name}` contains NaN or infinite values")
    if (W.data < 0).any():
        raise ValueError(f"`{name}` must be non-negative")
    return W


def neg_entropy(p: np.ndarray) -> float:
    """sum p log p over the positive entries, in float64 blocks (no full-size temporaries
    of a large P; float32 values of a compact P are summed in float64)."""
    total = 0.0
    for s in range(0, p.size, 1 << 22):
        b = p[s : s + (1 << 22)].astype(np.float64)
        b = b[b > 0]
        total += float(np.dot(b, np.log(b)))
    return total


class EmbeddingObjective:
    r"""E(X) = E+(X) + lambda E-(X) and its gradient for EE, SNE, symmetric SNE or t-SNE.

    ``repulsion_weight`` is the thesis's :math:`\lambda` (1 for SNE, symmetric SNE and t-SNE;
    EE's weight of the repulsion); the attribute of the same name may be changed between calls
    (as :func:`homotopy` does).

    ``W`` is the attraction: the symmetric weights :math:`W^+` for EE, the joint
    :math:`P` (summing to 1) for symmetric SNE and t-SNE, and :math:`(P + P^T)/2` of the
    conditional :math:`P` for SNE. ``gradient="fft"`` (t-SNE, 1-D/2-D): ``n_interp``
    nodes per box of width ``box_width`` embedding units (FIt-SNE: 3 and 1; at least 50
    boxes per dimension). Sums run over ordered pairs (the gradient is
    :math:`4 L X`). The repulsion is computed exactly (``"exact"``, O(N^2)), by
    Barnes-Hut (``theta``) or by the fast Gauss transform (``epsilon``; Gaussian kernels).
    ``gradient=("barnes_hut", theta_schedule)`` (or ``"bh"``) and ``("fgt", p_schedule)``
    change the accuracy with the iteration (thesis §5.5): the schedule is ``"thesis"``
    (:func:`accuracy_schedule`: theta 2 -> 0.1, p 1 -> 10 over 100 iterations), a sequence
    (the last value holds) or a callable; it is indexed by ``iteration`` (set by
    :func:`minimize`) or, when that is None, by the number of evaluations; FGT orders p
    become ``epsilon`` by :func:`fgt_order_epsilon`.

    Calling the objective returns ``(E, G)`` and counts the evaluation in ``n_evaluations``.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> W = sp.csr_array(np.array([[0, .5, 0], [.5, 0, .5], [0, .5, 0]]) / 2)
    >>> f = EmbeddingObjective("tsne", W)
    >>> E, G = f(np.array([[0.0, 0], [1, 0], [0, 1]]))
    >>> bool(abs(G.sum()) < 1e-12)
    True
    """

    def __init__(
        self,
        model: str,
        W: ArrayLike,
        *,
        repulsion_weight: float = 1.0,
        gradient: str | tuple[str, Any] = "exact",
        theta: float = 0.5,
        epsilon: float = 1e-6,
        n_interp: int = 3,
        box_width: float = 1.0,
        n_jobs: int | None = None,
    ) -> None:
        self.model = choice(model, "model", MODELS)
        gradient, self.schedule = parse_gradient(gradient, GRADIENTS)
        self.gradient = gradient
        #: iteration of the optimiser (set by :func:`minimize`); indexes ``schedule``
        self.iteration = None
        if gradient == "fgt" and model == "tsne":
            raise ValueError(
                "gradient='fgt' needs a Gaussian kernel (ee, sne, ssne); use 'barnes_hut' for t-SNE"
            )
        self.W = as_attraction(W, np.shape(W)[0])
        if is_compact(self.W):  # 32-bit arrays go to Rust as they are (no 64-bit copy)
            self._indptr = np.ascontiguousarray(self.W.indptr)
            self._indices = np.ascontiguousarray(self.W.indices)
            self._data = np.ascontiguousarray(self.W.data)
        else:
            self._indptr = self.W.indptr.astype(np.int64)
            self._indices = self.W.indices.astype(np.int64)
            self._data = np.ascontiguousarray(self.W.data, dtype=np.float64)
        self.repulsion_weight = float(repulsion_weight)
        self.theta = check_float(theta, "theta", low=0)
        self.epsilon = check_float(epsilon, "epsilon", low=0, high=1, low_open=True, high_open=True)
        if not (isinstance(n_interp, (int, np.integer)) and n_interp >= 1):
            raise ValueError(f"`n_interp` must be an int >= 1, got {n_interp!r}")
        self.n_interp = int(n_interp)
        if not (isinstance(box_width, (int, float, np.number)) and 0 < box_width < np.inf):
            raise ValueError(f"`box_width` must be a positive number, got {box_width!r}")
        self.box_width = float(box_width)
        self.n_jobs = n_jobs_arg(n_jobs)
        self.n_evaluations = 0
        self.attraction_scale = 1.0

    @property
    def n_samples(self) -> int:
        return self.W.shape[0]

    def parts(
        self, X: ArrayLike, need_objective: bool = True
    ) -> tuple[float, float, float, FloatArray]:
        """(E, E+, E-, G) at X (E+ includes ``attraction_scale``). With ``need_objective``
        False, t-SNE skips the logarithms of E+ and returns E = E+ = NaN."""
        X = np.ascontiguousarray(X, dtype=np.float64)
        if self.schedule is not None:
            self._apply_schedule(X.shape[1])
        self.n_evaluations += 1
        data = self._data if self.attraction_scale == 1.0 else self._data * self.attraction_scale
        return _core.embedding_objective(
            X,
            self._indptr,
            self._indices,
            data,
            self._options(self.repulsion_weight, need_objective),
            self.n_jobs,
        )

    def _options(self, repulsion_weight, need_objective):
        """The options dict of ``vastml._core.embedding_objective``."""
        return {
            "model": self.model,
            "repulsion_weight": float(repulsion_weight),
            "need_objective": bool(need_objective),
            "method": self.gradient,
            "theta": float(self.theta),
            "epsilon": float(self.epsilon),
            "n_interp": int(self.n_interp),
            "box_width": float(self.box_width),
        }

    def _apply_schedule(self, dim):
        it = self.n_evaluations if self.iteration is None else self.iteration
        v = schedule_value(self.schedule, it)
        if self.gradient == "barnes_hut":
            self.theta = v
        else:
            self.epsilon = fgt_order_epsilon(max(1, round(v)), dim)

    def grad(self, X: ArrayLike) -> FloatArray:
        """The gradient alone (E is not computed where that saves work)."""
        return self.parts(X, need_objective=False)[3]

    def __call__(self, X: ArrayLike) -> tuple[float, FloatArray]:
        E, _, _, G = self.parts(X)
        return E, G

    def kl_divergence(self, X: ArrayLike) -> float:
        """KL(P||Q) for symmetric SNE / t-SNE at lambda = 1 (E + sum p log p)."""
        if self.model not in ("ssne", "tsne"):
            raise ValueError("kl_divergence is defined for the normalised models ssne and tsne")
        E, Ep, Em, _ = _core.embedding_objective(
            np.ascontiguousarray(X, dtype=np.float64),
            self._indptr,
            self._indices,
            self._data,
            self._options(1.0, True),
            self.n_jobs,
        )
        return float(E) + neg_entropy(self._data)


def embedding_objective(
    model: str,
    X: ArrayLike,
    W: ArrayLike,
    *,
    repulsion_weight: float = 1.0,
    gradient: str = "exact",
    theta: float = 0.5,
    epsilon: float = 1e-6,
    n_interp: int = 3,
    n_jobs: int | None = None,
) -> tuple[float, FloatArray]:
    """E and its gradient at ``X`` (see :class:`EmbeddingObjective`); returns ``(E, G)``.

    Examples
    --------
    >>> import numpy as np
    >>> W = np.array([[0, 1.0], [1.0, 0]])
    >>> E, G = embedding_objective("ee", np.array([[0.0], [1.0]]), W, repulsion_weight=0.0)
    >>> float(E), G.ravel().tolist()
    (2.0, [-4.0, 4.0])
    """
    X = as_points(X, "X")
    W = as_attraction(W, X.shape[0])
    return EmbeddingObjective(
        model,
        W,
        repulsion_weight=repulsion_weight,
        gradient=gradient,
        theta=theta,
        epsilon=epsilon,
        n_interp=n_interp,
        n_jobs=n_jobs,
    )(X)


#: The most interpolation points per grid interval :func:`kernel_sums` accepts.
MAX_N_INTERP = 20


def kernel_sums(
    X: ArrayLike,
    *,
    kernel: str = "gaussian",
    method: str = "exact",
    theta: float = 0.5,
    epsilon: float = 1e-6,
    n_interp: int = 3,
    weights: ArrayLike | None = None,
    n_jobs: int | None = None,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    r"""N-body sums over all other points: :math:`S(x_n) = \sum_{m \ne n} v_m K`,
    :math:`\sum v_m K^q` and :math:`\sum v_m K^q x_m` (q = 1 Gaussian, 2 Student-t).

    Examples
    --------
    >>> import numpy as np
    >>> s0, s1, sx = kernel_sums(np.array([[0.0], [1.0]]))
    >>> bool(np.allclose(s0, np.exp(-1)))
    True
    """
    X = as_points(X, "X")
    choice(kernel, "kernel", ("gaussian", "student"))
    choice(method, "method", GRADIENTS)
    theta = check_float(theta, "theta", low=0)
    epsilon = check_float(epsilon, "epsilon", low=0, high=1, low_open=True, high_open=True)
    # points per grid interval of the "fft" method: FIt-SNE uses 3, and beyond ~10 the
    # interpolation error is below double rounding while the grid (and its FFT) grows as n^d
    n_interp = check_int(n_interp, "n_interp", low=1, high=MAX_N_INTERP)
    w = None if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
    options = {"kernel": kernel, "method": method, "theta": theta, "epsilon": epsilon,
               "n_interp": n_interp, "box_width": 1.0}
    return _core.kernel_sums(X, options, w, n_jobs_arg(n_jobs))
