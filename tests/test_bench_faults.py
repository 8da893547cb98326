"""The bench lab under faults: time limits, workers that die with the bench, damaged stores, bad options."""

from __future__ import annotations

import json
import os
from pathlib import Path
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from types import SimpleNamespace
from typing import Any

import pytest

from zoframe.cli import main
from zoframe.errors import InvalidInputError
from zoframe.registry import Registry
from zoframe_bench import run
from zoframe_bench.profiles import failure_lines
from zoframe_bench.store import BenchStore, BenchStoreError, repair

HANG_PLUGIN = '''
from dataclasses import dataclass
import time
from types import SimpleNamespace

from zoframe import hookimpl
from zoframe.specs import SolverSpec

KINDS = frozenset({"finite_sum"})  # 3 of the 7 smoke instances; the others are SKIPPED at once


@dataclass
class Hang:
    """Never returns from its first step; ``stubborn`` also swallows every exception raised in it;
    ``crash`` ends its process instead."""

    stubborn: bool = False
    crash: bool = False
    problem_kinds = KINDS

    def init(self, oracle, x0, rng):
        return SimpleNamespace(x=x0.copy())

    def step(self, oracle, state, rng):
        if self.crash:
            import os
            os._exit(7)
        while True:
            try:
                time.sleep(0.02)
            except BaseException:
                if not self.stubborn:
                    raise


@hookimpl
def zoframe_solvers():
    return [SolverSpec("hang", Hang, "never returns", "(test)", KINDS)]
'''

SMALL: dict[str, Any] = {"suite": "smoke", "seeds": 1, "budget": 60, "progress": False, "verify": False,
                         "plots": False}


def _hang_registry() -> Registry:
    ns: dict[str, Any] = {}
    exec(compile(HANG_PLUGIN, "hangplugin", "exec"), ns)  # the test's own plugin text
    reg = Registry()
    reg.register(SimpleNamespace(zoframe_solvers=ns["zoframe_solvers"]), name="hangtest")
    return reg


def _plugin_env(tmp_path: Path) -> dict[str, str]:
    """An environment whose Python finds the ``hang`` solver through an entry point (workers too)."""
    from helpers import fake_distribution

    site = tmp_path / "site"
    site.mkdir()
    (site / "hangplugin.py").write_text(HANG_PLUGIN)
    fake_distribution(site, "zoframe-hangtest", {"hangtest": "hangplugin"})
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), *[p for p in sys.path if p]])
    return env


