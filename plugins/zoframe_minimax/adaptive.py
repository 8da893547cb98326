"""The steps of ``steps="auto"``: no ``L``, ``mu`` or ``kappa``, nothing tuned to the problem's scale.

Two phases, one per form of the papers' loop, each built on a source of block gradients
(:class:`Blocks`: zeroth-order estimates of Wang et al., eqs. (8)-(9), or white-box gradients for the
first-order references), and on one shared piece, the ascent to a tolerance (:func:`ascend`):

:func:`ascend` (Algorithm 2 l.2 run to a tolerance instead of a fixed count ``T``)
    projected ascent steps ``y <- Proj_Y(y + t H)`` on ``F(x, .)`` with a backtracked (Armijo) step ``t`` on the
    estimator's own values (the trial value on the same sample batch as the estimate: the stochastic line
    search of Vaswani et al., NeurIPS 2019), ``t`` doubled after an accepted step and divided by 4 after a
    rejected trial, until the projected-gradient mapping ``|M| = |Proj_Y(y + t H) - y| / t`` is below a target
    (at most ``max_inner`` steps). ``F(x, .)`` is bounded above (strongly concave), so the backtracking finds
    the step of the local curvature whatever the scale of ``y`` and ``F``. The base value of its last estimate
    is ``F(x, y)`` with ``y`` close to ``y*(x)``: an estimate of ``Phi(x) = max_y F(x, y)`` for free.

:class:`MultiStepPhase` (the GDMSA forms: ``zo-gdmsa``, ``zo-sgdmsa``, ``sgdmsa``)
    gradient descent on ``Phi`` with a backtracked step (Armijo on ``Phi``)::

        M0  y_s <- ascend(x_s, from y_s, to the tolerance of M2)   (usually one estimate: y_s is there already)
        M1  G = G(x_s, y_s)                               (Alg. 2 l.4's estimate; y_s ~ y*(x_s))
        M2  x_t = x_s - eta G;  y_t = ascend(x_t, from y_s, to |M| <= |M_0| |G| / (3 |G_0|))   (l.1-3 at x_t)
        M3  accept when F(x_t, y_t) <= F(x_s, y_s) - eta |G|^2 / 4 (both on one sample batch, one call):
            x_{s+1} = x_t, y_{s+1} = y_t, eta <- 2 eta;  else eta <- eta / 4 and M2 again (at most 12 trials)

    The ascent at the accepted trial is the next iteration's ascent (l.1-3 at ``x_{s+1}``), so an accepted
    step costs nothing beyond the papers' loop but the two comparison values; ``eta`` starts at ``0.1`` of
    the scale of ``x`` over ``|G_0|``. ``F(., y)`` at a fixed ``y`` may be unbounded below (a coupling
    ``y^T A x``): only ``Phi`` is a safe merit, which is why the ascent runs before each comparison.

:class:`TiAdaPhase` (the GDA forms: ``zo-gda``, ``zo-sgda``, ``sgda``)
    the time-scale adaptive two-step rule of TiAda (Li, Yang, Huang & He, *TiAda: A Time-scale Adaptive
    Algorithm for Nonconvex Minimax Optimization*, NeurIPS 2022, Algorithm 1), simultaneous steps at the
    old pair ``(x_t, y_t)``::

        T1  v_x <- v_x + |G_t|^2 / c_x,   v_y <- v_y + |H_t|^2 / c_y
        T2  x_{t+1} = x_t - e_x G_t / max(v_x, v_y)^alpha            (alpha = 0.6)
        T3  y_{t+1} = Proj_Y(y_t + t_y H_t / v_y^beta)              (beta = 0.4)

    ``alpha > beta`` separates the time scales as the accumulators grow (``x`` slows down relative to ``y``
    without knowing ``kappa``), and ``max(v_x, v_y)`` holds ``x`` back while ``y`` is still far from its
    maximiser. Deviations, stated: TiAda accumulates the raw squared norms; here they are divided by
    ``c_x``, ``c_y``, the means of the first five squared norms (:func:`_reference`: one norm alone may be
    small by chance under sampling), so that multiplying ``F`` by a constant changes nothing; and the initial
    steps (TiAda's ``eta^x``, ``eta^y``) are not given but measured at the start: ``t_y`` is the ascent's
    backtracked step at ``x_0``, ``e_x |G|`` the longest of ``0.1 s_x 4^k`` (``s_x`` the scale of ``x``) that
    passes M3 (an Armijo test on ``Phi``, with the ascent at each trial point, all to the start's tolerance),
    so that both are in the units of ``x`` and ``y`` whatever their scale. With sampled estimates (a batch that
    does not cover every component) two values of ``Phi`` after two ascents differ by noise, a tiny step can
    pass by chance and TiAda's steps only shrink: ``e_x |G| = 0.1 s_x`` there.

With sampled estimates :class:`MultiStepPhase` does not backtrack on ``Phi`` either: its descent step is
AdaGrad-norm's, ``x <- x - eta G / sqrt(sum |G|^2 / c_x)`` (Ward, Wu & Bottou 2019), after the ascent.

Both phases end on tests in relative, scale-free terms. When a refinement follows (deterministic problems)
they hand over on the relative stationarity estimate ``r_t = max(|G_t| / |G_ref|, |M_t| / |H_ref|)`` (the
median of the last five iterations; the references from the start): once ``r_t <= handover`` (0.1), once it
has not halved in ``patience`` (10) iterations, once three descent steps in a row found no decrease (the
GDMSA forms), or once the phase has spent ``share`` (0.3) of ``max_calls``. Without one (sampled
estimates) the run ends ``NOISE_LIMITED`` when the exponential moving average of its x-estimates (weight
0.1) has been within one standard error of 0 for 20 iterations in a row, after at least 100: their noise,
not the distance to a stationary point, then decides their size (:func:`_noise_ratio`); else on its budget.

Smoothing radii of the zeroth-order estimates: ``mu = sqrt(eps) s`` with ``s`` the larger of the block's
scale at the start of the phase and now (the root mean square of its entries, 1 when they are all 0),
unless ``mu1`` / ``mu2`` are given.
"""
from __future__ import annotations

