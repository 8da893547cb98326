"""Pairwise problems with 10^8 constraints: pairs decoded from their index, never materialised.

``pairwise("gen", n_samples=40_100)`` has about 10,000 x 10,000 training pairs (m > 10^8). Its
batches of constraints (a solver's M2 / M3, a block of a full pass) must cost memory in the batch,
not in m; the values must be those of the definition ``(x_j- - x_i+)^T w + margin``.
"""

from __future__ import annotations

import tracemalloc
from typing import Any

import numpy as np
import pytest

from zoframe.errors import InvalidInputError
from zoframe.measures import max_violation_full
import zoframe_constrained.problems as problems_mod
from zoframe_constrained.problems import pairwise

N_SAMPLES = 40_100


@pytest.fixture(scope="module")
def big() -> Any:
    return pairwise("gen", n_samples=N_SAMPLES, seed=0)


def test_the_problem_has_more_than_1e8_constraints(big: Any) -> None:
    assert big.m == big.X_pos.shape[0] * big.X_neg.shape[0] >= 10**8


def test_building_and_evaluating_batches_allocates_nothing_of_size_m() -> None:
    rng = np.random.default_rng(0)
    tracemalloc.start()
    try:
        prob = pairwise("gen", n_samples=N_SAMPLES, seed=0)
        X = rng.standard_normal((11, prob.dim))
        idx = rng.integers(0, prob.m, size=128)
        prob.constraints(X, idx)  # a solver's batch: q + 1 points, 128 pairs
        prob.constraints(X[:1], np.arange(prob.m - 2**20, prob.m))  # a block of a full pass
        prob.constraints(X[:2], rng.integers(0, prob.m, size=300_000))  # a large scattered batch
        prob.violations(X[0])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert prob.m >= 10**8
    assert peak < 80 * 2**20, f"peak {peak / 2**20:.0f} MiB: something of size m = {prob.m} was allocated"


def test_batch_values_follow_the_definition(big: Any) -> None:
    rng = np.random.default_rng(1)
    X = rng.standard_normal((3, big.dim))
    n_neg = big.X_neg.shape[0]
    for idx in (np.array([0, big.m - 1, n_neg - 1, n_neg, 12_345_678]), rng.integers(0, big.m, size=5000)):
        i, j = idx // n_neg, idx % n_neg
        expected = np.einsum("kd,bd->kb", X, big.X_neg[j]) - np.einsum("kd,bd->kb", X, big.X_pos[i])
        np.testing.assert_allclose(big.constraints(X, idx), expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("block", [3, 1000, 1 << 18])
def test_scored_batches_are_bit_identical_to_a_gather(big: Any, block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(problems_mod, "PAIR_BLOCK", block)
    rng = np.random.default_rng(2)
    X = rng.standard_normal((2, big.dim))
    s_pos, s_neg = X @ big.X_pos.T, X @ big.X_neg.T
    n_neg = big.X_neg.shape[0]
    start = 7 * n_neg - 5  # crosses rows of the (positive, negative) grid
    cases = [
        np.arange(start, start + 70_000),  # consecutive: read off the grid
        np.sort(rng.choice(10**6, size=40_000, replace=False)) + 5 * 10**7,  # increasing, not consecutive
        rng.integers(0, big.m, size=40_000),  # scattered
        np.concatenate([np.arange(start, start + 30_000), np.arange(100, 20_000)]),  # two runs
    ]
    for idx in cases:
        i, j = np.divmod(idx, n_neg)
        ref = s_neg[:, j] - s_pos[:, i]
        assert np.array_equal(big.pair_differences(s_pos, s_neg, idx), ref)
        assert np.array_equal(big.constraints(X, idx), ref)  # > (n_pos + n_neg) / 2 pairs: the scored path


def test_a_dense_constraint_matrix_of_1e8_rows_is_refused(big: Any) -> None:
    with pytest.raises(InvalidInputError, match="black-box constraints"):
        big.linear_constraints()


def test_a_full_pass_over_1e8_constraints_matches_the_exact_measure(big: Any) -> None:
    w = 0.01 * np.random.default_rng(3).standard_normal(big.dim)
    res = max_violation_full(big, w)
    exact = big.violations(w)
    assert res.checked == big.m
    assert res.max_violation == pytest.approx(exact["max_violation"], rel=1e-12)
    assert res.frac_violated == pytest.approx(exact["frac_violated"], rel=1e-9)
    assert res.mean_violation == pytest.approx(exact["mean_violation"], rel=1e-6)
