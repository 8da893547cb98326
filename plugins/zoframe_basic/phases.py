"""The phases of ZO-SGD and ZO-signSGD (:mod:`zoframe.phases`): the papers' iteration, the scale-free
stochastic phase and the deterministic refinement.

``steps="paper"``: one phase, :class:`PaperPhase`, the paper's iteration bit for bit (fixed or decaying
steps); it ends only by divergence (:class:`~zoframe.phases.Runaway`) or a budget.

``steps="auto"``: on a sampled sum (:func:`sampled`), :class:`StochasticPhase`, then :class:`SampledRefinePhase`
and (when the full sum is affordable) :class:`RefinePhase`; on a sum that is not sampled, :class:`RefinePhase` alone
(with the solver's own estimator: a random-direction step there evaluates all ``n`` components, as much as a
quasi-Newton iteration on forward differences, and gains less). One iteration of the stochastic phase (the lines
``# S.k``)::

    S1  the batch I (all n components while |I| >= n), and q random directions u_k (the estimator's)
    S2  ONE oracle call at x and x + mu u_k (mu = mu_rel * the variables' typical scale): the batch's base
        value f_I(x), the per-component directional differences D_kj = (f_j(x + mu u_k) - f_j(x)) / mu,
        their means over the batch dbar_k and the estimate g = c / q sum_k dbar_k u_k
    S3  the direction p = -g (ZO-SGD) or -sign(g) (ZO-signSGD), and a backtracking (Armijo) line search on
        the SAME batch's values along the projected path P(x + a p): a from twice the last accepted length,
        divided by 4 per trial, at most 12 trials (the stochastic line search of Vaswani et al., NeurIPS
        2019, here on zeroth-order estimates): no step length to tune, no knowledge of L, invariant to the
        scale of the values, and a run that cannot find a decrease does not move (so it cannot run away)
    S4  the norm test of Byrd, Chin, Nocedal & Wu (Math. Program. 2012) in the q directions: the sampling
        variance of dbar, sum_k var_j(D_kj) / |I| (1 - |I| / n), against theta^2 |dbar|^2; when it fails the
        batch grows to the size that passes it (at most 4 times per iteration, at most n)
    S5  the hand-over: to the refinement once the batch is the full sum and the phase has spent its
        warm-up (``warmup`` refinement iterations' worth of evaluations) or its line search has failed;
        without a refinement, CONVERGED after 3 consecutive failed line searches on the full sum (no
        decrease along three fresh descent directions: the values cannot resolve a better point)

:class:`RefinePhase` wraps :func:`zoframe.refine.qn_start` / :func:`zoframe.refine.qn_step` on the full sum
(:class:`zoframe.refine.FullSum`, purpose ``"refine"``): quasi-Newton on difference gradients, tests in
the problem's units (``gtol``, ``xtol``) or relative (``rtol``); each variable's scale grown to the diagonal Newton
step that the engine's start measures (:func:`newton_scaled`).
"""

from __future__ import annotations

from collections.abc import Callable
import dataclasses
from dataclasses import dataclass
import math
from typing import Any

import numpy as np

from zoframe.errors import NonFiniteValueError
from zoframe.estimators import _check_underflow
from zoframe.oracle import CountingOracle
from zoframe.phases import Carry, End, PhaseEnd
from zoframe.protocols import Array, Estimator
from zoframe.refine import (
    BUDGET,
    CONVERGED,
    NOISE_LIMITED,
    FullSum,
    QNState,
    RefineSettings,
    Region,
    describe,
    qn_start,
    qn_step,
    variable_scales,
)

__all__ = [
    "PaperPhase",
    "RefinePhase",
    "SampledRefinePhase",
    "SampledState",
    "StochState",
    "StochasticPhase",
    "SubSum",
    "newton_scaled",
    "refine_affordable",
    "sampled",
    "typical_scale",
]

