"""Sets, penalties and measures of the core, against brute force and known answers."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize as sp_minimize

from zoframe.measures import (
    admm_stationarity,
    central_difference_gradient,
    fit_multipliers,
    gradient_mapping,
    kkt_residuals,
)
from zoframe.penalties import L1, GroupL2, SquaredL2, Zero
from zoframe.sets import Ball, Box, Simplex, project_simplex

RNG = np.random.default_rng(0)


def test_simplex_projection_matches_a_qp_solution() -> None:
    for _ in range(20):
        v = RNG.standard_normal(7) * 2
        p = project_simplex(v)
        assert p.min() >= 0 and abs(p.sum() - 1) < 1e-12
        # optimality: p = max(v - theta, 0) with a common theta on the support
        theta = (v - p)[p > 0]
        assert np.ptp(theta) < 1e-12 and np.all(v[p == 0] <= theta[0] + 1e-12)
    rows = RNG.standard_normal((5, 4))
    assert np.allclose(Simplex(4).project(rows), np.vstack([project_simplex(r) for r in rows]))


def test_box_and_ball_projections() -> None:
    x = np.array([3.0, -4.0])
    assert np.allclose(Box(2, -1.0, 1.0).project(x), [1.0, -1.0])
    assert np.allclose(Ball(2, 1.0).project(x), [0.6, -0.8])
    assert Ball(2, 1.0).contains(Ball(2, 1.0).project(x))
    assert np.array_equal(x, [3.0, -4.0])


@pytest.mark.parametrize("psi", [L1(0.7), SquaredL2(1.3), GroupL2.from_groups([[0, 1], [2]], 0.9), Zero()])
def test_prox_is_the_minimiser_of_the_prox_problem(psi: object) -> None:
    for _ in range(5):
        v = RNG.standard_normal(3) * 2
        t = 0.8
        p = psi.prox(v, t)  # type: ignore[attr-defined]
        obj = lambda y, v=v, t=t: psi.value(y) + np.sum((y - v) ** 2) / (2 * t)  # type: ignore[attr-defined]  # noqa: E731
        best = sp_minimize(obj, v, method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000})
        assert obj(p) <= best.fun + 1e-9


def test_subdifferential_distance_is_zero_at_prox_optimality() -> None:
    # p = prox(v, t)  <=>  (v - p) / t in d psi(p)
    for psi in (L1(0.5), GroupL2.from_groups([[0, 1], [2, 3]], 0.4), SquaredL2(2.0)):
        v = RNG.standard_normal(4)
        p = psi.prox(v, 0.5)
        assert psi.subdifferential_distance(p, (v - p) / 0.5) < 1e-12
        assert psi.subdifferential_distance(p, (v - p) / 0.5 + 1.0) > 0.1


def test_overlapping_groups_are_refused_with_advice() -> None:
    with pytest.raises(ValueError, match="overlap"):
        GroupL2.from_groups([[0, 1], [1, 2]])


def test_gradient_mapping() -> None:
    box = Box(2, 0.0, 1.0)
    assert np.allclose(gradient_mapping(np.array([0.0, 0.5]), np.array([1.0, 1.0]), box.project, 0.1), [0.0, 1.0])
    assert np.allclose(gradient_mapping(np.ones(2), np.array([2.0, -1.0]), None), [2.0, -1.0])


def test_kkt_residuals_tell_optimum_infeasible_and_nonstationary_points_apart() -> None:
    # min 0.5||x - (2, 2)||^2  s.t.  x1 + x2 <= 2,  x1 <= 5 ;  x* = (1, 1), alpha* = (1, 0)
    D = np.array([[1.0, 1.0], [1.0, 0.0]])
    e = np.array([2.0, 5.0])

    def report(x: np.ndarray, alpha: np.ndarray | None = None) -> tuple[float, float, float]:
        r = kkt_residuals(x - 2.0, D @ x - e, D, alpha)
        return r.eps1, r.eps2, r.eps3

    opt = report(np.array([1.0, 1.0]))
    assert max(opt) < 1e-10
    assert max(report(np.array([1.0, 1.0]), np.array([1.0, 0.0]))) < 1e-12
    infeasible = report(np.array([1.5, 1.5]))
    assert infeasible[1] > 0.5
    nonstationary = report(np.array([0.0, 0.0]))  # feasible, inactive, gradient (-2, -2) not cancelled
    assert nonstationary[0] > 2.0 and nonstationary[1] == 0.0
    assert fit_multipliers(np.array([-1.0, -1.0]), D[:1]).tolist() == pytest.approx([1.0])


def test_kkt_residuals_with_a_gradient_callback_and_bad_multipliers() -> None:
    D = np.array([[1.0, 1.0]])
    r = kkt_residuals(np.array([-1.0, -1.0]), np.array([0.0]), lambda idx: D[idx])
    assert r.eps1 < 1e-12 and r.multipliers.tolist() == pytest.approx([1.0])
    with pytest.raises(ValueError, match=">= 0"):
        kkt_residuals(np.zeros(2), np.array([0.0]), D, np.array([-1.0]))


def test_central_differences_are_accurate() -> None:
    f = lambda X: np.stack([np.sin(X).sum(1), (X**3).sum(1)], axis=1)  # noqa: E731
    x = np.array([0.3, -1.2, 2.0])
    G = central_difference_gradient(f, x)
    assert np.allclose(G, np.vstack([np.cos(x), 3 * x**2]), atol=1e-8)


def test_admm_stationarity_is_zero_at_a_kkt_point_and_positive_elsewhere() -> None:
    # min 0.5||x - a||^2 + w||y||_1  s.t.  x - y = 0: x* = soft(a, w), lam = grad f(x*) (A = I)
    a = np.array([2.0, 0.3, -1.5])
    w = 0.5
    psi = L1(w)
    x = psi.prox(a, 1.0)
    lam = x - a  # grad f(x) - A^T lam = 0 with A = I
    args = (np.eye(3), [-np.eye(3)], np.zeros(3))
    assert admm_stationarity(x - a, *args, x, [x], lam, [psi]) < 1e-20
    assert admm_stationarity(np.zeros(3) - a, *args, np.zeros(3), [np.zeros(3)], np.zeros(3), [psi]) > 1.0
