"""Difference steps sized for the point and the noise, and the batched difference estimates of ``steps="auto"``.

* :func:`difference_steps` -- ``h_j = noise_rel^(1/3) * max(|x_j|, s)``: the classical step of a
  central difference (the truncation error ``h^2 |f'''| / 6`` balances the rounding / noise error
  ``noise / h``; Nocedal & Wright 2006, section 8.1), in the units of each variable (``s`` the typical
  size of the point's entries), never with a floor of 1 on the variables' scale;
* :func:`probe_scale` -- the variables' units before any estimate: the smallest step ``10^k`` along a
  random direction that changes the values by a tenth of their size (one batched call of 35 points);
* :func:`noise_level` -- the noise of the values from a difference table along a line (Moré & Wild,
  *Estimating computational noise*, SIAM J. Sci. Comput. 33, 2011: ECnoise);
* :func:`coordinate_estimate` -- CooSGE (Huang et al. 2019, eq. 4) with one step per coordinate and,
  on request, the values at the first base point (the batch values the backtracking test of the
  x-step uses) and the diagonal curvature: ONE oracle call;
* :func:`gradient_and_hessian` -- the full smooth part's value, central-difference gradient and
  (optionally) its Hessian by second differences (``f(x + h_i e_i + h_j e_j)``), in one batched call
  (chunked when the matrix of points would be large).
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Any

import numpy as np

from zoframe.protocols import Array, IntArray

__all__ = ["CoordinateEstimate", "coordinate_estimate", "difference_steps", "gradient_and_hessian", "natural_scale",
           "noise_level", "point_scale", "probe_points", "probe_scale"]

EPS = float(np.finfo(np.float64).eps)
#: entries of one matrix of points or values evaluated at once (32 MB); more are evaluated in chunks
CHUNK_ENTRIES = 1 << 22


def point_scale(x: Array, natural: float = 0.0) -> float:
    """The typical size of the variables: the larger of the root mean square of the point's nonzero entries and
    ``natural`` (the scale over which ``f`` changes by its own size, :func:`natural_scale`); 1 when both
    are 0 (a point at the origin of a problem that has said nothing about its units yet)."""
    nz = np.abs(x[x != 0.0])
    rms = float(np.sqrt(np.mean(nz * nz))) if nz.size else 0.0
    out = max(rms, natural)
    return out if out > 0 and math.isfinite(out) else 1.0


def natural_scale(magnitude: float, curvature: float) -> float:
    """``sqrt(|f| / L)``: the distance over which ``f`` of size ``|f|`` and curvature ``L`` changes by its own size
    (0 when either is unknown). Near a solution at 0 (a sparse solution) the point's entries say
    nothing about the variables' units; this does."""
    if magnitude > 0 and curvature > 0 and math.isfinite(magnitude) and math.isfinite(curvature):
        return math.sqrt(magnitude / curvature)
    return 0.0


#: the probe of the variables' scale: steps 10^k along a random direction, k = PROBE_LOW .. PROBE_HIGH
PROBE_LOW, PROBE_HIGH = -8, 8


def probe_points(x: Array, u: Array) -> Array:
    """``x`` and ``x +- 10^k u`` for ``k = PROBE_LOW .. PROBE_HIGH`` (``u`` a unit direction): the rows of one call."""
    hs = 10.0 ** np.arange(PROBE_LOW, PROBE_HIGH + 1, dtype=np.float64)
    return np.vstack([x[None, :], x[None, :] + hs[:, None] * u[None, :], x[None, :] - hs[:, None] * u[None, :]])


def probe_scale(values: Array) -> float:
    """The variables' scale from the values at :func:`probe_points` (rows, or rows x components): the smallest step
    ``10^k`` along which the mean value changes by a tenth of its size, ``|f(x +- h u) - f(x)| >= |f(x)| / 10``
    (0 when ``f(x) = 0`` or no step changes it that much). In the units of ``x`` whatever they are: a
    problem stated in other units has the same probe, shifted by the factor of its units (to within
    the factor 10 of the grid)."""
    v = np.asarray(values, dtype=np.float64)
    f = v.mean(axis=1) if v.ndim == 2 else v
    k = PROBE_HIGH - PROBE_LOW + 1
    f0 = float(f[0])
    if not (math.isfinite(f0) and f0 != 0.0):
        return 0.0
    change = np.maximum(np.abs(f[1 : k + 1] - f0), np.abs(f[k + 1 :] - f0))
    hit = np.flatnonzero(np.isfinite(change) & (change >= 0.1 * abs(f0)))
    return float(10.0 ** (PROBE_LOW + int(hit[0]))) if hit.size else 0.0


