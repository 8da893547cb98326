"""The contract kit applied to every registered solver and estimator."""

from __future__ import annotations

import pytest

from zoframe import default_registry
from zoframe.testing import SolverContract, check_estimator

_REG = default_registry()
_SOLVER_KINDS = [(name, kind) for name, p in sorted(_REG.solvers().items()) for kind in sorted(p.spec.problem_kinds)]
_CHECKS = ["determinism", "exact_budget", "declared_cost", "inputs_not_mutated", "checkpoint_resume", "progress"]


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
