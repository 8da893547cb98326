"""Deterministic refinement from function values: a quasi-Newton method on difference gradients.

The stochastic phase of a solver gets close cheaply; this engine gets the digits. It minimises a
smooth function ``f`` that it sees only through batched values (:class:`Smooth`), over a box, another
closed convex set with a projection, or all of ``R^d`` (:class:`Region`), and stops on tests stated
in the problem's own units. The refinement phases of the finite-sum and minimax families run it (on
``f``, and on ``Phi(x) = max_y F(x, y)`` with the inner maximum solved by the same engine), and the
certificate uses it for the inner maximum of a minimax problem.

One iteration (:func:`qn_step`, the lines ``# Q.k``)::

    Q1  the difference gradient at x: central differences at the start (2 d points, which also give the
        diagonal curvature), then forward differences (d points) while the gradient of the variables that no
        bound holds is large next to their error, central ones for good after that; the points inside the
        box, one batched call (Smooth.differences); a diagonal curvature whose second difference is within a few
        times the noise's error is not kept (nan: not measured); at the start, the coordinates left without one are
        measured again with steps 100 times longer (at most 3 rounds, at most 100 s_i, one batched call each)
    Q2  the direction: box or no set: the quasi-Newton step -B_FF^{-1} g_F on the free variables (those
        not held at a bound by the gradient); another convex set: the spectral projected gradient
        (Birgin, Martinez & Raydan 2000) P(x - lam g) - x with the Barzilai-Borwein length lam
    Q3  a backtracking line search along the projected path P(x + a p) (a = 1, 1/4, ...): Armijo's test
        relaxed by twice the noise of f (Berahas, Byrd & Nocedal 2019), at most 12 trial points
    Q4  a damped BFGS update of B (Powell 1978) in scaled variables z = x / s
    Q5  the tests (:func:`_tested`): CONVERGED when the projected gradient |lim_{t->0} (x - P(x - t g)) / t|_inf <= gtol
        (the user's tolerance in the problem's units), when a Newton step along each coordinate
        |pg_i| / |H_ii| <= xstep (in the variables' units), or when each of its entries is <= rtol s_i |H_ii|
        (the gradient that a Newton step of relative length rtol along that coordinate removes; a floor
        of 1e-6 max_j s_j |H_jj| for flat coordinates); NOISE_LIMITED when the line search
        finds no decrease and the projected gradient is within a few times its own error (the noise of f
        divided by the difference step); STALLED when it finds none with a resolvable gradient after
        two resets of B.

Difference steps are sized to the noise of ``f`` (absolute ``noise``: given, or the rounding level
``eps |f|`` of the values by default) and to the curvature the central differences measure (Gill,
Murray, Saunders & Wright 1983): forward ``h_i = 2 sqrt(noise / |H_ii|)``, central
``h_i = (3 noise s_i / |H_ii|)^(1/3)``, each clipped to ``[1e-3 eps^(1/2), 0.1] s_i`` (``s_i`` the variable's
scale: its size at the start, or the box's width where narrower, grown to the iterate's size as it moves
(never shrunk); never a floor of 1, so that a variable of size 1e-3 gets steps of its own size).

Cost of an iteration: ``d`` (forward) or ``2 d`` (central) points for the gradient plus one per trial
point (usually one), each point costing what :attr:`Smooth.point_cost` says in evaluations.
"""

from __future__ import annotations

from collections.abc import Callable
import dataclasses
from dataclasses import dataclass
import math
from typing import Any, Protocol

import numpy as np

from zoframe.errors import InvalidParameterError, NonFiniteValueError
from zoframe.protocols import Array

__all__ = [
    "BUDGET",
    "CONVERGED",
    "NOISE_LIMITED",
    "RUNNING",
    "STALLED",
    "FullSum",
    "QNState",
    "RefineSettings",
    "Region",
    "Smooth",
    "describe",
    "minimize_smooth",
    "qn_start",
    "qn_step",
    "variable_scales",
]

_EPS = float(np.finfo(np.float64).eps)
#: the engine's status codes (kept as an int in the state)
RUNNING, CONVERGED, NOISE_LIMITED, STALLED, BUDGET = 0, 1, 2, 3, 4
_WORDS = {RUNNING: "running", CONVERGED: "converged", NOISE_LIMITED: "noise-limited", STALLED: "stalled", BUDGET: "budget"}
#: trial points per line search
_TRIALS = 12
#: failed line searches (each followed by a reset of B) before the engine gives up
_RESETS = 2