def difference_steps(x: Array, noise_rel: float, scale: float) -> Array:
    """``h_j = noise_rel^(1/3) max(|x_j|, s)``, rounded so that ``x_j + h_j`` and ``x_j`` differ by exactly ``h_j``.

    ``noise_rel``: the relative noise of the values (``eps`` for values exact to rounding); ``s``: the
    variables' scale (:func:`point_scale`).
    """
    s = float(scale)
    h = max(noise_rel, EPS) ** (1.0 / 3.0) * np.maximum(np.abs(x), s)
    out: Array = (x + h) - x  # exactly representable steps
    return np.where(out > 0, out, h)


def noise_level(values: Array) -> float:
    """The noise of values on ``m + 1 = 7`` equally spaced points of a line (ECnoise, Moré & Wild 2011).

    ``values``: ``(7,)`` or ``(7, b)`` (one column per component, the noise of their mean is returned).
    The ``k``-th differences of noise of standard deviation ``sigma`` have variance
    ``sigma^2 (2k)! / (k!)^2``; of the estimates ``sigma_k`` for ``k = 2..6`` the smallest is kept (the
    higher differences of a smooth function at a short spacing are below the noise).
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 1:
        v = v[:, None]
    f = v.mean(axis=1)
    out = math.inf
    diff = f.copy()
    for k in range(1, f.shape[0]):
        diff = np.diff(diff)
        if k < 2:
            continue
        gamma = math.factorial(k) ** 2 / math.factorial(2 * k)
        out = min(out, math.sqrt(gamma * float(np.mean(diff * diff))))
    return out


@dataclass(frozen=True)
class CoordinateEstimate:
    """CooSGE with per-coordinate steps: ``grad`` ``(d,)`` or ``(P, d)``, ``per_component`` ``(b, d)`` /
    ``(P, b, d)`` when asked, ``center`` ``(b,)`` the values at the first base point (``None`` unless
    asked), ``curvature`` ``(d,)`` the batch mean's second differences at that point, ``calls`` spent."""

    grad: Array
    per_component: Array | None
    center: Array | None
    curvature: Array | None
    calls: int


def coordinate_estimate(
    fun: Any, x: Array, h: Array, *, center: bool = True, per_component: bool = False
) -> CoordinateEstimate:
    """``sum_j (F(x + h_j e_j) - F(x - h_j e_j)) / (2 h_j) e_j`` at every base point, and ``F(x)`` at the first.

    ``fun(X) -> (rows, b)`` is the batch function (one oracle call); ``x``: ``(d,)`` or ``(P, d)``.
    The ``2 d P`` (+1) points are built as one matrix.
    """
    base = np.asarray(x, dtype=np.float64)
    single = base.ndim == 1
    B = base[None, :] if single else base
    P, d = B.shape
    E = np.diag(h)
    offsets = np.vstack([E, -E])  # (2d, d)
    pts = (B[:, None, :] + offsets[None, :, :]).reshape(P * 2 * d, d)
    if center:
        pts = np.vstack([pts, B[:1]])
    vals = np.asarray(fun(pts), dtype=np.float64)  # ONE call
    body = vals[: P * 2 * d].reshape(P, 2 * d, -1)
    c0 = vals[-1] if center else None
    if np.isfinite(vals).all():
        comp = (body[:, :d, :] - body[:, d:, :]).transpose(0, 2, 1) / (2.0 * h)  # (P, b, d)
    else:  # a failed trial (NaN / inf under nonfinite="inf"): the one-sided difference from the finite side
        comp = _one_sided(body, c0, h)
    grad = comp.mean(axis=1)
    curv = None
    if c0 is not None:
        with np.errstate(invalid="ignore"):  # a failed side gives no curvature there (nan, read as unknown)
            mean_p, mean_m = body[0, :d, :].mean(axis=1), body[0, d:, :].mean(axis=1)
            curv = (mean_p + mean_m - 2.0 * float(c0.mean())) / (h * h)
        curv = np.where(np.isfinite(curv), curv, 0.0)
    calls = int(vals.size)
    if single:
        return CoordinateEstimate(grad[0], comp[0] if per_component else None, c0, curv, calls)
    return CoordinateEstimate(grad, comp if per_component else None, c0, curv, calls)