#: trial points per line search of the stochastic phase
TRIALS = 12
#: consecutive failed line searches on the full sum that end a stochastic phase without refinement
FAILS = 3
#: refinement iterations the budget left must pay for before the stochastic phase hands over to it
AFFORD = 10
#: the stochastic phase hands over to the sampled stages once the norm test asks for n / SAMPLED components
SAMPLED = 64
#: by default a sum is sampled (first batch 64) when n >= SAMPLE_MIN (d + 1), else every step uses all n components
SAMPLE_MIN = 200
#: iterations of one sampled stage before its sample grows anyway
STAGE_ITERS = 30


def typical_scale(x: Array, region: Region, fallback: float) -> float:
    """The variables' typical size: the median of the nonzero ``|x_i|`` (``fallback`` when ``x = 0``),
    at most the median width of a box."""
    a = np.abs(x)
    nz = a[a > 0]
    s = float(np.median(nz)) if nz.shape[0] else fallback
    if region.box:
        w = np.asarray(region.upper) - np.asarray(region.lower)
        w = w[np.isfinite(w) & (w > 0)]
        if w.shape[0]:
            s = min(s, float(np.median(w)))
    return s if s > 0 and math.isfinite(s) else 1.0


#: the most the start's Newton steps may grow a variable's scale (a factor of its scale from the point)
NEWTON_GROWTH = 100.0


def newton_scaled(st: QNState, region: Region) -> QNState:
    """The engine's first state with each variable's scale grown to the length of the diagonal Newton step
    ``|g_i| / H_ii`` measured by the start's central differences (at most :data:`NEWTON_GROWTH` times the scale
    from the point, at most a box's width), ``B`` carried into the new scaled variables.

    A point says nothing of the scale of a variable at (or near) 0: ``x0 = 0`` with an optimum at ``1e2`` took the
    scale 1, and the step bound (``max_step`` scales) held every iteration to a tenfold growth. The Newton step is
    the distance to the minimum of the local quadratic model along the coordinate: a scale taken from the function
    (it scales with the variables and not with the values). Only growth: a scale from the point is never shrunk."""
    c = st.curv
    ok = np.isfinite(c) & (c > 0)
    if st.done or not ok.any():
        return st
    newton = np.where(ok, np.abs(st.g) / np.where(ok, c, 1.0), 0.0)
    grown = np.maximum(st.scale, np.minimum(newton, NEWTON_GROWTH * st.scale))
    if region.box:
        width = np.asarray(region.upper) - np.asarray(region.lower)
        grown = np.where(np.isfinite(width) & (width > 0), np.minimum(grown, np.maximum(width, st.scale)), grown)
    if not bool((grown > st.scale).any()):
        return st
    r = grown / st.scale
    B = st.B * r[:, None] * r[None, :] if st.B.shape[0] else st.B
    return dataclasses.replace(st, scale=np.asarray(grown, dtype=np.float64), B=B)


def sampled(batch: int | None, oracle: CountingOracle) -> bool:
    """Whether the stochastic phase's first batch is a sample: ``batch < n``, or by default (``batch=None``)
    ``n >= SAMPLE_MIN (d + 1)``; else every step uses all ``n`` components."""
    if batch is None:
        return oracle.n >= SAMPLE_MIN * (oracle.dim + 1)
    return int(batch) < oracle.n


def refine_affordable(oracle: CountingOracle) -> bool:
    """Whether the budget left pays for :data:`AFFORD` refinement iterations of forward differences
    (``(d + 2) n`` evaluations each); always true without ``max_calls``."""
    left = oracle.remaining
    return left is None or left >= AFFORD * (oracle.dim + 2) * oracle.n


