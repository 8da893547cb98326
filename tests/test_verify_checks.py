"""KKT, minimax and ADMM reports on problems with known answers (a check of the checker)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pytest

import zoframe
from zoframe.errors import InvalidInputError
from zoframe.protocols import Array, IntArray
from zoframe.sets import Box
from zoframe_verify import admm_report, kkt_report, minimax_report, reference_solution, verify
from zoframe_verify.problems import KKTQP, LassoComposite, SaddleQuadratic


@pytest.fixture(autouse=True)
def _cache_in_tmp(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZOFRAME_CACHE", str(tmp_path / "cache"))


def test_reference_scores_zero_on_every_constrained_measure() -> None:
    prob = KKTQP(dim=10, m=50, seed=4)
    ref = reference_solution(prob)
    rep = verify(prob, ref.x)
    for name in ("eps1", "eps2", "eps3", "ref_eps1", "ref_eps2", "ref_eps3", "dist_to_reference"):
        assert rep.measures[name] < 1e-7, (name, rep.measures[name])
    assert abs(rep.measures["objective_gap"]) < 1e-9
    assert rep.details.n_active >= 2  # type: ignore[union-attr]
    assert "white-box" in rep.gradient_source
    assert "CLARABEL" in rep.reference_source


def test_optimum_infeasible_and_nonstationary_points_are_told_apart() -> None:
    prob = KKTQP(dim=10, m=50, seed=4)
    ref = reference_solution(prob)
    at_opt = verify(prob, ref.x).measures
    infeasible = verify(prob, ref.x + 0.3 * (ref.x - prob.x0) / np.linalg.norm(ref.x)).measures
    feasible_not_stationary = verify(prob, 0.5 * ref.x).measures  # the segment [0, x*] is feasible
    assert infeasible["eps2"] > 1e-2 and infeasible["max_violation"] > 1e-2
    assert feasible_not_stationary["eps2"] == 0.0
    assert feasible_not_stationary["eps1"] > 0.5
    assert max(at_opt["eps1"], at_opt["eps2"], at_opt["eps3"]) < 1e-7
    assert feasible_not_stationary["objective_gap"] > 0.1


@dataclass(frozen=True, eq=False)
class _BlackBox:
    """A KKTQP seen through function values only (no gradient capabilities)."""

    inner: KKTQP
    kind: ClassVar[str] = "constrained"

    def __getattr__(self, name: str) -> Any:
        if name in ("component_gradients", "constraint_gradients", "cvxpy_model", "known_solution"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def components(self, X: Array, idx: IntArray) -> Array:
        return self.inner.components(X, idx)

    def constraints(self, X: Array, idx: IntArray) -> Array:
        return self.inner.constraints(X, idx)


def test_central_differences_agree_with_white_box_gradients() -> None:
    prob = KKTQP(dim=10, m=50, seed=4)
    ref = reference_solution(prob)
    x = ref.x + 0.01
    white = kkt_report(prob, x, active_tol=0.05)
    black = kkt_report(_BlackBox(prob), x, active_tol=0.05)
    assert black.gradient_source == "central differences"
    assert black.constraint_gradient_source == "central differences"
    assert white.n_active == black.n_active >= 2
    assert abs(white.eps1 - black.eps1) < 1e-6
    assert abs(white.eps3 - black.eps3) < 1e-6
    np.testing.assert_allclose(white.multipliers, black.multipliers, atol=1e-5)


@dataclass(frozen=True, eq=False)
class _ManyConstraints:
    """``x_0 <= 1 + j / m`` for j < m: m huge, one constraint active at x = e_0."""

    m: int = 300_000
    kind: ClassVar[str] = "constrained"
    dim: int = 3
    n: int = 1
    largest_gradient_batch: list[int] | None = None

    def components(self, X: Array, idx: IntArray) -> Array:
        out: Array = (0.5 * np.sum((X - 2.0) ** 2, axis=1))[:, None] * np.ones(len(idx))
        return out

    def component_gradients(self, x: Array, idx: IntArray) -> Array:
        return np.repeat((x - 2.0)[None, :], len(idx), axis=0)

    def constraints(self, X: Array, idx: IntArray) -> Array:
        out: Array = X[:, :1] - (1.0 + idx[None, :] / self.m)
        return out

    def constraint_gradients(self, x: Array, idx: IntArray) -> Array:
        assert self.largest_gradient_batch is not None
        self.largest_gradient_batch.append(len(idx))
        G = np.zeros((len(idx), 3))
        G[:, 0] = 1.0
        return G


def test_huge_m_forms_only_nearly_active_gradients() -> None:
    seen: list[int] = []
    prob = _ManyConstraints(largest_gradient_batch=seen)
    x = np.array([1.0, 2.0, 2.0])
    rep = kkt_report(prob, x, active_tol=1e-9)
    assert max(seen) <= 1 and rep.n_active == 1
    assert rep.eps1 < 1e-12 and rep.eps2 == 0.0 and rep.eps3 < 1e-12
    assert abs(rep.multipliers[0] - 1.0) < 1e-12


def test_minimax_report_matches_closed_form() -> None:
    prob = SaddleQuadratic(dim=4, dim_y=6, n=8, seed=1)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(4), rng.standard_normal(6)
    rep = minimax_report(prob, x, y)
    assert rep.inner.converged
    assert abs(rep.grad_g_norm - np.linalg.norm(prob.grad_g(x))) < 1e-8
    K, b = prob.K_mean, prob.bs.mean(axis=0)
    gy = K.T @ x - prob.rho * y + b
    assert abs(rep.y_mapping_norm - np.linalg.norm(gy)) < 1e-10  # unconstrained Y: the gradient itself
    assert abs(rep.y_gap - np.linalg.norm(y - (K.T @ x + b) / prob.rho)) < 1e-8
    sol = prob.known_solution()
    at_opt = verify(prob, {"x": sol["x"], "y": sol["y"]}).measures
    assert at_opt["grad_g_norm"] < 1e-10 and at_opt["y_mapping_norm"] < 1e-10 and abs(at_opt["objective_gap"]) < 1e-10


def test_minimax_inner_solve_over_a_box_and_black_box_gradients() -> None:
    prob = SaddleQuadratic(dim=3, dim_y=3, n=4, seed=2, y_set=Box(3, -0.1, 0.1))
    x = np.array([1.0, -1.0, 0.5])
    rep = minimax_report(prob, x)
    assert rep.inner.converged
    ystar = np.clip((prob.K_mean.T @ x + prob.bs.mean(axis=0)) / prob.rho, -0.1, 0.1)  # separable: clip
    np.testing.assert_allclose(rep.inner.y, ystar, atol=1e-8)
    gx_expected = prob.P @ x + prob.K_mean @ ystar
    assert abs(rep.grad_g_norm - np.linalg.norm(gx_expected)) < 1e-7

    class Black:
        kind: ClassVar[str] = "minimax"
        dim = 3
        dim_y = 3
        n = 4
        y_set = prob.y_set
        y0 = prob.y0

        def values(self, X: Array, Y: Array, idx: IntArray) -> Array:
            return prob.values(X, Y, idx)

    black = minimax_report(Black(), x)
    assert black.gradient_source == "central differences"
    assert abs(black.grad_g_norm - rep.grad_g_norm) < 1e-5


def test_admm_report_zero_at_reference_and_positive_elsewhere() -> None:
    prob = LassoComposite(dim=15, n=80, seed=3)
    ref = reference_solution(prob)
    rep = verify(prob, {"x": ref.x, "y0": ref.y[0], "lam": ref.duals})
    assert rep.measures["dist2"] < 1e-10 and abs(rep.measures["objective_gap"]) < 1e-9
    away = admm_report(prob, prob.x0, [prob.y0[0]], np.zeros(prob.dim))
    assert away.x_part > 1e-2 and away.dist2 == pytest.approx(away.x_part + away.y_part + away.feasibility)
    fitted = admm_report(prob, ref.x, [ref.y[0]])  # lam fitted from grad f = A^T lam
    assert "least squares" in fitted.lam_source and fitted.dist2 < 1e-10
    with pytest.raises(InvalidInputError):
        admm_report(prob, ref.x, [ref.y[0], ref.y[0]])


def test_verify_a_result_of_minimize() -> None:
    prob = zoframe.default_registry().make_problem("quadratic", dim=5)
    res = zoframe.minimize(prob, "zo-sgd", steps="paper", rng=0, max_iter=300, eta=0.05)
    rep = verify(prob, res)
    assert rep.solver == res.solver and rep.kind == "finite_sum"
    assert rep.measures["dist_to_reference"] == pytest.approx(float(np.linalg.norm(res.x - prob.center)))
    assert rep.measures["objective_gap"] == pytest.approx(res.fun, rel=1e-9, abs=1e-12)
    start = verify(prob, prob.x0)
    assert rep.measures["grad_norm"] < 1e-2 * start.measures["grad_norm"]
    assert "known_solution" in rep.reference_source and "grad_norm" in rep.to_text()
    with pytest.raises(InvalidInputError, match="shape"):
        verify(prob, np.zeros(3))


def test_penalty_gradient_matches_central_differences_of_g() -> None:
    from zoframe.measures import central_difference_gradient
    from zoframe.sets import project_simplex
    from zoframe_verify import penalty_report

    prob = KKTQP(dim=6, m=30, seed=5)
    beta, lam = 2.0, 200.0
    x = prob.c_bar * 0.8  # outside the polyhedron: several constraints violated

    def g(X: Array) -> Array:
        out = np.empty(X.shape[0])
        for r, w in enumerate(X):
            phi = np.maximum(prob.D @ w - prob.e, 0.0) ** 2
            p = project_simplex(beta * phi / lam)
            out[r] = 0.5 * np.sum((w - prob.c_bar) ** 2) + prob._spread + beta * p @ phi - 0.5 * lam * p @ p
        return out

    rep = penalty_report(prob, x, beta=beta, lam=lam)
    assert rep.n_support >= 2
    assert abs(rep.g - g(x[None])[0]) < 1e-10
    assert abs(rep.grad_g_norm - np.linalg.norm(central_difference_gradient(g, x)[0])) < 1e-5


def test_a_problem_pair_model_is_accepted(tmp_path: Any) -> None:
    import importlib

    cp = importlib.import_module("cvxpy")
    base = KKTQP(dim=5, m=12, seed=6)

    class Pair:
        kind: ClassVar[str] = "constrained"
        dim, m, n = 5, 12, 1

        def cvxpy_model(self) -> Any:
            x = cp.Variable(5)
            return cp.Problem(cp.Minimize(0.5 * cp.sum_squares(x - base.c_bar)), [base.D @ x <= base.e]), x

    ref = reference_solution(Pair(), cache_dir=tmp_path)
    full = reference_solution(base, cache_dir=tmp_path)
    np.testing.assert_allclose(ref.x, full.x, atol=1e-8)
    np.testing.assert_allclose(ref.duals, full.duals, atol=1e-7)
