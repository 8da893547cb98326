"""Fixed-seed Results of one solver of each family, as a bit-for-bit reference for the run loop.

Each case runs a registered problem whose functions stay bit-stable under any row partition of a
batch (element-wise formulas, or batches of a few rows) with every solver parameter that shapes
the run given explicitly. ``tests/test_core_golden.py`` runs the same cases through
``zoframe.minimize`` and through ask/tell and compares every field of the Result with the stored
one, bit for bit (wall-clock fields excepted).

Floating-point results depend on the machine: numpy's version, the BLAS library and the CPU
kernel it picked (a matrix product may sum in another order), the processor. The reference
therefore stores the *fingerprint* of the environment that produced it (:func:`fingerprint`). On
a machine with the same fingerprint every field must match bit for bit; elsewhere the integer,
string and status fields must still match exactly and every float must agree within
``RTOL = 1e-9`` relative to its own scale (an array's largest magnitude for each of its entries,
so a value close to zero that comes from cancellation is judged on the scale of its array), and
the test says which comparison it made.

Regenerate (only when a solver's algorithm changes on purpose or on a new reference machine,
never to make a test pass)::

    python tests/data/golden/make_golden.py

It writes ``golden.json`` (the fingerprint and the scalars; floats as ``float.hex`` strings) and
``golden.npz`` (arrays) beside this file.
"""

from __future__ import annotations

from collections.abc import Mapping
import json
import math
from pathlib import Path
import platform
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent

