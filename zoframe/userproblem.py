"""A user's own problem wherever a problem name is taken: objects, factories and ``"module:attr"``.

Every place that takes a registered problem name (``rate_study``, ``verify``, the bench, the
``zoframe solve / verify / rate / bench`` commands) also takes a problem of the user's own:

- a **problem object** (anything with ``kind`` and ``x0``, e.g. :class:`zoframe.FiniteSum`,
  :class:`zoframe.Constrained`, or a class of one's own);
- a **factory**: a callable that returns one, called with the problem arguments
  (``problem_args`` / ``--problem-arg KEY=VALUE``);
- a **reference** ``"package.module:attr"`` or ``"path/to/file.py:attr"`` naming either of the
  above (``attr`` may be dotted). This is what the command line takes.

A registered name always wins: ``"plugin:name"`` (a qualified registered name) is looked up in the
registry first and read as a reference only when no component has that name.

:func:`problem_source` turns any of these into a :class:`ProblemSource`: a label (the registered
name, the reference, or the object's type with a content fingerprint) and a ``build(**kwargs)``
callable. The label is what a study or a bench stores, so a re-run of the same problem resumes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
import contextlib
from dataclasses import dataclass
import hashlib
import importlib
import importlib.util
import inspect
import os
from pathlib import Path
import pickle
import sys
from typing import Any

from zoframe.errors import InvalidInputError, UnknownNameError, ZoframeError

__all__ = [
    "ProblemSource",
    "code_fingerprint",
    "fingerprint",
    "is_problem",
    "load_reference",
    "looks_like_reference",
    "portable_reference",
    "problem_source",
]

def is_problem(obj: object) -> bool:
    """True for a problem object (it has ``kind`` and ``x0``), False for a class or anything else."""
    return not inspect.isclass(obj) and isinstance(getattr(obj, "kind", None), str) and hasattr(obj, "x0")


def looks_like_reference(text: str) -> bool:
    """True when ``text`` has the form ``module:attr`` or ``file.py:attr`` (not checked further)."""
    head, sep, attr = text.rpartition(":")
    return bool(sep and head and attr) and all(part.isidentifier() for part in attr.split("."))


def _import_file(path: Path) -> Any:
    """Import the Python file ``path`` as a module (cached per resolved path)."""
    resolved = path.resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:12]
    name = f"zoframe_user_{resolved.stem if resolved.stem.isidentifier() else 'file'}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise ImportError(f"{resolved} is not an importable Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _import_module(name: str, directory: str | None = None) -> Any:
    """``importlib.import_module``; a module in the working directory is found too (as ``python -m`` would),
    and one in ``directory`` (where a saved run found it)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        top = name.partition(".")[0]
        if exc.name != top:
            raise
        for where in (os.getcwd(), directory):
            if where is None or where in sys.path or (where == os.getcwd() and "" in sys.path):
                continue
            if Path(where, f"{top}.py").is_file() or Path(where, top, "__init__.py").is_file():
                sys.path.append(where)
                return importlib.import_module(name)
        raise


def _is_file_reference(head: str) -> bool:
    return head.endswith(".py") or os.sep in head or "/" in head


def portable_reference(text: str, registry: Any = None) -> tuple[str, str | None]:
    """``(reference, directory)`` that find the problem ``text`` again from any working directory.

    A registered name is kept; ``"path/to/file.py:attr"`` becomes the file's absolute path; a module
    reference ``"pkg.mod:attr"`` is kept, with the directory it was imported from when that is the
    working directory (else ``None``): a saved run records both (``zoframe solve -o``) and
    ``zoframe verify`` passes the directory back to :func:`load_reference`.
    """
    from zoframe.registry import default_registry

    reg = registry if registry is not None else default_registry()
    try:
        reg.problem(text)
    except UnknownNameError:
        pass
    else:
        return text, None
    head, sep, attr = text.rpartition(":")
    if not (sep and head and looks_like_reference(text)):
        return text, None
    if _is_file_reference(head):
        return f"{os.path.abspath(os.path.expanduser(head))}:{attr}", None
    top = sys.modules.get(head.partition(".")[0])
    origin = getattr(top, "__file__", None)
    if not origin:
        return text, None
    path = Path(origin).resolve()
    root = path.parent.parent if path.name == "__init__.py" else path.parent
    cwd = Path(os.getcwd()).resolve()
    return text, (str(cwd) if root == cwd else None)


