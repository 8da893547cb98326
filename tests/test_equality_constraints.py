"""Equality constraints h(x) = 0 of ``zoframe.Constrained``: build, oracle, measures, solvers, certificate."""

from __future__ import annotations

import numpy as np
import pytest

import zoframe
from zoframe.certificate import certify
from zoframe.errors import BudgetExhausted, IncompatibleProblemError, InvalidInputError, NonFiniteValueError
from zoframe.oracle import CountingOracle

A = np.array([0.3, -0.2, 0.9, 0.4])
#: min |x - a|^2 s.t. sum(x) = 1: x* = a - (sum(a) - 1) / d
X_SIMPLEX = A - (A.sum() - 1.0) / A.shape[0]


def _columns(v: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return v[:, None][:, np.zeros(len(idx), dtype=np.intp)]


def _loose(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """One inequality that holds everywhere near the solutions: x_0 <= 10."""
    return _columns(X[:, 0] - 10.0, idx)


def projection_problem() -> zoframe.Constrained:
    return zoframe.Constrained(
        lambda X: ((X - A) ** 2).sum(axis=1), _loose, 1, np.zeros(4),
        equality_fun=lambda X, idx: _columns(X.sum(axis=1) - 1.0, idx), m_eq=1,
    )  # fmt: skip


def circle_problem() -> zoframe.Constrained:
    """min x0 + x1 s.t. x0^2 + x1^2 = 2: minimum (-1, -1), maximum (1, 1)."""
    return zoframe.Constrained(
        lambda X: X.sum(axis=1), _loose, 1, np.array([0.5, -2.0]),
        equality_fun=lambda X, idx: _columns((X**2).sum(axis=1) - 2.0, idx), m_eq=1,
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------- build
def test_equality_signature_checked_at_build() -> None:
    with pytest.raises(InvalidInputError, match=r"equality_fun is called as equality_fun\(X, idx\)"):
        zoframe.Constrained(lambda X: X.sum(1), _loose, 1, np.zeros(2), equality_fun=lambda X: X.sum(1), m_eq=1)
    with pytest.raises(InvalidInputError, match=r"equality_fun\(x, l\) -> float"):
        zoframe.Constrained(
            lambda x: float(x.sum()), lambda x, j: float(x[0]), 1, np.zeros(2),
            equality_fun=lambda x: float(x.sum()), m_eq=1, vectorized=False,
        )  # fmt: skip
    with pytest.raises(InvalidInputError, match="m_eq"):
        zoframe.Constrained(lambda X: X.sum(1), _loose, 1, np.zeros(2), equality_fun=lambda X, idx: X[:, idx], m_eq=0)
    with pytest.raises(InvalidInputError, match="no equality_fun"):
        zoframe.Constrained(lambda X: X.sum(1), _loose, 1, np.zeros(2), m_eq=2)


def test_scalar_equalities_match_vectorized() -> None:
    vec = projection_problem()
    scal = zoframe.Constrained(
        lambda x: float(((x - A) ** 2).sum()), lambda x, j: float(x[0] - 10.0), 1, np.zeros(4),
        equality_fun=lambda x, k: float(x.sum() - 1.0), m_eq=1, vectorized=False,
    )  # fmt: skip
    X = np.random.default_rng(0).normal(size=(5, 4))
    ids = np.array([0])
    np.testing.assert_allclose(scal.equalities(X, ids), vec.equalities(X, ids))


# ---------------------------------------------------------------------------------------------- oracle
def test_oracle_counts_equalities_as_their_own_kind() -> None:
    o = CountingOracle(projection_problem(), max_calls=10)
    X = np.ones((3, 4))
    h = o.equalities(X, purpose="probe")
    np.testing.assert_allclose(h, np.full((3, 1), 3.0))
    o.constraints(X[:2])
    assert o.calls_by_kind["equality"] == 3 and o.calls_by_kind["constraint"] == 2
    assert o.calls_by_purpose["probe"] == 3
    assert o.m_eq == 1
    with pytest.raises(BudgetExhausted):
        o.equalities(np.ones((6, 4)))  # 5 left: refused before it runs
    assert o.calls == 5
    o.monitor.equalities(X)  # monitoring: counted, not charged
    assert o.calls == 5 and o.calls_by_purpose["monitor"] == 3


def test_oracle_nonfinite_policy_applies_to_equalities() -> None:
    p = zoframe.Constrained(
        lambda X: X.sum(1), _loose, 1, np.zeros(2), equality_fun=lambda X, idx: _columns(np.log(X[:, 0]), idx), m_eq=1,
    )  # fmt: skip
    with pytest.raises(NonFiniteValueError, match="equality"), np.errstate(all="ignore"):
        CountingOracle(p).equalities(np.array([[-1.0, 0.0]]))
    with np.errstate(all="ignore"):
        out = CountingOracle(p, nonfinite="inf").equalities(np.array([[-1.0, 0.0]]))
    assert out[0, 0] == np.inf


def test_oracle_without_equalities_refuses_the_call() -> None:
    p = zoframe.Constrained(lambda X: X.sum(1), _loose, 1, np.zeros(2))
    with pytest.raises(InvalidInputError, match="m_eq = 0"):
        CountingOracle(p).equalities(np.zeros((1, 2)))


def test_measures_count_equality_violation() -> None:
    p = projection_problem()
    o = CountingOracle(p)
    ms = p.measures({"x": np.zeros(4)}, o.monitor)
    assert ms["max_violation"] == pytest.approx(1.0)  # |sum(0) - 1|; the inequality holds
    assert ms["frac_violated"] == pytest.approx(0.5)
    ms = p.measures({"x": X_SIMPLEX}, o.monitor)
    assert ms["max_violation"] < 1e-12


# ---------------------------------------------------------------------------------------------- solvers
@pytest.mark.parametrize("solver", ["adszog", "slsqp-fd"])
def test_solvers_reach_the_projection_onto_the_hyperplane(solver: str) -> None:
    r = zoframe.minimize(projection_problem(), solver, rng=0, max_calls=20_000)
    assert r.success, r.message
    assert r.feasible and r.max_violation is not None and r.max_violation <= 1e-6
    np.testing.assert_allclose(r.x, X_SIMPLEX, atol=1e-6)
    assert r.nfev_by_kind["equality"] > 0


@pytest.mark.parametrize("solver", ["adszog", "slsqp-fd"])
def test_solvers_reach_the_minimum_on_the_circle(solver: str) -> None:
    r = zoframe.minimize(circle_problem(), solver, rng=0, max_calls=20_000)
    assert r.success, r.message
    np.testing.assert_allclose(r.x, [-1.0, -1.0], atol=1e-6)
    assert abs(float((r.x**2).sum()) - 2.0) <= 1e-6


def test_dszog_auto_runs_the_precision_phase_with_equalities() -> None:
    r = zoframe.minimize(circle_problem(), "dszog", rng=1, max_calls=20_000)
    assert r.success, r.message
    assert "equality constraints" in r.message
    np.testing.assert_allclose(r.x, [-1.0, -1.0], atol=1e-6)


@pytest.mark.parametrize("solver", ["cobyla", "cobyqa", "trust-constr-fd"])
def test_other_peers_take_equalities(solver: str) -> None:
    r = zoframe.minimize(circle_problem(), solver, rng=0, max_calls=5_000)
    assert r.feasible, r.message
    np.testing.assert_allclose(r.x, [-1.0, -1.0], atol=1e-3)
    assert r.nfev_by_kind["equality"] == r.nfev_by_kind["constraint"]  # one of each per peer point


def test_solver_without_equalities_refuses_them() -> None:
    with pytest.raises(IncompatibleProblemError, match=r"does not take equality constraints.*slsqp-fd"):
        zoframe.minimize(projection_problem(), "cma-es", rng=0, max_calls=1000)
    with pytest.raises(IncompatibleProblemError, match="steps='paper'"):
        zoframe.minimize(projection_problem(), "adszog", rng=0, max_calls=1000, steps="paper")


# ---------------------------------------------------------------------------------------------- certificate
def test_certificate_with_equalities() -> None:
    o = CountingOracle(circle_problem())
    assert certify(o, np.array([-1.0, -1.0])).passed
    off = certify(o, np.array([-1.1, -0.9]))  # |h| = 0.02: off the circle
    assert not off.passed and "infeasible" in off.message
    assert off.max_violation == pytest.approx(0.02)
    top = certify(o, np.array([1.0, 1.0]))  # a KKT point (mu = -1/2) that is the maximum along the circle
    assert not top.passed and "not a minimum" in top.message
    assert o.calls_by_kind["equality"] == 0 and o.calls_by_purpose["certify"] > 0


def test_kkt_report_fits_free_sign_multipliers() -> None:
    from zoframe_verify.checks import kkt_report

    p = circle_problem()
    lo = kkt_report(p, np.array([-1.0, -1.0]))
    hi = kkt_report(p, np.array([1.0, 1.0]))
    assert lo.eps1 < 1e-8 and hi.eps1 < 1e-8
    np.testing.assert_allclose(lo.equality_multipliers, [0.5], atol=1e-8)
    np.testing.assert_allclose(hi.equality_multipliers, [-0.5], atol=1e-8)  # negative: free sign
    off = kkt_report(p, np.array([-1.1, -0.9]))
    assert off.max_violation == pytest.approx(0.02) and off.eps2 == pytest.approx(0.02)
    with pytest.raises(InvalidInputError, match="equality_multipliers"):
        kkt_report(p, np.array([-1.0, -1.0]), multipliers=np.zeros(1))


def test_problem_contract_covers_equalities() -> None:
    from zoframe.testing import ContractFailure, check_problem

    check_problem(circle_problem(), picklable=False)  # equalities evaluated batched, by blocks, consistently
    broken = zoframe.Constrained(
        lambda X: X.sum(1), _loose, 1, np.zeros(2), equality_fun=lambda X, idx: np.zeros((1, len(idx))), m_eq=1,
    )  # fmt: skip
    with pytest.raises(ContractFailure, match="equality function"):
        check_problem(broken, picklable=False)


def test_equality_runs_are_deterministic() -> None:
    a = zoframe.minimize(circle_problem(), "adszog", rng=3, max_calls=5_000)
    b = zoframe.minimize(circle_problem(), "adszog", rng=3, max_calls=5_000)
    assert np.array_equal(a.x, b.x) and a.nfev_by_kind == b.nfev_by_kind


def test_ask_tell_asks_for_equalities_and_matches_minimize() -> None:
    problem = circle_problem()
    direct = zoframe.minimize(problem, "adszog", rng=2, max_calls=5_000)
    run = zoframe.Run(problem, "adszog", rng=2, max_calls=5_000)
    kinds: set[str] = set()
    while (req := run.ask()) is not None:
        kinds.add(req.kind)
        fn = {"objective": problem.components, "constraint": problem.constraints, "equality": problem.equalities}
        run.tell(req, fn[req.kind](req.points, req.indices))
    res = run.result()
    assert "equality" in kinds
    assert np.array_equal(res.x, direct.x) and res.nfev_by_kind == direct.nfev_by_kind and res.success


def test_problem_shape_declares_equalities() -> None:
    shape = zoframe.ProblemShape(kind="constrained", dim=2, x0=np.array([0.5, -2.0]), m=1, m_eq=1)
    run = zoframe.Run(shape, "slsqp-fd", rng=0, max_calls=3_000)
    problem = circle_problem()
    fn = {"objective": problem.components, "constraint": problem.constraints, "equality": problem.equalities}
    while (req := run.ask()) is not None:
        run.tell(req, fn[req.kind](req.points, req.indices))
    res = run.result()
    assert res.success and np.allclose(res.x, [-1.0, -1.0], atol=1e-6)
    with pytest.raises(InvalidInputError, match="m_eq"):
        zoframe.ProblemShape(kind="finite_sum", dim=2, x0=np.zeros(2), m_eq=1)


def _rows(V: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return V[:, idx]


@pytest.mark.parametrize(
    ("problem", "solution"),
    [
        (  # two linear equalities, an active inequality x2 >= 1.5, bounds: min |x|^2 -> (1, 0.5, 1.5)
            zoframe.Constrained(
                lambda X: (X**2).sum(1), lambda X, idx: _rows(1.5 - X[:, [2]], idx), 1, np.array([5.0, -3.0, 0.0]),
                equality_fun=lambda X, idx: _rows(np.stack([X.sum(1) - 3.0, X[:, 0] - X[:, 1] - 0.5], 1), idx),
                m_eq=2, bounds=(-10.0, 10.0),
            ),
            [1.0, 0.5, 1.5],
        ),
        (  # the same equality twice (linearly dependent rows): min |x - 2|^2 s.t. sum(x) = 1
            zoframe.Constrained(
                lambda X: ((X - 2.0) ** 2).sum(1), _loose, 1, np.zeros(3),
                equality_fun=lambda X, idx: _rows(np.stack([X.sum(1) - 1.0, 2.0 * X.sum(1) - 2.0], 1), idx), m_eq=2,
            ),
            [1.0 / 3.0] * 3,
        ),
        (  # from the origin, where grad h = 0 (an inconsistent linearisation: the elastic QP)
            zoframe.Constrained(
                lambda X: X.sum(axis=1), _loose, 1, np.zeros(2),
                equality_fun=lambda X, idx: _columns((X**2).sum(axis=1) - 2.0, idx), m_eq=1,
            ),
            [-1.0, -1.0],
        ),
        (  # Hock & Schittkowski 7: min log(1 + x0^2) - x1 s.t. (1 + x0^2)^2 + x1^2 = 4 -> (0, sqrt 3)
            zoframe.Constrained(
                lambda X: np.log1p(X[:, 0] ** 2) - X[:, 1], _loose, 1, np.array([2.0, 2.0]),
                equality_fun=lambda X, idx: _columns((1.0 + X[:, 0] ** 2) ** 2 + X[:, 1] ** 2 - 4.0, idx), m_eq=1,
            ),
            [0.0, np.sqrt(3.0)],
        ),
    ],
    ids=["linear-with-active-inequality", "dependent-equalities", "zero-jacobian-start", "hs7"],
)
def test_precision_phase_equality_cases(problem: zoframe.Constrained, solution: list[float]) -> None:
    r = zoframe.minimize(problem, "adszog", rng=0, max_calls=20_000)
    assert r.success, r.message
    np.testing.assert_allclose(r.x, solution, atol=1e-6)
    assert r.max_violation is not None and r.max_violation <= 1e-6


# ---------------------------------------------------------------------------------------------- equalities alone (m = 0)
_C = np.array([2.0, 2.0, 0.0])


def _two_equalities(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """sum(x) = 1 and x0 x1 = 0.2."""
    out: np.ndarray = np.stack([X.sum(axis=1) - 1.0, X[:, 0] * X[:, 1] - 0.2], axis=1)[:, idx]
    return out


def equalities_alone(bounds: tuple[float, float] | None = None) -> zoframe.Constrained:
    """min |x - (2, 2, 0)|^2 s.t. sum(x) = 1, x0 x1 = 0.2 and no inequality: without bounds x* = (1.352, 0.148,
    -0.5), f* = 4.1; with 0 <= x <= 0.8 the bound x2 >= 0 is active: x* = ((1 + 1/sqrt 5) / 2, (1 - 1/sqrt 5) / 2, 0),
    f* = 4.6."""
    return zoframe.Constrained(
        lambda X: ((X - _C) ** 2).sum(axis=1), None, 0, np.array([0.6, 0.1, 0.3]),
        equality_fun=_two_equalities, m_eq=2, bounds=bounds,
    )  # fmt: skip


def _reference(bounds: tuple[float, float] | None) -> tuple[np.ndarray, float]:
    from scipy import optimize

    res = optimize.minimize(
        lambda x: float(((x - _C) ** 2).sum()), np.array([0.6, 0.1, 0.3]), method="SLSQP", tol=1e-14,
        jac=lambda x: 2.0 * (x - _C), bounds=None if bounds is None else [bounds] * 3,
        constraints=[{"type": "eq", "fun": lambda x: [x.sum() - 1.0, x[0] * x[1] - 0.2]}],
    )  # fmt: skip
    return np.asarray(res.x), float(res.fun)


@pytest.mark.parametrize("bounds", [None, (0.0, 0.8)], ids=["free", "bounds"])
@pytest.mark.parametrize("solver", ["adszog", "dszog"])
def test_equalities_alone_solved_to_the_certificate(solver: str, bounds: tuple[float, float] | None) -> None:
    """m = 0, m_eq = 2: the precision phase runs from x0, the claim is certified, the point is the optimum (an
    independent reference: scipy's SLSQP with exact gradients); median over 3 seeds."""
    x_ref, f_ref = _reference(bounds)
    prob = equalities_alone(bounds)
    errs = []
    for seed in range(3):
        r = zoframe.minimize(prob, solver, rng=seed, max_calls=5000)
        assert r.success and r.certificate is not None and r.certificate["passed"], r.message
        assert r.max_violation is not None and r.max_violation <= 1e-6
        assert r.nfev_by_kind.get("constraint", 0) == 0  # no inequality was ever evaluated
        errs.append(float(np.abs(r.x - x_ref).max()))
        assert abs(r.fun - f_ref) <= 1e-6 * max(1.0, abs(f_ref))
    assert np.median(errs) < 1e-5
    if bounds is not None:
        assert x_ref[2] == pytest.approx(0.0, abs=1e-9)  # the bound is active at the optimum


@pytest.mark.parametrize("solver", ["slsqp-fd", "cobyla"])
def test_peers_take_equalities_alone(solver: str) -> None:
    x_ref, _ = _reference(None)
    r = zoframe.minimize(equalities_alone(), solver, rng=0, max_calls=5000)
    assert r.success, r.message
    np.testing.assert_allclose(r.x, x_ref, atol=1e-4)


def test_equalities_alone_certificate_and_kkt_report() -> None:
    from zoframe_verify.checks import kkt_report

    prob = equalities_alone()
    x_ref, _ = _reference(None)
    cert = certify(CountingOracle(prob), x_ref)
    assert cert.passed and cert.max_violation is not None and cert.max_violation < 1e-8, cert.message
    rep = kkt_report(prob, x_ref)
    assert rep.eps1 < 1e-6 and rep.max_violation < 1e-8
    assert rep.equality_multipliers.shape == (2,)
    boxed = equalities_alone((0.0, 0.8))  # the bound x2 >= 0 is active at its optimum: its multiplier is fitted
    x_box, _ = _reference((0.0, 0.8))
    on_box = kkt_report(boxed, x_box)
    assert on_box.eps1 < 1e-6 * on_box.grad_norm and on_box.max_violation < 1e-6  # the reference's accuracy
    assert kkt_report(prob, x_box).eps1 > 0.1 * on_box.grad_norm  # without the bound x_box is not stationary
    off = kkt_report(prob, x_ref + np.array([0.05, 0.0, 0.0]))  # |h| = (0.05, 0.05 x1)
    assert off.max_violation == pytest.approx(0.05, rel=1e-6)
    assert off.eps2 == pytest.approx(float(np.hypot(0.05, 0.05 * x_ref[1])), rel=1e-6)


def test_equalities_alone_what_is_refused() -> None:
    """Clear errors: no constraint at all, m given without a function, steps='paper', a baseline."""
    f = lambda X: (X**2).sum(axis=1)  # noqa: E731
    with pytest.raises(InvalidInputError, match="FiniteSum"):
        zoframe.Constrained(f, None, 0, np.zeros(3))
    with pytest.raises(InvalidInputError, match="m=0"):
        zoframe.Constrained(f, None, 2, np.zeros(3), equality_fun=_two_equalities, m_eq=2)
    prob = equalities_alone()
    with pytest.raises(IncompatibleProblemError, match="steps='paper'"):
        zoframe.minimize(prob, "adszog", rng=0, max_iter=5, steps="paper")
    with pytest.raises(IncompatibleProblemError, match="equality"):
        zoframe.minimize(prob, "zopsgd", rng=0, max_iter=5)


def test_equalities_alone_through_ask_tell_and_a_problem_shape() -> None:
    """The same run through ask/tell (never asked for an inequality) and from a ProblemShape with m = 0."""
    problem = equalities_alone()
    direct = zoframe.minimize(problem, "adszog", rng=1, max_calls=5_000)
    fn = {"objective": problem.components, "equality": problem.equalities}
    for source in (problem, zoframe.ProblemShape(kind="constrained", dim=3, x0=problem.x0, m=0, m_eq=2)):
        run = zoframe.Run(source, "adszog", rng=1, max_calls=5_000)
        while (req := run.ask()) is not None:
            run.tell(req, fn[req.kind](req.points, req.indices))  # a KeyError if an inequality were asked for
        res = run.result()
        assert np.array_equal(res.x, direct.x) and res.nfev_by_kind == direct.nfev_by_kind and res.success
