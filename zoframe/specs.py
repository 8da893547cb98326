"""Frozen records that plugins yield through the hooks of :mod:`zoframe.hooks`.

A plugin never hands the framework a bare class: it hands a spec that says what the component is
called, what it does in one line, which paper it comes from and (for solvers) which problem kinds it
accepts. Hyper-parameters are read from the component's dataclass fields; declare them with
:func:`param` so that ``zoframe info`` can show the paper's symbol next to each one.

Lazy references. Every field that holds code (``SolverSpec.cls``, ``EstimatorSpec.cls``,
``ProblemSpec.factory``, ``ReproductionSpec.add_arguments``/``run``, ``CommandSpec.add_arguments``/
``run``, ``SuiteSpec.instances``) accepts either the object itself or a ``"module:attr"`` string.
A string is imported on first access of the field (``spec.cls`` returns the class), so a plugin
whose hook module names its classes by string costs nothing until one of its components is used:
``zoframe list`` and ``zoframe --help`` import no solver or problem module. The loaded object is
checked then (a solver class with ``init``/``step`` and the spec's ``problem_kinds``, an estimator
class with ``estimate``/``rows``, callables elsewhere); a failure raises
:class:`~zoframe.errors.PluginError` naming the component, the reference and the plugin.
:func:`reference` gives the ``"module:attr"`` of a field without importing anything.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
import dataclasses
from dataclasses import dataclass, field
import importlib
import re
from typing import Any, Generic, TypeVar, overload

from zoframe.errors import PluginError

T = TypeVar("T")

#: The problem kinds of SPEC section 1 (plus the plain finite sum).
PROBLEM_KINDS: tuple[str, ...] = ("finite_sum", "constrained", "minimax", "composite")


def param(default: Any, *, symbol: str = "", doc: str = "") -> Any:
    """A dataclass field with a paper symbol and a one-line description.

    Use it for every hyper-parameter of a solver or estimator::

        eta: float = param(1e-3, symbol="eta", doc="step size")
    """
    meta = {"symbol": symbol, "doc": doc}
    if isinstance(default, (list, dict, set)):
        raise TypeError("mutable defaults are not allowed: use a tuple or a frozen mapping")
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class ParamInfo:
    """One hyper-parameter as ``zoframe info`` shows it."""

    name: str
    default: Any
    symbol: str
    doc: str
    annotation: str


def describe_params(cls: type[Any]) -> tuple[ParamInfo, ...]:
    """The hyper-parameters of a dataclass component, in declaration order."""
    if not dataclasses.is_dataclass(cls):
        return ()
    out = []
    for f in dataclasses.fields(cls):
        if not f.init or f.name.startswith("_"):
            continue
        if f.default is not dataclasses.MISSING:
            default: Any = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = "<computed>"
        else:
            default = "<required>"
        ann = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        out.append(
            ParamInfo(
                name=f.name,
                default=default,
                symbol=str(f.metadata.get("symbol", "")),
                doc=str(f.metadata.get("doc", "")),
                annotation=str(ann),
            )
        )
    return tuple(out)



#: ``"package.module:attr"`` (``attr`` may be dotted: ``"pkg.mod:Outer.Inner"``)
_REF = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def is_reference(value: object) -> bool:
    """True for a well-formed ``"module:attr"`` string."""
    return isinstance(value, str) and _REF.match(value) is not None


class Lazy(Generic[T]):
    """A spec field holding either its value or a ``"module:attr"`` reference imported on first access.

    The resolved value is cached on the spec. Class access (``SolverSpec.cls``) raises
    ``AttributeError`` so that dataclasses treat the field as required.
    """

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self.name = name
        self.slot = f"_lazy_{name}"

    @overload
    def __get__(self, obj: None, objtype: type[Any] | None = None) -> Lazy[T]: ...

    @overload
    def __get__(self, obj: object, objtype: type[Any] | None = None) -> T: ...

    def __get__(self, obj: object | None, objtype: type[Any] | None = None) -> Lazy[T] | T:
        if obj is None:
            raise AttributeError(self.name)
        store = obj.__dict__
        value = store[self.slot]
        if isinstance(value, str):
            value = _resolve(obj, self.name, value)
            store[self.slot] = value
        return value  # type: ignore[no-any-return]

    def __set__(self, obj: object, value: T | str) -> None:
        if isinstance(value, str) and not is_reference(value):
            raise ValueError(
                f"{type(obj).__name__}.{self.name} must be an object or a 'module:attr' reference, got {value!r}"
            )
        obj.__dict__[self.slot] = value


def _label(spec: object) -> str:
    provider = spec.__dict__.get("_provider")
    name = spec.__dict__.get("name", "?")
    kind = type(spec).__name__.removesuffix("Spec").lower()
    return f"{kind} {name!r}" + (f" of plugin {provider}" if provider else "")


def _resolve(spec: object, field_name: str, ref: str) -> Any:
    """Import ``ref`` for ``spec.field_name`` and check what it names."""
    module_name, _, attr = ref.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except Exception as exc:  # any failure of third-party code: report it as the plugin's fault
        raise PluginError(
            f"{_label(spec)}: cannot load {field_name}={ref!r}: {type(exc).__name__}: {exc}; "
            "fix or uninstall the plugin, or block it with ZOFRAME_BLOCK_PLUGINS"
        ) from exc
    problem = component_problem(spec, field_name, obj)
    if problem is not None:
        raise PluginError(f"{_label(spec)}: {field_name}={ref!r} {problem}")
    return obj


def reference(spec: object, field_name: str) -> str:
    """The ``"module:attr"`` of a code field, without importing anything."""
    value = spec.__dict__.get(f"_lazy_{field_name}")
    if isinstance(value, str):
        return value
    if value is None:
        raise AttributeError(f"{type(spec).__name__} has no code field {field_name!r}")
    return f"{getattr(value, '__module__', '?')}:{getattr(value, '__qualname__', '?')}"


def is_loaded(spec: object, field_name: str) -> bool:
    """True once a code field holds its object (given directly or imported on first access)."""
    return not isinstance(spec.__dict__.get(f"_lazy_{field_name}"), str)


def code_fields(spec: object) -> tuple[str, ...]:
    """The names of the spec's code fields (those that accept ``"module:attr"``)."""
    return tuple(
        f.name for f in dataclasses.fields(spec)  # type: ignore[arg-type]
        if isinstance(type(spec).__dict__.get(f.name), Lazy)
    )


