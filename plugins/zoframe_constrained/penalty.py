"""The penalty phase of DSZOG and ADSZOG: the papers' doubly stochastic step on the penalty minimax.

Both solve ``min_w f0(w) = (1/n) sum_i l_i(w)`` s.t. ``f_j(w) <= 0, j = 1..m`` through the penalty
minimax over the simplex of constraints (ICML 2022, eq. 2)::

    min_w max_{p in Delta_m} L(w, p) = f0(w) + beta sum_j p_j phi_j(w) - (lambda/2) ||p||^2,
    phi_j(w) = max(f_j(w), 0)^2.

Per iteration they draw a data batch ``M1`` (uniform, without replacement), a constraint batch
``M2 ~ p`` (i.i.d. draws from ``p``, with replacement, so any size is allowed), a constraint batch
``M3`` (uniform, without replacement) and ``q`` Gaussian directions shared by both sums of
``G_L``. Each estimate is one batched evaluation: ``G_L`` builds its ``q + 1`` points once and makes
one objective call over ``M1`` and one constraint call over ``M2``; ``H`` makes one constraint call
over ``M3`` at ``w``. A step therefore costs ``(q + 1)(|M1| + |M2|) + |M3|`` evaluations
(``calls_per_step`` of the solvers).

This module holds the phase (:class:`zoframe.phases.Phase`) of each algorithm:

* :class:`PenaltyPhase`: what both share: the two estimators :meth:`~PenaltyPhase.G_L` and
  :meth:`~PenaltyPhase.H`, the closed form ``p*(w)`` (:meth:`~PenaltyPhase.p_star`), and the step rule of
  ``steps="auto"`` (normalised steps with Armijo backtracking on the penalised value, the first penalty,
  penalty continuation, the stationarity test: :meth:`~PenaltyPhase.line_search`,
  :meth:`~PenaltyPhase.after_step`) with its blow-up guard;
* :class:`DSZOGPenalty`: ICLR 2022 submission, Algorithm 1 (``step`` is the box, line by line);
* :class:`ADSZOGPenalty`: ICML 2022, Algorithm 1 (the same, with moving averages and adaptive steps).

The phase asks its solver (``zoframe_constrained.solvers``) for the rules that involve the other phases
and the budget: whether the budget reserve of the final restoration is reached, whether the phase has
spent its share of ``max_calls``, and where a run goes when the phase ends (``end``).

Sources: Shi, Gao, Gu, *Gradient-free method for heavily constrained nonconvex optimization*,
ICML 2022 (Algorithm 1, with EMA and adaptive steps: ``adszog`` here) and the same authors' ICLR
2022 submission (Algorithm 1, plain: ``dszog``; Algorithm 2 = ADSZOG).
"""

from __future__ import annotations

from collections.abc import Callable
import dataclasses
from dataclasses import dataclass
import functools
import math
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from zoframe.errors import DivergedError, NonFiniteValueError
from zoframe.estimators import _check_underflow, _perturbed, _RandomDirections
from zoframe.measures import FULL_PASS_BLOCK
from zoframe.oracle import CountingOracle
from zoframe.phases import Carry, PhaseEnd
from zoframe.protocols import Array, IntArray
from zoframe_constrained.restoration import snapshot
from zoframe_constrained.simplex import (
    _HUGE,
    FLUSH,
    PZ,
    Ascent,
    _compiled,
    _pz,
    ascent_dense,
    ascent_sparse,
    densify,
    dot_self,
    project_simplex_dense,
    pz_ema,
    pz_flush,
    pz_project_average,
    pz_sample,
    sample_dense,
    sample_sparse,
    sparsify,
    uniform_subsets,
)

if TYPE_CHECKING:
    from zoframe_constrained.solvers import ADSZOG, _PenaltyMinimax

__all__ = [
    "DEFAULT_BATCH", "DENSE_P_MAX", "SPARSE_AUTO_M", "ADSZOGPenalty", "ADSZOGState", "DSZOGPenalty", "DSZOGState",
    "PenaltyFields", "PenaltyPhase", "p_outputs", "snapshot_outputs",
]  # fmt: skip

#: ADSZOG flushes tiny entries of p and z_p every this many steps
_FLUSH_EVERY = 16

#: ``p_form="auto"`` uses the sparse floor + support form of p from this many constraints on
SPARSE_AUTO_M = 10_000

#: ``outputs()`` gives the dense ``p`` up to this many constraints, the floor + support form above it
DENSE_P_MAX = 10**7

#: the papers' batch size (ICML Section 6.2), the default of every batch that the problem allows
DEFAULT_BATCH = 128
#: steps="auto": the normalised step grows by this factor after an accepted step, shrinks by _SHRINK after a rejected one
_GROW, _SHRINK = 2.0, 0.25
#: steps="auto": at most this many trial points per step (then the step is skipped with a smaller length)
_TRIALS = 6
#: step="auto": stationary after this many restarts of the step length that found no decrease
_STALLS = 3

#: the machine epsilon of float64 (``np.finfo`` costs several microseconds per call)
_EPS = float(np.finfo(np.float64).eps)

StateT = TypeVar("StateT")


# ====================================================================== helpers of the estimates
def _finite(vals: Array, oracle: CountingOracle, what: str) -> Array:
    """``vals``, after checking they are finite (the oracle already raises on them unless nonfinite='inf')."""
    if oracle.nonfinite == "inf" and not np.isfinite(vals).all():
        raise NonFiniteValueError(
            f"a constraint returned a non-finite value ({what}); DSZOG needs finite constraint values "
            "(the squared penalty max(f_j, 0)^2 of an infinite value has no finite difference). Make the "
            "constraint return a large finite number where it is undefined."
        )
    return vals


def _all_constraints(oracle: CountingOracle, w: Array) -> Array:
    """All ``m`` constraint values at ``w`` (one dense ``m``-vector, purpose ``"init"``): one call up to
    :data:`~zoframe.measures.FULL_PASS_BLOCK` constraints, above it one call per block of consecutive indices,
    so that the user's function never works on more than a block at once (a function that gathers its rows
    ``A[idx]`` would otherwise copy all ``m x d`` of them). A budget too small for all ``m`` is refused by the
    single call before anything is evaluated."""
    m = oracle.m
    remaining = oracle.remaining
    if m <= FULL_PASS_BLOCK or (remaining is not None and remaining < m):
        out: Array = oracle.constraints(w, None, purpose="init")[0]
        return out
    v = np.empty(m, dtype=np.float64)
    for lo in range(0, m, FULL_PASS_BLOCK):
        hi = min(m, lo + FULL_PASS_BLOCK)
        v[lo:hi] = oracle.constraints(w, np.arange(lo, hi, dtype=np.intp), purpose="init")[0]
    return v


def _diverged(w: Array, solver: _PenaltyMinimax, t: int) -> Array:
    """``w``, after checking it has not blown up (a step too large for the penalty's curvature).

    Diverged: an entry beyond ``1e100`` (squaring the values it produces would overflow), or beyond
    ``mu / (64 eps)``, where the smoothing radius ``mu`` falls below 64 units in the last place of
    ``w`` and the finite differences can no longer resolve anything.
    """
    limit = min(1e100, solver.mu / (64.0 * _EPS))
    if w.ndim == 1 and dot_self(w) < 0.25 * limit * limit:  # |w|_inf <= |w|_2 < limit / 2 (whatever the rounding)
        return w
    size = float(np.abs(w).max())
    if not size < limit:  # also catches NaN
        why = f"{type(solver).__name__} diverged at step {t}: |w| = {size:.3g} exceeds {limit:.3g} (beyond it the " \
            f"smoothing radius mu = {solver.mu:g} is below the resolution of w)."
        if solver.auto:
            raise DivergedError(
                f"{why} The penalised value kept decreasing along the estimated gradient: the problem may be "
                "unbounded below on the feasible set, or the penalty too weak there (raise beta); give bounds= "
                "if the variables have them."
            )
        raise DivergedError(
            f"{why} With steps='paper', lower eta_w (now {solver.eta_w:g}) or beta (now {solver.beta:g}), or use "
            "steps='auto' (normalised steps with backtracking on the penalised value)."
        )
    return w