def load_reference(text: str, *, directory: str | None = None) -> Any:
    """The object named by ``"package.module:attr"`` or ``"path/to/file.py:attr"``.

    ``directory``: where to look for the module of a module reference besides ``sys.path`` and the
    working directory (a saved run's ``problem_dir``, see :func:`portable_reference`).

    Raises :class:`~zoframe.errors.InvalidInputError` saying what could not be imported and why
    (the module's own exception is kept as the cause).
    """
    head, sep, attr = text.rpartition(":")
    if not (sep and head and attr) or not all(p.isidentifier() for p in attr.split(".")):
        raise InvalidInputError(
            f"{text!r} is not a problem reference: expected 'package.module:attr' or 'path/to/file.py:attr' "
            "(attr: a factory or a problem object in that module)"
        )
    is_file = _is_file_reference(head)
    try:
        if is_file:
            path = Path(head).expanduser()
            if not path.is_file():
                raise InvalidInputError(
                    f"cannot load the problem {text!r}: no file {str(path)!r} (relative to {os.getcwd()!r})"
                )
            obj: Any = _import_file(path)
        else:
            obj = _import_module(head, directory)
    except ZoframeError:
        raise
    except Exception as exc:
        where = "file" if is_file else "module"
        hint = "" if is_file else " (is it on PYTHONPATH, or installed? a file path 'dir/file.py:attr' works too)"
        raise InvalidInputError(
            f"cannot load the problem {text!r}: importing the {where} {head!r} failed with "
            f"{type(exc).__name__}: {exc}{hint}"
        ) from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            names = sorted(n for n in dir(obj) if not n.startswith("_"))
            raise InvalidInputError(
                f"cannot load the problem {text!r}: {head!r} has no attribute {part!r} (it has {names[:20]})"
            ) from None
    return obj


def _function_code(fn: Any) -> bytes:
    """The source of a user function (else its byte code) and the simple values its closure holds."""
    import numpy as np

    try:
        text = inspect.getsource(fn).encode()
    except (OSError, TypeError):
        code = getattr(fn, "__code__", None)
        text = b"" if code is None else code.co_code + repr(code.co_consts).encode()
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(value, (int, float, complex, str, bytes, bool)) or value is None:
            text += repr(value).encode()
        elif isinstance(value, np.ndarray):
            text += hashlib.sha256(np.ascontiguousarray(value).tobytes()).digest()
    return text


def code_fingerprint(obj: object) -> bytes:
    """What the user's code of a problem or factory looks like now: the source of the factory or of
    the functions a problem object holds (and of its class, unless the class is zoframe's own)."""
    if inspect.isfunction(obj) or inspect.ismethod(obj):
        return _function_code(obj)
    parts: list[bytes] = []
    cls = obj if inspect.isclass(obj) else type(obj)
    if not str(getattr(cls, "__module__", "")).startswith(("zoframe", "builtins")):
        with contextlib.suppress(OSError, TypeError):
            parts.append(inspect.getsource(cls).encode())
    if not inspect.isclass(obj):
        for value in getattr(obj, "__dict__", {}).values():
            if inspect.isfunction(value):
                parts.append(_function_code(value))
    return b"\0".join(parts)


def fingerprint(obj: object) -> str:
    """A short hash of a problem object or factory: of its pickle (else of its type, kind, shape and
    start point) and of its code (:func:`code_fingerprint`).

    Equal problems built the same way get the same fingerprint in every session, so a study or a
    bench of them resumes, and an edit to the problem's code or data gives a new one (so a study
    never reuses runs of the problem as it was). Two objects that cannot be pickled and share type,
    name, shape, ``x0`` and the source of their functions are told apart only by their ``name``.
    """
    if isinstance(obj, Mapping):
        inner = "|".join(f"{k}={fingerprint(v)}" for k, v in obj.items())
        return hashlib.sha256(inner.encode()).hexdigest()[:12]
    if isinstance(obj, (list, tuple)):
        return hashlib.sha256("|".join(fingerprint(v) for v in obj).encode()).hexdigest()[:12]
    digest = hashlib.sha256()
    try:
        buffers: list[pickle.PickleBuffer] = []  # large arrays out of band: hashed in place, not copied
        digest.update(pickle.dumps(obj, protocol=5, buffer_callback=buffers.append))
        for buf in buffers:
            digest.update(buf.raw())
        blob = b""
    except Exception:  # lambdas, open handles, ...: fall back to what describes the problem
        import numpy as np

        digest = hashlib.sha256()
        x0 = getattr(obj, "x0", None)
        parts = [
            f"{type(obj).__module__}.{type(obj).__qualname__}",
            str(getattr(obj, "name", "")),
            str(getattr(obj, "kind", "")),
            str(getattr(obj, "n", "")),
            str(getattr(obj, "m", "")),
        ]
        blob = "|".join(parts).encode()
        if x0 is not None:
            blob += np.ascontiguousarray(np.asarray(x0, dtype=np.float64)).tobytes()
    digest.update(blob + b"\0" + code_fingerprint(obj))
    return digest.hexdigest()[:12]