# ---------------------------------------------------------------------------------------------- paper
@dataclass(frozen=True)
class PaperPhase:
    """The paper's iteration, ``step(oracle, state, rng) -> state`` of the solver's own code, unchanged."""

    name: str
    init: Callable[[CountingOracle, Array, np.random.Generator], Any]
    advance: Callable[[CountingOracle, Any, np.random.Generator], Any]

    def start(self, oracle: CountingOracle, carry: Carry, rng: np.random.Generator) -> Any:
        return self.init(oracle, carry.x, rng)

    def step(self, oracle: CountingOracle, state: Any, rng: np.random.Generator) -> Any:
        return self.advance(oracle, state, rng)

    def end(self, oracle: CountingOracle, state: Any) -> PhaseEnd | None:
        return None

    def carry(self, state: Any) -> Carry:
        return Carry(state.x)


# ---------------------------------------------------------------------------------------------- stochastic
@dataclass(frozen=True)
class StochState:
    """The stochastic phase between iterations.

    ``x``; ``value``: the last batch's base value ``f_I(x)`` (the divergence test's value); ``a``: the last
    accepted step length (``nan`` before the first); ``b``: the batch size (``>= n``: the full sum);
    ``fails``: consecutive failed line searches; ``t``: iterations; ``spent``: evaluations of the phase;
    ``grown``: iterations whose norm test grew the batch; ``why``: why the phase should hand over (empty
    while it goes on); ``sigma0``: the variables' typical scale at the phase's start (1 at ``x = 0``).
    """

    x: Array
    value: float
    a: float
    b: int
    fails: int
    t: int
    spent: int
    grown: int
    why: str
    sigma0: float


