"""Hook implementations of the ``peers`` plugin."""

from __future__ import annotations

from collections.abc import Sequence

from zoframe import hookimpl
from zoframe.specs import SolverSpec


@hookimpl
def zoframe_solvers() -> Sequence[SolverSpec]:
    return []