from collections.abc import Mapping
import dataclasses
from dataclasses import dataclass
import math
from typing import Any, Protocol

import numpy as np

from zoframe.oracle import CountingOracle
from zoframe.phases import Carry, End, PhaseEnd
from zoframe.protocols import Array, IntArray

__all__ = [
    "Blocks",
    "MultiStepPhase",
    "Sample",
    "StopRule",
    "TiAdaPhase",
    "block_scale",
    "calibrate",
]

_EPS = float(np.finfo(np.float64).eps)
#: TiAda's exponents (Li et al. 2022, section 5: alpha = 0.6, beta = 0.4)
ALPHA, BETA = 0.6, 0.4
#: Armijo's fraction of the promised change, and the factors of the backtracking
_ARMIJO = 0.25
_GROW, _SHRINK = 4.0, 0.25
#: iterations whose median is the phase's relative stationarity
_WINDOW = 5
#: the weight of the moving averages of the x-estimates (the noise test) and the iterations before it is read
_BETA = 0.1
_NOISE_MIN = 100
#: iterations in a row within one standard error before a noise-limited stop
_QUIET = 20


@dataclass(frozen=True)
class Sample:
    """The components of one estimate: ``idx`` (``None``: all ``n``) and their weights ``w`` (summing to 1)."""

    idx: IntArray | None
    w: Array


class Blocks(Protocol):
    """Where the phases get their block gradients and values (zeroth-order estimates or white-box gradients)."""

    def sample(self, oracle: CountingOracle, block: int, rng: np.random.Generator) -> Sample:
        """The components of an estimate of block ``0`` (x) or ``1`` (y)."""
        ...

    def grad_x(
        self, oracle: CountingOracle, x: Array, y: Array, s: Sample, rng: np.random.Generator, scale: float
    ) -> tuple[Array, float]:
        """``(grad_x F_s(x, y) or its estimate, F_s(x, y) if it came for free else nan)``; ``scale``: the length that
        sizes a difference step (the block's scale at the start of the phase)."""
        ...

    def grad_y(
        self, oracle: CountingOracle, x: Array, y: Array, s: Sample, rng: np.random.Generator, scale: float
    ) -> tuple[Array, float]:
        """``(grad_y F_s(x, y) or its estimate, F_s(x, y) if it came for free else nan)``."""
        ...

    def values(self, oracle: CountingOracle, X: Array, Y: Array, s: Sample) -> Array:
        """``F_s`` at the row pairs of ``X`` and ``Y`` (one row broadcasts), one batched call."""
        ...


