"""The KKT test of the certificate: finite sums (with a feasible set) and constrained problems."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zoframe.certificate._common import (
    _EPS,
    _STEP,
    Evals,
    _bounds,
    _derivatives,
    _difference_points,
    _Differences,
    _ratio,
    _standing_out,
    _unit,
)
from zoframe.certificate.gradient import (
    _coordinate_ratio,
    _Objective,
    _objective_at,
    _reference,
    point_scales,
    scaled_differences,
)
from zoframe.certificate.noise import NoiseSpec, noise_step, objective_noise, values_noise
from zoframe.protocols import Array, IntArray

#: probe step of the second-order test, relative to the point's scale
PROBE_STEP = 1e-3
#: relative negative curvature along the tangent space that refuses a certificate
CURVATURE_TOL = 1e-2

def _block_rows(d: int) -> int:
    """Candidates whose gradients are taken at once (and the largest fit solved as one dense NNLS)."""
    return max(64, min(8 * d, 1024))


class _Fit:
    """The multiplier fit of the KKT test, grown a block of rows at a time::

        r^2 = min_{u >= 0} |grad f + A u|^2 + (w^T u)^2

    ``A``'s columns: the nearly active rows (bounds, constraints) in the order they were added, then
    ``+grad h_l`` and ``-grad h_l`` of the equality constraints (``mu_l = u_l+ - u_l-``); ``w >= 0``: the
    complementarity weights (``|g_j| / length_j``, ``|h_l| / s``), so that ``w^T u`` is the complementarity
    gap ``sum_j l_j |g_j|`` relative to the point's scale (for a convex problem, the duality gap of the
    multipliers). One non-negative least-squares problem of ``d + 1`` rows, whatever the number of columns:
    its solution needs at most ``d + 1`` of them (a subset that spans the gradient), so thousands of nearly
    active constraints (a degenerate optimum) cost no more than the rows they bring. The gap is a sum, not
    a sum of squares: splitting a multiplier over many nearly active copies of a constraint does not make
    it smaller."""

    def __init__(self, grad: Array, Jh: Array, hweight: Array) -> None:
        self.g = grad
        self.blocks: list[Array] = []
        self.weights: list[Array] = []
        self.Jh, self.hw = Jh, np.abs(hweight)
        self._u: Array | None = None

    @property
    def columns(self) -> int:
        return int(sum(b.shape[0] for b in self.blocks)) + 2 * int(self.Jh.shape[0])

    def add(self, G: Array, weight: Array) -> None:
        if G.shape[0]:
            self.blocks.append(np.asarray(G, dtype=np.float64))
            self.weights.append(np.abs(np.asarray(weight, dtype=np.float64)))
            self._u = None

    def _matrices(self) -> tuple[Array, Array]:
        d = self.g.shape[0]
        if not self.columns:
            return np.zeros((d, 0)), np.zeros(0)
        A = np.vstack([*self.blocks, self.Jh, -self.Jh]).T
        w = np.concatenate([*self.weights, self.hw, self.hw])
        return A, w

    def solve(self) -> Array:
        if self._u is None:
            from scipy.optimize import nnls  # imported on use (scipy.optimize is slow to import)

            A, w = self._matrices()
            M = np.vstack([A, w[None, :]])
            rhs = np.concatenate([-self.g, [0.0]])
            self._u = nnls(M, rhs, maxiter=50 * max(M.shape))[0]
        return self._u

    def gradient_residual(self, u: Array) -> Array:
        A, _ = self._matrices()
        out: Array = self.g + A @ u
        return out

    def residual(self) -> float:
        u = self.solve()
        A, w = self._matrices()
        v = self.g + A @ u
        return float(np.sqrt(v @ v + float(w @ u) ** 2))

    def force(self, u: Array) -> Array:
        A, _ = self._matrices()
        out: Array = np.abs(A) @ u
        return out


def _constrained_scales(x: Array, box: tuple[Array, Array] | None) -> Array:
    """The difference steps' length scale of each coordinate of a constrained problem: ``max(1, |x_k|)``, or the
    coordinate's own scale at the point (:func:`point_scales`) where that is smaller and the point shows a typical
    size (the median of ``|x|`` above 0): a variable of size ``1e-3`` next to others of size ``1e3`` gets steps of
    its own size, not of size 1. A point whose entries are mostly 0 (a vertex at the origin) tells no size: there
    the scale stays ``max(1, |x_k|)``."""
    c = np.maximum(1.0, np.abs(x))
    if x.shape[0] and float(np.median(np.abs(x))) > 0.0:
        c = np.minimum(c, point_scales(x, box))
    return c


def _kkt(
    ev: Evals, x: Array, tol: float, feas_tol: float, cap: int, probes: int, stated: NoiseSpec | None = None
) -> dict[str, Any]:
    """The KKT test at ``x``: central differences with steps ``step * max(1, |x_k|)``, ``step`` sized to the
    noise found at the point (:func:`~zoframe.certificate.noise.noise_step`). Where that reading fails, a second
    reading of the same values may decide, and its verdict stands when it passes (each reading carries its own
    error bound from the noise, so neither passes on noise):

    * noise-free values on a point whose variables are of very different sizes (some below a tenth of
      ``max(1, |x_k|)``, :func:`_constrained_scales`): steps in each variable's own size (a variable of size
      ``1e-3`` next to others of size ``1e3`` differenced with a step of size 1 hides its own gradient);
    * a noise level that made the step longer than the noise-free ``eps^(1/4)``: the noise-free step (the noise
      is relative to ``|f(x)|``, which says nothing of the function's scale where ``f(x*) = 0``: there a noise of
      ``1e-20`` on values of ``1e-16`` gave steps of 5 % of a variable).
    """
    first = _kkt_once(ev, x, tol, feas_tol, cap, probes, stated, own_scales=False, plain_step=False)
    rounding, longer = bool(first.pop("_rounding")), bool(first.pop("_longer"))
    if first["passed"]:
        return first
    second: dict[str, Any] | None = None
    if rounding and ev.oracle.kind != "finite_sum":  # a finite sum's steps follow its variables' sizes already
        own = _constrained_scales(x, _bounds(ev.oracle.feasible_set, x.shape[0]))
        if bool(np.any(own < 0.1 * np.maximum(1.0, np.abs(x)))):
            second = _kkt_once(ev, x, tol, feas_tol, cap, probes, stated, own_scales=True, plain_step=False)
    elif longer:
        second = _kkt_once(ev, x, tol, feas_tol, cap, probes, stated, own_scales=False, plain_step=True)
    if second is None:
        return first
    second.pop("_rounding")
    second.pop("_longer")
    return second if second["passed"] else first


def _kkt_once(
    ev: Evals, x: Array, tol: float, feas_tol: float, cap: int, probes: int, stated: NoiseSpec | None,
    own_scales: bool, plain_step: bool,
) -> dict[str, Any]:
    oracle = ev.oracle
    d = x.shape[0]
    fs = oracle.feasible_set
    box = _bounds(fs, d)
    V0 = np.asarray(ev.objective(x[None, :])[0], dtype=np.float64)
    noise = objective_noise(ev.objective, x, V0, stated, point_scales(x, box), box)  # the noise: steps, error bounds
    noisy_step = noise_step(noise, max(abs(float(V0.mean())), float(np.abs(V0).mean())))
    step = _STEP if plain_step else noisy_step
    scales: Array | None = None
    if oracle.kind == "finite_sum":  # the coordinates' own scales at the point (no floor of 1)
        scales = point_scales(x, box)
        s = float(scales.max())
        D = scaled_differences(x, scales, box, step)
    else:
        s = max(1.0, float(np.abs(x).max()))
        D = scaled_differences(x, _constrained_scales(x, box), box, step) if own_scales else _difference_points(x, box, step)
    obj = _objective_at(ev, x, D, V0, noise, box)
    ref = _reference(obj, s)
    band = 10.0 * tol * s
    rows: list[Array] = []  # gradients of the nearly active constraints / bounds
    curv_rows: list[Array] = []  # their curvatures |g_j''_kk| (0 for a bound, and where not resolved)
    vals: list[float] = []  # their values (<= 0 when satisfied)
    ids: list[int] = []  # constraint index, or -1 for a bound
    lengths: list[float] = []  # the length scale of each row's complementarity term
    sig_rows: list[float] = []  # the noise of each row's values (0 for a bound: its gradient is exact)
    sigma_c = 0.0  # the constraints' noise
    viol = 0.0 if (fs is not None or oracle.kind == "constrained") else None
    cap_hit = False
    cand = np.zeros(0, dtype=np.intp)
    blen = np.full(d, s)  # each coordinate's length scale: the box's width where it is narrower than s
    if box is not None:
        lo, hi = box
        viol = max(0.0, float(np.max(lo - x)), float(np.max(x - hi)))
        width = hi - lo
        # a bound's length scale: the box's width where it is narrower than the point's scale
        blen = np.where(np.isfinite(width) & (width > 0), np.minimum(s, width), s) if scales is None else scales
        for sign, gap in ((-1.0, lo - x), (1.0, x - hi)):  # bound rows: g = lo - x <= 0, x - hi <= 0
            for i in np.flatnonzero(np.isfinite(gap) & (gap >= -10.0 * tol * blen)):
                rows.append(sign * _unit(d, int(i)))
                curv_rows.append(np.zeros(d))
                vals.append(float(gap[i]))
                ids.append(-1)
                lengths.append(float(blen[i]))
                sig_rows.append(0.0)
    elif fs is not None:
        viol = float(np.abs(x - np.asarray(fs.project(x), dtype=np.float64)).max())
    Jh, hx = _equalities_at(ev, x, D)  # (m_eq, d), (m_eq,): always active, multipliers of free sign
    sigma_h = 0.0
    if hx.shape[0]:
        viol = max(float(viol or 0.0), float(np.abs(hx).max()))
        sigma_h = _equality_noise(ev, x, hx, stated)
    fit = _Fit(obj.grad, Jh, hx / s)
    for row, val, length in zip(rows, vals, lengths):  # the bounds near x
        fit.add(row[None, :], np.array([val / length]))
    n_cand = 0
    if oracle.kind == "constrained":
        fp = ev.full_pass(x, cap + 1, feas_tol)  # the one pass over all m constraints
        viol = max(float(viol or 0.0), float(fp.max_violation))
        cand = np.asarray(fp.top_indices[:cap], dtype=np.intp)
        cvals = np.asarray(fp.top_values[:cap], dtype=np.float64)
        # the candidates a block at a time, closest to active first: their gradients, the nearly active rows, and
        # the multiplier fit over every row so far; stop once the fit passes, or at the first block whose least
        # active candidate lies beyond the band (the candidates further down are further away)
        gn_max, out_of_band = 0.0, False
        lo_c, size = 0, _block_rows(d)
        while lo_c < cand.shape[0]:
            hi_c = min(cand.shape[0], lo_c + size)
            lo_c, size = hi_c, 2 * size  # blocks of B, 2 B, 4 B, ...: a few fits, however many rows it takes
            ids_b, vals_b = cand[n_cand:hi_c], cvals[n_cand:hi_c]
            if n_cand == 0:  # the constraints' noise, from the candidates closest to active (one line, 9 points)
                sigma_c = _constraint_noise(ev, x, ids_b, vals_b, stated)
            Gc = np.empty((ids_b.shape[0], d))
            Hc = np.empty((ids_b.shape[0], d))  # the rows' curvatures where they stand out of their noise, else 0
            for lo_i, hi_i in D.chunks(ids_b.shape[0]):  # one batched call per chunk of coordinates
                C = ev.constraints(D.points(lo_i, hi_i), ids_b)  # (2k, K)
                k = hi_i - lo_i
                gk, hk, nk = _derivatives(vals_b, C[:k], C[k:], D.a[lo_i:hi_i], D.b[lo_i:hi_i])
                Gc[:, lo_i:hi_i] = gk.T
                Hc[:, lo_i:hi_i] = np.abs(_standing_out(hk, nk, sigma_c, D.a[lo_i:hi_i], D.b[lo_i:hi_i])).T
            n_cand = hi_c
            gn = np.linalg.norm(Gc, axis=1)
            gn_max = max(gn_max, float(gn.max(initial=0.0)))
            dist = np.where(vals_b >= 0, 0.0, -vals_b / np.maximum(gn, 1e-300))
            near = np.flatnonzero(dist <= band)
            # a constraint's length scale: the coordinates' scales weighted by its normal (s without a
            # narrow box), so that a constraint at a distance comparable to a narrow box is not active
            clen = np.linalg.norm(Gc * blen, axis=1) / np.maximum(gn, 1e-300)
            clen = np.where(gn > 0, clen, s)
            for j in near:
                rows.append(Gc[j])
                curv_rows.append(Hc[j])
                vals.append(float(vals_b[j]))
                ids.append(int(ids_b[j]))
                lengths.append(float(clen[j]))
                sig_rows.append(sigma_c)
            fit.add(Gc[near], vals_b[near] / clen[near])
            least = float(vals_b[-1])
            out_of_band = least < 0 and -least / max(gn_max, 1e-300) > band
            if out_of_band or _ratio(fit.residual(), ref) <= tol:
                break
        if not out_of_band and n_cand == cand.shape[0] and fp.top_indices.shape[0] > cap:
            nxt = float(fp.top_values[cap])  # the largest value left out
            cap_hit = nxt >= 0 or -nxt / max(gn_max, 1e-300) <= band
    J = np.asarray(rows, dtype=np.float64).reshape(len(rows), d)
    g_act = np.asarray(vals, dtype=np.float64)
    lam = np.zeros(len(rows))
    if fit.columns:
        u = fit.solve()
        lam = u[: len(rows)]
        resid_vec = fit.gradient_residual(u)
        r = fit.residual()
        force = fit.force(u)
    else:
        resid_vec = obj.grad
        r = float(np.linalg.norm(obj.grad))
        force = np.zeros(d)
    # the multipliers' share of the Lagrangian's curvature, sum_j lambda_j |g_j''_kk|: with the objective's, the scale
    # on which coordinate k's residual is judged (a coordinate where f and every row are stationary, so that the
    # residual is the differences' truncation, is judged on the curvature of the Lagrangian, not on 0)
    curv_lag = np.asarray(curv_rows, dtype=np.float64).reshape(len(rows), d).T @ lam if len(rows) else np.zeros(d)
    # the error bound of the residual vector: the gradient's and, through the multipliers, the constraint rows'
    # (each row's differences off by 4 sigma_j / span); the rows of the bounds are exact
    span = D.a + D.b
    inv_span = np.where(span > 0, 1.0 / np.where(span > 0, span, 1.0), 0.0)
    sig = np.concatenate([np.asarray(sig_rows, dtype=np.float64), np.full(2 * hx.shape[0], sigma_h)])
    u_all = fit.solve() if fit.columns else np.zeros(0)
    load = float(u_all @ sig) if u_all.shape[0] == sig.shape[0] else 0.0
    err_vec = obj.gerr + 4.0 * load * inv_span
    e_r = 0.0 if obj.rounding and sigma_c <= 0 and sigma_h <= 0 else float(np.linalg.norm(err_vec))
    # the least favourable reading (residual plus its error, reference less it) and the most favourable one
    ref_hi = _reference(obj, s, plain=True) + (0.0 if obj.rounding else float(np.linalg.norm(obj.gerr)))
    residual, plain = _ratio(r + e_r, ref), _ratio(max(r - e_r, 0.0), ref_hi)
    if fs is not None and box is None:  # another convex set: the projected step of the residual
        t = s / max(ref, 1e-300)
        r = float(np.linalg.norm(x - np.asarray(fs.project(x - t * resid_vec), dtype=np.float64))) / t
        residual, plain = _ratio(r + e_r, ref), _ratio(max(r - e_r, 0.0), ref_hi)
    else:  # and coordinate by coordinate (variables of different scales)
        ratio_c, plain_c = _coordinate_ratio(obj, x, D, resid_vec, force, tol, box, scales, err=err_vec,
                                             curv_lag=curv_lag)  # fmt: skip
        residual, plain = max(residual, ratio_c), max(plain, plain_c)
    floor = max(residual - plain, 0.0)  # what the noise's error bounds add: about the smallest tolerance supported
    n_active = len(rows) + hx.shape[0]
    base = {"residual": residual, "scale": ref, "max_violation": viol, "n_active": n_active, "cap_hit": cap_hit,
            "noise": noise.f, "noise_floor": floor, "noise_limited": False, "_rounding": noise.rounding,
            "_longer": noisy_step > _STEP}  # fmt: skip
    capped = f"; {n_active} nearly active used, the cap active_cap={cap} bound" if cap_hit else ""
    heard = f"; noise of the values {noise.f:.2g} ({noise.source})" if not noise.rounding else ""
    if viol is not None and viol > feas_tol:
        return {**base, "passed": False, "descent": None,
                "message": f"not certified: infeasible (max violation {viol:.3g} > {feas_tol:.3g}){capped}"}  # fmt: skip
    viol_noise = 2.0 * max(sigma_c, sigma_h)
    if viol is not None and viol + viol_noise > feas_tol:  # feasible as measured, but not beyond the noise
        return {**base, "passed": False, "descent": None, "noise_limited": True,
                "message": f"not certified, noise-limited: max violation {viol:.3g} <= {feas_tol:.3g} but within the "
                           f"constraints' noise ({viol_noise / 2:.2g}) of it{capped}"}  # fmt: skip
    if not residual <= tol:
        if plain <= tol:  # the most favourable reading passes, the least does not: the noise decides
            supported = f"about {residual:.2g}" if math.isfinite(residual) else "none: the noise hides a coordinate"
            return {**base, "passed": False, "descent": None, "noise_limited": True,
                    "message": f"not certified, noise-limited: KKT residual between {plain:.3g} and {residual:.3g} "
                               f"within the error bounds of the noise of the values, and tol {tol:.3g} in between "
                               f"(the tolerance these values support: {supported}){heard}{capped}"}  # fmt: skip
        return {**base, "passed": False, "descent": None,
                "message": f"not certified: KKT residual {residual:.3g} > tol {tol:.3g}{heard}{capped}"}  # fmt: skip
    descent = None
    if probes:
        strong = lam > 1e-6 * max(float(lam.max(initial=0.0)), 1e-300)
        descent = _probe(ev, x, s, obj, ref, J[strong], [ids[i] for i in np.flatnonzero(strong)],
                         g_act[strong], cand, box, feas_tol, probes, Jh, hx)  # fmt: skip
    if descent is not None and descent < -CURVATURE_TOL:
        return {**base, "passed": False, "descent": descent,
                "message": f"not certified: KKT residual {residual:.3g} <= tol {tol:.3g} but not a minimum "
                           f"(negative curvature {descent:.3g} along the active set){capped}"}  # fmt: skip
    return {**base, "passed": True, "descent": descent,
            "message": f"certified: KKT residual {residual:.3g} <= tol {tol:.3g}{heard}{capped}"}  # fmt: skip


def _constraint_noise(ev: Evals, x: Array, ids: IntArray, vals: Array, stated: NoiseSpec | None) -> float:
    """The noise of the constraints at ``x``: the stated level, or ECNoise on the candidates ``ids`` (at most 64,
    the closest to active) along one line; the largest column's level (0 when it is the rounding alone)."""
    if stated is not None:
        return float(stated.absolute(float(np.abs(vals).max(initial=0.0)))) if stated.relative else stated.level
    top = ids[:64]
    box = _bounds(ev.oracle.feasible_set, x.shape[0])
    levels, _, _ = values_noise(lambda X: ev.constraints(X, top), x, np.abs(vals[: top.shape[0]]), point_scales(x, box),
                                box)  # fmt: skip
    return float(levels.max(initial=0.0))


