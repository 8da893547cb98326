"""Quality gates: mypy --strict over the core and the first-party plugins, ruff over the tree."""

from __future__ import annotations

import os
from pathlib import Path
import shutil
import subprocess
import sys

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_PACKAGES = sorted(p.name for p in (ROOT / "plugins").iterdir() if (p / "__init__.py").exists())


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is a dev extra: pip install -e '.[dev]'")
def test_ruff_clean() -> None:
    proc = subprocess.run(["ruff", "check", "."], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_strict_clean() -> None:
    pytest.importorskip("mypy", reason="mypy is a dev extra: pip install -e '.[dev]'")
    env = {**os.environ, "MYPYPATH": os.pathsep.join(str(ROOT / d) for d in ("plugins", "verification", "bench"))}
    targets = ["zoframe", *[f"plugins/{p}" for p in PLUGIN_PACKAGES], "verification/zoframe_verify", "bench/zoframe_bench"]
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", *targets], cwd=ROOT, capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_core_does_not_import_cvxpy() -> None:
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "zoframe").rglob("*.py") if "cvxpy" in _imports(p)]
    assert offenders == []


def _imports(path: Path) -> str:
    return "\n".join(
        line for line in path.read_text(encoding="utf-8").splitlines() if line.lstrip().startswith(("import ", "from "))
    )
