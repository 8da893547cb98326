"""Checkpoints: a solver state as ``PATH.npz`` (arrays) + ``PATH.json`` (everything else).

No pickle, and no code chosen by the file: arrays go to the ``.npz`` (loaded with
``allow_pickle=False``), scalars, the random generator's state, counters and the trace go to JSON.
The state class is recorded by its ``module:qualname`` but never imported from that name: on load it
is looked up only among the classes of the modules of registered solvers (the registry imports a
solver's module through its plugin, never through the file), of the ``solver`` the caller resumes, or
in an explicit ``state_classes`` allow-list. A checkpoint naming anything else is refused.

One save is one unit. Both files are written to temporaries (``PATH.npz.new``, ``PATH.json.new``)
and flushed to disk; the JSON records the SHA-256 of the ``.npz`` it belongs to; then the ``.npz`` and
the ``.json`` are renamed into place. The JSON is the commit record: a crash before the first rename
leaves the old pair, a crash between the two renames leaves the new ``.npz`` with the new JSON still
in ``PATH.json.new``: :func:`load` then reads the new pair (the pending JSON's hash matches the
``.npz``) and the next :func:`save` completes the commit (roll forward) before writing. :func:`load`
verifies the hash, so it never returns a mix of two saves. Stale temporaries (of this and of earlier
versions) are removed by the next save.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
import dataclasses
import hashlib
import io
import json
import os
from pathlib import Path
import sys
from typing import Any

import numpy as np

from zoframe.errors import CheckpointError

FORMAT_VERSION = 2
#: formats :func:`load` reads (1: no content hash, written by zoframe before atomic pairs)
READABLE_FORMATS = (1, 2)
_PENDING = ".new"
#: temporaries of earlier versions (``PATH.npz.tmp.npz``, ``PATH.json.tmp``)
_LEGACY_TMP = (".tmp.npz", ".tmp")


def _paths(path: str | os.PathLike[str]) -> tuple[Path, Path]:
    base = str(path)
    for suffix in (".json", ".npz"):
        base = base.removesuffix(suffix)
    return Path(base + ".npz"), Path(base + ".json")


def _pending(p: Path) -> Path:
    return p.with_name(p.name + _PENDING)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory handles
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _read_doc(js: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(js.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _recover(npz: Path, js: Path) -> None:
    """Before a save: complete a save interrupted between its two renames, remove stale temporaries."""
    pending_js, pending_npz = _pending(js), _pending(npz)
    try:
        if pending_js.exists() and npz.exists():
            doc = _read_doc(pending_js)
            if doc is not None and doc.get("npz_sha256") == _sha256(npz):
                os.replace(pending_js, js)  # roll forward: the new .npz is in place, commit its JSON
                _fsync_dir(js.parent)
        for stale in (pending_js, pending_npz, *(p.with_name(p.name + t) for p in (npz, js) for t in _LEGACY_TMP)):
            stale.unlink(missing_ok=True)
    except OSError as exc:
        raise CheckpointError(f"cannot tidy the checkpoint files at {npz.with_suffix('')}: {exc}") from exc


def _encode_state(state: Any, prefix: str = "state") -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Arrays under ``prefix.field`` and plain scalars; a field that is itself a dataclass state (the running
    phase's state of a phased solver) is encoded the same way under ``prefix.field`` with its class named
    as ``{"__state__": "module:QualName", "scalars": {...}}`` (resolved on load as the top state is)."""
    if not dataclasses.is_dataclass(state) or isinstance(state, type):
        raise CheckpointError(f"a solver state must be a dataclass instance to be checkpointed, got {type(state).__name__}")
    arrays: dict[str, np.ndarray] = {}
    scalars: dict[str, Any] = {}
    for f in dataclasses.fields(state):
        v = getattr(state, f.name)
        key = f"{prefix}.{f.name}"
        if isinstance(v, np.ndarray):
            arrays[key] = v
        elif isinstance(v, (tuple, list)) and all(isinstance(e, np.ndarray) for e in v):
            scalars[f.name] = {"__tuple_of_arrays__": len(v)}
            for i, e in enumerate(v):
                arrays[f"{key}.{i}"] = e
        elif isinstance(v, np.generic):
            scalars[f.name] = {"__numpy_scalar__": v.item()}
        elif v is None or isinstance(v, (bool, int, float, str)):
            scalars[f.name] = v
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            sub_arrays, sub_scalars = _encode_state(v, key)
            arrays.update(sub_arrays)
            cls = type(v)
            scalars[f.name] = {"__state__": f"{cls.__module__}:{cls.__qualname__}", "scalars": sub_scalars}
        else:
            raise CheckpointError(
                f"state field {f.name!r} of type {type(v).__name__} cannot be checkpointed; "
                "state fields must be arrays, tuples of arrays, plain scalars or dataclass states"
            )
    return arrays, scalars


