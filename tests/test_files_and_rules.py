"""Requests bound to their run, saved results and checkpoints checked on load, one rule for run errors,
atomic caches, and the LIBSVM index bound."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zoframe
from zoframe import InvalidInputError, ProblemShape, Result, Run, RunFailedError
from zoframe.errors import CheckpointError, DataFormatError


def ls_problem() -> zoframe.FiniteSum:
    rng = np.random.default_rng(0)
    A = rng.standard_normal((20, 4))
    b = A @ np.arange(4.0)
    return zoframe.FiniteSum(lambda X, idx: (X @ A[idx].T - b[idx]) ** 2, n=20, x0=np.zeros(4))


def values(problem: Any, req: Any) -> np.ndarray:
    return np.asarray(problem.components(req.points, req.indices))


# --------------------------------------------------------------------------- ask/tell
def test_a_request_of_another_run_is_refused_even_with_the_same_id() -> None:
    prob = ls_problem()
    with Run(prob, "zo-sgd", steps="paper", rng=0, max_iter=3, batch=5, q=2) as a, Run(prob, "zo-sgd", steps="paper", rng=0, max_iter=3, batch=5, q=2) as b:
        ra, rb = a.ask(), b.ask()
        assert ra is not None and rb is not None and ra.id == rb.id
        with pytest.raises(InvalidInputError, match="this run did not ask"):
            a.tell(rb, values(prob, rb))
        a.tell(ra, values(prob, ra))  # its own request is still taken
        b.tell(rb, values(prob, rb))
        assert a.ask() is not None


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_problem_shape_refuses_a_non_finite_start(bad: float) -> None:
    with pytest.raises(InvalidInputError, match="x0 contains NaN or infinity"):
        ProblemShape("finite_sum", dim=3, x0=np.array([0.0, bad, 1.0]), n=5)
    with pytest.raises(InvalidInputError, match="y0 contains NaN or infinity"):
        ProblemShape("minimax", dim=2, x0=np.zeros(2), dim_y=2, y0=np.array([bad, 0.0]))
    with pytest.raises(InvalidInputError, match="x0 contains NaN or infinity"):  # as minimize refuses it
        zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", rng=0, max_iter=2, x0=np.array([0.0, bad, 0.0, 0.0]))


@pytest.mark.parametrize("name, value", [("checkpoint", "ck"), ("checkpoint_every", 2), ("executor", object()),
                                         ("chunks", 2), ("progress", True)])
def test_run_refuses_the_arguments_it_does_not_serve(tmp_path: Path, name: str, value: Any) -> None:
    with pytest.raises(InvalidInputError, match=f"{name}= is not available with ask/tell"):
        Run(ls_problem(), "zo-sgd", steps="paper", rng=0, max_iter=3, **{name: tmp_path / value if name == "checkpoint" else value})
    assert not list(tmp_path.iterdir())


def test_an_asktell_checkpoint_of_a_newer_format_says_so(tmp_path: Path) -> None:
    prob = ls_problem()
    with Run(prob, "zo-sgd", steps="paper", rng=0, max_iter=3, batch=5, q=2) as run:
        req = run.ask()
        assert req is not None
        run.tell(req, values(prob, req))
        path = run.save(tmp_path / "ck")
    with np.load(path) as d:
        arrays = {k: d[k] for k in d.files}
    doc = json.loads(str(arrays["meta"]))
    for key, val in (("format", "zoframe-asktell/2"), ("format_version", 2)):
        np.savez(tmp_path / "newer.npz", **{**arrays, "meta": np.array(json.dumps({**doc, key: val}))})
        with pytest.raises(CheckpointError, match=r"newer\.npz.*upgrade zoframe"):
            Run(prob, "zo-sgd", steps="paper", max_iter=3, batch=5, q=2, resume=tmp_path / "newer.npz")


# --------------------------------------------------------------------------- one rule for run errors
class Boom(Exception):
    pass


@pytest.mark.parametrize("at_call", [1, 4])
def test_an_exception_of_the_users_function_ends_the_run_the_same_way_at_any_call(at_call: int) -> None:
    calls = {"n": 0}

    def f(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        calls["n"] += 1
        if calls["n"] == at_call:
            raise Boom(f"call {at_call}")
        return (X[:, :1] - idx[None, :]) ** 2

    prob = zoframe.FiniteSum(f, n=3, x0=np.zeros(2))
    with pytest.raises(RunFailedError, match=f"Boom: call {at_call}") as info:
        zoframe.minimize(prob, "zo-sgd", steps="paper", rng=0, max_iter=10, record_every=1)
    assert isinstance(info.value.__cause__, Boom)
    res = info.value.result
    assert res.status is zoframe.Status.FAILED and not res.success
    if at_call == 1:  # nothing computed: the result is the start
        assert res.nit == 0 and np.array_equal(res.x, np.zeros(2))


def test_a_non_finite_value_at_the_first_call_is_a_run_failure_too() -> None:
    prob = zoframe.FiniteSum(lambda X, idx: np.full((X.shape[0], idx.size), np.nan), n=3, x0=np.zeros(2))
    with pytest.raises(RunFailedError) as info:
        zoframe.minimize(prob, "zo-sgd", steps="paper", rng=0, max_iter=3)
    assert isinstance(info.value.__cause__, zoframe.NonFiniteValueError)


@pytest.mark.parametrize("tol", [-1.0, float("nan"), float("inf"), "0.1", True])
def test_minimize_refuses_a_bad_feasibility_tol(tol: Any) -> None:
    with pytest.raises(InvalidInputError, match="feasibility_tol must be a finite number >= 0"):
        zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", rng=0, max_iter=2, feasibility_tol=tol)


# --------------------------------------------------------------------------- saved results
@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Result]:
    res = zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", rng=0, max_iter=20, batch=5, q=2)
    base = tmp_path_factory.mktemp("res") / "run"
    res.save(str(base))
    return base, res


def _rewrite(src: Path, dst: Path, change: dict[str, Any] | None = None, arrays: dict[str, Any] | None = None) -> Path:
    """A copy of a saved run with some JSON fields or arrays changed, its hash recomputed (a consistent forgery)."""
    from zoframe.checkpoint import write_pair

    doc = json.loads(src.with_suffix(".json").read_text())
    doc.pop("npz_sha256", None)
    with np.load(src.with_suffix(".npz")) as d:
        arrs = {k: d[k] for k in d.files}
    write_pair(dst, {**arrs, **(arrays or {})}, {**doc, **(change or {})})
    return dst


def test_a_saved_result_records_its_format_and_reloads(saved: tuple[Path, Result], tmp_path: Path) -> None:
    base, res = saved
    assert json.loads(base.with_suffix(".json").read_text())["result_format"] == 1
    back = Result.load(base)
    assert np.array_equal(back.x, res.x) and back.status == res.status
    newer = _rewrite(base, tmp_path / "newer", {"result_format": 2})
    with pytest.raises(InvalidInputError, match=r"newer has format 2, written by a newer zoframe.*upgrade"):
        Result.load(newer)
    doc = json.loads(base.with_suffix(".json").read_text())  # runs saved before the field existed still load
    doc.pop("result_format")
    (tmp_path / "legacy.json").write_text(json.dumps(doc))
    (tmp_path / "legacy.npz").write_bytes(base.with_suffix(".npz").read_bytes())
    assert Result.load(tmp_path / "legacy").nit == res.nit


@pytest.mark.parametrize("change, arrays, words", [
    ({"success": True, "status": "MAX_ITER"}, None, "success=True with status MAX_ITER"),
    ({"success": True, "status": "CONVERGED", "fun": float("nan")}, None, "success=True with status CONVERGED"),
    (None, {"x": np.zeros((3, 3))}, r"x has shape \(3, 3\)"),
    (None, {"x_best": np.zeros(7)}, "x_best has shape"),
    ({"nfev": -5}, None, "nfev is negative"),
    ({"feasible": True, "max_violation": 1.0, "feasibility_tol": 1e-3}, None, "feasible=True with max_violation=1.0"),
    (None, {"trace.calls": np.zeros(2)}, "the trace columns"),
])
def test_a_forged_but_consistent_result_is_refused(
    saved: tuple[Path, Result], tmp_path: Path, change: dict[str, Any] | None, arrays: dict[str, Any] | None, words: str
) -> None:
    forged = _rewrite(saved[0], tmp_path / "forged", change, arrays)
    with pytest.raises(InvalidInputError, match=rf"forged is not consistent: {words}"):
        Result.load(forged)


# --------------------------------------------------------------------------- driver checkpoints
def test_a_checkpoint_of_a_newer_format_says_so(tmp_path: Path) -> None:
    prob = ls_problem()
    zoframe.minimize(prob, "zo-sgd", steps="paper", rng=0, max_iter=4, batch=5, q=2, checkpoint=tmp_path / "ck")
    js = tmp_path / "ck.json"
    doc = json.loads(js.read_text())
    js.write_text(json.dumps({**doc, "format": 3}))
    with pytest.raises(CheckpointError, match=r"format 3, written by a newer zoframe.*upgrade zoframe"):
        zoframe.minimize(prob, "zo-sgd", steps="paper", rng=0, max_iter=8, batch=5, q=2, resume=tmp_path / "ck")


# --------------------------------------------------------------------------- atomic caches
def test_the_admm_reference_cache_is_written_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from zoframe_admm import reproduce

    path = tmp_path / "reference-x.json"
    reproduce.write_atomically(path, '{"old": 1}')
    assert json.loads(path.read_text()) == {"old": 1}

    def crash(src: Any, dst: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(reproduce.os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        reproduce.write_atomically(path, '{"new": 2, "long": "' + "x" * 10_000 + '"}')
    assert json.loads(path.read_text()) == {"old": 1}  # the old entry, whole
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary left behind


def test_the_hyper_parameter_cache_is_written_atomically_and_read_carefully(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from zoframe_constrained import reproduce

    path = tmp_path / "hparams.json"
    assert reproduce.read_hparams(path) == {}
    reproduce.write_hparams(path, {"fairness|D1|adszog": {"eta_w": 0.01}})
    assert reproduce.read_hparams(path) == {"fairness|D1|adszog": {"eta_w": 0.01}}

    def crash(src: Any, dst: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(reproduce.os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        reproduce.write_hparams(path, {"a": {"b": 1}, "c": {"d": 2}})
    assert reproduce.read_hparams(path) == {"fairness|D1|adszog": {"eta_w": 0.01}}
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    for damaged in ('{"fairness|D1|adszog": {"eta_w": 0.0', "[1, 2]", '{"cell": 3}', "\xff\xfe"):
        path.write_text(damaged, encoding="latin-1")
        with pytest.raises(InvalidInputError, match=r"hyper-parameter cache .*hparams\.json is damaged.*move it away"):
            reproduce.read_hparams(path)


# --------------------------------------------------------------------------- LIBSVM
@pytest.mark.parametrize("token", ["99999999999999999999:1", "2147483648:1"])
def test_a_huge_libsvm_index_is_a_data_format_error(tmp_path: Path, token: str) -> None:
    from zoframe_datasets.libsvm import clear_cache, load_libsvm, parse_careful

    path = tmp_path / "huge.svm"
    path.write_text(f"1 1:0.5 3:1\n1 {token}\n")
    clear_cache()
    for load in (load_libsvm, parse_careful):
        with pytest.raises(DataFormatError, match=rf"huge\.svm, line 2: the feature index .* in '{token}' is too large"):
            load(path)


def test_solve_output_that_cannot_be_written_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from zoframe.cli import main

    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    code = main(["solve", "quadratic", "--problem-arg", "dim=3", "--max-iter", "5", "--no-progress",
                 "--output", str(blocker / "res")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("zoframe: error: --output") and "not a directory" in err[0]
