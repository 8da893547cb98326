"""A planted least-squares problem: ``(1/n) sum_i 0.5 (a_i . x - y_i)^2`` with solution ``ones(dim)``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import zoframe
from zoframe.protocols import Array


@dataclass(frozen=True)
class Residuals:
    """l_i(x) = 0.5 (a_i . x - y_i)^2 for the rows (a_i, y_i) of a planted least-squares problem.

    A module-level class holding the data (not a lambda or a closure), so the problem pickles and can
    be evaluated on a process pool.
    """

    A: Array
    y: Array

    def __call__(self, X: Array, idx: np.ndarray) -> Array:
        out: Array = 0.5 * (X @ self.A[idx].T - self.y[idx]) ** 2  # (k, b): component idx[s] at X[r]
        return out


def planted_least_squares(dim: int = 5, n: int = 40, seed: int = 0) -> zoframe.FiniteSum:
    """A finite sum of n squared residuals with solution ones(dim)."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, dim))
    return zoframe.FiniteSum(Residuals(A, A @ np.ones(dim)), x0=np.zeros(dim), n=n)