def block_scale(z: Array) -> float:
    """The typical size of a block's entries: their root mean square, 1 when they are all 0."""
    rms = float(np.sqrt(np.mean(z * z))) if z.size else 0.0
    return rms if rms > 0 and math.isfinite(rms) else 1.0


def _project(y_set: Any, y: Array) -> Array:
    return np.array(y if y_set is None else y_set.project(y), dtype=np.float64, copy=True)


def _mapping_norm(y_set: Any, y: Array, h: Array, t: float) -> float:
    """``|Proj_Y(y + t h) - y| / t``: the projected-gradient mapping of the ascent (``|h|`` without a set)."""
    if y_set is None:
        return float(np.linalg.norm(h))
    return float(np.linalg.norm(_project(y_set, y + t * h) - y)) / t


@dataclass(frozen=True)
class Ascent:
    """What :func:`ascend` returns: the new ``y``, the step ``t``, the last mapping norm ``m`` (``nan`` when no
    estimate was made), the ascent steps taken, ``f`` = ``F(x, y)`` on the last estimate's sample, and ``m_first``:
    the norm of the first estimate ``|H|`` (the reference of the relative tests: the mapping itself vanishes where
    ``y`` starts at its maximiser)."""

    y: Array
    t: float
    m: float
    steps: int
    f: float
    m_first: float


def ascend(
    oracle: CountingOracle, blocks: Blocks, x: Array, y: Array, t: float, target: float, rng: np.random.Generator,
    scale: float, max_inner: int, rel: float = 0.0,
) -> Ascent:  # fmt: skip
    """Projected ascent on ``F(x, .)`` from ``y`` with a backtracked step until ``|M| <= max(target, rel |H_first|)``
    (module docstring; ``H_first`` the first estimate of this ascent).

    ``t``: the last step (``nan``: the first ascent, whose step starts at ``0.1`` of the scale of ``y`` over
    ``|H|``); ``scale``: the length that sizes the estimator's differences."""
    ys = oracle.y_set
    m, f, m_first = math.nan, math.nan, math.nan
    steps = 0
    best, since = math.inf, 0
    for _ in range(max_inner + 1):
        s = blocks.sample(oracle, 1, rng)
        h, f = blocks.grad_y(oracle, x, y, s, rng, scale)
        if not math.isfinite(f):
            f = float(blocks.values(oracle, x[None, :], y[None, :], s)[0])
        hn = float(np.linalg.norm(h))
        if not (hn > 0 and math.isfinite(hn)):
            m = 0.0 if hn == 0 else math.inf
            break
        if not (t > 0 and math.isfinite(t)):
            t = 0.1 * block_scale(y) / hn
        m = _mapping_norm(ys, y, h, t)
        if math.isnan(m_first):
            m_first = hn  # the y-gradient's size (the mapping itself may vanish at the start: y0 = y*(x0))
        if m <= max(target, rel * m_first) or steps >= max_inner:
            break
        if m <= 0.5 * best:  # stalled: the estimate's noise, not the distance to y*, sets |M| (a set whose normal
            best, since = m, 0  # takes most of the gradient, e.g. a simplex, leaves the estimates' noise in its tangent)
        else:
            since += 1
            if since >= 3:
                break
        accepted = False
        t_before = t
        for _trial in range(12):  # Armijo on the same sample
            yt = _project(ys, y + t * h)
            step = yt - y
            if float(np.abs(step).max(initial=0.0)) == 0.0:
                break
            ft = float(blocks.values(oracle, x[None, :], yt[None, :], s)[0])
            if math.isfinite(ft) and ft >= f + _ARMIJO * float(h @ step):
                y, accepted = yt, True
                break
            t *= _SHRINK
        steps += 1
        if not accepted:  # no step of 12 found an increase: the estimate's noise, not the step, is the matter
            t = t_before
            break
        t *= 2.0
    return Ascent(y, t, m, steps, f, m_first)


def _compare(oracle: CountingOracle, blocks: Blocks, x: Array, y: Array, xt: Array, yt: Array,
             rng: np.random.Generator) -> tuple[float, float]:  # fmt: skip
    """``(F(x, y), F(x_t, y_t))`` on one sample batch (one call of two points): the two sides of the Armijo test M3."""
    s = blocks.sample(oracle, 0, rng)
    v = blocks.values(oracle, np.vstack([x, xt]), np.vstack([y, yt]), s)
    return float(v[0]), float(v[1])


