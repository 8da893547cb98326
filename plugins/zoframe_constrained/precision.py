"""The precision phase of DSZOG / ADSZOG: a working-set SQP from function values only.

The penalty minimax of the papers finds a feasible region cheaply from sampled constraints, but its
stochastic steps stall around 1e-2 relative accuracy. This phase takes over (or runs alone on small
problems) and converges to the tolerances the user gives, reading the constraints in the way of the
exchange methods for semi-infinite programs (Hettich & Kortanek, *Semi-infinite programming*, SIAM
Review 35, 1993): the SQP model holds a small working set ``W`` of constraints, and one value-only
pass over all ``m`` constraints per trial point adds the violated and newly active ones back. The
step is Powell's SQP (*A fast algorithm for nonlinearly constrained optimization calculations*,
1978: damped BFGS on the Lagrangian, an exact-penalty line search) with the quadratic subproblem
solved by Goldfarb & Idnani's dual method (:mod:`zoframe_constrained.qp`; a least-distance program,
Lawson & Hanson, 1974, ch. 23, through :func:`ldp.nnls`, where that stops on its limit) and
Powell's / Kraft's elastic variable when the linearisation is inconsistent (Kraft, *A software
package for sequential quadratic programming*, DFVLR-FB 88-28, 1988).

Equality constraints ``h_l(x) = 0`` (``oracle.m_eq > 0``, few) are always in the working set: their
values and difference Jacobian come with those of ``W`` (one more call over the same ``2 d + 1``
points), the QP holds each as an equality row (its multiplier ``mu_l`` of free sign), the elastic
form relaxes it to ``h_l + J_l p = xi h_l``, and the violation of the merit, of the stopping
test and of the best feasible point is ``max(max_j g_j, max_l |h_l|)``.

Scaling. The phase works in scaled variables ``z = x / c`` with one scale per variable, fixed when it starts
(:func:`variable_scales`): ``c_i = max(1, |x0_i|)``, or the width ``hi_i - lo_i`` of the box where that is finite
and narrower. ``B``, the QP, the step bound ``Delta`` and the second-order probe live in ``z``; the difference
step of coordinate ``i`` is ``eps^(1/3) max(c_i, |x_i|)``. Multiplying a variable (with its bounds and its start)
by a constant therefore changes no decision of the phase, when the variable's scale shows in its start or its
box. The stopping tests stay in ``x``, the problem's own units.

One iteration (:func:`precision_step`, the lines ``# P.k`` in the code)::

    P1  W = {j : lambda_j > 0 at the last QP} + the top-K constraints of the last full pass
    P2  grad f (all n components) and J_W by central differences: one objective call over 2d
        points, one constraint call over 2d + 1 points (g_W at x too), all inside the bounds
    P3  damped BFGS update of B (in z) with s = (x - x_prev) / c, y = c * (grad L(x, lam) - grad L(x_prev, lam))
    P4  QP in z:  min 1/2 q^T B q + (c grad f)^T q  s.t.  g_W + J_W (c q) <= 0,  lo <= x + c q <= hi,
        |q|_inf <= Delta;  p = c q  (elastic variable xi in [0, 1] on the violated rows when it is inconsistent)
    P5  stop (CONVERGED) when the max violation over all m constraints (full pass) is <= violation_tol,
        the KKT residual |grad f + J_W^T lam + bounds| <= kkt_tol max(1, |grad f|_inf), and the step
        |p|_inf <= xtol max(1, |x|_inf) or the predicted change |grad f^T p| + sum lam_j |g_j| <=
        ftol max(1, |f|)
    P5b at such a point, a second-order probe: x +- t v along two random directions v in the null space of
        the active gradients (those whose multiplier force exceeds 1e-8 max(1, |grad f|): a weakly active
        constraint does not bind the probe); a feasible probe point with a lower objective (a saddle, a maximum along the
        boundary) is taken as the next iterate and the phase goes on
    P5c at such a point with a violation left, the QP step (small, but aimed at the linearised constraints) is
        tried once: it is taken when the max violation over all m (full pass) drops and the merit does not rise
    P6  line search on the merit f + rho max(0, max_j g_j) (rho >= 1.5 sum lam, and large enough for p to
        descend on the merit when the linearisation removes violation; the last rho is kept only while x is
        infeasible beyond violation_tol, so that a transient blow-up of the multipliers at a nearly degenerate
        active set does not freeze the line search for good): each trial is one objective pass
        over the n components and one blocked value-only pass over all m constraints
        (:func:`zoframe.measures.max_violation_full`, keeping the top K values for the next W)
    P6a exchange rounds: when the full step is rejected and its pass shows constraints outside W violated
        beyond the linearised violation, those (up to K) join W with their values and difference rows at x
        (over the points of P2) and the QP is solved again from x, before any shortening of the step (at most
        5 rounds): at a crowded vertex (m >> d rows near the solution) a shortened step removes only a
        fraction of the violation per iteration, a step of the enlarged QP removes it
    P6b when the full step is rejected, a second-order correction: the least-norm move (in z) back onto the
        linearisation of the active rows at x + p, tried once before the step is shortened (the Maratos effect)
    P6c ten iterations in a row whose accepted step was cut below 0.1 of the QP step reset B to a multiple of
        the identity; the third time, the phase has stalled (progress by crumbs: the model leads nowhere)

As a phase of the solvers (:class:`PrecisionPhase`, :mod:`zoframe.phases`): it starts at the point the
restoration hands over (with the restoration's active set as its first ``W``), or at ``x0`` on a small
problem or one with equality constraints; one step is one iteration; its end (converged, stalled, out of
budget, diverged) is the run's, or a stall hands back to the penalty phase (``zoframe_constrained.solvers``).

Cost of an iteration: ``2 d n + (2 d + 1)|W|`` for the gradients plus ``n + m`` per trial point
(usually one), ``(2 d + 1)`` values per row that joins ``W`` in an exchange round, and ``|A| + m_eq``
values for a second-order correction (``A`` the active rows, at most one per iteration): about ``m + 2 d (n + |W|)`` evaluations, against ``(d + 1) m`` for a finite-difference
SQP over all constraints; memory ``O(|W| d + d^2)`` besides the blocks of the pass. Every evaluation
goes through the counting oracle under the purpose ``"precision"``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
import math
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from scipy.linalg import cho_factor, solve_triangular

from zoframe.errors import NonFiniteValueError
from zoframe.measures import max_violation_full
from zoframe.oracle import CountingOracle
from zoframe.phases import Carry, PhaseEnd
from zoframe.protocols import Array, IntArray
from zoframe_constrained.ldp import nnls
from zoframe_constrained.qp import dual_qp

if TYPE_CHECKING:
    from zoframe_constrained.solvers import _PenaltyMinimax

__all__ = [
    "PrecisionPhase", "PrecisionPhaseState", "PrecisionSettings", "PrecisionState", "iteration_cost", "precision_start",
    "precision_step", "returned", "variable_scales",
]  # fmt: skip

_EPS = float(np.finfo(np.float64).eps)
#: central-difference step relative to max(c_i, |x_i|) (c the scales): balances truncation and rounding (about 1e-10 accuracy)
_H = _EPS ** (1.0 / 3.0)
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

#: status codes of the phase (kept as a float in the packed state)
RUNNING, CONVERGED, STALLED, DIVERGED, BUDGET = 0, 1, 2, 3, 4


@dataclass(frozen=True)
class PrecisionSettings:
    """The phase's tolerances, in the problem's own units (see the module docstring, P5).

    ``xtol``: step test ``|p|_inf <= xtol max(1, |x|_inf)``; ``ftol``: predicted change of the
    objective ``<= ftol max(1, |f|)``; ``kkt_tol``: KKT residual ``<= kkt_tol max(1, |grad f|_inf)``;
    ``violation_tol``: max violation over all ``m`` constraints; ``working``: ``K``, the top values of
    each full pass that join the working set (``None``: ``min(m, max(4 d, 32))``); ``limit``: the
    phase ends DIVERGED when ``|x|_inf`` exceeds it.
    """

    xtol: float = 1e-8
    ftol: float = 1e-12
    kkt_tol: float = 1e-6
    violation_tol: float = 1e-6
    working: int | None = None
    limit: float = 1e12

    def top(self, oracle: CountingOracle) -> int:
        k = self.working if self.working is not None else max(4 * oracle.dim, 32)
        return int(min(oracle.m, k))


@dataclass(frozen=True)
class PrecisionState:
    """The phase between iterations: the point, its values, the working set's multipliers, ``B``."""

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
    best_f: float = math.inf
    best_v: float = math.inf
    rho: float = 0.0
    delta: float = 1.0  # the step bound |p / c|_inf <= delta (scaled units)
    it: int = 0
    fails: int = 0
    slow: int = 0  # consecutive iterations whose accepted step was cut below _SLOW_ALPHA of the QP step
    resets: int = 0  # resets of B after _SLOW such iterations (P6c)
    status: int = RUNNING
    kkt: float = math.nan  # the last KKT residual, relative to max(1, |grad f|_inf)
    step: float = math.nan  # the last |p|_inf
    working: int = 0  # |W| of the last iteration
    cost: int = 0  # evaluations of the last iteration
    spent: int = 0  # evaluations of the phase so far
    elastic: int = 0  # iterations whose QP needed the elastic variable
    dropped: int = 0  # violated constraints left out of W by the cap K (last pass)
    before: int = 0  # evaluations of the run before the phase started
    probes: int = 0  # second-order probes that found a better feasible point (P5)
    exchanges: int = 0  # exchange rounds (P6a) so far

    @property
    def violation(self) -> float:
        return max(self.vmax, 0.0)

    _ARRAYS = ("x", "cand", "B", "lam_idx", "lam", "mu", "gL_prev", "s_prev", "best_x", "scale")
    _SCALARS = ("fx", "vmax", "best_f", "best_v", "rho", "delta", "it", "fails", "slow", "resets", "status", "kkt", "step", "working", "cost",
                "spent", "elastic", "dropped", "before", "probes", "exchanges")  # fmt: skip

    def pack(self) -> tuple[Array, ...]:
        """The state as a tuple of arrays (what a checkpoint stores)."""
        scal = np.array([float(getattr(self, k)) for k in self._SCALARS])
        return (*(np.asarray(getattr(self, k)) for k in self._ARRAYS), scal)

    @classmethod
    def unpack(cls, packed: tuple[Array, ...]) -> PrecisionState:
        arrays: dict[str, Any] = dict(zip(cls._ARRAYS, packed[:-1], strict=True))
        arrays["cand"] = np.asarray(arrays["cand"], dtype=np.intp)
        arrays["lam_idx"] = np.asarray(arrays["lam_idx"], dtype=np.intp)
        scal: dict[str, Any] = dict(zip(cls._SCALARS, packed[-1].tolist(), strict=True))
        for k in ("it", "fails", "slow", "resets", "status", "working", "cost", "spent", "elastic", "dropped", "before", "probes", "exchanges"):
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
    """The diagonal scaling ``c`` of the phase (``x = c * z``): ``max(1, |x0_i|)``, or the box width ``hi_i - lo_i``
    where that is finite and narrower. Everything the phase measures in a length of its own (the quasi-Newton
    matrix, the QP, the step bound, the second-order probe, the difference steps) is in the scaled variables
    ``z``, so that multiplying a variable by a constant (together with its bounds) changes nothing."""
    mag = np.maximum(1.0, np.abs(x0))
    width = hi - lo
    narrow = np.isfinite(width) & (width > 0.0) & (width < mag)
    return np.where(narrow, width, mag)