# --------------------------------------------------------------------------- time limits
def test_a_hanging_run_becomes_a_timeout_row_and_the_bench_goes_on(tmp_path: Path) -> None:
    reg = _hang_registry()
    run(solvers=["nelder-mead"], out=tmp_path / "warm", time_limit=None, **SMALL)  # its imports are not timed below
    res = run(solvers=["hang", "nelder-mead"], out=tmp_path, registry=reg, time_limit=0.5, **{**SMALL, "plots": True})
    with BenchStore(tmp_path / "bench.sqlite") as db:
        rows = list(db.rows())
    hang = [r for r in rows if r.task.solver == "hang" and r.status != "SKIPPED"]
    assert len(hang) == 3 and {r.status for r in hang} == {"TIMEOUT"}
    assert all("time limit of 0.5 s" in r.reason and r.result["time_limit"] == 0.5 for r in hang)
    assert {r.status for r in rows if r.task.solver == "nelder-mead"} - {"SKIPPED"} <= {"CONVERGED", "BUDGET"}
    # failures show in every summary: summary.json, summary.md (printed by the command), profile legends
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary == json.loads(json.dumps(res.summary))
    e = summary["solvers"]["hang"]
    assert e["failed_runs"] == 3 and e["failures"]["TIMEOUT"]["count"] == 3
    assert e["failures"]["TIMEOUT"]["first"].startswith("the run passed the bench's time limit of 0.5 s")
    assert summary["solvers"]["nelder-mead"]["failed_runs"] == 0 and summary["solvers"]["nelder-mead"]["failures"] == {}
    md = (tmp_path / "summary.md").read_text()
    assert "| hang | 7 | 3 TIMEOUT |" in md and "| nelder-mead | 7 | 0 |" in md
    assert "- hang: 3 of 7 runs TIMEOUT; first: the run passed" in md
    assert failure_lines(res.summary) == [ln[2:] for ln in md.splitlines() if ln.startswith("- ")]
    prof = json.loads((tmp_path / "profiles.json").read_text())
    assert prof["labels"] == ["hang (3 of 7 runs failed)", "nelder-mead"]
    assert (tmp_path / "performance_profiles.png").exists()
    # the same limit again: nothing is run again; a larger limit runs the TIMEOUT rows again
    assert run(solvers=["hang", "nelder-mead"], out=tmp_path, registry=reg, time_limit=0.5, **SMALL).ran == 0
    again = run(solvers=["hang"], out=tmp_path, registry=reg, time_limit=0.6, **SMALL)
    assert again.ran == 3
    with BenchStore(tmp_path / "bench.sqlite") as db:
        assert {r.result["time_limit"] for r in db.rows() if r.status == "TIMEOUT"} == {0.6}


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="the serial time limit is a POSIX timer")
def test_the_serial_time_limit_keeps_an_outer_alarm_working(tmp_path: Path) -> None:
    # e.g. pytest-timeout's: it fires at its own deadline and is re-armed for what is left of it
    fired: list[float] = []
    outer = signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(time.monotonic()))
    before = signal.getitimer(signal.ITIMER_REAL)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        res = run(solvers=["hang"], out=tmp_path / "a", registry=_hang_registry(), time_limit=0.5, **SMALL)
        assert res.summary["solvers"]["hang"]["failures"]["TIMEOUT"]["count"] == 3
        assert len(fired) == 1  # the outer alarm, once, during the first run
        handler = signal.getsignal(signal.SIGALRM)
        assert callable(handler) and getattr(handler, "__name__", "") == "<lambda>"
        signal.setitimer(signal.ITIMER_REAL, 100.0)
        t0 = time.monotonic()
        run(solvers=["hang"], out=tmp_path / "b", registry=_hang_registry(), time_limit=0.3, **SMALL)
        left = signal.getitimer(signal.ITIMER_REAL)[0]
        assert abs(100.0 - (time.monotonic() - t0) - left) < 0.5  # still armed, for what was left
    finally:
        signal.setitimer(signal.ITIMER_REAL, *before)
        signal.signal(signal.SIGALRM, outer)


def test_a_registry_of_your_own_refuses_worker_processes(tmp_path: Path) -> None:
    for where in ({"workers": 1}, {"workers": 2}, {"dask": "tcp://127.0.0.1:1"}):
        with pytest.raises(InvalidInputError, match="serial benches only"):
            run(solvers=["hang"], out=tmp_path, registry=_hang_registry(), **where, **SMALL)


def test_time_limit_is_checked(tmp_path: Path) -> None:
    for bad in (0, -1.0, float("nan"), True):
        with pytest.raises(InvalidInputError, match="time_limit"):
            run(solvers=["cobyla"], out=tmp_path, time_limit=bad, **SMALL)


_POOL_SCRIPT = textwrap.dedent('''
    import json, sys
    import zoframe_bench
    if __name__ == "__main__":
        mode = sys.argv[3]
        solvers = ["hang", "nelder-mead"] if mode == "plain" else ["hang"]
        res = zoframe_bench.run("smoke", solvers, seeds=1, budget=60, progress=False, verify=False,
                                plots=False, out=sys.argv[1], workers=2, time_limit=float(sys.argv[2]),
                                params={"hang": {"stubborn": mode == "stubborn", "crash": mode == "crash"}})
        print(json.dumps({"ran": res.ran, "failures": res.summary["solvers"]["hang"]["failures"]}))
''')


