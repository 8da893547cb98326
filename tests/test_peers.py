"""Peers (scipy, pycma, nevergrad) as solvers: exact budgets, counts by kind, best point, errors."""

from __future__ import annotations

from collections.abc import Mapping
import gc
import sys
import threading
from typing import Any

import numpy as np
import pytest

import zoframe
from zoframe.errors import IncompatibleProblemError, InvalidParameterError
from zoframe.result import Status
from zoframe.sets import Ball
from zoframe_bench.suites import BallConstrainedQuadratic, rosenbrock
from zoframe_peers.solvers import point_cost

ALL = ["cobyla", "cobyqa", "nelder-mead", "powell", "slsqp-fd", "trust-constr-fd", "cma-es", "ngopt", "ng-cobyla"]


class _Rosenbrock:
    """Rosenbrock's function as a bare finite-sum problem whose measures cost no budget."""

    kind = "finite_sum"
    n = 1
    monitor_free = True

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.x0 = np.tile([-1.2, 1.0], (dim + 1) // 2)[:dim]

    def components(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        v = np.sum((1.0 - X[:, :-1]) ** 2 + 100.0 * (X[:, 1:] - X[:, :-1] ** 2) ** 2, axis=1)
        return np.repeat(v[:, None], len(idx), axis=1)
CONSTRAINED = ["cobyla", "cobyqa", "slsqp-fd", "trust-constr-fd", "cma-es", "ng-cobyla"]


class _Logged:
    """BallConstrainedQuadratic that records every point the objective is evaluated at."""

    def __init__(self, base: BallConstrainedQuadratic) -> None:
        self.base = base
        self.kind = base.kind
        self.dim, self.n, self.m = base.dim, base.n, base.m
        self.x0 = base.x0
        self.convex_constraints = True
        self.black_box_constraints = True
        self.points: list[np.ndarray] = []
        self.monitor_free = True

    def components(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        self.points.extend(np.array(X, copy=True))
        return self.base.components(X, idx)

    def constraints(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return self.base.constraints(X, idx)

    def measures(self, outputs: Mapping[str, np.ndarray], monitor: Any) -> dict[str, float]:
        return self.base.measures(outputs, monitor)  # evaluates only points the peer reported


@pytest.mark.parametrize("solver", CONSTRAINED)
def test_constrained_peer_respects_max_calls_exactly_and_counts_by_kind(solver: str) -> None:
    prob = BallConstrainedQuadratic(dim=4, n=3, seed=1)  # one point = 3 objective + 1 constraint
    budget = 4 * 50 + 3  # not a multiple of the point cost
    res = zoframe.minimize(prob, solver, rng=0, max_calls=budget)
    assert res.nfev <= budget
    points = res.nfev // 4
    assert res.nfev == 4 * points
    assert res.nfev_by_kind == {"objective": 3 * points, "constraint": points}
    if res.status is Status.BUDGET:
        assert budget - res.nfev < 4  # it stopped only because a whole point no longer fitted


@pytest.mark.parametrize("solver", ["nelder-mead", "powell", "cobyla", "cma-es", "slsqp-fd", "trust-constr-fd"])
def test_finite_sum_peer_stops_exactly_at_max_calls(solver: str) -> None:
    prob = _Rosenbrock(4)
    res = zoframe.minimize(prob, solver, rng=0, max_calls=157)
    assert res.status is Status.BUDGET
    assert res.nfev == 157 and res.nfev_by_kind == {"objective": 157}
    assert res.nfev_by_purpose.get("peer") == 157


@pytest.mark.parametrize("solver", CONSTRAINED)
def test_result_reports_the_best_feasible_point_evaluated(solver: str) -> None:
    prob = _Logged(BallConstrainedQuadratic(dim=3, n=2, seed=2))
    # the peer's own points only: the certificate (off here) evaluates points of its own around the result
    res = zoframe.minimize(prob, solver, rng=1, max_calls=3 * 40, certificate=False)
    pts = np.array([p for p in prob.points if float(p @ p) <= prob.base.radius**2 + 1e-6])
    assert pts.size, "the peer evaluated no feasible point"
    fvals = prob.base.components(pts, np.arange(prob.n)).mean(axis=1)
    assert res.fun == pytest.approx(float(fvals.min()), rel=1e-12, abs=1e-12)
    assert any(np.array_equal(res.x, p) for p in pts)


@pytest.mark.parametrize("solver", ["cma-es", "ng-cobyla", "cobyla"])
def test_same_seed_same_result_and_seed_matters_where_random(solver: str) -> None:
    prob = BallConstrainedQuadratic(dim=4, n=2, seed=0)
    a = zoframe.minimize(prob, solver, rng=7, max_calls=600)
    b = zoframe.minimize(prob, solver, rng=7, max_calls=600)
    assert np.array_equal(a.x, b.x) and a.nfev == b.nfev
    if solver == "cma-es":
        c = zoframe.minimize(prob, solver, rng=8, max_calls=600)
        assert not np.array_equal(a.x, c.x)


def test_peers_converge_on_an_easy_constrained_problem() -> None:
    prob = BallConstrainedQuadratic(dim=4, n=2, seed=3)
    fstar = float(prob.known_solution()["fun"])
    for solver in ("cobyla", "cobyqa"):
        res = zoframe.minimize(prob, solver, rng=0, max_calls=3000)
        assert res.fun == pytest.approx(fstar, rel=1e-5)
        assert res.feasible


def test_ngopt_respects_the_budget_on_a_small_run() -> None:
    prob = rosenbrock(2)
    res = zoframe.minimize(prob, "ngopt", rng=0, max_calls=12)
    assert res.nfev <= 12 and res.nfev_by_kind == {"objective": res.nfev}
    assert np.isfinite(res.fun)


def test_peer_rejects_unsupported_problems_with_clear_errors() -> None:
    with pytest.raises(IncompatibleProblemError, match="nelder-mead"):
        zoframe.minimize(BallConstrainedQuadratic(), "nelder-mead", max_calls=10)
    ball = zoframe.FiniteSum(lambda X: (X**2).sum(axis=1), x0=np.ones(2), feasible_set=Ball(2, 1.0))
    with pytest.raises(IncompatibleProblemError, match="simple bounds only"):
        zoframe.minimize(ball, "cobyla", max_calls=10)
    with pytest.raises(InvalidParameterError, match="rhoend"):
        zoframe.minimize(rosenbrock(2), "cobyla", max_calls=10, rhobeg=1e-3, rhoend=1.0)


def test_box_bounds_are_passed_to_the_peer() -> None:
    prob = zoframe.FiniteSum(lambda X: ((X - 2.0) ** 2).sum(axis=1), x0=np.zeros(3), bounds=(-1.0, 1.0))
    for solver in ("nelder-mead", "cobyla", "cma-es"):
        res = zoframe.minimize(prob, solver, rng=0, max_calls=400)
        assert np.all(res.x <= 1.0 + 1e-9) and np.all(res.x >= -1.0 - 1e-9)
        assert res.x == pytest.approx(np.ones(3), abs=1e-2)


def test_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cma", None)  # import cma now raises ImportError
    for name, module in (("cma-es", "cma"), ("ng-cobyla", "nevergrad")):
        monkeypatch.setitem(sys.modules, module, None)
        with pytest.raises(zoframe.RunFailedError) as info:  # the run's error, like any failure in a run
            zoframe.minimize(rosenbrock(2), name, rng=0, max_calls=50)
        assert isinstance(info.value.__cause__, ImportError) and "zoframe[peers]" in str(info.value.__cause__)


def test_abandoned_scipy_run_ends_its_thread() -> None:
    for _ in range(2):  # COBYQA holds a lock while it runs: a leaked thread would block the second run
        res = zoframe.minimize(BallConstrainedQuadratic(dim=3, n=2), "cobyqa", rng=0, max_iter=2)
        assert res.status is Status.MAX_ITER
    gc.collect()
    for t in threading.enumerate():
        if t.name == "zoframe-peer":
            t.join(timeout=5)
    assert not any(t.name == "zoframe-peer" and t.is_alive() for t in threading.enumerate())


def test_point_cost_is_n_plus_m() -> None:
    from zoframe.oracle import CountingOracle

    assert point_cost(CountingOracle(BallConstrainedQuadratic(dim=3, n=5))) == 6
    assert point_cost(CountingOracle(rosenbrock(3))) == 1


def test_checkpoint_resume_replays_without_new_evaluations(tmp_path: object) -> None:
    prob = BallConstrainedQuadratic(dim=3, n=2, seed=4)
    # (solver, params, iterations before the checkpoint): the first run must stop mid-way
    cases: list[tuple[str, dict[str, int], int]] = [
        ("cobyla", {}, 2), ("cobyla", {"points_per_step": 4}, 6), ("cma-es", {}, 6),
    ]
    for solver, params, cut in cases:
        straight = zoframe.minimize(prob, solver, rng=5, max_iter=12, record_every=0, **params)
        path = f"{tmp_path}/{solver}{len(params)}"
        part = zoframe.minimize(prob, solver, rng=5, max_iter=cut, checkpoint=path, record_every=0, **params)
        assert part.status is Status.MAX_ITER
        resumed = zoframe.minimize(prob, solver, max_iter=12, resume=path, record_every=0, **params)
        assert np.array_equal(straight.x, resumed.x)
        assert straight.nfev == resumed.nfev


def test_a_failed_ngopt_run_does_not_keep_the_interpreter_alive() -> None:
    """nevergrad's recast optimisers run in non-daemon threads; after a failed NGOpt run (nevergrad's
    MetaModel rejects numpy >= 2.4 for small budgets) or a finished one, the process must still exit."""
    import subprocess
    import sys

    code = (
        "import numpy as np, zoframe\n"
        "p = zoframe.FiniteSum(lambda X: ((X - 1) ** 2).sum(1), x0=np.zeros(4))\n"
        "for calls in (200, 1500):\n"
        "    try:\n"
        "        zoframe.minimize(p, 'ngopt', rng=0, max_calls=calls)\n"
        "    except zoframe.driver.RunFailedError:\n"
        "        pass\n"
        "print('done')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("done"), proc.stderr[-2000:]


def test_ng_cobyla_ends_when_its_underlying_optimizer_has_finished(monkeypatch: pytest.MonkeyPatch) -> None:
    """nevergrad answers the asks after its recast COBYLA has finished with random points (and a
    warning): the peer ends the run there, on the best point it had, with no random point evaluated.
    nevergrad says neither why COBYLA stopped nor whether a test passed: a budget status, no success."""
    ng = pytest.importorskip("nevergrad")
    from nevergrad.common.errors import FinishedUnderlyingOptimizerWarning

    real = ng.optimizers.registry["Cobyla"]

    class FinishesAfterFive:
        def __init__(self, **kwargs: Any) -> None:
            self.inner = real(**kwargs)
            self.asks = 0

        def ask(self) -> Any:
            self.asks += 1
            if self.asks > 5:
                import warnings

                warnings.warn("Underlying optimizer has already converged", FinishedUnderlyingOptimizerWarning, stacklevel=2)
            return self.inner.ask()

        def tell(self, *args: Any, **kwargs: Any) -> None:
            self.inner.tell(*args, **kwargs)

    monkeypatch.setitem(ng.optimizers.registry, "Cobyla", FinishesAfterFive)
    res = zoframe.minimize(rosenbrock(3), "ng-cobyla", rng=0, max_calls=1000, points_per_step=2)
    assert res.status is Status.BUDGET and not res.success and "has finished" in res.message
    assert res.nfev_by_purpose["peer"] == 5  # five points of n = 1 component, none after the warning
    assert np.isfinite(res.fun) and res.fun == res.fun_best


def test_a_run_whose_callback_raises_lets_the_process_exit() -> None:
    """The callback raises mid-run (caught for ngopt, never caught for ng-cobyla): nevergrad's recast
    optimiser threads are left unfinished, yet the process exits (they are daemon threads)."""
    import subprocess

    pytest.importorskip("nevergrad")
    code = (
        "import numpy as np, zoframe\n"
        "def cb(info):\n"
        "    raise RuntimeError('stop here')\n"
        "p = zoframe.FiniteSum(lambda X: ((X - 1.0) ** 2).sum(1), x0=np.zeros(3))\n"
        "try:\n"
        "    zoframe.minimize(p, 'ngopt', rng=0, max_calls=3000, callback=cb, maxfev=1000)\n"
        "except zoframe.RunFailedError:\n"
        "    print('caught', flush=True)\n"
        "zoframe.minimize(p, 'ng-cobyla', rng=0, max_calls=3000, callback=cb)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.startswith("caught") and "stop here" in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 1


def _peer_names() -> list[str]:
    """The peers of finite sums (the problems of the tests below; the others' caps and starts are tested in
    tests/test_peers_smooth.py and tests/test_peers_composite.py)."""
    reg = zoframe.default_registry()
    return sorted(name for name, p in reg.solvers().items() if p.plugin == "peers" and "finite_sum" in p.spec.problem_kinds)


@pytest.mark.parametrize("solver", _peer_names())
def test_maxfev_holds_exactly(solver: str) -> None:
    """A peer's own ``maxfev`` (points) holds exactly: ``maxfev`` points at most, and a stop on it is a
    budget stop (cma-es with maxfev=20 on a 4-d problem used to evaluate 24 points, CONVERGED)."""
    prob = _Rosenbrock(4)
    try:
        res = zoframe.minimize(prob, solver, rng=0, max_calls=5000, maxfev=20)
    except zoframe.driver.RunFailedError as exc:  # ngopt's MetaModel on numpy >= 2.4 (docs/peers.md)
        pytest.skip(f"{solver}: {exc}")
    assert res.nfev <= 20, res.message
    assert res.status.budget and not res.success, res.message


@pytest.mark.parametrize("solver", _peer_names())
def test_x0_outside_the_bounds_is_projected_by_every_peer(solver: str) -> None:
    """One rule for all peers: x0 outside the bounds starts from its projection, and the Result's
    message says so (pycma and nevergrad used to raise ValueError)."""
    prob = zoframe.FiniteSum(lambda X: ((X - 0.5) ** 2).sum(1), x0=np.full(3, 5.0), bounds=(-1.0, 1.0))
    params: dict[str, Any] = {"maxfev": 1000} if solver == "ngopt" else {}
    try:
        res = zoframe.minimize(prob, solver, rng=0, max_calls=400, **params)
    except zoframe.driver.RunFailedError as exc:
        # NGOpt picks nevergrad's MetaModel here, which fails on numpy >= 2.4 (docs/peers.md): the
        # start was still projected (nevergrad raised NevergradValueError on it before)
        assert solver == "ngopt" and "MetaModel" in str(exc), exc
        assert np.all(np.abs(exc.result.x) <= 1.0)
        return
    assert np.all(np.abs(res.x) <= 1.0)
    if res.status is not Status.MAX_ITER:
        assert "x0 was outside the bounds" in res.message, res.message
    assert res.fun < 2.25 * 3  # better than the projected start (1, 1, 1): f = 0.75


def test_cma_es_stops_map_to_honest_statuses() -> None:
    from zoframe_peers.solvers import _cma_status

    assert _cma_status({"maxfevals": 20})[1] is Status.BUDGET
    assert _cma_status({"tolfun": 1e-11, "maxfevals": 20})[1] is Status.BUDGET
    assert _cma_status({"tolupsigma": 1e20})[1] is Status.DIVERGED
    assert _cma_status({"tolx": 1e-11})[1] is Status.CONVERGED
    assert _cma_status({"tolstagnation": 100})[1] is Status.FAILED


def test_a_converged_claim_on_an_unbounded_objective_is_diverged() -> None:
    """cobyqa on min -sum(x): its trust region 'converges' at f of about -1e30 -> DIVERGED, not a success."""
    res = zoframe.minimize(zoframe.FiniteSum(lambda X: -X.sum(1), x0=np.zeros(3)), "cobyqa", max_calls=1000)
    assert not res.success and res.status in (Status.DIVERGED, Status.BUDGET), res.message
    if res.status is Status.DIVERGED:
        assert "ran away" in res.message


@pytest.mark.parametrize("solver", ["slsqp-fd", "trust-constr-fd"])
def test_fd_peers_solve_a_constrained_problem_with_exact_counts(solver: str) -> None:
    """Difference gradients of f and all m constraints through the oracle: n + m evaluations per point,
    kinds counted apart, a solution within 1e-5 of the known one, and max_calls exact."""
    prob = BallConstrainedQuadratic(dim=4, n=3, seed=0)
    res = zoframe.minimize(prob, solver, rng=0, max_calls=4 * 500 + 3)
    assert res.success and res.status is Status.CONVERGED, res.message
    assert res.nfev % 4 == 0 and res.nfev_by_kind["objective"] == 3 * res.nfev_by_kind["constraint"]
    assert abs(res.fun - prob.known_solution()["fun"]) <= 1e-5 * max(1.0, abs(prob.known_solution()["fun"]))
    cut = zoframe.minimize(prob, solver, rng=0, max_calls=4 * 7 + 3)
    assert cut.status is Status.BUDGET and cut.nfev == 28 and not cut.success


def test_fd_gradient_points_are_one_batch_per_gradient() -> None:
    """One oracle call per difference gradient (d points), not d calls; the gradient's base point is
    not evaluated twice."""
    calls: list[int] = []

    def f(X: np.ndarray) -> np.ndarray:
        calls.append(X.shape[0])
        return ((X - np.arange(5.0)) ** 2).sum(1)

    res = zoframe.minimize(zoframe.FiniteSum(f, x0=np.zeros(5)), "slsqp-fd", max_calls=2000)
    assert res.success, res.message
    # the last calls are the certificate's (after the run; n = 1: one evaluation per point)
    assert res.certificate is not None
    tail, k = 0, 0
    while tail < res.certificate["evaluations"]:
        k += 1
        tail += calls[-k]
    assert tail == res.certificate["evaluations"]
    peer = calls[:-k]
    assert 5 in peer and set(peer) <= {1, 5}
    assert np.allclose(res.x, np.arange(5.0), atol=1e-5)


def test_the_difference_peers_run_in_the_bench_lab(tmp_path: Any) -> None:
    """``zoframe bench`` takes the new peers by name, on finite-sum and constrained instances alike."""
    from zoframe_bench import run
    from zoframe_bench.store import BenchStore

    run("smoke", ["slsqp-fd", "trust-constr-fd"], seeds=1, budget=400, out=tmp_path, progress=False)
    md = (tmp_path / "summary.md").read_text()
    assert "| slsqp-fd |" in md and "| trust-constr-fd |" in md
    with BenchStore(tmp_path / "bench.sqlite") as db:
        rows = [r for r in db.rows() if r.ran]
    assert {r.task.solver for r in rows} == {"slsqp-fd", "trust-constr-fd"}
    assert {r.kind for r in rows} >= {"finite_sum", "constrained"}
    assert all(r.status != "FAILED" for r in rows), [(r.task.solver, r.status) for r in rows]


def test_a_finished_nevergrad_run_leaves_no_thread() -> None:
    """After an ng-cobyla run ends (its budget), neither the peer's driving thread nor nevergrad's
    recast optimiser's thread is left running."""
    pytest.importorskip("nevergrad")
    before = set(threading.enumerate())
    res = zoframe.minimize(rosenbrock(3), "ng-cobyla", rng=0, max_calls=300)
    assert res.status is Status.BUDGET
    gc.collect()
    for t in set(threading.enumerate()) - before:
        t.join(timeout=10)
        assert not t.is_alive(), t.name
