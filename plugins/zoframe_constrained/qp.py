"""Strictly convex quadratic programs by the dual active-set method of Goldfarb & Idnani.

``min 1/2 p^T B p + g^T p`` subject to ``A p <= b`` (``B`` symmetric positive definite), by D. Goldfarb and
A. Idnani, *A numerically stable dual method for solving strictly convex quadratic programs*, Math.
Programming 27 (1983) 1-33. The method starts at the unconstrained minimiser ``-B^-1 g`` and adds the most
violated row at each step, dropping a row whose multiplier would turn negative (the partial steps), so that
every iterate is the minimiser over its active rows. It keeps ``J = L^-T Q`` and an upper-triangular ``R``
with ``J^T N = [R; 0]`` for the active rows' normals ``N`` (``B = L L^T``); rows join by a Householder
reflection of ``J``'s trailing columns and leave by a QR of ``R``'s trailing block, so each change costs
``O(d^2)`` in a few array operations.

The primal iterate is moved by steps that bring the entering row to zero exactly (up to rounding in ``p``
itself), so the rows hold to rounding relative to their own size, whatever the distance from the unconstrained
minimiser. The least-distance form (``ldp``) reaches the same solution through ``z = L^T p + L^-1 g``, with
rows that hold only to about ``eps |z|^3``: that is its weakness where the objective is steep next to the
feasible set, which this method does not share.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import solve_triangular

from zoframe.protocols import Array

__all__ = ["dual_qp"]

#: a row whose component outside the span of the active rows (in the metric of ``B``) is at most this fraction
#: of its norm counts as dependent on them: far above rounding, below the accuracy of difference Jacobians
#: (about 1e-10 relative), so that two copies of a row differing by that noise are not taken as independent
#: (which would call for a step of the noise's inverse size)
_DEP = 1e-9


def dual_qp(B: Array, g: Array, A: Array, b: Array, meq: int = 0, max_iter: int | None = None) -> tuple[Array, Array]:
    """``(p, lam)``: the solution of ``min 1/2 p^T B p + g^T p`` s.t. ``A_j p = b_j`` for the first ``meq`` rows
    and ``A_j p <= b_j`` for the others, with its multipliers (``B p + g + A^T lam = 0``; ``lam_j >= 0`` on the
    inequality rows and ``0`` on the inactive ones, of either sign on the equality rows).

    Raises ``RuntimeError`` where the rows are inconsistent, or nearly so: the method meets inconsistency as a
    violated row that depends on the active ones (within ``_DEP``) with no multiplier to exchange for it, which
    is inconsistent if the dependence is exact and consistent, with a step of the inverse size of the tiny
    independent part, if not; and as an equality that depends on the ones before it and does not hold. The
    caller decides (the precision phase asks the least-distance form, which tells the two apart by its own
    residual). Also ``RuntimeError`` after ``max_iter`` changes of the active rows (default ``5 (rows + d) +
    20``), and ``numpy.linalg.LinAlgError`` when ``B`` is not positive definite.

    A row counts as satisfied when ``A_j p - b_j <= 1e-15 (|b_j| + |A_j|_1 max(|p|_inf, |p_0|_inf))`` (rounding of
    its own terms, ``p_0 = -B^-1 g`` the unconstrained minimiser that ``p`` is computed from; ``|A_j p - b_j|`` for an equality). The equality rows join first (Goldfarb & Idnani, sec. 4) and never
    leave; one that depends on those before it (see ``_DEP``) is skipped when it holds to ``_DEP`` of its terms'
    size, and makes the rows inconsistent otherwise.
    """
    d = g.shape[0]
    k = A.shape[0]
    L = np.linalg.cholesky(B)
    J = solve_triangular(L, np.eye(d), lower=True).T  # L^-T
    p = -(J @ (J.T @ g))  # -B^-1 g
    act: list[int] = []
    u = np.zeros(0)  # multipliers of the active rows (the equalities first)
    R = np.zeros((0, 0))
    row_l1 = np.abs(A).sum(axis=1)
    absb = np.abs(b)
    p0 = float(np.abs(p).max(initial=0.0))  # p is computed from the unconstrained minimiser: its rounding scale

    def size(j: int | slice) -> Array:
        """The size of row j's terms ``|b_j| + |A_j|_1 max(|p|_inf, |p_0|_inf)``."""
        return np.asarray(absb[j] + row_l1[j] * max(p0, float(np.abs(p).max(initial=0.0))))

    for j in range(meq):  # the equalities: a full step each, of either sign
        q = len(act)
        dv = J.T @ A[j]
        res = float(A[j] @ p - b[j])
        zn = float(dv[q:] @ dv[q:])
        if zn <= _DEP**2 * float(dv @ dv):  # in the span of the equalities before it
            if abs(res) <= _DEP * float(size(j)):
                continue  # and consistent with them (to the rounding of difference Jacobians)
            raise RuntimeError("dual_qp: an equality row depends on the ones before it but does not hold")
        t = res / zn
        p = p - t * (J[:, q:] @ dv[q:])
        u = u - t * (solve_triangular(R, dv[:q], lower=False) if q else np.zeros(0))
        R, J = _add(R, J, dv, q)
        act.append(j)
        u = np.append(u, t)
    neq = len(act)
    limit = 5 * (k + d) + 20 if max_iter is None else max_iter
    changes = 0
    while True:
        s = A @ p - b  # > 0: violated
        s[:meq] = -math.inf
        s[act] = -math.inf
        excess = s - 1e-15 * size(slice(None))
        j = int(np.argmax(excess)) if k else 0
        if k == meq or not excess[j] > 0.0:
            lam = np.zeros(k)
            lam[act] = u
            lam[meq:] = np.maximum(lam[meq:], 0.0)
            return p, lam
        u_j = 0.0
        while True:  # the steps that bring row j in (Goldfarb & Idnani, step 2)
            changes += 1
            if changes > limit:
                raise RuntimeError(f"dual_qp: {limit} changes of the active rows without reaching the solution")
            q = len(act)
            dv = J.T @ A[j]
            r = solve_triangular(R, dv[:q], lower=False) if q else np.zeros(0)  # the multipliers' direction
            z = J[:, q:] @ dv[q:]  # the primal direction (in the null space of the active rows)
            zn = float(dv[q:] @ dv[q:])  # = z^T A_j
            t1, drop = math.inf, -1  # the partial step: the first inequality multiplier to reach 0
            pos = r[neq:] > 0.0
            if pos.any():
                ratios = np.where(pos, u[neq:] / np.where(pos, r[neq:], 1.0), math.inf)
                drop = neq + int(np.argmin(ratios))
                t1 = float(ratios[drop - neq])
            dep = zn <= _DEP**2 * float(dv @ dv)  # row j is in the span of the active rows
            t2 = math.inf if dep else float(A[j] @ p - b[j]) / zn  # the full step: row j at zero
            t = min(t1, t2)
            if not math.isfinite(t):  # row j (nearly) dependent on the active rows, no multiplier to trade for it:
                # inconsistent if the dependence is exact, consistent with a step of the inverse of the tiny
                # independent part if it is not; this method cannot tell the two apart
                raise RuntimeError("dual_qp: a violated row depends on the active ones (within _DEP) with no "
                                   "multiplier to exchange: inconsistent or nearly so")
            if not dep:
                p = p - t * z
            u = u - t * r
            u_j += t
            if t2 <= t1:  # row j joins the active rows
                R, J = _add(R, J, dv, q)
                act.append(j)
                u = np.append(u, u_j)
                break
            R, J = _drop(R, J, drop)  # a row leaves (its multiplier reached zero)
            del act[drop]
            u = np.delete(u, drop)


