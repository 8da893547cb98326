"""Hook implementations of zoframe_admm: six composite solvers, three problems, ``reproduce admm``.

Classes are named by ``"module:attr"`` references, imported when a component is first used.
"""

from __future__ import annotations

from collections.abc import Sequence

from zoframe import hookimpl
from zoframe.specs import ProblemSpec, ReproductionSpec, SolverSpec

IJCAI = (
    "Huang, Gao, Chen & Huang, Zeroth-Order Stochastic Alternating Direction Method of Multipliers "
    "for Nonconvex Nonsmooth Optimization, IJCAI 2019"
)
AAAI = (
    "Huang, Gu, Huo, Chen & Huang, Faster Gradient-Free Proximal Stochastic Methods for Nonconvex "
    "Nonsmooth Optimization, AAAI 2019 (baseline of IJCAI 2019, section 6)"
)
COMPOSITE = frozenset({"composite"})
#: hyper-parameters for the contract kit's small, well-conditioned composite problems: the papers' fixed steps (the
#: kit checks a fixed cost per step, which the backtracking of steps="auto" does not have;
#: tests/test_admm_auto.py runs the kit's other checks on steps="auto")
CONTRACT = {"eta": 0.5, "rho": 1.0, "b": 4, "mu": 1e-4, "rank_check": "ignore", "steps": "paper"}
CONTRACT_PROX = {"eta": 0.1, "b": 4, "mu": 1e-4, "steps": "paper"}
_SOLVERS = "zoframe_admm.solvers:"
_PROBLEMS = "zoframe_admm.problems:"


@hookimpl
def zoframe_solvers() -> Sequence[SolverSpec]:
    return [
        SolverSpec("zo-svrg-admm", _SOLVERS + "ZOSVRGADMM", "ZO stochastic ADMM with SVRG variance reduction and CooSGE (Alg. 1)",
                   IJCAI, COMPOSITE, contract_params=CONTRACT, default_for=COMPOSITE),
        SolverSpec("zo-saga-admm", _SOLVERS + "ZOSAGAADMM", "ZO stochastic ADMM with SAGA variance reduction and CooSGE (Alg. 2)",
                   IJCAI, COMPOSITE, contract_params=CONTRACT),
        SolverSpec("zo-admm", _SOLVERS + "ZOADMM", "ZO ADMM with the full CooSGE gradient every step (baseline, iteration 5)",
                   IJCAI, COMPOSITE, contract_params=CONTRACT),
        SolverSpec("zo-sgd-admm", _SOLVERS + "ZOSGDADMM", "ZO stochastic ADMM without variance reduction (baseline)",
                   IJCAI, COMPOSITE, contract_params=CONTRACT),
        SolverSpec("zo-prox-svrg", _SOLVERS + "ZOProxSVRG", "ZO proximal SVRG with CooSGE, no splitting (baseline)",
                   AAAI, COMPOSITE, contract_params=CONTRACT_PROX),
        SolverSpec("zo-prox-saga", _SOLVERS + "ZOProxSAGA", "ZO proximal SAGA with CooSGE, no splitting (baseline)",
                   AAAI, COMPOSITE, contract_params=CONTRACT_PROX),
    ]


@hookimpl
def zoframe_problems() -> Sequence[ProblemSpec]:
    return [
        ProblemSpec("fused-lasso", _PROBLEMS + "FusedLasso",
                    "robust black-box classification, correntropy loss + graph-guided fused lasso (eq. 8)",
                    IJCAI, "composite",
                    parameters={"dataset": "a9a | w8a | 20news (a9a)", "n_samples": "subsample before the split (all)",
                                "tau1": "1e-5", "tau2": "1e-5", "sigma": "correntropy width (1.0)",
                                "group": "20news group against the rest (1)", "seed": "split seed (0)"}),
        ProblemSpec("fused-lasso-toy", _PROBLEMS + "FusedLassoToy",
                    "least squares + l1 + fused l1 with a cvxpy-checkable solution (tests)",
                    "(test problem)", "composite",
                    parameters={"dim": "8", "n": "60", "tau1": "0.05", "tau2": "0.05", "noise": "0.05", "seed": "0"}),
        ProblemSpec("structured-attack", _PROBLEMS + "StructuredAttack",
                    "universal perturbation vs a black-box 8x8-digits MLP, overlapping 3x3 group lasso (eq. 9)",
                    IJCAI, "composite",
                    parameters={"n": "images attacked (20)", "target": "digit class (3)", "tau1": "1.0",
                                "tau2": "2.0", "kernel": "group window (3)", "seed": "0"}),
    ]


@hookimpl
def zoframe_reproductions() -> Sequence[ReproductionSpec]:
    return [ReproductionSpec("admm", "Figures 1-4 of the ZO-ADMM paper: fused lasso and structured attack",
                             IJCAI, "zoframe_admm.reproduce:add_arguments", "zoframe_admm.reproduce:run")]
