"""Sample outputs shown in the docs are what the commands print today, or say they are illustrative.

A fenced output block in README.md or docs/**/*.md is preceded by one of

``<!-- output-of: COMMAND [&& COMMAND ...] -->``
    the test runs the commands (``zoframe ...`` / ``python ...``) in a fresh directory and compares
    the block with what the last one printed: every ``name  number`` line of the block must be
    printed with the same name, in the same order, and a value within 2% (values below 1e-9 in
    both count as zero: round-off); the labelled text lines (``  certificate: ...``) must be the
    printed ones, in order; ``verification report:`` and ``verdict: PASS|FAIL`` headers must agree. A stale sample fails the test with both versions.
``<!-- output-illustrative: COMMAND (note) -->``
    not compared (machine paths, timings, long studies); the marker names the command that produces
    it, and the test checks that it names one.
"""

from __future__ import annotations

from pathlib import Path
import re
import shlex
import subprocess
import sys

from helpers import subprocess_env
import pytest

ROOT = Path(__file__).resolve().parents[1]
_MARK = re.compile(r"^<!--\s*output-(?P<kind>of|illustrative):(?P<cmd>.*?)-->\s*$")
_NUMBER_LINE = re.compile(r"^\s+(?P<name>[A-Za-z_][\w]*)\s+(?P<value>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)\s*$")
RTOL = 0.02
ZERO = 1e-9


def _docs() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def output_samples() -> list[tuple[str, str, str, str]]:
    """``(where, kind, command, block text)`` of every marked output block."""
    found = []
    for path in _docs():
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            m = _MARK.match(line.strip())
            if m is None:
                continue
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            assert j < len(lines) and lines[j].startswith("```"), f"{path.name}:{i + 1}: the marker must precede a fence"
            k = j + 1
            while k < len(lines) and not lines[k].startswith("```"):
                k += 1
            where = f"{path.relative_to(ROOT).as_posix()}:{i + 1}"
            found.append((where, m["kind"], m["cmd"].strip(), "\n".join(lines[j + 1 : k])))
    return found


SAMPLES = output_samples()


def _argv(command: str) -> list[str]:
    argv = shlex.split(command)
    if argv[0] == "zoframe":
        return [sys.executable, "-m", "zoframe.cli", *argv[1:]]
    if argv[0] == "python":
        return [sys.executable, *argv[1:]]
    raise AssertionError(f"{command!r}: an output-of command must start with zoframe or python")


def _env(workdir: Path) -> dict[str, str]:
    return subprocess_env(workdir, ZOFRAME_CACHE=str(workdir / "cache"))


def _numbers(text: str) -> list[tuple[str, float]]:
    out = []
    for line in text.splitlines():
        m = _NUMBER_LINE.match(line)
        if m is not None:
            out.append((m["name"], float(m["value"])))
    return out


def _headers(text: str) -> list[str]:
    heads = []
    for line in text.splitlines():
        if line.startswith("verification report:"):
            heads.append(line.strip())
        m = re.match(r"^verdict: (PASS|FAIL)\b", line)
        if m is not None:
            heads.append(f"verdict: {m.group(1)}")
    return heads


def _labels(text: str) -> list[str]:
    """The labels of the report's text lines (``  certificate: ...`` -> ``certificate``), in order."""
    return [m.group(1) for line in text.splitlines() if (m := re.match(r"^\s+([a-z][a-z_ ]*):\s", line))]


def _close(a: float, b: float) -> bool:
    if max(abs(a), abs(b)) < ZERO:
        return True
    return abs(a - b) <= RTOL * max(abs(a), abs(b))


def compare(shown: str, printed: str) -> list[str]:
    """What differs between a sample and a real output (empty when the sample is current)."""
    problems = []
    want, got = _numbers(shown), dict(_numbers(printed))
    order = [name for name, _ in _numbers(printed)]
    for name, value in want:
        if name not in got:
            problems.append(f"{name}: shown {value:.6g}, not printed")
        elif not _close(value, got[name]):
            problems.append(f"{name}: shown {value:.6g}, printed {got[name]:.6g}")
    shown_order = [name for name, _ in want if name in got]
    if shown_order != [name for name in order if name in dict(want)]:
        problems.append(f"order of the measures: shown {shown_order}, printed {order}")
    if _labels(shown) != _labels(printed):
        problems.append(f"report lines: shown {_labels(shown)}, printed {_labels(printed)}")
    if _headers(shown) != _headers(printed)[: len(_headers(shown))]:
        problems.append(f"headers: shown {_headers(shown)}, printed {_headers(printed)}")
    return problems


def test_compare_finds_stale_numbers_and_verdicts() -> None:
    shown = "verification report: p (constrained)\n  eps1   6.406794e+00\n  gap   2.2e-01\nverdict: FAIL (x)"
    assert compare(shown, shown + "\n") == []
    printed = "verification report: p (constrained)\n  eps1   4.716026e+00\n  gap   2.2e-01\nverdict: FAIL (x)"
    assert compare(shown, printed) == ["eps1: shown 6.40679, printed 4.71603"]
    assert compare(shown, printed.replace("FAIL", "PASS").replace("4.716026", "6.406794")) != []
    assert compare("  tiny   8.0e-26\n", "  tiny   1.1e-25\n") == []  # round-off is round-off
    report = "  fun   1.0\n  reference: cvxpy (cache)\n"
    assert compare(report, report.replace("(cache)", "(solved in 0.02 s)")) == []  # the text may vary
    assert compare(report, "  fun   1.0\n  certificate: passed\n  reference: cvxpy\n") != []  # a new line may not


def test_every_marker_names_a_command() -> None:
    assert any(kind == "of" for _, kind, _, _ in SAMPLES)
    for where, _, command, block in SAMPLES:
        assert command.split()[0] in ("zoframe", "python") or "zoframe " in command, f"{where}: {command!r}"
        assert block.strip(), f"{where}: empty output block"
    print("\n".join(f"{w}: output-{k}: {c}" for w, k, c, _ in SAMPLES))


@pytest.mark.parametrize(
    ("where", "command", "block"),
    [pytest.param(w, c, b, id=w) for w, k, c, b in SAMPLES if k == "of"],
)
def test_sample_output_is_current(where: str, command: str, block: str, tmp_path: Path) -> None:
    printed = ""
    for part in command.split(" && "):
        proc = subprocess.run(
            _argv(part), cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=240
        )
        assert proc.returncode in (0, 1), f"{where}: {part!r} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
        printed = proc.stdout
    assert _numbers(block), f"{where}: the sample shows no `name  number` line to check"
    problems = compare(block, printed)
    assert not problems, f"{where}: the sample output is stale ({'; '.join(problems)}). Printed now:\n{printed}"
