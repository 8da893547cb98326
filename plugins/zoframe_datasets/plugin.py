"""Hook implementations of zoframe_datasets (components are added as they land)."""

from __future__ import annotations
