"""First-party benchmark suites: ``smoke``, ``papers`` and ``random-qp``.

A suite is a :class:`~zoframe.specs.SuiteSpec`: a name and a function ``instances(**kwargs)`` that
returns :class:`~zoframe.specs.SuiteInstance` records (a ``build()`` that makes a fresh problem, the
kind, ``dim``, ``m`` and, where known, ``f*`` and ``x*``). The same keyword arguments always give
the same instances, so a worker process rebuilds an instance from ``(suite, kwargs, name)``.

Objective convention for the profiles: every problem's measures report ``fun``, the value the
profiles compare. For minimax instances this suite module wraps the problem so that ``fun`` is the
primal value ``g(x) = max_y F(x, y)`` (closed form here), not ``F(x, y)`` at the solver's ``y``:
``min_x g`` is the problem being solved and ``f*`` is its minimum.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
import functools
import importlib
import json
from typing import Any, ClassVar

import numpy as np

from zoframe.errors import InvalidInputError
from zoframe.oracle import MonitorOracle
from zoframe.penalties import L1
from zoframe.problems import Composite, FiniteSum, constrained_measures
from zoframe.protocols import Array, IntArray
from zoframe.specs import SuiteInstance, SuiteSpec

__all__ = [
    "BallConstrainedQuadratic",
    "RandomQP",
    "papers_instances",
    "random_qp_instances",
    "smoke_instances",
    "suite_specs",
]


# --------------------------------------------------------------------------- small problems
def _rosenbrock(X: Array) -> Array:
    out: Array = np.sum((1.0 - X[:, :-1]) ** 2 + 100.0 * (X[:, 1:] - X[:, :-1] ** 2) ** 2, axis=1)
    return out


def rosenbrock(dim: int = 2) -> FiniteSum:
    """Rosenbrock's function from the classical start ``(-1.2, 1, -1.2, 1, ...)``; ``f* = 0`` at ``x* = 1``."""
    x0 = np.tile([-1.2, 1.0], (dim + 1) // 2)[:dim]
    return FiniteSum(_rosenbrock, x0=x0, name=f"rosenbrock-{dim}")


@dataclass(frozen=True, eq=False)
class BallConstrainedQuadratic:
    """``min (1/n) sum_i ||x - c_i||^2 / 2`` s.t. ``||x||^2 - r^2 <= 0`` (one nonlinear constraint).

    The centres average to ``c`` with ``||c|| > r``, so the constraint is active: ``x* = r c / ||c||``
    and ``f* = (||c|| - r)^2 / 2 + spread`` (``spread`` = the mean of ``||c_i - c||^2 / 2``).
    ``x0 = 0`` is feasible.
    """

    kind: ClassVar[str] = "constrained"
    dim: int = 4
    n: int = 4
    radius: float = 1.0
    seed: int = 0
    m: int = 1
    name: str = "ball-qp"
    convex_constraints: bool = True
    black_box_constraints: bool = True
    violation_tol: float = 1e-3
    #: cheap white-box formulas: the driver's trace measures cost no budget
    monitor_free: ClassVar[bool] = True
    fresh_results: ClassVar[bool] = True  # every call of its functions returns a new array, held by nothing else
    C: Array = field(init=False, repr=False)
    c_bar: Array = field(init=False, repr=False)
    x0: Array = field(init=False, repr=False)

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        c_bar = rng.standard_normal(self.dim)
        c_bar *= 2.0 * self.radius / np.linalg.norm(c_bar)  # outside the ball: the constraint is active
        C = c_bar + 0.3 * rng.standard_normal((self.n, self.dim))
        C += c_bar - C.mean(axis=0)
        for arr in (C, c_bar):
            arr.setflags(write=False)
        object.__setattr__(self, "C", C)
        object.__setattr__(self, "c_bar", c_bar)
        object.__setattr__(self, "x0", np.zeros(self.dim))

    def components(self, X: Array, idx: IntArray) -> Array:
        Ci = self.C[idx]
        out: Array = 0.5 * (np.sum(X * X, axis=1)[:, None] - 2.0 * X @ Ci.T + np.sum(Ci * Ci, axis=1)[None, :])
        return out

    def constraints(self, X: Array, idx: IntArray) -> Array:
        g = np.sum(X * X, axis=1) - self.radius**2
        return np.repeat(g[:, None], len(idx), axis=1)

    def known_solution(self) -> Mapping[str, Any]:
        norm = float(np.linalg.norm(self.c_bar))
        spread = float(0.5 * np.mean(np.sum((self.C - self.c_bar) ** 2, axis=1)))
        x = self.radius * self.c_bar / norm
        return {"x": x, "fun": 0.5 * (norm - self.radius) ** 2 + spread, "multipliers": np.array([norm / self.radius - 1.0]) / 2.0}

    def measures(self, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
        return constrained_measures(outputs["x"], monitor, self.violation_tol)


def _half_sq_dist(center: Array, X: Array) -> Array:
    out: Array = 0.5 * np.sum((X - center) ** 2, axis=1)
    return out


def l1_prox_problem(dim: int = 5, tau: float = 0.3, seed: int = 0) -> tuple[Composite, float, Array]:
    """``min ||x - c||^2 / 2 + tau ||y||_1`` s.t. ``x - y = 0``: ``x* = soft(c, tau)`` in closed form."""
    c = np.random.default_rng(seed).standard_normal(dim)
    prob = Composite(
        functools.partial(_half_sq_dist, c),
        x0=np.zeros(dim),
        A=np.eye(dim),
        B=[-np.eye(dim)],
        c=np.zeros(dim),
        penalties=[L1(tau)],
        name=f"l1-prox-{dim}",
    )
    xs = np.sign(c) * np.maximum(np.abs(c) - tau, 0.0)
    fstar = 0.5 * float(np.sum((xs - c) ** 2)) + tau * float(np.sum(np.abs(xs)))
    return prob, fstar, xs


@functools.cache
def _primal_minimax(base: type[Any]) -> type[Any]:
    """A subclass of a minimax problem whose ``fun`` measure is ``g(x) = max_y F(x, y)`` (via ``g``)."""

    @dataclass(frozen=True, eq=False)
    class Primal(base):  # type: ignore[misc, valid-type, unused-ignore]
        def measures(self, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
            out = dict(super().measures({"y": self.y0, **outputs}, monitor))
            out["saddle_value"] = out.get("fun", float("nan"))
            out["fun"] = float(self.g(np.asarray(outputs["x"], dtype=np.float64)))
            return out

    Primal.__name__ = Primal.__qualname__ = f"Primal{base.__name__}"
    return Primal


@functools.cache
def _saddle_quadratic_primal() -> type[Any]:
    from zoframe_verify.problems import SaddleQuadratic

    @dataclass(frozen=True, eq=False)
    class PrimalSaddleQuadratic(SaddleQuadratic):
        """SaddleQuadratic with ``g(x) = x^T P x / 2 + ||K^T x + b||^2 / (2 rho)`` as ``fun``."""

        def g(self, x: Array) -> float:
            K = self.K_mean
            v = K.T @ x + self.bs.mean(axis=0)
            return 0.5 * float(x @ self.P @ x) + float(v @ v) / (2.0 * self.rho)

        def measures(self, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
            out = dict(super().measures(outputs, monitor))
            out["saddle_value"] = out["fun"]
            out["fun"] = self.g(np.asarray(outputs["x"], dtype=np.float64))
            return out

    return PrimalSaddleQuadratic


# --------------------------------------------------------------------------- smoke
@functools.lru_cache(maxsize=8)
def _smoke(scale: int) -> tuple[SuiteInstance, ...]:
    from zoframe_basic.problems import LeastSquares, Quadratic
    from zoframe_verify.problems import KKTQP

    d = 4 * scale
    out: list[SuiteInstance] = []
    q = Quadratic(dim=d + 1, cond=10.0, seed=0)
    out.append(SuiteInstance(f"quadratic-d{q.dim}", functools.partial(Quadratic, dim=q.dim, cond=10.0, seed=0),
                             "finite_sum", q.dim, 0, 0.0, tuple(q.center), "ill-conditioned diagonal quadratic"))
    ls = LeastSquares(dim=d, n=5 * d, seed=0)
    sol = ls.known_solution()
    out.append(SuiteInstance(f"least-squares-d{d}-n{5 * d}", functools.partial(LeastSquares, dim=d, n=5 * d, seed=0),
                             "finite_sum", d, 0, float(sol["fun"]), tuple(float(v) for v in sol["x"]),
                             "least squares, planted solution (finite sum of n components)"))
    out.append(SuiteInstance("rosenbrock-d2", functools.partial(rosenbrock, 2), "finite_sum", 2, 0, 0.0, (1.0, 1.0),
                             "Rosenbrock 1960"))
    box = KKTQP(dim=d + 2, m=d, n=4, seed=0, constraints_kind="box")
    sol = box.known_solution()
    out.append(SuiteInstance(f"box-qp-d{d + 2}-m{d}",
                             functools.partial(KKTQP, dim=d + 2, m=d, n=4, seed=0, constraints_kind="box"),
                             "constrained", d + 2, d, float(sol["fun"]), tuple(float(v) for v in sol["x"]),
                             "QP with bound constraints x_j <= u_j, closed-form solution"))
    ball = BallConstrainedQuadratic(dim=d, n=4, seed=0)
    sol = ball.known_solution()
    out.append(SuiteInstance(f"ball-qp-d{d}", functools.partial(BallConstrainedQuadratic, dim=d, n=4, seed=0),
                             "constrained", d, 1, float(sol["fun"]), tuple(float(v) for v in sol["x"]),
                             "quadratic in a ball (one nonlinear constraint), closed-form solution"))
    saddle_cls: type[Any] = _saddle_quadratic_primal()
    sq = saddle_cls(dim=3 * scale, dim_y=3 * scale, n=4, seed=0)
    sol = sq.known_solution()
    out.append(SuiteInstance(f"saddle-quadratic-d{sq.dim}",
                             functools.partial(saddle_cls, dim=3 * scale, dim_y=3 * scale, n=4, seed=0),  # type: ignore[misc, unused-ignore]
                             "minimax", sq.dim, 0, float(sol["fun"]), tuple(float(v) for v in sol["x"]),
                             "nonconvex-strongly-concave quadratic minimax; fun = g(x) = max_y F(x, y)"))
    _, fstar, xs = l1_prox_problem(d + 1, 0.3, 0)
    out.append(SuiteInstance(f"l1-prox-d{d + 1}", lambda: l1_prox_problem(d + 1, 0.3, 0)[0], "composite", d + 1, 0,
                             fstar, tuple(float(v) for v in xs), "||x - c||^2/2 + tau ||y||_1, x = y (soft threshold)"))
    return tuple(out)


def smoke_instances(scale: int = 1) -> Sequence[SuiteInstance]:
    """Every problem kind, tiny, each with a known answer (no cvxpy needed).

    ``scale`` multiplies the dimensions (1: d = 2..6).
    """
    if not isinstance(scale, int) or isinstance(scale, bool) or scale < 1:
        raise InvalidInputError(f"smoke: scale must be a positive integer, got {scale!r}")
    return _smoke(scale)


# --------------------------------------------------------------------------- papers
def _known(problem: Any) -> tuple[float | None, tuple[float, ...] | None]:
    """``f*`` and ``x*`` from ``known_solution()`` or a cvxpy reference, else ``(None, None)``."""
    known = getattr(problem, "known_solution", None)
    if callable(known):
        try:
            sol = known()
            return float(sol["fun"]), tuple(float(v) for v in np.asarray(sol["x"]).reshape(-1))
        except Exception:  # no known answer after all: the profiles use the best value found
            pass
    if callable(getattr(problem, "cvxpy_model", None)):
        try:
            from zoframe_verify.reference import reference_solution

            ref = reference_solution(problem)
            return float(ref.fun), tuple(float(v) for v in ref.x)
        except Exception:  # cvxpy missing or the solve failed: f* unknown
            pass
    return None, None


def _registered(name: str, **kwargs: Any) -> Any:
    from zoframe.registry import default_registry

    return default_registry().make_problem(name, **kwargs)


def _ncsc_primal(**kwargs: Any) -> Any:
    from zoframe_minimax.problems import NCSC

    return _primal_minimax(NCSC)(**kwargs)


_PAPERS: tuple[tuple[str, str, str, dict[str, Any], str], ...] = (
    ("least-squares-d10", "finite_sum", "least-squares", {"dim": 10, "n": 50, "seed": 0},
     "Ghadimi & Lan, SIAM J. Optim. 2013 (ZO-SGD)"),
    ("fairness-D1-200", "constrained", "fairness", {"dataset": "D1", "n_samples": 200, "seed": 0},
     "Shi, Gao & Gu, ICML 2022, Section 6.2 (fairness constraints)"),
    ("pairwise-breast-cancer-60", "constrained", "pairwise", {"dataset": "breast-cancer", "n_samples": 60, "seed": 0},
     "Shi, Gao & Gu, ICML 2022, Section 6.2 (pairwise constraints)"),
    ("ncsc-d5", "minimax", "ncsc", {"d1": 5, "d2": 3, "kappa": 10.0, "seed": 0},
     "Wang, Balasubramanian, Ma & Razaviyayn, J. Global Optim. 2023 (synthetic NC-SC); fun = g(x)"),
    ("fused-lasso-toy", "composite", "fused-lasso-toy", {}, "Huang, Gao, Chen & Huang, IJCAI 2019 (convex toy)"),
    ("structured-attack-5", "composite", "structured-attack", {"n": 5, "seed": 0},
     "Huang, Gao, Chen & Huang, IJCAI 2019, eq. (9)"),
)


@functools.lru_cache(maxsize=4)
def _papers(only: str) -> tuple[SuiteInstance, ...]:
    wanted = {s.strip() for s in only.split(",") if s.strip()}
    out = []
    for name, kind, problem, kwargs, ref in _PAPERS:
        if wanted and name not in wanted:
            continue
        if problem == "ncsc":
            build: Any = functools.partial(_ncsc_primal, **kwargs)
        else:
            build = functools.partial(_registered, problem, **kwargs)
        prob = build()
        fstar, xstar = _known(prob)
        m = int(getattr(prob, "m", 0)) if kind == "constrained" else 0
        out.append(SuiteInstance(name, build, kind, int(prob.dim), m, fstar, xstar, ref))
    if wanted and len(out) != len(wanted):
        known = [p[0] for p in _PAPERS]
        raise InvalidInputError(f"papers: unknown instance(s) {sorted(wanted - {i.name for i in out})}; known: {known}")
    return tuple(out)


def papers_instances(only: str = "") -> Sequence[SuiteInstance]:
    """The seed papers' problems at small sizes (``only``: comma-separated instance names).

    ``f*`` is given where the problem knows it (closed form or a cvxpy reference); for the nonconvex
    ones it is unknown and the profiles use the best value any solver found.
    """
    return _papers(str(only))


# --------------------------------------------------------------------------- random QPs
@dataclass(frozen=True, eq=False)
class RandomQP:
    """``min x^T Q x / 2 + q^T x`` s.t. ``D x <= e`` with ``Q`` positive definite (a convex QP).

    Seeded: ``Q = M M^T / d + I / 10``; rows ``D_j`` Gaussian with unit norm and ``e_j`` in
    ``[0.5, 1.5]`` (so ``x0 = 0`` is strictly feasible); ``q`` puts the unconstrained minimiser
    ``-Q^{-1} q`` outside the polyhedron, so several constraints are active at the solution. The
    constraints are treated as black boxes (``black_box_constraints=True``); a cvxpy model gives the
    exact ``f*``, ``x*`` and multipliers.
    """

    kind: ClassVar[str] = "constrained"
    dim: int = 10
    m: int = 20
    seed: int = 0
    n: int = 1
    name: str = "random-qp"
    convex_constraints: bool = True
    black_box_constraints: bool = True
    violation_tol: float = 1e-3
    monitor_free: ClassVar[bool] = True
    fresh_results: ClassVar[bool] = True  # every call of its functions returns a new array, held by nothing else
    Q: Array = field(init=False, repr=False)
    q: Array = field(init=False, repr=False)
    D: Array = field(init=False, repr=False)
    e: Array = field(init=False, repr=False)
    x0: Array = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for nm in ("dim", "m"):
            v = getattr(self, nm)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise InvalidInputError(f"random-qp: {nm} must be a positive integer, got {v!r}")
        rng = np.random.default_rng(self.seed)
        M = rng.standard_normal((self.dim, self.dim))
        Q = M @ M.T / self.dim + 0.1 * np.eye(self.dim)
        D = rng.standard_normal((self.m, self.dim))
        D /= np.linalg.norm(D, axis=1, keepdims=True)
        e = rng.uniform(0.5, 1.5, self.m)
        target = rng.standard_normal(self.dim)
        target *= 3.0 / np.linalg.norm(target)  # unconstrained minimiser at distance 3, outside most slabs
        q = -Q @ target
        for arr in (Q, q, D, e):
            arr.setflags(write=False)
        object.__setattr__(self, "Q", Q)
        object.__setattr__(self, "q", q)
        object.__setattr__(self, "D", D)
        object.__setattr__(self, "e", e)
        object.__setattr__(self, "x0", np.zeros(self.dim))

    def components(self, X: Array, idx: IntArray) -> Array:
        v = 0.5 * np.einsum("kd,de,ke->k", X, self.Q, X) + X @ self.q
        return np.repeat(v[:, None], len(idx), axis=1)

    def component_gradients(self, x: Array, idx: IntArray) -> Array:
        return np.repeat((self.Q @ x + self.q)[None, :], len(idx), axis=0)

    def constraints(self, X: Array, idx: IntArray) -> Array:
        out: Array = X @ self.D[idx].T - self.e[idx]
        return out

    def constraint_gradients(self, x: Array, idx: IntArray) -> Array:
        return np.array(self.D[idx], dtype=np.float64, copy=True)

    def cvxpy_model(self) -> Any:
        from zoframe_verify.reference import CvxpyModel

        cp: Any = _cvxpy("the random-qp suite")
        x = cp.Variable(self.dim, name="x")
        objective = 0.5 * cp.quad_form(x, cp.psd_wrap(self.Q)) + self.q @ x
        return CvxpyModel(x=x, objective=objective, constraints=[self.D @ x <= self.e])

    def measures(self, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
        return constrained_measures(outputs["x"], monitor, self.violation_tol)


def _cvxpy(feature: str) -> Any:
    try:
        return importlib.import_module("cvxpy")
    except ImportError as exc:
        from zoframe._optional import MissingDependencyError

        raise MissingDependencyError(
            f"{feature} solves its QPs exactly with cvxpy, which is not installed: "
            "pip install 'zoframe[cvxpy]' (in a clone: pip install -e '.[cvxpy]')"
        ) from exc


@functools.lru_cache(maxsize=16)
def _random_qp(dim: int, m: int, count: int, seed: int) -> tuple[SuiteInstance, ...]:
    _cvxpy("the random-qp suite")
    from zoframe_verify.reference import reference_solution

    out = []
    for i in range(count):
        s = seed * 1000 + i
        prob = RandomQP(dim=dim, m=m, seed=s)
        ref = reference_solution(prob)
        out.append(SuiteInstance(
            f"qp-d{dim}-m{m}-s{s}", functools.partial(RandomQP, dim=dim, m=m, seed=s), "constrained", dim, m,
            float(ref.fun), tuple(float(v) for v in ref.x), f"random convex QP, f* by cvxpy ({ref.solver})",
        ))
    return tuple(out)


def random_qp_instances(dim: int = 10, m: int = 20, count: int = 5, seed: int = 0) -> Sequence[SuiteInstance]:
    """``count`` seeded random convex QPs of dimension ``dim`` with ``m`` linear inequalities.

    ``f*`` and ``x*`` come from cvxpy (Clarabel, tight tolerances; cached by zoframe_verify).
    """
    for nm, v in (("dim", dim), ("m", m), ("count", count)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise InvalidInputError(f"random-qp: {nm} must be a positive integer, got {v!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise InvalidInputError(f"random-qp: seed must be a non-negative integer, got {seed!r}")
    return _random_qp(dim, m, count, seed)


def suite_specs() -> list[SuiteSpec]:
    """The first-party suites (registered through ``zoframe_suites``)."""
    from zoframe_bench.coco import bbob_instances

    return [
        SuiteSpec(
            name="smoke",
            summary="every problem kind, tiny, with known answers (quadratic, least squares, Rosenbrock, "
                    "box / ball QPs, saddle quadratic, l1 prox)",
            reference="(benchmark suite)",
            instances=smoke_instances,
            parameters={"scale": "dimension multiplier (1)"},
        ),
        SuiteSpec(
            name="papers",
            summary="the seed papers' problems at small sizes (ZO-SGD, DSZOG fairness / pairwise, NC-SC minimax, "
                    "ADMM fused lasso / structured attack)",
            reference="Ghadimi & Lan 2013; Shi, Gao & Gu, ICML 2022; Wang et al., J. Global Optim. 2023; "
                      "Huang et al., IJCAI 2019",
            instances=papers_instances,
            parameters={"only": "comma-separated instance names (all)"},
        ),
        SuiteSpec(
            name="random-qp",
            summary="seeded convex QPs with linear inequality constraints, solved exactly by cvxpy",
            reference="(benchmark suite)",
            instances=random_qp_instances,
            parameters={"dim": "dimension (10)", "m": "constraints (20)", "count": "instances (5)", "seed": "0"},
        ),
        SuiteSpec(
            name="bbob",
            summary="COCO's 24 noiseless bbob functions through coco-experiment (extra 'coco')",
            reference="Hansen et al., COCO: a platform for comparing continuous optimizers in a black-box "
                      "setting, Optim. Methods Softw. 2021",
            instances=bbob_instances,
            parameters={"functions": "function ids, e.g. '1-24' or '1,8,15' (1-24)",
                        "dimensions": "e.g. '2,5' (2,5)", "instances": "instance ids, e.g. '1-3' (1)"},
        ),
    ]


def describe(instances: Sequence[SuiteInstance]) -> str:
    """A JSON line per instance (name, kind, dim, m, f*): what ``zoframe bench SUITE --list`` prints."""
    return "\n".join(
        json.dumps({"name": i.name, "kind": i.kind, "dim": i.dim, "m": i.m, "f_star": i.f_star}) for i in instances
    )
