"""The composite (ADMM) test of the certificate: the coupling residual and dist(0, dL), relative to the problem's scale.

``min f(x) + sum_j psi_j(y_j)`` s.t. ``A x + sum_j B_j y_j = c``, Lagrangian
``L = f(x) + sum_j psi_j(y_j) - <lam, A x + sum_j B_j y_j - c>`` (Huang et al., IJCAI 2019). At the
point ``(x, y_1..y_k)`` (the run's blocks; solved from the coupling when it determines them):

* ``grad f(x)`` by central differences with steps ``eps^(1/4) max(|x_j|, s)``, ``s`` the variables'
  scale (:func:`variables_scale`: the larger of the point's typical nonzero entry and ``sqrt(|f| / |H|)``
  from a first pass at the scale ``max(|x|_rms, 1)``; the problem's own units, no floor of 1: a second
  pass at ``s`` when ``s`` is far below the first pass's scale);
* the multiplier: the run's ``lam`` and ``lam`` fitted at the point, whichever gives the smaller
  residual. The fit minimises ``|grad f - A^T lam|^2 + sum_j dist(B_j^T lam, d psi_j(y_j))^2`` (convex,
  smooth) by FISTA with adaptive restart, 500 iterations from the run's ``lam`` (else the least-squares
  fit of the x-block). The
  projection onto ``d psi_j(y_j)`` is ``lim_{t -> 0} (y + t v - prox_{t psi}(y + t v)) / t`` (the
  minimal-norm element of ``d psi(y) - v`` shifted, exact for l1, group and ridge terms once ``t |v|`` is
  below the smallest nonzero ``|y_i|``), taken at a small ``t``;
* the parts, each relative to the problem's own scale: ``x``: ``|grad f - A^T lam| / ref``; ``y``:
  ``sqrt(sum_j dist(B_j^T lam, d psi_j(y_j))^2) / ref`` (each penalty's ``subdifferential_distance``;
  the projection above for a penalty without one); ``ref = max(|grad f|, |A^T lam|, |B^T lam|,
  s max_j |H_jj|, mean_i |grad f_i|)`` (gradient units: the curvature times the variables' size is
  the gradient a unit relative error of ``x`` makes), with a floor at the differences' rounding
  error; ``coupling``: ``|A x + B y - c| / max(|A x|, |B y|, |c|, |A|_2 s sqrt(d))`` (the last: the size of
  ``A x`` at the variables' scale, so that a solution at ``x = 0`` with ``c = 0`` is not asked for a
  residual of exactly 0). The largest is compared with ``tol``.

A point off the solution by a relative ``delta`` has ``|grad f - A^T lam| ~ delta s |H|`` whatever
``lam`` (the fitted one moves the error into the y-part), so it fails for ``delta`` well above
``tol``. Cost: ``(2 d + 1) n`` evaluations (twice when the first pass says the variables' scale is
below a hundredth of the point's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
import math
from typing import Any

import numpy as np

from zoframe.certificate._common import _EPS, _STEP, Evals, _bounds, _Differences, _ratio
from zoframe.certificate.gradient import _objective_at
from zoframe.certificate.minimax import _residual_verdict
from zoframe.certificate.noise import NoiseSpec, noise_step, objective_noise
from zoframe.errors import InvalidInputError
from zoframe.protocols import Array, Penalty

#: iterations of the multiplier fit
FIT_ROUNDS = 500


def _nonzero_rms(x: Array) -> float:
    nz = np.abs(x[x != 0.0])
    return float(np.sqrt(np.mean(nz * nz))) if nz.size else 0.0


def variables_scale(x: Array, f: float, curvature: float) -> float:
    """The variables' own scale at ``x``: the larger of the root mean square of ``x``'s nonzero entries and
    ``sqrt(|f| / max_j |H_jj|)`` (the distance over which ``f`` changes by its own size); 1 when both are 0.
    A solution at or near ``x = 0`` (a heavily penalised one) is judged at the problem's scale, not at the
    size of its rounding errors."""
    natural = math.sqrt(abs(f) / curvature) if curvature > 0 and f != 0.0 and math.isfinite(f) else 0.0
    out = max(_nonzero_rms(x), natural)
    return out if out > 0 and math.isfinite(out) else 1.0


def _differences(x: Array, s: float, box: tuple[Array, Array] | None, step: float = _STEP) -> _Differences:
    h = step * np.maximum(np.abs(x), s)
    up, down = x + h, x - h
    if box is not None:  # one-sided at a bound: every point inside the box
        up = np.minimum(up, np.maximum(box[1], x))
        down = np.maximum(down, np.minimum(box[0], x))
    return _Differences(x, up - x, x - down)


def _blocks(oracle: Any, x: Array, out: Mapping[str, Any], A: Array, Bs: Sequence[Array], c: Array) -> list[Array]:
    """The run's ``y0, y1, ...``; or, when the coupling determines them (``[B_1 ... B_k]`` of full column rank with
    ``A``, ``c`` in its range), ``y = B^+ (c - A x)``."""
    if all(out.get(f"y{j}") is not None for j in range(len(Bs))):
        return [np.asarray(out[f"y{j}"], dtype=np.float64).reshape(-1) for j in range(len(Bs))]
    B = np.hstack(Bs)
    sol, _, rank, _ = np.linalg.lstsq(B, c - A @ x, rcond=None)
    if rank < B.shape[1] or np.linalg.norm(B @ sol - (c - A @ x)) > 1e-8 * max(1.0, float(np.linalg.norm(c - A @ x))):
        raise InvalidInputError(
            "certify: a composite point needs its blocks y0, y1, ... (the run's outputs); they cannot be "
            "recovered from x for this coupling"
        )
    return list(np.split(sol, np.cumsum([b.shape[1] for b in Bs])[:-1]))


def _natural(psi: Penalty, y: Array, v: Array, t: float) -> tuple[Array, Array]:
    """``(y^, w)``: ``y^ = prox_{t psi}(y + t v)``, a point near ``y`` with ``w = (y + t v - y^) / t`` in ``d psi(y^)``
    (``w`` is the projection of ``v`` onto ``d psi(y)`` when ``y`` is exactly at its kinks and ``t |v|`` is small)."""
    z = y + t * v
    y_hat = np.asarray(psi.prox(z, t), dtype=np.float64)
    return y_hat, (z - y_hat) / t


def _distance(psi: Penalty, y: Array, v: Array) -> float:
    """``dist(v, d psi(y))`` by the penalty's own ``subdifferential_distance`` (inf without one)."""
    dist = getattr(psi, "subdifferential_distance", None)
    return float(dist(y, v)) if callable(dist) else math.inf


