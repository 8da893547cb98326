"""The objective's part of the certificate: gradient, curvature and component-gradient scales at a point, and the
coordinate-by-coordinate test (finite sums, and the objective of constrained and composite problems)."""

from __future__ import annotations

from dataclasses import dataclass
import math

import numpy as np

from zoframe.certificate._common import _EPS, _STEP, Evals, _derivatives, _Differences
from zoframe.protocols import Array

#: the smallest scale of a coordinate, relative to the typical size of the point's coordinates
_FLOOR = 1e-2


def point_scales(x: Array, box: tuple[Array, Array] | None) -> Array:
    """Each coordinate's length scale at a point of a finite sum: ``c_k = max(|x_k|, 1e-2 m)`` with ``m`` the
    median of ``|x_j|`` (1 when every entry is 0), and the box's width where that is finite and narrower.

    The scale comes from the point alone (a certificate looks at nothing else) and has no floor of 1: a
    problem whose variables are of size ``1e-2`` is tested in its own units, so a point ``1 %`` away from
    its optimum is not stationary (with ``max(1, |x_k|)`` it was: a Newton step of ``1e-3`` absolute is
    ``10 %`` of such a variable). The floor ``1e-2 m`` keeps a coordinate whose optimum is ``0`` from being
    its own scale (a point ``x_k = delta`` next to ``0`` would otherwise always be a Newton step of its own
    size away)."""
    a = np.abs(np.asarray(x, dtype=np.float64))
    m = float(np.median(a)) if a.shape[0] else 0.0
    if not m > 0:
        nz = a[a > 0]
        m = float(np.median(nz)) if nz.shape[0] else 1.0
    c = np.maximum(a, _FLOOR * m)
    if box is not None:
        width = box[1] - box[0]
        c = np.where(np.isfinite(width) & (width > 0), np.minimum(c, width), c)
    return np.maximum(c, 1e-300)


def scaled_differences(x: Array, c: Array, box: tuple[Array, Array] | None) -> _Differences:
    """The central-difference points of :mod:`zoframe.certificate` with steps ``eps^(1/4) c_k`` (the
    coordinates' own scales, :func:`point_scales`), one-sided at a bound of a box."""
    h = _STEP * c
    up, down = x + h, x - h
    if box is not None:
        up = np.minimum(up, np.maximum(box[1], x))
        down = np.maximum(down, np.minimum(box[0], x))
    return _Differences(x, up - x, x - down)


@dataclass(frozen=True)
class _Objective:
    """The objective at ``x``: value, gradient, curvature scale and component-gradient scale."""

    f: float
    grad: Array
    curv: Array  # H_ii, 0 where it cannot be told from noise
    comp: float  # mean_i |grad f_i|
    noise: float  # rounding noise of f
    comp_coord: Array  # per coordinate: mean_i |d f_i / d x_k| (|grad f| entries without a finite sum)


def _objective_at(ev: Evals, x: Array, D: _Differences) -> _Objective:
    """f, its gradient and curvature at ``x`` from ``2 d + 1`` points (in chunks of coordinates), and the
    typical component gradient of a finite sum."""
    d, n = x.shape[0], ev.oracle.n
    V0 = ev.objective(x[None, :])[0]  # (n,)
    fp, fm, ap, am = (np.empty(d) for _ in range(4))
    sq = np.zeros(n)
    comp_coord = np.zeros(d)
    for lo, hi in D.chunks(n):
        k = hi - lo
        V = ev.objective(D.points(lo, hi))  # (2k, n): one batched call per chunk
        mean, size = V.mean(axis=1), np.abs(V).mean(axis=1)
        fp[lo:hi], fm[lo:hi], ap[lo:hi], am[lo:hi] = mean[:k], mean[k:], size[:k], size[k:]
        if n > 1:  # the component gradients of the chunk, reduced at once
            G = _derivatives(V0, V[:k], V[k:], D.a[lo:hi], D.b[lo:hi])[0]
            sq += np.einsum("ij,ij->j", G, G)
            comp_coord[lo:hi] = np.abs(G).mean(axis=1)
    f0 = float(V0.mean())
    # f is the mean of the components: its derivatives are the means' differences
    g2, h2, _ = _derivatives(np.array([f0]), fp[:, None], fm[:, None], D.a, D.b)
    a0 = float(np.abs(V0).mean())  # the rounding noise of a mean is that of its terms' sizes
    hn2 = _derivatives(np.array([a0]), ap[:, None], am[:, None], D.a, D.b)[2]
    g, h, hn = g2[:, 0], h2[:, 0], hn2[:, 0]
    h = np.where(np.abs(h) > hn, h, 0.0)
    comp = float(np.sqrt(sq).mean()) if n > 1 else float(np.linalg.norm(g))
    noise = 64.0 * _EPS * max(a0, float(ap.max(initial=0.0)), float(am.max(initial=0.0)))
    return _Objective(f0, g, h, comp, noise, comp_coord if n > 1 else np.abs(g))


def _coordinate_ratio(obj: _Objective, x: Array, D: _Differences, resid: Array, force: Array, tol: float,
                      box: tuple[Array, Array] | None, scales: Array | None = None) -> float:  # fmt: skip
    """The largest per-coordinate relative residual ``|r_k| / ref_k``.

    ``ref_k = max(|df/dx_k|, sum_j |l_j dg_j/dx_k|, c_k |H_kk|, mean_i |df_i/dx_k|)`` compares each
    coordinate's residual with quantities of the same coordinate only (``c_k``: ``scales`` when given (a
    finite sum: :func:`point_scales`), else ``max(1, |x_k|)``, or the box's width where narrower), so a test in one coordinate's units is not passed on the
    strength of another's: the global norms of :func:`_kkt` mix coordinates, and variables of very
    different scales (``x_1 ~ 1e-3`` beside ``x_3 ~ 1e4``) let a point far from stationary in the
    large one pass on the small one's curvature. The floor ``10 noise(f) / (span_k tol)`` (``span_k``
    the difference width) keeps a residual at the differences' own rounding level from failing.
    """
    c = np.maximum(1.0, np.abs(x)) if scales is None else scales
    if box is not None and scales is None:
        width = box[1] - box[0]
        c = np.where(np.isfinite(width) & (width > 0), np.minimum(c, width), c)
    span = D.a + D.b
    floor = np.where(span > 0, 10.0 * obj.noise / (np.where(span > 0, span, 1.0) * tol), 0.0)
    ref = np.maximum.reduce([np.abs(obj.grad), force, c * np.abs(obj.curv), obj.comp_coord, floor])
    num = np.abs(resid)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(num == 0.0, 0.0, np.where(ref > 0, num / np.where(ref > 0, ref, 1.0), math.inf))
    return float(ratio.max(initial=0.0))


def _reference(obj: _Objective, s: float) -> float:
    return max(float(np.linalg.norm(obj.grad)), s * float(np.abs(obj.curv).max(initial=0.0)), obj.comp)