def _lagrangian_terms(
    oracle: CountingOracle, M1: IntArray, M2: IntArray, weights: Array, *, owned: bool
) -> Callable[[Array], Array]:
    """The function of the points that G_L's estimator differences: ``[l_M1, phi_M2] * weights`` per
    point, every point projected into the bounds first. ``owned``: the estimator hands over a fresh
    matrix it never touches again (``oracle.objective_owned`` / ``constraints_owned``); otherwise the
    oracle copies it."""
    box = oracle.feasible_set
    objective = oracle.objective_owned if owned else oracle.objective
    constraints = oracle.constraints_owned if owned else oracle.constraints

    def lagrangian_terms(X: Array, _idx: Any = None) -> Array:
        if box is not None:
            X = box.project(X)  # every evaluated point inside the bounds
        loss = objective(X, M1)
        f = _finite(constraints(X, M2), oracle, "in the estimate of G_L")
        return _weighted_terms(loss, f, weights)

    return lagrangian_terms


def _weighted_terms(loss: Array, f: Array, weights: Array) -> Array:
    """``[loss, max(f, 0)^2] * weights`` (rows: points; columns: ``M1`` then ``M2``).

    Element for element the same operations as ``np.hstack([loss, np.maximum(f, 0) ** 2]) * weights``
    (``x ** 2`` is ``x * x`` in numpy), squaring and weighting in place: two temporaries instead of
    four (about 3.8 against 4.6 us for 11 x 256 values).
    """
    phi = np.maximum(f, 0.0)
    phi *= phi
    out = np.concatenate((loss, phi), axis=1)
    out *= weights
    return out


def _estimate_kernel(oracle: CountingOracle, est: Any) -> Callable[..., Any] | None:
    """The compiled arithmetic of G_L (``lagrangian_sums``) for a random-direction estimator, from
    :data:`SPARSE_AUTO_M` constraints on (where ``p_form="auto"`` takes the sparse form, whose work is compiled
    too); ``None``: the numpy code (no kernel, or a small problem, which then never imports numba)."""
    if oracle.m < SPARSE_AUTO_M or not isinstance(est, _RandomDirections):
        return None
    fn: Callable[..., Any] | None = _compiled("lagrangian_sums")
    return fn


def _compiled_estimate(
    fn: Callable[..., Any], est: Any, oracle: CountingOracle, w: Array, M1: IntArray, M2: IntArray, weights: Array,
    rng: np.random.Generator, h: float,
) -> tuple[Array, float] | None:  # fmt: skip
    """``(G_L, L_batch(w))`` by a random-direction estimator ``est`` (Gaussian: DSZOG Alg. 1 l.8, ADSZOG l.12) at
    the smoothing radius ``h``, with the weighting, the differences and their sums in the compiled kernel
    (``fn``: ``lagrangian_sums``); ``None`` where the estimator's own code must run (a subclass that redefines
    its estimate, a ``w`` that is not a float64 vector, a radius that is not a positive number).

    The same directions, points, oracle calls and arithmetic as ``est.oracle_gradient`` / ``est.estimate`` on
    :func:`_lagrangian_terms` (:class:`zoframe.estimators._RandomDirections`, which this repeats step for
    step), hence the same gradient and base value bit for bit; the matrix of points is handed to the oracle
    without a copy (``objective_owned``: it is only read after the call)."""
    if not (est.plain_estimate and type(w) is np.ndarray and w.dtype == np.float64 and w.ndim == 1 and 0.0 < h < math.inf):
        return None
    d = w.shape[0]
    U = est.directions(d, rng)  # DSZOG Alg. 1 l.4, ADSZOG l.8
    q = U.shape[0]
    pts = _perturbed(w, U, h)
    tail = pts[1:]
    box = oracle.feasible_set
    X = pts if box is None else box.project(pts)  # every evaluated point inside the bounds
    loss = oracle.objective_owned(X, M1)
    f = _finite(oracle.constraints_owned(X, M2), oracle, "in the estimate of G_L")
    sums, nonzero, base = fn(loss, f, weights, 1.0 / h)
    if not nonzero:  # every difference zero: the estimator's underflow check, on the same values
        vals = _weighted_terms(loss, f, weights)
        diffs = vals[1:] - vals[0]
        diffs *= 1.0 / h
        _check_underflow(est, diffs, w, tail, h, float(np.abs(U).max()))
    b = M1.shape[0] + M2.shape[0]
    c = est.scale(d) / q
    grad: Array = (c / b) * (sums @ U)
    return grad, float(base) / b


def _p_outputs(p: Array, support: IntArray | None, floor: float, m: int) -> dict[str, Array]:
    """The distribution ``p`` for ``Result.outputs``.

    Up to :data:`DENSE_P_MAX` constraints (or when ``p`` is stored dense): ``{"p": p}``, the dense
    ``m``-vector. Above it, a sparse ``p`` is not densified (``10^8`` constraints would take 800 MB):
    ``{"p_support": S, "p_values": p_S, "p_floor": floor}`` with ``p_j = p_values[k]`` for
    ``j = p_support[k]`` and ``p_j = floor`` (a 0-d array) for every other ``j``;
    :func:`zoframe_constrained.simplex.densify` rebuilds the vector.
    """
    if support is None:
        return {"p": p}
    if m <= DENSE_P_MAX:
        return {"p": densify(support, p, floor, m)}
    return {"p_support": support, "p_values": p, "p_floor": np.array(floor)}


def _project_in_place(v: Array) -> Array:
    """``project_simplex_dense(v, overwrite=True)`` (the same values), without its copy of ``v`` when the
    threshold keeps every entry.

    Michelot's first threshold is ``max(max v - 1, (sum v - 1) / m)``; when every entry lies above it
    (for instance ``p*`` at a feasible start, all ``phi_j = 0``: the uniform ``1/m``) the iteration
    stops after one pass at ``(sum v - 1) / m``, which is computed here directly, with no
    ``v[keep]`` copy (an ``m``-vector: 800 MB at ``10^8`` constraints).
    """
    n = int(v.shape[0])
    mean_tau = (float(v.sum()) - 1.0) / n
    tau = max(float(v.max()) - 1.0, mean_tau)
    if not (float(v.min()) > tau and abs(mean_tau) <= _HUGE):
        return project_simplex_dense(v, overwrite=True)
    np.subtract(v, mean_tau, out=v)
    v[v < FLUSH] = 0.0
    return v


@functools.lru_cache(maxsize=8)
def _column_weights(b1: int, b2: int, beta: float) -> Array:
    """:meth:`PenaltyPhase._weights` (read-only), cached by its arguments alone: no hash of the solver (a
    frozen dataclass of 40 fields, about 5 us per call)."""
    w = np.concatenate([np.full(b1, (b1 + b2) / b1), np.full(b2, beta * (b1 + b2) / b2)])
    w.setflags(write=False)
    return w


def _norm(v: Array) -> float:
    """Euclidean norm (einsum: cheaper than np.linalg.norm, and no BLAS threads for a 1-D product)."""
    return math.sqrt(dot_self(v))


