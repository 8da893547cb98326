"""Every fenced ```python block of README.md and docs/**/*.md runs.

The blocks of one file run in order in one namespace (a later block may use what an earlier one
defined), in a temporary working directory, with the environment's ``ZOFRAME_DATA`` (pages in NEEDS_DATA skip without it) and
``ZOFRAME_OUT`` at a temporary directory. Each file is one test case, so a broken example fails with
the file, the block number and the line of the fence.

A block directly preceded by the line ``<!-- no-run: reason -->`` (blank lines in between are allowed)
is not run; the reason must say why. Each test prints how many blocks it ran and which it did not run,
with their reasons (``pytest -rP tests/test_docs_examples.py`` shows them), and records the same in the
test's ``user_properties`` (``docs_blocks_run``, ``docs_blocks_not_run``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
import re
import traceback
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
_NO_RUN = re.compile(r"^\s*<!--\s*no-run:(?P<reason>.*?)-->\s*$")
_FENCE_OPEN = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)")


#: Files whose examples are known to fail, with why; each is an xfail shown in the summary (-ra).
#: Fix the file and remove its entry.
KNOWN_BROKEN: dict[str, str] = {}


@dataclass(frozen=True)
class Block:
    """One fenced ```python block of a Markdown file."""

    number: int  # 1-based among the file's python blocks
    line: int  # 1-based line of the opening fence
    source: str
    no_run: str | None  # the reason given by a `<!-- no-run: ... -->` line, or None


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def doc_files() -> list[Path]:
    """README.md and every Markdown file under docs/, in a stable order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def python_blocks(text: str) -> list[Block]:
    """The ```python (or ```py) blocks of a Markdown text, with their no-run markers."""
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
        reason: str | None = None
        j = start - 1
        while j >= 0 and lines[j].strip() == "":
            j -= 1
        if j >= 0:
            nm = _NO_RUN.match(lines[j])
            if nm is not None:
                reason = nm["reason"].strip()
        blocks.append(Block(len(blocks) + 1, start + 1, "\n".join(body) + "\n", reason))
    return blocks


#: pages whose examples read real LIBSVM data sets (skipped with the reason when they are missing)
NEEDS_DATA = {"docs/data.md": ("a9a", "mushrooms")}


def _cases() -> list[Any]:
    out: list[Any] = []
    for p in doc_files():
        marks = [pytest.mark.data(*NEEDS_DATA[_rel(p)])] if _rel(p) in NEEDS_DATA else []
        if _rel(p) in KNOWN_BROKEN:
            marks.append(pytest.mark.xfail(reason=KNOWN_BROKEN[_rel(p)], strict=False))
        out.append(pytest.param(p, marks=marks) if marks else p)
    return out


@pytest.mark.parametrize("path", _cases(), ids=_rel)
def test_doc_python_blocks_run(
    path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    record_property: Callable[[str, object], None],
) -> None:
    """Run the file's python blocks in order in one namespace; fail naming the block that broke."""
    blocks = python_blocks(path.read_text(encoding="utf-8"))
    monkeypatch.setenv("ZOFRAME_OUT", str(tmp_path / "zoframe-out"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    ran, skipped = 0, []
    for block in blocks:
        where = f"{_rel(path)} python block {block.number} (line {block.line})"
        if block.no_run is not None:
            if not block.no_run:
                pytest.fail(f"{where}: `<!-- no-run: reason -->` needs a reason after 'no-run:'")
            skipped.append(f"{where}: {block.no_run}")
            continue
        failure: str | None = None
        try:
            exec(compile(block.source, f"<{where}>", "exec"), namespace)
        except Exception as exc:  # the example broke: show where, with the traceback
            failure = "".join(traceback.format_exception(exc))
        finally:
            _close_figures()
        if failure is not None:
            pytest.fail(f"{where} failed:\n{failure}", pytrace=False)
        ran += 1
    record_property("docs_blocks_run", ran)
    record_property("docs_blocks_not_run", skipped)
    print(f"{_rel(path)}: {ran} python block(s) run, {len(skipped)} not run")
    for s in skipped:
        print(f"  not run: {s}")


def _close_figures() -> None:
    """Close the figures a block opened (if matplotlib was used at all)."""
    import sys

    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        plt.close("all")


def test_block_parser_reads_markers_and_fences() -> None:
    """The parser finds python blocks only, keeps their order and reads the no-run reasons."""
    text = (
        "intro\n```bash\nzoframe list\n```\n\n```python\na = 1\n```\n"
        "<!-- no-run: needs a GPU -->\n\n```python\nb = 2\n```\n"
        "<!-- no-run: -->\n```py\nc = 3\n```\n"
        "   ```python\n   d = 4\n   ```\n"
    )
    blocks = python_blocks(text)
    assert [b.source for b in blocks] == ["a = 1\n", "b = 2\n", "c = 3\n", "d = 4\n"]
    assert [b.no_run for b in blocks] == [None, "needs a GPU", "", None]
    assert [b.line for b in blocks] == [6, 11, 15, 18]
