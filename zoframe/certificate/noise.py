"""The noise of the values at the certified point, and the difference steps and error bounds it implies.

A black box's values carry noise (a simulation, a measurement) or at least rounding. A certificate
that ignores it is fooled: central differences at a tiny step turn noise ``sigma`` into gradient
errors ``sigma / h`` and curvature errors ``sigma / h^2`` that look like a large reference scale, and
a point far from stationary passes. Here:

* :func:`objective_noise` estimates the noise ``sigma_f`` of the objective (the mean of the
  components) and of each component at the point (Moré & Wild's ECNoise, :func:`zoframe.noise.estimate_noise`,
  on ``9`` points of one line through the point; the line's direction is a function of the point,
  so the certificate stays deterministic), or takes the level the user states (``noise=``);
* :func:`noise_step` sizes the central-difference step to it: ``h_k = max(eps^(1/4),
  (sigma_f / M)^(1/3)) c_k`` (``M`` the values' magnitude, ``c_k`` the coordinate's scale), which
  balances a noise error ``sigma / h`` against a truncation error ``h^2 |f'''|``, and is the step of
  noise-free values (``eps^(1/4) c_k``) when the noise is at rounding;
* the measures add an error bound to every residual and take a lower bound of every reference
  (:mod:`zoframe.certificate.gradient`, :mod:`zoframe.certificate.kkt`), so that a point passes only
  if the residual plus its error is below the tolerance; when the error alone is above it, the
  certificate says that the noise limits what it can tell (``Certificate.noise_limited``, with the
  smallest tolerance the values support).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
import hashlib
import math
from typing import Any

import numpy as np

from zoframe.certificate._common import _EPS, _STEP
from zoframe.errors import InvalidInputError
from zoframe.protocols import Array

__all__ = ["ROUNDING", "Noise", "NoiseSpec", "check_noise", "noise_step", "objective_noise", "values_noise"]

#: a level at most this many ``eps |f|`` is the rounding of the values (noise-free)
ROUNDING = 64.0
#: the largest difference step, relative to the coordinate's scale
MAX_STEP = 0.1


@dataclass(frozen=True)
class NoiseSpec:
    """A noise level the user states: ``level`` absolute (in the function's units) or ``relative`` (to ``|f(x)|``)."""

    level: float
    relative: bool = False

    def absolute(self, magnitude: float) -> float:
        return self.level * magnitude if self.relative else self.level


def check_noise(noise: Any, relative_noise: Any) -> NoiseSpec | None:
    """The stated noise of ``minimize`` / ``certify`` (``noise`` absolute, ``relative_noise`` relative; at most one)."""
    if noise is not None and relative_noise is not None:
        raise InvalidInputError("give the noise of the values as noise= (absolute) or relative_noise= (relative), not both")
    for name, v in (("noise", noise), ("relative_noise", relative_noise)):
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(float(v)) \
                or float(v) < 0:
            raise InvalidInputError(
                f"{name} must be a finite number >= 0 (the standard deviation of the values' noise, "
                f"{'in the function units' if name == 'noise' else 'relative to |f|'}), got {v!r}"
            )
        return NoiseSpec(float(v), relative=name == "relative_noise")
    return None


@dataclass(frozen=True)
class Noise:
    """The noise at the point: ``f`` (absolute, of the objective: the mean of the components), ``rounding``
    (only the rounding of the values was found: a noise-free black box), ``components`` (per component of a
    finite sum, or ``None``), ``source`` (``"estimated"``, ``"stated"``), ``text`` (the estimate in words) and
    ``evaluations`` (what estimating it cost)."""

    f: float
    rounding: bool
    components: Array | None
    source: str
    text: str
    evaluations: int


def _point_generator(x: Array) -> np.random.Generator:
    """A generator seeded by the point's bytes: the certificate of a point is a function of the point."""
    digest = hashlib.sha256(np.ascontiguousarray(x, dtype=np.float64).tobytes()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def values_noise(
    fun: Callable[[Array], Array], x: Array, magnitude: Array, scales: Array | None = None,
    box: tuple[Array, Array] | None = None,
) -> tuple[Array, int, str]:
    """``(levels per column, evaluations, words)`` of the batched function ``fun`` at ``x`` (ECNoise): each
    column's noise where ECNoise finds noise above the rounding of the values (at least ``ROUNDING eps |value|``,
    ``magnitude``: the columns' sizes at ``x``), 0 where it finds the rounding alone or no level at all. ``scales``: the variables' scales at
    ``x`` (the line is drawn in the variables ``z = x / scales``, so that its steps are relative to each
    variable's own size, not to a floor of 1). ``box``: the line moves only along the variables that have room
    inside it (at least 1e-3 of their scale to either bound); where none has, a ray from ``x`` into the box; a
    point outside the box is not a value of the line (NaN: that attempt gives no level; clipped, it would put a
    kink in the table that ECNoise can read as noise)."""
    from zoframe.noise import estimate_noise

    c = point_scale_vector(x) if scales is None else np.asarray(scales, dtype=np.float64)
    free = np.arange(x.shape[0])
    inward = np.zeros(0)
    if box is not None:
        room = np.minimum(x - box[0], box[1] - x)
        free = np.flatnonzero(room >= 1e-3 * c)
        if not free.shape[0]:  # at (or next to) a vertex of the box: no line through x inside it. A ray from x
            # into the box instead (the same equally spaced points, shifted to start at x, each coordinate moving
            # away from its nearer bound): the noise at a vertex is measured, not assumed to be the rounding
            free = np.arange(x.shape[0])
            inward = np.where(x - box[0] <= box[1] - x, 1.0, -1.0)

    def in_z(Z: Array) -> Array:
        P = np.repeat(x[None, :], Z.shape[0], axis=0)
        if inward.shape[0]:  # the ray: x + c (s |Z_i - Z_0|), i = 0..p-1 (Z_i - Z_0 = i h u: one sign per column)
            P = P + c[None, :] * inward[None, :] * np.abs(Z - Z[:1])
        else:
            P[:, free] = Z * c[free]
        if box is None:
            out: Array = fun(P)
            return out
        Q = np.clip(P, box[0], box[1])
        vals = np.array(fun(Q), dtype=np.float64)
        vals[(Q != P).any(axis=1)] = np.nan  # a point the box moved is off the line (a kink read as noise): no level
        return vals

    est = estimate_noise(in_z, x[free] / c[free], _point_generator(x), points=9)
    rounding = ROUNDING * _EPS * np.abs(magnitude)
    real = np.array([st == "ok" for st in est.column_status], dtype=bool) & np.isfinite(est.per_column)
    real &= np.where(np.isfinite(est.per_column), est.per_column, 0.0) > rounding  # a few eps |f|: rounding
    # a column whose level is the rounding of its values (or could not be estimated) gets no noise beyond it: 0 here,
    # the measures' own rounding floors apply
    lv = np.where(real, est.per_column, 0.0)
    return np.where(real, np.maximum(lv, rounding), 0.0), int(est.evaluations), str(est)


def point_scale_vector(x: Array) -> Array:
    """Each variable's scale at ``x``: ``max(|x_k|, 1e-2 m)``, ``m`` the median of ``|x|`` (1 at the origin)."""
    a = np.abs(np.asarray(x, dtype=np.float64))
    m = float(np.median(a)) if a.shape[0] else 0.0
    if not m > 0:
        nz = a[a > 0]
        m = float(np.median(nz)) if nz.shape[0] else 1.0
    return np.maximum(np.maximum(a, 1e-2 * m), 1e-300)


def objective_noise(
    objective: Callable[[Array], Array], x: Array, v0: Array, stated: NoiseSpec | None, scales: Array | None = None,
    box: tuple[Array, Array] | None = None,
) -> Noise:
    """The noise of the objective at ``x``: ``objective(X) -> (k, n)`` the components, ``v0`` their values at ``x``.

    Stated: the user's level (absolute, or relative to ``|f(x)|``), the same for every component. Else ECNoise on
    the ``n`` components and their mean (one call of ``9`` points per attempt)."""
    n = v0.shape[0]
    f0 = float(v0.mean())
    rounding_f = ROUNDING * _EPS * float(np.abs(v0).mean())
    if stated is not None:
        sigma = stated.absolute(abs(f0))
        comp = np.full(n, stated.absolute(abs(f0)) if n > 1 else sigma)
        return Noise(max(sigma, rounding_f), sigma <= rounding_f, comp if n > 1 else None, "stated",
                     f"noise level {sigma:.3g} (stated)", 0)  # fmt: skip

    def columns(X: Array) -> Array:
        V = objective(X)
        return np.hstack([V, V.mean(axis=1, keepdims=True)]) if n > 1 else V

    mag = np.concatenate([np.abs(v0), [abs(f0)]]) if n > 1 else np.abs(v0)
    levels, spent, text = values_noise(columns, x, mag, scales, box)
    sigma = float(levels[-1])  # 0: the rounding alone
    return Noise(max(sigma, rounding_f), sigma <= 0.0, levels[:-1] if n > 1 else None, "estimated", text, spent)


def noise_step(noise: Noise, magnitude: float) -> float:
    """The central-difference step relative to a coordinate's scale: ``max(eps^(1/4), (sigma / M)^(1/3))``, at
    most :data:`MAX_STEP` (``M``: the values' magnitude)."""
    if noise.rounding or not magnitude > 0:
        return _STEP
    ratio: float = float(noise.f) / float(magnitude)
    root: float = math.pow(ratio, 1.0 / 3.0)
    return float(min(MAX_STEP, max(_STEP, root)))
