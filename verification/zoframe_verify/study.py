"""Convergence-rate studies: sweeps in parallel, persisted in SQLite, fitted, reported.

``rate_study(solver, problem, seeds=..., budget=...)`` runs one long trajectory per seed (or, with
``horizons=[T1, T2, ...]``, one run per seed and horizon), records a measure along each run,
stores every finished run in an SQLite file (``db``), fits the log-log slope of the chosen curve
against iterations and against oracle calls with a bootstrap interval across seeds, compares it with
the rate the paper proves (:data:`zoframe_verify.rates.THEORY`) and, with ``out``, writes a
Markdown and a JSON report with PNG plots.

Progress: with ``progress_bar=True`` a tqdm bar on stderr counts the iterations of all runs to do
(so it moves during a run, with an ETA), also with worker processes (a shared counter); it is drawn
only when stderr is a terminal and not with ``ZOFRAME_PROGRESS=0`` (:mod:`zoframe._output`). Each
finished run is a notice on the logger ``"zoframe.verify"`` (INFO).

The report prints as a short summary (``print(report)``); the data are its attributes
(``fits``, ``runs``, ``curves``), :meth:`RateReport.to_dict` and :meth:`RateReport.to_markdown`.

Worker processes end with their parent: each worker asks the kernel for ``SIGKILL`` when its parent
dies (``prctl(PR_SET_PDEATHSIG)`` on Linux) and a watchdog thread ends it when its parent process id
changes (the portable fallback), so ``kill -9`` of ``zoframe rate --workers N`` leaves no worker
computing.

Resuming: a run is identified by (study key, seed, horizon); the study key hashes everything that
changes a run (solver, problem, their parameters, the measure, the budgets). A run already in the
database is never repeated, so an interrupted sweep loses only the runs that were in flight.

Measures (``measure=``), computed by a callback at every ``measure_every``-th iteration, directly on
the problem (not counted in the solver's budget):

``grad_norm`` / ``grad_norm_sq``    finite sum: gradient (mapping) norm (white-box or central differences)
``grad_g_norm`` / ``grad_g_norm_sq`` minimax: ``||grad g(x)||`` with a warm-started inner solve
``kkt``, ``eps1``, ``eps2``, ``eps3``  constrained: Definition 5.3 residuals (NNLS multipliers)
``penalty_grad_g_norm(_sq)``     constrained, DSZOG / ADSZOG: ``||grad g(w)||`` of the penalty minimax (Def. 5.6);
                                 it sees the inequality constraints only, so a problem with equality
                                 constraints refuses it (the default is then ``kkt``, which covers them)
``dist2``                        composite: ``dist(0, dL)^2`` (needs the solver's ``y0..``, ``lam`` outputs)
``fun_gap``, ``dist_to_solution``    against the known solution or the cvxpy reference
any other name                    a column of the problem's own ``measures()``

Fit range. The slope is fitted over the last ``decades`` decades before the curves END: at the
horizon, or earlier where the runs stopped (a run that converges at iteration 10 of 500 has no
points after 10, and the curves end at the first run's stop), or where the running minimum of the
measure reaches a floor (:func:`zoframe_verify.rates.find_floor`: it stops falling; the stretch
after it is no rate). The report says which runs stopped where, where a floor starts, and the range
fitted on each axis.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
import contextlib
import dataclasses
from dataclasses import dataclass, field
import hashlib
import io
import json
import logging
import math
import multiprocessing
import os
from pathlib import Path
import pickle
import signal
import sqlite3
import sys
import threading
import time
from typing import Any

import numpy as np

from zoframe._optional import require
from zoframe._output import logger, progress_wanted
from zoframe.errors import InvalidInputError, ZoframeError
from zoframe.protocols import Array, HasCvxpyModel, HasKnownSolution
from zoframe.userproblem import fingerprint, load_reference, problem_source
from zoframe_verify.rates import (
    THEORY,
    SlopeFit,
    TheoryRate,
    common_grid,
    compare,
    find_floor,
    fit_loglog,
    running_curve,
    theory_for,
)

__all__ = ["DEFAULT_MEASURE", "RateReport", "RunRecord", "RunStore", "StudyConfig", "rate_study", "run_one"]

#: the measure fitted when none is named, per problem kind
DEFAULT_MEASURE = {
    "finite_sum": "grad_norm_sq",
    "constrained": "kkt",
    "minimax": "grad_g_norm_sq",
    "composite": "dist2",
}


#: measures computed by zoframe_verify itself, per problem kind
BUILTIN_MEASURES = {
    "finite_sum": ("grad_norm", "grad_norm_sq"),
    "constrained": ("kkt", "eps1", "eps2", "eps3", "penalty_grad_g_norm", "penalty_grad_g_norm_sq"),
    "minimax": ("grad_g_norm", "grad_g_norm_sq"),
    "composite": ("dist2",),
}


@dataclass(frozen=True)
class StudyConfig:
    """Everything that determines the runs of a study (hashed into :attr:`key`)."""

    solver: str
    problem: str
    problem_args: Mapping[str, Any]
    params: Mapping[str, Any]
    measure: str
    measure_every: int = 1
    max_calls: int | None = None
    #: for a problem of the user's own given by reference: a hash of its code now (empty otherwise)
    problem_code: str = ""

    @property
    def key(self) -> str:
        fields = dataclasses.asdict(self)
        if not fields["problem_code"]:  # registered problems keep the keys they had before the field existed
            del fields["problem_code"]
        blob = json.dumps(fields, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:24]

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True, default=str)


@dataclass(frozen=True)
class RunRecord:
    """One finished run: the measure at the measured iterations and the oracle calls there."""

    seed: int
    horizon: int
    iterations: Array
    calls: Array
    values: Array
    status: str
    nit: int
    nfev: int
    seconds: float
    reused: bool = False

    def __repr__(self) -> str:
        last = f"{self.values[-1]:.4g}" if self.values.size else "none"
        return (
            f"RunRecord(seed={self.seed}, horizon={self.horizon}, status={self.status!r}, nit={self.nit}, "
            f"nfev={self.nfev}, points={self.values.size}, last={last}, seconds={self.seconds:.3g}, reused={self.reused})"
        )


# --------------------------------------------------------------------------- measures along a run
def _reference_point(problem: Any) -> tuple[float | None, Array | None]:
    if isinstance(problem, HasCvxpyModel):
        from zoframe_verify.reference import ReferenceSolveError, reference_solution

        try:
            ref = reference_solution(problem)
            return ref.fun, ref.x
        except ReferenceSolveError:
            pass
    if isinstance(problem, HasKnownSolution):
        try:
            known = problem.known_solution()
        except ZoframeError:
            return None, None
        fun = known.get("fun")
        x = known.get("x")
        return (None if fun is None else float(fun)), (None if x is None else np.asarray(x, dtype=np.float64))
    return None, None


def make_measure(problem: Any, name: str, solver: Any = None) -> Callable[[Mapping[str, Array]], float]:
    """A function ``outputs -> value`` of the named measure (see the module docstring).

    ``solver`` (the solver instance) supplies ``beta`` and ``lam`` to the DSZOG penalty measure.
    """
    from zoframe_verify import checks

    kind = str(getattr(problem, "kind", ""))
    if name in ("grad_norm", "grad_norm_sq") and kind == "finite_sum":
        power = 2 if name.endswith("_sq") else 1
        return lambda o: checks.finite_sum_report(problem, o["x"]).grad_norm ** power
    if name in ("grad_g_norm", "grad_g_norm_sq") and kind == "minimax":
        power = 2 if name.endswith("_sq") else 1
        warm: dict[str, Array] = {"y": np.asarray(problem.y0, dtype=np.float64)}

        def grad_g(o: Mapping[str, Array]) -> float:
            x = np.asarray(o["x"], dtype=np.float64)
            inner = checks.inner_maximize(problem, x, warm["y"])
            warm["y"] = inner.y
            gx, _, _ = checks.minimax_gradients(problem, x, inner.y)
            return float(np.linalg.norm(gx)) ** power

        return grad_g
    if name in ("penalty_grad_g_norm", "penalty_grad_g_norm_sq") and kind == "constrained":
        m_eq = int(getattr(problem, "m_eq", 0) or 0)
        if m_eq:
            raise InvalidInputError(
                f"{name} measures the penalty minimax of the inequality constraints only, and this problem has "
                f"{m_eq} equality constraint(s) h(x) = 0 that it would ignore (it is not zero at a KKT point): "
                "measure the KKT residual instead (measure='kkt', --measure kkt), which covers them"
            )
        beta, lam = getattr(solver, "beta", None), getattr(solver, "lam", None)
        if beta is None or lam is None:
            raise InvalidInputError(
                f"{name} is the stationarity of the DSZOG penalty minimax: it needs a solver with the "
                "parameters beta and lam (dszog, adszog)"
            )
        power = 2 if name.endswith("_sq") else 1
        return lambda o: checks.penalty_report(problem, o["x"], beta=float(beta), lam=float(lam)).grad_g_norm ** power
    if name in ("kkt", "eps1", "eps2", "eps3") and kind == "constrained":
        return lambda o: checks.kkt_report(problem, o["x"]).measures()[name]
    if name == "dist2" and kind == "composite":
        k = len(problem.B)

        def dist2(o: Mapping[str, Array]) -> float:
            ys = [o[f"y{j}"] for j in range(k)] if all(f"y{j}" in o for j in range(k)) else None
            return checks.admm_report(problem, o["x"], ys, o.get("lam")).dist2

        return dist2
    if name in ("fun_gap", "dist_to_solution"):
        fstar, xstar = _reference_point(problem)
        if name == "fun_gap":
            if fstar is None:
                raise InvalidInputError("fun_gap needs a known solution or a cvxpy model of the problem")
            fs = float(fstar)
            if kind == "minimax":
                return lambda o: checks.minimax_report(problem, o["x"], o.get("y")).g - fs
            if kind == "composite":
                return lambda o: checks.admm_report(problem, o["x"], _blocks_of(problem, o), o.get("lam")).fun - fs
            return lambda o: checks.objective_value(problem, np.asarray(o["x"], dtype=np.float64)) - fs
        if xstar is None:
            raise InvalidInputError("dist_to_solution needs a known solution or a cvxpy model of the problem")
        xs = xstar
        return lambda o: float(np.linalg.norm(np.asarray(o["x"]) - xs))
    # a column of the problem's own measures
    if not callable(getattr(problem, "measures", None)):
        raise InvalidInputError(
            f"unknown measure {name!r} for a {kind} problem: built-in measures are grad_norm(_sq), "
            "grad_g_norm(_sq), kkt, eps1..3, dist2, fun_gap, dist_to_solution, or a column of the problem's "
            "measures()"
        )
    from zoframe.oracle import CountingOracle

    monitor = CountingOracle(problem).monitor

    def column(o: Mapping[str, Array]) -> float:
        ms = problem.measures(o, monitor)
        if name not in ms:
            raise InvalidInputError(
                f"unknown measure {name!r}: the problem's measures() has no such column (it has {sorted(ms)}); "
                f"built-in measures of a {kind} problem: {', '.join(BUILTIN_MEASURES.get(kind, ()))}, fun_gap, "
                "dist_to_solution"
            )
        return float(ms[name])

    return column


def initial_outputs(problem: Any) -> dict[str, Array]:
    """The outputs a solver would report at the problem's starting point (``x0``, ``y0`` / ``y0..``)."""
    outs: dict[str, Array] = {"x": np.asarray(problem.x0, dtype=np.float64)}
    kind = getattr(problem, "kind", "")
    if kind == "minimax":
        outs["y"] = np.asarray(problem.y0, dtype=np.float64)
    elif kind == "composite":
        for j, y in enumerate(problem.y0):
            outs[f"y{j}"] = np.asarray(y, dtype=np.float64)
    return outs


