"""Projection and Frank-Wolfe baselines for heavily constrained problems: ZOPSGD, ZOSCGD, AccZOMDA, Acc-SZOFW.

These are the four comparison methods of Shi, Gao & Gu, *Gradient-free method for heavily
constrained nonconvex optimization*, ICML 2022 (Section 6.1, "Baselines"). Each estimates the
gradient of the objective ``f0`` only, with Gaussian forward differences over a data batch ``M1``
(one batched oracle call per estimate), and handles ALL ``m`` constraints every iteration through
a subproblem over the feasible set:

* ``zopsgd``    Liu et al. 2018 (ZO projected SGD): step, then Euclidean projection (a QP);
* ``zoscgd``    Balasubramanian & Ghadimi 2018 (ZSCG): linear minimisation over the feasible set
  intersected with a ball (an LP), Frank-Wolfe step;
* ``acc-zomda`` Huang et al. 2020a (Acc-ZOM / Acc-ZOMDA, descent part): STORM momentum estimator
  evaluated at ``w_t`` and ``w_{t-1}`` with the same directions and batch, projected step;
* ``acc-szofw`` Huang et al. 2020b (Acc-SZOFW): SPIDER estimator (large batch every ``period``
  iterations, recursive corrections between), momentum-accelerated Frank-Wolfe step.

Subproblems (projection, linear minimisation) are cvxpy problems built ONCE per run with cvxpy
Parameters and re-solved every iteration; the linear minimisation over a polyhedron (linearised or
white-box linear constraints, within a box and the l_inf ball) goes to HiGHS through
``scipy.optimize.linprog`` instead, which prints nothing on stdout (cvxpy's HiGHS interface builds a
``highspy.Highs`` object, which prints HiGHS's banner once per process before any option can be set)
and skips cvxpy's parameter handling (0.35 s per solve against 0.75 s through cvxpy on a random LP
with d = 31, m = 18,720, median of 5, scipy 1.17, highspy 1.16; it solves from scratch every time). The solver order was measured on breast-cancer pairwise
(d = 31, m = 18,720 constraints, 2 cores): projection QP Clarabel 0.4 s, OSQP 1.1-2.2 s, SCS
1.7-2.2 s (HiGHS does not take QPs); l_inf-ball LP HiGHS 0.25-0.4 s, Clarabel 0.7-0.85 s, SCS
> 100 s; l2-ball SOCP Clarabel 1.0-1.5 s, SCS 2.5-2.9 s. The first installed solver of that order
is tried first; a solver that fails or does not return ``optimal`` hands over to the next one, and
the first that succeeds is kept for the rest of the run. ``optimal_inaccurate`` is accepted and
counted (``outputs()["inaccurate_solves"]``); any other status raises :class:`SubproblemError`.

Constraint handling (``constraints=``):

``"exact"``
    the problem's white-box convex constraints (``oracle.linear_constraints()`` or
    ``oracle.cvxpy_constraints``); anything else is refused in ``validate()``, before any
    evaluation;
``"linearize"``
    every iteration the constraints are linearised at the current point,
    ``f_j(w) ~ f_j(w_t) + grad f_j(w_t)^T (w - w_t) <= 0`` (all ``m`` values: one counted
    constraint call; gradients from the problem's white-box ``constraint_gradients`` when it has
    them, else central differences through the oracle: one batched call of ``2 d`` points over all
    ``m`` constraints). This is how the paper could run these methods on the nonconvex fairness
    constraints: the iterates need not be feasible for the original constraints;
``"auto"`` (default)
    ``"exact"`` when white-box convex structure is available, else ``"linearize"``.

Every baseline takes ``time_cap`` (seconds of its own compute, init included): ``terminate()``
stops the run once it is exceeded (the paper stopped these methods at 10 000 s).
"""

from __future__ import annotations

from collections.abc import Callable
import dataclasses
from dataclasses import dataclass
import time
from typing import Any, ClassVar, Literal
import warnings
import weakref

import numpy as np

from zoframe.certificate import DEFAULT_TOL, certify
from zoframe.errors import InvalidInputError, InvalidParameterError, ZoframeError
from zoframe.estimators import CoordinateEstimator
from zoframe.oracle import CountingOracle
from zoframe.protocols import Array, Estimator, IntArray
from zoframe.result import Status
from zoframe.solver import SolverBase, StopReason, check_batch, check_int, check_positive
from zoframe.specs import param

__all__ = [
    "ZOPSGD",
    "ZOSCGD",
    "AccSZOFW",
    "AccSZOFWState",
    "AccZOMDA",
    "AccZOMDAState",
    "CvxpySubproblem",
    "FWState",
    "PSGDState",
    "SubproblemError",
    "solver_order",
]

ConstraintMode = Literal["auto", "exact", "linearize"]
BallKind = Literal["linf", "l2"]
DefaultsMode = Literal["fitted", "paper"]

#: the stationarity test runs once the evaluations since the last one reach this many times its cost
_TEST_SPACING = 9

#: measured preference orders (see the module docstring), per subproblem class
_ORDERS: dict[str, tuple[str, ...]] = {
    "qp": ("CLARABEL", "OSQP", "SCS"),
    "lp": ("HIGHS", "CLARABEL", "SCS"),
    "socp": ("CLARABEL", "SCS"),
}


def _cvxpy() -> Any:
    """cvxpy, imported on first use (only these baselines and verification need it)."""
    from zoframe._optional import require

    return require("cvxpy", feature="the projection-based baselines (ZOPSGD, ZOSCGD, Acc-ZOMDA, Acc-SZOFW)")


class SubproblemError(ZoframeError, RuntimeError):
    """A projection / linear-minimisation subproblem could not be solved to optimality."""


