"""Hook implementations of the constrained baselines and the DSZOG reproduction."""

from __future__ import annotations
