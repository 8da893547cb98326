"""Pieces shared by the peers of :mod:`zoframe_peers.smooth` and :mod:`zoframe_peers.composite`.

They reuse the peer framework of :mod:`zoframe_peers.solvers` (the session that runs a peer's whole
loop in a worker thread paused every ``points_per_step`` points, the replay log that makes a
checkpoint, the exact budget, the vetting of a "converged" claim) and add two things:

* :class:`_StatusSession`: a scipy-style session whose end is read by the peer's own rule (a
  library's exit flags rather than scipy's ``status`` codes);
* :class:`_OwnSession` and :class:`_OwnLoopPeer`: a peer whose loop evaluates something other than
  the full objective at ``x`` (the minimax ``F`` at pairs ``(x, y)``, the residuals ``r_i``) and whose
  best point is not simply the lowest value evaluated (the lowest ``Phi(x) = max_y F(x, y)`` of a nested
  minimax run, the lowest ``f + h`` among the proximal points of a composite one). The loop asks for
  values through ``batch(X)`` (one oracle call per batch, counted as ``len(X)`` peer points) and
  reports its candidates with ``report(x, value, aux)``: the lowest ``value`` reported is the
  state's ``x``, with its ``aux`` arrays (the maximiser ``y``, the blocks ``y_j`` and ``lam``) in
  the state for ``outputs``.

A checkpoint stores the values of every point evaluated (one row per point); on resume the loop
runs again from the start, served from that log (no evaluation repeated), and reports the same
candidates, so the resumed run is the uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
import dataclasses
from dataclasses import dataclass, field
import functools
from typing import Any, ClassVar, NamedTuple
import weakref

import numpy as np

from zoframe.errors import BudgetExhausted, NonFiniteValueError
from zoframe.oracle import CountingOracle
from zoframe.protocols import Array
from zoframe.result import Status
from zoframe_peers.solvers import (
    _SCIPY_CHUNK,
    PeerState,
    _Best,
    _Cancelled,
    _check_point,
    _PeerBase,
    _PeerCapReached,
    _ScipySession,
    _Session,
    _start,
    _state,
    affordable,
    point_cost,
)

__all__ = ["AuxState", "Outcome"]

#: ``evaluate(oracle, X) -> (f, extra)``: one oracle call at the rows of ``X``; ``f`` ``(k,)`` is what
#: the loop minimises (or maximises), ``extra`` ``(k, c)`` more numbers per row it needs (or None)
Evaluate = Callable[[CountingOracle, Array], "tuple[Array, Array | None]"]
#: ``report(x, value, aux)``: a candidate for the best point (the lowest value wins)
Report = Callable[[Array, float, "tuple[Array, ...]"], None]


class Outcome(NamedTuple):
    """How a peer's own loop ended: the message and the status it claims (``CONVERGED`` is vetted)."""

    message: str
    status: Status


@dataclass(frozen=True)
class AuxState(PeerState):
    """:class:`~zoframe_peers.solvers.PeerState` with the arrays reported with the best point (``aux``)."""

    aux: tuple[Array, ...] = field(default_factory=tuple)


class _StatusSession(_ScipySession):
    """A scipy session whose finished run is read by ``status_of(outcome) -> (message, status)``."""

    status_of: Callable[[Any], tuple[str, Status]]

    def _conclude(self, oracle: CountingOracle, outcome: Any, error: BaseException | None) -> None:
        if error is None:
            self.finish(*self.status_of(outcome))
        else:
            super()._conclude(oracle, outcome, error)


def _weak_report(ref: weakref.ref[_OwnSession], x: Array, value: float, aux: tuple[Array, ...]) -> None:
    session = ref()
    if session is None:
        raise _Cancelled
    session.report(x, value, aux)


