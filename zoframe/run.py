"""The run loop: ``init`` / ``step`` / ``terminate`` under budgets, with observers for the rest.

A :class:`RunLoop` owns exactly what every way of running a solver shares: the solver's state, the
iteration count, the solver's own time, the budgets on iterations and seconds (the budget on oracle
calls is the oracle's), the solver's stopping rule, the detection of a non-finite iterate and the
assembly of the :class:`~zoframe.result.Result`. Everything else is an *observer* with one job, in
:mod:`zoframe.observers`: the trace recorder, the best-point tracker, the checkpoint writer, the
progress bar and the user's callback. :func:`zoframe.minimize` builds a loop and its observers and
calls :meth:`RunLoop.run`; :class:`zoframe.Run` drives the same loop through ask/tell.

The loop::

    state = solver.init(oracle, x0, rng)        # then every observer's start()
    while no stop:
        stop = max_iter or max_time reached, or else
               state = solver.step(oracle, state, rng)   # timed: Result.trace["seconds"]
               then a non-finite iterate, an observer's iteration() (the callback), solver.terminate()
    the certificate, when the solver claims convergence  # Result.success (zoframe.certificate)
    every observer's end()                       # final trace record, last checkpoint
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
import math
import time
from typing import Any, Protocol, cast

import numpy as np

from zoframe.certificate import DEFAULT_TOL, Certificate, certify
from zoframe.certificate.noise import NoiseSpec
from zoframe.errors import BudgetExhausted, DivergedError
from zoframe.oracle import CountingOracle
from zoframe.protocols import Array
from zoframe.result import Result, Status, Trace, decide_success
from zoframe.solver import SolverBase

__all__ = ["Halt", "Observer", "RunLoop", "Stop", "x_is_finite"]

#: why a run stops: its status and a message
Stop = tuple[Status, str]


_now = time.perf_counter


def _never(state: Any) -> None:
    return None


def x_is_finite(x: Array) -> bool:
    """Whether every entry of ``x`` is finite."""
    return bool(np.isfinite(x).all())


class Observer(Protocol):
    """One concern of a run (trace, best point, checkpoints, progress, callback).

    ``start(loop)`` runs after ``init`` (iteration 0), ``iteration(loop)`` after every step (a
    returned :data:`Stop` ends the run: the callback uses it), ``end(loop)`` once after the loop,
    also when it failed (``loop.failure`` is then set). An observer with an attribute
    ``per_step = False`` has nothing to do after a step and is not called then (the loop's cost
    per step stays that of the observers that work). An observer with a method
    ``next_call(nit) -> int`` needs no call after a step before that iteration (the trace recorder
    between two records): when every observer called after steps has one, and the solver has no
    stopping rule and the iterate is not tested after every step, :meth:`RunLoop.run` calls them
    only from the earliest such iteration on (:meth:`RunLoop.step` still calls them after every step).
    """

    def start(self, loop: RunLoop) -> Stop | None: ...

    def iteration(self, loop: RunLoop) -> Stop | None: ...

    def end(self, loop: RunLoop) -> None: ...


class Halt(BaseException):
    """Raised by the ``pause`` of :meth:`RunLoop._driven` out of a solver's ``drive``: the run stops (``stop``),
    or an observer failed (``error``, re-raised by the loop). A ``BaseException``, so that the code between
    the loop and the pause (a wrapped library) lets it through."""

    def __init__(self, stop: Stop | None, error: BaseException | None = None) -> None:
        super().__init__(stop, error)
        self.stop = stop
        self.error = error


class RunLoop:
    """One run of a solver: ``init`` / ``step`` / ``terminate`` under budgets, observers notified.

    A solver with a method ``drive(oracle, state, rng, pause)`` may make several steps in one call (a
    wrapped library that owns its loop, run in the driver's thread): it calls ``pause(state)`` where each
    of its steps ends but the last, lets what ``pause`` raises (:class:`Halt`) through, and returns the
    state of its last step; :meth:`run` then does after each step what it does after a ``step`` call
    (:meth:`_driven`). :meth:`step` (ask/tell) always calls ``step``.

    ``state``, ``nit`` and ``seconds`` may be given to continue a run (checkpoint resume).
    ``check_every_step``: test the iterate for non-finite entries after every step (else only at
    trace records and at the end; a non-finite point then usually shows up first as a non-finite
    function value, which the oracle reports).
    ``certificate`` / ``certify_tol``: when the solver claims convergence (status ``CONVERGED``), the
    final point is certified once, after the last step (:func:`zoframe.certificate.certify`, with
    ``certify_tol`` and the run's ``feasibility_tol``; its evaluations are counted under
    ``"certify"``, outside the budget), and only a point that passes is a success.
    ``certificate=False`` skips it: a claim is then never a success.
    """

    def __init__(
        self,
        solver: Any,
        oracle: CountingOracle,
        x0: Array,
        rng: np.random.Generator,
        *,
        solver_name: str,
        seed: int | None,
        max_iter: int | None = None,
        max_calls: int | None = None,
        max_time: float | None = None,
        observers: Sequence[Observer] = (),
        state: Any = None,
        nit: int = 0,
        seconds: float = 0.0,
        check_every_step: bool = False,
        notes: Sequence[str] = (),
        feasibility_tol: float = 1e-3,
        certificate: bool = True,
        certify_tol: float = DEFAULT_TOL,
        noise: NoiseSpec | None = None,
    ) -> None:
        self.solver = solver
        self.oracle = oracle
        self.x0 = x0
        self.rng = rng
        self.solver_name = solver_name
        self.seed = seed
        self.max_iter = max_iter
        self.max_calls = max_calls
        self.max_time = max_time
        self.observers = tuple(observers)
        # only the observers with work after a step are called after each step
        stepped = [o for o in self.observers if getattr(o, "per_step", True)]
        self._per_step = tuple(o.iteration for o in stepped)
        # the observers' next_call methods, when every observer called after steps has one (else None)
        wakes: list[Callable[[int], int]] = [w for o in stepped if callable(w := getattr(o, "next_call", None))]
        self._wakes = tuple(wakes) if stepped and len(wakes) == len(stepped) else None
        self.state = state
        self.nit = nit
        self.seconds = seconds
        self.check_every_step = check_every_step
        self.notes = list(notes)
        self.feasibility_tol = feasibility_tol
        self.use_certificate = bool(certificate)
        self.certify_tol = certify_tol
        #: the noise of the values as the user stated it (``minimize(noise=...)``), for the certificate
        self.noise = noise
        #: the certificate of the final point (set by :meth:`finish` when the solver claims convergence)
        self.certificate: Certificate | None = None
        self.stop: Stop | None = None
        self.failure: BaseException | None = None
        #: measures recorded at the current iteration (set by the trace recorder), else None
        self.row: dict[str, float] | None = None
        #: measures at the last trace record
        self.measures: dict[str, float] = {}
        term = getattr(solver, "terminate", None)
        if not callable(term) or getattr(term, "__func__", None) is SolverBase.terminate:
            term = _never  # SolverBase's rule never stops: nothing to call after a step
        self._terminate: Callable[[Any], Any] = term
        self._step = solver.step
        drive = getattr(solver, "drive", None)
        self._drive: Callable[..., Any] | None = drive if callable(drive) else None
        self._iter_cap = math.inf if max_iter is None else max_iter
        self._time_cap = math.inf if max_time is None else max_time
        out = getattr(solver, "outputs", None)
        self._outputs = out if callable(out) else None
        row = getattr(solver, "trace_row", None)
        self._trace_row = row if callable(row) else None
        ends = getattr(solver, "final_notes", None)
        self._final_notes = ends if callable(ends) else None
        self._wall0 = time.perf_counter()

    # ------------------------------------------------------------------ the loop
    def run(self) -> None:
        """Run until a budget, the callback, the solver's rule or an error stops it."""
        try:
            if self.state is None:
                self.init()
            if self.stop is None:
                self.stop = self._steps()
        except (Exception, KeyboardInterrupt) as exc:  # each kind of stop is sorted out in one place
            self.stop = self.stopped_by(exc)
        self.finish()

    def _steps(self) -> Stop:
        """:meth:`budget_reached` or :meth:`step` until one of them stops (the same steps, times and stops);
        for a solver with ``drive`` (see :class:`RunLoop`), :meth:`_driven`.

        The loop's attributes are read once; ``state``, ``nit``, ``seconds`` and ``row`` are written
        back after every step, as :meth:`step` does, so that whatever reads the loop (the observers,
        an ask/tell snapshot taken while a step waits for values) sees the last completed iteration.
        The observers and ``terminate`` are called only when there are some (and the counters read
        back after them).
        """
        if self._drive is not None:
            return self._driven(self._drive)
        after = self._after_step if (self._per_step or self.check_every_step or self._terminate is not _never) else None
        # the observers' own schedule (next_call), when only they need the loop after a step
        wakes = self._wakes if not (self.check_every_step or self._terminate is not _never) else None
        solver_step, oracle, rng, now = self._step, self.oracle, self.rng, _now
        iter_cap, time_cap = self._iter_cap, self._time_cap
        state, nit, seconds = self.state, self.nit, self.seconds
        wake = 0 if wakes is None else min(w(nit) for w in wakes)
        while True:
            if nit >= iter_cap or seconds >= time_cap:
                stop = self.budget_reached()
                if stop is not None:
                    return stop
            t0 = now()
            state = solver_step(oracle, state, rng)
            seconds += now() - t0
            nit += 1
            self.state, self.seconds, self.nit, self.row = state, seconds, nit, None
            if after is not None and nit >= wake:
                stop = after(state)
                if stop is not None:
                    return stop
                state, nit, seconds = self.state, self.nit, self.seconds  # as an observer left them
                if wakes is not None:
                    wake = min(w(nit) for w in wakes)

    def _driven(self, drive: Callable[..., Any]) -> Stop:
        """The loop of a solver that makes several steps in one call, ``drive(oracle, state, rng, pause)``.

        ``pause(state)`` ends a step: the same work as after a step of :meth:`_steps` (the step's time and
        count, the observers on their schedule, the solver's rule), then the budgets on iterations and time
        as before the next step; a stop, or any error of that work, is raised out of ``drive`` as
        :class:`Halt` (a ``BaseException``: the solver lets it through and abandons its run) and ends the
        run here. ``drive`` returns the state of its last step, which is ended here as any step. The
        states, counts, trace, callback calls and stops are those of one ``step`` per step."""
        after = self._after_step if (self._per_step or self.check_every_step or self._terminate is not _never) else None
        wakes = self._wakes if not (self.check_every_step or self._terminate is not _never) else None
        wake = [0 if wakes is None else min(w(self.nit) for w in wakes)]
        clock = [0.0]

        def end_of_step(state: Any) -> Stop | None:
            self.seconds += _now() - clock[0]
            self.nit += 1
            self.state, self.row = state, None
            if after is not None and self.nit >= wake[0]:
                stop = after(state)
                if stop is not None:
                    return stop
                if wakes is not None:
                    wake[0] = min(w(self.nit) for w in wakes)
            return None

        def pause(state: Any) -> None:
            try:
                stop = end_of_step(state)
                if stop is None and (self.nit >= self._iter_cap or self.seconds >= self._time_cap):
                    stop = self.budget_reached()
            except BaseException as exc:  # the observers' errors end the run as after a step, not the solver's
                raise Halt(None, exc) from exc
            if stop is not None:
                raise Halt(stop)
            clock[0] = _now()

        oracle, rng = self.oracle, self.rng
        while True:
            if self.nit >= self._iter_cap or self.seconds >= self._time_cap:
                stop = self.budget_reached()
                if stop is not None:
                    return stop
            clock[0] = _now()
            try:
                state = drive(oracle, self.state, rng, pause)
            except Halt as halt:
                if halt.error is not None:
                    raise halt.error from None
                return cast(Stop, halt.stop)
            stop = end_of_step(state)
            if stop is not None:
                return stop

    def init(self) -> None:
        t0 = time.perf_counter()
        self.state = self.solver.init(self.oracle, self.x0, self.rng)
        self.seconds += time.perf_counter() - t0
        for obs in self.observers:
            stop = obs.start(self)
            if stop is not None:
                self.stop = stop
                return

    def budget_reached(self) -> Stop | None:
        if self.nit >= self._iter_cap:
            return Status.MAX_ITER, f"reached max_iter={self.max_iter}"
        if self.seconds >= self._time_cap:
            return Status.MAX_TIME, f"reached max_time={self.max_time} s"
        return None

    def step(self) -> Stop | None:
        """One step of the solver (timed), then the observers and the solver's stopping rule."""
        t0 = _now()
        self.state = state = self._step(self.oracle, self.state, self.rng)
        self.seconds += _now() - t0
        self.nit += 1
        self.row = None
        return self._after_step(state)

    def _after_step(self, state: Any) -> Stop | None:
        """What follows a step: the non-finite test, the observers, the solver's stopping rule."""
        if self.check_every_step and not x_is_finite(state.x):
            return self.diverged()
        for iteration in self._per_step:
            stop = iteration(self)
            if stop is not None:
                return stop
        reason = self._terminate(state)
        if reason:
            # a reason may carry its own status (e.g. BUDGET when a solver ends on a reserve)
            return Status(getattr(reason, "status", Status.CONVERGED)), str(reason)
        return None

    def diverged(self, checked_every_step: bool = True) -> Stop:
        """The stop for a non-finite iterate, saying at which iteration it was seen."""
        if checked_every_step:
            return Status.DIVERGED, f"the iterate became non-finite at iteration {self.nit}"
        return Status.DIVERGED, f"the iterate is not finite at iteration {self.nit} (checked at trace records)"

    def stopped_by(self, exc: BaseException) -> Stop:
        """The status of a run that an exception ended (the failure is kept for :meth:`result`)."""
        if isinstance(exc, BudgetExhausted):
            limit = self.max_calls if self.max_calls is not None else exc.limit
            return Status.BUDGET, f"reached max_calls={limit} (next batch needed {exc.requested})"
        if isinstance(exc, DivergedError):
            return Status.DIVERGED, f"diverged at iteration {self.nit + 1}: {exc}"
        if isinstance(exc, KeyboardInterrupt):
            self.failure = KeyboardInterrupt()
            return Status.FAILED, "interrupted"
        self.failure = exc  # keep what we had, then re-raise with the partial result attached
        return Status.FAILED, f"{type(exc).__name__}: {exc}"

    def finish(self) -> None:
        self.certify_claim()
        # a failure at the first call (in init) is reported like one at a later call: by the caller,
        # from ``failure`` (minimize: RunFailedError with the result at x0, the error as its cause)
        for obs in self.observers:
            obs.end(self)

    def certify_claim(self) -> None:
        """Certify the final point once when the solver claims convergence (and the certificate is on)."""
        if self.certificate is not None or not self.use_certificate or self.state is None:
            return
        if self.stop is None or not self.stop[0].success:
            return
        outs = self.outputs()
        x = np.asarray(outs["x"], dtype=np.float64)
        if x_is_finite(x):
            stated = self.noise
            self.certificate = certify(
                self.oracle, x, outputs=outs, tol=self.certify_tol, feasibility_tol=self.feasibility_tol,
                noise=None if stated is None or stated.relative else stated.level,
                relative_noise=stated.level if stated is not None and stated.relative else None,
            )  # fmt: skip

    # ------------------------------------------------------------------ what observers read
    def outputs(self, state: Any = None) -> dict[str, Array]:
        """The solver's report of ``state`` (default: the current one), at least ``{"x": ...}``."""
        st = self.state if state is None else state
        if self._outputs is not None:
            return {k: np.asarray(v) for k, v in self._outputs(st).items()}
        return {"x": np.asarray(st.x)}

    def solver_row(self) -> dict[str, float]:
        """The solver's own columns of a trace record (``trace_row(state)``, e.g. its phase), else none."""
        if self._trace_row is None or self.state is None:
            return {}
        return {str(k): float(v) for k, v in self._trace_row(self.state).items()}

    def solver_notes(self) -> list[str]:
        """The solver's notes on the run so far (``final_notes(oracle, state)``: its phases and their cost)."""
        if self._final_notes is None or self.state is None:
            return []
        return [str(n) for n in self._final_notes(self.oracle, self.state)]

    @property
    def calls(self) -> int:
        return self.oracle.calls

    # ------------------------------------------------------------------ the result
    def result(self, best: Any = None, trace: Mapping[str, Sequence[float]] | None = None) -> Result:
        """The frozen :class:`Result` of the run (``best``: the best-point tracker, if any)."""
        status, message = self.stop if self.stop is not None else (Status.RUNNING, "the run has not ended")
        if self.state is None:
            outs: dict[str, Array] = {"x": self.x0}  # the budget ran out during init: the start
        else:
            outs = self.outputs()
        final_x = outs["x"]
        ms = self.measures
        fun = float(ms.get("fun", math.nan))
        viol = ms.get("max_violation")
        kind = self.oracle.kind
        feasible = None if viol is None or kind != "constrained" else bool(float(viol) <= self.feasibility_tol)
        if status.success and not x_is_finite(final_x):
            status, message = Status.DIVERGED, f"the final point is not finite ({message})"
        cert = self.certificate
        if status is Status.CONVERGED and cert is not None and cert.noise_limited:
            # the solver's own test passed, but the noise of the values decides the certificate: say so
            status = Status.NOISE_LIMITED
        success, why = decide_success(status, np.asarray(final_x, dtype=np.float64), fun, feasible)
        if why and status.success:
            message = f"{message}; but {why}"
        if success:  # the solver's claim: a success only when the certificate passes
            if not self.use_certificate:
                success, message = False, f"{message}; not certified (certificate off)"
            elif cert is None:
                success, message = False, f"{message}; not certified (the certificate has not run)"
            elif not cert.passed:
                success, message = False, f"{message}; {cert.message}"
        if self.notes:
            message = f"{message} [{'; '.join(self.notes)}]"
        failed = int(getattr(self.oracle, "nonfinite_values", 0))
        extra = (f"{failed} function value(s) were NaN or inf: failed trials, counted as +inf (nonfinite='inf')",) if failed else ()
        notes = (*self.notes, *self.solver_notes(), *extra)  # the solver's (phases, their cost) in the notes, not the message
        x_best = final_x if best is None else best.x
        fun_best = fun if best is None else best.fun
        return Result(
            x=np.array(final_x, dtype=np.float64, copy=True),
            fun=fun,
            nit=self.nit,
            nfev=self.oracle.calls,
            user_calls=self.oracle.user_calls,
            status=status,
            success=success,
            message=message,
            nfev_by_kind=dict(self.oracle.calls_by_kind),
            nfev_by_purpose=dict(self.oracle.calls_by_purpose),
            x_best=np.array(x_best, dtype=np.float64, copy=True),
            fun_best=float(fun_best),
            solver=self.solver_name,
            seed=self.seed,
            trace=Trace({k: np.asarray(v, dtype=np.float64) for k, v in (trace or {}).items()}),
            outputs={k: np.array(v, copy=True) for k, v in outs.items()},
            measures=dict(ms),
            elapsed=time.perf_counter() - self._wall0,
            feasible=feasible,
            max_violation=None if viol is None else float(viol),
            feasibility_tol=self.feasibility_tol if kind == "constrained" else None,
            notes=notes,
            certificate=None if cert is None else cert.to_dict(),
        )
