"""The COCO ``bbob`` functions as a zoframe suite, through the ``coco-experiment`` package (``cocoex``).

An example of an external collection plugged in as a suite: each (function, dimension, instance)
of COCO's noiseless single-objective ``bbob`` suite (Hansen et al., *COCO: a platform for comparing
continuous optimizers in a black-box setting*, Optim. Methods Softw. 2021) becomes a finite-sum
problem with ``n = 1``. ``cocoex.BareProblem(suite, function, dimension, instance)`` evaluates the
function on a matrix of points in one call and gives the optimum (``best_value()``,
``best_parameter()``), which becomes the instance's ``f*`` and ``x*``. The start is the origin, as
COCO's ``initial_solution``; the problems are unconstrained (COCO's region of interest is
``[-5, 5]^d`` and every optimum lies in ``[-4, 4]^d``).

``cocoex`` is an optional dependency: ``pip install 'zoframe[coco]'``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
import functools
import importlib
from typing import Any, ClassVar

import numpy as np

from zoframe.errors import InvalidInputError
from zoframe.oracle import MonitorOracle
from zoframe.protocols import Array, IntArray
from zoframe.specs import SuiteInstance

__all__ = ["BBOBProblem", "bbob_instances", "parse_ids"]


def _cocoex() -> Any:
    try:
        return importlib.import_module("cocoex")
    except ImportError as exc:
        from zoframe._optional import MissingDependencyError

        raise MissingDependencyError(
            "the bbob suite needs COCO's Python package coco-experiment (module cocoex), which is not "
            "installed: pip install 'zoframe[coco]' (in a clone: pip install -e '.[coco]')"
        ) from exc


@dataclass(frozen=True, eq=False)
class BBOBProblem:
    """COCO bbob function ``function`` in dimension ``dimension``, instance ``instance`` (``n = 1``)."""

    kind: ClassVar[str] = "finite_sum"
    function: int
    dimension: int
    instance: int = 1
    n: int = 1
    feasible_set: Any = None
    name: str = field(init=False)
    dim: int = field(init=False)
    x0: Array = field(init=False, repr=False)
    _fn: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        fn = _cocoex().BareProblem("bbob", int(self.function), int(self.dimension), int(self.instance))
        object.__setattr__(self, "_fn", fn)
        object.__setattr__(self, "name", str(fn.id))
        object.__setattr__(self, "dim", int(self.dimension))
        x0 = np.zeros(self.dimension)
        x0.setflags(write=False)
        object.__setattr__(self, "x0", x0)

    # the C object does not pickle: a copy is rebuilt from (function, dimension, instance)
    def __reduce__(self) -> tuple[Any, tuple[int, int, int]]:
        return (BBOBProblem, (self.function, self.dimension, self.instance))

    def components(self, X: Array, idx: IntArray) -> Array:
        v = np.asarray(self._fn(np.ascontiguousarray(X, dtype=np.float64)), dtype=np.float64).reshape(X.shape[0])
        return np.repeat(v[:, None], len(idx), axis=1)

    def known_solution(self) -> Mapping[str, Any]:
        return {"x": np.asarray(self._fn.best_parameter(), dtype=np.float64), "fun": float(self._fn.best_value())}

    def measures(self, outputs: Mapping[str, Array], monitor: MonitorOracle) -> dict[str, float]:
        return {"fun": float(monitor.objective(outputs["x"])[0, 0])}


def parse_ids(spec: str | int | Sequence[int], what: str, lo: int, hi: int | None = None) -> tuple[int, ...]:
    """``"1-24"``, ``"1,8,15"``, ``3`` or ``[1, 2]`` as a sorted tuple of ids within ``[lo, hi]``."""
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        ids = {int(spec)}
    elif isinstance(spec, str):
        ids = set()
        for part in spec.split(","):
            part = part.strip()
            if not part:
                continue
            a, sep, b = part.partition("-")
            try:
                ids.update(range(int(a), int(b) + 1) if sep else {int(a)})
            except ValueError:
                raise InvalidInputError(f"bbob: {what} must look like '1-24' or '1,8,15', got {spec!r}") from None
    else:
        ids = {int(v) for v in spec}  # type: ignore[union-attr]
    bad = sorted(i for i in ids if i < lo or (hi is not None and i > hi))
    if not ids or bad:
        rng = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        raise InvalidInputError(f"bbob: {what} must be in {rng}, got {spec!r}")
    return tuple(sorted(ids))


@functools.lru_cache(maxsize=8)
def _bbob(functions: tuple[int, ...], dimensions: tuple[int, ...], instances: tuple[int, ...]) -> tuple[SuiteInstance, ...]:
    out = []
    for d in dimensions:
        for f in functions:
            for i in instances:
                prob = BBOBProblem(f, d, i)
                sol = prob.known_solution()
                out.append(SuiteInstance(
                    prob.name, functools.partial(BBOBProblem, f, d, i), "finite_sum", d, 0, float(sol["fun"]),
                    tuple(float(v) for v in sol["x"]), f"COCO bbob f{f}, instance {i}", frozenset({f"f{f}", f"d{d}"}),
                ))
    return tuple(out)


def bbob_instances(functions: str | int | Sequence[int] = "1-24", dimensions: str | int | Sequence[int] = "2,5",
                   instances: str | int | Sequence[int] = 1) -> Sequence[SuiteInstance]:
    """The bbob problems of the given function ids (1..24), dimensions and instance ids."""
    _cocoex()
    return _bbob(parse_ids(functions, "functions", 1, 24), parse_ids(dimensions, "dimensions", 1, 640),
                 parse_ids(instances, "instances", 1))
