"""Peer solvers run through zoframe's counting oracle: scipy, pycma and nevergrad.

A peer is an established derivative-free optimiser from another library. Here each one is a solver
like every other (``problem_kinds``, ``init``, ``step``), so its evaluations go through the same
:class:`~zoframe.oracle.CountingOracle`, its budget is the same exact ``max_calls`` and its result is
the same :class:`~zoframe.result.Result`.

How calls map: a peer sees the problem as one function of ``x``. One peer point costs one objective
call over **all** ``n`` components (``oracle.objective(X)``, ``n`` evaluations of kind
``objective``; the peer gets their mean, the problem's ``f``) plus, for a constrained problem, one
call of all ``m`` constraints (``m`` evaluations of kind ``constraint``): ``n + m`` evaluations per
point, the papers' "full-evaluation equivalent". Before a point is evaluated the peer checks that the
whole ``n + m`` fits in what is left of ``max_calls``; when it does not, the run ends with status
``BUDGET`` and nothing past the budget is evaluated (at most ``n + m - 1`` evaluations are left
unused).

Stepping: pycma and nevergrad have an ask-and-tell interface, so one ``step`` is one CMA-ES
generation (``popsize`` points, evaluated as one batch) or ``points_per_step`` nevergrad points.
scipy's minimisers own their loop; a step is ``points_per_step`` of their points (default ``10 (d + 1)``),
after which the driver records the trace, calls the callback and applies ``max_iter`` / ``max_time``.
Under :func:`zoframe.minimize` (``solver.unobserved_steps()``) scipy runs in the driver's thread: the run
loop's work after a step is done where a step ends, from inside scipy's calls (``drive``), and a stop
ends scipy's run there. Through ask/tell, which reads the run between steps, scipy runs in a worker
thread that hands control back to the driver after every step (one handoff at a time: the run stays
deterministic). Both give the same states, counts and results (see :class:`_ScipySession`).

The state's ``x`` is always the peer's best point so far (feasible points first: violation at most
``feas_tol``, then the lowest ``f``), so the ``Result`` reports the best point found even when the
budget ends in the middle of the peer's run.

``slsqp-fd`` and ``trust-constr-fd`` run scipy's gradient methods on forward differences: the ``d``
points of one difference gradient are one batch (one objective call, one constraint call), counted
as ``d`` peer points. Every peer starts from ``x0`` projected onto the bounds, holds its ``maxfev``
exactly, and ends with an honest status: budget stops are ``BUDGET`` whatever the library calls
them, and a library's "converged" is vetted (:func:`_vet`) before it stands as ``CONVERGED``.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator, Mapping
import contextlib
import copy
from dataclasses import dataclass, field
import functools
import math
import queue
import threading
from typing import Any, ClassVar, Self
import warnings
import weakref

import numpy as np

from zoframe._optional import require
from zoframe.errors import (
    BudgetExhausted,
    IncompatibleProblemError,
    InvalidParameterError,
    NonFiniteValueError,
    ZoframeError,
)
from zoframe.oracle import CountingOracle
from zoframe.protocols import Array
from zoframe.result import Status
from zoframe.sets import Box
from zoframe.solver import SolverBase, StopReason, check_int, check_positive
from zoframe.specs import param

__all__ = [
    "CMAES",
    "COBYLA",
    "COBYQA",
    "SLSQPFD",
    "NGCobyla",
    "NGOpt",
    "NelderMead",
    "PeerState",
    "Powell",
    "TrustConstrFD",
    "evaluate_points",
    "point_cost",
]

_PURPOSE = "peer"
#: a scipy peer's whole run: ``run(point, constraints, batch)``, ``point(x) -> f`` (one evaluation per
#: new ``x``), ``constraints() -> g``: the constraint values of the point ``point`` was last asked for,
#: ``batch(X) -> (F, G)``: ``f`` and the constraints at the rows of ``X`` (one oracle call each)
_Batch = Callable[[Array], "tuple[Array, Array | None]"]
_Run = Callable[[Callable[[Array], float], Callable[[], "Array | None"], _Batch], Any]
_F64 = np.dtype(np.float64)
#: default scipy chunk, in units of ``d + 1`` peer points per driver iteration
_SCIPY_CHUNK = 10


# --------------------------------------------------------------------------- evaluation
def point_cost(oracle: CountingOracle) -> int:
    """Evaluations of one peer point: all ``n`` components, plus all ``m`` constraints and all ``m_eq``
    equality constraints if constrained."""
    return oracle.n + (oracle.m + _m_eq(oracle) if oracle.kind == "constrained" else 0)


def _m_eq(oracle: CountingOracle) -> int:
    return int(getattr(oracle, "m_eq", 0))


def _violations(G: Array, m_eq: int) -> Array:
    """The max violation ``(k,)`` of the rows of ``G`` ``(k, m + m_eq)``: ``max(f_j, 0)`` of the first ``m``
    columns (inequalities), ``|h_l|`` of the last ``m_eq`` (equalities)."""
    if not m_eq:
        out: Array = np.maximum(G, 0.0).max(axis=1)
        return out
    V: Array = np.abs(G[:, -m_eq:]).max(axis=1)
    if G.shape[1] > m_eq:
        V = np.maximum(V, np.maximum(G[:, :-m_eq], 0.0).max(axis=1))
    return V


def affordable(oracle: CountingOracle, k: int) -> int:
    """How many of ``k`` points fit, whole, in the remaining budget."""
    rem = oracle.remaining
    return k if rem is None else min(k, rem // point_cost(oracle))


def evaluate_points(oracle: CountingOracle, X: Array) -> tuple[Array, Array, Array | None]:
    """``f`` ``(k,)``, violation ``max_j max(f_j, 0)`` ``(k,)`` and constraints ``(k, m)`` at the rows of ``X``.

    With equality constraints the constraints are ``(k, m + m_eq)``, the equalities' values last (one more
    call), and the violation includes ``|h_l|``.

    Two oracle calls (objective over all ``n``, constraints over all ``m``); raises
    :class:`BudgetExhausted` before any evaluation unless all ``k`` points fit in the budget.
    """
    k = X.shape[0]
    cost = point_cost(oracle)
    rem = oracle.remaining
    if rem is not None and k * cost > rem:
        raise BudgetExhausted(k * cost, oracle.calls, int(oracle.max_calls or 0))
    F = oracle.objective(X, purpose=_PURPOSE).mean(axis=1) if oracle.n > 1 else oracle.objective(X, purpose=_PURPOSE)[:, 0]
    if oracle.kind != "constrained":
        return F, np.zeros(k), None
    G = oracle.constraints(X, purpose=_PURPOSE)
    m_eq = _m_eq(oracle)
    if m_eq:
        G = np.hstack([G, oracle.equalities(X, purpose=_PURPOSE)])
    return F, _violations(G, m_eq), G


def _evaluate_one(oracle: CountingOracle, x: Array) -> tuple[float, Array | None]:
    """``(f, constraints or None)`` at one point ``x`` ``(d,)``: :func:`evaluate_points` for one row.

    Raises :class:`BudgetExhausted` before any evaluation unless the whole ``n + m`` fits.
    """
    full = getattr(oracle, "evaluate_full", None)
    if full is not None:
        if _m_eq(oracle):  # evaluate_full covers n + m: the whole point is checked first
            rem = oracle.remaining
            if rem is not None and point_cost(oracle) > rem:
                raise BudgetExhausted(point_cost(oracle), oracle.calls, int(oracle.max_calls or 0))
            f, g = full(x, purpose=_PURPOSE)
            h = oracle.equalities(x.reshape(1, -1), purpose=_PURPOSE)[0]
            return float(f), h if g is None else np.concatenate([g, h])
        f, g = full(x, purpose=_PURPOSE)
        return float(f), g
    F, _, G = evaluate_points(oracle, x.reshape(1, -1))
    return float(F[0]), None if G is None else G[0]


class _Best:
    """The peer's best point so far: feasible (violation <= tol) first, then the lowest ``f``."""

    def __init__(self, x0: Array, tol: float) -> None:
        self.x = np.array(x0, dtype=np.float64, copy=True)
        self.fun = math.inf
        self.violation = math.inf
        self.points = 0
        self.tol = tol
        self._key: tuple[float, float] = (math.inf, math.inf)

    @classmethod
    def restore(cls, state: PeerState, tol: float) -> _Best:
        best = cls(state.x, tol)
        best.fun, best.violation, best.points = float(state.fun), float(state.violation), int(state.points)
        if best.points:
            best._key = (0.0 if best.violation <= tol else best.violation, best.fun)
        return best

    def observe_one(self, x: Array, f: float, v: float) -> None:
        """One point, plain floats: the scipy peers' path (a copy of ``x`` is kept if it is the best).

        The order of :meth:`observe` (the tuple ``(violation class, f)``, NaN as ``inf``), compared
        item by item without building the tuple.
        """
        self.points += 1
        vk = 0.0 if v <= self.tol else v
        fk = math.inf if f != f else f
        kv, kf = self._key
        if vk < kv or (vk == kv and fk < kf):
            self._key, self.x, self.fun, self.violation = (vk, fk), x.copy(), f, v

    def observe(self, X: Array, F: Array, V: Array) -> None:
        self.points += X.shape[0]
        if X.shape[0] == 1:  # the scipy peers' path: one point at a time, no array temporaries
            f, v = float(F[0]), float(V[0])
            one = (0.0 if v <= self.tol else v, math.inf if math.isnan(f) else f)
            if one < self._key:
                self._key, self.x, self.fun, self.violation = one, np.array(X[0], dtype=np.float64), f, v
            return
        viol = np.where(V <= self.tol, 0.0, V)
        fun = np.where(np.isnan(F), np.inf, F)
        r = int(np.lexsort((fun, viol))[0])  # lowest violation class, then lowest f
        key = (float(viol[r]), float(fun[r]))
        if key < self._key:
            self._key = key
            self.x = np.array(X[r], dtype=np.float64, copy=True)
            self.fun = float(F[r])
            self.violation = float(V[r])


