"""Extra proxable penalties for the composite ADMM family.

The core (:mod:`zoframe.penalties`) has ``L1``, ``SquaredL2``, ``GroupL2`` and ``Zero``. This module adds

* :class:`WeightedL1` -- ``sum_i w_i |y_i|`` with one weight per coordinate (one block that carries
  several l1 penalties side by side, e.g. ``tau1 ||x||_1`` and ``tau2 ||A~ x||_1``);
* :class:`BlockGroupL2` -- ``weight * sum_g ||y_g||_2`` over contiguous groups of EQUAL size, fully
  vectorised (the overlapping 3x3 group lasso of the structured attack, after duplicating the
  coordinates of overlapping groups with :func:`overlapping_groups_matrix`);
* :class:`PenaltySum` -- the sum of an l1 term, a group term and a squared l2 term on one block
  (elastic net, sparse group lasso and their ridge versions), whose prox has a closed form.

Every penalty provides ``value``, ``prox(v, t) = argmin_y psi(y) + ||y - v||^2 / (2 t)`` and
``subdifferential_distance(y, g) = dist(g, d psi(y))`` used by Definition 1 of Huang et al. (2019).
"""

from __future__ import annotations

from dataclasses import dataclass
import math

import numpy as np

from zoframe.errors import InvalidInputError
from zoframe.penalties import L1, GroupL2, SquaredL2
from zoframe.protocols import Array, Penalty

__all__ = ["BlockGroupL2", "PenaltySum", "WeightedL1", "has_prox", "overlapping_groups_matrix"]


def _check_weight(w: float, what: str) -> float:
    if not (isinstance(w, (int, float, np.integer, np.floating)) and math.isfinite(w) and w >= 0):
        raise InvalidInputError(f"{what}: the weight must be a finite number >= 0, got {w!r}")
    return float(w)


def has_prox(psi: object) -> bool:
    """Whether ``psi`` offers the ``value`` and ``prox`` a penalty needs."""
    return callable(getattr(psi, "value", None)) and callable(getattr(psi, "prox", None))


def _soft(v: Array, thr: Array | float) -> Array:
    out: Array = np.sign(v) * np.maximum(np.abs(v) - thr, 0.0)
    return out


@dataclass(frozen=True, eq=False)
class WeightedL1:
    """``psi(y) = sum_i w_i |y_i|`` (``w_i >= 0``); prox is coordinate-wise soft thresholding."""

    weights: Array

    def __post_init__(self) -> None:
        w = np.array(self.weights, dtype=np.float64, copy=True).reshape(-1)
        if w.size == 0 or not np.all(np.isfinite(w)) or np.any(w < 0):
            raise InvalidInputError("WeightedL1: weights must be a non-empty vector of finite numbers >= 0")
        w.setflags(write=False)
        object.__setattr__(self, "weights", w)

    def _check(self, y: Array) -> Array:
        arr = np.asarray(y, dtype=np.float64)
        if arr.shape != self.weights.shape:
            raise InvalidInputError(
                f"WeightedL1 has {self.weights.shape[0]} weights but got a vector of shape {arr.shape}"
            )
        return arr

    def value(self, y: Array) -> float:
        return float(self.weights @ np.abs(self._check(y)))

    def prox(self, v: Array, t: float) -> Array:
        return _soft(self._check(v), t * self.weights)

    def subdifferential_distance(self, y: Array, g: Array) -> float:
        y = self._check(y)
        g = np.asarray(g, dtype=np.float64)
        r = np.where(y != 0, g - self.weights * np.sign(y), np.maximum(np.abs(g) - self.weights, 0.0))
        return float(np.linalg.norm(r))


