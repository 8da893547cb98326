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


# ---------------------------------------------------------------------- ending at the start, the start's evaluations
@dataclass(frozen=True)
class Skip:
    """A phase that evaluates the objective once at its start and hands over at once (before any step)."""

    name: str
    to: str | None = None

    def start(self, oracle: CountingOracle, carry: Carry, rng: np.random.Generator) -> GDState:
        value = float(oracle.objective(carry.x[None, :]).mean())
        return GDState(np.array(carry.x, copy=True), value, 0)

    def step(self, oracle: CountingOracle, state: GDState, rng: np.random.Generator) -> GDState:  # pragma: no cover
        raise AssertionError("a phase that ends at its start never steps")

    def end(self, oracle: CountingOracle, state: GDState) -> PhaseEnd | None:
        return PhaseEnd(End.NEXT, "nothing to do here", to=self.to)

    def carry(self, state: GDState) -> Carry:
        return Carry(state.x)


@dataclass(frozen=True)
class SkipThenTwo(PhasedSolver):
    """``skip`` (ends at its start) -> ``slow`` (5 steps) -> ``skip again`` (ends at its start) -> ``fast``."""

    problem_kinds: ClassVar[frozenset[str]] = frozenset({"finite_sum"})

    def phases(self, oracle: CountingOracle) -> tuple[Any, ...]:
        return (Skip("skip"), FixedStep("slow phase", 0.01, 5), Skip("skip again"),
                FixedStep("fast phase", 0.4, 10_000, tol=1e-9))  # fmt: skip


def test_a_phase_can_hand_over_at_its_start_and_its_start_evaluations_are_its_own() -> None:
    """``end`` is asked right after ``start`` too (in ``init`` and after a hand-over): the phase is logged with 0
    iterations and the evaluations of its start (here one objective value), the next phase starts within the same
    call, and the run's iterations are those of the phases that step."""
    res = zoframe.minimize(_quad(), SkipThenTwo(), rng=0, max_iter=200, record_every=1)
    assert res.status is zoframe.Status.CONVERGED
    notes = " ".join(res.notes)
    assert "1. skip: 0 iterations, 1 evaluations, ended (next): nothing to do here" in notes
    assert "3. skip again: 0 iterations, 1 evaluations, ended (next)" in notes
    # each FixedStep iteration costs 2 d + 1 = 7 evaluations; the slow phase is charged its 5 steps only
    assert "2. slow phase: 5 iterations, 35 evaluations" in notes
    phases = np.asarray(res.trace["phase"])
    assert phases[0] == 1 and phases[-1] == 3 and 2.0 not in phases  # init ended in phase 1; "skip again" never shows
    oracle = CountingOracle(_quad())
    st = SkipThenTwo().init(oracle, np.zeros(3), np.random.default_rng(0))
    assert st.phase == 1 and st.since_calls == 1 and oracle.calls == 1 and st.t == 0


@dataclass(frozen=True)
class Capped(PhasedSolver):
    """One fixed-step phase whose end is the user's iteration count (End.MAX_ITER); no generic divergence test."""

    problem_kinds: ClassVar[frozenset[str]] = frozenset({"finite_sum"})
    eta: float = 1.5

    def phases(self, oracle: CountingOracle) -> tuple[Any, ...]:
        return (Limited("limited", self.eta, 30),)

    @property
    def runaway(self) -> Runaway | None:
        return None


@dataclass(frozen=True)
class Limited(FixedStep):
    def end(self, oracle: CountingOracle, state: GDState) -> PhaseEnd | None:
        return PhaseEnd(End.MAX_ITER, f"{self.steps} steps, as asked") if state.k >= self.steps else None


def test_max_iter_end_and_a_solver_without_the_generic_divergence_test() -> None:
    """``End.MAX_ITER`` is the run's ``MAX_ITER``; with ``runaway`` ``None`` a run whose values grow by 30 orders of
    magnitude (a step of 1.5 on |x - 1|^2) is not stopped by the generic test (TwoPhase stops it DIVERGED)."""
    res = zoframe.minimize(_quad(), Capped(), rng=0, max_iter=100)
    assert res.status is zoframe.Status.MAX_ITER and res.nit == 30 and res.message == "30 steps, as asked"
    assert float(np.abs(res.x).max()) > 1e8
    assert zoframe.minimize(_quad(), TwoPhase(eta2=1.5), rng=0, max_iter=100).status is zoframe.Status.DIVERGED


def test_notes_name_the_running_phase_of_a_resumed_run(tmp_path: Path) -> None:
    """The notes build the phases from the run's oracle (a resumed run that stops before its first step has none
    cached)."""
    ck = tmp_path / "ck"
    zoframe.minimize(_quad(), TwoPhase(eta2=0.05), rng=3, max_iter=12, checkpoint=ck)
    resumed = zoframe.minimize(_quad(), TwoPhase(eta2=0.05), max_iter=12, resume=ck)
    assert resumed.nit == 12 and any("fast phase" in n and "running when the run ended" in n for n in resumed.notes)
