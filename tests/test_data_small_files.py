"""The LIBSVM loader and the data experiments on small files the tests write themselves.

These run on every machine, with or without the real data sets: the files are made here, in
LIBSVM's text format, under a temporary ``ZOFRAME_DATA``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import zoframe
from zoframe.errors import DataFormatError
from zoframe_datasets import load_libsvm


def write_libsvm(path: Path, rows: int, dim: int, seed: int, pos_share: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    """A sparse two-class data set written in LIBSVM format; returns its dense features and labels."""
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(rows) < pos_share, 1.0, -1.0)
    X = rng.normal(size=(rows, dim)) + 0.5 * y[:, None]
    X[rng.random((rows, dim)) < 0.5] = 0.0  # sparse rows; some rows may end up empty
    lines = []
    for i in range(rows):
        feats = " ".join(f"{j + 1}:{float(X[i, j])!r}" for j in np.flatnonzero(X[i]))
        lines.append(f"{int(y[i]):+d} {feats}".rstrip())
    path.write_text("\n".join(lines) + "\n")
    return X, y


def test_loader_reads_a_written_file_by_name_and_by_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = write_libsvm(tmp_path / "mytoy", rows=50, dim=7, seed=0)
    monkeypatch.setenv("ZOFRAME_DATA", str(tmp_path))
    by_name = load_libsvm("mytoy", n_features=7)
    by_path = load_libsvm(tmp_path / "mytoy", n_features=7)
    for Xs, ys in (by_name, by_path):
        np.testing.assert_array_equal(Xs.toarray(), X)  # repr() round-trips every float exactly
        np.testing.assert_array_equal(ys, y)


def test_loader_refuses_a_malformed_written_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.write_text("1 1:0.5 2:x\n")
    with pytest.raises(DataFormatError, match="bad"):
        load_libsvm(bad)


def test_dro_experiment_on_a_written_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The minimax DRO problem of the data experiments, built from a user's file, solved by ZO-SGDA."""
    from zoframe_minimax.problems import dro

    write_libsvm(tmp_path / "mytoy", rows=300, dim=12, seed=1)
    monkeypatch.setenv("ZOFRAME_DATA", str(tmp_path))
    problem = dro("mytoy", n=80, seed=0)
    assert (problem.n, problem.dim) == (80, 12)
    assert int((problem.labels > 0).sum()) == 20  # the 1:3 positive:negative subsample
    res = zoframe.minimize(problem, "zo-sgda", rng=0, max_iter=60)
    first, last = res.trace["grad_g_norm"][0], res.trace["grad_g_norm"][-1]
    assert np.isfinite(res.fun) and last < first


def test_pairwise_experiment_on_a_written_file(tmp_path: Path) -> None:
    """The pairwise-constrained classification problem from a user's file, through ADSZOG."""
    from zoframe_constrained.problems import pairwise

    write_libsvm(tmp_path / "mytoy", rows=120, dim=6, seed=2)
    problem = pairwise(str(tmp_path / "mytoy"), n_samples=None, seed=0)
    assert problem.dim == 6 and problem.m > 100
    res = zoframe.minimize(problem, "adszog", rng=0, max_iter=100)
    assert np.isfinite(res.fun) and res.max_violation is not None and np.isfinite(res.max_violation)


def test_reproduce_minimax_on_a_written_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``zoframe reproduce minimax`` end to end on a data set of the user's (a file in ZOFRAME_DATA)."""
    from zoframe.cli import main

    (tmp_path / "data").mkdir()
    write_libsvm(tmp_path / "data" / "mytoy", rows=400, dim=10, seed=3)
    monkeypatch.setenv("ZOFRAME_DATA", str(tmp_path / "data"))
    out = tmp_path / "fig"
    args = ["reproduce", "minimax", "--quick", "--datasets", "mytoy", "--out", str(out), "--no-progress"]
    assert main(args) == 0
    doc = json.loads((out / "curves.json").read_text())
    curves = doc["curves"]["mytoy"]
    assert set(curves) == {"zo-sgda", "zo-sgdmsa", "sgda", "sgdmsa"}
    for solver, c in curves.items():
        assert c["grad_g_norm_mean"][-1] < c["grad_g_norm_mean"][0], solver
