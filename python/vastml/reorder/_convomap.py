"""The ConvoMap estimator: TSP initial order, then local search or the parallel pipeline."""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from vastml import _core
from vastml._progress import Progress, check_callback_every, check_callbacks
from vastml._validation import reject_complex, reject_sparse
from vastml.reorder._objective import (
    ERRORS,
    PADDINGS,
    as_codes,
    check_choice,
    kernel_args,
    objective_args,
)

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Self

    from vastml._progress import Callback
    from vastml._typing import ArrayLike, RandomState

MOVES = ("swap_rectangles", "swap", "adjacent_swap", "reverse", "relocate", "block_swap")
DEFAULT_SCHEDULE = (
    "block_ordering", 3, 2, "block_ordering", 3, 1, "restart", 1, "stop_unless_improved", 3, 1,
)


def _baseline_inits():
    from vastml.reorder import _baselines as b

    return {
        "heatmap": b.heatmap_order,
        "bidirectional": b.bidirectional_order,
        "barycentric": b.barycentric_order,
        "nested": b.nested_order,
    }


_BASELINE_INITS = _baseline_inits()


def _positive_int(v, name, minimum=1):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}, got {v!r}")
    return int(v)


# The keys of the options dict of _core.convomap_fit (vastml_order::options::FitOptions).
_FIT_OPTIONS = (
    "method", "moves", "max_iter", "segment_length", "reaction", "stop_threshold", "accept_ties",
    "axes", "swap_radius", "max_block", "tolerance", "schedule", "n_blocks", "kmax_k",
    "time_budget",
)


