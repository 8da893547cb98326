"""The precision phase is invariant to the scaling of the variables: a problem whose variables are multiplied
by constants from 1e-3 to 1e4 (bounds and start with them) is solved as precisely, and in about as many
evaluations, as the unscaled one. The problems here are made for these tests (not from any suite)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.optimize import minimize as scipy_minimize

import zoframe
from zoframe_constrained.precision import variable_scales

SEEDS = (0, 1, 2)
#: the unscaled problem, then variables multiplied by constants from 1e-3 to 1e4
SCALINGS = ((1.0, 1.0, 1.0, 1.0), (1e-3, 1e2, 1e4, 10.0), (1e4, 1e-3, 1e2, 1e3))
X0 = np.array([-1.5, 3.0, 2.0, 1.5])
LO = np.array([-3.0, -np.inf, -np.inf, -np.inf])
HI = np.array([3.0, np.inf, np.inf, np.inf])


def _f(X: np.ndarray) -> np.ndarray:
    out: np.ndarray = (X[:, 0] - 2.0) ** 2 + 2.0 * (X[:, 1] - 1.5) ** 2 + (X[:, 2] + 0.5) ** 4 + X[:, 0] * X[:, 1] + np.exp(
        0.3 * X[:, 3]
    ) - X[:, 3]
    return out


def _g(X: np.ndarray) -> np.ndarray:
    return np.stack(
        [X[:, 0] ** 2 + X[:, 1] ** 2 + X[:, 2] ** 2 - 4.0, X[:, 2] - X[:, 0] - X[:, 1] + 0.5, X[:, 3] + X[:, 0] - 3.0],
        axis=1,
    )


def scaled(D: tuple[float, ...]) -> Any:
    """The problem in ``y = D x``: a ball, a halfspace and a coupling constraint (two of them active at the
    solution), a box on the first variable only, a quartic (flat) term."""
    s = np.asarray(D)
    return zoframe.Constrained(
        lambda Y: _f(Y / s)[:, None], lambda Y, idx: _g(Y / s)[:, idx], m=3, x0=s * X0, bounds=(s * LO, s * HI)
    )


def reference() -> float:
    """f* of the unscaled problem by scipy's SLSQP with exact-arithmetic-free but tight settings, from two starts."""
    best = np.inf
    for start in (X0, np.zeros(4)):
        r = scipy_minimize(
            lambda x: float(_f(x[None, :])[0]), start, method="SLSQP", bounds=list(zip(LO, HI, strict=True)),
            constraints=[{"type": "ineq", "fun": lambda x: -_g(x[None, :])[0]}], options={"ftol": 1e-14, "maxiter": 500},
        )  # fmt: skip
        if r.success and float(_g(r.x[None, :]).max()) <= 1e-9:
            best = min(best, float(r.fun))
    assert np.isfinite(best)
    return best


@pytest.mark.parametrize("solver", ["adszog", "dszog"])
def test_scaled_variables_cost_about_the_same(solver: str) -> None:
    f_star = reference()
    evals = {}
    for D in SCALINGS:
        runs = [zoframe.minimize(scaled(D), solver, rng=seed, max_calls=20_000, record_every=0) for seed in SEEDS]
        errs = [abs(float(r.fun) - f_star) / max(1.0, abs(f_star)) for r in runs]
        assert np.median(errs) <= 1e-7, (D, errs)
        assert sum(r.success for r in runs) >= 2, (D, [r.message for r in runs])
        for r, e in zip(runs, errs, strict=True):  # a certified point is the solution (no false claim)
            assert not r.success or e <= 1e-6
        evals[D] = float(np.median([r.nfev for r in runs]))
    base = evals[SCALINGS[0]]
    for D in SCALINGS[1:]:
        assert evals[D] <= 3.0 * base, evals


def test_the_scales_follow_the_box_and_the_start() -> None:
    """|x0_i| without a floor of 1; an entry at 0 gets the typical size of the others (the median of the nonzero ones);
    an entry far below that typical size gets 1e-4 of it; a finite box narrower than the magnitude gives its width."""
    x0 = np.array([0.0, 5000.0, -3e-4, 2.0, 7.0, 0.05, 1e-12])
    lo = np.array([-1.0, 100.0, -1e-3, -np.inf, 6.0, -np.inf, -np.inf])
    hi = np.array([1.0, 10_000.0, 1e-3, 4.0, np.inf, np.inf, np.inf])
    c = variable_scales(x0, lo, hi)
    typical = float(np.median(np.abs(x0[x0 != 0])))  # 1.025 (the six nonzero entries)
    # 0: the typical size (the box of width 2 is wider); 5000 (the box is wider); 2e-3, the box, narrower than 3e-4?
    # no: |x0| = 3e-4 is narrower than the width 2e-3, so the magnitude; 2; 7; 0.05 (below 1: no floor of 1);
    # 1e-12: at least 1e-4 of the typical size
    np.testing.assert_allclose(c, [typical, 5000.0, 3e-4, 2.0, 7.0, 0.05, 1e-4 * typical])
