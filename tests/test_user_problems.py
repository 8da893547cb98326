"""A user's own problem wherever a problem name is taken: rate_study, verify, the bench and the CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest

import zoframe
from zoframe.cli import main
from zoframe.errors import InvalidInputError, UnknownNameError
from zoframe.userproblem import fingerprint, load_reference, problem_source

MODULE = textwrap.dedent(
    """
    import numpy as np
    import zoframe


    def _f(X):
        return ((X - 1.0) ** 2).sum(axis=1)


    def make(dim: int = 3, shift: float = 1.0):
        return zoframe.FiniteSum(lambda X: ((X - shift) ** 2).sum(axis=1), x0=np.zeros(dim))


    def picklable(dim: int = 3):
        return zoframe.FiniteSum(_f, x0=np.zeros(dim))


    ready = make(4)
    several = {"small": make(2), "large": make(5)}
    not_a_problem = 42


    def returns_junk():
        return "junk"
    """
)


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``userprobs.py`` in a directory on sys.path (and the working directory)."""
    path = tmp_path / "userprobs.py"
    path.write_text(MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("userprobs", None)
    return path


def _quadratic() -> zoframe.FiniteSum:
    return zoframe.FiniteSum(lambda X: ((X - 1.0) ** 2).sum(axis=1), x0=np.zeros(4))


def _sq(X: np.ndarray) -> np.ndarray:
    return ((X - 2.0) ** 2).sum(axis=1)  # type: ignore[no-any-return]


def module_factory(dim: int = 3) -> zoframe.FiniteSum:
    return zoframe.FiniteSum(_sq, x0=np.zeros(dim))


# --------------------------------------------------------------------------- references and sources
def test_references_resolve_modules_files_and_say_what_failed(user_module: Path) -> None:
    assert callable(load_reference("userprobs:make"))
    assert load_reference(f"{user_module}:ready").kind == "finite_sum"
    with pytest.raises(InvalidInputError, match="No module named 'no_such_module_xyz'"):
        load_reference("no_such_module_xyz:make")
    with pytest.raises(InvalidInputError, match="no file"):
        load_reference("missing/file.py:make")
    with pytest.raises(InvalidInputError, match=r"has no attribute 'nope'.*make"):
        load_reference("userprobs:nope")
    with pytest.raises(InvalidInputError, match="neither a problem"):
        problem_source("userprobs:not_a_problem")
    with pytest.raises(InvalidInputError, match="returned str, not a problem"):
        problem_source("userprobs:returns_junk").build()
    with pytest.raises(UnknownNameError):  # a plain unknown name stays an unknown-name error
        problem_source("no-such-problem")


def test_a_registered_name_wins_and_objects_take_no_arguments(user_module: Path) -> None:
    assert problem_source("quadratic").kind == "registered"
    src = problem_source("userprobs:ready")
    assert src.factory is None and src.build() is load_reference("userprobs:ready")
    with pytest.raises(InvalidInputError, match="takes no arguments"):
        src.build(dim=3)
    built = problem_source("userprobs:make").build(dim=2)
    assert built.x0.shape == (2,)


def test_fingerprints_tell_problems_apart_and_repeat() -> None:
    a, b = module_factory(3), module_factory(3)
    assert fingerprint(a) == fingerprint(b)  # the same problem built twice: a study of it resumes
    assert fingerprint(module_factory(4)) != fingerprint(a)
    # unpicklable (a lambda): the type and x0 decide
    assert fingerprint(_quadratic()) != fingerprint(zoframe.FiniteSum(lambda X: X.sum(1), x0=np.ones(4)))
    assert fingerprint([a, module_factory(4)]) != fingerprint([a, a])
    # unpicklable problems with the same type, shape and x0: their functions' code and closures decide
    one = zoframe.FiniteSum(lambda X: (X**2).sum(axis=1), x0=np.zeros(2))
    two = zoframe.FiniteSum(lambda X: (X**4).sum(axis=1), x0=np.zeros(2))
    assert fingerprint(one) != fingerprint(two)

    def shifted(c: float) -> zoframe.FiniteSum:
        return zoframe.FiniteSum(lambda X: ((X - c) ** 2).sum(axis=1), x0=np.zeros(2))

    assert fingerprint(shifted(1.0)) == fingerprint(shifted(1.0)) != fingerprint(shifted(2.0))


# --------------------------------------------------------------------------- rate_study and verify
def test_rate_study_takes_a_problem_object_and_a_factory(tmp_path: Path) -> None:
    from zoframe_verify import rate_study

    kw = dict(seeds=2, budget=150, params={"eta": 0.05, "steps": "paper"}, n_boot=50, db=tmp_path / "runs.sqlite")
    rep = rate_study("zo-sgd", _quadratic(), **kw)
    assert rep.executed == 2 and rep.config.problem.startswith("finite-sum@")
    assert all(r.values.size == 150 and r.values[-1] < r.values[0] for r in rep.runs)
    fac = rate_study("zo-sgd", module_factory, problem_args={"dim": 2}, **kw)
    assert fac.executed == 2 and "module_factory" in fac.config.problem
    again = rate_study("zo-sgd", module_factory, problem_args={"dim": 2}, **kw)  # resumed from db
    assert again.executed == 0 and again.reused == 2
    np.testing.assert_array_equal(again.runs[0].values, fac.runs[0].values)
    with pytest.raises(InvalidInputError, match="takes no arguments"):
        rate_study("zo-sgd", _quadratic(), problem_args={"dim": 3}, seeds=1, budget=10)


def test_rate_study_refuses_an_unpicklable_problem_for_workers() -> None:
    from zoframe_verify import rate_study

    with pytest.raises(InvalidInputError, match="cannot be sent to worker processes"):
        rate_study("zo-sgd", _quadratic(), seeds=2, budget=10, workers=2)


def test_rate_study_by_reference_on_workers(user_module: Path) -> None:
    from zoframe_verify import rate_study

    serial = rate_study("zo-sgd", f"{user_module}:make", problem_args={"dim": 2}, seeds=2, budget=60,
                        params={"eta": 0.05}, n_boot=20)
    pooled = rate_study("zo-sgd", f"{user_module}:make", problem_args={"dim": 2}, seeds=2, budget=60,
                        params={"eta": 0.05}, n_boot=20, workers=2)
    for a, b in zip(serial.runs, pooled.runs):
        np.testing.assert_array_equal(a.values, b.values)  # the same runs, rebuilt in each worker


def test_an_edited_problem_is_not_resumed_from_old_runs(tmp_path: Path) -> None:
    from zoframe_verify import rate_study

    src = tmp_path / "edited.py"
    body = "import numpy as np, zoframe\n\ndef make():\n    return zoframe.FiniteSum(lambda X: ((X - {c}) ** 2).sum(axis=1), x0=np.zeros(3))\n"
    kw = dict(seeds=2, budget=40, params={"eta": 0.05}, n_boot=10, db=tmp_path / "runs.sqlite")

    def study(c: float) -> Any:
        src.write_text(body.format(c=c), encoding="utf-8")
        for name in [m for m in sys.modules if m.startswith("zoframe_user_edited")]:
            del sys.modules[name]  # a new session would import the file afresh
        return rate_study("zo-sgd", f"{src}:make", **kw)

    assert study(1.0).executed == 2
    assert study(1.0).reused == 2  # the same code: resumed
    assert study(3.0).executed == 2  # the file changed: new runs, not the old ones


def test_verify_takes_objects_factories_and_references(user_module: Path) -> None:
    from zoframe_verify import verify

    x = np.ones(3)
    by_object = verify(module_factory(3), np.full(3, 2.0))
    assert by_object.passed
    by_factory = verify(module_factory, np.full(3, 2.0), problem_args={"dim": 3})
    assert by_factory.measures["grad_norm"] == pytest.approx(by_object.measures["grad_norm"])
    by_ref = verify("userprobs:make", x, problem_args={"dim": 3})
    assert by_ref.passed
    assert not verify("userprobs:make", np.zeros(3), problem_args={"dim": 3}).passed


# --------------------------------------------------------------------------- bench
def test_python_bench_of_user_problems(tmp_path: Path) -> None:
    import zoframe_bench

    out = zoframe_bench.run({"near": module_factory(2), "far": _quadratic()}, ["nelder-mead"], budget=200,
                            out=tmp_path / "b", progress=False, plots=False, verify=False)
    assert sorted(t.instance for t in out.tasks) == ["far", "near"]
    assert out.ran == 2
    again = zoframe_bench.run({"near": module_factory(2), "far": _quadratic()}, ["nelder-mead"], budget=200,
                              out=tmp_path / "b", progress=False, plots=False, verify=False)
    assert again.ran == 0 and again.reused == 2
    one = zoframe_bench.run(module_factory, ["nelder-mead"], suite_args={"dim": 3}, budget=200,
                            out=tmp_path / "c", progress=False, plots=False, verify=False)
    assert [t.instance for t in one.tasks] == ["module_factory"]
    with pytest.raises(InvalidInputError, match="run serially"):
        zoframe_bench.run(_quadratic(), ["nelder-mead"], budget=50, out=tmp_path / "d", workers=2)


# --------------------------------------------------------------------------- the command line
def test_cli_solve_verify_rate_and_bench_take_module_attr(
    user_module: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    res = tmp_path / "run"
    code = main(["solve", "userprobs:make", "--problem-arg", "dim=2", "--solver", "nelder-mead",
                 "--max-calls", "400", "--no-progress", "-o", str(res)])
    assert code in (0, 1)
    assert json.loads(Path(f"{res}.json").read_text())["problem"] == "userprobs:make"
    capsys.readouterr()
    assert main(["verify", str(res)]) == 0  # the saved run names its problem by reference
    assert "verdict: PASS" in capsys.readouterr().out
    code = main(["rate", "zo-sgd", f"{user_module}:make", "--seeds", "2", "--budget", "50", "-p", "eta=0.05",
                 "--db", str(tmp_path / "r.sqlite"), "--out", str(tmp_path / "rate"), "--bootstrap", "20",
                 "--no-progress"])
    assert code == 0 and "zo-sgd on" in capsys.readouterr().out
    code = main(["bench", "userprobs:several", "--solvers", "nelder-mead", "--budget", "100", "--out",
                 str(tmp_path / "bench"), "--no-plots", "--no-verify", "--quiet"])
    assert code == 0
    capsys.readouterr()
    assert main(["bench", "userprobs:several", "--list"]) == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(d["name"], d["dim"]) for d in listed] == [("small", 2), ("large", 5)]
    saved = tmp_path / "mine"
    zoframe.minimize(module_factory(3), "nelder-mead", max_calls=400).save(saved)  # saved from Python: no name
    assert main(["verify", str(saved), "--problem", "userprobs:picklable", "--problem-arg", "dim=3"]) == 1
    assert "verdict: FAIL" in capsys.readouterr().out  # x* = 2 for module_factory, 1 for picklable
    assert main(["verify", str(saved), "--problem", f"{__file__}:module_factory", "--problem-arg", "dim=3"]) == 0
    assert "verdict: PASS" in capsys.readouterr().out  # the factory that made the run, by file path
    from zoframe_bench.store import BenchStore

    with BenchStore(tmp_path / "bench" / "bench.sqlite") as db:
        rows = list(db.rows())
    assert sorted(r.task.instance for r in rows) == ["large", "small"]
    assert {r.task.suite for r in rows} == {"userprobs:several"} and all(r.status != "ERROR" for r in rows)


def test_cli_info_describes_a_problem_of_ones_own(user_module: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "userprobs:make"]) == 0
    out = capsys.readouterr().out
    assert "a factory" in out and "dim: int = 3, shift: float = 1.0" in out and "finite_sum (dim 3" in out
    assert main(["info", f"{user_module}:ready"]) == 0
    assert "a problem object" in (out := capsys.readouterr().out) and "dim 4" in out
    assert main(["info", "userprobs:gone"]) == 2
    assert "no attribute 'gone'" in capsys.readouterr().err
    assert main(["info", "no-such-thing"]) == 2  # a plain unknown name: the registry's error, as before
    assert "unknown component" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["solve", "no_such_module_xyz:make"], "No module named 'no_such_module_xyz'"),
        (["solve", "userprobs:make", "--problem-arg", "dimm=2"], "no argument 'dimm'"),
        (["solve", "userprobs:ready", "--problem-arg", "dim=2"], "takes no arguments"),
        (["rate", "zo-sgd", "nofile.py:make", "--budget", "5"], "no file"),
        (["bench", "userprobs:nothing", "--solvers", "cobyla"], "no attribute 'nothing'"),
    ],
)
def test_cli_errors_for_references_are_one_line(
    user_module: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("zoframe: error:") and message in err and "Traceback" not in err


def test_console_script_finds_a_module_in_the_working_directory(user_module: Path) -> None:
    """Like the ``zoframe`` console script, a launcher elsewhere does not put the working directory on sys.path."""
    launcher = user_module.parent / "bin" / "launch.py"
    launcher.parent.mkdir()
    launcher.write_text(
        "import sys\nfrom zoframe.cli import main\n"
        "sys.exit(main(['solve', 'userprobs:make', '--solver', 'nelder-mead', '--max-calls', '300', '--no-progress']))\n",
        encoding="utf-8",
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and Path(p).resolve() != user_module.parent.resolve())
    proc = subprocess.run([sys.executable, str(launcher)], cwd=user_module.parent, env=env, capture_output=True,
                          text=True, timeout=120)
    assert "Result(solver='nelder-mead'" in proc.stdout, proc.stderr


def test_bounds_with_none_leave_that_side_free() -> None:
    """``bounds=(0, None)`` is x >= 0 (the upper side free), ``(None, 1)`` is x <= 1: None was read as -inf on both
    sides, so ``(0, None)`` was refused as a lower bound above its upper one."""
    import zoframe

    up = zoframe.FiniteSum(lambda X: (X**2).sum(axis=1), x0=np.ones(2), bounds=(0, None)).feasible_set
    assert np.array_equal(up.lower, [0.0, 0.0]) and np.all(np.isposinf(up.upper))
    down = zoframe.Constrained(lambda X: X.sum(axis=1), lambda X, idx: X[:, :1] + 0.0 * idx[None, :], m=1,
                               x0=np.zeros(2), bounds=(None, 1.0)).feasible_set  # fmt: skip
    assert np.all(np.isneginf(down.lower)) and np.array_equal(down.upper, [1.0, 1.0])
