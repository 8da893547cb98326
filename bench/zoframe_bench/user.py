"""Benches of a user's own problems: problem objects, factories and ``"module:attr"`` references.

``zoframe_bench.run(problems, solvers, ...)`` takes, in place of a registered suite name:

- a problem object, a factory returning one (called with ``suite_args``) or a
  ``"module:attr"`` / ``"path/to/file.py:attr"`` reference to either (:mod:`zoframe.userproblem`);
- a list, tuple or dict (``{name: problem}``) of those, or of
  :class:`~zoframe.specs.SuiteInstance` records;
- a reference to such a list / dict, or to a function returning one (called with ``suite_args``).

Each problem becomes one instance of an ad-hoc suite. A reference is rebuilt in every worker process
(so ``workers`` and ``dask`` work with it); problem objects and factories passed directly live in
this process only, so a bench of them runs serially.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
import functools
from typing import Any

from zoframe.errors import InvalidInputError
from zoframe.specs import SuiteInstance
from zoframe.userproblem import fingerprint, is_problem, load_reference, looks_like_reference, problem_source

__all__ = ["is_user_suite", "register", "user_instances"]

#: ad-hoc suites of this process: label -> instances
_SUITES: dict[str, tuple[SuiteInstance, ...]] = {}


def _instance(name: str, build: Any) -> SuiteInstance:
    from zoframe_bench.suites import _known

    prob = build()
    kind = str(prob.kind)
    m = int(getattr(prob, "m", 0)) if kind == "constrained" else 0
    fstar, xstar = _known(prob)
    dim = int(getattr(prob, "dim", len(getattr(prob, "x0", ()))))
    return SuiteInstance(name, build, kind, dim, m, fstar, xstar, "a problem of the user's own")


def _one(item: Any, args: Mapping[str, Any], default_name: str) -> SuiteInstance:
    if isinstance(item, SuiteInstance):
        return item
    source = problem_source(item)
    if source.factory is None:
        obj = source.build()
        name = str(getattr(obj, "name", "") or default_name)
        return _instance(name, lambda: obj)
    build = functools.partial(source.build, **dict(args))
    name = str(getattr(item, "__name__", "") or default_name) if not isinstance(item, str) else default_name
    return _instance(name, build)


def _expand(target: Any, args: Mapping[str, Any], label: str) -> tuple[SuiteInstance, ...]:
    items: list[tuple[str, Any]]
    if isinstance(target, Mapping):
        items = [(str(k), v) for k, v in target.items()]
    elif isinstance(target, Sequence) and not isinstance(target, str):
        items = [(f"problem-{i}", v) for i, v in enumerate(target)]
    else:
        items = [(label, target)]
    if not items:
        raise InvalidInputError(f"the bench problems {label!r} are an empty collection: give at least one problem")
    out: list[SuiteInstance] = []
    for name, item in items:
        inst = _one(item, args, name)
        if isinstance(target, Mapping):
            inst = SuiteInstance(name, inst.build, inst.kind, inst.dim, inst.m, inst.f_star, inst.x_star,
                                 inst.reference, inst.tags)
        out.append(inst)
    seen: dict[str, int] = {}
    unique = []
    for inst in out:  # instance names are unique within a suite
        k = seen.get(inst.name, 0)
        seen[inst.name] = k + 1
        if k:
            inst = SuiteInstance(f"{inst.name}-{k}", inst.build, inst.kind, inst.dim, inst.m, inst.f_star,
                                 inst.x_star, inst.reference, inst.tags)
        unique.append(inst)
    return tuple(unique)


def is_user_suite(suite: Any) -> bool:
    """True for anything but a plain suite name (a reference string counts as a user suite)."""
    return not isinstance(suite, str) or looks_like_reference(suite)


def user_instances(suite: Any, suite_args: Mapping[str, Any]) -> tuple[SuiteInstance, ...]:
    """The instances of a reference suite (``"module:attr"``), cached per reference and arguments."""
    key = f"{suite}|{sorted(dict(suite_args).items())!r}"
    if key in _SUITES:
        return _SUITES[key]
    if suite in _SUITES:
        return _SUITES[suite]
    if not isinstance(suite, str):
        raise InvalidInputError(f"unknown ad-hoc suite {suite!r}")
    target = load_reference(suite)
    args = dict(suite_args)
    if not is_problem(target) and callable(target) and not isinstance(target, (Sequence, Mapping)):
        # a factory of one problem, or a function returning a collection: call it once to see which
        made = target(**args)
        if not is_problem(made) and not isinstance(made, (Sequence, Mapping)):
            raise InvalidInputError(
                f"{suite!r} returned {type(made).__name__}: expected a problem (an object with 'kind' and 'x0') "
                "or a list / dict of problems"
            )
        if is_problem(made):
            instances = _expand(suite, args, suite.rpartition(":")[2])
        else:
            instances = _expand(made, {}, suite)
    else:
        instances = _expand(target, args, suite.rpartition(":")[2])
    _SUITES[key] = instances
    return instances


def register(problems: Any, suite_args: Mapping[str, Any]) -> str:
    """Make an ad-hoc suite of ``problems`` (objects, factories, or a collection) in this process; its label."""
    label_target = problems
    try:
        tag = fingerprint(label_target)
    except Exception:  # pragma: no cover - fingerprint falls back by itself
        tag = format(id(problems), "x")
    kind = "problems" if isinstance(problems, (Sequence, Mapping)) else "problem"
    label = f"user-{kind}@{tag}"
    _SUITES[label] = _expand(problems, dict(suite_args), "problem")
    return label
