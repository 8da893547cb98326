"""Peers for composite black boxes ``min f(x) + sum_j psi_j(y_j)`` s.t. ``A x + sum_j B_j y_j = c``.

Both reduce the problem by its coupling first: when ``A x + B y = c`` determines ``y`` from ``x``
(``y = M x + e`` with ``M = -B^+ A``, ``e = B^+ c``: ``[B_1 ... B_k]`` of full column rank and ``range(A)``,
``c`` inside ``range(B)``, as :func:`zoframe_admm.coupling.prox_map` checks), the problem is
``min_x f(x) + h(x)`` with ``h(x) = sum_j psi_j(M_j x + e_j)``, and no splitting is needed:

* ``prox-fd``: accelerated proximal gradient (FISTA with backtracking, Beck & Teboulle 2009) on
  forward-difference gradients of ``f``, the prox of ``h`` by
  :func:`zoframe_admm.coupling.composed_prox` (the penalty's own prox when ``M = I``);
* ``dfols``: DFO-LS (Cartis, Fiala, Marteau & Roberts 2019) on the residuals of ``f`` with ``h`` as its
  regulariser (Liu, Lam & Roberts 2025), when ``M = I`` (the lasso form ``x - y = 0``).

Both report ``x`` and the blocks ``y0``, ``y1``, ... (``y_j = M_j x + e_j``; for ``dfols`` rounded by the
prox at its final resolution), ``prox-fd`` also ``lam``, so that zoframe's composite certificate
applies to the point they report. How calls map: one peer
point is the full smooth part at one ``x`` (``n`` evaluations of kind ``objective``: all ``n``
components, or all ``n`` residuals for ``dfols``); ``h`` is the penalties' own (white-box, not an
evaluation).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
import math
from typing import Any, ClassVar

import numpy as np

from zoframe._optional import require
from zoframe.errors import BudgetExhausted, IncompatibleProblemError, InvalidParameterError
from zoframe.oracle import CountingOracle
from zoframe.penalties import Zero
from zoframe.protocols import Array, Penalty
from zoframe.result import Status
from zoframe.solver import check_int, check_positive
from zoframe.specs import param
from zoframe_admm.coupling import ProxMap, check_coupling, composed_prox, prox_map
from zoframe_peers._loop import AuxState, Outcome, Report, _OwnLoopPeer, _OwnSession, mean_objective
from zoframe_peers.smooth import _differences, _flag_status, _scale
from zoframe_peers.solvers import _F_LIMIT, _REL_STEP, _Batch, _Best, _forward_steps, _PeerCapReached

__all__ = ["DFOLS", "CompositePeerState", "ProxFD"]

COMPOSITE = frozenset({"composite"})
_EPS = float(np.finfo(np.float64).eps)


@dataclass(frozen=True)
class CompositePeerState(AuxState):
    """A composite peer's state: ``aux`` holds the blocks ``y_j`` at the best ``x`` (then ``lam`` for ``prox-fd``)."""


class _Reduced:
    """``h(x) = sum_j psi_j(M_j x + e_j)`` and the blocks ``y_j(x)``, from the coupling (structure only)."""

    def __init__(self, pm: ProxMap, penalties: Sequence[Penalty]) -> None:
        self.pm = pm
        self.penalties = tuple(penalties)
        self.cuts = np.cumsum(pm.sizes)[:-1]

    def blocks(self, x: Array) -> list[Array]:
        y: Array = self.pm.M @ x + self.pm.e
        return np.split(y, self.cuts)

    def value(self, x: Array) -> float:
        return float(sum(float(psi.value(yj)) for psi, yj in zip(self.penalties, self.blocks(x))))


def _reduce(oracle: CountingOracle, who: str) -> _Reduced:
    """The problem's coupling as ``y = M x + e`` (or a clear refusal)."""
    check_coupling(oracle, "ignore")  # no splitting: the rank of A plays no role
    if oracle.feasible_set is not None:
        raise IncompatibleProblemError(
            f"{who} reduces a composite problem to min_x f(x) + h(x) over all of R^d; this problem also restricts x to "
            f"a {type(oracle.feasible_set).__name__}: use an ADMM solver (zo-svrg-admm, ...)"
        )
    return _Reduced(prox_map(oracle), oracle.penalties)


