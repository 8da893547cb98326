"""The precision phase of DSZOG / ADSZOG: a working-set SQP from function values only.

The penalty minimax of the papers finds a feasible region cheaply from sampled constraints, but its
stochastic steps stall around 1e-2 relative accuracy. This phase takes over (or runs alone on small
problems) and converges to the tolerances the user gives, reading the constraints in the way of the
exchange methods for semi-infinite programs (Hettich & Kortanek, *Semi-infinite programming*, SIAM
Review 35, 1993): the SQP model holds a small working set ``W`` of constraints, and one value-only
pass over all ``m`` constraints per trial point adds the violated and newly active ones back. The
step is Powell's SQP (*A fast algorithm for nonlinearly constrained optimization calculations*,
1978: damped BFGS on the Lagrangian, a line search on his l1 merit function with one weight per
constraint) with the quadratic subproblem solved by Goldfarb & Idnani's dual method
(:mod:`zoframe_constrained.qp`; a least-distance program, Lawson & Hanson, 1974, ch. 23, through
:func:`ldp.nnls`, where that stops on its limit) and Powell's / Kraft's elastic variable when the
linearisation is inconsistent (Kraft, *A software package for sequential quadratic programming*,
DFVLR-FB 88-28, 1988).

Equality constraints ``h_l(x) = 0`` (``oracle.m_eq > 0``, few) are always in the working set: their
values and difference Jacobian come with those of ``W`` (one more call over the same ``2 d + 1``
points), the QP holds each as an equality row (its multiplier ``mu_l`` of free sign), the elastic
form relaxes it to ``h_l + J_l p = xi h_l``, the merit weighs ``|h_l|``, and the violation of the
stopping test and of the best feasible point is ``max(max_j g_j, max_l |h_l|)``.

Scaling. The phase works in scaled variables ``z = x / c`` with one scale per variable, fixed when it starts
(:func:`variable_scales`): ``c_i = |x0_i|``, for an entry of ``x0`` at 0 the typical size of the others (their
median; 1 when all are 0), at least ``1e-4`` of that typical size, or the width ``hi_i - lo_i`` of the box where
that is finite and narrower; no floor of 1. ``B``, the QP, the step bound ``Delta``, the second-order probe and
the step and KKT tests (P5) live in ``z``. Multiplying a variable (with its bounds and its start) by a constant
therefore changes no decision of the phase. The violation test stays in the problem's own units.

Noise. The values may be noisy (measurements, simulations, truncated iterations) or only rounded; either
way they resolve differences down to a level ``sigma`` that the phase estimates with More & Wild's ECNoise
(:func:`zoframe.noise.estimate_noise`: the objective and the working set's constraints at 9 points of a random
line through ``x``, in ``z``), at the start when that costs less than one iteration or when the first second
differences are rough (above ``1e4 eps^(2/3) max |f|``: then the differences are taken again with steps sized to
the noise), and otherwise at the first line search that finds no decrease (then ``B``, built from differences the
noise may have dominated, starts afresh from the measured curvatures, and curvatures measured before are kept only
above four standard deviations of a noisy second difference), or when the KKT residual has not halved in five
iterations while ``f`` moved by at most ``1e-6`` of its size (a noise too small for the first differences to show,
about ``1e-10`` of ``|f|``, that the quasi-Newton steps wander in). The estimate follows the point (P0). From then
on the difference steps follow the noise and the curvature that
the central differences measure anyway (second differences from the same points; Gill, Murray, Saunders &
Wright, *Computing forward-difference intervals for numerical optimization*, SIAM J. Sci. Stat. Comput. 4,
1983): ``h_i = (3 sigma c_i / |f''_ii|)^(1/3)`` per variable, one set of steps for the objective and one for the
constraints (each call has its own points), within a factor 10 of ``(sigma / |f|)^(1/3) max(c_i, |x_i|)`` (the
curvature itself comes from noisy differences) and ``[1e-2 eps^(1/3), 0.1] max(c_i, |x_i|)``; before, the
step is ``eps^(1/3) max(c_i, |x_i|)``. The same estimate gives the error of the KKT residual
(``sigma / h + h^2 |f'''| / 6`` per entry, the multipliers' share of the constraints' error included): a residual
within :data:`_FLOOR` times its error (an error at most the residual's scale: :data:`_ERR_MAX`), or a predicted
change within that many times the noise of the merit, is as small as these values can show; a prediction counts
only from a model without quasi-Newton memory (``B`` diagonal: reset to the measured curvatures), since a ``B``
built from noisy differences can overrate the curvature and predict a tiny decrease where a large one is left.

One iteration (:func:`precision_step`, the lines ``# P.k`` in the code)::

    P0  once noise is seen: the estimate is made again when |f| moved tenfold from where it was made (noise relative
        to the values shrinks with them), and NOISE_LIMITED is only said with an estimate made where |f| was at most
        twice its value now (else the estimate is made at the point and the phase goes on); before: it is made
        when the KKT residual has not halved for five iterations while |f| moved by at most 1e-6 of itself, and
        asked once after fifteen such iterations whatever f did (the objective's line first; kept only when the
        level stands well above the rounding of the values)
    P1  W = {j : lambda_j > 0 at the last QP} + the top-K constraints of the last full pass
    P2  grad f (all n components) and J_W by central differences: one objective call over 2d
        points, one constraint call over 2d + 1 points (g_W at x too), all inside the bounds; where a
        difference point's value is not finite (a failed trial: NaN / inf turned +inf), the one-sided
        difference on the other side; the second differences give the curvatures of the steps (none where the
        shorter side is below a tenth of the longer: next to a bound)
    P3  damped BFGS update of B (in z) with s = (x - x_prev) / c, y = c * (grad L(x, lam) - grad L(x_prev, lam));
        at the first iteration B = diag(c^2 |f''_ii|) when the measured curvatures spread over more than two
        orders of magnitude, else the identity; once noise is seen, a pair whose y is within the noise of the two
        gradients is skipped, and after three such pairs in a row B starts afresh from the measured curvatures
        (the constraints' share where the objective's is not resolved)
    P4  QP in z:  min 1/2 q^T B q + (c grad f)^T q  s.t.  g_W + J_W (c q) <= 0,  lo <= x + c q <= hi,
        |q|_inf <= Delta;  p = c q  (elastic variable xi in [0, 1] on the violated rows when it is inconsistent)
    P5  stop (CONVERGED) when the max violation over all m constraints (full pass) is <= violation_tol,
        the KKT residual |c (grad f + J_W^T lam + bounds)|_inf <= kkt_tol max(1, |c grad f|_inf), and the step
        |q|_inf <= xtol max(1, |z|_inf) or the predicted change |grad f^T p| + sum lam_j |g_j| <=
        max(ftol max(1, |f|), 4 sigma_merit); at the noise floor (the residual within 4 times its error, that
        error at most 1, the predicted change within 4 sigma_merit with B and with B afresh, feasible) the phase
        ends NOISE_LIMITED, or CONVERGED when the level it found is the rounding of the values (More & Wild's
        "no noise detected")
    P5b at such a point, a second-order probe: x +- t c v along two random directions v in the null space of
        the active gradients (those whose multiplier force exceeds 1e-8 max(1, |grad f|): a weakly active
        constraint does not bind the probe); a feasible probe point lower by more than 4 sigma (a saddle, a
        maximum along the boundary) is taken as the next iterate and the phase goes on
    P5c at such a point with a violation left, the QP step (small, but aimed at the linearised constraints) is
        tried once: it is taken when the max violation over all m (full pass) drops and the merit does not rise
    P6  line search on Powell's merit  f + sum_{j in W} w_j max(0, g_j) + w_out (sum of the violations outside W)
        + sum_l v_l |h_l|: one weight per constraint, w_j = max(1.5 lam_j, (w_j + 1.5 lam_j) / 2) (so that a
        constraint measured in large units weighs as little as its multiplier says), at least the weight that
        makes p a descent direction when the linearisation removes violation (Nocedal & Wright, (18.36); kept
        only while x is infeasible beyond violation_tol), w_out the largest weight; each trial point is one
        objective pass over the n components and one blocked value-only pass over all m constraints
        (:func:`zoframe.measures.max_violation_full`: max, sum of the violations, the top K values for the
        next W); Armijo's test relaxed by twice the noise of the merit once noise is seen (Berahas, Byrd &
        Nocedal 2019); a trial point with a non-finite value is a failed trial
    P6a exchange rounds: when the full step is rejected and its pass shows constraints outside W violated
        beyond the linearised violation, those (up to K) join W with their values and difference rows at x
        (over the points of P2) and the QP is solved again from x, before any shortening of the step (at most
        5 rounds): at a crowded vertex (m >> d rows near the solution) a shortened step removes only a
        fraction of the violation per iteration, a step of the enlarged QP removes it
    P6b when the full step is rejected, a second-order correction: the least-norm move (in z) back onto the
        linearisation of the active rows at x + p, tried once before the step is shortened (the Maratos effect)
    P6c ten iterations in a row whose accepted step was cut below 0.1 of the QP step reset B to a multiple of
        the identity; the third time, the phase has stalled (progress by crumbs: the model leads nowhere),
        unless it is at the noise floor
    P6d once noise is seen: when no trial is accepted and the decrease the model predicts along p is within 4
        times the noise of the merit, the step is tried once more, longer (predicting 8 times that noise, within
        the step bound): a decrease that stands out of the noise is taken; none, with B without quasi-Newton
        memory and the prediction within 4 times the noise of the merit plus the error the gradients' own error
        puts on it (sum_i e_i |q_i|), means the merit cannot decrease within the noise: NOISE_LIMITED (also at the
        last line search of a stall); with a B built from updates, B starts afresh from the measured curvatures
    P6e once noise is seen: a full step that decreased the merit by at least the model's prediction is tried twice
        as long (up to 8 p, within the step bound) while the merit keeps decreasing and the violation does not
        grow (a B from noisy differences that overrates the curvature keeps steps short)
    P6f the step bound doubles after a full step that reached half of it; a QP step that only the bound stopped
        and whose violation outgrew both the one at x and four times the linearised one halves it to the step
        (the merit does not stop an objective that falls faster outside the feasible set than its penalty grows)

A line search that finds no decrease (after the noise is estimated, if it was not yet) ends the phase at the
noise floor as in P5; otherwise B is reset, and after four such line searches in a row the phase has stalled.

As a phase of the solvers (:class:`PrecisionPhase`, :mod:`zoframe.phases`): it starts at the point the
restoration hands over (with the restoration's active set as its first ``W``), or at ``x0`` on a small
problem or one with equality constraints; one step is one iteration; its end (converged, noise-limited,
stalled, out of budget, diverged) is the run's, or a stall hands back to the penalty phase
(``zoframe_constrained.solvers``).

Cost of an iteration: ``2 d n + (2 d + 1)|W|`` for the gradients plus ``n + m`` per trial point
(usually one), ``(2 d + 1)`` values per row that joins ``W`` in an exchange round, ``|A| + m_eq``
values for a second-order correction (``A`` the active rows, at most one per iteration), and once per phase
the noise estimate, ``9 (n + |W| + m_eq)`` values per attempt (at most four): about ``m + 2 d (n + |W|)``
evaluations, against ``(d + 1) m`` for a finite-difference SQP over all constraints; memory
``O(|W| d + d^2)`` besides the blocks of the pass. Every evaluation goes through the counting oracle under the
purpose ``"precision"``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
import math
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from scipy.linalg import cho_factor, solve_triangular

from zoframe.errors import NonFiniteValueError
from zoframe.measures import max_violation_full
from zoframe.noise import estimate_noise
from zoframe.oracle import CountingOracle
from zoframe.phases import Carry, PhaseEnd
from zoframe.protocols import Array, IntArray
from zoframe_constrained.ldp import nnls
from zoframe_constrained.qp import dual_qp

if TYPE_CHECKING:
    from zoframe_constrained.solvers import _PenaltyMinimax

__all__ = [
    "NOISE_LIMITED", "PrecisionPhase", "PrecisionPhaseState", "PrecisionSettings", "PrecisionState", "iteration_cost",
    "precision_start", "precision_step", "returned", "variable_scales",
]  # fmt: skip

_EPS = float(np.finfo(np.float64).eps)
#: central-difference step relative to max(c_i, |x_i|) (c the scales) before the noise is known: balances
#: truncation and rounding (about 1e-10 accuracy)
_H = _EPS ** (1.0 / 3.0)
#: a second difference whose shorter side is below this fraction of the longer (a point next to a bound) gives no
#: curvature
_LOPSIDED = 0.1
#: at most this many trial points per line search
_TRIALS = 10
#: consecutive line searches without an accepted point before the phase gives up (after resetting B)
_FAILS = 4

#: at most this many exchange rounds (P6a) per iteration
_ROUNDS = 5

#: P6c: when the accepted steps were cut below _SLOW_ALPHA of the QP step _SLOW iterations in a row, B is reset to a
#: multiple of the identity; after _RESETS such resets the phase has stalled
_SLOW, _SLOW_ALPHA, _RESETS = 10, 0.1, 2

#: at most this many second-order probes find a better point (then a KKT point is accepted without one)
_PROBES = 5

#: the noise floor: a residual within this many times its error (a change within this many times the noise) is noise
_FLOOR = 4.0
#: an accepted noise level at most this many eps |value| is the rounding of the values (zoframe.noise.ROUNDING_FACTOR)
_ROUNDING = 16.0
#: once noise is seen, a difference step stays within this factor (and its inverse) of (noise / |f|)^(1/3) of the
#: variable's size: the curvature behind the GMSW step comes from noisy second differences itself
_SPREAD = 0.1
#: the floor is judged only where the residual's error is at most this (relative as the residual, see _error): a
#: gradient whose error exceeds its own scale (steps the noise or a bad curvature spoiled) shows no floor
_ERR_MAX = 1.0
#: P6e: a full step is tried at most this many times longer (doubling)
_EXPAND = 8.0
#: the first second differences are rough (noise suspected, estimated at once) above this many eps^(2/3) |f|
_ROUGH = 1e4
#: a curvature measured before the noise was known is kept when above this many noise / h^2 (4 standard deviations
#: of a second difference of noisy values, sqrt(6) noise / h^2 each)
_NOISY_RESOLVED = 4.0 * math.sqrt(6.0)
#: P0: the noise is estimated again when |f| moved by more than this factor from where it was estimated
_DRIFT = 10.0
#: points of the noise line (ECNoise)
_NOISE_POINTS = 9
#: P0: with the noise not yet estimated, a KKT residual that has not halved in this many iterations while the objective
#: moved by at most _FLAT_F of its size asks what the values can resolve (the estimate is made with the next
#: iteration's differences; a noise above about 1e-7 of |f| shows in the first differences already, see _ROUGH)
_FLAT, _FLAT_F = 5, 1e-6
#: P0: with the noise not yet estimated, a KKT residual that has not halved in this many iterations (f moving or not)
#: asks once, and counts only a level well above the rounding (a smooth function's differences can pass ECNoise)
_LONG = 15
#: P3, once noise is seen: after this many quasi-Newton pairs in a row skipped as within the noise, B afresh
_HIDDEN = 3
#: the relative floor of a scale: at least this fraction of the typical size of the other variables
_SCALE_FLOOR = 1e-4

#: status codes of the phase (kept as a float in the packed state)
RUNNING, CONVERGED, STALLED, DIVERGED, BUDGET, NOISE_LIMITED = 0, 1, 2, 3, 4, 5
#: what is known of the noise: not estimated, noise seen above rounding, the rounding of the values, no level found
NOISE_UNKNOWN, NOISE_SEEN, NOISE_ROUNDING, NOISE_FAILED = 0, 1, 2, 3
#: why a phase stalled: no decrease along the QP step, progress by crumbs (P6c), difference gradients not finite
WHY_NONE, WHY_NO_DECREASE, WHY_CRUMBS, WHY_NONFINITE = 0, 1, 2, 3


@dataclass(frozen=True)
class PrecisionSettings:
    """The phase's tolerances, in the problem's own units where they have units (see the module docstring, P5).

    ``xtol``: step test ``|q|_inf <= xtol max(1, |z|_inf)`` (``q = p / c``, ``z = x / c``); ``ftol``: predicted change
    of the objective ``<= ftol max(1, |f|)``; ``kkt_tol``: KKT residual ``|c r|_inf <= kkt_tol max(1, |c grad f|_inf)``;
    ``violation_tol``: max violation over all ``m`` constraints; ``working``: ``K``, the top values of each full pass
    that join the working set (``None``: ``min(m, max(4 d, 32))``); ``limit``: the phase ends DIVERGED when
    ``|x|_inf`` exceeds it; ``noise``: whether the phase estimates the noise of the values (steps, noise floor).
    """

    xtol: float = 1e-8
    ftol: float = 1e-12
    kkt_tol: float = 1e-6
    violation_tol: float = 1e-6
    working: int | None = None
    limit: float = 1e12
    noise: bool = True

    def top(self, oracle: CountingOracle) -> int:
        k = self.working if self.working is not None else max(4 * oracle.dim, 32)
        return int(min(oracle.m, k))


def _empty() -> Array:
    return np.zeros(0)


def _empty_idx() -> IntArray:
    return np.zeros(0, dtype=np.intp)


@dataclass(frozen=True)
class PrecisionState:
    """The phase between iterations: the point, its values, the working set's multipliers, ``B``, the merit's
    weights, the noise and the curvatures the difference steps follow."""

    x: Array
    fx: float  # objective (mean over all n components) at x
    vmax: float  # max_j g_j(x) over all m (full pass)
    cand: IntArray  # the top-K constraints of the pass at x (largest first)
    B: Array  # damped-BFGS approximation of the Lagrangian's Hessian
    lam_idx: IntArray  # constraints with a positive multiplier at the last QP
    lam: Array
    mu: Array  # multipliers (free sign) of the m_eq equality constraints at the last QP
    gL_prev: Array  # grad L(x_prev, lam) (empty before the first step)
    s_prev: Array  # x - x_prev (empty before the first step)
    best_x: Array  # the best point (by the merit) with max violation <= violation_tol (empty: none yet)
    scale: Array  # the variables' scales c (x = c * z): B, the QP, the step bound and s_prev live in z
    pen_idx: IntArray = field(default_factory=_empty_idx)  # constraints with a weight in the merit (sorted)
    pen: Array = field(default_factory=_empty)  # their weights (Powell)
    pen_eq: Array = field(default_factory=_empty)  # the weights of the equality constraints
    curv_f: Array = field(default_factory=_empty)  # |f''_ii| from the last central differences (nan: not resolved)
    curv_g: Array = field(default_factory=_empty)  # max over W of |g_j''_ii| (nan: not resolved)
    guess: Array = field(default_factory=_empty)  # 1 where the scale is a guess (the start's entry was 0)
    best_f: float = math.inf
    best_v: float = math.inf
    best_pen: float = 0.0  # the merit's penalty at the best point, with the weights of the iteration that found it
    sviol: float = 0.0  # sum_j max(0, g_j(x)) over all m (the pass at x)
    rho: float = 0.0  # the merit's floor weight (Nocedal & Wright (18.36)), kept while x is infeasible
    delta: float = 1.0  # the step bound |p / c|_inf <= delta (scaled units)
    it: int = 0
    fails: int = 0
    slow: int = 0  # consecutive iterations whose accepted step was cut below _SLOW_ALPHA of the QP step
    resets: int = 0  # resets of B after _SLOW such iterations (P6c)
    status: int = RUNNING
    why: int = WHY_NONE  # why it stalled
    kkt: float = math.nan  # the last KKT residual, relative to max(1, |c grad f|_inf)
    kkt_err: float = math.nan  # its error from the noise (or the rounding) of the values and the steps
    step: float = math.nan  # the last |p|_inf
    working: int = 0  # |W| of the last iteration
    cost: int = 0  # evaluations of the last iteration
    spent: int = 0  # evaluations of the phase so far
    elastic: int = 0  # iterations whose QP needed the elastic variable
    dropped: int = 0  # violated constraints left out of W by the cap K (last pass)
    before: int = 0  # evaluations of the run before the phase started
    probes: int = 0  # second-order probes that found a better feasible point (P5)
    exchanges: int = 0  # exchange rounds (P6a) so far
    noise_f: float = math.nan  # the estimated noise of f (absolute; nan: not estimated)
    noise_g: float = math.nan  # the largest estimated noise of the working set's constraints (absolute)
    noise_kind: int = NOISE_UNKNOWN
    noise_evals: int = 0  # evaluations of the noise estimate
    floor_f: float = math.nan  # the noise level of f behind the last floor test (estimated, or the rounding)
    floor_m: float = math.nan  # the noise of the merit (f and the multipliers' share of the constraints') at the last test
    drop: float = math.nan  # the decrease of the merit the model predicted along the last QP step
    noise_at: float = math.nan  # the objective's value at the point of the last noise estimate
    kkt_low: float = math.inf  # the lowest KKT residual so far (the last one that halved the one before it)
    flat: int = 0  # iterations since the KKT residual last halved kkt_low
    f_low: float = math.nan  # the objective where kkt_low was set
    hidden: int = 0  # consecutive quasi-Newton pairs skipped as within the noise (P3)

    @property
    def violation(self) -> float:
        return max(self.vmax, 0.0)

    _ARRAYS = ("x", "cand", "B", "lam_idx", "lam", "mu", "gL_prev", "s_prev", "best_x", "scale", "pen_idx", "pen",
               "pen_eq", "curv_f", "curv_g", "guess")  # fmt: skip
    _INTS = ("cand", "lam_idx", "pen_idx")
    _SCALARS = ("fx", "vmax", "best_f", "best_v", "best_pen", "sviol", "rho", "delta", "it", "fails", "slow", "resets",
                "status", "why", "kkt", "kkt_err", "step", "working", "cost", "spent", "elastic", "dropped", "before",
                "probes", "exchanges", "noise_f", "noise_g", "noise_kind", "noise_evals", "floor_f", "floor_m", "drop",
                "noise_at", "kkt_low", "flat", "f_low", "hidden")  # fmt: skip
    _COUNTS = ("it", "fails", "slow", "resets", "status", "why", "working", "cost", "spent", "elastic", "dropped", "before",
               "probes", "exchanges", "noise_kind", "noise_evals", "flat", "hidden")  # fmt: skip

    def pack(self) -> tuple[Array, ...]:
        """The state as a tuple of arrays (what a checkpoint stores)."""
        scal = np.array([float(getattr(self, k)) for k in self._SCALARS])
        return (*(np.asarray(getattr(self, k)) for k in self._ARRAYS), scal)

    @classmethod
    def unpack(cls, packed: tuple[Array, ...]) -> PrecisionState:
        arrays: dict[str, Any] = dict(zip(cls._ARRAYS, packed[:-1], strict=True))
        for k in cls._INTS:
            arrays[k] = np.asarray(arrays[k], dtype=np.intp)
        scal: dict[str, Any] = dict(zip(cls._SCALARS, packed[-1].tolist(), strict=True))
        for k in cls._COUNTS:
            scal[k] = int(scal[k])
        return cls(**arrays, **scal)


def _bounds(oracle: CountingOracle) -> tuple[Array, Array]:
    box = oracle.feasible_set
    d = oracle.dim
    lo = getattr(box, "lower", None)
    hi = getattr(box, "upper", None)
    lo_v = np.broadcast_to(np.asarray(-math.inf if lo is None else lo, dtype=np.float64), (d,)).copy()
    hi_v = np.broadcast_to(np.asarray(math.inf if hi is None else hi, dtype=np.float64), (d,)).copy()
    return lo_v, hi_v


def variable_scales(x0: Array, lo: Array, hi: Array) -> Array:
    """The diagonal scaling ``c`` of the phase (``x = c * z``): ``|x0_i|``; for an entry at 0 the typical size of the
    others (the median of the nonzero ``|x0_j|``, 1 when all are 0); at least ``1e-4`` of that typical size (an
    entry that starts at ``1e-12`` by accident does not get steps at the rounding level); the box width
    ``hi_i - lo_i`` where that is finite and narrower. No floor of 1: a variable of size ``1e-3`` gets steps and a
    quasi-Newton matrix in its own units. Everything the phase measures in a length of its own (the quasi-Newton
    matrix, the QP, the step bound, the second-order probe, the difference steps, the step and KKT tests) is in the
    scaled variables ``z``, so that multiplying a variable by a constant (together with its bounds and its start)
    changes nothing."""
    a = np.abs(np.asarray(x0, dtype=np.float64))
    nz = a[(a > 0) & np.isfinite(a)]
    typical = float(np.median(nz)) if nz.shape[0] else 1.0
    mag = np.where(a > 0, np.maximum(a, _SCALE_FLOOR * typical), typical)
    width = hi - lo
    narrow = np.isfinite(width) & (width > 0.0) & (width < mag)
    out: Array = np.maximum(np.where(narrow, width, mag), 1e-300)
    return out


def _inside(oracle: CountingOracle, X: Array) -> Array:
    box = oracle.feasible_set
    return X if box is None else np.asarray(box.project(X), dtype=np.float64)


def _objective(oracle: CountingOracle, X: Array) -> Array:
    """The objective ``f = mean_i l_i`` at the rows of ``X`` (all ``n`` components, one call)."""
    out: Array = np.asarray(oracle.objective(X, None, purpose="precision"), dtype=np.float64).mean(axis=1)
    return out


@dataclass(frozen=True)
class _Pass:
    """A full pass at a point: ``vmax = max(max_j g_j, max_l |h_l|)``, the sum of the inequalities' violations,
    the top ``k`` constraints and their values, and the equalities' values."""

    vmax: float
    sviol: float
    top: IntArray
    val: Array
    h: Array