@pytest.mark.parametrize("stubborn", [False, True], ids=["stopped-in-worker", "worker-killed"])
def test_a_hanging_run_on_a_process_pool_becomes_a_timeout_row(tmp_path: Path, stubborn: bool) -> None:
    # a stubborn run swallows the worker's own stop: the bench kills the worker and starts another
    script = tmp_path / "pool.py"
    script.write_text(_POOL_SCRIPT)
    # a fresh worker imports scipy's optimisers in nelder-mead's first run: 4 s leave it room on a busy machine
    limit = "0.5" if stubborn else "4"
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "out"), limit, "stubborn" if stubborn else "plain"],
                          env=_plugin_env(tmp_path), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["ran"] == (7 if stubborn else 14)
    assert out["failures"]["TIMEOUT"]["count"] == 3
    with BenchStore(tmp_path / "out" / "bench.sqlite") as db:
        rows = list(db.rows())
    assert {r.status for r in rows if r.task.solver == "hang"} == {"TIMEOUT", "SKIPPED"}
    assert all(r.ran for r in rows if r.task.solver == "nelder-mead" and r.status != "SKIPPED")


def test_a_worker_that_dies_gives_an_error_row_and_a_new_worker(tmp_path: Path) -> None:
    script = tmp_path / "pool.py"
    script.write_text(_POOL_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "out"), "60", "crash"],
                          env=_plugin_env(tmp_path), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["ran"] == 7 and out["failures"]["ERROR"]["count"] == 3
    assert "the worker process died during the run (exit code 7" in out["failures"]["ERROR"]["first"]


