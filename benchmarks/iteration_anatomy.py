"""Anatomy of one DSZOG / ADSZOG iteration: how much of it is the user's functions, and where the rest goes.

Problems: pairwise breast-cancer (scikit-learn's bundled set, d = 31, m ~ 19k) and pairwise a9a
(1000 samples, d = 123, m ~ 46k; needs the a9a file in ZOFRAME_DATA), seed 0, as in
``benchmarks/peers.py``. Solvers ``dszog`` and ``adszog`` with fixed hyper-parameters (q = 10,
|M1| = |M2| = |M3| = 128, ``p_form="auto"``: the sparse floor + support form of p; ``steps="paper"``:
the papers' iteration with these fixed steps, where the solvers have that option).

For each (problem, solver) and each implementation of the step's own work (``--kernels``: ``numpy``, the
reference, and ``numba``, the compiled kernel of ``zoframe[fast]``: the work on p and G_L's arithmetic,
left out with a note when numba is not installed; see docs/performance.md), single-threaded BLAS, ``--repeats`` repetitions, the
implementations' bare loops interleaved repetition by repetition (median reported):

* ``us_per_it``: wall time per step of ``solver.step`` in a bare loop (``init`` excluded);
* ``user_us_per_it``: the time spent inside the problem's ``components`` and ``constraints`` in
  those steps, measured by perf_counter accumulators wrapped around the two callables (not
  estimated);
* ``ratio``: ``us_per_it / user_us_per_it`` (the target: <= 2);
* ``minimize_us_per_it``: the same steps through ``zoframe.minimize`` (driver included, no trace
  records but the first and last), measured in the same repetition;
* ``parts``: a breakdown of the step, in microseconds per iteration, from a separate run with
  every solver part wrapped by an exclusive (nested) timer: ``user`` (the problem's functions),
  ``oracle`` (the counting oracle around them: input copies, index checks, result checks,
  counting), ``sample_M1_M3`` (uniform batches), ``sample_M2`` (draws from p), ``estimate``
  (G_L without its oracle calls: directions, points, differences), ``H`` (without its oracle
  call), ``p_update`` (projection, averaging, moving averages, flush and state of p),
  ``checks`` (the solver's finiteness and divergence checks), ``rest`` (the w update, the new
  state). The wrappers cost about 0.3 us each, so ``parts_total_us`` is a little above ``us_per_it``.
* ``top_tottime``: the ten functions with the largest own time under cProfile (one run; cProfile's
  per-call cost inflates small calls, so use it to rank, not to measure);
* ``--defaults``: the solvers' default parameters (``steps="auto"``, its own batch sizes) instead;
* ``speedup_numba``: the median over repetitions of the paired ratio numpy step time / numba step time.

The figures of each implementation are under its name (``entry[solver]["numpy"]``, ``["numba"]``);
the JSON also names the numpy, scipy and numba versions.

Prints one final line of JSON.

    python benchmarks/iteration_anatomy.py [--iters 1000] [--repeats 5] [--problems breast-cancer,a9a]
                                           [--kernels numpy,numba] [--defaults]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
import contextlib
import cProfile
import dataclasses
import functools
import importlib.util
import json
import pstats
import statistics
import time
from typing import Any

import numpy as np
import scipy
from threadpoolctl import threadpool_limits

import zoframe
from zoframe import oracle as oracle_mod
from zoframe.errors import DataNotFoundError
from zoframe.oracle import CountingOracle
from zoframe_constrained import _kernels
from zoframe_constrained import penalty as penalty_mod
from zoframe_constrained import simplex as simplex_mod
from zoframe_constrained import solvers as solvers_mod
from zoframe_constrained.problems import PairwiseProblem, pairwise
from zoframe_constrained.solvers import ADSZOG, DSZOG

PARAMS: dict[str, Any] = {"eta_w": 1e-2, "eta_p": 1e-2, "beta": 1.0, "lam": 1e-6, "q": 10, "mu": 1e-3,
                          "M1": 128, "M2": 128, "M3": 128}  # fmt: skip
if "steps" in {f.name for f in dataclasses.fields(DSZOG)}:
    PARAMS["steps"] = "paper"  # the papers' iteration with the fixed steps above (not the backtracking mode)
EXTRA: dict[str, dict[str, Any]] = {"dszog": {}, "adszog": {"a": 0.9, "b": 0.9, "c": 1e-8}}
SOLVERS: dict[str, type[Any]] = {"dszog": DSZOG, "adszog": ADSZOG}
#: the implementation ZOFRAME_KERNEL selected at import, and the compiled kernel (None without numba)
DEFAULT = "numpy" if simplex_mod._K is None else "numba"
KERNEL: Any = (
    simplex_mod._K
    if simplex_mod._K is not None
    else (_kernels._Lazy() if importlib.util.find_spec("numba") is not None else None)
)
simplex_mod._AUTO = None  # the kernel from the first call (auto would wait AUTO_AFTER_CALLS calls before loading it)


class Timer:
    """Exclusive (nested) perf_counter accumulators: a part's time excludes the parts it calls."""

    def __init__(self) -> None:
        self.acc: dict[str, float] = {}
        self.stack: list[list[float]] = []  # [start, time of children]

    def reset(self) -> None:
        self.acc.clear()

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        acc, stack, clock = self.acc, self.stack, time.perf_counter

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            frame = [clock(), 0.0]
            stack.append(frame)
            try:
                return fn(*args, **kwargs)
            finally:
                total = clock() - frame[0]
                stack.pop()
                acc[name] = acc.get(name, 0.0) + total - frame[1]
                if stack:
                    stack[-1][1] += total

        return timed