def _inside(oracle: CountingOracle, X: Array) -> Array:
    box = oracle.feasible_set
    return X if box is None else np.asarray(box.project(X), dtype=np.float64)


def _objective(oracle: CountingOracle, X: Array) -> Array:
    """The objective ``f = mean_i l_i`` at the rows of ``X`` (all ``n`` components, one call)."""
    out: Array = np.asarray(oracle.objective(X, None, purpose="precision"), dtype=np.float64).mean(axis=1)
    return out


def _pass(oracle: CountingOracle, x: Array, k: int) -> tuple[float, IntArray, Array]:
    """One value-only pass over all ``m`` constraints in blocks: ``(max_j g_j, top-k indices, their values)``;
    with equality constraints the first value is ``max(max_j g_j, max_l |h_l|)`` (one more call of ``m_eq``)."""
    full = max_violation_full(oracle, x, top=k, purpose="precision")
    vmax = float(full.max_value)
    if oracle.m_eq:
        h = np.asarray(oracle.equalities(x[None, :], None, purpose="precision"), dtype=np.float64)[0]
        vmax = max(vmax, float(np.abs(h).max()))
    return vmax, np.asarray(full.top_indices, dtype=np.intp), np.asarray(full.top_values)


def iteration_cost(oracle: CountingOracle, working: int) -> int:
    """Evaluations of one iteration with one trial point: ``2 d n + (2 d + 1)(|W| + m_eq) + n + m + m_eq``."""
    d = oracle.dim
    return 2 * d * oracle.n + (2 * d + 1) * (working + oracle.m_eq) + oracle.n + oracle.m + oracle.m_eq


