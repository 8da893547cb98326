"""Checkpoints: a solver state as ``PATH.npz`` (arrays) + ``PATH.json`` (everything else).

No pickle: arrays go to the ``.npz`` (loaded with ``allow_pickle=False``), scalars, the random
generator's state, counters and the trace go to JSON, and the state class is recorded by its
import path and re-imported on resume (it must be a dataclass).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from zoframe.errors import CheckpointError

FORMAT_VERSION = 1


def _paths(path: str | os.PathLike[str]) -> tuple[Path, Path]:
    base = str(path)
    for suffix in (".json", ".npz"):
        base = base.removesuffix(suffix)
    return Path(base + ".npz"), Path(base + ".json")


def _encode_state(state: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    if not dataclasses.is_dataclass(state) or isinstance(state, type):
        raise CheckpointError(f"a solver state must be a dataclass instance to be checkpointed, got {type(state).__name__}")
    arrays: dict[str, np.ndarray] = {}
    scalars: dict[str, Any] = {}
    for f in dataclasses.fields(state):
        v = getattr(state, f.name)
        if isinstance(v, np.ndarray):
            arrays[f"state.{f.name}"] = v
        elif isinstance(v, (tuple, list)) and all(isinstance(e, np.ndarray) for e in v):
            scalars[f.name] = {"__tuple_of_arrays__": len(v)}
            for i, e in enumerate(v):
                arrays[f"state.{f.name}.{i}"] = e
        elif isinstance(v, np.generic):
            scalars[f.name] = {"__numpy_scalar__": v.item()}
        elif v is None or isinstance(v, (bool, int, float, str)):
            scalars[f.name] = v
        else:
            raise CheckpointError(
                f"state field {f.name!r} of type {type(v).__name__} cannot be checkpointed; "
                "state fields must be arrays, tuples of arrays or plain scalars"
            )
    return arrays, scalars


def save(
    path: str | os.PathLike[str],
    state: Any,
    rng: np.random.Generator,
    meta: dict[str, Any],
    extra_arrays: dict[str, np.ndarray] | None = None,
) -> None:
    """Write a checkpoint atomically (temporary files, then rename)."""
    npz, js = _paths(path)
    npz.parent.mkdir(parents=True, exist_ok=True)
    arrays, scalars = _encode_state(state)
    arrays.update(extra_arrays or {})
    cls = type(state)
    doc = {
        "format": FORMAT_VERSION,
        "state_class": f"{cls.__module__}:{cls.__qualname__}",
        "state_scalars": scalars,
        "rng": {"bit_generator": type(rng.bit_generator).__name__, "state": rng.bit_generator.state},
        **meta,
    }
    tmp_npz = npz.with_name(npz.name + ".tmp.npz")
    tmp_js = js.with_name(js.name + ".tmp")
    with open(tmp_npz, "wb") as fh:
        np.savez(fh, **arrays)  # type: ignore[arg-type]
    tmp_js.write_text(json.dumps(doc), encoding="utf-8")
    os.replace(tmp_npz, npz)
    os.replace(tmp_js, js)


def load(path: str | os.PathLike[str]) -> tuple[Any, np.random.Generator, dict[str, Any], dict[str, np.ndarray]]:
    """Read a checkpoint: ``(state, rng, meta, other_arrays)``."""
    npz, js = _paths(path)
    if not npz.exists() or not js.exists():
        raise CheckpointError(f"no checkpoint at {path!s}: expected {npz} and {js}")
    doc = json.loads(js.read_text(encoding="utf-8"))
    if doc.get("format") != FORMAT_VERSION:
        raise CheckpointError(f"checkpoint {js} has format {doc.get('format')}, expected {FORMAT_VERSION}")
    with np.load(npz, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    mod_name, _, qual = str(doc["state_class"]).partition(":")
    try:
        obj: Any = importlib.import_module(mod_name)
        for part in qual.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise CheckpointError(f"cannot import the state class {doc['state_class']} of checkpoint {js}") from exc
    if not (isinstance(obj, type) and dataclasses.is_dataclass(obj)):
        raise CheckpointError(f"{doc['state_class']} is not a dataclass")
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        key = f"state.{f.name}"
        if key in arrays:
            kwargs[f.name] = arrays.pop(key)
        elif f.name in doc["state_scalars"]:
            v = doc["state_scalars"][f.name]
            if isinstance(v, dict) and "__tuple_of_arrays__" in v:
                kwargs[f.name] = tuple(arrays.pop(f"{key}.{i}") for i in range(int(v["__tuple_of_arrays__"])))
            elif isinstance(v, dict) and "__numpy_scalar__" in v:
                kwargs[f.name] = v["__numpy_scalar__"]
            else:
                kwargs[f.name] = v
    state = obj(**kwargs)
    bg_name = doc["rng"]["bit_generator"]
    bg_cls = getattr(np.random, bg_name, None)
    if bg_cls is None:
        raise CheckpointError(f"unknown bit generator {bg_name!r} in checkpoint {js}")
    bg = bg_cls()
    bg.state = doc["rng"]["state"]
    return state, np.random.Generator(bg), doc, arrays
