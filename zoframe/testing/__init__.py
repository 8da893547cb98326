"""A contract-test kit that every solver and estimator plugin can reuse in its own tests.

::

    from zoframe.testing import check_solver, check_estimator

    def test_my_solver_contract():
        check_solver(MY_SOLVER_SPEC)            # or check_solver("my-solver")

    def test_my_estimator_contract():
        check_estimator(MY_ESTIMATOR_SPEC)

:func:`check_solver` runs the solver (with ``spec.contract_params``) on the smoke problem of every
kind it declares (:mod:`zoframe.testing.problems`) and checks:

determinism
    the same seed gives a bit-identical ``x`` and the same evaluation count;
exact budget
    a run with ``max_calls`` never counts more, and ends with status ``BUDGET``;
declared cost
    if the solver declares ``calls_per_step(oracle)``, each step costs exactly that;
inputs not mutated
    ``x0`` and the problem's arrays are unchanged after a run;
checkpoint and resume
    10 iterations, checkpoint, 10 more from the checkpoint == 20 straight iterations;
progress
    the median over three seeds of the problem's ``merit`` closes at least a quarter of the gap
    from the start to the optimum within ``progress_iters`` iterations.

Each check is also available on its own (``SolverContract(spec).check_determinism(kind)``, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
import dataclasses
import hashlib
import math
import tempfile
from typing import Any

import numpy as np

from zoframe.driver import minimize
from zoframe.errors import InvalidInputError
from zoframe.oracle import CountingOracle
from zoframe.registry import Registry, default_registry
from zoframe.result import Result, Status
from zoframe.specs import EstimatorSpec, SolverSpec
from zoframe.testing.problems import smoke_problem

__all__ = ["ContractFailure", "SolverContract", "check_estimator", "check_solver", "smoke_problem"]


class ContractFailure(AssertionError):
    """A plugin broke one of the contracts of :mod:`zoframe.testing`."""


def _fail(msg: str) -> None:
    raise ContractFailure(msg)


def _fingerprint(obj: Any) -> str:
    """A hash of every numpy array reachable from ``obj``'s attributes (one level of containers)."""
    h = hashlib.sha256()
    values: list[Any] = []
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        values = [getattr(obj, f.name) for f in dataclasses.fields(obj)]
    else:
        values = list(vars(obj).values()) if hasattr(obj, "__dict__") else []
    for v in values:
        items = v if isinstance(v, (tuple, list)) else (v,)
        for item in items:
            if isinstance(item, np.ndarray):
                h.update(np.ascontiguousarray(item).tobytes())
            elif dataclasses.is_dataclass(item) and not isinstance(item, type):
                h.update(_fingerprint(item).encode())
    return h.hexdigest()


