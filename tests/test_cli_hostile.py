"""``zoframe solve`` under hostile input: typed problem and estimator arguments, --verify, tiny mu.

Bad arguments end with exit code 2 and ONE line on stderr (``zoframe: error: ...``) that lists the
accepted arguments with their types; never a traceback, never a silently dropped parameter.
"""

from __future__ import annotations

import json
from pathlib import Path
import subprocess
import sys
from typing import Any, Literal

import pytest

from zoframe import cli
from zoframe.cli import main, typed_arguments
from zoframe.errors import EstimatorUnderflowWarning, InvalidInputError

QUICK = ["--max-iter", "10", "--no-progress"]


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zoframe: error: "), err
    return lines[0]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["quadratic", "--problem-arg", "dim=abc"], "dim='abc' for problem 'quadratic': expected an integer (dim: int)"),
        (["quadratic", "--problem-arg", "foo=1"], "problem 'quadratic' has no argument 'foo'"),
        (["quadratic", "--problem-arg", "dims=3"], "no argument 'dims' (did you mean 'dim'?)"),
        (["quadratic", "--problem-arg", "cond=ten"], "expected a number (cond: float)"),
        (["quadratic", "--problem-arg", "dim=2.5"], "expected an integer"),
        (["quadratic", "--problem-arg", "dim=3", "--problem-arg", "dim=4"], "dim is given twice"),
        (["quadratic", "--problem-arg", "dim"], "expected KEY=VALUE, got 'dim'"),
        (["dro", "--problem-arg", "n=abc"], "n='abc' for problem 'dro': expected an integer or none (n: int | None)"),
        (["ncsc", "--problem-arg", "kappa=nan"], "expected a number, not nan"),
        (["kkt-qp", "--problem-arg", "convex_constraints=maybe"], "expected true or false"),
    ],
)
def test_bad_problem_arguments_are_one_line_errors_listing_the_accepted_ones(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["solve", *argv, *QUICK]) == 2
    line = _error_line(capsys)
    assert expected in line
    if "twice" not in line and "KEY=VALUE" not in line:
        assert "it accepts" in line and ("dim: int = 10" in line or "n: int | None = None" in line or "kappa: float" in line
                                         or "convex_constraints: bool = True" in line)


def test_info_shows_the_typed_problem_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "dro"]) == 0
    assert "arguments (--problem-arg KEY=VALUE): dataset: str = 'a9a', n: int | None = None" in capsys.readouterr().out


def test_no_traceback_from_the_console_script() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "zoframe.cli", "solve", "dro", "--problem-arg", "n=abc", *QUICK],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and "expected an integer or none" in proc.stderr


def test_problem_arguments_are_converted_by_the_annotations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    code = main(["solve", "quadratic", "--problem-arg", "dim=3", "--problem-arg", "cond=2", "--problem-arg",
                 "name=7", *QUICK, "-o", str(out)])
    assert code in (0, 1)
    args = json.loads((tmp_path / "run.json").read_text())["problem_args"]
    assert args == {"dim": 3, "cond": 2.0, "name": "7"}  # cond a float, name kept as text
    assert type(args["cond"]) is float


def _factory(
    a: int, b: float = 1.0, *, flag: bool = False, tag: str | None = None, mode: Literal["x", "y"] = "x",
    sizes: list[int] | None = None, anything: Any = None,
) -> None:
    """A factory with every kind of annotation the converter reads."""


def test_typed_arguments_cover_the_annotation_kinds() -> None:
    items = [("a", "1e3"), ("b", "-2"), ("flag", "YES"), ("tag", "null"), ("mode", "y"), ("sizes", "[1, 2]"),
             ("anything", '{"k": 1}')]
    got = typed_arguments(_factory, items, "problem 'f'", "--problem-arg")
    assert got == {"a": 1000, "b": -2.0, "flag": True, "tag": None, "mode": "y", "sizes": [1, 2], "anything": {"k": 1}}
    assert typed_arguments(_factory, [("tag", "none-such")], "f", "-x") == {"tag": "none-such"}
    with pytest.raises(InvalidInputError, match=r"expected one of 'x' \| 'y'"):
        typed_arguments(_factory, [("mode", "z")], "f", "-x")
    with pytest.raises(InvalidInputError, match="expected a JSON list"):
        typed_arguments(_factory, [("sizes", "1,2")], "f", "-x")


def test_a_factory_that_raises_a_plain_error_is_a_one_line_error() -> None:
    with pytest.raises(InvalidInputError) as info:
        cli._build_problem("f", _factory, {"b": 2.0})  # a (int) is missing: TypeError
    msg = str(info.value)
    assert "problem 'f' could not be built with b=2.0: TypeError" in msg and "a: int" in msg and "\n" not in msg


