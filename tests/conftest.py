"""Shared test configuration: the datasets live in ../shared/data unless ZOFRAME_DATA says otherwise."""

from __future__ import annotations

import os
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]
_SHARED = _REPO.parent / "shared" / "data"
if "ZOFRAME_DATA" not in os.environ and _SHARED.is_dir():
    os.environ["ZOFRAME_DATA"] = str(_SHARED)
