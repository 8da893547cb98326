"""The lean paths of a run: the estimators' ``gradient``, the solvers' use of it, the run loop's step loop.

Each one must give what the general path gives, bit for bit, and step aside whenever it cannot
(another estimator, a subclass that redefines ``estimate``, a solver with its own ``terminate``,
observers after each step).
"""

from __future__ import annotations

from dataclasses import dataclass
import time
from typing import Any, ClassVar

import numpy as np
import pytest
import threadpoolctl

import zoframe
from zoframe import Status
from zoframe.asktell import Run
from zoframe.estimators import Estimate, GaussianEstimator, SphereEstimator
from zoframe.oracle import CountingOracle
from zoframe.solver import SolverBase
from zoframe_basic.problems import LeastSquares
from zoframe_basic.solvers import ZOSGD, ZOSignSGD, _gradient_at


def _ls() -> LeastSquares:
    return LeastSquares(dim=9, n=60, seed=4)


# ----------------------------------------------------------------------------- estimators
@pytest.mark.parametrize("cls", [GaussianEstimator, SphereEstimator])
@pytest.mark.parametrize("q", [1, 4, 11])
@pytest.mark.parametrize("b", [1, 7, 60])
def test_gradient_is_estimates_grad_bit_for_bit(cls: Any, q: int, b: int) -> None:
    prob = _ls()
    est = cls(q=q, mu=3e-3)
    idx = np.arange(b)
    fun = lambda X: prob.components(X, idx)  # noqa: E731
    for seed in range(5):
        x = np.random.default_rng(seed).standard_normal(9)
        g = est.gradient(fun, x, np.random.default_rng(seed + 100))
        ref = est.estimate(fun, x, np.random.default_rng(seed + 100)).grad
        assert g.shape == (9,) and np.array_equal(g, ref)


@pytest.mark.parametrize("cls", [GaussianEstimator, SphereEstimator])
@pytest.mark.parametrize("b", [None, 1, 13])
def test_oracle_gradient_is_estimates_grad_bit_for_bit(cls: Any, b: int | None) -> None:
    prob = _ls()
    est = cls(q=5, mu=2e-3)
    for owned in (False, True):
        oracle = CountingOracle(prob)
        ref_oracle = CountingOracle(prob)
        for seed in range(4):
            x = np.random.default_rng(seed).standard_normal(9)
            idx = None if b is None else oracle.sample(b, np.random.default_rng(seed))
            evaluate = oracle.objective_owned if owned else oracle.objective
            g = est.oracle_gradient(evaluate, idx, x, np.random.default_rng(seed + 7))
            ref = est.estimate(lambda X, i=idx, o=ref_oracle: o.objective(X, i), x, np.random.default_rng(seed + 7)).grad
            assert np.array_equal(g, ref)
        assert oracle.snapshot() == ref_oracle.snapshot()