def solver_order(problem_class: str) -> tuple[str, ...]:
    """The installed cvxpy solvers for ``"qp"``, ``"lp"`` or ``"socp"``, fastest first (measured)."""
    cp = _cvxpy()

    installed = set(cp.installed_solvers())
    order = tuple(s for s in _ORDERS[problem_class] if s in installed)
    if not order:
        raise SubproblemError(
            f"no cvxpy solver for a {problem_class.upper()} is installed (tried {', '.join(_ORDERS[problem_class])}); "
            "install clarabel (pip install clarabel)"
        )
    return order


class CvxpySubproblem:
    """A cvxpy problem over the feasible set, built once with Parameters and re-solved.

    ``kind="project"``: ``argmin_w ||w - c||^2`` over the set; ``kind="lmo"``:
    ``argmin_w <c, w>`` over the set intersected with a ball of radius ``radius`` (centre 0).
    With ``linearized=True`` the set is ``{w : J w <= r}`` with Parameters ``J (m, d)`` and
    ``r (m,)`` set at every solve; otherwise it is the oracle's white-box convex set.
    ``CvxpySubproblem.builds`` counts constructions (one per subproblem and run). ``warm_start``: each
    solve starts from the previous one's solution (faster; HiGHS's LP 2-3x on the pairwise LP), which makes the
    result depend, at the last digits, on the solves before it (a run resumed from a checkpoint rebuilds the
    problem and solves cold); ``False``: every solve from scratch, the same result whatever came before.
    """

    builds: ClassVar[int] = 0

    def __init__(
        self,
        oracle: CountingOracle,
        kind: Literal["project", "lmo"],
        *,
        linearized: bool,
        ball: BallKind | None = None,
        radius: float = 1.0,
        solver: str | None = None,
        warm_start: bool = True,
    ) -> None:
        cp = _cvxpy()

        self.warm_start = bool(warm_start)
        d, m = oracle.dim, oracle.m
        self.kind = kind
        self.linearized = linearized
        self.w = cp.Variable(d)
        self.c = cp.Parameter(d)
        self.J: Any = None
        self.r: Any = None
        if linearized:
            self.J = cp.Parameter((m, d))
            self.r = cp.Parameter(m)
            cons = [self.J @ self.w <= self.r]
        else:
            cons = list(oracle.cvxpy_constraints(self.w))
        lo, hi = _box_bounds(oracle)
        if lo is not None and hi is not None:  # bounds=(lower, upper) of the problem: part of the feasible set
            fin_lo, fin_hi = np.flatnonzero(np.isfinite(lo)), np.flatnonzero(np.isfinite(hi))
            if fin_lo.shape[0]:
                cons.append(self.w[fin_lo] >= lo[fin_lo])
            if fin_hi.shape[0]:
                cons.append(self.w[fin_hi] <= hi[fin_hi])
        if ball is not None:
            cons.append(cp.norm(self.w, "inf" if ball == "linf" else 2) <= radius)
        if kind == "project":
            objective = cp.Minimize(cp.sum_squares(self.w - self.c))
            pclass = "socp" if ball == "l2" else "qp"
        else:
            objective = cp.Minimize(self.c @ self.w)
            pclass = "socp" if ball == "l2" else "lp"
        self.problem = cp.Problem(objective, cons)
        self.order: tuple[str, ...] = (solver.upper(),) if solver else solver_order(pclass)
        self.inaccurate = 0
        # an LMO over a polyhedron within a box is an LP in scipy's form: HiGHS is called through
        # scipy.optimize.linprog, which prints nothing (highspy, behind cvxpy's HIGHS, prints its banner on
        # stdout when its first instance is built, before any option can switch the output off)
        self._lp: tuple[Array | None, Array | None, list[tuple[float | None, float | None]]] | None = None
        if kind == "lmo" and pclass == "lp" and (linearized or not oracle.has_cvxpy_constraints):
            rows = (None, None) if linearized else oracle.linear_constraints()
            blo = np.full(d, -np.inf) if lo is None else np.asarray(lo, dtype=np.float64)
            bhi = np.full(d, np.inf) if hi is None else np.asarray(hi, dtype=np.float64)
            if ball is not None:  # the l_inf ball (an l2 ball makes the problem an SOCP)
                blo, bhi = np.maximum(blo, -radius), np.minimum(bhi, radius)
            bounds = [(None if not np.isfinite(a) else float(a), None if not np.isfinite(b) else float(b))
                      for a, b in zip(blo, bhi)]
            self._lp = (rows[0], rows[1], bounds)
        type(self).builds += 1

    def solve(self, c: Array, J: Array | None = None, r: Array | None = None) -> Array:
        """Solve with the point / linear cost ``c`` (and the linearisation ``J, r``); return ``w``."""
        cp = _cvxpy()

        self.c.value = np.asarray(c, dtype=np.float64)
        if self.linearized:
            self.J.value = np.asarray(J, dtype=np.float64)
            self.r.value = np.asarray(r, dtype=np.float64)
        failures: list[str] = []
        for k, name in enumerate(self.order):
            if name == "HIGHS" and self._lp is not None:
                w, failure, final = self._linprog(self._lp, c, J, r)
                if w is not None:
                    return w
                failures.append(failure)
                if final:
                    break
                continue
            try:
                with warnings.catch_warnings():
                    # cvxpy warns on inaccurate solutions; that status is recorded instead
                    warnings.simplefilter("ignore", UserWarning)
                    self.problem.solve(solver=name, warm_start=self.warm_start)
            except (cp.error.SolverError, ValueError, ArithmeticError) as exc:
                failures.append(f"{name}: {type(exc).__name__}: {str(exc)[:120]}")
                continue
            status = self.problem.status
            if status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) and self.w.value is not None:
                if status == cp.OPTIMAL_INACCURATE:
                    self.inaccurate += 1
                if k > 0:  # keep the solver that worked for the rest of the run
                    self.order = (name, *self.order[:k], *self.order[k + 1 :])
                return np.array(self.w.value, dtype=np.float64)
            failures.append(f"{name}: status {status}")
            if status in (cp.INFEASIBLE, cp.UNBOUNDED):
                break  # a property of the subproblem, not of the solver: no fallback helps
        what = "projection onto" if self.kind == "project" else "linear minimisation over"
        raise SubproblemError(
            f"the {what} the feasible set failed with every solver ({'; '.join(failures)}). "
            + (
                "The linearised constraints may be infeasible here: use a smaller step or constraints='exact' "
                "on convex problems."
                if self.linearized
                else "Check that the constraints are feasible (and bounded for the linear minimisation)."
            )
        )


    def _linprog(
        self, lp: tuple[Array | None, Array | None, list[tuple[float | None, float | None]]], c: Array,
        J: Array | None, r: Array | None,
    ) -> tuple[Array | None, str, bool]:
        """The LMO's LP by scipy's HiGHS: ``(w, "", False)``, or ``(None, why, final)`` (``final``: infeasible or
        unbounded, which no other solver changes)."""
        from scipy.optimize import linprog

        D, e, bounds = lp
        A, b = (J, r) if self.linearized else (D, e)
        res = linprog(np.asarray(c, dtype=np.float64), A_ub=None if A is None else np.asarray(A, dtype=np.float64),
                      b_ub=None if b is None else np.asarray(b, dtype=np.float64), bounds=bounds, method="highs")
        if res.status == 0 and res.x is not None:
            return np.array(res.x, dtype=np.float64), "", False
        return None, f"HIGHS (scipy): status {res.status}: {res.message}", res.status in (2, 3)


