"""Who owns a user function's result: the oracle copies it unless the problem declares ``fresh_results``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import zoframe
from zoframe import CountingOracle, InvalidInputError
from zoframe.oracle import as_values, checked_values
from zoframe.testing import check_problem


class Keeper:
    """A constrained problem whose functions keep every array they return (and may scribble on them)."""

    kind, dim, n, m = "constrained", 3, 4, 5

    def __init__(self, fresh: bool = False, scribble: bool = False) -> None:
        self.fresh_results = fresh
        self.scribble = scribble
        self.returned: list[np.ndarray] = []
        rng = np.random.default_rng(0)
        self.A, self.D = rng.standard_normal((self.n, self.dim)), rng.standard_normal((self.m, self.dim))

    def _give(self, out: np.ndarray) -> np.ndarray:
        if self.scribble:  # every array returned before is overwritten now
            for old in self.returned:
                old[...] = np.nan
        self.returned.append(out)
        return out

    def components(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        r = X @ self.A[idx].T - 1.0
        return self._give(r * r)

    def constraints(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return self._give(X @ self.D[idx].T - 0.5)

    def measures(self, outputs: dict[str, np.ndarray], monitor: Any) -> dict[str, float]:
        return {"fun": float(monitor.objective(outputs["x"]).mean()),
                "max_violation": float(np.maximum(monitor.constraints(outputs["x"]), 0.0).max())}


def _paths(o: CountingOracle, pts: np.ndarray) -> dict[str, Callable[[], np.ndarray]]:
    return {
        "objective": lambda: o.objective(pts, np.array([0, 2])),
        "objective_owned": lambda: o.objective_owned(pts.copy(), o.sample(2, np.random.default_rng(1))),
        "constraints": lambda: o.constraints(pts),
        "constraints_owned": lambda: o.constraints_owned(pts.copy(), np.array([1, 4])),
        "monitor": lambda: o.monitor.objective(pts),
        "blocks": lambda: o.objective(np.vstack([pts] * 3)),  # block_rows = 2: three calls
        "evaluate_full g": lambda: np.asarray(o.evaluate_full(pts[0])[1]),
    }


def test_by_default_every_result_is_copied_and_neither_side_sees_the_others_writes() -> None:
    prob = Keeper()
    o = CountingOracle(prob, block_rows=2)
    pts = np.random.default_rng(2).standard_normal((2, 3))
    for name, call in _paths(o, pts).items():
        out = call()
        mine = prob.returned[-1]
        assert not np.shares_memory(out, mine), name
        want = out.copy()
        mine[...] = -7.0  # the function writes to the array it kept
        assert np.array_equal(out, want), name
        out[...] = 3.0  # the solver writes to its values
        assert not np.any(mine == 3.0), name
        assert out.flags.writeable, name


def test_a_problem_declaring_fresh_results_has_them_kept_without_a_copy() -> None:
    prob = Keeper(fresh=True)
    o = CountingOracle(prob, block_rows=2)
    pts = np.random.default_rng(2).standard_normal((2, 3))
    paths = _paths(o, pts)
    for name in ("objective", "objective_owned", "constraints", "constraints_owned", "monitor"):
        assert paths[name]() is prob.returned[-1], name
    g = paths["evaluate_full g"]()
    assert np.shares_memory(g, prob.returned[-1])
    blocks = paths["blocks"]()  # several blocks are copied into one array, whatever is declared
    assert not any(np.shares_memory(blocks, r) for r in prob.returned[-3:])


@pytest.mark.parametrize("spoil", ["read-only", "view", "float32", "one-dimensional"])
def test_a_declared_fresh_result_is_still_copied_unless_it_is_a_writeable_float64_array_of_its_own(spoil: str) -> None:
    held = np.arange(8.0).reshape(2, 4)

    class Odd:
        kind, dim, n, fresh_results = "finite_sum", 2, 4, True

        def components(self, X: np.ndarray, idx: np.ndarray) -> Any:
            out = np.arange(8.0).reshape(2, 4)
            if spoil == "read-only":
                held.setflags(write=False)
                return held
            if spoil == "view":
                return held[:, :]
            if spoil == "float32":
                return out.astype(np.float32)
            return out[:1].ravel()  # (4,) for one point

        def values_for(self, k: int) -> np.ndarray:
            return np.arange(8.0).reshape(2, 4)[:k]

    o = CountingOracle(Odd())
    k = 1 if spoil == "one-dimensional" else 2
    out = o.objective(np.zeros((k, 2)))
    assert np.array_equal(out, Odd().values_for(k)) and out.flags.writeable and out.dtype == np.float64
    assert not np.shares_memory(out, held)
    out[...] = -1.0  # the solver may write: the function's memory is untouched
    assert held[0, 0] == 0.0


def test_a_run_gives_the_same_result_when_the_function_scribbles_on_every_array_it_returned() -> None:
    """The Result and every value the solver used are the oracle's own: a function that keeps its
    results and overwrites them with NaN at each call changes nothing (against a fresh function)."""
    runs = []
    for prob in (Keeper(fresh=True), Keeper(scribble=True)):
        prob.x0 = np.zeros(3)  # type: ignore[attr-defined]
        runs.append(zoframe.minimize(prob, "adszog", rng=5, max_iter=60, record_every=10))
    clean, scribbled = runs
    assert clean.status == scribbled.status and clean.nfev == scribbled.nfev
    assert np.array_equal(clean.x, scribbled.x) and np.array_equal(clean.x_best, scribbled.x_best)
    for key in ("iteration", "calls", "fun", "max_violation"):
        assert np.array_equal(clean.trace[key], scribbled.trace[key], equal_nan=True)
    assert np.all(np.isfinite(scribbled.trace["fun"]))


def test_fresh_results_must_be_a_bool() -> None:
    prob = Keeper()
    prob.fresh_results = "yes"  # type: ignore[assignment]
    with pytest.raises(InvalidInputError, match="fresh_results must be True or False"):
        CountingOracle(prob)
    with pytest.raises(InvalidInputError, match="fresh_results must be True or False"):
        zoframe.FiniteSum(lambda X: X.sum(1), x0=np.zeros(2), fresh_results=1)  # type: ignore[arg-type]


@pytest.mark.parametrize("fresh", [False, True])
def test_builders_hand_the_result_on_and_the_oracle_copies_it_unless_declared(fresh: bool) -> None:
    kept: list[np.ndarray] = []

    def fun(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        out = X[:, :1] + idx[None, :].astype(float)
        kept.append(out)
        return out

    prob = zoframe.FiniteSum(fun, n=3, x0=np.zeros(2), fresh_results=fresh)
    assert prob.components(np.ones((2, 2)), np.arange(3)) is kept[-1]  # checked and handed on
    out = CountingOracle(prob).objective(np.ones((2, 2)))
    assert (out is kept[-1]) is fresh
    kept[-1][...] = np.nan
    assert np.all(np.isfinite(out)) or fresh


def test_checked_values_converts_or_hands_on_and_as_values_copies() -> None:
    raw = np.arange(3.0)
    assert checked_values(raw, 3, 1, "f").base is raw
    assert not np.shares_memory(as_values(raw, 3, 1, "f"), raw)
    assert not np.shares_memory(as_values(raw.reshape(3, 1), 3, 1, "f"), raw)
    mine = np.arange(6.0).reshape(3, 2).copy()
    assert as_values(mine, 3, 2, "f", fresh=True) is mine
    assert as_values(np.asfortranarray(mine), 3, 2, "f").flags.f_contiguous  # the copy keeps the layout
    assert checked_values(raw.astype(np.float32), 3, 1, "f").dtype == np.float64


def test_the_points_and_batches_the_oracle_takes_over_are_read_only() -> None:
    seen: list[np.ndarray] = []

    class Look:
        kind, dim, n = "finite_sum", 2, 5

        def components(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
            seen.extend((X, idx))
            with pytest.raises(ValueError, match="read-only"):
                X[0, 0] = 1.0
            return np.zeros((X.shape[0], idx.shape[0]))

    o = CountingOracle(Look())
    pts = np.zeros((3, 2))
    ids = o.sample(2, np.random.default_rng(0))
    assert not ids.flags.writeable
    o.objective_owned(pts, ids)
    assert seen[0] is pts and not pts.flags.writeable and seen[1] is ids


_NEEDS_A9A = ("dro", "fused-lasso", "pairwise")  # their defaults read the a9a data set


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.data("a9a")) if n in _NEEDS_A9A else n
        for n in ["least-squares", "quadratic", "ncsc", "dro", "fused-lasso-toy", "fused-lasso", "structured-attack",
                  "pairwise", "fairness"]
    ],
)
def test_registered_problems_declaring_fresh_results_return_new_arrays(name: str) -> None:
    from zoframe.registry import default_registry

    problem = default_registry().make_problem(name)
    check_problem(problem, picklable=False)  # includes the fresh_results check when declared


def test_the_contract_kit_refuses_a_false_declaration() -> None:
    cache = np.zeros((3, 1))

    class Liar:
        kind, dim, n, fresh_results = "finite_sum", 2, 1, True
        x0 = np.zeros(2)

        def components(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
            out = cache[: X.shape[0]]  # a buffer it keeps, filled anew at each call
            out[:, 0] = X.sum(axis=1)
            return out

    with pytest.raises(AssertionError, match="declares fresh_results = True"):
        check_problem(Liar(), picklable=False)