# --------------------------------------------------------------------------- state
@dataclass(frozen=True)
class PeerState:
    """What the driver sees of a peer: its best point so far and whether the peer has stopped.

    ``x`` is the best point so far (what the Result reports). ``x0``, ``seed`` and ``log`` (the
    values ``[f, f_1..f_m]`` of every point evaluated, in order) make a checkpoint: on resume the
    peer is rebuilt from ``x0`` and ``seed`` and replays ``log`` (no evaluation is repeated) up to
    where it stopped. The peer's live machinery (a pycma / nevergrad optimiser, or a scipy run
    paused in its thread) is attached to the state object, not a field.
    """

    x: Array
    x0: Array
    fun: float
    violation: float
    points: int
    seed: int
    log: Array
    done: bool = False
    message: str = ""
    status: int = int(Status.CONVERGED)
    note: str = ""


def _state(session: _Session) -> PeerState:
    best = session.best
    out = PeerState(
        x=best.x, x0=session.x0, fun=best.fun, violation=best.violation, points=best.points, seed=session.seed,
        log=session.log(), done=session.done, message=session.message, status=int(session.status),
        note=session.note,
    )
    object.__setattr__(out, "_session", session)  # not a field: checkpoints store the fields only
    return out


class _Session:
    """One peer run. ``advance`` runs the peer for one chunk; ``done``/``message``/``status`` after.

    ``values(oracle, X)`` is the one way a peer gets function values (the scipy peers' one-point
    ``_ScipySession._point`` is the same rule for one point): from the replay log first (after a
    resume), then from the oracle; every value is appended to the log.
    """

    def __init__(self, x0: Array, seed: int, best: _Best, m: int, replay: Array | None, m_eq: int = 0) -> None:
        self.x0 = x0
        self.seed = seed
        self.best = best
        self.done = False
        self.message = ""
        self.status = Status.CONVERGED
        #: said at the end of the run (e.g. that ``x0`` was projected onto the bounds)
        self.note = ""
        #: the peer's own cap on points (its ``maxfev``), or None
        self.cap: int | None = None
        self.m = m  # constraint columns of the log (the last m_eq of them equalities)
        self.m_eq = m_eq
        self._buf = np.empty((16, 1 + m))
        self._count = 0
        #: f of the points logged one at a time since the buffer was last brought up to date (m = 0)
        self._fs: list[float] = []
        self._replay = np.zeros((0, 1 + m)) if replay is None else replay
        self._replay_len = int(self._replay.shape[0])
        self._pos = 0
        if replay is not None:
            self._append(replay)

    @property
    def replaying(self) -> bool:
        return self._pos < self._replay_len

    def logged(self) -> int:
        """Points evaluated (or replayed) so far in the whole run."""
        return self._count + len(self._fs)

    def log(self) -> Array:
        if self._fs:
            self._flush()
        view = self._buf[: self._count]
        view.flags.writeable = False
        return view

    def _flush(self) -> None:
        """Move the values of :attr:`_fs` into the buffer, in order."""
        fs, self._fs = self._fs, []
        self._put(np.array(fs, dtype=np.float64).reshape(-1, 1))

    def _append(self, rows: Array) -> None:
        if self._fs:
            self._flush()
        self._put(rows)

    def _put(self, rows: Array) -> None:
        need = self._count + rows.shape[0]
        if need > self._buf.shape[0]:
            grown = np.empty((max(need, 2 * self._buf.shape[0]), self._buf.shape[1]))
            grown[: self._count] = self._buf[: self._count]
            self._buf = grown  # earlier states keep views of the old buffer, whose rows never change
        self._buf[self._count:need] = rows
        self._count = need

    def _append_one(self, f: float, g: Array | None) -> None:
        """Log one point's ``[f, f_1..f_m]``: ``f`` alone goes to :attr:`_fs` (moved into the buffer
        when the log is read), a row with constraints in place (the buffer grows geometrically)."""
        if g is None:
            self._fs.append(f)
            return
        if self._fs:
            self._flush()
        if self._count == self._buf.shape[0]:
            grown = np.empty((2 * self._buf.shape[0], self._buf.shape[1]))
            grown[: self._count] = self._buf[: self._count]
            self._buf = grown  # earlier states keep views of the old buffer, whose rows never change
        row = self._buf[self._count]
        row[0] = f
        row[1:] = g
        self._count += 1

    def values(self, oracle: CountingOracle, X: Array) -> tuple[Array, Array, Array | None]:
        """``(f, violation, constraints)`` of the rows of ``X``: replayed, else evaluated (and logged).

        With simple bounds the points are clipped into the box first (a peer such as COBYLA may step
        slightly outside): the value is that of the clipped point, and the best point is inside.
        """
        k = X.shape[0]
        if oracle.feasible_set is not None:
            box = _box(oracle)
            if box is not None:
                X = np.clip(X, box[0], box[1])
        if self.replaying:
            rows = self._replay[self._pos:self._pos + k]
            self._pos += rows.shape[0]
            if rows.shape[0] == k:
                F = rows[:, 0].copy()
                G = rows[:, 1:].copy() if self.m else None
                V = np.zeros(k) if G is None else _violations(G, self.m_eq)
                return F, V, G
        F, V, G = evaluate_points(oracle, X)
        self.best.observe(X, F, V)
        self._append(F[:, None] if G is None else np.column_stack([F, G]))
        return F, V, G

    def finish(self, message: str, status: Status) -> None:
        """End the run; a ``CONVERGED`` claim of the peer is vetted first (:func:`_vet`)."""
        message, status = _vet(self, message, status)
        if self.note:
            message = f"{message} ({self.note})"
        self.done, self.message, self.status = True, message, status

    def capped(self) -> None:
        self.finish(f"reached maxfev={self.cap} peer points (the peer's own cap)", Status.BUDGET)

    def budget(self, oracle: CountingOracle) -> None:
        cost = point_cost(oracle)
        self.finish(
            f"reached max_calls: {oracle.calls} evaluations used, {oracle.remaining} left, fewer than one "
            f"peer point ({cost} = n + m)", Status.BUDGET,
        )

    def advance(self, oracle: CountingOracle) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def current(self) -> PeerState:
        """The state the driver sees after this step."""
        return _state(self)


#: a peer's best point with a coordinate beyond this many times ``max(1, |x0|_inf)`` has diverged
_X_GROWTH = 1e15
#: ... and so has one whose objective value is beyond this in magnitude
_F_LIMIT = 1e100


class _PeerCapReached(Exception):
    """The peer's own ``maxfev`` is used up (the run ends with status ``BUDGET``)."""


class _PeerDiverged(Exception):
    """The peer asked for a point with non-finite coordinates (the run ends with status ``DIVERGED``)."""


def _check_point(X: Array, exc: BaseException) -> None:
    """Raise :class:`_PeerDiverged` if ``X`` has a non-finite coordinate (the cause of ``exc``)."""
    if not bool(np.isfinite(X).all()):
        raise _PeerDiverged(
            "the peer diverged: it asked for a point with non-finite coordinates (the objective may be "
            "unbounded below; give bounds or constraints that keep it bounded)"
        ) from exc


def _vet(session: _Session, message: str, status: Status) -> tuple[str, Status]:
    """The status a peer's run really ends with: its own "converged" is never taken on its word.

    A best point that ran away (a coordinate beyond ``1e15 max(1, |x0|_inf)``, or ``|f|`` beyond
    ``1e100``: the objective is likely unbounded below) makes any ending ``DIVERGED``, a budget stop
    included. A ``CONVERGED`` claim also becomes ``DIVERGED`` when any point of the run had a
    non-finite objective or constraint value (with ``nonfinite="inf"`` the peer saw ``+inf``: its
    models and tests are void), and ``FAILED`` when the best point is infeasible (violation above
    ``feas_tol``). Other statuses are kept.
    """
    if status in (Status.DIVERGED, Status.FAILED):
        return message, status
    best = session.best
    size = float(np.abs(best.x).max(initial=0.0))
    limit = _X_GROWTH * max(1.0, float(np.abs(session.x0).max(initial=0.0)))
    if best.points and not (size <= limit and abs(best.fun) <= _F_LIMIT):
        return (f"{message}; but the best point ran away (|x|_inf = {size:.3g}, f = {best.fun:.3g}): the objective "
                "may be unbounded below; give bounds or constraints that keep it bounded", Status.DIVERGED)
    if status is not Status.CONVERGED:
        return message, status
    log = session.log()
    finite = np.isfinite(log)
    if not bool(finite.all()):
        bad = int((~finite).any(axis=1).sum())
        return (f"{message}; but {bad} of {log.shape[0]} points had non-finite values: the peer's own test "
                "is no certificate", Status.DIVERGED)
    if best.violation > best.tol:
        return (f"{message}; but the best point is infeasible (max violation {best.violation:.3g} > "
                f"feas_tol={best.tol:g})", Status.FAILED)
    return message, status


def _start(oracle: CountingOracle, x0: Array) -> tuple[Array, str]:
    """``x0`` projected onto the problem's bounds (every peer starts inside them), and a note if it moved."""
    x = np.array(x0, dtype=np.float64, copy=True)
    box = _box(oracle)
    if box is None:
        return x, ""
    p = np.clip(x, box[0], box[1])
    if np.array_equal(p, x):
        return x, ""
    moved = float(np.abs(p - x).max())
    return p, (f"x0 was outside the bounds: the peer started from its projection onto them, {moved:.3g} away "
               "in the largest coordinate")


