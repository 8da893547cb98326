"""Framework overhead: ZO-SGD through zoframe.minimize vs the same update as a bare numpy loop.

Problem: finite-sum least squares, d = 100, n = 1000 (``least-squares`` problem plugin). Both runs
make the same oracle calls with the same random numbers (the final iterates agree to rounding,
checked), single-threaded BLAS for both. Reported: median over ``--reps`` interleaved repetitions of the
wall time of each, and their ratio, for several mini-batch sizes.

The headline ``overhead_ratio`` compares the same work (batch 100, ``record_every=0``: the bare loop
records nothing either). ``overhead_ratio_with_trace`` keeps zoframe's default trace (21 records
of the 2000 iterations, on the grid 0, 1, 2, 3, 5, 7, 10, 15, ..., 1000, 1500, 2000, each a full
objective pass plus the problem's gradient-norm measure): that is measurement work the bare loop
does not do, reported so that its cost is visible (target: 1.05).

``loop_us_per_iteration`` is the run loop's own cost: a solver whose step does nothing, run for
20000 iterations without a trace (median over the repetitions, in microseconds per iteration).

``--compare PATH`` also times the ``minimize`` of another copy of the driver, side by side with the
current one (e.g. ``git show REV:zoframe/driver.py > /tmp/driver_rev.py``): its ratios appear as
``..._compare`` figures. Only ``driver.py`` is swapped: the run loop, the solver, the estimator and
the oracle are the current ones in both.

``--compare-tree DIR`` compares whole source trees instead (e.g. ``git archive REV | tar -x -C DIR``):
the benchmark runs ``--rounds`` times in fresh processes, alternately on ``DIR`` (``DIR`` and
``DIR/plugins`` first on ``sys.path``) and on this tree; each process reports its own ratios to the
bare loop (which both trees share), and the final JSON holds the medians over the rounds, this
tree's figures as usual and the other tree's with the suffix ``_tree``.

Prints its figures as one final line of JSON.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
import importlib.util
import json
import os
from pathlib import Path
import statistics
import subprocess
import sys
import time
from typing import Any, ClassVar

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


@dataclass(frozen=True)
class _Still:
    x: np.ndarray


@dataclass(frozen=True)
class NoStep:
    """A solver whose step does nothing: what is left is the run loop's own cost."""

    problem_kinds: ClassVar[frozenset[str]] = frozenset({"finite_sum"})

    def init(self, oracle: Any, x0: np.ndarray, rng: np.random.Generator) -> _Still:
        return _Still(x0)

    def step(self, oracle: Any, state: _Still, rng: np.random.Generator) -> _Still:
        return state


def load_driver(path: str) -> Any:
    """The ``minimize`` of a driver module stored at ``path``."""
    spec = importlib.util.spec_from_file_location("zoframe_driver_compared", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod.minimize


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


def compare_trees(other: str, rounds: int, iters: int, reps: int) -> None:
    """The benchmark in fresh processes, alternately on the tree ``other`` and on this one; medians."""
    here = Path(__file__).resolve().parents[1]
    runs: dict[str, list[dict[str, float]]] = {"tree": [], "here": []}
    for _ in range(rounds):
        for key, root in (("tree", Path(other).resolve()), ("here", here)):
            path = os.pathsep.join([str(root), str(root / "plugins"), os.environ.get("PYTHONPATH", "")])
            proc = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--iters", str(iters), "--reps", str(reps),
                 "--expect-root", str(root)],
                capture_output=True, text=True, env={**os.environ, "PYTHONPATH": path}, check=True,
            )
            runs[key].append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(f"{key}: {runs[key][-1]}", flush=True)
    figures: dict[str, float] = {}
    for key, suffix in (("here", ""), ("tree", "_tree")):
        for name in runs[key][0]:
            figures[name + suffix] = statistics.median(r[name] for r in runs[key])
    figures["rounds"] = rounds
    print(json.dumps(figures))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--compare", metavar="PATH", help="another driver.py whose minimize is timed side by side")
    ap.add_argument("--compare-tree", metavar="DIR", help="another source tree, run alternately in fresh processes")
    ap.add_argument("--rounds", type=int, default=3, help="processes per tree with --compare-tree (default 3)")
    ap.add_argument("--expect-root", help=argparse.SUPPRESS)  # set by --compare-tree: the tree zoframe must come from
    args = ap.parse_args()
    if args.expect_root:
        for mod in (zoframe, sys.modules[LeastSquares.__module__]):
            if not Path(str(mod.__file__)).resolve().is_relative_to(Path(args.expect_root).resolve()):
                raise SystemExit(f"{mod.__name__} was imported from {mod.__file__}, not from {args.expect_root}")
    if args.compare_tree:
        compare_trees(args.compare_tree, args.rounds, args.iters, args.reps)
        return
    other = load_driver(args.compare) if args.compare else None
    prob = LeastSquares(dim=100, n=1000, seed=0)
    eta, q, mu = 0.05, 10, 1e-3
    figures: dict[str, float] = {}
    with threadpool_limits(limits=1, user_api="blas"):
        tiny = zoframe.FiniteSum(lambda X: (X * X).sum(axis=1), x0=np.zeros(3))
        loops: dict[str, Callable[[], Any]] = {
            "loop": lambda: zoframe.minimize(tiny, NoStep(), rng=0, max_iter=20000, record_every=0)
        }
        if other is not None:
            loops["loop_compare"] = lambda: other(tiny, NoStep(), rng=0, max_iter=20000, record_every=0)
        names = {"loop": "loop_us_per_iteration", "loop_compare": "loop_us_per_iteration_compare"}
        for key, (t, _) in interleaved(loops, args.reps).items():
            figures[names[key]] = round(t / 20000 * 1e6, 3)
        for batch in (1000, 100, 10):
            kw: dict[str, Any] = {"steps": "paper", "eta": eta, "q": q, "mu": mu, "batch": None if batch >= prob.n else batch}
            fns: dict[str, Callable[[], Any]] = {
                "bare": partial(bare_zo_sgd, prob, args.iters, eta, q, mu, batch, 1),
                "zoframe": partial(zoframe.minimize, prob, "zo-sgd", rng=1, max_iter=args.iters, **kw),
                "no_trace": partial(zoframe.minimize, prob, "zo-sgd", rng=1, max_iter=args.iters, record_every=0, **kw),
            }
            if other is not None:
                fns["compare"] = partial(other, prob, "zo-sgd", rng=1, max_iter=args.iters, **kw)
                fns["compare_no_trace"] = partial(other, prob, "zo-sgd", rng=1, max_iter=args.iters, record_every=0, **kw)
            runs = interleaved(fns, args.reps)
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
            if other is not None:
                figures[f"batch{batch}_ratio_compare"] = round(runs["compare"][0] / t_bare, 3)
                figures[f"batch{batch}_ratio_no_trace_compare"] = round(runs["compare_no_trace"][0] / t_bare, 3)
            print(f"batch {batch:>4}: bare {t_bare:.3f}s  zoframe {t_zo:.3f}s (ratio {t_zo / t_bare:.3f}; "
                  f"no trace {t_nt / t_bare:.3f}), {calls} oracle calls", flush=True)
    figures["overhead_ratio"] = figures["batch100_ratio_no_trace"]
    figures["overhead_ratio_with_trace"] = figures["batch100_ratio"]
    figures["iters"] = args.iters
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