# ====================================================================== the states
@dataclass(frozen=True, kw_only=True)
class PenaltyFields:
    """What the penalty phase carries besides its iterates (keyword-only fields, shared by both states).

    ``steps="auto"``: ``beta`` (the current penalty, continuation), ``alpha`` (the normalised step length),
    ``viol`` (the last sampled violation), ``win_t0`` / ``win_v0`` (the stall window of the continuation),
    ``stalls`` (restarts of the step length that found no decrease), ``best_x`` / ``best_value`` (the best
    point seen whose sampled violation was ``<= violation_tol``, by its batch's penalised value), ``g0`` (the
    first gradient estimate's norm).

    How the phase ends (read by the solver's hand-over rules, ``end``): ``restore_final`` (go on to the
    restoration), ``stationary`` (the step rule found the phase stationary, or it spent its share of the
    budget: the precision phase may then start whatever budget is left), ``handover`` (why, in words),
    ``blown`` (a blow-up: the precision phase starts from ``best_x``, why), ``diverged`` (a blow-up with no
    feasible sample: the run ends ``DIVERGED``, why).

    Hand-backs from a stalled precision phase: ``retries`` (how many so far) and ``carried`` (the best point
    of those precision phases and ``[f, max violation]`` there, which the next precision phase starts with).
    ``x_start``: the run's starting point, whose entries give the precision phase its variables' scales (the
    point handed over has entries near 0 by chance, which say nothing of a variable's size).

    ``x_feasible`` and the ``feasible_*`` fields: the last feasible snapshot (``restore_every``,
    :func:`zoframe_constrained.restoration.snapshot`).
    """

    beta: float = math.nan
    alpha: float = math.nan
    viol: float = math.nan
    win_t0: int = 0
    win_v0: float = math.inf
    stalls: int = 0
    best_x: Array | None = None
    best_value: float = math.inf
    g0: float = math.nan
    stationary: bool = False
    restore_final: bool = False
    handover: str = ""
    blown: str = ""
    diverged: str = ""
    retries: int = 0
    carried: tuple[Array, Array] | None = None
    x_start: Array | None = None
    x_feasible: Array | None = None
    feasible_violation: float = math.nan
    feasible_checked: int = 0
    feasible_t: int = 0
    feasible_active: IntArray | None = None


@dataclass(frozen=True)
class DSZOGState(PenaltyFields):
    """What DSZOG's penalty phase carries: ``w`` and the distribution ``p`` over the constraints; ``t`` counts
    the steps of the penalty and precision phases (not the restoration rounds: a hand-back resumes the count).

    ``p_support is None``: ``p`` is the dense vector. Otherwise ``p`` holds the values on the sorted
    indices ``p_support`` and every other entry equals ``p_floor`` (see
    :mod:`zoframe_constrained.simplex`).
    """

    x: Array
    p: Array
    p_support: IntArray | None
    p_floor: float
    m: int
    t: int = 0


@dataclass(frozen=True)
class ADSZOGState(PenaltyFields):
    """What ADSZOG's penalty phase carries: ``w``, ``p``, the moving averages ``z_w``, ``z_p``; ``t`` counts
    steps (as :class:`DSZOGState`'s).

    ``p_support is None``: ``p`` and ``z_p`` are dense. Otherwise they hold the values on the sorted
    indices ``p_support`` and every other entry has ``p_j = p_floor``, ``z_pj = z_floor``
    (:class:`zoframe_constrained.simplex.PZ`).
    """

    x: Array
    p: Array
    z_w: Array
    z_p: Array
    t: int
    p_support: IntArray | None
    p_floor: float
    z_floor: float
    m: int

    def pz(self) -> PZ:
        return _pz(self.p, self.z_p, self.p_support, self.p_floor, self.z_floor, self.m)


#: the field names of each state class (for :func:`_copy_state`)
_FIELD_NAMES: dict[type, frozenset[str]] = {}