def _pass(oracle: CountingOracle, x: Array, k: int) -> _Pass:
    """One value-only pass over all ``m`` constraints in blocks (:func:`zoframe.measures.max_violation_full`); with
    equality constraints one more call of ``m_eq``."""
    full = max_violation_full(oracle, x, top=k, purpose="precision")
    vmax = float(full.max_value)
    h = np.zeros(0)
    if oracle.m_eq:
        h = np.asarray(oracle.equalities(x[None, :], None, purpose="precision"), dtype=np.float64)[0]
        vmax = max(vmax, float(np.abs(h).max()))
    if not math.isfinite(float(full.sum_violation)):
        vmax = math.inf
    return _Pass(vmax, float(full.sum_violation), np.asarray(full.top_indices, dtype=np.intp),
                 np.asarray(full.top_values, dtype=np.float64), h)  # fmt: skip


def iteration_cost(oracle: CountingOracle, working: int) -> int:
    """Evaluations of one iteration with one trial point: ``2 d n + (2 d + 1)(|W| + m_eq) + n + m + m_eq``."""
    d = oracle.dim
    return 2 * d * oracle.n + (2 * d + 1) * (working + oracle.m_eq) + oracle.n + oracle.m + oracle.m_eq


def _noise_cost(oracle: CountingOracle, working: int) -> int:
    """Evaluations of one attempt of the noise estimate (:data:`_NOISE_POINTS` points, the objective and ``W``)."""
    return _NOISE_POINTS * (oracle.n + working + oracle.m_eq)