@dataclass(frozen=True)
class Trial:
    """The outcome of :func:`descend`: ``accepted``; the new pair and the ascent's step and mapping norm; the descent
    step ``eta`` to try next; the trials made."""

    accepted: bool
    x: Array
    y: Array
    t: float
    m: float
    eta: float
    trials: int


def descend(
    oracle: CountingOracle, blocks: Blocks, x: Array, y: Array, g: Array, eta: float, t: float, target: float,
    rng: np.random.Generator, scale_y: float, max_inner: int, max_trials: int = 12,
) -> Trial:  # fmt: skip
    """M2-M3 of the module docstring: backtracking on ``Phi`` along ``-g`` from ``eta`` (at most ``max_trials``)."""
    g2 = float(g @ g)
    for k in range(max_trials):
        xt = x - eta * g  # M2
        asc = ascend(oracle, blocks, xt, y, t, target, rng, scale_y, max_inner)
        f0, ft = _compare(oracle, blocks, x, y, xt, asc.y, rng)
        if math.isfinite(ft) and ft <= f0 - _ARMIJO * eta * g2:  # M3
            return Trial(True, xt, asc.y, asc.t, asc.m, 2.0 * eta, k + 1)
        eta *= _SHRINK
    # no decrease found: the next descent starts again from the first trial's step (a run of rejections says the
    # values' noise, not the step, is the matter: the phase ends on it)
    return Trial(False, x, y, t, math.nan, eta * _GROW**max_trials, max_trials)


def calibrate(
    oracle: CountingOracle, blocks: Blocks, x: Array, y: Array, g: Array, t: float, target: float,
    rng: np.random.Generator, scale_y: float, max_inner: int,
) -> float:  # fmt: skip
    """TiAda's initial descent step: the longest of ``0.1 s_x / |g| 4^k`` (``k`` from 0 up to 4, or down to -6 until it
    passes) that passes the Armijo test on ``Phi`` (M3); ``0.1 s_x / |g|`` itself when none does (the values' noise
    then hides the decrease: a sampled finite sum)."""
    gn = float(np.linalg.norm(g))
    if not (gn > 0 and math.isfinite(gn)):
        return 0.1 * block_scale(x) / max(gn, 1e-300)
    eta = 0.1 * block_scale(x) / gn
    first = descend(oracle, blocks, x, y, g, eta, t, target, rng, scale_y, max_inner, max_trials=1)
    if not first.accepted:
        trial = descend(oracle, blocks, x, y, g, eta * _SHRINK, t, target, rng, scale_y, max_inner, max_trials=6)
        # no trial passed: the noise of the values hides the decrease; keep 0.1 of the scale (TiAda adapts from there)
        return trial.eta / 2.0 if trial.accepted else eta
    best = eta
    for _ in range(4):
        eta *= _GROW
        if not descend(oracle, blocks, x, y, g, eta, t, target, rng, scale_y, max_inner, max_trials=1).accepted:
            break
        best = eta
    return best


@dataclass(frozen=True)
class StopRule:
    """When a stochastic phase ends (module docstring): ``handover`` / ``patience`` / ``share`` with a refinement to
    hand over to; ``stop`` and the noise test without one."""

    refine_next: bool
    handover: float = 0.1
    stop: float = 1e-8
    patience: int = 10
    share: float = 0.3

    def check(self, oracle: CountingOracle, r: float, since_improved: int, t: int, used: int, quiet: int) -> PhaseEnd | None:
        """``quiet``: the iterations in a row whose x-estimates' moving average was within one standard error of 0
        (:func:`_noise_ratio`)."""
        cap = oracle.max_calls
        if self.refine_next:
            if r <= self.handover:
                return PhaseEnd(End.NEXT, f"relative stationarity estimate {r:.3g} <= {self.handover:g} after {t} iterations")
            if since_improved >= self.patience:
                return PhaseEnd(End.NEXT, f"the relative stationarity estimate ({r:.3g}) has not halved in "
                                          f"{self.patience} iterations")
            if cap is not None and used >= self.share * cap:
                return PhaseEnd(End.NEXT, f"spent {used} evaluations, {self.share:g} of max_calls")
            return None
        if r <= self.stop:
            return PhaseEnd(End.CONVERGED, f"relative stationarity estimate {r:.3g} <= {self.stop:g}")
        if t >= _NOISE_MIN and quiet >= _QUIET:
            return PhaseEnd(End.NOISE_LIMITED, f"the moving average of the x-estimates has been within one standard "
                                                f"error of 0 for {quiet} iterations (after {t}): their noise, not the "
                                                "distance to a stationary point, decides their size")
        return None


