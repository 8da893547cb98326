"""The stationarity certificate behind ``Result.success``: one test, the same for every solver.

:func:`certify` looks at a problem through its :class:`~zoframe.oracle.CountingOracle` only (never
the problem object) and decides whether a point is an approximate stationary / KKT point, from
quantities *at that point* (nothing from the run that produced it: not its start, not its first
gradient). It is what turns a solver's claim (status ``CONVERGED``) into ``Result.success``, and
what ``zoframe verify`` reports, so the two agree on the same point.

What it computes, by the oracle's kind (``s = max(1, |x|_inf)`` is the point's length scale):

finite-sum (optionally over a ``feasible_set``) and constrained problems
    * ``grad f`` by central differences over all ``d`` coordinates, step
      ``h_i = eps^(1/4) max(1, |x_i|)`` (one-sided at a bound of a box ``feasible_set``: every point
      stays inside it). The quarter power rather than the usual third keeps the *second*
      differences ``H_ii = (f(x + h e_i) - 2 f(x) + f(x - h e_i)) / h_i^2`` above rounding noise
      when ``|f|`` is large next to its curvature (a shifted objective); the gradient's truncation
      error ``O(h^2)`` stays around ``1e-8`` of its size, far below any tolerance used here. The
      same ``2 d + 1`` points give the per-component gradients of a finite sum for free.
    * for constrained problems, ONE value-only pass over all ``m`` constraints in blocks
      (:func:`zoframe.measures.max_violation_full`, memory bounded whatever ``m``): the max
      violation and the ``active_cap`` largest values; the gradients of those candidates by central
      differences at the same points (one batched call per chunk of coordinates); the nearly active set is the candidates
      at distance ``-g_j / |grad g_j| <= band * s`` (``band = 10 tol``), plus the bounds of a box
      ``feasible_set`` within the same distance (exact rows ``+-e_i``). When the ``active_cap + 1``-th
      largest value is still within the band (estimated with the largest candidate gradient), the
      cap *binds*: the certificate says so (``cap_hit``) and uses the ``active_cap`` closest by value.
    * multipliers ``l >= 0`` by non-negative least squares with complementarity rows::

          r^2 = min_{l >= 0} |grad f + J^T l|^2 + sum_j (l_j g_j / s)^2

      so a constraint at distance ``d_j`` that carries the force ``l_j |grad g_j|`` costs
      ``(force * d_j / s)^2``: using a constraint that is not quite active is penalised in
      proportion to how far it is, relative to the point's scale (a constraint ``tol s`` away
      contributes ``tol`` of its force, the tolerance itself). A bound of a box uses the box's
      width instead of ``s`` where it is narrower (a variable that lives in ``[0, 0.01]`` is not
      "nearly at" its bound ``4e-4`` away).
    * the test ``r <= tol * ref`` with ``ref = max(|grad f|, s max_i |H_ii|, mean_i |grad f_i|)``:
      relative to the gradient (the usual relative KKT residual when the gradient is balanced by
      constraints); at an interior point, relative to the curvature (``r / ref <= tol`` then says
      that a Newton step would move ``x`` by at most ``tol s``); for a finite sum, relative to the
      typical component gradient. Every term scales with ``f`` and none moves with ``f + const``,
      so multiplying ``f`` by a constant does not change the verdict.
    * the same test coordinate by coordinate (:func:`_coordinate_ratio`): each entry of the residual
      against its own coordinate's gradient, multiplier forces, curvature and component gradients,
      so that variables of very different scales do not pass on each other's quantities. The
      reported residual is the larger of the two ratios.
    * a cheap second-order test that rejects KKT points that are not minima (a local maximum
      along the boundary, a saddle): ``probes`` directions ``v`` (the coordinates of least
      curvature ``H_ii`` and the two sums / differences of the first two, projected onto the null
      space of the gradients of the constraints that carry a multiplier), symmetric probes
      ``x +- t v`` with ``t = 1e-3 s``, each pulled back onto those constraints by one Gauss-Newton
      step; the certificate is refused when ``D = f(z+) + f(z-) - 2 f(x)`` is below the noise of
      ``f`` and ``D / (t^2 ref / s) < -0.01`` (a negative curvature along the active set's tangent
      space) at a pair of probes feasible within ``feasibility_tol`` (checked on the candidates).
    * a point whose max violation exceeds ``feasibility_tol`` (absolute, as ``Result.feasible``)
      fails, whatever its residual.
    * equality constraints ``h_l(x) = 0`` (``oracle.m_eq > 0``): all of them are active rows, their
      gradients by central differences at the same points (one more batched call per chunk), their
      multipliers of free sign (each row enters the NNLS as two columns ``+grad h_l`` and
      ``-grad h_l``), their violation ``|h_l(x)|`` in the max violation; the probes of the
      second-order test stay in the null space of their gradients, are pulled back onto them and
      must keep ``|h_l| <= feasibility_tol``.

minimax problems (``min_x max_{y in Y} F(x, y)``, at the run's own ``y``)
    ``r = max(|grad_x F| / ref_x, |y - P_Y(y + t grad_y F)| / (t ref_y))`` with
    ``t = s_y / ref_y`` and ``ref_x``, ``ref_y`` as ``ref`` above for each block (the curvature of
    ``F`` in ``x`` and in ``y``). A point that passes is stationary in ``x`` with ``y`` maximising
    (a stationary point of ``g(x) = max_y F(x, y)`` by Danskin's theorem when ``F`` is strongly
    concave in ``y``).

composite problems (``min f(x) + sum_j psi_j(y_j)`` s.t. ``A x + sum_j B_j y_j = c``, ADMM)
    with the run's ``y_j`` and ``lam`` (``lam`` fitted by least squares ``A^T lam = grad f`` when
    the run reports none): the largest of ``|grad f - A^T lam| / max(|grad f|, |A^T lam|, ...)``,
    ``sqrt(sum_j dist(B_j^T lam, d psi_j(y_j))^2) / |B^T lam|`` and the relative coupling residual
    ``|A x + B y - c| / max(|A x|, |B y|, |c|)``.

Cost, counted under the purpose ``"certify"`` (``Result.nfev_by_purpose["certify"]`` and
:attr:`Certificate.evaluations`), by default outside the run's budget (like ``"monitor"``), with
``budgeted=True`` (a solver certifying inside a step) charged to it: ``(2 d + 1) n`` objective
evaluations, one full pass over the ``m`` constraints, ``2 d K`` constraint evaluations for the
``K <= active_cap`` candidates' gradients, and for the probes ``2 p (n + K + |A|)`` (``p <= probes``
directions, ``|A|`` the constraints carrying a multiplier), with equality constraints ``(2 d + 1) m_eq``
and ``4 p m_eq`` more. Minimax: ``(2 (d + d_y) + 1) n``.
Composite: ``(2 d + 1) n``. Deterministic: no randomness.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
import math
from typing import Any

import numpy as np

from zoframe.errors import InvalidInputError
from zoframe.oracle import CountingOracle, MonitorOracle
from zoframe.protocols import Array, IntArray

__all__ = ["DEFAULT_TOL", "Certificate", "certify"]

#: default tolerance on the relative residual (calibrated in ``benchmarks/certificate_calibration.py``)
DEFAULT_TOL = 1e-3
#: probe step of the second-order test, relative to the point's scale
PROBE_STEP = 1e-3
#: relative negative curvature along the tangent space that refuses a certificate
CURVATURE_TOL = 1e-2
_EPS = float(np.finfo(np.float64).eps)
_STEP = _EPS**0.25


@dataclass(frozen=True)
class Certificate:
    """The verdict of :func:`certify` at one point.

    ``passed``: the point is certified. ``kind``: which test ran (``"stationarity"``,
    ``"kkt"``, ``"minimax"``, ``"composite"``). ``residual``: the relative residual compared with
    ``tol``; ``scale``: its reference (the denominator, see :mod:`zoframe.certificate`).
    ``max_violation``: the max constraint (and bound) violation over all ``m`` constraints (``None``
    for kinds without constraints). ``n_active``: constraints and bounds in the nearly active set;
    ``cap_hit``: the cap on that set bound (more constraints were nearly active than were used).
    ``descent``: the most negative relative curvature the probes found (``None``: no probe ran);
    ``evaluations``: what the certificate cost (counted under ``"certify"``); ``message``: the
    verdict in words.
    """

    passed: bool
    kind: str
    residual: float
    tol: float
    scale: float
    max_violation: float | None
    n_active: int
    cap_hit: bool
    descent: float | None
    evaluations: int
    message: str

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-friendly data (non-finite numbers as strings ``"inf"`` / ``"nan"``)."""
        out = asdict(self)
        for k, v in out.items():
            if isinstance(v, float) and not math.isfinite(v):
                out[k] = repr(v)
        return out

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Certificate:
        """The inverse of :meth:`to_dict`."""

        def num(v: Any) -> float:
            return float(v)  # float("inf") and float("nan") read the strings back

        return cls(
            passed=bool(doc["passed"]), kind=str(doc["kind"]), residual=num(doc["residual"]), tol=num(doc["tol"]),
            scale=num(doc["scale"]), max_violation=None if doc.get("max_violation") is None else num(doc["max_violation"]),
            n_active=int(doc["n_active"]), cap_hit=bool(doc["cap_hit"]),
            descent=None if doc.get("descent") is None else num(doc["descent"]),
            evaluations=int(doc["evaluations"]), message=str(doc["message"]),
        )  # fmt: skip


