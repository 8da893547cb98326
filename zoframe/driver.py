"""``minimize()``: a thin function that builds a run and its observers, then runs it.

:func:`build_run` resolves names through the registry, checks the arguments and that the solver
accepts the problem kind (all before any evaluation), builds the
:class:`~zoframe.oracle.CountingOracle`, normalises the seed and assembles a
:class:`~zoframe.run.RunLoop` with its observers (:mod:`zoframe.observers`): the trace recorder
with the best-point tracker, the callback, the checkpoint writer and the progress bar. It resumes
from a checkpoint when asked. :func:`minimize` runs what it built and returns the frozen
:class:`~zoframe.result.Result`; :class:`zoframe.Run` (ask/tell) builds the same run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Executor
import contextlib
import dataclasses
from dataclasses import dataclass
import math
import os
from typing import Any

import numpy as np

from zoframe.certificate import DEFAULT_TOL
from zoframe.certificate.noise import check_noise
from zoframe.errors import CheckpointError, IncompatibleProblemError, InvalidInputError, ZoframeError
from zoframe.observers import (
    BestPoint,
    Callback,
    Checkpointer,
    IterationInfo,
    MonitorBudget,
    ProgressBar,
    TraceRecorder,
)
from zoframe.observers.checkpointing import check_resume, restore
from zoframe.observers.checkpointing import solver_params as params_of
from zoframe.oracle import (
    DEFAULT_BLOCK_ROWS,
    CountingOracle,
    MonitorOracle,
    NonFiniteOption,
    problem_kind,
    resolve_nonfinite,
)
from zoframe.protocols import Array, Estimator, HasMeasures
from zoframe.registry import Registry, default_registry
from zoframe.result import Result
from zoframe.run import Observer, RunLoop

__all__ = ["IterationInfo", "RunFailedError", "build_run", "make_rng", "minimize"]

RngLike = None | int | np.random.SeedSequence | np.random.Generator


class RunFailedError(ZoframeError):
    """A run stopped on an error; ``.result`` keeps everything computed until then.

    ``interrupted``: the run was stopped by ``KeyboardInterrupt`` (Ctrl-C), not by an error of its own.
    """

    def __init__(self, message: str, result: Result, *, interrupted: bool = False) -> None:
        super().__init__(message)
        self.result = result
        self.interrupted = interrupted


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


def _equality_solvers(registry: Registry) -> list[str]:
    """The registered solvers of constrained problems that take equality constraints (``handles_equalities``)."""
    out = []
    for name, provided in sorted(registry.solvers().items()):
        spec = provided.spec
        if "constrained" not in spec.problem_kinds:
            continue
        try:
            cls = spec.cls
        except Exception:  # a solver whose optional dependency is missing is not listed
            continue
        if getattr(cls, "handles_equalities", False):
            out.append(name)
    return out


def _resolve_estimator(estimator: Any, params: Mapping[str, Any] | None, registry: Registry) -> Estimator | None:
    if params is not None and not isinstance(params, Mapping):
        raise InvalidInputError(f"estimator_params must be a mapping of parameter names to values, got {params!r}")
    if estimator is None:
        if params:
            raise InvalidInputError(
                f"estimator_params={dict(params)!r} needs estimator=NAME: they configure the estimator it "
                "names (the solver's default estimator takes the solver's own parameters, e.g. q and mu)"
            )
        return None
    if isinstance(estimator, str):
        spec = registry.estimator(estimator)
        try:
            return spec.cls(**dict(params or {}))  # type: ignore[no-any-return]
        except TypeError as exc:
            valid = [f.name for f in dataclasses.fields(spec.cls)] if dataclasses.is_dataclass(spec.cls) else []
            raise InvalidInputError(
                f"bad estimator_params for estimator {spec.name!r}: {exc}. Valid parameters: "
                f"{', '.join(valid) or 'none'} (see `zoframe info {spec.name}`)"
            ) from exc
    if not (callable(getattr(estimator, "estimate", None)) and callable(getattr(estimator, "rows", None))):
        raise InvalidInputError(f"{estimator!r} is not an estimator: it needs estimate() and rows()")
    if params:
        raise InvalidInputError(
            f"estimator_params={dict(params)!r} cannot reach an estimator instance: build it with them "
            f"(e.g. {type(estimator).__name__}(**params)) or pass its registered name"
        )
    return estimator  # type: ignore[no-any-return]


def _check_estimator_only_params(solver: Any, name: str, given: Mapping[str, Any], estimator: Any) -> None:
    """Refuse solver parameters that only configure the default estimator when another is given."""
    only = frozenset(getattr(solver, "estimator_only_params", frozenset()))
    fields = {f.name for f in dataclasses.fields(solver)} if dataclasses.is_dataclass(solver) else set()
    lost = sorted(set(given) & only & fields)
    if lost:
        shown = ", ".join(f"{k}={given[k]!r}" for k in lost)
        what = repr(estimator) if isinstance(estimator, str) else type(estimator).__name__
        raise InvalidInputError(
            f"{shown} only configure{'s' if len(lost) == 1 else ''} the default estimator of solver {name!r} and "
            f"would be ignored with estimator={what}: pass {'it' if len(lost) == 1 else 'them'} to the estimator "
            f"instead (estimator_params={{{', '.join(f'{k!r}: {given[k]!r}' for k in lost)}}})"
        )


@contextlib.contextmanager
def _blas_limit(threads: int | None) -> Iterator[None]:
    if threads is None:
        yield
        return
    try:
        import threadpoolctl
    except ImportError:  # pragma: no cover - optional
        yield
        return
    # threadpoolctl >= 3.6 keeps a controller until a module is imported (a new library may have come
    # with it): scanning the process's libraries afresh costs about a millisecond per run
    cached = getattr(threadpoolctl, "get_cached_controller", None)
    limiter = (
        cached().limit(limits=threads, user_api="blas")
        if cached is not None
        else threadpoolctl.threadpool_limits(limits=threads, user_api="blas")
    )
    with limiter:
        yield


@dataclass
class BuiltRun:
    """A run ready to go: the loop, its observers and what the result needs."""

    loop: RunLoop
    trace: TraceRecorder
    best: BestPoint
    blas_threads: int | None

    def run(self) -> Result:
        with _blas_limit(self.blas_threads):
            self.loop.run()
        return self.result()

    def result(self) -> Result:
        """The Result; raises :class:`RunFailedError` (with the partial Result) if the run failed."""
        loop = self.loop
        result = loop.result(self.best, self.trace.columns)
        if loop.failure is not None:
            if isinstance(loop.failure, KeyboardInterrupt):
                raise RunFailedError(
                    "the run was interrupted; .result holds the last iterate", result, interrupted=True
                ) from None
            raise RunFailedError(
                f"the run failed at iteration {loop.nit + 1}: {result.message}", result
            ) from loop.failure
        return result


def _check_budgets(max_iter: Any, max_calls: Any, max_time: Any) -> None:
    for name, val in (("max_iter", max_iter), ("max_calls", max_calls)):
        if val is not None and (not isinstance(val, (int, np.integer)) or isinstance(val, bool) or val < 1):
            raise InvalidInputError(f"{name} must be a positive integer or None, got {val!r}")
    if max_time is not None and not (isinstance(max_time, (int, float)) and max_time > 0):
        raise InvalidInputError(f"max_time must be a positive number of seconds, got {max_time!r}")
    if max_iter is None and max_calls is None and max_time is None:
        raise InvalidInputError(
            "refusing to run unbounded: give at least one of max_iter, max_calls or max_time"
        )


def _check_feasibility_tol(tol: Any) -> None:
    if isinstance(tol, bool) or not isinstance(tol, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(tol)) or tol < 0:
        raise InvalidInputError(
            f"feasibility_tol must be a finite number >= 0 (the constraint violation a solution may have), got {tol!r}"
        )


def _check_certificate_args(certificate: Any, certify_tol: Any) -> None:
    """``certificate`` a real boolean, ``certify_tol`` a number in ``(0, 1)`` (else the certificate cannot fail)."""
    if not isinstance(certificate, (bool, np.bool_)):
        raise InvalidInputError(
            f"certificate must be True or False, got {certificate!r} ({type(certificate).__name__}): any other value "
            "would be read as true or false by its truthiness (the string 'no' is true); pass certificate=False to "
            "switch the certificate off, True (the default) to keep it"
        )
    if isinstance(certify_tol, bool) or not isinstance(certify_tol, (int, float, np.integer, np.floating)) \
            or not certify_tol > 0:
        raise InvalidInputError(
            f"certify_tol must be a positive number (the certificate's tolerance on the relative KKT residual), "
            f"got {certify_tol!r}; to switch the certificate off pass certificate=False"
        )
    if not certify_tol < 1:
        raise InvalidInputError(
            f"certify_tol={certify_tol!r} would certify any point: the certificate's residual is relative to the size "
            "of the gradient, so a point where no constraint balances the gradient (the starting point, say) has "
            "residual at most 1 and passes every tolerance >= 1. Give a tolerance in (0, 1) (default "
            f"{DEFAULT_TOL:g}; 1e-2 is lenient), or certificate=False to switch the certificate off"
        )


def build_run(
    problem: Any,
    solver: Any = None,
    *,
    estimator: Any = None,
    estimator_params: Mapping[str, Any] | None = None,
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
    nonfinite: NonFiniteOption = "auto",
    blas_threads: int | None = 1,
    checkpoint: str | os.PathLike[str] | None = None,
    checkpoint_every: int | None = None,
    resume: str | os.PathLike[str] | None = None,
    feasibility_tol: float = 1e-3,
    certificate: bool = True,
    certify_tol: float = DEFAULT_TOL,
    noise: float | None = None,
    relative_noise: float | None = None,
    registry: Registry | None = None,
    options: Mapping[str, Any] | None = None,
    watched: bool = True,
    **solver_params: Any,
) -> BuiltRun:
    """Check everything and assemble the run of :func:`minimize` (same arguments), evaluating nothing.

    ``watched`` (the default): the caller may look at the run between two steps (step it by hand,
    take a snapshot while it waits for values, as the ask/tell interface does), so the solver runs as
    given. :func:`minimize` runs the loop to its end and passes ``False``; a solver offering
    ``unobserved_steps()`` then runs as the copy that method returns (the scipy peers: in the driver's
    thread, the loop's work after a step done from inside scipy's calls, see
    :class:`~zoframe.run.RunLoop`). The results are the same either way.
    """
    reg = registry if registry is not None else default_registry()
    kind = problem_kind(problem)
    params = {**(options or {}), **solver_params}
    notes: list[str] = []
    if solver is None:  # the library's default for the problem's kind, said in Result.notes
        solver = reg.default_solver(kind)
        notes.append(f"solver: {solver}, the default for {kind} problems; pass solver= to choose another")
    solv, solver_name = _resolve_solver(solver, params, reg)
    kinds = frozenset(getattr(solv, "problem_kinds", frozenset()))
    if kind not in kinds:
        raise IncompatibleProblemError(
            f"solver {solver_name!r} does not accept {kind!r} problems: it solves "
            f"{', '.join(sorted(kinds)) or 'no declared kind'}. Run `zoframe list` for solvers of "
            f"{kind!r} problems."
        )
    if int(getattr(problem, "m_eq", 0) or 0) and not getattr(solv, "handles_equalities", False):
        raise IncompatibleProblemError(
            f"solver {solver_name!r} does not take equality constraints h(x) = 0 (the problem declares "
            f"m_eq={int(problem.m_eq)}); solvers that do: {', '.join(_equality_solvers(reg)) or 'none registered'}."
        )
    est = _resolve_estimator(estimator, estimator_params, reg)
    if est is not None:
        if not (dataclasses.is_dataclass(solv) and any(f.name == "estimator" for f in dataclasses.fields(solv))):
            raise InvalidInputError(f"solver {solver_name!r} has a fixed gradient estimator; it takes no estimator=")
        _check_estimator_only_params(solv, solver_name, params, estimator)
        solv = dataclasses.replace(solv, estimator=est)  # type: ignore[type-var]
    _check_budgets(max_iter, max_calls, max_time)
    _check_feasibility_tol(feasibility_tol)
    _check_certificate_args(certificate, certify_tol)
    stated = check_noise(noise, relative_noise)
    if record_every is not None and (not isinstance(record_every, int) or record_every < 0):
        raise InvalidInputError(f"record_every must be an integer >= 0, got {record_every!r}")
    if checkpoint_every is not None and checkpoint is None:
        raise InvalidInputError("checkpoint_every needs a checkpoint path")
    config = params_of(solv)
    policy = resolve_nonfinite(nonfinite, solv)
    oracle = CountingOracle(
        problem, max_calls=max_calls, nonfinite=policy, executor=executor, chunks=chunks, block_rows=block_rows
    )
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
    if not np.isfinite(start).all():
        raise InvalidInputError("x0 contains NaN or infinity: give a finite starting point")

    # ---- observers: each one job
    has_measures = isinstance(problem, HasMeasures)
    monitor: MonitorOracle = oracle.monitor
    if has_measures and max_calls is not None and not bool(getattr(problem, "monitor_free", False)):
        monitor = MonitorBudget(oracle, int(max_calls))  # a black box: measuring it spends max_calls
    best = BestPoint(start, feasibility_tol)
    trace = TraceRecorder(record_every, problem.measures if has_measures else None, monitor, (best,))
    observers: list[Observer] = [trace, best]
    if callback is not None:
        observers.append(Callback(callback))
    if checkpoint is not None:
        observers.append(Checkpointer(checkpoint, checkpoint_every, (trace, best), {"solver_params": config}))
    if progress:
        observers.append(ProgressBar(max_iter, solver_name))

    state: Any = None
    nit, seconds = 0, 0.0
    if resume is not None:
        wanted = None if rng is None else make_rng(rng)[1]
        if rng is not None and wanted is None:
            raise InvalidInputError(
                "resume continues the checkpoint's generator: pass rng=None (or the checkpoint's integer seed), "
                "not a Generator"
            )
        state, gen, meta = restore(resume, (trace, best), solver=solv, registry=reg, dim=oracle.dim)
        check_resume(resume, meta, solver_name, config, wanted)
        damage = getattr(solv, "check_restored", None)
        why = damage(oracle, state) if callable(damage) else None
        if why:
            raise CheckpointError(f"checkpoint {resume} is damaged: {why}; restore it from one save or restart the run")
        seed = meta.get("seed")
        oracle.restore(meta["counters"])
        if isinstance(monitor, MonitorBudget):
            monitor.close(0, first=False)  # the monitor's spending so far comes out of the solver's budget
        nit, seconds = int(meta["nit"]), float(meta["seconds"])
    else:
        gen, seed = make_rng(rng)
    unobserved_steps = getattr(solv, "unobserved_steps", None)
    if not watched and callable(unobserved_steps):
        solv = unobserved_steps()  # nobody steps the run by hand: the loop drives it (RunLoop's drive)
    loop = RunLoop(
        solv, oracle, start, gen, solver_name=solver_name, seed=seed, max_iter=max_iter, max_calls=max_calls,
        max_time=max_time, observers=observers, state=state, nit=nit, seconds=seconds,
        check_every_step=policy == "inf", notes=notes, feasibility_tol=feasibility_tol,
        certificate=bool(certificate), certify_tol=float(certify_tol), noise=stated,
    )
    return BuiltRun(loop, trace, best, blas_threads)


def minimize(
    problem: Any,
    solver: Any = None,
    *,
    estimator: Any = None,
    estimator_params: Mapping[str, Any] | None = None,
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
    nonfinite: NonFiniteOption = "auto",
    blas_threads: int | None = 1,
    checkpoint: str | os.PathLike[str] | None = None,
    checkpoint_every: int | None = None,
    resume: str | os.PathLike[str] | None = None,
    feasibility_tol: float = 1e-3,
    certificate: bool = True,
    certify_tol: float = DEFAULT_TOL,
    noise: float | None = None,
    relative_noise: float | None = None,
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
        a registered solver name (``zoframe list``) or a solver instance. ``None`` (the default):
        the library's default solver for the problem's kind (``zo-sgd`` for finite sums, ``adszog``
        for constrained, ``zo-gdmsa`` for minimax, ``zo-svrg-admm`` for composite problems; see
        :meth:`zoframe.registry.Registry.default_solver`), named in ``Result.notes``.
    estimator:
        a registered estimator name or instance replacing the solver's default estimator. Solver
        parameters that only configure the default estimator (e.g. ``q``, ``mu`` of ``zo-sgd``)
        are then refused: give them in ``estimator_params``.
    estimator_params:
        parameters of the estimator named by ``estimator`` (e.g. ``{"q": 3, "mu": 1e-4}``); an
        unknown name is an error.
    rng:
        seed (int), SeedSequence, Generator or None (a fresh seed, reported in ``Result.seed``).
    max_iter, max_calls, max_time:
        budgets; at least one is required. ``max_calls`` is exact: no evaluation past it. For a
        problem that does not declare ``monitor_free = True``, the evaluations of its measures
        (the trace) are paid from ``max_calls`` too (see :mod:`zoframe.observers.trace`).
    callback:
        called with an :class:`IterationInfo` after every iteration; returning ``True`` stops.
    record_every:
        when the trace records (the problem's measures: ``fun``, ...). Default ``None``: at
        iteration 0, at ``1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100, 150, ...`` (six per decade)
        and at the last iteration, so the measures cost a few records per decade of iterations
        (21 records for 2000 iterations), whatever the run's length. An integer ``k`` records
        every ``k`` iterations and the last: a dense trace (``record_every=math.ceil(max_iter / 100)``
        gives about 100 records, as the default did before the grid); ``0`` records only the first
        and the last iterate. The best point (``x_best``, ``fun_best``) is the best recorded one.
    progress:
        show a progress bar (after half a second) on stderr, when stderr is a terminal
        (``ZOFRAME_PROGRESS=0`` hides it everywhere, ``=always`` draws it off a terminal too).
    x0:
        starting point (default: the problem's ``x0``); never modified.
    executor, chunks:
        evaluate batches on a :class:`concurrent.futures.Executor`, their blocks grouped into
        ``chunks`` tasks per batch (default: 2 per worker).
    block_rows:
        rows per call of a user function (default 256): every batch is split into these blocks,
        serially and in parallel alike, so results are bit-identical with or without an executor.
    nonfinite:
        what to do when a user function returns NaN or inf. ``"raise"``: the run stops with a
        :class:`~zoframe.errors.NonFiniteValueError` that names the function and the point. ``"inf"``:
        the value counts as ``+inf``, a failed trial: a line search shortens its step, an estimator
        leaves that direction out, a peer gets ``+inf``; the iterate is checked after every step (a
        non-finite iterate, or one where the function itself is not finite, ends the run with status
        ``DIVERGED``; ``x_best`` keeps the last finite best point), and ``Result.notes`` counts the
        failed values. ``"auto"`` (default): ``"inf"`` for the solvers that step back from a failed
        trial (``steps="auto"`` of every family, the peers), ``"raise"`` for fixed steps
        (``steps="paper"``), which cannot (``solver.nonfinite_policy()``).
    blas_threads:
        limit BLAS threads during the run (default 1: small products are much faster single
        threaded); ``None`` leaves the library default.
    checkpoint, checkpoint_every:
        write ``checkpoint.npz``/``.json`` every ``checkpoint_every`` iterations and at the end.
    resume:
        continue from a checkpoint written by a run of the same solver with the same parameters
        (and the same seed, if ``rng`` is given); anything else is refused, naming what differs.
    feasibility_tol:
        violation under which a recorded point counts as feasible when choosing ``x_best``
        (a finite number >= 0), and the final point in ``Result.feasible`` and in the certificate.
    certificate, certify_tol:
        when the solver claims convergence, the final point is certified once
        (:func:`zoframe.certificate.certify`: a KKT / stationarity test from central differences
        at the point itself, with a second-order check; its evaluations are counted under
        ``nfev_by_purpose["certify"]``, outside ``max_calls``). ``certify_tol`` (default
        ``1e-3``) is the tolerance on its relative residual: larger is more lenient; it must lie in
        ``(0, 1)``, since the residual is relative to the gradient's size and a tolerance of 1 or
        more would pass any point, the starting one included. ``certificate`` must be ``True`` or
        ``False`` (a bool; a string is refused); ``False`` skips it, and a claim is then never a
        success (message "not certified (certificate off)"). See ``docs/success.md``.
    noise, relative_noise:
        the noise of your function's values when you know it: the standard deviation, absolute (in
        the function's units) or relative to ``|f|``; give at most one. By default the certificate
        estimates it at the final point (ECNoise, ``zoframe.noise``) and reports it in
        ``Result.certificate["noise"]``. Under noise the certificate adds an error bound to its
        residual: a point passes only beyond the noise, and a run whose verdict the noise decides
        ends ``NOISE_LIMITED`` (``docs/imperfect-black-boxes.md``).

    options, **solver_params:
        hyper-parameters of the solver (``zoframe info NAME`` lists them).

    Notes
    -----
    ``Result.success`` is true only when the solver claims convergence (status ``CONVERGED``, or
    ``NOISE_LIMITED``: as far as the noise allows) at a
    finite (and, for constrained problems, feasible) point AND that point passes the certificate
    (``Result.certificate``); a budget stop says which budget in ``status`` and is not a success
    (see :func:`zoframe.result.decide_success` and ``docs/success.md``).

    A bad argument raises before anything is evaluated. Once the run has started, any
    exception that ends it (the user's function raising, a non-finite value under
    ``nonfinite="raise"``, a solver refusing the problem at its first evaluations) raises
    :class:`RunFailedError`, at the first evaluation as at any later one: its ``__cause__`` is the
    exception and its ``.result`` the run so far (at ``x0`` with ``nit = 0`` if it failed at once).
    """
    return build_run(
        problem, solver, estimator=estimator, estimator_params=estimator_params, rng=rng, max_iter=max_iter,
        max_calls=max_calls, max_time=max_time, callback=callback, record_every=record_every, progress=progress,
        x0=x0, executor=executor, chunks=chunks, block_rows=block_rows, nonfinite=nonfinite,
        blas_threads=blas_threads, checkpoint=checkpoint, checkpoint_every=checkpoint_every, resume=resume,
        feasibility_tol=feasibility_tol, certificate=certificate, certify_tol=certify_tol, noise=noise,
        relative_noise=relative_noise, registry=registry, options=options, watched=False, **solver_params,
    ).run()
