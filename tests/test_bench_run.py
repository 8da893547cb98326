"""zoframe_bench.run: resumable SQLite store, identical results serially / on a process pool / on dask."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import distributed as _distributed
import pytest

from zoframe.cli import main
from zoframe.errors import InvalidInputError
from zoframe_bench import run
from zoframe_bench.store import BenchStore

GRID: dict[str, Any] = {"suite": "smoke", "solvers": ["cobyla", "nelder-mead", "zo-sgd"], "seeds": 2, "budget": 300,
        "progress": False, "verify": False}


distributed: Any = _distributed


class _Killed(Exception):
    pass


def _dump(path: Path) -> list[tuple[object, ...]]:
    with BenchStore(path) as db:
        return db.deterministic_dump()


@pytest.fixture(scope="module")
def serial(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("serial")
    res = run(**GRID, out=out, plots=False)
    assert res.ran == len(res.tasks) == 7 * 3 * 2 and res.reused == 0
    return out, dict(res.summary)


def test_a_killed_bench_resumes_to_the_same_summary(tmp_path: Path, serial: tuple[Path, dict[str, Any]]) -> None:
    stored: list[str] = []

    def kill_after_five(row: Any) -> None:
        stored.append(row.task.key)
        if len(stored) == 5:
            raise _Killed

    with pytest.raises(_Killed):
        run(**GRID, out=tmp_path, plots=False, on_row=kill_after_five)
    with BenchStore(tmp_path / "bench.sqlite") as db:
        assert db.count() == 5
        before = db.created()
    again = run(**GRID, out=tmp_path, plots=False)
    assert again.reused == 5 and again.ran == len(again.tasks) - 5
    with BenchStore(tmp_path / "bench.sqlite") as db:
        after = db.created()
    assert {k: after[k] for k in before} == before  # the finished runs were not run again
    assert again.summary == serial[1]
    assert json.loads((tmp_path / "summary.json").read_text()) == json.loads((serial[0] / "summary.json").read_text())
    assert _dump(tmp_path / "bench.sqlite") == _dump(serial[0] / "bench.sqlite")
    # a third call runs nothing
    assert run(**GRID, out=tmp_path, plots=False).ran == 0


def test_process_pool_and_dask_store_the_same_runs_as_serial(
    tmp_path: Path, serial: tuple[Path, dict[str, Any]]
) -> None:
    pool = run(**GRID, out=tmp_path / "pool", plots=False, workers=2)
    assert pool.ran == len(pool.tasks)
    assert _dump(tmp_path / "pool" / "bench.sqlite") == _dump(serial[0] / "bench.sqlite")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as cluster, distributed.Client(cluster) as client:
        on_dask = run(**GRID, out=tmp_path / "dask", plots=False, dask=client)
    assert on_dask.ran == len(on_dask.tasks)
    assert _dump(tmp_path / "dask" / "bench.sqlite") == _dump(serial[0] / "bench.sqlite")


def test_stored_runs_hold_counts_history_and_final_point(serial: tuple[Path, dict[str, Any]]) -> None:
    with BenchStore(serial[0] / "bench.sqlite") as db:
        rows = list(db.rows())
    ran = [r for r in rows if r.ran]
    assert {r.status for r in rows} >= {"SKIPPED"}  # nelder-mead does not take constrained problems
    for r in ran:
        assert r.nfev <= r.task.budget
        assert sum(r.nfev_by_kind.values()) == r.nfev
        h = r.history
        assert h["calls"][0] == 0 and h["calls"][-1] == r.nfev
        assert r.x.shape == (r.dim,)
        if r.kind == "constrained" and r.task.solver == "cobyla":
            assert r.nfev_by_kind["constraint"] * r.n == r.nfev_by_kind["objective"] * r.m
    summary = serial[1]
    assert set(summary["solvers"]) == set(GRID["solvers"])


def test_summary_and_plots_are_written(tmp_path: Path) -> None:
    res = run("smoke", ["cobyla", "nelder-mead"], seeds=1, budget=200, out=tmp_path, progress=False, verify=True)
    names = {Path(f).name for f in res.files}
    assert {"summary.json", "summary.md", "profiles.json", "performance_profiles.png", "data_profiles.png",
            "ecdf.png"} <= names
    md = (tmp_path / "summary.md").read_text()
    assert "| cobyla |" in md and "solved tau=0.001" in md
    prof = json.loads((tmp_path / "profiles.json").read_text())
    assert set(prof["data"]["0.001"]) == {"full", "raw"}
    with BenchStore(tmp_path / "bench.sqlite") as db:
        ver = [r.verification for r in db.rows() if r.ran]
    assert all(v is not None and ("measures" in v or "error" in v) for v in ver)
    assert any(v is not None and "measures" in v for v in ver)


def test_budget_in_full_evaluation_units(tmp_path: Path) -> None:
    res = run("smoke", ["cobyla"], seeds=1, budget=10, budget_unit="full", out=tmp_path, progress=False,
              verify=False, plots=False)
    with BenchStore(tmp_path / "bench.sqlite") as db:
        for r in db.rows():
            assert r.task.budget == 10 * (r.n + r.m)
    assert res.ran == 7


def test_budget_in_full_evaluations_per_variable(tmp_path: Path) -> None:
    code = main(["bench", "smoke", "--solvers", "cobyla", "--budget", "3", "--budget-unit", "full-per-dim",
                 "--no-plots", "--quiet", "--no-verify", "--out", str(tmp_path)])
    assert code == 0
    with BenchStore(tmp_path / "bench.sqlite") as db:
        rows = [r for r in db.rows() if r.ran]
    assert rows and all(r.task.budget == 3 * r.dim * (r.n + r.m) for r in rows)
    assert len({r.dim for r in rows}) > 1  # the budget follows each instance's dimension


def test_bad_requests_are_clear(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="budget_unit"):
        run("smoke", ["cobyla"], budget_unit="points", out=tmp_path, progress=False)
    with pytest.raises(InvalidInputError, match="either workers"):
        run("smoke", ["cobyla"], workers=2, dask="tcp://127.0.0.1:1", out=tmp_path, progress=False)
    with pytest.raises(KeyError):
        run("smoke", ["no-such-solver"], out=tmp_path, progress=False)


def test_cli_bench_lists_and_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "smoke", "--list"]) == 0
    lines = [json.loads(s) for s in capsys.readouterr().out.strip().splitlines()]
    assert {ln["kind"] for ln in lines} == {"finite_sum", "constrained", "minimax", "composite"}
    code = main(["bench", "smoke", "--solvers", "cobyla,powell", "--budget", "100", "--no-plots", "--quiet",
                 "--no-verify", "--out", str(tmp_path), "--param", "cobyla.rhobeg=0.5"])
    assert code == 0
    out = capsys.readouterr().out
    assert "| powell |" in out and "summary.json" in out
    with BenchStore(tmp_path / "bench.sqlite") as db:
        assert {r.task.params.get("rhobeg") for r in db.rows() if r.task.solver == "cobyla"} == {0.5}
