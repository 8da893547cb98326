"""Build problems from plain numpy callables.

Four builders, one per problem kind. Each accepts either a *vectorized* callable (a matrix of
points in, a matrix of values out; used as such, one call per batch) or, with
``vectorized=False``, a scalar callable that zoframe applies point by point::

    import numpy as np, zoframe

    # one smooth function of x, vectorized: X (k, d) -> (k,)
    rosen = zoframe.FiniteSum(lambda X: ((1 - X[:, :-1])**2 + 100 * (X[:, 1:] - X[:, :-1]**2)**2).sum(1),
                              x0=np.zeros(5))

    # a finite sum of n components: (X (k, d), idx (b,)) -> (k, b)
    A, y = np.random.default_rng(0).normal(size=(200, 10)), np.ones(200)
    ls = zoframe.FiniteSum(lambda X, idx: (X @ A[idx].T - y[idx])**2, n=200, x0=np.zeros(10))

Calling convention of the callables (``k`` points, ``b`` indices):

=============  ====================================  =====================================
builder        vectorized=True                       vectorized=False
=============  ====================================  =====================================
FiniteSum      ``f(X) -> (k,)`` if n == 1,           ``f(x) -> float`` if n == 1,
               ``f(X, idx) -> (k, b)`` otherwise     ``f(x, i) -> float`` otherwise
Constrained    objective as above; constraints       constraints ``g(x, j) -> float``
               ``g(X, idx) -> (k, b)``
Minimax        ``F(X, Y) -> (k,)`` / ``F(X, Y, idx)``  ``F(x, y) -> float`` / ``F(x, y, i)``
Composite      objective as FiniteSum                 objective as FiniteSum
=============  ====================================  =====================================

Results are checked (shape, real values) and handed on as the function returned them; the
counting oracle copies them, as it copies any problem's results, so that a function may keep the
array it returned and write to it later. ``fresh_results=True`` declares that every call of the
problem's vectorized functions returns a new array that the function does not keep (nor a view of
it): the oracle then keeps the results without the copy. Most numpy expressions
(``(X @ A[idx].T - y[idx])**2``) make a new array per call; a function that returns a cached or
preallocated array, one of its attributes or a view of one must not declare it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
import inspect
import math
from typing import Any, ClassVar

import numpy as np

from zoframe.errors import InvalidInputError, ShapeError
from zoframe.measures import FULL_PASS_BLOCK, max_violation_full
from zoframe.oracle import MonitorOracle, as_values, checked_values
from zoframe.protocols import Array, ConvexSet, IntArray, Penalty
from zoframe.sets import Box

__all__ = ["Composite", "Constrained", "FiniteSum", "HalfSquaredResiduals", "Minimax", "constrained_measures"]


def _vector(x: Any, name: str) -> Array:
    arr = np.array(x, dtype=np.float64, copy=True)
    if arr.ndim != 1 or arr.size == 0:
        raise ShapeError(f"{name} must be a non-empty 1-D array, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise InvalidInputError(f"{name} contains NaN or infinity")
    arr.setflags(write=False)
    return arr


def _flag(value: Any, name: str) -> None:
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidInputError(f"{name} must be True or False, got {value!r}")


def _box(bounds: Any, dim: int, feasible_set: ConvexSet | None) -> ConvexSet | None:
    """The feasible set of a builder: ``bounds=(lower, upper)`` as a :class:`~zoframe.sets.Box`, or ``feasible_set``."""
    if bounds is None:
        return feasible_set
    if feasible_set is not None:
        raise InvalidInputError("give either bounds=(lower, upper) or feasible_set=, not both")
    if not (isinstance(bounds, (tuple, list)) and len(bounds) == 2):
        raise InvalidInputError(
            "bounds must be a pair (lower, upper) of scalars or length-d arrays (use -inf / inf for a free side), "
            f"got {bounds!r}"
        )
    lo, hi = (np.broadcast_to(np.asarray(free if v is None else v, dtype=np.float64), (dim,)).copy()
              for v, free in zip(bounds, (-np.inf, np.inf)))  # None: a free side (-inf below, +inf above)
    if np.isnan(lo).any() or np.isnan(hi).any():
        raise InvalidInputError("bounds contain NaN; use -inf / inf for a free side")
    lo.setflags(write=False)
    hi.setflags(write=False)
    return Box(dim, lo, hi)


def _positive(v: int, name: str) -> int:
    if not isinstance(v, (int, np.integer)) or v < 1:
        raise InvalidInputError(f"{name} must be a positive integer, got {v!r}")
    return int(v)


#: the calls zoframe makes, by role and ``vectorized``: (form when n == 1, form when n > 1)
_FORMS: dict[str, dict[bool, tuple[str, str]]] = {
    "fun": {True: ("fun(X) -> (k,)", "fun(X, idx) -> (k, b)"), False: ("fun(x) -> float", "fun(x, i) -> float")},
    "objective": {
        True: ("objective(X) -> (k,)", "objective(X, idx) -> (k, b)"),
        False: ("objective(x) -> float", "objective(x, i) -> float"),
    },
    "constraints_fun": {
        True: ("constraints_fun(X, idx) -> (k, b)", "constraints_fun(X, idx) -> (k, b)"),
        False: ("constraints_fun(x, j) -> float", "constraints_fun(x, j) -> float"),
    },
    "equality_fun": {
        True: ("equality_fun(X, idx) -> (k, b)", "equality_fun(X, idx) -> (k, b)"),
        False: ("equality_fun(x, l) -> float", "equality_fun(x, l) -> float"),
    },
    "minimax": {True: ("fun(X, Y) -> (k,)", "fun(X, Y, idx) -> (k, b)"), False: ("fun(x, y) -> float", "fun(x, y, i) -> float")},
    "residuals": {
        True: ("residuals(X) -> (k,)", "residuals(X, idx) -> (k, b)"),
        False: ("residuals(x) -> float", "residuals(x, i) -> float"),
    },
}


def _check_call(fn: Any, name: str, forms: Sequence[str], n: int, vectorized: bool) -> None:
    """Check, when the problem is built, that ``fn`` accepts the call zoframe will make.

    ``forms`` are the calls for ``n == 1`` and ``n > 1`` (the second has the index argument; for
    constraints both have it). Callables without a readable signature (builtins, ufuncs, some
    extension types) are accepted as they are; ``*args``, defaults, callable objects and
    ``functools.partial`` are honoured by ``inspect.Signature.bind``.
    """
    if not callable(fn):
        raise InvalidInputError(f"{name} must be callable, got {type(fn).__name__}")
    form = forms[0] if n == 1 else forms[1]
    nargs = form.partition(" -> ")[0].count(",") + 1
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # no introspectable signature: the first call will tell
        return
    try:
        sig.bind(*([None] * nargs))
    except TypeError:
        kind = "vectorized" if vectorized else "scalar, vectorized=False"
        if forms[0] == forms[1]:
            why, fix = f"{kind}; the last argument says which constraints", "give it that form"
        elif n == 1:
            why = f"{kind}; n = 1: a single function, no index argument"
            fix = f"give it that form, or pass n=<number of components> for a finite sum {forms[1]}"
        else:
            why = f"{kind}; n = {n} components, the last argument says which"
            fix = f"give it that form, or leave n = 1 for a single function {forms[0]}"
        raise InvalidInputError(
            f"{name} is called as {form} ({why}), but its signature is {_plain(sig)}: {fix}."
        ) from None


def _plain(sig: inspect.Signature) -> str:
    """``sig`` as the user wrote its parameters, without annotations (``(X, idx=None, *args)``)."""
    parts: list[str] = []
    params = list(sig.parameters.values())
    for i, p in enumerate(params):
        if p.kind is p.KEYWORD_ONLY and (i == 0 or params[i - 1].kind not in (p.KEYWORD_ONLY, p.VAR_POSITIONAL)):
            parts.append("*")
        text = ("*" if p.kind is p.VAR_POSITIONAL else "**" if p.kind is p.VAR_KEYWORD else "") + p.name
        if p.default is not p.empty:
            text += f"={p.default!r}"
        parts.append(text)
        if p.kind is p.POSITIONAL_ONLY and (i + 1 == len(params) or params[i + 1].kind is not p.POSITIONAL_ONLY):
            parts.append("/")
    return "(" + ", ".join(parts) + ")"


def _name(fn: Callable[..., Any], role: str) -> str:
    return f"the {role} function {getattr(fn, '__qualname__', type(fn).__name__)!r}"


def _scalar(v: Any, fn: Callable[..., Any], role: str) -> float:
    """One value of a scalar (``vectorized=False``) user function, checked like a batch of one."""
    if isinstance(v, (float, int, np.floating, np.integer)) and not isinstance(v, (bool, np.bool_)):
        try:
            return float(v)
        except OverflowError:  # an int beyond the float range: infinite, then the non-finite policy applies
            return math.inf if v > 0 else -math.inf
    if isinstance(v, np.ndarray) and v.ndim == 0:
        v = v.reshape(1)
    hint = " (a scalar function returns one real number per call)"
    return float(as_values(v, 1, 1, _name(fn, role) + hint)[0, 0])


def _index_error(fn: Callable[..., Any], role: str, exc: IndexError, idx: IntArray, count: int, what: str) -> InvalidInputError:
    """The error for a user function that raised IndexError on indices the problem declares valid."""
    top = int(np.max(idx)) if len(idx) else 0
    symbol = {"constraint": "m", "equality constraint": "m_eq"}.get(what, "n")
    return InvalidInputError(
        f"{_name(fn, role)} raised IndexError ({exc}) when asked for {what} indices up to {top}; the problem "
        f"declares {symbol}={count} {what}s, so zoframe asks for indices 0..{count - 1}. If the function computes "
        f"fewer than {count} {what}s, declare the number it computes ({symbol}=...); if it computes {count}, "
        f"check how it selects the indices it is given."
    )


def _vectorized_values(
    fn: Callable[..., Any], v: Any, k: int, b: int, role: str, *, per_point: bool = False
) -> Array:
    """A vectorized user function's result, checked by :func:`~zoframe.oracle.checked_values` and handed
    on (the oracle copies it unless the problem declares ``fresh_results``); a single number for a
    batch is refused with the hint that a function of one point needs ``vectorized=False``."""
    if isinstance(v, (int, float, np.generic)) or (isinstance(v, np.ndarray) and v.ndim == 0):
        form, here = ("(k,)", f"({k},)") if per_point else ("(k, b)", f"({k}, {b})")
        raise ShapeError(
            f"{_name(fn, role)} returned shape () (one number) for a batch of {k} point(s); a vectorized "
            f"function gets the points as the rows of a (k, d) array and must return an array of shape {form} "
            f"(here {here}). If your function takes one point "
            "x of shape (d,) and returns a float, build the problem with vectorized=False (zoframe then calls "
            "it once per point), or vectorize it (e.g. sum over axis=1)."
        )
    return checked_values(v, k, 1 if per_point else b, _name(fn, role), per_point=per_point)


def _eval_batched(
    fn: Callable[..., Any],
    arrays: Sequence[Array],
    idx: IntArray,
    n: int,
    vectorized: bool,
    role: str = "objective",
    what: str = "component",
    count: int | None = None,
) -> Array:
    """Evaluate a user callable on a batch; its result is checked by :func:`_vectorized_values`.

    ``n > 1`` passes the indices to ``fn``; ``count`` (default ``n``) is the declared number of
    indexed items (components, or constraints with ``what="constraint"``): an IndexError raised by
    the user's function becomes an :class:`InvalidInputError` naming it.
    """
    k = arrays[0].shape[0]
    if vectorized:
        if n == 1:  # f(X) -> (k,): one column, repeated for every (necessarily 0) index
            out = _vectorized_values(fn, fn(*arrays), k, 1, role, per_point=True)
            return out if len(idx) == 1 else out[:, np.zeros(len(idx), dtype=np.intp)]
        try:
            v = fn(*arrays, idx)
        except IndexError as exc:
            raise _index_error(fn, role, exc, idx, n if count is None else count, what) from exc
        return _vectorized_values(fn, v, k, len(idx), role)
    out = np.empty((k, len(idx)))
    try:
        for r in range(k):  # the user's function is scalar: one call per point and index
            row = [a[r] for a in arrays]
            for s, i in enumerate(idx):
                out[r, s] = _scalar(fn(*row) if n == 1 else fn(*row, int(i)), fn, role)
    except IndexError as exc:
        raise _index_error(fn, role, exc, idx, n if count is None else count, what) from exc
    return out


@dataclass(frozen=True)
class _Residuals:
    """A builder's ``residuals=`` function as the batched method of :class:`~zoframe.protocols.HasResiduals`:
    ``residuals(X, idx) -> (k, b)``, called with ``fun``'s convention (``n``, ``vectorized``)."""

    fun: Callable[..., Any]
    n: int
    vectorized: bool
    #: the method's name in the oracle's messages ("the residual function (FiniteSum.residuals)")
    __name__: ClassVar[str] = "residuals"

    def __call__(self, X: Array, idx: IntArray) -> Array:
        return _eval_batched(self.fun, (X,), idx, self.n, self.vectorized, "residuals")


