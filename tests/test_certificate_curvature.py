"""The KKT certificate's per-coordinate reference includes the multipliers' share of the Lagrangian's curvature.

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
