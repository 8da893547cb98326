"""Small, well-conditioned smoke problems of every kind, with known optima and a ``merit`` measure.

The contract kit runs each solver on the problems of the kinds it declares. ``merit`` is the
quantity whose decrease shows progress: the objective (finite sum), objective plus ten times the
maximal violation (constrained), ``||grad g(x)||`` (minimax) and ``f(x) + psi(x)`` at the consensus
point (composite). ``merit_opt`` is its value at the solution.

Every smoke problem is a cheap white-box formula and declares ``monitor_free = True``: the
evaluations of its measures (the trace) are counted under the purpose ``"monitor"`` but not paid
from ``max_calls`` (see :mod:`zoframe.observers.trace`), so a contract run with a call budget gives
the solver all of it. A user's black box (no ``monitor_free``) pays its measures from ``max_calls``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from zoframe.errors import InvalidInputError
from zoframe.oracle import MonitorOracle
from zoframe.penalties import L1
from zoframe.problems import HalfSquaredResiduals
from zoframe.protocols import Array, IntArray, Penalty

__all__ = ["SmokeComposite", "SmokeConstrained", "SmokeFiniteSum", "SmokeMinimax", "smoke_problem"]


def _ro(a: Array) -> Array:
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class SmokeFiniteSum:
    """``(1/n) sum_i 0.5 ||D^(1/2) (x - c_i)||^2``: minimiser ``mean(c_i)``."""

    monitor_free: ClassVar[bool] = True  # white-box formulas: measures are not charged to max_calls
    kind: ClassVar[str] = "finite_sum"
    dim: int = 4
    n: int = 8
    seed: int = 0
    feasible_set: Any = None
    centers: Array = field(init=False, repr=False)
    diag: Array = field(init=False, repr=False)
    x0: Array = field(init=False, repr=False)

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        object.__setattr__(self, "centers", _ro(1.0 + 0.5 * rng.standard_normal((self.n, self.dim))))
        object.__setattr__(self, "diag", _ro(np.linspace(1.0, 2.0, self.dim)))
        object.__setattr__(self, "x0", _ro(np.zeros(self.dim)))

    def components(self, X: Array, idx: IntArray) -> Array:
        Z = X[:, None, :] - self.centers[idx][None, :, :]
        out: Array = 0.5 * np.einsum("kbd,d->kb", Z * Z, self.diag)
        return out

    def component_gradients(self, x: Array, idx: IntArray) -> Array:
        out: Array = (x[None, :] - self.centers[idx]) * self.diag
        return out

    def known_solution(self) -> Mapping[str, Any]:
        x = self.centers.mean(axis=0)
        return {"x": x, "fun": float(self.components(x[None, :], np.arange(self.n)).mean()), "merit": float(self.components(x[None, :], np.arange(self.n)).mean())}

    def measures(self, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
        f = float(monitor.objective(outputs["x"]).mean())
        return {"fun": f, "merit": f}


@dataclass(frozen=True, eq=False)
class SmokeConstrained:
    """The smoke finite sum subject to ``m`` linear constraints; one is active at the optimum.

    Constraint 0 is ``sum(x) <= s`` with ``s`` half of ``sum(mean c_i)``; the others are loose
    ``x_k <= 10``-type bounds. White box, convex, linear (``HasLinearConstraints``).
    """

    monitor_free: ClassVar[bool] = True  # white-box formulas: measures are not charged to max_calls
    kind: ClassVar[str] = "constrained"
    dim: int = 4
    n: int = 8
    m: int = 6
    seed: int = 0
    convex_constraints: bool = True
    black_box_constraints: bool = False
    base: SmokeFiniteSum = field(init=False, repr=False)
    D: Array = field(init=False, repr=False)
    e: Array = field(init=False, repr=False)
    x0: Array = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.m < 1:
            raise InvalidInputError("m must be >= 1")
        base = SmokeFiniteSum(self.dim, self.n, self.seed)
        cbar = base.centers.mean(axis=0)
        D = np.zeros((self.m, self.dim))
        e = np.zeros(self.m)
        D[0] = 1.0
        e[0] = 0.5 * float(cbar.sum())
        for j in range(1, self.m):
            D[j, (j - 1) % self.dim] = 1.0
            e[j] = 10.0
        object.__setattr__(self, "base", base)
        object.__setattr__(self, "D", _ro(D))
        object.__setattr__(self, "e", _ro(e))
        object.__setattr__(self, "x0", _ro(np.zeros(self.dim)))

    def components(self, X: Array, idx: IntArray) -> Array:
        return self.base.components(X, idx)

    def component_gradients(self, x: Array, idx: IntArray) -> Array:
        return self.base.component_gradients(x, idx)

    def constraints(self, X: Array, idx: IntArray) -> Array:
        out: Array = X @ self.D[idx].T - self.e[idx]
        return out

    def constraint_gradients(self, x: Array, idx: IntArray) -> Array:
        return self.D[idx].copy()

    def linear_constraints(self) -> tuple[Array, Array]:
        return self.D.copy(), self.e.copy()

    def known_solution(self) -> Mapping[str, Any]:
        # minimise 0.5 (x - cbar)^T diag (x - cbar) s.t. 1^T x <= s (the only active constraint)
        cbar = self.base.centers.mean(axis=0)
        w = 1.0 / self.base.diag
        nu = max(0.0, (float(cbar.sum()) - self.e[0]) / float(w.sum()))
        x = cbar - nu * w
        f = float(self.components(x[None, :], np.arange(self.n)).mean())
        alpha = np.zeros(self.m)
        alpha[0] = nu
        return {"x": x, "fun": f, "multipliers": alpha, "merit": f}

    def measures(self, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
        x = outputs["x"]
        f = float(monitor.objective(x).mean())
        viol = float(np.maximum(monitor.constraints(x)[0], 0.0).max())
        return {"fun": f, "max_violation": viol, "merit": f + 10.0 * viol}


@dataclass(frozen=True, eq=False)
class SmokeMinimax:
    """``F_i(x, y) = 0.5 x^T P x + x^T K_i y - 0.5 ||y||^2`` (strongly concave in y, kappa ~ ||K||^2).

    ``y*(x) = mean(K_i)^T x``; ``g(x) = 0.5 x^T (P + K K^T) x``; ``grad g(x) = (P + K K^T) x``.
    """

    monitor_free: ClassVar[bool] = True  # white-box formulas: measures are not charged to max_calls
    kind: ClassVar[str] = "minimax"
    dim: int = 3
    dim_y: int = 2
    n: int = 4
    seed: int = 0
    y_set: Any = None
    P: Array = field(init=False, repr=False)
    K: Array = field(init=False, repr=False)
    x0: Array = field(init=False, repr=False)
    y0: Array = field(init=False, repr=False)

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        object.__setattr__(self, "P", _ro(np.diag(np.linspace(0.5, 1.0, self.dim))))
        object.__setattr__(self, "K", _ro(0.3 * rng.standard_normal((self.n, self.dim, self.dim_y))))
        object.__setattr__(self, "x0", _ro(np.ones(self.dim)))
        object.__setattr__(self, "y0", _ro(np.zeros(self.dim_y)))

    def values(self, X: Array, Y: Array, idx: IntArray) -> Array:
        quad = 0.5 * np.einsum("kd,de,ke->k", X, self.P, X)
        cross = np.einsum("kd,bde,ke->kb", X, self.K[idx], Y)
        out: Array = quad[:, None] + cross - 0.5 * (Y * Y).sum(axis=1)[:, None]
        return out

    def minimax_gradients(self, x: Array, y: Array, idx: IntArray) -> tuple[Array, Array]:
        gx = (self.P @ x)[None, :] + np.einsum("bde,e->bd", self.K[idx], y)
        gy = np.einsum("d,bde->be", x, self.K[idx]) - y[None, :]
        return gx, gy

    def grad_g(self, x: Array) -> Array:
        Kbar = self.K.mean(axis=0)
        out: Array = (self.P + Kbar @ Kbar.T) @ x
        return out

    def known_solution(self) -> Mapping[str, Any]:
        return {"x": np.zeros(self.dim), "y": np.zeros(self.dim_y), "fun": 0.0, "merit": 0.0}

    def measures(self, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
        x, y = outputs["x"], outputs["y"]
        gn = float(np.linalg.norm(self.grad_g(x)))
        return {"fun": float(monitor.minimax(x, y).mean()), "grad_g_norm": gn, "merit": gn}


@dataclass(frozen=True, eq=False)
class SmokeComposite(HalfSquaredResiduals):
    """Lasso in ADMM form: ``(1/n) sum_i 0.5 (a_i^T x - b_i)^2 + w ||y||_1`` s.t. ``x - y = 0``."""

    monitor_free: ClassVar[bool] = True  # white-box formulas: measures are not charged to max_calls
    kind: ClassVar[str] = "composite"
    dim: int = 4
    n: int = 16
    weight: float = 0.05
    seed: int = 0
    data: Array = field(init=False, repr=False)
    target: Array = field(init=False, repr=False)
    A: Array = field(init=False, repr=False)
    B: tuple[Array, ...] = field(init=False, repr=False)
    c: Array = field(init=False, repr=False)
    penalties: tuple[Penalty, ...] = field(init=False, repr=False)
    x0: Array = field(init=False, repr=False)
    y0: tuple[Array, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        a = rng.standard_normal((self.n, self.dim))
        xt = np.array([1.0, -1.0, 0.0, 0.5] * (self.dim // 4 + 1))[: self.dim]
        object.__setattr__(self, "data", _ro(a))
        object.__setattr__(self, "target", _ro(a @ xt + 0.01 * rng.standard_normal(self.n)))
        object.__setattr__(self, "A", _ro(np.eye(self.dim)))
        object.__setattr__(self, "B", (_ro(-np.eye(self.dim)),))
        object.__setattr__(self, "c", _ro(np.zeros(self.dim)))
        object.__setattr__(self, "penalties", (L1(self.weight),))
        object.__setattr__(self, "x0", _ro(np.zeros(self.dim)))
        object.__setattr__(self, "y0", (_ro(np.zeros(self.dim)),))

    def _merit(self, x: Array) -> float:
        r = self.data @ x - self.target
        return float(0.5 * np.mean(r * r) + self.penalties[0].value(x))

    def known_solution(self) -> Mapping[str, Any]:
        # proximal gradient (ISTA) to high accuracy: the lasso has no closed form
        H = self.data.T @ self.data / self.n
        step = 1.0 / float(np.linalg.eigvalsh(H).max())
        x = np.zeros(self.dim)
        for _ in range(20000):
            g = self.data.T @ (self.data @ x - self.target) / self.n
            x = self.penalties[0].prox(x - step * g, step)
        return {"x": x, "fun": self._merit(x), "merit": self._merit(x)}

    def measures(self, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
        x = outputs["x"]
        f = float(monitor.objective(x).mean())
        out = {"fun": f + self.penalties[0].value(x), "merit": self._merit(x)}
        if "y0" in outputs:
            out["fun"] = f + self.penalties[0].value(outputs["y0"])
            out["residual"] = float(np.linalg.norm(x - outputs["y0"]))
        return out


def smoke_problem(kind: str, seed: int = 0, **sizes: int) -> Any:
    """The smoke problem of a kind (``finite_sum``, ``constrained``, ``minimax``, ``composite``).

    ``sizes`` overrides the default sizes (``dim``, ``n``; ``m`` of the constrained problem,
    ``dim_y`` of the minimax one), e.g. ``smoke_problem("constrained", n=1, m=1)``.
    """
    table: dict[str, Any] = {
        "finite_sum": SmokeFiniteSum,
        "constrained": SmokeConstrained,
        "minimax": SmokeMinimax,
        "composite": SmokeComposite,
    }
    if kind not in table:
        raise InvalidInputError(f"no smoke problem of kind {kind!r}; kinds are {sorted(table)}")
    return table[kind](seed=seed, **sizes)
