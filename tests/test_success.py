"""One meaning of success; non-finite iterates stop the run; IterationInfo names; estimator params; resume checks."""

from __future__ import annotations

from dataclasses import dataclass
import math
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

import zoframe
from zoframe import InvalidInputError, Status
from zoframe.result import decide_success


def quad() -> zoframe.FiniteSum:
    return zoframe.FiniteSum(lambda X: ((X - 1.0) ** 2).sum(axis=1), x0=np.zeros(3))


# ----------------------------------------------------------------------------- success
@pytest.mark.parametrize(
    ("budget", "status"),
    [({"max_iter": 5}, Status.MAX_ITER), ({"max_calls": 100, "max_iter": 10**6}, Status.BUDGET),
     ({"max_time": 0.02}, Status.MAX_TIME)],
)
def test_a_budget_stop_is_not_a_success_and_says_which_budget(budget: dict[str, float], status: Status) -> None:
    res = zoframe.minimize(quad(), "zo-sgd", steps="paper", rng=0, **budget)  # type: ignore[arg-type]
    assert res.status is status and status.budget and not res.success and not res.status.success
    assert np.all(np.isfinite(res.x))  # the run did not fail


def test_decide_success_refuses_non_finite_infeasible_and_budget_stops() -> None:
    x = np.zeros(2)
    assert decide_success(Status.CONVERGED, x, 1.0, None) == (True, "")
    assert decide_success(Status.CONVERGED, x, 1.0, True)[0]
    assert not decide_success(Status.CONVERGED, x, 1.0, False)[0]
    assert not decide_success(Status.CONVERGED, np.array([np.nan, 0.0]), 1.0, None)[0]
    assert not decide_success(Status.CONVERGED, x, math.inf, None)[0]
    ok, why = decide_success(Status.MAX_ITER, x, 1.0, None)
    assert not ok and "budget" in why
    assert not decide_success(Status.RUNNING, x, 1.0, None)[0]


@pytest.mark.filterwarnings("ignore:.*floating-point spacing")
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_divergence_with_a_large_step_is_never_a_success() -> None:
    res = zoframe.minimize(quad(), "zo-sgd", steps="paper", rng=0, max_iter=200, eta=10.0)
    assert not res.success and res.fun_best <= res.trace["fun"][0]


@pytest.mark.filterwarnings("ignore:.*floating-point spacing")
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_nonfinite_inf_stops_at_the_first_non_finite_iterate() -> None:
    # unbounded below and steep: the values overflow (-inf, read as +inf) at an iterate: the run ends there,
    # DIVERGED, on that last (finite) iterate, saying the function is not finite at it
    prob = zoframe.FiniteSum(lambda X: -np.exp(X.sum(axis=1)), x0=np.zeros(3))
    # divergence_limit=1e300: the run loop's own test of the iterate, not the solver's divergence test
    res = zoframe.minimize(prob, "zo-sgd", steps="paper", rng=0, max_iter=500, eta=1.0, nonfinite="inf", record_every=1,
                           divergence_limit=1e300)  # fmt: skip
    assert res.status is Status.DIVERGED and not res.success
    assert f"diverged at iteration {res.nit + 1}" in res.message and "not finite at the point" in res.message
    assert res.nit < 500 and np.all(np.isfinite(res.x))
    assert np.all(np.isfinite(res.x_best)) and math.isfinite(res.fun_best)
    # x_best is the best of the finite records, all made before the divergence
    fin = np.isfinite(res.trace["fun"])
    assert res.fun_best == np.min(res.trace["fun"][fin]) and res.trace["iteration"][-1] <= res.nit


@dataclass(frozen=True)
class _State:
    x: np.ndarray
    t: int


@dataclass(frozen=True)
class NaNAt:
    """A test solver that steps x -= 0.1 and sets x to NaN at iteration ``at`` (no evaluations)."""

    at: int = 3
    problem_kinds: ClassVar[frozenset[str]] = frozenset({"finite_sum"})

    def init(self, oracle: object, x0: np.ndarray, rng: np.random.Generator) -> _State:
        return _State(x0.copy(), 0)

    def step(self, oracle: object, state: _State, rng: np.random.Generator) -> _State:
        t = state.t + 1
        return _State(np.full_like(state.x, np.nan) if t >= self.at else state.x - 0.1, t)


@pytest.mark.parametrize("nonfinite", ["raise", "inf"])
def test_a_non_finite_iterate_stops_the_run_where_it_is_seen(nonfinite: str) -> None:
    res = zoframe.minimize(quad(), NaNAt(at=3), rng=0, max_iter=50, record_every=5, nonfinite=nonfinite)  # type: ignore[arg-type]
    assert res.status is Status.DIVERGED and not res.success
    if nonfinite == "inf":  # checked after every step
        assert res.nit == 3 and "became non-finite at iteration 3" in res.message
    else:  # checked at the trace records (the oracle sees a NaN point first when the solver evaluates)
        assert res.nit == 5 and "not finite at iteration 5" in res.message
    assert np.all(np.isfinite(res.x_best)) and np.allclose(res.x_best, 0.0)  # the recorded start
    assert math.isfinite(res.fun_best)