# one set of subproblems per oracle (i.e. per run); rebuilt lazily after a checkpoint resume
_SUBPROBLEMS: weakref.WeakKeyDictionary[CountingOracle, dict[str, CvxpySubproblem]] = weakref.WeakKeyDictionary()


def _box_bounds(oracle: CountingOracle) -> tuple[Array | None, Array | None]:
    """The problem's simple bounds (``Constrained(..., bounds=...)``) as two length-``d`` arrays, if any."""
    box = oracle.feasible_set
    lo, hi = getattr(box, "lower", None), getattr(box, "upper", None)
    if lo is None or hi is None:
        return None, None
    shape = (oracle.dim,)
    return (
        np.broadcast_to(np.asarray(lo, dtype=np.float64), shape).copy(),
        np.broadcast_to(np.asarray(hi, dtype=np.float64), shape).copy(),
    )


def _inside(oracle: CountingOracle, X: Array) -> Array:
    """``X`` projected on the problem's bounds (every evaluated point inside them)."""
    box = oracle.feasible_set
    return X if box is None else np.asarray(box.project(X), dtype=np.float64)


class _DefaultBatch(int):
    """The default batch 128, told apart from a user's explicit ``128`` (an explicit batch larger than
    ``n`` stays an error; the default adapts to ``min(128, n)``, see :meth:`_ProjectedBase.adapt`)."""


_DEFAULT_M1 = _DefaultBatch(128)


def _minibatch(oracle: CountingOracle, size: int | None, rng: np.random.Generator) -> IntArray | None:
    if size is None or size >= oracle.n:
        return None  # all n components
    out: IntArray = rng.choice(oracle.n, size=size, replace=False)
    return out


