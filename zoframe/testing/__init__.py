"""A contract-test kit that every solver and estimator plugin can reuse in its own tests.

::

    from zoframe.testing import check_estimator, check_problem, check_solver

    def test_my_solver_contract():
        check_solver(MY_SOLVER_SPEC)            # or check_solver("my-solver")

    def test_my_estimator_contract():
        check_estimator(MY_ESTIMATOR_SPEC)

    def test_my_problem_contract():
        check_problem(MY_PROBLEM_SPEC, kwargs={"dim": 5})   # or a name, or a problem object

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
smallest problems
    with its DEFAULT parameters the solver runs on the smoke problems with ``n = 1`` component and
    ``m = 1`` constraint (and ``d = 1``) without raising, ending at a finite point;
progress
    the median over three seeds of the problem's ``merit`` closes at least a quarter of the gap
    from the start to the optimum within ``progress_iters`` iterations.

Each check is also available on its own (``SolverContract(spec).check_determinism(kind)``, ...).

:func:`check_problem` checks a problem (object, spec or registered name): a valid kind and ``x0``,
every function of its kind answers a batch of points with one ``(k, b)`` block of finite values,
the same as point by point, the same on a second call, without modifying its input, and the problem
survives a pickle round trip (needed to evaluate on a process pool).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
import dataclasses
import hashlib
import math
import pickle
import tempfile
from typing import Any

import numpy as np

from zoframe.driver import minimize
from zoframe.errors import InvalidInputError, ZoframeError
from zoframe.oracle import CountingOracle, problem_kind
from zoframe.registry import Registry, default_registry
from zoframe.result import Result, Status
from zoframe.specs import EstimatorSpec, ProblemSpec, SolverSpec
from zoframe.testing.problems import smoke_problem

__all__ = ["ContractFailure", "SolverContract", "check_estimator", "check_problem", "check_solver", "smoke_problem"]


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

    def check_smallest_problems(self, kind: str, max_iter: int = 20) -> None:
        """The solver with its DEFAULT parameters (not ``contract_params``) runs on the smallest problems
        of the kind: ``n = 1`` component, ``m = 1`` constraint, and ``d = 1`` as well. A default that
        only fits larger problems (a batch of 4 components, 16 sampled constraints) must adapt to the
        problem or the run must end with a clear status; it must not raise."""
        try:
            solver = self.spec.cls()
        except TypeError:  # a required parameter without a default: the contract parameters supply it
            solver = self.solver()
        for dims in ({}, {"dim": 1}):
            problem = smoke_problem(kind, **_SMALLEST[kind], **dims)
            label = ", ".join(f"{k} = {v}" for k, v in {**_SMALLEST[kind], **dims}.items())
            try:
                res = minimize(problem, solver, rng=0, max_iter=max_iter, registry=self.registry)
            except Exception as exc:  # a ContractFailure with the error, not the error itself
                _fail(
                    f"{self.spec.name} with its default parameters fails on the smoke {kind} problem with "
                    f"{label}: {type(exc).__name__}: {exc}"
                )
            if res.status is Status.FAILED or not bool(np.all(np.isfinite(res.x))):
                _fail(f"{self.spec.name} on the smoke {kind} problem with {label}: status {res.status.name}, "
                      f"x = {res.x}: {res.message}")  # fmt: skip

    def check_all(self) -> None:
        for kind in self.kinds():
            self.check_smallest_problems(kind)
            self.check_determinism(kind)
            self.check_exact_budget(kind)
            self.check_declared_cost(kind)
            self.check_inputs_not_mutated(kind)
            self.check_checkpoint_resume(kind)
            self.check_progress(kind)


#: the smallest sizes of each kind's smoke problem (``check_smallest_problems``)
_SMALLEST: dict[str, dict[str, int]] = {
    "finite_sum": {"n": 1},
    "constrained": {"n": 1, "m": 1},
    "minimax": {"n": 1},
    "composite": {"n": 1},
}


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


def _problem_functions(
    problem: Any, oracle: CountingOracle, X: np.ndarray, Y: np.ndarray | None
) -> dict[str, Callable[[slice], np.ndarray]]:
    """``name -> f(rows)``: every function of the problem's kind at the points ``X[rows]`` (and ``Y[rows]``)."""
    idx = np.arange(min(oracle.n, 3))
    funs: dict[str, Callable[[slice], np.ndarray]] = {}
    if oracle.kind == "minimax" and Y is not None:
        funs["minimax F(X, Y, idx)"] = lambda rows: oracle.minimax(X[rows], Y[rows], idx)
    else:
        funs["objective components(X, idx)"] = lambda rows: oracle.objective(X[rows], idx)
    if oracle.kind == "constrained":
        jdx = np.arange(min(oracle.m, 3))
        funs["constraints(X, idx)"] = lambda rows: oracle.constraints(X[rows], jdx)
    if oracle.m_eq:
        ldx = np.arange(min(oracle.m_eq, 3))
        funs["equalities(X, idx)"] = lambda rows: oracle.equalities(X[rows], ldx)
    return funs


