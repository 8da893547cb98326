"""Calibration of the stationarity certificate behind ``Result.success`` against exact gradients and known optima.

Own problems, each with exact derivatives and a known optimum (closed form, or scipy's HiGHS / SLSQP
with exact gradients): small constrained problems (a disk, a random polytope projection), a
semi-infinite one-sided polynomial fit on a grid of ``m = 1e4`` points (an LP), a nonconvex problem
with two minima and a saddle, a two-variable KKT point that is a maximum along the boundary, a
minimax and a composite (ADMM) problem. For each case the certificate
(:func:`zoframe.certificate.certify`, default tolerance) is evaluated

* at the optimum (and at the other local minima),
* at feasible points ``1e-2 * s`` away from it (``s = max(1, |x*|_inf)``), along the boundary and inward,
* at non-minimising KKT points (the saddle, the boundary maximum),
* at the final points of short runs of the solvers that claim convergence (constrained: ``cobyla``,
  ``adszog``, ``dszog``; unconstrained: ``nelder-mead``, ``powell``),

and compared with the same test computed from EXACT gradients and curvature (the ground truth):
a *false claim* is a certified point the exact test refuses (or a convex problem's certified point
more than 1e-2 from f*), a *missed certification* a point the exact test accepts that the
certificate refuses. Also reported: runs that solved their problem (relative objective error
``<= 1e-2``, feasible) and were refused, and the certificate's cost next to a default run's budget
at ``m = 1e4``. Prints ONE final line of JSON::

    python benchmarks/certificate_calibration.py            # about a minute on 2 cores
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
import json
import math
import time
from typing import Any
import warnings

import numpy as np

import zoframe
from zoframe.certificate import DEFAULT_TOL, certify
from zoframe.oracle import CountingOracle

Array = np.ndarray


@dataclass
class Case:
    """A problem with exact derivatives: ``f``, ``grad``, ``hdiag``; constraints ``g(x) <= 0`` (all m) and ``jac``."""

    name: str
    problem: Any
    f: Callable[[Array], float]
    grad: Callable[[Array], Array]
    hdiag: Callable[[Array], Array]
    x_star: Array
    f_star: float
    convex: bool
    g: Callable[[Array], Array] | None = None
    jac: Callable[[Array], Array] | None = None
    hess_l: Callable[[Array, Array], Array] | None = None  # Hessian of the Lagrangian at (x, multipliers)
    good: list[Array] = field(default_factory=list)  # other local minima
    bad: list[Array] = field(default_factory=list)  # KKT points that are not minima
    near: list[Array] = field(default_factory=list)  # feasible points 1e-2 away
    solvers: tuple[str, ...] = ()


def exact_test(case: Case, x: Array, tol: float, feas_tol: float = 1e-3) -> tuple[bool, float]:
    """The certificate's test with exact derivatives (all constraints, the same band and
    complementarity rows, the same references, global and per coordinate) plus the exact second-order condition on the tangent
    space of the constraints carrying a multiplier."""
    from scipy.optimize import nnls

    d = x.shape[0]
    s = max(1.0, float(np.abs(x).max()))
    gf = case.grad(x)
    ref = max(float(np.linalg.norm(gf)), s * float(np.abs(case.hdiag(x)).max()))
    if case.g is None or case.jac is None:
        r = float(np.linalg.norm(gf))
        lam = np.zeros(0)
        J = np.zeros((0, d))
        rv = gf
    else:
        gv = case.g(x)
        if float(gv.max()) > feas_tol:
            return False, math.inf
        Jall = case.jac(x)
        dist = np.where(gv >= 0, 0.0, -gv / np.maximum(np.linalg.norm(Jall, axis=1), 1e-300))
        near = np.flatnonzero(dist <= 10 * tol * s)
        if near.shape[0] > 256:  # the 256 nearest by exact distance (farther ones only add complementarity cost)
            near = np.sort(near[np.argsort(dist[near], kind="stable")[:256]])
        J = Jall[near]
        lam = np.zeros(0)
        if near.shape[0]:  # (scipy's nnls must not be called with no columns: it aborts the process)
            M = np.vstack([J.T, np.diag(gv[near] / s)])
            lam, _ = nnls(M, np.concatenate([-gf, np.zeros(near.shape[0])]), maxiter=50 * max(M.shape))
        rv = gf + J.T @ lam
        r = float(np.sqrt(rv @ rv + np.sum((lam * gv[near] / s) ** 2)))
    rel = r / ref if ref > 0 else (0.0 if r == 0 else math.inf)
    # and coordinate by coordinate: each residual against its own coordinate's gradient, forces, curvature
    force = np.abs(J.T) @ lam if J.shape[0] else np.zeros(d)
    refk = np.maximum.reduce([np.abs(gf), force, np.maximum(1.0, np.abs(x)) * np.abs(case.hdiag(x))])
    num = np.abs(rv)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = max(rel, float(np.where(num == 0, 0.0, np.where(refk > 0, num / np.where(refk > 0, refk, 1.0), math.inf)).max()))
    if not rel <= tol:
        return False, rel
    if case.hess_l is not None:  # second order: the Lagrangian's curvature on the tangent space
        full = np.zeros(0 if case.g is None else case.g(x).shape[0])
        if J.shape[0]:
            full[near] = lam
            strong = lam > 1e-6 * max(float(lam.max()), 1e-300)
            Js = J[strong]
        else:
            Js = np.zeros((0, d))
        H = case.hess_l(x, full)
        if Js.shape[0]:
            _, sv, vt = np.linalg.svd(Js)
            Z = vt[int(np.sum(sv > 1e-10 * sv.max())) :].T
        else:
            Z = np.eye(d)
        if Z.shape[1] and float(np.linalg.eigvalsh(Z.T @ H @ Z).min()) < -1e-2 * ref / s:
            return False, rel
    return True, rel


# ---------------------------------------------------------------------------------------------- cases
def disk_case() -> Case:
    c = np.array([1.0, 2.0, -0.5])
    xs = -c / np.linalg.norm(c)
    prob = zoframe.Constrained(
        lambda X: X @ c, lambda X, idx: ((X**2).sum(axis=1) - 1.0)[:, None] + 0.0 * idx[None, :], m=1,
        x0=np.zeros(3), name="disk-lp",
    )  # fmt: skip
    u = np.array([2.0, -1.0, 0.0]) / math.sqrt(5.0)  # tangent at x*
    along = np.cos(1e-2) * xs + np.sin(1e-2) * u
    return Case(
        "disk-lp", prob, lambda x: float(c @ x), lambda x: c, lambda x: np.zeros(3), xs, float(c @ xs), True,
        g=lambda x: np.array([x @ x - 1.0]), jac=lambda x: (2 * x)[None, :],
        hess_l=lambda x, lam: 2.0 * float(lam[0]) * np.eye(3),
        near=[along, xs * (1 - 1e-2)], solvers=("cobyla", "adszog", "dszog"),
    )  # fmt: skip


def polytope_case(seed: int = 0) -> Case:
    """Projection of p onto {D x <= e}: a convex QP solved by SLSQP with exact gradients."""
    from scipy.optimize import minimize as sp_min

    rng = np.random.default_rng(seed)
    d, m = 5, 20
    D = rng.standard_normal((m, d))
    D /= np.linalg.norm(D, axis=1, keepdims=True)
    e = np.full(m, 1.0)
    p = 3.0 * rng.standard_normal(d)
    res = sp_min(lambda x: float((x - p) @ (x - p)), np.zeros(d), jac=lambda x: 2 * (x - p), method="SLSQP",
                 constraints=[{"type": "ineq", "fun": lambda x: e - D @ x, "jac": lambda x: -D}],
                 options={"ftol": 1e-15, "maxiter": 1000})  # fmt: skip
    xs = np.asarray(res.x)
    prob = zoframe.Constrained(lambda X: ((X - p) ** 2).sum(axis=1), lambda X, idx: X @ D[idx].T - e[idx], m=m,
                               x0=np.zeros(d), name="polytope-projection")  # fmt: skip
    act = np.flatnonzero(D @ xs - e > -1e-8)
    near = []
    # along the active face (null space of the active rows), then back inside; and inward
    _, sv, vt = np.linalg.svd(D[act]) if act.size else (None, np.zeros(0), np.eye(d))
    null = vt[int(np.sum(sv > 1e-10)) :]
    if null.shape[0]:
        y = xs + 1e-2 * max(1.0, float(np.abs(xs).max())) * null[0]
        y -= max(0.0, float((D @ y - e).max())) * D[act].mean(axis=0) / max(float(np.linalg.norm(D[act].mean(axis=0))) ** 2, 1e-12)
        near.append(y)
    near.append(xs - 1e-2 * max(1.0, float(np.abs(xs).max())) * D[act].sum(axis=0) / max(float(np.linalg.norm(D[act].sum(axis=0))), 1e-12))
    return Case(
        "polytope-projection", prob, lambda x: float((x - p) @ (x - p)), lambda x: 2 * (x - p),
        lambda x: np.full(d, 2.0), xs, float((xs - p) @ (xs - p)), True, g=lambda x: D @ x - e, jac=lambda x: D,
        hess_l=lambda x, lam: 2.0 * np.eye(d), near=near, solvers=("cobyla", "adszog", "dszog"),
    )  # fmt: skip


def semi_infinite_case(m: int = 10_000, d: int = 6) -> Case:
    from scipy.optimize import linprog

    t = np.linspace(-1.0, 1.0, m)
    V = np.vander(t, d, increasing=True)
    y = np.exp(t) * np.sin(3.0 * t)
    k = np.arange(d)
    c = np.where(k % 2 == 0, 2.0 / (k + 1), 0.0)
    res = linprog(c, A_ub=-V, b_ub=-y, bounds=[(None, None)] * d, method="highs")
    xs = np.asarray(res.x)
    xs[0] += max(0.0, float((y - V @ xs).max()))
    near = []
    for j in (1, 2):
        z = xs.copy()
        z[j] += 1e-2 * max(1.0, float(np.abs(xs).max()))
        z[0] += max(0.0, float((y - V @ z).max()))
        near.append(z)
    x0 = xs.copy()
    x0[0] += 1.0
    prob = zoframe.Constrained(lambda X: X @ c, lambda X, idx: y[idx][None, :] - X @ V[idx].T, m=m, x0=x0,
                               name="semi-infinite-fit")  # fmt: skip
    return Case(
        "semi-infinite-fit", prob, lambda x: float(c @ x), lambda x: c,
        lambda x: np.zeros(d), xs, float(c @ xs), True, g=lambda x: y - V @ x, jac=lambda x: -V,
        hess_l=lambda x, lam: np.zeros((d, d)), near=near, solvers=("adszog",),
    )  # fmt: skip


def two_minima_case() -> Case:
    """``(x0^2 - 1)^2 + x1^2``: minima (+-1, 0), a saddle at 0 (unconstrained, nonconvex)."""
    prob = zoframe.FiniteSum(lambda X: (X[:, 0] ** 2 - 1.0) ** 2 + X[:, 1] ** 2, x0=np.array([0.3, 0.8]),
                             name="two-minima")  # fmt: skip
    return Case(
        "two-minima", prob, lambda x: float((x[0] ** 2 - 1) ** 2 + x[1] ** 2),
        lambda x: np.array([4 * x[0] * (x[0] ** 2 - 1), 2 * x[1]]),
        lambda x: np.array([12 * x[0] ** 2 - 4, 2.0]), np.array([1.0, 0.0]), 0.0, False,
        hess_l=lambda x, lam: np.diag([12 * x[0] ** 2 - 4, 2.0]),
        good=[np.array([-1.0, 0.0])], bad=[np.zeros(2)], near=[np.array([1.01, 0.0]), np.array([1.0, 0.01])],
        solvers=("nelder-mead", "powell"),
    )  # fmt: skip


def boundary_max_case() -> Case:
    """``min x1`` s.t. ``x0^2 + x1^2 >= 1`` and ``x1 >= -2``: (0, 1) is a KKT point that is a maximum
    along the circle; the minimum is on ``x1 = -2``."""
    prob = zoframe.Constrained(
        lambda X: X[:, 1],
        lambda X, idx: np.stack([1.0 - (X**2).sum(axis=1), -2.0 - X[:, 1]], axis=1)[:, idx], m=2,
        x0=np.array([0.5, 2.0]), name="boundary-max",
    )  # fmt: skip
    return Case(
        "boundary-max", prob, lambda x: float(x[1]), lambda x: np.array([0.0, 1.0]), lambda x: np.zeros(2),
        np.array([0.0, -2.0]), -2.0, False, g=lambda x: np.array([1.0 - x @ x, -2.0 - x[1]]),
        jac=lambda x: np.array([-2 * x, [0.0, -1.0]]),
        hess_l=lambda x, lam: -2.0 * float(lam[0]) * np.eye(2), bad=[np.array([0.0, 1.0])],
        near=[np.array([0.0, -1.99])], solvers=("cobyla", "adszog", "dszog"),
    )  # fmt: skip


def minimax_points() -> list[tuple[str, bool, bool]]:
    """``F = x'x/2 + x'Cy - y'y`` with ``y`` in a box containing the saddle point 0: (name, exact, certified).

    The minimax certificate is a statement about ``x`` (stationarity of ``Phi(x) = max_y F(x, y)``): it finds
    ``y*(x)`` itself, so the saddle's ``x`` with a run's ``y`` 1e-2 away is a true claim (the message gives the
    distance of that ``y`` from ``y*``)."""
    rng = np.random.default_rng(3)
    C = rng.standard_normal((3, 2))
    prob = zoframe.Minimax(lambda X, Y: 0.5 * (X**2).sum(1) + np.einsum("ki,ij,kj->k", X, C, Y) - (Y**2).sum(1),
                           x0=np.ones(3), y0=np.ones(2), y_set=zoframe.sets.Box(2, -1.0, 1.0))  # fmt: skip
    o = CountingOracle(prob)
    out = []
    for name, x, y, truth in (("saddle", np.zeros(3), np.zeros(2), True),
                              ("x 1e-2 away", np.full(3, 1e-2 / math.sqrt(3)), np.zeros(2), False),
                              ("x* with y 1e-2 away", np.zeros(3), np.full(2, 1e-2 / math.sqrt(2)), True)):  # fmt: skip
        out.append((name, truth, certify(o, x, outputs={"y": y}).passed))
    return out


def composite_points() -> list[tuple[str, bool, bool]]:
    """``min |x - a|^2 + mu |y|_1`` s.t. ``x - y = 0``: ``x* = soft(a, mu / 2)``, ``lam = 2 (x* - a)``."""
    a = np.array([1.0, -0.1, 0.5])
    mu = 0.4
    prob = zoframe.Composite(lambda X: ((X - a) ** 2).sum(axis=1), x0=np.zeros(3), A=np.eye(3), B=[-np.eye(3)],
                             c=np.zeros(3), penalties=[zoframe.penalties.L1(mu)], y0=[np.zeros(3)])  # fmt: skip
    xs = np.sign(a) * np.maximum(np.abs(a) - mu / 2, 0.0)
    o = CountingOracle(prob)
    out = []
    for name, x, truth in (("optimum", xs, True), ("1e-2 away", xs + np.array([1e-2, 0, 0]), False)):
        out.append((name, truth, certify(o, x, outputs={"y0": x, "lam": 2 * (x - a)}).passed))
    return out


# ---------------------------------------------------------------------------------------------- main
def evaluate(case: Case, tol: float, runs: bool, seeds: int) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    pts = [("optimum", case.x_star)] + [("local min", x) for x in case.good]
    pts += [("not a minimum", x) for x in case.bad] + [("1e-2 away", x) for x in case.near]
    for label, x in pts:
        c = certify(CountingOracle(case.problem), x, tol=tol)
        truth, rel = exact_test(case, x, tol)
        rows.append({"point": label, "certified": c.passed, "exact": truth, "residual": c.residual,
                     "exact_residual": rel, "evaluations": c.evaluations, "cap_hit": c.cap_hit})  # fmt: skip
    run_rows: list[dict[str, Any]] = []
    if runs:
        m = int(getattr(case.problem, "m", 0))
        for solver in case.solvers:
            for seed in range(seeds):
                budget = 2000 * case.problem.dim * (1 + min(m, 50))
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    r = zoframe.minimize(case.problem, solver, rng=seed, max_calls=budget, record_every=0, certify_tol=tol)
                x = np.asarray(r.x)
                truth, rel = exact_test(case, x, tol)
                feas = case.g is None or float(case.g(x).max()) <= 1e-3
                relerr = abs(case.f(x) - case.f_star) / max(1.0, abs(case.f_star))
                run_rows.append({"solver": solver, "seed": seed, "status": r.status.name, "success": r.success,
                                 "exact": truth, "residual": None if r.certificate is None else r.certificate["residual"],
                                 "exact_residual": rel, "relerr": relerr, "feasible": feas,
                                 "certificate_evaluations": None if r.certificate is None else int(r.certificate["evaluations"]),
                                 "nfev": r.nfev})  # fmt: skip
    every = rows + [r for r in run_rows if r["status"] == "CONVERGED"]
    claims = [r for r in every if r.get("certified", r.get("success"))]

    def false_claim(r: dict[str, Any]) -> bool:
        if not r["exact"]:
            return True
        return bool(case.convex and "relerr" in r and r["relerr"] > 1e-2)

    return {
        "points": rows,
        "runs": run_rows,
        "claims": len(claims),
        "false_claims": sum(false_claim(r) for r in claims),
        "true_claims": sum(not false_claim(r) for r in claims),
        "missed": sum(1 for r in every if r["exact"] and not r.get("certified", r.get("success"))),
        "exact_accepts": sum(1 for r in every if r["exact"]),
        "solved_runs": sum(1 for r in run_rows if r["relerr"] <= 1e-2 and r["feasible"]),
        "solved_runs_refused": sum(
            1 for r in run_rows if r["relerr"] <= 1e-2 and r["feasible"] and r["status"] == "CONVERGED" and not r["success"]
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--tol", type=float, default=DEFAULT_TOL, help="the certificate's tolerance")
    ap.add_argument("--seeds", type=int, default=3, help="seeds of the solver runs")
    ap.add_argument("--no-runs", action="store_true", help="only the fixed points, no solver runs")
    args = ap.parse_args()
    t0 = time.perf_counter()
    cases = [disk_case(), polytope_case(0), polytope_case(1), semi_infinite_case(), two_minima_case(), boundary_max_case()]
    out: dict[str, Any] = {"tol": args.tol, "cases": {}}
    for case in cases:
        out["cases"][case.name if case.name not in out["cases"] else f"{case.name}-2"] = evaluate(
            case, args.tol, not args.no_runs, args.seeds
        )
    for name, pts in (("minimax", minimax_points()), ("composite", composite_points())):
        out["cases"][name] = {
            "points": [{"point": p, "exact": t, "certified": c} for p, t, c in pts],
            "claims": sum(c for _, _, c in pts), "false_claims": sum(c and not t for _, t, c in pts),
            "true_claims": sum(c and t for _, t, c in pts), "missed": sum(t and not c for _, t, c in pts),
            "exact_accepts": sum(t for _, t, _ in pts), "solved_runs": 0, "solved_runs_refused": 0,
        }  # fmt: skip
    si = semi_infinite_case()
    c = certify(CountingOracle(si.problem), si.x_star)
    default_budget = 2000 * si.problem.dim * (1 + si.problem.m)  # the constrained suite's budget rule
    out["cost_at_m_1e4"] = {"evaluations": c.evaluations, "default_budget": default_budget,
                            "fraction": c.evaluations / default_budget, "full_passes": 1}  # fmt: skip
    tot = {k: sum(int(v[k]) for v in out["cases"].values())
           for k in ("claims", "true_claims", "false_claims", "missed", "exact_accepts", "solved_runs", "solved_runs_refused")}  # fmt: skip
    out["totals"] = tot
    out["seconds"] = time.perf_counter() - t0
    print(json.dumps(out, default=float))


if __name__ == "__main__":
    main()