def _describe(obj: object) -> str:
    name = getattr(obj, "name", None)
    if isinstance(name, str) and name:
        return name
    target = obj if (inspect.isfunction(obj) or inspect.isclass(obj)) else type(obj)
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', type(target).__name__)}"


@dataclass(frozen=True)
class ProblemSource:
    """Where a problem comes from: ``build(**kwargs)`` makes it, ``label`` names it.

    ``kind``: ``"registered"`` (a registry name), ``"reference"`` (``"module:attr"``),
    ``"factory"`` (a callable) or ``"object"`` (a problem object, which takes no arguments).
    ``factory`` is the callable whose signature the problem arguments follow (``None`` for an object).
    ``portable`` is what a worker process can rebuild the problem from: the name or the reference
    (both are strings), or the factory / object itself (which must then be picklable).
    """

    label: str
    kind: str
    factory: Callable[..., Any] | None
    obj: Any = None
    portable: Any = None

    def build(self, **kwargs: Any) -> Any:
        """The problem, built with ``kwargs`` (a problem object accepts none)."""
        if self.factory is None:
            if kwargs:
                raise InvalidInputError(
                    f"the problem {self.label!r} is a ready problem object and takes no arguments (got "
                    f"{sorted(kwargs)}); pass a factory (a function returning the problem) to give it arguments"
                )
            return self.obj
        problem = self.factory(**kwargs)
        if not is_problem(problem):
            raise InvalidInputError(
                f"the problem factory {self.label!r} returned {type(problem).__name__}, not a problem (an object "
                "with 'kind' and 'x0', e.g. zoframe.FiniteSum or zoframe.Constrained)"
            )
        return problem


def problem_source(problem: Any, registry: Any = None, *, directory: str | None = None) -> ProblemSource:
    """A registered name, a ``"module:attr"`` / ``"file.py:attr"`` reference, a factory or a problem object.

    ``directory``: passed to :func:`load_reference` (where a saved run found a module reference).

    Raises :class:`~zoframe.errors.UnknownNameError` for a string that is neither a registered
    name nor a reference, and :class:`~zoframe.errors.InvalidInputError` for a reference that cannot
    be imported or names neither a problem nor a callable.
    """
    if isinstance(problem, str):
        from zoframe.registry import default_registry

        reg = registry if registry is not None else default_registry()
        try:
            spec = reg.problem(problem)
        except UnknownNameError:
            if not looks_like_reference(problem):
                raise
        else:
            return ProblemSource(problem, "registered", spec.factory, portable=problem)
        target = load_reference(problem, directory=directory)
        if is_problem(target):
            return ProblemSource(problem, "reference", None, obj=target, portable=problem)
        if callable(target):
            return ProblemSource(problem, "reference", target, portable=problem)
        raise InvalidInputError(
            f"the problem reference {problem!r} names a {type(target).__name__}, which is neither a problem "
            "(an object with 'kind' and 'x0') nor a factory returning one"
        )
    if is_problem(problem):
        return ProblemSource(f"{_describe(problem)}@{fingerprint(problem)}", "object", None, obj=problem, portable=problem)
    if callable(problem):
        return ProblemSource(f"{_describe(problem)}@{fingerprint(problem)}", "factory", problem, portable=problem)
    raise InvalidInputError(
        f"a problem must be a registered name, a 'module:attr' reference, a problem object (with 'kind' and "
        f"'x0') or a factory returning one; got {type(problem).__name__}"
    )


def rebuild(portable: Any, problem_args: Mapping[str, Any], registry: Any = None) -> Any:
    """The problem from a :attr:`ProblemSource.portable` value and its arguments (in any process)."""
    return problem_source(portable, registry).build(**dict(problem_args))
