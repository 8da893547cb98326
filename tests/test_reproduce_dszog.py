"""``zoframe reproduce dszog`` end to end on a tiny configuration: files, paper numbers, resumption."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from zoframe.cli import main
from zoframe_constrained import reproduce
from zoframe_constrained.reproduce import PAPER, SENSITIVITY, add_arguments

TINY = ["--table", "fairness", "--quick", "--datasets", "D1", "--methods", "adszog,zopsgd", "--iters", "30",
        "--baseline-iters", "4", "--n-samples", "200", "--tune", "quick", "--no-progress"]  # fmt: skip


def _rows(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_end_to_end_files_table_and_resume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rep"
    assert main(["reproduce", "dszog", *TINY, "--seeds", "1", "--out", str(out)]) == 0
    table = out / "fairness"
    for name in ("summary.csv", "summary.json", "runs.csv", "runs.jsonl", "figure.png", "hparams.json", "config.json"):
        assert (table / name).stat().st_size > 0, name
    assert (table / "figure.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = capsys.readouterr().out
    assert "Table 3" in text and "(paper: 87.33 ± 0.38)" in text and "(paper: 59.16 ± 0.37)" in text
    summary = json.loads((table / "summary.json").read_text())["rows"]
    assert {r["method"] for r in summary} == {"adszog", "zopsgd"}
    for r in summary:
        assert r["runs"] == 1 and 0.0 <= r["test_accuracy_mean"] <= 100.0
    hp = json.loads((table / "hparams.json").read_text())
    assert hp["fairness|D1|adszog"]["_tune"] == "quick" and hp["fairness|D1|adszog"]["_grid_points"] == 4
    assert hp["fairness|D1|zopsgd"]["M1"] == 100  # |M1| = 128 capped at the 100 training samples
    rows = _rows(table / "runs.jsonl")
    assert len(rows) == 2 and all(len(r["trace_seconds"]) > 1 for r in rows)  # type: ignore[arg-type]

    # a second seed: the first runs are kept, only the new ones run
    assert main(["reproduce", "dszog", *TINY, "--seeds", "2", "--out", str(out)]) == 0
    rows2 = _rows(table / "runs.jsonl")
    assert len(rows2) == 4
    assert rows2[:2] == rows
    summary = json.loads((table / "summary.json").read_text())["rows"]
    assert all(r["runs"] == 2 for r in summary)


def test_a_failure_mid_way_keeps_the_finished_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = reproduce.execute
    calls = {"n": 0}

    def flaky(job: reproduce.Job) -> dict[str, object]:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt  # the user stops the reproduction during the second run
        return real(job)

    monkeypatch.setattr(reproduce, "execute", flaky)
    with pytest.raises(KeyboardInterrupt):
        main(["reproduce", "dszog", *TINY, "--seeds", "1", "--tune", "none", "--out", str(tmp_path)])
    assert len(_rows(tmp_path / "fairness" / "runs.jsonl")) == 1
    monkeypatch.setattr(reproduce, "execute", real)
    assert main(["reproduce", "dszog", *TINY, "--seeds", "1", "--tune", "none", "--out", str(tmp_path)]) == 0
    assert len(_rows(tmp_path / "fairness" / "runs.jsonl")) == 2


def test_bad_options_are_clear_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reproduce", "dszog", "--table", "fairness", "--datasets", "D9", "--out", str(tmp_path)]) == 2
    assert "unknown data set" in capsys.readouterr().err
    assert main(["reproduce", "dszog", "--table", "kernel", "--methods", "acc-zomda", "--out", str(tmp_path)]) == 2
    assert "unknown method" in capsys.readouterr().err
    assert main(["reproduce", "dszog", "--table", "fairness", "--seeds", "0", "--out", str(tmp_path)]) == 2


def test_sensitivity_plan_and_paper_numbers() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    ns = reproduce._normalise(parser.parse_args(["--table", "sensitivity", "--studies", "table11,table12", "--seeds", "2"]))
    jobs = reproduce.plan(ns, {})
    # Table 11: 3 betas, Table 12: 5 (a, b) pairs; 4 kernel data sets; 2 seeds
    assert len(jobs) == (3 + 5) * 4 * 2
    assert {j.problem.kwargs["kernel"] for j in jobs} == {"rbf"}
    j = next(j for j in jobs if j.method == "Table 11: beta=10" and j.dataset == "D3")
    assert j.params["beta"] == 10.0 and j.params["eta_p"] == 0.1 and j.params["a"] == 0.9
    assert all(j.params["steps"] == "paper" for j in jobs)  # the papers' fixed steps, whatever the defaults
    ns = reproduce._normalise(parser.parse_args(["--table", "fairness", "--seeds", "1"]))
    penalty = [j for j in reproduce.plan(ns, {}) if j.solver in ("dszog", "adszog")]
    assert penalty and all(j.params["steps"] == "paper" for j in penalty)
    assert reproduce._fixed("fairness", "adszog", 500)["steps"] == "paper" and "steps" not in reproduce._fixed("fairness", "zopsgd", 500)
    assert reproduce._paper_value("sensitivity", "D3", "Table 11: beta=10") == (87.85, None)
    assert reproduce._paper_value("sensitivity", "D4", "Table 12: a=0.5, b=0.9") == (59.48, None)
    # the printed tables: every method of Tables 2 and 3 on every data set
    assert all(len(v) == 6 for v in PAPER["pairwise"].values()) and all(len(v) == 6 for v in PAPER["fairness"].values())
    assert all(len(s.values) == len(next(iter(s.paper.values()))) for s in SENSITIVITY)


def test_select_feasible_is_recorded_and_reselects(tmp_path: Path) -> None:
    args = [*TINY, "--seeds", "1", "--methods", "zopsgd", "--out", str(tmp_path)]
    assert main(["reproduce", "dszog", *args]) == 0
    hp = json.loads((tmp_path / "fairness" / "hparams.json").read_text())["fairness|D1|zopsgd"]
    assert hp["_select_feasible"] is None
    # a feasibility rule changes the selection rule: the cell is selected again, and recorded
    assert main(["reproduce", "dszog", *args, "--select-feasible", "1e-3"]) == 0
    hp = json.loads((tmp_path / "fairness" / "hparams.json").read_text())["fairness|D1|zopsgd"]
    assert hp["_select_feasible"] == 1e-3 and hp["_grid_points"] == 2


def test_c_rel_calibrates_the_fairness_thresholds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--c-rel runs on thresholds relative to the unconstrained classifier, in their own directory."""
    out = tmp_path / "rep"
    tiny = [a for a in TINY if a != "adszog,zopsgd"]
    tiny[tiny.index("--methods") + 1 : tiny.index("--methods") + 1] = ["adszog"]
    assert main(["reproduce", "dszog", *tiny, "--seeds", "1", "--tune", "none", "--c-rel", "0.5", "--out", str(out)]) == 0
    table = out / "fairness-crel0.5"
    assert json.loads((table / "config.json").read_text())["c_rel"] == 0.5
    assert len(_rows(table / "runs.jsonl")) == 1
    assert not (out / "fairness").exists()
    assert main(["reproduce", "dszog", "--table", "pairwise", "--c-rel", "0.5", "--out", str(out)]) == 2
    assert "--table pairwise has none" in capsys.readouterr().err


