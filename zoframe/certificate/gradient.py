"""The objective's part of the certificate: gradient, curvature and component-gradient scales at a point, and the
coordinate-by-coordinate test (finite sums, and the objective of constrained and composite problems)."""

from __future__ import annotations

from dataclasses import dataclass
import math

import numpy as np

from zoframe.certificate._common import _EPS, _STEP, Evals, _derivatives, _Differences, _standing_out
from zoframe.certificate.noise import Noise
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


def scaled_differences(x: Array, c: Array, box: tuple[Array, Array] | None, step: float = _STEP) -> _Differences:
    """The central-difference points of :mod:`zoframe.certificate` with steps ``step c_k`` (``eps^(1/4)`` for
    noise-free values, larger under noise: :func:`zoframe.certificate.noise.noise_step`; ``c_k`` the
    coordinates' own scales, :func:`point_scales`), one-sided at a bound of a box."""
    h = step * c
    up, down = x + h, x - h
    if box is not None:
        up = np.minimum(up, np.maximum(box[1], x))
        down = np.maximum(down, np.minimum(box[0], x))
    return _Differences(x, up - x, x - down)


@dataclass(frozen=True)
class _Objective:
    """The objective at ``x``: value, gradient, curvature scale and component-gradient scale, with what the noise
    of the values leaves of them.

    ``curv``: ``H_ii`` where it stands out of its error (three times the noise error ``4 sigma / (a b)``), else 0;
    ``comp`` / ``comp_coord``: the component gradients' sizes, each entry lowered by its noise error;
    ``gerr``: each gradient entry's error bound ``4 sigma_f / span_i`` (values off by up to ``2 sigma`` each);
    ``noise``: ``sigma_f``; ``rounding``: the noise is the values' rounding (noise-free values)."""

    f: float
    grad: Array
    curv: Array
    comp: float
    noise: float
    comp_coord: Array
    gerr: Array
    rounding: bool


def _objective_at(
    ev: Evals, x: Array, D: _Differences, V0: Array | None = None, noise: Noise | None = None,
    box: tuple[Array, Array] | None = None,
) -> _Objective:
    """f, its gradient and curvature at ``x`` from ``2 d + 1`` points (in chunks of coordinates), and the
    typical component gradient of a finite sum. ``V0``: the components' values at ``x`` if known; ``noise``:
    the noise at ``x`` (:func:`zoframe.certificate.noise.objective_noise`; ``None``: the rounding alone).
    ``box``: where a bound leaves one side only (``x`` at the bound), a third point twice as far on the open side
    (one more call over those coordinates) makes the difference second-order: a
    one-sided difference is off by ``h |f''| / 2``, which a step sized to a noise relative to ``|f| ~ 0`` makes
    larger than the gradient itself (a minimiser ``0.007`` inside a bound read as a positive slope over a step of
    ``0.036``)."""
    d, n = x.shape[0], ev.oracle.n
    if V0 is None:
        V0 = ev.objective(x[None, :])[0]  # (n,)
    fp, fm, ap, am = (np.empty(d) for _ in range(4))
    sq = np.zeros(n)
    comp_coord = np.zeros(d)
    span = D.a + D.b
    sig_i = None if noise is None or noise.components is None else noise.components  # (n,)
    for lo, hi in D.chunks(n):
        k = hi - lo
        V = ev.objective(D.points(lo, hi))  # (2k, n): one batched call per chunk
        mean, size = V.mean(axis=1), np.abs(V).mean(axis=1)
        fp[lo:hi], fm[lo:hi], ap[lo:hi], am[lo:hi] = mean[:k], mean[k:], size[:k], size[k:]
        if n > 1:  # the component gradients of the chunk, reduced at once
            G = _derivatives(V0, V[:k], V[k:], D.a[lo:hi], D.b[lo:hi])[0]  # (k, n)
            if sig_i is not None:  # each entry lowered by its noise error 4 sigma_i / span_k
                err = 4.0 * sig_i[None, :] / np.maximum(span[lo:hi, None], 1e-300)
                G = np.sign(G) * np.maximum(np.abs(G) - err, 0.0)
            sq += np.einsum("ij,ij->j", G, G)
            comp_coord[lo:hi] = np.abs(G).mean(axis=1)
    f0 = float(V0.mean())
    # f is the mean of the components: its derivatives are the means' differences
    g2, h2, _ = _derivatives(np.array([f0]), fp[:, None], fm[:, None], D.a, D.b)
    a0 = float(np.abs(V0).mean())  # the rounding noise of a mean is that of its terms' sizes
    hn2 = _derivatives(np.array([a0]), ap[:, None], am[:, None], D.a, D.b)[2]
    g, h, hn = g2[:, 0], h2[:, 0], hn2[:, 0]
    rounding = 64.0 * _EPS * max(a0, float(ap.max(initial=0.0)), float(am.max(initial=0.0)))
    sigma = rounding if noise is None else max(noise.f, rounding)
    quiet = noise is None or noise.rounding
    # the curvature where it stands out: of its rounding floor (noise-free values), or of three times its noise error
    h = _standing_out(h, hn, 0.0 if quiet else sigma, D.a, D.b)
    gerr = np.where(span > 0, 4.0 * sigma / np.where(span > 0, span, 1.0), 0.0)
    g, gerr = _at_bounds(ev, x, D, box, f0, g, gerr, sigma)
    if n > 1:
        comp = float(np.sqrt(sq).mean())
    else:  # one component: its gradient is the gradient, lowered by its error under noise
        comp_coord = np.abs(g) if quiet else np.maximum(np.abs(g) - gerr, 0.0)
        comp = float(np.linalg.norm(comp_coord))
    return _Objective(f0, g, h, comp, sigma, comp_coord, gerr, quiet)


