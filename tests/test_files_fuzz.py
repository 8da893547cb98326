"""Fuzz the files zoframe reads back and the bench's command line: a clear zoframe error, or a sound load.

In the spirit of the oracle fuzz (tests/test_oracle_fuzz.py): a valid file is written once, then
damaged in one seeded-random way per case, and read back the way a user would read it:

* ask/tell checkpoints (``Run.save``, resumed with ``Run(..., resume=path)``) and run checkpoints
  (``minimize(..., checkpoint=path)``, resumed with ``resume=path``): damaged bytes (truncated,
  flipped, padded, emptied), or a rewritten file whose JSON lost a key or holds a value of the wrong
  type, or whose arrays lost an entry or changed shape (the content hash recomputed, so only the
  reader's own checks stand between the forgery and the run);
* saved results (``Result.save`` / ``Result.load``): the same damage;
* bench stores (``bench.sqlite``): damaged bytes, or one cell of one row set to a value of the
  wrong kind;
* ``zoframe bench`` and ``zoframe solve`` argument lists drawn from valid and hostile values.

The only acceptable outcomes: the documented error (``CheckpointError`` / ``InvalidInputError`` /
``BenchStoreError`` naming the file; a ``zoframe: error:`` line or argparse's usage error), or a load
whose result is sound (a resumed run that finishes, a result that passes the load checks, a store
whose every row reads back). A raw ``KeyError``, ``BadZipFile``, ``JSONDecodeError``,
``sqlite3.DatabaseError`` or any other exception fails the test.
"""

from __future__ import annotations

import json
from pathlib import Path
import sqlite3
from typing import Any

import numpy as np
import pytest

import zoframe
from zoframe import InvalidInputError, Result, Run, RunFailedError
from zoframe.checkpoint import write_pair
from zoframe.errors import CheckpointError
from zoframe_bench.store import BenchStore, BenchStoreError, repair

CASES = 40

WRONG_VALUES: tuple[Any, ...] = (None, "text", 1.5, -1, 0, True, [], [1, "a"], {}, {"a": None}, "nan", 10**30)


def ls_problem() -> zoframe.FiniteSum:
    rng = np.random.default_rng(0)
    A = rng.standard_normal((12, 3))
    b = A @ np.arange(3.0)
    return zoframe.FiniteSum(lambda X, idx: (X @ A[idx].T - b[idx]) ** 2, n=12, x0=np.zeros(3))


# ------------------------------------------------------------------ the damage
def damage_bytes(blob: bytes, rng: np.random.Generator) -> bytes:
    how = rng.integers(5)
    if how == 0 or len(blob) < 8:
        return blob[: int(rng.integers(0, max(len(blob), 1)))]
    if how == 1:  # a few flipped bytes
        out = bytearray(blob)
        for pos in rng.integers(0, len(out), size=int(rng.integers(1, 6))):
            out[int(pos)] ^= int(rng.integers(1, 256))
        return bytes(out)
    if how == 2:
        return blob + bytes(rng.integers(0, 256, size=int(rng.integers(1, 64)), dtype=np.uint8))
    if how == 3:
        return b""
    start = int(rng.integers(0, len(blob)))
    return blob[:start] + bytes(min(64, len(blob) - start)) + blob[start + 64:]


def damage_doc(doc: Any, rng: np.random.Generator) -> Any:
    """A copy of a JSON document with one key removed or one value (at any depth) of the wrong type."""
    doc = json.loads(json.dumps(doc))
    paths: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in items:
            paths.append((node, k))
            walk(v)

    walk(doc)
    if not paths:
        return WRONG_VALUES[int(rng.integers(len(WRONG_VALUES)))]
    node, key = paths[int(rng.integers(len(paths)))]
    if isinstance(node, dict) and rng.random() < 0.4:
        del node[key]
    else:
        node[key] = WRONG_VALUES[int(rng.integers(len(WRONG_VALUES)))]
    return doc


