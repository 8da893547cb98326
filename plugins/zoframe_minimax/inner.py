"""The inner maximum ``y*(x) = argmax_{y in Y} F(x, y)`` as the refinement needs it, and ``Phi`` as a smooth function.

The maximisation itself is :func:`zoframe.certificate.minimax.inner_maximum` (the refinement engine
:mod:`zoframe.refine` on ``-F(x, .)``): the same solve that certifies a minimax point, here counted
under the purpose ``"refine"`` and warm-started from the last maximiser.

:class:`PhiSmooth` is ``Phi(x) = max_y F(x, y)`` seen through :class:`zoframe.refine.Smooth`:
``values`` solves the inner maximum at each point (warm-started from ``aux``, the last ``y*``) and
returns ``y*`` as the new ``aux``; ``differences`` evaluates ``F(., y*)`` at the difference points in
one batched call, whose differences are ``grad Phi(x) = grad_x F(x, y*(x))`` by Danskin's theorem.
The inner tolerance (``rtol = 1e-10`` by default, relative to the inner problem's own curvature and
scale) keeps the error of ``y*`` far below what these differences resolve: ``grad_x F(x, y~)`` differs
from ``grad Phi(x)`` by ``F_xy (y~ - y*)`` and ``F(x, y~)`` from ``Phi(x)`` by ``O(|y~ - y*|^2)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zoframe.certificate.minimax import INNER_RTOL, InnerMaximum, inner_maximum
from zoframe.errors import ZoframeError
from zoframe.oracle import CountingOracle
from zoframe.protocols import Array

__all__ = ["InnerFailure", "PhiSmooth", "solve_inner"]


class InnerFailure(ZoframeError):
    """The inner maximum at a point could not be found (``y`` ran away, values not finite, a stall)."""

    def __init__(self, result: InnerMaximum, x: Array) -> None:
        self.result = result
        self.x = np.array(x, copy=True)
        super().__init__(result.message)


def solve_inner(
    oracle: CountingOracle, x: Array, y_start: Array, *, rtol: float = INNER_RTOL, purpose: str = "refine",
    max_points: int | None = None,
) -> InnerMaximum:  # fmt: skip
    """``max_{y in Y} F(x, y)`` over all ``n`` components from ``y_start`` (counted under ``purpose``)."""

    def evaluate(xr: Array, Y: Array) -> Array:
        out: Array = oracle.minimax(xr, Y, None, purpose=purpose).mean(axis=1)
        return out

    return inner_maximum(evaluate, x, y_start, oracle.y_set, point_cost=oracle.n, rtol=rtol, max_points=max_points)


@dataclass
class PhiSmooth:
    """``Phi(x) = max_{y in Y} F(x, y)`` for :mod:`zoframe.refine` (module docstring); ``aux`` is ``y*``."""

    oracle: CountingOracle
    rtol: float = INNER_RTOL
    purpose: str = "refine"
    point_cost: int = 0

    def __post_init__(self) -> None:
        self.point_cost = int(self.oracle.n)

    def values(self, X: Array, aux: Array) -> tuple[Array, Array]:
        y = np.asarray(aux, dtype=np.float64)
        if y.shape != (self.oracle.dim_y,):
            y = np.array(self.oracle.y0, dtype=np.float64)
        out = np.empty(X.shape[0])
        for r in range(X.shape[0]):  # one inner solve per point (each warm-started from the previous maximiser)
            res = solve_inner(self.oracle, X[r], y, rtol=self.rtol, purpose=self.purpose)
            if not res.found:
                raise InnerFailure(res, X[r])
            out[r], y = res.value, res.y
        return out, y

    def differences(self, P: Array, aux: Array) -> Array:
        out: Array = self.oracle.minimax(P, aux, None, purpose=self.purpose).mean(axis=1)  # ONE call, F(., y*)
        return out