class _OwnSession(_StatusSession):
    """A peer's own loop in the worker thread of :class:`~zoframe_peers.solvers._ScipySession`.

    ``make_run(report)`` builds the loop ``run(point, last, batch)``; every value comes from
    ``batch(X)``, evaluated here by ``evaluate(oracle, X)`` (one oracle call) or served from the
    replay log, whose rows are ``[f, extra...]`` (``1 + columns`` numbers per point). The budget is
    held as the other peers hold it: a batch that does not fit whole is cut to the points that fit,
    then the run ends (``BUDGET``, or the peer's ``maxfev``). ``report`` keeps the best point and its
    ``aux`` arrays. Always threaded (the loop pauses every ``chunk`` points for the driver).
    """

    def __init__(
        self,
        oracle: CountingOracle,
        x0: Array,
        seed: int,
        best: _Best,
        replay: Array | None,
        chunk: int,
        make_run: Callable[[Report], Any],
        evaluate: Evaluate,
        columns: int,
        status_of: Callable[[Any], tuple[str, Status]],
        aux0: tuple[Array, ...],
        state_cls: type[AuxState],
        cap: int | None = None,
    ) -> None:
        # the loop holds the session weakly (as the bridge does): a dropped session ends its thread
        report = functools.partial(_weak_report, weakref.ref(self))
        super().__init__(oracle, x0, seed, best, None, chunk, make_run(report), False, "", cap)
        # _ScipySession sized the log for the oracle's constraints; this peer's rows hold ``columns`` extra
        # numbers: the log (and the replay, loaded into it) is set up again for them
        _Session.__init__(self, x0, seed, best, columns, replay)
        self.cap = cap
        self.status_of = status_of
        self.evaluate = evaluate
        self.aux = aux0
        self.state_cls = state_cls
        #: ``vet_claim(session, message) -> (message, status)``: a peer's own check of a CONVERGED claim,
        #: made when the run ends (in the driver's thread; its evaluations go through :meth:`values_of`)
        self.vet_claim: Callable[[_OwnSession, str], tuple[str, Status]] | None = None

    def report(self, x: Array, value: float, aux: tuple[Array, ...]) -> None:
        best = self.best
        kept = best.x
        best.observe_one(np.asarray(x, dtype=np.float64), float(value), 0.0)
        if best.x is not kept:  # a new best point: its arrays go with it
            self.aux = tuple(np.array(a, dtype=np.float64, copy=True) for a in aux)

    def current(self) -> PeerState:
        base = _state(self)
        out = self.state_cls(**{f: getattr(base, f) for f in _PEER_FIELDS}, aux=self.aux)
        object.__setattr__(out, "_session", self)  # not a field: checkpoints store the fields only
        return out

    def _conclude(self, oracle: CountingOracle, outcome: Any, error: BaseException | None) -> None:
        if error is None and self.vet_claim is not None:
            message, status = self.status_of(outcome)
            if status is Status.CONVERGED:
                message, status = self.vet_claim(self, message)
            self.finish(message, status)
        else:
            super()._conclude(oracle, outcome, error)

    def _point(self, x: Array) -> float:
        F, _ = self._batch(np.asarray(x, dtype=np.float64).reshape(1, -1))
        return float(F[0])

    def _batch(self, X: Array) -> tuple[Array, Array | None]:
        return self.values_of(X, self.evaluate)

    def values_of(self, X: Array, evaluate: Evaluate) -> tuple[Array, Array | None]:
        """``f`` ``(k,)`` and the extra columns ``(k, columns)`` (or None) at the rows of ``X`` by ``evaluate``:
        replayed, then evaluated (one oracle call) and logged."""
        k = X.shape[0]
        r = min(k, self._replay_len - self._pos)
        Fs: list[Array] = []
        Gs: list[Array] = []
        if r > 0:  # replaying after a resume
            rows = self._replay[self._pos:self._pos + r]
            self._pos += r
            Fs.append(rows[:, 0].copy())
            Gs.append(rows[:, 1:].copy())
        if r < k:
            rest = X[r:]
            want = rest.shape[0]
            cap = self.cap
            fit = want if cap is None else min(want, max(0, cap - self.logged()))
            fit = affordable(self.oracle, fit)
            if fit:
                try:
                    F, G = evaluate(self.oracle, rest[:fit])
                except NonFiniteValueError as exc:
                    _check_point(rest[:fit], exc)
                    raise
                self._append(F[:, None] if G is None else np.column_stack([F, G]))
                Fs.append(F)
                Gs.append(np.zeros((fit, 0)) if G is None else G)
            if fit < want:
                if cap is not None and self.logged() >= cap:
                    raise _PeerCapReached(cap)
                raise BudgetExhausted(want * point_cost(self.oracle), self.oracle.calls, int(self.oracle.max_calls or 0))
        return np.concatenate(Fs), (np.concatenate(Gs) if self.m else None)