# ---------------------------------------------------------------------------------------------- evaluations
class _Evals:
    """The oracle's evaluations under ``"certify"``: budgeted (the oracle itself) or not (a monitor)."""

    def __init__(self, oracle: CountingOracle, budgeted: bool) -> None:
        self.oracle = oracle
        self.budgeted = budgeted
        self.monitor = MonitorOracle(oracle, "certify")

    def objective(self, X: Array) -> Array:
        if self.budgeted:
            return self.oracle.objective(X, None, purpose="certify")
        return self.monitor.objective(X)

    def constraints(self, X: Array, idx: IntArray) -> Array:
        if self.budgeted:
            return self.oracle.constraints(X, idx, purpose="certify")
        return self.monitor.constraints(X, idx)

    def equalities(self, X: Array) -> Array:
        if self.budgeted:
            return self.oracle.equalities(X, None, purpose="certify")
        return self.monitor.equalities(X)

    def minimax(self, X: Array, Y: Array) -> Array:
        if self.budgeted:
            return self.oracle.minimax(X, Y, None, purpose="certify")
        return self.monitor.minimax(X, Y)

    def full_pass(self, x: Array, top: int, tol: float) -> Any:
        from zoframe.measures import max_violation_full  # measures imports this package's oracle

        source: Any = self.oracle if self.budgeted else self.monitor
        return max_violation_full(source, x, top=top, tol=tol, purpose="certify")


