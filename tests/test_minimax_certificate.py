"""The minimax certificate (zoframe/certificate/minimax.py): a certified inner maximum, concavity in y, grad Phi by Danskin.

The problems here have a closed-form ``y*(x)``, so the verdicts are checked against exact stationarity.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.optimize import minimize as sp_minimize

import zoframe
from zoframe.certificate import certify
from zoframe.certificate.minimax import concavity_gap, inner_maximum
from zoframe.oracle import CountingOracle
from zoframe.refine import RefineSettings, Region, minimize_smooth
from zoframe.sets import Ball, Box, Simplex
from zoframe_minimax.problems import NCSC


def _stationary_point(p: NCSC) -> np.ndarray:
    r = sp_minimize(lambda x: (p.g(x), p.grad_g(x)), p.x0, jac=True, method="L-BFGS-B",
                    options={"gtol": 1e-13, "ftol": 1e-16, "maxiter": 5000})  # fmt: skip
    out: np.ndarray = r.x
    return out


@pytest.mark.parametrize("y_set", [None, "box", "ball", "simplex"])
def test_passes_at_a_stationary_point_and_fails_near_it(y_set: str | None) -> None:
    p = NCSC(d1=6, d2=3, kappa=10, y_set_name=y_set, seed=5)
    xs = _stationary_point(p)
    assert np.linalg.norm(p.grad_g(xs)) < 1e-8
    o = CountingOracle(p)
    good = certify(o, xs, outputs={"y": p.y_star(xs)})
    assert good.passed and good.kind == "minimax", good.message
    bad_x = xs + 1e-2 * np.sign(p.grad_g(xs + 1e-2))
    bad = certify(o, bad_x, outputs={"y": p.y_star(bad_x)})
    assert not bad.passed and "grad Phi(x) by Danskin" in bad.message
    assert o.calls == 0 and o.calls_by_purpose["certify"] == good.evaluations + bad.evaluations


def test_the_runs_y_is_not_trusted() -> None:
    """At a stationary ``x`` with a ``y`` far from ``y*(x)``, the certificate solves the inner maximum itself: the
    verdict is that of ``x`` (Danskin), and the message says how far the run's ``y`` was."""
    p = NCSC(d1=6, d2=3, kappa=10, seed=5)
    xs = _stationary_point(p)
    c = certify(CountingOracle(p), xs, outputs={"y": p.y_star(xs) + 3.0})
    assert c.passed, c.message
    assert "the run's y is 5.2 from y*" in c.message


def test_the_same_verdict_at_every_scale_of_the_values() -> None:
    """``F -> c F`` for ``c`` from 1e-6 to 1e6: the same verdicts and relative residuals (within a factor 10)."""

    class Times:
        kind = "minimax"

        def __init__(self, c: float) -> None:
            self.p, self.c = NCSC(d1=5, d2=3, kappa=10, seed=2), c
            self.dim, self.dim_y, self.n, self.x0, self.y0, self.y_set = 5, 3, 1, self.p.x0, self.p.y0, None

        def values(self, X: Any, Y: Any, idx: Any) -> Any:
            return self.c * self.p.values(X, Y, idx)

    xs = _stationary_point(NCSC(d1=5, d2=3, kappa=10, seed=2))
    near = xs + 3e-5
    res = {c: (certify(CountingOracle(Times(c)), xs), certify(CountingOracle(Times(c)), near)) for c in (1e-6, 1.0, 1e6)}
    assert all(a.passed for a, _ in res.values())
    assert all(b.passed for _, b in res.values()) or not any(b.passed for _, b in res.values())
    r = [b.residual for _, b in res.values()]
    assert max(r) < 10 * min(r), r


def test_curvature_from_the_coupling_alone() -> None:
    """``F = x^T A y - |y|^2 / 2``: ``F`` is linear in ``x``, so its own curvature in ``x`` is 0 and the reference comes
    from ``Phi``'s (``|A^T x|^2 / 2``): ``x = 0`` passes, ``x = 1e-2`` does not."""
    A = np.random.default_rng(0).standard_normal((4, 3))
    p = zoframe.Minimax(lambda X, Y: np.einsum("ki,ij,kj->k", X, A, Y) - 0.5 * (Y * Y).sum(axis=1),
                        x0=np.ones(4), y0=np.zeros(3))  # fmt: skip
    o = CountingOracle(p)
    assert certify(o, np.zeros(4), outputs={"y": np.ones(3)}).passed
    c = certify(o, np.full(4, 1e-2), outputs={"y": np.zeros(3)})
    assert not c.passed and c.residual > 1e-3


