"""Per-iteration time and memory of ``dszog`` and ``adszog`` as the number of constraints m grows to 10^8.

Pairwise constraints on the synthetic ``gen`` set (d = 50): about ``4 sqrt(m)`` samples give a
training split of about ``sqrt(m)`` positives x ``sqrt(m)`` negatives (the smallest sample with at
least m pairs is used), i.e. m = 10^3 .. 10^8 constraints (10^8 pairs from 40,100 samples, never
materialised: a batch of pair indices is decoded arithmetically), while every per-iteration batch
(q = 10, |M1| = |M2| = |M3| = 128) stays the same. ``dszog`` and ``adszog`` store p in the sparse
floor + support form from m = 10,000 (``p_form="auto"``).

Each m runs in a fresh process (so its peak memory is its own) and, to compare like with like on a
busy machine, times the m = 10^4 problem in the same process, interleaved repeat by repeat:
``<solver>_vs_1e4_<m>`` is the median over repeats of (time per iteration at m) / (time per
iteration at 10^4) measured back to back (the target: <= 1.5). Per m:

* ``dszog_us_per_it_<m>``, ``adszog_us_per_it_<m>``: median time per iteration (``solver.step`` in a
  bare loop after ``init``, as ``benchmarks/iteration_anatomy.py``); ``<solver>_user_us_per_it_<m>``:
  the part of it inside the problem's ``components`` and ``constraints`` (timed around them);
  ``<solver>_solver_vs_1e4_<m>``: the same ratio as ``<solver>_vs_1e4_<m>`` for the time outside
  the problem's functions (the user's functions read rows of a larger data set at large m: their
  cache misses are theirs);
* ``<solver>_peak_rss_mb_<m>``: the peak resident memory (``resource.getrusage``) of a fresh process
  that builds the problem, runs the solver's ``init`` and ``--iters`` steps (no outputs): one run's
  footprint, target 2 GB at 10^8; ``init_traced_mb_<m>`` / ``steps_traced_mb_<m>``: the
  peak of numpy + Python allocations (tracemalloc) of ``solver.init`` (the closed-form ``p*(w_1)``
  over all m constraints) and of 100 steps after it, for ``adszog``;
* ``full_pass_evals_per_s_<m>`` / ``full_pass_2threads_evals_per_s_<m>``: a full feasibility pass
  over all m constraints (:func:`zoframe.measures.max_violation_full`, blocks of 2^20) serially and
  on a two-thread pool, constraint evaluations per second (median of 3; target 5e7 at 10^8 on 2 cores).

Prints one final JSON line.

    python benchmarks/scaling_m.py [--iters 1000] [--repeats 5] [--ms 1e3,1e4,1e5,1e6,1e7,1e8]
"""

from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor
import dataclasses
import json
import math
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from zoframe.measures import max_violation_full
from zoframe.oracle import CountingOracle
from zoframe_constrained.problems import PairwiseProblem, pairwise
from zoframe_constrained.solvers import ADSZOG, DSZOG

PARAMS: dict[str, Any] = {"eta_w": 1e-3, "eta_p": 1e-2, "beta": 1.0, "q": 10, "M1": 128, "M2": 128, "M3": 128}
EXTRA: dict[str, dict[str, Any]] = {"dszog": {}, "adszog": {"a": 0.9, "b": 0.9}}
SOLVERS: dict[str, type[Any]] = {"dszog": DSZOG, "adszog": ADSZOG}
if "steps" in {f.name for f in dataclasses.fields(DSZOG)}:
    PARAMS["steps"] = "paper"  # the papers' iteration with the fixed steps above (not the backtracking mode)


def key(m: int) -> str:
    return f"{m:.0e}".replace("+0", "").replace("+", "")


