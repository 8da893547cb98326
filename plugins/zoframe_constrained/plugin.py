"""Hook implementations of zoframe_constrained (components are added as they land)."""

from __future__ import annotations
