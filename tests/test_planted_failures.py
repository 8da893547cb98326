"""No solver claims success on a problem where success is impossible.

Every registered solver (read from the registry, so a new plugin is covered) runs, with a tiny
budget, on planted problems of the kinds it accepts:

* ``unbounded``: ``min -sum(x)`` with no bounds (finite sum), or with one constraint that leaves it
  unbounded (constrained); a problem of the other kinds made unbounded by a term ``-1e3 sum(x)``;
* ``budget``: a budget far too small to solve the problem (Rosenbrock from its usual start for the
  finite-sum and constrained kinds, the smoke problem of the other kinds, 60 evaluations);
* ``nan``: the user function returns NaN everywhere except at ``x0`` (``nonfinite="inf"``);
* ``infeasible``: two contradictory constraints (constrained solvers only).

``Result.success`` must be False in every case, and for the peers the status must say why: a budget
status for the budget case, never ``CONVERGED`` for the others. A solver that refuses the problem
before evaluating it (a clear :class:`~zoframe.errors.ZoframeError`) claims nothing and passes; one
whose optional dependency is missing is skipped with that reason.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import zoframe
from zoframe import default_registry
from zoframe._optional import MissingDependencyError
from zoframe.errors import ZoframeError
from zoframe.result import Result, Status
from zoframe.testing.problems import smoke_problem

_REG = default_registry()
_PEER_PLUGIN = "peers"


class _Wrapped:
    """A problem that delegates to ``base`` but whose evaluations pass through ``change``."""

    def __init__(self, base: Any, method: str, change: Any) -> None:
        self._base, self._method, self._change = base, method, change

    def __getattr__(self, name: str) -> Any:
        if name == self._method:
            fn = getattr(self._base, name)
            return lambda *args: self._change(args, fn(*args))
        return getattr(self._base, name)


_METHOD = {"minimax": "values", "composite": "components"}


def _nan_away(base: Any, kind: str) -> Any:
    """``base`` with NaN for every point but ``x0`` (the first argument of its evaluation method)."""
    x0 = np.asarray(base.x0, dtype=np.float64)

    def change(args: tuple[Any, ...], out: Any) -> Any:
        X = np.asarray(args[0])
        at_x0 = np.all(X == x0, axis=1)
        return np.where(at_x0[:, None], out, np.nan)

    return _Wrapped(base, _METHOD[kind], change)


def _downhill(base: Any, kind: str) -> Any:
    """``base`` plus ``-1e3 sum(x)`` on every component: unbounded below in ``x``."""

    def change(args: tuple[Any, ...], out: Any) -> Any:
        return out - 1e3 * np.asarray(args[0]).sum(axis=1)[:, None]

    return _Wrapped(base, _METHOD[kind], change)


def _rosen(X: np.ndarray) -> np.ndarray:
    return np.asarray(np.sum((1.0 - X[:, :-1]) ** 2 + 100.0 * (X[:, 1:] - X[:, :-1] ** 2) ** 2, axis=1))


_ROSEN_X0 = np.array([-1.2, 1.0, -1.2, 1.0])


def _planted(case: str, kind: str) -> tuple[Any, dict[str, Any]]:
    """The planted problem of ``case`` for ``kind`` and the run's keyword arguments."""
    if kind in ("minimax", "composite"):
        base = smoke_problem(kind)
        if case == "unbounded":
            return _downhill(base, kind), {"max_calls": 1000}
        if case == "budget":
            return base, {"max_calls": 60}
        return _nan_away(base, kind), {"max_calls": 600, "nonfinite": "inf"}
    constrained = kind == "constrained"
    if case == "unbounded":
        if constrained:  # x_0 <= 1 bounds one coordinate only
            return zoframe.Constrained(lambda X: -X.sum(1), lambda X, idx: (X[:, :1] - 1.0)[:, idx],
                                       x0=np.zeros(3), m=1), {"max_calls": 1000}
        return zoframe.FiniteSum(lambda X: -X.sum(1), x0=np.zeros(3)), {"max_calls": 1000}
    if case == "budget":
        if constrained:
            return zoframe.Constrained(_rosen, lambda X, idx: ((X * X).sum(1, keepdims=True) - 100.0)[:, idx],
                                       x0=_ROSEN_X0, m=1), {"max_calls": 60}
        return zoframe.FiniteSum(_rosen, x0=_ROSEN_X0), {"max_calls": 60}
    if case == "nan":
        x0 = np.ones(3)

        def f(X: np.ndarray) -> np.ndarray:
            return np.where(np.all(X == x0, axis=1), (X * X).sum(1), np.nan)

        if constrained:
            return zoframe.Constrained(f, lambda X, idx: (X.sum(1, keepdims=True) - 10.0)[:, idx], x0=x0, m=1), \
                {"max_calls": 600, "nonfinite": "inf"}
        return zoframe.FiniteSum(f, x0=x0), {"max_calls": 600, "nonfinite": "inf"}
    # infeasible: x_0 <= -1 and x_0 >= 1
    return zoframe.Constrained(lambda X: (X * X).sum(1),
                               lambda X, idx: np.stack([X[:, 0] + 1.0, 1.0 - X[:, 0]], axis=1)[:, idx],
                               x0=np.zeros(3), m=2), {"max_calls": 600}


def _cases() -> list[Any]:
    out = []
    for name, provided in sorted(_REG.solvers().items()):
        kinds = sorted(provided.spec.problem_kinds)
        for case in ("unbounded", "budget", "nan", "infeasible"):
            for kind in kinds:
                if case == "infeasible" and kind != "constrained":
                    continue
                out.append(pytest.param(name, case, kind, id=f"{name}-{case}-{kind}"))
    return out


def _run(name: str, case: str, kind: str) -> Result | None:
    problem, kwargs = _planted(case, kind)
    params = dict(_REG.solvers()[name].spec.contract_params)
    try:
        return zoframe.minimize(problem, name, rng=0, registry=_REG, **params, **kwargs)
    except MissingDependencyError as exc:
        pytest.skip(f"{name}: optional dependency not installed ({exc})")
    except zoframe.RunFailedError as exc:
        return exc.result
    except ZoframeError as exc:
        partial = getattr(exc, "result", None)
        return partial if isinstance(partial, Result) else None  # None: refused before any evaluation
    raise AssertionError("unreachable")  # pragma: no cover


# with nonfinite="inf" some estimators difference +inf values (numpy warns "invalid value"); what is
# checked here is the claim at the end, not the warning on the way
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize(("name", "case", "kind"), _cases())
def test_no_success_where_success_is_impossible(name: str, case: str, kind: str) -> None:
    res = _run(name, case, kind)
    if res is None:
        return
    assert not res.success, f"{name} claimed success on the planted {case} problem: {res.status.name} {res.message}"
    if _REG.solvers()[name].plugin == _PEER_PLUGIN:
        if case == "budget":
            assert res.status.budget, res.message
        else:
            assert res.status is not Status.CONVERGED, res.message
