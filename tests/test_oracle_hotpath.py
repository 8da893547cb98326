"""The oracle's per-call fast paths: counts, trust of sampled batches and kept results, as the general path."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from zoframe import BudgetExhausted, CountingOracle, ShapeError
from zoframe.testing.problems import SmokeConstrained


class Watch:
    """SmokeConstrained whose functions record the index arrays they are given."""

    def __init__(self) -> None:
        self.base = SmokeConstrained()
        self.kind, self.dim, self.n, self.m = self.base.kind, self.base.dim, self.base.n, self.base.m
        self.ids: list[np.ndarray] = []

    def components(self, X: np.ndarray, idx: np.ndarray) -> Any:
        self.ids.append(idx)
        return self.base.components(X, idx)

    def constraints(self, X: np.ndarray, idx: np.ndarray) -> Any:
        self.ids.append(idx)
        return self.base.constraints(X, idx)


def test_counts_are_exact_when_every_path_alternates_on_one_oracle() -> None:
    """The owned paths and the copying ones share one count of the pair charged last: alternating
    them (and the purposes) on one oracle gives the counts, and key order, of the copying paths."""
    rng = np.random.default_rng(3)
    ref, mixed = CountingOracle(SmokeConstrained()), CountingOracle(SmokeConstrained())
    for step in range(60):
        which, purpose = rng.integers(4), ("estimate", "estimate", "line", "restore")[rng.integers(4)]
        k, idx = int(rng.integers(1, 5)), None if rng.random() < 0.3 else np.array([1, 3])
        pts = rng.standard_normal((k, 4))
        if which == 0:
            ref.objective(pts, idx, purpose=purpose)
            mixed.objective_owned(pts.copy(), idx, purpose=purpose)
        elif which == 1:
            ref.objective(pts, idx, purpose=purpose)
            mixed.objective(pts, idx, purpose=purpose)
        elif which == 2:
            ref.constraints(pts, idx, purpose=purpose)
            mixed.constraints_owned(pts.copy(), idx, purpose=purpose)
        else:
            ref.monitor.constraints(pts, idx)
            mixed.monitor.constraints(pts, idx)
        if step % 7 == 0:
            assert list(ref.calls_by_kind.items()) == list(mixed.calls_by_kind.items())
            assert list(ref.calls_by_purpose.items()) == list(mixed.calls_by_purpose.items())
    assert ref.snapshot() == mixed.snapshot()
    assert list(ref.calls_by_purpose) == list(mixed.calls_by_purpose)


def test_budget_is_exact_on_the_owned_path() -> None:
    o = CountingOracle(SmokeConstrained(), max_calls=20)
    rng = np.random.default_rng(0)
    idx = o.sample(3, rng)
    o.objective_owned(np.zeros((6, 4)), idx)  # 18 of 20
    pts = np.zeros((1, 4))
    with pytest.raises(BudgetExhausted):
        o.objective_owned(pts, idx)  # 3 more: refused before the call
    assert o.calls == 18 and o.user_calls == 1 and dict(o.calls_by_kind) == {"objective": 18}
    assert not pts.flags.writeable  # taken over before the budget test, as before
    o.constraints_owned(np.zeros((1, 4)), np.array([0, 5]))
    assert o.calls == 20 and o.snapshot()["calls_by_kind"] == {"objective": 18, "constraint": 2}


def test_the_last_batch_of_each_population_is_trusted_where_it_fits_and_older_ones_are_checked() -> None:
    """The batch the user function gets is the very array sample() returned while it is the last one
    drawn from its population; an older batch, a copy, or a batch of the components (n = 8) handed to
    the constraints (m = 6) is checked, and gives the same values and counts."""
    prob, ref_prob = Watch(), Watch()
    o, ref = CountingOracle(prob), CountingOracle(ref_prob)
    rng = np.random.default_rng(1)
    comp = o.sample(3, rng)
    cons = o.sample(4, rng, population="constraints")
    pts = np.random.default_rng(2).standard_normal((2, 4))
    got = [o.objective_owned(pts.copy(), comp), o.constraints_owned(pts.copy(), cons), o.constraints(pts, cons),
           o.objective_owned(pts.copy(), cons)]  # drawn from 6 <= 8 components: valid, trusted
    assert all(seen is want for seen, want in zip(prob.ids, [comp, cons, cons, cons]))
    newer = o.sample(2, rng)
    got += [o.objective_owned(pts.copy(), comp), o.objective(pts, comp), o.objective_owned(pts.copy(), newer)]
    assert prob.ids[-3] is not comp and prob.ids[-2] is not comp and prob.ids[-1] is newer  # comp: checked, copied
    assert np.array_equal(prob.ids[-3], comp) and not prob.ids[-3].flags.writeable
    copy = newer.copy()
    got.append(o.objective_owned(pts.copy(), copy))
    assert prob.ids[-1] is not copy and np.array_equal(prob.ids[-1], copy)
    calls = [("o", comp), ("c", cons), ("c", cons), ("o", cons), ("o", comp), ("o", comp), ("o", newer), ("o", copy)]
    want = [ref.objective(pts, np.array(i)) if f == "o" else ref.constraints(pts, np.array(i)) for f, i in calls]
    assert all(np.array_equal(a, b) for a, b in zip(got, want)) and o.snapshot() == ref.snapshot()
    big = None
    while big is None:  # a batch of the components holding an index past the constraints
        drawn = o.sample(8, rng)
        big = drawn if drawn.max() >= prob.m else None
    with pytest.raises(ShapeError, match="constraint index out of range"):
        o.constraints_owned(np.zeros((1, 4)), big)
    with pytest.raises(ShapeError, match="constraint index out of range"):
        o.constraints(np.zeros((1, 4)), big)


@pytest.mark.parametrize("fresh", [False, True])
def test_a_one_dimensional_result_is_reshaped_and_copied_unless_declared_fresh(fresh: bool) -> None:
    """A (k,) result for one component is read as one column: the very array (reshaped) when the
    problem declares its results fresh, a copy otherwise; the same values either way."""
    returned: list[np.ndarray] = []

    class OneColumn:
        kind, dim, n = "finite_sum", 2, 3
        fresh_results = fresh

        def components(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
            out: np.ndarray = X.sum(axis=1) + float(idx[0])
            returned.append(out)
            return out

    o = CountingOracle(OneColumn())
    rng = np.random.default_rng(0)
    one = o.sample(1, rng)
    pts = rng.standard_normal((5, 2))
    ref = pts.sum(axis=1)[:, None] + float(one[0])
    for call in (lambda: o.objective_owned(pts.copy(), one), lambda: o.objective(pts, one)):
        out = call()
        assert np.array_equal(out, ref) and out.shape == (5, 1)
        assert np.shares_memory(out, returned[-1]) is fresh
