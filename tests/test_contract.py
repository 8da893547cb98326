"""The contract kit applied to every registered solver, estimator and problem."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import zoframe
from zoframe import ProblemSpec, default_registry
from zoframe.testing import ContractFailure, SolverContract, check_estimator, check_problem

_REG = default_registry()
_SOLVER_KINDS = [(name, kind) for name, p in sorted(_REG.solvers().items()) for kind in sorted(p.spec.problem_kinds)]
_CHECKS = ["determinism", "exact_budget", "declared_cost", "inputs_not_mutated", "checkpoint_resume", "progress"]


def test_every_lazy_reference_of_the_installed_plugins_loads() -> None:
    assert _REG.check_references() == {}


def test_there_are_solvers_and_estimators() -> None:
    assert {"zo-sgd", "zo-signsgd"} <= set(_REG.solvers())
    assert {"gaussian", "sphere", "coordinate"} <= set(_REG.estimators())


@pytest.mark.parametrize("check", _CHECKS)
@pytest.mark.parametrize(("name", "kind"), _SOLVER_KINDS)
def test_solver_contract(name: str, kind: str, check: str) -> None:
    contract = SolverContract(name, registry=_REG)
    getattr(contract, f"check_{check}")(kind)


@pytest.mark.parametrize("name", sorted(_REG.estimators()))
def test_estimator_contract(name: str) -> None:
    check_estimator(name, registry=_REG)


def _default_dataset(name: str) -> str | None:
    """The LIBSVM data set a registered problem reads with its defaults (its ``dataset`` default), if any."""
    from zoframe_datasets.catalog import DATASETS

    fac = getattr(_REG.problems()[name].spec, "factory", None)
    try:
        param = inspect.signature(fac).parameters.get("dataset") if fac is not None else None
    except (TypeError, ValueError):
        return None
    default = None if param is None else param.default
    return default if isinstance(default, str) and default in DATASETS else None


_PROBLEM_CASES = [
    pytest.param(n, marks=pytest.mark.data(ds)) if (ds := _default_dataset(n)) else n for n in sorted(_REG.problems())
]


@pytest.mark.parametrize("name", _PROBLEM_CASES)
def test_problem_contract(name: str) -> None:
    check_problem(name, registry=_REG)


def _mixing_rows(X: np.ndarray) -> np.ndarray:
    out: np.ndarray = ((X - X.mean(axis=0)) ** 2).sum(axis=1)  # each value depends on the other rows
    return out


def _fine(X: np.ndarray) -> np.ndarray:
    out: np.ndarray = (X**2).sum(axis=1)
    return out


def test_check_problem_catches_row_mixing_and_unpicklable_problems() -> None:
    check_problem(zoframe.FiniteSum(_fine, x0=np.ones(3)))
    with pytest.raises(ContractFailure, match="differs from 3 one-point calls"):
        check_problem(zoframe.FiniteSum(_mixing_rows, x0=np.ones(3)))
    closure = zoframe.FiniteSum(lambda X: (X**2).sum(axis=1), x0=np.ones(3))
    with pytest.raises(ContractFailure, match=r"does not pickle.*process pool"):
        check_problem(closure)
    check_problem(closure, picklable=False)


def test_check_problem_compares_the_built_kind_with_the_spec() -> None:
    spec = ProblemSpec("liar", factory=lambda: zoframe.FiniteSum(_fine, x0=np.ones(2)), summary="s", reference="r",
                       kind="minimax")
    with pytest.raises(ContractFailure, match="declares kind 'minimax', the factory built 'finite_sum'"):
        check_problem(spec)