def _residual_method(
    fn: Any, n: int, vectorized: bool, components: Callable[[Array, IntArray], Array], x0: Array
) -> _Residuals | None:
    """``residuals=`` of a builder, checked and wrapped (:class:`_Residuals`); ``None`` stays ``None``.

    The signature is checked as ``fun``'s is; then the residuals and the components are evaluated at
    ``x0`` (all ``n``, once, when the problem is built) and every finite pair must agree,
    ``r_i(x0)^2 = l_i(x0)`` to a relative ``1e-8``: a residual of a different scale (``l_i = r_i^2 / 2``, say)
    would make a least-squares solver minimise another function than the problem's.
    """
    if fn is None:
        return None
    if isinstance(fn, _Residuals):  # already wrapped (dataclasses.replace of a built problem)
        fn = fn.fun
    _check_call(fn, "residuals", _FORMS["residuals"][vectorized], n, vectorized)
    wrapped = _Residuals(fn, n, bool(vectorized))
    ids = np.arange(n, dtype=np.intp)
    ids.setflags(write=False)
    x = x0.reshape(1, -1)
    l_val = np.asarray(components(x, ids), dtype=np.float64).reshape(-1)
    r_val = np.asarray(wrapped(x, ids), dtype=np.float64).reshape(-1)
    sq = r_val * r_val
    both = np.isfinite(l_val) & np.isfinite(sq)
    tol = 1e-8 * np.maximum(np.abs(l_val), sq) + 1e-12 * max(1.0, float(np.abs(l_val[both]).max(initial=0.0)))
    bad = np.flatnonzero(both & (np.abs(sq - l_val) > tol))
    if bad.size:
        i = int(bad[0])
        raise InvalidInputError(
            f"residuals must satisfy l_i(x) = r_i(x)^2 for every component, but at x0 component {i} has "
            f"fun = {float(l_val[i])!r} and residuals = {float(r_val[i])!r} (squared: {float(sq[i])!r}); {bad.size} of {n} components "
            "disagree. Give residuals r with fun = r**2 (the objective is the mean of the squares), or leave "
            "residuals=None"
        )
    return wrapped