@dataclass(frozen=True)
class StochasticPhase:
    """S1-S5 of the module docstring. ``sign``: ZO-signSGD's direction ``-sign(g)``; ``estimator``: the
    estimator whose directions (and scale) the phase uses, or a user's estimator called as it is (its own
    ``mu``; no norm test then: the batch doubles when a line search fails); ``mu_rel``: the smoothing radius
    relative to the variables' typical scale; ``eta``: the first trial step relative to that scale;
    ``batch``: the first batch size (``None``: 64 when ``n >= 200 (d + 1)``, else all ``n``); ``theta``: the norm test's bound;
    ``refine``: a refinement phase follows when affordable; ``warmup``: refinement iterations' worth of
    evaluations the phase spends on a full sum before handing over."""

    name: str
    sign: bool
    estimator: Estimator
    own_estimator: bool
    mu_rel: float
    eta: float
    batch: int | None
    theta: float
    refine: bool
    warmup: float

    def start(self, oracle: CountingOracle, carry: Carry, rng: np.random.Generator) -> StochState:
        fs = oracle.feasible_set
        x = carry.x if fs is None else np.asarray(fs.project(carry.x), dtype=np.float64)
        n = oracle.n
        if self.batch is None:  # sampled only when the sum is large next to the dimension (else all n: deterministic)
            b = 64 if sampled(None, oracle) else n
        else:
            b = self.batch
        sigma0 = typical_scale(np.asarray(x, dtype=np.float64), Region.of(fs, oracle.dim), 1.0)
        return StochState(np.array(x, dtype=np.float64, copy=True), math.nan, math.nan, min(int(b), oracle.n),
                          0, 0, 0, 0, "", sigma0)  # fmt: skip

    def _values(self, oracle: CountingOracle, idx: Any) -> Callable[[Array], Array]:
        def f(X: Array) -> Array:
            return oracle.objective(X, idx, purpose="estimate")

        return f

    def step(self, oracle: CountingOracle, st: StochState, rng: np.random.Generator) -> StochState:
        n, d = oracle.n, oracle.dim
        calls0 = oracle.calls
        region = Region.of(oracle.feasible_set, d)
        full = st.b >= n
        idx = None if full else oracle.sample(st.b, rng)  # S1
        x = st.x
        sigma = typical_scale(x, region, 1.0)
        b_next = st.b
        slope2 = math.nan  # |grad|^2 estimated from the directional differences
        if self.own_estimator:  # S2: the estimator's directions, our radius, the per-component differences
            est = self.estimator
            mu = self.mu_rel * sigma
            U = est.directions(d, rng)  # type: ignore[attr-defined]
            q = U.shape[0]
            P = np.repeat(x[None, :], q + 1, axis=0)
            P[1:] += mu * U
            V = oracle.objective(P, idx, purpose="estimate")  # ONE call, (q + 1, b)
            f0 = float(V[0].mean())
            D = (V[1:] - V[0]) / mu
            if not np.count_nonzero(D):  # every difference exactly 0: say so when it is mu's underflow
                _check_underflow(est, D, x, P[1:], mu, float(np.abs(U).max(initial=0.0)))
            dbar = D.mean(axis=1)
            c = float(est.scale(d)) / q  # type: ignore[attr-defined]
            g = c * (dbar @ U)
            slope2 = c * float(dbar @ dbar)
            bn = V.shape[1]
            if not full and bn > 1:  # S4: the norm test in the q directions
                var = float(D.var(axis=1, ddof=1).sum()) * (1.0 - bn / n)
                if var / bn > self.theta**2 * float(dbar @ dbar):
                    need = var / max(self.theta**2 * float(dbar @ dbar) + var / n, 1e-300)
                    b_next = int(min(n, max(st.b + 1, min(4 * st.b, math.ceil(need)))))
        else:
            e = self.estimator.estimate(self._values(oracle, idx), x, rng)
            g = np.asarray(e.grad, dtype=np.float64)
            if e.values is not None:
                f0 = float(np.mean(e.values))
            else:
                f0 = float(oracle.objective(x[None, :], idx, purpose="estimate").mean())
        if not (math.isfinite(f0) and bool(np.isfinite(g).all())):
            raise NonFiniteValueError(f"the stochastic phase's estimate at iteration {st.t + 1} is not finite")
        # S3: the direction and the line search on the same batch
        p = -np.sign(g) if self.sign else -g
        pmax = float(np.abs(p).max(initial=0.0))
        accepted = False
        a = st.a
        if pmax > 0:
            if not math.isfinite(a):
                a = self.eta * sigma / pmax  # the first trial moves the largest coordinate by eta * sigma
            else:
                a = 2.0 * a
            for _ in range(TRIALS):
                trial = region.clip((x + a * p)[None, :])[0]
                step = trial - x
                if not float(np.abs(step).max(initial=0.0)) > 1e-15 * max(sigma, float(np.abs(x).max(initial=0.0))):
                    break
                try:
                    ft = float(oracle.objective(trial[None, :], idx, purpose="line search").mean())
                except NonFiniteValueError:
                    ft = math.nan
                decrease = float(g @ step)
                if self.own_estimator and not self.sign and slope2 > 0 and not region.box and region.project is None:
                    decrease = -a * slope2  # the unbiased slope along -g: E (u.grad)^2 = |grad|^2
                if math.isfinite(ft) and ft < f0 and ft <= f0 + 1e-4 * min(decrease, 0.0):  # Armijo on the batch
                    x, f0, accepted = trial, ft, True
                    break
                a *= 0.25
        fails = 0 if accepted else st.fails + 1
        if not accepted:
            a = st.a if math.isfinite(st.a) else math.nan
            if not self.own_estimator and not full:
                b_next = min(n, 2 * st.b)  # no norm test for a user's estimator: a failure doubles the batch
        spent = st.spent + (oracle.calls - calls0)
        why = self._handover(oracle, b_next, full, accepted, fails, spent)
        return StochState(x, f0, a, b_next, fails, st.t + 1, spent, st.grown + int(b_next > st.b), why, st.sigma0)

    def _handover(self, oracle: CountingOracle, b: int, full: bool, accepted: bool, fails: int, spent: int) -> str:
        """S5: why the phase is over ("" while it goes on)."""
        n, d = oracle.n, oracle.dim
        if not self.refine:
            return ""
        if not full:
            if b * SAMPLED >= n:
                return f"the norm test asks for {b} of the {n} components: sampled stages from here"
            return ""
        if not refine_affordable(oracle):
            return ""
        if not accepted:
            return "the line search found no decrease on the full sum"
        if spent >= self.warmup * (2 * d + 2) * n:
            return f"warm-up on the full sum done ({spent} evaluations)"
        return ""

    def end(self, oracle: CountingOracle, st: StochState) -> PhaseEnd | None:
        if st.why:
            return PhaseEnd(End.NEXT, st.why, to="sampled refinement" if st.b < oracle.n else "refinement")
        if st.b >= oracle.n and st.fails >= FAILS and not (self.refine and refine_affordable(oracle)):
            return PhaseEnd(
                End.CONVERGED,
                f"no decrease on the full sum along {FAILS} fresh descent directions (iteration {st.t}): the values "
                f"resolve no better point",
            )
        return None

    def carry(self, st: StochState) -> Carry:
        # the refinement's variable scales: the point's own, at least the typical scale of the phase's start (a
        # start at 0 moved only a little by the warm-up does not make every later step tiny)
        return Carry(st.x, {"value": st.value, "batch": st.b, "scale": st.sigma0})

    def outputs(self, st: StochState) -> dict[str, Array]:
        return {"x": st.x}