class SolverContract:
    """The contract checks for one solver spec."""

    def __init__(
        self,
        spec: SolverSpec | str,
        *,
        params: Mapping[str, Any] | None = None,
        registry: Registry | None = None,
        progress_iters: int = 200,
    ) -> None:
        reg = registry or default_registry()
        self.spec = reg.solver(spec) if isinstance(spec, str) else spec
        self.params = dict(self.spec.contract_params if params is None else params)
        self.registry = reg
        self.progress_iters = progress_iters

    def kinds(self) -> list[str]:
        return sorted(self.spec.problem_kinds)

    def solver(self) -> Any:
        return self.spec.cls(**self.params)

    def run(self, kind: str, seed: int = 0, **kwargs: Any) -> Result:
        return minimize(smoke_problem(kind), self.solver(), rng=seed, registry=self.registry, **kwargs)

    # ------------------------------------------------------------------ checks
    def check_determinism(self, kind: str) -> None:
        a = self.run(kind, seed=123, max_iter=15)
        b = self.run(kind, seed=123, max_iter=15)
        if not np.array_equal(a.x, b.x) or a.nfev != b.nfev:
            _fail(f"{self.spec.name} on {kind}: the same seed gave different results ({a.x} vs {b.x})")

    def check_exact_budget(self, kind: str) -> None:
        probe = self.run(kind, seed=1, max_iter=3)
        per_iter = max(1, probe.nfev // 4)
        limit = probe.nfev + per_iter // 2 + 1
        res = self.run(kind, seed=1, max_calls=limit, max_iter=10_000)
        if res.nfev > limit:
            _fail(f"{self.spec.name} on {kind}: {res.nfev} evaluations counted with max_calls={limit}")
        if res.status is not Status.BUDGET and res.status is not Status.CONVERGED:
            _fail(f"{self.spec.name} on {kind}: run with max_calls={limit} ended with {res.status.name}, not BUDGET")

    def check_declared_cost(self, kind: str) -> None:
        solver = self.solver()
        declared = getattr(solver, "calls_per_step", None)
        if not callable(declared):
            return
        problem = smoke_problem(kind)
        oracle = CountingOracle(problem)
        validate = getattr(solver, "validate", None)
        if callable(validate):
            validate(oracle)
        rng = np.random.default_rng(5)
        state = solver.init(oracle, np.array(problem.x0, dtype=float), rng)
        for _ in range(3):
            before = oracle.calls
            expected = declared(oracle, state) if _takes_state(declared) else declared(oracle)
            state = solver.step(oracle, state, rng)
            if oracle.calls - before != expected:
                _fail(f"{self.spec.name} on {kind}: declared {expected} calls per step, counted {oracle.calls - before}")

    def check_inputs_not_mutated(self, kind: str) -> None:
        problem = smoke_problem(kind)
        x0 = np.array(problem.x0, dtype=float) + 0.1
        x0_copy = x0.copy()
        before = _fingerprint(problem)
        minimize(problem, self.solver(), rng=3, max_iter=10, x0=x0, registry=self.registry)
        if not np.array_equal(x0, x0_copy):
            _fail(f"{self.spec.name} on {kind}: the caller's x0 was modified")
        if _fingerprint(problem) != before:
            _fail(f"{self.spec.name} on {kind}: the problem's arrays were modified")

    def check_checkpoint_resume(self, kind: str) -> None:
        straight = self.run(kind, seed=11, max_iter=20, record_every=0)
        with tempfile.TemporaryDirectory() as tmp:
            path = f"{tmp}/ck"
            self.run(kind, seed=11, max_iter=10, checkpoint=path, record_every=0)
            resumed = minimize(
                smoke_problem(kind), self.solver(), max_iter=20, resume=path, record_every=0, registry=self.registry
            )
        if not np.array_equal(straight.x, resumed.x) or straight.nfev != resumed.nfev:
            _fail(f"{self.spec.name} on {kind}: resuming from a checkpoint changed the trajectory")

    def check_progress(self, kind: str, seeds: Iterable[int] = (0, 1, 2)) -> None:
        problem = smoke_problem(kind)
        opt = float(problem.known_solution()["merit"])
        start: float | None = None
        ends = []
        for seed in seeds:
            res = minimize(problem, self.solver(), rng=seed, max_iter=self.progress_iters, registry=self.registry)
            merit = res.trace["merit"]
            start = float(merit[0])
            ends.append(float(merit[-1]) if math.isfinite(merit[-1]) else math.inf)
        if start is None:
            raise InvalidInputError("check_progress needs at least one seed")
        median_end = float(np.median(ends))
        if not median_end <= start - 0.25 * (start - opt):
            _fail(
                f"{self.spec.name} on {kind}: no progress in {self.progress_iters} iterations: merit "
                f"{start:.4g} -> median {median_end:.4g} (optimum {opt:.4g}); adjust contract_params"
            )

    def check_all(self) -> None:
        for kind in self.kinds():
            self.check_determinism(kind)
            self.check_exact_budget(kind)
            self.check_declared_cost(kind)
            self.check_inputs_not_mutated(kind)
            self.check_checkpoint_resume(kind)
            self.check_progress(kind)


def _takes_state(fn: Callable[..., Any]) -> bool:
    import inspect

    try:
        return len(inspect.signature(fn).parameters) >= 2
    except (TypeError, ValueError):
        return False


def check_solver(spec: SolverSpec | str, **kwargs: Any) -> None:
    """Run every solver contract check (see the module docstring)."""
    SolverContract(spec, **kwargs).check_all()


def check_estimator(spec: EstimatorSpec | str, *, registry: Registry | None = None, params: Mapping[str, Any] | None = None) -> None:
    """Check an estimator: one batched call, declared cost, determinism, inputs kept, accuracy.

    Accuracy: on ``f(x) = 0.5 ||x - c||^2`` (d = 5) the mean of 400 estimates is within 25% of
    ``||grad f||`` of the true gradient.
    """
    reg = registry or default_registry()
    sp = reg.estimator(spec) if isinstance(spec, str) else spec
    est = sp.cls(**(params or {}))
    d, b = 5, 3
    c = np.linspace(-1.0, 1.0, d)
    calls: list[int] = []

    def fun(X: np.ndarray) -> np.ndarray:
        calls.append(X.shape[0])
        v = 0.5 * ((X - c) ** 2).sum(axis=1)
        out: np.ndarray = np.repeat(v[:, None], b, axis=1)
        return out

    x = np.full(d, 0.3)
    x_copy = x.copy()
    e1 = est.estimate(fun, x, np.random.default_rng(0))
    if len(calls) != 1:
        _fail(f"estimator {sp.name}: {len(calls)} calls of the function for one estimate (must be exactly 1)")
    rows = est.rows(d, 1)
    if calls[0] != rows:
        _fail(f"estimator {sp.name}: declared {rows} rows, built {calls[0]}")
    if getattr(e1, "calls", rows * b) != rows * b:
        _fail(f"estimator {sp.name}: Estimate.calls={e1.calls}, expected rows*b={rows * b}")
    if not np.array_equal(x, x_copy):
        _fail(f"estimator {sp.name}: modified its input point")
    e2 = est.estimate(fun, x, np.random.default_rng(0))
    if not np.array_equal(e1.grad, e2.grad):
        _fail(f"estimator {sp.name}: the same rng gave different estimates")
    oracle_problem = smoke_problem("finite_sum")
    oracle = CountingOracle(oracle_problem)
    idx = np.arange(3)
    est.estimate(lambda X: oracle.objective(X, idx), oracle_problem.x0, np.random.default_rng(1))
    if oracle.calls != est.rows(oracle.dim, 1) * len(idx):
        _fail(f"estimator {sp.name}: the oracle counted {oracle.calls} evaluations, declared {est.rows(oracle.dim, 1) * len(idx)}")
    rng = np.random.default_rng(2)
    true = x - c
    mean = np.mean([est.estimate(fun, x, rng).grad for _ in range(400)], axis=0)
    if np.linalg.norm(mean - true) > 0.25 * np.linalg.norm(true):
        _fail(f"estimator {sp.name}: mean of 400 estimates {mean} is far from the gradient {true}")
    if not isinstance(e1.grad, np.ndarray) or e1.grad.shape != (d,):
        raise InvalidInputError(f"estimator {sp.name}: grad must have shape ({d},)")
