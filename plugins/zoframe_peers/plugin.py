"""Hook implementations of the ``peers`` plugin: scipy, pycma and nevergrad optimisers as solvers.

Classes are named by ``"module:attr"`` references, imported when a solver is first used, so listing
(``zoframe list``, ``zoframe --help``) imports neither :mod:`zoframe_peers.solvers` nor scipy.optimize,
pycma or nevergrad.
"""

from __future__ import annotations

from collections.abc import Sequence

from zoframe import hookimpl
from zoframe.specs import SolverSpec

_S = "zoframe_peers.solvers:"


@hookimpl
def zoframe_solvers() -> Sequence[SolverSpec]:
    both = frozenset({"finite_sum", "constrained"})
    fsum = frozenset({"finite_sum"})
    return [
        SolverSpec("cobyla", _S + "COBYLA", "peer: scipy's COBYLA (linear models, constraints), one point = n + m evaluations",
                   "Powell, A direct search optimization method that models the objective and constraint functions "
                   "by linear interpolation, 1994; scipy.optimize (PRIMA)", both),
        SolverSpec("cobyqa", _S + "COBYQA", "peer: scipy's COBYQA (quadratic models, SQP trust region)",
                   "Ragonneau & Zhang, COBYQA, 2023; scipy.optimize", both),
        SolverSpec("slsqp-fd", _S + "SLSQPFD", "peer: scipy's SLSQP on forward-difference gradients of f and all "
                   "constraints (one batch of d points per gradient)",
                   "Kraft, A software package for sequential quadratic programming, DFVLR 1988; scipy.optimize", both),
        SolverSpec("trust-constr-fd", _S + "TrustConstrFD", "peer: scipy's trust-constr on forward-difference "
                   "gradients of f and all constraints",
                   "Byrd, Hribar & Nocedal, An interior point algorithm for large-scale nonlinear programming, SIAM J. "
                   "Optim. 1999; Lalee, Nocedal & Plantenga 1998; scipy.optimize", both),
        SolverSpec("nelder-mead", _S + "NelderMead", "peer: scipy's Nelder-Mead simplex (unconstrained, bounds)",
                   "Nelder & Mead, A simplex method for function minimization, Comput. J. 1965; scipy.optimize",
                   fsum),
        SolverSpec("powell", _S + "Powell", "peer: scipy's Powell conjugate directions (unconstrained, bounds)",
                   "Powell, An efficient method for finding the minimum of a function of several variables "
                   "without calculating derivatives, Comput. J. 1964; scipy.optimize", fsum),
        SolverSpec("cma-es", _S + "CMAES", "peer: pycma's CMA-ES, augmented Lagrangian for constraints (extra 'peers')",
                   "Hansen & Ostermeier, Evol. Comput. 2001; Atamna, Auger & Hansen, GECCO 2020 (AL); pycma",
                   both),
        SolverSpec("ngopt", _S + "NGOpt", "peer: nevergrad's NGOpt algorithm selector (extra 'peers')",
                   "Meunier et al., Black-box optimization revisited, IEEE TEVC 2022; nevergrad", both,
                   # under 1000 points NGOpt picks its MetaModel, which fails on numpy >= 2.4 (nevergrad 1.0.12)
                   contract_params={"maxfev": 1000}),
        SolverSpec("ng-cobyla", _S + "NGCobyla", "peer: nevergrad's Cobyla (extra 'peers')",
                   "Powell 1994 through nevergrad (Rapin & Teytaud 2018)", both),
    ]