# ---------------------------------------------------------------------------------------------- sampled stages
@dataclass(frozen=True)
class SubSum:
    """:class:`zoframe.refine.Smooth` for the mean of a fixed subset ``idx`` of the components (a sample average
    approximation of the finite sum), counted under ``purpose``."""

    oracle: Any
    idx: Any
    purpose: str = "sampled refine"

    @property
    def point_cost(self) -> int:
        return int(self.idx.shape[0])

    def values(self, X: Array, aux: Array) -> tuple[Array, Array]:
        out: Array = self.oracle.objective(X, self.idx, purpose=self.purpose).mean(axis=1)
        return out, aux

    def differences(self, P: Array, aux: Array) -> Array:
        out: Array = self.oracle.objective(P, self.idx, purpose=self.purpose).mean(axis=1)
        return out


@dataclass(frozen=True)
class SampledState:
    """The sampled stages between iterations: ``x``, ``value`` (of the current sample's mean), the engine's
    state ``qn`` on the sample ``idx`` of ``b`` components, the stage number and the scales to start from."""

    x: Array
    value: float
    qn: QNState
    b: int
    idx: Any
    stage: int
    scale: Array


@dataclass(frozen=True)
class SampledRefinePhase:
    """Sample average approximations of growing size (a dynamic sample size strategy: Byrd, Chin, Nocedal & Wu,
    Math. Program. 2012, with the deterministic engine on each sample): the quasi-Newton engine of
    :mod:`zoframe.refine` minimises the mean of a fixed random sample of ``b`` components to the relative
    tolerance ``rtol`` (or for at most :data:`STAGE_ITERS` iterations); the sample then grows ``growth`` times (a new sample, warm start from the point) until it
    would reach ``n``, when the phase hands over to the refinement on the full sum."""

    name: str
    rtol: float = 1e-4
    growth: int = 4

    def _stage(self, oracle: CountingOracle, x: Array, b: int, stage: int, scale: Array | None,
               rng: np.random.Generator) -> SampledState:  # fmt: skip
        n = oracle.n
        idx = np.sort(rng.choice(n, size=b, replace=False)) if b < n else np.arange(n)
        region = Region.of(oracle.feasible_set, oracle.dim)
        sc = variable_scales(region.clip(x[None, :])[0], region) if scale is None else np.maximum(
            scale, variable_scales(region.clip(x[None, :])[0], region))
        qn = newton_scaled(qn_start(SubSum(oracle, idx), x, region, RefineSettings(rtol=self.rtol), scale=sc), region)
        return SampledState(qn.x, qn.value, qn, b, idx, stage, sc)

    def start(self, oracle: CountingOracle, carry: Carry, rng: np.random.Generator) -> SampledState:
        b = max(int(carry.extras.get("batch", 64)), 8 * (oracle.dim + 1))
        floor = carry.extras.get("scale")
        scale = None if floor is None else np.full(oracle.dim, float(floor))
        return self._stage(oracle, carry.x, min(b, oracle.n), 1, scale, rng)

    def step(self, oracle: CountingOracle, st: SampledState, rng: np.random.Generator) -> SampledState:
        if st.qn.done or st.qn.it >= STAGE_ITERS:  # the sample is solved (or has had its share): a larger one
            b = min(oracle.n, self.growth * st.b)
            return self._stage(oracle, st.x, b, st.stage + 1, st.qn.scale, rng)
        region = Region.of(oracle.feasible_set, oracle.dim)
        qn = qn_step(SubSum(oracle, st.idx), st.qn, region, RefineSettings(rtol=self.rtol))
        return SampledState(qn.x, qn.value, qn, st.b, st.idx, st.stage, st.scale)

    def end(self, oracle: CountingOracle, st: SampledState) -> PhaseEnd | None:
        if (st.qn.done or st.qn.it >= STAGE_ITERS) and self.growth * st.b >= oracle.n:
            return PhaseEnd(End.NEXT, f"stage {st.stage} on {st.b} components done ({describe(st.qn)})")
        return None

    def carry(self, st: SampledState) -> Carry:
        return Carry(st.x, {"value": st.value, "batch": st.b, "scale": float(np.median(st.qn.scale))})

    def outputs(self, st: SampledState) -> dict[str, Array]:
        return {"x": st.x}


