"""The deterministic refinement engine (zoframe.refine): quasi-Newton on difference gradients."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.optimize import brentq

import zoframe
from zoframe.oracle import CountingOracle
from zoframe.refine import (
    CONVERGED,
    NOISE_LIMITED,
    FullSum,
    RefineSettings,
    Region,
    minimize_smooth,
    qn_start,
    qn_step,
    variable_scales,
)
from zoframe.sets import Ball, Box, Simplex


def _run(fun: Any, x0: Any, fs: Any = None, settings: RefineSettings | None = None) -> tuple[Any, CountingOracle]:
    x0 = np.asarray(x0, dtype=np.float64)
    oracle = CountingOracle(zoframe.FiniteSum(fun, x0=x0, feasible_set=fs))
    st = minimize_smooth(FullSum(oracle), x0, Region.of(fs, x0.shape[0]), settings or RefineSettings(), max_points=50_000)
    return st, oracle


_XS = brentq(lambda x: 2 * (x - 1) + 2 * x / (1 + x * x), 0, 1)


@pytest.mark.parametrize("s", [1e-2, 1.0, 1e2])
@pytest.mark.parametrize("where", ["values", "variables"])
def test_scale_free_on_a_nonconvex_sum(s: float, where: str) -> None:
    d = 20
    if where == "values":
        fun = lambda X: s * ((X - 1) ** 2 + np.log1p(X**2)).sum(axis=1)  # noqa: E731
        fstar, xstar = s * d * ((_XS - 1) ** 2 + np.log1p(_XS**2)), _XS
    else:
        fun = lambda X: ((X / s - 1) ** 2 + np.log1p((X / s) ** 2)).sum(axis=1)  # noqa: E731
        fstar, xstar = d * ((_XS - 1) ** 2 + np.log1p(_XS**2)), _XS * s
    st, oracle = _run(fun, np.zeros(d))
    assert st.status == CONVERGED
    assert abs(st.value - fstar) <= 1e-12 * abs(fstar)
    np.testing.assert_allclose(st.x, xstar, rtol=1e-6)
    assert oracle.calls <= 600  # about 12 difference gradients of 20 variables


def test_rosenbrock_and_an_ill_conditioned_quadratic() -> None:
    rosen = lambda X: (100 * (X[:, 1:] - X[:, :-1] ** 2) ** 2 + (1 - X[:, :-1]) ** 2).sum(axis=1)  # noqa: E731
    st, _ = _run(rosen, np.full(5, -1.2))
    assert st.status == CONVERGED and st.value < 1e-12
    D = np.logspace(0, 6, 10)
    st, _ = _run(lambda X: ((X - 1) ** 2 * D).sum(axis=1), np.zeros(10))
    assert st.status == CONVERGED and st.value < 1e-16


def test_sets() -> None:
    st, _ = _run(lambda X: ((X - 1) ** 2).sum(axis=1), np.zeros(5), Box(5, -1.0, 0.5))
    assert st.status == CONVERGED and np.allclose(st.x, 0.5)
    st, _ = _run(lambda X: ((X - 3) ** 2).sum(axis=1), np.zeros(4), Ball(4, 1.0))
    assert st.status == CONVERGED and np.allclose(st.x, 0.5, atol=1e-8)
    target = np.array([0.5, 0.3, 0.9, -0.2])  # the minimiser is its projection onto the simplex: (4, 1, 10, 0) / 15
    st, _ = _run(lambda X: ((X - target) ** 2).sum(axis=1), np.full(4, 0.25), Simplex(4))
    assert st.status == CONVERGED and np.allclose(st.x, np.array([4.0, 1.0, 10.0, 0.0]) / 15.0, atol=1e-8)


def _hashed_noise(X: np.ndarray, level: float) -> np.ndarray:
    v = np.sin(X @ (np.arange(1, X.shape[1] + 1) * 1e4 + 0.5) * 977.0) * 43758.5453
    return level * np.sqrt(12.0) * (v - np.floor(v) - 0.5)


@pytest.mark.parametrize("level", [1e-10, 1e-6, 1e-4])
def test_noise_limited_near_the_best_the_noise_allows(level: float) -> None:
    fun = lambda X: ((X - 1) ** 2).sum(axis=1) + 1.0 + _hashed_noise(X, level)  # noqa: E731
    st, _ = _run(fun, np.zeros(10), settings=RefineSettings(noise=level))
    assert st.status == NOISE_LIMITED
    assert abs(st.value - 1.0) <= 10 * level  # f within a few noise levels of f*
    assert float(np.abs(st.x - 1).max()) <= 10 * np.sqrt(level)


def test_variable_scales_have_no_floor_of_one() -> None:
    s = variable_scales(np.array([1e-3, 2e-3, 0.0, 5e3]), Region())
    assert s[0] == 1e-3 and s[1] == 2e-3 and s[3] == 5e3 and 1e-3 < s[2] < 5e3


def test_forward_differences_after_the_start_while_the_gradient_is_large() -> None:
    """The start's central differences (2 d points, for the curvature) do not commit the engine to central ones:
    far from the minimum an iteration costs d points plus its trial points, central ones only near it."""
    d = 10
    A = np.diag(np.linspace(1.0, 30.0, d))
    x0 = np.full(d, 5.0)
    st, _ = _run(lambda X: 0.5 * np.einsum("ij,jk,ik->i", X - 1.0, A, X - 1.0), x0)
    assert st.status == CONVERGED and np.allclose(st.x, 1.0, atol=1e-8)
    seen: list[bool] = []
    o2 = CountingOracle(zoframe.FiniteSum(lambda X: 0.5 * np.einsum("ij,jk,ik->i", X - 1.0, A, X - 1.0), x0=x0))
    fn, settings = FullSum(o2), RefineSettings()
    s = qn_start(fn, x0, Region(), settings)
    assert s.central and s.points == 2 * d + 1
    while not s.done:
        before = s.points
        s = qn_step(fn, s, Region(), settings)
        seen.append(s.central)
        if not s.central:
            assert s.points - before <= d + 12  # d forward points plus the trial points
    assert seen[0] is False and seen[-1] is True  # forward first, central at the end


def test_a_narrow_box_does_not_make_a_large_gradient_look_small() -> None:
    """In a box of width 1e-2 the projected gradient |x - P(x - g)| is at most 1e-2 whatever g: the switch to central
    differences looks at the free variables' gradient, so the step to the bound is followed by forward differences
    (one iteration: 2 d + 1 points to start, one trial point, d forward points)."""
    d = 20
    fun = lambda X: (((X / 0.01 - 1.0) ** 2) + np.log1p((X / 0.01) ** 2)).sum(axis=1)  # noqa: E731
    st, oracle = _run(fun, np.zeros(d), Box(d, -0.01, 0.003))
    assert st.status == CONVERGED and np.allclose(st.x, 0.003)
    assert st.it == 1 and oracle.calls == (2 * d + 1) + 1 + d