class ConvoMap(TransformerMixin, BaseEstimator):
    """Reorder rows and columns of a binary or categorical matrix for a faithful heatmap.

    Minimises the ConvoMap error (see :func:`convolution_error`): the difference between the
    matrix and its blurred copy, so that few 1-0 (colour-colour) transitions remain in each
    kernel-sized neighbourhood and the picture survives shrinking (Bollen & Leurquin 2017).
    The search starts from a TSP order (greedy + 2-opt over Hamming distances, both
    orientations tried), then runs the parallel pipeline P-LS (block ordering, 3-, 2-split
    searches, block ordering, 3-split, full search) or one plain local search.

    Parameters
    ----------
    kernel : str or array, default="gbs"
        See :func:`convolution_error`.
    kernel_size : int or (rows, cols), default=25
        The thesis uses 25 for binary data, 21 for categorical, (29, 5) for tall matrices.
    padding : str, default="zeros_and_ones"
    error : {"abs", "quadratic"}, default="abs"
    moves : "all" or sequence of str, default="all"
        Among "swap_rectangles", "swap", "adjacent_swap", "reverse", "relocate", "block_swap".
    init : {"tsp", "none", "heatmap", "bidirectional", "barycentric", "nested"}, default="tsp"
        Initial order ("none" keeps the input order; the baselines are binary only). The thesis
        (Q7) finds the best initialiser data dependent: HeatMap for Mammals, Bidirectional for
        Mushrooms and the artificial sets, TSP for the UCL sets.
    method : {"pls", "ls"}, default="pls"
        P-LS pipeline or a single local search.
    max_iter : int or None
        Iterations of each local search (MAXIT). None: 5000 per block for "pls", 100000
        for "ls".
    segment_length : int or None
        Segment length L of the adaptive move weights and of the automatic stop. None: 100
        for "pls", 500 for "ls".
    reaction : float, default=0.6
        Reaction factor r of the adaptive weights (0 keeps them equal).
    stop_threshold : float or None, default=-1e-4
        Stop a search after a segment whose mean error change per iteration is above this
        (segment-normalised, as in the thesis). None runs all iterations.
    accept_ties : bool, default=True
        Accept moves that leave the error unchanged.
    axes : {"both", "rows", "columns"}, default="both"
    swap_radius : int, default=10
        A swap partner lies within this distance (the 20 nearest positions).
    max_block : int, default=50
        Longest block moved by relocate and reversed by reverse.
    rectangle_tolerance : (int, int, int, float), default=(2, 1, 4, 0.8)
        Noise tolerance of swap-rectangles: zeros t, extra zeros z per u ones, trim density.
    schedule : sequence, default=("block_ordering", 3, 2, "block_ordering", 3, 1, "restart", 1,
            "stop_unless_improved", 3, 1)
        Steps of P-LS: "block_ordering", "kmax", "restart" (back to the arrangement P-LS
        started from), "stop_unless_improved" (end P-LS unless the step before gave a new
        best), "polish" (the exhaustive polish of ``polish``, blocks of up to 8) or a number
        of splits. The best arrangement seen is returned. The default is
        the thesis's pipeline, then a 1-split search from the start, and only if that beats
        everything before (the block orderings, perturbations, did not pay off: on Mammals
        with GBS(29x5) the column block ordering raises the TSP's error by 7 % and the
        splits never win it back) a 3- and a 1-split search from there without block
        ordering.
        "kmax" cuts the display at the ``kmax_k`` rows of largest error (rows within the kernel height of a
        cut are skipped), puts the blocks in the exactly best order of their junction errors,
        and repeats on rows and columns until the error changes by less than 0.01 (thesis
        §7.1, Table A.14).
    n_blocks : int, default=10
        Blocks of the block ordering.
    kmax_k : int, default=5
        Cuts of a "kmax" step (k = 5 in Table A.14).
    recolor : bool, default=False
        Categorical data whose columns are different attributes ("notCommonAttributes", e.g.
        Mushrooms): the colours of each column may be relabelled. Then the TSP orders the
        columns by a recolouring-invariant distance (eq. 5.10), Algorithm 5 aligns the
        colours of neighbouring columns, the search gets the "recolor" move (a cell takes
        its neighbour's colour by swapping two colours over its whole column), and on the
        column axis swap-rectangles may join rectangles of two colours by recolouring the
        narrower one. The default keeps every colour as given ("commonAttributes", e.g.
        similarity matrices). Needs a categorical matrix.
    verbose : bool or int, default=False
        Show a progress bar with the error, updated after the TSP and after every P-LS step
        (every segment of ``segment_length`` iterations with ``method="ls"``).
    callbacks : callable, list of callables or None, default=None
        Each is called as ``callback(iteration, objective, state)`` at those points, every
        ``callback_every``-th time: ``iteration`` counts the reports from 1, ``objective`` is the
        current error, and ``state`` is a dict with the current solution, ``"row_order"`` and
        ``"col_order"`` (arrays of int), and ``"stage"`` and ``"step"`` naming the stage that just
        ended (``"tsp"``, a P-LS step, ``"ils_<round>"``, or ``"iteration"`` with its iteration
        count for ``method="ls"``). Returning True stops the fit cleanly: the orders
        of that moment are kept and ``stopped_early_`` is True. An exception raised by a
        callback stops the fit and propagates.
    callback_every : int, default=1
        Call the callbacks at every this many reports.
    categorical : None or bool, default=None
        None: binary iff the values are in {0, 1}.
    n_jobs : int or None
        Threads (None: all cores). Results do not depend on it.
    random_state : int, RandomState or None
    restarts : int, default=0
        Iterated local search after P-LS (``method="pls"``): this many rounds of "kick the best
        arrangement found so far, then a 3- and a 1-split search", keeping the best. The first
        round continues from P-LS's best; the second always starts from the flipped best
        (every reordered axis reversed at once: the other orientation of the pattern against
        the padding), and every eighth kick after it flips again; the others alternate between a
        block ordering on 4-16 blocks cut at a random offset and two random segment reversals
        / relocations, on every reordered axis. Each round is seeded
        from (``random_state``, round), so the result is reproducible and independent of
        ``n_jobs``; it is never worse than with ``restarts=0`` (same seed). The history gains
        one ``"ils_<round>"`` entry per round.
    time_budget : float or None, default=None
        Seconds (wall clock, from the start of ``fit``, the TSP included) after which no new
        restart round starts (the running one finishes). None: only ``restarts`` bounds the
        rounds. With a budget the number of rounds run, hence the result, depends on the
        machine's speed and load; ``restarts`` alone is reproducible.
    polish : bool or int, default=False
        After P-LS (and the restart rounds), polish the best arrangement exhaustively: every
        swap, every reversal and every relocation of a block of up to 8 positions (an int:
        up to that many), also reversed, to any place, on the rows and the columns
        alternately until neither improves; moves are scored from a table of pair overlaps.
        Never raises the error (``history_`` gains ``"polish"``). Only for
        ``error="abs"`` with zeros_and_ones or zero padding; axes whose table (length² x
        kernel half-height) exceeds 2**23 entries are left alone. Deterministic, except that
        with ``time_budget`` it stops (keeping its gains) once twice the budget has passed.

    Attributes
    ----------
    row_order_, col_order_ : ndarray of int
        Original index shown at each position.
    error_ : float
        Error of the reordered matrix.
    initial_error_ : float
        Error of the input order.
    history_ : list of (str, float)
        Error after each stage.
    n_colours_ : int
        0 for a binary matrix, else the number of colours.
    values_ : ndarray
        The distinct values, in colour order (colour ``c`` is ``values_[c]``).
    color_maps_ : ndarray of int, shape (n_features, n_colours) or None
        With ``recolor=True``: ``color_maps_[j, c]`` is the colour now shown for the value
        ``values_[c]`` of column j (``transform`` applies it). None otherwise.
    n_iter_ : int
        Number of search stages run after the start (the entries of ``history_`` after the
        first).
    stopped_early_ : bool
        A callback asked the fit to stop.

    Notes
    -----
    ConvoMap is transductive: ``transform`` reorders the matrix it was fitted on (or another
    matrix of the same shape, cell for cell), so scikit-learn's checks that transform subsets
    or permutations of the samples do not apply to it, and it takes binary or categorical
    matrices (at most 255 colours), not continuous data.

    Examples
    --------
    >>> import numpy as np
    >>> from vastml.reorder import ConvoMap
    >>> rng = np.random.default_rng(0)
    >>> M = (np.add.outer(np.arange(30), np.arange(30)) < 30).astype(int)
    >>> shuffled = M[rng.permutation(30)][:, rng.permutation(30)]
    >>> cm = ConvoMap(kernel_size=5, random_state=0).fit(shuffled)
    >>> cm.error_ < cm.initial_error_
    True
    >>> cm.transform(shuffled).shape
    (30, 30)

    Per-column colours: the same stripes under a different labelling in every column are
    aligned into one colour per stripe.

    >>> stripes = np.repeat(np.arange(3), 8)[:, None]
    >>> A = np.hstack([(stripes + s) % 3 for s in (0, 1, 2, 1, 0, 2)])
    >>> cm = ConvoMap(kernel_size=3, recolor=True, random_state=0).fit(A)
    >>> out = cm.transform(A)
    >>> bool((out == out[:, :1]).all())
    True
    """

    def __init__(
        self,
        *,
        kernel: str | ArrayLike = "gbs",
        kernel_size: int | tuple[int, int] = 25,
        padding: str = "zeros_and_ones",
        error: str = "abs",
        moves: str | Sequence[str] = "all",
        init: str = "tsp",
        method: str = "pls",
        max_iter: int | None = None,
        segment_length: int | None = None,
        reaction: float = 0.6,
        stop_threshold: float | None = -1e-4,
        accept_ties: bool = True,
        axes: str = "both",
        swap_radius: int = 10,
        max_block: int = 50,
        rectangle_tolerance: tuple[float, float, float, float] = (2, 1, 4, 0.8),
        schedule: Sequence[Any] = DEFAULT_SCHEDULE,
        n_blocks: int = 10,
        kmax_k: int = 5,
        recolor: bool = False,
        verbose: bool = False,
        callbacks: Callback | Sequence[Callback] | None = None,
        callback_every: int = 1,
        categorical: bool | None = None,
        n_jobs: int | None = None,
        random_state: RandomState = None,
        restarts: int = 0,
        time_budget: float | None = None,
        polish: bool = False,
    ) -> None:
        self.kernel = kernel
        self.kernel_size = kernel_size
        self.padding = padding
        self.error = error
        self.moves = moves
        self.init = init
        self.method = method
        self.max_iter = max_iter
        self.segment_length = segment_length
        self.reaction = reaction
        self.stop_threshold = stop_threshold
        self.accept_ties = accept_ties
        self.axes = axes
        self.swap_radius = swap_radius
        self.max_block = max_block
        self.rectangle_tolerance = rectangle_tolerance
        self.schedule = schedule
        self.n_blocks = n_blocks
        self.kmax_k = kmax_k
        self.recolor = recolor
        self.verbose = verbose
        self.callbacks = callbacks
        self.callback_every = callback_every
        self.categorical = categorical
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.restarts = restarts
        self.time_budget = time_budget
        self.polish = polish

    def _params(self):
        name, size, weights = kernel_args(self.kernel, self.kernel_size)
        check_choice(self.padding, "padding", PADDINGS)
        check_choice(self.error, "error", ERRORS)
        check_choice(self.init, "init", ("tsp", "none") + tuple(_BASELINE_INITS))
        method = check_choice(self.method, "method", ("pls", "ls"))
        axes = check_choice(self.axes, "axes", ("both", "rows", "columns"))
        if self.recolor not in (True, False):
            raise ValueError(f"`recolor` must be True or False, got {self.recolor!r}")
        known = MOVES + ("recolor",) if self.recolor else MOVES
        moves = list(known) if self.moves == "all" else list(self.moves)
        if not moves or any(m not in known for m in moves):
            raise ValueError(
                f"`moves` must be 'all' or a non-empty list from {list(known)}"
                + ("" if self.recolor else " ('recolor' needs recolor=True)")
            )
        check_callbacks(self.callbacks)
        check_callback_every(self.callback_every)
        max_iter = self.max_iter if self.max_iter is not None else (5000 if method == "pls" else 100_000)
        seg = self.segment_length if self.segment_length is not None else (100 if method == "pls" else 500)
        max_iter = _positive_int(max_iter, "max_iter", 0)
        seg = _positive_int(seg, "segment_length")
        if isinstance(self.reaction, bool) or not isinstance(self.reaction, numbers.Real) or not (
            0.0 <= self.reaction <= 1.0
        ):
            raise ValueError(f"`reaction` must lie in [0, 1], got {self.reaction!r}")
        stop = self.stop_threshold
        if stop is not None and not (isinstance(stop, numbers.Real) and math.isfinite(stop)):
            raise ValueError(f"`stop_threshold` must be a finite number or None, got {stop!r}")
        tol = tuple(self.rectangle_tolerance)
        if len(tol) != 4:
            raise ValueError("`rectangle_tolerance` must be (zeros, extra_zeros, per_ones, density)")
        tol = (
            _positive_int(tol[0], "rectangle_tolerance[0]", 0),
            _positive_int(tol[1], "rectangle_tolerance[1]", 0),
            _positive_int(tol[2], "rectangle_tolerance[2]"),
            float(tol[3]),
        )
        tb = self.time_budget
        if tb is not None and (isinstance(tb, bool) or not isinstance(tb, numbers.Real) or not tb > 0):
            raise ValueError(f"`time_budget` must be a positive number of seconds or None, got {tb!r}")
        tb = None if tb is None else float(tb)
        schedule = []
        for s in self.schedule:
            if s in ("block_ordering", "kmax", "restart", "stop_unless_improved", "polish"):
                schedule.append(s)
            else:
                schedule.append(str(_positive_int(s, "schedule")))
        return dict(
            kernel=name,
            kernel_size=size,
            kernel_weights=weights,
            padding=self.padding,
            error=self.error,
            init=self.init,
            method=method,
            moves=moves,
            max_iter=max_iter,
            segment_length=seg,
            reaction=float(self.reaction),
            stop_threshold=None if stop is None else float(stop),
            accept_ties=bool(self.accept_ties),
            axes=axes,
            swap_radius=_positive_int(self.swap_radius, "swap_radius"),
            max_block=_positive_int(self.max_block, "max_block"),
            tolerance=tol,
            schedule=schedule,
            n_blocks=_positive_int(self.n_blocks, "n_blocks", 2),
            kmax_k=_positive_int(self.kmax_k, "kmax_k"),
            restarts=_positive_int(self.restarts, "restarts", 0),
            time_budget=tb,
            polish=8 if self.polish is True else (0 if self.polish is False else _positive_int(self.polish, "polish")),
        )

    def fit(self, X: ArrayLike, y: object = None) -> Self:
        """Find the row and column orders of ``X``; returns ``self``."""
        p = self._params()
        codes, n_colours, values = as_codes(X, self.categorical, name="X")
        if self.recolor and n_colours == 0:
            raise ValueError("`recolor=True` needs a categorical matrix (colours are swapped per column)")
        seed = int(check_random_state(self.random_state).randint(0, 2**31 - 1))
        init, r0, c0 = p["init"], None, None
        if init in _BASELINE_INITS:
            if n_colours:
                raise ValueError(f"`init={init!r}` needs a binary matrix")
            r0, c0 = (o.tolist() for o in _BASELINE_INITS[init](codes))
            init = "none"
        progress = Progress(
            self.callbacks, callback_every=self.callback_every, verbose=self.verbose, desc="ConvoMap"
        )
        reports = 0

        def hook(stage, step, error, rows, cols):
            nonlocal reports
            reports += 1
            state = {"stage": stage, "step": step, "row_order": np.asarray(rows, dtype=np.intp),
                     "col_order": np.asarray(cols, dtype=np.intp)}
            return progress.report(reports, error, state)

        with progress:
            options = {k: p[k] for k in _FIT_OPTIONS}
            options.update(
                init=init,
                seed=seed,
                recolor=bool(self.recolor),
                restarts=p["restarts"] if p["method"] == "pls" else 0,
                polish=p["polish"] if p["method"] == "pls" else 0,
            )
            objective = objective_args(
                p["kernel"], p["kernel_size"], p["kernel_weights"], p["padding"], p["error"]
            )
            result = _core.convomap_fit(
                (codes, n_colours),
                objective,
                (r0, c0),
                options,
                n_jobs=self.n_jobs,
                progress=hook if progress.active else None,
            )
        rows, cols, err, history, weights, cmaps, stopped = result
        self.row_order_ = np.asarray(rows, dtype=np.intp)
        self.col_order_ = np.asarray(cols, dtype=np.intp)
        self.error_ = float(err)
        self.initial_error_ = float(history[0][1])
        self.history_ = [(str(a), float(b)) for a, b in history]
        self.move_weights_ = dict(weights)
        self.n_colours_ = int(n_colours)
        self.values_ = np.asarray(values)
        self.color_maps_ = (
            np.frombuffer(bytes(cmaps), dtype=np.uint8).astype(np.intp).reshape(codes.shape[1], n_colours)
            if self.recolor
            else None
        )
        self.n_features_in_ = codes.shape[1]
        self.n_rows_ = codes.shape[0]
        self.n_iter_ = max(len(self.history_) - 1, 1)
        self.stopped_early_ = bool(stopped)
        return self

    def transform(self, X: ArrayLike) -> np.ndarray:
        """``X`` with rows and columns in the fitted orders."""
        check_is_fitted(self, "row_order_")
        reject_sparse(X, "X")
        a = np.asarray(X)
        reject_complex(a, "X")
        if a.ndim != 2:
            raise ValueError(
                f"`X` must be 2-D, got shape {a.shape}. Reshape your data to the fitted shape "
                f"{(self.n_rows_, self.n_features_in_)}."
            )
        if a.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {a.shape[1]} features, but ConvoMap is expecting {self.n_features_in_} "
                "features as input"
            )
        if a.shape[0] != self.n_rows_:
            raise ValueError(
                f"`X` must have the fitted shape {(self.n_rows_, self.n_features_in_)}, got "
                f"{a.shape}: ConvoMap reorders the matrix it was fitted on"
            )
        if a.dtype.kind in "fc" and not np.isfinite(a).all():
            raise ValueError("`X` contains NaN or infinite values")
        out = a[self.row_order_][:, self.col_order_]
        if self.color_maps_ is None:
            return out
        # shown colour of each cell: its value's colour in its column, as the value of that colour
        order = np.argsort(self.values_, kind="stable")
        pos = np.searchsorted(self.values_[order], out)
        pos = np.clip(pos, 0, len(order) - 1)
        codes = order[pos]
        if not np.array_equal(self.values_[codes], out):
            raise ValueError("`X` has values not seen in fit")
        colours = self.color_maps_[self.col_order_][np.arange(out.shape[1])[None, :], codes]
        return self.values_[colours]

    def fit_transform(self, X: ArrayLike, y: object = None) -> np.ndarray:
        """Fit, then return the reordered ``X``."""
        return self.fit(X).transform(X)
