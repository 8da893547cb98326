"""``adszog`` / ``dszog`` (defaults, with the precision phase) on many-constraint families, beside scipy
SLSQP with forward-difference gradients (``jac="2-point"``) and COBYLA called on the same black boxes.

Families (our own; ``m`` constraints up to 10^7 and more). The data of constraint ``i`` are computed from
``i`` on demand, in chunks of :data:`CHUNK` indices, so no ``m x d`` array is ever held (memory
``O(chunk d)`` whatever ``m`` is):

* ``polytope``: projection of a far point ``a`` (``5 N(0, I)``) onto ``{x : A x <= 1}``, d = 20;
* ``fit``: one-sided least-squares fit of noisy data by a Chebyshev polynomial of ``d = 12`` coefficients,
  above the data at each of ``m`` grid points ``t_i = -1 + 2 i / (m - 1)`` (semi-infinite convex QP); the
  objective is the mean squared residual over the grid, evaluated from the grid's ``d x d`` moments
  (computed once in a blocked pass);
* ``rosenbrock``: Rosenbrock (d = 10) inside ``m`` halfspaces ``D_i x <= e_i`` with unit normals, which cut
  off (1, ..., 1);
* ``balls``: logistic loss (d = 10, 200 samples) inside the intersection of ``m`` balls (centres ``C_i``,
  radii ``|C_i| + u_i``, ``u_i`` in [0.2, 1]) that all hold the ball ``|x| <= 0.2``.

How rows are made from an index (this replaced dense Gaussian ``m x d`` arrays drawn at once; the
kinds of problem are the same, the random rows are now pseudo-random): row ``i`` of ``A`` (of ``D`` and
``C`` before their scaling) is ``sqrt(2) cos(omega_k i + phi_k)``, ``k < d``, with frequencies ``omega_k``
and phases ``phi_k`` drawn from the seed: a random-Fourier-feature row of the index, each entry of mean 0
and variance 1, the rows equidistributed like independent draws (Weyl); it is computed as
``Re(U[i // P] V[i % P])`` from two tables of ``e^{i omega_k q P}`` and ``sqrt(2) e^{i (omega_k r + phi_k)}``
(``P = max(4096, sqrt(m))``). The scalars of an index (the noise of the fit, ``e_i``, ``u_i``) come from a splitmix64
hash of the seed and the index. The same index always gives the same row, bit for bit, whatever the block it is
asked in (a constraint value up to the rounding of the matrix product).

``f*`` is computed independently of zoframe by an exchange (cutting-plane) method with exact gradients
(:func:`reference`): the problem is solved on a working set of constraints (cvxpy / Clarabel for the two
QPs, polished on their active set; scipy SLSQP with the exact gradient and Jacobian for ``rosenbrock`` and
``balls``), a blocked pass over all ``m`` constraints finds the most violated ones, they join the working
set, and this repeats until the max violation over all ``m`` is ``<= 1e-12``. ``--check-reference`` (and
the test) compare it at small ``m`` with a dense solve over all constraints (the former reference).

Budget: ``100 d`` full evaluations (one full evaluation = the objective and all ``m`` constraints at one
point): ``max_calls = 100 d (1 + m)`` for zoframe, ``maxfun = 100 d`` for COBYLA (each call all ``m``
constraints); SLSQP gets ``maxiter = 100`` and counts its own evaluations. Every run has a wall-clock cap
(``--cap`` seconds) and runs in a forked process (scipy's killed at the cap, which returns the best
feasible point it evaluated). A scipy method whose dense arrays (SLSQP: the ``m x d`` difference Jacobian,
its ``m x d`` copy and the ``3 m d + 9 m + ...`` workspace; COBYLA: two ``m x (d + 1)`` arrays of the
constraint values of its simplex and the ``d x m`` gradients of its linear models; see
:func:`scipy_need_bytes`) need more than ``--mem-gb`` is not run and reported as not fitting, with the
computed need.

Per run: relative error ``|f - f*| / max(1, |f*|)``, max violation over all ``m`` (exact), seconds, peak
traced memory (tracemalloc, MB) and the run process's max resident set (``getrusage``, MB; it includes
the interpreter and libraries) and status; one final JSON line.

    python benchmarks/many_constraints.py [--m 10000,100000] [--seeds 3] [--first-seed 0] [--cap 120]
        [--families polytope,fit,rosenbrock,balls] [--solvers adszog,dszog,slsqp-2point,cobyla]
        [--mem-gb 2] [--check-reference]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
import json
import math
import multiprocessing as mp
import os
import resource
import sys
import time
import tracemalloc
from typing import Any
import warnings

import numpy as np
from scipy import optimize
from scipy.special import ndtri

#: indices per generated chunk of constraint data (memory O(CHUNK d))
CHUNK = 1 << 12
#: the least period of the second table of the Fourier rows
_P = 4096
_GOLD = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def hash_uniform(key: int, idx: np.ndarray) -> np.ndarray:
    """A uniform value in (0, 1) for each index: splitmix64 of ``key`` and the index (no state, no table)."""
    with np.errstate(over="ignore"):
        z = (np.asarray(idx, dtype=np.uint64) + np.uint64(1)) * _GOLD + np.uint64(key % (1 << 63)) * _M2
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        z = z ^ (z >> np.uint64(31))
    out: np.ndarray = ((z >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53
    return out


class FourierRows:
    """Row ``i`` = ``sqrt(2) cos(omega_k i + phi_k)`` for ``k < d``, computed from ``i`` (see the module docstring)."""

    def __init__(self, d: int, m: int, rng: np.random.Generator) -> None:
        omega = rng.uniform(0.0, 2.0 * np.pi, d)
        phi = rng.uniform(0.0, 2.0 * np.pi, d)
        self.P = P = max(_P, math.isqrt(m) + 1)  # two tables of O(sqrt(m) d) entries
        q = np.arange(m // P + 1, dtype=np.float64)
        r = np.arange(P, dtype=np.float64)
        self.U = np.exp(1j * np.mod(np.outer(q * P, omega), 2.0 * np.pi))
        self.V = math.sqrt(2.0) * np.exp(1j * (np.outer(r, omega) + phi))

    def __call__(self, idx: np.ndarray) -> np.ndarray:
        idx = np.asarray(idx, dtype=np.int64)
        out: np.ndarray = np.ascontiguousarray((self.U[idx // self.P] * self.V[idx % self.P]).real)
        return out


def _chunks(idx: np.ndarray) -> list[np.ndarray]:
    return [idx[lo : lo + CHUNK] for lo in range(0, idx.shape[0], CHUNK)]


@dataclass
class Family:
    """One instance: ``f(X)`` (rows of points), ``g(X, idx)`` (constraints ``idx`` at rows of ``X``),
    ``jac(x, idx)`` (their exact Jacobian rows), ``x0`` and, for the exchange reference, the exact objective
    gradient (``grad``) or its quadratic form (``quad = (H, q, c)``: ``f = 1/2 x^T H x + q^T x + c``) with
    the linear constraints ``lin(idx) = (A_idx, b_idx)`` (``A x <= b``)."""

    name: str
    d: int
    m: int
    x0: np.ndarray
    f: Callable[[np.ndarray], np.ndarray]
    g_chunk: Callable[[np.ndarray, np.ndarray], np.ndarray]
    jac: Callable[[np.ndarray, np.ndarray], np.ndarray]
    grad: Callable[[np.ndarray], np.ndarray]
    quad: tuple[np.ndarray, np.ndarray, float] | None = None
    lin: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def g(self, X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        idx = np.asarray(idx, dtype=np.int64).reshape(-1)
        out = np.empty((X.shape[0], idx.shape[0]))
        for lo in range(0, idx.shape[0], CHUNK):
            out[:, lo : lo + CHUNK] = self.g_chunk(X, idx[lo : lo + CHUNK])
        return out


def family(name: str, m: int, seed: int) -> Family:
    """The instance ``name`` with ``m`` constraints for ``seed`` (its constraint data made per index)."""
    rng = np.random.default_rng(1000 * seed + m % 997)
    key = int(rng.integers(1 << 62))
    if name == "polytope":
        d = 20
        rows = FourierRows(d, m, rng)
        a = 5.0 * rng.standard_normal(d)
        return Family(
            name, d, m, np.zeros(d), f=lambda X: ((X - a) ** 2).sum(1), g_chunk=lambda X, idx: X @ rows(idx).T - 1.0,
            jac=lambda x, idx: rows(idx), grad=lambda x: 2.0 * (x - a), quad=(2.0 * np.eye(d), -2.0 * a, float(a @ a)),
            lin=lambda idx: (rows(idx), np.ones(len(idx))),
        )  # fmt: skip
    if name == "fit":
        d = 12

        def cheb(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            t = -1.0 + 2.0 * np.asarray(idx, dtype=np.float64) / max(m - 1, 1)
            y = np.sin(3 * t) + 0.5 * np.cos(7 * t) + 0.05 * ndtri(hash_uniform(key, idx))
            return np.polynomial.chebyshev.chebvander(t, d - 1), y

        G = np.zeros((d, d))
        b = np.zeros(d)
        yy = 0.0
        for ch in _chunks(np.arange(m)):  # the grid's moments, once
            Phi, y = cheb(ch)
            G += Phi.T @ Phi
            b += Phi.T @ y
            yy += float(y @ y)
        G, b, yy = G / m, b / m, yy / m

        def f(X: np.ndarray) -> np.ndarray:
            out: np.ndarray = np.einsum("ij,jk,ik->i", X, G, X) - 2.0 * X @ b + yy
            return out

        def g_fit(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
            Phi, y = cheb(idx)
            out: np.ndarray = y - X @ Phi.T
            return out

        return Family(
            name, d, m, np.zeros(d), f=f, g_chunk=g_fit, jac=lambda x, idx: -cheb(idx)[0], grad=lambda x: 2.0 * (G @ x - b),
            quad=(2.0 * G, -2.0 * b, yy), lin=lambda idx: (-cheb(idx)[0], -cheb(idx)[1]),
        )  # fmt: skip
    if name == "rosenbrock":
        d = 10
        rows = FourierRows(d, m, rng)

        def normals(idx: np.ndarray) -> np.ndarray:
            D = rows(idx)
            out: np.ndarray = D / np.linalg.norm(D, axis=1, keepdims=True)
            return out

        def f_r(X: np.ndarray) -> np.ndarray:
            out: np.ndarray = (100.0 * (X[:, 1:] - X[:, :-1] ** 2) ** 2 + (1.0 - X[:, :-1]) ** 2).sum(axis=1)
            return out

        def grad(x: np.ndarray) -> np.ndarray:
            gr = np.zeros_like(x)
            gr[:-1] = -400.0 * x[:-1] * (x[1:] - x[:-1] ** 2) - 2.0 * (1.0 - x[:-1])
            gr[1:] += 200.0 * (x[1:] - x[:-1] ** 2)
            return gr

        return Family(
            name, d, m, np.zeros(d), f=f_r, grad=grad, jac=lambda x, idx: normals(idx),
            g_chunk=lambda X, idx: X @ normals(idx).T - (1.5 + 1.5 * hash_uniform(key, idx)),
        )  # fmt: skip
    if name == "balls":
        d, n = 10, 200
        rows = FourierRows(d, m, rng)
        Z = rng.standard_normal((n, d))
        lab = np.sign(Z @ rng.standard_normal(d) + 0.3 * rng.standard_normal(n))

        def f_b(X: np.ndarray) -> np.ndarray:
            out: np.ndarray = np.logaddexp(0.0, -(X @ Z.T) * lab).mean(axis=1)
            return out

        def fgrad(x: np.ndarray) -> np.ndarray:
            s = -lab / (1.0 + np.exp((Z @ x) * lab))
            out: np.ndarray = (Z * s[:, None]).mean(axis=0)
            return out

        def g_b(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
            C = 0.3 * rows(idx)
            cc = (C * C).sum(1)
            r2 = (np.sqrt(cc) + 0.2 + 0.8 * hash_uniform(key, idx)) ** 2  # every ball holds |x| <= 0.2
            out: np.ndarray = (X * X).sum(1)[:, None] - 2.0 * X @ C.T + (cc - r2)
            return out

        return Family(
            name, d, m, np.zeros(d), f=f_b, grad=fgrad, g_chunk=g_b, jac=lambda x, idx: 2.0 * (x - 0.3 * rows(idx))
        )
    if name == "ellipsoids":
        d = 20
        rows = FourierRows(d, m, rng)
        axes = FourierRows(d, m, rng)
        a = 5.0 * rng.standard_normal(d)

        def shape(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            C = 0.3 * rows(idx)  # centres
            Wt = np.exp(0.5 * axes(idx))  # axis weights, about e^[-0.7, 0.7]
            reach = np.sqrt((C * C).sum(1)) + 0.5 + 0.5 * hash_uniform(key, idx)
            r2 = Wt.max(axis=1) * reach**2  # every ellipsoid holds the ball |x| <= 0.5
            return C, Wt, r2

        def g_e(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
            C, Wt, r2 = shape(idx)
            # sum_k w_ik (x_k - c_ik)^2 - r_i^2, expanded (no (k, b, d) temporary)
            out: np.ndarray = (X * X) @ Wt.T - 2.0 * X @ (Wt * C).T + ((Wt * C * C).sum(1) - r2)
            return out

        def jac_e(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
            C, Wt, _ = shape(idx)
            out: np.ndarray = 2.0 * Wt * (x[None, :] - C)
            return out

        return Family(
            name, d, m, np.zeros(d), f=lambda X: ((X - a) ** 2).sum(1), g_chunk=g_e, jac=jac_e,
            grad=lambda x: 2.0 * (x - a),
        )  # fmt: skip
    raise SystemExit(f"unknown family {name!r}")


def full_pass(fam: Family, x: np.ndarray, top: int = 0, block: int = 1 << 18) -> tuple[float, np.ndarray, np.ndarray]:
    """Max of the ``m`` constraint values at ``x`` (blocked, exact) and the ``top`` largest (indices, values)."""
    best_i = np.zeros(0, dtype=np.int64)
    best_v = np.zeros(0)
    vmax = -math.inf
    for lo in range(0, fam.m, block):
        idx = np.arange(lo, min(fam.m, lo + block))
        v = fam.g(x[None, :], idx)[0]
        vmax = max(vmax, float(v.max()))
        if top:
            k = min(top, v.shape[0])
            sel = np.argpartition(-v, k - 1)[:k]
            best_i = np.concatenate([best_i, idx[sel]])
            best_v = np.concatenate([best_v, v[sel]])
            keep = np.argsort(-best_v, kind="stable")[:top]
            best_i, best_v = best_i[keep], best_v[keep]
    return vmax, best_i, best_v


def _solve_qp(fam: Family, S: np.ndarray) -> np.ndarray:
    """``min 1/2 x^T H x + q^T x`` s.t. ``A_S x <= b_S`` with Clarabel, then polished on its active set (the
    KKT system solved exactly; kept only when it is feasible on ``S`` with multipliers >= 0)."""
    import cvxpy as cp

    if fam.quad is None or fam.lin is None:
        raise ValueError(f"family {fam.name!r} is no QP with linear constraints: use the SLSQP subproblem")
    H, q, _ = fam.quad
    A, b = fam.lin(S)
    L = np.linalg.cholesky(H)
    x = cp.Variable(fam.d)
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(L.T @ x) + q @ x), [A @ x <= b])
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12, max_iter=500)
    xc = np.asarray(x.value, dtype=float)
    act = np.flatnonzero(b - A @ xc <= 1e-8 * (1.0 + np.abs(b)))
    if act.shape[0] == 0 or act.shape[0] > fam.d:
        return xc
    Aa = A[act]
    K = np.block([[H, Aa.T], [Aa, np.zeros((act.shape[0], act.shape[0]))]])
    try:
        sol = np.linalg.solve(K, np.concatenate([-q, b[act]]))
    except np.linalg.LinAlgError:
        return xc
    xp, lam = sol[: fam.d], sol[fam.d :]
    scale = 1.0 + np.abs(b)
    if lam.min() >= -1e-12 and float(((A @ xp - b) / scale).max()) <= 1e-14:
        return np.asarray(xp)
    return xc


def _solve_nlp(fam: Family, S: np.ndarray) -> np.ndarray:
    """``min f`` s.t. ``g_S <= 0`` by SLSQP from ``x0`` with the exact gradient and Jacobian."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = optimize.minimize(
            lambda x: float(fam.f(x[None, :])[0]), fam.x0, jac=fam.grad, method="SLSQP",
            constraints=[{"type": "ineq", "fun": lambda x: -fam.g(x[None, :], S)[0], "jac": lambda x: -fam.jac(x, S)}],
            options={"ftol": 1e-15, "maxiter": 3000},
        )  # fmt: skip
    return np.asarray(res.x, dtype=float)


