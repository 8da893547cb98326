"""``adszog`` / ``dszog`` with their defaults against scipy's COBYLA and COBYQA (called directly) and
zoframe's ``slsqp-fd`` peer (SLSQP with forward-difference gradients, through the oracle) on
``constrained-small``. Any registered solver name other than ``cobyla`` / ``cobyqa`` runs through
``zoframe.minimize`` (so ``--solvers adszog,slsqp-fd,trust-constr-fd`` works).

Every solver gets the same budget of ``B = budget_per_dim * d`` *full evaluations* per problem, a
full evaluation being the objective and all ``m`` constraints at one point: zoframe runs get
``max_calls = B (1 + m)`` (its oracle counts one objective value or one constraint value at one
point as one call), scipy's methods ``B`` calls of their objective (each with all constraints).
Bounds go to zoframe as ``Constrained(..., bounds=...)`` (kept by projection) and to scipy as
``bounds=``. The zoframe solvers run with their defaults: no parameter is set per problem.

A run *solves* its problem when the returned point has relative error
``|f(x) - f*| / max(|f*|, 1) <= 1e-2`` and max violation (constraints and bounds)
``<= 1e-4``. Per solver the script reports the success rate (the median over seeds of the
fraction of problems solved; scipy's methods are deterministic, so their seeds agree), and the
medians over problems of the per-problem medians over seeds of the relative error, the violation
and the evaluations used (in full evaluations). For zoframe runs also: how many runs ended with
status ``DIVERGED`` (flagged), how many ended non-finite or beyond ``1e6`` relative error without
that flag (``unflagged_divergence``, the figure that must be 0), how many claimed ``success=True`` away
from the published optimum (``claims_not_at_f_star``) and, of those, how many are not a local minimum either
(``false_success``: the point is checked with exact derivatives, :func:`claim_check`: the KKT residual and the
curvature of the Lagrangian along the active set; a claim at another local minimum of a nonconvex problem is a true
claim, listed in ``claims_at_another_local_minimum``), the runs within ``1e-6`` of ``f*`` without ``success``
(``within_1e-6_without_success`` of ``within_1e-6_runs``), the ``FAILED`` runs within ``1e-4`` of ``f*`` and the
statuses.

Prints one final JSON line. ``--verbose`` adds one line per problem on stderr.

The same budgets through the benchmark lab (every solver through the counting oracle, the lab's own
test of a solved run: ``f(x) <= f_L + tau (f(x0) - f_L)`` and max violation ``<= 1e-3``)::

    zoframe bench constrained-small --solvers adszog,dszog,cobyla,cobyqa,slsqp-fd --seeds 3 \
        --budget 100 --budget-unit full-per-dim

(``--budget-unit full-per-dim``: ``budget * d`` full evaluations, ``budget * d * (1 + m)`` oracle calls,
as here).

    python benchmarks/constrained_suite.py [--budget-per-dim 2000] [--seeds 3] [--jobs 2]
        [--solvers adszog,dszog,cobyla,cobyqa,slsqp-fd] [--only hs010,hs011]
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor
import json
import math
import sys
from typing import Any
import warnings

import numpy as np
import scipy
from scipy import optimize

import zoframe
from zoframe.driver import RunFailedError
from zoframe_constrained.suite import TestProblem, build, instances

ZOFRAME = ("adszog", "dszog", "slsqp-fd")  # the default zoframe runs; any name not in SCIPY runs through zoframe
SCIPY = ("cobyla", "cobyqa")  # scipy called directly
REL_TOL = 1e-2
VIOL_TOL = 1e-4


def _bounds(tp: TestProblem) -> tuple[np.ndarray, np.ndarray]:
    lo = np.full(tp.dim, -np.inf) if tp.lower is None else np.asarray(tp.lower, dtype=float)
    hi = np.full(tp.dim, np.inf) if tp.upper is None else np.asarray(tp.upper, dtype=float)
    return lo, hi


def score(tp: TestProblem, x: np.ndarray) -> tuple[float, float]:
    """``(relative error, max violation)`` of ``x``: constraints and bounds, inf if not finite."""
    if not np.all(np.isfinite(x)):
        return math.inf, math.inf
    with np.errstate(all="ignore"):
        f = float(tp.f(x[None, :])[0])
        g = tp.g(x[None, :])[0]
    lo, hi = _bounds(tp)
    viol = max(float(np.max(g)), float(np.max(lo - x)), float(np.max(x - hi)), 0.0)
    rel = abs(f - tp.f_star) / max(abs(tp.f_star), 1.0)
    return (rel if math.isfinite(rel) else math.inf), (viol if math.isfinite(viol) else math.inf)


def _jacobian(fun: Any, x: np.ndarray) -> np.ndarray:
    """The derivatives of ``fun`` ((k, d) points -> (k,) or (k, m) values) at ``x``, ``(d,)`` or ``(d, m)``: by the
    complex step (``Im f(x + i 1e-30 e_j) / 1e-30``, exact to rounding) where the function takes complex points,
    else by central differences extrapolated twice (Richardson; about 1e-10 relative)."""
    d = x.shape[0]
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            v = fun(np.repeat(x[None, :].astype(complex), d, axis=0) + 1j * 1e-30 * np.eye(d))
        if np.iscomplexobj(v):
            out = np.asarray(v).imag / 1e-30
            if np.all(np.isfinite(out)):
                return out
    except Exception:  # a function that refuses complex points: differences
        pass
    s = 1e-2 * np.maximum(1.0, np.abs(x))

    def central(h: np.ndarray) -> np.ndarray:
        E = np.diag(h)
        up, down = np.asarray(fun(x + E)), np.asarray(fun(x - E))
        return (up - down) / (2.0 * h.reshape((-1,) + (1,) * (up.ndim - 1)))

    d1, d2, d3 = central(s), central(s / 2), central(s / 4)
    r1, r2 = (4 * d2 - d1) / 3, (4 * d3 - d2) / 3
    return np.asarray((16 * r2 - r1) / 15)


#: a constraint or bound within this distance (times max(1, |x|_inf)) of active is active in :func:`claim_check`
_ACTIVE = 1e-6


def claim_check(tp: TestProblem, x: np.ndarray) -> dict[str, Any]:
    """Whether a claimed point that is not the published optimum is a local minimum of another kind: the KKT residual
    from exact derivatives (multipliers by non-negative least squares over the constraints and bounds within
    ``1e-6 s`` of active, ``s = max(1, |x|_inf)``: the feasibility tolerance the runs are held to, so that a
    constraint at ``-7e-8`` of a claimed point counts as active), and the second-order test, the least eigenvalue of the
    Lagrangian's Hessian (central differences of the exact gradients) on the null space of the active rows that carry
    a multiplier (none: a vertex, a strict local minimum under strict complementarity). ``verdict``: ``"local
    minimum"`` (residual <= 1e-6 of max(1, |grad f|) and the eigenvalue >= -1e-6 of the Hessian's size), ``"not a
    minimum"`` (KKT but a negative curvature), ``"not KKT"``."""
    from scipy.optimize import nnls

    d = x.shape[0]
    lo, hi = _bounds(tp)
    scale = max(1.0, float(np.abs(x).max()))
    gf = _jacobian(tp.f, x)
    gv = tp.g(x[None, :])[0]
    J = _jacobian(tp.g, x).T  # (m, d)
    eye = np.eye(d)
    band = _ACTIVE * scale
    rows = [J[j] for j in range(gv.shape[0]) if gv[j] >= -band * max(float(np.linalg.norm(J[j])), 1e-300)]
    rows += [-eye[i] for i in range(d) if np.isfinite(lo[i]) and x[i] - lo[i] <= band]
    rows += [eye[i] for i in range(d) if np.isfinite(hi[i]) and hi[i] - x[i] <= band]
    A = np.asarray(rows).reshape(-1, d)
    lam = nnls(A.T, -gf, maxiter=100 * max(A.shape[0], d))[0] if A.shape[0] else np.zeros(0)
    resid = float(np.abs(gf + A.T @ lam).max()) / max(1.0, float(np.abs(gf).max()))
    strong = A[lam > 1e-8 * max(float(lam.max(initial=0.0)), 1e-300)] if A.shape[0] else A
    rank = int(np.linalg.matrix_rank(strong)) if strong.shape[0] else 0
    eig = math.inf
    if rank < d:  # the reduced Hessian on the null space of the strongly active rows
        gcon = [j for j in range(gv.shape[0]) if gv[j] >= -band * max(float(np.linalg.norm(J[j])), 1e-300)]
        lam_g = lam[: len(gcon)]

        def grad_l(y: np.ndarray) -> np.ndarray:
            gl = _jacobian(tp.f, y)
            if gcon:
                gl = gl + _jacobian(tp.g, y)[:, gcon] @ lam_g
            return np.asarray(gl)

        h = 1e-5 * np.maximum(1.0, np.abs(x))
        H = np.array([(grad_l(x + h[i] * eye[i]) - grad_l(x - h[i] * eye[i])) / (2 * h[i]) for i in range(d)])
        H = 0.5 * (H + H.T)
        Z = np.linalg.svd(strong)[2][rank:].T if strong.shape[0] else np.eye(d)
        eig = float(np.linalg.eigvalsh(Z.T @ H @ Z).min()) / max(float(np.abs(H).max()), 1e-300)
    ok = resid <= 1e-6
    verdict = "not KKT" if not ok else ("local minimum" if eig >= -1e-6 else "not a minimum")
    return {"kkt_exact": resid, "reduced_min_eig": eig, "active": int(A.shape[0]), "rank": rank, "verdict": verdict}


