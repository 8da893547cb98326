"""The bench under imperfect values: ``zoframe_bench.run(..., noise=...)`` and ``zoframe bench --noise``.

Every problem of a suite goes through the transforms; the store keys them apart from clean runs; the
solved test uses the clean problem's values and ``f*``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

from zoframe.cli import main
from zoframe.errors import InvalidInputError, InvalidParameterError
from zoframe.imperfect import apply
from zoframe.oracle import CountingOracle
from zoframe_bench import run
from zoframe_bench.runner import _instances, transform_spec, transform_tag
from zoframe_bench.store import BenchStore, Task

GRID = {"suite": "smoke", "solvers": ["cobyla"], "budget": 200, "progress": False, "verify": False, "plots": False}


def test_transformed_and_clean_runs_share_a_store_without_mixing(tmp_path: Path) -> None:
    store = tmp_path / "bench.sqlite"
    noisy = run(**GRID, store=store, out=tmp_path / "noisy", noise=1e-6, noise_kind="relative")
    assert noisy.ran == len(noisy.tasks) > 0
    assert all(t.transform == ({"transform": "noise", "level": 1e-6, "kind": "relative", "seed": 0,
                                "which": ["objective", "constraints", "equalities"]},) for t in noisy.tasks)
    again = run(**GRID, store=store, out=tmp_path / "noisy", noise=1e-6, noise_kind="relative")
    assert again.ran == 0 and again.reused == len(noisy.tasks)  # the sweep resumes
    clean = run(**GRID, store=store, out=tmp_path / "clean")
    other = run(**GRID, store=store, out=tmp_path / "other", noise=1e-4, noise_kind="relative")
    assert clean.ran == other.ran == len(noisy.tasks)  # nothing reused across transforms
    keys = [{t.key for t in o.tasks} for o in (noisy, clean, other)]
    assert not (keys[0] & keys[1]) and not (keys[0] & keys[2]) and not (keys[1] & keys[2])
    with BenchStore(store) as db:
        assert db.count() == 3 * len(noisy.tasks)
        back = {r.task.key: r.task for r in db.rows()}
    assert all(back[t.key] == t for t in noisy.tasks)  # the transform reads back from the store
    summary = json.loads((tmp_path / "noisy" / "summary.json").read_text())
    assert summary["transform"][0]["level"] == 1e-6 and "transform" not in clean.summary
    assert "Imperfect values" in (tmp_path / "noisy" / "summary.md").read_text()


def test_a_clean_task_keeps_the_key_it_had_before_transforms_existed() -> None:
    task = Task("smoke", {}, "rosenbrock-d2", "cobyla", {}, 0, 100, 1, 1e-3, False)
    old = {f.name: getattr(task, f.name) for f in dataclasses.fields(task) if f.name != "transform"}
    assert task.key == hashlib.sha256(json.dumps(old, sort_keys=True, default=str).encode()).hexdigest()[:32]
    assert Task.from_json(task.to_json()) == task


def test_the_bench_measures_and_judges_runs_on_the_clean_problem(tmp_path: Path) -> None:
    """Noise of absolute size 10 hides the objective from the solver; the stored history is the clean one."""
    out = run(**{**GRID, "solvers": ["cobyla", "nelder-mead"]}, out=tmp_path, noise=10.0, transform_seed=4)
    insts = {i.name: i for i in _instances("smoke", {})}
    with BenchStore(tmp_path / "bench.sqlite") as db:
        rows = [r for r in db.rows() if r.ran]
    assert rows
    for r in rows:
        clean = insts[r.task.instance].build()
        x = r.x
        want = float(CountingOracle(clean).monitor.objective(x).mean())
        if r.kind == "finite_sum":
            seen = float(CountingOracle(apply(clean, list(r.task.transform))).monitor.objective(x).mean())
            assert abs(seen - want) > 1e-3  # the solver's values were far from the clean ones
            assert r.history["fun"][-1] == pytest.approx(want, rel=1e-12, abs=1e-12), r.task.instance
            assert r.result["final_fun"] == pytest.approx(want, rel=1e-12, abs=1e-12)
    assert out.summary["solvers"]["cobyla"]["runs"] == 7


def test_failed_points_reach_the_solver_as_inf(tmp_path: Path) -> None:
    out = run(**GRID, out=tmp_path, nan_fraction=0.2, transform_seed=1)
    with BenchStore(tmp_path / "bench.sqlite") as db:
        rows = list(db.rows())
    assert len(rows) == len(out.tasks)
    assert not any("nonfinite='inf'" in r.reason for r in rows)  # not stopped by the oracle's default policy
    assert any(r.status in ("CONVERGED", "MAX_ITER", "BUDGET") for r in rows)


def test_bad_transforms_fail_before_any_run(tmp_path: Path) -> None:
    with pytest.raises(InvalidParameterError, match="digits must be an integer from 1 to 15"):
        run(**GRID, out=tmp_path, digits=0)
    with pytest.raises(InvalidParameterError, match="kind must be 'absolute'"):
        run(**GRID, out=tmp_path, noise=1e-3, noise_kind="multiplicative")
    with pytest.raises(InvalidInputError, match="without a noise level"):
        run(**GRID, out=tmp_path, noise_kind="relative")
    assert not (tmp_path / "bench.sqlite").exists()
    assert transform_spec() == () and transform_tag(()) == ""
    assert transform_tag(transform_spec(1e-8, "relative", 6, 0.01)) == "noise-rel-1e-08+digits-6+nan-0.01"


def test_cli_bench_takes_the_transform_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "smoke", "--solvers", "cobyla", "--budget", "100", "--no-plots", "--quiet", "--no-verify",
                 "--out", str(tmp_path), "--noise", "1e-6", "--noise-kind", "relative", "--digits", "9",
                 "--nan-fraction", "0.01", "--transform-seed", "3"])
    assert code == 0
    assert "Imperfect values" in capsys.readouterr().out
    with BenchStore(tmp_path / "bench.sqlite") as db:
        tasks = [r.task for r in db.rows()]
    assert tasks and all([t["transform"] for t in task.transform] == ["noise", "truncation", "nan"] for task in tasks)
    assert all(task.transform[0]["seed"] == 3 and task.transform[1]["digits"] == 9 for task in tasks)


def test_cli_default_directory_names_the_transform(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ZOFRAME_OUT", raising=False)
    code = main(["bench", "smoke", "--solvers", "cobyla", "--budget", "50", "--no-plots", "--quiet", "--no-verify",
                 "--noise", "0.001"])
    assert code == 0
    found = sorted(p.name for p in tmp_path.rglob("bench-smoke*") if p.is_dir())
    assert found == ["bench-smoke-noise-abs-0.001"], found
