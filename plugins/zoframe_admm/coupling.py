"""Linear-algebra pieces shared by the composite solvers (no function evaluations here).

* :func:`check_coupling` validates ``A``, ``B_j``, ``c``, ``y0`` and the penalties of a composite oracle;
* :func:`admm_constants` computes ``r`` and ``r_j`` of ``G = r I - rho eta A^T A`` and
  ``H_j = r_j I - rho B_j^T B_j`` (Huang et al. 2019, section 4);
* :func:`y_updates`, :func:`x_update`, :func:`dual_update` are lines 8, 9, 10 of Algorithm 1
  (lines 6, 7, 8 of Algorithm 2) in closed form;
* :func:`prox_map` and :func:`composed_prox` serve the proximal baselines (no splitting), where
  ``y`` is a linear function of ``x`` and the prox of ``sum_j psi_j(M_j x + e_j)`` is solved by an
  accelerated dual projected-gradient (FISTA) loop when it has no closed form.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
import math
from typing import Any
import warnings

import numpy as np

from zoframe.errors import IncompatibleProblemError, InvalidInputError, InvalidParameterError, ShapeError
from zoframe.protocols import Array, Penalty
from zoframe_admm.penalties import has_prox

__all__ = [
    "ProxMap",
    "RankDeficientCouplingWarning",
    "admm_constants",
    "check_coupling",
    "composed_prox",
    "dual_update",
    "prox_map",
    "residual",
    "x_update",
    "y_updates",
]

#: strict margin in ``r > rho eta sigma_max(A^T A) + 1`` and ``r_j > rho sigma_max(B_j^T B_j) + 1``
MARGIN = 1e-2


class RankDeficientCouplingWarning(UserWarning):
    """``A`` is not of full row rank: Assumption 4 of Huang et al. (2019) does not hold."""


def _sigma_max_sq(M: Array) -> float:
    """``sigma_max(M^T M)`` = squared spectral norm, from the smaller Gram matrix (no SVD)."""
    if M.size == 0:
        return 0.0
    gram = M.T @ M if M.shape[1] <= M.shape[0] else M @ M.T
    return float(np.linalg.eigvalsh(gram)[-1])


def check_coupling(oracle: Any, rank_check: str) -> None:
    """Validate the structure of a composite oracle before any evaluation.

    Raises :class:`~zoframe.errors.ShapeError` / :class:`~zoframe.errors.InvalidInputError` with the
    offending shape or penalty; handles a rank-deficient ``A`` per ``rank_check``
    (``"error"``, ``"warn"`` or ``"ignore"``).
    """
    if getattr(oracle, "kind", None) != "composite":
        raise IncompatibleProblemError(
            f"the ADMM solvers need a composite problem (A x + sum_j B_j y_j = c), got kind {getattr(oracle, 'kind', None)!r}"
        )
    A, Bs, c, pens, y0 = oracle.A, oracle.B, oracle.c, oracle.penalties, oracle.y0
    d = oracle.dim
    if A is None or c is None:
        raise InvalidInputError("the composite problem exposes no coupling matrix A or vector c")
    if A.ndim != 2 or A.shape[1] != d:
        raise ShapeError(f"A must have shape (l, {d}) to multiply x of dimension {d}, got {A.shape}")
    ell = A.shape[0]
    if c.shape != (ell,):
        raise ShapeError(f"c must have shape ({ell},) to match the {ell} rows of A, got {c.shape}")
    if len(Bs) == 0:
        raise InvalidInputError("the composite problem has no block y_j (k >= 1 is required)")
    if len(pens) != len(Bs):
        raise InvalidInputError(f"{len(Bs)} blocks B_j but {len(pens)} penalties psi_j: give one penalty per block")
    if y0 is None or len(y0) != len(Bs):
        raise ShapeError(f"y0 must hold one starting vector per block ({len(Bs)} blocks)")
    for j, (Bj, psi, yj) in enumerate(zip(Bs, pens, y0)):
        if Bj.ndim != 2 or Bj.shape[0] != ell:
            raise ShapeError(f"B_{j} must have {ell} rows like A (shape ({ell}, q_{j})), got {Bj.shape}")
        if yj.shape != (Bj.shape[1],):
            raise ShapeError(f"y0[{j}] must have shape ({Bj.shape[1]},) to match B_{j}, got {yj.shape}")
        if not has_prox(psi):
            raise InvalidInputError(
                f"penalty psi_{j} ({type(psi).__name__}) has no value()/prox() method: the y-update of "
                "ADMM is a proximal step. Give a penalty with value(y) and prox(v, t) "
                "(see zoframe.penalties and zoframe_admm.penalties)"
            )
    for name, arr in (("A", A), ("c", c), *((f"B_{j}", b) for j, b in enumerate(Bs))):
        if not np.all(np.isfinite(arr)):
            raise InvalidInputError(f"{name} contains NaN or infinity")
    if rank_check not in ("error", "warn", "ignore"):
        raise InvalidParameterError(f"rank_check must be 'error', 'warn' or 'ignore', got {rank_check!r}")
    if rank_check != "ignore":
        rank = min(ell, d) if ell > d else int(np.linalg.matrix_rank(A))  # more rows than columns: deficient
        if rank < ell:
            msg = (
                f"A ({ell} x {d}) has rank {rank} < {ell}: it is not of full row rank, so Assumption 4 of "
                "Huang et al. (2019) fails and their O(1/T) guarantee does not apply (the iteration is "
                "still well defined). Pass rank_check='ignore' to run without this notice, or reformulate "
                "the coupling with fewer, independent rows."
            )
            if rank_check == "error":
                raise InvalidInputError(msg)
            warnings.warn(msg, RankDeficientCouplingWarning, stacklevel=3)


def admm_constants(
    oracle: Any, rho: float, eta: float, r: float | None, r_y: float | None
) -> tuple[float, Array]:
    """``r`` and ``(r_1, ..., r_k)`` with ``G = r I - rho eta A^T A > I`` and ``H_j = r_j I - rho B_j^T B_j > I``.

    Defaults are ``rho eta sigma_max(A^T A) + 1 + MARGIN`` and ``rho sigma_max(B_j^T B_j) + 1 + MARGIN``;
    user values below these bounds are rejected.
    """
    low_r = rho * eta * _sigma_max_sq(oracle.A) + 1.0
    low_y = np.array([rho * _sigma_max_sq(Bj) + 1.0 for Bj in oracle.B])
    if r is None:
        r_val = low_r + MARGIN
    elif r <= low_r:
        raise InvalidParameterError(
            f"r={r} is too small: G = r I - rho eta A^T A must exceed I, i.e. r > {low_r:.6g}; "
            "leave r=None for the default"
        )
    else:
        r_val = float(r)
    if r_y is None:
        ry = low_y + MARGIN
    elif np.any(r_y <= low_y):
        raise InvalidParameterError(
            f"r_y={r_y} is too small: H_j = r_j I - rho B_j^T B_j must exceed I, i.e. r_j > "
            f"{np.array2string(low_y, precision=6)}; leave r_y=None for the default"
        )
    else:
        ry = np.full(len(oracle.B), float(r_y))
    return r_val, ry


def residual(oracle: Any, x: Array, ys: Sequence[Array]) -> Array:
    """``A x + sum_j B_j y_j - c``."""
    res: Array = oracle.A @ x - oracle.c
    for Bj, yj in zip(oracle.B, ys):
        res = res + Bj @ yj
    return res


def y_updates(
    oracle: Any, x: Array, ys: Sequence[Array], lam: Array, rho: float, r_y: Array
) -> tuple[Array, ...]:
    """Alg. 1 l.8 / Alg. 2 l.6 for j = 1..k in order (Gauss-Seidel), each a prox of ``psi_j / r_j``.

    With ``H_j = r_j I - rho B_j^T B_j`` the quadratic terms in ``y_j`` collapse to ``(r_j/2)||y_j - v||^2``:
    ``y_j = prox_{psi_j / r_j}(y_j - (rho B_j^T res - B_j^T lam) / r_j)`` where ``res`` is the
    residual with the blocks before ``j`` already updated.
    """
    res = residual(oracle, x, ys)
    out = []
    for Bj, yj, psi, rj in zip(oracle.B, ys, oracle.penalties, r_y):
        v = yj - (rho * (Bj.T @ res) - Bj.T @ lam) / rj
        yn = np.asarray(psi.prox(v, 1.0 / rj), dtype=np.float64)
        res = res + Bj @ (yn - yj)
        out.append(yn)
    return tuple(out)


def x_update(
    oracle: Any, x: Array, ys: Sequence[Array], lam: Array, g: Array, rho: float, eta: float, r: float
) -> Array:
    """Alg. 1 l.9 / Alg. 2 l.7: minimiser of the linearised augmented Lagrangian (6) with ``G = r I - rho eta A^T A``.

    ``x = x_t - (eta / r) (g - A^T lam + rho A^T (A x_t + sum_j B_j y_j - c))``.
    """
    A = oracle.A
    out: Array = x - (eta / r) * (g - A.T @ lam + rho * (A.T @ residual(oracle, x, ys)))
    return out


def dual_update(oracle: Any, x: Array, ys: Sequence[Array], lam: Array, rho: float) -> Array:
    """Alg. 1 l.10 / Alg. 2 l.8: ``lam - rho (A x + sum_j B_j y_j - c)``."""
    out: Array = lam - rho * residual(oracle, x, ys)
    return out


# --------------------------------------------------------------------------- proximal baselines
@dataclass(frozen=True)
class ProxMap:
    """``y = M x + e`` (blocks of sizes ``sizes``) and ``lam = P^T u`` from the constraint.

    ``M = -B^+ A``, ``e = B^+ c`` with ``B = [B_1 ... B_k]``; ``P = B^+``. ``identity`` marks the case
    ``k = 1``, ``M = I``, ``e = 0`` where the prox is the penalty's own.
    """

    M: Array
    e: Array
    P: Array
    sizes: tuple[int, ...]
    identity: bool
    lipschitz: float


def prox_map(oracle: Any) -> ProxMap:
    """The map ``x -> y(x)`` the constraint defines; raises if the constraint does not determine ``y``.

    The proximal baselines minimise ``f(x) + sum_j psi_j(y_j(x))`` with no splitting, which needs
    ``B = [B_1 ... B_k]`` of full column rank and ``range(A), c`` inside ``range(B)``.
    """
    Bfull = np.hstack(list(oracle.B))
    gram = Bfull.T @ Bfull
    try:  # full column rank <=> B^T B positive definite; then B^+ = (B^T B)^{-1} B^T
        chol = np.linalg.cholesky(gram)
        ok = bool(np.min(np.diag(chol)) > 1e-10 * max(1.0, float(np.max(np.diag(chol)))))
    except np.linalg.LinAlgError:
        ok = False
    if not ok:
        raise IncompatibleProblemError(
            "the proximal baselines (no splitting) need the constraint A x + sum_j B_j y_j = c to "
            "determine y from x, but [B_1 ... B_k] is not of full column rank; use an ADMM solver "
            "(zo-svrg-admm, zo-saga-admm, ...) for this problem"
        )
    P = np.linalg.solve(gram, Bfull.T)
    Ac = np.hstack([oracle.A, oracle.c[:, None]])
    if np.linalg.norm(Ac - Bfull @ (P @ Ac)) > 1e-8 * max(1.0, float(np.linalg.norm(Ac))):
        raise IncompatibleProblemError(
            "the proximal baselines (no splitting) need every x to be feasible with y = B^+ (c - A x), "
            "i.e. range(A) and c inside range([B_1 ... B_k]); this problem's constraint restricts x. "
            "Use an ADMM solver (zo-svrg-admm, zo-saga-admm, ...) instead"
        )
    M = -P @ oracle.A
    e = P @ oracle.c
    sizes = tuple(int(b.shape[1]) for b in oracle.B)
    identity = len(sizes) == 1 and M.shape[0] == M.shape[1] and np.allclose(M, np.eye(M.shape[0])) and np.allclose(e, 0.0)
    return ProxMap(M=M, e=e, P=P, sizes=sizes, identity=bool(identity), lipschitz=_sigma_max_sq(M))


def _split(v: Array, sizes: Sequence[int]) -> list[Array]:
    return np.split(v, np.cumsum(sizes)[:-1])


def composed_prox(
    pm: ProxMap, penalties: Sequence[Penalty], v: Array, t: float, u0: Array, iters: int
) -> tuple[Array, Array]:
    """``argmin_x ||x - v||^2 / (2 t) + sum_j psi_j(M_j x + e_j)`` and its dual ``u``.

    Closed form when ``pm.identity``; otherwise ``iters`` steps of FISTA on the dual
    ``max_u -(t/2)||M^T u||^2 + u^T (M v + e) - H^*(u)``, warm-started at ``u0``, with
    ``prox_{s H^*}(z) = z - s prox_{H/s}(z / s)`` (Moreau) blockwise; then ``x = v - t M^T u``.
    """
    if pm.identity:
        x = np.asarray(penalties[0].prox(v, t), dtype=np.float64)
        return x, (v - x) / t
    s = 1.0 / (t * max(pm.lipschitz, 1e-12))
    lin = pm.M @ v + pm.e
    u_prev = u0
    w = u0
    theta = 1.0
    for _ in range(iters):
        z = w + s * (lin - t * (pm.M @ (pm.M.T @ w)))
        parts = _split(z / s, pm.sizes)
        prox = np.concatenate([np.asarray(psi.prox(pz, 1.0 / s), dtype=np.float64) for psi, pz in zip(penalties, parts)])
        u = z - s * prox
        theta_next = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * theta * theta))
        w = u + ((theta - 1.0) / theta_next) * (u - u_prev)
        u_prev, theta = u, theta_next
    x = v - t * (pm.M.T @ u_prev)
    return x, u_prev
