"""Badly scaled finite sums: zo-sgd with its defaults on least squares, l2-regularised logistic regression and a
Huber loss whose feature columns have sizes 1e-3 to 1e4 (``10^U(-3, 4)``), correlated (``Z L`` with ``L = I + 0.5
N(0, 1)``), some with offsets (positive raw features), an intercept; n = 400, d = 21; starts ``x0 = 0`` and ``x0 =
1e-3 N(0, I)``. A training family for the refinement (:mod:`zoframe.refine`); the held-out problems of
``finite_sum_suite.py`` are not in it.

The reference ``f*``: scipy L-BFGS-B with exact gradients, also in the variables scaled by the exact Hessian diagonal
at 0 (three restarts), the lowest. "Within 1e-6": ``f - f* <= 1e-6 (f(x0) - f*)``; a false claim: ``success=True``
where the certificate's measure with exact derivatives exceeds its tolerance (``finite_sum_suite.exact_residual``).

Run: ``python benchmarks/illcond_sums.py [KINDS] [SEEDS]`` (default ``logistic,ls,huber 1,2,3``); one line per run on
stderr, ONE final line of JSON on stdout.
"""

import json
from pathlib import Path
import sys
import time

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import finite_sum_suite as S


def gen(kind, seed, n=400, d=20):
    rng = np.random.default_rng(seed)
    # correlated latent features, columns scaled by factors spanning 1e-3..1e4, some with offsets (positive raw features)
    L = rng.standard_normal((d, d)) * 0.5 + np.eye(d)
    Z = rng.standard_normal((n, d)) @ L
    scales = 10.0 ** rng.uniform(-3, 4, d)
    offs = rng.uniform(0, 3, d) * (rng.random(d) < 0.6)
    X = (Z + offs) * scales
    A = np.hstack([X, np.ones((n, 1))])
    w = rng.standard_normal(d + 1) / np.r_[scales, 1.0]
    t = A @ w
    if kind == "logistic":
        y = np.where(t - np.median(t) + 0.5 * rng.standard_normal(n) > 0, 1.0, -1.0)
        b = S._logistic_base(f"illcond-logistic-{seed}", "illcond logistic", A, y, 1e-3, [])
    elif kind == "ls":
        yt = t + 0.1 * rng.standard_normal(n)
        def c(Xp, idx):
            r = Xp @ A[idx].T - yt[idx]
            return 0.5 * r * r
        A2 = (A * A).mean(axis=0)
        b = S.Base(f"illcond-ls-{seed}", "illcond ls", n, d + 1, c, lambda x: A.T @ (A @ x - yt) / n, [],
                   lambda x: (A @ x - yt)[:, None] * A, lambda x: A2)
    elif kind == "huber":
        yt = t + 0.3 * rng.standard_t(2, n)
        delta = 1.0
        def hub(r):
            a = np.abs(r)
            return np.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta))
        def c(Xp, idx):
            return hub(Xp @ A[idx].T - yt[idx]) + 0.5e-3 * (Xp * Xp).sum(axis=1)[:, None]
        def psi(r):
            return np.clip(r, -delta, delta)
        def g(x):
            return A.T @ psi(A @ x - yt) / n + 1e-3 * x
        def cg(x):
            return psi(A @ x - yt)[:, None] * A + 1e-3 * x[None, :]
        def h(x):
            return ((np.abs(A @ x - yt) <= delta) @ (A * A)) / n + 1e-3
        b = S.Base(f"illcond-huber-{seed}", "illcond huber", n, d + 1, c, g, [], cg, h)
    dd = d + 1
    b.x0s = [np.zeros(dd), 1e-3 * np.random.default_rng(seed + 100).standard_normal(dd)]
    return b


def ref(b, F, G, x0):
    from scipy.optimize import minimize
    D = 1.0 / np.sqrt(b.hdiag(np.zeros(b.d)))
    best = S.reference(F, G, x0, None, b.d, None)
    z = x0 / D
    for _ in range(3):
        r = minimize(lambda z: F(z * D), z, jac=lambda z: G(z * D) * D, method="L-BFGS-B",
                     options={"gtol": 1e-14, "ftol": 1e-16, "maxiter": 20000, "maxfun": 50000})
        z = r.x
        best = min(best, float(r.fun))
    return best


def run(kinds, seeds, solvers=("zo-sgd",), zseeds=(0,), verbose=True):
    rows = []
    for kind in kinds:
        for ps in seeds:
            b = gen(kind, ps)
            comps, F, G, bounds, exact = S.scaled(b, 1.0, 1.0)
            for k, x0 in enumerate(b.x0s):
                fstar = ref(b, F, G, x0)
                gap = max(F(x0) - fstar, 1e-300)
                target = fstar + 1e-6 * gap
                budget = max(200_000, S.CAP * (b.d + 1) * b.n)
                for solver in solvers:
                    for zs in zseeds:
                        t0 = time.time()
                        r = S.zo_run(solver, comps, F, x0, bounds, b.n, zs, target, budget)
                        kkt = exact(r.pop("x"))
                        row = dict(kind=kind, ps=ps, start=k, solver=solver, seed=zs, tau=(r["f"] - fstar) / gap,
                                   status=r["status"], success=r["success"], false=r["success"] and not kkt <= 1e-3,
                                   kkt=kkt, nfev=r["nfev"], msg=r["message"][:300], secs=round(time.time()-t0,1))
                        rows.append(row)
                        if verbose:
                            print(f"{kind:8s} ps={ps} st={k} {solver} tau={row['tau']:.2e} {row['status']} succ={row['success']} kkt={kkt:.1e} nfev={row['nfev']} {row['secs']}s | {row['msg'][:250]}", file=sys.stderr, flush=True)
    ok = sum(r["tau"] <= 1e-6 for r in rows)
    print(json.dumps(dict(runs=len(rows), within=ok, certified=sum(r["success"] for r in rows),
        solved_not_cert=sum(r["tau"] <= 1e-6 and not r["success"] for r in rows), false=sum(r["false"] for r in rows))))
    return rows


if __name__ == "__main__":
    kinds = sys.argv[1].split(",") if len(sys.argv) > 1 else ["logistic", "ls", "huber"]
    seeds = [int(s) for s in sys.argv[2].split(",")] if len(sys.argv) > 2 else [1, 2, 3]
    run(kinds, seeds)