# ---------------------------------------------------------------- estimator parameters


def test_estimator_parameters_reach_the_estimator(capsys: pytest.CaptureFixture[str]) -> None:
    """`--estimator gaussian -e q=3`: q + 1 = 4 evaluations per step, not the default q = 10's 11."""
    assert main(["solve", "quadratic", "--estimator", "gaussian", "-e", "q=3", "--estimator-param", "mu=1e-4",
                 "-p", "steps=paper", *QUICK]) in (0, 1)
    out = capsys.readouterr().out
    assert "nfev=40," in out


def test_a_solver_parameter_meant_for_the_estimator_points_to_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    """`--estimator gaussian -p q=3` used to run with q = 10 (nfev 110): now an error naming -e."""
    assert main(["solve", "quadratic", "--estimator", "gaussian", "-p", "q=3", *QUICK]) == 2
    line = _error_line(capsys)
    assert "q=3" in line and "--estimator-param KEY=VALUE, or -e KEY=VALUE" in line


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["-e", "q=3"], "--estimator-param configures the estimator named by --estimator NAME"),
        (["--estimator", "gaussian", "-e", "qq=3"], "estimator 'gaussian' has no argument 'qq' (did you mean 'q'?)"),
        (["--estimator", "gaussian", "-e", "q=three"], "q='three' for estimator 'gaussian': expected an integer"),
        (["--estimator", "gausian", "-e", "q=3"], "unknown estimator 'gausian'"),
    ],
)
def test_bad_estimator_parameters_are_one_line_errors(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["solve", "quadratic", *argv, *QUICK]) == 2
    assert expected in _error_line(capsys)


def test_estimator_parameters_without_driver_support_are_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import zoframe.driver

    calls: list[Any] = []

    def old_minimize(problem: Any, solver: Any = "zo-sgd", steps="paper", *, estimator: Any = None, **kw: Any) -> Any:
        calls.append(kw)
        raise AssertionError("must not run")

    monkeypatch.setattr(zoframe.driver, "minimize", old_minimize)
    assert main(["solve", "quadratic", "--estimator", "gaussian", "-e", "q=3", *QUICK]) == 2
    assert "needs zoframe.minimize(..., estimator_params=...)" in _error_line(capsys) and calls == []


# ---------------------------------------------------------------- --verify


def test_verify_prints_the_kkt_report_of_the_returned_point(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["solve", "kkt-qp", "--problem-arg", "m=12", "--solver", "dszog", "-p", "M1=5", "-p", "M2=5",
                 "-p", "M3=5", "--max-iter", "20", "--no-progress", "--verify"])
    out = capsys.readouterr().out
    assert code in (0, 1)  # the run's own exit code
    report = out[out.index("verification report: kkt-qp (constrained), solver dszog"):]
    for key in ("eps1", "eps2", "eps3", "max_violation", "multipliers:"):
        assert key in report


def test_verify_without_the_verification_package_is_a_clear_error_before_the_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "_VERIFY_MODULE", "zoframe_verify_not_installed")  # its import fails
    assert main(["solve", "quadratic", *QUICK, "--verify"]) == 2
    captured = capsys.readouterr()
    assert "Result(" not in captured.out  # refused before spending the run
    line = captured.err.strip()
    assert line.startswith("zoframe: error: --verify needs the verification package zoframe_verify")


def test_verify_reports_the_point_of_a_run_that_failed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run that stops on an error but carries its partial Result still gets its point verified."""
    import zoframe.driver
    from zoframe.errors import ZoframeError

    real = zoframe.driver.minimize

    def failing(problem: Any, solver: Any = "zo-sgd", **kw: Any) -> Any:
        partial = real(problem, solver, rng=0, max_iter=3)
        err = ZoframeError("the run failed at iteration 4: boom")
        err.result = partial  # type: ignore[attr-defined]
        raise err

    monkeypatch.setattr(zoframe.driver, "minimize", failing)
    assert main(["solve", "quadratic", *QUICK, "--verify"]) == 2
    captured = capsys.readouterr()
    assert "Result(" in captured.out and "verification report: quadratic (finite_sum)" in captured.out
    assert "boom" in captured.err


# ---------------------------------------------------------------- mu too small


def test_a_tiny_mu_warns_that_the_estimate_underflows(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.warns(EstimatorUnderflowWarning, match="mu=1e-300"):
        assert main(["solve", "quadratic", "-p", "mu=1e-300", "-p", "steps=paper", *QUICK]) in (0, 1)
