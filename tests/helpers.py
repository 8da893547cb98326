"""Helpers shared by several test modules (imported as ``helpers``: pytest puts tests/ on the path)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
import sys
from types import ModuleType

GOLDEN_DIR = Path(__file__).resolve().parent / "data" / "golden"


def fake_distribution(root: Path, dist: str, entry_points: dict[str, str]) -> None:
    """Write an installed-looking ``.dist-info`` whose entry points are in the zoframe group."""
    info = root / f"{dist.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1.0\n")
    lines = "\n".join(f"{k} = {v}" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[zoframe.plugins]\n{lines}\n")


def load_golden(module_name: str) -> ModuleType:
    """The golden cases' script (tests/data/golden/make_golden.py) imported as ``module_name``."""
    spec = importlib.util.spec_from_file_location(module_name, GOLDEN_DIR / "make_golden.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {GOLDEN_DIR / 'make_golden.py'}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def need_data_file(path: Path, what: str) -> None:
    """Skip the calling test when the real data file ``path`` is missing (a failure with ``ZOFRAME_REQUIRE_DATA=1``).

    For raw files that are not catalogue data sets (use ``@pytest.mark.data(NAME)`` for those)."""
    import os

    import pytest

    if path.is_file():
        return
    text = f"needs {what} ({path.name}), not found at {path}: set ZOFRAME_DATA to a directory holding it"
    if os.environ.get("ZOFRAME_REQUIRE_DATA", "").strip() not in ("", "0", "false", "no"):
        pytest.fail(f"ZOFRAME_REQUIRE_DATA is set but this test {text}", pytrace=False)
    pytest.skip(text)


def subprocess_env(workdir: Path, **extra: str) -> dict[str, str]:
    """The environment of a ``zoframe`` / ``python`` command run by a test: this checkout's packages first
    on ``PYTHONPATH``, outputs under ``workdir``, no display; ``extra`` on top."""
    import os

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ)
    paths = [str(root), str(root / "plugins"), str(root / "verification"), str(root / "bench")]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env.update(PYTHONPATH=os.pathsep.join(paths), ZOFRAME_OUT=str(workdir / "zoframe-out"), MPLBACKEND="Agg", **extra)
    return env
