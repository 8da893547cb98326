"""Hook implementations of zoframe_admm (components are added as they land)."""

from __future__ import annotations