@contextlib.contextmanager
def patched(targets: list[tuple[Any, str, str]], timer: Timer) -> Iterator[None]:
    """Wrap ``getattr(owner, attr)`` as the part ``name`` for each ``(owner, attr, name)``; undo after."""
    targets = [(owner, attr, name) for owner, attr, name in targets if attr in vars(owner)]  # this version's parts
    saved = [(owner, attr, vars(owner)[attr]) for owner, attr, _ in targets]
    try:
        for owner, attr, name in targets:
            setattr(owner, attr, timer.wrap(name, getattr(owner, attr)))
        yield
    finally:
        for owner, attr, orig in saved:
            setattr(owner, attr, orig)


def timed_problem(prob: PairwiseProblem, timer: Timer) -> PairwiseProblem:
    """The problem with its two callables wrapped by the ``user`` accumulator (instance attributes)."""
    for attr in ("components", "constraints"):
        object.__setattr__(prob, attr, timer.wrap("user", getattr(type(prob), attr).__get__(prob)))
    return prob


PARTS: list[tuple[Any, str, str]] = [
    (solvers_mod._PenaltyMinimax, "batches", "sample_M1_M3"),
    (DSZOG, "sample_p", "sample_M2"),
    (solvers_mod, "pz_sample", "sample_M2"),
    (solvers_mod._PenaltyMinimax, "G_L", "estimate"),
    (solvers_mod._PenaltyMinimax, "_estimate", "estimate"),
    (solvers_mod._PenaltyMinimax, "H", "H"),
    (solvers_mod._PenaltyMinimax, "_H", "H"),
    (DSZOG, "ascend", "p_update"),
    (solvers_mod, "pz_project", "p_update"),
    (solvers_mod, "pz_average", "p_update"),
    (solvers_mod, "pz_project_average", "p_update"),
    (solvers_mod, "pz_ema", "p_update"),
    (solvers_mod, "pz_flush", "p_update"),
    (ADSZOG, "_state", "p_update"),
    (solvers_mod, "_finite", "checks"),
    (solvers_mod, "_diverged", "checks"),
    # the same parts where the phased solvers keep them (the penalty phase, zoframe_constrained.penalty)
    (penalty_mod.PenaltyPhase, "batches", "sample_M1_M3"),
    (penalty_mod.DSZOGPenalty, "sample_p", "sample_M2"),
    (penalty_mod, "pz_sample", "sample_M2"),
    (penalty_mod.PenaltyPhase, "G_L", "estimate"),
    (penalty_mod.PenaltyPhase, "_estimate", "estimate"),
    (penalty_mod.PenaltyPhase, "H", "H"),
    (penalty_mod.PenaltyPhase, "_H", "H"),
    (penalty_mod.DSZOGPenalty, "ascend", "p_update"),
    (penalty_mod, "pz_project_average", "p_update"),
    (penalty_mod, "pz_ema", "p_update"),
    (penalty_mod, "pz_flush", "p_update"),
    (penalty_mod.ADSZOGPenalty, "_state", "p_update"),
    (penalty_mod, "_finite", "checks"),
    (penalty_mod, "_diverged", "checks"),
    (CountingOracle, "objective", "oracle"),
    (CountingOracle, "constraints", "oracle"),
    (CountingOracle, "_evaluate", "oracle"),
    (oracle_mod, "as_values", "oracle"),
]


