"""``zoframe_bench.run``: solvers x suite instances x seeds, stored in SQLite, resumable, in parallel.

Each cell of the grid is a :class:`~zoframe_bench.store.Task`. :func:`execute` runs one task from
scratch in any process (it rebuilds the instance from ``(suite, suite_args, instance)``) and returns a
:class:`~zoframe_bench.store.RunRow`; :func:`run` builds the grid, skips the tasks already in the
store (a killed bench resumes without repeating a finished run), runs the others serially, on a
process pool (``workers``) or on a dask cluster (``dask``), stores each finished run in its own
transaction, then writes the profiles (:mod:`zoframe_bench.profiles`).

The convergence history of a run is measured by the bench itself, outside the run's budget: after
each iteration whose oracle count has moved by at least ``history_every`` raw evaluations (and at
the start and the end), the bench evaluates the problem's measures (``fun``, ``max_violation``) at
the solver's reported point with an oracle of its own. Every solver, peers included, is measured the
same way; nothing the bench evaluates is counted in the run's ``nfev``.

Imperfect values (``noise=``, ``noise_kind=``, ``digits=``, ``nan_fraction=``, ``transform_seed=``;
``zoframe bench ... --noise 1e-6 --noise-kind relative``): every problem of the suite goes through the
transforms of :mod:`zoframe.imperfect` before the solver sees it; the bench's history, verification and
solved test use the clean problem and its ``f*``, so a run is judged by where it really ended.

Faults: every run has a time limit (``time_limit`` seconds, :data:`DEFAULT_TIME_LIMIT` by default):
a run past it is stopped and stored as a ``TIMEOUT`` row, and the bench goes on. Serially the limit
is a ``SIGALRM`` in the bench's process (POSIX, main thread); on a process pool the worker stops the
run the same way and, should the run not give up, the bench kills the worker ``time_limit * 1.1 +
5`` seconds after it handed the task over (building the instance included) and starts a new one.
A worker that dies (a crash, an out-of-memory kill) gives an ``ERROR`` row. Workers die with the bench: each one watches a pipe that only the
bench holds open, and exits when it closes, however the bench ended (``kill -9`` included). A run
that raises before it starts is an ``ERROR`` row. On dask the limit is not enforced (dask runs
tasks in threads that cannot be stopped): use dask's own worker limits there.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
import contextlib
import dataclasses
import functools
import inspect
import math
import multiprocessing
import multiprocessing.connection
import os
from pathlib import Path
import signal
import threading
import time
from typing import Any
import warnings

import numpy as np

from zoframe.errors import InvalidInputError, ZoframeError
from zoframe.oracle import CountingOracle
from zoframe.protocols import Array
from zoframe.registry import Registry, default_registry
from zoframe.specs import SuiteInstance
from zoframe_bench.store import BenchStore, RunRow, Task

__all__ = [
    "BUDGET_UNITS", "DEFAULT_TIME_LIMIT", "BenchOutcome", "default_solvers", "execute", "make_tasks", "run",
    "transform_spec", "transform_tag",
]

#: seconds one run may take before the bench stops it and stores a TIMEOUT row
DEFAULT_TIME_LIMIT = 600.0
#: the units of a bench budget: raw evaluations, full evaluations (n + m raw), full evaluations per variable (d (n + m) raw)
BUDGET_UNITS = ("raw", "full", "full-per-dim")
#: seconds past ``1.1 * time_limit`` after which a worker that did not stop its run is killed (the
#: worker's own time also covers building the instance and importing the solver)
_GRACE = 5.0

_SUMMARY_DROP = ("elapsed", "x")  # wall clock and the point (stored as its own column)


def _instances(suite: str, suite_args: Mapping[str, Any], registry: Registry | None = None) -> Sequence[SuiteInstance]:
    from zoframe.errors import UnknownNameError
    from zoframe_bench import user

    try:
        spec = (registry or default_registry()).suite(suite)
    except UnknownNameError:
        if not user.is_user_suite(suite) and suite not in user._SUITES:
            raise
        return user.user_instances(suite, suite_args)  # a problem of the user's own (zoframe_bench.user)
    try:
        return spec.instances(**dict(suite_args))
    except TypeError as exc:
        try:
            accepted = ", ".join(inspect.signature(spec.instances).parameters) or "no arguments"
        except (TypeError, ValueError):  # pragma: no cover - a builtin without a signature
            accepted = "see its documentation"
        raise InvalidInputError(
            f"suite {suite!r} cannot take the arguments {dict(suite_args)}: {exc}; it accepts: {accepted}"
        ) from None


def check_feasibility_tol(value: Any) -> float:
    """``value`` as a finite float >= 0, else :class:`InvalidInputError`."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(value)) or float(value) < 0:
        raise InvalidInputError(
            f"feasibility_tol must be a finite number >= 0 (the violation allowed at a solved point), got {value!r}"
        )
    return float(value)