# ---------------------------------------------------------------------------------------------- refinement
@dataclass(frozen=True)
class RefinePhase:
    """The deterministic refinement on the full sum (:mod:`zoframe.refine`), its state the engine's
    :class:`~zoframe.refine.QNState`."""

    name: str
    settings: RefineSettings

    def _fn(self, oracle: CountingOracle) -> FullSum:
        return FullSum(oracle, "refine")

    def start(self, oracle: CountingOracle, carry: Carry, rng: np.random.Generator) -> QNState:
        region = Region.of(oracle.feasible_set, oracle.dim)
        scale = None
        floor = carry.extras.get("scale")
        if floor is not None:
            scale = variable_scales(region.clip(carry.x[None, :])[0], region)
            cap = float(floor)
            if region.box:  # never beyond a box's width
                width = np.asarray(region.upper) - np.asarray(region.lower)
                cap_v = np.where(np.isfinite(width) & (width > 0), np.minimum(cap, width), cap)
                scale = np.maximum(scale, cap_v)
            else:
                scale = np.maximum(scale, cap)
        return newton_scaled(qn_start(self._fn(oracle), carry.x, region, self.settings, scale=scale), region)

    def step(self, oracle: CountingOracle, st: QNState, rng: np.random.Generator) -> QNState:
        return qn_step(self._fn(oracle), st, Region.of(oracle.feasible_set, oracle.dim), self.settings)

    def end(self, oracle: CountingOracle, st: QNState) -> PhaseEnd | None:
        if not st.done:
            return None
        words = describe(st)
        if st.status == CONVERGED:
            return PhaseEnd(End.CONVERGED, f"refinement {words}")
        if st.status == NOISE_LIMITED:
            return PhaseEnd(End.NOISE_LIMITED, f"refinement {words}")
        if st.status == BUDGET:
            return PhaseEnd(End.BUDGET, f"refinement {words}")
        return PhaseEnd(End.FAILED, f"refinement {words}")

    def carry(self, st: QNState) -> Carry:
        return Carry(st.x, {"value": st.value})

    def outputs(self, st: QNState) -> dict[str, Array]:
        return {"x": st.x}