def _check_measure(problem: Any, name: str, solver: Any) -> None:
    fn = make_measure(problem, name, solver)
    try:
        fn(initial_outputs(problem))
    except KeyError:  # the measure needs outputs only a solver reports (e.g. its dual iterate)
        pass


def _blocks_of(problem: Any, o: Mapping[str, Array]) -> list[Array] | None:
    k = len(problem.B)
    return [o[f"y{j}"] for j in range(k)] if all(f"y{j}" in o for j in range(k)) else None


# --------------------------------------------------------------------------- workers and progress
#: in a worker process: the shared iteration counter of the parent's progress bar (set by _init_worker)
_COUNTER: Any = None
#: in-process runs: a function told how many iterations were just done (set by _execute)
_TICK: Callable[[int], None] | None = None
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _tick(n: int) -> None:
    if _TICK is not None:
        _TICK(n)
    elif _COUNTER is not None:
        with _COUNTER.get_lock():
            _COUNTER.value += n


def _end_with_parent(parent: int, poll: float = 0.5) -> None:
    """Make this process end when the process ``parent`` ends (a pool worker of a study).

    Linux: ``prctl(PR_SET_PDEATHSIG, SIGKILL)``, the kernel kills the worker when its parent dies.
    Everywhere: a daemon thread polls ``os.getppid()`` every ``poll`` seconds and exits the process
    (``os._exit``) once the parent is gone (the worker was re-parented).
    """
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # no prctl: the watchdog below still applies
            pass
    if os.getppid() != parent:  # the parent died before the request above was in place
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(poll)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="zoframe-parent-watchdog", daemon=True).start()