class Smooth(Protocol):
    """The function a refinement minimises, seen through counted, batched values.

    ``values(X, aux)``: ``f`` at the rows of ``X`` ``(k, d)`` and the auxiliary array that goes with the
    LAST row (the inner maximiser ``y*`` of ``Phi``; an empty array when there is none). ``differences(P,
    aux)``: the values whose differences around the current point give the gradient (``f`` itself; for
    ``Phi``, ``F(., y*)`` at the fixed inner maximiser, by Danskin's theorem). ``point_cost``: evaluations
    of one point (``n`` for a finite sum).
    """

    @property
    def point_cost(self) -> int:
        """Evaluations of one point."""
        ...

    def values(self, X: Array, aux: Array) -> tuple[Array, Array]: ...

    def differences(self, P: Array, aux: Array) -> Array: ...


@dataclass(frozen=True)
class Region:
    """Where the variables live: a box (``lower`` / ``upper``, entries may be infinite), another closed
    convex set with a Euclidean ``project``, or all of ``R^d`` (everything ``None``)."""

    lower: Array | None = None
    upper: Array | None = None
    project: Callable[[Array], Array] | None = None

    @classmethod
    def of(cls, fs: Any, d: int) -> Region:
        """The region of a :class:`~zoframe.protocols.ConvexSet` (``None``: all of ``R^d``)."""
        if fs is None:
            return cls()
        lo, hi = getattr(fs, "lower", None), getattr(fs, "upper", None)
        if lo is not None and hi is not None:
            return cls(
                np.broadcast_to(np.asarray(lo, dtype=np.float64), (d,)).copy(),
                np.broadcast_to(np.asarray(hi, dtype=np.float64), (d,)).copy(),
            )
        return cls(project=fs.project)

    @property
    def box(self) -> bool:
        return self.lower is not None and self.upper is not None

    def clip(self, X: Array) -> Array:
        """The rows of ``X`` in the region (the box's clip, the set's projection)."""
        if self.box:
            return np.clip(X, self.lower, self.upper)
        if self.project is not None:
            return np.asarray(self.project(X), dtype=np.float64)
        return X


