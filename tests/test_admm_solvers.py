"""ZO-SVRG-ADMM, ZO-SAGA-ADMM and baselines on a problem with a known solution (Huang et al., IJCAI 2019).

The problem (``FusedLassoToy``): ``(1/n) sum_i (a_i^T x - b_i)^2 / 2 + tau1 ||x||_1 + tau2 ||D x||_1``,
d = 8, n = 60, as ``A x + B_1 y_1 + B_2 y_2 = 0`` with ``y_1 = x``, ``y_2 = D x``; reference solution by cvxpy.
"""

from __future__ import annotations

import numpy as np
import pytest

import zoframe
from zoframe.measures import admm_stationarity
from zoframe_admm.problems import FusedLassoToy

VR = ("zo-svrg-admm", "zo-saga-admm")
SEEDS = range(5)
#: common settings: the papers' iterations (steps="paper"), batch 4, mu_t = 1/(d sqrt(t)), eta = 0.5 and rho = 1
PARAMS = {"b": 4, "rank_check": "ignore", "steps": "paper"}


@pytest.fixture(scope="module")
def toy() -> FusedLassoToy:
    return FusedLassoToy()


@pytest.fixture(scope="module")
def reference(toy: FusedLassoToy) -> dict[str, float | np.ndarray]:
    cp = pytest.importorskip("cvxpy")
    prob, x = toy.cvxpy_model()
    prob.solve(solver=cp.CLARABEL)
    assert prob.status == cp.OPTIMAL
    return {"x": np.asarray(x.value), "fun": float(prob.value)}


def _run(toy: FusedLassoToy, solver: str, seed: int, **kw: object) -> zoframe.Result:
    return zoframe.minimize(toy, solver, rng=seed, **{**PARAMS, **kw})  # type: ignore[arg-type]


def test_stationarity_measure_vanishes_at_the_reference_solution(toy: FusedLassoToy) -> None:
    """Checks the checker: Definition 1 at the cvxpy primal-dual solution of the split problem is ~0."""
    cp = pytest.importorskip("cvxpy")
    x, y1, y2 = cp.Variable(toy.dim), cp.Variable(toy.dim), cp.Variable(toy.dim - 1)
    cons = [x - y1 == 0, toy.F @ x - y2 == 0]
    obj = 0.5 * cp.sum_squares(toy.data @ x - toy.target) / toy.n + toy.tau1 * cp.norm1(y1) + toy.tau2 * cp.norm1(y2)
    cp.Problem(cp.Minimize(obj), cons).solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    # cvxpy's Lagrangian adds +nu^T (x - y); the paper's L subtracts <lam, A x + B y - c>: lam = -nu
    lam = -np.concatenate([cons[0].dual_value, cons[1].dual_value])
    xs, ys = np.asarray(x.value), [np.asarray(y1.value), np.asarray(y2.value)]
    # kinks of |.| sit at exactly zero; snap the solver's ~1e-12 zeros
    ys = [np.where(np.abs(v) < 1e-8, 0.0, v) for v in ys]
    xs = np.where(np.abs(xs) < 1e-8, 0.0, xs)
    at_opt = admm_stationarity(toy.full_gradient(xs), toy.A, toy.B, toy.c, xs, ys, lam, toy.penalties)
    assert at_opt < 1e-10
    off = admm_stationarity(toy.full_gradient(xs + 0.1), toy.A, toy.B, toy.c, xs + 0.1, ys, lam, toy.penalties)
    assert off > 1e-3


@pytest.mark.parametrize("solver", VR)
def test_vr_admm_reaches_the_solution(toy: FusedLassoToy, reference: dict[str, float | np.ndarray], solver: str) -> None:
    """Median over 5 seeds after 60 000 oracle calls: dist(0, dL)^2 < 1e-8, objective gap < 1e-6."""
    stat, gap, err = [], [], []
    for seed in SEEDS:
        res = _run(toy, solver, seed, max_calls=60_000, record_every=0)
        stat.append(res.measures["stationarity"])
        gap.append(res.fun - float(reference["fun"]))  # type: ignore[arg-type]
        err.append(float(np.linalg.norm(res.x - reference["x"])))
    assert np.median(stat) < 1e-8
    assert abs(np.median(gap)) < 1e-6
    assert np.median(err) < 1e-3


@pytest.mark.parametrize("solver", VR)
def test_vr_admm_beats_sgd_admm_at_equal_calls(toy: FusedLassoToy, solver: str) -> None:
    """At 60 000 calls the median stationarity of VR is at least 1000x below ZO-SGD-ADMM's."""
    vr = [_run(toy, solver, s, max_calls=60_000, record_every=0).measures["stationarity"] for s in SEEDS]
    sgd = [_run(toy, "zo-sgd-admm", s, max_calls=60_000, record_every=0).measures["stationarity"] for s in SEEDS]
    assert np.median(vr) * 1e3 < np.median(sgd)


