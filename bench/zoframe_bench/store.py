"""Finished bench runs in an SQLite file, one row per (instance, solver, seed) task.

The model is :class:`zoframe_verify.study.RunStore`: one transaction per finished run, so a killed
bench loses only the runs that were in flight, and a run already in the file is never repeated. The
primary key is the task's :attr:`Task.key`, a hash of everything that changes the run (suite and its
arguments, instance, solver and its parameters, seed, budget, recording, feasibility tolerance).

Every column except ``seconds`` and ``created`` is a deterministic function of the task: the same
bench gives the same rows serially, on a process pool and on a dask cluster.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
import dataclasses
from dataclasses import dataclass, field
import hashlib
import io
import json
import os
from pathlib import Path
import sqlite3
import time
from typing import Any

import numpy as np

from zoframe.protocols import Array

__all__ = ["BenchStore", "RunRow", "Task"]


@dataclass(frozen=True)
class Task:
    """One cell of the grid: instance x solver x seed, with everything that determines the run."""

    suite: str
    suite_args: Mapping[str, Any]
    instance: str
    solver: str
    params: Mapping[str, Any]
    seed: int
    #: ``max_calls`` of the run, in raw component evaluations
    budget: int
    #: a history row at least every this many raw evaluations (and at the start and the end)
    history_every: int
    feasibility_tol: float
    verify: bool

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True, default=str)

    @property
    def key(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:32]

    @classmethod
    def from_json(cls, text: str) -> Task:
        return cls(**json.loads(text))


@dataclass(frozen=True)
class RunRow:
    """A stored run: the task, its outcome and its convergence history.

    ``status``: the driver's status name, ``SKIPPED`` (the solver does not accept the problem kind;
    ``reason`` says why) or ``ERROR`` (the run could not start; ``reason`` holds the error).
    ``history``: ``calls`` (raw component evaluations), ``fun`` and ``violation`` (0 for
    unconstrained kinds) along the run. ``unit``: evaluations of one full pass (``n + m``).
    """

    task: Task
    status: str
    reason: str
    kind: str
    dim: int
    n: int
    m: int
    nfev: int
    nfev_by_kind: Mapping[str, int]
    result: Mapping[str, Any]
    verification: Mapping[str, Any] | None
    history: Mapping[str, Array]
    x: Array
    seconds: float = 0.0
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def unit(self) -> int:
        return self.n + self.m

    @property
    def ran(self) -> bool:
        return self.status not in ("SKIPPED", "ERROR")


def _npz(arrays: Mapping[str, Array]) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **{k: np.asarray(v, dtype=np.float64) for k, v in arrays.items()})  # type: ignore[arg-type]
    return buf.getvalue()


def _unnpz(blob: bytes) -> dict[str, Array]:
    with np.load(io.BytesIO(blob), allow_pickle=False) as d:
        return {k: np.asarray(d[k], dtype=np.float64) for k in d.files}


class BenchStore:
    """Finished runs in SQLite (``":memory:"`` for a throw-away bench)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._con = sqlite3.connect(self.path, timeout=60.0)
        self._con.execute(
            "CREATE TABLE IF NOT EXISTS runs (key TEXT PRIMARY KEY, task TEXT NOT NULL, suite TEXT NOT NULL, "
            "instance TEXT NOT NULL, solver TEXT NOT NULL, seed INTEGER NOT NULL, status TEXT NOT NULL, "
            "reason TEXT NOT NULL, kind TEXT NOT NULL, dim INTEGER NOT NULL, n INTEGER NOT NULL, m INTEGER NOT NULL, "
            "nfev INTEGER NOT NULL, nfev_by_kind TEXT NOT NULL, result TEXT NOT NULL, verification TEXT, "
            "history BLOB NOT NULL, x BLOB NOT NULL, seconds REAL NOT NULL, created REAL NOT NULL)"
        )
        self._con.commit()

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> BenchStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def keys(self) -> set[str]:
        return {str(r[0]) for r in self._con.execute("SELECT key FROM runs")}

    def add(self, row: RunRow) -> None:
        """Store one finished run in its own transaction (an interruption loses nothing finished)."""
        self._con.execute(
            "INSERT OR IGNORE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.task.key, row.task.to_json(), row.task.suite, row.task.instance, row.task.solver, row.task.seed,
                row.status, row.reason, row.kind, row.dim, row.n, row.m, row.nfev,
                json.dumps(dict(row.nfev_by_kind), sort_keys=True), json.dumps(row.result, sort_keys=True),
                None if row.verification is None else json.dumps(row.verification, sort_keys=True),
                _npz(row.history), _npz({"x": row.x}), float(row.seconds), time.time(),
            ),
        )
        self._con.commit()

    def _row(self, r: tuple[Any, ...]) -> RunRow:
        return RunRow(
            task=Task.from_json(r[1]), status=str(r[6]), reason=str(r[7]), kind=str(r[8]), dim=int(r[9]),
            n=int(r[10]), m=int(r[11]), nfev=int(r[12]), nfev_by_kind=json.loads(r[13]), result=json.loads(r[14]),
            verification=None if r[15] is None else json.loads(r[15]), history=_unnpz(r[16]), x=_unnpz(r[17])["x"],
            seconds=float(r[18]),
        )

    def get(self, key: str) -> RunRow:
        r = self._con.execute("SELECT * FROM runs WHERE key = ?", (key,)).fetchone()
        if r is None:
            raise KeyError(key)
        return self._row(tuple(r))

    def rows(self) -> Iterator[RunRow]:
        for r in self._con.execute("SELECT * FROM runs ORDER BY suite, instance, solver, seed, key"):
            yield self._row(tuple(r))

    def created(self) -> dict[str, float]:
        """``key -> creation time`` (the resume test checks that no finished run is written twice)."""
        return {str(k): float(t) for k, t in self._con.execute("SELECT key, created FROM runs")}

    def count(self) -> int:
        return int(self._con.execute("SELECT COUNT(*) FROM runs").fetchone()[0])

    def deterministic_dump(self) -> list[tuple[Any, ...]]:
        """Every row without the wall-clock columns (``seconds``, ``created``), ordered by key."""
        return [tuple(r) for r in self._con.execute(
            "SELECT key, task, suite, instance, solver, seed, status, reason, kind, dim, n, m, nfev, nfev_by_kind, "
            "result, verification, history, x FROM runs ORDER BY key"
        )]
