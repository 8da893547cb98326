"""The observers of a run, one job each (see :mod:`zoframe.run`).

* :class:`TraceRecorder` records ``iteration``, ``calls``, ``seconds`` and the problem's measures;
  :class:`MonitorBudget` charges the measures' evaluations of a black box to ``max_calls``;
* :class:`BestPoint` keeps the best recorded point (feasible first, then lowest ``fun``);
* :class:`Checkpointer` writes checkpoints and restores the others on resume;
* :class:`ProgressBar` shows a tqdm bar;
* :class:`Callback` calls the user's callback with an :class:`IterationInfo`; ``True`` stops.
"""

from __future__ import annotations

from zoframe.observers.best import BestPoint
from zoframe.observers.callback import Callback, IterationInfo
from zoframe.observers.checkpointing import Checkpointer
from zoframe.observers.progress import ProgressBar
from zoframe.observers.trace import MonitorBudget, TraceRecorder

__all__ = ["BestPoint", "Callback", "Checkpointer", "IterationInfo", "MonitorBudget", "ProgressBar", "TraceRecorder"]
