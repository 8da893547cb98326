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

import dataclasses
from dataclasses import dataclass
import functools
import math
from typing import Any, ClassVar, Literal, TypeVar

import numpy as np

from zoframe.errors import IncompatibleProblemError, InvalidParameterError, NonFiniteValueError
from zoframe.estimators import CoordinateEstimator
from zoframe.oracle import CountingOracle
from zoframe.protocols import Array, Estimator, IntArray
from zoframe.solver import SolverBase, check_batch, check_int, check_open_unit, check_positive
from zoframe.specs import param
from zoframe_constrained.ldp import least_distance, least_distance_step
from zoframe_constrained.simplex import (
    FLUSH,
    PZ,
    Ascent,
    ascent_dense,
    ascent_sparse,
    densify,
    project_simplex_dense,
    pz_average,
    pz_ema,
    pz_flush,
    pz_project,
    pz_sample,
    sample_dense,
    sample_sparse,
    sparsify,
)

__all__ = ["ADSZOG", "DSZOG", "SPARSE_AUTO_M", "ADSZOGState", "DSZOGState", "least_distance_step"]

#: ADSZOG flushes tiny entries of p and z_p every this many steps
_FLUSH_EVERY = 16

#: ``p_form="auto"`` uses the sparse floor + support form of p from this many constraints on
SPARSE_AUTO_M = 10_000

PForm = Literal["auto", "dense", "sparse"]
StateT = TypeVar("StateT")


def _finite(vals: Array, oracle: CountingOracle, what: str) -> Array:
    """``vals``, after checking they are finite (the oracle already raises on them unless nonfinite='inf')."""
    if oracle.nonfinite == "inf" and not np.isfinite(vals).all():
        raise NonFiniteValueError(
            f"a constraint returned a non-finite value ({what}); DSZOG needs finite constraint values "
            "(the squared penalty max(f_j, 0)^2 of an infinite value has no finite difference). Make the "
            "constraint return a large finite number where it is undefined."
        )
    return vals


def _diverged(w: Array, solver: _PenaltyMinimax, t: int) -> Array:
    """``w``, after checking it has not blown up (a step too large for the penalty's curvature).

    Entries beyond ``1e100`` count as diverged: squaring the values they produce would overflow.
    """
    if not float(np.max(np.abs(w))) < 1e100:  # also catches NaN
        raise NonFiniteValueError(
            f"{type(solver).__name__} diverged at step {t}: |w| exceeds 1e100. Lower eta_w "
            f"(now {solver.eta_w:g}) or beta (now {solver.beta:g}); adszog's adaptive steps diverge less easily."
        )
    return w


def _norm(v: Array) -> float:
    """Euclidean norm (einsum: cheaper than np.linalg.norm, and no BLAS threads for a 1-D product)."""
    return math.sqrt(float(np.einsum("i,i->", v, v)))


