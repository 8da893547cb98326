"""What every measure of the certificate shares: counted evaluations, difference points and their derivatives."""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Any

import numpy as np

from zoframe.errors import InvalidInputError
from zoframe.oracle import CountingOracle, MonitorOracle
from zoframe.protocols import Array, IntArray

_EPS = float(np.finfo(np.float64).eps)
_STEP: float = float(_EPS**0.25)


class Evals:
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


def _difference_points(x: Array, box: tuple[Array, Array] | None, step: float = _STEP) -> _Differences:
    h = step * np.maximum(1.0, np.abs(x))
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


def _standing_out(curv: Array, floor: Array, sigma: float, a: Array, b: Array) -> Array:
    """``curv`` (from :func:`_derivatives`, rows by coordinate) where it stands out of its rounding ``floor`` and of
    three times its noise error ``4 sigma / (a b)`` (values off by up to ``2 sigma`` each), else 0."""
    ab = (a * b).reshape(a.shape + (1,) * (curv.ndim - 1))
    herr = np.where(ab > 0, 4.0 * sigma / np.where(ab > 0, ab, 1.0), 0.0)
    out: Array = np.where(np.abs(curv) > np.maximum(floor, 3.0 * herr), curv, 0.0)
    return out


def _unit(d: int, i: int) -> Array:
    e = np.zeros(d)
    e[i] = 1.0
    return e


def _ratio(num: float, den: float) -> float:
    if num == 0.0:
        return 0.0
    return num / den if den > 0 else math.inf


def _count(oracle: CountingOracle) -> int:
    return int(oracle.calls_by_purpose.get("certify", 0))


def _check_tol(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) or not value > 0:
        raise InvalidInputError(f"certify: {name} must be a positive number, got {value!r}")
    return float(value)