def _one_sided(body: Array, c0: Array | None, h: Array) -> Array:
    """The per-component differences ``(P, b, d)`` where a central difference met a non-finite value: the forward
    or backward difference from the finite side (the first base point's value ``c0`` needed); raises
    :class:`~zoframe.errors.DivergedError` when the point itself is not finite and
    :class:`~zoframe.errors.NonFiniteValueError` when both sides failed or no base value is at hand."""
    from zoframe.errors import DivergedError, NonFiniteValueError

    d = h.shape[0]
    plus, minus = body[:, :d, :], body[:, d:, :]
    ok_p, ok_m = np.isfinite(plus), np.isfinite(minus)
    if c0 is None or body.shape[0] > 1:
        raise NonFiniteValueError("a central difference met a non-finite value and no value at the point is at hand")
    if not np.isfinite(c0).all():
        raise DivergedError("the function is not finite at the point itself: the iterate lies where it is undefined")
    if not (ok_p | ok_m).all():
        raise NonFiniteValueError(
            "both points of a central difference gave non-finite values (the point is at the edge of a region where "
            "the function is undefined)"
        )
    hh = h[None, :, None]
    with np.errstate(invalid="ignore"):  # the failed sides' differences are not used
        fwd = (plus - c0[None, None, :]) / hh
        bwd = (c0[None, None, :] - minus) / hh
        one = np.where(ok_p & ok_m, (plus - minus) / (2.0 * hh), np.where(ok_p, fwd, bwd))
    out: Array = one.transpose(0, 2, 1)
    return out


def _pairs(d: int) -> tuple[IntArray, IntArray]:
    i, j = np.triu_indices(d, 1)
    return i.astype(np.intp), j.astype(np.intp)


def gradient_and_hessian(
    objective: Any, x: Array, h: Array, *, hessian: bool, n: int, f0: float | None = None
) -> tuple[float, Array, Array, float]:
    """``(f(x), grad, H, magnitude)`` of the mean of the components by differences with steps ``h``.

    Rows: ``x`` (unless ``f0`` is given), ``x +- h_j e_j`` (central gradient, and the diagonal of ``H``
    by central second differences), and with ``hessian`` the ``d (d - 1) / 2`` points
    ``x + h_i e_i + h_j e_j`` (the off-diagonal entries by the forward formula
    ``(f_ij - f_i - f_j + f_0) / (h_i h_j)``). Without ``hessian``, ``H`` is the diagonal.
    ``objective(X) -> (rows, n)``; ``magnitude``: the mean absolute component value at ``x`` (the
    scale of the rounding noise). The points are evaluated in one call (in chunks of rows when they
    would exceed :data:`CHUNK_ENTRIES` entries).
    """
    d = x.shape[0]
    E = np.diag(h)
    rows = [x[None, :] + E, x[None, :] - E]
    if f0 is None:
        rows.insert(0, x[None, :])
    if hessian and d > 1:
        i, j = _pairs(d)
        Pp = np.repeat(x[None, :], i.shape[0], axis=0)
        Pp[np.arange(i.shape[0]), i] += h[i]
        Pp[np.arange(i.shape[0]), j] += h[j]
        rows.append(Pp)
    pts = np.vstack(rows)
    per = max(1, CHUNK_ENTRIES // max(n, d, 1))
    if pts.shape[0] <= per:
        V = np.asarray(objective(pts), dtype=np.float64)
    else:
        V = np.vstack([np.asarray(objective(pts[lo : lo + per]), dtype=np.float64) for lo in range(0, pts.shape[0], per)])
    means = V.mean(axis=1)
    k = 0
    if f0 is None:
        f = float(means[0])
        mag = float(np.abs(V[0]).mean())
        k = 1
    else:
        f = float(f0)
        mag = float(np.abs(V[:2 * d]).mean())
    fp, fm = means[k : k + d], means[k + d : k + 2 * d]
    g = (fp - fm) / (2.0 * h)
    diag = (fp + fm - 2.0 * f) / (h * h)
    H = np.diag(diag)
    if hessian and d > 1:
        i, j = _pairs(d)
        fij = means[k + 2 * d :]
        off = (fij - fp[i] - fp[j] + f) / (h[i] * h[j])
        H[i, j] = off
        H[j, i] = off
    return f, g, H, mag