def _block_residual(psi: Penalty, y: Array, v: Array, t: float) -> float:
    """``min(dist(v, d psi(y)), dist(v, d psi(y^)) + |y - y^| / t)`` with ``y^`` the prox point of :func:`_natural`.

    The second term judges a point a relative ``|y - y^| / s`` away from one that is exactly stationary in this
    block (a point whose kinks are off by rounding, e.g. a reference solution's ``1e-12`` for ``0``) by that
    distance, in the gradient's units (``t = s / ref``); it is at most ``2 |y - y^| / t``.
    """
    y_hat, w = _natural(psi, y, v, t)
    at_hat = _distance(psi, y_hat, v)
    if not math.isfinite(at_hat):
        at_hat = float(np.linalg.norm(v - w))
    return min(_distance(psi, y, v), at_hat + float(np.linalg.norm(y - y_hat)) / t)


def _fit(g: Array, A: Array, Bs: Sequence[Array], ys: Sequence[Array], pens: Sequence[Penalty], lam0: Array,
         ts: Sequence[float]) -> Array:  # fmt: skip
    """``argmin_lam phi(lam) = |g - A^T lam|^2 / 2 + sum_j dist(B_j^T lam, d psi_j(y_j))^2 / 2`` (convex, with gradient
    ``-A (g - A^T lam) + sum_j B_j (v_j - P_j(v_j))``, ``v_j = B_j^T lam``, ``P_j`` the projection of :func:`_natural`),
    by FISTA with adaptive restart (Beck & Teboulle 2009; O'Donoghue & Candes 2015) from ``lam0``."""
    K = np.vstack([A.T, *(b.T for b in Bs)])
    L = float(np.linalg.eigvalsh(K.T @ K)[-1]) if K.size else 0.0
    if not L > 0:
        return lam0

    def grad_phi(lam: Array) -> tuple[Array, float]:
        r = A.T @ lam - g
        out = A @ r
        val = float(r @ r)
        for psi, y, b, t in zip(pens, ys, Bs, ts):
            v = b.T @ lam
            e = v - _natural(psi, y, v, t)[1]
            out = out + b @ e
            val += float(e @ e)
        return out, 0.5 * val

    lam, z, theta = lam0, lam0, 1.0
    prev = math.inf
    for _ in range(FIT_ROUNDS):
        gz, _ = grad_phi(z)
        new = z - gz / L
        _, val = grad_phi(new)
        theta_next = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * theta * theta))
        if val > prev:  # adaptive restart: the momentum went uphill
            z, theta = lam, 1.0
            continue
        z = new + ((theta - 1.0) / theta_next) * (new - lam)
        lam, theta, prev = new, theta_next, val
        if val == 0.0:
            break
    return lam