def raw(spec: object, field_name: str) -> Any:
    """A code field as stored: the object, or the reference string if it is not loaded yet."""
    return spec.__dict__[f"_lazy_{field_name}"]


#: names of components: no spaces, no ':' (reserved for ``plugin:name``)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


def _text_problem(label: str, value: object, *, empty_ok: bool = False) -> str | None:
    if not isinstance(value, str):
        return f"{label} must be a string, got {type(value).__name__}"
    if not empty_ok and not value.strip():
        return f"{label} must not be empty"
    return None


def spec_problems(spec: object) -> list[str]:
    """What is wrong with a spec's plain fields (nothing is imported); empty when it is fine.

    Code fields given as objects are checked too (:func:`component_problem`); code fields given as
    ``"module:attr"`` are checked when they are loaded.
    """
    out: list[str] = []
    name = spec.__dict__.get("name")
    if not isinstance(name, str) or _NAME.match(name) is None:
        out.append(
            f"name {name!r} is not a valid component name (letters, digits and '_', '.', '+', '-'; "
            "no spaces, no ':')"
        )
    for text in ("summary", "reference", "help"):
        if text in spec.__dict__:
            p = _text_problem(text, spec.__dict__[text], empty_ok=(text == "reference"))
            if p:
                out.append(p)
    if isinstance(spec, SolverSpec):
        kinds = spec.problem_kinds
        if not isinstance(kinds, (frozenset, set)) or not kinds or not all(isinstance(k, str) for k in kinds):
            out.append(f"problem_kinds must be a non-empty frozenset of {PROBLEM_KINDS}, got {kinds!r}")
        if not isinstance(spec.zeroth_order, bool):
            out.append(f"zeroth_order must be True or False, got {spec.zeroth_order!r}")
        if not isinstance(spec.contract_params, Mapping) or not all(isinstance(k, str) for k in spec.contract_params):
            out.append("contract_params must be a mapping of parameter names to values")
        dflt = spec.default_for
        if not isinstance(dflt, (frozenset, set)) or not all(isinstance(k, str) and k in PROBLEM_KINDS for k in dflt):
            out.append(f"default_for must be a frozenset of {PROBLEM_KINDS} (empty: the default of no kind), got {dflt!r}")
    if isinstance(spec, ProblemSpec):
        if spec.kind not in PROBLEM_KINDS:
            out.append(f"kind {spec.kind!r} is not one of {PROBLEM_KINDS}")
    if isinstance(spec, (ProblemSpec, SuiteSpec)):
        params = spec.parameters
        if not isinstance(params, Mapping) or not all(isinstance(k, str) for k in params):
            out.append("parameters must be a mapping of argument names to descriptions")
    for fname in code_fields(spec):
        value = raw(spec, fname)
        if isinstance(value, str):
            continue  # a well-formed reference (checked by the setter); the object is checked on load
        problem = component_problem(spec, fname, value)
        if problem is not None:
            out.append(f"{fname}={value!r} {problem}")
    return out


