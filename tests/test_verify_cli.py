"""The ``zoframe verify`` and ``zoframe rate`` commands, and ``zoframe solve ... --verify``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from zoframe.cli import main
from zoframe.registry import default_registry


@pytest.fixture(autouse=True)
def _cache_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZOFRAME_CACHE", str(tmp_path / "cache"))


def test_commands_and_problems_are_registered() -> None:
    reg = default_registry()
    assert {"rate", "verify"} <= set(reg.commands())
    assert {"kkt-qp", "saddle-quadratic", "lasso-composite"} <= set(reg.problems())


def test_verify_a_saved_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    argv = ["solve", "quadratic", "--solver", "zo-sgd", "--max-iter", "200", "--no-progress",
            "-p", "eta=0.05", "-p", "steps=paper", "--problem-arg", "dim=6", "-o", str(out)]
    assert main(argv) == 0
    capsys.readouterr()
    code = main(["verify", str(out), "--problem", "quadratic", "--problem-arg", "dim=6", "--json"])
    text = capsys.readouterr().out
    data = json.loads(text[text.index("{"):])
    assert data["kind"] == "finite_sum" and data["reference_source"].startswith("known_solution")
    assert data["measures"]["grad_norm"] < 0.1 and data["measures"]["dist_to_reference"] < 0.1
    # the verdict compares each measure with its stated tolerance; the exit status follows it
    assert data["tolerances"] == {"stationarity": 1e-3, "feasibility": 1e-3, "gap": 1e-3, "certificate": 1e-3}
    checks = {c["name"]: c for c in data["checks"]}
    assert set(checks) == {"grad_norm", "|objective_gap|", "certificate"}  # the certificate behind Result.success
    assert checks["certificate"]["value"] == data["certificate"]["residual"]
    assert checks["grad_norm"]["passed"] == (data["measures"]["grad_norm"] <= 1e-3)
    assert data["verdict"] == ("PASS" if all(c["passed"] for c in checks.values()) else "FAIL")
    assert code == (0 if data["verdict"] == "PASS" else 1)
    loose = ["--tol-stationarity", "0.1", "--tol-gap", "0.1", "--tol-certificate", "0.1"]
    assert main(["verify", str(out), "--problem", "quadratic", "--problem-arg", "dim=6", *loose]) == 0
    text = capsys.readouterr().out
    assert "tolerances: stationarity 0.1, feasibility 0.001, objective gap 0.1" in text
    assert "certificate 0.1" in text
    assert "verdict: PASS (grad_norm" in text
    assert main(["verify", str(out), "--problem", "quadratic", "--problem-arg", "dim=6", "--tol-stationarity", "1e-12"]) == 1
    assert "verdict: FAIL (grad_norm" in capsys.readouterr().out


def test_verify_a_run_saved_from_python(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A Result saved with Result.save (no metadata) is verified with --problem and --problem-arg."""
    import zoframe

    prob = default_registry().make_problem("quadratic", dim=4)
    res = zoframe.minimize(prob, "zo-sgd", rng=0, max_iter=400)
    res.save(str(tmp_path / "mine"))
    code = main(["verify", str(tmp_path / "mine"), "--problem", "quadratic", "--problem-arg", "dim=4",
                 "--tol-stationarity", "0.05", "--tol-gap", "0.05"])
    out = capsys.readouterr().out
    assert "run of zo-sgd" in out and "verification report: quadratic (finite_sum)" in out
    assert code == 0 and "verdict: PASS" in out


def test_verify_reads_the_problem_from_the_run_or_needs_its_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main(["solve", "quadratic", "--max-iter", "5", "--no-progress", "-p", "steps=paper", "-o", str(out)]) in (0, 1)
    capsys.readouterr()
    # `zoframe solve -o` records the problem and its arguments; 5 iterations are far from stationary: FAIL
    assert main(["verify", str(out)]) == 1
    text = capsys.readouterr().out
    assert "verification report: quadratic" in text and "verdict: FAIL (grad_norm" in text
    import zoframe
    from zoframe_basic.problems import Quadratic

    bare = tmp_path / "bare"
    zoframe.minimize(Quadratic(), "zo-sgd", steps="paper", rng=0, max_iter=5).save(str(bare))  # saved without metadata
    assert main(["verify", str(bare)]) == 2
    assert "--problem NAME" in capsys.readouterr().err
    assert main(["verify", str(tmp_path / "missing"), "--problem", "quadratic"]) == 2
    assert "no saved run" in capsys.readouterr().err


