"""steps="auto": the composite solvers with their defaults on problems in any units, stopping by themselves.

A small lasso ``(1/2n)|X x - t|^2 + tau |y|_1``, ``x - y = 0``, stated with its features scaled by
1e-2, 1 and 1e2 (the penalty weight scaled with the gradient's units, so the solution is the unit
problem's divided by the scale: the same problem in other units); the reference by cvxpy.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest

import zoframe
from zoframe.oracle import CountingOracle
from zoframe.penalties import L1
from zoframe.testing import SolverContract
from zoframe_admm.residuals import balanced_rho
from zoframe_admm.stochastic import BALANCE_EVERY

ALL = ["zo-svrg-admm", "zo-saga-admm", "zo-admm", "zo-sgd-admm", "zo-prox-svrg", "zo-prox-saga"]
SCALES = (1e-2, 1.0, 1e2)
SEEDS = (0, 1, 2)


def lasso(scale: float, d: int = 8, n: int = 60) -> tuple[zoframe.Composite, np.ndarray]:
    rng = np.random.default_rng(11)
    X = rng.standard_normal((n, d))
    w = np.zeros(d)
    w[:3] = [1.5, -1.0, 0.7]
    t = X @ w + 0.1 * rng.standard_normal(n)
    tau = 0.05
    Xs = scale * X

    def ls(P: np.ndarray, idx: np.ndarray) -> np.ndarray:
        r = P @ Xs[idx].T - t[idx]
        return 0.5 * r * r

    prob = zoframe.Composite(ls, x0=np.zeros(d), A=np.eye(d), B=[-np.eye(d)], c=np.zeros(d),
                             penalties=[L1(tau * scale)], n=n, name=f"lasso x{scale:g}")
    return prob, _reference(X, t, tau) / scale


def _reference(X: np.ndarray, t: np.ndarray, tau: float) -> np.ndarray:
    cp = pytest.importorskip("cvxpy")
    x = cp.Variable(X.shape[1])
    obj = 0.5 * cp.sum_squares(X @ x - t) / X.shape[0] + tau * cp.norm1(x)
    cp.Problem(cp.Minimize(obj)).solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return np.asarray(x.value)


def _kw(solver: str) -> dict[str, Any]:
    return {} if "prox" in solver else {"rank_check": "ignore"}


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("solver", ALL)
def test_auto_reaches_the_reference_in_any_units_and_says_so(solver: str, scale: float) -> None:
    prob, xs = lasso(scale)
    errs, ok = [], []
    for seed in SEEDS:
        res = zoframe.minimize(prob, solver, rng=seed, max_calls=300_000, record_every=0, **_kw(solver))
        errs.append(float(np.linalg.norm(res.x - xs) / np.linalg.norm(xs)))
        ok.append(res.success and res.status is zoframe.Status.CONVERGED)
    assert float(np.median(errs)) <= 1e-6, errs
    assert all(ok)


def test_the_phases_their_switch_and_costs_are_in_the_notes_and_the_trace() -> None:
    prob, _ = lasso(1.0)
    res = zoframe.minimize(prob, "zo-svrg-admm", rng=0, max_calls=300_000, rank_check="ignore")
    notes = " ".join(res.notes)
    assert "1. stochastic phase:" in notes and "2. refinement:" in notes and "evaluations" in notes
    assert "ended (next)" in notes and "ended (converged)" in notes
    assert "the residual test passed with exact differences" in res.message
    phase = np.asarray(res.trace["phase"])
    assert phase[0] == 0 and phase[-1] == 1 and np.all(np.diff(phase) >= 0)


def test_refinement_off_with_a_noisy_estimate_ends_noise_limited() -> None:
    """zo-sgd-admm (no variance reduction) without the refinement stalls at its estimate's noise, and says so."""
    prob, _ = lasso(1.0)
    res = zoframe.minimize(prob, "zo-sgd-admm", rng=0, refine="never", max_calls=2_000_000, rank_check="ignore")
    assert res.status is zoframe.Status.NOISE_LIMITED and not res.success
    assert "noise" in res.message and "eps_rel" in res.message


