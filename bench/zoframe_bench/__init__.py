"""zoframe's benchmark lab: problem suites, sweeps of solvers over suites, and profiles.

``zoframe_bench.run(suite, solvers, seeds=..., budget=...)`` runs the grid and writes the profiles;
``zoframe bench SUITE --solvers a,b`` does the same from the command line.
"""

from __future__ import annotations

from typing import Any

__all__ = ["run"]


def run(*args: Any, **kwargs: Any) -> Any:
    """See :func:`zoframe_bench.runner.run` (imported on first use)."""
    from zoframe_bench.runner import run as _run

    return _run(*args, **kwargs)
