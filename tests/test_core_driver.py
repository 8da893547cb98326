"""minimize(): budgets, results, determinism, callback, trace, checkpoints, failures, bad input."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

import zoframe
from zoframe import (
    IncompatibleProblemError,
    InvalidInputError,
    InvalidParameterError,
    RunFailedError,
    Status,
    UnknownNameError,
)
from zoframe.observers.trace import next_on_grid, record_iterations
from zoframe.oracle import CountingOracle
from zoframe.testing.problems import SmokeFiniteSum, SmokeMinimax, smoke_problem


def ls_problem() -> zoframe.FiniteSum:
    rng = np.random.default_rng(0)
    A = rng.standard_normal((50, 5))
    b = A @ np.arange(5.0)
    return zoframe.FiniteSum(lambda X, idx: (X @ A[idx].T - b[idx]) ** 2, n=50, x0=np.zeros(5))


def test_result_has_scipy_fields_and_zo_fields() -> None:
    res = zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", rng=1, max_iter=300, eta=0.01, q=10, batch=10)
    # a budget stop is not a certificate: success is reserved for CONVERGED (and feasible) runs
    assert not res.success and res.status is Status.MAX_ITER and res.status.budget and res.nit == 300
    assert res.feasible is None and res.feasibility_tol is None
    assert res.nfev == 300 * 11 * 10 == res.nfev_by_kind["objective"]
    assert res.nfev_by_purpose["estimate"] == res.nfev and res.nfev_by_purpose["monitor"] > 0
    assert res.seed == 1 and res.solver == "zo-sgd"
    assert res.fun < 0.05 * res.trace["fun"][0]  # it optimised
    assert res.fun_best <= res.fun + 1e-12 and res.x_best.shape == (5,)
    assert set(res.trace.names) >= {"iteration", "calls", "seconds", "fun"}
    assert "Result(solver='zo-sgd'" in repr(res)


def test_same_seed_is_bit_identical_and_other_seed_differs() -> None:
    kw = {"max_iter": 50, "eta": 0.01, "batch": 5}
    a = zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", rng=7, **kw)
    b = zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", rng=7, **kw)
    c = zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", rng=8, **kw)
    assert np.array_equal(a.x, b.x) and np.array_equal(a.trace["fun"], b.trace["fun"])
    assert not np.array_equal(a.x, c.x)


def test_seed_none_is_recorded_and_reproduces() -> None:
    a = zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", max_iter=20)
    assert isinstance(a.seed, int)
    b = zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", rng=a.seed, max_iter=20)
    assert np.array_equal(a.x, b.x)


def test_refuses_to_run_unbounded() -> None:
    with pytest.raises(InvalidInputError, match="refusing to run unbounded"):
        zoframe.minimize(ls_problem(), "zo-sgd")


def test_max_calls_is_exact() -> None:
    res = zoframe.minimize(SmokeFiniteSum(n=50), "zo-sgd", steps="paper", rng=0, max_calls=1000, max_iter=10**6, batch=10, q=10)
    assert res.status is Status.BUDGET and not res.success and "max_calls=1000" in res.message
    assert res.nfev == 990 and res.nit == 9  # the 10th estimate (110 calls) would exceed 1000
    assert res.nfev_by_purpose["monitor"] == 7 * 50  # records at 0, 1, 2, 3, 5, 7 and the last (9), not charged


def test_smoke_problems_are_monitor_free_and_their_measures_cost_no_budget() -> None:
    """The smoke problems are white-box formulas: a call budget goes to the solver whole."""
    for kind in ("finite_sum", "constrained", "minimax", "composite"):
        assert smoke_problem(kind).monitor_free is True, kind
    # the same white-box functions wrapped as a user's black box pay their records from max_calls
    smoke = SmokeFiniteSum(n=50)
    black = zoframe.FiniteSum(lambda X, idx: smoke.components(X, idx), n=50, x0=smoke.x0)
    kw: dict[str, Any] = {"rng": 0, "max_calls": 1000, "max_iter": 10**6, "batch": 10, "q": 10}
    free, paid = zoframe.minimize(smoke, "zo-sgd", steps="paper", **kw), zoframe.minimize(black, "zo-sgd", steps="paper", **kw)
    assert free.nfev == 990 and paid.nfev + paid.nfev_by_purpose["monitor"] <= 1000 and paid.nfev < free.nfev


def test_monitoring_a_black_box_is_paid_from_max_calls() -> None:
    # ls_problem is a user black box (n = 50): each record is 50 real calls
    kw: dict[str, Any] = {"rng": 0, "max_calls": 1000, "max_iter": 10**6, "batch": 10, "q": 10}
    res = zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", record_every=0, **kw)
    monitor = res.nfev_by_purpose["monitor"]
    assert res.status is Status.BUDGET and res.nfev + monitor <= 1000
    # the first record (50) is paid, and its cost is kept back for the final record: 900 for the solver
    assert res.nfev == 880 and res.nit == 8 and monitor == 100
    assert math.isfinite(res.fun) and res.trace["iteration"][-1] == 8
    # the default records at 0, 1, 2, 3 and 5 too, each paid: 5 * 50 spent and 50 kept back leave 700
    # for the solver, 6 steps of 110; the final record at 6 takes the 50 kept back
    grid = zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", **kw)
    assert list(grid.trace["iteration"]) == [0, 1, 2, 3, 5, 6]
    assert grid.nfev == 660 and grid.nfev_by_purpose["monitor"] == 300 and grid.status is Status.BUDGET
    # without a call budget nothing is held back, and the monitor's calls are still shown
    free = zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", rng=0, max_iter=8, batch=10, q=10, record_every=0)
    assert free.nfev == 880 and free.nfev_by_purpose["monitor"] == 100 and np.array_equal(free.x, res.x)


def test_a_record_the_budget_cannot_pay_is_skipped_not_failed() -> None:
    # 60 calls: the first record (50) fits, the solver's first batch (110) does not, the final
    # record needs no new evaluation (iteration 0 is already recorded)
    res = zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", rng=0, max_calls=60, max_iter=5, batch=10, q=10)
    assert res.status is Status.BUDGET and res.nit == 0 and res.nfev_by_purpose["monitor"] == 50
    # 40 calls: not even one record; the run still reports its start
    res = zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", rng=0, max_calls=40, max_iter=5, batch=10, q=10)
    assert res.status is Status.BUDGET and len(res.trace) == 0 and math.isnan(res.fun)
    assert res.nfev_by_purpose.get("monitor", 0) == 0 and np.array_equal(res.x, np.zeros(5))


def test_max_time_stops() -> None:
    res = zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", rng=0, max_time=0.05)
    assert res.status is Status.MAX_TIME and res.nit > 0


def test_callback_sees_iterations_and_can_stop() -> None:
    seen: list[int] = []

    def cb(info: zoframe.IterationInfo) -> bool:
        seen.append(info.iteration)
        return info.iteration == 7

    res = zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", rng=0, max_iter=100, callback=cb)
    assert res.status is Status.CALLBACK and res.nit == 7 and seen == list(range(1, 8))


def test_record_every_controls_the_trace() -> None:
    res = zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", rng=0, max_iter=20, record_every=5)
    assert list(res.trace["iteration"]) == [0, 5, 10, 15, 20]
    res0 = zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", rng=0, max_iter=20, record_every=0)
    assert list(res0.trace["iteration"]) == [0, 20]
    assert "iteration,calls,seconds,fun" in res.trace.to_csv().splitlines()[0]


def test_the_default_trace_records_on_a_geometric_grid(tmp_path: Path) -> None:
    grid = [0, 1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100]
    res = zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", rng=0, max_iter=123, batch=5)
    assert list(res.trace["iteration"]) == [*grid, 123] == record_iterations(None, 123)
    assert res.nfev_by_purpose["monitor"] == 14 * 50  # 14 records of the n = 50 components
    assert [next_on_grid(k) for k in (0, 7, 99, 100, 149, 700, 1_000_000)] == [1, 10, 100, 150, 150, 1000, 1_500_000]
    # a few records per decade, however long the run: 21 for 2000 iterations, 27 for 20 000
    assert len(record_iterations(None, 2000)) == 21 and len(record_iterations(None, 20_000)) == 27
    # a dense trace on request
    assert record_iterations(10, 35) == [0, 10, 20, 30, 35] and record_iterations(0, 35) == [0, 35]
    # a budget stop records where it stopped; a resumed run records on the same grid as a straight one
    free = SmokeFiniteSum(n=50)  # monitor_free: the records cost no budget
    stop = zoframe.minimize(free, "zo-sgd", steps="paper", rng=0, max_calls=41 * 11 * 5 + 7, batch=5)
    assert stop.nit == 41 and list(stop.trace["iteration"]) == [*grid[:10], 41]
    ck = tmp_path / "run"
    zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", rng=0, max_iter=12, batch=5, checkpoint=ck)
    rest = zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", max_iter=123, batch=5, resume=ck)
    assert list(rest.trace["iteration"]) == [*grid[:7], 12, *grid[7:], 123]
    assert np.array_equal(rest.x, res.x) and np.array_equal(rest.trace["fun"][[0, 1, 2, 3, 4, 5, 6, 8]],
                                                             res.trace["fun"][:8])


def test_checkpoint_and_resume_reach_the_same_final_x(tmp_path: Path) -> None:
    kw = {"eta": 0.01, "batch": 5, "record_every": 10}
    full = zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", rng=3, max_iter=60, **kw)
    ck = tmp_path / "run"
    part = zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", rng=3, max_iter=25, checkpoint=ck, checkpoint_every=10, **kw)
    assert part.nit == 25 and (tmp_path / "run.npz").exists() and (tmp_path / "run.json").exists()
    rest = zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", max_iter=60, resume=ck, **kw)
    assert np.array_equal(rest.x, full.x) and rest.nfev == full.nfev and rest.nit == 60
    assert rest.seed == 3
    # the resumed trace holds every record of the straight run (plus the stop at 25)
    assert set(full.trace["iteration"]) <= set(rest.trace["iteration"]) == {0, 10, 20, 25, 30, 40, 50, 60}
    with open(tmp_path / "run.npz", "rb") as fh:  # the checkpoint holds no pickles
        np.load(fh, allow_pickle=False)


@dataclasses.dataclass(frozen=True)
class _WalkState:
    x: np.ndarray
    fx: float


@dataclasses.dataclass(frozen=True)
class _RandomWalk:
    """A solver object defined here and registered nowhere: a random walk that keeps improvements."""

    problem_kinds: ClassVar[frozenset[str]] = frozenset({"finite_sum"})
    sigma: float = 0.5

    def init(self, oracle: CountingOracle, x0: np.ndarray, rng: np.random.Generator) -> _WalkState:
        return _WalkState(np.array(x0, dtype=np.float64, copy=True), float(oracle.objective(x0[None, :]).mean()))

    def step(self, oracle: CountingOracle, state: _WalkState, rng: np.random.Generator) -> _WalkState:
        y = state.x + self.sigma * rng.standard_normal(state.x.shape)
        fy = float(oracle.objective(y[None, :]).mean())
        return _WalkState(y, fy) if fy < state.fx else state


def test_an_unregistered_solver_object_resumes_its_checkpoint(tmp_path: Path) -> None:
    """The state class of a solver known to no registry is rebuilt from the solver object's own module."""
    solver = _RandomWalk(sigma=0.3)
    full = zoframe.minimize(ls_problem(), solver, rng=5, max_iter=40)
    ck = tmp_path / "walk"
    part = zoframe.minimize(ls_problem(), solver, rng=5, max_iter=15, checkpoint=ck)
    assert part.nit == 15 and not np.array_equal(part.x, full.x)
    rest = zoframe.minimize(ls_problem(), solver, max_iter=40, resume=ck)
    assert rest.nit == 40 and rest.seed == 5 and rest.nfev == full.nfev
    assert np.array_equal(rest.x, full.x) and rest.fun < part.fun


