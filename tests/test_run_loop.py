"""The run loop and its observers; the core's import graph (isolated imports, no cycles)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
import os
from pathlib import Path
import subprocess
import sys
from typing import Any, ClassVar

import numpy as np
import pytest

import zoframe
from zoframe import Status
from zoframe.oracle import CountingOracle
from zoframe.run import RunLoop, Stop
from zoframe.testing.problems import SmokeFiniteSum

CORE = Path(zoframe.__file__).resolve().parent


# ----------------------------------------------------------------------------- the loop
@dataclass(frozen=True)
class _State:
    x: np.ndarray


@dataclass(frozen=True)
class Walk:
    """A test solver: x -= 0.1 per step, no evaluations; stops itself at ``stop_at``."""

    stop_at: int = 10**9
    problem_kinds: ClassVar[frozenset[str]] = frozenset({"finite_sum"})

    def init(self, oracle: Any, x0: np.ndarray, rng: np.random.Generator) -> _State:
        return _State(x0.copy())

    def step(self, oracle: Any, state: _State, rng: np.random.Generator) -> _State:
        return _State(state.x - 0.1)

    def terminate(self, state: _State) -> str | None:
        return "done" if state.x[0] <= -0.1 * self.stop_at + 1e-9 else None


class Spy:
    def __init__(self, log: list[str], name: str, stop_at: int | None = None, per_step: bool = True) -> None:
        self.log, self.name, self.stop_at, self.per_step = log, name, stop_at, per_step

    def start(self, loop: RunLoop) -> Stop | None:
        self.log.append(f"{self.name}.start@{loop.nit}")
        return None

    def iteration(self, loop: RunLoop) -> Stop | None:
        self.log.append(f"{self.name}.iteration@{loop.nit}")
        if loop.nit == self.stop_at:
            return Status.CALLBACK, f"{self.name} stops"
        return None

    def end(self, loop: RunLoop) -> None:
        self.log.append(f"{self.name}.end@{loop.nit}")


def _loop(observers: list[Any], solver: Any = None, **kw: Any) -> RunLoop:
    oracle = CountingOracle(SmokeFiniteSum())
    return RunLoop(solver or Walk(), oracle, np.zeros(4), np.random.default_rng(0), solver_name="walk", seed=0,
                   observers=observers, **kw)


def test_observers_are_called_in_order_and_one_can_stop_the_run() -> None:
    log: list[str] = []
    loop = _loop([Spy(log, "a"), Spy(log, "b", stop_at=2), Spy(log, "quiet", per_step=False)], max_iter=5)
    loop.run()
    assert log == ["a.start@0", "b.start@0", "quiet.start@0", "a.iteration@1", "b.iteration@1",
                   "a.iteration@2", "b.iteration@2", "a.end@2", "b.end@2", "quiet.end@2"]
    assert loop.stop == (Status.CALLBACK, "b stops")


def test_budgets_and_the_solvers_rule_stop_the_loop() -> None:
    loop = _loop([], max_iter=3)
    loop.run()
    assert loop.stop is not None and loop.stop[0] is Status.MAX_ITER and loop.nit == 3
    loop = _loop([], solver=Walk(stop_at=4), max_iter=100)
    loop.run()
    assert loop.stop == (Status.CONVERGED, "done") and loop.nit == 4
    res = loop.result()
    assert res.status is Status.CONVERGED and res.nit == 4 and np.allclose(res.x, -0.4)


def test_an_error_ends_the_loop_with_the_observers_closed() -> None:
    @dataclass(frozen=True)
    class Boom(Walk):
        def step(self, oracle: Any, state: _State, rng: np.random.Generator) -> _State:
            raise RuntimeError("boom")

    log: list[str] = []
    loop = _loop([Spy(log, "a")], solver=Boom(), max_iter=3)
    loop.run()
    assert loop.stop is not None and loop.stop[0] is Status.FAILED and "RuntimeError: boom" in loop.stop[1]
    assert isinstance(loop.failure, RuntimeError) and log[-1] == "a.end@0"


def test_minimize_is_thin_and_the_loop_reads_in_a_dozen_lines() -> None:
    import inspect

    from zoframe import driver

    run_src = inspect.getsource(RunLoop.run).splitlines()
    body = [ln for ln in run_src if ln.strip() and not ln.strip().startswith(('"""', "#"))]
    assert len(body) <= 12
    code = [ln for ln in inspect.getsource(driver.minimize).split('"""')[-1].splitlines() if ln.strip()]
    assert len(code) <= 8  # one call: build the run, run it