@dataclass(frozen=True)
class _ProjectedBase(SolverBase):
    """Shared parts: constraint handling, subproblems, wall-clock cap, ZO estimates of ``f0``."""

    problem_kinds: ClassVar[frozenset[str]] = frozenset({"constrained"})
    M1: int | None = param(_DEFAULT_M1, symbol="|M1|", doc="data batch per iteration (default min(128, n); None: all n)")
    q: int = param(10, symbol="q", doc="Gaussian directions per estimate")
    mu: float = param(1e-3, symbol="mu", doc="smoothing radius")
    constraints: ConstraintMode = param("auto", doc="'exact', 'linearize' or 'auto' (see the module docstring)")
    time_cap: float | None = param(None, doc="stop after this many seconds of compute (paper: 10000)")
    cvxpy_solver: str | None = param(None, doc="force a cvxpy solver (default: fastest installed, measured)")
    estimator: Estimator | None = param(
        None, doc="gradient estimator (default: gaussian(q, mu); defaults='fitted': central differences when 2 dim <= q + 1)"
    )
    defaults: DefaultsMode = param(
        "fitted", doc="'fitted': estimator and stationarity stop fitted to the problem (see the module docstring); "
        "'paper': the papers' protocol (Gaussian estimator, no stopping test)"
    )  # fmt: skip
    violation_tol: float = param(
        1e-6, doc="defaults='fitted': the stationarity certificate behind a CONVERGED claim accepts this max violation"
    )
    certify_tol: float = param(
        DEFAULT_TOL, doc="defaults='fitted': tolerance of the certificate on the relative KKT residual"
    )

    def _common_checks(self) -> None:
        check_int("q", self.q)
        check_positive("mu", self.mu, "mu")
        if self.defaults not in ("fitted", "paper"):
            raise InvalidParameterError(f"defaults must be 'fitted' or 'paper', got {self.defaults!r}")
        check_positive("violation_tol", self.violation_tol)
        check_positive("certify_tol", self.certify_tol)
        mode = self.constraints
        if mode not in ("auto", "exact", "linearize"):
            raise InvalidParameterError(f"constraints must be 'auto', 'exact' or 'linearize', got {mode!r}")
        cap = self.time_cap
        if cap is not None:
            check_positive("time_cap", cap)
        batch = self.M1
        if batch is not None:
            check_int("M1", batch)

    @property
    def fitted(self) -> bool:
        """Whether the defaults are fitted to the problem (``defaults="fitted"``)."""
        return self.defaults == "fitted"

    def adapt(self, oracle: CountingOracle) -> tuple[Any, list[str]]:
        """The default batch shrinks to the ``n`` data components when there are fewer than 128; with
        ``defaults="fitted"`` the estimator becomes central differences when they cost no more rows."""
        out, notes = self, []
        if self.M1 is _DEFAULT_M1 and oracle.n < int(_DEFAULT_M1):
            notes.append(f"M1 = {oracle.n} (all n = {oracle.n} data components; the default is {int(_DEFAULT_M1)})")
            out = dataclasses.replace(out, M1=oracle.n)
        if self.fitted and self.estimator is None and 2 * oracle.dim <= self.q + 1:
            notes.append(
                f"estimator: central differences along the {oracle.dim} coordinates (2 dim <= q + 1 = {self.q + 1} rows)"
            )
            out = dataclasses.replace(out, estimator=CoordinateEstimator(mu=float(self.mu)))
        return out, notes

    def validate(self, oracle: CountingOracle) -> None:
        self.linearized(oracle)  # raises for constraints='exact' without white-box convex structure
        if self.M1 is not None and self.M1 is not _DEFAULT_M1:  # the default fits any n (min(128, n))
            check_batch("M1", self.M1, oracle.n, "data components (n)")
        solver = self.cvxpy_solver
        if solver is not None:
            cp = _cvxpy()

            if str(solver).upper() not in cp.installed_solvers():
                raise InvalidParameterError(
                    f"cvxpy_solver={solver!r} is not installed; installed: {', '.join(cp.installed_solvers())}"
                )

    def linearized(self, oracle: CountingOracle) -> bool:
        """Whether this run linearises the constraints (see the module docstring)."""
        exact = oracle.has_linear_constraints or oracle.has_cvxpy_constraints
        mode = self.constraints
        if mode == "exact" and not exact:
            why = (
                "they are black-box"
                if oracle.black_box_constraints
                else "the problem exposes neither linear_constraints() nor cvxpy_constraints()"
            )
            raise InvalidInputError(
                f"{type(self).__name__} with constraints='exact' needs white-box convex constraints to build its "
                f"projection / linear-minimisation subproblem, but {why}. Use constraints='linearize' (or 'auto') "
                "to linearise them at each iterate, or a penalty method such as 'dszog' / 'adszog'."
            )
        return mode == "linearize" or (mode == "auto" and not exact)

    def subproblem(self, oracle: CountingOracle, name: str, factory: Callable[[], CvxpySubproblem]) -> CvxpySubproblem:
        """The run's subproblem ``name``, built on first use (in ``init``) and re-solved afterwards."""
        table = _SUBPROBLEMS.setdefault(oracle, {})
        if name not in table:
            table[name] = factory()
        return table[name]

    def linearization(self, oracle: CountingOracle, w: Array, rng: np.random.Generator) -> tuple[Array, Array]:
        """``(J, r)`` with ``J w <= r`` the constraints linearised at ``w`` (counted evaluations)."""
        f = oracle.constraints(w, purpose="linearize")[0]
        if oracle.has_constraint_gradient:
            J = oracle.constraint_gradient(w, purpose="linearize")
        else:
            est = CoordinateEstimator(mu=float(self.mu))
            comp = est.estimate(
                lambda X: oracle.constraints(_inside(oracle, X), purpose="linearize"), w, rng, per_component=True
            )
            J = np.asarray(comp.per_component, dtype=np.float64)
        return J, J @ w - f

    def estimate_f0(self, oracle: CountingOracle, W: Array, idx: IntArray | None, rng: np.random.Generator) -> Array:
        """ZO gradient of ``f0`` over the batch ``idx`` at ``W`` (``(d,)`` or ``(P, d)`` sharing directions)."""
        out: Array = self.gradient_estimator().estimate(lambda X: oracle.objective(_inside(oracle, X), idx), W, rng).grad
        return out

    def f0_calls(self, oracle: CountingOracle, points: int, batch: int | None) -> int:
        b = oracle.n if batch is None else min(batch, oracle.n)
        return self.gradient_estimator().rows(oracle.dim, points) * b

    def linearize_calls(self, oracle: CountingOracle) -> int:
        grad = 0 if oracle.has_constraint_gradient else 2 * oracle.dim * oracle.m
        return oracle.m + grad

    def _proj(self, oracle: CountingOracle) -> CvxpySubproblem:
        lin = self.linearized(oracle)
        solver = self.cvxpy_solver
        return self.subproblem(
            oracle, "project",
            lambda: CvxpySubproblem(oracle, "project", linearized=lin, solver=solver, warm_start=not self.fitted),
        )

    def project(self, oracle: CountingOracle, v: Array, x: Array, rng: np.random.Generator) -> Array:
        """``Proj_X(v)``; with linearised constraints, ``X`` is linearised at ``x`` first."""
        sub = self._proj(oracle)
        if sub.linearized:
            J, r = self.linearization(oracle, x, rng)
            return sub.solve(v, J, r)
        return sub.solve(v)

    def inaccurate_count(self, oracle: CountingOracle) -> int:
        table = _SUBPROBLEMS.get(oracle, {})
        return sum(s.inaccurate for s in table.values())

    def start(self, oracle: CountingOracle, x0: Array) -> Array:
        """``Proj_X(x0)`` (builds the projection subproblem); ``x0`` itself when linearising."""
        sub = self._proj(oracle)
        return _inside(oracle, np.array(x0, dtype=np.float64, copy=True)) if sub.linearized else sub.solve(x0)

    def capped(self, seconds: float) -> str | None:
        cap = self.time_cap
        if cap is not None and seconds >= cap:
            return StopReason(
                f"wall-clock cap reached: {seconds:.1f} s >= time_cap={cap} s (the paper stopped baselines at 10000 s); "
                "no stationarity certificate",
                Status.MAX_TIME,
            )
        return None

    # ------------------------------------------------------------------ the stopping rule (defaults="fitted")
    def certificate_cost(self, oracle: CountingOracle) -> int:
        """An estimate of one certificate's evaluations (:mod:`zoframe.certificate`): ``(2 d + 1) n`` objective
        values, a pass over ``m``, ``2 d K`` for the candidates' gradients, the probes ``8 (n + K)``."""
        d, n, m = oracle.dim, oracle.n, oracle.m
        k = min(m, max(64, min(8 * d, 1024)))
        return (2 * d + 1) * (n + oracle.m_eq) + m + 2 * d * k + 8 * (n + k)

    def first_test(self, oracle: CountingOracle) -> int:
        """The evaluation count at which the first stationarity test is due."""
        return int(oracle.calls) + _TEST_SPACING * self.certificate_cost(oracle)

    def stationarity(self, oracle: CountingOracle, x: Array, test_at: int) -> tuple[int, str]:
        """The stopping rule after a step: ``(next test_at, verdict)``; the verdict is the certificate's
        message when it passed at ``x`` (the run then claims ``CONVERGED``), else ``""``."""
        if not self.fitted or oracle.calls < test_at or not bool(np.all(np.isfinite(x))):
            return test_at, ""
        remaining = oracle.remaining
        if remaining is not None and remaining < self.certificate_cost(oracle):
            return test_at, ""
        cert = certify(oracle, x, tol=self.certify_tol, feasibility_tol=self.violation_tol, budgeted=True)
        nxt = int(oracle.calls) + _TEST_SPACING * max(int(cert.evaluations), 1)
        return nxt, (cert.message if cert.passed else "")

    def attempt(self, solve: Callable[[], Array]) -> tuple[Array, str]:
        """``(solve(), "")``; with ``defaults="fitted"``, a subproblem that no solver can solve (e.g. constraints
        linearised where a violated one has a vanishing gradient: an empty set) gives ``(nan, why)`` and the run
        ends ``FAILED`` on its last iterate (:meth:`stop`) instead of raising :class:`SubproblemError`."""
        try:
            return solve(), ""
        except SubproblemError as exc:
            if not self.fitted:
                raise
            return np.full(1, np.nan), str(exc)

    def stop(self, state: Any) -> str | None:
        """``terminate``: a failed subproblem (``FAILED``), the time cap (``MAX_TIME``), or ``CONVERGED`` when the
        certificate passed."""
        if state.failed:
            return StopReason(
                f"stopped at iteration {state.t + 1} on its last iterate: {state.failed} The papers' step needs this "
                "subproblem; start from another x0, or use a penalty method ('adszog', 'dszog'), which needs none",
                Status.FAILED,
            )
        capped = self.capped(state.seconds)
        if capped is not None:
            return capped
        if state.verdict:
            return StopReason(
                f"stationarity certificate passed at iteration {state.t} (max violation <= violation_tol = "
                f"{self.violation_tol:g}): {state.verdict}",
                Status.CONVERGED,
            )
        return None


