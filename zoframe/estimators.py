"""Zeroth-order gradient estimators (SPEC section 2).

Each estimator builds ALL its perturbed points as one ``(rows, d)`` matrix and makes ONE call of
the batched function, which returns ``(rows, b)`` values for ``b`` components. Several base points
``(P, d)`` may share the same random directions (STORM / SVRG-type corrections need this): their
points go into the same matrix, still one call.

The classes are registered as the ``gaussian``, ``sphere`` and ``coordinate`` estimator plugins by
the first-party package ``zoframe_estimators``; solvers of every family build on them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
import math
from typing import Any, ClassVar
import warnings

import numpy as np
from numpy.typing import NDArray

from zoframe.errors import (
    DivergedError,
    EstimatorUnderflowWarning,
    InvalidParameterError,
    NonFiniteValueError,
    ShapeError,
)
from zoframe.protocols import Array, BatchFunction
from zoframe.specs import param

__all__ = ["CoordinateEstimator", "Estimate", "GaussianEstimator", "SphereEstimator"]


@dataclass(frozen=True)
class Estimate:
    """The output of one estimate.

    ``grad``: ``(d,)`` for one base point or ``(P, d)``: the estimate averaged over the batch of
    components. ``per_component``: ``(b, d)`` or ``(P, b, d)`` when asked for. ``values``: base values
    ``(b,)`` / ``(P, b)`` of the components (``None`` for central differences, which never evaluate
    the base point). ``calls``: evaluations spent.
    """

    grad: Array
    per_component: Array | None
    values: Array | None
    calls: int


def _base_points(x: Array) -> tuple[Array, bool]:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 1:
        return arr[None, :], True
    if arr.ndim == 2:
        return arr, False
    raise ShapeError(f"estimate: x must have shape (d,) or (P, d), got {arr.shape}")


def _check_mu(mu: float) -> float:
    if not (isinstance(mu, (int, float, np.floating)) and math.isfinite(mu) and mu > 0):
        raise InvalidParameterError(
            f"the smoothing radius mu must be a finite positive number, got {mu!r}; "
            "typical values are 1e-4 .. 1e-2"
        )
    return float(mu)


def _call(fun: BatchFunction, pts: Array) -> Array:
    vals = np.asarray(fun(pts), dtype=np.float64)
    if vals.ndim == 1:
        vals = vals[:, None]
    if vals.ndim != 2 or vals.shape[0] != pts.shape[0]:
        raise ShapeError(f"estimate: the function returned shape {vals.shape} for {pts.shape[0]} points")
    return vals


def _checked_values(pts: Array, fun: BatchFunction) -> Array:
    """``fun``'s values at ``pts``, checked: :meth:`_RandomDirections.gradient`'s ``evaluate``."""
    return _call(fun, pts)


_NDARRAY = np.ndarray
#: the float64 dtype (an array of native float64 numbers has this very object as its dtype; one
#: that does not, e.g. unpickled, only takes the general path)
_F64 = np.dtype(np.float64)

#: a step ``mu * max|u|`` below this fraction of ``max(1, max|x|)`` is far under any useful smoothing
#: radius: exactly zero differences there are read as underflow, not as a flat function
UNDERFLOW_RELATIVE_STEP = 1e-12


def _check_underflow(est: object, diffs: Array, base: Array, perturbed: Array, h: float, umax: float) -> None:
    """Warn once per estimator (:class:`~zoframe.errors.EstimatorUnderflowWarning`) when the differences underflow.

    Called only when every difference in ``diffs`` is exactly zero (the caller's one ``count_nonzero`` is all
    the common case costs); ``base`` are the base points, broadcast against the perturbed points
    ``perturbed``. The warning fires if no perturbed point differs from its base
    point (``x + mu u == x``), or if the step ``mu * max|u|`` is below ``UNDERFLOW_RELATIVE_STEP``
    relative to ``max(1, max|x|)``. Exactly zero differences at a sensible radius (a function flat
    around ``x``, an inactive ``max(g, 0)``) are the true estimate and stay silent.
    """
    if getattr(est, "_underflow_warned", False):
        return
    scale = max(1.0, float(np.abs(base).max()))
    if not (perturbed != base).any():
        why = f"x + mu*u == x for every direction: mu={h:g} is below the floating-point spacing of x (|x| up to {scale:.3g})"
    elif h * umax <= UNDERFLOW_RELATIVE_STEP * scale:
        why = (
            f"all {diffs.size} finite differences are exactly 0 with mu={h:g}: a step of {h * umax:.3g} at |x| up to "
            f"{scale:.3g} is below the resolution of the function values"
        )
    else:
        return
    object.__setattr__(est, "_underflow_warned", True)  # once per estimator (frozen dataclass: no field)
    warnings.warn(
        EstimatorUnderflowWarning(
            f"{type(est).__name__}: {why}. The gradient estimate is exactly 0, so the iterate will not move; "
            "use a larger mu (typically 1e-4 .. 1e-2 times the scale of x)."
        ),
        stacklevel=3,
    )


def _finite_rows(vals: Array, what: str) -> NDArray[np.bool_]:
    """The rows of ``vals`` (base point first, then one per direction) whose values are all finite, as a
    boolean mask over the directions; raises when the base point or every direction is non-finite.

    A value that is not finite (the user's function returned NaN / inf, kept as ``+inf`` under
    ``nonfinite="inf"``) is a failed trial: the direction is left out of the estimate, which averages
    over the directions that remain (a point at the edge of a region where the function is undefined
    still gets an estimate from the directions that point inside it). A non-finite value at the base point
    itself ends the run as diverged (:class:`~zoframe.errors.DivergedError`): the iterate has walked into a
    region where the function is undefined."""
    ok: NDArray[np.bool_] = np.asarray(np.isfinite(vals).all(axis=1))
    if not ok[0]:
        raise DivergedError(
            f"{what}: the function is not finite at the point itself, so no difference can be taken there; the "
            "iterate lies in a region where the function is undefined"
        )
    if not ok[1:].any():
        raise NonFiniteValueError(
            f"{what}: every perturbed point of the estimate gave a non-finite value (the point is at the edge of a "
            "region where the function is undefined, and the smoothing radius reaches into it); use a smaller mu"
        )
    return ok[1:]


def _perturbed(x: Array, U: Array, h: float) -> Array:
    """The ``(q + 1, d)`` points of one random-direction estimate: ``x``, then ``x + h u_i`` for the rows
    ``u_i`` of ``U`` (one fresh matrix, the points of one oracle call)."""
    pts = np.empty((U.shape[0] + 1, U.shape[1]))
    pts[0] = x
    tail = pts[1:]
    np.multiply(U, h, out=tail)
    tail += x
    return pts


@dataclass(frozen=True)
class _RandomDirections:
    """Forward differences along q random directions: the shared machinery of GauSGE / UniSGE."""

    q: int = param(10, symbol="q", doc="number of random directions per estimate")
    mu: float = param(1e-3, symbol="mu", doc="smoothing radius")

    #: whether :meth:`estimate`, :meth:`_single`, :meth:`gradient` and :meth:`oracle_gradient` are
    #: this module's: then the last two compute estimate()'s ``grad`` themselves, from a fresh matrix
    #: of points that they only read after the call (so a caller may let the oracle keep it:
    #: ``CountingOracle.objective_owned``); a subclass that redefines estimate or _single is always
    #: asked through estimate()
    plain_estimate: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        methods = ("estimate", "_single", "gradient", "oracle_gradient")
        cls.plain_estimate = all(getattr(cls, m) is getattr(_RandomDirections, m) for m in methods)

    def __post_init__(self) -> None:
        if not isinstance(self.q, (int, np.integer)) or self.q < 1:
            raise InvalidParameterError(f"q (number of directions) must be a positive integer, got {self.q!r}")
        _check_mu(self.mu)

    def rows(self, dim: int, points: int = 1) -> int:
        """``points * (q + 1)``: each base point plus its q perturbations."""
        return points * (self.q + 1)

    def directions(self, dim: int, rng: np.random.Generator) -> Array:
        raise NotImplementedError

    def scale(self, dim: int) -> float:
        raise NotImplementedError

    def _single(self, fun: BatchFunction, x: Array, U: Array, h: float, per_component: bool) -> Estimate:
        """One base point: the same formulas with plain matrix products (the common, hot case)."""
        q, d = U.shape
        pts = _perturbed(x, U, h)
        vals = _call(fun, pts)  # ONE call, (q+1, b)
        if not np.isfinite(vals[0]).all():  # before any difference (inf - inf): the point itself
            _finite_rows(vals, type(self).__name__)
        diffs = (vals[1:] - vals[0]) * (1.0 / h)  # (q, b)
        if not np.count_nonzero(diffs):  # one C pass (cheaper than .any()): the common case ends here
            _check_underflow(self, diffs, x, pts[1:], h, float(np.abs(U).max()))
        b = vals.shape[1]
        if not np.isfinite(diffs.sum()):  # a failed trial among the directions: left out (_finite_rows)
            keep = _finite_rows(vals, type(self).__name__)
            diffs, U, q = diffs[keep], U[keep], int(keep.sum())
        c = self.scale(d) / q
        grad: Array = (c / b) * (diffs.sum(axis=1) @ U)
        comp: Array | None = c * (diffs.T @ U) if per_component else None
        return Estimate(grad, comp, vals[0], (q + 1) * b)

    def gradient(self, fun: BatchFunction, x: Array, rng: np.random.Generator) -> Array:
        """``estimate(fun, x, rng).grad`` at one base point, bit for bit, without the rest of the :class:`Estimate`.

        The hot path of one-point solvers (ZO-SGD): the same directions, points, single call and
        arithmetic as :meth:`estimate`, minus the per-component, base-value and count bookkeeping.
        ``x`` other than a float64 array of shape ``(d,)``, or a subclass that redefines
        :meth:`estimate`, goes through :meth:`estimate`.
        """
        if not self.plain_estimate or type(x) is not _NDARRAY or x.dtype is not _F64 or x.ndim != 1:
            return self.estimate(fun, x, rng).grad
        return self.oracle_gradient(_checked_values, fun, x, rng)

    def oracle_gradient(self, evaluate: Callable[[Array, Any], Array], idx: Any, x: Array,
                        rng: np.random.Generator) -> Array:
        """:meth:`gradient` of ``X -> evaluate(X, idx)``, bit for bit, for an oracle's evaluation method.

        ``evaluate(points, idx)`` must return checked ``(k, b)`` float64 values (as the
        :class:`~zoframe.oracle.CountingOracle`'s ``objective`` and ``objective_owned`` do: they are
        not checked again) and may keep ``points``: each call gets a fresh matrix, which is only read
        after the call (so ``objective_owned`` can use it without a copy). Same fallbacks as
        :meth:`gradient` (which is this method with the values checked by ``_call``).
        """
        if not self.plain_estimate or type(x) is not _NDARRAY or x.dtype is not _F64 or x.ndim != 1:
            return self.estimate(lambda X: evaluate(X, idx), x, rng).grad
        h = self.mu
        d = x.shape[0]
        U = self.directions(d, rng)
        q = U.shape[0]
        pts = _perturbed(x, U, h)
        tail = pts[1:]
        vals = evaluate(pts, idx)  # ONE call, (q+1, b), checked by the oracle
        # before any difference (inf - inf): the point itself; a finite sum of its values says they are all finite
        # (one reduction), an infinite one sends to the exact test
        if not math.isfinite(float(np.add.reduce(vals[0]))) and not np.isfinite(vals[0]).all():
            _finite_rows(vals, type(self).__name__)
        diffs = vals[1:] - vals[0]
        diffs *= 1.0 / h
        sums = np.add.reduce(diffs, axis=1)
        if not sums[0] and not np.count_nonzero(diffs):
            _check_underflow(self, diffs, x, tail, h, float(np.abs(U).max()))
        if not math.isfinite(float(np.add.reduce(sums))):  # a failed trial among the directions: left out
            keep = _finite_rows(vals, type(self).__name__)
            sums, U, q = sums[keep], U[keep], int(keep.sum())
        c = self.scale(d) / q
        grad: Array = (c / vals.shape[1]) * (sums @ U)
        return grad

    def estimate(
        self,
        fun: BatchFunction,
        x: Array,
        rng: np.random.Generator,
        *,
        mu: float | None = None,
        per_component: bool = False,
    ) -> Estimate:
        base, single = _base_points(x)
        P, d = base.shape
        h = self.mu if mu is None else _check_mu(mu)
        U = self.directions(d, rng)  # (q, d), shared by every base point
        if single:
            return self._single(fun, base[0], U, h, per_component)
        offsets = np.vstack([np.zeros((1, d)), h * U])  # (q+1, d)
        pts = (base[:, None, :] + offsets[None, :, :]).reshape(P * (self.q + 1), d)
        vals = _call(fun, pts).reshape(P, self.q + 1, -1)  # ONE call
        if not np.isfinite(vals[:, 0, :]).all():  # before any difference (inf - inf): the points themselves
            for p in range(P):
                _finite_rows(vals[p], type(self).__name__)
        diffs = (vals[:, 1:, :] - vals[:, :1, :]) / h  # (P, q, b)
        if not np.count_nonzero(diffs):  # one C pass (cheaper than .any()): the common case ends here
            pts3 = pts.reshape(P, self.q + 1, d)
            _check_underflow(self, diffs, pts3[:, :1], pts3[:, 1:], h, float(np.abs(U).max()))
        weights = np.full((P, self.q), 1.0 / self.q)
        if not np.isfinite(diffs.sum()):  # failed trials: each base point averages over its finite directions
            keep = np.array([_finite_rows(vals[p], type(self).__name__) for p in range(P)])  # P base points: small
            weights = keep / keep.sum(axis=1, keepdims=True)
            diffs = np.where(keep[:, :, None], diffs, 0.0)
        c = self.scale(d)
        grad = c * np.einsum("pq,qd->pd", diffs.mean(axis=2) * weights, U)
        comp = c * np.einsum("pqb,qd->pbd", diffs * weights[:, :, None], U) if per_component else None
        values = vals[:, 0, :]
        calls = pts.shape[0] * vals.shape[2]
        if single:
            return Estimate(grad[0], None if comp is None else comp[0], values[0], calls)
        return Estimate(grad, comp, values, calls)


@dataclass(frozen=True)
class GaussianEstimator(_RandomDirections):
    """GauSGE: ``(1/q) sum_k (F(x + mu u_k) - F(x)) / mu * u_k`` with ``u_k ~ N(0, I)``.

    Unbiased for the gradient of ``F_mu(x) = E_u F(x + mu u)`` (Nesterov and Spokoiny 2017).
    Cost: ``q + 1`` evaluations per component and base point.
    """

    def directions(self, dim: int, rng: np.random.Generator) -> Array:
        return rng.standard_normal((self.q, dim))

    def scale(self, dim: int) -> float:
        return 1.0


@dataclass(frozen=True)
class SphereEstimator(_RandomDirections):
    """UniSGE: ``(d/q) sum_k (F(x + mu u_k) - F(x)) / mu * u_k``, ``u_k`` uniform on the sphere.

    Unbiased for the gradient of the ball-smoothed function (Flaxman et al. 2005).
    """

    def directions(self, dim: int, rng: np.random.Generator) -> Array:
        U = rng.standard_normal((self.q, dim))
        out: Array = U / np.linalg.norm(U, axis=1, keepdims=True)
        return out

    def scale(self, dim: int) -> float:
        return float(dim)


@dataclass(frozen=True)
class CoordinateEstimator:
    """CooSGE: ``sum_j (F(x + mu e_j) - F(x - mu e_j)) / (2 mu) e_j`` (Huang et al. 2019, eq. 4).

    Central differences along every coordinate: ``2 d`` evaluations per component and base point;
    exact (up to rounding) on quadratics. Deterministic: ``rng`` is not used.
    """

    mu: float = param(1e-4, symbol="mu", doc="coordinate smoothing radius")

    def __post_init__(self) -> None:
        _check_mu(self.mu)

    def rows(self, dim: int, points: int = 1) -> int:
        """``points * 2 d``."""
        return points * 2 * dim

    def estimate(
        self,
        fun: BatchFunction,
        x: Array,
        rng: np.random.Generator,
        *,
        mu: float | None = None,
        per_component: bool = False,
    ) -> Estimate:
        base, single = _base_points(x)
        P, d = base.shape
        h = self.mu if mu is None else _check_mu(mu)
        E = h * np.eye(d)
        offsets = np.vstack([E, -E])  # (2d, d)
        pts = (base[:, None, :] + offsets[None, :, :]).reshape(P * 2 * d, d)
        vals = _call(fun, pts).reshape(P, 2 * d, -1)  # ONE call
        if np.isfinite(vals).all():
            comp = (vals[:, :d, :] - vals[:, d:, :]).transpose(0, 2, 1) / (2.0 * h)  # (P, b, d)
        else:  # a failed trial: the one-sided difference from the other side
            comp = self._one_sided(fun, base, vals, h)
        if not np.count_nonzero(comp):
            _check_underflow(self, comp, base[:, None, :], pts.reshape(P, 2 * d, d), h, 1.0)
        grad = comp.mean(axis=1)
        calls = pts.shape[0] * vals.shape[2]
        if single:
            return Estimate(grad[0], comp[0] if per_component else None, None, calls)
        return Estimate(grad, comp if per_component else None, None, calls)

    def _one_sided(self, fun: BatchFunction, base: Array, vals: Array, h: float) -> Array:
        """The per-component differences ``(P, b, d)`` when a central difference met a non-finite value (a failed
        trial): the forward or backward difference from the side that is finite, with the base values (one more
        call, of the base points); raises when both sides, or the base point, are non-finite."""
        d = base.shape[1]
        f0 = _call(fun, base)  # (P, b): only in this rare case
        if not np.isfinite(f0).all():
            raise DivergedError(
                f"{type(self).__name__}: the function is not finite at the point itself, so no difference can be "
                "taken there; the iterate lies in a region where the function is undefined"
            )
        plus, minus = vals[:, :d, :], vals[:, d:, :]  # (P, d, b)
        ok_p, ok_m = np.isfinite(plus), np.isfinite(minus)
        fwd = (plus - f0[:, None, :]) / h
        bwd = (f0[:, None, :] - minus) / h
        if not (ok_p | ok_m).all():
            raise NonFiniteValueError(
                f"{type(self).__name__}: both points of a central difference gave non-finite values (the point is "
                "at the edge of a region where the function is undefined); use a smaller mu"
            )
        with np.errstate(invalid="ignore"):  # the differences of the failed sides are not used
            one = np.where(ok_p & ok_m, (plus - minus) / (2.0 * h), np.where(ok_p, fwd, bwd))
        out: Array = one.transpose(0, 2, 1)
        return out
