"""The callback observer: calls the user's function after every iteration; ``True`` stops the run."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from zoframe.protocols import Array
from zoframe.result import Status
from zoframe.run import RunLoop, Stop


@dataclass(frozen=True)
class IterationInfo:
    """What the callback receives after each iteration. Return ``True`` from it to stop the run.

    Attributes
    ----------
    nit:
        iterations completed (as ``Result.nit``); ``iteration`` is the same number (alias).
    calls:
        budgeted oracle evaluations so far (as ``Result.nfev``).
    seconds:
        the solver's own time so far (as the trace's ``seconds``; monitoring excluded).
    x:
        the current iterate (the solver's ``outputs(state)["x"]``).
    state:
        the solver's state (a frozen dataclass; read it, do not keep it across runs).
    measures:
        the problem's measures recorded at this iteration, or ``None`` when the trace did not
        record this iteration (see ``record_every``).
    """

    nit: int
    calls: int
    seconds: float
    x: Array
    state: Any
    measures: Mapping[str, float] | None

    @property
    def iteration(self) -> int:
        """Alias of :attr:`nit`."""
        return self.nit


class Callback:
    """Calls ``fn(IterationInfo)`` after every step; a true return value stops with ``CALLBACK``."""

    def __init__(self, fn: Callable[[IterationInfo], bool | None]) -> None:
        self.fn = fn

    def start(self, loop: RunLoop) -> Stop | None:
        return None

    def iteration(self, loop: RunLoop) -> Stop | None:
        info = IterationInfo(loop.nit, loop.calls, loop.seconds, loop.outputs()["x"], loop.state, loop.row)
        if self.fn(info):
            return Status.CALLBACK, "stopped by the callback"
        return None

    def end(self, loop: RunLoop) -> None:
        return None
