"""Plots of recorded traces: ``zoframe.plot.trace(res1, res2, y="fun", x="calls")``.

Needs matplotlib, the ``plot`` extra (``pip install 'zoframe[plot]'``); without it each function
raises :class:`~zoframe._optional.MissingDependencyError` naming the extra. Importing this module does
not import matplotlib.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from zoframe._optional import require
from zoframe.errors import InvalidInputError
from zoframe.result import Result

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["AXIS_LABELS", "trace"]

#: axis labels of the columns every trace has
AXIS_LABELS = {
    "calls": "oracle evaluations (nfev: component evaluations)",
    "iteration": "iteration",
    "seconds": "solver time [s]",
    "fun": "objective (fun)",
}


def trace(
    *results: Result,
    y: str = "fun",
    x: str = "calls",
    ax: Axes | None = None,
    labels: Sequence[str] | None = None,
    logy: bool | None = None,
    title: str | None = None,
) -> Axes:
    """Draw the trace column ``y`` against the column ``x`` for each result, on one axes.

    ``x`` is ``"calls"`` (oracle evaluations, the unit of ``nfev``), ``"iteration"`` or ``"seconds"``
    (or any other column); ``y`` any column of the traces (``result.trace.names``). Labels default
    to the solver's name and seed. ``logy=None`` uses a log scale when every plotted value is
    positive and they span more than two decades. Returns the matplotlib ``Axes`` (a new figure
    unless ``ax`` is given); save it with ``ax.figure.savefig(path)``.
    """
    if not results:
        raise InvalidInputError("trace() needs at least one Result, e.g. zoframe.plot.trace(res)")
    for r in results:
        if not isinstance(r, Result):
            raise InvalidInputError(
                f"trace() takes Results (from zoframe.minimize or Result.load), got {type(r).__name__}"
            )
    if labels is not None and len(labels) != len(results):
        raise InvalidInputError(f"{len(labels)} labels for {len(results)} results: give one label per result")
    columns: list[tuple[Any, Any]] = []
    for r in results:
        names = r.trace.names
        for col in (x, y):
            if col not in names:
                raise InvalidInputError(
                    f"the trace of the {r.solver} run has no column {col!r}; its columns are {list(names)}"
                )
        columns.append((np.asarray(r.trace[x], dtype=np.float64), np.asarray(r.trace[y], dtype=np.float64)))
    plt = require("matplotlib.pyplot", extra="plot", feature="plotting a trace (zoframe.plot)")
    axes: Axes = plt.subplots(figsize=(6.0, 4.0))[1] if ax is None else ax
    if labels is None:
        labels = [r.solver if r.seed is None else f"{r.solver} (seed {r.seed})" for r in results]
    for (xs, ys), label in zip(columns, labels):
        axes.plot(xs, ys, label=label)
    if logy is None:
        finite = np.concatenate([ys[np.isfinite(ys)] for _, ys in columns])
        logy = bool(finite.size and finite.min() > 0 and finite.max() > 100 * finite.min())
    if logy:
        axes.set_yscale("log")
    axes.set_xlabel(AXIS_LABELS.get(x, x))
    axes.set_ylabel(AXIS_LABELS.get(y, y))
    if title is not None:
        axes.set_title(title)
    axes.legend()
    axes.grid(True, alpha=0.3)
    return axes