def problem_with(m_target: int) -> PairwiseProblem:
    """The ``gen`` pairwise problem of the smallest sample (from ``4 sqrt(m)`` up) with at least m pairs."""
    n = round(4 * math.sqrt(m_target))
    while True:
        prob = pairwise("gen", n_samples=n, seed=0)
        if prob.m >= m_target:
            return prob
        n += max(1, n // 1000)


def per_iteration(prob: Any, solver: str, iters: int, seed: int) -> tuple[float, float]:
    """Seconds per ``solver.step`` (bare loop after ``init``) and seconds in the problem's functions per step."""
    params = {**PARAMS, "M1": min(PARAMS["M1"], prob.n), **EXTRA[solver]}  # m = 10^3 has few training samples
    user = [0.0]
    clock = time.perf_counter

    def timed(fn: Any) -> Any:
        def call(X: Any, idx: Any) -> Any:
            t0 = clock()
            try:
                return fn(X, idx)
            finally:
                user[0] += clock() - t0

        return call

    timed_prob = dataclasses.replace(prob)  # a copy whose callables are timed; prob stays as it is
    for attr in ("components", "constraints"):
        object.__setattr__(timed_prob, attr, timed(getattr(prob, attr)))
    solver_obj = SOLVERS[solver](**params)
    oracle = CountingOracle(timed_prob)
    rng = np.random.default_rng(seed)
    state = solver_obj.init(oracle, np.asarray(prob.x0), rng)
    user[0] = 0.0
    t0 = clock()
    for _ in range(iters):
        state = solver_obj.step(oracle, state, rng)
    return (clock() - t0) / iters, user[0] / iters


def traced(prob: Any, steps: int) -> tuple[float, float]:
    """tracemalloc peaks (MiB) of ``adszog``'s init and of ``steps`` steps after it."""
    solver = ADSZOG(**{**PARAMS, "M1": min(PARAMS["M1"], prob.n)}, **EXTRA["adszog"])
    oracle = CountingOracle(prob)
    rng = np.random.default_rng(0)
    tracemalloc.start()
    try:
        state = solver.init(oracle, np.asarray(prob.x0), rng)
        init_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(steps):
            state = solver.step(oracle, state, rng)
        step_peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return init_peak / 2**20, step_peak / 2**20


def one(m_target: int, iters: int, repeats: int) -> dict[str, Any]:
    """All figures of one m (run in its own process)."""
    prob = problem_with(m_target)
    ref = problem_with(10_000)
    k = key(m_target)
    out: dict[str, Any] = {f"m_{k}": prob.m, f"n_train_{k}": prob.n}
    with threadpool_limits(limits=1, user_api="blas"):
        for name in ("dszog", "adszog"):
            times, users, ratios, rest_ratios = [], [], [], []
            for rep in range(repeats):
                t_ref, u_ref = per_iteration(ref, name, iters, rep)
                t, u = per_iteration(prob, name, iters, rep)
                times.append(t)
                users.append(u)
                ratios.append(t / t_ref)
                rest_ratios.append((t - u) / (t_ref - u_ref))
            out[f"{name}_us_per_it_{k}"] = round(statistics.median(times) * 1e6, 1)
            out[f"{name}_user_us_per_it_{k}"] = round(statistics.median(users) * 1e6, 1)
            out[f"{name}_vs_1e4_{k}"] = round(statistics.median(ratios), 3)
            out[f"{name}_solver_vs_1e4_{k}"] = round(statistics.median(rest_ratios), 3)
        w = 0.01 * np.random.default_rng(0).standard_normal(prob.dim)
        serial = [max_violation_full(prob, w).evaluations_per_second for _ in range(3)]
        with ThreadPoolExecutor(2) as ex:
            pooled = [max_violation_full(prob, w, executor=ex).evaluations_per_second for _ in range(3)]
        out[f"full_pass_evals_per_s_{k}"] = round(statistics.median(serial), -4)
        out[f"full_pass_2threads_evals_per_s_{k}"] = round(statistics.median(pooled), -4)
        init_mb, steps_mb = traced(prob, 100)
        out[f"init_traced_mb_{k}"] = round(init_mb, 1)
        out[f"steps_traced_mb_{k}"] = round(steps_mb, 2)
    return out


def footprint(m_target: int, solver: str, iters: int) -> dict[str, Any]:
    """Peak RSS (MB) of one run: build, init, ``iters`` steps (run in a fresh process)."""
    prob = problem_with(m_target)
    with threadpool_limits(limits=1, user_api="blas"):
        per_iteration(prob, solver, iters, 0)
    return {f"{solver}_peak_rss_mb_{key(m_target)}": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def child(args: list[str]) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed")
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--ms", type=str, default="1e3,1e4,1e5,1e6,1e7,1e8")
    ap.add_argument("--one", type=float, default=None, help=argparse.SUPPRESS)  # a child process: one m
    ap.add_argument("--footprint", default=None, help=argparse.SUPPRESS)  # a child process: one run's memory
    args = ap.parse_args(argv)
    if args.one is not None:
        res = footprint(int(args.one), args.footprint, args.iters) if args.footprint else one(int(args.one), args.iters, args.repeats)
        print(json.dumps(res))
        return res
    out: dict[str, Any] = {"iters": args.iters, "repeats": args.repeats, "d": 50, "numpy": np.__version__}
    for m_target in (int(float(s)) for s in args.ms.split(",")):
        common = ["--one", str(m_target), "--iters", str(args.iters), "--repeats", str(args.repeats)]
        try:
            res = child(common)
            for name in ("dszog", "adszog"):
                res.update(child([*common, "--footprint", name]))
        except RuntimeError as exc:
            out[f"error_{key(m_target)}"] = str(exc)
            print(f"m={m_target}: failed: {exc}", flush=True)
            continue
        out.update(res)
        k = key(m_target)
        print(
            f"m={res[f'm_{k}']}: dszog {res[f'dszog_us_per_it_{k}']} us/it (x{res[f'dszog_vs_1e4_{k}']} of 1e4, "
            f"outside the user's functions x{res[f'dszog_solver_vs_1e4_{k}']}), adszog {res[f'adszog_us_per_it_{k}']} "
            f"us/it (x{res[f'adszog_vs_1e4_{k}']}, x{res[f'adszog_solver_vs_1e4_{k}']}), peak RSS of one run "
            f"{res[f'dszog_peak_rss_mb_{k}']} / {res[f'adszog_peak_rss_mb_{k}']} MB (init {res[f'init_traced_mb_{k}']} MB, 100 steps "
            f"{res[f'steps_traced_mb_{k}']} MB traced), full pass {res[f'full_pass_evals_per_s_{k}']:.3g}/s "
            f"(2 threads {res[f'full_pass_2threads_evals_per_s_{k}']:.3g}/s)",
            flush=True,
        )
    for name in ("dszog", "adszog"):
        if f"{name}_us_per_it_1e4" in out and f"{name}_us_per_it_1e6" in out:
            out[f"{name}_growth_1e4_to_1e6"] = round(out[f"{name}_us_per_it_1e6"] / out[f"{name}_us_per_it_1e4"], 3)
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
