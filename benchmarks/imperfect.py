"""Constrained solvers under relative noise: success claims, false claims, errors and the estimated noise.

Problems: the ``constrained-small`` suite (``zoframe_constrained.suite``: Hock-Schittkowski, CEC 2006 and
random convex QP / QCQP instances with known ``f*``; ``--quick``: the 12 named in :data:`QUICK`) and one
many-constraint family of ``benchmarks/many_constraints.py``: ``polytope`` (the projection of a far point onto
the intersection of ``m`` halfspaces ``A x <= 1``, d = 20; ``m = 1000`` with ``--quick``, ``10^4`` otherwise;
``f*`` from that script's exchange reference with exact gradients). Every function value (objective and
every constraint) goes through ``zoframe.imperfect.noisy(problem, level, kind="relative", seed=s)``:
``f (1 + level z)``, for ``level`` in ``1e-10, 1e-8, 1e-6, 1e-4`` and the run seeds ``s = 0, 1, 2`` (the
solver's seed and the noise's). Solvers: ``adszog``, ``dszog``, ``slsqp-fd``, ``cobyla`` (zoframe's peer of
scipy's COBYLA), all through ``zoframe.minimize`` with their defaults and a budget of ``100 d`` full
evaluations (``max_calls = 100 d (1 + m)``; one full evaluation is the objective and all ``m`` constraints at
one point).

What is measured at each returned point ``x``, on the CLEAN problem:

* the relative error ``|f(x) - f*| / max(1, |f*|)`` (the true gap) and the max violation;
* the clean certificate: :func:`zoframe.certificate.certify` on an oracle of the clean problem with the
  default tolerance ``1e-3`` (the test behind ``success``, on the noise-free functions: gradients by central
  differences with step ``eps^(1/4) max(1, |x_i|)``, whose truncation error on these smooth functions is
  about ``1e-8`` of the gradient, five orders below the tolerance, so the residual is the exact-gradient KKT
  residual to that accuracy; multipliers by NNLS; max violation at most ``1e-3``; the second-order probe);
* the noise estimated by ``zoframe.noise.estimate_noise`` at ``x`` on the noisy functions (9 points, one
  batched call of the objective and all constraints per attempt), against the true standard deviation
  ``level |f(x)|`` of each column: the objective's ratio (``noise_estimate_over_true``), and the median ratio
  over the constraints with ``|g_j(x)| > 1e-2`` (an active constraint's relative noise ``level |g_j|`` is
  below the rounding of its terms, which is what the estimator then reports).

A *success claim* is ``Result.success`` (the run's certificate on the values it saw). A claim is FALSE when
the true gap exceeds ``1e-3`` (``false_gap``) or the clean certificate fails (``false_kkt``: residual above
``1e-3``, violation above ``1e-3`` or a refused second-order probe); ``false_claims`` counts either. A gap
claim can also be false on a nonconvex problem whose run found another local minimum (``g01``, ``g08`` ...):
``false_kkt`` is the figure the certificate answers for.

Per noise level and solver (and per group: ``constrained-small``, ``polytope``): runs, claims, false claims,
the median relative error, that median divided by ``sqrt(level)`` (the order a difference method can reach
under noise ``level``), the statuses, and the estimated relative noise of the objective over the true level
(median, and the share within a factor 3), and the runs whose message states a max violation other than
``Result.max_violation`` (``message_disagrees``, the figure that must be 0). The run's rows go to stderr with
``--verbose``; one final JSON line.

    python benchmarks/imperfect.py [--quick] [--levels 1e-10,1e-8,1e-6,1e-4] [--seeds 3] [--jobs 2]
        [--solvers adszog,dszog,slsqp-fd,cobyla] [--m M] [--only hs010,hs043] [--verbose]
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor
import contextlib
import json
import math
import os
from pathlib import Path
import platform
import re
import sys
import time
from typing import Any
import warnings

import numpy as np
import scipy

import zoframe
from zoframe.certificate import DEFAULT_TOL, certify
from zoframe.driver import RunFailedError
from zoframe.imperfect import noisy
from zoframe.noise import estimate_noise
from zoframe.oracle import CountingOracle

sys.path.insert(0, str(Path(__file__).resolve().parent))

#: the constrained-small problems of ``--quick``: d from 2 to 13, m from 1 to 13, convex and not
QUICK = ("hs010", "hs012", "hs022", "hs029", "hs035", "hs043", "hs065", "hs076", "hs100", "hs108", "qp-02", "qcqp-04")
SOLVERS = ("adszog", "dszog", "slsqp-fd", "cobyla")
LEVELS = (1e-10, 1e-8, 1e-6, 1e-4)
TOL = DEFAULT_TOL  # the certificate's tolerance: 1e-3

_CACHE: dict[str, Any] = {}
_VIOL = re.compile(r"max violation over all m ([0-9.eE+-]+)")


def _small(name: str) -> tuple[Any, float]:
    """A constrained-small problem (clean) and its ``f*``."""
    from zoframe_constrained.suite import HS

    if name in HS:  # a published problem: no need to build the random instances (cvxpy solves)
        tp = HS[name]()
        return tp.problem(), float(tp.f_star)
    if "small" not in _CACHE:
        from zoframe_constrained.suite import instances

        _CACHE["small"] = {i.name: i for i in instances()}
    inst = _CACHE["small"][name]
    return inst.build(), float(inst.f_star)


def _polytope(m: int, seed: int) -> tuple[Any, float]:
    """The many-constraint family ``polytope`` (d = 20) with ``m`` constraints, and its ``f*``."""
    key = f"polytope/{m}/{seed}"
    if key not in _CACHE:
        from many_constraints import family, reference

        fam = family("polytope", m, seed)
        _CACHE[key] = (zoframe.Constrained(fam.f, fam.g, m=fam.m, x0=fam.x0, name=f"polytope-m{m}"),
                       float(reference(fam)["f_star"]))
    out: tuple[Any, float] = _CACHE[key]
    return out


def job(args: tuple[str, str, int, str, int, float]) -> dict[str, Any]:
    """One run: ``(group, instance, m, solver, seed, level)`` -> its figures."""
    group, name, m, solver, seed, level = args
    clean, fstar = _small(name) if group == "constrained-small" else _polytope(m, 0)
    prob = noisy(clean, level, kind="relative", seed=seed)
    d, mm = int(clean.dim), int(clean.m)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            res = zoframe.minimize(prob, solver, rng=seed, max_calls=100 * d * (1 + mm), record_every=0, progress=False)
            status = res.status.name
        except RunFailedError as exc:
            res, status = exc.result, "FAILED"
    seconds = time.perf_counter() - t0
    x = np.asarray(res.x, dtype=np.float64)
    row: dict[str, Any] = {"group": group, "instance": name, "m": mm, "d": d, "solver": solver, "seed": seed,
                           "level": level, "status": status, "claim": bool(res.success), "seconds": round(seconds, 3)}
    stated = _VIOL.findall(str(res.message))  # the max violation the message states, against Result.max_violation
    if stated and res.max_violation is not None:
        row["message_agrees"] = f"{float(stated[-1]):.2g}" == f"{max(float(res.max_violation), 0.0):.2g}" \
            or float(stated[-1]) >= float(res.max_violation)
    if not np.all(np.isfinite(x)):
        row.update(rel_error=math.inf, violation=math.inf, clean_passed=False, clean_residual=math.inf,
                   noise_ratio=math.nan, noise_status="no finite point")
        return row
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        oracle = CountingOracle(clean)
        fx = float(oracle.monitor.objective(x).mean())
        cert = certify(oracle, x, tol=TOL, feasibility_tol=1e-3)
        idx = np.arange(mm)

        def values(X: np.ndarray) -> np.ndarray:  # the noisy objective and all constraints, one call each
            return np.column_stack([prob.components(X, np.zeros(1, dtype=np.intp)), prob.constraints(X, idx)])

        est = estimate_noise(values, x, np.random.default_rng(seed))
    ok = np.array(est.accepted)
    g = oracle.monitor.constraints(x)[0] if mm else np.zeros(0)
    true_abs = level * np.abs(np.concatenate([[fx], g]))  # the standard deviation of f (1 + level z) at x
    ratio = np.where(ok & (true_abs > 0), est.per_column / np.where(true_abs > 0, true_abs, 1.0), np.nan)
    inactive = np.abs(g) > 1e-2  # where level |g| is above the rounding of g's own terms, for every level here
    row.update(
        rel_error=abs(fx - fstar) / max(1.0, abs(fstar)), violation=float(cert.max_violation or 0.0),
        clean_passed=bool(cert.passed), clean_residual=float(cert.residual),
        noise_ratio=float(ratio[0]), noise_status=est.column_status[0],
        noise_ratio_constraints=_median([float(v) for v in ratio[1:][inactive]]) or math.nan,
        noise_evaluations=int(est.evaluations),
    )
    return row


def _median(vals: list[float]) -> float | None:
    v = [x for x in vals if math.isfinite(x)]
    return float(np.median(v)) if v else None


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for group in sorted({r["group"] for r in rows}):
        for level in sorted({r["level"] for r in rows}):
            for solver in [s for s in SOLVERS if any(r["solver"] == s for r in rows)] + sorted(
                {r["solver"] for r in rows} - set(SOLVERS)
            ):
                sel = [r for r in rows if r["group"] == group and r["level"] == level and r["solver"] == solver]
                if not sel:
                    continue
                claims = [r for r in sel if r["claim"]]
                false_gap = [r for r in claims if not r["rel_error"] <= TOL]
                false_kkt = [r for r in claims if not r["clean_passed"]]
                false_any = [r for r in claims if not (r["rel_error"] <= TOL and r["clean_passed"])]
                errs = [float(r["rel_error"]) for r in sel]
                med = _median(errs)
                statuses: dict[str, int] = {}
                for r in sel:
                    statuses[r["status"]] = statuses.get(r["status"], 0) + 1
                ratios = np.asarray([r["noise_ratio"] for r in sel], dtype=np.float64)
                within = float(np.mean((ratios >= 1 / 3) & (ratios <= 3))) if ratios.size else 0.0
                out.setdefault(group, {}).setdefault(f"{level:g}", {})[solver] = {
                    "runs": len(sel),
                    "claims": len(claims),
                    "false_claims": len(false_any),
                    "false_gap": len(false_gap),
                    "false_kkt": len(false_kkt),
                    "false_claim_examples": sorted({f"{r['instance']}#s{r['seed']}" for r in false_any})[:6],
                    "solved_gap_1e-3": sum(1 for r in sel if r["rel_error"] <= TOL and r["violation"] <= 1e-3),
                    "median_rel_error": med,
                    "median_rel_error_over_sqrt_noise": None if med is None else med / math.sqrt(level),
                    "statuses": dict(sorted(statuses.items())),
                    "noise_estimate_over_true_median": _median([float(v) for v in ratios]),
                    "noise_estimate_within_3x": round(within, 3),
                    "noise_estimate_constraints_median": _median([float(r.get("noise_ratio_constraints", math.nan))
                                                                  for r in sel]),
                    "median_seconds": _median([float(r["seconds"]) for r in sel]),
                    "message_disagrees": sum(r.get("message_agrees") is False for r in sel),
                }
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="12 constrained-small problems and polytope m = 1000")
    ap.add_argument("--levels", default=",".join(f"{v:g}" for v in LEVELS))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--solvers", default=",".join(SOLVERS))
    ap.add_argument("--m", type=int, default=None, help="constraints of the polytope family (1000 quick, 10000 full)")
    ap.add_argument("--only", default="", help="comma-separated constrained-small instances (default: all, or QUICK)")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    levels = [float(v) for v in args.levels.split(",")]
    solvers = [s.strip() for s in args.solvers.split(",") if s.strip()]
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
    elif args.quick:
        names = list(QUICK)
    else:
        from zoframe_constrained.suite import instances

        names = [i.name for i in instances()]
    m = args.m or (1000 if args.quick else 10_000)
    jobs: list[tuple[str, str, int, str, int, float]] = []
    for level in levels:
        for seed in range(args.seeds):
            for solver in solvers:
                jobs.extend(("constrained-small", name, 0, solver, seed, level) for name in names)
                jobs.append(("polytope", f"polytope-m{m}", m, solver, seed, level))
    jobs.sort(key=lambda j: (j[0] != "polytope", j[3] != "cobyla"))  # the long runs first: the pool ends together
    _polytope(m, 0)  # the reference once, before the workers fork
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        if args.jobs > 1:
            pool = stack.enter_context(ProcessPoolExecutor(args.jobs))
            results: Any = pool.map(job, jobs, chunksize=4)
        else:  # in this process (--jobs 1)
            results = map(job, jobs)
        for row in results:
            rows.append(row)
            if args.verbose:
                print(json.dumps(row), file=sys.stderr, flush=True)
    head = {
        "benchmark": "imperfect", "quick": bool(args.quick), "levels": levels, "seeds": args.seeds,
        "solvers": solvers, "problems_small": len(names), "polytope_m": m, "runs": len(rows),
        "budget": "100 d full evaluations", "certificate_tol": TOL, "wall_seconds": round(time.perf_counter() - t0, 1),
        "cpus": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__, "scipy": scipy.__version__,
    }  # fmt: skip
    out = {**head, "results": summarise(rows)}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