def step_loop(
    solver: Any, oracle: CountingOracle, x0: np.ndarray, iters: int, seed: int, timer: Timer,
    profile: cProfile.Profile | None = None,
) -> float:
    """Seconds of ``iters`` steps (after ``init``); ``timer`` is reset (``profile`` enabled) after ``init``."""
    rng = np.random.default_rng(seed)
    state = solver.init(oracle, x0, rng)
    timer.reset()
    if profile is not None:
        profile.enable()
    t0 = time.perf_counter()
    for _ in range(iters):
        state = solver.step(oracle, state, rng)
    sec = time.perf_counter() - t0
    if profile is not None:
        profile.disable()
    return sec


def use_kernel(kernel: str) -> None:
    """Select the implementation of the step's own work: ``"numpy"`` (the reference) or ``"numba"``."""
    simplex_mod._K = None if kernel == "numpy" else KERNEL


def anatomy(prob: PairwiseProblem, name: str, iters: int, repeats: int, kernels: list[str]) -> dict[str, Any]:
    """The figures of one (problem, solver) for each implementation in ``kernels``; the bare-loop timings of
    the implementations interleaved repetition by repetition (``speedup``: the median paired ratio of the
    first implementation's step time to each other's)."""
    timer = Timer()
    prob = timed_problem(prob, timer)
    solver = SOLVERS[name](**PARAMS, **EXTRA[name])
    its: dict[str, list[float]] = {k: [] for k in kernels}
    users: dict[str, list[float]] = {k: [] for k in kernels}
    ratios: dict[str, list[float]] = {k: [] for k in kernels}
    drivers: dict[str, list[float]] = {k: [] for k in kernels}
    for kernel in kernels:  # warm-up: the compiled kernel loaded (or compiled) before any timing
        use_kernel(kernel)
        step_loop(solver, CountingOracle(prob), np.asarray(prob.x0), 5, 0, timer)
    for rep in range(repeats):
        for kernel in kernels:
            use_kernel(kernel)
            sec = step_loop(solver, CountingOracle(prob), np.asarray(prob.x0), iters, rep, timer)
            user = timer.acc.get("user", 0.0)
            its[kernel].append(sec / iters)
            users[kernel].append(user / iters)
            ratios[kernel].append(sec / user)
            res = zoframe.minimize(prob, name, rng=rep, max_iter=iters, record_every=iters, **PARAMS, **EXTRA[name])
            drivers[kernel].append(float(res.trace["seconds"][-1] - res.trace["seconds"][0]) / iters)
    out: dict[str, Any] = {}
    for kernel in kernels:
        use_kernel(kernel)
        parts_runs: list[dict[str, float]] = []
        step_root = [(SOLVERS[name], "step", "rest")]
        for rep in range(repeats):
            with patched(PARTS + step_root, timer):
                sec = step_loop(solver, CountingOracle(prob), np.asarray(prob.x0), iters, rep, timer)
            parts_runs.append({k: v / iters for k, v in timer.acc.items()} | {"_total": sec / iters})
        keys = sorted({k for run in parts_runs for k in run})
        parts = {k: round(statistics.median(run.get(k, 0.0) for run in parts_runs) * 1e6, 1) for k in keys}
        total = parts.pop("_total")
        prof = cProfile.Profile()
        step_loop(solver, CountingOracle(prob), np.asarray(prob.x0), iters, 0, timer, prof)
        stats = pstats.Stats(prof)
        rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:10]  # type: ignore[attr-defined]
        top = [[f"{fn[0].rsplit('/', 1)[-1]}:{fn[1]}:{fn[2]}", round(v[2] / iters * 1e6, 1)] for fn, v in rows]
        out[kernel] = {
            "us_per_it": round(statistics.median(its[kernel]) * 1e6, 1),
            "user_us_per_it": round(statistics.median(users[kernel]) * 1e6, 1),
            "ratio": round(statistics.median(ratios[kernel]), 2),
            "minimize_us_per_it": round(statistics.median(drivers[kernel]) * 1e6, 1),
            "parts": parts,
            "parts_total_us": total,
            "top_tottime": top,
        }
    base = kernels[0]
    for kernel in kernels[1:]:
        out[f"speedup_{kernel}"] = round(statistics.median(a / b for a, b in zip(its[base], its[kernel])), 3)
    use_kernel(DEFAULT)
    return out