def precision_start(
    oracle: CountingOracle, x0: Array, settings: PrecisionSettings, active: IntArray | None = None
) -> PrecisionState:
    """The phase's first state at ``x0``: its objective (``n`` evaluations) and one full pass (``m``)."""
    spent0 = oracle.calls
    x = _inside(oracle, np.array(x0, dtype=np.float64, copy=True).reshape(-1))
    fx = float(_objective(oracle, x[None, :])[0])
    vmax, cand, _ = _pass(oracle, x, settings.top(oracle))
    lam_idx = np.zeros(0, dtype=np.intp) if active is None else np.unique(np.asarray(active, dtype=np.intp))
    d = x.shape[0]
    feasible = max(vmax, 0.0) <= settings.violation_tol
    scale = variable_scales(x, *_bounds(oracle))
    return PrecisionState(
        x=x, fx=fx, vmax=vmax, cand=cand, B=np.eye(d), lam_idx=lam_idx, lam=np.zeros(lam_idx.shape[0]), mu=np.zeros(oracle.m_eq),
        gL_prev=np.zeros(0), s_prev=np.zeros(0), best_x=x.copy() if feasible else np.zeros(0),
        best_f=fx if feasible else math.inf, best_v=vmax if feasible else math.inf, scale=scale,
        delta=10.0 * max(1.0, float(np.abs(x / scale).max(initial=0.0))),
        spent=oracle.calls - spent0, before=spent0,
    )  # fmt: skip


