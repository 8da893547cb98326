"""zoframe: zeroth-order optimisation with plugins and empirical verification.

Quick use::

    import numpy as np, zoframe
    prob = zoframe.FiniteSum(lambda X: ((X - 1.0) ** 2).sum(axis=1), x0=np.zeros(10))
    res = zoframe.minimize(prob, "zo-sgd", rng=0, max_iter=500, eta=0.05)
    print(res.x, res.fun, res.nfev)
"""

from __future__ import annotations

import logging
from typing import Any

from zoframe import measures, penalties, plot, sets
from zoframe.asktell import ProblemShape, Request, Run
from zoframe.driver import IterationInfo, RunFailedError, make_rng, minimize
from zoframe.errors import (
    BudgetExhausted,
    DivergedError,
    DuplicatePluginError,
    EstimatorUnderflowWarning,
    IncompatibleProblemError,
    InvalidInputError,
    InvalidParameterError,
    NonFiniteValueError,
    PluginError,
    ShapeError,
    UnknownNameError,
    ZoframeError,
)
from zoframe.estimators import CoordinateEstimator, Estimate, GaussianEstimator, SphereEstimator
from zoframe.hooks import hookimpl
from zoframe.oracle import CountingOracle, MonitorOracle
from zoframe.problems import Composite, Constrained, FiniteSum, Minimax
from zoframe.registry import AmbiguousNameError, Registry, default_registry
from zoframe.result import Result, Status, Trace
from zoframe.specs import EstimatorSpec, ProblemSpec, SolverSpec, param

__version__ = "0.1.0"

#: imported on first use (``zoframe.noise``, ``zoframe.estimate_noise``, ``zoframe.imperfect``, ...): the names and
#: the submodules they come from
_LAZY = {"noise": "", "imperfect": "", "estimate_noise": "noise", "noise_from_line": "noise", "NoiseEstimate": "noise"}


def __getattr__(name: str) -> Any:
    import importlib

    if name not in _LAZY:
        raise AttributeError(f"module 'zoframe' has no attribute {name!r}")
    source = _LAZY[name]
    value = importlib.import_module(f"zoframe.{source or name}")
    if source:
        value = getattr(value, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


# notices go to the logger "zoframe" (zoframe._output); silent until the application configures logging
logging.getLogger("zoframe").addHandler(logging.NullHandler())

__all__ = [
    "AmbiguousNameError",
    "BudgetExhausted",
    "Composite",
    "Constrained",
    "CoordinateEstimator",
    "CountingOracle",
    "DivergedError",
    "DuplicatePluginError",
    "Estimate",
    "EstimatorSpec",
    "EstimatorUnderflowWarning",
    "FiniteSum",
    "GaussianEstimator",
    "IncompatibleProblemError",
    "InvalidInputError",
    "InvalidParameterError",
    "IterationInfo",
    "Minimax",
    "MonitorOracle",
    "NoiseEstimate",
    "NonFiniteValueError",
    "PluginError",
    "ProblemShape",
    "ProblemSpec",
    "Registry",
    "Request",
    "Result",
    "Run",
    "RunFailedError",
    "ShapeError",
    "SolverSpec",
    "SphereEstimator",
    "Status",
    "Trace",
    "UnknownNameError",
    "ZoframeError",
    "__version__",
    "default_registry",
    "estimate_noise",
    "hookimpl",
    "imperfect",
    "make_rng",
    "measures",
    "minimize",
    "noise",
    "noise_from_line",
    "param",
    "penalties",
    "plot",
    "sets",
]
