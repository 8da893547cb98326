"""The scipy peers in the driver's thread (``unobserved_steps()``) give the threaded run bit for bit.

Every state a step returns, the Result (x, fun, nit, counts by kind and purpose, status, message,
trace), the budget stop, errors (raised at the same iteration, with the same partial result) and the
replay of a checkpoint are compared between the two paths, for cobyla, cobyqa, nelder-mead, powell,
slsqp-fd and trust-constr-fd (whose difference gradients are batches of points), on unconstrained,
bounded and constrained problems.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import threading
from typing import Any

import numpy as np
import pytest
import scipy

import zoframe
from zoframe.driver import RunFailedError, build_run
from zoframe.errors import NonFiniteValueError
from zoframe.oracle import CountingOracle
from zoframe.result import Result, Status
from zoframe.sets import Box
from zoframe_basic.problems import LeastSquares
from zoframe_bench.suites import BallConstrainedQuadratic, RandomQP
from zoframe_peers.solvers import COBYLA, COBYQA, SLSQPFD, NelderMead, PeerState, Powell, TrustConstrFD

SCIPY = {"cobyla": COBYLA, "cobyqa": COBYQA, "nelder-mead": NelderMead, "powell": Powell, "slsqp-fd": SLSQPFD,
         "trust-constr-fd": TrustConstrFD}
CONSTRAINED = ["cobyla", "cobyqa", "slsqp-fd", "trust-constr-fd"]


class _Rosenbrock:
    """Rosenbrock's function, optionally in a box, as a bare finite-sum problem (measures free)."""

    kind = "finite_sum"
    n = 1
    monitor_free = True

    def __init__(self, dim: int, bounds: tuple[float, float] | None = None) -> None:
        self.dim = dim
        self.x0 = np.tile([-1.2, 1.0], (dim + 1) // 2)[:dim]
        if bounds is not None:  # x0 inside the box, the minimiser (1, ..., 1) outside
            self.feasible_set = Box(dim, bounds[0], bounds[1])
            self.x0 = np.clip(self.x0, bounds[0], bounds[1])

    def components(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        v = np.sum((1.0 - X[:, :-1]) ** 2 + 100.0 * (X[:, 1:] - X[:, :-1] ** 2) ** 2, axis=1)
        return np.repeat(v[:, None], len(idx), axis=1)


class _Failing:
    """A problem whose objective raises (or returns NaN) at its ``at``-th call."""

    kind = "finite_sum"
    n = 3
    monitor_free = True

    def __init__(self, at: int, nan: bool = False) -> None:
        self.base = LeastSquares(dim=4, n=3, seed=2)
        self.dim, self.x0 = 4, self.base.x0
        self.at, self.nan, self.calls = at, nan, 0

    def components(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        self.calls += 1
        out = self.base.components(X, idx)
        if self.calls == self.at:
            if not self.nan:
                raise ValueError(f"the objective fails at call {self.at}")
            out = out.copy()
            out[0, 0] = np.nan
        return out


def _both(solver: str, **params: Any) -> tuple[Any, Any]:
    threaded = SCIPY[solver](**params)
    here = threaded.unobserved_steps()
    assert here.in_driver_thread and not threaded.in_driver_thread and here == threaded
    return threaded, here


def _same_result(a: Result, b: Result) -> None:
    assert np.array_equal(a.x, b.x) and np.array_equal(a.x_best, b.x_best)
    assert np.array_equal(a.fun, b.fun, equal_nan=True) and np.array_equal(a.fun_best, b.fun_best, equal_nan=True)
    assert (a.nit, a.nfev, a.user_calls) == (b.nit, b.nfev, b.user_calls)
    assert a.nfev_by_kind == b.nfev_by_kind and a.nfev_by_purpose == b.nfev_by_purpose
    assert (a.status, a.success, a.message, a.feasible) == (b.status, b.success, b.message, b.feasible)
    assert a.max_violation == b.max_violation
    assert set(a.trace) == set(b.trace)
    for key in a.trace:
        if key != "seconds":
            assert np.array_equal(a.trace[key], b.trace[key], equal_nan=True), key
    assert set(a.outputs) == set(b.outputs) and all(np.array_equal(a.outputs[k], b.outputs[k]) for k in a.outputs)
    assert a.measures == b.measures


def _same_state(a: PeerState, b: PeerState) -> None:
    for f in dataclasses.fields(PeerState):
        va, vb = getattr(a, f.name), getattr(b, f.name)
        if isinstance(va, np.ndarray):
            assert np.array_equal(va, vb) and va.shape == vb.shape, f.name
        else:
            assert va == vb or (va != va and vb != vb), f.name


def _states(solver: Any, problem: Any, max_calls: int | None, steps: int = 5_000) -> tuple[list[PeerState], BaseException | None]:
    """Drive ``init`` / ``step`` by hand: every state, then the error that ended the run (if any)."""
    oracle = CountingOracle(problem, max_calls=max_calls)
    rng = np.random.default_rng(3)
    state = solver.init(oracle, np.array(problem.x0, dtype=np.float64), rng)
    out = [state]
    try:
        while not state.done and len(out) < steps:
            state = solver.step(oracle, state, rng)
            out.append(state)
    except Exception as exc:  # the run's error, raised by the step where it happens
        return out, exc
    return out, None


def _run(problem: Any, solver: Any, **kwargs: Any) -> Result:
    """``minimize`` with the solver as given (``minimize`` itself would run the threaded peer's
    ``unobserved_steps()`` copy: nothing reads these runs between steps)."""
    kwargs = {"rng": 0, "record_every": 0, **kwargs}
    return build_run(problem, solver, watched=True, **kwargs).run()


def _outcome(problem: Any, solver: Any, **kwargs: Any) -> tuple[Result, str]:
    """The Result of a run and its error (``""`` if none); a failed run's partial Result."""
    try:
        return _run(problem, solver, **kwargs), ""
    except RunFailedError as exc:
        return exc.result, f"{exc}; {type(exc.__cause__).__name__}: {exc.__cause__}"


PROBLEMS: list[tuple[Any, list[int | None]]] = [
    # (problem, budgets: None converges, then runs that end exactly at max_calls or with n + m - 1 left)
    (LeastSquares(dim=3, n=4, seed=1), [None, 4 * 60, 4 * 60 + 3]),
    (_Rosenbrock(4), [157]),
    (_Rosenbrock(3, (-1.0, 0.8)), [90]),
]


@pytest.mark.parametrize("solver", sorted(SCIPY))
@pytest.mark.parametrize("chunk", [None, 1, 7])
def test_every_state_is_that_of_the_threaded_run(solver: str, chunk: int | None) -> None:
    threaded, here = _both(solver, points_per_step=chunk)
    cases = [(p, b) for p, budgets in PROBLEMS for b in budgets]
    if solver in CONSTRAINED:
        cases += [(BallConstrainedQuadratic(dim=3, n=2, seed=3), None), (BallConstrainedQuadratic(dim=4, n=3, seed=1), 4 * 50 + 3),
                  (RandomQP(dim=5, m=6, seed=0), 7 * 40)]
    ends = set()
    for problem, budget in cases:
        a, err_a = _states(threaded, problem, budget)
        b, err_b = _states(here, problem, budget)
        assert err_a is None and err_b is None
        assert len(a) == len(b) and a[-1].done
        for sa, sb in zip(a, b):
            _same_state(sa, sb)
        assert budget is not None or a[-1].status == Status.CONVERGED
        ends.add((budget is None, a[-1].status, a[-1].message.startswith("reached max_calls")))
    assert {(True, Status.CONVERGED, False), (False, Status.BUDGET, True)} <= ends


@pytest.mark.parametrize("solver", sorted(SCIPY))
def test_results_are_bit_identical(solver: str) -> None:
    threaded, here = _both(solver)
    problems: list[tuple[Any, int]] = [
        (_Rosenbrock(4), 157), (LeastSquares(dim=3, n=4, seed=1), 4 * 3000), (LeastSquares(dim=10, n=200, seed=0), 200 * 300),
        (_Rosenbrock(3, (-1.0, 0.8)), 300),
    ]
    if solver in CONSTRAINED:
        problems += [(BallConstrainedQuadratic(dim=4, n=3, seed=1), 4 * 100 + 3),
                     (BallConstrainedQuadratic(dim=3, n=2, seed=3), 3 * 3000), (RandomQP(dim=10, m=20, seed=0), 21 * 60)]
    for problem, budget in problems:
        # record_every=0: a trace row between the first and the last would read the oracle's counts
        # between steps, which the driver's thread path has run ahead of (the driver then keeps the thread)
        runs = [_run(problem, s, max_calls=budget) for s in (threaded, here)]
        _same_result(*runs)
        if budget == 157 and solver != "cobyqa":  # COBYQA converges at 156 points
            assert runs[0].status is Status.BUDGET and runs[0].nfev == 157


@pytest.mark.parametrize("solver", sorted(SCIPY))
def test_budget_exhausted_exactly(solver: str) -> None:
    threaded, here = _both(solver)
    problem = LeastSquares(dim=5, n=4, seed=3)
    for points in (1, 2, 23, 40):
        budget = 4 * points
        a, b = (_outcome(problem, s, max_calls=budget) for s in (threaded, here))
        assert a[1] == b[1]  # the error, if any (e.g. COBYLA's warning, an error under -W error, for 1 point)
        _same_result(a[0], b[0])
        if a[0].status is Status.BUDGET:
            assert a[0].nfev == budget and "reached max_calls" in a[0].message


@pytest.mark.parametrize("solver", sorted(SCIPY))
@pytest.mark.parametrize("nan", [False, True])
def test_errors_end_the_run_at_the_same_iteration(solver: str, nan: bool) -> None:
    threaded, here = _both(solver, points_per_step=5)
    # the difference peers make fewer, larger calls (a gradient is one call): slsqp-fd converges in 16
    for at in (1, 5, 6, 17) if solver != "slsqp-fd" else (1, 5, 6, 15):
        caught = []
        for s in (threaded, here):
            with pytest.raises(RunFailedError) as info:  # a NaN stops the run only under nonfinite="raise"
                _run(_Failing(at, nan), s, max_calls=3 * 500, nonfinite="raise")
            caught.append(info.value)
        a, b = caught
        assert type(a.__cause__) is type(b.__cause__) and str(a.__cause__) == str(b.__cause__)
        assert isinstance(a.__cause__, NonFiniteValueError if nan else ValueError)
        assert str(a) == str(b)
        _same_result(a.result, b.result)
        # the threaded states: the same sequence, the error raised by the same step
        sa, ea = _states(threaded, _Failing(at, nan), 3 * 500)
        sb, eb = _states(here, _Failing(at, nan), 3 * 500)
        assert len(sa) == len(sb) and str(ea) == str(eb)
        for x, y in zip(sa, sb):
            _same_state(x, y)


@pytest.mark.parametrize("solver", sorted(SCIPY))
def test_resumed_runs_replay_the_same_way(solver: str, tmp_path: object) -> None:
    threaded, here = _both(solver, points_per_step=6)
    problems: list[Any] = [LeastSquares(dim=3, n=4, seed=1)]
    if solver in CONSTRAINED:
        problems.append(BallConstrainedQuadratic(dim=3, n=2, seed=4))
    for k, problem in enumerate(problems):
        path = f"{tmp_path}/{solver}{k}"
        part = _run(problem, threaded, rng=5, max_iter=3, checkpoint=path)
        assert part.status is Status.MAX_ITER
        runs = [_run(problem, s, rng=None, max_calls=10**5, resume=path) for s in (threaded, here)]
        _same_result(*runs)
        assert runs[0].status is Status.CONVERGED
        straight = _run(problem, threaded, rng=5, max_calls=10**5)
        assert np.array_equal(straight.x, runs[1].x) and straight.nfev == runs[1].nfev
        # the states after the resume, step by step: the replayed points are not counted in a chunk
        oracle_states = []
        for s in (threaded, here):
            built = build_run(problem, s, max_calls=10**5, resume=path, record_every=0, watched=True)
            loop, seen = built.loop, []
            while loop.stop is None:
                loop.stop = loop.step()
                seen.append(loop.state)
            oracle_states.append(seen)
        assert len(oracle_states[0]) == len(oracle_states[1])
        for x, y in zip(*oracle_states):
            _same_state(x, y)


def _peer_threads() -> set[int | None]:
    return {t.ident for t in threading.enumerate() if t.name == "zoframe-peer"}


@pytest.mark.parametrize("solver", sorted(SCIPY))
def test_minimize_runs_an_unobserved_peer_in_the_driver_thread(solver: str) -> None:
    problem = _Rosenbrock(4) if solver not in CONSTRAINED else BallConstrainedQuadratic(dim=3, n=2, seed=4)
    before = _peer_threads()
    res = zoframe.minimize(problem, solver, rng=0, max_calls=300, record_every=0)
    assert not _peer_threads() - before  # no worker thread was started
    _same_result(res, _run(problem, SCIPY[solver](), max_calls=300))  # the threaded run, as given
    # what reads the run between steps (the default trace, a callback) runs in the driver's thread too
    watched = zoframe.minimize(problem, solver, rng=0, max_calls=300, callback=lambda info: None)
    assert not _peer_threads() - before
    _same_result(watched, _run(problem, SCIPY[solver](), max_calls=300, record_every=None, callback=lambda info: None))


def _observed(problem: Any, solver: Any, tmp: str, **kwargs: Any) -> tuple[Result, list[tuple[Any, ...]], str]:
    """A run with the default trace and a callback that records what it sees (and may stop the run or fail);
    its Result (a failed run's partial one), the callback's records and the error."""
    seen: list[tuple[Any, ...]] = []
    stop_at, fail_at = kwargs.pop("stop_at", None), kwargs.pop("fail_at", None)

    def callback(info: Any) -> bool:
        seen.append((info.nit, info.calls, np.array(info.x).tobytes(), None if info.measures is None else dict(info.measures)))
        if fail_at is not None and info.nit == fail_at:
            raise RuntimeError(f"the callback fails at iteration {info.nit}")
        return stop_at is not None and info.nit >= stop_at

    try:
        return _run(problem, solver, record_every=None, callback=callback, **kwargs), seen, ""
    except RunFailedError as exc:
        return exc.result, seen, f"{exc}; {type(exc.__cause__).__name__}: {exc.__cause__}"


def _smooth_peers() -> dict[str, Any]:
    """The peers of zoframe_peers.smooth that run a library's own loop in a scipy session (Py-BOBYQA if installed)."""
    from zoframe_peers.smooth import LBFGSBFD, PyBOBYQA

    out: dict[str, Any] = {"lbfgsb-fd": LBFGSBFD}
    try:
        import pybobyqa  # noqa: F401
    except ImportError:
        return out
    out["pybobyqa"] = PyBOBYQA
    return out


@pytest.mark.parametrize("solver", sorted(_smooth_peers()))
def test_the_smooth_peers_in_the_driver_thread_are_the_threaded_runs(solver: str) -> None:
    """L-BFGS-B on differences and Py-BOBYQA (their sessions are scipy sessions too): the same Results, callback
    calls and stops on both paths, a callback stop ending the library's run."""
    cls = _smooth_peers()[solver]
    threaded = cls(points_per_step=3)
    here = threaded.unobserved_steps()
    problem = _Rosenbrock(3, (-1.0, 0.8))
    for extra in ({"max_calls": 300}, {"max_calls": 300, "stop_at": 4}, {"max_calls": 300, "max_iter": 3}):
        (a, seen_a, err_a), (b, seen_b, err_b) = (_observed(problem, s, "", **dict(extra)) for s in (threaded, here))
        gc.collect()
        assert err_a == err_b == "" and seen_a == seen_b and seen_a, extra
        _same_result(a, b)


@pytest.mark.parametrize("solver", sorted(SCIPY))
def test_observed_runs_in_the_driver_thread_are_the_threaded_runs(solver: str, tmp_path: object) -> None:
    """The default trace, a callback (reading every step, stopping the run, failing), max_iter, max_time and
    checkpoints: the driver's-thread path (the loop's work done from inside scipy's calls) gives the threaded
    run's Result, trace, callback calls, stops and errors; a stop ends scipy's run there (no thread left)."""
    threaded, here = _both(solver, points_per_step=4)
    problem = _Rosenbrock(4) if solver not in CONSTRAINED else BallConstrainedQuadratic(dim=3, n=2, seed=4)
    variants: list[dict[str, Any]] = [
        {"max_calls": 400}, {"max_calls": 400, "max_iter": 5}, {"max_calls": 400, "stop_at": 3},
        {"max_calls": 400, "fail_at": 4}, {"max_calls": 400, "max_time": 1e-12}, {"max_calls": 10**4},
        {"max_calls": 400, "nonfinite": "inf"},
    ]
    for extra in variants:
        ends = []
        for s in (threaded, here):
            before = _peer_threads()
            ends.append(_observed(problem, s, str(tmp_path), **dict(extra)))
            gc.collect()  # a threaded run stopped early holds its paused thread (and COBYQA's lock) until freed
            if s is here:
                assert not _peer_threads() - before, extra
        (a, seen_a, err_a), (b, seen_b, err_b) = ends
        assert err_a == err_b and seen_a == seen_b and (bool(seen_a) or "max_time" in extra), (extra, err_a, err_b)
        _same_result(a, b)
        if "max_iter" in extra:
            assert a.status is Status.MAX_ITER and a.nit == 5
        if "stop_at" in extra:
            assert a.nit == 3 and len(seen_a) == 3
        if "fail_at" in extra:
            assert "the callback fails at iteration 4" in err_a and a.nit == 4
        if "max_time" in extra:  # init's own time is beyond it: the run stops before its first step
            assert a.status is Status.MAX_TIME and a.nit == 0
    # checkpoints every 2 steps, stopped at 5: the saved state resumes to the uninterrupted run on both paths
    for s in (threaded, here):
        path = f"{tmp_path}/{solver}-{s.in_driver_thread}"
        part = _run(problem, s, max_calls=10**4, max_iter=5, checkpoint=path, checkpoint_every=2, record_every=None)
        assert part.status is Status.MAX_ITER
        gc.collect()
        resumed = _run(problem, s, rng=None, max_calls=10**4, resume=path, record_every=None)
        straight = _run(problem, s, max_calls=10**4, record_every=None)
        assert np.array_equal(resumed.x, straight.x) and resumed.nfev == straight.nfev and resumed.nit == straight.nit


def test_the_flag_is_no_parameter() -> None:
    from zoframe.observers.checkpointing import solver_params
    from zoframe.specs import describe_params

    solver = COBYLA(rhobeg=0.5, points_per_step=3)
    here = solver.unobserved_steps()
    assert solver_params(here) == solver_params(solver) and "in_driver_thread" not in solver_params(here)
    assert "in_driver_thread" not in {p.name for p in describe_params(COBYLA)}
    assert (here.rhobeg, here.points_per_step) == (0.5, 3) and here == solver and repr(here) == repr(solver)
    assert not dataclasses.replace(here, rhobeg=0.4).in_driver_thread  # a new solver: no flag


# sha256 (first 16 hex digits) of every state of a run (x, log, fun, violation, points, done, message,
# status), made with the threaded one-point path as it was before the driver's thread path and the
# leaner session (numpy 2.4.6, scipy 1.17.1): (number of states, digest) per "peer/problem/points_per_step"
GOLDEN = {
    "COBYLA/ball-qp/3": (35, "d69dcccfc03db345"),
    "COBYLA/ball-qp/None": (4, "5177d09f5156aaed"),
    "COBYLA/ls3-budget/3": (22, "838c12b30ab90faf"),
    "COBYLA/ls3-budget/None": (3, "30eab039c49fc55c"),
    "COBYLA/ls3/3": (92, "f6a59bf28a4cef44"),
    "COBYLA/ls3/None": (8, "08fe50eaec443091"),
    "COBYLA/random-qp/3": (28, "222b9e6c89c3e3f0"),
    "COBYLA/random-qp/None": (3, "c25f002f8fa940b7"),
    "COBYLA/rosenbrock-157/3": (54, "5d7dbce074207f8c"),
    "COBYLA/rosenbrock-157/None": (5, "18a0ec1739852e5f"),
    "COBYLA/rosenbrock-box-90/3": (32, "a1b59f091c51f609"),
    "COBYLA/rosenbrock-box-90/None": (4, "2ba9ead85177cad6"),
    "COBYQA/ball-qp/3": (22, "fcba3dccb435bd78"),
    "COBYQA/ball-qp/None": (3, "9e2332395f140b7b"),
    "COBYQA/ls3-budget/3": (22, "6b2220c7330f91b2"),
    "COBYQA/ls3-budget/None": (3, "d2230840e227753a"),
    "COBYQA/ls3/3": (22, "c80f299ee697a1a1"),
    "COBYQA/ls3/None": (3, "a3fdea886901a487"),
    "COBYQA/random-qp/3": (19, "ec9f774a45629f11"),
    "COBYQA/random-qp/None": (2, "38e61d1f5b55570b"),
    "COBYQA/rosenbrock-157/3": (53, "88f3c9521810797c"),
    "COBYQA/rosenbrock-157/None": (5, "fb1e59026d61f54a"),
    "COBYQA/rosenbrock-box-90/3": (32, "a7b5546b55b862f2"),
    "COBYQA/rosenbrock-box-90/None": (4, "acd0ff2f3b000f08"),
    "NelderMead/ls3-budget/3": (22, "14aea77907d5a2a9"),
    "NelderMead/ls3-budget/None": (3, "7e796ca36097d829"),
    "NelderMead/ls3/3": (131, "ddcd87ce757453b9"),
    "NelderMead/ls3/None": (11, "b626ef890621f67c"),
    "NelderMead/rosenbrock-157/3": (54, "0120478043f2bdd2"),
    "NelderMead/rosenbrock-157/None": (5, "ce44dbfeaae81e72"),
    "NelderMead/rosenbrock-box-90/3": (32, "2062bb5157fc933f"),
    "NelderMead/rosenbrock-box-90/None": (4, "b6f32898b6081276"),
    "Powell/ls3-budget/3": (22, "fbb69eb5c0db516e"),
    "Powell/ls3-budget/None": (3, "d9ef1f5fa76e071c"),
    "Powell/ls3/3": (89, "c564650ab1462361"),
    "Powell/ls3/None": (8, "7624ad368b4b278e"),
    "Powell/rosenbrock-157/3": (54, "0c602b2480795d55"),
    "Powell/rosenbrock-157/None": (5, "8a17040493e38ee9"),
    "Powell/rosenbrock-box-90/3": (32, "7826e36aff56bab1"),
    "Powell/rosenbrock-box-90/None": (4, "17e9aca33c1bfd91"),
}


def _digest(states: list[PeerState]) -> str:
    h = hashlib.sha256()
    for st in states:
        h.update(np.ascontiguousarray(st.x, dtype=np.float64).tobytes())
        h.update(np.ascontiguousarray(st.log).tobytes())
        h.update(repr((float(st.fun), float(st.violation), st.points, st.done, st.message, st.status)).encode())
    return h.hexdigest()[:16]


@pytest.mark.skipif(
    (np.__version__, scipy.__version__) != ("2.4.6", "1.17.1"), reason="digests of numpy 2.4.6 / scipy 1.17.1 runs"
)
@pytest.mark.parametrize("here", [False, True])
def test_states_are_those_of_the_earlier_one_point_path(here: bool) -> None:
    """Every run ends without an error; its number of states and their digest are the stored ones on a machine
    that rounds as the one that stored them (the ball projection's and COBYLA's arithmetic round differently
    on CPUs whose vector instructions numpy and scipy dispatch to), and the two paths always agree with each
    other bit for bit (:func:`test_the_two_paths_give_the_same_states`)."""
    classes = {"COBYLA": COBYLA, "COBYQA": COBYQA, "NelderMead": NelderMead, "Powell": Powell}
    problems: dict[str, tuple[Any, int | None]] = {
        "ls3": (LeastSquares(dim=3, n=4, seed=1), None), "ls3-budget": (LeastSquares(dim=3, n=4, seed=1), 4 * 60 + 3),
        "rosenbrock-157": (_Rosenbrock(4), 157), "rosenbrock-box-90": (_Rosenbrock(3, (-1.0, 0.8)), 90),
        "ball-qp": (BallConstrainedQuadratic(dim=4, n=3, seed=1), 4 * 50 + 3), "random-qp": (RandomQP(dim=5, m=6, seed=0), 7 * 40),
    }
    for key, (count, digest) in GOLDEN.items():
        name, problem, chunk = key.split("/")
        solver = classes[name](points_per_step=None if chunk == "None" else int(chunk))
        states, err = _states(solver.unobserved_steps() if here else solver, *problems[problem])
        assert err is None, key
        if _same_rounding:
            assert (len(states), _digest(states)) == (count, digest), key


#: the digests of :data:`GOLDEN` hold where numpy rounds as on the machine that stored them (this probe: the
#: digest of one COBYLA run on the ball-constrained quadratic there)
_same_rounding = (
    _digest(_states(COBYLA(points_per_step=None), BallConstrainedQuadratic(dim=4, n=3, seed=1), 4 * 50 + 3)[0])
    == GOLDEN["COBYLA/ball-qp/None"][1]
)


def test_the_two_paths_give_the_same_states() -> None:
    """The driver's-thread path (``unobserved_steps``) and the threaded path give the same states, bit for bit."""
    for key in GOLDEN:
        name, problem, chunk = key.split("/")
        classes = {"COBYLA": COBYLA, "COBYQA": COBYQA, "NelderMead": NelderMead, "Powell": Powell}
        problems = {
            "ls3": (LeastSquares(dim=3, n=4, seed=1), None), "ls3-budget": (LeastSquares(dim=3, n=4, seed=1), 4 * 60 + 3),
            "rosenbrock-157": (_Rosenbrock(4), 157), "rosenbrock-box-90": (_Rosenbrock(3, (-1.0, 0.8)), 90),
            "ball-qp": (BallConstrainedQuadratic(dim=4, n=3, seed=1), 4 * 50 + 3), "random-qp": (RandomQP(dim=5, m=6, seed=0), 7 * 40),
        }  # fmt: skip
        solver = classes[name](points_per_step=None if chunk == "None" else int(chunk))
        a, err_a = _states(solver, *problems[problem])
        b, err_b = _states(solver.unobserved_steps(), *problems[problem])
        assert err_a is None and err_b is None and _digest(a) == _digest(b), key
