"""``adszog`` / ``dszog`` (defaults, with the precision phase) on many-constraint families, beside scipy
SLSQP with forward-difference gradients (``jac="2-point"``) and COBYLA called on the same black boxes.

Families (our own; ``m`` constraints, ``f*`` computed independently with exact gradients or a convex
solver):

* ``polytope``: projection of a far point onto ``{x : A x <= 1}``, ``A`` Gaussian, d = 20 (f*: cvxpy /
  Clarabel);
* ``fit``: one-sided least-squares fit of noisy data by a Chebyshev polynomial of ``d = 12`` coefficients,
  above the data at each of ``m`` grid points (semi-infinite convex QP; f*: cvxpy / Clarabel);
* ``rosenbrock``: Rosenbrock (d = 10) inside ``m`` random halfspaces that cut off (1, ..., 1) (f*: scipy
  SLSQP with the exact gradient and Jacobian from the same start: the local solution);
* ``balls``: logistic loss (d = 10, 200 samples) inside the intersection of ``m`` balls that all hold the ball
  ``|x| <= 0.2`` (f*: SLSQP with exact gradients).

Budget: ``100 d`` full evaluations (one full evaluation = the objective and all ``m`` constraints at one
point): ``max_calls = 100 d (1 + m)`` for zoframe, ``maxfun = 100 d`` for COBYLA (each call all ``m``
constraints); SLSQP gets ``maxiter = 100`` and counts its own evaluations. Every run has a wall-clock cap
(``--cap`` seconds; scipy runs in a forked process killed at the cap, which returns the best feasible point
it evaluated). Per run: relative error ``|f - f*| / max(1, |f*|)``, max violation over all ``m`` (exact),
seconds, peak traced memory (tracemalloc, MB; for scipy, measured in its process) and status; one final
JSON line.

    python benchmarks/many_constraints.py [--m 10000,100000] [--seeds 3] [--cap 120]
        [--families polytope,fit,rosenbrock,balls] [--solvers adszog,dszog,slsqp-2point,cobyla]

(``--m 1000000,10000000`` for the large sizes: SLSQP's dense m x d Jacobian needs 8 m d bytes.)
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
import json
import math
import multiprocessing as mp
import sys
import time
import tracemalloc
from typing import Any
import warnings

import cvxpy as cp
import numpy as np
from scipy import optimize

import zoframe


def _clarabel(objective: Any, constraints: list[Any]) -> float:
    prob = cp.Problem(cp.Minimize(objective), constraints)
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return float(prob.value)


def family(name: str, m: int, seed: int) -> dict[str, Any]:
    """``f(x)`` and ``g(x)`` (all ``m``) for points in rows, ``g_idx(X, idx)``, ``x0``, ``f*``."""
    rng = np.random.default_rng(1000 * seed + m % 997)
    if name == "polytope":
        d = 20
        A = rng.standard_normal((m, d))
        a = 5.0 * rng.standard_normal(d)
        f: Callable[[np.ndarray], np.ndarray] = lambda X: ((X - a) ** 2).sum(1)  # noqa: E731
        gi = lambda X, idx: X @ A[idx].T - 1.0  # noqa: E731
        x = cp.Variable(d)
        fs = _clarabel(cp.sum_squares(x - a), [A @ x <= 1.0])
        return {"d": d, "f": f, "gi": gi, "x0": np.zeros(d), "f_star": fs}
    if name == "fit":
        d = 12
        t = np.linspace(-1.0, 1.0, m)
        y = np.sin(3 * t) + 0.5 * np.cos(7 * t) + 0.05 * rng.standard_normal(m)
        Phi = np.polynomial.chebyshev.chebvander(t, d - 1)
        f = lambda X: ((X @ Phi.T - y) ** 2).mean(axis=1)  # noqa: E731
        gi = lambda X, idx: y[idx] - X @ Phi[idx].T  # noqa: E731
        c = cp.Variable(d)
        fs = _clarabel(cp.sum_squares(Phi @ c - y) / m, [Phi @ c >= y])
        return {"d": d, "f": f, "gi": gi, "x0": np.zeros(d), "f_star": fs}
    if name == "rosenbrock":
        d = 10
        D = rng.standard_normal((m, d))
        D /= np.linalg.norm(D, axis=1, keepdims=True)
        e = rng.uniform(1.5, 3.0, m)
        f = lambda X: (100.0 * (X[:, 1:] - X[:, :-1] ** 2) ** 2 + (1.0 - X[:, :-1]) ** 2).sum(axis=1)  # noqa: E731

        def grad(x: np.ndarray) -> np.ndarray:
            g = np.zeros_like(x)
            g[:-1] = -400.0 * x[:-1] * (x[1:] - x[:-1] ** 2) - 2.0 * (1.0 - x[:-1])
            g[1:] += 200.0 * (x[1:] - x[:-1] ** 2)
            return g

        gi = lambda X, idx: X @ D[idx].T - e[idx]  # noqa: E731
        ref = optimize.minimize(
            lambda x: float(f(x[None, :])[0]), np.zeros(d), jac=grad, method="SLSQP",
            constraints=[{"type": "ineq", "fun": lambda x: e - D @ x, "jac": lambda x: -D}],
            options={"ftol": 1e-15, "maxiter": 2000},
        )  # fmt: skip
        return {"d": d, "f": f, "gi": gi, "x0": np.zeros(d), "f_star": float(ref.fun)}
    if name == "balls":
        d, n = 10, 200
        Z = rng.standard_normal((n, d))
        lab = np.sign(Z @ rng.standard_normal(d) + 0.3 * rng.standard_normal(n))
        C = 0.3 * rng.standard_normal((m, d))
        r2 = (np.linalg.norm(C, axis=1) + rng.uniform(0.2, 1.0, m)) ** 2  # every ball holds the ball |x| <= 0.2

        def f(X: np.ndarray) -> np.ndarray:
            out: np.ndarray = np.logaddexp(0.0, -(X @ Z.T) * lab).mean(axis=1)
            return out

        def fgrad(x: np.ndarray) -> np.ndarray:
            s = -lab / (1.0 + np.exp((Z @ x) * lab))
            out: np.ndarray = (Z * s[:, None]).mean(axis=0)
            return out

        def gi(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
            out: np.ndarray = (X * X).sum(1)[:, None] - 2.0 * X @ C[idx].T + (C[idx] * C[idx]).sum(1) - r2[idx]
            return out

        ref = optimize.minimize(
            lambda x: float(f(x[None, :])[0]), np.zeros(d), jac=fgrad, method="SLSQP",
            constraints=[{"type": "ineq", "fun": lambda x: r2 - ((x - C) ** 2).sum(1), "jac": lambda x: -2.0 * (x - C)}],
            options={"ftol": 1e-15, "maxiter": 2000},
        )  # fmt: skip
        return {"d": d, "f": f, "gi": gi, "x0": np.zeros(d), "f_star": float(ref.fun)}
    raise SystemExit(f"unknown family {name!r}")


def _g_all(fam: dict[str, Any], x: np.ndarray, m: int, block: int = 1 << 18) -> float:
    """Max constraint value over all m (blocked, exact)."""
    out = -math.inf
    for lo in range(0, m, block):
        idx = np.arange(lo, min(m, lo + block))
        out = max(out, float(fam["gi"](x[None, :], idx).max()))
    return out


def run_zoframe(fam: dict[str, Any], m: int, solver: str, seed: int, cap: float) -> dict[str, Any]:
    d = fam["d"]
    prob = zoframe.Constrained(lambda X: fam["f"](X), fam["gi"], m=m, x0=fam["x0"])
    r = zoframe.minimize(prob, solver, rng=seed, max_calls=100 * d * (1 + m), max_time=cap, record_every=0)
    return {"x": r.x, "status": r.status.name, "success": bool(r.success), "evals": int(r.nfev)}


def _scipy_child(fam: dict[str, Any], m: int, method: str, shared: Any) -> None:
    """Runs in a forked process: scipy on the black boxes; the best feasible point seen, the evaluations and
    the peak traced memory go to ``shared`` after every constraint call (the parent may kill it at the cap)."""
    d = fam["d"]
    tracemalloc.start()
    idx_all = np.arange(m)
    best_f = [math.inf]
    shared[: d] = np.asarray(fam["x0"], dtype=float)

    def fun(x: np.ndarray) -> float:
        shared[d + 1] += 1
        return float(fam["f"](x[None, :])[0])

    def cons(x: np.ndarray) -> np.ndarray:
        shared[d + 1] += m
        g = fam["gi"](x[None, :], idx_all)[0]
        fx = float(fam["f"](x[None, :])[0])
        if g.max() <= 1e-8 and fx < best_f[0]:
            best_f[0] = fx
            shared[:d] = x
        shared[d + 2] = tracemalloc.get_traced_memory()[1] / 2**20
        return np.asarray(-g)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method == "slsqp-2point":
            res = optimize.minimize(fun, fam["x0"], jac="2-point", method="SLSQP",
                                    constraints=[{"type": "ineq", "fun": cons}], options={"maxiter": 100, "ftol": 1e-12})  # fmt: skip
        else:
            res = optimize.minimize(fun, fam["x0"], method="COBYLA", constraints=[{"type": "ineq", "fun": cons}],
                                    options={"maxiter": 100 * d, "tol": 1e-12})  # fmt: skip
    shared[:d] = res.x
    shared[d + 2] = tracemalloc.get_traced_memory()[1] / 2**20
    shared[d] = 1.0 if res.success else 2.0  # done: converged / not


def run_scipy(fam: dict[str, Any], m: int, method: str, cap: float) -> dict[str, Any]:
    """scipy in a forked child process, killed at the wall-clock cap (COBYLA's own linear algebra over m
    constraints cannot be interrupted from a callback); the capped result is the best feasible point seen."""
    d = fam["d"]
    shared = mp.get_context("fork").Array("d", d + 3, lock=False)
    child = mp.get_context("fork").Process(target=_scipy_child, args=(fam, m, method, shared))
    child.start()
    child.join(cap)
    if child.is_alive():
        child.terminate()
        child.join()
    state = shared[d]
    status = {1.0: "success", 2.0: "not converged"}.get(state, "wall-clock cap")
    return {"x": np.array(shared[:d]), "status": status, "success": status == "success", "evals": int(shared[d + 1]),
            "peak_mb": float(shared[d + 2])}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", default="10000,100000")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--cap", type=float, default=120.0)
    ap.add_argument("--families", default="polytope,fit,rosenbrock,balls")
    ap.add_argument("--solvers", default="adszog,dszog,slsqp-2point,cobyla")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    rows: list[dict[str, Any]] = []
    for m in [int(float(v)) for v in args.m.split(",")]:
        for fname in args.families.split(","):
            for seed in range(args.seeds):
                fam = family(fname, m, seed)
                for solver in args.solvers.split(","):
                    tracemalloc.start()
                    t0 = time.perf_counter()
                    if solver in ("adszog", "dszog"):
                        out = run_zoframe(fam, m, solver, seed, args.cap)
                    else:
                        out = run_scipy(fam, m, solver, args.cap)
                    sec = time.perf_counter() - t0
                    peak = max(tracemalloc.get_traced_memory()[1] / 2**20, float(out.get("peak_mb", 0.0)))
                    tracemalloc.stop()
                    x = np.asarray(out["x"], dtype=float)
                    fx = float(fam["f"](x[None, :])[0])
                    row = {
                        "family": fname, "m": m, "seed": seed, "solver": solver,
                        "rel_error": abs(fx - fam["f_star"]) / max(1.0, abs(fam["f_star"])),
                        "violation": max(0.0, _g_all(fam, x, m)), "seconds": round(sec, 3), "peak_mb": round(peak, 1),
                        "status": out["status"], "success": out["success"], "evals_full": out["evals"] / (1 + m),
                    }  # fmt: skip
                    rows.append(row)
                    if args.verbose:
                        print(json.dumps(row), file=sys.stderr, flush=True)
    summary: dict[str, Any] = {}
    for m in sorted({r["m"] for r in rows}):
        for fname in args.families.split(","):
            for solver in args.solvers.split(","):
                sel = [r for r in rows if r["m"] == m and r["family"] == fname and r["solver"] == solver]
                if not sel:
                    continue
                ok = [r["rel_error"] <= 1e-6 and r["violation"] <= 1e-8 for r in sel]
                summary[f"{fname}/m={m}/{solver}"] = {
                    "median_rel_error": float(np.median([r["rel_error"] for r in sel])),
                    "median_violation": float(np.median([r["violation"] for r in sel])),
                    "median_seconds": float(np.median([r["seconds"] for r in sel])),
                    "max_peak_mb": float(max(r["peak_mb"] for r in sel)),
                    "within_1e-6": f"{sum(ok)}/{len(sel)}",
                    "false_success": sum(1 for r, k in zip(sel, ok, strict=True) if r["success"] and not k),
                    "statuses": sorted({r["status"] for r in sel}),
                }
    print(json.dumps({"benchmark": "many_constraints", "seeds": args.seeds, "cap_seconds": args.cap, "results": summary}))


if __name__ == "__main__":
    main()