def _noise_ratio(mean: Array, sq: float) -> float:
    """``|m| / se(m)`` for the exponential moving averages ``m`` of the estimates and ``sq`` of their squared norms
    (weight ``_BETA``): the standard error of ``m`` is ``sqrt((sq - |m|^2) beta / (2 - beta))``."""
    m2 = float(mean @ mean)
    var = max(sq - m2, 0.0) * _BETA / (2.0 - _BETA)
    if var <= 0.0:
        return math.inf
    return math.sqrt(m2 / var)


def _reference(ref: float, norm: float, t: int) -> float:
    """The mean of the first ``_WINDOW`` squared estimate norms (a single one may be small by chance under sampling):
    the reference that makes the accumulators dimensionless."""
    if t == 0 or math.isnan(ref):
        return norm * norm
    if t < _WINDOW:
        return (ref * t + norm * norm) / (t + 1)
    return ref


def _progress(hist: Array, r: float, best: float, since: int) -> tuple[Array, float, float, int]:
    """Append ``r`` to the window, return ``(window, median, best, iterations since best halved)``."""
    hist = np.append(hist, r)[-_WINDOW:]
    med = float(np.median(hist))
    if med <= 0.5 * best:
        return hist, med, med, 0
    return hist, med, best, since + 1


# --------------------------------------------------------------------------------------------- TiAda (GDA forms)
@dataclass(frozen=True)
class TiAdaState:
    """``x``, ``y``; ``vx``, ``vy``: the sums of the squared estimate norms (T1); ``gx0``, ``gy0``: the means of the first
    five squared norms (:func:`_reference`, ``nan`` before the first step); ``ex``, ``ty``: the calibrated steps ``D_x / |G_0|`` and ``D_y / |H_0|``; ``gr``, ``my0``: the
    references of the relative stationarity (``|G|`` at the start, the first mapping norm); ``hist``: the last relative
    stationarity estimates; ``r``: their median; ``best``, ``since``: the stall test; ``t``; ``calls0``: evaluations at
    the start; ``sx``, ``sy``: the blocks' scales at the start."""

    x: Array
    y: Array
    vx: float
    vy: float
    gx0: float
    gy0: float
    ex: float
    ty: float
    gr: float
    my0: float
    hist: Array
    r: float
    best: float
    since: int
    t: int
    calls0: int
    sx: float
    sy: float
    gm: Array
    gs: float
    quiet: int


