"""Non-finite values are failed trials: estimators leave them out, never a raw numpy error."""

from __future__ import annotations

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