def component_problem(spec: object, field_name: str, value: object) -> str | None:
    """What is wrong with the object a code field holds (``None`` when it is fine)."""
    if isinstance(spec, (SolverSpec, EstimatorSpec)) and field_name == "cls":
        if not isinstance(value, type):
            return f"is not a class but {type(value).__name__}"
        needed = ("init", "step") if isinstance(spec, SolverSpec) else ("estimate", "rows")
        missing = [m for m in needed if not callable(getattr(value, m, None))]
        if missing:
            what = "solver" if isinstance(spec, SolverSpec) else "estimator"
            return f"is not a {what} class: it has no {' and no '.join(m + '()' for m in missing)} method"
        if isinstance(spec, SolverSpec):
            declared = getattr(value, "problem_kinds", None)
            if not isinstance(declared, (frozenset, set)):
                return (
                    f"declares no problem_kinds (class attribute, a frozenset of {PROBLEM_KINDS}); "
                    "the driver reads it to accept problems"
                )
            if frozenset(declared) != frozenset(spec.problem_kinds):
                return (
                    f"has problem_kinds {sorted(declared)} but the spec declares {sorted(spec.problem_kinds)}; "
                    "the class's attribute decides what the solver accepts, so make the two agree"
                )
        return None
    if not callable(value):
        return f"is not callable but {type(value).__name__}"
    return None


@dataclass(frozen=True)
class SolverSpec:
    """A solver plugin: ``cls(**params)`` builds a solver (see :class:`zoframe.protocols.Solver`).

    ``cls`` is the class or its ``"module:attr"`` reference (imported on first access).
    """

    name: str
    cls: Lazy[type[Any]] = Lazy()
    summary: str  # type: ignore[misc]  # cls/factory are required (see Lazy)
    reference: str  # type: ignore[misc]  # cls/factory are required (see Lazy)
    problem_kinds: frozenset[str]  # type: ignore[misc]  # cls/factory are required (see Lazy)
    zeroth_order: bool = True
    #: hyper-parameters the contract kit (``zoframe.testing``) uses on its small smoke problems
    contract_params: Mapping[str, Any] = field(default_factory=dict)
    #: the problem kinds this solver is the default of (``minimize(problem)`` without ``solver=``); a
    #: subset of ``problem_kinds``. :meth:`zoframe.registry.Registry.default_solver` resolves a kind
    default_for: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        unknown = set(self.problem_kinds) - set(PROBLEM_KINDS)
        if unknown:
            raise ValueError(
                f"solver {self.name!r} declares unknown problem kinds {sorted(unknown)}; "
                f"valid kinds are {PROBLEM_KINDS}"
            )
        if isinstance(self.default_for, (frozenset, set)):
            extra = set(self.default_for) - set(self.problem_kinds)
            if extra:
                raise ValueError(
                    f"solver {self.name!r} is declared the default for {sorted(extra)} problems, which it does not "
                    f"solve (problem_kinds {sorted(self.problem_kinds)}); default_for must be a subset of problem_kinds"
                )