def _init_worker(parent: int, counter: Any) -> None:
    """Initializer of the study's worker processes: end with the parent, report progress to ``counter``."""
    global _COUNTER
    _end_with_parent(parent)
    _COUNTER = counter


def run_one(config_json: str, seed: int, horizon: int, problem: Any = None) -> dict[str, Any]:
    """Execute one run of a study (in a worker process); returns plain data for the store.

    ``problem``: what the problem is rebuilt from (a registered name, a ``"module:attr"`` reference,
    a factory or a problem object: :attr:`zoframe.userproblem.ProblemSource.portable`); default: the
    registered name in the configuration.
    """
    from zoframe.driver import minimize
    from zoframe.registry import default_registry
    from zoframe.userproblem import rebuild

    cfg = json.loads(config_json)
    reg = default_registry()
    problem = rebuild(cfg["problem"] if problem is None else problem, cfg["problem_args"], reg)
    spec = reg.solver(cfg["solver"])
    solver = spec.cls(**cfg["params"])
    measure = make_measure(problem, cfg["measure"], solver)
    every = int(cfg["measure_every"])
    outputs_fn = getattr(solver, "outputs", None)
    its: list[float] = []
    calls: list[float] = []
    vals: list[float] = []

    tick_every = max(1, horizon // 200)
    ticked = [0]

    def callback(info: Any) -> None:
        if info.iteration - ticked[0] >= tick_every:
            _tick(info.iteration - ticked[0])
            ticked[0] = info.iteration
        if info.iteration % every and info.iteration != horizon:
            return
        outs = dict(outputs_fn(info.state)) if callable(outputs_fn) else {"x": info.x}
        its.append(float(info.iteration))
        calls.append(float(info.calls))
        vals.append(float(measure(outs)))

    t0 = time.perf_counter()
    res = minimize(
        problem,
        solver,
        rng=seed,
        max_iter=horizon,
        max_calls=cfg.get("max_calls"),
        callback=callback,
        record_every=0,
    )
    _tick(horizon - ticked[0])  # the rest, also when the run stopped early
    return {
        "iterations": its,
        "calls": calls,
        "values": vals,
        "status": res.status.name,
        "nit": res.nit,
        "nfev": res.nfev,
        "seconds": time.perf_counter() - t0,
    }


# --------------------------------------------------------------------------- persistence
class RunStore:
    """Finished runs in an SQLite file; ``(study, seed, horizon)`` is the primary key."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._con = sqlite3.connect(self.path)
        self._con.execute(
            "CREATE TABLE IF NOT EXISTS runs (study TEXT NOT NULL, seed INTEGER NOT NULL, horizon INTEGER NOT NULL, "
            "config TEXT NOT NULL, status TEXT, nit INTEGER, nfev INTEGER, seconds REAL, data BLOB NOT NULL, "
            "created REAL NOT NULL, PRIMARY KEY (study, seed, horizon))"
        )
        self._con.commit()

    def close(self) -> None:
        self._con.close()

    def done(self, study: str) -> set[tuple[int, int]]:
        rows = self._con.execute("SELECT seed, horizon FROM runs WHERE study = ?", (study,)).fetchall()
        return {(int(s), int(h)) for s, h in rows}

    def add(self, study: str, config_json: str, seed: int, horizon: int, data: Mapping[str, Any]) -> None:
        buf = io.BytesIO()
        np.savez_compressed(
            buf,
            iterations=np.asarray(data["iterations"], dtype=np.float64),
            calls=np.asarray(data["calls"], dtype=np.float64),
            values=np.asarray(data["values"], dtype=np.float64),
        )
        self._con.execute(
            "INSERT OR IGNORE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (study, seed, horizon, config_json, data["status"], int(data["nit"]), int(data["nfev"]),
             float(data["seconds"]), buf.getvalue(), time.time()),
        )
        self._con.commit()  # one transaction per run: an interruption loses nothing finished

    def load(self, study: str, seed: int, horizon: int) -> RunRecord:
        row = self._con.execute(
            "SELECT status, nit, nfev, seconds, data FROM runs WHERE study = ? AND seed = ? AND horizon = ?",
            (study, seed, horizon),
        ).fetchone()
        if row is None:
            raise KeyError((study, seed, horizon))
        with np.load(io.BytesIO(row[4]), allow_pickle=False) as d:
            its, calls, vals = (np.asarray(d[k], dtype=np.float64) for k in ("iterations", "calls", "values"))
        return RunRecord(seed, horizon, its, calls, vals, str(row[0]), int(row[1]), int(row[2]), float(row[3]), True)

    def count(self, study: str | None = None) -> int:
        if study is None:
            return int(self._con.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
        return int(self._con.execute("SELECT COUNT(*) FROM runs WHERE study = ?", (study,)).fetchone()[0])


# --------------------------------------------------------------------------- the study
@dataclass(frozen=True)
class RateReport:
    """The outcome of :func:`rate_study`.

    ``fits``: ``{"iterations": SlopeFit, "calls": SlopeFit}``; ``theory``: the proven rate
    (``None`` when the table has none and none was given); ``verdicts``: per axis, the result of
    :func:`~zoframe_verify.rates.compare`; ``executed`` / ``reused``: runs computed now / read
    from the database; ``files``: the report files written.
    """

    config: StudyConfig
    curve: str
    seeds: tuple[int, ...]
    horizons: tuple[int, ...]
    runs: tuple[RunRecord, ...]
    fits: Mapping[str, SlopeFit]
    theory: TheoryRate | None
    verdicts: Mapping[str, str]
    tolerance: float
    executed: int
    reused: int
    curves: Mapping[str, tuple[Array, Array]] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    #: per axis: where the fitted range ends and why (the horizon, the runs' stop, a floor of the measure)
    fit_ends: Mapping[str, str] = field(default_factory=dict)
    #: what the study chose or found that the numbers depend on (the measure, runs that stopped early)
    notes: tuple[str, ...] = ()

    def summary(self) -> str:
        """A few lines: the study, the fitted slopes with their intervals, the proven slope and the verdicts."""
        c = self.config
        hs = ", ".join(str(h) for h in self.horizons)
        lines = [
            f"rate study: {c.solver} on {c.problem} ({self.curve} {c.measure}; {len(self.seeds)} seed(s) x "
            f"{hs} iterations; {self.executed} run(s) now, {self.reused} reused)"
        ]
        proven = "no proven rate tabulated" if self.theory is None else f"proven {self.theory.slope:g}"
        for axis, fit in self.fits.items():
            lines.append(
                f"  {axis + ':':<11} slope {fit.slope:.3f} [{fit.lo:.3f}, {fit.hi:.3f}] fitted over "
                f"{fit.x_lo:.3g}..{fit.x_hi:.3g}; {proven}" + (f": {self.verdicts[axis]}" if axis in self.verdicts else "")
            )
            if axis in self.fit_ends:
                lines.append(f"  {'':<11} {self.fit_ends[axis]}")
        lines += [f"  note: {n}" for n in self.notes]
        md = [f for f in self.files if f.endswith(".md")]
        lines.append(f"  full report: {md[0]}" if md else "  full data: .fits, .runs, .curves, .to_dict(), .to_markdown()")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        slopes = ", ".join(f"{a}={f.slope:.3f}" for a, f in self.fits.items())
        return (
            f"RateReport(solver={self.config.solver!r}, problem={self.config.problem!r}, measure="
            f"{self.config.measure!r}, curve={self.curve!r}, seeds={len(self.seeds)}, horizons={list(self.horizons)}, "
            f"slopes=({slopes}), verdicts={dict(self.verdicts)})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "study": self.config.key,
            "config": json.loads(self.config.to_json()),
            "curve": self.curve,
            "seeds": list(self.seeds),
            "horizons": list(self.horizons),
            "executed": self.executed,
            "reused": self.reused,
            "fits": {k: v.to_dict() for k, v in self.fits.items()},
            "theory": None if self.theory is None else dataclasses.asdict(self.theory),
            "verdicts": dict(self.verdicts),
            "tolerance": self.tolerance,
            "fit_ends": dict(self.fit_ends),
            "notes": list(self.notes),
            "files": list(self.files),
        }

    def to_markdown(self) -> str:
        c = self.config
        mname = f"{self.curve}_{{s<=t}} {c.measure}" if self.curve == "min" else f"{self.curve}({c.measure})"
        lines = [
            f"# Rate study: {c.solver} on {c.problem}",
            "",
            f"- measure: `{c.measure}`, curve: `{self.curve}` ({mname}), measured every {c.measure_every} iteration(s)",
            f"- problem arguments: `{json.dumps(dict(c.problem_args), sort_keys=True)}`; solver parameters: "
            f"`{json.dumps(dict(c.params), sort_keys=True, default=str)}`",
            f"- seeds: {len(self.seeds)} ({self.seeds[0]}..{self.seeds[-1]}); horizons: "
            f"{', '.join(str(h) for h in self.horizons)}; runs executed now: {self.executed}, reused from the "
            f"database: {self.reused}",
            f"- study key: `{c.key}`",
            "",
            "| axis | fitted slope | bootstrap interval | fit range | points | log10 RMS residual | proven slope | verdict |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for axis, fit in self.fits.items():
            th = "n/a" if self.theory is None else f"{self.theory.slope:g}"
            lines.append(
                f"| {axis} | {fit.slope:.3f} | [{fit.lo:.3f}, {fit.hi:.3f}] ({fit.level:.0%}, {fit.n_boot} resamples) | "
                f"{fit.x_lo:.3g} .. {fit.x_hi:.3g} | {fit.n_points} | {fit.residual:.3f} | {th} | "
                f"{self.verdicts.get(axis, 'n/a')} |"
            )
        lines.append("")
        for axis, text in self.fit_ends.items():
            lines.append(f"- fit range ({axis}): {text}")
        lines += [f"- note: {n}" for n in self.notes]
        if self.fit_ends or self.notes:
            lines.append("")
        bent = [a for a, f in self.fits.items() if f.residual > 0.1]
        if bent:
            lines.append(
                f"Note: the fit residual on {', '.join(bent)} exceeds 0.1 decade: the curve is not a power law over "
                "the fitted range (e.g. a linear rate down to a floor), so the slope only summarises it."
            )
            lines.append("")
        if self.theory is not None:
            lines.append(f"Proven rate: O(T^{self.theory.slope:g}) for {self.theory.curve} of "
                         f"{self.theory.measure} ({self.theory.source}). {self.theory.note}".rstrip())
            lines.append(
                f"The verdict is `consistent` when the interval widened by +-{self.tolerance:g} contains the proven "
                "slope; a proven rate is an upper bound, so `faster than proven` is no contradiction."
            )
        else:
            lines.append("No proven rate is tabulated for this solver and measure (pass --theory SLOPE to compare).")
        for f in self.files:
            if f.endswith(".png"):
                lines += ["", f"![{Path(f).stem}]({Path(f).name})"]
        return "\n".join(lines) + "\n"


def _resolve_executor(
    kind: str, workers: int, scheduler: str | None, counter: Any = None
) -> tuple[Executor | None, Callable[[], None]]:
    if workers <= 1 and kind == "process":
        return None, lambda: None
    if kind == "process":
        ex = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_worker,
            initargs=(os.getpid(), counter),
        )
        return ex, lambda: ex.shutdown(wait=True, cancel_futures=True)
    if kind == "dask":
        dist: Any = require("distributed", feature="--executor dask")
        Client, LocalCluster = dist.Client, dist.LocalCluster
        if scheduler:
            client = Client(scheduler)
            cluster = None
        else:
            cluster = LocalCluster(n_workers=max(1, workers), threads_per_worker=1, processes=True,
                                   dashboard_address=None)
            client = Client(cluster)
        ex = client.get_executor(pure=False)

        def close() -> None:
            client.close()
            if cluster is not None:
                cluster.close()

        return ex, close
    raise InvalidInputError(f"executor must be 'process' or 'dask', got {kind!r}")


def _execute(
    store: RunStore,
    cfg: StudyConfig,
    todo: Sequence[tuple[int, int]],
    workers: int,
    executor: str,
    scheduler: str | None,
    progress: Callable[[str], None] | None,
    progress_bar: bool = False,
    portable: Any = None,
) -> int:
    global _TICK
    if not todo:
        return 0
    config_json = cfg.to_json()
    total = sum(h for _, h in todo)
    bar: Any = None
    if progress_wanted(progress_bar):
        from tqdm.auto import tqdm

        bar = tqdm(total=total, unit="it", desc=f"{cfg.solver} on {cfg.problem}: {len(todo)} runs", file=sys.stderr)
    log = logger("verify")

    def say(msg: str) -> None:  # a notice (logging) and the caller's own progress function
        log.info("%s", msg)
        if progress is not None:
            progress(msg)

    counter = multiprocessing.get_context("spawn").Value("q", 0) if (bar is not None and executor == "process") else None
    ex, close = _resolve_executor(executor, workers, scheduler, counter)
    done = 0
    shown = 0
    redirect = contextlib.ExitStack()
    if bar is not None:  # notices printed to stderr go above the bar instead of through it
        from tqdm.contrib.logging import logging_redirect_tqdm

        redirect.enter_context(logging_redirect_tqdm(loggers=[logging.getLogger("zoframe")]))
    try:
        if ex is None:
            if bar is not None:
                _TICK = bar.update
            for seed, horizon in todo:
                store.add(cfg.key, config_json, seed, horizon, run_one(config_json, seed, horizon, portable))
                done += 1
                say(f"run seed={seed} horizon={horizon} done ({done}/{len(todo)})")
        else:
            futures: dict[Future[dict[str, Any]], tuple[int, int]] = {
                ex.submit(run_one, config_json, s, h, portable): (s, h) for s, h in todo
            }
            pending = set(futures)
            while pending:
                finished, pending = _wait_some(pending, 0.5 if bar is not None else None)
                if bar is not None:
                    now = int(counter.value) if counter is not None else sum(futures[f][1] for f in futures if f.done())
                    bar.update(now - shown)
                    shown = now
                for fut in finished:
                    s, h = futures[fut]
                    store.add(cfg.key, config_json, s, h, fut.result())
                    done += 1
                    say(f"run seed={s} horizon={h} done ({done}/{len(todo)})")
    finally:
        _TICK = None
        close()
        redirect.close()
        if bar is not None:
            bar.close()
    return done


def _wait_some(pending: set[Future[Any]], timeout: float | None) -> tuple[set[Future[Any]], set[Future[Any]]]:
    """The futures finished within ``timeout`` seconds (all that finished first when ``None``), and the rest."""
    from concurrent.futures import FIRST_COMPLETED, wait

    finished, rest = wait(pending, timeout=timeout, return_when=FIRST_COMPLETED)
    return set(finished), set(rest)


def _axis_curves(
    runs: Sequence[RunRecord], curve: str, horizons: Sequence[int], axis: str, grid_points: int = 200
) -> tuple[Array, Array]:
    """(x grid, Y (seeds, points)) of the chosen curve against iterations or oracle calls."""
    seeds = sorted({r.seed for r in runs})
    by = {(r.seed, r.horizon): r for r in runs}
    if len(horizons) == 1:  # one long trajectory per seed
        T = horizons[0]
        recs = [by[(s, T)] for s in seeds]
        xs = [r.iterations if axis == "iterations" else r.calls for r in recs]
        ys = [running_curve(r.values, curve) for r in recs]
        # a log-spaced grid weights every decade equally in the fit, on both axes
        return common_grid(xs, ys, points=grid_points)
    # seeds x horizons: the curve's value at the end of each run
    Y = np.empty((len(seeds), len(horizons)))
    X = np.empty((len(seeds), len(horizons)))
    for i, s in enumerate(seeds):
        for j, h in enumerate(horizons):
            r = by[(s, h)]
            Y[i, j] = running_curve(r.values, curve)[-1] if r.values.size else math.nan
            X[i, j] = (r.iterations if axis == "iterations" else r.calls)[-1] if r.values.size else math.nan
    if axis == "iterations" or np.allclose(X, X[0]):
        return X[0], Y
    return common_grid(list(X), list(Y), points=len(horizons))


def _level_curves(runs: Sequence[RunRecord], horizons: Sequence[int], axis: str, grid: Array, half: float = 0.15) -> Array:
    """The level of the raw measure along each run on ``grid``: its median over the window ``grid * 10**[-half,
    half]`` (a floor of the measure shows as a flat level, which a running minimum of noisy values or a running
    average of values at the floor would hide). Seeds x horizons: the curves' values themselves."""
    if len(horizons) != 1:
        return _axis_curves(runs, "min", horizons, axis)[1]
    seeds = sorted({r.seed for r in runs})
    by = {r.seed: r for r in runs}
    out = np.full((len(seeds), grid.shape[0]), np.nan)
    for i, s in enumerate(seeds):
        r = by[s]
        xs = r.iterations if axis == "iterations" else r.calls
        order = np.argsort(xs, kind="stable")
        xs, vs = xs[order], r.values[order]
        lo = np.searchsorted(xs, grid / 10.0**half, side="left")
        hi = np.searchsorted(xs, grid * 10.0**half, side="right")
        for j, (a, b) in enumerate(zip(lo, hi)):
            if b > a:
                out[i, j] = float(np.median(vs[a:b]))
    return out


def rate_study(
    solver: str,
    problem: Any,
    *,
    seeds: int | Sequence[int] = 5,
    budget: int = 1000,
    horizons: Sequence[int] | None = None,
    measure: str | None = None,
    curve: str | None = None,
    problem_args: Mapping[str, Any] | None = None,
    params: Mapping[str, Any] | None = None,
    measure_every: int = 1,
    max_calls: int | None = None,
    workers: int = 1,
    executor: str = "process",
    scheduler: str | None = None,
    db: str | os.PathLike[str] | None = None,
    out: str | os.PathLike[str] | None = None,
    decades: float = 2.0,
    n_boot: int = 1000,
    level: float = 0.9,
    theory: float | None = None,
    tol: float = 0.1,
    progress: Callable[[str], None] | None = None,
    progress_bar: bool = False,
) -> RateReport:
    """Run (or resume) a rate study of a registered solver on a problem; see the module doc.

    ``problem``: a registered name, a problem object (``zoframe.FiniteSum(...)``, ...), a factory
    returning one (called with ``problem_args``) or a ``"module:attr"`` / ``"file.py:attr"``
    reference (:mod:`zoframe.userproblem`). Worker processes (``workers > 1``) rebuild it from the
    name or the reference, or unpickle the object / factory, which must then be picklable (a
    module-level function or class; a lambda is not). The study key of an object, a factory or a
    reference hashes its pickle and its code (:func:`zoframe.userproblem.fingerprint`), so the same
    problem resumes from ``db`` and an edited one starts afresh.

    ``progress`` is told when each run ends; ``progress_bar=True`` shows a tqdm bar (stderr) over
    the iterations of all runs to do, with an ETA.
    """
    from zoframe.registry import default_registry

    reg = default_registry()
    spec = reg.solver(solver)  # unknown names fail here, before any run
    pargs = dict(problem_args or {})
    source = problem_source(problem, reg)
    prob = source.build(**pargs)
    kind = str(getattr(prob, "kind", ""))
    if kind not in spec.problem_kinds:
        raise InvalidInputError(f"solver {solver!r} does not accept {kind!r} problems (it solves {sorted(spec.problem_kinds)})")
    sparams = dict(params or {})
    notes: list[str] = []
    m_eq_prob = int(getattr(prob, "m_eq", 0) or 0)
    fields = {f.name for f in dataclasses.fields(spec.cls)} if dataclasses.is_dataclass(spec.cls) else set()
    if "steps" in fields and "steps" not in sparams and not m_eq_prob:
        # the theory's rate is that of the papers' iteration: study it (steps="auto" stops by itself once solved)
        sparams["steps"] = "paper"
        notes.append(
            f"steps='paper': the papers' iteration, whose rate the theory states ({spec.name}'s default steps='auto' "
            "stops by itself once solved; pass params={'steps': 'auto'} / -p steps=auto to study it)"
        )
    solver_obj = spec.cls(**sparams)  # bad parameters fail here, before any run
    if measure is None:  # the measure the theory speaks of for this solver, else the kind's default
        tab = [ms for (sv, ms, _) in THEORY if sv == spec.name and ms in BUILTIN_MEASURES.get(kind, ())]
        measure = tab[0] if tab else DEFAULT_MEASURE.get(kind, "fun")
        m_eq = m_eq_prob
        if m_eq and measure.startswith("penalty_"):  # it sees the inequalities only: measure what covers all
            notes.append(
                f"measure kkt, not {spec.name}'s default {measure}: the problem has {m_eq} equality constraint(s), "
                f"which {measure} (the penalty minimax of the inequality constraints) ignores"
            )
            measure = "kkt"
    mname = measure
    _check_measure(prob, mname, solver_obj)  # unknown measures fail here, before any run
    seed_list = tuple(range(int(seeds))) if isinstance(seeds, (int, np.integer)) else tuple(int(s) for s in seeds)
    if not seed_list:
        raise InvalidInputError("a rate study needs at least one seed")
    hs = tuple(sorted({int(h) for h in horizons})) if horizons else (int(budget),)
    if any(h < 1 for h in hs):
        raise InvalidInputError(f"budgets / horizons must be positive iteration counts, got {hs}")
    if not (isinstance(measure_every, int) and measure_every >= 1):
        raise InvalidInputError(f"measure_every must be an integer >= 1, got {measure_every!r}")
    if source.kind in ("object", "factory") and workers > 1 and executor == "process":
        _check_picklable(source.portable, source.label)
    code = fingerprint(load_reference(problem)) if source.kind == "reference" else ""
    cfg = StudyConfig(spec.name, source.label, pargs, sparams, mname, measure_every, max_calls, code)
    th: TheoryRate | None = None
    if curve is None:  # the curve the theory bounds for this solver and measure, else the running minimum
        base = mname if mname.endswith("_sq") else mname + "_sq"
        tabulated = [c for (sv, ms, c) in THEORY if sv == spec.name and ms in (mname, base)]
        curve = tabulated[0] if tabulated else "min"
    if curve not in ("min", "avg", "raw"):
        raise InvalidInputError(f"curve must be 'min', 'avg' or 'raw', got {curve!r}")
    th = theory_for(spec.name, mname, curve)
    if theory is not None:
        th = TheoryRate(float(theory), mname, curve, "given by the user")
    store = RunStore(db if db is not None else ":memory:")
    try:
        have = store.done(cfg.key)
        todo = [(s, h) for s in seed_list for h in hs if (s, h) not in have]
        reused = len(seed_list) * len(hs) - len(todo)
        logger("verify").info("rate study %s (%s on %s): %d run(s) to do, %d already in %s", cfg.key, spec.name,
                              source.label, len(todo), reused, db if db is not None else "memory")
        portable = None if source.kind == "registered" else source.portable
        executed = _execute(store, cfg, todo, workers, executor, scheduler, progress, progress_bar, portable)
        runs = tuple(store.load(cfg.key, s, h) for s in seed_list for h in hs)
    finally:
        store.close()
    runs = tuple(dataclasses.replace(r, reused=(r.seed, r.horizon) not in set(todo)) for r in runs)
    stops = _stops(runs)
    if stops:
        notes.append(stops)
    fits: dict[str, SlopeFit] = {}
    curves: dict[str, tuple[Array, Array]] = {}
    ends: dict[str, str] = {}
    for axis in ("iterations", "calls"):
        x, Y = _axis_curves(runs, curve, hs, axis)
        curves[axis] = (x, Y)
        floor_x = find_floor(x, _level_curves(runs, hs, axis, x))
        ends[axis] = _end_text(axis, x, floor_x, runs, hs)
        try:
            fits[axis] = fit_loglog(x, Y, decades=decades, n_boot=n_boot, level=level, axis=axis, x_max=floor_x)
        except InvalidInputError as exc:
            raise InvalidInputError(f"{exc} ({ends[axis]})") from None
        span = math.log10(fits[axis].x_hi / fits[axis].x_lo)
        if span < 1.0:
            notes.append(f"the fit against {axis} spans {span:.2g} decade(s) only: too short to tell a rate (run "
                         "longer, or pass horizons=[...] when the runs stop early)")
    verdicts = {a: compare(f, th.slope, tol) for a, f in fits.items()} if th is not None else {}
    report = RateReport(cfg, curve, seed_list, hs, runs, fits, th, verdicts, tol, executed, reused, curves,
                        fit_ends=ends, notes=tuple(notes))
    if out is not None:
        report = write_report(report, out)
    return report


def _stops(runs: Sequence[RunRecord]) -> str:
    """The runs that stopped before their horizon, in words (empty when none did)."""
    early = [r for r in runs if r.nit < r.horizon]
    if not early:
        return ""
    its = sorted(r.nit for r in early)
    statuses = sorted({r.status for r in early})
    where = f"iteration {its[0]}" if its[0] == its[-1] else f"iterations {its[0]}..{its[-1]}"
    return (f"{len(early)} of {len(runs)} run(s) stopped before their horizon ({', '.join(statuses)}) at {where}; "
            "the curves end where the first of them stopped")


def _end_text(axis: str, x: Array, floor_x: float | None, runs: Sequence[RunRecord], horizons: Sequence[int]) -> str:
    """Where the fitted range on ``axis`` ends, and why."""
    unit = "iteration" if axis == "iterations" else "oracle call"
    end = float(np.max(x)) if np.size(x) else math.nan
    if floor_x is not None:
        return (f"the measure reaches a floor at {unit} {floor_x:.4g} (its level stays flat from there to {end:.4g}); "
                "the fit ends there")
    if any(r.nit < r.horizon for r in runs):
        return f"the curves end at {unit} {end:.4g}, where the first run stopped (horizon {max(horizons)} iterations)"
    return f"the curves end at {unit} {end:.4g}, the end of the runs"


def _check_picklable(obj: Any, label: str) -> None:
    try:
        pickle.dumps(obj)
    except Exception as exc:
        raise InvalidInputError(
            f"the problem {label!r} cannot be sent to worker processes ({type(exc).__name__}: {exc}); run the "
            "study with workers=1, or pass a module-level factory or a 'module:attr' reference instead"
        ) from None


# --------------------------------------------------------------------------- report files
def _plot(report: RateReport, axis: str, path: Path) -> None:
    matplotlib = require("matplotlib", feature="the rate study's figures")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x, Y = report.curves[axis]
    fit = report.fits[axis]
    with np.errstate(divide="ignore", invalid="ignore"):
        med = np.median(Y, axis=0)
        q1, q3 = np.quantile(Y, [0.25, 0.75], axis=0)
    fig, ax = plt.subplots(figsize=(6.0, 4.2))
    ok = (x > 0) & (med > 0)
    ax.fill_between(x[ok], q1[ok], q3[ok], alpha=0.3, label="interquartile band across seeds")
    ax.plot(x[ok], med[ok], lw=1.5, label=f"median of {Y.shape[0]} seeds")
    xf = np.geomspace(fit.x_lo, fit.x_hi, 50)
    ax.plot(xf, np.exp(fit.intercept) * xf**fit.slope, "k--", lw=1.2,
            label=f"fit: slope {fit.slope:.3f} [{fit.lo:.3f}, {fit.hi:.3f}]")
    if report.theory is not None:
        y0 = np.exp(fit.intercept) * fit.x_lo**fit.slope
        ax.plot(xf, y0 * (xf / fit.x_lo) ** report.theory.slope, "r:", lw=1.5,
                label=f"proven slope {report.theory.slope:g}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("iterations" if axis == "iterations" else "oracle calls")
    ax.set_ylabel(f"{report.curve} {report.config.measure}")
    ax.set_title(f"{report.config.solver} on {report.config.problem}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(report: RateReport, out: str | os.PathLike[str]) -> RateReport:
    """Write ``rate_report.md``, ``rate_report.json`` and one PNG per axis into ``out``."""
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    files: list[str] = []
    for axis in report.fits:
        p = d / f"rate_{axis}.png"
        _plot(report, axis, p)
        files.append(str(p))
    md, js = d / "rate_report.md", d / "rate_report.json"
    files += [str(md), str(js)]
    report = dataclasses.replace(report, files=tuple(files))
    md.write_text(report.to_markdown(), encoding="utf-8")
    js.write_text(json.dumps(report.to_dict(), indent=2), encoding="utf-8")
    return report
