"""Helpers for solver authors: a base class with the optional methods, and estimator resolution."""

from __future__ import annotations

from collections.abc import Mapping
import math
from typing import Any, ClassVar

import numpy as np

from zoframe.errors import InvalidParameterError
from zoframe.estimators import GaussianEstimator
from zoframe.protocols import Array, Estimator
from zoframe.result import Status

__all__ = ["SolverBase", "StopReason", "check_batch", "check_int", "check_open_unit", "check_positive"]


class StopReason(str):
    """A ``terminate()`` message that ends the run with its own status instead of ``CONVERGED``.

    ``StopReason("restored a feasible point at the end of max_calls", Status.BUDGET)``: the run
    stops, but the status says that no stationarity test passed (so ``Result.success`` is False).
    """

    status: Status

    def __new__(cls, text: str, status: Status = Status.CONVERGED) -> StopReason:
        out = super().__new__(cls, text)
        out.status = status
        return out


class SolverBase:
    """Defaults for the optional parts of the :class:`~zoframe.protocols.Solver` protocol.

    Subclasses are frozen dataclasses; they set ``problem_kinds`` and implement ``init``/``step``.
    A field named ``estimator`` (``Estimator | None``) lets users swap the gradient estimator;
    :meth:`gradient_estimator` returns it, or the solver's default.

    ``estimator_only_params`` names the parameters that reach nothing but the default estimator
    (:meth:`default_estimator` reads ``q`` and ``mu``): ``minimize`` refuses them together with
    ``estimator=``, since they would be ignored. A solver that also uses one of them elsewhere
    (e.g. passes ``mu=self.mu`` to ``estimate``) removes it from this set.
    """

    problem_kinds: ClassVar[frozenset[str]] = frozenset()
    estimator_only_params: ClassVar[frozenset[str]] = frozenset({"q", "mu"})
    #: the solver takes equality constraints h(x) = 0 of a constrained problem (``oracle.m_eq > 0``);
    #: ``minimize`` refuses such a problem for the others
    handles_equalities: ClassVar[bool] = False

    def nonfinite_policy(self) -> str:
        """What ``nonfinite="auto"`` (the default of ``minimize``) means for this solver: ``"inf"`` when it steps
        back from a trial point whose value is NaN / inf (a line search shortens its step), ``"raise"`` when it
        cannot (fixed steps: the run stops with the point and the function named)."""
        return "raise"

    def outputs(self, state: Any) -> Mapping[str, Array]:
        return {"x": state.x}

    def terminate(self, state: Any) -> str | None:
        return None

    def validate(self, oracle: Any) -> None:
        return None

    def default_estimator(self) -> Estimator:
        q = int(getattr(self, "q", 10))
        mu = float(getattr(self, "mu", 1e-3))
        return GaussianEstimator(q=q, mu=mu)

    def gradient_estimator(self) -> Estimator:
        """The ``estimator`` field, or the default one (built once per solver instance)."""
        est = getattr(self, "estimator", None)
        if est is not None:
            return est  # type: ignore[no-any-return]
        cache = self.__dict__  # frozen dataclasses still have an instance dict
        if "_default_estimator" not in cache:
            cache["_default_estimator"] = self.default_estimator()
        return cache["_default_estimator"]  # type: ignore[no-any-return]


def check_positive(name: str, value: float, symbol: str | None = None) -> None:
    """Raise unless ``value`` is a finite number > 0."""
    if not (isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(value) and value > 0):
        sym = f" ({symbol})" if symbol else ""
        raise InvalidParameterError(f"{name}{sym} must be a finite number > 0, got {value!r}")


def check_open_unit(name: str, value: float, symbol: str | None = None) -> None:
    """Raise unless ``0 < value < 1``."""
    if not (isinstance(value, (int, float, np.integer, np.floating)) and 0 < value < 1):
        sym = f" ({symbol})" if symbol else ""
        raise InvalidParameterError(f"{name}{sym} must lie strictly between 0 and 1, got {value!r}")


def check_int(name: str, value: int, minimum: int = 1) -> None:
    """Raise unless ``value`` is an integer >= ``minimum``."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
        raise InvalidParameterError(f"{name} must be an integer >= {minimum}, got {value!r}")


def check_batch(name: str, batch: int, population: int, what: str) -> None:
    """Raise when a mini-batch (drawn without replacement) is larger than what it draws from."""
    check_int(name, batch)
    if batch > population:
        raise InvalidParameterError(
            f"{name}={batch} is larger than the number of {what} ({population}); use a batch of at "
            f"most {population}"
        )
