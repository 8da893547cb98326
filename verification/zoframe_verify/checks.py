"""Stationarity reports of a candidate point, one per problem kind.

* :func:`kkt_report` (constrained): ``eps1, eps2, eps3`` of Shi, Gao & Gu, ICML 2022,
  Definition 5.3, with multipliers fitted by NNLS over the nearly active set (only those
  constraints' gradients are ever formed) or taken from a reference solution.
* :func:`minimax_report`: ``||grad g(x)||`` with ``g(x) = max_{y in Y} f(x, y)`` by an inner solve and
  Danskin's theorem (Wang et al., Definition 2.2), ``||grad_x f(x, y)||`` and the projected
  gradient mapping in ``y`` (Definition 2.1).
* :func:`admm_report` (composite): ``dist(0, dL(x, y, lam))^2`` of Huang et al., IJCAI 2019,
  Definition 1, split into its x, y and feasibility parts.
* :func:`finite_sum_report`: the gradient (mapping) norm.

Gradients come from the problem's white-box capabilities (``HasGradient``,
``HasConstraintGradient``, ``HasMinimaxGradient``) when present, else from central differences
with the step ``eps^(1/3) max(1, |x|_inf)`` (about 1e-10 relative accuracy on smooth functions);
every report says which was used. These evaluations call the problem directly: they are checks,
not part of any solver's budget.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
import math
from typing import Any

import numpy as np

from zoframe.errors import InvalidInputError, ShapeError
from zoframe.measures import (
    FULL_PASS_BLOCK,
    central_difference_gradient,
    fit_multipliers,
    gradient_mapping,
    kkt_residuals,
    max_violation_full,
)
from zoframe.protocols import Array, HasConstraintGradient, HasGradient, HasMinimaxGradient, IntArray

__all__ = [
    "CHUNK",
    "ADMMReport",
    "FiniteSumReport",
    "KKTReport",
    "MinimaxReport",
    "PenaltyReport",
    "admm_report",
    "finite_sum_report",
    "kkt_report",
    "minimax_report",
    "objective_gradient",
    "penalty_report",
]

#: rows per block when a check walks over all n components or all m constraints
CHUNK = 65536


def _vec(x: Any, dim: int, name: str) -> Array:
    arr = np.array(x, dtype=np.float64, copy=True).reshape(-1)
    if arr.shape != (dim,):
        raise ShapeError(f"{name} must have shape ({dim},), got {np.shape(x)}")
    if not np.all(np.isfinite(arr)):
        raise InvalidInputError(f"{name} contains NaN or infinity; a report needs a finite point")
    return arr


def _blocks(size: int) -> list[IntArray]:
    return [np.arange(lo, min(size, lo + CHUNK), dtype=np.intp) for lo in range(0, size, CHUNK)]


def objective_value(problem: Any, x: Array) -> float:
    """``(1/n) sum_i l_i(x)``, in blocks of :data:`CHUNK` components."""
    n = int(getattr(problem, "n", 1))
    total = 0.0
    for idx in _blocks(n):
        total += float(np.asarray(problem.components(x[None, :], idx), dtype=np.float64).sum())
    return total / n


def objective_gradient(problem: Any, x: Array) -> tuple[Array, str]:
    """``grad (1/n) sum_i l_i(x)`` and its source (``"white-box"`` or ``"central differences"``)."""
    n = int(getattr(problem, "n", 1))
    g = np.zeros(x.shape[0])
    if isinstance(problem, HasGradient):
        for idx in _blocks(n):
            g += np.asarray(problem.component_gradients(x, idx), dtype=np.float64).sum(axis=0)
        return g / n, "white-box (HasGradient)"
    for idx in _blocks(n):

        def block_sum(X: Array, i: IntArray = idx) -> Array:
            out: Array = np.asarray(problem.components(X, i), dtype=np.float64).sum(axis=1)
            return out

        g += central_difference_gradient(block_sum, x)[0]
    return g / n, "central differences"


def constraint_values(problem: Any, x: Array) -> Array:
    """All ``m`` constraint values ``f_j(x)``, in blocks of :data:`CHUNK` (all ``m`` held at once:
    the reports use it up to one block of the full pass, and :func:`max_violation_full` above)."""
    m = int(problem.m)
    parts = [np.asarray(problem.constraints(x[None, :], idx), dtype=np.float64).reshape(-1) for idx in _blocks(m)]
    return np.concatenate(parts) if parts else np.zeros(0)  # m = 0: equality constraints alone


def _constraint_grads(problem: Any, x: Array) -> tuple[Callable[[IntArray], Array], str]:
    if isinstance(problem, HasConstraintGradient):

        def white(idx: IntArray) -> Array:
            ids = np.asarray(idx, dtype=np.intp)
            return np.asarray(problem.constraint_gradients(x, ids), dtype=np.float64)

        return white, "white-box (HasConstraintGradient)"

    def central(idx: IntArray) -> Array:
        ids = np.asarray(idx, dtype=np.intp)
        return central_difference_gradient(lambda X: np.asarray(problem.constraints(X, ids), dtype=np.float64), x)

    return central, "central differences"


def _check_block(block: Any) -> int:
    if not isinstance(block, (int, np.integer)) or isinstance(block, bool) or block < 1:
        raise InvalidInputError(f"block must be a positive integer (constraints per call), got {block!r}")
    return int(block)


def _grad_rows(block: int, dim: int) -> int:
    """Rows of constraint gradients per step: ``(rows, d)`` gradients take the memory of one block of values."""
    return max(1, block // max(1, dim))


def _weighted_grads(cgrads: Callable[[IntArray], Array], idx: IntArray, weights: Array, rows: int) -> Array | float:
    """``sum_j weights_j grad f_j`` over ``idx``, ``rows`` gradients at a time (one product up to ``rows``)."""
    if idx.size == 0:
        return 0.0
    if idx.size <= rows:
        out: Array = cgrads(idx).T @ weights
        return out
    total = cgrads(idx[:rows]).T @ weights[:rows]
    for lo in range(rows, idx.size, rows):
        total = total + cgrads(idx[lo : lo + rows]).T @ weights[lo : lo + rows]
    return total


def _values_at(problem: Any, x: Array, idx: IntArray, block: int) -> Array:
    """``f_j(x)`` for the indices ``idx``, ``block`` of them per call."""
    parts = [
        np.asarray(problem.constraints(x[None, :], idx[lo : lo + block]), dtype=np.float64).reshape(-1)
        for lo in range(0, idx.size, block)
    ]
    return np.concatenate(parts) if parts else np.zeros(0)


# --------------------------------------------------------------------------- constrained
@dataclass(frozen=True)
class KKTReport:
    """Definition 5.3 (ICML DSZOG) at a candidate ``x``.

    ``eps1 = ||grad f0 + sum_j alpha_j grad f_j||``, ``eps2 = sqrt(sum_j max(f_j, 0)^2)``,
    ``eps3 = sqrt(sum_j (alpha_j f_j)^2)``; ``multipliers_source`` says whether ``alpha`` was fitted
    by NNLS over the nearly active set ``{j : f_j >= -active_tol}`` or taken from a reference;
    ``n_active`` is the size of the set whose gradients were formed. ``support`` (increasing) and
    ``support_multipliers`` are the ``alpha_j > 0``; :attr:`multipliers` is ``alpha`` as a vector of
    length ``m`` (zero off the support), built when asked for.
    """

    eps1: float
    eps2: float
    eps3: float
    max_violation: float
    fun: float
    grad_norm: float
    n_active: int
    active_tol: float
    multipliers_source: str
    gradient_source: str
    constraint_gradient_source: str
    m: int
    support: IntArray
    support_multipliers: Array
    dense_multipliers: Array | None = field(default=None, repr=False)
    #: multipliers (free sign) of the ``m_eq`` equality constraints (empty without them)
    equality_multipliers: Array = field(default_factory=lambda: np.zeros(0), repr=False)
    m_eq: int = 0

    @property
    def multipliers(self) -> Array:
        """``alpha`` of length ``m`` (built from the support unless the report holds it already)."""
        if self.dense_multipliers is not None:
            return self.dense_multipliers
        out = np.zeros(self.m)
        out[self.support] = self.support_multipliers
        return out

    def measures(self) -> dict[str, float]:
        return {
            "fun": self.fun,
            "eps1": self.eps1,
            "eps2": self.eps2,
            "eps3": self.eps3,
            "kkt": max(self.eps1, self.eps2, self.eps3),
            "max_violation": self.max_violation,
            "grad_norm": self.grad_norm,
            "n_active": float(self.n_active),
        }


def _given_multipliers(multipliers: Any, indices: Any, m: int) -> tuple[IntArray, Array]:
    """The ``alpha_j > 0`` of given multipliers: ``(support, values)``, support increasing.

    ``multipliers`` has length ``m``, or with ``indices`` it holds ``alpha`` at those indices (zero
    elsewhere).
    """
    alpha = np.asarray(multipliers, dtype=np.float64)
    if indices is None:
        if alpha.shape != (m,):
            raise ShapeError(f"multipliers must have shape ({m},), got {alpha.shape}")
        ids = None
    else:
        alpha = alpha.reshape(-1)
        ids = np.asarray(indices)
        if ids.ndim != 1 or ids.shape != alpha.shape or (ids.size and ids.dtype.kind not in "iu"):
            raise ShapeError(f"multiplier_indices must be 1-D integers, one per multiplier; got {ids.dtype} {ids.shape} for {alpha.shape}")
        ids = ids.astype(np.intp)
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= m or np.unique(ids).size != ids.size):
            raise ShapeError(f"multiplier_indices must be distinct indices in 0..{m - 1}")
    if np.any(alpha < 0):
        raise InvalidInputError("multipliers must be >= 0 (sign convention: L = f0 + sum alpha_j f_j)")
    pos = np.flatnonzero(alpha > 0)
    if ids is None:
        return pos.astype(np.intp), alpha[pos]
    order = np.argsort(ids[pos], kind="stable")
    return ids[pos][order], alpha[pos][order]


def kkt_report(
    problem: Any,
    x: Any,
    *,
    multipliers: Array | None = None,
    multipliers_source: str = "reference",
    active_tol: float = 1e-6,
    max_active: int | None = 10000,
    multiplier_indices: IntArray | None = None,
    block: int = FULL_PASS_BLOCK,
    executor: Executor | None = None,
    equality_multipliers: Array | None = None,
) -> KKTReport:
    """KKT residuals of a constrained problem at ``x`` (ICML DSZOG Definition 5.3).

    With ``multipliers=None`` the multipliers are fitted by non-negative least squares over the
    constraints with ``f_j(x) >= -active_tol`` (at most ``max_active`` of them, largest values
    first); only those constraints' gradients are formed, so ``m`` may be huge. Given
    ``multipliers`` (length ``m``, ``>= 0``, e.g. a reference solution's duals; or their values at
    ``multiplier_indices``, zero elsewhere) are used as they are.

    Up to ``block`` constraints, all ``m`` values are formed at once (:func:`kkt_residuals`). Above,
    one :func:`~zoframe.measures.max_violation_full` pass in blocks of ``block`` (serially or on
    ``executor``) gives ``eps2``, ``max_violation`` and the nearly active set (its ``max_active``
    largest values), and the constraints with ``alpha_j > 0`` are evaluated by index: memory is
    ``O(block + max_active)`` whatever ``m`` is (plus given multipliers; ``max_active=None`` keeps
    the whole nearly active set). The two ways agree up to the order of summation in ``eps2`` and
    ``eps3``.

    Equality constraints ``h_l(x) = 0`` (a problem with ``m_eq > 0`` and ``equalities(X, idx)``) are always
    active with multipliers ``mu`` of free sign: ``eps1 = ||grad f0 + sum_j alpha_j grad f_j + sum_l mu_l
    grad h_l||``, ``eps2`` and ``max_violation`` include ``|h_l(x)|``. Without ``multipliers``, ``alpha`` and
    ``mu`` are fitted together (NNLS with the columns ``+grad h_l`` and ``-grad h_l``); with ``multipliers``,
    ``equality_multipliers`` (length ``m_eq``) must be given too.

    Box bounds (``problem.feasible_set`` with ``lower`` / ``upper``, e.g. ``Constrained(..., bounds=...)``)
    within ``active_tol`` of ``x`` are active rows ``-e_i`` / ``+e_i`` whose multipliers ``nu >= 0`` join the
    fit (``eps1 = ||grad f0 + J^T alpha + J_h^T mu + B^T nu||``); with given ``multipliers`` the bounds take
    no multiplier.
    """
    if getattr(problem, "kind", None) != "constrained":
        raise InvalidInputError(f"kkt_report needs a constrained problem, got kind={getattr(problem, 'kind', None)!r}")
    if not (math.isfinite(active_tol) and active_tol >= 0):
        raise InvalidInputError(f"active_tol must be a finite number >= 0, got {active_tol!r}")
    if max_active is not None and (not isinstance(max_active, (int, np.integer)) or isinstance(max_active, bool) or max_active < 0):
        raise InvalidInputError(f"max_active must be an integer >= 0 or None, got {max_active!r}")
    block = _check_block(block)
    xv = _vec(x, int(problem.dim), "x")
    m = int(problem.m)
    g0, source = objective_gradient(problem, xv)
    cgrads, csource = _constraint_grads(problem, xv)
    m_eq = int(getattr(problem, "m_eq", 0) or 0)
    grad_norm = float(np.linalg.norm(g0))
    mu, h = np.zeros(0), np.zeros(0)
    bounds = _active_bound_rows(problem, xv, active_tol) if multipliers is None else np.zeros((0, xv.shape[0]))
    if m_eq or bounds.shape[0]:  # the equalities' (and active bounds') part of the Lagrangian's gradient joins grad
        # f0; alpha is fitted (or given) as before
        mu, h, g0 = _equality_part(
            problem, xv, g0, cgrads, multipliers, equality_multipliers, active_tol, max_active, block, bounds
        )
    if m <= block:
        mult = multipliers
        if multipliers is not None and multiplier_indices is not None:
            sup, vals = _given_multipliers(multipliers, multiplier_indices, m)
            mult = np.zeros(m)
            mult[sup] = vals
        res = kkt_residuals(g0, constraint_values(problem, xv), cgrads, mult, active_tol=active_tol, max_active=max_active)
        support = np.flatnonzero(res.multipliers > 0).astype(np.intp)
        eps1, eps2, eps3, max_violation = res.eps1, res.eps2, res.eps3, res.max_violation
        n_active, fitted, alpha, dense = int(res.active.size), res.fitted, res.multipliers[support], res.multipliers
    else:
        dense = None
        rows = _grad_rows(block, xv.shape[0])
        if multipliers is None:
            fitted = True
            floor = float(np.nextafter(-active_tol, -np.inf))  # f_j > floor: f_j >= -active_tol
            if max_active is None:
                full = max_violation_full(problem, xv, block=block, above=floor, executor=executor)
                active, fvals = full.above_indices, full.above_values
            else:
                full = max_violation_full(problem, xv, block=block, tol=floor, top=max_active, executor=executor)
                near = full.top_values >= -active_tol
                active, fvals = full.top_indices[near], full.top_values[near]
                if full.violated <= max_active:  # all of the nearly active set: in index order
                    order = np.argsort(active, kind="stable")
                    active, fvals = active[order], fvals[order]
            fit = fit_multipliers(g0, cgrads(active)) if active.size else np.zeros(0)
            order = np.argsort(active, kind="stable")
            active_sorted, fit_sorted, f_sorted = active[order], fit[order], fvals[order]
            on = fit_sorted > 0
            support, alpha, f_support = active_sorted[on].astype(np.intp), fit_sorted[on], f_sorted[on]
            n_active = int(active.size)
        else:
            fitted = False
            support, alpha = _given_multipliers(multipliers, multiplier_indices, m)
            full = max_violation_full(problem, xv, block=block, executor=executor)
            f_support = _values_at(problem, xv, support, block)
            n_active = int(support.size)
        eps1 = float(np.linalg.norm(g0 + _weighted_grads(cgrads, support, alpha, rows)))
        eps2 = math.sqrt(full.sumsq_violation)
        eps3 = float(np.linalg.norm(alpha * f_support))
        max_violation = full.max_violation
    if m_eq:
        eps2 = math.sqrt(eps2 * eps2 + float(h @ h))
        max_violation = max(max_violation, float(np.abs(h).max()))
    return KKTReport(
        eps1=eps1,
        eps2=eps2,
        eps3=eps3,
        max_violation=max_violation,
        fun=objective_value(problem, xv),
        grad_norm=grad_norm,
        n_active=n_active,
        active_tol=float(active_tol),
        multipliers_source="NNLS over the nearly active set" if fitted else multipliers_source,
        gradient_source=source,
        constraint_gradient_source=csource,
        m=m,
        support=support,
        support_multipliers=alpha,
        dense_multipliers=dense,
        equality_multipliers=mu,
        m_eq=m_eq,
    )


def _active_bound_rows(problem: Any, x: Array, active_tol: float) -> Array:
    """The outward normals ``(k, d)`` of the box bounds (``problem.feasible_set``'s ``lower`` / ``upper``) within
    ``active_tol`` of ``x``: ``-e_i`` at a lower bound, ``+e_i`` at an upper one (none without a box)."""
    d = x.shape[0]
    fs = getattr(problem, "feasible_set", None)
    lo, hi = getattr(fs, "lower", None), getattr(fs, "upper", None)
    if lo is None or hi is None:
        return np.zeros((0, d))
    lo = np.broadcast_to(np.asarray(lo, dtype=np.float64), (d,))
    hi = np.broadcast_to(np.asarray(hi, dtype=np.float64), (d,))
    at_lo = np.flatnonzero(np.isfinite(lo) & (lo - x >= -active_tol))
    at_hi = np.flatnonzero(np.isfinite(hi) & (x - hi >= -active_tol))
    rows = np.zeros((at_lo.size + at_hi.size, d))
    rows[np.arange(at_lo.size), at_lo] = -1.0
    rows[at_lo.size + np.arange(at_hi.size), at_hi] = 1.0
    return rows


def _equality_part(
    problem: Any, x: Array, g0: Array, cgrads: Callable[[IntArray], Array], multipliers: Array | None,
    equality_multipliers: Array | None, active_tol: float, max_active: int | None, block: int,
    bounds: Array | None = None,
) -> tuple[Array, Array, Array]:
    """``(mu, h(x), grad f0 + J_h^T mu + B^T nu)`` for :func:`kkt_report`: ``mu`` given, or fitted together with
    the inequalities' ``alpha`` over the same nearly active set (NNLS, ``mu = u+ - u-``); with ``mu`` fixed at the
    joint fit, the report's own fit of ``alpha`` reaches the joint minimum of ``eps1``. ``bounds``: the rows
    ``B`` of the active box bounds (:func:`_active_bound_rows`), whose multipliers ``nu >= 0`` join the same fit
    (when the multipliers are fitted)."""
    d = x.shape[0]
    B = np.zeros((0, d)) if bounds is None else bounds
    m_eq = int(getattr(problem, "m_eq", 0) or 0)
    ids = np.arange(m_eq, dtype=np.intp)
    if m_eq:
        h = np.asarray(problem.equalities(x[None, :], ids), dtype=np.float64).reshape(-1)
        Jh = central_difference_gradient(lambda X: np.asarray(problem.equalities(X, ids), dtype=np.float64), x)
    else:
        h, Jh = np.zeros(0), np.zeros((0, d))
    nu = np.zeros(B.shape[0])
    if multipliers is not None:
        if equality_multipliers is None:
            raise InvalidInputError(
                f"the problem has m_eq = {m_eq} equality constraints: with multipliers= give their multipliers "
                "too (equality_multipliers=, length m_eq, any sign), or give neither to fit both"
            )
        mu = np.asarray(equality_multipliers, dtype=np.float64).reshape(-1)
        if mu.shape != (m_eq,) or not np.isfinite(mu).all():
            raise InvalidInputError(f"equality_multipliers must be {m_eq} finite numbers, got shape {mu.shape}")
    else:
        floor = float(np.nextafter(-active_tol, -np.inf))
        top = int(problem.m) if max_active is None else int(max_active)
        full = max_violation_full(problem, x, block=block, tol=floor, top=top)
        active = full.top_indices[full.top_values >= -active_tol]
        G = cgrads(active) if active.size else np.zeros((0, d))
        u = fit_multipliers(g0, np.vstack([G, Jh, -Jh, B]))
        k = active.size
        mu = u[k : k + m_eq] - u[k + m_eq : k + 2 * m_eq]
        nu = u[k + 2 * m_eq :]
    out: Array = g0 + Jh.T @ mu + B.T @ nu
    return mu, h, out


@dataclass(frozen=True)
class PenaltyReport:
    """Stationarity of the penalty minimax of ICML DSZOG eq. (2) (Definition 5.6).

    ``g(w) = max_{p in simplex} f0(w) + beta sum_j p_j phi_j(w) - (lambda/2) ||p||^2`` with
    ``phi_j = max(f_j, 0)^2``; ``p*(w) = Proj_simplex(beta phi(w) / lambda)`` and
    ``grad g(w) = grad f0(w) + beta sum_j p*_j 2 max(f_j(w), 0) grad f_j(w)`` (Danskin). Only the
    constraints with ``p*_j phi_j > 0`` have their gradients formed (``n_support`` of them).
    """

    grad_g_norm: float
    g: float
    n_support: int
    beta: float
    lam: float
    gradient_source: str

    def measures(self) -> dict[str, float]:
        return {"penalty_grad_g_norm": self.grad_g_norm, "penalty_g": self.g, "n_support": float(self.n_support)}


def _sparse_simplex_threshold(v: Array, zeros: int) -> float:
    """``theta`` of ``project_simplex(u)`` (:func:`zoframe.sets.project_simplex`) for the vector ``u``
    made of the positive entries ``v`` and ``zeros`` zeros, bit for bit, without forming ``u``.

    The sort-based projection sorts ``u`` (the positives first, then the zeros), takes the cumulative
    sums and the last ``rho`` with ``u_(rho) > (cumsum_rho - 1) / (rho + 1)``. Over the zeros the
    cumulative sum stays that of the positives (adding 0.0 is exact), so the test holds there exactly
    when that sum is below 1, and then ``rho`` is the last entry.
    """
    U = -np.sort(-v)
    css = np.cumsum(U) - 1.0
    last = float(css[-1]) if U.size else -1.0
    if zeros and last < 0.0:
        return last / float(U.size + zeros)
    ks = np.arange(1, U.size + 1, dtype=np.float64)
    cond = U - css / ks > 0
    rho = U.size - 1 - int(np.argmax(cond[::-1]))
    return float(css[rho] / (rho + 1.0))


#: largest violations a blocked penalty report keeps first (the support of ``p*`` is almost always among them)
PENALTY_TOP = 4096


def _prefix_threshold(v: Array) -> float | None:
    """``theta`` of the simplex projection from its largest entries ``v`` alone, when they decide it.

    ``v`` holds the largest entries of the vector (non-increasing). The sort-based projection's test
    ``u_(i) > (cumsum_i - 1) / (i + 1)`` holds for the first ``rho + 1`` sorted entries and fails
    after them; when it fails within ``v`` already, ``rho`` lies in ``v`` and ``theta =
    (cumsum_rho - 1) / (rho + 1)`` is the projection's, bit for bit (the same prefix sums). ``None``
    when it holds for all of ``v`` (the support may extend beyond).
    """
    U = -np.sort(-v)
    css = np.cumsum(U) - 1.0
    cond = U - css / np.arange(1, U.size + 1, dtype=np.float64) > 0
    if U.size == 0 or bool(cond[-1]):
        return None
    rho = U.size - 1 - int(np.argmax(cond[::-1]))
    return float(css[rho] / (rho + 1.0))


def _penalty_threshold(
    problem: Any, xv: Array, m: int, beta: float, lam: float, block: int, executor: Executor | None
) -> tuple[IntArray, Array, float]:
    """``(indices, values, theta)``: the violated constraints that may carry ``p*_j > 0``, their
    ``f_j``, and the threshold of ``p* = Proj_simplex(beta phi / lam)``.

    One pass keeps the :data:`PENALTY_TOP` largest ``f_j``: when they are all the violated ones, or
    when they decide the threshold (:func:`_prefix_threshold`), that is all; otherwise a second pass
    keeps every violated constraint (memory ``O(violated)``).
    """
    k = min(m, PENALTY_TOP)
    full = max_violation_full(problem, xv, block=block, top=k, executor=executor)
    ids, f_pos = full.top_indices, full.top_values
    pos = np.maximum(f_pos, 0.0) ** 2 > 0  # a violation below 1e-162 squares to 0: one of the zeros
    if full.violated > k and bool(pos.all()):
        theta = _prefix_threshold(beta * (f_pos**2) / lam)
        if theta is not None:
            return ids, f_pos, theta
        full = max_violation_full(problem, xv, block=block, above=0.0, executor=executor)
        ids, f_pos = full.above_indices, full.above_values
        pos = np.maximum(f_pos, 0.0) ** 2 > 0
    ids, f_pos = ids[pos], f_pos[pos]
    return ids, f_pos, _sparse_simplex_threshold(beta * (f_pos**2) / lam, m - int(ids.size))


def penalty_report(
    problem: Any, x: Any, *, beta: float, lam: float, block: int = FULL_PASS_BLOCK, executor: Executor | None = None
) -> PenaltyReport:
    """``||grad g(w)||`` of the DSZOG penalty minimax at ``w = x`` (``beta``, ``lam`` of the solver).

    Up to ``block`` constraints all ``m`` values are formed at once. Above, one
    :func:`~zoframe.measures.max_violation_full` pass in blocks of ``block`` (serially or on
    ``executor``) keeps the :data:`PENALTY_TOP` largest violations: ``p*`` is the simplex projection
    of a vector that is zero off the violated constraints, so its threshold needs the violated
    entries and the number of zeros (:func:`_sparse_simplex_threshold`), or only the largest ones
    when the support ends among them (:func:`_prefix_threshold`), the same threshold bit for bit;
    otherwise a second pass keeps every violated constraint. The gradients are formed ``block // d``
    at a time. Memory is ``O(block + PENALTY_TOP)`` (``O(violated)`` in that second pass) whatever
    ``m`` is; ``g`` and the gradient agree with the one-block computation up to the order of
    summation.
    """
    if getattr(problem, "kind", None) != "constrained":
        raise InvalidInputError("penalty_report needs a constrained problem")
    if not (beta > 0 and lam > 0):
        raise InvalidInputError(f"beta and lambda must be > 0, got beta={beta}, lambda={lam}")
    if int(problem.m) < 1:
        raise InvalidInputError(
            "penalty_report measures the papers' penalty minimax over the inequality constraints, and this problem has "
            f"none (m = 0, equality constraints alone: m_eq = {int(getattr(problem, 'm_eq', 0) or 0)}); use kkt_report"
        )
    from zoframe.sets import project_simplex

    block = _check_block(block)
    xv = _vec(x, int(problem.dim), "x")
    m = int(problem.m)
    g0, source = objective_gradient(problem, xv)
    if m <= block:
        fv = constraint_values(problem, xv)
        phi = np.maximum(fv, 0.0) ** 2
        p = project_simplex(beta * phi / lam)
        support = np.flatnonzero((p > 0) & (phi > 0)).astype(np.intp)
        grad = g0.copy()
        if support.size:
            cgrads, _ = _constraint_grads(problem, xv)
            weights = beta * p[support] * 2.0 * np.maximum(fv[support], 0.0)
            grad += cgrads(support).T @ weights
        g = objective_value(problem, xv) + beta * float(p @ phi) - 0.5 * lam * float(p @ p)
        return PenaltyReport(float(np.linalg.norm(grad)), g, int(support.size), float(beta), float(lam), source)
    ids, f_pos, theta = _penalty_threshold(problem, xv, m, beta, lam, block, executor)
    v = beta * (f_pos**2) / lam
    zeros = m - int(ids.size)
    p = np.maximum(v - theta, 0.0)
    p_zero = max(0.0 - theta, 0.0)
    phi = f_pos**2
    on = p > 0
    order = np.argsort(ids[on], kind="stable")  # the support in index order, as the one-block code
    support = ids[on][order]
    grad = g0.copy()
    if support.size:
        cgrads, _ = _constraint_grads(problem, xv)
        weights = (beta * p[on] * 2.0 * np.maximum(f_pos[on], 0.0))[order]
        grad += _weighted_grads(cgrads, support, weights, _grad_rows(block, xv.shape[0]))
    pp = float(p @ p) + zeros * p_zero * p_zero
    g = objective_value(problem, xv) + beta * float(p @ phi) - 0.5 * lam * pp
    return PenaltyReport(float(np.linalg.norm(grad)), g, int(support.size), float(beta), float(lam), source)


# --------------------------------------------------------------------------- minimax
def minimax_gradients(problem: Any, x: Array, y: Array) -> tuple[Array, Array, str]:
    """``(grad_x f, grad_y f)`` of ``f = (1/n) sum_i F_i`` at ``(x, y)`` and their source."""
    n = int(getattr(problem, "n", 1))
    if isinstance(problem, HasMinimaxGradient):
        gx = np.zeros(x.shape[0])
        gy = np.zeros(y.shape[0])
        for idx in _blocks(n):
            bx, by = problem.minimax_gradients(x, y, idx)
            gx += np.asarray(bx, dtype=np.float64).sum(axis=0)
            gy += np.asarray(by, dtype=np.float64).sum(axis=0)
        return gx / n, gy / n, "white-box (HasMinimaxGradient)"
    idx_all = np.arange(n, dtype=np.intp)

    def fx(X: Array) -> Array:
        out: Array = np.asarray(problem.values(X, np.repeat(y[None, :], X.shape[0], axis=0), idx_all)).mean(axis=1)
        return out

    def fy(Y: Array) -> Array:
        out: Array = np.asarray(problem.values(np.repeat(x[None, :], Y.shape[0], axis=0), Y, idx_all)).mean(axis=1)
        return out

    return central_difference_gradient(fx, x)[0], central_difference_gradient(fy, y)[0], "central differences"


def _minimax_value(problem: Any, x: Array, y: Array) -> float:
    n = int(getattr(problem, "n", 1))
    return float(np.asarray(problem.values(x[None, :], y[None, :], np.arange(n, dtype=np.intp))).mean())


@dataclass(frozen=True)
class InnerSolve:
    """The inner maximisation ``y*(x) = argmax_{y in Y} f(x, y)`` of a minimax report."""

    y: Array
    value: float
    iterations: int
    mapping_norm: float
    converged: bool


def inner_maximize(
    problem: Any, x: Array, y_start: Array, *, tol: float = 1e-10, max_iter: int = 20000
) -> InnerSolve:
    """Projected gradient ascent on ``f(x, .)`` over ``Y`` (strongly concave), to ``tol`` relative accuracy.

    The step adapts to the local Lipschitz constant of ``grad_y f`` (halved while
    ``step ||grad(y') - grad(y)|| > ||y' - y||``, grown by 1.5 after an accepted step): a test on
    gradients, not on function values, so it keeps converging when the values no longer change in
    floating point. Stops when the gradient mapping is below ``tol * max(1, ||mapping at start||)``.
    """
    y_set = getattr(problem, "y_set", None)
    proj: Callable[[Array], Array] | None = None if y_set is None else y_set.project
    y = y_start.copy() if proj is None else np.asarray(proj(y_start), dtype=np.float64)
    _, gy, _ = minimax_gradients(problem, x, y)
    norm = float(np.linalg.norm(gradient_mapping(y, -gy, proj, 1.0)))
    target = tol * max(1.0, norm)
    step = 1.0
    it = 0
    while norm > target and it < max_iter:
        it += 1
        while True:
            cand = y + step * gy
            if proj is not None:
                cand = np.asarray(proj(cand), dtype=np.float64)
            _, gc, _ = minimax_gradients(problem, x, cand)
            move = float(np.linalg.norm(cand - y))
            if step * float(np.linalg.norm(gc - gy)) <= move or step < 1e-14:
                break
            step *= 0.5
        if move == 0.0:
            break
        y, gy = cand, gc
        norm = float(np.linalg.norm(gradient_mapping(y, -gy, proj, 1.0)))
        step *= 1.5
    return InnerSolve(y, _minimax_value(problem, x, y), it, norm, norm <= max(target, 1e3 * np.finfo(float).eps * max(1.0, float(np.linalg.norm(gy)))))


@dataclass(frozen=True)
class MinimaxReport:
    """Stationarity of a minimax candidate ``(x, y)`` (Wang et al., Definitions 2.1 and 2.2).

    ``grad_g_norm = ||grad_x f(x, y*(x))||`` (Danskin) with ``y*(x)`` from the inner solve;
    ``grad_x_norm = ||grad_x f(x, y)||``; ``y_mapping_norm = ||(y - Proj_Y(y + eta grad_y f)) / eta||``;
    ``y_gap = ||y - y*(x)||``; ``g`` is ``g(x) = f(x, y*(x))``.
    """

    grad_g_norm: float
    grad_x_norm: float
    y_mapping_norm: float
    y_gap: float
    g: float
    fun: float
    inner: InnerSolve
    eta: float
    gradient_source: str

    def measures(self) -> dict[str, float]:
        return {
            "fun": self.fun,
            "g": self.g,
            "grad_g_norm": self.grad_g_norm,
            "grad_x_norm": self.grad_x_norm,
            "y_mapping_norm": self.y_mapping_norm,
            "y_gap": self.y_gap,
            "inner_iterations": float(self.inner.iterations),
        }


def minimax_report(problem: Any, x: Any, y: Any | None = None, *, eta: float = 1.0, tol: float = 1e-10) -> MinimaxReport:
    """Minimax report at ``(x, y)`` (``y`` defaults to the problem's ``y0``)."""
    if getattr(problem, "kind", None) != "minimax":
        raise InvalidInputError(f"minimax_report needs a minimax problem, got kind={getattr(problem, 'kind', None)!r}")
    if not eta > 0:
        raise InvalidInputError(f"eta must be > 0, got {eta}")
    xv = _vec(x, int(problem.dim), "x")
    yv = _vec(problem.y0 if y is None else y, int(problem.dim_y), "y")
    y_set = getattr(problem, "y_set", None)
    proj = None if y_set is None else y_set.project
    gx, gy, source = minimax_gradients(problem, xv, yv)
    inner = inner_maximize(problem, xv, yv, tol=tol)
    ggx, _, _ = minimax_gradients(problem, xv, inner.y)
    return MinimaxReport(
        grad_g_norm=float(np.linalg.norm(ggx)),
        grad_x_norm=float(np.linalg.norm(gx)),
        y_mapping_norm=float(np.linalg.norm(gradient_mapping(yv, -gy, proj, eta))),
        y_gap=float(np.linalg.norm(yv - inner.y)),
        g=inner.value,
        fun=_minimax_value(problem, xv, yv),
        inner=inner,
        eta=float(eta),
        gradient_source=source,
    )


# --------------------------------------------------------------------------- composite
@dataclass(frozen=True)
class ADMMReport:
    """``dist(0, dL(x, y, lam))^2`` (Huang et al., IJCAI 2019, Definition 1) and its parts.

    ``L = f(x) + sum_j psi_j(y_j) - <lam, A x + sum_j B_j y_j - c>``:
    ``x_part = ||grad f(x) - A^T lam||^2``, ``y_part = sum_j dist(B_j^T lam, d psi_j(y_j))^2``,
    ``feasibility = ||A x + sum_j B_j y_j - c||^2``; ``dist2`` is their sum.
    ``lam_source`` says whether ``lam`` came from the run or was fitted by least squares.
    """

    dist2: float
    x_part: float
    y_part: float
    feasibility: float
    fun: float
    lam_source: str
    gradient_source: str

    def measures(self) -> dict[str, float]:
        return {
            "fun": self.fun,
            "dist2": self.dist2,
            "x_part": self.x_part,
            "y_part": self.y_part,
            "feasibility": self.feasibility,
        }


def admm_report(problem: Any, x: Any, ys: Sequence[Any] | None = None, lam: Any | None = None) -> ADMMReport:
    """ADMM stationarity of a composite problem at ``(x, y_1..y_k, lam)``.

    ``ys=None`` takes ``y_j = `` the least-squares solution of the coupling given ``x`` only when
    there is one block with ``B_1`` square and invertible; ``lam=None`` fits
    ``lam = argmin ||grad f(x) - A^T lam||`` (said in ``lam_source``).
    """
    if getattr(problem, "kind", None) != "composite":
        raise InvalidInputError(f"admm_report needs a composite problem, got kind={getattr(problem, 'kind', None)!r}")
    A = np.asarray(problem.A, dtype=np.float64)
    Bs = [np.asarray(b, dtype=np.float64) for b in problem.B]
    c = np.asarray(problem.c, dtype=np.float64)
    pens = list(problem.penalties)
    xv = _vec(x, int(problem.dim), "x")
    if ys is None:
        if len(Bs) == 1 and Bs[0].shape[0] == Bs[0].shape[1]:
            ys = [np.linalg.solve(Bs[0], c - A @ xv)]
        else:
            raise InvalidInputError(
                "admm_report needs the blocks y_1..y_k (the run's outputs 'y0', 'y1', ...); they cannot be "
                "recovered from x for this coupling"
            )
    if len(ys) != len(Bs):
        raise ShapeError(f"{len(Bs)} blocks B_j but {len(ys)} vectors y_j")
    yv = [_vec(v, b.shape[1], f"y{j}") for j, (v, b) in enumerate(zip(ys, Bs))]
    g, source = objective_gradient(problem, xv)
    if lam is None:
        lam_v, *_ = np.linalg.lstsq(A.T, g, rcond=None)
        lam_source = "least squares fit of grad f(x) = A^T lam (the run reported no lam)"
    else:
        lam_v = _vec(lam, A.shape[0], "lam")
        lam_source = "from the run"
    rx = g - A.T @ lam_v
    x_part = float(rx @ rx)
    y_part = float(sum(psi.subdifferential_distance(v, b.T @ lam_v) ** 2 for psi, v, b in zip(pens, yv, Bs)))
    r = A @ xv - c + sum((b @ v for b, v in zip(Bs, yv)), np.zeros_like(c))
    feas = float(r @ r)
    fun = objective_value(problem, xv) + float(sum(psi.value(v) for psi, v in zip(pens, yv)))
    return ADMMReport(
        dist2=x_part + y_part + feas,
        x_part=x_part,
        y_part=y_part,
        feasibility=feas,
        fun=fun,
        lam_source=lam_source,
        gradient_source=source,
    )


# --------------------------------------------------------------------------- finite sum
@dataclass(frozen=True)
class FiniteSumReport:
    """``||grad f(x)||``, or the gradient mapping ``||(x - Proj(x - eta grad f)) / eta||`` over a set."""

    fun: float
    grad_norm: float
    mapping: bool
    gradient_source: str
    extra: Mapping[str, float] = field(default_factory=dict)

    def measures(self) -> dict[str, float]:
        return {"fun": self.fun, "grad_norm": self.grad_norm, **self.extra}


def finite_sum_report(problem: Any, x: Any, *, eta: float = 1.0) -> FiniteSumReport:
    """Gradient (mapping) norm of a finite-sum problem at ``x``."""
    xv = _vec(x, int(problem.dim), "x")
    g, source = objective_gradient(problem, xv)
    fs = getattr(problem, "feasible_set", None)
    proj = None if fs is None else fs.project
    gm = gradient_mapping(xv, g, proj, eta)
    return FiniteSumReport(objective_value(problem, xv), float(np.linalg.norm(gm)), proj is not None, source)
