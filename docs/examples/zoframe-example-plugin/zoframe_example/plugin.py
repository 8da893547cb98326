"""The plugin module named in pyproject.toml's ``zoframe.plugins`` entry point.

It names its classes and factories by ``"module:attr"`` strings, so loading it (``zoframe list``,
``zoframe --help``) imports no numerical module; zoframe imports each one when it is first used.
"""

from __future__ import annotations

from collections.abc import Sequence

from zoframe import EstimatorSpec, ProblemSpec, SolverSpec, hookimpl


@hookimpl
def zoframe_estimators() -> Sequence[EstimatorSpec]:
    return [
        EstimatorSpec(
            name="antithetic",
            cls="zoframe_example.estimator:AntitheticEstimator",
            summary="two-point antithetic Gaussian differences (2q evaluations)",
            reference="Nesterov & Spokoiny, FoCM 2017 (central-difference variant)",
        )
    ]


@hookimpl
def zoframe_solvers() -> Sequence[SolverSpec]:
    return [
        SolverSpec(
            name="tiny-signsgd",
            cls="zoframe_example.solver:TinySignSGD",
            summary="a tiny ZO sign-SGD (example third-party plugin)",
            reference="Liu, Chen, Chen & Hong, signSGD via zeroth-order oracle, ICLR 2019",
            problem_kinds=frozenset({"finite_sum"}),
            contract_params={"eta": 0.02},
        )
    ]


@hookimpl
def zoframe_problems() -> Sequence[ProblemSpec]:
    return [
        ProblemSpec(
            name="planted-ls",
            factory="zoframe_example.problems:planted_least_squares",
            summary="planted least squares (example problem plugin)",
            reference="(test problem)",
            kind="finite_sum",
            parameters={"dim": "dimension (5)", "n": "components (40)", "seed": "0"},
        )
    ]
