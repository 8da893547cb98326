"""The zoframe command line."""

from __future__ import annotations

from pathlib import Path
import subprocess
import sys

import pytest

from zoframe.cli import main


def test_list_shows_every_component_with_summary_and_reference(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in ("zo-sgd", "zo-signsgd", "gaussian", "sphere", "coordinate", "least-squares"):
        assert name in out
    assert "Ghadimi & Lan" in out and "[finite_sum]" in out


def test_list_shows_the_benchmark_suites_and_reproductions(capsys: pytest.CaptureFixture[str]) -> None:
    """`zoframe bench --help` points at `zoframe list` for the suites: they are there, with summaries."""
    from zoframe.registry import default_registry

    assert main(["list"]) == 0
    out = capsys.readouterr().out
    suites = out[out.index("Benchmark suites (zoframe bench SUITE):") :]
    reg = default_registry()
    assert reg.suites() and reg.reproductions()
    for name, prov in reg.suites().items():
        assert f"  {name:<16} {prov.spec.summary}" in suites
    reproductions = out[out.index("Reproductions (zoframe reproduce NAME):") :]
    for name in reg.reproductions():
        assert f"  {name:<16} " in reproductions


def test_info_shows_parameters_symbols_kinds_and_citation(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "zo-sgd"]) == 0
    out = capsys.readouterr().out
    assert "problem kinds: finite_sum" in out and "citation: Ghadimi & Lan" in out
    assert "eta" in out and "0.01" in out and "|I|" in out


def test_info_unknown_name_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "zo-sdg"]) == 2
    err = capsys.readouterr().err
    assert "Did you mean 'zo-sgd'" in err


def test_solve_saves_a_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "res"
    code = main(["solve", "quadratic", "--problem-arg", "dim=5", "--max-iter", "300", "-p", "eta=0.05",
                 "--no-progress", "-o", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "distance to the known solution" in text
    assert (tmp_path / "res.json").exists() and (tmp_path / "res.npz").exists()


def test_console_script_runs_the_demo() -> None:
    proc = subprocess.run([sys.executable, "-m", "zoframe.cli", "demo"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Result(solver='zo-sgd'" in proc.stdout


def test_saved_result_names_its_problem(tmp_path: Path) -> None:
    import json

    assert main(["solve", "quadratic", "--problem-arg", "dim=3", "--max-iter", "20", "--no-progress",
                 "-o", str(tmp_path / "r")]) == 0
    doc = json.loads((tmp_path / "r.json").read_text())
    # zo-sgd's default (steps="auto") converges after 3 of the 20 iterations allowed
    assert doc["problem"] == "quadratic" and doc["problem_args"] == {"dim": 3} and doc["nit"] == 3


def test_broken_pipe_is_quiet() -> None:
    proc = subprocess.run(f"{sys.executable} -m zoframe.cli info zo-sgd | head -1", shell=True,
                          capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr and proc.stdout.startswith("zo-sgd")


def test_solve_prints_the_feasible_snapshot(capsys: pytest.CaptureFixture[str]) -> None:
    """With restore_every, solve also prints the measures of outputs['x_feasible'] (a full pass here)."""
    # 120 steps: the penalty phase is still running (once stationary it hands over to the precision phase,
    # whose iterate is itself feasible and keeps no snapshot)
    code = main(["solve", "pairwise", "--problem-arg", "dataset=breast-cancer", "--solver", "adszog",
                 "-p", "restore_every=100", "--max-iter", "120", "--seed", "0", "--no-progress"])  # fmt: skip
    text = capsys.readouterr().out
    # exit 0 only if the final iterate itself is feasible (a budget stop at an infeasible point is 1)
    final_feasible = "feasible=True" in text or "'feasible': True" in text
    assert code == (0 if final_feasible else 1)
    line = next(ln for ln in text.splitlines() if ln.startswith("feasible snapshot x_feasible"))
    nit = int(text.split("nit=")[1].split(",")[0])
    step = int(line.split("(step ")[1].split(",")[0])
    # the last snapshot: every restore_every=100 steps, up to the last step the run took (it may converge early)
    assert step == 100 * (nit // 100) and step >= 100 and "over 18868 constraints" in line
    viol = float(line.split("max_violation=")[1].split(",")[0])
    assert viol <= 1e-3
