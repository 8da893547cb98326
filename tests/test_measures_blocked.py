"""The full feasibility pass in blocks (zoframe.measures.max_violation_full).

Exactness against one direct evaluation of all m constraints, independence of the block size,
bit-identical results serially, on a thread pool, a process pool and a dask client's executor,
how an oracle counts the pass (budget, monitor, user calls), ties in the top, and the errors on bad
input.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

import zoframe
from zoframe.errors import BudgetExhausted, InvalidInputError, NonFiniteValueError, ShapeError
from zoframe.measures import FullPass, max_violation_full
from zoframe.oracle import CountingOracle
from zoframe_constrained.problems import pairwise


@pytest.fixture(scope="module")
def prob() -> Any:
    return pairwise("gen", n_samples=240, seed=3)  # about 60 x 60 = 3,600 pair constraints


def _point(prob: Any, seed: int = 0, scale: float = 0.3) -> np.ndarray:
    out: np.ndarray = scale * np.random.default_rng(seed).standard_normal(prob.dim)
    return out


def _same(a: FullPass, b: FullPass) -> None:
    """Bit-identical results (everything but the clock)."""
    assert (a.max_violation, a.max_value, a.argmax, a.violated, a.checked, a.blocks) == (
        b.max_violation, b.max_value, b.argmax, b.violated, b.checked, b.blocks,
    )  # fmt: skip
    assert a.sum_violation == b.sum_violation and a.sumsq_violation == b.sumsq_violation
    assert np.array_equal(a.top_indices, b.top_indices) and np.array_equal(a.top_values, b.top_values)
    assert np.array_equal(a.above_indices, b.above_indices) and np.array_equal(a.above_values, b.above_values)


def test_matches_a_direct_evaluation_of_all_constraints(prob: Any) -> None:
    w = _point(prob)
    f = prob.constraints(w[None, :], np.arange(prob.m))[0]
    assert 0 < np.count_nonzero(f > 0) < prob.m  # some constraints hold, some do not
    res = max_violation_full(prob, w, block=97, tol=1e-3, top=25, above=0.05)
    assert res.checked == prob.m and res.blocks == -(-prob.m // 97)
    assert res.max_value == f.max() and res.max_violation == max(f.max(), 0.0)
    assert res.argmax == int(np.argmax(f))
    assert res.violated == int(np.count_nonzero(f > 1e-3))
    assert res.sum_violation == pytest.approx(np.maximum(f, 0.0).sum(), rel=1e-12)
    assert res.mean_violation == pytest.approx(np.maximum(f, 0.0).mean(), rel=1e-12)
    assert res.sumsq_violation == pytest.approx(float(np.sum(np.maximum(f, 0.0) ** 2)), rel=1e-12)
    assert res.frac_violated == pytest.approx(np.mean(f > 1e-3))
    order = np.lexsort((np.arange(prob.m), -f))[:25]
    assert np.array_equal(res.top_indices, order) and np.array_equal(res.top_values, f[order])
    kept = np.flatnonzero(f > 0.05)
    assert 0 < kept.size < prob.m
    assert np.array_equal(res.above_indices, kept)
    np.testing.assert_allclose(res.above_values, f[kept], rtol=1e-12)  # a small last block: the problem's other rounding path
    assert res.evaluations_per_second > 0 and res.seconds > 0


def test_agrees_with_the_exact_pairwise_violations(prob: Any) -> None:
    w = _point(prob, seed=1)
    res = max_violation_full(prob, w)
    exact = prob.violations(w)
    assert res.max_violation == pytest.approx(exact["max_violation"], rel=1e-12, abs=1e-15)
    assert res.frac_violated == pytest.approx(exact["frac_violated"])


def test_a_feasible_point_has_no_violation(prob: Any) -> None:
    res = max_violation_full(prob, np.zeros(prob.dim) - 0.0, tol=0.0)  # f_j(0) = margin = 0: none > 0
    assert res.max_violation == 0.0 and res.violated == 0 and res.sum_violation == res.sumsq_violation == 0.0


@pytest.mark.parametrize("block", [61, 333, 1000, 10**6])
def test_the_block_size_changes_nothing_but_the_blocks(prob: Any, block: int) -> None:
    # blocks of more than (n_pos + n_neg) / 2 pairs: the problem scores samples once, whatever the
    # block (a smaller batch takes pair differences first, which rounds differently)
    w = _point(prob, seed=2)
    ref = max_violation_full(prob, w, block=512, top=10)
    res = max_violation_full(prob, w, block=block, top=10)
    assert (res.max_value, res.argmax, res.violated) == (ref.max_value, ref.argmax, ref.violated)
    assert np.array_equal(res.top_indices, ref.top_indices)
    assert res.sum_violation == pytest.approx(ref.sum_violation, rel=1e-12)


def test_thread_and_process_pools_are_bit_identical_to_serial(prob: Any) -> None:
    w = _point(prob, seed=4)
    serial = max_violation_full(prob, w, block=101, top=7, above=0.0)
    with ThreadPoolExecutor(2) as ex:
        _same(serial, max_violation_full(prob, w, block=101, top=7, above=0.0, executor=ex))
        _same(serial, max_violation_full(prob, w, block=101, top=7, above=0.0, executor=ex, tasks=5))
    with ProcessPoolExecutor(2) as ex:
        _same(serial, max_violation_full(prob, w, block=101, top=7, above=0.0, executor=ex))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_dask_executor_is_bit_identical_to_serial(prob: Any) -> None:
    distributed = pytest.importorskip("distributed", reason="the zoframe[distributed] extra is not installed")
    w = _point(prob, seed=5)
    serial = max_violation_full(prob, w, block=257, top=3, above=0.1)
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None) as client:
        _same(serial, max_violation_full(prob, w, block=257, top=3, above=0.1, executor=client.get_executor(), tasks=4))


def test_an_oracle_counts_the_pass_against_its_budget(prob: Any) -> None:
    w = _point(prob)
    oracle = CountingOracle(prob)
    res = max_violation_full(oracle, w)
    _same(res, max_violation_full(prob, w))
    assert oracle.calls == prob.m and oracle.calls_by_purpose["verify"] == prob.m
    max_violation_full(oracle, w, purpose="restore")
    assert oracle.calls == 2 * prob.m and oracle.calls_by_purpose["restore"] == prob.m
    oracle = CountingOracle(prob)
    max_violation_full(oracle.monitor, w)
    assert oracle.calls == 0 and oracle.calls_by_purpose["monitor"] == prob.m  # outside the budget
    small = CountingOracle(prob, max_calls=prob.m - 1)
    with pytest.raises(BudgetExhausted):
        max_violation_full(small, w)
    assert small.calls == 0


def test_the_top_breaks_ties_by_index_across_blocks_and_tasks(prob: Any) -> None:
    """At x = 0 every f_j is 0: the top are the first indices, whatever the blocks and tasks."""
    zero = np.zeros(prob.dim)
    for block in (7, 100, 10**6):
        res = max_violation_full(prob, zero, block=block, top=25)
        assert np.array_equal(res.top_indices, np.arange(25)) and np.all(res.top_values == 0.0)
        with ThreadPoolExecutor(2) as ex:
            _same(res, max_violation_full(prob, zero, block=block, top=25, executor=ex, tasks=3))
    w = _point(prob, seed=6)
    f = prob.constraints(w[None, :], np.arange(prob.m))[0]
    for block in (5, 64, 999):  # many blocks merged into one running top per task: the exact top
        res = max_violation_full(prob, w, block=block, top=40)
        order = np.lexsort((np.arange(prob.m), -f))[:40]
        assert np.array_equal(res.top_indices, order)


def test_user_calls_count_the_blocks_and_a_budgeted_monitor_refuses_first(prob: Any) -> None:
    from zoframe.observers.trace import MonitorBudget

    w = _point(prob)
    oracle = CountingOracle(prob)
    max_violation_full(oracle, w, block=100)
    assert oracle.user_calls == -(-prob.m // 100)
    budget = MonitorBudget(CountingOracle(prob), max_calls=10**9)
    budget.allowance = prob.m - 1
    with pytest.raises(BudgetExhausted):
        max_violation_full(budget, w, block=100)
    assert budget.spent == 0 and budget.oracle.user_calls == 0
    budget.allowance = prob.m
    max_violation_full(budget, w, block=100)
    assert budget.spent == prob.m and budget.allowance == 0 and budget.oracle.calls == 0


def _nan_at(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
    out = np.asarray(X @ np.ones((X.shape[1], 1)) - 1.0 + 0.0 * idx[None, :], dtype=np.float64)
    out[:, idx == 17] = np.nan
    return out


def _nan_problem() -> Any:
    return zoframe.Constrained(
        objective=lambda X: (X**2).sum(1), constraints_fun=_nan_at, m=40, x0=np.zeros(2),
    )  # fmt: skip


def test_non_finite_values_raise_or_count_as_violated() -> None:
    problem = _nan_problem()
    with pytest.raises(NonFiniteValueError, match="constraint index 17"):
        max_violation_full(problem, np.zeros(2), block=8)
    res = max_violation_full(CountingOracle(problem, nonfinite="inf"), np.zeros(2), block=8)
    assert res.max_violation == np.inf and res.argmax == 17 and res.violated == 1


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"block": 0}, InvalidInputError),
        ({"block": 2.5}, InvalidInputError),
        ({"top": -1}, InvalidInputError),
        ({"tasks": 0}, InvalidInputError),
        ({"tol": float("nan")}, InvalidInputError),
        ({"above": float("nan")}, InvalidInputError),
    ],
)
def test_bad_arguments_are_refused(prob: Any, kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        max_violation_full(prob, np.zeros(prob.dim), **kwargs)


def test_wrong_point_and_source_are_refused(prob: Any) -> None:
    with pytest.raises(ShapeError, match=f"{prob.dim} entries"):
        max_violation_full(prob, np.zeros(prob.dim + 1))
    with pytest.raises(InvalidInputError, match="constraints"):
        max_violation_full(object(), np.zeros(3))
    x = _point(prob)
    before = x.copy()
    max_violation_full(prob, x)
    assert np.array_equal(x, before)  # the caller's point is not touched
