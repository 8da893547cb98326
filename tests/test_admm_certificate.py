"""The composite certificate behind ``Result.success``: right points pass, wrong ones fail, in any units;
``zoframe verify`` reports the same certificate and its cvxpy reference agrees with it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import zoframe
from zoframe.certificate import certify
from zoframe.oracle import CountingOracle
from zoframe.penalties import L1
from zoframe_admm.problems import FusedLassoToy


def _lasso(scale: float) -> tuple[zoframe.Composite, np.ndarray]:
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(5)
    X = rng.standard_normal((50, 6))
    t = X @ np.array([1.0, -2.0, 0.0, 0.0, 0.5, 0.0]) + 0.1 * rng.standard_normal(50)
    x = cp.Variable(6)
    cp.Problem(cp.Minimize(0.5 * cp.sum_squares(X @ x - t) / 50 + 0.1 * cp.norm1(x))).solve(
        solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    Xs = scale * X

    def ls(P: np.ndarray, idx: np.ndarray) -> np.ndarray:
        r = P @ Xs[idx].T - t[idx]
        return 0.5 * r * r

    prob = zoframe.Composite(ls, x0=np.zeros(6), A=np.eye(6), B=[-np.eye(6)], c=np.zeros(6),
                             penalties=[L1(0.1 * scale)], n=50)
    xs = np.asarray(x.value) / scale
    return prob, np.where(np.abs(xs) < 1e-9 / scale, 0.0, xs)


def _perturbed(xs: np.ndarray, delta: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return xs + delta * float(np.linalg.norm(xs)) / np.sqrt(xs.size) * rng.standard_normal(xs.size)


@pytest.mark.parametrize("scale", [1e-2, 1.0, 1e2])
def test_the_solution_passes_and_a_wrong_point_fails_in_any_units(scale: float) -> None:
    prob, xs = _lasso(scale)
    o = CountingOracle(prob)
    good = certify(o, xs)  # y recovered from the coupling, lam fitted at the point
    assert good.passed and good.residual < 1e-8, good.message
    assert "lam fitted at the point" in good.message
    for delta in (1e-2, 1e-1):
        bad = certify(o, _perturbed(xs, delta))
        assert not bad.passed and bad.residual > 1e-2, bad.message
    # the verdict does not depend on the units: the same relative perturbation, the same residual
    near = certify(o, _perturbed(xs, 1e-5))
    assert near.passed and 1e-7 < near.residual < 1e-3


def test_a_wrong_run_multiplier_is_replaced_by_the_fitted_one_and_a_wrong_block_fails() -> None:
    prob, xs = _lasso(1.0)
    o = CountingOracle(prob)
    wrong_lam = certify(o, xs, outputs={"x": xs, "y0": xs, "lam": np.full(6, 3.0)})
    assert wrong_lam.passed and "fitted at the point" in wrong_lam.message
    wrong_y = certify(o, xs, outputs={"x": xs, "y0": xs + 0.05, "lam": np.zeros(6)})
    assert not wrong_y.passed and "coupling" in wrong_y.message


def test_fused_lasso_reference_point_passes_with_its_kinks_off_by_rounding() -> None:
    """The cvxpy solution of the split toy (two blocks, y_2 = D x): its zeros are ~1e-11, not 0."""
    cp = pytest.importorskip("cvxpy")
    toy = FusedLassoToy()
    prob, x = toy.cvxpy_model()
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    o = CountingOracle(toy)
    xs = np.asarray(x.value)
    assert certify(o, xs).passed
    assert not certify(o, _perturbed(xs, 1e-2)).passed


def test_verify_reports_the_runs_certificate_and_its_cvxpy_reference_agrees(tmp_path: Path) -> None:
    pytest.importorskip("cvxpy")
    from zoframe_verify.problems import LassoComposite
    from zoframe_verify.verify import verify

    prob = LassoComposite(dim=8, n=60, seed=2)
    res = zoframe.minimize(prob, "zo-svrg-admm", rng=0, max_calls=200_000)
    assert res.success and res.certificate is not None
    report = verify(prob, res, cache_dir=tmp_path)
    assert report.certificate is not None
    assert report.certificate.passed == res.certificate["passed"] is True
    assert report.certificate.residual == pytest.approx(float(res.certificate["residual"]), rel=1e-6, abs=1e-15)
    # the cvxpy reference agrees: the certified point is the reference's, and the reference's own point
    # (its blocks, its multipliers) passes the same certificate
    ref = report.reference
    assert ref is not None
    assert np.linalg.norm(res.x - ref.x) <= 1e-6 * np.linalg.norm(ref.x)
    o = CountingOracle(prob)
    at_ref = certify(o, ref.x, outputs={"x": ref.x, "y0": np.where(np.abs(ref.y[0]) < 1e-9, 0.0, ref.y[0]),
                                        "lam": ref.duals})
    assert at_ref.passed, at_ref.message
    # and a point the reference says is wrong is refused by both
    wrong = res.x + 0.05
    assert not certify(o, wrong).passed
    assert not verify(prob, {"x": wrong}, reference=ref).certificate.passed  # type: ignore[union-attr]
