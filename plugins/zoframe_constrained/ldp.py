"""Least-distance programs for the feasibility restoration: ``min ||delta|| s.t. G delta <= b``.

Lawson & Hanson (*Solving Least Squares Problems*, 1974, ch. 23) reduce a least-distance program
to non-negative least squares (NNLS). :func:`nnls` is their NNLS algorithm (ch. 23, Algorithm
NNLS) with the QR factorisation of the passive columns grown one column at a time
(Gram-Schmidt with one reorthogonalisation) and downdated by Givens rotations when columns leave
(``scipy.linalg.qr_delete``; refactorised when many leave at once). The
restoration's programs have many rows (``4 dim`` to ``16 dim``) but few active ones (about ``dim / 2`` on
a9a pairwise), so each iteration costs one product ``E^T r`` plus ``O(M p)`` for ``p`` passive
columns. ``benchmarks/ldp_nnls.py`` (a9a pairwise, first restoration program after 1,000 steps,
1,968 rows, d = 123, 41-56 active rows, 5 seeds), before the downdates: median 8.9 ms against 16.9 ms
for scipy 1.17's ``nnls`` and 7.7 ms against 133 ms for scipy 1.15's. The two steps agree to the
accuracy of the least-distance form, whose rows hold to about ``eps |delta|^3``: on the same programs
(seeds 0-4) the steps differ by 7e-12 to 1.7e-4 as ``|delta|`` goes from 39 to 7,275, where both NNLS leave
the rows violated by up to 6e-5 and the dual method of :mod:`zoframe_constrained.qp` by 5e-12. The
downdates made the programs of a9a's restoration 1.3-1.9x faster again (interleaved, loaded machine). On small programs
(breast-cancer: 33-66 rows, d = 31) scipy's compiled loop is faster (0.02 ms against 0.13 ms),
which does not matter next to a round's constraint evaluations.

Measured and not taken (the programs of ``benchmarks/peers.py``'s a9a runs, 5 seeds, the same steps to
rounding): Goldfarb & Idnani's dual method (:func:`zoframe_constrained.qp.dual_qp` with ``B = I``,
``g = 0``) took 2x the time at 1,968 rows and 3x at 492 (about as many changes of the active rows as NNLS
has column entries, each dearer); starting NNLS from the previous round's active rows saved nothing (most
of them leave); pricing a working set of columns instead of all (the dual vector on the most violated
``2 M`` columns, the others priced when those are done) made 1.6x as many column entries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.linalg import get_lapack_funcs, qr_delete, solve_triangular

from zoframe.protocols import Array, IntArray

__all__ = ["least_distance", "least_distance_step", "nnls"]

#: LAPACK's dtrtrs, the routine ``solve_triangular`` calls: ``solve_triangular(R, y, check_finite=False)``
#: for a C-ordered ``R`` is ``dtrtrs(R.T, y, lower=1, trans=1)`` (the transposed system, which dtrtrs
#: reads in its Fortran order), without the wrapper's argument checks (about 8 us per call)
_TRTRS: Callable[..., Any] = get_lapack_funcs(("trtrs",), (np.empty((1, 1)),))[0]


class _PassiveQR:
    """``E[:, P] = Q R`` for the passive columns ``P`` (in insertion order), grown one column at a time."""

    def __init__(self, E: Array) -> None:
        self.E = E
        M, k = E.shape
        self.limit = min(M, k)
        self.cap = min(self.limit, 64)
        self.Q = np.empty((M, self.cap))
        self.R = np.zeros((self.cap, self.cap))
        self.cols: list[int] = []

    @property
    def p(self) -> int:
        return len(self.cols)

    def _grow(self, need: int) -> None:
        if need <= self.cap:
            return
        cap = min(self.limit, max(2 * self.cap, need))
        Q, R = np.empty((self.Q.shape[0], cap)), np.zeros((cap, cap))
        p = self.p
        Q[:, :p], R[:p, :p] = self.Q[:, :p], self.R[:p, :p]
        self.Q, self.R, self.cap = Q, R, cap

    def append(self, t: int, rel_tol: float) -> bool:
        """Add column ``t``; ``False`` (nothing added) when it is numerically in the span of ``P``."""
        p = self.p
        if p >= self.limit:
            return False
        a = self.E[:, t]
        Qp = self.Q[:, :p]
        h = Qp.T @ a
        q = a - Qp @ h
        h2 = Qp.T @ q  # one reorthogonalisation ("twice is enough")
        q -= Qp @ h2
        h += h2
        rho = float(np.sqrt(q @ q))
        if rho <= rel_tol * float(np.sqrt(a @ a)):
            return False
        self._grow(p + 1)
        self.Q[:, p] = q / rho
        self.R[:p, p] = h
        self.R[p, : p + 1] = 0.0
        self.R[p, p] = rho
        self.cols.append(t)
        return True

    def pop(self) -> None:
        self.cols.pop()

    def solve(self, e: Array) -> Array:
        """Least-squares coefficients of ``e`` on the passive columns (in the order of ``cols``)."""
        p = self.p
        R = self.R[:p, :p]
        y = self.Q[:, :p].T @ e
        if R.flags.f_contiguous or not p:  # solve_triangular's other branch (p = 1, or nothing to solve)
            out: Array = solve_triangular(R, y, check_finite=False)
            return out
        x, info = _TRTRS(R.T, y, overwrite_b=1, lower=1, trans=1)
        if info != 0:  # singular or an illegal argument: let solve_triangular raise what it raises
            return np.asarray(solve_triangular(R, y, check_finite=False), dtype=np.float64)
        return np.asarray(x, dtype=np.float64)

    def reset(self, cols: list[int]) -> None:
        """Refactorise from scratch for the passive columns ``cols`` (after some left)."""
        self.cols = list(cols)
        p = self.p
        if p:
            self._grow(p)
            q, r = np.linalg.qr(self.E[:, self.cols])
            self.Q[:, :p], self.R[:p, :p] = q, r

    def remove(self, positions: list[int]) -> None:
        """Drop the passive columns at ``positions`` (indices into ``cols``) by Givens downdates.

        One ``scipy.linalg.qr_delete`` per column left (``O(M p)`` each, compiled) instead of a new
        factorisation (``O(M p^2)``); when more than a quarter of the columns leave at once, a new
        factorisation is the cheaper of the two.
        """
        p = self.p
        if 4 * len(positions) > p:
            gone = set(positions)
            self.reset([c for j, c in enumerate(self.cols) if j not in gone])
            return
        Q, R = self.Q[:, :p], self.R[:p, :p]
        for j in sorted(positions, reverse=True):
            Q, R = qr_delete(Q, R, j, 1, which="col", check_finite=False)
            del self.cols[j]
        q = self.p  # (with p = M the decomposition was a full one: Q stays M x M, R gains zero rows)
        self.Q[:, :q], self.R[:q, :q] = Q[:, :q], R[:q, :q]


def nnls(E: Array, e: Array, maxiter: int | None = None) -> Array:
    """``argmin_{u >= 0} ||E u - e||`` by Lawson & Hanson's active-set algorithm (ch. 23).

    ``maxiter`` bounds the outer iterations (default ``3 k + 100`` for ``k`` columns); reaching it
    raises ``RuntimeError``. A column whose entering coefficient is not positive, or which is
    numerically in the span of the passive ones, is kept out (the guards of the original code
    against cycling on degenerate columns).
    """
    E = np.asarray(E, dtype=np.float64)
    e = np.asarray(e, dtype=np.float64)
    k = E.shape[1]
    limit = 3 * k + 100 if maxiter is None else maxiter
    u = np.zeros(k)
    if k == 0:
        return u
    ET = np.ascontiguousarray(E.T)
    col_max = float(np.sqrt(np.einsum("ij,ij->j", E, E)).max())
    tol = 1e-12 * max(col_max, 1e-300) * max(1.0, float(np.sqrt(e @ e)))
    qr = _PassiveQR(E)
    out_of_play = np.zeros(k, dtype=bool)  # passive, or kept out as dependent / not entering
    r = e.copy()
    w = np.empty(k)
    for _ in range(limit):
        np.dot(ET, r, out=w)  # the dual vector (negative gradient)
        w[out_of_play] = -np.inf
        t = int(w.argmax())
        if not w[t] > tol:  # Kuhn-Tucker conditions hold
            return u
        out_of_play[t] = True
        if not qr.append(t, 1e-10):
            continue
        first = True
        while True:
            z = qr.solve(e)
            if z.min() > 0:
                break
            if first and z[-1] <= 0:  # the entering column would not be positive: keep it out
                qr.pop()
                z = u[qr.cols]
                break
            first = False
            cols = np.asarray(qr.cols)
            uP = u[cols]
            neg = z <= 0
            ratio = uP[neg] / (uP[neg] - z[neg])
            alpha = float(ratio.min())
            uP = uP + alpha * (z - uP)
            keep = uP > 0
            keep[np.flatnonzero(neg)[int(np.argmin(ratio))]] = False  # the blocking column leaves
            left = cols[~keep]
            out_of_play[left] = False
            u[left] = 0.0
            u[cols[keep]] = uP[keep]
            qr.remove([int(j) for j in np.flatnonzero(~keep)])
            if qr.p == 0:
                z = np.zeros(0)
                break
        u[:] = 0.0
        if qr.p:
            passive = np.asarray(qr.cols)
            u[passive] = z
            r = e - E[:, passive] @ z
        else:
            r = e.copy()
    raise RuntimeError(f"nnls: {limit} iterations without meeting the Kuhn-Tucker conditions")


def least_distance(G: Array, b: Array) -> tuple[Array, IntArray | None]:
    """The shortest ``delta`` with ``G delta <= b`` and the rows with a positive multiplier.

    With ``E = [-G^T; -b^T]`` and ``e`` the last unit vector, ``u = argmin_{u >= 0} ||E u - e||``
    and ``r = E u - e`` give ``delta = -r[:d] / r[d]`` (Lawson & Hanson ch. 23); the rows with
    ``u_j > 0`` are the active set of the projection. When the rows are inconsistent
    (``r[d] ~ 0``) or :func:`nnls` fails, the fallback is the least-squares step ``G_V delta = b_V``
    on the rows ``V`` violated at ``delta = 0`` (``b_j < 0``; singular values below ``1e-8`` of
    the largest cut; ``0`` when no row is violated), and the active set is ``None``.
    """
    G = np.asarray(G, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    d = G.shape[1]
    ET = np.empty((G.shape[0], d + 1))  # E^T, built in the row order nnls works in (E is its view)
    np.negative(G, out=ET[:, :d])
    np.negative(b, out=ET[:, d])
    E = ET.T
    e = np.zeros(d + 1)
    e[d] = 1.0
    u: Array | None
    try:
        u = nnls(E, e)
    except (RuntimeError, np.linalg.LinAlgError):
        u = None
    if u is not None:
        r = E @ u - e
        if r[d] < -1e-12:
            out: Array = -r[:d] / r[d]
            return out, np.flatnonzero(u > 0)
    rows = np.flatnonzero(b < 0)  # the rows violated at delta = 0; the others are left to the next round
    if rows.shape[0] == 0:
        return np.zeros(d), None
    return np.asarray(np.linalg.lstsq(G[rows], b[rows], rcond=1e-8)[0], dtype=np.float64), None


def least_distance_step(G: Array, b: Array) -> Array:
    """The shortest ``delta`` with ``G delta <= b`` (:func:`least_distance` without the active set)."""
    return least_distance(G, b)[0]
