"""DSZOG / ADSZOG as phased solvers: their phases, the hand-over rules between them, and resuming in any phase."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zoframe
from zoframe.oracle import CountingOracle
from zoframe.phases import PhasedState
from zoframe_constrained.penalty import ADSZOGPenalty, DSZOGPenalty, PenaltyFields
from zoframe_constrained.precision import PrecisionPhase, PrecisionPhaseState
from zoframe_constrained.restoration import Restoration, RestorationState
from zoframe_constrained.solvers import ADSZOG, DSZOG, PHASES


def _cubic(X: np.ndarray) -> np.ndarray:
    out: np.ndarray = -(X[:, 0] ** 3) + X[:, 1] ** 2
    return out


def _bounds(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.stack([X[:, 0] - 1.0, X[:, 1] - 5.0], axis=1)[:, idx]
    return out


def _polytope(d: int = 6, m: int = 600) -> Any:
    """The projection of a far point onto a random polytope {A x <= 1} (0 inside)."""
    rng = np.random.default_rng(7)
    A = rng.standard_normal((m, d))
    a = 5.0 * rng.standard_normal(d)
    return zoframe.Constrained(lambda X: ((X - a) ** 2).sum(1), lambda X, idx: X @ A[idx].T - 1.0, m=m, x0=np.zeros(d))


@pytest.mark.parametrize(("cls", "penalty"), [(DSZOG, DSZOGPenalty), (ADSZOG, ADSZOGPenalty)])
def test_the_phases_are_in_the_order_of_their_trace_codes(cls: type, penalty: type) -> None:
    oracle = CountingOracle(_polytope())
    phases = cls().phases(oracle)
    assert [p.name for p in phases] == [PHASES[k] for k in range(4)]
    assert [type(p) for p in phases] == [penalty, Restoration, PrecisionPhase, PrecisionPhase]
    assert all(p.solver is phases[0].solver for p in phases)


@pytest.mark.parametrize("cls", [DSZOG, ADSZOG])
def test_a_small_problem_hands_over_to_the_precision_phase_at_the_start(cls: type) -> None:
    """The penalty phase starts (``p*(x0)``: one pass over the m constraints; the first beta: one objective batch)
    and hands over to the precision phase from x0 before its first step (0 iterations in the log)."""
    prob = _polytope(d=3, m=40)  # (n + m) d = 123 <= small_problem
    oracle = CountingOracle(prob)
    st = cls().init(oracle, np.asarray(prob.x0, dtype=np.float64), np.random.default_rng(0))
    assert isinstance(st, PhasedState) and st.phase == 3 and isinstance(st.inner, PrecisionPhaseState)
    (rec,) = json.loads(st.log)
    assert rec["phase"] == PHASES[0] and rec["iterations"] == 0 and rec["evaluations"] == prob.m + 1
    assert "small problem" in rec["why"] and st.inner.why == rec["why"]
    assert isinstance(st.inner.penalty, PenaltyFields)  # the penalty state rides along (its p is reported)
    assert cls().outputs(st)["p"].shape == (prob.m,) and "switch_evaluations" in cls().outputs(st)


def test_restore_after_zero_starts_in_the_restoration() -> None:
    prob = _polytope()
    oracle = CountingOracle(prob)
    st = DSZOG(steps="paper", restore_after=0).init(oracle, np.asarray(prob.x0, dtype=np.float64), np.random.default_rng(0))
    assert st.phase == 1 and isinstance(st.inner, RestorationState) and st.inner.rounds == 0
    assert "restore_after = 0" in json.loads(st.log)[0]["why"]


@pytest.mark.parametrize("name", ["dszog", "adszog"])
def test_a_blow_up_restarts_from_the_best_feasible_sample_or_ends_diverged(name: str) -> None:
    """min -x0^3 + x1^2 s.t. x0 <= 1, x1 <= 5: the penalised value is unbounded below outside the feasible set and
    the normalised steps run away. From the feasible start the guard hands over to the precision phase at the best
    sample with a feasible batch, which converges to the minimiser (1, 0); from an infeasible start no feasible
    sample was seen: DIVERGED, on the last finite iterate."""
    for x0, status in (((0.0, 0.0), zoframe.Status.CONVERGED), ((3.0, 0.0), zoframe.Status.DIVERGED)):
        prob = zoframe.Constrained(_cubic, _bounds, m=2, x0=np.array(x0))
        r = zoframe.minimize(prob, name, rng=0, max_calls=200_000, small_problem=0, record_every=1)
        assert r.status is status, r.message
        phases = np.asarray(r.trace["phase"])
        if status is zoframe.Status.CONVERGED:
            assert r.success and np.allclose(r.x, [1.0, 0.0], atol=1e-8)
            assert set(phases.tolist()) == {0.0, 2.0} and np.all(np.diff(phases) >= 0)
            assert any("blew up" in n and "restarted from its best feasible sample" in n for n in r.notes)
        else:
            assert set(phases.tolist()) == {0.0} and "no feasible sample was seen" in r.message
            assert np.isfinite(r.x).all() and float(np.abs(r.x).max()) < 1e11


@pytest.mark.parametrize("name", ["dszog", "adszog"])
def test_a_checkpoint_in_any_phase_resumes_bit_for_bit(name: str, tmp_path: Path) -> None:
    """A run stopped in the penalty phase, in the restoration and in the precision phase (each phase's first
    record) and resumed gives the straight run's Result: the phases' states (and the penalty state they carry)
    go through the checkpoint."""
    prob = _polytope()
    kw: dict[str, Any] = {"max_calls": 150_000, "small_problem": 0, "record_every": 1}
    straight = zoframe.minimize(prob, name, rng=0, **kw)
    phases, iters = np.asarray(straight.trace["phase"]), np.asarray(straight.trace["iteration"])
    assert set(phases.tolist()) == {0.0, 1.0, 2.0}, straight.message
    stops = sorted({int(iters[np.flatnonzero(phases == c)[0]]) for c in (1.0, 2.0)} | {3})
    for k in stops:
        path = tmp_path / f"{name}-{k}"
        zoframe.minimize(prob, name, rng=0, checkpoint=path, **{**kw, "max_iter": k})
        resumed = zoframe.minimize(prob, name, resume=path, **kw)
        assert np.array_equal(resumed.x, straight.x) and resumed.nfev == straight.nfev, k
        assert resumed.message == straight.message and resumed.notes == straight.notes
        assert np.array_equal(np.asarray(resumed.trace["phase"]), phases)


@pytest.mark.parametrize("name", ["dszog", "adszog"])
def test_a_penalty_phase_that_runs_away_says_so(name: str) -> None:
    """The runaway rule of the penalty phase (its hand-over logic): beta at beta_max and the sampled violation at the
    end of a continuation window no lower than at its start. With a feasible sample seen: the precision phase from the
    best one, the message saying at which step and evaluation, with which violation and |w| (it carried on before, on
    a9a pairwise to |w| = 2e8 and a saturated loss); without one: the restoration from the last iterate."""
    import dataclasses

    from zoframe.phases import End
    from zoframe_constrained.solvers import ADSZOG, DSZOG

    solver = (DSZOG if name == "dszog" else ADSZOG)(small_problem=0, stall_window=5)
    prob = _polytope()
    oracle = CountingOracle(prob)
    st = solver.init(oracle, np.asarray(prob.x0, dtype=np.float64), np.random.default_rng(0))
    pen = st.inner
    phase = solver.phases(oracle)[0]
    w = np.full(prob.dim, 3.0)
    for best, expect in ((np.zeros(prob.dim), "restarted from its best feasible sample"), (None, "the restoration")):
        prev = dataclasses.replace(pen, t=40, beta=solver.beta_max, win_t0=35, win_v0=0.5, alpha=1.0, best_x=best,
                                   best_value=0.0 if best is not None else np.inf)  # fmt: skip
        new = phase.after_step(oracle, prev, w, 1.0, True, 0.8, 1.0, 5.0)
        text = new.get("blown") or new.get("handover")
        assert text and "ran away at step 41" in text and "grew from 0.5 (step 35) to 0.8" in text and expect in text
        end = solver.after_penalty(oracle, dataclasses.replace(prev, **new))
        assert end is not None and end.how is End.NEXT
        assert end.to == ("precision phase" if best is not None else "restoration")
        if best is not None:
            np.testing.assert_array_equal(new["x"], best)
    # a violation that still falls at beta_max is no runaway
    prev = dataclasses.replace(pen, t=40, beta=solver.beta_max, win_t0=35, win_v0=0.5, alpha=1.0)
    new = phase.after_step(oracle, prev, w, 1.0, True, 0.3, 1.0, 5.0)
    assert not new.get("blown") and not new.get("restore_final")


@pytest.mark.slow
@pytest.mark.data("a9a")
def test_a9a_pairwise_reaches_the_white_box_optimum() -> None:
    """pairwise a9a (1000 samples, m = 45,600), adszog with its defaults and max_calls = 2e7: the penalty phase runs
    away (beta at its maximum, the sampled violation growing), says so and hands over to the precision phase at its
    best feasible sample, which reaches the white-box optimum f0 = 0.23153 (no longer the saturated loss 1.0 at |w| =
    2e8 that the certificate passed), on three seeds."""
    from zoframe_constrained.problems import pairwise

    prob = pairwise("a9a", n_samples=1000, seed=0)
    for seed in (0, 1, 2):
        r = zoframe.minimize(prob, "adszog", rng=seed, max_calls=20_000_000, record_every=0)
        assert abs(r.fun - 0.23153) <= 1e-4 and r.max_violation is not None and r.max_violation <= 1e-12, r.message
        assert any("ran away" in n for n in r.notes), r.notes