def precision_start(
    oracle: CountingOracle, x0: Array, settings: PrecisionSettings, active: IntArray | None = None,
    rng: np.random.Generator | None = None, reference: Array | None = None,
) -> PrecisionState:  # fmt: skip
    """The phase's first state at ``x0``: its objective (``n`` evaluations) and one full pass (``m``). The variables'
    scales come from ``reference`` (the run's start, where the user put the variables' sizes; default ``x0``).
    ``rng`` is not used (kept for the callers)."""
    spent0 = oracle.calls
    x = _inside(oracle, np.array(x0, dtype=np.float64, copy=True).reshape(-1))
    fx = float(_objective(oracle, x[None, :])[0])
    if not math.isfinite(fx):
        raise NonFiniteValueError(
            f"the objective is not finite ({fx}) at the point where the precision phase starts, {x}; the phase needs a "
            "finite objective there"
        )
    K = settings.top(oracle)
    ps = _pass(oracle, x, K)
    lam_idx = np.zeros(0, dtype=np.intp) if active is None else np.unique(np.asarray(active, dtype=np.intp))
    d = x.shape[0]
    feasible = max(ps.vmax, 0.0) <= settings.violation_tol
    ref = x if reference is None else np.asarray(reference, dtype=np.float64).reshape(-1)
    ref = ref if ref.shape == x.shape else x
    lo, hi = _bounds(oracle)
    scale = variable_scales(ref, lo, hi)
    guess = ((ref == 0.0) & ~(np.isfinite(hi - lo) & (hi - lo > 0.0) & (hi - lo <= scale))).astype(np.float64)
    st = PrecisionState(
        x=x, fx=fx, vmax=ps.vmax, cand=ps.top, B=np.eye(d), lam_idx=lam_idx, lam=np.zeros(lam_idx.shape[0]),
        mu=np.zeros(oracle.m_eq), gL_prev=np.zeros(0), s_prev=np.zeros(0), best_x=x.copy() if feasible else np.zeros(0),
        best_f=fx if feasible else math.inf, best_v=ps.vmax if feasible else math.inf, scale=scale, sviol=ps.sviol,
        delta=10.0 * max(1.0, float(np.abs(x / scale).max(initial=0.0))), pen_eq=np.zeros(oracle.m_eq), guess=guess,
        spent=oracle.calls - spent0, before=spent0,
    )  # fmt: skip
    return st


# ---------------------------------------------------------------------------------------------- the noise
def _with_noise(
    oracle: CountingOracle, st: PrecisionState, W: IntArray, rng: np.random.Generator, d2f: Array | None = None,
    pinned: bool = True,
) -> PrecisionState:
    """``st`` with the noise of the objective and of the constraints ``W`` (and the equalities) estimated at ``st.x``
    by ECNoise (:func:`zoframe.noise.estimate_noise`: 9 points of a random line in ``z``, one batched call of each kind
    per attempt, at most four attempts). The line keeps away from the bounds: a coordinate within 5 % of its scale
    of a bound does not move. ``d2f``: the objective's second differences of the central differences at ``x``,
    which a real noise level ``sigma`` fills with about ``sqrt(6) sigma`` each: a level ten times their median is
    refused (a smooth function whose high derivatives passed ECNoise's tests). A line point the box would move is no
    value of the line (NaN: that attempt gives no level). ``pinned=False``: nothing is estimated
    at a point with every coordinate at a bound (at the start: a later estimate has a better point). Nothing is evaluated when the budget left cannot pay for four attempts; the estimate
    is made once per phase (``noise_kind`` says what it found)."""
    x, c = st.x, st.scale
    nI = int(W.shape[0])
    remaining = oracle.remaining
    if remaining is not None and remaining < 4 * _noise_cost(oracle, nI):
        return st
    lo, hi = _bounds(oracle)
    free = ((x - lo) > 0.05 * c) & ((hi - x) > 0.05 * c)
    if not free.any():  # every coordinate at a bound: the line crosses them (a kink ECNoise can take for noise)
        if not pinned:
            return st
        free = np.ones_like(free)
    z0 = x / c

    def values(Z: Array) -> Array:
        line = x[None, :] + c[None, :] * np.where(free[None, :], Z - z0[None, :], 0.0)
        X = _inside(oracle, line)
        parts = [_objective(oracle, X)[:, None]]
        if nI:
            parts.append(np.asarray(oracle.constraints(X, W, purpose="precision"), dtype=np.float64))
        if oracle.m_eq:
            parts.append(np.asarray(oracle.equalities(X, None, purpose="precision"), dtype=np.float64))
        out = np.hstack(parts)
        out[(X != line).any(axis=1)] = np.nan  # a point the box moved is off the line (a kink read as noise): no level
        return out

    before = oracle.calls
    est = estimate_noise(values, z0, rng, points=_NOISE_POINTS)
    levels = np.asarray(est.per_column, dtype=np.float64)
    flags = est.column_status
    ok = np.array([s in ("ok", "no noise detected") for s in flags])
    nf = float(levels[0]) if ok[0] else math.nan
    if d2f is not None and math.isfinite(nf):  # the check the central differences give for free: noise sigma puts
        seen = np.abs(d2f[np.isfinite(d2f)])  # about sqrt(6) sigma into each second difference f+ + f- - 2 f
        if seen.shape[0] and float(np.median(seen)) < 0.1 * nf:  # a level the differences do not show: no level
            ok[0], nf = False, math.nan
    rest = levels[1:][ok[1:]]
    ng = float(rest.max()) if rest.shape[0] else math.nan
    if ok[0] and flags[0] == "ok":
        kind = NOISE_SEEN  # the objective's noise is above the rounding of its values
    elif ok[0]:
        kind = NOISE_ROUNDING  # the objective's level is the rounding of its values
    else:  # no level for the objective (a kink, a level its own differences do not show): not treated as noisy
        kind = NOISE_FAILED if not ok.any() else NOISE_ROUNDING
    nf, ng = _digits(nf), _digits(ng)  # the estimate's last bits can follow the arrays' memory alignment (BLAS)
    return dataclasses.replace(
        st, noise_f=nf, noise_g=ng, noise_kind=kind, noise_evals=st.noise_evals + oracle.calls - before, noise_at=st.fx
    )


def _digits(v: float) -> float:
    """``v`` to 10 significant digits (a noise estimate has fewer; the same run with other block sizes, on a pool or
    through ask/tell must take the same decisions bit for bit)."""
    return float(f"{v:.10g}") if math.isfinite(v) else v


def _recheck(st: PrecisionState, dif: _Diffs) -> dict[str, Array]:
    """The curvatures of ``dif`` judged again against the noise just estimated: those measured with steps sized to the
    rounding pass :func:`_resolved` there, but a second difference of noisy values is mostly noise (``sqrt(6) sigma``):
    kept only where they stand above the estimated noise (the next steps follow them)."""
    if st.noise_kind != NOISE_SEEN:
        return {}
    cf = _resolved(dif.curv_f, _sigma_f(st, dif.fvals), dif.hf, _NOISY_RESOLVED)
    cg = (_resolved(dif.curv_g, _sigma_g(st, dif.gvals), dif.hg, _NOISY_RESOLVED) if dif.curv_g.shape[0] == dif.hg.shape[0]
          else dif.curv_g)  # fmt: skip
    return {"curv_f": cf, "curv_g": cg}


def _rough(d2f: Array, fvals: Array) -> bool:
    """Whether the objective's second differences at the first steps (``eps^(1/3)`` of the variables' sizes) are
    rough: their median above ``_ROUGH eps^(2/3) max |f|`` over the difference points, what a curvature of
    ``_ROUGH |f|`` over the squared size of a variable gives; noise ``sigma`` puts about ``sqrt(6) sigma`` into each
    (then the noise is estimated at once). Values all at 0 are not rough."""
    seen = np.abs(d2f[np.isfinite(d2f)])
    top = float(np.abs(fvals[np.isfinite(fvals)]).max(initial=0.0))
    return bool(seen.shape[0] and top > 0.0 and float(np.median(seen)) > _ROUGH * _EPS ** (2.0 / 3.0) * top)


def _side_stream(rng: np.random.Generator) -> np.random.Generator:
    """A generator of its own, a function of ``rng``'s state that leaves it as it is: the bit generator jumped ahead
    (``rng`` itself where the bit generator cannot jump)."""
    jumped = getattr(rng.bit_generator, "jumped", None)
    return np.random.Generator(jumped()) if callable(jumped) else rng


def _sigma_f(st: PrecisionState, fvals: Array) -> float:
    """The noise of ``f`` behind the steps and the floor: the estimate, else the rounding of the values."""
    if math.isfinite(st.noise_f):
        return max(st.noise_f, _EPS * abs(st.fx))
    return _ROUNDING * _EPS * max(float(np.abs(fvals).max(initial=0.0)), abs(st.fx), 1e-300)


def _sigma_g(st: PrecisionState, gvals: Array) -> float:
    """The noise of the working set's constraints: the estimate, else the rounding of their values."""
    if math.isfinite(st.noise_g):
        return st.noise_g
    finite = gvals[np.isfinite(gvals)]
    return _ROUNDING * _EPS * max(float(np.abs(finite).max(initial=0.0)), 1e-300)


def _steps(st: PrecisionState, x: Array, noise: float, curv: Array) -> Array:
    """Central-difference steps (in x) for a function of noise ``noise`` whose measured curvatures are ``curv``:
    ``eps^(1/3) max(c_i, |x_i|)`` until the noise is estimated, then ``(3 noise c_i / |curv_i|)^(1/3)`` (the curvature
    over the scale standing for the third derivative; Gill, Murray, Saunders & Wright 1983), or
    ``(noise / noise_rounding)^(1/3)`` times the first rule where the curvature is not resolved; within
    ``[1e-2 eps^(1/3), 0.1] max(c_i, |x_i|)``."""
    size = np.maximum(st.scale, np.abs(x))
    base: Array = _H * size
    if st.noise_kind != NOISE_SEEN or not math.isfinite(noise) or noise <= 0.0:  # no noise beyond the rounding
        return base
    c = st.scale
    k = np.abs(curv) if curv.shape[0] == x.shape[0] else np.full(x.shape[0], np.nan)
    known = np.isfinite(k) & (k > 0.0)
    opt = np.cbrt(3.0 * noise * c / np.where(known, k, 1.0))
    ratio = np.cbrt(noise / max(_EPS * max(abs(st.fx), 1e-300), 1e-300))
    typical = base * ratio  # (noise / |f|)^(1/3) max(c_i, |x_i|): the step for a curvature of the value's size
    h = np.where(known, np.clip(opt, _SPREAD * typical, typical / _SPREAD), typical)  # a curvature from noisy
    out: Array = np.clip(h, 1e-2 * base, 0.1 * size)  # differences moves the step by at most _SPREAD^-1 either way
    return out


# ---------------------------------------------------------------------------------------------- P2: the differences
@dataclass(frozen=True)
class _Diffs:
    """P2's results: ``grad f``, ``g_A(x)`` and ``J_A`` (the rows of ``W``, then the equalities), the curvatures, the
    constraints' difference points (``P``, ``a``, ``b`` for :func:`_rows`), the steps and the values' sizes."""

    grad: Array
    gA: Array
    JA: Array
    curv_f: Array
    curv_g: Array
    P: Array
    a: Array
    b: Array
    hf: Array
    hg: Array
    fvals: Array
    gvals: Array
    ok: bool
    d2f: Array  # the objective's second differences f(x + a e_i) + f(x - b e_i) - 2 f(x) (NaN where a side failed)


def _one_sided(v0: Array, vp: Array, vm: Array, a: Array, b: Array) -> tuple[Array, Array]:
    """Derivatives and curvatures from ``v0`` at ``x`` and ``vp`` / ``vm`` at ``x + a_i e_i`` / ``x - b_i e_i``
    (``(d, k)`` values): central where both sides are finite, one-sided where one is not (a failed trial), NaN where
    neither is; curvature where both are and the shorter side is at least :data:`_LOPSIDED` of the longer (NaN
    elsewhere: next to a bound the second difference over a side of ``1e-17`` is the noise of two nearly equal values
    divided by a tiny product of steps, no curvature)."""
    A, Bm = a[:, None], b[:, None]
    fp, fm = np.isfinite(vp) & (A > 0), np.isfinite(vm) & (Bm > 0)
    span = np.where(fp, A, 0.0) + np.where(fm, Bm, 0.0)
    up = np.where(fp, vp, 0.0)
    down = np.where(fm, vm, 0.0)
    num = np.where(fp & fm, up - down, np.where(fp, up - v0[None, :], np.where(fm, v0[None, :] - down, np.nan)))
    with np.errstate(invalid="ignore", divide="ignore"):
        grad = np.where(span > 0, num / np.where(span > 0, span, 1.0), np.nan)
        both = fp & fm & (np.minimum(A, Bm) >= _LOPSIDED * np.maximum(A, Bm))
        curv = np.where(both, 2.0 * (Bm * up + A * down - (A + Bm) * v0[None, :]) / np.where(both, A * Bm * (A + Bm), 1.0),
                        np.nan)  # fmt: skip
    grad = np.where(np.isfinite(v0)[None, :], grad, np.nan)
    return grad, curv


