"""The checkpoint observer: writes the run every ``every`` iterations and at the end; restores it.

A checkpoint holds the solver's state, the generator's state, the counters, the iteration count,
the solver's time and the state of every observer that keeps one (the trace, the best point),
plus what must not change on resume: the solver's name, its parameters and the seed
(:func:`check_resume` refuses a resume that differs, naming what differs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
import dataclasses
import os
from typing import Any, Protocol

import numpy as np

from zoframe import checkpoint as ckpt
from zoframe.errors import CheckpointError, InvalidInputError
from zoframe.protocols import Array
from zoframe.run import RunLoop, Stop


class Stateful(Protocol):
    """An observer whose state goes into checkpoints."""

    def snapshot(self) -> tuple[dict[str, Any], dict[str, Array]]: ...

    def restore(self, meta: Mapping[str, Any], arrays: Mapping[str, Array]) -> None: ...


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return repr(value)


def solver_params(solver: Any) -> dict[str, Any]:
    """A solver's parameters as plain JSON data (non-plain values by their ``repr``)."""
    if not dataclasses.is_dataclass(solver) or isinstance(solver, type):
        return {}
    return {f.name: _plain(getattr(solver, f.name)) for f in dataclasses.fields(solver) if f.init}


def check_resume(path: str | os.PathLike[str], meta: Mapping[str, Any], solver_name: str, params: Mapping[str, Any],
                 seed: int | None) -> None:
    """Refuse to resume a checkpoint under another solver, other parameters or another seed."""
    if meta.get("solver") != solver_name:
        raise InvalidInputError(f"checkpoint {path} was written by solver {meta.get('solver')!r}, not {solver_name!r}")
    stored = meta.get("solver_params")
    if stored is not None and not isinstance(stored, Mapping):
        raise CheckpointError(
            f"checkpoint {path} is damaged: its solver_params is a {type(stored).__name__}, not a JSON object; "
            "restore it from one save or restart the run"
        )
    if stored is not None:
        keys = sorted(set(stored) | set(params))
        diff = [f"{k}: {stored.get(k, '<unset>')!r} in the checkpoint, {params.get(k, '<unset>')!r} now"
                for k in keys if stored.get(k) != params.get(k)]
        if diff:
            raise InvalidInputError(
                f"checkpoint {path} was written with other parameters of {solver_name!r} ({'; '.join(diff)}); "
                "resume with the checkpoint's parameters, or start a new run"
            )
    if seed is not None and meta.get("seed") != seed:
        raise InvalidInputError(
            f"checkpoint {path} was written with seed {meta.get('seed')!r}, not {seed!r}; resume with "
            "rng=None (the checkpoint's generator continues) or start a new run"
        )


class Checkpointer:
    """Saves the run to ``path`` every ``every`` iterations (``None``: only at the end)."""

    def __init__(self, path: str | os.PathLike[str], every: int | None, parts: Sequence[Stateful],
                 meta: Mapping[str, Any]) -> None:
        self.path = path
        self.every = every
        self.per_step = bool(every)
        self.parts = tuple(parts)
        self.meta = dict(meta)

    def start(self, loop: RunLoop) -> Stop | None:
        return None

    def iteration(self, loop: RunLoop) -> Stop | None:
        if self.every and loop.nit % self.every == 0:
            self.save(loop)
        return None

    def end(self, loop: RunLoop) -> None:
        if loop.state is not None:
            self.save(loop)

    def save(self, loop: RunLoop) -> None:
        meta: dict[str, Any] = {
            **self.meta,
            "solver": loop.solver_name,
            "seed": loop.seed,
            "nit": loop.nit,
            "seconds": loop.seconds,
            "counters": loop.oracle.snapshot(),
        }
        arrays: dict[str, Array] = {}
        for part in self.parts:
            m, a = part.snapshot()
            meta.update(m)
            arrays.update(a)
        ckpt.save(self.path, loop.state, loop.rng, meta, arrays)


def restore(path: str | os.PathLike[str], parts: Sequence[Stateful], *, solver: object | None = None,
            registry: Any = None, dim: int | None = None) -> tuple[Any, np.random.Generator, dict[str, Any]]:
    """Read a checkpoint and restore ``parts``: ``(state, generator, meta)``.

    ``solver`` (the solver object resuming) and ``registry`` say which state classes may be rebuilt
    (:func:`zoframe.checkpoint.resolve_state_class`): the classes of the solver's own modules and of the
    registered solvers, so an unregistered solver object resumes its own checkpoints. ``dim``: the
    problem's dimension, which the state's ``x`` and the best point must have. A checkpoint whose
    content does not read back as a run raises :class:`~zoframe.errors.CheckpointError` naming it.
    """
    state, gen, meta, arrays = ckpt.load(path, solver=solver, registry=registry)
    try:
        for part in parts:
            part.restore(meta, arrays)
        _check_progress(meta)
        _check_arrays(state, arrays, meta, dim)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise CheckpointError(
            f"checkpoint {path} is damaged: its run state does not read back ({type(exc).__name__}: {exc}); "
            "restore it from one save or restart the run"
        ) from None
    return state, gen, meta


def _check_progress(meta: Mapping[str, Any]) -> None:
    """The counters, iterations and seconds the driver reads on resume, checked (raises on damage)."""
    counters = meta["counters"]
    for key in ("calls_by_kind", "calls_by_purpose"):
        if not all(isinstance(v, int) and v >= 0 for v in counters[key].values()):
            raise ValueError(f"counters.{key} holds a value that is not a count")
    if not isinstance(counters["calls"], int) or counters["calls"] < 0:
        raise ValueError("counters.calls is not a count")
    if not isinstance(meta["nit"], int) or meta["nit"] < 0:
        raise ValueError(f"nit is {meta['nit']!r}, not a count")
    seconds = meta["seconds"]
    if not isinstance(seconds, (int, float)) or not np.isfinite(seconds) or seconds < 0:
        raise ValueError(f"seconds is {seconds!r}")



def _check_arrays(state: Any, arrays: Mapping[str, Array], meta: Mapping[str, Any], dim: int | None) -> None:
    """The iterate, the best point and the trace columns have the shapes of one run (raises on damage)."""
    x = getattr(state, "x", None)
    if x is not None and dim is not None:
        xa = np.asarray(x)
        if xa.shape != (dim,) or not np.issubdtype(xa.dtype, np.floating) or not np.isfinite(xa).all():
            raise ValueError(f"the state's x ({xa.dtype} of shape {xa.shape}) is not a finite point of dimension {dim}")
    best = arrays.get("best.x")
    if best is not None and dim is not None and (np.shape(best) != (dim,) or not np.isfinite(best).all()):
        raise ValueError(f"the best point (shape {np.shape(best)}) is not a finite point of dimension {dim}")
    lengths = {np.shape(arrays[f"trace.{k}"]) for k in meta.get("trace_columns", ()) if f"trace.{k}" in arrays}
    if len(lengths) > 1 or any(len(s) != 1 for s in lengths):
        raise ValueError(f"the trace columns have shapes {sorted(lengths)}")
