"""Where zoframe's commands write their outputs by default.

Every command that writes files puts them under one directory, ``zoframe-out/`` in the current
working directory unless ``$ZOFRAME_OUT`` names another, and prints the paths it wrote.
An explicit path given by the user is used as given.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_output_dir", "output_path"]


def default_output_dir() -> Path:
    """The directory for default outputs: ``$ZOFRAME_OUT`` if set, else ``./zoframe-out``."""
    env = os.environ.get("ZOFRAME_OUT")
    return Path(env) if env else Path.cwd() / "zoframe-out"


def output_path(name: str | os.PathLike[str], *, explicit: bool = False) -> Path:
    """The path for an output named ``name``.

    A relative ``name`` that the user did not give explicitly goes under
    :func:`default_output_dir`; an absolute or explicit path is returned unchanged. Parent
    directories are created.
    """
    p = Path(name)
    if not explicit and not p.is_absolute():
        p = default_output_dir() / p
    p.parent.mkdir(parents=True, exist_ok=True)
    return p
