"""Cases of DSZOG / ADSZOG with the papers' fixed steps, and a writer of their iterates (``paper_iterates.json``).

The iterates were stored to check that ``steps="paper"`` reproduced the code before the default step rule
changed; since the batch draws changed, seeded iterates differ from those of earlier versions, and the papers'
mode is checked on median outcomes over seeds (``tests/test_constrained_statistical.py``). The cases stay in
use (``tests/test_constrained_robust.py``). Writing the file is for a study on purpose only::

    python tests/data/make_paper_iterates.py [--paper-mode]
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
import sys
from typing import Any
import zlib

import numpy as np

import zoframe
from zoframe_constrained.problems import fairness

OUT = Path(__file__).with_name("paper_iterates.json")


def encode(a: np.ndarray) -> dict[str, Any]:
    """An exact, compact text form of a float64 array: shape + base64 of the zlib-compressed bytes."""
    arr = np.ascontiguousarray(a, dtype="<f8")
    return {"shape": list(arr.shape), "data": base64.b64encode(zlib.compress(arr.tobytes(), 9)).decode("ascii")}


def decode(rec: dict[str, Any]) -> np.ndarray:
    """The array :func:`encode` wrote, bit for bit."""
    raw = zlib.decompress(base64.b64decode(rec["data"]))
    return np.frombuffer(raw, dtype="<f8").reshape(rec["shape"]).copy()


def convex(seed: int = 0, d: int = 5, n: int = 60, m: int = 300) -> Any:
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, d)) / np.sqrt(d)
    b = A @ np.ones(d) + 0.1 * rng.standard_normal(n)
    D = rng.standard_normal((m, d))
    D /= np.linalg.norm(D, axis=1, keepdims=True)
    e = rng.uniform(0.5, 1.5, m)

    def obj(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return (X @ A[idx].T - b[idx]) ** 2

    def con(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return X @ D[idx].T - e[idx]

    return zoframe.Constrained(obj, con, m=m, x0=np.zeros(d), n=n, convex_constraints=True)


#: (name, problem factory, solver, parameters, iterations); every case records x after every step
CASES: list[tuple[str, Any, str, dict[str, Any], int]] = [
    ("dszog_dense", convex, "dszog", {"eta_w": 0.02, "eta_p": 0.01, "beta": 100.0, "M1": 32, "M2": 64, "M3": 64, "p_form": "dense", "lam": 1e-6}, 40),
    ("dszog_sparse", convex, "dszog", {"eta_w": 0.02, "eta_p": 0.01, "beta": 100.0, "M1": 32, "M2": 64, "M3": 64, "p_form": "sparse", "lam": 1e-6}, 40),
    ("adszog_dense", convex, "adszog", {"eta_w": 0.01, "eta_p": 0.01, "beta": 100.0, "a": 0.5, "b": 0.5, "M1": 32, "M2": 64, "M3": 64, "p_form": "dense"}, 40),
    ("adszog_sparse_restore", convex, "adszog", {"eta_w": 0.01, "eta_p": 0.01, "beta": 100.0, "a": 0.5, "b": 0.5, "M1": 32, "M2": 64, "M3": 64, "p_form": "sparse", "restore_after": 30}, 40),
    ("dszog_restore_every", convex, "dszog", {"eta_w": 0.02, "eta_p": 0.01, "beta": 100.0, "M1": 32, "M2": 64, "M3": 64, "restore_every": 10, "lam": 1e-6}, 30),
    ("adszog_fairness", lambda: fairness("D1", n_samples=200, seed=0), "adszog", {"M1": 100, "M2": 10, "M3": 10}, 25),
    ("dszog_fairness", lambda: fairness("D1", n_samples=200, seed=0), "dszog", {"M1": 100, "M2": 10, "M3": 10, "lam": 1e-6}, 25),
    ("dszog_fairness_default_lam", lambda: fairness("D1", n_samples=200, seed=0), "dszog", {"M1": 100, "M2": 10, "M3": 10}, 25),
]  # fmt: skip


def run(name: str, factory: Any, solver: str, params: dict[str, Any], iters: int, extra: dict[str, Any]) -> dict[str, np.ndarray]:
    xs: list[np.ndarray] = []
    res = zoframe.minimize(
        factory(), solver, rng=7, max_iter=iters, record_every=0,
        callback=lambda info: xs.append(np.array(info.x, copy=True)) and None, **params, **extra,
    )  # fmt: skip
    out = {f"{name}.x": np.array(xs), f"{name}.p": np.asarray(res.outputs["p"]), f"{name}.nfev": np.array(res.nfev)}
    if "x_feasible" in res.outputs:
        out[f"{name}.x_feasible"] = np.asarray(res.outputs["x_feasible"])
    return out


def main(argv: list[str]) -> int:
    extra = {"step": "paper"} if "--paper-mode" in argv else {}
    arrays: dict[str, np.ndarray] = {}
    for case in CASES:
        arrays.update(run(*case, extra))
    OUT.write_text(json.dumps({k: encode(v) for k, v in arrays.items()}, indent=0, sort_keys=True) + "\n")
    print(f"wrote {OUT} ({len(arrays)} arrays)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