# --------------------------------------------------------------------------- workers die with the bench
def _children(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (Linux /proc)."""
    parents: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if fields[0] != "Z":
                parents[int(d.name)] = int(fields[1])
    out: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {c for c, p in parents.items() if p in frontier} - out
        out |= frontier
    return out


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from Linux /proc")
def test_workers_die_with_a_killed_bench(tmp_path: Path) -> None:
    script = tmp_path / "bench.py"
    script.write_text(textwrap.dedent('''
        import sys
        import zoframe_bench
        if __name__ == "__main__":
            zoframe_bench.run("smoke", ["hang"], seeds=2, budget=60, progress=False, verify=False, plots=False,
                              out=sys.argv[1], workers=2, time_limit=600)
    '''))
    log = tmp_path / "stderr.txt"
    with log.open("wb") as err:
        proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "out")], env=_plugin_env(tmp_path),
                                stdout=subprocess.DEVNULL, stderr=err)
    try:
        kids: set[int] = set()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # a forkserver, a resource tracker (maybe) and 2 workers
            kids = _children(proc.pid)
            workers = [k for k in kids if "zoframe-bench-worker" in _cmdline(k) or _is_worker(k)]
            if len(workers) >= 2:
                break
            assert proc.poll() is None, log.read_text()
            time.sleep(0.2)
        assert len(kids) >= 3, f"the bench did not start its workers: {kids}"
        time.sleep(0.5)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(_alive(k) for k in kids):
            time.sleep(0.2)
        left = [k for k in kids if _alive(k)]
        assert not left, f"processes left after kill -9 of the bench: {[_cmdline(k) for k in left]}"
    finally:
        if proc.poll() is None:
            proc.kill()
        for k in _children(proc.pid):
            os.kill(k, signal.SIGKILL)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _is_worker(pid: int) -> bool:
    """A forkserver child (the workers are forked from the forkserver process)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    ppid = int(stat.rsplit(")", 1)[1].split()[1])
    return "forkserver" in _cmdline(ppid)


# --------------------------------------------------------------------------- damaged stores
@pytest.fixture(scope="module")
def sound_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sound")
    run(solvers=["cobyla"], out=out, **SMALL)
    return out / "bench.sqlite"


def _copy(src: Path, dst_dir: Path) -> Path:
    dst_dir.mkdir(parents=True, exist_ok=True)
    dst = dst_dir / "bench.sqlite"
    dst.write_bytes(src.read_bytes())
    return dst


def test_a_store_that_is_not_a_database_is_refused_and_nothing_written(tmp_path: Path, sound_store: Path) -> None:
    store = tmp_path / "bench.sqlite"
    store.write_bytes(b"this is not a database, it holds someone's notes\n" * 40)
    before = store.read_bytes()
    with pytest.raises(BenchStoreError, match=r"bench store .*bench\.sqlite is damaged.*--repair"):
        run(solvers=["cobyla"], out=tmp_path, **SMALL)
    assert store.read_bytes() == before
    assert not (tmp_path / "summary.json").exists()
    rep = repair(store)
    assert rep.kept == 0 and rep.dropped is None and rep.moved_to is not None
    assert Path(rep.moved_to).read_bytes() == before
    assert run(solvers=["cobyla"], out=tmp_path, **SMALL).ran == 7


@pytest.mark.parametrize("column, value", [
    ("result", "{not json"), ("nfev_by_kind", "[1, 2]"), ("task", '{"suite": 1}'), ("history", b"PK\x03\x04junk"),
    ("x", "text"), ("verification", "nan"), ("nfev", -3), ("dim", "two"),
])
def test_a_damaged_cell_names_the_file_and_repair_keeps_the_sound_runs(
    tmp_path: Path, sound_store: Path, column: str, value: object
) -> None:
    store = _copy(sound_store, tmp_path)
    (tmp_path / "summary.json").write_text("{}")
    con = sqlite3.connect(store)
    key = con.execute("SELECT key FROM runs ORDER BY key LIMIT 1").fetchone()[0]
    con.execute(f"UPDATE runs SET {column} = ? WHERE key = ?", (value, key))
    con.commit()
    con.close()
    before = store.read_bytes()
    with pytest.raises(BenchStoreError, match=f"{store}.*run {key} does not read back.*--repair"):
        run(solvers=["cobyla"], out=tmp_path, **SMALL)
    assert store.read_bytes() == before and (tmp_path / "summary.json").read_text() == "{}"
    rep = repair(store)
    assert (rep.kept, rep.dropped) == (6, 1)
    assert rep.moved_to is not None and Path(rep.moved_to).read_bytes() == before
    again = run(solvers=["cobyla"], out=tmp_path, **SMALL)
    assert (again.ran, again.reused) == (1, 6)
    assert repair(store).moved_to is None  # a sound store is left as it is


def test_cli_repair(tmp_path: Path, sound_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _copy(sound_store, tmp_path)
    con = sqlite3.connect(store)
    con.execute("UPDATE runs SET result = 'oops' WHERE rowid = 1")
    con.commit()
    con.close()
    args = ["bench", "smoke", "--solvers", "cobyla", "--budget", "60", "--no-plots", "--quiet", "--no-verify",
            "--out", str(tmp_path)]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("zoframe: error: bench store") and "--repair" in err[0]
    assert main([*args, "--repair"]) == 0
    assert "kept 6 runs, dropped 1" in capsys.readouterr().err


def test_two_benches_on_one_store_do_not_both_run(tmp_path: Path) -> None:
    store = tmp_path / "bench.sqlite"
    with BenchStore(store) as holder:
        holder.lock()
        with pytest.raises(BenchStoreError, match=rf"in use by another bench \(pid {os.getpid()}\)"):
            run(solvers=["cobyla"], out=tmp_path, **SMALL)
        with pytest.raises(BenchStoreError, match="in use by another bench"):  # nor is it repaired under it
            repair(store)
    assert run(solvers=["cobyla"], out=tmp_path, **SMALL).ran == 7  # the lock went with its holder


def test_a_store_lock_is_released_by_a_killed_process(tmp_path: Path) -> None:
    store = tmp_path / "bench.sqlite"
    code = f"import time; from zoframe_bench.store import BenchStore; d = BenchStore({str(store)!r}); d.lock(); " \
           "print('locked', flush=True); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        with BenchStore(store) as db, pytest.raises(BenchStoreError, match="in use"):
            db.lock()
        proc.kill()
        proc.wait(10)
        with BenchStore(store) as db:
            db.lock()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


# --------------------------------------------------------------------------- options
@pytest.mark.parametrize("extra, words", [
    (["--param", "zo-sgd.bogus=1"], "bad parameters for solver 'zo-sgd'"),
    (["--suite-arg", "bogus=1"], "suite 'smoke' cannot take the arguments"),
    (["--feasibility-tol", "-1"], "feasibility_tol must be a finite number >= 0"),
    (["--feasibility-tol", "nan"], "feasibility_tol must be a finite number >= 0"),
    (["--time-limit", "-2"], "--time-limit"),
    (["--workers", "0"], "workers must be a positive integer"),
])
def test_cli_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], words: str
) -> None:
    code = main(["bench", "smoke", "--solvers", "zo-sgd", "--budget", "50", "--quiet", "--no-plots", "--no-verify",
                 "--out", str(tmp_path), *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("zoframe: error: ") and words in err[0], err
    assert not (tmp_path / "bench.sqlite").exists()


def test_cli_store_that_cannot_be_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "plain-file"
    blocker.write_text("x")
    for store, words in ((tmp_path, "is a directory"), (blocker / "sub" / "bench.sqlite", "cannot create the directory")):
        code = main(["bench", "smoke", "--solvers", "zo-sgd", "--budget", "50", "--quiet", "--no-plots",
                     "--out", str(tmp_path / "o"), "--store", str(store)])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and err[0].startswith("zoframe: error: ") and words in err[0], err


def test_cli_unreachable_dask_fails_fast(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = main(["bench", "smoke", "--solvers", "zo-sgd", "--budget", "50", "--quiet", "--no-plots",
                 "--out", str(tmp_path), "--dask", f"tcp://127.0.0.1:{port}"])
    err = capsys.readouterr().err.strip().splitlines()
    # "cannot reach" comes from the plain socket probe made before any dask client (whose own connection
    # attempts would take its 30 s timeout): the refusal is immediate by construction
    assert code == 2 and len(err) == 1 and "cannot reach the dask scheduler" in err[0], err


# --------------------------------------------------------------------------- failures show
def test_the_command_prints_the_failed_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from zoframe_bench.runner import stub_row
    from zoframe_bench.store import Task

    def task(instance: str) -> Task:
        return Task("smoke", {}, instance, "nelder-mead", {}, 0, 60, 1, 1e-3, False)

    # a failed run in the store is reported by the next bench; a missing dependency is run again
    with BenchStore(tmp_path / "bench.sqlite") as db:
        db.add(stub_row(task("rosenbrock-d2"), "FAILED", "the run failed at iteration 3: ValueError: boom", 0.0))
        db.add(stub_row(task("quadratic-d5"), "FAILED", "the run failed at iteration 1: MissingDependencyError: "
                        "nelder-mead needs scipy (test)", 0.0))
    args = ["bench", "smoke", "--solvers", "nelder-mead", "--budget", "60", "--quiet", "--no-plots", "--no-verify",
            "--out", str(tmp_path)]
    assert main(args) == 0
    cap = capsys.readouterr()
    assert "7 runs (6 run now, 1 already in" in cap.err
    assert "zoframe: nelder-mead: 1 of 7 runs FAILED; first: the run failed at iteration 3: ValueError: boom " \
           "(rosenbrock-d2, seed 0)" in cap.err
    assert "missing dependency" not in cap.err  # run again: scipy is here
    assert "| nelder-mead | 7 | 1 FAILED |" in cap.out and "Failed runs" in cap.out


def test_missing_dependency_and_errors_are_counted_apart() -> None:
    from zoframe_bench.profiles import failures
    from zoframe_bench.runner import stub_row
    from zoframe_bench.store import Task

    def task(seed: int) -> Task:
        return Task("smoke", {}, "rosenbrock-d2", "x", {}, seed, 10, 1, 1e-3, False)

    rows = [stub_row(task(0), "ERROR", "MissingDependencyError: cma-es needs cma", 0.0),
            stub_row(task(1), "ERROR", "ValueError: x0 outside the bounds", 0.0),
            stub_row(task(2), "ERROR", "ValueError: second", 0.0),
            stub_row(task(3), "TIMEOUT", "stopped", 0.0)]
    got = failures(rows[::-1])  # the first message is the first by (instance, seed), not by arrival
    assert got == {"missing dependency": {"count": 1, "first": "MissingDependencyError: cma-es needs cma "
                                                                "(rosenbrock-d2, seed 0)"},
                   "ERROR": {"count": 2, "first": "ValueError: x0 outside the bounds (rosenbrock-d2, seed 1)"},
                   "TIMEOUT": {"count": 1, "first": "stopped (rosenbrock-d2, seed 3)"}}
