"""The smooth peers: ``lbfgsb-fd``, ``pybobyqa`` and the nested minimax ``nested-lbfgsb-fd``.

Each solves small problems with known solutions to a stated accuracy, with a certified success;
budgets hold exactly; an unbounded problem is never a success; the batches are what the docstrings
say; a missing Py-BOBYQA names its extra; the driver's-thread path gives the threaded run bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable
import sys
from typing import Any

import numpy as np
import pytest

import zoframe
from zoframe._optional import MissingDependencyError
from zoframe.driver import build_run
from zoframe.errors import IncompatibleProblemError
from zoframe.result import Result, Status
from zoframe.sets import Ball, Box, Simplex, project_simplex


class _LeastSquares:
    """``(1/n) sum_i (a_i^T x - b_i)^2`` as a bare finite sum whose measures cost no budget, recording its batches."""

    kind = "finite_sum"
    monitor_free = True

    def __init__(self, dim: int = 5, n: int = 30, seed: int = 0, bounds: tuple[float, float] | None = None) -> None:
        rng = np.random.default_rng(seed)
        self.dim, self.n = dim, n
        self.a = rng.standard_normal((n, dim))
        self.b = self.a @ np.linspace(-1.0, 2.0, dim) + 0.3 * rng.standard_normal(n)
        self.x0 = np.zeros(dim)
        self.batches: list[int] = []
        self.points: list[np.ndarray] = []
        if bounds is not None:
            self.feasible_set = Box(dim, bounds[0], bounds[1])

    def components(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        self.batches.append(X.shape[0])
        self.points.extend(np.array(X, copy=True))
        r = X @ self.a[idx].T - self.b[idx]
        out: np.ndarray = r * r
        return out

    def measures(self, outputs: Any, monitor: Any) -> dict[str, float]:
        return {"fun": float(monitor.objective(outputs["x"]).mean())}

    def solution(self) -> np.ndarray:
        return np.asarray(np.linalg.lstsq(self.a, self.b, rcond=None)[0])


def _quadratic_in_a_box() -> tuple[zoframe.FiniteSum, np.ndarray]:
    """``sum_i w_i (x_i - c_i)^2`` over ``[-1, 1]^4``: the solution is ``clip(c)``, two bounds active."""
    c = np.array([2.0, -0.5, 0.3, -1.7])
    w = np.array([1.0, 2.0, 3.0, 4.0])
    prob = zoframe.FiniteSum(lambda X: (w * (X - c) ** 2).sum(axis=1), x0=np.zeros(4), bounds=(-1.0, 1.0))
    return prob, np.clip(c, -1.0, 1.0)


# --------------------------------------------------------------------------- accuracy
@pytest.mark.parametrize(("solver", "tol"), [("lbfgsb-fd", 1e-5), ("pybobyqa", 1e-6)])
def test_least_squares_solved_to_the_closed_form(solver: str, tol: float) -> None:
    prob = _LeastSquares()
    res = zoframe.minimize(prob, solver, rng=0, max_calls=30 * 2000)
    assert res.success and res.status is Status.CONVERGED, res.message
    assert np.abs(res.x - prob.solution()).max() <= tol
    assert res.nfev % prob.n == 0 and res.nfev_by_kind == {"objective": res.nfev}  # whole points: n evaluations
    assert res.nfev_by_purpose["peer"] == res.nfev


@pytest.mark.parametrize(("solver", "tol"), [("lbfgsb-fd", 1e-5), ("pybobyqa", 1e-7)])
def test_bounded_quadratic_solved_with_the_active_bounds(solver: str, tol: float) -> None:
    prob, xstar = _quadratic_in_a_box()
    res = zoframe.minimize(prob, solver, rng=0, max_calls=2000)
    assert res.success and res.status is Status.CONVERGED, res.message
    assert np.abs(res.x - xstar).max() <= tol
    assert res.x[0] == 1.0 and res.x[3] == -1.0  # the active bounds are met exactly, never passed


def test_lbfgsb_fd_sends_each_difference_gradient_as_one_batch_inside_the_bounds() -> None:
    prob = _LeastSquares(dim=6, n=10, seed=3, bounds=(-0.5, 0.5))
    res = zoframe.minimize(prob, "lbfgsb-fd", rng=0, max_calls=10 * 3000)
    assert res.status is Status.CONVERGED, res.message
    # the peer's calls come first (its nfev), the certificate's after them
    spent = np.cumsum(np.asarray(prob.batches) * prob.n)
    peer = prob.batches[: int(np.searchsorted(spent, res.nfev, side="right"))]
    assert set(peer) == {1, 6} and peer.count(6) >= 3  # f(x), then the 6 difference points in one call
    pts = np.array(prob.points)
    assert np.all(np.abs(pts) <= 0.5)  # one-sided differences at a bound (the certificate's too): none outside
    assert np.any(np.abs(res.x) == 0.5)


# --------------------------------------------------------------------------- budgets
@pytest.mark.parametrize("solver", ["lbfgsb-fd", "pybobyqa", "nested-lbfgsb-fd"])
def test_budget_is_exact_and_a_budget_stop_is_no_success(solver: str) -> None:
    n = 3
    if solver == "nested-lbfgsb-fd":
        from zoframe.testing.problems import SmokeMinimax

        prob: Any = SmokeMinimax(n=n)
    else:
        prob = _LeastSquares(dim=4, n=n)
    budget = n * 47 + 2  # not a multiple of the point cost
    res = zoframe.minimize(prob, solver, rng=0, max_calls=budget)
    assert res.status is Status.BUDGET and not res.success, res.message
    assert res.nfev <= budget and budget - res.nfev < n and res.nfev % n == 0
    kind = "minimax" if solver == "nested-lbfgsb-fd" else "objective"
    assert res.nfev_by_kind == {kind: res.nfev}
    capped = zoframe.minimize(prob, solver, rng=0, max_calls=10**6, maxfev=11)
    assert capped.status is Status.BUDGET and capped.nfev == 11 * n, capped.message
    # the peer's cap, or Py-BOBYQA's own maxfun (told maxfev): a budget stop either way
    assert "maxfev=11" in capped.message or "MAXFUN" in capped.message


def test_pybobyqa_is_told_the_points_left_and_honours_them() -> None:
    """maxfun = what is left over the point cost: Py-BOBYQA's own stop (its flag 1) is then a budget stop."""
    import pybobyqa

    told: list[Any] = []
    real = pybobyqa.solve

    def spy(*args: Any, **kwargs: Any) -> Any:
        told.append(kwargs["maxfun"])
        return real(*args, **kwargs)

    prob = _LeastSquares(dim=4, n=5)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pybobyqa, "solve", spy)
        res = zoframe.minimize(prob, "pybobyqa", rng=0, max_calls=5 * 40 + 4)
    assert told == [40] and res.nfev == 5 * 40 and res.status is Status.BUDGET, res.message


