"""Convergence-rate studies of every solver family against the rate its paper proves.

Runs ``zoframe_verify.rate_study`` for:

* ``zo-sgd`` on ``quadratic`` (d = 10): running average of ||grad f||^2, proven O(1/T);
* ``zo-sgd`` on ``power-sum`` (p = 4): running min of ||grad f||^2, exponent -3 derived in closed form
  for gradient descent on this degenerate problem (a last-iterate rate, not an averaged one);
* ``zo-gda`` and ``zo-gdmsa`` on ``ncsc``: running min of ||grad g||^2, proven O(1/T) (Theorems 1, 3);
* ``zo-svrg-admm`` and ``zo-saga-admm`` on ``fused-lasso-toy``: running average of dist(0, dL)^2,
  proven O(1/T) (Theorems 1, 2);
* ``dszog`` and ``adszog`` on ``kkt-qp``: running average of ||grad g||^2 of the penalty minimax,
  proven O(T^-1/2) (Theorem 5.14), with full data / constraint batches and fixed steps.

Each study persists its runs in ``--db`` (re-running resumes) and writes a Markdown/JSON/PNG report
under ``--out/NAME``. Prints ONE final line of JSON: per study the fitted slopes against iterations
and oracle calls, their bootstrap intervals, the proven slope and the verdict.

    python benchmarks/rate_studies.py [--seeds 5] [--budget 2000] [--workers 2] [--only zo-sgd,zo-gda]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from zoframe_verify import rate_study

ADMM = {"eta": 0.5, "rho": 1.0, "b": 4, "mu": 1e-4, "rank_check": "ignore", "steps": "paper"}
PENALTY = {"eta_w": 0.05, "eta_p": 0.05, "M1": 20, "M2": 50, "M3": 50, "beta": 1.0, "lam": 1.0}

STUDIES: dict[str, dict[str, Any]] = {
    "zo-sgd": {"problem": "quadratic", "params": {"eta": 0.05}, "problem_args": {"dim": 10}},
    "zo-sgd/power-sum": {"solver": "zo-sgd", "problem": "power-sum", "params": {"eta": 0.1}, "measure": "grad_norm_sq",
                         "curve": "min", "theory": -3.0, "decades": 1.0},
    "zo-gda": {"problem": "ncsc", "params": {"steps": "paper", "eta1": 0.05, "eta2": 0.5}},
    "zo-gdmsa": {"problem": "ncsc", "params": {"steps": "paper", "eta1": 0.1, "eta2": 0.5, "T": 3}},
    "zo-svrg-admm": {"problem": "fused-lasso-toy", "params": ADMM},
    "zo-saga-admm": {"problem": "fused-lasso-toy", "params": ADMM},
    "dszog": {"problem": "kkt-qp", "params": PENALTY},
    "adszog": {"problem": "kkt-qp", "params": {**PENALTY, "a": 0.9, "b": 0.5}},
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--budget", type=int, default=2000, help="iterations per run")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--db", default="benchmarks/out/rate_runs.sqlite")
    ap.add_argument("--out", default="benchmarks/out/rates")
    ap.add_argument("--only", default=None, help="comma-separated solver names")
    args = ap.parse_args()
    names = list(STUDIES) if not args.only else [s.strip() for s in args.only.split(",")]
    summary: dict[str, Any] = {}
    for name in names:
        cfg = STUDIES[name]
        t0 = time.perf_counter()
        rep = rate_study(
            cfg.get("solver", name),
            cfg["problem"],
            seeds=args.seeds,
            budget=args.budget,
            params=cfg["params"],
            problem_args=cfg.get("problem_args", {}),
            workers=args.workers,
            db=args.db,
            out=f"{args.out}/{name.replace('/', '-')}",
            measure=cfg.get("measure"),
            curve=cfg.get("curve"),
            theory=cfg.get("theory"),
            decades=cfg.get("decades", 2.0),
        )
        summary[name] = {
            "problem": cfg["problem"],
            "measure": rep.config.measure,
            "curve": rep.curve,
            "proven_slope": None if rep.theory is None else rep.theory.slope,
            "slope_iterations": round(rep.fits["iterations"].slope, 4),
            "interval_iterations": [round(rep.fits["iterations"].lo, 4), round(rep.fits["iterations"].hi, 4)],
            "slope_calls": round(rep.fits["calls"].slope, 4),
            "interval_calls": [round(rep.fits["calls"].lo, 4), round(rep.fits["calls"].hi, 4)],
            "residual_log10": round(rep.fits["iterations"].residual, 4),
            "verdict": rep.verdicts.get("iterations"),
            "runs_executed": rep.executed,
            "runs_reused": rep.reused,
            "seconds": round(time.perf_counter() - t0, 1),
        }
        print(f"{name}: slope {rep.fits['iterations'].slope:.3f} ({rep.verdicts.get('iterations')})", file=sys.stderr)
    print(json.dumps({"seeds": args.seeds, "budget": args.budget, "studies": summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
