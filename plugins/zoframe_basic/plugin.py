"""Hook implementations of the ``basic`` plugin.

Classes are named by ``"module:attr"`` references, imported when a component is first used, so
loading this module (``zoframe list``, ``zoframe --help``) imports no solver or problem module.
"""

from __future__ import annotations

from collections.abc import Sequence

from zoframe import hookimpl
from zoframe.specs import ProblemSpec, SolverSpec


@hookimpl
def zoframe_solvers() -> Sequence[SolverSpec]:
    return [
        SolverSpec(
            name="zo-sgd",
            cls="zoframe_basic.solvers:ZOSGD",
            summary="zeroth-order (projected) stochastic gradient descent",
            reference="Ghadimi & Lan, Stochastic first- and zeroth-order methods for nonconvex stochastic programming, SIAM J. Optim. 2013",
            problem_kinds=frozenset({"finite_sum"}),
            default_for=frozenset({"finite_sum"}),
        ),
        SolverSpec(
            name="zo-signsgd",
            cls="zoframe_basic.solvers:ZOSignSGD",
            summary="zeroth-order sign SGD with sphere-smoothing estimates",
            reference="Liu, Chen, Chen & Hong, signSGD via zeroth-order oracle, ICLR 2019",
            problem_kinds=frozenset({"finite_sum"}),
        ),
    ]


@hookimpl
def zoframe_problems() -> Sequence[ProblemSpec]:
    return [
        ProblemSpec(
            name="least-squares",
            factory="zoframe_basic.problems:LeastSquares",
            summary="finite-sum least squares with Gaussian data and a planted solution",
            reference="(test problem)",
            kind="finite_sum",
            parameters={"dim": "dimension (100)", "n": "components (1000)", "noise": "0.1", "seed": "0"},
        ),
        ProblemSpec(
            name="quadratic",
            factory="zoframe_basic.problems:Quadratic",
            summary="ill-conditioned diagonal quadratic with known minimiser",
            reference="(test problem)",
            kind="finite_sum",
            parameters={"dim": "dimension (10)", "cond": "condition number (10)", "seed": "0"},
        ),
    ]
