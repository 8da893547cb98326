"""Saved runs verified from another directory, a quiet HiGHS, and bench runs that raise SystemExit or are interrupted."""

from __future__ import annotations

from collections.abc import Sequence
import json
import logging
import os
from pathlib import Path
import shutil
import subprocess
import sys
import textwrap
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import zoframe
from zoframe import hookimpl
from zoframe.cli import main
from zoframe.registry import Registry
from zoframe.specs import SolverSpec
from zoframe_bench import run
from zoframe_bench.store import BenchStore

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples" / "my_problems.py"


# ---------------------------------------------------------------------------------------------- saved runs
def test_a_run_saved_with_a_relative_file_path_verifies_from_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    (work / "docs").mkdir(parents=True)
    elsewhere.mkdir()
    shutil.copy(EXAMPLES, work / "docs" / "my_problems.py")
    monkeypatch.chdir(work)
    rc = main(["solve", "docs/my_problems.py:capped_sphere", "--max-calls", "3000", "--no-progress", "-o", "run"])
    assert rc == 0
    saved = json.loads((work / "run.json").read_text())
    assert saved["problem"] == f"{work / 'docs' / 'my_problems.py'}:capped_sphere"
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    assert main(["verify", str(work / "run"), "--no-reference"]) == 0, capsys.readouterr()
    assert "verdict: PASS" in capsys.readouterr().out


def test_a_run_of_a_module_in_the_working_directory_verifies_from_anywhere(tmp_path: Path) -> None:
    """A module reference stays one; the directory it came from is recorded (fresh processes: no module cache)."""
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    shutil.copy(EXAMPLES, work / "newcomer_problems.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    cli = [sys.executable, "-c", "import sys; from zoframe.cli import main; sys.exit(main(sys.argv[1:]))"]
    solve = subprocess.run([*cli, "solve", "newcomer_problems:capped_sphere", "--max-calls", "3000", "--no-progress",
                            "-o", "run"], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert solve.returncode == 0, solve.stderr
    saved = json.loads((work / "run.json").read_text())
    assert (saved["problem"], saved["problem_dir"]) == ("newcomer_problems:capped_sphere", str(work.resolve()))
    check = subprocess.run([*cli, "verify", str(work / "run"), "--no-reference"], cwd=elsewhere, env=env,
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stderr
    assert "verdict: PASS" in check.stdout


# ---------------------------------------------------------------------------------------------- HiGHS
def test_the_frank_wolfe_linear_minimisation_prints_nothing(tmp_path: Path) -> None:
    """Acc-SZOFW's LP subproblem on linearised constraints (the call that printed HiGHS's banner in the
    README quick start), in a fresh process: HiGHS prints its banner once per process."""
    script = textwrap.dedent('''
        import numpy as np, zoframe
        prob = zoframe.Constrained(lambda X: ((X - 1.0) ** 2).sum(axis=1), lambda X, idx: X[:, idx] ** 2 - 0.25,
                                   3, np.zeros(3))
        res = zoframe.minimize(prob, "acc-szofw", rng=0, max_iter=4)
        assert res.nit == 4 and np.isfinite(res.x).all(), res
    ''')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "", out.stdout


def test_the_lp_through_scipy_is_the_lp_through_cvxpy() -> None:
    from zoframe.oracle import CountingOracle
    from zoframe_constrained.baselines import CvxpySubproblem

    prob = zoframe.Constrained(lambda X: X.sum(axis=1), lambda X, idx: X[:, idx] ** 2 - 0.25, 3, np.zeros(3))
    oracle = CountingOracle(prob)
    rng = np.random.default_rng(0)
    J, r = rng.standard_normal((3, 3)), np.ones(3)
    ours = CvxpySubproblem(oracle, "lmo", linearized=True, ball="linf", radius=2.0)
    assert ours.order[0] == "HIGHS" and ours._lp is not None
    cvx = CvxpySubproblem(oracle, "lmo", linearized=True, ball="linf", radius=2.0, solver="CLARABEL")
    for _ in range(5):
        c = rng.standard_normal(3)
        w, v = ours.solve(c, J, r), cvx.solve(c, J, r)
        assert c @ w == pytest.approx(c @ v, abs=1e-6)
        assert np.all(J @ w <= r + 1e-9) and np.all(np.abs(w) <= 2.0 + 1e-9)


# ---------------------------------------------------------------------------------------------- the bench
class _Raising:
    """A solver whose first step raises ``what`` (configured by name: the registry builds it)."""

    problem_kinds = frozenset({"finite_sum"})

    def __init__(self, what: str = "exit") -> None:
        self.what = what

    def init(self, oracle: Any, x0: Any, rng: Any) -> Any:
        return SimpleNamespace(x=x0.copy())

    def step(self, oracle: Any, state: Any, rng: Any) -> Any:
        oracle.objective(state.x[None, :], None)
        if self.what == "exit":
            raise SystemExit(3)
        raise KeyboardInterrupt


def _registry() -> Registry:
    @hookimpl
    def zoframe_solvers() -> Sequence[SolverSpec]:
        kinds = frozenset({"finite_sum"})
        return [SolverSpec("exits", _Raising, "raises SystemExit(3)", "(test)", kinds),
                SolverSpec("interrupted", _Raising, "raises KeyboardInterrupt", "(test)", kinds)]

    reg = Registry()
    reg.register(SimpleNamespace(zoframe_solvers=zoframe_solvers), name="raisers")
    return reg


def _problems() -> list[zoframe.FiniteSum]:
    return [zoframe.FiniteSum(lambda X, c=c: ((X - c) ** 2).sum(axis=1), x0=np.zeros(2), name=f"bowl{c}")
            for c in (1.0, 2.0)]


SMALL: dict[str, Any] = {"seeds": 1, "budget": 60, "progress": False, "verify": False, "plots": False,
                         "time_limit": None}


def test_a_run_raising_system_exit_is_a_failed_row_and_the_bench_goes_on(tmp_path: Path) -> None:
    reg = _registry()
    out = run(_problems(), ["exits", "nelder-mead"], out=tmp_path, registry=reg, params={"exits": {"what": "exit"}},
              **SMALL)
    assert out.ran == 4
    with BenchStore(Path(out.store)) as db:
        rows = [db.get(t.key) for t in out.tasks]
    by = {(r.task.solver, r.task.instance): r for r in rows}
    for inst in ("bowl1.0", "bowl2.0"):
        failed = by[("exits", inst)]
        assert failed.status == "FAILED" and "SystemExit(3)" in failed.reason
        assert failed.history["fun"][0] == pytest.approx(2 * float(inst[4:]) ** 2)  # measured at x0 before it failed
        assert by[("nelder-mead", inst)].status not in ("FAILED", "ERROR")


def test_an_interrupted_bench_stops_keeps_its_rows_and_says_how_to_resume(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    reg = _registry()
    with caplog.at_level(logging.WARNING, logger="zoframe"), pytest.raises(KeyboardInterrupt):
        run(_problems(), ["nelder-mead", "interrupted"], out=tmp_path, registry=reg,
            params={"interrupted": {"what": "interrupt"}}, **SMALL)
    with BenchStore(tmp_path / "bench.sqlite") as db:
        stored = db.keys()
    assert len(stored) == 1  # the run before the interruption; none of the interrupted one
    assert "interrupted: 1 of 4 runs are stored" in caplog.text and "run the same bench again" in caplog.text
