"""The stochastic phase of the composite solvers: the paper's iteration, with fixed or automatic steps.

Every solver of :mod:`zoframe_admm.solvers` writes its algorithm box once (``box``: one iteration, line
by line) in terms of a *step rule* ``k``: ``k.estimate`` (the CooSGE estimate), ``k.y_update``,
``k.x_update``, ``k.dual_update`` (Alg. 1 l.8-10) or ``k.prox_step`` (the proximal baselines). The
phase (:class:`StochasticPhase`) runs the box with one of two rules:

``steps="paper"`` -- :class:`PaperSteps`
    the papers' iterations exactly: fixed ``eta``, ``rho``, ``r``, ``r_j`` and ``mu_t = 1/(d sqrt(t))``
    (or the fixed ``mu``); no stopping test (the papers run to a budget); the divergence test of
    :mod:`zoframe.phases` after every step. The iterates are bit for bit those of the boxes as
    published (``tests/test_admm_paper_mode.py``).

``steps="auto"`` -- :class:`AutoSteps`, for problems nobody tuned
    * **eta from the local curvature.** ``eta = 1 / L`` with ``L`` first the largest second difference
      of the first estimate, then kept by backtracking on the estimator's own evaluations: after the
      x-update, the batch ``I`` of the estimate is evaluated at ``x^+`` (``b`` evaluations) and the
      step is accepted when the sufficient-decrease test of the linearised model holds on those
      values, ``f_I(x^+) <= f_I(x_t) + g_I^T (x^+ - x_t) + (L / 2) |x^+ - x_t|^2`` (``f_I(x_t)`` and
      ``g_I`` from the same estimate); else ``L`` grows (at least doubles) and the x-update is redone.
      After an accepted step ``L`` shrinks by 10 % (so it follows the local curvature down).
      The x-update is the paper's (6) with ``r = rho eta sigma_max(A^T A) + 1.01``, i.e. the step
      ``1 / tau``, ``tau = rho sigma_max(A^T A) + 1.01 L`` of linearised ADMM.
    * **rho by residual balancing** (:func:`~zoframe_admm.residuals.balanced_rho`, OSQP): first
      ``rho = L / sigma_max(A^T A)`` (the penalty's curvature matched to ``f``'s), then after every
      window of ``max(10, epoch)`` steps from the window's geometric means of the relative primal
      residual and of the part of the dual residual ``rho`` moves. The y-update is exact
      (``r_j = rho s_j``) when ``B_j^T B_j = s_j I``, else linearised (``r_j = 1.01 rho sigma_max``);
      ``lam`` is kept as is when ``rho`` changes (unscaled ADMM).
    * **mu from the variables' scale and the noise of the values**: per-coordinate steps
      ``h_j = noise_rel^(1/3) max(|x_j|, s)`` (:func:`~zoframe_admm.differences.difference_steps`;
      ``s`` the larger of the probed scale and the iterate's typical entry, ``noise_rel`` from a
      difference table of ``7 b`` values at the start), instead of ``1/(d sqrt(t))``, which ignores
      units. The probe (:func:`~zoframe_admm.differences.probe_scale`, ``35 b`` values at the start)
      finds the variables' units before any estimate.
    * **stopping**: the residuals of every step (:mod:`zoframe_admm.residuals`, with the estimate the
      algorithm has) against ``eps_abs``, ``eps_rel``; they must hold on a step whose estimate is the
      full sum (ZO-ADMM; a snapshot step of the SVRG solvers) or on every step of a window of
      ``ceil(n / b)`` steps (SAGA, SGD). When a refinement follows (:mod:`zoframe_admm.refine`) the
      phase hands over when its residuals fall below ``switch_rel``, when it has spent its share of
      what the refinement's first iteration costs (and at least one pass over the data), or when it
      stalls (no halving of its best residual in ``stall`` epochs). Without a refinement, a stall ends
      the run NOISE_LIMITED (the estimates' noise stops the progress) with the residual reached for
      the solvers whose estimate keeps its variance at the solution (``zo-sgd-admm``); the others go on.
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Any

import numpy as np

from zoframe.estimators import CoordinateEstimator
from zoframe.oracle import CountingOracle
from zoframe.phases import Carry, End, PhaseEnd
from zoframe.protocols import Array, IntArray
from zoframe_admm.coupling import MARGIN, ProxMap, composed_prox, dual_update, x_update, y_updates
from zoframe_admm.differences import (
    EPS,
    CoordinateEstimate,
    coordinate_estimate,
    difference_steps,
    natural_scale,
    noise_level,
    point_scale,
    probe_points,
    probe_scale,
)
from zoframe_admm.residuals import (
    Residuals,
    Tolerance,
    admm_residuals,
    balanced_rho,
    coupling_floor,
    prox_mapping_residuals,
    y_steps,
)

__all__ = ["AutoSteps", "PaperSteps", "RuleState", "StochasticPhase", "StochasticState"]

#: the curvature estimate L shrinks by this factor after an accepted x-step
SHRINK = 0.9
#: at most this many x-updates per step (then the last one is taken)
MAX_BACKTRACKS = 40
#: rho is balanced after every window of this many steps (at least an epoch)
BALANCE_EVERY = 10


def _log(v: float) -> float:
    """``log v`` clipped to [log 1e-300, log 1e300] (the balancing window's sums of logs)."""
    return math.log(min(max(v, 1e-300), 1e300))


@dataclass(frozen=True)
class RuleState:
    """What the automatic steps carry from one step to the next.

    ``L``: the curvature estimate (``eta = 1 / L``; 0 before the first estimate); ``rho``; ``noise_rel``:
    relative noise of the values; ``natural``: the variables' natural scale (:func:`natural_scale` at the first
    estimate); ``scale``: the variables' scale for the difference steps; ``steps``; ``calls0``:
    evaluations when the phase started; ``passed``: consecutive counted steps meeting the tolerances;
    ``best``: best worst relative residual on counted steps, ``since``: steps since it last fell below half of
    ``mark`` (then ``mark`` is that residual);
    ``win_p``, ``win_d``, ``win_k``: the balancing window's sums; ``rho_moves``, ``backtracks``:
    counters for the notes; ``rel_p``, ``rel_d``: the last relative residuals.
    """

    L: float
    rho: float
    noise_rel: float
    natural: float
    scale: float
    steps: int
    calls0: int
    passed: int
    best: float
    since: int
    win_p: float
    win_d: float
    win_k: int
    rho_moves: int
    backtracks: int
    rel_p: float
    rel_d: float
    mark: float


def _rule0(calls: int) -> RuleState:
    return RuleState(L=0.0, rho=0.0, noise_rel=EPS, natural=0.0, scale=1.0, steps=0, calls0=calls, passed=0, best=math.inf, since=0,
                     win_p=0.0, win_d=0.0, win_k=0, rho_moves=0, backtracks=0, rel_p=math.inf, rel_d=math.inf,
                     mark=math.inf)


@dataclass(frozen=True)
class StochasticState:
    """The phase's state: ``x`` (the algorithm's iterate), ``value`` (the batch estimate of ``f(x)``; nan with
    ``steps="paper"``), ``alg`` (the algorithm box's own state) and ``rule`` (the automatic steps' state)."""

    x: Array
    value: float
    alg: Any
    rule: RuleState


# --------------------------------------------------------------------------- the papers' rule
class PaperSteps:
    """The papers' fixed steps: ``eta``, ``rho``, ``r``, ``r_j`` of the solver and state, ``mu_t = 1/(d sqrt(t))``."""

    def __init__(self, solver: Any, oracle: CountingOracle, st: Any, t: int) -> None:
        self.solver = solver
        self.st = st
        self.mu = solver._mu(oracle, t)

    def estimate(
        self, oracle: CountingOracle, x: Array, idx: IntArray | None, rng: np.random.Generator, purpose: str,
        per_component: bool = False,
    ) -> Any:  # fmt: skip
        """CooSGE, eq. (4), at ``x`` (``(d,)`` or ``(P, d)``) over the components ``idx``: ONE oracle call."""
        mu = self.mu
        return CoordinateEstimator(mu=mu).estimate(
            lambda X: oracle.objective(X, idx, purpose=purpose), x, rng, mu=mu, per_component=per_component
        )

    def y_update(self, oracle: CountingOracle, x: Array, ys: tuple[Array, ...], lam: Array) -> tuple[Array, ...]:
        return y_updates(oracle, x, ys, lam, self.solver.rho, self.st.r_y)

    def x_update(self, oracle: CountingOracle, x: Array, ys: tuple[Array, ...], lam: Array, g: Array) -> Array:
        return x_update(oracle, x, ys, lam, g, self.solver.rho, self.solver.eta, self.st.r)

    def dual_update(self, oracle: CountingOracle, x: Array, ys: tuple[Array, ...], lam: Array) -> Array:
        return dual_update(oracle, x, ys, lam, self.solver.rho)

    def prox_step(self, oracle: CountingOracle, x: Array, u: Array, g: Array, pm: ProxMap) -> tuple[Array, Array]:
        eta = self.solver.eta
        return composed_prox(pm, oracle.penalties, x - eta * g, eta, u, self.solver.inner_iters)


# --------------------------------------------------------------------------- the automatic rule
@dataclass(frozen=True)
class _Probe:
    """The batch of the last estimate at ``x_t``: its indices, values and gradient (for the backtracking test)."""

    idx: IntArray | None
    f0: float
    g0: Array
    mag: float


class AutoSteps:
    """The automatic steps of one iteration (module docstring); built by the phase from its :class:`RuleState`.

    It records what the phase needs afterwards: ``residuals``, ``value`` (batch mean at the new point),
    ``L``, ``rho`` and ``backtracks``.
    """

    def __init__(self, solver: Any, oracle: CountingOracle, rule: RuleState, x: Array, consts: Any) -> None:
        self.solver = solver
        self.rule = rule
        self.L = rule.L
        self.rho = rule.rho
        self.natural = rule.natural
        self.consts = consts
        fixed = getattr(solver, "mu", None)
        self.h = np.full(oracle.dim, float(fixed)) if fixed is not None else difference_steps(x, rule.noise_rel, rule.scale)
        self.probe: _Probe | None = None
        self.value = math.nan
        self.backtracks = 0
        self.residuals: Residuals | None = None
        self._before: list[Array] = []
        self._ys_old: tuple[Array, ...] = ()
        self._g: Array | None = None
        self._tau = math.nan
        self._x_old: Array | None = None
        self.r_y = np.zeros(0)

    # ---- the estimate
    def estimate(
        self, oracle: CountingOracle, x: Array, idx: IntArray | None, rng: np.random.Generator, purpose: str,
        per_component: bool = False,
    ) -> CoordinateEstimate:  # fmt: skip
        """CooSGE with the steps ``h`` and the batch values at the first base point: ONE oracle call."""
        est = coordinate_estimate(lambda X: oracle.objective(X, idx, purpose=purpose), x, self.h,
                                  per_component=per_component)
        g0 = est.grad if est.grad.ndim == 1 else est.grad[0]
        center = np.asarray(est.center)
        self.probe = _Probe(idx, float(center.mean()), g0, float(np.abs(center).mean()))
        if self.value != self.value:  # the value at x_t, until the step moves
            self.value = float(center.mean())
        if self.L <= 0.0:  # the first estimate: the curvature and the penalty start from it
            curv = np.abs(np.asarray(est.curvature))
            top = float(curv.max(initial=0.0))
            if not top > 0:
                top = float(np.linalg.norm(g0)) / point_scale(np.atleast_2d(x)[0]) or 1.0
            if not self.natural > 0:
                self.natural = natural_scale(float(np.abs(center).mean()), top)
            self.L = top
            self.rho = top / self.consts.sigma_a if self.consts.sigma_a > 0 else top
        return est

    # ---- Alg. 1 l.8-10
    def y_update(self, oracle: CountingOracle, x: Array, ys: tuple[Array, ...], lam: Array) -> tuple[Array, ...]:
        self.r_y = self.rho * self.consts.s_b * np.where(self.consts.orth_b, 1.0, 1.0 + MARGIN)
        self._ys_old = ys
        out, self._before = y_steps(oracle, x, ys, lam, self.rho, self.r_y)
        return out

    def x_update(self, oracle: CountingOracle, x: Array, ys: tuple[Array, ...], lam: Array, g: Array) -> Array:
        sa = self.consts.sigma_a

        def step(L: float) -> tuple[Array, float]:
            eta = 1.0 / L
            r = self.rho * eta * sa + 1.0 + MARGIN
            return x_update(oracle, x, ys, lam, g, self.rho, eta, r), r / eta

        xn, tau = self._backtrack(oracle, x, step)
        self._g, self._tau, self._x_old = g, tau, x
        return xn

    def dual_update(self, oracle: CountingOracle, x: Array, ys: tuple[Array, ...], lam: Array) -> Array:
        lam_new = dual_update(oracle, x, ys, lam, self.rho)
        if self._x_old is not None and self._g is not None:
            floor = coupling_floor(np.asarray(oracle.A), point_scale(x, self.natural))
            self.residuals = admm_residuals(oracle, self._x_old, x, self._ys_old, ys, self._before, lam_new, self._g,
                                            self.rho, self._tau, self.r_y, floor)
        return lam_new

    # ---- the proximal baselines
    def prox_step(self, oracle: CountingOracle, x: Array, u: Array, g: Array, pm: ProxMap) -> tuple[Array, Array]:
        duals: list[Array] = [u]

        def step(L: float) -> tuple[Array, float]:
            xn, un = composed_prox(pm, oracle.penalties, x - g / L, 1.0 / L, u, self.solver.inner_iters)
            duals[0] = un
            return xn, L

        xn, L = self._backtrack(oracle, x, step)
        self.residuals = prox_mapping_residuals(x, xn, g, 1.0 / L)
        return xn, duals[0]

    # ---- the backtracking test on the batch values
    def _backtrack(self, oracle: CountingOracle, x: Array, step: Any) -> tuple[Array, float]:
        probe = self.probe
        L = self.L
        for _ in range(MAX_BACKTRACKS):
            xn, tau = step(L)
            if probe is None:
                break
            dx = xn - x
            dd = float(dx @ dx)
            fv = oracle.objective(xn, probe.idx, purpose="backtrack")
            f1 = float(np.mean(fv))
            lin = probe.f0 + float(probe.g0 @ dx)
            slack = 16.0 * EPS * (probe.mag + float(np.abs(fv).mean())) + 2.0 * self.rule.noise_rel * probe.mag
            if not np.isfinite(f1):
                L *= 10.0
                self.backtracks += 1
                continue
            if f1 <= lin + 0.5 * L * dd + slack or dd == 0.0:
                self.value = f1
                break
            self.backtracks += 1
            curv = 2.0 * (f1 - lin) / dd
            L = max(2.0 * L, 1.5 * curv)
        self.L = L
        return xn, tau


@dataclass(frozen=True)
class AutoConstants:
    """The coupling's constants the automatic steps use: ``sigma_max(A^T A)``, per block ``sigma_max(B_j^T B_j)``
    and whether ``B_j^T B_j`` is a multiple of ``I`` (then the y-update is exact)."""

    sigma_a: float
    s_b: Array
    orth_b: Array

    @classmethod
    def of(cls, oracle: Any) -> AutoConstants:
        if getattr(oracle, "A", None) is None:
            return cls(0.0, np.zeros(0), np.zeros(0, dtype=bool))
        A = np.asarray(oracle.A)
        sa = float(np.linalg.eigvalsh(A.T @ A)[-1]) if A.size else 0.0
        s, orth = [], []
        for Bj in oracle.B:
            G = Bj.T @ Bj
            top = float(np.linalg.eigvalsh(G)[-1]) if G.size else 0.0
            s.append(top)
            orth.append(bool(top > 0 and np.allclose(G, top * np.eye(G.shape[0]), rtol=0.0, atol=1e-12 * top)))
        return cls(sa, np.array(s), np.array(orth, dtype=bool))


# --------------------------------------------------------------------------- the phase
@dataclass(frozen=True)
class StochasticPhase:
    """The paper's stochastic iteration as a phase (module docstring).

    ``solver``: the solver whose ``begin`` (the box's initialisation) and ``box`` (one iteration) run;
    ``mode``: ``"paper"`` or ``"auto"``; ``tol``: the stopping tolerances; ``refine``: whether a
    refinement follows; ``switch_rel``, ``switch_calls``: the hand-over rule; ``stall``: windows without
    halving the best residual before the phase gives up.
    """

    name: str
    solver: Any
    mode: str
    tol: Tolerance
    refine: bool
    switch_rel: float
    switch_calls: int
    window: int
    epoch: int
    stall: int = 10

    def start(self, oracle: CountingOracle, carry: Carry, rng: np.random.Generator) -> StochasticState:
        x0 = np.array(carry.x, dtype=np.float64, copy=True)
        if self.mode == "paper":
            alg = self.solver.begin(oracle, x0, PaperSteps(self.solver, oracle, None, 0), rng)
            return StochasticState(alg.x, math.nan, alg, _rule0(oracle.calls))
        rule = _rule0(oracle.calls)
        natural, noise_rel = self._units(oracle, x0, rng)
        rule = _replace(rule, natural=natural, scale=point_scale(x0, natural), noise_rel=noise_rel)
        k = AutoSteps(self.solver, oracle, rule, x0, self._consts(oracle))
        alg = self.solver.begin(oracle, x0, k, rng)
        rule = _replace(rule, L=k.L, rho=k.rho, natural=k.natural, scale=point_scale(alg.x, k.natural))
        return StochasticState(alg.x, k.value, alg, rule)

    def _consts(self, oracle: CountingOracle) -> AutoConstants:
        cache = self.solver.__dict__
        key = ("_auto_consts", id(oracle))
        if cache.get("_auto_key") != key:
            cache["_auto_key"] = key
            cache["_auto_consts"] = AutoConstants.of(oracle)
        out: AutoConstants = cache["_auto_consts"]
        return out

    def _units(self, oracle: CountingOracle, x: Array, rng: np.random.Generator) -> tuple[float, float]:
        """``(natural scale, relative noise)`` of the values on a batch at ``x``: the probe of
        :func:`~zoframe_admm.differences.probe_scale` (35 points), then a difference table of 7 points spaced
        ``1e-6`` of that scale (Moré & Wild 2011). ``2 * 21 b`` evaluations."""
        b = min(int(getattr(self.solver, "b", 1)), oracle.n)
        idx = rng.integers(0, oracle.n, size=b).astype(np.intp)
        u = rng.standard_normal(oracle.dim)
        u /= max(float(np.linalg.norm(u)), 1e-300)
        natural = probe_scale(oracle.objective(probe_points(x, u), idx, purpose="noise"))
        step = 1e-6 * point_scale(x, natural)
        pts = x[None, :] + (np.arange(7) - 3.0)[:, None] * step * u[None, :]
        vals = oracle.objective(pts, idx, purpose="noise")
        mag = float(np.abs(vals).mean())
        sigma = noise_level(vals)
        return natural, (max(EPS, sigma / mag) if mag > 0 else EPS)

    def step(self, oracle: CountingOracle, st: StochasticState, rng: np.random.Generator) -> StochasticState:
        if self.mode == "paper":
            alg = self.solver.box(oracle, st.alg, PaperSteps(self.solver, oracle, st.alg, st.alg.t), rng)
            return StochasticState(alg.x, math.nan, alg, st.rule)
        rule = st.rule
        counted = bool(self.solver.full_estimate(st.alg))
        k = AutoSteps(self.solver, oracle, rule, st.x, self._consts(oracle))
        alg = self.solver.box(oracle, st.alg, k, rng)
        res = k.residuals
        rel_p, rel_d = res.relative() if res is not None else (math.inf, math.inf)
        worst = max(rel_p, rel_d)
        ok = res is not None and res.passed(self.tol)
        # a step counts for the stopping test when its estimate is the full sum, or inside a window
        passed = (rule.passed + 1 if ok else 0) if (counted or self.window > 1) else rule.passed
        best, since, mark = rule.best, rule.since + 1, rule.mark
        if counted or self.window > 1:
            best = min(best, worst)
            if worst <= 0.5 * mark:
                since, mark = 0, worst
        # the window's geometric means of the relative primal residual and of the part of the dual residual that rho
        # moves (logs summed), for the balancing of rho
        rel_c = res.coupling_dual / res.dual_scale if res is not None and res.dual_scale > 0 else math.nan
        if math.isfinite(rel_c) and rel_c > 0 and rel_p > 0:
            win_p, win_d, win_k = rule.win_p + _log(rel_p), rule.win_d + _log(rel_c), rule.win_k + 1
        else:
            win_p, win_d, win_k = rule.win_p, rule.win_d, rule.win_k
        rho, moves = k.rho, rule.rho_moves
        if win_k >= max(BALANCE_EVERY, self.epoch):
            if not self.solver.no_split:
                new = balanced_rho(rho, math.exp(win_p / win_k), math.exp(win_d / win_k))
                if new != rho:
                    rho, moves = new, moves + 1
            win_p, win_d, win_k = 0.0, 0.0, 0
        new_rule = _replace(
            rule, L=k.L * SHRINK, rho=rho, natural=k.natural, scale=point_scale(alg.x, k.natural), steps=rule.steps + 1, passed=passed, best=best,
            since=since, win_p=win_p, win_d=win_d, win_k=win_k, rho_moves=moves,
            backtracks=rule.backtracks + k.backtracks, rel_p=rel_p, rel_d=rel_d, mark=mark,
        )  # fmt: skip
        return StochasticState(alg.x, k.value, alg, new_rule)

    def end(self, oracle: CountingOracle, st: StochasticState) -> PhaseEnd | None:
        if self.mode == "paper" or st.rule.steps == 0:  # nothing to test before the first step
            return None
        r = st.rule
        where = (f"after {r.steps} steps: relative residuals primal {r.rel_p:.3g}, dual {r.rel_d:.3g}; "
                 f"rho = {r.rho:.3g} ({r.rho_moves} balancing moves), eta = {SHRINK / r.L:.3g} "
                 f"({r.backtracks} backtracks)")
        if r.passed >= self.window:
            if not self.refine:
                return PhaseEnd(End.CONVERGED, f"the residual test passed {where}")
            return PhaseEnd(End.NEXT, f"the residual test passed {where}; the refinement checks it with exact "
                                      "differences")
        if self.refine:
            if r.best <= self.switch_rel:
                return PhaseEnd(End.NEXT, f"residuals below the switch level {self.switch_rel:g} {where}")
            spent = oracle.calls - r.calls0
            if spent >= self.switch_calls and r.steps >= self.epoch:
                return PhaseEnd(End.NEXT, f"spent {spent} evaluations: one pass over the data and at least its share "
                                          f"({self.switch_calls}) of what the refinement's first iteration costs, "
                                          f"{where}")
        if r.since >= self.stall * self.epoch:
            if self.refine:
                return PhaseEnd(End.NEXT, f"stalled (best relative residual {r.best:.3g}, not halved in {r.since} "
                                          f"steps) {where}")
            if self.solver.persistent_noise:
                return PhaseEnd(End.NOISE_LIMITED, f"the stochastic estimates' noise stopped the progress: best relative "
                                               f"residual {r.best:.3g}, not halved in {r.since} steps, against "
                                               f"eps_rel {self.tol.eps_rel:g} {where}")
        return None

    def carry(self, st: StochasticState) -> Carry:
        out = dict(self.outputs(st))
        extras: dict[str, Any] = {"lam": out.get("lam"), "rho": st.rule.rho, "L": st.rule.L,
                                  "noise_rel": st.rule.noise_rel, "natural": st.rule.natural}
        extras["y"] = tuple(out[f"y{j}"] for j in range(sum(1 for k in out if k.startswith("y"))))
        return Carry(np.array(st.x, copy=True), extras)

    def outputs(self, st: StochasticState) -> dict[str, Array]:
        return dict(self.solver.alg_outputs(st.alg))


def _replace(rule: RuleState, **kw: Any) -> RuleState:
    import dataclasses

    return dataclasses.replace(rule, **kw)
