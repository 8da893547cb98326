"""Mistakes a user makes when building a problem from callables get errors that say what to do."""

from __future__ import annotations

import numpy as np
import pytest

import zoframe
from zoframe import RunFailedError
from zoframe.errors import InvalidInputError, ShapeError


def _two_constraints(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
    G = np.stack([X[:, 0] ** 2 - X[:, 1], X[:, 0] + X[:, 1] - 2.0], axis=1)  # 2 constraints
    return G[:, idx]


def _objective(X: np.ndarray) -> np.ndarray:
    return (X[:, 0] - 2.0) ** 2 + (X[:, 1] - 1.0) ** 2


def test_declaring_more_constraints_than_the_function_computes_is_a_clear_error() -> None:
    problem = zoframe.Constrained(_objective, _two_constraints, m=3, x0=np.array([0.5, 2.5]))
    with pytest.raises(InvalidInputError, match=r"declares m=3 constraints") as info:
        problem.constraints(np.zeros((4, 2)), np.arange(3))
    msg = str(info.value)
    assert "size 2" in msg and "indices 0..2" in msg and "declare the number it computes (m=...)" in msg
    assert isinstance(info.value.__cause__, IndexError)
    # through minimize, before or during the run: the same error, never a bare IndexError
    with pytest.raises((InvalidInputError, RunFailedError), match=r"declares m=3 constraints"):
        zoframe.minimize(problem, "adszog", rng=0, max_calls=2000)
    # the right declaration runs
    ok = zoframe.Constrained(_objective, _two_constraints, m=2, x0=np.array([0.5, 2.5]))
    assert ok.constraints(np.zeros((4, 2)), np.arange(2)).shape == (4, 2)


def test_scalar_constraints_and_components_name_the_declared_count() -> None:
    scalar = zoframe.Constrained(lambda x: float(x @ x), lambda x, j: float([x[0], x[1]][j]), m=3,
                                 x0=np.ones(2), vectorized=False)
    with pytest.raises(InvalidInputError, match=r"declares m=3 constraints"):
        scalar.constraints(np.zeros((1, 2)), np.arange(3))
    data = np.ones((5, 2))
    fs = zoframe.FiniteSum(lambda X, idx: X @ data[idx].T, n=8, x0=np.zeros(2))  # 5 rows of data, n=8 declared
    with pytest.raises(InvalidInputError, match=r"declares n=8 components"):
        fs.components(np.zeros((2, 2)), np.array([0, 7]))
    one = zoframe.Constrained(lambda x: float(x @ x), lambda x, j: float(x[0] - 1.0), m=1, x0=np.ones(2),
                              vectorized=False)
    assert one.constraints(np.zeros((3, 2)), np.arange(1)).shape == (3, 1)


def test_a_scalar_function_without_vectorized_false_gets_the_hint() -> None:
    problem = zoframe.FiniteSum(lambda x: float(((x - 1.0) ** 2).sum()), x0=np.zeros(3))
    with pytest.raises(ShapeError, match=r"vectorized=False") as info:
        problem.components(np.zeros((4, 3)), np.arange(1))
    assert "returned shape () (one number) for a batch of 4 point(s)" in str(info.value)
    with pytest.raises(RunFailedError, match=r"build the problem with vectorized=False"):
        zoframe.minimize(problem, "zo-sgd", steps="paper", rng=0, max_iter=5)
    numpy_scalar = zoframe.FiniteSum(lambda X: np.float64(1.0), x0=np.zeros(3))
    with pytest.raises(ShapeError, match=r"vectorized=False"):
        numpy_scalar.components(np.zeros((2, 3)), np.arange(1))
    cons = zoframe.Constrained(_objective, lambda X, idx: 0.0, m=2, x0=np.zeros(2))
    with pytest.raises(ShapeError, match=r"shape \(k, b\) \(here \(3, 2\)\).*vectorized=False"):
        cons.constraints(np.zeros((3, 2)), np.arange(2))
    # the same function built as scalar runs
    fixed = zoframe.FiniteSum(lambda x: float(((x - 1.0) ** 2).sum()), x0=np.zeros(3), vectorized=False)
    assert zoframe.minimize(fixed, "zo-sgd", steps="paper", rng=0, max_iter=5).nit == 5
