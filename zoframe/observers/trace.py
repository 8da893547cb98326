"""The trace recorder: ``iteration``, ``calls``, ``seconds`` and the problem's measures along a run.

When it records (:func:`record_iterations`): by default at iteration 0, on a geometric grid of
round numbers, six per decade (``1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100, 150, ...``), and at the
last iteration; with ``record_every=k`` every ``k`` iterations (the dense trace), with ``0`` only at
the first and the last. The grid depends on the iteration number alone (never on time or on the
budget), so the same run gives the same rows however it is run, and its cost grows as the
logarithm of the run's length: a record computes the problem's measures (a full pass over the data
for most problems, the cost of one or a few iterations), so a run of ``K`` iterations spends about
``6 log10(K) + 2`` records' worth on them (21 records for 2000 iterations, 27 for 20 000) instead of
one per ``record_every`` iterations.

Measures are computed by the problem (:class:`~zoframe.protocols.HasMeasures`) through the
oracle's monitor: those evaluations are counted under the purpose ``"monitor"``. For a problem
that declares ``monitor_free = True`` (a registered benchmark whose functions are cheap white-box
formulas) they are free. For any other problem they are real calls of the user's black box and
:class:`MonitorBudget` pays them from ``max_calls``:

* the solver's budget shrinks by what the monitor spent, so the solver's evaluations plus the
  monitor's never exceed ``max_calls`` (``Result.nfev`` counts the solver's,
  ``Result.nfev_by_purpose["monitor"]`` the monitor's);
* the cost of one record, measured at the first record, is kept back for the final point, so a
  run that spends its budget still reports ``fun`` at its last iterate;
* a record that would exceed what is left is skipped (no trace row; the run goes on), never a
  failure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
import math
from typing import Any

import numpy as np

from zoframe.errors import BudgetExhausted
from zoframe.oracle import CountingOracle, MonitorOracle
from zoframe.protocols import Array
from zoframe.result import Status
from zoframe.run import RunLoop, Stop, x_is_finite

#: mantissas of the default grid, in tenths: 1, 1.5, 2, 3, 5, 7 times a power of ten
_GRID = (10, 15, 20, 30, 50, 70)


def next_on_grid(k: int) -> int:
    """The first iteration after ``k`` on the default grid ``1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100, ...``
    (``m * 10**e`` for ``m`` in 1, 1.5, 2, 3, 5, 7, rounded down; six per decade, about 1.5 apart)."""
    scale = 1
    while True:
        for tenths in _GRID:
            it = tenths * scale // 10
            if it > k:
                return it
        scale *= 10


def record_iterations(every: int | None, last: int) -> list[int]:
    """The iterations a run of ``last`` iterations records with ``record_every=every`` (``None``: the
    default grid): iteration 0, the scheduled ones, and ``last`` (a run that stops early, on a budget
    of calls or time or its own rule, also records the iteration where it stopped)."""
    out = [0]
    while out[-1] < last:
        nxt = last if every == 0 else next_on_grid(out[-1]) if every is None else (out[-1] // every + 1) * every
        out.append(min(nxt, last))
    return out


def _rows(X: Any) -> int:
    return 1 if np.ndim(X) <= 1 else int(np.shape(X)[0])


def _count(idx: Any, size: int) -> int:
    return size if idx is None else max(1, int(np.size(idx)))


class MonitorBudget(MonitorOracle):
    """A monitor whose evaluations count against ``max_calls`` (problems not ``monitor_free``).

    Each evaluation is refused (:class:`~zoframe.errors.BudgetExhausted`) *before* it runs when it
    would exceed :attr:`allowance`; the recorder sets the allowance before each record and lowers
    the oracle's limit for the solver after it.
    """

    def __init__(self, oracle: CountingOracle, max_calls: int) -> None:
        super().__init__(oracle)
        self.oracle = oracle
        self.max_calls = max_calls
        self.reserve = 0  # the cost of one record, kept back for the final one
        self.allowance = 0

    @property
    def spent(self) -> int:
        return int(self.oracle.calls_by_purpose.get("monitor", 0))

    def open(self, final: bool) -> None:
        """Before a record: what it may spend (the reserve only for the final record)."""
        self.allowance = self.max_calls - self.oracle.calls - self.spent - (0 if final else self.reserve)

    def close(self, cost: int, first: bool) -> None:
        """After a record of ``cost`` evaluations: keep back the cost of one record, shrink the solver's limit."""
        if first:
            self.reserve = cost
        self.oracle.max_calls = max(self.oracle.calls, self.max_calls - self.spent - self.reserve)

    def _take(self, cost: int) -> None:
        if cost > self.allowance:
            raise BudgetExhausted(cost, self.oracle.calls + self.spent, self.max_calls)
        self.allowance -= cost

    def objective(self, X: Any, idx: Any = None) -> Array:
        self._take(_rows(X) * _count(idx, self.oracle.n))
        return super().objective(X, idx)

    def constraints(self, X: Any, idx: Any = None) -> Array:
        self._take(_rows(X) * _count(idx, self.oracle.m))
        return super().constraints(X, idx)

    def equalities(self, X: Any, idx: Any = None) -> Array:
        self._take(_rows(X) * _count(idx, self.oracle.m_eq))
        return super().equalities(X, idx)

    def minimax(self, X: Any, Y: Any, idx: Any = None) -> Array:
        self._take(max(_rows(X), _rows(Y)) * _count(idx, self.oracle.n))
        return super().minimax(X, Y, idx)