def _gradients(oracle: CountingOracle, x: Array, W: IntArray, scale: Array) -> tuple[Array, Array, Array, Array, Array]:
    """P2: ``(grad f, g_W(x), J_W, P, span)`` by central differences inside the bounds (one call per kind); with
    equality constraints their rows follow those of ``W`` in ``g_W`` and ``J_W`` (one more call). The step
    of coordinate ``i`` is ``eps^(1/3) max(c_i, |x_i|)``, relative to its scale ``c_i``; ``P`` are the ``2 d``
    difference points and ``span`` the distances between each pair (for :func:`_rows`)."""
    d = x.shape[0]
    h = _H * np.maximum(scale, np.abs(x))
    E = np.diag(h)
    P = _inside(oracle, np.vstack([x + E, x - E]))
    span = np.maximum(np.diagonal(P[:d]) - np.diagonal(P[d:]), 1e-300)  # one-sided at a bound
    f = _objective(oracle, P)
    grad = (f[:d] - f[d:]) / span
    if W.shape[0] == 0 and not oracle.m_eq:
        return grad, np.zeros(0), np.zeros((0, d)), P, span
    X = np.vstack([x[None, :], P])
    parts = [] if W.shape[0] == 0 else [np.asarray(oracle.constraints(X, W, purpose="precision"), dtype=np.float64)]
    if oracle.m_eq:
        parts.append(np.asarray(oracle.equalities(X, None, purpose="precision"), dtype=np.float64))
    C = parts[0] if len(parts) == 1 else np.hstack(parts)
    J = ((C[1 : d + 1] - C[d + 1 :]) / span[:, None]).T
    return grad, C[0], J, P, span


def _rows(oracle: CountingOracle, x: Array, P: Array, span: Array, idx: IntArray) -> tuple[Array, Array]:
    """``(g_idx(x), J_idx)`` over the difference points ``P`` of :func:`_gradients` (one call of
    ``(2 d + 1) |idx|`` values): the rows that join ``W`` in an exchange round (P6a)."""
    d = x.shape[0]
    C = np.asarray(oracle.constraints(np.vstack([x[None, :], P]), idx, purpose="precision"), dtype=np.float64)
    return C[0], ((C[1 : d + 1] - C[d + 1 :]) / span[:, None]).T


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
    sy = float(s @ y)
    if first and sy > 0.0:
        B = (float(y @ y) / sy) * np.eye(B.shape[0])  # Nocedal & Wright (6.20): the first scaling
    Bs = B @ s
    sBs = float(s @ Bs)
    if not (sBs > 0.0 and math.isfinite(sBs)):
        return B
    if sy < 0.2 * sBs:
        theta = 0.8 * sBs / (sBs - sy)
        y = theta * y + (1.0 - theta) * Bs
        sy = float(s @ y)
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


