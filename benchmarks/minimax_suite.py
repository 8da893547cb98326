"""The minimax solvers with their defaults on nonconvex-strongly-concave problems with known references.

    python benchmarks/minimax_suite.py [--quick] [--workers 2] [--solvers zo-gda,zo-gdmsa,...] [--out FILE]

Families (each at the scales 1e-2, 1 and 1e2 of the values and, separately, of the variables, from
two starts; ``u = x / s_x``, ``v = y / s_y``, ``F = s_v * (...)``):

``quad-log`` (kappa = 1, 10, 100, 1000)
    ``F = s_v (sum_i log(1 + u_i^2) + v^T (A u + c) - (mu / 2) |v|^2)``, ``d_x = 10``, ``d_y = 5``,
    ``|A|_2 = 1``, ``mu = 2 / kappa``: the coupling of the problem in ``docs/algorithms/zo-gda.md``
    with an offset ``c``; ``y*(x) = s_y (A u + c) / mu``.
``dro``
    the distributionally robust loss of Wang et al. section 5 over the simplex,
    ``F = s_v (sum_i y_i l_i(u) - 10 |y - 1/n|^2)``, ``l_i(u) = log(1 + log(1 + exp(-z_i u^T s_i)))``
    as a finite sum of ``n`` components, on generated data (``n = 30``, ``d = 8``, a 1:3 label ratio),
    and, when ``ZOFRAME_DATA`` holds ``mushrooms``, on 40 rows of it (1:3, the features present in them)
    with a ridge ``0.01 |u|^2 / 2`` (``dro-mushrooms``, the scale 1 only: without the ridge the rows are
    separable and the infimum, 0, is not attained); ``y* = Proj_simplex(1/n + l(u) / 20)``.
``robust-ls`` (``Y`` a box or a ball)
    ``F = s_v (v^T (A u - b) - |v|^2 / 2 + 0.1 sum_i log(1 + u_i^2))`` with ``|v_i| <= 0.5`` (box) or
    ``|v| <= 1`` (ball), ``d_x = 6``, ``d_y = 8``: a Huber loss of the residual (``min_x max_{|y| <= r}``)
    with a nonconvex penalty; ``y* = s_y Proj_Y(A u - b)``.

Held out (never used while choosing the defaults; reported separately): ``sine-ball``
(``F = s_v (sum_i (u_i^2 / 4 + sin(2 u_i) / 2) + v^T B u - |v|^2 / 2)``, ``|v| <= 1``), ``wide-y``
(``quad-log`` with ``d_x = 4``, ``d_y = 12``, kappa 30) and the registered ``ncsc`` problem with a box and
a simplex ``Y``.

References, computed independently of zoframe's solvers: ``Phi(x)`` and ``grad Phi(x)`` from the
closed-form ``y*(x)`` and white-box derivatives, minimised by scipy's L-BFGS-B with that exact
gradient from the same start (``gtol = 1e-12``, ``ftol = 1e-16``, then polished by Newton steps on the
exact gradient with a difference Hessian).

For each run: ``within`` = ``|Phi(x) - Phi_ref| <= 1e-6 max(|Phi_ref|, s_v)`` AND
``|x - x_ref|_inf <= 1e-6 max(|x_ref|_inf, s_x)``; ``diverged`` = status DIVERGED; ``runaway`` = a final
point that is not finite or beyond ``1e6 max(|x0|_inf, s_x)`` WITHOUT the status DIVERGED; a
``claim`` = ``success=True``; a FALSE claim = a claim where the exact-gradient stationarity fails:
``|grad Phi(x)|_2 > 1e-2 max(|x|_inf, s_x) |Hess Phi(x)|_2`` (ten times the certificate's tolerance,
in the family's own scale, the Hessian by differences of the exact gradient); ``solved, not
certified`` = within but ``success=False``; ``evaluations to 1e-6`` = the budgeted evaluations at the
first iterate that is within (from a callback at every iteration; the peer: at every outer
iteration).

Peer: the nested form a user writes by hand, ``nested-lbfgsb-fd`` when registered
(``zoframe.default_registry().solvers()``), else a plain-scipy baseline in this script through a
counting wrapper (``scipy-nested``): outer L-BFGS-B on forward differences of ``Phi`` (scipy's
``2-point``), each ``Phi(x)`` an inner maximisation warm-started from the last maximiser: L-BFGS-B on
forward differences for a box or no set, SLSQP on forward differences for a simplex or a ball (L-BFGS-B
takes bounds only); tight tolerances for the peer too (outer ``gtol = 1e-10``, ``ftol = 1e-15``; inner
``ftol = 1e-15`` / ``1e-12``), each point costing ``n`` evaluations.

The final line of output is ONE JSON object: per family and solver, the counts above, the median
evaluations to 1e-6 and the median ratio to the best peer's on the same problem (runs where both got
there), with the machine and the versions.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor
import json
import math
import os
import platform
import sys
import time
from typing import Any

import numpy as np
import scipy
from scipy.optimize import minimize as sp_minimize

import zoframe
from zoframe.sets import Ball, Box, Simplex

SOLVERS = ("zo-gda", "zo-gdmsa", "zo-sgda", "zo-sgdmsa", "sgda", "sgdmsa")
SCALES = ((1.0, 1.0), (1e-2, 1.0), (1e2, 1.0), (1.0, 1e-2), (1.0, 1e2))  # (values, variables)
BUDGET = 3_000_000
TOL = 1e-6


# ----------------------------------------------------------------------------------------------- problems
class _Scaled:
    """``F = s_v f(x / s_x, y / s_y)`` with the white-box pieces every family provides in unscaled units."""

    kind = "minimax"
    fresh_results = True

    def __init__(self, name: str, sv: float, sx: float, sy: float, x0u: np.ndarray, y0v: np.ndarray, n: int,
                 y_set_v: Any) -> None:  # fmt: skip
        self.name, self.sv, self.sx, self.sy, self.n = name, sv, sx, sy, n
        self.dim, self.dim_y = x0u.shape[0], y0v.shape[0]
        self.x0, self.y0 = sx * x0u, sy * y0v
        self.y_set_v = y_set_v
        if y_set_v is None:
            self.y_set = None
        elif isinstance(y_set_v, Box):
            self.y_set = Box(self.dim_y, sy * float(np.min(y_set_v.lower)), sy * float(np.max(y_set_v.upper)))
        elif isinstance(y_set_v, Ball):
            self.y_set = Ball(self.dim_y, sy * y_set_v.radius)
        else:
            self.y_set = y_set_v  # the simplex is not rescaled (sy = 1)

    # unscaled pieces: f_i(U, V, idx) (k, b); grads (b, d), (b, dy); v*(u); the family's own
    def fv(self, U: np.ndarray, V: np.ndarray, idx: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def grads_v(self, u: np.ndarray, v: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def v_star(self, u: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def values(self, X: np.ndarray, Y: np.ndarray, idx: np.ndarray) -> np.ndarray:
        out: np.ndarray = self.sv * self.fv(X / self.sx, Y / self.sy, idx)
        return out

    def minimax_gradients(self, x: np.ndarray, y: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        gu, gv = self.grads_v(x / self.sx, y / self.sy, idx)
        return self.sv / self.sx * gu, self.sv / self.sy * gv

    def y_star(self, x: np.ndarray) -> np.ndarray:
        out: np.ndarray = self.sy * self.v_star(x / self.sx)
        return out

    def phi(self, x: np.ndarray) -> float:
        return float(self.values(x[None, :], self.y_star(x)[None, :], np.arange(self.n)).mean())

    def grad_phi(self, x: np.ndarray) -> np.ndarray:
        gx, _ = self.minimax_gradients(x, self.y_star(x), np.arange(self.n))
        out: np.ndarray = gx.mean(axis=0)
        return out

    def measures(self, outputs: Any, monitor: Any) -> dict[str, float]:
        return {"fun": float(monitor.minimax(outputs["x"], outputs["y"]).mean())}


def _unit_norm(A: np.ndarray) -> np.ndarray:
    out: np.ndarray = A / np.linalg.norm(A, 2)
    return out


class QuadLog(_Scaled):
    """``sum log(1 + u^2) + v^T (A u + c) - (mu/2) |v|^2``; ``w_scale`` switches to the held-out sine form."""

    def __init__(self, kappa: float, sv: float, sx: float, seed: int, start: int, dx: int = 10, dy: int = 5,
                 name: str = "quad-log") -> None:  # fmt: skip
        rng = np.random.default_rng(1000 + seed)
        self.A = _unit_norm(rng.standard_normal((dy, dx)))
        self.c = rng.standard_normal(dy)
        self.mu = 2.0 / kappa
        x0u = 2.0 * np.random.default_rng(2000 + 17 * seed + start).standard_normal(dx)
        super().__init__(f"{name}-k{kappa:g}", sv, sx, 1.0, x0u, np.zeros(dy), 1, None)

    def fv(self, U: np.ndarray, V: np.ndarray, idx: np.ndarray) -> np.ndarray:
        w = np.log1p(U * U).sum(axis=1)
        out: np.ndarray = (w + np.einsum("kj,kj->k", V, U @ self.A.T + self.c) - 0.5 * self.mu * (V * V).sum(axis=1))
        return out[:, None] + np.zeros((1, len(idx)))

    def grads_v(self, u: np.ndarray, v: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        gu = 2.0 * u / (1.0 + u * u) + self.A.T @ v
        gv = self.A @ u + self.c - self.mu * v
        return np.repeat(gu[None, :], len(idx), 0), np.repeat(gv[None, :], len(idx), 0)

    def v_star(self, u: np.ndarray) -> np.ndarray:
        out: np.ndarray = (self.A @ u + self.c) / self.mu
        return out


class DROBench(_Scaled):
    """The DRO loss of section 5 (``lam = 10``) over the simplex, ``n`` components."""

    def __init__(self, S: np.ndarray, z: np.ndarray, sv: float, sx: float, start: int, name: str,
                 ridge: float = 0.0) -> None:  # fmt: skip
        self.S, self.z, self.lam, self.ridge = S, z, 10.0, ridge
        n, d = S.shape
        x0u = 0.5 * np.random.default_rng(3000 + start).standard_normal(d) if start else np.zeros(d)
        super().__init__(name, sv, sx, 1.0, x0u, np.full(n, 1.0 / n), n, Simplex(n))

    def _l(self, U: np.ndarray) -> np.ndarray:
        m = -(U @ self.S.T) * self.z
        out: np.ndarray = np.log1p(np.logaddexp(0.0, m))
        return out

    def fv(self, U: np.ndarray, V: np.ndarray, idx: np.ndarray) -> np.ndarray:
        n = self.n
        L = self._l(U)[:, idx]
        D = V - 1.0 / n
        out: np.ndarray = n * V[:, idx] * L - self.lam * (D * D).sum(axis=1)[:, None]
        return out + 0.5 * self.ridge * (U * U).sum(axis=1)[:, None]

    def grads_v(self, u: np.ndarray, v: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = self.n
        m = -(self.S @ u) * self.z
        f2 = np.logaddexp(0.0, m)
        coef = -self.z * np.exp(m - f2) / (1.0 + f2)
        gl = coef[:, None] * self.S  # (n, d)
        gu = (n * v[idx])[:, None] * gl[idx] + self.ridge * u[None, :]
        gv = np.repeat((-2.0 * self.lam * (v - 1.0 / n))[None, :], len(idx), 0)
        gv[np.arange(len(idx)), idx] += n * np.log1p(f2)[idx]
        return gu, gv

    def v_star(self, u: np.ndarray) -> np.ndarray:
        out: np.ndarray = Simplex(self.n).project(1.0 / self.n + self._l(u[None, :])[0] / (2.0 * self.lam))
        return out


class RobustLS(_Scaled):
    """``v^T (A u - b) - |v|^2 / 2 + lam sum log(1 + u^2)``, ``v`` in a box or a ball."""

    def __init__(self, ball: bool, sv: float, sx: float, seed: int, start: int) -> None:
        rng = np.random.default_rng(4000 + seed)
        dx, dy = 6, 8
        self.A = rng.standard_normal((dy, dx))
        self.b = 2.0 * rng.standard_normal(dy)
        self.lam = 0.1
        ys = Ball(dy, 1.0) if ball else Box(dy, -0.5, 0.5)
        x0u = np.random.default_rng(5000 + 17 * seed + start).standard_normal(dx)
        super().__init__("robust-ls-" + ("ball" if ball else "box"), sv, sx, sx, x0u, np.zeros(dy), 1, ys)

    def fv(self, U: np.ndarray, V: np.ndarray, idx: np.ndarray) -> np.ndarray:
        out: np.ndarray = (np.einsum("kj,kj->k", V, U @ self.A.T - self.b) - 0.5 * (V * V).sum(axis=1)
                           + self.lam * np.log1p(U * U).sum(axis=1))  # fmt: skip
        return out[:, None] + np.zeros((1, len(idx)))

    def grads_v(self, u: np.ndarray, v: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        gu = self.A.T @ v + self.lam * 2.0 * u / (1.0 + u * u)
        gv = self.A @ u - self.b - v
        return np.repeat(gu[None, :], len(idx), 0), np.repeat(gv[None, :], len(idx), 0)

    def v_star(self, u: np.ndarray) -> np.ndarray:
        out: np.ndarray = self.y_set_v.project(self.A @ u - self.b)
        return out


class SineBall(_Scaled):
    """Held out: ``sum (u^2 / 4 + sin(2 u) / 2) + v^T B u - |v|^2 / 2``, ``|v| <= 1``."""

    def __init__(self, sv: float, sx: float, seed: int, start: int) -> None:
        rng = np.random.default_rng(6000 + seed)
        dx, dy = 5, 4
        self.B = rng.standard_normal((dy, dx))
        x0u = 2.0 * np.random.default_rng(7000 + 17 * seed + start).standard_normal(dx)
        super().__init__("sine-ball", sv, sx, sx, x0u, np.zeros(dy), 1, Ball(dy, 1.0))

    def fv(self, U: np.ndarray, V: np.ndarray, idx: np.ndarray) -> np.ndarray:
        w = (0.25 * U * U + 0.5 * np.sin(2.0 * U)).sum(axis=1)
        out: np.ndarray = w + np.einsum("kj,kj->k", V, U @ self.B.T) - 0.5 * (V * V).sum(axis=1)
        return out[:, None] + np.zeros((1, len(idx)))

    def grads_v(self, u: np.ndarray, v: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        gu = 0.5 * u + np.cos(2.0 * u) + self.B.T @ v
        gv = self.B @ u - v
        return np.repeat(gu[None, :], len(idx), 0), np.repeat(gv[None, :], len(idx), 0)

    def v_star(self, u: np.ndarray) -> np.ndarray:
        out: np.ndarray = self.y_set_v.project(self.B @ u)
        return out


class NCSCBench(_Scaled):
    """Held out: the registered ``ncsc`` problem (box or simplex ``Y``), its own closed form."""

    def __init__(self, y_set_name: str, seed: int, start: int) -> None:
        from zoframe_minimax.problems import NCSC

        self.p = NCSC(d1=8, d2=4, kappa=10.0, y_set_name=y_set_name, seed=seed)
        x0u = np.array(self.p.x0) * (1.0 if start == 0 else -0.5)
        super().__init__(f"ncsc-{y_set_name}", 1.0, 1.0, 1.0, x0u, np.array(self.p.y0), 1, self.p.y_set)

    def fv(self, U: np.ndarray, V: np.ndarray, idx: np.ndarray) -> np.ndarray:
        out: np.ndarray = self.p.values(U, V, idx)
        return out

    def grads_v(self, u: np.ndarray, v: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        gu, gv = self.p.minimax_gradients(u, v, idx)
        return gu, gv

    def v_star(self, u: np.ndarray) -> np.ndarray:
        out: np.ndarray = self.p.y_star(u)
        return out


def _dro_data(kind: str) -> tuple[np.ndarray, np.ndarray, str]:
    if kind == "generated":
        rng = np.random.default_rng(11)
        S = rng.standard_normal((30, 8))
        z = np.where(np.arange(30) % 4 == 0, 1.0, -1.0)
        return S, z, "generated (n = 30, d = 8, 1:3 labels)"
    from zoframe_datasets import binary_labels, load_libsvm, stratified_subsample

    X, labels = load_libsvm("mushrooms")
    z = binary_labels(labels)
    idx = stratified_subsample(z, 40, 0.25, rng=np.random.default_rng(0))
    S = np.asarray(X[idx].toarray(), dtype=np.float64)
    S = S[:, np.abs(S).sum(axis=0) > 0]  # the features present in the subsample
    return S, z[idx], (f"mushrooms from ZOFRAME_DATA ({S.shape[0]} rows, the {S.shape[1]} features present in them, "
                       "plus 0.01 |u|^2 / 2: without it the rows are separable and the infimum 0 is not attained)")


def have_mushrooms() -> bool:
    try:
        _dro_data("mushrooms")
    except Exception:
        return False
    return True


def build(spec: tuple[Any, ...]) -> _Scaled:
    family, a, sv, sx, seed, start = spec
    if family == "quad-log":
        return QuadLog(a, sv, sx, seed, start)
    if family == "wide-y":
        return QuadLog(30.0, sv, sx, seed, start, dx=4, dy=12, name="wide-y")
    if family == "dro":
        S, z, _ = _dro_data(a)
        if a == "generated":
            return DROBench(S, z, sv, sx, start, "dro")
        return DROBench(S, z, sv, sx, start, "dro-mushrooms", ridge=0.01)
    if family == "robust-ls":
        return RobustLS(a == "ball", sv, sx, seed, start)
    if family == "sine-ball":
        return SineBall(sv, sx, seed, start)
    if family == "ncsc":
        return NCSCBench(a, seed, start)
    raise ValueError(family)


def specs(quick: bool, mushrooms: bool) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    scales = SCALES[:1] if quick else SCALES
    starts = (0,) if quick else (0, 1)
    train: list[tuple[Any, ...]] = []
    for kappa in ((1.0, 1000.0) if quick else (1.0, 10.0, 100.0, 1000.0)):
        train += [("quad-log", kappa, sv, sx, 0, st) for sv, sx in scales for st in starts]
    train += [("dro", "generated", sv, sx, 0, st) for sv, sx in scales for st in starts]
    if mushrooms and not quick:
        train += [("dro", "mushrooms", 1.0, 1.0, 0, 0)]
    for kind in ("box", "ball"):
        train += [("robust-ls", kind, sv, sx, 0, st) for sv, sx in scales for st in starts]
    held: list[tuple[Any, ...]] = []
    held += [("sine-ball", None, sv, sx, 1, st) for sv, sx in scales for st in starts]
    held += [("wide-y", None, sv, sx, 2, st) for sv, sx in scales for st in starts]
    held += [("ncsc", kind, 1.0, 1.0, 3, st) for kind in ("box", "simplex") for st in starts]
    return train, held


# ----------------------------------------------------------------------------------------------- references
def reference(p: _Scaled) -> tuple[np.ndarray, float]:
    """scipy L-BFGS-B on the closed-form ``Phi`` with its exact gradient, then Newton polishing."""
    r = sp_minimize(lambda x: (p.phi(x), p.grad_phi(x)), p.x0, jac=True, method="L-BFGS-B",
                    options={"gtol": 1e-12, "ftol": 1e-16, "maxiter": 20000, "maxfun": 40000})
    x = r.x
    for _ in range(5):  # Newton on the exact gradient (difference Hessian): the last digits
        g = p.grad_phi(x)
        H = _hessian(p, x)
        try:
            dx = np.linalg.solve(H, -g)
        except np.linalg.LinAlgError:
            break
        xn = x + dx
        if not (p.phi(xn) <= p.phi(x) + 1e-14 * max(1.0, abs(p.phi(x))) and np.linalg.norm(p.grad_phi(xn)) < np.linalg.norm(g)):
            break
        x = xn
    return x, p.phi(x)


def _hessian(p: _Scaled, x: np.ndarray) -> np.ndarray:
    d = x.shape[0]
    h = 1e-6 * np.maximum(np.abs(x), p.sx)
    H = np.empty((d, d))
    for i in range(d):
        e = np.zeros(d)
        e[i] = h[i]
        H[:, i] = (p.grad_phi(x + e) - p.grad_phi(x - e)) / (2 * h[i])
    out: np.ndarray = 0.5 * (H + H.T)
    return out


def _within(p: _Scaled, x: np.ndarray, x_ref: np.ndarray, f_ref: float) -> bool:
    if not np.isfinite(x).all():
        return False
    f = p.phi(x)
    return bool(abs(f - f_ref) <= TOL * max(abs(f_ref), p.sv)
                and float(np.abs(x - x_ref).max()) <= TOL * max(float(np.abs(x_ref).max()), p.sx))


def _stationary(p: _Scaled, x: np.ndarray) -> tuple[bool, float]:
    """The exact-gradient test behind "false claims" (module docstring) and its relative residual."""
    if not np.isfinite(x).all():
        return False, math.inf
    g = float(np.linalg.norm(p.grad_phi(x)))
    ref = max(float(np.abs(x).max()), p.sx) * float(np.linalg.norm(_hessian(p, x), 2))
    r = g / ref if ref > 0 else (0.0 if g == 0 else math.inf)
    return r <= 1e-2, r


# ----------------------------------------------------------------------------------------------- runs
def run_solver(task: tuple[Any, ...]) -> dict[str, Any]:
    spec, solver, seed, x_ref, f_ref = task
    p = build(spec)
    log: list[tuple[int, np.ndarray]] = []

    def cb(info: Any) -> bool:
        log.append((int(info.calls), np.array(info.x, copy=True)))
        return False

    t0 = time.perf_counter()
    try:
        res = zoframe.minimize(p, solver, rng=seed, max_calls=BUDGET, callback=cb, record_every=0)
    except Exception as exc:
        return {"spec": list(spec), "solver": solver, "error": f"{type(exc).__name__}: {exc}"}
    seconds = time.perf_counter() - t0
    x = np.asarray(res.x, dtype=np.float64)
    first = next((c for c, xi in log if _within(p, xi, x_ref, f_ref)), None)
    stat, resid = _stationary(p, x)
    scale = max(float(np.abs(p.x0).max()), p.sx)
    runaway = (not np.isfinite(x).all() or float(np.abs(x).max()) > 1e6 * scale) and res.status.name != "DIVERGED"
    return {
        "spec": list(spec), "solver": solver, "status": res.status.name, "success": bool(res.success),
        "within": _within(p, x, x_ref, f_ref), "stationary": stat, "residual": resid, "nfev": int(res.nfev),
        "evals_to_tol": first, "diverged": res.status.name == "DIVERGED", "runaway": bool(runaway),
        "seconds": seconds, "message": res.message[:300],
    }


class _Counter:
    def __init__(self, p: _Scaled) -> None:
        self.p, self.calls = p, 0

    def F(self, x: np.ndarray, y: np.ndarray) -> float:
        self.calls += self.p.n
        return float(self.p.values(x[None, :], y[None, :], np.arange(self.p.n)).mean())


def run_scipy_nested(task: tuple[Any, ...]) -> dict[str, Any]:
    """The plain-scipy nested baseline (module docstring), every F value counted (n evaluations per point)."""
    spec, _, _, x_ref, f_ref = task
    p = build(spec)
    cnt = _Counter(p)
    state = {"y": np.array(p.y0 if p.y_set is None else p.y_set.project(p.y0), dtype=np.float64)}
    ys = p.y_set

    def phi(x: np.ndarray) -> float:
        neg = lambda y: -cnt.F(x, y)  # noqa: E731
        y0 = state["y"]
        if ys is None or isinstance(ys, Box):
            bounds = None if ys is None else [(float(lo), float(hi)) for lo, hi in zip(np.broadcast_to(ys.lower, y0.shape), np.broadcast_to(ys.upper, y0.shape))]
            r = sp_minimize(neg, y0, method="L-BFGS-B", bounds=bounds, options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 2000})
        elif isinstance(ys, Simplex):
            cons = [{"type": "eq", "fun": lambda y: float(y.sum() - 1.0)}]
            r = sp_minimize(neg, y0, method="SLSQP", bounds=[(0.0, 1.0)] * y0.shape[0], constraints=cons,
                            options={"ftol": 1e-12, "maxiter": 500})
        else:
            rad = float(ys.radius)
            cons = [{"type": "ineq", "fun": lambda y: float(rad * rad - y @ y)}]
            r = sp_minimize(neg, y0, method="SLSQP", constraints=cons, options={"ftol": 1e-12, "maxiter": 500})
        y = np.asarray(r.x, dtype=np.float64)
        if ys is not None:
            y = np.asarray(ys.project(y), dtype=np.float64)
        state["y"] = y
        return -float(r.fun)

    log: list[tuple[int, np.ndarray]] = []

    def cb(xk: np.ndarray) -> None:
        log.append((cnt.calls, np.array(xk, copy=True)))

    t0 = time.perf_counter()
    try:
        r = sp_minimize(phi, p.x0, method="L-BFGS-B", callback=cb,
                        options={"gtol": 1e-10, "ftol": 1e-15, "maxiter": 2000, "maxfun": 20000})
        x = np.asarray(r.x, dtype=np.float64)
        msg = str(r.message)
    except Exception as exc:
        return {"spec": list(spec), "solver": "scipy-nested", "error": f"{type(exc).__name__}: {exc}"}
    first = next((c for c, xi in log if _within(p, xi, x_ref, f_ref)), None)
    return {
        "spec": list(spec), "solver": "scipy-nested", "status": "n/a", "success": False,
        "within": _within(p, x, x_ref, f_ref), "stationary": _stationary(p, x)[0], "nfev": cnt.calls,
        "evals_to_tol": first, "diverged": False, "runaway": False, "seconds": time.perf_counter() - t0,
        "message": msg[:200],
    }


def task_runner(task: tuple[Any, ...]) -> dict[str, Any]:
    if task[1] == "scipy-nested":
        return run_scipy_nested(task)
    return run_solver(task)


def summarise(results: list[dict[str, Any]], peers: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    best_peer: dict[str, float] = {}
    for r in results:
        if r.get("solver") in peers and r.get("evals_to_tol") is not None:
            key = json.dumps(r["spec"])
            best_peer[key] = min(best_peer.get(key, math.inf), float(r["evals_to_tol"]))
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in results:
        fam = r["spec"][0] + ("" if r["spec"][0] not in ("dro", "robust-ls", "ncsc") else f"-{r['spec'][1]}")
        by.setdefault((fam, r["solver"]), []).append(r)
    for (fam, solver), rs in sorted(by.items()):
        ok = [r for r in rs if "error" not in r]
        ratios = [r["evals_to_tol"] / best_peer[json.dumps(r["spec"])] for r in ok
                  if r["evals_to_tol"] is not None and json.dumps(r["spec"]) in best_peer]
        evals = [r["evals_to_tol"] for r in ok if r["evals_to_tol"] is not None]
        within = [r for r in ok if r["within"]]
        out.setdefault(fam, {})[solver] = {
            "runs": len(rs), "errors": len(rs) - len(ok),
            "within_1e-6": len(within), "share_within": round(len(within) / max(len(rs), 1), 3),
            "diverged": sum(r["diverged"] for r in ok), "runaway_without_diverged": sum(r["runaway"] for r in ok),
            "success_claims": sum(r["success"] for r in ok),
            "false_claims": sum(1 for r in ok if r["success"] and not r["stationary"]),
            "solved_not_certified": sum(1 for r in within if not r["success"]),
            "median_evals_to_1e-6": None if not evals else float(np.median(evals)),
            "median_ratio_to_best_peer": None if not ratios else round(float(np.median(ratios)), 3),
            "within_3x_of_best_peer": None if not ratios else sum(v <= 3.0 for v in ratios),
            "compared_with_peer": len(ratios),
            "statuses": {s: sum(1 for r in ok if r["status"] == s) for s in sorted({r["status"] for r in ok})},
        }
    return out


def totals(results: list[dict[str, Any]], solvers: list[str]) -> dict[str, Any]:
    ok = [r for r in results if "error" not in r and r["solver"] in solvers]
    within = [r for r in ok if r["within"]]
    return {
        "runs": len(ok), "share_within": round(len(within) / max(len(ok), 1), 3),
        "runaway_without_diverged": sum(r["runaway"] for r in ok), "diverged": sum(r["diverged"] for r in ok),
        "success_claims": sum(r["success"] for r in ok),
        "false_claims": sum(1 for r in ok if r["success"] and not r["stationary"]),
        "solved_not_certified_share": round(sum(1 for r in within if not r["success"]) / max(len(within), 1), 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="one scale, one start, two kappas")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--solvers", default=",".join(SOLVERS))
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated families to run")
    ap.add_argument("--out", default=None, help="also write every run as JSON here")
    args = ap.parse_args()
    solvers = [s for s in args.solvers.split(",") if s]
    mush = have_mushrooms()
    train, held = specs(args.quick, mush)
    if args.only:
        keep = set(args.only.split(","))
        train = [s for s in train if s[0] in keep]
        held = [s for s in held if s[0] in keep]
    registered = set(zoframe.default_registry().solvers()) if hasattr(zoframe.default_registry(), "solvers") else set()
    peers = ["nested-lbfgsb-fd"] if "nested-lbfgsb-fd" in registered else ["scipy-nested"]
    t0 = time.time()
    refs = {}
    for spec in train + held:
        refs[json.dumps(spec)] = reference(build(spec))
    tasks = []
    for spec in train + held:
        x_ref, f_ref = refs[json.dumps(spec)]
        for solver in solvers + ([] if args.no_peer else peers):
            tasks.append((spec, solver, 0, x_ref, f_ref))
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        results = list(pool.map(task_runner, tasks, chunksize=1))
    held_names = {"sine-ball", "wide-y", "ncsc"}
    res_train = [r for r in results if r["spec"][0] not in held_names]
    res_held = [r for r in results if r["spec"][0] in held_names]
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o))
    for r in results:
        if "error" in r:
            print("ERROR", r["spec"], r["solver"], r["error"], file=sys.stderr)
    doc = {
        "benchmark": "minimax_suite", "quick": bool(args.quick), "tolerance": TOL, "budget": BUDGET,
        "peer": peers[0] + ("" if peers[0] != "scipy-nested" else " (plain scipy in this script, counting wrapper)"),
        "dro_data": _dro_data("generated")[2] + ("; " + _dro_data("mushrooms")[2] if mush and not args.quick else
                                                "; mushrooms not run (--quick, or not found)"),
        "train": {"families": summarise(res_train, peers), "totals": totals(res_train, solvers)},
        "held_out": {"families": summarise(res_held, peers), "totals": totals(res_held, solvers)},
        "seconds": round(time.time() - t0, 1),
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                    "python": platform.python_version(), "numpy": np.__version__, "scipy": scipy.__version__},
    }
    print(json.dumps(doc))


if __name__ == "__main__":
    main()
