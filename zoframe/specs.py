"""Frozen records that plugins yield through the hooks of :mod:`zoframe.hooks`.

A plugin never hands the framework a bare class: it hands a spec that says what the component is
called, what it does in one line, which paper it comes from and (for solvers) which problem kinds it
accepts. Hyper-parameters are read from the component's dataclass fields; declare them with
:func:`param` so that ``zoframe info`` can show the paper's symbol next to each one.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
import dataclasses
from dataclasses import dataclass, field
from typing import Any, TypeVar

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


@dataclass(frozen=True)
class SolverSpec:
    """A solver plugin: ``cls(**params)`` builds a solver (see :class:`zoframe.protocols.Solver`)."""

    name: str
    cls: type[Any]
    summary: str
    reference: str
    problem_kinds: frozenset[str]
    zeroth_order: bool = True
    #: hyper-parameters the contract kit (``zoframe.testing``) uses on its small smoke problems
    contract_params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = set(self.problem_kinds) - set(PROBLEM_KINDS)
        if unknown:
            raise ValueError(
                f"solver {self.name!r} declares unknown problem kinds {sorted(unknown)}; "
                f"valid kinds are {PROBLEM_KINDS}"
            )


@dataclass(frozen=True)
class EstimatorSpec:
    """An estimator plugin: ``cls(**params)`` builds a :class:`zoframe.protocols.Estimator`."""

    name: str
    cls: type[Any]
    summary: str
    reference: str


@dataclass(frozen=True)
class ProblemSpec:
    """A problem plugin: ``factory(**kwargs)`` builds a problem of the given kind."""

    name: str
    factory: Callable[..., Any]
    summary: str
    reference: str
    kind: str
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
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


@dataclass(frozen=True)
class CommandSpec:
    """A top-level ``zoframe`` sub-command contributed by a plugin (e.g. ``rate``, ``verify``)."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


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
    instances: Callable[..., Sequence[SuiteInstance]]
    parameters: Mapping[str, str] = field(default_factory=dict)