def damage_arrays(arrays: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
    out = dict(arrays)
    key = sorted(out)[int(rng.integers(len(out)))]
    how = rng.integers(5)
    if how == 0:
        del out[key]
    elif how == 1:
        out[key] = np.zeros((2, 2, 2))
    elif how == 2:
        out[key] = np.asarray(out[key]).reshape(-1)[:1]
    elif how == 3:
        out[key] = np.full(np.shape(out[key]), np.nan)
    else:
        out[key] = np.array(["x"] * max(1, np.size(out[key])))
    return out


def _npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as d:
        return {k: d[k] for k in d.files}


# ------------------------------------------------------------------ ask/tell checkpoints
ASKTELL: dict[str, Any] = {"rng": 0, "max_iter": 4, "batch": 4, "q": 2}


@pytest.fixture(scope="module")
def asktell_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    prob = ls_problem()
    with Run(prob, "zo-sgd", steps="paper", **ASKTELL) as run:
        for _ in range(5):
            req = run.ask()
            assert req is not None
            run.tell(req, np.asarray(prob.components(req.points, req.indices)))
        return run.save(tmp_path_factory.mktemp("at") / "ck")


def _resume_and_finish(path: Path) -> None:
    prob = ls_problem()
    kwargs = {k: v for k, v in ASKTELL.items() if k != "rng"}
    with Run(prob, "zo-sgd", steps="paper", resume=path, **kwargs) as run:
        while (req := run.ask()) is not None:
            run.tell(req, np.asarray(prob.components(req.points, req.indices)))
        try:
            run.result()
        except RunFailedError as exc:  # a replay that meets the damage: the checkpoint's error, as the cause
            assert isinstance(exc.__cause__, CheckpointError) and str(path) in str(exc.__cause__), exc.__cause__
            raise exc.__cause__ from None


@pytest.mark.parametrize("case", range(CASES))
def test_fuzz_asktell_checkpoints(tmp_path: Path, asktell_checkpoint: Path, case: int) -> None:
    rng = np.random.default_rng([1, case])
    target = tmp_path / "ck.npz"
    kind = case % 3
    if kind == 0:
        target.write_bytes(damage_bytes(asktell_checkpoint.read_bytes(), rng))
    else:
        arrays = _npz(asktell_checkpoint)
        if kind == 1:
            meta = damage_doc(json.loads(str(arrays["meta"])), rng)
            arrays["meta"] = np.array(json.dumps(meta))
        else:
            meta = arrays.pop("meta")
            arrays = {**damage_arrays(arrays, rng), "meta": meta}
        np.savez(target, **arrays)  # type: ignore[arg-type]
    try:
        _resume_and_finish(target)
    except (CheckpointError, InvalidInputError) as exc:
        assert str(target) in str(exc) or "cannot resume" in str(exc) or "rng" in str(exc), exc


# ------------------------------------------------------------------ run checkpoints
RUN: dict[str, Any] = {"max_iter": 6, "batch": 4, "q": 2}


@pytest.fixture(scope="module")
def run_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("ck") / "ck"
    zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", rng=0, checkpoint=base, **{**RUN, "max_iter": 3})
    return base


@pytest.mark.parametrize("case", range(CASES))
def test_fuzz_run_checkpoints(tmp_path: Path, run_checkpoint: Path, case: int) -> None:
    rng = np.random.default_rng([2, case])
    base = tmp_path / "ck"
    doc = json.loads(run_checkpoint.with_suffix(".json").read_text())
    arrays = _npz(run_checkpoint.with_suffix(".npz"))
    kind = case % 4
    if kind == 0:  # bytes of the .npz (its hash no longer matches)
        (tmp_path / "ck.json").write_text(json.dumps(doc))
        (tmp_path / "ck.npz").write_bytes(damage_bytes(run_checkpoint.with_suffix(".npz").read_bytes(), rng))
    elif kind == 1:  # bytes of the .json
        (tmp_path / "ck.npz").write_bytes(run_checkpoint.with_suffix(".npz").read_bytes())
        (tmp_path / "ck.json").write_bytes(damage_bytes(run_checkpoint.with_suffix(".json").read_bytes(), rng))
    else:  # a consistent forgery: the hash recomputed
        doc.pop("npz_sha256")
        if kind == 2:
            doc = damage_doc(doc, rng)
        else:
            arrays = damage_arrays(arrays, rng)
        if not isinstance(doc, dict):
            doc = {"format": doc}
        write_pair(base, arrays, doc)
    try:
        res = zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", resume=base, **RUN)
    except (CheckpointError, InvalidInputError) as exc:
        assert str(base) in str(exc), exc
    else:
        assert res.nit == RUN["max_iter"] and np.isfinite(res.x).all()


# ------------------------------------------------------------------ saved results
@pytest.fixture(scope="module")
def saved_result(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("res") / "run"
    zoframe.minimize(ls_problem(), "zo-sgd", steps="paper", rng=0, max_iter=10, batch=4, q=2).save(str(base))
    return base


@pytest.mark.parametrize("case", range(CASES))
def test_fuzz_saved_results(tmp_path: Path, saved_result: Path, case: int) -> None:
    rng = np.random.default_rng([3, case])
    base = tmp_path / "run"
    doc = json.loads(saved_result.with_suffix(".json").read_text())
    arrays = _npz(saved_result.with_suffix(".npz"))
    kind = case % 4
    if kind == 0:
        (tmp_path / "run.json").write_text(json.dumps(doc))
        (tmp_path / "run.npz").write_bytes(damage_bytes(saved_result.with_suffix(".npz").read_bytes(), rng))
    elif kind == 1:
        (tmp_path / "run.npz").write_bytes(saved_result.with_suffix(".npz").read_bytes())
        (tmp_path / "run.json").write_bytes(damage_bytes(saved_result.with_suffix(".json").read_bytes(), rng))
    else:
        doc.pop("npz_sha256")
        if kind == 2:
            doc = damage_doc(doc, rng)
        else:
            arrays = damage_arrays(arrays, rng)
        if not isinstance(doc, dict):
            doc = {"status": doc}
        write_pair(base, arrays, doc)
    try:
        res = Result.load(base)
    except InvalidInputError as exc:
        assert str(base) in str(exc), exc
    else:  # what loads is a run Result.save could have written
        assert res.x.ndim == 1 and res.x_best.shape == res.x.shape
        assert not res.success or res.status is zoframe.Status.CONVERGED


# ------------------------------------------------------------------ bench stores
@pytest.fixture(scope="module")
def bench_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from zoframe_bench import run

    out = tmp_path_factory.mktemp("store")
    run("smoke", ["cobyla"], seeds=1, budget=40, out=out, progress=False, verify=False, plots=False)
    return out / "bench.sqlite"


COLUMNS = ("task", "suite", "instance", "solver", "seed", "status", "reason", "kind", "dim", "n", "m", "nfev",
           "nfev_by_kind", "result", "verification", "history", "x", "seconds")
CELL_VALUES: tuple[Any, ...] = (None, "", "{", "[]", "null", "nan", -1, 2**62, 1.5, b"\x00\x01", b"PK\x03\x04", "\ud7ff",
                                '{"suite": "smoke"}')


@pytest.mark.parametrize("case", range(CASES))
def test_fuzz_bench_stores(tmp_path: Path, bench_store: Path, case: int) -> None:
    from zoframe_bench import run

    rng = np.random.default_rng([4, case])
    store = tmp_path / "bench.sqlite"
    if case % 2 == 0:
        store.write_bytes(damage_bytes(bench_store.read_bytes(), rng))
    else:
        store.write_bytes(bench_store.read_bytes())
        con = sqlite3.connect(store)
        keys = [k for (k,) in con.execute("SELECT key FROM runs")]
        column = COLUMNS[int(rng.integers(len(COLUMNS)))]
        value = CELL_VALUES[int(rng.integers(len(CELL_VALUES)))]
        try:
            con.execute(f"UPDATE runs SET {column} = ? WHERE key = ?", (value, keys[int(rng.integers(len(keys)))]))
            con.commit()
        except sqlite3.IntegrityError:  # NOT NULL: the file stays sound
            pass
        con.close()
    before = store.read_bytes()
    try:
        with BenchStore(store) as db:
            count = db.check()
        sound = True
    except BenchStoreError as exc:
        assert str(store) in str(exc) and "--repair" in str(exc), exc
        sound = False
    if not sound:  # the bench refuses the store before running or writing anything
        with pytest.raises(BenchStoreError):
            run("smoke", ["cobyla"], seeds=1, budget=40, out=tmp_path, progress=False, verify=False, plots=False)
        assert store.read_bytes() == before and not (tmp_path / "summary.json").exists()
    rep = repair(store)  # keeps what is sound; the file it leaves reads back
    with BenchStore(store) as db:
        assert db.check() == rep.kept
    if sound:
        assert rep.moved_to is None and rep.kept == count
    else:
        assert rep.moved_to is not None and Path(rep.moved_to).read_bytes() == before


# ------------------------------------------------------------------ the bench's command line
OPTIONS: dict[str, tuple[str, ...]] = {
    "--solvers": ("cobyla", "", ",", "no-such", "cobyla,cobyla", "zo-sgd,nelder-mead", "\x00"),
    "--seeds": ("1", "0", "-3", "x", "1e3", ""),
    "--budget": ("20", "0", "-1", "nan", "1.5", "99999999999999999999"),
    "--budget-unit": ("raw", "full", "points"),
    "--suite-arg": ("scale=1", "scale=0", "scale=x", "bogus=1", "=1", "scale", "scale=[1]"),
    "--param": ("cobyla.rhobeg=0.5", "cobyla.bogus=1", "zo-sgd.eta=-1", "cobyla", "nope.x=1", "cobyla.rhobeg=x"),
    "--workers": ("0", "-2", "x"),
    "--feasibility-tol": ("1e-3", "-1", "nan", "inf", "x"),
    "--time-limit": ("30", "-1", "nan", "0"),
    "--store": ("{tmp}/s.sqlite", "{tmp}", "/proc/nope/s.sqlite", "{tmp}/file.txt/s.sqlite"),
    "--dask": ("tcp://127.0.0.1:1", "not an address"),
}


@pytest.mark.parametrize("case", range(CASES))
def test_fuzz_bench_command_line(tmp_path: Path, case: int, capsys: pytest.CaptureFixture[str]) -> None:
    from zoframe.cli import main

    rng = np.random.default_rng([5, case])
    (tmp_path / "file.txt").write_text("x")
    args = ["bench", "smoke" if rng.random() < 0.9 else "no-such-suite", "--quiet", "--no-plots", "--no-verify",
            "--out", str(tmp_path / "out"), "--budget", "20"]
    names = sorted(OPTIONS)
    for i in rng.choice(len(names), size=int(rng.integers(1, 4)), replace=False):
        name = names[int(i)]
        values = OPTIONS[name]
        args += [name, values[int(rng.integers(len(values)))].format(tmp=tmp_path)]
    if "--solvers" not in args:
        args += ["--solvers", "cobyla"]
    if "--workers" in args and "--dask" in args:
        args.remove("--dask")
    try:
        code = main(args)
    except SystemExit as exc:  # argparse: usage and one error line, exit code 2
        err = capsys.readouterr().err
        assert exc.code == 2 and "error:" in err and "Traceback" not in err, (args, err)
        return
    err = capsys.readouterr().err.strip().splitlines()
    if code == 0:
        assert (tmp_path / "out" / "summary.json").exists(), args
    else:
        errors = [ln for ln in err if ln.startswith("zoframe: error: ")]
        assert code == 2 and len(errors) == 1 and "Traceback" not in "\n".join(err), (args, err)


SOLVE_OPTIONS: dict[str, tuple[str, ...]] = {
    "--solver": ("zo-sgd", "cobyla", "dszog", "no-such", ""),
    "--problem-arg": ("dim=3", "dim=0", "dim=x", "dim=-2", "bogus=1", "dim", "=3", "cond=nan", "cond=-1"),
    "--param": ("eta=0.1", "eta=-1", "eta=nan", "bogus=1", "q=0", "eta", "q=1e99", "batch=[1]"),
    "--seed": ("0", "-1", "x", "99999999999999999999"),
    "--max-iter": ("5", "0", "-1", "x"),
    "--max-calls": ("200", "0", "-5", "1"),
    "--max-time": ("5", "0", "-1", "nan", "inf"),
    "--estimator": ("gaussian", "no-such"),
    "--estimator-param": ("q=2", "bogus=1", "q=x"),
    "--output": ("{tmp}/res", "{tmp}/file.txt/res", "/proc/nope/res"),
}


@pytest.mark.parametrize("case", range(CASES))
def test_fuzz_solve_command_line(tmp_path: Path, case: int, capsys: pytest.CaptureFixture[str]) -> None:
    from zoframe.cli import main

    rng = np.random.default_rng([6, case])
    (tmp_path / "file.txt").write_text("x")
    args = ["solve", "quadratic" if rng.random() < 0.9 else "no-such-problem", "--no-progress",
            "--problem-arg", "dim=3", "--max-iter", "5"]
    names = sorted(SOLVE_OPTIONS)
    for i in rng.choice(len(names), size=int(rng.integers(1, 4)), replace=False):
        values = SOLVE_OPTIONS[names[int(i)]]
        args += [names[int(i)], values[int(rng.integers(len(values)))].format(tmp=tmp_path)]
    try:
        code = main(args)
    except SystemExit as exc:  # argparse: usage and one error line, exit code 2
        err = capsys.readouterr().err
        assert exc.code == 2 and "error:" in err and "Traceback" not in err, (args, err)
        return
    err = capsys.readouterr().err.strip().splitlines()
    assert code in (0, 1, 2), (args, code)
    if code == 2:
        assert len([ln for ln in err if ln.startswith("zoframe: error: ")]) == 1, (args, err)