# --------------------------------------------------------------------------- honest statuses
def test_unbounded_objectives_are_never_a_success() -> None:
    linear = zoframe.FiniteSum(lambda X: -X.sum(axis=1), x0=np.zeros(3))
    for solver in ("lbfgsb-fd", "pybobyqa"):
        res = zoframe.minimize(linear, solver, rng=0, max_calls=800)
        assert not res.success and res.status in (Status.BUDGET, Status.FAILED, Status.DIVERGED), res.message
    # -|x|^2 overflows: with nonfinite="inf" the peer sees +inf there; the best point ran away
    bowl = zoframe.FiniteSum(lambda X: -(X * X).sum(axis=1), x0=np.ones(3))
    with np.errstate(over="ignore"):
        res = zoframe.minimize(bowl, "lbfgsb-fd", rng=0, max_calls=3000, nonfinite="inf")
    assert res.status is Status.DIVERGED and not res.success and "ran away" in res.message, res.message


def test_pybobyqa_noisy_mode_is_passed_on_and_deterministic() -> None:
    """``noisy=True`` is Py-BOBYQA's objfun_has_noise mode, with hard restarts (no global random state); on a
    rough objective the run is reproducible for a seed and ends near the minimiser."""
    import pybobyqa

    seen: list[dict[str, Any]] = []
    real = pybobyqa.solve

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return real(*args, **kwargs)

    c = np.array([0.7, -1.2, 0.4])

    def rough(X: np.ndarray) -> np.ndarray:  # a smooth bowl plus a deterministic ripple of size 1e-6
        return np.asarray(((X - c) ** 2).sum(axis=1) + 1e-6 * np.sin(1e4 * X).sum(axis=1))

    prob = zoframe.FiniteSum(rough, x0=np.zeros(3))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pybobyqa, "solve", spy)
        runs = [zoframe.minimize(prob, "pybobyqa", rng=1, max_calls=600, noisy=True) for _ in range(2)]
    assert seen[0]["objfun_has_noise"] is True and seen[0]["user_params"] == {"restarts.use_soft_restarts": False}
    a, b = runs
    assert np.array_equal(a.x, b.x) and a.nfev == b.nfev and a.status is b.status
    assert np.abs(a.x - c).max() <= 1e-2, a.x


