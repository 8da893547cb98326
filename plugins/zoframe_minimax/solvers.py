"""ZO-GDA, ZO-GDMSA, ZO-SGDA, ZO-SGDMSA and the first-order references SGDA, SGDMSA.

Wang, Balasubramanian, Ma & Razaviyayn, *Zeroth-Order Algorithms for Nonconvex-Strongly-Concave
Minimax Problems with Improved Complexities* (J. Global Optim. 2023; arXiv:2001.07819),
Algorithms 1-4, for ``min_x max_{y in Y} f(x, y)`` with ``f(x, .)`` strongly concave.

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
evaluations); the oracle counts the evaluations actually made.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
import dataclasses
from dataclasses import dataclass
import math
from typing import Any, ClassVar

import numpy as np

from zoframe.errors import IncompatibleProblemError, InvalidInputError, InvalidParameterError
from zoframe.estimators import GaussianEstimator
from zoframe.oracle import CountingOracle
from zoframe.protocols import Array, Estimator, IntArray
from zoframe.solver import SolverBase, check_int, check_positive
from zoframe.specs import param

__all__ = [
    "SGDA",
    "SGDMSA",
    "ZOGDA",
    "ZOGDMSA",
    "ZOSGDA",
    "ZOSGDMSA",
    "MinimaxState",
    "concavity_probe",
    "theory_step_sizes",
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


def concavity_probe(oracle: CountingOracle, x: Array, y: Array, rng: np.random.Generator, pairs: int = 3) -> None:
    """Raise if ``f(x, .)`` is detectably not concave around ``y`` (one batched call, purpose ``check``).

    For ``pairs`` random unit directions ``u`` it takes ``p = Proj_Y(y + h u)``, ``r = Proj_Y(y - h u)``
    and their midpoint ``m`` (all in Y) and checks the midpoint inequality of concavity
    ``f(x, m) >= (f(x, p) + f(x, r)) / 2`` up to rounding.
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


# --------------------------------------------------------------------------- zeroth order
@dataclass(frozen=True)
class _ZOMinimax(SolverBase):
    """Shared fields, defaults and estimators of Algorithms 1-4."""

    problem_kinds: ClassVar[frozenset[str]] = frozenset({"minimax"})
    #: the mu formula of the paper's experiment: "gda" (eq. (12)) or "gdmsa" (eq. (14))
    _mu_rule: ClassVar[str] = "gda"
    #: q1/q2 only size the default Gaussian estimators; mu1/mu2 are passed to every estimate (a given
    #: ``estimator`` included, as ``estimate(..., mu=)``), so they are not refused with ``estimator=``
    estimator_only_params: ClassVar[frozenset[str]] = frozenset({"q1", "q2"})

    eta1: float = param(0.01, symbol="eta_1", doc="descent step size in x (section 5: 0.01)")
    eta2: float = param(0.01, symbol="eta_2", doc="ascent step size in y (section 5: 0.01)")
    q1: int | None = param(None, symbol="q_1", doc="directions per x-estimate (None: 2(d1 + 6))")
    q2: int | None = param(None, symbol="q_2", doc="directions per y-estimate (None: 2(d2 + 6))")
    mu1: float | None = param(None, symbol="mu_1", doc="x smoothing radius (None: section 5 formula)")
    mu2: float | None = param(None, symbol="mu_2", doc="y smoothing radius (None: section 5 formula)")
    eps: float = param(0.01, symbol="epsilon", doc="target accuracy in the mu formulas")
    kappa: float = param(PAPER_KAPPA, symbol="kappa", doc="condition number in the mu formulas (10^(1/3))")
    check_concavity: bool = param(True, doc="probe concavity in y at the start (one small batch)")
    estimator: Estimator | None = param(None, doc="estimator for both blocks (default: gaussian(q, mu))")

    def __post_init__(self) -> None:
        check_positive("eta1", self.eta1, "eta_1")
        check_positive("eta2", self.eta2, "eta_2")
        for name in ("q1", "q2"):
            v = getattr(self, name)
            if v is not None:
                check_int(name, v)
        for name in ("mu1", "mu2"):
            v = getattr(self, name)
            if v is not None:
                check_positive(name, v)
        if not (isinstance(self.eps, (int, float)) and 0 < self.eps < 1):
            raise InvalidParameterError(f"eps (epsilon) must lie in (0, 1), got {self.eps!r}")
        if not (isinstance(self.kappa, (int, float)) and math.isfinite(self.kappa) and self.kappa >= 1):
            raise InvalidParameterError(f"kappa must be a finite number >= 1 (kappa = ell / tau), got {self.kappa!r}")
        if not isinstance(self.check_concavity, bool):
            raise InvalidParameterError("check_concavity must be True or False")

    # ---- resolved hyper-parameters (the paper's defaults need the dimensions)
    def directions(self, d1: int, d2: int) -> tuple[int, int]:
        """``(q1, q2)``; the paper's ``q = 2(d + 6)`` unless given."""
        return (2 * (d1 + 6) if self.q1 is None else int(self.q1), 2 * (d2 + 6) if self.q2 is None else int(self.q2))

    def radii(self, d1: int, d2: int) -> tuple[float, float]:
        """``(mu1, mu2)``: section 5's instances of eqs. (12) / (14) unless given."""
        e, k = self.eps, self.kappa
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

    def _batches(self) -> tuple[int | None, int | None]:
        return None, None  # deterministic: every component

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

    # ---- protocol
    def validate(self, oracle: CountingOracle) -> None:
        _check_y_set(oracle, type(self).__name__)

    def init(self, oracle: CountingOracle, x0: Array, rng: np.random.Generator) -> MinimaxState:
        x = np.array(x0, dtype=np.float64, copy=True)
        y = _project_y(oracle, np.asarray(oracle.y0, dtype=np.float64))  # y_0 in Y
        if self.check_concavity:
            concavity_probe(oracle, x, y, rng)
        return MinimaxState(x=x, y=y, s=0)

    def outputs(self, state: Any) -> Mapping[str, Array]:
        return {"x": state.x, "y": state.y}


