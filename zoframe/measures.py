"""Stationarity and KKT measures (numpy and scipy only; no cvxpy here).

* :func:`gradient_mapping`: ``(x - Proj(x - eta g)) / eta``, the projected-gradient mapping.
* :func:`fit_multipliers`: non-negative least-squares multipliers over the nearly active set.
* :func:`kkt_residuals`: eps1, eps2, eps3 of Shi et al. (ICML 2022), Definition 5.3.
* :func:`admm_stationarity`: ``dist(0, dL(x, y, lam))^2`` of Huang et al. (IJCAI 2019), Definition 1.
* :func:`central_difference_gradient`: high-accuracy central differences for black-box parts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
import math

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import nnls

from zoframe.errors import InvalidInputError, ShapeError
from zoframe.protocols import Array, Penalty

__all__ = [
    "KKTResiduals",
    "admm_stationarity",
    "central_difference_gradient",
    "fit_multipliers",
    "gradient_mapping",
    "kkt_residuals",
]


def gradient_mapping(x: Array, g: Array, project: Callable[[Array], Array] | None, eta: float = 1.0) -> Array:
    """``(x - Proj(x - eta g)) / eta`` (descent convention; pass ``g = -grad_y f`` for an ascent block).

    With ``project=None`` (unconstrained) this is ``g`` itself.
    """
    if not eta > 0:
        raise InvalidInputError(f"eta must be > 0, got {eta}")
    x = np.asarray(x, dtype=np.float64)
    g = np.asarray(g, dtype=np.float64)
    if x.shape != g.shape:
        raise ShapeError(f"x and g must have the same shape, got {x.shape} and {g.shape}")
    if project is None:
        return g.copy()
    out: Array = (x - project(x - eta * g)) / eta
    return out


def central_difference_gradient(
    fun: Callable[[Array], Array], x: Array, h: float | None = None
) -> Array:
    """Central-difference gradients of a batched function at ``x``.

    ``fun(X)`` maps ``(k, d)`` points to ``(k, b)`` values; the result is ``(b, d)`` (one gradient per
    output column). All ``2 d`` points go in one call. The default step ``h = eps^(1/3) max(1, |x|_inf)``
    balances truncation and rounding error (about 1e-10 relative accuracy on smooth functions).
    """
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[0]
    step = float(np.finfo(float).eps ** (1 / 3) * max(1.0, float(np.abs(x).max(initial=0.0)))) if h is None else h
    E = step * np.eye(d)
    vals = np.asarray(fun(np.vstack([x + E, x - E])), dtype=np.float64)
    if vals.ndim == 1:
        vals = vals[:, None]
    out: Array = ((vals[:d] - vals[d:]) / (2.0 * step)).T
    return out


def fit_multipliers(grad_f0: Array, active_grads: Array) -> Array:
    """``alpha >= 0`` minimising ``||grad_f0 + active_grads^T alpha||_2`` (non-negative least squares).

    ``active_grads`` is ``(a, d)``: the gradients of the nearly active constraints.
    """
    grad_f0 = np.asarray(grad_f0, dtype=np.float64)
    G = np.asarray(active_grads, dtype=np.float64)
    if G.size == 0:
        return np.zeros(0)
    if G.ndim != 2 or G.shape[1] != grad_f0.shape[0]:
        raise ShapeError(f"active_grads must be (a, {grad_f0.shape[0]}), got {G.shape}")
    alpha, _ = nnls(G.T, -grad_f0, maxiter=50 * max(G.shape))
    out: Array = np.asarray(alpha, dtype=np.float64)
    return out


@dataclass(frozen=True)
class KKTResiduals:
    """Residuals of Definition 5.3 (Shi, Gao & Gu, ICML 2022) at a candidate point.

    ``eps1``: stationarity ``||grad f0 + sum_j alpha_j grad f_j||``; ``eps2``: violation
    ``sqrt(sum_j max(f_j, 0)^2)``; ``eps3``: complementarity ``sqrt(sum_j (alpha_j f_j)^2)``;
    ``max_violation``: ``max_j f_j^+``; ``multipliers``: ``alpha`` (length m, zero off the active set);
    ``active``: indices of the constraints treated as nearly active; ``fitted``: whether ``alpha`` was
    fitted by NNLS (False when supplied).
    """

    eps1: float
    eps2: float
    eps3: float
    max_violation: float
    multipliers: Array
    active: NDArray[np.intp]
    fitted: bool


def kkt_residuals(
    grad_f0: Array,
    constraint_values: Array,
    constraint_grads: Array | Callable[[NDArray[np.intp]], Array],
    multipliers: Array | None = None,
    *,
    active_tol: float = 1e-6,
    max_active: int | None = None,
) -> KKTResiduals:
    """KKT residuals of ``min f0 s.t. f_j <= 0`` (ICML DSZOG Definition 5.3, SPEC section 6).

    Parameters
    ----------
    grad_f0:
        ``(d,)`` gradient of the objective at the candidate.
    constraint_values:
        ``(m,)`` values ``f_j`` at the candidate.
    constraint_grads:
        ``(m, d)`` gradients, or a callable ``idx -> (len(idx), d)`` so that only the nearly active
        constraints' gradients are ever formed (m may be huge).
    multipliers:
        ``(m,)`` known multipliers (e.g. a reference solver's duals); fitted by NNLS over the nearly
        active set ``{j: f_j >= -active_tol}`` when ``None``.
    max_active:
        cap on the size of the active set used for the fit (largest ``f_j`` first).
    """
    g0 = np.asarray(grad_f0, dtype=np.float64)
    fv = np.asarray(constraint_values, dtype=np.float64)
    if fv.ndim != 1:
        raise ShapeError(f"constraint_values must be 1-D, got shape {fv.shape}")
    m = fv.shape[0]

    def grads(idx: NDArray[np.intp]) -> Array:
        if callable(constraint_grads):
            return np.asarray(constraint_grads(idx), dtype=np.float64).reshape(len(idx), g0.shape[0])
        G = np.asarray(constraint_grads, dtype=np.float64)
        if G.shape != (m, g0.shape[0]):
            raise ShapeError(f"constraint_grads must be ({m}, {g0.shape[0]}), got {G.shape}")
        out: Array = G[idx]
        return out

    viol = np.maximum(fv, 0.0)
    if multipliers is None:
        active = np.flatnonzero(fv >= -active_tol)
        if max_active is not None and active.size > max_active:
            active = active[np.argsort(-fv[active])[:max_active]]
        alpha = np.zeros(m)
        if active.size:
            alpha[active] = fit_multipliers(g0, grads(active))
        fitted = True
    else:
        alpha = np.asarray(multipliers, dtype=np.float64).copy()
        if alpha.shape != (m,):
            raise ShapeError(f"multipliers must have shape ({m},), got {alpha.shape}")
        if np.any(alpha < 0):
            raise InvalidInputError("multipliers must be >= 0 (sign convention: L = f0 + sum alpha_j f_j)")
        active = np.flatnonzero(alpha > 0)
        fitted = False
    support = np.flatnonzero(alpha > 0)
    stat = g0 + (grads(support).T @ alpha[support] if support.size else 0.0)
    return KKTResiduals(
        eps1=float(np.linalg.norm(stat)),
        eps2=float(np.linalg.norm(viol)),
        eps3=float(np.linalg.norm(alpha * fv)),
        max_violation=float(viol.max(initial=0.0)),
        multipliers=alpha,
        active=active,
        fitted=fitted,
    )


def admm_stationarity(
    grad_f: Array,
    A: Array,
    B: Sequence[Array],
    c: Array,
    x: Array,
    ys: Sequence[Array],
    lam: Array,
    penalties: Sequence[Penalty],
) -> float:
    """``dist(0, dL(x, y, lam))^2`` (Huang et al., IJCAI 2019, Definition 1).

    ``L = f(x) + sum_j psi_j(y_j) - <lam, A x + sum_j B_j y_j - c>``, so
    ``dist^2 = ||grad f - A^T lam||^2 + sum_j dist(B_j^T lam, d psi_j(y_j))^2 + ||A x + sum_j B_j y_j - c||^2``.
    """
    if not (len(B) == len(ys) == len(penalties)):
        raise ShapeError("B, ys and penalties must have one entry per block")
    lam = np.asarray(lam, dtype=np.float64)
    gx = np.asarray(grad_f, dtype=np.float64) - A.T @ lam
    total = float(gx @ gx)
    resid = A @ x - c
    for Bj, yj, psi in zip(B, ys, penalties):
        total += psi.subdifferential_distance(yj, Bj.T @ lam) ** 2
        resid = resid + Bj @ yj
    total += float(resid @ resid)
    return total if math.isfinite(total) else math.inf
