"""Fixed-seed Results of one solver of each family, as a bit-for-bit reference for the run loop.

Each case runs a registered problem whose functions stay bit-stable under any row partition of a
batch (element-wise formulas, or batches of a few rows) with every solver parameter that shapes
the run given explicitly. ``tests/test_core_golden.py`` runs the same cases through
``zoframe.minimize`` and through ask/tell and compares every field of the Result with the stored
one, bit for bit (wall-clock fields excepted).

Regenerate (only when a solver's algorithm changes on purpose, never to make a test pass)::

    python tests/data/golden/make_golden.py

It writes ``golden.json`` (scalars; floats as ``float.hex`` strings) and ``golden.npz`` (arrays)
beside this file.
"""

from __future__ import annotations

from collections.abc import Mapping
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent

#: name -> (problem name, problem arguments, solver name, minimize keyword arguments)
CASES: dict[str, tuple[str, dict[str, Any], str, dict[str, Any]]] = {
    "zo-sgd/quadratic": (
        "quadratic", {"dim": 6, "cond": 10.0, "seed": 1}, "zo-sgd",
        {"rng": 11, "max_iter": 40, "record_every": 5, "eta": 0.1, "q": 4, "mu": 1e-3},
    ),
    "zo-sgd/power-sum/budget": (
        "power-sum", {"dim": 4, "p": 4.0}, "zo-sgd",
        {"rng": 12, "max_iter": 1000, "max_calls": 203, "record_every": 3, "eta": 0.05, "q": 3, "mu": 1e-4},
    ),
    "dszog/kkt-qp": (
        "kkt-qp", {"dim": 4, "m": 6, "n": 5, "seed": 2}, "dszog",
        {"rng": 13, "max_iter": 30, "record_every": 4, "eta_w": 0.02, "eta_p": 0.05, "beta": 2.0, "lam": 1e-6,
         "q": 3, "mu": 1e-3, "M1": 2, "M2": 3, "M3": 3},
    ),
    "adszog/kkt-qp": (
        "kkt-qp", {"dim": 4, "m": 6, "n": 5, "seed": 2}, "adszog",
        {"rng": 14, "max_iter": 30, "record_every": 4, "eta_w": 0.02, "eta_p": 0.05, "beta": 2.0, "lam": 1e-6,
         "q": 3, "mu": 1e-3, "M1": 2, "M2": 3, "M3": 3},
    ),
    "zo-gda/saddle-quadratic": (
        "saddle-quadratic", {"dim": 3, "dim_y": 2, "n": 4, "seed": 3}, "zo-gda",
        {"rng": 15, "max_iter": 25, "record_every": 5, "eta1": 0.05, "eta2": 0.05, "q1": 4, "q2": 3,
         "mu1": 1e-4, "mu2": 1e-4, "check_concavity": False},
    ),
    "zo-sgda/saddle-quadratic": (
        "saddle-quadratic", {"dim": 3, "dim_y": 2, "n": 4, "seed": 3}, "zo-sgda",
        {"rng": 16, "max_iter": 25, "record_every": 5, "eta1": 0.05, "eta2": 0.05, "q1": 4, "q2": 3,
         "mu1": 1e-4, "mu2": 1e-4, "check_concavity": False},
    ),
    "zo-svrg-admm/lasso-composite": (
        "lasso-composite", {"dim": 4, "n": 8, "seed": 4}, "zo-svrg-admm",
        {"rng": 17, "max_iter": 20, "record_every": 4},
    ),
}

#: Result fields compared (``elapsed`` and the ``seconds`` trace column are wall-clock times)
SCALAR_FIELDS = ("fun", "nit", "nfev", "status", "success", "message", "fun_best", "solver", "seed",
                 "feasible", "max_violation", "feasibility_tol")


def run_case(name: str, **extra: Any) -> Any:
    """The Result of case ``name`` through ``zoframe.minimize`` (extra keyword arguments added)."""
    import zoframe

    prob_name, prob_args, solver, kwargs = CASES[name]
    problem = zoframe.default_registry().make_problem(prob_name, **prob_args)
    return zoframe.minimize(problem, solver, **{**kwargs, **extra})


def _enc(v: Any) -> Any:
    if hasattr(v, "name") and hasattr(v, "value"):  # Status
        return {"status": v.name}
    if isinstance(v, float):
        return {"float": v.hex()} if math.isfinite(v) or math.isinf(v) else {"float": "nan"}
    if isinstance(v, (bool, int, str)) or v is None:
        return v
    raise TypeError(f"cannot encode {v!r}")


def encode(res: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A Result as (JSON-able scalars, arrays): everything except wall-clock times."""
    doc: dict[str, Any] = {f: _enc(getattr(res, f)) for f in SCALAR_FIELDS}
    doc["nfev_by_kind"] = dict(res.nfev_by_kind)
    doc["nfev_by_purpose"] = dict(res.nfev_by_purpose)
    doc["measures"] = {k: _enc(float(v)) for k, v in res.measures.items()}
    doc["notes"] = list(res.notes)
    arrays = {"x": res.x, "x_best": res.x_best}
    arrays.update({f"outputs.{k}": np.asarray(v) for k, v in res.outputs.items()})
    arrays.update({f"trace.{k}": v for k, v in res.trace.columns.items() if k != "seconds"})
    return doc, arrays


def differences(res: Any, doc: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> list[str]:
    """Every field where ``res`` differs bit for bit from the stored ``(doc, arrays)``."""
    got_doc, got_arrays = encode(res)
    out = [f"{k}: stored {doc.get(k)!r}, got {v!r}" for k, v in got_doc.items() if doc.get(k) != v]
    out += [f"{k}: stored but missing" for k in doc if k not in got_doc]
    for k in sorted(set(arrays) | set(got_arrays)):
        a, b = arrays.get(k), got_arrays.get(k)
        if a is None or b is None:
            out.append(f"array {k}: {'missing' if b is None else 'not stored'}")
        elif a.shape != b.shape or a.dtype != b.dtype or a.tobytes() != b.tobytes():
            out.append(f"array {k}: stored {a!r}, got {b!r}")
    return out


def load() -> tuple[dict[str, Any], dict[str, dict[str, np.ndarray]]]:
    """The stored cases: ``(docs by case, arrays by case)``."""
    docs = json.loads((HERE / "golden.json").read_text(encoding="utf-8"))
    arrays: dict[str, dict[str, np.ndarray]] = {name: {} for name in docs}
    with np.load(HERE / "golden.npz", allow_pickle=False) as data:
        for key in data.files:
            case, _, field = key.partition("::")
            arrays[case][field] = data[key]
    return docs, arrays


def main() -> None:
    docs: dict[str, Any] = {}
    flat: dict[str, np.ndarray] = {}
    for name in CASES:
        doc, arrays = encode(run_case(name))
        docs[name] = doc
        flat.update({f"{name}::{k}": v for k, v in arrays.items()})
        print(f"{name}: status {doc['status']['status']}, nfev {doc['nfev']}, nit {doc['nit']}")
    (HERE / "golden.json").write_text(json.dumps(docs, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    np.savez(HERE / "golden.npz", **flat)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
