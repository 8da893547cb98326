"""Hook implementations of zoframe_minimax: six solvers, two problems, one reproduction.

Classes are named by ``"module:attr"`` references, imported when a component is first used.
"""

from __future__ import annotations

from collections.abc import Sequence

from zoframe import hookimpl
from zoframe.specs import ProblemSpec, ReproductionSpec, SolverSpec

PAPER = (
    "Wang, Balasubramanian, Ma & Razaviyayn, Zeroth-Order Algorithms for Nonconvex-Strongly-Concave "
    "Minimax Problems with Improved Complexities, J. Global Optim. 2023 (arXiv:2001.07819)"
)
_MINIMAX = frozenset({"minimax"})
# the contract runs the defaults (steps="auto"); the stochastic forms with small batches of the smoke problem's
# n = 4 components (no refinement: the batches do not cover every component)
_CONTRACT_DET: dict[str, object] = {}
_CONTRACT_MSA: dict[str, object] = {}
_S = "zoframe_minimax.solvers:"


@hookimpl
def zoframe_solvers() -> Sequence[SolverSpec]:
    return [
        SolverSpec("zo-gda", _S + "ZOGDA", "zeroth-order gradient descent ascent (deterministic)", PAPER + ", Algorithm 1",
                   _MINIMAX, contract_params=_CONTRACT_DET),
        SolverSpec("zo-gdmsa", _S + "ZOGDMSA", "zeroth-order gradient descent multi-step ascent (deterministic)",
                   PAPER + ", Algorithm 2", _MINIMAX, contract_params=_CONTRACT_MSA,
                   default_for=_MINIMAX),
        SolverSpec("zo-sgda", _S + "ZOSGDA", "zeroth-order stochastic gradient descent ascent", PAPER + ", Algorithm 3",
                   _MINIMAX, contract_params={**_CONTRACT_DET, "batch1": 4, "batch2": 4}),
        SolverSpec("zo-sgdmsa", _S + "ZOSGDMSA", "zeroth-order stochastic gradient descent multi-step ascent",
                   PAPER + ", Algorithm 4", _MINIMAX, contract_params={**_CONTRACT_MSA, "batch1": 4, "batch2": 4}),
        SolverSpec("sgda", _S + "SGDA", "FIRST-ORDER stochastic gradient descent ascent (reference curves)",
                   "Lin, Jin & Jordan, ICML 2020; first-order counterpart in " + PAPER, _MINIMAX,
                   zeroth_order=False, contract_params={**_CONTRACT_DET, "batch1": 4, "batch2": 4}),
        SolverSpec("sgdmsa", _S + "SGDMSA", "FIRST-ORDER stochastic gradient descent multi-step ascent (reference curves)",
                   "Nouiehed et al., NeurIPS 2019; first-order counterpart in " + PAPER, _MINIMAX,
                   zeroth_order=False, contract_params={**_CONTRACT_MSA, "batch1": 4, "batch2": 4}),
    ]


@hookimpl
def zoframe_problems() -> Sequence[ProblemSpec]:
    return [
        ProblemSpec(
            name="ncsc",
            factory="zoframe_minimax.problems:NCSC",
            summary="synthetic nonconvex-strongly-concave minimax with known kappa and closed-form y*(x)",
            reference="(test problem for " + PAPER + ")",
            kind="minimax",
            parameters={"d1": "x dimension (10)", "d2": "y dimension (5)", "kappa": "condition number >= 2 (10)",
                        "n": "samples (1)", "noise": "sample noise (0.5)",
                        "y_set_name": "reals | box | ball | simplex (reals)", "seed": "0"},
        ),
        ProblemSpec(
            name="dro",
            factory="zoframe_minimax.problems:dro",
            summary="distributionally robust loss over the simplex on a LIBSVM dataset (section 5)",
            reference=PAPER + ", section 5",
            kind="minimax",
            parameters={"dataset": "a9a | mushrooms | w8a | colon-cancer | any LIBSVM binary set (a9a)",
                        "n": "samples (paper: a9a 200, mushrooms 100, w8a 100, colon-cancer all 62)",
                        "seed": "subsample seed (0)", "lam": "regulariser weight (10)"},
        ),
    ]


@hookimpl
def zoframe_reproductions() -> Sequence[ReproductionSpec]:
    return [ReproductionSpec("minimax", "Figure 1 of the ZO minimax paper: DRO, ZO-SGDA/ZO-SGDMSA vs SGDA/SGDMSA",
                             PAPER + ", section 5, Figure 1", "zoframe_minimax.reproduce:add_arguments",
                             "zoframe_minimax.reproduce:run")]