# ------------------------------------------------------------------------------------------ ZOPSGD
@dataclass(frozen=True)
class PSGDState:
    """Iterate of ZOPSGD: ``x``; ``t`` iterations, ``seconds`` of compute, ``inaccurate`` solves;
    ``test_at``: the evaluation count at which the next stationarity test is due, ``verdict``: the
    certificate's message once it passed, ``failed``: why the subproblem could not be solved (``defaults="fitted"``)."""

    x: Array
    t: int
    seconds: float
    inaccurate: int
    test_at: int = 0
    verdict: str = ""
    failed: str = ""


@dataclass(frozen=True)
class ZOPSGD(_ProjectedBase):
    """ZOPSGD: zeroth-order projected stochastic gradient descent.

    Liu, Li, Chen, Kailkhura, Cox & Amini, *Zeroth-order stochastic projected gradient descent for
    nonconvex optimization*, GlobalSIP 2018; baseline of Shi, Gao & Gu, ICML 2022, Section 6.1::

        1: x_1 = Proj_X(x0)
        for t = 1, 2, ...
        2:   draw a data batch M1
        3:   G = (1/q) sum_k (f0_M1(x_t + mu u_k) - f0_M1(x_t)) / mu u_k      (one batched call)
        4:   [linearise the constraints at x_t when they are not white-box convex]
        5:   x_{t+1} = Proj_X(x_t - eta G)                                      (a QP over all m constraints)
    """

    eta: float = param(1e-2, symbol="eta", doc="step size (paper grid {1e-2, 1e-3, 1e-4})")

    def __post_init__(self) -> None:
        check_positive("eta", self.eta, "eta")
        self._common_checks()

    def calls_per_step(self, oracle: CountingOracle) -> int:
        return self.f0_calls(oracle, 1, self.M1) + (self.linearize_calls(oracle) if self.linearized(oracle) else 0)

    def init(self, oracle: CountingOracle, x0: Array, rng: np.random.Generator) -> PSGDState:
        t0 = time.perf_counter()
        x = self.start(oracle, x0)  # l.1
        sec = time.perf_counter() - t0
        return PSGDState(x=x, t=0, seconds=sec, inaccurate=self.inaccurate_count(oracle), test_at=self.first_test(oracle))

    def step(self, oracle: CountingOracle, state: PSGDState, rng: np.random.Generator) -> PSGDState:
        t0 = time.perf_counter()
        M1 = _minibatch(oracle, self.M1, rng)  # l.2
        G = self.estimate_f0(oracle, state.x, M1, rng)  # l.3
        x, failed = self.attempt(lambda: self.project(oracle, state.x - self.eta * G, state.x, rng))  # l.4-5
        if failed:
            return dataclasses.replace(state, failed=failed)
        test_at, verdict = self.stationarity(oracle, x, state.test_at)  # the stopping rule (not in the box)
        sec = state.seconds + time.perf_counter() - t0
        return PSGDState(
            x=x, t=state.t + 1, seconds=sec, inaccurate=self.inaccurate_count(oracle), test_at=test_at, verdict=verdict
        )

    def terminate(self, state: PSGDState) -> str | None:
        return self.stop(state)

    def outputs(self, state: PSGDState) -> dict[str, Array]:
        return {"x": state.x, "inaccurate_solves": np.array(float(state.inaccurate))}