# --------------------------------------------------------------------------- FISTA on differences
@dataclass(frozen=True)
class ProxFD(_OwnLoopPeer):
    """Accelerated proximal gradient on forward differences: FISTA with backtracking (Beck & Teboulle, SIAM J.
    Imaging Sci. 2009), in its monotone form (MFISTA, Beck & Teboulle, IEEE TIP 2009), for
    ``min_x f(x) + h(x)``, ``h(x) = sum_j psi_j(M_j x + e_j)``.

    Per iteration ``k`` (at the extrapolated point ``y_k``; ``y_1 = x_0``, ``t_1 = 1``)::

        l.1  g = forward differences of f at y_k          # one batch: y_k and its d points (d if f(y_k) is known)
        l.2  z = prox_{h/L}(y_k - g / L)                  # composed_prox; u its dual (u in d psi at M z + e)
        l.3  while f(z) > f(y_k) + <g, z - y_k> + (L/2)|z - y_k|^2:  L <- eta L, back to l.2
        l.4  x_k = z if F(z) <= F(x_{k-1}) else x_{k-1}   # F = f + h: monotone (MFISTA)
        l.5  stop (CONVERGED) if x_k = z and |G| <= gtol max(|g|, L max(1, |y_k|_inf)),  G = L (y_k - z)
        l.6  t_{k+1} = (1 + sqrt(1 + 4 t_k^2)) / 2
        l.7  y_{k+1} = x_k + (t_k / t_{k+1}) (z - x_k) + ((t_k - 1) / t_{k+1}) (x_k - x_{k-1})

    The differences use ``h_i = rel_step max(1, |x_i|)``; the test of the line search allows the
    rounding of ``f`` (``10 eps (|f(y)| + |f(z)|)``); ``L_0`` defaults to ``|g(x_0)| / max(1, |x_0|_inf)``
    (a first trial step as long as the variables' scale), and ``L`` only grows. The stop is on the
    gradient mapping ``G``, relative to the gradient and to the curvature estimate ``L`` times the
    point's scale: ``|z - y_k| <= gtol max(1, |y_k|_inf)`` when ``L`` dominates. The reported point is
    the lowest ``f + h`` among the ``z`` (the iterate ``x_k``), with ``y_j = M_j z + e_j`` and
    ``lam = (B^+)^T u`` (so that ``B^T lam = u`` is a subgradient of ``psi`` at ``y``, ``A^T lam = -M^T u``
    balances ``grad f`` at a solution), the outputs the ADMM solvers give. A gradient that is not
    finite ends the run ``DIVERGED``; a line search that cannot satisfy its test in 60 increases of
    ``L`` ends it ``FAILED``.
    """

    problem_kinds: ClassVar[frozenset[str]] = COMPOSITE
    peer_name: ClassVar[str] = "prox-fd"
    state_cls: ClassVar[type[AuxState]] = CompositePeerState
    gtol: float = param(1e-6, doc="stop when |G| <= gtol max(|g|, L max(1, |y|_inf)) (gradient mapping G)")
    L0: float | None = param(None, symbol="L_0", doc="initial Lipschitz estimate of grad f (None: |g(x0)| / max(1, |x0|_inf))")
    eta: float = param(2.0, symbol="eta", doc="backtracking factor: L <- eta L until the line-search test holds")
    inner_iters: int = param(100, doc="dual FISTA steps of the prox of psi(M x + e) when it has no closed form")
    rel_step: float = param(_REL_STEP, doc="relative forward-difference step (sqrt(eps))")
    maxfev: int | None = param(None, doc="cap on peer points (None: max_calls binds)")
    points_per_step: int | None = param(None, doc="peer points between driver iterations (None: 10 (dim + 1))")

    def __post_init__(self) -> None:
        check_positive("gtol", self.gtol)
        if self.L0 is not None:
            check_positive("L0", self.L0, "L_0")
        check_positive("eta", self.eta, "eta")
        if self.eta <= 1.0:
            raise InvalidParameterError(f"eta must exceed 1 (L grows by this factor), got {self.eta}")
        check_int("inner_iters", self.inner_iters)
        check_positive("rel_step", self.rel_step)
        if self.rel_step >= 1.0:
            raise InvalidParameterError(f"rel_step must be below 1, got {self.rel_step}")
        self._check()

    def validate(self, oracle: CountingOracle) -> None:
        super().validate(oracle)
        _reduce(oracle, self.peer_name)

    def outputs(self, state: Any) -> Mapping[str, Array]:
        out: dict[str, Array] = {"x": state.x, "lam": state.aux[-1]}
        for j, yj in enumerate(state.aux[:-1]):
            out[f"y{j}"] = yj
        return out

    def _evaluate(self, oracle: CountingOracle, X: Array) -> tuple[Array, Array | None]:
        return mean_objective(oracle, X)

    def _aux0(self, oracle: CountingOracle, x0: Array) -> tuple[Array, ...]:
        red = _reduce(oracle, self.peer_name)
        return (*red.blocks(x0), np.zeros(red.pm.P.shape[1]))  # lam = P^T u: one multiplier per row of A

    def _run(self, oracle: CountingOracle, x0: Array, report: Report, *, maxpoints: int | None) -> Any:
        red = _reduce(oracle, self.peer_name)  # structure only: the loop holds no oracle
        pm = red.pm
        start = np.array(x0, dtype=np.float64, copy=True)
        gtol, L0, eta, iters, rel_step = self.gtol, self.L0, self.eta, self.inner_iters, self.rel_step

        def run(point: Callable[[Array], float], last: Callable[[], Array | None], batch: _Batch) -> Outcome:
            def values_and_gradient(y: Array, fy: float | None) -> tuple[float, Array]:
                """``f(y)`` and its forward-difference gradient: one batch of ``1 + d`` points (``d`` if ``f(y)`` is known)."""
                D = _forward_steps(y, rel_step, None)
                if fy is None:
                    F, _ = batch(np.vstack([y[None, :], D]))
                    fy, F = float(F[0]), F[1:]
                else:
                    F, _ = batch(D)
                return fy, _differences(F, fy, np.diagonal(D - y))

            def report_point(z: Array, fz: float, u: Array) -> float:
                total = fz + red.value(z)
                report(z, total, (*red.blocks(z), pm.P.T @ u))
                return total

            x, fx = start, None
            u = np.zeros(pm.M.shape[0])
            Fx = math.inf
            y, fy_known, t, L = start, None, 1.0, L0
            while True:
                fy, g = values_and_gradient(y, fy_known)  # l.1: the difference gradient at y_k
                if fx is None:  # the start: f(x_0) is the first value
                    fx = fy
                    Fx = report_point(start, fx, u)
                if not (math.isfinite(fy) and bool(np.isfinite(g).all())):
                    return Outcome("prox-fd: the difference gradient of f is not finite (f blew up or returned "
                                   "non-finite values): no descent direction", Status.DIVERGED)
                gn = float(np.linalg.norm(g))
                s = max(1.0, float(np.abs(y).max(initial=0.0)))
                if L is None:
                    L = max(gn / s, 1e-12)
                for _ in range(60):  # l.2-3: backtracking on L
                    z, u_new = composed_prox(pm, red.penalties, y - g / L, 1.0 / L, u, iters)  # l.2
                    step = z - y
                    fz = float(batch(z[None, :])[0][0])
                    model = fy + float(g @ step) + 0.5 * L * float(step @ step)
                    if fz <= model + 10.0 * _EPS * (abs(fy) + abs(fz)):  # l.3 (with the rounding of f)
                        break
                    L *= eta
                else:
                    return Outcome(f"prox-fd: the line search found no L (up to {L:.3g}) with f below its model: f may be "
                                   "noisy or not smooth at this resolution", Status.FAILED)
                Fz = report_point(z, fz, u_new)
                u = u_new
                G = L * math.sqrt(float(step @ step))  # |gradient mapping| at y_k
                t_next = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))  # l.6
                if Fz <= Fx:  # l.4 (MFISTA): z is the new iterate
                    if G <= gtol * max(gn, L * s):  # l.5
                        return Outcome(f"prox-fd: gradient mapping |G| = {G:.3g} <= gtol max(|g|, L s) = "
                                       f"{gtol * max(gn, L * s):.3g}", Status.CONVERGED)
                    x_new, fx_new, Fx = z, fz, Fz
                else:  # keep x_{k-1}; z still steers the momentum
                    x_new, fx_new = x, fx
                y = x_new + (t / t_next) * (z - x_new) + ((t - 1.0) / t_next) * (x_new - x)  # l.7
                fy_known = fx_new if np.array_equal(y, x_new) else None
                if not (math.isfinite(Fx) and abs(Fx) <= _F_LIMIT):
                    return Outcome(f"prox-fd: f + h = {Fx:.3g}: the objective may be unbounded below", Status.DIVERGED)
                x, fx, t = x_new, fx_new, t_next

        return run


