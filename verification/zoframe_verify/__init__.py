"""Verification for zoframe: cvxpy reference solutions, stationarity reports, convergence-rate studies.

Python API::

    from zoframe_verify import verify, reference_solution, rate_study, fit_loglog
    report = verify(problem, result)          # a Report: .measures, .to_text(), .to_json()
    ref = reference_solution(problem)         # x*, f*, duals, solver and versions (cached)
    study = rate_study("zo-sgd", "quadratic", seeds=5, budget=2000, measure="grad_norm_sq")

Command line: ``zoframe verify RESULT --problem NAME``, ``zoframe solve ... --verify`` and
``zoframe rate SOLVER PROBLEM --seeds N --budget T``. cvxpy is imported only inside this package.
"""

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
