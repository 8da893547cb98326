"""The minimax test of the certificate: stationarity of ``Phi(x) = max_{y in Y} F(x, y)`` with a certified inner maximum.

For ``min_x max_{y in Y} F(x, y)`` with ``F(x, .)`` strongly concave, ``x`` is stationary when
``grad Phi(x) = grad_x F(x, y*(x)) = 0`` (Danskin's theorem; Wang, Balasubramanian, Ma & Razaviyayn,
Definition 2.2). The certificate does not trust the run's ``y``: it finds ``y*(x)`` itself and
checks every step it takes (:func:`_minimax`):

1. **the inner maximum**, solved from the run's ``y`` (or the problem's ``y0``) by the deterministic
   refinement engine :mod:`zoframe.refine` on ``-F(x, .)`` over ``Y`` (:func:`inner_maximum`:
   quasi-Newton on a box or on all of ``R^d_y``, spectral projected gradient on a simplex or a ball),
   to the relative tolerance :data:`INNER_RTOL`. It is then *certified* by its own central
   differences at ``y*``: the projected gradient ``|y* - P_Y(y* + t grad_y F)| / t`` relative to the
   problem's scale in ``y`` (``ref_y = max(s_y max_i |H_ii|, mean_i |grad_y F_i|)``, ``t = s_y / ref_y``,
   ``s_y = max(1, |y*|_inf)``) must be ``<= tol``. An inner solve whose ``y`` runs away (``F(x, .)``
   unbounded above), whose values are not finite, or that stalls is a failed certificate, said so.
2. **concavity in y at the point** (:func:`concavity_gap`): the second differences of ``F(x, .)`` along
   the coordinates (the inner solve's central differences) and midpoint tests along four fixed mixed
   directions inside ``Y`` (``F(x, m) >= (F(x, p) + F(x, r)) / 2`` for ``p, r`` in ``Y``, ``m`` their
   midpoint). A positive curvature beyond the values' rounding is reported as "the inner problem is not
   concave at the point" and is never a success: there ``Phi`` and Danskin's formula mean nothing.
3. **grad Phi(x)** by Danskin: central differences of ``F(., y*)`` at ``x`` with the step
   ``h_i = eps^(1/4) max(1, |x_i|)`` (one-sided at a bound of a box ``feasible_set``), and the test
   ``|x - P_X(x - t g)| / t <= tol * ref_x`` relative to the problem's own scale in ``x``:
   ``ref_x = max(s_x max_i |d^2 F / dx_i^2|, s_x c_u, mean_i |grad_x F_i|)`` with ``s_x = max(1, |x|_inf)``
   and ``c_u`` the curvature of ``Phi`` itself along ``u = g / |g|`` (``Phi(x +- h u)``, two more inner
   solves warm-started at ``y*``). ``r / ref_x <= tol`` says that a Newton step on ``Phi`` would move
   ``x`` by at most ``tol s_x``; ``c_u`` keeps the reference right when ``Phi``'s curvature comes from the
   coupling (``F`` linear in ``x``, ``Phi(x) = |A x|^2 / 2``). A gradient at the rounding level of the
   values (``4 eps |F| / h``) always passes.

The residual is the larger of the two relative residuals (x and y); the message names both, the
distance of the run's ``y`` from ``y*`` and the cost. Evaluations: the inner solve (``1 + 2 d_y`` points per
quasi-Newton iteration, one more per trial point), ``2 (d + d_y) + 1`` points for the differences,
two inner solves for ``c_u`` and ``12`` points for the probes, each point ``n`` evaluations; all under
``"certify"``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
import math
from typing import Any

import numpy as np

from zoframe.certificate._common import _EPS, Evals, _bounds, _derivatives, _difference_points
from zoframe.certificate.noise import ROUNDING, Noise, NoiseSpec, noise_step, values_noise
from zoframe.errors import InvalidInputError, NonFiniteValueError
from zoframe.protocols import Array
from zoframe.refine import (
    BUDGET,
    CONVERGED,
    NOISE_LIMITED,
    STALLED,
    QNState,
    RefineSettings,
    Region,
    qn_start,
    qn_step,
    variable_scales,
)

__all__ = ["INNER_RTOL", "InnerMaximum", "InnerSmooth", "concavity_gap", "floored_scales", "inner_maximum"]

#: relative tolerance of the inner maximum (the engine's ``rtol``): tight, so that the differences of
#: ``Phi`` and of ``F(., y*)`` see ``y*`` rather than the inner solve's error
INNER_RTOL = 1e-10
#: points of one inner iteration beyond the differences: the line search's trial points at most
_TRIALS = 12
#: a stalled inner solve is accepted as found when its projected gradient is below this fraction of its reference
#: (the curvature times the scale: a Newton step of 1e-6 of the scale of y)
_STALL_OK = 1e-6

#: ``evaluate(x, Y)``: the mean over the components of ``F(x, Y[r])`` for each row of ``Y`` ``(k,)``
Evaluate = Callable[[Array, Array], Array]


@dataclass
class InnerSmooth:
    """:class:`zoframe.refine.Smooth` for ``-F(x, .)`` at a fixed ``x`` (the inner maximum as a minimisation)."""

    evaluate: Evaluate
    x: Array
    point_cost: int = 1

    def values(self, X: Array, aux: Array) -> tuple[Array, Array]:
        return -np.asarray(self.evaluate(self.x, X), dtype=np.float64), aux

    def differences(self, P: Array, aux: Array) -> Array:
        return -np.asarray(self.evaluate(self.x, P), dtype=np.float64)


@dataclass(frozen=True)
class InnerMaximum:
    """The outcome of :func:`inner_maximum`.

    ``y``: the maximiser found; ``value``: ``F(x, y)``; ``found``: the engine stopped on its own test
    (converged, or noise-limited at the values' noise), neither running away nor stalling;
    ``outcome``: ``"converged"``, ``"noise-limited"``, ``"stalled"``, ``"budget"``, ``"runaway"`` or
    ``"non-finite"``; ``message``: in words; ``points``: points evaluated; ``state``: the engine's last
    state (its ``curv`` holds the curvature of ``-F(x, .)`` along each coordinate; ``None`` when the
    start failed).
    """

    y: Array
    value: float
    found: bool
    outcome: str
    message: str
    points: int
    state: QNState | None


def inner_maximum(
    evaluate: Evaluate, x: Array, y_start: Array, y_set: Any, *, point_cost: int = 1, rtol: float = INNER_RTOL,
    max_points: int | None = None, limit: float = 1e8, noise: float | None = None,
) -> InnerMaximum:  # fmt: skip
    """``max_{y in Y} F(x, y)`` from ``y_start`` by :mod:`zoframe.refine` on ``-F(x, .)``.

    ``evaluate(x, Y)``: the values ``F(x, Y[r])`` (mean over the components), one batched call.
    ``y_set``: a ``zoframe.sets`` set or ``None`` (all of ``R^d_y``). ``rtol``: the engine's relative
    test. ``max_points``: the most points evaluated (default ``100 (2 d_y + 13)``). ``limit``: ``y`` has
    run away when ``|y|_inf`` exceeds ``limit * max(1, |y_start|_inf)`` (``F(x, .)`` unbounded above).
    ``noise``: the absolute noise of ``F`` (default: the rounding of its values).
    """
    y0 = np.asarray(y_start, dtype=np.float64).reshape(-1)
    dy = y0.shape[0]
    region = Region.of(y_set, dy)
    fn = InnerSmooth(evaluate, np.asarray(x, dtype=np.float64), int(point_cost))
    settings = RefineSettings(rtol=rtol, noise=noise)
    cap = 100 * (2 * dy + 1 + _TRIALS) if max_points is None else int(max_points)
    bound = limit * max(1.0, float(np.abs(y0).max(initial=0.0)))
    try:
        st = qn_start(fn, y0, region, settings, scale=floored_scales(y0, region))
    except NonFiniteValueError as exc:
        return InnerMaximum(y0, math.nan, False, "non-finite", f"F(x, .) is not finite near the start: {exc}", 0, None)
    pinned = 0  # consecutive steps held at the engine's step bound: the scales of y are too small for the distance
    while not st.done:
        if pinned >= 3:  # restart with the scales of where y is now (the engine bounds a step by 10 times them)
            st = qn_start(fn, st.x, region, settings, aux=st.aux, value=st.value, scale=floored_scales(st.x, region))
            pinned = 0
            continue
        size = float(np.abs(st.x).max(initial=0.0))
        if not size <= bound:
            return InnerMaximum(
                st.x, -st.value, False, "runaway",
                f"y ran away (|y|_inf = {size:.3g} after {st.it} inner iterations): F(x, .) looks unbounded above "
                "(not concave in y)", st.points, st,
            )  # fmt: skip
        if st.points + 2 * dy + 1 + _TRIALS > cap:
            return InnerMaximum(
                st.x, -st.value, False, "budget", f"no inner maximum within {cap} points ({st.it} iterations, "
                f"projected gradient {st.pg:.3g})", st.points, st,
            )  # fmt: skip
        try:
            before = st
            st = qn_step(fn, st, region, settings)
            moved = float(np.max(np.abs(st.x - before.x) / before.scale, initial=0.0))
            pinned = pinned + 1 if moved >= 0.99 * settings.max_step else 0
        except NonFiniteValueError as exc:
            return InnerMaximum(st.x, -st.value, False, "non-finite", f"F(x, .) is not finite near y: {exc}", st.points, st)
    outcome = {CONVERGED: "converged", NOISE_LIMITED: "noise-limited", STALLED: "stalled", BUDGET: "budget"}[st.status]
    found = st.status in (CONVERGED, NOISE_LIMITED)
    if st.status == STALLED and st.ref > 0 and st.pg <= _STALL_OK * st.ref:  # stalled where the values barely resolve
        found, outcome = True, "stalled at a negligible projected gradient"
    return InnerMaximum(st.x, -st.value, found, outcome, f"{outcome} after {st.it} iterations: {st.message}", st.points, st)


def floored_scales(y: Array, region: Region) -> Array:
    """The engine's scales of ``y`` (:func:`zoframe.refine.variable_scales`) with a floor of a tenth of their median and
    ``1e-2`` of the largest: an entry at a face of ``Y`` (``0`` up to rounding on a simplex, or at a vertex), or a
    variable that a first phase left near 0, is not a variable of size ``1e-16`` (the engine bounds each step by ten
    times the scales and sizes its differences by them)."""
    s = variable_scales(y, region)
    out: Array = np.maximum(s, max(0.1 * float(np.median(s)), 1e-2 * float(s.max(initial=0.0))))
    return out


def _probe_directions(dy: int) -> Array:
    """Four fixed unit directions mixing the coordinates (deterministic: the certificate uses no randomness)."""
    k = np.arange(dy, dtype=np.float64)
    D = np.vstack([np.ones(dy), np.where(k % 2 == 0, 1.0, -1.0), np.cos(1.0 + 2.0 * k), np.sin(0.5 + 3.0 * k)])
    out: Array = D / np.maximum(np.linalg.norm(D, axis=1, keepdims=True), 1e-300)
    return out


def concavity_gap(evaluate: Evaluate, x: Array, y: Array, y_set: Any, directions: Array, h: float) -> tuple[float, float, int]:
    """The largest violation of the midpoint inequality of concavity of ``F(x, .)`` around ``y``.

    For each row ``u`` of ``directions``: ``p = P_Y(y + h u)``, ``r = P_Y(y - h u)``, ``m = (p + r) / 2`` (all
    in ``Y``); the gap ``(F(x, p) + F(x, r)) / 2 - F(x, m)`` is ``<= 0`` for a concave ``F(x, .)``. Returns
    ``(largest gap, rounding noise of the values, index of the direction)``; one batched call.
    """
    proj = (lambda Z: Z) if y_set is None else (lambda Z: np.asarray(y_set.project(Z), dtype=np.float64))
    P = proj(y[None, :] + h * directions)
    R = proj(y[None, :] - h * directions)
    M = 0.5 * (P + R)
    k = directions.shape[0]
    vals = np.asarray(evaluate(x, np.vstack([M, P, R])), dtype=np.float64)
    fm, fp, fr = vals[:k], vals[k : 2 * k], vals[2 * k :]
    gap = 0.5 * (fp + fr) - fm
    worst = int(np.argmax(gap))
    noise = 8.0 * _EPS * float(np.abs(vals).max(initial=0.0))
    return float(gap[worst]), noise, worst


def _mapping(fs: Any, z: Array, g: Array, s: float, ref: float) -> float:
    """``|z - P(z - t g)| / t`` with ``t = s / ref`` (``|g|`` without a set)."""
    if fs is None:
        return float(np.linalg.norm(g))
    t = s / max(ref, 1e-300)
    return float(np.linalg.norm(z - np.asarray(fs.project(z - t * g), dtype=np.float64))) / t


def _fail(message: str, residual: float = math.inf, scale: float = math.nan) -> dict[str, Any]:
    return {
        "passed": False, "residual": residual, "scale": scale, "max_violation": None, "n_active": 0, "cap_hit": False,
        "descent": None, "message": f"not certified: {message}",
    }  # fmt: skip


def _minimax(
    ev: Evals, x: Array, outputs: Mapping[str, Any] | None, tol: float, stated: NoiseSpec | None = None
) -> dict[str, Any]:
    oracle = ev.oracle
    y_raw = None if outputs is None else outputs.get("y")
    y_run = np.array(oracle.y0 if y_raw is None else y_raw, dtype=np.float64).reshape(-1)
    if y_run.shape != (oracle.dim_y,):
        raise InvalidInputError(f"certify: y must have shape ({oracle.dim_y},), got {y_run.shape}")
    if not np.isfinite(y_run).all():
        y_run = np.array(oracle.y0, dtype=np.float64).reshape(-1)
    ys = oracle.y_set
    if ys is not None:
        y_run = np.asarray(ys.project(y_run), dtype=np.float64)
    d, dy, n = x.shape[0], y_run.shape[0], oracle.n

    def evaluate(xr: Array, Y: Array) -> Array:
        out: Array = ev.minimax(np.repeat(xr[None, :], Y.shape[0], axis=0), Y).mean(axis=1)
        return out

    # 0. the noise of F at (x, y): a line in x at the run's y (ECNoise), or as stated
    f_run = float(evaluate(x, y_run[None, :])[0])
    if stated is not None:
        sigma = stated.absolute(abs(f_run))
    else:
        levels, _, _ = values_noise(lambda X: ev.minimax(X, np.repeat(y_run[None, :], X.shape[0], axis=0)).mean(
            axis=1, keepdims=True), x, np.array([abs(f_run)]))  # fmt: skip
        sigma = float(levels[0])
    noisy = sigma > ROUNDING * _EPS * max(abs(f_run), 1e-300)
    # 1. the inner maximum, from the run's y
    inner = inner_maximum(evaluate, x, y_run, ys, point_cost=n, noise=sigma if noisy else None)
    st = inner.state
    # 2. concavity in y at the point (also where the inner solve failed: an inner problem that is not concave is
    # said so): the coordinate curvatures of a converged inner solve, then midpoint tests inside Y along the
    # coordinates of least curvature and four mixed directions, at a step of 1e-2 of y's scale
    curv_neg = np.zeros(dy)
    where = "the inner maximiser" if inner.found else "the last inner iterate"
    if inner.found and st is not None:
        curv_neg = np.where(np.isfinite(st.curv), st.curv, 0.0)  # curvature of -F(x, .): >= 0 when concave
        fscale = abs(inner.value) if math.isfinite(inner.value) else 0.0
        coord_noise = 8.0 * _EPS * fscale / np.maximum(np.where(np.isfinite(st.h), st.h, 1.0), 1e-300) ** 2
        floor = np.maximum(100.0 * coord_noise, 1e-8 * float(np.abs(curv_neg).max(initial=0.0)))
        bad = np.flatnonzero(curv_neg < -floor)
        if bad.size:
            i = int(bad[np.argmin(curv_neg[bad])])
            return _fail(
                f"the inner problem is not concave at the point: d^2 F / dy_{i}^2 = {-curv_neg[i]:.3g} > 0 at {where} "
                "(F(x, .) must be concave in y: Assumption 1 of the ZO-GDA family)"
            )
    y = inner.y if np.isfinite(inner.y).all() else y_run
    sy = max(1.0, float(np.abs(y).max(initial=0.0)))
    h_probe = 1e-2 * sy
    least = np.argsort(curv_neg, kind="stable")[: min(dy, 4)]
    dirs = np.vstack([np.eye(dy)[least], _probe_directions(dy)])
    try:
        gap, gnoise, worst = concavity_gap(evaluate, x, y, ys, dirs, h_probe)
    except NonFiniteValueError:
        gap, gnoise, worst = -math.inf, 0.0, 0
    curv_scale = float(np.abs(curv_neg).max(initial=0.0)) * h_probe * h_probe
    if noisy:
        gnoise = max(gnoise, sigma)
    if gap > max(16.0 * gnoise, 1e-6 * curv_scale):
        what = f"coordinate {int(least[worst])}" if worst < least.shape[0] else f"mixed direction {worst - least.shape[0]}"
        return _fail(
            f"the inner problem is not concave at the point: along {what} (inside Y, at {where}), F(x, midpoint) is "
            f"below the mean of F at the two ends by {gap:.3g} (segment of length {2 * h_probe:.3g})"
        )
    if not inner.found or st is None:
        return _fail(f"the inner maximum max_y F(x, y) at the point was not found ({inner.message})")
    # differences around (x, y*): one call
    step = noise_step(Noise(sigma, not noisy, None, "", "", 0), max(abs(f_run), abs(inner.value)) if noisy else 1.0)
    Dx = _difference_points(x, _bounds(oracle.feasible_set, d), step)
    Dy = _difference_points(y, _bounds(ys, dy), step)
    X = np.vstack([x[None, :], Dx.points(0, d), np.repeat(x[None, :], 2 * dy, axis=0)])
    Y = np.vstack([np.repeat(y[None, :], 1 + 2 * d, axis=0), Dy.points(0, dy)])
    V = ev.minimax(X, Y)  # (1 + 2d + 2dy, n)
    v0 = V[0]
    Gx, Hx, Nx = _derivatives(v0, V[1 : d + 1], V[d + 1 : 2 * d + 1], Dx.a, Dx.b)
    Gy, Hy, Ny = _derivatives(v0, V[2 * d + 1 : 2 * d + 1 + dy], V[2 * d + 1 + dy :], Dy.a, Dy.b)
    sx = max(1.0, float(np.abs(x).max(initial=0.0)))
    fmag = float(np.abs(V).mean(axis=1).max(initial=0.0))

    def block(G: Array, H: Array, N: Array, sc: float, span: Array, a: Array, b: Array) -> tuple[Array, float, float]:
        g, hh, hn = G.mean(axis=1), H.mean(axis=1), N.mean(axis=1)
        if noisy:  # the curvature where it stands out of three times its noise error 4 sigma / (a b)
            both = (a > 0) & (b > 0)
            hn = np.maximum(hn, np.where(both, 12.0 * sigma / np.where(both, a * b, 1.0), 0.0))
        hh = np.where(np.abs(hh) > hn, hh, 0.0)
        comp = float(np.sqrt(np.einsum("ij,ij->j", G, G)).mean()) if G.shape[1] > 1 else 0.0
        # the gradient's error: the rounding of the values, or under noise 4 sigma / span (an error bound, not a floor)
        size = 4.0 * sigma if noisy else 4.0 * _EPS * fmag
        floor = size / max(float(np.min(span, initial=np.inf)), 1e-300) * math.sqrt(g.shape[0])
        return g, max(sc * float(np.abs(hh).max(initial=0.0)), comp), floor

    gx, ref_x, floor_x = block(Gx, Hx, Nx, sx, Dx.a + Dx.b, Dx.a, Dx.b)
    gy, ref_y, floor_y = block(Gy, Hy, Ny, sy, Dy.a + Dy.b, Dy.a, Dy.b)
    # 3. Phi's own curvature along the gradient (the coupling's share), two inner solves warm-started at y*
    gnorm = float(np.linalg.norm(gx))
    c_u = math.nan
    if gnorm > 0 and math.isfinite(gnorm):
        u = gx / gnorm
        hu = float(np.median(Dx.a + Dx.b)) / 2.0
        phis = []
        for sign in (1.0, -1.0):
            side = inner_maximum(evaluate, x + sign * hu * u, y, ys, point_cost=n, max_points=20 * (2 * dy + 1 + _TRIALS))
            phis.append(side.value if side.found else math.nan)
        c_u = (phis[0] + phis[1] - 2.0 * inner.value) / (hu * hu)
        if math.isfinite(c_u) and c_u > 0:
            ref_x = max(ref_x, sx * c_u)
    rx = _mapping(oracle.feasible_set, x, gx, sx, max(ref_x, 1e-300))
    ry = _mapping(ys, y, -gy, sy, max(ref_y, 1e-300))
    limited = False
    if not noisy:  # noise-free values: a residual at the rounding of the differences passes
        ratio_x = 0.0 if rx <= floor_x else (rx / ref_x if ref_x > 0 else math.inf)
        ratio_y = 0.0 if ry <= floor_y else (ry / ref_y if ref_y > 0 else math.inf)
        residual = max(ratio_x, ratio_y)
    else:  # under noise the error is added (least favourable) or taken off (most favourable)
        ratio_x = (rx + floor_x) / ref_x if ref_x > 0 else math.inf
        ratio_y = (ry + floor_y) / ref_y if ref_y > 0 else math.inf
        residual = max(ratio_x, ratio_y)
        best = max(max(rx - floor_x, 0.0) / ref_x if ref_x > 0 else 0.0, max(ry - floor_y, 0.0) / ref_y if ref_y > 0 else 0.0)
        limited = residual > tol and best <= tol
    passed = residual <= tol
    word = "certified" if passed else ("not certified, noise-limited" if limited else "not certified")
    dist = float(np.linalg.norm(y_run - y))
    message = (
        f"{word}: minimax residual {residual:.3g} {'<=' if passed else '>'} tol {tol:.3g} (grad Phi(x) by Danskin: "
        f"{ratio_x:.3g} of the scale in x {ref_x:.3g}; inner maximum: projected gradient {ratio_y:.3g} of the scale in "
        f"y {ref_y:.3g}, {inner.outcome} in {inner.points} points; the run's y is {dist:.3g} from y*)"
    )
    if noisy:
        message += f"; noise of the values {sigma:.2g} ({'stated' if stated is not None else 'estimated'})"
    return {
        "passed": passed, "residual": residual, "scale": ref_x, "max_violation": None, "n_active": 0,
        "cap_hit": False, "descent": None, "message": message, "noise": sigma, "noise_limited": limited,
        "noise_floor": max(floor_x / ref_x if ref_x > 0 else 0.0, floor_y / ref_y if ref_y > 0 else 0.0) if noisy else 0.0,
    }  # fmt: skip


def _residual_verdict(what: str, parts: dict[str, float], tol: float, scale: float) -> dict[str, Any]:
    """The outcome of a residual test with several parts (no constraints, no probes): the largest part
    against ``tol``, each part named in the message."""
    residual = max(parts.values())
    passed = residual <= tol
    word = "certified" if passed else "not certified"
    detail = ", ".join(f"{k}: {v:.3g}" for k, v in parts.items())
    return {
        "passed": passed, "residual": residual, "scale": scale, "max_violation": None, "n_active": 0,
        "cap_hit": False, "descent": None,
        "message": f"{word}: {what} residual {residual:.3g} {'<=' if passed else '>'} tol {tol:.3g} ({detail})",
    }  # fmt: skip