# --------------------------------------------------------------------------- DFO-LS
def _dfols() -> Any:
    return require("dfols", extra="dfols", feature="the dfols peer (DFO-LS)")


def _residual_rows(oracle: CountingOracle, X: Array) -> tuple[Array, Array]:
    """``f = mean r_i^2`` and the ``n`` residuals at the rows of ``X``: one oracle call of ``n`` evaluations per row."""
    R = oracle.residuals(X, purpose="peer")
    return np.mean(R * R, axis=1), R


def _objective_rows(oracle: CountingOracle, X: Array) -> tuple[Array, Array]:
    """``f = mean l_i`` and the ``n`` components at the rows of ``X`` (the check of a claim)."""
    V = oracle.objective(X, purpose="peer")
    return V.mean(axis=1), V


@dataclass(frozen=True)
class DFOLS(_OwnLoopPeer):
    """DFO-LS (Cartis, Fiala, Marteau & Roberts, ACM TOMS 2019): derivative-free Gauss-Newton with linear
    models of the residuals in a trust region, with ``h`` as its nonsmooth regulariser (``h``, ``prox_uh``
    of DFO-LS >= 1.5: Liu, Lam & Roberts, IMA J. Numer. Anal. 2025).

    Applies to composite problems whose coupling gives ``y = x + e`` (``M = I``, e.g. ``A = I``,
    ``B = [-I]``, ``c = 0``: the lasso form) and whose components are squares ``l_i = r_i^2`` with
    residuals (``HasResiduals``: ``residuals=`` of :class:`zoframe.Composite`). DFO-LS minimises
    ``sum_i (r_i / sqrt(n))^2 + h(x)`` (= ``f + h``, ``f`` the mean), ``h(x) = sum_j psi_j(x_j + e_j)``
    with ``prox_uh(x, u) = prox_{u psi_j}(x_j + e_j) - e_j`` blockwise; ``lh`` is its Lipschitz constant
    of ``h`` (it sizes DFO-LS's steps only; default: the size of a subgradient of ``h`` ten scales
    away from ``x_0``, ``w sqrt(d)`` for ``w ||.||_1``).

    One DFO-LS evaluation (a residual vector) is one peer point: ``n`` residuals, ``n`` evaluations of
    kind ``objective``, one oracle call. ``maxfun`` = the points left (at least ``npt + 1``; the oracle
    holds the budget exactly). Flag 0 (rho has reached rhoend) is a claim, checked twice: the
    framework's vetting, then ``f`` itself at the final point (one more point, ``n`` component
    evaluations) must equal the mean of the squared residuals there (to a relative ``1e-8``), since
    the certificate tests the components and DFO-LS saw only the residuals. No restarts, coordinate
    initial directions: DFO-LS draws nothing random here.

    Outputs: ``x`` (the lowest ``f + h`` evaluated) and the blocks ``y_j = prox_{t psi_j}(x_j + e_j)`` with
    ``t = rho_end / lh``: ``x_j + e_j`` rounded at DFO-LS's final resolution. DFO-LS's steps come from a
    smoothed model of ``h`` and never land exactly on a kink (a coordinate of a lasso solution is
    ``1e-11``, not 0), where the subdifferential the certificate tests is the whole interval; the
    rounding moves ``y`` by ``t`` times a subgradient of ``psi_j`` at most (``rho_end / sqrt(d)`` per
    coordinate for ``w ||.||_1`` with the default ``lh``: the coupling residual stays at that level)
    and puts those coordinates on the kink. ``lam`` is the certificate's
    own least-squares fit (``A^T lam = grad f``). The accuracy of the regularised steps is about
    ``lh / sfista_iters`` in the criticality measure (smoothed FISTA with a capped number of iterations):
    ``1e-4`` in ``x`` on the lasso problems of the tests, enough for the certificate's ``1e-3``.
    """

    problem_kinds: ClassVar[frozenset[str]] = COMPOSITE
    peer_name: ClassVar[str] = "dfols"
    state_cls: ClassVar[type[AuxState]] = CompositePeerState
    rhobeg: float | None = param(None, symbol="rho_beg", doc="initial trust-region radius (None: 0.1 max(1, |x0|_inf))")
    rhoend: float | None = param(None, symbol="rho_end", doc="final trust-region radius (None: 1e-8 max(1, |x0|_inf), below rhobeg / 100)")
    npt: int | None = param(None, doc="interpolation points (None: DFO-LS's d + 1)")
    lh: float | None = param(None, symbol="L_h", doc="Lipschitz constant of h for DFO-LS's steps (None: estimated)")
    step_tol: float = param(1e-4, doc="accuracy of DFO-LS's regularised trust-region step: its func_tol.tr_step is 1 - step_tol (DFO-LS's default 0.1)")
    sfista_iters: int = param(500, doc="S-FISTA iterations per regularised subproblem at most (DFO-LS's func_tol.max_iters)")
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
        if self.lh is not None:
            check_positive("lh", self.lh, "L_h")
        if not (isinstance(self.step_tol, (int, float)) and 0.0 < self.step_tol < 1.0):
            raise InvalidParameterError(f"step_tol must lie strictly between 0 and 1, got {self.step_tol!r}")
        check_int("sfista_iters", self.sfista_iters)
        self._check()

    def validate(self, oracle: CountingOracle) -> None:
        super().validate(oracle)
        _dfols()
        red = _reduce(oracle, self.peer_name)
        M = red.pm.M
        if M.shape[0] != M.shape[1] or not np.allclose(M, np.eye(M.shape[0]), rtol=0.0, atol=1e-12):
            raise IncompatibleProblemError(
                "dfols takes h(x) = sum_j psi_j(x_j + e_j) as its regulariser, which needs the coupling to give y = x + e "
                f"(M = -B^+ A = I, e.g. A = I, B = [-I], c = 0: the lasso form); this problem's coupling gives y = M x + e "
                f"with M of shape {M.shape} that is not the identity. Use prox-fd or an ADMM solver (zo-svrg-admm, ...)"
            )
        if not oracle.has_residuals:
            raise IncompatibleProblemError(
                "dfols needs the residuals r_i of least-squares components l_i = r_i^2; this problem gives none. Build "
                "it with residuals=r (zoframe.Composite(fun, ..., residuals=r), r with fun's convention and fun = r**2), "
                "or give the problem a method residuals(X, idx) -> (k, b)"
            )
        if self.npt is not None and not oracle.dim + 1 <= self.npt <= (oracle.dim + 1) * (oracle.dim + 2) // 2:
            raise InvalidParameterError(
                f"npt={self.npt} is outside DFO-LS's range [d + 1, (d + 1)(d + 2) / 2] for d = {oracle.dim}"
            )

    def outputs(self, state: Any) -> Mapping[str, Array]:
        out: dict[str, Array] = {"x": state.x}
        for j, yj in enumerate(state.aux):
            out[f"y{j}"] = yj
        return out

    def _evaluate(self, oracle: CountingOracle, X: Array) -> tuple[Array, Array | None]:
        return _residual_rows(oracle, X)

    def _columns(self, oracle: CountingOracle) -> int:
        return oracle.n

    def _aux0(self, oracle: CountingOracle, x0: Array) -> tuple[Array, ...]:
        return tuple(_reduce(oracle, self.peer_name).blocks(x0))

    def _status(self, outcome: Any) -> tuple[str, Status]:
        return _flag_status("dfols", outcome)

    def _session(self, oracle: CountingOracle, x0: Array, seed: int, best: _Best, replay: Array | None) -> _OwnSession:
        session = super()._session(oracle, x0, seed, best, replay)
        red = _reduce(oracle, self.peer_name)
        session.vet_claim = lambda s, message: _check_residuals(s, message, red)  # DFO-LS saw the residuals only
        return session

    def _lipschitz(self, red: _Reduced, x0: Array) -> float | None:
        """``lh``, or an estimate: ``|(v - prox_t(v)) / t|`` (a subgradient of ``h``) at ``v`` ten scales from ``x0``
        along alternating signs, ``t`` a thousandth of the scale; ``None`` when ``h`` is zero."""
        if all(isinstance(psi, Zero) for psi in red.penalties):
            return None
        if self.lh is not None:
            return float(self.lh)
        s = _scale(x0)
        v = x0 + 10.0 * s * np.where(np.arange(x0.shape[0]) % 2 == 0, 1.0, -1.0)
        t = 1e-3 * s
        sub = (v - _prox_h(red, v, t)) / t
        est = float(np.linalg.norm(sub))
        return est if math.isfinite(est) and est > 0 else 1.0

    def _run(self, oracle: CountingOracle, x0: Array, report: Report, *, maxpoints: int | None) -> Any:
        red = _reduce(oracle, self.peer_name)  # structure only: the loop holds no oracle
        d, n = oracle.dim, oracle.n
        s = _scale(x0)
        rhobeg = 0.1 * s if self.rhobeg is None else float(self.rhobeg)
        rhoend = min(1e-8 * s, 1e-2 * rhobeg) if self.rhoend is None else float(self.rhoend)
        npt = d + 1 if self.npt is None else int(self.npt)
        # below npt + 1 DFO-LS warns that the budget is small; the oracle (and maxfev) cut the run exactly
        maxfun = None if maxpoints is None else max(maxpoints, npt + 1)
        lh = self._lipschitz(red, x0)
        # the blocks y_j are x_j + e_j rounded by the prox of psi_j at DFO-LS's final resolution rho_end
        t_round = 0.0 if lh is None else rhoend / lh
        start = np.array(x0, dtype=np.float64, copy=True)
        root_n = math.sqrt(n)
        params = {"func_tol.tr_step": 1.0 - self.step_tol, "func_tol.max_iters": self.sfista_iters}

        def run(point: Callable[[Array], float], last: Callable[[], Array | None], batch: _Batch) -> Any:
            lib = _dfols()

            def objfun(x: Array) -> Array:
                x = np.asarray(x, dtype=np.float64)
                F, R = batch(x[None, :])  # R: the n residuals, the extra columns of the session's rows
                report(x, float(F[0]) + red.value(x), tuple(_rounded_blocks(red, x, t_round)))
                out: Array = np.asarray(R, dtype=np.float64)[0] / root_n  # DFO-LS minimises sum r^2: f = mean r^2
                return out

            kwargs: dict[str, Any] = {}
            if lh is not None:
                kwargs = {"h": red.value, "lh": lh, "prox_uh": lambda x, u: _prox_h(red, x, u), "user_params": params}
            with np.errstate(all="ignore"):
                return lib.solve(objfun, start.copy(), rhobeg=rhobeg, rhoend=rhoend, npt=npt, maxfun=maxfun,
                                 do_logging=False, **kwargs)

        return run


