"""Exceptions raised by zoframe.

Every error says what went wrong, why, and what to do about it. They all derive from
:class:`ZoframeError`, so ``except zoframe.ZoframeError`` catches anything the framework raises on
purpose; most also derive from the built-in exception a Python user would expect (``ValueError``,
``KeyError``, ...).
"""

from __future__ import annotations

from collections.abc import Sequence
import difflib


class ZoframeError(Exception):
    """Base class of every error zoframe raises on purpose."""


class InvalidInputError(ZoframeError, ValueError):
    """An argument, a shape or a value supplied by the user is not acceptable."""


class InvalidParameterError(InvalidInputError):
    """A solver or estimator hyper-parameter is out of its valid range."""


class ShapeError(InvalidInputError):
    """An array has the wrong shape (an input point or a user function's output)."""


class NonFiniteValueError(ZoframeError, FloatingPointError):
    """A user function returned NaN or infinity under the ``nonfinite="raise"`` policy."""


class DivergedError(ZoframeError, FloatingPointError):
    """A solver's iterate or merit value blew up (non-finite or beyond a stated bound).

    A solver raises it from ``step``; the driver ends the run with status ``DIVERGED``,
    ``success=False``, and keeps the last finite best point in ``Result.x_best``.
    """


class BudgetExhausted(ZoframeError):
    """Raised by the oracle *before* an evaluation that would exceed ``max_calls``.

    The driver catches it and ends the run with status ``BUDGET``; nothing past the budget is
    ever evaluated.
    """

    def __init__(self, requested: int, used: int, limit: int) -> None:
        self.requested = requested
        self.used = used
        self.limit = limit
        super().__init__(
            f"the oracle budget is exhausted: {used} of max_calls={limit} evaluations used and the "
            f"next batch needs {requested}; raise max_calls to continue"
        )


class IncompatibleProblemError(ZoframeError, TypeError):
    """A solver was asked to run on a problem kind it does not accept."""


class PluginError(ZoframeError):
    """A plugin failed to load or is inconsistent with the others."""


class DuplicatePluginError(PluginError):
    """Two plugins register a component under the same name."""


class UnknownNameError(ZoframeError, KeyError):
    """A solver, estimator, problem or dataset name that nobody registered."""

    def __init__(self, kind: str, name: str, known: Sequence[str]) -> None:
        self.kind = kind
        self.name = name
        self.known = sorted(known)
        close = difflib.get_close_matches(name, self.known, n=3, cutoff=0.5)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        listing = ", ".join(self.known) if self.known else "(none registered)"
        self.message = f"unknown {kind} {name!r}.{hint} Known {kind}s: {listing}."
        super().__init__(self.message)

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return self.message


class DataNotFoundError(ZoframeError, FileNotFoundError):
    """A dataset file is missing; the message says where to put it and where to get it."""


class DataFormatError(ZoframeError, ValueError):
    """A dataset file is malformed; the message names the file and the line."""


class ChecksumError(ZoframeError, ValueError):
    """A dataset file does not match its known SHA256 checksum."""


class EstimatorUnderflowWarning(UserWarning):
    """A gradient estimator's finite differences underflowed: the estimate is exactly zero.

    Issued once per estimator when every difference ``F(x + mu u) - F(x)`` is exactly 0 because
    ``mu`` is too small for the floating-point resolution of ``x`` or of the function values (for
    instance ``mu=1e-300``): the solver would otherwise run on a zero gradient and never move.
    """


class CheckpointError(ZoframeError):
    """A checkpoint cannot be written or does not match the run it should resume."""