def _multipliers(
    qp: _Step, W: IntArray, grad: Array, J: Array, Jh: Array
) -> tuple[npt.NDArray[np.bool_], IntArray, Array, Array, Array]:
    """The QP's multipliers: ``(pos, lam_idx, lam, mu, grad L)`` with ``pos`` the rows of ``W`` with a positive
    multiplier, ``lam_idx = W[pos]`` and ``grad L = grad f + J_pos^T lam + J_h^T mu`` (in x)."""
    pos = qp.lam_W > 0
    lam, mu = qp.lam_W[pos], qp.mu
    return pos, W[pos], lam, mu, grad + J[pos].T @ lam + Jh.T @ mu


def precision_step(
    oracle: CountingOracle, st: PrecisionState, settings: PrecisionSettings, rng: np.random.Generator | None = None
) -> PrecisionState:
    """One iteration P1-P6 of the phase from ``st`` (see the module docstring); an ended phase stays as it is.
    ``rng``: the random directions of the second-order probe (P5b; ``None``: no probe)."""
    if st.status != RUNNING:
        return st
    spent0 = oracle.calls
    x = st.x
    d = x.shape[0]
    K = settings.top(oracle)
    W = np.union1d(st.lam_idx, st.cand).astype(np.intp)  # P1
    remaining = oracle.remaining
    if remaining is not None and remaining < iteration_cost(oracle, int(W.shape[0])):
        return dataclasses.replace(st, status=BUDGET)
    c = st.scale  # x = c * z: B, the QP, the step bound and s_prev are in z
    grad, gA, JA, P, span = _gradients(oracle, x, W, c)  # P2 (the equality rows after those of W)
    if not (np.isfinite(grad).all() and np.isfinite(JA).all()):
        raise NonFiniteValueError("the precision phase's difference gradients are not finite at the iterate")
    nI = W.shape[0]
    gW, J, hx, Jh = gA[:nI], JA[:nI], gA[nI:], JA[nI:]
    B = st.B
    if st.s_prev.shape[0]:  # P3: grad L at x with the last multipliers (their constraints are in W)
        gL = grad + J[np.searchsorted(W, st.lam_idx)].T @ st.lam if st.lam_idx.shape[0] else grad
        gL = gL + Jh.T @ st.mu if st.mu.shape[0] else gL
        B = _bfgs(B, st.s_prev, c * gL - st.gL_prev, first=st.it == 1)
    lo, hi = _bounds(oracle)
    neq = hx.shape[0]
    qp, B = _solve(B, grad, gA, JA, x, lo, hi, c, st.delta, neq)  # P4 (in z)
    p = c * qp.p  # the step in x
    pos, lam_idx, lam, mu, gL_x = _multipliers(qp, W, grad, J, Jh)
    # P5: the KKT residual with the QP's multipliers (W rows, equalities, real bounds), the step, the predicted change,
    # all in x (the problem's own units)
    resid = gL_x + qp.lam_box / c
    gscale = max(1.0, float(np.abs(grad).max()))
    kkt = float(np.abs(resid).max()) / gscale
    step = float(np.abs(p).max(initial=0.0))
    predicted = abs(float(grad @ p)) + float(lam @ np.abs(gW[pos])) + float(np.abs(mu) @ np.abs(hx))
    small = step <= settings.xtol * max(1.0, float(np.abs(x).max())) or predicted <= settings.ftol * max(1.0, abs(st.fx))
    base: dict[str, Any] = {"it": st.it + 1, "kkt": kkt, "step": step, "working": int(W.shape[0]),
            "elastic": st.elastic + (qp.xi > 0.0)}  # fmt: skip
    if st.violation <= settings.violation_tol and kkt <= settings.kkt_tol and small and not qp.trust and qp.xi == 0.0:
        found = None
        if rng is not None and st.probes < _PROBES:  # P5b: is it a minimum along the active constraints?
            # the rows whose multiplier force counts next to max(1, |grad f|): a weakly active row (a negligible
            # multiplier) does not bind the probe to its tangent space (the probe's full pass checks feasibility)
            force = 1e-8 * gscale
            strong = lam * np.abs(J[pos]).max(axis=1, initial=0.0) > force
            A = np.vstack([J[pos][strong], Jh, np.eye(d)[np.abs(qp.lam_box / c) > force]])
            found = _probe(oracle, x, st.fx, A, settings, rng, K, c)
        if found is not None:  # a better feasible point next to a KKT point that is no minimum: go on from there
            trial, ft, vt, cand = found
            spent = oracle.calls - spent0
            return dataclasses.replace(
                st, x=trial, fx=ft, vmax=vt, cand=cand, B=np.eye(d), lam_idx=lam_idx, lam=lam, mu=mu, gL_prev=np.zeros(0),
                s_prev=np.zeros(0), probes=st.probes + 1, cost=spent, spent=st.spent + spent, fails=0,
                best_x=trial.copy(), best_f=ft, best_v=vt, **base,
            )  # fmt: skip
        done = dataclasses.replace(st, status=CONVERGED, lam_idx=lam_idx, lam=lam, mu=mu, B=B, **base)
        if st.vmax > 0.0 and step > 0.0:  # P5c: the converged step still reduces a violation: take it if it does
            done = _last_step(oracle, done, p, lam, mu, settings, K)
        spent = oracle.calls - spent0
        return dataclasses.replace(done, cost=spent, spent=st.spent + spent)
    rounds = 0
    while True:
        rho0 = st.rho if st.violation > settings.violation_tol else 0.0  # P6: rho kept while infeasible only
        rho = max(rho0, 1.5 * (float(lam.sum()) + float(np.abs(mu).sum())) + 1e-12 * max(1.0, abs(st.fx)))
        lin = float(np.max(gW + J @ p, initial=0.0))  # the linearised violation after the step (elastic: > 0)
        lin = max(lin, float(np.max(np.abs(hx + Jh @ p), initial=0.0)))
        cut = st.violation - max(lin, 0.0)  # the violation the linearisation removes
        if cut > 0.0:  # rho large enough for p to descend on the merit (Nocedal & Wright, (18.36))
            rho = max(rho, (float(grad @ p) + 0.5 * float(qp.p @ B @ qp.p)) / (0.5 * cut))
        phi0 = st.fx + rho * st.violation
        D = float(grad @ p) - rho * (st.violation - max(lin, 0.0))
        first = _trial(oracle, x + p, K, st.cand) if D < 0.0 else None
        if first is None or first[0] + rho * max(first[1], 0.0) <= phi0 + 1e-4 * D:
            break
        # P6a: the full step violates constraints outside W (the pass at x + p shows them): they join W, with their
        # values and difference rows at x over the same points as J_W, and the QP is solved again from x
        _, _, cand_t, cval_t = first
        new = cand_t[(cval_t > max(lin, 0.0)) & ~np.isin(cand_t, W)]
        more = (2 * d + 1) * new.shape[0] + oracle.n + oracle.m
        if not new.shape[0] or rounds >= _ROUNDS or (oracle.remaining is not None and oracle.remaining < more):
            break
        g_new, J_new = _rows(oracle, x, P, span, new)
        if not np.isfinite(J_new).all():
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
    # P6: line search on the merit f + rho max(0, max_j g_j, max_l |h_l|) from the full step evaluated above
    alpha = 1.0
    accepted = None
    for _ in range(_TRIALS):
        if not D < 0.0:
            break
        if alpha == 1.0 and first is not None:
            ft, vt, cand, cval = first
            trial = _inside(oracle, (x + p)[None, :])[0]
        else:
            trial = _inside(oracle, (x + alpha * p)[None, :])[0]
            ft, vt, cand, cval = _trial(oracle, trial, K, st.cand)
        phit = ft + rho * max(vt, 0.0)
        if phit <= phi0 + 1e-4 * alpha * D:
            accepted = (trial, ft, vt, cand, cval)
            break
        if alpha == 1.0 and math.isfinite(ft) and math.isfinite(vt) and (act.any() or neq):  # P6b: second-order correction
            accepted = _soc(oracle, x, trial, c, W[act], J[act], Jh, K, rho, phi0 + 1e-4 * D,
                            settings.xtol * max(1.0, float(np.abs(x / c).max())))
            if accepted is not None:
                break
        if math.isfinite(phit):  # quadratic interpolation, kept in [0.1, 0.5] of the last step
            denom = 2.0 * (phit - phi0 - D * alpha)
            a_new = -D * alpha * alpha / denom if denom > 0 else 0.5 * alpha
            alpha = min(max(a_new, 0.1 * alpha), 0.5 * alpha)
        else:
            alpha *= 0.25
    spent = oracle.calls - spent0
    exchanges = st.exchanges + rounds
    if accepted is None:  # no decrease along p: reset B (and the step bound) and try again; give up after _FAILS
        fails = st.fails + 1
        status = STALLED if fails >= _FAILS else RUNNING
        B_new = np.eye(d) * max(1.0, float(np.median(np.abs(np.diagonal(B))))) if fails > 1 else B
        return dataclasses.replace(
            st, B=B_new, rho=rho, fails=fails, status=status, lam_idx=lam_idx, lam=lam, mu=mu, gL_prev=np.zeros(0),
            s_prev=np.zeros(0), delta=max(0.1 * st.delta, step_z * 0.1) if step_z > 0 else st.delta, cost=spent,
            spent=st.spent + spent, exchanges=exchanges, **base,
        )  # fmt: skip
    trial, ft, vt, cand, cval = accepted
    s = (trial - x) / c
    delta = st.delta * 2.0 if alpha == 1.0 and step_z >= 0.5 * st.delta else st.delta
    best_x, best_f, best_v = st.best_x, st.best_f, st.best_v
    # the best point: within violation_tol, by the merit (with this iteration's rho) rather than by f alone, so that
    # a point that buys objective with violation inside the band (approaching from outside) does not win over one
    # further in at the price the multipliers put on violation
    if max(vt, 0.0) <= settings.violation_tol and ft + rho * max(vt, 0.0) < best_f + rho * max(best_v, 0.0):
        best_x, best_f, best_v = trial.copy(), ft, vt
    slow, resets, status = st.slow + 1 if alpha < _SLOW_ALPHA else 0, st.resets, RUNNING
    if slow >= _SLOW:  # P6c: progress by crumbs only: B is reset, and after _RESETS resets the phase has stalled
        B, slow, resets = np.eye(d) * max(1.0, float(np.median(np.abs(np.diagonal(B))))), 0, resets + 1
        status = STALLED if resets > _RESETS else RUNNING
    if not float(np.abs(trial).max()) < settings.limit:
        status = DIVERGED
    dropped = int(K < oracle.m and cval.shape[0] == K and K > 0 and bool(cval[-1] > 0))  # more violated than K
    return dataclasses.replace(
        st, x=trial, fx=ft, vmax=vt, cand=cand, B=B, lam_idx=lam_idx, lam=lam, mu=mu, gL_prev=c * gL_x, s_prev=s,
        best_x=best_x, best_f=best_f, best_v=best_v, rho=rho, delta=delta, fails=0, status=status, cost=spent,
        spent=st.spent + spent, dropped=dropped, exchanges=exchanges, slow=slow, resets=resets, **base,
    )  # fmt: skip


