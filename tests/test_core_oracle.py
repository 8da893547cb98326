"""CountingOracle: counting, exact budgets, copies, shapes, non-finite values, executors."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

import zoframe
from zoframe import BudgetExhausted, CountingOracle, NonFiniteValueError, ShapeError
from zoframe.testing.problems import SmokeConstrained, SmokeFiniteSum, SmokeMinimax


def test_counts_points_times_components_by_kind_and_purpose() -> None:
    o = CountingOracle(SmokeConstrained())
    o.objective(np.zeros((3, 4)), np.array([0, 1]), purpose="a")
    o.constraints(np.zeros((5, 4)), np.array([0, 1, 2]), purpose="b")
    o.objective(np.zeros(4))  # one point, all n = 8 components
    assert o.calls == 3 * 2 + 5 * 3 + 8
    assert o.calls_by_kind == {"objective": 14, "constraint": 15}
    assert o.calls_by_purpose == {"a": 6, "b": 15, "estimate": 8}


def test_budget_is_exact_and_checked_before_the_call() -> None:
    seen: list[int] = []

    def f(X: np.ndarray) -> np.ndarray:
        seen.append(X.shape[0])
        out: np.ndarray = (X**2).sum(axis=1)
        return out

    o = CountingOracle(zoframe.FiniteSum(f, x0=np.zeros(2)), max_calls=10)
    o.objective(np.zeros((6, 2)))
    with pytest.raises(BudgetExhausted, match="max_calls=10"):
        o.objective(np.zeros((5, 2)))
    assert o.calls == 6 and seen == [6]  # the refused batch was never evaluated
    o.objective(np.zeros((4, 2)))  # exactly up to the limit is fine
    assert o.calls == 10 and o.remaining == 0


def test_monitor_calls_are_counted_apart_and_not_budgeted() -> None:
    o = CountingOracle(SmokeFiniteSum(), max_calls=8)
    o.objective(np.zeros(4))
    o.monitor.objective(np.zeros(4))
    assert o.calls == 8 and o.calls_by_purpose["monitor"] == 8


def test_inputs_are_copied_and_read_only_for_the_user_function() -> None:
    captured: list[np.ndarray] = []

    def f(X: np.ndarray) -> np.ndarray:
        captured.append(X)
        out: np.ndarray = X.sum(axis=1)
        return out

    o = CountingOracle(zoframe.FiniteSum(f, x0=np.zeros(3)))
    X = np.ones((2, 3))
    o.objective(X)
    assert captured[0] is not X and not captured[0].flags.writeable
    X[0, 0] = 5.0
    assert captured[0][0, 0] == 1.0


@pytest.mark.parametrize(
    ("X", "idx", "match"),
    [
        (np.zeros((2, 3)), None, r"expected points of shape \(k, 4\)"),
        (np.zeros((2, 2, 4)), None, r"expected points of shape"),
        (np.zeros((2, 4)), np.array([0, 8]), r"index out of range: got 8, valid range is 0..7"),
        (np.zeros((2, 4)), np.array([], dtype=int), "empty batch"),
        (np.zeros((2, 4)), np.array([0.5]), "integer"),
    ],
)
def test_bad_inputs_are_clear_errors(X: np.ndarray, idx: np.ndarray | None, match: str) -> None:
    o = CountingOracle(SmokeFiniteSum())
    with pytest.raises(ShapeError, match=match):
        o.objective(X, idx)
    assert o.calls == 0


def test_wrong_output_shape_names_the_expected_shape() -> None:
    prob = zoframe.FiniteSum(lambda X, idx: np.zeros((X.shape[0], 7)), n=3, x0=np.zeros(2))
    with pytest.raises(ShapeError, match=r"must return an array of shape \(2, 3\)"):
        CountingOracle(prob).objective(np.zeros((2, 2)))


def test_nonfinite_values_raise_naming_point_and_component_or_become_inf() -> None:
    def f(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        out = np.tile(idx.astype(float), (X.shape[0], 1))
        out[1, 1] = np.nan
        return out

    prob = zoframe.FiniteSum(f, n=4, x0=np.zeros(2))
    with pytest.raises(NonFiniteValueError, match=r"returned nan for objective index 2 at the point \[7\. 7\.\]"):
        CountingOracle(prob).objective(np.array([[0.0, 0.0], [7.0, 7.0]]), np.array([0, 2]))
    out = CountingOracle(prob, nonfinite="inf").objective(np.zeros((2, 2)), np.array([0, 2]))
    assert out[1, 1] == np.inf and out[0, 1] == 2.0


def test_oracle_methods_of_another_kind_are_refused() -> None:
    with pytest.raises(zoframe.InvalidInputError, match="not available for a 'finite_sum' problem"):
        CountingOracle(SmokeFiniteSum()).constraints(np.zeros(4))


def test_minimax_broadcasts_a_single_row() -> None:
    o = CountingOracle(SmokeMinimax())
    v = o.minimax(np.ones(3), np.zeros((5, 2)), np.array([0]))
    assert v.shape == (5, 1) and o.calls == 5


def _square_rows(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
    out: np.ndarray = (X[:, :, None] * (idx[None, None, :] + 1.0)).sum(axis=1)
    return out


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_executor_results_identical_to_in_process(pool: str) -> None:
    prob = zoframe.FiniteSum(_square_rows, n=5, x0=np.zeros(3))
    X = np.random.default_rng(0).standard_normal((23, 3))
    ref = CountingOracle(prob).objective(X)
    ex = ThreadPoolExecutor(2) if pool == "thread" else ProcessPoolExecutor(2)
    with ex:
        o = CountingOracle(prob, executor=ex, chunks=4, block_rows=5)
        out = o.objective(X)
    assert np.array_equal(out, ref) and o.calls == 23 * 5


def test_minimize_with_executor_is_bit_identical() -> None:
    prob = zoframe.FiniteSum(_square_rows, n=5, x0=np.ones(3))
    kw: dict[str, Any] = {"rng": 4, "max_iter": 30, "eta": 0.01, "batch": 2}
    ref = zoframe.minimize(prob, "zo-sgd", steps="paper", **kw)
    with ThreadPoolExecutor(2) as ex:
        par = zoframe.minimize(prob, "zo-sgd", steps="paper", executor=ex, **kw)
    assert np.array_equal(ref.x, par.x) and ref.nfev == par.nfev


def test_unpicklable_problem_on_a_process_pool_is_a_clear_error() -> None:
    prob = zoframe.FiniteSum(lambda X: X.sum(axis=1), x0=np.zeros(2))
    with ProcessPoolExecutor(1) as ex:
        o = CountingOracle(prob, executor=ex, chunks=2, block_rows=2)
        with pytest.raises(zoframe.InvalidInputError, match="must be picklable"):
            o.objective(np.zeros((4, 2)))


def test_sampled_batches_are_valid_read_only_and_trusted_only_where_they_fit() -> None:
    o = CountingOracle(SmokeConstrained())  # n = 8 components, m = 6 constraints
    rng = np.random.default_rng(0)
    idx = o.sample(5, rng)
    assert idx.dtype == np.intp and not idx.flags.writeable and len(set(idx.tolist())) == 5
    assert o.objective(np.zeros(4), idx).shape == (1, 5) and o.calls == 5
    big = np.array([7], dtype=np.intp)
    big.setflags(write=False)
    o._drawn_components = big  # the last batch drawn from the 8 components: not valid for the 6 constraints
    with pytest.raises(ShapeError, match="index out of range: got 7"):
        o.constraints(np.zeros(4), big)
    with pytest.raises(zoframe.InvalidInputError, match="cannot draw 9 distinct"):
        o.sample(9, rng)
    assert o.sample(9, rng, replace=True).shape == (9,)


def _one_component(bad: str) -> Callable[[np.ndarray], object]:
    def my_objective(X: np.ndarray) -> object:
        k = X.shape[0]
        v = (X**2).sum(axis=1)
        return {
            "k3": np.tile(v[:, None], (1, 3)),
            "k+1": np.append(v, 0.0),
            "scalar": float(v[0]),
            "complex": v + 1j,
            "none": None,
            "strings": np.array(["x"] * k),
        }[bad]

    return my_objective


@pytest.mark.parametrize(
    ("bad", "error", "received"),
    [
        ("k3", ShapeError, "returned shape (1, 3)"),
        ("k+1", ShapeError, "returned shape (2,)"),
        ("scalar", ShapeError, "returned shape ()"),
        ("complex", zoframe.InvalidInputError, "complex values (dtype complex128, shape (1,))"),
        ("none", zoframe.InvalidInputError, "returned None"),
        ("strings", zoframe.InvalidInputError, "non-numeric values of dtype <U1"),
    ],
)
def test_every_result_is_checked_from_the_first_one_point_call(bad: str, error: type, received: str) -> None:
    """A one-component objective returning (k, 3), (k+1,), a scalar, complex, None or strings is refused
    on the first call (one point), naming the function, the expected shape and what it received;
    the same for monitor calls and inside minimize (no run reports a number built from it)."""
    prob = zoframe.FiniteSum(_one_component(bad), x0=np.ones(2))
    calls: list[Callable[[CountingOracle], object]] = [
        lambda o: o.objective(np.ones(2)),
        lambda o: o.monitor.objective(np.ones(2)),
    ]
    for call in calls:
        with pytest.raises(error) as info:
            call(CountingOracle(prob))
        msg = str(info.value)
        assert "my_objective" in msg and received in msg and "(1,)" in msg
    with pytest.raises(zoframe.ZoframeError) as run_info:  # the error itself, or the run's error naming it
        zoframe.minimize(prob, "zo-sgd", steps="paper", rng=0, max_iter=3)
    assert "my_objective" in str(run_info.value) and received in str(run_info.value)


# ---------------------------------------------------------------- estimator underflow (mu too small)


def _flat_plus(X: np.ndarray) -> np.ndarray:
    out: np.ndarray = (X**2).sum(axis=1) + 1.0
    return out


@pytest.mark.parametrize("name", ["gaussian", "sphere", "coordinate"])
@pytest.mark.parametrize("x", [np.ones(3), np.zeros(3), np.full((2, 3), 5.0)])
def test_underflowing_differences_warn_once_per_estimator(name: str, x: np.ndarray) -> None:
    import warnings

    from zoframe.errors import EstimatorUnderflowWarning
    from zoframe.registry import default_registry

    est = default_registry().estimator(name).cls(mu=1e-300)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for _ in range(3):
            g = est.estimate(_flat_plus, x, np.random.default_rng(0))
    assert not np.any(g.grad)  # the estimate really is zero ...
    hits = [w for w in rec if issubclass(w.category, EstimatorUnderflowWarning)]
    assert len(hits) == 1 and len(rec) == 1  # ... and it is said, once
    assert "mu=1e-300" in str(hits[0].message) and "larger mu" in str(hits[0].message)


def test_zero_differences_at_a_sensible_radius_stay_silent() -> None:
    """A function flat around x (an inactive max(g, 0), a plateau) has a true zero estimate: no warning."""
    flat = lambda X: np.zeros(X.shape[0])  # noqa: E731
    for est in (zoframe.GaussianEstimator(mu=1e-3), zoframe.SphereEstimator(mu=1e-6), zoframe.CoordinateEstimator()):
        g = est.estimate(flat, np.full(4, 3.0), np.random.default_rng(1))  # filterwarnings=error: a warning fails
        assert not np.any(g.grad)


def test_a_run_with_mu_1e_300_warns_instead_of_silently_standing_still() -> None:
    from zoframe.errors import EstimatorUnderflowWarning

    prob = zoframe.FiniteSum(_flat_plus, x0=np.ones(3))
    with pytest.warns(EstimatorUnderflowWarning, match="x \\+ mu\\*u == x"):
        res = zoframe.minimize(prob, "zo-sgd", steps="paper", rng=0, max_iter=5, mu=1e-300)
    assert np.array_equal(res.x, prob.x0)


@pytest.mark.parametrize("block_rows", [256, 5])
def test_user_calls_counts_the_calls_the_users_function_saw(block_rows: int) -> None:
    """``Result.user_calls`` is the number of calls of the user's function (blocks, monitor included),
    while ``nfev`` (plus the monitor's evaluations) counts point-component pairs."""
    seen: list[tuple[int, int]] = []

    def f(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        seen.append((X.shape[0], idx.shape[0]))
        out: np.ndarray = (X.sum(axis=1)[:, None] - idx[None, :]) ** 2
        return out

    prob = zoframe.FiniteSum(f, n=7, x0=np.zeros(3))
    res = zoframe.minimize(prob, "zo-sgd", steps="paper", rng=0, max_iter=6, q=20, batch=3, eta=0.01, block_rows=block_rows)
    assert res.user_calls == len(seen) > 0
    assert res.nfev + res.nfev_by_purpose.get("monitor", 0) == sum(k * b for k, b in seen)
    assert max(k for k, _ in seen) == min(block_rows, 21)  # 21 points per estimate, in blocks


# ---------------------------------------------------------------- objective_owned: points handed over


def test_objective_owned_gives_the_objective_values_and_counts_without_a_copy() -> None:
    seen: list[np.ndarray] = []
    ls = zoframe.FiniteSum(lambda X, idx: _square_rows(X, idx) ** 2, n=6, x0=np.zeros(5))

    class Watch:
        kind, dim, n = "finite_sum", 5, 6

        def components(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
            seen.append(X)
            out: np.ndarray = ls.components(X, idx)
            return out

    rng = np.random.default_rng(0)
    a, b = CountingOracle(Watch()), CountingOracle(Watch())
    for k, idx in [(11, None), (3, np.array([4, 0])), (1, None), (300, None)]:
        pts = rng.standard_normal((k, 5)) * 10.0
        ref = a.objective(pts, idx, purpose="p")
        out = b.objective_owned(pts, idx, purpose="p")
        assert np.array_equal(out, ref) and out.tobytes() == ref.tobytes()
        if k <= b.block_rows:
            assert seen[-1] is pts  # handed over as it is ...
        assert not pts.flags.writeable  # ... and read-only from now on
    assert a.snapshot() == b.snapshot()


@pytest.mark.parametrize(
    "make",
    [
        lambda x: x[1:],  # a view: not its own memory
        lambda x: np.asfortranarray(x),
        lambda x: x.astype(np.float32),
        lambda x: x.tolist(),
        lambda x: x[0],  # one point, 1-D
        lambda x: x[:, :3].copy(),  # the wrong dimension
    ],
)
def test_objective_owned_copies_and_checks_anything_else_as_objective_does(make: Callable[[np.ndarray], Any]) -> None:
    pts = make(np.random.default_rng(1).standard_normal((4, 4)))
    keep = np.array(pts, copy=True)
    o, ref = CountingOracle(SmokeFiniteSum()), CountingOracle(SmokeFiniteSum())
    try:
        expected = ref.objective(pts)
    except zoframe.ZoframeError as exc:
        with pytest.raises(type(exc), match="objective"):
            o.objective_owned(pts)
        return
    out = o.objective_owned(pts)
    assert np.array_equal(out, expected) and o.snapshot() == ref.snapshot()
    assert np.array_equal(np.asarray(pts), keep)
    if isinstance(pts, np.ndarray):
        assert pts.flags.writeable  # copied, not taken
    with pytest.raises(zoframe.InvalidInputError, match=r"oracle.objective\(\) is not available"):
        CountingOracle(SmokeMinimax()).objective_owned(np.zeros((2, 3)))


def test_objective_owned_results_the_user_keeps_are_copied_and_checked() -> None:
    """The inline one-block path copies a result the problem does not declare fresh, and checks it as
    objective() does: a cached array, a wrong shape, float32 values and NaN behave the same."""
    cache = np.arange(12.0).reshape(3, 4)

    class Kept:
        kind, dim, n = "finite_sum", 2, 4
        result: Any = cache

        def components(self, X: np.ndarray, idx: np.ndarray) -> Any:
            return self.result

    o = CountingOracle(Kept())
    out = o.objective_owned(np.zeros((3, 2)))
    assert np.array_equal(out, cache) and out is not cache and not np.shares_memory(out, cache)
    out[0, 0] = -1.0
    assert cache[0, 0] == 0.0  # the user's array is untouched
    Kept.result = cache.astype(np.float32)
    assert o.objective_owned(np.zeros((3, 2))).dtype == np.float64
    Kept.result = cache[:, :3]
    with pytest.raises(ShapeError, match="objective"):
        o.objective_owned(np.zeros((3, 2)))
    Kept.result = np.full((3, 4), np.nan)
    with pytest.raises(zoframe.NonFiniteValueError):
        o.objective_owned(np.zeros((3, 2)))
    assert np.all(CountingOracle(Kept(), nonfinite="inf").objective_owned(np.zeros((3, 2))) == np.inf)


def test_objective_owned_trusts_only_a_batch_drawn_from_the_components() -> None:
    o = CountingOracle(SmokeConstrained())  # n = 8 components, m = 6 constraints
    rng = np.random.default_rng(0)
    drawn = o.sample(3, rng)
    assert o.objective_owned(np.zeros((2, 4)), drawn).shape == (2, 3)
    bad = np.array([7], dtype=np.intp)
    bad.setflags(write=False)
    o._drawn_components = bad  # the last batch drawn from the 8 components: not valid for the 6 constraints
    assert o.objective_owned(np.zeros((2, 4)), bad).shape == (2, 1)
    with pytest.raises(ShapeError, match="index out of range: got 7"):
        o.constraints_owned(np.zeros((2, 4)), bad)
    assert o.constraints_owned(np.zeros((2, 4)), o.sample(2, rng, population="constraints")).shape == (2, 2)


def test_an_empty_batch_is_no_user_call() -> None:
    o = CountingOracle(SmokeFiniteSum())
    assert o.objective(np.zeros((0, 4))).shape == (0, 8)
    assert o.snapshot() == {"calls": 0, "user_calls": 0, "calls_by_kind": {"objective": 0},
                            "calls_by_purpose": {"estimate": 0}, "nonfinite_values": 0}


def test_constraints_owned_gives_the_constraint_values_and_counts_without_a_copy() -> None:
    seen: list[np.ndarray] = []
    base = SmokeConstrained()

    class Watch:
        kind, dim, n, m = base.kind, base.dim, base.n, base.m

        def components(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
            return base.components(X, idx)

        def constraints(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
            seen.append(X)
            return base.constraints(X, idx)

    rng = np.random.default_rng(0)
    a, b = CountingOracle(Watch()), CountingOracle(Watch())
    for k, idx in [(5, None), (3, np.array([4, 0])), (300, None)]:
        pts = rng.standard_normal((k, base.dim))
        ref = (a.objective(pts, idx if idx is None else idx % base.n), a.constraints(pts, idx, purpose="p"))
        got = (b.objective_owned(pts, idx if idx is None else idx % base.n), b.constraints_owned(pts, idx, purpose="p"))
        assert all(np.array_equal(x, y) for x, y in zip(ref, got))
        if k <= b.block_rows:
            assert seen[-1] is pts  # read-only since objective_owned, and still handed over as it is
    assert a.snapshot() == b.snapshot()
    with pytest.raises(ShapeError, match="constraints"):
        b.constraints_owned(np.zeros((2, base.dim + 1)))
    with pytest.raises(zoframe.InvalidInputError, match=r"oracle.constraints\(\) is not available"):
        CountingOracle(SmokeFiniteSum()).constraints_owned(np.zeros((2, 4)))


def test_counts_by_kind_and_purpose_are_exact_and_keep_their_order_across_paths() -> None:
    """The owned paths count the pair they charged last in one int, folded into the Counters on
    every read: mixed with the other paths, a restore and unbudgeted monitor calls, the counts and
    the order of their keys are those of plain objective() / constraints() calls."""
    rng = np.random.default_rng(0)
    a, b = CountingOracle(SmokeConstrained()), CountingOracle(SmokeConstrained())
    script = [("obj", "estimate"), ("obj", "estimate"), ("con", "estimate"), ("obj", "line"), ("con", "estimate"),
              ("obj", "estimate"), ("mon", ""), ("obj", "estimate")]  # fmt: skip
    for step, (what, purpose) in enumerate(script):
        pts = rng.standard_normal((3, 4))
        if what == "mon":
            a.monitor.objective(pts)
            b.monitor.objective(pts)
        elif what == "obj":
            a.objective(pts, np.array([1, 2]), purpose=purpose)
            b.objective_owned(pts.copy(), np.array([1, 2]), purpose=purpose)
        else:
            a.constraints(pts, purpose=purpose)
            b.constraints_owned(pts.copy(), purpose=purpose)
        if step == 4:  # a checkpoint taken and restored mid-way
            b.restore(b.snapshot())
        assert a.snapshot() == b.snapshot()
        assert list(a.calls_by_kind) == list(b.calls_by_kind)
        assert list(a.calls_by_purpose) == list(b.calls_by_purpose)
    assert b.calls_by_kind["objective"] == 5 * 3 * 2 and b.calls_by_purpose["estimate"] == 4 * 3 * 2 + 2 * 3 * 6


def test_huge_finite_values_are_no_warning_and_non_finite_ones_are_still_seen() -> None:
    """The finiteness test squares the values: an overflow of that sum on huge finite values (1e200)
    is neither a warning (the suite turns warnings into errors) nor taken for a non-finite value."""
    huge = zoframe.FiniteSum(lambda X: 1e200 * (1.0 + X.sum(axis=1)), x0=np.zeros(3))
    oracle = CountingOracle(huge)
    out = oracle.objective(np.ones((4, 3)))
    assert out.shape == (4, 1) and np.all(out == 4e200)
    bad = zoframe.FiniteSum(lambda X: np.where(X[:, 0] > 0, np.inf, 1e200), x0=np.zeros(3))
    with pytest.raises(NonFiniteValueError):
        CountingOracle(bad).objective(np.ones((2, 3)))
