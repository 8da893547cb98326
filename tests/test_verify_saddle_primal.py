"""The saddle-quadratic verification problem: its primal measure g(x) = max_y F(x, y) against a numeric max."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.optimize import minimize as scipy_minimize

import zoframe
from zoframe.sets import Box
from zoframe_verify.problems import SaddleQuadratic


def _numeric_max(prob: SaddleQuadratic, x: np.ndarray, bounds: Any = None) -> tuple[float, np.ndarray]:
    idx = np.arange(prob.n)

    def neg(y: np.ndarray) -> float:
        return -float(prob.values(x[None, :], y[None, :], idx).mean())

    res = scipy_minimize(neg, np.zeros(prob.dim_y), method="L-BFGS-B", bounds=bounds,
                         options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 10_000})
    return -float(res.fun), res.x


@pytest.mark.parametrize("boxed", [False, True], ids=["reals", "box"])
def test_primal_is_the_max_over_y(boxed: bool) -> None:
    kw: dict[str, Any] = {"y_set": Box(4, -0.2, 0.2)} if boxed else {}
    prob = SaddleQuadratic(dim=3, dim_y=4, n=6, rho=0.7, seed=3, **kw)
    rng = np.random.default_rng(1)
    for _ in range(4):
        x = 2.0 * rng.standard_normal(3)
        best, y_num = _numeric_max(prob, x, [(-0.2, 0.2)] * 4 if boxed else None)
        assert abs(prob.g(x) - best) < 1e-7 * max(1.0, abs(best))
        np.testing.assert_allclose(prob.y_star(x), y_num, atol=1e-5)
        # Danskin: grad g(x) = P x + K y*(x), checked by central differences of g
        h = 1e-6
        fd = np.array([(prob.g(x + h * e) - prob.g(x - h * e)) / (2 * h) for e in np.eye(3)])
        np.testing.assert_allclose(prob.grad_g(x), fd, atol=1e-5)


def test_primal_measure_bounds_the_run_value_from_above() -> None:
    prob = SaddleQuadratic(dim=3, dim_y=4, n=6, seed=0)
    res = zoframe.minimize(prob, "zo-gda", rng=0, max_iter=30, steps="paper", eta1=0.05, eta2=0.5, record_every=10)
    primal, fun = res.trace["primal"], res.trace["fun"]
    assert len(primal) == len(fun) >= 3
    assert np.all(primal >= fun - 1e-12) and primal[0] > fun[0]  # F(x, y0) lies below max_y F(x, y)
    assert primal[-1] == pytest.approx(prob.g(res.x), rel=1e-12)
    # at the solution the primal value is the saddle value
    sol = prob.known_solution()
    assert prob.g(sol["x"]) == pytest.approx(sol["fun"], rel=1e-10, abs=1e-12)
