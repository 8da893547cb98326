"""Hook implementations of zoframe_constrained: the solvers ``dszog``, ``adszog``, their problems and the
``constrained-small`` suite.

Classes are named by ``"module:attr"`` references, imported when a component is first used.
"""

from __future__ import annotations

from collections.abc import Sequence

from zoframe import hookimpl
from zoframe.specs import ProblemSpec, SolverSpec, SuiteSpec

_REF_ICML = (
    "Shi, Gao & Gu, Gradient-free method for heavily constrained nonconvex optimization, ICML 2022, Algorithm 1"
)
_REF_ICLR = "Shi, Gao & Gu, ICLR 2022 submission (doubly stochastic zeroth-order gradient), Algorithm 1"

#: small batches for the contract kit's smoke problem (n = 8 components, m = 6 constraints), with the
#: papers' fixed steps: the kit checks a fixed cost per step, which the backtracking of steps="auto"
#: does not have (tests/test_constrained_robust.py runs the kit's other checks on steps="auto")
_CONTRACT = {"M1": 4, "M2": 4, "M3": 3, "q": 5, "beta": 10.0, "steps": "paper"}


@hookimpl
def zoframe_solvers() -> Sequence[SolverSpec]:
    return [
        SolverSpec(
            name="dszog",
            cls="zoframe_constrained.solvers:DSZOG",
            summary="doubly stochastic ZO gradient on the penalty minimax over the simplex of constraints",
            reference=_REF_ICLR,
            problem_kinds=frozenset({"constrained"}),
            contract_params={**_CONTRACT, "eta_w": 0.05, "eta_p": 0.01},
        ),
        SolverSpec(
            name="adszog",
            cls="zoframe_constrained.solvers:ADSZOG",
            summary="DSZOG with exponential moving averages and adaptive steps (ICML 2022 DSZOG)",
            reference=_REF_ICML,
            problem_kinds=frozenset({"constrained"}),
            contract_params={**_CONTRACT, "eta_w": 0.05, "eta_p": 0.01, "a": 0.9, "b": 0.5},
            default_for=frozenset({"constrained"}),
        ),
    ]


_PAIRWISE_PARAMS = {
    "dataset": "LIBSVM name (a9a, w8a, svmguide3, ...), 'gen' or 'breast-cancer' (a9a)",
    "n_samples": "samples drawn before the 50/30/20 split (1000)",
    "seed": "seed of the draw and the split (0)",
    "loss_c": "width c of the correntropy loss (1.0)",
    "margin": "margin of the pair constraints (0.0, as in the paper)",
    "kernel": "None or 'rbf' (appendix B.2)",
    "gamma": "RBF width (default 1/(d var(X)))",
    "landmarks": "RBF landmarks from the training split (100)",
    "black_box_constraints": "False exposes D w <= e for projection baselines (True)",
}


@hookimpl
def zoframe_problems() -> Sequence[ProblemSpec]:
    return [
        ProblemSpec(
            name="pairwise",
            factory="zoframe_constrained.problems:pairwise",
            summary="correntropy-loss classification with one constraint per (positive, negative) training pair",
            reference="Shi, Gao & Gu, ICML 2022, Section 6.2, eq. (23), Table 2",
            kind="constrained",
            parameters=_PAIRWISE_PARAMS,
        ),
        ProblemSpec(
            name="gen",
            factory="zoframe_constrained.problems:gen",
            summary="pairwise problem on the synthetic 'gen' set (50 features, ~62k constraints)",
            reference="Shi, Gao & Gu, ICML 2022, Table 4 ('gen')",
            kind="constrained",
            parameters={k: v for k, v in _PAIRWISE_PARAMS.items() if k != "dataset"},
        ),
        ProblemSpec(
            name="fairness",
            factory="zoframe_constrained.problems:fairness",
            summary="hinge-loss classification under Zafar et al. covariance constraints (synthetic D1-D4)",
            reference="Shi, Gao & Gu, ICML 2022, Section 6.2, eq. (24), Tables 3 and 5; Zafar et al., WWW 2017",
            kind="constrained",
            parameters={
                "dataset": "D1, D2, D3 or D4 (Table 5 sizes) (D1)",
                "seed": "seed of the generator and the split (0)",
                "c": "covariance threshold (0.1; the paper does not give it)",
                "n_samples": "samples generated (2000)",
                "kernel": "None or 'rbf' (appendix B.2)",
                "gamma": "RBF width (default 1/(d var(X)))",
                "landmarks": "RBF landmarks from the training split (100)",
            },
        ),
    ]


@hookimpl
def zoframe_suites() -> Sequence[SuiteSpec]:
    return [
        SuiteSpec(
            name="constrained-small",
            summary="53 small nonlinear constrained test problems with known optima (Hock-Schittkowski 1981, "
                    "Schittkowski 1987, CEC 2006) and seeded random convex QPs / QCQPs solved by cvxpy",
            reference="Hock & Schittkowski, LNEMS 187, 1981; Schittkowski, LNEMS 282, 1987; Liang et al., CEC 2006",
            instances="zoframe_constrained.suite:instances",
            parameters={"seed": "seed of the random convex instances (0)",
                        "random": "random convex instances, half QPs, half QCQPs (12)"},
        )
    ]
