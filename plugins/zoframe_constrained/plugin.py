"""Hook implementations of zoframe_constrained: the solvers ``dszog``, ``adszog`` and their problems."""

from __future__ import annotations

from collections.abc import Sequence

from zoframe import hookimpl
from zoframe.specs import SolverSpec
from zoframe_constrained.solvers import ADSZOG, DSZOG

_REF_ICML = (
    "Shi, Gao & Gu, Gradient-free method for heavily constrained nonconvex optimization, ICML 2022, Algorithm 1"
)
_REF_ICLR = "Shi, Gao & Gu, ICLR 2022 submission (doubly stochastic zeroth-order gradient), Algorithm 1"

#: small batches for the contract kit's smoke problem (n = 8 components, m = 6 constraints)
_CONTRACT = {"M1": 4, "M2": 4, "M3": 3, "q": 5, "beta": 10.0}


@hookimpl
def zoframe_solvers() -> Sequence[SolverSpec]:
    return [
        SolverSpec(
            name="dszog",
            cls=DSZOG,
            summary="doubly stochastic ZO gradient on the penalty minimax over the simplex of constraints",
            reference=_REF_ICLR,
            problem_kinds=frozenset({"constrained"}),
            contract_params={**_CONTRACT, "eta_w": 0.05, "eta_p": 0.01},
        ),
        SolverSpec(
            name="adszog",
            cls=ADSZOG,
            summary="DSZOG with exponential moving averages and adaptive steps (ICML 2022 DSZOG)",
            reference=_REF_ICML,
            problem_kinds=frozenset({"constrained"}),
            contract_params={**_CONTRACT, "eta_w": 0.05, "eta_p": 0.01, "a": 0.9, "b": 0.5},
        ),
    ]
