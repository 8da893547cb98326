"""Hook implementations of the ``peers`` plugin: scipy, pycma, nevergrad, Py-BOBYQA and DFO-LS optimisers
as solvers, and the hand-written forms of nested minimax and proximal-gradient peers.

Classes are named by ``"module:attr"`` references, imported when a solver is first used, so listing
(``zoframe list``, ``zoframe --help``) imports none of :mod:`zoframe_peers.solvers`,
:mod:`zoframe_peers.smooth`, :mod:`zoframe_peers.composite`, scipy.optimize, pycma, nevergrad, Py-BOBYQA
or DFO-LS.
"""

from __future__ import annotations

from collections.abc import Sequence

from zoframe import hookimpl
from zoframe.specs import SolverSpec

_S = "zoframe_peers.solvers:"
_SM = "zoframe_peers.smooth:"
_C = "zoframe_peers.composite:"


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
        SolverSpec("lbfgsb-fd", _SM + "LBFGSBFD", "peer: scipy's L-BFGS-B on forward-difference gradients (one batch "
                   "of d points per gradient; bounds)",
                   "Byrd, Lu, Nocedal & Zhu, A limited memory algorithm for bound constrained optimization, SIAM J. "
                   "Sci. Comput. 1995; Zhu et al., ACM TOMS 1997; scipy.optimize", fsum),
        SolverSpec("pybobyqa", _SM + "PyBOBYQA", "peer: Py-BOBYQA, quadratic models in a trust region (bounds, noisy "
                   "mode; extra 'pybobyqa')",
                   "Cartis, Fiala, Marteau & Roberts, Improving the flexibility and robustness of model-based "
                   "derivative-free optimization solvers, ACM TOMS 2019; Powell, BOBYQA, 2009", fsum),
        SolverSpec("nested-lbfgsb-fd", _SM + "NestedLBFGSBFD", "peer: nested minimax, L-BFGS-B on forward differences "
                   "of Phi(x) = max_y F(x, y), each value an inner maximisation over y",
                   "Byrd, Lu, Nocedal & Zhu, SIAM J. Sci. Comput. 1995 (L-BFGS-B, outer and inner); Birgin, "
                   "Martinez & Raydan, SIAM J. Optim. 2000 (projected inner ascent); scipy.optimize",
                   frozenset({"minimax"})),
        SolverSpec("dfols", _C + "DFOLS", "peer: DFO-LS, derivative-free Gauss-Newton on the residuals with the "
                   "penalty as its regulariser (composite, y = x + e; extra 'dfols')",
                   "Cartis, Fiala, Marteau & Roberts, ACM TOMS 2019 (DFO-LS); Liu, Lam & Roberts, Regularized "
                   "black-box optimization algorithms for least-squares problems, IMA J. Numer. Anal. 2025", frozenset({"composite"}),
                   # DFO-LS's regularised steps cost about 0.1 s each at 500 S-FISTA iterations: lighter in the contract runs
                   contract_params={"sfista_iters": 100}),
        SolverSpec("prox-fd", _C + "ProxFD", "peer: FISTA with backtracking on forward-difference gradients of the "
                   "smooth part, prox of sum_j psi_j(M_j x + e_j) (composite, y = M x + e)",
                   "Beck & Teboulle, A fast iterative shrinkage-thresholding algorithm for linear inverse problems, "
                   "SIAM J. Imaging Sci. 2009 (FISTA, backtracking); Beck & Teboulle, IEEE TIP 2009 (monotone FISTA)",
                   frozenset({"composite"})),
    ]