def test_solve_with_verify_prints_the_report(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["solve", "quadratic", "--solver", "zo-sgd", "--max-iter", "100", "--no-progress", "-p", "eta=0.05",
            "--verify"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "verification report: quadratic (finite_sum), solver" in out and "grad_norm" in out


def test_rate_command_writes_a_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZOFRAME_PROGRESS", "always")  # captured stderr is no terminal: draw the bar all the same
    argv: list[Any] = ["rate", "zo-sgd", "quadratic", "--seeds", "2", "--budget", "300", "-p", "eta=0.05",
                       "--problem-arg", "dim=5", "--db", str(tmp_path / "db.sqlite"), "--out", str(tmp_path / "rep"),
                       "--bootstrap", "100", "--json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["executed"] == 2 and data["curve"] == "avg"
    # a progress bar over the iterations of all runs, and the paths of the files written
    assert "zo-sgd on quadratic: 2 runs" in captured.err and "600/600" in captured.err
    assert "run seed=1 horizon=300 done (2/2)" in captured.err  # the notices, through logging
    assert f"wrote {tmp_path / 'db.sqlite'}" in captured.err
    assert f"wrote {tmp_path / 'rep' / 'rate_report.md'}" in captured.err
    assert set(data["fits"]) == {"iterations", "calls"}
    assert (tmp_path / "rep" / "rate_report.md").is_file() and (tmp_path / "rep" / "rate_iterations.png").is_file()
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["reused"] == 2


def test_verify_reads_the_problem_from_the_saved_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(["solve", "kkt-qp", "--solver", "dszog", "--max-iter", "50", "--no-progress", "-p", "M1=5",
                 "-p", "M2=5", "-p", "M3=5", "--problem-arg", "m=12", "-o", str(out)]) in (0, 1)
    summary = json.loads((tmp_path / "run.json").read_text())
    summary.update(problem="kkt-qp", problem_args={"m": 12})  # what a run that records its problem holds
    (tmp_path / "run.json").write_text(json.dumps(summary))
    capsys.readouterr()
    assert main(["verify", str(out), "--json"]) in (0, 1)  # 50 iterations: the verdict may go either way
    text = capsys.readouterr().out
    data = json.loads(text[text.index("{"):])
    assert data["kind"] == "constrained" and data["problem"] == "kkt-qp"
    assert {"eps1", "eps2", "eps3", "objective_gap", "ref_eps1"} <= set(data["measures"])
    assert data["reference"]["status"] == "optimal"


def test_rate_writes_under_zoframe_out_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ZOFRAME_OUT", raising=False)
    argv = ["rate", "zo-sgd", "quadratic", "--seeds", "2", "--budget", "200", "-p", "eta=0.05", "--bootstrap", "50",
            "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr()
    assert "%|" not in out.err  # --no-progress: no bar
    base = tmp_path / "zoframe-out"
    for f in (base / "rate_runs.sqlite", base / "rate_report" / "rate_report.md", base / "rate_report" / "rate_calls.png"):
        assert f.is_file() and f"wrote {f}" in out.out


@pytest.mark.parametrize("command", ["verify", "rate"])
def test_problem_arguments_are_typed_by_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """verify and rate convert --problem-arg by the factory's annotations, as solve does."""
    out = tmp_path / "run"
    assert main(["solve", "quadratic", "--solver", "zo-sgd", "--max-iter", "20", "--no-progress",
                 "--problem-arg", "dim=3", "-o", str(out)]) == 0
    capsys.readouterr()
    head = ["verify", str(out), "--problem", "quadratic"] if command == "verify" else \
        ["rate", "zo-sgd", "quadratic", "--seeds", "1", "--budget", "5", "--db", str(tmp_path / "db.sqlite")]
    assert main([*head, "--problem-arg", "dim=three"]) == 2
    err = capsys.readouterr().err
    assert "--problem-arg dim='three' for problem 'quadratic': expected an integer (dim: int)" in err
    assert main([*head, "--problem-arg", "dims=3"]) == 2
    assert "problem 'quadratic' has no argument 'dims' (did you mean 'dim'?)" in capsys.readouterr().err