def build(name: str) -> PairwiseProblem:
    if name == "breast-cancer":
        return pairwise("breast-cancer", seed=0)
    return pairwise(name, n_samples=1000, seed=0)


def numba_version() -> str | None:
    try:
        import numba
    except ImportError:
        return None
    return str(numba.__version__)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--problems", default="breast-cancer,a9a")
    ap.add_argument("--solvers", default="adszog,dszog")
    ap.add_argument("--defaults", action="store_true",
                    help="the solvers' default parameters (steps='auto', ...) instead of the fixed paper settings")
    ap.add_argument("--kernels", default="numpy,numba",
                    help="implementations of the simplex work to time: numpy (the reference), numba (the compiled "
                         "kernel; left out, with a note, when numba is not installed)")  # fmt: skip
    args = ap.parse_args(argv)
    if args.defaults:
        PARAMS.clear()
        for extra in EXTRA.values():
            extra.clear()
    kernels = [k.strip() for k in args.kernels.split(",") if k.strip()]
    if any(k not in ("numpy", "numba") for k in kernels) or not kernels:
        ap.error(f"--kernels takes numpy and/or numba, got {args.kernels!r}")
    out: dict[str, Any] = {"iters": args.iters, "repeats": args.repeats, "params": PARAMS,
                           "numpy": np.__version__, "scipy": scipy.__version__,
                           "numba": numba_version(), "kernels": kernels}  # fmt: skip
    if "numba" in kernels and KERNEL is None:
        kernels = [k for k in kernels if k != "numba"]
        out["kernels"] = kernels
        out["note"] = "numba is not installed: the numpy path only (pip install 'zoframe[fast]')"
        if not kernels:
            ap.error("--kernels numba needs numba: pip install 'zoframe[fast]'")
    for pname in [p.strip() for p in args.problems.split(",") if p.strip()]:
        try:
            base = build(pname)
        except DataNotFoundError as exc:
            out[pname] = {"error": str(exc).splitlines()[0]}
            continue
        entry: dict[str, Any] = {"d": base.dim, "n": base.n, "m": base.m}
        for sname in [s.strip() for s in args.solvers.split(",") if s.strip()]:
            with threadpool_limits(limits=1, user_api="blas"):
                entry[sname] = anatomy(build(pname), sname, args.iters, args.repeats, kernels)
            for kernel in kernels:
                e = entry[sname][kernel]
                print(f"{pname} {sname} [{kernel}]: {e['us_per_it']} us/it, user {e['user_us_per_it']} us/it, "
                      f"ratio {e['ratio']}, minimize {e['minimize_us_per_it']} us/it; parts {e['parts']}",
                      flush=True)  # fmt: skip
            for key in entry[sname]:
                if key.startswith("speedup_"):
                    print(f"{pname} {sname}: step time {kernels[0]} / {key[8:]} = {entry[sname][key]}", flush=True)
        out[pname] = entry
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
