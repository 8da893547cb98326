"""``zoframe bench SUITE --solvers a,b --seeds N --budget B [--workers K | --dask ADDRESS]
[--noise LEVEL --noise-kind relative --digits K --nan-fraction F --transform-seed S]``."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from zoframe._output import logger
from zoframe.errors import InvalidInputError

__all__ = ["add_bench_arguments", "run_bench_command"]


def add_bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("suite", help="a registered suite (smoke, papers, random-qp, bbob, ...), or problems of your own as "
                                  "module:attr or path/to/file.py:attr (a problem, a factory, or a list / dict of them)")
    p.add_argument("--solvers", default="", help="comma-separated solver names, e.g. zo-sgd,cobyla,nelder-mead "
                                                 "(default: the default solver of each problem kind of the suite)")
    p.add_argument("--seeds", type=int, default=1, help="seeds 0..N-1 per (instance, solver) (1)")
    p.add_argument("--budget", type=int, default=1000, help="max_calls per run, in --budget-unit (1000)")
    p.add_argument("--budget-unit", choices=("raw", "full", "full-per-dim"), default="raw",
                   help="raw component evaluations, full-evaluation equivalents (n + m raw each), or full evaluations "
                        "per variable (d (n + m) raw each: --budget 100 --budget-unit full-per-dim is a budget of 100 d) (raw)")
    p.add_argument("--suite-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="argument of the suite, repeatable (e.g. --suite-arg dim=20); values are JSON or text")
    p.add_argument("--param", action="append", default=[], metavar="SOLVER.KEY=VALUE",
                   help="hyper-parameter of one solver, repeatable (e.g. --param zo-sgd.eta=0.05)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--workers", type=int, default=None, help="run on a process pool of K workers")
    group.add_argument("--dask", default=None, metavar="ADDRESS", help="run on the dask scheduler at ADDRESS")
    p.add_argument("--out", default=None, help="output directory (default zoframe-out/bench-SUITE)")
    p.add_argument("--store", default=None, help="SQLite file of finished runs (default OUT/bench.sqlite)")
    p.add_argument("--feasibility-tol", type=float, default=1e-3,
                   help="violation allowed at a solved point, a finite number >= 0 (1e-3)")
    p.add_argument("--time-limit", type=float, default=600.0, metavar="SECONDS",
                   help="seconds one run may take; past it the run is stopped and stored as TIMEOUT (600; 0: none)")
    p.add_argument("--repair", action="store_true",
                   help="first keep the sound runs of a damaged store (the damaged file is moved aside, not deleted)")
    imperfect = p.add_argument_group(
        "imperfect values", "run every problem of the suite on transformed values (zoframe.imperfect); the solved test "
        "uses the clean problems' values and f*, and each run's key records the transform (clean and transformed runs "
        "never mix in a store)")
    imperfect.add_argument("--noise", type=float, default=None, metavar="LEVEL",
                           help="Gaussian noise of standard deviation LEVEL on every function value")
    imperfect.add_argument("--noise-kind", choices=("absolute", "relative"), default="absolute",
                           help="f + LEVEL z (absolute) or f (1 + LEVEL z) (relative) (absolute)")
    imperfect.add_argument("--digits", type=int, default=None, metavar="K",
                           help="round every value to K significant digits (1..15), after the noise")
    imperfect.add_argument("--nan-fraction", type=float, default=None, metavar="F",
                           help="NaN at a fraction F of the points (the solvers see +inf)")
    imperfect.add_argument("--transform-seed", type=int, default=0, metavar="S",
                           help="seed of the noise and of the NaN points (0)")
    p.add_argument("--no-plots", action="store_true", help="write the JSON and Markdown only")
    p.add_argument("--no-verify", action="store_true", help="skip the verification measures of each final point")
    p.add_argument("--list", action="store_true", help="list the suite's instances (one JSON line each) and exit")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar, and warnings only on stderr")


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _pairs(items: list[str], what: str) -> dict[str, Any]:
    out = {}
    for item in items:
        key, sep, val = item.partition("=")
        if not sep or not key:
            raise InvalidInputError(f"{what} must look like KEY=VALUE, got {item!r}")
        out[key.strip()] = _value(val.strip())
    return out


def _repair(args: argparse.Namespace) -> None:
    from pathlib import Path

    from zoframe._paths import output_path
    from zoframe_bench.runner import transform_spec, transform_tag
    from zoframe_bench.store import repair

    tag = transform_tag(transform_spec(args.noise, args.noise_kind, args.digits, args.nan_fraction, args.transform_seed))
    outdir = Path(args.out) if args.out is not None else output_path(f"bench-{args.suite}{'-' + tag if tag else ''}/x").parent
    path = Path(args.store) if args.store is not None else outdir / "bench.sqlite"
    rep = repair(path)
    if rep.moved_to is None:
        print(f"store {path}: sound ({rep.kept} runs), nothing to repair", file=sys.stderr)
    else:
        lost = "no run could be read" if rep.dropped is None else f"dropped {rep.dropped} (run again now)"
        print(f"store {path}: kept {rep.kept} runs, {lost}; the damaged file is kept as {rep.moved_to}",
              file=sys.stderr)


def run_bench_command(args: argparse.Namespace) -> int:
    from zoframe.registry import default_registry
    from zoframe_bench.profiles import failure_lines
    from zoframe_bench.runner import run
    from zoframe_bench.suites import describe

    if args.quiet:  # no progress bar, and warnings only
        log = logger()
        log.setLevel(max(log.getEffectiveLevel(), logging.WARNING))
    suite_args = _pairs(args.suite_arg, "--suite-arg")
    if args.list:
        from zoframe_bench.runner import _instances

        print(describe(_instances(args.suite, suite_args, default_registry())))
        return 0
    solvers: list[str] | None = [s.strip() for s in args.solvers.split(",") if s.strip()]
    chosen: dict[str, str] = {}
    if not solvers:  # the default solver of each problem kind, said before the runs
        from zoframe_bench.runner import default_solvers

        chosen = default_solvers(args.suite, suite_args, default_registry())
        print("no --solvers: running the default solver of each problem kind ("
              + ", ".join(f"{k}: {v}" for k, v in chosen.items()) + "); pass --solvers to choose", file=sys.stderr)
        solvers = None
    named = solvers if solvers is not None else sorted(set(chosen.values()))
    params: dict[str, dict[str, Any]] = {}
    for key, val in _pairs(args.param, "--param").items():
        solver, dot, name = key.rpartition(".")
        if not dot or solver not in named:
            raise InvalidInputError(f"--param {key}=...: name a solver of the bench ({', '.join(named)}), "
                                    f"e.g. {named[0]}.eta=0.05")
        params.setdefault(solver, {})[name] = val
    if args.time_limit < 0 or args.time_limit != args.time_limit:
        raise InvalidInputError(f"--time-limit must be a number of seconds >= 0 (0: no limit), got {args.time_limit}")
    if args.repair:
        _repair(args)
    try:
        out = run(args.suite, solvers, seeds=args.seeds, budget=args.budget, budget_unit=args.budget_unit,
                  suite_args=suite_args, params=params, store=args.store, out=args.out, workers=args.workers,
                  dask=args.dask, progress=not args.quiet, feasibility_tol=args.feasibility_tol,
                  verify=not args.no_verify, plots=not args.no_plots, time_limit=args.time_limit or None,
                  noise=args.noise, noise_kind=args.noise_kind, digits=args.digits, nan_fraction=args.nan_fraction,
                  transform_seed=args.transform_seed)
    except KeyboardInterrupt:  # run() said what is stored and how to resume
        return 130
    print(f"{len(out.tasks)} runs ({out.ran} run now, {out.reused} already in {out.store})", file=sys.stderr)
    for line in failure_lines(out.summary):
        print(f"zoframe: {line}", file=sys.stderr)
    for f in out.files:
        if f.endswith("summary.md"):
            with open(f, encoding="utf-8") as fh:
                print(fh.read())
    for f in out.files:
        print(f"wrote {f}")
    return 0