def constrained_measures(
    x: Array, monitor: MonitorOracle, violation_tol: float, *, block: int = FULL_PASS_BLOCK
) -> dict[str, float]:
    """Objective and violation measures of a constrained problem at ``x`` (a full pass over all m).

    ``fun`` (the objective), ``max_violation`` and ``mean_violation`` (of ``max(f_j, 0)``) and
    ``frac_violated`` (the fraction of constraints above ``violation_tol``).

    Up to ``block`` constraints they come from one monitor call over all ``m``; above, from
    :func:`zoframe.measures.max_violation_full` in blocks of ``block`` (memory ``O(block)`` whatever
    ``m`` is; ``mean_violation = sum_violation / m``, equal to the one-call mean up to the order of
    summation). Either way the monitor counts ``m`` constraint evaluations (and ``n`` objective ones),
    and a monitor charged to the run's budget refuses the pass before it runs.

    Equality constraints ``h_l(x) = 0`` (``m_eq > 0``, one more monitor call of ``m_eq``
    evaluations) count with their violation ``|h_l(x)|``: the max, the mean and the fraction are
    then over all ``m + m_eq`` constraints.
    """
    m, m_eq = monitor._p.m, monitor._p.m_eq
    if m == 0:  # equality constraints alone
        max_v, sum_v, count = 0.0, 0.0, 0
    elif m <= block:
        g = monitor.constraints(x)[0]
        viol = np.maximum(g, 0.0)
        max_v, sum_v, count = float(viol.max()), float(viol.sum()), int(np.count_nonzero(g > violation_tol))
    else:
        full = max_violation_full(monitor, x, block=block, tol=violation_tol, purpose="monitor")
        max_v, sum_v, count = full.max_violation, full.sum_violation, full.violated
    if m_eq:
        h = np.abs(monitor.equalities(x)[0])
        max_v, sum_v, count = max(max_v, float(h.max())), sum_v + float(h.sum()), count + int(np.count_nonzero(h > violation_tol))
    mean_v, frac = sum_v / (m + m_eq), count / (m + m_eq)
    return {"fun": float(monitor.objective(x).mean()), "max_violation": max_v, "mean_violation": mean_v,
            "frac_violated": frac}  # fmt: skip


