"""The worker processes of ``zoframe rate --workers N`` end with their parent (also on ``kill -9``)."""

from __future__ import annotations

import os
from pathlib import Path
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/task").is_dir(), reason="reads the process tree from /proc (Linux only)"
)


def _children(pid: int) -> set[int]:
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out |= {int(c) for c in (task / "children").read_text().split()}
        except OSError:
            continue
    return out


def _alive(pid: int) -> bool:
    """Running (a zombie that only waits to be reaped is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_kill_9_of_rate_leaves_no_worker(tmp_path: Path) -> None:
    env = {**os.environ, "ZOFRAME_OUT": str(tmp_path), "MPLBACKEND": "Agg"}
    cmd = [sys.executable, "-m", "zoframe.cli", "rate", "zo-sgd", "quadratic", "--seeds", "4", "--budget", "100000000",
           "--workers", "2", "-p", "eta=0.05", "-p", "steps=paper", "--no-progress"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline and len(workers) < 2:
            if proc.poll() is not None:
                pytest.fail(f"zoframe rate ended early: {proc.stderr.read().decode() if proc.stderr else ''}")
            workers = {c for c in _children(proc.pid) if "spawn_main" in _cmdline(c) and "resource_tracker" not in _cmdline(c)}
            time.sleep(0.2)
        assert len(workers) >= 2, f"the two workers did not start: children {_children(proc.pid)}"
        time.sleep(1.0)  # the workers are now computing their runs
        assert all(_alive(w) for w in workers)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and any(_alive(w) for w in workers):
        time.sleep(0.1)
    left = [w for w in workers if _alive(w)]
    for w in left:  # clean up before failing
        os.kill(w, signal.SIGKILL)
    assert not left, f"workers {left} outlived their killed parent"


def test_watchdog_ends_a_worker_without_prctl(tmp_path: Path) -> None:
    """The portable fallback alone (prctl not used): the worker exits once its parent is gone."""
    worker = (
        "import sys, time\n"
        "from zoframe_verify.study import _end_with_parent\n"
        "sys.platform = 'darwin'  # take the path of a system without prctl\n"
        "_end_with_parent(int(sys.argv[1]), poll=0.1)\n"
        "print('ready', flush=True)\n"
        "while True:\n"
        "    sum(i * i for i in range(10000))  # compute until ended\n"
    )
    parent = (
        "import os, subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', {worker!r}, str(os.getpid())])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    assert proc.stdout.readline().strip() == "ready"  # the watchdog runs and the worker computes
    time.sleep(0.3)
    assert _alive(child)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and _alive(child):
        time.sleep(0.1)
    alive = _alive(child)
    if alive:
        os.kill(child, signal.SIGKILL)
    assert not alive, "the worker outlived its killed parent"