@dataclass(frozen=True)
class BlockGroupL2:
    """``psi(y) = weight * sum_g ||y_g||_2`` with ``y`` cut into contiguous groups of ``size`` entries.

    Vectorised over the groups (one reshape, no Python loop), so a few thousand groups cost as
    much as one.
    """

    size: int
    weight: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.size, (int, np.integer)) or isinstance(self.size, bool) or self.size < 1:
            raise InvalidInputError(f"BlockGroupL2: the group size must be a positive integer, got {self.size!r}")
        _check_weight(self.weight, "BlockGroupL2")

    def _groups(self, y: Array) -> Array:
        arr = np.asarray(y, dtype=np.float64)
        if arr.ndim != 1 or arr.shape[0] % self.size:
            raise InvalidInputError(
                f"BlockGroupL2 with groups of {self.size} needs a vector whose length is a multiple of "
                f"{self.size}, got shape {arr.shape}"
            )
        return arr.reshape(-1, self.size)

    def value(self, y: Array) -> float:
        return self.weight * float(np.linalg.norm(self._groups(y), axis=1).sum())

    def prox(self, v: Array, t: float) -> Array:
        V = self._groups(v)
        nrm = np.linalg.norm(V, axis=1, keepdims=True)
        thr = t * self.weight
        scale = np.where(nrm > thr, 1.0 - thr / np.where(nrm > 0, nrm, 1.0), 0.0)
        out: Array = (V * scale).reshape(-1)
        return out

    def subdifferential_distance(self, y: Array, g: Array) -> float:
        Y = self._groups(y)
        G = np.asarray(g, dtype=np.float64).reshape(Y.shape)
        ny = np.linalg.norm(Y, axis=1)
        nz = ny > 0
        d2 = np.empty(Y.shape[0])
        d2[nz] = np.sum((G[nz] - self.weight * Y[nz] / ny[nz, None]) ** 2, axis=1)
        d2[~nz] = np.maximum(np.linalg.norm(G[~nz], axis=1) - self.weight, 0.0) ** 2
        return float(math.sqrt(d2.sum()))


@dataclass(frozen=True, eq=False)
class PenaltySum:
    """``psi = l1 + group + ridge`` on one block; each term optional.

    ``l1`` is an :class:`~zoframe.penalties.L1` or :class:`WeightedL1`, ``group`` a
    :class:`~zoframe.penalties.GroupL2` or :class:`BlockGroupL2` (disjoint groups), ``ridge`` a
    :class:`~zoframe.penalties.SquaredL2`. The prox is exact:
    ``prox_{t psi}(v) = G(S(v / (1 + t c)))`` with ``c`` the ridge weight, ``S`` soft thresholding at
    ``t / (1 + t c)`` times the l1 weights and ``G`` group shrinkage at the same scaled step (the
    sparse-group-lasso prox is the group prox of the l1 prox, Friedman et al. 2010).
    """

    l1: Penalty | None = None
    group: Penalty | None = None
    ridge: SquaredL2 | None = None

    def __post_init__(self) -> None:
        if self.l1 is not None and not isinstance(self.l1, (L1, WeightedL1)):
            raise InvalidInputError("PenaltySum: l1 must be zoframe.penalties.L1 or WeightedL1")
        if self.group is not None and not isinstance(self.group, (GroupL2, BlockGroupL2)):
            raise InvalidInputError("PenaltySum: group must be zoframe.penalties.GroupL2 or BlockGroupL2")
        if self.ridge is not None and not isinstance(self.ridge, SquaredL2):
            raise InvalidInputError("PenaltySum: ridge must be zoframe.penalties.SquaredL2")
        if self.l1 is None and self.group is None and self.ridge is None:
            raise InvalidInputError("PenaltySum needs at least one term; use zoframe.penalties.Zero for psi = 0")

    def value(self, y: Array) -> float:
        return float(sum(p.value(y) for p in (self.l1, self.group, self.ridge) if p is not None))

    def prox(self, v: Array, t: float) -> Array:
        c = 0.0 if self.ridge is None else self.ridge.weight
        s = t / (1.0 + t * c)
        out: Array = np.asarray(v, dtype=np.float64) / (1.0 + t * c)
        if self.l1 is not None:
            out = self.l1.prox(out, s)
        if self.group is not None:
            out = self.group.prox(out, s)
        return out

    def subdifferential_distance(self, y: Array, g: Array) -> float:
        y = np.asarray(y, dtype=np.float64)
        g = np.asarray(g, dtype=np.float64)
        if self.ridge is not None:
            g = g - self.ridge.weight * y  # the smooth term's gradient is the only element of its subdifferential
        l1, group = self.l1, self.group
        if group is None:
            return float(np.linalg.norm(g)) if l1 is None else l1.subdifferential_distance(y, g)
        if l1 is None:
            return group.subdifferential_distance(y, g)
        # both: on a group with y_g != 0 the group subgradient is unique; on y_g = 0 the set is
        # box(l1 weights) + ball(group weight), whose distance is max(||soft(g, w)|| - weight, 0).
        w = l1.weights if isinstance(l1, WeightedL1) else np.full(y.shape, _weight_of(l1))
        groups = _group_index_lists(group, y.shape[0])
        gw = _weight_of(group)
        total = 0.0
        covered = np.zeros(y.shape[0], dtype=bool)
        for ids in groups:
            covered[ids] = True
            yg, gg, wg = y[ids], g[ids], w[ids]
            ny = float(np.linalg.norm(yg))
            if ny > 0:
                rg = gg - gw * yg / ny
                r = np.where(yg != 0, rg - wg * np.sign(yg), np.maximum(np.abs(rg) - wg, 0.0))
                total += float(r @ r)
            else:
                total += max(float(np.linalg.norm(_soft(gg, wg))) - gw, 0.0) ** 2
        rest = ~covered
        if rest.any():
            yr, gr, wr = y[rest], g[rest], w[rest]
            r = np.where(yr != 0, gr - wr * np.sign(yr), np.maximum(np.abs(gr) - wr, 0.0))
            total += float(r @ r)
        return math.sqrt(total)


