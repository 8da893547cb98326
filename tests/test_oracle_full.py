"""CountingOracle.evaluate_full: one point, the full objective and every constraint, as two calls would give.

``evaluate_full(x)`` is the one-point path of the peers (scipy's minimisers ask one point at a time):
its values, counts, budget errors, non-finite handling and input / result checks must be those of
``objective(x[None]).mean(axis=1)[0]`` and ``constraints(x[None])[0]``, bit for bit, and a peer run
must not change by a single bit whether the oracle offers it or not.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future
import tracemalloc
from typing import Any
import warnings

import numpy as np
import pytest

import zoframe
from zoframe import BudgetExhausted, CountingOracle, NonFiniteValueError, ShapeError
from zoframe import oracle as oracle_module
from zoframe.errors import InvalidInputError
from zoframe.oracle import _CACHED_RANGE
from zoframe.testing.problems import SmokeComposite, SmokeConstrained, SmokeFiniteSum, SmokeMinimax
from zoframe_basic.problems import LeastSquares
from zoframe_bench.suites import BallConstrainedQuadratic, RandomQP
from zoframe_peers.solvers import evaluate_points


class _Bare:
    """A problem with ``n`` components and ``m`` constraints (``m = 0``: finite sum) that records its inputs.

    ``bad`` makes one function misbehave: ``("objective" | "constraint", value)`` puts ``value`` in
    entry 2 of every row, ``("objective" | "constraint", callable)`` returns ``callable(result)``.
    """

    def __init__(self, dim: int, n: int, m: int = 0, seed: int = 0, bad: tuple[str, Any] | None = None) -> None:
        rng = np.random.default_rng(seed)
        self.kind = "constrained" if m else "finite_sum"
        self.dim, self.n, self.m = dim, n, m
        self.x0 = np.zeros(dim)
        self.A = rng.standard_normal((n, dim)) * 10.0 ** rng.integers(-3, 4, size=(n, 1))
        self.b = rng.standard_normal(n)
        self.D = rng.standard_normal((max(m, 1), dim))
        self.e = rng.standard_normal(max(m, 1))
        self.bad = bad
        self.seen: list[tuple[str, np.ndarray, np.ndarray]] = []

    def _spoil(self, which: str, out: np.ndarray) -> Any:
        if self.bad is None or self.bad[0] != which:
            return out
        if callable(self.bad[1]):
            return self.bad[1](out)
        out[:, 2] = self.bad[1]
        return out

    def components(self, X: np.ndarray, idx: np.ndarray) -> Any:
        self.seen.append(("objective", X, idx))
        r = X @ self.A[idx].T - self.b[idx]
        return self._spoil("objective", r * r)

    def constraints(self, X: np.ndarray, idx: np.ndarray) -> Any:
        self.seen.append(("constraint", X, idx))
        return self._spoil("constraint", X @ self.D[idx].T - self.e[idx])


def _bits(v: float) -> bytes:
    return np.float64(v).tobytes()


def _two_calls(problem: Any, x: Any, purpose: str = "peer", **kw: Any) -> tuple[float, np.ndarray | None, CountingOracle]:
    """The reference: objective over all n (the row's mean; the value itself when n == 1, as the peers
    always took it) and constraints over all m, two oracle calls."""
    o = CountingOracle(problem, **kw)
    X = np.asarray(x)[None] if np.ndim(x) == 1 else x
    F = o.objective(X, None, purpose=purpose)
    f = F.mean(axis=1)[0] if o.n > 1 else F[0, 0]
    g = o.constraints(X, None, purpose=purpose)[0] if o.kind == "constrained" else None
    return float(f), g, o


PROBLEMS: dict[str, Callable[[], Any]] = {
    "finite-sum n=1": lambda: _Bare(dim=3, n=1),
    "finite-sum n=7": lambda: _Bare(dim=5, n=7),
    "finite-sum n=5000": lambda: _Bare(dim=10, n=5000),
    "finite-sum n=20000": lambda: _Bare(dim=4, n=20000),
    "constrained n=1 m=20": lambda: _Bare(dim=10, n=1, m=20),
    "constrained n=13 m=3": lambda: _Bare(dim=6, n=13, m=3),
    "least-squares": lambda: LeastSquares(dim=10, n=200, seed=0),
    "random-qp": lambda: RandomQP(dim=10, m=20, seed=0),
    "smoke-constrained": SmokeConstrained,
    "smoke-finite-sum": SmokeFiniteSum,
    "smoke-composite": SmokeComposite,
    "FiniteSum n=1": lambda: zoframe.FiniteSum(lambda X: (X**2).sum(axis=1) - 0.5, x0=np.zeros(3)),
    "Constrained": lambda: zoframe.Constrained(
        lambda X, idx: (X.sum(axis=1)[:, None] - idx[None, :]) ** 2, lambda X, idx: X[:, :1] - idx[None, :], m=4,
        x0=np.zeros(3), n=5,
    ),
}


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_values_and_counts_are_those_of_objective_and_constraints(name: str) -> None:
    rng = np.random.default_rng(1)
    problem = PROBLEMS[name]()
    o = CountingOracle(problem)
    for _ in range(4):
        x = rng.standard_normal(o.dim) * 3.0
        f, g = o.evaluate_full(x, purpose="peer")
        ref_f, ref_g, ref = _two_calls(problem, x)
        assert type(f) is float and _bits(f) == _bits(ref_f)
        if ref_g is None:
            assert g is None
        else:
            assert g is not None and g.shape == (o.m,) and g.dtype == np.float64 and np.array_equal(g, ref_g)
        # the same as the peers' two-call path, too
        F, _, G = evaluate_points(CountingOracle(problem), x.reshape(1, -1))
        assert _bits(F[0]) == _bits(f) and (G is None) == (g is None) and (G is None or np.array_equal(G[0], g))
    one = CountingOracle(problem)
    one.evaluate_full(x, purpose="peer")
    assert one.snapshot() == ref.snapshot()
    assert one.calls == o.n + (o.m if o.kind == "constrained" else 0)
    assert one.user_calls == (2 if o.kind == "constrained" else 1) and one.seconds > 0.0
    o.evaluate_full(x)  # the default purpose
    assert o.calls_by_purpose["estimate"] == one.calls


@pytest.mark.parametrize("n", [1, 3])
def test_a_negative_zero_is_kept_as_the_peers_kept_it(n: int) -> None:
    problem = _Bare(dim=2, n=n, m=2, bad=("objective", lambda out: np.full_like(out, -0.0)))
    f, _ = CountingOracle(problem).evaluate_full(np.zeros(2))
    F, _, _ = evaluate_points(CountingOracle(problem), np.zeros((1, 2)))
    assert _bits(f) == _bits(F[0]) and np.signbit(f) == (n == 1)


@pytest.mark.parametrize(
    "make",
    [
        lambda x: x,
        lambda x: x[None, :],
        lambda x: x.tolist(),
        lambda x: np.repeat(x, 2)[::2],  # a strided view
        lambda x: x.astype(np.float32),
        lambda x: np.round(x * 10).astype(np.int64),
        lambda x: np.asfortranarray(x[None, :]),
        lambda x: np.array(x, dtype=">f8"),
    ],
)
def test_every_real_input_form_gives_the_two_calls_values(make: Callable[[np.ndarray], Any]) -> None:
    problem = _Bare(dim=6, n=9, m=4)
    x = make(np.random.default_rng(2).standard_normal(6))
    f, g = CountingOracle(problem).evaluate_full(x)
    ref_f, ref_g, _ = _two_calls(problem, x, purpose="estimate")
    assert _bits(f) == _bits(ref_f) and g is not None and np.array_equal(g, ref_g)


def test_the_user_functions_get_one_fresh_read_only_row_and_x_is_untouched() -> None:
    problem = _Bare(dim=4, n=3, m=2)
    x = np.arange(4.0)
    keep = x.copy()
    CountingOracle(problem).evaluate_full(x)
    (k1, X1, i1), (k2, X2, i2) = problem.seen
    assert (k1, k2) == ("objective", "constraint")
    for X in (X1, X2):
        assert X.shape == (1, 4) and X.dtype == np.float64 and not X.flags.writeable
        assert X.flags.c_contiguous and X.strides == (32, 8) and not np.shares_memory(X, x)
        assert np.array_equal(X[0], x)
    assert np.array_equal(i1, np.arange(3)) and np.array_equal(i2, np.arange(2))
    assert not i1.flags.writeable and not i2.flags.writeable
    assert np.array_equal(x, keep) and x.flags.writeable
    # the peers' former path gave the user functions the same layout
    problem.seen.clear()
    evaluate_points(CountingOracle(problem), x.reshape(1, -1))
    assert all(X.strides == (32, 8) and X.flags.owndata == X1.flags.owndata for _, X, _ in problem.seen)


def test_the_budget_is_checked_first_for_the_whole_n_plus_m() -> None:
    problem = _Bare(dim=3, n=5, m=3)
    o = CountingOracle(problem, max_calls=21)
    o.evaluate_full(np.zeros(3))
    o.evaluate_full(np.ones(3))
    before, seen = o.snapshot(), len(problem.seen)
    ref = CountingOracle(problem, max_calls=21)
    ref.restore(before)
    with pytest.raises(BudgetExhausted) as expected:
        evaluate_points(ref, np.zeros((1, 3)))
    with pytest.raises(BudgetExhausted) as info:  # 16 used: the objective's 5 fit, not 5 + 3
        o.evaluate_full(np.full(3, 2.0))
    assert str(info.value) == str(expected.value) and "max_calls=21" in str(info.value)
    assert o.snapshot() == before and len(problem.seen) == seen  # nothing evaluated, nothing counted
    with pytest.raises(BudgetExhausted):  # before the point is even looked at
        o.evaluate_full(np.zeros(7))
    exact = CountingOracle(problem, max_calls=16)
    exact.evaluate_full(np.zeros(3))
    exact.evaluate_full(np.zeros(3))
    assert exact.remaining == 0


NONFINITE = [("objective", np.nan), ("objective", np.inf), ("objective", -np.inf), ("constraint", np.nan),
             ("constraint", -np.inf)]


@pytest.mark.parametrize(("which", "value"), NONFINITE)
def test_nonfinite_values_raise_the_same_error_or_become_inf(which: str, value: float) -> None:
    problem = _Bare(dim=3, n=4, m=5, bad=(which, value))
    x = np.array([0.5, -1.0, 2.0])
    o = CountingOracle(problem)
    with pytest.raises(NonFiniteValueError) as info:
        o.evaluate_full(x)
    ref = CountingOracle(problem)
    with pytest.raises(NonFiniteValueError) as expected:
        ref.objective(x[None])
        ref.constraints(x[None])
    assert str(info.value) == str(expected.value) and "index 2" in str(info.value)
    assert o.snapshot() == ref.snapshot()  # the constraints are not evaluated after a failed objective
    f, g = CountingOracle(problem, nonfinite="inf").evaluate_full(x)
    ref_f, ref_g, _ = _two_calls(problem, x, purpose="estimate", nonfinite="inf")
    assert _bits(f) == _bits(ref_f) and g is not None and np.array_equal(g, ref_g)
    assert (f == np.inf) == (which == "objective") and (g[2] == np.inf) == (which == "constraint")


@pytest.mark.parametrize("value", [np.nan, -np.inf])
def test_one_component_nonfinite_value_as_objective_handles_it(value: float) -> None:
    problem = _Bare(dim=2, n=1, m=2, bad=("objective", lambda out: np.full_like(out, value)))
    x = np.array([1.0, 2.0])
    with pytest.raises(NonFiniteValueError) as info:
        CountingOracle(problem).evaluate_full(x)
    with pytest.raises(NonFiniteValueError) as expected:
        CountingOracle(problem).objective(x)
    assert str(info.value) == str(expected.value)
    f, g = CountingOracle(problem, nonfinite="inf").evaluate_full(x)
    assert f == np.inf and g is not None and np.all(np.isfinite(g))


def test_a_finite_overflow_is_not_a_nonfinite_value() -> None:
    problem = _Bare(dim=2, n=6, bad=("objective", lambda out: np.full_like(out, 1e308)))
    with np.errstate(over="ignore"):
        f, _ = CountingOracle(problem).evaluate_full(np.zeros(2))
        ref_f, _, _ = _two_calls(problem, np.zeros(2))
    assert f == ref_f == np.inf


@pytest.mark.parametrize("which", ["objective", "constraint"])
@pytest.mark.parametrize(
    "spoil",
    [
        lambda out: out[:, :-1],
        lambda out: out.T,
        lambda out: float(out[0, 0]),
        lambda out: out + 1j,
        lambda out: None,
        lambda out: out > 0,
        lambda out: np.ma.masked_array(out),
        lambda out: out.astype(np.float32),  # fine: converted as numpy does
        lambda out: out[0],  # fine: one row as a 1-D array
        lambda out: out.tolist(),  # fine
    ],
)
def test_results_are_checked_as_objective_and_constraints_check_them(which: str, spoil: Callable[[Any], Any]) -> None:
    problem = _Bare(dim=3, n=4, m=3, bad=(which, spoil))
    x = np.array([1.0, 2.0, -1.0])
    ref = CountingOracle(problem)
    try:
        ref_f = float(ref.objective(x[None]).mean(axis=1)[0])  # n = 4
        ref_g = ref.constraints(x[None])[0]
    except zoframe.ZoframeError as exc:
        o = CountingOracle(problem)
        with pytest.raises(type(exc)) as info:
            o.evaluate_full(x)
        assert str(info.value) == str(exc) and o.snapshot() == ref.snapshot()
        return
    f, g = CountingOracle(problem).evaluate_full(x)
    assert _bits(f) == _bits(ref_f) and g is not None and np.array_equal(g, ref_g)


@pytest.mark.parametrize(
    ("x", "error", "match"),
    [
        (np.zeros(4), ShapeError, r"evaluate_full: expected one point of shape \(3,\) \(or \(1, 3\)\), got shape \(4,\)"),
        (np.zeros((2, 3)), ShapeError, r"got shape \(2, 3\)"),
        (np.zeros((1, 1, 3)), ShapeError, r"got shape \(1, 1, 3\)"),
        (np.float64(1.0), ShapeError, r"got shape \(\)"),
        ([1.0, 2.0], ShapeError, r"got shape \(2,\)"),
        (np.zeros(3) + 1j, InvalidInputError, "points must be real numbers, got a ndarray of dtype complex128"),
        (np.array(["a", "b", "c"]), InvalidInputError, "points must be real numbers"),
        (np.ma.masked_array(np.zeros(3)), InvalidInputError, "got a MaskedArray"),
        (None, InvalidInputError, "points must be real numbers"),
        ([[1.0, 2.0], [3.0]], InvalidInputError, "points must be an array of real numbers"),
        (np.array([True, False, True]), InvalidInputError, "dtype bool"),
    ],
)
def test_bad_points_are_clear_errors_before_any_evaluation(x: Any, error: type, match: str) -> None:
    problem = _Bare(dim=3, n=4, m=2)
    o = CountingOracle(problem)
    with pytest.raises(error, match=match):
        o.evaluate_full(x)
    assert o.calls == 0 and o.user_calls == 0 and problem.seen == []


def test_the_same_input_checks_as_objective() -> None:
    problem = _Bare(dim=3, n=4)
    for x in (np.zeros(3) + 1j, np.array(["a", "b", "c"]), np.ma.masked_array(np.zeros(3)), [[1.0], [2.0, 3.0]]):
        with pytest.raises(InvalidInputError) as info:
            CountingOracle(problem).evaluate_full(x)
        with pytest.raises(InvalidInputError) as expected:
            CountingOracle(problem).objective(x)
        assert str(info.value) == str(expected.value).replace("objective:", "evaluate_full:", 1)


def test_minimax_problems_are_refused_as_objective_refuses_them() -> None:
    o = CountingOracle(SmokeMinimax())
    with pytest.raises(InvalidInputError) as info:
        o.evaluate_full(np.zeros(3))
    with pytest.raises(InvalidInputError) as expected:
        o.objective(np.zeros(3))
    assert str(info.value) == str(expected.value) and o.calls == 0


class _NoExecutor(Executor):
    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        raise AssertionError("one row is one block: nothing is sent to the executor")


def test_one_call_each_whatever_block_rows_and_never_an_executor() -> None:
    problem = _Bare(dim=3, n=9, m=4)
    x = np.array([0.1, 0.2, 0.3])
    o = CountingOracle(problem, block_rows=1, executor=_NoExecutor(), chunks=3)
    f, g = o.evaluate_full(x)
    ref_f, ref_g, ref = _two_calls(problem, x, purpose="estimate", block_rows=1, executor=_NoExecutor(), chunks=3)
    assert _bits(f) == _bits(ref_f) and g is not None and np.array_equal(g, ref_g)
    assert o.user_calls == ref.user_calls == 2 and o.snapshot() == ref.snapshot()
    assert [X.shape for _, X, _ in problem.seen] == [(1, 3)] * 4


# ---------------------------------------------------------------- idx=None: the full range


def test_the_full_range_is_kept_for_the_run_only_when_small(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _CACHED_RANGE <= 2**24  # 128 MB at most (m = 1e8 constraints would hold 800 MB)
    monkeypatch.setattr(oracle_module, "_CACHED_RANGE", 4096)  # the same rule, at a size a test affords
    m = 200_000
    problem = _Bare(dim=2, n=3, m=m)
    o = CountingOracle(problem)
    o.evaluate_full(np.zeros(2))  # warm: n's range is cached, m's is not
    assert 3 in o._all and m not in o._all
    problem.seen.clear()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        _, g = o.evaluate_full(np.ones(2))
        o.constraints(np.ones(2))
        del g
        problem.seen.clear()
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert held < 2 * m  # the range (8 m bytes) and the values are gone after the calls
    assert all(a.size <= 4096 for a in o._all.values())
    ids = o._indices(None, m, "constraint")
    assert np.array_equal(ids, np.arange(m)) and ids.dtype == np.intp and not ids.flags.writeable
    small = o._indices(None, 3, "component")
    assert small is o._indices(None, 3, "component") and not small.flags.writeable


# ---------------------------------------------------------------- peers: bit-identical with or without it


def _result_fields(res: Any) -> list[Any]:
    trace = {k: np.asarray(v) for k, v in res.trace.columns.items() if k != "seconds"}
    return [res.x, res.fun, res.nit, res.nfev, res.status, res.message, dict(res.nfev_by_kind),
            dict(res.nfev_by_purpose), res.x_best, res.fun_best, res.user_calls, res.feasible, res.max_violation, trace]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (np.ndarray, float)):
        return bool(np.array_equal(a, b, equal_nan=True)) and np.asarray(a).tobytes() == np.asarray(b).tobytes()
    return bool(a == b)


PEER_CASES = [
    ("nelder-mead", lambda: LeastSquares(dim=10, n=200, seed=0), 250),
    ("nelder-mead", SmokeFiniteSum, 150),
    ("powell", lambda: LeastSquares(dim=10, n=200, seed=0), 250),
    ("cobyla", lambda: RandomQP(dim=10, m=20, seed=0), 250),
    ("cobyla", SmokeConstrained, 150),
    ("cobyla", lambda: BallConstrainedQuadratic(), 120),
    ("cobyqa", lambda: RandomQP(dim=10, m=20, seed=0), 120),
    ("cobyqa", SmokeConstrained, 100),
    ("cma-es", lambda: RandomQP(dim=10, m=20, seed=0), 300),
    ("cma-es", lambda: LeastSquares(dim=10, n=200, seed=0), 300),
]


@pytest.mark.parametrize(("solver", "make", "points"), PEER_CASES)
def test_peer_runs_are_bit_identical_with_or_without_evaluate_full(
    solver: str, make: Callable[[], Any], points: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = make()
    cost = problem.n + (problem.m if problem.kind == "constrained" else 0)
    kw: dict[str, Any] = {"rng": 5, "max_calls": points * cost, "record_every": 3}
    used: list[int] = []
    full = CountingOracle.evaluate_full

    def spy(self: CountingOracle, x: Any, *, purpose: str = "estimate") -> tuple[float, Any]:
        used.append(1)
        return full(self, x, purpose=purpose)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the peers' own convergence warnings
        monkeypatch.setattr(CountingOracle, "evaluate_full", spy)
        fast = zoframe.minimize(problem, solver, **kw)
        monkeypatch.delattr(CountingOracle, "evaluate_full")
        slow = zoframe.minimize(problem, solver, **kw)
    assert (len(used) > 0) == (solver != "cma-es")  # scipy peers ask one point at a time; CMA-ES a generation
    assert fast.nfev > 0
    for a, b in zip(_result_fields(fast), _result_fields(slow)):
        assert _same(a, b)