def _bounds(fs: Any, d: int) -> tuple[Array, Array] | None:
    """``(lower, upper)`` of a box feasible set (anything with ``lower`` / ``upper``), else ``None``."""
    lo, hi = getattr(fs, "lower", None), getattr(fs, "upper", None)
    if fs is None or lo is None or hi is None:
        return None
    return (
        np.broadcast_to(np.asarray(lo, dtype=np.float64), (d,)).copy(),
        np.broadcast_to(np.asarray(hi, dtype=np.float64), (d,)).copy(),
    )


#: entries of one matrix of difference points or of their values (32 MB): larger ``d`` is evaluated in chunks
_CHUNK_ENTRIES = 1 << 22


@dataclass(frozen=True)
class _Differences:
    """The central-difference points around ``x``: ``x + a_i e_i`` and ``x - b_i e_i``, built a chunk of
    coordinates at a time (memory bounded whatever ``d``)."""

    x: Array
    a: Array  # forward steps (0 at an upper bound)
    b: Array  # backward steps (0 at a lower bound)

    def chunks(self, width: int) -> list[tuple[int, int]]:
        """Coordinate ranges whose ``2 k`` points, and their values of ``width`` columns, fit a chunk."""
        d = self.x.shape[0]
        k = max(1, _CHUNK_ENTRIES // (2 * max(d, width, 1)))
        return [(lo, min(d, lo + k)) for lo in range(0, d, k)]

    def points(self, lo: int, hi: int) -> Array:
        """``(2 k, d)``: the forward points of coordinates ``lo..hi-1``, then the backward ones."""
        k = hi - lo
        P = np.repeat(self.x[None, :], 2 * k, axis=0)
        rows = np.arange(k)
        P[rows, lo + rows] += self.a[lo:hi]
        P[k + rows, lo + rows] -= self.b[lo:hi]
        return P


def _difference_points(x: Array, box: tuple[Array, Array] | None) -> _Differences:
    h = _STEP * np.maximum(1.0, np.abs(x))
    up, down = x + h, x - h
    if box is not None:  # one-sided at a bound: every point inside the box
        up = np.minimum(up, np.maximum(box[1], x))
        down = np.maximum(down, np.minimum(box[0], x))
    return _Differences(x, up - x, x - down)


def _derivatives(v0: Array, vp: Array, vm: Array, a1: Array, b1: Array) -> tuple[Array, Array, Array]:
    """``(gradients (k, b), second differences (k, b), their noise floor (k, b))`` from the values
    ``v0`` (b,) at ``x``, ``vp`` / ``vm`` (k, b) at the points ``x + a_i e_i`` / ``x - b_i e_i``."""
    a, b = a1[:, None], b1[:, None]
    span = a + b
    safe = np.where(span > 0, span, 1.0)
    grad = np.where(span > 0, (vp - vm) / safe, 0.0)
    both = (a > 0) & (b > 0)
    ab = np.where(both, a * b * span, 1.0)
    curv = np.where(both, 2.0 * (b * vp + a * vm - span * v0[None, :]) / ab, 0.0)
    mag = np.maximum(np.maximum(np.abs(vp), np.abs(vm)), np.abs(v0)[None, :])
    noise = np.where(both, 16.0 * _EPS * mag / np.where(both, a * b, 1.0), 0.0)
    return grad, curv, noise


def _unit(d: int, i: int) -> Array:
    e = np.zeros(d)
    e[i] = 1.0
    return e


def _ratio(num: float, den: float) -> float:
    if num == 0.0:
        return 0.0
    return num / den if den > 0 else math.inf


@dataclass(frozen=True)
class _Objective:
    """The objective at ``x``: value, gradient, curvature scale and component-gradient scale."""

    f: float
    grad: Array
    curv: Array  # H_ii, 0 where it cannot be told from noise
    comp: float  # mean_i |grad f_i|
    noise: float  # rounding noise of f
    comp_coord: Array  # per coordinate: mean_i |d f_i / d x_k| (|grad f| entries without a finite sum)


def _objective_at(ev: _Evals, x: Array, D: _Differences) -> _Objective:
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
                      box: tuple[Array, Array] | None) -> float:  # fmt: skip
    """The largest per-coordinate relative residual ``|r_k| / ref_k``.

    ``ref_k = max(|df/dx_k|, sum_j |l_j dg_j/dx_k|, c_k |H_kk|, mean_i |df_i/dx_k|)`` compares each
    coordinate's residual with quantities of the same coordinate only (``c_k``: ``max(1, |x_k|)``, or
    the box's width where narrower), so a test in one coordinate's units is not passed on the
    strength of another's: the global norms of :func:`_kkt` mix coordinates, and variables of very
    different scales (``x_1 ~ 1e-3`` beside ``x_3 ~ 1e4``) let a point far from stationary in the
    large one pass on the small one's curvature. The floor ``10 noise(f) / (span_k tol)`` (``span_k``
    the difference width) keeps a residual at the differences' own rounding level from failing.
    """
    c = np.maximum(1.0, np.abs(x))
    if box is not None:
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


