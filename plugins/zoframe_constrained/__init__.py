"""zoframe_constrained: heavily constrained zeroth-order optimisation (Shi, Gao & Gu, ICML 2022).

Solvers ``dszog`` (plain, ICLR 2022 submission Alg. 1) and ``adszog`` (moving averages and adaptive
steps, ICML 2022 Alg. 1) on the penalty minimax over the simplex of constraints, with an exact
sparse form of the constraint distribution ``p`` (:mod:`zoframe_constrained.simplex`), as phased
solvers (:mod:`zoframe_constrained.solvers`): the penalty phase (:mod:`zoframe_constrained.penalty`), the
feasibility restoration (:mod:`zoframe_constrained.restoration`) and the precision phase
(:mod:`zoframe_constrained.precision`); problems ``pairwise``, ``gen`` and ``fairness``
(:mod:`zoframe_constrained.problems`). The projection / Frank-Wolfe baselines live in
``zoframe_constrained.baselines*``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zoframe._lazy import lazy_exports

if TYPE_CHECKING:
    from zoframe_constrained.penalty import ADSZOGState, DSZOGState
    from zoframe_constrained.problems import FairnessProblem, PairwiseProblem, fairness, gen, pairwise
    from zoframe_constrained.solvers import ADSZOG, DSZOG

#: public name -> the submodule that defines it (imported on first access: the solvers pull in
#: scipy.optimize, about 0.3 s, which loading the hook module for ``zoframe list`` must not pay)
_SOURCES: dict[str, str] = {
    **dict.fromkeys(("FairnessProblem", "PairwiseProblem", "fairness", "gen", "pairwise"), "problems"),
    **dict.fromkeys(("ADSZOG", "DSZOG"), "solvers"),
    **dict.fromkeys(("ADSZOGState", "DSZOGState"), "penalty"),
}


__getattr__, __dir__ = lazy_exports(__name__, _SOURCES)


__all__ = [
    "ADSZOG",
    "DSZOG",
    "ADSZOGState",
    "DSZOGState",
    "FairnessProblem",
    "PairwiseProblem",
    "fairness",
    "gen",
    "pairwise",
]
