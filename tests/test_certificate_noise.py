"""The certificate under noisy values: error bounds from the estimated noise, noise-limited verdicts, no false passes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import zoframe
from zoframe.certificate import certify
from zoframe.imperfect import noisy
from zoframe.oracle import CountingOracle


def _ill(X: np.ndarray) -> np.ndarray:
    return 1e4 * (X[:, 0] - 1.0) ** 2 + 1e-4 * (X[:, 1] - 1.0) ** 2


def _sphere(X: np.ndarray) -> np.ndarray:
    return ((X - 1.0) ** 2).sum(axis=1)


def _certs(fun: Any, x0: np.ndarray, x: np.ndarray, level: float, seeds: int = 5, **kw: Any) -> list[Any]:
    out = []
    for seed in range(seeds):
        prob = noisy(zoframe.FiniteSum(fun, x0=x0), level, seed=seed)
        out.append(certify(CountingOracle(prob), x, **kw))
    return out


def test_a_point_far_from_stationary_never_passes_under_noise() -> None:
    """``1e4 (x0 - 1)^2 + 1e-4 (x1 - 1)^2`` at ``(1, -2)``, noise 1e-6: a gap of 9e-4, 900 times the noise. The
    noise used to inflate the curvature reference (central differences at a tiny step) and pass it."""
    certs = _certs(_ill, np.zeros(2), np.array([1.0, -2.0]), 1e-6)
    assert not any(c.passed for c in certs)
    assert not any(c.noise_limited for c in certs)  # the failure is evidenced by the values, not the noise's
    assert all(0.3e-6 <= c.noise <= 3e-6 for c in certs)  # the estimated noise, within a factor 3


@pytest.mark.parametrize("level", [1e-10, 1e-8, 1e-6, 1e-4])
def test_a_sphere_1e_2_away_fails_and_its_minimiser_passes_where_the_noise_allows(level: float) -> None:
    far = _certs(_sphere, np.zeros(5), np.full(5, 1.01), level)
    assert not any(c.passed for c in far)
    at = _certs(_sphere, np.zeros(5), np.ones(5), level)
    if level <= 1e-6:
        assert all(c.passed for c in at)
    else:  # 1e-4: the gradient's error is above the tolerance's share of the curvature: the noise decides
        assert not any(c.passed for c in at) and all(c.noise_limited for c in at)
        assert all("noise-limited" in c.message for c in at)


def test_a_coordinate_the_noise_hides_is_noise_limited() -> None:
    """At the minimiser of the ill-conditioned quadratic, noise 1e-6 hides the curvature 2e-4 of x1 at any step the
    certificate takes: the verdict is the noise's, and it says so."""
    certs = _certs(_ill, np.zeros(2), np.ones(2), 1e-6)
    assert not any(c.passed for c in certs) and all(c.noise_limited for c in certs)


def test_a_stated_noise_is_used() -> None:
    prob = noisy(zoframe.FiniteSum(_sphere, x0=np.zeros(3)), 1e-6, seed=0)
    c = certify(CountingOracle(prob), np.ones(3), noise=2e-6)
    assert c.passed and c.noise == pytest.approx(2e-6)
    c = certify(CountingOracle(prob), np.ones(3) + 0.01, relative_noise=1e-3)
    assert not c.passed


def test_noise_free_values_are_unchanged() -> None:
    """Without noise the certificate reads the rounding alone: the same verdicts as ever at the optimum and away."""
    prob = zoframe.FiniteSum(_ill, x0=np.zeros(2))
    at = certify(CountingOracle(prob), np.ones(2))
    assert at.passed and at.noise is not None and at.noise < 1e-12 and not at.noise_limited
    assert not certify(CountingOracle(prob), np.array([1.0, -2.0])).passed


@pytest.mark.parametrize("solver", ["cobyla", "zo-sgd", "nelder-mead"])
def test_no_success_claim_beyond_the_noise(solver: str) -> None:
    """End to end, noise 1e-6 on ``1e4 (x0 - 1)^2 + 1e-4 (x1 - 1)^2`` (the case where cobyla was certified at a true
    gap of 0.24): every success is within the tolerance on the clean problem."""
    for seed in range(3):
        clean = zoframe.FiniteSum(_ill, x0=np.zeros(2))
        res = zoframe.minimize(noisy(clean, 1e-6, seed=seed), solver, rng=seed, max_calls=20_000)
        if res.success:
            exact = certify(CountingOracle(clean), res.x)
            assert exact.passed, (res.x, res.message)
        else:
            assert res.status is not zoframe.Status.CONVERGED or "not certified" in res.message
