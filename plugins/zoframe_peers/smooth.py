"""Peers for smooth finite-sum and minimax black boxes: L-BFGS-B on differences, Py-BOBYQA, nested minimax.

What a user with a smooth black box would pick instead of a zeroth-order method, run through the
counting oracle like the other peers (:mod:`zoframe_peers.solvers`):

* ``lbfgsb-fd``: scipy's L-BFGS-B (Byrd, Lu, Nocedal & Zhu 1995; Zhu et al. 1997) on forward-difference
  gradients, the ``d`` difference points of one gradient sent as one batch;
* ``pybobyqa``: Py-BOBYQA (Cartis, Fiala, Marteau & Roberts 2019), Powell's BOBYQA with quadratic
  interpolation models in a trust region, one point at a time, with its noisy mode;
* ``nested-lbfgsb-fd``: ``min_x max_y F(x, y)`` as a user writes it by hand: L-BFGS-B on forward
  differences of ``Phi(x) = max_y F(x, y)``, each value of ``Phi`` an inner maximisation over ``y``.

How calls map: one peer point of a finite sum is the full objective at one ``x`` (``n`` evaluations of
kind ``objective``); one point of the nested minimax peer is ``F`` at one pair ``(x, y)`` (``n``
evaluations of kind ``minimax``). Budgets, the best point, the replay log and the vetting of a
"converged" claim are the framework's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
import math
from typing import Any, ClassVar

import numpy as np

from zoframe._optional import require
from zoframe.errors import IncompatibleProblemError, InvalidParameterError
from zoframe.oracle import CountingOracle
from zoframe.protocols import Array
from zoframe.result import Status
from zoframe.sets import Box
from zoframe.solver import check_int, check_positive
from zoframe.specs import param
from zoframe_peers._loop import AuxState, Outcome, Report, _OwnLoopPeer, _StatusSession
from zoframe_peers.solvers import (
    _F_LIMIT,
    _REL_STEP,
    _SCIPY_CHUNK,
    _X_GROWTH,
    _Batch,
    _Best,
    _box,
    _FDPeer,
    _forward_steps,
    _ScipyPeer,
    _Session,
    point_cost,
)

__all__ = ["LBFGSBFD", "NestedLBFGSBFD", "NestedState", "PyBOBYQA"]

FINITE_SUM = frozenset({"finite_sum"})


def _points_left(oracle: CountingOracle, maxfev: int | None, replay: Array | None) -> int | None:
    """The peer points a run may evaluate in all: ``maxfev``, else what is left of ``max_calls`` (after a
    resume the logged points count too, so the library is told what the uninterrupted run was told),
    else ``None`` (no limit)."""
    if maxfev is not None:
        return maxfev
    rem = oracle.remaining
    if rem is None:
        return None
    return rem // point_cost(oracle) + (0 if replay is None else int(replay.shape[0]))


def _threaded_session(
    peer: _ScipyPeer, oracle: CountingOracle, x0: Array, seed: int, best: _Best, replay: Array | None,
    run: Any, status_of: Callable[[Any], tuple[str, Status]],
) -> _Session:
    """:meth:`~zoframe_peers.solvers._ScipyPeer._session` with a session that reads the run's end by ``status_of``."""
    pps = getattr(peer, "points_per_step", None)
    chunk = int(pps) if pps is not None else _SCIPY_CHUNK * (oracle.dim + 1)
    session = _StatusSession(oracle, x0, seed, best, replay, chunk, run, peer.in_driver_thread, peer.method,
                             getattr(peer, "maxfev", None))
    session.status_of = status_of
    return session


# --------------------------------------------------------------------------- L-BFGS-B on differences
def _lbfgsb_status(outcome: Any) -> tuple[str, Status]:
    """scipy's L-BFGS-B ending: ``success`` is a claim (vetted), status 1 its own limits (``BUDGET``),
    status 2 a stop without a convergence test (an abnormal line search: ``FAILED``)."""
    if isinstance(outcome, Outcome):
        return outcome.message, outcome.status
    message = f"scipy: {getattr(outcome, 'message', '')}"
    if bool(getattr(outcome, "success", False)):
        return message, Status.CONVERGED
    code = getattr(outcome, "status", None)
    if code == 1:
        return message, Status.BUDGET
    return f"{message} (status {code}: the peer stopped without success)", Status.FAILED