def test_missing_pybobyqa_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pybobyqa", None)  # import pybobyqa now raises ImportError
    with pytest.raises(MissingDependencyError) as info:
        zoframe.minimize(_LeastSquares(), "pybobyqa", rng=0, max_calls=100)
    assert "zoframe[pybobyqa]" in str(info.value) and "Py-BOBYQA" in str(info.value)


def test_pybobyqa_refuses_a_fixed_variable() -> None:
    prob = zoframe.FiniteSum(lambda X: (X * X).sum(axis=1), x0=np.zeros(2), bounds=([0.0, -1.0], [0.0, 1.0]))
    with pytest.raises(IncompatibleProblemError, match="variable 0"):
        zoframe.minimize(prob, "pybobyqa", max_calls=100)


# --------------------------------------------------------------------------- nested minimax
_K = np.array([0.5, 1.0, 0.3])
_MU = 2.0


def _double_well(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """NC-SC: ``sum (x_i^2 - 1)^2 / 4 + y^T (k * x) - (mu / 2) |y|^2``: ``y*(x) = k x / mu`` and
    ``Phi(x) = sum (x_i^2 - 1)^2 / 4 + |k x|^2 / (2 mu)``, minimised at ``x_i = sqrt(1 - k_i^2 / mu)`` from ``x > 0``."""
    return np.asarray(((X * X - 1.0) ** 2 / 4.0).sum(axis=1) + (Y * (_K * X)).sum(axis=1) - 0.5 * _MU * (Y * Y).sum(axis=1))


def test_nested_minimax_reaches_the_closed_form() -> None:
    calls: list[int] = []

    def F(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        calls.append(X.shape[0])
        return _double_well(X, Y)

    prob = zoframe.Minimax(F, x0=np.full(3, 0.5), y0=np.zeros(3))
    res = zoframe.minimize(prob, "nested-lbfgsb-fd", rng=0, max_calls=20000)
    xstar = np.sqrt(1.0 - _K**2 / _MU)
    assert res.success and res.status is Status.CONVERGED, res.message
    assert np.abs(res.x - xstar).max() <= 1e-5
    assert np.abs(res.outputs["y"] - _K * res.x / _MU).max() <= 1e-6  # the inner maximiser at the final x
    assert res.certificate is not None and res.certificate["kind"] == "minimax"
    assert res.nfev_by_kind == {"minimax": res.nfev}
    # the inner L-BFGS-B asks value and gradient together: one batch of 1 + d_y = 4 pairs per request; besides,
    # the trace's measures (one pair) and the certificate (which solves the inner maximum again, outside the budget)
    assert {1, 4} <= set(calls)
    assert res.nfev_by_purpose["peer"] == res.nfev and res.nfev_by_purpose["certify"] > 0


def test_nested_minimax_on_a_simplex_matches_a_reference() -> None:
    """A smoothed minimax location problem: ``F(x, y) = sum_j y_j |x - c_j|^2 - (mu / 2)|y|^2``, ``y`` in the
    simplex (projected inner ascent). Reference: ``Phi`` in closed form (``y* = P_simplex(q / mu)``) by BFGS."""
    from scipy.optimize import minimize

    C = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 1.5], [1.5, 2.0]])
    mu = 0.5

    def F(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        q = ((X[:, None, :] - C[None]) ** 2).sum(axis=2)
        return np.asarray((Y * q).sum(axis=1) - 0.5 * mu * (Y * Y).sum(axis=1))

    def phi(x: np.ndarray) -> tuple[float, np.ndarray]:
        q = ((x - C) ** 2).sum(axis=1)
        y = project_simplex(q / mu)
        return float(y @ q - 0.5 * mu * y @ y), (2.0 * y[:, None] * (x - C)).sum(axis=0)

    ref = minimize(phi, np.array([0.3, 0.2]), jac=True, method="BFGS", options={"gtol": 1e-12})
    prob = zoframe.Minimax(F, x0=np.array([0.3, 0.2]), y0=np.full(4, 0.25), y_set=Simplex(4))
    res = zoframe.minimize(prob, "nested-lbfgsb-fd", rng=0, max_calls=20000)
    assert res.success, res.message
    assert np.abs(res.x - ref.x).max() <= 1e-6
    y_ref = project_simplex(((ref.x - C) ** 2).sum(axis=1) / mu)
    assert np.abs(res.outputs["y"] - y_ref).max() <= 1e-6 and Simplex(4).contains(res.outputs["y"], 1e-12)


def test_nested_minimax_in_boxes_and_a_ball() -> None:
    """A box on y (L-BFGS-B inner, with bounds), a ball on y (projected inner), a box on x (outer bounds)."""
    yb = zoframe.Minimax(_double_well, x0=np.full(3, 0.5), y0=np.zeros(3), y_set=Box(3, -0.1, 0.1))
    res = zoframe.minimize(yb, "nested-lbfgsb-fd", rng=0, max_calls=20000)
    # y* = clip(k x / mu, -0.1, 0.1) = 0.1 for each coordinate at the solution: x_i^3 - x_i + 0.1 k_i = 0
    assert res.success and np.array_equal(res.outputs["y"], np.full(3, 0.1)), res.message
    assert np.abs(res.x**3 - res.x + 0.1 * _K).max() <= 1e-5
    ball = zoframe.Minimax(_double_well, x0=np.full(3, 0.5), y0=np.zeros(3), y_set=Ball(3, 0.05))
    res = zoframe.minimize(ball, "nested-lbfgsb-fd", rng=0, max_calls=20000)
    assert res.success, res.message
    assert abs(float(np.linalg.norm(res.outputs["y"])) - 0.05) <= 1e-9  # the ball's boundary is active

    class _XBox:
        kind, n, dim, dim_y, monitor_free = "minimax", 1, 3, 3, True
        x0, y0, y_set = np.full(3, 0.5), np.zeros(3), None
        feasible_set = Box(3, 0.0, 0.8)

        def values(self, X: np.ndarray, Y: np.ndarray, idx: np.ndarray) -> np.ndarray:
            return _double_well(X, Y)[:, None]

        def measures(self, outputs: Any, monitor: Any) -> dict[str, float]:
            return {"fun": float(monitor.minimax(outputs["x"], outputs["y"]).mean())}

    res = zoframe.minimize(_XBox(), "nested-lbfgsb-fd", rng=0, max_calls=20000)
    xstar = np.minimum(np.sqrt(1.0 - _K**2 / _MU), 0.8)
    assert res.success and np.abs(res.x - xstar).max() <= 1e-5, res.message


def test_nested_minimax_unbounded_inner_problem_diverges() -> None:
    prob = zoframe.Minimax(lambda X, Y: (X * X).sum(axis=1) + Y.sum(axis=1), x0=np.ones(2), y0=np.zeros(2))
    res = zoframe.minimize(prob, "nested-lbfgsb-fd", rng=0, max_calls=20000)
    assert res.status is Status.DIVERGED and not res.success and "ran away" in res.message, res.message


def test_nested_minimax_resumes_from_a_checkpoint(tmp_path: Any) -> None:
    prob = zoframe.Minimax(_double_well, x0=np.full(3, 0.5), y0=np.zeros(3))
    straight = zoframe.minimize(prob, "nested-lbfgsb-fd", rng=4, max_calls=20000, points_per_step=40, record_every=0)
    path = f"{tmp_path}/nested"
    part = zoframe.minimize(prob, "nested-lbfgsb-fd", rng=4, max_iter=5, checkpoint=path, points_per_step=40,
                            record_every=0)
    assert part.status is Status.MAX_ITER
    resumed = zoframe.minimize(prob, "nested-lbfgsb-fd", max_calls=20000, resume=path, points_per_step=40,
                               record_every=0)
    assert np.array_equal(straight.x, resumed.x) and straight.nfev == resumed.nfev
    assert np.array_equal(straight.outputs["y"], resumed.outputs["y"]) and resumed.success


# --------------------------------------------------------------------------- the driver's thread
def _same(a: Result, b: Result) -> None:
    assert np.array_equal(a.x, b.x) and a.fun == b.fun and (a.nit, a.nfev) == (b.nit, b.nfev)
    assert (a.status, a.success, a.message) == (b.status, b.success, b.message)
    assert a.nfev_by_purpose == b.nfev_by_purpose


@pytest.mark.parametrize("solver", ["lbfgsb-fd", "pybobyqa"])
def test_the_driver_thread_path_gives_the_threaded_run(solver: str) -> None:
    from zoframe_peers.smooth import LBFGSBFD, PyBOBYQA

    cls: Callable[..., Any] = {"lbfgsb-fd": LBFGSBFD, "pybobyqa": PyBOBYQA}[solver]
    for prob, budget in ((_LeastSquares(dim=4, n=3), 3 * 500), (_quadratic_in_a_box()[0], 57)):
        threaded = cls(points_per_step=7)
        here = threaded.unobserved_steps()
        runs = [build_run(prob, s, watched=True, rng=0, record_every=0, max_calls=budget).run() for s in (threaded, here)]
        _same(*runs)
