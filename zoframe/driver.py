"""``minimize()``: the one loop that runs every solver.

The driver owns what is common to all algorithms: it resolves names through the registry, checks
that the solver accepts the problem kind (before any evaluation), builds the
:class:`~zoframe.oracle.CountingOracle`, normalises the seed, runs ``init``/``step`` under the
budgets (iterations, oracle calls, seconds), records the trace, calls the callback, shows a
progress bar, writes checkpoints and resumes from them, and returns a frozen
:class:`~zoframe.result.Result`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Executor
import contextlib
import dataclasses
from dataclasses import dataclass
import math
import os
import time
from typing import Any

import numpy as np

from zoframe import checkpoint as ckpt
from zoframe.errors import (
    BudgetExhausted,
    DivergedError,
    IncompatibleProblemError,
    InvalidInputError,
    ZoframeError,
)
from zoframe.oracle import DEFAULT_BLOCK_ROWS, CountingOracle, NonFinitePolicy, problem_kind
from zoframe.protocols import Array, Estimator, HasMeasures
from zoframe.registry import Registry, default_registry
from zoframe.result import Result, Status, Trace, decide_success

__all__ = ["IterationInfo", "RunFailedError", "make_rng", "minimize"]

RngLike = None | int | np.random.SeedSequence | np.random.Generator


class RunFailedError(ZoframeError):
    """A run stopped on an error; ``.result`` keeps everything computed until then."""

    def __init__(self, message: str, result: Result) -> None:
        super().__init__(message)
        self.result = result


@dataclass(frozen=True)
class IterationInfo:
    """What the callback receives after each iteration. Return ``True`` from it to stop."""

    iteration: int
    calls: int
    seconds: float
    x: Array
    state: Any
    measures: Mapping[str, float] | None


def make_rng(rng: RngLike) -> tuple[np.random.Generator, int | None]:
    """Normalise ``rng`` once: a Generator and the integer seed that reproduces it (if known)."""
    if isinstance(rng, np.random.Generator):
        return rng, None
    if rng is None:
        seed = int(np.random.SeedSequence().entropy)  # type: ignore[arg-type]
        return np.random.default_rng(seed), seed
    if isinstance(rng, np.random.SeedSequence):
        ent = rng.entropy
        return np.random.default_rng(rng), int(ent) if isinstance(ent, int) else None
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) and rng >= 0:
        return np.random.default_rng(int(rng)), int(rng)
    raise InvalidInputError(
        f"rng must be None, a non-negative int, a SeedSequence or a numpy Generator, got {rng!r}"
    )


def _resolve_solver(solver: Any, params: Mapping[str, Any], registry: Registry) -> tuple[Any, str]:
    if isinstance(solver, str):
        spec = registry.solver(solver)
        try:
            return spec.cls(**params), spec.name
        except TypeError as exc:
            valid = [f.name for f in dataclasses.fields(spec.cls)] if dataclasses.is_dataclass(spec.cls) else []
            raise InvalidInputError(
                f"bad parameters for solver {spec.name!r}: {exc}. Valid parameters: {', '.join(valid)} "
                f"(see `zoframe info {spec.name}`)"
            ) from exc
    if params:
        if not dataclasses.is_dataclass(solver) or isinstance(solver, type):
            raise InvalidInputError("solver parameters can only be given with a solver name or a dataclass solver")
        solver = dataclasses.replace(solver, **params)
    if not (callable(getattr(solver, "init", None)) and callable(getattr(solver, "step", None))):
        raise InvalidInputError(f"{solver!r} is not a solver: it needs init() and step() methods")
    return solver, str(getattr(solver, "name", type(solver).__name__))


def _resolve_estimator(estimator: Any, registry: Registry) -> Estimator | None:
    if estimator is None:
        return None
    if isinstance(estimator, str):
        return registry.estimator(estimator).cls()  # type: ignore[no-any-return]
    if not (callable(getattr(estimator, "estimate", None)) and callable(getattr(estimator, "rows", None))):
        raise InvalidInputError(f"{estimator!r} is not an estimator: it needs estimate() and rows()")
    return estimator  # type: ignore[no-any-return]


@contextlib.contextmanager
def _blas_limit(threads: int | None) -> Iterator[None]:
    if threads is None:
        yield
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - optional
        yield
        return
    with threadpool_limits(limits=threads, user_api="blas"):
        yield


class _Progress:
    def __init__(self, enabled: bool, total: int | None, unit: str, desc: str) -> None:
        self.bar: Any = None
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, unit=unit, desc=desc, delay=0.5, leave=False, dynamic_ncols=True)
        self.last = 0

    def update(self, value: int, postfix: str | None = None) -> None:
        if self.bar is not None:
            self.bar.update(value - self.last)
            self.last = value
            if postfix:
                self.bar.set_postfix_str(postfix, refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _best_key(row: Mapping[str, float], tol: float) -> tuple[float, float]:
    viol = row.get("max_violation")
    fun = row.get("fun", math.inf)
    fun = math.inf if fun is None or not math.isfinite(fun) else fun
    if viol is None:
        return (0.0, fun)
    return (0.0, fun) if viol <= tol else (1.0 + viol, fun)


def minimize(
    problem: Any,
    solver: Any = "zo-sgd",
    *,
    estimator: Any = None,
    rng: RngLike = None,
    max_iter: int | None = None,
    max_calls: int | None = None,
    max_time: float | None = None,
    callback: Callable[[IterationInfo], bool | None] | None = None,
    record_every: int | None = None,
    progress: bool = False,
    x0: Array | None = None,
    executor: Executor | None = None,
    chunks: int | None = None,
    block_rows: int = DEFAULT_BLOCK_ROWS,
    nonfinite: NonFinitePolicy = "raise",
    blas_threads: int | None = 1,
    checkpoint: str | os.PathLike[str] | None = None,
    checkpoint_every: int | None = None,
    resume: str | os.PathLike[str] | None = None,
    feasibility_tol: float = 1e-3,
    registry: Registry | None = None,
    options: Mapping[str, Any] | None = None,
    **solver_params: Any,
) -> Result:
    """Minimise ``problem`` with a zeroth-order solver.

    Parameters
    ----------
    problem:
        a problem of any kind (see :mod:`zoframe.problems` to build one from numpy callables).
    solver:
        a registered solver name (``zoframe list``) or a solver instance.
    estimator:
        a registered estimator name or instance replacing the solver's default estimator.
    rng:
        seed (int), SeedSequence, Generator or None (a fresh seed, reported in ``Result.seed``).
    max_iter, max_calls, max_time:
        budgets; at least one is required. ``max_calls`` is exact: no evaluation past it.
    callback:
        called with an :class:`IterationInfo` after every iteration; returning ``True`` stops.
    record_every:
        record the trace every this many iterations (default: about 100 records per run;
        ``0`` records only the first and last iterate).
    progress:
        show a progress bar (after half a second) on stderr.
    x0:
        starting point (default: the problem's ``x0``); never modified.
    executor, chunks:
        evaluate batches on a :class:`concurrent.futures.Executor`, their blocks grouped into
        ``chunks`` tasks per batch (default: 2 per worker).
    block_rows:
        rows per call of a user function (default 256): every batch is split into these blocks,
        serially and in parallel alike, so results are bit-identical with or without an executor.
    nonfinite:
        ``"raise"`` (default) or ``"inf"``: what to do when a user function returns NaN/inf.
    blas_threads:
        limit BLAS threads during the run (default 1: small products are much faster single
        threaded); ``None`` leaves the library default.
    checkpoint, checkpoint_every:
        write ``checkpoint.npz``/``.json`` every ``checkpoint_every`` iterations and at the end.
    resume:
        continue from a checkpoint written by a run of the same solver on the same problem.
    feasibility_tol:
        violation under which a recorded point counts as feasible when choosing ``x_best``.
    options, **solver_params:
        hyper-parameters of the solver (``zoframe info NAME`` lists them).
    """
    reg = registry if registry is not None else default_registry()
    kind = problem_kind(problem)
    params = {**(options or {}), **solver_params}
    solv, solver_name = _resolve_solver(solver, params, reg)
    kinds = frozenset(getattr(solv, "problem_kinds", frozenset()))
    if kind not in kinds:
        raise IncompatibleProblemError(
            f"solver {solver_name!r} does not accept {kind!r} problems: it solves "
            f"{', '.join(sorted(kinds)) or 'no declared kind'}. Run `zoframe list` for solvers of "
            f"{kind!r} problems."
        )
    est = _resolve_estimator(estimator, reg)
    if est is not None:
        if not (dataclasses.is_dataclass(solv) and any(f.name == "estimator" for f in dataclasses.fields(solv))):
            raise InvalidInputError(f"solver {solver_name!r} has a fixed gradient estimator; it takes no estimator=")
        solv = dataclasses.replace(solv, estimator=est)  # type: ignore[type-var]
    for name, val in (("max_iter", max_iter), ("max_calls", max_calls)):
        if val is not None and (not isinstance(val, (int, np.integer)) or isinstance(val, bool) or val < 1):
            raise InvalidInputError(f"{name} must be a positive integer or None, got {val!r}")
    if max_time is not None and not (isinstance(max_time, (int, float)) and max_time > 0):
        raise InvalidInputError(f"max_time must be a positive number of seconds, got {max_time!r}")
    if max_iter is None and max_calls is None and max_time is None:
        raise InvalidInputError(
            "refusing to run unbounded: give at least one of max_iter, max_calls or max_time"
        )
    if record_every is not None and (not isinstance(record_every, int) or record_every < 0):
        raise InvalidInputError(f"record_every must be an integer >= 0, got {record_every!r}")
    if checkpoint_every is not None and checkpoint is None:
        raise InvalidInputError("checkpoint_every needs a checkpoint path")
    if record_every is None:
        record_every = max(1, math.ceil(max_iter / 100)) if max_iter is not None else 10

    oracle = CountingOracle(
        problem, max_calls=max_calls, nonfinite=nonfinite, executor=executor, chunks=chunks, block_rows=block_rows
    )
    notes: list[str] = []
    adapt = getattr(solv, "adapt", None)
    if callable(adapt):
        # the solver resolves its problem-dependent defaults (e.g. batch sizes) before any evaluation
        solv, adapt_notes = adapt(oracle)
        notes.extend(str(n) for n in adapt_notes)
    validate = getattr(solv, "validate", None)
    if callable(validate):
        validate(oracle)  # raise before any evaluation
    if x0 is None:
        start = np.array(problem.x0, dtype=np.float64, copy=True)
    else:
        start = np.array(x0, dtype=np.float64, copy=True)
        if start.shape != (oracle.dim,):
            raise InvalidInputError(f"x0 must have shape ({oracle.dim},), got {start.shape}")
    outputs_fn = getattr(solv, "outputs", None)

    def outputs_of(st: Any) -> dict[str, Array]:
        if callable(outputs_fn):
            return {k: np.asarray(v) for k, v in outputs_fn(st).items()}
        return {"x": np.asarray(st.x)}

    has_measures = isinstance(problem, HasMeasures)
    columns: dict[str, list[float]] = {"iteration": [], "calls": [], "seconds": []}
    best: dict[str, Any] = {"key": (math.inf, math.inf), "x": start.copy(), "fun": math.inf}

    def measure(st: Any) -> dict[str, float]:
        if not has_measures:
            return {}
        return {k: float(v) for k, v in problem.measures(outputs_of(st), oracle.monitor).items()}

    def record(it: int, st: Any, seconds: float) -> dict[str, float]:
        ms = measure(st)
        n_prev = len(columns["iteration"])
        for key in ms:
            if key not in columns:
                columns[key] = [math.nan] * n_prev
        for key, col in columns.items():
            if key == "iteration":
                col.append(float(it))
            elif key == "calls":
                col.append(float(oracle.calls))
            elif key == "seconds":
                col.append(seconds)
            else:
                col.append(ms.get(key, math.nan))
        k = _best_key(ms, feasibility_tol)
        if k < best["key"]:
            best.update(key=k, x=np.array(outputs_of(st)["x"], copy=True), fun=ms.get("fun", math.nan))
        return ms

    if resume is not None:
        state, gen, meta, extra = ckpt.load(resume)
        if meta.get("solver") != solver_name:
            raise InvalidInputError(
                f"checkpoint {resume} was written by solver {meta.get('solver')!r}, not {solver_name!r}"
            )
        seed = meta.get("seed")
        oracle.restore(meta["counters"])
        nit = int(meta["nit"])
        solver_seconds = float(meta["seconds"])
        for key in meta["trace_columns"]:
            columns[key] = [float(v) for v in extra[f"trace.{key}"]]
        best.update(key=tuple(meta["best_key"]), x=extra["best.x"], fun=float(meta["best_fun"]))
    else:
        gen, seed = make_rng(rng)
        state = None
        nit = 0
        solver_seconds = 0.0

    status = Status.MAX_ITER
    message = ""
    failure: BaseException | None = None
    last_measures: dict[str, float] = {}
    bar = _Progress(progress, max_iter, "it", solver_name)
    term = getattr(solv, "terminate", None)
    term = term if callable(term) else None

    def save_checkpoint() -> None:
        if checkpoint is None or state is None:
            return
        meta = {
            "solver": solver_name,
            "seed": seed,
            "nit": nit,
            "seconds": solver_seconds,
            "counters": oracle.snapshot(),
            "trace_columns": list(columns),
            "best_key": list(best["key"]),
            "best_fun": best["fun"],
        }
        extra = {f"trace.{k}": np.asarray(v, dtype=np.float64) for k, v in columns.items()}
        extra["best.x"] = np.asarray(best["x"])
        ckpt.save(checkpoint, state, gen, meta, extra)

    wall0 = time.perf_counter()
    with _blas_limit(blas_threads):
        try:
            if state is None:
                t0 = time.perf_counter()
                state = solv.init(oracle, start, gen)
                solver_seconds += time.perf_counter() - t0
                last_measures = record(0, state, solver_seconds)
            while True:
                if max_iter is not None and nit >= max_iter:
                    status, message = Status.MAX_ITER, f"reached max_iter={max_iter}"
                    break
                if max_time is not None and solver_seconds >= max_time:
                    status, message = Status.MAX_TIME, f"reached max_time={max_time} s"
                    break
                t0 = time.perf_counter()
                new_state = solv.step(oracle, state, gen)
                solver_seconds += time.perf_counter() - t0
                state = new_state
                nit += 1
                recorded: dict[str, float] | None = None
                if record_every and nit % record_every == 0:
                    recorded = last_measures = record(nit, state, solver_seconds)
                if callback is not None:
                    info = IterationInfo(nit, oracle.calls, solver_seconds, outputs_of(state)["x"], state, recorded)
                    if callback(info):
                        status, message = Status.CALLBACK, "stopped by the callback"
                        break
                reason = term(state) if term is not None else None
                if reason:
                    # a reason may carry its own status (e.g. BUDGET when a solver ends on a reserve)
                    status, message = Status(getattr(reason, "status", Status.CONVERGED)), str(reason)
                    break
                if checkpoint_every and nit % checkpoint_every == 0:
                    save_checkpoint()
                if bar.bar is not None:
                    bar.update(nit)
        except BudgetExhausted as exc:
            status, message = Status.BUDGET, f"reached max_calls={exc.limit} (next batch needed {exc.requested})"
        except DivergedError as exc:
            status, message = Status.DIVERGED, f"diverged at iteration {nit + 1}: {exc}"
        except KeyboardInterrupt:
            status, message = Status.FAILED, "interrupted"
            failure = KeyboardInterrupt()
        except Exception as exc:  # keep what we had, then re-raise with the partial result attached
            status, message = Status.FAILED, f"{type(exc).__name__}: {exc}"
            failure = exc
        finally:
            bar.close()
        if state is None:
            if failure is not None:
                raise failure
            # the budget ran out during init: report the starting point
            last_measures = {}
            final_x = start
            outs: dict[str, Array] = {"x": start}
        else:
            outs = outputs_of(state)
            final_x = outs["x"]
            if not columns["iteration"] or columns["iteration"][-1] != nit:
                try:
                    last_measures = record(nit, state, solver_seconds)
                except Exception:  # a failing measure must not lose the run
                    pass
            save_checkpoint()
    trace = Trace({k: np.asarray(v, dtype=np.float64) for k, v in columns.items()})
    fun = float(last_measures.get("fun", math.nan))
    viol = last_measures.get("max_violation")
    feasible = None if viol is None or kind != "constrained" else bool(float(viol) <= feasibility_tol)
    if status is Status.CONVERGED and not bool(np.all(np.isfinite(final_x))):
        status, message = Status.DIVERGED, f"the final point is not finite ({message})"
    success, why = decide_success(status, np.asarray(final_x, dtype=np.float64), fun, feasible)
    if why and status is Status.CONVERGED:
        message = f"{message}; but {why}"
    if notes:
        message = f"{message} [{'; '.join(notes)}]"
    result = Result(
        x=np.array(final_x, dtype=np.float64, copy=True),
        fun=fun,
        nit=nit,
        nfev=oracle.calls,
        status=status,
        success=success,
        message=message,
        nfev_by_kind=dict(oracle.calls_by_kind),
        nfev_by_purpose=dict(oracle.calls_by_purpose),
        x_best=np.array(best["x"], dtype=np.float64, copy=True),
        fun_best=float(best["fun"]),
        solver=solver_name,
        seed=seed,
        trace=trace,
        outputs={k: np.array(v, copy=True) for k, v in outs.items()},
        measures=dict(last_measures),
        elapsed=time.perf_counter() - wall0,
        feasible=feasible,
        max_violation=None if viol is None else float(viol),
        feasibility_tol=feasibility_tol if kind == "constrained" else None,
        notes=tuple(notes),
    )
    if failure is not None:
        if isinstance(failure, KeyboardInterrupt):
            raise RunFailedError("the run was interrupted; .result holds the last iterate", result) from None
        raise RunFailedError(f"the run failed at iteration {nit + 1}: {message}", result) from failure
    return result
