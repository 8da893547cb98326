"""The refinement phase of the minimax solvers: quasi-Newton on ``Phi(x) = max_{y in Y} F(x, y)``.

Where the problem is deterministic (a single component, or all ``n`` components affordable), the
stochastic phase hands its point over to this phase, which runs the deterministic refinement engine
:mod:`zoframe.refine` on ``Phi`` (:class:`~zoframe_minimax.inner.PhiSmooth`): each value of ``Phi`` is an
inner maximum solved to ``inner_rtol`` (warm-started from the last maximiser), each gradient the
differences of ``F(., y*)`` (Danskin). One iteration of the phase is one iteration of the engine (Q1-Q5
of :mod:`zoframe.refine`).

It ends

* ``CONVERGED`` when the engine's test passes: the gradient of ``Phi`` ``|g|_inf <= gtol`` (``gtol`` in the
  problem's units: units of ``F`` per unit of ``x``), or each entry below ``rtol`` times its coordinate's
  curvature times its scale (a Newton step of relative length ``rtol``), or no decrease at the rounding of the
  values; or when an accepted step moves no coordinate by more than ``xtol`` (in the units of ``x``);
* ``NOISE_LIMITED`` when the values' noise hides any further decrease;
* ``FAILED`` when the line search stalls with a resolvable gradient, or when the inner maximum at a trial
  point cannot be found (the message says why: ``y`` running away means ``F(x, .)`` is not concave there);
* ``DIVERGED`` by the phased solver's divergence test (``x``, ``y*``, or ``Phi`` growing without bound).
"""

from __future__ import annotations

from collections.abc import Mapping
import dataclasses
from dataclasses import dataclass
import math

import numpy as np

from zoframe.certificate.minimax import INNER_RTOL, floored_scales
from zoframe.oracle import CountingOracle
from zoframe.phases import Carry, End, PhaseEnd
from zoframe.protocols import Array
from zoframe.refine import (
    CONVERGED,
    NOISE_LIMITED,
    STALLED,
    QNState,
    RefineSettings,
    Region,
    describe,
    qn_start,
    qn_step,
)
from zoframe_minimax.inner import InnerFailure, PhiSmooth

__all__ = ["RefinePhase", "RefineState"]

#: a stop of the engine without its own test (noise-limited at the rounding of exact values, or a stalled line
#: search) is a convergence when the projected gradient is below this fraction of its reference (a Newton step of
#: 1e-4 of the scale): the certificate then decides success
_SMALL = 1e-4


@dataclass(frozen=True)
class RefineState:
    """``x``, ``y`` (the inner maximiser at ``x``), ``value`` (``Phi(x)``), the engine's state ``qn``, the last
    accepted step ``|dx|_inf`` (``inf`` before one), ``failure`` (why an inner solve failed, else empty) and
    ``pinned`` (accepted steps in a row held at the engine's step bound: after three, the engine restarts with the
    scales of the current point, :func:`zoframe.certificate.minimax.floored_scales`)."""

    x: Array
    y: Array
    value: float
    qn: QNState
    dx: float
    failure: str
    pinned: int