def _parts(g: Array, A: Array, Bs: Sequence[Array], ys: Sequence[Array], pens: Sequence[Penalty], lam: Array,
           base: float, scales: Sequence[float]) -> tuple[dict[str, float], float]:  # fmt: skip
    AtL = A.T @ lam
    BtL = [b.T @ lam for b in Bs]
    ref = max(base, float(np.linalg.norm(AtL)), math.sqrt(sum(float(v @ v) for v in BtL)))
    rx = float(np.linalg.norm(g - AtL))
    ts = [sy / max(ref, 1e-300) for sy in scales]
    ry = math.sqrt(sum(_block_residual(psi, y, v, t) ** 2 for psi, y, v, t in zip(pens, ys, BtL, ts)))
    return {"x": _ratio(rx, ref), "y": _ratio(ry, ref)}, ref


def _composite(
    ev: Evals, x: Array, outputs: Mapping[str, Any] | None, tol: float, stated: NoiseSpec | None = None
) -> dict[str, Any]:
    oracle = ev.oracle
    A, Bs, c = np.asarray(oracle.A), [np.asarray(b) for b in oracle.B], np.asarray(oracle.c)
    pens = list(oracle.penalties)
    out = dict(outputs or {})
    ys = _blocks(oracle, x, out, A, Bs, c)
    d = x.shape[0]
    box = _bounds(getattr(oracle, "feasible_set", None), d)
    V0 = np.asarray(ev.objective(x[None, :])[0], dtype=np.float64)
    noise = objective_noise(ev.objective, x, V0, stated, None, box)  # the noise: the steps and the error bound
    step = noise_step(noise, max(abs(float(V0.mean())), float(np.abs(V0).mean())))
    s0 = max(_nonzero_rms(x), 1.0)  # a first pass, to measure the curvature (a point near 0 has no scale of its own)
    D = _differences(x, s0, box, step)
    obj = _objective_at(ev, x, D, V0, noise, box)
    s = variables_scale(x, obj.f, float(np.abs(obj.curv).max(initial=0.0)))
    if s < 1e-2 * s0:  # steps of eps^(1/4) at the point's scale are too long for these units: once more at theirs
        D = _differences(x, s, box, step)
        obj = _objective_at(ev, x, D, V0, noise, box)
    span = D.a + D.b
    gerr = 0.0
    if obj.rounding:  # noise-free values: a residual at the differences' rounding does not fail
        floor = 10.0 * obj.noise / (max(float(span.min()), 1e-300) * tol) if span.size else 0.0
    else:  # under noise no such floor: the gradient's error bound instead
        floor, gerr = 0.0, float(np.linalg.norm(obj.gerr))
    verdict = composite_verdict(x, ys, obj.grad, s * float(np.abs(obj.curv).max(initial=0.0)), obj.comp, floor, A, Bs,
                                c, pens, out.get("lam"), tol, scale=s, gerr=gerr)  # fmt: skip
    if not obj.rounding:
        verdict["noise"] = noise.f
        verdict["message"] += f"; noise of the values {noise.f:.2g} ({noise.source})"
    return verdict


