"""Verification for zoframe: cvxpy reference solutions, stationarity reports, convergence-rate studies.

Python API::

    from zoframe_verify import verify, reference_solution, rate_study, fit_loglog
    report = verify(problem, result)          # a Report: .measures, .to_text(), .to_json()
    ref = reference_solution(problem)         # x*, f*, duals, solver and versions (cached)
    study = rate_study("zo-sgd", "quadratic", seeds=5, budget=2000, measure="grad_norm_sq")

Command line: ``zoframe verify RESULT --problem NAME``, ``zoframe solve ... --verify`` and
``zoframe rate SOLVER PROBLEM --seeds N --budget T``. cvxpy is imported only inside this package.

The public names are imported on first access (module ``__getattr__``), so importing the package
(which loading its hook module :mod:`zoframe_verify.plugin` does) imports none of its submodules.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from zoframe._lazy import lazy_exports

if TYPE_CHECKING:
    from zoframe_verify.checks import (
        ADMMReport,
        FiniteSumReport,
        KKTReport,
        MinimaxReport,
        PenaltyReport,
        admm_report,
        finite_sum_report,
        kkt_report,
        minimax_report,
        penalty_report,
    )
    from zoframe_verify.rates import THEORY, SlopeFit, TheoryRate, compare, fit_loglog, running_curve, theory_for
    from zoframe_verify.reference import CvxpyModel, ReferenceSolution, ReferenceSolveError, reference_solution
    from zoframe_verify.study import RateReport, RunRecord, RunStore, StudyConfig, rate_study
    from zoframe_verify.verify import Report, verify

#: public name -> the submodule that defines it
_SOURCES: dict[str, str] = {
    **dict.fromkeys(
        ("ADMMReport", "FiniteSumReport", "KKTReport", "MinimaxReport", "PenaltyReport", "admm_report",
         "finite_sum_report", "kkt_report", "minimax_report", "penalty_report"),
        "checks",
    ),
    **dict.fromkeys(("THEORY", "SlopeFit", "TheoryRate", "compare", "fit_loglog", "running_curve", "theory_for"),
                    "rates"),
    **dict.fromkeys(("CvxpyModel", "ReferenceSolution", "ReferenceSolveError", "reference_solution"), "reference"),
    **dict.fromkeys(("RateReport", "RunRecord", "RunStore", "StudyConfig", "rate_study"), "study"),
    **dict.fromkeys(("Report", "verify"), "verify"),
}


__getattr__, __dir__ = lazy_exports(__name__, _SOURCES)


class _Package(types.ModuleType):
    """The package's module type: the public ``verify`` stays the function.

    Importing the submodule :mod:`zoframe_verify.verify` (directly, or through the command line) makes
    Python bind it as the package attribute ``verify``; this keeps the function of that name instead,
    as ``from zoframe_verify import verify`` promises (``from zoframe_verify.verify import ...`` still
    reaches the submodule).
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and value.__name__ == f"{self.__name__}.{name}" and name in _SOURCES:
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

__all__ = [
    "THEORY",
    "ADMMReport",
    "CvxpyModel",
    "FiniteSumReport",
    "KKTReport",
    "MinimaxReport",
    "PenaltyReport",
    "RateReport",
    "ReferenceSolution",
    "ReferenceSolveError",
    "Report",
    "RunRecord",
    "RunStore",
    "SlopeFit",
    "StudyConfig",
    "TheoryRate",
    "admm_report",
    "compare",
    "finite_sum_report",
    "fit_loglog",
    "kkt_report",
    "minimax_report",
    "penalty_report",
    "rate_study",
    "reference_solution",
    "running_curve",
    "theory_for",
    "verify",
]