@dataclass(frozen=True)
class _PenaltyMinimax(SolverBase):
    """Hyper-parameters and estimators shared by DSZOG and ADSZOG."""

    problem_kinds: ClassVar[frozenset[str]] = frozenset({"constrained"})
    eta_w: float = param(1e-2, symbol="eta_w", doc="step size of w")
    eta_p: float = param(1e-2, symbol="eta_p", doc="step size of p")
    beta: float = param(1.0, symbol="beta", doc="penalty parameter (> 0)")
    lam: float = param(1e-6, symbol="lambda", doc="strong concavity of L in p (> 0)")
    q: int = param(10, symbol="q", doc="Gaussian directions per estimate, shared by both sums of G_L")
    mu: float = param(1e-3, symbol="mu", doc="smoothing radius")
    M1: int = param(128, symbol="|M1|", doc="data batch, uniform without replacement (<= n)")
    M2: int = param(128, symbol="|M2|", doc="constraint batch drawn i.i.d. from p (with replacement)")
    M3: int = param(128, symbol="|M3|", doc="constraint batch, uniform without replacement (<= m)")
    estimator: Estimator | None = param(None, doc="gradient estimator (default: gaussian(q, mu))")
    restore_after: int | None = param(None, doc="steps before the feasibility-restoration phase (None: never)")
    violation_tol: float = param(1e-3, symbol="eps_f", doc="restoration ends when max_j f_j(w) <= this")
    restore_every: int | None = param(
        None, doc="every this many steps, keep a restored copy of w as outputs['x_feasible'] (None: never)"
    )
    restore_sample: int | None = param(None, doc="constraints checked per restoration round (None: all m)")
    restore_rounds: int = param(200, doc="at most this many restoration rounds")
    restore_mu: float = param(1e-6, doc="central-difference step of the constraint gradients in restoration")
    restore_batch: int | None = param(
        None, doc="at most this many nearly active constraints corrected per restoration round (None: 16 * dim)"
    )

    def __post_init__(self) -> None:
        if self.restore_after is not None:
            check_int("restore_after", self.restore_after, minimum=0)
        if self.restore_every is not None:
            check_int("restore_every", self.restore_every)
        if self.restore_sample is not None:
            check_int("restore_sample", self.restore_sample)
        if self.restore_batch is not None:
            check_int("restore_batch", self.restore_batch)
        check_positive("violation_tol", self.violation_tol)
        check_int("restore_rounds", self.restore_rounds)
        check_positive("restore_mu", self.restore_mu)
        check_positive("eta_w", self.eta_w, "eta_w")
        check_positive("eta_p", self.eta_p, "eta_p")
        check_positive("beta", self.beta, "beta")
        check_positive("lam", self.lam, "lambda")
        check_int("q", self.q)
        check_positive("mu", self.mu, "mu")
        check_int("M1", self.M1)
        check_int("M2", self.M2)
        check_int("M3", self.M3)
        if self.eta_p * self.lam >= 1.0:
            raise InvalidParameterError(
                f"eta_p * lambda must be < 1 (got {self.eta_p} * {self.lam}): the step p + eta_p H scales p "
                "by 1 - eta_p lambda, which must stay positive; lower eta_p or lambda"
            )

    def validate(self, oracle: CountingOracle) -> None:
        if oracle.kind != "constrained":
            raise IncompatibleProblemError(f"{type(self).__name__} solves constrained problems, got {oracle.kind!r}")
        if oracle.m < 1:
            raise InvalidParameterError("the problem has no constraint (m = 0); use a finite-sum solver")
        check_batch("M1", self.M1, oracle.n, "data components n")
        check_batch("M3", self.M3, oracle.m, "constraints m")

    def calls_per_step(self, oracle: CountingOracle) -> int:
        """``rows * (|M1| + |M2|) + |M3|`` evaluations per penalty step (``rows = q + 1`` for the Gaussian
        estimator). A restoration round costs the constraints it checks (``m`` or ``restore_sample``)
        plus ``2 dim`` per corrected constraint."""
        return int(self.gradient_estimator().rows(oracle.dim)) * (self.M1 + self.M2) + self.M3

    # ------------------------------------------------------------------ the two estimators
    def G_L(self, oracle: CountingOracle, w: Array, M1: IntArray, M2: IntArray, rng: np.random.Generator) -> Array:
        """``1/(q|M1|) sum_i sum_k G(l_i; u_k) + beta/(q|M2|) sum_j sum_k G(phi_j; u_k)``.

        One set of directions for both sums: the columns ``[l_i, phi_j]`` are weighted so that their
        mean is ``mean_i l_i + beta mean_j phi_j``, and ONE estimate (one matrix of points) makes one
        objective call and one constraint call.
        """
        weights = self._weights(M1.shape[0], M2.shape[0])

        def lagrangian_terms(X: Array) -> Array:
            loss = oracle.objective(X, M1)
            f = _finite(oracle.constraints(X, M2), oracle, "in the estimate of G_L")
            phi = np.maximum(f, 0.0) ** 2
            out: Array = np.hstack([loss, phi]) * weights
            return out

        est = self.gradient_estimator().estimate(lagrangian_terms, w, rng, mu=self.mu)
        return np.asarray(est.grad, dtype=np.float64)

    @functools.lru_cache(maxsize=4)  # noqa: B019 - a handful of frozen solvers, small arrays
    def _weights(self, b1: int, b2: int) -> Array:
        """Column weights that turn the mean over ``[l_M1, phi_M2]`` into ``mean l + beta mean phi``."""
        w = np.concatenate([np.full(b1, (b1 + b2) / b1), np.full(b2, self.beta * (b1 + b2) / b2)])
        w.setflags(write=False)
        return w

    def H(self, oracle: CountingOracle, w: Array, M3: IntArray) -> Ascent:
        """``H = beta m / |M3| sum_{j in M3} e_j phi_j(w) - lambda p`` (the ``-lambda p`` part is implicit)."""
        f = _finite(oracle.constraints(w, M3)[0], oracle, "in the estimate of H")
        phi = np.maximum(f, 0.0) ** 2
        return Ascent(idx=M3, gain=self.beta * oracle.m / M3.shape[0] * phi, lam=self.lam)

    def p_star(self, oracle: CountingOracle, w: Array) -> Array:
        """``p*(w) = argmax_p L(w, p) = Proj_Delta(beta phi(w) / lambda)``: one pass over all constraints."""
        f = _finite(oracle.constraints(w, None, purpose="init")[0], oracle, "at the starting point")
        return project_simplex_dense(self.beta * np.maximum(f, 0.0) ** 2 / self.lam)

    def batches(self, oracle: CountingOracle, rng: np.random.Generator) -> tuple[IntArray, IntArray]:
        """``M1`` (data) and ``M3`` (constraints), uniform without replacement."""
        M1 = rng.choice(oracle.n, size=self.M1, replace=False)
        M3 = rng.choice(oracle.m, size=self.M3, replace=False)
        return M1.astype(np.intp), M3.astype(np.intp)

    # ------------------------------------------------------------------ ending feasible
    def restoring(self, state: Any) -> bool:
        """Whether the penalty steps are over and the feasibility-restoration phase runs."""
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
            ``restore_batch`` rows in all (default ``16 dim``, which bounds the gradient matrix of R3);
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
        out: StateT = dataclasses.replace(
            st, x=w, violation=violation, checked=checked, rounds=int(st.rounds) + 1, restore_active=active
        )
        return out

    def _restore_round(
        self, oracle: CountingOracle, w: Array, active: IntArray | None, rng: np.random.Generator
    ) -> tuple[Array, float, int, IntArray | None]:
        """One round R1-R4 of :meth:`restore` from ``w`` with the previous active set ``active``.

        Returns ``(w_new, violation at w, constraints checked, active set of the step)``; ``w_new is
        w`` when the max violation at ``w`` is already ``<= violation_tol``.
        """
        sample = self.restore_sample
        idx = None if sample is None or sample >= oracle.m else np.sort(rng.choice(oracle.m, size=sample, replace=False))
        f = _finite(oracle.constraints(w, idx, purpose="restore")[0], oracle, "in the restoration")  # R1
        ids = np.arange(oracle.m) if idx is None else idx
        violation = max(float(f.max()), 0.0)
        checked = int(ids.shape[0])
        if violation <= self.violation_tol:
            return w, violation, checked, active
        if idx is not None and active is not None:  # the previous active set, outside the uniform sample
            extra = np.setdiff1d(active, idx, assume_unique=True)
            if extra.shape[0]:
                f_extra = _finite(oracle.constraints(w, extra, purpose="restore")[0], oracle, "in the restoration")
                ids, f = np.concatenate([ids, extra]), np.concatenate([f, f_extra])
                order = np.argsort(ids, kind="stable")
                ids, f = ids[order], f[order]
        k = self.restore_batch or 16 * oracle.dim
        keep = np.zeros(0, dtype=np.intp)  # R2: positions (in ids) of the previous active set, then the band
        if active is not None and active.shape[0]:
            keep = np.searchsorted(ids, active)[:k]
        band = np.flatnonzero(f > -max(self.violation_tol, violation))
        if keep.shape[0]:
            band = band[~np.isin(band, keep, assume_unique=True)]
        room = k - keep.shape[0]
        if band.shape[0] > room:
            band = band[np.argpartition(-f[band], room - 1)[:room]] if room > 0 else band[:0]
        rows = np.concatenate([keep, band])
        V = ids[rows]
        coord = CoordinateEstimator(mu=self.restore_mu)
        grads = coord.estimate(lambda X: oracle.constraints(X, V, purpose="restore"), w, rng, per_component=True)  # R3
        G = np.asarray(grads.per_component).reshape(V.shape[0], oracle.dim)
        delta, mult = least_distance(G, -f[rows])  # R4
        new_active = None if mult is None else np.sort(V[mult])
        return w + delta, violation, checked, new_active

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
            if violation <= self.violation_tol:
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
        if int(state.rounds) == 0:
            return None
        how = "full pass over all constraints" if state.checked == getattr(state, "m", -1) else f"sampled: {state.checked} constraints"
        if state.violation <= self.violation_tol:
            return f"feasible: max violation {state.violation:.3g} <= {self.violation_tol:g} ({how}) after {state.rounds} restoration round(s)"
        if int(state.rounds) >= self.restore_rounds:
            return (
                f"feasibility restoration stopped after {state.rounds} rounds: max violation {state.violation:.3g} > "
                f"{self.violation_tol:g} ({how})"
            )
        return None

    def _restoration_outputs(self, state: Any) -> dict[str, Array]:
        out: dict[str, Array] = {}
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
    ``x_feasible`` and the ``feasible_*`` fields: the last feasible snapshot (``restore_every``).
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

    def snapshot_fields(self) -> dict[str, Any]:
        """The last feasible snapshot, to carry over into the next step's state."""
        return {
            "x_feasible": self.x_feasible, "feasible_violation": self.feasible_violation,
            "feasible_checked": self.feasible_checked, "feasible_t": self.feasible_t,
            "feasible_active": self.feasible_active,
        }  # fmt: skip


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

    p_form: PForm = param("auto", doc="storage of p: 'auto', 'dense' or 'sparse'")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.p_form not in ("auto", "dense", "sparse"):
            raise InvalidParameterError(f"p_form must be 'auto', 'dense' or 'sparse', got {self.p_form!r}")

    def sparse(self, m: int) -> bool:
        return self.p_form == "sparse" or (self.p_form == "auto" and m >= SPARSE_AUTO_M)

    def init(self, oracle: CountingOracle, x0: Array, rng: np.random.Generator) -> DSZOGState:
        w = np.array(x0, dtype=np.float64, copy=True)  # Alg. 1 l.1
        p = self.p_star(oracle, w)  # Alg. 1 l.2
        if self.sparse(oracle.m):
            support, values, floor = sparsify(p)
            return DSZOGState(x=w, p=values, p_support=support, p_floor=floor, m=oracle.m)
        return DSZOGState(x=w, p=p, p_support=None, p_floor=0.0, m=oracle.m)

    def sample_p(self, oracle: CountingOracle, state: DSZOGState, rng: np.random.Generator) -> IntArray:
        """``M2 ~ p``: ``|M2|`` i.i.d. draws by inverting the cumulative distribution."""
        u = rng.random(self.M2)
        if state.p_support is None:
            return sample_dense(state.p, u)
        return sample_sparse(state.p_support, state.p, state.p_floor, oracle.m, u)

    def ascend(self, oracle: CountingOracle, state: DSZOGState, H: Ascent) -> tuple[Array, IntArray | None, float]:
        """``Proj_Delta(p + eta_p H)`` in the state's form of p."""
        if state.p_support is None:
            return ascent_dense(state.p, self.eta_p, H), None, 0.0
        support, values, floor = ascent_sparse(state.p_support, state.p, state.p_floor, oracle.m, self.eta_p, H)
        return values, support, floor

    def step(self, oracle: CountingOracle, state: DSZOGState, rng: np.random.Generator) -> DSZOGState:
        if self.restoring(state):
            return self.restore(oracle, state, rng)
        w = state.x
        M1, M3 = self.batches(oracle, rng)  # Alg. 1 l.5, l.7
        M2 = self.sample_p(oracle, state, rng)  # Alg. 1 l.6
        G = self.G_L(oracle, w, M1, M2, rng)  # Alg. 1 l.8 (l.4: directions drawn here)
        H = self.H(oracle, w, M3)  # Alg. 1 l.9
        w = _diverged(w - self.eta_w * G, self, state.t + 1)  # Alg. 1 l.10
        p, support, floor = self.ascend(oracle, state, H)  # Alg. 1 l.11
        new = DSZOGState(
            x=w, p=p, p_support=support, p_floor=floor, m=state.m, t=state.t + 1, **state.snapshot_fields(),
        )  # the last feasible snapshot (restore_every) carries over
        return self.snapshot(oracle, new, rng) if self.snapshot_due(new) else new

    def outputs(self, state: DSZOGState) -> dict[str, Array]:
        p = state.p if state.p_support is None else densify(state.p_support, state.p, state.p_floor, state.m)
        return {"x": state.x, "p": p, **self._restoration_outputs(state)}


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
        return PZ(self.p, self.z_p, self.p_support, self.p_floor, self.z_floor, self.m)


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

    The adaptive denominator: the paper writes it as ``sqrt(||z||_2 + c)`` in eq. (13) and in the
    box, and as ``sqrt(||z||_2) + c`` in eq. (14); we use ``sqrt(||z||_2) + c`` (eq. 14) for both
    ``w`` and ``p``.

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
        p = self.p_star(oracle, w)  # Alg. 1 l.2
        if self.p_form == "sparse" or (self.p_form == "auto" and m >= SPARSE_AUTO_M):
            support, values, floor = sparsify(p)
            pz = PZ(values, np.zeros_like(values), support, floor, 0.0, m)
        else:
            pz = PZ(p, np.zeros(m), None, 0.0, 0.0, m)
        M1, M3 = self.batches(oracle, rng)
        z_w = self.G_L(oracle, w, M1, pz_sample(pz, rng.random(self.M2)), rng)  # Alg. 1 l.3
        pz = pz_ema(pz, self.H(oracle, w, M3), 1.0)  # Alg. 1 l.3: z_p = H(w_1, p_1)
        return self._state(w, pz, z_w, 0)

    def step(self, oracle: CountingOracle, state: ADSZOGState, rng: np.random.Generator) -> ADSZOGState:
        if self.restoring(state):
            return self.restore(oracle, state, rng)
        a, b, c = self.a, self.b, self.c
        pz = state.pz()
        w = _diverged(state.x - (self.eta_w / (math.sqrt(_norm(state.z_w)) + c)) * state.z_w, self, state.t + 1)  # l.5
        p_hat = pz_project(pz, self.eta_p / (math.sqrt(pz.norm_z()) + c))  # Alg. 1 l.6
        pz = pz_average(pz, p_hat, a)  # Alg. 1 l.7
        M1, M3 = self.batches(oracle, rng)  # Alg. 1 l.9, l.11
        M2 = pz_sample(pz, rng.random(self.M2))  # Alg. 1 l.10
        G = self.G_L(oracle, w, M1, M2, rng)  # Alg. 1 l.12 (l.8: directions drawn here)
        H = self.H(oracle, w, M3)  # Alg. 1 l.13
        z_w = (1.0 - b) * state.z_w + b * G  # Alg. 1 l.14
        pz = pz_ema(pz, H, b)  # Alg. 1 l.15
        t = state.t + 1
        if t % _FLUSH_EVERY == 0:
            pz = pz_flush(pz, self.flush_threshold())
        new = self._state(w, pz, z_w, t, state)
        return self.snapshot(oracle, new, rng) if self.snapshot_due(new) else new

    def _state(self, w: Array, pz: PZ, z_w: Array, t: int, prev: ADSZOGState | None = None) -> ADSZOGState:
        if pz.support is not None and pz.support.shape[0] > pz.m // 4:  # no longer sparse: go dense
            pz = PZ(pz.dense_p(), densify(pz.support, pz.z, pz.z_floor, pz.m), None, 0.0, 0.0, pz.m)
        keep = prev.snapshot_fields() if prev is not None else {}  # the last feasible snapshot carries over
        return ADSZOGState(
            x=w, p=pz.p, z_w=z_w, z_p=pz.z, t=t, p_support=pz.support, p_floor=pz.p_floor, z_floor=pz.z_floor, m=pz.m,
            **keep,
        )

    def flush_threshold(self) -> float:
        """Entries of ``p`` and ``z_p`` below this are zeroed every 16 steps.

        Between two flushes an entry shrinks at most by ``min(1-a, 1-b)^16`` (pure decay), so
        entries below ``FLUSH / min(1-a, 1-b)^16`` (capped at 1e-200) would turn subnormal before
        the next flush; the mass lost is below ``m * 1e-200``.
        """
        decay = min(1.0 - self.a, 1.0 - self.b) ** _FLUSH_EVERY
        return min(FLUSH / decay, 1e-200) if decay > 0 else 1e-200

    def outputs(self, state: ADSZOGState) -> dict[str, Array]:
        return {"x": state.x, "p": state.pz().dense_p(), **self._restoration_outputs(state)}
