"""Non-finite values are failed trials: estimators leave them out, never a raw numpy error."""

from __future__ import annotations

from typing import Any
import warnings

import numpy as np
import pytest

from zoframe.errors import DivergedError, IncompatibleProblemError, NonFiniteValueError
from zoframe.estimators import CoordinateEstimator, GaussianEstimator, SphereEstimator


def _wall(X: np.ndarray) -> np.ndarray:
    """A smooth function, +inf beyond x_0 > 0.3 (a region where it is undefined)."""
    v = ((X - 1.0) ** 2).sum(axis=1)
    return np.where(X[:, 0] > 0.3, np.inf, v)[:, None]


@pytest.mark.parametrize("cls", [GaussianEstimator, SphereEstimator])
def test_random_directions_leave_out_the_failed_trials(cls: type) -> None:
    est = cls(q=40, mu=0.2)
    x = np.array([0.25, 0.0, 0.0])
    rng = np.random.default_rng(0)
    g = est.estimate(_wall, x, rng).grad
    # the same directions, keeping only those whose point is finite: the estimate of those
    U = est.directions(3, np.random.default_rng(0))
    keep = x[0] + 0.2 * U[:, 0] <= 0.3
    assert 0 < keep.sum() < 40
    diffs = (_wall(x + 0.2 * U[keep])[:, 0] - _wall(x[None, :])[0, 0]) / 0.2
    want = est.scale(3) / keep.sum() * (diffs @ U[keep])
    np.testing.assert_allclose(g, want, rtol=1e-12)
    assert np.isfinite(g).all()
    # the one-point hot path and the oracle path give the same
    np.testing.assert_allclose(est.gradient(_wall, x, np.random.default_rng(0)), want, rtol=1e-12)
    two = est.estimate(_wall, np.vstack([x, x]), np.random.default_rng(0)).grad
    np.testing.assert_allclose(two, np.vstack([want, want]), rtol=1e-12)


def test_central_differences_turn_one_sided_at_the_wall() -> None:
    est = CoordinateEstimator(mu=0.1)
    x = np.array([0.25, 0.0])
    g = est.estimate(_wall, x, np.random.default_rng(0)).grad
    # coordinate 0: x + 0.1 e_0 is beyond the wall: the backward difference
    f0 = _wall(x[None, :])[0, 0]
    e0, e1 = np.array([0.1, 0.0]), np.array([0.0, 0.1])
    back = (f0 - _wall((x - e0)[None, :])[0, 0]) / 0.1
    central = (_wall((x + e1)[None, :])[0, 0] - _wall((x - e1)[None, :])[0, 0]) / 0.2
    np.testing.assert_allclose(g, [back, central], rtol=1e-12)


def test_a_point_in_the_undefined_region_is_a_divergence() -> None:
    with pytest.raises(DivergedError, match="not finite at the point itself"):
        GaussianEstimator(q=5, mu=1e-3).estimate(_wall, np.array([0.5, 0.0]), np.random.default_rng(0))
    with pytest.raises(DivergedError, match="not finite at the point itself"):
        CoordinateEstimator(mu=1e-3).estimate(_wall, np.array([0.5, 0.0]), np.random.default_rng(0))


def test_every_trial_failed() -> None:
    def edge(X: np.ndarray) -> np.ndarray:
        v = (X**2).sum(axis=1)
        v[1:] = np.inf  # every perturbed point
        return v[:, None]

    with pytest.raises(NonFiniteValueError, match="every perturbed point"):
        GaussianEstimator(q=5, mu=1e-3).estimate(edge, np.zeros(2), np.random.default_rng(0))


def _solver_kinds() -> list[tuple[str, str]]:
    import zoframe

    reg = zoframe.default_registry()
    out = []
    for name, provided in sorted(reg.solvers().items()):
        spec = provided.spec
        try:
            cls = spec.cls
        except Exception:  # an extra that is not installed: its own tests cover the message
            continue
        if getattr(cls, "first_order", False) or name in ("zopsgd", "zoscgd", "acc-zomda", "acc-szofw", "sgda", "sgdmsa"):
            continue  # white-box gradients / projections: an imperfect black box has none
        out.extend((name, kind) for kind in sorted(spec.problem_kinds))
    return out


@pytest.mark.parametrize("nonfinite", ["raise", "inf"])
@pytest.mark.parametrize(("name", "kind"), _solver_kinds())
def test_nan_regions_never_give_a_raw_error(name: str, kind: str, nonfinite: str) -> None:
    """Every solver on every kind it takes, with NaN at 30% of the points (seeded): the run returns a Result, or
    raises zoframe's own errors (a NonFiniteValueError naming the point under nonfinite='raise'), never a numpy or
    Python error from inside the library (RuntimeWarnings are errors in this suite)."""
    import zoframe
    from zoframe.driver import RunFailedError
    from zoframe.errors import ZoframeError
    from zoframe.imperfect import with_nan
    from zoframe.testing.problems import smoke_problem

    prob = with_nan(smoke_problem(kind, seed=1), 0.3, seed=2)
    try:
        with warnings.catch_warnings():
            # the wrapped libraries' own notices about the +inf values they are given (nevergrad clips them,
            # scipy's COBYQA skips its model update) are theirs to give; numpy's RuntimeWarnings stay errors
            warnings.filterwarnings("ignore", module=r"(nevergrad|cobyqa|scipy\.optimize).*")
            warnings.filterwarnings("ignore", message=".*(Clipping very high value|no update for).*")
            res = zoframe.minimize(prob, name, rng=0, max_calls=1500, nonfinite=nonfinite)  # type: ignore[arg-type]
    except IncompatibleProblemError as exc:  # refused before any evaluation (dfols needs residuals): said why
        assert name in str(exc) or "needs" in str(exc)
        return
    except RunFailedError as exc:
        assert isinstance(exc.__cause__, ZoframeError), f"{type(exc.__cause__).__name__}: {exc.__cause__}"
        if nonfinite == "raise" and isinstance(exc.__cause__, NonFiniteValueError):
            assert "at the point" in str(exc.__cause__)
        return
    assert not (res.success and not np.isfinite(res.fun))


