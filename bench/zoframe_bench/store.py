"""Finished bench runs in an SQLite file, one row per (instance, solver, seed) task.

The model is :class:`zoframe_verify.study.RunStore`: one transaction per finished run, so a killed
bench loses only the runs that were in flight, and a run already in the file is never repeated. The
primary key is the task's :attr:`Task.key`, a hash of everything that changes the run (suite and its
arguments, instance, solver and its parameters, seed, budget, recording, feasibility tolerance, and the
imperfections the problem's values go through, if any: :attr:`Task.transform`).

Every column except ``seconds`` and ``created`` is a deterministic function of the task: the same
bench gives the same rows serially, on a process pool and on a dask cluster.

A damaged file (not an SQLite database, a truncated page, a cell that is not the JSON or the arrays
it should hold) raises :class:`BenchStoreError` naming the file and the row; nothing is written to
it then. :func:`repair` keeps what is sound: it moves the damaged file aside (never deleted) and
copies every row that reads back into a new file at the same path (``zoframe bench ... --repair``).
One bench at a time writes a store: :meth:`BenchStore.lock` takes an exclusive lock on
``STORE.lock`` (released when the process ends, even on ``kill -9``).
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

from zoframe.errors import InvalidInputError
from zoframe.protocols import Array

__all__ = ["BenchStore", "BenchStoreError", "DamagedStoreError", "RepairReport", "RunRow", "Task", "repair"]

#: the statuses a bench writes itself (the others are the driver's status names)
BENCH_STATUSES = ("SKIPPED", "ERROR", "TIMEOUT", "FAILED")


class BenchStoreError(InvalidInputError):
    """A bench store that cannot be read or written (damaged, locked, or not a file)."""


class DamagedStoreError(BenchStoreError):
    """A bench store whose file or one of whose runs does not read back (see :func:`repair`)."""



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
    #: the imperfections the problem's values go through (:mod:`zoframe.imperfect`, as plain data:
    #: ``ImperfectProblem.imperfection``); empty for the clean problem. It is part of the key, so that runs
    #: on transformed and on clean values are never mixed; a clean task's key is what it was before this field
    transform: tuple[Mapping[str, Any], ...] = ()

    def to_json(self) -> str:
        d = dataclasses.asdict(self)
        if not d["transform"]:
            del d["transform"]  # the key of a clean task does not depend on the field
        else:
            d["transform"] = [dict(t) for t in self.transform]
        return json.dumps(d, sort_keys=True, default=str)

    @property
    def key(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:32]

    @classmethod
    def from_json(cls, text: str) -> Task:
        d = json.loads(text)
        if not isinstance(d, dict):
            raise ValueError(f"a task is a JSON object, got {type(d).__name__}")
        transform = d.pop("transform", [])
        if not isinstance(transform, list) or not all(isinstance(t, dict) for t in transform):
            raise ValueError("the task's transform is not a list of JSON objects")
        task = cls(**d, transform=tuple(transform))
        if not (isinstance(task.suite, str) and isinstance(task.instance, str) and isinstance(task.solver, str)
                and isinstance(task.suite_args, dict) and isinstance(task.params, dict)
                and all(isinstance(v, int) and not isinstance(v, bool)
                        for v in (task.seed, task.budget, task.history_every))
                and isinstance(task.feasibility_tol, (int, float)) and isinstance(task.verify, bool)):
            raise ValueError("a task field has the wrong type")
        return task


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
        """Whether the run produced a result (not skipped, not an error before its start, not timed out)."""
        return self.status not in ("SKIPPED", "ERROR", "TIMEOUT")


def _npz(arrays: Mapping[str, Array]) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **{k: np.asarray(v, dtype=np.float64) for k, v in arrays.items()})  # type: ignore[arg-type]
    return buf.getvalue()


def _unnpz(blob: bytes) -> dict[str, Array]:
    with np.load(io.BytesIO(blob), allow_pickle=False) as d:
        return {k: np.asarray(d[k], dtype=np.float64) for k in d.files}


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS runs (key TEXT PRIMARY KEY, task TEXT NOT NULL, suite TEXT NOT NULL, "
    "instance TEXT NOT NULL, solver TEXT NOT NULL, seed INTEGER NOT NULL, status TEXT NOT NULL, "
    "reason TEXT NOT NULL, kind TEXT NOT NULL, dim INTEGER NOT NULL, n INTEGER NOT NULL, m INTEGER NOT NULL, "
    "nfev INTEGER NOT NULL, nfev_by_kind TEXT NOT NULL, result TEXT NOT NULL, verification TEXT, "
    "history BLOB NOT NULL, x BLOB NOT NULL, seconds REAL NOT NULL, created REAL NOT NULL)"
)


def _damaged(path: str, what: str) -> DamagedStoreError:
    return DamagedStoreError(
        f"bench store {path} is damaged ({what}); nothing was written to it. Keep its sound runs with "
        f"`zoframe bench ... --repair` (or zoframe_bench.store.repair({path!r})): the file is moved to "
        f"{Path(path).name}.damaged-TIME beside it and every readable run is copied into a new {Path(path).name}; "
        "or move the file away to start afresh"
    )


def _lock_file(store: str) -> int | None:
    """An exclusive ``flock`` on ``STORE.lock`` (its descriptor; ``None`` without ``fcntl``), or raise at once."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return None
    lock_path = store + ".lock"
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise BenchStoreError(f"cannot create the lock file {lock_path}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        try:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
        finally:
            os.close(fd)
        raise BenchStoreError(
            f"bench store {store} is in use by another bench (pid {holder}); wait for it to finish "
            "and run again (its finished runs are reused, none is run twice), or give another --store"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


class BenchStore:
    """Finished runs in SQLite (``":memory:"`` for a throw-away bench).

    Opening checks that the file is an SQLite database holding the ``runs`` table (or creates it);
    a file that is not raises :class:`BenchStoreError` (see :func:`repair`).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        self._lock_fd: int | None = None
        if self.path != ":memory:":
            where = Path(self.path)
            if where.is_dir():
                raise BenchStoreError(
                    f"bench store {self.path} is a directory: give a file path for the SQLite store, "
                    f"e.g. {where / 'bench.sqlite'}"
                )
            try:
                where.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise BenchStoreError(
                    f"cannot create the directory of bench store {self.path}: {exc.strerror or exc}; "
                    "give a store path in a directory you can write"
                ) from None
        try:
            self._con = sqlite3.connect(self.path, timeout=60.0)
        except sqlite3.Error as exc:
            raise BenchStoreError(f"cannot open bench store {self.path}: {exc}; give a writable file path") from None
        try:
            self._con.execute(_SCHEMA)
            self._con.commit()
            cols = [str(r[1]) for r in self._con.execute("PRAGMA table_info(runs)")]
        except (sqlite3.DatabaseError, ValueError) as exc:  # ValueError: text that is not UTF-8
            self._con.close()
            if isinstance(exc, sqlite3.OperationalError) and "unable to open" in str(exc):
                raise BenchStoreError(f"cannot open bench store {self.path}: {exc}; give a writable file path") from None
            raise _damaged(self.path, str(exc)) from None
        if len(cols) != 20 or cols[0] != "key":
            self._con.close()
            raise _damaged(self.path, f"its runs table has the columns {cols}, not those of a bench store")

    def lock(self) -> None:
        """Take the exclusive lock of a bench writing this store (``STORE.lock``), or raise at once.

        The lock is released by :meth:`close` and by the end of the process, however it ends. No-op
        for ``":memory:"`` and where ``fcntl`` is missing (Windows).
        """
        if self.path != ":memory:" and self._lock_fd is None:
            self._lock_fd = _lock_file(self.path)

    def close(self) -> None:
        self._con.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    def __enter__(self) -> BenchStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        try:
            return [tuple(r) for r in self._con.execute(sql, args)]
        except (sqlite3.DatabaseError, ValueError) as exc:  # ValueError: text that is not UTF-8
            raise _damaged(self.path, str(exc)) from None

    def keys(self) -> set[str]:
        return {str(r[0]) for r in self._query("SELECT key FROM runs")}

    def add(self, row: RunRow, replace: bool = False) -> None:
        """Store one finished run in its own transaction (an interruption loses nothing finished).

        A run already stored is kept, unless ``replace`` (a TIMEOUT run again under a larger limit).
        """
        try:
            self._con.execute(
                f"INSERT OR {'REPLACE' if replace else 'IGNORE'} INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*_cells(row), time.time()),
            )
            self._con.commit()
        except sqlite3.DatabaseError as exc:
            raise _damaged(self.path, f"writing run {row.task.key}: {exc}") from None

    def _row(self, r: tuple[Any, ...]) -> RunRow:
        try:
            return _parse(r)
        except Exception as exc:  # any damage of a cell: say which row, never a raw parser error
            key = r[0] if r else "?"
            raise _damaged(self.path, f"run {key} does not read back: {type(exc).__name__}: {exc}") from None

    def get(self, key: str) -> RunRow:
        rs = self._query("SELECT * FROM runs WHERE key = ?", (key,))
        if not rs:
            raise KeyError(key)
        return self._row(rs[0])

    def rows(self) -> Iterator[RunRow]:
        for r in self._query("SELECT * FROM runs ORDER BY suite, instance, solver, seed, key"):
            yield self._row(r)

    def check(self) -> int:
        """Read every stored run back (raise :class:`BenchStoreError` at the first damaged one); the count."""
        count = 0
        for _ in self.rows():
            count += 1
        ok = self._query("PRAGMA quick_check")
        if ok != [("ok",)]:
            raise _damaged(self.path, f"SQLite integrity check: {'; '.join(str(r[0]) for r in ok[:3])}")
        return count

    def created(self) -> dict[str, float]:
        """``key -> creation time`` (the resume test checks that no finished run is written twice)."""
        return {str(k): float(t) for k, t in self._query("SELECT key, created FROM runs")}

    def count(self) -> int:
        return int(self._query("SELECT COUNT(*) FROM runs")[0][0])

    def deterministic_dump(self) -> list[tuple[Any, ...]]:
        """Every row without the wall-clock columns (``seconds``, ``created``), ordered by key."""
        return self._query(
            "SELECT key, task, suite, instance, solver, seed, status, reason, kind, dim, n, m, nfev, nfev_by_kind, "
            "result, verification, history, x FROM runs ORDER BY key"
        )


def _cells(row: RunRow) -> tuple[Any, ...]:
    """The stored cells of a run, without ``created``."""
    return (
        row.task.key, row.task.to_json(), row.task.suite, row.task.instance, row.task.solver, row.task.seed,
        row.status, row.reason, row.kind, row.dim, row.n, row.m, row.nfev,
        json.dumps(dict(row.nfev_by_kind), sort_keys=True), json.dumps(row.result, sort_keys=True),
        None if row.verification is None else json.dumps(row.verification, sort_keys=True),
        _npz(row.history), _npz({"x": row.x}), float(row.seconds),
    )


def _json_object(text: Any, what: str) -> dict[str, Any]:
    d = json.loads(text)
    if not isinstance(d, dict):
        raise ValueError(f"{what} is not a JSON object")
    return d


def _parse(r: tuple[Any, ...]) -> RunRow:
    """A stored row as a :class:`RunRow`, every cell checked (raises on any damage)."""
    if len(r) != 20:
        raise ValueError(f"{len(r)} columns, expected 20")
    task = Task.from_json(r[1])
    if task.key != r[0]:
        raise ValueError("its key is not the hash of its task")
    nfev_by_kind = _json_object(r[13], "nfev_by_kind")
    if not all(isinstance(v, int) for v in nfev_by_kind.values()):
        raise ValueError("nfev_by_kind holds a value that is not an integer")
    verification = None if r[15] is None else _json_object(r[15], "verification")
    history = _unnpz(r[16])
    if set(history) != {"calls", "fun", "violation"} or len({v.shape for v in history.values()}) != 1:
        raise ValueError("the history is not calls, fun, violation of one length")
    x = _unnpz(r[17])["x"]
    for i in (6, 7, 8):
        if not isinstance(r[i], str):
            raise ValueError(f"column {i} is not text")
    for i in (9, 10, 11, 12):
        if not isinstance(r[i], int) or r[i] < 0:
            raise ValueError(f"column {i} is not a count")
    if not isinstance(r[18], (int, float)):
        raise ValueError("seconds is not a number")
    return RunRow(
        task=task, status=r[6], reason=r[7], kind=r[8], dim=r[9], n=r[10], m=r[11], nfev=r[12],
        nfev_by_kind=nfev_by_kind, result=_json_object(r[14], "result"), verification=verification,
        history=history, x=x, seconds=float(r[18]),
    )


@dataclass(frozen=True)
class RepairReport:
    """What :func:`repair` did: runs kept and dropped, and where the damaged file now is (or None)."""

    path: str
    kept: int
    dropped: int | None
    moved_to: str | None


def repair(path: str | os.PathLike[str]) -> RepairReport:
    """Keep the sound runs of a damaged bench store; a sound store is left as it is.

    The damaged file is renamed ``NAME.damaged-TIME`` (never deleted) and every run that reads back
    is copied into a new store at ``path``; the dropped runs are run again by the next bench.
    ``dropped`` is ``None`` when no run could be read at all. Raises :class:`BenchStoreError` if
    another bench holds the store's lock, or the file cannot be moved or written.
    """
    p = str(path)
    if Path(p).is_dir():
        raise BenchStoreError(f"bench store {p} is a directory, not a store to repair")
    if not Path(p).exists():
        return RepairReport(p, 0, 0, None)
    fd = _lock_file(p)
    try:
        return _repair(p)
    except OSError as exc:
        raise BenchStoreError(f"cannot repair bench store {p}: {exc.strerror or exc}") from None
    finally:
        if fd is not None:
            os.close(fd)


def _repair(p: str) -> RepairReport:
    try:
        with BenchStore(p) as db:
            return RepairReport(p, db.check(), 0, None)
    except DamagedStoreError:
        pass  # keep what is sound, below; any other error (not writable, ...) is raised as it is
    stamp = time.strftime("%Y%m%d-%H%M%S")
    moved, k = f"{p}.damaged-{stamp}", 0
    while Path(moved).exists():
        k += 1
        moved = f"{p}.damaged-{stamp}-{k}"
    os.replace(p, moved)
    for suffix in ("-journal", "-wal", "-shm"):  # SQLite's side files belong to the damaged file
        if Path(p + suffix).exists():
            os.replace(p + suffix, moved + suffix)
    sound: list[tuple[Any, ...]] = []
    dropped: int | None = 0
    try:
        con = sqlite3.connect(f"file:{moved}?mode=ro", uri=True)
        try:
            keys = [r[0] for r in con.execute("SELECT key FROM runs")]
        except (sqlite3.DatabaseError, ValueError):
            keys, dropped = [], None  # nothing readable
        for key in keys:
            try:
                r = tuple(con.execute("SELECT * FROM runs WHERE key = ?", (key,)).fetchone())
                _parse(r)
                sound.append(r)
            except Exception:  # a damaged row: dropped, run again by the next bench
                dropped = (dropped or 0) + 1
        con.close()
    except (sqlite3.Error, ValueError):
        dropped = None
    with BenchStore(p) as db:
        db._con.executemany(
            "INSERT OR IGNORE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", sound
        )
        db._con.commit()
    return RepairReport(p, len(sound), dropped, moved)
