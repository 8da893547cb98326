"""ZO-SGD (Ghadimi and Lan 2013) and ZO-signSGD (Liu et al. 2019), as phased solvers.

``steps="paper"``: the papers' iterations exactly (fixed steps ``eta``, ZO-signSGD's optional ``eta /
sqrt(t + 1)``), bit for bit as before, with the divergence test of :class:`zoframe.phases.Runaway`.
``steps="auto"`` (default): the scale-free stochastic phase and the deterministic refinement of
:mod:`zoframe_basic.phases`, with their own stopping tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

import numpy as np

from zoframe.errors import InvalidParameterError
from zoframe.estimators import GaussianEstimator, SphereEstimator
from zoframe.oracle import CountingOracle
from zoframe.phases import Phase, PhasedSolver, check_divergence_limit
from zoframe.protocols import Array, Estimator
from zoframe.refine import RefineSettings
from zoframe.solver import SolverBase, check_batch, check_int, check_positive
from zoframe.specs import param
from zoframe_basic.phases import PaperPhase, RefinePhase, SampledRefinePhase, StochasticPhase, sampled


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



def _check_auto(solver: Any) -> None:
    """The parameters of ``steps="auto"`` (shared by both solvers)."""
    if solver.steps not in ("auto", "paper"):
        raise InvalidParameterError(
            f"steps must be 'auto' (scale-free line-search steps, a refinement, a stopping test) or 'paper' (the "
            f"paper's fixed steps eta), got {solver.steps!r}"
        )
    for name in ("gtol", "xtol"):
        v = getattr(solver, name)
        if v is not None:
            check_positive(name, v)
    check_positive("rtol", solver.rtol)
    if not isinstance(solver.refine, bool):
        raise InvalidParameterError(f"refine must be True or False, got {solver.refine!r}")
    check_divergence_limit(solver.divergence_limit)


def _auto_phases(solver: Any, oracle: CountingOracle, sign: bool) -> list[Phase]:
    """The stochastic phase (S1-S5 of :mod:`zoframe_basic.phases`), then the refinement when ``refine``.

    A sum that is not sampled (its first batch all ``n`` components: ``n < 200 (d + 1)`` by default) goes straight
    to the refinement when the solver's own estimator would run: there a random-direction step costs as much as a
    quasi-Newton iteration on forward differences and gains less (:func:`sampled`)."""
    user = solver.estimator is not None
    settings = RefineSettings(gtol=solver.gtol, xstep=solver.xtol, rtol=float(solver.rtol), estimate_noise=True)
    if solver.refine and not user and not sampled(solver.batch, oracle):
        return [RefinePhase("refinement", settings)]
    est = solver.estimator if user else solver.default_estimator()
    stoch = StochasticPhase(
        name="stochastic phase", sign=sign, estimator=est, own_estimator=not user, mu_rel=float(solver.mu),
        eta=float(solver.eta), batch=solver.batch, theta=0.5, refine=bool(solver.refine), warmup=1.0,
    )  # fmt: skip
    phases: list[Phase] = [stoch]
    if solver.refine:
        phases.append(SampledRefinePhase("sampled refinement"))
        phases.append(RefinePhase("refinement", settings))
    return phases


_STEPS_DOC = (
    "'auto': scale-free steps (a backtracking line search on the batch's own values, a batch grown by the "
    "norm test, a refinement on the full sum, a stopping test); 'paper': the paper's fixed steps eta"
)


class _FiniteSumSolver(PhasedSolver):
    """What ZO-SGD and ZO-signSGD share: the batch check, and the phases of ``steps``: the paper's iteration as one
    phase (its Result is the paper's, with no phase notes or column), or the auto phases of
    :func:`_auto_phases` (``sign``: the sign step)."""

    sign: ClassVar[bool] = False
    batch: int | None
    steps: str

    def validate(self, oracle: CountingOracle) -> None:
        if self.batch is not None:
            check_batch("batch", self.batch, oracle.n, "components")

    def phases(self, oracle: CountingOracle) -> list[Phase]:
        if self.steps == "paper":
            return [PaperPhase("paper steps", self._paper_init, self._paper_step)]
        return _auto_phases(self, oracle, sign=self.sign)

    def trace_row(self, state: Any) -> dict[str, float]:
        return {} if self.steps == "paper" else super().trace_row(state)

    def final_notes(self, oracle: CountingOracle, state: Any) -> list[str]:
        return [] if self.steps == "paper" else super().final_notes(oracle, state)

    def _paper_init(self, oracle: CountingOracle, x0: Array, rng: np.random.Generator) -> Any:
        raise NotImplementedError

    def _paper_step(self, oracle: CountingOracle, state: Any, rng: np.random.Generator) -> Any:
        raise NotImplementedError


@dataclass(frozen=True)
class ZOSGD(_FiniteSumSolver):
    """Zeroth-order (projected) SGD.

    Ghadimi & Lan, *Stochastic first- and zeroth-order methods for nonconvex stochastic
    programming*, SIAM J. Optim. 2013 (the randomized stochastic gradient-free method, RSGF),
    ``steps="paper"``:

    1. draw a mini-batch ``I`` of components and the directions of the estimator;
    2. ``G = G_mu(f_I; x_t)`` (one batched oracle call);
    3. ``x_{t+1} = Proj_X(x_t - eta G)`` (projection only when the problem has a simple set).

    ``steps="auto"`` (default): the same estimate with ``mu`` relative to the variables' scale, the step
    length found by a backtracking line search on the batch's values (``eta``: the first trial step,
    relative to the variables' scale), the batch grown by the norm test, then the refinement of
    :mod:`zoframe.refine` on the full sum until ``gtol`` / ``xtol`` / ``rtol`` (see
    :mod:`zoframe_basic.phases`).
    """

    problem_kinds: ClassVar[frozenset[str]] = frozenset({"finite_sum"})
    eta: float = param(1e-2, symbol="eta", doc="step size (paper); first trial step relative to the variables' scale (auto)")
    q: int = param(10, symbol="q", doc="random directions per estimate (default estimator)")
    mu: float = param(1e-3, symbol="mu", doc="smoothing radius (paper: absolute; auto: relative to the variables' scale)")
    batch: int | None = param(None, symbol="|I|", doc="components per iteration (None: all n; auto: the first batch, 64 when n >= 200 (d + 1), else n)")
    estimator: Estimator | None = param(None, doc="gradient estimator (default: gaussian(q, mu))")
    steps: str = param("auto", doc=_STEPS_DOC)
    gtol: float | None = param(None, doc="auto: converged when the projected gradient's inf-norm is <= gtol (units of f / x)")
    xtol: float | None = param(None, doc="auto: converged when a Newton step along each coordinate is <= xtol (units of x)")
    rtol: float = param(1e-8, doc="auto: converged when each gradient entry is <= rtol times its curvature times scale")
    refine: bool = param(True, doc="auto: refine on the full sum when the budget can pay for 10 quasi-Newton iterations")
    divergence_limit: float = param(1e8, doc="diverged when |x| or f grows by this factor beyond the start's scale")

    def __post_init__(self) -> None:
        check_positive("eta", self.eta, "eta")
        check_int("q", self.q)
        check_positive("mu", self.mu, "mu")
        _check_auto(self)

    def _paper_init(self, oracle: CountingOracle, x0: Array, rng: np.random.Generator) -> SGDState:
        x = x0 if oracle.feasible_set is None else oracle.feasible_set.project(x0)
        return SGDState(x=np.array(x, dtype=np.float64, copy=True))

    def _paper_step(self, oracle: CountingOracle, state: SGDState, rng: np.random.Generator) -> SGDState:
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
class ZOSignSGD(_FiniteSumSolver):
    """ZO-signSGD.

    Liu, Chen, Chen & Hong, *signSGD via zeroth-order oracle*, ICLR 2019, Algorithm 1
    (``steps="paper"``):

    1. draw a mini-batch ``I`` and ``q`` directions uniform on the sphere;
    2. ``G = (d/q) sum_k (f_I(x + mu u_k) - f_I(x)) / mu * u_k`` (one batched oracle call);
    3. ``x_{t+1} = x_t - eta sign(G)`` (projected when the problem has a simple set).

    ``steps="auto"`` (default): the same sign direction with its length found by a backtracking line
    search on the batch's values, ``mu`` relative to the variables' scale, the batch grown by the norm
    test, then the refinement on the full sum (see :mod:`zoframe_basic.phases`).
    """

    sign: ClassVar[bool] = True  # the auto phases take the sign step
    problem_kinds: ClassVar[frozenset[str]] = frozenset({"finite_sum"})
    eta: float = param(1e-2, symbol="delta", doc="step size of the sign step (paper); first trial step relative to the variables' scale (auto)")
    q: int = param(10, symbol="q", doc="random directions per estimate")
    mu: float = param(5e-3, symbol="mu", doc="smoothing radius (paper: absolute; auto: relative to the variables' scale)")
    batch: int | None = param(None, symbol="b", doc="components per iteration (None: all n; auto: the first batch, 64 when n >= 200 (d + 1), else n)")
    decay: bool = param(False, doc="paper: use eta / sqrt(t + 1) instead of a constant step")
    estimator: Estimator | None = param(None, doc="gradient estimator (default: sphere(q, mu))")
    steps: str = param("auto", doc=_STEPS_DOC)
    gtol: float | None = param(None, doc="auto: converged when the projected gradient's inf-norm is <= gtol (units of f / x)")
    xtol: float | None = param(None, doc="auto: converged when a Newton step along each coordinate is <= xtol (units of x)")
    rtol: float = param(1e-8, doc="auto: converged when each gradient entry is <= rtol times its curvature times scale")
    refine: bool = param(True, doc="auto: refine on the full sum when the budget can pay for 10 quasi-Newton iterations")
    divergence_limit: float = param(1e8, doc="diverged when |x| or f grows by this factor beyond the start's scale")

    def __post_init__(self) -> None:
        check_positive("eta", self.eta, "delta")
        check_int("q", self.q)
        check_positive("mu", self.mu, "mu")
        if not isinstance(self.decay, bool):
            raise InvalidParameterError("decay must be True or False")
        _check_auto(self)

    def default_estimator(self) -> Estimator:
        return SphereEstimator(q=self.q, mu=self.mu)

    def _paper_init(self, oracle: CountingOracle, x0: Array, rng: np.random.Generator) -> SignState:
        x = x0 if oracle.feasible_set is None else oracle.feasible_set.project(x0)
        return SignState(x=np.array(x, dtype=np.float64, copy=True), t=0)

    def _paper_step(self, oracle: CountingOracle, state: SignState, rng: np.random.Generator) -> SignState:
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
