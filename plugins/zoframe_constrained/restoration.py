"""The feasibility restoration of DSZOG / ADSZOG: rounds R1-R4 from function values, as a phase and as snapshots.

The penalty iterates end slightly infeasible (the violation of the penalised minimiser is about
``sum(alpha*) / (2 beta)``). Each round (:func:`restore_round`):

R1. evaluate the constraints at ``w``: all ``m`` (``restore_sample=None``, an exact max violation) or
    a uniform sample (then the max violation is a sampled one; the active set ``A`` of the previous
    round is evaluated too when the round goes on); if the max violation is ``<= violation_tol``,
    keep ``w``;
R2. the rows: ``A`` (the constraints that held the previous step in place), then the nearly active
    constraints ``f_j(w) > -max(violation_tol, v)`` (``v`` the max violation of R1: the band a
    correcting move can push over the edge), the largest first, at most ``restore_batch`` rows in all
    (default :func:`row_budget`: ``m / dim`` clipped to ``[4 dim, 16 dim]``, which bounds the gradient
    matrix of R3);
R3. their gradients by central differences (one batched call, ``2 dim`` points);
R4. the shortest step ``delta`` with ``f_j(w) + grad f_j . delta <= 0`` for those rows
    (:func:`~zoframe_constrained.ldp.least_distance`): the projection of ``w`` onto their
    linearisation, exact in one round for linear constraints; its rows with a positive multiplier are
    the next ``A`` (the first round's ``A`` is the last feasible snapshot's, when there is one).

``w`` moves as little as the constraints require (satisfied constraints that need no move do not pull
it around), so the objective changes little. Above :data:`RESTORE_BLOCKED_ABOVE` constraints R1 is a
blocked pass that keeps the ``restore_batch`` largest values (:func:`_restore_round_blocked`), so that
memory stays bounded whatever ``m`` is. Why these choices (all nearly active rows, the shortest step,
keeping ``A``, the target ``0`` rather than a margin below it): measured in ``docs/algorithms/dszog.md``
("Ending feasible").

The rounds serve twice:

* :class:`Restoration`, the phase between the penalty phase and the precision phase (or after
  ``restore_after`` penalty steps), one round per step, at most ``restore_rounds``; the penalty phase's
  ``p`` (and ADSZOG's averages) are kept, and where the run goes when it ends is the solver's rule
  (``zoframe_constrained.solvers``, ``after_restoration``);
* :func:`snapshot`, a feasible copy of the penalty iterate every ``restore_every`` steps, which the
  penalty iterates do not follow.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from zoframe.errors import NonFiniteValueError
from zoframe.estimators import CoordinateEstimator
from zoframe.oracle import CountingOracle
from zoframe.phases import Carry, PhaseEnd
from zoframe.protocols import Array, IntArray
from zoframe_constrained.ldp import least_distance

if TYPE_CHECKING:
    from zoframe_constrained.solvers import _PenaltyMinimax

__all__ = ["RESTORE_BLOCKED_ABOVE", "Restoration", "RestorationState", "RestoreSettings", "restore_round", "snapshot"]

#: above this many constraints a restoration round (R1 over all m) is a blocked pass keeping the
#: ``restore_batch`` largest values, instead of one call returning all m values (zoframe.measures.FULL_PASS_BLOCK)
RESTORE_BLOCKED_ABOVE = 1 << 20

StateT = TypeVar("StateT")


@dataclass(frozen=True)
class RestoreSettings:
    """The rounds' parameters: ``tol`` (``violation_tol``), ``sample`` (``restore_sample``: constraints checked per
    round, ``None``: all ``m``), ``batch`` (``restore_batch``: rows per round, ``None``: :func:`row_budget`'s
    default), ``mu`` (``restore_mu``: the central-difference step of R3), ``rounds`` (``restore_rounds``)."""

    tol: float
    sample: int | None = None
    batch: int | None = None
    mu: float = 1e-6
    rounds: int = 200


def _finite(vals: Array, oracle: CountingOracle) -> Array:
    """``vals``, after checking they are finite (the oracle already raises on them unless nonfinite='inf')."""
    if oracle.nonfinite == "inf" and not np.isfinite(vals).all():
        raise NonFiniteValueError(
            "a constraint returned a non-finite value (in the restoration); DSZOG needs finite constraint values "
            "(the squared penalty max(f_j, 0)^2 of an infinite value has no finite difference). Make the "
            "constraint return a large finite number where it is undefined."
        )
    return vals


def _members(values: IntArray, pool: IntArray) -> NDArray[np.bool_]:
    """``np.isin(values, pool, assume_unique=True)`` (``values`` distinct): by binary search when ``pool`` is
    sorted (a restoration's active set is), which is cheaper than isin's loop over ``pool``."""
    n = int(pool.shape[0])
    if n == 0 or (n > 1 and not bool(np.all(pool[1:] >= pool[:-1]))):
        return np.isin(values, pool, assume_unique=True)
    at = np.minimum(pool.searchsorted(values), n - 1)
    found: NDArray[np.bool_] = pool.take(at) == values
    return found


# ====================================================================== the rounds
def restore_round(
    oracle: CountingOracle, w: Array, active: IntArray | None, rng: np.random.Generator, settings: RestoreSettings
) -> tuple[Array, float, int, IntArray | None]:
    """One round R1-R4 (see the module docstring) from ``w`` with the previous active set ``active``.

    Returns ``(w_new, violation at w, constraints checked, active set of the step)``; ``w_new is
    w`` when the max violation at ``w`` is already ``<= violation_tol``.
    """
    sample = settings.sample
    idx = None if sample is None or sample >= oracle.m else np.sort(rng.choice(oracle.m, size=sample, replace=False))
    if idx is None and oracle.m > RESTORE_BLOCKED_ABOVE:
        return _restore_round_blocked(oracle, w, active, rng, settings)
    f = _finite(oracle.constraints(w, idx, purpose="restore")[0], oracle)  # R1
    violation = max(float(f.max()), 0.0)
    checked = oracle.m if idx is None else int(idx.shape[0])
    if violation <= settings.tol:
        return w, violation, checked, active
    if idx is None:  # all m constraints: the position of constraint j among them is j (no arange(m) needed)
        return _restore_rows(oracle, w, None, f, violation, checked, active, rng, settings)
    ids = idx
    if active is not None:  # the previous active set, outside the uniform sample
        extra = np.setdiff1d(active, idx, assume_unique=True)
        if extra.shape[0]:
            f_extra = _finite(oracle.constraints(w, extra, purpose="restore")[0], oracle)
            ids, f = np.concatenate([ids, extra]), np.concatenate([f, f_extra])
            order = np.argsort(ids, kind="stable")
            ids, f = ids[order], f[order]
    return _restore_rows(oracle, w, ids, f, violation, checked, active, rng, settings)


def _restore_rows(
    oracle: CountingOracle, w: Array, ids: IntArray | None, f: Array, violation: float, checked: int,
    active: IntArray | None, rng: np.random.Generator, settings: RestoreSettings,
) -> tuple[Array, float, int, IntArray | None]:  # fmt: skip
    """R2-R4 of :func:`restore_round`: ``f`` holds the values of the sorted constraints ``ids`` (``None``: all
    ``m``, where the position of constraint ``j`` is ``j``)."""
    k = row_budget(oracle, settings)
    keep = np.zeros(0, dtype=np.intp)  # R2: positions (in ids) of the previous active set, then the band
    if active is not None and active.shape[0]:
        keep = np.searchsorted(ids, active)[:k] if ids is not None else np.asarray(active[:k], dtype=np.intp)
    band = np.flatnonzero(f > -max(settings.tol, violation))
    if keep.shape[0]:
        band = band[~_members(band, keep)]
    room = k - keep.shape[0]
    if band.shape[0] > room:
        band = band[np.argpartition(-f[band], room - 1)[:room]] if room > 0 else band[:0]
    rows = np.concatenate([keep, band])
    w_new, new_active = _restore_step(oracle, w, rows if ids is None else ids[rows], f[rows], violation, rng, settings)
    return w_new, violation, checked, new_active


def row_budget(oracle: CountingOracle, settings: RestoreSettings) -> int:
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
    if settings.batch:
        return int(settings.batch)
    d = oracle.dim
    return int(min(16 * d, max(4 * d, oracle.m // d)))


def _restore_round_blocked(
    oracle: CountingOracle, w: Array, active: IntArray | None, rng: np.random.Generator, settings: RestoreSettings
) -> tuple[Array, float, int, IntArray | None]:
    """:func:`restore_round` over all ``m`` constraints with memory bounded whatever ``m`` is.

    R1 is one blocked pass (:func:`zoframe.measures.max_violation_full`, blocks of 2^20
    constraints) that keeps the ``restore_batch`` largest values; R2 takes the previous active
    set (evaluated again by index: at most ``restore_batch`` more evaluations) and then the
    largest of those values within the band. Used above :data:`RESTORE_BLOCKED_ABOVE`
    constraints, where holding all ``m`` values (and their indices) would cost gigabytes.
    """
    from zoframe.measures import max_violation_full

    k = row_budget(oracle, settings)
    full = max_violation_full(oracle, w, top=k, purpose="restore")  # R1: every constraint, in blocks
    violation = max(full.max_value, 0.0)
    if violation <= settings.tol:
        return w, violation, oracle.m, active
    keep = np.zeros(0, dtype=np.intp)  # R2: the previous active set, then the band
    f_keep = np.zeros(0)
    if active is not None and active.shape[0]:
        keep = np.asarray(active[:k], dtype=np.intp)
        f_keep = _finite(oracle.constraints(w, keep, purpose="restore")[0], oracle)
    cand, f_cand = full.top_indices, full.top_values  # largest first
    inside = f_cand > -max(settings.tol, violation)
    if keep.shape[0]:
        inside &= ~np.isin(cand, keep)
    room = k - keep.shape[0]
    band, f_band = cand[inside][:room], f_cand[inside][:room]
    V = np.concatenate([keep, band])
    w_new, new_active = _restore_step(oracle, w, V, np.concatenate([f_keep, f_band]), violation, rng, settings)
    return w_new, violation, oracle.m, new_active


def _restore_step(
    oracle: CountingOracle, w: Array, V: IntArray, f_V: Array, violation: float, rng: np.random.Generator,
    settings: RestoreSettings,
) -> tuple[Array, IntArray | None]:  # fmt: skip
    """R3-R4 of a restoration round on the constraints ``V`` (values ``f_V`` at ``w``): the new
    point and the active set of the least-distance step."""
    coord = CoordinateEstimator(mu=settings.mu)
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
        near_lo = np.flatnonzero(np.isfinite(lo_v) & (lo_v - w > -max(settings.tol, violation)))
        near_hi = np.flatnonzero(np.isfinite(hi_v) & (w - hi_v > -max(settings.tol, violation)))
        G = np.vstack([G, -eye[near_lo], eye[near_hi]])
        rhs = np.concatenate([rhs, (w - lo_v)[near_lo], (hi_v - w)[near_hi]])
    delta, mult = least_distance(G, rhs)  # R4
    new_active = None if mult is None else np.sort(V[mult[mult < n_rows]])
    w_new = w + delta
    if box is not None:
        w_new = box.project(w_new)
    return w_new, new_active


def snapshot(oracle: CountingOracle, state: StateT, settings: RestoreSettings, rng: np.random.Generator) -> StateT:
    """A feasible copy of the penalty iterate (``restore_every``): the penalty iterates go on unchanged.

    Runs up to ``restore_rounds`` rounds on a copy of ``w``; when one reaches a max violation ``<=
    violation_tol`` (measured as in R1), the state keeps it as ``x_feasible`` (with its violation, how many
    constraints measured it and the step it was taken at). A copy that does not get there is dropped and the
    previous ``x_feasible`` stays.

    The first round starts from the active set ``A`` the previous snapshot ended with
    (``feasible_active``): the constraints that bounded the last restored copy usually bound the
    next one (on a9a pairwise, 20 snapshots every 100 steps took 56-61 rounds instead of 79-87,
    3 seeds).
    """
    st: Any = state
    w = st.x
    active: IntArray | None = st.feasible_active
    for _ in range(settings.rounds + 1):
        w_new, violation, checked, active = restore_round(oracle, w, active, rng, settings)
        if violation <= settings.tol:
            out: StateT = dataclasses.replace(
                st, x_feasible=w.copy(), feasible_violation=violation, feasible_checked=checked,
                feasible_t=int(st.t), feasible_active=active,
            )  # fmt: skip
            return out
        w = w_new
    return state


# ====================================================================== the phase
@dataclass(frozen=True)
class RestorationState:
    """The restoration phase between rounds: the point ``x``, the max ``violation`` measured by the last round and
    how many constraints measured it (``checked``), the ``rounds`` so far, the last step's active set
    (``restore_active``), the best measured point of the rounds and its violation (``restore_best``), the rounds
    whose point met a non-finite value and were taken half back (``failed``), and the penalty phase's state it
    started from (``penalty``: its ``p``, its snapshot and its reasons for handing over)."""

    x: Array
    penalty: Any
    violation: float = float("nan")
    checked: int = 0
    rounds: int = 0
    restore_active: IntArray | None = None
    restore_best: tuple[Array, Array] | None = None
    failed: int = 0


@dataclass(frozen=True)
class Restoration:
    """The restoration as a phase (:class:`zoframe.phases.Phase`): one round R1-R4 per step from the point the
    penalty phase handed over; at most ``restore_rounds`` rounds, after which the point returned is the best
    measured one. Where the run goes when it ends (the precision phase, or a stop: feasible, or failed) is the
    solver's rule (:meth:`_PenaltyMinimax.after_restoration`)."""

    name: str
    solver: _PenaltyMinimax

    def start(self, oracle: CountingOracle, carry: Carry, rng: np.random.Generator) -> RestorationState:
        return RestorationState(x=carry.x, penalty=carry.extras["penalty"])

    def step(self, oracle: CountingOracle, st: RestorationState, rng: np.random.Generator) -> RestorationState:
        settings = self.solver.restore_settings()
        start = st.restore_active if st.rounds > 0 else st.penalty.feasible_active  # a snapshot's A, if any
        best = st.restore_best  # (point, its violation): the best measured point of the rounds
        try:
            w, violation, checked, active = restore_round(oracle, st.x, start, rng, settings)
        except NonFiniteValueError:
            # nonfinite="inf": the last round's step (or a difference point around its end) reached a region where a
            # constraint is not finite (a failed trial): half the step back toward the best measured point, as a
            # round; under nonfinite="raise" the oracle's error (naming the point and the function) goes to the user
            if oracle.nonfinite != "inf" or best is None:
                raise
            back = np.asarray(best[0], dtype=np.float64) + 0.5 * (st.x - np.asarray(best[0], dtype=np.float64))
            out = dataclasses.replace(st, x=back, rounds=st.rounds + 1, violation=float(best[1]),
                                      failed=st.failed + 1)  # fmt: skip
            if out.rounds >= settings.rounds:  # never end worse than the best round
                out = dataclasses.replace(out, x=np.array(best[0], copy=True))
            return out
        rounds = st.rounds + 1
        if best is None or violation < float(best[1]):  # the violation of this round is measured at st.x
            best = (np.array(st.x, copy=True), np.array(violation))
        out = dataclasses.replace(
            st, x=w, violation=violation, checked=checked, rounds=rounds, restore_active=active, restore_best=best
        )
        if violation > settings.tol and rounds >= settings.rounds:  # never end worse than the best round
            out = dataclasses.replace(out, x=best[0], violation=float(best[1]))
        return out

    def end(self, oracle: CountingOracle, st: RestorationState) -> PhaseEnd | None:
        return self.solver.after_restoration(oracle, st)

    def carry(self, st: RestorationState) -> Carry:
        """The restored point, the penalty state and the last round's active set (the precision phase's first ``W``)."""
        return Carry(st.x, {"penalty": st.penalty, "active": st.restore_active})

    @staticmethod
    def outputs(st: RestorationState) -> dict[str, Array]:
        """``x``, the penalty phase's ``p``, the last round's max violation and how many constraints it checked, and
        the penalty phase's last feasible snapshot."""
        from zoframe_constrained.penalty import p_outputs, snapshot_outputs

        out: dict[str, Array] = {"x": st.x, **p_outputs(st.penalty)}
        if st.rounds > 0:
            out.update(max_violation=np.array(st.violation), violation_checked=np.array(float(st.checked)))
        out.update(snapshot_outputs(st.penalty))
        return out