@dataclass(frozen=True)
class EstimatorSpec:
    """An estimator plugin: ``cls(**params)`` builds a :class:`zoframe.protocols.Estimator`.

    ``cls`` is the class or its ``"module:attr"`` reference (imported on first access).
    """

    name: str
    cls: Lazy[type[Any]] = Lazy()
    summary: str  # type: ignore[misc]  # cls/factory are required (see Lazy)
    reference: str  # type: ignore[misc]  # cls/factory are required (see Lazy)


@dataclass(frozen=True)
class ProblemSpec:
    """A problem plugin: ``factory(**kwargs)`` builds a problem of the given kind.

    ``factory`` is the callable or its ``"module:attr"`` reference (imported on first access).
    """

    name: str
    factory: Lazy[Callable[..., Any]] = Lazy()
    summary: str  # type: ignore[misc]  # cls/factory are required (see Lazy)
    reference: str  # type: ignore[misc]  # cls/factory are required (see Lazy)
    kind: str  # type: ignore[misc]  # cls/factory are required (see Lazy)
    parameters: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ReproductionSpec:
    """An experiment reproducible with ``zoframe reproduce NAME``.

    ``add_arguments`` adds the experiment's options to its sub-parser; ``run`` receives the parsed
    namespace and returns the process exit code.
    """

    name: str
    summary: str
    reference: str
    add_arguments: Lazy[Callable[[argparse.ArgumentParser], None]] = Lazy()
    run: Lazy[Callable[[argparse.Namespace], int]] = Lazy()


@dataclass(frozen=True)
class CommandSpec:
    """A top-level ``zoframe`` sub-command contributed by a plugin (e.g. ``rate``, ``verify``)."""

    name: str
    help: str
    add_arguments: Lazy[Callable[[argparse.ArgumentParser], None]] = Lazy()
    run: Lazy[Callable[[argparse.Namespace], int]] = Lazy()


@dataclass(frozen=True)
class SuiteInstance:
    """One problem instance of a benchmark suite.

    ``build()`` returns a fresh problem (any kind). ``f_star`` / ``x_star`` are the known optimal
    value and point where known (``None`` otherwise); ``dim`` and ``m`` (number of constraints,
    0 for unconstrained kinds) describe the instance without building it.
    """

    name: str
    build: Callable[[], Any]
    kind: str
    dim: int
    m: int = 0
    f_star: float | None = None
    x_star: tuple[float, ...] | None = None
    reference: str = ""
    tags: frozenset[str] = frozenset()


@dataclass(frozen=True)
class SuiteSpec:
    """A named collection of problem instances (``zoframe bench SUITE``).

    ``instances(**kwargs)`` returns the suite's :class:`SuiteInstance` records, built lazily;
    instance names are unique within a suite, and the same ``kwargs`` always give the same
    instances (seeded generators take a ``seed`` keyword), so a worker process can rebuild an
    instance from ``(suite name, kwargs, instance name)``.
    """

    name: str
    summary: str
    reference: str
    instances: Lazy[Callable[..., Sequence[SuiteInstance]]] = Lazy()
    parameters: Mapping[str, str] = field(default_factory=dict)