def _trial(oracle: CountingOracle, point: Array, k: int, cand: IntArray) -> tuple[float, float, IntArray, Array]:
    """A trial point's objective (``n`` evaluations) and full pass (``m``): ``(f, max violation, top-k, their
    values)``; NaN values (and the old candidates ``cand``) when a value there is not finite."""
    trial = _inside(oracle, point[None, :])[0]
    try:
        ft = float(_objective(oracle, trial[None, :])[0])
        vt, top, val = _pass(oracle, trial, k)
    except NonFiniteValueError:
        return math.nan, math.nan, cand, np.zeros(0)
    return ft, vt, top, val


def _soc(
    oracle: CountingOracle, x: Array, trial: Array, c: Array, act: IntArray, J: Array, Jh: Array, k: int, rho: float,
    bound: float, negligible: float,
) -> tuple[Array, float, float, IntArray, Array] | None:
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
    corrected = _inside(oracle, (trial + c * q)[None, :])[0]
    try:
        ft = float(_objective(oracle, corrected[None, :])[0])
        vt, cand, cval = _pass(oracle, corrected, k)
    except NonFiniteValueError:
        return None
    if ft + rho * max(vt, 0.0) <= bound:
        return corrected, ft, vt, cand, cval
    return None


def _last_step(
    oracle: CountingOracle, st: PrecisionState, p: Array, lam: Array, mu: Array, settings: PrecisionSettings, k: int
) -> PrecisionState:
    """P5c: at a point that passed the tests of P5 with some violation left (at most ``violation_tol``), the QP
    step ``p`` (below ``xtol``, but aimed at the linearised constraints) is tried once: one objective pass
    and one full pass at ``x + p`` (``n + m`` evaluations, within the iteration's budget). It replaces ``x``
    when the max violation over all ``m`` drops and the merit ``f + rho max(0, v)`` does not rise; otherwise
    ``st`` is returned as it is. A quadratically convergent step taken small with respect to ``xtol`` can
    still take the violation from ``violation_tol``'s order down to rounding."""
    trial = _inside(oracle, (st.x + p)[None, :])[0]
    try:
        ft = float(_objective(oracle, trial[None, :])[0])
        vt, cand, _ = _pass(oracle, trial, k)
    except NonFiniteValueError:
        return st
    rho = max(st.rho, 1.5 * (float(lam.sum()) + float(np.abs(mu).sum())))
    if not (vt < st.vmax and math.isfinite(ft) and ft + rho * max(vt, 0.0) <= st.fx + rho * st.violation):
        return st
    better = max(vt, 0.0) <= settings.violation_tol and ft <= st.best_f
    return dataclasses.replace(
        st, x=trial, fx=ft, vmax=vt, cand=cand, step=float(np.abs(p).max()),
        best_x=trial.copy() if better else st.best_x, best_f=ft if better else st.best_f, best_v=vt if better else st.best_v,
    )  # fmt: skip