def test_a_constrained_budget_stop_at_an_infeasible_point_is_not_a_success() -> None:
    obj = lambda X: ((X - 2.0) ** 2).sum(axis=1)  # noqa: E731
    con = lambda X, idx: X[:, :1] - 1.0 + 0.0 * idx  # noqa: E731  x_0 <= 1
    prob = zoframe.Constrained(obj, con, m=1, x0=np.full(2, 3.0))
    # small_problem=0: three penalty steps from the infeasible start (the precision phase from x0 solves it in three)
    res = zoframe.minimize(prob, "dszog", rng=0, max_iter=3, small_problem=0)
    assert res.feasible is False and not res.success and res.status is Status.MAX_ITER


# ----------------------------------------------------------------------------- IterationInfo
def test_iteration_info_has_nit_and_the_iteration_alias() -> None:
    seen: list[tuple[int, int, int]] = []

    def cb(info: zoframe.IterationInfo) -> None:
        seen.append((info.nit, info.iteration, info.calls))

    res = zoframe.minimize(quad(), "zo-sgd", steps="paper", rng=0, max_iter=4, callback=cb, q=2)
    assert [s[0] for s in seen] == [1, 2, 3, 4] and all(a == b for a, b, _ in seen)
    assert seen[-1][0] == res.nit and seen[-1][2] == res.nfev


# ----------------------------------------------------------------------------- estimator params
def test_estimator_params_reach_the_estimator() -> None:
    res = zoframe.minimize(quad(), "zo-sgd", steps="paper", estimator="gaussian", estimator_params={"q": 3}, rng=0, max_iter=5)
    assert res.nfev == 5 * (3 + 1)
    default = zoframe.minimize(quad(), "zo-sgd", steps="paper", estimator="gaussian", rng=0, max_iter=5)
    assert default.nfev == 5 * (10 + 1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"estimator": "gaussian", "q": 3}, r"q=3 only configures the default estimator.*estimator_params"),
        ({"estimator": "sphere", "q": 3, "mu": 1e-4}, r"mu=0.0001, q=3 only configure"),
        ({"estimator": "gaussian", "estimator_params": {"qq": 3}}, r"bad estimator_params.*Valid parameters: q, mu"),
        ({"estimator_params": {"q": 3}}, r"needs estimator=NAME"),
        ({"estimator": zoframe.GaussianEstimator(q=2), "estimator_params": {"q": 3}}, r"cannot reach an estimator instance"),
    ],
)
def test_parameters_that_cannot_reach_their_target_are_errors(kwargs: dict[str, object], match: str) -> None:
    calls: list[int] = []

    def f(X: np.ndarray) -> np.ndarray:
        calls.append(len(X))
        return (X**2).sum(axis=1)

    prob = zoframe.FiniteSum(f, x0=np.zeros(2))
    with pytest.raises(InvalidInputError, match=match):
        zoframe.minimize(prob, "zo-sgd", steps="paper", rng=0, max_iter=3, **kwargs)  # type: ignore[arg-type]
    assert calls == []  # refused before any evaluation


# ----------------------------------------------------------------------------- resume
def test_resume_refuses_other_parameters_or_seed(tmp_path: Path) -> None:
    ck = tmp_path / "c"
    zoframe.minimize(quad(), "zo-sgd", steps="paper", rng=3, max_iter=5, eta=0.01, checkpoint=ck)
    with pytest.raises(InvalidInputError, match=r"other parameters.*eta: 0.01 in the checkpoint, 0.02 now"):
        zoframe.minimize(quad(), "zo-sgd", steps="paper", max_iter=10, eta=0.02, resume=ck)
    with pytest.raises(InvalidInputError, match=r"seed 3, not 4"):
        zoframe.minimize(quad(), "zo-sgd", steps="paper", rng=4, max_iter=10, eta=0.01, resume=ck)
    with pytest.raises(InvalidInputError, match="estimator"):
        zoframe.minimize(quad(), "zo-sgd", steps="paper", max_iter=10, eta=0.01, estimator="sphere", resume=ck)
    a = zoframe.minimize(quad(), "zo-sgd", steps="paper", rng=3, max_iter=10, eta=0.01, resume=ck)  # the same seed is fine
    b = zoframe.minimize(quad(), "zo-sgd", steps="paper", rng=3, max_iter=10, eta=0.01)
    assert np.array_equal(a.x, b.x)