def _gradients(oracle: CountingOracle, st: PrecisionState, W: IntArray) -> _Diffs:
    """P2: ``grad f``, ``g_W(x)`` and ``J_W`` by central differences inside the bounds (one call per kind: the
    objective's and the constraints' points each have their own steps, :func:`_steps`); with equality constraints
    their rows follow those of ``W`` (one more call). Where a difference point's value is not finite, the one-sided
    difference on the other side; a coordinate whose two sides both fail is evaluated again with a step ten times
    shorter (at most three times). The second differences give the curvatures (resolved when above the noise)."""
    x, fx = st.x, st.fx
    d = x.shape[0]
    lo, hi = _bounds(oracle)
    room_up, room_down = np.maximum(hi - x, 0.0), np.maximum(x - lo, 0.0)
    sf = _sigma_f(st, np.array([fx]))
    hf = _steps(st, x, sf, st.curv_f)
    grad = np.full(d, np.nan)
    cf = np.full(d, np.nan)
    d2f = np.full(d, np.nan)
    fvals = np.array([fx])
    todo = np.arange(d)
    for _ in range(4):  # the objective; again, shorter, for a coordinate whose two sides failed
        a, b = np.minimum(hf[todo], room_up[todo]), np.minimum(hf[todo], room_down[todo])
        k = todo.shape[0]
        Pf = np.repeat(x[None, :], 2 * k, axis=0)
        Pf[np.arange(k), todo] += a
        Pf[k + np.arange(k), todo] -= b
        Pf = _inside(oracle, Pf)
        f = _objective(oracle, Pf)
        g1, c1 = _one_sided(np.array([fx]), f[:k, None], f[k:, None], a, b)
        grad[todo], cf[todo] = g1[:, 0], c1[:, 0]
        d2f[todo] = f[:k] + f[k:] - 2.0 * fx
        fvals = np.concatenate([fvals, f[np.isfinite(f)]])
        todo = todo[~np.isfinite(g1[:, 0])]
        if not todo.shape[0]:
            break
        hf[todo] *= 0.1
    nI = int(W.shape[0])
    hg = _steps(st, x, _sigma_g(st, np.zeros(0)) if math.isfinite(st.noise_g) else math.nan, st.curv_g)
    if st.noise_kind == NOISE_SEEN and not math.isfinite(st.noise_g):
        hg = hf.copy()
    a, b = np.minimum(hg, room_up), np.minimum(hg, room_down)
    if nI == 0 and not oracle.m_eq:
        ok = bool(np.isfinite(grad).all())
        return _Diffs(grad, np.zeros(0), np.zeros((0, d)), _resolved(cf, sf, hf), np.full(d, np.nan), np.zeros((0, d)),
                      a, b, hf, hg, fvals, np.zeros(0), ok, d2f)  # fmt: skip
    E = np.arange(d)
    P = np.repeat(x[None, :], 2 * d, axis=0)
    P[E, E] += a
    P[d + E, E] -= b
    P = _inside(oracle, P)
    C = _constraint_values(oracle, np.vstack([x[None, :], P]), W)
    J, cg = _one_sided(C[0], C[1 : d + 1], C[d + 1 :], a, b)
    bad = ~np.isfinite(J).all(axis=1)
    for _ in range(3):  # a coordinate whose two sides both failed for some row: shorter steps there
        if not bad.any() or not np.isfinite(C[0]).all():
            break
        idx = np.flatnonzero(bad)
        a[idx] *= 0.1
        b[idx] *= 0.1
        k = idx.shape[0]
        Q = np.repeat(x[None, :], 2 * k, axis=0)
        Q[np.arange(k), idx] += a[idx]
        Q[k + np.arange(k), idx] -= b[idx]
        Q = _inside(oracle, Q)
        Cq = _constraint_values(oracle, Q, W)
        J2, c2 = _one_sided(C[0], Cq[:k], Cq[k:], a[idx], b[idx])
        J[idx], cg[idx] = J2, c2
        P[idx], P[d + idx] = Q[:k], Q[k:]
        bad = ~np.isfinite(J).all(axis=1)
    gvals = C[np.isfinite(C)]
    sg = _sigma_g(st, gvals)
    cg_res = _resolved(cg, sg, hg)
    with np.errstate(invalid="ignore"):
        cg_max = np.where(np.isfinite(cg_res).any(axis=1), np.nanmax(np.where(np.isfinite(cg_res), np.abs(cg_res), -1.0),
                                                                     axis=1, initial=-1.0), np.nan)  # fmt: skip
    cg_max = np.where(cg_max >= 0.0, cg_max, np.nan)
    ok = bool(np.isfinite(grad).all() and np.isfinite(J).all() and np.isfinite(C[0]).all())
    return _Diffs(grad, C[0], J.T, _resolved(cf, sf, hf), cg_max, P, a, b, hf, hg, fvals, gvals, ok, d2f)


def _constraint_values(oracle: CountingOracle, X: Array, W: IntArray) -> Array:
    """The rows of ``W`` and then the equalities at the points ``X`` (one call of each kind)."""
    parts = [] if W.shape[0] == 0 else [np.asarray(oracle.constraints(X, W, purpose="precision"), dtype=np.float64)]
    if oracle.m_eq:
        parts.append(np.asarray(oracle.equalities(X, None, purpose="precision"), dtype=np.float64))
    return parts[0] if len(parts) == 1 else np.hstack(parts)


def _resolved(curv: Array, noise: float, h: Array, margin: float = 4.0) -> Array:
    """``curv`` where it stands above the noise of a second difference (``margin noise / h^2``), NaN elsewhere."""
    hh = np.maximum(h if curv.ndim == 1 else h[:, None], 1e-300)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        out: Array = np.where(np.abs(curv) > margin * noise / (hh * hh), np.abs(curv), np.nan)
    return out


def _rows(oracle: CountingOracle, x: Array, P: Array, a: Array, b: Array, idx: IntArray) -> tuple[Array, Array]:
    """``(g_idx(x), J_idx)`` over the constraints' difference points ``P`` of :func:`_gradients` (one call of
    ``(2 d + 1) |idx|`` values): the rows that join ``W`` in an exchange round (P6a); one-sided where a side fails."""
    d = x.shape[0]
    C = np.asarray(oracle.constraints(np.vstack([x[None, :], P]), idx, purpose="precision"), dtype=np.float64)
    J, _ = _one_sided(C[0], C[1 : d + 1], C[d + 1 :], a, b)
    return C[0], J.T


def _ldp(M: Array, b: Array) -> tuple[Array, Array] | None:
    """``min |z|`` s.t. ``M z <= b`` and its multipliers (``z + M^T lam = 0``), or ``None`` when inconsistent.

    Lawson & Hanson ch. 23: ``u = argmin_{u >= 0} |E u - e|`` with ``E = [-M^T; -b^T]``, ``r = E u - e``,
    ``z = -r[:d] / r[d]`` and ``lam = -u / r[d]``.
    """
    d = M.shape[1]
    E = np.vstack([-M.T, -b[None, :]])
    e = np.zeros(d + 1)
    e[d] = 1.0
    try:
        u = nnls(E, e)
    except (RuntimeError, np.linalg.LinAlgError):
        return None
    r = E @ u - e
    if not r[d] < -1e-10:
        return None
    return -r[:d] / r[d], -u / r[d]


def _qp(B: Array, g: Array, A: Array, b: Array, meq: int = 0) -> tuple[Array, Array] | None:
    """``min 1/2 p^T B p + g^T p`` s.t. ``A_j p = b_j`` (the first ``meq`` rows) and ``A_j p <= b_j`` (the others),
    and its multipliers; ``None`` when the rows are inconsistent. Goldfarb & Idnani's dual method
    (:func:`zoframe_constrained.qp.dual_qp`): its rows hold to rounding relative to their own size, also where the
    unconstrained minimiser is far from the feasible set and more rows than variables pass near the solution.
    Where it meets (near) inconsistency or stops on its limit of row changes, the least-distance form decides
    (each equality as two rows of opposite signs; ``None`` when its residual shows the rows inconsistent): ``z = L^T p + L^{-1} g`` (``B = L L^T``),
    ``G = A L^{-T}``, ``h = b + G L^{-1} g``, rows scaled to unit norm for the NNLS and the multipliers scaled
    back."""
    try:
        return dual_qp(B, g, A, b, meq)
    except RuntimeError:
        pass
    A2, b2 = np.vstack([A[:meq], -A[:meq], A[meq:]]), np.concatenate([b[:meq], -b[:meq], b[meq:]])
    L = np.linalg.cholesky(B)
    Lg = solve_triangular(L, g, lower=True)
    G = solve_triangular(L, A2.T, lower=True).T
    h = b2 + G @ Lg
    norms = np.maximum(np.sqrt(np.einsum("ij,ij->i", G, G)), 1e-300)
    out = _ldp(G / norms[:, None], h / norms)
    if out is None:
        return None
    z, lam2 = out
    p = solve_triangular(L.T, z - Lg, lower=False)
    lam2 = lam2 / norms
    return p, np.concatenate([lam2[:meq] - lam2[meq : 2 * meq], lam2[2 * meq :]])


@dataclass(frozen=True)
class _Step:
    p: Array
    lam_W: Array  # multipliers of the W rows
    mu: Array  # multipliers (free sign) of the equality rows
    lam_box: Array  # multipliers of the coordinate rows that are real bounds (upper minus lower), per coordinate
    trust: bool  # a step-bound row is active
    xi: float  # elastic variable (0: the linearisation was consistent)


def _subproblem(
    B: Array, g: Array, gW: Array, J: Array, x: Array, lo: Array, hi: Array, delta: float, neq: int = 0
) -> _Step:
    """P4: the QP, with the bounds and the step bound as coordinate rows; the elastic form when inconsistent.
    The last ``neq`` rows of ``gW`` / ``J`` are equalities ``h + J_h p = 0`` (multipliers of free sign); the
    elastic form relaxes the violated inequalities to ``g_j + J_j p <= xi g_j`` and the equalities to
    ``h + J_h p = xi h`` (Kraft's relaxation, 1988), ``0 <= xi <= 1``, with ``1/2 sigma xi^2`` in the objective."""
    d = x.shape[0]
    nI = gW.shape[0] - neq
    up = np.minimum(hi - x, delta)
    down = np.minimum(x - lo, delta)
    real_up = hi - x <= delta
    real_down = x - lo <= delta
    eye = np.eye(d)
    A = np.vstack([J[nI:], J[:nI], eye, -eye])  # the equalities first
    b = np.concatenate([-gW[nI:], -gW[:nI], np.maximum(up, 0.0), np.maximum(down, 0.0)])
    sol = _qp(B, g, A, b, neq)
    xi = 0.0
    if sol is None:  # elastic
        sigma = 1e6 * max(1.0, float(np.abs(np.diagonal(B)).max()))
        Be = np.zeros((d + 1, d + 1))
        Be[:d, :d] = B
        Be[d, d] = sigma
        ge = np.concatenate([g, [0.0]])
        Ae = np.zeros((A.shape[0] + 2, d + 1))
        Ae[: A.shape[0], :d] = A
        Ae[:neq, d] = -gW[nI:]
        Ae[neq : neq + nI, d] = -np.maximum(gW[:nI], 0.0)
        Ae[-2, d], Ae[-1, d] = 1.0, -1.0
        be = np.concatenate([b, [1.0, 0.0]])
        sol_e = _qp(Be, ge, Ae, be, neq)
        if sol_e is None:  # cannot happen in exact arithmetic (p = 0, xi = 1 is feasible): no step
            return _Step(np.zeros(d), np.zeros(nI), np.zeros(neq), np.zeros(d), False, 1.0)
        pe, lam_e = sol_e
        p, lam, xi = pe[:d], lam_e[: A.shape[0]], float(pe[d])
    else:
        p, lam = sol
    mu, lam_W = lam[:neq], lam[neq : neq + nI]
    lam_up, lam_down = lam[neq + nI : neq + nI + d], lam[neq + nI + d :]
    trust = bool(np.any((lam_up > 0) & ~real_up) or np.any((lam_down > 0) & ~real_down))
    lam_box = np.where(real_up, lam_up, 0.0) - np.where(real_down, lam_down, 0.0)
    return _Step(p, lam_W, mu, lam_box, trust, max(xi, 0.0))


def _bfgs(B: Array, s: Array, y: Array, first: bool) -> Array:
    """P3: Powell's damped BFGS update (``y`` mixed with ``B s`` so that ``s^T y >= 0.2 s^T B s``)."""
    sy = _dot(s, y)
    if first and sy > 0.0:
        B = (float(y @ y) / sy) * np.eye(B.shape[0])  # Nocedal & Wright (6.20): the first scaling
    Bs = _mv(B, s)
    sBs = _dot(s, Bs)
    if not (sBs > 0.0 and math.isfinite(sBs)):
        return B
    if sy < 0.2 * sBs:
        theta = 0.8 * sBs / (sBs - sy)
        y = theta * y + (1.0 - theta) * Bs
        sy = _dot(s, y)
    out = B + np.outer(y, y) / sy - np.outer(Bs, Bs) / sBs
    out = 0.5 * (out + out.T)
    try:
        cho_factor(out)
    except np.linalg.LinAlgError:
        return B
    return out


def _solve(B: Array, grad: Array, gA: Array, JA: Array, x: Array, lo: Array, hi: Array, c: Array, delta: float,
           neq: int) -> tuple[_Step, Array]:
    """P4 in ``z = x / c`` (with ``B`` reset to a multiple of the identity when its factorisation fails): the
    step's QP solution and the ``B`` it used."""
    gz, JAz = c * grad, JA * c[None, :]  # the gradients with respect to z
    try:
        return _subproblem(B, gz, gA, JAz, x / c, lo / c, hi / c, delta, neq), B
    except np.linalg.LinAlgError:
        B = np.eye(x.shape[0]) * max(1.0, float(np.abs(np.diagonal(B)).max()))
        return _subproblem(B, gz, gA, JAz, x / c, lo / c, hi / c, delta, neq), B


def _dot(a: Array, b: Array) -> float:
    """``a . b`` as a numpy sum of products (not a BLAS dot product, whose rounding can depend on the arrays' memory
    alignment: the same run through ask/tell, with its own arrays, must give the same bits)."""
    return float(np.sum(a * b))


def _mv(M: Array, v: Array) -> Array:
    """``M @ v`` as sums of products along the rows (see :func:`_dot`)."""
    out: Array = (M * v[None, :]).sum(axis=1) if M.shape[0] else np.zeros(0)
    return out


def _tmv(M: Array, v: Array) -> Array:
    """``M.T @ v`` as sums of products along the columns (see :func:`_dot`)."""
    out: Array = (M * v[:, None]).sum(axis=0) if M.shape[0] else np.zeros(M.shape[1])
    return out


