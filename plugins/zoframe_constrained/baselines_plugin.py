"""Hook implementations of the constrained baselines and the DSZOG reproduction.

Classes are named by ``"module:attr"`` references, imported when a component is first used.
"""

from __future__ import annotations

from collections.abc import Sequence

from zoframe import hookimpl
from zoframe.specs import ReproductionSpec, SolverSpec

_KINDS = frozenset({"constrained"})
_ICML = "; baseline of Shi, Gao & Gu, ICML 2022"

#: the contract kit's smoke problem has n = 8 components, d = 4, m = 6 linear constraints
_SMOKE = {"M1": 4, "q": 10, "mu": 1e-4}


@hookimpl
def zoframe_solvers() -> Sequence[SolverSpec]:
    return [
        SolverSpec(
            name="zopsgd",
            cls="zoframe_constrained.baselines:ZOPSGD",
            summary="ZO projected SGD: ZO gradient of f0, Euclidean projection onto all constraints (cvxpy QP)",
            reference="Liu et al., Zeroth-order stochastic projected gradient descent for nonconvex optimization, GlobalSIP 2018" + _ICML,
            problem_kinds=_KINDS,
            contract_params={**_SMOKE, "eta": 0.1},
        ),
        SolverSpec(
            name="zoscgd",
            cls="zoframe_constrained.baselines:ZOSCGD",
            summary="ZO stochastic conditional gradient: linear minimisation over constraints and a ball (cvxpy LP)",
            reference="Balasubramanian & Ghadimi, Zeroth-order (non)-convex stochastic optimization via conditional gradient and gradient updates, NeurIPS 2018" + _ICML,
            problem_kinds=_KINDS,
            contract_params={**_SMOKE, "gamma": 0.05, "R": 5.0},
        ),
        SolverSpec(
            name="acc-zomda",
            cls="zoframe_constrained.baselines:AccZOMDA",
            summary="STORM-momentum ZO estimator (same directions at two points) with a projected step (cvxpy QP)",
            reference="Huang, Gao, Pei & Huang, Accelerated zeroth-order momentum methods from mini to minimax optimization, 2020" + _ICML,
            problem_kinds=_KINDS,
            contract_params={**_SMOKE, "gamma": 0.2},
        ),
        SolverSpec(
            name="acc-szofw",
            cls="zoframe_constrained.baselines:AccSZOFW",
            summary="SPIDER ZO estimator with a momentum-accelerated Frank-Wolfe step (cvxpy LP)",
            reference="Huang, Tao & Chen, Accelerated stochastic gradient-free and projection-free methods, ICML 2020" + _ICML,
            problem_kinds=_KINDS,
            contract_params={**_SMOKE, "eta": 0.05, "R": 5.0, "period": 5},
        ),
    ]


@hookimpl
def zoframe_reproductions() -> Sequence[ReproductionSpec]:
    return [
        ReproductionSpec(
            "dszog",
            "DSZOG paper: Table 2 (pairwise), 3 (fairness), 10 (RBF kernel), sensitivity tables; Figures 1-3",
            "Shi, Gao & Gu, Gradient-free method for heavily constrained nonconvex optimization, ICML 2022",
            "zoframe_constrained.reproduce:add_arguments",
            "zoframe_constrained.reproduce:run",
        )
    ]
