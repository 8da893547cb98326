"""Simple closed convex sets with Euclidean projections: reals, box, ball, simplex.

``project`` accepts one point ``(d,)`` or a matrix of points ``(k, d)`` (row-wise projection) and
never modifies its argument.
"""

from __future__ import annotations

from dataclasses import dataclass
import math

import numpy as np

from zoframe.errors import InvalidInputError, ShapeError
from zoframe.protocols import Array

__all__ = ["Ball", "Box", "Reals", "Simplex", "project_simplex"]


def _rows(x: Array, dim: int) -> tuple[Array, bool]:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]
        single = True
    else:
        single = False
    if arr.ndim != 2 or arr.shape[1] != dim:
        raise ShapeError(f"projection: expected shape ({dim},) or (k, {dim}), got {np.shape(x)}")
    return arr, single


def project_simplex(v: Array, radius: float = 1.0) -> Array:
    """Euclidean projection of each row of ``v`` onto ``{p >= 0, sum p = radius}``.

    Sort-based, O(d log d) per row (Held et al. 1974; Duchi et al. 2008, Fig. 1).

    Hand-written because neither numpy nor scipy has a simplex projection. It is kept beside the
    constrained plugin's (``zoframe_constrained.simplex.project_simplex_dense``, Michelot's
    algorithm, one vector at a time) because each wins where it is used; measured side by side
    (median of repeats, numpy 2.4): on one vector of 10 or 1 000 entries both take 10-18 us; on
    1e5 / 1e6 entries Michelot is 49x / 35x faster (0.22 ms against 10.8 ms, 2.1 ms against 74 ms),
    which is the plugin's case (the distribution over all m constraints); on a batch of 256 rows of
    50 entries (the estimators' perturbed points of a minimax ``y``) this batched sort takes
    0.50 ms against 12 ms for Michelot row by row. Both give the same projection (max difference 0.0
    on these inputs).
    """
    arr = np.asarray(v, dtype=np.float64)
    single = arr.ndim == 1
    V = arr[None, :] if single else arr
    d = V.shape[1]
    U = -np.sort(-V, axis=1)
    css = np.cumsum(U, axis=1) - radius
    ks = np.arange(1, d + 1, dtype=np.float64)
    cond = U - css / ks > 0
    rho = d - 1 - np.argmax(cond[:, ::-1], axis=1)
    theta = css[np.arange(V.shape[0]), rho] / (rho + 1.0)
    out: Array = np.maximum(V - theta[:, None], 0.0)
    return out[0] if single else out


@dataclass(frozen=True)
class Reals:
    """All of R^d (projection is the identity)."""

    dim: int

    def project(self, x: Array) -> Array:
        arr, single = _rows(x, self.dim)
        out = arr.copy()
        return out[0] if single else out

    def contains(self, x: Array, tol: float = 1e-9) -> bool:
        return bool(np.all(np.isfinite(x)))


@dataclass(frozen=True)
class Box:
    """``{lower <= x <= upper}`` (scalars or arrays of length ``dim``)."""

    dim: int
    lower: float | Array = -math.inf
    upper: float | Array = math.inf

    def __post_init__(self) -> None:
        lo = np.broadcast_to(np.asarray(self.lower, dtype=np.float64), (self.dim,))
        hi = np.broadcast_to(np.asarray(self.upper, dtype=np.float64), (self.dim,))
        if np.any(lo > hi):
            raise InvalidInputError("Box: every lower bound must be <= its upper bound")

    def project(self, x: Array) -> Array:
        arr, single = _rows(x, self.dim)
        out = np.clip(arr, self.lower, self.upper)
        return out[0] if single else out

    def contains(self, x: Array, tol: float = 1e-9) -> bool:
        arr = np.asarray(x)
        return bool(np.all(arr >= np.asarray(self.lower) - tol) and np.all(arr <= np.asarray(self.upper) + tol))


@dataclass(frozen=True)
class Ball:
    """``{||x - center||_2 <= radius}``."""

    dim: int
    radius: float = 1.0
    center: float | Array = 0.0

    def __post_init__(self) -> None:
        if not self.radius > 0:
            raise InvalidInputError(f"Ball: radius must be positive, got {self.radius}")

    def project(self, x: Array) -> Array:
        arr, single = _rows(x, self.dim)
        diff = arr - self.center
        norms = np.linalg.norm(diff, axis=1, keepdims=True)
        scale = np.minimum(1.0, self.radius / np.maximum(norms, 1e-300))
        out: Array = self.center + diff * scale
        return out[0] if single else out

    def contains(self, x: Array, tol: float = 1e-9) -> bool:
        return bool(np.linalg.norm(np.asarray(x) - self.center) <= self.radius + tol)


@dataclass(frozen=True)
class Simplex:
    """The probability simplex ``{p >= 0, sum p = radius}`` (``radius = 1`` by default)."""

    dim: int
    radius: float = 1.0

    def __post_init__(self) -> None:
        if not self.radius > 0:
            raise InvalidInputError(f"Simplex: radius must be positive, got {self.radius}")

    def project(self, x: Array) -> Array:
        arr, single = _rows(x, self.dim)
        out = project_simplex(arr, self.radius)
        return out[0] if single else out

    def contains(self, x: Array, tol: float = 1e-9) -> bool:
        arr = np.asarray(x)
        return bool(np.all(arr >= -tol) and abs(float(arr.sum()) - self.radius) <= tol * max(1, self.dim))