def _multipliers(
    qp: _Step, W: IntArray, grad: Array, J: Array, Jh: Array
) -> tuple[npt.NDArray[np.bool_], IntArray, Array, Array, Array]:
    """The QP's multipliers: ``(pos, lam_idx, lam, mu, grad L)`` with ``pos`` the rows of ``W`` with a positive
    multiplier, ``lam_idx = W[pos]`` and ``grad L = grad f + J_pos^T lam + J_h^T mu`` (in x)."""
    pos = qp.lam_W > 0
    lam, mu = qp.lam_W[pos], qp.mu
    return pos, W[pos], lam, mu, grad + _tmv(J[pos], lam) + _tmv(Jh, mu)


# ---------------------------------------------------------------------------------------------- the merit (P6)
@dataclass(frozen=True)
class _Merit:
    """Powell's l1 merit ``f + sum_{j in W} w_j max(0, g_j) + w_out (sum of the violations outside W) + sum_l v_l |h_l|``
    (Powell 1978): one weight per row of ``W``, ``w_out`` for the constraints outside it (the largest weight: the
    exchange rounds bring the violated ones into ``W``), ``v`` for the equalities."""

    W: IntArray
    w: Array
    out: float
    eq: Array

    def penalty(self, gW: Array, sviol: float, h: Array) -> float:
        if not (np.isfinite(gW).all() and math.isfinite(sviol) and np.isfinite(h).all()):
            return math.inf
        vW = np.maximum(gW, 0.0)  # sums of products, not BLAS dot products: their rounding must not depend on the
        inside = float(np.sum(self.w * vW))  # arrays' alignment (the same run through ask/tell, bit for bit)
        outside = self.out * max(0.0, sviol - float(vW.sum()))
        return inside + outside + float(np.sum(self.eq * np.abs(h)))


@dataclass(frozen=True)
class _Point:
    """A trial point with its values: the objective, the full pass, the rows of ``W`` (those the pass's top values do not
    hold are at most its last value: at most 0 when that is, else evaluated)."""

    x: Array
    f: float
    ps: _Pass
    gW: Array

    @property
    def finite(self) -> bool:
        return math.isfinite(self.f) and math.isfinite(self.ps.vmax)

    def phi(self, merit: _Merit) -> float:
        if not self.finite:
            return math.inf
        return self.f + merit.penalty(self.gW, self.ps.sviol, self.ps.h)


def _evaluate(oracle: CountingOracle, point: Array, k: int, W: IntArray) -> _Point:
    """A point's objective (``n`` evaluations), its full pass (``m``, and ``m_eq``) and the values of ``W`` (from the
    pass's top values; the others evaluated only when more than ``k`` constraints are violated). A non-finite value
    (``nonfinite="inf"``: +inf) makes the point a failed trial; with ``nonfinite="raise"`` the oracle's
    :class:`~zoframe.errors.NonFiniteValueError` (naming the point and the function) reaches the user."""
    y = _inside(oracle, point[None, :])[0]
    f = float(_objective(oracle, y[None, :])[0])
    ps = _pass(oracle, y, k)
    gW = np.zeros(W.shape[0])
    if W.shape[0]:
        last = float(ps.val[-1]) if ps.val.shape[0] else -math.inf
        at = {int(j): float(v) for j, v in zip(ps.top, ps.val, strict=True)}
        known = np.array([int(j) in at for j in W], dtype=bool)
        gW[known] = [at[int(j)] for j in W[known]]
        missing = W[~known]
        if missing.shape[0]:
            if last <= 0.0 or ps.top.shape[0] >= oracle.m:
                gW[~known] = min(last, 0.0)
            else:
                gW[~known] = np.asarray(oracle.constraints(y[None, :], missing, purpose="precision"), dtype=np.float64)[0]
    return _Point(y, f, ps, gW)


def _weights(
    st: PrecisionState, W: IntArray, lam_W: Array, mu: Array, floor: float
) -> _Merit:
    """The merit's weights after the QP (P6): ``w_j = max(1.5 lam_j, (w_j + 1.5 lam_j) / 2, floor)`` on the rows of
    ``W`` (Powell's update: a weight follows its multiplier down slowly), the same for the equalities with
    ``|mu_l|``, and ``w_out`` the largest weight."""
    old = np.zeros(W.shape[0])
    if st.pen_idx.shape[0] and W.shape[0]:
        at = np.searchsorted(st.pen_idx, W)
        at = np.minimum(at, st.pen_idx.shape[0] - 1)
        hit = st.pen_idx[at] == W
        old[hit] = st.pen[at[hit]]
    new = 1.5 * lam_W
    w = np.maximum(np.maximum(new, 0.5 * (old + new)), floor)
    eq_old = st.pen_eq if st.pen_eq.shape[0] == mu.shape[0] else np.zeros(mu.shape[0])
    eq_new = 1.5 * np.abs(mu)
    eq = np.maximum(np.maximum(eq_new, 0.5 * (eq_old + eq_new)), floor)
    out = max(float(w.max(initial=0.0)), float(eq.max(initial=0.0)), floor)
    return _Merit(W, w, out, eq)


def _stored(merit: _Merit) -> tuple[IntArray, Array]:
    """The weights kept for the next iteration (sorted by constraint, the negligible ones dropped)."""
    keep = merit.w > 1e-300
    order = np.argsort(merit.W[keep], kind="stable")
    return np.asarray(merit.W[keep][order], dtype=np.intp), merit.w[keep][order]


# ---------------------------------------------------------------------------------------------- the iteration
def _error(st: PrecisionState, dif: _Diffs, lam: Array, mu: Array) -> tuple[float, Array]:
    """The error of the KKT residual's entries (in z, relative as the residual): the objective's ``2 sigma_f / span +
    h^2 |f''| / (6 c)`` per coordinate plus the multipliers' share of the constraints' (``sigma_g`` for each row);
    and the error of each entry of ``c grad L`` itself."""
    c = st.scale
    sf = _sigma_f(st, dif.fvals)
    sg = _sigma_g(st, dif.gvals)
    span_f = 2.0 * dif.hf
    span_g = dif.a + dif.b
    cf = np.where(np.isfinite(dif.curv_f), dif.curv_f, 0.0)
    cg = np.where(np.isfinite(dif.curv_g), dif.curv_g, 0.0)
    ef = 2.0 * sf / np.maximum(span_f, 1e-300) + dif.hf**2 * cf / (6.0 * c)
    eg = 2.0 * sg / np.maximum(span_g, 1e-300) + dif.hg**2 * cg / (6.0 * c)
    weight = float(lam.sum()) + float(np.abs(mu).sum())
    e = c * (ef + weight * eg)
    gscale = max(1.0, float(np.abs(c * dif.grad).max()))
    return float(e.max(initial=0.0)) / gscale, e


def _floor_end(st: PrecisionState, settings: PrecisionSettings, kkt: float, err: float) -> int | None:
    """At the noise floor (feasible, the residual within :data:`_FLOOR` times its error): ``NOISE_LIMITED``, or
    ``CONVERGED`` when the level the phase found is the rounding of the values; ``None`` otherwise."""
    if not (st.violation <= settings.violation_tol and math.isfinite(err) and err <= _ERR_MAX and kkt <= _FLOOR * err):
        return None
    return NOISE_LIMITED if st.noise_kind == NOISE_SEEN else CONVERGED


def precision_step(
    oracle: CountingOracle, st: PrecisionState, settings: PrecisionSettings, rng: np.random.Generator | None = None
) -> PrecisionState:
    """One iteration P1-P6 of the phase from ``st`` (see the module docstring); an ended phase stays as it is.
    ``rng``: the random directions of the second-order probe (P5b) and of the noise line (``None``: neither).

    Once noise is seen, the estimate follows the point (P0): it is made again before the iteration when ``|f|``
    moved by more than a factor :data:`_DRIFT` from the value where it was made (noise relative to the values shrinks
    with them: steps and floor sized to a stale level are too coarse), and a noise floor (NOISE_LIMITED) is only
    declared with an estimate made where ``|f|`` was at most twice its value now: otherwise the estimate is made there and the phase goes on
    (the next iteration judges the floor again); when the budget left cannot pay for it, the phase ends BUDGET."""
    if st.status != RUNNING:
        return st
    follow = settings.noise and rng is not None and st.noise_kind == NOISE_SEEN
    spent0 = oracle.calls
    if follow and math.isfinite(st.noise_at) and rng is not None and not (
        abs(st.noise_at) / _DRIFT <= abs(st.fx) <= _DRIFT * abs(st.noise_at)
    ):  # P0
        st = _with_noise(oracle, st, np.union1d(st.lam_idx, st.cand).astype(np.intp), rng)
    pre = oracle.calls - spent0
    out = _iteration(oracle, st, settings, rng)
    if pre:
        out = dataclasses.replace(out, cost=out.cost + pre, spent=out.spent + pre)
    if out.it > st.it and math.isfinite(out.kkt):  # P0: how long the KKT residual has gone without halving
        halved = out.kkt <= 0.5 * st.kkt_low
        out = dataclasses.replace(out, kkt_low=out.kkt if halved else st.kkt_low, flat=0 if halved else st.flat + 1,
                                  f_low=out.fx if halved else st.f_low)  # fmt: skip
    if not (follow and rng is not None and out.status == NOISE_LIMITED and out.noise_at != out.fx
            and abs(out.fx) < 0.5 * abs(out.noise_at)):  # |f| (and a noise relative to it) shrank since the estimate
        return out
    spent0 = oracle.calls
    again = _with_noise(oracle, out, np.union1d(out.lam_idx, out.cand).astype(np.intp), rng)
    more = oracle.calls - spent0
    status = BUDGET if again.noise_at != again.fx else RUNNING  # no new estimate: no claim
    return dataclasses.replace(again, status=status, why=WHY_NONE, cost=out.cost + more, spent=out.spent + more)


