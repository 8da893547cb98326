"""The counting oracle: the only place where zoframe evaluates user functions.

:class:`CountingOracle` wraps a problem and is all a solver ever sees of it. It

* counts every evaluation, by kind (``objective``, ``constraint``, ``equality``, ``minimax``,
  ``gradient``; a residual of :meth:`~CountingOracle.residuals` counts as an ``objective`` one) and
  by the purpose tag the solver gives (``"estimate"``, ``"snapshot"``, ...). One evaluation is one
  component at one point, so a ``(k, d)`` batch over ``b`` components costs ``k * b``;
* enforces the budget exactly: a batch that would take the count past ``max_calls`` raises
  :class:`~zoframe.errors.BudgetExhausted` *before* anything is evaluated;
* copies its inputs (the user function gets a read-only copy; the caller's arrays are never
  touched, except by :meth:`~CountingOracle.objective_owned`, which takes over the points it is
  handed and makes them read-only) and validates them before any call: points must be real
  numbers (complex, string, object, masked or ``None`` points raise
  :class:`~zoframe.errors.InvalidInputError`), shapes and indices must fit, with messages that say
  what was expected;
* owns the values it returns: a user function's result is copied, so that neither the function
  (which may keep its array and write to it later) nor the solver (which may write to its values)
  sees the other's writes; a problem whose functions return a new array on every call, held by
  nothing else, declares it with ``fresh_results = True`` and its results are kept without the copy
  (writeable float64 arrays that own their memory; anything else is still copied). The oracle's
  own arrays need no such promise: the points :meth:`~CountingOracle.objective_owned` is handed,
  the batches :meth:`~CountingOracle.sample` draws;
* detects non-finite values: ``nonfinite="raise"`` (default) names the offending point and
  component, ``nonfinite="inf"`` replaces NaN and infinities by ``+inf``;
* checks every value a user function returns, on every call (the one-point call included), before
  it is used: a wrong shape raises :class:`~zoframe.errors.ShapeError`, complex, boolean, string,
  object, masked or ``None`` results raise :class:`~zoframe.errors.InvalidInputError`, each naming
  the function and the expected and received shape or type (:func:`as_values`); white-box
  gradients must also be finite (whatever ``nonfinite`` says: no value stands for an infinite
  gradient);
* splits every batch into fixed blocks of ``block_rows`` rows (default 256), one user-function
  call per block. The partition depends on the batch alone: serial evaluation uses it too, and an
  :class:`concurrent.futures.Executor` (a process pool, a ``dask.distributed`` client's executor)
  only groups whole blocks into tasks (``chunks`` tasks per batch). Each block is computed from the
  same rows by the same code wherever it runs, so results are bit-identical serially, with
  ``chunks``, on a process pool or on dask, even when the function uses matrix products whose
  rounding depends on the number of rows. A batch of at most ``block_rows`` rows is one call.

:meth:`CountingOracle.evaluate_full` is the one-point path of peers that ask one point at a time
(scipy's minimisers): the mean of all ``n`` components and all ``m`` constraints at one point, with
the counts, checks and messages of the two separate calls.

Monitoring evaluations made by the driver (the objective recorded in the trace) go through
:attr:`CountingOracle.monitor`: they are counted under the purpose ``"monitor"``, apart from the
solver's calls. The oracle itself never charges them to ``max_calls``; the run loop does, for every
problem that does not declare ``monitor_free = True`` (see :mod:`zoframe.observers.trace`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
import itertools
import math
import pickle
import time
from typing import Any, Literal, NamedTuple

import numpy as np

from zoframe._shipping import ship
from zoframe.errors import BudgetExhausted, InvalidInputError, NonFiniteValueError, ShapeError
from zoframe.protocols import (
    Array,
    ConvexSet,
    HasConstraintGradient,
    HasCvxpyConstraints,
    HasGradient,
    HasLinearConstraints,
    HasMinimaxGradient,
    HasResiduals,
    IntArray,
    Penalty,
)

NonFinitePolicy = Literal["raise", "inf"]
#: what ``minimize`` / ``Run`` take: a policy, or ``"auto"`` (the solver's own: :func:`resolve_nonfinite`)
NonFiniteOption = Literal["auto", "raise", "inf"]


def resolve_nonfinite(option: Any, solver: Any) -> NonFinitePolicy:
    """The oracle's policy for a run: ``"raise"`` or ``"inf"`` as given; ``"auto"``: ``"inf"`` for a solver whose
    ``nonfinite_policy()`` says it steps back from a failed trial point (line searches, the peers), else
    ``"raise"`` (fixed steps, which cannot)."""
    if option == "auto":
        fn = getattr(solver, "nonfinite_policy", None)
        return "inf" if callable(fn) and fn() == "inf" else "raise"
    if option in ("raise", "inf"):
        return "raise" if option == "raise" else "inf"
    raise InvalidInputError(
        f"nonfinite must be 'auto', 'raise' or 'inf' (what to do when a function returns NaN or inf), got {option!r}"
    )


__all__ = [
    "DEFAULT_BLOCK_ROWS", "CountingOracle", "MonitorOracle", "NonFiniteOption", "NonFinitePolicy", "as_values",
    "checked_values", "problem_kind", "resolve_nonfinite",
]

#: Rows per user-function call (see :class:`CountingOracle`, ``block_rows``).
DEFAULT_BLOCK_ROWS = 256

# ``idx=None`` means all components / constraints: ``arange(size)`` is kept for the run up to this
# size (128 MB, no more than one call's values) and built afresh per call above it, where holding
# it would cost more than rebuilding it saves (``m = 1e8`` constraints: 800 MB held for the run,
# against about 0.2 s per full pass next to the pass's own values of the same size)
_CACHED_RANGE = 2**24

_clock = time.perf_counter


def problem_kind(problem: object) -> str:
    """The kind of a problem (its ``kind`` attribute), validated."""
    kind = getattr(problem, "kind", None)
    if kind not in ("finite_sum", "constrained", "minimax", "composite"):
        raise InvalidInputError(
            f"{type(problem).__name__} does not declare a valid problem kind (got kind={kind!r}); "
            "a problem needs kind = 'finite_sum', 'constrained', 'minimax' or 'composite'. "
            "Build one with zoframe.FiniteSum, Constrained, Minimax or Composite."
        )
    return str(kind)


def _real_array(X: Any, what: str) -> Any:
    """``X`` as an array of real numbers (integer or float dtype), or :class:`InvalidInputError`."""
    try:
        src = np.asarray(X)
    except (ValueError, TypeError) as exc:
        raise InvalidInputError(f"{what}: points must be an array of real numbers, got {type(X).__name__} ({exc})") from None
    if src.dtype.kind not in "fiu" or isinstance(X, np.ma.MaskedArray):
        raise InvalidInputError(
            f"{what}: points must be real numbers, got a {type(X).__name__} of dtype {src.dtype} and shape {src.shape}"
        )
    return src


def _as_points(X: Any, dim: int, what: str) -> Array:
    """A fresh read-only float64 ``(k, dim)`` copy of real-valued points ``X`` (one point may be 1-D)."""
    src = X
    if type(X) is not np.ndarray or X.dtype.kind not in "fiu":
        src = _real_array(X, what)
    arr = np.array(src, dtype=np.float64, copy=True)
    shape = arr.shape
    if len(shape) == 1 and shape[0] == dim:
        arr = arr[None, :]
    elif len(shape) != 2 or shape[1] != dim:
        raise ShapeError(
            f"{what}: expected points of shape (k, {dim}) (or one point of shape ({dim},)), "
            f"got shape {np.shape(X)}"
        )
    arr.setflags(write=False)
    return arr


def _one_point(x: Any, dim: int, what: str) -> Array:
    """A fresh read-only float64 ``(1, dim)`` copy of one real point ``x`` (shape ``(dim,)`` or ``(1, dim)``).

    The same checks and messages as :func:`_as_points`, and the same array it makes of
    ``x.reshape(1, dim)`` (a C-contiguous ``(1, dim)`` copy of its own).
    """
    src = x
    if type(x) is not np.ndarray or x.dtype.kind not in "fiu":
        src = _real_array(x, what)
    shape = src.shape
    if shape != (dim,) and shape != (1, dim):
        raise ShapeError(f"{what}: expected one point of shape ({dim},) (or (1, {dim})), got shape {np.shape(x)}")
    pts: Array = np.array(src.reshape(1, dim), dtype=np.float64, copy=True)
    pts.setflags(write=False)
    return pts


_NDARRAY = np.ndarray
_FLOAT64 = np.dtype(np.float64)
_INTP = np.dtype(np.intp)


class _Family(NamedTuple):
    """The kind of values an owned path evaluates, and its names in counts and messages."""

    kind: str  # counted as ("objective" / "constraint")
    what: str  # the indices' name ("component" / "constraint")
    method: str  # the copying method's name ("objective" / "constraints")
    estimate: tuple[str, str]  # (kind, "estimate"): the pair the hot path counts, told by identity


_OBJECTIVE = _Family("objective", "component", "objective", ("objective", "estimate"))
_CONSTRAINT = _Family("constraint", "constraint", "constraints", ("constraint", "estimate"))

#: no batch drawn yet (a value no index argument can be)
_NOT_DRAWN = object()


# what _values does with a valid float64 result: copy it (the function may still hold it), keep it
# (it was declared fresh) or hand it on unchanged (a builder, whose caller decides)
_COPY, _KEEP, _PASS = 0, 1, 2


def as_values(raw: Any, k: int, b: int, what: str, *, per_point: bool = False, fresh: bool = False) -> Array:
    """Check a user function's result and return it as a ``(k, b)`` float64 array the caller owns.

    ``raw`` must be a real numeric array of shape ``(k, b)``; a 1-D array of length ``k`` is read as
    one column when ``b == 1`` and one of length ``b`` as one row when ``k == 1``. Anything else
    (another shape, a scalar, complex, boolean, string or object values, ``None``) raises
    :class:`~zoframe.errors.ShapeError` or :class:`~zoframe.errors.InvalidInputError` naming
    ``what``, the expected and the received shape or type. Integer and other real float types are
    converted exactly as numpy does.

    The result is a copy (a conversion to float64 is one already), so the caller may keep or modify
    it and the function may keep and modify ``raw`` without either seeing the other's writes. With
    ``fresh=True`` the caller states that ``raw`` was made for this call and that nothing else holds
    it or a view of it (a problem that declares ``fresh_results = True``): a writeable float64 array
    that owns its memory is then returned as it is (reshaped if 1-D), without the copy.

    ``per_point=True`` (with ``b == 1``) describes a function of the points alone, whose contract
    is one value per point: messages then ask for shape ``(k,)``.
    """
    return _values(raw, k, b, what, per_point, _KEEP if fresh else _COPY)


def _result(raw: Any, k: int, b: int, oracle: CountingOracle, fn: Callable[..., Any], kind: str) -> Array:
    """The ``(k, b)`` values of one call of the user function ``fn`` (its result ``raw``): :func:`as_values`
    with ``fresh`` as the problem declares it (``fresh_results``), the common case first (a float64
    array of the right shape that owns its memory: kept if declared fresh and writeable, else copied)."""
    if type(raw) is _NDARRAY and raw.dtype is _FLOAT64 and raw.shape == (k, b):
        flags = raw.flags
        if flags.owndata:
            if oracle._fresh and flags.writeable:
                kept: Array = raw
                return kept
            copied: Array = raw.copy(order="K")  # _copy of an array that owns its memory
            return copied
    return _values(raw, k, b, oracle._function_name(fn, kind), False, _KEEP if oracle._fresh else _COPY)


def _copy(arr: Array) -> Array:
    """A copy of a function's float64 result: laid out as ``arr`` when ``arr`` owns its memory (so
    that reductions over the copy round as they would over ``arr`` itself), in C order when a view."""
    out: Array = arr.copy(order="K") if arr.flags.owndata else arr.copy()
    return out


def _values(raw: Any, k: int, b: int, what: str, per_point: bool, mode: int) -> Array:
    """:func:`as_values`; ``mode`` says what becomes of a valid float64 ``raw``: copied (``_COPY``),
    kept if it is writeable and owns its memory (``_KEEP``, a declared fresh result), handed on as it
    is (``_PASS``, for a caller that copies or hands the values on itself)."""
    if type(raw) is np.ndarray and raw.dtype == _FLOAT64:
        arr: Array = raw
        keep = mode == _PASS or (mode == _KEEP and arr.flags.owndata and arr.flags.writeable)
        if arr.shape == (k, b):  # the common case: no message to prepare
            return arr if keep else _copy(arr)
    expected = f"({k},)" if per_point else f"({k}, {b})"
    inputs = f"{k} point(s)" if per_point else f"{k} point(s) and {b} index(es)"
    if type(raw) is not np.ndarray or raw.dtype != _FLOAT64:
        if raw is None:
            raise InvalidInputError(
                f"{what} returned None for {inputs}; it must return an array of "
                f"shape {expected} of real numbers (did it forget a return statement?)"
            )
        if isinstance(raw, np.ma.MaskedArray):
            raise InvalidInputError(
                f"{what} returned a masked array (shape {raw.shape}); masked entries have no value: "
                f"return a plain array of shape {expected} of real numbers (e.g. .filled(np.inf))"
            )
        try:
            conv = np.asarray(raw)
        except (ValueError, TypeError) as exc:
            raise InvalidInputError(
                f"{what} returned a {type(raw).__name__} that is not an array of numbers ({exc}); "
                f"it must return an array of shape {expected} of real numbers"
            ) from None
        dkind = conv.dtype.kind
        if dkind == "c":
            raise InvalidInputError(
                f"{what} returned complex values (dtype {conv.dtype}, shape {conv.shape}); zoframe "
                f"minimises real functions: return real values of shape {expected} (e.g. take .real "
                "or abs() in the function if that is what you mean)"
            )
        if dkind not in "fiu":
            what_type = "booleans" if dkind == "b" else f"non-numeric values of dtype {conv.dtype}"
            raise InvalidInputError(
                f"{what} returned {what_type} ({type(raw).__name__} of shape {conv.shape}); it must "
                f"return an array of shape {expected} of real numbers"
            )
        arr = conv.astype(np.float64)  # a new array: ours
        keep = True
    if arr.shape != (k, b):
        if arr.ndim == 1 and ((arr.shape[0] == k and b == 1) or (arr.shape[0] == b and k == 1)):
            arr = arr.reshape(k, b)
        else:
            layout = "one value per point" if per_point else "one row per point, one column per index"
            raise ShapeError(
                f"{what} returned shape {arr.shape} for {inputs}; it must return an array of shape "
                f"{expected}: {layout}"
            )
    return arr if keep else _copy(arr)


def checked_values(raw: Any, k: int, b: int, what: str, *, per_point: bool = False) -> Array:
    """:func:`as_values` without the copy: ``raw`` itself (a 1-D array reshaped) when it is a float64
    array, a new float64 array when it had to be converted. For code that hands a function's values
    on to a caller that decides about ownership itself (the problem builders of
    :mod:`zoframe.problems`, whose results the oracle copies unless the problem declares them fresh)."""
    return _values(raw, k, b, what, per_point, _PASS)


def _all_finite(out: Array) -> bool:
    """Whether every value of ``out`` is finite: NaN or inf make the sum of squares non-finite (one
    fused BLAS pass); a sum that overflowed on huge finite values is told apart by the exact check.
    The overflow itself is not a warning: huge finite values are the user's, not an error here
    (``np.vdot`` does not report floating-point overflow, where ``ndarray.dot`` warns; no
    ``np.errstate`` context, which cost more than the product itself on small batches)."""
    if math.isfinite(np.vdot(out, out)):
        return True
    return bool(np.isfinite(out).all())


def _call_blocks(fn: Callable[..., Any], blocks: Sequence[Sequence[Array]], idx: IntArray) -> list[Any]:
    """One task: the user function on each of its blocks, one call per block (as serially).

    Each block is copied into a fresh array first: a transport may hand over arrays at any memory
    alignment, and numpy's vectorised reductions can round differently at another alignment.
    """
    ids = idx.copy()
    ids.setflags(write=False)
    return [fn(*(_block(a, 0, len(a)) for a in arrays), ids) for arrays in blocks]


def _block(a: Array, lo: int, hi: int) -> Array:
    out = a[lo:hi].copy()  # a fresh array of its own, like the copy a worker receives
    out.setflags(write=False)
    return out


def _finite_gradient(g: Array, name: str, ids: IntArray) -> None:
    """White-box gradients must be finite whatever the ``nonfinite`` policy (no value stands for +inf)."""
    flat = g.reshape(-1)
    if not math.isfinite(float(flat @ flat)) and not np.isfinite(g).all():
        r = int(np.argwhere(~np.isfinite(g))[0][0])
        raise NonFiniteValueError(
            f"{name} returned a non-finite gradient for index {int(ids[r])} ({g[r]}); white-box gradients "
            "must be finite at every point a solver visits"
        )


class CountingOracle:
    """Counted, budgeted, validated access to a problem's function values.

    The problem's optional attribute ``fresh_results`` (``True`` or ``False``, default ``False``)
    declares whether each call of its functions returns a new array that nothing else holds or
    views: its results are then kept without the copy (see the module docstring).

    Parameters
    ----------
    problem:
        any object satisfying one of the problem protocols of :mod:`zoframe.protocols`.
    max_calls:
        hard limit on budgeted evaluations (``None``: unlimited).
    nonfinite:
        ``"raise"`` or ``"inf"``; see the module docstring.
    executor, chunks:
        optional executor, and the number of tasks a batch's blocks are grouped into on it (default:
        2 per worker). Neither changes the blocks, so neither changes a single bit of the values.
    block_rows:
        rows per user-function call (default :data:`DEFAULT_BLOCK_ROWS` = 256): a batch of ``k`` rows
        is evaluated as the blocks ``[0, B), [B, 2B), ...`` serially and in parallel alike. Lower it
        to spread small batches of an expensive function over an executor's workers.
    """

    def __init__(
        self,
        problem: Any,
        *,
        max_calls: int | None = None,
        nonfinite: NonFinitePolicy = "raise",
        executor: Executor | None = None,
        chunks: int | None = None,
        block_rows: int = DEFAULT_BLOCK_ROWS,
    ) -> None:
        self.kind = problem_kind(problem)
        if max_calls is not None and (not isinstance(max_calls, (int, np.integer)) or max_calls < 1):
            raise InvalidInputError(f"max_calls must be a positive integer or None, got {max_calls!r}")
        if nonfinite not in ("raise", "inf"):
            raise InvalidInputError(f"nonfinite must be 'raise' or 'inf', got {nonfinite!r}")
        if chunks is not None and (not isinstance(chunks, (int, np.integer)) or isinstance(chunks, bool) or chunks < 1):
            raise InvalidInputError(f"chunks must be a positive integer or None, got {chunks!r}")
        if not isinstance(block_rows, (int, np.integer)) or isinstance(block_rows, bool) or block_rows < 1:
            raise InvalidInputError(
                f"block_rows must be a positive integer (rows per call of the user function), got {block_rows!r}"
            )
        self._problem = problem
        self.max_calls = None if max_calls is None else int(max_calls)
        self.nonfinite: NonFinitePolicy = nonfinite
        self.executor = executor
        self._chunks = chunks
        self.block_rows = int(block_rows)
        self.calls = 0
        #: calls of the problem's functions (one per block of at most ``block_rows`` points, one per
        #: gradient call), budgeted and monitoring together: what the user's code saw
        self.user_calls = 0
        self._by_kind: Counter[str] = Counter()
        self._by_purpose: Counter[str] = Counter()
        # the (kind, purpose) pair counted last and what it has been charged since (folded into the
        # two Counters when they are read): one int addition per call on the estimators' hot path
        # (under "estimate" the owned paths store the pairs _OBJECTIVE.estimate / _CONSTRAINT.estimate
        # here, and find them again by identity)
        self._hot: tuple[str, str] = ("", "")
        self._hot_count = 0
        self.seconds = 0.0
        #: values that were NaN or inf and became +inf (``nonfinite="inf"``): the failed trials of the run
        self.nonfinite_values = 0
        # ---- structure a solver may read (never function values) ----
        self.dim: int = int(problem.dim)
        self.n: int = int(getattr(problem, "n", 1))
        if self.dim < 1 or self.n < 1:
            raise InvalidInputError(f"problem dimensions must be positive, got dim={self.dim}, n={self.n}")
        self.m: int = int(getattr(problem, "m", 0))
        #: equality constraints h_l(x) = 0 (``problem.equalities``), counted as the kind "equality"
        self.m_eq: int = int(getattr(problem, "m_eq", 0)) if self.kind == "constrained" else 0
        if self.m_eq < 0 or (self.m_eq and not callable(getattr(problem, "equalities", None))):
            raise InvalidInputError(
                f"{type(problem).__name__} declares m_eq={self.m_eq} equality constraints; m_eq must be >= 0 and a "
                "problem with equalities needs a method equalities(X, idx) -> (k, b)"
            )
        if self.kind == "constrained" and (self.m < 0 or (self.m == 0 and self.m_eq == 0)):
            raise InvalidInputError(
                f"a constrained problem needs at least one constraint (m >= 1 inequalities or m_eq >= 1 equalities), "
                f"got m={self.m}, m_eq={self.m_eq}; use a finite-sum problem instead"
            )
        self.convex_constraints: bool = bool(getattr(problem, "convex_constraints", True))
        self.black_box_constraints: bool = bool(getattr(problem, "black_box_constraints", True))
        self.feasible_set: ConvexSet | None = getattr(problem, "feasible_set", None)
        self.dim_y: int = int(getattr(problem, "dim_y", 0))
        self.y_set: ConvexSet | None = getattr(problem, "y_set", None)
        y0 = getattr(problem, "y0", None)
        self.y0: Any = None
        if self.kind == "minimax":
            self.y0 = np.array(y0, dtype=np.float64, copy=True)
        elif self.kind == "composite":
            self.y0 = tuple(np.array(v, dtype=np.float64, copy=True) for v in (y0 or ()))
        self.A: Array | None = None
        self.B: tuple[Array, ...] = ()
        self.c: Array | None = None
        self.penalties: tuple[Penalty, ...] = ()
        if self.kind == "composite":
            self.A = np.array(problem.A, dtype=np.float64, copy=True)
            self.B = tuple(np.array(b, dtype=np.float64, copy=True) for b in problem.B)
            self.c = np.array(problem.c, dtype=np.float64, copy=True)
            self.penalties = tuple(problem.penalties)
        white = self.kind == "constrained" and not self.black_box_constraints
        self.has_linear_constraints = white and isinstance(problem, HasLinearConstraints)
        self.has_cvxpy_constraints = white and isinstance(problem, HasCvxpyConstraints)
        self.has_gradient = isinstance(problem, HasGradient)
        self.has_constraint_gradient = isinstance(problem, HasConstraintGradient)
        self.has_minimax_gradient = isinstance(problem, HasMinimaxGradient)
        #: least-squares components l_i = r_i^2 with their residuals r_i (:meth:`residuals`)
        self.has_residuals = (
            self.kind != "minimax" and isinstance(problem, HasResiduals) and callable(getattr(problem, "residuals", None))
        )
        fresh = getattr(problem, "fresh_results", False)
        if not isinstance(fresh, (bool, np.bool_)):
            raise InvalidInputError(
                f"{type(problem).__name__}.fresh_results must be True or False, got {fresh!r}: True declares "
                "that every call of the problem's functions returns a new array that nothing else holds"
            )
        # the problem's results are declared fresh: kept without a copy (else every result is copied)
        self._fresh = bool(fresh)
        self._all: dict[int, IntArray] = {}
        self._names: dict[tuple[str, str], str] = {}
        self._one_shape = (self.dim,)
        self._row_shape = (1, self.dim)
        # the last batch sample() has drawn from each population: read-only and valid, trusted by identity
        # (holding no more batches than the solver does: older ones are checked like any indices)
        self._drawn_components: Any = _NOT_DRAWN  # an IntArray once drawn
        self._drawn_constraints: Any = _NOT_DRAWN
        self.monitor = MonitorOracle(self)

    @property
    def calls_by_kind(self) -> Counter[str]:
        """Evaluations charged to the budget, by kind (``objective``, ``constraint``, ...)."""
        if self._hot_count:
            self._fold()
        return self._by_kind

    @calls_by_kind.setter
    def calls_by_kind(self, value: Counter[str]) -> None:
        if self._hot_count:
            self._fold()
        self._by_kind = value

    @property
    def calls_by_purpose(self) -> Counter[str]:
        """Evaluations by the purpose tag of the call (``estimate``, ``monitor``, ...), budgeted or not."""
        if self._hot_count:
            self._fold()
        return self._by_purpose

    @calls_by_purpose.setter
    def calls_by_purpose(self, value: Counter[str]) -> None:
        if self._hot_count:
            self._fold()
        self._by_purpose = value

    def _fold(self) -> None:
        kind, purpose = self._hot
        self._by_kind[kind] += self._hot_count
        self._by_purpose[purpose] += self._hot_count
        self._hot_count = 0

    def _count_budgeted(self, pair: tuple[str, str], count: int) -> None:
        """Add ``count`` budgeted evaluations of ``pair = (kind, purpose)`` to the two Counters; ``pair``
        becomes the one counted last."""
        if self._hot_count:
            self._fold()
        self._by_kind[pair[0]] += count
        self._by_purpose[pair[1]] += count
        self._hot = pair

    # ------------------------------------------------------------------ public evaluation API
    @property
    def remaining(self) -> int | None:
        """Budgeted evaluations left (``None`` when unlimited)."""
        return None if self.max_calls is None else self.max_calls - self.calls

    def objective(self, X: Any, idx: Any = None, *, purpose: str = "estimate") -> Array:
        """Values ``(k, b)`` of finite-sum components ``idx`` (all ``n`` if ``None``) at rows of ``X``."""
        if self.kind == "minimax":
            self._require(("finite_sum", "constrained", "composite"), "objective")
        pts = _as_points(X, self.dim, "objective")
        ids = self._indices(idx, self.n, "component")
        return self._evaluate(self._problem.components, (pts,), ids, "objective", purpose, True)

    def objective_owned(self, pts: Any, idx: Any = None, *, purpose: str = "estimate") -> Array:
        """:meth:`objective` on points the caller hands over: the same values, counts and checks, no copy.

        When ``pts`` is a float64, C-contiguous ``(k, dim)`` array that owns its memory, it is made
        read-only and given to the user function as it is, instead of a copy: the caller must not
        write to it afterwards (a fresh matrix of perturbed points an estimator builds per call and
        never touches again, for instance). Any other ``pts`` is copied and checked exactly as
        :meth:`objective` does, and left as it was.
        """
        if self.kind == "minimax":
            self._require(("finite_sum", "constrained", "composite"), "objective")
        return self._owned(self._problem.components, _OBJECTIVE, self.n, pts, idx, idx is self._drawn_components, purpose)

    def constraints_owned(self, pts: Any, idx: Any = None, *, purpose: str = "estimate") -> Array:
        """:meth:`constraints` on points the caller hands over, as :meth:`objective_owned` does for the
        objective (a matrix already handed to :meth:`objective_owned`, read-only since, qualifies)."""
        if self.kind != "constrained":
            self._require(("constrained",), "constraints")
        return self._owned(
            self._problem.constraints, _CONSTRAINT, self.m, pts, idx, idx is self._drawn_constraints, purpose
        )

    def _owned(
        self, fn: Callable[..., Any], family: _Family, size: int, pts: Any, idx: Any, drawn: bool, purpose: str
    ) -> Array:
        """The evaluation of :meth:`objective_owned` / :meth:`constraints_owned` (``size``: n or m;
        ``drawn``: ``idx`` is the batch :meth:`sample` has just drawn from that population).

        A one-block batch is :meth:`_evaluate`'s one-block case written out (the estimators' hot
        path): the same budget test, counts, user call, seconds, result checks and non-finite policy.
        """
        if (
            type(pts) is not _NDARRAY
            or pts.dtype is not _FLOAT64
            or pts.ndim != 2
            or pts.shape[1] != self.dim
            or not ((flags := pts.flags).c_contiguous and flags.owndata)
        ):
            # anything else is copied and checked as objective() / constraints() do
            points = _as_points(pts, self.dim, family.method)
            return self._evaluate(fn, (points,), self._indices(idx, size, family.what), family.kind, purpose, True)
        ids: IntArray = idx if drawn else self._indices(idx, size, family.what)  # drawn: read-only and valid here
        pts.setflags(write=False)
        k, b = pts.shape[0], ids.shape[0]
        if not 0 < k <= self.block_rows:
            return self._evaluate(fn, (pts,), ids, family.kind, purpose, True)
        count = k * b
        calls = self.calls + count
        if self.max_calls is not None and calls > self.max_calls:
            raise BudgetExhausted(count, self.calls, self.max_calls)
        self.calls = calls
        pair = family.estimate if purpose == "estimate" else (family.kind, purpose)
        if pair is self._hot or pair == self._hot:  # the pair counted last: one int addition
            self._hot_count += count
        else:  # another pair: into the Counters (keys keep their order of first use)
            self._count_budgeted(pair, count)
        self.user_calls += 1
        t0 = _clock()
        try:
            raw = fn(pts, ids)
        finally:
            self.seconds += _clock() - t0
        out = _result(raw, k, b, self, fn, family.kind)
        if not _all_finite(out):
            out = self._nonfinite(out, (pts,), ids, family.kind)
        return out

    def constraints(self, X: Any, idx: Any = None, *, purpose: str = "estimate") -> Array:
        """Values ``(k, b)`` of constraints ``idx`` (all ``m`` if ``None``) at rows of ``X``."""
        if self.kind != "constrained":
            self._require(("constrained",), "constraints")
        pts = _as_points(X, self.dim, "constraints")
        ids = self._indices(idx, self.m, "constraint")
        return self._evaluate(self._problem.constraints, (pts,), ids, "constraint", purpose, True)

    def equalities(self, X: Any, idx: Any = None, *, purpose: str = "estimate") -> Array:
        """Values ``(k, b)`` of the equality constraints ``idx`` (all ``m_eq`` if ``None``) at rows of ``X``:
        the same checks, budget and non-finite policy as :meth:`constraints`, counted as the kind ``"equality"``."""
        self._require_equalities()
        pts = _as_points(X, self.dim, "equalities")
        ids = self._indices(idx, self.m_eq, "equality")
        return self._evaluate(self._problem.equalities, (pts,), ids, "equality", purpose, True)

    def _require_equalities(self) -> None:
        if not self.m_eq:
            raise InvalidInputError(
                f"oracle.equalities() needs a problem with equality constraints; this {self.kind!r} problem has none "
                "(m_eq = 0)"
            )

    def residuals(self, X: Any, idx: Any = None, *, purpose: str = "estimate") -> Array:
        """Residuals ``(k, b)`` of components ``idx`` (all ``n`` if ``None``) at rows of ``X``, of a problem
        whose components are squares ``l_i = r_i^2`` (:class:`~zoframe.protocols.HasResiduals`).

        One residual is one evaluation of kind ``"objective"`` (it costs what the component costs); the
        budget, the checks of points, indices and results, the blocks and the non-finite policy are those
        of :meth:`objective`.
        """
        if not self.has_residuals:
            raise InvalidInputError(
                f"oracle.residuals() needs a problem with residuals r_i (components l_i = r_i^2); this {self.kind!r} "
                "problem has none: build it with residuals=r (zoframe.FiniteSum / zoframe.Composite) or give it a "
                "method residuals(X, idx) -> (k, b)"
            )
        pts = _as_points(X, self.dim, "residuals")
        ids = self._indices(idx, self.n, "component")
        return self._evaluate(self._problem.residuals, (pts,), ids, "objective", purpose, True, "residual")

    def evaluate_full(self, x: Any, *, purpose: str = "estimate") -> tuple[float, Array | None]:
        """The full objective ``f(x)`` (mean of all ``n`` components) and all ``m`` constraints at one point.

        Returns ``(f, g)``: ``f`` is ``objective(x, None).mean(axis=1)[0]`` bit for bit (the value
        itself when ``n == 1``, so a ``-0.0`` stays one) and ``g`` is ``constraints(x, None)[0]``
        (shape ``(m,)``) for a constrained problem, ``None`` otherwise. The
        counts are those of the two calls (``n`` objective and ``m`` constraint evaluations under
        ``purpose``, one user call each), and so are the checks: the point must be one point of real
        numbers, ``(d,)`` or ``(1, d)``; results are checked by :func:`as_values` and non-finite ones
        handled by the ``nonfinite`` policy. The budget is checked first for the whole ``n + m``:
        :class:`~zoframe.errors.BudgetExhausted` is raised before anything is evaluated unless both
        calls fit. This is the one-point path of peers that evaluate a point at a time.
        """
        kind = self.kind
        if kind == "minimax":
            self._require(("finite_sum", "constrained", "composite"), "objective")
        n = self.n
        m = self.m if kind == "constrained" else 0
        calls = self.calls
        max_calls = self.max_calls
        if max_calls is not None and calls + n + m > max_calls:
            raise BudgetExhausted(n + m, calls, max_calls)
        if type(x) is _NDARRAY and x.dtype is _FLOAT64 and x.shape == self._one_shape:
            pts = x.reshape(self._row_shape).copy()  # _one_point's array, without its checks' layers
            pts.setflags(write=False)
        else:
            pts = _one_point(x, self.dim, "evaluate_full")
        # one row is one block, one call each: _evaluate's one-block case with its counts and checks,
        # written out for the peers' per-point path (the helpers' common cases inline, as in _owned)
        problem = self._problem
        fn = problem.components
        ids = self._all.get(n)  # _indices(None, n): arange(n), read-only, kept for the run
        if ids is None:
            ids = self._indices(None, n, "component")
        # _charge's budgeted case (the budget was checked above, for n + m)
        self.calls = calls + n
        pair = _OBJECTIVE.estimate if purpose == "estimate" else ("objective", purpose)
        hot = self._hot
        if pair is hot or pair == hot:  # the pair counted last: one int addition
            self._hot_count += n
        else:
            self._count_budgeted(pair, n)
        self.user_calls += 1
        t0 = _clock()
        try:
            raw = fn(pts, ids)
        finally:
            self.seconds += _clock() - t0
        # _result's common case: a float64 (1, n) array that owns its memory, kept if declared fresh
        if type(raw) is _NDARRAY and raw.dtype is _FLOAT64 and raw.shape == (1, n) and (flags := raw.flags).owndata:
            out: Array = raw if self._fresh and flags.writeable else raw.copy(order="K")
        else:
            out = _result(raw, 1, n, self, fn, "objective")
        if n == 1:  # the value itself (a mean over one value would turn -0.0 into 0.0)
            f = float(out[0, 0])
            if not math.isfinite(f):
                f = float(self._nonfinite(out, (pts,), ids, "objective")[0, 0])
        else:
            # the row's sum is finite only if every value is (NaN and infinities propagate); a
            # finite overflow is told apart by the exact check, as in _evaluate
            total = np.add.reduce(out, axis=1)[0]
            if not math.isfinite(total) and not np.isfinite(out).all():
                out = self._nonfinite(out, (pts,), ids, "objective")
                total = np.add.reduce(out, axis=1)[0]
            f = float(total) / n  # ndarray.mean(axis=1): the same sum, divided by n
        if not m:
            return f, None
        g = self._evaluate(problem.constraints, (pts,), self._indices(None, m, "constraint"), "constraint", purpose, True)
        return f, g[0]

    def minimax(self, X: Any, Y: Any, idx: Any = None, *, purpose: str = "estimate") -> Array:
        """Values ``(k, b)`` of ``F_idx`` at row pairs ``(X[r], Y[r])``; a single row broadcasts."""
        self._require(("minimax",), "minimax")
        xs = _as_points(X, self.dim, "minimax x")
        ys = _as_points(Y, self.dim_y, "minimax y")
        if xs.shape[0] != ys.shape[0]:
            if xs.shape[0] == 1:
                xs = np.repeat(xs, ys.shape[0], axis=0)
            elif ys.shape[0] == 1:
                ys = np.repeat(ys, xs.shape[0], axis=0)
            else:
                raise ShapeError(
                    f"minimax: X has {xs.shape[0]} rows and Y has {ys.shape[0]}; they must match "
                    "(or one of them be a single row)"
                )
            xs.setflags(write=False)
            ys.setflags(write=False)
        ids = self._indices(idx, self.n, "sample")
        return self._evaluate(self._problem.values, (xs, ys), ids, "minimax", purpose, True)

    def constraint_gradient(self, x: Any, idx: Any = None, *, purpose: str = "gradient") -> Array:
        """White-box constraint gradients ``(b, d)`` (first-order baselines and linearisation)."""
        if not self.has_constraint_gradient:
            raise InvalidInputError("this problem provides no constraint gradients (HasConstraintGradient)")
        return self._white_box_gradient("constraint_gradient", "constraint_gradients", self.m, "constraint", x, idx, purpose)

    def gradient(self, x: Any, idx: Any = None, *, purpose: str = "gradient") -> Array:
        """White-box component gradients ``(b, d)`` (first-order baselines only)."""
        if not self.has_gradient:
            raise InvalidInputError("this problem provides no component gradients (HasGradient)")
        return self._white_box_gradient("gradient", "component_gradients", self.n, "component", x, idx, purpose)

    def _white_box_gradient(
        self, what: str, method: str, size: int, index_kind: str, x: Any, idx: Any, purpose: str
    ) -> Array:
        pts = _as_points(x, self.dim, what)
        if pts.shape[0] != 1:
            raise ShapeError(f"{what}: one point at a time")
        ids = self._indices(idx, size, index_kind)
        fn = getattr(self._problem, method)
        name = f"{type(self._problem).__name__}.{method}"
        return self._gradient_call(lambda i: fn(pts[0], i), ids, (len(ids), self.dim), purpose, name)

    def minimax_gradients(
        self, x: Any, y: Any, idx: Any = None, *, purpose: str = "gradient"
    ) -> tuple[Array, Array]:
        """White-box ``(grad_x, grad_y)`` of ``F_idx`` at ``(x, y)`` (first-order baselines only)."""
        if not self.has_minimax_gradient:
            raise InvalidInputError("this problem provides no gradients (HasMinimaxGradient)")
        xs = _as_points(x, self.dim, "minimax_gradients x")[0]
        ys = _as_points(y, self.dim_y, "minimax_gradients y")[0]
        ids = self._indices(idx, self.n, "sample")
        self._charge(len(ids), "gradient", purpose, True)
        self.user_calls += 1
        t0 = time.perf_counter()
        pair = self._problem.minimax_gradients(xs, ys, ids)
        self.seconds += time.perf_counter() - t0
        name = f"{type(self._problem).__name__}.minimax_gradients"
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise InvalidInputError(f"{name} must return a pair (grad_x, grad_y), got {type(pair).__name__}")
        gx = as_values(pair[0], len(ids), self.dim, f"{name} (grad_x)", fresh=self._fresh)
        gy = as_values(pair[1], len(ids), self.dim_y, f"{name} (grad_y)", fresh=self._fresh)
        _finite_gradient(gx, f"{name} (grad_x)", ids)
        _finite_gradient(gy, f"{name} (grad_y)", ids)
        return gx, gy

    def sample(
        self, size: int, rng: np.random.Generator, *, population: str = "components", replace: bool = False
    ) -> IntArray:
        """Draw a mini-batch of indices (``rng.choice``), uniformly, from the components or constraints.

        The batch is read-only and known to be valid, so passing it back to the oracle skips the
        index checks (the fast path of every stochastic solver) while it is the last batch drawn from
        its population; an older one is checked (and copied) as any indices are, with the same values.
        Drawing is not an evaluation.
        """
        components = population == "components"
        if components:
            total = self.n
        elif population == "constraints":
            total = self.m
        else:
            raise InvalidInputError(f"population must be 'components' or 'constraints', got {population!r}")
        if not replace and size > total:
            raise InvalidInputError(
                f"cannot draw {size} distinct {population} out of {total}; use a smaller batch or replace=True"
            )
        ids = rng.choice(total, size=size, replace=replace)
        if type(ids) is not _NDARRAY or ids.dtype is not _INTP:
            ids = np.asarray(ids, dtype=np.intp)
        ids.setflags(write=False)
        if components:
            self._drawn_components = ids
        else:
            self._drawn_constraints = ids
        return ids

    def linear_constraints(self) -> tuple[Array, Array]:
        """White-box ``(D, e)`` with ``D x <= e`` (copies), for projection / LMO baselines.

        Structure, not evaluations: not counted. Raises unless the problem declares white-box
        (``black_box_constraints = False``) linear constraints.
        """
        if not self.has_linear_constraints:
            raise InvalidInputError(
                "this problem does not expose white-box linear constraints (HasLinearConstraints with "
                "black_box_constraints=False); solvers that project onto the feasible set cannot run on it"
            )
        D, e = self._problem.linear_constraints()
        return np.array(D, dtype=np.float64, copy=True), np.array(e, dtype=np.float64, copy=True)

    def cvxpy_constraints(self, x: Any) -> list[Any]:
        """White-box convex constraints as cvxpy expressions of the cvxpy Variable ``x``."""
        if self.has_cvxpy_constraints:
            return list(self._problem.cvxpy_constraints(x))
        if self.has_linear_constraints:
            D, e = self.linear_constraints()
            return [D @ x <= e]
        raise InvalidInputError(
            "this problem exposes no white-box convex constraints (HasCvxpyConstraints or "
            "HasLinearConstraints with black_box_constraints=False)"
        )

    # ------------------------------------------------------------------ internals
    def _gradient_call(
        self, fn: Callable[[IntArray], Any], ids: IntArray, shape: tuple[int, int], purpose: str, name: str
    ) -> Array:
        self._charge(len(ids), "gradient", purpose, True)
        self.user_calls += 1
        t0 = time.perf_counter()
        try:
            out = as_values(fn(ids), shape[0], shape[1], f"the gradient function {name}", fresh=self._fresh)
        finally:
            self.seconds += time.perf_counter() - t0
        _finite_gradient(out, name, ids)
        return out

    def _require(self, kinds: tuple[str, ...], what: str) -> None:
        if self.kind not in kinds:
            raise InvalidInputError(
                f"oracle.{what}() is not available for a {self.kind!r} problem "
                f"(it needs one of {kinds})"
            )

    def _indices(self, idx: Any, size: int, what: str) -> IntArray:
        if idx is None:
            full = self._all.get(size)
            if full is None:
                full = np.arange(size, dtype=np.intp)
                full.setflags(write=False)
                if size <= _CACHED_RANGE:  # a larger range is built per call, not held for the run
                    self._all[size] = full
            return full
        # the last batch sample() drew from a population no larger than size: read-only and valid here
        if (idx is self._drawn_components and self.n <= size) or (idx is self._drawn_constraints and self.m <= size):
            trusted: IntArray = idx
            return trusted
        ids = np.asarray(idx)
        if ids.ndim != 1 or ids.dtype.kind not in "iu" or ids.size == 0:
            if ids.ndim == 0:
                return self._indices(ids.reshape(1), size, what)
            if ids.ndim == 1 and ids.size == 0:
                raise ShapeError(f"empty batch of {what} indices: a batch needs at least one index")
            raise ShapeError(f"{what} indices must be a 1-D integer array, got {ids.dtype} of shape {ids.shape}")
        out = ids.astype(np.intp, copy=True)
        # one reduction checks both ends: negative indices are huge when read as unsigned
        if int(out.view(np.uintp).max()) >= size:
            bad = int(out[(out < 0) | (out >= size)][0])
            raise ShapeError(f"{what} index out of range: got {bad}, valid range is 0..{size - 1}")
        out.setflags(write=False)
        return out

    def _charge(self, count: int, kind: str, purpose: str, budgeted: bool) -> None:
        """Count ``count`` evaluations of ``kind`` under ``purpose``; budgeted ones are refused first
        (:class:`BudgetExhausted`) unless they fit in ``max_calls``."""
        if budgeted:
            if self.max_calls is not None and self.calls + count > self.max_calls:
                raise BudgetExhausted(count, self.calls, self.max_calls)
            self.calls += count
            pair = (kind, purpose)
            if pair == self._hot:  # the pair counted last: one int addition
                self._hot_count += count
            else:  # another pair: into the Counters (keys keep their order of first use)
                self._count_budgeted(pair, count)
        else:
            self.calls_by_purpose[purpose] += count

    def _n_tasks(self, blocks: int) -> int:
        if self._chunks is not None:
            return min(blocks, int(self._chunks))
        workers = getattr(self.executor, "_max_workers", None) or 2
        return max(1, min(blocks, 2 * int(workers)))

    def _function_name(self, fn: Callable[..., Any], kind: str) -> str:
        method = getattr(fn, "__name__", "function")
        key = (kind, method)
        name = self._names.get(key)
        if name is None:
            name = self._names[key] = f"the {kind} function ({type(self._problem).__name__}.{method})"
        return name

    def _evaluate(
        self,
        fn: Callable[..., Any],
        arrays: tuple[Array, ...],
        ids: IntArray,
        kind: str,
        purpose: str,
        budgeted: bool,
        label: str = "",
    ) -> Array:
        """``fn`` on the batch, counted as ``kind``; ``label`` names the values in messages (default: ``kind``)."""
        k, b = arrays[0].shape[0], ids.shape[0]
        self._charge(k * b, kind, purpose, budgeted)
        what = label or kind
        B = self.block_rows
        self.user_calls += -(-k // B)  # one call per block of at most B rows
        if k <= B:  # one block: one call (the hot path)
            t0 = _clock()
            try:
                raw = fn(*arrays, ids)
            finally:
                self.seconds += _clock() - t0
            out = _result(raw, k, b, self, fn, what)
        else:
            t0 = _clock()
            try:
                out = self._evaluate_blocks(fn, arrays, ids, what)
            finally:
                self.seconds += _clock() - t0
        if not _all_finite(out):
            out = self._nonfinite(out, arrays, ids, what)
        return out

    def _evaluate_blocks(self, fn: Callable[..., Any], arrays: tuple[Array, ...], ids: IntArray, kind: str) -> Array:
        """Rows ``[0, B), [B, 2B), ...`` one call each, in-process or grouped into executor tasks."""
        k, b, B = arrays[0].shape[0], ids.shape[0], self.block_rows
        name = self._function_name(fn, kind)
        edges = [*range(0, k, B), k]
        out = np.empty((k, b))
        if self.executor is None:
            for lo, hi in itertools.pairwise(edges):
                # copied into out: the function's own array is never kept
                out[lo:hi] = checked_values(fn(*(_block(a, lo, hi) for a in arrays), ids), hi - lo, b, name)
            return out
        nblocks = len(edges) - 1
        cuts = np.linspace(0, nblocks, self._n_tasks(nblocks) + 1).astype(int)
        tasks = [
            [(edges[i], edges[i + 1]) for i in range(int(c0), int(c1))] for c0, c1 in itertools.pairwise(cuts) if c1 > c0
        ]
        shipped = ship(fn, self.executor)  # the problem's arrays arrive aligned (BLAS-eligible) on any transport
        try:
            futures = [
                self.executor.submit(_call_blocks, shipped, [[_block(a, lo, hi) for a in arrays] for lo, hi in task], ids)
                for task in tasks
            ]
            for fut, task in zip(futures, tasks):
                for raw, (lo, hi) in zip(fut.result(), task):
                    out[lo:hi] = checked_values(raw, hi - lo, b, name)
        except (pickle.PicklingError, AttributeError, TypeError) as exc:
            if "pickle" not in str(exc).lower():
                raise
            raise InvalidInputError(
                f"the {kind} function could not be sent to the executor's workers ({exc}); with a process "
                "pool the problem must be picklable (module-level functions and classes, no lambdas or "
                "closures), or use a thread pool or dask's executor (cloudpickle)"
            ) from exc
        return out

    def _nonfinite(self, out: Array, arrays: tuple[Array, ...], ids: IntArray, kind: str) -> Array:
        if self.nonfinite == "inf":
            bad = ~np.isfinite(out)
            self.nonfinite_values += int(bad.sum())
            out[bad] = np.inf
            return out
        r, s = (int(v) for v in np.argwhere(~np.isfinite(out))[0])
        point = ", ".join(np.array2string(a[r], precision=6, threshold=8) for a in arrays)
        raise NonFiniteValueError(
            f"the {kind} function returned {out[r, s]} for {kind} index {int(ids[s])} at the point "
            f"{point}; fix the function, or pass nonfinite='inf' to treat such values as +inf"
        )

    def snapshot(self) -> dict[str, Any]:
        """Counters as plain data (for results and checkpoints)."""
        return {
            "calls": self.calls,
            "user_calls": self.user_calls,
            "calls_by_kind": dict(self.calls_by_kind),
            "calls_by_purpose": dict(self.calls_by_purpose),
            "nonfinite_values": self.nonfinite_values,
        }

    def restore(self, counters: Mapping[str, Any]) -> None:
        """Restore counters saved by :meth:`snapshot` (checkpoint resume)."""
        self.calls = int(counters["calls"])
        self.user_calls = int(counters.get("user_calls", 0))  # absent from checkpoints of older versions
        self.calls_by_kind = Counter({str(k): int(v) for k, v in counters["calls_by_kind"].items()})
        self.calls_by_purpose = Counter({str(k): int(v) for k, v in counters["calls_by_purpose"].items()})
        self.nonfinite_values = int(counters.get("nonfinite_values", 0))


class MonitorOracle:
    """Evaluations for measures and traces, counted under ``"monitor"`` (or under ``purpose``).

    They are not charged to the oracle's ``max_calls``; the run loop pays them from the run's budget
    unless the problem is ``monitor_free`` (:class:`zoframe.observers.trace.MonitorBudget`). The
    stationarity certificate (:mod:`zoframe.certificate`) evaluates through one with
    ``purpose="certify"``.
    """

    def __init__(self, parent: CountingOracle, purpose: str = "monitor") -> None:
        self._p = parent
        self.purpose = purpose

    def objective(self, X: Any, idx: Any = None) -> Array:
        p = self._p
        p._require(("finite_sum", "constrained", "composite"), "objective")
        pts = _as_points(X, p.dim, "objective")
        return p._evaluate(p._problem.components, (pts,), p._indices(idx, p.n, "component"), "objective", self.purpose, False)

    def constraints(self, X: Any, idx: Any = None) -> Array:
        p = self._p
        p._require(("constrained",), "constraints")
        pts = _as_points(X, p.dim, "constraints")
        return p._evaluate(p._problem.constraints, (pts,), p._indices(idx, p.m, "constraint"), "constraint", self.purpose, False)

    def equalities(self, X: Any, idx: Any = None) -> Array:
        p = self._p
        p._require_equalities()
        pts = _as_points(X, p.dim, "equalities")
        return p._evaluate(p._problem.equalities, (pts,), p._indices(idx, p.m_eq, "equality"), "equality", self.purpose, False)

    def minimax(self, X: Any, Y: Any, idx: Any = None) -> Array:
        p = self._p
        p._require(("minimax",), "minimax")
        xs = _as_points(X, p.dim, "minimax x")
        ys = _as_points(Y, p.dim_y, "minimax y")
        return p._evaluate(p._problem.values, (xs, ys), p._indices(idx, p.n, "sample"), "minimax", self.purpose, False)
