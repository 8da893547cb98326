"""Hook implementations of the ``peers`` plugin: scipy, pycma and nevergrad optimisers as solvers."""

from __future__ import annotations

from collections.abc import Sequence

from zoframe import hookimpl
from zoframe.specs import SolverSpec


@hookimpl
def zoframe_solvers() -> Sequence[SolverSpec]:
    from zoframe_peers.solvers import CMAES, COBYLA, COBYQA, NelderMead, NGCobyla, NGOpt, Powell

    both = frozenset({"finite_sum", "constrained"})
    fsum = frozenset({"finite_sum"})
    return [
        SolverSpec("cobyla", COBYLA, "peer: scipy's COBYLA (linear models, constraints), one point = n + m evaluations",
                   "Powell, A direct search optimization method that models the objective and constraint functions "
                   "by linear interpolation, 1994; scipy.optimize (PRIMA)", both),
        SolverSpec("cobyqa", COBYQA, "peer: scipy's COBYQA (quadratic models, SQP trust region)",
                   "Ragonneau & Zhang, COBYQA, 2023; scipy.optimize", both),
        SolverSpec("nelder-mead", NelderMead, "peer: scipy's Nelder-Mead simplex (unconstrained, bounds)",
                   "Nelder & Mead, A simplex method for function minimization, Comput. J. 1965; scipy.optimize",
                   fsum),
        SolverSpec("powell", Powell, "peer: scipy's Powell conjugate directions (unconstrained, bounds)",
                   "Powell, An efficient method for finding the minimum of a function of several variables "
                   "without calculating derivatives, Comput. J. 1964; scipy.optimize", fsum),
        SolverSpec("cma-es", CMAES, "peer: pycma's CMA-ES, augmented Lagrangian for constraints (extra 'peers')",
                   "Hansen & Ostermeier, Evol. Comput. 2001; Atamna, Auger & Hansen, GECCO 2020 (AL); pycma",
                   both),
        SolverSpec("ngopt", NGOpt, "peer: nevergrad's NGOpt algorithm selector (extra 'peers')",
                   "Meunier et al., Black-box optimization revisited, IEEE TEVC 2022; nevergrad", both,
                   # under 1000 points NGOpt picks its MetaModel, which fails on numpy >= 2.4 (nevergrad 1.0.12)
                   contract_params={"maxfev": 1000}),
        SolverSpec("ng-cobyla", NGCobyla, "peer: nevergrad's Cobyla (extra 'peers')",
                   "Powell 1994 through nevergrad (Rapin & Teytaud 2018)", both),
    ]
