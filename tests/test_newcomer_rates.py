"""Rate studies: a default measure that sees every constraint, and a fit range that ends before a floor or a stop."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import zoframe
from zoframe.cli import main
from zoframe.errors import InvalidInputError
from zoframe_verify import checks
from zoframe_verify.rates import fit_loglog
from zoframe_verify.study import rate_study

A = np.array([0.3, -0.2, 0.9, 0.4])
X_STAR = A - (A.sum() - 1.0) / A.shape[0]  # min |x - a|^2 s.t. sum(x) = 1


def _columns(v: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return v[:, None][:, np.zeros(len(idx), dtype=np.intp)]


def projection_problem() -> zoframe.Constrained:
    """One loose inequality (x_0 <= 10) and one equality (sum x = 1)."""
    return zoframe.Constrained(
        lambda X: ((X - A) ** 2).sum(axis=1), lambda X, idx: _columns(X[:, 0] - 10.0, idx), 1, np.zeros(4),
        equality_fun=lambda X, idx: _columns(X.sum(axis=1) - 1.0, idx), m_eq=1,
    )  # fmt: skip


def test_the_penalty_measure_misses_equalities_and_the_kkt_measure_does_not() -> None:
    prob = projection_problem()
    assert checks.penalty_report(prob, X_STAR, beta=1.0, lam=1e-6).grad_g_norm > 0.3  # |grad f| at the KKT point
    assert checks.kkt_report(prob, X_STAR).measures()["kkt"] < 1e-6


def test_the_default_measure_of_a_problem_with_equalities_covers_them() -> None:
    rep = rate_study("adszog", projection_problem(), seeds=2, budget=40, n_boot=20)
    assert rep.config.measure == "kkt"
    assert any("equality constraint" in n and "penalty_grad_g_norm_sq" in n for n in rep.notes)
    with pytest.raises(InvalidInputError, match="--measure kkt"):
        rate_study("adszog", projection_problem(), seeds=1, budget=10, measure="penalty_grad_g_norm_sq")


def test_runs_that_stop_early_are_said_and_the_fit_ends_there() -> None:
    rep = rate_study("adszog", projection_problem(), seeds=2, budget=200, n_boot=20)
    stops = {r.nit for r in rep.runs}
    assert max(stops) < 200 and all(r.status == "CONVERGED" for r in rep.runs)
    assert rep.fits["iterations"].x_hi == pytest.approx(min(stops))
    assert any("stopped before their horizon (CONVERGED)" in n for n in rep.notes)
    assert "where the first run stopped" in rep.fit_ends["iterations"]
    assert any("too short to tell a rate" in n for n in rep.notes)


def test_find_floor_tells_a_floor_from_a_slow_power_law() -> None:
    from zoframe_verify.rates import find_floor

    x = np.geomspace(1.0, 1e3, 200)
    rng = np.random.default_rng(0)
    for slope in (-0.25, -0.5, -1.0, -3.0):
        noisy = x**slope * np.exp(0.05 * rng.standard_normal((3, x.shape[0])))
        assert find_floor(x, noisy) is None, slope
    floor = find_floor(x, np.maximum(x**-1.0, 1e-2)[None, :])  # flat from x = 100 on
    assert floor is not None and 60.0 < floor <= 100.0
    assert find_floor(x, np.where(x < 20, x**-1.0, 0.0)[None, :]) == pytest.approx(x[x >= 20][0])
    fit = fit_loglog(x, np.maximum(x**-1.0, 1e-2)[None, :], decades=1.0, x_max=floor)
    assert fit.x_hi == pytest.approx(floor) and fit.slope == pytest.approx(-1.0, abs=0.05)


def test_the_fit_of_a_run_at_its_floor_ends_where_the_floor_starts() -> None:
    """ZO-SGD on a well-conditioned quadratic: the gradient reaches its noise floor after ~50 of 1000 iterations;
    the average of the measure would then fall as 1/t from the first terms alone."""
    rep = rate_study("zo-sgd", "quadratic", problem_args={"dim": 2, "cond": 2}, seeds=2, budget=1000, n_boot=20,
                     params={"eta": 0.3, "q": 4})
    for axis in ("iterations", "calls"):
        assert "reaches a floor" in rep.fit_ends[axis]
    assert rep.fits["iterations"].x_hi < 150.0
    values = np.median([r.values for r in rep.runs], axis=0)
    assert values[500:].mean() > 0.1 * values[100:200].mean()  # truly flat after it: a floor, not a slow decay


def test_the_rate_command_prints_a_summary_and_the_report_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["rate", "zo-sgd", "quadratic", "--problem-arg", "dim=2", "--problem-arg", "cond=2", "--seeds", "2",
               "--budget", "1000", "-p", "eta=0.3", "-p", "q=4", "--bootstrap", "20", "--db", str(tmp_path / "r.sqlite"),
               "--out", str(tmp_path / "out"), "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "slope" in out and "fitted over" in out and "reaches a floor at iteration" in out
    assert f"full report: {tmp_path / 'out' / 'rate_report.md'}" in out
    assert "![" not in out and "| axis |" not in out  # the markdown stays in its file
    assert "| axis |" in (tmp_path / "out" / "rate_report.md").read_text()
