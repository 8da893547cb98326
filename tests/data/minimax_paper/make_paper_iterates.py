"""Iterates of the minimax solvers under the papers' steps, stored as the reference of ``steps="paper"``.

``tests/test_minimax_paper_mode.py`` runs every case below with ``steps="paper"`` and compares each
iterate ``x_s`` (every iteration, through a callback), ``F(x_s, y_s)`` (the trace, every iteration),
the final ``y`` and the evaluation counts with the stored ones (floats within 1e-12 of their array's
scale, counts exactly). A case whose paper-mode run now ends earlier (a divergence the solver
reports) is compared on the iterations it made.

Regenerate only when the papers' iteration itself changes on purpose::

    python tests/data/minimax_paper/make_paper_iterates.py

The reproduction's quick configuration (``zoframe reproduce minimax --quick --datasets mushrooms``)
is stored too when the ``mushrooms`` data set is found (``ZOFRAME_DATA``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent


def _coupled(scale: float) -> Any:
    """``s (sum_i log(1 + x_i^2) + y^T A x - 2 y^T y)``, d_x = 10, d_y = 5, x0 = 2: NC-SC, stationary at x = 0."""
    import zoframe

    A = np.random.default_rng(7).standard_normal((5, 10))

    def fun(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        return scale * (np.log1p(X * X).sum(axis=1) + np.einsum("kj,kj->k", Y, X @ A.T) - 2.0 * (Y * Y).sum(axis=1))

    return zoframe.Minimax(fun, x0=np.full(10, 2.0), y0=np.zeros(5), name=f"coupled-{scale:g}")


def _dro_small() -> Any:
    from zoframe_minimax.problems import DRO

    rng = np.random.default_rng(5)
    S = rng.standard_normal((30, 8))
    z = np.where(rng.random(30) < 0.25, 1.0, -1.0)
    return DRO(S, z)


def problems() -> dict[str, Any]:
    from zoframe_minimax.problems import NCSC

    return {
        "ncsc": NCSC(d1=6, d2=3, kappa=5, seed=1),
        "ncsc-box": NCSC(d1=6, d2=3, kappa=5, y_set_name="box", seed=1),
        "ncsc-ball": NCSC(d1=6, d2=3, kappa=5, y_set_name="ball", seed=1),
        "ncsc-sum": NCSC(d1=6, d2=3, kappa=5, n=8, noise=0.1, seed=2),
        "ncsc-sum-simplex": NCSC(d1=6, d2=3, kappa=5, n=8, noise=0.1, y_set_name="simplex", seed=2),
        "dro-small": _dro_small(),
        "coupled-100": _coupled(100.0),
    }


#: name -> (problem, solver, rng, max_iter, solver parameters)
CASES: dict[str, tuple[str, str, int, int, dict[str, Any]]] = {
    "zo-gda/defaults": ("ncsc", "zo-gda", 1, 40, {}),
    "zo-gda/steps": ("ncsc-box", "zo-gda", 2, 40, {"eta1": 0.1, "eta2": 0.5}),
    "zo-gda/radii": ("ncsc", "zo-gda", 3, 25, {"eta1": 0.05, "eta2": 0.3, "q1": 5, "q2": 4, "mu1": 1e-4, "mu2": 2e-4}),
    "zo-gda/sphere": ("ncsc", "zo-gda", 4, 25, {"eta1": 0.05, "eta2": 0.3, "estimator": "sphere"}),
    "zo-gda/diverging": ("coupled-100", "zo-gda", 5, 80, {}),
    "zo-gdmsa/defaults": ("ncsc", "zo-gdmsa", 6, 10, {}),
    "zo-gdmsa/steps": ("ncsc-ball", "zo-gdmsa", 7, 20, {"eta1": 0.2, "eta2": 0.5, "T": 3}),
    "zo-sgda/batch": ("ncsc-sum", "zo-sgda", 8, 30, {"eta1": 0.1, "eta2": 0.5, "batch1": 4, "batch2": 4}),
    "zo-sgda/dro": ("dro-small", "zo-sgda", 9, 10, {"check_concavity": False}),
    "zo-sgdmsa/simplex": ("ncsc-sum-simplex", "zo-sgdmsa", 10, 15,
                          {"eta1": 0.2, "eta2": 0.5, "T": 3, "batch1": 4, "batch2": 4}),
    "zo-sgdmsa/dro": ("dro-small", "zo-sgdmsa", 11, 5, {"check_concavity": False}),
    "sgda/batch": ("ncsc-sum", "sgda", 12, 30, {"eta1": 0.1, "eta2": 0.5, "batch1": 4, "batch2": 4}),
    "sgda/dro": ("dro-small", "sgda", 13, 10, {}),
    "sgdmsa/batch": ("ncsc-sum-simplex", "sgdmsa", 14, 15, {"eta1": 0.2, "eta2": 0.5, "T": 3, "batch1": 4, "batch2": 4}),
}


def run_case(name: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The case's iterates: ``x`` at every iteration, ``F(x_s, y_s)`` at every iteration, the final ``y`` and counts."""
    import zoframe

    prob_name, solver, seed, iters, params = CASES[name]
    problem = problems()[prob_name]
    xs: list[list[float]] = []

    def cb(info: Any) -> bool:
        xs.append([float(v) for v in info.x])
        return False

    res = zoframe.minimize(problem, solver, rng=seed, max_iter=iters, record_every=1, callback=cb,
                           **{**params, **(extra or {})})
    return {
        "x": xs,
        "fun": [float(v) for v in res.trace["fun"]],
        "y": [float(v) for v in res.outputs["y"]],
        "nit": int(res.nit),
        "nfev": int(res.nfev),
        "estimate": int(res.nfev_by_purpose.get("estimate", 0)),
        "gradient": int(res.nfev_by_purpose.get("gradient", 0)),
        "status": res.status.name,
    }


def reproduce_quick(out: Path) -> dict[str, Any] | None:
    """The quick reproduction's summary and mean curves on mushrooms, or None without the data set."""
    from zoframe.cli import main

    try:
        from zoframe_datasets import load_libsvm

        load_libsvm("mushrooms")
    except Exception:
        return None
    code = main(["reproduce", "minimax", "--quick", "--datasets", "mushrooms", "--out", str(out), "--no-progress",
                 "--no-plots"])
    if code != 0:
        raise RuntimeError(f"the reproduction failed with exit status {code}")
    doc = json.loads((out / "curves.json").read_text())
    return {"curves": doc["curves"], "final": json.loads((out / "summary.json").read_text())["final"]}


def main() -> None:
    import tempfile

    cases = {name: run_case(name) for name in CASES}
    for name, c in cases.items():
        print(f"{name}: {c['nit']} iterations, {c['nfev']} evaluations, {c['status']}")
    with tempfile.TemporaryDirectory() as tmp:
        repro = reproduce_quick(Path(tmp) / "fig")
    doc = {"cases": cases, "reproduce_quick_mushrooms": repro}
    (HERE / "paper_iterates.json").write_text(json.dumps(doc) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
