"""The ``zoframe rate`` and ``zoframe verify`` commands (contributed through ``zoframe_commands``)."""

from __future__ import annotations

import argparse
import json
import sys

from zoframe.cli import problem_arguments
from zoframe.errors import InvalidInputError
from zoframe.registry import default_registry
from zoframe_verify.study import rate_study
from zoframe_verify.verify import add_verify_arguments, parse_key_values, run_verify_command

__all__ = ["add_rate_arguments", "add_verify_arguments", "run_rate_command", "run_verify_command"]


def add_rate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("solver", help="registered solver (zoframe list)")
    p.add_argument("problem", help="registered problem (zoframe list), or module:attr / path/to/file.py:attr naming a "
                                    "factory or a problem object of your own")
    p.add_argument("--seeds", type=int, default=5, help="number of seeds 0..N-1 (default 5)")
    p.add_argument("--budget", type=int, default=1000, help="iterations per run (one long trajectory per seed)")
    p.add_argument("--horizons", default=None,
                   help="comma-separated iteration horizons: one run per seed and horizon instead of one trajectory")
    p.add_argument("--max-calls", type=int, default=None, help="oracle-call budget per run")
    p.add_argument("--measure", default=None,
                   help="grad_norm(_sq), grad_g_norm(_sq), kkt, eps1..3, dist2, fun_gap, dist_to_solution or a "
                        "column of the problem's measures (default per problem kind)")
    p.add_argument("--curve", choices=("min", "avg", "raw"), default=None,
                   help="running min or running average of the measure (default: what the theory bounds)")
    p.add_argument("--measure-every", type=int, default=1, help="measure every K iterations (default 1)")
    p.add_argument("--problem-arg", action="append", metavar="KEY=VALUE", help="problem parameter")
    p.add_argument("--param", "-p", action="append", metavar="KEY=VALUE", help="solver parameter")
    p.add_argument("--workers", type=int, default=1, help="parallel worker processes (default 1: in-process)")
    p.add_argument("--executor", choices=("process", "dask"), default="process")
    p.add_argument("--scheduler", default=None, help="address of a running dask scheduler (with --executor dask)")
    p.add_argument("--db", default=None,
                   help="SQLite file of finished runs (resumable; default: zoframe-out/rate_runs.sqlite)")
    p.add_argument("--out", default=None,
                   help="directory of the report (Markdown, JSON, PNG; default: zoframe-out/rate_report)")
    p.add_argument("--decades", type=float, default=2.0, help="fit over the last D decades of the axis")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples over seeds")
    p.add_argument("--theory", type=float, default=None, help="proven slope to compare with (overrides the table)")
    p.add_argument("--tol", type=float, default=0.1, help="slope tolerance of the verdict")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar (iterations of all runs, ETA)")


def run_rate_command(args: argparse.Namespace) -> int:
    """Run the study with a progress bar on stderr, print the report and the paths of the files written."""
    from zoframe._paths import output_path

    db = output_path("rate_runs.sqlite") if args.db is None else output_path(args.db, explicit=True)
    out = output_path("rate_report/rate_report.md").parent if args.out is None else args.out
    horizons = None
    if args.horizons:
        try:
            horizons = [int(float(h)) for h in str(args.horizons).split(",") if h.strip()]
        except ValueError:
            raise InvalidInputError(f"--horizons must be comma-separated integers, got {args.horizons!r}") from None
    report = rate_study(
        args.solver,
        args.problem,
        seeds=args.seeds,
        budget=args.budget,
        horizons=horizons,
        measure=args.measure,
        curve=args.curve,
        problem_args=problem_arguments(default_registry(), args.problem, args.problem_arg),
        params=parse_key_values(args.param),
        measure_every=args.measure_every,
        max_calls=args.max_calls,
        workers=args.workers,
        executor=args.executor,
        scheduler=args.scheduler,
        db=db,
        out=out,
        decades=args.decades,
        n_boot=args.bootstrap,
        theory=args.theory,
        tol=args.tol,
        progress_bar=not args.no_progress,
    )
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.summary())
    for f in (str(db), *report.files):
        print(f"wrote {f}", file=sys.stderr if args.json else sys.stdout)
    return 0
