"""Estimate the computational noise of black-box functions from a few values (ECNoise).

Source: J. J. More and S. M. Wild, *Estimating computational noise*, SIAM J. Sci. Comput. 33(3),
1292-1314, 2011. A computed function ``f(x) = f_s(x) + eps(x)`` is a smooth part plus noise of
standard deviation ``sigma`` (rounding, truncated iterations, adaptive meshes, Monte Carlo). Along
a line ``t -> x + t u`` (``u`` a unit direction), at ``p`` equally spaced points ``t_i = (i - k) h``,
``i = 0..p-1`` (here ``p = 2 k + 1``, centred on ``x``):

* the difference table ``Delta^j f`` for ``j = 1..p-1`` (``Delta^{j+1} f_i = Delta^j f_{i+1} -
  Delta^j f_i``): the smooth part's differences shrink like ``h^j f^(j)``, the noise's do not;
* the noise estimates ``sigma_j = sqrt(gamma_j mean_i (Delta^j f_i)^2)`` with
  ``gamma_j = (j!)^2 / (2 j)!`` (paper eq. 2.7; for independent noise of variance ``sigma^2``,
  ``E (Delta^j eps)^2 = sigma^2 / gamma_j``);
* acceptance (paper section 4, the rules of its code ``ECnoise.m``): the first order ``j`` whose
  estimates ``sigma_j, sigma_{j+1}, sigma_{j+2}`` agree within a factor 4 and whose differences
  ``Delta^j f`` change sign (noise alternates; a smooth remainder does not) gives the level
  ``sigma_j``;
* "h too small": fewer than half of the first differences are nonzero (the values barely move,
  the noise is not resolved: enlarge ``h``); "h too large": no order is accepted (the smooth part
  still dominates the table: shrink ``h``).

One departure from the paper's code, on purpose: ``ECnoise.m`` also refuses a table whose values
spread by more than 10 % of their magnitude. That test refuses every function whose value is near 0
(a constraint at an active point, a residual at its minimum) whatever ``h``; a table whose smooth
part dominates fails the acceptance rules anyway, so it is not used here.

Everything is vectorised over the columns: values of shape ``(p, b)`` (``b`` functions at the same
``p`` points: an objective and its constraints, the components of a finite sum) give ``b``
estimates from one table, with a Python loop over the ``p - 1`` orders only.

A noise-free smooth function still has a noise level: the rounding of its evaluation, about
``eps |f|``. An accepted level at most :data:`ROUNDING_FACTOR` ``eps max|f|`` on the table is
reported as "no noise detected" (the level is still given: it is the resolution of the values).

Two entry points:

* :func:`noise_from_line` takes values a caller already has at equally spaced points of a line
  (a solver's line search, a coordinate sweep) and returns the levels and per-column flags;
* :func:`estimate_noise` evaluates a batched function on ``p`` points of a random line through
  ``x`` (ONE call per attempt: all the points as one matrix), and retries with ``100 h`` /
  ``h / 100`` when the paper's tests say ``h`` was too small / too large.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
import enum
import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from zoframe.errors import InvalidInputError, InvalidParameterError, ShapeError
from zoframe.protocols import Array

__all__ = [
    "CONFIRM_CEILING",
    "DEFAULT_H",
    "ROUNDING_FACTOR",
    "NoiseEstimate",
    "NoiseFlag",
    "estimate_noise",
    "gamma",
    "noise_from_line",
]

#: the default step, relative to the point's scale ``max(1, |x|_inf)`` (see :func:`estimate_noise`)
DEFAULT_H = 1e-6
#: an accepted level at most this many ``eps max|f|`` is rounding: "no noise detected"
ROUNDING_FACTOR = 16.0
#: the factor by which the estimates of three consecutive orders must agree (paper, section 4)
AGREEMENT = 4.0
#: the factor by which :func:`estimate_noise` changes ``h`` between attempts (paper, section 4)
H_FACTOR = 100.0
#: the largest step (relative to ``max(1, |x|_inf)``) at which a level at rounding is looked at again
CONFIRM_CEILING = 1e-2
_EPS = float(np.finfo(np.float64).eps)
_TINY = float(np.finfo(np.float64).tiny)


class NoiseFlag(enum.IntEnum):
    """The verdict on one column of a difference table (``int8`` codes in :func:`noise_from_line`)."""

    OK = 0  #: a level was accepted (paper: inform = 1)
    H_TOO_SMALL = 1  #: fewer than half of the first differences are nonzero (paper: inform = 2)
    H_TOO_LARGE = 2  #: no order passed the acceptance rules (paper: inform = 3)
    NO_NOISE = 3  #: accepted, and at the rounding of the values (``<= ROUNDING_FACTOR eps max|f|``)
    NONFINITE = 4  #: a value of the column is NaN or infinite: no estimate

    @property
    def text(self) -> str:
        """The words of the flag: ``"ok"``, ``"h too small"``, ``"h too large"``, ``"no noise detected"``, ``"non-finite values"``."""
        return _TEXT[self]

    @property
    def accepted(self) -> bool:
        """Whether the column has a level (``OK`` or ``NO_NOISE``)."""
        return self in (NoiseFlag.OK, NoiseFlag.NO_NOISE)


_TEXT = {
    NoiseFlag.OK: "ok",
    NoiseFlag.H_TOO_SMALL: "h too small",
    NoiseFlag.H_TOO_LARGE: "h too large",
    NoiseFlag.NO_NOISE: "no noise detected",
    NoiseFlag.NONFINITE: "non-finite values",
}


def gamma(j: int) -> float:
    """``gamma_j = (j!)^2 / (2 j)!`` (paper eq. 2.7): ``E (Delta^j eps)^2 = sigma^2 / gamma_j`` for white noise."""
    if isinstance(j, bool) or not isinstance(j, (int, np.integer)) or j < 1:
        raise InvalidParameterError(f"gamma: the order j must be a positive integer, got {j!r}")
    return float(math.factorial(int(j)) ** 2 / math.factorial(2 * int(j)))


def _table(values: Any) -> tuple[Array, bool]:
    """``values`` as a float64 ``(p, b)`` array (a copy) and whether it was one column (1-D)."""
    try:
        arr = np.array(values, dtype=np.float64, copy=True)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"noise_from_line: values must be an array of real numbers ({exc})") from None
    one = arr.ndim == 1
    if one:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ShapeError(
            f"noise_from_line: values must have shape (p,) or (p, b) (p equally spaced points of a line, b functions), "
            f"got shape {arr.shape}"
        )
    if arr.shape[0] < 4:
        raise ShapeError(
            f"noise_from_line: needs at least 4 points on the line (3 consecutive orders of differences), got {arr.shape[0]}; "
            "7 to 11 are usual (the paper's default is 9)"
        )
    return arr, one


def noise_from_line(values: Any) -> tuple[Array, NDArray[np.int8]]:
    """ECNoise on values a caller already has: ``(levels, flags)``, one per column.

    ``values``: ``(p, b)`` (or ``(p,)``, one column) values of ``b`` functions at ``p >= 4``
    equally spaced points of one line ``x + t_i u`` in order of ``t_i`` (the spacing itself is not
    needed). Returns ``levels`` ``(b,)``, the estimated standard deviation of each column's noise
    (NaN where no level was accepted), and ``flags`` ``(b,)`` of :class:`NoiseFlag` codes
    (``int8``). Cost: no evaluation; ``O(p^2 b)`` arithmetic, a loop over the ``p - 1`` orders.
    """
    table, _ = _table(values)
    p, b = table.shape
    levels = np.full(b, np.nan)
    flags = np.full(b, int(NoiseFlag.H_TOO_LARGE), dtype=np.int8)
    finite = np.isfinite(table).all(axis=0)
    flags[~finite] = NoiseFlag.NONFINITE
    cols = np.flatnonzero(finite)
    if cols.size == 0:
        return levels, flags
    T = table[:, cols]
    scale = np.abs(T).max(axis=0)
    orders = p - 1
    sigma = np.empty((orders, cols.size))  # sigma_j, j = 1..p-1 (row j - 1)
    sign_change = np.empty((orders, cols.size), dtype=bool)
    D = T
    g = 1.0
    for j in range(1, orders + 1):  # the difference table, one order at a time
        D = D[1:] - D[:-1]  # Delta^j f_i = Delta^{j-1} f_{i+1} - Delta^{j-1} f_i
        if j == 1:
            # h too small: fewer than half of the first differences are nonzero (ECnoise.m)
            too_small = np.count_nonzero(D == 0.0, axis=0) >= p / 2.0
        g *= 0.5 * j / (2 * j - 1)  # gamma_j = gamma_{j-1} j / (2 (2 j - 1)) = (j!)^2 / (2j)!
        sigma[j - 1] = np.sqrt(g * np.mean(D * D, axis=0))  # paper eq. 2.7
        sign_change[j - 1] = D.min(axis=0) * D.max(axis=0) < 0.0
    # acceptance: the first j with sigma_j, sigma_{j+1}, sigma_{j+2} within a factor 4 and a sign change in Delta^j
    windows = orders - 2
    lo = np.minimum(np.minimum(sigma[:windows], sigma[1 : windows + 1]), sigma[2 : windows + 2])
    hi = np.maximum(np.maximum(sigma[:windows], sigma[1 : windows + 1]), sigma[2 : windows + 2])
    ok = (hi <= AGREEMENT * lo) & sign_change[:windows]
    found = ok.any(axis=0)
    first = np.argmax(ok, axis=0)
    level = sigma[first, np.arange(cols.size)]
    sub_levels = np.where(found, level, np.nan)
    sub_flags = np.where(found, int(NoiseFlag.OK), int(NoiseFlag.H_TOO_LARGE)).astype(np.int8)
    rounding = found & (level <= ROUNDING_FACTOR * _EPS * scale)
    sub_flags[rounding] = NoiseFlag.NO_NOISE
    sub_flags[too_small] = NoiseFlag.H_TOO_SMALL  # the paper stops at this test, before any order
    sub_levels[too_small] = np.nan
    levels[cols] = sub_levels
    flags[cols] = sub_flags
    return levels, flags


@dataclass(frozen=True)
class NoiseEstimate:
    """The noise of ``b`` functions at a point, estimated by :func:`estimate_noise`.

    ``per_column``: the estimated standard deviation of each column's noise, absolute (in the
    function's units; NaN where no level was accepted). ``absolute``: the largest accepted level
    (NaN if none), the conservative figure for a tolerance that must stay above the noise.
    ``relative_per_column``: ``per_column / max(|f(x)|, tiny)``; ``relative``: that of the column
    that gives ``absolute``. ``status``: ``"ok"`` (every column accepted, at least one above
    rounding), ``"no noise detected"`` (every column at the rounding of its values, about
    ``eps |f|``), or, when some column failed, the failure of the most columns: ``"h too small"``,
    ``"h too large"``, ``"non-finite values"``; ``column_status`` says it per column.
    ``h``: the step at which the level ``absolute`` was found (the last step tried if none was);
    ``h_per_column``: the step at which each column was decided. ``evaluations``: function values spent (points x columns, summed over attempts);
    ``attempts``: batched calls made. ``fx``: the values at ``x``; ``direction``: the unit
    direction of the line.
    """

    absolute: float
    per_column: Array
    relative: float
    relative_per_column: Array
    status: str
    column_status: tuple[str, ...]
    h: float
    h_per_column: Array
    evaluations: int
    attempts: int
    points: int
    fx: Array = field(repr=False)
    direction: Array = field(repr=False)

    @property
    def accepted(self) -> NDArray[np.bool_]:
        """Per column: whether a level was accepted (``"ok"`` or ``"no noise detected"``)."""
        return np.array([s in ("ok", "no noise detected") for s in self.column_status], dtype=bool)

    def __str__(self) -> str:
        b = len(self.column_status)
        where = "" if b == 1 else f" (the largest of {b} columns)"
        if math.isnan(self.absolute):
            head = f"no noise level could be estimated: {self.status}"
        else:
            fx = self.fx[int(np.nanargmax(np.where(self.accepted, self.per_column, -np.inf)))] if b else math.nan
            head = (f"noise level {self.absolute:.2g}{where}, {self.relative:.2g} relative to |f(x)| = {abs(fx):.3g}; "
                    f"{self.status}")
            if self.status == "no noise detected":
                head += " (the level is the rounding of the values, about eps |f|)"
        counts: dict[str, int] = {}
        for s in self.column_status:
            counts[s] = counts.get(s, 0) + 1
        cols = "" if b == 1 else "; columns: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
        plural = "s" if self.attempts != 1 else ""
        return (f"{head}{cols}. From {self.points} points on a random line, h = {self.h:.3g}; "
                f"{self.attempts} attempt{plural}, {self.evaluations} evaluations (More & Wild's ECNoise).")


def _status(flags: NDArray[np.int8]) -> str:
    """The overall status of the columns' flags (see :class:`NoiseEstimate`)."""
    fl = [NoiseFlag(int(f)) for f in flags]
    failed = [f for f in fl if not f.accepted]
    if failed:
        order = (NoiseFlag.H_TOO_LARGE, NoiseFlag.H_TOO_SMALL, NoiseFlag.NONFINITE)
        return max(order, key=lambda f: (failed.count(f), -order.index(f))).text
    if all(f is NoiseFlag.NO_NOISE for f in fl):
        return NoiseFlag.NO_NOISE.text
    return NoiseFlag.OK.text