def _check_params(reg: Registry, solver: str, params: Mapping[str, Any]) -> None:
    """Build the solver once with ``params``: an unknown or bad parameter fails before any run."""
    spec = reg.solver(solver)
    try:
        spec.cls(**dict(params))
    except ZoframeError:
        raise
    except (TypeError, ValueError) as exc:
        valid = [f.name for f in dataclasses.fields(spec.cls)] if dataclasses.is_dataclass(spec.cls) else []
        raise InvalidInputError(
            f"bad parameters for solver {solver!r} ({dict(params)}): {exc}. Valid parameters: "
            f"{', '.join(valid) or 'none'} (see `zoframe info {solver}`)"
        ) from None


def _instance(task: Task, registry: Registry | None = None) -> SuiteInstance:
    for inst in _instances(task.suite, task.suite_args, registry):
        if inst.name == task.instance:
            return inst
    raise InvalidInputError(f"suite {task.suite!r} with {dict(task.suite_args)} has no instance {task.instance!r}")


def default_solvers(
    suite: str, suite_args: Mapping[str, Any] | None = None, registry: Registry | None = None
) -> dict[str, str]:
    """The solver a bench without a solver list runs on each kind of the suite's problems: ``{kind: solver}``.

    The library's default of each kind (:meth:`zoframe.registry.Registry.default_solver`).
    """
    reg = registry or default_registry()
    kinds = sorted({str(inst.kind) for inst in _instances(suite, dict(suite_args or {}), reg)})
    return {kind: reg.default_solver(kind) for kind in kinds}


def make_tasks(
    suite: str,
    solvers: Sequence[str] | None = None,
    *,
    seeds: int | Sequence[int] = 1,
    budget: int = 1000,
    budget_unit: str = "raw",
    suite_args: Mapping[str, Any] | None = None,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    history_every: int = 0,
    feasibility_tol: float = 1e-3,
    verify: bool = True,
    registry: Registry | None = None,
    transform: Sequence[Mapping[str, Any]] = (),
) -> list[Task]:
    """The grid: every instance of ``suite`` x every solver x every seed.

    ``budget`` is in raw component evaluations (``budget_unit="raw"``), in full-evaluation
    equivalents (``"full"``: ``budget * (n + m)`` raw evaluations for an instance with ``n``
    components and ``m`` constraints), or in full evaluations per variable (``"full-per-dim"``:
    ``budget * d * (n + m)`` raw evaluations in dimension ``d``, the "budget 100 d" of the
    benchmarking literature). ``seeds``: a count (seeds ``0..N-1``) or the seeds themselves.
    ``params``: hyper-parameters per solver name. ``history_every=0``: about 500 history rows per run.
    ``solvers=None`` (or empty): each instance runs the default solver of its problem kind
    (:func:`default_solvers`), and ``params`` are keyed by those names.
    ``transform``: the imperfections of every problem's values as plain data (:func:`transform_spec`,
    ``zoframe.imperfect.ImperfectProblem.imperfection``); empty: the clean problems.
    """
    reg = registry or default_registry()
    transform = _checked_transform(transform)
    by_kind: dict[str, str] | None = None
    if solvers is None or (not isinstance(solvers, str) and len(solvers) == 0):
        by_kind = default_solvers(suite, suite_args, reg)
        solvers = sorted(set(by_kind.values()))
    elif isinstance(solvers, str):
        raise InvalidInputError(f"solvers must be a list of solver names, got the string {solvers!r}: pass [{solvers!r}]")
    for name in solvers:
        reg.solver(name)  # unknown names fail here, with the list of known ones
    if budget_unit not in BUDGET_UNITS:
        raise InvalidInputError(
            f"budget_unit must be one of {', '.join(map(repr, BUDGET_UNITS))} (raw evaluations, full evaluations, "
            f"full evaluations per variable), got {budget_unit!r}"
        )
    if not isinstance(budget, (int, np.integer)) or isinstance(budget, bool) or budget < 1:
        raise InvalidInputError(f"budget must be a positive integer, got {budget!r}")
    if isinstance(seeds, bool):
        raise InvalidInputError(f"seeds must be a positive count or a list of seeds, got {seeds!r}")
    if isinstance(seeds, (int, np.integer)):
        if seeds < 1:
            raise InvalidInputError(f"seeds must be a positive count or a list of seeds, got {seeds!r}")
        seed_list = list(range(int(seeds)))
    else:
        seed_list = [int(s) for s in seeds]
    if not isinstance(history_every, int) or history_every < 0:
        raise InvalidInputError(f"history_every must be an integer >= 0, got {history_every!r}")
    args = dict(suite_args or {})
    extra = dict(params or {})
    unknown = set(extra) - set(solvers)
    if unknown:
        raise InvalidInputError(f"params given for solvers not in the bench: {sorted(unknown)}")
    feasibility_tol = check_feasibility_tol(feasibility_tol)
    for name in solvers:
        _check_params(reg, name, extra.get(name, {}))
    tasks = []
    for inst in _instances(suite, args, reg):
        raw = int(budget) * _unit(inst, budget_unit)
        every = history_every or max(1, raw // 500)
        for name in solvers if by_kind is None else [by_kind[str(inst.kind)]]:
            for seed in seed_list:
                tasks.append(Task(suite, args, inst.name, name, dict(extra.get(name, {})), seed, raw, every,
                                  float(feasibility_tol), bool(verify), transform))
    return tasks


def transform_spec(
    noise: float | None = None,
    noise_kind: str = "absolute",
    digits: int | None = None,
    nan_fraction: float | None = None,
    transform_seed: int = 0,
) -> tuple[dict[str, Any], ...]:
    """The imperfections of the bench's options as plain data, in the order they act on a value:
    noise (``f + noise z`` or ``f (1 + noise z)``), then rounding to ``digits`` significant digits (a
    program printing its noisy result), then NaN at a ``nan_fraction`` of the points
    (:mod:`zoframe.imperfect`). Nothing given: ``()``, the clean problems."""
    from zoframe.imperfect import Failures, Noise, Transform, Truncation

    out: list[Transform] = []
    if noise is not None:
        out.append(Noise(noise, noise_kind, transform_seed))
    elif noise_kind != "absolute":
        raise InvalidInputError(f"noise_kind={noise_kind!r} without a noise level: give noise=LEVEL (--noise LEVEL) too")
    if digits is not None:
        out.append(Truncation(digits))
    if nan_fraction is not None:
        out.append(Failures(nan_fraction, transform_seed))
    return tuple(t.describe() for t in out)


def _checked_transform(transform: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], ...]:
    """``transform`` read back through :func:`zoframe.imperfect.read` (so that a bad one fails before any run)."""
    if not transform:
        return ()
    from zoframe.imperfect import read

    return tuple(t.describe() for t in read(list(transform)))


