"""Cost of running a peer through zoframe against calling the same peer directly.

Target: a peer run through ``zoframe.minimize`` costs at most 1.08x the same peer called directly on
the same problem with the same budget. Both sides make the same evaluations (same start, same
options, the budget in peer points: ``max_calls = points * (n + m)`` through zoframe, the peer's own
evaluation limit directly; the direct side's function is the mean of all ``n`` components and, for a
constrained problem, all ``m`` constraints, the values zoframe hands the peer), so the ratio measures
zoframe's bridge alone:

* the counting oracle: one ``CountingOracle.evaluate_full`` per point of a scipy peer (budget, counts,
  input and result checks, non-finite policy, the row's mean), a batch per CMA-ES generation;
* the peer's bookkeeping: the repeated-point test, the clip into simple bounds, best point, replay log;
* the driver loop: one step per ``points_per_step`` points (default ``10 (d + 1)``), and the
  default trace, what users run: records after the steps 1, 2, 3, 5, 7, 10, 15, ... (six per decade)
  and the last. The scipy peers run in the driver's thread (their ``unobserved_steps()`` copy: no
  thread, no handoffs), the loop's work after a step done from inside scipy's calls; ``--no-trace``
  (``record_every=0``: only the first and the last record) leaves the records out;
* each run's fixed cost (building the run, the trace records, the BLAS thread limit, the result).

Cases (problem, peer, points):

* ``random-qp`` (d = 10, m = 20 linear constraints, n = 1) with scipy's ``cobyla``;
* the same QP with pycma's ``cma-es`` (augmented Lagrangian);
* ``least-squares`` (d = 10, n = 200 components, no constraints) with scipy's ``nelder-mead``: a
  function of about 10 microseconds per point (about 22 with Nelder-Mead's own work), where
  zoframe's fixed cost per point shows;
* the same with n = 5000 components (a costlier function, about 80 microseconds per point).

``overhead_us_per_point`` is the difference of the medians per peer point. On a busy machine the
ratio of the cheap cases moves most (with 7 repeats, up to five hundredths between runs on an
idle machine; the default 21 repeats keep it within about one hundredth): run it twice and compare.

Each case runs direct and through zoframe alternately, ``--repeats`` times, side by side in one
process; the JSON line gives each case's median times and the median of the per-repeat ratios.

    python benchmarks/peer_overhead.py [--repeats 21] [--no-trace]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any
import warnings

import numpy as np
import scipy
from scipy import optimize

import zoframe
from zoframe_basic.problems import LeastSquares
from zoframe_bench.suites import RandomQP


def _direct_scipy(problem: Any, method: str, points: int, options: dict[str, Any]) -> float:
    all_n = np.arange(problem.n)
    constrained = getattr(problem, "kind", "") == "constrained"
    all_m = np.arange(problem.m) if constrained else None

    def fun(x: np.ndarray) -> float:
        return float(problem.components(x[None, :], all_n).mean())

    kwargs: dict[str, Any] = {"method": method, "options": dict(options)}
    if constrained:
        kwargs["constraints"] = [{"type": "ineq", "fun": lambda x: -problem.constraints(x[None, :], all_m)[0]}]
    if method == "COBYLA":
        kwargs["options"]["maxiter"] = points
    else:
        kwargs["options"]["maxfev"] = points
    t0 = time.perf_counter()
    optimize.minimize(fun, np.array(problem.x0, dtype=float), **kwargs)
    return time.perf_counter() - t0


def _direct_cma(problem: Any, points: int, seed: int) -> float:
    import cma

    all_n, all_m = np.arange(problem.n), np.arange(problem.m)
    gen = np.random.default_rng(seed)
    t0 = time.perf_counter()
    es = cma.CMAEvolutionStrategy(list(problem.x0), 0.5, {"randn": lambda *s: gen.standard_normal(s), "seed": 1,
                                                          "verbose": -9, "tolfun": 1e-11, "tolx": 1e-11})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        al = cma.ConstrainedFitnessAL(lambda x: float(problem.components(x[None, :], all_n).mean()),
                                      lambda x: list(problem.constraints(x[None, :], all_m)[0]))
        used = 0
        while not es.stop():
            X = es.ask()
            if used + len(X) > points:
                break
            es.tell(X, [al(x) for x in X])
            al.update(es)
            used += len(X)
    return time.perf_counter() - t0


def _through_zoframe(problem: Any, solver: str, points: int, record_every: int | None) -> tuple[float, int]:
    cost = problem.n + (problem.m if getattr(problem, "kind", "") == "constrained" else 0)
    t0 = time.perf_counter()
    res = zoframe.minimize(problem, solver, rng=0, max_calls=points * cost, record_every=record_every)
    return time.perf_counter() - t0, res.nfev // cost


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=21)
    ap.add_argument("--no-trace", action="store_true", help="record_every=0 (only the first and the last record)")
    args = ap.parse_args()
    every = 0 if args.no_trace else None
    qp = RandomQP(dim=10, m=20, seed=0)
    ls = LeastSquares(dim=10, n=200, seed=0)
    big = LeastSquares(dim=10, n=5000, seed=0)
    cases: dict[str, tuple[Any, Any]] = {
        "cobyla/random-qp": (lambda: _direct_scipy(qp, "COBYLA", 400, {"rhobeg": 1.0, "tol": 1e-8}),
                             lambda: _through_zoframe(qp, "cobyla", 400, every)),
        "cma-es/random-qp": (lambda: _direct_cma(qp, 1000, 0), lambda: _through_zoframe(qp, "cma-es", 1000, every)),
        "nelder-mead/least-squares": (
            lambda: _direct_scipy(ls, "Nelder-Mead", 2000, {"xatol": 1e-8, "fatol": 1e-12}),
            lambda: _through_zoframe(ls, "nelder-mead", 2000, every)),
        "nelder-mead/least-squares-n5000": (
            lambda: _direct_scipy(big, "Nelder-Mead", 1000, {"xatol": 1e-8, "fatol": 1e-12}),
            lambda: _through_zoframe(big, "nelder-mead", 1000, every)),
    }
    out: dict[str, Any] = {}
    for name, (direct, framed) in cases.items():
        direct()  # warm-up (imports, caches)
        framed()
        d_times, z_times, ratios, points = [], [], [], 0
        for _ in range(args.repeats):
            d = direct()
            z, points = framed()
            d_times.append(d)
            z_times.append(z)
            ratios.append(z / d)
        out[name] = {"direct_s": round(statistics.median(d_times), 4), "zoframe_s": round(statistics.median(z_times), 4),
                     "ratio_median": round(statistics.median(ratios), 3), "points_through_zoframe": points,
                     "overhead_us_per_point": round(1e6 * (statistics.median(z_times) - statistics.median(d_times))
                                                    / max(points, 1), 1)}
    worst = max(v["ratio_median"] for v in out.values())
    print(json.dumps({"benchmark": "peer_overhead", "repeats": args.repeats,
                      "trace": "first and last only" if args.no_trace else "default", "cases": out, "worst_ratio": worst,
                      "target_ratio": 1.08, "meets_target": worst <= 1.08, "numpy": np.__version__,
                      "scipy": scipy.__version__}))


if __name__ == "__main__":
    main()
