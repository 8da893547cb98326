"""``steps="paper"`` keeps the papers' iterations exactly: every iterate of the stored reference, bit for bit.

The reference (``tests/data/minimax_paper/paper_iterates.json``) was produced by
``tests/data/minimax_paper/make_paper_iterates.py`` on the solvers as they were before the phases and the
automatic steps existed. Each case is re-run with ``steps="paper"``: every iterate ``x_s`` (through a
callback), ``F(x_s, y_s)`` at every iteration (the trace), the final ``y`` and the evaluation counts must
agree within 1e-12 of their array's scale (counts exactly). A case that now ends earlier, because the
run reports its divergence, is compared on the iterations it made, and must end DIVERGED.
"""

from __future__ import annotations

import json
from pathlib import Path
import sys
from typing import Any

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent / "data" / "minimax_paper"
sys.path.insert(0, str(HERE))
import make_paper_iterates as mpi  # noqa: E402

STORED = json.loads((HERE / "paper_iterates.json").read_text(encoding="utf-8"))


def _close(a: Any, b: Any) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return False
    scale = max(float(np.abs(a).max(initial=0.0)), 1e-300)
    return bool(np.all(np.abs(a - b) <= 1e-12 * scale))


@pytest.mark.parametrize("case", sorted(mpi.CASES))
def test_paper_steps_reproduce_the_stored_iterates(case: str) -> None:
    stored = STORED["cases"][case]
    got = mpi.run_case(case, {"steps": "paper"})
    k = len(got["x"])
    if got["status"] == "DIVERGED":  # the run now says so, and stops: compare what it did
        assert k < stored["nit"]
        assert _close(got["x"], stored["x"][:k])
        assert _close(got["fun"], stored["fun"][: k + 1])
        return
    assert got["status"] == stored["status"] and got["nit"] == stored["nit"]
    assert _close(got["x"], stored["x"]), case
    assert _close(got["fun"], stored["fun"]), case
    assert _close(got["y"], stored["y"]), case
    for key in ("nfev", "estimate", "gradient"):
        assert got[key] == stored[key], (case, key)


def test_the_diverging_case_ends_diverged_saying_where_and_when() -> None:
    import zoframe

    problem = mpi.problems()["coupled-100"]
    res = zoframe.minimize(problem, "zo-gda", rng=5, max_iter=80, steps="paper")
    assert res.status is zoframe.Status.DIVERGED and not res.success
    assert "diverged at iteration" in res.message and ("|x|_inf" in res.message or "|y|_inf" in res.message)
    assert res.nit < 20  # the stored run reached |x| = 8.6e12 with its differences underflowing


@pytest.mark.data("mushrooms")
def test_reproduce_minimax_quick_is_unchanged(tmp_path: Path) -> None:
    stored = STORED["reproduce_quick_mushrooms"]
    assert stored is not None, "the reference was generated without the mushrooms data set"
    got = mpi.reproduce_quick(tmp_path / "fig")
    assert got is not None
    for solver, c in stored["curves"]["mushrooms"].items():
        g = got["curves"]["mushrooms"][solver]
        assert set(g) == set(c)
        for key, v in c.items():
            assert _close(g[key], v), (solver, key)
    assert json.dumps(got["final"], sort_keys=True) == json.dumps(stored["final"], sort_keys=True) or all(
        _close(got["final"]["mushrooms"][s][k], v)
        for s, row in stored["final"]["mushrooms"].items() for k, v in row.items() if v is not None
    )