def _iteration(
    oracle: CountingOracle, st: PrecisionState, settings: PrecisionSettings, rng: np.random.Generator | None
) -> PrecisionState:
    """P1-P6 (see :func:`precision_step`)."""
    spent0 = oracle.calls
    x = st.x
    d = x.shape[0]
    K = settings.top(oracle)
    W = np.union1d(st.lam_idx, st.cand).astype(np.intp)  # P1
    remaining = oracle.remaining
    if remaining is not None and remaining < iteration_cost(oracle, int(W.shape[0])):
        return dataclasses.replace(st, status=BUDGET)
    c = st.scale  # x = c * z: B, the QP, the step bound and s_prev are in z
    dif = _gradients(oracle, st, W)  # P2 (the equality rows after those of W)
    base: dict[str, Any] = {"it": st.it + 1, "curv_f": dif.curv_f, "curv_g": dif.curv_g}
    if not dif.ok:  # a coordinate whose difference points all failed, even at shorter steps
        spent = oracle.calls - spent0
        return dataclasses.replace(st, status=STALLED, why=WHY_NONFINITE, cost=spent, spent=st.spent + spent, **base)
    if st.it == 0 and st.guess.shape[0] == d and st.guess.any():  # the scales the start did not show, from curvature
        st = _rescaled(oracle, st, dif)
        c = st.scale
    known = st.noise_kind  # what this iteration's difference steps were sized to
    cheap = 4 * _noise_cost(oracle, int(W.shape[0])) <= iteration_cost(oracle, int(W.shape[0]))
    rough = not cheap and _rough(dif.d2f, dif.fvals) and _noise_cost(oracle, int(W.shape[0])) <= max(
        iteration_cost(oracle, int(W.shape[0])), 0.05 * (remaining if remaining is not None else 0))
    stuck = st.flat >= _FLAT and abs(st.fx - st.f_low) <= _FLAT_F * max(abs(st.fx), abs(st.f_low))  # P0: noise suspected
    long = st.flat >= _LONG and st.noise_evals == 0  # P0: a long stall, f still moving: asked once
    if settings.noise and rng is not None and st.noise_kind == NOISE_UNKNOWN and (
        (st.it == 0 and (cheap or rough)) or stuck or long
    ):
        if cheap or stuck:  # cheap: at once (the next steps follow it); stuck: the values may resolve no more
            st = _with_noise(oracle, st, W, rng, dif.d2f, pinned=st.it > 0)
        else:  # rough first differences, or a long stall: noise suspected. The estimate draws from a stream of its
            # own (the run's stays as it was) and counts only when it finds a level well above the rounding of the values
            # (a long stall first asks the objective alone, 9 values a line: the working set's too only when it is)
            probe = W if st.it == 0 else W[:0]
            seen = _with_noise(oracle, st, probe, _side_stream(rng), dif.d2f, pinned=False)
            top = float(np.abs(dif.fvals).max(initial=0.0))
            clear = seen.noise_kind == NOISE_SEEN and seen.noise_f >= _ROUGH * _EPS * top
            if clear and probe.shape[0] < W.shape[0]:
                seen = _with_noise(oracle, dataclasses.replace(seen, noise_kind=NOISE_UNKNOWN), W, _side_stream(rng),
                                   dif.d2f, pinned=False)  # fmt: skip
                clear = seen.noise_kind == NOISE_SEEN
            st = seen if clear else dataclasses.replace(st, noise_evals=seen.noise_evals)
        base.update(_recheck(st, dif))
        again = oracle.remaining is None or oracle.remaining >= 2 * iteration_cost(oracle, int(W.shape[0]))
        if st.noise_kind == NOISE_SEEN and again:  # the differences above had steps sized to the rounding, which
            st = dataclasses.replace(st, curv_f=base["curv_f"], curv_g=base["curv_g"])  # noise spoils: again, with
            dif = _gradients(oracle, st, W)  # steps sized to the noise (Gill, Murray, Saunders & Wright 1983)
            if not dif.ok:
                spent = oracle.calls - spent0
                return dataclasses.replace(st, status=STALLED, why=WHY_NONFINITE, cost=spent, spent=st.spent + spent,
                                           **base)  # fmt: skip
            base.update(curv_f=dif.curv_f, curv_g=dif.curv_g)
            known = NOISE_SEEN
    grad, gA, JA = dif.grad, dif.gA, dif.JA
    nI = W.shape[0]
    gW, J, hx, Jh = gA[:nI], JA[:nI], gA[nI:], JA[nI:]
    B = st.B
    if st.s_prev.shape[0]:  # P3: grad L at x with the last multipliers (their constraints are in W)
        gL = grad + _tmv(J[np.searchsorted(W, st.lam_idx)], st.lam) if st.lam_idx.shape[0] else grad
        gL = gL + _tmv(Jh, st.mu) if st.mu.shape[0] else gL
        y = c * gL - st.gL_prev
        _, e_prev = _error(st, dif, st.lam, st.mu)
        # P3, once noise is seen: a pair (s, y) whose y is within the noise of the two gradients (a step shorter than
        # the differences resolve) says nothing of the curvature; the update is skipped (Xie, Byrd & Nocedal 2020)
        if not (st.noise_kind == NOISE_SEEN and float(np.linalg.norm(y)) <= 4.0 * math.sqrt(2.0) * float(np.linalg.norm(e_prev))):
            B = _bfgs(B, st.s_prev, y, first=st.it == 1 and not _diagonal_start(st))
            base["hidden"] = 0
        else:  # B learns nothing while the steps stay this short; a B that overrates the curvature keeps them short:
            base["hidden"] = st.hidden + 1  # after _HIDDEN such pairs in a row, B afresh from the measured curvatures
            if base["hidden"] >= _HIDDEN:
                B = _fresh(base["curv_f"], base["curv_g"], float(st.lam.sum() + np.abs(st.mu).sum()), c, B)
                base["hidden"] = 0
    elif st.it == 0:
        B = _first_matrix(dif.curv_f, c, B)
    lo, hi = _bounds(oracle)
    neq = hx.shape[0]
    qp, B = _solve(B, grad, gA, JA, x, lo, hi, c, st.delta, neq)  # P4 (in z)
    p = c * qp.p  # the step in x
    pos, lam_idx, lam, mu, gL_x = _multipliers(qp, W, grad, J, Jh)
    # P5: the KKT residual with the QP's multipliers (W rows, equalities, real bounds), the step, the predicted change,
    # in z (each variable in its own units)
    resid = gL_x + qp.lam_box / c
    gscale = max(1.0, float(np.abs(c * grad).max()))
    kkt = float(np.abs(c * resid).max()) / gscale
    err, _ = _error(st, dif, lam, mu)
    sf = _sigma_f(st, dif.fvals)
    s_merit = sf + (float(lam.sum()) + float(np.abs(mu).sum())) * _sigma_g(st, dif.gvals)
    step = float(np.abs(p).max(initial=0.0))
    step_z = float(np.abs(qp.p).max(initial=0.0))
    predicted = abs(_dot(grad, p)) + _dot(lam, np.abs(gW[pos])) + _dot(np.abs(mu), np.abs(hx))
    noisy = st.noise_kind == NOISE_SEEN
    judged = noisy and known == NOISE_SEEN  # the floor is judged with steps sized to the noise (not the iteration of the estimate)
    small = (
        step_z <= settings.xtol * max(1.0, float(np.abs(x / c).max())) or predicted <= settings.ftol * max(1.0, abs(st.fx))
        or (noisy and predicted <= _FLOOR * s_merit)
    )  # fmt: skip
    base.update(kkt=kkt, kkt_err=err, step=step, working=int(W.shape[0]), elastic=st.elastic + (qp.xi > 0.0), floor_f=sf,
                floor_m=s_merit, drop=predicted)
    clean = not qp.trust and qp.xi == 0.0
    # the noise floor (P5): the residual within its error and the predicted change within the noise of the merit (a
    # step bound that the noise-driven QP step reaches does not hide it); an iterate that the noise left slightly
    # infeasible (the second order of the constraints along noise-driven steps) is first put back on the
    # linearisation of its active rows (one pass), and the phase ends there when that is within violation_tol
    inside = float(np.sum(lam * np.abs(np.minimum(gW[pos], 0.0))))  # the complementarity of the rows that hold
    at_floor = judged and qp.xi == 0.0 and kkt > settings.kkt_tol and kkt <= _FLOOR * err and err <= _ERR_MAX \
        and abs(_dot(grad, p)) + inside <= _FLOOR * s_merit
    if at_floor and not _isotropic(B):  # the same with B afresh (the Lagrangian's measured curvature): a B built from
        Bf = _fresh(base["curv_f"], base["curv_g"], float(lam.sum() + np.abs(mu).sum()), c, B)  # noisy differences
        qf, _ = _solve(Bf, grad, gA, JA, x, lo, hi, c, st.delta, neq)  # can overrate the curvature and hide a decrease
        pf = c * qf.p
        pos_f = qf.lam_W > 0
        at_floor = qf.xi == 0.0 and abs(_dot(grad, pf)) + float(np.sum(qf.lam_W[pos_f] * np.abs(np.minimum(
            gW[pos_f], 0.0)))) <= _FLOOR * s_merit  # fmt: skip
    if at_floor and st.violation > settings.violation_tol:
        back = _back_on(oracle, st, W, gW, J, hx, Jh, pos, settings, K)
        if back is not None:
            spent = oracle.calls - spent0
            return dataclasses.replace(
                back, status=NOISE_LIMITED, lam_idx=lam_idx, lam=lam, mu=mu, B=B, cost=spent, spent=st.spent + spent, **base
            )
    floor = _floor_end(st, settings, kkt, err) if at_floor else None
    if (clean and st.violation <= settings.violation_tol and kkt <= settings.kkt_tol and small) or floor is not None:
        found = None
        if rng is not None and st.probes < _PROBES:  # P5b: is it a minimum along the active constraints?
            # the rows whose multiplier force counts next to max(1, |grad f|): a weakly active row (a negligible
            # multiplier) does not bind the probe to its tangent space (the probe's full pass checks feasibility)
            force = 1e-8 * max(1.0, float(np.abs(grad).max()))
            strong = lam * np.abs(J[pos]).max(axis=1, initial=0.0) > force
            A = np.vstack([J[pos][strong], Jh, np.eye(d)[np.abs(qp.lam_box / c) > force]])
            found = _probe(oracle, x, st.fx, A, settings, rng, K, c, _FLOOR * sf if noisy else 0.0)
        if found is not None:  # a better feasible point next to a KKT point that is no minimum: go on from there
            trial, ft, vt, cand, sv = found
            spent = oracle.calls - spent0
            return dataclasses.replace(
                st, x=trial, fx=ft, vmax=vt, cand=cand, sviol=sv, B=np.eye(d), lam_idx=lam_idx, lam=lam, mu=mu,
                gL_prev=np.zeros(0), s_prev=np.zeros(0), probes=st.probes + 1, cost=spent, spent=st.spent + spent,
                fails=0, best_x=trial.copy(), best_f=ft, best_v=vt, best_pen=0.0, **base,
            )  # fmt: skip
        status = CONVERGED if floor is None else floor
        done = dataclasses.replace(st, status=status, lam_idx=lam_idx, lam=lam, mu=mu, B=B, **base)
        if st.vmax > 0.0 and step > 0.0:  # P5c: the converged step still reduces a violation: take it if it does
            merit = _weights(st, W, qp.lam_W, mu, 0.0)
            done = _last_step(oracle, done, p, merit, gW, hx, settings, K, W)
        spent = oracle.calls - spent0
        return dataclasses.replace(done, cost=spent, spent=st.spent + spent)
    rounds = 0
    while True:
        floor_w = st.rho if st.violation > settings.violation_tol else 0.0  # P6: kept while infeasible only
        floor_w = max(floor_w, 1e-12 * max(1.0, abs(st.fx)))
        lin_W = gW + _mv(J, p)
        lin_h = hx + _mv(Jh, p)
        lin = max(float(np.max(lin_W, initial=0.0)), float(np.max(np.abs(lin_h), initial=0.0)))  # elastic: > 0
        cut = float(np.maximum(gW, 0.0).sum() - np.maximum(lin_W, 0.0).sum()) + float(np.abs(hx).sum() - np.abs(lin_h).sum())
        if cut > 0.0:  # weights large enough for p to descend on the merit (Nocedal & Wright, (18.36))
            floor_w = max(floor_w, (_dot(grad, p) + 0.5 * _dot(qp.p, _mv(B, qp.p))) / (0.5 * cut))
        merit = _weights(st, W, qp.lam_W, mu, floor_w)
        pen0 = merit.penalty(gW, st.sviol, hx)
        phi0 = st.fx + pen0
        D = _dot(grad, p) + merit.penalty(lin_W, float(np.maximum(lin_W, 0.0).sum()) + max(0.0, st.sviol - float(
            np.maximum(gW, 0.0).sum())), lin_h) - pen0  # the model's change of the merit along p (outside W: none)
        relax = 2.0 * s_merit if noisy else 0.0  # Armijo relaxed by the noise of the merit
        base["drop"] = max(-D, 0.0)
        first = _evaluate(oracle, x + p, K, W) if D < 0.0 else None
        if first is None or _armijo(first.phi(merit), phi0, D, 1.0, relax):
            break
        # P6a: the full step violates constraints outside W (the pass at x + p shows them): they join W, with their
        # values and difference rows at x over the same points as J_W, and the QP is solved again from x
        cand_t, cval_t = first.ps.top, first.ps.val
        new = cand_t[(cval_t > max(lin, 0.0)) & ~np.isin(cand_t, W)]
        more = (2 * d + 1) * new.shape[0] + oracle.n + oracle.m
        if not new.shape[0] or rounds >= _ROUNDS or (oracle.remaining is not None and oracle.remaining < more):
            break
        g_new, J_new = _rows(oracle, x, dif.P, dif.a, dif.b, new)
        if not (np.isfinite(J_new).all() and np.isfinite(g_new).all()):
            break
        W = np.concatenate([W, new])
        gW, J = np.concatenate([gW, g_new]), np.vstack([J, J_new])
        gA, JA = np.concatenate([gW, hx]), np.vstack([J, Jh])
        qp, B = _solve(B, grad, gA, JA, x, lo, hi, c, st.delta, neq)
        p = c * qp.p
        pos, lam_idx, lam, mu, gL_x = _multipliers(qp, W, grad, J, Jh)
        rounds += 1
    step_z = float(np.abs(qp.p).max(initial=0.0))
    base.update(working=int(W.shape[0]), elastic=st.elastic + (qp.xi > 0.0), step=float(np.abs(p).max(initial=0.0)))
    act = pos | (gW + J @ p >= -settings.violation_tol)  # the rows active in the QP (for P6b)
    # P6: line search on the merit from the full step evaluated above
    alpha = 1.0
    accepted: _Point | None = None
    for _ in range(_TRIALS):
        if not D < 0.0:
            break
        pt = first if alpha == 1.0 and first is not None else _evaluate(oracle, x + alpha * p, K, W)
        phit = pt.phi(merit)
        if _armijo(phit, phi0, D, alpha, relax):
            accepted = pt
            break
        if alpha == 1.0 and pt.finite and (act.any() or neq):  # P6b: second-order correction
            accepted = _soc(oracle, pt.x, c, W, W[act], J[act], Jh, K, merit, phi0 + 1e-4 * D + relax,
                            settings.xtol * max(1.0, float(np.abs(x / c).max())))  # fmt: skip
            if accepted is not None:
                break
        if math.isfinite(phit):  # quadratic interpolation, kept in [0.1, 0.5] of the last step
            denom = 2.0 * (phit - phi0 - D * alpha)
            a_new = -D * alpha * alpha / denom if denom > 0 else 0.5 * alpha
            alpha = min(max(a_new, 0.1 * alpha), 0.5 * alpha)
        else:  # a failed trial (a value not finite): a quarter of the step
            alpha *= 0.25
    if accepted is not None and accepted is first and noisy and -D > relax:  # P6e: a full step that decreased the
        gain, k = phi0 - accepted.phi(merit), 1.0  # merit by at least the model's prediction is tried twice as long
        while gain >= -D * k and k < _EXPAND and 2.0 * k * step_z <= st.delta:  # (the model, a B from noisy
            pt = _evaluate(oracle, x + 2.0 * k * p, K, W)  # differences, underrates the decrease: a B that
            if not (pt.finite and pt.phi(merit) < accepted.phi(merit)  # overrates the curvature keeps steps short;
                    and pt.ps.vmax <= max(accepted.ps.vmax, settings.violation_tol)):  # not away from feasibility)
                break
            gain, k, accepted = phi0 - pt.phi(merit), 2.0 * k, pt
        alpha = k
    longer = False  # P6d: once noise is seen, a step whose predicted decrease is noise is tried longer, once
    if accepted is None and judged and D < 0.0 and -D <= _FLOOR * s_merit and st.violation <= settings.violation_tol:
        kappa = min(2.0 * _FLOOR * s_merit / -D, 1e6, st.delta / max(step_z, 1e-300))
        if kappa > 1.0:
            pt = _evaluate(oracle, x + kappa * p, K, W)
            longer = True
            if pt.finite and pt.phi(merit) < phi0 - 2.0 * s_merit:  # a decrease that stands out of the noise
                accepted, alpha = pt, kappa
    exchanges = st.exchanges + rounds
    # once noise is seen, the step bound stays above the length whose predicted decrease stands out of the noise of
    # the merit (a bound shrunk below it leaves steps whose decrease no value can show)
    delta_noise = _FLOOR * s_merit / max(float(np.abs(c * gL_x).max(initial=0.0)), 1e-300) if noisy else 0.0
    pen_idx, pen = _stored(merit)
    keep: dict[str, Any] = {"pen_idx": pen_idx, "pen": pen, "pen_eq": merit.eq, "rho": floor_w, "exchanges": exchanges}
    if accepted is None:  # no decrease along p
        fresh = False
        if settings.noise and rng is not None and st.noise_kind == NOISE_UNKNOWN:
            # what can these values resolve? (the next iteration's steps follow the estimate)
            st = _with_noise(oracle, st, W, rng, dif.d2f)
            fresh = st.noise_kind != NOISE_UNKNOWN
            if st.noise_kind == NOISE_SEEN:  # B was built from differences the noise may have dominated: afresh
                base.update(_recheck(st, dif))
                B = _fresh(base["curv_f"], base["curv_g"], float(lam.sum() + np.abs(mu).sum()), c, B)
        # the floor is judged with steps sized to the noise: not right after the estimate, whose steps were not
        end = _floor_end(st, settings, kkt, err) if judged or (not fresh and st.noise_kind == NOISE_ROUNDING) else None
        # the merit cannot decrease within the noise when the model without quasi-Newton memory (B reset to the measured
        # curvature: a B built from noisy differences can predict a tiny decrease where a large one is left) predicts
        # a decrease within the noise of the merit and the error the gradients' own error puts on that prediction
        _, e_z = _error(st, dif, lam, mu)
        unsure = float(np.sum(e_z * np.abs(qp.p)))
        quiet = (judged and st.violation <= settings.violation_tol and err <= _ERR_MAX and _isotropic(B) and D < 0.0
                 and -D <= _FLOOR * (s_merit + unsure))  # fmt: skip
        renew = False
        if end is None and longer:  # the longer step showed no decrease above the noise either
            if quiet:
                end = NOISE_LIMITED
            else:  # not yet judged with a B afresh
                renew = True
        if end is None and quiet and st.fails + (0 if fresh else 1) >= _FAILS:  # the last line search of a stall
            end = NOISE_LIMITED
        spent = oracle.calls - spent0
        if end is not None:  # as small as these values can show: stop here
            return dataclasses.replace(
                st, status=end, lam_idx=lam_idx, lam=lam, mu=mu, B=B, cost=spent, spent=st.spent + spent, **keep, **base
            )
        # reset B (and the step bound) and try again; give up after _FAILS (a fresh noise estimate is no failure)
        fails = st.fails + (0 if fresh else 1)
        status = STALLED if fails >= _FAILS else RUNNING
        B_new = _fresh(base["curv_f"], base["curv_g"], float(lam.sum() + np.abs(mu).sum()), c, B) if renew or (fails > 1 and st.noise_kind == NOISE_SEEN) else (
            np.eye(d) * max(1.0, float(np.median(np.abs(np.diagonal(B))))) if fails > 1 else B)
        return dataclasses.replace(
            st, B=B_new, fails=fails, status=status, why=WHY_NO_DECREASE, lam_idx=lam_idx, lam=lam, mu=mu,
            gL_prev=np.zeros(0), s_prev=np.zeros(0),
            delta=max(max(0.1 * st.delta, step_z * 0.1) if step_z > 0 else st.delta, delta_noise),
            cost=spent, spent=st.spent + spent, **keep, **base,
        )  # fmt: skip
    trial, ft, vt = accepted.x, accepted.f, accepted.ps.vmax
    s = (trial - x) / c
    # P6f: the step bound doubled after a full step that reached half of it; but a QP step that only the bound stopped (the
    # model unbounded along the constraints' tangent plane) and whose violation outgrew both the one at x and the one
    # the linearisation predicts halves the bound to the step instead: the merit alone does not stop an objective that
    # falls faster outside the feasible set than its penalty grows (-x1 x2 x3 x4 outside an ellipsoid)
    lin_t = max(float(np.max(gW + alpha * _mv(J, p), initial=0.0)), 0.0)
    bound = step_z >= (1.0 - 1e-9) * st.delta and vt > max(2.0 * st.violation, 4.0 * lin_t, settings.violation_tol)
    delta = max(0.5 * alpha * step_z if bound else st.delta * 2.0 if alpha >= 1.0 and alpha * step_z >= 0.5 * st.delta
                else st.delta, delta_noise)  # fmt: skip
    best_x, best_f, best_v, best_pen = st.best_x, st.best_f, st.best_v, st.best_pen
    # the best point: within violation_tol, by the merit (with this iteration's weights) rather than by f alone, so
    # that a point that buys objective with violation inside the band (approaching from outside) does not win over one
    # further in at the price the multipliers put on violation
    pen_t = accepted.phi(merit) - ft
    if max(vt, 0.0) <= settings.violation_tol and ft + pen_t < best_f + best_pen:
        best_x, best_f, best_v, best_pen = trial.copy(), ft, vt, pen_t
    slow, resets, status, why = st.slow + 1 if alpha < _SLOW_ALPHA else 0, st.resets, RUNNING, st.why
    if slow >= _SLOW:  # P6c: progress by crumbs only: B is reset, and after _RESETS resets the phase has stalled
        B, slow, resets = np.eye(d) * max(1.0, float(np.median(np.abs(np.diagonal(B))))), 0, resets + 1
        if resets > _RESETS:
            status, why = STALLED, WHY_CRUMBS
            end = _floor_end(st, settings, kkt, err) if judged or st.noise_kind == NOISE_ROUNDING else None
            if end is not None:
                status, why = end, WHY_NONE
    if not float(np.abs(trial).max()) < settings.limit:
        status = DIVERGED
    cval = accepted.ps.val
    dropped = int(K < oracle.m and cval.shape[0] == K and K > 0 and bool(cval[-1] > 0))  # more violated than K
    spent = oracle.calls - spent0
    return dataclasses.replace(
        st, x=trial, fx=ft, vmax=vt, cand=accepted.ps.top, sviol=accepted.ps.sviol, B=B, lam_idx=lam_idx, lam=lam, mu=mu,
        gL_prev=c * gL_x, s_prev=s, best_x=best_x, best_f=best_f, best_v=best_v, best_pen=best_pen, delta=delta,
        fails=0, status=status, why=why, cost=spent, spent=st.spent + spent, dropped=dropped, slow=slow, resets=resets,
        **keep, **base,
    )  # fmt: skip