@dataclass(frozen=True, eq=False)
class FiniteSum:
    """``min_x (1/n) sum_i l_i(x)``, optionally over ``feasible_set`` or the box ``bounds=(lower, upper)``.

    Calling convention of ``fun`` (checked against its signature when the problem is built):

    - ``n == 1`` (the default): ``fun(X) -> (k,)``, one value per row of ``X`` (``k`` points, ``(k, d)``);
    - ``n > 1``: ``fun(X, idx) -> (k, b)``, component ``idx[s]`` at point ``X[r]`` in entry ``[r, s]``;
    - ``vectorized=False``: ``fun(x) -> float`` (``n == 1``) or ``fun(x, i) -> float`` (``n > 1``).

    ``residuals=r`` (optional) gives least-squares components ``l_i(x) = r_i(x)^2``: ``r`` follows
    ``fun``'s convention, and ``r^2`` must agree with ``fun`` at ``x0`` (checked when the problem is
    built). Solvers that model residuals (``dfols``) read them through ``oracle.residuals``; the
    attribute ``residuals`` is then the batched ``residuals(X, idx) -> (k, b)`` of
    :class:`~zoframe.protocols.HasResiduals`.
    """

    kind: ClassVar[str] = "finite_sum"
    fun: Callable[..., Any]
    x0: Array
    n: int = 1
    vectorized: bool = True
    feasible_set: ConvexSet | None = None
    name: str = "finite-sum"
    bounds: tuple[Any, Any] | None = None
    fresh_results: bool = False
    residuals: Callable[..., Any] | None = None
    dim: int = field(init=False)

    def __post_init__(self) -> None:
        _flag(self.fresh_results, "fresh_results")
        object.__setattr__(self, "x0", _vector(self.x0, "x0"))
        object.__setattr__(self, "n", _positive(self.n, "n"))
        object.__setattr__(self, "dim", int(self.x0.shape[0]))
        object.__setattr__(self, "feasible_set", _box(self.bounds, self.dim, self.feasible_set))
        _check_call(self.fun, "fun", _FORMS["fun"][self.vectorized], self.n, self.vectorized)
        object.__setattr__(
            self, "residuals", _residual_method(self.residuals, self.n, self.vectorized, self.components, self.x0)
        )

    def components(self, X: Array, idx: IntArray) -> Array:
        return _eval_batched(self.fun, (X,), idx, self.n, self.vectorized)

    def measures(self, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
        return {"fun": float(monitor.objective(outputs["x"]).mean())}


@dataclass(frozen=True, eq=False)
class Constrained:
    """``min_x (1/n) sum_i l_i(x)`` s.t. ``g_j(x) <= 0`` for ``j < m``.

    ``objective`` follows :class:`FiniteSum`'s convention (``objective(X)`` when ``n == 1``,
    ``objective(X, idx)`` otherwise); ``constraints_fun(X, idx) -> (k, b)`` always takes the
    constraint indices (``constraints_fun(x, j) -> float`` with ``vectorized=False``). Both
    signatures are checked when the problem is built.

    ``convex`` and ``black_box`` describe the constraints; ``violation_tol`` is the tolerance under
    which a point counts as feasible in traces and in ``Result.x_best``. Simple bounds
    ``bounds=(lower, upper)`` (scalars or length-``d`` arrays, ``-inf`` / ``inf`` or ``None`` for a free side)
    are not constraints: they become the problem's ``feasible_set`` (a :class:`~zoframe.sets.Box`),
    which the constrained solvers keep by projection (every iterate, every evaluated point inside).

    Equality constraints ``h_l(x) = 0`` for ``l < m_eq``: ``equality_fun(X, idx) -> (k, b)`` with the
    equality indices (``equality_fun(x, l) -> float`` with ``vectorized=False``), checked like
    ``constraints_fun``; their violation is ``|h_l(x)|``. The solvers that take them are ``adszog`` and
    ``dszog`` with ``steps="auto"`` (the working-set SQP), ``slsqp-fd``, ``trust-constr-fd``, ``cobyla``
    and ``cobyqa``; the others refuse such a problem. Equalities alone: ``constraints_fun=None`` and
    ``m=0`` (with ``m_eq >= 1``), e.g. ``Constrained(f, None, 0, x0, equality_fun=h, m_eq=2)``.
    """

    kind: ClassVar[str] = "constrained"
    objective: Callable[..., Any]
    constraints_fun: Callable[..., Any] | None
    m: int
    x0: Array
    n: int = 1
    vectorized: bool = True
    convex_constraints: bool = False
    black_box_constraints: bool = True
    violation_tol: float = 1e-3
    name: str = "constrained"
    bounds: tuple[Any, Any] | None = None
    feasible_set: ConvexSet | None = None
    fresh_results: bool = False
    equality_fun: Callable[..., Any] | None = None
    m_eq: int = 0
    dim: int = field(init=False)

    def __post_init__(self) -> None:
        _flag(self.fresh_results, "fresh_results")
        object.__setattr__(self, "x0", _vector(self.x0, "x0"))
        object.__setattr__(self, "n", _positive(self.n, "n"))
        if self.constraints_fun is None:  # equality constraints alone
            if self.equality_fun is None:
                raise InvalidInputError(
                    "constraints_fun=None needs equality constraints (equality_fun=h, m_eq >= 1); a problem with no "
                    "constraint at all is a FiniteSum (zoframe.FiniteSum(fun, x0, bounds=...))"
                )
            if self.m != 0:
                raise InvalidInputError(
                    f"constraints_fun=None (equality constraints alone) needs m=0 inequality constraints, got m={self.m!r}"
                )
        else:
            object.__setattr__(self, "m", _positive(self.m, "m (number of constraints)"))
        if self.equality_fun is None and self.m_eq != 0:
            raise InvalidInputError(
                f"m_eq={self.m_eq!r} equality constraints declared but no equality_fun given: pass "
                "equality_fun=h with h(X, idx) -> (k, b), or leave m_eq = 0"
            )
        if self.equality_fun is not None:
            object.__setattr__(self, "m_eq", _positive(self.m_eq, "m_eq (number of equality constraints)"))
            _check_call(self.equality_fun, "equality_fun", _FORMS["equality_fun"][self.vectorized], 2, self.vectorized)
        object.__setattr__(self, "dim", int(self.x0.shape[0]))
        _check_call(self.objective, "objective", _FORMS["objective"][self.vectorized], self.n, self.vectorized)
        if self.constraints_fun is not None:
            _check_call(self.constraints_fun, "constraints_fun", _FORMS["constraints_fun"][self.vectorized], 2, self.vectorized)
        object.__setattr__(self, "feasible_set", _box(self.bounds, self.dim, self.feasible_set))

    def components(self, X: Array, idx: IntArray) -> Array:
        return _eval_batched(self.objective, (X,), idx, self.n, self.vectorized)

    def constraints(self, X: Array, idx: IntArray) -> Array:
        if self.constraints_fun is None:  # no inequality constraint (m = 0): no values
            if len(idx):
                raise InvalidInputError(f"this problem has no inequality constraints (m = 0); asked for indices {idx[:5]!r}")
            return np.zeros((X.shape[0], 0))
        if self.vectorized:
            try:
                v = self.constraints_fun(X, idx)
            except IndexError as exc:
                raise _index_error(self.constraints_fun, "constraints", exc, idx, self.m, "constraint") from exc
            return _vectorized_values(self.constraints_fun, v, X.shape[0], len(idx), "constraints")
        # n=max(m, 2): constraint functions always take the index j, even when m == 1
        return _eval_batched(self.constraints_fun, (X,), idx, max(self.m, 2), False, "constraints", "constraint", self.m)

    def equalities(self, X: Array, idx: IntArray) -> Array:
        fn = self.equality_fun
        if fn is None:
            raise InvalidInputError("this problem has no equality constraints (equality_fun=None, m_eq = 0)")
        if self.vectorized:
            try:
                v = fn(X, idx)
            except IndexError as exc:
                raise _index_error(fn, "equality", exc, idx, self.m_eq, "equality constraint") from exc
            return _vectorized_values(fn, v, X.shape[0], len(idx), "equality")
        return _eval_batched(fn, (X,), idx, max(self.m_eq, 2), False, "equality", "equality constraint", self.m_eq)

    def measures(self, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
        return constrained_measures(outputs["x"], monitor, self.violation_tol)


@dataclass(frozen=True, eq=False)
class Minimax:
    """``min_x max_{y in y_set} (1/n) sum_i F_i(x, y)``; ``y_set=None`` means all of R^d_y.

    ``fun(X, Y) -> (k,)`` when ``n == 1``, ``fun(X, Y, idx) -> (k, b)`` otherwise (rows of ``X`` and
    ``Y`` paired); ``fun(x, y)`` / ``fun(x, y, i) -> float`` with ``vectorized=False``. Checked
    against the signature when the problem is built.
    """

    kind: ClassVar[str] = "minimax"
    fun: Callable[..., Any]
    x0: Array
    y0: Array
    y_set: ConvexSet | None = None
    n: int = 1
    vectorized: bool = True
    name: str = "minimax"
    fresh_results: bool = False
    dim: int = field(init=False)
    dim_y: int = field(init=False)

    def __post_init__(self) -> None:
        _flag(self.fresh_results, "fresh_results")
        object.__setattr__(self, "x0", _vector(self.x0, "x0"))
        object.__setattr__(self, "y0", _vector(self.y0, "y0"))
        object.__setattr__(self, "n", _positive(self.n, "n"))
        object.__setattr__(self, "dim", int(self.x0.shape[0]))
        object.__setattr__(self, "dim_y", int(self.y0.shape[0]))
        _check_call(self.fun, "fun", _FORMS["minimax"][self.vectorized], self.n, self.vectorized)
        if self.y_set is not None and not hasattr(self.y_set, "project"):
            raise InvalidInputError(
                "y_set must have a project() method (a ConvexSet such as zoframe.sets.Simplex)"
            )
        if self.y_set is not None and self.y_set.dim != self.dim_y:
            raise ShapeError(f"y_set has dimension {self.y_set.dim} but y0 has {self.dim_y}")

    def values(self, X: Array, Y: Array, idx: IntArray) -> Array:
        return _eval_batched(self.fun, (X, Y), idx, self.n, self.vectorized, "minimax")

    def measures(self, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
        return {"fun": float(monitor.minimax(outputs["x"], outputs["y"]).mean())}


@dataclass(frozen=True, eq=False)
class Composite:
    """``min (1/n) sum_i f_i(x) + sum_j psi_j(y_j)`` s.t. ``A x + sum_j B_j y_j = c``.

    ``fun`` follows :class:`FiniteSum`'s convention (``fun(X)`` when ``n == 1``, ``fun(X, idx)``
    otherwise); the penalties ``psi_j`` are objects with ``value``, ``prox`` and
    ``subdifferential_distance`` (see :mod:`zoframe.penalties`). ``residuals=r`` (optional) gives
    least-squares components ``l_i = r_i^2`` as for :class:`FiniteSum`.
    """

    kind: ClassVar[str] = "composite"
    fun: Callable[..., Any]
    x0: Array
    A: Array
    B: Sequence[Array]
    c: Array
    penalties: Sequence[Penalty]
    y0: Sequence[Array] | None = None
    n: int = 1
    vectorized: bool = True
    name: str = "composite"
    fresh_results: bool = False
    residuals: Callable[..., Any] | None = None
    dim: int = field(init=False)

    def __post_init__(self) -> None:
        _flag(self.fresh_results, "fresh_results")
        object.__setattr__(self, "x0", _vector(self.x0, "x0"))
        object.__setattr__(self, "n", _positive(self.n, "n"))
        object.__setattr__(self, "dim", int(self.x0.shape[0]))
        _check_call(self.fun, "fun", _FORMS["fun"][self.vectorized], self.n, self.vectorized)
        A = np.array(self.A, dtype=np.float64, copy=True)
        c = np.array(self.c, dtype=np.float64, copy=True).reshape(-1)
        if A.ndim != 2 or A.shape[1] != self.dim:
            raise ShapeError(f"A must have shape (l, {self.dim}) to multiply x, got {A.shape}")
        if c.shape[0] != A.shape[0]:
            raise ShapeError(f"c has length {c.shape[0]} but A has {A.shape[0]} rows")
        Bs = tuple(np.array(b, dtype=np.float64, copy=True) for b in self.B)
        if len(Bs) == 0:
            raise InvalidInputError("a composite problem needs at least one block B_j (k >= 1)")
        if len(self.penalties) != len(Bs):
            raise InvalidInputError(f"{len(Bs)} blocks B_j but {len(self.penalties)} penalties psi_j")
        for j, (b, psi) in enumerate(zip(Bs, self.penalties)):
            if b.ndim != 2 or b.shape[0] != A.shape[0]:
                raise ShapeError(f"B_{j} must have {A.shape[0]} rows like A, got shape {b.shape}")
            for meth in ("value", "prox"):
                if not callable(getattr(psi, meth, None)):
                    raise InvalidInputError(
                        f"penalty psi_{j} ({type(psi).__name__}) has no {meth}() method; a penalty needs "
                        "value(y), prox(v, t) and subdifferential_distance(y, g)"
                    )
        if self.y0 is None:
            y0 = tuple(np.zeros(b.shape[1]) for b in Bs)
        else:
            y0 = tuple(np.array(v, dtype=np.float64, copy=True) for v in self.y0)
            if len(y0) != len(Bs) or any(v.shape != (b.shape[1],) for v, b in zip(y0, Bs)):
                raise ShapeError("y0 must hold one vector per block, of length B_j.shape[1]")
        for arr in (A, c, *Bs, *y0):
            arr.setflags(write=False)
        object.__setattr__(self, "A", A)
        object.__setattr__(self, "c", c)
        object.__setattr__(self, "B", Bs)
        object.__setattr__(self, "y0", y0)
        object.__setattr__(self, "penalties", tuple(self.penalties))
        object.__setattr__(
            self, "residuals", _residual_method(self.residuals, self.n, self.vectorized, self.components, self.x0)
        )

    def components(self, X: Array, idx: IntArray) -> Array:
        return _eval_batched(self.fun, (X,), idx, self.n, self.vectorized)

    def measures(self, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
        x = outputs["x"]
        f = float(monitor.objective(x).mean())
        out = {"fun": f}
        ys = [outputs[f"y{j}"] for j in range(len(self.B)) if f"y{j}" in outputs]
        if len(ys) == len(self.B):
            out["fun"] = f + sum(p.value(y) for p, y in zip(self.penalties, ys))
            r = self.A @ x + sum(b @ y for b, y in zip(self.B, ys)) - self.c
            out["residual"] = float(np.linalg.norm(r))
        return out


_SQRT_HALF = math.sqrt(0.5)


class HalfSquaredResiduals:
    """Mixin: components ``l_i(x) = (a_i^T x - b_i)^2 / 2`` with rows ``a_i = data[i]``, ``b_i = target[i]``.

    A problem class (usually a frozen dataclass) that holds ``data`` (``(n, d)``) and ``target``
    (``(n,)``) gets the batched ``components``, white-box ``component_gradients`` and the
    ``full_gradient`` of the average from here, and the residuals ``r_i = (a_i^T x - b_i) / sqrt(2)``
    (``l_i = r_i^2``) that least-squares solvers read.
    """

    data: Array
    target: Array
    n: int

    def components(self, X: Array, idx: IntArray) -> Array:
        r = X @ self.data[idx].T - self.target[idx]
        out: Array = 0.5 * r * r
        return out

    def residuals(self, X: Array, idx: IntArray) -> Array:
        """``r_i(x) = (a_i^T x - b_i) / sqrt(2)``, so that ``l_i = r_i^2`` (:class:`~zoframe.protocols.HasResiduals`)."""
        out: Array = (X @ self.data[idx].T - self.target[idx]) * _SQRT_HALF
        return out

    def component_gradients(self, x: Array, idx: IntArray) -> Array:
        r = self.data[idx] @ x - self.target[idx]
        out: Array = r[:, None] * self.data[idx]
        return out

    def full_gradient(self, x: Array) -> Array:
        """Gradient of ``(1/n) sum_i l_i``."""
        out: Array = self.data.T @ (self.data @ x - self.target) / self.n
        return out