def _box(oracle: CountingOracle) -> tuple[Array, Array] | None:
    """The problem's bounds as two arrays, or ``None`` (unbounded)."""
    s = oracle.feasible_set
    if s is None:
        return None
    lo = np.broadcast_to(np.asarray(s.lower, dtype=np.float64), (oracle.dim,)).copy()  # type: ignore[attr-defined]
    hi = np.broadcast_to(np.asarray(s.upper, dtype=np.float64), (oracle.dim,)).copy()  # type: ignore[attr-defined]
    return lo, hi


def _points_budget(
    oracle: CountingOracle, maxfev: int | None, default: int, replay: Array | None, slack: int = 0
) -> int:
    """The number of peer points to announce to a peer that wants a budget up front.

    After a resume the points of the replayed log count too, so the peer gets the same number as
    in the uninterrupted run.
    """
    if maxfev is not None:
        return maxfev
    rem = oracle.remaining
    if rem is None:
        return default
    done = 0 if replay is None else int(replay.shape[0])
    return max(1, rem // point_cost(oracle) + done + slack)


@dataclass(frozen=True)
class _PeerBase(SolverBase):
    """What every peer shares: kinds, box-only feasible sets, the best-point rule and the stop rule."""

    problem_kinds: ClassVar[frozenset[str]] = frozenset({"finite_sum", "constrained"})
    peer_name: ClassVar[str] = ""

    def _check(self) -> None:
        tol = getattr(self, "feas_tol", 0.0)
        if not (isinstance(tol, (int, float)) and math.isfinite(tol) and tol >= 0):
            raise InvalidParameterError(f"feas_tol must be a finite number >= 0, got {tol!r}")
        pps = getattr(self, "points_per_step", None)
        if pps is not None:
            check_int("points_per_step", pps)
        mf = getattr(self, "maxfev", None)
        if mf is not None:
            check_int("maxfev", mf)

    def validate(self, oracle: CountingOracle) -> None:
        s = oracle.feasible_set
        if s is not None and not isinstance(s, Box):
            raise IncompatibleProblemError(
                f"the peer {self.peer_name!r} handles simple bounds only; this problem's feasible set is a "
                f"{type(s).__name__}. Use a zoframe solver with projections (e.g. zo-sgd), or state the set "
                "as constraints of a constrained problem"
            )

    def nonfinite_policy(self) -> str:
        """``"inf"``: a peer gets ``+inf`` at a failed point (its library steps back, or the run ends with the
        best point kept)."""
        return "inf"

    def terminate(self, state: PeerState) -> str | None:
        if state.done:
            return StopReason(state.message, Status(state.status))
        return None

    def outputs(self, state: PeerState) -> Mapping[str, Array]:
        return {"x": state.x}

    def init(self, oracle: CountingOracle, x0: Array, rng: np.random.Generator) -> PeerState:
        start, note = _start(oracle, x0)  # every peer starts inside the bounds, alike
        best = _Best(start, float(getattr(self, "feas_tol", 1e-6)))
        seed = int(rng.integers(2**31 - 1))  # the peer's own randomness, derived from the run's Generator
        session = self._session(oracle, start, seed, best, None)
        session.note = note
        return _state(session)

    def step(self, oracle: CountingOracle, state: PeerState, rng: np.random.Generator) -> PeerState:
        session = self._live(oracle, state)
        if not session.done:
            session.advance(oracle)
        return session.current()

    def _live(self, oracle: CountingOracle, state: PeerState) -> _Session:
        """The session behind ``state``; after a resume from a checkpoint, the peer rebuilt to replay its log."""
        session: _Session | None = getattr(state, "_session", None)
        if session is None:  # resumed from a checkpoint: rebuild the peer and replay its log
            best = _Best.restore(state, float(getattr(self, "feas_tol", 1e-6)))
            session = self._session(oracle, np.array(state.x0, dtype=np.float64), int(state.seed), best,
                                    np.array(state.log, dtype=np.float64))
            session.note = str(getattr(state, "note", ""))
        return session

    def _session(
        self, oracle: CountingOracle, x0: Array, seed: int, best: _Best, replay: Array | None
    ) -> _Session:
        raise NotImplementedError  # pragma: no cover


# --------------------------------------------------------------------------- scipy (threaded)
class _Cancelled(BaseException):
    """Ends an abandoned scipy run in its thread (never seen by users)."""


class _ThreadBridge:
    """Runs ``target(fun, constraints)`` in a daemon thread, pausing every ``chunk`` calls of ``fun``.

    Exactly one of the two threads runs at any time (two semaphores hand control back and forth),
    so the oracle is never used concurrently and the run is as deterministic as a serial one.
    """

    def __init__(
        self,
        target: _Run,
        evaluate: Callable[[Array], float],
        free: Callable[[], bool],
        constraints: Callable[[], Array | None],
        batch: _Batch,
    ) -> None:
        self._target = target
        self._evaluate = evaluate
        self._evaluate_batch = batch
        self._constraints = constraints
        self._free = free  # replayed points (after a resume) do not count towards a chunk
        self._replaying = True
        self._go = threading.Semaphore(0)
        self._back = threading.Semaphore(0)
        self._quota = 0
        self._cancel = False
        self.finished = False
        self.outcome: Any = None
        self.error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def _main(self) -> None:
        self._go.acquire()
        try:
            if self._cancel:
                raise _Cancelled
            self.outcome = self._target(self._fun, self._constraints, self._batch)
        except BaseException as exc:  # handed to the driver's thread by run()
            self.error = exc
        finally:
            self.finished = True
            self._back.release()

    def _fun(self, x: Array) -> float:
        self._take(1)
        return self._evaluate(x)

    def _batch(self, X: Array) -> tuple[Array, Array | None]:
        """The rows of ``X`` in one call: counted as ``len(X)`` calls of :meth:`_fun` (one pause before)."""
        self._take(X.shape[0])
        return self._evaluate_batch(X)

    def _take(self, k: int) -> None:
        """Charge ``k`` calls to this chunk's quota, pausing for the driver first when it is used up."""
        if self._replaying:  # the replayed points come first; once they are used up they never come back
            if self._free():
                return
            self._replaying = False
        if self._quota <= 0:
            self._back.release()
            self._go.acquire()
            if self._cancel:
                raise _Cancelled
        self._quota -= k

    def run(self, chunk: int) -> None:
        """Let the peer make up to ``chunk`` more calls (or finish); re-raise its errors here."""
        self._quota = chunk
        if self._thread is None:
            self._thread = threading.Thread(target=self._main, name="zoframe-peer", daemon=True)
            self._thread.start()
        self._go.release()
        self._back.acquire()

    def cancel(self) -> None:
        if self._thread is not None and not self.finished:
            self._cancel = True
            self._go.release()


class _ScipySession(_Session):
    """One scipy run: in a worker thread paused every ``chunk`` calls (:class:`_ThreadBridge`), or in the
    driver's thread (``in_driver_thread``).

    In the driver's thread the calls are counted as the bridge counts them. Under the run loop
    (:meth:`drive`) the state the threaded run would show after each chunk goes to the loop's ``pause``
    at the first call of the next chunk, inside scipy's call, and a stop raised there ends scipy's run.
    Stepped by hand (:meth:`advance`), the whole scipy run happens in the first step, the states after
    each chunk are kept, and the following steps hand them out one per step. Either way the run ends as
    the threaded one would (same states, iterations, counts, status and message, and an error raised
    at the same iteration).
    """

    def __init__(
        self,
        oracle: CountingOracle,
        x0: Array,
        seed: int,
        best: _Best,
        replay: Array | None,
        chunk: int,
        run_peer: _Run,
        in_driver_thread: bool = False,
        method: str = "",
        cap: int | None = None,
    ) -> None:
        m_eq = _m_eq(oracle)
        super().__init__(x0, seed, best, oracle.m + m_eq if oracle.kind == "constrained" else 0, replay, m_eq)
        self.method = method
        self.cap = cap
        self.oracle = oracle
        self._full: Callable[..., tuple[float, Array | None]] | None = getattr(oracle, "evaluate_full", None)
        self.chunk = chunk
        self._bounds = _box(oracle)  # the box is fixed for the run: computed once, not per point
        #: the point asked last (its bytes) and its f (its constraints are :attr:`_g`)
        self._last_key = b""
        self._last_f = math.nan
        self._g: Array | None = None  # the constraint values of the point asked last
        self.bridge: _ThreadBridge | None = None
        self._run_peer = run_peer
        #: in the driver's thread: the states after each chunk still to show, and whether scipy has run
        self._ahead: collections.deque[PeerState] = collections.deque()
        self._ran = False
        self._here = False  # True while scipy runs in the driver's thread
        self._counting = False  # True while scipy runs in the driver's thread, past the replayed points
        self._quota = 0  # calls left in the current chunk (driver's thread)
        self._shown: PeerState | None = None
        self._outcome: Any = None
        self._error: BaseException | None = None
        #: the run loop's ``pause`` while :meth:`drive` runs, and what it raised (let through to the loop)
        self._pause: Callable[[PeerState], None] | None = None
        self._halted: BaseException | None = None
        if not in_driver_thread:
            # the bridge (and the peer's thread) hold the session only weakly: when the driver drops the
            # run's last state, the session is freed at once and its finalizer ends the paused thread
            # (which may hold a library lock: scipy's COBYQA runs one solve at a time)
            ref = weakref.ref(self)
            self.bridge = _ThreadBridge(
                run_peer, functools.partial(_weak_point, ref), functools.partial(_weak_replaying, ref),
                functools.partial(_weak_constraints, ref), functools.partial(_weak_batch, ref),
            )
            weakref.finalize(self, self.bridge.cancel)

    def _point(self, x: Array) -> float:
        """One peer point: ``f`` at ``x`` (its constraints ``g`` in :attr:`_g`); the same point asked
        again is not evaluated again.

        The one-point path of :meth:`_Session.values` (same values, same log, same best point),
        without the ``(1, d)`` batch temporaries: scipy's minimisers ask one point per call.
        In the driver's thread (:meth:`_run_here`) the call is first counted as
        :meth:`_ThreadBridge._fun` counts it: every call once the replayed points are used up (a
        repeated point too), and before the first call of each new chunk the state the threaded
        run would show the driver is kept.
        """
        if self._counting:
            quota = self._quota
            if quota <= 0:
                self._chunk_ends()  # where the threaded run would pause for the driver
                quota = self.chunk
            self._quota = quota - 1
        if type(x) is not np.ndarray or x.dtype is not _F64:
            x = np.asarray(x, dtype=np.float64)
        key = x.tobytes()
        if key == self._last_key:
            return self._last_f  # and _g is still this point's
        bounds = self._bounds
        # the oracle copies the point it evaluates, the best point keeps a copy: no copy here
        xp = x if bounds is None else np.clip(x, bounds[0], bounds[1])
        if self._pos < self._replay_len:  # replaying after a resume
            row = self._replay[self._pos]
            self._pos += 1
            f = float(row[0])
            g = row[1:].copy() if self.m else None
            if self._here and self._pos == self._replay_len:
                self._counting = True  # the replayed points are used up: from the next call on
        else:
            cap = self.cap
            if cap is not None and self._count + len(self._fs) >= cap:
                raise _PeerCapReached(cap)
            full = self._full
            try:
                if full is None or self.m_eq:
                    f, g = _evaluate_one(self.oracle, xp)
                else:
                    f, g = full(xp, purpose=_PURPOSE)  # f is a float: evaluate_full's contract
            except NonFiniteValueError as exc:
                _check_point(xp, exc)
                raise
            if g is None:  # no constraints: violation 0, and f alone is logged (_append_one's first case)
                best = self.best
                kv, kf = best._key
                # observe_one(xp, f, 0.0) for a point that is not the best counts it and no more: the class
                # of violation 0 is the lowest (kv >= 0), and a NaN f (inf there) never beats kf
                if kv != 0.0 or f < kf:
                    best.observe_one(xp, f, 0.0)
                else:
                    best.points += 1
                self._fs.append(f)
            else:
                v = float(_violations(g[None, :], self.m_eq)[0]) if self.m_eq else max(float(g.max()), 0.0)
                self.best.observe_one(xp, f, v)
                self._append_one(f, g)
        self._last_key = key
        self._last_f = f
        self._g = g
        return f

    def _chunk_ends(self) -> None:
        """A chunk's calls are made (driver's thread): its state goes to the run loop's ``pause`` (:meth:`drive`),
        which may end the run by raising (kept in :attr:`_halted`, to be let through), or is kept for a
        later step (:meth:`_advance_here`)."""
        pause = self._pause
        if pause is None:
            self._ahead.append(_state(self))
            return
        try:
            pause(_state(self))
        except BaseException as exc:
            self._halted = exc
            raise

    def drive(self, oracle: CountingOracle, pause: Callable[[PeerState], None]) -> PeerState:
        """The whole run in the driver's thread, ``pause(state)`` called where each chunk ends (where the
        threaded run hands control to the driver, with the state it shows there): the run loop's work
        after a step happens there, inside the library's calls, and what ``pause`` raises ends the
        library's run and goes up to the loop. Returns the state of the last step (the run's end)."""
        self._pause = pause
        try:
            self.advance(oracle)
        finally:
            self._pause = None
        return self.current()

    def _constraints(self) -> Array | None:
        return self._g

    def _batch(self, X: Array) -> tuple[Array, Array | None]:
        """``f`` ``(k,)`` and the constraints ``(k, m)`` (or None) at the rows of ``X``, in one oracle call each.

        The batch path of :meth:`_point` (replayed rows first, the rows clipped into the bounds, the
        best point, the log; counted as ``k`` calls). When only part of the batch fits in the budget
        (or the peer's ``maxfev``), the rows that fit are evaluated and the run ends: nothing past the
        budget is evaluated and at most ``n + m - 1`` evaluations are left unused.
        """
        k = X.shape[0]
        if self._counting:
            quota = self._quota
            if quota <= 0:
                self._chunk_ends()  # where the threaded run would pause for the driver
                quota = self.chunk
            self._quota = quota - k
        bounds = self._bounds
        if bounds is not None:
            X = np.clip(X, bounds[0], bounds[1])
        r = min(k, self._replay_len - self._pos)
        Fs: list[Array] = []
        Gs: list[Array] = []
        if r > 0:  # replaying after a resume
            rows = self._replay[self._pos:self._pos + r]
            self._pos += r
            Fs.append(rows[:, 0].copy())
            Gs.append(rows[:, 1:].copy())
            if self._here and self._pos == self._replay_len:
                self._counting = True
        if r < k:
            rest = X[r:]
            want = rest.shape[0]
            cap = self.cap
            fit = want if cap is None else min(want, max(0, cap - self.logged()))
            fit = affordable(self.oracle, fit)
            if fit:
                try:
                    F, V, G = evaluate_points(self.oracle, rest[:fit])
                except NonFiniteValueError as exc:
                    _check_point(rest[:fit], exc)
                    raise
                self.best.observe(rest[:fit], F, V)
                self._append(F[:, None] if G is None else np.column_stack([F, G]))
                Fs.append(F)
                Gs.append(np.zeros((fit, 0)) if G is None else G)
            if fit < want:
                if cap is not None and self.logged() >= cap:
                    raise _PeerCapReached(cap)
                raise BudgetExhausted(want * point_cost(self.oracle), self.oracle.calls, int(self.oracle.max_calls or 0))
        F_all = np.concatenate(Fs)
        return F_all, (np.concatenate(Gs) if self.m else None)

    def advance(self, oracle: CountingOracle) -> None:
        self.oracle = oracle
        self._full = getattr(oracle, "evaluate_full", None)
        b = self.bridge
        if b is None:
            self._advance_here()
            return
        b.run(self.chunk)
        if b.finished:
            self._conclude(oracle, b.outcome, b.error)

    def current(self) -> PeerState:
        shown, self._shown = self._shown, None
        return _state(self) if shown is None else shown

    def _advance_here(self) -> None:
        """A step in the driver's thread: the whole run first, then one chunk's state per step."""
        if not self._ran:
            self._run_here()
        if self._ahead:
            self._shown = self._ahead.popleft()
        else:
            self._conclude(self.oracle, self._outcome, self._error)

    def _run_here(self) -> None:
        """Run scipy to its end in this thread, keeping the states after every ``chunk`` counted calls."""
        self._ran, self._quota, self._here = True, self.chunk, True
        self._counting = self._pos >= self._replay_len
        try:
            self._outcome = self._run_peer(self._point, self._constraints, self._batch)
        except KeyboardInterrupt:
            raise  # the threaded run's driver sees it at once too
        except BaseException as exc:  # raised by the step where the threaded run raises it
            if exc is self._halted:  # the run loop stops the run (or failed) at the end of a chunk
                raise
            self._error = exc
        finally:
            self._here = self._counting = False

    def _conclude(self, oracle: CountingOracle, outcome: Any, error: BaseException | None) -> None:
        """The end of the scipy run: its status and message, or its error raised."""
        if isinstance(error, BudgetExhausted):
            self.budget(oracle)
        elif isinstance(error, _PeerCapReached):
            self.capped()
        elif isinstance(error, _PeerDiverged):
            self.finish(str(error), Status.DIVERGED)
        elif isinstance(error, (ValueError, ArithmeticError, np.linalg.LinAlgError)) and not bool(np.isfinite(self.log()).all()):
            # the library could not go on past the +inf values it was given (nonfinite="inf"): the run ends
            # FAILED with the best point kept, never with the library's own error
            self.finish(
                f"the peer stopped: scipy's {self.method or 'method'} cannot continue past the non-finite values of "
                f"the function at some points ({type(error).__name__}: {error})",
                Status.FAILED,
            )
        elif error is not None:
            self.finish(f"the peer failed: {error}", Status.FAILED)
            raise error
        else:
            self.finish(*_scipy_status(self.method, outcome))


def _weak_point(ref: weakref.ref[_ScipySession], x: Array) -> float:
    session = ref()
    if session is None:
        raise _Cancelled
    return session._point(x)


def _weak_constraints(ref: weakref.ref[_ScipySession]) -> Array | None:
    session = ref()
    if session is None:
        raise _Cancelled
    return session._g


def _weak_batch(ref: weakref.ref[_ScipySession], X: Array) -> tuple[Array, Array | None]:
    session = ref()
    if session is None:
        raise _Cancelled
    return session._batch(X)


#: scipy's ``status`` codes of each method that are not a success: budget stops (the method's own
#: ``maxfev`` / ``maxiter``) and non-finite values; any other code without ``success`` is ``FAILED``
_SCIPY_CODES: dict[str, dict[int, Status]] = {
    "Nelder-Mead": {1: Status.BUDGET, 2: Status.BUDGET, 3: Status.DIVERGED},
    "Powell": {1: Status.BUDGET, 2: Status.BUDGET, 3: Status.DIVERGED},
    # PRIMA: MAXFUN_REACHED, MAXTR_REACHED; NAN_INF_X, NAN_INF_F, NAN_INF_MODEL
    "COBYLA": {3: Status.BUDGET, 20: Status.BUDGET, -1: Status.DIVERGED, -2: Status.DIVERGED, -3: Status.DIVERGED},
    "COBYQA": {5: Status.BUDGET, 6: Status.BUDGET},  # MAX_EVAL_WARNING, MAX_ITER_WARNING
    "SLSQP": {9: Status.BUDGET},  # iteration limit
    "trust-constr": {0: Status.BUDGET},  # maxiter
}


def _scipy_status(method: str, outcome: Any) -> tuple[str, Status]:
    """The message and status of a finished scipy run (a ``CONVERGED`` claim is vetted by ``finish``)."""
    message = f"scipy: {getattr(outcome, 'message', '')}"
    if bool(getattr(outcome, "success", False)):
        return message, Status.CONVERGED
    code = getattr(outcome, "status", None)
    try:
        status = _SCIPY_CODES.get(method, {}).get(int(code), Status.FAILED)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        status = Status.FAILED
    if status is Status.FAILED:
        message = f"{message} (status {code}: the peer stopped without success)"
    return message, status


def _weak_replaying(ref: weakref.ref[_ScipySession]) -> bool:
    session = ref()
    return session is not None and session.replaying


def _scipy_minimize(
    method: str, x0: Array, bounds: tuple[Array, Array] | None, constrained: bool, options: dict[str, Any],
    m_eq: int = 0, inequalities: bool = True,
) -> _Run:
    """The peer's whole run as ``target(point, constraints, batch)`` (see :data:`_Run`).

    ``m_eq`` equality constraints (the last ``m_eq`` values of the constraint vector): COBYLA gets each as
    two inequalities ``h_l >= 0`` and ``-h_l >= 0``, the other methods as scipy's equality constraints;
    ``inequalities=False``: equality constraints alone (``m = 0``)."""
    from scipy import optimize

    def target(point: Callable[[Array], float], last: Callable[[], Array | None], batch: _Batch) -> Any:
        def g(x: Array) -> Any:
            point(x)  # evaluates x unless it is the point asked last (COBYLA asks f, then g, at each point)
            return last()

        kwargs: dict[str, Any] = {"method": method, "options": options}
        if bounds is not None:
            kwargs["bounds"] = optimize.Bounds(bounds[0], bounds[1])
        if constrained and m_eq:
            split = -m_eq  # the inequalities' values, then the equalities'
            if method == "COBYLA":
                kwargs["constraints"] = [
                    {"type": "ineq", "fun": lambda x: -g(x)[:split]},
                    {"type": "ineq", "fun": lambda x: g(x)[split:]},
                    {"type": "ineq", "fun": lambda x: -g(x)[split:]},
                ][0 if inequalities else 1 :]
            else:
                kwargs["constraints"] = [
                    optimize.NonlinearConstraint(lambda x: g(x)[:split], -np.inf, 0.0),
                    optimize.NonlinearConstraint(lambda x: g(x)[split:], 0.0, 0.0),
                ][0 if inequalities else 1 :]
        elif constrained:
            if method == "COBYLA":
                # scipy's convention is g(x) >= 0; zoframe's is f_j(x) <= 0
                kwargs["constraints"] = [{"type": "ineq", "fun": lambda x: -g(x)}]
            else:
                kwargs["constraints"] = [optimize.NonlinearConstraint(g, -np.inf, 0.0)]
        with np.errstate(all="ignore"):
            return optimize.minimize(point, x0, **kwargs)

    return target


@dataclass(frozen=True)
class _ScipyPeer(_PeerBase):
    method: ClassVar[str] = ""
    #: run scipy in the driver's thread (set by :meth:`unobserved_steps`, never a parameter)
    in_driver_thread: bool = field(default=False, init=False, repr=False, compare=False)

    def unobserved_steps(self) -> Self:
        """This peer for a run that :func:`zoframe.minimize`'s loop drives to its end (not ask/tell).

        The scipy minimiser then runs in the driver's thread, with no thread and no handoffs: under the
        run loop (:meth:`drive`) the loop's work after each step (trace records, callback, checkpoints,
        ``max_iter``, ``max_time``, the test of the iterate) happens where the threaded run would pause,
        from inside scipy's calls, and a stop raised there ends scipy's run; stepped by hand, the first
        step runs scipy to its end and the steps hand out the states the threaded run would show. Either
        way the steps, states, counts, status, message and errors are those of the threaded run (see
        :class:`_ScipySession`). The flag is no parameter: it is not checkpointed, not compared on
        resume and does not change what the run computes.
        """
        out = copy.copy(self)
        object.__setattr__(out, "in_driver_thread", True)
        return out

    def drive(
        self, oracle: CountingOracle, state: PeerState, rng: np.random.Generator, pause: Callable[[PeerState], None]
    ) -> PeerState:
        """Steps for :class:`zoframe.run.RunLoop` (its ``drive`` protocol). In the driver's thread
        (:meth:`unobserved_steps`), the rest of the scipy run in this one call, ``pause`` called where
        each step ends (:meth:`_ScipySession.drive`); threaded, one :meth:`step`."""
        session = self._live(oracle, state)
        if session.done or not isinstance(session, _ScipySession) or session.bridge is not None:
            if not session.done:
                session.advance(oracle)
            return session.current()
        return session.drive(oracle, pause)

    def _options(self, oracle: CountingOracle, maxpoints: int) -> dict[str, Any]:
        raise NotImplementedError  # pragma: no cover

    def _target(
        self, x0: Array, bounds: tuple[Array, Array] | None, constrained: bool, options: dict[str, Any], m_eq: int = 0,
        inequalities: bool = True,
    ) -> _Run:
        return _scipy_minimize(self.method, x0, bounds, constrained, options, m_eq, inequalities)

    def validate(self, oracle: CountingOracle) -> None:
        super().validate(oracle)
        # scipy.optimize loads scipy's own BLAS (its linear algebra, e.g. SLSQP's QP, runs on it): loaded
        # before the run starts, the run's BLAS thread limit covers it, and the first run in a process
        # computes what the later ones do (with more BLAS threads, rounding differs)
        import scipy.optimize  # noqa: F401

    def _session(
        self, oracle: CountingOracle, x0: Array, seed: int, best: _Best, replay: Array | None
    ) -> _Session:
        maxfev = getattr(self, "maxfev", None)
        # let the oracle's exact budget bind (status BUDGET) unless the user capped the peer itself
        maxpoints = maxfev if maxfev is not None else _points_budget(oracle, None, 0, replay, slack=2)
        opts = self._options(oracle, maxpoints)
        run = self._target(x0, _box(oracle), oracle.kind == "constrained", opts, _m_eq(oracle), oracle.m > 0)
        pps = getattr(self, "points_per_step", None)
        # one driver iteration per 10 (d + 1) points by default: each handoff between the peer's
        # thread and the driver costs tens of microseconds, and an iteration boundary is needed
        # only for the trace, callbacks, checkpoints, max_iter and max_time
        chunk = int(pps) if pps is not None else _SCIPY_CHUNK * (oracle.dim + 1)
        return _ScipySession(oracle, x0, seed, best, replay, chunk, run, self.in_driver_thread, self.method, maxfev)


@dataclass(frozen=True)
class COBYLA(_ScipyPeer):
    """scipy's COBYLA (Powell 1994; the PRIMA implementation of Zhang): linear models on a simplex.

    Constrained problems are passed as one vector constraint ``-f(x) >= 0`` evaluated with the
    objective at the same point (one peer point = ``n + m`` evaluations).
    """

    handles_equalities: ClassVar[bool] = True
    method: ClassVar[str] = "COBYLA"
    peer_name: ClassVar[str] = "cobyla"
    rhobeg: float = param(1.0, symbol="rho_beg", doc="initial trust-region radius")
    rhoend: float = param(1e-8, symbol="rho_end", doc="final trust-region radius (scipy's tol)")
    maxfev: int | None = param(None, doc="cap on peer points (None: max_calls binds)")
    points_per_step: int | None = param(None, doc="peer points between driver iterations (None: 10 (dim + 1))")
    feas_tol: float = param(1e-6, doc="violation under which a point counts as feasible for the best point")

    def __post_init__(self) -> None:
        check_positive("rhobeg", self.rhobeg, "rho_beg")
        check_positive("rhoend", self.rhoend, "rho_end")
        if self.rhoend > self.rhobeg:
            raise InvalidParameterError(f"rhoend={self.rhoend} must not exceed rhobeg={self.rhobeg}")
        self._check()

    def _options(self, oracle: CountingOracle, maxpoints: int) -> dict[str, Any]:
        out: dict[str, Any] = {"rhobeg": self.rhobeg, "tol": self.rhoend}
        if maxpoints:
            out["maxiter"] = maxpoints
        return out


@dataclass(frozen=True)
class COBYQA(_ScipyPeer):
    """scipy's COBYQA (Ragonneau & Zhang 2023): quadratic models, SQP trust-region steps."""

    handles_equalities: ClassVar[bool] = True
    method: ClassVar[str] = "COBYQA"
    peer_name: ClassVar[str] = "cobyqa"
    initial_tr_radius: float = param(1.0, symbol="Delta_0", doc="initial trust-region radius")
    final_tr_radius: float = param(1e-8, symbol="Delta_end", doc="final trust-region radius")
    maxfev: int | None = param(None, doc="cap on peer points (None: max_calls binds)")
    points_per_step: int | None = param(None, doc="peer points between driver iterations (None: 10 (dim + 1))")
    feas_tol: float = param(1e-6, doc="violation under which a point counts as feasible for the best point")

    def __post_init__(self) -> None:
        check_positive("initial_tr_radius", self.initial_tr_radius)
        check_positive("final_tr_radius", self.final_tr_radius)
        self._check()

    def _options(self, oracle: CountingOracle, maxpoints: int) -> dict[str, Any]:
        out: dict[str, Any] = {"initial_tr_radius": self.initial_tr_radius, "final_tr_radius": self.final_tr_radius}
        if maxpoints:
            out["maxfev"] = maxpoints
            out["maxiter"] = 10 * maxpoints
        return out


@dataclass(frozen=True)
class NelderMead(_ScipyPeer):
    """scipy's Nelder-Mead simplex method (Nelder & Mead 1965; Gao & Han's adaptive coefficients)."""

    problem_kinds: ClassVar[frozenset[str]] = frozenset({"finite_sum"})
    method: ClassVar[str] = "Nelder-Mead"
    peer_name: ClassVar[str] = "nelder-mead"
    xatol: float = param(1e-8, doc="absolute tolerance on the simplex size")
    fatol: float = param(1e-12, doc="absolute tolerance on f over the simplex")
    adaptive: bool = param(False, doc="dimension-adaptive coefficients (Gao & Han 2012)")
    maxfev: int | None = param(None, doc="cap on peer points (None: max_calls binds)")
    points_per_step: int | None = param(None, doc="peer points between driver iterations (None: 10 (dim + 1))")

    def __post_init__(self) -> None:
        check_positive("xatol", self.xatol)
        check_positive("fatol", self.fatol)
        self._check()

    def _options(self, oracle: CountingOracle, maxpoints: int) -> dict[str, Any]:
        out: dict[str, Any] = {"xatol": self.xatol, "fatol": self.fatol, "adaptive": self.adaptive}
        if maxpoints:
            out["maxfev"] = maxpoints
            out["maxiter"] = maxpoints
        return out


@dataclass(frozen=True)
class Powell(_ScipyPeer):
    """scipy's Powell method (Powell 1964): conjugate directions with Brent line searches."""

    problem_kinds: ClassVar[frozenset[str]] = frozenset({"finite_sum"})
    method: ClassVar[str] = "Powell"
    peer_name: ClassVar[str] = "powell"
    xtol: float = param(1e-8, doc="line-search tolerance on x")
    ftol: float = param(1e-12, doc="relative tolerance on f")
    maxfev: int | None = param(None, doc="cap on peer points (None: max_calls binds)")
    points_per_step: int | None = param(None, doc="peer points between driver iterations (None: 10 (dim + 1))")

    def __post_init__(self) -> None:
        check_positive("xtol", self.xtol)
        check_positive("ftol", self.ftol)
        self._check()

    def _options(self, oracle: CountingOracle, maxpoints: int) -> dict[str, Any]:
        out: dict[str, Any] = {"xtol": self.xtol, "ftol": self.ftol}
        if maxpoints:
            out["maxfev"] = maxpoints
            out["maxiter"] = maxpoints
        return out


# --------------------------------------------------------------------------- scipy with difference gradients
#: scipy's relative step for ``jac="2-point"``: the square root of the machine epsilon
_REL_STEP = math.sqrt(float(np.finfo(np.float64).eps))


def _forward_steps(x: Array, rel_step: float, bounds: tuple[Array, Array] | None) -> Array:
    """The points ``x + h_i e_i`` ``(d, d)`` of a forward-difference gradient, scipy's ``"2-point"`` rule.

    ``h_i = rel_step * sign(x_i) * max(1, |x_i|)`` (``sign(0) = 1``); a step that would leave the
    bounds is taken backwards instead (as scipy's ``approx_derivative`` does with bounds).
    """
    d = x.shape[0]
    h = rel_step * np.where(x >= 0, 1.0, -1.0) * np.maximum(1.0, np.abs(x))
    if bounds is not None:
        out = (x + h > bounds[1]) | (x + h < bounds[0])
        h = np.where(out, -h, h)
    X = np.repeat(x[None, :], d, axis=0)
    X[np.arange(d), np.arange(d)] += h
    return X


def _fd_minimize(
    method: str,
    x0: Array,
    bounds: tuple[Array, Array] | None,
    constrained: bool,
    options: dict[str, Any],
    rel_step: float,
    m_eq: int = 0,
    inequalities: bool = True,
) -> _Run:
    """A scipy gradient method's whole run with forward-difference gradients of ``f`` and of all ``m``
    constraints: at each point scipy asks a gradient for, the ``d`` points ``x + h_i e_i`` are one
    batch (one objective call over all ``n`` components, one call of all ``m`` constraints), and the
    gradient and the ``m x d`` Jacobian are the differences to the values at ``x``. The last ``m_eq``
    values of the constraint vector are equality constraints, passed to scipy as such (``lb = ub = 0``).
    """
    from scipy import optimize

    def target(point: Callable[[Array], float], last: Callable[[], Array | None], batch: _Batch) -> Any:
        memo: dict[bytes, tuple[Array, Array | None]] = {}

        def derivatives(x: Array) -> tuple[Array, Array | None]:
            x = np.asarray(x, dtype=np.float64)
            key = x.tobytes()
            hit = memo.get(key)
            if hit is not None:
                return hit
            xc = x if bounds is None else np.clip(x, bounds[0], bounds[1])
            f0 = point(x)  # served from the last point when scipy has just asked for f(x)
            g0 = last()
            X = _forward_steps(xc, rel_step, bounds)
            F, G = batch(X)
            dx = np.diagonal(X - xc).copy()  # the steps actually taken (rounding, clipping)
            fixed = dx == 0.0  # a variable fixed by its bounds: no step, derivative 0
            safe = np.where(fixed, 1.0, dx)
            grad = np.where(fixed, 0.0, (F - f0) / safe)
            jac = None
            if G is not None and g0 is not None:
                # G (d, m) is the batch's own array: the differences in place, no (d, m) temporaries
                G -= g0[None, :]
                G /= safe[:, None]
                G[fixed] = 0.0
                jac = G.T  # (m, d)
            memo.clear()
            memo[key] = (grad, jac)
            return grad, jac

        def g(x: Array) -> Any:
            point(x)
            return last()

        kwargs: dict[str, Any] = {"method": method, "options": options, "jac": lambda x: derivatives(x)[0]}
        extra: dict[str, Any] = {}
        if method == "trust-constr":
            kwargs["hess"] = _quiet_bfgs()
            extra["hess"] = _quiet_bfgs()
        if bounds is not None:
            kwargs["bounds"] = optimize.Bounds(bounds[0], bounds[1])
        if constrained and m_eq:
            split = -m_eq  # the inequalities' rows, then the equalities'

            def jac_rows(x: Array, rows: slice) -> Any:
                jac = derivatives(x)[1]
                return None if jac is None else jac[rows]

            ineq, eq = slice(None, split), slice(split, None)
            kwargs["constraints"] = [
                optimize.NonlinearConstraint(lambda x: g(x)[ineq], -np.inf, 0.0, jac=lambda x: jac_rows(x, ineq), **extra),
                optimize.NonlinearConstraint(lambda x: g(x)[eq], 0.0, 0.0, jac=lambda x: jac_rows(x, eq), **extra),
            ][0 if inequalities else 1 :]  # equality constraints alone (m = 0): no inequality block
        elif constrained:
            kwargs["constraints"] = [
                optimize.NonlinearConstraint(g, -np.inf, 0.0, jac=lambda x: derivatives(x)[1], **extra)
            ]
        with np.errstate(all="ignore"):
            return optimize.minimize(point, x0, **kwargs)

    return target


def _quiet_bfgs() -> Any:
    """scipy's BFGS Hessian approximation without its warning for a zero gradient change.

    scipy skips that update and warns that the function may be linear; here it is skipped without
    the warning (a linear constraint or objective is normal: its difference gradient does not change).
    """
    from scipy import optimize

    class QuietBFGS(optimize.BFGS):  # type: ignore[misc]
        def update(self, delta_x: Array, delta_grad: Array) -> None:
            if np.all(delta_grad == 0.0):
                return  # scipy's own BFGS skips this update too
            super().update(delta_x, delta_grad)

    return QuietBFGS()


@dataclass(frozen=True)
class _FDPeer(_ScipyPeer):
    """A scipy gradient method on forward differences (the problem stays a black box).

    A gradient costs ``d`` peer points (``d (n + m)`` evaluations), evaluated as one batch; a
    point already evaluated (scipy asks ``f`` and ``g`` at the same ``x``) is not evaluated again.
    """

    rel_step: float = param(_REL_STEP, doc="relative difference step (scipy's '2-point': sqrt(eps))")

    def _check_fd(self) -> None:
        check_positive("rel_step", self.rel_step)
        if self.rel_step >= 1.0:
            raise InvalidParameterError(f"rel_step must be below 1, got {self.rel_step}")

    def _target(
        self, x0: Array, bounds: tuple[Array, Array] | None, constrained: bool, options: dict[str, Any], m_eq: int = 0,
        inequalities: bool = True,
    ) -> _Run:
        return _fd_minimize(self.method, x0, bounds, constrained, options, self.rel_step, m_eq, inequalities)


@dataclass(frozen=True)
class SLSQPFD(_FDPeer):
    """scipy's SLSQP (Kraft 1988: sequential least squares QP) with forward-difference gradients.

    The objective (all ``n`` components) and the constraint vector (all ``m`` constraints) are black
    boxes; their gradient and Jacobian are forward differences (scipy's ``jac="2-point"`` rule), the
    ``d`` difference points of one gradient evaluated as one batch through the counting oracle. Per
    iteration: ``d + 1`` peer points (plus the line search), a dense ``m x d`` Jacobian in memory.
    """

    handles_equalities: ClassVar[bool] = True
    method: ClassVar[str] = "SLSQP"
    peer_name: ClassVar[str] = "slsqp-fd"
    ftol: float = param(1e-6, doc="SLSQP's precision goal for f in its stopping test (scipy's default)")
    maxfev: int | None = param(None, doc="cap on peer points (None: max_calls binds)")
    points_per_step: int | None = param(None, doc="peer points between driver iterations (None: 10 (dim + 1))")
    feas_tol: float = param(1e-6, doc="violation under which a point counts as feasible for the best point")

    def __post_init__(self) -> None:
        check_positive("ftol", self.ftol)
        self._check_fd()
        self._check()

    def _options(self, oracle: CountingOracle, maxpoints: int) -> dict[str, Any]:
        # an iteration costs at least one point: maxpoints iterations never bind before the points do
        return {"ftol": self.ftol, "maxiter": maxpoints if maxpoints else 100}


@dataclass(frozen=True)
class TrustConstrFD(_FDPeer):
    """scipy's trust-constr (Byrd, Hribar & Nocedal 1999; Lalee, Nocedal & Plantenga 1998) with
    forward-difference gradients and BFGS Hessian approximations.

    Objective and constraints as for :class:`SLSQPFD`: one batch of ``d`` difference points per
    gradient, counted through the oracle.
    """

    handles_equalities: ClassVar[bool] = True
    method: ClassVar[str] = "trust-constr"
    peer_name: ClassVar[str] = "trust-constr-fd"
    gtol: float = param(1e-8, doc="tolerance on the Lagrangian gradient's norm (and the violation)")
    xtol: float = param(1e-8, doc="tolerance on the trust radius")
    initial_tr_radius: float = param(1.0, symbol="Delta_0", doc="initial trust-region radius")
    maxfev: int | None = param(None, doc="cap on peer points (None: max_calls binds)")
    points_per_step: int | None = param(None, doc="peer points between driver iterations (None: 10 (dim + 1))")
    feas_tol: float = param(1e-6, doc="violation under which a point counts as feasible for the best point")

    def __post_init__(self) -> None:
        check_positive("gtol", self.gtol)
        check_positive("xtol", self.xtol)
        check_positive("initial_tr_radius", self.initial_tr_radius)
        self._check_fd()
        self._check()

    def _options(self, oracle: CountingOracle, maxpoints: int) -> dict[str, Any]:
        return {"gtol": self.gtol, "xtol": self.xtol, "initial_tr_radius": self.initial_tr_radius,
                "maxiter": maxpoints if maxpoints else 1000}


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence two harmless notices of the peers' libraries (the peer thread is paused meanwhile):
    pycma's "import moarchiving failed" (an optional archive it does not need here) and PRIMA's
    "Invalid RHOEND" / "Invalid MAXFUN" (nevergrad's Cobyla passes ``tol=0`` and, near the end of its
    budget, fewer than ``d + 2`` evaluations to scipy, which corrects both)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*moarchiving.*")
        warnings.filterwarnings("ignore", message="COBYLA: Invalid (RHOEND|MAXFUN)")
        yield


# --------------------------------------------------------------------------- pycma
def _cma() -> Any:
    return require("cma", extra="peers", feature="the cma-es peer (pycma)")


class _CMASession(_Session):
    def __init__(
        self, solver: CMAES, oracle: CountingOracle, x0: Array, seed: int, best: _Best, replay: Array | None
    ) -> None:
        super().__init__(x0, seed, best, oracle.m if oracle.kind == "constrained" else 0, replay)
        cma = _cma()
        gen = np.random.default_rng(seed)

        def randn(*size: int) -> Array:  # pycma's only source of randomness: the run's Generator
            return gen.standard_normal(size)

        opts: dict[str, Any] = {"randn": randn, "seed": 1, "verbose": -9, "tolfun": solver.tolfun,
                                "tolx": solver.tolx, "maxfevals": _points_budget(oracle, solver.maxfev, 10**9, replay)}
        if solver.popsize is not None:
            opts["popsize"] = solver.popsize
        box = _box(oracle)
        if box is not None:
            opts["bounds"] = [list(box[0]), list(box[1])]
        self.cap = solver.maxfev
        self.es = cma.CMAEvolutionStrategy(list(x0), solver.sigma0, opts)
        self.al: Any = None
        self._row: list[Any] = [None, None]
        if oracle.kind == "constrained":
            # cma's augmented Lagrangian (Atamna, Auger & Hansen 2016/2020); values come from the batch
            with _quiet():
                self.al = cma.ConstrainedFitnessAL(lambda x: self._row[0], lambda x: self._row[1])

    def advance(self, oracle: CountingOracle) -> None:
        while self.replaying and not self.done:  # after a resume: the logged generations first
            self._generation(oracle)
        if not self.done:
            self._generation(oracle)

    def _generation(self, oracle: CountingOracle) -> None:
        es = self.es
        if es.stop():
            self.finish(*_cma_status(dict(es.stop())))
            return
        X = np.asarray(es.ask(), dtype=np.float64)
        k = X.shape[0]
        capped = False
        if not self.replaying:
            if self.cap is not None and self.logged() + k > self.cap:
                k, capped = max(0, self.cap - self.logged()), True
            k = affordable(oracle, k)
        if k < X.shape[0]:
            # a partial generation cannot be told to CMA-ES: evaluate what fits (counted), then stop
            if k:
                self.values(oracle, X[:k])
            if capped and self.cap is not None and self.logged() >= self.cap:
                self.capped()
            else:
                self.budget(oracle)
            return
        F, _, G = self.values(oracle, X)
        if self.al is None or G is None:
            es.tell(list(X), list(F))
        else:
            vals = []
            with _quiet():
                for r in range(X.shape[0]):
                    self._row[0], self._row[1] = float(F[r]), list(G[r])
                    vals.append(self.al(X[r]))
                es.tell(list(X), vals)
                self.al.update(es)


#: pycma's stop conditions by what they mean: a budget, a blow-up, or a convergence test
_CMA_BUDGET = frozenset({"maxfevals", "maxiter", "timeout"})
_CMA_DIVERGED = frozenset({"tolupsigma", "tolfacupx"})
_CMA_CONVERGED = frozenset({"tolfun", "tolx", "tolfunhist", "tolfunrel", "ftarget"})


def _cma_status(stop: Mapping[str, Any]) -> tuple[str, Status]:
    """pycma's stop conditions as a status: budgets first, then blow-ups, then convergence; anything
    else (stagnation, no effect of the steps, an ill-conditioned covariance, a flat fitness) is no
    certificate (``FAILED``)."""
    keys = set(stop)
    message = f"cma: {dict(stop)}"
    if keys & _CMA_BUDGET:
        return message, Status.BUDGET
    if keys & _CMA_DIVERGED:
        return f"{message}: the step size blew up (the objective may be unbounded below)", Status.DIVERGED
    if keys & _CMA_CONVERGED:
        return message, Status.CONVERGED
    return f"{message}: stopped without a convergence test", Status.FAILED


@dataclass(frozen=True)
class CMAES(_PeerBase):
    """pycma's CMA-ES (Hansen & Ostermeier 2001; Hansen 2016), one generation per step.

    Constrained problems use pycma's augmented-Lagrangian fitness ``cma.ConstrainedFitnessAL``
    (Atamna, Auger & Hansen, GECCO 2020): a whole generation is evaluated as one batch (``popsize``
    points, ``popsize * (n + m)`` evaluations), then each point's ``f`` and constraint vector enter
    the AL fitness and the multipliers are updated after ``tell``. Normal samples come from the run's
    Generator (pycma's ``randn`` option), so the same seed gives the same run.
    """

    peer_name: ClassVar[str] = "cma-es"
    sigma0: float = param(0.5, symbol="sigma_0", doc="initial step size")
    popsize: int | None = param(None, symbol="lambda", doc="population size (None: 4 + 3 ln d)")
    tolfun: float = param(1e-11, doc="pycma's tolfun stopping tolerance")
    tolx: float = param(1e-11, doc="pycma's tolx stopping tolerance")
    maxfev: int | None = param(None, doc="cap on peer points (None: max_calls binds)")
    feas_tol: float = param(1e-6, doc="violation under which a point counts as feasible for the best point")

    def __post_init__(self) -> None:
        check_positive("sigma0", self.sigma0, "sigma_0")
        if self.popsize is not None:
            check_int("popsize", self.popsize, 2)
        check_positive("tolfun", self.tolfun)
        check_positive("tolx", self.tolx)
        self._check()

    def _session(
        self, oracle: CountingOracle, x0: Array, seed: int, best: _Best, replay: Array | None
    ) -> _Session:
        return _CMASession(self, oracle, x0, seed, best, replay)


# --------------------------------------------------------------------------- nevergrad
def _nevergrad() -> Any:
    return require("nevergrad", extra="peers", feature="the nevergrad peers (ngopt, ng-cobyla)")


class _NGSession(_Session):
    def __init__(
        self,
        optimizer: str,
        solver: _NGPeer,
        oracle: CountingOracle,
        x0: Array,
        seed: int,
        best: _Best,
        replay: Array | None,
    ) -> None:
        super().__init__(x0, seed, best, oracle.m if oracle.kind == "constrained" else 0, replay)
        ng = _nevergrad()
        param_ = ng.p.Array(init=x0)
        box = _box(oracle)
        if box is not None:
            with warnings.catch_warnings():
                # nevergrad advises bounds at least 3 of its steps (sigma = 1) apart; narrower ones work
                warnings.filterwarnings("ignore", message="Bounds are .* sigma away")
                param_.set_bounds(box[0], box[1])
        param_.random_state = np.random.RandomState(seed)
        self.budget_points = _points_budget(oracle, solver.maxfev, 100 * (oracle.dim + 1), replay)
        self.name = optimizer
        self.opt = ng.optimizers.registry[optimizer](parametrization=param_, budget=self.budget_points, num_workers=1)
        self.chunk = solver.points_per_step if solver.points_per_step is not None else oracle.dim + 1
        self.told = 0
        # nevergrad runs its recast optimisers (Cobyla, Powell inside NGOpt's portfolios, ...) in
        # non-daemon threads: stop them when the run ends or is abandoned, or the interpreter would
        # wait for them at exit. Besides the optimisers reachable from ``opt``, every such thread
        # started while this session advanced is remembered and stopped (NGOpt nests some deeply).
        self.threads: set[threading.Thread] = set()
        self.dim = oracle.dim
        # nevergrad is driven from a daemon thread of this session, so the threads it starts are daemon
        # threads too: a run abandoned without finishing (a callback that raised, an error kept in a
        # traceback) can never keep the process from exiting
        self.worker = _DaemonWorker()
        weakref.finalize(self, _end_nevergrad, self.opt, self.threads, self.worker)

    def finish(self, message: str, status: Status) -> None:
        super().finish(message, status)
        _end_nevergrad(self.opt, self.threads, self.worker)

    def advance(self, oracle: CountingOracle) -> None:
        before = set(_nevergrad_threads())
        try:
            self.worker.call(functools.partial(self._advance_quietly, oracle))
        except BaseException:
            self.threads.update(t for t in _nevergrad_threads() if t not in before)
            _end_nevergrad(self.opt, self.threads, self.worker)
            raise
        self.threads.update(t for t in _nevergrad_threads() if t not in before)

    def _advance_quietly(self, oracle: CountingOracle) -> None:
        with _quiet():
            self._advance(oracle)

    def _advance(self, oracle: CountingOracle) -> None:
        while self.replaying and not self.done:  # after a resume: the logged points first
            self._point(oracle)
        for _ in range(self.chunk):
            if self.done:
                return
            if self.told >= self.budget_points:
                self.finish(f"nevergrad: used its budget of {self.budget_points} points", Status.BUDGET)
                return
            if affordable(oracle, 1) < 1:
                self.budget(oracle)
                return
            self._point(oracle)

    def _point(self, oracle: CountingOracle) -> None:
        from nevergrad.common.errors import FinishedUnderlyingOptimizerWarning

        try:
            with warnings.catch_warnings():
                # a recast optimiser (Cobyla, ...) that has converged would be answered with random
                # points from here on: the run ends instead, on the best point seen
                warnings.simplefilter("error", FinishedUnderlyingOptimizerWarning)
                cand = self.opt.ask()
        except FinishedUnderlyingOptimizerWarning:
            # nevergrad restarts its recast optimisers from their best point until its count of asks
            # reaches the budget, and reports neither why they stopped nor a convergence test
            self.finish(f"nevergrad: the underlying {self.name} has finished after {self.told} of {self.budget_points} "
                        "points (nevergrad restarts it until its budget of asks is used; no convergence test)",
                        Status.BUDGET)
            return
        except TypeError as exc:
            raise _nevergrad_failure(self.name, exc) from exc
        X = np.asarray(cand.value, dtype=np.float64).reshape(1, -1)
        F, _, G = self.values(oracle, X)
        try:
            if G is None:
                self.opt.tell(cand, float(F[0]))
            else:
                self.opt.tell(cand, float(F[0]), constraint_violation=np.maximum(G[0], 0.0))
        except TypeError as exc:
            raise _nevergrad_failure(self.name, exc) from exc
        self.told += 1
        _settle_recast(self.opt)


def _settle_recast(opt: Any) -> None:
    """Wait until a recast optimiser's thread (nevergrad's Cobyla, Powell, ...) has posted its next point or ended.

    After a ``tell`` that thread computes its next point concurrently; what it warns on the way
    (scipy's "COBYLA: Invalid MAXFUN" near the end of a budget) would meet whatever warning filters
    happen to be in force then, which under ``-W error`` decides whether the thread dies and so
    where the run ends. Waiting here, inside the session's quiet window, makes the filters it meets
    the same on every run (one Python-level queue read per point; the point is put back unread).
    """
    inner = getattr(getattr(opt, "_messaging_thread", None), "_thread", None)
    q = getattr(inner, "messages_ask", None)
    if inner is None or q is None or not hasattr(q, "get") or not hasattr(q, "put"):
        return  # not a recast optimiser, or one without a thread yet
    if q.empty() and not inner.is_alive():
        return
    item = q.get()
    q.put(item)  # the queue holds at most this one message: the thread waits for its answer (or has ended)


class _DaemonWorker:
    """Runs calls in one daemon thread while the caller waits (exactly one of the two runs at a time).

    Threads started by such a call are daemon threads (a thread inherits the flag of its creator).
    The thread is started at the first call and holds no reference to the caller's objects between
    calls; :meth:`close` ends it.
    """

    def __init__(self) -> None:
        self._in: queue.SimpleQueue[Callable[[], Any] | None] = queue.SimpleQueue()
        self._out: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def call(self, fn: Callable[[], Any]) -> Any:
        if self._thread is None:
            self._thread = threading.Thread(target=_worker_main, args=(self._in, self._out),
                                            name="zoframe-nevergrad", daemon=True)
            self._thread.start()
        self._in.put(fn)
        ok, value = self._out.get()
        if not ok:
            raise value
        return value

    def close(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            self._in.put(None)


def _worker_main(inbox: queue.SimpleQueue[Callable[[], Any] | None], outbox: queue.SimpleQueue[tuple[bool, Any]]) -> None:
    while True:
        fn = inbox.get()
        if fn is None:
            return
        try:
            outbox.put((True, fn()))
        except BaseException as exc:  # handed to the caller's thread
            outbox.put((False, exc))
        del fn


def _end_nevergrad(opt: Any, threads: set[threading.Thread], worker: _DaemonWorker) -> None:
    _stop_nevergrad_threads(opt, threads)
    worker.close()


def _nevergrad_threads() -> list[threading.Thread]:
    """The live worker threads of nevergrad's recast optimisers."""
    return [t for t in threading.enumerate() if type(t).__module__.startswith("nevergrad.") and hasattr(t, "stop")]


def _stop_nevergrad_threads(opt: Any, threads: set[threading.Thread] | None = None, depth: int = 0) -> None:
    """Ask the worker thread of every recast optimiser inside ``opt`` (NGOpt nests them), and each of
    ``threads``, to stop."""
    for thread_ in list(threads or ()):
        if thread_.is_alive():
            thread_.stop()  # type: ignore[attr-defined]
    if opt is None or depth > 8:
        return
    thread = getattr(opt, "_messaging_thread", None)
    if thread is not None and callable(getattr(thread, "stop", None)):
        thread.stop()
    for value in list(vars(opt).values()) if hasattr(opt, "__dict__") else ():
        if isinstance(value, dict):  # e.g. a portfolio's optimisers by name
            items: tuple[Any, ...] = tuple(value.values())
        else:
            items = tuple(value) if isinstance(value, (list, tuple)) else (value,)
        for item in items:
            if type(item).__module__.startswith("nevergrad.optimization") and hasattr(item, "ask"):
                _stop_nevergrad_threads(item, None, depth + 1)


def _nevergrad_failure(name: str, exc: TypeError) -> ZoframeError:
    """nevergrad's own TypeErrors, e.g. its MetaModel's ``float(array)`` that numpy >= 2.4 rejects."""
    import nevergrad

    return ZoframeError(
        f"nevergrad {nevergrad.__version__} failed inside its optimiser {name!r} ({exc}). nevergrad's MetaModel "
        f"(chosen by NGOpt for small dimensions and budgets) converts one-element arrays with float(), which "
        f"numpy {np.__version__} rejects; this is a nevergrad bug. Use ng-cobyla or cma-es, another "
        "budget, or numpy < 2.4"
    )


@dataclass(frozen=True)
class _NGPeer(_PeerBase):
    optimizer: ClassVar[str] = ""
    maxfev: int | None = param(None, doc="peer points announced to nevergrad (None: what max_calls allows)")
    points_per_step: int | None = param(None, doc="peer points per driver iteration (None: dim + 1)")
    feas_tol: float = param(1e-6, doc="violation under which a point counts as feasible for the best point")

    def __post_init__(self) -> None:
        self._check()

    def _session(
        self, oracle: CountingOracle, x0: Array, seed: int, best: _Best, replay: Array | None
    ) -> _Session:
        return _NGSession(self.optimizer, self, oracle, x0, seed, best, replay)


@dataclass(frozen=True)
class NGOpt(_NGPeer):
    """nevergrad's ``NGOpt`` (Meunier et al., IEEE TEVC 2022): picks an optimiser from d and the budget.

    nevergrad needs its budget up front: the peer announces ``max_calls // (n + m)`` points.
    Constraint values enter nevergrad's ``tell(..., constraint_violation=max(f_j, 0))``.
    """

    optimizer: ClassVar[str] = "NGOpt"
    peer_name: ClassVar[str] = "ngopt"


@dataclass(frozen=True)
class NGCobyla(_NGPeer):
    """nevergrad's ``Cobyla`` (COBYLA recast as ask-and-tell by nevergrad)."""

    optimizer: ClassVar[str] = "Cobyla"
    peer_name: ClassVar[str] = "ng-cobyla"
