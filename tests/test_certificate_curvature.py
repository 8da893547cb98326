"""The KKT certificate's differences and references: the multipliers' share of the Lagrangian's curvature, and
the three-point one-sided difference at a bound.

At HS104's optimum the objective does not depend on x3 and x4, and the active constraint that does is stationary
in them (d g3 / d x3 = 0 there): the residual of those coordinates is the differences' truncation (2e-8), and a
reference without the constraints' curvature was the rounding floor alone, so the certificate refused the optimum
(residual 0.0116) that the precision phase had reached to 1e-10. The test's power is kept: a point off the optimum
along the objective's coordinates is still refused."""

from __future__ import annotations

import warnings

import numpy as np

import zoframe
from zoframe.certificate import certify
from zoframe.imperfect import noisy
from zoframe.oracle import CountingOracle
from zoframe_constrained.suite import HS


def test_an_optimum_stationary_in_a_constraint_is_certified() -> None:
    tp = HS["hs104"]()
    prob, f_star = tp.problem(), float(tp.f_star)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = zoframe.minimize(prob, "adszog", rng=0, max_calls=100 * prob.dim * (1 + prob.m), record_every=0,
                               progress=False)  # fmt: skip
    fx = float(CountingOracle(prob).monitor.objective(np.asarray(res.x)).mean())
    assert abs(fx - f_star) <= 1e-8 * max(1.0, abs(f_star))
    assert res.status.name == "CONVERGED"
    assert res.success, res.message


def test_a_point_off_the_optimum_is_still_refused() -> None:
    """The same optimum with x1 and x2 (the objective's coordinates) lowered by 1 % (the constraints that hold them
    loosen: the point stays feasible): the residual in x1, x2 is of the gradient's size, and no curvature of the
    Lagrangian hides it."""
    tp = HS["hs104"]()
    prob = tp.problem()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = zoframe.minimize(prob, "adszog", rng=0, max_calls=100 * prob.dim * (1 + prob.m), record_every=0,
                               progress=False)  # fmt: skip
    x = np.asarray(res.x).copy()
    x[:2] *= 0.99
    oracle = CountingOracle(prob)
    assert float(oracle.monitor.constraints(x).max()) <= 1e-12
    cert = certify(CountingOracle(prob), x, tol=1e-3)
    assert not cert.passed, cert.message


def test_a_slope_at_a_bound_is_not_read_over_a_step_that_crosses_the_minimiser() -> None:
    """``sum (x - t)^4 + (x - t)^2`` in the box [-1, 1]^4 with ``t_4 = -0.993``: at ``x = t`` but ``x_4 = -1`` (the
    bound, 0.007 below the minimiser) ``df/dx_4 = -0.014``, which no bound multiplier can hold. Under relative
    noise 1e-4 of ``|f| = 5e-5`` the certificate's step is ``(sigma / |f|)^(1/3) = 0.036``, and a one-sided
    difference over it read a positive slope: certified (a false claim, made by ``adszog`` on such a problem).
    The three-point one-sided difference reads the slope to second order: refused, noisy or not."""
    t = np.array([0.68, 0.24, -0.48, -0.993])

    def f(X: np.ndarray) -> np.ndarray:
        out: np.ndarray = ((X - t) ** 4 + (X - t) ** 2).sum(axis=1)
        return out

    def g(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        out: np.ndarray = np.repeat((X.sum(axis=1) - 0.5)[:, None], idx.shape[0], axis=1)
        return out

    clean = zoframe.Constrained(f, g, m=1, x0=np.zeros(4), bounds=(-1.0, 1.0))
    x = t.copy()
    x[3] = -1.0
    for seed in range(3):
        cert = certify(CountingOracle(noisy(clean, 1e-4, kind="relative", seed=seed)), x, tol=1e-3)
        assert not cert.passed, (seed, cert.message)
    clean_cert = certify(CountingOracle(clean), x, tol=1e-3)
    assert not clean_cert.passed, clean_cert.message


def test_at_a_vertex_of_the_box_the_noise_is_measured_on_a_ray() -> None:
    """HS013 from its start projected onto the box: the vertex (0, 0), where ``grad f = (-4, 0)`` and no bound
    multiplier holds the first entry. No line through a vertex stays in the box, and the noise was taken to be the
    rounding: under relative noise 1e-4 a one-sided difference over ``1.2e-4`` is off by the gradient's size and the
    point was certified (seed 1). A ray into the box measures the noise (within a factor 3 of ``1e-4 |f| = 4e-4``)
    and the claim is refused."""
    tp = HS["hs013"]()
    clean = tp.problem()
    x = np.zeros(2)
    for seed in range(3):
        cert = certify(CountingOracle(noisy(clean, 1e-4, kind="relative", seed=seed)), x, tol=1e-3)
        assert not cert.passed, (seed, cert.message)
        assert 4e-4 / 3 <= cert.noise <= 4e-4 * 3, (seed, cert.noise)