def _probe(
    oracle: CountingOracle, x: Array, fx: float, A: Array, settings: PrecisionSettings, rng: np.random.Generator, k: int,
    c: Array,
) -> tuple[Array, float, float, IntArray] | None:
    """P5b, a second-order probe at a KKT point: ``x +- t c v`` for two random unit directions ``v`` in the null
    space of the active gradients with respect to ``z = x / c`` (the rows of ``A c``; ``t = 10^-2 max(1, |x / c|_inf)``,
    inside the bounds). A probe point whose
    objective is below ``f(x) - 10^-12 max(1, |f(x)|)`` and whose max violation over all ``m`` (a full pass)
    is ``<= violation_tol`` shows that ``x`` is no local minimum (a saddle, a maximum along the boundary):
    it is returned with its values. Cost: ``4 n`` plus ``m`` per lower probe point checked."""
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
    for i in np.argsort(F):
        if not F[i] < fx - 1e-12 * max(1.0, abs(fx)):
            break
        vt, cand, _ = _pass(oracle, P[i], k)
        if max(vt, 0.0) <= settings.violation_tol:
            return P[i].copy(), float(F[i]), vt, cand
    return None


def describe(st: PrecisionState) -> str:
    """The phase in one sentence (for the stop message)."""
    return (
        f"precision phase (working-set SQP): {st.it} iteration(s), {st.spent} evaluations, last |W| = {st.working}, "
        f"last iteration {st.cost} evaluations, KKT residual {st.kkt:.2g} of max(1, |grad f|), step {st.step:.2g}, "
        f"max violation {st.violation:.2g}" + (f", {st.elastic} elastic QP(s)" if st.elastic else "")
        + (", the working-set cap left violated constraints out" if st.dropped else "")
        + (f", {st.probes} second-order probe(s) found a better point next to a KKT point" if st.probes else "")
        + (f", {st.exchanges} exchange round(s) brought violated constraints into W" if st.exchanges else "")
    )


