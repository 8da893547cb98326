"""steps="paper": the composite solvers' iterations are the papers' boxes, bit for bit as before steps existed.

``tests/data/admm_paper/admm_paper.npz`` holds every output after every step of 15 cases (the six
solvers on the fused-lasso toy, a one-block lasso and a nonconvex two-block user problem; fixed and
decaying ``mu``, given ``r``, ``m``, repeated batch indices, a run that grows), recorded by the code
before ``steps`` existed (``make_admm_paper.py`` beside it). A run that runs away ends DIVERGED in
this mode too, saying where and when.
"""

from __future__ import annotations

from pathlib import Path
import sys

import numpy as np
import pytest

import zoframe

HERE = Path(__file__).resolve().parent / "data" / "admm_paper"
sys.path.insert(0, str(HERE))
import make_admm_paper as ref  # noqa: E402

#: steps compared in the case that grows: its sixth step goes beyond 1e8 (the divergence test's bound)
GROWING_STEPS = 5


@pytest.fixture(scope="module")
def stored() -> dict[str, np.ndarray]:
    with np.load(HERE / "admm_paper.npz", allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


@pytest.mark.parametrize("case", sorted(ref.CASES))
def test_paper_iterates_are_unchanged(case: str, stored: dict[str, np.ndarray]) -> None:
    got = ref.iterates(case)
    keys = {k.partition("::")[2] for k in stored if k.startswith(case + "::")}
    assert keys == set(got), f"outputs differ: stored {sorted(keys)}, got {sorted(got)}"
    steps = GROWING_STEPS if case == "svrg/growing" else len(got["calls"])
    for k in sorted(keys):
        want, have = stored[f"{case}::{k}"][:steps], got[k][:steps]
        assert want.shape == have.shape
        if k == "calls":
            np.testing.assert_array_equal(have, want)
            continue
        scale = max(float(np.abs(want).max()), 1e-300)
        assert float(np.abs(have - want).max()) <= 1e-12 * scale, f"{case}: {k} moved"


def test_paper_reference_was_not_regenerated_by_the_new_code() -> None:
    """The generator pins steps='paper' only where the parameter exists: the stored file predates it."""
    assert ref.PINNED == {"steps": "paper"}


def _scaled_lasso(scale: float) -> zoframe.Composite:
    from zoframe.penalties import L1

    rng = np.random.default_rng(3)
    X = rng.standard_normal((40, 6))
    t = X @ np.linspace(-1.0, 1.0, 6) + 0.1 * rng.standard_normal(40)
    Xs = scale * X

    def ls(P: np.ndarray, idx: np.ndarray) -> np.ndarray:
        r = P @ Xs[idx].T - t[idx]
        return 0.5 * r * r

    return zoframe.Composite(ls, x0=np.zeros(6), A=np.eye(6), B=[-np.eye(6)], c=np.zeros(6),
                             penalties=[L1(0.05 * scale)], n=40)


@pytest.mark.parametrize("solver", ["zo-svrg-admm", "zo-saga-admm", "zo-admm", "zo-sgd-admm", "zo-prox-svrg",
                                    "zo-prox-saga"])
def test_paper_steps_in_other_units_end_diverged_saying_where_and_when(solver: str) -> None:
    """Features x 100: the papers' fixed steps blow up; the run says so (never BUDGET), with the size and the step."""
    kw = {} if "prox" in solver else {"rank_check": "ignore"}
    res = zoframe.minimize(_scaled_lasso(100.0), solver, rng=0, steps="paper", max_calls=400_000, b=4, **kw)
    assert res.status is zoframe.Status.DIVERGED and not res.success
    assert "diverged at iteration" in res.message and "paper's iteration" in res.message
    assert "exceeds" in res.message or "not finite" in res.message
    assert res.nfev < 400_000  # stopped by the test, not by the budget


def test_paper_mode_has_one_phase_and_no_phase_column() -> None:
    res = zoframe.minimize(_scaled_lasso(1.0), "zo-svrg-admm", rng=0, steps="paper", max_iter=30, b=4)
    assert res.status is zoframe.Status.MAX_ITER
    assert "phase" not in res.trace.names and not res.notes
