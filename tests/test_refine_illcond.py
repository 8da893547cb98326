"""The refinement on badly scaled finite sums: feature columns of sizes 1e-3 to 1e4, correlated, a start of size
1e-3 (each variable's scale its own tiny size). The start's central differences, with steps that suit the gradient,
measured noise for the curvature of coordinates whose scale is far too small; the model's diagonal then held them
still and the run ended at its budget far from the optimum."""

from __future__ import annotations

import numpy as np
import pytest

import zoframe
from zoframe.oracle import CountingOracle
from zoframe.refine import CONVERGED, FullSum, RefineSettings, Region, minimize_smooth, qn_start


def _badly_scaled(seed: int, n: int = 300, d: int = 20) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    L = 0.5 * rng.standard_normal((d, d)) + np.eye(d)  # correlated columns
    scales = 10.0 ** rng.uniform(-3.0, 4.0, d)
    offsets = rng.uniform(0.0, 3.0, d) * (rng.random(d) < 0.6)
    A = np.hstack([(rng.standard_normal((n, d)) @ L + offsets) * scales, np.ones((n, 1))])
    t = A @ (rng.standard_normal(d + 1) / np.r_[scales, 1.0]) + 0.1 * rng.standard_normal(n)
    return A, t


def _least_squares(A: np.ndarray, t: np.ndarray) -> zoframe.FiniteSum:
    def comps(X: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray:
        rows = A if idx is None else A[idx]
        r = X @ rows.T - (t if idx is None else t[idx])
        out: np.ndarray = 0.5 * r * r
        return out

    return comps  # type: ignore[return-value]


def _gap(A: np.ndarray, t: np.ndarray, x: np.ndarray, x0: np.ndarray) -> float:
    xs = np.linalg.lstsq(A, t, rcond=None)[0]
    f = lambda z: 0.5 * float(np.mean((A @ z - t) ** 2))  # noqa: E731
    return (f(x) - f(xs)) / (f(x0) - f(xs))


def test_start_curvature_is_never_the_noise() -> None:
    """At a start whose scales are far too small, every diagonal curvature the start keeps is the function's (within
    a factor of 2 of the exact Hessian diagonal) or unknown (nan): never a number made of the noise."""
    A, t = _badly_scaled(2)
    n, d = A.shape
    x0 = 1e-3 * np.random.default_rng(102).standard_normal(d)
    oracle = CountingOracle(zoframe.FiniteSum(_least_squares(A, t), x0=x0, n=n))
    st = qn_start(FullSum(oracle), x0, Region(), RefineSettings(estimate_noise=True))
    exact = (A * A).mean(axis=0)
    known = np.isfinite(st.curv)
    assert known.sum() >= d - 1
    assert np.all(np.abs(st.curv[known] / exact[known] - 1.0) < 0.5), st.curv / exact


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_badly_scaled_least_squares_from_a_tiny_start(seed: int) -> None:
    """The engine on the full sum reaches the optimum (1e-6 of the gap) and says CONVERGED."""
    A, t = _badly_scaled(seed)
    n, d = A.shape
    x0 = 1e-3 * np.random.default_rng(100 + seed).standard_normal(d)
    oracle = CountingOracle(zoframe.FiniteSum(_least_squares(A, t), x0=x0, n=n))
    st = minimize_smooth(FullSum(oracle), x0, Region(), RefineSettings(estimate_noise=True), max_points=300 * (d + 1))
    assert st.status == CONVERGED, st.message
    assert _gap(A, t, st.x, x0) <= 1e-6


def test_zo_sgd_defaults_certify_a_badly_scaled_sum() -> None:
    """zo-sgd with its defaults, from a start of size 1e-3: within 1e-6 of the optimum and certified (success)."""
    A, t = _badly_scaled(2)
    n, d = A.shape
    x0 = 1e-3 * np.random.default_rng(102).standard_normal(d)
    res = zoframe.minimize(zoframe.FiniteSum(_least_squares(A, t), x0=x0, n=n), "zo-sgd", rng=0,
                           max_calls=300 * (d + 1) * n)  # fmt: skip
    assert _gap(A, t, res.x, x0) <= 1e-6
    assert res.success, res.message
