"""Results of a run: :class:`Status`, :class:`Trace` and the frozen :class:`Result`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
import enum
import io
import json
from typing import Any

import numpy as np

from zoframe.protocols import Array


class Status(enum.IntEnum):
    """Why a run ended. ``success`` is true for CONVERGED, MAX_ITER, and CALLBACK."""

    CONVERGED = 0
    MAX_ITER = 1
    BUDGET = 2
    MAX_TIME = 3
    CALLBACK = 4
    FAILED = 5

    @property
    def success(self) -> bool:
        return self in (Status.CONVERGED, Status.MAX_ITER, Status.CALLBACK)


@dataclass(frozen=True)
class Trace:
    """Columns recorded along a run: ``iteration``, ``calls``, ``seconds`` and the measures.

    ``seconds`` is the solver's own time (monitoring time excluded). Access a column with
    ``trace["fun"]``; ``trace.to_csv()`` gives CSV text.
    """

    columns: Mapping[str, Array]

    def __getitem__(self, name: str) -> Array:
        try:
            return self.columns[name]
        except KeyError:
            raise KeyError(f"no trace column {name!r}; columns are {list(self.columns)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.columns)

    def __len__(self) -> int:
        return 0 if not self.columns else len(next(iter(self.columns.values())))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.columns)

    def to_csv(self) -> str:
        buf = io.StringIO()
        names = list(self.columns)
        buf.write(",".join(names) + "\n")
        for r in range(len(self)):
            buf.write(",".join(repr(float(self.columns[c][r])) for c in names) + "\n")
        return buf.getvalue()


@dataclass(frozen=True)
class Result:
    """The outcome of :func:`zoframe.minimize` (scipy's field names plus zeroth-order fields).

    Attributes
    ----------
    x, fun, nit, nfev, status, success, message:
        as in :class:`scipy.optimize.OptimizeResult`; ``nfev`` counts budgeted evaluations (one
        component at one point is one evaluation).
    nfev_by_kind, nfev_by_purpose:
        the same count split by oracle kind and by the solver's purpose tags; the purpose
        ``"monitor"`` holds the driver's own (unbudgeted) evaluations for the trace.
    x_best, fun_best:
        the best recorded point (lowest ``fun``, feasible points first when the problem reports
        ``max_violation``).
    outputs:
        everything the solver reports about its final iterate (``x`` and e.g. ``y`` or ``p``).
    measures:
        the problem's measures at the final point.
    seed:
        the seed that reproduces the run (``None`` if a Generator was passed in).
    trace:
        the recorded :class:`Trace`.
    """

    x: Array
    fun: float
    nit: int
    nfev: int
    status: Status
    success: bool
    message: str
    nfev_by_kind: Mapping[str, int]
    nfev_by_purpose: Mapping[str, int]
    x_best: Array
    fun_best: float
    solver: str
    seed: int | None
    trace: Trace
    outputs: Mapping[str, Array] = field(default_factory=dict)
    measures: Mapping[str, float] = field(default_factory=dict)
    elapsed: float = 0.0

    def __repr__(self) -> str:
        ms = ", ".join(f"{k}={v:.6g}" for k, v in self.measures.items() if k != "fun")
        return (
            f"Result(solver={self.solver!r}, status={self.status.name}, fun={self.fun:.6g}, "
            f"nit={self.nit}, nfev={self.nfev}{', ' + ms if ms else ''}, message={self.message!r})"
        )

    def summary(self) -> dict[str, Any]:
        """JSON-friendly summary (no trace)."""
        return {
            "solver": self.solver,
            "status": self.status.name,
            "success": self.success,
            "message": self.message,
            "fun": self.fun,
            "nit": self.nit,
            "nfev": self.nfev,
            "nfev_by_kind": dict(self.nfev_by_kind),
            "nfev_by_purpose": dict(self.nfev_by_purpose),
            "fun_best": self.fun_best,
            "seed": self.seed,
            "elapsed": self.elapsed,
            "measures": {k: float(v) for k, v in self.measures.items()},
            "x": [float(v) for v in self.x],
        }

    def to_json(self) -> str:
        return json.dumps(self.summary(), indent=2)

    def save(self, path: str, *, metadata: Mapping[str, Any] | None = None) -> None:
        """Write ``PATH.json`` (summary) and ``PATH.npz`` (x, x_best, outputs, trace columns).

        ``metadata`` (JSON-serialisable, e.g. ``{"problem": "least-squares", "problem_args": {...}}``)
        is stored in the JSON beside the summary, so that ``zoframe verify PATH`` can rebuild the problem.
        """
        base = str(path).removesuffix(".json").removesuffix(".npz")
        arrays: dict[str, Array] = {"x": self.x, "x_best": self.x_best}
        arrays.update({f"outputs.{k}": np.asarray(v) for k, v in self.outputs.items()})
        arrays.update({f"trace.{k}": v for k, v in self.trace.columns.items()})
        np.savez(base + ".npz", **arrays)  # type: ignore[arg-type]
        doc = {**dict(metadata or {}), **self.summary()}
        with open(base + ".json", "w", encoding="utf-8") as fh:
            fh.write(json.dumps(doc, indent=2))