def _equality_noise(ev: Evals, x: Array, hx: Array, stated: NoiseSpec | None) -> float:
    """The noise of the equality constraints at ``x`` (as :func:`_constraint_noise`)."""
    if stated is not None:
        return float(stated.absolute(float(np.abs(hx).max(initial=0.0)))) if stated.relative else stated.level
    box = _bounds(ev.oracle.feasible_set, x.shape[0])
    levels, _, _ = values_noise(lambda X: ev.equalities(X), x, np.abs(hx), point_scales(x, box), box)
    return float(levels.max(initial=0.0))


def _probe(
    ev: Evals, x: Array, s: float, obj: _Objective, ref: float, J: Array, ids: list[int], g_act: Array,
    cand: IntArray, box: tuple[Array, Array] | None, feas_tol: float, probes: int, Jh: Array, hx: Array,
) -> float | None:  # fmt: skip
    """The most negative relative curvature of ``f`` along the tangent space of the active set
    (symmetric probes pulled back onto the active constraints), ``None`` when no probe applies.
    ``Jh``, ``hx``: gradients and values of the equality constraints (always in the active set)."""
    d = x.shape[0]
    neq = hx.shape[0]
    J = np.vstack([J, Jh])  # the equality rows after the inequality ones (ids covers the latter only)
    order = np.argsort(obj.curv, kind="stable")  # least curvature first
    cands: list[Array] = [_unit(d, int(i)) for i in order[:probes]]
    if d > 1:
        ei, ej = _unit(d, int(order[0])), _unit(d, int(order[1]))
        cands += [(ei + ej) / math.sqrt(2.0), (ei - ej) / math.sqrt(2.0)]
    dirs: list[Array] = []
    for v in cands:
        if J.shape[0]:
            coef, *_ = np.linalg.lstsq(J.T, v, rcond=None)
            v = v - J.T @ coef
        nv = float(np.linalg.norm(v))
        if nv < 0.1 or any(abs(float(u @ v)) / nv > 0.999 for u in dirs):
            continue
        dirs.append(v / nv)
        if len(dirs) >= probes:
            break
    if not dirs:
        return None
    t = PROBE_STEP * s
    V = np.asarray(dirs)
    Z = np.vstack([x + t * V, x - t * V])  # (2p, d): probe k and its mirror k + p
    cons = [k for k, j in enumerate(ids) if j >= 0]
    if cons or neq:  # one Gauss-Newton step back onto the active constraints (bounds stay exact: v_i = 0 there)
        parts, rows_back = [], list(cons) + list(range(len(ids), len(ids) + neq))
        if cons:
            idx = np.asarray([ids[k] for k in cons], dtype=np.intp)
            parts.append(ev.constraints(Z, idx) - g_act[cons][None, :])  # (2p, a)
        if neq:
            parts.append(ev.equalities(Z) - hx[None, :])
        delta = np.hstack(parts)
        step, *_ = np.linalg.lstsq(J[rows_back], delta.T, rcond=None)  # (d, 2p)
        Z = Z - step.T
    if box is not None:
        Z = np.clip(Z, box[0], box[1])
    fz = ev.objective(Z).mean(axis=1)
    ok = np.ones(Z.shape[0], dtype=bool)
    if cand.shape[0]:
        Cz = ev.constraints(Z, cand)
        ok = Cz.max(axis=1) <= feas_tol
    if neq:
        ok &= np.abs(ev.equalities(Z)).max(axis=1) <= feas_tol
    p = len(dirs)
    noise = max(obj.noise, 64.0 * _EPS * float(np.abs(fz).max()))
    worst: float | None = None
    for k in range(p):
        if not (ok[k] and ok[k + p]):
            continue  # a probe left the feasible set: inconclusive along this direction
        D2 = float(fz[k] + fz[k + p] - 2.0 * obj.f)
        rel = D2 / (t * t * max(ref, 1e-300) / s)
        if D2 >= -4.0 * noise:
            rel = max(rel, 0.0)  # within the noise of f: no evidence of descent
        worst = rel if worst is None else min(worst, rel)
    return worst


def _equalities_at(ev: Evals, x: Array, D: _Differences) -> tuple[Array, Array]:
    """The equality constraints' gradients ``(m_eq, d)`` by central differences at the points of ``D`` (one
    batched call per chunk of coordinates) and their values ``(m_eq,)`` at ``x``; empty without equalities."""
    oracle = ev.oracle
    d, neq = x.shape[0], oracle.m_eq
    if not neq:
        return np.zeros((0, d)), np.zeros(0)
    hx = np.asarray(ev.equalities(x[None, :])[0], dtype=np.float64)
    Jh = np.empty((neq, d))
    for lo, hi in D.chunks(neq):
        H = ev.equalities(D.points(lo, hi))  # (2k, m_eq)
        k = hi - lo
        Jh[:, lo:hi] = _derivatives(hx, H[:k], H[k:], D.a[lo:hi], D.b[lo:hi])[0].T
    return Jh, hx