@dataclass(frozen=True)
class _MultiStep:
    """Mixin: the inner-loop length ``T`` of Algorithms 2 and 4."""

    T: int = param(10, symbol="T", doc="ascent steps per descent step (ceil(kappa log(1/eps)) = 10 in section 5)")


@dataclass(frozen=True)
class _GDA(_ZOMinimax):
    """The loop of Algorithms 1 and 3 (the estimates decide deterministic or stochastic)."""

    def step(self, oracle: CountingOracle, state: MinimaxState, rng: np.random.Generator) -> MinimaxState:
        x, y = state.x, state.y
        x_next = x - self.eta1 * self.G(oracle, x, y, rng)  # Alg. 1 (3) l.1
        y_next = _project_y(oracle, y + self.eta2 * self.H(oracle, x, y, rng))  # Alg. 1 (3) l.2
        return MinimaxState(x=x_next, y=y_next, s=state.s + 1)


@dataclass(frozen=True)
class ZOGDA(_GDA):
    """ZO-GDA: zeroth-order gradient descent ascent.

    Wang, Balasubramanian, Ma & Razaviyayn, *Zeroth-Order Algorithms for Nonconvex-Strongly-Concave
    Minimax Problems with Improved Complexities*, Algorithm 1 (deterministic oracle, all components):

    l.1  x_{s+1} <- x_s - eta1 G_mu1(x_s, y_s, u_{1,[q1]}),   q1 = 2(d1 + 6)
    l.2  y_{s+1} <- Proj_Y[y_s + eta2 H_mu2(x_s, y_s, u_{2,[q2]})],   q2 = 2(d2 + 6)

    Both estimates at the old pair ``(x_s, y_s)``. Defaults: section 5's steps (0.01, 0.01) and
    ``mu = 1.5 eps d^-3/2 kappa^-2`` (eq. (12)); the theorem's steps (eq. (11)) are available through
    :func:`theory_step_sizes` (they are tiny: ``eta1 ~ 1e-7`` for kappa = 2).
    """

    def calls_per_step(self, oracle: CountingOracle) -> int:
        """``(q1 + 1) n + (q2 + 1) n``: one x- and one y-estimate over all components."""
        cx, cy = self._estimate_cost(oracle)
        return cx + cy


