"""The command-line examples of README.md run, in order, and say what the README says they say.

Every command line of the README's "Command line" block is either run here (one temporary directory
for the whole block, so ``zoframe verify run`` reads what ``zoframe solve ... -o run`` wrote) or
listed in ``NOT_RUN`` / ``SLOW`` with the reason. A line whose comment announces a verdict
(``-> verdict: PASS`` / ``-> verdict: FAIL``) must print that verdict; ``zoframe verify`` exits
with 1 on FAIL, every other command with 0.
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

#: Commands of the block that the test does not run, by their start, with the reason.
NOT_RUN: dict[str, str] = {
    "zoframe reproduce dszog --table pairwise --seeds 10": "hours of runs (tests/test_reproduce_dszog.py runs tiny tables)",
    "zoframe reproduce minimax": "minutes on real data (tests/test_minimax_reproduce.py runs --quick on one data set)",
    "zoframe reproduce admm": "minutes on real data (tests/test_admm_problems.py runs a tiny configuration)",
    "zoframe data fetch a9a": "downloads from the LIBSVM site (tests/test_data_fetch.py serves a local copy)",
}
#: Commands run only with ``-m slow``, with how long they take.
SLOW: dict[str, str] = {
    "zoframe rate zo-gda ncsc": "about a minute of CPU (the README says so)",
}


def readme_commands() -> list[tuple[str, str]]:
    """``(command, comment)`` of every command of the README's "Command line" block, in order."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Command line\n") :]
    m = re.search(r"```bash\n(.*?)```", section, re.S)
    assert m is not None, "README.md: no ```bash block under '## Command line'"
    commands: list[tuple[str, str]] = []
    code_part, comment_part = "", ""  # a command continued with a trailing backslash
    for raw in m.group(1).splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        if line.lstrip().startswith("#"):  # a comment line continues the previous command's comment
            cmd, comment = commands[-1]
            commands[-1] = (cmd, f"{comment} {line.strip().lstrip('#').strip()}")
            continue
        code, _, comment = _split_comment(line)
        comment_part = f"{comment_part} {comment}".strip()
        if code.endswith("\\"):
            code_part += code[:-1].strip() + " "
            continue
        commands.append(((code_part + code).strip(), comment_part))
        code_part, comment_part = "", ""
    return commands


def _split_comment(line: str) -> tuple[str, str, str]:
    """``line`` split at its first ``#`` outside quotes: (code, '#', comment)."""
    quote: str | None = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#":
            return line[:i].rstrip(), "#", line[i + 1 :].strip()
    return line.rstrip(), "", ""


def _reason(command: str, table: dict[str, str]) -> str | None:
    return next((r for start, r in table.items() if command.startswith(start)), None)


def _argv(command: str) -> list[str]:
    # the README's commands run from the checkout: a path of it (docs/examples/x.py:attr) is made absolute
    argv = [
        str(ROOT / tok) if "/" in tok and (ROOT / tok.split(":")[0]).exists() else tok for tok in shlex.split(command)
    ]
    if argv[0] == "zoframe":
        return [sys.executable, "-m", "zoframe.cli", *argv[1:]]
    if argv[0] == "python":
        return [sys.executable, *argv[1:]]
    raise AssertionError(f"README command {command!r}: the test runs zoframe and python commands only")


def _env(workdir: Path) -> dict[str, str]:
    return subprocess_env(workdir)


def _expected_verdict(comment: str) -> str | None:
    m = re.search(r"verdict: (PASS|FAIL)\b", comment)
    return None if m is None else m.group(1)


def test_the_block_is_parsed_and_every_command_is_accounted_for() -> None:
    commands = readme_commands()
    assert len(commands) >= 10 and all(cmd.startswith(("zoframe ", "python ")) for cmd, _ in commands), commands
    for table in (NOT_RUN, SLOW):
        for start in table:
            assert any(cmd.startswith(start) for cmd, _ in commands), f"{start!r} is no longer in the README"
    # every line that verifies states the verdict it gets
    for cmd, comment in commands:
        if " verify" in cmd or "--verify" in cmd:
            assert _expected_verdict(comment), f"README: {cmd!r} should say which verdict it prints"
    # a pipe in the block would be a shell pipe when pasted, not an "or"
    assert all(" | " not in cmd for cmd, _ in commands)


def _run_block(tmp_path: Path, *, slow: bool) -> None:
    ran = 0
    for cmd, comment in readme_commands():
        if _reason(cmd, NOT_RUN) is not None:
            continue
        is_slow = _reason(cmd, SLOW) is not None
        if is_slow != slow:  # the slow commands read no file the others write
            continue
        proc = subprocess.run(
            _argv(cmd), cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True,
            timeout=600 if is_slow else 240,
        )
        out = proc.stdout + proc.stderr
        verdict = _expected_verdict(comment)
        expected_code = 1 if (verdict == "FAIL" and cmd.startswith("zoframe verify")) else 0
        assert proc.returncode == expected_code, f"README command {cmd!r} exited {proc.returncode}:\n{out[-4000:]}"
        if verdict is not None:
            got = re.findall(r"^verdict: (PASS|FAIL)\b", proc.stdout, re.M)
            assert got == [verdict], f"README says {cmd!r} prints verdict {verdict}; it printed {got}:\n{out[-4000:]}"
        ran += 1
    assert ran >= (1 if slow else 8)


def test_readme_commands_run_and_their_verdicts_match(tmp_path: Path) -> None:
    _run_block(tmp_path, slow=False)


@pytest.mark.slow
def test_readme_slow_commands_run(tmp_path: Path) -> None:
    _run_block(tmp_path, slow=True)