@dataclass(frozen=True)
class LBFGSBFD(_FDPeer):
    """scipy's L-BFGS-B (Byrd, Lu, Nocedal & Zhu 1995; Zhu, Byrd, Lu & Nocedal 1997) with forward-difference
    gradients of the full objective.

    At each point where L-BFGS-B asks for the gradient, the ``d`` points ``x + h_i e_i`` (scipy's
    ``"2-point"`` rule, ``h_i = rel_step sign(x_i) max(1, |x_i|)``, taken backwards where a step would
    leave the bounds: one-sided at a bound) are one batch, one oracle call; ``f(x)`` is the point
    L-BFGS-B has just asked for (not paid twice). Box bounds go to L-BFGS-B as bounds. scipy's
    success (``ftol`` on the relative reduction of ``f``, ``gtol`` on the largest projected-gradient
    entry) is vetted, then the run's certificate decides ``success``.
    """

    problem_kinds: ClassVar[frozenset[str]] = FINITE_SUM
    method: ClassVar[str] = "L-BFGS-B"
    peer_name: ClassVar[str] = "lbfgsb-fd"
    maxcor: int = param(10, symbol="m", doc="L-BFGS memory: correction pairs kept (scipy's maxcor)")
    ftol: float = param(2.220446049250313e-09, doc="stop when the relative reduction of f is below ftol (scipy's default)")
    gtol: float = param(1e-5, doc="stop when the largest projected-gradient entry is below gtol (scipy's default)")
    maxls: int = param(20, doc="line-search steps per iteration (scipy's default)")
    maxfev: int | None = param(None, doc="cap on peer points (None: max_calls binds)")
    points_per_step: int | None = param(None, doc="peer points between driver iterations (None: 10 (dim + 1))")

    def __post_init__(self) -> None:
        check_int("maxcor", self.maxcor)
        check_positive("ftol", self.ftol)
        check_positive("gtol", self.gtol)
        check_int("maxls", self.maxls)
        self._check_fd()
        self._check()

    def _options(self, oracle: CountingOracle, maxpoints: int) -> dict[str, Any]:
        # an L-BFGS-B evaluation costs at least one point: maxpoints never binds before the points do
        limit = maxpoints if maxpoints else 15000
        return {"maxcor": self.maxcor, "ftol": self.ftol, "gtol": self.gtol, "maxls": self.maxls,
                "maxfun": limit, "maxiter": limit}

    def _session(
        self, oracle: CountingOracle, x0: Array, seed: int, best: _Best, replay: Array | None
    ) -> _Session:
        maxpoints = _points_left(oracle, self.maxfev, replay)
        run = self._target(x0, _box(oracle), False, self._options(oracle, 0 if maxpoints is None else maxpoints + 2))
        return _threaded_session(self, oracle, x0, seed, best, replay, run, _lbfgsb_status)


# --------------------------------------------------------------------------- Py-BOBYQA
def _pybobyqa() -> Any:
    return require("pybobyqa", extra="pybobyqa", feature="the pybobyqa peer (Py-BOBYQA)")


def _flag_status(library: str, outcome: Any) -> tuple[str, Status]:
    """The end of a Py-BOBYQA or DFO-LS run by its exit flag (the two share them): 0 (``EXIT_SUCCESS``:
    rho reached rhoend, or all values within the noise level) is a claim, 1 (``EXIT_MAXFUN_WARNING``)
    a budget stop; the others (slow progress, false successes, a restart criterion, a linear-algebra
    or input error) stop without a convergence test."""
    flag = int(getattr(outcome, "flag", -99))
    message = f"{library}: {getattr(outcome, 'msg', '')}"
    if flag == 0:
        return message, Status.CONVERGED
    if flag == 1:
        return message, Status.BUDGET
    return f"{message} (flag {flag}: the peer stopped without success)", Status.FAILED


