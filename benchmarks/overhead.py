"""Framework overhead: ZO-SGD through zoframe.minimize vs the same update as a bare numpy loop.

Problem: finite-sum least squares, d = 100, n = 1000 (``least-squares`` problem plugin). Both runs
make the same oracle calls with the same random numbers (the final iterates agree to rounding,
checked), single-threaded BLAS for both. Reported: median over 5 interleaved repetitions of the
wall time of each, and their ratio, for several mini-batch sizes.

The headline ``overhead_ratio`` compares the same work (batch 100, ``record_every=0``: the bare loop
records nothing either). ``overhead_ratio_with_trace`` keeps zoframe's default trace (about 100
records, each a full objective pass plus the problem's gradient-norm measure): that is measurement
work the bare loop does not do, reported so that its cost is visible.

Prints its figures as one final line of JSON.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
import json
import statistics
import time
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

import zoframe
from zoframe_basic.problems import LeastSquares


def bare_zo_sgd(prob: LeastSquares, iters: int, eta: float, q: int, mu: float, batch: int, seed: int) -> np.ndarray:
    """The ZO-SGD update as a tight numpy loop (same random stream as zoframe's zo-sgd)."""
    rng = np.random.default_rng(seed)
    A, b, n, d = prob.A, prob.b, prob.n, prob.dim
    x = np.zeros(d)
    full = batch >= n
    for _ in range(iters):
        idx = np.arange(n) if full else rng.choice(n, size=batch, replace=False)
        U = rng.standard_normal((q, d))
        pts = np.vstack([x[None, :], x[None, :] + mu * U])
        r = pts @ A[idx].T - b[idx]
        vals = r * r
        diffs = (vals[1:] - vals[:1]) / mu
        g = diffs.mean(axis=1) @ U / q
        x = x - eta * g
    return x


def interleaved(fns: dict[str, Callable[[], Any]], reps: int) -> dict[str, tuple[float, Any]]:
    """Median wall time of each function over ``reps`` rounds, the functions alternating within a round
    (so that a change in machine load affects all of them alike)."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    outs: dict[str, Any] = {}
    for _ in range(reps):
        for key, fn in fns.items():
            t0 = time.perf_counter()
            outs[key] = fn()
            times[key].append(time.perf_counter() - t0)
    return {k: (statistics.median(v), outs[k]) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    prob = LeastSquares(dim=100, n=1000, seed=0)
    eta, q, mu = 0.05, 10, 1e-3
    figures: dict[str, float] = {}
    with threadpool_limits(limits=1, user_api="blas"):
        for batch in (1000, 100, 10):
            kw = {"eta": eta, "q": q, "mu": mu, "batch": None if batch >= prob.n else batch}
            runs = interleaved(
                {
                    "bare": lambda b=batch: bare_zo_sgd(prob, args.iters, eta, q, mu, b, 1),
                    "zoframe": lambda k=kw: zoframe.minimize(prob, "zo-sgd", rng=1, max_iter=args.iters, **k),
                    "no_trace": lambda k=kw: zoframe.minimize(
                        prob, "zo-sgd", rng=1, max_iter=args.iters, record_every=0, **k
                    ),
                },
                args.reps,
            )
            (t_bare, x_bare), (t_zo, res), (t_nt, res_nt) = runs["bare"], runs["zoframe"], runs["no_trace"]
            for r in (res, res_nt):
                if not np.allclose(r.x, x_bare, rtol=1e-9, atol=1e-12):
                    raise SystemExit("zoframe and the bare loop did not compute the same iterates")
            calls = res.nfev
            if calls != args.iters * (q + 1) * batch:
                raise SystemExit(f"unexpected oracle count {calls}")
            figures[f"batch{batch}_bare_s"] = round(t_bare, 4)
            figures[f"batch{batch}_zoframe_s"] = round(t_zo, 4)
            figures[f"batch{batch}_ratio"] = round(t_zo / t_bare, 3)
            figures[f"batch{batch}_ratio_no_trace"] = round(t_nt / t_bare, 3)
            print(f"batch {batch:>4}: bare {t_bare:.3f}s  zoframe {t_zo:.3f}s (ratio {t_zo / t_bare:.3f}; "
                  f"no trace {t_nt / t_bare:.3f}), {calls} oracle calls", flush=True)
    figures["overhead_ratio"] = figures["batch100_ratio_no_trace"]
    figures["overhead_ratio_with_trace"] = figures["batch100_ratio"]
    figures["iters"] = args.iters
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