def test_minimize_takes_the_lean_path(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("estimate() called on the lean path")

    monkeypatch.setattr(GaussianEstimator, "estimate", refuse)
    res = zoframe.minimize(_ls(), "zo-sgd", steps="paper", rng=0, max_iter=5, batch=7, record_every=0)
    assert res.nit == 5


def test_gradient_takes_one_value_per_point_and_other_inputs_through_estimate() -> None:
    est = GaussianEstimator(q=3, mu=1e-2)
    fun = lambda X: (X * X).sum(axis=1)  # noqa: E731  # (k,) values: one component
    x = np.array([0.5, -1.0, 2.0])
    assert np.array_equal(est.gradient(fun, x, np.random.default_rng(0)),
                          est.estimate(fun, x, np.random.default_rng(0)).grad)
    as_list = est.gradient(fun, [0.5, -1.0, 2.0], np.random.default_rng(0))  # type: ignore[arg-type]
    assert np.array_equal(as_list, est.estimate(fun, x, np.random.default_rng(0)).grad)
    two = np.stack([x, 2 * x])  # several base points: estimate's (P, d) gradient
    assert est.gradient(fun, two, np.random.default_rng(0)).shape == (2, 3)


def test_gradient_warns_of_underflow_only_when_every_difference_is_zero() -> None:
    x = np.full(3, 1e20)
    with pytest.warns(zoframe.errors.EstimatorUnderflowWarning, match="x \\+ mu\\*u == x"):
        g = GaussianEstimator(q=2, mu=1e-3).gradient(lambda X: (X * X).sum(axis=1), x, np.random.default_rng(0))
    assert not g.any()
    # row sums of 0 from differences that are not: the true estimate (0 here), silently
    flat = np.zeros(4)
    fun = lambda X: np.stack([X[:, 0], -X[:, 0]], axis=1)  # noqa: E731  # two components that cancel
    g = GaussianEstimator(q=3, mu=1e-2).gradient(fun, flat, np.random.default_rng(1))
    assert np.array_equal(g, GaussianEstimator(q=3, mu=1e-2).estimate(fun, flat, np.random.default_rng(1)).grad)


@dataclass(frozen=True)
class FixedDirections(GaussianEstimator):
    """The first direction is 0: its differences are 0 while the others' are not."""

    def directions(self, dim: int, rng: np.random.Generator) -> np.ndarray:
        U = np.zeros((self.q, dim))
        U[1:] = rng.standard_normal((self.q - 1, dim))
        return U


def test_a_zero_first_row_of_differences_is_not_underflow() -> None:
    est = FixedDirections(q=3, mu=1e-2)
    assert est.plain_estimate
    fun = lambda X: (X * X).sum(axis=1)  # noqa: E731
    x = np.array([0.3, -0.2, 1.0])
    g = est.gradient(fun, x, np.random.default_rng(0))  # warnings are errors in the test suite
    assert g.any() and np.array_equal(g, est.estimate(fun, x, np.random.default_rng(0)).grad)


@dataclass(frozen=True)
class CountingGaussian(GaussianEstimator):
    """Redefines estimate: the lean gradient must not bypass it."""

    calls: list[int] | None = None

    def estimate(self, fun: Any, x: Any, rng: np.random.Generator, *, mu: float | None = None,
                 per_component: bool = False) -> Estimate:
        if self.calls is not None:
            self.calls.append(1)
        return super().estimate(fun, x, rng, mu=mu, per_component=per_component)


def test_a_subclass_that_redefines_estimate_is_asked_through_it() -> None:
    assert GaussianEstimator.plain_estimate and SphereEstimator.plain_estimate
    assert not CountingGaussian.plain_estimate
    calls: list[int] = []
    est = CountingGaussian(q=4, mu=1e-3, calls=calls)
    est.gradient(lambda X: (X * X).sum(axis=1), np.ones(3), np.random.default_rng(0))
    assert calls == [1]
    res = zoframe.minimize(_ls(), "zo-sgd", steps="paper", rng=3, max_iter=25, batch=10, estimator=est, record_every=0)
    assert len(calls) == 26
    ref = zoframe.minimize(_ls(), "zo-sgd", steps="paper", rng=3, max_iter=25, batch=10, estimator=GaussianEstimator(q=4, mu=1e-3),
                           record_every=0)
    assert np.array_equal(res.x, ref.x)


def test_the_solvers_hand_over_their_points_only_from_the_plain_estimators() -> None:
    assert _gradient_at(ZOSGD())[1] is True
    assert _gradient_at(ZOSGD(estimator=SphereEstimator(q=2)))[1] is True
    assert _gradient_at(ZOSignSGD())[1] is True
    assert _gradient_at(ZOSGD(estimator=CountingGaussian(q=2)))[1] is False
    assert _gradient_at(ZOSGD(estimator=zoframe.estimators.CoordinateEstimator()))[1] is False
    solver = ZOSGD(q=3)
    assert _gradient_at(solver) is _gradient_at(solver)  # resolved once per solver


def test_the_points_handed_over_are_the_estimators_own() -> None:
    """The oracle may keep the matrix it is given: the lean path gives it a fresh one each call."""
    prob = _ls()
    oracle = CountingOracle(prob)
    seen: list[np.ndarray] = []
    est = GaussianEstimator(q=3, mu=1e-3)
    x = np.zeros(9)

    def fun(X: np.ndarray) -> np.ndarray:
        seen.append(X)
        return oracle.objective_owned(X, None)

    est.gradient(fun, x, np.random.default_rng(0))
    est.gradient(fun, x, np.random.default_rng(0))
    assert seen[0] is not seen[1] and not np.shares_memory(seen[0], seen[1])
    assert not seen[0].flags.writeable and not np.shares_memory(seen[0], x)
    assert np.array_equal(x, np.zeros(9))


# ----------------------------------------------------------------------------- the run loop
@dataclass(frozen=True)
class _S:
    x: np.ndarray


@dataclass(frozen=True)
class Halving(SolverBase):
    """x /= 2 per step, no evaluations; optionally stops itself or fails at given iterations."""

    problem_kinds: ClassVar[frozenset[str]] = frozenset({"finite_sum"})
    stop_below: float = 0.0
    fail_at: int = 0

    def init(self, oracle: Any, x0: np.ndarray, rng: np.random.Generator) -> _S:
        return _S(np.array(x0, dtype=np.float64))

    def step(self, oracle: Any, state: _S, rng: np.random.Generator) -> _S:
        if self.fail_at and abs(state.x[0] - 2.0**-(self.fail_at - 1)) < 1e-300:
            raise RuntimeError("boom")
        return _S(state.x / 2.0)


@dataclass(frozen=True)
class HalvingUntil(Halving):
    def terminate(self, state: _S) -> str | None:
        return "small enough" if state.x[0] < self.stop_below else None


def _unit() -> Any:
    return zoframe.FiniteSum(lambda X: (X * X).sum(axis=1), x0=np.ones(2))


def test_solver_base_terminate_is_skipped_and_a_redefined_one_is_called() -> None:
    res = zoframe.minimize(_unit(), Halving(), max_iter=12, record_every=0)
    assert res.status is Status.MAX_ITER and res.nit == 12 and res.x[0] == 2.0**-12
    res = zoframe.minimize(_unit(), HalvingUntil(stop_below=0.01), max_iter=50, record_every=0)
    assert res.status is Status.CONVERGED and res.nit == 7 and res.message.startswith("small enough")


def test_a_failing_step_keeps_the_last_completed_iteration() -> None:
    with pytest.raises(zoframe.RunFailedError) as info:
        zoframe.minimize(_unit(), Halving(fail_at=6), max_iter=50, record_every=0)
    res = info.value.result
    assert res.status is Status.FAILED and res.nit == 5 and res.x[0] == 2.0**-5


def test_max_time_counts_the_solvers_time() -> None:
    @dataclass(frozen=True)
    class Slow(Halving):
        def step(self, oracle: Any, state: _S, rng: np.random.Generator) -> _S:
            time.sleep(0.002)
            return _S(state.x / 2.0)

    res = zoframe.minimize(_unit(), Slow(), max_time=0.02, record_every=0)
    assert res.status is Status.MAX_TIME and 1 <= res.nit <= 11  # each step sleeps at least 2 ms
    assert res.trace["seconds"][-1] >= 0.02


def test_ask_tell_snapshot_without_observers_shows_the_last_completed_iteration() -> None:
    prob = _ls()
    run = Run(prob, "zo-sgd", steps="paper", rng=0, max_iter=6, batch=5, q=2, record_every=0)
    ref = zoframe.minimize(prob, "zo-sgd", steps="paper", rng=0, max_iter=3, batch=5, q=2, record_every=0)
    done, snapped = 0, False
    while (req := run.ask()) is not None:
        if req.purpose == "estimate":
            if done == 3:  # the 4th step waits for its values: 3 are complete
                snap = run.result()
                assert snap.status is Status.RUNNING and snap.nit == 3 and np.array_equal(snap.x, ref.x)
                snapped = True
            done += 1
        run.tell(req, prob.components(req.points, req.indices))
    assert snapped and run.result().nit == 6


def test_the_blas_limit_holds_during_the_run_and_is_lifted_after() -> None:
    def blas_threads() -> set[int]:
        return {d["num_threads"] for d in threadpoolctl.threadpool_info() if d["user_api"] == "blas"}

    before = blas_threads()
    seen: list[set[int]] = []

    def cb(info: zoframe.IterationInfo) -> bool:
        seen.append(blas_threads())
        return True

    zoframe.minimize(_ls(), "zo-sgd", steps="paper", rng=0, max_iter=3, callback=cb)
    assert seen == [{1}] or not before
    assert blas_threads() == before


# ----------------------------------------------------------------------------- the least-squares problem
def test_least_squares_components_of_every_index_are_those_of_the_copy() -> None:
    prob = LeastSquares(dim=30, n=200, seed=1)
    rng = np.random.default_rng(0)
    everything = np.arange(200)
    for k in (1, 2, 11, 40):
        X = rng.standard_normal((k, 30))
        for idx in (everything, everything.astype(np.int32), rng.permutation(200), np.r_[0, 0, np.arange(2, 200)],
                    rng.choice(200, 17, replace=False)):
            r = X @ prob.A[idx].T - prob.b[idx]
            assert np.array_equal(prob.components(X, idx), r * r)


def test_least_squares_gradient_norm_is_that_of_the_doubled_matrix() -> None:
    """2 (A^T r) and (2 A^T) r are the same numbers (doubling is exact), at every scale of x."""
    for dim, n, seed in [(100, 1000, 0), (12, 150, 3), (3, 7, 1)]:
        prob = LeastSquares(dim=dim, n=n, seed=seed)
        oracle = CountingOracle(prob)
        rng = np.random.default_rng(seed)
        for _ in range(20):
            x = rng.standard_normal(dim) * 10.0 ** rng.uniform(-8, 8)
            g = 2.0 * prob.A.T @ (prob.A @ x - prob.b) / prob.n
            assert prob.measures({"x": x}, oracle.monitor)["grad_norm"] == float(np.linalg.norm(g))