def save(
    path: str | os.PathLike[str],
    state: Any,
    rng: np.random.Generator,
    meta: dict[str, Any],
    extra_arrays: dict[str, np.ndarray] | None = None,
) -> None:
    """Write a checkpoint pair atomically as one unit (see the module docstring)."""
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
    write_pair(path, arrays, doc)


def write_pair(path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray], doc: Mapping[str, Any]) -> None:
    """Write ``PATH.npz`` (``arrays``) and ``PATH.json`` (``doc`` plus the ``.npz``'s SHA-256) as one unit.

    Both go to synced temporaries first; the ``.npz`` is renamed into place, then the JSON, which
    names the hash of its ``.npz``. A crash leaves the old pair or the new one (the next write, or
    :func:`settle_pair`, rolls an interrupted commit forward), never a mix. Used by checkpoints and
    :meth:`zoframe.result.Result.save`.
    """
    npz, js = _paths(path)
    npz.parent.mkdir(parents=True, exist_ok=True)
    _recover(npz, js)
    tmp_npz, tmp_js = _pending(npz), _pending(js)
    with open(tmp_npz, "wb") as fh:
        np.savez(fh, **arrays)  # type: ignore[arg-type]
        fh.flush()
        os.fsync(fh.fileno())
    full = {**doc, "npz_sha256": _sha256(tmp_npz)}
    with open(tmp_js, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(full, indent=2))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp_npz, npz)  # from here on the pending JSON is the commit record
    os.replace(tmp_js, js)
    _fsync_dir(js.parent)


def settle_pair(path: str | os.PathLike[str]) -> None:
    """Complete a :func:`write_pair` interrupted between its renames, and remove stale temporaries."""
    npz, js = _paths(path)
    if npz.parent.exists():
        _recover(npz, js)


def pair_is_consistent(path: str | os.PathLike[str]) -> bool:
    """Whether ``PATH.json`` names the hash of ``PATH.npz`` (true too for pairs written without a hash)."""
    npz, js = _paths(path)
    doc = _read_doc(js)
    if doc is None or "npz_sha256" not in doc:
        return True
    return bool(doc["npz_sha256"] == _sha256(npz))


def _allowed_modules(solver: object | None, registry: Any) -> dict[str, Any]:
    """``module name -> how to get the module`` for every module a state class may come from."""
    out: dict[str, Any] = {}
    if solver is not None:
        for klass in type(solver).__mro__:
            if klass is not object:
                out.setdefault(klass.__module__, klass)
    from zoframe.registry import collected_registries, default_registry
    from zoframe.specs import reference

    registries = [registry] if registry is not None else [default_registry(), *collected_registries()]
    for reg in registries:
        for provided in reg.solvers().values():
            spec = provided.spec
            module = reference(spec, "cls").partition(":")[0]
            out.setdefault(module, spec)
    return out


def _namespace(klass: type[Any]) -> dict[str, Any]:
    """The global namespace a class was defined in (its module's, or a script's or notebook's)."""
    mod = sys.modules.get(klass.__module__)
    if mod is not None and getattr(mod, klass.__name__, None) is klass:
        return vars(mod)
    for attr in vars(klass).values():  # a class defined in exec'd code: its methods know their globals
        fn = getattr(attr, "__func__", attr)
        glb = getattr(fn, "__globals__", None)
        if isinstance(glb, dict) and glb.get("__name__") == klass.__module__:
            return glb
    return vars(mod) if mod is not None else {}


def _namespace_of(source: Any) -> dict[str, Any]:
    """``source`` is a solver class, a registered spec whose class is loaded through its plugin, or an
    imported module (:func:`_sibling`)."""
    if isinstance(source, type(sys)):
        return vars(source)
    klass = source if isinstance(source, type) else source.cls
    return _namespace(klass)


