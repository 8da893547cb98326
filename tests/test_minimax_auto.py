"""The minimax solvers under ``steps="auto"`` (their default): scale-free steps, phases, divergence said, certified stops.

Each claim that depends on random directions is tested on the median over seeds, with the tolerance stated.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import pytest

import zoframe
from zoframe import InvalidParameterError, Status, minimize
from zoframe.protocols import Array, IntArray
from zoframe_minimax.problems import NCSC
from zoframe_minimax.solvers import SGDA, SGDMSA, ZOGDA, ZOGDMSA, ZOSGDA, ZOSGDMSA

ZO = ("zo-gda", "zo-gdmsa")
ALL = ("zo-gda", "zo-gdmsa", "zo-sgda", "zo-sgdmsa", "sgda", "sgdmsa")
SEEDS = (0, 1, 2)


class Coupled:
    """``s (sum_i log(1 + x_i^2) + y^T A x - 2 y^T y)``, ``d_x = 10``, ``d_y = 5``, ``x0 = 2``: NC-SC, stationary at 0.

    ``shift`` subtracts ``shift |x|^2``: ``Phi`` is then unbounded below along the null space of ``A`` (a run that must
    run away); white-box gradients for the first-order solvers.
    """

    kind: ClassVar[str] = "minimax"
    fresh_results: ClassVar[bool] = True

    def __init__(self, s: float = 1.0, shift: float = 0.0, n: int = 1) -> None:
        self.s, self.shift, self.n = s, shift, n
        self.A = np.random.default_rng(7).standard_normal((5, 10))
        self.dim, self.dim_y = 10, 5
        self.x0, self.y0 = np.full(10, 2.0), np.zeros(5)
        self.y_set = None

    def values(self, X: Array, Y: Array, idx: IntArray) -> Array:
        v = np.log1p(X * X).sum(axis=1) + np.einsum("kj,kj->k", Y, X @ self.A.T) - 2.0 * (Y * Y).sum(axis=1)
        v = v - self.shift * (X * X).sum(axis=1)
        out: Array = self.s * v[:, None] + np.zeros((1, len(idx)))
        return out

    def measures(self, outputs: Any, monitor: Any) -> dict[str, float]:
        return {"fun": float(monitor.minimax(outputs["x"], outputs["y"]).mean())}

    def minimax_gradients(self, x: Array, y: Array, idx: IntArray) -> tuple[Array, Array]:
        gx = 2.0 * x / (1.0 + x * x) + self.A.T @ y
        gx = gx - 2.0 * self.shift * x
        gy = self.A @ x - 4.0 * y
        return np.repeat(self.s * gx[None, :], len(idx), 0), np.repeat(self.s * gy[None, :], len(idx), 0)


def _median(values: list[float]) -> float:
    return float(np.median(values))


# ----------------------------------------------------------------------------------------------- parameters
def test_auto_is_the_default_and_the_papers_steps_need_steps_paper() -> None:
    assert ZOGDA().steps == ZOGDMSA().steps == SGDA().steps == "auto"
    for cls, kw in ((ZOGDA, {"eta1": 0.1}), (ZOGDMSA, {"T": 3}), (ZOSGDA, {"eta2": 0.2}), (SGDMSA, {"T": 2}),
                    (ZOSGDMSA, {"kappa": 3.0})):
        with pytest.raises(InvalidParameterError, match="steps='paper'"):
            cls(**kw)
        cls(steps="paper", **kw)
    with pytest.raises(InvalidParameterError, match=r"'auto'.*'paper'"):
        ZOGDA(steps="fast")
    for bad in ({"gtol": 0.0}, {"xtol": -1.0}, {"refine": "yes"}, {"divergence_limit": 1.0}, {"rtol": 0.0}):
        with pytest.raises(InvalidParameterError):
            ZOGDA(**bad)


# ----------------------------------------------------------------------------------------------- scale-free
@pytest.mark.parametrize("solver", ZO)
def test_the_coupled_problem_at_three_scales_converges_certified(solver: str) -> None:
    """The example of the task: ``s`` from 1e-2 to 1e2, defaults, 1e5 evaluations. Median over 3 seeds of
    ``max |x|`` (the stationary point is 0): measured 1.3e-8 (zo-gda) and 2.5e-11 (zo-gdmsa) at every scale;
    tolerance 1e-6. Every run stops by
    itself, certified; the evaluations do not depend on the scale of the values (within a factor 2)."""
    calls = {}
    for s in (1e-2, 1.0, 1e2):
        ends, used = [], []
        for seed in SEEDS:
            res = minimize(Coupled(s), solver, rng=seed, max_calls=100_000, record_every=0)
            assert res.status is Status.CONVERGED and res.success, res.message
            ends.append(float(np.abs(res.x).max()))
            used.append(res.nfev)
        assert _median(ends) < 1e-6, (s, ends)
        calls[s] = _median(used)
    assert max(calls.values()) < 2.0 * min(calls.values()), calls


@pytest.mark.parametrize("solver", ALL)
def test_scale_of_the_variables_does_not_matter(solver: str) -> None:
    """``NCSC`` in ``x`` units of 1e-3 and 1e3 (``x -> c x``): the run converges certified and reaches the exact
    stationarity ``|grad g| <= 1e-6`` relative to its size at ``x0`` at both scales (median over 3 seeds)."""

    class Rescaled:
        kind: ClassVar[str] = "minimax"

        def __init__(self, c: float) -> None:
            self.p, self.c = NCSC(d1=6, d2=3, kappa=10, seed=4), c
            self.dim, self.dim_y, self.n = 6, 3, 1
            self.x0, self.y0, self.y_set = c * self.p.x0, self.p.y0, None

        def values(self, X: Array, Y: Array, idx: IntArray) -> Array:
            out: Array = self.p.values(X / self.c, Y, idx)
            return out

        def measures(self, outputs: Any, monitor: Any) -> dict[str, float]:
            return {"fun": float(monitor.minimax(outputs["x"], outputs["y"]).mean())}

        def minimax_gradients(self, x: Array, y: Array, idx: IntArray) -> tuple[Array, Array]:
            gx, gy = self.p.minimax_gradients(x / self.c, y, idx)
            return gx / self.c, gy

    for c in (1e-3, 1e3):
        prob = Rescaled(c)
        ratios = []
        for seed in SEEDS:
            res = minimize(prob, solver, rng=seed, max_calls=200_000, record_every=0)
            assert res.success, (c, res.message)
            ratios.append(float(np.linalg.norm(prob.p.grad_g(res.x / c)) / np.linalg.norm(prob.p.grad_g(prob.p.x0))))
        assert _median(ratios) < 1e-6, (c, ratios)


# ----------------------------------------------------------------------------------------------- divergence
@pytest.mark.parametrize("solver", ALL)
def test_a_run_that_runs_away_ends_diverged_saying_where_and_when(solver: str) -> None:
    """``Phi`` unbounded below: every run ends DIVERGED, never BUDGET."""
    res = minimize(Coupled(1.0, shift=1.0), solver, rng=0, max_calls=300_000, record_every=0)
    assert res.status is Status.DIVERGED and not res.success, res.message
    assert "diverged at iteration" in res.message and "exceeds" in res.message
    assert " in the " in res.message  # the phase


@pytest.mark.parametrize("solver", ZO)
def test_paper_steps_that_run_away_end_diverged(solver: str) -> None:
    """The papers' fixed steps on the coupled problem at ``s = 100``: before, ``|x|`` reached 7.9e12 and the run
    ended on its budget; now it ends DIVERGED."""
    res = minimize(Coupled(100.0), solver, rng=0, max_calls=100_000, steps="paper", record_every=0)
    assert res.status is Status.DIVERGED, res.message
    assert np.isfinite(res.x).all()


# ----------------------------------------------------------------------------------------------- phases, stops
def test_phases_their_switch_and_their_costs_are_reported() -> None:
    prob = NCSC(d1=8, d2=4, kappa=10, seed=2)
    res = minimize(prob, "zo-gda", rng=0, max_calls=200_000)
    assert res.status is Status.CONVERGED and res.success
    notes = " ".join(res.notes)
    assert "1. adaptive GDA (TiAda):" in notes and "2. refinement:" in notes and "evaluations, ended" in notes
    assert "trace column phase: 0 = adaptive GDA (TiAda), 1 = refinement" in notes
    phase = res.trace["phase"]
    assert phase[0] == 0 and phase[-1] == 1 and np.all(np.diff(phase) >= 0)
    assert res.nfev_by_purpose["refine"] > 0 and res.nfev_by_purpose["certify"] > 0
    assert res.nfev == sum(v for k, v in res.nfev_by_purpose.items() if k not in ("certify", "monitor"))
    assert res.certificate is not None and res.certificate["passed"]
    assert float(np.linalg.norm(prob.grad_g(res.x))) < 1e-6 * float(np.linalg.norm(prob.grad_g(prob.x0)))


def test_gtol_and_xtol_are_in_the_problems_units() -> None:
    """``gtol``: the refinement stops once ``|grad Phi|_inf <= gtol`` (exact gradient within 10x of it); a loose one
    stops earlier than the default relative test. ``xtol``: once a step moves no ``x_i`` by more than ``xtol``."""
    prob = NCSC(d1=8, d2=4, kappa=10, seed=2)
    tight = minimize(prob, "zo-gda", rng=0, max_calls=200_000, record_every=0)
    loose = minimize(prob, "zo-gda", rng=0, max_calls=200_000, record_every=0, gtol=1e-3)
    assert loose.status is Status.CONVERGED and "gtol = 0.001" in loose.message
    assert float(np.abs(prob.grad_g(loose.x)).max()) <= 1e-2
    assert loose.nfev < tight.nfev
    xt = minimize(prob, "zo-gda", rng=0, max_calls=200_000, record_every=0, xtol=1e-4)
    assert xt.status is Status.CONVERGED and ("xtol" in xt.message or "converged" in xt.message)
    assert xt.nfev <= tight.nfev


def test_a_sampled_finite_sum_has_no_refinement_and_says_when_it_is_done() -> None:
    """Batches of 4 of 8 components: no refinement (not every component in an estimate). With white-box gradients
    the run stops by itself, NOISE_LIMITED, once the moving average of its x-estimates stays within a standard error
    of 0 (3 seeds of 3; |grad g| down by 50x: measured median 7e-3 of the start); the zeroth-order estimates are
    noisier and keep making progress until the budget (|grad g| down by 3x in 60k evaluations: measured median 0.11
    of the start; a budget stop, never a claim). ``refine=True`` forces the refinement on all components."""
    prob = NCSC(d1=6, d2=3, kappa=5, n=8, noise=0.1, seed=0)
    start = float(np.linalg.norm(prob.grad_g(prob.x0)))
    ratios = []
    for seed in SEEDS:
        res = minimize(prob, "sgda", rng=seed, batch1=4, batch2=4, max_calls=100_000, record_every=0)
        assert "refinement" not in " ".join(res.notes)
        assert res.status is Status.NOISE_LIMITED and not res.success, res.message
        ratios.append(float(np.linalg.norm(prob.grad_g(res.x))) / start)
    assert _median(ratios) < 2e-2, ratios
    ratios = []
    for seed in SEEDS:
        res = minimize(prob, "zo-sgda", rng=seed, batch1=4, batch2=4, max_calls=60_000, record_every=0)
        assert res.status in (Status.BUDGET, Status.NOISE_LIMITED) and not res.success
        ratios.append(float(np.linalg.norm(prob.grad_g(res.x))) / start)
    assert _median(ratios) < 0.3, ratios
    forced = minimize(prob, "zo-sgda", rng=0, batch1=4, batch2=4, refine=True, max_calls=400_000, record_every=0)
    assert "2. refinement" in " ".join(forced.notes) and forced.success, forced.message


def test_a_batch_of_at_least_n_draws_is_the_full_sum() -> None:
    """Under steps='auto' ZO-SGDA with its default batch (10,000 draws) on a sum of 8 components runs exactly
    ZO-GDA's iteration (weights 1/n, no sampling noise), refinement included."""
    prob = NCSC(d1=6, d2=3, kappa=5, n=8, noise=0.1, seed=0)
    a = minimize(prob, "zo-sgda", rng=3, max_calls=200_000, record_every=0)
    b = minimize(prob, "zo-gda", rng=3, max_calls=200_000, record_every=0)
    assert np.array_equal(a.x, b.x) and a.nfev == b.nfev and a.success