def transform_tag(transform: Sequence[Mapping[str, Any]]) -> str:
    """A short label of the transforms for directory names (``noise-rel-1e-08+digits-6``; ``""``: none)."""
    from zoframe.imperfect import read

    return "+".join(t.tag() for t in read(list(transform))) if transform else ""


def _unit(inst: SuiteInstance, budget_unit: str = "full") -> int:
    """Raw evaluations of one unit of budget: 1 (``"raw"``), one full evaluation (``"full"``: ``n``
    components plus ``m`` constraints) or ``d`` full evaluations (``"full-per-dim"``)."""
    if budget_unit == "raw":
        return 1
    prob = inst.build()
    m = int(getattr(prob, "m", 0)) if getattr(prob, "kind", "") == "constrained" else 0
    full = int(getattr(prob, "n", 1)) + m
    return full * int(prob.dim) if budget_unit == "full-per-dim" else full


def _finite(v: Any) -> Any:
    """JSON-safe copy: non-finite floats become strings (json.dumps would write NaN)."""
    if isinstance(v, Mapping):
        return {str(k): _finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return f if math.isfinite(f) else repr(f)
    return v if v is None or isinstance(v, str) else str(v)


def _measure(problem: Any, aux: CountingOracle, outputs: Mapping[str, Array]) -> tuple[float, float]:
    """``(fun, violation)`` at the reported point, with the bench's own (uncounted) oracle."""
    measures = getattr(problem, "measures", None)
    if callable(measures):
        ms = measures(dict(outputs), aux.monitor)
        fun = float(ms.get("fun", math.nan))
        viol = float(ms.get("max_violation", 0.0))
    else:  # pragma: no cover - every suite problem has measures
        fun = float(aux.monitor.objective(outputs["x"]).mean())
        viol = 0.0
    return fun, viol


class RunTimeout(BaseException):
    """Raised in a run that passed the bench's time limit (a BaseException: the run loop does not catch it)."""


@contextlib.contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`RunTimeout` in this thread after ``seconds`` (POSIX main thread; else no limit).

    A ``SIGALRM`` timer someone else armed (e.g. pytest-timeout, or the caller's own) keeps working:
    if its deadline comes first its handler is called then, and it is re-armed for what is left of
    it on the way out, with its handler back.
    """
    if (
        not seconds
        or not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
    ):
        yield
        return
    prev_handler = signal.getsignal(signal.SIGALRM)
    prev_left, prev_interval = signal.getitimer(signal.ITIMER_REAL)
    t0 = time.monotonic()
    ours = float(seconds)
    fired = [False]

    def _expired(signum: int, frame: Any) -> None:
        elapsed = time.monotonic() - t0
        if prev_left and not fired[0] and elapsed + 1e-3 >= prev_left and elapsed + 1e-3 < ours:
            fired[0] = True  # the other timer's deadline: its handler, then ours again
            if callable(prev_handler):
                prev_handler(signum, frame)
            signal.setitimer(signal.ITIMER_REAL, max(ours - (time.monotonic() - t0), 1e-3))
            return
        raise RunTimeout

    signal.signal(signal.SIGALRM, _expired)
    signal.setitimer(signal.ITIMER_REAL, min(ours, prev_left) if prev_left else ours)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, prev_handler)
        if prev_left and not fired[0]:
            left = prev_left - (time.monotonic() - t0)
            signal.setitimer(signal.ITIMER_REAL, max(left, 1e-3), prev_interval)
        elif prev_left and prev_interval:  # a periodic timer that fired during the run goes on
            signal.setitimer(signal.ITIMER_REAL, prev_interval, prev_interval)


def stub_row(task: Task, status: str, reason: str, seconds: float, registry: Registry | None = None,
             extra_result: Mapping[str, Any] | None = None) -> RunRow:
    """The row of a run without a result (``ERROR``, ``TIMEOUT``): the instance's sizes and start point."""
    empty = {"calls": np.zeros(0), "fun": np.zeros(0), "violation": np.zeros(0)}
    kind, dim, n, m, x0 = "unknown", 0, 0, 0, np.zeros(0)
    try:
        problem = _instance(task, registry).build()
        kind = str(problem.kind)
        dim, n = int(problem.dim), int(getattr(problem, "n", 1))
        m = int(getattr(problem, "m", 0)) if kind == "constrained" else 0
        x0 = np.array(problem.x0, dtype=np.float64, copy=True)
    except Exception:  # the row says why the run failed; the sizes are what could be found
        pass
    return RunRow(task=task, status=status, reason=reason, kind=kind, dim=dim, n=n, m=m, nfev=0, nfev_by_kind={},
                  result=dict(extra_result or {}), verification=None, history=empty, x=x0, seconds=seconds)


def _timeout_row(task: Task, limit: float, seconds: float, registry: Registry | None = None) -> RunRow:
    return stub_row(task, "TIMEOUT", f"the run passed the bench's time limit of {limit:g} s and was stopped "
                    "(raise it with time_limit= / --time-limit)", seconds, registry, {"time_limit": float(limit)})


def execute(task: Task, registry: Registry | None = None, time_limit: float | None = None) -> RunRow:
    """Run one task from scratch (in any process) and return its row.

    Warnings raised during the run are recorded in the row (``result["warnings"]``) instead of
    following the process's warning filters, so a run behaves the same in every process.
    ``time_limit`` (seconds; ``None``: none): past it the run (``minimize``; not the building of
    the instance) is stopped and the row is a ``TIMEOUT`` (where a signal can stop it: POSIX, main
    thread). An exception outside the run
    itself (building the instance or the solver) gives an ``ERROR`` row.
    """
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            row = _execute(task, registry or default_registry(), time_limit)
    except RunTimeout:
        return _timeout_row(task, float(time_limit or 0.0), time.perf_counter() - t0, registry)
    except KeyboardInterrupt:  # the person running the bench stops it (the caller keeps what is stored)
        raise
    except Exception as exc:  # never lose the bench to one run
        return stub_row(task, "ERROR", f"{type(exc).__name__}: {exc}", time.perf_counter() - t0, registry)
    except BaseException as exc:  # SystemExit & co. raised by a solver or a user's function: a failed run
        return stub_row(task, "FAILED", _base_exception_reason(exc), time.perf_counter() - t0, registry)
    if caught and row.ran:
        texts = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
        row = dataclasses.replace(row, result={**row.result, "warnings": texts})
    return row


def _base_exception_reason(exc: BaseException) -> str:
    """What a run that raised ``SystemExit`` (or another ``BaseException``) stored as its reason."""
    return (f"the run raised {type(exc).__name__}({', '.join(repr(a) for a in exc.args)}), which is not an "
            "Exception: recorded as a failed run, and the bench went on")


def _execute(task: Task, reg: Registry, time_limit: float | None = None) -> RunRow:
    from zoframe.driver import RunFailedError, minimize

    t0 = time.perf_counter()
    inst = _instance(task, reg)
    problem = inst.build()  # the clean problem: the bench measures on it (history, verification)
    runs_on = problem
    if task.transform:
        from zoframe.imperfect import apply

        runs_on = apply(problem, list(task.transform))  # the solver sees the imperfect values
    fails = any(t.get("transform") == "nan" for t in task.transform)
    kind = str(problem.kind)
    n = int(getattr(problem, "n", 1))
    m = int(getattr(problem, "m", 0)) if kind == "constrained" else 0
    base: dict[str, Any] = {"task": task, "kind": kind, "dim": int(problem.dim), "n": n, "m": m}
    empty = {"calls": np.zeros(0), "fun": np.zeros(0), "violation": np.zeros(0)}
    spec = reg.solver(task.solver)
    if kind not in spec.problem_kinds:
        return RunRow(**base, status="SKIPPED", reason=f"{task.solver} does not solve {kind} problems",
                      nfev=0, nfev_by_kind={}, result={}, verification=None, history=empty,
                      x=np.asarray(problem.x0, dtype=np.float64), seconds=time.perf_counter() - t0)
    solver = spec.cls(**dict(task.params))
    outputs_fn = getattr(solver, "outputs", None)
    aux = CountingOracle(problem)
    rows: list[tuple[float, float, float]] = []
    x0 = np.array(problem.x0, dtype=np.float64, copy=True)
    start: dict[str, Array] = {"x": x0}
    if kind == "minimax":
        start["y"] = np.array(problem.y0, dtype=np.float64, copy=True)
    rows.append((0.0, *_measure(problem, aux, start)))
    last = [0]
    last_x: list[Array] = [x0]

    def outputs_of(state: Any, x: Array) -> dict[str, Array]:
        if callable(outputs_fn):
            return {k: np.asarray(v) for k, v in outputs_fn(state).items()}
        return {"x": x}

    def callback(info: Any) -> None:
        last_x[0] = info.x
        if info.calls - last[0] >= task.history_every:
            last[0] = info.calls
            rows.append((float(info.calls), *_measure(problem, aux, outputs_of(info.state, info.x))))

    status, reason = "", ""
    try:
        with _time_limit(time_limit):  # the run itself: building the instance and importing the solver are not timed
            res = minimize(runs_on, solver, rng=task.seed, registry=reg, max_calls=task.budget, record_every=0,
                           callback=callback, feasibility_tol=task.feasibility_tol, progress=False,
                           nonfinite="inf" if fails else "auto")
    except RunFailedError as exc:
        if exc.interrupted:  # Ctrl-C: stop the bench, not just this run
            raise KeyboardInterrupt from None
        res, status, reason = exc.result, "FAILED", str(exc)
    except (RunTimeout, KeyboardInterrupt):
        raise
    except Exception as exc:  # the run could not start: store why, never lose the bench
        return RunRow(**base, status="ERROR", reason=f"{type(exc).__name__}: {exc}", nfev=0, nfev_by_kind={},
                      result={}, verification=None, history=empty, x=x0, seconds=time.perf_counter() - t0)
    except BaseException as exc:  # SystemExit & co. out of the run: a failed run, with what was measured
        hist = np.asarray(rows, dtype=np.float64)
        return RunRow(**base, status="FAILED", reason=_base_exception_reason(exc), nfev=int(hist[-1, 0]),
                      nfev_by_kind={}, result={}, verification=None,
                      history={"calls": hist[:, 0], "fun": hist[:, 1], "violation": hist[:, 2]},
                      x=np.asarray(last_x[0], dtype=np.float64), seconds=time.perf_counter() - t0)
    final = {k: np.asarray(v, dtype=np.float64) for k, v in res.outputs.items()} or {"x": res.x}
    final.setdefault("x", res.x)
    fun, viol = _measure(problem, aux, final)
    if not rows or rows[-1][0] != res.nfev:
        rows.append((float(res.nfev), fun, viol))
    hist = np.asarray(rows, dtype=np.float64)
    verification = _verify(problem, final) if task.verify else None
    summary = {k: v for k, v in res.summary().items() if k not in _SUMMARY_DROP}
    summary["final_fun"] = fun
    summary["final_violation"] = viol
    return RunRow(
        **base, status=status or res.status.name, reason=reason or res.message, nfev=int(res.nfev),
        nfev_by_kind={str(k): int(v) for k, v in res.nfev_by_kind.items()}, result=_finite(summary),
        verification=verification, history={"calls": hist[:, 0], "fun": hist[:, 1], "violation": hist[:, 2]},
        x=np.asarray(res.x, dtype=np.float64), seconds=time.perf_counter() - t0,
    )


def _verify(problem: Any, outputs: Mapping[str, Array]) -> dict[str, Any]:
    """The verification measures at the final point (no cvxpy reference solve: fast and deterministic)."""
    try:
        from zoframe_verify.verify import verify

        report = verify(problem, dict(outputs), reference=False)
        return {"measures": _finite(dict(report.measures)), "passed": bool(report.passed)}
    except Exception as exc:  # a verification that cannot run must not lose the run
        return {"error": f"{type(exc).__name__}: {exc}"}


# --------------------------------------------------------------------------- the grid
@dataclasses.dataclass(frozen=True)
class BenchOutcome:
    """What :func:`run` did: the store, the tasks of this bench, how many ran now, and the files written."""

    store: str
    tasks: tuple[Task, ...]
    ran: int
    reused: int
    summary: Mapping[str, Any]
    files: tuple[str, ...]

    def __str__(self) -> str:
        lines = [f"bench: {len(self.tasks)} runs ({self.ran} run now, {self.reused} reused) in {self.store}"]
        for name, row in dict(self.summary.get("solvers", {})).items():
            rates = ", ".join(f"tau={t}: {v.get('success_rate', 0.0):.0%}" for t, v in dict(row.get("targets", {})).items())
            lines.append(f"  {name}: {row.get('runs', '?')} runs" + (f", solved {rates}" if rates else ""))
        lines.append(f"  files: {', '.join(self.files)}" if self.files else "  no files written")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"BenchOutcome(store={self.store!r}, tasks={len(self.tasks)}, ran={self.ran}, reused={self.reused}, files={len(self.files)})"


def _worker_main(conn: Any, lifeline: Any, time_limit: float | None) -> None:
    """A bench worker: run the tasks received on ``conn``; exit when the bench is gone.

    ``lifeline`` is the read end of a pipe whose only write end the bench holds: it reads EOF when
    the bench's process ends, however it ends, and the worker then exits at once.
    """

    def watch() -> None:
        try:
            lifeline.recv()
        except (EOFError, OSError):
            pass
        os._exit(3)

    threading.Thread(target=watch, name="bench-lifeline", daemon=True).start()
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        conn.send(execute(task, time_limit=time_limit))


class _Worker:
    def __init__(self, ctx: Any, time_limit: float | None) -> None:
        self.conn, child = ctx.Pipe()
        life_r, self.life_w = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_worker_main, args=(child, life_r, time_limit), daemon=True,
                                name="zoframe-bench-worker")
        self.proc.start()
        child.close()
        life_r.close()

    def stop(self, kill: bool = False) -> None:
        if not kill:
            with contextlib.suppress(OSError, ValueError):
                self.conn.send(None)
        self.conn.close()
        self.life_w.close()  # the worker's lifeline reads EOF: it exits even in the middle of a run
        self.proc.join(0.0 if kill else 2.0)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5.0)