def _scale(x0: Array) -> float:
    return max(1.0, float(np.abs(x0).max(initial=0.0)))


#: a bound beyond this is no bound for Py-BOBYQA and DFO-LS (their own stand-in for infinity)
_NO_BOUND = 1e20


@dataclass(frozen=True)
class PyBOBYQA(_ScipyPeer):
    """Py-BOBYQA (Cartis, Fiala, Marteau & Roberts, ACM TOMS 2019): Powell's BOBYQA (2009), quadratic
    interpolation models of ``f`` in a trust region, with simple bounds.

    Py-BOBYQA asks for one point at a time; each is one peer point (``n`` evaluations, the full
    objective). It is told ``maxfun`` = the points left (``max_calls`` over the point cost, or
    ``maxfev``), at least ``npt + 1`` (below that it warns; the oracle still holds the budget exactly),
    and its flag 0 (rho has reached rhoend) is vetted. ``noisy=True`` is Py-BOBYQA's mode for noisy
    objectives (``objfun_has_noise=True``: slower radius decreases, a stop when all values are within
    the noise level, and restarts); its restarts are hard ones (from the best point, coordinate
    directions), because its soft restarts draw random directions from numpy's global generator,
    which no seed of the run controls.
    """

    problem_kinds: ClassVar[frozenset[str]] = FINITE_SUM
    method: ClassVar[str] = "pybobyqa"
    peer_name: ClassVar[str] = "pybobyqa"
    rhobeg: float | None = param(None, symbol="rho_beg", doc="initial trust-region radius (None: 0.1 max(1, |x0|_inf), at most half the narrowest bound gap)")
    rhoend: float | None = param(None, symbol="rho_end", doc="final trust-region radius (None: 1e-8 max(1, |x0|_inf), below rhobeg / 100)")
    npt: int | None = param(None, doc="interpolation points (None: Py-BOBYQA's 2 d + 1)")
    noisy: bool = param(False, doc="Py-BOBYQA's noisy mode (objfun_has_noise=True), with hard restarts")
    maxfev: int | None = param(None, doc="cap on peer points (None: max_calls binds)")
    points_per_step: int | None = param(None, doc="peer points between driver iterations (None: 10 (dim + 1))")

    def __post_init__(self) -> None:
        if self.rhobeg is not None:
            check_positive("rhobeg", self.rhobeg, "rho_beg")
        if self.rhoend is not None:
            check_positive("rhoend", self.rhoend, "rho_end")
        if self.rhobeg is not None and self.rhoend is not None and self.rhoend >= self.rhobeg:
            raise InvalidParameterError(f"rhoend={self.rhoend} must be below rhobeg={self.rhobeg}")
        if self.npt is not None:
            check_int("npt", self.npt, 2)
        if not isinstance(self.noisy, (bool, np.bool_)):
            raise InvalidParameterError(f"noisy must be True or False, got {self.noisy!r}")
        self._check()

    def validate(self, oracle: CountingOracle) -> None:
        super().validate(oracle)
        _pybobyqa()
        d = oracle.dim
        if self.npt is not None and not d + 2 <= self.npt <= (d + 1) * (d + 2) // 2:
            raise InvalidParameterError(
                f"npt={self.npt} is outside Py-BOBYQA's range [d + 2, (d + 1)(d + 2) / 2] = [{d + 2}, {(d + 1) * (d + 2) // 2}] "
                f"for d = {d}"
            )
        box = _box(oracle)
        if box is not None and bool(np.any(box[1] - box[0] <= 0.0)):
            i = int(np.flatnonzero(box[1] - box[0] <= 0.0)[0])
            raise IncompatibleProblemError(
                f"pybobyqa needs upper > lower for every variable (its trust region must fit between the bounds); "
                f"variable {i} has lower = upper = {box[0][i]}: remove the fixed variable from the problem"
            )

    def _radii(self, x0: Array, box: tuple[Array, Array] | None) -> tuple[float, float]:
        s = _scale(x0)
        rhobeg = 0.1 * s if self.rhobeg is None else float(self.rhobeg)
        if self.rhobeg is None and box is not None:
            rhobeg = min(rhobeg, 0.5 * float(np.min(box[1] - box[0])))
        rhoend = min(1e-8 * s, 1e-2 * rhobeg) if self.rhoend is None else float(self.rhoend)
        return rhobeg, rhoend

    def _session(
        self, oracle: CountingOracle, x0: Array, seed: int, best: _Best, replay: Array | None
    ) -> _Session:
        box = _box(oracle)
        rhobeg, rhoend = self._radii(x0, box)
        npt = 2 * oracle.dim + 1 if self.npt is None else int(self.npt)
        left = _points_left(oracle, self.maxfev, replay)
        # below npt + 1 Py-BOBYQA warns that the budget is small; the oracle (and maxfev) cut the run exactly
        maxfun = None if left is None else max(left, npt + 1)
        bounds = None if box is None else (np.clip(box[0], -_NO_BOUND, _NO_BOUND), np.clip(box[1], -_NO_BOUND, _NO_BOUND))
        params = {"restarts.use_soft_restarts": False} if self.noisy else None
        start = np.array(x0, dtype=np.float64, copy=True)
        noisy = bool(self.noisy)

        def run(point: Callable[[Array], float], last: Callable[[], Array | None], batch: _Batch) -> Any:
            lib = _pybobyqa()
            with np.errstate(all="ignore"):
                return lib.solve(point, start.copy(), bounds=bounds, npt=npt, rhobeg=rhobeg, rhoend=rhoend,
                                 maxfun=maxfun, user_params=params, objfun_has_noise=noisy, do_logging=False)

        return _threaded_session(self, oracle, x0, seed, best, replay, run,
                                 lambda outcome: _flag_status("pybobyqa", outcome))