@pytest.mark.parametrize("y_set", ["box", "ball", "simplex"])
@pytest.mark.parametrize("solver", ["zo-gda", "zo-gdmsa", "sgdmsa"])
def test_constrained_y_sets(solver: str, y_set: str) -> None:
    prob = NCSC(d1=6, d2=3, kappa=5, y_set_name=y_set, seed=1)
    res = minimize(prob, solver, rng=0, max_calls=200_000, record_every=0)
    assert res.success, res.message
    assert prob.y_set is not None and np.allclose(prob.y_set.project(res.outputs["y"]), res.outputs["y"])
    assert float(np.linalg.norm(prob.grad_g(res.x))) < 1e-6


def test_same_seed_same_result_and_checkpoint_resume(tmp_path: Any) -> None:
    prob = NCSC(d1=6, d2=3, kappa=5, seed=1)
    full = minimize(prob, "zo-gdmsa", rng=5, max_iter=30, record_every=0)
    again = minimize(prob, "zo-gdmsa", rng=5, max_iter=30, record_every=0)
    assert np.array_equal(full.x, again.x) and full.nfev == again.nfev
    ck = tmp_path / "ck"
    minimize(prob, "zo-gdmsa", rng=5, max_iter=12, checkpoint=ck, record_every=0)
    resumed = minimize(prob, "zo-gdmsa", max_iter=30, resume=ck, record_every=0)
    assert np.array_equal(full.x, resumed.x) and full.nfev == resumed.nfev