def _armijo(phit: float, phi0: float, D: float, alpha: float, relax: float) -> bool:
    """Armijo's test on the merit, relaxed by ``relax`` (twice the noise of the merit once noise is seen; Berahas,
    Byrd & Nocedal 2019): a decrease, or a predicted decrease that stands out of the noise."""
    if not math.isfinite(phit):
        return False
    if relax <= 0.0:
        return phit <= phi0 + 1e-4 * alpha * D
    return phit <= phi0 + 1e-4 * alpha * D + relax and (phit < phi0 or alpha * D < -relax)


def _rescaled(oracle: CountingOracle, st: PrecisionState, dif: _Diffs) -> PrecisionState:
    """At the first iteration: the scales of the variables whose start was 0 (:func:`variable_scales` guessed the
    typical size) from the objective's curvature, ``c_i = L sqrt(H_ref / |f''_ii|)``, so that the quasi-Newton matrix
    starts with comparable curvatures in ``z`` (``L``, ``H_ref``: the median scale and curvature of the other
    variables, or of all when every entry started at 0); clipped to ``L 10^[-6, 6]``. A curvature that the central
    differences did not resolve (a variable far larger than its guess: its second difference is below the rounding)
    is measured again with steps 100 and 10^4 times longer (one objective call of ``2 k`` points each, ``k`` such
    variables): the steps follow what the values resolve. The step bound follows the new scales."""
    c = st.scale.copy()
    x = st.x
    g = st.guess > 0
    H = np.abs(dif.curv_f) if dif.curv_f.shape[0] == c.shape[0] else np.full(c.shape[0], np.nan)
    sf = _sigma_f(st, dif.fvals)
    lo, hi = _bounds(oracle)
    h = dif.hf.copy()

    def measured(idx: IntArray, steps: Array) -> Array:  # |f''| along the coordinates idx at the given steps
        a = np.minimum(steps, np.maximum(hi - x, 0.0)[idx])
        b = np.minimum(steps, np.maximum(x - lo, 0.0)[idx])
        k = idx.shape[0]
        Q = np.repeat(x[None, :], 2 * k, axis=0)
        Q[np.arange(k), idx] += a
        Q[k + np.arange(k), idx] -= b
        f = _objective(oracle, _inside(oracle, Q))
        _, cq = _one_sided(np.array([st.fx]), f[:k, None], f[k:, None], a, b)
        return _resolved(cq[:, 0], sf, np.maximum(np.minimum(a, b), 1e-300))

    for _ in range(2):  # longer steps where the curvature of a guessed variable was not resolved
        todo = np.flatnonzero(g & ~(np.isfinite(H) & (H > 0.0)))
        if not todo.shape[0]:
            break
        h[todo] *= 100.0
        Hn = measured(todo, h[todo])
        found = np.isfinite(Hn)
        if found.any():  # a curvature seen at a long step only is kept when a step 10 times longer confirms it
            Hc = measured(todo[found], 10.0 * h[todo[found]])  # (a quadratic term: the same; x^4 at 0: 100 times more)
            Hn[np.flatnonzero(found)[~(np.isfinite(Hc) & (Hc <= 3.0 * Hn[found]) & (Hc >= Hn[found] / 3.0))]] = -1.0
        H[todo] = Hn
    res = np.isfinite(H) & (H > 0.0)
    known = res & ~g
    ref_set = known if known.any() else res
    if not (res & g).any() or not ref_set.any():
        return dataclasses.replace(st, guess=np.zeros(0))
    L = float(np.median(c[~g])) if (~g).any() else float(np.median(c))
    Href = float(np.median(H[ref_set] * (c[ref_set] / L) ** 2))  # the others' curvature at the scale L
    new = np.where(g & res, L * np.sqrt(Href / np.where(res, H, 1.0)), c)
    new = np.clip(new, 1e-6 * L, 1e6 * L)
    return dataclasses.replace(
        st, scale=new, guess=np.zeros(0), delta=10.0 * max(1.0, float(np.abs(x / new).max(initial=0.0)))
    )


def _isotropic(B: Array) -> bool:
    """Whether ``B`` is diagonal (no quasi-Newton update since its last reset: the identity, the measured curvatures)."""
    return bool(np.array_equal(B, np.diag(np.diagonal(B))))


def _fresh(curv: Array, curv_g: Array, weight: float, c: Array, B: Array) -> Array:
    """``B`` afresh once noise is seen: the diagonal of the Lagrangian's resolved curvatures in z,
    ``c_i^2 (|f''_ii| + (sum of the multipliers) max_j |g_j''_ii|)`` (each share where resolved, an unresolved
    ``f''_ii`` counting 0 where the constraints' share is resolved; the entries with neither at the median of the
    others), else the identity times ``max(1, median |B_ii|)``."""
    d = c.shape[0]
    cg = np.where(np.isfinite(curv_g), np.abs(curv_g), 0.0) if curv_g.shape[0] == d else np.zeros(d)
    cf = np.where(np.isnan(curv) & (weight * cg > 0.0), 0.0, np.abs(curv)) if curv.shape[0] == d else np.full(d, np.nan)
    cz = c * c * (cf + weight * cg)
    good = np.isfinite(cz) & (cz > 0.0)
    if not good.any():
        out: Array = np.eye(d) * max(1.0, float(np.median(np.abs(np.diagonal(B)))))
        return out
    diag: Array = np.diag(np.where(good, cz, float(np.median(cz[good]))))
    return diag


def _diagonal_start(st: PrecisionState) -> bool:
    """Whether the first ``B`` came from the measured curvatures (then the first update keeps its scaling)."""
    diag = np.diagonal(st.B)
    return bool(st.B.shape[0] > 1 and not np.all(diag == diag[0]))


def _first_matrix(curv: Array, c: Array, B: Array) -> Array:
    """P3 at the first iteration: ``diag(c^2 |f''_ii|)`` when the resolved curvatures (in z) spread over more than two
    orders of magnitude (variables whose scales the start does not show), the unresolved ones at their median;
    else ``B`` (the identity; the first update scales it)."""
    if curv.shape[0] != c.shape[0]:
        return B
    cz = c * c * np.abs(curv)
    good = np.isfinite(cz) & (cz > 0.0)
    if good.sum() < 2 or float(cz[good].max()) <= 100.0 * float(cz[good].min()):
        return B
    fill = float(np.median(cz[good]))
    out: Array = np.diag(np.where(good, cz, fill))
    return out


def _soc(
    oracle: CountingOracle, trial: Array, c: Array, W: IntArray, act: IntArray, J: Array, Jh: Array, k: int,
    merit: _Merit, bound: float, negligible: float,
) -> _Point | None:  # fmt: skip
    """P6b, a second-order correction of a rejected full step (Fletcher; Nocedal & Wright, sec. 18.3): the
    least-norm step ``q`` (in ``z``) with ``J_A c q = -g_A(x + p)`` on the active rows ``A`` (the constraints with a
    positive multiplier and the equalities) brings the curvature of the constraints back, which the linearisation
    left out (the Maratos effect). The corrected point is taken when its merit is ``<= bound``. Cost: ``|A|`` (and
    ``m_eq``) constraint values at ``x + p``, then ``n + m`` at the corrected point, unless the correction moves by
    at most ``negligible`` (``xtol max(1, |z|_inf)``: constraints that are linear along the step, where the
    corrected point is the rejected one and its pass would be wasted; measured in the scaled variables z)."""
    parts = []
    if act.shape[0]:
        parts.append(np.asarray(oracle.constraints(trial[None, :], act, purpose="precision"), dtype=np.float64)[0])
    if oracle.m_eq:
        parts.append(np.asarray(oracle.equalities(trial[None, :], None, purpose="precision"), dtype=np.float64)[0])
    r = np.concatenate(parts)
    A = np.vstack([J, Jh]) * c[None, :]
    if not (np.isfinite(r).all() and np.isfinite(A).all()):
        return None
    q = np.linalg.lstsq(A, -r, rcond=None)[0]
    if not float(np.abs(q).max(initial=0.0)) > negligible:  # the rejected point again (linear constraints): no pass
        return None
    pt = _evaluate(oracle, trial + c * q, k, W)
    if pt.phi(merit) <= bound:
        return pt
    return None