@dataclass(frozen=True)
class RefineSettings:
    """The tests of the refinement, in the problem's own units where they have units.

    ``gtol``: converged when the projected gradient ``|lim_{t->0} (x - P(x - t g)) / t|_inf <= gtol`` (``None``: only the
    relative test). ``xstep``: converged when a Newton step along each coordinate, ``|pg_i| / |H_ii|``, is at
    most ``xstep`` (in the variables' units; ``None``: no such test). ``rtol``: converged when each entry ``i`` is ``<= rtol * s_i |H_ii|`` (the gradient that
    a Newton step of relative length ``rtol`` along that coordinate removes). ``xtol``: a line search whose trial steps all fall
    below ``xtol s_i`` has found no decrease. ``noise``: the absolute noise of ``f`` (``None``: the
    rounding of its values, ``eps |f|``, or the estimate below). ``max_step``: the largest step relative to the
    variables' scales. ``estimate_noise``: without a stated ``noise``, estimate it at the start (ECNoise on one
    line of 9 points per attempt, :mod:`zoframe.noise`) instead of taking the values' rounding.
    """

    gtol: float | None = None
    xstep: float | None = None
    rtol: float = 1e-8
    xtol: float = 1e-13
    noise: float | None = None
    max_step: float = 10.0
    estimate_noise: bool = False

    def __post_init__(self) -> None:
        for name in ("rtol", "xtol", "max_step"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise InvalidParameterError(f"{name} must be a finite number > 0, got {v!r}")
        for name in ("gtol", "xstep", "noise"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise InvalidParameterError(f"{name} must be None or a finite number >= 0, got {v!r}")


@dataclass(frozen=True)
class QNState:
    """The engine between iterations.

    ``x``, ``value``: the point and ``f(x)``; ``g``: the difference gradient there; ``B``: the
    quasi-Newton matrix in scaled variables ``z = x / scale`` (``(0, 0)`` for a general convex set);
    ``curv``: the diagonal curvature ``H_ii`` from the last central differences (``nan`` before);
    ``h``: the difference steps; ``central``: which differences gave ``g``; ``noise``: the absolute
    noise of ``f``; ``aux``: what goes with ``x`` (the inner maximiser of ``Phi``); ``lam``: the spectral
    step (general sets); ``pg``: the projected gradient's inf-norm; ``ref``: the relative test's
    reference; ``gerr``: the error of ``pg`` from the noise and the step; ``it``: iterations; ``points``:
    points evaluated; ``resets``: resets of ``B`` since the last accepted step; ``status``, ``message``.
    """

    x: Array
    value: float
    g: Array
    B: Array
    curv: Array
    h: Array
    scale: Array
    central: bool
    noise: float
    aux: Array
    lam: float
    pg: float
    ref: float
    gerr: float
    it: int
    points: int
    resets: int
    status: int
    message: str

    @property
    def done(self) -> bool:
        return self.status != RUNNING


# ---------------------------------------------------------------------------------------------- scales, steps
def variable_scales(x: Array, region: Region) -> Array:
    """Each variable's scale: ``|x_i|``, the box's width where that is finite and narrower, and for a variable at
    0 the typical size of the others (their median, 1 when all are 0). No floor of 1: a variable of size
    1e-3 gets steps of its own size."""
    a = np.abs(np.asarray(x, dtype=np.float64))
    nz = a[a > 0]
    typical = float(np.median(nz)) if nz.shape[0] else 1.0
    s = np.where(a > 0, a, typical)
    if region.box:
        width = np.asarray(region.upper) - np.asarray(region.lower)
        s = np.where(np.isfinite(width) & (width > 0), np.minimum(s, width), s)
    return np.maximum(s, 1e-300)


def _steps(central: bool, noise: float, curv: Array, scale: Array) -> Array:
    """Difference steps sized to the noise and the curvature (module docstring)."""
    c = np.abs(curv)
    known = np.isfinite(c) & (c > 0)
    safe = np.where(known, c, 1.0)
    if central:
        h = np.where(known, np.cbrt(3.0 * noise * scale / safe), np.cbrt(max(noise, _EPS)) * scale)
    else:
        h = np.where(known, 2.0 * np.sqrt(noise / safe), math.sqrt(max(noise, _EPS)) * scale)
    lo, hi = 1e-3 * math.sqrt(_EPS) * scale, 0.1 * scale
    return np.asarray(np.clip(h, lo, hi), dtype=np.float64)


# ---------------------------------------------------------------------------------------------- gradient
def _gradient(
    fn: Smooth, x: Array, fx: float, aux: Array, h: Array, central: bool, region: Region, noise: float = 0.0
) -> tuple[Array, Array, int]:
    """``(g, curvature or nan, points)``: forward or central differences, one batched call, points inside the
    box (one-sided where a bound is closer than the step). Q1. A curvature whose second difference does not stand
    above the noise of the values (:func:`_resolved`) is ``nan``: not measured."""
    d = x.shape[0]
    up = np.full(d, np.inf) if not region.box else np.asarray(region.upper) - x
    down = np.full(d, np.inf) if not region.box else x - np.asarray(region.lower)
    if not central:
        fwd = up >= h  # backward where the upper bound is closer than the step
        step = np.where(fwd, h, -np.minimum(h, down))
        step = np.where(step == 0.0, h, step)
        P = np.repeat(x[None, :], d, axis=0)
        P[np.arange(d), np.arange(d)] += step
        P = region.clip(P) if region.box else P
        vals = fn.differences(P, aux)
        g = (vals - fx) / step
        return np.asarray(g, dtype=np.float64), np.full(d, np.nan), d
    a = np.minimum(h, up)  # forward and backward lengths inside the box
    b = np.minimum(h, down)
    a = np.where(a > 0, a, 0.0)
    b = np.where(b > 0, b, 0.0)
    P = np.repeat(x[None, :], 2 * d, axis=0)
    idx = np.arange(d)
    P[idx, idx] += a
    P[d + idx, idx] -= b
    vals = fn.differences(P, aux)
    vp, vm = vals[:d], vals[d:]
    span = a + b
    g = np.where(span > 0, (vp - vm) / np.where(span > 0, span, 1.0), 0.0)
    both = (a > 0) & (b > 0)
    curv = np.where(both, 2.0 * (b * vp + a * vm - span * fx) / np.where(both, a * b * span, 1.0), np.nan)
    return np.asarray(g, dtype=np.float64), _resolved(curv, a, b, noise), 2 * d


#: a second difference is a measurement when it is at least this many times its error from the noise
_RESOLVE = 4.0
#: rounds of the start's curvature probe (each one batched call on the unresolved coordinates) and its growth
_PROBES, _PROBE_GROWTH = 3, 100.0


def _resolved(curv: Array, a: Array, b: Array, noise: float) -> Array:
    """``curv`` where its second difference stands above the noise, ``nan`` elsewhere. Values off by up to ``noise``
    each put an error of at most ``4 noise / (a b)`` into the curvature of steps ``a``, ``b``; below a few times that
    the number is the noise's and not the function's (a step that suits the gradient, ``noise^(1/3)`` of the scale,
    is too short for the curvature of a coordinate whose scale is far too small: its noise curvature, many orders of
    magnitude too large, made the model's diagonal hold that coordinate still)."""
    if not noise > 0:
        return np.asarray(curv, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        err = 4.0 * noise / (a * b)
        ok = np.isfinite(curv) & (np.abs(curv) > _RESOLVE * err)
    return np.asarray(np.where(ok, curv, np.nan), dtype=np.float64)


def _probe(
    fn: Smooth, x: Array, fx: float, aux: Array, h: Array, curv: Array, scale: Array, region: Region, noise: float
) -> tuple[Array, int]:
    """The curvature of the coordinates that the start's central differences did not resolve, measured with steps
    :data:`_PROBE_GROWTH` times longer per round (at most :data:`_PROBES` rounds, at most ``100 s_i``, inside the
    box), one batched call of ``2 k`` points per round for the ``k`` coordinates still unresolved; ``(curv,
    points)``. Only the curvature (the model's diagonal, the steps, the scales' Newton growth) comes from the long
    steps; the gradient stays the short steps' one."""
    d = x.shape[0]
    up = np.full(d, np.inf) if not region.box else np.asarray(region.upper) - x
    down = np.full(d, np.inf) if not region.box else x - np.asarray(region.lower)
    curv = curv.copy()
    hp = h.copy()
    points = 0
    for _ in range(_PROBES):
        longer = np.minimum(hp * _PROBE_GROWTH, 100.0 * scale)
        idx = np.flatnonzero(~np.isfinite(curv) & (longer > hp) & (np.minimum(up, down) > hp))
        if not idx.shape[0]:
            break
        hp = np.where(np.isin(np.arange(d), idx), longer, hp)
        a, b = np.minimum(hp[idx], up[idx]), np.minimum(hp[idx], down[idx])
        k = idx.shape[0]
        P = np.repeat(x[None, :], 2 * k, axis=0)
        P[np.arange(k), idx] += a
        P[k + np.arange(k), idx] -= b
        try:
            vals = fn.differences(P, aux)
        except NonFiniteValueError:  # the longer steps left the region where f is finite: the curvature stays unknown
            return curv, points + 2 * k
        points += 2 * k
        span = a + b
        with np.errstate(invalid="ignore", over="ignore"):
            c = 2.0 * (b * vals[:k] + a * vals[k:] - span * fx) / (a * b * span)
        curv[idx] = _resolved(np.where(np.isfinite(c), c, np.nan), a, b, noise)
    return curv, points


def _projected(x: Array, g: Array, region: Region, scale: Array) -> Array:
    """The projected gradient in the units of ``g``: the limit ``t -> 0+`` of ``(x - P(x - t g)) / t``.

    A box: ``g_i``, or 0 where ``x_i`` sits at a bound that ``-g_i`` points out of. Another convex set:
    ``(x - P(x - t g)) / t`` with ``t = 1e-3 min_i s_i / |g|_inf`` (a step of a thousandth of the smallest scale).
    No set: ``g`` itself. (``x - P(x - g)`` itself is at most the set's diameter: a small set and a large gradient
    would pass for a small gradient.)"""
    if region.box:
        lo, hi = np.asarray(region.lower), np.asarray(region.upper)
        held = ((x <= lo) & (g > 0)) | ((x >= hi) & (g < 0))
        out: Array = np.where(held, 0.0, g)
        return out
    if region.project is not None:
        gmax = float(np.abs(g).max(initial=0.0))
        if not (gmax > 0 and math.isfinite(gmax)):
            return g
        t = 1e-3 * float(np.min(scale)) / gmax
        mapped: Array = (x - region.clip((x - t * g)[None, :])[0]) / t
        return mapped
    return g


def _error(central: bool, noise: float, h: Array, curv: Array, scale: Array) -> Array:
    """The error of each difference-gradient entry: rounding / noise over the step plus truncation."""
    c = np.where(np.isfinite(curv), np.abs(curv), 0.0)
    if central:  # values off by up to about 2 noise each: |e+ - e-| / (2 h) <= 2 noise / h, plus h^2 |f'''| / 6
        return np.asarray(2.0 * noise / h + h * h * c / np.maximum(scale, 1e-300) / 6.0, dtype=np.float64)
    return np.asarray(4.0 * noise / h + 0.5 * h * c, dtype=np.float64)


# ---------------------------------------------------------------------------------------------- the engine
def qn_start(
    fn: Smooth, x0: Array, region: Region, settings: RefineSettings, aux: Array | None = None,
    value: float | None = None, scale: Array | None = None,
) -> QNState:  # fmt: skip
    """The first state at ``x0`` (moved into the region): ``f``, central differences (curvature for ``B`` and
    the steps), the tests. ``aux``: the auxiliary array of ``x0`` if known (warm start of an inner solve)."""
    x = region.clip(np.asarray(x0, dtype=np.float64)[None, :])[0].copy()
    aux0 = np.zeros(0) if aux is None else np.asarray(aux, dtype=np.float64)
    points = 0
    if value is None:
        fv, aux0 = fn.values(x[None, :], aux0)
        value = float(fv[0])
        points += 1
    if not math.isfinite(value):
        raise NonFiniteValueError(f"the refinement starts at a point where f = {value}")
    s = variable_scales(x, region) if scale is None else np.asarray(scale, dtype=np.float64)
    if settings.noise is not None:
        noise = float(settings.noise)
    elif settings.estimate_noise:  # ECNoise on the values whose differences give the gradient (one line)
        noise, spent = _line_noise(fn, x, aux0, s, region)
        points += spent
    else:
        noise = _EPS * max(abs(value), 1e-300)
    noise = max(noise, _EPS * abs(value))
    h = _steps(True, noise, np.full(x.shape[0], np.nan), s)
    g, curv, k = _gradient(fn, x, value, aux0, h, True, region, noise)
    points += k
    curv, k = _probe(fn, x, value, aux0, h, curv, s, region, noise)
    points += k
    d = x.shape[0]
    if region.project is not None and not region.box:
        B = np.zeros((0, 0))
    else:
        diag = np.where(np.isfinite(curv) & (curv > 0), curv, np.nan) * s * s
        fill = float(np.nanmedian(diag)) if np.isfinite(diag).any() else max(float(np.linalg.norm(g * s)), 1e-300)
        B = np.diag(np.where(np.isfinite(diag), diag, fill))
    st = QNState(
        x=x, value=value, g=g, B=B, curv=curv, h=h, scale=s, central=True, noise=noise, aux=aux0, lam=math.nan,
        pg=math.inf, ref=math.nan, gerr=math.nan, it=0, points=points, resets=0, status=RUNNING, message="",
    )  # fmt: skip
    del d
    return _tested(st, region, settings)


def _line_noise(fn: Smooth, x: Array, aux: Array, scale: Array, region: Region) -> tuple[float, int]:
    """The noise of ``fn.differences`` at ``x`` by ECNoise (:func:`zoframe.noise.estimate_noise`, one batched call of
    9 points per attempt) on a line drawn in the scaled variables ``x / scale`` (its direction a function of the
    point: deterministic); ``(level, points)``, the level 0 when only the rounding of the values shows."""
    import hashlib

    from zoframe.noise import estimate_noise

    seed = int.from_bytes(hashlib.sha256(np.ascontiguousarray(x).tobytes()).digest()[:8], "little")
    free = np.arange(x.shape[0])
    if region.box:  # along the variables with room inside the box (1e-3 of their scale), every point inside it
        room = np.minimum(x - np.asarray(region.lower), np.asarray(region.upper) - x)
        free = np.flatnonzero(room >= 1e-3 * scale)
        if not free.shape[0]:
            free = np.flatnonzero(room > 0)
        if not free.shape[0]:
            return 0.0, 0

    def line(Z: Array) -> Array:
        P = np.repeat(x[None, :], Z.shape[0], axis=0)
        P[:, free] = Z * scale[free]
        out: Array = fn.differences(region.clip(P), aux)[:, None]
        return out

    est = estimate_noise(line, x[free] / scale[free], np.random.default_rng(seed))
    level = float(est.absolute) if est.status == "ok" and math.isfinite(est.absolute) else 0.0
    return level, int(est.evaluations)


def _tested(st: QNState, region: Region, settings: RefineSettings) -> QNState:
    """The tests of Q5 at the state's point: the projected gradient, its reference and its error; CONVERGED
    when a test passes."""
    pg_vec = np.abs(_projected(st.x, st.g, region, st.scale))
    pg = float(pg_vec.max(initial=0.0))
    c = np.where(np.isfinite(st.curv), np.abs(st.curv), np.nan)
    if np.isfinite(c).any():
        per = st.scale * np.where(np.isfinite(c), c, np.nanmax(c))
    elif st.B.shape[0]:
        per = np.abs(np.diag(st.B)) / st.scale
    else:
        per = np.full(st.x.shape[0], float(np.abs(st.g).max(initial=0.0)))
    ref = float(per.max(initial=0.0))
    # each coordinate against its own curvature times scale (a floor of 1e-6 of the largest: a flat coordinate is
    # tested against the others' scale, not against nothing)
    per = np.maximum(per, 1e-6 * ref)
    ratio = float(np.max(np.where(pg_vec > 0, pg_vec / np.where(per > 0, per, 1.0), 0.0), initial=0.0)) if ref > 0 else math.inf
    err = float(np.max(_error(st.central, st.noise, st.h, st.curv, st.scale), initial=0.0))
    st = dataclasses.replace(st, pg=pg, ref=ref, gerr=err)
    if settings.gtol is not None and pg <= settings.gtol:
        return dataclasses.replace(st, status=CONVERGED, message=f"projected gradient {pg:.3g} <= gtol = {settings.gtol:g}")
    if settings.xstep is not None and ref > 0:
        newton = float(np.max(pg_vec * st.scale / np.where(per > 0, per, 1.0), initial=0.0))
        if newton <= settings.xstep:
            return dataclasses.replace(
                st, status=CONVERGED,
                message=f"projected gradient {pg:.3g}: a Newton step along each coordinate is at most {newton:.3g} "
                        f"<= xstep = {settings.xstep:g}",
            )  # fmt: skip
    if ratio <= settings.rtol:
        return dataclasses.replace(
            st, status=CONVERGED,
            message=f"projected gradient {pg:.3g}: each entry <= rtol = {settings.rtol:g} times its coordinate's "
                    f"curvature times scale (largest {ref:.3g})",
        )  # fmt: skip
    return st


def qn_step(fn: Smooth, st: QNState, region: Region, settings: RefineSettings) -> QNState:
    """One iteration Q1-Q5 from a state whose gradient is known (module docstring)."""
    if st.done:
        return st
    x, g, s = st.x, st.g, st.scale
    general = region.project is not None and not region.box
    # Q2: the direction
    if general:
        lam = st.lam if math.isfinite(st.lam) and st.lam > 0 else 1.0 / max(st.ref, 1e-300) if st.ref > 0 else 1.0
        p = region.clip((x - lam * g)[None, :])[0] - x
        slope = float(g @ p)
    else:
        free = np.ones(x.shape[0], dtype=bool)
        if region.box:
            lo, hi = np.asarray(region.lower), np.asarray(region.upper)
            free = ~(((x <= lo) & (g > 0)) | ((x >= hi) & (g < 0)))
        p = np.zeros_like(x)
        if free.any():
            Bf = st.B[np.ix_(free, free)]
            gz = (g * s)[free]
            try:
                L = np.linalg.cholesky(Bf)
                pz = -np.linalg.solve(L.T, np.linalg.solve(L, gz))
            except np.linalg.LinAlgError:
                pz = -gz / np.maximum(np.diag(Bf), 1e-300)
            p[free] = pz * s[free]
        # the step bound, relative to the variables' scales
        big = float(np.max(np.abs(p) / s, initial=0.0))
        if big > settings.max_step:
            p *= settings.max_step / big
        slope = float(g @ p)
        lam = st.lam
    if not (slope < 0.0 and math.isfinite(slope)):
        return _no_decrease(fn, st, region, settings, "the direction is not a descent direction", math.inf)
    pred = -0.5 * slope  # the model's decrease along the full step (quasi-Newton: 1/2 g^T B^-1 g)
    # Q3: the line search along the projected path
    a = 1.0
    points = st.points
    tol_noise = 2.0 * st.noise
    for _ in range(_TRIALS):
        trial = region.clip((x + a * p)[None, :])[0]
        step = trial - x
        if float(np.max(np.abs(step) / s, initial=0.0)) <= settings.xtol:
            break
        try:
            fv, aux = fn.values(trial[None, :], st.aux)
            f_new = float(fv[0])
        except NonFiniteValueError:
            f_new, aux = math.nan, st.aux
        points += 1
        if math.isfinite(f_new) and f_new <= st.value + 1e-4 * float(g @ step) + tol_noise and (
            f_new < st.value or float(g @ step) < -tol_noise
        ):  # Armijo, relaxed by the noise of f
            return _accept(fn, dataclasses.replace(st, points=points), trial, f_new, aux, lam, region, settings)
        a *= 0.25
    return _no_decrease(fn, dataclasses.replace(st, points=points), region, settings, "no decrease along the step", pred)


def _accept(
    fn: Smooth, st: QNState, x_new: Array, f_new: float, aux: Array, lam: float, region: Region, settings: RefineSettings
) -> QNState:
    """Q1 at the accepted point, Q4 (the BFGS update or the spectral length), Q5."""
    s_vec = x_new - st.x
    central = st.central
    if not central or st.it == 0:  # forward differences until the gradient is small next to their error (then
        # central for good); the start's central differences (which measure the curvature) commit to nothing
        hf = st.h if not central else _steps(False, st.noise, st.curv, st.scale)
        err = float(np.max(_error(False, st.noise, hf, st.curv, st.scale), initial=0.0))
        central = _free_gradient(st, region) <= 100.0 * err
    h = _steps(central, st.noise, st.curv, st.scale)
    g_new, curv, k = _gradient(fn, x_new, f_new, aux, h, central, region, st.noise)
    curv = np.where(np.isfinite(curv), curv, st.curv)
    y_vec = g_new - st.g
    B, lam_new = st.B, lam
    scale = _grown(st.scale, x_new, region)
    if B.shape[0]:
        if scale is not st.scale:  # the same model in the new scaled variables z = x / scale
            r = scale / st.scale
            B = B * r[:, None] * r[None, :]
        B = _bfgs(B, s_vec / scale, y_vec * scale)
    else:
        sy = float(s_vec @ y_vec)
        lam_new = float(s_vec @ s_vec) / sy if sy > 0 else lam * 4.0
        lam_new = min(max(lam_new, 1e-30), 1e30)
    new = dataclasses.replace(
        st, x=x_new, value=f_new, g=g_new, B=B, curv=curv, h=h, central=central, aux=aux, lam=lam_new,
        it=st.it + 1, points=st.points + k, resets=0, scale=scale,
    )  # fmt: skip
    return _tested(new, region, settings)


def _free_gradient(st: QNState, region: Region) -> float:
    """The largest gradient entry of the variables that a box does not hold (in ``f`` per unit of ``x``; the
    projected gradient of another convex set): the size that the forward differences' error is compared with.
    The projected gradient ``|x - P(x - g)|`` of a box is at most the distance to a bound, in units of ``x``: small
    for a narrow box whatever the gradient."""
    if region.box:
        lo, hi = np.asarray(region.lower), np.asarray(region.upper)
        held = ((st.x <= lo) & (st.g > 0)) | ((st.x >= hi) & (st.g < 0))
        return float(np.max(np.where(held, 0.0, np.abs(st.g)), initial=0.0))
    if region.project is not None:
        return st.pg
    return float(np.max(np.abs(st.g), initial=0.0))


def _grown(scale: Array, x: Array, region: Region) -> Array:
    """The variables' scales after a step to ``x``: ``max(scale_i, |x_i|)`` (at most the box's width), so that a
    start near 0 whose first scales are tiny does not bound every later step to ``max_step`` of them; ``scale``
    itself when no entry grows."""
    grown = np.maximum(scale, np.abs(x))
    if region.box:
        width = np.asarray(region.upper) - np.asarray(region.lower)
        grown = np.where(np.isfinite(width) & (width > 0), np.minimum(grown, np.maximum(width, scale)), grown)
    if not bool((grown > scale).any()):
        return scale
    return np.asarray(grown, dtype=np.float64)


def _bfgs(B: Array, s: Array, y: Array) -> Array:
    """Powell's damped BFGS update of ``B`` (Q4): ``y`` is blended with ``B s`` when ``s^T y < 0.2 s^T B s``."""
    Bs = B @ s
    sBs = float(s @ Bs)
    if not bool(np.isfinite(y).all()):  # a difference gradient with a value of +inf in it: no curvature pair
        return B
    sy = float(s @ y)
    if not (sBs > 0 and math.isfinite(sBs)):
        return B
    if sy < 0.2 * sBs:
        theta = 0.8 * sBs / (sBs - sy)
        y = theta * y + (1.0 - theta) * Bs
        sy = float(s @ y)
    if not sy > 0:
        return B
    out: Array = B - np.outer(Bs, Bs) / sBs + np.outer(y, y) / sy
    return 0.5 * (out + out.T)


def _no_decrease(fn: Smooth, st: QNState, region: Region, settings: RefineSettings, why: str, pred: float) -> QNState:
    """A line search found no decrease (``pred``: the decrease the model predicted for the full step). When the
    gradient is within a few times its error, or the predicted decrease within a few times the noise of f, the
    values cannot show a better point: the engine is NOISE_LIMITED (or converged at the rounding of exact
    values). Otherwise central differences and a reset of B, and after two resets STALLED."""
    resolvable = st.pg > 4.0 * st.gerr and pred > 4.0 * st.noise
    if not resolvable:
        rounding = st.noise <= 16.0 * _EPS * max(abs(st.value), 1e-300)
        floor = (
            f"projected gradient {st.pg:.3g} (its error {st.gerr:.3g}), predicted decrease {pred:.3g}, noise of f "
            f"{st.noise:.3g}"
        )  # fmt: skip
        if rounding:
            return dataclasses.replace(st, status=CONVERGED, message=f"{why}: {floor}, at the rounding of the values")
        return dataclasses.replace(st, status=NOISE_LIMITED, message=f"{why}: {floor}")
    if st.resets >= _RESETS:
        return dataclasses.replace(
            st, status=STALLED,
            message=f"{why} after {st.resets} resets of the model, with a projected gradient {st.pg:.3g} above its "
                    f"error {st.gerr:.3g}",
        )  # fmt: skip
    # central differences and a fresh model from the measured curvature
    h = _steps(True, st.noise, st.curv, st.scale)
    g, curv, k = _gradient(fn, st.x, st.value, st.aux, h, True, region, st.noise)
    curv = np.where(np.isfinite(curv), curv, st.curv)
    B = st.B
    if B.shape[0]:
        diag = np.where(np.isfinite(curv) & (curv > 0), curv, np.nan) * st.scale**2
        fill = float(np.nanmedian(diag)) if np.isfinite(diag).any() else 1.0
        B = np.diag(np.where(np.isfinite(diag), diag, fill))
    new = dataclasses.replace(
        st, g=g, curv=curv, h=h, central=True, B=B, lam=math.nan, points=st.points + k, resets=st.resets + 1
    )
    return _tested(new, region, settings)


def minimize_smooth(
    fn: Smooth, x0: Array, region: Region, settings: RefineSettings, *, max_points: int,
    aux: Array | None = None,
) -> QNState:  # fmt: skip
    """Run the engine from ``x0`` until it stops or has evaluated ``max_points`` points (then ``BUDGET``)."""
    st = qn_start(fn, x0, region, settings, aux)
    while not st.done:
        if st.points + 2 * st.x.shape[0] + _TRIALS > max_points:
            return dataclasses.replace(st, status=BUDGET, message=f"{max_points} points evaluated")
        st = qn_step(fn, st, region, settings)
    return st


def describe(st: QNState) -> str:
    """The engine's outcome in words."""
    return f"{_WORDS.get(st.status, '?')} after {st.it} iterations, {st.points} points: {st.message}"


@dataclass(frozen=True)
class FullSum:
    """:class:`Smooth` for the objective of a finite sum, all ``n`` components per point (``f`` = their mean),
    counted under ``purpose``."""

    oracle: Any
    purpose: str = "refine"

    @property
    def point_cost(self) -> int:
        return int(self.oracle.n)

    def values(self, X: Array, aux: Array) -> tuple[Array, Array]:
        out: Array = self.oracle.objective(X, None, purpose=self.purpose).mean(axis=1)
        return out, aux

    def differences(self, P: Array, aux: Array) -> Array:
        out: Array = self.oracle.objective(P, None, purpose=self.purpose).mean(axis=1)
        return out