def test_not_concave_in_y_is_never_a_success() -> None:
    """``F = |x|^2 + |y|^2 - |y|^4 / 100`` (not concave around ``y0``) with the start probe switched off: whatever
    the run does, it is not a success, and a failed certificate says why."""
    prob = zoframe.Minimax(lambda X, Y: (X * X).sum(axis=1) + (Y * Y).sum(axis=1) - 0.01 * (Y**4).sum(axis=1),
                           x0=np.ones(3), y0=np.full(2, 0.1))  # fmt: skip
    res = minimize(prob, "zo-gda", rng=0, max_calls=50_000, check_concavity=False, record_every=0)
    cert = res.certificate
    if res.success:  # the maximiser y = +-7.07 is a concave region: a success there is a true one
        assert cert is not None and np.abs(np.abs(res.outputs["y"]) - math.sqrt(50.0)).max() < 1e-3
    convex = zoframe.Minimax(lambda X, Y: (X * X).sum(axis=1) + (Y * Y).sum(axis=1), x0=np.ones(3), y0=np.full(2, 0.1))
    res = minimize(convex, "zo-gda", rng=0, max_calls=50_000, check_concavity=False, record_every=0)
    assert not res.success and res.status in (Status.DIVERGED, Status.FAILED), res.message


def test_auto_steps_are_bit_identical_with_chunks_and_a_process_pool() -> None:
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

    prob = NCSC(d1=6, d2=3, kappa=5, n=4, noise=0.1, seed=1)
    kw: dict[str, Any] = {"rng": 2, "max_calls": 60_000, "record_every": 0, "block_rows": 5}
    serial = minimize(prob, "zo-gdmsa", **kw)
    with ThreadPoolExecutor(2) as ex:
        threaded = minimize(prob, "zo-gdmsa", executor=ex, chunks=3, **kw)
    with ProcessPoolExecutor(2) as ex:
        pooled = minimize(prob, "zo-gdmsa", executor=ex, **kw)
    for other in (threaded, pooled):
        assert np.array_equal(serial.x, other.x) and serial.nfev == other.nfev and serial.message == other.message
