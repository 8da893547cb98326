"""Peak memory and time of the verification and trace measures on a problem with huge ``m``.

``python -m zoframe_verify.huge_m [--n-samples 40100] [--repeats 3]`` builds the pairwise problem on
the synthetic ``gen`` set (``n_samples=40100``: 10,068 x 9,982 = 100,498,776 pair constraints, never
materialised) and measures, each in a fresh process (``resource.getrusage``: peak resident set size
of that process), interleaved over ``--repeats`` rounds, and prints the medians:

* ``verify``: :func:`zoframe_verify.verify` at a point (the KKT report, blocked full pass);
* ``kkt``, ``penalty``: :func:`~zoframe_verify.checks.kkt_report`, :func:`~zoframe_verify.checks.penalty_report`;
* ``measures``: :func:`zoframe.problems.constrained_measures` (a trace record) through an oracle's monitor;
* ``pass-serial``, ``pass-threads2``: one :func:`zoframe.measures.max_violation_full` pass, serially
  and on ``ThreadPoolExecutor(2)`` (constraint evaluations per second);
* with ``--unblocked``, ``kkt-unblocked`` and ``measures-unblocked``: the same with a block larger
  than ``m`` (all ``m`` values at once: the code path of problems up to one block).

The point is ``2 (mu_+ - mu_-) / ||mu_+ - mu_-||`` (class means of the training split): about 6% of the
pairs are violated. ``--one NAME`` runs one measurement in this process and prints it as JSON.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

import numpy as np

NAMES = ("verify", "kkt", "penalty", "measures", "pass-serial", "pass-threads2")
UNBLOCKED = ("kkt-unblocked", "measures-unblocked")


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # kilobytes on Linux


def one(name: str, n_samples: int, block: int | None) -> dict[str, Any]:
    """One measurement in this process: seconds, peak RSS before and after, and what it found."""
    from zoframe.measures import FULL_PASS_BLOCK, max_violation_full
    from zoframe.oracle import CountingOracle
    from zoframe.problems import constrained_measures
    from zoframe_constrained.problems import pairwise
    from zoframe_verify import verify
    from zoframe_verify.checks import kkt_report, penalty_report

    problem = pairwise("gen", n_samples=n_samples, seed=0)
    d = problem.X_pos.mean(axis=0) - problem.X_neg.mean(axis=0)
    w = 2.0 * d / np.linalg.norm(d)
    blk = FULL_PASS_BLOCK if block is None else block
    if name.endswith("-unblocked"):
        blk = problem.m + 1
    before = _rss_mb()
    t0 = time.perf_counter()
    found: dict[str, float] = {}
    if name == "verify":
        rep = verify(problem, w, reference=False)
        found = {"eps1": rep.measures["eps1"], "eps2": rep.measures["eps2"], "max_violation": rep.measures["max_violation"]}
    elif name.startswith("kkt"):
        k = kkt_report(problem, w, block=blk)
        found = {"eps1": k.eps1, "eps2": k.eps2, "eps3": k.eps3, "n_active": k.n_active}
    elif name == "penalty":
        p = penalty_report(problem, w, beta=10.0, lam=0.1, block=blk)
        found = {"grad_g_norm": p.grad_g_norm, "g": p.g, "n_support": p.n_support}
    elif name.startswith("measures"):
        oracle = CountingOracle(problem)
        found = constrained_measures(w, oracle.monitor, 0.0, block=blk)
    elif name == "pass-serial":
        res = max_violation_full(problem, w, block=blk)
        found = {"evaluations_per_second": res.evaluations_per_second, "violated": res.violated}
    elif name == "pass-threads2":
        with ThreadPoolExecutor(2) as ex:
            res = max_violation_full(problem, w, block=blk, executor=ex)
        found = {"evaluations_per_second": res.evaluations_per_second, "violated": res.violated}
    else:
        raise SystemExit(f"unknown measurement {name!r}")
    seconds = time.perf_counter() - t0
    return {"name": name, "m": problem.m, "seconds": seconds, "rss_before_mb": before, "peak_rss_mb": _rss_mb(), **found}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m zoframe_verify.huge_m", description=__doc__.split("\n")[0])
    ap.add_argument("--n-samples", type=int, default=40100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--block", type=int, default=None, help="constraints per block (default 2^20)")
    ap.add_argument("--only", default=None, help="comma-separated measurements (default: all)")
    ap.add_argument("--unblocked", action="store_true", help="also the unblocked code path (needs ~30 bytes x m of RAM)")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one, args.n_samples, args.block)))
        return 0
    names = args.only.split(",") if args.only else [*NAMES, *(UNBLOCKED if args.unblocked else ())]
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for r in range(args.repeats):
        for name in names:  # interleaved: each round runs every measurement once
            cmd = [sys.executable, "-m", "zoframe_verify.huge_m", "--one", name, "--n-samples", str(args.n_samples)]
            if args.block is not None:
                cmd += ["--block", str(args.block)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=os.environ.copy())
            runs[name].append(json.loads(out.stdout))
            print(f"round {r + 1}: {runs[name][-1]}", file=sys.stderr, flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cpus")
    for name, rows in runs.items():
        med = {k: statistics.median(float(row[k]) for row in rows) for k in ("seconds", "rss_before_mb", "peak_rss_mb")}
        extra = {k: v for k, v in rows[0].items() if k not in ("name", "seconds", "rss_before_mb", "peak_rss_mb")}
        if "evaluations_per_second" in rows[0]:
            extra["evaluations_per_second"] = statistics.median(float(row["evaluations_per_second"]) for row in rows)
        print(
            f"{name:20s} median of {len(rows)}: {med['seconds']:.2f} s, peak RSS {med['peak_rss_mb']:.0f} MB "
            f"(after building the problem {med['rss_before_mb']:.0f} MB); {extra}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