def _sibling(mod_name: str, modules: Mapping[str, Any]) -> bool:
    """Whether ``mod_name`` is an already imported module of zoframe's core or of the package of an allowed
    module (the phases of a phased solver keep their states in their own modules): never imported here."""
    if mod_name not in sys.modules:
        return False
    top = mod_name.partition(".")[0]
    return top == "zoframe" or any(m.partition(".")[0] == top for m in modules)


def resolve_state_class(
    ref: object,
    *,
    state_classes: Iterable[type[Any]] | None = None,
    solver: object | None = None,
    registry: Any = None,
    where: str = "the checkpoint",
) -> type[Any]:
    """The dataclass a checkpoint's ``state_class`` names, found only among allowed classes.

    ``state_classes``: the allowed classes (nothing else is considered). Otherwise the classes of the
    modules of ``solver``'s class hierarchy and of every registered solver (``registry``, or the
    default registry and every registry that has listed its solvers) are allowed. No module named by
    ``ref`` is ever imported.
    """
    if not isinstance(ref, str) or ref.count(":") != 1:
        raise CheckpointError(f"{where} names its state class as {ref!r}, not 'module:QualName'")
    mod_name, _, qual = ref.partition(":")
    if state_classes is not None:
        allowed = {f"{c.__module__}:{c.__qualname__}": c for c in state_classes}
        if ref not in allowed:
            raise CheckpointError(
                f"{where} holds a state of class {ref}, which is not among the allowed state classes "
                f"({', '.join(sorted(allowed)) or 'none'})"
            )
        obj: Any = allowed[ref]
    else:
        modules = _allowed_modules(solver, registry)
        if mod_name not in modules and _sibling(mod_name, modules):
            modules[mod_name] = sys.modules[mod_name]  # a phase's state, beside its solver's package
        if mod_name not in modules:
            raise CheckpointError(
                f"{where} names the state class {ref}, whose module is not the module of a registered solver "
                f"({', '.join(sorted(modules)) or 'none registered'}); a checkpoint never chooses code to "
                "import. Install the plugin of the solver that wrote it, or pass state_classes=[...] "
                "(or the solver) when loading a state of an unregistered solver."
            )
        namespace = _namespace_of(modules[mod_name])
        parts = qual.split(".")
        obj = None
        if all(p.isidentifier() and not p.startswith("__") for p in parts):
            obj = namespace.get(parts[0])
            for part in parts[1:]:
                obj = getattr(obj, part, None)
        if obj is None or getattr(obj, "__module__", None) != mod_name or getattr(obj, "__qualname__", None) != qual:
            raise CheckpointError(f"{where} names the state class {ref}, which module {mod_name} does not define")
    if not (isinstance(obj, type) and dataclasses.is_dataclass(obj)):
        raise CheckpointError(f"{where} names {ref} as its state class, which is not a dataclass")
    return obj


def _decode_state(
    cls: type[Any], scalars: Mapping[str, Any], arrays: dict[str, np.ndarray], prefix: str,
    resolve: Any,
) -> Any:  # fmt: skip
    """The inverse of :func:`_encode_state` (nested states' classes resolved by ``resolve``)."""
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        key = f"{prefix}.{f.name}"
        if key in arrays:
            kwargs[f.name] = arrays.pop(key)
        elif f.name in scalars:
            v = scalars[f.name]
            if isinstance(v, dict) and "__tuple_of_arrays__" in v:
                kwargs[f.name] = tuple(arrays.pop(f"{key}.{i}") for i in range(int(v["__tuple_of_arrays__"])))
            elif isinstance(v, dict) and "__numpy_scalar__" in v:
                kwargs[f.name] = v["__numpy_scalar__"]
            elif isinstance(v, dict) and "__state__" in v:
                sub = v.get("scalars", {})
                if not isinstance(sub, dict):
                    raise CheckpointError(f"state field {key} holds no scalars; the file is damaged")
                kwargs[f.name] = _decode_state(resolve(v["__state__"]), sub, arrays, key, resolve)
            else:
                kwargs[f.name] = v
    return cls(**kwargs)