def _nan_region(where: str, d: int = 3, m_extra: int = 0) -> Any:
    """min |x - 1|^2 s.t. x_i <= 0.5 (and ``m_extra`` inactive constraints): the optimum x = 0.5 lies on the boundary of
    a region where the objective (``where="objective"``) or every constraint (``"constraint"``) is NaN, x_0 > 0.5 +
    1e-7: a forward difference point of the solution is in the region."""
    import zoframe

    def f(X: np.ndarray) -> np.ndarray:
        out = ((X - 1.0) ** 2).sum(axis=1)
        if where == "objective":
            out = np.where(X[:, 0] > 0.5 + 1e-7, np.nan, out)
        return np.asarray(out)

    def g(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        G = np.hstack([X - 0.5, np.repeat(X.sum(axis=1, keepdims=True) - 10.0 * d, m_extra, axis=1)])
        if where == "constraint":
            G = np.where((X[:, 0] > 0.5 + 1e-7)[:, None], np.nan, G)
        return np.asarray(G[:, idx])

    return zoframe.Constrained(f, g, m=d + m_extra, x0=np.zeros(d))


@pytest.mark.parametrize("solver", ["adszog", "dszog"])
@pytest.mark.parametrize("where", ["objective", "constraint"])
def test_a_solution_on_the_edge_of_a_nan_region(solver: str, where: str) -> None:
    """The precision phase from x0 (a small problem): with nonfinite='inf' (the default of steps='auto') a difference
    point in the region gives the one-sided difference on the other side, and the run converges to x = 0.5 (it failed
    with "the precision phase's difference gradients are not finite"); with nonfinite='raise' the user's function's
    NaN is a NonFiniteValueError naming the point and the function, never a numpy error."""
    import zoframe
    from zoframe.driver import RunFailedError

    prob = _nan_region(where)
    res = zoframe.minimize(prob, solver, rng=0, max_calls=20_000)
    assert res.status is zoframe.Status.CONVERGED, res.message
    np.testing.assert_allclose(res.x, 0.5, atol=1e-9)
    with pytest.raises(RunFailedError) as info:
        zoframe.minimize(prob, solver, rng=0, max_calls=20_000, nonfinite="raise")
    cause = info.value.__cause__
    assert isinstance(cause, NonFiniteValueError), cause
    assert "at the point" in str(cause) and f"{where} function returned nan" in str(cause)


@pytest.mark.parametrize("nonfinite", ["inf", "raise"])
@pytest.mark.parametrize("solver", ["adszog", "dszog"])
@pytest.mark.parametrize("where", ["objective", "constraint"])
def test_nan_regions_through_the_penalty_phase_and_the_restoration(solver: str, where: str, nonfinite: str) -> None:
    """The same boundary problem with 400 more (inactive) constraints and small_problem=0: the penalty phase, the
    restoration and the precision phase meet the region at their trial and difference points. A Result (a failed trial
    shortens a step or turns a difference one-sided), or zoframe's NonFiniteValueError naming the point under
    nonfinite='raise'; never a numpy or Python error from inside the library."""
    import zoframe
    from zoframe.driver import RunFailedError

    prob = _nan_region(where, d=3, m_extra=400)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        try:
            res = zoframe.minimize(prob, solver, rng=1, max_calls=200_000, small_problem=0, nonfinite=nonfinite)  # type: ignore[arg-type]
        except RunFailedError as exc:
            assert nonfinite == "raise" and isinstance(exc.__cause__, NonFiniteValueError), exc
            assert "at the point" in str(exc.__cause__)
            return
    assert np.isfinite(res.x).all() and res.max_violation is not None
    if res.status is zoframe.Status.CONVERGED:
        np.testing.assert_allclose(res.x, 0.5, atol=1e-6)


def test_a_restoration_round_that_lands_in_a_nan_region_goes_half_back() -> None:
    """nonfinite='inf': a restoration round whose point has a non-finite constraint value (the previous round's step
    went into the region) is taken half back toward the best point the rounds measured, as a round of its own."""
    from zoframe.oracle import CountingOracle
    from zoframe_constrained.restoration import Restoration, RestorationState
    from zoframe_constrained.solvers import ADSZOG

    prob = _nan_region("constraint", d=3, m_extra=10)
    solver = ADSZOG(small_problem=0)
    oracle = CountingOracle(prob, nonfinite="inf")
    st0 = solver.init(oracle, np.zeros(3), np.random.default_rng(0))
    pen = st0.inner
    best = np.array([0.4, 0.4, 0.4])
    st = RestorationState(x=np.array([0.9, 0.4, 0.4]), penalty=pen, violation=0.1, rounds=1,
                          restore_best=(best, np.array(0.0)))  # fmt: skip
    out = Restoration("restoration", solver).step(oracle, st, np.random.default_rng(0))
    np.testing.assert_allclose(out.x, [0.65, 0.4, 0.4])
    assert out.rounds == 2 and out.failed == 1
