"""A tiny ZO sign-SGD solver: ``x <- x - eta * sign(G(x))`` with any zoframe estimator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from zoframe import CountingOracle, InvalidParameterError, param
from zoframe.protocols import Array, Estimator
from zoframe_example.estimator import AntitheticEstimator


@dataclass(frozen=True)
class TinySignState:
    x: Array


@dataclass(frozen=True)
class TinySignSGD:
    """Sign descent on zeroth-order estimates (after Liu et al., signSGD via ZO oracle, ICLR 2019)."""

    problem_kinds: ClassVar[frozenset[str]] = frozenset({"finite_sum"})
    eta: float = param(0.01, symbol="eta", doc="step size")
    estimator: Estimator | None = param(None, doc="gradient estimator (default: antithetic)")

    def __post_init__(self) -> None:
        if not self.eta > 0:
            raise InvalidParameterError(f"eta must be > 0, got {self.eta!r}")

    def init(self, oracle: CountingOracle, x0: Array, rng: np.random.Generator) -> TinySignState:
        return TinySignState(x=np.array(x0, dtype=np.float64, copy=True))

    def step(self, oracle: CountingOracle, state: TinySignState, rng: np.random.Generator) -> TinySignState:
        est = self.estimator or AntitheticEstimator()
        g = est.estimate(lambda X: oracle.objective(X), state.x, rng).grad
        return TinySignState(x=state.x - self.eta * np.sign(g))
