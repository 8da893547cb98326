"""Per-iteration time of ``dszog`` and ``adszog`` as the number of constraints m grows.

Pairwise constraints on the synthetic ``gen`` set (d = 50): ``n_samples = 4 sqrt(m)`` samples give
a training split of about ``sqrt(m)`` positives x ``sqrt(m)`` negatives, i.e. m = 10^3 .. 10^6
constraints, while every per-iteration batch (q = 10, |M1| = |M2| = |M3| = 128) stays the same.
``dszog`` stores p in the sparse floor + support form from m = 10,000 (``p_form="auto"``);
``adszog`` likewise (its p and z_p share one floor + support form, see its docstring). Also
timed: one evaluation of all m constraints at one point (what a projection baseline needs at
least once per iteration).

Prints one final JSON line with ``dszog_us_per_it_<m>``, ``adszog_us_per_it_<m>``,
``all_constraints_us_<m>``, ``dszog_support_<m>`` (final support size of p) and
``dszog_growth_1e4_to_1e6`` / ``adszog_growth_1e4_to_1e6`` (time per iteration at m = 10^6 over
m = 10^4).

    python benchmarks/scaling_m.py [--iters 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

import zoframe
from zoframe_constrained.problems import pairwise

PARAMS = {"eta_w": 1e-3, "eta_p": 1e-2, "beta": 1.0, "q": 10, "M1": 128, "M2": 128, "M3": 128}


def per_iteration(prob: Any, solver: str, iters: int, seed: int, **extra: Any) -> tuple[float, Any]:
    params = {**PARAMS, "M1": min(PARAMS["M1"], prob.n), **extra}  # m = 10^3 has only 63 training samples
    res = zoframe.minimize(prob, solver, rng=seed, max_iter=iters, record_every=iters, **params)
    sec = res.trace["seconds"]
    return float(sec[-1] - sec[0]) / iters, res


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ms", type=str, default="1e3,1e4,1e5,1e6")
    args = ap.parse_args(argv)
    out: dict[str, Any] = {"iters": args.iters, "repeats": args.repeats, "d": 50}
    for m_target in (int(float(s)) for s in args.ms.split(",")):
        prob = pairwise("gen", n_samples=round(4 * math.sqrt(m_target)), seed=0)
        key = f"{m_target:.0e}".replace("+0", "").replace("+", "")
        with threadpool_limits(limits=1, user_api="blas"):
            ds, ads, alls = [], [], []
            support = 0
            for rep in range(args.repeats):
                t, res = per_iteration(prob, "dszog", args.iters, rep)
                ds.append(t)
                support = int(np.count_nonzero(res.outputs["p"] > res.outputs["p"].min())) if prob.m < 2e6 else -1
                ads.append(per_iteration(prob, "adszog", args.iters, rep, a=0.9, b=0.9)[0])
                w = np.random.default_rng(rep).standard_normal(prob.dim)
                t0 = time.perf_counter()
                prob.constraints(w[None, :], np.arange(prob.m))
                alls.append(time.perf_counter() - t0)
        out[f"m_{key}"] = prob.m
        out[f"dszog_us_per_it_{key}"] = round(float(np.median(ds)) * 1e6, 1)
        out[f"adszog_us_per_it_{key}"] = round(float(np.median(ads)) * 1e6, 1)
        out[f"all_constraints_us_{key}"] = round(float(np.median(alls)) * 1e6, 1)
        out[f"dszog_support_{key}"] = support
        print(
            f"m={prob.m}: dszog {out[f'dszog_us_per_it_{key}']} us/it (support {support}), "
            f"adszog {out[f'adszog_us_per_it_{key}']} us/it, all constraints once {out[f'all_constraints_us_{key}']} us",
            flush=True,
        )
    for name in ("dszog", "adszog"):
        if f"{name}_us_per_it_1e4" in out and f"{name}_us_per_it_1e6" in out:
            out[f"{name}_growth_1e4_to_1e6"] = round(out[f"{name}_us_per_it_1e6"] / out[f"{name}_us_per_it_1e4"], 3)
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