def run_zoframe(tp: TestProblem, solver: str, seed: int, budget: int) -> dict[str, Any]:
    m = tp.m
    status, success, error = "", False, None
    try:
        res = zoframe.minimize(tp.problem(), solver, rng=seed, max_calls=budget * (1 + m), record_every=0)
    except RunFailedError as exc:
        res, error = exc.result, str(exc)
    x = np.asarray(res.x, dtype=float)
    status, success = res.status.name, bool(res.success)
    rel, viol = score(tp, x)
    return {
        "rel": rel, "viol": viol, "evals": res.nfev / (1 + m), "status": status, "success_claim": success,
        "error": error, "message": res.message, "x": x.tolist(),
    }  # fmt: skip


def run_scipy(tp: TestProblem, method: str, budget: int) -> dict[str, Any]:
    lo, hi = _bounds(tp)
    count = [0]
    f, g = tp.f, tp.g

    def fun(x: np.ndarray) -> float:
        count[0] += 1
        with np.errstate(all="ignore"):
            v = float(f(np.asarray(x, dtype=float)[None, :])[0])
        return v if math.isfinite(v) else 1e300

    def cons(x: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            out = -g(np.asarray(x, dtype=float)[None, :])[0]
        return np.where(np.isfinite(out), out, -1e300)

    bounds = optimize.Bounds(lo, hi) if (np.isfinite(lo).any() or np.isfinite(hi).any()) else None
    opts: dict[str, Any] = {"maxiter": budget} if method == "cobyla" else {"maxfev": budget}
    error = None
    x = np.asarray(tp.x0, dtype=float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            r = optimize.minimize(
                fun, x, method=method.upper(), bounds=bounds, constraints=[{"type": "ineq", "fun": cons}], options=opts
            )
            x = np.asarray(r.x, dtype=float)
        except Exception as exc:  # a failing baseline is a failed run, not a failed benchmark
            error = f"{type(exc).__name__}: {exc}"
    rel, viol = score(tp, x)
    return {"rel": rel, "viol": viol, "evals": float(count[0]), "status": "", "success_claim": False, "error": error}


def job(args: tuple[str, str, int, int, int]) -> dict[str, Any]:
    name, solver, seed, budget_per_dim, suite_seed = args
    tp = build(name, seed=suite_seed)
    budget = budget_per_dim * tp.dim
    row = run_scipy(tp, solver, budget) if solver in SCIPY else run_zoframe(tp, solver, seed, budget)
    row.update(problem=name, solver=solver, seed=seed)
    row["solved"] = bool(row["rel"] <= REL_TOL and row["viol"] <= VIOL_TOL)
    if row["success_claim"] and not row["solved"]:  # a claim at another point: is it a local minimum of its own?
        row["claim_check"] = claim_check(tp, np.asarray(row["x"], dtype=float))
    row.pop("x", None)
    return row


def summarise(rows: list[dict[str, Any]], solver: str, seeds: int) -> dict[str, Any]:
    mine = [r for r in rows if r["solver"] == solver]
    probs = sorted({r["problem"] for r in mine})
    rates = []
    for s in range(seeds):
        by = [r for r in mine if r["seed"] == s]
        rates.append(sum(r["solved"] for r in by) / max(len(by), 1))

    def med(key: str) -> float:
        per = [float(np.median([r[key] for r in mine if r["problem"] == p])) for p in probs]
        return float(np.median(per)) if per else math.nan

    solved_median = sum(
        float(np.median([float(r["solved"]) for r in mine if r["problem"] == p])) >= 0.5 for p in probs
    )  # fmt: skip
    out: dict[str, Any] = {
        "success_rate": float(np.median(rates)),
        "solved_problems_median_over_seeds": int(solved_median),
        "median_rel_error": med("rel"),
        "median_violation": med("viol"),
        "median_evaluations": med("evals"),
    }
    if solver not in SCIPY:
        bad = [r for r in mine if not (r["rel"] <= 1e6 and math.isfinite(r["viol"]))]
        out["diverged_flagged"] = sum(r["status"] == "DIVERGED" for r in mine)
        out["unflagged_divergence"] = sum(r["status"] != "DIVERGED" for r in bad)
        other = [r for r in mine if r["success_claim"] and not r["solved"]]
        local = [r for r in other if r.get("claim_check", {}).get("verdict") == "local minimum"]
        out["claims_not_at_f_star"] = len(other)
        out["claims_at_another_local_minimum"] = sorted({r["problem"] for r in local})
        out["false_success"] = len(other) - len(local)  # a claim at a point that is no local minimum (exact derivatives)
        out["false_success_examples"] = sorted({f"{r['problem']}#s{r['seed']}" for r in other if r not in local})[:6]
        out["success_claimed"] = sum(bool(r["success_claim"]) for r in mine)
        near = [r for r in mine if r["rel"] <= 1e-6 and r["viol"] <= VIOL_TOL]
        out["within_1e-6_without_success"] = sum(not r["success_claim"] for r in near)
        out["within_1e-6_runs"] = len(near)
        out["failed_within_1e-4"] = sum(r["status"] == "FAILED" and r["rel"] <= 1e-4 for r in mine)
        out["statuses"] = {k: sum(r["status"] == k for r in mine) for k in sorted({r["status"] for r in mine})}
        out["errors"] = sum(r["error"] is not None for r in mine)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget-per-dim", type=int, default=2000)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--solvers", default=",".join(ZOFRAME + SCIPY))
    ap.add_argument("--only", default="", help="comma-separated problem names (default: the whole suite)")
    ap.add_argument("--suite-seed", type=int, default=0, help="seed of the random convex instances")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    names = [i.name for i in instances(seed=args.suite_seed)]
    if args.only:
        keep = set(args.only.split(","))
        names = [n for n in names if n in keep]
    solvers = [s for s in args.solvers.split(",") if s]
    tasks = []
    for s in solvers:
        seeds = range(1) if s in SCIPY else range(args.seeds)  # scipy's methods are deterministic
        tasks += [(n, s, k, args.budget_per_dim, args.suite_seed) for n in names for k in seeds]
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as ex:
            rows = list(ex.map(job, tasks, chunksize=4))
    else:
        rows = [job(t) for t in tasks]
    for r in list(rows):  # deterministic methods: the one run stands for every seed
        if r["solver"] in SCIPY:
            rows += [{**r, "seed": k} for k in range(1, args.seeds)]
    if args.verbose:
        for r in sorted(rows, key=lambda r: (r["problem"], r["solver"], r["seed"])):
            print(
                f"{r['problem']:8s} {r['solver']:7s} seed={r['seed']} solved={int(r['solved'])} rel={r['rel']:.2e} "
                f"viol={r['viol']:.2e} evals={r['evals']:.0f} {r['status']} claim={int(r['success_claim'])} "
                f"{(r.get('message') or r.get('error') or '')[:110]}",
                file=sys.stderr,
            )
    out: dict[str, Any] = {
        "suite": "constrained-small", "problems": len(names), "budget_per_dim": args.budget_per_dim,
        "seeds": args.seeds, "numpy": np.__version__, "scipy": scipy.__version__,
    }  # fmt: skip
    for s in solvers:
        out[s] = summarise(rows, s, args.seeds)
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
