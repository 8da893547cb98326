"""DSZOG and ADSZOG: doubly stochastic zeroth-order gradient methods for heavily constrained problems.

Both solve ``min_w f0(w) = (1/n) sum_i l_i(w)`` s.t. ``f_j(w) <= 0, j = 1..m`` through the penalty
minimax over the simplex of constraints (ICML 2022, eq. 2; :mod:`zoframe_constrained.penalty`). Each is
a phased solver (:class:`zoframe.phases.PhasedSolver`): a run is a sequence of phases, each in its own
module, and this module holds the solvers' parameters and the rules that hand a run from one phase to
the next. The phases, with their codes in the trace's ``phase`` column (:data:`PHASES`):

0. the stochastic penalty phase: the papers' boxes (:class:`~zoframe_constrained.penalty.DSZOGPenalty`,
   :class:`~zoframe_constrained.penalty.ADSZOGPenalty`) with ``steps="paper"`` or ``steps="auto"``;
1. the restoration rounds (:class:`~zoframe_constrained.restoration.Restoration`);
2. the precision phase, a working-set SQP from function values
   (:class:`~zoframe_constrained.precision.PrecisionPhase`);
3. the precision phase from ``x0`` (the same phase, started at ``x0``).

The hand-over rules (:meth:`_PenaltyMinimax.after_penalty`, :meth:`~_PenaltyMinimax.after_restoration`,
:meth:`~_PenaltyMinimax.after_precision`; each phase's ``end`` asks them)::

    start        small problem or equality constraints (steps="auto")  -> 3, from x0
    penalty      stationary, its share of max_calls spent, the reserve of
                 the final restoration reached (steps="auto"), or
                 restore_after steps done                               -> 1
                 a blow-up with a feasible sample seen                  -> 2, from the best such sample
                 a blow-up without one                                  DIVERGED
    restoration  feasible or out of rounds, after a steps="auto" hand-over
                 (stationary, or more budget left than the reserve)     -> 2, with the last active set
                 feasible (restore_after / the reserve)                 MAX_ITER / BUDGET (no certificate)
                 out of rounds and infeasible                           FAILED
    precision    KKT test passed                                        CONVERGED (the certificate decides success)
                 stalled with more than a quarter of max_calls left
                 and no equality constraints                            -> 0, hand-back (penalty_share of what is left)
                 stalled / out of budget / diverged                     FAILED / BUDGET / DIVERGED

The certificate that decides ``success`` is zoframe's (:mod:`zoframe.certificate`), the same for every
solver.

Sources: Shi, Gao, Gu, *Gradient-free method for heavily constrained nonconvex optimization*,
ICML 2022 (Algorithm 1, with EMA and adaptive steps: ``adszog`` here) and the same authors' ICLR
2022 submission (Algorithm 1, plain: ``dszog``; Algorithm 2 = ADSZOG).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from zoframe.errors import IncompatibleProblemError, InvalidParameterError
from zoframe.estimators import CoordinateEstimator
from zoframe.oracle import CountingOracle
from zoframe.phases import End, Phase, PhasedSolver, PhaseEnd, Runaway
from zoframe.protocols import Array, Estimator
from zoframe.solver import check_batch, check_int, check_open_unit, check_positive
from zoframe.specs import param
from zoframe_constrained.ldp import least_distance_step
from zoframe_constrained.penalty import (
    _EPS,
    DEFAULT_BATCH,
    DENSE_P_MAX,
    SPARSE_AUTO_M,
    ADSZOGPenalty,
    ADSZOGState,
    DSZOGPenalty,
    DSZOGState,
    PenaltyFields,
    PenaltyPhase,
)
from zoframe_constrained.precision import (
    BUDGET,
    CONVERGED,
    DIVERGED,
    NOISE_LIMITED,
    RUNNING,
    STALLED,
    WHY_CRUMBS,
    WHY_NONFINITE,
    PrecisionPhase,
    PrecisionPhaseState,
    PrecisionSettings,
    describe,
    floor_words,
    noise_words,
)
from zoframe_constrained.restoration import Restoration, RestorationState, RestoreSettings

__all__ = [
    "ADSZOG", "DENSE_P_MAX", "DSZOG", "PHASES", "SPARSE_AUTO_M", "ADSZOGState", "DSZOGState", "least_distance_step",
]  # fmt: skip

#: the phases' names; their indices are the codes of the trace's ``phase`` column
PENALTY = "stochastic penalty phase"
RESTORATION = "restoration"
PRECISION = "precision phase"
FROM_X0 = "precision phase from x0 (small problem or equality constraints)"
#: the ``phase`` column of the trace (:meth:`zoframe.phases.PhasedSolver.trace_row`): code -> phase
PHASES: dict[int, str] = dict(enumerate((PENALTY, RESTORATION, PRECISION, FROM_X0)))

PForm = Literal["auto", "dense", "sparse"]
StepMode = Literal["auto", "paper"]

_STALL_TEXT = "no decrease of the merit along the QP step: four line searches in a row, the last ones with B reset"
_CRUMBS_TEXT = "progress by crumbs: the accepted steps cut below a tenth of the QP step, three times ten iterations in a row"


@dataclass(frozen=True)
class _PenaltyMinimax(PhasedSolver):
    """The parameters DSZOG and ADSZOG share, their phases and the hand-over rules between them.

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

    The phases test divergence themselves (the bound above, with its restart): :attr:`runaway` is ``None``.
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

    def estimator_for(self, oracle: CountingOracle) -> Estimator:
        """The gradient estimator: ``estimator``, else with ``steps="auto"`` central differences along the
        coordinates when they cost no more rows than the Gaussian one (``2 dim <= q + 1``), else
        ``gaussian(q, mu)``."""
        if self.estimator is None and self.auto and 2 * oracle.dim <= self.q + 1:
            return CoordinateEstimator(mu=self.mu)
        return self.gradient_estimator()


    # ------------------------------------------------------------------ the phases
    #: the penalty phase of the algorithm (its box)
    penalty_phase: ClassVar[type[PenaltyPhase]] = PenaltyPhase

    def phases(self, oracle: CountingOracle) -> Sequence[Phase]:
        """The penalty phase, the restoration, the precision phase and the precision phase from ``x0`` (in the order
        of their codes, :data:`PHASES`); every run starts in the penalty phase (which hands over at once on a small
        problem)."""
        return (
            self.penalty_phase(PENALTY, self), Restoration(RESTORATION, self), PrecisionPhase(PRECISION, self),
            PrecisionPhase(FROM_X0, self),
        )  # fmt: skip

    @property
    def runaway(self) -> Runaway | None:
        """``None``: the penalty phase tests ``|w|`` against ``mu / (64 eps)`` itself (with its restart from the best
        feasible sample), the precision phase against the same bound."""
        return None

    def sparse(self, m: int) -> bool:
        """Whether ``p`` is kept in the floor + support form (``p_form``; ``"auto"``: from ``m >= 10000``)."""
        form = getattr(self, "p_form", "auto")
        return form == "sparse" or (form == "auto" and m >= SPARSE_AUTO_M)

    def restore_settings(self) -> RestoreSettings:
        """The restoration rounds' parameters (``violation_tol``, ``restore_sample``, ``restore_batch``, ``restore_mu``,
        ``restore_rounds``)."""
        return RestoreSettings(
            tol=self.tol, sample=self.restore_sample, batch=self.restore_batch, mu=self.restore_mu, rounds=self.restore_rounds
        )

    def precision_settings(self) -> PrecisionSettings:
        """The precision phase's tolerances (``xtol``, ``ftol``, ``kkt_tol``, ``violation_tol``, ``working_set``)."""
        return PrecisionSettings(
            xtol=self.xtol, ftol=self.ftol, kkt_tol=self.kkt_tol, violation_tol=self.tol, working=self.working_set,
            limit=min(1e100, self.mu / (64.0 * _EPS)),
        )

    # ------------------------------------------------------------------ the budget rules
    def small(self, oracle: CountingOracle) -> bool:
        """``steps="auto"``: whether the precision phase runs from ``x0``: the problem is small enough,
        ``(n + m) * dim <= small_problem`` evaluations for a full pass's worth of coordinate differences, or it
        has equality constraints (``m_eq > 0``: the penalty phase takes inequalities only, the precision phase
        keeps the equalities in its working set, whatever the size)."""
        return self.auto and (oracle.m_eq > 0 or (oracle.n + oracle.m) * oracle.dim <= self.small_problem)

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

    def hands_back(self, oracle: CountingOracle) -> bool:
        """Whether a stalled precision phase hands back to the penalty phase: no equality constraints (the penalty
        phase takes inequalities only) and more than a quarter of ``max_calls`` left (always, without ``max_calls``)."""
        if oracle.m_eq:
            return False
        return oracle.max_calls is None or (oracle.remaining is not None and oracle.remaining > 0.25 * oracle.max_calls)

    # ------------------------------------------------------------------ the hand-over rules
    def after_penalty(self, oracle: CountingOracle, st: DSZOGState | ADSZOGState) -> PhaseEnd | None:
        """Where the run goes from the penalty phase (asked at its start and after each of its steps).

        A blow-up without a feasible sample ends the run ``DIVERGED`` (on the last finite iterate); one with a
        feasible sample goes to the precision phase from the best such sample. At the start, a small problem or
        one with equality constraints goes to the precision phase from ``x0``. The step rule's hand-over
        (stationary, the budget share or the reserve: ``restore_final``), or ``restore_after`` steps, go to the
        restoration.
        """
        if st.diverged:
            return PhaseEnd(End.DIVERGED, st.diverged)
        if st.blown:
            return PhaseEnd(End.NEXT, st.blown, to=PRECISION)
        if int(st.t) == 0 and not int(st.retries) and self.small(oracle):
            size = (oracle.n + oracle.m) * oracle.dim
            why = (
                f"equality constraints (m_eq = {oracle.m_eq}): precision phase from x0" if oracle.m_eq
                else f"small problem ((n + m) dim = {size} <= small_problem = {self.small_problem}): precision phase from x0"
            )  # fmt: skip
            return PhaseEnd(End.NEXT, why, to=FROM_X0)
        if st.restore_final:
            return PhaseEnd(End.NEXT, st.handover, to=RESTORATION)
        if self.restore_after is not None and int(st.t) >= self.restore_after:
            return PhaseEnd(End.NEXT, f"restore_after = {self.restore_after} steps done", to=RESTORATION)
        return None

    def after_restoration(self, oracle: CountingOracle, st: RestorationState) -> PhaseEnd | None:
        """Where the run goes from the restoration (asked after each round).

        After a hand-over of ``steps="auto"`` (``restore_final``) that was stationary, or with more budget left
        than the reserve: the precision phase, once the rounds reach ``violation_tol`` or run out (with the last
        round's active set). Otherwise a feasible point stops the run without a certificate (``MAX_ITER`` after
        ``restore_after`` steps, ``BUDGET`` on the reserve) and running out of rounds infeasible stops it
        ``FAILED``.
        """
        if st.rounds == 0:
            return None
        pen = st.penalty
        tol = self.tol
        done = st.violation <= tol or st.rounds >= self.restore_rounds
        if self.auto and pen.restore_final and (pen.stationary or not self.reserve_reached(oracle)) and done:
            why = (
                f"the penalty phase was stationary after {int(pen.t)} steps and the restoration reached max violation "
                f"{float(st.violation):.2g} in {st.rounds} round(s)" if pen.stationary else
                f"the penalty phase stopped after {int(pen.t)} steps (stationary but not within restore_band of the "
                f"feasible set) and the restoration reached max violation {float(st.violation):.2g} in {st.rounds} round(s)"
            )  # fmt: skip
            return PhaseEnd(End.NEXT, why, to=PRECISION)
        how = "full pass over all constraints" if st.checked == pen.m else f"sampled: {st.checked} constraints"
        if st.violation <= tol:
            text = f"feasible: max violation {st.violation:.3g} <= {tol:g} ({how}) after {st.rounds} restoration round(s)"
            if pen.restore_final:
                return PhaseEnd(End.BUDGET, f"{text}, on the budget reserve kept for the restoration; no stationarity certificate")
            return PhaseEnd(End.MAX_ITER, f"{text}, after restore_after={self.restore_after} steps; no stationarity certificate")
        if st.rounds >= self.restore_rounds:
            return PhaseEnd(
                End.FAILED,
                f"feasibility restoration failed: max violation {st.violation:.3g} > {tol:g} ({how}) after {st.rounds} rounds",
            )
        return None

    def after_precision(self, oracle: CountingOracle, st: PrecisionPhaseState) -> PhaseEnd | None:
        """Where the run goes from the precision phase (asked after each of its iterations).

        A stall hands back to the penalty phase while :meth:`hands_back` allows (it resumes from the phase's best
        feasible point, with a stronger penalty when there is none, and hands over again by the usual rules: its
        share of the budget is ``penalty_share`` of what is left, :meth:`handover_due`); otherwise the phase's end
        is the run's: ``CONVERGED`` when its KKT test passed, or at the rounding of the values (the certificate then
        decides ``success``), ``NOISE_LIMITED`` at the noise floor (the residual reached, the noise estimated, the
        best tolerance the values support), else ``DIVERGED``, ``BUDGET`` or ``FAILED`` with the best feasible point.
        A noise floor never hands back: the penalty phase's values are no less noisy.
        """
        ps = st.ps
        if ps.status == RUNNING:
            return None
        stall = _STALL_TEXT if ps.why != WHY_CRUMBS else _CRUMBS_TEXT
        if ps.why == WHY_NONFINITE:
            stall = "the difference points of a coordinate gave no finite value on either side, down to a step 1000 times shorter"
        if ps.status == STALLED and self.hands_back(oracle):
            return PhaseEnd(
                End.NEXT,
                f"the precision phase stalled ({stall}) after {ps.it} iteration(s) with more than a quarter of the "
                "budget left: handed back to the penalty phase from its best feasible point"
                + ("" if ps.best_x.shape[0] else " (none: where it stalled, with beta raised)"),
                to=PENALTY,
            )
        retries = int(st.penalty.retries)
        text = f"{describe(ps)}; switched after {ps.before} evaluations: {st.why}"
        if retries:
            text += f" ({retries} earlier stall(s) of the precision phase handed back to the penalty phase)"
        if ps.status == CONVERGED:
            if ps.kkt > self.kkt_tol:  # at the noise floor, where the noise is the rounding of the values
                return PhaseEnd(
                    End.CONVERGED,
                    f"converged at the rounding of the values ({floor_words(ps, self.kkt_tol)}; max violation over all m "
                    f"{ps.violation:.2g} <= {self.tol:g}) in the {text}",
                )
            return PhaseEnd(
                End.CONVERGED,
                f"stationarity test passed (KKT residual {ps.kkt:.2g} <= kkt_tol = {self.kkt_tol:g}, max violation over "
                f"all m {ps.violation:.2g} <= {self.tol:g}, step or predicted change below xtol / ftol or the noise) in "
                f"the {text}",
            )
        feasible = (
            f"returned: the best point seen with a max violation <= {self.tol:g} (full pass)" if ps.best_x.shape[0]
            else "no feasible point was seen"
        )  # fmt: skip
        if ps.status == NOISE_LIMITED:
            return PhaseEnd(
                End.NOISE_LIMITED,
                f"noise-limited: {floor_words(ps, self.kkt_tol)}; max violation over all m {ps.violation:.2g} at the "
                f"point returned; no stationarity certificate at kkt_tol; in the {text}",
            )
        if ps.status == DIVERGED:
            limit = self.precision_settings().limit
            return PhaseEnd(End.DIVERGED, f"the precision phase diverged (|x| beyond {limit:.3g}); {feasible}; {text}")
        if ps.status == BUDGET:
            return PhaseEnd(End.BUDGET, f"the budget left is below one precision iteration; no stationarity certificate; {feasible}; {text}")
        return PhaseEnd(
            End.FAILED,
            f"the precision phase stalled ({stall}); no stationarity certificate; {feasible}; {text}",
        )

    # ------------------------------------------------------------------ reports
    def outputs(self, state: Any) -> dict[str, Array]:
        """``x``, ``p`` (the penalty phase's, in every phase; the sparse form above :data:`DENSE_P_MAX` constraints)
        and the running phase's figures: the last feasible snapshot (``x_feasible``, ...) in the penalty phase and
        the restoration, the restoration's ``max_violation`` and ``violation_checked``, the precision phase's
        ``max_violation``, ``kkt_residual``, ``precision_iterations``, ``precision_evaluations``, ``working_set`` and
        ``switch_evaluations`` (read from the state alone)."""
        inner = state.inner
        if isinstance(inner, PrecisionPhaseState):
            return PrecisionPhase.outputs(inner)
        if isinstance(inner, RestorationState):
            return Restoration.outputs(inner)
        return PenaltyPhase.outputs(inner)

    @staticmethod
    def penalty_state(state: Any) -> Any:
        """The penalty phase's state of a run's ``state`` (the running phase's, or the one carried along)."""
        inner = state.inner
        return inner if isinstance(inner, PenaltyFields) else inner.penalty

    def final_notes(self, oracle: CountingOracle, state: Any) -> list[str]:
        """The phases of the run in order (:meth:`zoframe.phases.PhasedSolver.final_notes`: iterations, evaluations,
        how and why each ended), the evaluations by purpose (``init`` for the start, ``estimate`` and ``line search``
        for the penalty phase, ``restore``, ``precision``), the switch to the last precision phase and the hand-backs,
        for ``Result.notes``."""
        notes = super().final_notes(oracle, state)
        used = oracle.calls_by_purpose
        parts = [
            ("start", int(used.get("init", 0))),
            (PENALTY, int(used.get("estimate", 0)) + int(used.get("line search", 0))),
            (RESTORATION, int(used.get("restore", 0))),
            (PRECISION, int(used.get("precision", 0))),
        ]
        text = ", ".join(f"{name} {calls} evaluations" for name, calls in parts if calls)
        extra = [f"evaluations by purpose: {text}; final phase: {PHASES[int(state.phase)]}"] if text else []
        inner = state.inner
        if isinstance(inner, PrecisionPhaseState):
            ps = inner.ps
            extra.append(
                f"switch to the precision phase after {ps.before} evaluations ({inner.why}); "
                f"{ps.it} precision iterations, {ps.spent} evaluations"
            )
            extra.append(f"precision phase: {noise_words(ps)}")
        retries = int(self.penalty_state(state).retries)
        if retries:
            extra.append(f"{retries} stall(s) of the precision phase handed back to the penalty phase")
        return notes[:1] + extra + notes[1:]