def _check_fresh(problem: Any, label: str, X: np.ndarray, Y: np.ndarray | None) -> None:
    """A problem declaring ``fresh_results = True``: two calls of each of its functions return
    writeable arrays sharing no memory with each other nor with the problem's array attributes."""
    kind = problem.kind
    calls: dict[str, Callable[[], Any]] = {}
    if kind == "minimax" and Y is not None:
        calls["values"] = lambda: problem.values(X, Y, np.arange(min(int(problem.n), 3)))
    else:
        calls["components"] = lambda: problem.components(X, np.arange(min(int(getattr(problem, "n", 1)), 3)))
    if kind == "constrained":
        calls["constraints"] = lambda: problem.constraints(X, np.arange(min(int(problem.m), 3)))
        if int(getattr(problem, "m_eq", 0) or 0):
            calls["equalities"] = lambda: problem.equalities(X, np.arange(min(int(problem.m_eq), 3)))
    held = [v for v in (vars(problem) if hasattr(problem, "__dict__") else {}).values() if isinstance(v, np.ndarray)]
    for name, call in calls.items():
        first, second = call(), call()
        for out in (first, second):
            if isinstance(out, np.ndarray) and not out.flags.writeable:
                _fail(f"problem {label} declares fresh_results = True but {name} returned a read-only array")
        if isinstance(first, np.ndarray) and isinstance(second, np.ndarray):
            if np.shares_memory(first, second) or any(np.shares_memory(first, h) for h in held):
                _fail(
                    f"problem {label} declares fresh_results = True but {name} returned memory it holds (the same "
                    "array on two calls, or one of its attributes): return a new array per call or drop the declaration"
                )


def check_problem(
    problem: Any,
    *,
    registry: Registry | None = None,
    kwargs: Mapping[str, Any] | None = None,
    picklable: bool = True,
    rtol: float = 1e-10,
) -> None:
    """Check a problem: kind, ``x0``, batched evaluation, determinism, inputs kept, pickling.

    ``problem`` is a problem object, a :class:`~zoframe.specs.ProblemSpec` or a registered problem
    name (built with ``kwargs``). For each function of its kind (the objective's components, the
    constraints, the minimax ``F``), on three points near ``x0`` and up to three components:

    * one call returns a ``(3, b)`` block of finite values and is counted as ``3 b`` evaluations;
    * the block equals the three one-point calls (relative tolerance ``rtol``): a vectorized
      function must not mix rows;
    * a second call gives the same values, and the points are not modified;
    * a problem declaring ``fresh_results = True`` returns a new writeable array on every call,
      sharing no memory with its other results or its array attributes.

    With ``picklable=True`` the problem must survive ``pickle`` with the same values: a process pool
    (``executor=ProcessPoolExecutor(...)``) ships it to its workers. Define a plugin's problem
    functions at module level (a lambda or a closure does not pickle).
    """
    if isinstance(problem, (str, ProblemSpec)):
        spec = (registry or default_registry()).problem(problem) if isinstance(problem, str) else problem
        built = spec.factory(**dict(kwargs or {}))
        if getattr(built, "kind", None) != spec.kind:
            _fail(f"problem {spec.name}: the spec declares kind {spec.kind!r}, the factory built {getattr(built, 'kind', None)!r}")
        label, problem = spec.name, built
    else:
        label = type(problem).__name__
    try:
        kind = problem_kind(problem)
        x0 = np.asarray(problem.x0)
        if x0.ndim != 1 or x0.dtype.kind not in "fiu" or not np.all(np.isfinite(x0)):
            _fail(f"problem {label}: x0 must be a 1-D array of finite real numbers, got shape {x0.shape}, dtype {x0.dtype}")
        oracle = CountingOracle(problem)
        rng = np.random.default_rng(0)
        X = x0.astype(float) + 0.1 * rng.standard_normal((3, x0.shape[0]))
        Y = None
        if kind == "minimax":
            y0 = np.asarray(problem.y0, dtype=float)
            Y = y0 + 0.1 * rng.standard_normal((3, y0.shape[0]))
        X_copy = X.copy()
        funs = _problem_functions(problem, oracle, X, Y)
        every = slice(None)
        for name, f in funs.items():
            before = oracle.calls
            block = f(every)
            b = block.shape[1] if block.ndim == 2 else -1
            if block.shape != (3, b) or b < 1:
                _fail(f"problem {label} ({kind}): {name} returned shape {block.shape} for 3 points, expected (3, b)")
            if oracle.calls - before != 3 * b:
                _fail(f"problem {label}: {name} was counted as {oracle.calls - before} evaluations, expected {3 * b}")
            if not np.all(np.isfinite(block)):
                _fail(f"problem {label}: {name} returned non-finite values near x0: {block}")
            rows = np.vstack([f(slice(r, r + 1)) for r in range(3)])
            if not np.allclose(block, rows, rtol=rtol, atol=rtol * (1.0 + float(np.abs(block).max()))):
                _fail(f"problem {label}: {name} on 3 points at once differs from 3 one-point calls ({block} vs {rows}); "
                      "a vectorized function must treat each row of X on its own")
            if not np.array_equal(f(every), block):
                _fail(f"problem {label}: {name} gave different values for the same points on a second call")
            if not np.array_equal(X, X_copy):
                _fail(f"problem {label}: {name} modified the points it was given")
        if getattr(problem, "fresh_results", False) is True:
            _check_fresh(problem, label, X, Y)
        known = getattr(problem, "known_solution", None)
        if callable(known):
            sol = known()
            if "x" in sol and np.shape(sol["x"]) != x0.shape:
                _fail(f"problem {label}: known_solution()['x'] has shape {np.shape(sol['x'])}, x0 has {x0.shape}")
    except ZoframeError as exc:
        _fail(f"problem {label}: {type(exc).__name__}: {exc}")
    if picklable:
        try:
            clone = pickle.loads(pickle.dumps(problem))
        except Exception as exc:  # any pickling failure says the same thing to the author
            _fail(
                f"problem {label} does not pickle ({type(exc).__name__}: {exc}); problems must pickle to be evaluated "
                "on a process pool: define their functions at module level (not lambdas or closures), or pass "
                "picklable=False if the problem is only ever used in-process"
            )
        twins = _problem_functions(clone, CountingOracle(clone), X, Y)
        for (name, f), g in zip(funs.items(), twins.values()):
            if not np.array_equal(f(every), g(every)):
                _fail(f"problem {label}: {name} gives other values after a pickle round trip")
