"""The restoration round over huge m: R1 as a blocked pass with memory bounded whatever m is."""

from __future__ import annotations

import tracemalloc
from typing import Any

import numpy as np
import pytest

import zoframe
from zoframe import CountingOracle
from zoframe_constrained import solvers as S
from zoframe_constrained.problems import pairwise


def _halfspaces(seed: int = 1, d: int = 20, m: int = 20_000) -> tuple[Any, np.ndarray, np.ndarray]:
    """Random halfspaces around a feasible point, hundreds violated at x0 (as in the solver tests)."""
    rng = np.random.default_rng(seed)
    D = rng.standard_normal((m, d))
    D /= np.linalg.norm(D, axis=1, keepdims=True)
    x_in = rng.standard_normal(d)
    e = D @ x_in + rng.uniform(0.0, 3.0, m)
    x0 = x_in + 0.3 * rng.standard_normal(d) / np.sqrt(d)

    def con(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        out: np.ndarray = X @ D[idx].T - e[idx]
        return out

    prob = zoframe.Constrained(lambda X: ((X - x0) ** 2).sum(1), con, m=m, x0=x0, convex_constraints=True)
    return prob, D, e


@pytest.mark.parametrize("name", ["dszog", "adszog"])
def test_blocked_rounds_restore_feasibility_like_the_one_call_rounds(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """With the blocked R1 forced on (threshold 0), restoration ends feasible over all m within as
    few rounds, charging one full pass of m per round plus the previous active set."""
    prob, D, e = _halfspaces()
    kw: dict[str, Any] = {"rng": 0, "max_iter": 50, "M1": 1, "M2": 4, "M3": 4, "restore_after": 0, "violation_tol": 1e-6}
    plain = zoframe.minimize(prob, name, **kw)
    monkeypatch.setattr(S, "RESTORE_BLOCKED_ABOVE", 0)
    blocked = zoframe.minimize(prob, name, **kw)
    for r in (plain, blocked):
        assert r.message.startswith("feasible"), r.message
        assert float(np.max(D @ r.x - e)) <= 1e-6
        assert float(r.outputs["violation_checked"]) == prob.m
    assert blocked.nit <= plain.nit + 1
    np.testing.assert_allclose(blocked.x, plain.x, atol=1e-6)  # the same projection, up to the row order
    restore = blocked.nfev_by_purpose["restore"]
    assert restore >= blocked.nit * prob.m  # every round checked all m constraints


def _round_peak(prob: Any) -> tuple[int, int]:
    oracle = CountingOracle(prob)
    solver = zoframe.default_registry().solver("adszog").cls(steps="paper")
    w = 0.05 * np.random.default_rng(0).standard_normal(prob.dim)
    tracemalloc.start()
    try:
        _, violation, checked, active = solver._restore_round(oracle, w, None, np.random.default_rng(1))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert checked == prob.m and violation > 0.0
    assert active is None or active.shape[0] <= 16 * prob.dim
    assert oracle.calls_by_purpose["restore"] >= prob.m
    return peak, oracle.calls


def test_a_blocked_round_holds_no_m_vector(monkeypatch: pytest.MonkeyPatch) -> None:
    """A restoration round on ~4 million pair constraints (d = 50): the traced peak is what one block
    of 2^20 constraints needs (values, indices and the problem's temporaries), under 40 MiB, while
    the one-call round holds the m values, their indices and the band mask (measured here too:
    above 100 MiB). One float64 m-vector is 32 MB."""
    prob = pairwise("gen", n_samples=8000, seed=0)
    assert prob.m > S.RESTORE_BLOCKED_ABOVE
    blocked, _ = _round_peak(prob)
    monkeypatch.setattr(S, "RESTORE_BLOCKED_ABOVE", 10**12)
    one_call, _ = _round_peak(prob)
    assert blocked < 40 * 2**20, f"blocked: traced peak {blocked / 2**20:.1f} MiB"
    assert one_call > 100 * 2**20, f"one call: traced peak {one_call / 2**20:.1f} MiB"
