"""Smooth test problems with known solutions (used by the contract kit and the overhead benchmark)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from zoframe.errors import InvalidInputError
from zoframe.oracle import MonitorOracle
from zoframe.protocols import Array, IntArray


@dataclass(frozen=True, eq=False)
class LeastSquares:
    """``(1/n) sum_i (a_i^T x - b_i)^2`` with Gaussian ``a_i`` and a planted solution.

    Finite sum, white-box gradients, known minimiser (the least-squares solution).
    """

    monitor_free: ClassVar[bool] = True  # white-box formulas: measures are not charged to max_calls
    fresh_results: ClassVar[bool] = True  # every call of its functions returns a new array, held by nothing else
    kind: ClassVar[str] = "finite_sum"
    dim: int = 100
    n: int = 1000
    noise: float = 0.1
    seed: int = 0
    name: str = "least-squares"
    A: Array = field(init=False, repr=False)
    b: Array = field(init=False, repr=False)
    x0: Array = field(init=False, repr=False)
    feasible_set: Any = None
    _full: IntArray = field(init=False, repr=False)  # arange(n): the index batch of every component

    def __post_init__(self) -> None:
        if self.dim < 1 or self.n < 1:
            raise InvalidInputError(f"least-squares needs dim >= 1 and n >= 1, got {self.dim}, {self.n}")
        rng = np.random.default_rng(self.seed)
        A = rng.standard_normal((self.n, self.dim)) / np.sqrt(self.dim)
        x_true = rng.standard_normal(self.dim)
        b = A @ x_true + self.noise * rng.standard_normal(self.n)
        full = np.arange(self.n)
        for arr in (A, b, full):
            arr.setflags(write=False)
        object.__setattr__(self, "A", A)
        object.__setattr__(self, "b", b)
        object.__setattr__(self, "x0", np.zeros(self.dim))
        object.__setattr__(self, "_full", full)

    def components(self, X: Array, idx: IntArray) -> Array:
        A, b = self.A, self.b
        # every component in order (idx=None, a full trace record): A itself, not a copy A[idx] of it
        # (the same matrix, so the same product; the copy of n x d numbers cost more than the product)
        if len(idx) != self.n or not np.array_equal(idx, self._full):
            A, b = A[idx], b[idx]
        r: Array = X @ A.T - b
        return r * r

    def component_gradients(self, x: Array, idx: IntArray) -> Array:
        r = self.A[idx] @ x - self.b[idx]
        out: Array = 2.0 * r[:, None] * self.A[idx]
        return out

    def known_solution(self) -> Mapping[str, Any]:
        x_star, *_ = np.linalg.lstsq(self.A, self.b, rcond=None)
        r = self.A @ x_star - self.b
        return {"x": x_star, "fun": float(np.mean(r * r))}

    def measures(self, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
        x = outputs["x"]
        # 2 (A^T r) instead of (2 A^T) r: doubling is exact (short of overflow or subnormal products),
        # so the two are the same numbers, without a doubled copy of A per record
        g = 2.0 * (self.A.T @ (self.A @ x - self.b)) / self.n
        return {"fun": float(monitor.objective(x).mean()), "grad_norm": float(np.linalg.norm(g))}


@dataclass(frozen=True, eq=False)
class Quadratic:
    """``f(x) = 0.5 (x - c)^T D (x - c)`` with a diagonal ``D`` of condition number ``cond``."""

    monitor_free: ClassVar[bool] = True  # white-box formulas: measures are not charged to max_calls
    fresh_results: ClassVar[bool] = True  # every call of its functions returns a new array, held by nothing else
    kind: ClassVar[str] = "finite_sum"
    dim: int = 10
    cond: float = 10.0
    seed: int = 0
    name: str = "quadratic"
    n: int = 1
    diag: Array = field(init=False, repr=False)
    center: Array = field(init=False, repr=False)
    x0: Array = field(init=False, repr=False)
    feasible_set: Any = None

    def __post_init__(self) -> None:
        if self.dim < 1 or not self.cond >= 1:
            raise InvalidInputError(f"quadratic needs dim >= 1 and cond >= 1, got {self.dim}, {self.cond}")
        rng = np.random.default_rng(self.seed)
        object.__setattr__(self, "diag", np.geomspace(1.0, self.cond, self.dim))
        object.__setattr__(self, "center", rng.standard_normal(self.dim))
        object.__setattr__(self, "x0", np.zeros(self.dim))

    def components(self, X: Array, idx: IntArray) -> Array:
        Z = X - self.center
        v: Array = 0.5 * (Z * Z) @ self.diag
        return np.repeat(v[:, None], len(idx), axis=1)

    def component_gradients(self, x: Array, idx: IntArray) -> Array:
        return np.repeat((self.diag * (x - self.center))[None, :], len(idx), axis=0)

    def known_solution(self) -> Mapping[str, Any]:
        return {"x": self.center.copy(), "fun": 0.0}

    def measures(self, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
        x = outputs["x"]
        return {
            "fun": float(monitor.objective(x)[0, 0]),
            "grad_norm": float(np.linalg.norm(self.diag * (x - self.center))),
        }
