"""ZO-GDA, ZO-GDMSA, ZO-SGDA, ZO-SGDMSA and the first-order references SGDA, SGDMSA.

Wang, Balasubramanian, Ma & Razaviyayn, *Zeroth-Order Algorithms for Nonconvex-Strongly-Concave
Minimax Problems with Improved Complexities* (J. Global Optim. 2023; arXiv:2001.07819),
Algorithms 1-4, for ``min_x max_{y in Y} f(x, y)`` with ``f(x, .)`` strongly concave.

Every solver is a :class:`~zoframe.phases.PhasedSolver` with a choice of steps:

``steps="auto"`` (default)
    steps that need no ``L``, ``mu`` or ``kappa`` and no tuning to the problem's scale
    (:mod:`zoframe_minimax.adaptive`: TiAda's time-scale adaptive rule for the GDA forms, an ascent run to
    a tolerance with backtracked steps and an AdaGrad-norm descent step for the GDMSA forms), then, where
    the problem is deterministic (one component, a batch that covers all ``n``, or ``refine=True``), a
    refinement phase (:mod:`zoframe_minimax.refine`: quasi-Newton on ``Phi(x) = max_y f(x, y)`` with the
    inner maximum solved accurately at each point) that stops on ``gtol`` / ``xtol`` in the problem's units
    or on a relative test. The run says when it is done (``CONVERGED``, ``NOISE_LIMITED``), and
    ``Result.success`` is the certificate's verdict at the returned point.
``steps="paper"``
    the papers' iterations exactly (section 5's fixed steps and radii, or the given ``eta1``, ``eta2``,
    ``T``, ``mu1``, ``mu2``), run until the budget: the reproduction's mode.

In both, a run whose ``x`` or ``y`` runs away (not finite, or beyond ``divergence_limit`` times the
starting point's scale) ends ``DIVERGED``, saying where and when (:class:`zoframe.phases.Runaway`).

Estimators (paper eqs. (5)-(9)): forward-difference Gaussian smoothing in each block,

    G = (1/q1) sum_i (f(x + mu1 u_i, y) - f(x, y)) / mu1 u_i,   u_i ~ N(0, I_d1),
    H = (1/q2) sum_i (f(x, y + mu2 v_i) - f(x, y)) / mu2 v_i,   v_i ~ N(0, I_d2),

each built as ONE matrix of perturbed points (the perturbed x rows paired with the single y row, or
the other way round) and sent to the oracle in ONE ``oracle.minimax`` call.

Stochastic versions (Algorithms 3-4): the oracle is a finite sum ``f = (1/n) sum_i F_i``; each
estimate draws a batch ``M`` of ``|M|`` sample indices uniformly *with replacement* (the paper's
i.i.d. ``xi``). Deviation, stated: the paper pairs each sample ``xi_i`` with its own direction
``u_i``; a batched oracle evaluates a cross product of points and samples, so here the ``q``
directions are shared by every sample of the batch (SPEC section 2, "mini-batch forms"). A sample
drawn several times is evaluated once and weighted by its multiplicity (the same value, fewer
evaluations); the oracle counts the evaluations actually made. Under ``steps="auto"`` a batch of at
least ``n`` draws is the full sum (weights ``1/n``: the same expectation, no sampling noise, no more
evaluations than its distinct draws).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
import dataclasses
from dataclasses import dataclass
import math
from typing import Any, ClassVar

import numpy as np

from zoframe.errors import IncompatibleProblemError, InvalidInputError, InvalidParameterError
from zoframe.estimators import GaussianEstimator
from zoframe.oracle import CountingOracle
from zoframe.phases import Carry, PhasedSolver, PhaseEnd, check_divergence_limit
from zoframe.protocols import Array, Estimator, IntArray
from zoframe.solver import check_int, check_positive
from zoframe.specs import param
from zoframe_minimax.adaptive import MultiStepPhase, Sample, StopRule, TiAdaPhase
from zoframe_minimax.refine import RefinePhase

__all__ = [
    "SGDA",
    "SGDMSA",
    "ZOGDA",
    "ZOGDMSA",
    "ZOSGDA",
    "ZOSGDMSA",
    "MinimaxState",
    "PaperPhase",
    "concavity_probe",
    "theory_step_sizes",
    "with_theory_steps",
]

#: the paper's experiment (section 5): kappa^3 = 10
PAPER_KAPPA = 10.0 ** (1.0 / 3.0)


@dataclass(frozen=True)
class MinimaxState:
    """``(x_s, y_s)`` of Algorithms 1-4 and the outer counter ``s``."""

    x: Array
    y: Array
    s: int


# --------------------------------------------------------------------------- helpers
def theory_step_sizes(method: str, ell: float, kappa: float, eps: float = 0.01) -> dict[str, float | int]:
    """The step sizes (and ``T``) of the paper's theorems.

    ``method`` is ``"gda"`` (eq. (11): ``eta1 = 1 / (4 12^4 kappa^2 (kappa+1)^2 (ell+1))``,
    ``eta2 = 1/(6 ell)``) or ``"gdmsa"`` (eq. (13): ``eta1 = 1/(12 (1+kappa) ell)``, ``eta2 = 1/(6 ell)``,
    ``T = ceil(kappa log(1/eps))``, the O(.) taken with constant 1).
    """
    check_positive("ell", ell, "ell")
    if not (isinstance(kappa, (int, float)) and kappa >= 1):
        raise InvalidParameterError(f"kappa must be >= 1 (kappa = ell / tau), got {kappa!r}")
    if not 0 < eps < 1:
        raise InvalidParameterError(f"eps must lie in (0, 1), got {eps!r}")
    if method == "gda":
        return {
            "eta1": 1.0 / (4.0 * 12.0**4 * kappa**2 * (kappa + 1.0) ** 2 * (ell + 1.0)),
            "eta2": 1.0 / (6.0 * ell),
        }
    if method == "gdmsa":
        return {
            "eta1": 1.0 / (12.0 * (1.0 + kappa) * ell),
            "eta2": 1.0 / (6.0 * ell),
            "T": max(1, math.ceil(kappa * math.log(1.0 / eps))),
        }
    raise InvalidParameterError(f"method must be 'gda' or 'gdmsa', got {method!r}")


def _check_y_set(oracle: CountingOracle, who: str) -> None:
    if oracle.kind != "minimax":
        raise IncompatibleProblemError(f"{who} solves minimax problems, got a {oracle.kind!r} problem")
    if oracle.dim_y < 1:
        raise InvalidInputError(f"{who}: the problem has no y block (dim_y = {oracle.dim_y})")
    ys = oracle.y_set
    if ys is not None and not callable(getattr(ys, "project", None)):
        raise InvalidInputError(
            f"{who}: the problem's y_set ({type(ys).__name__}) has no project() method; the ascent step "
            "y <- Proj_Y(y + eta2 H) needs the Euclidean projection onto Y. Use a set from "
            "zoframe.sets (Box, Ball, Simplex) or y_set=None for all of R^d_y."
        )
    if ys is not None and int(getattr(ys, "dim", oracle.dim_y)) != oracle.dim_y:
        raise InvalidInputError(f"{who}: y_set has dimension {ys.dim} but the y block has {oracle.dim_y}")


def _project_y(oracle: CountingOracle, y: Array) -> Array:
    ys = oracle.y_set
    out = np.array(y if ys is None else ys.project(y), dtype=np.float64, copy=True)
    return out


def concavity_probe(
    oracle: CountingOracle, x: Array, y: Array, rng: np.random.Generator, pairs: int = 3, relative: bool = False
) -> None:
    """Raise if ``f(x, .)`` is detectably not concave around ``y`` (one batched call, purpose ``check``).

    For ``pairs`` random unit directions ``u`` it takes ``p = Proj_Y(y + h u)``, ``r = Proj_Y(y - h u)``
    and their midpoint ``m`` (all in Y) and checks the midpoint inequality of concavity
    ``f(x, m) >= (f(x, p) + f(x, r)) / 2`` up to ``1e-7 (1 + max |f|)`` (the papers' steps), or, with
    ``relative=True`` (``steps="auto"``), up to the rounding of the values and ``1e-6`` of their spread (the
    same verdict whatever the scale of ``f``).
    """
    d2 = oracle.dim_y
    U = rng.standard_normal((pairs, d2))
    U /= np.linalg.norm(U, axis=1, keepdims=True)
    h = 1e-2 * max(1.0, float(np.abs(y).max(initial=0.0)))
    P = _project_y(oracle, y[None, :] + h * U)
    R = _project_y(oracle, y[None, :] - h * U)
    M = 0.5 * (P + R)
    vals = oracle.minimax(x, np.vstack([M, P, R]), purpose="check").mean(axis=1)  # ONE call
    fm, fp, fr = vals[:pairs], vals[pairs : 2 * pairs], vals[2 * pairs :]
    gap = 0.5 * (fp + fr) - fm  # <= 0 for a concave f(x, .)
    if relative:
        scale = max(64.0 * float(np.finfo(np.float64).eps) * float(np.abs(vals).max()), 1e-6 * float(np.ptp(vals)))
    else:
        scale = 1e-7 * (1.0 + np.abs(vals).max())
    worst = int(np.argmax(gap))
    if gap[worst] > scale:
        raise InvalidInputError(
            "the objective is not concave in y: at the starting point f(x, midpoint) is smaller than the "
            f"mean of f at the two ends by {gap[worst]:.3g} (segment of length {2 * h:.3g} in Y). The "
            "ZO-GDA family needs f(x, .) strongly concave (Assumption 1); reformulate the problem, or pass "
            "check_concavity=False to skip this check."
        )


def _sample(oracle: CountingOracle, batch: int | None, rng: np.random.Generator) -> tuple[IntArray | None, Array]:
    """A batch of ``|M|`` samples with replacement as (distinct indices, weights summing to 1)."""
    if batch is None:
        return None, np.full(oracle.n, 1.0 / oracle.n)
    draws = rng.integers(0, oracle.n, size=batch)
    idx, counts = np.unique(draws, return_counts=True)
    return idx.astype(np.intp), counts / float(batch)


def _weighted(values: Array, w: Array) -> Array:
    out: Array = values @ w
    return out


def _check_steps(value: Any) -> None:
    if value not in ("auto", "paper"):
        raise InvalidParameterError(
            f"steps must be 'auto' (steps chosen by the solver, no constants of the problem needed) or 'paper' (the "
            f"papers' fixed steps, as in the reproduction), got {value!r}"
        )


def _check_tol(name: str, value: Any) -> None:
    if value is not None and not (
        isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
        and math.isfinite(float(value)) and value > 0
    ):  # fmt: skip
        raise InvalidParameterError(f"{name} must be None or a finite number > 0 (in the problem's units), got {value!r}")


# --------------------------------------------------------------------------- the shared frame
@dataclass(frozen=True)
class _Minimax(PhasedSolver):
    """What every minimax solver shares: the choice of steps, the refinement's tolerances, the divergence test."""

    problem_kinds: ClassVar[frozenset[str]] = frozenset({"minimax"})
    #: parameters that only shape the papers' iteration (refused with steps="auto")
    paper_only: ClassVar[tuple[str, ...]] = ("eta1", "eta2")
    #: the papers' default steps (section 5)
    paper_eta1: ClassVar[float] = 0.01
    paper_eta2: ClassVar[float] = 0.01
    #: the GDMSA forms (an ascent loop before each descent step)
    multi_step: ClassVar[bool] = False

    steps: str = param("auto", doc="'auto': steps that need no constants, then a refinement where the problem is "
                                    "deterministic; 'paper': the papers' iteration exactly, until the budget")
    refine: bool | None = param(None, doc="steps='auto': refine on Phi after the stochastic phase (None: when every "
                                          "estimate covers all components)")
    gtol: float | None = param(None, doc="refinement: converged when |grad Phi|_inf <= gtol (units of f per unit of x)")
    xtol: float | None = param(None, doc="refinement: converged when a step moves no x_i by more than xtol (units of x)")
    rtol: float = param(1e-8, doc="refinement: converged when each |d Phi / dx_i| <= rtol * its curvature * |x_i|")
    divergence_limit: float = param(1e8, doc="DIVERGED when |x| or |y| exceeds this many times max(1, |x0|_inf)")

    def _check_frame(self) -> None:
        _check_steps(self.steps)
        if self.refine is not None and not isinstance(self.refine, bool):
            raise InvalidParameterError(f"refine must be True, False or None (decided by the problem), got {self.refine!r}")
        _check_tol("gtol", self.gtol)
        _check_tol("xtol", self.xtol)
        check_positive("rtol", self.rtol)
        check_divergence_limit(self.divergence_limit)
        if self.steps == "auto":
            given = [name for name in self.paper_only if getattr(self, name) is not None]
            if given:
                raise InvalidParameterError(
                    f"{', '.join(given)} {'is a parameter' if len(given) == 1 else 'are parameters'} of the papers' "
                    "iteration, which steps='auto' does not use (it chooses its own steps); pass steps='paper' to run "
                    "the papers' iteration with them"
                )

    # ---- resolved paper steps
    @property
    def eta1_(self) -> float:
        """``eta1``, or the papers' default."""
        v = getattr(self, "eta1", None)
        return self.paper_eta1 if v is None else float(v)

    @property
    def eta2_(self) -> float:
        v = getattr(self, "eta2", None)
        return self.paper_eta2 if v is None else float(v)

    @property
    def T_(self) -> int:
        v = getattr(self, "T", None)
        return 10 if v is None else int(v)

    # ---- phases
    def _batches(self) -> tuple[int | None, int | None]:
        return None, None  # deterministic: every component

    def _full(self, oracle: CountingOracle) -> tuple[bool, bool]:
        """Whether each block's estimate covers every component under steps='auto' (a batch of >= n draws does)."""
        b1, b2 = self._batches()
        return (b1 is None or b1 >= oracle.n, b2 is None or b2 >= oracle.n)

    def refines(self, oracle: CountingOracle) -> bool:
        """Whether a run on ``oracle``'s problem under steps='auto' ends with the refinement phase."""
        if self.refine is not None:
            return bool(self.refine)
        return all(self._full(oracle))

    def blocks(self, oracle: CountingOracle) -> Any:
        raise NotImplementedError

    def paper_step(self, oracle: CountingOracle, state: MinimaxState, rng: np.random.Generator) -> MinimaxState:
        raise NotImplementedError

    def paper_start(self, oracle: CountingOracle, carry: Carry, rng: np.random.Generator) -> MinimaxState:
        y = _project_y(oracle, np.asarray(oracle.y0, dtype=np.float64))  # y_0 in Y
        return MinimaxState(x=np.array(carry.x, dtype=np.float64, copy=True), y=y, s=0)

    def phases(self, oracle: CountingOracle) -> Sequence[Any]:
        if self.steps == "paper":
            return (PaperPhase(self),)
        refine = self.refines(oracle)
        rule = StopRule(refine_next=refine)
        blocks = self.blocks(oracle)
        first: Any = (
            MultiStepPhase("adaptive multi-step ascent", blocks, rule, backtrack=all(self._full(oracle)))
            if self.multi_step else TiAdaPhase("adaptive GDA (TiAda)", blocks, rule, calibrate_x=all(self._full(oracle)))
        )  # fmt: skip
        if not refine:
            return (first,)
        return (first, RefinePhase(gtol=self.gtol, xtol=self.xtol, rtol=self.rtol))

    def start_carry(self, oracle: CountingOracle, x0: Array) -> Carry:
        y = _project_y(oracle, np.asarray(oracle.y0, dtype=np.float64))
        return Carry(np.array(x0, dtype=np.float64, copy=True), {"y": y}, "the starting point")

    def validate(self, oracle: CountingOracle) -> None:
        _check_y_set(oracle, type(self).__name__)

    def trace_row(self, state: Any) -> dict[str, float]:
        return {} if self.steps == "paper" else super().trace_row(state)

    def final_notes(self, oracle: CountingOracle, state: Any) -> list[str]:
        return [] if self.steps == "paper" else super().final_notes(oracle, state)


@dataclass(frozen=True)
class PaperPhase:
    """The papers' iteration (one phase, until the budget): the solver's ``paper_step``, the box line by line."""

    solver: Any
    name: str = "paper iteration"

    def start(self, oracle: CountingOracle, carry: Carry, rng: np.random.Generator) -> MinimaxState:
        return self.solver.paper_start(oracle, carry, rng)  # type: ignore[no-any-return]

    def step(self, oracle: CountingOracle, state: MinimaxState, rng: np.random.Generator) -> MinimaxState:
        return self.solver.paper_step(oracle, state, rng)  # type: ignore[no-any-return]

    def end(self, oracle: CountingOracle, state: MinimaxState) -> PhaseEnd | None:
        return None  # the papers run S iterations: the budget ends the run

    def carry(self, state: MinimaxState) -> Carry:
        return Carry(state.x, {"y": state.y})

    def outputs(self, state: MinimaxState) -> Mapping[str, Array]:
        return {"x": state.x, "y": state.y}


# --------------------------------------------------------------------------- zeroth order
@dataclass(frozen=True)
class _SampledBlocks:
    """The sampling both block estimators share: a batch of the block's size (``solver._batches()``) with its
    weights, or all ``n`` components where ``full[block]``."""

    solver: Any
    full: tuple[bool, bool]

    def sample(self, oracle: CountingOracle, block: int, rng: np.random.Generator) -> Sample:
        if self.full[block]:
            return Sample(None, np.full(oracle.n, 1.0 / oracle.n))
        idx, w = _sample(oracle, self.solver._batches()[block], rng)
        return Sample(idx, w)


@dataclass(frozen=True)
class ZOBlocks(_SampledBlocks):
    """The zeroth-order estimates of eqs. (8)-(9) for the auto phases (:class:`zoframe_minimax.adaptive.Blocks`):
    ``(q + 1)`` points per estimate in ONE oracle call, the sample batch of the estimate or all ``n``, the radius
    ``mu1`` / ``mu2`` when given, else ``sqrt(eps)`` times the block's scale."""

    def _mu(self, given: float | None, z: Array, scale: float) -> float:
        if given is not None:
            return float(given)
        rms = float(np.sqrt(np.mean(z * z))) if z.size else 0.0
        return _SQRT_EPS * max(scale, rms if math.isfinite(rms) else 0.0)

    def grad_x(self, oracle: CountingOracle, x: Array, y: Array, s: Sample, rng: np.random.Generator,
               scale: float) -> tuple[Array, float]:  # fmt: skip
        est, _, _, _ = self.solver._estimators(oracle)
        fun: Callable[[Array], Array] = lambda X: _weighted(oracle.minimax(X, y, s.idx), s.w)  # noqa: E731
        e = est.estimate(fun, x, rng, mu=self._mu(self.solver.mu1, x, scale))
        return np.asarray(e.grad, dtype=np.float64), _base(e.values)

    def grad_y(self, oracle: CountingOracle, x: Array, y: Array, s: Sample, rng: np.random.Generator,
               scale: float) -> tuple[Array, float]:  # fmt: skip
        _, _, est, _ = self.solver._estimators(oracle)
        fun: Callable[[Array], Array] = lambda Y: _weighted(oracle.minimax(x, Y, s.idx), s.w)  # noqa: E731
        e = est.estimate(fun, y, rng, mu=self._mu(self.solver.mu2, y, scale))
        return np.asarray(e.grad, dtype=np.float64), _base(e.values)

    def values(self, oracle: CountingOracle, X: Array, Y: Array, s: Sample) -> Array:
        return _weighted(oracle.minimax(X, Y, s.idx, purpose="step"), s.w)


_SQRT_EPS = math.sqrt(float(np.finfo(np.float64).eps))


def _base(values: Any) -> float:
    """The estimate's base value (the function at the base point), ``nan`` when the estimator has none."""
    if values is None:
        return math.nan
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    return float(v[0]) if v.size == 1 else math.nan


@dataclass(frozen=True)
class _ZOMinimax(_Minimax):
    """Shared fields, defaults and estimators of Algorithms 1-4."""

    #: the mu formula of the paper's experiment: "gda" (eq. (12)) or "gdmsa" (eq. (14))
    _mu_rule: ClassVar[str] = "gda"
    paper_only: ClassVar[tuple[str, ...]] = ("eta1", "eta2", "eps", "kappa")
    #: q1/q2 only size the default Gaussian estimators; mu1/mu2 are passed to every estimate (a given
    #: ``estimator`` included, as ``estimate(..., mu=)``), so they are not refused with ``estimator=``
    estimator_only_params: ClassVar[frozenset[str]] = frozenset({"q1", "q2"})

    eta1: float | None = param(None, symbol="eta_1", doc="steps='paper': descent step size in x (None: 0.01, section 5)")
    eta2: float | None = param(None, symbol="eta_2", doc="steps='paper': ascent step size in y (None: 0.01, section 5)")
    q1: int | None = param(None, symbol="q_1", doc="directions per x-estimate (None: 2(d1 + 6))")
    q2: int | None = param(None, symbol="q_2", doc="directions per y-estimate (None: 2(d2 + 6))")
    mu1: float | None = param(None, symbol="mu_1", doc="x smoothing radius (None: section 5 formula, or sqrt(eps) * "
                                                         "the scale of x under steps='auto')")
    mu2: float | None = param(None, symbol="mu_2", doc="y smoothing radius (None: section 5 formula, or sqrt(eps) * "
                                                         "the scale of y under steps='auto')")
    eps: float | None = param(None, symbol="epsilon", doc="steps='paper': target accuracy in the mu formulas (None: 0.01)")
    kappa: float | None = param(None, symbol="kappa", doc="steps='paper': condition number in the mu formulas "
                                                           "(None: 10^(1/3))")
    check_concavity: bool = param(True, doc="probe concavity in y at the start (one small batch)")
    estimator: Estimator | None = param(None, doc="estimator for both blocks (default: gaussian(q, mu))")

    def __post_init__(self) -> None:
        self._check_frame()
        for name in ("eta1", "eta2"):
            v = getattr(self, name)
            if v is not None:
                check_positive(name, v, name.replace("eta", "eta_"))
        for name in ("q1", "q2"):
            v = getattr(self, name)
            if v is not None:
                check_int(name, v)
        for name in ("mu1", "mu2"):
            v = getattr(self, name)
            if v is not None:
                check_positive(name, v)
        if self.eps is not None and not (isinstance(self.eps, (int, float)) and 0 < self.eps < 1):
            raise InvalidParameterError(f"eps (epsilon) must lie in (0, 1), got {self.eps!r}")
        if self.kappa is not None and not (
            isinstance(self.kappa, (int, float)) and math.isfinite(self.kappa) and self.kappa >= 1
        ):  # fmt: skip
            raise InvalidParameterError(f"kappa must be a finite number >= 1 (kappa = ell / tau), got {self.kappa!r}")
        if not isinstance(self.check_concavity, bool):
            raise InvalidParameterError("check_concavity must be True or False")

    # ---- resolved hyper-parameters (the paper's defaults need the dimensions)
    def directions(self, d1: int, d2: int) -> tuple[int, int]:
        """``(q1, q2)``; the paper's ``q = 2(d + 6)`` unless given."""
        return (2 * (d1 + 6) if self.q1 is None else int(self.q1), 2 * (d2 + 6) if self.q2 is None else int(self.q2))

    def radii(self, d1: int, d2: int) -> tuple[float, float]:
        """``(mu1, mu2)``: section 5's instances of eqs. (12) / (14) unless given."""
        e = 0.01 if self.eps is None else float(self.eps)
        k = PAPER_KAPPA if self.kappa is None else float(self.kappa)
        if self._mu_rule == "gda":  # eq. (12): mu = 1.5 eps d^-3/2 kappa^-2
            m1, m2 = 1.5 * e * d1**-1.5 / k**2, 1.5 * e * d2**-1.5 / k**2
        else:  # eq. (14): mu1 = 1.5 eps d1^-3/2, mu2 = 1.5 kappa^-1/2 d2^-3/2 eps
            m1, m2 = 1.5 * e * d1**-1.5, 1.5 * e * d2**-1.5 / math.sqrt(k)
        return (m1 if self.mu1 is None else float(self.mu1), m2 if self.mu2 is None else float(self.mu2))

    def _estimators(self, oracle: CountingOracle) -> tuple[Estimator, float, Estimator, float]:
        q1, q2 = self.directions(oracle.dim, oracle.dim_y)
        m1, m2 = self.radii(oracle.dim, oracle.dim_y)
        if self.estimator is not None:
            return self.estimator, m1, self.estimator, m2
        return GaussianEstimator(q=q1, mu=m1), m1, GaussianEstimator(q=q2, mu=m2), m2

    def _estimate_cost(self, oracle: CountingOracle) -> tuple[int, int]:
        """Evaluations of one x-estimate and one y-estimate with all ``n`` components."""
        ex, _, ey, _ = self._estimators(oracle)
        return ex.rows(oracle.dim) * oracle.n, ey.rows(oracle.dim_y) * oracle.n

    # ---- the two estimates of eqs. (8)-(9): ONE oracle call each
    def G(self, oracle: CountingOracle, x: Array, y: Array, rng: np.random.Generator) -> Array:
        """``G_mu1(x, y, u_[q1])`` (or its sample-batch form, eq. (9))."""
        est, mu, _, _ = self._estimators(oracle)
        idx, w = _sample(oracle, self._batches()[0], rng)
        fun: Callable[[Array], Array] = lambda X: _weighted(oracle.minimax(X, y, idx), w)  # noqa: E731
        out: Array = est.estimate(fun, x, rng, mu=mu).grad
        return out

    def H(self, oracle: CountingOracle, x: Array, y: Array, rng: np.random.Generator) -> Array:
        """``H_mu2(x, y, u_[q2])`` (or its sample-batch form, eq. (9))."""
        _, _, est, mu = self._estimators(oracle)
        idx, w = _sample(oracle, self._batches()[1], rng)
        fun: Callable[[Array], Array] = lambda Y: _weighted(oracle.minimax(x, Y, idx), w)  # noqa: E731
        out: Array = est.estimate(fun, y, rng, mu=mu).grad
        return out

    def blocks(self, oracle: CountingOracle) -> ZOBlocks:
        return ZOBlocks(self, self._full(oracle))

    # ---- protocol
    def paper_start(self, oracle: CountingOracle, carry: Carry, rng: np.random.Generator) -> MinimaxState:
        state = super().paper_start(oracle, carry, rng)
        if self.check_concavity:
            concavity_probe(oracle, state.x, state.y, rng)
        return state

    def init(self, oracle: CountingOracle, x0: Array, rng: np.random.Generator) -> Any:
        if self.steps == "auto" and self.check_concavity:
            y = _project_y(oracle, np.asarray(oracle.y0, dtype=np.float64))
            concavity_probe(oracle, np.array(x0, dtype=np.float64), y, rng, relative=True)
        return super().init(oracle, x0, rng)

    def _paper_cost(self, oracle: CountingOracle) -> int:
        raise NotImplementedError

    @property
    def calls_per_step(self) -> Callable[[CountingOracle], int] | None:
        """Evaluations of one step under steps='paper' (``None`` under steps='auto', whose steps vary)."""
        return self._paper_cost if self.steps == "paper" else None


@dataclass(frozen=True)
class _GDA(_ZOMinimax):
    """The loop of Algorithms 1 and 3 (the estimates decide deterministic or stochastic)."""

    def paper_step(self, oracle: CountingOracle, state: MinimaxState, rng: np.random.Generator) -> MinimaxState:
        x, y = state.x, state.y
        x_next = x - self.eta1_ * self.G(oracle, x, y, rng)  # Alg. 1 (3) l.1
        y_next = _project_y(oracle, y + self.eta2_ * self.H(oracle, x, y, rng))  # Alg. 1 (3) l.2
        return MinimaxState(x=x_next, y=y_next, s=state.s + 1)


@dataclass(frozen=True)
class ZOGDA(_GDA):
    """ZO-GDA: zeroth-order gradient descent ascent.

    Wang, Balasubramanian, Ma & Razaviyayn, *Zeroth-Order Algorithms for Nonconvex-Strongly-Concave
    Minimax Problems with Improved Complexities*, Algorithm 1 (deterministic oracle, all components):

    l.1  x_{s+1} <- x_s - eta1 G_mu1(x_s, y_s, u_{1,[q1]}),   q1 = 2(d1 + 6)
    l.2  y_{s+1} <- Proj_Y[y_s + eta2 H_mu2(x_s, y_s, u_{2,[q2]})],   q2 = 2(d2 + 6)

    Both estimates at the old pair ``(x_s, y_s)``. ``steps="paper"``: section 5's steps (0.01, 0.01) and
    ``mu = 1.5 eps d^-3/2 kappa^-2`` (eq. (12)); the theorem's steps (eq. (11)) through
    :func:`with_theory_steps` (they are tiny: ``eta1 ~ 1e-7`` for kappa = 2). ``steps="auto"`` (default): the
    same estimates with TiAda's steps (:class:`zoframe_minimax.adaptive.TiAdaPhase`), then the refinement on
    ``Phi`` (:class:`zoframe_minimax.refine.RefinePhase`).
    """

    def _paper_cost(self, oracle: CountingOracle) -> int:
        """``(q1 + 1) n + (q2 + 1) n``: one x- and one y-estimate over all components."""
        cx, cy = self._estimate_cost(oracle)
        return cx + cy


@dataclass(frozen=True)
class _GDMSA(_ZOMinimax):
    """The loop of Algorithms 2 and 4 (the estimates decide deterministic or stochastic)."""

    _mu_rule: ClassVar[str] = "gdmsa"
    paper_eta1: ClassVar[float] = 0.001
    paper_only: ClassVar[tuple[str, ...]] = ("eta1", "eta2", "eps", "kappa", "T")
    multi_step: ClassVar[bool] = True
    eta1: float | None = param(None, symbol="eta_1", doc="steps='paper': descent step size in x (None: 0.001, section 5)")
    T: int | None = param(None, symbol="T", doc="steps='paper': ascent steps per descent step (None: 10 = "
                                                "ceil(kappa log(1/eps)) in section 5)")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.T is not None:
            check_int("T", self.T)

    def paper_step(self, oracle: CountingOracle, state: MinimaxState, rng: np.random.Generator) -> MinimaxState:
        x = state.x
        y_t = state.y  # Alg. 2 (4) l.1
        for _ in range(self.T_):
            y_t = _project_y(oracle, y_t + self.eta2_ * self.H(oracle, x, y_t, rng))  # Alg. 2 (4) l.2
        y_next = y_t  # Alg. 2 (4) l.3
        x_next = x - self.eta1_ * self.G(oracle, x, y_next, rng)  # Alg. 2 (4) l.4
        return MinimaxState(x=x_next, y=y_next, s=state.s + 1)


@dataclass(frozen=True)
class ZOGDMSA(_GDMSA):
    """ZO-GDMSA: zeroth-order gradient descent multi-step ascent.

    Wang, Balasubramanian, Ma & Razaviyayn, Algorithm 2 (deterministic oracle, all components):

    l.1  y_0(x_s) <- y_s
    l.2  for t = 1..T:  y_t(x_s) <- Proj_Y(y_{t-1}(x_s) + eta2 H_mu2(x_s, y_{t-1}(x_s), u_{2,[q2]}))
    l.3  y_{s+1} <- y_T(x_s)
    l.4  x_{s+1} <- x_s - eta1 G_mu1(x_s, y_{s+1}, u_{1,[q1]})

    ``steps="paper"``: section 5's steps (eta1 = 0.001, eta2 = 0.01), ``T = 10``, ``mu1 = 1.5 eps d1^-3/2``,
    ``mu2 = 1.5 kappa^-1/2 d2^-3/2 eps`` (eq. (14)); eq. (13)'s steps via :func:`with_theory_steps`.
    ``steps="auto"`` (default): l.2 run to a tolerance with backtracked steps and l.4 with an AdaGrad-norm step
    (:class:`zoframe_minimax.adaptive.MultiStepPhase`), then the refinement on ``Phi``.
    """

    def _paper_cost(self, oracle: CountingOracle) -> int:
        """``T (q2 + 1) n + (q1 + 1) n``."""
        cx, cy = self._estimate_cost(oracle)
        return self.T_ * cy + cx


@dataclass(frozen=True)
class _Stochastic:
    """Mixin: the sample batches ``|M1|``, ``|M2|`` of Algorithms 3-4 (drawn with replacement)."""

    batch1: int | None = param(10_000, symbol="|M_1|", doc="samples per x-estimate (1/eps^2 as in section 5; None: all n)")
    batch2: int | None = param(10_000, symbol="|M_2|", doc="samples per y-estimate (1/eps^2; None: all n)")

    def _check_batches(self) -> None:
        for name in ("batch1", "batch2"):
            v = getattr(self, name)
            if v is not None:
                check_int(name, v)

    def _batches(self) -> tuple[int | None, int | None]:
        return self.batch1, self.batch2


@dataclass(frozen=True)
class ZOSGDA(_Stochastic, _GDA):
    """ZO-SGDA: zeroth-order stochastic gradient descent ascent.

    Wang, Balasubramanian, Ma & Razaviyayn, Algorithm 3 (finite-sum oracle ``f = (1/n) sum_i F_i``):

    l.1  x_{s+1} <- x_s - eta1 (1/|M1|) sum_{i in M1} G_mu1(x_s, y_s, u_{1,i}, xi_i)
    l.2  y_{s+1} <- Proj_Y[y_s + eta2 (1/|M2|) sum_{i in M2} H_mu2(x_s, y_s, u_{2,i}, xi_i)]

    ``M1``, ``M2``: fresh batches of ``batch1``, ``batch2`` samples drawn with replacement; the
    ``q1``/``q2`` directions are shared by the batch (see the module docstring). ``steps="auto"``: as
    :class:`ZOGDA`, the refinement only where the batches cover all ``n`` components (or ``refine=True``).
    """

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_batches()

    @property
    def calls_per_step(self) -> Callable[[CountingOracle], int] | None:
        return None  # the distinct draws of a batch vary


@dataclass(frozen=True)
class ZOSGDMSA(_Stochastic, _GDMSA):
    """ZO-SGDMSA: zeroth-order stochastic gradient descent multi-step ascent.

    Wang, Balasubramanian, Ma & Razaviyayn, Algorithm 4 (finite-sum oracle):

    l.1  y_0(x_s) <- y_s
    l.2  for t = 1..T:  y_t(x_s) <- Proj_Y[y_{t-1}(x_s) + eta2 (1/|M2|) sum_{i in M2} H_mu2(x_s, y_{t-1}(x_s), u_{2,i}, xi_i)]
    l.3  y_{s+1} <- y_T(x_s)
    l.4  x_{s+1} <- x_s - eta1 (1/|M1|) sum_{i in M1} G_mu1(x_s, y_{s+1}, u_{1,i}, xi_i)

    A fresh batch ``M2`` at every inner step and ``M1`` for the descent step. ``steps="auto"``: as
    :class:`ZOGDMSA`, the refinement only where the batches cover all ``n`` components (or ``refine=True``).
    """

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_batches()

    @property
    def calls_per_step(self) -> Callable[[CountingOracle], int] | None:
        return None  # the distinct draws of a batch vary


# --------------------------------------------------------------------------- first order
@dataclass(frozen=True)
class FOBlocks(_SampledBlocks):
    """White-box stochastic gradients for the auto phases: one gradient call per estimate (purpose ``gradient``),
    one value call per trial point (purpose ``step``)."""

    def _grads(self, oracle: CountingOracle, x: Array, y: Array, s: Sample) -> tuple[Array, Array]:
        gx, gy = oracle.minimax_gradients(x, y, s.idx)
        return s.w @ gx, s.w @ gy

    def grad_x(self, oracle: CountingOracle, x: Array, y: Array, s: Sample, rng: np.random.Generator,
               scale: float) -> tuple[Array, float]:  # fmt: skip
        return self._grads(oracle, x, y, s)[0], math.nan

    def grad_y(self, oracle: CountingOracle, x: Array, y: Array, s: Sample, rng: np.random.Generator,
               scale: float) -> tuple[Array, float]:  # fmt: skip
        return self._grads(oracle, x, y, s)[1], math.nan

    def values(self, oracle: CountingOracle, X: Array, Y: Array, s: Sample) -> Array:
        return _weighted(oracle.minimax(X, Y, s.idx, purpose="step"), s.w)


@dataclass(frozen=True)
class _FOMinimax(_Minimax):
    """Shared parts of the first-order references (true stochastic gradients, counted)."""

    eta1: float | None = param(None, symbol="eta_1", doc="steps='paper': descent step size in x (None: 0.01)")
    eta2: float | None = param(None, symbol="eta_2", doc="steps='paper': ascent step size in y (None: 0.01)")
    batch1: int | None = param(10_000, symbol="|M_1|", doc="samples per x-gradient (1/eps^2 in section 5; None: all n)")
    batch2: int | None = param(10_000, symbol="|M_2|", doc="samples per y-gradient (None: all n)")

    def __post_init__(self) -> None:
        self._check_frame()
        for name in ("eta1", "eta2"):
            v = getattr(self, name)
            if v is not None:
                check_positive(name, v, name.replace("eta", "eta_"))
        for name in ("batch1", "batch2"):
            v = getattr(self, name)
            if v is not None:
                check_int(name, v)

    def _batches(self) -> tuple[int | None, int | None]:
        return self.batch1, self.batch2

    def validate(self, oracle: CountingOracle) -> None:
        _check_y_set(oracle, type(self).__name__)
        if not oracle.has_minimax_gradient:
            raise InvalidInputError(
                f"{type(self).__name__} is a first-order reference and needs white-box gradients: the problem "
                "must implement minimax_gradients(x, y, idx) (HasMinimaxGradient). Use a zeroth-order solver "
                "(zo-sgda, zo-sgdmsa) on black-box problems."
            )

    def blocks(self, oracle: CountingOracle) -> FOBlocks:
        return FOBlocks(self, self._full(oracle))

    def grads(self, oracle: CountingOracle, x: Array, y: Array, batch: int | None, rng: np.random.Generator) -> tuple[Array, Array]:
        """Batch-averaged ``(grad_x F, grad_y F)`` over ``batch`` samples drawn with replacement (one call)."""
        idx, w = _sample(oracle, batch, rng)
        gx, gy = oracle.minimax_gradients(x, y, idx)
        return w @ gx, w @ gy


@dataclass(frozen=True)
class SGDA(_FOMinimax):
    """SGDA (first order, reference curves): Algorithm 3 with true stochastic gradients.

    Lin, Jin & Jordan, *On gradient descent ascent for nonconvex-concave minimax problems*, ICML 2020;
    the first-order counterpart in Wang et al., section 5:

    l.1  x_{s+1} <- x_s - eta1 (1/|M1|) sum_{i in M1} grad_x F(x_s, y_s, xi_i)
    l.2  y_{s+1} <- Proj_Y[y_s + eta2 (1/|M2|) sum_{i in M2} grad_y F(x_s, y_s, xi_i)]

    ``steps="auto"``: TiAda's steps on the same gradients, then (deterministic problems) the refinement on
    ``Phi`` from values (:class:`zoframe_minimax.refine.RefinePhase`).
    """

    def paper_step(self, oracle: CountingOracle, state: MinimaxState, rng: np.random.Generator) -> MinimaxState:
        x, y = state.x, state.y
        gx, _ = self.grads(oracle, x, y, self.batch1, rng)
        x_next = x - self.eta1_ * gx  # Alg. 3 l.1 (first order)
        _, gy = self.grads(oracle, x, y, self.batch2, rng)
        y_next = _project_y(oracle, y + self.eta2_ * gy)  # Alg. 3 l.2 (first order)
        return MinimaxState(x=x_next, y=y_next, s=state.s + 1)


@dataclass(frozen=True)
class SGDMSA(_FOMinimax):
    """SGDMSA (first order, reference curves): Algorithm 4 with true stochastic gradients.

    Nouiehed, Sanjabi, Huang, Lee & Razaviyayn, *Solving a class of non-convex min-max games using
    iterative first order methods*, NeurIPS 2019; the first-order counterpart in Wang et al., section 5:

    l.1  y_0 <- y_s;  l.2  for t = 1..T: y_t <- Proj_Y[y_{t-1} + eta2 (1/|M2|) sum grad_y F(x_s, y_{t-1}, xi_i)]
    l.3  y_{s+1} <- y_T;  l.4  x_{s+1} <- x_s - eta1 (1/|M1|) sum grad_x F(x_s, y_{s+1}, xi_i)

    ``steps="auto"``: the ascent to a tolerance and the AdaGrad-norm descent step on the same gradients, then
    (deterministic problems) the refinement on ``Phi``.
    """

    paper_eta1: ClassVar[float] = 0.001
    paper_only: ClassVar[tuple[str, ...]] = ("eta1", "eta2", "T")
    multi_step: ClassVar[bool] = True
    eta1: float | None = param(None, symbol="eta_1", doc="steps='paper': descent step size in x (None: 0.001, section 5)")
    T: int | None = param(None, symbol="T", doc="steps='paper': ascent steps per descent step (None: 10)")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.T is not None:
            check_int("T", self.T)

    def paper_step(self, oracle: CountingOracle, state: MinimaxState, rng: np.random.Generator) -> MinimaxState:
        x = state.x
        y_t = state.y  # Alg. 4 l.1
        for _ in range(self.T_):
            _, gy = self.grads(oracle, x, y_t, self.batch2, rng)
            y_t = _project_y(oracle, y_t + self.eta2_ * gy)  # Alg. 4 l.2
        y_next = y_t  # Alg. 4 l.3
        gx, _ = self.grads(oracle, x, y_next, self.batch1, rng)
        x_next = x - self.eta1_ * gx  # Alg. 4 l.4
        return MinimaxState(x=x_next, y=y_next, s=state.s + 1)


def with_theory_steps(solver: Any, ell: float, kappa: float, eps: float = 0.01) -> Any:
    """A copy of a GDA-type or GDMSA-type solver running the papers' iteration (``steps="paper"``) with the
    theorem's step sizes (eqs. (11) / (13))."""
    method = "gdmsa" if getattr(solver, "multi_step", False) else "gda"
    steps = theory_step_sizes(method, ell, kappa, eps)
    return dataclasses.replace(solver, steps="paper", **steps)
