"""Output a user can live with: short reports, progress bars on terminals only, notices through logging."""

from __future__ import annotations

import io
import logging
import os
from pathlib import Path
import subprocess
import sys

import numpy as np
import pytest

import zoframe
from zoframe._output import PROGRESS_ENV, progress_wanted
from zoframe.cli import main


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_package_installs_a_null_handler() -> None:
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("zoframe").handlers)


def test_progress_only_on_terminals_and_the_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    assert progress_wanted(True, _Tty()) is True
    assert progress_wanted(True, io.StringIO()) is False  # a file or a pipe: no bar
    assert progress_wanted(False, _Tty()) is False  # the parameter switches it off
    notebook = type("OutStream", (io.StringIO,), {"__module__": "ipykernel.iostream"})()
    assert progress_wanted(True, notebook) is True  # a notebook's stderr is no terminal, but shows widgets
    monkeypatch.setenv(PROGRESS_ENV, "0")
    assert progress_wanted(True, _Tty()) is False  # the environment switches every bar off
    monkeypatch.setenv(PROGRESS_ENV, "always")
    assert progress_wanted(True, io.StringIO()) is True
    assert progress_wanted(False, io.StringIO()) is False


_RUN = (
    "import numpy as np, zoframe\n"
    "p = zoframe.FiniteSum(lambda X: ((X - 1.0) ** 2).sum(axis=1), x0=np.zeros(3))\n"
    "import time\n"
    "def slow(info):\n"
    "    time.sleep(0.004)\n"
    "zoframe.minimize(p, 'zo-sgd', steps='paper', rng=0, max_iter=300, eta=0.05, progress=True, callback=slow)\n"
)


@pytest.mark.parametrize(("env", "frames"), [("", False), ("always", True)])
def test_minimize_progress_writes_no_frames_into_a_log_file(env: str, frames: bool, tmp_path: Path) -> None:
    """stderr to a file: no ``\\r`` frames unless forced (the forced case shows the test can fail)."""
    log = tmp_path / "err.log"
    environ = {**os.environ, PROGRESS_ENV: env}
    with open(log, "w") as fh:
        subprocess.run([sys.executable, "-c", _RUN], stderr=fh, stdout=subprocess.DEVNULL, env=environ,
                       check=True, timeout=120)
    assert (b"\r" in log.read_bytes()) is frames


@pytest.fixture(scope="module")
def rate_report() -> object:
    from zoframe_verify import rate_study

    prob = zoframe.FiniteSum(lambda X: ((X - 1.0) ** 2).sum(axis=1), x0=np.zeros(4))
    return rate_study("zo-sgd", prob, seeds=3, budget=2000, params={"eta": 0.05, "steps": "paper"}, n_boot=50)


def test_rate_report_prints_a_summary_and_keeps_the_data(rate_report: object) -> None:
    text = str(rate_report)
    assert len(text) < 1500 and len(repr(rate_report)) < 500
    assert "slope" in text and "iterations" in text and "calls" in text
    fits = rate_report.fits  # type: ignore[attr-defined]
    assert f"{fits['iterations'].slope:.3f}" in text
    assert all(r.values.size == 2000 for r in rate_report.runs)  # type: ignore[attr-defined]
    assert len(repr(rate_report.runs[0])) < 300  # type: ignore[attr-defined]
    d = rate_report.to_dict()  # type: ignore[attr-defined]
    assert d["fits"]["iterations"]["slope"] == fits["iterations"].slope
    assert "| axis |" in rate_report.to_markdown()  # type: ignore[attr-defined]


def test_verify_report_and_bench_outcome_are_short(tmp_path: Path) -> None:
    import zoframe_bench
    from zoframe_verify import verify

    m = 2000
    con = zoframe.Constrained(lambda X: ((X - 1.0) ** 2).sum(axis=1), lambda X, idx: X[:, idx % 3] - 0.5 - idx / m,
                              m=m, x0=np.zeros(3))
    rep = verify(con, np.full(3, 0.5))
    assert len(repr(rep)) < 400 and "verdict=" in repr(rep)
    out = zoframe_bench.run("smoke", ["nelder-mead", "zo-sgd"], budget=60, out=tmp_path, progress=False,
                            plots=False, verify=False)
    assert len(repr(out)) < 300 and len(str(out)) < 1500
    assert "nelder-mead" in str(out) and f"{len(out.tasks)} runs" in str(out)


def test_rate_study_notices_go_through_logging(caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    from zoframe_verify import rate_study

    with caplog.at_level(logging.INFO, logger="zoframe"):
        rate_study("zo-sgd", "quadratic", seeds=2, budget=20, n_boot=10)
    runs = [r for r in caplog.records if r.name == "zoframe.verify" and "done" in r.getMessage()]
    assert len(runs) == 2
    out, err = capsys.readouterr()
    assert out == "" and "run seed" not in err  # a library call prints nothing itself


def _rate_argv(tmp_path: Path) -> list[str]:
    return ["rate", "zo-sgd", "quadratic", "--seeds", "2", "--budget", "20", "--bootstrap", "10",
            "--db", str(tmp_path / "r.sqlite"), "--out", str(tmp_path / "out")]


def test_cli_verbose_and_quiet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(_rate_argv(tmp_path)) == 0
    err = capsys.readouterr().err
    assert "run seed=0 horizon=20 done" in err and "\r" not in err  # notices at INFO, no bar off a terminal
    assert main(["-q", *_rate_argv(tmp_path / "q")]) == 0
    assert "run seed" not in capsys.readouterr().err
    assert main([*_rate_argv(tmp_path / "q2"), "--quiet"]) == 0  # after the command too
    assert "run seed" not in capsys.readouterr().err
    level_during: list[int] = []

    def spy(*args: object) -> int:
        level_during.append(logging.getLogger("zoframe").getEffectiveLevel())
        return 0

    import zoframe.cli as cli

    before = logging.getLogger("zoframe").level
    monkeypatch.setattr(cli, "_cmd_list", spy)
    main(["-v", "list"])
    main(["list", "-qq"])
    main(["list"])
    assert level_during == [logging.DEBUG, logging.ERROR, logging.INFO]
    from zoframe.registry import default_registry

    parser = cli.build_parser(default_registry())
    for argv in (["data", "list", "-q"], ["data", "fetch", "a9a", "-v"], ["reproduce", "minimax", "-q"]):
        ns = parser.parse_args(argv)  # nested commands take the switches too
        assert getattr(ns, "log_quiet", 0) + getattr(ns, "log_verbose", 0) == 1, argv
    assert logging.getLogger("zoframe").level == before  # restored after each command
