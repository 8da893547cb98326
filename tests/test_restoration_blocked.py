"""The restoration round over huge m: R1 as a blocked pass with memory bounded whatever m is."""

from __future__ import annotations

import tracemalloc
from typing import Any

import numpy as np
import pytest

import zoframe
from zoframe import CountingOracle
from zoframe_constrained import penalty, restoration
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
    monkeypatch.setattr(restoration, "RESTORE_BLOCKED_ABOVE", 0)
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
        _, violation, checked, active = restoration.restore_round(
            oracle, w, None, np.random.default_rng(1), solver.restore_settings()
        )
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
    assert prob.m > restoration.RESTORE_BLOCKED_ABOVE
    blocked, _ = _round_peak(prob)
    monkeypatch.setattr(restoration, "RESTORE_BLOCKED_ABOVE", 10**12)
    one_call, _ = _round_peak(prob)
    assert blocked < 40 * 2**20, f"blocked: traced peak {blocked / 2**20:.1f} MiB"
    assert one_call > 100 * 2**20, f"one call: traced peak {one_call / 2**20:.1f} MiB"


def test_the_starting_distribution_is_computed_in_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """p*(x0) (Alg. 1 l.2) over more constraints than a block: the user's function is called per block of
    consecutive indices (never with all m), every constraint is charged once, and p* and max |f_j| are
    those of the one-call evaluation, bit for bit (an elementwise constraint function)."""
    m, d = 25_000, 5
    rng = np.random.default_rng(3)
    r2 = rng.uniform(0.5, 2.0, m)
    sizes: list[int] = []

    def con(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
        sizes.append(int(np.asarray(idx).shape[0]))
        out: np.ndarray = (X * X).sum(1)[:, None] - r2[idx][None, :]
        return out

    prob = zoframe.Constrained(lambda X: (X * X).sum(1), con, m=m, x0=np.ones(d))
    solver = zoframe.default_registry().solver("adszog").cls()
    w = np.full(d, 0.6)
    one = CountingOracle(prob)
    p_one, c_one = solver.phases(one)[0]._p_star(one, w)
    assert max(sizes) == m
    sizes.clear()
    monkeypatch.setattr(penalty, "FULL_PASS_BLOCK", 4096)
    blocked = CountingOracle(prob)
    p_blocked, c_blocked = solver.phases(blocked)[0]._p_star(blocked, w)
    assert max(sizes) == 4096 and sum(sizes) == m and len(sizes) == -(-m // 4096)
    assert blocked.calls == one.calls == m
    np.testing.assert_array_equal(p_blocked, p_one)
    assert c_blocked == c_one
    assert 0 < np.count_nonzero(p_one) < m  # some constraints violated at w, not all
    # a budget below m is refused by one call before anything is evaluated, as before
    sizes.clear()
    short = CountingOracle(prob, max_calls=m - 1)
    with pytest.raises(zoframe.errors.BudgetExhausted):
        solver.phases(short)[0]._p_star(short, w)
    assert sizes == [] and short.calls == 0