def _at_bounds(
    ev: Evals, x: Array, D: _Differences, box: tuple[Array, Array] | None, f0: float, g: Array, gerr: Array,
    sigma: float,
) -> tuple[Array, Array]:
    """The coordinates whose difference is one-sided (a bound at ``x`` on the other side), where the box holds a
    third point ``x + 2 t e_k`` (``t`` the one step): the three-point one-sided derivative ``(-3 f_0 + 4 f_1 -
    f_2) / (2 t)`` and its error ``2 sigma (3 + 4 + 1) / (2 |t|)``. The curvature stays 0 there, as with two
    points: it only enlarges the reference a residual is judged on, and at a vertex of the box, where no line
    inside it can estimate the noise, a noisy second difference over the step taken for rounding-level values
    is mostly noise (``sigma / t^2``) and would excuse any slope. ``g``, ``gerr`` as they were elsewhere."""
    if box is None:
        return g, gerr
    t = np.where(D.b == 0.0, D.a, np.where(D.a == 0.0, -D.b, 0.0))
    far = x + 2.0 * t
    one = np.flatnonzero((t != 0.0) & (far >= box[0]) & (far <= box[1]))
    if not one.shape[0]:
        return g, gerr
    k = one.shape[0]
    P = np.repeat(x[None, :], 2 * k, axis=0)
    P[np.arange(k), one] += t[one]
    P[k + np.arange(k), one] += 2.0 * t[one]
    F = np.asarray(ev.objective(P), dtype=np.float64).mean(axis=1)  # one call: the near and the far points
    f1, f2, tk = F[:k], F[k:], t[one]
    g, gerr = g.copy(), gerr.copy()
    g[one] = (-3.0 * f0 + 4.0 * f1 - f2) / (2.0 * tk)
    gerr[one] = 8.0 * sigma / np.abs(tk)
    return g, gerr