def _back_on(
    oracle: CountingOracle, st: PrecisionState, W: IntArray, gW: Array, J: Array, hx: Array, Jh: Array,
    pos: npt.NDArray[np.bool_], settings: PrecisionSettings, k: int,
) -> PrecisionState | None:  # fmt: skip
    """At the noise floor with a violation above ``violation_tol``: the least-norm move (in z) onto the linearisation
    of the rows that are violated or carry a multiplier (and the equalities), ``J_A c q = -g_A(x)``, from values the
    iteration has (no evaluation for the move; ``n + m`` for the corrected point). The corrected point, when its max
    violation over all ``m`` is within ``violation_tol``, is returned as the iterate (and the best point when it is
    better); ``None`` otherwise."""
    c = st.scale
    rows = (gW > 0.0) | pos
    A = np.vstack([J[rows], Jh]) * c[None, :]
    r = np.concatenate([gW[rows], hx])
    if not A.shape[0] or not (np.isfinite(A).all() and np.isfinite(r).all()):
        return None
    q = np.linalg.lstsq(A, -r, rcond=None)[0]
    pt = _evaluate(oracle, st.x + c * q, k, W)
    if not (pt.finite and max(pt.ps.vmax, 0.0) <= settings.violation_tol):
        return None
    better = pt.f <= st.best_f + st.best_pen
    return dataclasses.replace(
        st, x=pt.x, fx=pt.f, vmax=pt.ps.vmax, cand=pt.ps.top, sviol=pt.ps.sviol,
        best_x=pt.x.copy() if better else st.best_x, best_f=pt.f if better else st.best_f,
        best_v=pt.ps.vmax if better else st.best_v, best_pen=0.0 if better else st.best_pen,
    )  # fmt: skip


def _last_step(
    oracle: CountingOracle, st: PrecisionState, p: Array, merit: _Merit, gW: Array, hx: Array,
    settings: PrecisionSettings, k: int, W: IntArray,
) -> PrecisionState:  # fmt: skip
    """P5c: at a point that passed the tests of P5 with some violation left (at most ``violation_tol``), the QP
    step ``p`` (below ``xtol``, but aimed at the linearised constraints) is tried once: one objective pass
    and one full pass at ``x + p`` (``n + m`` evaluations, within the iteration's budget). It replaces ``x``
    when the max violation over all ``m`` drops and the merit does not rise; otherwise ``st`` is returned as it
    is. A quadratically convergent step taken small with respect to ``xtol`` can still take the violation from
    ``violation_tol``'s order down to rounding."""
    pt = _evaluate(oracle, st.x + p, k, W)
    if not (pt.finite and pt.ps.vmax < st.vmax and pt.phi(merit) <= st.fx + merit.penalty(gW, st.sviol, hx)):
        return st
    better = max(pt.ps.vmax, 0.0) <= settings.violation_tol and pt.f <= st.best_f
    return dataclasses.replace(
        st, x=pt.x, fx=pt.f, vmax=pt.ps.vmax, cand=pt.ps.top, sviol=pt.ps.sviol, step=float(np.abs(p).max()),
        best_x=pt.x.copy() if better else st.best_x, best_f=pt.f if better else st.best_f,
        best_v=pt.ps.vmax if better else st.best_v, best_pen=0.0 if better else st.best_pen,
    )  # fmt: skip


def _probe(
    oracle: CountingOracle, x: Array, fx: float, A: Array, settings: PrecisionSettings, rng: np.random.Generator, k: int,
    c: Array, noise: float,
) -> tuple[Array, float, float, IntArray, float] | None:
    """P5b, a second-order probe at a KKT point: ``x +- t c v`` for two random unit directions ``v`` in the null
    space of the active gradients with respect to ``z = x / c`` (the rows of ``A c``; ``t = 10^-2 max(1, |x / c|_inf)``,
    inside the bounds). A probe point whose objective is below ``f(x) - max(10^-12 max(1, |f(x)|), noise)`` and whose
    max violation over all ``m`` (a full pass) is ``<= violation_tol`` shows that ``x`` is no local minimum (a
    saddle, a maximum along the boundary): it is returned with its values. Cost: ``4 n`` plus ``m`` per lower probe
    point checked."""
    d = x.shape[0]
    if A.shape[0]:
        _, sv, Vt = np.linalg.svd(A * c[None, :])
        rank = int((sv > 1e-10 * max(float(sv.max(initial=0.0)), 1e-300)).sum())
        null = Vt[rank:].T
    else:
        null = np.eye(d)
    if null.shape[1] == 0:
        return None
    V = null @ rng.standard_normal((null.shape[1], 2))
    V /= np.maximum(np.linalg.norm(V, axis=0), 1e-300)
    V = c[:, None] * V
    t = 1e-2 * max(1.0, float(np.abs(x / c).max()))
    P = _inside(oracle, np.vstack([x + t * V.T, x - t * V.T]))
    F = _objective(oracle, P)
    lower = fx - max(1e-12 * max(1.0, abs(fx)), noise)
    for i in np.argsort(F):
        if not F[i] < lower:
            break
        ps = _pass(oracle, P[i], k)
        if max(ps.vmax, 0.0) <= settings.violation_tol:
            return P[i].copy(), float(F[i]), ps.vmax, ps.top, ps.sviol
    return None


def noise_words(st: PrecisionState) -> str:
    """What the phase knows of the noise, in words (for the messages and the notes)."""
    rel = st.noise_f / max(abs(st.fx), 1e-300) if math.isfinite(st.noise_f) else math.nan
    gpart = f", of the working set's constraints {st.noise_g:.2g}" if math.isfinite(st.noise_g) else ""
    if st.noise_kind == NOISE_SEEN:
        return f"noise of f estimated {st.noise_f:.2g} ({rel:.2g} relative){gpart} (ECNoise, {st.noise_evals} evaluations)"
    if st.noise_kind == NOISE_ROUNDING:
        fpart = f"f: {st.noise_f:.2g}" if math.isfinite(st.noise_f) else "f: no level (a kink, or a level its differences do not show)"
        return (f"no noise detected beyond the rounding of the values ({fpart}{gpart}; ECNoise, "
                f"{st.noise_evals} evaluations)")  # fmt: skip
    if st.noise_kind == NOISE_FAILED:
        return f"the noise could not be estimated (ECNoise found no level; {st.noise_evals} evaluations)"
    return "noise not estimated (the rounding of the values assumed)"


def describe(st: PrecisionState) -> str:
    """The phase in one sentence (for the stop message)."""
    return (
        f"precision phase (working-set SQP): {st.it} iteration(s), {st.spent} evaluations, last |W| = {st.working}, "
        f"last iteration {st.cost} evaluations, KKT residual {st.kkt:.2g} of max(1, |c grad f|) (its error from the "
        f"values {st.kkt_err:.2g}), step {st.step:.2g}, max violation {st.violation:.2g}"
        + (f", {st.elastic} elastic QP(s)" if st.elastic else "")
        + (", the working-set cap left violated constraints out" if st.dropped else "")
        + (f", {st.probes} second-order probe(s) found a better point next to a KKT point" if st.probes else "")
        + (f", {st.exchanges} exchange round(s) brought violated constraints into W" if st.exchanges else "")
        + (f"; {noise_words(st)}" if st.noise_kind != NOISE_UNKNOWN else "")
    )


def floor_words(st: PrecisionState, kkt_tol: float) -> str:
    """The noise floor in words: the residual reached, the noise estimated, the best tolerance the values support."""
    if st.kkt <= _FLOOR * st.kkt_err:
        why = f"within {_FLOOR:g} times its error {st.kkt_err:.2g} from the values"
        best = _FLOOR * st.kkt_err
    else:
        why = (f"its error from the values {st.kkt_err:.2g}; the merit's decrease predicted along the QP step, "
               f"{st.drop:.2g}, is within {_FLOOR:g} times the noise of the merit {st.floor_m:.2g}, and the line searches "
               "find no decrease")
        best = st.kkt
    return (
        f"KKT residual {st.kkt:.2g} reached ({why}; {noise_words(st)}); the best kkt_tol these values support is "
        f"about {best:.2g} (kkt_tol = {kkt_tol:g})"
    )


# ====================================================================== the phase of DSZOG / ADSZOG
def returned(st: PrecisionState, violation_tol: float) -> PrecisionState:
    """``st`` at the end of an unsuccessful phase (diverged, stalled, out of budget, noise-limited): the point it
    returns is its best point within ``violation_tol`` when it has one and the last iterate is not as good
    (infeasible, or a higher merit; always after a divergence). The max violation is the one measured at the point
    returned (the same pass, the same number as in the message)."""
    if st.status in (DIVERGED, STALLED, BUDGET, NOISE_LIMITED) and st.best_x.shape[0] and (
        st.status == DIVERGED or st.violation > violation_tol or st.fx > st.best_f + st.best_pen
    ):
        return dataclasses.replace(st, x=st.best_x, fx=st.best_f, vmax=st.best_v)
    return st


@dataclass(frozen=True)
class PrecisionPhaseState:
    """The precision phase of a DSZOG-type solver between iterations.

    ``x``: the point of the run (the iterate; at an unsuccessful end, the best feasible point: :func:`returned`);
    ``ps``: the phase's own state; ``penalty``: the state of the penalty phase that handed over (its ``p`` is
    reported, a hand-back resumes it); ``why``: why the run switched to the phase; ``steps``: the phase's steps
    (the last one included when the budget left could not pay for it).
    """

    x: Array
    ps: PrecisionState
    penalty: Any
    why: str = ""
    steps: int = 0


@dataclass(frozen=True)
class PrecisionPhase:
    """The precision phase as a phase (:class:`zoframe.phases.Phase`): :func:`precision_start` at the point handed
    over (with the restoration's active set as the first working set, when there is one), then one iteration
    P1-P6 (:func:`precision_step`) per step, with the tolerances of the solver (``precision_settings()``).

    The best point of the earlier precision phases of the run (``carried`` by the penalty state) is the phase's
    best point when it is better than the start, so that a hand-back loses nothing. Where the run goes when the
    phase ends (a stop with the phase's status, or back to the penalty phase after a stall) is the solver's rule
    (:meth:`_PenaltyMinimax.after_precision`, asked by :meth:`end`); its :meth:`carry` hands back the best feasible
    point (else where it stalled), whether it is feasible, the best point so far and the step count.
    """

    name: str
    solver: _PenaltyMinimax

    def start(self, oracle: CountingOracle, carry: Carry, rng: np.random.Generator) -> PrecisionPhaseState:
        pen = carry.extras["penalty"]
        ps = precision_start(oracle, carry.x, self.solver.precision_settings(), carry.extras.get("active"), rng,
                             getattr(pen, "x_start", None))
        carried = pen.carried
        if carried is not None and float(carried[1][0]) < ps.best_f:  # an earlier phase's best point is better
            ps = dataclasses.replace(ps, best_x=np.array(carried[0], copy=True), best_f=float(carried[1][0]),
                                     best_v=float(carried[1][1]), best_pen=0.0)  # fmt: skip
        return PrecisionPhaseState(x=ps.x, ps=ps, penalty=pen, why=str(carry.why))

    def step(self, oracle: CountingOracle, st: PrecisionPhaseState, rng: np.random.Generator) -> PrecisionPhaseState:
        """One iteration; at an unsuccessful end that does not hand back, the best feasible point (:func:`returned`)."""
        if st.ps.status != RUNNING:  # ended (a resumed run asks for one more step): nothing to evaluate
            return st
        s = self.solver
        ps = precision_step(oracle, st.ps, s.precision_settings(), rng)
        if not (ps.status == STALLED and s.hands_back(oracle)):
            ps = returned(ps, s.tol)
        return PrecisionPhaseState(x=ps.x, ps=ps, penalty=st.penalty, why=st.why, steps=st.steps + 1)

    def end(self, oracle: CountingOracle, st: PrecisionPhaseState) -> PhaseEnd | None:
        return self.solver.after_precision(oracle, st)

    def carry(self, st: PrecisionPhaseState) -> Carry:
        """What a hand-back gives the penalty phase: the best feasible point (else the last iterate), whether it is
        feasible, the best point of the precision phases so far (``best``: the point and ``[f, max violation]``),
        the penalty state and its step count (``t``: its steps so far and this phase's)."""
        ps = st.ps
        feasible = bool(ps.best_x.shape[0])
        carried = st.penalty.carried  # the best point of every phase so far goes on to the next one
        if feasible and (carried is None or ps.best_f < float(carried[1][0])):
            carried = (np.array(ps.best_x, copy=True), np.array([ps.best_f, ps.best_v]))
        return Carry(ps.best_x if feasible else ps.x, {
            "penalty": st.penalty, "t": int(st.penalty.t) + st.steps, "feasible": feasible, "best": carried,
        })  # fmt: skip

    @staticmethod
    def outputs(st: PrecisionPhaseState) -> dict[str, Array]:
        """``x``, the penalty phase's ``p`` and the phase's figures: ``max_violation`` (over all ``m``, measured at
        ``x``), ``kkt_residual`` and its error ``kkt_error``, ``precision_iterations``, ``precision_evaluations``,
        ``working_set``, ``switch_evaluations`` (the run's evaluations before the phase started) and the noise
        estimated for the objective and the working set's constraints (``noise_objective``, ``noise_constraints``:
        NaN when not estimated)."""
        from zoframe_constrained.penalty import p_outputs

        ps = st.ps
        return {
            "x": st.x, **p_outputs(st.penalty),
            "max_violation": np.array(ps.violation), "violation_checked": np.array(float(st.penalty.m)),
            "kkt_residual": np.array(ps.kkt), "kkt_error": np.array(ps.kkt_err),
            "precision_iterations": np.array(float(ps.it)),
            "precision_evaluations": np.array(float(ps.spent)), "working_set": np.array(float(ps.working)),
            "switch_evaluations": np.array(float(ps.before)),
            "noise_objective": np.array(ps.noise_f), "noise_constraints": np.array(ps.noise_g),
        }  # fmt: skip
