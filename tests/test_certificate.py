"""The stationarity certificate behind ``Result.success`` (zoframe.certificate): right at known optima,
refused away from them and at KKT points that are not minima, scale invariant, its cap and its cost
reported, and used by every run that claims convergence."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

import zoframe
from zoframe.certificate import DEFAULT_TOL, Certificate, certify
from zoframe.errors import BudgetExhausted, InvalidInputError
from zoframe.oracle import CountingOracle
from zoframe.result import Result, Status
from zoframe.sets import Ball
from zoframe.solver import SolverBase


def _cert(problem: Any, x: Any, **kw: Any) -> Certificate:
    return certify(CountingOracle(problem), np.asarray(x, dtype=np.float64), **kw)


# ----------------------------------------------------------------------------- problems with known optima
A = np.random.default_rng(5).standard_normal((40, 3))
B = A @ np.array([1.0, -2.0, 0.5]) + 0.3 * np.random.default_rng(6).standard_normal(40)
X_LS = np.linalg.lstsq(A, B, rcond=None)[0]


def least_squares(scale: float = 1.0, shift: float = 0.0) -> zoframe.FiniteSum:
    """``(1/n) sum_i scale (a_i x - b_i)^2 + shift``, n = 40 components."""
    return zoframe.FiniteSum(
        lambda X, idx: scale * (X @ A[idx].T - B[idx]) ** 2 + shift, x0=np.zeros(3), n=40, name="ls"
    )


def disk(scale: float = 1.0, x0: Any = (0.0, 0.0)) -> zoframe.Constrained:
    """``min scale (x0 + x1)`` s.t. ``x0^2 + x1^2 <= 1``: x* = -(1, 1)/sqrt(2) (the constraint active)."""
    return zoframe.Constrained(
        lambda X: scale * X.sum(axis=1),
        lambda X, idx: ((X**2).sum(axis=1) - 1.0)[:, None] + 0.0 * idx[None, :],
        m=1,
        x0=np.asarray(x0, dtype=np.float64),
    )


X_DISK = -np.ones(2) / np.sqrt(2.0)


def semi_infinite(m: int = 10_000, d: int = 6) -> tuple[zoframe.Constrained, np.ndarray]:
    """A one-sided polynomial fit on a grid of ``m`` points: ``min int_{-1}^{1} p`` s.t. ``p(t_j) >= y(t_j)``
    (a semi-infinite LP), with its optimum from scipy's HiGHS on the same grid."""
    from scipy.optimize import linprog

    t = np.linspace(-1.0, 1.0, m)
    V = np.vander(t, d, increasing=True)
    y = np.exp(t) * np.sin(3.0 * t)
    k = np.arange(d)
    c = np.where(k % 2 == 0, 2.0 / (k + 1), 0.0)
    res = linprog(c, A_ub=-V, b_ub=-y, bounds=[(None, None)] * d, method="highs")
    assert res.status == 0
    xs = np.asarray(res.x, dtype=np.float64)
    xs[0] += max(0.0, float((y - V @ xs).max()))  # feasible to rounding
    prob = zoframe.Constrained(lambda X: X @ c, lambda X, idx: y[idx][None, :] - X @ V[idx].T, m=m, x0=np.zeros(d))
    return prob, xs


# ----------------------------------------------------------------------------- passes at optima
def test_passes_at_the_optimum_of_a_finite_sum_and_fails_1e_2_away() -> None:
    ok = _cert(least_squares(), X_LS)
    assert ok.passed and ok.kind == "stationarity" and ok.residual <= 1e-6 and ok.max_violation is None, ok
    far = _cert(least_squares(), X_LS + 1e-2)
    assert not far.passed and far.residual > 5 * DEFAULT_TOL and "KKT residual" in far.message, far