def _count(oracle: CountingOracle) -> int:
    return int(oracle.calls_by_purpose.get("certify", 0))


def _check_tol(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) or not value > 0:
        raise InvalidInputError(f"certify: {name} must be a positive number, got {value!r}")
    return float(value)


def certify(
    oracle: CountingOracle,
    x: Any,
    *,
    outputs: Mapping[str, Any] | None = None,
    tol: float = DEFAULT_TOL,
    feasibility_tol: float = 1e-3,
    active_cap: int | None = None,
    probes: int = 4,
    budgeted: bool = False,
) -> Certificate:
    """Certify that ``x`` is an approximate stationary / KKT point of the oracle's problem.

    ``outputs``: the run's report of its final iterate (``y`` of a minimax run, ``y0``, ``y1``, ...
    and ``lam`` of a composite run). ``tol``: the tolerance on the relative residual (default
    :data:`DEFAULT_TOL`). ``feasibility_tol``: the largest max violation accepted (absolute).
    ``active_cap``: the most nearly active constraints used (default ``max(64, min(8 d, 1024))``,
    which bounds the multiplier fit's matrix); when it binds, :attr:`Certificate.cap_hit` says so.
    ``probes``: directions of the second-order test (``0``: none). ``budgeted``: charge the evaluations to the oracle's budget (a solver certifying
    inside a step; :class:`~zoframe.errors.BudgetExhausted` may then propagate) instead of counting
    them outside it. The evaluations are counted under the purpose ``"certify"`` either way.

    Errors of the user's functions while certifying (a non-finite value, an exception) make the
    certificate fail with the error in its message; they are not raised (except the budget's when
    ``budgeted``). See :mod:`zoframe.certificate` for what is tested and what it costs.
    """
    if not isinstance(oracle, CountingOracle):
        raise InvalidInputError(f"certify needs the problem's CountingOracle, got {type(oracle).__name__}")
    tol = _check_tol("tol", tol)
    if not tol < 1.0:  # the residual is relative to the gradient: at tol >= 1 the certificate cannot fail
        raise InvalidInputError(
            f"certify: tol must be below 1, got {tol!r}: the residual is relative to the gradient's size, so a point "
            "where no constraint balances the gradient (the starting point, say) has residual at most 1 and any "
            f"tol >= 1 passes it. Use a tolerance in (0, 1) (default {DEFAULT_TOL:g}; 1e-2 is lenient)"
        )
    feasibility_tol = _check_tol("feasibility_tol", feasibility_tol)
    if active_cap is not None and (
        isinstance(active_cap, bool) or not isinstance(active_cap, (int, np.integer)) or active_cap < 1
    ):
        raise InvalidInputError(f"certify: active_cap must be a positive integer or None, got {active_cap!r}")
    if isinstance(probes, bool) or not isinstance(probes, (int, np.integer)) or probes < 0:
        raise InvalidInputError(f"certify: probes must be an integer >= 0, got {probes!r}")
    try:
        xv = np.array(x, dtype=np.float64, copy=True).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"certify: x must be a vector of {oracle.dim} real numbers ({exc})") from None
    if xv.shape != (oracle.dim,):
        raise InvalidInputError(f"certify: x must have shape ({oracle.dim},), got {np.shape(x)}")
    kind = {"finite_sum": "stationarity", "constrained": "kkt"}.get(oracle.kind, oracle.kind)
    start = _count(oracle)
    if not np.isfinite(xv).all():
        return Certificate(False, kind, math.inf, tol, math.nan, None, 0, False, None, 0, "the point is not finite")
    ev = _Evals(oracle, bool(budgeted))
    cap = int(active_cap) if active_cap is not None else max(64, min(8 * oracle.dim, 1024))
    try:
        if oracle.kind == "minimax":
            parts = _minimax(ev, xv, outputs, tol)
        elif oracle.kind == "composite":
            parts = _composite(ev, xv, outputs, tol)
        else:
            parts = _kkt(ev, xv, tol, feasibility_tol, cap, int(probes))
    except Exception as exc:  # the user's function failed at a certificate point: no certificate, said why
        from zoframe.errors import BudgetExhausted

        if isinstance(exc, BudgetExhausted) and budgeted:
            raise
        used = _count(oracle) - start
        return Certificate(
            False, kind, math.inf, tol, math.nan, None, 0, False, None, used,
            f"not certified: evaluating the problem near the point failed ({type(exc).__name__}: {exc})",
        )  # fmt: skip
    return Certificate(kind=kind, tol=tol, evaluations=_count(oracle) - start, **parts)


