"""The constrained baselines ZOPSGD, ZOSCGD, AccZOMDA and Acc-SZOFW on small problems with a cvxpy reference."""

from __future__ import annotations

from collections.abc import Mapping
import re
from typing import Any

import cvxpy as cp
import numpy as np
import pytest

import zoframe
from zoframe.errors import InvalidInputError, InvalidParameterError
from zoframe.oracle import CountingOracle
from zoframe.result import Status
from zoframe_constrained.baselines import (
    ZOPSGD,
    ZOSCGD,
    AccSZOFW,
    AccZOMDA,
    CvxpySubproblem,
    SubproblemError,
    solver_order,
)


class LinearLS:
    """``(1/n) sum_i (a_i^T x - b_i)^2`` s.t. ``D x <= e``: convex, the optimum has active constraints."""

    kind = "constrained"

    def __init__(self, d: int = 5, n: int = 40, m: int = 60, seed: int = 0, black_box: bool = False) -> None:
        rng = np.random.default_rng(seed)
        self.dim, self.n, self.m = d, n, m
        self.A = rng.standard_normal((n, d))
        self.b = self.A @ (2.0 * np.ones(d)) + 0.1 * rng.standard_normal(n)
        self.D = rng.standard_normal((m, d))
        self.e = np.abs(rng.standard_normal(m)) + 0.5
        self.x0 = np.zeros(d)
        self.convex_constraints = True
        self.black_box_constraints = black_box
        self.calls = 0

    def components(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        self.calls += 1
        out: np.ndarray = (X @ self.A[idx].T - self.b[idx]) ** 2
        return out

    def constraints(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        out: np.ndarray = X @ self.D[idx].T - self.e[idx]
        return out

    def linear_constraints(self) -> tuple[np.ndarray, np.ndarray]:
        return self.D, self.e

    def measures(self, outputs: Mapping[str, np.ndarray], monitor: Any) -> dict[str, float]:
        x = outputs["x"]
        g = monitor.constraints(x)[0]
        return {"fun": float(monitor.objective(x).mean()), "max_violation": float(max(g.max(), 0.0))}

    def reference(self) -> tuple[np.ndarray, float]:
        x = cp.Variable(self.dim)
        prob = cp.Problem(cp.Minimize(cp.sum_squares(self.A @ x - self.b) / self.n), [self.D @ x <= self.e])
        prob.solve(solver="CLARABEL")
        assert prob.status == cp.OPTIMAL
        return np.asarray(x.value), float(prob.value)


class OutsideBall:
    """``min ||x - c||^2`` s.t. ``1 - ||x||^2 <= 0`` (nonconvex), ``||c|| < 1``: solution ``c / ||c||``."""

    kind = "constrained"
    convex_constraints = False
    black_box_constraints = False

    def __init__(self, d: int = 3) -> None:
        self.dim, self.n, self.m = d, 1, 1
        self.c = np.linspace(0.1, 0.4, d)
        self.x0 = self.c.copy()

    def components(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return ((X - self.c) ** 2).sum(axis=1)[:, None] * np.ones((1, len(idx)))

    def constraints(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return (1.0 - (X * X).sum(axis=1))[:, None] * np.ones((1, len(idx)))

    def constraint_gradients(self, x: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return np.repeat((-2.0 * x)[None, :], len(idx), axis=0)


class Exploding(LinearLS):
    """Any function evaluation fails: proves that a refusal comes before the first evaluation."""

    def components(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        raise AssertionError("evaluated the objective")

    def constraints(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        raise AssertionError("evaluated the constraints")


SOLVERS: dict[str, tuple[type[Any], dict[str, Any], float]] = {
    # name: (class, hyper-parameters, tolerance on the relative objective gap)
    "zopsgd": (ZOPSGD, {"eta": 0.02, "M1": None, "q": 20}, 0.01),
    "acc-zomda": (AccZOMDA, {"gamma": 0.05, "M1": None, "q": 20}, 0.01),
    "zoscgd": (ZOSCGD, {"gamma": 0.05, "M1": None, "q": 20, "R": 5.0}, 0.06),
    "acc-szofw": (AccSZOFW, {"eta": 0.05, "M1": None, "q": 20, "R": 5.0, "period": 5}, 0.06),
}


@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_convex_problem_median_gap_and_violation(name: str) -> None:
    """Median over 5 seeds after 100 iterations: relative objective gap under the stated tolerance, feasible.

    Projected methods (ZOPSGD, AccZOMDA) converge; Frank-Wolfe with a constant step (ZOSCGD,
    Acc-SZOFW) oscillates in an O(gamma) neighbourhood, hence the larger tolerance. All iterates of
    these methods are feasible (projection / convex combinations of feasible points).
    """
    problem = LinearLS()
    _, f_star = problem.reference()
    cls, params, tol = SOLVERS[name]
    gaps, viols = [], []
    for seed in range(5):
        res = zoframe.minimize(problem, cls(**params), rng=seed, max_iter=100, record_every=0)
        gaps.append((res.fun - f_star) / f_star)
        viols.append(res.measures["max_violation"])
    assert np.median(gaps) < tol, gaps
    assert np.median(gaps) > -1e-6  # a feasible point cannot beat the optimum
    assert np.median(viols) < 1e-6, viols


@pytest.mark.parametrize("name", ["zopsgd", "zoscgd"])
def test_black_box_linear_constraints_are_linearised_exactly(name: str) -> None:
    """Black-box linear constraints: 'auto' linearises them by central differences, which is exact here."""
    white, black = LinearLS(), LinearLS(black_box=True)
    cls, params, _ = SOLVERS[name]
    a = zoframe.minimize(white, cls(**params), rng=0, max_iter=30, record_every=0)
    b = zoframe.minimize(black, cls(**params), rng=0, max_iter=30, record_every=0)
    assert np.allclose(a.x, b.x, atol=1e-5)
    assert b.nfev_by_purpose["linearize"] == 30 * (black.m + 2 * black.dim * black.m)
    assert "linearize" not in a.nfev_by_purpose


def test_nonconvex_constraints_linearised_reach_the_solution() -> None:
    """Sequential linearisation (white-box constraint gradients) approaches c/||c|| on a nonconvex set.

    The linearisation of the convex ``||x||^2`` under-estimates it, so every projected iterate is
    feasible for the true constraint; the remaining distance is ZO noise (q = 50, eta = 0.05:
    measured median 0.015 over 5 seeds, tolerance 0.03).
    """
    problem = OutsideBall()
    target = problem.c / np.linalg.norm(problem.c)
    dists, viols = [], []
    for seed in range(5):
        res = zoframe.minimize(problem, ZOPSGD(eta=0.05, M1=None, q=50, mu=1e-5), rng=seed, max_iter=100, record_every=0)
        dists.append(float(np.linalg.norm(res.x - target)))
        viols.append(1.0 - float(res.x @ res.x))
    assert np.median(dists) < 0.03, dists
    assert max(viols) < 1e-9, viols


def test_exact_mode_refuses_before_any_evaluation() -> None:
    black = Exploding(black_box=True)
    for solver in (ZOPSGD(constraints="exact"), ZOSCGD(constraints="exact"), AccZOMDA(constraints="exact"), AccSZOFW(constraints="exact")):
        with pytest.raises(InvalidInputError, match="white-box convex constraints"):
            zoframe.minimize(black, solver, rng=0, max_iter=5)
    with pytest.raises(InvalidInputError, match="linear_constraints"):
        zoframe.minimize(OutsideBall(), ZOPSGD(constraints="exact"), rng=0, max_iter=5)


def test_bad_parameters_are_clear_errors() -> None:
    with pytest.raises(InvalidParameterError, match="eta"):
        ZOPSGD(eta=0.0)
    with pytest.raises(InvalidParameterError, match="gamma"):
        ZOSCGD(gamma=1.5)
    with pytest.raises(InvalidParameterError, match="eta"):
        AccSZOFW(eta=-1.0)
    with pytest.raises(InvalidParameterError, match="constraints"):
        ZOPSGD(constraints="project")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="ball"):
        ZOSCGD(ball="l1")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="time_cap"):
        AccZOMDA(time_cap=0.0)
    with pytest.raises(InvalidParameterError, match="period"):
        AccSZOFW(period=0)
    with pytest.raises(InvalidParameterError, match="larger than the number"):
        zoframe.minimize(Exploding(), ZOPSGD(M1=1000), rng=0, max_iter=5)
    with pytest.raises(InvalidParameterError, match="not installed"):
        zoframe.minimize(Exploding(), ZOPSGD(cvxpy_solver="NO_SUCH_SOLVER", M1=8), rng=0, max_iter=5)


@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_cvxpy_problem_is_built_once_per_run(name: str) -> None:
    cls, params, _ = SOLVERS[name]
    before = CvxpySubproblem.builds
    zoframe.minimize(LinearLS(), cls(**params), rng=0, max_iter=25, record_every=0)
    expected = 2 if name in ("zoscgd", "acc-szofw") else 1  # (feasible start +) projection or LMO
    assert CvxpySubproblem.builds - before == expected


@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_one_objective_call_per_estimate(name: str) -> None:
    """Each step makes exactly one batched objective call (AccZOMDA / Acc-SZOFW: both points in it)."""
    problem = LinearLS()
    cls, params, _ = SOLVERS[name]
    solver = cls(**{**params, "M1": 8})
    oracle = CountingOracle(problem)
    rng = np.random.default_rng(0)
    state = solver.init(oracle, problem.x0, rng)
    for _ in range(6):
        calls, nfev = problem.calls, oracle.calls
        declared = solver.calls_per_step(oracle, state) if name == "acc-szofw" else solver.calls_per_step(oracle)
        state = solver.step(oracle, state, rng)
        assert problem.calls - calls == 1
        assert oracle.calls - nfev == declared


def test_time_cap_stops_the_run() -> None:
    res = zoframe.minimize(LinearLS(), ZOPSGD(time_cap=0.05, M1=8), rng=0, max_iter=100_000, record_every=0)
    assert res.status is Status.MAX_TIME and not res.success
    assert "time_cap" in res.message
    assert res.nit < 100_000


def test_fallback_to_the_next_solver_and_keep_it() -> None:
    oracle = CountingOracle(LinearLS())
    sub = CvxpySubproblem(oracle, "project", linearized=False)
    sub.order = ("OSQP_DOES_NOT_EXIST", *solver_order("qp"))
    w = sub.solve(np.full(oracle.dim, 5.0))
    assert sub.order[0] == solver_order("qp")[0]
    D, e = oracle.linear_constraints()
    assert np.max(D @ w - e) < 1e-6


def test_infeasible_constraints_raise_a_clear_error() -> None:
    class Infeasible(LinearLS):
        def linear_constraints(self) -> tuple[np.ndarray, np.ndarray]:
            D = np.zeros((2, self.dim))
            D[0, 0], D[1, 0] = 1.0, -1.0
            return D, np.array([-1.0, -1.0])  # x_0 <= -1 and x_0 >= 1

    with pytest.raises(zoframe.RunFailedError) as info:
        zoframe.minimize(Infeasible(m=2), ZOPSGD(M1=8), rng=0, max_iter=5)
    assert isinstance(info.value.__cause__, SubproblemError)
    assert re.search(r"infeasible.*Check that the constraints are feasible", str(info.value.__cause__))


def test_inputs_are_not_mutated() -> None:
    problem = LinearLS()
    x0 = np.full(problem.dim, 0.3)
    keep = x0.copy(), problem.D.copy(), problem.e.copy()
    zoframe.minimize(problem, AccZOMDA(gamma=0.05, M1=8), rng=0, max_iter=5, x0=x0)
    assert np.array_equal(x0, keep[0]) and np.array_equal(problem.D, keep[1]) and np.array_equal(problem.e, keep[2])


def _two_variable_problem() -> zoframe.Constrained:
    """min (x0 - 2)^2 + (x1 - 1)^2 s.t. x0^2 <= x1, x0 + x1 <= 2 (black-box); optimum f* = 1 at (1, 1)."""

    def g(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        G = np.stack([X[:, 0] ** 2 - X[:, 1], X[:, 0] + X[:, 1] - 2.0], axis=1)
        out: np.ndarray = G[:, idx]
        return out

    return zoframe.Constrained(lambda X: (X[:, 0] - 2.0) ** 2 + (X[:, 1] - 1.0) ** 2, g, m=2, x0=np.zeros(2))


def _boxed_problem() -> zoframe.Constrained:
    """min |x - c|^2 s.t. sum x <= 1 (black-box), 0 <= x <= 1: f* = 0.4225 (x = (0.65, 0.25, 0, 0.1))."""
    c = np.array([0.9, 0.5, -0.3, 0.35])

    def g(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return np.repeat(X.sum(axis=1, keepdims=True) - 1.0, len(idx), axis=1)

    return zoframe.Constrained(lambda X: np.sum((X - c) ** 2, axis=1), g, m=1, x0=np.full(4, 0.1), bounds=(0.0, 1.0))


@pytest.mark.parametrize("name", ["zopsgd", "zoscgd", "acc-zomda", "acc-szofw"])
def test_fitted_defaults_claim_only_certified_points(name: str) -> None:
    """Defaults on small black-box problems, 3 seeds: no crash, no divergence, and every CONVERGED claim is a
    point the certificate passed (the solver's own test and the driver's); a budget stop is never a success."""
    for prob in (_two_variable_problem(), _boxed_problem()):
        for seed in range(3):
            r = zoframe.minimize(prob, name, rng=seed, max_calls=1000 * prob.dim, record_every=0)
            assert r.status in (Status.CONVERGED, Status.BUDGET), r.message
            assert np.all(np.isfinite(r.x))
            assert any("central differences" in note for note in r.notes)  # 2 dim <= q + 1
            if r.status is Status.CONVERGED:
                assert r.certificate is not None and r.certificate["passed"] and r.success, r.message
                assert r.nfev_by_purpose.get("certify", 0) > 0
            else:
                assert not r.success


def test_zopsgd_defaults_reach_and_certify_the_optimum() -> None:
    """ZOPSGD's projected step with the fitted defaults converges on a small problem; the run stops on the
    certificate, well before its budget (median over 3 seeds)."""
    errs, used = [], []
    for seed in range(3):
        r = zoframe.minimize(_two_variable_problem(), "zopsgd", rng=seed, max_calls=4000, record_every=0)
        errs.append(abs(r.fun - 1.0) if r.success else np.inf)
        used.append(r.nfev)
    assert np.median(errs) < 1e-5
    assert np.median(used) < 4000


def test_paper_defaults_keep_the_papers_protocol() -> None:
    """defaults='paper': the Gaussian estimator whatever dim, and no stopping test (the run ends on its budget)."""
    r = zoframe.minimize(_two_variable_problem(), "zopsgd", rng=0, max_calls=4000, defaults="paper", record_every=0)
    assert r.status is Status.BUDGET and not r.success
    assert "certify" not in r.nfev_by_purpose or r.nfev_by_purpose["certify"] == 0
    assert not any("central differences" in note for note in r.notes)
    with pytest.raises(InvalidParameterError, match="defaults"):
        ZOPSGD(defaults="tuned")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["zoscgd", "acc-szofw"])
def test_fitted_frank_wolfe_resumes_bit_for_bit(name: str, tmp_path: Any) -> None:
    """defaults='fitted' solves every LP from scratch: a run resumed from a checkpoint follows the straight run."""
    cls, params, _ = SOLVERS[name]
    for seed in range(4):
        straight = zoframe.minimize(LinearLS(), cls(**params), rng=seed, max_iter=16, record_every=0)
        path = tmp_path / f"ck{seed}"
        zoframe.minimize(LinearLS(), cls(**params), rng=seed, max_iter=8, checkpoint=path, record_every=0)
        resumed = zoframe.minimize(LinearLS(), cls(**params), max_iter=16, resume=path, record_every=0)
        assert np.array_equal(straight.x, resumed.x) and straight.nfev == resumed.nfev


@pytest.mark.parametrize("name", ["zopsgd", "zoscgd", "acc-zomda", "acc-szofw"])
def test_an_empty_linearisation_ends_failed_not_raised(name: str) -> None:
    """At x0 = 0 the violated constraint 1 - |x|^2 <= 0 has a zero gradient: its linearisation 1 <= 0 is empty.
    defaults='fitted' ends the run FAILED on its last iterate, saying why; defaults='paper' raises as before."""

    def g(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        out: np.ndarray = np.stack([1.0 - (X**2).sum(axis=1), (X**2).sum(axis=1) - 4.0], axis=1)[:, idx]
        return out

    prob = zoframe.Constrained(lambda X: (X[:, 0] - 0.5) ** 2 + X[:, 1] ** 2, g, m=2, x0=np.zeros(2))
    r = zoframe.minimize(prob, name, rng=0, max_calls=4000, record_every=0)
    assert r.status is Status.FAILED and not r.success
    assert "infeasible" in r.message and "adszog" in r.message
    np.testing.assert_array_equal(r.x, np.zeros(2))
    with pytest.raises(zoframe.RunFailedError):
        zoframe.minimize(prob, name, rng=0, max_calls=4000, record_every=0, defaults="paper")


def test_a_certified_baseline_run_through_ask_tell_is_bit_identical() -> None:
    """The stopping rule's certificate (evaluated inside a step, charged to the budget) goes through ask/tell."""
    prob = _two_variable_problem()
    direct = zoframe.minimize(prob, "zopsgd", rng=0, max_calls=4000)
    assert direct.status is Status.CONVERGED
    run = zoframe.Run(prob, "zopsgd", rng=0, max_calls=4000)
    while (req := run.ask()) is not None:
        fn = prob.components if req.kind == "objective" else prob.constraints
        run.tell(req, fn(req.points, req.indices))
    res = run.result()
    assert np.array_equal(res.x, direct.x) and res.nfev_by_purpose == direct.nfev_by_purpose
    assert res.status is Status.CONVERGED and res.success == direct.success
