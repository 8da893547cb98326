"""Evaluations the smooth and composite peers need on small problems with known solutions.

The problems of ``tests/test_peers_smooth.py`` and ``tests/test_peers_composite.py``, each for five
data seeds (the peers draw nothing random; the seed changes the problem's data):

* ``least-squares``: ``(1/n) sum_i (a_i^T x - b_i)^2``, ``d = 5``, ``n = 30``, Gaussian data; solution by
  ``numpy.linalg.lstsq`` (``lbfgsb-fd``, ``pybobyqa``);
* ``box-quadratic``: ``sum_i w_i (x_i - c_i)^2`` over ``[-1, 1]^4``, two bounds active at ``clip(c)``
  (``c`` drawn per seed);
* ``double-well``: the NC-SC minimax ``sum (x_i^2 - 1)^2 / 4 + y^T (k x) - (mu / 2)|y|^2`` (``d = d_y = 3``),
  ``x*_i = sqrt(1 - k_i^2 / mu)`` (``k`` drawn per seed; ``nested-lbfgsb-fd``);
* ``simplex-location``: ``sum_j y_j |x - c_j|^2 - (mu / 2)|y|^2``, ``y`` in the simplex (``d = 2``, four
  centres drawn per seed), reference by BFGS on ``Phi`` in closed form (``nested-lbfgsb-fd``);
* ``lasso``: the orthogonal-design lasso ``(1/n)|A x - b|^2 + w |x|_1`` (``A^T A = n I``, ``n = 24``,
  ``d = 5``, ``w = 0.5``) in the ADMM form ``x - y = 0``, solution ``soft(A^T b / n, w / 2)``
  (``prox-fd``, ``dfols`` with residuals).

``dfols`` runs twice on the lasso: with its defaults and with ``step_tol=0.1`` (DFO-LS's own accuracy
of the regularised steps). Each run has ``max_calls`` of 2000 points. Per (peer, problem): the median
evaluations (``nfev``) and peer points, the certified successes, the largest distance to the solution
over the seeds and the median time. The last line of the output is the JSON of all of it.

    python benchmarks/peer_problems.py [--seeds 5]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
import json
import platform
import time
from typing import Any

import numpy as np
import scipy
from scipy.optimize import minimize as scipy_minimize

import zoframe
from zoframe.penalties import L1
from zoframe.sets import Simplex, project_simplex


def least_squares(seed: int) -> tuple[Any, np.ndarray, int]:
    rng = np.random.default_rng(seed)
    n, d = 30, 5
    a = rng.standard_normal((n, d))
    b = a @ np.linspace(-1.0, 2.0, d) + 0.3 * rng.standard_normal(n)
    prob = zoframe.FiniteSum(lambda X, idx: (X @ a[idx].T - b[idx]) ** 2, n=n, x0=np.zeros(d))
    return prob, np.linalg.lstsq(a, b, rcond=None)[0], n


def box_quadratic(seed: int) -> tuple[Any, np.ndarray, int]:
    rng = np.random.default_rng(seed)
    c = np.array([2.0, -0.5, 0.3, -1.7]) + 0.2 * rng.standard_normal(4)
    w = np.array([1.0, 2.0, 3.0, 4.0])
    prob = zoframe.FiniteSum(lambda X: (w * (X - c) ** 2).sum(axis=1), x0=np.zeros(4), bounds=(-1.0, 1.0))
    return prob, np.clip(c, -1.0, 1.0), 1


def double_well(seed: int) -> tuple[Any, np.ndarray, int]:
    rng = np.random.default_rng(seed)
    k, mu = rng.uniform(0.2, 1.0, 3), 2.0

    def F(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        return np.asarray(((X * X - 1.0) ** 2 / 4.0).sum(axis=1) + (Y * (k * X)).sum(axis=1) - 0.5 * mu * (Y * Y).sum(axis=1))

    return zoframe.Minimax(F, x0=np.full(3, 0.5), y0=np.zeros(3)), np.sqrt(1.0 - k**2 / mu), 1


def simplex_location(seed: int) -> tuple[Any, np.ndarray, int]:
    rng = np.random.default_rng(seed)
    C, mu = rng.uniform(0.0, 2.0, (4, 2)), 0.5

    def F(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        q = ((X[:, None, :] - C[None]) ** 2).sum(axis=2)
        return np.asarray((Y * q).sum(axis=1) - 0.5 * mu * (Y * Y).sum(axis=1))

    def phi(x: np.ndarray) -> tuple[float, np.ndarray]:
        q = ((x - C) ** 2).sum(axis=1)
        y = project_simplex(q / mu)
        return float(y @ q - 0.5 * mu * y @ y), (2.0 * y[:, None] * (x - C)).sum(axis=0)

    x0 = np.array([0.3, 0.2])
    ref = scipy_minimize(phi, x0, jac=True, method="BFGS", options={"gtol": 1e-12})
    return zoframe.Minimax(F, x0=x0, y0=np.full(4, 0.25), y_set=Simplex(4)), ref.x, 1


def lasso(seed: int) -> tuple[Any, np.ndarray, int]:
    rng = np.random.default_rng(seed)
    n, d, w = 24, 5, 0.5
    Q, _ = np.linalg.qr(rng.standard_normal((n, d)))
    A = np.sqrt(n) * Q
    b = A @ np.array([1.0, -0.8, 0.0, 0.05, 0.6]) + 0.05 * rng.standard_normal(n)
    c = A.T @ b / n
    eye = np.eye(d)
    prob = zoframe.Composite(lambda X, idx: (X @ A[idx].T - b[idx]) ** 2, x0=np.zeros(d), A=eye, B=[-eye],
                             c=np.zeros(d), penalties=[L1(w)], n=n, residuals=lambda X, idx: X @ A[idx].T - b[idx])
    return prob, np.sign(c) * np.maximum(np.abs(c) - w / 2, 0.0), n


CASES: list[tuple[str, str, Callable[[int], tuple[Any, np.ndarray, int]], dict[str, Any]]] = [
    ("lbfgsb-fd", "least-squares", least_squares, {}),
    ("pybobyqa", "least-squares", least_squares, {}),
    ("lbfgsb-fd", "box-quadratic", box_quadratic, {}),
    ("pybobyqa", "box-quadratic", box_quadratic, {}),
    ("nested-lbfgsb-fd", "double-well", double_well, {}),
    ("nested-lbfgsb-fd", "simplex-location", simplex_location, {}),
    ("prox-fd", "lasso", lasso, {}),
    ("dfols", "lasso", lasso, {}),
    ("dfols", "lasso", lasso, {"step_tol": 0.1}),  # DFO-LS's own accuracy of the regularised steps
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args()
    rows = []
    for solver, name, make, params in CASES:
        nfev, points, errors, ok, secs = [], [], [], 0, []
        for seed in range(args.seeds):
            prob, xstar, n = make(seed)
            t0 = time.perf_counter()
            res = zoframe.minimize(prob, solver, rng=0, max_calls=2000 * n, **params)
            secs.append(time.perf_counter() - t0)
            nfev.append(res.nfev)
            points.append(res.nfev_by_purpose.get("peer", 0) // n)
            errors.append(float(np.abs(res.x - xstar).max()))
            ok += bool(res.success)
        row = {"solver": solver, "params": params, "problem": name, "median_nfev": float(np.median(nfev)),
               "median_points": float(np.median(points)), "successes": ok, "runs": args.seeds,
               "max_error": max(errors), "median_seconds": float(np.median(secs))}
        rows.append(row)
        label = solver + "".join(f" {k}={v}" for k, v in params.items())
        print(f"{label:30s} {name:17s} nfev {row['median_nfev']:7.0f}  points {row['median_points']:5.0f}  "
              f"success {ok}/{args.seeds}  max |x - x*| {row['max_error']:.1e}  {row['median_seconds']:.2f} s")
    print(json.dumps({"numpy": np.__version__, "scipy": scipy.__version__, "python": platform.python_version(),
                      "machine": platform.machine(), "cases": rows}))


if __name__ == "__main__":
    main()
