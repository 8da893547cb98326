"""The best-point tracker: the best recorded point of a run (``Result.x_best`` / ``fun_best``)."""

from __future__ import annotations

from collections.abc import Mapping
import math
from typing import Any

import numpy as np

from zoframe.protocols import Array
from zoframe.run import RunLoop, Stop


def best_key(row: Mapping[str, float], tol: float) -> tuple[float, float]:
    """Order of recorded points: feasible (``max_violation <= tol``) first, then lowest finite ``fun``."""
    viol = row.get("max_violation")
    fun = row.get("fun", math.inf)
    fun = math.inf if fun is None or not math.isfinite(fun) else fun
    if viol is None:
        return (0.0, fun)
    return (0.0, fun) if viol <= tol else (1.0 + viol, fun)


class BestPoint:
    """Keeps the best point among the trace records (it listens to the :class:`TraceRecorder`).

    Only finite points count, so after a divergence ``x`` is the last finite best point. Before any
    record it is the starting point, with ``fun = inf``. A problem without measures has no notion
    of best: ``x`` is then the last recorded point and ``fun`` NaN.
    """

    per_step = False  # fed by the recorder

    def __init__(self, start: Array, feasibility_tol: float) -> None:
        self.key: tuple[float, float] = (math.inf, math.inf)
        self.x: Array = np.array(start, dtype=np.float64, copy=True)
        self.fun = math.inf
        self.tol = feasibility_tol

    def seen(self, row: Mapping[str, float], x: Array) -> None:
        """A trace record ``row`` of the point ``x`` (finite: the recorder checks it)."""
        if not row:
            self.x, self.fun = np.array(x, copy=True), math.nan
            return
        k = best_key(row, self.tol)
        if k < self.key:
            self.key, self.x, self.fun = k, np.array(x, copy=True), row.get("fun", math.nan)

    # observer protocol: the tracker is fed by the recorder, not by the loop
    def start(self, loop: RunLoop) -> Stop | None:
        return None

    def iteration(self, loop: RunLoop) -> Stop | None:
        return None

    def end(self, loop: RunLoop) -> None:
        return None

    # checkpoints
    def snapshot(self) -> tuple[dict[str, Any], dict[str, Array]]:
        return {"best_key": list(self.key), "best_fun": self.fun}, {"best.x": np.asarray(self.x)}

    def restore(self, meta: Mapping[str, Any], arrays: Mapping[str, Array]) -> None:
        k = meta["best_key"]
        self.key = (float(k[0]), float(k[1]))
        self.x = arrays["best.x"]
        self.fun = float(meta["best_fun"])
