"""Small constrained problems with relative noise, made here (none is in the ``constrained-small`` suite): how often the
run ends within ``10 sqrt(level)`` relative error of ``f*`` with a status that says so, and how often NOISE_LIMITED is
said farther away (a false floor).

Problems (``f*`` in closed form, or from SLSQP with exact gradients at ``ftol = 1e-15``):

* ``wball``: ``min sum_i w_i (x_i - a_i)^2`` s.t. ``|x|^2 <= 1``, d = 6, ``w`` from 0.1 to 10, ``a`` outside the ball;
* ``linell``: ``min c^T x`` s.t. ``x^T Q x <= 1``, d = 5 (``f* = -sqrt(c^T Q^-1 c)``);
* ``prodell``: ``min -x_1 x_2`` s.t. ``x_1^2 + 4 x_2^2 <= 8``, ``x >= 0`` (``f* = -2`` at ``(2, 1)``), from ``(0.5, 0.5)``;
* ``rosdisk``: Rosenbrock's function in the unit disk, d = 2, from ``(-1.2, 1)`` (infeasible);
* ``quartic``: ``min sum_i (x_i^2 + x_i^4)`` s.t. ``sum_i x_i = 4``, ``x_1 - x_2 <= 0.5``, d = 4 (``f* = 8`` at 1).

Every value (objective and constraints) through ``zoframe.imperfect.noisy(problem, level, kind="relative",
seed=s)``; ``s = 0 .. seeds-1`` (the solver's seed and the noise's); budget ``100 d`` full evaluations
(``max_calls = 100 d (1 + m)``); the returned point judged on the clean problem (relative error
``|f(x) - f*| / max(1, |f*|)``, max violation at most ``1e-3``). Per level and solver: runs, ``within`` (error at most
``10 sqrt(level)`` and feasible), ``good`` (within, with status CONVERGED or NOISE_LIMITED), ``false_floor``
(NOISE_LIMITED and not within), ``false_claims`` (``success`` with error above ``1e-3``), the statuses. One final JSON
line.

    python benchmarks/noisy_small.py [--levels 1e-6,1e-4] [--seeds 3] [--solvers adszog,dszog,cobyla]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from typing import Any
import warnings

import numpy as np
import scipy
from scipy.optimize import minimize as scipy_minimize

import zoframe
from zoframe.driver import RunFailedError
from zoframe.imperfect import noisy

Array = np.ndarray


def _slsqp(f: Any, jac: Any, x0: Array, cons: list[dict[str, Any]], bounds: Any = None) -> float:
    r = scipy_minimize(f, x0, jac=jac, method="SLSQP", constraints=cons, bounds=bounds,
                       options={"ftol": 1e-15, "maxiter": 1000})  # fmt: skip
    return float(r.fun)


def problems() -> dict[str, tuple[Any, float, Any]]:
    """``name -> (problem, f*, clean objective on rows)``."""
    out: dict[str, tuple[Any, float, Any]] = {}
    rng = np.random.default_rng(2024)

    w = np.exp(rng.uniform(np.log(0.1), np.log(10.0), 6))
    a = rng.standard_normal(6)
    a *= 2.0 / np.linalg.norm(a)

    def f1(X: Array) -> Array:
        return np.asarray(((X - a) ** 2 * w).sum(axis=1))

    def g1(X: Array, idx: Array) -> Array:
        return np.asarray((X * X).sum(axis=1, keepdims=True) - 1.0)[:, idx]

    lo, hi = 0.0, 1e6  # the weighted projection onto the ball: x_i = w_i a_i / (w_i + lam), |x| = 1
    for _ in range(200):
        lam = 0.5 * (lo + hi)
        lo, hi = (lam, hi) if np.linalg.norm(w * a / (w + lam)) > 1.0 else (lo, lam)
    xs = w * a / (w + 0.5 * (lo + hi))
    out["wball"] = (zoframe.Constrained(f1, g1, m=1, x0=np.full(6, 0.1)), float(((xs - a) ** 2 * w).sum()), f1)

    A = rng.standard_normal((5, 5))
    Q = A.T @ A / 5 + 0.2 * np.eye(5)
    c = rng.standard_normal(5)

    def f2(X: Array) -> Array:
        return np.asarray(X @ c)

    def g2(X: Array, idx: Array) -> Array:
        return np.asarray(np.einsum("ki,ij,kj->k", X, Q, X)[:, None] - 1.0)[:, idx]

    out["linell"] = (zoframe.Constrained(f2, g2, m=1, x0=np.full(5, 0.05)),
                     -float(np.sqrt(c @ np.linalg.solve(Q, c))), f2)  # fmt: skip

    def f3(X: Array) -> Array:
        return np.asarray(-X[:, 0] * X[:, 1])

    def g3(X: Array, idx: Array) -> Array:
        return np.asarray((X[:, 0] ** 2 + 4.0 * X[:, 1] ** 2 - 8.0)[:, None])[:, idx]

    out["prodell"] = (zoframe.Constrained(f3, g3, m=1, x0=np.array([0.5, 0.5]), bounds=(0.0, np.inf)), -2.0, f3)

    def f4(X: Array) -> Array:
        return np.asarray((1.0 - X[:, 0]) ** 2 + 100.0 * (X[:, 1] - X[:, 0] ** 2) ** 2)

    def g4(X: Array, idx: Array) -> Array:
        return np.asarray(((X * X).sum(axis=1) - 1.0)[:, None])[:, idx]

    fs4 = _slsqp(lambda x: float(f4(x[None])[0]),
                 lambda x: np.array([-2 * (1 - x[0]) - 400 * x[0] * (x[1] - x[0] ** 2), 200 * (x[1] - x[0] ** 2)]),
                 np.array([0.7, 0.6]), [{"type": "ineq", "fun": lambda x: 1.0 - x @ x, "jac": lambda x: -2.0 * x}])
    out["rosdisk"] = (zoframe.Constrained(f4, g4, m=1, x0=np.array([-1.2, 1.0])), fs4, f4)

    def f5(X: Array) -> Array:
        return np.asarray((X**2 + X**4).sum(axis=1))

    def g5(X: Array, idx: Array) -> Array:
        return np.asarray((X[:, 0] - X[:, 1] - 0.5)[:, None])[:, idx]

    def h5(X: Array, idx: Array) -> Array:
        return np.asarray((X.sum(axis=1) - 4.0)[:, None])[:, idx]

    out["quartic"] = (zoframe.Constrained(f5, g5, m=1, x0=np.array([2.0, 0.5, 0.0, 1.5]), equality_fun=h5, m_eq=1),
                      8.0, f5)  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="1e-6,1e-4")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--solvers", default="adszog,dszog,cobyla")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    probs = problems()
    t0 = time.perf_counter()
    results: dict[str, Any] = {}
    for level in [float(v) for v in args.levels.split(",")]:
        for solver in [s.strip() for s in args.solvers.split(",") if s.strip()]:
            rows = []
            for name, (prob, f_star, f) in probs.items():
                d, m = int(prob.dim), int(prob.m) + int(getattr(prob, "m_eq", 0))
                for seed in range(args.seeds):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        try:
                            r = zoframe.minimize(noisy(prob, level, kind="relative", seed=seed), solver, rng=seed,
                                                 max_calls=100 * d * (1 + m), record_every=0, progress=False)  # fmt: skip
                            status = r.status.name
                        except RunFailedError as exc:
                            r, status = exc.result, "FAILED"
                    x = np.asarray(r.x, dtype=np.float64)
                    err = abs(float(f(x[None, :])[0]) - f_star) / max(1.0, abs(f_star)) if np.isfinite(x).all() \
                        else math.inf
                    viol = float(r.max_violation) if r.max_violation is not None else math.inf
                    within = err <= 10.0 * math.sqrt(level) and viol <= 1e-3
                    rows.append({"name": name, "seed": seed, "status": status, "err": err, "within": within,
                                 "claim": bool(r.success)})  # fmt: skip
                    if args.verbose:
                        print(json.dumps({"level": level, "solver": solver, **rows[-1]}))
            statuses: dict[str, int] = {}
            for row in rows:
                statuses[row["status"]] = statuses.get(row["status"], 0) + 1
            results.setdefault(f"{level:g}", {})[solver] = {
                "runs": len(rows),
                "within": sum(r["within"] for r in rows),
                "good": sum(r["within"] and r["status"] in ("CONVERGED", "NOISE_LIMITED") for r in rows),
                "false_floor": sum(r["status"] == "NOISE_LIMITED" and not r["within"] for r in rows),
                "false_claims": sum(r["claim"] and not r["err"] <= 1e-3 for r in rows),
                "misses": sorted(f"{r['name']}#s{r['seed']}:{r['status']}:{r['err']:.2g}" for r in rows
                                 if not (r["within"] and r["status"] in ("CONVERGED", "NOISE_LIMITED"))),
                "statuses": dict(sorted(statuses.items())),
            }  # fmt: skip
    out = {"benchmark": "noisy_small", "problems": sorted(probs), "seeds": args.seeds,
           "budget": "100 d full evaluations", "wall_seconds": round(time.perf_counter() - t0, 1),
           "python": platform.python_version(), "numpy": np.__version__, "scipy": scipy.__version__,
           "results": results}  # fmt: skip
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