@dataclass(frozen=True)
class _GDMSA(_MultiStep, _ZOMinimax):
    """The loop of Algorithms 2 and 4 (the estimates decide deterministic or stochastic)."""

    _mu_rule: ClassVar[str] = "gdmsa"
    eta1: float = param(0.001, symbol="eta_1", doc="descent step size in x (section 5: 0.001)")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("T", self.T)

    def step(self, oracle: CountingOracle, state: MinimaxState, rng: np.random.Generator) -> MinimaxState:
        x = state.x
        y_t = state.y  # Alg. 2 (4) l.1
        for _ in range(self.T):
            y_t = _project_y(oracle, y_t + self.eta2 * self.H(oracle, x, y_t, rng))  # Alg. 2 (4) l.2
        y_next = y_t  # Alg. 2 (4) l.3
        x_next = x - self.eta1 * self.G(oracle, x, y_next, rng)  # Alg. 2 (4) l.4
        return MinimaxState(x=x_next, y=y_next, s=state.s + 1)


@dataclass(frozen=True)
class ZOGDMSA(_GDMSA):
    """ZO-GDMSA: zeroth-order gradient descent multi-step ascent.

    Wang, Balasubramanian, Ma & Razaviyayn, Algorithm 2 (deterministic oracle, all components):

    l.1  y_0(x_s) <- y_s
    l.2  for t = 1..T:  y_t(x_s) <- Proj_Y(y_{t-1}(x_s) + eta2 H_mu2(x_s, y_{t-1}(x_s), u_{2,[q2]}))
    l.3  y_{s+1} <- y_T(x_s)
    l.4  x_{s+1} <- x_s - eta1 G_mu1(x_s, y_{s+1}, u_{1,[q1]})

    Defaults: section 5's steps (eta1 = 0.001, eta2 = 0.01), ``mu1 = 1.5 eps d1^-3/2``,
    ``mu2 = 1.5 kappa^-1/2 d2^-3/2 eps`` (eq. (14)); eq. (13)'s steps via :func:`theory_step_sizes`.
    """

    def calls_per_step(self, oracle: CountingOracle) -> int:
        """``T (q2 + 1) n + (q1 + 1) n``."""
        cx, cy = self._estimate_cost(oracle)
        return self.T * cy + cx


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
    ``q1``/``q2`` directions are shared by the batch (see the module docstring).
    """

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_batches()


@dataclass(frozen=True)
class ZOSGDMSA(_Stochastic, _GDMSA):
    """ZO-SGDMSA: zeroth-order stochastic gradient descent multi-step ascent.

    Wang, Balasubramanian, Ma & Razaviyayn, Algorithm 4 (finite-sum oracle):

    l.1  y_0(x_s) <- y_s
    l.2  for t = 1..T:  y_t(x_s) <- Proj_Y[y_{t-1}(x_s) + eta2 (1/|M2|) sum_{i in M2} H_mu2(x_s, y_{t-1}(x_s), u_{2,i}, xi_i)]
    l.3  y_{s+1} <- y_T(x_s)
    l.4  x_{s+1} <- x_s - eta1 (1/|M1|) sum_{i in M1} G_mu1(x_s, y_{s+1}, u_{1,i}, xi_i)

    A fresh batch ``M2`` at every inner step and ``M1`` for the descent step.
    """

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_batches()


# --------------------------------------------------------------------------- first order
@dataclass(frozen=True)
class _FOMinimax(SolverBase):
    """Shared parts of the first-order references (true stochastic gradients, counted)."""

    problem_kinds: ClassVar[frozenset[str]] = frozenset({"minimax"})
    eta1: float = param(0.01, symbol="eta_1", doc="descent step size in x")
    eta2: float = param(0.01, symbol="eta_2", doc="ascent step size in y")
    batch1: int | None = param(10_000, symbol="|M_1|", doc="samples per x-gradient (1/eps^2 in section 5; None: all n)")
    batch2: int | None = param(10_000, symbol="|M_2|", doc="samples per y-gradient (None: all n)")

    def __post_init__(self) -> None:
        check_positive("eta1", self.eta1, "eta_1")
        check_positive("eta2", self.eta2, "eta_2")
        for name in ("batch1", "batch2"):
            v = getattr(self, name)
            if v is not None:
                check_int(name, v)

    def validate(self, oracle: CountingOracle) -> None:
        _check_y_set(oracle, type(self).__name__)
        if not oracle.has_minimax_gradient:
            raise InvalidInputError(
                f"{type(self).__name__} is a first-order reference and needs white-box gradients: the problem "
                "must implement minimax_gradients(x, y, idx) (HasMinimaxGradient). Use a zeroth-order solver "
                "(zo-sgda, zo-sgdmsa) on black-box problems."
            )

    def init(self, oracle: CountingOracle, x0: Array, rng: np.random.Generator) -> MinimaxState:
        y = _project_y(oracle, np.asarray(oracle.y0, dtype=np.float64))
        return MinimaxState(x=np.array(x0, dtype=np.float64, copy=True), y=y, s=0)

    def grads(self, oracle: CountingOracle, x: Array, y: Array, batch: int | None, rng: np.random.Generator) -> tuple[Array, Array]:
        """Batch-averaged ``(grad_x F, grad_y F)`` over ``batch`` samples drawn with replacement (one call)."""
        idx, w = _sample(oracle, batch, rng)
        gx, gy = oracle.minimax_gradients(x, y, idx)
        return w @ gx, w @ gy

    def outputs(self, state: Any) -> Mapping[str, Array]:
        return {"x": state.x, "y": state.y}


@dataclass(frozen=True)
class SGDA(_FOMinimax):
    """SGDA (first order, reference curves): Algorithm 3 with true stochastic gradients.

    Lin, Jin & Jordan, *On gradient descent ascent for nonconvex-concave minimax problems*, ICML 2020;
    the first-order counterpart in Wang et al., section 5:

    l.1  x_{s+1} <- x_s - eta1 (1/|M1|) sum_{i in M1} grad_x F(x_s, y_s, xi_i)
    l.2  y_{s+1} <- Proj_Y[y_s + eta2 (1/|M2|) sum_{i in M2} grad_y F(x_s, y_s, xi_i)]
    """

    def step(self, oracle: CountingOracle, state: MinimaxState, rng: np.random.Generator) -> MinimaxState:
        x, y = state.x, state.y
        gx, _ = self.grads(oracle, x, y, self.batch1, rng)
        x_next = x - self.eta1 * gx  # Alg. 3 l.1 (first order)
        _, gy = self.grads(oracle, x, y, self.batch2, rng)
        y_next = _project_y(oracle, y + self.eta2 * gy)  # Alg. 3 l.2 (first order)
        return MinimaxState(x=x_next, y=y_next, s=state.s + 1)


@dataclass(frozen=True)
class SGDMSA(_FOMinimax):
    """SGDMSA (first order, reference curves): Algorithm 4 with true stochastic gradients.

    Nouiehed, Sanjabi, Huang, Lee & Razaviyayn, *Solving a class of non-convex min-max games using
    iterative first order methods*, NeurIPS 2019; the first-order counterpart in Wang et al., section 5:

    l.1  y_0 <- y_s;  l.2  for t = 1..T: y_t <- Proj_Y[y_{t-1} + eta2 (1/|M2|) sum grad_y F(x_s, y_{t-1}, xi_i)]
    l.3  y_{s+1} <- y_T;  l.4  x_{s+1} <- x_s - eta1 (1/|M1|) sum grad_x F(x_s, y_{s+1}, xi_i)
    """

    eta1: float = param(0.001, symbol="eta_1", doc="descent step size in x (section 5: 0.001)")
    T: int = param(10, symbol="T", doc="ascent steps per descent step")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("T", self.T)

    def step(self, oracle: CountingOracle, state: MinimaxState, rng: np.random.Generator) -> MinimaxState:
        x = state.x
        y_t = state.y  # Alg. 4 l.1
        for _ in range(self.T):
            _, gy = self.grads(oracle, x, y_t, self.batch2, rng)
            y_t = _project_y(oracle, y_t + self.eta2 * gy)  # Alg. 4 l.2
        y_next = y_t  # Alg. 4 l.3
        gx, _ = self.grads(oracle, x, y_next, self.batch1, rng)
        x_next = x - self.eta1 * gx  # Alg. 4 l.4
        return MinimaxState(x=x_next, y=y_next, s=state.s + 1)


def with_theory_steps(solver: Any, ell: float, kappa: float, eps: float = 0.01) -> Any:
    """A copy of a GDA-type or GDMSA-type solver with the theorem's step sizes (eqs. (11) / (13))."""
    method = "gdmsa" if isinstance(solver, (_GDMSA, SGDMSA)) else "gda"
    steps = theory_step_sizes(method, ell, kappa, eps)
    return dataclasses.replace(solver, **steps)