def reference(fam: Family, tol: float = 1e-12, add: int | None = None, max_rounds: int = 500) -> dict[str, Any]:
    """``f*`` by constraint exchange with exact gradients, never holding more than the working set's rows:
    solve on ``S`` (QP: Clarabel + active-set polish; otherwise SLSQP with exact derivatives from ``x0``), one
    blocked pass over all ``m`` at the solution, the ``add`` (default ``d``) most violated join ``S``; until the
    max violation over all ``m`` is ``<= tol``. ``S`` starts with the ``2 d`` largest constraints at ``x0``."""
    t0 = time.perf_counter()
    add = fam.d if add is None else add
    _, S, _ = full_pass(fam, fam.x0, top=2 * fam.d)
    S = np.sort(S)
    x = fam.x0
    vmax = math.inf
    rounds = 0
    while rounds < max_rounds:
        rounds += 1
        x = _solve_qp(fam, S) if fam.quad is not None else _solve_nlp(fam, S)
        vmax, top_i, top_v = full_pass(fam, x, top=add)
        if vmax <= tol:
            break
        new = np.setdiff1d(top_i[top_v > tol], S)
        if new.shape[0] == 0:  # the violated ones are all in S already: the subproblem's own accuracy
            break
        S = np.union1d(S, new)
    return {"f_star": float(fam.f(x[None, :])[0]), "x": x, "violation": max(vmax, 0.0), "rounds": rounds,
            "working_set": int(S.shape[0]), "seconds": time.perf_counter() - t0}  # fmt: skip