@dataclass(frozen=True)
class RefinePhase:
    """Quasi-Newton on ``Phi`` with the inner maximum solved at each point (module docstring)."""

    name: str = "refinement"
    gtol: float | None = None
    xtol: float | None = None
    rtol: float = 1e-8
    inner_rtol: float = INNER_RTOL

    def _settings(self) -> RefineSettings:
        return RefineSettings(gtol=self.gtol, rtol=self.rtol, estimate_noise=True)

    def _region(self, oracle: CountingOracle) -> Region:
        return Region.of(oracle.feasible_set, oracle.dim)

    def _fn(self, oracle: CountingOracle, qn: QNState | None = None) -> PhiSmooth:
        """``Phi`` with the inner tolerance for the outer state ``qn``: ``1e-4`` of the outer relative projected
        gradient (at most ``1e-6``, at least ``inner_rtol``), so that far from the answer the inner solves stop earlier
        (``Phi``'s error is second order in the inner one, ``grad Phi``'s first order, amplified by the coupling
        ``F_xy``: the margin of ``1e-4`` keeps both well below what the outer step needs) and near it they are as tight
        as ``inner_rtol``."""
        rtol = self.inner_rtol
        if qn is not None and qn.ref > 0 and math.isfinite(qn.pg):
            rtol = min(1e-6, max(self.inner_rtol, 1e-4 * qn.pg / qn.ref))
        return PhiSmooth(oracle, rtol=rtol)

    def start(self, oracle: CountingOracle, carry: Carry, rng: np.random.Generator) -> RefineState:
        y0 = carry.extras.get("y")
        y = np.array(oracle.y0 if y0 is None else y0, dtype=np.float64)
        if oracle.y_set is not None:
            y = np.asarray(oracle.y_set.project(y), dtype=np.float64)
        x = np.array(carry.x, dtype=np.float64, copy=True)
        region = self._region(oracle)
        try:
            qn = qn_start(self._fn(oracle), x, region, self._settings(), aux=y, scale=floored_scales(x, region))
        except InnerFailure as exc:
            dummy = QNState(
                x=x, value=math.nan, g=np.zeros_like(x), B=np.zeros((0, 0)), curv=np.full(x.shape, np.nan),
                h=np.zeros_like(x), scale=np.ones_like(x), central=True, noise=0.0, aux=exc.result.y, lam=math.nan,
                pg=math.inf, ref=math.nan, gerr=math.nan, it=0, points=0, resets=0, status=STALLED, message=str(exc),
            )  # fmt: skip
            return RefineState(x, exc.result.y, math.nan, dummy, math.inf, _why(exc), 0)
        return RefineState(qn.x, qn.aux, qn.value, qn, math.inf, "", 0)

    def step(self, oracle: CountingOracle, st: RefineState, rng: np.random.Generator) -> RefineState:
        region = self._region(oracle)
        try:
            if st.pinned >= 3:  # three steps in a row held at the engine's bound (10 times the scales): new scales
                qn = qn_start(self._fn(oracle, st.qn), st.x, region, self._settings(), aux=st.y, value=st.value,
                              scale=floored_scales(st.x, region))  # fmt: skip
                return RefineState(qn.x, qn.aux, qn.value, qn, st.dx, "", 0)
            qn = qn_step(self._fn(oracle, st.qn), st.qn, region, self._settings())
        except InnerFailure as exc:
            return dataclasses.replace(st, failure=_why(exc))
        moved = qn.it > st.qn.it
        dx = float(np.abs(qn.x - st.x).max(initial=0.0)) if moved else st.dx
        bound = moved and float(np.max(np.abs(qn.x - st.x) / st.qn.scale, initial=0.0)) >= 0.99 * self._settings().max_step
        return RefineState(qn.x, qn.aux, qn.value, qn, dx, "", st.pinned + 1 if bound else 0)

    def end(self, oracle: CountingOracle, st: RefineState) -> PhaseEnd | None:
        if st.failure:
            return PhaseEnd(End.FAILED, st.failure)
        qn = st.qn
        if qn.status == CONVERGED:
            return PhaseEnd(End.CONVERGED, f"Phi {describe(qn)}")
        small = qn.ref > 0 and qn.pg <= _SMALL * qn.ref
        missed = self.gtol is not None and not qn.pg <= self.gtol
        if qn.status == NOISE_LIMITED:
            if small and not missed:  # exact values: the noise is the rounding of Phi at the start of the phase
                return PhaseEnd(End.CONVERGED, f"Phi {describe(qn)}; the projected gradient is {qn.pg / qn.ref:.3g} of its "
                                               "reference, at the rounding of the values")
            return PhaseEnd(End.NOISE_LIMITED, f"Phi {describe(qn)}")
        if qn.status == STALLED:
            if small and not missed:
                return PhaseEnd(End.CONVERGED, f"Phi {describe(qn)}; the projected gradient is {qn.pg / qn.ref:.3g} of its "
                                               "reference: below what the inner maximum's accuracy lets the differences "
                                               "resolve")
            return PhaseEnd(End.FAILED, f"Phi {describe(qn)}")
        if self.xtol is not None and st.dx <= self.xtol:
            return PhaseEnd(End.CONVERGED, f"the last step moved x by {st.dx:.3g} <= xtol = {self.xtol:g} "
                                           f"({qn.it} iterations)")
        return None

    def carry(self, st: RefineState) -> Carry:
        return Carry(st.x, {"y": st.y})

    def outputs(self, st: RefineState) -> Mapping[str, Array]:
        return {"x": st.x, "y": st.y}


def _why(exc: InnerFailure) -> str:
    res = exc.result
    what = "F(x, .) is not concave or is unbounded above there" if res.outcome == "runaway" else res.outcome
    return (f"the inner maximum at a point of the refinement (|x|_inf = {float(np.abs(exc.x).max(initial=0.0)):.3g}) "
            f"was not found ({what}): {res.message}")
