"""ZO-SGD (Ghadimi and Lan 2013) and ZO-signSGD (Liu et al. 2019)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

import numpy as np

from zoframe.errors import InvalidParameterError
from zoframe.estimators import GaussianEstimator, SphereEstimator
from zoframe.oracle import CountingOracle
from zoframe.protocols import Array, Estimator
from zoframe.solver import SolverBase, check_batch, check_int, check_positive
from zoframe.specs import param


@dataclass(frozen=True)
class SGDState:
    """Iterate of ZO-SGD / ZO-signSGD."""

    x: Array


def _minibatch(oracle: CountingOracle, batch: int | None, rng: np.random.Generator) -> Any:
    if batch is None or batch >= oracle.n:
        return None  # all components
    return oracle.sample(batch, rng)


Evaluate = Callable[[Array, Any], Array]
OracleGradient = Callable[[Evaluate, Any, Array, np.random.Generator], Array]


def _estimate_grad(est: Estimator, evaluate: Evaluate, idx: Any, x: Array, rng: np.random.Generator) -> Array:
    grad: Array = est.estimate(lambda X: evaluate(X, idx), x, rng).grad
    return grad


def _gradient_at(solver: SolverBase) -> tuple[OracleGradient, bool]:
    """``evaluate, idx, x, rng -> estimate(X -> evaluate(X, idx), x, rng).grad`` for the solver's
    estimator (built once per solver), and whether ``evaluate`` may be the oracle's ``objective_owned``.

    The plain random-direction estimators compute that gradient alone
    (:meth:`GaussianEstimator.oracle_gradient`: the same numbers without the rest of the
    :class:`~zoframe.estimators.Estimate`) from a fresh matrix of points that they only read after
    the call, so the oracle may keep it; any other estimator is asked through ``estimate``, with
    its points copied by ``objective``.
    """
    cache = solver.__dict__  # frozen dataclasses still have an instance dict
    found: tuple[OracleGradient, bool] | None = cache.get("_gradient_at")
    if found is None:
        est = solver.gradient_estimator()
        if isinstance(est, (GaussianEstimator, SphereEstimator)) and est.plain_estimate:
            found = est.oracle_gradient, True
        else:
            found = partial(_estimate_grad, est), False
        cache["_gradient_at"] = found
    return found


@dataclass(frozen=True)
class ZOSGD(SolverBase):
    """Zeroth-order (projected) SGD.

    Ghadimi & Lan, *Stochastic first- and zeroth-order methods for nonconvex stochastic
    programming*, SIAM J. Optim. 2013 (the randomized stochastic gradient-free method, RSGF):

    1. draw a mini-batch ``I`` of components and the directions of the estimator;
    2. ``G = G_mu(f_I; x_t)`` (one batched oracle call);
    3. ``x_{t+1} = Proj_X(x_t - eta G)`` (projection only when the problem has a simple set).
    """

    problem_kinds: ClassVar[frozenset[str]] = frozenset({"finite_sum"})
    eta: float = param(1e-2, symbol="eta", doc="step size")
    q: int = param(10, symbol="q", doc="random directions per estimate (default estimator)")
    mu: float = param(1e-3, symbol="mu", doc="smoothing radius (default estimator)")
    batch: int | None = param(None, symbol="|I|", doc="components per iteration (None: all n)")
    estimator: Estimator | None = param(None, doc="gradient estimator (default: gaussian(q, mu))")

    def __post_init__(self) -> None:
        check_positive("eta", self.eta, "eta")
        check_int("q", self.q)
        check_positive("mu", self.mu, "mu")

    def validate(self, oracle: CountingOracle) -> None:
        if self.batch is not None:
            check_batch("batch", self.batch, oracle.n, "components")

    def init(self, oracle: CountingOracle, x0: Array, rng: np.random.Generator) -> SGDState:
        x = x0 if oracle.feasible_set is None else oracle.feasible_set.project(x0)
        return SGDState(x=np.array(x, dtype=np.float64, copy=True))

    def step(self, oracle: CountingOracle, state: SGDState, rng: np.random.Generator) -> SGDState:
        batch = self.batch
        idx = None if batch is None or batch >= oracle.n else oracle.sample(batch, rng)  # l.1 (None: all n)
        x = state.x
        gradient_at, owned = self.__dict__.get("_gradient_at") or _gradient_at(self)
        g = gradient_at(oracle.objective_owned if owned else oracle.objective, idx, x, rng)  # l.2
        x = x - self.eta * g  # l.3
        fs = oracle.feasible_set
        if fs is not None:
            x = fs.project(x)
        return SGDState(x)


@dataclass(frozen=True)
class ZOSignSGD(SolverBase):
    """ZO-signSGD.

    Liu, Chen, Chen & Hong, *signSGD via zeroth-order oracle*, ICLR 2019, Algorithm 1:

    1. draw a mini-batch ``I`` and ``q`` directions uniform on the sphere;
    2. ``G = (d/q) sum_k (f_I(x + mu u_k) - f_I(x)) / mu * u_k`` (one batched oracle call);
    3. ``x_{t+1} = x_t - eta sign(G)`` (projected when the problem has a simple set).
    """

    problem_kinds: ClassVar[frozenset[str]] = frozenset({"finite_sum"})
    eta: float = param(1e-2, symbol="delta", doc="step size of the sign step")
    q: int = param(10, symbol="q", doc="random directions per estimate")
    mu: float = param(5e-3, symbol="mu", doc="smoothing radius")
    batch: int | None = param(None, symbol="b", doc="components per iteration (None: all n)")
    decay: bool = param(False, doc="use eta / sqrt(t + 1) instead of a constant step")
    estimator: Estimator | None = param(None, doc="gradient estimator (default: sphere(q, mu))")

    def __post_init__(self) -> None:
        check_positive("eta", self.eta, "delta")
        check_int("q", self.q)
        check_positive("mu", self.mu, "mu")
        if not isinstance(self.decay, bool):
            raise InvalidParameterError("decay must be True or False")

    def default_estimator(self) -> Estimator:
        return SphereEstimator(q=self.q, mu=self.mu)

    def validate(self, oracle: CountingOracle) -> None:
        if self.batch is not None:
            check_batch("batch", self.batch, oracle.n, "components")

    def init(self, oracle: CountingOracle, x0: Array, rng: np.random.Generator) -> SignState:
        x = x0 if oracle.feasible_set is None else oracle.feasible_set.project(x0)
        return SignState(x=np.array(x, dtype=np.float64, copy=True), t=0)

    def step(self, oracle: CountingOracle, state: SignState, rng: np.random.Generator) -> SignState:
        idx = _minibatch(oracle, self.batch, rng)  # l.1
        gradient_at, owned = self.__dict__.get("_gradient_at") or _gradient_at(self)
        g = gradient_at(oracle.objective_owned if owned else oracle.objective, idx, state.x, rng)  # l.2
        eta = self.eta / np.sqrt(state.t + 1.0) if self.decay else self.eta
        x = state.x - eta * np.sign(g)  # l.3
        if oracle.feasible_set is not None:
            x = oracle.feasible_set.project(x)
        return SignState(x=x, t=state.t + 1)


@dataclass(frozen=True)
class SignState:
    """Iterate and iteration counter of ZO-signSGD."""

    x: Array
    t: int
