"""ZO-GDA, ZO-GDMSA, ZO-SGDA, ZO-SGDMSA and the first-order SGDA / SGDMSA under the papers' steps (zoframe_minimax).

The automatic steps, the phases and the certificate are tested in ``test_minimax_auto.py``.

Stochastic claims are tested on the median over 10 seeds with the tolerance stated next to each.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import pytest

from zoframe import CountingOracle, InvalidInputError, InvalidParameterError, RunFailedError, minimize
from zoframe.errors import IncompatibleProblemError
from zoframe.estimators import GaussianEstimator
from zoframe.sets import Box
from zoframe_minimax.problems import NCSC
from zoframe_minimax.solvers import (
    SGDA,
    SGDMSA,
    ZOGDA,
    ZOGDMSA,
    ZOSGDA,
    ZOSGDMSA,
    theory_step_sizes,
    with_theory_steps,
)

SEEDS = range(10)


def _median_grad_g(problem: NCSC, solver: Any, **budget: Any) -> tuple[float, float]:
    ends = []
    for seed in SEEDS:
        res = minimize(problem, solver, rng=seed, record_every=0, **budget)
        ends.append(float(np.linalg.norm(problem.grad_g(res.x))))
    return float(np.median(ends)), float(np.linalg.norm(problem.grad_g(problem.x0)))


# --------------------------------------------------------------------------- convergence
@pytest.mark.parametrize(
    "solver",
    [ZOGDA(steps="paper", eta1=0.1, eta2=0.5), ZOGDMSA(steps="paper", eta1=0.2, eta2=0.5, T=3)],
    ids=["zo-gda", "zo-gdmsa"],
)
def test_deterministic_zo_reaches_small_grad_g(solver: Any) -> None:
    # kappa = 10, d1 = 10, d2 = 5; ||grad g(x0)|| = 23.7. Measured medians ~2e-4 (GDA), ~7e-4 (GDMSA)
    # after 100k calls; tolerance 1e-2 after 40k calls.
    problem = NCSC(d1=10, d2=5, kappa=10, seed=0)
    med, start = _median_grad_g(problem, solver, max_calls=40_000, max_iter=10**6)
    assert start > 20
    assert med < 1e-2


@pytest.mark.parametrize(
    "solver",
    [
        ZOSGDA(steps="paper", eta1=0.1, eta2=0.5, batch1=4, batch2=4),
        ZOSGDMSA(steps="paper", eta1=0.2, eta2=0.5, T=3, batch1=4, batch2=4),
    ],
    ids=["zo-sgda", "zo-sgdmsa"],
)
def test_stochastic_zo_reaches_noise_floor(solver: Any) -> None:
    # n = 8 samples with noise 0.1, batches of 4 drawn with replacement, constant steps: the iterates
    # settle in a noise ball. ||grad g(x0)|| = 11.2; measured medians 0.21 (SGDA), 0.15 (SGDMSA) after
    # 40k calls; tolerance 0.5 (a 20x reduction).
    problem = NCSC(d1=10, d2=5, kappa=10, n=8, noise=0.1, seed=0)
    med, start = _median_grad_g(problem, solver, max_calls=40_000, max_iter=10**6)
    assert start > 10
    assert med < 0.5


@pytest.mark.parametrize(
    "solver",
    [SGDA(steps="paper", eta1=0.1, eta2=0.5, batch1=4, batch2=4),
     SGDMSA(steps="paper", eta1=0.2, eta2=0.5, T=3, batch1=4, batch2=4)],
    ids=["sgda", "sgdmsa"],
)
def test_first_order_references_converge(solver: Any) -> None:
    problem = NCSC(d1=10, d2=5, kappa=10, n=8, noise=0.1, seed=0)
    med, start = _median_grad_g(problem, solver, max_iter=400)
    assert med < 0.05 * start


def test_gdmsa_needs_fewer_calls_than_gda_when_kappa_is_large() -> None:
    # kappa = 50, d1 = 20, d2 = 2, eps = 0.05. ZO-GDA is run at every step of a grid that brackets its
    # stability limit (0.16 diverges at this kappa); ZO-GDMSA at eta1 = 0.4, T = 2. Measured medians:
    # GDA ~50k (0.04) / ~28k (0.08) calls, GDMSA ~9k.
    problem = NCSC(d1=20, d2=2, kappa=50, seed=0)
    eps = 0.05

    def calls_to_eps(solver: Any, seed: int) -> float:
        hit: dict[str, float] = {}

        def cb(info: Any) -> bool:
            if np.linalg.norm(problem.grad_g(info.x)) <= eps:
                hit["calls"] = info.calls
                return True
            return False

        minimize(problem, solver, rng=seed, max_calls=150_000, max_iter=10**6, callback=cb, record_every=0)
        return hit.get("calls", math.inf)

    msa = float(np.median([calls_to_eps(ZOGDMSA(steps="paper", eta1=0.4, eta2=0.5, T=2), s) for s in SEEDS]))
    gda = {
        e1: float(np.median([calls_to_eps(ZOGDA(steps="paper", eta1=e1, eta2=0.5), s) for s in SEEDS]))
        for e1 in (0.02, 0.04, 0.08)
    }
    assert math.isfinite(msa)
    assert all(msa < 0.5 * v for v in gda.values()), (msa, gda)


def test_ball_and_box_and_simplex_y_sets() -> None:
    # Iterates stay in Y and ||grad g|| drops below a tenth of its start (median over 10 seeds; measured
    # ratios ~0.03 box, ~0.02 ball, ~0.02 simplex). On the ball the maximiser sits on the boundary where
    # grad_y f does not vanish, so the ZO noise keeps y ~0.1 away from y*: a floor, not a bug.
    for name in ("box", "ball", "simplex"):
        problem = NCSC(d1=6, d2=3, kappa=4, y_set_name=name, seed=2)
        assert problem.y_set is not None
        ratios = []
        for seed in SEEDS:
            res = minimize(problem, ZOGDMSA(steps="paper", eta1=0.2, eta2=0.5, T=3), rng=seed, max_iter=300,
                           record_every=0)
            y = res.outputs["y"]
            assert np.allclose(problem.y_set.project(y), y)
            ratios.append(np.linalg.norm(problem.grad_g(res.x)) / np.linalg.norm(problem.grad_g(problem.x0)))
        assert np.median(ratios) < 0.1, (name, ratios)


# --------------------------------------------------------------------------- batching and cost
class _CountingValues:
    kind = "minimax"

    def __init__(self, problem: Any) -> None:
        self.p = problem
        self.batches: list[tuple[int, int]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.p, name)

    def values(self, X: Any, Y: Any, idx: Any) -> Any:
        self.batches.append((X.shape[0], len(idx)))
        return self.p.values(X, Y, idx)


@pytest.mark.parametrize("cls,T", [(ZOGDA, 1), (ZOGDMSA, 4)])
def test_one_batched_call_per_estimate(cls: Any, T: int) -> None:
    problem = NCSC(d1=7, d2=3, kappa=5, n=3, seed=2)
    wrapped = _CountingValues(problem)
    solver = cls(steps="paper", T=T) if cls is ZOGDMSA else cls(steps="paper")
    oracle = CountingOracle(wrapped)
    rng = np.random.default_rng(0)
    state = solver.init(oracle, problem.x0, rng)
    wrapped.batches.clear()
    before = oracle.calls
    solver.step(oracle, state, rng)
    q1, q2 = 2 * (7 + 6), 2 * (3 + 6)  # the paper's q = 2(d + 6)
    expected = [(q2 + 1, 3)] * T + [(q1 + 1, 3)] if cls is ZOGDMSA else [(q1 + 1, 3), (q2 + 1, 3)]
    assert wrapped.batches == expected  # one call per estimate, all components
    assert oracle.calls - before == solver.calls_per_step(oracle) == sum(k * b for k, b in expected)


def test_stochastic_batch_counts_distinct_samples() -> None:
    problem = NCSC(d1=4, d2=2, kappa=5, n=50, seed=0)
    wrapped = _CountingValues(problem)
    oracle = CountingOracle(wrapped)
    solver = ZOSGDA(steps="paper", batch1=30, batch2=30, q1=5, q2=3, check_concavity=False)
    rng = np.random.default_rng(3)
    state = solver.init(oracle, problem.x0, rng)
    solver.step(oracle, state, rng)
    (k1, b1), (k2, b2) = wrapped.batches
    assert (k1, k2) == (6, 4)
    assert 1 <= b1 <= 30 and 1 <= b2 <= 30  # duplicates of a draw with replacement are evaluated once
    assert oracle.calls == k1 * b1 + k2 * b2


def test_zo_estimates_are_unbiased_for_the_smoothed_gradient() -> None:
    # On the quadratic-in-y part the Gaussian forward difference is unbiased for grad_y f: the mean of
    # 2000 y-estimates is within 5% of ||grad_y f||.
    problem = NCSC(d1=5, d2=4, kappa=5, seed=3)
    oracle = CountingOracle(problem)
    solver = ZOGDA(q2=4)
    x, y = problem.x0, np.ones(4)
    rng = np.random.default_rng(0)
    est = np.mean([solver.H(oracle, x, y, rng) for _ in range(2000)], axis=0)
    true = problem.minimax_gradients(x, y, np.arange(1))[1][0]
    assert np.linalg.norm(est - true) < 0.05 * np.linalg.norm(true)


def test_defaults_follow_the_paper() -> None:
    s = ZOGDA()
    assert s.directions(123, 200) == (2 * 129, 2 * 206)
    k = 10 ** (1 / 3)
    m1, m2 = s.radii(123, 200)
    assert m1 == pytest.approx(1.5 * 0.01 * 123**-1.5 / k**2)
    assert m2 == pytest.approx(1.5 * 0.01 * 200**-1.5 / k**2)
    m1, m2 = ZOGDMSA().radii(123, 200)
    assert m1 == pytest.approx(1.5 * 0.01 * 123**-1.5)
    assert m2 == pytest.approx(1.5 * 0.01 * 200**-1.5 / math.sqrt(k))
    assert (ZOSGDA().eta1_, ZOSGDA().eta2_, ZOSGDMSA().eta1_, ZOSGDMSA().eta2_, ZOSGDMSA().T_) == (0.01, 0.01, 0.001, 0.01, 10)
    assert ZOGDA().steps == "auto" and ZOGDA().eta1 is None  # the papers' steps are resolved under steps="paper"
    assert ZOGDA(mu1=1e-3, q1=7).radii(3, 3)[0] == 1e-3 and ZOGDA(q1=7).directions(3, 3)[0] == 7


def test_theory_step_sizes() -> None:
    gda = theory_step_sizes("gda", ell=2.0, kappa=3.0)
    assert gda["eta1"] == pytest.approx(1 / (4 * 12**4 * 9 * 16 * 3))
    assert gda["eta2"] == pytest.approx(1 / 12)
    msa = theory_step_sizes("gdmsa", ell=2.0, kappa=3.0, eps=0.01)
    assert msa["eta1"] == pytest.approx(1 / (12 * 4 * 2))
    assert msa["T"] == math.ceil(3 * math.log(100))
    s = with_theory_steps(ZOGDMSA(), ell=2.0, kappa=3.0)
    assert (s.eta1, s.T, s.steps) == (msa["eta1"], msa["T"], "paper")
    with pytest.raises(InvalidParameterError, match="kappa"):
        theory_step_sizes("gda", ell=1.0, kappa=0.5)


def test_inputs_not_mutated_and_outputs_have_x_and_y() -> None:
    problem = NCSC(d1=4, d2=2, kappa=4, seed=0)
    x0 = problem.x0.copy()
    res = minimize(problem, ZOSGDMSA(steps="paper", T=2, eta1=0.1, eta2=0.5), rng=0, max_iter=5, x0=x0)
    assert np.array_equal(x0, problem.x0)
    assert set(res.outputs) == {"x", "y"} and res.outputs["y"].shape == (2,)
    assert {"fun", "g", "grad_g_norm", "y_mapping_norm", "grad_x_norm", "dist_y_star"} <= set(res.trace.names)


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "cls,kwargs,match",
    [
        (ZOGDA, {"eta1": 0.0}, "eta1"),
        (ZOGDA, {"eta2": -1.0}, "eta2"),
        (ZOGDMSA, {"T": 0}, "T must be an integer >= 1"),
        (ZOSGDMSA, {"T": 2.5}, "T must be an integer"),
        (ZOGDA, {"q1": 0}, "q1"),
        (ZOGDA, {"mu2": 0.0}, "mu2"),
        (ZOGDA, {"kappa": 0.5}, "kappa"),
        (ZOGDA, {"eps": 1.5}, "eps"),
        (ZOSGDA, {"batch1": 0}, "batch1"),
        (SGDA, {"eta1": float("nan")}, "eta1"),
        (SGDMSA, {"T": 0}, "T must"),
    ],
)
def test_bad_hyper_parameters(cls: Any, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        cls(steps="paper", **kwargs)


class _NoEval:
    """A minimax problem that fails the test if it is ever evaluated."""

    kind: ClassVar[str] = "minimax"

    def __init__(self, y_set: Any = None) -> None:
        self.dim, self.dim_y, self.n = 3, 2, 1
        self.x0, self.y0 = np.zeros(3), np.zeros(2)
        self.y_set = y_set

    def values(self, X: Any, Y: Any, idx: Any) -> Any:
        raise AssertionError("evaluated before the input was checked")


class _NoProjection:
    """A "set" with a dimension but no projection."""

    dim = 2


@pytest.mark.parametrize("name", ["zo-gda", "zo-gdmsa", "zo-sgda", "zo-sgdmsa", "sgda", "sgdmsa"])
def test_y_set_without_projection_is_a_clear_error(name: str) -> None:
    with pytest.raises(InvalidInputError, match="no project"):
        minimize(_NoEval(y_set=_NoProjection()), name, rng=0, max_iter=3)


@pytest.mark.parametrize("name", ["sgda", "sgdmsa"])
def test_first_order_needs_gradients(name: str) -> None:
    with pytest.raises(InvalidInputError, match="HasMinimaxGradient"):
        minimize(_NoEval(y_set=Box(2, -1.0, 1.0)), name, rng=0, max_iter=3)


def test_wrong_problem_kind_is_rejected() -> None:
    from zoframe import FiniteSum

    with pytest.raises(IncompatibleProblemError):
        minimize(FiniteSum(lambda X: (X**2).sum(axis=1), x0=np.zeros(2)), "zo-gda", rng=0, max_iter=2)


@pytest.mark.parametrize("name", ["zo-gda", "zo-gdmsa", "zo-sgda", "zo-sgdmsa"])
def test_convex_in_y_is_detected(name: str) -> None:
    from zoframe import Minimax

    calls = []

    def f(X: Any, Y: Any) -> Any:
        calls.append(X.shape[0])
        return (X**2).sum(axis=1) + (Y**2).sum(axis=1)  # convex in y: a min-min problem, not minimax

    problem = Minimax(f, x0=np.ones(3), y0=np.ones(2))
    with pytest.raises(RunFailedError) as info:  # a failure at the first evaluations, like any later one
        minimize(problem, name, rng=0, max_iter=5)
    assert isinstance(info.value.__cause__, InvalidInputError) and "not concave in y" in str(info.value.__cause__)
    assert info.value.result.nit == 0
    assert calls == [9]  # only the probe's single batch was evaluated
    res = minimize(problem, name, rng=0, max_iter=1, check_concavity=False)  # the check can be disabled
    assert res.nit == 1


def test_concavity_probe_passes_on_concave_problems() -> None:
    from zoframe_minimax.solvers import concavity_probe

    for name in (None, "box", "ball", "simplex"):
        problem = NCSC(d1=3, d2=4, kappa=8, y_set_name=name, seed=0)
        oracle = CountingOracle(problem)
        concavity_probe(oracle, problem.x0, problem.y0, np.random.default_rng(0))
        assert oracle.calls_by_purpose["check"] == 9


# --------------------------------------------------------------------------- estimator= and its parameters
class _RecordingEstimator:
    """A Gaussian estimator that records the radius each estimate is asked for."""

    def __init__(self) -> None:
        self.inner = GaussianEstimator(q=3, mu=1e-4)
        self.radii: list[float | None] = []

    def rows(self, dim: int, points: int = 1) -> int:
        return self.inner.rows(dim, points)

    def estimate(self, fun: Any, x: Any, rng: np.random.Generator, *, mu: float | None = None,
                 per_component: bool = False) -> Any:
        self.radii.append(mu)
        return self.inner.estimate(fun, x, rng, mu=mu, per_component=per_component)


@pytest.mark.parametrize("name", ["zo-gda", "zo-gdmsa", "zo-sgda", "zo-sgdmsa"])
def test_direction_counts_are_refused_with_an_estimator_but_radii_reach_it(name: str) -> None:
    """q1/q2 only size the default estimators: refused with estimator=; mu1/mu2 reach any estimator."""
    problem = NCSC(d1=4, d2=3, kappa=10, seed=0)
    bads: list[dict[str, Any]] = [{"q1": 5}, {"q2": 5}, {"q1": 5, "q2": 6}]
    for bad in bads:
        with pytest.raises(InvalidInputError, match=r"only configure.*default estimator.*estimator_params"):
            minimize(problem, name, estimator="gaussian", rng=0, max_iter=2, **bad)
    est = _RecordingEstimator()
    res = minimize(problem, name, estimator=est, rng=0, max_iter=2, mu1=0.03, mu2=0.02, check_concavity=False)
    assert res.nit == 2 and est.radii and set(est.radii) == {0.03, 0.02}
    # without estimator=, q1 still sizes the default estimate: (q1 + 1) rows per component
    one = minimize(problem, name, rng=0, max_iter=1, q1=5, q2=2, check_concavity=False, steps="paper")
    two = minimize(problem, name, rng=0, max_iter=1, q1=7, q2=2, check_concavity=False, steps="paper")
    assert two.nfev_by_purpose["estimate"] > one.nfev_by_purpose["estimate"]