def _avg_slope(st: np.ndarray) -> float:
    """Log-log slope of the running average (1/T) sum_t dist_t^2 over the last decade of T."""
    T = st.shape[0]
    t = np.arange(1, T + 1)
    avg = np.cumsum(st) / t
    sel = t >= T // 10
    return float(np.polyfit(np.log(t[sel]), np.log(avg[sel]), 1)[0])


@pytest.mark.parametrize("solver", VR)
def test_rate_is_consistent_with_one_over_t(toy: FusedLassoToy, solver: str) -> None:
    """Theorems 1-2 bound (1/T) sum_t dist^2 by O(1/T) + O(d^2 mu^2): fitted slope in [-1.2, -0.8].

    ZO-SGD-ADMM (no variance reduction) is the contrast: its slope stays above -0.8.
    """
    slopes = [_avg_slope(_run(toy, solver, s, max_iter=1000, record_every=1).trace["stationarity"][1:]) for s in range(3)]
    assert -1.2 <= float(np.median(slopes)) <= -0.8
    sgd = [_avg_slope(_run(toy, "zo-sgd-admm", s, max_iter=1000, record_every=1).trace["stationarity"][1:]) for s in range(3)]
    assert float(np.median(sgd)) > -0.8


@pytest.mark.parametrize("solver", ["zo-admm", "zo-prox-svrg", "zo-prox-saga"])
def test_baselines_reach_the_solution(toy: FusedLassoToy, reference: dict[str, float | np.ndarray], solver: str) -> None:
    """The deterministic and proximal baselines also solve the convex toy (prox: inner dual FISTA).

    For the proximal baselines only the primal is checked: their ``lam`` comes from the dual of an
    inexact inner solve (and is not unique here, as ``A`` has more rows than columns).
    """
    prox = "prox" in solver
    kw: dict[str, object] = {"eta": 0.1, "inner_iters": 10} if prox else {"rank_check": "ignore"}
    calls = 40_000 if prox else 150_000  # ZO-ADMM spends 2dn = 960 calls per iteration
    res = zoframe.minimize(toy, solver, rng=0, b=4, max_calls=calls, record_every=0, steps="paper", **kw)  # type: ignore[arg-type]
    assert abs(res.fun - float(reference["fun"])) < 1e-6  # type: ignore[arg-type]
    assert float(np.linalg.norm(res.x - reference["x"])) < 1e-3
    if not prox:
        assert res.measures["stationarity"] < 1e-8


def test_outputs_and_cost_per_iteration(toy: FusedLassoToy) -> None:
    d, n, b = toy.dim, toy.n, 4
    res = _run(toy, "zo-svrg-admm", 0, max_iter=3, m=5)
    assert set(res.outputs) == {"x", "y0", "y1", "lam"}
    # epoch start: snapshot 2dn, then two inner steps with two base points each: 2 * 2d * b
    assert res.nfev == 2 * d * n + 2 * (4 * d * b)
    res = _run(toy, "zo-saga-admm", 0, max_iter=3)
    assert res.nfev == 2 * d * n + 3 * (2 * d * b)
    assert res.nfev_by_purpose["snapshot"] == 2 * d * n


class _CountingToy(FusedLassoToy):
    """The toy that counts how often its batched function is called."""

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "invocations", [0])

    def components(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        self.invocations[0] += 1  # type: ignore[attr-defined]
        return super().components(X, idx)


@pytest.mark.parametrize("solver", ["zo-svrg-admm", "zo-saga-admm", "zo-admm", "zo-sgd-admm", "zo-prox-svrg", "zo-prox-saga"])
def test_one_batched_oracle_call_per_iteration(solver: str) -> None:
    prob = _CountingToy()
    kw: dict[str, object] = {} if "prox" in solver else {"rank_check": "ignore"}
    res = zoframe.minimize(prob, solver, rng=0, max_iter=7, b=4, record_every=0, steps="paper", **kw)  # type: ignore[arg-type]
    monitor_calls = 2  # the driver's first and last records
    init_calls = 1 if "saga" in solver else 0
    assert prob.invocations[0] == res.nit + init_calls + monitor_calls  # type: ignore[attr-defined]


def test_saga_table_keeps_phi_the_mean_with_repeated_indices(toy: FusedLassoToy) -> None:
    """b = 40 > n / 2 forces repeats in the with-replacement batches; phi must stay the table mean."""
    from zoframe.oracle import CountingOracle
    from zoframe_admm.solvers import ZOSAGAADMM

    solver = ZOSAGAADMM(b=40, rank_check="ignore", steps="paper")
    oracle = CountingOracle(toy)
    rng = np.random.default_rng(0)
    st = solver.init(oracle, toy.x0, rng)
    for _ in range(20):
        st = solver.step(oracle, st, rng)
    alg = st.inner.alg  # the box's state inside the phased state
    np.testing.assert_allclose(alg.phi, alg.table.mean(axis=0), atol=1e-12)