class TraceRecorder:
    """Records a row every ``every`` iterations (``0``: only the first and the last iterate; ``None``:
    at the iterations of the default grid, :func:`next_on_grid`, and the last).

    ``measure(outputs, monitor)`` is the problem's ``measures`` (``None``: no measures, the trace
    holds ``iteration``, ``calls`` and ``seconds``); a solver with ``trace_row(state)`` adds its own
    columns (e.g. ``phase``), read from its state without evaluations. ``listeners`` see each recorded row with its
    point (the best-point tracker). A non-finite iterate is never measured: the record stops the
    run with ``DIVERGED`` instead.
    """

    def __init__(
        self,
        every: int | None,
        measure: Callable[[Mapping[str, Array], MonitorOracle], Mapping[str, float]] | None,
        monitor: MonitorOracle,
        listeners: tuple[Any, ...] = (),
    ) -> None:
        self.every = every
        self.per_step = every != 0
        self._next = 0  # no record is due before this iteration
        self.measure = measure
        self.monitor = monitor
        self.budget = monitor if isinstance(monitor, MonitorBudget) else None
        self.listeners = listeners
        self.columns: dict[str, list[float]] = {"iteration": [], "calls": [], "seconds": []}
        self.skipped = 0  # records skipped because the budget could not pay their evaluations

    def start(self, loop: RunLoop) -> Stop | None:
        return self.record(loop)

    def next_call(self, nit: int) -> int:
        """The first iteration after ``nit`` at which a record may be due (the run loop skips the calls
        before it; a resumed run, whose ``_next`` is 0, is called at its first step)."""
        return self._next if self._next > nit else nit + 1

    def iteration(self, loop: RunLoop) -> Stop | None:
        nit = loop.nit
        if nit < self._next:  # most steps: one comparison
            return None
        every = self.every
        if every is None:
            due = nit == self._next or next_on_grid(nit - 1) == nit  # (a resumed run starts off the grid)
            self._next = next_on_grid(nit)
        else:
            due = nit % every == 0
            self._next = (nit // every + 1) * every
        return self.record(loop) if due else None

    def end(self, loop: RunLoop) -> None:
        it = self.columns["iteration"]
        if loop.state is None or (it and it[-1] == loop.nit):
            return
        try:
            stop = self.record(loop, final=True)
        except Exception:  # a failing measure must not lose the run
            return
        if stop is not None and (loop.stop is None or loop.stop[0] not in (Status.DIVERGED, Status.FAILED)):
            loop.stop = stop  # e.g. a budget stop whose final point turns out non-finite

    def record(self, loop: RunLoop, final: bool = False) -> Stop | None:
        outs = loop.outputs()
        if not x_is_finite(outs["x"]):
            return loop.diverged(checked_every_step=False)
        ms: dict[str, float] = {}
        if self.measure is not None:
            if self.budget is None:
                ms = {k: float(v) for k, v in self.measure(outs, self.monitor).items()}
            else:
                spent = self.budget.spent
                self.budget.open(final)
                try:
                    ms = {k: float(v) for k, v in self.measure(outs, self.monitor).items()}
                except BudgetExhausted:
                    self.skipped += 1
                    return None  # no budget left to measure: skip the record, not the run
                finally:
                    self.budget.close(self.budget.spent - spent, first=not self.columns["iteration"])
        columns = self.columns
        n_prev = len(columns["iteration"])
        own = loop.solver_row()  # the solver's columns (its phase): no evaluation, not a measure
        row = {**ms, **own} if own else ms
        for key in row:
            if key not in columns:
                columns[key] = [math.nan] * n_prev
        for key, col in columns.items():
            if key == "iteration":
                col.append(float(loop.nit))
            elif key == "calls":
                col.append(float(loop.calls))
            elif key == "seconds":
                col.append(loop.seconds)
            else:
                col.append(row.get(key, math.nan))
        for listener in self.listeners:
            listener.seen(ms, outs["x"])
        loop.row = loop.measures = ms
        return None

    # checkpoints
    def snapshot(self) -> tuple[dict[str, Any], dict[str, Array]]:
        meta: dict[str, Any] = {"trace_columns": list(self.columns)}
        if self.budget is not None:
            meta["monitor_reserve"] = self.budget.reserve
        return meta, {f"trace.{k}": np.asarray(v, dtype=np.float64) for k, v in self.columns.items()}

    def restore(self, meta: Mapping[str, Any], arrays: Mapping[str, Array]) -> None:
        self.columns = {key: [float(v) for v in arrays[f"trace.{key}"]] for key in meta["trace_columns"]}
        if self.budget is not None:
            self.budget.reserve = int(meta.get("monitor_reserve", 0))  # the limit is set once the counters are back
