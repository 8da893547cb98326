"""Convex, possibly nonsmooth penalties ``psi`` with closed-form proximal operators.

Each penalty provides ``value(y)``, ``prox(v, t) = argmin_y psi(y) + ||y - v||^2 / (2 t)`` and
``subdifferential_distance(y, g)``: the distance from ``g`` to the subdifferential of ``psi`` at
``y`` (used by the ADMM stationarity measure, Huang et al. 2019, Definition 1). A user-defined
penalty only needs these three methods (see :class:`zoframe.protocols.Penalty`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
import math

import numpy as np

from zoframe.errors import InvalidInputError
from zoframe.protocols import Array

__all__ = ["L1", "GroupL2", "SquaredL2", "Zero"]


def _weight(w: float, name: str) -> float:
    if not (math.isfinite(w) and w >= 0):
        raise InvalidInputError(f"{name}: the weight must be finite and >= 0, got {w}")
    return float(w)


@dataclass(frozen=True)
class Zero:
    """``psi = 0``."""

    def value(self, y: Array) -> float:
        return 0.0

    def prox(self, v: Array, t: float) -> Array:
        return np.array(v, dtype=np.float64, copy=True)

    def subdifferential_distance(self, y: Array, g: Array) -> float:
        return float(np.linalg.norm(g))


@dataclass(frozen=True)
class L1:
    """``psi(y) = weight * ||y||_1``; prox is soft thresholding."""

    weight: float = 1.0

    def __post_init__(self) -> None:
        _weight(self.weight, "L1")

    def value(self, y: Array) -> float:
        return self.weight * float(np.abs(y).sum())

    def prox(self, v: Array, t: float) -> Array:
        v = np.asarray(v, dtype=np.float64)
        return np.sign(v) * np.maximum(np.abs(v) - t * self.weight, 0.0)

    def subdifferential_distance(self, y: Array, g: Array) -> float:
        y = np.asarray(y)
        g = np.asarray(g)
        w = self.weight
        nz = y != 0
        r = np.where(nz, g - w * np.sign(y), np.maximum(np.abs(g) - w, 0.0))
        return float(np.linalg.norm(r))


@dataclass(frozen=True)
class SquaredL2:
    """``psi(y) = (weight / 2) ||y||_2^2``."""

    weight: float = 1.0

    def __post_init__(self) -> None:
        _weight(self.weight, "SquaredL2")

    def value(self, y: Array) -> float:
        return 0.5 * self.weight * float(np.dot(y, y))

    def prox(self, v: Array, t: float) -> Array:
        return np.asarray(v, dtype=np.float64) / (1.0 + t * self.weight)

    def subdifferential_distance(self, y: Array, g: Array) -> float:
        return float(np.linalg.norm(np.asarray(g) - self.weight * np.asarray(y)))


@dataclass(frozen=True)
class GroupL2:
    """``psi(y) = weight * sum_g ||y_g||_2`` over DISJOINT groups of indices.

    Overlapping groups are handled by the splitting ``B_j``: duplicate the coordinates so that the
    copies form disjoint groups (see :func:`overlapping_groups_matrix` in ``zoframe_admm``).
    """

    groups: tuple[tuple[int, ...], ...]
    weight: float = 1.0

    def __post_init__(self) -> None:
        _weight(self.weight, "GroupL2")
        seen: set[int] = set()
        for grp in self.groups:
            if not grp:
                raise InvalidInputError("GroupL2: empty group")
            if seen.intersection(grp):
                raise InvalidInputError(
                    "GroupL2: groups overlap; express overlapping groups through the coupling "
                    "matrix (duplicate coordinates) so that each psi has disjoint groups"
                )
            seen.update(grp)

    @classmethod
    def from_groups(cls, groups: Sequence[Sequence[int]], weight: float = 1.0) -> GroupL2:
        return cls(tuple(tuple(int(i) for i in g) for g in groups), weight)

    def value(self, y: Array) -> float:
        y = np.asarray(y)
        return self.weight * float(sum(np.linalg.norm(y[list(g)]) for g in self.groups))

    def prox(self, v: Array, t: float) -> Array:
        out = np.array(v, dtype=np.float64, copy=True)
        thr = t * self.weight
        for g in self.groups:
            ids = list(g)
            nrm = np.linalg.norm(out[ids])
            out[ids] = 0.0 if nrm <= thr else out[ids] * (1.0 - thr / nrm)
        return out

    def subdifferential_distance(self, y: Array, g: Array) -> float:
        y = np.asarray(y)
        g = np.asarray(g)
        total = 0.0
        covered = np.zeros(y.shape[0], dtype=bool)
        for grp in self.groups:
            ids = list(grp)
            covered[ids] = True
            ny = np.linalg.norm(y[ids])
            if ny > 0:
                total += float(np.sum((g[ids] - self.weight * y[ids] / ny) ** 2))
            else:
                total += max(float(np.linalg.norm(g[ids])) - self.weight, 0.0) ** 2
        total += float(np.sum(g[~covered] ** 2))
        return math.sqrt(total)