# ----------------------------------------------------------------------------- the import graph
def _core_modules() -> list[str]:
    mods = []
    for path in sorted(CORE.rglob("*.py")):
        rel = path.relative_to(CORE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods.append(".".join(parts))
    return mods


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _top_level_imports(path: Path, module: str, known: set[str]) -> set[str]:
    """Modules of ``known`` that ``path`` imports when it is imported (not under TYPE_CHECKING, not in functions)."""
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()

    def visit(stmts: list[ast.stmt]) -> None:
        for node in stmts:
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name in known)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    pkg = module.split(".") if is_pkg else module.split(".")[:-1]
                    pkg = pkg[: len(pkg) - (node.level - 1)]
                    base = ".".join([*pkg, base] if base else pkg)
                subs = {f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known}
                out.update(subs)
                if base in known and len(subs) < len(node.names):  # a name defined by the module itself
                    out.add(base)
            elif isinstance(node, ast.If):
                if not _is_type_checking(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for h in node.handlers:
                    visit(h.body)
                visit(node.orelse)
                visit(node.finalbody)
            elif isinstance(node, ast.With):
                visit(node.body)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    out.discard(module)
    return out


def _graph() -> dict[str, set[str]]:
    known = set(_core_modules())
    graph = {}
    for path in sorted(CORE.rglob("*.py")):
        rel = path.relative_to(CORE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mod = ".".join(parts)
        graph[mod] = _top_level_imports(path, mod, known)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle found by a depth-first search (one per back edge)."""
    found: list[list[str]] = []
    colour: dict[str, int] = {}
    stack: list[str] = []

    def dfs(v: str) -> None:
        colour[v] = 1
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if colour.get(w, 0) == 0:
                dfs(w)
            elif colour.get(w) == 1:
                found.append([*stack[stack.index(w):], w])
        stack.pop()
        colour[v] = 2

    for v in sorted(graph):
        if colour.get(v, 0) == 0:
            dfs(v)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_among_the_core_modules() -> None:
    graph = _graph()
    # the package imports its modules; a module that imported the package back would close a cycle
    assert "zoframe.oracle" in graph["zoframe"] and "zoframe.protocols" in graph["zoframe.oracle"]
    assert "zoframe.oracle" not in graph["zoframe.protocols"]  # only under TYPE_CHECKING
    assert _cycles(graph) == []


def test_each_core_module_imports_alone_in_a_fresh_interpreter() -> None:
    """The package's __init__ is bypassed, so each module is imported first, in its own order."""
    stub = (
        "import importlib, sys, types; pkg = types.ModuleType('zoframe'); pkg.__path__ = [{path!r}]; "
        "sys.modules['zoframe'] = pkg; importlib.import_module({mod!r})"
    )
    mods = [m for m in _core_modules() if m != "zoframe"]
    env = {**os.environ, "PYTHONWARNINGS": "error::ImportWarning"}
    procs = {
        m: subprocess.Popen([sys.executable, "-c", stub.format(path=str(CORE), mod=m)], stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True, env=env)
        for m in mods
    }
    failed = {}
    for m, p in procs.items():
        _, err = p.communicate(timeout=120)
        if p.returncode != 0:
            failed[m] = err.strip().splitlines()[-1] if err.strip() else f"exit {p.returncode}"
    assert failed == {}
    # and through the package, as users import it
    proc = subprocess.run([sys.executable, "-c", "import zoframe; zoframe.Run; zoframe.minimize"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("module", ["zoframe.protocols", "zoframe.oracle"])
def test_protocols_and_oracle_each_import_first(module: str) -> None:
    code = f"import {module}; import zoframe.oracle, zoframe.protocols; print('ok')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
