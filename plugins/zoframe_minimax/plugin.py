"""Hook implementations of zoframe_minimax (components are added as they land)."""

from __future__ import annotations