def _copy_state(cls: type[StateT], prev: Any, fields: dict[str, Any] | None = None, **changes: Any) -> StateT:
    """``dataclasses.replace(prev, **changes, **fields)`` for ``prev`` of class ``cls``: the same state, built by
    copying the fields instead of the frozen dataclass ``__init__`` (the ``__init__`` of 30 fields costs several
    microseconds per step; any name that is not a field goes through ``dataclasses.replace``, which refuses it)."""
    more = {} if fields is None else fields
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = frozenset(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
    if type(prev) is not cls or not (more.keys() <= names and changes.keys() <= names):
        out: StateT = dataclasses.replace(prev, **{**changes, **more})
        return out
    new = object.__new__(cls)
    state = new.__dict__
    state.update(prev.__dict__)
    state.update(changes)
    state.update(more)
    return new


# ====================================================================== the phase: what both algorithms share
@dataclass(frozen=True)
class PenaltyPhase:
    """The penalty phase of a DSZOG-type solver: the estimators and the two step rules (see the module docstring).

    ``steps="paper"``: the boxes as written, with the fixed steps ``eta_w``, ``eta_p`` and a fixed ``beta``.
    ``steps="auto"``: the ``w`` step is normalised, ``w - alpha G / ||G||`` (ADSZOG: ``z_w``), projected on the
    bounds, with Armijo backtracking on the penalised value of the same batch (:meth:`line_search`); ``alpha``
    starts at ``0.1 max(1, |x0|_inf)`` and doubles after an accepted step; the smoothing radius stays below
    ``alpha / 10``; the ``p`` step has length ``eta_p`` along ``H / ||H||``; the starting ``beta`` is scaled by
    ``|f0(x0)| / max_j f_j(x0)^2`` (:meth:`first_beta`) and grows by ``beta_growth`` while the sampled violation
    does not halve within ``stall_window`` steps; the phase is stationary after three restarts of the step
    length in a row that find no decrease down to ``switch_tol * max(1, |w|_inf)`` (:meth:`after_step`).

    ``name``: the phase's name in the notes; ``solver``: its parameters and the hand-over rules it asks.
    ``start`` begins at ``x0`` (``p_1 = p*(w_1)``), or resumes the state a stalled precision phase handed
    back (:meth:`resume`).
    """

    name: str
    solver: _PenaltyMinimax

    # ------------------------------------------------------------------ the protocol of zoframe.phases
    def start(self, oracle: CountingOracle, carry: Carry, rng: np.random.Generator) -> Any:
        previous = carry.extras.get("penalty")
        if previous is not None:
            return self.resume(oracle, previous, carry)
        st = self.begin(oracle, carry.x, rng)
        return _copy_state(type(st), st, x_start=np.array(carry.x, dtype=np.float64, copy=True))

    def begin(self, oracle: CountingOracle, x0: Array, rng: np.random.Generator) -> Any:
        """The first state at ``x0`` (Alg. 1 l.1-2, and l.3 for ADSZOG)."""
        raise NotImplementedError

    def step(self, oracle: CountingOracle, state: Any, rng: np.random.Generator) -> Any:
        raise NotImplementedError

    def end(self, oracle: CountingOracle, state: Any) -> PhaseEnd | None:
        """Where the run goes: the solver's hand-over rules (:meth:`_PenaltyMinimax.after_penalty`)."""
        return self.solver.after_penalty(oracle, state)

    def carry(self, state: Any) -> Carry:
        """The iterate and the phase's whole state (``penalty``: reported by the later phases, resumed by a hand-back)."""
        return Carry(state.x, {"penalty": state})

    @staticmethod
    def outputs(state: Any) -> dict[str, Array]:
        """``x``, ``p`` (see :func:`_p_outputs`: the sparse form above :data:`DENSE_P_MAX` constraints) and the
        last feasible snapshot."""
        return {"x": state.x, **p_outputs(state), **snapshot_outputs(state)}

    def resume(self, oracle: CountingOracle, st: Any, carry: Carry) -> Any:
        """The phase again after a stalled precision phase (a hand-back): from the point handed back (its best
        feasible point, else where it stalled), with a stronger penalty when that point is infeasible
        (``carry.extras["feasible"]``), the step length, the stall count and the continuation window started
        afresh; ``p`` (and ADSZOG's averages), the best sample and the snapshot are kept. ``retries`` counts the
        hand-backs; ``carried`` is the best point of the precision phases so far; the step count goes on from
        ``carry.extras["t"]``."""
        s = self.solver
        x = carry.x
        t = int(carry.extras["t"])
        beta = float(st.beta) * (s.beta_growth if not carry.extras["feasible"] else 1.0)
        return _copy_state(
            type(st), st, x=np.array(x, copy=True), retries=int(st.retries) + 1, stationary=False,
            restore_final=False, stalls=0, t=t, beta=min(beta, s.beta_max), alpha=self.first_length(x, oracle) * 1e-2,
            win_t0=t - 1, win_v0=math.inf, carried=carry.extras["best"], handover="", blown="",
        )  # fmt: skip

    def snapshot_due(self, state: Any) -> bool:
        """Whether this step takes a feasible snapshot (every ``restore_every`` penalty steps)."""
        every = self.solver.restore_every
        return every is not None and int(state.t) % every == 0

    def _snapshot(self, oracle: CountingOracle, state: StateT, rng: np.random.Generator) -> StateT:
        """``state`` with a feasible snapshot of its iterate when one is due (``restore_every``)."""
        if not self.snapshot_due(state):
            return state
        return snapshot(oracle, state, self.solver.restore_settings(), rng)

    # ------------------------------------------------------------------ the two estimators
    def G_L(
        self, oracle: CountingOracle, w: Array, M1: IntArray, M2: IntArray, rng: np.random.Generator,
        beta: float | None = None, p_weights: Array | None = None,
    ) -> Array:  # fmt: skip
        """``1/(q|M1|) sum_i sum_k G(l_i; u_k) + beta/(q|M2|) sum_j sum_k G(phi_j; u_k)``.

        One set of directions for both sums: the columns ``[l_i, phi_j]`` are weighted so that their
        mean is ``mean_i l_i + beta mean_j phi_j``, and ONE estimate (one matrix of points) makes one
        objective call and one constraint call. ``p_weights`` (``M2`` = all constraints): the exact
        ``sum_j p_j phi_j`` instead of the sample mean.

        With zoframe's random-direction estimators (at the solver's ``mu``) the gradient alone is computed
        (their ``gradient``: the same directions, points, call and arithmetic as ``estimate(...).grad``, bit
        for bit) and the matrix of points they build is handed to the objective without a copy
        (``oracle.objective_owned``: they never write to it after the call).
        """
        s = self.solver
        est = s.estimator_for(oracle)
        gradient = getattr(est, "gradient", None)
        if gradient is None or not getattr(est, "plain_estimate", False) or getattr(est, "mu", None) != s.mu:
            return self._estimate(oracle, w, M1, M2, rng, beta, p_weights)[0]
        b = s.beta if beta is None else beta
        weights = self._weights(M1.shape[0], M2.shape[0], b) if p_weights is None else self._p_weights(M1.shape[0], p_weights, b)
        direct = getattr(est, "oracle_gradient", None)
        fn = _estimate_kernel(oracle, est)
        both = None if fn is None else _compiled_estimate(fn, est, oracle, w, M1, M2, weights, rng, s.mu)
        if both is not None:
            return both[0]
        terms = _lagrangian_terms(oracle, M1, M2, weights, owned=True)
        if direct is not None:  # gradient(terms, w, rng) is oracle_gradient with the values checked again: terms
            # returns the oracle's checked values weighted into one (points, |M1| + |M2|) float64 matrix
            return np.asarray(direct(terms, None, w, rng), dtype=np.float64)
        return np.asarray(gradient(terms, w, rng), dtype=np.float64)

    def _estimate(
        self, oracle: CountingOracle, w: Array, M1: IntArray, M2: IntArray, rng: np.random.Generator,
        beta: float | None = None, p_weights: Array | None = None, mu: float | None = None,
    ) -> tuple[Array, float]:  # fmt: skip
        """``(G_L, L_batch(w))``: the estimate and the batch's penalised value at ``w`` (its base row).
        ``mu``: the smoothing radius (default: the solver's ``mu``)."""
        s = self.solver
        b = s.beta if beta is None else beta
        weights = self._weights(M1.shape[0], M2.shape[0], b) if p_weights is None else self._p_weights(M1.shape[0], p_weights, b)
        estimator = s.estimator_for(oracle)
        fn = _estimate_kernel(oracle, estimator)
        both = None if fn is None else _compiled_estimate(fn, estimator, oracle, w, M1, M2, weights, rng, s.mu if mu is None else mu)
        if both is not None:
            return both
        est = s.estimator_for(oracle).estimate(_lagrangian_terms(oracle, M1, M2, weights, owned=False), w, rng, mu=s.mu if mu is None else mu)
        if est.values is None:  # an estimator without a base row (central differences)
            return np.asarray(est.grad, dtype=np.float64), self.penalised(oracle, w, M1, M2, b, p_weights)[0]
        values = np.asarray(est.values, dtype=np.float64)
        # float(values.mean()): numpy's mean is this sum divided by the count (about 2 us less)
        return np.asarray(est.grad, dtype=np.float64), float(values.sum()) / values.size

    def penalised(
        self, oracle: CountingOracle, w: Array, M1: IntArray, M2: IntArray, beta: float, p_weights: Array | None
    ) -> tuple[float, Array]:
        """The batch's penalised value at ``w`` (as :meth:`_estimate`'s base row) and the ``M2`` constraint values."""
        weights = self._weights(M1.shape[0], M2.shape[0], beta) if p_weights is None else self._p_weights(M1.shape[0], p_weights, beta)
        loss = oracle.objective(w, M1, purpose="line search")
        f = _finite(oracle.constraints(w, M2, purpose="line search"), oracle, "at a trial point")
        vals = _weighted_terms(loss, f, weights)
        return float(vals.sum()) / vals.size, f[0]  # float(vals.mean()): the sum divided by the count

    @staticmethod
    def _weights(b1: int, b2: int, beta: float) -> Array:
        """Column weights that turn the mean over ``[l_M1, phi_M2]`` into ``mean l + beta mean phi``."""
        return _column_weights(b1, b2, beta)

    @staticmethod
    def _p_weights(b1: int, p: Array, beta: float) -> Array:
        """Column weights that turn the mean over ``[l_M1, phi_1..phi_m]`` into ``mean l + beta sum_j p_j phi_j``."""
        b2 = p.shape[0]
        out: Array = np.concatenate([np.full(b1, (b1 + b2) / b1), (beta * (b1 + b2)) * p])
        return out

    def H(self, oracle: CountingOracle, w: Array, M3: IntArray, beta: float | None = None) -> Ascent:
        """``H = beta m / |M3| sum_{j in M3} e_j phi_j(w) - lambda p`` (the ``-lambda p`` part is implicit)."""
        return self._ascent(self._H_values(oracle, w, M3), oracle, M3, beta)

    def _H(self, oracle: CountingOracle, w: Array, M3: IntArray, beta: float | None = None) -> tuple[Ascent, float]:
        """``(H, sampled max violation max(0, max_{j in M3} f_j(w)))``."""
        f = self._H_values(oracle, w, M3)
        return self._ascent(f, oracle, M3, beta), max(float(f.max()), 0.0)

    @staticmethod
    def _H_values(oracle: CountingOracle, w: Array, M3: IntArray) -> Array:
        """The constraint values ``f_j(w)``, ``j in M3``."""
        return _finite(oracle.constraints(w, M3)[0], oracle, "in the estimate of H")

    def _ascent(self, f: Array, oracle: CountingOracle, M3: IntArray, beta: float | None) -> Ascent:
        """``H`` from the constraint values ``f`` of ``M3`` (``f`` is left as it is)."""
        s = self.solver
        b = s.beta if beta is None else beta
        gain = np.maximum(f, 0.0)
        gain *= gain  # ** 2 (numpy squares as x * x)
        gain *= b * oracle.m / M3.shape[0]  # the scalar times phi, element for element
        h = object.__new__(Ascent)  # Ascent(idx=M3, gain=gain, lam=lam) without the frozen __init__
        h.__dict__.update(idx=M3, gain=gain, lam=s.lam)
        return h

    def p_star(self, oracle: CountingOracle, w: Array, beta: float | None = None) -> Array:
        """``p*(w) = argmax_p L(w, p) = Proj_Delta(beta phi(w) / lambda)``: one pass over all constraints."""
        return self._p_star(oracle, w, beta)[0]

    @staticmethod
    def _w1(oracle: CountingOracle, x0: Array) -> Array:
        """``w_1``: a copy of ``x0``, projected onto the problem's simple set when it has one (Alg. 1 l.1)."""
        w = np.array(x0, dtype=np.float64, copy=True)
        box = oracle.feasible_set
        return w if box is None else np.asarray(box.project(w), dtype=np.float64)

    def _p_star(self, oracle: CountingOracle, w: Array, beta: float | None = None) -> tuple[Array, float]:
        """``(p*(w), max_j |f_j(w)|)``.

        One dense ``m``-vector: the constraint values (the oracle's result or the blocks' buffer, owned here) are
        turned into ``beta max(f, 0)^2 / lambda`` in place (the same operations in the same order as the
        expression) and projected in place.
        """
        s = self.solver
        b = s.beta if beta is None else beta
        if oracle.m == 0:  # equality constraints alone: no p (the precision phase runs from x0)
            return np.zeros(0), 0.0
        v = _finite(_all_constraints(oracle, w), oracle, "at the starting point")
        c0 = max(float(v.max()), -float(v.min()))  # max_j |f_j|, without an |f| temporary
        np.maximum(v, 0.0, out=v)  # the constraint values are read: no second m-vector
        np.multiply(v, v, out=v)  # ** 2
        np.multiply(b, v, out=v)
        np.divide(v, s.lam, out=v)
        return _project_in_place(v), c0

    def batches(self, oracle: CountingOracle, rng: np.random.Generator) -> tuple[IntArray, IntArray]:
        """``M1`` (data) and ``M3`` (constraints), uniform without replacement (Alg. 1 l.9, l.11: index sets).

        :func:`~zoframe_constrained.simplex.uniform_subsets`: sorted sets, both from one vectorised draw of
        uniforms, in the compiled kernel from :data:`SPARSE_AUTO_M` constraints on (where the rest of the
        step's own work is compiled too); read-only."""
        m1, _, m3 = self.solver.sizes(oracle)
        return uniform_subsets(oracle.n, m1, oracle.m, m3, rng, compiled=oracle.m >= SPARSE_AUTO_M)

    # ------------------------------------------------------------------ steps="auto"
    def first_beta(self, oracle: CountingOracle, w: Array, c0: float, rng: np.random.Generator) -> float:
        """``steps="auto"``: the starting penalty ``beta |f0(w)| / max_j f_j(w)^2`` (clipped to ``beta * 10^[-6, 6]``),
        which makes the penalty's curvature scale like the objective's whatever units the objective and the
        constraints are measured in (one objective batch of ``min(128, n)`` components at ``x0``)."""
        s = self.solver
        batch = rng.choice(oracle.n, size=s.sizes(oracle)[0], replace=False).astype(np.intp)
        f0 = abs(float(oracle.objective(w, batch, purpose="init").mean()))
        if not (c0 > 0.0 and f0 > 0.0 and math.isfinite(f0) and math.isfinite(c0)):
            return s.beta
        return s.beta * min(max(f0 / (c0 * c0), 1e-6), 1e6)

    @staticmethod
    def first_length(w: Array, oracle: CountingOracle) -> float:
        """The first normalised step length: a tenth of the iterate's scale (``0.1 max(1, |w|_inf)``),
        capped by a tenth of the narrowest finite box width."""
        alpha = 0.1 * max(1.0, float(np.max(np.abs(w))))
        box = oracle.feasible_set
        lo, hi = getattr(box, "lower", None), getattr(box, "upper", None)
        if lo is not None and hi is not None:
            shape = (oracle.dim,)
            width = np.broadcast_to(np.asarray(hi, dtype=np.float64), shape) - np.broadcast_to(np.asarray(lo, dtype=np.float64), shape)
            finite = width[np.isfinite(width) & (width > 0)]
            if finite.shape[0]:
                alpha = min(alpha, 0.1 * float(finite.min()) * math.sqrt(oracle.dim))
        return alpha

    def line_search(
        self, oracle: CountingOracle, w: Array, direction: Array, L0: float, alpha: float,
        M1: IntArray, M2: IntArray, beta: float, p_weights: Array | None,
    ) -> tuple[Array, float, bool]:  # fmt: skip
        """``w - a d / |d|`` for the largest ``a = alpha, alpha/4, ...`` (at most 6 trials) whose penalised
        batch value is below ``L0`` (function values only); ``(w_new, next alpha, accepted)``.

        A trial whose value is not finite, or where the user's function returns NaN / inf
        (:class:`~zoframe.errors.NonFiniteValueError`), is a failed trial: the step shrinks.
        """
        box = oracle.feasible_set
        direction = self._free_directions(w, direction, box)
        norm = _norm(direction)
        if not (norm > 0.0 and math.isfinite(norm)):
            return w, alpha * _SHRINK, False
        unit = direction / norm
        a = alpha
        for _ in range(_TRIALS):
            trial = w - a * unit
            if box is not None:
                trial = box.project(trial)
            if not float(np.abs(trial).max()) < 1e100:
                a *= _SHRINK
                continue
            try:
                value, _ = self.penalised(oracle, trial, M1, M2, beta, p_weights)
            except NonFiniteValueError:
                value = math.nan
            if value < L0 - 1e-4 * a * norm or (value <= L0 and a * norm == 0.0):  # sufficient decrease (Armijo)
                return trial, a * _GROW, True
            a *= _SHRINK
        return w, a, False

    def _estimate_or_diverge(
        self, oracle: CountingOracle, w: Array, M1: IntArray, M2: IntArray, rng: np.random.Generator,
        beta: float, p_weights: Array | None, t: int, alpha: float | None = None,
    ) -> tuple[Array, float]:  # fmt: skip
        """:meth:`_estimate` at an accepted iterate; a non-finite value there ends the run as DIVERGED."""
        # steps="auto": the smoothing radius stays below a tenth of the step length (a radius larger than
        # the step smooths the penalty's kink at the boundary into a direction that is no descent
        # direction of the penalised value), and above 1e-8 |w| (about sqrt(eps): rounding error)
        floor = 1e-8 * max(1.0, float(np.abs(w).max()))
        mu = min(self.solver.mu, max(0.1 * alpha, floor)) if alpha is not None else None
        try:
            G, L0 = self._estimate(oracle, w, M1, M2, rng, beta, p_weights, mu)
        except NonFiniteValueError as exc:
            if t == 1:  # at the start the non-finite value is the user's function's, not a blow-up: say so
                raise
            raise DivergedError(f"{type(self.solver).__name__} at step {t}: a non-finite value next to the iterate ({exc})") from exc
        if not (math.isfinite(L0) and bool(np.isfinite(G).all())):
            raise DivergedError(f"{type(self.solver).__name__} at step {t}: the penalised value or its estimate is not finite")
        return G, L0

    @staticmethod
    def _free_directions(w: Array, direction: Array, box: Any) -> Array:
        """``direction`` without the components that push ``w - a d`` through a bound it sits on (a projected
        gradient): the normalised step then moves along the bounds instead of into them."""
        lo, hi = getattr(box, "lower", None), getattr(box, "upper", None)
        if lo is None or hi is None:
            return direction
        blocked = ((w <= lo) & (direction > 0.0)) | ((w >= hi) & (direction < 0.0))
        if not bool(blocked.any()):
            return direction
        out = direction.copy()
        out[blocked] = 0.0
        return out

    def _guard(self, w_new: Array, state: Any) -> tuple[Array, dict[str, Any]]:
        """``steps="auto"``: ``(w_new, {})``, or after a blow-up (:func:`_diverged`) the hand-over to the precision
        phase from the best point seen whose sampled violation was ``<= violation_tol`` (``blown``: why; a penalty
        too weak for the step rule is no reason to give up, and a problem unbounded on its feasible set then
        diverges in the precision phase too); without such a point, the last finite iterate and the reason that
        ends the run as DIVERGED (``diverged``)."""
        s = self.solver
        try:
            return _diverged(w_new, s, int(state.t) + 1), {}
        except DivergedError as exc:
            if state.best_x is not None:
                why = f"the penalty phase blew up at step {int(state.t) + 1} ({exc}); restarted from its best feasible sample"
                x = np.array(state.best_x, copy=True)
                return x, {"x": x, "blown": why}
            back = "returned: the last finite iterate (no feasible sample was seen)"
            x = np.array(state.x, copy=True)
            return x, {"diverged": f"{exc} {back}", "x": x, "restore_final": False}

    def after_step(
        self, oracle: CountingOracle, st: Any, w: Array, alpha: float, accepted: bool, viol: float, g_norm: float,
        value: float = math.nan,
    ) -> dict[str, Any]:
        """The bookkeeping of ``steps="auto"`` after a step from ``st`` to ``w`` (the next step length ``alpha``):
        the best feasible sample, the stationarity test, the penalty continuation, and the hand-over to the
        restoration; returns the next state's changed fields.

        Stationary: the step length fell below ``switch_tol * max(1, |w|_inf)`` three restarts in a row. A
        stationary phase within ``restore_band`` of the feasible set (sampled), or with no room left to raise
        ``beta``, hands over (``restore_final``); one farther away raises ``beta`` and goes on. A runaway: ``beta`` is
        at ``beta_max`` and the sampled violation at the end of a continuation window is no lower than at its start
        (the penalty has no strength left to raise and the violation grows): as after a blow-up, the precision phase
        starts from the best feasible sample (``blown``), or without one the restoration from the last iterate;
        the message says at which step and evaluation, with which violation and ``|w|``. Otherwise the
        solver's budget rules are asked: the reserve of the final restoration reached
        (:meth:`_PenaltyMinimax.reserve_reached`), or the phase's share of ``max_calls`` spent
        (:meth:`_PenaltyMinimax.handover_due`).
        """
        s = self.solver
        t = int(st.t) + 1
        beta = float(st.beta)
        stalls = int(st.stalls)
        new: dict[str, Any] = {"x": w, "viol": viol}
        if viol <= s.tol and value < float(st.best_value):  # the best point seen with a feasible sample
            new.update(best_x=np.array(st.x, copy=True), best_value=value)
        if not math.isfinite(float(st.g0)):
            new["g0"] = g_norm
        scale = max(1.0, float(np.abs(w).max()))
        if accepted and alpha > 1e2 * s.switch_tol * scale:  # a real move: the stationarity count starts again
            stalls = 0
        stationary = False
        if alpha <= s.switch_tol * scale:  # no decrease along the estimate, down to a small step
            stalls += 1
            stationary = stalls >= _STALLS
            if not stationary:  # restart the step length: a fresh estimate may still find a decrease
                alpha = max(self.first_length(w, oracle) * 1e-3, 10.0 * s.switch_tol * scale)
        win_t0, win_v0 = int(st.win_t0), float(st.win_v0)
        runaway = ""
        if s.continuing and viol > s.tol and t - win_t0 >= s.stall_window:
            if viol > 0.5 * win_v0 and beta < s.beta_max:  # the violation stalls: raise the penalty
                beta = min(beta * s.beta_growth, s.beta_max)
                alpha = max(alpha, self.first_length(w, oracle) * 1e-2)
                stationary, stalls = False, 0
            elif beta >= s.beta_max and viol >= win_v0:  # no penalty left to raise, and the violation grows: a runaway
                runaway = (
                    f"the penalty phase ran away at step {t} ({oracle.calls} evaluations): beta is at beta_max = "
                    f"{s.beta_max:g} and the sampled violation grew from {win_v0:.3g} (step {win_t0}) to {viol:.3g}, "
                    f"|w|_inf = {float(np.abs(w).max()):.3g}"
                )
            win_t0, win_v0 = t, viol
        if runaway:  # as the blow-up guard: the best feasible sample, else the restoration from the last iterate
            best = new.get("best_x", st.best_x)
            if best is not None:
                x = np.array(best, copy=True)
                new.update(x=x, blown=f"{runaway}; restarted from its best feasible sample")
            else:
                new.update(restore_final=True, handover=f"{runaway}; no feasible sample was seen: the restoration from the last iterate")
        elif stationary:
            if viol <= s.restore_band or not s.continuing or beta >= s.beta_max:
                close = viol <= s.restore_band
                new.update(
                    stationary=close, restore_final=True,
                    handover=f"stationary at step {t} (sampled violation {viol + 0.0:.2g} "
                    + (f"<= restore_band = {s.restore_band:g})" if close else f"> restore_band = {s.restore_band:g}, beta = {beta:.3g})"),
                )  # fmt: skip
            else:  # stationary for this beta but too infeasible: raise it and go on
                beta = min(beta * s.beta_growth, s.beta_max)
                alpha = self.first_length(w, oracle) * 1e-2
                win_t0, win_v0, stalls = t, viol, 0
        elif s.reserve_reached(oracle):
            new.update(restore_final=True, handover=f"the budget reached the reserve kept for the final restoration at step {t}")
        elif s.handover_due(oracle, int(st.retries)):  # enough budget spent on the penalty phase: restoration, then precision
            new.update(stationary=True, restore_final=True,
                       handover=f"the penalty phase spent its share of max_calls (penalty_share = {s.penalty_share:g}) at step {t}")  # fmt: skip
        new.update(beta=beta, alpha=alpha, win_t0=win_t0, win_v0=win_v0, stalls=stalls)
        return new


def p_outputs(state: Any) -> dict[str, Array]:
    """A penalty state's ``p`` for ``Result.outputs`` (:func:`_p_outputs`)."""
    return _p_outputs(state.p, state.p_support, state.p_floor, state.m)


def snapshot_outputs(state: Any) -> dict[str, Array]:
    """A penalty state's last feasible snapshot for ``Result.outputs`` (none before the first one)."""
    if state.x_feasible is None:
        return {}
    return {
        "x_feasible": state.x_feasible, "feasible_max_violation": np.array(state.feasible_violation),
        "feasible_checked": np.array(float(state.feasible_checked)), "feasible_step": np.array(float(state.feasible_t)),
    }  # fmt: skip


# ====================================================================== DSZOG
@dataclass(frozen=True)
class DSZOGPenalty(PenaltyPhase):
    """Plain DSZOG's penalty phase: Shi, Gao & Gu, ICLR 2022 submission, Algorithm 1 (doubly stochastic ZO
    gradient)::

        1: initialise w_1                         (x0)
        2: p_1 = p*(w_1) = Proj(beta phi(w_1)/lambda)   closed form, one pass over all constraints
        3: for t = 1..T:
        4:   u_1..u_q ~ N(0, I_d)                 (drawn inside the estimate of l.8)
        5:   M1 subset [n] uniform
        6:   M2 ~ p_t
        7:   M3 subset [m] uniform
        8:   G = G_L(w_t, p_t, l_M1, f_M2, u)
        9:   H = beta m/|M3| sum_{j in M3} e_j phi_j(w_t) - lambda p_t
       10:   w_{t+1} = w_t - eta_w G
       11:   p_{t+1} = Proj_Delta(p_t + eta_p H)

    ``p_form`` (the solver's) chooses how p is stored: ``"dense"`` (an ``m``-vector, ``O(m)`` per step),
    ``"sparse"`` (floor + support, ``O(|support| + |M|)`` per step, the same iterates up to rounding) or
    ``"auto"`` (sparse from ``m >= 10000``).
    """

    def begin(self, oracle: CountingOracle, x0: Array, rng: np.random.Generator) -> DSZOGState:
        s = self.solver
        w = self._w1(oracle, x0)  # Alg. 1 l.1
        p, c0 = self._p_star(oracle, w)  # Alg. 1 l.2
        if s.sparse(oracle.m):
            support, values, floor = sparsify(p)
            st = DSZOGState(x=w, p=values, p_support=support, p_floor=floor, m=oracle.m)
        else:
            st = DSZOGState(x=w, p=p, p_support=None, p_floor=0.0, m=oracle.m)
        if not s.auto:
            return st
        return dataclasses.replace(st, beta=self.first_beta(oracle, w, c0, rng), alpha=self.first_length(w, oracle))

    def sample_p(self, oracle: CountingOracle, state: DSZOGState, rng: np.random.Generator) -> IntArray:
        """``M2 ~ p``: ``|M2|`` i.i.d. draws by inverting the cumulative distribution."""
        u = rng.random(self.solver.sizes(oracle)[1])
        if state.p_support is None:
            return sample_dense(state.p, u)
        return sample_sparse(state.p_support, state.p, state.p_floor, oracle.m, u)

    def ascend(
        self, oracle: CountingOracle, state: DSZOGState, H: Ascent, eta: float | None = None
    ) -> tuple[Array, IntArray | None, float]:
        """``Proj_Delta(p + eta_p H)`` in the state's form of p."""
        step = self.solver.eta_p if eta is None else eta
        if state.p_support is None:
            return ascent_dense(state.p, step, H), None, 0.0
        support, values, floor = ascent_sparse(state.p_support, state.p, state.p_floor, oracle.m, step, H)
        return values, support, floor

    def step(self, oracle: CountingOracle, state: DSZOGState, rng: np.random.Generator) -> DSZOGState:
        s = self.solver
        if s.auto:
            return self._auto_step(oracle, state, rng)
        w = state.x
        M1, M3 = self.batches(oracle, rng)  # Alg. 1 l.5, l.7
        M2 = self.sample_p(oracle, state, rng)  # Alg. 1 l.6
        G = self.G_L(oracle, w, M1, M2, rng)  # Alg. 1 l.8 (l.4: directions drawn here)
        H = self.H(oracle, w, M3)  # Alg. 1 l.9
        w = _diverged(w - s.eta_w * G, s, state.t + 1)  # Alg. 1 l.10
        box = oracle.feasible_set
        if box is not None:
            w = np.asarray(box.project(w), dtype=np.float64)
        p, support, floor = self.ascend(oracle, state, H)  # Alg. 1 l.11
        # DSZOGState(x=..., p=..., **the other fields of state), built by copying the fields instead of the frozen
        # dataclass __init__ (about 5 us less per step)
        new = _copy_state(DSZOGState, state, x=w, p=p, p_support=support, p_floor=floor, t=state.t + 1)
        return self._snapshot(oracle, new, rng)

    def _auto_step(self, oracle: CountingOracle, state: DSZOGState, rng: np.random.Generator) -> DSZOGState:
        """Alg. 1 with ``steps="auto"``: l.10 becomes a normalised step along ``-G`` with backtracking on the
        penalised batch value, l.11 a step of length ``eta_p`` along ``H / |H|``; then :meth:`after_step`."""
        s = self.solver
        w = state.x
        beta = float(state.beta)
        M1, M3 = self.batches(oracle, rng)  # Alg. 1 l.5, l.7
        pw = self.dense_p(state) if s.exact_p(oracle) else None
        M2 = np.arange(oracle.m, dtype=np.intp) if pw is not None else self.sample_p(oracle, state, rng)  # l.6
        G, L0 = self._estimate_or_diverge(oracle, w, M1, M2, rng, beta, pw, state.t + 1, float(state.alpha))  # Alg. 1 l.8
        H, viol = self._H(oracle, w, M3, beta)  # Alg. 1 l.9
        w_new, alpha, accepted = self.line_search(oracle, w, G, L0, float(state.alpha), M1, M2, beta, pw)  # l.10
        w_new, blown = self._guard(w_new, state)
        eta = s.eta_p / (_norm(H.gain) + s.lam)  # normalised ascent: |eta H| ~ eta_p
        p, support, floor = self.ascend(oracle, state, H, eta)  # Alg. 1 l.11
        fields = self.after_step(oracle, state, w_new, alpha, accepted, viol, _norm(G), L0)
        fields.update(blown)
        # the copy of state with p, t and the fields of after_step (the frozen __init__ cost about 20 us per step)
        new = _copy_state(DSZOGState, state, fields, p=p, p_support=support, p_floor=floor, t=state.t + 1)
        return self._snapshot(oracle, new, rng)

    @staticmethod
    def dense_p(state: DSZOGState) -> Array:
        return state.p if state.p_support is None else densify(state.p_support, state.p, state.p_floor, state.m)


# ====================================================================== ADSZOG
@dataclass(frozen=True)
class ADSZOGPenalty(PenaltyPhase):
    """ADSZOG's penalty phase: DSZOG with exponential moving averages and adaptive steps.

    Shi, Gao & Gu, *Gradient-free method for heavily constrained nonconvex optimization*, ICML 2022,
    Algorithm 1 (named DSZOG there; ADSZOG is Algorithm 2 of the ICLR 2022 submission)::

        1: initialise w_1
        2: p_1 = p*(w_1) = Proj(beta phi(w_1)/lambda)
        3: z_w = G_L(w_1, p_1),  z_p = H(w_1, p_1)
        4: for t = 1..T:
        5:   w_{t+1} = w_t - eta_w z_w / (sqrt(||z_w||) + c)
        6:   p^_{t+1} = Proj_Delta(p_t + eta_p z_p / (sqrt(||z_p||) + c))
        7:   p_{t+1} = (1 - a) p_t + a p^_{t+1}
        8:   u_1..u_q ~ N(0, I_d)              (drawn inside the estimate of l.12)
        9:   M1 subset [n] uniform
       10:   M2 ~ p_{t+1}
       11:   M3 subset [m] uniform
       12:   G = G_L(w_{t+1}, p_{t+1}, l_M1, f_M2, u)
       13:   H = beta m/|M3| sum_{j in M3} e_j phi_j(w_{t+1}) - lambda p_{t+1}
       14:   z_w = (1 - b) z_w + b G
       15:   z_p = (1 - b) z_p + b H

    The adaptive denominator: the ICML text writes ``sqrt(||z||_2) + c`` in the prose of Section 4.2
    ("stepsizes proportional to 1/(sqrt(||z_w||_2) + c)", with ``c`` there to keep the denominator
    away from 0) and in l.6 of the box, but ``sqrt(||z||_2 + c)`` in eqs. (13) and (14) and in l.5 of
    the box. We use ``sqrt(||z||_2) + c`` (the prose, box l.6) for both ``w`` and ``p``; with
    ``c = 1e-8`` the two differ only when ``||z||`` is about ``c``.

    ``steps="auto"``: l.5 becomes a normalised step ``alpha z_w / ||z_w||`` with backtracking on the penalised
    batch value, l.6 a step of length ``eta_p`` along ``z_p / ||z_p||`` (see :class:`PenaltyPhase`).

    ``p_form``: ``"dense"`` keeps ``p`` and ``z_p`` as ``m``-vectors; ``"sparse"`` keeps them in
    the floor + support form (:class:`~zoframe_constrained.simplex.PZ`): the entries that no
    positive gain of ``M3`` has touched share one value of ``p`` and one of ``z_p``, which the
    projection, the averaging and the moving average all treat alike, so a step costs
    ``O(|support| + |M|)`` and gives the same iterates as the dense form up to rounding. The
    support holds the entries touched within the memory of the averages (about
    ``log(1e-300) / log(1 - min(a, b))`` steps); when it exceeds ``m / 4`` the state switches to
    the dense form (exactly the same values). ``"auto"``: sparse from ``m >= 10000``. Every 16
    steps the entries about to turn subnormal are zeroed (:meth:`flush_threshold`).
    """

    solver: ADSZOG  # with the averaging weights a, b and the constant c

    def begin(self, oracle: CountingOracle, x0: Array, rng: np.random.Generator) -> ADSZOGState:
        s = self.solver
        m = oracle.m
        w = self._w1(oracle, x0)  # Alg. 1 l.1
        p, c0 = self._p_star(oracle, w)  # Alg. 1 l.2
        if s.sparse(m):
            support, values, floor = sparsify(p)
            pz = PZ(values, np.zeros_like(values), support, floor, 0.0, m)
        else:
            pz = PZ(p, np.zeros(m), None, 0.0, 0.0, m)
        if s.auto:  # l.3 happens in the first step (the estimates are taken where the step starts)
            st = self._state(w, pz, np.zeros_like(w), 0)
            return dataclasses.replace(st, beta=self.first_beta(oracle, w, c0, rng), alpha=self.first_length(w, oracle))
        M1, M3 = self.batches(oracle, rng)
        z_w = self.G_L(oracle, w, M1, pz_sample(pz, rng.random(s.sizes(oracle)[1])), rng)  # Alg. 1 l.3
        pz = pz_ema(pz, self.H(oracle, w, M3), 1.0)  # Alg. 1 l.3: z_p = H(w_1, p_1)
        return self._state(w, pz, z_w, 0)

    def step(self, oracle: CountingOracle, state: ADSZOGState, rng: np.random.Generator) -> ADSZOGState:
        s = self.solver
        if s.auto:
            return self._auto_step(oracle, state, rng)
        a, b, c = s.a, s.b, s.c
        pz = state.pz()
        w = _diverged(state.x - (s.eta_w / (math.sqrt(_norm(state.z_w)) + c)) * state.z_w, s, state.t + 1)  # l.5
        box = oracle.feasible_set
        if box is not None:
            w = np.asarray(box.project(w), dtype=np.float64)
        pz = pz_project_average(pz, s.eta_p / (math.sqrt(pz.norm_z()) + c), a)  # Alg. 1 l.6-7
        M1, M3 = self.batches(oracle, rng)  # Alg. 1 l.9, l.11
        M2 = pz_sample(pz, rng.random(s.sizes(oracle)[1]))  # Alg. 1 l.10
        G = self.G_L(oracle, w, M1, M2, rng)  # Alg. 1 l.12 (l.8: directions drawn here)
        H = self.H(oracle, w, M3)  # Alg. 1 l.13
        z_w = (1.0 - b) * state.z_w + b * G  # Alg. 1 l.14
        pz = pz_ema(pz, H, b)  # Alg. 1 l.15
        t = state.t + 1
        if t % _FLUSH_EVERY == 0:  # p and z_p are this step's own arrays (l.7 and l.15 made them): no copies
            pz = pz_flush(pz, self.flush_threshold(), overwrite=True)
        return self._snapshot(oracle, self._state(w, pz, z_w, t, state), rng)

    def _auto_step(self, oracle: CountingOracle, state: ADSZOGState, rng: np.random.Generator) -> ADSZOGState:
        """Alg. 1 with ``steps="auto"``, one step from ``w_t`` (the estimates of l.12-15 at ``w_t``, then the
        moves of l.5-7): l.5 is a normalised step along ``-z_w`` with backtracking on the penalised batch
        value at ``w_t``, l.6 a step of length ``eta_p`` along ``z_p / |z_p|``; then :meth:`after_step`."""
        s = self.solver
        a, b = s.a, s.b
        w = state.x
        beta = float(state.beta)
        first = state.t == 0
        pz = state.pz()
        M1, M3 = self.batches(oracle, rng)  # Alg. 1 l.9, l.11
        pw = pz.dense_p() if s.exact_p(oracle) else None
        M2 = np.arange(oracle.m, dtype=np.intp) if pw is not None else pz_sample(pz, rng.random(s.sizes(oracle)[1]))
        G, L0 = self._estimate_or_diverge(oracle, w, M1, M2, rng, beta, pw, state.t + 1, float(state.alpha))  # Alg. 1 l.12
        H, viol = self._H(oracle, w, M3, beta)  # Alg. 1 l.13
        z_w = G if first else (1.0 - b) * state.z_w + b * G  # Alg. 1 l.3 / l.14
        pz = pz_ema(pz, H, 1.0 if first else b)  # Alg. 1 l.3 / l.15
        w_new, alpha, accepted = self.line_search(oracle, w, z_w, L0, float(state.alpha), M1, M2, beta, pw)  # l.5
        w_new, blown = self._guard(w_new, state)
        pz = pz_project_average(pz, s.eta_p / (pz.norm_z() + s.lam), a)  # Alg. 1 l.6 (normalised), l.7
        t = state.t + 1
        if t % _FLUSH_EVERY == 0:
            pz = pz_flush(pz, self.flush_threshold())
        fields = self.after_step(oracle, state, w_new, alpha, accepted, viol, _norm(G), L0)
        fields.update(blown)
        new = self._state(fields.pop("x"), pz, z_w, t, state, fields)
        return self._snapshot(oracle, new, rng)

    def _state(
        self, w: Array, pz: PZ, z_w: Array, t: int, prev: ADSZOGState | None = None, fields: dict[str, Any] | None = None
    ) -> ADSZOGState:
        """The state of ``w``, ``pz``, ``z_w`` at step ``t``: ``prev``'s other fields (updated by ``fields``)."""
        if pz.support is not None and pz.support.shape[0] > pz.m // 4:  # no longer sparse: go dense
            pz = PZ(pz.dense_p(), densify(pz.support, pz.z, pz.z_floor, pz.m), None, 0.0, 0.0, pz.m)
        if prev is None:
            return ADSZOGState(
                x=w, p=pz.p, z_w=z_w, z_p=pz.z, t=t, p_support=pz.support, p_floor=pz.p_floor, z_floor=pz.z_floor,
                m=pz.m,
            )  # fmt: skip
        # prev's other fields carried over: the same state as the keyword constructor, built by copying prev's
        # fields (the frozen dataclass's __init__ with 30 keywords cost about 7 us per step, this about 1.5 us)
        return _copy_state(
            ADSZOGState, prev, fields, x=w, p=pz.p, z_w=z_w, z_p=pz.z, t=t, p_support=pz.support, p_floor=pz.p_floor,
            z_floor=pz.z_floor, m=pz.m,
        )  # fmt: skip

    def flush_threshold(self) -> float:
        """Entries of ``p`` and ``z_p`` below this are zeroed every 16 steps.

        Between two flushes an entry shrinks at most by ``min(1-a, 1-b)^16`` (pure decay), so
        entries below ``FLUSH / min(1-a, 1-b)^16`` (capped at 1e-200) would turn subnormal before
        the next flush; the mass lost is below ``m * 1e-200``.
        """
        s = self.solver
        decay = min(1.0 - s.a, 1.0 - s.b) ** _FLUSH_EVERY
        return min(FLUSH / decay, 1e-200) if decay > 0 else 1e-200