_PEER_FIELDS = tuple(f.name for f in dataclasses.fields(PeerState))


@dataclass(frozen=True)
class _OwnLoopPeer(_PeerBase):
    """A peer whose loop runs in an :class:`_OwnSession`; subclasses say what it evaluates and how it runs.

    ``_run(oracle, x0, report, maxpoints)``: the loop ``run(point, last, batch)`` (built before any
    evaluation, from the oracle's structure only); ``_evaluate(oracle, X)``: one batch's values;
    ``_columns(oracle)``: the extra numbers per point of the log; ``_aux0(oracle, x0)``: the arrays
    reported with ``x0`` before any candidate; ``_status(outcome)``: the run's end.
    """

    state_cls: ClassVar[type[AuxState]] = AuxState

    def validate(self, oracle: CountingOracle) -> None:
        super().validate(oracle)
        # scipy.optimize loads scipy's own BLAS: loaded before the run starts, the run's BLAS thread
        # limit covers it (as for the scipy peers)
        import scipy.optimize  # noqa: F401

    def init(self, oracle: CountingOracle, x0: Array, rng: np.random.Generator) -> PeerState:
        start, note = _start(oracle, x0)  # every peer starts inside the bounds, alike
        seed = int(rng.integers(2**31 - 1))
        session = self._session(oracle, start, seed, _Best(start, 0.0), None)
        session.note = note
        return session.current()

    def step(self, oracle: CountingOracle, state: PeerState, rng: np.random.Generator) -> PeerState:
        session: _Session | None = getattr(state, "_session", None)
        if session is None:  # resumed from a checkpoint: the loop runs again from the start on the logged values
            x0 = np.array(state.x0, dtype=np.float64)
            session = self._session(oracle, x0, int(state.seed), _Best(x0, 0.0), np.array(state.log, dtype=np.float64))
            session.note = str(getattr(state, "note", ""))
        if not session.done:
            session.advance(oracle)
        return session.current()

    def outputs(self, state: PeerState) -> Mapping[str, Array]:
        return {"x": state.x}

    def _session(
        self, oracle: CountingOracle, x0: Array, seed: int, best: _Best, replay: Array | None
    ) -> _OwnSession:
        maxfev = getattr(self, "maxfev", None)
        rem = oracle.remaining
        done = 0 if replay is None else int(replay.shape[0])
        # the points the run may still evaluate (after a resume, the logged ones count too)
        maxpoints = maxfev if maxfev is not None else (None if rem is None else rem // point_cost(oracle) + done)
        pps = getattr(self, "points_per_step", None)
        chunk = int(pps) if pps is not None else _SCIPY_CHUNK * (oracle.dim + 1)
        return _OwnSession(
            oracle, x0, seed, best, replay, chunk,
            make_run=functools.partial(self._run, oracle, x0, maxpoints=maxpoints),
            evaluate=self._evaluate, columns=self._columns(oracle), status_of=self._status,
            aux0=self._aux0(oracle, x0), state_cls=self.state_cls, cap=maxfev,
        )  # fmt: skip

    # ------------------------------------------------------------------ what a subclass provides
    def _run(self, oracle: CountingOracle, x0: Array, report: Report, *, maxpoints: int | None) -> Any:
        raise NotImplementedError  # pragma: no cover

    def _evaluate(self, oracle: CountingOracle, X: Array) -> tuple[Array, Array | None]:
        raise NotImplementedError  # pragma: no cover

    def _columns(self, oracle: CountingOracle) -> int:
        return 0

    def _aux0(self, oracle: CountingOracle, x0: Array) -> tuple[Array, ...]:
        return ()

    def _status(self, outcome: Any) -> tuple[str, Status]:
        return str(outcome.message), Status(outcome.status)


def mean_objective(oracle: CountingOracle, X: Array) -> tuple[Array, None]:
    """The full objective ``f`` (mean of all ``n`` components) at the rows of ``X``: one oracle call."""
    V = oracle.objective(X, purpose="peer")
    return (V[:, 0].copy() if V.shape[1] == 1 else V.mean(axis=1)), None