def _process_pool(tasks: Sequence[Task], workers: int, time_limit: float | None) -> Iterator[RunRow]:
    """Rows of ``tasks`` run on ``workers`` processes, each run under ``time_limit``."""
    ctx = multiprocessing.get_context("forkserver")
    pending = collections.deque(tasks)
    hard = None if not time_limit else time_limit * 1.1 + _GRACE
    idle = [_Worker(ctx, time_limit) for _ in range(min(workers, len(pending)))]
    busy: dict[Any, tuple[_Worker, Task, float]] = {}
    try:
        while pending or busy:
            while idle and pending:
                w, t = idle.pop(), pending.popleft()
                try:
                    w.conn.send(t)
                except OSError:  # the worker died while it waited (killed from outside): a new one
                    w.stop(kill=True)
                    w = _Worker(ctx, time_limit)
                    w.conn.send(t)
                busy[w.conn] = (w, t, time.monotonic())
            wait = None if hard is None else max(0.0, min(t0 + hard for _, _, t0 in busy.values()) - time.monotonic())
            for conn in multiprocessing.connection.wait(list(busy), timeout=wait):
                w, t, t0 = busy.pop(conn)
                try:
                    row: RunRow = w.conn.recv()
                except (EOFError, OSError):
                    w.stop(kill=True)
                    code = w.proc.exitcode
                    row = stub_row(t, "ERROR", f"the worker process died during the run (exit code {code}: "
                                   "a crash or an out-of-memory kill)", time.monotonic() - t0)
                    w = _Worker(ctx, time_limit)
                idle.append(w)
                yield row
            if hard is not None:
                now = time.monotonic()
                for conn, (w, t, t0) in list(busy.items()):
                    if now - t0 >= hard:
                        del busy[conn]
                        w.stop(kill=True)
                        idle.append(_Worker(ctx, time_limit))
                        yield _timeout_row(t, float(time_limit or 0.0), now - t0)
    finally:
        for w in idle + [w for w, _, _ in busy.values()]:
            w.stop(kill=bool(busy))


