"""Estimators: unbiasedness (CLT bound over many estimates), exactness, batching and declared cost."""

from __future__ import annotations

import numpy as np
import pytest

from zoframe import CoordinateEstimator, CountingOracle, GaussianEstimator, InvalidParameterError, SphereEstimator
from zoframe.testing.problems import SmokeFiniteSum

D = 6
Q = np.diag(np.linspace(1.0, 3.0, D)) + 0.2
BVEC = np.linspace(-1.0, 1.0, D)


def quad(X: np.ndarray) -> np.ndarray:
    return (0.5 * np.einsum("kd,de,ke->k", X, Q, X) + X @ BVEC)[:, None]


X0 = np.linspace(0.5, -0.5, D)
GRAD = Q @ X0 + BVEC  # for a quadratic the smoothed gradient equals the gradient


@pytest.mark.parametrize("est", [GaussianEstimator(q=1, mu=0.05), SphereEstimator(q=1, mu=0.05)])
def test_mean_of_many_estimates_matches_smoothed_gradient_within_clt_bound(est: object) -> None:
    rng = np.random.default_rng(2024)
    N = 6000
    G = np.array([est.estimate(quad, X0, rng).grad for _ in range(N)])  # type: ignore[attr-defined]
    mean, se = G.mean(axis=0), G.std(axis=0, ddof=1) / np.sqrt(N)
    # 4.5 standard errors per coordinate: a false alarm has probability < 1e-4 over all 6 coordinates
    assert np.all(np.abs(mean - GRAD) <= 4.5 * se), (mean, GRAD, se)


def test_clt_bound_detects_a_biased_estimator() -> None:
    """The test above has power: an estimator scaled by 1.3 fails it."""
    rng = np.random.default_rng(7)
    est = GaussianEstimator(q=1, mu=0.05)
    G = 1.3 * np.array([est.estimate(quad, X0, rng).grad for _ in range(6000)])
    se = G.std(axis=0, ddof=1) / np.sqrt(len(G))
    assert np.any(np.abs(G.mean(axis=0) - GRAD) > 4.5 * se)


def test_coordinate_estimator_is_exact_on_quadratics() -> None:
    g = CoordinateEstimator(mu=1e-3).estimate(quad, X0, np.random.default_rng(0)).grad
    assert np.allclose(g, GRAD, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("est", [GaussianEstimator(q=7), SphereEstimator(q=3), CoordinateEstimator()])
def test_one_batched_call_and_declared_cost_equals_counted(est: object) -> None:
    prob = SmokeFiniteSum()
    oracle = CountingOracle(prob)
    calls: list[int] = []

    def fun(X: np.ndarray) -> np.ndarray:
        calls.append(X.shape[0])
        return oracle.objective(X, np.array([0, 3, 5]))

    e = est.estimate(fun, prob.x0, np.random.default_rng(0))  # type: ignore[attr-defined]
    rows = est.rows(prob.dim, 1)  # type: ignore[attr-defined]
    assert calls == [rows]
    assert oracle.calls == e.calls == rows * 3


def test_shared_directions_for_several_base_points() -> None:
    est = GaussianEstimator(q=5, mu=1e-2)
    P = np.vstack([X0, X0 + 0.1])
    both = est.estimate(quad, P, np.random.default_rng(3))
    one = est.estimate(quad, X0, np.random.default_rng(3))
    two = est.estimate(quad, X0 + 0.1, np.random.default_rng(3))
    assert np.allclose(both.grad[0], one.grad) and np.allclose(both.grad[1], two.grad)
    assert both.calls == 2 * 6


def test_per_component_estimates_average_to_the_batch_estimate() -> None:
    def fun(X: np.ndarray) -> np.ndarray:
        return np.stack([quad(X)[:, 0], 2 * quad(X)[:, 0], (X**2).sum(1)], axis=1)

    for est in (GaussianEstimator(q=4), CoordinateEstimator()):
        e = est.estimate(fun, X0, np.random.default_rng(1), per_component=True)
        assert e.per_component is not None and e.per_component.shape == (3, D)
        assert np.allclose(e.per_component.mean(axis=0), e.grad)


def test_input_point_is_not_modified() -> None:
    x = X0.copy()
    GaussianEstimator().estimate(quad, x, np.random.default_rng(0))
    assert np.array_equal(x, X0)


@pytest.mark.parametrize(
    "make",
    [lambda: GaussianEstimator(mu=0.0), lambda: GaussianEstimator(mu=-1e-3), lambda: GaussianEstimator(q=0),
     lambda: SphereEstimator(mu=float("nan")), lambda: CoordinateEstimator(mu=0.0)],
)
def test_bad_parameters_are_refused(make: object) -> None:
    with pytest.raises(InvalidParameterError):
        make()  # type: ignore[operator]