# ------------------------------------------------------------------------------------------ ZOSCGD
@dataclass(frozen=True)
class FWState:
    """Iterate of ZOSCGD: ``x``; ``t`` iterations, ``seconds`` of compute, ``inaccurate`` solves;
    ``test_at``: the evaluation count at which the next stationarity test is due, ``verdict``: the
    certificate's message once it passed, ``failed``: why the subproblem could not be solved (``defaults="fitted"``)."""

    x: Array
    t: int
    seconds: float
    inaccurate: int
    test_at: int = 0
    verdict: str = ""
    failed: str = ""


@dataclass(frozen=True)
class _FrankWolfeBase(_ProjectedBase):
    """Frank-Wolfe parts: the LMO over the set intersected with a ball, and the feasible start."""

    R: float = param(10.0, symbol="R", doc="radius of the ball intersected with the feasible set")
    ball: BallKind = param("linf", doc="'linf' (LP, default) or 'l2' (SOCP)")

    def _lmo(self, oracle: CountingOracle) -> CvxpySubproblem:
        lin = self.linearized(oracle)
        ball: BallKind = self.ball
        R = float(self.R)
        solver = self.cvxpy_solver
        return self.subproblem(
            oracle, "lmo",
            lambda: CvxpySubproblem(
                oracle, "lmo", linearized=lin, ball=ball, radius=R, solver=solver, warm_start=not self.fitted
            ),
        )

    def lmo(self, oracle: CountingOracle, g: Array, x: Array, rng: np.random.Generator) -> Array:
        sub = self._lmo(oracle)
        if sub.linearized:
            J, r = self.linearization(oracle, x, rng)
            return sub.solve(g, J, r)
        return sub.solve(g)

    def feasible_start(self, oracle: CountingOracle, x0: Array) -> Array:
        """Project ``x0`` onto the set intersected with the ball (once; a separate subproblem)."""
        if self.linearized(oracle):
            ball: BallKind = self.ball
            R = float(self.R)
            x = np.array(x0, dtype=np.float64, copy=True)
            n = np.max(np.abs(x)) if ball == "linf" else np.linalg.norm(x)
            return _inside(oracle, x if n <= R else x * (R / n))
        sub = self.subproblem(
            oracle,
            "start",
            lambda: CvxpySubproblem(
                oracle, "project", linearized=False, ball=self.ball, radius=float(self.R),
                solver=self.cvxpy_solver,
            ),
        )
        return sub.solve(x0)

    def _fw_checks(self) -> None:
        check_positive("R", self.R, "R")
        if self.ball not in ("linf", "l2"):
            raise InvalidParameterError(f"ball must be 'linf' (an LP) or 'l2' (an SOCP), got {self.ball!r}")


@dataclass(frozen=True)
class ZOSCGD(_FrankWolfeBase):
    """ZOSCGD: zeroth-order stochastic conditional gradient (ZSCG).

    Balasubramanian & Ghadimi, *Zeroth-order (non)-convex stochastic optimization via conditional
    gradient and gradient updates*, NeurIPS 2018 (Algorithm 1, ZSCG); baseline of Shi, Gao & Gu,
    ICML 2022, Section 6.1. The feasible set is intersected with the ball ``||w|| <= R`` so that
    the linear minimisation is bounded (``ball="linf"``: an LP, default; ``"l2"``: an SOCP)::

        1: x_1 = Proj_{X ∩ B_R}(x0)
        for t = 1, 2, ...
        2:   draw a data batch M1
        3:   G = (1/q) sum_k (f0_M1(x_t + mu u_k) - f0_M1(x_t)) / mu u_k      (one batched call)
        4:   v_t = argmin_{v in X ∩ B_R} <G, v>                                  (an LP over all m constraints)
        5:   x_{t+1} = x_t + gamma (v_t - x_t)
    """

    gamma: float = param(1e-2, symbol="gamma", doc="Frank-Wolfe step in (0, 1] (paper grid {1e-2, 1e-3, 1e-4})")

    def __post_init__(self) -> None:
        if not (isinstance(self.gamma, (int, float)) and 0 < self.gamma <= 1):
            raise InvalidParameterError(f"gamma (Frank-Wolfe step) must lie in (0, 1], got {self.gamma!r}")
        self._fw_checks()
        self._common_checks()

    def calls_per_step(self, oracle: CountingOracle) -> int:
        return self.f0_calls(oracle, 1, self.M1) + (self.linearize_calls(oracle) if self.linearized(oracle) else 0)

    def init(self, oracle: CountingOracle, x0: Array, rng: np.random.Generator) -> FWState:
        t0 = time.perf_counter()
        x = self.feasible_start(oracle, x0)  # l.1
        self._lmo(oracle)  # build the LMO once, here
        sec = time.perf_counter() - t0
        return FWState(x=x, t=0, seconds=sec, inaccurate=self.inaccurate_count(oracle), test_at=self.first_test(oracle))

    def step(self, oracle: CountingOracle, state: FWState, rng: np.random.Generator) -> FWState:
        t0 = time.perf_counter()
        M1 = _minibatch(oracle, self.M1, rng)  # l.2
        G = self.estimate_f0(oracle, state.x, M1, rng)  # l.3
        v, failed = self.attempt(lambda: self.lmo(oracle, G, state.x, rng))  # l.4
        if failed:
            return dataclasses.replace(state, failed=failed)
        x = state.x + self.gamma * (v - state.x)  # l.5
        test_at, verdict = self.stationarity(oracle, x, state.test_at)  # the stopping rule (not in the box)
        sec = state.seconds + time.perf_counter() - t0
        return FWState(
            x=x, t=state.t + 1, seconds=sec, inaccurate=self.inaccurate_count(oracle), test_at=test_at, verdict=verdict
        )

    def terminate(self, state: FWState) -> str | None:
        return self.stop(state)

    def outputs(self, state: FWState) -> dict[str, Array]:
        return {"x": state.x, "inaccurate_solves": np.array(float(state.inaccurate))}