def test_the_planned_work_is_stated_before_starting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The command says how many runs it will make and an upper figure for their time before the first."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    ns = reproduce._normalise(parser.parse_args(["--table", "pairwise", "--quick", "--jobs", "2"]))
    tuning, runs, seconds = reproduce.planned_work(ns, tmp_path)
    # 4 data sets x (4 + 4 + 2 + 2 + 2 + 2) quick grid points; 4 data sets x 6 methods x 2 seeds
    assert (tuning, runs) == (4 * 16, 4 * 6 * 2)
    assert seconds == pytest.approx((tuning + runs) * 10.0 / 2)
    out = tmp_path / "rep"
    assert main(["reproduce", "dszog", *TINY, "--seeds", "1", "--out", str(out)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("6 tuning run(s) and 2 table run(s)")  # adszog 4 grid points, zopsgd 2
    assert "after 10 s" in first and "measured" not in first  # a filtered table is not the measured one
    # the selections are cached now: a second invocation plans no tuning
    ns = reproduce._normalise(parser.parse_args([*TINY, "--seeds", "1"]))
    assert reproduce.planned_work(ns, out / "fairness")[0] == 0


def test_the_quick_tables_state_their_measured_duration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--table pairwise --quick` says before it starts that it takes half an hour, not a few minutes."""
    from zoframe.errors import InvalidInputError

    def stop(*args: object, **kwargs: object) -> None:
        raise InvalidInputError("stopped before the first run")

    monkeypatch.setattr(reproduce, "select_all", stop)
    assert main(["reproduce", "dszog", "--table", "pairwise", "--quick", "--out", str(tmp_path), "--no-progress"]) == 2
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("64 tuning run(s) and 48 table run(s)") and "up to about 19 min" in first
    assert f"measured for this command: {reproduce.MEASURED_QUICK['pairwise']}" in first