def _client(dask: Any) -> tuple[Any, bool]:
    """A dask client for ``dask`` (a Client, or an address reached within a few seconds) and whether it is ours."""
    distributed = _require_distributed()
    if isinstance(dask, distributed.Client):
        return dask, False
    address = str(dask)
    host, _, port = address.rpartition("://")[2].rpartition(":")
    if host and port.isdigit():
        import socket

        try:
            socket.create_connection((host, int(port)), timeout=5.0).close()
        except OSError as exc:
            raise InvalidInputError(
                f"cannot reach the dask scheduler at {address}: {exc.strerror or exc}; start one "
                "(`dask scheduler` and `dask worker ADDRESS`) or drop --dask to run here"
            ) from None
    try:
        return distributed.Client(address, timeout=10), True
    except (OSError, TimeoutError, ValueError) as exc:
        raise InvalidInputError(
            f"cannot connect to the dask scheduler at {address}: {exc}; check the address (e.g. "
            "tcp://HOST:8786) or drop --dask to run here"
        ) from None


def _pool_map(
    fn: Callable[[Task], RunRow], tasks: Sequence[Task], workers: int | None, dask: Any,
    time_limit: float | None = None,
) -> Iterable[RunRow]:
    if dask is not None:
        distributed = _require_distributed()
        client, ours = _client(dask)
        try:
            futures = client.map(fn, list(tasks), pure=False)
            for fut in distributed.as_completed(futures):
                yield fut.result()
        finally:
            if ours:
                client.close()
        return
    if workers is None:
        for t in tasks:
            yield fn(t)
        return
    yield from _process_pool(tasks, workers, time_limit)


