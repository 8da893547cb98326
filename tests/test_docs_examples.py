"""Every fenced ```python block of README.md and docs/**/*.md runs as pasted.

Each block is its own script, run as ``python script.py`` in a fresh temporary directory in a
subprocess (so a process pool without an ``if __name__ == "__main__":`` guard fails as it does for a
user), with the environment's ``ZOFRAME_DATA``, ``ZOFRAME_OUT`` at the temporary directory and
``MPLBACKEND=Agg``. Each block is one test case, named ``FILE:BLOCK@LINE``.

Markers, HTML comments on the lines directly before a block's fence (blank lines in between are
allowed, several markers may be stacked):

``<!-- no-run: reason -->``
    the block is deliberately not runnable (a signature, a fragment, an output sample); the reason is
    required, and the test of the block is reported as skipped with it (``pytest -rs`` lists them;
    ``test_no_run_blocks_are_listed`` prints them all).
``<!-- continues -->`` or ``<!-- continues: N -->``
    the block builds on the previous python block of the file (or on block N): its script is that
    block's script followed by this block, as a reader who pasted the page top to bottom would run it.
``<!-- slow: reason -->``
    the block takes long (the reason says how long and why); it is marked ``slow`` and runs with
    ``pytest -m slow``, never skipped silently.
``<!-- needs: example-plugin -->``
    the script runs with ``docs/examples/zoframe-example-plugin`` installed (an installed-looking
    distribution with its entry point on ``PYTHONPATH``), as the page tells the reader to do.

The scripts run two at a time (the machine running the default suite has two cores). The blocks of
the pages in ``NEEDS_DATA`` carry the ``data`` mark (skipped with a reason naming ``zoframe data
fetch`` when the LIBSVM files are missing, a failure with ``ZOFRAME_REQUIRE_DATA=1``); a block of
another page that stops at a ``DataNotFoundError`` is treated the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
import os
from pathlib import Path
import re
import subprocess
import sys
import tempfile
import threading
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_PLUGIN = ROOT / "docs" / "examples" / "zoframe-example-plugin"
_MARKER = re.compile(r"^\s*<!--\s*(?P<key>no-run|continues|slow|needs)\s*(?::(?P<value>.*?))?-->\s*$")
_FENCE_OPEN = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)")

#: Seconds a block may run before its test fails (a slow-marked block gets SLOW_TIMEOUT).
TIMEOUT = 120.0
SLOW_TIMEOUT = 1800.0
#: Scripts run at the same time.
WORKERS = 2


@dataclass(frozen=True)
class Block:
    """One fenced ```python block of a Markdown file."""

    number: int  # 1-based among the file's python blocks
    line: int  # 1-based line of the opening fence
    source: str
    no_run: str | None = None  # the reason given by `<!-- no-run: ... -->`, or None
    continues: int | None = None  # the block this one builds on, or None
    slow: str | None = None  # the reason given by `<!-- slow: ... -->`, or None
    needs: frozenset[str] = field(default_factory=frozenset)


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def doc_files() -> list[Path]:
    """README.md and every Markdown file under docs/, in a stable order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def python_blocks(text: str) -> list[Block]:
    """The ```python (or ```py) blocks of a Markdown text, with their markers."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE_OPEN.match(lines[i])
        if m is None:
            i += 1
            continue
        fence, indent, info = m["fence"], len(m["indent"]), m["info"].lower()
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            line = lines[i]
            body.append(line[indent:] if line[:indent].strip() == "" else line)
            i += 1
        i += 1  # the closing fence
        if info.split("{")[0] not in ("python", "py"):
            continue
        marks: dict[str, str | None] = {}
        j = start - 1
        while j >= 0:
            if lines[j].strip() == "":
                j -= 1
                continue
            mm = _MARKER.match(lines[j])
            if mm is None:
                break
            marks[mm["key"]] = None if mm["value"] is None else mm["value"].strip()
            j -= 1
        number = len(blocks) + 1
        continues: int | None = None
        if "continues" in marks:
            value = marks["continues"]
            continues = number - 1 if not value else int(value)
            if not 1 <= continues < number:
                raise ValueError(f"block {number} (line {start + 1}) continues block {continues}, which is not before it")
        blocks.append(
            Block(
                number=number,
                line=start + 1,
                source="\n".join(body) + "\n",
                no_run=(marks["no-run"] or "") if "no-run" in marks else None,  # "" is refused by the test
                continues=continues,
                slow=(marks["slow"] or "") if "slow" in marks else None,
                needs=frozenset((marks["needs"] or "").split()) if "needs" in marks else frozenset(),
            )
        )
    return blocks


def script_of(blocks: list[Block], block: Block) -> str:
    """The script a reader runs for ``block``: the blocks it continues, in order, then its own source."""
    chain = [block]
    while chain[-1].continues is not None:
        chain.append(blocks[chain[-1].continues - 1])
    return "".join(f"# --- block {b.number} (line {b.line})\n{b.source}" for b in reversed(chain))


def _needs_of(blocks: list[Block], block: Block) -> frozenset[str]:
    needs, b = set(block.needs), block
    while b.continues is not None:
        b = blocks[b.continues - 1]
        needs |= b.needs
    return frozenset(needs)


@dataclass(frozen=True)
class Case:
    path: Path
    block: Block
    script: str
    needs: frozenset[str]

    @property
    def id(self) -> str:
        return f"{_rel(self.path)}:{self.block.number}@L{self.block.line}"


def _all_cases() -> list[Case]:
    out: list[Case] = []
    for path in doc_files():
        blocks = python_blocks(path.read_text(encoding="utf-8"))
        for b in blocks:
            out.append(Case(path, b, script_of(blocks, b), _needs_of(blocks, b)))
    return out


CASES = _all_cases()


#: pages whose examples read real LIBSVM data sets (their blocks are skipped with the reason when the
#: files are missing, a failure with ZOFRAME_REQUIRE_DATA=1: the ``data`` mark of tests/conftest.py)
NEEDS_DATA = {"docs/data.md": ("a9a", "mushrooms")}


def _params() -> list[Any]:
    params = []
    for case in CASES:
        marks = [pytest.mark.slow] if case.block.slow is not None else []
        if _rel(case.path) in NEEDS_DATA:
            marks.append(pytest.mark.data(*NEEDS_DATA[_rel(case.path)]))
        params.append(pytest.param(case, id=case.id, marks=marks))
    return params


# ---------------------------------------------------------------- running the scripts


def _install_example_plugin(site: Path) -> None:
    """An installed-looking ``zoframe-example-plugin`` in ``site`` (its package is on the path)."""
    info = site / "zoframe_example_plugin-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: zoframe-example-plugin\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[zoframe.plugins]\nexample = zoframe_example.plugin\n")


def _env(workdir: Path, needs: frozenset[str]) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTEST_CURRENT_TEST", None)
    paths = [str(ROOT), str(ROOT / "plugins"), str(ROOT / "verification"), str(ROOT / "bench")]
    if "example-plugin" in needs:
        site = workdir / "_site"
        _install_example_plugin(site)
        paths = [str(site), str(EXAMPLE_PLUGIN), *paths]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["ZOFRAME_OUT"] = str(workdir / "zoframe-out")
    env["MPLBACKEND"] = "Agg"
    return env


@dataclass(frozen=True)
class Outcome:
    returncode: int | None  # None: timed out
    stdout: str
    stderr: str
    seconds: float


def run_script(case: Case, timeout: float) -> Outcome:
    """Write the case's script to a fresh directory and run it there as ``python script.py``."""
    import time

    with tempfile.TemporaryDirectory(prefix="zoframe-doc-") as tmp:
        workdir = Path(tmp)
        (workdir / "script.py").write_text(case.script, encoding="utf-8")
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(
                [sys.executable, "script.py"], cwd=workdir, env=_env(workdir, case.needs),
                capture_output=True, text=True, timeout=timeout,
            )
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
            return Outcome(None, out, err, time.perf_counter() - t0)
        return Outcome(proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - t0)


class _Runner:
    """Runs the selected cases' scripts WORKERS at a time, in collection order, ahead of their tests."""

    def __init__(self, cases: list[Case]) -> None:
        self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="docs-block")
        self._futures: dict[str, Future[Outcome]] = {}
        self._lock = threading.Lock()
        for case in cases:
            self.submit(case)

    def submit(self, case: Case) -> Future[Outcome]:
        with self._lock:
            if case.id not in self._futures:
                timeout = SLOW_TIMEOUT if case.block.slow is not None else TIMEOUT
                self._futures[case.id] = self._pool.submit(run_script, case, timeout)
            return self._futures[case.id]

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="module")
def runner(request: pytest.FixtureRequest) -> Iterator[_Runner]:
    selected = [  # data pages run on demand, after their test's data check
        item.callspec.params["case"]
        for item in request.session.items
        if getattr(item, "originalname", None) == "test_doc_block_runs_as_a_script"
        and item.callspec.params["case"].block.no_run is None
        and _rel(item.callspec.params["case"].path) not in NEEDS_DATA
    ]
    r = _Runner(selected)
    yield r
    r.close()


def _tail(text: str, limit: int = 6000) -> str:
    return text if len(text) <= limit else "...\n" + text[-limit:]


@pytest.mark.parametrize("case", _params())
def test_doc_block_runs_as_a_script(case: Case, runner: _Runner) -> None:
    """The block (with the blocks it continues) runs as ``python script.py`` and exits with status 0."""
    where = f"{case.id} (python block {case.block.number} of {_rel(case.path)}, line {case.block.line})"
    if case.block.no_run is not None:
        if not case.block.no_run:
            pytest.fail(f"{where}: `<!-- no-run: reason -->` needs a reason after 'no-run:'")
        pytest.skip(f"not run by design (<!-- no-run -->): {case.block.no_run}")
    if case.block.slow == "":
        pytest.fail(f"{where}: `<!-- slow: reason -->` needs a reason after 'slow:'")
    unknown = case.needs - {"example-plugin"}
    if unknown:
        pytest.fail(f"{where}: unknown `<!-- needs: ... -->` value(s) {sorted(unknown)}")
    outcome = runner.submit(case).result()
    if outcome.returncode is None:
        pytest.fail(
            f"{where} did not finish within its timeout ({outcome.seconds:.0f} s); make it quicker or mark it "
            f"`<!-- slow: reason -->`.\nstdout:\n{_tail(outcome.stdout)}\nstderr:\n{_tail(outcome.stderr)}",
            pytrace=False,
        )
    if outcome.returncode != 0:
        required = os.environ.get("ZOFRAME_REQUIRE_DATA", "").strip() not in ("", "0", "false", "no")
        if "DataNotFoundError" in outcome.stderr and not required:  # as tests/conftest.py does for unmarked tests
            last = [ln for ln in outcome.stderr.strip().splitlines() if "DataNotFoundError" in ln][-1:]
            pytest.skip(
                f"{where} needs a LIBSVM data set that is not in $ZOFRAME_DATA: get it with "
                f"`zoframe data fetch NAME` and set ZOFRAME_DATA ({' '.join(last)[:300]})"
            )
        pytest.fail(
            f"{where} failed as a script (exit status {outcome.returncode}):\n--- script ---\n{case.script}"
            f"--- stdout ---\n{_tail(outcome.stdout)}\n--- stderr ---\n{_tail(outcome.stderr)}",
            pytrace=False,
        )


def test_no_run_blocks_are_listed() -> None:
    """Every block that is not run says why; the list is printed (``pytest -rP``)."""
    not_run = [(c.id, c.block.no_run) for c in CASES if c.block.no_run is not None]
    slow = [(c.id, c.block.slow) for c in CASES if c.block.slow is not None]
    assert all(reason for _, reason in not_run), [cid for cid, reason in not_run if not reason]
    assert all(reason for _, reason in slow), [cid for cid, reason in slow if not reason]
    print(f"{len(CASES)} python blocks; {len(not_run)} not run by design, {len(slow)} marked slow")
    for cid, reason in not_run:
        print(f"  not run: {cid}: {reason}")
    for cid, reason in slow:
        print(f"  slow: {cid}: {reason}")
    # a page that is mostly not runnable is a page whose examples are not tested
    assert len(not_run) <= max(3, len(CASES) // 10), not_run


def test_block_parser_reads_markers_and_fences() -> None:
    """The parser finds python blocks only, keeps their order and reads the markers."""
    text = (
        "intro\n```bash\nzoframe list\n```\n\n```python\na = 1\n```\n"
        "<!-- no-run: needs a GPU -->\n\n```python\nb = 2\n```\n"
        "<!-- no-run: -->\n```py\nc = 3\n```\n"
        "   ```python\n   d = 4\n   ```\n"
        "<!-- slow: 10 min -->\n<!-- continues: 1 -->\n<!-- needs: example-plugin -->\n```python\ne = a\n```\n"
        "<!-- continues -->\n```python\nf = e\n```\n"
    )
    blocks = python_blocks(text)
    assert [b.source for b in blocks] == ["a = 1\n", "b = 2\n", "c = 3\n", "d = 4\n", "e = a\n", "f = e\n"]
    assert [b.no_run for b in blocks] == [None, "needs a GPU", "", None, None, None]
    assert [b.line for b in blocks] == [6, 11, 15, 18, 24, 28]
    assert [b.continues for b in blocks] == [None, None, None, None, 1, 5]
    assert blocks[4].slow == "10 min" and blocks[4].needs == frozenset({"example-plugin"})
    assert script_of(blocks, blocks[5]).count("# --- block") == 3
    assert "a = 1\n" in script_of(blocks, blocks[5]) and "d = 4" not in script_of(blocks, blocks[5])
    with pytest.raises(ValueError, match="continues block 3"):
        python_blocks("```python\na = 1\n```\n<!-- continues: 3 -->\n```python\nb = 2\n```\n")


def test_a_missing_main_guard_fails_as_a_script() -> None:
    """The runner is strict where pasting is: a spawn process pool at module level breaks the script."""
    source = (
        "from concurrent.futures import ProcessPoolExecutor\nimport multiprocessing\n"
        "with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context('spawn')) as pool:\n"
        "    print(pool.submit(abs, -1).result())\n"
    )
    bad = Case(ROOT / "README.md", Block(1, 1, source), source, frozenset())
    outcome = run_script(bad, TIMEOUT)
    assert outcome.returncode not in (0, None), outcome
    guarded = "if __name__ == '__main__':\n" + "".join("    " + ln + "\n" for ln in source.splitlines())
    good = Case(ROOT / "README.md", Block(1, 1, guarded), guarded, frozenset())
    outcome = run_script(good, TIMEOUT)
    assert outcome.returncode == 0 and outcome.stdout.strip() == "1", outcome