@dataclass(frozen=True)
class TiAdaPhase:
    """The GDA forms under ``steps="auto"`` (module docstring, T1-T3)."""

    name: str
    blocks: Any  # Blocks
    rule: StopRule
    alpha: float = ALPHA
    beta: float = BETA
    max_inner: int = 20
    inner_ratio: float = 1.0 / 3.0
    #: measure the first descent step by the Armijo test on Phi (:func:`calibrate`); without it (sampled estimates,
    #: whose comparisons of Phi across two ascents are noise: a tiny step may pass by chance, and TiAda's steps only
    #: shrink) the step is 0.1 of the scale of x
    calibrate_x: bool = True

    def start(self, oracle: CountingOracle, carry: Carry, rng: np.random.Generator) -> TiAdaState:
        x = np.array(carry.x, dtype=np.float64, copy=True)
        y = _project(oracle.y_set, np.asarray(carry.extras["y"], dtype=np.float64))
        calls0 = oracle.calls
        scx, scy = block_scale(x), block_scale(y)
        asc = ascend(oracle, self.blocks, x, y, math.nan, 0.0, rng, scy, self.max_inner, rel=0.1)
        my0 = max(asc.m_first, 1e-300) if math.isfinite(asc.m_first) else 1.0
        g, _ = self.blocks.grad_x(oracle, x, asc.y, self.blocks.sample(oracle, 0, rng), rng, scx)
        gr = max(float(np.linalg.norm(g)), 1e-300)
        if self.calibrate_x:  # the trials' ascents to the start's tolerance: comparisons of Phi at the same accuracy
            ex = calibrate(oracle, self.blocks, x, asc.y, g, asc.t, 0.1 * my0, rng, scy, self.max_inner)
        else:
            ex = 0.1 * scx / gr
        return TiAdaState(x, asc.y, 0.0, 0.0, math.nan, math.nan, ex, asc.t, gr, my0, np.zeros(0), math.inf, math.inf,
                          0, 0, calls0, scx, scy, np.zeros_like(x), 0.0, 0)  # fmt: skip

    def step(self, oracle: CountingOracle, st: TiAdaState, rng: np.random.Generator) -> TiAdaState:
        x, y = st.x, st.y
        g, _ = self.blocks.grad_x(oracle, x, y, self.blocks.sample(oracle, 0, rng), rng, st.sx)
        h, _ = self.blocks.grad_y(oracle, x, y, self.blocks.sample(oracle, 1, rng), rng, st.sy)
        gn, hn = float(np.linalg.norm(g)), float(np.linalg.norm(h))
        gx0, gy0 = _reference(st.gx0, gn, st.t), _reference(st.gy0, hn, st.t)
        vx, vy = st.vx + gn * gn, st.vy + hn * hn  # T1 (raw sums; divided by the references below)
        wx, wy = vx / max(gx0, 1e-300), vy / max(gy0, 1e-300)
        x_next = x - st.ex / max(wx, wy, 1e-300) ** self.alpha * g  # T2
        ty = st.ty / max(wy, 1e-300) ** self.beta
        y_next = _project(oracle.y_set, y + ty * h)  # T3
        ry = _mapping_norm(oracle.y_set, y, h, ty) / st.my0
        hist, med, best, since = _progress(st.hist, max(gn / st.gr, ry), st.best, st.since)
        gm = (1.0 - _BETA) * st.gm + _BETA * g
        gs = (1.0 - _BETA) * st.gs + _BETA * gn * gn
        return dataclasses.replace(
            st, x=x_next, y=y_next, vx=vx, vy=vy, gx0=gx0, gy0=gy0, hist=hist, r=med, best=best, since=since, t=st.t + 1,
            gm=gm, gs=gs, quiet=st.quiet + 1 if _noise_ratio(gm, gs) <= 1.0 else 0,
        )  # fmt: skip

    def end(self, oracle: CountingOracle, st: TiAdaState) -> PhaseEnd | None:
        if st.t < _WINDOW:
            return None
        return self.rule.check(oracle, st.r, st.since, st.t, oracle.calls - st.calls0, st.quiet)

    def carry(self, st: TiAdaState) -> Carry:
        return Carry(st.x, {"y": st.y})

    def outputs(self, st: TiAdaState) -> Mapping[str, Array]:
        return {"x": st.x, "y": st.y}


# --------------------------------------------------------------------------------------------- multi-step (GDMSA)
@dataclass(frozen=True)
class MultiStepState:
    """``x``, ``y`` (``~ y*(x)``); ``ty``: the ascent's step; ``eta``: the descent step (``nan`` before the first);
    ``gx0``: the mean of the first five ``|G|^2`` (:func:`_reference`); ``my0``: the first mapping norm; ``rx``: the last relative x-stationarity;
    ``rejected``: descent steps that found no decrease in a row; ``vx``: the AdaGrad-norm accumulator (sampled
    estimates); ``hist``, ``r``, ``best``, ``since``, ``t``, ``calls0``, ``sx``, ``sy``, ``gm``, ``gs``: as in
    :class:`TiAdaState`."""

    x: Array
    y: Array
    ty: float
    eta: float
    gx0: float
    my0: float
    rx: float
    rejected: int
    vx: float
    hist: Array
    r: float
    best: float
    since: int
    t: int
    calls0: int
    sx: float
    sy: float
    gm: Array
    gs: float
    quiet: int


