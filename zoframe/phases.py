"""Phased solvers: a solver as a short sequence of phases with explicit hand-over rules.

A solver of any family is built from a few *phases*, each a small object with one job and its own
state: the paper's stochastic step (the algorithm box, read line by line), a deterministic
refinement where the problem allows it, a restoration, ... A phase knows how to start from what the
previous one handed over (:class:`Carry`), how to take one step, and when it is over
(:class:`PhaseEnd`: go on to a named phase, or stop the run with a status and a message). The
sequencing lives here, once, in :class:`PhasedSolver`:

* ``init`` starts the first phase at ``x0`` (and the problem's ``y0`` / ``lam``);
* ``step`` takes one step of the running phase, applies the divergence test
  (:class:`Runaway`) to its iterate and its value, then asks the phase whether it is over; a phase
  that hands over starts the next one from its :class:`Carry` *within the same step* (so no
  iteration is spent on bookkeeping);
* a phase is also asked whether it is over right after it starts (in ``init`` and after a
  hand-over), so that it can hand over before its first step: a phase that finds at its start that
  another one suits the problem better (e.g. a stochastic phase on a problem small enough for the
  deterministic one) is logged with 0 iterations and its start's evaluations;
* ``terminate`` turns the stop a phase asked for into the run's status and message
  (:class:`~zoframe.solver.StopReason`);
* ``trace_row`` gives the trace a ``phase`` column (the index of the running phase), and
  ``final_notes`` lists every phase the run went through, with its iterations, its evaluations and
  why it ended (``Result.notes``).

The evaluations of a phase are those made from its ``start`` (included) to its end; a phase's
``start`` may evaluate (a full pass at the hand-over point, say).

A solver whose phases test divergence themselves (with their own bound and their own way out, e.g.
a restart from the best feasible point seen) sets :attr:`PhasedSolver.runaway` to ``None``: the
generic test, and the ``outputs`` it reads after every step, are then skipped.

The state, :class:`PhasedState`, holds the running phase's own state as a field (a frozen
dataclass), so checkpoints store it as any other state (nested dataclasses are supported by
:mod:`zoframe.checkpoint`). A phase never sees the problem: only the counting oracle, like every
solver.

Writing a phase: a frozen dataclass with ``name`` and the methods of :class:`Phase`; its state must
have an ``x`` field and may have ``value`` (the solver's estimate of the objective at ``x``, used by
the divergence test; ``nan`` when it has none). ``outputs(state)`` (optional) reports more than
``x`` (``y`` of a minimax run, ``y0``, ``lam`` of a composite run).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
import dataclasses
from dataclasses import dataclass, field
import enum
import json
import math
from typing import Any, ClassVar, Protocol

import numpy as np

from zoframe.errors import InvalidParameterError
from zoframe.oracle import CountingOracle
from zoframe.protocols import Array
from zoframe.result import Status
from zoframe.solver import SolverBase, StopReason

__all__ = [
    "Carry",
    "End",
    "Phase",
    "PhaseEnd",
    "PhasedSolver",
    "PhasedState",
    "Runaway",
    "check_divergence_limit",
]


class End(enum.Enum):
    """How a phase ends: hand over to another phase, or stop the run with a status."""

    NEXT = "next"  #: hand over to the phase named by ``PhaseEnd.to`` (default: the following one)
    CONVERGED = "converged"  #: the phase's stopping test passed (the run's certificate then decides success)
    NOISE_LIMITED = "noise_limited"  #: no further progress is possible at the noise level of the values
    DIVERGED = "diverged"  #: the iterate or the values ran away
    FAILED = "failed"  #: the phase stalled without meeting its test
    BUDGET = "budget"  #: the budget left cannot pay for one more iteration of the phase
    MAX_ITER = "max_iter"  #: the phase ran the iterations the user gave it (no stationarity claim)


_STATUS: dict[End, Status] = {
    End.CONVERGED: Status.CONVERGED,
    End.NOISE_LIMITED: Status.NOISE_LIMITED,
    End.DIVERGED: Status.DIVERGED,
    End.FAILED: Status.FAILED,
    End.BUDGET: Status.BUDGET,
    End.MAX_ITER: Status.MAX_ITER,
}


@dataclass(frozen=True)
class PhaseEnd:
    """A phase is over: ``how`` it ended, in words (``message``), and where the run goes (``to``: the name
    of the next phase for :attr:`End.NEXT`, ``None``: the following one in the sequence)."""

    how: End
    message: str
    to: str | None = None


@dataclass(frozen=True)
class Carry:
    """What one phase hands to the next: the point ``x``, the solver's other variables (``y``, ``lam``,
    ``y0``, ...) and anything else a later phase can use (``extras``: e.g. the best feasible point, a
    multiplier estimate, the noise level), plus the sentence that explains the hand-over."""

    x: Array
    extras: Mapping[str, Any] = field(default_factory=dict)
    why: str = ""


class Phase(Protocol):
    """One phase of a :class:`PhasedSolver` (see the module docstring)."""

    @property
    def name(self) -> str:
        """The phase's name in the notes and in hand-overs (``PhaseEnd.to``); read-only, so that frozen dataclasses
        implement the protocol."""
        ...

    def start(self, oracle: CountingOracle, carry: Carry, rng: np.random.Generator) -> Any:
        """The phase's first state, from what the previous phase handed over (or from ``x0``)."""
        ...

    def step(self, oracle: CountingOracle, state: Any, rng: np.random.Generator) -> Any:
        """One iteration of the phase."""
        ...

    def end(self, oracle: CountingOracle, state: Any) -> PhaseEnd | None:
        """``None`` while the phase goes on; else how it ended (asked after every step, and right after ``start``)."""
        ...

    def carry(self, state: Any) -> Carry:
        """What the phase hands over when it ends."""
        ...


