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


def _coupled(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """NC-SC: sum log(1 + x_i^2) + y^T A x - 2 |y|^2 (stationary point x = 0, y* = A x / 4)."""
    A = np.array([[1.0, 0.5, 0.0], [0.0, 1.0, -0.5]])
    return np.log1p(X**2).sum(axis=1) + np.einsum("kj,ji,ki->k", Y, A, X) - 2.0 * (Y**2).sum(axis=1)


@pytest.mark.parametrize("level", [1e-8, 1e-4])
def test_minimax_under_noise(level: float) -> None:
    """The minimax certificate estimates the noise of F: a point 1e-2 from the stationary point never passes, the
    stationary point passes where the noise allows it."""
    for seed in range(3):
        prob = noisy(zoframe.Minimax(_coupled, x0=np.full(3, 0.5), y0=np.zeros(2)), level, seed=seed)
        at = certify(CountingOracle(prob), np.zeros(3), outputs={"y": np.zeros(2)})
        far = certify(CountingOracle(prob), np.full(3, 1e-2), outputs={"y": np.zeros(2)})
        assert not far.passed and at.noise is not None and at.noise >= 0.3 * level
        if level <= 1e-8:
            assert at.passed, at.message
        else:
            assert at.passed or at.noise_limited, at.message


def test_composite_under_noise() -> None:
    """The lasso as a composite problem with noise 1e-6 on its values: its solution passes (or the noise decides),
    a point 1e-2 away never passes."""
    from zoframe.penalties import L1

    rng = np.random.default_rng(0)
    n, d = 24, 5
    A = np.sqrt(n) * np.linalg.qr(rng.standard_normal((n, d)))[0]  # A^T A = n I: the lasso in closed form
    b = A @ np.array([1.0, -0.8, 0.0, 0.05, 0.6]) + 0.05 * rng.standard_normal(n)
    eye = np.eye(d)
    cbar = A.T @ b / n
    xstar = np.sign(cbar) * np.maximum(np.abs(cbar) - 0.25, 0.0)
    for seed in range(3):
        clean = zoframe.Composite(lambda X, idx: (X @ A[idx].T - b[idx]) ** 2, x0=np.zeros(d), A=eye, B=[-eye],
                                  c=np.zeros(d), penalties=[L1(0.5)], n=n)  # fmt: skip
        prob = noisy(clean, 1e-6, seed=seed)
        at = certify(CountingOracle(prob), xstar, outputs={"y0": xstar})
        far = xstar + 1e-2
        off = certify(CountingOracle(prob), far, outputs={"y0": far})
        assert (at.passed or at.noise_limited) and not off.passed, (at.message, off.message)
        sigma = 1e-6 / np.sqrt(n)  # the noise of the mean of n components, each with its own noise 1e-6
        assert at.noise is not None and sigma / 3 <= at.noise <= 3 * sigma
