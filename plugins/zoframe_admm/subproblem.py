"""The refinement's model problem, solved by ADMM on exact linear algebra (no function evaluations).

``min_{p, y} g^T p + (1/2) p^T H p + sum_j psi_j(y_j)  s.t.  A p + sum_j B_j y_j = c'``

(``p = x - x_k``, ``c' = c - A x_k``, ``H`` positive definite): the quadratic model of the smooth part
at ``x_k`` with the penalties and the coupling kept exact, as in proximal Newton-type methods (Lee,
Sun & Saunders, *Proximal Newton-type methods for minimizing composite functions*, SIAM J. Optim.
24, 2014), here with a linear coupling. Solved by ADMM (Boyd et al. 2011) with

* the p-update in closed form, ``(H + rho A^T A) p = -g + A^T (lam + rho (c' - B y))`` (one Cholesky
  factor per ``rho``);
* one joint y-update: exact (a prox of ``psi_j / (rho s)``) when ``B^T B = s I`` (blocks of selector
  rows, e.g. ``B_j = -I`` on their rows), else linearised with ``r = 1.01 rho sigma_max(B^T B)``;
* over-relaxation ``alpha = 1.6`` and OSQP's residual balancing of ``rho`` (Stellato et al. 2020);
* the stopping test on the model's own optimality residuals: ``|A p + B y - c'|``,
  ``|g + H p - A^T lam|`` and ``|B^T lam - w|`` with ``w`` the subgradient the y-prox returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
import math
from typing import Any

import numpy as np
import scipy.linalg as sla

from zoframe.protocols import Array, Penalty
from zoframe_admm.residuals import balanced_rho

__all__ = ["Coupling", "ModelSolution", "solve_model"]

ALPHA = 1.6
CHECK_EVERY = 5
BALANCE_EVERY = 25


def _inf(v: Array) -> float:
    return float(np.abs(v).max(initial=0.0))


@dataclass(frozen=True)
class Coupling:
    """The coupling's constant pieces: ``B = [B_1 ... B_k]``, block sizes, ``A^T A`` and its top eigenvalue,
    whether ``B^T B = s I`` (``orth``, with ``s``) and ``sigma_max(B^T B)``; ``M``, ``e`` when the coupling
    determines ``y = M x + e`` for every ``x`` (``None`` otherwise)."""

    A: Array
    B: Array
    c: Array
    sizes: tuple[int, ...]
    AtA: Array
    sigma_a: float
    orth: bool
    s_b: float
    M: Array | None
    e: Array | None

    @classmethod
    def of(cls, oracle: Any) -> Coupling:
        A = np.asarray(oracle.A, dtype=np.float64)
        B = np.hstack([np.asarray(b, dtype=np.float64) for b in oracle.B])
        c = np.asarray(oracle.c, dtype=np.float64)
        sizes = tuple(int(b.shape[1]) for b in oracle.B)
        AtA = A.T @ A
        sigma_a = float(np.linalg.eigvalsh(AtA)[-1]) if AtA.size else 0.0
        BtB = B.T @ B
        eig = np.linalg.eigvalsh(BtB)
        s_b = float(eig[-1])
        orth = bool(s_b > 0 and np.allclose(BtB, s_b * np.eye(BtB.shape[0]), rtol=0.0, atol=1e-12 * s_b))
        M = e = None
        if eig[0] > 1e-10 * max(s_b, 1e-300):  # full column rank: y = B^+ (c - A x) when that satisfies the coupling
            P = np.linalg.solve(BtB, B.T)
            Ac = np.hstack([A, c[:, None]])
            if np.linalg.norm(Ac - B @ (P @ Ac)) <= 1e-10 * max(1.0, float(np.linalg.norm(Ac))):
                M, e = -P @ A, P @ c
        return cls(A, B, c, sizes, AtA, sigma_a, orth, s_b, M, e)

    def split(self, y: Array) -> list[Array]:
        return np.split(y, np.cumsum(self.sizes)[:-1])

    def y_of(self, x: Array) -> Array | None:
        """``y(x) = M x + e`` when the coupling determines ``y``, else ``None``."""
        if self.M is None or self.e is None:
            return None
        out: Array = self.M @ x + self.e
        return out


@dataclass(frozen=True)
class ModelSolution:
    """``p``, ``y`` (stacked), ``lam``, the iterations, the final residuals (primal, x-block, y-block) and
    whether they met the tolerances."""

    p: Array
    y: Array
    lam: Array
    iterations: int
    primal: float
    dual_x: float
    dual_y: float
    converged: bool


def _prox_all(pens: Sequence[Penalty], cp: Coupling, v: Array, t: float) -> Array:
    return np.concatenate([np.asarray(psi.prox(vj, t), dtype=np.float64) for psi, vj in zip(pens, cp.split(v))])


def solve_model(
    H: Array, g: Array, cp: Coupling, c_shift: Array, pens: Sequence[Penalty], y0: Array, lam0: Array,
    tol_primal: float, tol_dual: float, max_iter: int = 4000, eig: tuple[float, float] | None = None,
) -> ModelSolution:
    """ADMM on the model problem (module docstring), warm-started at ``p = 0``, ``y0``, ``lam0``.

    ``c_shift`` is ``c'``; ``tol_primal``, ``tol_dual``: absolute tolerances of the model's residuals;
    ``eig``: ``(lambda_min, lambda_max)`` of ``H`` (the first ``rho`` is their geometric mean over
    ``sigma_max(A^T A)``).
    """
    A, B = cp.A, cp.B
    d = H.shape[0]
    if eig is None:
        w = np.linalg.eigvalsh(H)
        eig = (float(w[0]), float(w[-1]))
    lo, hi = max(eig[0], 1e-300), max(eig[1], 1e-300)
    rho = math.sqrt(lo * hi) / max(cp.sigma_a, 1e-300)
    lin = 1.0 if cp.orth else 1.01

    def factor(r: float) -> Any:
        return sla.cho_factor(H + r * cp.AtA + 1e-14 * hi * np.eye(d))

    chol = factor(rho)
    y, lam = y0.copy(), lam0.copy()
    p = np.zeros(d)
    w_y = np.zeros_like(y)
    prim = dx = dy = math.inf
    it = 0
    for it in range(1, max_iter + 1):
        By = B @ y
        p = sla.cho_solve(chol, -g + A.T @ (lam + rho * (c_shift - By)))
        Ap = A @ p
        Ap_hat = ALPHA * Ap + (1.0 - ALPHA) * (c_shift - By)
        r_y = lin * rho * cp.s_b
        if cp.orth:
            v = -(B.T @ (rho * (Ap_hat - c_shift) - lam)) / r_y
        else:
            v = y - (B.T @ (rho * (Ap_hat + By - c_shift) - lam)) / r_y
        y = _prox_all(pens, cp, v, 1.0 / r_y)
        w_y = r_y * (v - y)  # a subgradient of sum_j psi_j at y
        lam = lam - rho * (Ap_hat + B @ y - c_shift)
        if it % CHECK_EVERY and it != max_iter:
            continue
        res = Ap + B @ y - c_shift
        prim = _inf(res)
        dx = _inf(g + H @ p - A.T @ lam)
        dy = _inf(B.T @ lam - w_y)
        if prim <= tol_primal and max(dx, dy) <= tol_dual:
            return ModelSolution(p, y, lam, it, prim, dx, dy, True)
        if it % BALANCE_EVERY == 0:
            scale_p = max(_inf(Ap), _inf(B @ y), _inf(c_shift), 1e-300)
            scale_d = max(_inf(g), _inf(H @ p), _inf(A.T @ lam), 1e-300)
            new = balanced_rho(rho, prim / scale_p, max(dx, dy) / scale_d)
            if new != rho:
                rho = new
                chol = factor(rho)
    return ModelSolution(p, y, lam, it, prim, dx, dy, False)