@dataclass(frozen=True)
class Runaway:
    """The divergence test every phase of a :class:`PhasedSolver` gets after every step.

    A run has run away when its iterate (or any reported variable, e.g. ``y``) is not finite or grows
    beyond ``limit * max(1, |x0|_inf)`` (default ``limit = 1e8``: eight orders of magnitude beyond the
    starting point's scale), or when its value estimate is not finite or grows beyond
    ``|f_start| * limit`` above the first value seen (a minimisation whose values grow by eight orders
    of magnitude is not converging). The message says where (the size reached, the variable) and when
    (the iteration and the phase).
    """

    limit: float = 1e8

    def check(self, outputs: Mapping[str, Array], value: float, x0_scale: float, f_start: float) -> str | None:
        bound = self.limit * x0_scale
        for name, arr in outputs.items():
            a = np.asarray(arr)
            if a.dtype.kind != "f" or a.size == 0:
                continue
            size = float(np.abs(a).max())  # NaN or inf when an entry is: one reduction for both tests
            if not size <= bound:
                if not math.isfinite(size):
                    return f"{name} is not finite"
                return f"|{name}|_inf = {size:.3g} exceeds {bound:.3g} ({self.limit:g} times the starting point's scale)"
        if not math.isnan(value):
            if not math.isfinite(value):
                return f"the objective estimate is {value}"
            if math.isfinite(f_start) and f_start != 0.0 and value - f_start > self.limit * abs(f_start):
                return f"the objective estimate grew from {f_start:.6g} to {value:.6g}"
        return None


