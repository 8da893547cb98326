"""Oracle complexity of deterministic ZO-GDA on the synthetic NC-SC problem ``ncsc``.

Theorem 1 of Wang, Balasubramanian, Ma & Razaviyayn bounds the function values needed to reach
``||grad g(x)|| <= eps`` by ``O(kappa^5 (d1 + d2) eps^-2)``: linear in the dimension, ``eps^-2``.
This script measures the calls to the first iterate with ``||grad g(x_s)|| <= eps`` (exact
``grad g`` through the closed-form ``y*(x)``) for several ``d1 + d2`` (``d2 = (d1 + d2) / 5``) and
several ``eps``, with the paper's ``q = 2(d + 6)`` and fixed steps, from a start at the same distance
(5) from the origin and an offset ``c`` of norm 1 in every dimension, over several seeds; fits the log-log slopes of the median
calls against ``d1 + d2`` (at each eps) and against ``1/eps`` (at each dimension), with bootstrap
intervals over seeds, and prints them as ONE final JSON line.

Usage: ``python benchmarks/minimax_complexity.py [--seeds 5] [--kappa 4] [--quick]``
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from typing import Any

import numpy as np

from zoframe import minimize
from zoframe_minimax.problems import NCSC
from zoframe_minimax.solvers import ZOGDA


def calls_to_eps(total: int, kappa: float, eps_list: list[float], seed: int, eta1: float, eta2: float,
                 max_calls: int) -> list[float]:
    """Calls at the first iterate with ||grad g|| <= eps, for every eps (inf if never within max_calls)."""
    d2 = max(1, total // 5)
    problem = NCSC(d1=total - d2, d2=d2, kappa=kappa, offset_norm=1.0, seed=seed)
    u = np.random.default_rng(1000 + seed).standard_normal(problem.dim)
    x0 = 5.0 * u / np.linalg.norm(u)
    hits = [math.inf] * len(eps_list)
    pending = sorted(range(len(eps_list)), key=lambda i: -eps_list[i])

    def cb(info: Any) -> bool:
        gn = float(np.linalg.norm(problem.grad_g(info.x)))
        while pending and gn <= eps_list[pending[0]]:
            hits[pending.pop(0)] = float(info.calls)
        return not pending

    minimize(problem, ZOGDA(steps="paper", eta1=eta1, eta2=eta2, kappa=kappa), rng=seed, x0=x0, max_calls=max_calls,
             max_iter=10**7, callback=cb, record_every=0)
    return hits


def slope(xs: np.ndarray, ys: np.ndarray) -> float:
    ok = np.isfinite(ys)
    if ok.sum() < 2:
        return math.nan
    return float(np.polyfit(np.log(xs[ok]), np.log(ys[ok]), 1)[0])


def bootstrap(xs: np.ndarray, table: np.ndarray, rng: np.random.Generator, reps: int = 400) -> tuple[float, float]:
    """95% interval of the slope of the median over seeds; ``table`` is (seeds, len(xs))."""
    vals = []
    for _ in range(reps):
        pick = table[rng.integers(0, table.shape[0], size=table.shape[0])]
        vals.append(slope(xs, np.median(pick, axis=0)))
    v = np.array([s for s in vals if math.isfinite(s)])
    if v.size == 0:
        return math.nan, math.nan
    return float(np.quantile(v, 0.025)), float(np.quantile(v, 0.975))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--kappa", type=float, default=4.0)
    ap.add_argument("--eta1", type=float, default=0.1)
    ap.add_argument("--eta2", type=float, default=0.5)
    ap.add_argument("--max-calls", type=int, default=3_000_000)
    ap.add_argument("--quick", action="store_true", help="3 dimensions, 3 accuracies, 2 seeds")
    args = ap.parse_args()
    dims = [10, 40, 160] if args.quick else [10, 20, 40, 80, 160, 320, 640]
    eps_list = [1e-1, 1e-2, 1e-3] if args.quick else [1e-1, 3e-2, 1e-2, 3e-3, 1e-3]
    seeds = 2 if args.quick else args.seeds
    t0 = time.perf_counter()
    table = np.full((seeds, len(dims), len(eps_list)), math.inf)
    for j, total in enumerate(dims):
        for s in range(seeds):
            table[s, j] = calls_to_eps(total, args.kappa, eps_list, s, args.eta1, args.eta2, args.max_calls)
        print(f"d1+d2={total}: median calls {np.median(table[:, j], axis=0).tolist()}", file=sys.stderr)
    med = np.median(table, axis=0)  # (dims, eps)
    rng = np.random.default_rng(0)
    d_arr, inv_eps = np.array(dims, float), 1.0 / np.array(eps_list)
    dim_slopes = {f"{e:g}": {"slope": slope(d_arr, med[:, i]), "ci95": bootstrap(d_arr, table[:, :, i], rng)}
                  for i, e in enumerate(eps_list)}
    iters = table / (2.0 * d_arr[None, :, None] + 26.0)  # ZO-GDA: (q1 + 1) + (q2 + 1) = 2(d1 + d2) + 26 per step
    iter_slopes = {f"{e:g}": slope(d_arr, np.median(iters, axis=0)[:, i]) for i, e in enumerate(eps_list)}
    eps_slopes = {str(d): {"slope": slope(inv_eps, med[j]), "ci95": bootstrap(inv_eps, table[:, j, :], rng)}
                  for j, d in enumerate(dims)}
    out = {
        "benchmark": "minimax_complexity",
        "solver": "zo-gda",
        "problem": f"ncsc(kappa={args.kappa:g}, d2=(d1+d2)/5, offset_norm=1, |x0|=5)",
        "eta1": args.eta1, "eta2": args.eta2, "seeds": seeds,
        "dims": dims, "eps": eps_list,
        "median_calls": med.tolist(),
        "slope_vs_dim_at_eps": dim_slopes,
        "iterations_slope_vs_dim_at_eps": iter_slopes,
        "slope_vs_inv_eps_at_dim": eps_slopes,
        "theory": {"dim": 1.0, "inv_eps": 2.0},
        "seconds": round(time.perf_counter() - t0, 1),
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