# ====================================================================== DSZOG
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

    The box is :class:`~zoframe_constrained.penalty.DSZOGPenalty` (its ``step``, line by line). ``p_form``
    chooses how p is stored: ``"dense"`` (an ``m``-vector, ``O(m)`` per step), ``"sparse"`` (floor + support,
    ``O(|support| + |M|)`` per step, the same iterates up to rounding) or ``"auto"`` (sparse from ``m >=
    10000``). ``outputs()`` reports ``x`` and the final ``p``: its largest entries are the constraints that
    were hardest to satisfy.

    Ending feasible: with ``restore_after=T`` the solver switches after ``T`` steps to the
    feasibility-restoration rounds (:mod:`zoframe_constrained.restoration`) and stops once the max violation
    (over all constraints, or over ``restore_sample`` of them, as the message says) is ``<= violation_tol``.
    """

    penalty_phase: ClassVar[type[PenaltyPhase]] = DSZOGPenalty

    lam: float = param(1e-8, symbol="lambda", doc="strong concavity of L in p (> 0; ICLR Alg. 1: 1e-8)")
    p_form: PForm = param("auto", doc="storage of p: 'auto', 'dense' or 'sparse'")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.p_form not in ("auto", "dense", "sparse"):
            raise InvalidParameterError(f"p_form must be 'auto', 'dense' or 'sparse', got {self.p_form!r}")


# ====================================================================== ADSZOG
@dataclass(frozen=True)
class ADSZOG(_PenaltyMinimax):
    """ADSZOG: DSZOG with exponential moving averages and adaptive steps.

    Shi, Gao & Gu, *Gradient-free method for heavily constrained nonconvex optimization*, ICML 2022,
    Algorithm 1 (named DSZOG there; ADSZOG is Algorithm 2 of the ICLR 2022 submission); the box is
    :class:`~zoframe_constrained.penalty.ADSZOGPenalty` (its ``step``, line by line, and the reading of the
    adaptive denominator ``sqrt(||z||_2) + c``).

    Defaults (``steps="auto"``): l.5 becomes a normalised step ``alpha z_w / ||z_w||`` with
    backtracking on the penalised batch value, l.6 a step of length ``eta_p`` along ``z_p / ||z_p||``,
    with penalty continuation and a final restoration + KKT test (see :class:`_PenaltyMinimax` and
    ``docs/constrained-user-problems.md``); ``steps="paper"`` runs the box as written.

    ``p_form``: ``"dense"`` keeps ``p`` and ``z_p`` as ``m``-vectors; ``"sparse"`` keeps them in the floor +
    support form (:class:`~zoframe_constrained.simplex.PZ`), with the same iterates up to rounding and a
    switch to the dense form when the support exceeds ``m / 4``; ``"auto"``: sparse from ``m >= 10000``.

    Ending feasible: ``restore_after``, ``violation_tol``, ``restore_sample`` as for DSZOG.
    """

    penalty_phase: ClassVar[type[PenaltyPhase]] = ADSZOGPenalty

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