def _prox_h(red: _Reduced, x: Array, u: float) -> Array:
    """``prox_{u h}(x)`` for ``h(x) = sum_j psi_j(x_j + e_j)`` (``M = I``): blockwise ``prox_{u psi_j}(x_j + e_j) - e_j``."""
    e_blocks = np.split(red.pm.e, red.cuts)
    parts = [np.asarray(psi.prox(xj + ej, u), dtype=np.float64) - ej
             for psi, xj, ej in zip(red.penalties, np.split(np.asarray(x, dtype=np.float64), red.cuts), e_blocks)]
    return np.concatenate(parts)


def _rounded_blocks(red: _Reduced, x: Array, t: float) -> list[Array]:
    """The blocks ``y_j = prox_{t psi_j}(x_j + e_j)`` (``M = I``); ``t = 0``: ``x_j + e_j`` itself."""
    blocks = red.blocks(x)
    if t <= 0.0:
        return blocks
    return [np.asarray(psi.prox(yj, t), dtype=np.float64) for psi, yj in zip(red.penalties, blocks)]


def _check_residuals(session: _OwnSession, message: str, red: _Reduced) -> tuple[str, Status]:
    """DFO-LS's claim checked on the problem's own ``f``: at the final point the components' mean must be the mean
    of the squared residuals DFO-LS saw (one more point, ``n`` evaluations of kind ``objective``)."""
    x = session.best.x
    try:
        F, _ = session.values_of(x[None, :], _objective_rows)
    except (BudgetExhausted, _PeerCapReached):
        return (f"{message}; but no evaluation was left to check the residuals against the objective at the final "
                "point", Status.BUDGET)
    f_obj = float(F[0])
    hx = red.value(x)
    f_res = session.best.fun - hx  # the best point's f + h, less h: the mean of the squared residuals there
    if not math.isfinite(f_obj):
        return f"{message}; but the objective is not finite at the final point (f = {f_obj})", Status.DIVERGED
    if abs(f_obj - f_res) > 1e-8 * max(abs(f_obj), abs(f_res)) + 1e-13 * (1.0 + abs(f_obj) + abs(hx)):
        return (f"{message}; but the objective at the final point (f = {f_obj:.10g}) is not the mean of the squared "
                f"residuals there ({f_res:.10g}): the problem's residuals do not match its components (l_i = r_i^2)",
                Status.FAILED)
    return message, Status.CONVERGED
