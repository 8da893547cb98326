"""Small problems with known answers, for checking the checker and the solvers.

* :class:`KKTQP` (``kkt-qp``): a convex QP with linear inequality constraints, white-box gradients,
  a cvxpy model and, for ``constraints="box"``, its solution and multipliers in closed form.
* :class:`SaddleQuadratic` (``saddle-quadratic``): a nonconvex-strongly-concave quadratic minimax
  problem with ``g(x) = max_y f(x, y)``, ``grad g`` and the minimiser in closed form.
* :class:`PowerSum` (``power-sum``): ``(1/p) sum_i |x_i - c_i|^p`` with ``p > 2``: degenerate at its
  minimiser, so gradient methods converge at a known sublinear exponent (a test of rate fits).
* :class:`LassoComposite` (``lasso-composite``): ``(1/n) sum_i (a_i^T x - b_i)^2 / 2 + tau ||y||_1``
  s.t. ``x - y = 0``, with white-box gradients and a cvxpy model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from zoframe._optional import require
from zoframe.errors import InvalidInputError
from zoframe.oracle import MonitorOracle
from zoframe.penalties import L1
from zoframe.problems import HalfSquaredResiduals, constrained_measures
from zoframe.protocols import Array, IntArray, Penalty
from zoframe_verify.reference import CvxpyModel

__all__ = ["KKTQP", "LassoComposite", "PowerSum", "SaddleQuadratic"]


def _check_pos(**values: int) -> None:
    for name, v in values.items():
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
            raise InvalidInputError(f"{name} must be a positive integer, got {v!r}")


@dataclass(frozen=True, eq=False)
class KKTQP:
    """``min (1/n) sum_i ||x - c_i||^2 / 2`` s.t. ``D x <= e`` (a convex QP with known answer).

    The centres ``c_i`` scatter around a point ``c_bar`` that lies outside the polyhedron, so a
    handful of constraints are active at the solution. ``constraints="random"``: Gaussian rows
    ``D_j`` and ``e_j > 0`` (``x0 = 0`` is feasible); the reference comes from cvxpy.
    ``constraints="box"``: ``x_j <= u_j`` for ``j < m`` (needs ``m <= dim``), with the solution
    ``x* = min(c_bar, u)`` and multipliers ``alpha_j = max(c_bar_j - u_j, 0)`` in closed form.
    """

    monitor_free: ClassVar[bool] = True  # white-box formulas: measures are not charged to max_calls
    kind: ClassVar[str] = "constrained"
    dim: int = 10
    m: int = 50
    n: int = 20
    seed: int = 0
    constraints_kind: str = "random"
    name: str = "kkt-qp"
    convex_constraints: bool = True
    black_box_constraints: bool = False
    violation_tol: float = 1e-3
    C: Array = field(init=False, repr=False)
    c_bar: Array = field(init=False, repr=False)
    D: Array = field(init=False, repr=False)
    e: Array = field(init=False, repr=False)
    x0: Array = field(init=False, repr=False)

    def __post_init__(self) -> None:
        _check_pos(dim=self.dim, m=self.m, n=self.n)
        if self.constraints_kind not in ("random", "box"):
            raise InvalidInputError(f"constraints_kind must be 'random' or 'box', got {self.constraints_kind!r}")
        if self.constraints_kind == "box" and self.m > self.dim:
            raise InvalidInputError(f"box constraints need m <= dim, got m={self.m}, dim={self.dim}")
        rng = np.random.default_rng(self.seed)
        if self.constraints_kind == "box":
            D = np.eye(self.dim)[: self.m]
            e = rng.uniform(0.2, 1.0, self.m)
            c_bar = rng.uniform(-1.0, 2.0, self.dim)  # some coordinates above their bound u_j <= 1
        else:
            D = rng.standard_normal((self.m, self.dim)) / np.sqrt(self.dim)
            e = rng.uniform(0.5, 1.5, self.m)
            c_bar = 3.0 * rng.standard_normal(self.dim)
        C = c_bar + 0.5 * rng.standard_normal((self.n, self.dim))
        C += c_bar - C.mean(axis=0)  # the centres average exactly to c_bar
        for arr in (C, c_bar, D, e):
            arr.setflags(write=False)
        object.__setattr__(self, "C", C)
        object.__setattr__(self, "c_bar", c_bar)
        object.__setattr__(self, "D", D)
        object.__setattr__(self, "e", e)
        object.__setattr__(self, "x0", np.zeros(self.dim))

    @property
    def _spread(self) -> float:
        return float(0.5 * np.mean(np.sum((self.C - self.c_bar) ** 2, axis=1)))

    def components(self, X: Array, idx: IntArray) -> Array:
        Ci = self.C[idx]
        sq: Array = 0.5 * (np.sum(X * X, axis=1)[:, None] - 2.0 * X @ Ci.T + np.sum(Ci * Ci, axis=1)[None, :])
        return sq

    def component_gradients(self, x: Array, idx: IntArray) -> Array:
        out: Array = x[None, :] - self.C[idx]
        return out

    def constraints(self, X: Array, idx: IntArray) -> Array:
        out: Array = X @ self.D[idx].T - self.e[idx]
        return out

    def constraint_gradients(self, x: Array, idx: IntArray) -> Array:
        return np.array(self.D[idx], dtype=np.float64, copy=True)

    def linear_constraints(self) -> tuple[Array, Array]:
        return self.D.copy(), self.e.copy()

    def cvxpy_model(self) -> CvxpyModel:
        cp: Any = require("cvxpy", feature="the cvxpy model of this problem (its reference solution)")

        x = cp.Variable(self.dim, name="x")
        objective = 0.5 * cp.sum_squares(x - self.c_bar) + self._spread
        return CvxpyModel(x=x, objective=objective, constraints=[self.D @ x <= self.e])

    def known_solution(self) -> Mapping[str, Any]:
        """Closed form with box constraints; otherwise the cached high-accuracy cvxpy reference."""
        if self.constraints_kind != "box":
            from zoframe_verify.reference import reference_solution

            ref = reference_solution(self)
            return {"x": ref.x.copy(), "fun": ref.fun, "multipliers": ref.duals.copy()}
        x = self.c_bar.copy()
        x[: self.m] = np.minimum(self.c_bar[: self.m], self.e)
        alpha = np.maximum(self.c_bar[: self.m] - self.e, 0.0)
        return {"x": x, "fun": 0.5 * float(np.sum((x - self.c_bar) ** 2)) + self._spread, "multipliers": alpha}

    def measures(self, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
        return constrained_measures(outputs["x"], monitor, self.violation_tol)


@dataclass(frozen=True, eq=False)
class SaddleQuadratic:
    """``min_x max_y (1/n) sum_i [x^T P x / 2 + x^T K_i y + b_i^T y] - (rho/2) ||y||^2``.

    ``P`` is diagonal with some negative entries (nonconvex in ``x``), the problem is ``rho``-strongly
    concave in ``y`` over all of ``R^{d_y}``, so ``y*(x) = (K^T x + b) / rho``,
    ``g(x) = x^T P x / 2 + ||K^T x + b||^2 / (2 rho)`` and ``grad g(x) = (P + K K^T / rho) x + K b / rho``
    (``K``, ``b`` the means of ``K_i``, ``b_i``); ``P + K K^T / rho`` is positive definite, so ``g`` has
    the unique minimiser ``x* = -(P + K K^T / rho)^{-1} K b / rho``. With a ``y_set`` ``Y``,
    ``y*(x) = Proj_Y((K^T x + b) / rho)`` and :meth:`g`, :meth:`grad_g` follow it (``known_solution``
    stays the unconstrained one). Measures: ``fun`` (``F`` at the run's ``y``), ``primal`` (``g(x)``)
    and ``grad_g_norm``.
    """

    monitor_free: ClassVar[bool] = True  # white-box formulas: measures are not charged to max_calls
    kind: ClassVar[str] = "minimax"
    dim: int = 5
    dim_y: int = 5
    n: int = 10
    rho: float = 1.0
    seed: int = 0
    name: str = "saddle-quadratic"
    y_set: Any = None
    P: Array = field(init=False, repr=False)
    K: Array = field(init=False, repr=False)
    bs: Array = field(init=False, repr=False)
    x0: Array = field(init=False, repr=False)
    y0: Array = field(init=False, repr=False)

    def __post_init__(self) -> None:
        _check_pos(dim=self.dim, dim_y=self.dim_y, n=self.n)
        if not self.rho > 0:
            raise InvalidInputError(f"rho (strong concavity) must be > 0, got {self.rho}")
        rng = np.random.default_rng(self.seed)
        K = rng.standard_normal((self.dim, self.dim_y)) / np.sqrt(self.dim_y) + np.eye(self.dim, self.dim_y)
        lo = float(np.linalg.eigvalsh(K @ K.T / self.rho).min())
        # negative curvature in x on every other coordinate, yet P + K K^T / rho stays positive definite
        P = np.diag(np.where(np.arange(self.dim) % 2 == 0, -0.5 * lo, 1.0)) + (0.5 if lo < 1e-6 else 0.0) * np.eye(self.dim)
        Ks = K + 0.3 * rng.standard_normal((self.n, self.dim, self.dim_y))
        Ks += K - Ks.mean(axis=0)
        bs = rng.standard_normal((self.n, self.dim_y))
        for arr in (P, Ks, bs):
            arr.setflags(write=False)
        object.__setattr__(self, "P", P)
        object.__setattr__(self, "K", Ks)
        object.__setattr__(self, "bs", bs)
        object.__setattr__(self, "x0", np.ones(self.dim))
        object.__setattr__(self, "y0", np.zeros(self.dim_y))

    @property
    def K_mean(self) -> Array:
        out: Array = self.K.mean(axis=0)
        return out

    def values(self, X: Array, Y: Array, idx: IntArray) -> Array:
        quad = 0.5 * np.einsum("kd,d,kd->k", X, np.diag(self.P), X) - 0.5 * self.rho * np.sum(Y * Y, axis=1)
        cross = np.einsum("kd,bde,ke->kb", X, self.K[idx], Y) + Y @ self.bs[idx].T
        out: Array = quad[:, None] + cross
        return out

    def minimax_gradients(self, x: Array, y: Array, idx: IntArray) -> tuple[Array, Array]:
        gx = (self.P @ x)[None, :] + np.einsum("bde,e->bd", self.K[idx], y)
        gy = np.einsum("bde,d->be", self.K[idx], x) - self.rho * y[None, :] + self.bs[idx]
        return gx, gy

    def y_star(self, x: Array) -> Array:
        """``argmax_y F(x, y) = Proj_Y((K^T x + b) / rho)``: ``F`` is ``-(rho/2) ||y - c||^2`` plus terms free of ``y``."""
        c: Array = (self.K_mean.T @ x + self.bs.mean(axis=0)) / self.rho
        return c if self.y_set is None else np.asarray(self.y_set.project(c), dtype=np.float64)

    def g(self, x: Array) -> float:
        """The primal function ``g(x) = max_y F(x, y) = x^T P x / 2 + (rho/2) (||c||^2 - ||y*(x) - c||^2)``."""
        c = (self.K_mean.T @ x + self.bs.mean(axis=0)) / self.rho
        gap = self.y_star(x) - c
        return float(0.5 * x @ (self.P @ x) + 0.5 * self.rho * (c @ c - gap @ gap))

    def grad_g(self, x: Array) -> Array:
        """``grad g(x) = P x + K y*(x)`` (Danskin); ``(P + K K^T / rho) x + K b / rho`` over all of ``R^{d_y}``."""
        out: Array = self.P @ x + self.K_mean @ self.y_star(x)
        return out

    def known_solution(self) -> Mapping[str, Any]:
        K = self.K_mean
        H = self.P + K @ K.T / self.rho
        x = -np.linalg.solve(H, K @ self.bs.mean(axis=0) / self.rho)
        y = (K.T @ x + self.bs.mean(axis=0)) / self.rho
        fun = float(self.values(x[None], y[None], np.arange(self.n)).mean())
        return {"x": x, "y": y, "fun": fun}

    def measures(self, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
        x = outputs["x"]
        y = outputs.get("y", self.y0)
        # fun is F(x, y) at the run's own y (it can lie below the primal value g(x) = max_y F(x, y))
        return {"fun": float(monitor.minimax(x, y).mean()), "primal": self.g(x),
                "grad_g_norm": float(np.linalg.norm(self.grad_g(x)))}


@dataclass(frozen=True, eq=False)
class LassoComposite(HalfSquaredResiduals):
    """``min (1/n) sum_i (a_i^T x - b_i)^2 / 2 + tau ||y||_1`` s.t. ``x - y = 0`` (``A = I``, ``B = -I``).

    Sparse planted solution; white-box gradients of the smooth part; a cvxpy model for the reference
    (its ``lam`` is ``grad f(x*)`` in the ADMM paper's sign convention).
    """

    monitor_free: ClassVar[bool] = True  # white-box formulas: measures are not charged to max_calls
    kind: ClassVar[str] = "composite"
    dim: int = 20
    n: int = 100
    tau: float = 0.1
    seed: int = 0
    name: str = "lasso-composite"
    data: Array = field(init=False, repr=False)
    target: Array = field(init=False, repr=False)
    A: Array = field(init=False, repr=False)
    B: tuple[Array, ...] = field(init=False, repr=False)
    c: Array = field(init=False, repr=False)
    penalties: tuple[Penalty, ...] = field(init=False, repr=False)
    x0: Array = field(init=False, repr=False)
    y0: tuple[Array, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        _check_pos(dim=self.dim, n=self.n)
        if not self.tau >= 0:
            raise InvalidInputError(f"tau must be >= 0, got {self.tau}")
        rng = np.random.default_rng(self.seed)
        data = rng.standard_normal((self.n, self.dim))
        w = np.zeros(self.dim)
        w[: max(1, self.dim // 4)] = rng.standard_normal(max(1, self.dim // 4)) + 1.0
        target = data @ w + 0.1 * rng.standard_normal(self.n)
        A = np.eye(self.dim)
        B = (-np.eye(self.dim),)
        c = np.zeros(self.dim)
        for arr in (data, target, A, B[0], c):
            arr.setflags(write=False)
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "A", A)
        object.__setattr__(self, "B", B)
        object.__setattr__(self, "c", c)
        object.__setattr__(self, "penalties", (L1(self.tau),))
        object.__setattr__(self, "x0", np.zeros(self.dim))
        object.__setattr__(self, "y0", (np.zeros(self.dim),))

    def cvxpy_model(self) -> CvxpyModel:
        cp: Any = require("cvxpy", feature="the cvxpy model of this problem (its reference solution)")

        x = cp.Variable(self.dim, name="x")
        y = cp.Variable(self.dim, name="y")
        objective = 0.5 * cp.sum_squares(self.data @ x - self.target) / self.n + self.tau * cp.norm1(y)
        return CvxpyModel(x=x, objective=objective, constraints=[self.A @ x + self.B[0] @ y == self.c], y=[y])

    def measures(self, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
        x = outputs["x"]
        f = float(monitor.objective(x).mean())
        y = outputs.get("y0")
        if y is None:
            return {"fun": f + self.penalties[0].value(x)}
        return {"fun": f + self.penalties[0].value(y), "residual": float(np.linalg.norm(x - y))}


@dataclass(frozen=True, eq=False)
class PowerSum:
    """``f(x) = (1/p) sum_i |x_i - c_i|^p`` with ``p > 2`` (one component, white-box gradient).

    The Hessian vanishes at the minimiser ``c``, so gradient descent with step ``eta`` converges
    sublinearly at a known exponent: per coordinate ``e_{t+1} = e_t - eta e_t^{p-1}`` gives
    ``e_t ~ ((p - 2) eta t)^{-1/(p-2)}``, hence ``||grad f(x_t)||^2 ~ t^{-2(p-1)/(p-2)}``
    (:meth:`grad_norm_sq_exponent`; -3 for ``p = 4``). The start is ``x0 = c + 1``.
    """

    monitor_free: ClassVar[bool] = True  # white-box formulas: measures are not charged to max_calls
    kind: ClassVar[str] = "finite_sum"
    dim: int = 5
    p: float = 4.0
    name: str = "power-sum"
    n: int = 1
    feasible_set: Any = None
    center: Array = field(init=False, repr=False)
    x0: Array = field(init=False, repr=False)

    def __post_init__(self) -> None:
        _check_pos(dim=self.dim)
        if not self.p > 2:
            raise InvalidInputError(f"p must be > 2 (p = 2 is a quadratic with a linear rate), got {self.p}")
        center = np.linspace(-1.0, 1.0, self.dim)
        center.setflags(write=False)
        object.__setattr__(self, "center", center)
        object.__setattr__(self, "x0", center + 1.0)

    def grad_norm_sq_exponent(self) -> float:
        """The exponent of ``||grad f(x_t)||^2`` along gradient descent: ``-2(p-1)/(p-2)``."""
        return -2.0 * (self.p - 1.0) / (self.p - 2.0)

    def components(self, X: Array, idx: IntArray) -> Array:
        v: Array = np.sum(np.abs(X - self.center) ** self.p, axis=1) / self.p
        return np.repeat(v[:, None], len(idx), axis=1)

    def component_gradients(self, x: Array, idx: IntArray) -> Array:
        e = x - self.center
        g = np.sign(e) * np.abs(e) ** (self.p - 1.0)
        return np.repeat(g[None, :], len(idx), axis=0)

    def known_solution(self) -> Mapping[str, Any]:
        return {"x": self.center.copy(), "fun": 0.0}

    def measures(self, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
        x = outputs["x"]
        g = self.component_gradients(x, np.zeros(1, dtype=np.intp))[0]
        return {"fun": float(monitor.objective(x)[0, 0]), "grad_norm": float(np.linalg.norm(g))}
