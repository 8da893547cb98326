"""The deterministic refinement of the composite solvers: a proximal quasi-Newton method on exact differences.

Where the smooth part is affordable as a whole (``n`` small enough for full passes, or one
component), the stochastic phase hands its point, blocks and multiplier over to this phase, which
reaches the tolerance the user asks for. One iteration at ``x_k`` (Lee, Sun & Saunders, *Proximal
Newton-type methods for minimizing composite functions*, SIAM J. Optim. 24, 2014, Algorithm 1,
with a linear coupling):

1. the model problem ``min g_k^T p + (1/2) p^T H_k p + sum_j psi_j(y_j)`` s.t. ``A (x_k + p) + B y = c``
   is solved by ADMM on exact linear algebra (:func:`~zoframe_admm.subproblem.solve_model`): a
   direction ``p``, blocks ``y^``, multiplier ``lam^``;
2. a backtracking line search on the merit: where the coupling determines ``y = M x + e`` the reduced
   objective ``f(x) + sum_j psi_j(M_j x + e_j)``, else ``f(x) + sum_j psi_j(y_j) + nu |A x + B y - c|_1``
   (``nu = 2 |lam^|_inf``); from ``t = 1``, halving, with the sufficient decrease
   ``F(t) <= F(0) + 1e-4 t D`` (``D`` the model's predicted change, Lee et al. eq. 2.17) up to the
   merit's own precision (twice the values' noise, plus the coupling residuals of the model's pairs
   times the multiplier: a decrease below it cannot be seen). A full step keeps the model's blocks
   ``y^`` (their kinks exact, the coupling to the model's tolerance);
3. the central-difference gradient at the new point (``2 d`` full evaluations, steps
   :func:`~zoframe_admm.differences.difference_steps` sized for that point and for the noise
   measured at the phase's start), and the damped BFGS update of ``H`` (Powell 1978; Nocedal &
   Wright, Procedure 18.2). ``H_0`` is the Hessian by second differences
   (:func:`~zoframe_admm.differences.gradient_and_hessian`, ``d (d - 1) / 2 + 2 d + 1`` full
   evaluations) when that is affordable, else its diagonal; its eigenvalues are made positive
   (``|lambda|``, at least ``1e-8 max |lambda|``), so a nonconvex ``f`` gets a descent model.

Stopping (:mod:`zoframe_admm.residuals`, the same ``eps_abs``, ``eps_rel`` as the stochastic phase):
primal ``|A x + B y - c|_inf``; dual ``|grad f(x) - A^T lam|_inf`` with the exact-difference gradient,
and for the y-blocks ``|B^T lam - w|_inf`` with ``w`` the subgradient the model's prox returned at
``y``. The phase ends NOISE_LIMITED when the line search finds no decrease beyond the noise of the
values, or when the dual residual stops halving for ``stall`` iterations while it is within 100 times
the differences' own error (``noise / h``): the message gives the residual reached and that floor.
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Any

import numpy as np

from zoframe.oracle import CountingOracle
from zoframe.phases import Carry, End, PhaseEnd
from zoframe.protocols import Array
from zoframe_admm.differences import (
    EPS,
    difference_steps,
    gradient_and_hessian,
    natural_scale,
    noise_level,
    point_scale,
)
from zoframe_admm.residuals import Residuals, Tolerance, coupling_floor
from zoframe_admm.subproblem import Coupling, solve_model

__all__ = ["RefinePhase", "RefineState", "positive_definite"]

ARMIJO = 1e-4
MAX_HALVINGS = 40


def _inf(v: Array) -> float:
    return float(np.abs(v).max(initial=0.0))


def positive_definite(H: Array) -> tuple[Array, float, float]:
    """``H`` symmetrised with its eigenvalues replaced by ``max(|lambda|, 1e-8 max |lambda|)``; and the extreme ones."""
    S = 0.5 * (H + H.T)
    w, V = np.linalg.eigh(S)
    top = float(np.abs(w).max(initial=0.0))
    if not top > 0 or not math.isfinite(top):
        return np.eye(H.shape[0]), 1.0, 1.0
    w2 = np.maximum(np.abs(w), 1e-8 * top)
    out: Array = (V * w2) @ V.T
    return 0.5 * (out + out.T), float(w2.min()), float(w2.max())


def _bfgs(H: Array, s: Array, yv: Array) -> Array:
    """Damped BFGS update (Powell): keeps ``H`` positive definite whatever the curvature ``s^T y``."""
    Hs = H @ s
    sHs = float(s @ Hs)
    if not sHs > 0:
        return H
    sy = float(s @ yv)
    if sy < 0.2 * sHs:
        theta = 0.8 * sHs / (sHs - sy)
        r = theta * yv + (1.0 - theta) * Hs
    else:
        r = yv
    sr = float(s @ r)
    if not sr > 0:
        return H
    out: Array = H - np.outer(Hs, Hs) / sHs + np.outer(r, r) / sr
    return 0.5 * (out + out.T)


@dataclass(frozen=True)
class RefineState:
    """``x``, ``y`` (the blocks), ``lam``; ``value`` ``f(x)``; ``g`` its difference gradient, ``H`` the model's
    matrix; ``noise`` the values' noise (absolute) and ``mag`` their size; ``k`` iterations; the last
    residuals; ``best`` / ``since`` (stall); ``t`` the last step length, ``inner`` the model solve's
    iterations; ``stop``: why the phase cannot go on (empty while it can)."""

    x: Array
    y: tuple[Array, ...]
    lam: Array
    value: float
    g: Array
    H: Array
    noise: float
    mag: float
    natural: float
    k: int
    primal: float
    primal_scale: float
    dual: float
    dual_scale: float
    floor: float
    best: float
    since: int
    t: float
    inner: int
    stop: str


@dataclass(frozen=True)
class RefinePhase:
    """The refinement (module docstring). ``tol``: the stopping tolerances; ``hessian``: start from the
    Hessian by second differences (else its diagonal); ``stall``: iterations without halving the
    residual before the phase says the noise limits it."""

    tol: Tolerance
    hessian: bool
    stall: int = 6
    name: str = "refinement"

    # ---- helpers
    def _cp(self, oracle: CountingOracle) -> Coupling:
        cache = self.__dict__
        if cache.get("_cp_key") != id(oracle):
            object.__setattr__(self, "_cp_key", id(oracle))
            object.__setattr__(self, "_cp_val", Coupling.of(oracle))
        out: Coupling = cache["_cp_val"]
        return out

    def _objective(self, oracle: CountingOracle, purpose: str) -> Any:
        return lambda X: oracle.objective(X, None, purpose=purpose)

    def _residuals(self, oracle: CountingOracle, cp: Coupling, x: Array, y: Array, lam: Array, g: Array,
                   dual_y: float, natural: float) -> Residuals:  # fmt: skip
        Ax, By = cp.A @ x, cp.B @ y
        r = Ax + By - cp.c
        BtL = cp.B.T @ lam
        dual = max(_inf(g - cp.A.T @ lam), dual_y)
        pscale = max(_inf(Ax), _inf(By), _inf(cp.c), coupling_floor(cp.A, point_scale(x, natural)))
        return Residuals(_inf(r), pscale, dual, max(_inf(g), _inf(cp.A.T @ lam), _inf(BtL)))

    def _dual_y(self, oracle: CountingOracle, cp: Coupling, y: Array, lam: Array) -> float:
        """``max_j dist(B_j^T lam, d psi_j(y_j))`` by the penalties' own distance (2-norm, an upper bound)."""
        out = 0.0
        for psi, yj, Bj in zip(oracle.penalties, cp.split(y), oracle.B):
            dist = getattr(psi, "subdifferential_distance", None)
            if not callable(dist):
                return math.inf
            out = max(out, float(dist(yj, Bj.T @ lam)))
        return out

    # ---- the phase
    def start(self, oracle: CountingOracle, carry: Carry, rng: np.random.Generator) -> RefineState:
        cp = self._cp(oracle)
        x = np.array(carry.x, dtype=np.float64, copy=True)
        ys = carry.extras.get("y")
        y_of = cp.y_of(x)
        if y_of is not None:
            y = y_of
        elif ys:
            y = np.concatenate([np.asarray(v, dtype=np.float64) for v in ys])
        else:
            y = np.concatenate([np.asarray(v, dtype=np.float64) for v in oracle.y0])
        lam_c = carry.extras.get("lam")
        lam = np.zeros(cp.A.shape[0]) if lam_c is None else np.array(lam_c, dtype=np.float64, copy=True)
        # the noise of the values: a difference table of 7 full values on a line through x (Moré & Wild 2011)
        u: Array = np.asarray(rng.standard_normal(x.shape[0]), dtype=np.float64)
        u /= max(float(np.linalg.norm(u)), 1e-300)
        natural = float(carry.extras.get("natural", 0.0))
        pts = x[None, :] + (np.arange(7) - 3.0)[:, None] * (1e-6 * point_scale(x, natural)) * u[None, :]
        vals = oracle.objective(pts, None, purpose="noise")
        mag0 = float(np.abs(vals).mean())
        noise = max(noise_level(vals), 4.0 * EPS * mag0)
        h = difference_steps(x, noise / mag0 if mag0 > 0 else EPS, point_scale(x, natural))
        f, g, H, mag = gradient_and_hessian(self._objective(oracle, "refine"), x, h, hessian=self.hessian, n=oracle.n)
        natural = natural_scale(mag, float(np.abs(np.diag(H)).max(initial=0.0))) or natural
        H, _, _ = positive_definite(H)
        res = self._residuals(oracle, cp, x, y, lam, g, self._dual_y(oracle, cp, y, lam), natural)
        return RefineState(
            x=x, y=tuple(cp.split(y)), lam=lam, value=f, g=g, H=H, noise=noise, mag=mag, natural=natural, k=0,
            primal=res.primal, primal_scale=res.primal_scale, dual=res.dual, dual_scale=res.dual_scale,
            floor=self._floor(noise, h), best=res.worst(), since=0, t=math.nan, inner=0, stop="",
        )  # fmt: skip

    @staticmethod
    def _floor(noise: float, h: Array) -> float:
        """The error of a central difference from the noise alone: ``noise / min h``."""
        return noise / max(float(h.min()), 1e-300) if h.size else 0.0

    def step(self, oracle: CountingOracle, st: RefineState, rng: np.random.Generator) -> RefineState:
        cp = self._cp(oracle)
        x, lam, g, H = st.x, st.lam, st.g, st.H
        y = np.concatenate(st.y)
        pens = oracle.penalties
        H, lo, hi = positive_definite(H)
        tp = max(0.1 * self.tol.bound(st.primal_scale), 1e-15 * max(st.primal_scale, _inf(cp.c), 1e-300))
        td = max(0.1 * self.tol.bound(st.dual_scale), 1e-15 * max(st.dual_scale, 1e-300))
        sol = solve_model(H, g, cp, cp.c - cp.A @ x, pens, y, lam, tp, td, eig=(lo, hi))
        p = sol.p
        reduced = cp.M is not None
        nu = 0.0 if reduced else 2.0 * _inf(sol.lam) + 1e-300

        def psi_of(yv: Array) -> float:
            return float(sum(psi.value(v) for psi, v in zip(pens, cp.split(yv))))

        def merit_y(xv: Array, yv: Array) -> float:
            base = psi_of(yv)
            if nu:
                base += nu * float(np.abs(cp.A @ xv + cp.B @ yv - cp.c).sum())
            return base

        y_hat = sol.y

        def point(tt: float) -> tuple[Array, Array]:
            """The trial point at step ``tt``: the blocks follow ``x`` exactly where the coupling determines them."""
            xt = x + tt * p
            yr = cp.y_of(xt) if reduced else None
            return xt, (y + tt * (y_hat - y) if yr is None else yr)

        x_full, y_full = point(1.0)
        m0 = st.value + merit_y(*point(0.0))
        D = float(g @ p) + merit_y(x_full, y_full) - merit_y(*point(0.0))
        # the merit's own precision: the values' noise, and the coupling residuals of the model's pairs (x, y) times
        # the multiplier (the sensitivity of sum_j psi_j to them): a decrease below it cannot be seen
        def coupling_l1(xv: Array, yv: Array) -> float:
            return float(np.abs(cp.A @ xv + cp.B @ yv - cp.c).sum())

        precision = 2.0 * st.noise + 2.0 * max(_inf(sol.lam), _inf(lam)) * (coupling_l1(x, y) + coupling_l1(x + p, y_hat))
        t = 1.0
        accepted = False
        f_new = st.value
        for _ in range(MAX_HALVINGS):
            xt, yt = point(t)
            ft = float(oracle.objective(xt, None, purpose="line search").mean())
            mt = ft + merit_y(xt, yt)
            # from a point outside a penalty's domain (merit inf, e.g. an indicator) any finite merit is a decrease
            if math.isfinite(mt) and (not math.isfinite(m0) or mt <= m0 + ARMIJO * t * min(D, 0.0) + precision):
                accepted, f_new = True, ft
                break
            t *= 0.5
        if not accepted:
            return _with(st, stop=f"the line search found no decrease beyond the values' noise ({st.noise:.2g}) "
                                  f"along the model's direction (predicted change {D:.3g})", t=0.0, inner=sol.iterations)
        x1, y1 = point(t)
        if t == 1.0:  # the model's own blocks: their kinks (zeros of an l1 term) exact, the coupling to its tolerance
            y1 = y_hat
        lam1 = lam + t * (sol.lam - lam)
        mag0 = max(st.mag, 1e-300)
        h = difference_steps(x1, max(st.noise / mag0, EPS), point_scale(x1, st.natural))
        _, g1, _, mag = gradient_and_hessian(self._objective(oracle, "refine"), x1, h, hessian=False, n=oracle.n,
                                             f0=f_new)
        H1 = _bfgs(H, x1 - x, g1 - g)
        dual_y = sol.dual_y if t == 1.0 else self._dual_y(oracle, cp, y1, lam1)
        res = self._residuals(oracle, cp, x1, y1, lam1, g1, dual_y, st.natural)
        worst = res.worst()
        best, since = (worst, 0) if worst <= 0.5 * st.best else (st.best, st.since + 1)
        return RefineState(
            x=x1, y=tuple(cp.split(y1)), lam=lam1, value=f_new, g=g1, H=H1, noise=st.noise, mag=mag, natural=st.natural,
            k=st.k + 1,
            primal=res.primal, primal_scale=res.primal_scale, dual=res.dual, dual_scale=res.dual_scale,
            floor=self._floor(st.noise, h), best=best, since=since, t=t, inner=sol.iterations, stop="",
        )  # fmt: skip

    def end(self, oracle: CountingOracle, st: RefineState) -> PhaseEnd | None:
        res = Residuals(st.primal, st.primal_scale, st.dual, st.dual_scale)
        where = f"after {st.k} iterations: {res.describe(self.tol)}"
        if res.passed(self.tol):
            return PhaseEnd(End.CONVERGED, f"the residual test passed with exact differences {where}")
        if st.stop:
            return PhaseEnd(End.NOISE_LIMITED, f"{st.stop} {where}; the differences' error is about {st.floor:.2g}")
        if st.since >= self.stall:
            if st.dual <= 100.0 * st.floor:
                return PhaseEnd(End.NOISE_LIMITED, f"the residual stopped decreasing at the differences' error "
                                                   f"({st.floor:.2g}, from the values' noise {st.noise:.2g}) {where}")
            return PhaseEnd(End.FAILED, f"the residual did not halve in {st.since} iterations {where}")
        return None

    def carry(self, st: RefineState) -> Carry:
        return Carry(st.x, {"y": st.y, "lam": st.lam})

    def outputs(self, st: RefineState) -> dict[str, Array]:
        out: dict[str, Array] = {"x": st.x, "lam": st.lam}
        for j, yj in enumerate(st.y):
            out[f"y{j}"] = yj
        return out


def _with(st: RefineState, **kw: Any) -> RefineState:
    import dataclasses

    return dataclasses.replace(st, **kw)
