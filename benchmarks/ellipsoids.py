"""``adszog`` / ``dszog`` on imperfect and badly scaled many-constraint problems: the precision phase at the noise floor.

Families (``benchmarks/many_constraints.py``, constraint data made from the index on demand):

* ``ellipsoids`` (the tuned family): the projection of a far point ``a`` (``5 N(0, I)``, d = 20) onto the
  intersection of ``m`` ellipsoids ``sum_k w_ik (x_k - c_ik)^2 <= r_i^2`` (centres ``0.3 x`` a Fourier row, axis
  weights ``e^(0.5 x another)``, every ellipsoid holding the ball ``|x| <= 0.5``), ``m = 10^4`` by default;
* held out of the tuning (``--heldout``): ``balls`` (logistic loss in the intersection of ``m`` balls, d = 10) and
  ``rosenbrock`` (Rosenbrock in ``m`` halfspaces that cut off its minimiser, d = 10), the same scenarios.

Scenarios, each on seeds ``0 .. seeds-1`` (the solver's seed and the noise's):

* ``noise``: every value (objective and each constraint) through ``zoframe.imperfect.noisy(problem, level,
  kind="relative")``, levels ``1e-10, 1e-8, 1e-6``; the returned point measured on the clean problem;
* ``scaled`` / ``scaled0``: the variables rescaled to natural sizes ``1e-3 .. 1e3`` (``u_i = s_i x_i``, ``s`` log-spaced
  and shuffled by the seed), from the start ``0.05 s`` (``scaled``: the start shows the sizes) and from ``0``
  (``scaled0``: it does not), against the same runs unscaled (``x0 = 0.05``, resp. ``0``).

Per run: the relative error ``|f(x) - f*| / max(1, |f*|)`` on the clean problem (``f*`` from the script's exchange
reference with exact gradients), the max violation over all ``m`` (clean), the status, ``success``, the full
evaluations used (``nfev / (1 + m)``), the precision phase's estimated noise and KKT residual / error, and whether
the max violation the message states is ``Result.max_violation`` (the same pass, the same number). Budget ``100 d``
full evaluations (``max_calls = 100 d (1 + m)``). Per scenario the medians over seeds; one final JSON line.

    python benchmarks/ellipsoids.py [--m 10000] [--seeds 3] [--solvers adszog,dszog] [--heldout] [--verbose]
"""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path
import platform
import re
import sys
import time
from typing import Any

import numpy as np
import scipy

import zoframe
from zoframe.driver import RunFailedError
from zoframe.imperfect import noisy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from many_constraints import family, full_pass, reference

LEVELS = (1e-10, 1e-8, 1e-6)
_VIOL = re.compile(r"max violation over all m ([0-9.eE+-]+)")


def _stated(message: str) -> float | None:
    """The max violation the message states for the point returned (the last such figure), if any."""
    found = _VIOL.findall(message)
    return float(found[-1]) if found else None


def run_one(fam: Any, ref: float, solver: str, seed: int, level: float, scales: np.ndarray | None, start: str) -> dict[str, Any]:
    """One run: the family's problem (noisy at ``level``, rescaled by ``scales``), measured on the clean one."""
    d, m = fam.d, fam.m
    s = np.ones(d) if scales is None else scales
    x0 = np.zeros(d) if start == "zero" else 0.05 * np.ones(d)

    def f(U: np.ndarray) -> np.ndarray:
        out: np.ndarray = fam.f(U / s)
        return out

    def g(U: np.ndarray, idx: np.ndarray) -> np.ndarray:
        out: np.ndarray = fam.g(U / s, idx)
        return out

    prob: Any = zoframe.Constrained(f, g, m=m, x0=x0 * s, name=fam.name)
    if level > 0:
        prob = noisy(prob, level, kind="relative", seed=seed)
    t0 = time.perf_counter()
    try:
        res = zoframe.minimize(prob, solver, rng=seed, max_calls=100 * d * (1 + m), record_every=0, progress=False)
    except RunFailedError as exc:
        res = exc.result
    sec = time.perf_counter() - t0
    x = np.asarray(res.x, dtype=np.float64) / s
    fx = float(fam.f(x[None, :])[0])
    stated = _stated(str(res.message))
    out = res.outputs
    return {
        "family": fam.name, "solver": solver, "seed": seed, "level": level, "scaled": scales is not None, "start": start,
        "rel_error": abs(fx - ref) / max(1.0, abs(ref)), "violation": max(0.0, full_pass(fam, x)[0]),
        "status": res.status.name, "success": bool(res.success), "full_evaluations": round(res.nfev / (1 + m), 1),
        "seconds": round(sec, 2), "noise_objective": float(out.get("noise_objective", np.nan)), "f_star": ref,
        "kkt_residual": float(out.get("kkt_residual", np.nan)), "kkt_error": float(out.get("kkt_error", np.nan)),
        "max_violation_result": res.max_violation, "max_violation_stated": stated,
        "message_agrees": stated is None or res.max_violation is None
        or f"{stated:.2g}" == f"{max(float(res.max_violation), 0.0):.2g}" or stated >= float(res.max_violation),
    }  # fmt: skip