# --------------------------------------------------------------------------- nested minimax
class _InnerStop(Exception):
    """The inner maximisation cannot give ``Phi(x)``: ``F`` is unbounded above in ``y``, or not finite."""


@dataclass(frozen=True)
class NestedState(AuxState):
    """The nested minimax peer's state: ``aux = (y,)``, the inner maximiser at the best ``x``."""


def _differences(F: Array, base: float, D: Array) -> Array:
    """Forward differences ``(F_i - base) / D_i``; a zero step (a variable fixed by its bounds) gives 0."""
    fixed = D == 0.0
    out: Array = np.where(fixed, 0.0, (F - base) / np.where(fixed, 1.0, D))
    return out


class _Inner:
    """``max_{y in Y} F(x, y)`` for one ``x``: the inner solve of :class:`NestedLBFGSBFD`.

    Every value comes from ``batch`` (rows ``[x, y]``). ``Y`` is ``None`` or a :class:`~zoframe.sets.Box`:
    scipy's L-BFGS-B on ``-F(x, .)`` with forward differences (one batch of ``1 + d_y`` rows per value
    and gradient, the form L-BFGS-B asks for them in), stopping on scipy's relative reduction
    ``ftol = tol`` or after ``maxiter`` iterations. Any other ``Y`` (a simplex, a ball: a set with a
    projection): a spectral projected-gradient ascent (Birgin, Martinez & Raydan 2000), monotone, with
    an Armijo backtracking along the projection arc and Barzilai-Borwein trial steps; it stops when
    an accepted step raises ``F`` by at most ``tol`` of ``max(1, |F|)`` (the same relative rule), when
    the backtracking cannot raise ``F`` (the noise level), or after ``maxiter`` iterations. The
    difference points of a projected solve may leave ``Y`` (as the certificate's do); only points of
    ``Y`` are candidates for the maximum.

    ``maximise(x, y)`` returns the largest value seen at a point of ``Y`` and that point.
    """

    def __init__(self, batch: _Batch, d: int, y_set: Any, dim_y: int, tol: float, maxiter: int, rel_step: float,
                 y_scale: float) -> None:
        self.batch = batch
        self.d = d
        self.dim_y = dim_y
        self.box: tuple[Array, Array] | None = None
        self.project: Callable[[Array], Array] | None = None
        if isinstance(y_set, Box):
            self.box = (np.broadcast_to(np.asarray(y_set.lower, dtype=np.float64), (dim_y,)).copy(),
                        np.broadcast_to(np.asarray(y_set.upper, dtype=np.float64), (dim_y,)).copy())
        elif y_set is not None:
            self.project = y_set.project
        self.tol = tol
        self.maxiter = maxiter
        self.rel_step = rel_step
        self.limit = _X_GROWTH * y_scale

    def _values(self, x: Array, Y: Array) -> Array:
        F, _ = self.batch(np.hstack([np.broadcast_to(x, (Y.shape[0], self.d)), Y]))
        if not bool(np.isfinite(F).all()):
            raise _InnerStop(
                "F returned non-finite values in the inner maximisation (with nonfinite='inf' they stand for "
                "+inf): Phi(x) = max_y F(x, y) has no value there"
            )
        return F

    def maximise(self, x: Array, y_start: Array) -> tuple[float, Array]:
        best: list[Any] = [-math.inf, y_start]

        def seen(f: float, y: Array) -> None:
            if f > best[0]:
                best[0], best[1] = f, y.copy()
            if not (f <= _F_LIMIT and float(np.abs(y).max(initial=0.0)) <= self.limit):
                raise _InnerStop(
                    f"the inner maximisation ran away (F = {f:.3g}, |y|_inf = {float(np.abs(y).max()):.3g}): F(x, .) "
                    "may be unbounded above; give y_set a bounded set"
                )

        if self.project is None:
            self._lbfgsb(x, y_start, seen)
        else:
            self._projected(x, y_start, seen, self.project)
        return float(best[0]), np.asarray(best[1], dtype=np.float64)

    def _lbfgsb(self, x: Array, y_start: Array, seen: Callable[[float, Array], None]) -> None:
        from scipy import optimize

        box = self.box

        def fg(y: Array) -> tuple[float, Array]:
            y = np.asarray(y, dtype=np.float64)
            if box is not None:
                y = np.clip(y, box[0], box[1])
            D = _forward_steps(y, self.rel_step, box)
            F = self._values(x, np.vstack([y[None, :], D]))  # one batch: F(x, y) and its d_y difference points
            seen(float(F[0]), y)
            g = _differences(F[1:], F[0], np.diagonal(D - y))
            return -float(F[0]), -g

        kwargs: dict[str, Any] = {"method": "L-BFGS-B", "jac": True,
                                  "options": {"ftol": self.tol, "gtol": 0.0, "maxiter": self.maxiter}}
        if box is not None:
            kwargs["bounds"] = optimize.Bounds(box[0], box[1])
        start = y_start if box is None else np.clip(y_start, box[0], box[1])
        with np.errstate(all="ignore"):
            optimize.minimize(fg, start, **kwargs)

    def _projected(
        self, x: Array, y_start: Array, seen: Callable[[float, Array], None], project: Callable[[Array], Array]
    ) -> None:
        y = np.asarray(project(y_start), dtype=np.float64)
        s_y = max(1.0, float(np.abs(y).max(initial=0.0)))

        def gradient(y: Array, f: float | None) -> tuple[float, Array]:
            D = _forward_steps(y, self.rel_step, None)
            if f is None:  # the value and the differences in one batch
                F = self._values(x, np.vstack([y[None, :], D]))
                f, F = float(F[0]), F[1:]
            else:
                F = self._values(x, D)
            return f, _differences(F, f, np.diagonal(D - y))

        f, g = gradient(y, None)
        seen(f, y)
        gn = float(np.linalg.norm(g))
        alpha = 0.1 * s_y / gn if gn > 0 else 1.0  # the first trial moves y by a tenth of its scale
        for _ in range(self.maxiter):
            for _ls in range(60):  # Armijo along the projection arc: F(P(y + a g)) >= F(y) + 1e-4 <g, step>
                yt = np.asarray(project(y + alpha * g), dtype=np.float64)
                step = yt - y
                if not bool(np.any(step)):
                    return  # y is a fixed point of the projected step: stationary at this resolution
                ft = float(self._values(x, yt[None, :])[0])
                seen(ft, yt)
                if ft >= f + 1e-4 * float(g @ step):
                    break
                alpha *= 0.5
            else:
                return  # no increase along the arc: the noise level of F
            if ft - f <= self.tol * max(1.0, abs(f), abs(ft)):
                return
            ft, gt = gradient(yt, ft)
            sr = float(step @ (gt - g))
            # Barzilai-Borwein step for the ascent (the curvature of -F along the step is -sr / |step|^2)
            alpha = float(step @ step) / -sr if sr < 0 else 1e3 * alpha
            alpha = min(max(alpha, 1e-12 * s_y), 1e12 * s_y)
            y, f, g = yt, ft, gt