# ------------------------------------------------------------------------------------------ AccZOMDA
@dataclass(frozen=True)
class AccZOMDAState:
    """AccZOMDA: iterate ``x``, previous iterate ``x_prev``, momentum estimate ``v``, counters (as :class:`PSGDState`)."""

    x: Array
    x_prev: Array
    v: Array
    t: int
    seconds: float
    inaccurate: int
    test_at: int = 0
    verdict: str = ""
    failed: str = ""


@dataclass(frozen=True)
class AccZOMDA(_ProjectedBase):
    """AccZOMDA: STORM-type momentum zeroth-order estimator with a projected (mirror) step.

    Huang, Gao, Pei & Huang, *Accelerated zeroth-order and first-order momentum methods from mini
    to minimax optimization*, 2020a (Acc-ZOM / the descent part of Acc-ZOMDA, Euclidean mirror map);
    baseline of Shi, Gao & Gu, ICML 2022, Section 6.1::

        1: x_1 = Proj_X(x0)
        for t = 1, 2, ...
        2:   eta_t = k / (m0 + t)^(1/3);  alpha_t = min(1, c eta_{t-1}^2)  (alpha_1 = 1)
        3:   draw a data batch M1 and q directions, shared by both points
        4:   v_t = G(x_t) + (1 - alpha_t)(v_{t-1} - G(x_{t-1}))        (one batched call, (2, d) base points)
        5:   x~_{t+1} = Proj_X(x_t - gamma v_t)                          (a QP over all m constraints)
        6:   x_{t+1} = x_t + eta_t (x~_{t+1} - x_t)
    """

    gamma: float = param(1e-2, symbol="gamma", doc="projected step (paper grid {1e-2, 1e-3, 1e-4})")
    k: float = param(1.0, symbol="k", doc="eta_t = k / (m0 + t)^(1/3)")
    m0: float = param(8.0, symbol="m", doc="offset of eta_t (m0 >= k^3 keeps eta_t <= 1/2)")
    c: float = param(10.0, symbol="c", doc="alpha_{t+1} = min(1, c eta_t^2)")

    def __post_init__(self) -> None:
        for name in ("gamma", "k", "m0", "c"):
            check_positive(name, getattr(self, name), name)
        self._common_checks()

    def calls_per_step(self, oracle: CountingOracle) -> int:
        return self.f0_calls(oracle, 2, self.M1) + (self.linearize_calls(oracle) if self.linearized(oracle) else 0)

    def eta_t(self, t: int) -> float:
        return min(1.0, float(self.k) / float(np.cbrt(self.m0 + t)))

    def init(self, oracle: CountingOracle, x0: Array, rng: np.random.Generator) -> AccZOMDAState:
        t0 = time.perf_counter()
        x = self.start(oracle, x0)  # l.1
        sec = time.perf_counter() - t0
        return AccZOMDAState(
            x=x, x_prev=x.copy(), v=np.zeros(oracle.dim), t=0, seconds=sec, inaccurate=self.inaccurate_count(oracle),
            test_at=self.first_test(oracle),
        )

    def step(self, oracle: CountingOracle, state: AccZOMDAState, rng: np.random.Generator) -> AccZOMDAState:
        t0 = time.perf_counter()
        t = state.t + 1
        eta = self.eta_t(t)  # l.2
        alpha = 1.0 if t == 1 else min(1.0, self.c * self.eta_t(t - 1) ** 2)  # l.2
        M1 = _minibatch(oracle, self.M1, rng)  # l.3
        G = self.estimate_f0(oracle, np.vstack([state.x, state.x_prev]), M1, rng)  # l.3-4: G[0] at x_t, G[1] at x_{t-1}
        v = G[0] + (1.0 - alpha) * (state.v - G[1])  # l.4
        x_tilde, failed = self.attempt(lambda: self.project(oracle, state.x - self.gamma * v, state.x, rng))  # l.5
        if failed:
            return dataclasses.replace(state, failed=failed)
        x = state.x + eta * (x_tilde - state.x)  # l.6
        test_at, verdict = self.stationarity(oracle, x, state.test_at)  # the stopping rule (not in the box)
        sec = state.seconds + time.perf_counter() - t0
        return AccZOMDAState(
            x=x, x_prev=state.x, v=v, t=t, seconds=sec, inaccurate=self.inaccurate_count(oracle), test_at=test_at,
            verdict=verdict,
        )

    def terminate(self, state: AccZOMDAState) -> str | None:
        return self.stop(state)

    def outputs(self, state: AccZOMDAState) -> dict[str, Array]:
        return {"x": state.x, "inaccurate_solves": np.array(float(state.inaccurate))}