def _add(R: Array, J: Array, dv: Array, q: int) -> tuple[Array, Array]:
    """The row with ``dv = J^T n`` joins: a Householder reflection of ``J``'s columns ``q..`` maps ``dv[q:]``
    onto its first entry; ``R`` gains the column ``(dv[:q], -+|dv[q:]|)``."""
    d2 = dv[q:]
    norm = float(np.sqrt(d2 @ d2))
    sign = 1.0 if d2[0] >= 0.0 else -1.0
    v = d2.copy()
    v[0] += sign * norm
    vv = float(v @ v)
    J = J.copy()
    if vv > 0.0:
        J[:, q:] -= np.outer(J[:, q:] @ v, (2.0 / vv) * v)
    R_new = np.zeros((q + 1, q + 1))
    R_new[:q, :q] = R
    R_new[:q, q] = dv[:q]
    R_new[q, q] = -sign * norm
    return R_new, J


def _drop(R: Array, J: Array, i: int) -> tuple[Array, Array]:
    """Active row ``i`` leaves: its column of ``R`` goes, and a QR of the trailing (Hessenberg) block brings ``R``
    back to triangular form, the same rotation applied to ``J``'s columns ``i..q-1``."""
    q = R.shape[0]
    Rm = np.delete(R, i, axis=1)  # q x (q - 1), Hessenberg from column i
    J = J.copy()
    if i < q - 1:
        Qb, Rb = np.linalg.qr(Rm[i:, i:], mode="complete")
        Rm[i:, i:] = Rb
        J[:, i:q] = J[:, i:q] @ Qb
    return Rm[: q - 1, :], J