# ====================================================================== the phase of DSZOG / ADSZOG
def returned(st: PrecisionState, violation_tol: float) -> PrecisionState:
    """``st`` at the end of an unsuccessful phase (diverged, stalled, out of budget): the point it returns is its
    best point within ``violation_tol`` when it has one and the last iterate is not as good (infeasible, or a
    higher objective; always after a divergence)."""
    if st.status in (DIVERGED, STALLED, BUDGET) and st.best_x.shape[0] and (
        st.status == DIVERGED or st.violation > violation_tol or st.fx > st.best_f
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
        ps = precision_start(oracle, carry.x, self.solver.precision_settings(), carry.extras.get("active"))
        carried = pen.carried
        if carried is not None and float(carried[1][0]) < ps.best_f:  # an earlier phase's best point is better
            ps = dataclasses.replace(ps, best_x=np.array(carried[0], copy=True), best_f=float(carried[1][0]),
                                     best_v=float(carried[1][1]))  # fmt: skip
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
        """``x``, the penalty phase's ``p`` and the phase's figures: ``max_violation`` (over all ``m``),
        ``kkt_residual``, ``precision_iterations``, ``precision_evaluations``, ``working_set`` and
        ``switch_evaluations`` (the run's evaluations before the phase started)."""
        from zoframe_constrained.penalty import p_outputs

        ps = st.ps
        return {
            "x": st.x, **p_outputs(st.penalty),
            "max_violation": np.array(ps.violation), "violation_checked": np.array(float(st.penalty.m)),
            "kkt_residual": np.array(ps.kkt), "precision_iterations": np.array(float(ps.it)),
            "precision_evaluations": np.array(float(ps.spent)), "working_set": np.array(float(ps.working)),
            "switch_evaluations": np.array(float(ps.before)),
        }  # fmt: skip
