"""Primal and dual residuals, their tolerances and the penalty's balancing, for ``steps="auto"``.

Conventions of Huang et al. (2019): ``L = f(x) + sum_j psi_j(y_j) - <lam, A x + sum_j B_j y_j - c>``;
a point is optimal when

* primal: ``r = A x + sum_j B_j y_j - c = 0``;
* dual, x-block: ``grad f(x) - A^T lam = 0``; y-blocks: ``B_j^T lam in d psi_j(y_j)``.

The stopping rule is OSQP's (Stellato et al., *OSQP: an operator splitting solver for quadratic
programs*, Math. Prog. Comp. 12, 2020, section 3.4), with infinity norms:

``|r|_inf <= eps_abs + eps_rel max(|A x|_inf, |B y|_inf, |c|_inf, |A|_inf s)`` and
``|s|_inf <= eps_abs + eps_rel max(|grad f|_inf, |A^T lam|_inf, |B^T lam|_inf)``

where ``s`` stacks the x- and y-block residuals (in the primal scale, ``s`` is the variables' own
scale: a solution at ``x = 0`` with ``c = 0`` is judged against the coupling's size at that scale,
not against 0). ``eps_abs`` is in the residuals' own units (the
units of ``c`` for ``r``, of ``grad f`` for ``s``); ``eps_rel`` is a pure number.

In a linearised ADMM step (Alg. 1 l.8-10) the residuals come from the step itself, with no evaluation:
the y-update is a prox, ``y_j^+ = prox_{psi_j / r_j}(v_j)``, so ``r_j (v_j - y_j^+)`` is a subgradient of
``psi_j`` at ``y_j^+`` and ``s_j = |rho B_j^T (res_j - res^+) + r_j (y_j^+ - y_j)|`` bounds
``dist(B_j^T lam^+, d psi_j(y_j^+))`` (``res_j`` the residual before block ``j`` moved); the x-update gives
``g - A^T lam^+ = (tau I - rho A^T A)(x_t - x^+)`` with ``tau = r / eta`` and ``g`` the algorithm's
own gradient estimate at ``x_t``. The penalty ``rho`` is balanced as OSQP does (the same paper,
section 5.2; Boyd et al. 2011, section 3.4.1): ``rho <- rho sqrt((|r| / scale_r) / (|s_c| / scale_s))``
when that moves it by more than a factor 5, with ``s_c = rho A^T B (y^+ - y)`` the part of the dual
residual the penalty moves (Boyd's dual residual; in a linearised step the rest, ``L (x_t - x^+)``,
does not depend on ``rho``). The ADMM here is unscaled: ``lam`` is kept as is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
import math
from typing import Any

import numpy as np

from zoframe.errors import InvalidParameterError
from zoframe.protocols import Array
from zoframe_admm.coupling import residual

__all__ = ["BALANCE_FACTOR", "Residuals", "Tolerance", "balanced_rho", "check_tolerances", "coupling_floor",
           "prox_mapping_residuals", "y_steps"]

#: rho moves only when the balanced value differs from it by more than this factor (OSQP: 5)
BALANCE_FACTOR = 5.0


def _inf(v: Array) -> float:
    return float(np.abs(v).max(initial=0.0))


def check_tolerances(eps_abs: Any, eps_rel: Any) -> None:
    """Raise unless ``eps_abs >= 0``, ``eps_rel >= 0`` and one of them is > 0."""
    for name, v in (("eps_abs", eps_abs), ("eps_rel", eps_rel)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v) or v < 0:
            raise InvalidParameterError(
                f"{name} must be a finite number >= 0 (the stopping tolerance of the residuals), got {v!r}"
            )
    if eps_abs == 0 and eps_rel == 0:
        raise InvalidParameterError("eps_abs and eps_rel are both 0: no run could meet that; give one of them > 0")


@dataclass(frozen=True)
class Tolerance:
    """OSQP's test: ``residual <= eps_abs + eps_rel * scale``."""

    eps_abs: float
    eps_rel: float

    def bound(self, scale: float) -> float:
        return self.eps_abs + self.eps_rel * scale


@dataclass(frozen=True)
class Residuals:
    """The residuals at one point: ``primal`` ``|r|_inf`` and its ``primal_scale``, ``dual`` ``|s|_inf`` and its
    ``dual_scale`` (see the module docstring)."""

    primal: float
    primal_scale: float
    dual: float
    dual_scale: float
    #: the part of the dual residual that the penalty moves, ``|rho A^T B (y^+ - y)|_inf`` (Boyd et al. 2011,
    #: section 3.1.1): the quantity balanced against the primal residual (the linearisation's own part,
    #: ``L |x_t - x^+|``, does not depend on ``rho``)
    coupling_dual: float = math.nan

    def passed(self, tol: Tolerance) -> bool:
        return self.primal <= tol.bound(self.primal_scale) and self.dual <= tol.bound(self.dual_scale)

    def relative(self) -> tuple[float, float]:
        """``(|r| / scale_r, |s| / scale_s)`` (0 for a zero residual, inf for a nonzero one over a zero scale)."""
        def rel(a: float, b: float) -> float:
            return 0.0 if a == 0.0 else (a / b if b > 0 else math.inf)

        return rel(self.primal, self.primal_scale), rel(self.dual, self.dual_scale)

    def worst(self) -> float:
        return max(self.relative())

    def describe(self, tol: Tolerance | None = None) -> str:
        text = (f"primal residual {self.primal:.3g} (scale {self.primal_scale:.3g}), dual residual {self.dual:.3g} "
                f"(scale {self.dual_scale:.3g})")
        if tol is not None:
            text += (f"; tolerances {tol.bound(self.primal_scale):.3g} and {tol.bound(self.dual_scale):.3g} "
                     f"(eps_abs {tol.eps_abs:g}, eps_rel {tol.eps_rel:g})")
        return text