def composite_verdict(
    x: Array, ys: Sequence[Array], grad: Array, curvature: float, comp: float, floor: float, A: Array,
    Bs: Sequence[Array], c: Array, pens: Sequence[Penalty], lam: Any, tol: float, scale: float | None = None,
    gerr: float = 0.0,
) -> dict[str, Any]:  # fmt: skip
    """The composite test at ``(x, y)`` from the smooth part's derivatives (module docstring).

    ``grad``: ``grad f(x)``; ``curvature``: ``s max_j |H_jj|`` (the variables' size times the largest
    curvature); ``comp``: ``mean_i |grad f_i(x)|``; ``floor``: the least reference (the differences'
    rounding error over ``tol``); ``lam``: the run's multiplier or ``None``; ``scale``: the variables' size ``s``
    (default: the root mean square of the nonzero entries of ``x``, 1 at ``x = 0``). ``certify`` calls it with
    central differences; a verification with exact derivatives calls it with those (the same test).
    ``gerr``: the error bound of ``grad`` from the noise of the values (0: noise-free): added to the x-part of
    the residual; when the test passes without it and fails with it, the noise decides (``noise_limited``).
    """
    g = np.asarray(grad, dtype=np.float64)
    s = float(scale) if scale is not None else (_nonzero_rms(x) or 1.0)
    By = sum((b @ v for b, v in zip(Bs, ys)), np.zeros_like(c))
    rc = float(np.linalg.norm(A @ x + By - c))
    # the size of A x at the variables' own scale is the least reference (a solution at x = 0 with c = 0 would
    # otherwise be asked for a coupling residual of exactly 0)
    ref_c = max(float(np.linalg.norm(A @ x)), float(np.linalg.norm(By)), float(np.linalg.norm(c)),
                float(np.linalg.norm(A, 2)) * s * math.sqrt(max(x.shape[0], 1)))
    coupling = _ratio(rc, ref_c) if rc > 64 * _EPS * ref_c else 0.0
    # the problem's gradient scale without the multiplier, and each block's own units (y_j's typical size)
    base = max(float(np.linalg.norm(g)), curvature, comp, floor)
    scales = [_nonzero_rms(y) or s for y in ys]
    # the multiplier: the run's, or fitted at the point, whichever fits better
    candidates: list[tuple[str, Array]] = []
    if lam is not None:
        lam_run = np.asarray(lam, dtype=np.float64).reshape(-1)
        if lam_run.shape != (A.shape[0],):
            raise InvalidInputError(f"certify: lam must have shape ({A.shape[0]},), got {lam_run.shape}")
        candidates.append(("the run's", lam_run))
    start: Array = candidates[0][1] if candidates else np.asarray(np.linalg.lstsq(A.T, g, rcond=None)[0], dtype=np.float64)
    ts = [sy / max(base, 1e-300) for sy in scales]
    candidates.append(("fitted at the point", _fit(g, A, Bs, ys, pens, start, ts)))
    scored = []
    for label, lam_c in candidates:
        parts, ref = _parts(g, A, Bs, ys, pens, lam_c, base, scales)
        scored.append((max(parts.values()), label, parts, ref))
    _, label, parts, ref = min(scored, key=lambda e: e[0])
    limited = False
    if gerr > 0:  # the least favourable reading; the most favourable one decides whether the noise decides
        best = max({**parts, "coupling": coupling, "x": max(parts["x"] - gerr / max(ref, 1e-300), 0.0)}.values())
        parts = {**parts, "x": parts["x"] + gerr / max(ref, 1e-300)}
        limited = max(*parts.values(), coupling) > tol >= best
    verdict = _residual_verdict("ADMM", {**parts, "coupling": coupling}, tol, ref)
    verdict["message"] += f"; lam {label}"
    if limited:
        verdict["noise_limited"] = True
        verdict["message"] = verdict["message"].replace("not certified", "not certified, noise-limited", 1)
    return verdict
