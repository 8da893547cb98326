"""The plugin module named in pyproject.toml's ``zoframe.plugins`` entry point."""

from __future__ import annotations

from collections.abc import Sequence

from zoframe import EstimatorSpec, SolverSpec, hookimpl
from zoframe_example.estimator import AntitheticEstimator
from zoframe_example.solver import TinySignSGD


@hookimpl
def zoframe_estimators() -> Sequence[EstimatorSpec]:
    return [
        EstimatorSpec(
            name="antithetic",
            cls=AntitheticEstimator,
            summary="two-point antithetic Gaussian differences (2q evaluations)",
            reference="Nesterov & Spokoiny, FoCM 2017 (central-difference variant)",
        )
    ]


@hookimpl
def zoframe_solvers() -> Sequence[SolverSpec]:
    return [
        SolverSpec(
            name="tiny-signsgd",
            cls=TinySignSGD,
            summary="a tiny ZO sign-SGD (example third-party plugin)",
            reference="Liu, Chen, Chen & Hong, signSGD via zeroth-order oracle, ICLR 2019",
            problem_kinds=frozenset({"finite_sum"}),
            contract_params={"eta": 0.02},
        )
    ]
