"""Rate fitting on synthetic curves, the theory table, and resumable rate studies."""

from __future__ import annotations

import json
from pathlib import Path
import sqlite3
from typing import Any

import numpy as np
import pytest

from zoframe.errors import InvalidInputError
from zoframe_verify import compare, fit_loglog, rate_study, running_curve, theory_for
from zoframe_verify.rates import SlopeFit


def test_running_curves() -> None:
    v = np.array([4.0, 2.0, 3.0, 1.0])
    np.testing.assert_array_equal(running_curve(v, "min"), [4.0, 2.0, 2.0, 1.0])
    np.testing.assert_allclose(running_curve(v, "avg"), [4.0, 3.0, 3.0, 2.5])
    with pytest.raises(InvalidInputError):
        running_curve(v, "max")


@pytest.mark.parametrize("exponent", [-0.5, -1.0, -2.0])
def test_fitter_recovers_known_exponents_with_noise(exponent: float) -> None:
    """Median over 20 synthetic studies (8 seeds, lognormal noise 0.3, random amplitudes per seed)."""
    rng = np.random.default_rng(7)
    x = np.geomspace(1, 1e4, 120)
    errors, covered = [], 0
    for _ in range(20):
        amp = np.exp(rng.normal(0.0, 0.5, size=(8, 1)))
        Y = amp * x**exponent * np.exp(rng.normal(0.0, 0.3, size=(8, x.size)))
        fit = fit_loglog(x, Y, decades=2.0, n_boot=300, rng=rng)
        errors.append(abs(fit.slope - exponent))
        covered += fit.lo <= exponent <= fit.hi
    assert float(np.median(errors)) < 0.02
    assert covered >= 14  # nominal 90% intervals: at least 70% coverage over 20 studies


def test_fitter_uses_only_the_last_decades_and_refuses_too_few_points() -> None:
    x = np.geomspace(1, 1e4, 200)
    y = np.where(x < 100, 1.0 / x**3, 1e-6 * 100 / x)  # a fast transient, then slope -1
    fit = fit_loglog(x, y[None, :], decades=2.0)
    assert abs(fit.slope + 1.0) < 1e-9 and fit.n_seeds == 1 and fit.lo == fit.hi == fit.slope
    assert fit.x_lo >= 100 * (1 - 1e-9)
    with pytest.raises(InvalidInputError, match="usable points"):
        fit_loglog(np.array([1.0, 2.0]), np.array([[1.0, 0.5]]))


def test_theory_table_and_verdicts() -> None:
    assert theory_for("zo-gda", "grad_g_norm_sq", "min").slope == -1.0  # type: ignore[union-attr]
    half = theory_for("zo-gda", "grad_g_norm", "min")
    assert half is not None and half.slope == -0.5 and "Theorem 1" in half.source
    assert theory_for("adszog", "penalty_grad_g_norm_sq", "avg").slope == -0.5  # type: ignore[union-attr]
    assert theory_for("zo-svrg-admm", "dist2", "min").slope == -1.0  # type: ignore[union-attr]
    assert theory_for("no-such-solver", "dist2", "min") is None
    fit = SlopeFit(-1.02, -1.05, -0.99, 0.0, 1.0, 10.0, 10, 5, 100, 0.9, 0.0, "iterations")
    assert compare(fit, -1.0) == "consistent"
    assert compare(fit, -0.5, tol=0.1) == "faster than proven"
    assert compare(fit, -2.0, tol=0.1) == "slower than proven"


def _created(db: Path) -> dict[int, float]:
    con = sqlite3.connect(db)
    try:
        return {int(s): float(c) for s, c in con.execute("SELECT seed, created FROM runs")}
    finally:
        con.close()