def test_not_concave_in_y_is_said_and_never_a_success() -> None:
    convex = zoframe.Minimax(lambda X, Y: (X * X).sum(axis=1) + (Y * Y).sum(axis=1), x0=np.ones(2), y0=np.full(2, 0.1))
    c = certify(CountingOracle(convex), np.zeros(2), outputs={"y": np.full(2, 0.1)})
    assert not c.passed and "not concave" in c.message
    saddle = zoframe.Minimax(lambda X, Y: (X * X).sum(axis=1) + Y[:, 0] ** 2 - Y[:, 1] ** 2, x0=np.ones(2),
                             y0=np.zeros(2), y_set=Box(2, -1.0, 1.0))  # fmt: skip
    c = certify(CountingOracle(saddle), np.zeros(2), outputs={"y": np.zeros(2)})
    assert not c.passed and "not concave" in c.message


def test_a_success_at_a_point_where_the_inner_problem_is_not_concave_is_refused() -> None:
    """A solver claiming convergence at such a point gets no success (the certificate decides)."""
    from dataclasses import dataclass
    from typing import ClassVar

    from zoframe.solver import SolverBase

    @dataclass(frozen=True)
    class ClaimsAtOnce(SolverBase):
        problem_kinds: ClassVar[frozenset[str]] = frozenset({"minimax"})

        @dataclass(frozen=True)
        class State:
            x: np.ndarray

        def init(self, oracle: Any, x0: np.ndarray, rng: np.random.Generator) -> Any:
            return self.State(np.zeros_like(x0))

        def step(self, oracle: Any, state: Any, rng: np.random.Generator) -> Any:
            return state

        def outputs(self, state: Any) -> dict[str, np.ndarray]:
            return {"x": state.x, "y": np.full(2, 0.1)}

        def terminate(self, state: Any) -> str | None:
            return "claimed"

    convex = zoframe.Minimax(lambda X, Y: (X * X).sum(axis=1) + (Y * Y).sum(axis=1), x0=np.ones(2), y0=np.full(2, 0.1))
    res = zoframe.minimize(convex, ClaimsAtOnce(), rng=0, max_iter=3)
    assert res.status is zoframe.Status.CONVERGED and not res.success
    assert "not concave" in res.message


def test_inner_maximum_and_concavity_gap() -> None:
    c = np.array([0.5, -0.2, 0.9])
    ev = lambda x, Y: -((Y - c) ** 2).sum(axis=1) + float(x @ x)  # noqa: E731
    for ys, sol in ((None, c), (Box(3, 0.0, 0.6), np.clip(c, 0.0, 0.6)), (Ball(3, 0.5), 0.5 * c / np.linalg.norm(c)),
                    (Simplex(3), Simplex(3).project(c))):  # fmt: skip
        r = inner_maximum(ev, np.ones(2), np.zeros(3) if ys is None or not isinstance(ys, Simplex) else np.full(3, 1 / 3),
                          ys)  # fmt: skip
        assert r.found and np.abs(r.y - sol).max() < 1e-8, (ys, r.message)
    run = inner_maximum(lambda x, Y: (Y * Y).sum(axis=1), np.ones(2), np.full(3, 0.1), None, max_points=3000)
    assert not run.found and run.outcome in ("runaway", "budget")
    gap, noise, _ = concavity_gap(ev, np.ones(2), c, None, np.eye(3), 1e-2)
    assert gap < 0
    gap, noise, _ = concavity_gap(lambda x, Y: (Y * Y).sum(axis=1), np.ones(2), c, None, np.eye(3), 1e-2)
    assert gap > 16 * noise


def test_verify_reports_the_same_certificate(tmp_path: Path) -> None:
    from zoframe_verify import verify

    p = NCSC(d1=5, d2=3, kappa=10, seed=2)
    res = zoframe.minimize(p, "zo-gda", rng=0, max_calls=200_000)
    assert res.success
    rep = verify(p, res)
    assert rep.certificate is not None
    assert rep.certificate.passed == res.certificate["passed"]
    assert rep.certificate.residual == pytest.approx(float(res.certificate["residual"]), rel=1e-6, abs=1e-12)
    assert rep.certificate.kind == "minimax"


# ----------------------------------------------------------------------------------------------- the engine
def test_projected_gradient_is_in_the_units_of_the_gradient() -> None:
    """zoframe.refine on a small ball (radius 1e-2) with a large gradient: ``x - P(x - g)`` is at most the ball's
    diameter and let a point 1e-5 off the answer pass the relative test; the limit ``t -> 0`` does not."""
    c = np.array([-1.0, -2.0, 3.0])
    fun = lambda X: 1e3 * ((X - c) ** 2).sum(axis=1)  # noqa: E731
    fs = Ball(3, 0.01)
    o = CountingOracle(zoframe.FiniteSum(fun, x0=np.array([0.0, 0.0, -0.01]), feasible_set=fs))
    from zoframe.refine import FullSum

    st = minimize_smooth(FullSum(o), np.array([0.0, 0.0, -0.01]), Region.of(fs, 3), RefineSettings(rtol=1e-6),
                         max_points=5000)  # fmt: skip
    assert np.abs(st.x - 0.01 * c / np.linalg.norm(c)).max() < 1e-9