def check_divergence_limit(value: Any) -> None:
    """Raise unless ``value`` is a number > 1 (the factor of :class:`Runaway`)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(value)) or value <= 1:
        raise InvalidParameterError(
            f"divergence_limit must be a finite number > 1 (the factor beyond the starting point's scale at which a "
            f"run counts as diverged), got {value!r}"
        )


@dataclass(frozen=True)
class PhasedState:
    """The state of a :class:`PhasedSolver`: the running phase's index and its own state.

    ``x``: the running phase's iterate. ``inner``: that phase's state. ``since``: the iteration and
    the evaluations at which the phase started. ``log``: the phases that have ended, as JSON text
    (name, iterations, evaluations, how and why they ended). ``stop`` / ``status``: set when a phase
    stopped the run (read by ``terminate``). ``x0_scale`` and ``f_start``: the references of the
    divergence test. ``t``: iterations of the whole run.
    """

    x: Array
    phase: int
    inner: Any
    t: int
    since_t: int
    since_calls: int
    log: str
    stop: str
    status: int
    x0_scale: float
    f_start: float


class PhasedSolver(SolverBase):
    """A solver that is a sequence of phases (see the module docstring).

    Subclasses (frozen dataclasses) implement :meth:`phases`; they may override :meth:`start_carry`
    (what the first phase starts from) and set ``divergence_limit`` (a field, default ``1e8``), or
    override :attr:`runaway` to return ``None`` when their phases test divergence themselves.
    """

    #: the trace's ``phase`` column codes -> names are the indices of :meth:`phases`
    phased: ClassVar[bool] = True

    def phases(self, oracle: CountingOracle) -> Sequence[Phase]:
        """The phases of a run on ``oracle``'s problem, in order (the first one starts at ``x0``)."""
        raise NotImplementedError

    def _phases(self, oracle: CountingOracle) -> Sequence[Phase]:
        # built once per (solver, problem shape); phases are frozen dataclasses of parameters
        key = (id(oracle), oracle.dim, oracle.n)
        cache = self.__dict__
        found = cache.get("_phase_cache")
        if found is None or found[0] != key:
            found = (key, tuple(self.phases(oracle)))
            cache["_phase_cache"] = found
        return found[1]

    def start_carry(self, oracle: CountingOracle, x0: Array) -> Carry:
        """What the first phase starts from: ``x0`` and the problem's other starting variables."""
        extras: dict[str, Any] = {}
        if oracle.kind == "minimax":
            extras["y"] = np.array(oracle.y0, dtype=np.float64, copy=True)
        elif oracle.kind == "composite":
            extras["y"] = tuple(np.array(v, dtype=np.float64, copy=True) for v in oracle.y0)
        return Carry(np.array(x0, dtype=np.float64, copy=True), extras, "the starting point")

    def nonfinite_policy(self) -> str:
        """``"inf"`` (a failed trial point shortens a step) unless the solver runs the papers' fixed steps."""
        return "raise" if getattr(self, "steps", "auto") == "paper" else "inf"

    @property
    def runaway(self) -> Runaway | None:
        """The divergence test applied after every step (``None``: none, the phases test divergence themselves)."""
        return Runaway(float(getattr(self, "divergence_limit", 1e8)))

    def check_restored(self, oracle: CountingOracle, state: Any) -> str | None:
        """Why a state read back from a checkpoint cannot be this solver's on ``oracle`` (``None``: it can).

        Checks the bookkeeping that :meth:`step` indexes and counts with (the running phase, the iteration
        counters, the phase log, the iterate's shape), so that a damaged file is refused on resume."""
        if not isinstance(state, PhasedState):
            return f"its state is a {type(state).__name__}, not a {PhasedState.__name__}"
        n = len(self._phases(oracle))
        if isinstance(state.phase, bool) or not isinstance(state.phase, int) or not 0 <= state.phase < n:
            return f"its running phase is {state.phase!r}, not one of the {n} phases 0..{n - 1}"
        for name in ("t", "since_t", "since_calls", "status"):
            v = getattr(state, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < (-1 if name == "status" else 0):
                return f"its {name} is {v!r}, not a count"
        if state.since_t > state.t:
            return f"its phase started at iteration {state.since_t}, after the run's {state.t}"
        try:
            log = json.loads(state.log) if isinstance(state.log, str) else None
        except ValueError:
            log = None
        if not isinstance(log, list) or not all(isinstance(r, dict) for r in log) or not isinstance(state.stop, str):
            return "its phase log is not a list of records"
        for name in ("x0_scale", "f_start"):
            v = getattr(state, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                return f"its {name} is {v!r}, not a number"
        if not (math.isfinite(state.x0_scale) and state.x0_scale > 0):
            return f"its x0_scale is {state.x0_scale!r}"
        x = getattr(state.inner, "x", None)
        if not isinstance(x, np.ndarray) or x.shape != (oracle.dim,):
            return f"the running phase's iterate is not a vector of {oracle.dim} numbers"
        return None

    # ------------------------------------------------------------------ the protocol
    def init(self, oracle: CountingOracle, x0: Array, rng: np.random.Generator) -> PhasedState:
        phases = self._phases(oracle)
        since = oracle.calls
        inner = phases[0].start(oracle, self.start_carry(oracle, x0), rng)
        scale = max(1.0, float(np.abs(x0).max(initial=0.0)))
        value = float(getattr(inner, "value", math.nan))
        state = PhasedState(
            x=inner.x, phase=0, inner=inner, t=0, since_t=0, since_calls=since, log="[]", stop="", status=-1,
            x0_scale=scale, f_start=value,
        )  # fmt: skip
        end = phases[0].end(oracle, inner)  # a phase may hand over before its first step
        return state if end is None else self._ended(oracle, state, phases, end, rng)

    def step(self, oracle: CountingOracle, state: PhasedState, rng: np.random.Generator) -> PhasedState:
        phases = self._phases(oracle)
        phase = phases[state.phase]
        inner = phase.step(oracle, state.inner, rng)
        t = state.t + 1
        f_start = state.f_start
        value = float(getattr(inner, "value", math.nan))
        if math.isnan(f_start) and not math.isnan(value):
            f_start = value
        cache = self.__dict__
        if "_runaway_cache" not in cache:  # the solver is frozen: its divergence test is the same on every step
            cache["_runaway_cache"] = self.runaway
        runaway = cache["_runaway_cache"]
        why = None if runaway is None else runaway.check(self._phase_outputs(phase, inner), value, state.x0_scale, f_start)
        end = (
            PhaseEnd(End.DIVERGED, f"diverged at iteration {t} in the {phase.name}: {why}") if why is not None
            else phase.end(oracle, inner)
        )  # fmt: skip
        # dataclasses.replace(state, x=..., inner=..., t=..., f_start=...) by copying the fields: the frozen
        # dataclass's __init__ costs several microseconds, on every step of every phased solver
        new = object.__new__(type(state))
        fields = new.__dict__
        fields.update(state.__dict__)
        fields.update(x=inner.x, inner=inner, t=t, f_start=f_start)
        if end is None:
            return new
        return self._ended(oracle, new, phases, end, rng)

    def _ended(
        self, oracle: CountingOracle, state: PhasedState, phases: Sequence[Phase], end: PhaseEnd,
        rng: np.random.Generator,
    ) -> PhasedState:  # fmt: skip
        """Log the phase that ended; start the next one (which may end at its start too), or record the stop."""
        records = json.loads(state.log)
        for _hop in range(len(phases) + 1):
            phase = phases[state.phase]
            records.append({
                "phase": phase.name, "iterations": state.t - state.since_t,
                "evaluations": oracle.calls - state.since_calls, "end": end.how.value, "why": end.message,
            })  # fmt: skip
            log = json.dumps(records)
            if end.how is End.NEXT:
                names = [p.name for p in phases]
                if end.to is None:
                    nxt = state.phase + 1
                elif end.to in names:
                    nxt = names.index(end.to)
                else:  # pragma: no cover - a programming error of the solver
                    raise InvalidParameterError(f"phase {phase.name!r} hands over to an unknown phase {end.to!r}")
                if nxt < len(phases):
                    carry = phase.carry(state.inner)
                    if not carry.why:
                        carry = dataclasses.replace(carry, why=end.message)
                    since = oracle.calls  # the evaluations of the next phase's start are its own
                    inner = phases[nxt].start(oracle, carry, rng)
                    state = dataclasses.replace(
                        state, x=inner.x, phase=nxt, inner=inner, since_t=state.t, since_calls=since, log=log
                    )
                    again = phases[nxt].end(oracle, inner)  # the next phase may hand over at its start
                    if again is None:
                        return state
                    end = again
                    continue
                end = PhaseEnd(End.CONVERGED, end.message)  # the last phase handing over: its own test passed
            status = _STATUS[end.how]
            return dataclasses.replace(state, log=log, stop=end.message, status=int(status))
        raise InvalidParameterError(  # pragma: no cover - a programming error of the solver
            f"the phases {[p.name for p in phases]} hand over to one another at their start in a cycle"
        )

    def terminate(self, state: Any) -> str | None:
        if not state.stop:
            return None
        return StopReason(state.stop, Status(int(state.status)))

    def outputs(self, state: Any) -> Mapping[str, Array]:
        cache = self.__dict__.get("_phase_cache")
        phase = cache[1][state.phase] if cache is not None and state.phase < len(cache[1]) else None
        return self._phase_outputs(phase, state.inner)

    @staticmethod
    def _phase_outputs(phase: Phase | None, inner: Any) -> dict[str, Array]:
        """The phase's report of its state (``outputs(state)``), else ``x`` and the state's ``y`` / ``lam``."""
        fn = getattr(phase, "outputs", None)
        if callable(fn):
            return dict(fn(inner))
        out: dict[str, Array] = {"x": inner.x}
        for name in ("y", "lam"):
            v = getattr(inner, name, None)
            if isinstance(v, np.ndarray):
                out[name] = v
        return out

    def trace_row(self, state: Any) -> dict[str, float]:
        """The trace's ``phase`` column: the index of the running phase (see ``Result.notes`` for the names)."""
        return {"phase": float(state.phase)}

    def final_notes(self, oracle: CountingOracle, state: Any) -> list[str]:
        """Every phase of the run in order: its iterations, its evaluations and why it ended."""
        names = [p.name for p in self._phases(oracle)]
        parts = []
        for k, rec in enumerate(json.loads(state.log)):
            parts.append(
                f"{k + 1}. {rec['phase']}: {rec['iterations']} iterations, {rec['evaluations']} evaluations, "
                f"ended ({rec['end']}): {rec['why']}"
            )
        if not state.stop and names:
            parts.append(
                f"{len(parts) + 1}. {names[state.phase]}: {state.t - state.since_t} iterations, "
                f"{oracle.calls - state.since_calls} evaluations, running when the run ended"
            )
        codes = ", ".join(f"{i} = {n}" for i, n in enumerate(names))
        notes = [f"phases: {'; '.join(parts)}"] if parts else []
        if codes:
            notes.append(f"trace column phase: {codes}")
        return notes