# ---------------------------------------------------------------------------------------------- KKT
def _kkt(ev: _Evals, x: Array, tol: float, feas_tol: float, cap: int, probes: int) -> dict[str, Any]:
    oracle = ev.oracle
    d = x.shape[0]
    s = max(1.0, float(np.abs(x).max()))
    fs = oracle.feasible_set
    box = _bounds(fs, d)
    D = _difference_points(x, box)
    obj = _objective_at(ev, x, D)
    ref = _reference(obj, s)
    band = 10.0 * tol * s
    rows: list[Array] = []  # gradients of the nearly active constraints / bounds
    vals: list[float] = []  # their values (<= 0 when satisfied)
    ids: list[int] = []  # constraint index, or -1 for a bound
    lengths: list[float] = []  # the length scale of each row's complementarity term
    viol = 0.0 if (fs is not None or oracle.kind == "constrained") else None
    cap_hit = False
    cand = np.zeros(0, dtype=np.intp)
    blen = np.full(d, s)  # each coordinate's length scale: the box's width where it is narrower than s
    if box is not None:
        lo, hi = box
        viol = max(0.0, float(np.max(lo - x)), float(np.max(x - hi)))
        width = hi - lo
        # a bound's length scale: the box's width where it is narrower than the point's scale
        blen = np.where(np.isfinite(width) & (width > 0), np.minimum(s, width), s)
        for sign, gap in ((-1.0, lo - x), (1.0, x - hi)):  # bound rows: g = lo - x <= 0, x - hi <= 0
            for i in np.flatnonzero(np.isfinite(gap) & (gap >= -10.0 * tol * blen)):
                rows.append(sign * _unit(d, int(i)))
                vals.append(float(gap[i]))
                ids.append(-1)
                lengths.append(float(blen[i]))
    elif fs is not None:
        viol = float(np.abs(x - np.asarray(fs.project(x), dtype=np.float64)).max())
    if oracle.kind == "constrained":
        fp = ev.full_pass(x, cap + 1, feas_tol)  # the one pass over all m constraints
        viol = max(float(viol or 0.0), float(fp.max_violation))
        cand = np.asarray(fp.top_indices[:cap], dtype=np.intp)
        cvals = np.asarray(fp.top_values[:cap], dtype=np.float64)
        if cand.shape[0]:
            Gc = np.empty((cand.shape[0], d))
            for lo_i, hi_i in D.chunks(cand.shape[0]):  # one batched call per chunk of coordinates
                C = ev.constraints(D.points(lo_i, hi_i), cand)  # (2k, K)
                k = hi_i - lo_i
                Gc[:, lo_i:hi_i] = _derivatives(cvals, C[:k], C[k:], D.a[lo_i:hi_i], D.b[lo_i:hi_i])[0].T
            gn = np.linalg.norm(Gc, axis=1)
            dist = np.where(cvals >= 0, 0.0, -cvals / np.maximum(gn, 1e-300))
            near = np.flatnonzero(dist <= band)
            # a constraint's length scale: the coordinates' scales weighted by its normal (s without a
            # narrow box), so that a constraint at a distance comparable to a narrow box is not active
            clen = np.linalg.norm(Gc * blen, axis=1) / np.maximum(gn, 1e-300)
            for j in near:
                rows.append(Gc[j])
                vals.append(float(cvals[j]))
                ids.append(int(cand[j]))
                lengths.append(float(clen[j]) if gn[j] > 0 else s)
            if fp.top_indices.shape[0] > cap and near.shape[0] == cand.shape[0]:
                nxt = float(fp.top_values[cap])  # the largest value left out
                cap_hit = nxt >= 0 or -nxt / max(float(gn.max()), 1e-300) <= band
    J = np.asarray(rows, dtype=np.float64).reshape(len(rows), d)
    g_act = np.asarray(vals, dtype=np.float64)
    Jh, hx = _equalities_at(ev, x, D)  # (m_eq, d), (m_eq,): always active, multipliers of free sign
    if hx.shape[0]:
        viol = max(float(viol or 0.0), float(np.abs(hx).max()))
    lam = np.zeros(len(rows))
    ncol = len(rows) + 2 * hx.shape[0]
    if ncol:
        from scipy.optimize import nnls  # imported on use (scipy.optimize is slow to import)

        # the columns: the nearly active rows, then +grad h_l and -grad h_l (mu_l = u_l+ - u_l-)
        Jall = np.vstack([J, Jh, -Jh])
        comp = np.concatenate([g_act / np.asarray(lengths, dtype=np.float64).reshape(-1), hx / s, -hx / s])
        M = np.vstack([Jall.T, np.diag(comp)])
        rhs = np.concatenate([-obj.grad, np.zeros(ncol)])
        u, _ = nnls(M, rhs, maxiter=50 * max(M.shape))
        lam = u[: len(rows)]
        resid_vec = obj.grad + Jall.T @ u
        r = float(np.sqrt(resid_vec @ resid_vec + float(np.sum((u * comp) ** 2))))
        force = np.abs(Jall.T) @ u
    else:
        resid_vec = obj.grad
        r = float(np.linalg.norm(obj.grad))
        force = np.zeros(d)
    residual = _ratio(r, ref)
    if fs is not None and box is None:  # another convex set: the projected step of the residual
        t = s / max(ref, 1e-300)
        r = float(np.linalg.norm(x - np.asarray(fs.project(x - t * resid_vec), dtype=np.float64))) / t
        residual = _ratio(r, ref)
    else:  # and coordinate by coordinate (variables of different scales)
        residual = max(residual, _coordinate_ratio(obj, x, D, resid_vec, force, tol, box))
    n_active = len(rows) + hx.shape[0]
    base = {"residual": residual, "scale": ref, "max_violation": viol, "n_active": n_active, "cap_hit": cap_hit}
    capped = f"; {n_active} nearly active used, the cap active_cap={cap} bound" if cap_hit else ""
    if viol is not None and viol > feas_tol:
        return {**base, "passed": False, "descent": None,
                "message": f"not certified: infeasible (max violation {viol:.3g} > {feas_tol:.3g}){capped}"}  # fmt: skip
    if not residual <= tol:
        return {**base, "passed": False, "descent": None,
                "message": f"not certified: KKT residual {residual:.3g} > tol {tol:.3g}{capped}"}  # fmt: skip
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
            "message": f"certified: KKT residual {residual:.3g} <= tol {tol:.3g}{capped}"}  # fmt: skip