@pytest.mark.parametrize("solver", ["zo-svrg-admm", "zo-saga-admm", "zo-prox-svrg"])
def test_the_stochastic_phase_stops_on_the_users_tolerances(solver: str) -> None:
    """Without the refinement: a loose eps_rel stops earlier with a looser answer, a tight one later with a tighter
    one; both claimed and certified (the error follows the tolerance, to within the problem's conditioning)."""
    prob, xs = lasso(1.0)
    runs = {}
    for eps in (1e-2, 1e-6):
        res = zoframe.minimize(prob, solver, rng=0, max_calls=300_000, eps_rel=eps, refine="never", **_kw(solver))
        assert res.status is zoframe.Status.CONVERGED and res.success, res.message
        runs[eps] = (res.nfev, float(np.linalg.norm(res.x - xs) / np.linalg.norm(xs)))
    assert runs[1e-2][0] < runs[1e-6][0]
    assert runs[1e-6][1] < 1e-5 < runs[1e-2][1] < 1e-2


@pytest.mark.parametrize(("eps_abs", "eps_rel"), [(-1.0, 1e-9), (0.0, 0.0), (0.0, math.nan), (True, 1e-9)])
def test_bad_tolerances_are_refused(eps_abs: Any, eps_rel: Any) -> None:
    prob, _ = lasso(1.0)
    with pytest.raises(zoframe.errors.InvalidInputError, match="eps_"):
        zoframe.minimize(prob, "zo-svrg-admm", rng=0, max_iter=3, eps_abs=eps_abs, eps_rel=eps_rel)


def test_bad_modes_are_refused() -> None:
    prob, _ = lasso(1.0)
    with pytest.raises(zoframe.errors.InvalidInputError, match="steps"):
        zoframe.minimize(prob, "zo-svrg-admm", rng=0, max_iter=3, steps="fast")
    with pytest.raises(zoframe.errors.InvalidInputError, match="refine"):
        zoframe.minimize(prob, "zo-svrg-admm", rng=0, max_iter=3, refine="sometimes")


# --------------------------------------------------------------------------- residual balancing
def test_balancing_rule() -> None:
    assert balanced_rho(1.0, 1e-2, 1e-6) == pytest.approx(100.0)  # primal far above dual: rho up
    assert balanced_rho(1.0, 1e-6, 1e-2) == pytest.approx(0.01)  # dual far above primal: rho down
    assert balanced_rho(2.0, 1e-3, 2e-3) == 2.0  # within the factor 5: kept
    assert balanced_rho(2.0, 0.0, 1e-3) == 2.0  # nothing to balance against


@pytest.mark.parametrize(("factor", "direction"), [(1e-4, 1.0), (1e4, -1.0)])
def test_balancing_moves_rho_the_right_way_in_a_run(factor: float, direction: float) -> None:
    """Started with rho 1e4 times too small (too large), the phase's balancing raises (lowers) it."""
    prob, _ = lasso(1.0)
    solver = zoframe.default_registry().solver("zo-svrg-admm").cls(rank_check="ignore", refine="never")
    oracle = CountingOracle(prob)
    rng = np.random.default_rng(0)
    st = solver.init(oracle, prob.x0, rng)
    st = solver.step(oracle, st, rng)
    start = st.inner.rule.rho * factor
    inner = dataclasses.replace(st.inner, rule=dataclasses.replace(st.inner.rule, rho=start, win_k=0, win_p=0.0,
                                                                   win_d=0.0))
    st = dataclasses.replace(st, inner=inner)
    for _ in range(2 * BALANCE_EVERY):
        st = solver.step(oracle, st, rng)
    end = st.inner.rule.rho
    assert direction * math.log(end / start) >= math.log(10.0), (start, end)


# --------------------------------------------------------------------------- the contract kit on the defaults
@pytest.mark.parametrize("solver", ALL)
def test_contract_checks_hold_with_steps_auto(solver: str) -> None:
    """Determinism, exact budgets, untouched inputs, checkpoint / resume: the kit's checks with the defaults
    (its fixed-cost check and its progress check use the papers' steps, registered as contract parameters)."""
    kit = SolverContract(solver, params={"b": 4, **_kw(solver)})
    kit.check_determinism("composite")
    kit.check_exact_budget("composite")
    kit.check_inputs_not_mutated("composite")
    kit.check_checkpoint_resume("composite")
    kit.check_smallest_problems("composite")