# ------------------------------------------------------------------------------------------ Acc-SZOFW
@dataclass(frozen=True)
class AccSZOFWState:
    """Acc-SZOFW: iterate ``x``, previous iterate ``x_prev``, SPIDER estimate ``v``, FW sequence ``z``, counters (as
    :class:`PSGDState`)."""

    x: Array
    x_prev: Array
    v: Array
    z: Array
    t: int
    seconds: float
    inaccurate: int
    test_at: int = 0
    verdict: str = ""
    failed: str = ""


@dataclass(frozen=True)
class AccSZOFW(_FrankWolfeBase):
    """Acc-SZOFW: SPIDER zeroth-order estimator with a momentum-accelerated Frank-Wolfe step.

    Huang, Tao & Chen, *Accelerated stochastic gradient-free and projection-free methods*, ICML
    2020 (Algorithm 1, finite-sum form); baseline of Shi, Gao & Gu, ICML 2022, Section 6.1. The
    feasible set is intersected with the ball ``||w|| <= R`` (``ball="linf"``: an LP)::

        1: x_1 = z_1 = Proj_{X ∩ B_R}(x0)
        for t = 1, 2, ...
        2:   if (t - 1) mod period == 0: v_t = G(x_t; S1)              (large batch S1)
        3:   else: v_t = v_{t-1} + G(x_t; S2) - G(x_{t-1}; S2)          (same directions; one call)
        4:   w_t = argmin_{w in X ∩ B_R} <v_t, w>                        (an LP over all m constraints)
        5:   alpha_t = 1 / (t + 1);  gamma_t = min(1, (1 + alpha_t) eta)
        6:   z_{t+1} = z_t + gamma_t (w_t - z_t)
        7:   y_{t+1} = x_t + eta (w_t - x_t)
        8:   x_{t+1} = (1 - alpha_t) y_{t+1} + alpha_t z_{t+1}
    """

    eta: float = param(1e-2, symbol="eta", doc="Frank-Wolfe step in (0, 1] (paper grid {1e-2, 1e-3, 1e-4})")
    period: int = param(10, symbol="q_s", doc="a large-batch estimate every this many iterations")
    S1: int | None = param(None, symbol="|S1|", doc="large batch (None: all n)")
    M1: int | None = param(
        _DEFAULT_M1, symbol="|S2|", doc="small batch of the recursive corrections (default min(128, n); None: all n)"
    )

    def __post_init__(self) -> None:
        if not (isinstance(self.eta, (int, float)) and 0 < self.eta <= 1):
            raise InvalidParameterError(f"eta (Frank-Wolfe step) must lie in (0, 1], got {self.eta!r}")
        check_int("period", self.period)
        if self.S1 is not None:
            check_int("S1", self.S1)
        self._fw_checks()
        self._common_checks()

    def validate(self, oracle: CountingOracle) -> None:
        super().validate(oracle)
        if self.S1 is not None:
            check_batch("S1", self.S1, oracle.n, "data components (n)")

    def calls_per_step(self, oracle: CountingOracle, state: AccSZOFWState) -> int:
        large = state.t % self.period == 0
        f0 = self.f0_calls(oracle, 1, self.S1) if large else self.f0_calls(oracle, 2, self.M1)
        return f0 + (self.linearize_calls(oracle) if self.linearized(oracle) else 0)

    def init(self, oracle: CountingOracle, x0: Array, rng: np.random.Generator) -> AccSZOFWState:
        t0 = time.perf_counter()
        x = self.feasible_start(oracle, x0)  # l.1
        self._lmo(oracle)  # build the LMO once, here
        zero = np.zeros(oracle.dim)
        sec = time.perf_counter() - t0
        return AccSZOFWState(
            x=x, x_prev=x.copy(), v=zero, z=x.copy(), t=0, seconds=sec, inaccurate=self.inaccurate_count(oracle),
            test_at=self.first_test(oracle),
        )

    def step(self, oracle: CountingOracle, state: AccSZOFWState, rng: np.random.Generator) -> AccSZOFWState:
        t0 = time.perf_counter()
        t = state.t + 1
        if state.t % self.period == 0:
            S1 = _minibatch(oracle, self.S1, rng)
            v = self.estimate_f0(oracle, state.x, S1, rng)  # l.2
        else:
            S2 = _minibatch(oracle, self.M1, rng)
            G = self.estimate_f0(oracle, np.vstack([state.x, state.x_prev]), S2, rng)
            v = state.v + G[0] - G[1]  # l.3
        w, failed = self.attempt(lambda: self.lmo(oracle, v, state.x, rng))  # l.4
        if failed:
            return dataclasses.replace(state, failed=failed)
        alpha = 1.0 / (t + 1.0)  # l.5
        gamma = min(1.0, (1.0 + alpha) * self.eta)  # l.5
        z = state.z + gamma * (w - state.z)  # l.6
        y = state.x + self.eta * (w - state.x)  # l.7
        x = (1.0 - alpha) * y + alpha * z  # l.8
        test_at, verdict = self.stationarity(oracle, x, state.test_at)  # the stopping rule (not in the box)
        sec = state.seconds + time.perf_counter() - t0
        return AccSZOFWState(
            x=x, x_prev=state.x, v=v, z=z, t=t, seconds=sec, inaccurate=self.inaccurate_count(oracle), test_at=test_at,
            verdict=verdict,
        )

    def terminate(self, state: AccSZOFWState) -> str | None:
        return self.stop(state)

    def outputs(self, state: AccSZOFWState) -> dict[str, Array]:
        return {"x": state.x, "inaccurate_solves": np.array(float(state.inaccurate))}