def dense_reference(fam: Family) -> float:
    """The former reference, over all ``m`` constraints at once (dense ``m x d``; small ``m`` only)."""
    idx = np.arange(fam.m)
    if fam.quad is not None:
        return float(fam.f(_solve_qp(fam, idx)[None, :])[0])
    return float(fam.f(_solve_nlp(fam, idx)[None, :])[0])


def scipy_need_bytes(method: str, m: int, d: int) -> int:
    """Bytes of the dense arrays scipy allocates for ``m`` constraints in ``d`` variables (a lower bound):
    SLSQP: the ``m x d`` difference Jacobian, its ``m x d`` copy ``C`` and the workspace of scipy's
    ``_minimize_slsqp`` (``d(d+1)/2 + 3 m d + 9 m + 8 d^2 + 35 d + 28`` doubles); COBYLA (scipy's PRIMA
    port): the ``m x (d + 1)`` constraint values of its simplex (built as ``zeros + REALMAX``: two such
    arrays at once) and the ``d x m`` gradients of its linear models, ``m (3 d + 2)`` doubles (the traced
    peak measured at m = 1e7, d = 12: 2.84 GiB, as computed)."""
    if method == "slsqp-2point":
        return 8 * (2 * m * d + d * (d + 1) // 2 + 3 * m * d + 9 * m + 8 * d * d + 35 * d + 28)
    return 8 * m * (3 * d + 2)


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # kB on Linux


def _cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return float(ru.ru_utime + ru.ru_stime)


def _zoframe_child(fam: Family, solver: str, seed: int, cap: float, conn: Any) -> None:
    import zoframe

    tracemalloc.start()
    t0 = time.perf_counter()
    cpu0 = _cpu_seconds()
    prob = zoframe.Constrained(fam.f, fam.g, m=fam.m, x0=fam.x0)
    r = zoframe.minimize(prob, solver, rng=seed, max_calls=100 * fam.d * (1 + fam.m), max_time=cap, record_every=0)
    sec = time.perf_counter() - t0
    conn.send({"x": np.asarray(r.x), "status": r.status.name, "success": bool(r.success), "evals": int(r.nfev),
               "seconds": sec, "cpu_seconds": _cpu_seconds() - cpu0, "peak_mb": tracemalloc.get_traced_memory()[1] / 2**20, "maxrss_mb": _maxrss_mb(),
               "message": str(r.message)[:400]})  # fmt: skip
    conn.close()


def run_zoframe(fam: Family, solver: str, seed: int, cap: float) -> dict[str, Any]:
    """zoframe in a forked process (its own peak memory and max RSS), killed at twice the cap if it overruns."""
    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    t0 = time.perf_counter()
    child = ctx.Process(target=_zoframe_child, args=(fam, solver, seed, cap, send))
    child.start()
    send.close()
    out = recv.recv() if recv.poll(2.0 * cap + 60.0) else None
    child.join(10.0)
    if child.is_alive():
        child.terminate()
        child.join()
    if out is None:
        return {"x": fam.x0, "status": "killed", "success": False, "evals": 0, "seconds": time.perf_counter() - t0,
                "peak_mb": math.nan, "maxrss_mb": math.nan}  # fmt: skip
    return dict(out)


def _scipy_child(fam: Family, method: str, shared: Any) -> None:
    """Runs in a forked process: scipy on the black boxes; the best feasible point seen, the evaluations, the
    peak traced memory and the max RSS go to ``shared`` after every constraint call (the parent may kill it)."""
    d, m = fam.d, fam.m
    tracemalloc.start()
    cpu0 = _cpu_seconds()
    idx_all = np.arange(m)
    best_f = [math.inf]
    shared[:d] = np.asarray(fam.x0, dtype=float)

    def fun(x: np.ndarray) -> float:
        shared[d + 1] += 1
        return float(fam.f(x[None, :])[0])

    def cons(x: np.ndarray) -> np.ndarray:
        shared[d + 1] += m
        g = fam.g(x[None, :], idx_all)[0]
        fx = float(fam.f(x[None, :])[0])
        if g.max() <= 1e-8 and fx < best_f[0]:
            best_f[0] = fx
            shared[:d] = x
        shared[d + 2] = tracemalloc.get_traced_memory()[1] / 2**20
        shared[d + 3] = _maxrss_mb()
        shared[d + 4] = _cpu_seconds() - cpu0
        return np.asarray(-g)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method == "slsqp-2point":
            res = optimize.minimize(fun, fam.x0, jac="2-point", method="SLSQP",
                                    constraints=[{"type": "ineq", "fun": cons}], options={"maxiter": 100, "ftol": 1e-12})  # fmt: skip
        else:
            res = optimize.minimize(fun, fam.x0, method="COBYLA", constraints=[{"type": "ineq", "fun": cons}],
                                    options={"maxiter": 100 * d, "tol": 1e-12})  # fmt: skip
    shared[:d] = res.x
    shared[d + 2] = tracemalloc.get_traced_memory()[1] / 2**20
    shared[d + 3] = _maxrss_mb()
    shared[d + 4] = _cpu_seconds() - cpu0
    shared[d] = 1.0 if res.success else 2.0  # done: converged / not


def run_scipy(fam: Family, method: str, cap: float) -> dict[str, Any]:
    """scipy in a forked child process, killed at the wall-clock cap (COBYLA's own linear algebra over m
    constraints cannot be interrupted from a callback); the capped result is the best feasible point seen."""
    d = fam.d
    shared = mp.get_context("fork").Array("d", d + 5, lock=False)
    t0 = time.perf_counter()
    child = mp.get_context("fork").Process(target=_scipy_child, args=(fam, method, shared))
    child.start()
    child.join(cap)
    if child.is_alive():
        child.terminate()
        child.join()
    state = shared[d]
    status = {1.0: "success", 2.0: "not converged"}.get(state, "wall-clock cap")
    return {"x": np.array(shared[:d]), "status": status, "success": status == "success", "evals": int(shared[d + 1]),
            "seconds": time.perf_counter() - t0, "peak_mb": float(shared[d + 2]), "maxrss_mb": float(shared[d + 3]),
            "cpu_seconds": float(shared[d + 4])}  # fmt: skip


def check_reference(names: list[str], m: int, seeds: int) -> dict[str, float]:
    """Largest ``|f*_exchange - f*_dense| / max(1, |f*|)`` per family over ``seeds`` seeds at ``m``."""
    out: dict[str, float] = {}
    for name in names:
        worst = 0.0
        for seed in range(seeds):
            fam = family(name, m, seed)
            fs = reference(fam)["f_star"]
            fd = dense_reference(fam)
            worst = max(worst, abs(fs - fd) / max(1.0, abs(fd)))
        out[name] = worst
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", default="10000,100000")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + seeds - 1")
    ap.add_argument("--cap", type=float, default=120.0)
    ap.add_argument("--families", default="polytope,fit,rosenbrock,balls")
    ap.add_argument("--solvers", default="adszog,dszog,slsqp-2point,cobyla")
    ap.add_argument("--mem-gb", type=float, default=2.0, help="scipy runs whose dense arrays need more are not run")
    ap.add_argument(
        "--check-reference", action="store_true", help="compare the exchange f* with a dense solve at m = 1e4"
    )
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    names = args.families.split(",")
    solvers = args.solvers.split(",")
    head: dict[str, Any] = {"benchmark": "many_constraints", "seeds": args.seeds, "cap_seconds": args.cap,
                            "cpus": os.cpu_count(), "load_average_start": list(os.getloadavg())}  # fmt: skip
    if args.check_reference:
        head["reference_vs_dense_m1e4"] = check_reference(names, 10_000, args.seeds)
    rows: list[dict[str, Any]] = []
    refs: dict[str, Any] = {}
    for m in [int(float(v)) for v in args.m.split(",")]:
        for fname in names:
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                fam = family(fname, m, seed)
                ref = reference(fam)
                refs[f"{fname}/m={m}/seed={seed}"] = {
                    k: (round(v, 3) if k == "seconds" else v) for k, v in ref.items() if k != "x"
                }
                if args.verbose:
                    print(json.dumps({"reference": f"{fname}/m={m}/seed={seed}", **refs[f"{fname}/m={m}/seed={seed}"]}),
                          file=sys.stderr, flush=True)  # fmt: skip
                for solver in solvers:
                    load = os.getloadavg()[0]
                    if solver in ("adszog", "dszog"):
                        out = run_zoframe(fam, solver, seed, args.cap)
                    else:
                        need = scipy_need_bytes(solver, m, fam.d)
                        if need > args.mem_gb * 2**30:
                            rows.append({"family": fname, "m": m, "seed": seed, "solver": solver, "status": "does not fit",
                                         "message": f"does not fit: needs {need / 2**30:.2f} GB for its dense m x d arrays "
                                         f"(the m x d Jacobian alone {8 * m * fam.d / 2**30:.2f} GB) > --mem-gb {args.mem_gb:g}"})  # fmt: skip
                            continue
                        out = run_scipy(fam, solver, args.cap)
                    x = np.asarray(out["x"], dtype=float)
                    fx = float(fam.f(x[None, :])[0])
                    row = {
                        "family": fname, "m": m, "seed": seed, "solver": solver,
                        "rel_error": abs(fx - ref["f_star"]) / max(1.0, abs(ref["f_star"])),
                        "violation": max(0.0, full_pass(fam, x)[0]), "seconds": round(out["seconds"], 3),
                        "peak_mb": round(out["peak_mb"], 1), "maxrss_mb": round(out["maxrss_mb"], 1), "load_average": round(load, 2),
                        "status": out["status"], "success": out["success"], "evals_full": out["evals"] / (1 + m),
                        "cpu_seconds": round(out.get("cpu_seconds", math.nan), 1), "message": out.get("message", ""),
                    }  # fmt: skip
                    rows.append(row)
                    if args.verbose:
                        print(json.dumps(row), file=sys.stderr, flush=True)
    summary: dict[str, Any] = {}
    for m in sorted({r["m"] for r in rows}):
        for fname in names:
            for solver in solvers:
                sel = [r for r in rows if r["m"] == m and r["family"] == fname and r["solver"] == solver]
                if not sel:
                    continue
                if sel[0]["status"] == "does not fit":
                    summary[f"{fname}/m={m}/{solver}"] = {"status": sel[0]["message"]}
                    continue
                ok = [r["rel_error"] <= 1e-6 and r["violation"] <= 1e-8 for r in sel]
                summary[f"{fname}/m={m}/{solver}"] = {
                    "median_rel_error": float(np.median([r["rel_error"] for r in sel])),
                    "median_violation": float(np.median([r["violation"] for r in sel])),
                    "median_seconds": float(np.median([r["seconds"] for r in sel])),
                    "median_cpu_seconds": float(np.median([r["cpu_seconds"] for r in sel])),
                    "max_peak_mb": float(max(r["peak_mb"] for r in sel)),
                    "max_maxrss_mb": float(max(r["maxrss_mb"] for r in sel)),
                    "load_average": [r["load_average"] for r in sel],
                    "within_1e-6": f"{sum(ok)}/{len(sel)}",
                    "false_success": sum(1 for r, k in zip(sel, ok, strict=True) if r["success"] and not k),
                    "statuses": sorted({r["status"] for r in sel}),
                }
    print(json.dumps({**head, "references": refs, "results": summary}))


if __name__ == "__main__":
    main()
