"""``zoframe reproduce minimax`` on a tiny configuration: files, contents and resumption."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from zoframe.cli import main


@pytest.mark.data("mushrooms")
def test_reproduce_minimax_quick(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "fig"
    args = ["reproduce", "minimax", "--quick", "--datasets", "mushrooms", "--out", str(out), "--no-progress"]
    assert main(args) == 0
    for name in ("curves.json", "curves.csv", "summary.json", "figure1.png", "figure1_mushrooms.png"):
        assert (out / name).stat().st_size > 0, name
    runs = sorted((out / "runs").glob("*.json"))
    assert len(runs) == 4 * 2  # four solvers x two seeds
    doc = json.loads((out / "curves.json").read_text())
    assert doc["config"]["seeds"] == 2 and doc["config"]["iters"] == 10
    curves = doc["curves"]["mushrooms"]
    assert set(curves) == {"zo-sgda", "zo-sgdmsa", "sgda", "sgdmsa"}
    for solver, c in curves.items():
        assert c["iteration"][0] == 0 and c["iteration"][-1] == 10
        assert c["calls"][-1] > c["calls"][0]
        # every solver moves g's gradient down from x0 = 0 in ten iterations
        assert c["grad_g_norm_mean"][-1] < c["grad_g_norm_mean"][0], solver
    # the zeroth-order methods pay q = 2(d + 6) function values where SGDA pays one gradient
    assert curves["zo-sgda"]["calls"][-1] > 100 * curves["sgda"]["calls"][-1]
    with (out / "curves.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert {r["solver"] for r in rows} == set(curves) and all(r["dataset"] == "mushrooms" for r in rows)
    summary = json.loads((out / "summary.json").read_text())["final"]["mushrooms"]
    assert summary["sgda"]["grad_g_norm"] == pytest.approx(curves["sgda"]["grad_g_norm_mean"][-1])
    # a second invocation resumes: every run is already there and none is recomputed
    mtimes = {p: p.stat().st_mtime_ns for p in runs}
    capsys.readouterr()
    assert main([*args, "--no-plots"]) == 0
    assert "8 already done" in capsys.readouterr().err
    assert all(p.stat().st_mtime_ns == t for p, t in mtimes.items())


def test_reproduce_minimax_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reproduce", "minimax", "--seeds", "0", "--out", str(tmp_path)]) == 2
    assert "--seeds must be a positive integer" in capsys.readouterr().err
    assert main(["reproduce", "minimax", "--datasets", "no-such-set", "--out", str(tmp_path)]) == 2
    assert "no-such-set" in capsys.readouterr().err

@pytest.mark.data("mushrooms")
def test_reproduce_minimax_writes_under_zoframe_out_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --out the files go to $ZOFRAME_OUT/minimax-figure1 (else ./zoframe-out/...), never to ./."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ZOFRAME_OUT", str(tmp_path / "outs"))
    args = ["reproduce", "minimax", "--quick", "--datasets", "mushrooms", "--no-progress", "--no-plots",
            "--solvers", "sgda"]
    assert main(args) == 0
    out = tmp_path / "outs" / "minimax-figure1"
    assert (out / "summary.json").stat().st_size > 0 and not (tmp_path / "minimax-figure1").exists()
    assert str(out) in capsys.readouterr().out
    monkeypatch.delenv("ZOFRAME_OUT")
    assert main(args) == 0
    assert (tmp_path / "zoframe-out" / "minimax-figure1" / "summary.json").is_file()