def coupling_floor(A: Array, scale: float) -> float:
    """``|A|_inf s``: the size of ``A x`` for variables of the size ``s``, the least primal scale (a solution at
    ``x = 0`` with ``c = 0`` would otherwise ask for a coupling residual of exactly 0)."""
    return float(np.abs(A).sum(axis=1).max(initial=0.0)) * scale


def primal_parts(oracle: Any, x: Array, ys: Sequence[Array], floor: float = 0.0) -> tuple[Array, float]:
    """``(r, max(|A x|_inf, |B y|_inf, |c|_inf, floor))``."""
    Ax = oracle.A @ x
    By = np.zeros_like(Ax)
    for Bj, yj in zip(oracle.B, ys):
        By = By + Bj @ yj
    return Ax + By - oracle.c, max(_inf(Ax), _inf(By), _inf(oracle.c), floor)


def y_steps(
    oracle: Any, x: Array, ys: Sequence[Array], lam: Array, rho: float, r_y: Array
) -> tuple[tuple[Array, ...], list[Array]]:
    """Alg. 1 l.8 (Gauss-Seidel over the blocks, as :func:`~zoframe_admm.coupling.y_updates`), also returning the
    residual each block saw before it moved (for the y-block dual residual)."""
    res = residual(oracle, x, ys)
    out, before = [], []
    for Bj, yj, psi, rj in zip(oracle.B, ys, oracle.penalties, r_y):
        before.append(res)
        v = yj - (rho * (Bj.T @ res) - Bj.T @ lam) / rj
        yn = np.asarray(psi.prox(v, 1.0 / rj), dtype=np.float64)
        res = res + Bj @ (yn - yj)
        out.append(yn)
    return tuple(out), before


def admm_residuals(
    oracle: Any, x_old: Array, x: Array, ys_old: Sequence[Array], ys: Sequence[Array], before: Sequence[Array],
    lam: Array, g: Array, rho: float, tau: float, r_y: Array, floor: float = 0.0,
) -> Residuals:
    """The residuals after one linearised ADMM step (module docstring), from the step's own quantities;
    ``floor``: the least primal scale (:func:`coupling_floor`)."""
    res, pscale = primal_parts(oracle, x, ys, floor)
    A = oracle.A
    dx = x_old - x
    s_x = tau * dx - rho * (A.T @ (A @ dx))
    parts = [_inf(s_x)]
    scales = [_inf(g), _inf(A.T @ lam)]
    moved = np.zeros_like(res)
    for Bj, y0, y1, rb, rj in zip(oracle.B, ys_old, ys, before, r_y):
        parts.append(_inf(rho * (Bj.T @ (rb - res)) + rj * (y1 - y0)))
        scales.append(_inf(Bj.T @ lam))
        moved = moved + Bj @ (y1 - y0)
    return Residuals(_inf(res), pscale, max(parts), max(scales), _inf(rho * (A.T @ moved)))


def prox_mapping_residuals(x_old: Array, x: Array, g: Array, eta: float) -> Residuals:
    """The residuals of a proximal step ``x = prox_{eta h}(x_t - eta g)`` (no splitting, ``r = 0``):
    ``(x_t - x) / eta - g`` is a subgradient of ``h`` at ``x``, so ``|x_t - x| / eta`` bounds
    ``dist(-grad f, d h(x))`` up to the change of ``grad f`` over the step (the gradient mapping)."""
    step = (x_old - x) / eta
    return Residuals(0.0, 0.0, _inf(step), max(_inf(g), _inf(step - g)))


def balanced_rho(rho: float, rel_primal: float, rel_dual: float) -> float:
    """OSQP's rule: ``rho sqrt(rel_primal / rel_dual)`` when it moves ``rho`` by more than :data:`BALANCE_FACTOR`
    (and by at most 100 at once), else ``rho``."""
    if not (rel_primal > 0 and rel_dual > 0 and math.isfinite(rel_primal) and math.isfinite(rel_dual)):
        return rho
    factor = math.sqrt(rel_primal / rel_dual)
    if 1.0 / BALANCE_FACTOR <= factor <= BALANCE_FACTOR:
        return rho
    return rho * min(max(factor, 1e-2), 1e2)