def test_interrupted_sweep_resumes_without_repeating_runs(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    kw: dict[str, Any] = dict(budget=200, params={"eta": 0.05}, problem_args={"dim": 5}, db=db, n_boot=100)
    part = rate_study("zo-sgd", "quadratic", seeds=2, **kw)
    assert (part.executed, part.reused) == (2, 0)
    before = _created(db)
    whole = rate_study("zo-sgd", "quadratic", seeds=4, **kw)
    assert (whole.executed, whole.reused) == (2, 2)
    after = _created(db)
    assert sorted(after) == [0, 1, 2, 3]
    assert all(after[s] == before[s] for s in before)  # seeds 0 and 1 were not run again
    # the stored runs of seeds 0, 1 are the ones the first part produced
    for a, b in zip(part.runs, whole.runs[:2]):
        np.testing.assert_array_equal(a.values, b.values)
    again = rate_study("zo-sgd", "quadratic", seeds=4, **kw)
    assert (again.executed, again.reused) == (0, 4)
    other = rate_study("zo-sgd", "quadratic", seeds=1, **{**kw, "params": {"eta": 0.02}})
    assert other.executed == 1  # other parameters: another study key


def test_rate_of_zo_sgd_on_a_quadratic_matches_the_proven_exponent(tmp_path: Path) -> None:
    """ZO-SGD on the smooth deterministic quadratic: (1/T) sum ||grad f||^2 = O(1/T) (slope -1)."""
    rep = rate_study(
        "zo-sgd", "quadratic", seeds=4, budget=1500, params={"eta": 0.05, "steps": "paper"}, problem_args={"dim": 8},
        db=tmp_path / "r.sqlite", out=tmp_path / "out", n_boot=300, tol=0.05,
    )
    assert rep.curve == "avg" and rep.config.measure == "grad_norm_sq"
    assert rep.theory is not None and rep.theory.slope == -1.0
    for axis in ("iterations", "calls"):
        fit = rep.fits[axis]
        assert fit.lo - 0.05 <= -1.0 <= fit.hi + 0.05, (axis, fit)
        assert rep.verdicts[axis] == "consistent"
    names = sorted(Path(f).name for f in rep.files)
    assert names == ["rate_calls.png", "rate_iterations.png", "rate_report.json", "rate_report.md"]
    data = json.loads((tmp_path / "out" / "rate_report.json").read_text())
    assert data["fits"]["iterations"]["slope"] == pytest.approx(rep.fits["iterations"].slope)
    assert "consistent" in (tmp_path / "out" / "rate_report.md").read_text()


def test_worker_processes_give_the_same_runs(tmp_path: Path) -> None:
    kw: dict[str, Any] = dict(seeds=2, budget=100, params={"eta": 0.05}, problem_args={"dim": 4}, n_boot=50)
    serial = rate_study("zo-sgd", "quadratic", db=tmp_path / "a.sqlite", **kw)
    parallel = rate_study("zo-sgd", "quadratic", db=tmp_path / "b.sqlite", workers=2, **kw)
    assert parallel.executed == 2
    for a, b in zip(serial.runs, parallel.runs):
        np.testing.assert_array_equal(a.values, b.values)
        np.testing.assert_array_equal(a.calls, b.calls)


@pytest.mark.slow
def test_dask_executor_gives_the_same_runs(tmp_path: Path) -> None:
    kw: dict[str, Any] = dict(seeds=2, budget=100, params={"eta": 0.05}, problem_args={"dim": 4}, n_boot=50)
    serial = rate_study("zo-sgd", "quadratic", db=tmp_path / "a.sqlite", **kw)
    dask = rate_study("zo-sgd", "quadratic", db=tmp_path / "b.sqlite", workers=2, executor="dask", **kw)
    for a, b in zip(serial.runs, dask.runs):
        np.testing.assert_array_equal(a.values, b.values)


def test_bad_study_arguments_fail_before_any_run(tmp_path: Path) -> None:
    db = tmp_path / "x.sqlite"
    with pytest.raises(InvalidInputError, match="unknown measure"):
        rate_study("zo-sgd", "quadratic", measure="no_such_measure", db=db)
    with pytest.raises(InvalidInputError, match="does not accept"):
        rate_study("zo-sgd", "kkt-qp", db=db)
    with pytest.raises(InvalidInputError, match="horizons"):
        rate_study("zo-sgd", "quadratic", horizons=[0, 10], db=db)
    assert not db.exists() or sqlite3.connect(db).execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0


def test_seeds_by_horizons_sweep(tmp_path: Path) -> None:
    rep = rate_study(
        "zo-sgd", "quadratic", seeds=2, horizons=[30, 100, 300, 1000], params={"eta": 0.05, "steps": "paper"},
        problem_args={"dim": 5}, db=tmp_path / "h.sqlite", decades=1.2, n_boot=100,
    )
    assert rep.horizons == (30, 100, 300, 1000) and len(rep.runs) == 8
    assert rep.fits["iterations"].n_points == 3  # horizons in the last 1.2 decades: 100, 300, 1000
    assert abs(rep.fits["iterations"].slope + 1.0) < 0.1


def test_a_sweep_interrupted_mid_way_keeps_its_finished_runs(tmp_path: Path) -> None:
    db = tmp_path / "int.sqlite"
    kw: dict[str, Any] = dict(seeds=3, budget=100, params={"eta": 0.05}, problem_args={"dim": 4}, db=db, n_boot=50)

    def interrupt(message: str) -> None:
        raise KeyboardInterrupt  # the user presses Ctrl-C right after the first run is stored

    with pytest.raises(KeyboardInterrupt):
        rate_study("zo-sgd", "quadratic", progress=interrupt, **kw)
    assert sorted(_created(db)) == [0]
    resumed = rate_study("zo-sgd", "quadratic", **kw)
    assert (resumed.executed, resumed.reused) == (2, 1)
    fresh = rate_study("zo-sgd", "quadratic", **{**kw, "db": tmp_path / "fresh.sqlite"})
    for a, b in zip(resumed.runs, fresh.runs):
        np.testing.assert_array_equal(a.values, b.values)  # resuming changes nothing


def test_rate_study_recovers_a_sublinear_exponent_of_the_last_iterates(tmp_path: Path) -> None:
    """ZO-SGD on (1/4) sum |x_i - c_i|^4: min_{s<=t} ||grad f||^2 ~ t^-3 (not the trivial -1 of averages)."""
    from zoframe_verify.problems import PowerSum

    exponent = PowerSum(p=4.0).grad_norm_sq_exponent()
    assert exponent == -3.0
    rep = rate_study(
        "zo-sgd", "power-sum", seeds=4, budget=3000, params={"eta": 0.1, "steps": "paper"}, measure="grad_norm_sq", curve="min",
        decades=1.0, theory=exponent, tol=0.1, db=tmp_path / "p.sqlite", n_boot=300,
    )
    fit = rep.fits["iterations"]
    assert fit.lo - 0.1 <= exponent <= fit.hi + 0.1, fit
    assert abs(fit.slope - exponent) < 0.1 and fit.residual < 0.05
    assert rep.verdicts == {"iterations": "consistent", "calls": "consistent"}
    slow = rate_study(
        "zo-sgd", "power-sum", seeds=2, budget=300, params={"eta": 0.1, "steps": "paper"}, measure="grad_norm_sq", curve="min",
        decades=1.0, theory=-1.0, db=tmp_path / "p.sqlite", n_boot=100,
    )
    assert slow.verdicts["iterations"] == "faster than proven"  # the comparison can fail


@pytest.mark.parametrize(
    ("solver", "problem", "params", "measure"),
    [
        ("zo-sgd", "quadratic", {"eta": 0.05, "steps": "paper"}, "fun_gap"),
        ("zo-sgd", "quadratic", {"eta": 0.05, "steps": "paper"}, "fun"),  # a column of the problem's own measures
        ("zo-gda", "saddle-quadratic", {"steps": "paper", "eta1": 0.05, "eta2": 0.5}, None),  # grad_g_norm_sq
        ("zo-svrg-admm", "lasso-composite", {"eta": 0.05, "rho": 1.0, "b": 4, "mu": 1e-4, "steps": "paper"}, None),  # dist2
        # the papers' fixed steps and penalty: steps="auto" adapts beta, which the measure takes as fixed
        ("dszog", "kkt-qp", {"eta_w": 0.05, "eta_p": 0.05, "M1": 20, "M2": 50, "M3": 50, "beta": 1.0, "lam": 1.0,
                             "steps": "paper"}, None),
    ],
)
def test_measures_of_every_kind_decrease_along_real_runs(
    solver: str, problem: str, params: dict[str, Any], measure: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZOFRAME_CACHE", str(tmp_path / "cache"))
    rep = rate_study(solver, problem, seeds=2, budget=150, params=params, measure=measure, curve="min",
                     db=tmp_path / "m.sqlite", decades=1.0, n_boot=50)
    for run in rep.runs:
        assert run.values.shape == (150,) and np.all(np.isfinite(run.values))
        assert run.values[-10:].min() < 0.5 * run.values[0], (rep.config.measure, run.values[[0, -1]])
    assert rep.fits["iterations"].slope < 0


def test_bootstrap_interval_resamples_whole_seeds() -> None:
    """The interval is the percentile interval of the slopes of medians of resampled seeds (whole curves)."""
    rng = np.random.default_rng(3)
    x = np.geomspace(1, 1e3, 40)
    Y = np.exp(rng.normal(0.0, 0.4, size=(5, 1))) * x**-0.5 * np.exp(rng.normal(0.0, 0.2, size=(5, 40)))
    fit = fit_loglog(x, Y, decades=3.0, n_boot=400, level=0.8, rng=11)
    lx, LY = np.log(x), np.log(Y)
    picks = np.random.default_rng(11).integers(0, 5, size=(400, 5))
    slopes = [np.polyfit(lx, np.median(LY[p], axis=0), 1)[0] for p in picks]
    lo, hi = np.quantile(slopes, [0.1, 0.9])
    assert fit.lo == pytest.approx(lo, rel=1e-9) and fit.hi == pytest.approx(hi, rel=1e-9)
    assert fit.lo - 1e-12 <= fit.slope <= fit.hi + 1e-12 and fit.lo < fit.hi
