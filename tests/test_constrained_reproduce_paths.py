"""``zoframe reproduce dszog`` writes under the project's output directory by default and prints every file."""

from __future__ import annotations

from pathlib import Path

import pytest

from zoframe.cli import main
from zoframe_constrained.reproduce import WRITTEN, output_dir

TINY = ["--table", "fairness", "--datasets", "D1", "--methods", "adszog", "--seeds", "1", "--tune", "none",
        "--iters", "5", "--baseline-iters", "2", "--time-cap", "5", "--n-samples", "200", "--no-progress"]  # fmt: skip


def test_default_root_follows_zoframe_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ZOFRAME_OUT", raising=False)
    assert output_dir(None) == tmp_path / "zoframe-out" / "dszog-reproduction"
    monkeypatch.setenv("ZOFRAME_OUT", str(tmp_path / "elsewhere"))
    assert output_dir(None) == tmp_path / "elsewhere" / "dszog-reproduction"
    assert output_dir("given/dir") == Path("given/dir")  # an explicit --out is used as given


def test_default_run_writes_under_zoframe_out_and_prints_every_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ZOFRAME_OUT", str(tmp_path / "out"))
    assert main(["reproduce", "dszog", *TINY]) == 0
    table = tmp_path / "out" / "dszog-reproduction" / "fairness"
    printed = capsys.readouterr().out
    for name in WRITTEN:
        assert (table / name).is_file(), name
        assert str(table / name) in printed, name
    assert not (tmp_path / "zoframe-reproduce").exists()