def _positive_int(v: Any, name: str, least: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < least:
        raise InvalidParameterError(f"estimate_noise: {name} must be an integer >= {least}, got {v!r}")
    return int(v)


def estimate_noise(
    fun: Callable[[Array], Any],
    x: Any,
    rng: np.random.Generator | int,
    *,
    h: float | None = None,
    points: int = 9,
    retries: int = 3,
) -> NoiseEstimate:
    """Estimate the noise of the batched function ``fun`` at ``x`` (More & Wild's ECNoise).

    ``fun`` maps a matrix of points ``(k, d)`` to values ``(k, b)`` (or ``(k,)``: one column): an
    objective, its constraints, the components of a finite sum, each column estimated on its own.
    The points ``x + (i - k) h u``, ``i = 0..points-1`` (``points = 2 k + 1``, odd, at least 5),
    on a random unit direction ``u`` drawn from ``rng``, go to ``fun`` as ONE matrix: one call per
    attempt. When the columns still undecided mostly say "h too small", ``h`` is multiplied by
    100, when they mostly say "h too large" it is divided by 100 (the paper's rule; after a change
    of direction the factor is its square root, 10, then about 3.2, so that the step does not
    swing between the same two values), and the undecided columns are estimated again, up to
    ``retries`` more attempts; a column keeps the first accepted level. A column at the rounding
    level ("no noise detected") is also looked at again at ``100 h`` while the step stays at most
    ``1e-2 max(1, |x|_inf)`` (:data:`CONFIRM_CEILING`), and a larger accepted level found there
    replaces it: values rounded to a few digits (a quantum ``q >> eps |f|``) look exactly linear
    when the step moves ``f`` by a whole number of quanta per point, and show their noise
    ``q / sqrt(12)`` at a larger step. So a noise-free function costs three attempts.

    ``h`` (default ``1e-6 max(1, |x|_inf)``, :data:`DEFAULT_H`): the step is relative to the
    point's scale so that it means the same for ``x`` near 1 and near ``1e6``. ``1e-6`` keeps the
    smooth part's differences of order ``j >= 3`` (``~ h^j |f^(j)|``, ``1e-18`` relative) below
    noise down to about ``1e-15 |f|``, and keeps the step's change of ``f`` (``~ h |grad f|``)
    above the rounding of ``f`` unless the gradient is tiny (then the first attempt says "h too
    small" and the next one uses ``1e-4``); a strongly oscillating function says "h too large" and
    is tried again at ``1e-8``.

    Returns a :class:`NoiseEstimate`; ``str()`` of it says the result in words. Cost:
    ``points x b`` evaluations per attempt, at most ``1 + retries`` attempts.
    """
    try:
        xv = np.array(x, dtype=np.float64, copy=True)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"estimate_noise: x must be a vector of real numbers ({exc})") from None
    if xv.ndim != 1 or xv.size == 0:
        raise ShapeError(f"estimate_noise: x must be a non-empty 1-D array (one point), got shape {xv.shape}")
    if not np.isfinite(xv).all():
        raise InvalidInputError("estimate_noise: x contains NaN or infinity; estimate the noise at a finite point")
    points = _positive_int(points, "points", 5)
    if points % 2 == 0:
        raise InvalidParameterError(
            f"estimate_noise: points must be odd (the line is centred on x: x + (i - k) h u, i = 0..2k), got {points}; "
            "9 is the paper's default"
        )
    retries = _positive_int(retries, "retries", 0)
    scale = max(1.0, float(np.max(np.abs(xv))))
    if h is None:
        step = DEFAULT_H * scale
    else:
        if isinstance(h, bool) or not isinstance(h, (int, float, np.integer, np.floating)) \
                or not math.isfinite(float(h)) or float(h) <= 0.0:
            raise InvalidParameterError(f"estimate_noise: h must be a finite positive step, got {h!r}")
        step = float(h)
    gen = rng if isinstance(rng, np.random.Generator) else _generator(rng)
    d = xv.size
    u = gen.standard_normal(d)
    u /= np.linalg.norm(u)
    u.setflags(write=False)
    k = points // 2
    offsets = np.arange(points, dtype=np.float64) - k  # i - k, i = 0..2k
    levels: Array | None = None
    flags: NDArray[np.int8] | None = None
    h_col: Array | None = None
    fx: Array | None = None
    confirm: NDArray[np.bool_] | None = None  # "no noise detected" once, to be confirmed at 100 h
    check: NDArray[np.bool_] | None = None  # a level found by a confirmation, to be checked again at 10 times its step
    prior: Array | None = None  # the rounding levels a check falls back to
    used = step
    factor, last_direction = H_FACTOR, 0
    evaluations = 0
    attempts = 0
    for _ in range(retries + 1):
        X = xv[None, :] + (offsets * step)[:, None] * u[None, :]  # the points x + (i - k) h u of the table, one matrix
        X.setflags(write=False)
        values = _values(fun(X), points)
        used = step
        attempts += 1
        evaluations += values.size
        lv, fl = noise_from_line(values)
        if levels is None or flags is None or h_col is None or confirm is None or check is None or prior is None:
            levels, flags, h_col = lv, fl, np.full(lv.size, step)
            fx = values[k].copy()
            confirm = fl == NoiseFlag.NO_NOISE
            check, prior = np.zeros(lv.size, dtype=bool), lv.copy()
        else:
            if lv.size != levels.size:
                raise ShapeError(
                    f"estimate_noise: fun returned {lv.size} columns on attempt {attempts} but {levels.size} before; "
                    "it must return the same columns at every call"
                )
            # a level at rounding is looked at again at larger steps (CONFIRM_CEILING): values rounded to a few
            # digits (a quantum q >> eps |f|) look linear at a step that moves f by a whole number of quanta per
            # point, and show their noise q / sqrt(12) once the step is large enough for the curvature to move
            # the rounding errors; a larger accepted level replaces the rounding level
            # a level that a confirmation found must not depend on the step: noise does not, a smooth part whose
            # differences happen to pass the acceptance tests at a step as large as its own scale does (a level
            # more than a factor 3 away at 10 times the step, or no level there, is that: back to the rounding)
            held = check & (fl == NoiseFlag.OK) & (lv <= 3.0 * levels) & (lv >= levels / 3.0)
            gone = check & ~held
            levels[gone], flags[gone] = prior[gone], NoiseFlag.NO_NOISE
            check[:] = False
            up = confirm & (fl == NoiseFlag.OK) & (lv > levels)
            prior[up] = levels[up]
            levels[up], flags[up], h_col[up] = lv[up], fl[up], step
            check = up.copy()
            redo = ~_accepted(flags)
            levels[redo], flags[redo], h_col[redo] = lv[redo], fl[redo], step
            confirm = (confirm & ~up) | (redo & (fl == NoiseFlag.NO_NOISE))
        if step * factor > CONFIRM_CEILING * scale:
            confirm[:] = False  # no larger step to confirm at
        pending = flags[~_accepted(flags)]
        small = int(np.count_nonzero(pending == NoiseFlag.H_TOO_SMALL)) + int(np.count_nonzero(confirm))
        large = int(np.count_nonzero(pending == NoiseFlag.H_TOO_LARGE))
        if check.any() and small == 0 and large == 0:  # only a check is left: at 10 times the step
            factor, last_direction, small = 10.0, 1, 1
        if small == 0 and large == 0:
            break
        direction = 1 if small >= large else -1
        if last_direction and direction != last_direction:
            factor = math.sqrt(factor)  # a reversal: the step lies between the last two; halve the log-step
        last_direction = direction
        step = step * factor if direction > 0 else step / factor  # paper: 100 h / h / 100
    if levels is None or flags is None or h_col is None or fx is None:  # pragma: no cover - at least one attempt runs
        raise RuntimeError("estimate_noise made no attempt")
    if check is not None and prior is not None and check.any():  # a confirmed level left unchecked: not trusted
        levels[check], flags[check] = prior[check], NoiseFlag.NO_NOISE
    acc = _accepted(flags)
    denom = np.maximum(np.abs(fx), _TINY)
    rel = levels / denom
    if acc.any():
        top = int(np.argmax(np.where(acc, levels, -np.inf)))
        absolute, relative, h_out = float(levels[top]), float(rel[top]), float(h_col[top])
    else:
        absolute = relative = math.nan
        h_out = used
    for arr in (levels, rel, h_col, fx):
        arr.setflags(write=False)
    return NoiseEstimate(
        absolute=absolute, per_column=levels, relative=relative, relative_per_column=rel, status=_status(flags),
        column_status=tuple(NoiseFlag(int(f)).text for f in flags), h=h_out,
        h_per_column=h_col, evaluations=int(evaluations), attempts=attempts, points=points, fx=fx, direction=u,
    )  # fmt: skip


def _accepted(flags: NDArray[np.int8]) -> NDArray[np.bool_]:
    out: NDArray[np.bool_] = (flags == NoiseFlag.OK) | (flags == NoiseFlag.NO_NOISE)
    return out


def _generator(seed: Any) -> np.random.Generator:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise InvalidParameterError(
            f"estimate_noise: rng must be a numpy Generator (np.random.default_rng(seed)) or an integer seed, got {seed!r}"
        )
    return np.random.default_rng(int(seed))


def _values(raw: Any, k: int) -> Array:
    """The values of ``fun`` at ``k`` points as a float64 ``(k, b)`` array, or a :class:`ShapeError`."""
    try:
        arr = np.array(raw, dtype=np.float64, copy=True)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"estimate_noise: fun must return real values ({exc})") from None
    if arr.ndim == 1 and arr.shape[0] == k:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] != k or arr.shape[1] == 0:
        raise ShapeError(
            f"estimate_noise: fun got {k} points (a ({k}, d) matrix) and must return ({k}, b) values (or ({k},)), "
            f"got shape {arr.shape}"
        )
    return arr