@dataclass(frozen=True)
class MultiStepPhase:
    """The GDMSA forms under ``steps="auto"`` (module docstring, M1-M3)."""

    name: str
    blocks: Any  # Blocks
    rule: StopRule
    max_inner: int = 20
    inner_ratio: float = 1.0 / 3.0
    #: Armijo on Phi (M2-M3); without it (sampled estimates, whose comparisons of Phi are noise) the AdaGrad-norm
    #: step of l.4 after the ascent of l.1-3
    backtrack: bool = True

    def start(self, oracle: CountingOracle, carry: Carry, rng: np.random.Generator) -> MultiStepState:
        x = np.array(carry.x, dtype=np.float64, copy=True)
        y = _project(oracle.y_set, np.asarray(carry.extras["y"], dtype=np.float64))
        calls0 = oracle.calls
        scx, scy = block_scale(x), block_scale(y)
        asc = ascend(oracle, self.blocks, x, y, math.nan, 0.0, rng, scy, self.max_inner, rel=0.1)  # l.1-3 at x_0
        my0 = max(asc.m_first, 1e-300) if math.isfinite(asc.m_first) else 1.0
        return MultiStepState(x, asc.y, asc.t, math.nan, math.nan, my0, 1.0, 0, 0.0, np.zeros(0), math.inf, math.inf, 0,
                              0, calls0, scx, scy, np.zeros_like(x), 0.0, 0)  # fmt: skip

    def step(self, oracle: CountingOracle, st: MultiStepState, rng: np.random.Generator) -> MultiStepState:
        x, y, ty = st.x, st.y, st.ty
        if self.backtrack:  # M0: y at x to the tolerance of the trials (one estimate when it is there already), so that
            # M3 compares two values of Phi of the same accuracy
            asc = ascend(oracle, self.blocks, x, y, ty, self.inner_ratio * st.rx * st.my0, rng, st.sy, self.max_inner)
            y, ty = asc.y, asc.t
        g, _ = self.blocks.grad_x(oracle, x, y, self.blocks.sample(oracle, 0, rng), rng, st.sx)  # M1 (Alg. 2 l.4)
        gn = float(np.linalg.norm(g))
        gx0 = _reference(st.gx0, gn, st.t)
        eta = 0.1 * st.sx / max(gn, 1e-300) if math.isnan(st.eta) else st.eta
        rx = gn / math.sqrt(max(gx0, 1e-300))
        target = self.inner_ratio * rx * st.my0
        if not self.backtrack:  # l.4 with an AdaGrad-norm step, then l.1-3 at the new point
            vx = st.vx + rx * rx
            x_next = x - eta / math.sqrt(max(vx, 1e-300)) * g
            asc = ascend(oracle, self.blocks, x_next, y, ty, target, rng, st.sy, self.max_inner)
            trial = Trial(True, x_next, asc.y, asc.t, asc.m, eta, 1)
            st = dataclasses.replace(st, vx=vx)
        else:
            trial = descend(oracle, self.blocks, x, y, g, eta, ty, target, rng, st.sy, self.max_inner)  # M2-M3
        ry = trial.m / st.my0 if math.isfinite(trial.m) else 0.0
        hist, med, best, since = _progress(st.hist, max(rx, ry), st.best, st.since)
        gm = (1.0 - _BETA) * st.gm + _BETA * g
        gs = (1.0 - _BETA) * st.gs + _BETA * gn * gn
        return dataclasses.replace(
            st, x=trial.x, y=trial.y, ty=trial.t, eta=trial.eta, gx0=gx0, rx=rx,
            rejected=0 if trial.accepted else st.rejected + 1, hist=hist, r=med, best=best, since=since, t=st.t + 1,
            gm=gm, gs=gs, quiet=st.quiet + 1 if _noise_ratio(gm, gs) <= 1.0 else 0,
        )  # fmt: skip

    def end(self, oracle: CountingOracle, st: MultiStepState) -> PhaseEnd | None:
        if st.rejected >= 3:
            how = End.NEXT if self.rule.refine_next else End.NOISE_LIMITED
            return PhaseEnd(how, f"no decrease of Phi along the estimated gradient in {st.rejected} steps of 12 trials "
                                 f"each (relative stationarity estimate {st.r:.3g})")
        if st.t < _WINDOW:
            return None
        return self.rule.check(oracle, st.r, st.since, st.t, oracle.calls - st.calls0, st.quiet)

    def carry(self, st: MultiStepState) -> Carry:
        return Carry(st.x, {"y": st.y})

    def outputs(self, st: MultiStepState) -> Mapping[str, Array]:
        return {"x": st.x, "y": st.y}