def _probe(
    ev: _Evals, x: Array, s: float, obj: _Objective, ref: float, J: Array, ids: list[int], g_act: Array,
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


def _equalities_at(ev: _Evals, x: Array, D: _Differences) -> tuple[Array, Array]:
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


# ---------------------------------------------------------------------------------------------- minimax
def _minimax(ev: _Evals, x: Array, outputs: Mapping[str, Any] | None, tol: float) -> dict[str, Any]:
    oracle = ev.oracle
    y_raw = None if outputs is None else outputs.get("y")
    y = np.array(oracle.y0 if y_raw is None else y_raw, dtype=np.float64).reshape(-1)
    if y.shape != (oracle.dim_y,):
        raise InvalidInputError(f"certify: y must have shape ({oracle.dim_y},), got {y.shape}")
    d, dy = x.shape[0], y.shape[0]
    Dx = _difference_points(x, _bounds(oracle.feasible_set, d))
    Dy = _difference_points(y, _bounds(oracle.y_set, dy))
    X = np.vstack([x[None, :], Dx.points(0, d), np.repeat(x[None, :], 2 * dy, axis=0)])
    Y = np.vstack([np.repeat(y[None, :], 1 + 2 * d, axis=0), Dy.points(0, dy)])
    V = ev.minimax(X, Y)  # (1 + 2d + 2dy, n): one call
    v0 = V[0]
    Gx, Hx, Nx = _derivatives(v0, V[1 : d + 1], V[d + 1 : 2 * d + 1], Dx.a, Dx.b)
    Gy, Hy, Ny = _derivatives(v0, V[2 * d + 1 : 2 * d + 1 + dy], V[2 * d + 1 + dy :], Dy.a, Dy.b)
    sx, sy = max(1.0, float(np.abs(x).max())), max(1.0, float(np.abs(y).max()))

    def block(G: Array, H: Array, N: Array, sc: float) -> tuple[Array, float]:
        g, h, hn = G.mean(axis=1), H.mean(axis=1), N.mean(axis=1)
        h = np.where(np.abs(h) > hn, h, 0.0)
        comp = float(np.sqrt(np.einsum("ij,ij->j", G, G)).mean()) if G.shape[1] > 1 else 0.0
        return g, max(float(np.linalg.norm(g)), sc * float(np.abs(h).max(initial=0.0)), comp)

    gx, ref_x = block(Gx, Hx, Nx, sx)
    gy, ref_y = block(Gy, Hy, Ny, sy)
    rx = _mapping(oracle.feasible_set, x, gx, sx, ref_x)
    ry = _mapping(oracle.y_set, y, -gy, sy, ref_y)
    return _residual_verdict("minimax", {"x": _ratio(rx, ref_x), "y": _ratio(ry, ref_y)}, tol, ref_x)


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


def _mapping(fs: Any, z: Array, g: Array, s: float, ref: float) -> float:
    """``|z - P(z - t g)| / t`` with ``t = s / ref`` (``|g|`` without a set)."""
    if fs is None:
        return float(np.linalg.norm(g))
    t = s / max(ref, 1e-300)
    return float(np.linalg.norm(z - np.asarray(fs.project(z - t * g), dtype=np.float64))) / t


# ---------------------------------------------------------------------------------------------- composite
def _composite(ev: _Evals, x: Array, outputs: Mapping[str, Any] | None, tol: float) -> dict[str, Any]:
    oracle = ev.oracle
    A, Bs, c = np.asarray(oracle.A), [np.asarray(b) for b in oracle.B], np.asarray(oracle.c)
    out = dict(outputs or {})
    ys: list[Array] = []
    for j, Bj in enumerate(Bs):
        yj = out.get(f"y{j}")
        if yj is None:
            if len(Bs) == 1 and Bj.shape[0] == Bj.shape[1]:
                yj = np.linalg.solve(Bj, c - A @ x)  # the one block the coupling determines
            else:
                raise InvalidInputError(
                    "certify: a composite point needs its blocks y0, y1, ... (the run's outputs); they "
                    "cannot be recovered from x for this coupling"
                )
        ys.append(np.asarray(yj, dtype=np.float64).reshape(-1))
    d = x.shape[0]
    s = max(1.0, float(np.abs(x).max()))
    obj = _objective_at(ev, x, _difference_points(x, _bounds(oracle.feasible_set, d)))
    lam_raw = out.get("lam")
    if lam_raw is None:
        lam, *_ = np.linalg.lstsq(A.T, obj.grad, rcond=None)
    else:
        lam = np.asarray(lam_raw, dtype=np.float64).reshape(-1)
    rx_vec = obj.grad - A.T @ lam
    ref_x = max(_reference(obj, s), float(np.linalg.norm(A.T @ lam)))
    ry = math.sqrt(sum(float(psi.subdifferential_distance(v, b.T @ lam)) ** 2
                       for psi, v, b in zip(oracle.penalties, ys, Bs)))  # fmt: skip
    ref_y = math.sqrt(sum(float(np.sum((b.T @ lam) ** 2)) for b in Bs))
    By = sum((b @ v for b, v in zip(Bs, ys)), np.zeros_like(c))
    rc = float(np.linalg.norm(A @ x + By - c))
    ref_c = max(float(np.linalg.norm(A @ x)), float(np.linalg.norm(By)), float(np.linalg.norm(c)))
    parts = {"x": _ratio(float(np.linalg.norm(rx_vec)), ref_x), "y": _ratio(ry, ref_y), "coupling": _ratio(rc, ref_c)}
    return _residual_verdict("ADMM", parts, tol, ref_x)
