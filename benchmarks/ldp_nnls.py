"""Least-distance programs of the feasibility restoration: zoframe's NNLS against scipy's.

Builds the first restoration program of ADSZOG on a pairwise problem (after ``--steps`` steps, one
per seed): the rows are the ``16 d`` largest nearly active constraints ``f_j(w) > -max_j f_j(w)``,
with their exact gradients (the pair differences) and targets ``f_j + g_j . delta <= 0``. Each is
solved by ``zoframe_constrained.ldp.least_distance`` and by the same reduction with
``scipy.optimize.nnls``; the JSON gives the median milliseconds of each, their ratio and the
largest difference between the two steps. Prints ONE final line of JSON::

    python benchmarks/ldp_nnls.py --problem a9a --seeds 0,1,2,3,4
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
import json
import statistics
import time

import numpy as np
import scipy
from scipy.optimize import nnls as scipy_nnls

import zoframe
from zoframe_constrained.ldp import least_distance, least_distance_step


def scipy_least_distance(G: np.ndarray, b: np.ndarray) -> np.ndarray:
    d = G.shape[1]
    E = np.vstack([-G.T, -b[None, :]])
    e = np.zeros(d + 1)
    e[d] = 1.0
    u = scipy_nnls(E, e, maxiter=3 * E.shape[1])[0]
    r = E @ u - e
    out: np.ndarray = -r[:d] / r[d]
    return out


def best_of(fn: Callable[[np.ndarray, np.ndarray], np.ndarray], G: np.ndarray, b: np.ndarray, repeats: int) -> tuple[float, np.ndarray]:
    """Fastest of ``repeats`` calls ``fn(G, b)`` (seconds) and the step."""
    best, out = float("inf"), np.zeros(0)
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn(G, b)
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default="a9a", help="pairwise data set (a9a needs its file; breast-cancer is bundled)")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--steps", type=int, default=1000, help="ADSZOG steps before the program is built")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    prob = zoframe.default_registry().make_problem("pairwise", dataset=args.problem, seed=0, black_box_constraints=False)
    D, e = prob.linear_constraints()
    k = 16 * prob.dim
    own_ms, scipy_ms, diffs, rows, active = [], [], [], [], []
    for seed in [int(s) for s in args.seeds.split(",") if s.strip()]:
        r = zoframe.minimize(prob, "adszog", rng=seed, max_iter=args.steps, record_every=0, eta_w=1e-2, eta_p=1e-2, beta=10.0)
        f = D @ r.x - e
        near = np.flatnonzero(f > -max(float(f.max()), 1e-3))
        if near.shape[0] > k:
            near = near[np.argpartition(-f[near], k - 1)[:k]]
        G, b = D[near], -f[near]
        t_own, d_own = best_of(least_distance_step, G, b, args.repeats)
        t_sp, d_sp = best_of(scipy_least_distance, G, b, args.repeats)
        own_ms.append(1e3 * t_own)
        scipy_ms.append(1e3 * t_sp)
        diffs.append(float(np.linalg.norm(d_own - d_sp)))
        rows.append(int(near.shape[0]))
        active.append(int(least_distance(G, b)[1].shape[0]))  # type: ignore[union-attr]
    out = {
        "problem": args.problem, "d": prob.dim, "rows": rows, "active_rows": active, "scipy": scipy.__version__,
        "own_ms": [round(v, 2) for v in own_ms], "scipy_ms": [round(v, 2) for v in scipy_ms],
        "own_ms_median": statistics.median(own_ms), "scipy_ms_median": statistics.median(scipy_ms),
        "scipy_over_own": statistics.median(scipy_ms) / statistics.median(own_ms),
        "max_step_difference": max(diffs),
    }  # fmt: skip
    print(json.dumps(out))


if __name__ == "__main__":
    main()