def _require_distributed() -> Any:
    from zoframe._optional import require

    return require("distributed", feature="zoframe bench on a dask cluster (--dask)")


def run(
    suite: Any,
    solvers: Sequence[str] | None = None,
    *,
    seeds: int | Sequence[int] = 1,
    budget: int = 1000,
    budget_unit: str = "raw",
    suite_args: Mapping[str, Any] | None = None,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    store: str | os.PathLike[str] | None = None,
    out: str | os.PathLike[str] | None = None,
    workers: int | None = None,
    dask: Any = None,
    progress: bool = True,
    history_every: int = 0,
    feasibility_tol: float = 1e-3,
    taus: Sequence[float] = (1e-1, 1e-3, 1e-5),
    verify: bool = True,
    plots: bool = True,
    on_row: Callable[[RunRow], None] | None = None,
    registry: Registry | None = None,
    time_limit: float | None = DEFAULT_TIME_LIMIT,
    noise: float | None = None,
    noise_kind: str = "absolute",
    digits: int | None = None,
    nan_fraction: float | None = None,
    transform_seed: int = 0,
) -> BenchOutcome:
    """Run ``solvers`` on every instance of ``suite`` for ``seeds`` seeds and write the profiles.

    ``suite`` is a registered suite name, or problems of the user's own (:mod:`zoframe_bench.user`):
    a problem object, a factory, a list / dict of them, or a ``"module:attr"`` / ``"file.py:attr"``
    reference to any of these. Objects and factories passed directly run serially; a reference runs
    on ``workers`` / ``dask`` too (each worker imports it).

    Parameters
    ----------
    suite, solvers, seeds, budget, budget_unit, suite_args, params, history_every, feasibility_tol, verify:
        the grid (see :func:`make_tasks`); without ``solvers``, each instance runs the default solver of
        its problem kind (``zo-sgd``, ``adszog``, ``zo-gdmsa``, ``zo-svrg-admm``; :func:`default_solvers`).
    store:
        the SQLite file of finished runs (default ``OUT/bench.sqlite``); runs already in it are not
        run again, so re-running a killed bench finishes it.
    out:
        the directory for the summary and the profiles (default ``zoframe-out/bench-SUITE``).
    workers, dask:
        a process pool of ``workers`` processes (``workers=1``: one worker process, so that even a
        run stuck in compiled code is stopped at its time limit), or a dask cluster (an address such
        as ``"tcp://127.0.0.1:8786"``, reached within a few seconds, or a ``distributed.Client``);
        default: serial, in this process.
    time_limit:
        seconds one run may take (default :data:`DEFAULT_TIME_LIMIT`, 600; ``None``: no limit). A
        run past it is stopped and stored as a ``TIMEOUT`` row; a later bench with a larger limit
        runs it again. Not enforced on dask. A later bench also runs the ``ERROR`` rows (runs that
        never started) and the runs that lacked a dependency again.
    taus:
        the tolerances of the convergence test ``f(x) <= f_L + tau (f(x0) - f_L)``.
    plots:
        write PNG plots (needs matplotlib, extra ``plot``); the JSON/Markdown are always written.
    on_row:
        called with each newly stored row (e.g. to stop a bench on purpose).
    registry:
        a registry of your own (e.g. with a solver you have not packaged yet); serial runs only,
        since worker processes look names up in the installed plugins.
    noise, noise_kind, digits, nan_fraction, transform_seed:
        run every problem of the suite under imperfect values (:mod:`zoframe.imperfect`, in this
        order: Gaussian noise of standard deviation ``noise``, ``kind`` ``"absolute"`` (``f + noise
        z``) or ``"relative"`` (``f (1 + noise z)``); rounding to ``digits`` significant digits; NaN at
        a ``nan_fraction`` of the points, seen by the solver as ``+inf`` (``nonfinite="inf"``; without it, each
        solver's own default, ``nonfinite="auto"``, as ``minimize`` has it)), the
        randomness drawn from ``transform_seed`` and each point. The transforms are part of each
        run's key (:attr:`~zoframe_bench.store.Task.transform`): transformed and clean runs never
        mix in a store, and a sweep over levels resumes level by level. The bench measures every run
        on the CLEAN problem (the history of ``fun`` and violation, the verification, so the solved
        test against the clean ``f*``); the run's own ``Result.success`` is its certificate on the
        values it saw. Default output directory: ``zoframe-out/bench-SUITE-TRANSFORMS``.
    """
    from zoframe._paths import output_path
    from zoframe_bench.profiles import write_reports

    if workers is not None and dask is not None:
        raise InvalidInputError("give either workers (a process pool) or dask (a cluster), not both")
    if registry is not None and (dask is not None or workers is not None):
        raise InvalidInputError(
            "a registry of your own works for serial benches only: worker processes find solvers and suites "
            "through the installed plugins (install your plugin, with its entry point, to run it in parallel)"
        )
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
        raise InvalidInputError(f"workers must be a positive integer, got {workers!r}")
    if time_limit is not None and (isinstance(time_limit, bool) or not isinstance(time_limit, (int, float))
                                   or not math.isfinite(time_limit) or time_limit <= 0):
        raise InvalidInputError(f"time_limit must be a positive number of seconds or None, got {time_limit!r}")
    if not isinstance(suite, str):  # problems of the user's own, held by this process
        from zoframe_bench import user

        if dask is not None or workers is not None:
            raise InvalidInputError(
                "problem objects and factories passed to the bench run serially: worker processes cannot see "
                "them. Put the problem (or a list of them) in a module or a .py file and pass its "
                "'module:attr' / 'path/to/file.py:attr' reference to run it in parallel"
            )
        suite = user.register(suite, dict(suite_args or {}))
    transform = transform_spec(noise, noise_kind, digits, nan_fraction, transform_seed)
    tasks = make_tasks(suite, solvers, seeds=seeds, budget=budget, budget_unit=budget_unit, suite_args=suite_args,
                       params=params, history_every=history_every, feasibility_tol=feasibility_tol, verify=verify,
                       registry=registry, transform=transform)
    tag = transform_tag(transform)
    outdir = Path(out) if out is not None else output_path(f"bench-{suite}{'-' + tag if tag else ''}/x").parent
    outdir.mkdir(parents=True, exist_ok=True)
    store_path = Path(store) if store is not None else outdir / "bench.sqlite"
    with BenchStore(store_path) as db:
        db.lock()  # one bench writes a store at a time: a second one would run everything again
        db.check()  # a damaged store is said now, before any run or file is written
        done = db.keys()
        retry = {t.key for t in tasks if t.key in done and _retry(db.get(t.key), time_limit)}
        todo = [t for t in tasks if t.key not in done or t.key in retry]
        bar: Any = None
        from zoframe._output import logger, progress_wanted

        logger("bench").info("bench %s: %d runs, %d already in %s", suite, len(tasks), len(tasks) - len(todo), store_path)
        if progress_wanted(progress):
            from tqdm.auto import tqdm

            bar = tqdm(total=len(tasks), initial=len(tasks) - len(todo), unit="run", desc=f"bench {suite}",
                       dynamic_ncols=True)
        ran = 0
        try:
            fn = functools.partial(execute, registry=registry, time_limit=time_limit)
            for row in _pool_map(fn, todo, workers, dask, time_limit):
                db.add(row, replace=row.task.key in retry)
                ran += 1
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix_str(f"{row.task.solver} on {row.task.instance}", refresh=False)
                if on_row is not None:
                    on_row(row)
        except KeyboardInterrupt:
            logger("bench").warning(
                "bench %s interrupted: %d of %d runs are stored in %s (%d of them before this bench, %d now); "
                "run the same bench again (same suite, solvers, seeds, budget and store) to resume: the stored "
                "runs are not run again", suite, len(tasks) - len(todo) + ran, len(tasks), store_path,
                len(tasks) - len(todo), ran,
            )
            raise
        finally:
            if bar is not None:
                bar.close()
        rows = [db.get(t.key) for t in tasks]
    f_star = {inst.name: inst.f_star for inst in _instances(suite, dict(suite_args or {}), registry)}
    summary, files = write_reports(rows, outdir, f_star=f_star, taus=tuple(taus), feasibility_tol=feasibility_tol,
                                   plots=plots, transform=transform)
    return BenchOutcome(str(store_path), tuple(tasks), ran, len(tasks) - ran, summary, tuple(files))


def _retry(row: RunRow, time_limit: float | None) -> bool:
    """Run again: an ERROR (it never started: e.g. a dependency installed since, a worker that died), a
    missing dependency, and a TIMEOUT under a larger limit (or none)."""
    from zoframe_bench.profiles import failure_kind

    if row.status == "ERROR" or failure_kind(row) == "missing dependency":
        return True
    if row.status != "TIMEOUT":
        return False
    before = row.result.get("time_limit")
    if not isinstance(before, (int, float)):
        return True
    return time_limit is None or float(time_limit) > float(before)