def test_passes_at_a_box_optimum_and_fails_inside_the_box() -> None:
    prob = zoframe.FiniteSum(lambda X: ((X - 2.0) ** 2).sum(axis=1), x0=np.zeros(3), bounds=(-1.0, 1.0))
    ok = _cert(prob, np.ones(3))
    assert ok.passed and ok.n_active == 3 and ok.max_violation == 0.0, ok
    inside = _cert(prob, np.ones(3) - 1e-2)
    assert not inside.passed, inside
    outside = _cert(prob, np.ones(3) + 0.5)  # beyond the bounds: infeasible, whatever the residual
    assert not outside.passed and "infeasible" in outside.message


def test_passes_at_a_constrained_optimum_and_fails_along_the_boundary() -> None:
    ok = _cert(disk(), X_DISK)
    assert ok.passed and ok.kind == "kkt" and ok.n_active == 1 and not ok.cap_hit, ok
    assert ok.descent is not None and ok.descent > 0  # positive curvature along the circle
    th = 1.25 * np.pi + 1e-2  # 1e-2 along the circle: feasible, not stationary
    along = _cert(disk(), [np.cos(th), np.sin(th)])
    assert not along.passed and along.max_violation == 0.0 and along.residual > 5 * DEFAULT_TOL, along
    inward = _cert(disk(), X_DISK * (1 - 1e-2))  # 1e-2 inside: the constraint is not active
    assert not inward.passed, inward