def test_resume_with_another_solver_is_refused(tmp_path: Path) -> None:
    zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", rng=3, max_iter=5, checkpoint=tmp_path / "c")
    with pytest.raises(InvalidInputError, match="written by solver 'zo-sgd'"):
        zoframe.minimize(ls_problem(), "zo-signsgd", steps="paper", max_iter=10, resume=tmp_path / "c")


def test_a_run_that_fails_midway_keeps_what_it_had() -> None:
    state = {"calls": 0}

    def f(X: np.ndarray) -> np.ndarray:
        state["calls"] += 1
        out = ((X - 1.0) ** 2).sum(axis=1)
        if state["calls"] > 12:
            out[0] = np.nan
        return out

    prob = zoframe.FiniteSum(f, x0=np.zeros(3))
    with pytest.raises(RunFailedError, match="NonFiniteValueError") as info:
        zoframe.minimize(prob, "zo-sgd", steps="paper", rng=0, max_iter=100, record_every=0)
    partial = info.value.result
    assert partial.status is Status.FAILED and partial.nit >= 5 and np.all(np.isfinite(partial.x))
    assert isinstance(info.value.__cause__, zoframe.NonFiniteValueError)


def test_incompatible_kind_fails_before_any_evaluation() -> None:
    calls: list[int] = []

    def F(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        calls.append(1)
        return X.sum(1)

    prob = zoframe.Minimax(F, x0=np.zeros(2), y0=np.zeros(2))
    with pytest.raises(IncompatibleProblemError, match="does not accept 'minimax' problems"):
        zoframe.minimize(prob, "zo-sgd", steps="paper", max_iter=5)
    assert calls == []


def test_unknown_solver_suggests_names() -> None:
    with pytest.raises(UnknownNameError, match=r"Did you mean 'zo-sgd'.*Known solvers: .*zo-signsgd"):
        zoframe.minimize(ls_problem(), "zo-sdg", max_iter=5)


def test_bad_parameters_fail_before_any_evaluation() -> None:
    with pytest.raises(InvalidParameterError, match="eta"):
        zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", max_iter=5, eta=-1.0)
    with pytest.raises(InvalidParameterError, match="mu"):
        zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", max_iter=5, mu=0.0)
    with pytest.raises(InvalidParameterError, match="larger than the number of components"):
        zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", max_iter=5, batch=51)
    with pytest.raises(InvalidInputError, match="Valid parameters"):
        zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", max_iter=5, etta=0.1)
    with pytest.raises(InvalidInputError, match=r"x0 must have shape \(5,\)"):
        zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", max_iter=5, x0=np.zeros(4))
    with pytest.raises(InvalidInputError, match="max_iter"):
        zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", max_iter=0)


def test_estimator_by_name_and_instance() -> None:
    a = zoframe.minimize(SmokeFiniteSum(), "zo-sgd", steps="paper", estimator="coordinate", rng=0, max_iter=3)
    assert a.nfev == 3 * 2 * 4 * 8
    b = zoframe.minimize(SmokeFiniteSum(), "zo-sgd", steps="paper", estimator=zoframe.SphereEstimator(q=2), rng=0, max_iter=3)
    assert b.nfev == 3 * 3 * 8


def test_caller_x0_is_not_modified_and_problem_builders_work() -> None:
    x0 = np.array([3.0, -2.0])
    prob = zoframe.FiniteSum(lambda x: float(((x - 1.0) ** 2).sum()), x0=x0, vectorized=False)
    res = zoframe.minimize(prob, "zo-sgd", steps="paper", rng=0, max_iter=200, eta=0.1, x0=x0)
    assert np.array_equal(x0, [3.0, -2.0]) and np.allclose(res.x, 1.0, atol=0.05)


def test_projection_onto_a_feasible_set() -> None:
    from zoframe.sets import Box

    prob = zoframe.FiniteSum(lambda X: ((X - 2.0) ** 2).sum(1), x0=np.zeros(3), feasible_set=Box(3, -1.0, 1.0))
    res = zoframe.minimize(prob, "zo-sgd", steps="paper", rng=0, max_iter=300, eta=0.05)
    assert np.allclose(res.x, 1.0, atol=1e-6)


def test_progress_bar_does_not_break_a_run() -> None:
    res = zoframe.minimize(SmokeFiniteSum(), "zo-sgd", steps="paper", rng=0, max_iter=10, progress=True)
    assert res.nit == 10


def test_budget_exhausted_during_init_reports_the_start() -> None:
    res = zoframe.minimize(SmokeFiniteSum(), "zo-sgd", steps="paper", rng=0, max_calls=5, max_iter=10)
    assert res.status is Status.BUDGET and res.nit == 0 and np.array_equal(res.x, np.zeros(4))
    assert math.isfinite(res.fun)


def test_minimax_problem_builder_validates_the_set() -> None:
    with pytest.raises(InvalidInputError, match="project"):
        zoframe.Minimax(lambda X, Y: X.sum(1), x0=np.zeros(2), y0=np.zeros(2), y_set=object())  # type: ignore[arg-type]
    assert SmokeMinimax().dim_y == 2


def test_composite_builder_checks_shapes() -> None:
    from zoframe.penalties import L1

    with pytest.raises(zoframe.ShapeError, match="B_0 must have 3 rows"):
        zoframe.Composite(lambda X: X.sum(1), x0=np.zeros(2), A=np.ones((3, 2)), B=[np.eye(2)], c=np.zeros(3), penalties=[L1()])
    class NoProx:
        def value(self, y: np.ndarray) -> float:
            return 0.0

    with pytest.raises(InvalidInputError, match=r"has no prox\(\) method"):
        zoframe.Composite(lambda X: X.sum(1), x0=np.zeros(2), A=np.eye(2), B=[np.eye(2)], c=np.zeros(2), penalties=[NoProx()])  # type: ignore[list-item]