def _weight_of(psi: Penalty) -> float:
    if isinstance(psi, (L1, GroupL2, BlockGroupL2, SquaredL2)):
        return float(psi.weight)
    raise InvalidInputError(f"unsupported penalty {type(psi).__name__}")


def _group_index_lists(group: Penalty, dim: int) -> list[Array]:
    if isinstance(group, BlockGroupL2):
        return list(np.arange(dim).reshape(-1, group.size))
    if isinstance(group, GroupL2):
        return [np.asarray(g, dtype=np.intp) for g in group.groups]
    raise InvalidInputError(f"unsupported group penalty {type(group).__name__}")


def overlapping_groups_matrix(height: int, width: int, kernel: int = 3, stride: int = 1) -> Array:
    """Selection matrix ``G`` ``(n_groups * kernel^2, height * width)`` of overlapping square groups.

    Row block ``g`` of ``G`` picks the ``kernel x kernel`` window number ``g`` (row-major windows,
    pixels row-major inside a window) of an image flattened row-major. With ``y = G x`` the
    overlapping group lasso ``sum_g ||x_{G_g}||_2`` becomes the disjoint
    ``BlockGroupL2(kernel**2)`` of ``y`` (Xu et al. 2018; Huang et al. 2019, eq. 9).
    """
    for name, v in (("height", height), ("width", width), ("kernel", kernel), ("stride", stride)):
        if not isinstance(v, (int, np.integer)) or v < 1:
            raise InvalidInputError(f"{name} must be a positive integer, got {v!r}")
    if kernel > min(height, width):
        raise InvalidInputError(f"kernel {kernel} is larger than the image ({height} x {width})")
    rows = range(0, height - kernel + 1, stride)
    cols = range(0, width - kernel + 1, stride)
    win = (np.arange(kernel)[:, None] * width + np.arange(kernel)[None, :]).reshape(-1)
    starts = np.array([r * width + c for r in rows for c in cols])
    pix = (starts[:, None] + win[None, :]).reshape(-1)
    G = np.zeros((pix.shape[0], height * width))
    G[np.arange(pix.shape[0]), pix] = 1.0
    return G