def _median(v: list[float]) -> float:
    return float(np.median(v)) if v else math.nan


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=10_000)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--solvers", default="adszog,dszog")
    ap.add_argument("--levels", default=",".join(f"{v:g}" for v in LEVELS))
    ap.add_argument("--heldout", action="store_true", help="the held-out families (balls, rosenbrock) instead")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    names = ["balls", "rosenbrock"] if args.heldout else ["ellipsoids"]
    solvers = args.solvers.split(",")
    levels = [float(v) for v in args.levels.split(",")]
    rows: list[dict[str, Any]] = []
    t_all = time.perf_counter()
    for name in names:
        for seed in range(args.seeds):
            fam = family(name, args.m, seed)
            ref = float(reference(fam)["f_star"])
            sizes = np.logspace(-3, 3, fam.d)
            np.random.default_rng(seed).shuffle(sizes)
            jobs: list[tuple[str, float, np.ndarray | None, str]] = [("noise", lv, None, "zero") for lv in levels]
            jobs += [("unscaled", 0.0, None, "nonzero"), ("scaled", 0.0, sizes, "nonzero"),
                     ("unscaled0", 0.0, None, "zero"), ("scaled0", 0.0, sizes, "zero")]  # fmt: skip
            for scenario, level, scales, start in jobs:
                for solver in solvers:
                    row = {"scenario": scenario, **run_one(fam, ref, solver, seed, level, scales, start)}
                    rows.append(row)
                    if args.verbose:
                        print(json.dumps(row), file=sys.stderr, flush=True)
    summary: dict[str, Any] = {}
    for name in names:
        for solver in solvers:
            for key in [f"noise-{lv:g}" for lv in levels] + ["unscaled", "scaled", "unscaled0", "scaled0"]:
                sel = [r for r in rows if r["family"] == name and r["solver"] == solver and (
                    (key.startswith("noise-") and r["scenario"] == "noise" and f"{r['level']:g}" == key[6:]) or r["scenario"] == key)]
                if not sel:
                    continue
                statuses: dict[str, int] = {}
                for r in sel:
                    statuses[r["status"]] = statuses.get(r["status"], 0) + 1
                summary[f"{name}/{solver}/{key}"] = {
                    "median_rel_error": _median([r["rel_error"] for r in sel]),
                    "max_rel_error": float(max(r["rel_error"] for r in sel)),
                    "median_violation": _median([r["violation"] for r in sel]),
                    "median_full_evaluations": _median([r["full_evaluations"] for r in sel]),
                    "full_evaluations": [r["full_evaluations"] for r in sel],
                    "statuses": statuses, "success": sum(r["success"] for r in sel),
                    "median_noise_estimate_over_true": _median([r["noise_objective"] / max(abs(r["level"] * r["f_star"]), 1e-300)
                                                               for r in sel if r["level"] > 0 and math.isfinite(r["noise_objective"])]),
                    "message_disagrees": sum(not r["message_agrees"] for r in sel),
                }  # fmt: skip
    for name in names:  # the cost of the scales: scaled over unscaled, per seed
        for solver in solvers:
            for a, b in (("scaled", "unscaled"), ("scaled0", "unscaled0")):
                ra = [r for r in rows if r["family"] == name and r["solver"] == solver and r["scenario"] == a]
                rb = [r for r in rows if r["family"] == name and r["solver"] == solver and r["scenario"] == b]
                if ra and rb:
                    summary[f"{name}/{solver}/{a}_over_{b}"] = {
                        "evaluation_ratio": [round(x["full_evaluations"] / y["full_evaluations"], 2) for x, y in zip(ra, rb, strict=True)],
                        "digits_lost": [round(math.log10(max(x["rel_error"], 1e-14) / max(y["rel_error"], 1e-14)), 1)
                                        for x, y in zip(ra, rb, strict=True)],
                    }  # fmt: skip
    print(json.dumps({
        "benchmark": "ellipsoids", "m": args.m, "seeds": args.seeds, "heldout": args.heldout, "budget": "100 d full",
        "wall_seconds": round(time.perf_counter() - t_all, 1), "cpus": os.cpu_count(), "load_average": list(os.getloadavg()),
        "python": platform.python_version(), "numpy": np.__version__, "scipy": scipy.__version__, "results": summary,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
