"""Zeroth-order stochastic ADMM for nonconvex nonsmooth composite problems, and its baselines.

Huang, Gao, Chen & Huang, *Zeroth-Order Stochastic Alternating Direction Method of Multipliers for
Nonconvex Nonsmooth Optimization*, IJCAI 2019 (``papers/zo-svrg-saga-admm-ijcai2019.txt``):

``min_{x, y_1..y_k} (1/n) sum_i f_i(x) + sum_j psi_j(y_j)  s.t.  A x + sum_j B_j y_j = c``.

Six solvers, each a :class:`~zoframe.phases.PhasedSolver` whose algorithm box is one method,
``box`` (one iteration, line by line, ``# Alg. 1 l.8``), written against a step rule ``k``
(:mod:`zoframe_admm.stochastic`): ``k.estimate`` (CooSGE, eq. 4, ONE batched oracle call of ``2 d``
rows per base point), ``k.y_update``, ``k.x_update``, ``k.dual_update`` (the closed forms of
:mod:`zoframe_admm.coupling`) or ``k.prox_step``:

* ``zo-svrg-admm`` -- Algorithm 1 (SVRG estimator, snapshot every ``m`` inner steps);
* ``zo-saga-admm`` -- Algorithm 2 (SAGA table of per-sample estimates);
* ``zo-admm`` -- iteration (5) with the full estimate ``(1/n) sum_i grad f_i`` at every step;
* ``zo-sgd-admm`` -- iteration (5) with a plain mini-batch estimate (no variance reduction);
* ``zo-prox-svrg``, ``zo-prox-saga`` -- ZO-ProxSVRG / ZO-ProxSAGA of Huang, Gu, Huo, Chen & Huang
  (AAAI 2019): proximal steps on ``f(x) + sum_j psi_j(y_j(x))`` with no splitting, where the
  constraint defines ``y(x) = M x + e``; the prox of ``psi(M x + e)`` is an inner dual FISTA
  solve of ``inner_iters`` steps (warm-started), or the penalty's own prox when ``M = I``.

``steps="paper"``: the boxes with the papers' fixed ``eta``, ``rho``, ``r``, ``r_j`` and
``mu_t = 1/(d sqrt(t))``, bit for bit as published, run to the budget (one phase; the divergence
test after every step). ``steps="auto"`` (default): the same boxes with the step, the penalty and the
difference steps chosen from the problem (:mod:`zoframe_admm.stochastic`), the stopping rule on the
primal and dual residuals (``eps_abs``, ``eps_rel``; :mod:`zoframe_admm.residuals`) and, where the
full smooth part is affordable, a deterministic refinement to the tolerance
(:mod:`zoframe_admm.refine`). A run that runs away ends DIVERGED in either mode.

Outputs: ``x``, ``y0`` .. ``y{k-1}`` and ``lam`` (for the proximal baselines ``y_j = M_j x + e_j`` and
``lam = (B^+)^T u`` from the dual ``u`` of the last prox, so that Definition 1 applies to all six).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
import dataclasses
from dataclasses import dataclass
import math
from typing import Any, ClassVar, Literal, cast

import numpy as np

from zoframe.errors import InvalidParameterError
from zoframe.oracle import CountingOracle
from zoframe.phases import Phase, PhasedSolver, Runaway, check_divergence_limit
from zoframe.protocols import Array, IntArray
from zoframe.solver import check_int, check_positive
from zoframe.specs import param
from zoframe_admm.coupling import ProxMap, admm_constants, check_coupling, prox_map
from zoframe_admm.refine import RefinePhase
from zoframe_admm.residuals import Tolerance, check_tolerances
from zoframe_admm.stochastic import StochasticPhase

__all__ = [
    "ZOADMM",
    "ZOSAGAADMM",
    "ZOSGDADMM",
    "ZOSVRGADMM",
    "ADMMState",
    "ProxSAGAState",
    "ProxSVRGState",
    "SAGAADMMState",
    "SVRGADMMState",
    "ZOProxSAGA",
    "ZOProxSVRG",
]

COMPOSITE = frozenset({"composite"})
StepMode = Literal["auto", "paper"]
RefineMode = Literal["auto", "always", "never"]
#: refine="auto": the largest cost of one central-difference gradient of the full sum (2 d n evaluations)
#: for which the refinement runs without max_calls; with max_calls, at most 1/20 of it
REFINE_LIMIT = 10_000_000
#: refine="auto": start the refinement from the Hessian by differences up to this dimension (and this cost, as above)
HESSIAN_DIM = 400
HESSIAN_LIMIT = 200_000_000
#: the stochastic phase hands over to the refinement below this relative residual
SWITCH_REL = 1e-3
#: ... or when it has spent this share of what the refinement's first iteration costs (after one pass over the data;
#: benchmarks/composite_suite.py: shares 1, 0.25 and 0 gave median evaluations to 1e-6 of 104k, 73k, 73k on lasso)
SWITCH_SHARE = 0.25


# --------------------------------------------------------------------------- states
@dataclass(frozen=True)
class ADMMState:
    """``(x_t, y_[k]^t, lam_t)``, the iteration counter ``t`` and the constants ``r``, ``r_j``."""

    x: Array
    y: tuple[Array, ...]
    lam: Array
    t: int
    r: float
    r_y: Array


@dataclass(frozen=True)
class SVRGADMMState(ADMMState):
    """Algorithm 1 also carries the snapshot ``x~^s``, its full estimate and the inner index."""

    x_snap: Array
    g_snap: Array
    inner: int


@dataclass(frozen=True)
class SAGAADMMState(ADMMState):
    """Algorithm 2 also carries the table ``grad f_i(z_i)`` (``(n, d)``) and its mean ``phi``.

    The table is updated IN PLACE by ``step`` (copying ``n x d`` numbers every iteration would cost
    more than the iteration): a state is consumed by the step that follows it.
    """

    table: Array
    phi: Array


@dataclass(frozen=True)
class ProxSVRGState:
    """ZO-ProxSVRG: ``x_t``, snapshot, its full estimate, dual ``u`` of the last prox, counters.

    ``M, e, P, sizes, identity, lip`` are constants of the coupling (``y = M x + e``,
    ``lam = P^T u``), computed once in ``init`` so that ``step`` never refactorises a matrix.
    """

    x: Array
    u: Array
    t: int
    x_snap: Array
    g_snap: Array
    inner: int
    M: Array
    e: Array
    P: Array
    sizes: Array
    identity: bool
    lip: float


@dataclass(frozen=True)
class ProxSAGAState:
    """ZO-ProxSAGA: ``x_t``, table (updated in place), ``phi``, dual ``u`` of the last prox, constants."""

    x: Array
    u: Array
    t: int
    table: Array
    phi: Array
    M: Array
    e: Array
    P: Array
    sizes: Array
    identity: bool
    lip: float


class _Runaway(Runaway):
    """The divergence test without ``lam``: the multiplier is in the units of the gradient, not of ``x``
    (the iterate and the blocks are tested, and the multiplier follows them)."""

    def check(self, outputs: Mapping[str, Array], value: float, x0_scale: float, f_start: float) -> str | None:
        return super().check({k: v for k, v in outputs.items() if k != "lam"}, value, x0_scale, f_start)


# --------------------------------------------------------------------------- common base
@dataclass(frozen=True)
class _ZOBase(PhasedSolver):
    problem_kinds: ClassVar[frozenset[str]] = COMPOSITE
    #: the proximal baselines: no splitting, no penalty parameter
    no_split: ClassVar[bool] = False
    #: the estimate's variance does not vanish at the solution (no variance reduction): a stall is its noise
    persistent_noise: ClassVar[bool] = False

    eta: float = param(0.5, symbol="eta", doc="steps='paper': step size of the linearised x-update (prox step for the "
                       "baselines); ignored by steps='auto'")
    b: int = param(20, symbol="b", doc="mini-batch size, drawn uniformly with replacement (paper: 20)")
    mu: float | None = param(None, symbol="mu", doc="CooSGE radius; None: mu_t = 1/(d sqrt(t)) as in the paper "
                             "(steps='paper') or per-coordinate steps from the variables' scale and the values' noise "
                             "(steps='auto')")
    steps: StepMode = param("auto", doc="'auto': steps, penalty and difference steps from the problem, residual "
                            "stopping rule and refinement; 'paper': the papers' fixed steps, run to the budget")
    eps_abs: float = param(0.0, symbol="eps_abs", doc="steps='auto': absolute tolerance of the primal residual (units "
                           "of c) and of the dual residual (units of grad f)")
    eps_rel: float = param(1e-9, symbol="eps_rel", doc="steps='auto': relative tolerance of the residuals, against "
                           "max(|A x|, |B y|, |c|) and max(|grad f|, |A^T lam|, |B^T lam|)")
    refine: RefineMode = param("auto", doc="steps='auto': the deterministic refinement after the stochastic phase: "
                               "'auto' (when a full-sum gradient costs at most 1e7 evaluations, or 1/20 of max_calls), "
                               "'always' or 'never'")
    divergence_limit: float = param(1e8, doc="a run whose iterate grows beyond this factor of the starting point's scale "
                                    "(or whose value estimate grows by it) ends DIVERGED")

    def __post_init__(self) -> None:
        check_positive("eta", self.eta, "eta")
        check_int("b", self.b)
        if self.mu is not None:
            check_positive("mu", self.mu, "mu")
        if self.steps not in ("auto", "paper"):
            raise InvalidParameterError(f"steps must be 'auto' or 'paper', got {self.steps!r}")
        if self.refine not in ("auto", "always", "never"):
            raise InvalidParameterError(f"refine must be 'auto', 'always' or 'never', got {self.refine!r}")
        check_tolerances(self.eps_abs, self.eps_rel)
        check_divergence_limit(self.divergence_limit)

    @property
    def runaway(self) -> Runaway:
        return _Runaway(float(self.divergence_limit))

    def _mu(self, oracle: CountingOracle, t: int) -> float:
        """``mu_t = 1 / (d sqrt(t))`` with ``t`` counted from 1 (section 6), or the fixed ``mu``."""
        return float(self.mu) if self.mu is not None else 1.0 / (oracle.dim * math.sqrt(t + 1.0))

    def _batch(self, oracle: CountingOracle, rng: np.random.Generator) -> IntArray:
        """A mini-batch of ``b`` component indices, uniformly with replacement."""
        out: IntArray = rng.integers(0, oracle.n, size=self.b).astype(np.intp)
        return out

    # ---- what the phases need from each algorithm
    def epoch(self, oracle: CountingOracle) -> int:
        """Steps of one pass over the data (``ceil(n / b)``)."""
        return max(1, math.ceil(oracle.n / self.b))

    def window(self, oracle: CountingOracle) -> int:
        """Consecutive steps that must meet the tolerances when no step's estimate is the full sum."""
        return self.epoch(oracle)

    def full_estimate(self, st: Any) -> bool:
        """Whether the next step's estimate is the full sum (its residuals then count alone)."""
        return False

    def begin(self, oracle: CountingOracle, x0: Array, k: Any, rng: np.random.Generator) -> Any:
        """The algorithm's initialisation (its box's first lines)."""
        raise NotImplementedError

    def box(self, oracle: CountingOracle, st: Any, k: Any, rng: np.random.Generator) -> Any:
        """One iteration of the algorithm's box with the step rule ``k``."""
        raise NotImplementedError

    def alg_outputs(self, st: Any) -> Mapping[str, Array]:
        raise NotImplementedError

    # ---- the phases
    def _refine_costs(self, oracle: CountingOracle) -> tuple[bool, bool, int]:
        """``(refine, hessian, cost of the refinement's first iteration)``."""
        d, n = oracle.dim, oracle.n
        # the whole budget, not what is left of it: a run resumed from a checkpoint decides as it did at its start
        remaining = oracle.max_calls
        grad_cost = 2 * d * n
        hess_cost = (d * (d - 1) // 2 + 2 * d + 1 + 7) * n
        if self.refine == "never":
            return False, False, 0
        cap = REFINE_LIMIT if remaining is None else remaining / 20
        on = self.refine == "always" or grad_cost <= cap
        hcap = HESSIAN_LIMIT if remaining is None else remaining / 4
        hessian = d <= HESSIAN_DIM and hess_cost <= hcap
        first = int(SWITCH_SHARE * (hess_cost if hessian else (2 * d + 8) * n))
        return on, hessian, first

    def phases(self, oracle: CountingOracle) -> Sequence[Phase]:
        tol = Tolerance(float(self.eps_abs), float(self.eps_rel))
        if self.steps == "paper":
            return cast(Sequence[Phase], (StochasticPhase("paper's iteration", self, "paper", tol, False, SWITCH_REL, 0, 1, 1),))
        refine, hessian, first = self._refine_costs(oracle)
        stoch = StochasticPhase("stochastic phase", self, "auto", tol, refine, SWITCH_REL, first, self.window(oracle),
                                self.epoch(oracle))
        # frozen dataclasses: read-only ``name``, which the Phase protocol's plain attribute does not express
        return cast(Sequence[Phase], (stoch, RefinePhase(tol, hessian)) if refine else (stoch,))

    def validate(self, oracle: CountingOracle) -> None:
        check_coupling(oracle, getattr(self, "rank_check", "ignore"))

    def init(self, oracle: CountingOracle, x0: Array, rng: np.random.Generator) -> Any:
        """The first phase's start. With steps='auto' the divergence test's scale is the variables' own (the
        probe's natural scale, or ``|x0|_inf`` when larger) instead of ``max(1, |x0|_inf)``: a problem stated in
        small units runs away at the same point of its own units as in large ones."""
        st = super().init(oracle, x0, rng)
        natural = float(getattr(getattr(st.inner, "rule", None), "natural", 0.0))
        if self.steps == "auto" and natural > 0:
            st = dataclasses.replace(st, x0_scale=max(float(np.abs(x0).max(initial=0.0)), natural))
        return st

    def step(self, oracle: CountingOracle, state: Any, rng: np.random.Generator) -> Any:
        """One step of the running phase; a state whose run has ended (a phase stopped it) steps to itself, so
        that a run resumed from the checkpoint of a finished run ends where it ended."""
        if state.stop:
            return state
        return super().step(oracle, state, rng)

    def trace_row(self, state: Any) -> dict[str, float]:
        """The ``phase`` column (steps='auto'; with the papers' single phase there is nothing to tell apart)."""
        return {} if self.steps == "paper" else super().trace_row(state)

    def final_notes(self, oracle: CountingOracle, state: Any) -> list[str]:
        """The phases of the run, their iterations, evaluations and hand-overs (steps='auto')."""
        return [] if self.steps == "paper" else super().final_notes(oracle, state)


@dataclass(frozen=True)
class _ADMMBase(_ZOBase):
    rho: float = param(1.0, symbol="rho", doc="steps='paper': penalty parameter of the augmented Lagrangian "
                       "(steps='auto' balances it)")
    r: float | None = param(None, symbol="r", doc="steps='paper': G = r I - rho eta A^T A; None: rho eta sigma_max(A^T A) "
                            "+ 1.01")
    r_y: float | None = param(None, symbol="r_j", doc="steps='paper': H_j = r_j I - rho B_j^T B_j; None: rho "
                              "sigma_max(B_j^T B_j) + 1.01")
    rank_check: str = param("warn", doc="A not of full row rank (Assumption 4): 'error', 'warn' (steps='paper' only) or "
                            "'ignore'")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive("rho", self.rho, "rho")
        if self.r is not None:
            check_positive("r", self.r, "r")
        if self.r_y is not None:
            check_positive("r_y", self.r_y, "r_j")
        if self.rank_check not in ("error", "warn", "ignore"):
            raise InvalidParameterError(f"rank_check must be 'error', 'warn' or 'ignore', got {self.rank_check!r}")

    def validate(self, oracle: CountingOracle) -> None:
        # Assumption 4 is the papers' theorem's: steps='auto' does not warn about it (its answer's guarantee is
        # the stopping rule and the certificate), but refuses a rank-deficient A when asked to
        rank = self.rank_check if self.steps == "paper" or self.rank_check == "error" else "ignore"
        check_coupling(oracle, rank)
        admm_constants(oracle, self.rho, self.eta, self.r, self.r_y)

    def _start(self, oracle: CountingOracle, x0: Array) -> dict[str, Any]:
        r, r_y = admm_constants(oracle, self.rho, self.eta, self.r, self.r_y)
        A = oracle.A
        if A is None:  # pragma: no cover - excluded by validate
            raise InvalidParameterError("composite problem without A")
        return {
            "x": np.array(x0, dtype=np.float64, copy=True),
            "y": tuple(np.array(v, dtype=np.float64, copy=True) for v in oracle.y0),
            "lam": np.zeros(A.shape[0]),
            "t": 0,
            "r": r,
            "r_y": r_y,
        }

    def alg_outputs(self, st: Any) -> Mapping[str, Array]:
        out: dict[str, Array] = {"x": st.x, "lam": st.lam}
        for j, yj in enumerate(st.y):
            out[f"y{j}"] = yj
        return out


def _alg(state: Any) -> Any:
    """The algorithm's box state inside a phased state (steps='paper' has one phase)."""
    return state.inner.alg


# --------------------------------------------------------------------------- Algorithm 1
class _SVRGEpochs:
    """The epochs and the variance-reduced estimate shared by ZO-SVRG-ADMM (IJCAI 2019, Algorithm 1) and ZO-ProxSVRG:
    ``m`` inner iterations per snapshot (``ceil(n / b)`` by default), the snapshot's full estimate at ``t = 0``.

    Mixed into :class:`ZOSVRGADMM` and :class:`ZOProxSVRG`, whose dataclass fields ``m`` and ``b`` it reads and whose
    base supplies ``_batch``."""

    m: int | None
    b: int

    def _m(self, oracle: CountingOracle) -> int:
        return int(self.m) if self.m is not None else max(1, math.ceil(oracle.n / self.b))

    def epoch(self, oracle: CountingOracle) -> int:
        return self._m(oracle)

    def window(self, oracle: CountingOracle) -> int:
        return 1

    def full_estimate(self, st: Any) -> bool:
        return bool(st.inner == 0)

    def calls_per_step(self, oracle: CountingOracle, state: Any) -> int:
        """steps='paper': ``2 d n`` at the start of an epoch (the snapshot), else ``2 * 2 d b`` (two base points)."""
        return 2 * oracle.dim * oracle.n if _alg(state).inner == 0 else 4 * oracle.dim * self.b

    def _svrg_gradient(self, oracle: CountingOracle, st: Any, k: Any, rng: np.random.Generator) -> tuple[Array, Array, Array]:
        """``(g, x~, grad^ f(x~))``: Alg. 1 l.3-7 (ZO-ProxSVRG l.1-3). At ``t = 0`` a new epoch: ``x~ = x_t`` and its
        full estimate (``2 d n`` calls), where the mini-batch terms of l.7 cancel (the batch is still drawn, to keep
        the box's random stream); else ``g = grad^ f_I(x_t) - grad^ f_I(x~) + grad^ f(x~)`` in one call."""
        x_snap, g_snap = st.x_snap, st.g_snap
        if st.inner == 0:  # Alg. 1 l.3-4: new epoch, x~ = x_0^s and its full estimate
            x_snap = st.x
            g_snap = k.estimate(oracle, x_snap, None, rng, "snapshot").grad  # Alg. 1 l.4
            rng.integers(0, oracle.n, size=self.b)  # Alg. 1 l.6 (drawn to keep the random stream of the box)
            return g_snap, x_snap, g_snap  # Alg. 1 l.7 with x_t = x~: the mini-batch terms cancel
        idx = self._batch(oracle, rng)  # type: ignore[attr-defined]  # Alg. 1 l.6 (the solver's base)
        est = k.estimate(oracle, np.stack([st.x, x_snap]), idx, rng, "estimate").grad  # Alg. 1 l.7 (one call)
        return est[0] - est[1] + g_snap, x_snap, g_snap  # Alg. 1 l.7


@dataclass(frozen=True)
class ZOSVRGADMM(_SVRGEpochs, _ADMMBase):
    """ZO-SVRG-ADMM: Algorithm 1 of Huang, Gao, Chen & Huang (IJCAI 2019).

    One ``step`` is one inner iteration ``t`` of epoch ``s`` (:meth:`box`)::

        l.4   at t = 0: snapshot x~ = x_t and grad^ f(x~) = (1/n) sum_i grad^ f_i(x~)   (2dn calls)
        l.6   I_t: b indices uniformly with replacement
        l.7   g = grad^ f_I(x_t) - grad^ f_I(x~) + grad^ f(x~)    (both at once: P = 2, 4db calls)
        l.8   y_j = prox_{psi_j/r_j}(y_j - (rho B_j^T res - B_j^T lam) / r_j), j = 1..k
        l.9   x = x_t - (eta/r)(g - A^T lam + rho A^T (A x_t + sum_j B_j y_j - c))
        l.10  lam = lam - rho (A x + sum_j B_j y_j - c)
        l.12  after m inner steps the next epoch starts from the last iterate

    The smoothing radius of the snapshot: ``grad^ f(x~)`` (l.4) is estimated once per epoch with the
    radius ``mu_{t_s}`` of the epoch's first step and kept for the whole epoch, while both mini-batch
    terms of l.7, the control variate ``grad^ f_I(x~)`` included, use the current ``mu_t``. With the
    default decaying ``mu_t = 1 / (d sqrt(t))`` the correction ``grad^ f_I(x~) - grad^ f(x~)`` therefore
    compares estimates at two radii; its expectation over ``I`` is ``grad f_{mu_t}(x~) - grad f_{mu_{t_s}}(x~)``
    rather than 0 (exactly 0 for quadratics, where CooSGE is exact, and with a fixed ``mu``). The box
    writes one ``mu`` for both; we keep the snapshot's estimate rather than re-estimating it (``2 d n``
    calls) every step.

    At ``t = 0`` the two mini-batch terms of l.7 are evaluated at the same point and cancel exactly,
    so that estimate is skipped (same iterates, ``4db`` fewer calls). ``m`` defaults to
    ``ceil(n / b)`` (one pass over the data per epoch); Theorem 1 uses ``m = n^(1/3)``. The output is
    the last iterate (the paper's uniformly drawn iterate serves the analysis). With ``steps="auto"``
    the snapshot steps, whose estimate is the full sum, carry the stopping test.
    """

    m: int | None = param(None, symbol="m", doc="inner iterations per epoch; None: ceil(n / b)")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.m is not None:
            check_int("m", self.m)

    def begin(self, oracle: CountingOracle, x0: Array, k: Any, rng: np.random.Generator) -> SVRGADMMState:
        s = self._start(oracle, x0)  # Alg. 1 l.2
        return SVRGADMMState(**s, x_snap=s["x"].copy(), g_snap=np.zeros(oracle.dim), inner=0)

    def box(self, oracle: CountingOracle, st: SVRGADMMState, k: Any, rng: np.random.Generator) -> SVRGADMMState:
        g, x_snap, g_snap = self._svrg_gradient(oracle, st, k, rng)  # Alg. 1 l.3-7
        y = k.y_update(oracle, st.x, st.y, st.lam)  # Alg. 1 l.8: prox of psi_j / r_j
        x = k.x_update(oracle, st.x, y, st.lam, g)  # Alg. 1 l.9: argmin of (6)
        lam = k.dual_update(oracle, x, y, st.lam)  # Alg. 1 l.10: dual ascent
        inner = (st.inner + 1) % self._m(oracle)  # Alg. 1 l.5, l.12
        return SVRGADMMState(
            x=x, y=y, lam=lam, t=st.t + 1, r=st.r, r_y=st.r_y, x_snap=x_snap, g_snap=g_snap, inner=inner
        )


# --------------------------------------------------------------------------- Algorithm 2
@dataclass(frozen=True)
class ZOSAGAADMM(_ADMMBase):
    """ZO-SAGA-ADMM: Algorithm 2 of Huang, Gao, Chen & Huang (IJCAI 2019).

    ::

        l.2   z_i = x_0, phi = (1/n) sum_i grad^ f_i(z_i)             (init, 2dn calls)
        l.4   I_t: b indices uniformly with replacement
        l.5   g = (1/b) sum_{i in I} (grad^ f_i(x_t) - grad^ f_i(z_i)) + phi   (2db calls)
        l.6   y_j = prox_{psi_j/r_j}(...), j = 1..k
        l.7   x = x_t - (eta/r)(g - A^T lam + rho A^T (A x_t + sum_j B_j y_j - c))
        l.8   lam = lam - rho (A x + sum_j B_j y_j - c)
        l.9   z_i = x_t for i in I (the table stores grad^ f_i(z_i), not z_i)
        l.10  phi = phi - (1/n) sum_{i in I} (grad^ f_i(z_i^old) - grad^ f_i(x_t))

    l.9-10 run over the DISTINCT indices of ``I`` so that ``phi`` stays the exact mean of the table
    when the batch repeats an index.
    """

    def calls_per_step(self, oracle: CountingOracle) -> int:
        """steps='paper': ``2 d b``, one central-difference estimate per sampled component."""
        return 2 * oracle.dim * self.b

    def begin(self, oracle: CountingOracle, x0: Array, k: Any, rng: np.random.Generator) -> SAGAADMMState:
        s = self._start(oracle, x0)
        est = k.estimate(oracle, s["x"], None, rng, "snapshot", per_component=True)
        table = np.array(est.per_component, dtype=np.float64)  # Alg. 2 l.2: grad^ f_i(z_i^0), z_i^0 = x_0
        return SAGAADMMState(**s, table=table, phi=table.mean(axis=0))  # Alg. 2 l.2

    def box(self, oracle: CountingOracle, st: SAGAADMMState, k: Any, rng: np.random.Generator) -> SAGAADMMState:
        idx = self._batch(oracle, rng)  # Alg. 2 l.4
        comp = np.asarray(k.estimate(oracle, st.x, idx, rng, "estimate", per_component=True).per_component)
        g = (comp - st.table[idx]).mean(axis=0) + st.phi  # Alg. 2 l.5
        y = k.y_update(oracle, st.x, st.y, st.lam)  # Alg. 2 l.6
        x = k.x_update(oracle, st.x, y, st.lam, g)  # Alg. 2 l.7
        lam = k.dual_update(oracle, x, y, st.lam)  # Alg. 2 l.8
        uniq, first = np.unique(idx, return_index=True)
        phi = st.phi - (st.table[uniq] - comp[first]).sum(axis=0) / oracle.n  # Alg. 2 l.10
        st.table[uniq] = comp[first]  # Alg. 2 l.9: z_i = x_t for i in I (in place)
        return SAGAADMMState(x=x, y=y, lam=lam, t=st.t + 1, r=st.r, r_y=st.r_y, table=st.table, phi=phi)


# --------------------------------------------------------------------------- baselines (ADMM)
@dataclass(frozen=True)
class ZOADMM(_ADMMBase):
    """ZO-ADMM: iteration (5) of Huang, Gao, Chen & Huang (IJCAI 2019) with the full estimate.

    ::

        l.1  g = (1/n) sum_i grad^ f_i(x_t)     (CooSGE over all n components, 2dn calls)
        l.2  y_j = prox_{psi_j/r_j}(...), j = 1..k
        l.3  x = argmin of the linearised augmented Lagrangian (6)
        l.4  lam = lam - rho (A x + B y - c)

    ``b`` is not used (with steps='auto' every step's estimate is the full sum).
    """

    def epoch(self, oracle: CountingOracle) -> int:
        return 1

    def window(self, oracle: CountingOracle) -> int:
        return 1

    def full_estimate(self, st: ADMMState) -> bool:
        return True

    def calls_per_step(self, oracle: CountingOracle) -> int:
        """steps='paper': ``2 d n``, the full coordinate estimate."""
        return 2 * oracle.dim * oracle.n

    def begin(self, oracle: CountingOracle, x0: Array, k: Any, rng: np.random.Generator) -> ADMMState:
        return ADMMState(**self._start(oracle, x0))

    def box(self, oracle: CountingOracle, st: ADMMState, k: Any, rng: np.random.Generator) -> ADMMState:
        g = k.estimate(oracle, st.x, None, rng, "estimate").grad  # (5) l.1
        y = k.y_update(oracle, st.x, st.y, st.lam)  # (5) l.2
        x = k.x_update(oracle, st.x, y, st.lam, g)  # (5) l.3
        lam = k.dual_update(oracle, x, y, st.lam)  # (5) l.4
        return ADMMState(x=x, y=y, lam=lam, t=st.t + 1, r=st.r, r_y=st.r_y)


@dataclass(frozen=True)
class ZOSGDADMM(_ADMMBase):
    """ZO-SGD-ADMM: iteration (5) of Huang, Gao, Chen & Huang (IJCAI 2019), plain mini-batch estimate.

    ::

        l.1  I_t: b indices uniformly with replacement
        l.2  g = (1/b) sum_{i in I} grad^ f_i(x_t)   (2db calls, no variance reduction)
        l.3  y_j = prox_{psi_j/r_j}(...), j = 1..k
        l.4  x = argmin of (6);  l.5  lam = lam - rho (A x + B y - c)

    With steps='auto' and no refinement, a run whose residual stops halving ends NOISE_LIMITED: the
    estimate's variance does not vanish at the solution.
    """

    persistent_noise: ClassVar[bool] = True

    def calls_per_step(self, oracle: CountingOracle) -> int:
        """steps='paper': ``2 d b``."""
        return 2 * oracle.dim * self.b

    def begin(self, oracle: CountingOracle, x0: Array, k: Any, rng: np.random.Generator) -> ADMMState:
        return ADMMState(**self._start(oracle, x0))

    def box(self, oracle: CountingOracle, st: ADMMState, k: Any, rng: np.random.Generator) -> ADMMState:
        idx = self._batch(oracle, rng)  # l.1
        g = k.estimate(oracle, st.x, idx, rng, "estimate").grad  # l.2
        y = k.y_update(oracle, st.x, st.y, st.lam)  # l.3
        x = k.x_update(oracle, st.x, y, st.lam, g)  # l.4
        lam = k.dual_update(oracle, x, y, st.lam)  # l.5
        return ADMMState(x=x, y=y, lam=lam, t=st.t + 1, r=st.r, r_y=st.r_y)


# --------------------------------------------------------------------------- baselines (proximal)
@dataclass(frozen=True)
class _ProxBase(_ZOBase):
    no_split: ClassVar[bool] = True
    inner_iters: int = param(30, doc="dual FISTA steps of the inner prox solve when psi(M x + e) has no closed-form prox")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("inner_iters", self.inner_iters)

    def validate(self, oracle: CountingOracle) -> None:
        check_coupling(oracle, "ignore")  # no splitting: the rank of A plays no role
        prox_map(oracle)

    def _pm(self, st: Any) -> ProxMap:
        return ProxMap(M=st.M, e=st.e, P=st.P, sizes=tuple(int(v) for v in st.sizes),
                       identity=bool(st.identity), lipschitz=float(st.lip))

    def alg_outputs(self, st: Any) -> Mapping[str, Array]:
        y = st.M @ st.x + st.e
        out: dict[str, Array] = {"x": st.x, "lam": st.P.T @ st.u}
        for j, yj in enumerate(np.split(y, np.cumsum(st.sizes)[:-1])):
            out[f"y{j}"] = yj
        return out

    def _start(self, oracle: CountingOracle, x0: Array) -> dict[str, Any]:
        pm = prox_map(oracle)
        return {
            "x": np.array(x0, dtype=np.float64, copy=True),
            "u": np.zeros(pm.M.shape[0]),
            "t": 0,
            "M": pm.M,
            "e": pm.e,
            "P": pm.P,
            "sizes": np.array(pm.sizes, dtype=np.intp),
            "identity": pm.identity,
            "lip": pm.lipschitz,
        }

    def _carry(self, state: Any) -> dict[str, Any]:
        return {k: getattr(state, k) for k in ("M", "e", "P", "sizes", "identity", "lip")}


@dataclass(frozen=True)
class ZOProxSVRG(_SVRGEpochs, _ProxBase):
    """ZO-ProxSVRG with CooSGE: Huang, Gu, Huo, Chen & Huang (AAAI 2019), as compared in IJCAI 2019 section 6.

    ::

        l.1  at t = 0 of an epoch: x~ = x_t, grad^ f(x~) over all n (2dn calls)
        l.2  I_t: b indices with replacement
        l.3  g = grad^ f_I(x_t) - grad^ f_I(x~) + grad^ f(x~)  (P = 2, one call)
        l.4  x = prox_{eta h}(x_t - eta g),  h(x) = sum_j psi_j(M_j x + e_j)

    No splitting: ``y(x) = M x + e`` must be what the constraint defines. The prox of ``h`` is the
    penalty's own when ``M = I``; otherwise an inner dual FISTA solve of ``inner_iters`` steps,
    warm-started at the previous dual (stated, as the paper's baseline has no cheap prox here).
    """

    m: int | None = param(None, symbol="m", doc="inner iterations per epoch; None: ceil(n / b)")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.m is not None:
            check_int("m", self.m)

    def begin(self, oracle: CountingOracle, x0: Array, k: Any, rng: np.random.Generator) -> ProxSVRGState:
        s = self._start(oracle, x0)
        return ProxSVRGState(**s, x_snap=s["x"].copy(), g_snap=np.zeros(oracle.dim), inner=0)

    def box(self, oracle: CountingOracle, st: ProxSVRGState, k: Any, rng: np.random.Generator) -> ProxSVRGState:
        g, x_snap, g_snap = self._svrg_gradient(oracle, st, k, rng)  # l.1-3
        x, u = k.prox_step(oracle, st.x, st.u, g, self._pm(st))  # l.4
        return ProxSVRGState(
            x=x, u=u, t=st.t + 1, x_snap=x_snap, g_snap=g_snap, inner=(st.inner + 1) % self._m(oracle), **self._carry(st)
        )


@dataclass(frozen=True)
class ZOProxSAGA(_ProxBase):
    """ZO-ProxSAGA with CooSGE: Huang, Gu, Huo, Chen & Huang (AAAI 2019), as compared in IJCAI 2019 section 6.

    ::

        l.0  table_i = grad^ f_i(x_0), phi = mean (init, 2dn calls)
        l.1  I_t: b indices with replacement
        l.2  g = (1/b) sum_{i in I}(grad^ f_i(x_t) - table_i) + phi   (2db calls)
        l.3  x = prox_{eta h}(x_t - eta g)
        l.4  table_i = grad^ f_i(x_t), phi updated, for the distinct i in I

    The prox of ``h(x) = sum_j psi_j(M_j x + e_j)`` as in :class:`ZOProxSVRG`.
    """

    def calls_per_step(self, oracle: CountingOracle) -> int:
        """steps='paper': ``2 d b``."""
        return 2 * oracle.dim * self.b

    def begin(self, oracle: CountingOracle, x0: Array, k: Any, rng: np.random.Generator) -> ProxSAGAState:
        s = self._start(oracle, x0)
        est = k.estimate(oracle, s["x"], None, rng, "snapshot", per_component=True)
        table = np.array(est.per_component, dtype=np.float64)  # l.0
        return ProxSAGAState(**s, table=table, phi=table.mean(axis=0))

    def box(self, oracle: CountingOracle, st: ProxSAGAState, k: Any, rng: np.random.Generator) -> ProxSAGAState:
        idx = self._batch(oracle, rng)  # l.1
        comp = np.asarray(k.estimate(oracle, st.x, idx, rng, "estimate", per_component=True).per_component)
        g = (comp - st.table[idx]).mean(axis=0) + st.phi  # l.2
        x, u = k.prox_step(oracle, st.x, st.u, g, self._pm(st))  # l.3
        uniq, first = np.unique(idx, return_index=True)
        phi = st.phi - (st.table[uniq] - comp[first]).sum(axis=0) / oracle.n  # l.4
        st.table[uniq] = comp[first]  # l.4 (in place)
        return ProxSAGAState(x=x, u=u, t=st.t + 1, table=st.table, phi=phi, **self._carry(st))
