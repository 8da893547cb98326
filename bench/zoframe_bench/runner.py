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
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
import concurrent.futures as cf
import dataclasses
import functools
import math
import multiprocessing
import os
from pathlib import Path
import time
from typing import Any
import warnings

import numpy as np

from zoframe.errors import InvalidInputError
from zoframe.oracle import CountingOracle
from zoframe.protocols import Array
from zoframe.registry import Registry, default_registry
from zoframe.specs import SuiteInstance
from zoframe_bench.store import BenchStore, RunRow, Task

__all__ = ["BenchOutcome", "execute", "make_tasks", "run"]

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
    return spec.instances(**dict(suite_args))


def _instance(task: Task, registry: Registry | None = None) -> SuiteInstance:
    for inst in _instances(task.suite, task.suite_args, registry):
        if inst.name == task.instance:
            return inst
    raise InvalidInputError(f"suite {task.suite!r} with {dict(task.suite_args)} has no instance {task.instance!r}")


def make_tasks(
    suite: str,
    solvers: Sequence[str],
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
) -> list[Task]:
    """The grid: every instance of ``suite`` x every solver x every seed.

    ``budget`` is in raw component evaluations (``budget_unit="raw"``) or in full-evaluation
    equivalents (``"full"``: ``budget * (n + m)`` raw evaluations for an instance with ``n``
    components and ``m`` constraints). ``seeds``: a count (seeds ``0..N-1``) or the seeds themselves.
    ``params``: hyper-parameters per solver name. ``history_every=0``: about 500 history rows per run.
    """
    reg = registry or default_registry()
    if not solvers:
        raise InvalidInputError("give at least one solver (e.g. solvers=['zo-sgd', 'cobyla'])")
    for name in solvers:
        reg.solver(name)  # unknown names fail here, with the list of known ones
    if budget_unit not in ("raw", "full"):
        raise InvalidInputError(f"budget_unit must be 'raw' or 'full', got {budget_unit!r}")
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
    tasks = []
    for inst in _instances(suite, args, reg):
        cost = _unit(inst)
        raw = int(budget) * (cost if budget_unit == "full" else 1)
        every = history_every or max(1, raw // 500)
        for name in solvers:
            for seed in seed_list:
                tasks.append(Task(suite, args, inst.name, name, dict(extra.get(name, {})), seed, raw, every,
                                  float(feasibility_tol), bool(verify)))
    return tasks


def _unit(inst: SuiteInstance) -> int:
    """Raw evaluations of one full evaluation: ``n`` components plus ``m`` constraints."""
    prob = inst.build()
    m = int(getattr(prob, "m", 0)) if getattr(prob, "kind", "") == "constrained" else 0
    return int(getattr(prob, "n", 1)) + m


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


def execute(task: Task, registry: Registry | None = None) -> RunRow:
    """Run one task from scratch (in any process) and return its row.

    Warnings raised during the run are recorded in the row (``result["warnings"]``) instead of
    following the process's warning filters, so a run behaves the same in every process.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        row = _execute(task, registry or default_registry())
    if caught and row.ran:
        texts = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
        row = dataclasses.replace(row, result={**row.result, "warnings": texts})
    return row


def _execute(task: Task, reg: Registry) -> RunRow:
    from zoframe.driver import RunFailedError, minimize

    t0 = time.perf_counter()
    inst = _instance(task, reg)
    problem = inst.build()
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

    def outputs_of(state: Any, x: Array) -> dict[str, Array]:
        if callable(outputs_fn):
            return {k: np.asarray(v) for k, v in outputs_fn(state).items()}
        return {"x": x}

    def callback(info: Any) -> None:
        if info.calls - last[0] >= task.history_every:
            last[0] = info.calls
            rows.append((float(info.calls), *_measure(problem, aux, outputs_of(info.state, info.x))))

    status, reason = "", ""
    try:
        res = minimize(problem, solver, rng=task.seed, registry=reg, max_calls=task.budget, record_every=0, callback=callback,
                       feasibility_tol=task.feasibility_tol, progress=False)
    except RunFailedError as exc:
        res, status, reason = exc.result, "FAILED", str(exc)
    except Exception as exc:  # the run could not start: store why, never lose the bench
        return RunRow(**base, status="ERROR", reason=f"{type(exc).__name__}: {exc}", nfev=0, nfev_by_kind={},
                      result={}, verification=None, history=empty, x=x0, seconds=time.perf_counter() - t0)
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


def _pool_map(
    fn: Callable[[Task], RunRow], tasks: Sequence[Task], workers: int | None, dask: Any
) -> Iterable[RunRow]:
    if dask is not None:
        distributed = _require_distributed()
        client = dask if isinstance(dask, distributed.Client) else distributed.Client(dask)
        try:
            futures = client.map(fn, list(tasks), pure=False)
            for fut in distributed.as_completed(futures):
                yield fut.result()
        finally:
            if client is not dask:
                client.close()
        return
    if workers is None or workers <= 1:
        for t in tasks:
            yield fn(t)
        return
    ctx = multiprocessing.get_context("forkserver")
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futs = [pool.submit(fn, t) for t in tasks]
        try:
            for fut in cf.as_completed(futs):
                yield fut.result()
        finally:
            for f in futs:
                f.cancel()


def _require_distributed() -> Any:
    from zoframe._optional import require

    return require("distributed", feature="zoframe bench on a dask cluster (--dask)")


def run(
    suite: Any,
    solvers: Sequence[str],
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
) -> BenchOutcome:
    """Run ``solvers`` on every instance of ``suite`` for ``seeds`` seeds and write the profiles.

    ``suite`` is a registered suite name, or problems of the user's own (:mod:`zoframe_bench.user`):
    a problem object, a factory, a list / dict of them, or a ``"module:attr"`` / ``"file.py:attr"``
    reference to any of these. Objects and factories passed directly run serially; a reference runs
    on ``workers`` / ``dask`` too (each worker imports it).

    Parameters
    ----------
    suite, solvers, seeds, budget, budget_unit, suite_args, params, history_every, feasibility_tol, verify:
        the grid (see :func:`make_tasks`).
    store:
        the SQLite file of finished runs (default ``OUT/bench.sqlite``); runs already in it are not
        run again, so re-running a killed bench finishes it.
    out:
        the directory for the summary and the profiles (default ``zoframe-out/bench-SUITE``).
    workers, dask:
        a process pool of ``workers`` processes, or a dask cluster (an address such as
        ``"tcp://127.0.0.1:8786"`` or a ``distributed.Client``); default: serial.
    taus:
        the tolerances of the convergence test ``f(x) <= f_L + tau (f(x0) - f_L)``.
    plots:
        write PNG plots (needs matplotlib, extra ``plot``); the JSON/Markdown are always written.
    on_row:
        called with each newly stored row (e.g. to stop a bench on purpose).
    registry:
        a registry of your own (e.g. with a solver you have not packaged yet); serial runs only,
        since worker processes look names up in the installed plugins.
    """
    from zoframe._paths import output_path
    from zoframe_bench.profiles import write_reports

    if workers is not None and dask is not None:
        raise InvalidInputError("give either workers (a process pool) or dask (a cluster), not both")
    if registry is not None and (dask is not None or (workers is not None and workers > 1)):
        raise InvalidInputError(
            "a registry of your own works for serial benches only: worker processes find solvers and suites "
            "through the installed plugins (install your plugin, with its entry point, to run it in parallel)"
        )
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
        raise InvalidInputError(f"workers must be a positive integer, got {workers!r}")
    if not isinstance(suite, str):  # problems of the user's own, held by this process
        from zoframe_bench import user

        if dask is not None or (workers is not None and workers > 1):
            raise InvalidInputError(
                "problem objects and factories passed to the bench run serially: worker processes cannot see "
                "them. Put the problem (or a list of them) in a module or a .py file and pass its "
                "'module:attr' / 'path/to/file.py:attr' reference to run it in parallel"
            )
        suite = user.register(suite, dict(suite_args or {}))
    tasks = make_tasks(suite, solvers, seeds=seeds, budget=budget, budget_unit=budget_unit, suite_args=suite_args,
                       params=params, history_every=history_every, feasibility_tol=feasibility_tol, verify=verify,
                       registry=registry)
    outdir = Path(out) if out is not None else output_path(f"bench-{suite}/x").parent
    outdir.mkdir(parents=True, exist_ok=True)
    store_path = Path(store) if store is not None else outdir / "bench.sqlite"
    with BenchStore(store_path) as db:
        done = db.keys()
        todo = [t for t in tasks if t.key not in done]
        bar: Any = None
        from zoframe._output import logger, progress_wanted

        logger("bench").info("bench %s: %d runs, %d already in %s", suite, len(tasks), len(tasks) - len(todo), store_path)
        if progress_wanted(progress):
            from tqdm.auto import tqdm

            bar = tqdm(total=len(tasks), initial=len(tasks) - len(todo), unit="run", desc=f"bench {suite}",
                       dynamic_ncols=True)
        ran = 0
        try:
            fn = execute if registry is None else functools.partial(execute, registry=registry)
            for row in _pool_map(fn, todo, workers, dask):
                db.add(row)
                ran += 1
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix_str(f"{row.task.solver} on {row.task.instance}", refresh=False)
                if on_row is not None:
                    on_row(row)
        finally:
            if bar is not None:
                bar.close()
        rows = [db.get(t.key) for t in tasks]
    f_star = {inst.name: inst.f_star for inst in _instances(suite, dict(suite_args or {}), registry)}
    summary, files = write_reports(rows, outdir, f_star=f_star, taus=tuple(taus), feasibility_tol=feasibility_tol,
                                   plots=plots)
    return BenchOutcome(str(store_path), tuple(tasks), ran, len(tasks) - ran, summary, tuple(files))