#: name -> (problem name, problem arguments, solver name, minimize keyword arguments)
CASES: dict[str, tuple[str, dict[str, Any], str, dict[str, Any]]] = {
    "zo-sgd/quadratic": (
        "quadratic", {"dim": 6, "cond": 10.0, "seed": 1}, "zo-sgd",
        {"rng": 11, "max_iter": 40, "record_every": 5, "eta": 0.1, "q": 4, "mu": 1e-3, "steps": "paper"},
    ),
    "zo-sgd/power-sum/budget": (
        "power-sum", {"dim": 4, "p": 4.0}, "zo-sgd",
        {"rng": 12, "max_iter": 1000, "max_calls": 203, "record_every": 3, "eta": 0.05, "q": 3, "mu": 1e-4,
         "steps": "paper"},
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

#: parameters that select the reference's algorithm where a solver later gained another default:
#: applied when the solver has the parameter (so that the cases run on code before and after it)
PINNED: dict[str, dict[str, Any]] = {
    "dszog": {"steps": "paper"},
    "adszog": {"steps": "paper"},
    "zo-svrg-admm": {"steps": "paper"},
    "zo-gda": {"steps": "paper"},
    "zo-sgda": {"steps": "paper"},
}

#: relative tolerance of floats when the environment differs from the reference's
RTOL = 1e-9

#: Result fields compared (``elapsed`` and the ``seconds`` trace column are wall-clock times)
SCALAR_FIELDS = ("fun", "nit", "nfev", "status", "success", "message", "fun_best", "solver", "seed",
                 "feasible", "max_violation", "feasibility_tol")


def fingerprint() -> dict[str, str]:
    """What decides the rounding of a run: numpy's version, its BLAS (library, version, CPU kernel),
    the processor architecture."""
    from threadpoolctl import threadpool_info

    blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    mine = [i for i in blas if "numpy" in str(i.get("filepath", ""))] or blas
    first = mine[0] if mine else {}
    return {
        "numpy": np.__version__,
        "blas": f"{first.get('internal_api', 'unknown')} {first.get('version', '')}".strip(),
        "blas_core": str(first.get("architecture", "unknown")),
        "machine": platform.machine(),
    }


def run_case(name: str, **extra: Any) -> Any:
    """The Result of case ``name`` through ``zoframe.minimize`` (extra keyword arguments added)."""
    import zoframe

    problem, solver, kwargs = case_arguments(name)
    return zoframe.minimize(problem, solver, **{**kwargs, **extra})


def case_arguments(name: str) -> tuple[Any, str, dict[str, Any]]:
    """``(problem, solver name, keyword arguments)`` of case ``name``, pinned parameters included."""
    import dataclasses

    import zoframe

    prob_name, prob_args, solver, kwargs = CASES[name]
    registry = zoframe.default_registry()
    fields = {f.name for f in dataclasses.fields(registry.solver(solver).cls)}
    pinned = {k: v for k, v in PINNED.get(solver, {}).items() if k in fields}
    return registry.make_problem(prob_name, **prob_args), solver, {**kwargs, **pinned}


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


def _dec(text: str) -> float:
    return math.nan if text == "nan" else float.fromhex(text)


def _close(stored: Any, got: Any, scale: float) -> bool:
    """Whether two encoded values agree within ``RTOL`` (floats) or exactly (anything else)."""
    if isinstance(stored, dict) and isinstance(got, dict) and set(stored) == {"float"} == set(got):
        a, b = _dec(stored["float"]), _dec(got["float"])
        if math.isnan(a) or math.isnan(b) or math.isinf(a) or math.isinf(b):
            return (math.isnan(a) and math.isnan(b)) or a == b
        return abs(a - b) <= RTOL * max(abs(a), scale)
    if isinstance(stored, dict) and isinstance(got, dict):
        return set(stored) == set(got) and all(_close(stored[k], got[k], scale) for k in stored)
    return bool(stored == got)


def _arrays_close(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind != "f":
        return bool(np.array_equal(a, b))
    same_nonfinite = np.array_equal(~np.isfinite(a), ~np.isfinite(b)) and np.array_equal(
        a[np.isinf(a)], b[np.isinf(b)]
    )
    fa, fb = a[np.isfinite(a)], b[np.isfinite(b)]
    if not same_nonfinite:
        return False
    if fa.size == 0:
        return True
    scale = float(np.max(np.abs(fa)))
    return bool(np.max(np.abs(fa - fb)) <= RTOL * scale)


def differences(
    res: Any, doc: Mapping[str, Any], arrays: Mapping[str, np.ndarray], *, exact: bool = True
) -> list[str]:
    """Every field where ``res`` differs from the stored ``(doc, arrays)``.

    ``exact=True``: bit for bit. ``exact=False``: integers, strings and statuses exactly, floats
    within ``RTOL`` of their scale (a scalar's own magnitude; each array entry against the
    array's largest magnitude).
    """
    got_doc, got_arrays = encode(res)
    if exact:
        out = [f"{k}: stored {doc.get(k)!r}, got {v!r}" for k, v in got_doc.items() if doc.get(k) != v]
    else:
        out = [f"{k}: stored {doc.get(k)!r}, got {v!r}" for k, v in got_doc.items() if not _close(doc.get(k), v, 0.0)]
    out += [f"{k}: stored but missing" for k in doc if k not in got_doc]
    for k in sorted(set(arrays) | set(got_arrays)):
        a, b = arrays.get(k), got_arrays.get(k)
        if a is None or b is None:
            out.append(f"array {k}: {'missing' if b is None else 'not stored'}")
        elif exact and (a.shape != b.shape or a.dtype != b.dtype or a.tobytes() != b.tobytes()):
            out.append(f"array {k}: stored {a!r}, got {b!r}")
        elif not exact and not _arrays_close(a, b):
            out.append(f"array {k}: stored {a!r}, got {b!r} (beyond rtol={RTOL} of the array's scale)")
    return out


def load() -> tuple[dict[str, str], dict[str, Any], dict[str, dict[str, np.ndarray]]]:
    """The stored reference: ``(fingerprint, docs by case, arrays by case)``."""
    stored = json.loads((HERE / "golden.json").read_text(encoding="utf-8"))
    docs = stored["cases"]
    arrays: dict[str, dict[str, np.ndarray]] = {name: {} for name in docs}
    with np.load(HERE / "golden.npz", allow_pickle=False) as data:
        for key in data.files:
            case, _, field = key.partition("::")
            arrays[case][field] = data[key]
    return dict(stored["fingerprint"]), docs, arrays


def main() -> None:
    docs: dict[str, Any] = {}
    flat: dict[str, np.ndarray] = {}
    for name in CASES:
        doc, arrays = encode(run_case(name))
        docs[name] = doc
        flat.update({f"{name}::{k}": v for k, v in arrays.items()})
        print(f"{name}: status {doc['status']['status']}, nfev {doc['nfev']}, nit {doc['nit']}")
    stored = {"fingerprint": fingerprint(), "cases": docs}
    (HERE / "golden.json").write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    np.savez(HERE / "golden.npz", **flat)  # type: ignore[arg-type]
    print(f"fingerprint: {stored['fingerprint']}")


if __name__ == "__main__":
    main()
