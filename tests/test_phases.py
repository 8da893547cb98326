"""The phased-solver machinery (zoframe.phases): sequencing, hand-over, divergence, notes, checkpoints."""

from __future__ import annotations

from dataclasses import dataclass
import math
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

import zoframe
from zoframe.oracle import CountingOracle
from zoframe.phases import Carry, End, PhasedSolver, PhasedState, PhaseEnd, Runaway
from zoframe.protocols import Array


@dataclass(frozen=True)
class GDState:
    x: Array
    value: float
    k: int


@dataclass(frozen=True)
class FixedStep:
    """Gradient descent with a fixed step on the full objective (central differences), for ``steps`` steps."""

    name: str
    eta: float
    steps: int
    tol: float = 0.0

    def start(self, oracle: CountingOracle, carry: Carry, rng: np.random.Generator) -> GDState:
        return GDState(np.array(carry.x, copy=True), math.nan, 0)

    def step(self, oracle: CountingOracle, state: GDState, rng: np.random.Generator) -> GDState:
        d = oracle.dim
        h = 1e-6
        P = np.vstack([state.x + h * np.eye(d), state.x - h * np.eye(d), state.x[None, :]])
        v = oracle.objective(P).mean(axis=1)
        g = (v[:d] - v[d : 2 * d]) / (2 * h)
        return GDState(state.x - self.eta * g, float(v[-1]), state.k + 1)

    def end(self, oracle: CountingOracle, state: GDState) -> PhaseEnd | None:
        if self.tol and float(np.abs(state.x - 1.0).max()) <= self.tol:
            return PhaseEnd(End.CONVERGED, f"|x - 1| <= {self.tol:g}")
        if state.k >= self.steps:
            return PhaseEnd(End.NEXT, f"{self.steps} steps done")
        return None

    def carry(self, state: GDState) -> Carry:
        return Carry(state.x)


@dataclass(frozen=True)
class TwoPhase(PhasedSolver):
    problem_kinds: ClassVar[frozenset[str]] = frozenset({"finite_sum"})
    eta1: float = 0.01
    eta2: float = 0.4
    divergence_limit: float = 1e8

    def phases(self, oracle: CountingOracle) -> tuple[FixedStep, ...]:
        return (FixedStep("slow phase", self.eta1, 5), FixedStep("fast phase", self.eta2, 10_000, tol=1e-9))


def _quad(d: int = 3) -> Any:
    return zoframe.FiniteSum(lambda X: ((X - 1.0) ** 2).sum(axis=1), x0=np.zeros(d))


def test_phases_run_in_order_and_the_last_one_converges() -> None:
    res = zoframe.minimize(_quad(), TwoPhase(), rng=0, max_iter=200, certificate=True)
    assert res.status is zoframe.Status.CONVERGED and res.success
    np.testing.assert_allclose(res.x, 1.0, atol=1e-8)
    notes = " ".join(res.notes)
    assert "1. slow phase: 5 iterations" in notes and "2. fast phase" in notes and "ended (converged)" in notes
    phases = res.trace["phase"]
    assert phases[0] == 0 and phases[-1] == 1


def test_a_runaway_ends_diverged_saying_where_and_when() -> None:
    res = zoframe.minimize(_quad(), TwoPhase(eta2=1.5), rng=0, max_iter=500)
    assert res.status is zoframe.Status.DIVERGED and not res.success
    assert "diverged at iteration" in res.message and "in the fast phase" in res.message and "grew from" in res.message


def test_runaway_rule() -> None:
    r = Runaway(1e8)
    assert r.check({"x": np.array([1e9])}, math.nan, 1.0, math.nan) is not None
    assert r.check({"x": np.array([1e7])}, math.nan, 1.0, math.nan) is None
    assert r.check({"x": np.array([np.nan])}, math.nan, 1.0, math.nan) is not None
    assert r.check({"x": np.array([0.0])}, 2e9, 1.0, 10.0) is not None
    assert r.check({"x": np.array([0.0])}, 2e8, 1.0, 10.0) is None
    assert r.check({"x": np.array([0.0])}, -1e30, 1.0, 10.0) is None  # decreasing values are the point


def test_checkpoint_resume_is_bit_identical(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    full = zoframe.minimize(_quad(), TwoPhase(eta2=0.05), rng=3, max_iter=40)
    zoframe.minimize(_quad(), TwoPhase(eta2=0.05), rng=3, max_iter=12, checkpoint=ck)
    resumed = zoframe.minimize(_quad(), TwoPhase(eta2=0.05), max_iter=40, resume=ck)
    assert np.array_equal(full.x, resumed.x) and full.nfev == resumed.nfev


def test_phased_state_fields() -> None:
    oracle = CountingOracle(_quad())
    s = TwoPhase()
    st = s.init(oracle, np.zeros(3), np.random.default_rng(0))
    assert isinstance(st, PhasedState) and st.phase == 0 and st.t == 0
    for _ in range(5):
        st = s.step(oracle, st, np.random.default_rng(0))
    assert st.phase == 1 and st.since_t == 5  # handed over within the fifth step