def load(
    path: str | os.PathLike[str],
    *,
    state_classes: Iterable[type[Any]] | None = None,
    solver: object | None = None,
    registry: Any = None,
) -> tuple[Any, np.random.Generator, dict[str, Any], dict[str, np.ndarray]]:
    """Read a checkpoint: ``(state, rng, meta, other_arrays)``.

    The state class is resolved by :func:`resolve_state_class` (``state_classes``, ``solver`` and
    ``registry`` are passed on). After a save interrupted between its two renames, the new pair is
    read (the pending JSON matches the new ``.npz``); a pair whose ``.npz`` does not match the hash
    its JSON records is refused. Loading writes nothing (a run may be saving the same checkpoint).
    """
    npz, js = _paths(path)
    if not npz.exists() or not (js.exists() or _pending(js).exists()):
        raise CheckpointError(f"no checkpoint at {path!s}: expected {npz} and {js}")
    try:
        return _load(npz, js, state_classes=state_classes, solver=solver, registry=registry)
    except CheckpointError:
        raise
    except Exception as exc:  # any damage of either file: say which, never a raw zip/JSON/numpy error
        raise CheckpointError(
            f"checkpoint {npz} / {js} is damaged ({type(exc).__name__}: {exc}); restore both files from one save "
            "or restart the run"
        ) from None


def check_format(doc: Mapping[str, Any], where: str, key: str = "format", current: int = FORMAT_VERSION,
                 readable: Iterable[int] = READABLE_FORMATS) -> None:
    """Refuse a format this version cannot read; a newer one says to upgrade zoframe."""
    fmt = doc.get(key, 1)
    readable = tuple(readable)
    if isinstance(fmt, int) and not isinstance(fmt, bool) and fmt > current:
        raise CheckpointError(
            f"{where} has format {fmt}, written by a newer zoframe (this one reads formats {readable}): "
            "upgrade zoframe to read it"
        )
    if fmt not in readable or isinstance(fmt, bool):
        raise CheckpointError(f"{where} has format {fmt!r}, expected one of {readable}; the file is damaged")


def _load(
    npz: Path, js: Path, *, state_classes: Iterable[type[Any]] | None, solver: object | None, registry: Any
) -> tuple[Any, np.random.Generator, dict[str, Any], dict[str, np.ndarray]]:
    blob = npz.read_bytes()  # hashed and parsed from the same bytes, even if a save replaces the file now
    digest = hashlib.sha256(blob).hexdigest()
    doc = _read_doc(js) if js.exists() else None
    if doc is None or doc.get("npz_sha256") != digest:
        pending = _read_doc(_pending(js))  # a save stopped between its renames: its JSON is pending
        if pending is not None and pending.get("npz_sha256") == digest:
            doc = pending
    if doc is None:
        raise CheckpointError(f"checkpoint {js} is missing or not a JSON object; the file is damaged")
    check_format(doc, f"checkpoint {js}")
    if doc.get("format", 1) >= 2 and doc.get("npz_sha256") != digest:
        raise CheckpointError(
            f"checkpoint {npz} does not match {js} (its SHA-256 differs from the one the JSON records): the pair "
            "comes from two different saves; restart the run or restore both files from one save"
        )
    cls = resolve_state_class(
        doc.get("state_class"), state_classes=state_classes, solver=solver, registry=registry, where=f"checkpoint {js}"
    )
    with np.load(io.BytesIO(blob), allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    scalars = doc.get("state_scalars", {})
    if not isinstance(scalars, dict):
        raise CheckpointError(f"checkpoint {js}: state_scalars is not a JSON object; the file is damaged")

    def resolve(ref: object) -> type[Any]:
        return resolve_state_class(ref, state_classes=state_classes, solver=solver, registry=registry,
                                   where=f"checkpoint {js}")  # fmt: skip

    state = _decode_state(cls, scalars, arrays, "state", resolve)
    rng_doc = doc.get("rng")
    if not isinstance(rng_doc, dict):
        raise CheckpointError(f"checkpoint {js} holds no generator state; the file is damaged")
    bg_name = rng_doc.get("bit_generator")
    bg_cls = getattr(np.random, str(bg_name), None)
    if not (isinstance(bg_cls, type) and issubclass(bg_cls, np.random.BitGenerator)):
        raise CheckpointError(f"unknown bit generator {bg_name!r} in checkpoint {js}")
    bg = bg_cls()
    bg.state = rng_doc["state"]
    return state, np.random.Generator(bg), doc, arrays