def test_semi_infinite_fit_on_1e4_points() -> None:
    prob, xs = semi_infinite()
    ok = _cert(prob, xs)
    assert ok.passed and ok.n_active >= 6 and ok.max_violation is not None and ok.max_violation <= 1e-9, ok
    pert = xs + 1e-2 * np.r_[0.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    pert[0] += max(0.0, float(prob.constraints(pert[None, :], np.arange(prob.m)).max()))  # back to feasible
    bad = _cert(prob, pert)  # feasible, 1e-2 from the optimum (objective 2.5 % above it)
    assert bad.max_violation is not None and bad.max_violation <= 1e-12
    # refused although every constraint within the band (thousands, on the grid around the contact points) may
    # carry a multiplier: their complementarity gap (a sum over them) stays above the tolerance
    assert not bad.passed and bad.residual > 2 * DEFAULT_TOL and bad.n_active > 1000, bad


# ----------------------------------------------------------------------------- second order
def test_refuses_a_kkt_point_that_is_a_local_maximum_along_the_boundary() -> None:
    """``min x1`` outside the unit disk: (0, 1) is a KKT point (multiplier 1/2) where f decreases both
    ways along the circle."""
    prob = zoframe.Constrained(
        lambda X: X[:, 1], lambda X, idx: (1.0 - (X**2).sum(axis=1))[:, None] + 0.0 * idx[None, :], m=1,
        x0=np.array([0.5, 2.0]),
    )  # fmt: skip
    c = _cert(prob, [0.0, 1.0])
    assert c.residual <= 1e-6  # first order holds (to the rounding error of steps sized to x1 = 0's neighbour)
    assert not c.passed and c.descent is not None and c.descent < -0.5 and "not a minimum" in c.message, c
    assert _cert(prob, [0.0, 1.0], probes=0).passed  # without probes the first-order test alone would pass


def test_refuses_an_interior_maximum_and_a_saddle() -> None:
    top = zoframe.FiniteSum(lambda X: -(X[:, 0] ** 2) - (X[:, 1] ** 2), x0=np.ones(2))
    assert not _cert(top, np.zeros(2)).passed
    saddle = zoframe.FiniteSum(lambda X: X[:, 0] * X[:, 1] + 0.1 * X[:, 0] ** 2, x0=np.ones(2))
    c = _cert(saddle, np.zeros(2))
    assert not c.passed and "not a minimum" in c.message, c


# ----------------------------------------------------------------------------- scale invariance
@pytest.mark.parametrize("scale", [1e-6, 1.0, 1e6])
def test_the_verdict_does_not_change_when_f_is_scaled(scale: float) -> None:
    assert _cert(least_squares(scale), X_LS).passed
    assert not _cert(least_squares(scale), X_LS + 1e-2).passed
    assert _cert(disk(scale), X_DISK).passed
    th = 1.25 * np.pi + 1e-2
    assert not _cert(disk(scale), [np.cos(th), np.sin(th)]).passed
    ref = _cert(disk(1.0), [np.cos(th), np.sin(th)])
    assert _cert(disk(scale), [np.cos(th), np.sin(th)]).residual == pytest.approx(ref.residual, rel=1e-6)


def test_the_verdict_does_not_change_when_f_is_shifted_or_the_start_moves() -> None:
    assert _cert(least_squares(shift=1e6), X_LS).passed
    assert not _cert(least_squares(shift=1e6), X_LS + 1e-2).passed
    a = _cert(disk(x0=(0.0, 0.0)), X_DISK)
    b = _cert(disk(x0=(50.0, -30.0)), X_DISK)  # another start: the certificate never looks at it
    assert a == b


# ----------------------------------------------------------------------------- cap and cost
def test_the_cap_is_reported_when_it_binds() -> None:
    prob, xs = semi_infinite(m=2000)
    capped = _cert(prob, xs, active_cap=4)
    assert capped.cap_hit and "active_cap=4 bound" in capped.message
    assert not _cert(disk(), X_DISK).cap_hit


def test_cost_is_counted_under_certify_outside_the_budget_and_bounded() -> None:
    prob, xs = semi_infinite(m=5000)
    oracle = CountingOracle(prob, max_calls=10)
    c = certify(oracle, xs, probes=2)
    d, n, m, cap = 6, 1, 5000, 64
    assert oracle.calls == 0 and oracle.calls_by_purpose["certify"] == c.evaluations
    # the noise estimates: at most 4 attempts of 9 points, for the objective and for 64 candidates
    noise = 4 * 9 * (n + 64)
    bound = (2 * d + 1) * n + m + 2 * d * cap + 2 * 2 * (n + cap + cap) + noise
    assert 0 < c.evaluations <= bound
    budgeted = CountingOracle(prob, max_calls=10**6)
    c2 = certify(budgeted, xs, probes=2, budgeted=True)
    assert budgeted.calls == c2.evaluations == c.evaluations and c2.passed == c.passed
    with pytest.raises(BudgetExhausted):
        certify(CountingOracle(prob, max_calls=100), xs, budgeted=True)


def test_bad_arguments_are_refused_with_a_clear_error() -> None:
    o = CountingOracle(disk())
    with pytest.raises(InvalidInputError, match="tol"):
        certify(o, X_DISK, tol=0.0)
    with pytest.raises(InvalidInputError, match="shape"):
        certify(o, np.zeros(3))
    with pytest.raises(InvalidInputError, match="active_cap"):
        certify(o, X_DISK, active_cap=0)
    x = X_DISK.copy()
    certify(o, x)
    assert np.array_equal(x, X_DISK)  # the caller's point is never modified


def test_a_failing_function_is_a_refused_certificate_not_a_crash() -> None:
    prob = zoframe.FiniteSum(lambda X: np.where(X[:, 0] > 0, np.nan, X[:, 0] ** 2), x0=np.ones(1))
    c = _cert(prob, np.zeros(1))
    assert not c.passed and "failed" in c.message


def test_other_convex_sets_use_the_projected_residual() -> None:
    prob = zoframe.FiniteSum(lambda X: ((X - 3.0) ** 2).sum(axis=1), x0=np.zeros(2), feasible_set=Ball(2, 1.0))
    assert _cert(prob, np.ones(2) / np.sqrt(2.0)).passed
    assert not _cert(prob, np.array([1.0, 0.0])).passed


# ----------------------------------------------------------------------------- minimax and composite
def test_minimax_certificate() -> None:
    """``F = x^2 / 2 + x y - y^2``, ``y`` in [-1, 1]: the saddle point is (0, 0)."""
    prob = zoframe.Minimax(
        lambda X, Y: 0.5 * X[:, 0] ** 2 + X[:, 0] * Y[:, 0] - Y[:, 0] ** 2, x0=np.ones(1), y0=np.ones(1),
        y_set=zoframe.sets.Box(1, -1.0, 1.0),
    )  # fmt: skip
    o = CountingOracle(prob)
    assert certify(o, np.zeros(1), outputs={"y": np.zeros(1)}).passed
    # the certificate solves the inner maximum itself: x = 0 is stationary for max_y F(x, y) whatever the run's y
    assert certify(o, np.zeros(1), outputs={"y": np.array([0.1])}).passed
    assert not certify(o, np.array([0.1]), outputs={"y": np.array([0.05])}).passed


def test_composite_certificate() -> None:
    """``min |x - 1|^2 + mu |y|_1`` s.t. ``x - y = 0`` (one variable): y* = x* = 1 - mu / 2, lam = ..."""
    mu = 0.4
    prob = zoframe.Composite(
        lambda X: ((X - 1.0) ** 2).sum(axis=1), x0=np.zeros(1), A=np.eye(1), B=[-np.eye(1)], c=np.zeros(1),
        penalties=[zoframe.penalties.L1(mu)], y0=[np.zeros(1)],
    )  # fmt: skip
    xs = 1.0 - mu / 2.0
    o = CountingOracle(prob)
    good = certify(o, np.array([xs]), outputs={"y0": np.array([xs]), "lam": np.array([2 * (xs - 1.0)])})
    assert good.passed and good.kind == "composite", good
    assert not certify(o, np.array([xs + 0.05]), outputs={"y0": np.array([xs + 0.05])}).passed


# ----------------------------------------------------------------------------- runs
@dataclass(frozen=True)
class ClaimsAtOnce(SolverBase):
    """Stays at its start and claims convergence after one step."""

    problem_kinds: ClassVar[frozenset[str]] = frozenset({"finite_sum", "constrained", "minimax", "composite"})

    @dataclass(frozen=True)
    class State:
        x: np.ndarray

    def init(self, oracle: CountingOracle, x0: np.ndarray, rng: np.random.Generator) -> Any:
        return self.State(np.array(x0, dtype=np.float64))

    def step(self, oracle: CountingOracle, state: Any, rng: np.random.Generator) -> Any:
        oracle.objective(state.x)  # one evaluation, so the run costs something
        return state

    def terminate(self, state: Any) -> str | None:
        return "converged (claimed)"


def test_a_claim_at_a_bad_point_is_not_a_success() -> None:
    r = zoframe.minimize(disk(), ClaimsAtOnce(), x0=np.array([0.3, -0.2]), max_iter=5, rng=0)
    assert r.status is Status.CONVERGED and not r.success
    assert "not certified: KKT residual" in r.message and r.certificate is not None and not r.certificate["passed"]
    assert r.nfev_by_purpose["certify"] == r.certificate["evaluations"] > 0
    assert r.nfev == 1  # the certificate is outside the budget


def test_a_claim_at_the_optimum_is_a_success_and_the_certificate_can_be_tuned_or_switched_off(tmp_path: Path) -> None:
    r = zoframe.minimize(disk(), ClaimsAtOnce(), x0=X_DISK, max_iter=5, rng=0)
    assert r.status is Status.CONVERGED and r.success and r.certificate is not None and r.certificate["passed"]
    assert r.certificate["tol"] == DEFAULT_TOL
    off = zoframe.minimize(disk(), ClaimsAtOnce(), x0=X_DISK, max_iter=5, rng=0, certificate=False)
    assert not off.success and "not certified (certificate off)" in off.message and off.certificate is None
    th = 1.25 * np.pi + 1e-2
    near = np.array([np.cos(th), np.sin(th)])
    strict = zoframe.minimize(disk(), ClaimsAtOnce(), x0=near, max_iter=5, rng=0)
    loose = zoframe.minimize(disk(), ClaimsAtOnce(), x0=near, max_iter=5, rng=0, certify_tol=0.05)
    assert not strict.success and loose.success and loose.certificate is not None and loose.certificate["tol"] == 0.05
    with pytest.raises(InvalidInputError, match="certify_tol"):
        zoframe.minimize(disk(), ClaimsAtOnce(), max_iter=5, rng=0, certify_tol=-1.0)
    r.save(str(tmp_path / "run"))
    back = Result.load(str(tmp_path / "run"))
    assert back.certificate == r.certificate and back.success == r.success


def test_budget_stops_are_not_certified() -> None:
    r = zoframe.minimize(least_squares(), "zo-sgd", steps="paper", max_iter=3, rng=0)
    assert r.status is Status.MAX_ITER and r.certificate is None and "certify" not in r.nfev_by_purpose


def test_ask_tell_asks_for_the_certificate_and_gets_the_same_result() -> None:
    prob = disk()
    direct = zoframe.minimize(prob, ClaimsAtOnce(), x0=X_DISK, max_iter=5, rng=0)
    run = zoframe.Run(prob, ClaimsAtOnce(), x0=X_DISK, max_iter=5, rng=0)
    purposes = set()
    while (req := run.ask()) is not None:
        purposes.add(req.purpose)
        fn = prob.components if req.kind == "objective" else prob.constraints
        run.tell(req, fn(req.points, req.indices))
    res = run.result()
    assert "certify" in purposes
    assert res.success == direct.success and res.certificate == direct.certificate and res.message == direct.message


def test_verify_reports_the_same_certificate_as_the_run() -> None:
    """``zoframe verify`` certifies the same point with the run's tolerance: the same verdict and numbers."""
    from zoframe_verify.verify import verify

    th = 1.25 * np.pi + 1e-2
    for x0, tol in ((X_DISK, DEFAULT_TOL), (np.array([np.cos(th), np.sin(th)]), DEFAULT_TOL), (np.array([np.cos(th), np.sin(th)]), 0.05)):
        r = zoframe.minimize(disk(), ClaimsAtOnce(), x0=x0, max_iter=5, rng=0, certify_tol=tol)
        report = verify(disk(), r, reference=False)
        assert report.certificate is not None and r.certificate is not None
        assert report.certificate.to_dict() == dict(r.certificate)
        cert_check = next(c for c in report.checks if c.name.startswith("certificate"))
        assert cert_check.passed == r.success


def test_chunked_differences_give_the_same_certificate(monkeypatch: pytest.MonkeyPatch) -> None:
    """Large d is evaluated a chunk of coordinates at a time (bounded memory): the same numbers."""
    import zoframe.certificate._common as zc

    prob, xs = semi_infinite(m=3000)
    whole = _cert(prob, xs)
    ls = _cert(least_squares(), X_LS + 1e-3)
    monkeypatch.setattr(zc, "_CHUNK_ENTRIES", 8)  # one coordinate per chunk
    chunked = _cert(prob, xs)
    assert chunked.passed == whole.passed and chunked.residual == pytest.approx(whole.residual, rel=1e-9, abs=1e-15)
    assert _cert(least_squares(), X_LS + 1e-3).residual == pytest.approx(ls.residual, rel=1e-9)


def test_a_constraint_as_far_as_a_narrow_box_is_wide_is_not_active() -> None:
    """Hock-Schittkowski 95: variables in boxes of width 0.01-0.3, a linear objective, constraints with
    gradients in the thousands. At x6 = 0.0067 (twice the optimum's 0.0033; every other variable on its
    lower bound) no constraint holds x6 up: lowering x6 stays feasible and lowers f. The constraint
    that is active at the optimum sits 0.0034 away, a quarter of x6's box: a length scale of 1 would
    take it for active; the box's scale does not."""
    from zoframe_constrained.suite import build

    tp = build("hs095", seed=0)
    x_star = np.asarray(tp.x_star, dtype=np.float64)
    off = x_star.copy()
    off[5] = 2.0 * x_star[5]
    assert certify(CountingOracle(tp.problem()), x_star).passed
    bad = certify(CountingOracle(tp.problem()), off)
    assert not bad.passed and bad.residual > DEFAULT_TOL


@pytest.mark.parametrize("scales", [(1.0, 1.0, 1.0), (1e-3, 1.0, 1e4), (1e4, 1e-3, 1e2)])
def test_variables_of_very_different_scales_do_not_pass_on_each_other(scales: tuple[float, float, float]) -> None:
    """The same problem in ``x = D z``: the optimum is certified, points far from it are not (the global norms
    alone certified these points, on the small variable's curvature, for the two scaled copies)."""
    from scipy.optimize import minimize as scipy_minimize

    D = np.asarray(scales)

    def f(Z: np.ndarray) -> np.ndarray:
        out: np.ndarray = ((Z - 1.0) ** 2).sum(axis=1) + 0.5 * Z[:, 0] * Z[:, 1] + np.exp(0.3 * Z[:, 2])
        return out

    def g(Z: np.ndarray) -> np.ndarray:
        return np.stack([Z[:, 0] + Z[:, 1] + Z[:, 2] - 1.5, Z[:, 2] ** 2 + Z[:, 0] - 2.0], axis=1)

    prob = zoframe.Constrained(lambda X: f(X / D)[:, None], lambda X, idx: g(X / D)[:, idx], m=2, x0=np.zeros(3))
    ref = scipy_minimize(lambda z: float(f(z[None, :])[0]), np.zeros(3), method="SLSQP",
                         constraints=[{"type": "ineq", "fun": lambda z: -g(z[None, :])[0]}],
                         options={"ftol": 1e-15, "maxiter": 500})  # fmt: skip
    assert ref.success
    assert certify(CountingOracle(prob), D * ref.x).passed
    for z in ([0.0, 0.0, 0.0], [0.5, 0.5, 0.5], [1.0, 0.0, -1.0], ref.x + np.array([0.05, -0.05, 0.0])):
        assert float(g(np.asarray(z, dtype=float)[None, :]).max()) <= 1e-12  # feasible, far from the optimum
        cert = certify(CountingOracle(prob), D * np.asarray(z, dtype=float))
        assert not cert.passed, (scales, z, cert.message)


def _crowded_vertex(m: int, d: int = 10, seed: int = 0) -> tuple[Any, np.ndarray]:
    """min |x - e_1|^2 s.t. a_j^T x <= 0 (j < m), every constraint active at x* = 0; the normals lie at 80 degrees
    from e_1 (their cone holds e_1 only through many of them). The point returned is x* moved 1e-12 along a unit
    u orthogonal to e_1: the candidates closest to active are then the normals nearest u, whose cone does not
    hold e_1 (a degenerate optimum: m >> d active constraints)."""
    rng = np.random.default_rng(seed)
    V = rng.standard_normal((m, d))
    V[:, 0] = 0.0
    V /= np.linalg.norm(V, axis=1, keepdims=True)
    theta = np.deg2rad(80.0)
    A = np.cos(theta) * np.eye(d)[0][None, :] + np.sin(theta) * V
    u = np.zeros(d)
    u[1] = 1.0
    prob = zoframe.Constrained(lambda X: ((X - np.eye(d)[0]) ** 2).sum(axis=1), lambda X, idx: X @ A[idx].T, m=m,
                               x0=np.zeros(d))  # fmt: skip
    return prob, 1e-12 * u


def test_a_degenerate_optimum_with_more_active_constraints_than_the_old_cap() -> None:
    prob, x = _crowded_vertex(3000)
    oracle = CountingOracle(prob)
    capped = certify(oracle, x, active_cap=80)  # the former default cap for d = 10: the closest 80 do not span it
    assert not capped.passed and capped.cap_hit
    cert = certify(CountingOracle(prob), x)
    assert cert.passed and not cert.cap_hit and 80 < cert.n_active <= 3000
    # a point 0.1 off the vertex (inside the feasible cone) is still refused
    y = -0.1 * np.eye(10)[0]  # its constraints 0.017 away, beyond the band
    assert not certify(CountingOracle(prob), y).passed


def test_a_constrained_problem_with_variables_of_sizes_1e_3_to_1e3_is_certified_in_their_units() -> None:
    """Rosenbrock (d = 10) in u = s x with s from 1e-3 to 1e3 and a halfspace that cuts off its minimiser: its KKT
    point passes at tol 1e-4 with the residual of steps in each variable's own size (about 2e-6; steps of size 1 on a
    variable of size 1e-3 gave 4e-4, and 0.1 on a 10,000-halfspace version), and the point moved by 1 % of its
    smallest variable is refused."""
    from scipy.optimize import minimize as scipy_minimize
    from scipy.optimize import rosen, rosen_der

    d = 10
    s = np.logspace(-3, 3, d)
    np.random.default_rng(0).shuffle(s)

    def f(U: np.ndarray) -> np.ndarray:
        X = U / s
        out: np.ndarray = (100.0 * (X[:, 1:] - X[:, :-1] ** 2) ** 2 + (1.0 - X[:, :-1]) ** 2).sum(axis=1)
        return out

    prob = zoframe.Constrained(f, lambda U, idx: ((U / s).sum(axis=1) - (d - 1.0))[:, None] + 0.0 * idx[None, :],
                               m=1, x0=0.5 * s)  # fmt: skip
    ref = scipy_minimize(rosen, 0.5 * np.ones(d), jac=rosen_der, method="SLSQP", options={"ftol": 1e-15, "maxiter": 1000},
                         constraints=[{"type": "ineq", "fun": lambda x: (d - 1.0) - x.sum(), "jac": lambda x: -np.ones(d)}])
    assert ref.success and abs(ref.x.sum() - (d - 1.0)) < 1e-9
    c = _cert(prob, s * ref.x, tol=1e-4)  # steps of size max(1, |x_k|) alone: residual 4e-4, refused at 1e-4
    assert c.passed and c.residual <= 1e-5, c
    assert _cert(prob, s * ref.x).passed
    off = s * ref.x
    off[np.argmin(s)] *= 1.01
    assert not _cert(prob, off).passed and not _cert(prob, off, tol=1e-4).passed


def test_a_minimum_where_f_is_0_is_certified_with_noise_free_steps() -> None:
    """Rosenbrock with an inactive constraint, 1e-8 from its minimiser where f = 0: the values' rounding looks like a
    noise of 1e-4 relative to |f| ~ 1e-16, whose step (5 % of a variable) was refused (residual 1.4e-3); the
    noise-free step's reading (its error bound from the same noise estimate) passes, and a point 1e-3 away is refused."""

    def rosen(X: np.ndarray) -> np.ndarray:
        out: np.ndarray = 100.0 * (X[:, 1] - X[:, 0] ** 2) ** 2 + (1.0 - X[:, 0]) ** 2
        return out

    prob = zoframe.Constrained(rosen, lambda X, idx: (X.sum(axis=1) - 3.0)[:, None] + 0.0 * idx[None, :], m=1,
                               x0=np.array([-1.2, 1.0]))  # fmt: skip
    x = np.array([1.0 + 1e-8, 1.0 + 2e-8])
    c = _cert(prob, x)
    assert c.passed and c.residual <= 1e-6, c
    assert not _cert(prob, np.array([1.0 + 1e-3, 1.0])).passed


def test_a_finite_sum_whose_minimum_is_0_is_certified_next_to_it() -> None:
    """The same for a finite sum (a single component): certified 1e-8 from the minimiser, refused 1e-3 from it."""
    prob = zoframe.FiniteSum(lambda X: 100.0 * (X[:, 1] - X[:, 0] ** 2) ** 2 + (1.0 - X[:, 0]) ** 2,
                             x0=np.array([-1.2, 1.0]))  # fmt: skip
    assert _cert(prob, np.array([1.0 + 1e-8, 1.0 + 2e-8])).passed
    assert not _cert(prob, np.array([1.0 + 1e-3, 1.0])).passed
