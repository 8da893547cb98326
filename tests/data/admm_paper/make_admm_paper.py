"""The iterates of the six composite solvers with the papers' fixed steps, as a reference for ``steps="paper"``.

Each case runs one solver of ``zoframe_admm`` for a fixed number of steps through ``init`` / ``step``
(no driver) with a fixed seed and records, after every step, every output (``x``, ``y0``, ...,
``lam``) and the oracle's count. ``tests/test_admm_paper_mode.py`` runs the same cases with
``steps="paper"`` and compares each recorded array within ``1e-12`` of its own scale.

The stored file was produced by the code before ``steps`` existed (the parameter is added only
when the solver has it, so this script runs on code before and after). Regenerate only when a
paper's iteration changes on purpose, never to make a test pass::

    python tests/data/admm_paper/make_admm_paper.py
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent

#: name -> (problem factory name, problem arguments, solver name, solver arguments, steps, seed)
CASES: dict[str, tuple[str, dict[str, Any], str, dict[str, Any], int, int]] = {
    "svrg/toy": ("toy", {}, "zo-svrg-admm", {"b": 4, "rank_check": "ignore"}, 60, 3),
    "svrg/toy-m3-mu": ("toy", {"seed": 1}, "zo-svrg-admm", {"b": 5, "m": 3, "mu": 1e-4, "eta": 0.3, "rho": 2.0,
                                                             "rank_check": "ignore"}, 40, 5),
    "saga/toy": ("toy", {}, "zo-saga-admm", {"b": 4, "rank_check": "ignore"}, 60, 3),
    "saga/toy-repeats": ("toy", {}, "zo-saga-admm", {"b": 40, "rank_check": "ignore"}, 30, 7),
    "admm/toy": ("toy", {}, "zo-admm", {"rank_check": "ignore"}, 30, 3),
    "sgd/toy": ("toy", {}, "zo-sgd-admm", {"b": 4, "rank_check": "ignore"}, 60, 3),
    "prox-svrg/toy": ("toy", {}, "zo-prox-svrg", {"b": 4, "eta": 0.1, "inner_iters": 10}, 60, 3),
    "prox-saga/toy": ("toy", {}, "zo-prox-saga", {"b": 4, "eta": 0.1, "inner_iters": 10}, 60, 3),
    "svrg/lasso": ("lasso", {}, "zo-svrg-admm", {"b": 4}, 50, 11),
    "saga/lasso": ("lasso", {}, "zo-saga-admm", {"b": 4, "r": 3.0, "r_y": 2.5}, 50, 11),
    "prox-svrg/lasso": ("lasso", {}, "zo-prox-svrg", {"b": 4, "eta": 0.2}, 50, 11),
    "prox-saga/lasso": ("lasso", {}, "zo-prox-saga", {"b": 4, "eta": 0.2, "mu": 1e-3}, 50, 11),
    "admm/correntropy": ("correntropy", {}, "zo-admm", {"eta": 0.2, "rho": 0.5}, 40, 2),
    "sgd/correntropy": ("correntropy", {}, "zo-sgd-admm", {"b": 3, "eta": 0.2, "rho": 0.5}, 40, 2),
    "svrg/growing": ("lasso", {"scale": 10.0}, "zo-svrg-admm", {"b": 4}, 12, 1),
}

#: parameters that select the papers' iterations on code where the solvers gained another default
PINNED: dict[str, Any] = {"steps": "paper"}


def make_problem(kind: str, **kw: Any) -> Any:
    """The problems of the cases: the fused-lasso toy, a one-block lasso, a nonconvex two-block user problem."""
    import zoframe
    from zoframe.penalties import L1
    from zoframe_admm.problems import FusedLassoToy

    if kind == "toy":
        return FusedLassoToy(**kw)
    rng = np.random.default_rng(42)
    if kind == "lasso":
        scale = float(kw.get("scale", 1.0))
        d, n = 6, 30
        X = scale * rng.standard_normal((n, d))
        t = X @ np.linspace(-1.0, 1.0, d) + 0.1 * rng.standard_normal(n)

        def ls(P: np.ndarray, idx: np.ndarray) -> np.ndarray:
            r = P @ X[idx].T - t[idx]
            return 0.5 * r * r

        return zoframe.Composite(ls, x0=np.zeros(d), A=np.eye(d), B=[-np.eye(d)], c=np.zeros(d),
                                 penalties=[L1(0.05)], n=n)
    if kind == "correntropy":
        d = 5
        X = rng.standard_normal((12, d))
        lab = np.sign(X @ rng.standard_normal(d))
        D = np.diff(np.eye(d), axis=0)

        def loss(P: np.ndarray, idx: np.ndarray) -> np.ndarray:
            r = lab[idx] - P @ X[idx].T
            return 0.5 * (1.0 - np.exp(-r * r))

        A = np.vstack([np.eye(d), D])
        B = [np.vstack([-np.eye(d), np.zeros((d - 1, d))]), np.vstack([np.zeros((d, d - 1)), -np.eye(d - 1)])]
        return zoframe.Composite(loss, x0=np.full(d, 0.1), A=A, B=B, c=np.zeros(2 * d - 1),
                                 penalties=[L1(0.01), L1(0.02)], n=12)
    raise ValueError(kind)


def iterates(name: str) -> dict[str, np.ndarray]:
    """Every output after every step of case ``name`` (stacked: ``(steps, ...)``), and the oracle's counts."""
    import warnings

    import zoframe
    from zoframe.oracle import CountingOracle

    kind, pkw, solver_name, skw, steps, seed = CASES[name]
    prob = make_problem(kind, **pkw)
    cls = zoframe.default_registry().solver(solver_name).cls
    fields = {f.name for f in dataclasses.fields(cls)}
    solver = cls(**skw, **{k: v for k, v in PINNED.items() if k in fields})
    oracle = CountingOracle(prob)
    rng = np.random.default_rng(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if hasattr(solver, "validate"):
            solver.validate(oracle)
        state = solver.init(oracle, prob.x0, rng)
    rows: dict[str, list[np.ndarray]] = {}
    calls = []
    for _ in range(steps):
        state = solver.step(oracle, state, rng)
        for k, v in solver.outputs(state).items():
            rows.setdefault(k, []).append(np.array(v, dtype=np.float64, copy=True))
        calls.append(oracle.calls)
    out = {k: np.stack(v) for k, v in rows.items()}
    out["calls"] = np.array(calls, dtype=np.int64)
    return out


def main() -> None:
    arrays = {}
    for name in CASES:
        for k, v in iterates(name).items():
            arrays[f"{name}::{k}"] = v
    np.savez_compressed(HERE / "admm_paper.npz", **arrays)
    print(f"wrote {len(arrays)} arrays for {len(CASES)} cases to {HERE / 'admm_paper.npz'}")


if __name__ == "__main__":
    main()