@dataclass(frozen=True)
class NestedLBFGSBFD(_OwnLoopPeer):
    """``min_x max_{y in Y} F(x, y)`` nested, as written by hand: scipy's L-BFGS-B (Byrd, Lu, Nocedal & Zhu
    1995) on forward differences of ``Phi(x) = max_{y in Y} F(x, y)``, each value of ``Phi`` an inner
    maximisation.

    Outer loop: L-BFGS-B asks for ``Phi`` and its gradient at ``x``; ``Phi(x)`` is one inner solve
    warm-started at the last maximiser ``y*``, then each of the ``d`` difference points
    ``x + h_i e_i`` (``h_i = rel_step max(1, |x_i|)``, backwards at a bound of a box on ``x``) is one
    more inner solve warm-started at ``y*(x)``; the gradient is ``(Phi(x + h_i e_i) - Phi(x)) / h_i``.
    Inner loop (:class:`_Inner`): L-BFGS-B on ``-F(x, .)`` with forward differences when ``Y`` is all
    of ``R^{d_y}`` or a box, a projected-gradient ascent with backtracking for another set (a simplex,
    a ball), stopping on a relative change of ``F`` of ``inner_tol`` (default ``1e-12``, tight enough
    that the differences of ``Phi``, of relative size ``1e-8``, stand above the inner solve's error:
    that error in ``Phi`` is quadratic in the error of ``y``). Every value is one pair ``(x, y)``:
    a peer point of ``n`` evaluations of kind ``minimax``; the ``1 + d_y`` points of an inner value
    and gradient are one batch.

    The best point is the ``x`` of lowest ``Phi``, reported with its maximiser ``y`` (the output
    ``y``, which zoframe's minimax certificate tests). scipy's success is vetted; an inner solve that
    runs away (``F`` unbounded above in ``y``) or meets non-finite values ends the run ``DIVERGED``.
    """

    problem_kinds: ClassVar[frozenset[str]] = frozenset({"minimax"})
    peer_name: ClassVar[str] = "nested-lbfgsb-fd"
    state_cls: ClassVar[type[AuxState]] = NestedState
    maxcor: int = param(10, symbol="m", doc="outer L-BFGS memory (scipy's maxcor)")
    ftol: float = param(2.220446049250313e-09, doc="outer stop: relative reduction of Phi below ftol (scipy's default)")
    gtol: float = param(1e-5, doc="outer stop: largest projected-gradient entry of Phi below gtol (scipy's default)")
    inner_tol: float = param(1e-12, doc="inner stop: relative increase of F below inner_tol")
    inner_maxiter: int = param(100, doc="iterations of one inner maximisation at most")
    rel_step: float = param(_REL_STEP, doc="relative difference step, outer and inner (sqrt(eps))")
    maxfev: int | None = param(None, doc="cap on peer points (pairs (x, y)); None: max_calls binds")
    points_per_step: int | None = param(None, doc="peer points between driver iterations (None: 10 (dim + 1))")

    def __post_init__(self) -> None:
        check_int("maxcor", self.maxcor)
        check_positive("ftol", self.ftol)
        check_positive("gtol", self.gtol)
        check_positive("inner_tol", self.inner_tol)
        check_int("inner_maxiter", self.inner_maxiter)
        check_positive("rel_step", self.rel_step)
        if self.rel_step >= 1.0:
            raise InvalidParameterError(f"rel_step must be below 1, got {self.rel_step}")
        self._check()

    def validate(self, oracle: CountingOracle) -> None:
        super().validate(oracle)
        y_set = oracle.y_set
        if y_set is not None and not callable(getattr(y_set, "project", None)):
            raise IncompatibleProblemError(
                f"{self.peer_name} needs y_set to be None, a Box or a set with a projection (project()); got "
                f"{type(y_set).__name__}"
            )

    def outputs(self, state: Any) -> Mapping[str, Array]:
        return {"x": state.x, "y": state.aux[0]}

    def _evaluate(self, oracle: CountingOracle, XY: Array) -> tuple[Array, Array | None]:
        d = oracle.dim
        V = oracle.minimax(XY[:, :d], XY[:, d:], purpose="peer")
        return (V[:, 0].copy() if V.shape[1] == 1 else V.mean(axis=1)), None

    def _y_start(self, oracle: CountingOracle) -> Array:
        y0 = np.array(oracle.y0, dtype=np.float64, copy=True)
        return y0 if oracle.y_set is None else np.asarray(oracle.y_set.project(y0), dtype=np.float64)

    def _aux0(self, oracle: CountingOracle, x0: Array) -> tuple[Array, ...]:
        return (self._y_start(oracle),)

    def _status(self, outcome: Any) -> tuple[str, Status]:
        return _lbfgsb_status(outcome)

    def _run(self, oracle: CountingOracle, x0: Array, report: Report, *, maxpoints: int | None) -> Any:
        # the oracle's structure, read now: the loop itself holds no oracle
        d, dim_y, y_set = oracle.dim, oracle.dim_y, oracle.y_set
        xbox = _box(oracle)
        y_first = self._y_start(oracle)
        start = np.array(x0, dtype=np.float64, copy=True)
        limit = maxpoints if maxpoints else 15000
        options = {"maxcor": self.maxcor, "ftol": self.ftol, "gtol": self.gtol, "maxfun": limit, "maxiter": limit}
        tol, maxiter, rel_step = self.inner_tol, self.inner_maxiter, self.rel_step
        y_scale = max(1.0, float(np.abs(y_first).max(initial=0.0)))

        def run(point: Callable[[Array], float], last: Callable[[], Array | None], batch: _Batch) -> Any:
            from scipy import optimize

            inner = _Inner(batch, d, y_set, dim_y, tol, maxiter, rel_step, y_scale)
            warm = [y_first]

            def phi(x: Array, y_start: Array) -> tuple[float, Array]:
                value, y = inner.maximise(x, y_start)
                report(x, value, (y,))
                return value, y

            def fg(x: Array) -> tuple[float, Array]:
                x = np.asarray(x, dtype=np.float64)
                if xbox is not None:
                    x = np.clip(x, xbox[0], xbox[1])
                v0, y_star = phi(x, warm[0])  # Phi(x), warm-started at the last maximiser
                warm[0] = y_star
                D = _forward_steps(x, rel_step, xbox)
                V = np.array([phi(D[i], y_star)[0] for i in range(d)])  # Phi at x + h_i e_i, warm at y*(x)
                return v0, _differences(V, v0, np.diagonal(D - x))

            kwargs: dict[str, Any] = {"method": "L-BFGS-B", "jac": True, "options": options}
            if xbox is not None:
                kwargs["bounds"] = optimize.Bounds(xbox[0], xbox[1])
            try:
                with np.errstate(all="ignore"):
                    return optimize.minimize(fg, start, **kwargs)
            except _InnerStop as exc:
                return Outcome(str(exc), Status.DIVERGED)

        return run
