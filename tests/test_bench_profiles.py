"""Profile math of zoframe_bench on a hand-made table with known answers (Moré & Wild 2009)."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import pytest

from zoframe_bench.profiles import (
    ECDF_TAUS,
    ProfileTable,
    data_profile,
    ecdf,
    first_hit,
    performance_profile,
    solve_times,
)

Arr = npt.NDArray[np.float64]


def _h(calls: list[float], fun: list[float], viol: list[float] | None = None) -> tuple[Arr, Arr, Arr]:
    v = [0.0] * len(calls) if viol is None else viol
    return np.array(calls, np.float64), np.array(fun, np.float64), np.array(v, np.float64)


def _table() -> ProfileTable:
    # problem A: f0 = 1, f_L = 0, d = 1, n + m = 1
    # problem B: f0 = 2, f_L = 1, d = 3, n + m = 2; s1 reaches f = 0.5 only at an infeasible point
    return ProfileTable(
        problems=["A", "B"],
        solvers=["s1", "s2"],
        histories=[
            [_h([0, 10, 20], [1.0, 0.05, 0.0005]), _h([0, 5, 40], [1.0, 0.5, 0.0])],
            [_h([0, 6], [2.0, 0.5], [0.0, 1.0]), _h([0, 8], [2.0, 1.0])],
        ],
        f0=[1.0, 2.0],
        f_low=[0.0, 1.0],
        dim=[1, 3],
        unit=[1, 2],
    )


def test_solve_times_follow_the_convergence_test() -> None:
    t = solve_times(_table(), 0.1, feasibility_tol=1e-3)
    assert t.tolist() == [[10.0, 40.0], [math.inf, 8.0]]  # s1 on B: its only low point is infeasible
    t3 = solve_times(_table(), 1e-3, feasibility_tol=1e-3)
    assert t3.tolist() == [[20.0, 40.0], [math.inf, 8.0]]
    loose = solve_times(_table(), 0.1, feasibility_tol=2.0)  # now the infeasible point counts
    assert loose[1, 0] == 6.0


def test_performance_profile_known_values() -> None:
    t = solve_times(_table(), 0.1, feasibility_tol=1e-3)
    rho = performance_profile(t, np.array([1.0, 2.0, 4.0, 100.0]))
    # ratios: A -> s1 1, s2 4; B -> s1 inf, s2 1
    assert rho[:, 0].tolist() == [0.5, 0.5, 0.5, 0.5]
    assert rho[:, 1].tolist() == [0.5, 0.5, 1.0, 1.0]


def test_data_profile_known_values_in_both_units() -> None:
    tab = _table()
    t = solve_times(tab, 0.1, feasibility_tol=1e-3)
    # raw: t / (d + 1) = A: s1 5, s2 20; B: s2 2
    d = data_profile(t, tab.dim, np.array([1.9, 2.0, 5.0, 20.0]))
    assert d[:, 0].tolist() == [0.0, 0.0, 0.5, 0.5]
    assert d[:, 1].tolist() == [0.0, 0.5, 0.5, 1.0]
    # full-evaluation equivalents: B's time 8 raw = 4 full, 4 / (3 + 1) = 1
    full = data_profile(t / tab.unit[:, None], tab.dim, np.array([0.99, 1.0]))
    assert full[:, 1].tolist() == [0.0, 0.5]


def test_performance_profile_counts_a_solve_at_x0_as_one_evaluation() -> None:
    t = np.array([[0.0, 3.0]])
    rho = performance_profile(t, np.array([1.0, 3.0]))
    assert rho[:, 0].tolist() == [1.0, 1.0] and rho[:, 1].tolist() == [0.0, 1.0]


def test_ecdf_is_monotone_and_reaches_the_solved_fraction() -> None:
    tab = _table()
    budgets = np.geomspace(0.1, 100.0, 30)
    frac = ecdf(tab, budgets, 1e-3, "raw")
    assert np.all(np.diff(frac, axis=0) >= 0)
    # s2 ends at f_L on both problems: every target solved; s1 never solves B
    assert frac[-1, 1] == 1.0
    a_targets = sum(1 for tau in ECDF_TAUS if 0.0005 <= tau)  # s1's best on A is 5e-4 (f0 - f_L = 1)
    assert frac[-1, 0] == pytest.approx(a_targets / (2 * len(ECDF_TAUS)))


def test_first_hit() -> None:
    calls, fun, viol = _h([0, 3, 7], [5.0, 1.0, 0.5], [0.0, 0.5, 0.0])
    assert first_hit(calls, fun, viol, 1.0, 1e-3) == 7.0
    assert first_hit(calls, fun, viol, 1.0, 1.0) == 3.0
    assert first_hit(calls, fun, viol, 0.1, 1.0) == math.inf
