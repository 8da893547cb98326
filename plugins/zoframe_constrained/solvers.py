"""DSZOG and ADSZOG: doubly stochastic zeroth-order gradient methods for heavily constrained problems.

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
(:meth:`calls_per_step`).

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
from typing import Any, ClassVar, Literal, TypeVar

import numpy as np
from numpy.typing import NDArray

from zoframe.errors import DivergedError, IncompatibleProblemError, InvalidParameterError, NonFiniteValueError
from zoframe.estimators import CoordinateEstimator, _check_underflow, _perturbed, _RandomDirections
from zoframe.measures import FULL_PASS_BLOCK
from zoframe.oracle import CountingOracle
from zoframe.protocols import Array, Estimator, IntArray
from zoframe.result import Status
from zoframe.solver import SolverBase, StopReason, check_batch, check_int, check_open_unit, check_positive
from zoframe.specs import param
from zoframe_constrained.ldp import least_distance, least_distance_step
from zoframe_constrained.precision import (
    BUDGET,
    CONVERGED,
    DIVERGED,
    RUNNING,
    STALLED,
    PrecisionSettings,
    PrecisionState,
    describe,
    precision_start,
    precision_step,
)
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
)

__all__ = [
    "ADSZOG", "DENSE_P_MAX", "DSZOG", "PHASES", "SPARSE_AUTO_M", "ADSZOGState", "DSZOGState", "least_distance_step",
]  # fmt: skip

#: the ``phase`` column of the trace (:meth:`_PenaltyMinimax.trace_row`): code -> phase
PHASES: dict[int, str] = {
    0: "stochastic penalty phase",
    1: "restoration",
    2: "precision phase",
    3: "precision phase from x0 (small problem or equality constraints)",
}
_PENALTY, _RESTORATION, _PRECISION, _FROM_X0 = 0, 1, 2, 3

#: ADSZOG flushes tiny entries of p and z_p every this many steps
_FLUSH_EVERY = 16

#: ``p_form="auto"`` uses the sparse floor + support form of p from this many constraints on
SPARSE_AUTO_M = 10_000

#: ``outputs()`` gives the dense ``p`` up to this many constraints, the floor + support form above it
DENSE_P_MAX = 10**7
#: above this many constraints a restoration round (R1 over all m) is a blocked pass keeping the
#: ``restore_batch`` largest values, instead of one call returning all m values (zoframe.measures.FULL_PASS_BLOCK)
RESTORE_BLOCKED_ABOVE = 1 << 20

PForm = Literal["auto", "dense", "sparse"]
StepMode = Literal["auto", "paper"]
StateT = TypeVar("StateT")

#: the papers' batch size (ICML Section 6.2), the default of every batch that the problem allows
DEFAULT_BATCH = 128
#: steps="auto": the normalised step grows by this factor after an accepted step, shrinks by _SHRINK after a rejected one
_GROW, _SHRINK = 2.0, 0.25
#: steps="auto": at most this many trial points per step (then the step is skipped with a smaller length)
_TRIALS = 6
#: step="auto": stationary after this many restarts of the step length that found no decrease
_STALLS = 3
_STALL_TEXT = "four line searches in a row, the last ones with B reset"


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


#: the machine epsilon of float64 (``np.finfo`` costs several microseconds per call)
_EPS = float(np.finfo(np.float64).eps)


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


def _members(values: IntArray, pool: IntArray) -> NDArray[np.bool_]:
    """``np.isin(values, pool, assume_unique=True)`` (``values`` distinct): by binary search when ``pool`` is
    sorted (a restoration's active set is), which is cheaper than isin's loop over ``pool``."""
    n = int(pool.shape[0])
    if n == 0 or (n > 1 and not bool(np.all(pool[1:] >= pool[:-1]))):
        return np.isin(values, pool, assume_unique=True)
    at = np.minimum(pool.searchsorted(values), n - 1)
    found: NDArray[np.bool_] = pool.take(at) == values
    return found


@functools.lru_cache(maxsize=8)
def _column_weights(b1: int, b2: int, beta: float) -> Array:
    """:meth:`_PenaltyMinimax._weights` (read-only), cached by its arguments alone: no hash of the solver (a
    frozen dataclass of 40 fields, about 5 us per call)."""
    w = np.concatenate([np.full(b1, (b1 + b2) / b1), np.full(b2, beta * (b1 + b2) / b2)])
    w.setflags(write=False)
    return w


def _norm(v: Array) -> float:
    """Euclidean norm (einsum: cheaper than np.linalg.norm, and no BLAS threads for a 1-D product)."""
    return math.sqrt(dot_self(v))


@dataclass(frozen=True)
class _PenaltyMinimax(SolverBase):
    """Hyper-parameters and estimators shared by DSZOG and ADSZOG, and the two step rules.

    ``steps="paper"``: the boxes as written, with the fixed steps ``eta_w``, ``eta_p`` and a fixed
    ``beta`` (the reproductions use it). ``steps="auto"`` (default), for problems nobody tuned:

    * batches default to what the problem allows (``M1 = min(128, n)``, ``M3 = min(128, m)``; for
      ``m <= 128`` the sum over ``j ~ p`` is exact over all constraints), said in ``Result.notes``;
      for ``2 dim <= q + 1`` the gradient estimate is central differences along the coordinates;
    * the ``w`` step is normalised, ``w - alpha G / ||G||`` (ADSZOG: ``z_w``), projected on the
      bounds, with Armijo backtracking on the penalised value of the same batch (function values
      only; a trial where the user's function returns NaN / inf is a failed trial); ``alpha`` starts
      at ``0.1 max(1, |x0|_inf)`` and doubles after an accepted step; the smoothing radius stays
      below ``alpha / 10``; the ``p`` step has length ``eta_p`` along ``H / ||H||``;
    * the starting ``beta`` is scaled by ``|f0(x0)| / max_j f_j(x0)^2`` (units-free), and penalty
      continuation multiplies it by ``beta_growth`` while the sampled violation does not halve
      within ``stall_window`` steps;
    * the hand-over: three restarts of the step length in a row find no decrease down to
      ``switch_tol * max(1, |w|_inf)`` (sampled violation ``<= restore_band``), or the penalty phase has
      spent ``penalty_share`` of ``max_calls``; then the restoration rounds, and the precision phase
      (:mod:`zoframe_constrained.precision`: a working-set SQP from function values) from the restored
      point. The run is ``CONVERGED`` only when the precision phase's KKT test passes (``kkt_tol``,
      ``xtol`` / ``ftol``, ``violation_tol`` over all ``m``); it runs until then or until the budget
      left is below one of its iterations. Small problems (``(n + m) dim <= small_problem``) run
      the precision phase from ``x0``. A budget reserve (``restore_reserve`` of ``max_calls``) is kept
      for a final restoration of the penalty phase;
    * ``|w|`` beyond ``mu / (64 eps)``: with ``steps="auto"`` the precision phase starts from the best point
      seen whose sampled violation was ``<= violation_tol`` (without one, the run ends ``DIVERGED`` on the
      last finite iterate; the precision phase itself ends ``DIVERGED`` beyond the same bound),
      with ``steps="paper"`` through :class:`~zoframe.errors.DivergedError` (the last finite iterate).
    """

    problem_kinds: ClassVar[frozenset[str]] = frozenset({"constrained"})
    handles_equalities: ClassVar[bool] = True  # with steps="auto" (validate refuses steps="paper")
    #: ``mu`` also reaches a user's estimator (``estimate(..., mu=self.mu)``, the divergence limit): only ``q``
    #: is refused together with ``estimator=``
    estimator_only_params: ClassVar[frozenset[str]] = frozenset({"q"})
    eta_w: float = param(1e-2, symbol="eta_w", doc="step size of w (steps='paper'; ignored by steps='auto')")
    eta_p: float = param(1e-2, symbol="eta_p", doc="step size of p (steps='auto': length of the normalised step of p)")
    beta: float = param(1.0, symbol="beta", doc="penalty parameter (> 0; the starting value under continuation)")
    lam: float = param(1e-6, symbol="lambda", doc="strong concavity of L in p (> 0; ICML Alg. 1: 1e-6)")
    q: int = param(10, symbol="q", doc="Gaussian directions per estimate, shared by both sums of G_L")
    mu: float = param(1e-3, symbol="mu", doc="smoothing radius")
    M1: int | None = param(None, symbol="|M1|", doc="data batch, uniform without replacement (None: min(128, n))")
    M2: int | None = param(
        None, symbol="|M2|",
        doc="constraint batch drawn i.i.d. from p (None: 128 with steps='paper'; with steps='auto' min(128, m), and "
            "when that is all m the sum over p is taken exactly)",
    )  # fmt: skip
    M3: int | None = param(None, symbol="|M3|", doc="constraint batch, uniform without replacement (None: min(128, m))")
    estimator: Estimator | None = param(None, doc="gradient estimator (default: gaussian(q, mu))")
    steps: StepMode = param(
        "auto", doc="'auto': normalised steps with backtracking on the penalised value (scale-free); 'paper': the "
        "papers' fixed steps eta_w, eta_p",
    )  # fmt: skip
    continuation: bool | None = param(
        None, doc="raise beta while the sampled violation stalls above the tolerance (None: on with steps='auto')"
    )
    beta_growth: float = param(10.0, doc="continuation: factor by which beta grows")
    beta_max: float = param(1e12, doc="continuation: beta never grows beyond this")
    stall_window: int = param(20, doc="continuation: steps over which the sampled violation must halve")
    xtol: float = param(
        1e-8, doc="steps='auto', precision phase: converged when its step is <= xtol * max(1, |x|_inf) (or ftol "
        "holds), with the KKT and violation tests"
    )
    ftol: float = param(
        1e-12, doc="steps='auto', precision phase: or when the predicted change of the objective is <= ftol * max(1, |f|)"
    )
    kkt_tol: float = param(
        1e-6, doc="steps='auto', precision phase: the KKT residual |grad f + J_W^T lambda| must be <= kkt_tol * "
        "max(1, |grad f|_inf)"
    )
    switch_tol: float = param(
        1e-4, doc="steps='auto': the penalty phase is stationary (and hands over to the restoration and the precision "
        "phase) when its accepted step length falls below switch_tol * max(1, |w|_inf)"
    )
    small_problem: int = param(
        20_000, doc="steps='auto': problems with (n + m) * dim <= this run the precision phase from x0 (0: never)"
    )
    penalty_share: float = param(
        0.5, doc="steps='auto' with max_calls: the penalty phase hands over to the restoration and the precision phase "
        "once it has spent this share of max_calls, stationary or not"
    )
    working_set: int | None = param(
        None, doc="steps='auto', precision phase: top constraints of each full pass that join the working set (None: "
        "min(m, max(4 dim, 32)))"
    )
    restore_band: float = param(
        1e-2, doc="steps='auto': a stationary iterate with sampled violation <= this goes to the final restoration"
    )
    restore_reserve: float | None = param(
        None, doc="steps='auto': fraction of max_calls kept for the final restoration (None: 0.05; 0: none)"
    )
    restore_after: int | None = param(None, doc="steps before the feasibility-restoration phase (None: never)")
    violation_tol: float | None = param(
        None, symbol="eps_f", doc="restoration ends when max_j f_j(w) <= this (None: 1e-6 with steps='auto', 1e-3 'paper')"
    )
    restore_every: int | None = param(
        None, doc="every this many steps, keep a restored copy of w as outputs['x_feasible'] (None: never)"
    )
    restore_sample: int | None = param(None, doc="constraints checked per restoration round (None: all m)")
    restore_rounds: int = param(200, doc="at most this many restoration rounds")
    restore_mu: float = param(1e-6, doc="central-difference step of the constraint gradients in restoration")
    restore_batch: int | None = param(
        None, doc="at most this many nearly active constraints corrected per restoration round (None: m / dim "
        "clipped to [4 dim, 16 dim])"
    )

    def __post_init__(self) -> None:
        if self.steps not in ("auto", "paper"):
            raise InvalidParameterError(f"steps must be 'auto' or 'paper', got {self.steps!r}")
        if self.restore_after is not None:
            check_int("restore_after", self.restore_after, minimum=0)
        if self.restore_every is not None:
            check_int("restore_every", self.restore_every)
        if self.restore_sample is not None:
            check_int("restore_sample", self.restore_sample)
        if self.restore_batch is not None:
            check_int("restore_batch", self.restore_batch)
        if self.violation_tol is not None:
            check_positive("violation_tol", self.violation_tol)
        check_int("restore_rounds", self.restore_rounds)
        check_positive("restore_mu", self.restore_mu)
        check_positive("eta_w", self.eta_w, "eta_w")
        check_positive("eta_p", self.eta_p, "eta_p")
        check_positive("beta", self.beta, "beta")
        check_positive("lam", self.lam, "lambda")
        check_int("q", self.q)
        check_positive("mu", self.mu, "mu")
        for name in ("M1", "M2", "M3"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name))
        if self.continuation is not None and not isinstance(self.continuation, bool):
            raise InvalidParameterError(f"continuation must be True, False or None, got {self.continuation!r}")
        if not (isinstance(self.beta_growth, (int, float)) and self.beta_growth > 1.0):
            raise InvalidParameterError(f"beta_growth must be a number > 1, got {self.beta_growth!r}")
        check_positive("beta_max", self.beta_max)
        check_int("stall_window", self.stall_window)
        check_positive("xtol", self.xtol)
        check_positive("ftol", self.ftol)
        check_positive("switch_tol", self.switch_tol)
        check_int("small_problem", self.small_problem, minimum=0)
        check_open_unit("penalty_share", self.penalty_share)
        if self.working_set is not None:
            check_int("working_set", self.working_set)
        check_positive("restore_band", self.restore_band)
        check_positive("kkt_tol", self.kkt_tol)
        if self.restore_reserve is not None and not (
            isinstance(self.restore_reserve, (int, float)) and 0.0 <= self.restore_reserve < 1.0
        ):
            raise InvalidParameterError(f"restore_reserve must lie in [0, 1), got {self.restore_reserve!r}")
        if self.eta_p * self.lam >= 1.0:
            raise InvalidParameterError(
                f"eta_p * lambda must be < 1 (got {self.eta_p} * {self.lam}): the step p + eta_p H scales p "
                "by 1 - eta_p lambda, which must stay positive; lower eta_p or lambda"
            )

    # ------------------------------------------------------------------ problem-dependent defaults
    @property
    def auto(self) -> bool:
        """Whether the scale-free step rule (``steps="auto"``) is on."""
        return self.steps == "auto"

    @property
    def continuing(self) -> bool:
        """Whether the penalty continuation is on (default: with ``steps="auto"``)."""
        return self.auto if self.continuation is None else bool(self.continuation)

    @property
    def tol(self) -> float:
        """The restoration's violation tolerance (``violation_tol``, or the mode's default)."""
        if self.violation_tol is not None:
            return float(self.violation_tol)
        return 1e-6 if self.auto else 1e-3

    def sizes(self, oracle: CountingOracle) -> tuple[int, int, int]:
        """``(|M1|, |M2|, |M3|)``: the given batches, or the defaults the problem allows (kept per ``(n, m)``:
        every step asks)."""
        key = (oracle.n, oracle.m)
        known = self.__dict__.get("_sizes")  # frozen dataclasses still have an instance dict
        if known is not None and known[0] == key:
            return known[1]  # type: ignore[no-any-return]
        out = self._sizes(oracle)
        self.__dict__["_sizes"] = (key, out)
        return out

    def _sizes(self, oracle: CountingOracle) -> tuple[int, int, int]:
        m1 = self.M1 if self.M1 is not None else min(DEFAULT_BATCH, oracle.n)
        if self.M2 is not None:
            m2 = self.M2
        else:
            m2 = min(DEFAULT_BATCH, oracle.m) if self.auto else DEFAULT_BATCH
        m3 = self.M3 if self.M3 is not None else min(DEFAULT_BATCH, oracle.m)
        return int(m1), int(m2), int(m3)

    def exact_p(self, oracle: CountingOracle) -> bool:
        """``steps="auto"`` with the default ``M2`` and ``m <= 128``: the sum over ``j ~ p`` is taken exactly
        (weights ``p_j`` on all ``m`` constraints) instead of ``|M2| = m`` i.i.d. draws."""
        return self.auto and self.M2 is None and oracle.m <= DEFAULT_BATCH

    def adapt(self, oracle: CountingOracle) -> tuple[Any, list[str]]:
        """Fill the batches the user did not give with what the problem allows, and say so."""
        notes: list[str] = []
        m1, m2, m3 = self.sizes(oracle)
        if self.M1 is None and m1 < DEFAULT_BATCH:
            notes.append(f"M1 = {m1} (all n = {oracle.n} data components; the default is {DEFAULT_BATCH})")
        if self.M3 is None and m3 < DEFAULT_BATCH:
            notes.append(f"M3 = {m3} (all m = {oracle.m} constraints; the default is {DEFAULT_BATCH})")
        if self.exact_p(oracle):
            notes.append(f"M2: the sum over j ~ p is exact over all m = {oracle.m} constraints (m <= {DEFAULT_BATCH})")
        elif self.M2 is None and m2 < DEFAULT_BATCH:
            notes.append(f"M2 = {m2} (m = {oracle.m} constraints; the default is {DEFAULT_BATCH})")
        if self.small(oracle):
            notes.append(
                f"small problem: the precision phase runs from x0 ((n + m) dim = {(oracle.n + oracle.m) * oracle.dim} "
                f"<= small_problem = {self.small_problem})"
            )
        if notes and m1 == oracle.n and m3 == oracle.m and self.exact_p(oracle):
            if isinstance(self.estimator_for(oracle), CoordinateEstimator):
                notes.append("full batches and central differences along the coordinates: deterministic")
            else:
                notes.append("full batches: only the Gaussian directions are random")
        return self, notes

    def validate(self, oracle: CountingOracle) -> None:
        if oracle.kind != "constrained":
            raise IncompatibleProblemError(f"{type(self).__name__} solves constrained problems, got {oracle.kind!r}")
        if oracle.m < 1 and not oracle.m_eq:
            raise InvalidParameterError("the problem has no constraint (m = 0, m_eq = 0); use a finite-sum solver")
        if oracle.m_eq and not self.auto:
            raise IncompatibleProblemError(
                f"{type(self).__name__} with steps='paper' takes inequality constraints only (the papers' penalty "
                f"minimax), but the problem has m_eq = {oracle.m_eq} equality constraints: use steps='auto' (the "
                "working-set SQP keeps them), or slsqp-fd, trust-constr-fd, cobyla or cobyqa"
            )
        if oracle.m < 1 and not self.small(oracle):
            raise IncompatibleProblemError(
                f"{type(self).__name__} with steps='paper' needs inequality constraints (m >= 1), but the problem has "
                f"equality constraints alone (m = 0, m_eq = {oracle.m_eq}): use steps='auto' (the working-set SQP)"
            )
        m1, _, m3 = self.sizes(oracle)
        check_batch("M1", m1, oracle.n, "data components n")
        if oracle.m:
            check_batch("M3", m3, oracle.m, "constraints m")

    def calls_per_step(self, oracle: CountingOracle) -> int:
        """``rows * (|M1| + |M2|) + |M3|`` evaluations per penalty step (``rows = q + 1`` for the Gaussian
        estimator). A restoration round costs the constraints it checks (``m`` or ``restore_sample``)
        plus ``2 dim`` per corrected constraint. With ``steps="auto"`` each trial point of the
        backtracking costs ``|M1| + |M2|`` more (one at least, at most 6 per step)."""
        m1, m2, m3 = self.sizes(oracle)
        return int(self.estimator_for(oracle).rows(oracle.dim)) * (m1 + m2) + m3

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
        est = self.estimator_for(oracle)
        gradient = getattr(est, "gradient", None)
        if gradient is None or not getattr(est, "plain_estimate", False) or getattr(est, "mu", None) != self.mu:
            return self._estimate(oracle, w, M1, M2, rng, beta, p_weights)[0]
        b = self.beta if beta is None else beta
        weights = self._weights(M1.shape[0], M2.shape[0], b) if p_weights is None else self._p_weights(M1.shape[0], p_weights, b)
        direct = getattr(est, "oracle_gradient", None)
        fn = _estimate_kernel(oracle, est)
        both = None if fn is None else _compiled_estimate(fn, est, oracle, w, M1, M2, weights, rng, self.mu)
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
        ``mu``: the smoothing radius (default: the field ``mu``)."""
        b = self.beta if beta is None else beta
        weights = self._weights(M1.shape[0], M2.shape[0], b) if p_weights is None else self._p_weights(M1.shape[0], p_weights, b)
        estimator = self.estimator_for(oracle)
        fn = _estimate_kernel(oracle, estimator)
        both = None if fn is None else _compiled_estimate(fn, estimator, oracle, w, M1, M2, weights, rng, self.mu if mu is None else mu)
        if both is not None:
            return both
        est = self.estimator_for(oracle).estimate(_lagrangian_terms(oracle, M1, M2, weights, owned=False), w, rng, mu=self.mu if mu is None else mu)
        if est.values is None:  # an estimator without a base row (central differences)
            return np.asarray(est.grad, dtype=np.float64), self.penalised(oracle, w, M1, M2, b, p_weights)[0]
        values = np.asarray(est.values, dtype=np.float64)
        # float(values.mean()): numpy's mean is this sum divided by the count (about 2 us less)
        return np.asarray(est.grad, dtype=np.float64), float(values.sum()) / values.size

    def estimator_for(self, oracle: CountingOracle) -> Estimator:
        """The gradient estimator: ``estimator``, else with ``steps="auto"`` central differences along the
        coordinates when they cost no more rows than the Gaussian one (``2 dim <= q + 1``), else
        ``gaussian(q, mu)``."""
        if self.estimator is None and self.auto and 2 * oracle.dim <= self.q + 1:
            return CoordinateEstimator(mu=self.mu)
        return self.gradient_estimator()

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
        b = self.beta if beta is None else beta
        gain = np.maximum(f, 0.0)
        gain *= gain  # ** 2 (numpy squares as x * x)
        gain *= b * oracle.m / M3.shape[0]  # the scalar times phi, element for element
        h = object.__new__(Ascent)  # Ascent(idx=M3, gain=gain, lam=self.lam) without the frozen __init__
        h.__dict__.update(idx=M3, gain=gain, lam=self.lam)
        return h

    def p_star(self, oracle: CountingOracle, w: Array, beta: float | None = None) -> Array:
        """``p*(w) = argmax_p L(w, p) = Proj_Delta(beta phi(w) / lambda)``: one pass over all constraints."""
        return self._p_star(oracle, w, beta)[0]

    def _p_star(self, oracle: CountingOracle, w: Array, beta: float | None = None) -> tuple[Array, float]:
        """``(p*(w), max_j |f_j(w)|)``.

        One dense ``m``-vector: the constraint values (the oracle's result or the blocks' buffer, owned here) are
        turned into ``beta max(f, 0)^2 / lambda`` in place (the same operations in the same order as the
        expression) and projected in place.
        """
        b = self.beta if beta is None else beta
        if oracle.m == 0:  # equality constraints alone: no p (the precision phase runs from x0, see small())
            return np.zeros(0), 0.0
        v = _finite(_all_constraints(oracle, w), oracle, "at the starting point")
        c0 = max(float(v.max()), -float(v.min()))  # max_j |f_j|, without an |f| temporary
        np.maximum(v, 0.0, out=v)  # the constraint values are read: no second m-vector
        np.multiply(v, v, out=v)  # ** 2
        np.multiply(b, v, out=v)
        np.divide(v, self.lam, out=v)
        return _project_in_place(v), c0

    def first_beta(self, oracle: CountingOracle, w: Array, c0: float, rng: np.random.Generator) -> float:
        """``steps="auto"``: the starting penalty ``beta |f0(w)| / max_j f_j(w)^2`` (clipped to ``beta * 10^[-6, 6]``),
        which makes the penalty's curvature scale like the objective's whatever units the objective and the
        constraints are measured in (one objective batch of ``min(128, n)`` components at ``x0``)."""
        batch = rng.choice(oracle.n, size=self.sizes(oracle)[0], replace=False).astype(np.intp)
        f0 = abs(float(oracle.objective(w, batch, purpose="init").mean()))
        if not (c0 > 0.0 and f0 > 0.0 and math.isfinite(f0) and math.isfinite(c0)):
            return self.beta
        return self.beta * min(max(f0 / (c0 * c0), 1e-6), 1e6)

    def batches(self, oracle: CountingOracle, rng: np.random.Generator) -> tuple[IntArray, IntArray]:
        """``M1`` (data) and ``M3`` (constraints), uniform without replacement.

        Drawn by :meth:`CountingOracle.sample` (the same ``rng.choice`` draws): read-only batches the
        oracle knows to be valid, so their evaluations skip the index copy and range check."""
        m1, _, m3 = self.sizes(oracle)
        return oracle.sample(m1, rng), oracle.sample(m3, rng, population="constraints")

    # ------------------------------------------------------------------ steps="auto"
    def first_length(self, w: Array, oracle: CountingOracle) -> float:
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
        mu = min(self.mu, max(0.1 * alpha, floor)) if alpha is not None else None
        try:
            G, L0 = self._estimate(oracle, w, M1, M2, rng, beta, p_weights, mu)
        except NonFiniteValueError as exc:
            if t == 1:  # at the start the non-finite value is the user's function's, not a blow-up: say so
                raise
            raise DivergedError(f"{type(self).__name__} at step {t}: a non-finite value next to the iterate ({exc})") from exc
        if not (math.isfinite(L0) and bool(np.isfinite(G).all())):
            raise DivergedError(f"{type(self).__name__} at step {t}: the penalised value or its estimate is not finite")
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

    def _guard(self, oracle: CountingOracle, w_new: Array, state: Any) -> tuple[Array, dict[str, Any]]:
        """``steps="auto"``: ``(w_new, {})``, or after a blow-up the precision phase from the best point seen whose
        sampled violation was ``<= violation_tol`` (a penalty too weak for the step rule is no reason to give up; a
        problem unbounded on its feasible set then diverges in the precision phase too); without such a point, the
        last finite iterate and the reason that ends the run as DIVERGED."""
        try:
            return _diverged(w_new, self, int(state.t) + 1), {}
        except DivergedError as exc:
            if state.best_x is not None:
                why = f"the penalty phase blew up at step {int(state.t) + 1} ({exc}); restarted from its best feasible sample"
                moved = self.to_precision(oracle, state, state.best_x, None, why)
                return moved.x, {"x": moved.x, "precision": moved.precision, "switch_reason": why}
            best = state.best_x
            back = (
                "returned: the best point seen with a sampled violation <= "
                f"{self.tol:g} (its batch objective {state.best_value:.6g})"
                if best is not None else "returned: the last finite iterate (no feasible sample was seen)"
            )  # fmt: skip
            x = np.array(best if best is not None else state.x, copy=True)
            return x, {"diverged": f"{exc} {back}", "x": x, "restore_final": False}

    def reserve_reached(self, oracle: CountingOracle) -> bool:
        """Whether the budget left is the reserve for the final restoration (``steps="auto"``, ``max_calls`` set)."""
        if oracle.max_calls is None or oracle.remaining is None:
            return False
        frac = 0.05 if self.restore_reserve is None else float(self.restore_reserve)
        if frac <= 0.0:
            return False
        need = max(frac * oracle.max_calls, 4.0 * (oracle.m + 2 * oracle.dim * min(oracle.m, 16 * oracle.dim)))
        return oracle.remaining <= min(need, 0.5 * oracle.max_calls)

    def handover_due(self, oracle: CountingOracle, retries: int = 0) -> bool:
        """``steps="auto"`` with ``max_calls``: whether the penalty phase has spent ``penalty_share`` of it (the
        rest goes to the restoration and the precision phase); after ``retries`` hand-backs from a stalled
        precision phase, ``penalty_share`` of what was left each time (1/2, 3/4, 7/8 of ``max_calls``, ...)."""
        if oracle.max_calls is None:
            return False
        return oracle.calls >= oracle.max_calls * (1.0 - (1.0 - self.penalty_share) ** (retries + 1))

    def after_step(
        self, oracle: CountingOracle, st: Any, new: dict[str, Any], accepted: bool, viol: float, g_norm: float,
        value: float = math.nan,
    ) -> dict[str, Any]:
        """The bookkeeping of ``steps="auto"``: step length, stationarity, continuation, the final restoration.

        ``new`` holds the next state's fields (``x``, ``alpha``, ``beta``, ...); returns them updated.
        """
        t = int(st.t) + 1
        w = new["x"]
        beta = float(new["beta"])
        alpha = float(new["alpha"])
        stalls = int(st.stalls)
        new["viol"] = viol
        if viol <= self.tol and value < float(st.best_value):  # the best point seen with a feasible sample
            new.update(best_x=np.array(st.x, copy=True), best_value=value)
        if not math.isfinite(float(st.g0)):
            new["g0"] = g_norm
        scale = max(1.0, float(np.abs(w).max()))
        if accepted and alpha > 1e2 * self.switch_tol * scale:  # a real move: the stationarity count starts again
            stalls = 0
        stationary = False
        if alpha <= self.switch_tol * scale:  # no decrease along the estimate, down to a small step
            stalls += 1
            stationary = stalls >= _STALLS
            if not stationary:  # restart the step length: a fresh estimate may still find a decrease
                alpha = max(self.first_length(w, oracle) * 1e-3, 10.0 * self.switch_tol * scale)
        win_t0, win_v0 = int(st.win_t0), float(st.win_v0)
        if self.continuing and viol > self.tol and t - win_t0 >= self.stall_window:
            if viol > 0.5 * win_v0 and beta < self.beta_max:  # the violation stalls: raise the penalty
                beta = min(beta * self.beta_growth, self.beta_max)
                alpha = max(alpha, self.first_length(w, oracle) * 1e-2)
                stationary, stalls = False, 0
            win_t0, win_v0 = t, viol
        if stationary:
            if viol <= self.restore_band or not self.continuing or beta >= self.beta_max:
                new.update(stationary=viol <= self.restore_band, restore_final=True)
            else:  # stationary for this beta but too infeasible: raise it and go on
                beta = min(beta * self.beta_growth, self.beta_max)
                alpha = self.first_length(w, oracle) * 1e-2
                win_t0, win_v0, stalls = t, viol, 0
        elif self.reserve_reached(oracle):
            new.update(restore_final=True)
        elif self.handover_due(oracle, int(st.retries)):  # enough budget spent on the penalty phase: restoration, then precision
            new.update(stationary=True, restore_final=True)
        new.update(beta=beta, alpha=alpha, win_t0=win_t0, win_v0=win_v0, stalls=stalls)
        return new

    # ------------------------------------------------------------------ the phases, in the trace and the notes
    def phase(self, state: Any) -> int:
        """The phase ``state`` is in (a key of :data:`PHASES`): the precision phase (from ``x0`` on a small
        problem or with equalities, else after the hand-over), the restoration, or the stochastic penalty phase."""
        if state.precision is not None:
            return _FROM_X0 if bool(state.from_x0) else _PRECISION
        if int(state.rounds) > 0 or self.restoring(state):
            return _RESTORATION
        return _PENALTY

    def trace_row(self, state: Any) -> dict[str, float]:
        """The trace's ``phase`` column (codes: :data:`PHASES`), read from the state (no evaluation)."""
        return {"phase": float(self.phase(state))}

    def final_notes(self, oracle: CountingOracle, state: Any) -> list[str]:
        """The phases of the run, their evaluations (by purpose: ``init`` for the start, ``estimate`` and ``line
        search`` for the penalty phase, ``restore``, ``precision``) and the switch to the precision phase, for
        ``Result.notes``."""
        used = oracle.calls_by_purpose
        parts = [
            ("start", int(used.get("init", 0))),
            (PHASES[_PENALTY], int(used.get("estimate", 0)) + int(used.get("line search", 0))),
            (PHASES[_RESTORATION], int(used.get("restore", 0))),
            (PHASES[_PRECISION], int(used.get("precision", 0))),
        ]
        text = ", ".join(f"{name} {calls} evaluations" for name, calls in parts if calls)
        notes = [f"phases: {text}; final phase: {PHASES[self.phase(state)]}"] if text else []
        if state.precision is not None:
            ps = PrecisionState.unpack(state.precision)
            notes.append(
                f"switch to the precision phase after {ps.before} evaluations ({state.switch_reason}); "
                f"{ps.it} precision iterations, {ps.spent} evaluations"
            )
        if int(state.retries):
            notes.append(f"{int(state.retries)} stall(s) of the precision phase handed back to the penalty phase")
        return notes

    # ------------------------------------------------------------------ ending feasible
    def restoring(self, state: Any) -> bool:
        """Whether the penalty steps are over and the feasibility-restoration phase runs: after
        ``restore_after`` steps, or (``steps="auto"``) once the stationarity test passed or the budget
        reached the reserve kept for the restoration."""
        if bool(state.restore_final):
            return True
        return self.restore_after is not None and int(state.t) >= self.restore_after

    def restore(self, oracle: CountingOracle, state: StateT, rng: np.random.Generator) -> StateT:
        """One round of the feasibility restoration (after ``restore_after`` penalty steps).

        The penalty iterates end slightly infeasible (the violation of the penalised minimiser is
        about ``sum(alpha*) / (2 beta)``). Each round:

        R1. evaluate the constraints at ``w``: all ``m`` (``restore_sample=None``, an exact max
            violation) or a uniform sample (then the max violation is a sampled one; the active set
            ``A`` of the previous round is evaluated too when the round goes on); if the max
            violation is ``<= violation_tol``, keep ``w``: ``terminate`` reports it, with how it was
            measured;
        R2. the rows: ``A`` (the constraints that held the previous step in place), then the nearly
            active constraints ``f_j(w) > -max(violation_tol, v)`` (``v`` the max violation of R1:
            the band a correcting move can push over the edge), the largest first, at most
            ``restore_batch`` rows in all (default :meth:`row_budget`: ``m / dim`` clipped to
            ``[4 dim, 16 dim]``, which bounds the gradient matrix of R3);
        R3. their gradients by central differences (one batched call, ``2 dim`` points);
        R4. the shortest step ``delta`` with ``f_j(w) + grad f_j . delta <= 0`` for those rows
            (:func:`least_distance_step`): the projection of ``w`` onto their linearisation, exact
            in one round for linear constraints; its rows with a positive multiplier are the next
            ``A`` (the first round's ``A`` is the last feasible snapshot's, when there is one).

        ``w`` moves as little as the constraints require (satisfied constraints that need no move
        do not pull it around), so the objective changes little; ``p`` (and ADSZOG's averages) are
        kept. At most ``restore_rounds`` rounds. Why these choices (all nearly active rows, the
        shortest step, keeping ``A``, the target ``0`` rather than a margin below it): measured in
        ``docs/algorithms/dszog.md`` ("Ending feasible").
        """
        st: Any = state
        start = st.restore_active if int(st.rounds) > 0 else st.feasible_active  # a snapshot's A, if any
        w, violation, checked, active = self._restore_round(oracle, st.x, start, rng)
        rounds = int(st.rounds) + 1
        best = st.restore_best  # (point, its violation): the best measured point of the rounds
        if best is None or violation < float(best[1]):  # the violation of this round is measured at st.x
            best = (np.array(st.x, copy=True), np.array(violation))
        out: Any = dataclasses.replace(
            st, x=w, violation=violation, checked=checked, rounds=rounds, restore_active=active, restore_best=best
        )
        if violation > self.tol and rounds >= self.restore_rounds:  # never end worse than the best round
            out = dataclasses.replace(out, x=best[0], violation=float(best[1]))
        spare = not self.reserve_reached(oracle)  # more budget left than the restoration's reserve
        if self.auto and bool(st.restore_final) and (bool(st.stationary) or spare) and (
            violation <= self.tol or rounds >= self.restore_rounds
        ):
            why = (
                f"the penalty phase was stationary after {int(st.t)} steps and the restoration reached max violation "
                f"{float(out.violation):.2g} in {rounds} round(s)" if bool(st.stationary) else
                f"the penalty phase stopped after {int(st.t)} steps (stationary but not within restore_band of the "
                f"feasible set) and the restoration reached max violation {float(out.violation):.2g} in {rounds} round(s)"
            )
            out = self.to_precision(oracle, out, out.x, active, why)
        res: StateT = out
        return res

    # ------------------------------------------------------------------ the precision phase
    def precision_settings(self) -> PrecisionSettings:
        """The precision phase's tolerances (``xtol``, ``ftol``, ``kkt_tol``, ``violation_tol``, ``working_set``)."""
        return PrecisionSettings(
            xtol=self.xtol, ftol=self.ftol, kkt_tol=self.kkt_tol, violation_tol=self.tol, working=self.working_set,
            limit=min(1e100, self.mu / (64.0 * _EPS)),
        )

    def small(self, oracle: CountingOracle) -> bool:
        """``steps="auto"``: whether the precision phase runs from ``x0``: the problem is small enough,
        ``(n + m) * dim <= small_problem`` evaluations for a full pass's worth of coordinate differences, or it
        has equality constraints (``m_eq > 0``: the penalty phase takes inequalities only, the precision phase
        keeps the equalities in its working set, whatever the size)."""
        return self.auto and (oracle.m_eq > 0 or (oracle.n + oracle.m) * oracle.dim <= self.small_problem)

    def small_start(self, oracle: CountingOracle, st: StateT) -> StateT:
        """``st``, switched to the precision phase at its point when the problem is :meth:`small`."""
        if not self.small(oracle):
            return st
        size = (oracle.n + oracle.m) * oracle.dim
        why = (
            f"equality constraints (m_eq = {oracle.m_eq}): precision phase from x0" if oracle.m_eq
            else f"small problem ((n + m) dim = {size} <= small_problem = {self.small_problem}): precision phase from x0"
        )  # fmt: skip
        cur: Any = st
        out: StateT = dataclasses.replace(self.to_precision(oracle, cur, cur.x, None, why), from_x0=True)
        return out

    def to_precision(self, oracle: CountingOracle, st: Any, x: Array, active: IntArray | None, why: str) -> Any:
        """Switch to the precision phase (:mod:`zoframe_constrained.precision`) at ``x`` with the working set
        ``active``; ``why`` goes into the stop message with the evaluations spent before the switch."""
        ps = precision_start(oracle, x, self.precision_settings(), active)
        carried = getattr(st, "carried", None)
        if carried is not None and float(carried[1][0]) < ps.best_f:  # an earlier phase's best point is better
            ps = dataclasses.replace(ps, best_x=np.array(carried[0], copy=True), best_f=float(carried[1][0]),
                                     best_v=float(carried[1][1]))  # fmt: skip
        return dataclasses.replace(
            st, x=ps.x, precision=ps.pack(), switch_reason=why, restore_final=False, rounds=0,
        )  # fmt: skip

    def precision_step(self, oracle: CountingOracle, state: StateT, rng: np.random.Generator) -> StateT:
        """One iteration of the precision phase; at its end the point returned is the best feasible one
        when the phase did not converge at a feasible point."""
        st: Any = state
        ps = PrecisionState.unpack(st.precision)
        if ps.status != RUNNING:  # ended (a resumed run asks for one more step): nothing to evaluate
            return state
        ps = precision_step(oracle, ps, self.precision_settings(), rng)
        if ps.status == STALLED and not oracle.m_eq and self._budget_for_more(oracle):  # the penalty phase: no equalities
            back: StateT = self._hand_back(oracle, st, ps)
            return back
        if ps.status in (DIVERGED, STALLED, BUDGET) and ps.best_x.shape[0] and (
            ps.status == DIVERGED or ps.violation > self.tol or ps.fx > ps.best_f
        ):
            ps = dataclasses.replace(ps, x=ps.best_x, fx=ps.best_f, vmax=ps.best_v)
        out: StateT = dataclasses.replace(st, x=ps.x, precision=ps.pack(), t=int(st.t) + 1)
        return out

    def _budget_for_more(self, oracle: CountingOracle) -> bool:
        """Whether more than a quarter of ``max_calls`` is left (always, without ``max_calls``)."""
        return oracle.max_calls is None or (oracle.remaining is not None and oracle.remaining > 0.25 * oracle.max_calls)

    def _hand_back(self, oracle: CountingOracle, st: Any, ps: PrecisionState) -> Any:
        """A stalled precision phase with budget left: the penalty phase resumes from its best point (the best
        feasible one, else where it stalled), with a stronger penalty when that point is infeasible; it hands
        over again by the usual rules (``retries`` counts the hand-backs)."""
        x = ps.best_x if ps.best_x.shape[0] else ps.x
        beta = float(st.beta) * (self.beta_growth if not ps.best_x.shape[0] else 1.0)
        carried = st.carried  # the best point of every phase so far goes on to the next one
        if ps.best_x.shape[0] and (carried is None or ps.best_f < float(carried[1][0])):
            carried = (np.array(ps.best_x, copy=True), np.array([ps.best_f, ps.best_v]))
        return dataclasses.replace(
            st, x=np.array(x, copy=True), precision=None, retries=int(st.retries) + 1, stationary=False,
            restore_final=False, stalls=0, rounds=0, restore_active=None, restore_best=None, t=int(st.t) + 1,
            beta=min(beta, self.beta_max), alpha=self.first_length(x, oracle) * 1e-2, win_t0=int(st.t),
            win_v0=math.inf, switch_reason="", from_x0=False, carried=carried,
        )  # fmt: skip

    def _precision_stop(self, state: Any) -> str | None:
        ps = PrecisionState.unpack(state.precision)
        if ps.status == RUNNING:
            return None
        text = f"{describe(ps)}; switched after {ps.before} evaluations: {state.switch_reason}"
        if int(state.retries):
            text += f" ({int(state.retries)} earlier stall(s) of the precision phase handed back to the penalty phase)"
        if ps.status == CONVERGED:
            return StopReason(
                f"stationarity test passed (KKT residual {ps.kkt:.2g} <= kkt_tol = {self.kkt_tol:g}, max violation over "
                f"all m {ps.violation:.2g} <= {self.tol:g}, step or predicted change below xtol / ftol) in the {text}",
                Status.CONVERGED,
            )
        feasible = (
            f"returned: the best point seen with a max violation <= {self.tol:g} (full pass)" if ps.best_x.shape[0]
            else "no feasible point was seen"
        )  # fmt: skip
        if ps.status == DIVERGED:
            return StopReason(f"the precision phase diverged (|x| beyond {self.precision_settings().limit:.3g}); {feasible}; {text}", Status.DIVERGED)
        if ps.status == BUDGET:
            return StopReason(f"the budget left is below one precision iteration; no stationarity certificate; {feasible}; {text}", Status.BUDGET)
        return StopReason(
            f"the precision phase stalled (no decrease of the merit along the QP step, {_STALL_TEXT}); no stationarity "
            f"certificate; {feasible}; {text}",
            Status.FAILED,
        )

    def _restore_round(
        self, oracle: CountingOracle, w: Array, active: IntArray | None, rng: np.random.Generator
    ) -> tuple[Array, float, int, IntArray | None]:
        """One round R1-R4 of :meth:`restore` from ``w`` with the previous active set ``active``.

        Returns ``(w_new, violation at w, constraints checked, active set of the step)``; ``w_new is
        w`` when the max violation at ``w`` is already ``<= violation_tol``.
        """
        sample = self.restore_sample
        idx = None if sample is None or sample >= oracle.m else np.sort(rng.choice(oracle.m, size=sample, replace=False))
        if idx is None and oracle.m > RESTORE_BLOCKED_ABOVE:
            return self._restore_round_blocked(oracle, w, active, rng)
        f = _finite(oracle.constraints(w, idx, purpose="restore")[0], oracle, "in the restoration")  # R1
        violation = max(float(f.max()), 0.0)
        checked = oracle.m if idx is None else int(idx.shape[0])
        if violation <= self.tol:
            return w, violation, checked, active
        if idx is None:  # all m constraints: the position of constraint j among them is j (no arange(m) needed)
            return self._restore_rows(oracle, w, None, f, violation, checked, active, rng)
        ids = idx
        if active is not None:  # the previous active set, outside the uniform sample
            extra = np.setdiff1d(active, idx, assume_unique=True)
            if extra.shape[0]:
                f_extra = _finite(oracle.constraints(w, extra, purpose="restore")[0], oracle, "in the restoration")
                ids, f = np.concatenate([ids, extra]), np.concatenate([f, f_extra])
                order = np.argsort(ids, kind="stable")
                ids, f = ids[order], f[order]
        return self._restore_rows(oracle, w, ids, f, violation, checked, active, rng)

    def _restore_rows(
        self, oracle: CountingOracle, w: Array, ids: IntArray | None, f: Array, violation: float, checked: int,
        active: IntArray | None, rng: np.random.Generator,
    ) -> tuple[Array, float, int, IntArray | None]:  # fmt: skip
        """R2-R4 of :meth:`_restore_round`: ``f`` holds the values of the sorted constraints ``ids`` (``None``: all
        ``m``, where the position of constraint ``j`` is ``j``)."""
        k = self.row_budget(oracle)
        keep = np.zeros(0, dtype=np.intp)  # R2: positions (in ids) of the previous active set, then the band
        if active is not None and active.shape[0]:
            keep = np.searchsorted(ids, active)[:k] if ids is not None else np.asarray(active[:k], dtype=np.intp)
        band = np.flatnonzero(f > -max(self.tol, violation))
        if keep.shape[0]:
            band = band[~_members(band, keep)]
        room = k - keep.shape[0]
        if band.shape[0] > room:
            band = band[np.argpartition(-f[band], room - 1)[:room]] if room > 0 else band[:0]
        rows = np.concatenate([keep, band])
        w_new, new_active = self._restore_step(oracle, w, rows if ids is None else ids[rows], f[rows], violation, rng)
        return w_new, violation, checked, new_active

    def row_budget(self, oracle: CountingOracle) -> int:
        """The rows of a restoration round (R2): ``restore_batch``, by default ``m / dim`` clipped to
        ``[4 dim, 16 dim]``.

        A round costs one pass over the ``m`` constraints (R1), ``2 dim`` evaluations per row for the gradients
        (R3) and a least-distance program that grows with the rows (R4); more rows make fewer rounds. The default
        keeps a round's gradients within about two passes: where ``m`` is small next to ``dim^2`` the rounds
        are cheap and fewer rows per round pay, where it is large (a pass is the expensive part) the rounds
        keep ``16 dim`` rows. Measured in ``docs/algorithms/dszog.md`` ("Ending feasible"): a9a pairwise
        (d = 123, m = 45,600: ``4 dim`` rows) restored 1.75x sooner than with ``16 dim`` rows, with one to three
        more rounds; on a generated pairwise problem (d = 50, m = 62,464: ``16 dim``) ``4 dim`` rows were up to 2x
        slower.
        """
        if self.restore_batch:
            return int(self.restore_batch)
        d = oracle.dim
        return int(min(16 * d, max(4 * d, oracle.m // d)))

    def _restore_round_blocked(
        self, oracle: CountingOracle, w: Array, active: IntArray | None, rng: np.random.Generator
    ) -> tuple[Array, float, int, IntArray | None]:
        """:meth:`_restore_round` over all ``m`` constraints with memory bounded whatever ``m`` is.

        R1 is one blocked pass (:func:`zoframe.measures.max_violation_full`, blocks of 2^20
        constraints) that keeps the ``restore_batch`` largest values; R2 takes the previous active
        set (evaluated again by index: at most ``restore_batch`` more evaluations) and then the
        largest of those values within the band. Used above :data:`RESTORE_BLOCKED_ABOVE`
        constraints, where holding all ``m`` values (and their indices) would cost gigabytes.
        """
        from zoframe.measures import max_violation_full

        k = self.row_budget(oracle)
        full = max_violation_full(oracle, w, top=k, purpose="restore")  # R1: every constraint, in blocks
        violation = max(full.max_value, 0.0)
        if violation <= self.tol:
            return w, violation, oracle.m, active
        keep = np.zeros(0, dtype=np.intp)  # R2: the previous active set, then the band
        f_keep = np.zeros(0)
        if active is not None and active.shape[0]:
            keep = np.asarray(active[:k], dtype=np.intp)
            f_keep = _finite(oracle.constraints(w, keep, purpose="restore")[0], oracle, "in the restoration")
        cand, f_cand = full.top_indices, full.top_values  # largest first
        inside = f_cand > -max(self.tol, violation)
        if keep.shape[0]:
            inside &= ~np.isin(cand, keep)
        room = k - keep.shape[0]
        band, f_band = cand[inside][:room], f_cand[inside][:room]
        V = np.concatenate([keep, band])
        w_new, new_active = self._restore_step(oracle, w, V, np.concatenate([f_keep, f_band]), violation, rng)
        return w_new, violation, oracle.m, new_active

    def _restore_step(
        self, oracle: CountingOracle, w: Array, V: IntArray, f_V: Array, violation: float, rng: np.random.Generator
    ) -> tuple[Array, IntArray | None]:
        """R3-R4 of a restoration round on the constraints ``V`` (values ``f_V`` at ``w``): the new
        point and the active set of the least-distance step."""
        coord = CoordinateEstimator(mu=self.restore_mu)
        inside = oracle.feasible_set
        grads = coord.estimate(
            lambda X: oracle.constraints(X if inside is None else inside.project(X), V, purpose="restore"), w, rng,
            per_component=True,
        )  # R3 (points kept inside the bounds: a coordinate on its bound gets half the difference)
        G = np.asarray(grads.per_component).reshape(V.shape[0], oracle.dim)
        rhs = -f_V
        box = oracle.feasible_set
        lo, hi = getattr(box, "lower", None), getattr(box, "upper", None)
        n_rows = G.shape[0]
        if lo is not None and hi is not None:  # the bounds near w as rows with known gradients (no evaluation)
            eye = np.eye(oracle.dim)
            lo_v = np.broadcast_to(np.asarray(lo, dtype=np.float64), w.shape)
            hi_v = np.broadcast_to(np.asarray(hi, dtype=np.float64), w.shape)
            near_lo = np.flatnonzero(np.isfinite(lo_v) & (lo_v - w > -max(self.tol, violation)))
            near_hi = np.flatnonzero(np.isfinite(hi_v) & (w - hi_v > -max(self.tol, violation)))
            G = np.vstack([G, -eye[near_lo], eye[near_hi]])
            rhs = np.concatenate([rhs, (w - lo_v)[near_lo], (hi_v - w)[near_hi]])
        delta, mult = least_distance(G, rhs)  # R4
        new_active = None if mult is None else np.sort(V[mult[mult < n_rows]])
        w_new = w + delta
        if box is not None:
            w_new = box.project(w_new)
        return w_new, new_active

    def snapshot(self, oracle: CountingOracle, state: StateT, rng: np.random.Generator) -> StateT:
        """A feasible copy of the current iterate (``restore_every``): the penalty iterates go on unchanged.

        Runs up to ``restore_rounds`` rounds of :meth:`restore` on a copy of ``w``; when one reaches a
        max violation ``<= violation_tol`` (measured as in R1), the state keeps it as ``x_feasible``
        (with its violation, how many constraints measured it and the step it was taken at). A copy
        that does not get there is dropped and the previous ``x_feasible`` stays.

        The first round starts from the active set ``A`` the previous snapshot ended with
        (``feasible_active``): the constraints that bounded the last restored copy usually bound the
        next one (on a9a pairwise, 20 snapshots every 100 steps took 56-61 rounds instead of 79-87,
        3 seeds).
        """
        st: Any = state
        w = st.x
        active: IntArray | None = st.feasible_active
        for _ in range(self.restore_rounds + 1):
            w_new, violation, checked, active = self._restore_round(oracle, w, active, rng)
            if violation <= self.tol:
                out: StateT = dataclasses.replace(
                    st, x_feasible=w.copy(), feasible_violation=violation, feasible_checked=checked,
                    feasible_t=int(st.t), feasible_active=active,
                )  # fmt: skip
                return out
            w = w_new
        return state

    def snapshot_due(self, state: Any) -> bool:
        """Whether this step takes a feasible snapshot (every ``restore_every`` penalty steps)."""
        return self.restore_every is not None and int(state.t) % self.restore_every == 0

    def terminate(self, state: Any) -> str | None:
        """Why the run ends, with an honest status (a :class:`~zoframe.solver.StopReason`).

        ``CONVERGED`` only when the precision phase's KKT test of ``steps="auto"`` passed
        (:meth:`_precision_stop`). A restoration that ends feasible after ``restore_after`` steps or on
        the budget reserve stops with ``MAX_ITER`` or ``BUDGET`` (feasible, no stationarity
        certificate); one that does not reach the tolerance stops with ``FAILED``.
        """
        if str(getattr(state, "diverged", "")):
            return StopReason(str(state.diverged), Status.DIVERGED)
        if state.precision is not None:
            return self._precision_stop(state)
        if int(state.rounds) == 0:
            return None
        how = "full pass over all constraints" if state.checked == getattr(state, "m", -1) else f"sampled: {state.checked} constraints"
        if state.violation <= self.tol:
            text = f"feasible: max violation {state.violation:.3g} <= {self.tol:g} ({how}) after {state.rounds} restoration round(s)"
            if bool(state.restore_final):
                return StopReason(
                    f"{text}, on the budget reserve kept for the restoration; no stationarity certificate", Status.BUDGET
                )
            return StopReason(f"{text}, after restore_after={self.restore_after} steps; no stationarity certificate", Status.MAX_ITER)
        if int(state.rounds) >= self.restore_rounds:
            return StopReason(
                f"feasibility restoration failed: max violation {state.violation:.3g} > {self.tol:g} ({how}) after "
                f"{state.rounds} rounds",
                Status.FAILED,
            )
        return None

    def _restoration_outputs(self, state: Any) -> dict[str, Array]:
        out: dict[str, Array] = {}
        if state.precision is not None:  # the precision phase's figures
            ps = PrecisionState.unpack(state.precision)
            out.update(
                max_violation=np.array(ps.violation), violation_checked=np.array(float(state.m)),
                kkt_residual=np.array(ps.kkt), precision_iterations=np.array(float(ps.it)),
                precision_evaluations=np.array(float(ps.spent)), working_set=np.array(float(ps.working)),
                switch_evaluations=np.array(float(ps.before)),
            )  # fmt: skip
            return out
        if int(state.rounds) > 0:
            out.update(max_violation=np.array(state.violation), violation_checked=np.array(float(state.checked)))
        if state.x_feasible is not None:
            out.update(
                x_feasible=state.x_feasible, feasible_max_violation=np.array(state.feasible_violation),
                feasible_checked=np.array(float(state.feasible_checked)), feasible_step=np.array(float(state.feasible_t)),
            )
        return out


# ====================================================================== DSZOG
@dataclass(frozen=True, kw_only=True)
class _RestorationState:
    """What the ending-feasible machinery carries, shared by both states (keyword-only fields).

    ``violation``, ``checked``, ``rounds``, ``restore_active``: the restoration phase (the max
    violation, how many constraints measured it, rounds so far, the last step's active set);
    ``x_feasible`` and the ``feasible_*`` fields: the last feasible snapshot (``restore_every``);
    ``beta`` (the current penalty, continuation), ``alpha`` (the normalised step length), ``viol``
    (the last sampled violation), ``win_t0`` / ``win_v0`` (the stall window), ``stationary`` and
    ``restore_final`` (the final restoration of ``steps="auto"``).
    """

    violation: float = math.nan
    checked: int = 0
    rounds: int = 0
    restore_active: IntArray | None = None
    x_feasible: Array | None = None
    feasible_violation: float = math.nan
    feasible_checked: int = 0
    feasible_t: int = 0
    feasible_active: IntArray | None = None
    beta: float = math.nan
    alpha: float = math.nan
    viol: float = math.nan
    win_t0: int = 0
    win_v0: float = math.inf
    stalls: int = 0
    best_x: Array | None = None
    best_value: float = math.inf
    diverged: str = ""
    g0: float = math.nan
    kkt: float = math.nan
    retries: int = 0
    stationary: bool = False
    restore_final: bool = False
    restore_best: tuple[Array, Array] | None = None
    precision: tuple[Array, ...] | None = None
    #: the best point of the precision phases handed back so far and ``[f, max violation]`` there: the next
    #: phase starts with it as its best point, so that a hand-back loses nothing
    carried: tuple[Array, Array] | None = None
    switch_reason: str = ""
    from_x0: bool = False

    def auto_fields(self) -> dict[str, Any]:
        """The fields of ``steps="auto"`` (penalty, step length, stall window, phase), to carry over."""
        return {
            "beta": self.beta, "alpha": self.alpha, "viol": self.viol, "win_t0": self.win_t0, "win_v0": self.win_v0,
            "stalls": self.stalls, "best_x": self.best_x, "best_value": self.best_value, "diverged": self.diverged,
            "g0": self.g0, "kkt": self.kkt, "retries": self.retries,
            "stationary": self.stationary, "restore_final": self.restore_final, "carried": self.carried,
        }  # fmt: skip

    def snapshot_fields(self) -> dict[str, Any]:
        """The last feasible snapshot, to carry over into the next step's state."""
        return {
            "x_feasible": self.x_feasible, "feasible_violation": self.feasible_violation,
            "feasible_checked": self.feasible_checked, "feasible_t": self.feasible_t,
            "feasible_active": self.feasible_active,
        }  # fmt: skip


#: the restoration phase's fields at their defaults (a penalty step's new state starts them afresh)
_RESTORATION_DEFAULTS: dict[str, Any] = {"violation": math.nan, "checked": 0, "rounds": 0, "restore_active": None}


def _copy_state(
    cls: type[StateT], prev: Any, fields: dict[str, Any], defaults: dict[str, Any] | None = None, **changes: Any
) -> StateT:
    """``dataclasses.replace(prev, **defaults, **changes, **fields)`` for ``prev`` of class ``cls``
    (``defaults``: :data:`_RESTORATION_DEFAULTS` unless given): the same state, built by copying the
    fields instead of the frozen dataclass ``__init__`` (any name that is not a field goes through
    ``dataclasses.replace``, which refuses it)."""
    base = _RESTORATION_DEFAULTS if defaults is None else defaults
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = frozenset(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
    if type(prev) is not cls or not (fields.keys() <= names and changes.keys() <= names):
        out: StateT = dataclasses.replace(prev, **{**base, **changes, **fields})
        return out
    new = object.__new__(cls)
    state = new.__dict__
    state.update(prev.__dict__)
    state.update(base)
    state.update(changes)
    state.update(fields)
    return new


#: the field names of each state class (for :func:`_copy_state`)
_FIELD_NAMES: dict[type, frozenset[str]] = {}


#: the fields of :class:`_RestorationState` that a ``steps="paper"`` DSZOG step starts afresh (all but the snapshot's)
_NON_SNAPSHOT_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in dataclasses.fields(_RestorationState) if f.name not in _RestorationState().snapshot_fields()
}


@dataclass(frozen=True)
class DSZOGState(_RestorationState):
    """What DSZOG carries: ``w`` and the distribution ``p`` over the constraints.

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
class DSZOG(_PenaltyMinimax):
    """Plain DSZOG: Shi, Gao & Gu, ICLR 2022 submission, Algorithm 1 (doubly stochastic ZO gradient).

    ::

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

    ``p_form`` chooses how p is stored: ``"dense"`` (an ``m``-vector, ``O(m)`` per step),
    ``"sparse"`` (floor + support, ``O(|support| + |M|)`` per step, the same iterates up to
    rounding) or ``"auto"`` (sparse from ``m >= 10000``). ``outputs()`` reports ``x`` and the final
    ``p``: its largest entries are the constraints that were hardest to satisfy.

    Ending feasible: with ``restore_after=T`` the solver switches after ``T`` steps to the
    feasibility-restoration rounds of :meth:`restore` and stops once the max violation (over all
    constraints, or over ``restore_sample`` of them, as the message says) is ``<= violation_tol``.
    """

    lam: float = param(1e-8, symbol="lambda", doc="strong concavity of L in p (> 0; ICLR Alg. 1: 1e-8)")
    p_form: PForm = param("auto", doc="storage of p: 'auto', 'dense' or 'sparse'")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.p_form not in ("auto", "dense", "sparse"):
            raise InvalidParameterError(f"p_form must be 'auto', 'dense' or 'sparse', got {self.p_form!r}")

    def sparse(self, m: int) -> bool:
        return self.p_form == "sparse" or (self.p_form == "auto" and m >= SPARSE_AUTO_M)

    def init(self, oracle: CountingOracle, x0: Array, rng: np.random.Generator) -> DSZOGState:
        w = np.array(x0, dtype=np.float64, copy=True)  # Alg. 1 l.1
        box = oracle.feasible_set
        if box is not None:
            w = np.asarray(box.project(w), dtype=np.float64)
        p, c0 = self._p_star(oracle, w)  # Alg. 1 l.2
        if self.sparse(oracle.m):
            support, values, floor = sparsify(p)
            st = DSZOGState(x=w, p=values, p_support=support, p_floor=floor, m=oracle.m)
        else:
            st = DSZOGState(x=w, p=p, p_support=None, p_floor=0.0, m=oracle.m)
        if not self.auto:
            return st
        st = dataclasses.replace(st, beta=self.first_beta(oracle, w, c0, rng), alpha=self.first_length(w, oracle))
        return self.small_start(oracle, st)

    def sample_p(self, oracle: CountingOracle, state: DSZOGState, rng: np.random.Generator) -> IntArray:
        """``M2 ~ p``: ``|M2|`` i.i.d. draws by inverting the cumulative distribution."""
        u = rng.random(self.sizes(oracle)[1])
        if state.p_support is None:
            return sample_dense(state.p, u)
        return sample_sparse(state.p_support, state.p, state.p_floor, oracle.m, u)

    def ascend(
        self, oracle: CountingOracle, state: DSZOGState, H: Ascent, eta: float | None = None
    ) -> tuple[Array, IntArray | None, float]:
        """``Proj_Delta(p + eta_p H)`` in the state's form of p."""
        step = self.eta_p if eta is None else eta
        if state.p_support is None:
            return ascent_dense(state.p, step, H), None, 0.0
        support, values, floor = ascent_sparse(state.p_support, state.p, state.p_floor, oracle.m, step, H)
        return values, support, floor

    def step(self, oracle: CountingOracle, state: DSZOGState, rng: np.random.Generator) -> DSZOGState:
        if state.precision is not None:
            return self.precision_step(oracle, state, rng)
        if self.restoring(state):
            return self.restore(oracle, state, rng)
        if self.auto:
            return self._auto_step(oracle, state, rng)
        w = state.x
        M1, M3 = self.batches(oracle, rng)  # Alg. 1 l.5, l.7
        M2 = self.sample_p(oracle, state, rng)  # Alg. 1 l.6
        G = self.G_L(oracle, w, M1, M2, rng)  # Alg. 1 l.8 (l.4: directions drawn here)
        H = self.H(oracle, w, M3)  # Alg. 1 l.9
        w = _diverged(w - self.eta_w * G, self, state.t + 1)  # Alg. 1 l.10
        box = oracle.feasible_set
        if box is not None:
            w = np.asarray(box.project(w), dtype=np.float64)
        p, support, floor = self.ascend(oracle, state, H)  # Alg. 1 l.11
        # the last feasible snapshot (restore_every) carries over, every other field of the restoration and of
        # steps="auto" at its default: the state DSZOGState(x=..., **state.snapshot_fields()) builds, by copying
        # the fields instead of the frozen dataclass __init__ (about 5 us less per step)
        new = _copy_state(
            DSZOGState, state, {}, _NON_SNAPSHOT_DEFAULTS, x=w, p=p, p_support=support, p_floor=floor, t=state.t + 1
        )
        return self.snapshot(oracle, new, rng) if self.snapshot_due(new) else new

    def _auto_step(self, oracle: CountingOracle, state: DSZOGState, rng: np.random.Generator) -> DSZOGState:
        """Alg. 1 with ``steps="auto"``: l.10 becomes a normalised step along ``-G`` with backtracking on the
        penalised batch value, l.11 a step of length ``eta_p`` along ``H / |H|``; then :meth:`after_step`."""
        w = state.x
        beta = float(state.beta)
        M1, M3 = self.batches(oracle, rng)  # Alg. 1 l.5, l.7
        pw = self.dense_p(state) if self.exact_p(oracle) else None
        M2 = np.arange(oracle.m, dtype=np.intp) if pw is not None else self.sample_p(oracle, state, rng)  # l.6
        G, L0 = self._estimate_or_diverge(oracle, w, M1, M2, rng, beta, pw, state.t + 1, float(state.alpha))  # Alg. 1 l.8
        H, viol = self._H(oracle, w, M3, beta)  # Alg. 1 l.9
        w_new, alpha, accepted = self.line_search(oracle, w, G, L0, float(state.alpha), M1, M2, beta, pw)  # l.10
        w_new, blown = self._guard(oracle, w_new, state)
        eta = self.eta_p / (_norm(H.gain) + self.lam)  # normalised ascent: |eta H| ~ eta_p
        p, support, floor = self.ascend(oracle, state, H, eta)  # Alg. 1 l.11
        fields = self.after_step(
            oracle, state, {**state.auto_fields(), "x": w_new, "alpha": alpha}, accepted, viol, _norm(G), L0
        )
        fields.update(blown)
        # DSZOGState(x=..., p=..., ..., **state.snapshot_fields()) then dataclasses.replace(new, **fields): the
        # snapshot carried over, the restoration's own fields at their defaults, the auto fields from
        # after_step; built by copying the fields (the frozen __init__ twice cost about 20 us per step)
        new = _copy_state(DSZOGState, state, fields, p=p, p_support=support, p_floor=floor, t=state.t + 1)
        return self.snapshot(oracle, new, rng) if self.snapshot_due(new) else new

    @staticmethod
    def dense_p(state: DSZOGState) -> Array:
        return state.p if state.p_support is None else densify(state.p_support, state.p, state.p_floor, state.m)

    def outputs(self, state: DSZOGState) -> dict[str, Array]:
        """``x``, ``p`` (see :func:`_p_outputs`: the sparse form above :data:`DENSE_P_MAX` constraints)
        and the restoration's figures."""
        return {"x": state.x, **_p_outputs(state.p, state.p_support, state.p_floor, state.m), **self._restoration_outputs(state)}


# ====================================================================== ADSZOG
@dataclass(frozen=True)
class ADSZOGState(_RestorationState):
    """What ADSZOG carries: ``w``, ``p``, the moving averages ``z_w``, ``z_p``; ``t`` counts steps.

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


@dataclass(frozen=True)
class ADSZOG(_PenaltyMinimax):
    """ADSZOG: DSZOG with exponential moving averages and adaptive steps.

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

    Defaults (``steps="auto"``): l.5 becomes a normalised step ``alpha z_w / ||z_w||`` with
    backtracking on the penalised batch value, l.6 a step of length ``eta_p`` along ``z_p / ||z_p||``,
    with penalty continuation and a final restoration + KKT test (see :class:`_PenaltyMinimax` and
    ``docs/constrained-user-problems.md``); ``steps="paper"`` runs the box as written.

    ``p_form``: ``"dense"`` keeps ``p`` and ``z_p`` as ``m``-vectors; ``"sparse"`` keeps them in
    the floor + support form (:class:`~zoframe_constrained.simplex.PZ`): the entries that no
    positive gain of ``M3`` has touched share one value of ``p`` and one of ``z_p``, which the
    projection, the averaging and the moving average all treat alike, so a step costs
    ``O(|support| + |M|)`` and gives the same iterates as the dense form up to rounding. The
    support holds the entries touched within the memory of the averages (about
    ``log(1e-300) / log(1 - min(a, b))`` steps); when it exceeds ``m / 4`` the state switches to
    the dense form (exactly the same values). ``"auto"``: sparse from ``m >= 10000``. Every 16
    steps the entries about to turn subnormal are zeroed (:meth:`flush_threshold`).

    Ending feasible: ``restore_after``, ``violation_tol``, ``restore_sample`` as for DSZOG
    (:meth:`restore`).
    """

    a: float = param(0.9, symbol="a", doc="averaging weight of the projected point, in (0, 1)")
    b: float = param(0.9, symbol="b", doc="weight of the new estimate in the moving averages, in (0, 1)")
    c: float = param(1e-8, symbol="c", doc="constant in the adaptive denominator sqrt(||z||) + c")
    p_form: PForm = param("auto", doc="storage of p and z_p: 'auto', 'dense' or 'sparse'")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_open_unit("a", self.a, "a")
        check_open_unit("b", self.b, "b")
        check_positive("c", self.c, "c")
        if self.p_form not in ("auto", "dense", "sparse"):
            raise InvalidParameterError(f"p_form must be 'auto', 'dense' or 'sparse', got {self.p_form!r}")

    def init(self, oracle: CountingOracle, x0: Array, rng: np.random.Generator) -> ADSZOGState:
        m = oracle.m
        w = np.array(x0, dtype=np.float64, copy=True)  # Alg. 1 l.1
        box = oracle.feasible_set
        if box is not None:
            w = np.asarray(box.project(w), dtype=np.float64)
        p, c0 = self._p_star(oracle, w)  # Alg. 1 l.2
        if self.p_form == "sparse" or (self.p_form == "auto" and m >= SPARSE_AUTO_M):
            support, values, floor = sparsify(p)
            pz = PZ(values, np.zeros_like(values), support, floor, 0.0, m)
        else:
            pz = PZ(p, np.zeros(m), None, 0.0, 0.0, m)
        if self.auto:  # l.3 happens in the first step (the estimates are taken where the step starts)
            st = self._state(w, pz, np.zeros_like(w), 0)
            st = dataclasses.replace(st, beta=self.first_beta(oracle, w, c0, rng), alpha=self.first_length(w, oracle))
            return self.small_start(oracle, st)
        M1, M3 = self.batches(oracle, rng)
        z_w = self.G_L(oracle, w, M1, pz_sample(pz, rng.random(self.sizes(oracle)[1])), rng)  # Alg. 1 l.3
        pz = pz_ema(pz, self.H(oracle, w, M3), 1.0)  # Alg. 1 l.3: z_p = H(w_1, p_1)
        return self._state(w, pz, z_w, 0)

    def step(self, oracle: CountingOracle, state: ADSZOGState, rng: np.random.Generator) -> ADSZOGState:
        if state.precision is not None:
            return self.precision_step(oracle, state, rng)
        if self.restoring(state):
            return self.restore(oracle, state, rng)
        if self.auto:
            return self._auto_step(oracle, state, rng)
        a, b, c = self.a, self.b, self.c
        pz = state.pz()
        w = _diverged(state.x - (self.eta_w / (math.sqrt(_norm(state.z_w)) + c)) * state.z_w, self, state.t + 1)  # l.5
        box = oracle.feasible_set
        if box is not None:
            w = np.asarray(box.project(w), dtype=np.float64)
        pz = pz_project_average(pz, self.eta_p / (math.sqrt(pz.norm_z()) + c), a)  # Alg. 1 l.6-7
        M1, M3 = self.batches(oracle, rng)  # Alg. 1 l.9, l.11
        M2 = pz_sample(pz, rng.random(self.sizes(oracle)[1]))  # Alg. 1 l.10
        G = self.G_L(oracle, w, M1, M2, rng)  # Alg. 1 l.12 (l.8: directions drawn here)
        H = self.H(oracle, w, M3)  # Alg. 1 l.13
        z_w = (1.0 - b) * state.z_w + b * G  # Alg. 1 l.14
        pz = pz_ema(pz, H, b)  # Alg. 1 l.15
        t = state.t + 1
        if t % _FLUSH_EVERY == 0:  # p and z_p are this step's own arrays (l.7 and l.15 made them): no copies
            pz = pz_flush(pz, self.flush_threshold(), overwrite=True)
        new = self._state(w, pz, z_w, t, state)
        return self.snapshot(oracle, new, rng) if self.snapshot_due(new) else new

    def _auto_step(self, oracle: CountingOracle, state: ADSZOGState, rng: np.random.Generator) -> ADSZOGState:
        """Alg. 1 with ``steps="auto"``, one step from ``w_t`` (the estimates of l.12-15 at ``w_t``, then the
        moves of l.5-7): l.5 is a normalised step along ``-z_w`` with backtracking on the penalised batch
        value at ``w_t``, l.6 a step of length ``eta_p`` along ``z_p / |z_p|``; then :meth:`after_step`."""
        a, b = self.a, self.b
        w = state.x
        beta = float(state.beta)
        first = state.t == 0
        pz = state.pz()
        M1, M3 = self.batches(oracle, rng)  # Alg. 1 l.9, l.11
        pw = pz.dense_p() if self.exact_p(oracle) else None
        M2 = np.arange(oracle.m, dtype=np.intp) if pw is not None else pz_sample(pz, rng.random(self.sizes(oracle)[1]))
        G, L0 = self._estimate_or_diverge(oracle, w, M1, M2, rng, beta, pw, state.t + 1, float(state.alpha))  # Alg. 1 l.12
        H, viol = self._H(oracle, w, M3, beta)  # Alg. 1 l.13
        z_w = G if first else (1.0 - b) * state.z_w + b * G  # Alg. 1 l.3 / l.14
        pz = pz_ema(pz, H, 1.0 if first else b)  # Alg. 1 l.3 / l.15
        w_new, alpha, accepted = self.line_search(oracle, w, z_w, L0, float(state.alpha), M1, M2, beta, pw)  # l.5
        w_new, blown = self._guard(oracle, w_new, state)
        pz = pz_project_average(pz, self.eta_p / (pz.norm_z() + self.lam), a)  # Alg. 1 l.6 (normalised), l.7
        t = state.t + 1
        if t % _FLUSH_EVERY == 0:
            pz = pz_flush(pz, self.flush_threshold())
        fields = self.after_step(
            oracle, state, {**state.auto_fields(), "x": w_new, "alpha": alpha}, accepted, viol, _norm(G), L0
        )
        fields.update(blown)
        new = _copy_state(ADSZOGState, self._state(fields.pop("x"), pz, z_w, t, state), fields)
        return self.snapshot(oracle, new, rng) if self.snapshot_due(new) else new

    def _state(self, w: Array, pz: PZ, z_w: Array, t: int, prev: ADSZOGState | None = None) -> ADSZOGState:
        if pz.support is not None and pz.support.shape[0] > pz.m // 4:  # no longer sparse: go dense
            pz = PZ(pz.dense_p(), densify(pz.support, pz.z, pz.z_floor, pz.m), None, 0.0, 0.0, pz.m)
        if prev is None:
            return ADSZOGState(
                x=w, p=pz.p, z_w=z_w, z_p=pz.z, t=t, p_support=pz.support, p_floor=pz.p_floor, z_floor=pz.z_floor,
                m=pz.m,
            )  # fmt: skip
        # the snapshot and auto fields carried over, the restoration's own fields at their defaults: the
        # same state as the keyword constructor, built by copying prev's fields (the frozen dataclass's
        # __init__ with 32 keywords cost about 7 us per step, this about 1.5 us)
        return _copy_state(
            ADSZOGState, prev, {}, x=w, p=pz.p, z_w=z_w, z_p=pz.z, t=t, p_support=pz.support, p_floor=pz.p_floor,
            z_floor=pz.z_floor, m=pz.m,
        )  # fmt: skip

    def flush_threshold(self) -> float:
        """Entries of ``p`` and ``z_p`` below this are zeroed every 16 steps.

        Between two flushes an entry shrinks at most by ``min(1-a, 1-b)^16`` (pure decay), so
        entries below ``FLUSH / min(1-a, 1-b)^16`` (capped at 1e-200) would turn subnormal before
        the next flush; the mass lost is below ``m * 1e-200``.
        """
        decay = min(1.0 - self.a, 1.0 - self.b) ** _FLUSH_EVERY
        return min(FLUSH / decay, 1e-200) if decay > 0 else 1e-200

    def outputs(self, state: ADSZOGState) -> dict[str, Array]:
        """``x``, ``p`` (see :func:`_p_outputs`: the sparse form above :data:`DENSE_P_MAX` constraints)
        and the restoration's figures."""
        return {"x": state.x, **_p_outputs(state.p, state.p_support, state.p_floor, state.m), **self._restoration_outputs(state)}
