"""Hook implementations of zoframe_verify (components are added as they land)."""

from __future__ import annotations
