"""Full passes over all m constraints in blocks: the KKT and penalty reports and the trace measures.

Up to one block (``m <= block``) ``kkt_report``, ``penalty_report`` and ``constrained_measures``
compute what they computed before they were blocked, bit for bit (the reference implementations
below are the previous code, verbatim). With a small ``block`` forcing many blocks they go through
:func:`zoframe.measures.max_violation_full`: ``max_violation``, the counts, the nearly active set,
the support and the simplex threshold are exact, the fitted multipliers are those of the same NNLS
problem, and the sums (``eps1``, ``eps2``, ``eps3``, ``g``, ``mean_violation``) agree up to the order
of summation. The memory tests bound the traced peak of a report on ~4e6 constraints.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
import tracemalloc
from typing import Any

import numpy as np
import pytest

from zoframe.errors import BudgetExhausted, InvalidInputError, ShapeError
from zoframe.measures import kkt_residuals
from zoframe.observers.trace import MonitorBudget
from zoframe.oracle import CountingOracle
from zoframe.problems import constrained_measures
from zoframe.sets import project_simplex
from zoframe_constrained.problems import pairwise
from zoframe_verify.checks import (
    KKTReport,
    _constraint_grads,
    _prefix_threshold,
    _sparse_simplex_threshold,
    constraint_values,
    kkt_report,
    objective_gradient,
    objective_value,
    penalty_report,
)
from zoframe_verify.problems import KKTQP


# ---------------------------------------------------------------- the previous (unblocked) code
def _old_kkt(problem: Any, x: Any, multipliers: Any = None, active_tol: float = 1e-6, max_active: int | None = 10000) -> Any:
    xv = np.asarray(x, dtype=np.float64)
    g0, _ = objective_gradient(problem, xv)
    fv = constraint_values(problem, xv)
    cgrads, _ = _constraint_grads(problem, xv)
    return kkt_residuals(g0, fv, cgrads, multipliers, active_tol=active_tol, max_active=max_active)


def _old_penalty(problem: Any, x: Any, beta: float, lam: float) -> tuple[float, float, int]:
    xv = np.asarray(x, dtype=np.float64)
    g0, _ = objective_gradient(problem, xv)
    fv = constraint_values(problem, xv)
    phi = np.maximum(fv, 0.0) ** 2
    p = project_simplex(beta * phi / lam)
    support = np.flatnonzero((p > 0) & (phi > 0)).astype(np.intp)
    grad = g0.copy()
    if support.size:
        cgrads, _ = _constraint_grads(problem, xv)
        weights = beta * p[support] * 2.0 * np.maximum(fv[support], 0.0)
        grad += cgrads(support).T @ weights
    g = objective_value(problem, xv) + beta * float(p @ phi) - 0.5 * lam * float(p @ p)
    return float(np.linalg.norm(grad)), g, int(support.size)


def _old_measures(x: Any, monitor: Any, violation_tol: float) -> dict[str, float]:
    g = monitor.constraints(x)[0]
    viol = np.maximum(g, 0.0)
    return {
        "fun": float(monitor.objective(x).mean()),
        "max_violation": float(viol.max()),
        "mean_violation": float(viol.mean()),
        "frac_violated": float(np.mean(g > violation_tol)),
    }


# ---------------------------------------------------------------- problems and points
@pytest.fixture(scope="module")
def prob() -> Any:
    return pairwise("gen", n_samples=240, seed=3)  # about 60 x 60 = 3,600 pair constraints


def _points(prob: Any) -> list[np.ndarray]:
    d = prob.X_pos.mean(axis=0) - prob.X_neg.mean(axis=0)
    rng = np.random.default_rng(0)
    return [
        0.3 * rng.standard_normal(prob.dim),  # about half violated
        2.0 * d / np.linalg.norm(d),  # a few violated
        np.zeros(prob.dim),  # all f_j = 0: every constraint nearly active, none violated
    ]


def _same_kkt(rep: KKTReport, old: Any) -> None:
    assert (rep.eps1, rep.eps2, rep.eps3, rep.max_violation) == (old.eps1, old.eps2, old.eps3, old.max_violation)
    assert rep.n_active == old.active.size
    assert np.array_equal(rep.multipliers, old.multipliers)
    assert np.array_equal(rep.support, np.flatnonzero(old.multipliers > 0))


def _close_kkt(rep: KKTReport, old: Any) -> None:
    assert rep.max_violation == old.max_violation  # a max: exact in any order
    assert rep.n_active == old.active.size
    assert np.array_equal(rep.support, np.flatnonzero(old.multipliers > 0))
    np.testing.assert_allclose(rep.multipliers, old.multipliers, rtol=1e-9, atol=1e-12)
    for name in ("eps1", "eps2", "eps3"):
        assert getattr(rep, name) == pytest.approx(getattr(old, name), rel=1e-9, abs=1e-12), name


# ---------------------------------------------------------------- kkt_report
@pytest.mark.parametrize("max_active", [10000, 40, 0, None])
def test_kkt_report_is_unchanged_up_to_one_block_and_close_in_many(prob: Any, max_active: int | None) -> None:
    for x in _points(prob):
        old = _old_kkt(prob, x, max_active=max_active)
        _same_kkt(kkt_report(prob, x, max_active=max_active), old)  # m <= the default block: bit for bit
        _same_kkt(kkt_report(prob, x, max_active=max_active, block=prob.m), old)
        for block in (97, 1000, prob.m - 1):
            _close_kkt(kkt_report(prob, x, max_active=max_active, block=block), old)


def test_kkt_report_given_multipliers_in_blocks(prob: Any) -> None:
    x = _points(prob)[0]
    rng = np.random.default_rng(1)
    alpha = np.where(rng.random(prob.m) < 0.05, rng.random(prob.m), 0.0)
    old = _old_kkt(prob, x, multipliers=alpha)
    _same_kkt(kkt_report(prob, x, multipliers=alpha), old)
    for block in (97, 1000):
        rep = kkt_report(prob, x, multipliers=alpha, block=block)
        _close_kkt(rep, old)
        assert rep.multipliers_source == "reference"
    # the same multipliers given at their indices only
    ids = np.flatnonzero(alpha)[::-1].copy()
    for block in (97, 1 << 20):
        rep = kkt_report(prob, x, multipliers=alpha[ids], multiplier_indices=ids, block=block)
        _close_kkt(rep, old)
        assert np.array_equal(rep.multipliers, alpha)
    with pytest.raises(ShapeError):
        kkt_report(prob, x, multipliers=alpha[:10], block=97)
    with pytest.raises(ShapeError):
        kkt_report(prob, x, multipliers=np.ones(2), multiplier_indices=np.array([0, prob.m]), block=97)
    with pytest.raises(InvalidInputError):
        kkt_report(prob, x, multipliers=-alpha - 1.0, block=97)
    with pytest.raises(InvalidInputError):
        kkt_report(prob, x, block=0)
    with pytest.raises(InvalidInputError):
        kkt_report(prob, x, max_active=-1)


def test_kkt_report_of_a_black_box_and_of_a_reference(prob: Any) -> None:
    """Central differences (no constraint gradients) and a cvxpy-free closed-form reference (box QP)."""

    class BlackBox:
        kind = "constrained"

        def __init__(self, inner: Any) -> None:
            self.inner, self.dim, self.m, self.n = inner, inner.dim, inner.m, inner.n

        def components(self, X: Any, idx: Any) -> Any:
            return self.inner.components(X, idx)

        def constraints(self, X: Any, idx: Any) -> Any:
            return self.inner.constraints(X, idx)

    box = BlackBox(pairwise("gen", n_samples=120, seed=1))
    x = 0.2 * np.random.default_rng(2).standard_normal(box.dim)
    old = _old_kkt(box, x, max_active=30)
    _same_kkt(kkt_report(box, x, max_active=30), old)
    _close_kkt(kkt_report(box, x, max_active=30, block=50), old)
    qp = KKTQP(dim=12, m=9, seed=3, constraints_kind="box")
    known = qp.known_solution()
    for block in (1 << 20, 2):
        rep = kkt_report(qp, known["x"], multipliers=known["multipliers"], multipliers_source="known", block=block)
        assert max(rep.eps1, rep.eps2, rep.eps3) < 1e-12 and rep.n_active == np.count_nonzero(known["multipliers"])
        assert rep.multipliers_source == "known"


def test_kkt_report_serial_and_on_threads_are_identical(prob: Any) -> None:
    x = _points(prob)[0]
    serial = kkt_report(prob, x, block=101, max_active=50)
    with ThreadPoolExecutor(2) as ex:
        pooled = kkt_report(prob, x, block=101, max_active=50, executor=ex)
    assert (serial.eps1, serial.eps2, serial.eps3, serial.max_violation) == (pooled.eps1, pooled.eps2, pooled.eps3, pooled.max_violation)
    assert np.array_equal(serial.support, pooled.support) and np.array_equal(serial.support_multipliers, pooled.support_multipliers)


# ---------------------------------------------------------------- penalty_report
@pytest.mark.parametrize(("beta", "lam"), [(10.0, 0.1), (1.0, 1e6), (2.0, 200.0)])
def test_penalty_report_is_unchanged_up_to_one_block_and_close_in_many(prob: Any, beta: float, lam: float) -> None:
    """(1, 1e6): the violations sum below 1, so every one of the m entries of p* is positive."""
    for x in _points(prob):
        norm, g, n_support = _old_penalty(prob, x, beta, lam)
        rep = penalty_report(prob, x, beta=beta, lam=lam)
        assert (rep.grad_g_norm, rep.g, rep.n_support) == (norm, g, n_support)
        for block in (97, prob.m - 1):
            rep = penalty_report(prob, x, beta=beta, lam=lam, block=block)
            assert rep.n_support == n_support
            assert rep.grad_g_norm == pytest.approx(norm, rel=1e-9) and rep.g == pytest.approx(g, rel=1e-12)
        serial = penalty_report(prob, x, beta=beta, lam=lam, block=97)
        with ThreadPoolExecutor(2) as ex:
            pooled = penalty_report(prob, x, beta=beta, lam=lam, block=97, executor=ex)
        assert (pooled.grad_g_norm, pooled.g, pooled.n_support) == (serial.grad_g_norm, serial.g, serial.n_support)


@pytest.mark.parametrize("keep", [1, 20, 300])
def test_penalty_report_from_the_largest_violations_only(prob: Any, keep: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fewer kept than violated: the threshold from the largest alone, or a second pass when they do not decide it."""
    import zoframe_verify.checks as checks

    monkeypatch.setattr(checks, "PENALTY_TOP", keep)
    x = _points(prob)[0]
    assert np.count_nonzero(prob.constraints(x[None, :], np.arange(prob.m)) > 0) > 300
    for beta, lam in [(10.0, 0.1), (1.0, 1e6), (2.0, 200.0), (1.0, 1.0)]:
        norm, g, n_support = _old_penalty(prob, x, beta, lam)
        rep = penalty_report(prob, x, beta=beta, lam=lam, block=97)
        assert rep.n_support == n_support
        assert rep.grad_g_norm == pytest.approx(norm, rel=1e-9) and rep.g == pytest.approx(g, rel=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_the_prefix_threshold_is_the_projections_bit_for_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    decided = 0
    for scale in (0.01, 1.0, 100.0, 1e4):
        u = scale * rng.random(500) ** 4
        u[rng.random(500) < 0.3] = 0.0
        p = project_simplex(u)
        top = -np.sort(-u)
        for k in (1, 5, 50, 499):
            theta = _prefix_threshold(top[:k])
            if theta is not None:
                decided += 1
                assert np.array_equal(np.maximum(u - theta, 0.0), p)
                assert np.count_nonzero(p) < k
            else:
                assert np.count_nonzero(p) >= k
    assert decided > 0


@pytest.mark.parametrize("seed", range(6))
def test_the_sparse_simplex_threshold_is_the_projections_bit_for_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for zeros in (0, 1, 5, 1000):
        for scale in (1e-4, 0.01, 1.0, 100.0):
            k = int(rng.integers(0, 40))
            if k == 0 and zeros == 0:
                continue
            v = scale * rng.random(k) ** 3
            if k > 3:
                v[1] = v[2]  # a tie
            u = np.concatenate([v, np.zeros(zeros)])[rng.permutation(k + zeros)]
            theta = _sparse_simplex_threshold(v, zeros)
            p = project_simplex(u)
            assert np.array_equal(np.maximum(u - theta, 0.0), p)


# ---------------------------------------------------------------- constrained_measures (traces)
def _oracle(problem: Any) -> CountingOracle:
    return CountingOracle(problem)


def test_constrained_measures_unchanged_up_to_one_block_and_close_in_many(prob: Any) -> None:
    for x in _points(prob):
        for tol in (0.0, 1e-3):
            a, b = _oracle(prob), _oracle(prob)
            old = _old_measures(x, a.monitor, tol)
            assert constrained_measures(x, b.monitor, tol) == old  # bit for bit
            assert a.calls_by_purpose == b.calls_by_purpose and a.user_calls == b.user_calls == 2
            c = _oracle(prob)
            new = constrained_measures(x, c.monitor, tol, block=97)
            assert c.calls_by_purpose["monitor"] == prob.m + prob.n and c.calls == 0  # the same m + n
            assert c.user_calls == -(-prob.m // 97) + 1  # one call per block, one for the objective
            assert new["fun"] == old["fun"] and new["max_violation"] == old["max_violation"]
            assert new["frac_violated"] == old["frac_violated"]  # count / m, the same division
            assert new["mean_violation"] == pytest.approx(old["mean_violation"], rel=1e-12, abs=0.0)


def test_constrained_measures_blocked_refuse_before_running_under_a_monitor_budget(prob: Any) -> None:
    x = _points(prob)[0]
    oracle = _oracle(prob)
    budget = MonitorBudget(oracle, max_calls=10**9)
    budget.allowance = prob.m - 1  # not enough for the pass
    with pytest.raises(BudgetExhausted):
        constrained_measures(x, budget, 0.0, block=97)
    assert budget.spent == 0 and oracle.user_calls == 0
    budget.allowance = prob.m + prob.n
    constrained_measures(x, budget, 0.0, block=97)
    assert budget.spent == prob.m + prob.n and budget.allowance == 0


# ---------------------------------------------------------------- bounded memory
BIG_BLOCK = 1 << 18
#: traced peak allowed for one report on ~4e6 constraints. The unblocked code held all m values
#: (32 MB each) several times: kkt_report peaked at 122 MB and penalty_report at 248 MB (measured
#: with block > m, which takes that code); blocked they peak at about 30 MB (kkt: 25 MB of it is the
#: NNLS over 10,000 active constraints, independent of m) and 8 MB.
PEAK_BOUND = 64 * 2**20


@pytest.fixture(scope="module")
def big() -> Any:
    return pairwise("gen", n_samples=8000, seed=0)  # 2038 x 1962 = 3,998,556 pairs, never materialised


def _traced_peak(fn: Any) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _big_point(big: Any) -> np.ndarray:
    d = big.X_pos.mean(axis=0) - big.X_neg.mean(axis=0)
    out: np.ndarray = 2.0 * d / np.linalg.norm(d)
    return out


def test_kkt_report_on_4e6_constraints_stays_under_the_bound(big: Any) -> None:
    assert big.m > 3_900_000
    x = _big_point(big)
    rep, peak = _traced_peak(lambda: kkt_report(big, x, block=BIG_BLOCK))
    assert peak < PEAK_BOUND, peak / 2**20
    assert rep.n_active == 10000 and rep.eps2 > 0 and rep.max_violation > 0


def test_penalty_report_on_4e6_constraints_stays_under_the_bound(big: Any) -> None:
    x = _big_point(big)
    rep, peak = _traced_peak(lambda: penalty_report(big, x, beta=10.0, lam=0.1, block=BIG_BLOCK))
    assert peak < PEAK_BOUND, peak / 2**20
    assert rep.n_support >= 1


def test_constrained_measures_on_4e6_constraints_stays_under_the_bound(big: Any) -> None:
    """The old trace measure held the m values, their positive parts and the mask: over 64 MB."""
    x = _big_point(big)
    oracle = _oracle(big)
    out, peak = _traced_peak(lambda: constrained_measures(x, oracle.monitor, 0.0, block=BIG_BLOCK))
    assert peak < 16 * 2**20, peak / 2**20
    assert oracle.calls_by_purpose["monitor"] == big.m + big.n
    assert 0 < out["frac_violated"] < 0.1


def test_the_bounds_fail_on_the_unblocked_path(big: Any) -> None:
    """The same calls with a block larger than m (all m values at once, the code before) break the bounds."""
    x = _big_point(big)
    _, peak = _traced_peak(lambda: kkt_report(big, x, block=big.m + 1))
    assert peak > PEAK_BOUND, peak / 2**20
    oracle = _oracle(big)
    _, peak = _traced_peak(lambda: constrained_measures(x, oracle.monitor, 0.0, block=big.m + 1))
    assert peak > 16 * 2**20, peak / 2**20