def _coordinate_ratio(obj: _Objective, x: Array, D: _Differences, resid: Array, force: Array, tol: float,
                      box: tuple[Array, Array] | None, scales: Array | None = None,
                      err: Array | None = None, curv_lag: Array | None = None) -> tuple[float, float]:  # fmt: skip
    """The largest per-coordinate relative residual ``(|r_k| + e_k) / ref_k`` (the least favourable reading of the
    values), and the most favourable one ``(|r_k| - e_k)_+ / ref_k^+`` (the two agree for noise-free values).

    ``ref_k = max(|df/dx_k| - e_k, sum_j |l_j dg_j/dx_k|, c_k |H_kk|, mean_i |df_i/dx_k|)`` compares each
    coordinate's residual with quantities of the same coordinate only (``c_k``: ``scales`` when given (a
    finite sum: :func:`point_scales`), else ``max(1, |x_k|)``, or the box's width where narrower), so a test in
    one coordinate's units is not passed on the strength of another's: the global norms of :func:`_kkt` mix
    coordinates, and variables of very different scales (``x_1 ~ 1e-3`` beside ``x_3 ~ 1e4``) let a point far
    from stationary in the large one pass on the small one's curvature. ``e_k``: the residual entry's error
    bound from the noise (``err``; default the gradient's, ``obj.gerr``), added to the residual and taken off
    the gradient in the reference: a residual within its error is no evidence of stationarity. ``curv_lag``: the
    multipliers' share of the Lagrangian's curvature, ``sum_j lambda_j |g_j''_kk|``, added to ``|H_kk|`` (a
    coordinate in which the objective and every active row are stationary is judged on the Lagrangian's curvature).

    With noise-free values (``obj.rounding``) the reference has the floor ``10 noise(f) / (span_k tol)``
    (``span_k`` the difference width): a residual at the differences' own rounding level does not fail (the
    point is as stationary as the values can tell). Under noise there is no such floor: a coordinate whose
    gradient and curvature the noise hides cannot be certified; when the second number passes and the first does
    not, the noise decided the verdict (the values show neither that the point is stationary nor that it is
    not).
    """
    c = np.maximum(1.0, np.abs(x)) if scales is None else scales
    if box is not None and scales is None:
        width = box[1] - box[0]
        c = np.where(np.isfinite(width) & (width > 0), np.minimum(c, width), c)
    e = obj.gerr if err is None else err
    span = D.a + D.b
    hk = np.abs(obj.curv) + (0.0 if curv_lag is None else curv_lag)
    if obj.rounding:  # noise-free values: the rounding floor, no error bounds
        floor = np.where(span > 0, 10.0 * obj.noise / (np.where(span > 0, span, 1.0) * tol), 0.0)
        ref = np.maximum.reduce([np.abs(obj.grad), force, c * hk, obj.comp_coord, floor])
        plain = _entry_ratio(np.abs(resid), ref)
        return plain, plain
    # the least favourable reading of the values (the residual plus its error against the reference less it), and
    # the most favourable one (the residual less its error against the reference plus it): a failure of the
    # second is evidenced by the values; a failure of the first alone is the noise's
    ref_lo = np.maximum.reduce([np.maximum(np.abs(obj.grad) - e, 0.0), force, c * hk, obj.comp_coord])
    ref_hi = np.maximum.reduce([np.abs(obj.grad) + e, force, c * hk, obj.comp_coord])
    return _entry_ratio(np.abs(resid) + e, ref_lo), _entry_ratio(np.maximum(np.abs(resid) - e, 0.0), ref_hi)


def _entry_ratio(num: Array, ref: Array) -> float:
    """``max_k num_k / ref_k`` (0 where ``num_k = 0``, infinite where only ``ref_k`` is 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(num == 0.0, 0.0, np.where(ref > 0, num / np.where(ref > 0, ref, 1.0), math.inf))
    return float(ratio.max(initial=0.0))


def _reference(obj: _Objective, s: float, plain: bool = False) -> float:
    """``max(|grad f| (less its error under noise), s max_i |H_ii|, mean_i |grad f_i|)``: the scale the residual is
    measured in (``plain``: as the values show it, without the error)."""
    lower = 0.0 if (obj.rounding or plain) else float(np.linalg.norm(obj.gerr))
    g = max(float(np.linalg.norm(obj.grad)) - lower, 0.0)
    return max(g, s * float(np.abs(obj.curv).max(initial=0.0)), obj.comp)
